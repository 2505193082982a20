//! Property test of hostile quantities: random and extreme amounts (negative, past the bounds,
//! past an i64, fractions, quantity strings) go through what the API does with a manifest
//! (parse, validate), then through the scheduler (schedule, assume) and the binding CAS
//! (`ops::bind` committed to a store), plus bindings a client asks for directly. Whatever
//! gets in, no node's bound requests ever exceed its allocatable CPU, memory or pod count.

use chrono::Utc;
use proptest::prelude::*;
use serde_json::{Value, json};
use server::ops;
use server::store::{CachedStore, Key, Store, Txn};
use shared::limits::{MAX_CONTAINERS, MAX_CPU_MILLICORES, MAX_MEMORY_BYTES, MAX_NODE_PODS};
use shared::model::{Kind, Namespace, Node, Object, ObjectMeta, Pod};
use shared::registration::Registrant;
use shared::scheduler::Scheduler;
use shared::validation::{validate_node, validate_pod};

/// An amount as a manifest may write it: mostly small, often extreme.
fn quantity() -> impl Strategy<Value = Value> {
    prop_oneof![
        14 => (0i64..3000).prop_map(|n| json!(n)),
        1 => any::<i64>().prop_map(|n| json!(n)),
        1 => any::<u64>().prop_map(|n| json!(n)),
        1 => prop_oneof![
            Just(json!(i64::MAX)),
            Just(json!(5_000_000_000_000_000_000i64)),
            Just(json!(MAX_CPU_MILLICORES)),
            Just(json!(MAX_CPU_MILLICORES + 1)),
            Just(json!(MAX_MEMORY_BYTES)),
            Just(json!(MAX_MEMORY_BYTES + 1)),
            Just(json!(-1)),
            Just(json!(1e30)),
            Just(json!(1.5e3)),
            Just(json!(0.5)),
        ],
        1 => prop_oneof![
            Just(json!("-154742504910672534362390527Ti")),
            Just(json!("154742504910672534362390527Ti")),
            Just(json!("9223372036854775807m")),
            Just(json!("64Ti")),
            Just(json!("1Pi")),
            Just(json!("500m")),
            Just(json!("0.5")),
            Just(json!("-1")),
        ],
    ]
}

fn pod_count() -> impl Strategy<Value = Value> {
    prop_oneof![8 => (0i64..6).prop_map(|n| json!(n)), 1 => Just(json!(MAX_NODE_PODS + 1)), 1 => any::<i64>().prop_map(|n| json!(n))]
}

/// A node manifest; its capacity is the same as its allocatable unless the generator says
/// otherwise.
fn node_manifest() -> impl Strategy<Value = Value> {
    (quantity(), quantity(), pod_count()).prop_map(|(cpu, memory, pods)| {
        json!({"kind": "Node", "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
            "capacity": {"cpu": cpu, "memory": memory, "pods": pods},
            "conditions": [{"type": "Ready", "status": "True"}]
        }})
    })
}

fn pod_manifest() -> impl Strategy<Value = Value> {
    prop::collection::vec((quantity(), quantity()), 1..4).prop_map(|containers| {
        let containers: Vec<Value> = containers
            .into_iter()
            .enumerate()
            .map(|(i, (cpu, memory))| json!({"name": format!("c{i}"), "image": "minimal", "resources": {"cpu": cpu, "memory": memory}}))
            .collect();
        json!({"kind": "Pod", "spec": {"containers": containers}})
    })
}

/// What the API does with a node manifest before it stores it: parse, then validate.
fn admit_node(manifest: Value, name: &str) -> Option<Node> {
    let mut node: Node = serde_json::from_value(manifest).ok()?;
    node.metadata.name = name.to_string();
    validate_node(&node).ok().map(|()| node)
}

fn admit_pod(manifest: Value, name: &str) -> Option<Pod> {
    let mut pod: Pod = serde_json::from_value(manifest).ok()?;
    pod.metadata = ObjectMeta::named("default", name);
    validate_pod(&pod).ok().map(|()| pod)
}

/// Every stored node's bound, unfinished pods, summed without any chance of wrapping,
/// against its allocatable.
fn check_no_node_is_oversold(store: &CachedStore) -> Result<(), TestCaseError> {
    for node in store.list(Kind::Node, None).1 {
        let Object::Node(node) = &*node else { continue };
        let (mut cpu, mut memory, mut pods) = (0i128, 0i128, 0i64);
        for pod in store.pods_on_node(&node.metadata.name).1 {
            let Object::Pod(pod) = &*pod else { continue };
            if pod.status.phase.is_terminal() {
                continue;
            }
            for container in &pod.spec.containers {
                prop_assert!((0..=MAX_CPU_MILLICORES).contains(&container.resources.cpu), "a stored cpu request is out of bounds");
                prop_assert!((0..=MAX_MEMORY_BYTES).contains(&container.resources.memory), "a stored memory request is out of bounds");
                cpu += i128::from(container.resources.cpu);
                memory += i128::from(container.resources.memory);
            }
            pods += 1;
        }
        let allocatable = node.status.allocatable;
        let name = &node.metadata.name;
        prop_assert!(cpu <= i128::from(allocatable.cpu), "{name}: {cpu}m bound of {}m", allocatable.cpu);
        prop_assert!(memory <= i128::from(allocatable.memory), "{name}: {memory} bytes bound of {}", allocatable.memory);
        prop_assert!(pods <= allocatable.pods, "{name}: {pods} pods bound of {}", allocatable.pods);
    }
    Ok(())
}

async fn run(nodes: Vec<Value>, pods: Vec<(Value, usize)>) -> Result<(), TestCaseError> {
    let store = CachedStore::in_memory(10_000);
    let mut scheduler = Scheduler::default();
    let now = Utc::now();
    let default = Namespace { kind: "Namespace".into(), metadata: ObjectMeta::named("", "default"), ..Namespace::default() };
    store.commit(Txn::new().with(ops::create(default))).await.unwrap();
    let mut node_names = Vec::new();
    for (i, manifest) in nodes.into_iter().enumerate() {
        let Some(mut node) = admit_node(manifest, &format!("node-{i}")) else { continue };
        node.status.last_heartbeat = Some(now);
        let registration = ops::register_node(node, Registrant::OwnNode, now, shared::readiness::DEFAULT_NODE_MONITOR_GRACE);
        store.commit(registration).await.unwrap();
        let Some(Object::Node(stored)) = store.get(&Key::new(Kind::Node, "", &format!("node-{i}"))).as_deref().cloned() else {
            panic!("node-{i} was registered but is not stored");
        };
        scheduler.upsert_node(&stored, chrono::Utc::now());
        node_names.push(stored.metadata.name);
    }
    for (i, (manifest, direct_target)) in pods.into_iter().enumerate() {
        let name = format!("pod-{i}");
        let Some(mut pod) = admit_pod(manifest, &name) else { continue };
        prop_assert!(pod.spec.containers.len() <= MAX_CONTAINERS);
        pod.metadata.uid = format!("uid-{i}");
        pod.kind = "Pod".into();
        store.commit(Txn::new().with(ops::create(pod.clone()))).await.unwrap();
        let decision = scheduler.schedule(&pod, now);
        // The scheduler's choice, else a binding a client asks for on its own.
        let target = match decision.selected() {
            Some(node) => {
                scheduler.assume(&pod, node).unwrap();
                node.to_string()
            }
            None if node_names.is_empty() => continue,
            None => node_names[direct_target % node_names.len()].clone(),
        };
        match store.commit(ops::bind("default", &name, &target, &pod.metadata.uid, "test", now)).await {
            Ok(_) => {
                if let Some(Object::Pod(bound)) = store.get(&Key::new(Kind::Pod, "default", &name)).as_deref() {
                    scheduler.upsert_pod(bound);
                }
            }
            Err(_) => {
                scheduler.forget(&pod);
            }
        }
        check_no_node_is_oversold(&store)?;
    }
    store.close().await;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn no_node_is_ever_oversold_whatever_the_quantities(
        nodes in prop::collection::vec(node_manifest(), 1..4),
        pods in prop::collection::vec((pod_manifest(), any::<usize>()), 1..16),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(run(nodes, pods))?;
    }
}
