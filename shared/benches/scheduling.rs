//! The scheduler on the shape of Kubernetes' SchedulingBasic test: nodes of 4 CPU, 32Gi and
//! 110 pods, all Ready with a fresh heartbeat, some pods already bound, then pods with the
//! reference example's requests (250m, 64Mi, labels app=web,tier=frontend) each scheduled and
//! assumed in turn. Throughput is in pods. Run: `cargo bench -p shared --bench scheduling`.

use std::hint::black_box;

use chrono::{TimeZone, Utc};
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use shared::model::{Container, Node, NodeResources, ObjectMeta, Pod, ResourceRequirements, Time};
use shared::registration::NodeDescription;
use shared::scheduler::{Profile, Scheduler};

const GI: i64 = 1024 * 1024 * 1024;
const MI: i64 = 1024 * 1024;

fn now() -> Time {
    Utc.with_ymd_and_hms(2025, 1, 1, 12, 0, 0).unwrap()
}

/// A node as its agent registers it, with the first heartbeat the server stamps on it.
fn node(i: usize) -> Node {
    let mut node = NodeDescription::new(&format!("node-{i:05}"), NodeResources { cpu: 4000, memory: 32 * GI, pods: 110 }).to_node(now());
    node.status.last_heartbeat = Some(now());
    node
}

fn pod(prefix: &str, i: usize) -> Pod {
    let mut pod = Pod { kind: "Pod".into(), metadata: ObjectMeta::named("default", &format!("{prefix}-{i}")), ..Default::default() };
    pod.metadata.uid = format!("{prefix}-uid-{i}");
    pod.metadata.labels.insert("app".into(), "web".into());
    pod.metadata.labels.insert("tier".into(), "frontend".into());
    pod.spec.containers.push(Container {
        name: "web".into(),
        image: "minimal".into(),
        resources: ResourceRequirements { cpu: 250, memory: 64 * MI },
        ..Default::default()
    });
    pod
}

/// A scheduler with `nodes` nodes and `init_pods` pods already bound round-robin.
fn cluster(nodes: usize, init_pods: usize) -> Scheduler {
    let mut scheduler = Scheduler::new(Profile::spread());
    for i in 0..nodes {
        scheduler.upsert_node(&node(i), now());
    }
    for i in 0..init_pods {
        let mut p = pod("init", i);
        p.spec.node_name = format!("node-{:05}", i % nodes);
        scheduler.upsert_pod(&p);
    }
    scheduler
}

fn schedule_all(scheduler: &mut Scheduler, pods: &[Pod], now: Time) -> usize {
    let mut scheduled = 0;
    for pod in pods {
        let decision = scheduler.schedule(pod, now);
        if let Some(node) = decision.selected() {
            let node = node.to_string();
            scheduler.assume(pod, &node).expect("the chosen node is known");
            scheduled += 1;
        }
    }
    scheduled
}

fn scheduling_basic(c: &mut Criterion) {
    let mut group = c.benchmark_group("scheduling_basic");
    group.sample_size(10);
    // (nodes, pods bound beforehand, pods measured), after SchedulingBasic's workloads.
    for (nodes, init_pods, measured) in [(500, 500, 5_000), (5_000, 1_000, 10_000), (50_000, 1_000, 10_000)] {
        let base = cluster(nodes, init_pods);
        let pods: Vec<Pod> = (0..measured).map(|i| pod("measured", i)).collect();
        // Every pod must fit, or the figure would mix in unschedulable decisions.
        assert_eq!(schedule_all(&mut base.clone(), &pods, now()), measured);
        group.throughput(Throughput::Elements(measured as u64));
        group.bench_with_input(BenchmarkId::new(format!("{nodes}_nodes"), format!("{measured}_pods")), &pods, |b, pods| {
            b.iter_batched(|| base.clone(), |mut s| black_box(schedule_all(&mut s, pods, now())), BatchSize::PerIteration)
        });
    }
    group.finish();
}

/// What rendering one decision into words costs (done on request, not while scheduling).
fn explain(c: &mut Criterion) {
    let mut group = c.benchmark_group("explain");
    for nodes in [500, 5_000] {
        let mut scheduler = cluster(nodes, 1_000);
        let decision = scheduler.schedule(&pod("explained", 0), now());
        group.throughput(Throughput::Elements(decision.nodes_evaluated() as u64));
        group.bench_function(format!("{nodes}_nodes"), |b| b.iter(|| black_box(decision.explain())));
    }
    group.finish();
}

criterion_group!(benches, scheduling_basic, explain);
criterion_main!(benches);
