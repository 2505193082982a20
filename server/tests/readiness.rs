//! Readiness on the scheduling path, through the real API: a node registered exactly as its
//! agent registers it takes a pod created before its first lease renewal, a renewal writes
//! the lease alone, and a node whose lease went stale takes the pods it could not the moment
//! its agent is back.

mod common;

use std::time::Duration;

use common::{TestServer, eventually, pod};
use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::Value;
use server::Config;
use shared::api::WatchEventType;
use shared::model::{Kind, Lease, Node, NodeResources, Object};
use shared::registration::NodeDescription;
use shepherd_client::Selection;
use shepherd_testing::{heartbeat, register_node, renew_lease};

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
async fn a_pod_created_before_the_first_renewal_is_bound_once_it_comes() {
    let server = TestServer::in_memory().await;
    register_node(&server.client, &n1()).await;
    let (status, _) = server.post("/api/v1/namespaces/default/pods", pod("web", 100, 1 << 20)).await;
    assert_eq!(status, StatusCode::CREATED);
    // The scheduler has decided once, one way or the other, before the renewal.
    eventually(&server.client, Duration::from_secs(10), "a first decision", || async {
        scheduled_condition(&pod_state(&server, "web").await).map(|_| ())
    })
    .await;
    renew_lease(&server.client, &n1()).await;
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
    eventually(&server.client, Duration::from_secs(10), "the node's lease older than the grace", || async {
        let node: Node = serde_json::from_value(server.get("/api/v1/nodes/n1").await.1).unwrap();
        let lease: Lease = serde_json::from_value(server.get("/api/v1/leases/n1").await.1).unwrap();
        (!node.readiness(Some(&lease), chrono::Utc::now(), grace).is_ready()).then_some(())
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

    // The agent is back, as its lease loop is: it renews well within the grace from now on,
    // and its first renewal after a gap longer than the lease's duration comes with its status
    // (node lifecycle may have marked the node Unknown meanwhile).
    let agent = {
        let client = server.client.clone();
        tokio::spawn(async move {
            let _ = client.renew_lease("n1").await;
            let _ = client.heartbeat("n1", &n1().heartbeat(chrono::Utc::now())).await;
            loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let _ = client.renew_lease("n1").await;
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

#[tokio::test]
async fn a_renewal_writes_the_lease_alone_and_node_watchers_see_nothing() {
    let server = TestServer::in_memory().await;
    let registered = register_node(&server.client, &n1()).await;
    let first: Lease = server.client.get("", "n1").await.unwrap();
    assert_eq!((first.spec.holder_identity.as_str(), first.spec.lease_duration_seconds), ("n1", 40));
    let mut nodes =
        server.client.watch(Kind::Node, &Selection::default(), server.client.info().await.unwrap().resource_version).await.unwrap();
    let mut renewed = first.clone();
    for _ in 0..3 {
        renewed = server.client.renew_lease("n1").await.unwrap();
    }
    assert!(renewed.spec.renew_time > first.spec.renew_time && renewed.metadata.resource_version > first.metadata.resource_version);
    let node: Node = server.client.get("", "n1").await.unwrap();
    assert_eq!(node.metadata.resource_version, registered.metadata.resource_version, "no Node write");
    // A marker: the first Node event the watch delivers must be this cordon, not a renewal.
    server.client.cordon("n1", true).await.unwrap();
    let event = loop {
        let event = nodes.next().await.expect("the watch goes on").unwrap();
        if event.type_ != WatchEventType::Bookmark {
            break event;
        }
    };
    match (event.type_, event.object) {
        (WatchEventType::Modified, Some(Object::Node(n))) => assert!(n.status.unschedulable, "{n:?}"),
        other => panic!("the first Node event is not the cordon: {other:?}"),
    }
    heartbeat(&server.client, &n1()).await;
    let reported: Node = server.client.get("", "n1").await.unwrap();
    assert!(reported.status.last_heartbeat > node.status.last_heartbeat, "a status heartbeat is a Node write");
    server.stop().await;
}

#[tokio::test]
async fn a_renewal_of_a_deleted_node_is_not_found_so_its_agent_registers_again() {
    let server = TestServer::in_memory().await;
    register_node(&server.client, &n1()).await;
    let (status, _) = server.delete("/api/v1/nodes/n1").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = server.get("/api/v1/leases/n1").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the lease went with its node");
    let error = server.client.renew_lease("n1").await.unwrap_err();
    assert!(error.is_not_found(), "{error}");
    register_node(&server.client, &n1()).await;
    renew_lease(&server.client, &n1()).await;
    server.stop().await;
}
