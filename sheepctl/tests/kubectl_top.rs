//! The real kubectl (v1.32, on PATH) and sheepctl read what a real Docker pod uses through
//! `metrics.k8s.io`: `kubectl top pods` (`-A`, `-l`, `POD --containers`) and `top nodes`
//! print non-zero figures, and `sheepctl top` prints the same columns. Fails, never skips,
//! when kubectl or Docker is missing.

mod support;

use std::time::Duration;

use support::{Kubectl, RemoveNodeContainers, TestServer};
use tokio_util::sync::CancellationToken;

const NODE: &str = "top-node";
const WAIT: Duration = Duration::from_secs(60);

/// A pod that holds a few MiB (kubectl prints whole MiB) and keeps a little of a core busy:
/// a short count, then a rest, over and over.
const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: busy\n  labels:\n    app: busy\nspec:\n  containers:\n  - name: main\n    image: minimal\n    command: [sh, -c, \"x=$(seq 1 800000); while true; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 0.2; done\"]\n    resources:\n      limits:\n        cpu: 200m\n        memory: 64Mi\n";

/// The figures of the line of `table` that starts with `name`: each cell after the name.
fn figures<'a>(table: &'a str, name: &str) -> Option<Vec<&'a str>> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&name))
        .map(|cells| cells[1..].to_vec())
}

/// A cell such as `12m` or `3Mi` whose number is not zero.
fn non_zero(cell: &str) -> bool {
    cell.trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == '%').parse::<u64>().is_ok_and(|n| n > 0)
}

#[test]
fn kubectl_and_sheepctl_top_show_a_docker_pods_usage() {
    let _cleanup = RemoveNodeContainers(NODE);
    let server = TestServer::start();
    let shutdown = CancellationToken::new();
    let node = support::start_docker_node(&server.url, NODE, |_| {}, shutdown.clone());
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::saved_by(&server, dir.path());
    let pod = dir.path().join("pod.yaml");
    std::fs::write(&pod, POD).unwrap();
    assert!(kubectl.run(&["apply", "-f", pod.to_str().unwrap()]).contains("pod/busy created"));
    let ready = kubectl.run(&["wait", "--for=condition=Ready", "pod/busy", "--timeout=60s"]);
    assert!(ready.contains("condition met"), "{ready}");

    // Docker's first readings of a new container may not have its CPU yet: wait for both.
    let pods = shepherd_testing::poll_blocking(WAIT, "kubectl top pods to show busy's CPU and memory", || {
        let out = kubectl.output(&["top", "pods"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let said = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
        match figures(&text, "busy") {
            Some(cells) if cells.len() == 2 && cells.iter().all(|c| non_zero(c)) => Ok(text),
            _ => Err(said),
        }
    });
    assert!(pods.starts_with("NAME") && pods.contains("CPU(cores)") && pods.contains("MEMORY(bytes)"), "{pods}");
    let cpu: u64 = figures(&pods, "busy").unwrap()[0].trim_end_matches('m').parse().unwrap();
    assert!(cpu <= 250, "within its 200m limit, give or take the window: {pods}");

    let everywhere = kubectl.run(&["top", "pods", "-A", "-l", "app=busy"]);
    assert!(everywhere.starts_with("NAMESPACE") && figures(&everywhere, "default").is_some_and(|c| c[0] == "busy"), "{everywhere}");
    let containers = kubectl.run(&["top", "pod", "busy", "--containers"]);
    assert!(figures(&containers, "busy").is_some_and(|c| c[0] == "main" && non_zero(c[1])), "{containers}");

    let nodes = kubectl.run(&["top", "nodes"]);
    let cells = figures(&nodes, NODE).unwrap_or_else(|| panic!("{nodes}"));
    assert_eq!(cells.len(), 4, "CPU, CPU%, memory, memory%: {nodes}");
    assert!(non_zero(cells[0]) && non_zero(cells[2]) && cells[1].ends_with('%'), "{nodes}");

    let ours = server.sheepctl().args(["top", "pods", "--containers"]).output().unwrap();
    let ours = String::from_utf8_lossy(&ours.stdout);
    assert!(ours.starts_with("POD") && figures(&ours, "busy").is_some_and(|c| c[0] == "main" && non_zero(c[1])), "{ours}");
    let ours = server.sheepctl().args(["top", "nodes"]).output().unwrap();
    let ours = String::from_utf8_lossy(&ours.stdout);
    assert!(figures(&ours, NODE).is_some_and(|c| c.len() == 4 && non_zero(c[0])), "{ours}");

    shutdown.cancel();
    node.join().unwrap();
}
