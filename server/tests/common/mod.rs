//! Helpers for the integration tests on top of `shepherd-testing` (the real server on
//! 127.0.0.1:0, nodes registered as the agent registers them, waits on the watch): pod
//! manifests, and a reader of raw watch streams for the tests of the stream itself.

#![allow(dead_code, unused_imports)]

use std::time::Duration;

use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use shared::api::WatchEvent;
use shared::model::NodeResources;
use shared::registration::NodeDescription;
pub use shepherd_testing::{TestServer, eventually};

/// Registers node `name` with this capacity as its agent does; it is Ready at once.
pub async fn add_node(server: &TestServer, name: &str, cpu: i64, memory: i64, pods: i64) {
    shepherd_testing::register_node(&server.client, &NodeDescription::new(name, NodeResources { cpu, memory, pods })).await;
}

/// A pod manifest requesting `cpu` millicores and `memory` bytes.
pub fn pod(name: &str, cpu: i64, memory: i64) -> Value {
    json!({
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "minimal", "resources": {"cpu": cpu, "memory": memory}}]}
    })
}

/// One SSE message as the server framed it.
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

/// Reads a `text/event-stream` response message by message, through `shared::sse`.
pub struct SseReader {
    stream: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    parser: shared::sse::Parser,
    ready: std::collections::VecDeque<shared::sse::Message>,
}

impl SseReader {
    pub fn new(response: reqwest::Response) -> SseReader {
        SseReader { stream: response.bytes_stream().boxed(), parser: shared::sse::Parser::new(), ready: Default::default() }
    }

    /// The next message, or `None` when the stream ends or `timeout` passes.
    pub async fn next(&mut self, timeout: Duration) -> Option<SseMessage> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(message) = self.ready.pop_front() {
                return Some(SseMessage {
                    event: message.event.unwrap_or_default(),
                    id: message.id.unwrap_or_default(),
                    data: message.data,
                });
            }
            match tokio::time::timeout_at(deadline, self.stream.next()).await {
                Ok(Some(Ok(chunk))) => self.ready.extend(self.parser.feed(&chunk)),
                _ => return None,
            }
        }
    }
}

/// Opens a watch and checks it streams.
pub async fn open_watch(server: &TestServer, path: &str) -> SseReader {
    let response = server.client.request(reqwest::Method::GET, path).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "watch {path}");
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    SseReader::new(response)
}
