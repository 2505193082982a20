//! Probes against the real Docker engine and the real API server in process: each handler
//! (exec, httpGet, tcpSocket) run as the kubelet runs it, httpGet and tcpSocket from inside
//! the pod's network namespace to 127.0.0.1 (no port is published: nothing else could reach
//! them), with the pod's Ready condition, a liveness restart and the kubelet's events. These
//! tests fail (never skip) when Docker is unreachable.

mod common;

use std::time::Duration;

use agent::network::Choice;
use common::{Api, Cleanup, DockerNode, TestAgent, container, docker, docker_node, minimal_image, spec, unique};
use shared::model::{
    ContainerState, ExecAction, HttpGetAction, Pod, PodPhase, Probe, ProbePort, TcpSocketAction, conditions, find_condition,
};
use shepherd_testing::poll;

const WAIT: Duration = Duration::from_secs(40);

/// A probe of `period` seconds that counts `failures` failures in a row as failure.
fn probe(period: i32, failures: i32) -> Probe {
    Probe { period_seconds: period, failure_threshold: failures, ..Probe::default() }
}

fn ready(pod: &Pod) -> Option<&str> {
    find_condition(&pod.status.conditions, conditions::READY).map(|c| c.status.as_str())
}

/// Waits until an event of `reason` whose message starts with `prefix` is recorded for `pod`.
async fn event(api: &Api, pod: &str, reason: &str, prefix: &str) -> String {
    poll(WAIT, &format!("a {reason} event starting {prefix:?}"), || async {
        let events = api.events_for(pod).await;
        events.iter().find(|e| e.reason == reason && e.message.starts_with(prefix)).map(|e| e.message.clone()).ok_or_else(|| {
            let seen: Vec<String> = events.iter().map(|e| format!("{}: {}", e.reason, e.message)).collect();
            format!("{seen:?}")
        })
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_readiness_probe_inside_the_pod_flips_its_ready_condition() {
    let DockerNode { node, api, agent, cleanup: _cleanup, .. } = docker_node().await;
    // httpd serves /tmp/www on the pod's own port 8080, published nowhere; the page the
    // probe asks for exists from 3 s after the start to 8 s.
    let script =
        "mkdir -p /tmp/www; httpd -p 8080 -h /tmp/www; sleep 3; echo ok > /tmp/www/healthz; sleep 5; rm /tmp/www/healthz; sleep 3600";
    let mut web = container("web", &["sh", "-c", script]);
    web.ports = vec![shared::model::ContainerPort { name: "http".into(), container_port: 8080, ..Default::default() }];
    let http = HttpGetAction { path: "/healthz".into(), port: ProbePort::Name("http".into()), ..Default::default() };
    web.readiness_probe = Some(Probe { http_get: Some(http), ..probe(1, 1) });
    let pod = api.add_pod(&node, "web", spec(vec![web], "Always")).await;
    let uid = pod.metadata.uid.clone();

    let running = api.wait_for(&uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    assert_eq!(ready(&running), Some(conditions::FALSE), "not ready before the first success: {:?}", running.status);
    let became_ready = api.wait_for(&uid, "Ready", WAIT, |p| ready(p) == Some(conditions::TRUE)).await;
    let status = &became_ready.status.container_statuses[0];
    assert!(status.ready && status.started, "{status:?}");
    assert_eq!(find_condition(&became_ready.status.conditions, conditions::CONTAINERS_READY).unwrap().status, conditions::TRUE);
    let unready = api.wait_for(&uid, "not Ready again", WAIT, |p| ready(p) == Some(conditions::FALSE)).await;
    assert_eq!(unready.status.phase, PodPhase::Running, "readiness never stops a container");
    assert!(!unready.status.container_statuses[0].ready);
    assert_eq!(unready.status.container_statuses[0].restart_count, 0);
    event(&api, "web", "Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 404").await;
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tcp_liveness_probe_restarts_the_container_whose_port_closed() {
    let DockerNode { node, api, agent, cleanup: _cleanup, .. } = docker_node().await;
    // Listens on 9000 for 3 s of each run, then stops listening but keeps running.
    let script = "httpd -f -p 9000 & sleep 3; kill $!; sleep 3600";
    let mut main = container("main", &["sh", "-c", script]);
    main.liveness_probe =
        Some(Probe { tcp_socket: Some(TcpSocketAction { port: ProbePort::Number(9000), ..Default::default() }), ..probe(1, 2) });
    let pod = api.add_pod(&node, "listener", spec(vec![main], "Always")).await;
    let uid = pod.metadata.uid.clone();

    let restarted =
        api.wait_for(&uid, "a restart", WAIT, |p| p.status.container_statuses.first().is_some_and(|c| c.restart_count >= 1)).await;
    assert_ne!(restarted.status.phase, PodPhase::Failed);
    let container = &restarted.status.container_statuses[0];
    assert!(matches!(container.last_state, Some(ContainerState::Terminated { .. })), "the killed run: {container:?}");
    let failed = event(&api, "listener", "Unhealthy", "Liveness probe failed: dial tcp 127.0.0.1:9000: connect: ").await;
    assert!(failed.contains("refused"), "{failed}");
    assert_eq!(event(&api, "listener", "Killing", "Container main").await, "Container main failed liveness probe, will be restarted");
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_probes_hold_readiness_behind_the_startup_probe() {
    let DockerNode { node, api, agent, cleanup: _cleanup, .. } = docker_node().await;
    let script = "sleep 2; touch /tmp/started; sleep 2; touch /tmp/ready; sleep 3600";
    let mut app = container("app", &["sh", "-c", script]);
    let exec = |command: &str| Some(ExecAction { command: vec!["sh".into(), "-c".into(), command.into()] });
    app.startup_probe = Some(Probe { exec: exec("test -e /tmp/started"), ..probe(1, 30) });
    app.readiness_probe = Some(Probe { exec: exec("cat /tmp/ready"), ..probe(1, 1) });
    let pod = api.add_pod(&node, "app", spec(vec![app], "Always")).await;
    let uid = pod.metadata.uid.clone();

    let running = api.wait_for(&uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    let first = &running.status.container_statuses[0];
    assert!(!first.started && !first.ready, "held by its startup probe: {first:?}");
    let started = api.wait_for(&uid, "started", WAIT, |p| p.status.container_statuses.first().is_some_and(|c| c.started)).await;
    assert_eq!(ready(&started), Some(conditions::FALSE), "started, but its readiness probe has not passed");
    let ready_pod = api.wait_for(&uid, "Ready", WAIT, |p| ready(p) == Some(conditions::TRUE)).await;
    assert_eq!(ready_pod.status.container_statuses[0].restart_count, 0);
    event(&api, "app", "Unhealthy", "Startup probe failed: ").await;
    let readiness = event(&api, "app", "Unhealthy", "Readiness probe failed: ").await;
    assert!(readiness.contains("/tmp/ready"), "the command's output: {readiness}");
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_probe_reaches_the_pod_on_dockers_pod_network_too() {
    let docker = docker().await;
    minimal_image(&docker).await;
    let node = unique("node");
    let _cleanup = Cleanup(node.clone());
    let api = Api::start().await;
    // No warm sandbox: a lone container gets its network namespace from Docker.
    let agent =
        TestAgent::start_configured(&node, docker.clone(), api.clone(), 0, |config| config.pod_network.choice = Choice::Docker).await;
    let mut web = container("web", &["sh", "-c", "mkdir -p /tmp/www; echo ok > /tmp/www/healthz; exec httpd -f -p 8080 -h /tmp/www"]);
    let http = HttpGetAction { path: "/healthz".into(), port: ProbePort::Number(8080), ..Default::default() };
    web.readiness_probe = Some(Probe { http_get: Some(http), ..probe(1, 1) });
    let pod = api.add_pod(&node, "web", spec(vec![web], "Always")).await;
    let became_ready = api.wait_for(&pod.metadata.uid, "Ready", WAIT, |p| ready(p) == Some(conditions::TRUE)).await;
    assert!(became_ready.status.container_statuses[0].ready);
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_probe_that_times_out_ends_its_command() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node().await;
    let mut app = container("app", &["sleep", "3600"]);
    let slow = Some(ExecAction { command: vec!["sleep".into(), "1000".into()] });
    app.readiness_probe = Some(Probe { exec: slow, timeout_seconds: 1, ..probe(1, 1) });
    let pod = api.add_pod(&node, "slow", spec(vec![app], "Always")).await;
    let running = api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    let id = running.status.container_statuses[0].container_id.clone();

    let message = "Readiness probe failed: command \"sleep 1000\" timed out";
    poll(WAIT, "four timed-out probes", || async {
        let events = api.events_for("slow").await;
        let count = events.iter().find(|e| e.reason == "Unhealthy" && e.message == message).map_or(0, |e| e.count);
        if count >= 4 { Ok(()) } else { Err(format!("{count} so far")) }
    })
    .await;
    let top = docker.client().top_processes(&id, None).await.expect("docker top");
    let commands: Vec<String> = top.processes.unwrap_or_default().iter().filter_map(|row| row.last().cloned()).collect();
    let probes = commands.iter().filter(|command| command.as_str() == "sleep 1000").count();
    assert!(probes <= 1, "only the probe under way may run: {commands:?}");
    assert!(commands.iter().any(|command| command == "sleep 3600"), "the container's own process: {commands:?}");
    agent.stop().await;
}
