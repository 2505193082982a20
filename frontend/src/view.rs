//! View-model: what the pages show, computed from the cache as plain data. Stage grouping,
//! node pens with their usage, the pod timeline with T+ms deltas, the scheduler's decision
//! table and the plain-words reason a pod is Pending. No yew here, so native tests cover it.

use std::collections::HashMap;
use std::rc::Rc;

use shared::model::{Condition, ContainerState, Event, Kind, Node, Pod, PodPhase, PodStage, Time, conditions, find_condition};
use shared::scheduler::{Explanation, NodeExplanation, Verdict, reasons};
use shared::words::{PendingReason, first_seen, pending_reason as pending};

use crate::sort;
use crate::store::Collection;

/// The order stages are shown in: the seed's path of a pod, then the ends.
pub const STAGES: [PodStage; 7] = [
    PodStage::WaitingForScheduler,
    PodStage::Unschedulable,
    PodStage::WaitingForAgent,
    PodStage::Running,
    PodStage::Succeeded,
    PodStage::Failed,
    PodStage::Unknown,
];

pub fn stage_name(stage: PodStage) -> &'static str {
    match stage {
        PodStage::WaitingForScheduler => "Waiting for scheduler",
        PodStage::Unschedulable => "Unschedulable",
        PodStage::WaitingForAgent => "Waiting for agent",
        PodStage::Running => "Running",
        PodStage::Succeeded => "Succeeded",
        PodStage::Failed => "Failed",
        PodStage::Unknown => "Unknown",
    }
}

/// The `data-stage` value and CSS class suffix of a stage: its Rust name.
pub fn stage_id(stage: PodStage) -> &'static str {
    match stage {
        PodStage::WaitingForScheduler => "WaitingForScheduler",
        PodStage::Unschedulable => "Unschedulable",
        PodStage::WaitingForAgent => "WaitingForAgent",
        PodStage::Running => "Running",
        PodStage::Succeeded => "Succeeded",
        PodStage::Failed => "Failed",
        PodStage::Unknown => "Unknown",
    }
}

/// One line on what a stage means, for legends and tooltips.
pub fn stage_hint(stage: PodStage) -> &'static str {
    match stage {
        PodStage::WaitingForScheduler => "Pending, node_name empty: the scheduler has not placed it yet",
        PodStage::Unschedulable => "Pending, node_name empty: no node fits (PodScheduled=False)",
        PodStage::WaitingForAgent => "Pending, node_name set: the node's agent has not started it yet",
        PodStage::Running => "the agent started its containers",
        PodStage::Succeeded => "every container exited 0 and will not restart",
        PodStage::Failed => "a container failed and will not restart",
        PodStage::Unknown => "the node stopped reporting",
    }
}

/// Does this object live in the selected namespace (`None` = all namespaces)?
pub fn in_namespace(object_namespace: &str, selected: Option<&str>) -> bool {
    selected.is_none_or(|ns| ns == object_namespace)
}

// ---------------------------------------------------------------------------------------------
// Stages and pens

/// Pods per stage, in [`STAGES`] order, each group sorted by namespace/name.
pub fn group_by_stage<'a>(pods: impl IntoIterator<Item = &'a Rc<Pod>>) -> Vec<(PodStage, Vec<Rc<Pod>>)> {
    let mut groups: Vec<(PodStage, Vec<Rc<Pod>>)> = STAGES.iter().map(|&s| (s, Vec::new())).collect();
    for pod in pods {
        let stage = pod.stage();
        let slot = STAGES.iter().position(|&s| s == stage).unwrap_or(STAGES.len() - 1);
        groups[slot].1.push(pod.clone());
    }
    for (_, pods) in &mut groups {
        sort::by_cached_key(pods, |p| p.metadata.key());
    }
    groups
}

/// What the pods on a node request, against what it can give.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub cpu: i64,
    pub cpu_allocatable: i64,
    pub memory: i64,
    pub memory_allocatable: i64,
    pub pods: i64,
    pub pods_allocatable: i64,
}

/// `part` of `whole` in percent, 0..=100 for the bars (an overcommitted node shows full).
pub fn percent(part: i64, whole: i64) -> u32 {
    if whole <= 0 { 0 } else { (part.max(0) as f64 * 100.0 / whole as f64).round().min(100.0) as u32 }
}

/// A node and the pods bound to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pen {
    pub node: Rc<Node>,
    /// Requests of every non-terminal pod on the node, in any namespace.
    pub usage: Usage,
    /// The pods to draw: bound here and in the selected namespace.
    pub pods: Vec<Rc<Pod>>,
}

/// The cluster view: pens, the meadow of pods without a node, and strays bound to a node
/// the cache does not know (deleted, or not listed yet).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Layout {
    pub pens: Vec<Pen>,
    pub meadow: Vec<Rc<Pod>>,
    pub strays: Vec<Rc<Pod>>,
    /// How many shown pods are in each stage, in [`STAGES`] order.
    pub counts: Vec<(PodStage, usize)>,
}

pub fn layout(nodes: &Collection<Node>, pods: &Collection<Pod>, namespace: Option<&str>) -> Layout {
    let mut pens: Vec<Pen> = nodes
        .values()
        .map(|node| Pen {
            node: node.clone(),
            usage: Usage {
                cpu_allocatable: node.status.allocatable.cpu,
                memory_allocatable: node.status.allocatable.memory,
                pods_allocatable: node.status.allocatable.pods,
                ..Usage::default()
            },
            pods: Vec::new(),
        })
        .collect();
    let index: HashMap<&str, usize> = nodes.values().enumerate().map(|(i, n)| (n.metadata.name.as_str(), i)).collect();
    let mut layout = Layout::default();
    let mut counts = [0usize; STAGES.len()];
    for pod in pods.values() {
        let shown = in_namespace(&pod.metadata.namespace, namespace);
        let pen = index.get(pod.spec.node_name.as_str()).copied();
        if let Some(i) = pen
            && !pod.status.phase.is_terminal()
        {
            let requests = pod.spec.requests();
            let usage = &mut pens[i].usage;
            usage.cpu += requests.cpu;
            usage.memory += requests.memory;
            usage.pods += 1;
        }
        if !shown {
            continue;
        }
        let stage = pod.stage();
        counts[STAGES.iter().position(|&s| s == stage).unwrap_or(STAGES.len() - 1)] += 1;
        match pen {
            Some(i) => pens[i].pods.push(pod.clone()),
            None if pod.spec.node_name.is_empty() => layout.meadow.push(pod.clone()),
            None => layout.strays.push(pod.clone()),
        }
    }
    // Oldest first, as the scheduler's queue runs: a new pod joins at the end of its flock,
    // so a burst of creations appends cards instead of shuffling them.
    let by_age = |pods: &mut Vec<Rc<Pod>>| sort::by_cached_key(pods, |p| (p.metadata.created_at, p.metadata.key()));
    by_age(&mut layout.meadow);
    by_age(&mut layout.strays);
    for pen in &mut pens {
        by_age(&mut pen.pods);
    }
    layout.pens = pens;
    layout.counts = STAGES.iter().copied().zip(counts).collect();
    layout
}

// ---------------------------------------------------------------------------------------------
// Time

/// Milliseconds from `from` to `to`.
pub fn millis_between(from: Time, to: Time) -> i64 {
    (to - from).num_milliseconds()
}

/// `T+3600ms`, the seed's notation; seconds past ten seconds, minutes past ten minutes.
pub fn t_plus(ms: i64) -> String {
    if ms < 0 {
        return format!("T{ms}ms");
    }
    if ms < 10_000 {
        format!("T+{ms}ms")
    } else if ms < 600_000 {
        format!("T+{}s", one_decimal((ms + 50) / 100))
    } else {
        format!("T+{}m", ms / 60_000)
    }
}

/// `+1.2s`, the gap since the step before.
pub fn delta(ms: i64) -> String {
    if ms.abs() < 1000 { format!("+{ms}ms") } else { format!("+{}s", one_decimal((ms + ms.signum() * 50) / 100)) }
}

/// Tenths as a number with one decimal, `125` → `12.5`: integer arithmetic, since float
/// formatting (`{:.1}`) would bring its own code into the bundle.
pub fn one_decimal(tenths: i64) -> String {
    format!("{}{}.{}", if tenths < 0 { "-" } else { "" }, tenths.abs() / 10, tenths.abs() % 10)
}

/// `06:21:07.123`, UTC: enough to line up with server logs. Written out by hand: chrono's
/// format strings would add their interpreter to the wasm bundle.
pub fn clock(time: Time) -> String {
    use chrono::Timelike;
    format!("{:02}:{:02}:{:02}.{:03}", time.hour(), time.minute(), time.second(), time.timestamp_subsec_millis())
}

// ---------------------------------------------------------------------------------------------
// Pod detail

/// Events about one pod, oldest first. A recreated pod of the same name has a new uid: its
/// predecessor's events are left out when both carry one.
pub fn pod_events<'a>(pod: &Pod, events: impl IntoIterator<Item = &'a Rc<Event>>) -> Vec<Rc<Event>> {
    let mut out: Vec<Rc<Event>> = events.into_iter().filter(|e| e.involved_object.refers_to(Kind::Pod, &pod.metadata)).cloned().collect();
    sort::by_cached_key(&mut out, |e| (first_seen(e), e.metadata.resource_version));
    out
}

/// The seed's steps of a pod's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Created,
    Scheduled,
    Pulled,
    Started,
    Running,
}

impl Step {
    pub const ALL: [Step; 5] = [Step::Created, Step::Scheduled, Step::Pulled, Step::Started, Step::Running];

    pub fn name(self) -> &'static str {
        match self {
            Step::Created => "Created",
            Step::Scheduled => "Scheduled",
            Step::Pulled => "Pulled",
            Step::Started => "Started",
            Step::Running => "Running",
        }
    }

    /// Who does this step, as the seed tells it.
    pub fn actor(self) -> &'static str {
        match self {
            Step::Created => "API server stores the pod: Pending, node_name \"\"",
            Step::Scheduled => "scheduler binds it to a node",
            Step::Pulled => "agent has the image",
            Step::Started => "agent started the container",
            Step::Running => "agent reports phase Running",
        }
    }
}

/// One row of the timeline table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineRow {
    pub step: Step,
    pub at: Option<Time>,
    /// Since Created.
    pub t_plus_ms: Option<i64>,
    /// Since the previous step that happened.
    pub delta_ms: Option<i64>,
    /// The event's message, or where the time came from.
    pub detail: String,
}

/// Created → Scheduled → Pulled → Started → Running, from the pod and its events.
pub fn timeline(pod: &Pod, events: &[Rc<Event>]) -> Vec<TimelineRow> {
    let first = |reason: &str| events.iter().filter(|e| e.reason == reason).find_map(|e| first_seen(e).map(|t| (t, e.message.clone())));
    let condition_true = |type_: &str| {
        find_condition(&pod.status.conditions, type_)
            .filter(|c| c.status == conditions::TRUE)
            .and_then(|c| c.last_transition_time.map(|t| (t, format!("{type_}=True"))))
    };
    let container_running = || {
        pod.status
            .container_statuses
            .iter()
            .filter_map(|s| match &s.state {
                ContainerState::Running { started_at: Some(t) } => Some(*t),
                _ => None,
            })
            .max()
            .map(|t| (t, "container running".to_string()))
    };
    let running = pod.status.phase != PodPhase::Pending;
    let found = |step: Step| -> Option<(Time, String)> {
        match step {
            Step::Created => pod.metadata.created_at.map(|t| (t, "metadata.created_at".to_string())),
            Step::Scheduled => first("Scheduled").or_else(|| condition_true(conditions::POD_SCHEDULED)),
            Step::Pulled => first("Pulled"),
            Step::Started => first("Started"),
            Step::Running if running => condition_true(conditions::READY)
                .or_else(|| first("Running"))
                .or_else(container_running)
                .or_else(|| pod.status.start_time.map(|t| (t, "status.start_time".to_string()))),
            Step::Running => None,
        }
    };
    let created = pod.metadata.created_at;
    let mut previous: Option<Time> = None;
    Step::ALL
        .iter()
        .map(|&step| {
            let hit = found(step);
            let at = hit.as_ref().map(|(t, _)| *t);
            let row = TimelineRow {
                step,
                at,
                t_plus_ms: at.zip(created).map(|(at, created)| millis_between(created, at)),
                delta_ms: at.zip(previous).map(|(at, prev)| millis_between(prev, at)),
                detail: hit.map(|(_, d)| d).unwrap_or_default(),
            };
            if at.is_some() {
                previous = at;
            }
            row
        })
        .collect()
}

/// What the dashboard knows of a pod's node, for the pending reason: the node, judged by
/// its Ready condition (the dashboard does not watch leases), and the server's grace.
#[derive(Debug, Clone, Copy)]
pub struct NodeAt<'a> {
    pub node: &'a Node,
    pub grace: std::time::Duration,
}

/// Why a Pending pod is not running, in plain words: `shared::words`' reason told at length;
/// `None` once it left Pending.
pub fn pending_reason(pod: &Pod, explanation: Option<&Explanation>, node: Option<NodeAt>) -> Option<String> {
    match pending(pod)? {
        PendingReason::WaitingForScheduler => Some(
            "Waiting for the scheduler: no node has been chosen yet. The API server answered 201 at once; \
             the scheduler places new pods within milliseconds and sweeps every Pending pod without a node every 2 seconds."
                .to_string(),
        ),
        PendingReason::Unschedulable { message } => {
            let mut text = String::from("No node can take this pod right now");
            let reasons = explanation.map(failure_histogram).unwrap_or_default();
            if reasons.is_empty() {
                if message.is_empty() {
                    text.push('.');
                } else {
                    text.push_str(&format!(": {message}"));
                }
            } else {
                let total = explanation.map_or(0, |e| e.nodes_evaluated);
                let parts: Vec<String> = reasons.iter().map(|(reason, n)| format!("{n} {}", plain_reason(reason, *n))).collect();
                text.push_str(&format!(". Of {total} node(s) checked, {}.", parts.join(", ")));
            }
            text.push_str(
                " It stays Pending, and the scheduler tries again when the cluster changes in a way \
                 that could fit it (a node joins, sends a heartbeat after a silence, is uncordoned or grows; \
                 a pod goes away), after its back-off, and at the latest after 5 minutes.",
            );
            if let Some(queue) = explanation.and_then(|e| e.queue.as_ref()) {
                text.push_str(&format!(" Now: {}.", queue.describe()));
            }
            Some(text)
        }
        PendingReason::WaitingForAgent { node: node_name, .. } => {
            let mut text = format!("Scheduled to {node_name}; waiting for that node's agent to pull the image and start the containers.");
            if let Some(NodeAt { node, grace }) = node {
                let readiness = node.reported_readiness();
                if !readiness.is_ready() {
                    text.push_str(&format!(
                        " {node_name} is not Ready ({}): its agent may be down, so the pod waits until it comes back.",
                        readiness.explain(grace)
                    ));
                }
            }
            for status in &pod.status.container_statuses {
                if let ContainerState::Waiting { reason, message } = &status.state
                    && !reason.is_empty()
                {
                    text.push_str(&format!(" Container {}: {reason}", status.name));
                    if !message.is_empty() {
                        text.push_str(&format!(" ({message})"));
                    }
                    text.push('.');
                }
            }
            Some(text)
        }
    }
}

/// How many evaluated nodes failed for each reason, in first-seen order.
pub fn failure_histogram(explanation: &Explanation) -> Vec<(String, usize)> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for node in &explanation.nodes {
        for filter in node.filters.iter().filter(|f| f.verdict == Verdict::Failed) {
            for reason in filter.reason.split(", ").filter(|r| !r.is_empty()) {
                match counts.iter_mut().find(|(r, _)| r == reason) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((reason.to_string(), 1)),
                }
            }
        }
    }
    counts
}

/// Kubernetes' terse reason, as a sentence fragment after a count.
pub fn plain_reason(reason: &str, count: usize) -> String {
    let (is, has, lacks) = if count == 1 { ("is", "has", "does not have") } else { ("are", "have", "do not have") };
    match reason {
        reasons::NOT_READY => format!("{is} not Ready (no recent heartbeat from the agent)"),
        reasons::UNSCHEDULABLE => format!("{is} cordoned"),
        reasons::SELECTOR_MISMATCH => format!("{lacks} the labels the pod's node_selector asks for"),
        reasons::INSUFFICIENT_CPU => format!("{lacks} enough unrequested CPU"),
        reasons::INSUFFICIENT_MEMORY => format!("{lacks} enough unrequested memory"),
        reasons::TOO_MANY_PODS => format!("{is} full (pod limit reached)"),
        reasons::PORTS => format!("already {has} the requested host port in use"),
        other if other.starts_with("node(s) had untolerated taint") => {
            let taint = other.trim_start_matches("node(s) had untolerated taint").trim();
            format!("{has} a taint {taint} the pod does not tolerate")
        }
        other => format!("failed: {other}"),
    }
}

/// Conditions sorted as kubectl lists them: PodScheduled first, then the rest by type.
pub fn sorted_conditions(list: &[Condition]) -> Vec<Condition> {
    let mut out = list.to_vec();
    sort::by_cached_key(&mut out, |c| (c.type_ != conditions::POD_SCHEDULED, c.type_.clone()));
    out
}

// ---------------------------------------------------------------------------------------------
// The decision table

/// One filter's cell: the verdict and the words behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterCell {
    pub verdict: Verdict,
    /// `Insufficient cpu` when failed.
    pub reason: String,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoreCell {
    pub raw: u32,
    pub weight: u32,
    pub weighted: u64,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionRow {
    pub node: String,
    /// 1-based position in the scheduler's evaluation order.
    pub evaluated: usize,
    pub feasible: bool,
    pub selected: bool,
    /// In [`DecisionTable::filters`] order.
    pub filters: Vec<FilterCell>,
    /// In [`DecisionTable::scores`] order; `None` where the node was not scored.
    pub scores: Vec<Option<ScoreCell>>,
    pub total: Option<u64>,
}

/// The scheduler's explanation as a table: a column per filter and per score plugin, a row
/// per evaluated node; the winner first, then feasible nodes by total, then the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionTable {
    pub filters: Vec<String>,
    pub scores: Vec<String>,
    pub rows: Vec<DecisionRow>,
}

pub fn decision_table(explanation: &Explanation) -> DecisionTable {
    let mut filters: Vec<String> = Vec::new();
    let mut scores: Vec<String> = Vec::new();
    for node in &explanation.nodes {
        for f in &node.filters {
            if !filters.contains(&f.filter) {
                filters.push(f.filter.clone());
            }
        }
        for s in &node.scores {
            if !scores.contains(&s.plugin) {
                scores.push(s.plugin.clone());
            }
        }
    }
    let row = |(i, node): (usize, &NodeExplanation)| DecisionRow {
        node: node.node.clone(),
        evaluated: i + 1,
        feasible: node.feasible,
        selected: node.selected,
        filters: filters
            .iter()
            .map(|name| match node.filters.iter().find(|f| &f.filter == name) {
                Some(f) => FilterCell { verdict: f.verdict, reason: f.reason.clone(), detail: f.detail.clone() },
                None => FilterCell { verdict: Verdict::Skipped, reason: String::new(), detail: "not run".to_string() },
            })
            .collect(),
        scores: scores
            .iter()
            .map(|name| {
                node.scores.iter().find(|s| &s.plugin == name).map(|s| ScoreCell {
                    raw: s.raw,
                    weight: s.weight,
                    weighted: s.weighted,
                    detail: s.detail.clone(),
                })
            })
            .collect(),
        total: node.total,
    };
    let mut rows: Vec<DecisionRow> = explanation.nodes.iter().enumerate().map(row).collect();
    sort::by(&mut rows, |a, b| {
        b.selected.cmp(&a.selected).then(b.feasible.cmp(&a.feasible)).then(b.total.cmp(&a.total)).then(a.evaluated.cmp(&b.evaluated))
    });
    DecisionTable { filters, scores, rows }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Cluster, ClusterAction};
    use chrono::{Duration, TimeZone, Utc};
    use shared::api::WatchEvent;
    use shared::model::{
        Container, ContainerStatus, NodeResources, Object, ObjectMeta, ObjectReference, ResourceRequirements, set_condition,
    };
    use shared::scheduler::{FilterVerdict, ScoreEntry};
    use yew::Reducible;

    fn t0() -> Time {
        Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap()
    }

    fn ms(n: i64) -> Time {
        t0() + Duration::milliseconds(n)
    }

    fn pod(ns: &str, name: &str, node: &str, phase: PodPhase, cpu: i64) -> Pod {
        let mut pod = Pod { kind: "Pod".into(), metadata: ObjectMeta::named(ns, name), ..Default::default() };
        pod.metadata.created_at = Some(t0());
        pod.spec.node_name = node.into();
        pod.status.phase = phase;
        pod.spec.containers = vec![Container {
            name: "c".into(),
            image: "minimal".into(),
            resources: ResourceRequirements { cpu, memory: 1 << 20 },
            ..Default::default()
        }];
        pod
    }

    fn node(name: &str, ready: bool) -> Node {
        let mut node = Node { kind: "Node".into(), metadata: ObjectMeta::named("", name), ..Default::default() };
        node.status.allocatable = NodeResources { cpu: 1000, memory: 4 << 20, pods: 10 };
        node.status.conditions =
            vec![Condition { type_: "Ready".into(), status: if ready { "True" } else { "False" }.into(), ..Default::default() }];
        node
    }

    fn event(reason: &str, at: i64, pod: &str, source: &str) -> Rc<Event> {
        Rc::new(Event {
            kind: "Event".into(),
            metadata: ObjectMeta::named("default", &format!("{pod}.{reason}")),
            type_: "Normal".into(),
            reason: reason.into(),
            message: format!("{reason} {pod}"),
            involved_object: ObjectReference { kind: "Pod".into(), namespace: "default".into(), name: pod.into(), uid: String::new() },
            source: source.into(),
            count: 1,
            first_timestamp: Some(ms(at)),
            last_timestamp: Some(ms(at)),
        })
    }

    fn cluster(nodes: Vec<Node>, pods: Vec<Pod>) -> Rc<Cluster> {
        let state: Rc<Cluster> = Rc::default();
        let state = state.reduce(ClusterAction::Listed {
            kind: shared::model::Kind::Node,
            resource_version: 1,
            items: nodes.into_iter().map(Object::Node).collect(),
        });
        state.reduce(ClusterAction::Listed {
            kind: shared::model::Kind::Pod,
            resource_version: 1,
            items: pods.into_iter().map(Object::Pod).collect(),
        })
    }

    #[test]
    fn pods_are_grouped_by_stage_in_the_seeds_order() {
        let mut unschedulable = pod("default", "u", "", PodPhase::Pending, 0);
        set_condition(
            &mut unschedulable.status.conditions,
            Condition { type_: "PodScheduled".into(), status: "False".into(), reason: "Unschedulable".into(), ..Default::default() },
            t0(),
        );
        let pods: Vec<Rc<Pod>> = vec![
            Rc::new(pod("default", "r2", "n1", PodPhase::Running, 0)),
            Rc::new(pod("default", "w", "", PodPhase::Pending, 0)),
            Rc::new(pod("default", "a", "n1", PodPhase::Pending, 0)),
            Rc::new(pod("default", "r1", "n1", PodPhase::Running, 0)),
            Rc::new(unschedulable),
            Rc::new(pod("default", "f", "n1", PodPhase::Failed, 0)),
        ];
        let groups = group_by_stage(&pods);
        let names: Vec<(PodStage, Vec<&str>)> =
            groups.iter().map(|(s, p)| (*s, p.iter().map(|p| p.metadata.name.as_str()).collect())).collect();
        assert_eq!(
            names,
            vec![
                (PodStage::WaitingForScheduler, vec!["w"]),
                (PodStage::Unschedulable, vec!["u"]),
                (PodStage::WaitingForAgent, vec!["a"]),
                (PodStage::Running, vec!["r1", "r2"]),
                (PodStage::Succeeded, vec![]),
                (PodStage::Failed, vec!["f"]),
                (PodStage::Unknown, vec![]),
            ]
        );
    }

    #[test]
    fn layout_puts_pods_in_pens_meadow_and_strays_and_sums_requests_across_namespaces() {
        let state = cluster(
            vec![node("n1", true), node("n2", true)],
            vec![
                pod("default", "a", "n1", PodPhase::Running, 250),
                pod("other", "b", "n1", PodPhase::Running, 500),
                pod("default", "done", "n1", PodPhase::Succeeded, 900),
                pod("default", "c", "", PodPhase::Pending, 100),
                pod("default", "lost", "n9", PodPhase::Running, 100),
            ],
        );
        let view = layout(&state.nodes, &state.pods, Some("default"));
        assert_eq!(view.pens.len(), 2);
        let n1 = &view.pens[0];
        assert_eq!(n1.node.metadata.name, "n1");
        // Requests count every namespace but not finished pods; only "default" pods are drawn.
        assert_eq!((n1.usage.cpu, n1.usage.pods, n1.usage.cpu_allocatable), (750, 2, 1000));
        assert_eq!(percent(n1.usage.cpu, n1.usage.cpu_allocatable), 75);
        let drawn: Vec<&str> = n1.pods.iter().map(|p| p.metadata.name.as_str()).collect();
        assert_eq!(drawn, ["a", "done"]);
        assert_eq!(view.meadow.len(), 1);
        assert_eq!(view.strays[0].metadata.name, "lost");
        let running = view.counts.iter().find(|(s, _)| *s == PodStage::Running).unwrap().1;
        assert_eq!(running, 2);

        let all = layout(&state.nodes, &state.pods, None);
        assert_eq!(all.pens[0].pods.len(), 3);
    }

    #[test]
    fn flocks_are_ordered_oldest_first() {
        let mut young = pod("default", "a-young", "", PodPhase::Pending, 0);
        young.metadata.created_at = Some(ms(500));
        let old = pod("default", "z-old", "", PodPhase::Pending, 0);
        let state = cluster(vec![], vec![young, old]);
        let view = layout(&state.nodes, &state.pods, None);
        let names: Vec<&str> = view.meadow.iter().map(|p| p.metadata.name.as_str()).collect();
        assert_eq!(names, ["z-old", "a-young"]);
    }

    #[test]
    fn a_deleted_pod_leaves_its_pen() {
        let state = cluster(vec![node("n1", true)], vec![pod("default", "a", "n1", PodPhase::Running, 250)]);
        let gone = pod("default", "a", "n1", PodPhase::Running, 250);
        let state = state.reduce(ClusterAction::Watched {
            kind: shared::model::Kind::Pod,
            events: vec![WatchEvent { type_: shared::api::WatchEventType::Deleted, resource_version: 2, object: Some(Object::Pod(gone)) }],
        });
        let view = layout(&state.nodes, &state.pods, None);
        assert!(view.pens[0].pods.is_empty());
        assert_eq!(view.pens[0].usage.cpu, 0);
    }

    #[test]
    fn percent_is_clamped_for_bars() {
        assert_eq!(percent(1, 0), 0);
        assert_eq!(percent(3, 2), 100);
        assert_eq!(percent(1, 3), 33);
    }

    #[test]
    fn the_timeline_has_the_seeds_steps_with_t_plus_and_deltas() {
        let mut p = pod("default", "web", "n1", PodPhase::Running, 0);
        set_condition(&mut p.status.conditions, Condition { type_: "Ready".into(), status: "True".into(), ..Default::default() }, ms(3600));
        let events = vec![
            event("Created", 1, "web", "api-server"),
            event("Scheduled", 100, "web", "scheduler"),
            event("Pulled", 3000, "web", "agent/n1"),
            event("Started", 3500, "web", "agent/n1"),
            event("Scheduled", 5, "other", "scheduler"),
        ];
        let mine = pod_events(&p, &events);
        assert_eq!(mine.len(), 4);
        let rows = timeline(&p, &mine);
        let cells: Vec<(&str, Option<i64>, Option<i64>)> = rows.iter().map(|r| (r.step.name(), r.t_plus_ms, r.delta_ms)).collect();
        assert_eq!(
            cells,
            vec![
                ("Created", Some(0), None),
                ("Scheduled", Some(100), Some(100)),
                ("Pulled", Some(3000), Some(2900)),
                ("Started", Some(3500), Some(500)),
                ("Running", Some(3600), Some(100)),
            ]
        );
        assert_eq!(rows[1].detail, "Scheduled web");
    }

    #[test]
    fn a_pending_pod_has_no_running_step_and_deltas_skip_missing_steps() {
        let p = pod("default", "web", "n1", PodPhase::Pending, 0);
        let events = vec![event("Scheduled", 40, "web", "scheduler"), event("Started", 900, "web", "agent/n1")];
        let rows = timeline(&p, &pod_events(&p, &events));
        assert_eq!(rows[2].at, None);
        assert_eq!(rows[3].delta_ms, Some(860), "Started's delta is from Scheduled, the last step that happened");
        assert_eq!(rows[4].at, None);
    }

    #[test]
    fn events_of_a_predecessor_with_another_uid_are_left_out() {
        let mut p = pod("default", "web", "", PodPhase::Pending, 0);
        p.metadata.uid = "new".into();
        let mut old = (*event("Scheduled", 1, "web", "scheduler")).clone();
        old.involved_object.uid = "old".into();
        let mut new = old.clone();
        new.involved_object.uid = "new".into();
        let events = vec![Rc::new(old), Rc::new(new)];
        assert_eq!(pod_events(&p, &events).len(), 1);
    }

    #[test]
    fn formats_times_like_the_seed() {
        assert_eq!(t_plus(0), "T+0ms");
        assert_eq!(t_plus(3600), "T+3600ms");
        assert_eq!(t_plus(12_500), "T+12.5s");
        assert_eq!(t_plus(1_200_000), "T+20m");
        assert_eq!(delta(100), "+100ms");
        assert_eq!(delta(2900), "+2.9s");
        assert_eq!(delta(-1_460), "+-1.5s");
        assert_eq!(one_decimal(-5), "-0.5");
        assert_eq!(clock(ms(1234)), "12:00:01.234");
    }

    fn explanation() -> Explanation {
        let filter = |name: &str, verdict: Verdict, reason: &str| FilterVerdict {
            filter: name.into(),
            verdict,
            reason: reason.into(),
            detail: format!("{name} detail"),
        };
        let score = |plugin: &str, raw: u32, weight: u32| ScoreEntry {
            plugin: plugin.into(),
            raw,
            weight,
            weighted: (raw * weight) as u64,
            detail: String::new(),
        };
        Explanation {
            pod: "default/web".into(),
            profile: "spread".into(),
            total_nodes: 3,
            nodes_evaluated: 3,
            feasible_nodes: 2,
            nodes_to_find: 3,
            start_index: 0,
            selected: Some("n3".into()),
            message: "Successfully assigned default/web to n3".into(),
            nodes: vec![
                NodeExplanation {
                    node: "n1".into(),
                    feasible: false,
                    filters: vec![
                        filter("NodeReady", Verdict::Passed, ""),
                        filter("NodeResourcesFit", Verdict::Failed, "Insufficient cpu, Insufficient memory"),
                        filter("PodCount", Verdict::Skipped, ""),
                    ],
                    scores: vec![],
                    total: None,
                    selected: false,
                },
                NodeExplanation {
                    node: "n2".into(),
                    feasible: true,
                    filters: vec![
                        filter("NodeReady", Verdict::Passed, ""),
                        filter("NodeResourcesFit", Verdict::Passed, ""),
                        filter("PodCount", Verdict::Passed, ""),
                    ],
                    scores: vec![score("LeastAllocated", 40, 1), score("Spread", 50, 2)],
                    total: Some(140),
                    selected: false,
                },
                NodeExplanation {
                    node: "n3".into(),
                    feasible: true,
                    filters: vec![
                        filter("NodeReady", Verdict::Passed, ""),
                        filter("NodeResourcesFit", Verdict::Passed, ""),
                        filter("PodCount", Verdict::Passed, ""),
                    ],
                    scores: vec![score("LeastAllocated", 90, 1), score("Spread", 100, 2)],
                    total: Some(290),
                    selected: true,
                },
            ],
            queue: None,
        }
    }

    #[test]
    fn the_decision_table_has_a_column_per_plugin_and_the_winner_first() {
        let table = decision_table(&explanation());
        assert_eq!(table.filters, ["NodeReady", "NodeResourcesFit", "PodCount"]);
        assert_eq!(table.scores, ["LeastAllocated", "Spread"]);
        let order: Vec<(&str, usize, bool)> = table.rows.iter().map(|r| (r.node.as_str(), r.evaluated, r.selected)).collect();
        assert_eq!(order, [("n3", 3, true), ("n2", 2, false), ("n1", 1, false)]);
        let n1 = &table.rows[2];
        assert_eq!(n1.filters[1].verdict, Verdict::Failed);
        assert_eq!(n1.filters[1].reason, "Insufficient cpu, Insufficient memory");
        assert_eq!(n1.filters[2].verdict, Verdict::Skipped);
        assert_eq!(n1.scores, vec![None, None]);
        assert_eq!(table.rows[0].scores[1].as_ref().unwrap().weighted, 200);
        assert_eq!(table.rows[0].total, Some(290));
    }

    #[test]
    fn unschedulable_reason_counts_nodes_in_plain_words() {
        let mut p = pod("default", "big", "", PodPhase::Pending, 0);
        set_condition(
            &mut p.status.conditions,
            Condition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: "Unschedulable".into(),
                message: "0/3 nodes are available: 3 Insufficient cpu.".into(),
                ..Default::default()
            },
            t0(),
        );
        let mut e = explanation();
        e.selected = None;
        for node in &mut e.nodes {
            node.selected = false;
            node.feasible = false;
            node.filters[1] = FilterVerdict {
                filter: "NodeResourcesFit".into(),
                verdict: Verdict::Failed,
                reason: "Insufficient cpu".into(),
                detail: String::new(),
            };
        }
        e.nodes[0].filters[0] = FilterVerdict {
            filter: "NodeReady".into(),
            verdict: Verdict::Failed,
            reason: reasons::NOT_READY.into(),
            detail: String::new(),
        };
        let text = pending_reason(&p, Some(&e), None).unwrap();
        assert!(
            text.starts_with("No node can take this pod right now. Of 3 node(s) checked, 1 is not Ready (no recent heartbeat from the agent), 3 do not have enough unrequested CPU."),
            "{text}"
        );
        // Without the scheduler's table the condition's message is the reason.
        let text = pending_reason(&p, None, None).unwrap();
        assert!(text.contains("0/3 nodes are available: 3 Insufficient cpu."), "{text}");
    }

    #[test]
    fn waiting_for_agent_names_the_node_and_the_container_reason() {
        let mut p = pod("default", "web", "n1", PodPhase::Pending, 0);
        p.status.container_statuses = vec![ContainerStatus {
            name: "web".into(),
            state: ContainerState::Waiting { reason: "ErrImagePull".into(), message: "no such image".into() },
            ..Default::default()
        }];
        let grace = shared::readiness::DEFAULT_NODE_MONITOR_GRACE;
        let down = node("n1", false);
        let text = pending_reason(&p, None, Some(NodeAt { node: &down, grace })).unwrap();
        assert!(text.starts_with("Scheduled to n1; waiting"), "{text}");
        assert!(text.contains("n1 is not Ready (the node's Ready condition is False)"), "{text}");
        // Without leases the dashboard reads the condition node lifecycle keeps: a quiet node
        // is Ready until it marks it Unknown.
        let mut quiet = node("n1", true);
        quiet.status.last_heartbeat = Some(t0());
        let text = pending_reason(&p, None, Some(NodeAt { node: &quiet, grace })).unwrap();
        assert!(!text.contains("not Ready"), "{text}");
        quiet.status.conditions[0].status = "Unknown".into();
        let text = pending_reason(&p, None, Some(NodeAt { node: &quiet, grace })).unwrap();
        assert!(text.contains("n1 is not Ready (the node's Ready condition is Unknown)"), "{text}");
        assert!(text.contains("Container web: ErrImagePull (no such image)."), "{text}");
        assert_eq!(pending_reason(&pod("default", "r", "n1", PodPhase::Running, 0), None, None), None);
        assert!(
            pending_reason(&pod("default", "w", "", PodPhase::Pending, 0), None, None).unwrap().starts_with("Waiting for the scheduler")
        );
    }

    #[test]
    fn taint_reasons_read_as_sentences() {
        assert_eq!(plain_reason(&reasons::untolerated_taint("gpu", "true"), 2), "have a taint {gpu: true} the pod does not tolerate");
        assert_eq!(plain_reason(reasons::UNSCHEDULABLE, 1), "is cordoned");
    }

    #[test]
    fn conditions_start_with_pod_scheduled() {
        let list = vec![
            Condition { type_: "Ready".into(), ..Default::default() },
            Condition { type_: "PodScheduled".into(), ..Default::default() },
            Condition { type_: "Initialized".into(), ..Default::default() },
        ];
        let types: Vec<String> = sorted_conditions(&list).into_iter().map(|c| c.type_).collect();
        assert_eq!(types, ["PodScheduled", "Initialized", "Ready"]);
    }
}
