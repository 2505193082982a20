//! The agent's view of the API server: the [`ApiClient`] trait (register, heartbeat, list and
//! watch the node's pods, write pod status, record events) and [`HttpApiClient`], its REST
//! implementation with a small Server-Sent Events reader for watch streams.

use std::time::Duration;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use serde::de::DeserializeOwned;
use shared::api::{ApiErrorBody, Heartbeat, Info, List, WatchEvent, paths};
use shared::model::{Event, Kind, Node, Pod};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API server {server} unreachable while trying to {action}: {message}")]
    Unreachable { server: String, action: String, message: String },
    /// The watch's resource_version is older than the server keeps: re-list.
    #[error("watch from resource_version {0} is gone: the server no longer keeps that history")]
    Gone(u64),
    #[error("{action}: not found ({message})")]
    NotFound { action: String, message: String },
    #[error("{action}: conflict ({message})")]
    Conflict { action: String, message: String },
    #[error("{action}: the server answered {code} {reason}: {message}")]
    Status { action: String, code: u16, reason: String, message: String },
    #[error("{action}: unreadable answer: {message}")]
    Decode { action: String, message: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A stream of watch events; it ends when the connection drops.
pub type WatchStream = BoxStream<'static, Result<WatchEvent>>;

/// Everything the agent asks of the API server.
#[async_trait]
pub trait ApiClient: Send + Sync + 'static {
    /// The cluster's id (`Info::cluster_id`), which the agent's containers are labelled with.
    async fn cluster_id(&self) -> Result<String>;
    /// Registers the node (creates it, or updates capacity and info of an existing one).
    async fn register_node(&self, node: &Node) -> Result<Node>;
    async fn heartbeat(&self, node: &str, heartbeat: &Heartbeat) -> Result<()>;
    /// The pods bound to `node`, with the revision the list was read at.
    async fn list_pods(&self, node: &str) -> Result<List<Pod>>;
    /// Changes to the pods bound to `node` strictly after `resource_version`.
    async fn watch_pods(&self, node: &str, resource_version: u64) -> Result<WatchStream>;
    /// Writes the pod's status (the status subresource; only `status` is taken).
    async fn update_pod_status(&self, pod: &Pod) -> Result<Pod>;
    /// Removes the pod at once (grace period 0) if the stored pod still has `pod`'s uid: the
    /// agent's word that a terminating pod's containers are gone. `NotFound` and `Conflict`
    /// both mean that pod is gone already.
    async fn delete_pod_now(&self, pod: &Pod) -> Result<()>;
    async fn create_event(&self, event: &Event) -> Result<()>;
}

/// The REST client of the contract in `shared::api`.
#[derive(Clone)]
pub struct HttpApiClient {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

impl HttpApiClient {
    /// `base` is the server's URL, such as `http://127.0.0.1:9876`.
    pub fn new(base: &str, token: Option<String>) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .pool_max_idle_per_host(64)
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        HttpApiClient { base: base.trim_end_matches('/').to_string(), token: token.filter(|t| !t.is_empty()), http }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let builder = self.http.request(method, format!("{}{path}", self.base)).header(shared::api::CLIENT_HEADER, "agent");
        match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    fn unreachable(&self, action: &str, error: reqwest::Error) -> Error {
        Error::Unreachable { server: self.base.clone(), action: action.to_string(), message: error_chain(&error) }
    }

    async fn send(&self, action: &str, builder: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        let response = builder.send().await.map_err(|e| self.unreachable(action, e))?;
        if response.status().is_success() {
            return Ok(response);
        }
        let code = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        let (reason, message) = match serde_json::from_str::<ApiErrorBody>(&text) {
            Ok(body) => (body.error.reason, body.error.message),
            Err(_) => (String::new(), text.trim().to_string()),
        };
        let action = action.to_string();
        Err(match code {
            404 => Error::NotFound { action, message },
            409 => Error::Conflict { action, message },
            410 => Error::Gone(0),
            _ => Error::Status { action, code, reason, message },
        })
    }

    async fn json<T: DeserializeOwned>(&self, action: &str, builder: reqwest::RequestBuilder) -> Result<T> {
        let response = self.send(action, builder.timeout(REQUEST_TIMEOUT)).await?;
        let bytes = response.bytes().await.map_err(|e| self.unreachable(action, e))?;
        serde_json::from_slice(&bytes).map_err(|e| Error::Decode { action: action.to_string(), message: e.to_string() })
    }
}

/// An error with its causes: reqwest's own message alone hides "connection refused".
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}

fn node_selector(node: &str) -> String {
    format!("spec.node_name={node}")
}

#[async_trait]
impl ApiClient for HttpApiClient {
    async fn cluster_id(&self) -> Result<String> {
        let info: Info =
            self.json("read the server's info", self.request(reqwest::Method::GET, paths::INFO).timeout(REQUEST_TIMEOUT)).await?;
        Ok(info.cluster_id)
    }

    async fn register_node(&self, node: &Node) -> Result<Node> {
        let action = format!("register node {}", node.metadata.name);
        self.json(&action, self.request(reqwest::Method::POST, &paths::collection(Kind::Node, None)).json(node)).await
    }

    async fn heartbeat(&self, node: &str, heartbeat: &Heartbeat) -> Result<()> {
        let action = format!("send the heartbeat of node {node}");
        let builder = self.request(reqwest::Method::POST, &paths::node_heartbeat(node)).json(heartbeat);
        self.send(&action, builder.timeout(REQUEST_TIMEOUT)).await.map(drop)
    }

    async fn list_pods(&self, node: &str) -> Result<List<Pod>> {
        let action = format!("list the pods of node {node}");
        let builder =
            self.request(reqwest::Method::GET, &paths::collection(Kind::Pod, None)).query(&[("field_selector", node_selector(node))]);
        self.json(&action, builder).await
    }

    async fn watch_pods(&self, node: &str, resource_version: u64) -> Result<WatchStream> {
        let action = format!("watch the pods of node {node}");
        let builder = self.request(reqwest::Method::GET, &paths::collection(Kind::Pod, None)).query(&[
            ("field_selector", node_selector(node)),
            ("watch", "true".to_string()),
            ("resource_version", resource_version.to_string()),
        ]);
        let response = match self.send(&action, builder).await {
            Err(Error::Gone(_)) => return Err(Error::Gone(resource_version)),
            other => other?,
        };
        let server = self.base.clone();
        let bytes = response.bytes_stream().map(move |chunk| {
            chunk.map_err(|e| Error::Unreachable { server: server.clone(), action: action.clone(), message: error_chain(&e) })
        });
        Ok(sse_events(bytes).map(move |data| watch_message(&data?, resource_version)).boxed())
    }

    async fn update_pod_status(&self, pod: &Pod) -> Result<Pod> {
        let action = format!("update the status of pod {}", pod.metadata.key());
        let builder = self.request(reqwest::Method::PUT, &paths::pod_status(&pod.metadata.namespace, &pod.metadata.name)).json(pod);
        self.json(&action, builder).await
    }

    async fn delete_pod_now(&self, pod: &Pod) -> Result<()> {
        let action = format!("confirm the deletion of pod {}", pod.metadata.key());
        let path = paths::object(Kind::Pod, &pod.metadata.namespace, &pod.metadata.name);
        let builder = self
            .request(reqwest::Method::DELETE, &path)
            .query(&[("grace_period_seconds", "0"), ("uid", pod.metadata.uid.as_str())])
            .timeout(REQUEST_TIMEOUT);
        self.send(&action, builder).await.map(drop)
    }

    async fn create_event(&self, event: &Event) -> Result<()> {
        let action = format!("record event {} for {}", event.reason, event.involved_object.short());
        let builder = self.request(reqwest::Method::POST, &paths::collection(Kind::Event, Some(&event.metadata.namespace))).json(event);
        self.send(&action, builder.timeout(REQUEST_TIMEOUT)).await.map(drop)
    }
}

/// One watch message: a change, or the error the server sends before it ends the stream
/// (410 Gone when the history it was replaying has been compacted away).
fn watch_message(data: &str, resource_version: u64) -> Result<WatchEvent> {
    match serde_json::from_str::<WatchEvent>(data) {
        Ok(event) => Ok(event),
        Err(decode) => match serde_json::from_str::<ApiErrorBody>(data) {
            Ok(body) if body.error.code == 410 => Err(Error::Gone(resource_version)),
            Ok(body) => Err(Error::Status {
                action: "watch pods".to_string(),
                code: body.error.code,
                reason: body.error.reason,
                message: body.error.message,
            }),
            Err(_) => Err(Error::Decode { action: "read a pod watch event".to_string(), message: decode.to_string() }),
        },
    }
}

/// Reads a Server-Sent Events byte stream and yields each message's `data` (multi-line data
/// joined by `\n`). Comments and `id:`/`event:` fields are skipped: the watch event carries
/// its own resource_version.
pub fn sse_events<S>(bytes: S) -> impl Stream<Item = Result<String>> + Send + 'static
where
    S: Stream<Item = Result<Bytes>> + Send + Unpin + 'static,
{
    struct State<S> {
        bytes: S,
        buffer: BytesMut,
        data: Vec<String>,
        done: bool,
    }
    let state = State { bytes, buffer: BytesMut::new(), data: Vec::new(), done: false };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            while let Some(newline) = state.buffer.iter().position(|&b| b == b'\n') {
                let line = state.buffer.split_to(newline + 1);
                let line = String::from_utf8_lossy(&line);
                let line = line.trim_end_matches(['\n', '\r']);
                if line.is_empty() {
                    if !state.data.is_empty() {
                        let message = state.data.join("\n");
                        state.data.clear();
                        return Some((Ok(message), state));
                    }
                } else if let Some(value) = line.strip_prefix("data:") {
                    state.data.push(value.strip_prefix(' ').unwrap_or(value).to_string());
                }
            }
            if state.done {
                return None;
            }
            match state.bytes.next().await {
                Some(Ok(chunk)) => state.buffer.extend_from_slice(&chunk),
                Some(Err(e)) => {
                    state.done = true;
                    return Some((Err(e), state));
                }
                None => state.done = true,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sse_messages_survive_any_chunking() {
        let text = ": hello\nid: 3\nevent: watch\ndata: {\"a\":1}\n\nid: 4\r\ndata: line one\r\ndata: line two\r\n\r\n";
        for split in 1..text.len() {
            let chunks: Vec<Result<Bytes>> =
                vec![Ok(Bytes::copy_from_slice(&text.as_bytes()[..split])), Ok(Bytes::copy_from_slice(&text.as_bytes()[split..]))];
            let messages: Vec<String> = sse_events(futures::stream::iter(chunks)).map(|m| m.unwrap()).collect::<Vec<_>>().await;
            assert_eq!(messages, vec!["{\"a\":1}".to_string(), "line one\nline two".to_string()], "split at {split}");
        }
    }

    #[test]
    fn watch_messages_are_events_or_errors() {
        let event = watch_message(r#"{"type":"BOOKMARK","resource_version":9}"#, 3).unwrap();
        assert_eq!(event.resource_version, 9);
        let gone = r#"{"error":{"code":410,"reason":"Gone","message":"too old"}}"#;
        assert!(matches!(watch_message(gone, 3), Err(Error::Gone(3))));
        let other = r#"{"error":{"code":500,"reason":"InternalError","message":"disk"}}"#;
        assert!(matches!(watch_message(other, 3), Err(Error::Status { code: 500, .. })));
        assert!(matches!(watch_message("not json", 3), Err(Error::Decode { .. })));
    }

    #[tokio::test]
    async fn unreachable_server_names_itself_and_the_action() {
        // Port 1 on loopback refuses at once.
        let client = HttpApiClient::new("http://127.0.0.1:1", None);
        let error = client.list_pods("node-a").await.unwrap_err();
        let text = error.to_string();
        assert!(matches!(error, Error::Unreachable { .. }), "{text}");
        assert!(text.contains("127.0.0.1:1") && text.contains("node-a"), "{text}");
        assert!(text.to_lowercase().contains("refused"), "the cause is named: {text}");
    }
}
