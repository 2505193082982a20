//! A real Shepherd server for the CLI tests: `shepherd-testing`'s server on 127.0.0.1:0 on
//! a thread of its own, with its own SQLite directory, driven by the real `sheepctl` binary,
//! and by the client for what an agent would do (register a node, heartbeat, report a pod
//! Running).

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};
pub use shepherd_testing::Method;
use shepherd_testing::ServerThread;

pub const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");

pub fn example(name: &str) -> PathBuf {
    PathBuf::from(EXAMPLES).join(name)
}

pub struct TestServer {
    pub url: String,
    server: ServerThread,
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
        let server = ServerThread::start(config);
        TestServer { url: server.url.clone(), server, _data: data }
    }

    /// A server that serves HTTPS with a made certificate authority and checks `tokens`
    /// (lines of a tokens file).
    pub fn https_with_tokens(tokens: &str) -> TestServer {
        Self::start_with(|config| {
            let hosts = server::tls::default_hosts("127.0.0.1:0".parse().expect("an address"));
            config.tls = Some(server::tls::Identity::generate(&hosts).expect("a certificate"));
            config.tokens = server::auth::Tokens::parse(tokens, "test tokens").expect("valid tokens");
        })
    }

    /// The certificate authority of an https server, as PEM.
    pub fn trust(&self) -> Option<&str> {
        self.server.trust.as_deref()
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

    pub fn request(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        self.server.block_on(request(&self.server.client, method, path, body))
    }

    pub fn get(&self, path: &str) -> Value {
        let (status, body) = self.request(Method::GET, path, None);
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// Registers node `name` (4 CPU, 8Gi, 110 pods) exactly as an agent does.
    pub fn register_node(&self, name: &str) {
        self.server.block_on(shepherd_testing::register_node(&self.server.client, &shepherd_testing::node(name)));
    }

    pub fn renew_lease(&self, name: &str) {
        self.server.block_on(shepherd_testing::renew_lease(&self.server.client, &shepherd_testing::node(name)));
    }

    pub fn heartbeat(&self, name: &str) {
        self.server.block_on(shepherd_testing::heartbeat(&self.server.client, &shepherd_testing::node(name)));
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
        let (status, body) = self.request(Method::PUT, &format!("/api/v1/namespaces/{namespace}/pods/{name}/status"), Some(pod));
        assert_eq!(status, 200, "report {name} Running: {body}");
    }

    /// Waits until `check` holds for the object at `path`, looking again at each change the
    /// watch reports, for at most 10 s.
    pub fn eventually(&self, path: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        let client = &self.server.client;
        self.server.block_on(shepherd_testing::eventually(client, Duration::from_secs(10), &format!("{path} to become {what}"), || async {
            let (status, body) = request(client, Method::GET, path, None).await;
            (status == 200 && check(&body)).then_some(body)
        }))
    }

    /// How many GETs of `route` (a route template, as `/metrics` names it) the server has
    /// answered 200. A watch counts once it is open: its answer starts with the stream.
    pub fn answered_gets(&self, route: &str) -> u64 {
        let (status, metrics) = self.request(Method::GET, "/metrics", None);
        assert_eq!(status, 200, "GET /metrics: {metrics}");
        let labels = [r#"method="GET""#.to_string(), format!(r#"route="{route}""#), r#"code="200""#.to_string()];
        metrics
            .as_str()
            .expect("the metrics as text")
            .lines()
            .filter(|line| line.starts_with("shepherd_http_request_duration_seconds_count{"))
            .filter(|line| labels.iter().all(|label| line.contains(label.as_str())))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    /// Waits until the server has answered `count` GETs of `route` in all, for `what`.
    pub fn wait_answered_gets(&self, route: &str, count: u64, what: &str) {
        shepherd_testing::poll_blocking(Duration::from_secs(10), what, || {
            let answered = self.answered_gets(route);
            (answered >= count).then_some(()).ok_or(format!("{answered} GETs of {route}"))
        })
    }

    pub fn pod_bound(&self, namespace: &str, name: &str) -> Value {
        self.eventually(&format!("/api/v1/namespaces/{namespace}/pods/{name}"), "bound", |pod| {
            pod["spec"]["node_name"].as_str().is_some_and(|n| !n.is_empty())
        })
    }
}

async fn request(client: &shepherd_client::Client, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = client.request(method, path);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// A running `sheepctl` whose output lines arrive on a channel.
pub struct Background {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    readers: Vec<JoinHandle<()>>,
}

impl Background {
    /// Runs `command` (another tool than sheepctl, e.g. `kubectl get pods -w`) with piped output.
    pub fn spawn_command(mut command: std::process::Command) -> Background {
        let child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn the command");
        Background::new(child)
    }

    fn new(mut child: Child) -> Background {
        let (lines, stdout_reader) = read_lines(child.stdout.take().expect("stdout"));
        let (stderr, stderr_reader) = read_lines(child.stderr.take().expect("stderr"));
        Background { child, lines, stderr, readers: vec![stdout_reader, stderr_reader] }
    }

    /// Reads lines until one contains `needle`; panics after `within`.
    pub fn expect_line(&self, needle: &str, within: Duration) -> String {
        expect_on(&self.lines, needle, within)
    }

    /// Waits for the process to exit; returns its status code, stdout and stderr.
    pub fn finish(mut self, within: Duration) -> (i32, String, String) {
        // Killed by `drop` when it does not exit in time.
        let status = shepherd_testing::poll_blocking(within, "the command to exit", || self.child.try_wait().expect("try_wait"));
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        let out: Vec<String> = self.lines.try_iter().collect();
        let err: Vec<String> = self.stderr.try_iter().collect();
        (status.code().unwrap_or(-1), out.join("\n"), err.join("\n"))
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

/// Reads `lines` until one contains `needle`; panics after `within`.
fn expect_on(lines: &mpsc::Receiver<String>, needle: &str, within: Duration) -> String {
    let deadline = std::time::Instant::now() + within;
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        match lines.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return line,
            Ok(line) => seen.push(line),
            Err(_) => break,
        }
    }
    panic!("no line with {needle:?} within {within:?}; saw {seen:#?}");
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

/// The real kubectl (on PATH) with a kubeconfig of its own.
pub struct Kubectl {
    pub kubeconfig: PathBuf,
}

impl Kubectl {
    /// kubectl on the kubeconfig that `sheepctl kubeconfig --save` writes for `server` in `dir`.
    pub fn saved_by(server: &TestServer, dir: &Path) -> Kubectl {
        let kubeconfig = dir.join("kubeconfig");
        server.sheepctl().args(["kubeconfig", "--save", kubeconfig.to_str().unwrap()]).assert().success();
        Kubectl { kubeconfig }
    }

    pub fn command(&self, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new("kubectl");
        command.args(args).env("KUBECONFIG", &self.kubeconfig);
        command
    }

    pub fn output(&self, args: &[&str]) -> std::process::Output {
        self.command(args).output().unwrap_or_else(|e| panic!("kubectl is not on PATH ({e}): the set-up installs it"))
    }

    /// kubectl `args`, which must succeed; its standard output.
    pub fn run(&self, args: &[&str]) -> String {
        let out = self.output(args);
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "kubectl {} failed\nstdout:\n{stdout}\nstderr:\n{stderr}", args.join(" "));
        stdout
    }
}

/// An address where nothing listens: a port bound and released at once.
pub fn dead_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    drop(listener);
    format!("127.0.0.1:{}", address.port())
}

/// A node agent on the simulated runtime, on a thread of its own, until `shutdown`.
pub fn start_simulated_node(url: &str, name: &str, start_delay: Duration, shutdown: tokio_util::sync::CancellationToken) -> JoinHandle<()> {
    let mut config = agent::AgentConfig::new(url);
    config.node_name = name.into();
    config.runtime = agent::RuntimeChoice::Simulated { start_delay };
    config.listen = "127.0.0.1:0".parse().unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(agent::run(config, shutdown)).expect("the node agent runs");
    })
}

/// Runs a Docker node agent named `name` on a thread of its own until `shutdown`, after
/// `adjust` changed its configuration and after making sure the local `minimal` image
/// exists (nothing can be pulled here).
pub fn start_docker_node(
    url: &str,
    name: &str,
    adjust: impl FnOnce(&mut agent::AgentConfig),
    shutdown: tokio_util::sync::CancellationToken,
) -> JoinHandle<()> {
    let mut config = agent::AgentConfig::new(url);
    config.node_name = name.into();
    config.runtime = agent::RuntimeChoice::Docker;
    config.listen = "127.0.0.1:0".parse().unwrap();
    adjust(&mut config);
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
        runtime.block_on(async {
            let docker = agent::runtime::DockerRuntime::connect().await.expect("Docker answers (start dockerd)");
            agent::image::bootstrap(docker.client(), "minimal", std::path::Path::new(agent::image::DEFAULT_BUSYBOX), false)
                .await
                .expect("the minimal image (apt-get install busybox-static)");
            agent::run(config, shutdown).await.expect("the node agent runs");
        });
    })
}

/// What a user of a secured cluster has: an HTTPS server with `tokens`, a Docker node that
/// joined it with its node token, and kubectl configured by `sheepctl kubeconfig` with an
/// admin token. The node stops when this is dropped, even when the test fails.
pub struct SecureDockerCluster {
    pub server: TestServer,
    pub dir: tempfile::TempDir,
    /// The server's certificate authority, as a file for `SHEPHERD_CA`.
    pub ca: PathBuf,
    pub kubectl: Kubectl,
    shutdown: tokio_util::sync::CancellationToken,
    node: Option<JoinHandle<()>>,
}

impl SecureDockerCluster {
    pub fn start(tokens: &str, node: &str, node_token: &str, admin_token: &str) -> SecureDockerCluster {
        let server = TestServer::https_with_tokens(tokens);
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.crt");
        let authority = server.trust().expect("an https server").to_string();
        std::fs::write(&ca, &authority).unwrap();
        let shutdown = tokio_util::sync::CancellationToken::new();
        let node_token = node_token.to_string();
        let agent = start_docker_node(
            &server.url,
            node,
            |config| {
                config.token = Some(node_token);
                config.certificate_authority = Some(authority);
            },
            shutdown.clone(),
        );
        let kubeconfig = dir.path().join("kubeconfig");
        server
            .sheepctl()
            .env("SHEPHERD_CA", &ca)
            .env("SHEPHERD_TOKEN", admin_token)
            .args(["kubeconfig", "--save", kubeconfig.to_str().unwrap()])
            .assert()
            .success();
        SecureDockerCluster { server, dir, ca, kubectl: Kubectl { kubeconfig }, shutdown, node: Some(agent) }
    }
}

impl Drop for SecureDockerCluster {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(node) = self.node.take() {
            let _ = node.join();
        }
    }
}

/// Removes every container of node `.0` (its sandboxes and warm pool too), even when the
/// test fails.
pub struct RemoveNodeContainers(pub &'static str);

impl Drop for RemoveNodeContainers {
    fn drop(&mut self) {
        let filter = format!("label={}={}", agent::runtime::LABEL_NODE, self.0);
        if let Ok(out) = std::process::Command::new("docker").args(["ps", "-aq", "--filter", &filter]).output() {
            let ids: Vec<String> = String::from_utf8_lossy(&out.stdout).split_whitespace().map(String::from).collect();
            if !ids.is_empty() {
                let _ = std::process::Command::new("docker").arg("rm").arg("-f").args(&ids).output();
            }
        }
    }
}
