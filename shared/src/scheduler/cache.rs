//! The scheduler's cache: per-node aggregates (requested CPU and memory, pod count, host
//! ports in use, pods per owner) kept up to date pod by pod, so that every filter is O(1),
//! and the record of every pod counted, bound or assumed.

use std::collections::HashMap;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::model::{Labels, Node, NodeResources, Pod, ResourceRequirements, Taint};

use super::plugins::{DEFAULT_CPU_REQUEST, DEFAULT_MEMORY_REQUEST, HostPort, is_hard_taint};
use crate::readiness::{Readiness, ReadyState, judge};
use crate::usage::Requested;

/// What a decision needs to name a node and explain it later; immutable and shared with
/// decisions, replaced when labels, taints or allocatable change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeInfo {
    pub name: String,
    pub labels: Labels,
    /// Only the NoSchedule and NoExecute taints: the ones that filter.
    pub taints: Vec<Taint>,
    pub allocatable: NodeResources,
}

/// A node as the scheduler sees it: the shared info plus the fields that change often.
#[derive(Debug, Clone)]
pub(crate) struct NodeState {
    pub info: Arc<NodeInfo>,
    pub ready: ReadyState,
    /// The node's own status heartbeat, milliseconds since the epoch.
    pub heartbeat_ms: Option<i64>,
    pub unschedulable: bool,
    /// Whether `info.taints` is non-empty, kept here so untainted nodes skip a pointer chase.
    pub tainted: bool,
    /// A copy of `info.allocatable`, next to the counters the filters compare it with.
    pub allocatable: NodeResources,
}

impl NodeState {
    pub fn from_node(node: &Node) -> NodeState {
        let info = NodeInfo {
            name: node.metadata.name.clone(),
            labels: node.metadata.labels.clone(),
            taints: node.status.taints.iter().filter(|t| is_hard_taint(t)).cloned().collect(),
            allocatable: node.status.allocatable,
        };
        NodeState {
            tainted: !info.taints.is_empty(),
            info: Arc::new(info),
            ready: node.ready_state(),
            heartbeat_ms: node.status.last_heartbeat.map(|t| t.timestamp_millis()),
            unschedulable: node.status.unschedulable,
            allocatable: node.status.allocatable,
        }
    }

    /// `renewed_ms`: the node's lease renewal, which counts as a heartbeat too.
    pub fn readiness(&self, renewed_ms: Option<i64>, now_ms: i64, grace: std::time::Duration) -> Readiness {
        judge(self.ready, self.heartbeat_ms.max(renewed_ms), now_ms, grace)
    }
}

/// What the pods counted on a node request, in total: the sum every part shows
/// ([`Requested`]), and the scores' own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    pub requested: Requested,
    /// As `requested`, with containers that request nothing counted at the scoring defaults
    /// (100m, 200Mi).
    pub nonzero_cpu: i64,
    pub nonzero_memory: i64,
}

/// One node name's entry: the node (if the scheduler has seen it) and what its pods use.
/// A slot without a node holds pods bound to a node not (yet) known, so that they count as
/// soon as it registers.
#[derive(Debug, Clone, Default)]
pub(crate) struct Slot {
    pub name: String,
    pub node: Option<NodeState>,
    /// The last renewal of the node's lease, milliseconds since the epoch. Kept on the slot,
    /// since a lease and its node arrive as separate changes.
    pub renewed_ms: Option<i64>,
    pub usage: Usage,
    pub ports: Vec<HostPort>,
    /// (owner id, pods of that owner on this node). Most nodes hold pods of a few owners, and
    /// keeping those inline spares every scored node a pointer chase to the heap.
    pub owners: SmallVec<[(u32, u32); 2]>,
    /// Pods counted here that are assumed and not yet seen bound.
    pub assumed: usize,
    /// The scores last computed here. The next pod of a deployment asks for the same and
    /// often meets the node unchanged, so the divisions are skipped when the sums match.
    pub last_scores: Option<LastScores>,
}

/// The requests a node's scores read: what its pods take plus the pod being scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScoreSums {
    /// With containers that request nothing counted at the scoring defaults (LeastAllocated, MostAllocated).
    pub nonzero_cpu: i64,
    pub nonzero_memory: i64,
    /// As requested (BalancedAllocation).
    pub cpu: i64,
    pub memory: i64,
}

/// Raw scores (indexed by `ScorePlugin as usize`, Spread left 0) and the sums they came from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LastScores {
    pub sums: ScoreSums,
    pub scores: [u8; 4],
}

impl Slot {
    pub fn owner_count(&self, owner: u32) -> u32 {
        self.owners.iter().find(|(id, _)| *id == owner).map_or(0, |(_, n)| *n)
    }

    /// Counts a pod. Sums saturate: a node whose pods ask for more than an i64 holds is
    /// simply full (release then subtracts from the saturated sum; validation's bounds keep
    /// real sums far below it).
    pub fn add(&mut self, footprint: &Footprint, owner: Option<u32>, assumed: bool) {
        self.usage.requested.add_requests(footprint.requests);
        self.usage.nonzero_cpu = self.usage.nonzero_cpu.saturating_add(footprint.nonzero_cpu);
        self.usage.nonzero_memory = self.usage.nonzero_memory.saturating_add(footprint.nonzero_memory);
        self.ports.extend(footprint.ports.iter().cloned());
        if let Some(owner) = owner {
            match self.owners.iter_mut().find(|(id, _)| *id == owner) {
                Some((_, n)) => *n += 1,
                None => self.owners.push((owner, 1)),
            }
        }
        if assumed {
            self.assumed += 1;
        }
    }

    pub fn release(&mut self, footprint: &Footprint, owner: Option<u32>, assumed: bool) {
        self.usage.requested.remove_requests(footprint.requests);
        self.usage.nonzero_cpu = self.usage.nonzero_cpu.saturating_sub(footprint.nonzero_cpu);
        self.usage.nonzero_memory = self.usage.nonzero_memory.saturating_sub(footprint.nonzero_memory);
        for port in &footprint.ports {
            if let Some(i) = self.ports.iter().position(|p| p == port) {
                self.ports.swap_remove(i);
            }
        }
        if let Some(i) = owner.and_then(|owner| self.owners.iter().position(|(id, _)| *id == owner)) {
            self.owners[i].1 -= 1;
            if self.owners[i].1 == 0 {
                self.owners.swap_remove(i);
            }
        }
        if assumed {
            self.assumed -= 1;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.usage.requested.pods == 0
    }
}

/// What a pod takes from a node: its requests ([`PodSpec::requests`](crate::model::PodSpec::requests):
/// negative ones count as none, sums saturate), as scores count them, and host ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Footprint {
    pub requests: ResourceRequirements,
    pub nonzero_cpu: i64,
    pub nonzero_memory: i64,
    pub ports: Vec<HostPort>,
}

impl Footprint {
    pub fn of(pod: &Pod) -> Footprint {
        let mut footprint = Footprint { requests: pod.spec.requests(), nonzero_cpu: 0, nonzero_memory: 0, ports: Vec::new() };
        for container in &pod.spec.containers {
            let (cpu, memory) = (container.resources.cpu.max(0), container.resources.memory.max(0));
            footprint.nonzero_cpu = footprint.nonzero_cpu.saturating_add(if cpu == 0 { DEFAULT_CPU_REQUEST } else { cpu });
            footprint.nonzero_memory = footprint.nonzero_memory.saturating_add(if memory == 0 { DEFAULT_MEMORY_REQUEST } else { memory });
            for port in &container.ports {
                if let Some(host_port) = port.host_port.filter(|&p| p > 0) {
                    footprint.ports.push(HostPort::new(host_port, &port.protocol, &port.host_ip));
                }
            }
        }
        footprint
    }
}

/// Which pods belong together for Spread: the controller's uid (a deployment's pods), or
/// for a pod without a controller its namespace and labels. `None` for a bare pod without
/// labels. The second value describes the group for people.
pub(crate) fn owner_key(pod: &Pod) -> Option<(String, String)> {
    if let Some(owner) = pod.metadata.controller() {
        let key = if owner.uid.is_empty() {
            format!("controller\u{0}{}\u{0}{}\u{0}{}", pod.metadata.namespace, owner.kind, owner.name)
        } else {
            format!("uid\u{0}{}", owner.uid)
        };
        return Some((key, format!("{} {}", owner.kind, owner.name)));
    }
    if pod.metadata.labels.is_empty() {
        return None;
    }
    let labels: Vec<String> = pod.metadata.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let labels = labels.join(",");
    Some((format!("labels\u{0}{}\u{0}{labels}", pod.metadata.namespace), format!("pods labelled {labels}")))
}

/// Owner keys interned as small numbers while at least one counted pod has them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Owners {
    ids: HashMap<String, (u32, u32)>,
    free: Vec<u32>,
    next: u32,
}

impl Owners {
    pub fn get(&self, key: &str) -> Option<u32> {
        self.ids.get(key).map(|(id, _)| *id)
    }

    /// The id of `key`, taking one reference.
    pub fn acquire(&mut self, key: &str) -> u32 {
        if let Some((id, refs)) = self.ids.get_mut(key) {
            *refs += 1;
            return *id;
        }
        let id = self.free.pop().unwrap_or_else(|| {
            self.next += 1;
            self.next - 1
        });
        self.ids.insert(key.to_string(), (id, 1));
        id
    }

    /// Drops one reference to `key`; its id is reused once no pod has it.
    pub fn release(&mut self, key: &str) {
        if let Some((id, refs)) = self.ids.get_mut(key) {
            *refs -= 1;
            if *refs == 0 {
                self.free.push(*id);
                self.ids.remove(key);
            }
        }
    }
}

/// A pod counted on a node: bound (seen in the store) or assumed (bind in flight).
#[derive(Debug, Clone)]
pub(crate) struct PodRecord {
    pub slot: u32,
    pub footprint: Footprint,
    pub owner_key: Option<String>,
    pub owner: Option<u32>,
    pub assumed: bool,
}

/// The key a pod is recorded under: its uid, or `namespace/name` when it has none.
pub(crate) fn pod_id(pod: &Pod) -> String {
    if pod.metadata.uid.is_empty() { pod.metadata.key() } else { pod.metadata.uid.clone() }
}
