//! Helpers for the integration tests: a real server on 127.0.0.1:0, a JSON client, fake
//! nodes that register and heartbeat over HTTP, and a small SSE reader.

#![allow(dead_code)]

use std::time::Duration;

use futures::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use server::Config;
use shared::api::WatchEvent;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub struct TestServer {
    pub url: String,
    pub shutdown: CancellationToken,
    pub task: JoinHandle<Result<(), server::ServerError>>,
    pub client: reqwest::Client,
    pub token: Option<String>,
}

impl TestServer {
    pub async fn start(config: Config) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(server::run(listener, config, shutdown.clone()));
        let server = TestServer { url, shutdown, task, client: reqwest::Client::new(), token: None };
        server.wait_ready().await;
        server
    }

    /// A fast in-memory server: short sweep and bookmarks.
    pub async fn in_memory() -> TestServer {
        TestServer::start(Config { scheduler_sweep: Duration::from_millis(500), ..Config::in_memory() }).await
    }

    pub async fn wait_ready(&self) {
        for _ in 0..200 {
            if let Ok(r) = self.client.get(format!("{}/readyz", self.url)).send().await
                && r.status().is_success()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the server at {} never became ready", self.url);
    }

    pub fn with_token(&self, token: &str) -> TestServer {
        TestServer {
            url: self.url.clone(),
            shutdown: self.shutdown.clone(),
            task: tokio::spawn(async { Ok(()) }),
            client: self.client.clone(),
            token: Some(token.to_string()),
        }
    }

    pub async fn request(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut request = self.client.request(method, format!("{}{path}", self.url)).header(shared::api::CLIENT_HEADER, "tests");
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        self.answer(request).await
    }

    /// Sends a request and reads its answer; a JSON answer must match its schema in the
    /// server's OpenAPI document.
    pub async fn answer(&self, request: reqwest::RequestBuilder) -> (StatusCode, Value) {
        let request = request.build().unwrap();
        let (method, path) = (request.method().clone(), request.url().path().to_string());
        let response = self.client.execute(request).await.unwrap();
        let status = response.status();
        let json = response.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
        let text = response.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if json {
            assert_conforms(&method, &path, status, &value);
        }
        (status, value)
    }

    pub async fn raw(&self, method: Method, path: &str, body: impl Into<reqwest::Body>) -> (StatusCode, Value) {
        let mut request = self.client.request(method, format!("{}{path}", self.url)).header("content-type", "application/json");
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        self.answer(request.body(body)).await
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

    /// Registers a Ready node with a fresh heartbeat.
    pub async fn add_node(&self, name: &str, cpu: i64, memory: i64, pods: i64) {
        let (status, body) = self
            .post(
                "/api/v1/nodes",
                json!({"kind": "Node", "metadata": {"name": name}, "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": pods}}}),
            )
            .await;
        assert!(status == StatusCode::CREATED || status == StatusCode::OK, "register {name}: {status} {body}");
        self.heartbeat(name).await;
    }

    pub async fn heartbeat(&self, name: &str) {
        let (status, body) =
            self.post(&format!("/api/v1/nodes/{name}/heartbeat"), json!({"conditions": [{"type": "Ready", "status": "True"}]})).await;
        assert_eq!(status, StatusCode::OK, "heartbeat {name}: {body}");
    }

    pub async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap().unwrap();
    }
}

/// The OpenAPI document the server serves, built once per test binary.
static DOCUMENT: std::sync::LazyLock<Value> = std::sync::LazyLock::new(server::api::openapi::document);

/// A compiled validator for one answer's schema, with the document's components beside it
/// so that its `$ref`s resolve; compiled once per schema, since a test sends thousands.
fn validator_for(schema: &Value) -> std::sync::Arc<jsonschema::Validator> {
    static VALIDATORS: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<jsonschema::Validator>>>> =
        std::sync::LazyLock::new(Default::default);
    let mut validators = VALIDATORS.lock().unwrap();
    let entry = validators.entry(schema.to_string()).or_insert_with(|| {
        let root =
            json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "allOf": [schema], "components": DOCUMENT["components"]});
        std::sync::Arc::new(jsonschema::options().should_validate_formats(true).build(&root).expect("the document's schemas compile"))
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

/// A pod manifest requesting `cpu` millicores and `memory` bytes.
pub fn pod(name: &str, cpu: i64, memory: i64) -> Value {
    json!({
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "minimal", "resources": {"cpu": cpu, "memory": memory}}]}
    })
}

/// Polls `check` every 20 ms until it returns `Some`, or panics after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One SSE message: its `event:`, `id:` and `data:`.
#[derive(Debug, Clone, Default)]
pub struct SseMessage {
    pub event: String,
    pub id: String,
    pub data: String,
}

impl SseMessage {
    pub fn watch_event(&self) -> WatchEvent {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("bad watch event {:?}: {e}", self.data))
    }
}

/// Reads a `text/event-stream` response message by message.
pub struct SseReader {
    stream: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

impl SseReader {
    pub fn new(response: reqwest::Response) -> SseReader {
        SseReader { stream: response.bytes_stream().boxed(), buffer: String::new() }
    }

    /// The next message, or `None` when the stream ends or `timeout` passes.
    pub async fn next(&mut self, timeout: Duration) -> Option<SseMessage> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut message = SseMessage::default();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        message.event = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("id:") {
                        message.id = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        message.data.push_str(v.trim_start());
                    }
                }
                if message.data.is_empty() && message.event.is_empty() {
                    continue;
                }
                return Some(message);
            }
            match tokio::time::timeout_at(deadline, self.stream.next()).await {
                Ok(Some(Ok(chunk))) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
                _ => return None,
            }
        }
    }
}

/// Opens a watch and checks it streams.
pub async fn open_watch(server: &TestServer, path: &str) -> SseReader {
    let mut request = server.client.get(format!("{}{path}", server.url));
    if let Some(token) = &server.token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "watch {path}");
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    SseReader::new(response)
}
