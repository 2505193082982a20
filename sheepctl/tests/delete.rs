//! `delete` of a pod bound to a Ready node: Terminating until its node confirms, and the
//! flags that shape it (`--grace-period`, `--force`, `--wait`, `--timeout`).

mod support;

use std::time::Duration;

use serde_json::Value;
use support::{Method, TestServer, example};

const POD: &str = "/api/v1/namespaces/default/pods/web-server";

/// A server with node-1 Ready and the example pod bound to it and Running, as after an agent
/// started it; no agent runs, so nothing confirms a deletion unless the test does.
fn running_pod() -> TestServer {
    let server = TestServer::start();
    server.register_node("node-1");
    server.sheepctl().args(["apply", "-f"]).arg(example("pod.json")).assert().success();
    server.pod_bound("default", "web-server");
    server.report_running("default", "web-server");
    server
}

/// What the node's agent does once the containers are gone.
fn confirm(server: &TestServer, pod: &Value) -> u16 {
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    server.request(Method::DELETE, &format!("{POD}?grace_period_seconds=0&uid={uid}"), None).0
}

#[test]
fn grace_period_zero_without_force_is_refused_and_deletes_nothing() {
    let server = running_pod();
    let refused = server.sheepctl().args(["delete", "pod", "web-server", "--grace-period=0"]).assert().failure().get_output().clone();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--grace-period=0") && stderr.contains("--force"), "{stderr}");
    assert!(server.get(POD)["metadata"]["deletion_timestamp"].is_null(), "the pod was touched");
    server.sheepctl().args(["delete", "pod", "web-server", "--force", "--grace-period=3"]).assert().failure();
}

#[test]
fn without_wait_delete_returns_while_the_pod_is_terminating_and_get_shows_it() {
    let server = running_pod();
    server.sheepctl().args(["delete", "pod", "web-server", "--wait=false"]).assert().success().stdout("pod \"web-server\" deleted\n");
    let pod = server.get(POD);
    assert!(pod["metadata"]["deletion_timestamp"].is_string(), "{pod:#}");
    // pod.json sets no grace period: Kubernetes' 30 s.
    assert_eq!(pod["metadata"]["deletion_grace_period_seconds"], 30);
    let table = server.sheepctl().args(["get", "pods"]).output().unwrap();
    let row: Vec<String> = String::from_utf8_lossy(&table.stdout).lines().nth(1).unwrap().split_whitespace().map(String::from).collect();
    assert_eq!(&row[..3], ["web-server", "1/1", "Terminating"]);
    let described = server.sheepctl().args(["describe", "pod", "web-server"]).output().unwrap();
    let described = String::from_utf8_lossy(&described.stdout);
    assert!(described.contains("Status:         Terminating"), "{described}");
    assert!(described.lines().any(|l| l.starts_with("Deleting Since:") && l.ends_with("grace period 30s")), "{described}");

    // A second deletion may shorten the grace.
    server.sheepctl().args(["delete", "pod", "web-server", "--grace-period=5", "--wait=false"]).assert().success();
    assert_eq!(server.get(POD)["metadata"]["deletion_grace_period_seconds"], 5);

    let forced = server.sheepctl().args(["delete", "pod", "web-server", "--force"]).assert().success().get_output().clone();
    assert_eq!(String::from_utf8_lossy(&forced.stdout), "pod \"web-server\" force deleted\n");
    assert!(String::from_utf8_lossy(&forced.stderr).starts_with("warning: "), "a forced deletion warns");
    assert_eq!(server.request(Method::GET, POD, None).0, 404);
}

#[test]
fn delete_waits_until_the_node_confirms() {
    let server = running_pod();
    let pods = "/api/v1/namespaces/{namespace}/pods";
    let before = server.answered_gets(pods);
    let mut delete = server.spawn(&["delete", "pod", "web-server", "--grace-period=20"]);
    let pod = server.eventually(POD, "Terminating", |pod| pod["metadata"]["deletion_timestamp"].is_string());
    assert_eq!(pod["metadata"]["deletion_grace_period_seconds"], 20);
    // The delete has listed the pod Terminating and watches it: it must not return yet.
    server.wait_answered_gets(pods, before + 2, "the delete's list and watch of the pods");
    assert!(delete.is_running(), "delete returned while the pod was still Terminating");
    assert_eq!(confirm(&server, &pod), 200);
    let (code, stdout, stderr) = delete.finish(Duration::from_secs(10));
    assert_eq!((code, stdout.as_str()), (0, "pod \"web-server\" deleted"), "{stderr}");
}

#[test]
fn the_wait_gives_up_at_the_timeout() {
    let server = running_pod();
    let output = server.sheepctl().args(["delete", "pod", "web-server", "--timeout=1s"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "pod \"web-server\" deleted\n");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("timed out after 1s waiting for pod/web-server to be deleted"), "{stderr}");
    assert!(server.get(POD)["metadata"]["deletion_timestamp"].is_string(), "the pod stays Terminating");
}
