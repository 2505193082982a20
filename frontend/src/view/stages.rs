//! The cluster page's view-model: the stages a pod moves through, in the seed's order and
//! words, pods grouped by stage, and the node pens with the requests of their pods against
//! what each node can give, and what they use as the node's agent measured it.

use std::rc::Rc;

use shared::metrics::NodeMetrics;
use shared::model::{Node, NodeResources, Pod, PodStage};
use shared::usage::{self, Requested};

use crate::store::Collection;
use shared::sort;

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

/// What the pods on a node request, against what it can give, and what they use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub requested: Requested,
    pub allocatable: NodeResources,
    pub used: Measured,
}

/// What a node's pods use, from `metrics.k8s.io`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Measured {
    /// Nobody asked: the simulator's nodes have no agents, and a page's first answer has
    /// not come yet.
    #[default]
    NotAsked,
    /// Asked, and the node reported nothing: its agent did not answer.
    Unknown,
    /// CPU in millicores (rounded up, as `kubectl top`), memory working set in bytes.
    Used { cpu: i64, memory: i64 },
}

/// Puts the nodes' `metrics` into their pens; a pen whose node is not in them is
/// [`Measured::Unknown`].
fn measure(pens: &mut [Pen], metrics: &[NodeMetrics]) {
    for pen in pens.iter_mut() {
        pen.usage.used = Measured::Unknown;
    }
    for m in metrics {
        if let Some(i) = pen_of(pens, &m.metadata.name) {
            pens[i].usage.used = Measured::Used { cpu: m.usage.cpu_millis(), memory: m.usage.memory_bytes() };
        }
    }
}

/// `part` of `whole` in percent by [`shared::usage::percent`], held to 0..=100 for the bars
/// (an overcommitted node shows full).
pub fn percent(part: i64, whole: i64) -> u32 {
    usage::percent(part.max(0), whole).clamp(0, 100) as u32
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

/// Where the pen of the node named `node_name` is. Pens are in name order, as the cache
/// keys a node by its name alone, so this is a binary search, with no hash map in the bundle.
pub fn pen_of(pens: &[Pen], node_name: &str) -> Option<usize> {
    pens.binary_search_by(|pen| pen.node.metadata.name.as_str().cmp(node_name)).ok()
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

/// The pens of `nodes` with `pods`, those of `namespace` drawn (every namespace for `None`),
/// and the usage in `metrics` when the page asked for it.
pub fn layout(nodes: &Collection<Node>, pods: &Collection<Pod>, namespace: Option<&str>, metrics: Option<&[NodeMetrics]>) -> Layout {
    let mut pens: Vec<Pen> = nodes
        .values()
        .map(|node| Pen {
            node: node.clone(),
            usage: Usage { requested: Requested::default(), allocatable: node.status.allocatable, used: Measured::NotAsked },
            pods: Vec::new(),
        })
        .collect();
    let mut layout = Layout::default();
    let mut counts = [0usize; STAGES.len()];
    for pod in pods.values() {
        let shown = in_namespace(&pod.metadata.namespace, namespace);
        let pen = pen_of(&pens, &pod.spec.node_name);
        if let Some(i) = pen
            && usage::counts_on_node(pod)
        {
            pens[i].usage.requested.add(pod);
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
    if let Some(metrics) = metrics {
        measure(&mut pens, metrics);
    }
    layout.pens = pens;
    layout.counts = STAGES.iter().copied().zip(counts).collect();
    layout
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ClusterAction;
    use crate::view::fixtures::{cluster, ms, node, pod, t0};
    use shared::api::WatchEvent;
    use shared::metrics::{MetricsMeta, ResourceUsage};
    use shared::model::{Condition, Object, PodPhase, set_condition};
    use yew::Reducible;

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
        let view = layout(&state.nodes, &state.pods, Some("default"), None);
        assert_eq!(view.pens.len(), 2);
        let n1 = &view.pens[0];
        assert_eq!(n1.node.metadata.name, "n1");
        // Requests count every namespace but not finished pods; only "default" pods are drawn.
        assert_eq!((n1.usage.requested.cpu, n1.usage.requested.pods, n1.usage.allocatable.cpu), (750, 2, 1000));
        assert_eq!(percent(n1.usage.requested.cpu, n1.usage.allocatable.cpu), 75);
        let drawn: Vec<&str> = n1.pods.iter().map(|p| p.metadata.name.as_str()).collect();
        assert_eq!(drawn, ["a", "done"]);
        assert_eq!(view.meadow.len(), 1);
        assert_eq!(view.strays[0].metadata.name, "lost");
        let running = view.counts.iter().find(|(s, _)| *s == PodStage::Running).unwrap().1;
        assert_eq!(running, 2);

        let all = layout(&state.nodes, &state.pods, None, None);
        assert_eq!(all.pens[0].pods.len(), 3);
    }

    #[test]
    fn flocks_are_ordered_oldest_first() {
        let mut young = pod("default", "a-young", "", PodPhase::Pending, 0);
        young.metadata.created_at = Some(ms(500));
        let old = pod("default", "z-old", "", PodPhase::Pending, 0);
        let state = cluster(vec![], vec![young, old]);
        let view = layout(&state.nodes, &state.pods, None, None);
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
        let view = layout(&state.nodes, &state.pods, None, None);
        assert!(view.pens[0].pods.is_empty());
        assert_eq!(view.pens[0].usage.requested.cpu, 0);
    }

    #[test]
    fn a_pen_shows_what_its_node_reported_and_unknown_when_it_reported_nothing() {
        let state = cluster(vec![node("n1", true), node("n2", true)], vec![pod("default", "a", "n1", PodPhase::Running, 250)]);
        let view = layout(&state.nodes, &state.pods, None, None);
        assert_eq!(view.pens[0].usage.used, Measured::NotAsked, "nothing asked yet: the pens say nothing about usage");
        // As the server builds it from the agent's report: nanocores and bytes.
        let reported = NodeMetrics {
            metadata: MetricsMeta { name: "n1".into(), ..MetricsMeta::default() },
            usage: ResourceUsage::new(120_000_001, 48 << 20),
            ..NodeMetrics::default()
        };
        let view = layout(&state.nodes, &state.pods, None, Some(&[reported]));
        assert_eq!(view.pens[0].usage.used, Measured::Used { cpu: 121, memory: 48 << 20 }, "millicores rounded up, as kubectl top");
        assert_eq!(view.pens[0].usage.requested.cpu, 250, "requests stay beside the usage");
        assert_eq!(view.pens[1].usage.used, Measured::Unknown, "n2's agent did not answer");
    }

    #[test]
    fn percent_is_clamped_for_bars() {
        assert_eq!(percent(1, 0), 0);
        assert_eq!(percent(3, 2), 100);
        assert_eq!(percent(1, 3), 33);
    }
}
