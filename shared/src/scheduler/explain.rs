//! Decisions and their explanations. While scheduling, a decision keeps one compact record
//! per node it evaluated (numbers, enums, an index into a shared table of node infos); the
//! words people read, per filter and per score, are made here, on request.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::model::{Labels, NodeResources};
use crate::quantity::{format_cpu, format_memory};
use crate::readiness::Readiness;
use crate::usage::percent;

use super::cache::{Footprint, NodeInfo, Usage};
use super::plugins::{Failure, FilterPlugin, HostPort, ScorePlugin, first_selector_mismatch, reasons};
use super::profile::Profile;
use super::queue::QueueStatus;

/// One evaluated node, as scheduling left it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeRecord {
    /// Index into the decision's node table.
    pub pos: u32,
    pub failure: Option<Failure>,
    /// What the pods already counted on the node requested, before this pod.
    pub usage: Usage,
    /// Pods of the same owner already on the node.
    pub spread_count: u32,
    /// Raw scores, indexed by `ScorePlugin as usize`; meaningful for active plugins of feasible nodes.
    pub scores: [u8; 4],
    pub total: u64,
}

/// The pod, as much of it as the explanation needs.
#[derive(Debug, Clone)]
pub(crate) struct PodSummary {
    pub key: String,
    pub footprint: Footprint,
    pub node_selector: Labels,
    /// Who the pod's siblings are for Spread, in words.
    pub owner: Option<String>,
}

/// The outcome of [`super::Scheduler::schedule`]: the node chosen, if any, and every
/// evaluated node's verdict. The scheduler does not reserve anything until `assume`.
#[derive(Debug, Clone)]
pub struct Decision {
    pub(crate) pod: PodSummary,
    pub(crate) profile: Arc<Profile>,
    pub(crate) nodes: Arc<Vec<Arc<NodeInfo>>>,
    pub(crate) records: Vec<NodeRecord>,
    /// Index into `records`.
    pub(crate) selected: Option<usize>,
    pub(crate) feasible: usize,
    pub(crate) nodes_to_find: usize,
    pub(crate) start_index: usize,
}

impl Decision {
    /// The chosen node's name; `None` when no node fits.
    pub fn selected(&self) -> Option<&str> {
        self.selected.map(|i| self.info(&self.records[i]).name.as_str())
    }

    pub fn is_scheduled(&self) -> bool {
        self.selected.is_some()
    }

    /// `namespace/name` of the pod decided on.
    pub fn pod(&self) -> &str {
        &self.pod.key
    }

    pub fn total_nodes(&self) -> usize {
        self.nodes.len()
    }

    pub fn nodes_evaluated(&self) -> usize {
        self.records.len()
    }

    pub fn feasible_nodes(&self) -> usize {
        self.feasible
    }

    pub fn nodes_to_find(&self) -> usize {
        self.nodes_to_find
    }

    pub fn start_index(&self) -> usize {
        self.start_index
    }

    /// The winning node's weighted total.
    pub fn score(&self) -> Option<u64> {
        self.selected.map(|i| self.records[i].total)
    }

    fn info(&self, record: &NodeRecord) -> &NodeInfo {
        &self.nodes[record.pos as usize]
    }

    /// Kubernetes' reason histogram: how many nodes failed for each reason, as
    /// `(reason, count)` in the order the message lists them.
    pub fn reasons(&self) -> Vec<(String, usize)> {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for record in &self.records {
            if let Some(failure) = record.failure {
                for reason in short_reasons(failure, self.info(record)) {
                    match counts.iter_mut().find(|(r, _)| *r == reason) {
                        Some((_, n)) => *n += 1,
                        None => counts.push((reason, 1)),
                    }
                }
            }
        }
        // Kubernetes formats each entry as "<count> <reason>" and sorts those strings.
        crate::sort::by_cached_key(&mut counts, |(reason, n)| format!("{n} {reason}"));
        counts
    }

    /// For a pod no node fits, the message Kubernetes gives:
    /// `0/3 nodes are available: 1 Insufficient memory, 2 node(s) didn't match node selector.`
    /// The entries are the strings `<count> <reason>`, sorted as strings, as kube-scheduler
    /// sorts them (so `10 …` comes before `2 …`). `None` when a node was selected.
    pub fn unschedulable_message(&self) -> Option<String> {
        if self.selected.is_some() {
            return None;
        }
        if self.nodes.is_empty() {
            return Some(format!("0/0 nodes are available: {}.", reasons::NO_NODES));
        }
        let entries: Vec<String> = self.reasons().into_iter().map(|(reason, n)| format!("{n} {reason}")).collect();
        Some(format!("0/{} nodes are available: {}.", self.nodes.len(), entries.join(", ")))
    }

    /// Every evaluated node's filters and scores, in words.
    pub fn explain(&self) -> Explanation {
        let weights = self.profile.weights;
        let max_spread = self.records.iter().filter(|r| r.failure.is_none()).map(|r| r.spread_count).max().unwrap_or(0);
        let nodes = self
            .records
            .iter()
            .enumerate()
            .map(|(i, record)| {
                let info = self.info(record);
                let failed = record.failure.map(|f| f.plugin());
                let filters = FilterPlugin::ALL
                    .into_iter()
                    .map(|plugin| match (record.failure, failed) {
                        (Some(failure), Some(at)) if at == plugin => FilterVerdict {
                            filter: plugin.name().to_string(),
                            verdict: Verdict::Failed,
                            reason: short_reasons(failure, info).join(", "),
                            detail: failure_detail(failure, &self.pod, info, &record.usage, &self.profile),
                        },
                        (Some(_), Some(at)) if at < plugin => FilterVerdict {
                            filter: plugin.name().to_string(),
                            verdict: Verdict::Skipped,
                            reason: String::new(),
                            detail: format!("not run: {} failed first", at.name()),
                        },
                        _ => FilterVerdict {
                            filter: plugin.name().to_string(),
                            verdict: Verdict::Passed,
                            reason: String::new(),
                            detail: passed_detail(plugin, &self.pod, info, &record.usage, &self.profile),
                        },
                    })
                    .collect();
                let (scores, total) = if record.failure.is_none() {
                    let scores = weights
                        .active()
                        .map(|(plugin, weight)| {
                            let raw = record.scores[plugin as usize] as u32;
                            ScoreEntry {
                                plugin: plugin.name().to_string(),
                                raw,
                                weight,
                                weighted: raw as u64 * weight as u64,
                                detail: score_detail(plugin, &self.pod, info, record, max_spread),
                            }
                        })
                        .collect();
                    (scores, Some(record.total))
                } else {
                    (Vec::new(), None)
                };
                NodeExplanation {
                    node: info.name.clone(),
                    feasible: record.failure.is_none(),
                    filters,
                    scores,
                    total,
                    selected: self.selected == Some(i),
                }
            })
            .collect();
        let message = match (self.selected(), self.score()) {
            (Some(node), Some(score)) => format!(
                "Successfully assigned {} to {node} (score {score}; {} of {} evaluated nodes feasible)",
                self.pod.key,
                self.feasible,
                self.records.len()
            ),
            _ => self.unschedulable_message().unwrap_or_default(),
        };
        Explanation {
            pod: self.pod.key.clone(),
            profile: self.profile.name.clone(),
            total_nodes: self.nodes.len(),
            nodes_evaluated: self.records.len(),
            feasible_nodes: self.feasible,
            nodes_to_find: self.nodes_to_find,
            start_index: self.start_index,
            selected: self.selected().map(str::to_string),
            message,
            nodes,
            queue: None,
        }
    }
}

/// A decision in words: what `GET …/pods/{name}/scheduling` answers, what the dashboard
/// and `sheepctl describe` show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Explanation {
    /// `namespace/name`.
    pub pod: String,
    pub profile: String,
    pub total_nodes: usize,
    pub nodes_evaluated: usize,
    pub feasible_nodes: usize,
    /// How many feasible nodes the scheduler looked for before it stopped filtering.
    pub nodes_to_find: usize,
    /// Where in the name-ordered node list evaluation began.
    pub start_index: usize,
    pub selected: Option<String>,
    /// `Successfully assigned default/web to node-2 (…)`, or Kubernetes' unschedulable message.
    pub message: String,
    /// Every evaluated node, in evaluation order.
    pub nodes: Vec<NodeExplanation>,
    /// Where the pod waits in the scheduling queue now, when it still waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct NodeExplanation {
    pub node: String,
    pub feasible: bool,
    /// Every filter, in the order they run.
    pub filters: Vec<FilterVerdict>,
    /// The profile's score plugins (feasible nodes only).
    pub scores: Vec<ScoreEntry>,
    /// The weighted sum (feasible nodes only).
    pub total: Option<u64>,
    pub selected: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum Verdict {
    Passed,
    Failed,
    /// Not run because an earlier filter already failed.
    Skipped,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FilterVerdict {
    pub filter: String,
    pub verdict: Verdict,
    /// Kubernetes' words when it failed (`Insufficient cpu`), empty otherwise.
    pub reason: String,
    /// The same with the numbers: what the pod asks and what the node has.
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ScoreEntry {
    pub plugin: String,
    /// 0..=100.
    pub raw: u32,
    pub weight: u32,
    pub weighted: u64,
    pub detail: String,
}

fn short_reasons(failure: Failure, info: &NodeInfo) -> Vec<String> {
    match failure {
        Failure::NotReady(_) => vec![reasons::NOT_READY.to_string()],
        Failure::Cordoned => vec![reasons::UNSCHEDULABLE.to_string()],
        Failure::SelectorMismatch => vec![reasons::SELECTOR_MISMATCH.to_string()],
        Failure::UntoleratedTaint { index } => {
            let taint = &info.taints[index as usize];
            vec![reasons::untolerated_taint(&taint.key, &taint.value)]
        }
        Failure::Insufficient { cpu, memory } => {
            let mut out = Vec::new();
            if cpu {
                out.push(reasons::INSUFFICIENT_CPU.to_string());
            }
            if memory {
                out.push(reasons::INSUFFICIENT_MEMORY.to_string());
            }
            out
        }
        Failure::TooManyPods => vec![reasons::TOO_MANY_PODS.to_string()],
        Failure::PortConflict { .. } => vec![reasons::PORTS.to_string()],
    }
}

fn failure_detail(failure: Failure, pod: &PodSummary, info: &NodeInfo, usage: &Usage, profile: &Profile) -> String {
    let alloc = info.allocatable;
    match failure {
        Failure::NotReady(readiness) => readiness.explain(profile.node_monitor_grace),
        Failure::Cordoned => "the node is cordoned: it takes no new pods".to_string(),
        Failure::SelectorMismatch => match first_selector_mismatch(&pod.node_selector, &info.labels) {
            Some((key, want)) => match info.labels.get(key) {
                Some(has) => format!("the pod wants {key}={want}; the node has {key}={has}"),
                None => format!("the pod wants {key}={want}; the node has no label {key}"),
            },
            None => "the node's labels do not match the pod's node selector".to_string(),
        },
        Failure::UntoleratedTaint { index } => {
            let t = &info.taints[index as usize];
            format!("taint {}={}:{} is not tolerated by the pod", t.key, t.value, t.effect)
        }
        Failure::Insufficient { .. } | Failure::TooManyPods | Failure::PortConflict { .. } => {
            room_detail(failure, &pod.footprint, usage, &alloc)
        }
    }
}

/// The words for a failure of the room check (see `super::room`).
pub(crate) fn room_detail(failure: Failure, footprint: &Footprint, usage: &Usage, alloc: &NodeResources) -> String {
    match failure {
        Failure::Insufficient { cpu, memory } => {
            let mut parts = Vec::new();
            if cpu {
                parts.push(format!(
                    "the pod requests cpu {}; {} of {} already requested, {} free",
                    format_cpu(footprint.requests.cpu),
                    format_cpu(usage.requested.cpu),
                    format_cpu(alloc.cpu),
                    format_cpu(alloc.cpu.saturating_sub(usage.requested.cpu).max(0))
                ));
            }
            if memory {
                parts.push(format!(
                    "the pod requests memory {}; {} of {} already requested, {} free",
                    format_memory(footprint.requests.memory),
                    format_memory(usage.requested.memory),
                    format_memory(alloc.memory),
                    format_memory(alloc.memory.saturating_sub(usage.requested.memory).max(0))
                ));
            }
            parts.join("; ")
        }
        Failure::TooManyPods => format!("{} of {} pods already on the node", usage.requested.pods, alloc.pods),
        Failure::PortConflict { port, protocol } => format!("host port {port}/{} is already in use on the node", protocol.as_str()),
        other => format!("{} failed", other.plugin().name()),
    }
}

fn ports_text(ports: &[HostPort]) -> String {
    let ports: Vec<String> = ports.iter().map(|p| format!("{}/{}", p.port, p.protocol.as_str())).collect();
    ports.join(", ")
}

fn passed_detail(plugin: FilterPlugin, pod: &PodSummary, info: &NodeInfo, usage: &Usage, profile: &Profile) -> String {
    let alloc = info.allocatable;
    match plugin {
        FilterPlugin::NodeReady => Readiness::Ready.explain(profile.node_monitor_grace),
        FilterPlugin::NodeUnschedulable => "not cordoned".to_string(),
        FilterPlugin::NodeSelector if pod.node_selector.is_empty() => "the pod has no node selector".to_string(),
        FilterPlugin::NodeSelector => {
            let terms: Vec<String> = pod.node_selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("the node has {}", terms.join(", "))
        }
        FilterPlugin::TaintToleration if info.taints.is_empty() => "no NoSchedule or NoExecute taints".to_string(),
        FilterPlugin::TaintToleration => format!("the pod tolerates all {} NoSchedule/NoExecute taint(s)", info.taints.len()),
        FilterPlugin::NodeResourcesFit => format!(
            "cpu {} + {} of {}, memory {} + {} of {}",
            format_cpu(usage.requested.cpu),
            format_cpu(pod.footprint.requests.cpu),
            format_cpu(alloc.cpu),
            format_memory(usage.requested.memory),
            format_memory(pod.footprint.requests.memory),
            format_memory(alloc.memory)
        ),
        FilterPlugin::PodCount => format!("{} + 1 of {} pods", usage.requested.pods, alloc.pods),
        FilterPlugin::NodePorts if pod.footprint.ports.is_empty() => "the pod asks for no host ports".to_string(),
        FilterPlugin::NodePorts => format!("host port(s) {} free", ports_text(&pod.footprint.ports)),
    }
}

fn score_detail(plugin: ScorePlugin, pod: &PodSummary, info: &NodeInfo, record: &NodeRecord, max_spread: u32) -> String {
    let alloc = info.allocatable;
    let cpu = record.usage.nonzero_cpu + pod.footprint.nonzero_cpu;
    let memory = record.usage.nonzero_memory + pod.footprint.nonzero_memory;
    match plugin {
        ScorePlugin::LeastAllocated => format!(
            "after this pod cpu {} of {} ({}% free), memory {} of {} ({}% free); requests of 0 count as 100m and 200Mi",
            format_cpu(cpu),
            format_cpu(alloc.cpu),
            100 - percent(cpu, alloc.cpu).min(100),
            format_memory(memory),
            format_memory(alloc.memory),
            100 - percent(memory, alloc.memory).min(100)
        ),
        ScorePlugin::MostAllocated => format!(
            "after this pod cpu {} of {} ({}% used), memory {} of {} ({}% used); requests of 0 count as 100m and 200Mi",
            format_cpu(cpu),
            format_cpu(alloc.cpu),
            percent(cpu, alloc.cpu).min(100),
            format_memory(memory),
            format_memory(alloc.memory),
            percent(memory, alloc.memory).min(100)
        ),
        ScorePlugin::BalancedAllocation => format!(
            "after this pod {}% of cpu and {}% of memory requested: the closer the two, the higher",
            percent(record.usage.requested.cpu + pod.footprint.requests.cpu, alloc.cpu).min(100),
            percent(record.usage.requested.memory + pod.footprint.requests.memory, alloc.memory).min(100)
        ),
        ScorePlugin::Spread => match &pod.owner {
            Some(owner) => format!("{} of {owner} already here; the most on any node scored is {max_spread}", record.spread_count),
            None => "the pod has no controller and no labels: every node scores the same".to_string(),
        },
    }
}
