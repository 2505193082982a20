//! The dashboard's cost of one watch update on a cluster of 100 nodes and 1,000 pods: the
//! cache reducer applying the event, plus the cluster view's layout recomputed from it (what
//! `ClusterView` does on every change before yew diffs the DOM).
//!
//! `cargo bench -p frontend --bench update`

use std::hint::black_box;
use std::rc::Rc;

use criterion::{Criterion, criterion_group, criterion_main};
use frontend::store::{Cluster, ClusterAction};
use frontend::view::stages::layout;
use shared::api::{WatchEvent, WatchEventType};
use shared::model::{Container, Kind, Node, NodeResources, Object, ObjectMeta, Pod, PodPhase, ResourceRequirements, Time};
use shared::registration::NodeDescription;
use yew::Reducible;

const NODES: usize = 100;
const PODS: usize = 1000;

/// A node as its agent registers it.
fn node(i: usize) -> Node {
    NodeDescription::new(&format!("node-{i:03}"), NodeResources { cpu: 8000, memory: 32 << 30, pods: 110 }).to_node(Time::default())
}

fn pod(i: usize, rv: u64, phase: PodPhase) -> Pod {
    let mut pod = Pod { kind: "Pod".into(), metadata: ObjectMeta::named("default", &format!("web-{i:04}")), ..Default::default() };
    pod.metadata.resource_version = rv;
    pod.metadata.uid = format!("uid-{i}");
    pod.metadata.labels.insert("app".into(), "web".into());
    pod.spec.node_name = format!("node-{:03}", i % NODES);
    pod.status.phase = phase;
    pod.spec.containers = vec![Container {
        name: "web".into(),
        image: "minimal".into(),
        resources: ResourceRequirements { cpu: 250, memory: 64 << 20 },
        ..Default::default()
    }];
    pod
}

fn cluster() -> Rc<Cluster> {
    let state: Rc<Cluster> = Rc::default();
    let nodes = (0..NODES).map(|i| Object::Node(node(i))).collect();
    let state = state.reduce(ClusterAction::Listed { kind: Kind::Node, resource_version: 1, items: nodes });
    let pods = (0..PODS).map(|i| Object::Pod(pod(i, 2, PodPhase::Pending))).collect();
    state.reduce(ClusterAction::Listed { kind: Kind::Pod, resource_version: 2, items: pods })
}

fn modified(i: usize, rv: u64) -> WatchEvent {
    WatchEvent { type_: WatchEventType::Modified, resource_version: rv, object: Some(Object::Pod(pod(i, rv, PodPhase::Running))) }
}

fn bench(c: &mut Criterion) {
    let base = cluster();
    let mut group = c.benchmark_group("dashboard_update_100_nodes_1000_pods");

    group.bench_function("reduce_one_event", |b| {
        b.iter_batched(
            || (base.clone(), vec![modified(7, 10)]),
            |(state, events)| black_box(state.reduce(ClusterAction::Watched { kind: Kind::Pod, events })),
            criterion::BatchSize::SmallInput,
        )
    });

    group.bench_function("reduce_one_event_and_layout", |b| {
        b.iter_batched(
            || (base.clone(), vec![modified(7, 10)]),
            |(state, events)| {
                let next = state.reduce(ClusterAction::Watched { kind: Kind::Pod, events });
                black_box(layout(&next.nodes, &next.pods, Some("default"), None))
            },
            criterion::BatchSize::SmallInput,
        )
    });

    group.bench_function("reduce_100_events_and_layout", |b| {
        b.iter_batched(
            || (base.clone(), (0..100).map(|i| modified(i * 10, 10 + i as u64)).collect::<Vec<_>>()),
            |(state, events)| {
                let next = state.reduce(ClusterAction::Watched { kind: Kind::Pod, events });
                black_box(layout(&next.nodes, &next.pods, Some("default"), None))
            },
            criterion::BatchSize::SmallInput,
        )
    });

    group.bench_function("relist_1000_pods_and_layout", |b| {
        b.iter_batched(
            || (base.clone(), (0..PODS).map(|i| Object::Pod(pod(i, 20, PodPhase::Running))).collect::<Vec<_>>()),
            |(state, items)| {
                let next = state.reduce(ClusterAction::Listed { kind: Kind::Pod, resource_version: 20, items });
                black_box(layout(&next.nodes, &next.pods, Some("default"), None))
            },
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
