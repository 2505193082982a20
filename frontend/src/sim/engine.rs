//! One simulated scheduler: the server's own scheduler and scheduling queue
//! (`shared::scheduler`) over a made-up cluster, driven the way the server's loop drives them:
//! decide, bind with the server's room check, park, back off and requeue. Pure: callers pass `now`.

use std::collections::VecDeque;
use std::rc::Rc;

use shared::model::{Condition, Node, Pod, PodPhase, PodStage, Time, conditions, set_condition};
use shared::scheduler::{ClusterEvent, Explanation, Profile, QueueState, QueueStatus, Scheduler, SchedulingQueue, check_room};

use crate::store::{Collection, Resource};

/// A simulated agent renews its node's lease this often (in simulated wall time), a quarter
/// of the scheduler's 40 s grace, as a real agent does.
const HEARTBEAT_EVERY_SECONDS: i64 = 10;
/// Outcomes kept for the log.
const HISTORY: usize = 50;

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
    pub(super) fn catch_up(&mut self, now: Time) {
        self.now = self.now.max(now);
        self.heartbeat();
    }

    /// A change that may fit parked pods requeues them, as the server's loop does.
    fn cluster_changed(&mut self, change: Option<ClusterEvent>) {
        if let Some(event) = change {
            self.queue.cluster_changed(&event, self.now_ms());
        }
    }

    pub(super) fn put_node(&mut self, node: Node) {
        let change = self.scheduler.upsert_node(&node, self.now);
        self.cluster_changed(change);
        upsert(&mut self.nodes, node);
    }

    pub(super) fn put_pod(&mut self, pod: Pod) {
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

    pub(super) fn set_cordon(&mut self, name: &str, cordoned: bool) {
        if let Some(node) = self.nodes.get(name) {
            let mut node = (**node).clone();
            node.status.unschedulable = cordoned;
            self.put_node(node);
        }
    }

    pub(super) fn add_pod(&mut self, pod: Pod) {
        self.queue.add(pod.metadata.key());
        self.put_pod(pod);
    }

    /// Deletes the pods [`named_or_owned_by`] `name`. The simulated agents stop them at
    /// once, so the room they held is free at once.
    pub(super) fn delete_pods(&mut self, name: &str) {
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
    pub(super) fn step(&mut self, step: u64, decisions: usize) {
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

pub(super) fn upsert<T: Resource>(collection: &mut Collection<T>, item: T) {
    Rc::make_mut(&mut collection.items).put(Rc::new(item));
}

/// Whether `pod` is called `name` or its controller is (`web` names every pod of a batch,
/// `web-3` one of them).
pub(super) fn named_or_owned_by(pod: &Pod, name: &str) -> bool {
    pod.metadata.name == name || pod.metadata.controller().is_some_and(|owner| owner.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::fixtures::*;
    use crate::sim::input::parse_labels;
    use crate::sim::lab::{Lab, LabAction, NodeSpec, pod};

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
}
