//! The agent against the real `shepherd` server (in process, on 127.0.0.1:0) and the real
//! Docker engine: the whole path create → schedule → bind → Running, logs through the
//! server's proxy, graceful deletion (Terminating until the agent confirms), and the binary's
//! SIGTERM that leaves pods running.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent::AgentConfig;
use agent::runtime::{ContainerRuntime, LABEL_NODE, LABEL_POD_UID, RunState};
use common::{Cleanup, docker, minimal_image, unique};
use serde_json::{Value, json};
use shared::backoff::Backoff;
use shepherd_testing::{TestServer, eventually, exited, poll};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

/// The real server, with the calls these tests make of it.
struct Server {
    inner: TestServer,
    base: String,
}

impl Server {
    async fn start() -> Server {
        let inner = TestServer::start(server::Config::in_memory()).await;
        Server { base: inner.url.clone(), inner }
    }

    async fn get(&self, path: &str) -> (u16, String) {
        let (status, body) = self.inner.get(path).await;
        (status.as_u16(), body.as_str().map_or_else(|| body.to_string(), str::to_string))
    }

    async fn json(&self, path: &str) -> Value {
        let (status, body) = self.inner.get(path).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let (status, answer) = self.inner.post(path, body).await;
        assert!(status == 200 || status == 201, "POST {path}: {status} {answer}");
        answer
    }

    /// Deletes and returns the answer: the pod's last state, or its Terminating state.
    async fn delete(&self, path: &str) -> Value {
        let (status, answer) = self.inner.delete(path).await;
        assert_eq!(status, 200, "DELETE {path}: {answer}");
        answer
    }

    /// Waits until `check` holds for the pod, looking again at each change the watch reports.
    async fn wait_pod(&self, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        let path = format!("/api/v1/namespaces/default/pods/{name}");
        eventually(&self.inner.client, WAIT, &format!("pod {name} to reach {what}"), || async {
            let pod = self.json(&path).await;
            check(&pod).then_some(pod)
        })
        .await
    }

    async fn stop(self) {
        self.inner.stop().await;
    }
}

fn pod(name: &str, command: &str) -> Value {
    json!({
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {
            "containers": [{
                "name": "main",
                "image": "minimal",
                "command": ["/bin/sh", "-c", command],
                "resources": {"memory": 33554432, "cpu": 100}
            }],
            "restart_policy": "Always",
            "termination_grace_period_seconds": 1
        }
    })
}

/// The lines a child writes on `pipe`, as they come; each is echoed to the test's output.
fn log_lines(pipe: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(pipe)).map_while(Result::ok) {
            eprintln!("{line}");
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn config(server: &Server, node: &str) -> AgentConfig {
    let mut config = AgentConfig::new(&server.base);
    config.node_name = node.to_string();
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.resync_interval = Duration::from_secs(2);
    config.backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(4));
    config.pod_network = common::pod_network(node);
    config
}

/// `agent::run_node` for `node` against `server`, in this process, until [`InProcessAgent::stop`].
struct InProcessAgent {
    task: tokio::task::JoinHandle<agent::Result<()>>,
    shutdown: CancellationToken,
}

impl InProcessAgent {
    async fn start(server: &Server, node: &str, runtime: Arc<dyn ContainerRuntime>) -> InProcessAgent {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let shutdown = CancellationToken::new();
        let api = Arc::new(shepherd_testing::client(&server.base, None));
        let task = tokio::spawn(agent::run_node(config(server, node), runtime, api, listener, shutdown.clone()));
        InProcessAgent { task, shutdown }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_runs_through_the_server_and_its_logs_come_back() {
    let docker = docker().await;
    minimal_image(&docker).await;
    let node = unique("node");
    let _cleanup = Cleanup(node.clone());
    let server = Server::start().await;
    let agent = InProcessAgent::start(&server, &node, docker.clone()).await;

    let path = format!("/api/v1/nodes/{node}");
    let registered = eventually(&server.inner.client, WAIT, &format!("node {node} registered"), || async {
        let (status, node) = server.inner.get(&path).await;
        (status == 200).then_some(node)
    })
    .await;
    assert_eq!(registered["status"]["node_info"]["runtime"], "docker");
    assert!(registered["status"]["agent_endpoint"].as_str().unwrap().starts_with("http://127.0.0.1:"));

    server.post("/api/v1/pods", pod("hello", "echo 'Hello from Sheep!'; sleep 3600")).await;
    let running = server.wait_pod("hello", "Running", |p| p["status"]["phase"] == "Running").await;
    assert_eq!(running["spec"]["node_name"], node.as_str());
    assert!(!running["status"]["pod_ip"].as_str().unwrap().is_empty());
    assert_eq!(running["status"]["container_statuses"][0]["ready"], true);
    let ready = running["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").cloned().unwrap();
    assert_eq!(ready["status"], "True");

    let logs = poll(WAIT, "the pod's log through the server's proxy", || async {
        let (status, text) = server.get("/api/v1/namespaces/default/pods/hello/log").await;
        if status == 200 && text.contains("Hello") { Ok((status, text)) } else { Err(format!("{status} {text}")) }
    })
    .await;
    assert_eq!(logs, (200, "Hello from Sheep!\n".to_string()), "logs through the server's proxy");

    let events = server.json("/api/v1/namespaces/default/events?field_selector=involved_object.name=hello").await;
    let reasons: Vec<&str> = events["items"].as_array().unwrap().iter().filter_map(|e| e["reason"].as_str()).collect();
    for wanted in ["Scheduled", "Pulled", "Created", "Started"] {
        assert!(reasons.contains(&wanted), "event {wanted} missing from {reasons:?}");
    }

    let uid = running["metadata"]["uid"].as_str().unwrap().to_string();
    server.delete("/api/v1/namespaces/default/pods/hello").await;
    poll(WAIT, "the deleted pod's container to go", || async {
        docker.list(&[(LABEL_POD_UID, uid.as_str())]).await.unwrap().is_empty().then_some(())
    })
    .await;
    agent.stop().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_leaves_pods_running_on_sigterm_and_keeps_them_while_the_server_is_away() {
    let docker = docker().await;
    minimal_image(&docker).await;
    let node = unique("node");
    let _cleanup = Cleanup(node.clone());
    let server = Server::start().await;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_shepherd-agent"))
        .args(["--server", &server.base, "--node-name", &node, "--listen", "127.0.0.1:0", "--runtime", "docker", "--pod-network", "cni"])
        .arg("--state-dir")
        .arg(common::state_dir(&node))
        .env("RUST_LOG", "warn")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("cannot start shepherd-agent");
    let warnings = log_lines(child.stderr.take().unwrap());

    server.post("/api/v1/pods", pod("lasting", "sleep 3600")).await;
    let running = server.wait_pod("lasting", "Running", |p| p["status"]["phase"] == "Running").await;
    let uid = running["metadata"]["uid"].as_str().unwrap().to_string();

    // The server goes away: once the agent has seen its watch break and a renewal fail, it
    // still keeps the container.
    server.stop().await;
    let mut seen = Vec::new();
    poll(WAIT, "the agent to log a broken watch and a failed renewal", || {
        seen.extend(warnings.try_iter());
        let logged = |message: &str| seen.iter().any(|line: &String| line.contains(message));
        let both = logged("watch attempt failed") && logged("lease renewal failed");
        async move { both.then_some(()) }
    })
    .await;
    let containers = docker.list(&[(LABEL_POD_UID, uid.as_str()), (LABEL_NODE, node.as_str())]).await.unwrap();
    assert_eq!(containers.len(), 1);
    assert_eq!(containers[0].state, RunState::Running, "losing the server must not stop containers");

    let killed = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let status = exited(&mut child, Duration::from_secs(10)).await;
    assert!(status.success(), "shepherd-agent exited with {status}");
    let containers = docker.list(&[(LABEL_POD_UID, uid.as_str())]).await.unwrap();
    assert_eq!(containers.len(), 1);
    assert_eq!(containers[0].state, RunState::Running, "SIGTERM must leave pods running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_created_before_any_node_runs_once_the_agent_registers() {
    let docker = docker().await;
    minimal_image(&docker).await;
    let node = unique("node");
    let _cleanup = Cleanup(node.clone());
    let server = Server::start().await;
    server.post("/api/v1/pods", pod("early", "sleep 3600")).await;
    let agent = InProcessAgent::start(&server, &node, docker.clone()).await;
    let running = server.wait_pod("early", "Running", |p| p["status"]["phase"] == "Running").await;
    assert_eq!(running["spec"]["node_name"], node.as_str());
    agent.stop().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_pod_is_terminating_until_its_containers_are_gone_and_the_agent_confirms() {
    let docker = docker().await;
    minimal_image(&docker).await;
    let node = unique("node");
    let _cleanup = Cleanup(node.clone());
    let server = Server::start().await;
    let agent = InProcessAgent::start(&server, &node, docker.clone()).await;

    let mut manifest = pod("graceful", "sleep 3600");
    // The shell ignores SIGTERM as PID 1: the container lives out its whole 2 s grace.
    manifest["spec"]["termination_grace_period_seconds"] = json!(2);
    server.post("/api/v1/pods", manifest).await;
    let running = server.wait_pod("graceful", "Running", |p| p["status"]["phase"] == "Running").await;
    let uid = running["metadata"]["uid"].as_str().unwrap().to_string();

    let answer = server.delete("/api/v1/namespaces/default/pods/graceful").await;
    assert!(answer["metadata"]["deletion_timestamp"].is_string(), "a running pod is not removed at once: {answer:#}");
    assert_eq!(answer["metadata"]["deletion_grace_period_seconds"], 2);
    let (status, _) = server.get("/api/v1/namespaces/default/pods/graceful").await;
    assert_eq!(status, 200, "the pod stays while its container stops");

    let began = Instant::now();
    eventually(&server.inner.client, WAIT, "the terminating pod removed", || async {
        (server.get("/api/v1/namespaces/default/pods/graceful").await.0 == 404).then_some(())
    })
    .await;
    // Removed by the agent's confirmation, not the server's safety net (30 s past the grace).
    assert!(began.elapsed() < Duration::from_secs(15), "the pod went only after {:?}", began.elapsed());
    assert!(docker.list(&[(LABEL_POD_UID, uid.as_str())]).await.unwrap().is_empty(), "the pod went before its container");
    let events = server.json("/api/v1/namespaces/default/events?field_selector=involved_object.name=graceful").await;
    let killing = events["items"].as_array().unwrap().iter().find(|e| e["reason"] == "Killing").cloned();
    assert!(killing.is_some_and(|e| e["message"].as_str().unwrap().contains("grace period 2s")), "{events:#}");
    agent.stop().await;
    server.stop().await;
}
