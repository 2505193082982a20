//! Property tests of the scheduler: whatever the nodes (not ready, stale, cordoned, tainted,
//! labelled) and whatever sequence of schedule + assume, binds, failed binds, deletions,
//! finished pods, node updates and removals, no pod lands on a node that a plain reading of
//! the rules calls infeasible, no node is oversold on CPU, memory or pod count, no host port
//! is handed out twice, and a pod is called unschedulable only when no node fits.

use std::collections::BTreeMap;

use chrono::{Duration, TimeZone, Utc};
use proptest::prelude::*;
use shared::model::{
    Container, ContainerPort, Node, NodeResources, ObjectMeta, OwnerReference, Pod, PodPhase, ResourceRequirements, Taint, Time, Toleration,
};
use shared::registration::NodeDescription;
use shared::scheduler::{NodeUsage, Profile, Scheduler};

const MI: i64 = 1024 * 1024;
const TIMEOUT: i64 = 40;

fn now() -> Time {
    Utc.with_ymd_and_hms(2025, 1, 1, 12, 0, 0).unwrap()
}

#[derive(Debug, Clone)]
struct NodeGen {
    ready: &'static str,
    /// Seconds since the last heartbeat; `None`: never sent one.
    heartbeat_age: Option<i64>,
    cordoned: bool,
    zone: Option<&'static str>,
    taint: Option<(&'static str, &'static str)>,
    cpu: i64,
    memory: i64,
    pods: i64,
}

fn node_gen() -> impl Strategy<Value = NodeGen> {
    (
        prop_oneof![6 => Just("True"), 1 => Just("False"), 1 => Just("Unknown")],
        prop_oneof![6 => (0i64..=TIMEOUT).prop_map(Some), 1 => (TIMEOUT + 1..200).prop_map(Some), 1 => Just(None)],
        prop::bool::weighted(0.15),
        prop::option::of(prop_oneof![Just("a"), Just("b")]),
        prop::option::weighted(
            0.25,
            (prop_oneof![Just("gpu"), Just("db")], prop_oneof![Just("NoSchedule"), Just("NoExecute"), Just("PreferNoSchedule")]),
        ),
        0i64..3000,
        0i64..2048,
        0i64..6,
    )
        .prop_map(|(ready, heartbeat_age, cordoned, zone, taint, cpu, memory, pods)| NodeGen {
            ready,
            heartbeat_age,
            cordoned,
            zone,
            taint,
            cpu,
            memory: memory * MI,
            pods,
        })
}

/// A node as its agent registers it, then what the generator varies: its Ready status and
/// heartbeat (the server's stamp, or none), and a cordon.
fn build_node(name: &str, g: &NodeGen) -> Node {
    let mut description = NodeDescription::new(name, NodeResources { cpu: g.cpu, memory: g.memory, pods: g.pods });
    if let Some(zone) = g.zone {
        description.labels.insert("zone".into(), zone.into());
    }
    if let Some((key, effect)) = g.taint {
        description.taints.push(Taint { key: key.into(), value: "yes".into(), effect: effect.into() });
    }
    let mut node = description.to_node(now());
    node.status.conditions[0].status = g.ready.into();
    node.status.last_heartbeat = g.heartbeat_age.map(|age| now() - Duration::seconds(age));
    node.status.unschedulable = g.cordoned;
    node
}

#[derive(Debug, Clone)]
struct PodGen {
    cpu: i64,
    memory: i64,
    zone: Option<&'static str>,
    /// 0: none, 1: `gpu=yes` (Equal, any effect), 2: `db` Exists NoExecute only, 3: everything.
    toleration: u8,
    port: Option<(i32, &'static str, &'static str)>,
    owner: Option<u8>,
}

fn pod_gen() -> impl Strategy<Value = PodGen> {
    (
        prop_oneof![1 => Just(0i64), 4 => 1i64..1200],
        prop_oneof![1 => Just(0i64), 4 => 1i64..800],
        prop::option::weighted(0.3, prop_oneof![Just("a"), Just("b")]),
        0u8..4,
        prop::option::weighted(
            0.3,
            (
                prop_oneof![Just(8080), Just(9090)],
                prop_oneof![Just("TCP"), Just("UDP"), Just("")],
                prop_oneof![Just(""), Just("127.0.0.1"), Just("0.0.0.0")],
            ),
        ),
        prop::option::of(0u8..3),
    )
        .prop_map(|(cpu, memory, zone, toleration, port, owner)| PodGen { cpu, memory: memory * MI, zone, toleration, port, owner })
}

fn build_pod(id: usize, g: &PodGen) -> Pod {
    let mut pod = Pod { kind: "Pod".into(), metadata: ObjectMeta::named("default", &format!("p{id}")), ..Default::default() };
    pod.metadata.uid = format!("uid-{id}");
    let mut container = Container {
        name: "c".into(),
        image: "minimal".into(),
        resources: ResourceRequirements { cpu: g.cpu, memory: g.memory },
        ..Default::default()
    };
    if let Some((port, protocol, ip)) = g.port {
        container.ports.push(ContainerPort {
            container_port: 80,
            host_port: Some(port),
            protocol: protocol.into(),
            host_ip: ip.into(),
            ..Default::default()
        });
    }
    pod.spec.containers.push(container);
    if let Some(zone) = g.zone {
        pod.spec.node_selector.insert("zone".into(), zone.into());
    }
    let toleration = |key: &str, operator: &str, value: &str, effect: &str| Toleration {
        key: key.into(),
        operator: operator.into(),
        value: value.into(),
        effect: effect.into(),
    };
    match g.toleration {
        1 => pod.spec.tolerations.push(toleration("gpu", "Equal", "yes", "")),
        2 => pod.spec.tolerations.push(toleration("db", "Exists", "", "NoExecute")),
        3 => pod.spec.tolerations.push(toleration("", "Exists", "", "")),
        _ => {}
    }
    if let Some(owner) = g.owner {
        pod.metadata.owner_references.push(OwnerReference {
            kind: "Deployment".into(),
            name: format!("d{owner}"),
            uid: format!("d{owner}"),
            controller: true,
            block_owner_deletion: true,
        });
    }
    pod
}

#[derive(Debug, Clone)]
enum Then {
    /// The bind succeeds and the bound pod is seen.
    Bind,
    /// The bind fails.
    Forget,
    /// The bind is still in flight.
    Wait,
}

#[derive(Debug, Clone)]
enum Op {
    Schedule(PodGen, Then),
    Bind(usize),
    Forget(usize),
    Delete(usize),
    Finish(usize),
    UpdateNode(usize, NodeGen),
    RemoveNode(usize),
    AddNode(NodeGen),
}

fn op_gen() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (pod_gen(), prop_oneof![Just(Then::Bind), Just(Then::Forget), Just(Then::Wait)]).prop_map(|(p, t)| Op::Schedule(p, t)),
        2 => any::<usize>().prop_map(Op::Bind),
        1 => any::<usize>().prop_map(Op::Forget),
        2 => any::<usize>().prop_map(Op::Delete),
        1 => any::<usize>().prop_map(Op::Finish),
        2 => (any::<usize>(), node_gen()).prop_map(|(i, g)| Op::UpdateNode(i, g)),
        1 => any::<usize>().prop_map(Op::RemoveNode),
        1 => node_gen().prop_map(Op::AddNode),
    ]
}

#[derive(Debug, Clone)]
struct Placed {
    pod: Pod,
    node: String,
    assumed: bool,
}

/// The rules, read plainly, against the test's own record of what is on each node.
#[derive(Default)]
struct Model {
    nodes: BTreeMap<String, Node>,
    placed: Vec<Placed>,
}

fn tolerated(taint: &Taint, tolerations: &[Toleration]) -> bool {
    tolerations.iter().any(|t| {
        (t.effect.is_empty() || t.effect == taint.effect)
            && (t.key.is_empty() || t.key == taint.key)
            && if t.operator == "Exists" { true } else { t.value == taint.value }
    })
}

fn host_ports(pod: &Pod) -> Vec<(i32, String, String)> {
    pod.spec
        .containers
        .iter()
        .flat_map(|c| &c.ports)
        .filter_map(|p| {
            p.host_port.map(|hp| {
                let protocol = if p.protocol.is_empty() { "TCP".to_string() } else { p.protocol.to_uppercase() };
                let ip = if p.host_ip == "0.0.0.0" { String::new() } else { p.host_ip.clone() };
                (hp, protocol, ip)
            })
        })
        .collect()
}

fn ports_clash(a: &(i32, String, String), b: &(i32, String, String)) -> bool {
    a.0 == b.0 && a.1 == b.1 && (a.2.is_empty() || b.2.is_empty() || a.2 == b.2)
}

impl Model {
    fn usage(&self, node: &str) -> NodeUsage {
        let mut usage = NodeUsage::default();
        for p in self.placed.iter().filter(|p| p.node == node) {
            let r = p.pod.spec.requests();
            usage.cpu += r.cpu;
            usage.memory += r.memory;
            usage.pods += 1;
            usage.assumed_pods += p.assumed as usize;
        }
        usage
    }

    fn feasible(&self, name: &str, pod: &Pod) -> bool {
        let node = &self.nodes[name];
        let ready = node.status.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True");
        let fresh = node.status.last_heartbeat.is_some_and(|t| (now() - t).num_seconds() <= TIMEOUT);
        let selected = pod.spec.node_selector.iter().all(|(k, v)| node.metadata.labels.get(k) == Some(v));
        let tolerates = node
            .status
            .taints
            .iter()
            .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
            .all(|t| tolerated(t, &pod.spec.tolerations));
        let used = self.usage(name);
        let want = pod.spec.requests();
        let alloc = node.status.allocatable;
        let fits = (want.cpu == 0 || used.cpu + want.cpu <= alloc.cpu) && (want.memory == 0 || used.memory + want.memory <= alloc.memory);
        let room = used.pods < alloc.pods;
        let wanted = host_ports(pod);
        let ports_free = self
            .placed
            .iter()
            .filter(|p| p.node == name)
            .flat_map(|p| host_ports(&p.pod))
            .all(|used| wanted.iter().all(|w| !ports_clash(w, &used)));
        ready && fresh && !node.status.unschedulable && selected && tolerates && fits && room && ports_free
    }

    /// No node oversold, no port twice, and the scheduler's counters agree with the model.
    fn check(&self, scheduler: &Scheduler) -> Result<(), TestCaseError> {
        for (name, node) in &self.nodes {
            let used = self.usage(name);
            let alloc = node.status.allocatable;
            prop_assert!(used.cpu <= alloc.cpu, "{name}: cpu {} of {}", used.cpu, alloc.cpu);
            prop_assert!(used.memory <= alloc.memory, "{name}: memory {} of {}", used.memory, alloc.memory);
            prop_assert!(used.pods <= alloc.pods, "{name}: {} pods of {}", used.pods, alloc.pods);
            let ports: Vec<_> = self.placed.iter().filter(|p| p.node == *name).flat_map(|p| host_ports(&p.pod)).collect();
            for (i, a) in ports.iter().enumerate() {
                for b in &ports[i + 1..] {
                    prop_assert!(!ports_clash(a, b), "{name}: host port {a:?} given twice");
                }
            }
            prop_assert_eq!(scheduler.node_usage(name), Some(used), "counters of {}", name);
        }
        prop_assert_eq!(scheduler.node_count(), self.nodes.len());
        Ok(())
    }
}

fn bound(pod: &Pod, node: &str) -> Pod {
    let mut pod = pod.clone();
    pod.spec.node_name = node.to_string();
    pod
}

fn run(initial: Vec<NodeGen>, ops: Vec<Op>, profile: Profile) -> Result<(), TestCaseError> {
    let mut scheduler = Scheduler::new(profile);
    let mut model = Model::default();
    let mut next_node = 0;
    let mut add_node = |g: &NodeGen, scheduler: &mut Scheduler, model: &mut Model| {
        let node = build_node(&format!("node-{next_node}"), g);
        next_node += 1;
        scheduler.upsert_node(&node, now());
        model.nodes.insert(node.metadata.name.clone(), node);
    };
    for g in &initial {
        add_node(g, &mut scheduler, &mut model);
    }
    for (id, op) in ops.into_iter().enumerate() {
        match op {
            Op::Schedule(g, then) => {
                let pod = build_pod(id, &g);
                let feasible: Vec<String> = model.nodes.keys().filter(|n| model.feasible(n, &pod)).cloned().collect();
                let decision = scheduler.schedule(&pod, now());
                match decision.selected() {
                    None => prop_assert!(
                        feasible.is_empty(),
                        "unschedulable ({:?}) although {feasible:?} fit",
                        decision.unschedulable_message()
                    ),
                    Some(node) => {
                        let node = node.to_string();
                        prop_assert!(feasible.contains(&node), "placed on infeasible {node}: {:#?}", decision.explain());
                        scheduler.assume(&pod, &node).map_err(|e| TestCaseError::fail(e.to_string()))?;
                        match then {
                            Then::Bind => {
                                scheduler.upsert_pod(&bound(&pod, &node));
                                model.placed.push(Placed { pod, node, assumed: false });
                            }
                            Then::Forget => prop_assert!(scheduler.forget(&pod)),
                            Then::Wait => model.placed.push(Placed { pod, node, assumed: true }),
                        }
                    }
                }
            }
            Op::Bind(i) if !model.placed.is_empty() => {
                let i = i % model.placed.len();
                let p = &mut model.placed[i];
                scheduler.upsert_pod(&bound(&p.pod, &p.node));
                p.assumed = false;
            }
            Op::Forget(i) if !model.placed.is_empty() => {
                let i = i % model.placed.len();
                let released = scheduler.forget(&model.placed[i].pod);
                prop_assert_eq!(released, model.placed[i].assumed);
                if released {
                    model.placed.remove(i);
                }
            }
            Op::Delete(i) if !model.placed.is_empty() => {
                let p = model.placed.remove(i % model.placed.len());
                scheduler.remove_pod(&bound(&p.pod, &p.node));
            }
            Op::Finish(i) if !model.placed.is_empty() => {
                let p = model.placed.remove(i % model.placed.len());
                let mut done = bound(&p.pod, &p.node);
                done.status.phase = PodPhase::Succeeded;
                scheduler.upsert_pod(&done);
            }
            Op::UpdateNode(i, g) if !model.nodes.is_empty() => {
                // Flags, labels and taints change; allocatable stays, so "never oversold" stays meaningful.
                let name = model.nodes.keys().nth(i % model.nodes.len()).unwrap().clone();
                let old = model.nodes[&name].status.allocatable;
                let mut node = build_node(&name, &g);
                node.status.allocatable = old;
                scheduler.upsert_node(&node, now());
                model.nodes.insert(name, node);
            }
            Op::RemoveNode(i) if !model.nodes.is_empty() => {
                let name = model.nodes.keys().nth(i % model.nodes.len()).unwrap().clone();
                scheduler.remove_node(&name);
                model.nodes.remove(&name);
                model.placed.retain(|p| p.node != name);
            }
            Op::AddNode(g) => add_node(&g, &mut scheduler, &mut model),
            _ => {}
        }
        model.check(&scheduler)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn spread_never_places_a_pod_where_it_does_not_fit(
        initial in prop::collection::vec(node_gen(), 0..7),
        ops in prop::collection::vec(op_gen(), 1..60),
    ) {
        run(initial, ops, Profile::spread())?;
    }

    #[test]
    fn bin_pack_never_places_a_pod_where_it_does_not_fit(
        initial in prop::collection::vec(node_gen(), 0..7),
        ops in prop::collection::vec(op_gen(), 1..60),
    ) {
        run(initial, ops, Profile::bin_pack())?;
    }
}
