//! Watch over SSE: replay from a resource_version (or an EventSource's `Last-Event-ID`) with
//! no gap after a reconnect, filters that turn leaving objects into DELETED, bookmarks, and
//! 410 Gone for history too old.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{SseReader, TestServer, add_node, open_watch, pod};
use reqwest::StatusCode;
use serde_json::json;
use server::Config;
use shared::api::WatchEventType;

fn quiet_config() -> Config {
    Config { run_scheduler: false, bookmark_interval: Duration::from_millis(200), ..Config::in_memory() }
}

#[tokio::test]
async fn a_reconnect_with_the_last_resource_version_misses_nothing() {
    let server = TestServer::start(quiet_config()).await;
    let (_, list) = server.get("/api/v1/pods").await;
    let start = list["resource_version"].as_u64().unwrap();

    let mut watch = open_watch(&server, &format!("/api/v1/pods?watch=true&resource_version={start}")).await;
    for i in 0..10 {
        server.post("/api/v1/pods", pod(&format!("p{i}"), 1, 1)).await;
    }
    let mut seen = BTreeSet::new();
    let mut last = start;
    while seen.len() < 4 {
        let message = watch.next(Duration::from_secs(5)).await.expect("an event");
        let event = message.watch_event();
        if event.type_ == WatchEventType::Bookmark {
            continue;
        }
        assert_eq!(message.id, event.resource_version.to_string(), "the SSE id is the resource_version");
        assert!(event.resource_version > last, "strictly increasing");
        last = event.resource_version;
        seen.insert(event.object.unwrap().metadata().name.clone());
    }
    drop(watch);

    // While disconnected: more creates, a delete.
    for i in 10..20 {
        server.post("/api/v1/pods", pod(&format!("p{i}"), 1, 1)).await;
    }
    server.delete("/api/v1/namespaces/default/pods/p0").await;

    let mut watch = open_watch(&server, &format!("/api/v1/pods?watch=true&resource_version={last}")).await;
    let mut deleted = false;
    while seen.len() < 20 || !deleted {
        let message = watch.next(Duration::from_secs(5)).await.unwrap_or_else(|| panic!("missing events; saw {seen:?}"));
        let event = message.watch_event();
        match event.type_ {
            WatchEventType::Bookmark => continue,
            WatchEventType::Added => assert!(seen.insert(event.object.unwrap().metadata().name.clone()), "an event came twice"),
            WatchEventType::Deleted => deleted = event.object.unwrap().metadata().name == "p0",
            WatchEventType::Modified => {}
        }
        assert!(event.resource_version > last);
        last = event.resource_version;
    }
    assert_eq!(seen.len(), 20);
    server.stop().await;
}

/// A watch of `path` with the `Last-Event-ID` header a reconnecting EventSource sends.
async fn watch_with_last_event_id(server: &TestServer, path: &str, last_event_id: impl std::fmt::Display) -> reqwest::Response {
    server.client.request(reqwest::Method::GET, path).header("Last-Event-ID", last_event_id.to_string()).send().await.unwrap()
}

/// The names of the next `count` pods ADDED, in order, bookmarks skipped.
async fn added(watch: &mut SseReader, count: usize) -> Vec<String> {
    let mut names = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while names.len() < count {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let event = watch.next(left).await.unwrap_or_else(|| panic!("missing events; saw {names:?}")).watch_event();
        match event.type_ {
            WatchEventType::Bookmark => continue,
            WatchEventType::Added => names.push(event.object.unwrap().metadata().name.clone()),
            other => panic!("unexpected {other:?}"),
        }
    }
    names
}

#[tokio::test]
async fn a_last_event_id_resumes_from_that_revision_and_wins_over_the_query() {
    let server = TestServer::start(quiet_config()).await;
    let (_, info) = server.get("/api/v1/info").await;
    let before_first = info["resource_version"].as_u64().unwrap();
    server.post("/api/v1/pods", pod("first", 1, 1)).await;
    let (_, info) = server.get("/api/v1/info").await;
    let r = info["resource_version"].as_u64().unwrap();
    let five: Vec<String> = (0..5).map(|i| format!("p{i}")).collect();
    for name in &five {
        server.post("/api/v1/pods", pod(name, 1, 1)).await;
    }

    let response = watch_with_last_event_id(&server, "/api/v1/pods?watch=true", r).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(added(&mut SseReader::new(response), 5).await, five, "the five created after R, and not first");

    // An EventSource resends the URL it was opened with: its resource_version is older
    // than the last event it received.
    let path = format!("/api/v1/pods?watch=true&resource_version={before_first}");
    let response = watch_with_last_event_id(&server, &path, r).await;
    assert_eq!(added(&mut SseReader::new(response), 5).await, five, "the header wins over the query's older revision");
    server.stop().await;
}

#[tokio::test]
async fn a_last_event_id_older_than_the_history_is_gone() {
    let server = TestServer::start(Config { watch_history: 5, ..quiet_config() }).await;
    for i in 0..10 {
        server.post("/api/v1/pods", pod(&format!("p{i}"), 1, 1)).await;
    }
    let response = watch_with_last_event_id(&server, "/api/v1/pods?watch=true&label_selector=app%3Dweb", 2).await;
    assert_eq!(response.status(), StatusCode::GONE, "as resource_version=2 is");
    let err: serde_json::Value = response.json().await.unwrap();
    assert_eq!(err["error"]["reason"], "Gone");
    let response = watch_with_last_event_id(&server, "/api/v1/pods?watch=true", 0).await;
    assert_eq!(response.status(), StatusCode::OK, "0 watches from now, as resource_version=0 does");
    let response = watch_with_last_event_id(&server, "/api/v1/pods?watch=true", "seven").await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST, "a header that is no revision is refused, as the query would be");
    server.stop().await;
}

#[tokio::test]
async fn filters_bookmarks_and_objects_leaving_a_selector() {
    let server = TestServer::start(quiet_config()).await;
    add_node(&server, "node-1", 1000, 1 << 30, 10).await;
    server.post("/api/v1/pods", pod("a", 1, 1)).await;
    let mut watch = open_watch(&server, "/api/v1/pods?watch=true&field_selector=spec.node_name%3Dnode-1").await;
    server.post("/api/v1/pods", pod("b", 1, 1)).await;
    server.post("/api/v1/namespaces/default/pods/a/binding", json!({"target": {"name": "node-1"}})).await;

    let mut bookmark = false;
    let mut added = None;
    while added.is_none() || !bookmark {
        let event = watch.next(Duration::from_secs(5)).await.expect("an event").watch_event();
        match event.type_ {
            WatchEventType::Bookmark => {
                assert!(event.object.is_none());
                bookmark = true;
            }
            WatchEventType::Added => added = Some(event.object.unwrap().metadata().name.clone()),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(added.as_deref(), Some("a"), "the pod that moved onto node-1 is ADDED; b never matches");

    // Grace 0: removed at once, though bound to a Ready node (graceful deletion has its own tests).
    server.delete("/api/v1/namespaces/default/pods/a?grace_period_seconds=0").await;
    loop {
        let event = watch.next(Duration::from_secs(5)).await.expect("the delete").watch_event();
        if event.type_ == WatchEventType::Deleted {
            assert_eq!(event.object.unwrap().metadata().name, "a");
            break;
        }
    }
    server.stop().await;
}

#[tokio::test]
async fn a_resource_version_older_than_the_history_is_gone_unless_the_state_answers() {
    let server = TestServer::start(Config { watch_history: 5, ..quiet_config() }).await;
    // The revision of the first pod: after the server's own writes at start (namespaces,
    // leases), and etcd's own on etcd.
    let (_, first) = server.post("/api/v1/pods", pod("p0", 1, 1)).await;
    let after_first = first["metadata"]["resource_version"].as_u64().unwrap();
    for i in 1..10 {
        server.post("/api/v1/pods", pod(&format!("p{i}"), 1, 1)).await;
    }
    let (status, err) = server.get(&format!("/api/v1/pods?watch=true&resource_version={after_first}&label_selector=app%3Dweb")).await;
    assert_eq!(status, StatusCode::GONE, "a selection that labels decide cannot be answered from the state");
    assert_eq!(err["error"]["reason"], "Gone");
    assert!(err["error"]["message"].as_str().unwrap().contains("list again"), "{err}");
    let mut from_state = open_watch(&server, &format!("/api/v1/pods?watch=true&resource_version={after_first}")).await;
    let first = from_state.next(Duration::from_secs(5)).await.expect("the pods changed since").watch_event();
    assert_eq!((first.type_, first.object.unwrap().metadata().name.as_str()), (WatchEventType::Added, "p1"));

    let (_, list) = server.get("/api/v1/pods").await;
    let rv = list["resource_version"].as_u64().unwrap();
    open_watch(&server, &format!("/api/v1/pods?watch=true&resource_version={rv}")).await;

    // A revision from the future (say, from before an in-memory server restarted) would
    // otherwise wait for changes that already happened under other numbers. (On etcd the
    // server first waits for it, 3 s: far beyond what an etcd the suite shares reaches.)
    let (status, err) = server.get(&format!("/api/v1/pods?watch=true&resource_version={}", rv + 1_000_000_000)).await;
    assert_eq!(status, StatusCode::GONE);
    assert!(err["error"]["message"].as_str().unwrap().contains("newer than the store's revision"), "{err}");
    server.stop().await;
}

#[tokio::test]
async fn a_quiet_filtered_watch_bookmarks_the_store_revision() {
    let server = TestServer::start(quiet_config()).await;
    let mut watch = open_watch(&server, "/api/v1/pods?watch=true&field_selector=spec.node_name%3Dnode-1").await;
    for i in 0..5 {
        server.post("/api/v1/pods", pod(&format!("p{i}"), 1, 1)).await;
    }
    let (_, list) = server.get("/api/v1/pods").await;
    let rv = list["resource_version"].as_u64().unwrap();
    loop {
        let event = watch.next(Duration::from_secs(5)).await.expect("a bookmark").watch_event();
        assert_eq!(event.type_, WatchEventType::Bookmark, "no pod is on node-1");
        if event.resource_version >= rv {
            break;
        }
    }
    server.stop().await;
}

#[tokio::test]
async fn shutdown_ends_open_watches() {
    let server = TestServer::start(quiet_config()).await;
    let mut watch = open_watch(&server, "/api/v1/pods?watch=true").await;
    let stopping = tokio::spawn(async move { server.stop().await });
    let mut ended = false;
    for _ in 0..50 {
        if watch.next(Duration::from_secs(5)).await.is_none() {
            ended = true;
            break;
        }
    }
    assert!(ended, "the watch stream closes on shutdown");
    tokio::time::timeout(Duration::from_secs(5), stopping).await.expect("shutdown finishes").unwrap();
}
