//! A real Shepherd server for the CLI tests: started in-process on 127.0.0.1:0 with its
//! own SQLite directory, driven by the real `sheepctl` binary, and by plain HTTP calls for
//! what an agent would do (register a node, heartbeat, report a pod Running).

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");

pub fn example(name: &str) -> PathBuf {
    PathBuf::from(EXAMPLES).join(name)
}

pub struct TestServer {
    pub url: String,
    shutdown: CancellationToken,
    thread: Option<JoinHandle<()>>,
    runtime: tokio::runtime::Runtime,
    http: reqwest::Client,
    _data: tempfile::TempDir,
}

impl TestServer {
    pub fn start() -> TestServer {
        Self::start_with(|_| {})
    }

    /// Starts a server after `adjust` has changed its configuration.
    pub fn start_with(adjust: impl FnOnce(&mut server::Config)) -> TestServer {
        let data = tempfile::tempdir().expect("temp dir");
        let mut config = server::Config::durable(data.path());
        config.bookmark_interval = Duration::from_millis(500);
        config.scheduler_sweep = Duration::from_millis(200);
        adjust(&mut config);
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
                tx.send(listener.local_addr().expect("address")).expect("send address");
                server::run(listener, config, token).await.expect("server runs");
            });
        });
        let address = rx.recv_timeout(Duration::from_secs(30)).expect("the server started");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        TestServer { url: format!("http://{address}"), shutdown, thread: Some(thread), runtime, http: reqwest::Client::new(), _data: data }
    }

    /// `sheepctl` pointed at this server, with no token and no stray environment.
    pub fn sheepctl(&self) -> assert_cmd::Command {
        let mut command = assert_cmd::Command::new(env!("CARGO_BIN_EXE_sheepctl"));
        command.env("SHEPHERD_API", &self.url).env_remove("SHEPHERD_TOKEN").timeout(Duration::from_secs(60));
        command
    }

    /// `sheepctl` as a background process with piped output, for `-w` and `wait`.
    pub fn spawn(&self, args: &[&str]) -> Background {
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_sheepctl"))
            .args(args)
            .env("SHEPHERD_API", &self.url)
            .env_remove("SHEPHERD_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn sheepctl");
        Background::new(child)
    }

    pub fn request(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        self.runtime.block_on(async {
            let mut request = self.http.request(method, format!("{}{path}", self.url)).header(shared::api::CLIENT_HEADER, "tests");
            if let Some(body) = body {
                request = request.json(&body);
            }
            let response = request.send().await.expect("request");
            let status = response.status().as_u16();
            let text = response.text().await.expect("body");
            (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
        })
    }

    pub fn get(&self, path: &str) -> Value {
        let (status, body) = self.request(reqwest::Method::GET, path, None);
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// Registers a Ready node with room for a few pods, as an agent would, and sends one
    /// heartbeat so the scheduler counts it.
    pub fn register_node(&self, name: &str) {
        let node = json!({
            "kind": "Node",
            "metadata": {"name": name},
            "status": {
                "capacity": {"cpu": 4000, "memory": 8589934592u64, "pods": 110},
                "allocatable": {"cpu": 4000, "memory": 8589934592u64, "pods": 110},
                "conditions": [{"type": "Ready", "status": "True", "reason": "AgentReady"}],
                "address": "127.0.0.1",
                "node_info": {"runtime": "simulated", "simulated": true}
            }
        });
        let (status, body) = self.request(reqwest::Method::POST, "/api/v1/nodes", Some(node));
        assert!(status == 200 || status == 201, "register node {name}: {status} {body}");
        self.heartbeat(name);
    }

    pub fn heartbeat(&self, name: &str) {
        let beat = json!({"conditions": [{"type": "Ready", "status": "True", "reason": "AgentReady"}]});
        let (status, body) = self.request(reqwest::Method::POST, &format!("/api/v1/nodes/{name}/heartbeat"), Some(beat));
        assert_eq!(status, 200, "heartbeat {name}: {body}");
    }

    /// Reports the pod Running with one ready container, as the node's agent would.
    pub fn report_running(&self, namespace: &str, name: &str) {
        let mut pod = self.get(&format!("/api/v1/namespaces/{namespace}/pods/{name}"));
        pod["status"]["phase"] = json!("Running");
        pod["status"]["pod_ip"] = json!("10.20.0.2");
        pod["status"]["container_statuses"] = json!([{
            "name": pod["spec"]["containers"][0]["name"],
            "state": {"running": {}},
            "ready": true,
            "restart_count": 0
        }]);
        pod["metadata"]["resource_version"] = json!(0);
        let (status, body) = self.request(reqwest::Method::PUT, &format!("/api/v1/namespaces/{namespace}/pods/{name}/status"), Some(pod));
        assert_eq!(status, 200, "report {name} Running: {body}");
    }

    /// Polls until `check` holds for the object at `path`, for at most 10 s.
    pub fn eventually(&self, path: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..100 {
            let (status, body) = self.request(reqwest::Method::GET, path, None);
            if status == 200 && check(&body) {
                return body;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("{path} never became {what}");
    }

    pub fn pod_bound(&self, namespace: &str, name: &str) -> Value {
        self.eventually(&format!("/api/v1/namespaces/{namespace}/pods/{name}"), "bound", |pod| {
            pod["spec"]["node_name"].as_str().is_some_and(|n| !n.is_empty())
        })
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A running `sheepctl` whose output lines arrive on a channel.
pub struct Background {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    readers: Vec<JoinHandle<()>>,
}

impl Background {
    fn new(mut child: Child) -> Background {
        let (lines, stdout_reader) = read_lines(child.stdout.take().expect("stdout"));
        let (stderr, stderr_reader) = read_lines(child.stderr.take().expect("stderr"));
        Background { child, lines, stderr, readers: vec![stdout_reader, stderr_reader] }
    }

    /// Reads lines until one contains `needle`; panics after `within`.
    pub fn expect_line(&self, needle: &str, within: Duration) -> String {
        let deadline = std::time::Instant::now() + within;
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(line) => seen.push(line),
                Err(_) => break,
            }
        }
        panic!("no line with {needle:?} within {within:?}; saw {seen:#?}");
    }

    /// Waits for the process to exit; returns its status code, stdout and stderr.
    pub fn finish(mut self, within: Duration) -> (i32, String, String) {
        let deadline = std::time::Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                for reader in self.readers.drain(..) {
                    let _ = reader.join();
                }
                let out: Vec<String> = self.lines.try_iter().collect();
                let err: Vec<String> = self.stderr.try_iter().collect();
                return (status.code().unwrap_or(-1), out.join("\n"), err.join("\n"));
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("sheepctl did not exit within {within:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends each line of `pipe` on a channel until the pipe closes.
fn read_lines(pipe: impl std::io::Read + Send + 'static) -> (mpsc::Receiver<String>, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (rx, reader)
}

/// An address where nothing listens: a port bound and released at once.
pub fn dead_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    drop(listener);
    format!("127.0.0.1:{}", address.port())
}
