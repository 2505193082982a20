//! The real `shepherd` binary on a durable data dir: SIGKILL while 1,000 pods are being
//! created loses none that got a 201 and duplicates none; SIGTERM stops cleanly, also once
//! the reader of its log has gone; the process runs without transparent huge pages.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::pod;
use reqwest::StatusCode;
use serde_json::Value;
use shepherd_testing::ShepherdProcess;

/// `shepherd` on the durable data directory `dir`.
async fn start(dir: &std::path::Path) -> ShepherdProcess {
    ShepherdProcess::start_in(env!("CARGO_BIN_EXE_shepherd"), dir, &[]).await
}

async fn list_pods(client: &reqwest::Client, url: &str) -> Value {
    client.get(format!("{url}/api/v1/pods")).send().await.unwrap().json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_creates_loses_no_acknowledged_pod() {
    let dir = tempfile::tempdir().unwrap();
    let mut shepherd = start(dir.path()).await;
    let client = reqwest::Client::new();
    let acknowledged: Arc<Mutex<HashMap<String, (String, u64)>>> = Arc::default();

    let mut tasks = Vec::new();
    for worker in 0..16 {
        let (client, url, acknowledged) = (client.clone(), shepherd.url.clone(), acknowledged.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..1000 / 16 + 1 {
                let name = format!("p-{worker}-{i}");
                let Ok(response) = client.post(format!("{url}/api/v1/pods")).json(&pod(&name, 10, 1 << 20)).send().await else {
                    return;
                };
                if response.status() != StatusCode::CREATED {
                    return;
                }
                let Ok(body) = response.json::<Value>().await else { return };
                let uid = body["metadata"]["uid"].as_str().unwrap().to_string();
                let rv = body["metadata"]["resource_version"].as_u64().unwrap();
                acknowledged.lock().unwrap().insert(name, (uid, rv));
            }
        }));
    }
    // Kill mid-way: once a good share of the creates has been acknowledged.
    shepherd_testing::poll(Duration::from_secs(30), "300 acknowledged creates", || async {
        let acknowledged = acknowledged.lock().unwrap().len();
        (acknowledged >= 300).then_some(()).ok_or(format!("{acknowledged} acknowledged"))
    })
    .await;
    shepherd.child.start_kill().unwrap();
    shepherd.child.wait().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() >= 300 && acknowledged.len() < 1000, "killed mid-way: {} acknowledged", acknowledged.len());

    let restarted = start(dir.path()).await;
    let list = list_pods(&client, &restarted.url).await;
    let revision = list["resource_version"].as_u64().unwrap();
    let items = list["items"].as_array().unwrap();
    let mut names = HashSet::new();
    let mut versions = HashSet::new();
    for item in items {
        let name = item["metadata"]["name"].as_str().unwrap().to_string();
        assert!(names.insert(name.clone()), "pod {name} is listed twice");
        let rv = item["metadata"]["resource_version"].as_u64().unwrap();
        assert!(rv <= revision, "pod {name} has resource_version {rv} past the store's {revision}");
        assert!(versions.insert(rv), "two objects share resource_version {rv}");
    }
    let stored: HashMap<&str, &Value> = items.iter().map(|p| (p["metadata"]["name"].as_str().unwrap(), p)).collect();
    for (name, (uid, rv)) in &acknowledged {
        let pod = stored.get(name.as_str()).unwrap_or_else(|| panic!("pod {name} got a 201 but is gone after the crash"));
        assert_eq!(pod["metadata"]["uid"].as_str().unwrap(), uid, "pod {name} is the same object");
        assert!(pod["metadata"]["resource_version"].as_u64().unwrap() >= *rv);
    }

    // The revision counter continues: a new write lands after everything stored.
    let response = client.post(format!("{}/api/v1/pods", restarted.url)).json(&pod("after", 10, 1)).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let after: Value = response.json().await.unwrap();
    assert!(after["metadata"]["resource_version"].as_u64().unwrap() > revision);
    let info: Value = client.get(format!("{}/api/v1/info", restarted.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(info["store"], "sqlite");
    assert!(info["resource_version"].as_u64().unwrap() > revision);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_cleanly_and_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let mut shepherd = start(dir.path()).await;
    let client = reqwest::Client::new();
    for i in 0..20 {
        let response = client.post(format!("{}/api/v1/pods", shepherd.url)).json(&pod(&format!("p{i}"), 10, 1)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
    }
    let before = list_pods(&client, &shepherd.url).await;
    shepherd.signal(libc::SIGTERM);
    let status = tokio::time::timeout(Duration::from_secs(10), shepherd.child.wait()).await.expect("exits within 10 s").unwrap();
    assert!(status.success(), "{status}");

    let restarted = start(dir.path()).await;
    let after = list_pods(&client, &restarted.url).await;
    assert_eq!(after["items"].as_array().unwrap().len(), 20);
    assert!(after["resource_version"].as_u64() >= before["resource_version"].as_u64());
}

/// As in `shepherd 2>&1 | head -3`: once the reader of its log has gone, every line it logs
/// fails to write, and it must go on serving and still stop on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_it_after_the_reader_of_its_log_has_gone() {
    let dir = tempfile::tempdir().unwrap();
    let (mut shepherd, log) = ShepherdProcess::start_reading_log(env!("CARGO_BIN_EXE_shepherd"), dir.path(), &[]).await;
    drop(log);
    let client = reqwest::Client::new();
    let response = client.post(format!("{}/api/v1/pods", shepherd.url)).json(&pod("after-the-log", 10, 1)).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    shepherd.signal(libc::SIGTERM);
    let status = tokio::time::timeout(Duration::from_secs(10), shepherd.child.wait()).await.expect("exits within 10 s").unwrap();
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn the_server_turns_transparent_huge_pages_off_for_itself() {
    let dir = tempfile::tempdir().unwrap();
    let shepherd = start(dir.path()).await;
    let status = std::fs::read_to_string(format!("/proc/{}/status", shepherd.child.id().unwrap())).unwrap();
    let line = status.lines().find(|l| l.starts_with("THP_enabled:")).expect("the kernel reports THP_enabled");
    assert_eq!(line.split_whitespace().nth(1), Some("0"), "{line}");
}
