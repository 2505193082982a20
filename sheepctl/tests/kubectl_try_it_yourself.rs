//! The article's "Try it yourself" walk-through (`examples/try-it-yourself.sh`) with kubectl
//! in place of sheepctl, as a Kubernetes user would type it, against a server that serves
//! HTTPS and checks tokens, with a node (simulated, so the timing is the scheduler's and the
//! agent's) that reaches it over TLS with its own node token.

mod support;

use std::time::Duration;

use agent::{AgentConfig, RuntimeChoice};
use support::{Kubectl, TestServer};
use tokio_util::sync::CancellationToken;

const NODE: &str = "try-it-node";

fn start_node(server: &TestServer, shutdown: CancellationToken) -> std::thread::JoinHandle<()> {
    let mut config = AgentConfig::new(&server.url);
    config.node_name = NODE.into();
    config.token = Some("node-secret-token".into());
    config.certificate_authority = server.trust().map(str::to_string);
    config.runtime = RuntimeChoice::Simulated { start_delay: Duration::from_millis(300) };
    config.listen = "127.0.0.1:0".parse().unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(agent::run(config, shutdown)).expect("the node agent runs");
    })
}

/// The REASON column of an events table (`kubectl get events`), each reason where it first appears.
fn story(table: &str) -> Vec<String> {
    let mut reasons: Vec<String> = Vec::new();
    for line in table.lines().skip(1) {
        let reason = line.split_whitespace().nth(2).unwrap_or_default().to_string();
        if !reasons.contains(&reason) {
            reasons.push(reason);
        }
    }
    reasons
}

#[test]
fn the_walk_through_runs_with_kubectl() {
    let server = TestServer::https_with_tokens("admin-secret-token admin\nnode-secret-token node try-it-node\n");
    let shutdown = CancellationToken::new();
    let node = start_node(&server, shutdown.clone());
    let dir = tempfile::tempdir().unwrap();
    let (ca, kubeconfig) = (dir.path().join("ca.crt"), dir.path().join("kubeconfig"));
    std::fs::write(&ca, server.trust().unwrap()).unwrap();
    server
        .sheepctl()
        .env("SHEPHERD_CA", &ca)
        .env("SHEPHERD_TOKEN", "admin-secret-token")
        .args(["kubeconfig", "--save", kubeconfig.to_str().unwrap()])
        .assert()
        .success();
    let kubectl = Kubectl { kubeconfig };

    // Is there a node to run on? (It registers over TLS with its node token.) `kubectl wait`
    // answers NotFound for a node not yet registered, so wait for it to exist first.
    kubectl.run(&["wait", "--for=create", &format!("node/{NODE}"), "--timeout=30s"]);
    kubectl.run(&["wait", "--for=condition=Ready", &format!("node/{NODE}"), "--timeout=30s"]);
    let nodes = kubectl.run(&["get", "nodes"]);
    assert!(nodes.lines().any(|l| l.starts_with(NODE) && l.split_whitespace().nth(1) == Some("Ready")), "{nodes}");

    // Create a pod and immediately check its state: the API answered before anything ran.
    let manifest = support::example("kubernetes/pod.yaml");
    assert!(kubectl.run(&["apply", "-f", manifest.to_str().unwrap()]).contains("pod/web-server created"));
    let wide = kubectl.run(&["get", "pods", "-o", "wide"]);
    assert!(wide.starts_with("NAME") && wide.contains("NODE") && wide.contains("web-server"), "{wide}");

    // Instead of guessing with sleep, wait on the watch stream.
    let met = kubectl.run(&["wait", "--for=condition=Ready", "pod/web-server", "--timeout=30s"]);
    assert!(met.contains("pod/web-server condition met"), "{met}");
    let wide = kubectl.run(&["get", "pods", "-o", "wide"]);
    let row = wide.lines().find(|l| l.starts_with("web-server ")).unwrap_or_else(|| panic!("{wide}"));
    assert!(row.contains("Running") && row.contains(NODE), "{wide}");

    // What happened, oldest first.
    let events = kubectl.run(&["get", "events", "--field-selector", "involvedObject.name=web-server"]);
    assert!(events.starts_with("LAST SEEN") && events.contains("pod/web-server"), "{events}");
    assert_eq!(story(&events), ["Created", "Scheduled", "Pulled", "Started", "Running"], "{events}");

    // Why it runs where it runs.
    let described = kubectl.run(&["describe", "pod", "web-server"]);
    assert!(described.contains(&format!("Node:         {NODE}")), "{described}");
    let told = described.split("Events:").nth(1).unwrap_or_else(|| panic!("describe lists the events\n{described}"));
    let order: Vec<usize> = ["Created", "Scheduled", "Started", "Running"]
        .iter()
        .map(|reason| told.find(&format!("  {reason}  ")).unwrap_or_else(|| panic!("{reason} in\n{told}")))
        .collect();
    assert!(order.is_sorted(), "describe tells the story in order\n{told}");

    // Clean up: the delete only marks the pod Terminating; the node confirms, then it is gone.
    assert!(kubectl.run(&["delete", "pod", "web-server", "--wait=false"]).contains("pod \"web-server\" deleted"));
    kubectl.run(&["wait", "--for=delete", "pod/web-server", "--timeout=60s"]);
    let gone = kubectl.output(&["get", "pod", "web-server"]);
    assert!(String::from_utf8_lossy(&gone.stderr).contains("pods \"web-server\" not found"), "{gone:?}");

    shutdown.cancel();
    node.join().expect("the node thread ends");
}
