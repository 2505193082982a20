//! Proxies an upgraded connection (a pod's exec and attach sessions) from a client to the
//! agent of the pod's node, as Kubernetes' API server proxies one to the kubelet: it sends
//! the upgrade request to an agent path and query, signed as the log proxy's requests are
//! and through the same client, answers with the agent's 101, then copies the bytes both
//! ways until the agent's side ends. Which session it is, and who may open it, is the
//! caller's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderName, StatusCode, header};
use axum::response::Response;
use hyper_util::rt::TokioIo;
use shared::model::Pod;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::agent_client::{pod_agent, refused, sign, unreachable};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// The request headers an upgrade takes to the agent: those that negotiate it. The client's
/// credentials and cookies never reach a node.
const FORWARDED: [HeaderName; 5] =
    [header::CONNECTION, header::UPGRADE, header::SEC_WEBSOCKET_KEY, header::SEC_WEBSOCKET_VERSION, header::SEC_WEBSOCKET_PROTOCOL];

/// What a proxied session calls with the bytes the agent sends, as they go by.
pub type Tap = Box<dyn FnMut(&[u8]) + Send>;

/// How a proxied session ended: how long it lasted and, if the copy failed, why.
pub struct SessionEnd {
    pub duration: Duration,
    pub error: Option<String>,
}

/// Where on the pod's agent a session goes: the agent path and its query.
pub struct AgentSession<'a> {
    pub pod: &'a Pod,
    /// What the client wants of the pod, for errors: `exec`, `attach`.
    pub wanted: &'a str,
    pub path: String,
    pub query: Vec<(&'static str, String)>,
}

/// Proxies the upgrade `request` to `session`'s agent: the agent's 101 once it accepted,
/// then a task copies the bytes, shows `tap` what the agent sends and calls `ended` at the
/// end. A refusal of the agent's is answered as the log proxy answers one.
pub async fn proxy(
    state: &AppState,
    mut request: Request,
    session: AgentSession<'_>,
    mut tap: Tap,
    ended: impl FnOnce(SessionEnd) + Send + 'static,
) -> ApiResult<Response> {
    if !request.headers().contains_key(header::UPGRADE) {
        return Err(ApiError::bad_request(format!(
            "{} is a stream: connect with a WebSocket (Upgrade: websocket, subprotocol {})",
            session.wanted,
            shared::remote_command::V5
        )));
    }
    let agent = pod_agent(state, session.pod, session.wanted)?;
    let url = format!("{}{}", agent.endpoint, session.path);
    let failed = |e: reqwest::Error| unreachable(&agent.node, &url, &e);
    let mut upstream = state.http.get(&url).query(&session.query);
    for name in FORWARDED {
        for value in request.headers().get_all(&name) {
            upstream = upstream.header(&name, value);
        }
    }
    let mut upstream = upstream.build().map_err(failed)?;
    let signed = sign(state, &agent.node, &mut upstream);
    let answer = state.http.execute(upstream).await.map_err(failed)?;
    if answer.status() != reqwest::StatusCode::SWITCHING_PROTOCOLS {
        return Err(refused(&agent.node, answer, signed).await);
    }
    let mut response = Response::builder().status(StatusCode::SWITCHING_PROTOCOLS);
    for (name, value) in answer.headers() {
        response = response.header(name, value);
    }
    let response = response.body(Body::empty()).map_err(|e| ApiError::internal(format!("the agent's 101 answer: {e}")))?;
    let client = hyper::upgrade::on(&mut request);
    let node = Arc::<str>::from(agent.node);
    tokio::spawn(async move {
        let started = Instant::now();
        let copied = match (client.await, answer.upgrade().await) {
            (Ok(client), Ok(agent)) => pipe(TokioIo::new(client), agent, &mut tap).await.map_err(|e| e.to_string()),
            (Err(e), _) => Err(format!("the client's side did not upgrade: {e}")),
            (_, Err(e)) => Err(format!("the side of node {node}'s agent did not upgrade: {e}")),
        };
        ended(SessionEnd { duration: started.elapsed(), error: copied.err() });
    });
    Ok(response)
}

/// How long a session's connection to its client stays open after the agent's side ended,
/// reading what the client still sends: its answer to the close frame, a heartbeat ping.
const LINGER: Duration = Duration::from_secs(2);

/// Copies `client`'s bytes to `agent` and `agent`'s to `client` (through `tap`) until the
/// agent's side ends. The client's end reaches the agent as the end of its input, upon
/// which the agent ends the session. The agent's end, even a broken one, reaches the client
/// after everything the agent sent (its close frame among it); then the client's last
/// bytes are read, because a connection dropped with bytes unread is reset, and a reset
/// can discard what is still on its way to the client.
async fn pipe(client: impl AsyncRead + AsyncWrite + Send, agent: impl AsyncRead + AsyncWrite + Send, tap: &mut Tap) -> std::io::Result<()> {
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut agent_read, mut agent_write) = tokio::io::split(agent);
    let copied = {
        let upstream = async {
            // Whether the client ended or broke off, the agent hears the same end of input.
            let _ = tokio::io::copy(&mut client_read, &mut agent_write).await;
            let _ = agent_write.shutdown().await;
        };
        let downstream = async {
            let mut buffer = vec![0; 64 * 1024];
            let read = loop {
                match agent_read.read(&mut buffer).await {
                    Ok(0) => break Ok(()),
                    Ok(read) => {
                        tap(&buffer[..read]);
                        client_write.write_all(&buffer[..read]).await?;
                    }
                    Err(e) => break Err(e),
                }
            };
            client_write.shutdown().await?;
            read
        };
        tokio::pin!(downstream);
        tokio::select! {
            copied = &mut downstream => copied,
            () = upstream => downstream.await,
        }
    };
    let _ = tokio::time::timeout(LINGER, tokio::io::copy(&mut client_read, &mut tokio::io::sink())).await;
    copied
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::io::ReadBuf;
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::oneshot;

    use super::*;

    /// An agent's side that sends `sent`, then breaks off when `broken` fires; it takes in
    /// nothing, as an agent busy ending its session.
    struct BreakingAgent {
        sent: Option<Vec<u8>>,
        broken: oneshot::Receiver<()>,
    }

    impl AsyncRead for BreakingAgent {
        fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
            if let Some(sent) = self.sent.take() {
                buf.put_slice(&sent);
                return Poll::Ready(Ok(()));
            }
            Pin::new(&mut self.broken).poll(cx).map(|_| Err(std::io::ErrorKind::ConnectionReset.into()))
        }
    }

    impl AsyncWrite for BreakingAgent {
        fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, _: &[u8]) -> Poll<std::io::Result<usize>> {
            Poll::Pending
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn what_a_broken_agent_side_sent_reaches_the_client_with_a_clean_end_not_a_reset() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (proxied, _) = listener.accept().await.unwrap();
        let (break_off, broken) = oneshot::channel();
        let agent = BreakingAgent { sent: Some(b"status, close frame".to_vec()), broken };
        let piped = tokio::spawn(async move { pipe(proxied, agent, &mut (Box::new(|_: &[u8]| {}) as Tap)).await });
        // More than the proxy reads ahead: bytes of the client's still unread at the end, as
        // a heartbeat ping or the answer to the close frame can be.
        client.write_all(&[b'x'; 64 * 1024]).await.unwrap();
        break_off.send(()).unwrap();
        let mut received = Vec::new();
        client.read_to_end(&mut received).await.expect("a clean end (FIN), not a reset");
        assert_eq!(received, b"status, close frame");
        drop(client);
        let copied = piped.await.unwrap();
        assert_eq!(copied.unwrap_err().kind(), std::io::ErrorKind::ConnectionReset, "the session's end says it broke off");
    }
}
