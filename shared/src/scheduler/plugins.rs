//! The filter and score plugins as small pure functions over numbers and labels, plus the
//! compact verdict ([`Failure`]) a filter leaves behind. Words for humans are made from
//! these only when a decision is explained, never while scheduling.

use crate::model::{Labels, Taint, Toleration};
use crate::readiness::Readiness;

/// Highest score a plugin gives a node, as in Kubernetes (`MaxNodeScore`).
pub const MAX_SCORE: u8 = 100;

/// CPU a container without a CPU request counts for when nodes are scored (not when they
/// are filtered), as Kubernetes does so that such pods still spread: 100 millicores.
pub const DEFAULT_CPU_REQUEST: i64 = 100;
/// Memory a container without a memory request counts for when nodes are scored: 200Mi.
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// The filters, in the order they run. A node fails at its first failing filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FilterPlugin {
    NodeReady,
    NodeUnschedulable,
    NodeSelector,
    TaintToleration,
    NodeResourcesFit,
    PodCount,
    NodePorts,
}

impl FilterPlugin {
    pub const ALL: [FilterPlugin; 7] = [
        FilterPlugin::NodeReady,
        FilterPlugin::NodeUnschedulable,
        FilterPlugin::NodeSelector,
        FilterPlugin::TaintToleration,
        FilterPlugin::NodeResourcesFit,
        FilterPlugin::PodCount,
        FilterPlugin::NodePorts,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FilterPlugin::NodeReady => "NodeReady",
            FilterPlugin::NodeUnschedulable => "NodeUnschedulable",
            FilterPlugin::NodeSelector => "NodeSelector",
            FilterPlugin::TaintToleration => "TaintToleration",
            FilterPlugin::NodeResourcesFit => "NodeResourcesFit",
            FilterPlugin::PodCount => "PodCount",
            FilterPlugin::NodePorts => "NodePorts",
        }
    }
}

/// The score plugins. Each gives a feasible node 0..=100; a profile weighs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScorePlugin {
    LeastAllocated,
    MostAllocated,
    BalancedAllocation,
    Spread,
}

impl ScorePlugin {
    pub const ALL: [ScorePlugin; 4] =
        [ScorePlugin::LeastAllocated, ScorePlugin::MostAllocated, ScorePlugin::BalancedAllocation, ScorePlugin::Spread];

    pub fn name(self) -> &'static str {
        match self {
            ScorePlugin::LeastAllocated => "LeastAllocated",
            ScorePlugin::MostAllocated => "MostAllocated",
            ScorePlugin::BalancedAllocation => "BalancedAllocation",
            ScorePlugin::Spread => "Spread",
        }
    }

    pub fn from_name(name: &str) -> Option<ScorePlugin> {
        ScorePlugin::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// Why a node was filtered out: numbers and indexes only, rendered later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Not ready (never [`Readiness::Ready`]).
    NotReady(Readiness),
    Cordoned,
    SelectorMismatch,
    /// Index into the node's hard (NoSchedule/NoExecute) taints.
    UntoleratedTaint {
        index: u16,
    },
    Insufficient {
        cpu: bool,
        memory: bool,
    },
    TooManyPods,
    PortConflict {
        port: i32,
        protocol: Protocol,
    },
}

impl Failure {
    pub fn plugin(self) -> FilterPlugin {
        match self {
            Failure::NotReady(_) => FilterPlugin::NodeReady,
            Failure::Cordoned => FilterPlugin::NodeUnschedulable,
            Failure::SelectorMismatch => FilterPlugin::NodeSelector,
            Failure::UntoleratedTaint { .. } => FilterPlugin::TaintToleration,
            Failure::Insufficient { .. } => FilterPlugin::NodeResourcesFit,
            Failure::TooManyPods => FilterPlugin::PodCount,
            Failure::PortConflict { .. } => FilterPlugin::NodePorts,
        }
    }
}

/// Kubernetes' reason words, as they appear in `0/3 nodes are available: …`.
pub mod reasons {
    pub const NOT_READY: &str = "node(s) were not ready";
    pub const UNSCHEDULABLE: &str = "node(s) were unschedulable";
    pub const SELECTOR_MISMATCH: &str = "node(s) didn't match node selector";
    pub const INSUFFICIENT_CPU: &str = "Insufficient cpu";
    pub const INSUFFICIENT_MEMORY: &str = "Insufficient memory";
    pub const TOO_MANY_PODS: &str = "Too many pods";
    pub const PORTS: &str = "node(s) didn't have free ports for the requested pod ports";
    pub const NO_NODES: &str = "no nodes available to schedule pods";

    /// `node(s) had untolerated taint {key: value}`, as Kubernetes writes it.
    pub fn untolerated_taint(key: &str, value: &str) -> String {
        format!("node(s) had untolerated taint {{{key}: {value}}}")
    }
}

/// Whether a taint keeps pods off a node at scheduling time (PreferNoSchedule only scores
/// in Kubernetes, and Shepherd does not score it).
pub fn is_hard_taint(taint: &Taint) -> bool {
    taint.effect == "NoSchedule" || taint.effect == "NoExecute"
}

/// Kubernetes' `ToleratesTaint`: the effect must match unless the toleration leaves it
/// empty, the key must match unless the toleration leaves it empty, then `Exists` accepts
/// any value and `Equal` (or an empty operator) wants the same value.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if !toleration.effect.is_empty() && toleration.effect != taint.effect {
        return false;
    }
    if !toleration.key.is_empty() && toleration.key != taint.key {
        return false;
    }
    match toleration.operator.as_str() {
        "" | "Equal" => toleration.value == taint.value,
        "Exists" => true,
        _ => false,
    }
}

/// The index of the first taint no toleration tolerates.
pub fn first_untolerated(taints: &[Taint], tolerations: &[Toleration]) -> Option<usize> {
    taints.iter().position(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
}

/// Every `key: value` of the pod's node selector is a label of the node.
pub fn selector_matches(selector: &Labels, labels: &Labels) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The first key of the node selector the node does not satisfy.
pub fn first_selector_mismatch<'a>(selector: &'a Labels, labels: &Labels) -> Option<(&'a String, &'a String)> {
    selector.iter().find(|(k, v)| labels.get(*k) != Some(*v))
}

/// A host port's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    /// Empty means TCP; case does not matter (the reference writes `tcp`).
    pub fn parse(text: &str) -> Protocol {
        if text.eq_ignore_ascii_case("udp") {
            Protocol::Udp
        } else if text.eq_ignore_ascii_case("sctp") {
            Protocol::Sctp
        } else {
            Protocol::Tcp
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
        }
    }
}

/// A host port a pod publishes. An empty `ip` (or `0.0.0.0`) means every address of the node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    pub port: i32,
    pub protocol: Protocol,
    pub ip: String,
}

impl HostPort {
    pub fn new(port: i32, protocol: &str, ip: &str) -> HostPort {
        let ip = if ip == "0.0.0.0" { "" } else { ip };
        HostPort { port, protocol: Protocol::parse(protocol), ip: ip.to_string() }
    }

    /// Two pods cannot both bind the same port and protocol on the same address; the
    /// wildcard address overlaps every address.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.port == other.port && self.protocol == other.protocol && (self.ip.is_empty() || other.ip.is_empty() || self.ip == other.ip)
    }
}

/// The first of the pod's host ports that one already in use on the node overlaps.
pub fn first_port_conflict<'a>(wanted: &'a [HostPort], used: &[HostPort]) -> Option<&'a HostPort> {
    wanted.iter().find(|w| used.iter().any(|u| u.conflicts(w)))
}

/// `part × scale / whole`, rounded down, for `0 ≤ part ≤ whole` and `whole > 0`: in i64 when
/// the product fits, which is always for real nodes (a 128-bit division was a tenth of a
/// decision's time), and in i128 otherwise.
#[inline]
fn share(part: i64, scale: i64, whole: i64) -> i64 {
    match part.checked_mul(scale) {
        Some(scaled) => scaled / whole,
        None => (part as i128 * scale as i128 / whole as i128) as i64,
    }
}

/// LeastAllocated for one resource: the share left free after the pod, 0..=100.
#[inline]
pub fn least_allocated_resource(requested: i64, allocatable: i64) -> i64 {
    if allocatable <= 0 || requested > allocatable {
        return 0;
    }
    share(allocatable - requested.max(0), MAX_SCORE as i64, allocatable)
}

/// MostAllocated for one resource: the share in use after the pod, 0..=100.
#[inline]
pub fn most_allocated_resource(requested: i64, allocatable: i64) -> i64 {
    if allocatable <= 0 {
        return 0;
    }
    share(requested.clamp(0, allocatable), MAX_SCORE as i64, allocatable)
}

/// LeastAllocated over CPU and memory, weighted equally (Kubernetes' default).
pub fn least_allocated(cpu: i64, allocatable_cpu: i64, memory: i64, allocatable_memory: i64) -> u8 {
    ((least_allocated_resource(cpu, allocatable_cpu) + least_allocated_resource(memory, allocatable_memory)) / 2) as u8
}

/// MostAllocated over CPU and memory, weighted equally: the bin-packing score.
pub fn most_allocated(cpu: i64, allocatable_cpu: i64, memory: i64, allocatable_memory: i64) -> u8 {
    ((most_allocated_resource(cpu, allocatable_cpu) + most_allocated_resource(memory, allocatable_memory)) / 2) as u8
}

/// Parts per million of `allocatable` that `requested` takes, at most one million;
/// `None` when the node offers none of the resource.
#[inline]
pub fn fraction_ppm(requested: i64, allocatable: i64) -> Option<i64> {
    (allocatable > 0).then(|| share(requested.clamp(0, allocatable), 1_000_000, allocatable))
}

/// BalancedAllocation: `(1 - std) × 100` where std is the standard deviation of the CPU
/// and memory fractions requested after the pod (for two values, half their difference),
/// as Kubernetes computes it; integer arithmetic so that every platform agrees.
pub fn balanced_allocation(cpu: i64, allocatable_cpu: i64, memory: i64, allocatable_memory: i64) -> u8 {
    match (fraction_ppm(cpu, allocatable_cpu), fraction_ppm(memory, allocatable_memory)) {
        (Some(c), Some(m)) => {
            let std = (c - m).abs() / 2;
            ((1_000_000 - std) * MAX_SCORE as i64 / 1_000_000) as u8
        }
        _ => MAX_SCORE,
    }
}

/// Spread: the fewer pods of the same owner a node already runs, the higher, normalised
/// against the busiest node scored (Kubernetes' SelectorSpread without zones).
pub fn spread(count: u32, max_count: u32) -> u8 {
    if max_count == 0 {
        return MAX_SCORE;
    }
    (MAX_SCORE as u64 * (max_count - count.min(max_count)) as u64 / max_count as u64) as u8
}
