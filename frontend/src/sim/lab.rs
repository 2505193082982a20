//! The lab: spread and bin-pack side by side, fed the same nodes and pods, with its presets
//! (three small nodes, or 5,000 for percentageOfNodesToScore), as a yew `Reducible`.

use std::cell::RefCell;
use std::rc::Rc;

use shared::model::{
    Container, Labels, Node, NodeInfo, NodeResources, ObjectMeta, OwnerReference, Pod, PodPhase, PodStage, ResourceRequirements, Taint,
    Time, Toleration,
};
use shared::registration::NodeDescription;
use shared::scheduler::Profile;
use yew::Reducible;

use crate::sim::engine::{Sim, named_or_owned_by};

/// Nodes in the large preset.
pub const BIG_CLUSTER: usize = 5000;

/// A node to add.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSpec {
    /// Empty: `node-N`.
    pub name: String,
    pub cpu: i64,
    pub memory: i64,
    pub pods: i64,
    pub labels: Labels,
    pub taints: Vec<Taint>,
}

/// Pods to add, all alike.
#[derive(Debug, Clone, PartialEq)]
pub struct PodBatch {
    /// Pods are named `{prefix}-{n}`; the prefix is also their controller's name, so
    /// Spread keeps them apart.
    pub prefix: String,
    pub count: usize,
    pub cpu: i64,
    pub memory: i64,
    pub node_selector: Labels,
    pub tolerations: Vec<Toleration>,
}

/// Both schedulers and everything fed to them.
#[derive(Debug, Clone)]
pub struct Lab {
    /// Spread first, bin-pack second.
    pub sims: [Sim; 2],
    pub nodes_added: usize,
    pub pods_added: usize,
    pub steps: u64,
}

impl Default for Lab {
    fn default() -> Self {
        Lab { sims: [Sim::new(Profile::spread()), Sim::new(Profile::bin_pack())], nodes_added: 0, pods_added: 0, steps: 0 }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum LabAction {
    AddNode(NodeSpec, Time),
    AddPods(PodBatch, Time),
    /// Delete the pods named so, or owned by a controller named so.
    DeletePods(String, Time),
    /// Start bound pods, move the pods whose back-off or flush came to the active queue,
    /// then make up to `decisions` scheduling decisions in each scheduler.
    Step {
        decisions: usize,
        now: Time,
    },
    Cordon {
        node: String,
        cordoned: bool,
        now: Time,
    },
    /// Three small nodes, one of them labelled and tainted.
    Small(Time),
    /// [`BIG_CLUSTER`] nodes of mixed sizes, a quarter of them nearly full.
    Big(Time),
    Reset,
}

/// A simulated node as its agent registers it (`shared::registration`, so it carries the
/// `kubernetes.io/hostname` label as a real node does), stamped as the server stores it.
fn node(spec: &NodeSpec, name: String, now: Time) -> Node {
    let description = NodeDescription {
        labels: spec.labels.clone(),
        taints: spec.taints.clone(),
        info: NodeInfo { runtime: "simulated".into(), simulated: true, ..NodeInfo::default() },
        ..NodeDescription::new(&name, NodeResources { cpu: spec.cpu, memory: spec.memory, pods: spec.pods })
    };
    let mut node = description.to_node(now);
    node.metadata.created_at = Some(now);
    node.status.last_heartbeat = Some(now);
    node
}

pub(super) fn pod(batch: &PodBatch, name: String, now: Time) -> Pod {
    let mut pod = Pod { kind: "Pod".into(), metadata: ObjectMeta::named("default", &name), ..Default::default() };
    pod.metadata.uid = format!("sim-{name}");
    pod.metadata.created_at = Some(now);
    pod.metadata.labels.insert("app".into(), batch.prefix.clone());
    pod.metadata.owner_references = vec![OwnerReference::controlled_by("Deployment", &ObjectMeta::named("", &batch.prefix))];
    pod.spec.containers = vec![Container {
        name: "main".into(),
        image: "minimal".into(),
        resources: ResourceRequirements { cpu: batch.cpu, memory: batch.memory },
        ..Default::default()
    }];
    pod.spec.node_selector = batch.node_selector.clone();
    pod.spec.tolerations = batch.tolerations.clone();
    pod
}

impl Lab {
    fn add_node(&mut self, spec: &NodeSpec, now: Time) {
        self.nodes_added += 1;
        let name = if spec.name.trim().is_empty() { format!("node-{}", self.nodes_added) } else { spec.name.trim().to_string() };
        let node = node(spec, name, now);
        for sim in &mut self.sims {
            sim.catch_up(now);
            sim.put_node(node.clone());
        }
    }

    fn add_pods(&mut self, batch: &PodBatch, now: Time) {
        for sim in &mut self.sims {
            sim.catch_up(now);
        }
        for _ in 0..batch.count {
            self.pods_added += 1;
            let pod = pod(batch, format!("{}-{}", batch.prefix, self.pods_added), now);
            for sim in &mut self.sims {
                sim.add_pod(pod.clone());
            }
        }
    }

    fn big(&mut self, now: Time) {
        *self = Lab::default();
        let mut seed: u64 = 0x5eed;
        let mut next = move || {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as usize
        };
        let filler_batch =
            PodBatch { prefix: "system".into(), count: 1, cpu: 0, memory: 0, node_selector: Labels::new(), tolerations: vec![] };
        let mut nodes = Vec::with_capacity(BIG_CLUSTER);
        let mut fillers = Vec::new();
        for i in 1..=BIG_CLUSTER {
            let size = next() % 3;
            let mut labels = Labels::new();
            labels.insert("zone".into(), ["a", "b", "c"][next() % 3].into());
            let spec = NodeSpec {
                name: String::new(),
                cpu: [2000, 4000, 8000][size],
                memory: [4i64 << 30, 8 << 30, 16 << 30][size],
                pods: 110,
                labels,
                taints: Vec::new(),
            };
            let name = format!("node-{i:04}");
            if next() % 4 == 0 {
                // A quarter of the nodes are nearly full: they fail NodeResourcesFit, so a
                // decision must walk past them to find enough feasible nodes.
                let mut batch = filler_batch.clone();
                batch.cpu = spec.cpu - 50;
                batch.memory = spec.memory / 2;
                let mut filler = pod(&batch, format!("system-{i:04}"), now);
                filler.metadata.namespace = "kube-system".into();
                filler.spec.node_name = name.clone();
                filler.status.phase = PodPhase::Running;
                fillers.push(filler);
            }
            nodes.push(node(&spec, name, now));
        }
        self.nodes_added = BIG_CLUSTER;
        for sim in &mut self.sims {
            sim.catch_up(now);
            for node in &nodes {
                sim.put_node(node.clone());
            }
            for filler in &fillers {
                sim.put_pod(filler.clone());
            }
        }
    }

    fn small(&mut self, now: Time) {
        *self = Lab::default();
        let plain = NodeSpec { name: String::new(), cpu: 2000, memory: 4 << 30, pods: 110, labels: Labels::new(), taints: Vec::new() };
        self.add_node(&plain, now);
        self.add_node(&NodeSpec { cpu: 4000, memory: 8 << 30, ..plain.clone() }, now);
        let mut labels = Labels::new();
        labels.insert("gpu".into(), "true".into());
        let taints = vec![Taint { key: "gpu".into(), value: "true".into(), effect: "NoSchedule".into() }];
        self.add_node(&NodeSpec { labels, taints, ..plain }, now);
    }

    pub fn apply(&mut self, action: LabAction) {
        match action {
            LabAction::AddNode(spec, now) => self.add_node(&spec, now),
            LabAction::AddPods(batch, now) => self.add_pods(&batch, now),
            LabAction::DeletePods(name, now) => {
                for sim in &mut self.sims {
                    sim.catch_up(now);
                    sim.delete_pods(&name);
                }
            }
            LabAction::Step { decisions, now } => {
                self.steps += 1;
                for sim in &mut self.sims {
                    sim.catch_up(now);
                    sim.step(self.steps, decisions);
                }
            }
            LabAction::Cordon { node, cordoned, now } => {
                for sim in &mut self.sims {
                    sim.catch_up(now);
                    sim.set_cordon(&node, cordoned);
                }
            }
            LabAction::Small(now) => self.small(now),
            LabAction::Big(now) => self.big(now),
            LabAction::Reset => *self = Lab::default(),
        }
    }

    /// How many pods [`LabAction::DeletePods`] with `name` would delete.
    pub fn pods_named_or_owned_by(&self, name: &str) -> usize {
        self.sims[0].pods.values().filter(|p| named_or_owned_by(p, name)).count()
    }

    /// Whether stepping would do anything: a pod to decide on now or once its back-off
    /// ends, or a bound pod to start. Parked pods wait for a cluster change, or for the
    /// 5-minute flush, which Play does not wait out.
    pub fn has_work(&self) -> bool {
        self.sims.iter().any(|s| s.queued() > 0 || s.backing_off() > 0 || s.pods.values().any(|p| p.stage() == PodStage::WaitingForAgent))
    }
}

/// The lab as yew state. The schedulers are too big to copy on every step, so the state
/// shares one `Lab` and a version number tells renders apart.
#[derive(Debug, Clone)]
pub struct LabState {
    pub lab: Rc<RefCell<Lab>>,
    pub version: u64,
}

impl Default for LabState {
    fn default() -> Self {
        LabState { lab: Rc::new(RefCell::new(Lab::default())), version: 0 }
    }
}

impl PartialEq for LabState {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.lab, &other.lab) && self.version == other.version
    }
}

impl Reducible for LabState {
    type Action = LabAction;

    fn reduce(self: Rc<Self>, action: LabAction) -> Rc<Self> {
        self.lab.borrow_mut().apply(action);
        Rc::new(LabState { lab: self.lab.clone(), version: self.version + 1 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::fixtures::*;

    #[test]
    fn spread_and_bin_pack_place_the_same_pods_differently() {
        let mut lab = Lab::default();
        let plain = NodeSpec { name: String::new(), cpu: 4000, memory: 8 << 30, pods: 110, labels: Labels::new(), taints: vec![] };
        lab.apply(LabAction::AddNode(plain.clone(), t(0)));
        lab.apply(LabAction::AddNode(plain, t(0)));
        lab.apply(LabAction::AddPods(batch("web", 4, 500), t(0)));
        lab.apply(LabAction::Step { decisions: 4, now: t(1) });
        let nodes_used = |sim: &Sim| {
            let mut nodes: Vec<String> = placements(sim).into_iter().map(|(_, n)| n).collect();
            nodes.sort();
            nodes.dedup();
            nodes.len()
        };
        assert_eq!(nodes_used(&lab.sims[0]), 2, "spread uses both nodes: {:?}", placements(&lab.sims[0]));
        assert_eq!(nodes_used(&lab.sims[1]), 1, "bin-pack fills one node: {:?}", placements(&lab.sims[1]));
    }

    #[test]
    fn the_big_cluster_scores_only_a_share_of_its_nodes_from_a_rotating_start() {
        let mut lab = Lab::default();
        lab.apply(LabAction::Big(t(0)));
        assert_eq!(lab.sims[0].nodes.len(), BIG_CLUSTER);
        lab.apply(LabAction::AddPods(batch("web", 2, 100), t(0)));
        step(&mut lab, t(1));
        let first = lab.sims[0].last.clone().unwrap();
        // Kubernetes' adaptive rule: 5,000 nodes → 10 % → 500 feasible nodes to find.
        assert_eq!(first.nodes_to_find, 500);
        assert_eq!(first.feasible_nodes, 500);
        assert!(first.nodes_evaluated > 500, "nearly full nodes are passed over: {}", first.nodes_evaluated);
        assert!(first.nodes_evaluated < BIG_CLUSTER);
        step(&mut lab, t(2));
        let second = lab.sims[0].last.clone().unwrap();
        assert_eq!(second.start_index, first.start_index + first.nodes_evaluated);
    }

    #[test]
    fn a_pod_pinned_by_hostname_schedules_on_that_node_as_on_the_server() {
        let mut lab = Lab::default();
        lab.apply(LabAction::Small(t(0)));
        let mut pinned = batch("pinned", 1, 100);
        pinned.node_selector.insert(shared::registration::HOSTNAME_LABEL.into(), "node-2".into());
        lab.apply(LabAction::AddPods(pinned, t(0)));
        step(&mut lab, t(1));
        for sim in &lab.sims {
            assert_eq!(sim.pods.get("default/pinned-1").unwrap().spec.node_name, "node-2", "{}: {:?}", sim.profile, sim.history.front());
        }
    }

    #[test]
    fn the_yew_state_shares_the_lab_and_bumps_its_version() {
        let state = Rc::new(LabState::default());
        let next = state.clone().reduce(LabAction::Small(t(0)));
        assert_ne!(*state, *next);
        assert!(Rc::ptr_eq(&state.lab, &next.lab));
        assert_eq!(next.lab.borrow().sims[0].nodes.len(), 3);
        next.clone().reduce(LabAction::Reset);
        assert!(next.lab.borrow().sims[0].nodes.is_empty());
    }
}
