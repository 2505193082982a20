//! Unit tests of the plugins, the adaptive rule, rotation, the assume cache and explanations.

use chrono::{TimeZone, Utc};

use super::*;
use crate::model::{Container, NodeResources, ObjectMeta, ResourceRequirements, Taint, Time, Toleration, conditions};
use crate::registration::NodeDescription;

fn now() -> Time {
    Utc.with_ymd_and_hms(2025, 1, 1, 12, 0, 0).unwrap()
}

/// A node as its agent registers it, with the first heartbeat the server stamps on it.
fn node(name: &str, cpu: i64, memory: i64, pods: i64) -> Node {
    let mut node = NodeDescription::new(name, NodeResources { cpu, memory, pods }).to_node(now());
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
    s.upsert_node(&node("a", 1000, GI, 10), now());
    s.upsert_node(&node("b", 4000, 4 * GI, 10), now());
    let d = s.schedule(&pod("p", 2000, 64 * MI), now());
    assert_eq!(d.selected(), Some("b"));
    assert_eq!(d.unschedulable_message(), None);
}

fn cluster(profile: Profile, nodes: &[Node]) -> Scheduler {
    let mut s = Scheduler::new(profile);
    for n in nodes {
        s.upsert_node(n, now());
    }
    s
}

fn bound(mut pod: Pod, node: &str) -> Pod {
    pod.spec.node_name = node.to_string();
    pod
}

fn taint(key: &str, value: &str, effect: &str) -> Taint {
    Taint { key: key.into(), value: value.into(), effect: effect.into() }
}

fn toleration(key: &str, operator: &str, value: &str, effect: &str) -> Toleration {
    Toleration { key: key.into(), operator: operator.into(), value: value.into(), effect: effect.into() }
}

fn with_host_port(mut pod: Pod, port: i32, protocol: &str, ip: &str) -> Pod {
    pod.spec.containers[0].ports.push(crate::model::ContainerPort {
        container_port: 80,
        host_port: Some(port),
        protocol: protocol.into(),
        host_ip: ip.into(),
        ..Default::default()
    });
    pod
}

fn owned(mut pod: Pod, uid: &str) -> Pod {
    pod.metadata.owner_references.push(crate::model::OwnerReference {
        kind: "Deployment".into(),
        name: "web".into(),
        uid: uid.into(),
        controller: true,
        block_owner_deletion: true,
    });
    pod
}

/// The single failing filter of a one-node cluster, as the explanation words it.
fn failure_on(node: Node, pod: &Pod) -> (String, String, String) {
    let mut s = cluster(Profile::spread(), &[node]);
    let d = s.schedule(pod, now());
    assert_eq!(d.selected(), None, "the pod should not fit");
    let e = d.explain();
    let failed: Vec<&FilterVerdict> = e.nodes[0].filters.iter().filter(|f| f.verdict == Verdict::Failed).collect();
    assert_eq!(failed.len(), 1);
    (failed[0].filter.clone(), failed[0].reason.clone(), failed[0].detail.clone())
}

fn fits(node: Node, pod: &Pod) -> bool {
    cluster(Profile::spread(), &[node]).schedule(pod, now()).selected().is_some()
}

// --- the adaptive rule ------------------------------------------------------------------

#[test]
fn adaptive_rule_matches_kubernetes() {
    assert_eq!(num_nodes_to_find(0, None), 0);
    assert_eq!(num_nodes_to_find(1, None), 1);
    assert_eq!(num_nodes_to_find(99, None), 99);
    // 100 nodes: 50% is 50, raised to the minimum of 100.
    assert_eq!(num_nodes_to_find(100, None), 100);
    assert_eq!(num_nodes_to_find(200, None), 100);
    // 1,000 nodes: 50 − 8 = 42%.
    assert_eq!(num_nodes_to_find(1000, None), 420);
    assert_eq!(num_nodes_to_find(5000, None), 500);
    // 50,000 nodes: 50 − 400 is below the floor of 5%.
    assert_eq!(num_nodes_to_find(50_000, None), 2500);
    assert_eq!(num_nodes_to_find(5000, Some(0)), 500);
    assert_eq!(num_nodes_to_find(5000, Some(30)), 1500);
    assert_eq!(num_nodes_to_find(5000, Some(1)), 100);
    assert_eq!(num_nodes_to_find(5000, Some(100)), 5000);
    assert_eq!(num_nodes_to_find(5000, Some(250)), 5000);
    assert_eq!(num_nodes_to_find(50, Some(10)), 50);
}

// --- filters ----------------------------------------------------------------------------

#[test]
fn node_ready_wants_ready_true_and_a_fresh_heartbeat() {
    let p = pod("p", 100, MI);
    let mut not_ready = node("n", 4000, GI, 10);
    not_ready.status.conditions[0].status = conditions::FALSE.into();
    let (filter, reason, detail) = failure_on(not_ready, &p);
    assert_eq!((filter.as_str(), reason.as_str()), ("NodeReady", "node(s) were not ready"));
    assert!(detail.contains("Ready condition is False"), "{detail}");

    let mut no_condition = node("n", 4000, GI, 10);
    no_condition.status.conditions.clear();
    assert!(failure_on(no_condition, &p).2.contains("Unknown"));

    let mut silent = node("n", 4000, GI, 10);
    silent.status.last_heartbeat = None;
    assert!(failure_on(silent, &p).2.contains("never sent a heartbeat"));

    let mut stale = node("n", 4000, GI, 10);
    stale.status.last_heartbeat = Some(now() - chrono::Duration::seconds(41));
    let (_, _, detail) = failure_on(stale, &p);
    assert_eq!(detail, "last heartbeat 41s ago, older than the node monitor grace of 40s");

    let mut just_fresh = node("n", 4000, GI, 10);
    just_fresh.status.last_heartbeat = Some(now() - chrono::Duration::seconds(40));
    assert!(fits(just_fresh, &p));
}

#[test]
fn heartbeat_timeout_comes_from_the_profile() {
    let mut n = node("n", 4000, GI, 10);
    n.status.last_heartbeat = Some(now() - chrono::Duration::seconds(100));
    let mut profile = Profile::spread();
    profile.node_monitor_grace = std::time::Duration::from_secs(120);
    assert_eq!(cluster(profile, &[n]).schedule(&pod("p", 1, 1), now()).selected(), Some("n"));
}

#[test]
fn cordoned_nodes_take_no_pods() {
    let mut n = node("n", 4000, GI, 10);
    n.status.unschedulable = true;
    let (filter, reason, _) = failure_on(n, &pod("p", 100, MI));
    assert_eq!((filter.as_str(), reason.as_str()), ("NodeUnschedulable", "node(s) were unschedulable"));
}

#[test]
fn node_selector_must_be_a_subset_of_the_labels() {
    let mut n = node("n", 4000, GI, 10);
    n.metadata.labels.insert("disktype".into(), "hdd".into());
    n.metadata.labels.insert("zone".into(), "a".into());
    let mut p = pod("p", 100, MI);
    p.spec.node_selector.insert("zone".into(), "a".into());
    assert!(fits(n.clone(), &p));
    p.spec.node_selector.insert("disktype".into(), "ssd".into());
    let (filter, reason, detail) = failure_on(n.clone(), &p);
    assert_eq!((filter.as_str(), reason.as_str()), ("NodeSelector", "node(s) didn't match node selector"));
    assert_eq!(detail, "the pod wants disktype=ssd; the node has disktype=hdd");
    p.spec.node_selector.clear();
    p.spec.node_selector.insert("gpu".into(), "true".into());
    assert_eq!(failure_on(n, &p).2, "the pod wants gpu=true; the node has no label gpu");
}

#[test]
fn toleration_rules_follow_kubernetes() {
    let t = taint("dedicated", "gpu", "NoSchedule");
    assert!(tolerates(&toleration("dedicated", "Equal", "gpu", "NoSchedule"), &t));
    assert!(tolerates(&toleration("dedicated", "", "gpu", ""), &t));
    assert!(!tolerates(&toleration("dedicated", "Equal", "cpu", "NoSchedule"), &t));
    assert!(tolerates(&toleration("dedicated", "Exists", "", ""), &t));
    assert!(!tolerates(&toleration("dedicated", "Exists", "", "NoExecute"), &t));
    assert!(!tolerates(&toleration("other", "Exists", "", ""), &t));
    assert!(tolerates(&toleration("", "Exists", "", ""), &t), "empty key with Exists tolerates everything");
    assert!(!tolerates(&toleration("dedicated", "Bogus", "gpu", ""), &t));
}

#[test]
fn untolerated_hard_taints_filter_and_soft_ones_do_not() {
    let p = pod("p", 100, MI);
    let mut soft = node("n", 4000, GI, 10);
    soft.status.taints.push(taint("maybe", "", "PreferNoSchedule"));
    assert!(fits(soft, &p));

    let mut hard = node("n", 4000, GI, 10);
    hard.status.taints.push(taint("maybe", "", "PreferNoSchedule"));
    hard.status.taints.push(taint("dedicated", "gpu", "NoSchedule"));
    hard.status.taints.push(taint("node.kubernetes.io/unreachable", "", "NoExecute"));
    let (filter, reason, detail) = failure_on(hard.clone(), &p);
    assert_eq!(filter, "TaintToleration");
    assert_eq!(reason, "node(s) had untolerated taint {dedicated: gpu}");
    assert_eq!(detail, "taint dedicated=gpu:NoSchedule is not tolerated by the pod");

    let mut tolerant = p.clone();
    tolerant.spec.tolerations.push(toleration("dedicated", "Equal", "gpu", "NoSchedule"));
    assert_eq!(failure_on(hard.clone(), &tolerant).1, "node(s) had untolerated taint {node.kubernetes.io/unreachable: }");
    tolerant.spec.tolerations.push(toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute"));
    assert!(fits(hard.clone(), &tolerant));

    let mut everything = p;
    everything.spec.tolerations.push(toleration("", "Exists", "", ""));
    assert!(fits(hard, &everything));
}

#[test]
fn resources_fit_counts_pods_already_on_the_node() {
    let mut s = cluster(Profile::spread(), &[node("n", 1000, GI, 10)]);
    s.upsert_pod(&bound(pod("a", 600, 100 * MI), "n"));
    // The original compared each pod with the whole node: 600m fits 1000m, and so does
    // another 600m. Counting the bound pod, it does not.
    let d = s.schedule(&pod("b", 600, 100 * MI), now());
    assert_eq!(d.selected(), None);
    assert_eq!(d.unschedulable_message().unwrap(), "0/1 nodes are available: 1 Insufficient cpu.");
    let e = d.explain();
    let fit = &e.nodes[0].filters[4];
    assert_eq!(fit.filter, "NodeResourcesFit");
    assert_eq!(fit.detail, "the pod requests cpu 600m; 600m of 1 already requested, 400m free");
    assert_eq!(s.schedule(&pod("c", 400, 100 * MI), now()).selected(), Some("n"));
}

#[test]
fn resources_fit_reports_cpu_and_memory_together() {
    let d = cluster(Profile::spread(), &[node("n", 1000, GI, 10)]).schedule(&pod("p", 2000, 2 * GI), now());
    assert_eq!(d.unschedulable_message().unwrap(), "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.");
    assert_eq!(d.explain().nodes[0].filters[4].reason, "Insufficient cpu, Insufficient memory");
}

#[test]
fn a_resource_the_pod_does_not_request_is_not_checked() {
    let mut s = cluster(Profile::spread(), &[node("n", 1000, GI, 10)]);
    // Bound by someone else beyond allocatable: the node is overcommitted on CPU.
    s.upsert_pod(&bound(pod("a", 1500, MI), "n"));
    assert_eq!(s.schedule(&pod("no-cpu", 0, MI), now()).selected(), Some("n"));
    assert_eq!(s.schedule(&pod("cpu", 1, MI), now()).selected(), None);
}

#[test]
fn pod_count_caps_pods_per_node() {
    let mut s = cluster(Profile::spread(), &[node("n", 4000, GI, 2)]);
    s.upsert_pod(&bound(pod("a", 0, 0), "n"));
    assert_eq!(s.schedule(&pod("b", 0, 0), now()).selected(), Some("n"));
    s.assume(&pod("b", 0, 0), "n").unwrap();
    let d = s.schedule(&pod("c", 0, 0), now());
    assert_eq!(d.unschedulable_message().unwrap(), "0/1 nodes are available: 1 Too many pods.");
    let e = d.explain();
    assert_eq!(e.nodes[0].filters[5].filter, "PodCount");
    assert_eq!(e.nodes[0].filters[5].detail, "2 of 2 pods already on the node");
    assert_eq!(e.nodes[0].filters[6].verdict, Verdict::Skipped);
}

#[test]
fn host_ports_conflict_by_port_protocol_and_address() {
    let mut s = cluster(Profile::spread(), &[node("n", 4000, GI, 10)]);
    s.upsert_pod(&bound(with_host_port(pod("a", 10, MI), 8080, "TCP", ""), "n"));
    s.upsert_pod(&bound(with_host_port(pod("b", 10, MI), 9090, "tcp", "127.0.0.1"), "n"));
    let clash = s.schedule(&with_host_port(pod("c", 10, MI), 8080, "", "127.0.0.2"), now());
    assert_eq!(
        clash.unschedulable_message().unwrap(),
        "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports."
    );
    assert_eq!(clash.explain().nodes[0].filters[6].detail, "host port 8080/TCP is already in use on the node");
    assert!(s.schedule(&with_host_port(pod("d", 10, MI), 8080, "UDP", ""), now()).is_scheduled());
    assert!(s.schedule(&with_host_port(pod("e", 10, MI), 9090, "TCP", "127.0.0.2"), now()).is_scheduled());
    assert!(!s.schedule(&with_host_port(pod("f", 10, MI), 9090, "TCP", "0.0.0.0"), now()).is_scheduled());
    assert!(!s.schedule(&with_host_port(pod("g", 10, MI), 9090, "TCP", "127.0.0.1"), now()).is_scheduled());
    // The port is free again once the pod that held it is gone.
    s.remove_pod(&pod("a", 10, MI));
    assert!(s.schedule(&with_host_port(pod("c", 10, MI), 8080, "", "127.0.0.2"), now()).is_scheduled());
}

// --- scores -----------------------------------------------------------------------------

#[test]
fn least_and_most_allocated_follow_kubernetes_arithmetic() {
    // cpu: (4000 − 1000) × 100 / 4000 = 75; memory: (8 − 2) × 100 / 8 = 75.
    assert_eq!(least_allocated(1000, 4000, 2 * GI, 8 * GI), 75);
    // cpu 75, memory 0 (over capacity) → 37.
    assert_eq!(least_allocated(1000, 4000, 9 * GI, 8 * GI), 37);
    assert_eq!(least_allocated(0, 0, 0, 0), 0);
    assert_eq!(most_allocated(1000, 4000, 2 * GI, 8 * GI), 25);
    // Over capacity counts as full.
    assert_eq!(most_allocated(5000, 4000, 0, 8 * GI), 50);
}

#[test]
fn balanced_allocation_prefers_equal_fractions() {
    assert_eq!(balanced_allocation(2000, 4000, 4 * GI, 8 * GI), 100);
    // 50% cpu against 10% memory: std 0.2 → 80.
    assert_eq!(balanced_allocation(2000, 4000, 8 * GI / 10, 8 * GI), 80);
    assert_eq!(balanced_allocation(4000, 4000, 0, 8 * GI), 50);
    // A resource the node does not offer is left out.
    assert_eq!(balanced_allocation(4000, 4000, 0, 0), 100);
}

proptest::proptest! {
    /// The shares computed in i64 give exactly what 128-bit division gives, and the wide path
    /// takes over where the scaled part overflows an i64.
    #[test]
    fn shares_agree_with_wide_division(
        (requested, allocatable) in proptest::prop_oneof![(0i64..1 << 40, 1i64..1 << 40), (0i64..=i64::MAX, 1i64..=i64::MAX)]
    ) {
        let plain = |part: i64, scale: i64| (part as i128 * scale as i128 / allocatable as i128) as i64;
        let least = if requested > allocatable { 0 } else { plain(allocatable - requested, 100) };
        proptest::prop_assert_eq!(plugins::least_allocated_resource(requested, allocatable), least);
        proptest::prop_assert_eq!(plugins::most_allocated_resource(requested, allocatable), plain(requested.min(allocatable), 100));
        proptest::prop_assert_eq!(plugins::fraction_ppm(requested, allocatable), Some(plain(requested.min(allocatable), 1_000_000)));
    }
}

#[test]
fn spread_normalises_against_the_busiest_node() {
    assert_eq!(spread(0, 0), 100);
    assert_eq!(spread(0, 4), 100);
    assert_eq!(spread(1, 4), 75);
    assert_eq!(spread(4, 4), 0);
}

#[test]
fn a_deployment_spreads_across_equal_nodes() {
    let nodes = [node("a", 4000, 8 * GI, 110), node("b", 4000, 8 * GI, 110), node("c", 4000, 8 * GI, 110)];
    let mut s = cluster(Profile::spread(), &nodes);
    let mut placed = Vec::new();
    for i in 0..6 {
        let p = owned(pod(&format!("web-{i}"), 100, 64 * MI), "deploy-uid");
        let d = s.schedule(&p, now());
        let node = d.selected().unwrap().to_string();
        s.assume(&p, &node).unwrap();
        placed.push(node);
    }
    placed.sort();
    assert_eq!(placed, ["a", "a", "b", "b", "c", "c"]);
}

#[test]
fn spread_beats_least_allocated_for_a_deployment() {
    // Node a is emptier, but already runs a pod of the deployment.
    let mut s = cluster(Profile::spread(), &[node("a", 8000, 16 * GI, 110), node("b", 4000, 8 * GI, 110)]);
    s.upsert_pod(&bound(owned(pod("web-0", 100, 64 * MI), "d1"), "a"));
    let d = s.schedule(&owned(pod("web-1", 100, 64 * MI), "d1"), now());
    assert_eq!(d.selected(), Some("b"));
    // A pod of another owner goes to the emptier node.
    assert_eq!(s.schedule(&owned(pod("api-0", 100, 64 * MI), "d2"), now()).selected(), Some("a"));
}

#[test]
fn pods_with_the_same_labels_and_no_controller_spread_too() {
    let mut s = cluster(Profile::spread(), &[node("a", 4000, 8 * GI, 110), node("b", 4000, 8 * GI, 110)]);
    let mut web = pod("web-0", 100, 64 * MI);
    web.metadata.labels.insert("app".into(), "web".into());
    s.upsert_pod(&bound(web.clone(), "a"));
    let mut next = web.clone();
    next.metadata.name = "web-1".into();
    next.metadata.uid = "uid-web-1".into();
    let d = s.schedule(&next, now());
    assert_eq!(d.selected(), Some("b"));
    let e = d.explain();
    let a = e.nodes.iter().find(|n| n.node == "a").unwrap();
    let spread = a.scores.iter().find(|s| s.plugin == "Spread").unwrap();
    assert_eq!((spread.raw, spread.weight, spread.weighted), (0, 2, 0));
    assert_eq!(spread.detail, "1 of pods labelled app=web already here; the most on any node scored is 1");
}

#[test]
fn bin_pack_fills_the_fullest_node_that_fits() {
    let nodes = [node("a", 4000, 8 * GI, 110), node("b", 4000, 8 * GI, 110), node("c", 4000, 8 * GI, 110)];
    let mut s = cluster(Profile::bin_pack(), &nodes);
    s.upsert_pod(&bound(pod("seed", 1000, GI), "b"));
    for i in 0..3 {
        let p = owned(pod(&format!("web-{i}"), 1000, GI), "d1");
        let d = s.schedule(&p, now());
        assert_eq!(d.selected(), Some("b"), "pod {i}");
        s.assume(&p, "b").unwrap();
    }
    // b is full now; the next pod starts filling another node.
    let d = s.schedule(&pod("more", 1000, GI), now());
    assert_ne!(d.selected(), Some("b"));
}

#[test]
fn ties_go_to_the_node_evaluated_first() {
    let mut s = cluster(Profile::spread(), &[node("b", 4000, 8 * GI, 110), node("a", 4000, 8 * GI, 110)]);
    let d = s.schedule(&pod("p", 100, MI), now());
    assert_eq!(d.selected(), Some("a"), "nodes are evaluated in name order");
    assert_eq!(d.explain().nodes[0].total, d.explain().nodes[1].total);
}

#[test]
fn profiles_by_name() {
    assert_eq!(Profile::by_name("spread"), Some(Profile::spread()));
    assert_eq!(Profile::by_name("bin-pack"), Some(Profile::bin_pack()));
    assert_eq!(Profile::by_name("random"), None);
    for name in Profile::NAMES {
        assert_eq!(Profile::by_name(name).unwrap().name, name);
    }
    assert_eq!(Profile::spread().percentage_of_nodes_to_score, None);
    assert_eq!(Profile::spread().node_monitor_grace, std::time::Duration::from_secs(40));
}

// --- how many nodes, and where to start ------------------------------------------------------

fn many(n: usize) -> Vec<Node> {
    (0..n).map(|i| node(&format!("node-{i:05}"), 4000, 32 * GI, 110)).collect()
}

#[test]
fn small_clusters_evaluate_every_node_and_keep_the_start() {
    let mut s = cluster(Profile::spread(), &many(10));
    for _ in 0..3 {
        let d = s.schedule(&pod("p", 100, MI), now());
        assert_eq!((d.nodes_evaluated(), d.start_index()), (10, 0));
    }
}

#[test]
fn large_clusters_stop_at_enough_feasible_nodes_and_rotate() {
    let mut s = cluster(Profile::spread(), &many(250));
    // 250 nodes: 50 − 2 = 48% → 120.
    let d = s.schedule(&pod("p", 100, MI), now());
    assert_eq!((d.nodes_to_find(), d.nodes_evaluated(), d.feasible_nodes(), d.start_index()), (120, 120, 120, 0));
    assert_eq!(s.next_start_index(), 120);
    let d = s.schedule(&pod("p", 100, MI), now());
    assert_eq!(d.start_index(), 120);
    let e = d.explain();
    assert_eq!(e.nodes[0].node, "node-00120");
    assert_eq!(e.nodes.last().unwrap().node, "node-00239");
    // The third wraps around the end of the list.
    let d = s.schedule(&pod("p", 100, MI), now());
    let e = d.explain();
    assert_eq!((e.start_index, e.nodes[10].node.as_str(), e.nodes[119].node.as_str()), (240, "node-00000", "node-00109"));
    assert_eq!(s.next_start_index(), 110);
}

#[test]
fn infeasible_nodes_do_not_count_towards_the_nodes_to_find() {
    let mut nodes = many(200);
    for n in nodes.iter_mut().take(150) {
        n.status.unschedulable = true;
    }
    let mut s = cluster(Profile::spread(), &nodes);
    let d = s.schedule(&pod("p", 100, MI), now());
    // 200 nodes → 100 to find, but only 50 are feasible: all 200 are evaluated.
    assert_eq!((d.nodes_to_find(), d.nodes_evaluated(), d.feasible_nodes()), (100, 200, 50));
    assert_eq!(d.selected(), Some("node-00150"));
    assert_eq!(s.next_start_index(), 0);
}

// --- the assume cache -------------------------------------------------------------------

#[test]
fn assume_reserves_and_forget_releases() {
    let mut s = cluster(Profile::spread(), &[node("n", 1000, GI, 10)]);
    let p = pod("p", 600, 100 * MI);
    assert_eq!(s.schedule(&p, now()).selected(), Some("n"));
    s.assume(&p, "n").unwrap();
    assert!(s.is_assumed(&p));
    assert_eq!(s.node_usage("n"), Some(NodeUsage { cpu: 600, memory: 100 * MI, pods: 1, assumed_pods: 1 }));
    assert_eq!(s.schedule(&pod("q", 600, MI), now()).selected(), None, "the reservation counts");
    assert!(s.forget(&p));
    assert!(!s.forget(&p));
    assert_eq!(s.node_usage("n"), Some(NodeUsage::default()));
    assert_eq!(s.schedule(&pod("q", 600, MI), now()).selected(), Some("n"));
}

#[test]
fn seeing_the_bound_pod_confirms_without_counting_twice() {
    let mut s = cluster(Profile::spread(), &[node("n", 1000, GI, 10)]);
    let p = pod("p", 600, 100 * MI);
    s.assume(&p, "n").unwrap();
    // A stale, still unbound copy of the pod does not drop the reservation.
    s.upsert_pod(&p);
    assert!(s.is_assumed(&p));
    s.upsert_pod(&bound(p.clone(), "n"));
    assert!(!s.is_assumed(&p));
    assert_eq!(s.node_usage("n"), Some(NodeUsage { cpu: 600, memory: 100 * MI, pods: 1, assumed_pods: 0 }));
    s.upsert_pod(&bound(p.clone(), "n"));
    assert_eq!(s.node_usage("n").unwrap().pods, 1);
    assert!(!s.forget(&p), "a bound pod is not forgotten");
    assert_eq!(s.pod_node(&p), Some("n"));
}

#[test]
fn a_pod_bound_elsewhere_moves_its_reservation() {
    let mut s = cluster(Profile::spread(), &[node("a", 1000, GI, 10), node("b", 1000, GI, 10)]);
    let p = pod("p", 600, 100 * MI);
    s.assume(&p, "a").unwrap();
    s.upsert_pod(&bound(p.clone(), "b"));
    assert_eq!(s.node_usage("a").unwrap().pods, 0);
    assert_eq!(s.node_usage("b").unwrap().cpu, 600);
}

#[test]
fn finished_and_deleted_pods_release_their_node() {
    let mut s = cluster(Profile::spread(), &[node("n", 1000, GI, 10)]);
    let mut p = bound(pod("p", 600, 100 * MI), "n");
    s.upsert_pod(&p);
    assert_eq!(s.node_usage("n").unwrap().pods, 1);
    p.status.phase = crate::model::PodPhase::Succeeded;
    s.upsert_pod(&p);
    assert_eq!(s.node_usage("n").unwrap(), NodeUsage::default());
    let q = bound(pod("q", 600, 100 * MI), "n");
    s.upsert_pod(&q);
    s.remove_pod(&q);
    assert_eq!(s.node_usage("n").unwrap(), NodeUsage::default());
}

#[test]
fn a_nodes_sum_saturates_its_pod_count_as_well_as_its_requests() {
    // The cache counts with shared::usage's sum, whose every field saturates.
    let mut slot = super::cache::Slot::default();
    slot.usage.requested = crate::usage::Requested { pods: i64::MAX, cpu: i64::MAX - 1, memory: 0 };
    slot.add(&super::cache::Footprint::of(&pod("p", 600, MI)), None, false);
    assert_eq!(slot.usage.requested, crate::usage::Requested { pods: i64::MAX, cpu: i64::MAX, memory: MI });
    slot.release(&super::cache::Footprint::of(&pod("p", 600, MI)), None, false);
    assert_eq!(slot.usage.requested.memory, 0);
}

#[test]
fn assume_errors_name_the_pod_and_node() {
    let mut s = cluster(Profile::spread(), &[node("a", 1000, GI, 10), node("b", 1000, GI, 10)]);
    let p = pod("p", 100, MI);
    assert_eq!(s.assume(&p, "z").unwrap_err().to_string(), "cannot assume pod default/p on node z: the scheduler does not know that node");
    s.assume(&p, "a").unwrap();
    s.assume(&p, "a").unwrap();
    assert_eq!(s.node_usage("a").unwrap().pods, 1, "assuming twice on the same node is one reservation");
    assert_eq!(s.assume(&p, "b").unwrap_err().to_string(), "cannot assume pod default/p on node b: it is already assumed on node a");
}

#[test]
fn pods_seen_before_their_node_count_once_it_registers() {
    let mut s = Scheduler::new(Profile::spread());
    s.upsert_pod(&bound(pod("early", 800, 100 * MI), "late"));
    assert_eq!(s.node_usage("late"), None);
    assert_eq!(s.node_count(), 0);
    s.upsert_node(&node("late", 1000, GI, 10), now());
    assert_eq!(s.node_count(), 1);
    assert_eq!(s.node_usage("late").unwrap().cpu, 800);
    assert_eq!(s.schedule(&pod("p", 300, MI), now()).selected(), None);
}

#[test]
fn removing_a_node_drops_its_pods() {
    let mut s = cluster(Profile::spread(), &[node("a", 1000, GI, 10), node("b", 1000, GI, 10)]);
    let p = bound(owned(pod("p", 800, 100 * MI), "d1"), "a");
    s.upsert_pod(&p);
    s.remove_node("a");
    assert_eq!(s.node_count(), 1);
    assert_eq!(s.pod_node(&p), None);
    assert_eq!(s.schedule(&pod("q", 100, MI), now()).selected(), Some("b"));
    s.upsert_node(&node("a", 1000, GI, 10), now());
    assert_eq!(s.node_usage("a"), Some(NodeUsage::default()));
    s.remove_node("nope");
}

#[test]
fn node_updates_take_effect() {
    let mut s = cluster(Profile::spread(), &[node("a", 1000, GI, 10)]);
    let mut a = node("a", 1000, GI, 10);
    a.status.unschedulable = true;
    s.upsert_node(&a, now());
    assert!(!s.schedule(&pod("p", 100, MI), now()).is_scheduled());
    a.status.unschedulable = false;
    a.status.taints.push(taint("k", "v", "NoSchedule"));
    s.upsert_node(&a, now());
    let d = s.schedule(&pod("p", 100, MI), now());
    assert_eq!(d.unschedulable_message().unwrap(), "0/1 nodes are available: 1 node(s) had untolerated taint {k: v}.");
    a.status.taints.clear();
    a.status.allocatable.cpu = 50;
    s.upsert_node(&a, now());
    assert_eq!(s.schedule(&pod("p", 100, MI), now()).unschedulable_message().unwrap(), "0/1 nodes are available: 1 Insufficient cpu.");
    // An earlier decision keeps the node as it was when it was made.
    assert_eq!(d.explain().nodes[0].filters[3].reason, "node(s) had untolerated taint {k: v}");
}

// --- explanations -----------------------------------------------------------------------

#[test]
fn unschedulable_message_has_kubernetes_form() {
    let mut big = node("node-1", 4000, 32 * MI, 10);
    big.metadata.labels.insert("disk".into(), "ssd".into());
    let mut n2 = node("node-2", 4000, GI, 10);
    n2.metadata.labels.insert("disk".into(), "hdd".into());
    let n3 = node("node-3", 4000, GI, 10);
    let mut s = cluster(Profile::spread(), &[big, n2, n3]);
    let mut p = pod("web", 100, 64 * MI);
    p.spec.node_selector.insert("disk".into(), "ssd".into());
    let d = s.schedule(&p, now());
    assert_eq!(d.unschedulable_message().unwrap(), "0/3 nodes are available: 1 Insufficient memory, 2 node(s) didn't match node selector.");
    assert_eq!(d.explain().message, d.unschedulable_message().unwrap());
}

#[test]
fn reasons_sort_as_kubernetes_sorts_them() {
    // Kubernetes sorts the strings "<count> <reason>": "12 …" comes before "3 …".
    let mut nodes = many(15);
    for n in nodes.iter_mut().take(12) {
        n.status.unschedulable = true;
    }
    let mut s = cluster(Profile::spread(), &nodes);
    let d = s.schedule(&pod("p", 8000, MI), now());
    assert_eq!(d.unschedulable_message().unwrap(), "0/15 nodes are available: 12 node(s) were unschedulable, 3 Insufficient cpu.");
    assert_eq!(d.reasons(), vec![("node(s) were unschedulable".to_string(), 12), ("Insufficient cpu".to_string(), 3)]);
}

#[test]
fn no_nodes_at_all() {
    let mut s = Scheduler::new(Profile::spread());
    let d = s.schedule(&pod("p", 1, 1), now());
    assert_eq!(d.unschedulable_message().unwrap(), "0/0 nodes are available: no nodes available to schedule pods.");
    assert_eq!(d.explain().nodes, vec![]);
}

#[test]
fn explanation_lists_every_filter_and_score() {
    let mut cordoned = node("a", 4000, 8 * GI, 110);
    cordoned.status.unschedulable = true;
    let mut s = cluster(Profile::spread(), &[cordoned, node("b", 4000, 8 * GI, 110), node("c", 2000, 8 * GI, 110)]);
    let d = s.schedule(&pod("web", 1000, GI), now());
    let e = d.explain();
    assert_eq!(
        (e.pod.as_str(), e.profile.as_str(), e.total_nodes, e.nodes_evaluated, e.feasible_nodes, e.nodes_to_find, e.start_index),
        ("default/web", "spread", 3, 3, 2, 3, 0)
    );
    assert_eq!(e.selected.as_deref(), Some("b"));
    assert!(e.message.starts_with("Successfully assigned default/web to b"), "{}", e.message);

    let a = &e.nodes[0];
    assert!(!a.feasible && !a.selected && a.scores.is_empty() && a.total.is_none());
    let verdicts: Vec<Verdict> = a.filters.iter().map(|f| f.verdict).collect();
    assert_eq!(verdicts[..2], [Verdict::Passed, Verdict::Failed]);
    assert!(verdicts[2..].iter().all(|v| *v == Verdict::Skipped));
    let names: Vec<&str> = a.filters.iter().map(|f| f.filter.as_str()).collect();
    assert_eq!(names, ["NodeReady", "NodeUnschedulable", "NodeSelector", "TaintToleration", "NodeResourcesFit", "PodCount", "NodePorts"]);

    let b = &e.nodes[1];
    assert!(b.feasible && b.selected);
    assert!(b.filters.iter().all(|f| f.verdict == Verdict::Passed && f.reason.is_empty()));
    assert_eq!(b.filters[4].detail, "cpu 0 + 1 of 4, memory 0 + 1Gi of 8Gi");
    let plugins: Vec<&str> = b.scores.iter().map(|s| s.plugin.as_str()).collect();
    assert_eq!(plugins, ["LeastAllocated", "BalancedAllocation", "Spread"]);
    // LeastAllocated: cpu 75, memory 87 → 81. Balanced: 25% vs 12.5% → 93. Spread: no owner → 100.
    let raw: Vec<(u32, u32, u64)> = b.scores.iter().map(|s| (s.raw, s.weight, s.weighted)).collect();
    assert_eq!(raw, [(81, 1, 81), (93, 1, 93), (100, 2, 200)]);
    assert_eq!(b.total, Some(374));
    assert_eq!(d.score(), Some(374));
    let c = &e.nodes[2];
    assert!(c.feasible && !c.selected && c.total < b.total);
}

#[test]
fn explanation_round_trips_through_json() {
    let mut s = cluster(Profile::spread(), &[node("a", 4000, 8 * GI, 110), node("b", 100, 8 * GI, 110)]);
    let e = s.schedule(&pod("web", 1000, GI), now()).explain();
    let json = serde_json::to_string(&e).unwrap();
    assert!(json.contains("\"verdict\":\"Failed\""), "{json}");
    let back: Explanation = serde_json::from_str(&json).unwrap();
    assert_eq!(back, e);
}

#[test]
fn schedule_is_deterministic() {
    let run = || {
        let mut s = cluster(Profile::spread(), &many(300));
        (0..50)
            .map(|i| {
                let p = owned(pod(&format!("p{i}"), 300, 256 * MI), if i % 2 == 0 { "d1" } else { "d2" });
                let d = s.schedule(&p, now());
                let node = d.selected().unwrap().to_string();
                s.assume(&p, &node).unwrap();
                node
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run(), run());
}

// --- requeue events ---------------------------------------------------------------------

#[test]
fn a_lease_renewal_after_a_stale_period_is_the_node_becoming_ready() {
    use crate::readiness::Readiness;
    let p = pod("p", 100, MI);
    let mut s = Scheduler::new(Profile::spread());
    let mut a = node("a", 1000, GI, 10);
    a.status.last_heartbeat = Some(now() - chrono::Duration::seconds(300));
    assert_eq!(s.upsert_lease("a", Some(now() - chrono::Duration::seconds(5)), now()), None, "a lease before its node opens nothing");
    assert_eq!(s.upsert_node(&a, now()), Some(ClusterEvent::NodeAdded { node: "a".into() }), "the lease already counts");
    assert_eq!(s.schedule(&p, now()).selected(), Some("a"));

    let later = now() + chrono::Duration::seconds(60);
    assert!(s.schedule(&p, later).selected().is_none(), "the lease went stale");
    assert_eq!(
        s.upsert_lease("a", Some(later - chrono::Duration::seconds(1)), later),
        Some(ClusterEvent::NodeReady { node: "a".into(), before: Readiness::Stale { age_ms: 65_000 } })
    );
    assert_eq!(s.schedule(&p, later).selected(), Some("a"));
    assert_eq!(s.upsert_lease("a", Some(later), later), None, "a renewal of a ready node changes nothing");
    assert_eq!(s.upsert_lease("a", None, later), None);
    assert!(s.schedule(&p, later).selected().is_none(), "without its lease only the old status heartbeat counts");
    assert_eq!(s.upsert_lease("gone", None, later), None);
}

#[test]
fn a_node_change_is_an_event_only_when_it_may_fit_pods_it_could_not_before() {
    use crate::readiness::Readiness;
    let mut s = Scheduler::new(Profile::spread());
    let mut a = node("a", 1000, GI, 10);
    a.status.last_heartbeat = None;
    assert_eq!(s.upsert_node(&a, now()), None, "a node that cannot take pods yet opens nothing");
    a.status.last_heartbeat = Some(now());
    assert_eq!(s.upsert_node(&a, now()), Some(ClusterEvent::NodeReady { node: "a".into(), before: Readiness::NoHeartbeat }));
    assert_eq!(s.upsert_node(&a, now()), None, "a heartbeat of a ready node changes nothing");

    let later = now() + chrono::Duration::seconds(41);
    a.status.last_heartbeat = Some(later);
    assert_eq!(
        s.upsert_node(&a, later),
        Some(ClusterEvent::NodeReady { node: "a".into(), before: Readiness::Stale { age_ms: 41_000 } }),
        "judged at the same instant, the old heartbeat was stale"
    );

    a.status.unschedulable = true;
    assert_eq!(s.upsert_node(&a, later), None);
    a.status.unschedulable = false;
    assert_eq!(s.upsert_node(&a, later), Some(ClusterEvent::NodeUncordoned { node: "a".into() }));
    a.status.allocatable.cpu = 2000;
    assert_eq!(s.upsert_node(&a, later), Some(ClusterEvent::NodeGrew { node: "a".into() }));
    a.status.allocatable.cpu = 500;
    assert_eq!(s.upsert_node(&a, later), None, "shrinking fits nothing new");
    a.metadata.labels.insert("zone".into(), "x".into());
    assert_eq!(s.upsert_node(&a, later), Some(ClusterEvent::NodeLabelsChanged { node: "a".into() }));
    a.status.taints.push(taint("k", "v", "NoSchedule"));
    assert_eq!(s.upsert_node(&a, later), Some(ClusterEvent::NodeTaintsChanged { node: "a".into() }));
    assert_eq!(
        s.upsert_node(&node("b", 1000, GI, 10), later - chrono::Duration::seconds(41)),
        Some(ClusterEvent::NodeAdded { node: "b".into() })
    );
}

#[test]
fn a_pod_that_held_room_frees_it_when_it_finishes_or_goes() {
    let mut s = cluster(Profile::spread(), &[node("a", 1000, GI, 10)]);
    let held = bound(pod("held", 800, MI), "a");
    assert_eq!(s.upsert_pod(&held), None);
    let mut finished = held.clone();
    finished.status.phase = crate::model::PodPhase::Succeeded;
    assert_eq!(s.upsert_pod(&finished), Some(ClusterEvent::PodFreedRoom { pod: "default/held".into(), node: "a".into() }));
    assert_eq!(s.remove_pod(&finished), None, "it freed its room once");

    let other = bound(pod("other", 800, MI), "a");
    s.upsert_pod(&other);
    assert_eq!(s.remove_pod(&other), Some(ClusterEvent::PodFreedRoom { pod: "default/other".into(), node: "a".into() }));
    let assumed = pod("assumed", 100, MI);
    s.assume(&assumed, "a").unwrap();
    assert_eq!(s.remove_pod(&assumed), None, "an assumed pod held no room anyone was denied");
}

#[test]
fn the_bind_guard_is_the_filter_and_huge_requests_never_wrap_into_fitting() {
    let a = node("a", 1000, GI, 10);
    let mut s = cluster(Profile::spread(), std::slice::from_ref(&a));
    let first = bound(pod("first", 1000, MI), "a");
    s.upsert_pod(&first);
    let mut huge = pod("huge", 5_000_000_000_000_000_000, MI);
    huge.spec.containers.push(huge.spec.containers[0].clone());
    assert!(!s.schedule(&huge, now()).is_scheduled());
    let why = check_room(&a, [&first], &huge).unwrap_err();
    assert!(why.starts_with("the pod requests cpu"), "{why}");
    assert!(check_room(&a, [&first], &pod("small", 1, MI)).is_err(), "1000m of 1000m is taken");
    assert_eq!(check_room(&a, std::iter::empty(), &pod("small", 1, MI)), Ok(()));
    let mut finished = first.clone();
    finished.status.phase = crate::model::PodPhase::Failed;
    assert_eq!(check_room(&a, [&finished], &pod("small", 1, MI)), Ok(()), "a finished pod holds nothing");
}

#[test]
fn scores_kept_from_the_last_pod_are_computed_again_when_the_node_grows() {
    let least = |s: &mut Scheduler| {
        let e = s.schedule(&pod("web", 1000, GI), now()).explain();
        e.nodes[0].scores.iter().find(|s| s.plugin == "LeastAllocated").map(|s| s.raw)
    };
    let mut s = cluster(Profile::spread(), &[node("a", 4000, 8 * GI, 110)]);
    // cpu (4000 − 1000) / 4000 → 75, memory 7/8 → 87: 81.
    assert_eq!(least(&mut s), Some(81));
    assert_eq!(least(&mut s), Some(81));
    // The same sums on a node twice the size: cpu 87, memory 93 → 90.
    s.upsert_node(&node("a", 8000, 16 * GI, 110), now());
    assert_eq!(least(&mut s), Some(90));
}
