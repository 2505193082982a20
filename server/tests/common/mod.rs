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
        let response = request.send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    pub async fn raw(&self, method: Method, path: &str, body: impl Into<reqwest::Body>) -> (StatusCode, Value) {
        let mut request = self.client.request(method, format!("{}{path}", self.url)).header("content-type", "application/json");
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.body(body).send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
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
