//! The workshop simulator: the server's own scheduler and scheduling queue (`shared::scheduler`)
//! run in the page on made-up nodes and pods, driven the way the server's loop drives them.
//! Spread and bin-pack get the same inputs, side by side; a 5,000-node preset shows
//! percentageOfNodesToScore at work. Pure: callers pass `now`.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use shared::model::{
    Condition, Container, Labels, Node, NodeResources, ObjectMeta, OwnerReference, Pod, PodPhase, PodStage, ResourceRequirements, Taint,
    Time, Toleration, conditions, parse_cpu, parse_memory, set_condition,
};
use shared::scheduler::{ClusterEvent, Explanation, Profile, QueueState, QueueStatus, Scheduler, SchedulingQueue, check_room};
use yew::Reducible;

use crate::store::{Collection, Resource};

/// A simulated agent renews its node's lease this often (in simulated wall time), a quarter
/// of the scheduler's 40 s grace, as a real agent does.
const HEARTBEAT_EVERY_SECONDS: i64 = 10;
/// Outcomes kept for the log.
const HISTORY: usize = 50;
/// Nodes in the large preset.
pub const BIG_CLUSTER: usize = 5000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// A label or taint, in `shared::parse`'s words.
    #[error("{0}")]
    Parse(String),
    #[error("toleration {0:?} is not key=value:Effect, key:Effect or key (Exists)")]
    Toleration(String),
    #[error("{0}")]
    Quantity(String),
    #[error("{what} must be a whole number of at least {min}, not {text:?}")]
    Count { what: &'static str, min: i64, text: String },
}

/// `a=b, c=d` (empty = no labels), by the one label grammar in `shared::parse`.
pub fn parse_labels(text: &str) -> Result<Labels, InputError> {
    shared::parse::labels(text).map_err(|e| InputError::Parse(e.to_string()))
}

/// `gpu=true:NoSchedule, zone=x:NoExecute`, by the one taint grammar in `shared::parse`.
pub fn parse_taints(text: &str) -> Result<Vec<Taint>, InputError> {
    shared::parse::taints(text).map_err(|e| InputError::Parse(e.to_string()))
}

/// `gpu=true:NoSchedule` (Equal), `gpu:NoSchedule` or `gpu` (Exists).
pub fn parse_tolerations(text: &str) -> Result<Vec<Toleration>, InputError> {
    text.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|item| {
            let (pair, effect) = match item.rsplit_once(':') {
                Some((pair, effect)) if shared::model::TAINT_EFFECTS.contains(&effect.trim()) => (pair, effect.trim()),
                Some(_) => return Err(InputError::Toleration(item.to_string())),
                None => (item, ""),
            };
            let toleration = match pair.split_once('=') {
                Some((key, value)) => {
                    Toleration { key: key.trim().into(), operator: "Equal".into(), value: value.trim().into(), effect: effect.into() }
                }
                None => Toleration { key: pair.trim().into(), operator: "Exists".into(), value: String::new(), effect: effect.into() },
            };
            if toleration.key.is_empty() { Err(InputError::Toleration(item.to_string())) } else { Ok(toleration) }
        })
        .collect()
}

pub fn parse_count(text: &str, what: &'static str, min: i64) -> Result<i64, InputError> {
    match text.trim().parse::<i64>() {
        Ok(n) if n >= min => Ok(n),
        _ => Err(InputError::Count { what, min, text: text.to_string() }),
    }
}

pub fn parse_cpu_input(text: &str) -> Result<i64, InputError> {
    parse_cpu(text).map_err(InputError::Quantity)
}

pub fn parse_memory_input(text: &str) -> Result<i64, InputError> {
    parse_memory(text).map_err(InputError::Quantity)
}

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

/// What one decision did.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub step: u64,
    pub pod: String,
    /// The node the pod was bound to: `None` when no node fitted or the bind was refused.
    pub node: Option<String>,
    pub message: String,
    pub evaluated: usize,
    pub total: usize,
    pub start_index: usize,
    /// Where the decision left the pod in the queue, with what requeued it for this decision.
    pub queue: Option<QueueStatus>,
}

/// One scheduler, its scheduling queue and the cluster they see.
#[derive(Debug, Clone)]
pub struct Sim {
    pub profile: String,
    scheduler: Scheduler,
    queue: SchedulingQueue<String>,
    pub nodes: Collection<Node>,
    pub pods: Collection<Pod>,
    pub last: Option<Rc<Explanation>>,
    pub history: VecDeque<Outcome>,
    /// The simulated clock: the latest instant an action carried.
    now: Time,
    /// When the simulated agents last reported in.
    heartbeat: Option<Time>,
}

impl Sim {
    pub fn new(profile: Profile) -> Sim {
        let mut nodes = Collection::default();
        let mut pods = Collection::default();
        nodes.listed = true;
        pods.listed = true;
        Sim {
            profile: profile.name.clone(),
            scheduler: Scheduler::new(profile),
            queue: SchedulingQueue::default(),
            nodes,
            pods,
            last: None,
            history: VecDeque::new(),
            now: Time::default(),
            heartbeat: None,
        }
    }

    fn now_ms(&self) -> i64 {
        self.now.timestamp_millis()
    }

    /// Pods in the active queue, to be decided on next.
    pub fn queued(&self) -> usize {
        self.queue.active_len()
    }

    /// Pods no node fitted, parked until a cluster change or the flush.
    pub fn parked(&self) -> usize {
        self.count_in(QueueState::Unschedulable)
    }

    /// Pods waiting out their back-off.
    pub fn backing_off(&self) -> usize {
        self.count_in(QueueState::BackingOff)
    }

    fn count_in(&self, state: QueueState) -> usize {
        self.waiting().filter(|(_, status)| status.state == state).count()
    }

    /// Every pod in the queue and where it waits at the simulated clock, by `namespace/name`.
    pub fn waiting(&self) -> impl Iterator<Item = (&str, QueueStatus)> {
        let now_ms = self.now_ms();
        self.pods.items.keys().filter_map(move |key| self.queue.status(key, now_ms).map(|status| (key.as_str(), status)))
    }

    /// Nodes evaluated per decision start here next.
    pub fn next_start_index(&self) -> usize {
        self.scheduler.next_start_index()
    }

    /// Moves the simulated clock on to `now`, never back (the queue needs a clock that does
    /// not go backwards; the wall clock can), and lets the simulated agents report in.
    fn catch_up(&mut self, now: Time) {
        self.now = self.now.max(now);
        self.heartbeat();
    }

    /// A change that may fit parked pods requeues them, as the server's loop does.
    fn cluster_changed(&mut self, change: Option<ClusterEvent>) {
        if let Some(event) = change {
            self.queue.cluster_changed(&event, self.now_ms());
        }
    }

    fn put_node(&mut self, node: Node) {
        let change = self.scheduler.upsert_node(&node, self.now);
        self.cluster_changed(change);
        upsert(&mut self.nodes, node);
    }

    fn put_pod(&mut self, pod: Pod) {
        let change = self.scheduler.upsert_pod(&pod);
        self.cluster_changed(change);
        upsert(&mut self.pods, pod);
    }

    /// The simulated agents report in: every node's lease is renewed now, as the server's
    /// scheduler sees renewals (the nodes themselves are not written). They renew all along,
    /// but the page catches up with them only when something happens, so the scheduler judges
    /// the catch-up at the previous renewal: a quiet page is not a node that went quiet, and
    /// requeues nothing.
    fn heartbeat(&mut self) {
        let now = self.now;
        let previous = match self.heartbeat {
            Some(t) if (now - t).num_seconds() < HEARTBEAT_EVERY_SECONDS => return,
            previous => previous.unwrap_or(now),
        };
        self.heartbeat = Some(now);
        let names: Vec<String> = self.nodes.items.keys().cloned().collect();
        for name in names {
            let change = self.scheduler.upsert_lease(&name, Some(now), previous);
            self.cluster_changed(change);
        }
    }

    fn set_cordon(&mut self, name: &str, cordoned: bool) {
        if let Some(node) = self.nodes.get(name) {
            let mut node = (**node).clone();
            node.status.unschedulable = cordoned;
            self.put_node(node);
        }
    }

    fn add_pod(&mut self, pod: Pod) {
        self.queue.add(pod.metadata.key());
        self.put_pod(pod);
    }

    /// Deletes the pods [`named_or_owned_by`] `name`. The simulated agents stop them at
    /// once, so the room they held is free at once.
    fn delete_pods(&mut self, name: &str) {
        let doomed: Vec<Rc<Pod>> = self.pods.values().filter(|p| named_or_owned_by(p, name)).cloned().collect();
        for pod in doomed {
            let key = pod.metadata.key();
            let change = self.scheduler.remove_pod(&pod);
            self.queue.remove(&key);
            Rc::make_mut(&mut self.pods.items).remove(&key);
            self.cluster_changed(change);
        }
    }

    /// The simulated agents start every pod bound since the last step.
    fn start_bound(&mut self) {
        let now = self.now;
        let bound: Vec<Pod> = self.pods.values().filter(|p| p.stage() == PodStage::WaitingForAgent).map(|p| (**p).clone()).collect();
        for mut pod in bound {
            pod.status.phase = PodPhase::Running;
            pod.status.start_time = Some(now);
            set_condition(
                &mut pod.status.conditions,
                Condition { type_: conditions::READY.into(), status: conditions::TRUE.into(), ..Default::default() },
                now,
            );
            self.put_pod(pod);
        }
    }

    /// One turn of the server's loop: start what was bound, move the pods whose back-off or
    /// flush came to the active queue, then make up to `decisions` decisions.
    fn step(&mut self, step: u64, decisions: usize) {
        self.start_bound();
        self.queue.tick(self.now_ms());
        for _ in 0..decisions {
            if !self.schedule_next(step) {
                break;
            }
        }
    }

    /// Pops the next pod and decides on it: filter, score, then assume and bind, or park it
    /// as unschedulable. Returns false when the active queue is empty.
    fn schedule_next(&mut self, step: u64) -> bool {
        let (now, now_ms) = (self.now, self.now_ms());
        let Some(key) = self.queue.pop() else { return false };
        let Some(mut pod) = self.pods.get(&key).map(|p| (**p).clone()) else {
            self.queue.remove(&key);
            return true;
        };
        let requeued_by = self.queue.requeued_by(&key).map(ToString::to_string);
        let decision = self.scheduler.schedule(&pod, now);
        let explanation = Rc::new(decision.explain());
        let (node, message) = match decision.selected() {
            Some(node) => match self.bind(pod, node) {
                Ok(()) => (Some(node.to_string()), explanation.message.clone()),
                Err(refused) => {
                    self.queue.failed(&key, now_ms);
                    (None, refused)
                }
            },
            None => {
                set_condition(
                    &mut pod.status.conditions,
                    Condition {
                        type_: conditions::POD_SCHEDULED.into(),
                        status: conditions::FALSE.into(),
                        reason: conditions::UNSCHEDULABLE.into(),
                        message: explanation.message.clone(),
                        ..Default::default()
                    },
                    now,
                );
                self.put_pod(pod);
                self.queue.unschedulable(&key, now_ms);
                (None, explanation.message.clone())
            }
        };
        let queue = self.queue.status(&key, now_ms).map(|status| QueueStatus { requeued_by, ..status });
        if node.is_some() {
            self.queue.scheduled(&key);
        }
        self.history.push_front(Outcome {
            step,
            pod: key,
            node,
            message,
            evaluated: explanation.nodes_evaluated,
            total: explanation.total_nodes,
            start_index: explanation.start_index,
            queue,
        });
        self.history.truncate(HISTORY);
        self.last = Some(explanation);
        true
    }

    /// The server's bind: assume the pod on `node_name`, then bind it only if the node has
    /// room next to the pods bound to it (the same `check_room` that guards the server's
    /// compare-and-swap). A refused bind drops the assumption and says why.
    fn bind(&mut self, mut pod: Pod, node_name: &str) -> Result<(), String> {
        self.scheduler.assume(&pod, node_name).map_err(|e| e.to_string())?;
        let room = match self.nodes.get(node_name) {
            Some(node) => check_room(node, self.pods.values().filter(|p| p.spec.node_name == node_name).map(|p| &**p), &pod),
            None => Err("it does not exist".to_string()),
        };
        if let Err(why) = room {
            self.scheduler.forget(&pod);
            return Err(format!("binding {} to node {node_name} was refused: {why}", pod.metadata.key()));
        }
        pod.spec.node_name = node_name.to_string();
        set_condition(
            &mut pod.status.conditions,
            Condition { type_: conditions::POD_SCHEDULED.into(), status: conditions::TRUE.into(), ..Default::default() },
            self.now,
        );
        self.put_pod(pod);
        Ok(())
    }
}

fn upsert<T: Resource>(collection: &mut Collection<T>, item: T) {
    let key = item.meta().key();
    Rc::make_mut(&mut collection.items).insert(key, Rc::new(item));
}

/// Whether `pod` is called `name` or its controller is (`web` names every pod of a batch,
/// `web-3` one of them).
fn named_or_owned_by(pod: &Pod, name: &str) -> bool {
    pod.metadata.name == name || pod.metadata.controller().is_some_and(|owner| owner.name == name)
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

fn node(spec: &NodeSpec, name: String, now: Time) -> Node {
    let resources = NodeResources { cpu: spec.cpu, memory: spec.memory, pods: spec.pods };
    let mut node = Node { kind: "Node".into(), metadata: ObjectMeta::named("", &name), ..Default::default() };
    node.metadata.labels = spec.labels.clone();
    node.metadata.created_at = Some(now);
    node.status.capacity = resources;
    node.status.allocatable = resources;
    node.status.taints = spec.taints.clone();
    node.status.last_heartbeat = Some(now);
    node.status.node_info.simulated = true;
    node.status.node_info.runtime = "simulated".into();
    set_condition(
        &mut node.status.conditions,
        Condition { type_: conditions::NODE_READY.into(), status: conditions::TRUE.into(), ..Default::default() },
        now,
    );
    node
}

fn pod(batch: &PodBatch, name: String, now: Time) -> Pod {
    let mut pod = Pod { kind: "Pod".into(), metadata: ObjectMeta::named("default", &name), ..Default::default() };
    pod.metadata.uid = format!("sim-{name}");
    pod.metadata.created_at = Some(now);
    pod.metadata.labels.insert("app".into(), batch.prefix.clone());
    pod.metadata.owner_references =
        vec![OwnerReference { kind: "Deployment".into(), name: batch.prefix.clone(), uid: String::new(), controller: true }];
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
    use chrono::{Duration, TimeZone, Utc};

    fn t(seconds: i64) -> Time {
        at_ms(seconds * 1000)
    }

    fn at_ms(ms: i64) -> Time {
        Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + Duration::milliseconds(ms)
    }

    fn batch(prefix: &str, count: usize, cpu: i64) -> PodBatch {
        PodBatch { prefix: prefix.into(), count, cpu, memory: 64 << 20, node_selector: Labels::new(), tolerations: vec![] }
    }

    /// The three-node preset with `pods` added, all at t(0).
    fn three_nodes_with(pods: PodBatch) -> Lab {
        let mut lab = Lab::default();
        lab.apply(LabAction::Small(t(0)));
        lab.apply(LabAction::AddPods(pods, t(0)));
        lab
    }

    /// One node with `pods` added, all at t(0).
    fn one_node_with(name: &str, cpu: i64, pods: PodBatch) -> Lab {
        let mut lab = Lab::default();
        lab.apply(LabAction::AddNode(one_node(name, cpu), t(0)));
        lab.apply(LabAction::AddPods(pods, t(0)));
        lab
    }

    /// One decision per scheduler at `now`.
    fn step(lab: &mut Lab, now: Time) {
        lab.apply(LabAction::Step { decisions: 1, now });
    }

    fn one_node(name: &str, cpu: i64) -> NodeSpec {
        NodeSpec { name: name.into(), cpu, memory: 4 << 30, pods: 10, labels: Labels::new(), taints: vec![] }
    }

    fn placements(sim: &Sim) -> Vec<(String, String)> {
        sim.pods.values().map(|p| (p.metadata.name.clone(), p.spec.node_name.clone())).collect()
    }

    /// Where the last decision left its pod, in the words of `sheepctl describe`.
    fn last_queue(sim: &Sim) -> String {
        sim.history[0].queue.as_ref().expect("a decided pod has a queue status").describe()
    }

    /// The last decision bound `pod` to `node`, and says in the queue's words what requeued it.
    fn assert_bound(sim: &Sim, pod: &str, node: &str, queue: &str) {
        let bound_to = &sim.pods.get(&format!("default/{pod}")).unwrap_or_else(|| panic!("no pod {pod}")).spec.node_name;
        assert_eq!(bound_to, node, "{:?}", sim.history.front());
        assert_eq!(last_queue(sim), queue);
    }

    /// Where a pod waits now, in the words of `sheepctl describe`.
    fn waiting(sim: &Sim, pod: &str) -> String {
        sim.waiting().find(|(key, _)| *key == pod).map(|(_, status)| status.describe()).unwrap_or_else(|| panic!("{pod} is not queued"))
    }

    #[test]
    fn parses_form_inputs() {
        assert_eq!(parse_labels(" zone=a , gpu=true ").unwrap().len(), 2);
        assert_eq!(parse_labels("").unwrap(), Labels::new());
        assert_eq!(parse_labels("oops"), Err(InputError::Parse("invalid label \"oops\": write key=value".into())));
        let taints = parse_taints("gpu=true:NoSchedule").unwrap();
        assert_eq!((taints[0].key.as_str(), taints[0].value.as_str(), taints[0].effect.as_str()), ("gpu", "true", "NoSchedule"));
        assert!(parse_taints("gpu=true").is_err());
        assert!(parse_taints("gpu=true:Sometimes").is_err());
        let tolerations = parse_tolerations("gpu=true:NoSchedule, dedicated").unwrap();
        assert_eq!(tolerations[0].operator, "Equal");
        assert_eq!((tolerations[1].key.as_str(), tolerations[1].operator.as_str()), ("dedicated", "Exists"));
        assert!(parse_tolerations("gpu:Whenever").is_err());
        assert_eq!(parse_count("3", "count", 1), Ok(3));
        assert!(parse_count("0", "count", 1).unwrap_err().to_string().contains("at least 1"));
        assert_eq!(parse_cpu_input("250m"), Ok(250));
        assert_eq!(parse_memory_input("64Mi"), Ok(64 << 20));
        assert!(parse_memory_input("lots").is_err());
    }

    #[test]
    fn a_step_binds_then_the_next_step_starts_the_pod() {
        let mut lab = three_nodes_with(batch("web", 1, 250));
        assert_eq!(lab.sims[0].queued(), 1);
        assert_eq!(waiting(&lab.sims[0], "default/web-1"), "in the active queue");
        step(&mut lab, t(1));
        let pod = lab.sims[0].pods.get("default/web-1").unwrap().clone();
        assert_eq!(pod.stage(), PodStage::WaitingForAgent);
        assert!(lab.sims[0].last.as_ref().unwrap().selected.is_some());
        assert_eq!(last_queue(&lab.sims[0]), "being bound");
        assert_eq!(lab.sims[0].waiting().count(), 0, "a bound pod leaves the queue");
        step(&mut lab, t(2));
        assert_eq!(lab.sims[0].pods.get("default/web-1").unwrap().stage(), PodStage::Running);
        assert!(!lab.has_work());
    }

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
    fn taints_and_selectors_decide_and_unfit_pods_wait_for_a_new_node() {
        let mut lab = Lab::default();
        lab.apply(LabAction::Small(t(0)));
        let mut gpu = batch("train", 1, 100);
        gpu.node_selector = parse_labels("gpu=true").unwrap();
        lab.apply(LabAction::AddPods(gpu.clone(), t(0)));
        step(&mut lab, t(1));
        // Only node-3 has the label, and it is tainted: no toleration, no node.
        let sim = &lab.sims[0];
        assert_eq!(sim.pods.get("default/train-1").unwrap().stage(), PodStage::Unschedulable);
        assert_eq!((sim.queued(), sim.parked()), (0, 1));
        assert!(sim.last.as_ref().unwrap().message.starts_with("0/3 nodes are available"), "{}", sim.last.as_ref().unwrap().message);
        assert_eq!(
            last_queue(sim),
            "unschedulable after 1 failed attempt, waiting for a cluster change (back-off 1s left) or the flush in 5m"
        );
        assert!(!lab.has_work(), "a parked pod waits for a change, not for steps");

        // A new node that fits requeues the parked pod.
        let spec = NodeSpec {
            name: "gpu-2".into(),
            cpu: 2000,
            memory: 4 << 30,
            pods: 10,
            labels: parse_labels("gpu=true").unwrap(),
            taints: vec![],
        };
        lab.apply(LabAction::AddNode(spec, t(2)));
        assert_eq!((lab.sims[0].queued(), lab.sims[0].parked()), (1, 0));
        assert_eq!(
            waiting(&lab.sims[0], "default/train-1"),
            "in the active queue after 1 failed attempt; requeued because node gpu-2 joined"
        );
        step(&mut lab, t(3));
        assert_bound(&lab.sims[0], "train-1", "gpu-2", "being bound; requeued because node gpu-2 joined");
    }

    #[test]
    fn a_cordoned_node_gets_no_pods_until_uncordoned() {
        let mut lab = one_node_with("only", 1000, batch("web", 1, 100));
        lab.apply(LabAction::Cordon { node: "only".into(), cordoned: true, now: t(0) });
        step(&mut lab, t(1));
        assert_eq!(lab.sims[1].pods.get("default/web-1").unwrap().stage(), PodStage::Unschedulable);
        lab.apply(LabAction::Cordon { node: "only".into(), cordoned: false, now: t(2) });
        assert_eq!(lab.sims[1].queued(), 1);
        step(&mut lab, t(2));
        assert_bound(&lab.sims[1], "web-1", "only", "being bound; requeued because node only was uncordoned");
    }

    #[test]
    fn a_deleted_pod_frees_room_and_requeues_the_parked_pod() {
        let mut lab = one_node_with("only", 1000, batch("web", 1, 800));
        step(&mut lab, t(1));
        lab.apply(LabAction::AddPods(batch("big", 1, 500), t(1)));
        step(&mut lab, t(2));
        assert_eq!(lab.sims[0].parked(), 1, "{:?}", lab.sims[0].history[0]);

        assert_eq!(lab.pods_named_or_owned_by("web"), 1);
        lab.apply(LabAction::DeletePods("web".into(), t(3)));
        assert_eq!(lab.pods_named_or_owned_by("web"), 0);
        assert_eq!((lab.sims[0].queued(), lab.sims[0].parked()), (1, 0));
        step(&mut lab, t(3));
        assert_bound(&lab.sims[0], "big-2", "only", "being bound; requeued because pod default/web-1 freed room on node only");

        // A deleted pending pod leaves the queue too.
        lab.apply(LabAction::AddPods(batch("late", 1, 100_000), t(3)));
        assert_eq!(lab.sims[0].queued(), 1);
        lab.apply(LabAction::DeletePods("late-3".into(), t(3)));
        assert_eq!(lab.sims[0].waiting().count(), 0);
    }

    #[test]
    fn a_change_within_the_backoff_waits_for_it_to_end() {
        let mut lab = one_node_with("small", 1000, batch("big", 1, 2000));
        step(&mut lab, at_ms(1000));
        assert_eq!(lab.sims[0].parked(), 1);

        lab.apply(LabAction::AddNode(one_node("large", 4000), at_ms(1500)));
        let sim = &lab.sims[0];
        assert_eq!((sim.queued(), sim.backing_off(), sim.parked()), (0, 1, 0));
        assert_eq!(
            waiting(sim, "default/big-1"),
            "backing off 1s after 1 failed attempt, retried in 0.5s; requeued because node large joined"
        );
        assert!(lab.has_work(), "Play keeps stepping while a pod backs off");

        step(&mut lab, at_ms(1900));
        assert_eq!(lab.sims[0].history.len(), 1, "not decided again before its back-off ends");
        step(&mut lab, at_ms(2000));
        assert_eq!(lab.sims[0].history.len(), 2);
        assert_bound(&lab.sims[0], "big-1", "large", "being bound; requeued because node large joined");
    }

    #[test]
    fn unschedulable_pods_are_retried_by_the_five_minute_flush() {
        let mut lab = three_nodes_with(batch("huge", 1, 100_000));
        step(&mut lab, t(1));
        // The agents' heartbeats catch up after a quiet page without requeueing anything.
        step(&mut lab, t(300));
        let sim = &lab.sims[0];
        assert_eq!(sim.history.len(), 1, "decided again before the flush: {:?}", sim.history[0]);
        assert_eq!(waiting(sim, "default/huge-1"), "unschedulable after 1 failed attempt, waiting for a cluster change or the flush in 1s");
        step(&mut lab, t(301));
        assert_eq!(lab.sims[0].history.len(), 2);
        assert_eq!(
            last_queue(&lab.sims[0]),
            "unschedulable after 2 failed attempts, waiting for a cluster change (back-off 2s left) or the flush in 5m; \
             requeued because 5m passed without a cluster change"
        );
    }

    #[test]
    fn the_bind_checks_room_against_the_pods_bound_to_the_node() {
        let mut lab = one_node_with("only", 1000, batch("web", 1, 500));
        // A pod another writer bound to the node, which the scheduler's cache has not seen
        // yet: the filter thinks the node is empty, the bind's room check knows better.
        let mut other = pod(&batch("other", 1, 800), "other-0".into(), t(0));
        other.spec.node_name = "only".into();
        other.status.phase = PodPhase::Running;
        for sim in &mut lab.sims {
            upsert(&mut sim.pods, other.clone());
        }
        step(&mut lab, t(1));
        let sim = &lab.sims[0];
        let outcome = &sim.history[0];
        assert_eq!(outcome.node, None);
        assert_eq!(sim.last.as_ref().unwrap().selected.as_deref(), Some("only"), "the filter saw room");
        assert!(outcome.message.starts_with("binding default/web-1 to node only was refused: "), "{}", outcome.message);
        assert!(outcome.message.contains("cpu"), "{}", outcome.message);
        assert_eq!(last_queue(sim), "backing off 1s after 1 failed attempt, retried in 1s");
        assert!(!sim.pods.get("default/web-1").unwrap().is_bound());
        assert_eq!(sim.scheduler.node_usage("only").unwrap().assumed_pods, 0, "the refused bind forgot its assumption");

        lab.apply(LabAction::DeletePods("other".into(), t(2)));
        step(&mut lab, t(2));
        assert_bound(&lab.sims[0], "web-1", "only", "being bound; requeued because its back-off ended");
    }

    #[test]
    fn lease_renewals_keep_nodes_ready_over_a_long_session() {
        let mut lab = three_nodes_with(batch("web", 1, 100));
        // Far past the 40 s grace: the simulated agents must have renewed their leases.
        step(&mut lab, t(600));
        assert!(lab.sims[0].pods.get("default/web-1").unwrap().is_bound(), "{:?}", lab.sims[0].last);
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
