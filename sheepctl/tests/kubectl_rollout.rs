//! The real kubectl (v1.32, on PATH) rolling a Deployment of 3 replicas out, back and
//! around through the Kubernetes-compatible API, on a simulated node: `set image`,
//! `rollout status|history|undo|pause|resume|restart`, `get rs`, `describe deploy` and
//! `describe rs`, with kubectl's own words. Fails, never skips, when kubectl is missing.

mod support;

use std::time::Duration;

use support::{Kubectl, TestServer};
use tokio_util::sync::CancellationToken;

/// Runs a simulated node agent on a thread of its own until `shutdown`.
fn start_node(url: &str, shutdown: CancellationToken) -> std::thread::JoinHandle<()> {
    support::start_simulated_node(url, "kubectl-rollout-node", Duration::from_millis(200), shutdown)
}

fn image(kubectl: &Kubectl) -> String {
    kubectl.run(&["get", "deploy", "web", "-o", "jsonpath={.spec.template.spec.containers[0].image}"])
}

#[test]
fn kubectl_rolls_a_deployment_out_back_and_around() {
    let server = TestServer::start();
    let shutdown = CancellationToken::new();
    let node = start_node(&server.url, shutdown.clone());
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::saved_by(&server, dir.path());
    let manifest = support::example("kubernetes/deployment.yaml");
    let done = "deployment \"web\" successfully rolled out\n";

    assert!(kubectl.run(&["apply", "-f", manifest.to_str().unwrap()]).contains("deployment.apps/web created"));
    assert!(kubectl.run(&["rollout", "status", "deploy/web", "--timeout=60s"]).ends_with(done));

    assert_eq!(kubectl.run(&["set", "image", "deploy/web", "web=minimal:v2"]), "deployment.apps/web image updated\n");
    let status = kubectl.run(&["rollout", "status", "deploy/web", "--timeout=60s"]);
    assert!(status.ends_with(done), "{status}");
    let sets = kubectl.run(&["get", "rs"]);
    assert!(sets.starts_with("NAME") && sets.contains("DESIRED") && sets.lines().count() == 3, "{sets}");
    let described = kubectl.run(&["describe", "deploy", "web"]);
    for line in ["3 desired | 3 updated | 3 total | 3 available | 0 unavailable", "(0/0 replicas created)", "(3/3 replicas created)"] {
        assert!(described.contains(line), "{line:?} in\n{described}");
    }
    assert!(described.lines().any(|l| l.starts_with("OldReplicaSets:") && l.contains("web-")), "{described}");
    assert!(described.lines().any(|l| l.starts_with("NewReplicaSet:") && l.contains("web-")), "{described}");
    let set = kubectl.run(&["describe", "rs"]);
    assert!(set.contains("Controlled By:  Deployment/web") && set.contains("deployment.kubernetes.io/revision: 2"), "{set}");

    let history = kubectl.run(&["rollout", "history", "deploy/web"]);
    assert!(history.contains("REVISION  CHANGE-CAUSE\n1         <none>\n2         <none>\n"), "{history}");
    let first = kubectl.run(&["rollout", "history", "deploy/web", "--revision=1"]);
    assert!(first.contains("deployment.apps/web with revision #1") && first.contains("Image:\tminimal\n"), "{first}");

    assert_eq!(kubectl.run(&["rollout", "undo", "deploy/web"]), "deployment.apps/web rolled back\n");
    assert!(kubectl.run(&["rollout", "status", "deploy/web", "--timeout=60s"]).ends_with(done));
    assert_eq!(image(&kubectl), "minimal");
    assert_eq!(kubectl.run(&["rollout", "undo", "deploy/web", "--to-revision=2"]), "deployment.apps/web rolled back\n");
    assert!(kubectl.run(&["rollout", "status", "deploy/web", "--timeout=60s"]).ends_with(done));
    assert_eq!(image(&kubectl), "minimal:v2");
    let missing = kubectl.output(&["rollout", "undo", "deploy/web", "--to-revision=9"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("unable to find specified revision 9 in history"), "{missing:?}");

    assert_eq!(kubectl.run(&["rollout", "pause", "deploy/web"]), "deployment.apps/web paused\n");
    let refused = kubectl.output(&["rollout", "undo", "deploy/web"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("you cannot rollback a paused deployment"), "{refused:?}");
    assert_eq!(kubectl.run(&["rollout", "resume", "deploy/web"]), "deployment.apps/web resumed\n");
    assert_eq!(kubectl.run(&["rollout", "restart", "deploy/web"]), "deployment.apps/web restarted\n");
    assert!(kubectl.run(&["rollout", "status", "deploy/web", "--timeout=60s"]).ends_with(done));
    let stamp = kubectl.run(&["get", "deploy", "web", "-o", "jsonpath={.spec.template.metadata.annotations}"]);
    assert!(stamp.contains("kubectl.kubernetes.io/restartedAt"), "{stamp}");
    let table = kubectl.run(&["get", "deploy", "web"]);
    let row: Vec<&str> = table.lines().nth(1).unwrap_or_default().split_whitespace().collect();
    assert_eq!(&row[..4], ["web", "3/3", "3", "3"], "{table}");

    shutdown.cancel();
    node.join().expect("the node thread ends");
}
