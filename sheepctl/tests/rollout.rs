//! `rollout status|history|undo|pause|resume|restart` and `set image` against a real server
//! and a simulated node, on the example Deployment of 3 replicas.

mod support;

use std::time::Duration;

use serde_json::json;
use support::{Method, TestServer, example};
use tokio_util::sync::CancellationToken;

const DEPLOYMENT: &str = "/api/v1/namespaces/default/deployments/web";

/// Runs a simulated node agent on a thread of its own until `shutdown`.
fn start_node(url: &str, shutdown: CancellationToken) -> std::thread::JoinHandle<()> {
    support::start_simulated_node(url, "rollout-node", Duration::from_millis(200), shutdown)
}

fn stdout(command: &mut assert_cmd::Command) -> String {
    let output = command.output().expect("run sheepctl");
    assert!(output.status.success(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("utf-8")
}

#[test]
fn a_deployment_rolls_out_back_and_pauses() {
    let server = TestServer::start();
    let shutdown = CancellationToken::new();
    let node = start_node(&server.url, shutdown.clone());
    let ctl = || server.sheepctl();

    ctl().args(["apply", "-f"]).arg(example("deployment.json")).assert().success();
    let done = stdout(ctl().args(["rollout", "status", "deployment/web", "--timeout=60s"]));
    assert!(done.ends_with("deployment \"web\" successfully rolled out\n"), "{done}");
    let table = stdout(ctl().args(["get", "deploy"]));
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..4], ["web", "3/3", "3", "3"], "{table}");

    // A new image rolls out through a second ReplicaSet.
    assert_eq!(stdout(ctl().args(["set", "image", "deploy/web", "web=minimal:v2"])), "deployment.apps/web image updated\n");
    let done = stdout(ctl().args(["rollout", "status", "deploy", "web", "--timeout=60s"]));
    assert!(done.ends_with("deployment \"web\" successfully rolled out\n"), "{done}");
    let described = stdout(ctl().args(["describe", "deploy", "web"]));
    for line in [
        "Replicas:       3 desired | 3 updated | 3 total | 3 available | 0 unavailable",
        "StrategyType:   RollingUpdate",
        "RollingUpdateStrategy: 25% max unavailable, 25% max surge",
        "(0/0 replicas created)",
        "(3/3 replicas created)",
    ] {
        assert!(described.contains(line), "{line:?} in\n{described}");
    }
    assert!(described.lines().any(|l| l.starts_with("OldReplicaSets:") && l.contains("web-")), "{described}");
    assert!(described.lines().any(|l| l.starts_with("NewReplicaSet:") && l.contains("web-")), "{described}");
    let sets = stdout(ctl().args(["get", "rs", "-o", "name"]));
    assert_eq!(sets.lines().count(), 2, "{sets}");

    let history = stdout(ctl().args(["rollout", "history", "deploy/web"]));
    assert_eq!(history, "deployment.apps/web \nREVISION   CHANGE-CAUSE\n1          <none>\n2          <none>\n");
    let first = stdout(ctl().args(["rollout", "history", "deploy/web", "--revision=1"]));
    assert!(first.starts_with("deployment.apps/web with revision #1\nPod Template:\n"), "{first}");
    assert!(first.contains("Image:") && first.contains("minimal\n") && !first.contains("minimal:v2"), "{first}");
    ctl()
        .args(["rollout", "history", "deploy/web", "--revision=7"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("unable to find the specified revision"));

    // Undo goes back to revision 1's template, which becomes revision 3.
    assert_eq!(stdout(ctl().args(["rollout", "undo", "deploy/web"])), "deployment.apps/web rolled back\n");
    let image = server.eventually(DEPLOYMENT, "back on minimal", |d| d["spec"]["template"]["spec"]["containers"][0]["image"] == "minimal");
    assert!(image["spec"]["template"]["metadata"]["labels"].get("pod-template-hash").is_none(), "{image}");
    ctl().args(["rollout", "status", "deploy/web", "--timeout=60s"]).assert().success();
    let history = stdout(ctl().args(["rollout", "history", "deploy/web"]));
    assert!(history.contains("\n2 ") && history.contains("\n3 ") && !history.contains("\n1 "), "{history}");
    assert_eq!(
        stdout(ctl().args(["rollout", "undo", "deploy/web", "--to-revision=3"])),
        "deployment.apps/web skipped rollback (current template already matches revision 3)\n"
    );
    ctl()
        .args(["rollout", "undo", "deploy/web", "--to-revision=9"])
        .assert()
        .failure()
        .stderr("error: unable to find specified revision 9 in history\n");

    // Paused: a change waits, undo and restart refuse; resumed, it rolls out.
    assert_eq!(stdout(ctl().args(["rollout", "pause", "deploy/web"])), "deployment.apps/web paused\n");
    assert_eq!(stdout(ctl().args(["rollout", "pause", "deploy/web"])), "deployment.apps/web already paused\n");
    server.eventually(DEPLOYMENT, "paused", |d| d["spec"]["paused"] == true);
    ctl()
        .args(["rollout", "undo", "deploy/web"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("you cannot rollback a paused deployment"));
    ctl().args(["rollout", "restart", "deploy/web"]).assert().failure().stderr(predicates::str::contains("run rollout resume first"));
    assert_eq!(stdout(ctl().args(["set", "image", "deploy/web", "*=minimal:v3"])), "deployment.apps/web image updated\n");
    let waiting = stdout(ctl().args(["rollout", "status", "deploy/web", "--watch=false"]));
    assert!(waiting.contains("0 out of 3 new replicas have been updated"), "{waiting}");
    assert_eq!(stdout(ctl().args(["rollout", "resume", "deploy/web"])), "deployment.apps/web resumed\n");
    ctl().args(["rollout", "status", "deploy/web", "--timeout=60s"]).assert().success();

    assert_eq!(stdout(ctl().args(["rollout", "restart", "deploy/web"])), "deployment.apps/web restarted\n");
    let restarted = server.get(DEPLOYMENT);
    let stamp = restarted["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"].as_str().unwrap_or_default();
    assert!(chrono::DateTime::parse_from_rfc3339(stamp).is_ok(), "{restarted}");
    ctl().args(["rollout", "status", "deploy/web", "--timeout=60s"]).assert().success();

    ctl().args(["set", "image", "deploy/web", "db=minimal"]).assert().failure().stderr("error: unable to find container named \"db\"\n");
    ctl().args(["rollout", "status", "pod/web"]).assert().failure().stderr(predicates::str::contains("only deployments roll out"));

    shutdown.cancel();
    node.join().expect("the node thread ends");
}

#[test]
fn rollout_status_fails_once_the_progress_deadline_passes() {
    let server = TestServer::start();
    let shutdown = CancellationToken::new();
    let node = start_node(&server.url, shutdown.clone());
    server.sheepctl().args(["apply", "-f"]).arg(example("deployment.json")).assert().success();
    server.sheepctl().args(["rollout", "status", "deploy/web", "--timeout=60s"]).assert().success();

    // A template no node can run: its first new pod stays Pending, and after 1 s without
    // progress the controller reports ProgressDeadlineExceeded.
    let mut deployment = server.get(DEPLOYMENT);
    deployment["spec"]["progress_deadline_seconds"] = json!(1);
    deployment["spec"]["template"]["spec"]["node_selector"] = json!({"disk": "nowhere"});
    let (status, body) = server.request(Method::PUT, DEPLOYMENT, Some(deployment));
    assert_eq!(status, 200, "{body}");
    server
        .sheepctl()
        .args(["rollout", "status", "deploy/web", "--timeout=60s"])
        .assert()
        .failure()
        .stderr("error: deployment \"web\" exceeded its progress deadline\n");

    shutdown.cancel();
    node.join().expect("the node thread ends");
}
