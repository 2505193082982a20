//! What the tests of every Shepherd crate share, so that each exists once: a real server on
//! 127.0.0.1:0 (async, or on a thread of its own for tests that block) whose every JSON
//! answer is checked against its OpenAPI document, nodes registered exactly as the agent
//! registers them (`NodeDescription::to_node` and the client's register call), and waits
//! that re-check a condition on each change the watch reports (or, for what no watch shows,
//! on a short tick) until a deadline, never after a fixed sleep.
//!
//! Layout: this file has the servers, the OpenAPI check of their answers and the node
//! fixtures; `wait` has the one deadline-and-look-again rule every test waits by; `etcd`
//! starts real etcd members for the etcd store's tests; `process` a real `shepherd` to
//! kill, stop or freeze; `registry` has a real image registry on a free loopback port.

mod etcd;
mod process;
mod registry;
mod wait;

pub use etcd::Etcd;
pub use process::ShepherdProcess;
pub use registry::{TestRegistry, registry_available};
pub use wait::{Look, POLL_INTERVAL, eventually, exited, poll, poll_blocking};

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, LazyLock, Mutex, mpsc};
use std::time::Duration;

use chrono::Utc;
pub use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use server::Config;
use shared::model::{Lease, Node, NodeInfo, NodeResources};
use shared::readiness::NodeJudge;
use shared::registration::NodeDescription;
use shepherd_client::{Client, Selection};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long a test waits for the server to come up.
const START_LIMIT: Duration = Duration::from_secs(30);

/// The etcd member the tests of an in-memory server run on instead, when set
/// (`scripts/test.sh` runs the server's suite a second time so): the whole suite then
/// checks the etcd store as it checks the embedded one.
pub const ETCD_ENV: &str = "SHEPHERD_TEST_ETCD";

/// What `/api/v1/info` names the store of a test's in-memory server: `etcd` when the suite
/// runs on etcd ([`ETCD_ENV`]).
pub fn store_under_test() -> &'static str {
    if std::env::var_os(ETCD_ENV).is_some() { "etcd" } else { "memory" }
}

/// `config` on the store under test: a server the test keeps in memory runs on the etcd of
/// [`ETCD_ENV`] when it is set, under a prefix of its own, so that tests share one member.
pub fn on_store_under_test(config: Config) -> Config {
    match std::env::var(ETCD_ENV) {
        Ok(endpoints) if config.data_dir.is_none() && config.etcd.is_none() => {
            static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let prefix = format!("/shepherd-test/{}-{n}-{}", std::process::id(), Utc::now().timestamp_nanos_opt().unwrap_or_default());
            let etcd = server::store::EtcdSettings {
                endpoints: endpoints.split(',').map(str::to_string).collect(),
                prefix,
                compaction_interval: Duration::ZERO,
            };
            Config { etcd: Some(etcd), ..config }
        }
        _ => config,
    }
}

/// A real server on 127.0.0.1:0 in this test's runtime.
pub struct TestServer {
    pub url: String,
    pub client: Client,
    /// The certificate authority of an https server (PEM).
    pub trust: Option<String>,
    pub shutdown: CancellationToken,
    task: Option<JoinHandle<Result<(), server::ServerError>>>,
}

impl TestServer {
    /// Starts a server with `config` and returns once it answers `/readyz`.
    pub async fn start(config: Config) -> TestServer {
        TestServer::launch(on_store_under_test(config), server::run).await
    }

    /// Starts a server with `config` on `store`, which other servers share ([`server::run_on`]).
    pub async fn start_on(store: Arc<dyn server::store::Store>, config: Config) -> TestServer {
        TestServer::launch(config, move |listener, config, shutdown| server::run_on(listener, store, config, shutdown)).await
    }

    async fn launch<F, Fut>(config: Config, run: F) -> TestServer
    where
        F: FnOnce(tokio::net::TcpListener, Config, CancellationToken) -> Fut,
        Fut: Future<Output = Result<(), server::ServerError>> + Send + 'static,
    {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port for the server");
        let url = url(listener.local_addr().expect("the server's address"), config.tls.is_some());
        let trust = config.tls.as_ref().map(|tls| tls.trust.clone());
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run(listener, config, shutdown.clone()));
        let server = TestServer { client: trusting(client(&url, None), &trust), url, trust, shutdown, task: Some(task) };
        ready(&server.client).await;
        server
    }

    /// A fast in-memory server: the scheduler sweeps every 500 ms.
    pub async fn in_memory() -> TestServer {
        TestServer::start(Config { scheduler_sweep: Duration::from_millis(500), ..Config::in_memory() }).await
    }

    /// A server this test did not start (a `shepherd` process), by its URL.
    pub fn attach(url: &str) -> TestServer {
        TestServer { url: url.to_string(), client: client(url, None), trust: None, shutdown: CancellationToken::new(), task: None }
    }

    /// The same server, as a client with `token` sees it.
    pub fn with_token(&self, token: &str) -> TestServer {
        let client = trusting(client(&self.url, Some(token)), &self.trust);
        TestServer { url: self.url.clone(), client, trust: self.trust.clone(), shutdown: self.shutdown.clone(), task: None }
    }

    /// Sends `body` as JSON; returns the status and the answer (a string when not JSON).
    pub async fn request(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut request = self.client.request(method, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        answer(request).await
    }

    /// Sends `body` as it is, labelled JSON: for bodies no client would send.
    pub async fn raw(&self, method: Method, path: &str, body: impl Into<reqwest::Body>) -> (StatusCode, Value) {
        answer(self.client.request(method, path).header("content-type", "application/json").body(body)).await
    }

    /// A request with none of the client's headers, as a web page or a stranger sends it.
    pub fn bare(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut http = reqwest::Client::builder();
        if let Some(pem) = &self.trust {
            let authority = reqwest::Certificate::from_pem_bundle(pem.as_bytes()).expect("the test server's certificate authority");
            http = http.tls_certs_only(authority);
        }
        http.build().expect("an HTTP client").request(method, format!("{}{path}", self.url))
    }

    /// Sends a request and reads its answer, checked as [`TestServer::request`]'s are.
    pub async fn answer(&self, request: reqwest::RequestBuilder) -> (StatusCode, Value) {
        answer(request).await
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.request(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.request(Method::POST, path, Some(body)).await
    }

    pub async fn put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.request(Method::PUT, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.request(Method::DELETE, path, None).await
    }

    /// Stops the server and waits for it to finish cleanly.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.await.expect("the server task panicked").expect("the server failed");
        }
    }
}

/// A real server on 127.0.0.1:0 on a thread of its own, for tests that block (those that
/// drive the `sheepctl` binary); [`ServerThread::block_on`] runs a client call from them.
pub struct ServerThread {
    pub url: String,
    pub client: Client,
    /// The certificate authority of an https server (PEM).
    pub trust: Option<String>,
    shutdown: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
    runtime: tokio::runtime::Runtime,
}

impl ServerThread {
    pub fn start(config: Config) -> ServerThread {
        let config = on_store_under_test(config);
        let trust = config.tls.as_ref().map(|tls| tls.trust.clone());
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port for the server");
                tx.send(listener.local_addr().expect("the server's address")).expect("the test waits for the address");
                server::run(listener, config, token).await.expect("the server runs");
            });
        });
        let address = rx.recv_timeout(START_LIMIT).expect("the server started");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        let url = url(address, trust.is_some());
        let server = ServerThread { client: trusting(client(&url, None), &trust), url, trust, shutdown, thread: Some(thread), runtime };
        server.block_on(ready(&server.client));
        server
    }

    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The URL of a server listening on `address`: https when it serves TLS.
fn url(address: std::net::SocketAddr, tls: bool) -> String {
    let scheme = if tls { "https" } else { "http" };
    format!("{scheme}://{address}")
}

/// `client`, trusting the certificate authority `trust` when there is one.
fn trusting(client: Client, trust: &Option<String>) -> Client {
    match trust {
        Some(pem) => client.with_certificate_authority(pem.as_bytes()).expect("the test server's certificate authority"),
        None => client,
    }
}

/// A client of the server at `url`.
pub fn client(url: &str, token: Option<&str>) -> Client {
    Client::new(url, token.map(str::to_string)).expect("a client").named("tests")
}

/// Waits until the server answers `/readyz`.
async fn ready(client: &Client) {
    poll(START_LIMIT, &format!("the server at {} to become ready", client.base()), || async {
        client.ready().await.map_err(|e| e.to_string())
    })
    .await
}

/// Sends a request and reads its answer; a JSON answer must match its schema in the
/// server's OpenAPI document.
async fn answer(request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let (client, request) = request.build_split();
    let request = request.expect("a well-formed request");
    let (method, path) = (request.method().clone(), request.url().path().to_string());
    let response = client.execute(request).await.expect("the server answers");
    let status = response.status();
    let json = response.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let text = response.text().await.expect("the answer's body");
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if json {
        assert_conforms(&method, &path, status, &value);
    }
    (status, value)
}

/// The OpenAPI document the server serves, built once per test binary.
static DOCUMENT: LazyLock<Value> = LazyLock::new(server::api::openapi::document);

/// A compiled validator for one answer's schema, with the document's components beside it
/// so that its `$ref`s resolve; compiled once per schema, since a test sends thousands.
fn validator_for(schema: &Value) -> Arc<jsonschema::Validator> {
    static VALIDATORS: LazyLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> = LazyLock::new(Default::default);
    let mut validators = VALIDATORS.lock().unwrap();
    let entry = validators.entry(schema.to_string()).or_insert_with(|| {
        let root =
            json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "allOf": [schema], "components": DOCUMENT["components"]});
        Arc::new(jsonschema::options().should_validate_formats(true).build(&root).expect("the document's schemas compile"))
    });
    entry.clone()
}

/// Whether a route template such as `/api/v1/nodes/{name}/status` matches `path`.
fn template_matches(template: &str, path: &str) -> bool {
    let (template, path): (Vec<&str>, Vec<&str>) = (template.split('/').collect(), path.split('/').collect());
    template.len() == path.len() && template.iter().zip(&path).all(|(t, p)| t == p || (t.starts_with('{') && !p.is_empty()))
}

/// Panics unless `body`, the JSON answer of `method path` with `status`, matches the schema
/// the OpenAPI document gives that answer; an error outside the document's routes (an
/// unknown route, a wrong method) must still have the one error shape.
pub fn assert_conforms(method: &Method, path: &str, status: StatusCode, body: &Value) {
    let document = &*DOCUMENT;
    let operation = document["paths"]
        .as_object()
        .unwrap()
        .iter()
        .find(|(template, _)| template_matches(template, path))
        .and_then(|(_, item)| item.get(method.as_str().to_ascii_lowercase()));
    let schema = match operation {
        Some(operation) => {
            let answer = operation["responses"]
                .get(status.as_str())
                .unwrap_or_else(|| panic!("{method} {path} answered {status}, which the OpenAPI document does not list"));
            answer["content"]["application/json"]["schema"].clone()
        }
        None if status.is_client_error() || status.is_server_error() => json!({"$ref": "#/components/schemas/ApiErrorBody"}),
        None => panic!("{method} {path} answered {status} with JSON, but the OpenAPI document has no such operation"),
    };
    assert!(!schema.is_null(), "{method} {path} answered {status} with JSON, which the OpenAPI document does not say");
    let validator = validator_for(&schema);
    let errors: Vec<String> = validator.iter_errors(body).map(|e| format!("{}: {e}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{method} {path} answered {status} with a body its schema refuses: {errors:#?}\n{body}");
}

/// The test node: 4 CPU, 8Gi and 110 pods on 127.0.0.1, simulated.
pub fn node(name: &str) -> NodeDescription {
    let mut node = NodeDescription::new(name, NodeResources { cpu: 4000, memory: 8 << 30, pods: 110 });
    node.address = "127.0.0.1".to_string();
    node.info = NodeInfo { runtime: "simulated".to_string(), simulated: true, ..NodeInfo::default() };
    node
}

/// Registers `node` as its agent does; the server stamps its first heartbeat and renews its
/// lease, so it is Ready from now on for the node monitor grace.
pub async fn register_node(client: &Client, node: &NodeDescription) -> Node {
    client.register_node(&node.to_node(Utc::now())).await.unwrap_or_else(|e| panic!("cannot register node {}: {e}", node.name))
}

/// The body the agent registers `node` with, for a test that sends it by hand (with
/// another token, or to see the answer): `POST /api/v1/nodes`.
pub fn registration(node: &NodeDescription) -> Value {
    serde_json::to_value(node.to_node(Utc::now())).expect("a node serialises")
}

/// The body of `node`'s status heartbeat as the agent sends it: `POST /api/v1/nodes/{name}/heartbeat`.
pub fn heartbeat_body(node: &NodeDescription) -> Value {
    serde_json::to_value(node.heartbeat(Utc::now())).expect("a heartbeat serialises")
}

/// Renews `node`'s lease as its agent does every `lease_renew_interval`.
pub async fn renew_lease(client: &Client, node: &NodeDescription) {
    client.renew_lease(&node.name).await.unwrap_or_else(|e| panic!("cannot renew the lease of node {}: {e}", node.name));
}

/// The nodes that are Ready as the server judges them (its grace, each node's lease), and
/// how many nodes there are; `None` while the server does not answer.
pub async fn ready_nodes(client: &Client) -> Option<(Vec<Node>, usize)> {
    let grace = Duration::from_millis(client.info().await.ok()?.node_monitor_grace_ms);
    let nodes = client.list::<Node>(&Selection::default()).await.ok()?.items;
    let judge = NodeJudge::new(grace, client.list::<Lease>(&Selection::default()).await.ok()?.items);
    let now = Utc::now();
    let total = nodes.len();
    let ready = nodes.into_iter().filter(|n| judge.readiness(n, now).is_ready()).collect();
    Some((ready, total))
}

/// Sends `node`'s status heartbeat as its agent does when its status changed.
pub async fn heartbeat(client: &Client, node: &NodeDescription) {
    client.heartbeat(&node.name, &node.heartbeat(Utc::now())).await.unwrap_or_else(|e| panic!("heartbeat of node {}: {e}", node.name));
}
