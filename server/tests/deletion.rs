//! Graceful pod deletion through the API: a pod bound to a Ready node turns Terminating
//! (MODIFIED) until its agent confirms with grace 0 (DELETED); the uid precondition, the
//! shortening of a grace and the pods that no agent runs, which go at once; a terminating
//! pod keeps its room on its node and in its namespace.

mod common;

use std::time::Duration;

use common::{SseReader, TestServer, add_node, eventually, open_watch, pod};
use reqwest::StatusCode;
use serde_json::{Value, json};
use server::Config;
use shared::api::{WatchEvent, WatchEventType};

const GI: i64 = 1 << 30;
const P: &str = "/api/v1/namespaces/default/pods/p";

async fn manual() -> TestServer {
    TestServer::start(Config { run_scheduler: false, ..Config::in_memory() }).await
}

/// Creates pod `name` and binds it to `node`.
async fn bound_pod(server: &TestServer, name: &str, node: &str) -> Value {
    assert_eq!(server.post("/api/v1/pods", pod(name, 1, 1)).await.0, StatusCode::CREATED);
    let (status, bound) = server.post(&format!("/api/v1/namespaces/default/pods/{name}/binding"), json!({"target": {"name": node}})).await;
    assert_eq!(status, StatusCode::CREATED, "{bound}");
    bound
}

/// The next event that is not a bookmark.
async fn next_change(watch: &mut SseReader) -> WatchEvent {
    loop {
        let event = watch.next(Duration::from_secs(5)).await.expect("a watch event").watch_event();
        if event.type_ != WatchEventType::Bookmark {
            return event;
        }
    }
}

#[tokio::test]
async fn a_bound_pod_on_a_ready_node_terminates_until_grace_zero_removes_it() {
    let server = manual().await;
    add_node(&server, "node-1", 4000, 8 * GI, 110).await;
    let bound = bound_pod(&server, "p", "node-1").await;
    let uid = bound["metadata"]["uid"].as_str().unwrap().to_string();
    let (_, list) = server.get("/api/v1/pods").await;
    let mut watch = open_watch(&server, &format!("/api/v1/pods?watch=true&resource_version={}", list["resource_version"])).await;

    let (status, terminating) = server.delete(P).await;
    assert_eq!(status, StatusCode::OK, "{terminating}");
    let since = terminating["metadata"]["deletion_timestamp"].clone();
    assert!(since.is_string(), "{terminating}");
    assert_eq!(terminating["metadata"]["deletion_grace_period_seconds"], 30, "the default grace");
    let event = next_change(&mut watch).await;
    assert_eq!(event.type_, WatchEventType::Modified);
    assert!(event.object.unwrap().metadata().deletion_timestamp.is_some());
    let (_, listed) = server.get("/api/v1/namespaces/default/pods").await;
    assert_eq!(listed["items"][0]["metadata"]["name"], "p", "a terminating pod is still listed");

    // Nothing changes on a wrong uid, a negative grace, a longer grace or a PUT.
    let (status, err) = server.delete(&format!("{P}?grace_period_seconds=0&uid=not-{uid}")).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(err["error"]["message"].as_str().unwrap().contains(&format!("pod default/p has uid {uid}, not not-{uid}")), "{err}");
    let (status, err) = server.delete(&format!("{P}?grace_period_seconds=-1")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        err["error"]["message"].as_str().unwrap().contains("grace_period_seconds must be between 0 and 31536000 seconds (a year), got -1"),
        "{err}"
    );
    let (status, longer) = server.delete(&format!("{P}?grace_period_seconds=90")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(longer, terminating, "a longer grace leaves the pod as it was");
    let mut put = terminating.clone();
    put["metadata"].as_object_mut().unwrap().remove("deletion_timestamp");
    put["metadata"].as_object_mut().unwrap().remove("deletion_grace_period_seconds");
    put["metadata"]["labels"]["extra"] = json!("yes");
    let (status, updated) = server.put(P, put).await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(
        (updated["metadata"]["deletion_timestamp"].clone(), updated["metadata"]["deletion_grace_period_seconds"].clone()),
        (since.clone(), json!(30))
    );

    // A shorter grace shortens it, from the same deletion_timestamp.
    let (status, shorter) = server.delete(&format!("{P}?grace_period_seconds=5&uid={uid}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (shorter["metadata"]["deletion_timestamp"].clone(), shorter["metadata"]["deletion_grace_period_seconds"].clone()),
        (since, json!(5))
    );

    let (status, gone) = server.delete(&format!("{P}?grace_period_seconds=0&uid={uid}")).await;
    assert_eq!((status, gone["metadata"]["name"].as_str()), (StatusCode::OK, Some("p")));
    assert_eq!(server.get(P).await.0, StatusCode::NOT_FOUND);
    let mut types = Vec::new();
    while types.last() != Some(&WatchEventType::Deleted) {
        types.push(next_change(&mut watch).await.type_);
    }
    assert_eq!(
        types,
        [WatchEventType::Modified, WatchEventType::Modified, WatchEventType::Deleted],
        "the PUT, the shortening, the removal"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_pod_no_agent_runs_is_removed_at_once() {
    let server = manual().await;
    // Unbound.
    server.post("/api/v1/pods", pod("p", 1, 1)).await;
    let (status, deleted) = server.delete(P).await;
    assert_eq!((status, deleted["metadata"]["deletion_timestamp"].is_null()), (StatusCode::OK, true));
    assert_eq!(server.get(P).await.0, StatusCode::NOT_FOUND);

    // Bound to a node that registered but never reported Ready.
    let (status, _) = server
        .post("/api/v1/nodes", json!({"metadata": {"name": "silent"}, "status": {"capacity": {"cpu": 1000, "memory": GI, "pods": 10}}}))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    bound_pod(&server, "p", "silent").await;
    assert_eq!(server.delete(P).await.0, StatusCode::OK);
    assert_eq!(server.get(P).await.0, StatusCode::NOT_FOUND);

    // Bound to a node that has since been deleted.
    add_node(&server, "node-1", 4000, 8 * GI, 110).await;
    bound_pod(&server, "p", "node-1").await;
    assert_eq!(server.delete("/api/v1/nodes/node-1").await.0, StatusCode::OK);
    assert_eq!(server.delete(P).await.0, StatusCode::OK);
    assert_eq!(server.get(P).await.0, StatusCode::NOT_FOUND);
    server.stop().await;
}

#[tokio::test]
async fn a_terminating_pod_keeps_its_room_on_its_node_until_it_is_gone() {
    let server = TestServer::in_memory().await;
    add_node(&server, "node-1", 1000, GI, 10).await;
    server.post("/api/v1/pods", pod("big", 800, 1)).await;
    eventually(&server.client, Duration::from_secs(5), "big bound", || async {
        let (_, p) = server.get("/api/v1/namespaces/default/pods/big").await;
        (p["spec"]["node_name"] == "node-1").then_some(())
    })
    .await;
    let (_, terminating) = server.delete("/api/v1/namespaces/default/pods/big").await;
    assert!(terminating["metadata"]["deletion_timestamp"].is_string(), "{terminating}");

    server.post("/api/v1/pods", pod("next", 500, 1)).await;
    let condition = eventually(&server.client, Duration::from_secs(5), "next unschedulable", || async {
        let (_, p) = server.get("/api/v1/namespaces/default/pods/next").await;
        p["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled" && c["status"] == "False").cloned())
    })
    .await;
    assert!(condition["message"].as_str().unwrap().contains("cpu"), "the terminating pod's 800m still count: {condition}");

    let uid = terminating["metadata"]["uid"].as_str().unwrap();
    let (status, _) = server.delete(&format!("/api/v1/namespaces/default/pods/big?grace_period_seconds=0&uid={uid}")).await;
    assert_eq!(status, StatusCode::OK);
    eventually(&server.client, Duration::from_secs(8), "next bound once big is gone", || async {
        let (_, p) = server.get("/api/v1/namespaces/default/pods/next").await;
        (p["spec"]["node_name"] == "node-1").then_some(())
    })
    .await;
    server.stop().await;
}

#[tokio::test]
async fn a_namespace_with_a_terminating_pod_is_not_deleted_yet() {
    let server = manual().await;
    add_node(&server, "node-1", 4000, 8 * GI, 110).await;
    assert_eq!(server.post("/api/v1/namespaces", json!({"metadata": {"name": "shop"}})).await.0, StatusCode::CREATED);
    assert_eq!(server.post("/api/v1/namespaces/shop/pods", pod("p", 1, 1)).await.0, StatusCode::CREATED);
    server.post("/api/v1/namespaces/shop/pods/p/binding", json!({"target": {"name": "node-1"}})).await;
    let (_, terminating) = server.delete("/api/v1/namespaces/shop/pods/p").await;
    assert!(terminating["metadata"]["deletion_timestamp"].is_string(), "{terminating}");
    let (status, err) = server.delete("/api/v1/namespaces/shop").await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(err["error"]["message"].as_str().unwrap().contains("still holds 1 pod;"), "{err}");
    assert_eq!(server.delete("/api/v1/namespaces/shop/pods/p?grace_period_seconds=0").await.0, StatusCode::OK);
    assert_eq!(server.delete("/api/v1/namespaces/shop").await.0, StatusCode::OK);
    server.stop().await;
}
