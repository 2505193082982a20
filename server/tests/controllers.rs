//! The controllers through the API: a deployment scales up and down (through its ReplicaSet) and cascades on
//! delete (gracefully), replaces a terminating pod at once, a service's endpoints follow
//! running pods, a silent node becomes NotReady and its pods are replaced elsewhere, and a
//! terminating pod no agent will confirm is collected.

mod common;

use std::time::Duration;

use common::{TestServer, add_node, eventually};
use reqwest::StatusCode;
use serde_json::{Value, json};
use server::Config;
use shared::model::NodeResources;
use shared::registration::NodeDescription;

const GI: i64 = 1 << 30;

fn deployment() -> Value {
    serde_json::from_str(include_str!("../../examples/deployment.json")).unwrap()
}

async fn pods(server: &TestServer) -> Vec<Value> {
    let (_, list) = server.get("/api/v1/namespaces/default/pods?label_selector=app%3Dweb").await;
    list["items"].as_array().unwrap().clone()
}

async fn pod_count(server: &TestServer, n: usize) -> Vec<Value> {
    eventually(&server.client, Duration::from_secs(5), &format!("{n} pods"), || async {
        let pods = pods(server).await;
        (pods.len() == n).then_some(pods)
    })
    .await
}

/// Plays the agent's last step of a graceful delete: confirms, with grace 0 and the pod's
/// uid, the deletion of every terminating pod, as if its containers had stopped.
async fn confirm_deletions(server: &TestServer) {
    for p in pods(server).await.iter().filter(|p| p["metadata"]["deletion_timestamp"].is_string()) {
        let (name, uid) = (p["metadata"]["name"].as_str().unwrap(), p["metadata"]["uid"].as_str().unwrap());
        let (code, body) = server.delete(&format!("/api/v1/namespaces/default/pods/{name}?grace_period_seconds=0&uid={uid}")).await;
        assert!(code == StatusCode::OK || code == StatusCode::NOT_FOUND, "{code} {body}");
    }
}

/// `n` pods once the terminating ones have been confirmed gone.
async fn pod_count_after_confirming(server: &TestServer, n: usize) -> Vec<Value> {
    eventually(&server.client, Duration::from_secs(5), &format!("{n} pods after confirmed deletions"), || async {
        confirm_deletions(server).await;
        let pods = pods(server).await;
        (pods.len() == n).then_some(pods)
    })
    .await
}

/// Plays the agent: reports every pod bound to `node` Running with an IP.
async fn run_pods_on(server: &TestServer, node: &str) {
    let (_, list) = server.get(&format!("/api/v1/pods?field_selector=spec.node_name%3D{node}")).await;
    for (i, p) in list["items"].as_array().unwrap().iter().enumerate() {
        if p["status"]["phase"] != "Pending" {
            continue;
        }
        let ns = p["metadata"]["namespace"].as_str().unwrap();
        let name = p["metadata"]["name"].as_str().unwrap();
        let status = json!({"status": {"phase": "Running", "pod_ip": format!("10.20.{}.{}", node.len(), i + 2)}});
        let (code, body) = server.put(&format!("/api/v1/namespaces/{ns}/pods/{name}/status"), status).await;
        assert_eq!(code, StatusCode::OK, "{body}");
    }
}

#[tokio::test]
async fn a_deployment_scales_up_and_down_and_its_pods_go_with_it() {
    let server = TestServer::in_memory().await;
    add_node(&server, "node-1", 4000, 8 * GI, 110).await;
    add_node(&server, "node-2", 4000, 8 * GI, 110).await;
    let (status, created) = server.post("/api/v1/namespaces/default/deployments", deployment()).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let uid = created["metadata"]["uid"].clone();

    let first = pod_count(&server, 3).await;
    // Deployment → ReplicaSet `web-<pod-template-hash>` → pods `web-<hash>-<suffix>`.
    let (_, sets) = server.get("/api/v1/namespaces/default/replicasets").await;
    let rs = &sets["items"][0];
    assert_eq!(rs["metadata"]["owner_references"][0]["uid"], uid);
    let rs_name = rs["metadata"]["name"].as_str().unwrap();
    let hash = rs["spec"]["template"]["metadata"]["labels"]["pod-template-hash"].as_str().unwrap();
    assert_eq!(rs_name, format!("web-{hash}"));
    for p in &first {
        assert!(p["metadata"]["name"].as_str().unwrap().starts_with(&format!("{rs_name}-")));
        assert_eq!(p["metadata"]["owner_references"][0]["uid"], rs["metadata"]["uid"]);
        assert_eq!(p["metadata"]["owner_references"][0]["controller"], true);
        assert_eq!(p["metadata"]["labels"]["pod-template-hash"], hash);
    }
    // Every pod gets bound, spread over both nodes.
    let bound = eventually(&server.client, Duration::from_secs(5), "3 bound pods", || async {
        let pods = pods(&server).await;
        pods.iter().all(|p| p["spec"]["node_name"] != "").then_some(pods)
    })
    .await;
    let on_node_1 = bound.iter().filter(|p| p["spec"]["node_name"] == "node-1").count();
    assert!((1..=2).contains(&on_node_1), "spread: {on_node_1} of 3 on node-1");

    run_pods_on(&server, "node-1").await;
    run_pods_on(&server, "node-2").await;
    eventually(&server.client, Duration::from_secs(5), "ready_replicas 3", || async {
        let (_, d) = server.get("/api/v1/namespaces/default/deployments/web").await;
        (d["status"]["ready_replicas"] == 3).then_some(())
    })
    .await;

    server.put("/api/v1/namespaces/default/deployments/web/scale", json!({"spec": {"replicas": 5}})).await;
    pod_count(&server, 5).await;
    server.put("/api/v1/namespaces/default/deployments/web/scale", json!({"spec": {"replicas": 2}})).await;
    let left = pod_count_after_confirming(&server, 2).await;
    assert!(left.iter().all(|p| p["status"]["phase"] == "Running"), "the running pods are kept, the new ones go first");

    // A failed pod is replaced.
    let victim = left[0]["metadata"]["name"].as_str().unwrap().to_string();
    let failed = json!({"status": {"phase": "Failed", "reason": "Error"}});
    server.put(&format!("/api/v1/namespaces/default/pods/{victim}/status"), failed).await;
    eventually(&server.client, Duration::from_secs(5), "the failed pod replaced and bound", || async {
        let pods = pods(&server).await;
        (pods.len() == 2 && pods.iter().all(|p| p["metadata"]["name"] != victim.as_str() && p["spec"]["node_name"] != "")).then_some(())
    })
    .await;

    let (status, _) = server.delete("/api/v1/namespaces/default/deployments/web").await;
    assert_eq!(status, StatusCode::OK);
    let terminating = eventually(&server.client, Duration::from_secs(5), "the pods terminating", || async {
        let pods = pods(&server).await;
        pods.iter().all(|p| p["metadata"]["deletion_timestamp"].is_string()).then_some(pods)
    })
    .await;
    assert_eq!(terminating.len(), 2, "the cascade deletes gracefully: the pods stay until their agent confirms");
    pod_count_after_confirming(&server, 0).await;
    let (_, sets) = server.get("/api/v1/namespaces/default/replicasets").await;
    assert_eq!(sets["items"], json!([]), "the cascade took the replica set too");
    let of_set = event_reasons(&server, "ReplicaSet").await;
    assert!(of_set.iter().any(|r| r == "SuccessfulCreate") && of_set.iter().any(|r| r == "SuccessfulDelete"), "{of_set:?}");
    assert!(event_reasons(&server, "Deployment").await.iter().any(|r| r == "ScalingReplicaSet"));
    server.stop().await;
}

async fn event_reasons(server: &TestServer, kind: &str) -> Vec<String> {
    let (_, events) = server.get(&format!("/api/v1/namespaces/default/events?field_selector=involved_object.kind%3D{kind}")).await;
    events["items"].as_array().unwrap().iter().map(|e| e["reason"].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn a_terminating_pod_is_replaced_at_once_and_not_counted() {
    let server = TestServer::in_memory().await;
    add_node(&server, "node-1", 4000, 8 * GI, 110).await;
    let mut d = deployment();
    d["spec"]["replicas"] = json!(1);
    server.post("/api/v1/namespaces/default/deployments", d).await;
    let first = eventually(&server.client, Duration::from_secs(5), "1 bound pod", || async {
        let pods = pods(&server).await;
        (pods.len() == 1 && pods[0]["spec"]["node_name"] == "node-1").then(|| pods[0].clone())
    })
    .await;
    run_pods_on(&server, "node-1").await;
    let name = first["metadata"]["name"].as_str().unwrap().to_string();
    let (status, terminating) = server.delete(&format!("/api/v1/namespaces/default/pods/{name}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(terminating["metadata"]["deletion_timestamp"].is_string(), "{terminating}");

    let replacement = eventually(&server.client, Duration::from_secs(5), "a replacement next to the terminating pod", || async {
        let pods = pods(&server).await;
        (pods.len() == 2).then(|| pods.into_iter().find(|p| p["metadata"]["name"] != name.as_str()).unwrap())
    })
    .await;
    assert!(replacement["metadata"]["deletion_timestamp"].is_null());
    eventually(&server.client, Duration::from_secs(5), "status.replicas 1", || async {
        let (_, d) = server.get("/api/v1/namespaces/default/deployments/web").await;
        (d["status"]["replicas"] == 1).then_some(())
    })
    .await;
    let (_, old) = server.get(&format!("/api/v1/namespaces/default/pods/{name}")).await;
    assert!(old["metadata"]["deletion_timestamp"].is_string(), "the old pod still waits for its agent");
    let left = pod_count_after_confirming(&server, 1).await;
    assert_eq!(left[0]["metadata"]["name"], replacement["metadata"]["name"]);
    server.stop().await;
}

#[tokio::test]
async fn a_terminating_pod_on_a_node_that_goes_not_ready_is_collected_with_a_warning() {
    let server = TestServer::start(Config { run_scheduler: false, ..Config::in_memory() }).await;
    add_node(&server, "node-1", 4000, 8 * GI, 110).await;
    server.post("/api/v1/pods", common::pod("p", 1, 1)).await;
    server.post("/api/v1/namespaces/default/pods/p/binding", json!({"target": {"name": "node-1"}})).await;
    let (_, terminating) = server.delete("/api/v1/namespaces/default/pods/p").await;
    assert!(terminating["metadata"]["deletion_timestamp"].is_string(), "{terminating}");
    let (status, _) = server.post("/api/v1/nodes/node-1/heartbeat", json!({"conditions": [{"type": "Ready", "status": "False"}]})).await;
    assert_eq!(status, StatusCode::OK);
    eventually(&server.client, Duration::from_secs(5), "the pod collected", || async {
        (server.get("/api/v1/namespaces/default/pods/p").await.0 == StatusCode::NOT_FOUND).then_some(())
    })
    .await;
    let (_, events) = server.get("/api/v1/namespaces/default/events?field_selector=reason%3DForceDeleted").await;
    let event = &events["items"][0];
    assert_eq!((event["type"].as_str(), event["involved_object"]["name"].as_str()), (Some("Warning"), Some("p")), "{events}");
    assert!(
        event["message"].as_str().unwrap().contains("node node-1 of pod default/p is not ready: the node's Ready condition is False"),
        "{event}"
    );
    server.stop().await;
}

#[tokio::test]
async fn service_endpoints_follow_running_pods() {
    let server = TestServer::in_memory().await;
    add_node(&server, "node-1", 4000, 8 * GI, 110).await;
    let service: Value = serde_json::from_str(include_str!("../../examples/service.json")).unwrap();
    assert_eq!(server.post("/api/v1/namespaces/default/services", service).await.0, StatusCode::CREATED);
    let mut d = deployment();
    d["spec"]["replicas"] = json!(2);
    server.post("/api/v1/namespaces/default/deployments", d).await;
    eventually(&server.client, Duration::from_secs(5), "2 bound pods", || async {
        let pods = pods(&server).await;
        (pods.len() == 2 && pods.iter().all(|p| p["spec"]["node_name"] == "node-1")).then_some(())
    })
    .await;
    let endpoints = || async {
        let (_, s) = server.get("/api/v1/namespaces/default/services/web-service").await;
        s["status"]["endpoints"].as_array().cloned().unwrap_or_default()
    };
    assert!(endpoints().await.is_empty(), "pending pods are no endpoints");
    run_pods_on(&server, "node-1").await;
    let ready = eventually(&server.client, Duration::from_secs(5), "2 endpoints", || async {
        let e = endpoints().await;
        (e.len() == 2).then_some(e)
    })
    .await;
    assert!(ready.iter().all(|e| e["ip"].as_str().unwrap().starts_with("10.20.") && e["node_name"] == "node-1"));

    server.put("/api/v1/namespaces/default/deployments/web/scale", json!({"spec": {"replicas": 0}})).await;
    eventually(&server.client, Duration::from_secs(5), "no endpoints", || async { endpoints().await.is_empty().then_some(()) }).await;
    server.stop().await;
}

#[tokio::test]
async fn a_silent_node_goes_not_ready_and_its_pods_move() {
    let server = TestServer::start(Config {
        node_monitor_grace: Duration::from_millis(600),
        pod_eviction_grace: Duration::from_millis(600),
        node_monitor_period: Duration::from_millis(100),
        scheduler_sweep: Duration::from_millis(200),
        ..Config::in_memory()
    })
    .await;
    add_node(&server, "doomed", 4000, 8 * GI, 110).await;
    let mut d = deployment();
    d["spec"]["replicas"] = json!(2);
    server.post("/api/v1/namespaces/default/deployments", d).await;
    eventually(&server.client, Duration::from_secs(5), "2 pods on doomed", || async {
        let pods = pods(&server).await;
        (pods.len() == 2 && pods.iter().all(|p| p["spec"]["node_name"] == "doomed")).then_some(())
    })
    .await;
    run_pods_on(&server, "doomed").await;

    // A healthy node keeps heartbeating; doomed stops.
    let healthy = NodeDescription::new("healthy", NodeResources { cpu: 4000, memory: 8 * GI, pods: 110 });
    shepherd_testing::register_node(&server.client, &healthy).await;
    let beating = {
        let client = server.client.clone();
        tokio::spawn(async move {
            // The agent's cadence, compressed.
            for _ in 0..100 {
                let _ = client.heartbeat(&healthy.name, &healthy.heartbeat(chrono::Utc::now())).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    let condition = eventually(&server.client, Duration::from_secs(5), "doomed NotReady", || async {
        let (_, n) = server.get("/api/v1/nodes/doomed").await;
        n["status"]["conditions"].as_array().and_then(|cs| cs.iter().find(|c| c["type"] == "Ready" && c["status"] == "Unknown").cloned())
    })
    .await;
    assert_eq!(condition["reason"], "NodeStatusUnknown");
    let (_, events) = server.get("/api/v1/namespaces/default/events?field_selector=reason%3DNodeNotReady").await;
    assert_eq!(events["items"][0]["involved_object"]["name"], "doomed");

    eventually(&server.client, Duration::from_secs(8), "the pods replaced on healthy", || async {
        let pods = pods(&server).await;
        (pods.len() == 2 && pods.iter().all(|p| p["spec"]["node_name"] == "healthy")).then_some(())
    })
    .await;
    let (_, lost) = server.get("/api/v1/namespaces/default/events?field_selector=reason%3DNodeLost").await;
    assert_eq!(lost["items"].as_array().unwrap().len(), 2, "{lost}");
    beating.abort();
    server.stop().await;
}
