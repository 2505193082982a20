//! `sheepctl wait` on the watch stream: success when a fake agent reports the pod Running,
//! when a heartbeating node lets the scheduler bind it, and on deletion; a clear failure on
//! timeout, on a pod that can never get there, and on an object that does not exist.

mod support;

use std::time::Duration;

use predicates::prelude::*;
use support::{Method, TestServer, example};

/// The route of the pods of one namespace, which only `sheepctl wait` reads in these tests
/// (the tests' own waits watch every namespace, and read pods by name).
const PODS: &str = "/api/v1/namespaces/{namespace}/pods";

fn apply(server: &TestServer, file: &str) {
    server.sheepctl().args(["apply", "-f"]).arg(example(file)).assert().success();
}

#[test]
fn waits_until_the_pod_runs() {
    let server = TestServer::start();
    server.register_node("node-1");
    apply(&server, "pod.json");
    let before = server.answered_gets(PODS);
    let wait = server.spawn(&["wait", "--for=Running", "pod/web-server", "--timeout=30s"]);
    server.pod_bound("default", "web-server");
    // Running only once the wait has listed and is watching: the watch must bring the change.
    server.wait_answered_gets(PODS, before + 2, "the wait's list and watch of the pods");
    server.report_running("default", "web-server");
    let (code, out, err) = wait.finish(Duration::from_secs(20));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "pod/web-server condition met");
}

#[test]
fn waits_for_the_scheduler_to_bind_the_pod() {
    let server = TestServer::start();
    apply(&server, "pod.json");
    let mut wait = server.spawn(&["wait", "--for=condition=PodScheduled", "pod/web-server", "--timeout=30s"]);
    // The scheduler has tried and found no node: the wait must still be waiting.
    server.eventually("/api/v1/namespaces/default/pods/web-server", "unschedulable", |pod| {
        pod["status"]["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["type"] == "PodScheduled" && c["status"] == "False"))
    });
    assert!(wait.is_running(), "no node yet: the pod cannot be scheduled");
    server.register_node("node-1");
    let (code, out, err) = wait.finish(Duration::from_secs(20));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "pod/web-server condition met");
}

#[test]
fn times_out_with_the_pods_state() {
    let server = TestServer::start();
    apply(&server, "pod.json");
    server.sheepctl().args(["wait", "--for=Running", "pod/web-server", "--timeout=1s"]).assert().code(1).stdout("").stderr(
        predicate::str::starts_with("error: timed out after 1s waiting for pod/web-server to be Running: it is Pending (")
            .and(predicate::str::ends_with("; see `sheepctl describe pod web-server`\n")),
    );
}

#[test]
fn a_timeout_says_when_the_unschedulable_reason_is_from_and_where_the_pod_waits_now() {
    let server = TestServer::start();
    server.register_node("node-1");
    apply(&server, "unschedulable-pod.json");
    server.eventually("/api/v1/namespaces/default/pods/too-big", "unschedulable", |pod| {
        pod["status"]["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["reason"] == "Unschedulable"))
    });
    server.sheepctl().args(["wait", "--for=Running", "pod/too-big", "--timeout=1s"]).assert().code(1).stderr(
        predicate::str::contains("(Unschedulable: 0/1 nodes are available: 1 Insufficient memory.)")
            .and(predicate::str::contains("; that reason is from the scheduler's last attempt, and now the pod is "))
            .and(predicate::str::contains("failed attempt")),
    );
}

#[test]
fn waits_for_deletion() {
    let server = TestServer::start();
    apply(&server, "service.json");
    let services = "/api/v1/namespaces/{namespace}/services";
    let before = server.answered_gets(services);
    let wait = server.spawn(&["wait", "--for=delete", "svc/web-service", "--timeout=30s"]);
    server.wait_answered_gets(services, before + 2, "the wait's list and watch of the services");
    server.sheepctl().args(["delete", "service", "web-service"]).assert().success();
    let (code, out, err) = wait.finish(Duration::from_secs(20));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "service/web-service condition met");
    // Already gone: met at once.
    server.sheepctl().args(["wait", "--for=delete", "svc/web-service"]).assert().success();
}

/// Binds the pod and reports it Failed, as its node's agent would.
fn report_failed(server: &TestServer, name: &str) {
    let mut pod = server.pod_bound("default", name);
    pod["status"]["phase"] = serde_json::json!("Failed");
    pod["status"]["reason"] = serde_json::json!("Error");
    pod["metadata"]["resource_version"] = serde_json::json!(0);
    let (status, body) = server.request(Method::PUT, &format!("/api/v1/namespaces/default/pods/{name}/status"), Some(pod));
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_pod_that_failed_will_never_run() {
    let server = TestServer::start();
    server.register_node("node-1");
    apply(&server, "pod.json");
    report_failed(&server, "web-server");
    server
        .sheepctl()
        .args(["wait", "--for=Running", "pod/web-server", "--timeout=10s"])
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with("error: pod/web-server will never be Running: it finished as Failed"));
}

#[test]
fn a_missing_object_is_an_error_at_once() {
    let server = TestServer::start();
    server
        .sheepctl()
        .args(["wait", "--for=Running", "pod/ghost", "--timeout=30s"])
        .assert()
        .code(1)
        .stderr("error: pod/ghost not found in namespace \"default\": create it first, or pass -n\n");
}

fn create_pod(server: &TestServer, name: &str, app: &str) {
    let pod = serde_json::json!({
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"containers": [{"name": "main", "image": "minimal"}]}
    });
    let (status, body) = server.request(Method::POST, "/api/v1/namespaces/default/pods", Some(pod));
    assert_eq!(status, 201, "{body}");
}

#[test]
fn waits_for_every_pod_the_selector_matches() {
    let server = TestServer::start();
    server.register_node("node-1");
    create_pod(&server, "web-a", "web");
    create_pod(&server, "web-b", "web");
    create_pod(&server, "db", "db");
    let mut wait = server.spawn(&["wait", "--for=Running", "pods", "-l", "app=web", "--timeout=30s"]);
    server.pod_bound("default", "web-a");
    server.report_running("default", "web-a");
    server.eventually("/api/v1/namespaces/default/pods/web-a", "Running", |pod| pod["status"]["phase"] == "Running");
    assert!(wait.is_running(), "web-b is not Running yet");
    server.pod_bound("default", "web-b");
    server.report_running("default", "web-b");
    let (code, out, err) = wait.finish(Duration::from_secs(20));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "pod/web-a condition met\npod/web-b condition met");
}

#[test]
fn a_selector_wait_ends_at_once_when_any_pod_can_never_run() {
    let server = TestServer::start();
    server.register_node("node-1");
    create_pod(&server, "web-a", "web");
    create_pod(&server, "web-b", "web");
    let wait = server.spawn(&["wait", "--for=Running", "pods", "-l", "app=web", "--timeout=300s"]);
    // web-a stays Pending: a wait that followed one pod at a time would still be on it.
    report_failed(&server, "web-b");
    let (code, out, err) = wait.finish(Duration::from_secs(30));
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(err.starts_with("error: pod/web-b will never be Running: it finished as Failed"), "{err}");
}

#[test]
fn a_selector_wait_that_times_out_names_the_first_pod_and_counts_the_others() {
    let server = TestServer::start();
    for name in ["web-a", "web-b", "web-c"] {
        create_pod(&server, name, "web");
    }
    server.sheepctl().args(["wait", "--for=Running", "pods", "-l", "app=web", "--timeout=1s"]).assert().code(1).stdout("").stderr(
        predicate::str::starts_with("error: timed out after 1s waiting for pod/web-a to be Running: it is Pending (")
            .and(predicate::str::ends_with("; 2 other pods are still waiting to be Running; see `sheepctl describe pod web-a`\n")),
    );
}

#[test]
fn a_selector_must_match_something_and_comes_with_a_kind_only() {
    let server = TestServer::start();
    create_pod(&server, "web-a", "web");
    server
        .sheepctl()
        .args(["wait", "--for=Running", "pods", "-l", "app=ghost"])
        .assert()
        .code(1)
        .stderr("error: no pods match -l app=ghost in namespace \"default\"\n");
    server
        .sheepctl()
        .args(["wait", "--for=Running", "pod/web-a", "-l", "app=web"])
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with("error: with -l, name one kind and no objects"));
}
