//! Several real `shepherd` processes on one etcd: one leads, through the control plane's
//! lease, and the others take over when it is killed (after the lease runs out), stopped
//! (at once: it gives the lease up) or frozen (it acts no more once another leads). A
//! deployment that fills while its leader is killed still fills, with no pod bound twice
//! and no node oversold. Short lease timings keep the tests quick.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use shared::model::NodeResources;
use shared::registration::NodeDescription;
use shepherd_testing::{Etcd, ShepherdProcess, TestServer, poll};

/// Lease duration, renew deadline and retry period of every server here.
const TIMINGS: [&str; 6] =
    ["--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms"];
/// Longer than a lease, with time to spare for a loaded machine.
const TAKEOVER_LIMIT: Duration = Duration::from_secs(30);

struct Shepherd {
    id: String,
    process: ShepherdProcess,
}

/// Starts `shepherd` on `etcd` under `prefix`, as server `id`.
async fn start(etcd: &Etcd, prefix: &str, id: &str) -> Shepherd {
    let endpoints = etcd.endpoints().join(",");
    let mut args = vec!["--store", "etcd", "--etcd-endpoints", &endpoints, "--etcd-prefix", prefix, "--server-id", id];
    args.extend(TIMINGS);
    Shepherd { id: id.to_string(), process: ShepherdProcess::start(env!("CARGO_BIN_EXE_shepherd"), &args).await }
}

async fn info(url: &str) -> Option<Value> {
    reqwest::get(format!("{url}/api/v1/info")).await.ok()?.json().await.ok()
}

/// Waits until the server at `url` reports a leader other than `not`, and returns it.
async fn leader_other_than(url: &str, not: &str) -> String {
    poll(TAKEOVER_LIMIT, &format!("a leader other than {not:?}"), || async {
        let leader = info(url).await?["leader"].as_str()?.to_string();
        (!leader.is_empty() && leader != not).then_some(leader)
    })
    .await
}

fn by_id<'a>(servers: &'a mut [Shepherd], id: &str) -> &'a mut Shepherd {
    servers.iter_mut().find(|s| s.id == id).expect("a server of that id")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_leader_hands_over_at_once_and_a_killed_one_after_its_lease() {
    let etcd = Etcd::start(1).await;
    let mut servers = vec![start(&etcd, "/handover", "alpha").await, start(&etcd, "/handover", "beta").await];
    let first = leader_other_than(&servers[0].process.url, "").await;

    // SIGTERM: the leader gives its lease up as it stops (client-go's ReleaseOnCancel).
    let stopping = by_id(&mut servers, &first);
    stopping.process.signal(libc::SIGTERM);
    let stopped_at = Instant::now();
    stopping.process.child.wait().await.unwrap();
    let other = servers.iter().find(|s| s.id != first).unwrap().process.url.clone();
    let second = leader_other_than(&other, &first).await;
    let clean = stopped_at.elapsed();

    // SIGKILL: nothing is given up; the other takes the lease once it has seen it unchanged
    // for its duration.
    let restarted = start(&etcd, "/handover", &first).await;
    servers.retain(|s| s.id != first);
    servers.push(restarted);
    let killed = by_id(&mut servers, &second);
    killed.process.child.kill().await.unwrap();
    let killed_at = Instant::now();
    let third = leader_other_than(&servers.iter().find(|s| s.id != second).unwrap().process.url, &second).await;
    let crash = killed_at.elapsed();
    eprintln!("new leader after SIGTERM: {clean:?} ({first} -> {second}); after SIGKILL: {crash:?} ({second} -> {third})");
    assert_eq!(third, first, "the only server left leads");
    assert!(crash >= Duration::from_secs(3), "no takeover before the lease could have run out: {crash:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_leader_acts_no_more_once_another_leads() {
    let etcd = Etcd::start(1).await;
    let mut servers = vec![start(&etcd, "/frozen", "alpha").await, start(&etcd, "/frozen", "beta").await];
    let first = leader_other_than(&servers[0].process.url, "").await;
    let frozen_url = by_id(&mut servers, &first).process.url.clone();
    by_id(&mut servers, &first).process.signal(libc::SIGSTOP);
    let other = servers.iter().find(|s| s.id != first).unwrap().process.url.clone();
    let second = leader_other_than(&other, &first).await;
    by_id(&mut servers, &first).process.signal(libc::SIGCONT);
    // Woken, it finds the lease another's and stops its loops before it could act again.
    poll(TAKEOVER_LIMIT, "the woken server to stop leading", || async {
        let metrics = reqwest::get(format!("{frozen_url}/metrics")).await.ok()?.text().await.ok()?;
        metrics.lines().any(|line| line.starts_with("shepherd_leader_election_master_status") && line.ends_with(" 0")).then_some(())
    })
    .await;
    assert_eq!(leader_other_than(&frozen_url, "").await, second, "both servers agree on the new leader");
}

/// The leader is killed while a deployment fills: the next leader finishes it, every pod is
/// bound once, and no node holds more than it has room for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_filling_while_its_leader_is_killed_still_fills_with_no_double_bind() {
    const REPLICAS: usize = 300;
    const NODES: usize = 10;
    let etcd = Etcd::start(1).await;
    let mut servers = vec![start(&etcd, "/fill", "alpha").await, start(&etcd, "/fill", "beta").await];
    let first = leader_other_than(&servers[0].process.url, "").await;
    let survivor = servers.iter().find(|s| s.id != first).unwrap().process.url.clone();
    let api = TestServer::attach(&survivor);
    // Room for 40 pods of 100m per node: 400 slots for 300 pods.
    let nodes: Vec<NodeDescription> =
        (0..NODES).map(|n| NodeDescription::new(&format!("node-{n}"), NodeResources { cpu: 4000, memory: 64 << 30, pods: 110 })).collect();
    for node in &nodes {
        shepherd_testing::register_node(&api.client, node).await;
    }
    // Their agents' renewals, so that they stay Ready however long the takeover takes.
    let renewals = {
        let client = api.client.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(5)).await;
                for node in &nodes {
                    shepherd_testing::renew_lease(&client, node).await;
                }
            }
        })
    };
    let deployment = json!({
        "kind": "Deployment",
        "metadata": {"name": "fill"},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"match_labels": {"app": "fill"}},
            "template": {
                "metadata": {"labels": {"app": "fill"}},
                "spec": {"containers": [{"name": "c", "image": "minimal", "resources": {"cpu": 100, "memory": 1 << 20}}]}
            }
        }
    });
    let (status, body) = api.post("/api/v1/deployments", deployment).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let bound = |pods: &Value| pods["items"].as_array().unwrap().iter().filter(|p| p["spec"]["node_name"] != "").count();
    poll(TAKEOVER_LIMIT, "a third of the pods bound", || async {
        let (_, pods) = api.get("/api/v1/pods").await;
        (bound(&pods) >= REPLICAS / 3).then_some(())
    })
    .await;
    by_id(&mut servers, &first).process.child.kill().await.unwrap();
    let killed_at = Instant::now();
    let pods = poll(Duration::from_secs(120), "every replica bound by the next leader", || async {
        let (_, pods) = api.get("/api/v1/pods").await;
        (pods["items"].as_array().unwrap().len() == REPLICAS && bound(&pods) == REPLICAS).then_some(pods)
    })
    .await;
    eprintln!("all {REPLICAS} bound {:?} after the leader was killed", killed_at.elapsed());
    let mut per_node: HashMap<String, i64> = HashMap::new();
    for pod in pods["items"].as_array().unwrap() {
        *per_node.entry(pod["spec"]["node_name"].as_str().unwrap().to_string()).or_default() += 100;
    }
    assert!(per_node.values().all(|cpu| *cpu <= 4000), "no node oversold: {per_node:?}");
    let (_, events) = api.get("/api/v1/events").await;
    let mut scheduled: HashMap<String, usize> = HashMap::new();
    for event in events["items"].as_array().unwrap().iter().filter(|e| e["reason"] == "Scheduled") {
        *scheduled.entry(event["involved_object"]["name"].as_str().unwrap().to_string()).or_default() +=
            event["count"].as_u64().unwrap_or(1) as usize;
    }
    assert!(
        scheduled.values().all(|n| *n == 1),
        "each pod bound once: {:?}",
        scheduled.iter().filter(|(_, n)| **n > 1).collect::<Vec<_>>()
    );
    renewals.abort();
}
