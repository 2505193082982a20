//! Two schedulers race on 2,000 pods: the server's own loop, and a second one in this test
//! running `shared::scheduler` over HTTP (list, decide, assume, POST …/binding). The
//! binding CAS must keep every pod bound at most once and every node within its capacity.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{TestServer, add_node, open_watch, pod};
use reqwest::{Method, StatusCode};
use serde_json::json;
use server::Config;
use shared::api::WatchEventType;
use shared::model::{Node, Object, Pod};
use shared::scheduler::{Profile, Scheduler};
use shepherd_client::Selection;
use shepherd_testing::poll;

const NODES: usize = 45;
const PODS_PER_NODE: i64 = 40;
const PODS: usize = 2000;
const CPU_PER_POD: i64 = 100;

#[derive(Default)]
struct Tally {
    won: AtomicUsize,
    lost: AtomicUsize,
}

/// One round of the rival scheduler: list, decide every pending pod, bind them all at once.
async fn rival_round(server: &TestServer, tally: &Tally) -> usize {
    let nodes = server.client.list::<Node>(&Selection::default()).await.unwrap();
    let pods = server.client.list::<Pod>(&Selection::default()).await.unwrap();
    let mut scheduler = Scheduler::new(Profile::bin_pack());
    for n in &nodes.items {
        scheduler.upsert_node(n, chrono::Utc::now());
    }
    for p in &pods.items {
        scheduler.upsert_pod(p);
    }
    let mut binds = Vec::new();
    for p in pods.items.iter().filter(|p| p.needs_scheduling()) {
        let decision = scheduler.schedule(p, chrono::Utc::now());
        let Some(node) = decision.selected().map(str::to_string) else { continue };
        scheduler.assume(p, &node).unwrap();
        let path = shared::api::paths::binding("default", &p.metadata.name);
        let request = server
            .client
            .request(Method::POST, &path)
            .json(&json!({"target": {"kind": "Node", "name": node}, "metadata": {"uid": p.metadata.uid}}));
        binds.push(async move { request.send().await.map(|r| r.status()) });
    }
    let attempted = binds.len();
    for status in futures::future::join_all(binds).await {
        match status {
            Ok(StatusCode::CREATED) => tally.won.fetch_add(1, Ordering::Relaxed),
            Ok(StatusCode::CONFLICT) => tally.lost.fetch_add(1, Ordering::Relaxed),
            other => panic!("unexpected binding answer {other:?}"),
        };
    }
    attempted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_schedulers_never_bind_twice_nor_oversell() {
    let server = Arc::new(TestServer::start(Config { scheduler_sweep: Duration::from_millis(200), ..Config::in_memory() }).await);
    for i in 0..NODES {
        add_node(&server, &format!("node-{i:02}"), 4000, 16 << 30, PODS_PER_NODE).await;
        server.post(&format!("/api/v1/nodes/node-{i:02}/cordon"), json!({})).await;
    }
    let (_, list) = server.get("/api/v1/pods").await;
    let start = list["resource_version"].as_u64().unwrap();

    // Every change of every pod, from before the first create.
    let mut watch = open_watch(&server, &format!("/api/v1/pods?watch=true&resource_version={start}")).await;
    let done = Arc::new(AtomicBool::new(false));
    let placements: Arc<Mutex<HashMap<String, Vec<String>>>> = Arc::default();
    let recorder = {
        let (done, placements) = (done.clone(), placements.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let Some(message) = watch.next(Duration::from_millis(500)).await else { continue };
                let event = message.watch_event();
                if event.type_ == WatchEventType::Bookmark {
                    continue;
                }
                if let Some(Object::Pod(p)) = event.object {
                    let mut placements = placements.lock().unwrap();
                    let seen = placements.entry(p.metadata.uid.clone()).or_default();
                    if seen.last().map(String::as_str).unwrap_or("") != p.spec.node_name {
                        seen.push(p.spec.node_name.clone());
                    }
                }
            }
        })
    };

    // Every pod is created while every node is cordoned, so nobody can bind yet; then the
    // nodes open up and both schedulers rush at the same 2,000 pods.
    let mut creates = Vec::new();
    for i in 0..PODS {
        let server = server.clone();
        creates.push(async move {
            let (status, body) = server.post("/api/v1/pods", pod(&format!("race-{i:04}"), CPU_PER_POD, 1 << 20)).await;
            assert_eq!(status, StatusCode::CREATED, "{body}");
        });
        if creates.len() == 32 {
            futures::future::join_all(creates.drain(..)).await;
        }
    }
    futures::future::join_all(creates).await;
    let tally = Arc::new(Tally::default());
    let uncordon = {
        let server = server.clone();
        tokio::spawn(async move {
            for i in 0..NODES {
                let (status, _) = server.post(&format!("/api/v1/nodes/node-{i:02}/uncordon"), json!({})).await;
                assert_eq!(status, StatusCode::OK);
            }
        })
    };
    let capacity = NODES * PODS_PER_NODE as usize;
    for _ in 0..600 {
        rival_round(&server, &tally).await;
        let (_, pods) = server.get("/api/v1/pods?field_selector=spec.node_name%21%3D").await;
        if uncordon.is_finished() && pods["items"].as_array().unwrap().len() >= capacity {
            break;
        }
    }
    uncordon.await.unwrap();
    // The watch has caught up once it shows every pod on the node the server has it on.
    let stored = server.client.list::<Pod>(&Selection::default()).await.expect("the pods").items;
    poll(Duration::from_secs(30), "the watch to show every binding", || async {
        let placements = placements.lock().unwrap();
        stored
            .iter()
            .all(|p| p.spec.node_name.is_empty() || placements.get(&p.metadata.uid).and_then(|seen| seen.last()) == Some(&p.spec.node_name))
            .then_some(())
    })
    .await;
    done.store(true, Ordering::Relaxed);
    recorder.await.unwrap();
    let placements = placements.lock().unwrap().clone();

    // No pod bound twice: once a node is set it never changes.
    let mut bound = 0;
    for (uid, seen) in &placements {
        let nodes: Vec<&String> = seen.iter().filter(|n| !n.is_empty()).collect();
        assert!(nodes.len() <= 1, "pod {uid} was placed on {nodes:?}");
        bound += nodes.len();
    }
    assert_eq!(placements.len(), PODS, "the watch saw every pod");
    assert_eq!(bound, capacity, "every slot is used, and no more");

    // No node oversold.
    let pods = server.client.list::<Pod>(&Selection::default()).await.unwrap();
    let mut per_node: HashMap<&str, (i64, i64)> = HashMap::new();
    for p in pods.items.iter().filter(|p| p.is_bound()) {
        let entry = per_node.entry(&p.spec.node_name).or_default();
        entry.0 += 1;
        entry.1 += p.spec.requests().cpu;
    }
    for (node, (count, cpu)) in &per_node {
        assert!(*count <= PODS_PER_NODE && *cpu <= 4000, "node {node} is oversold: {count} pods, {cpu}m");
    }
    let unschedulable = pods.items.iter().filter(|p| !p.is_bound()).count();
    assert_eq!(unschedulable, PODS - capacity);

    // One Scheduled event per bound pod, never bumped by a second bind.
    let (_, events) = server.get("/api/v1/namespaces/default/events?field_selector=reason%3DScheduled").await;
    let events = events["items"].as_array().unwrap();
    assert_eq!(events.len(), capacity);
    assert!(events.iter().all(|e| e["count"] == json!(1)), "a pod was scheduled twice");

    let won = tally.won.load(Ordering::Relaxed);
    let lost = tally.lost.load(Ordering::Relaxed);
    eprintln!("rival scheduler: {won} binds won, {lost} lost to the server's scheduler; the server bound {}", capacity - won);
    assert!(lost > 0, "the rival raced the server's scheduler for the same pods and lost some binds to the CAS");
    Arc::try_unwrap(server).ok().unwrap().stop().await;
}
