//! A fleet of simulated nodes in one `shepherd-agent` process against the real server: a
//! fixed handful of connections to the server whatever the number of nodes, every node
//! Ready, pods Running on many of them, and each node's logs through the one `--listen`.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use shared::model::{Pod, PodPhase};
use shepherd_client::{LogOptions, Selection};
use shepherd_testing::{TestServer, eventually};

const NODES: usize = 200;
const REPLICAS: usize = 400;
const WAIT: Duration = Duration::from_secs(90);
/// The fleet's pod and heartbeat calls in flight and its pod watch (21), with room for the
/// connections a call opens while the one it could reuse is still on its way back to the
/// pool (more than 17 was seen once, under heavy load, with 16 calls in flight). Before the
/// fleet shared its clients: 3 per node.
const MOST_CONNECTIONS: usize = 2 * (agent::fleet::DEFAULT_MAX_IN_FLIGHT as usize + agent::fleet::HEARTBEAT_IN_FLIGHT) + 1;

/// The inodes of the TCP sockets process `pid` holds open.
fn socket_inodes(pid: u32) -> HashSet<u64> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return HashSet::new() };
    fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| target.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok())
        .collect()
}

/// How many of `pid`'s TCP sockets are connected to `port` on loopback, from `/proc/net/tcp`.
fn connections_to(pid: u32, port: u16) -> usize {
    let inodes = socket_inodes(pid);
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let remote = format!("0100007F:{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() > 9 && fields[2] == remote && fields[9].parse().is_ok_and(|inode: u64| inodes.contains(&inode))
        })
        .count()
}

/// The agent process, killed if the test fails before it stops it.
struct Fleet(std::process::Child);

impl Drop for Fleet {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_of_simulated_nodes_shares_a_few_connections_and_one_listen_address() {
    let server = TestServer::start(server::Config::in_memory()).await;
    let port = server.url.rsplit(':').next().and_then(|p| p.parse::<u16>().ok()).expect("the server's port");
    let mut fleet = Fleet(
        std::process::Command::new(env!("CARGO_BIN_EXE_shepherd-agent"))
            .args(["--server", &server.url, "--node-name", "fleet", "--runtime", "simulated", "--simulate-nodes", &NODES.to_string()])
            .args(["--simulated-start-delay", "50ms", "--listen", "127.0.0.1:0", "--cpu", "4", "--memory", "8Gi"])
            .env("RUST_LOG", "warn")
            .spawn()
            .expect("cannot start shepherd-agent"),
    );
    let pid = fleet.0.id();
    // Sampled all along, every 20 ms, until the test ends.
    let most = Arc::new(AtomicUsize::new(0));
    let sampling = tokio::spawn({
        let most = most.clone();
        async move {
            let samples = 3 * WAIT.as_millis() / 20;
            for _ in 0..samples {
                most.fetch_max(connections_to(pid, port), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });
    let client = &server.client;

    let nodes = eventually(client, WAIT, "every simulated node registered and Ready", || async {
        let (ready, _) = shepherd_testing::ready_nodes(client).await.expect("the nodes and leases");
        (ready.len() == NODES).then_some(ready)
    })
    .await;
    let endpoints: BTreeSet<String> =
        nodes.iter().map(|n| n.status.agent_endpoint.trim_end_matches(&format!("/nodes/{}", n.metadata.name)).to_string()).collect();
    assert_eq!(endpoints.len(), 1, "every node registers the one --listen address: {endpoints:?}");

    let deployment = json!({
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"app": "web"},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "minimal", "resources": {"cpu": 100, "memory": 67108864}}]}
            }
        }
    });
    let (status, body) = server.post("/api/v1/namespaces/default/deployments", deployment).await;
    assert_eq!(status, 201, "{body}");
    let web = Selection { label_selector: Some("app=web".into()), ..Selection::namespace(Some("default")) };
    let pods = eventually(client, WAIT, "the deployment's pods Running", || async {
        let pods = client.list::<Pod>(&web).await.expect("the pods");
        (pods.items.len() == REPLICAS && pods.items.iter().all(|p| p.status.phase == PodPhase::Running)).then_some(pods.items)
    })
    .await;
    let used: HashSet<&str> = pods.iter().map(|p| p.spec.node_name.as_str()).collect();
    assert!(used.len() >= NODES / 2, "the pods spread over {} nodes only", used.len());

    for pod in pods.iter().take(3) {
        let mut log = client.logs("default", &pod.metadata.name, &LogOptions::default()).await.expect("the pod's log");
        let first = log.next().await.expect("a first chunk").expect("the log streams");
        assert!(first.starts_with(b"[simulated]"), "{first:?}");
    }

    sampling.abort();
    let most = most.load(Ordering::Relaxed);
    assert!(most >= 1, "no connection of the fleet to the server was ever seen");
    assert!(most <= MOST_CONNECTIONS, "{NODES} nodes held {most} connections to the server at once, more than {MOST_CONNECTIONS}");
    eprintln!("{NODES} nodes held at most {most} connections to the server");

    std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap();
    shepherd_testing::exited(&mut fleet.0, Duration::from_secs(10)).await;
    server.stop().await;
}
