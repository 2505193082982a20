//! Labs, batches and assertions the simulator's tests share.

use chrono::{Duration, TimeZone, Utc};
use shared::model::{Labels, Time};

use crate::sim::engine::Sim;
use crate::sim::lab::{Lab, LabAction, NodeSpec, PodBatch};

pub fn t(seconds: i64) -> Time {
    at_ms(seconds * 1000)
}

pub fn at_ms(ms: i64) -> Time {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + Duration::milliseconds(ms)
}

pub fn batch(prefix: &str, count: usize, cpu: i64) -> PodBatch {
    PodBatch { prefix: prefix.into(), count, cpu, memory: 64 << 20, node_selector: Labels::new(), tolerations: vec![] }
}

/// The three-node preset with `pods` added, all at t(0).
pub fn three_nodes_with(pods: PodBatch) -> Lab {
    let mut lab = Lab::default();
    lab.apply(LabAction::Small(t(0)));
    lab.apply(LabAction::AddPods(pods, t(0)));
    lab
}

/// One node with `pods` added, all at t(0).
pub fn one_node_with(name: &str, cpu: i64, pods: PodBatch) -> Lab {
    let mut lab = Lab::default();
    lab.apply(LabAction::AddNode(one_node(name, cpu), t(0)));
    lab.apply(LabAction::AddPods(pods, t(0)));
    lab
}

/// One decision per scheduler at `now`.
pub fn step(lab: &mut Lab, now: Time) {
    lab.apply(LabAction::Step { decisions: 1, now });
}

pub fn one_node(name: &str, cpu: i64) -> NodeSpec {
    NodeSpec { name: name.into(), cpu, memory: 4 << 30, pods: 10, labels: Labels::new(), taints: vec![] }
}

pub fn placements(sim: &Sim) -> Vec<(String, String)> {
    sim.pods.values().map(|p| (p.metadata.name.clone(), p.spec.node_name.clone())).collect()
}

/// Where the last decision left its pod, in the words of `sheepctl describe`.
pub fn last_queue(sim: &Sim) -> String {
    sim.history[0].queue.as_ref().expect("a decided pod has a queue status").describe()
}

/// The last decision bound `pod` to `node`, and says in the queue's words what requeued it.
pub fn assert_bound(sim: &Sim, pod: &str, node: &str, queue: &str) {
    let bound_to = &sim.pods.get(&format!("default/{pod}")).unwrap_or_else(|| panic!("no pod {pod}")).spec.node_name;
    assert_eq!(bound_to, node, "{:?}", sim.history.front());
    assert_eq!(last_queue(sim), queue);
}

/// Where a pod waits now, in the words of `sheepctl describe`.
pub fn waiting(sim: &Sim, pod: &str) -> String {
    sim.waiting().find(|(key, _)| *key == pod).map(|(_, status)| status.describe()).unwrap_or_else(|| panic!("{pod} is not queued"))
}
