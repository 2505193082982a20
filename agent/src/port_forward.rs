//! Port-forward, served as the kubelet serves it: a WebSocket speaking
//! `shared::api::port_forward::SUBPROTOCOL` (SPDY/3.1 in binary messages), on which the
//! client opens, per forwarded connection, an error stream and a data stream sharing a request
//! id. Once both are there, the agent connects to `127.0.0.1:<port>` inside the pod's network
//! namespace (so no packet goes to a pod address) and copies bytes both ways; a connection
//! that fails says why on the error stream, as the kubelet does, and the others go on.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket};
use bytes::Bytes;
use futures::{SinkExt, StreamExt, future};
use shared::api::port_forward::{PORT_HEADER, REQUEST_ID_HEADER, STREAM_DATA, STREAM_ERROR, STREAM_TYPE_HEADER};
use shepherd_client::spdy::{self, Role, Stream, header};
use tokio::io::AsyncWriteExt;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::runtime::{ContainerRuntime, LABEL_NAMESPACE, LABEL_NODE, LABEL_POD, LABEL_POD_UID, LABEL_SANDBOX_ID, RunState};

/// How long the second stream of a pair may take to come, as the kubelet's stream creation
/// timeout.
pub const PAIR_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest message the WebSocket takes: one whole SPDY frame and its header.
pub const MAX_MESSAGE: usize = spdy::frame::MAX_FRAME_LENGTH + 8;

/// The pod whose ports a connection forwards to.
#[derive(Debug, Clone)]
pub struct Target {
    pub namespace: String,
    pub pod: String,
    pub uid: String,
    /// The running container whose network namespace is the pod's (its sandbox).
    pub container: String,
}

impl Target {
    /// The pod `namespace/pod` on `node`, when a container of it runs: `Err` says why not.
    pub async fn find(runtime: &dyn ContainerRuntime, node: &str, namespace: &str, pod: &str) -> Result<Target, String> {
        let labels = [(LABEL_NODE, node), (LABEL_NAMESPACE, namespace), (LABEL_POD, pod)];
        let mut running: Vec<_> =
            runtime.list(&labels).await.map_err(|e| e.to_string())?.into_iter().filter(|c| c.state == RunState::Running).collect();
        // A pod deleted and created again under the same name may still have an old container.
        running.sort_by_key(|c| std::cmp::Reverse(c.created_at));
        let Some(newest) = running.first() else {
            return Err(format!("pod {namespace}/{pod} has no running container on node {node}"));
        };
        let sandbox = newest.label(LABEL_SANDBOX_ID);
        Ok(Target {
            namespace: namespace.to_string(),
            pod: pod.to_string(),
            uid: newest.label(LABEL_POD_UID).to_string(),
            container: if sandbox.is_empty() { newest.id.clone() } else { sandbox.to_string() },
        })
    }
}

/// Serves one port-forward connection until the client or `shutdown` ends it.
pub async fn serve(socket: WebSocket, runtime: Arc<dyn ContainerRuntime>, target: Target, shutdown: CancellationToken) {
    let (sink, stream) = socket.split();
    let incoming = stream.filter_map(|message| {
        future::ready(match message {
            Ok(Message::Binary(bytes)) => Some(Ok(bytes)),
            Ok(Message::Text(_)) => Some(Err("a text message, where SPDY frames come in binary ones".to_string())),
            Ok(_) => None,
            Err(e) => Some(Err(e.to_string())),
        })
    });
    let outgoing = sink.with(|bytes: Bytes| future::ready(Ok::<_, axum::Error>(Message::Binary(bytes))));
    let (session, mut accepted, connection) = spdy::start(incoming, Box::pin(outgoing), Role::Server);
    let target = Arc::new(target);
    let mut waiting: HashMap<String, oneshot::Sender<Stream>> = HashMap::new();
    loop {
        let stream = tokio::select! {
            stream = accepted.recv() => stream,
            _ = shutdown.cancelled() => {
                session.close().await;
                None
            }
        };
        let Some(stream) = stream else { break };
        let Some(request_id) = admit(&stream, &target).await else { continue };
        waiting.retain(|_, second| !second.is_closed());
        match waiting.remove(&request_id) {
            Some(second) => {
                // The first stream's task is gone only if it timed out: this one is late.
                if let Err(stream) = second.send(stream) {
                    stream.writer.reset().await;
                }
            }
            None => {
                let (second_tx, second_rx) = oneshot::channel();
                waiting.insert(request_id, second_tx);
                tokio::spawn(forward_pair(stream, second_rx, runtime.clone(), target.clone()));
            }
        }
    }
    if let Ok(Err(e)) = connection.reader.await {
        tracing::info!(pod = %format!("{}/{}", target.namespace, target.pod), error = %e, "port-forward connection ended");
    }
}

/// Accepts a stream whose headers are whole, and says its request id; refuses any other.
async fn admit(stream: &Stream, target: &Target) -> Option<String> {
    let refusal = match (header(&stream.headers, PORT_HEADER), header(&stream.headers, STREAM_TYPE_HEADER)) {
        (None, _) => Some(format!("{PORT_HEADER:?} header is required")),
        (Some(port), _) if !port.parse::<u16>().is_ok_and(|p| p > 0) => Some(format!("unable to parse {port:?} as a port")),
        (_, Some(STREAM_DATA | STREAM_ERROR)) => None,
        (_, kind) => Some(format!("invalid stream type {:?}", kind.unwrap_or_default())),
    };
    if let Some(refusal) = refusal {
        tracing::info!(pod = %format!("{}/{}", target.namespace, target.pod), "port-forward stream refused: {refusal}");
        stream.writer.reset().await;
        return None;
    }
    if stream.writer.reply().await.is_err() {
        return None;
    }
    // A client too old to send request ids pairs streams by their ids, as the kubelet allows.
    Some(match header(&stream.headers, REQUEST_ID_HEADER) {
        Some(id) => id.to_string(),
        None if header(&stream.headers, STREAM_TYPE_HEADER) == Some(STREAM_ERROR) => stream.writer.id().to_string(),
        None => stream.writer.id().saturating_sub(2).to_string(),
    })
}

/// Waits for the other stream of `first`'s pair, then forwards; tells the error stream when
/// the pair never completes.
async fn forward_pair(first: Stream, second: oneshot::Receiver<Stream>, runtime: Arc<dyn ContainerRuntime>, target: Arc<Target>) {
    let second = tokio::time::timeout(PAIR_TIMEOUT, second).await;
    let is_error = |stream: &Stream| header(&stream.headers, STREAM_TYPE_HEADER) == Some(STREAM_ERROR);
    let (data, error) = match second {
        Ok(Ok(second)) if is_error(&first) != is_error(&second) => {
            if is_error(&first) {
                (second, first)
            } else {
                (first, second)
            }
        }
        Ok(Ok(second)) => {
            let kind = if is_error(&first) { STREAM_ERROR } else { STREAM_DATA };
            let error = if is_error(&first) { &first } else { &second };
            let _ = error.writer.write(Bytes::from(format!("{kind} stream already assigned"))).await;
            let _ = error.writer.finish().await;
            for stream in [&first, &second] {
                stream.writer.reset().await;
            }
            return;
        }
        _ => {
            if is_error(&first) {
                let _ = first.writer.write(Bytes::from_static(b"timed out waiting for streams")).await;
                let _ = first.writer.finish().await;
            }
            first.writer.reset().await;
            return;
        }
    };
    let port: u16 = header(&data.headers, PORT_HEADER).and_then(|p| p.parse().ok()).unwrap_or_default();
    let outcome = match runtime.connect_inside(&target.container, port).await {
        Ok(connection) => {
            copy(data, connection).await;
            Ok(())
        }
        Err(e) => {
            let _ = data.writer.finish().await;
            Err(e)
        }
    };
    if let Err(e) = outcome {
        let message = format!("error forwarding port {port} to pod {}/{}, uid {}: {e}", target.namespace, target.pod, target.uid);
        tracing::info!("{message}");
        let _ = error.writer.write(Bytes::from(message)).await;
    }
    let _ = error.writer.finish().await;
}

/// Copies between the data stream and the connection in the pod until both directions end,
/// or the client resets the stream.
async fn copy(data: Stream, connection: tokio::net::TcpStream) {
    let Stream { reader: mut from_client, writer: to_client, .. } = data;
    let (mut from_pod, mut to_pod) = connection.into_split();
    let inbound = async {
        while let Some(bytes) = from_client.read().await {
            if to_pod.write_all(&bytes).await.is_err() {
                return;
            }
        }
        // The client finished writing: the pod reads the end, and may still answer.
        let _ = to_pod.shutdown().await;
    };
    let outbound = async {
        to_client.send_from(&mut from_pod).await;
    };
    tokio::select! {
        _ = async { tokio::join!(inbound, outbound) } => {}
        _ = to_client.was_reset() => {}
    }
}
