//! `metrics.k8s.io/v1beta1` as `kubectl top` reads it, from a fleet of two simulated nodes:
//! discovery lists the group, pods' and nodes' usage come in Kubernetes' shapes with label
//! selectors, a node's usage is the sum of its pods', and a viewer may read them all.

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use common::{TestServer, eventually};
use serde_json::{Value, json};
use server::Config;
use server::auth::{Principal, Role, Tokens};
use shared::metrics::{NodeMetrics, PodMetrics, ResourceUsage};
use shared::model::{Object, Pod, PodPhase};
use shepherd_client::{Client, Selection};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);
const ADMIN: &str = "admin-token-1";
const VIEWER: &str = "viewer-token-1";
const BASE: &str = "/k8s/apis/metrics.k8s.io/v1beta1";

async fn running_pod(admin: &Client, name: &str, node: &str, app: &str, containers: &[&str]) {
    let containers: Vec<Value> = containers
        .iter()
        .map(|c| json!({"name": c, "image": "minimal", "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}}}))
        .collect();
    let pod = json!({
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
        "spec": {"node_selector": {"kubernetes.io/hostname": node}, "containers": containers}
    });
    admin.create_object(&Object::from_value(pod).unwrap()).await.expect("the pod is created");
    eventually(admin, WAIT, &format!("pod {name} Running"), || async {
        let pod = admin.get::<Pod>("default", name).await.ok()?;
        (pod.status.phase == PodPhase::Running).then_some(())
    })
    .await;
}

/// `GET path` under `/k8s` with `token` (the native API's conformance check does not apply).
async fn read(server: &TestServer, token: &str, path: &str) -> (StatusCode, Value) {
    let answer = reqwest::Client::new().get(format!("{}{path}", server.url)).bearer_auth(token).send().await.unwrap();
    (answer.status(), answer.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_top_reads_pods_and_nodes_usage_in_kubernetes_shapes() {
    let mut tokens = Tokens::default();
    tokens.add(ADMIN, Principal::new(Role::Admin, None));
    tokens.add(VIEWER, Principal::new(Role::Viewer, None));
    let server = TestServer::start(Config { tokens, ..Config::in_memory() }).await;
    let admin = Client::new(&server.url, Some(ADMIN.to_string())).unwrap();
    let shutdown = CancellationToken::new();
    let mut node = agent::AgentConfig::new(&server.url);
    node.node_name = "sim".into();
    node.token = Some(ADMIN.into());
    node.runtime = agent::RuntimeChoice::Simulated { start_delay: Duration::from_millis(10) };
    node.listen = "127.0.0.1:0".parse().unwrap();
    let fleet = agent::fleet::FleetConfig { node, nodes: 2, max_in_flight: 4 };
    tokio::spawn(agent::fleet::run(fleet, shutdown.clone()));

    running_pod(&admin, "web", "sim-0", "web", &["main", "sidecar"]).await;
    running_pod(&admin, "db", "sim-1", "db", &["main"]).await;

    let (status, groups) = read(&server, VIEWER, "/k8s/apis").await;
    assert_eq!(status, StatusCode::OK, "{groups}");
    let metrics = groups["groups"].as_array().unwrap().iter().find(|g| g["name"] == "metrics.k8s.io").expect("the group is discovered");
    assert_eq!(metrics["preferredVersion"]["groupVersion"], "metrics.k8s.io/v1beta1");
    let (_, resources) = read(&server, VIEWER, BASE).await;
    let listed: Vec<(&str, &str, bool)> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["kind"].as_str().unwrap(), r["namespaced"].as_bool().unwrap()))
        .collect();
    assert_eq!(listed, [("nodes", "NodeMetrics", false), ("pods", "PodMetrics", true)]);

    let (status, web) = read(&server, VIEWER, &format!("{BASE}/namespaces/default/pods?labelSelector=app%3Dweb")).await;
    assert_eq!(status, StatusCode::OK, "{web}");
    assert_eq!((web["kind"].as_str(), web["apiVersion"].as_str()), (Some("PodMetricsList"), Some("metrics.k8s.io/v1beta1")));
    let items = web["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "the selector chooses web alone: {web}");
    let web: PodMetrics = serde_json::from_value(items[0].clone()).unwrap();
    assert_eq!((web.metadata.name.as_str(), web.metadata.namespace.as_str()), ("web", "default"));
    assert_eq!(web.metadata.labels.get("app").map(String::as_str), Some("web"));
    assert!(web.timestamp.is_some() && web.window.ends_with('s'), "{web:?}");
    let names: Vec<&str> = web.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["main", "sidecar"]);
    for container in &web.containers {
        assert!(container.usage.cpu.ends_with('n'), "nanocores, as metrics-server writes them: {:?}", container.usage);
        let (millis, bytes) = (container.usage.cpu_millis(), container.usage.memory_bytes());
        assert!((1..=500).contains(&millis) && (1..=128 << 20).contains(&bytes), "within its limits: {:?}", container.usage);
    }

    let (_, one) = read(&server, VIEWER, &format!("{BASE}/namespaces/default/pods/web")).await;
    assert_eq!(one["kind"], "PodMetrics");
    assert_eq!(serde_json::from_value::<PodMetrics>(one).unwrap().containers, web.containers, "a simulated pod's figures are steady");

    let everywhere = shepherd_client::Client::new(&server.url, Some(VIEWER.to_string())).unwrap();
    let all = everywhere.pod_metrics(&Selection::default()).await.unwrap();
    let mut names: Vec<&str> = all.iter().map(|p| p.metadata.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["db", "web"]);

    let nodes = everywhere.node_metrics(None).await.unwrap();
    let by_name = |name: &str| nodes.iter().find(|n| n.metadata.name == name).unwrap_or_else(|| panic!("{name} in {nodes:?}")).clone();
    let sim0: NodeMetrics = by_name("sim-0");
    let sum = |pod: &PodMetrics| -> (i64, i64) {
        let nanos: i64 = pod.containers.iter().map(|c| c.usage.nano_cores()).sum();
        (nanos, pod.containers.iter().map(|c| c.usage.memory_bytes()).sum())
    };
    let (nanos, bytes) = sum(&web);
    assert_eq!(sim0.usage, ResourceUsage::new(nanos as u64, bytes as u64), "a node's usage is its pods' sum");
    assert!(sim0.metadata.labels.contains_key("kubernetes.io/hostname"), "a node's labels: {sim0:?}");
    let chosen = everywhere.node_metrics(Some("kubernetes.io/hostname=sim-1")).await.unwrap();
    assert_eq!(chosen.iter().map(|n| n.metadata.name.as_str()).collect::<Vec<_>>(), ["sim-1"]);
    let (_, one) = read(&server, VIEWER, &format!("{BASE}/nodes/sim-1")).await;
    assert_eq!((one["kind"].as_str(), one["metadata"]["name"].as_str()), (Some("NodeMetrics"), Some("sim-1")));

    let (status, missing) = read(&server, VIEWER, &format!("{BASE}/nodes/nope")).await;
    assert_eq!((status, missing["kind"].as_str(), missing["reason"].as_str()), (StatusCode::NOT_FOUND, Some("Status"), Some("NotFound")));
    let (status, missing) = read(&server, VIEWER, &format!("{BASE}/namespaces/default/pods/nope")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{missing}");
    let (status, refused) = read(&server, VIEWER, &format!("{BASE}/pods?fieldSelector=metadata.name%3Dweb")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("fieldSelector"), "{refused}");
    let post = reqwest::Client::new().post(format!("{}{BASE}/nodes", server.url)).bearer_auth(ADMIN).json(&json!({})).send().await.unwrap();
    assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED, "read-only");
    shutdown.cancel();
    server.stop().await;
}
