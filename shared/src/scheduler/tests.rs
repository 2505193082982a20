//! Unit tests of the plugins, the adaptive rule, rotation, the assume cache and explanations.

use chrono::{TimeZone, Utc};

use super::*;
use crate::model::{Condition, Container, NodeResources, ObjectMeta, ResourceRequirements, Time, conditions};

fn now() -> Time {
    Utc.with_ymd_and_hms(2025, 1, 1, 12, 0, 0).unwrap()
}

fn node(name: &str, cpu: i64, memory: i64, pods: i64) -> Node {
    let mut node = Node { kind: "Node".into(), metadata: ObjectMeta::named("", name), ..Default::default() };
    node.status.allocatable = NodeResources { cpu, memory, pods };
    node.status.capacity = node.status.allocatable;
    node.status.conditions.push(Condition { type_: conditions::NODE_READY.into(), status: conditions::TRUE.into(), ..Default::default() });
    node.status.last_heartbeat = Some(now());
    node
}

fn pod(name: &str, cpu: i64, memory: i64) -> Pod {
    let mut pod = Pod { kind: "Pod".into(), metadata: ObjectMeta::named("default", name), ..Default::default() };
    pod.metadata.uid = format!("uid-{name}");
    pod.spec.containers.push(Container {
        name: "c".into(),
        image: "minimal".into(),
        resources: ResourceRequirements { cpu, memory },
        ..Default::default()
    });
    pod
}

const GI: i64 = 1024 * 1024 * 1024;
const MI: i64 = 1024 * 1024;

#[test]
fn schedules_on_the_only_node_that_fits() {
    let mut s = Scheduler::new(Profile::spread());
    s.upsert_node(&node("a", 1000, GI, 10));
    s.upsert_node(&node("b", 4000, 4 * GI, 10));
    let d = s.schedule(&pod("p", 2000, 64 * MI), now());
    assert_eq!(d.selected(), Some("b"));
    assert_eq!(d.unschedulable_message(), None);
}
