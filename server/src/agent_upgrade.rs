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

/// Copies `client`'s bytes to `agent` and `agent`'s to `client` (through `tap`) until the
/// agent's side ends. The client's end reaches the agent as the end of its input, upon
/// which the agent ends the session.
async fn pipe(client: impl AsyncRead + AsyncWrite + Send, agent: impl AsyncRead + AsyncWrite + Send, tap: &mut Tap) -> std::io::Result<()> {
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut agent_read, mut agent_write) = tokio::io::split(agent);
    let upstream = async {
        // Whether the client ended or broke off, the agent hears the same end of input.
        let _ = tokio::io::copy(&mut client_read, &mut agent_write).await;
        let _ = agent_write.shutdown().await;
    };
    let downstream = async {
        let mut buffer = vec![0; 64 * 1024];
        loop {
            let read = agent_read.read(&mut buffer).await?;
            if read == 0 {
                break;
            }
            tap(&buffer[..read]);
            client_write.write_all(&buffer[..read]).await?;
        }
        client_write.shutdown().await
    };
    tokio::pin!(downstream);
    tokio::select! {
        copied = &mut downstream => copied,
        () = upstream => downstream.await,
    }
}
