//! The scheduler: filters, scores, the assume cache and explanations. Pure and
//! deterministic (the caller passes `now`), so the server and the browser run the same code.
//!
//! One decision: walk the nodes in name order from a rotating start index, run the filters
//! on each (NodeReady, NodeUnschedulable, NodeSelector, TaintToleration, NodeResourcesFit,
//! PodCount, NodePorts; a node fails at its first failing filter) until
//! [`num_nodes_to_find`] feasible nodes are found, score those with the profile's weighted
//! plugins, and pick the highest total; ties go to the node evaluated first. Per-node
//! counters (requested CPU and memory, pods, host ports, pods per owner) are kept pod by
//! pod, so each filter is O(1) and the hot path allocates nothing per node.

mod cache;
mod explain;
mod plugins;
mod profile;
mod queue;
mod room;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::capacity::GiveBack;
use crate::model::{Node, Pod, Time};

use cache::{Footprint, LastScores, NodeInfo, NodeState, Owners, PodRecord, ScoreSums, Slot, owner_key, pod_id};
use explain::{NodeRecord, PodSummary};

pub use explain::{Decision, Explanation, FilterVerdict, NodeExplanation, ScoreEntry, Verdict};
pub use plugins::{
    DEFAULT_CPU_REQUEST, DEFAULT_MEMORY_REQUEST, FilterPlugin, HostPort, MAX_SCORE, Protocol, ScorePlugin, balanced_allocation,
    least_allocated, most_allocated, reasons, selector_matches, spread, tolerates,
};
pub use profile::{Profile, Weights};
pub use queue::{
    ClusterEvent, INITIAL_BACKOFF, MAX_BACKOFF, QueueSettings, QueueState, QueueStatus, Requeue, SchedulingQueue, UNSCHEDULABLE_FLUSH,
};
pub use room::check_room;

/// Below this many nodes every node is evaluated (Kubernetes' `minFeasibleNodesToFind`).
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// The adaptive percentage never drops below this (`minFeasibleNodesPercentageToFind`).
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: i64 = 5;

/// How many feasible nodes a decision looks for before it stops filtering, by Kubernetes'
/// rule: every node below 100 nodes; otherwise `N × p / 100` but at least 100, where `p` is
/// the profile's percentage or, when it is `None` or 0, the adaptive `max(5, 50 − N/125)`.
/// 5,000 nodes → 500; 50,000 → 2,500.
pub fn num_nodes_to_find(total_nodes: usize, percentage: Option<u32>) -> usize {
    if total_nodes < MIN_FEASIBLE_NODES_TO_FIND {
        return total_nodes;
    }
    let percentage = match percentage {
        Some(p) if p > 0 => p as i64,
        _ => (50 - total_nodes as i64 / 125).max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND),
    };
    if percentage >= 100 {
        return total_nodes;
    }
    ((total_nodes as i64 * percentage / 100) as usize).max(MIN_FEASIBLE_NODES_TO_FIND)
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedulerError {
    #[error("cannot assume pod {pod} on node {node}: the scheduler does not know that node")]
    UnknownNode { pod: String, node: String },
    #[error("cannot assume pod {pod} on node {node}: it is already {state} on node {other}")]
    AlreadyPlaced { pod: String, node: String, other: String, state: &'static str },
}

pub type Result<T, E = SchedulerError> = std::result::Result<T, E>;

/// What the pods counted on a node request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeUsage {
    /// Millicores.
    pub cpu: i64,
    /// Bytes.
    pub memory: i64,
    pub pods: i64,
    /// Of `pods`, those assumed and not yet seen bound.
    pub assumed_pods: usize,
}

/// The pod being scheduled, reduced to what the filters and scores read.
struct Request<'a> {
    footprint: Footprint,
    owner: Option<u32>,
    selector: &'a crate::model::Labels,
    tolerations: &'a [crate::model::Toleration],
}

/// The scheduler's state: nodes, per-node counters, the pods counted (bound or assumed) and
/// the rotating start index. Feed it every node and pod change; ask it for decisions.
#[derive(Debug, Clone)]
pub struct Scheduler {
    profile: Arc<Profile>,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    by_name: HashMap<String, u32>,
    /// Slots of known nodes in name order: the evaluation order.
    order: Vec<u32>,
    /// The infos of `order`, shared with decisions.
    view: Arc<Vec<Arc<NodeInfo>>>,
    order_dirty: bool,
    view_dirty: bool,
    pods: HashMap<String, PodRecord>,
    owners: Owners,
    next_start: usize,
    known_nodes: usize,
}

impl Default for Scheduler {
    fn default() -> Self {
        Scheduler::new(Profile::default())
    }
}

impl Scheduler {
    pub fn new(profile: Profile) -> Scheduler {
        Scheduler {
            profile: Arc::new(profile),
            slots: Vec::new(),
            free_slots: Vec::new(),
            by_name: HashMap::new(),
            order: Vec::new(),
            view: Arc::new(Vec::new()),
            order_dirty: false,
            view_dirty: false,
            pods: HashMap::new(),
            owners: Owners::default(),
            next_start: 0,
            known_nodes: 0,
        }
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Number of known nodes.
    pub fn node_count(&self) -> usize {
        self.known_nodes
    }

    /// Where the next decision starts in the name-ordered node list.
    pub fn next_start_index(&self) -> usize {
        self.next_start
    }

    fn slot_for(&mut self, name: &str) -> u32 {
        if let Some(&slot) = self.by_name.get(name) {
            return slot;
        }
        let slot = Slot { name: name.to_string(), ..Slot::default() };
        let index = match self.free_slots.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        self.by_name.insert(name.to_string(), index);
        index
    }

    fn free_slot(&mut self, index: u32) {
        let slot = std::mem::take(&mut self.slots[index as usize]);
        self.by_name.remove(&slot.name);
        self.free_slots.push(index);
    }

    /// Adds or updates a node (registration, status heartbeat, cordon, taints, labels).
    /// Returns the change when it may fit pods that did not fit before: the node passes the
    /// readiness and cordon filters at `now` and failed them before (judged at the same
    /// `now`), or it was new, or it grew, or its labels or hard taints changed.
    pub fn upsert_node(&mut self, node: &Node, now: Time) -> Option<ClusterEvent> {
        let state = NodeState::from_node(node);
        let (now_ms, grace) = (now.timestamp_millis(), self.profile.node_monitor_grace);
        let name = || node.metadata.name.clone();
        let index = self.slot_for(&node.metadata.name) as usize;
        let slot = &mut self.slots[index];
        let opens = node_gate(&state, slot.renewed_ms, now_ms, grace).is_none();
        match &mut slot.node {
            Some(existing) => {
                let event = match node_gate(existing, slot.renewed_ms, now_ms, grace) {
                    _ if !opens => None,
                    Some(plugins::Failure::NotReady(before)) => Some(ClusterEvent::NodeReady { node: name(), before }),
                    Some(_) => Some(ClusterEvent::NodeUncordoned { node: name() }),
                    None if grew(&state.allocatable, &existing.allocatable) => Some(ClusterEvent::NodeGrew { node: name() }),
                    None if state.info.labels != existing.info.labels => Some(ClusterEvent::NodeLabelsChanged { node: name() }),
                    None if state.info.taints != existing.info.taints => Some(ClusterEvent::NodeTaintsChanged { node: name() }),
                    None => None,
                };
                if *existing.info != *state.info {
                    existing.info = state.info;
                    existing.allocatable = state.allocatable;
                    slot.last_scores = None;
                    existing.tainted = state.tainted;
                    self.view_dirty = true;
                }
                existing.ready = state.ready;
                existing.heartbeat_ms = state.heartbeat_ms;
                existing.unschedulable = state.unschedulable;
                event
            }
            empty => {
                *empty = Some(state);
                self.known_nodes += 1;
                self.order_dirty = true;
                opens.then(|| ClusterEvent::NodeAdded { node: name() })
            }
        }
    }

    /// Records a renewal of a node's lease (`None`: the lease is gone). Returns
    /// [`ClusterEvent::NodeReady`] when the renewal makes a known node pass the readiness
    /// filter at `now` that failed it before: a node heartbeating again after a stale period.
    pub fn upsert_lease(&mut self, node: &str, renewed: Option<Time>, now: Time) -> Option<ClusterEvent> {
        let (now_ms, grace) = (now.timestamp_millis(), self.profile.node_monitor_grace);
        let renewed_ms = renewed.map(|t| t.timestamp_millis());
        let slot = match self.by_name.get(node) {
            Some(&index) => &mut self.slots[index as usize],
            None if renewed_ms.is_none() => return None,
            None => {
                let index = self.slot_for(node);
                &mut self.slots[index as usize]
            }
        };
        let before = std::mem::replace(&mut slot.renewed_ms, renewed_ms);
        let state = slot.node.as_ref()?;
        match node_gate(state, before, now_ms, grace) {
            Some(plugins::Failure::NotReady(before)) if node_gate(state, renewed_ms, now_ms, grace).is_none() => {
                Some(ClusterEvent::NodeReady { node: node.to_string(), before })
            }
            _ => None,
        }
    }

    /// Forgets a node and every pod counted on it.
    pub fn remove_node(&mut self, name: &str) {
        let Some(&index) = self.by_name.get(name) else { return };
        let owners = &mut self.owners;
        self.pods.retain(|_, record| {
            if record.slot != index {
                return true;
            }
            if let Some(key) = &record.owner_key {
                owners.release(key);
            }
            false
        });
        if self.slots[index as usize].node.is_some() {
            self.known_nodes -= 1;
            self.order_dirty = true;
        }
        self.free_slot(index);
    }

    /// A pod as the store has it. Bound and not finished: it counts on its node (an
    /// assumed pod with the same uid is confirmed, not counted twice). Finished: its
    /// reservation is released. Not bound yet: an assumed reservation stays (its bind is
    /// in flight; [`Scheduler::forget`] drops it if the bind fails), anything else is released.
    /// Returns the change when a pod that held room on a node finished.
    pub fn upsert_pod(&mut self, pod: &Pod) -> Option<ClusterEvent> {
        let id = pod_id(pod);
        if pod.status.phase.is_terminal() {
            return self.release_bound(pod, &id);
        }
        if !pod.is_bound() {
            if self.pods.get(&id).is_some_and(|r| !r.assumed) {
                self.release(&id);
            }
            return None;
        }
        let footprint = Footprint::of(pod);
        let owner = owner_key(pod).map(|(key, _)| key);
        if let Some(record) = self.pods.get_mut(&id) {
            let same_node = self.slots[record.slot as usize].name == pod.spec.node_name;
            if same_node && record.footprint == footprint && record.owner_key == owner {
                if record.assumed {
                    record.assumed = false;
                    self.slots[record.slot as usize].assumed -= 1;
                }
                return None;
            }
            self.release(&id);
        }
        self.count(id, &pod.spec.node_name, footprint, owner, false);
        None
    }

    /// The pod was deleted from the store: release whatever it held. Returns the change
    /// when it held room on a node.
    pub fn remove_pod(&mut self, pod: &Pod) -> Option<ClusterEvent> {
        self.release_bound(pod, &pod_id(pod))
    }

    fn release_bound(&mut self, pod: &Pod, id: &str) -> Option<ClusterEvent> {
        let record = self.pods.get(id)?;
        let event = (!record.assumed)
            .then(|| ClusterEvent::PodFreedRoom { pod: pod.metadata.key(), node: self.slots[record.slot as usize].name.clone() });
        self.release(id);
        event
    }

    /// Reserves the pod's requests, host ports and spread count on `node` before the bind
    /// returns, so the next decision already sees them.
    pub fn assume(&mut self, pod: &Pod, node: &str) -> Result<()> {
        let id = pod_id(pod);
        let known = self.by_name.get(node).is_some_and(|&i| self.slots[i as usize].node.is_some());
        if !known {
            return Err(SchedulerError::UnknownNode { pod: pod.metadata.key(), node: node.to_string() });
        }
        if let Some(record) = self.pods.get(&id) {
            let other = &self.slots[record.slot as usize].name;
            if other == node {
                return Ok(());
            }
            let state = if record.assumed { "assumed" } else { "bound" };
            return Err(SchedulerError::AlreadyPlaced { pod: pod.metadata.key(), node: node.to_string(), other: other.clone(), state });
        }
        let owner = owner_key(pod).map(|(key, _)| key);
        self.count(id, node, Footprint::of(pod), owner, true);
        Ok(())
    }

    /// The bind failed: drop the pod's assumed reservation. Returns whether there was one
    /// (a pod already seen bound stays counted).
    pub fn forget(&mut self, pod: &Pod) -> bool {
        let id = pod_id(pod);
        if self.pods.get(&id).is_some_and(|r| r.assumed) {
            self.release(&id);
            return true;
        }
        false
    }

    /// Whether the pod is assumed on a node and not yet seen bound.
    pub fn is_assumed(&self, pod: &Pod) -> bool {
        self.pods.get(&pod_id(pod)).is_some_and(|r| r.assumed)
    }

    /// The node the pod is counted on, bound or assumed.
    pub fn pod_node(&self, pod: &Pod) -> Option<&str> {
        self.pods.get(&pod_id(pod)).map(|r| self.slots[r.slot as usize].name.as_str())
    }

    /// What the pods counted on a known node request.
    pub fn node_usage(&self, name: &str) -> Option<NodeUsage> {
        let slot = &self.slots[*self.by_name.get(name)? as usize];
        slot.node.as_ref()?;
        let requested = slot.usage.requested;
        Some(NodeUsage { cpu: requested.cpu, memory: requested.memory, pods: requested.pods, assumed_pods: slot.assumed })
    }

    fn count(&mut self, id: String, node: &str, footprint: Footprint, owner_key: Option<String>, assumed: bool) {
        let slot = self.slot_for(node);
        let owner = owner_key.as_deref().map(|key| self.owners.acquire(key));
        self.slots[slot as usize].add(&footprint, owner, assumed);
        self.pods.insert(id, PodRecord { slot, footprint, owner_key, owner, assumed });
    }

    fn release(&mut self, id: &str) {
        let Some(record) = self.pods.remove(id) else { return };
        self.pods.give_back_spare();
        let slot = &mut self.slots[record.slot as usize];
        slot.release(&record.footprint, record.owner, record.assumed);
        if let Some(key) = &record.owner_key {
            self.owners.release(key);
        }
        if slot.node.is_none() && slot.is_empty() {
            self.free_slot(record.slot);
        }
    }

    fn refresh(&mut self) {
        if self.order_dirty {
            self.arrange_slots();
            self.order_dirty = false;
            self.view_dirty = true;
        }
        if self.view_dirty {
            let view = self.order.iter().map(|&i| self.slots[i as usize].node.as_ref().map(|n| n.info.clone())).collect::<Option<Vec<_>>>();
            self.view = Arc::new(view.expect("the order lists only slots with a node"));
            self.view_dirty = false;
        }
    }

    /// Moves the slots of known nodes to the front in name order, the order decisions walk
    /// them in, so that a decision reads memory front to back instead of one cache miss per
    /// node; slots without a node go after them. Every slot index held is renumbered.
    fn arrange_slots(&mut self) {
        let mut arranged: Vec<u32> = (0..self.slots.len() as u32).collect();
        crate::sort::by(&mut arranged, |&a, &b| {
            let (a, b) = (&self.slots[a as usize], &self.slots[b as usize]);
            (a.node.is_none(), &a.name).cmp(&(b.node.is_none(), &b.name))
        });
        let mut renumbered = vec![0u32; arranged.len()];
        for (new, &old) in arranged.iter().enumerate() {
            renumbered[old as usize] = new as u32;
        }
        let mut old_slots = std::mem::take(&mut self.slots);
        self.slots = arranged.iter().map(|&old| std::mem::take(&mut old_slots[old as usize])).collect();
        for index in self.by_name.values_mut().chain(self.free_slots.iter_mut()) {
            *index = renumbered[*index as usize];
        }
        for record in self.pods.values_mut() {
            record.slot = renumbered[record.slot as usize];
        }
        self.order = (0..self.known_nodes as u32).collect();
    }

    /// Chooses a node for the pod, or explains why none fits. Reserves nothing (call
    /// [`Scheduler::assume`] with the chosen node); moves the start index on by the number
    /// of nodes evaluated.
    pub fn schedule(&mut self, pod: &Pod, now: Time) -> Decision {
        self.refresh();
        let total = self.order.len();
        let to_find = num_nodes_to_find(total, self.profile.percentage_of_nodes_to_score);
        let start = if total == 0 { 0 } else { self.next_start % total };
        let owner = owner_key(pod);
        let request = Request {
            footprint: Footprint::of(pod),
            owner: owner.as_ref().and_then(|(key, _)| self.owners.get(key)),
            selector: &pod.spec.node_selector,
            tolerations: &pod.spec.tolerations,
        };
        let now_ms = now.timestamp_millis();
        let grace = self.profile.node_monitor_grace;
        let weights = self.profile.weights;

        let mut records: Vec<NodeRecord> = Vec::with_capacity(to_find.min(total));
        let mut feasible = 0;
        let mut pos = start;
        for _ in 0..total {
            if feasible >= to_find {
                break;
            }
            let slot = &mut self.slots[self.order[pos] as usize];
            let failure = filter(slot, &request, now_ms, grace);
            let mut record = NodeRecord { pos: pos as u32, failure, usage: slot.usage, spread_count: 0, scores: [0; 4], total: 0 };
            if failure.is_none() {
                feasible += 1;
                score(slot, &request, &weights, &mut record);
            }
            records.push(record);
            pos += 1;
            if pos == total {
                pos = 0;
            }
        }
        if total > 0 {
            self.next_start = (start + records.len()) % total;
        }

        let selected = pick(&mut records, &weights);
        Decision {
            pod: PodSummary {
                key: pod.metadata.key(),
                footprint: request.footprint,
                node_selector: pod.spec.node_selector.clone(),
                owner: owner.map(|(_, description)| description),
            },
            profile: self.profile.clone(),
            nodes: self.view.clone(),
            records,
            selected,
            feasible,
            nodes_to_find: to_find,
            start_index: start,
        }
    }
}

/// Runs the filters in order; `None` when the node passes them all.
#[inline]
fn filter(slot: &Slot, request: &Request<'_>, now_ms: i64, grace: Duration) -> Option<plugins::Failure> {
    use plugins::Failure;
    let node = slot.node.as_ref().expect("only known nodes are evaluated");
    if let Some(failure) = node_gate(node, slot.renewed_ms, now_ms, grace) {
        return Some(failure);
    }
    if !request.selector.is_empty() && !selector_matches(request.selector, &node.info.labels) {
        return Some(Failure::SelectorMismatch);
    }
    let untolerated = if node.tainted { plugins::first_untolerated(&node.info.taints, request.tolerations) } else { None };
    if let Some(index) = untolerated {
        return Some(Failure::UntoleratedTaint { index: index as u16 });
    }
    room::room(&node.allocatable, &slot.usage, &slot.ports, &request.footprint)
}

/// The filters that judge the node alone: NodeReady, then NodeUnschedulable.
#[inline]
fn node_gate(node: &NodeState, renewed_ms: Option<i64>, now_ms: i64, grace: Duration) -> Option<plugins::Failure> {
    let readiness = node.readiness(renewed_ms, now_ms, grace);
    if !readiness.is_ready() {
        return Some(plugins::Failure::NotReady(readiness));
    }
    node.unschedulable.then_some(plugins::Failure::Cordoned)
}

/// Whether `new` offers more of any resource than `old`.
fn grew(new: &crate::model::NodeResources, old: &crate::model::NodeResources) -> bool {
    new.cpu > old.cpu || new.memory > old.memory || new.pods > old.pods
}

/// Raw scores of a feasible node, except Spread, which needs every feasible node's count.
#[inline]
fn score(slot: &mut Slot, request: &Request<'_>, weights: &Weights, record: &mut NodeRecord) {
    let fp = &request.footprint;
    let sums = ScoreSums {
        nonzero_cpu: slot.usage.nonzero_cpu.saturating_add(fp.nonzero_cpu),
        nonzero_memory: slot.usage.nonzero_memory.saturating_add(fp.nonzero_memory),
        cpu: slot.usage.requested.cpu.saturating_add(fp.requests.cpu),
        memory: slot.usage.requested.memory.saturating_add(fp.requests.memory),
    };
    match slot.last_scores {
        Some(last) if last.sums == sums => record.scores = last.scores,
        _ => {
            let alloc = &slot.node.as_ref().expect("only known nodes are scored").allocatable;
            if weights.least_allocated > 0 {
                record.scores[ScorePlugin::LeastAllocated as usize] =
                    least_allocated(sums.nonzero_cpu, alloc.cpu, sums.nonzero_memory, alloc.memory);
            }
            if weights.most_allocated > 0 {
                record.scores[ScorePlugin::MostAllocated as usize] =
                    most_allocated(sums.nonzero_cpu, alloc.cpu, sums.nonzero_memory, alloc.memory);
            }
            if weights.balanced_allocation > 0 {
                record.scores[ScorePlugin::BalancedAllocation as usize] =
                    balanced_allocation(sums.cpu, alloc.cpu, sums.memory, alloc.memory);
            }
            slot.last_scores = Some(LastScores { sums, scores: record.scores });
        }
    }
    if let Some(owner) = request.owner {
        record.spread_count = slot.owner_count(owner);
    }
}

/// Finishes Spread, totals every feasible node and returns the index of the best, the
/// first evaluated among equals.
fn pick(records: &mut [NodeRecord], weights: &Weights) -> Option<usize> {
    let max_spread = records.iter().filter(|r| r.failure.is_none()).map(|r| r.spread_count).max().unwrap_or(0);
    let mut best: Option<(usize, u64)> = None;
    for (i, record) in records.iter_mut().enumerate() {
        if record.failure.is_some() {
            continue;
        }
        if weights.spread > 0 {
            record.scores[ScorePlugin::Spread as usize] = spread(record.spread_count, max_spread);
        }
        record.total = ScorePlugin::ALL.iter().map(|&p| record.scores[p as usize] as u64 * weights.of(p) as u64).sum();
        if best.is_none_or(|(_, total)| record.total > total) {
            best = Some((i, record.total));
        }
    }
    best.map(|(i, _)| i)
}
