//! Readiness on the scheduling path, through the real API: a node registered exactly as its
//! agent registers it takes a pod created before its first heartbeat, and a node whose
//! heartbeat went stale takes the pods it could not the moment its agent is back.

mod common;

use std::time::Duration;

use common::{TestServer, eventually, pod};
use reqwest::StatusCode;
use serde_json::Value;
use server::Config;
use shared::model::{Node, NodeResources};
use shared::registration::NodeDescription;
use shepherd_testing::{heartbeat, register_node};

fn n1() -> NodeDescription {
    NodeDescription::new("n1", NodeResources { cpu: 4000, memory: 8 << 30, pods: 110 })
}

async fn pod_state(server: &TestServer, name: &str) -> Value {
    server.get(&format!("/api/v1/namespaces/default/pods/{name}")).await.1
}

fn scheduled_condition(pod: &Value) -> Option<&Value> {
    pod["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "PodScheduled")
}

#[tokio::test]
async fn a_pod_created_before_the_first_heartbeat_is_bound_once_it_comes() {
    let server = TestServer::in_memory().await;
    register_node(&server.client, &n1()).await;
    let (status, _) = server.post("/api/v1/namespaces/default/pods", pod("web", 100, 1 << 20)).await;
    assert_eq!(status, StatusCode::CREATED);
    // The scheduler has decided once, one way or the other, before the heartbeat.
    eventually(&server.client, Duration::from_secs(10), "a first decision", || async {
        scheduled_condition(&pod_state(&server, "web").await).map(|_| ())
    })
    .await;
    heartbeat(&server.client, &n1()).await;
    let node = eventually(&server.client, Duration::from_secs(5), "the pod bound", || async {
        pod_state(&server, "web").await["spec"]["node_name"].as_str().filter(|n| !n.is_empty()).map(str::to_string)
    })
    .await;
    assert_eq!(node, "n1");
    server.stop().await;
}

#[tokio::test]
async fn a_node_back_from_a_stale_heartbeat_takes_the_pod_it_could_not() {
    // A short grace, so that the agent's silence makes its node unready within the test.
    let config = Config {
        node_monitor_grace: Duration::from_millis(300),
        scheduler_sweep: Duration::from_millis(200),
        // Waits on time passing look again at each bookmark.
        bookmark_interval: Duration::from_millis(100),
        ..Config::in_memory()
    };
    let grace = config.node_monitor_grace;
    let server = TestServer::start(config).await;
    register_node(&server.client, &n1()).await;
    eventually(&server.client, Duration::from_secs(10), "the node's heartbeat older than the grace", || async {
        let node: Node = serde_json::from_value(server.get("/api/v1/nodes/n1").await.1).unwrap();
        (!node.readiness(chrono::Utc::now(), grace).is_ready()).then_some(())
    })
    .await;
    let (status, _) = server.post("/api/v1/namespaces/default/pods", pod("late", 100, 1 << 20)).await;
    assert_eq!(status, StatusCode::CREATED);
    let message = eventually(&server.client, Duration::from_secs(10), "the pod unschedulable on the stale node", || async {
        let pod = pod_state(&server, "late").await;
        let condition = scheduled_condition(&pod)?;
        (condition["status"] == "False").then(|| condition["message"].as_str().unwrap_or_default().to_string())
    })
    .await;
    assert!(message.contains("node(s) were not ready"), "{message}");
    let (_, explanation) = server.get("/api/v1/namespaces/default/pods/late/scheduling").await;
    let detail = explanation["nodes"][0]["filters"][0]["detail"].as_str().unwrap_or_default().to_string();
    assert!(detail.contains("older than the node monitor grace of 300ms"), "{explanation}");
    assert_eq!(explanation["queue"]["state"], "Unschedulable", "{explanation}");

    // The agent is back: it heartbeats well within the grace from now on.
    let agent = {
        let client = server.client.clone();
        tokio::spawn(async move {
            loop {
                let _ = client.heartbeat("n1", &n1().heartbeat(chrono::Utc::now())).await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    eventually(&server.client, Duration::from_secs(5), "the pod bound after the heartbeat", || async {
        pod_state(&server, "late").await["spec"]["node_name"].as_str().filter(|n| *n == "n1").map(|_| ())
    })
    .await;
    agent.abort();
    server.stop().await;
}
