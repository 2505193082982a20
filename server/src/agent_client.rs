//! The HTTP client the server asks nodes' agents with (pod logs, exec, attach): it follows no
//! redirect, and connects to no address that `shared::validation::unproxyable_address`
//! refuses, whatever an agent endpoint's host name resolves to. Also the steps every request
//! to a pod's agent shares: finding the pod's node and its checked endpoint ([`pod_agent`]),
//! signing ([`sign`]), and what to answer when the agent refuses ([`refused`]).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode, header};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use shared::model::{Kind, Node, Object, Pod};
use shared::validation::{UNPROXYABLE_KINDS, unproxyable_address};

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::store::Key;

/// The most of an agent's error body the server reads: enough for any message an agent
/// writes, and no more of whatever else an endpoint might send.
const AGENT_ERROR_LIMIT: usize = 16 * 1024;

/// The addresses of a host name, once found.
type Found = Pin<Box<dyn Future<Output = std::io::Result<Vec<SocketAddr>>> + Send>>;

/// Finds the addresses of a host name.
type Lookup = fn(String) -> Found;

/// Every address a host name resolves to is one the server sends no request to.
#[derive(Debug, thiserror::Error)]
#[error("host {host} resolves only to addresses the server sends no request to: {addresses}")]
pub struct RefusedAddresses {
    host: String,
    addresses: String,
}

/// The client for agents, resolving with the system's resolver.
pub fn client() -> reqwest::Client {
    client_resolving_with(system_lookup)
}

fn client_resolving_with(lookup: Lookup) -> reqwest::Client {
    reqwest::Client::builder()
        // A redirect would take a proxied request to wherever an agent endpoint says.
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(Arc::new(AgentResolver { lookup }))
        .build()
        .expect("a client without TLS settings builds")
}

fn system_lookup(host: String) -> Found {
    Box::pin(async move { Ok(tokio::net::lookup_host((host.as_str(), 0)).await?.collect()) })
}

/// Drops the refused addresses of a name; fails when nothing else is left. An address
/// literal in a URL is never resolved: validation refuses those.
struct AgentResolver {
    lookup: Lookup,
}

impl Resolve for AgentResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        let lookup = (self.lookup)(host.clone());
        Box::pin(async move {
            let (allowed, refused): (Vec<SocketAddr>, Vec<SocketAddr>) =
                lookup.await?.into_iter().partition(|address| unproxyable_address(address.ip()).is_none());
            if allowed.is_empty() && !refused.is_empty() {
                let addresses = refused
                    .iter()
                    .map(|a| format!("{} ({} address)", a.ip(), unproxyable_address(a.ip()).unwrap_or("a refused")))
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(Box::new(RefusedAddresses { host, addresses }) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// The 502 for a request to node `node`'s agent at `url` that failed before any answer.
pub fn unreachable(node: &str, url: &str, error: &reqwest::Error) -> ApiError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<RefusedAddresses>() {
            return ApiError::bad_gateway(
                format!(
                    "the agent endpoint of node {node} names host {}, which resolves only to {UNPROXYABLE_KINDS} addresses, and the server sends no request to those: give its agent an endpoint on another address (its --address)",
                    refused.host
                ),
                format!("GET {url}: {refused}"),
            );
        }
        source = cause.source();
    }
    ApiError::bad_gateway(format!("cannot reach the agent of node {node}"), format!("GET {url}: {error}"))
}

/// The agent of a pod's node: the node's name and its checked agent endpoint.
pub struct PodAgent {
    pub node: String,
    pub endpoint: String,
}

/// The agent that runs `pod`, which the client wants `wanted` (`logs`, `exec`) of.
pub fn pod_agent(state: &AppState, pod: &Pod, wanted: &str) -> ApiResult<PodAgent> {
    let (namespace, name) = (&pod.metadata.namespace, &pod.metadata.name);
    if pod.spec.node_name.is_empty() {
        return Err(ApiError::bad_request(format!("pod {namespace}/{name} is not scheduled yet, so it has no {wanted}")));
    }
    match state.store.get(&Key::new(Kind::Node, "", &pod.spec.node_name)).as_deref() {
        Some(Object::Node(node)) => node_agent(node, wanted),
        _ => Err(ApiError::not_found(format!("node {} of pod {namespace}/{name} no longer exists", pod.spec.node_name))),
    }
}

/// The agent of `node`, which the client wants `wanted` (`logs`, `usage`) of.
pub fn node_agent(node: &Node, wanted: &str) -> ApiResult<PodAgent> {
    let endpoint = node.status.agent_endpoint.clone();
    if endpoint.is_empty() {
        return Err(ApiError::unavailable(format!("node {} does not report an agent endpoint to ask for {wanted}", node.metadata.name)));
    }
    // Checked as every node write is, again here for nodes stored before that check existed.
    if let Some(why) = shared::validation::agent_endpoint_error(&endpoint, &node.metadata.name) {
        return Err(ApiError::bad_gateway(
            format!("node {} reports an agent endpoint this server does not send requests to: it {why}", node.metadata.name),
            why.clone(),
        ));
    }
    Ok(PodAgent { node: node.metadata.name.clone(), endpoint })
}

/// Signs `request` to node `node`'s agent with the token that agent speaks with, when the
/// server knows it ([`AgentKeys`]); the token itself never travels (`agent_auth`). Returns
/// whether it signed.
///
/// [`AgentKeys`]: crate::auth::AgentKeys
pub fn sign(state: &AppState, node: &str, request: &mut reqwest::Request) -> bool {
    let Some(token) = state.agent_keys.signing_key(node, &state.config.tokens) else {
        return false;
    };
    let target = match request.url().query() {
        Some(query) => format!("{}?{query}", request.url().path()),
        None => request.url().path().to_string(),
    };
    let now = u64::try_from(chrono::Utc::now().timestamp()).unwrap_or(0);
    let signature = shepherd_client::agent_auth::sign_now(&token, request.method().as_str(), &target, now);
    let value = HeaderValue::from_str(&signature).expect("a signature is ASCII");
    request.headers_mut().insert(header::AUTHORIZATION, value);
    true
}

/// The error for node `node`'s agent's refusal `answer` of a request, `signed` or not.
pub async fn refused(node: &str, mut answer: reqwest::Response, signed: bool) -> ApiError {
    let text = String::from_utf8_lossy(&read_at_most(&mut answer, AGENT_ERROR_LIMIT).await).into_owned();
    agent_error(node, answer.status(), &text, signed)
}

/// The first `limit` bytes of `response`'s body, or what arrived before it failed.
async fn read_at_most(response: &mut reqwest::Response, limit: usize) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < limit {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk[..chunk.len().min(limit - body.len())]),
            Ok(None) | Err(_) => break,
        }
    }
    body
}

/// What the client hears when node `node`'s agent refuses a proxied request. The agent's
/// 400 and 404 (no such container, a bad parameter) are the client's to fix and pass on with
/// the agent's own message; anything else is the server's trouble with the agent, a 502: an
/// agent's 401 means the server's signature failed (or, `signed` false, that the server had
/// nothing to sign with), not that the client must log in.
fn agent_error(node: &str, status: reqwest::StatusCode, text: &str, signed: bool) -> ApiError {
    // The agent answers in the API's error shape: its message, not its JSON, is what to show.
    let said = serde_json::from_str::<shared::api::ApiErrorBody>(text).map_or_else(|_| text.trim().to_string(), |body| body.error.message);
    let answered = format!("the agent of node {node} answered {status}");
    let passed_on = StatusCode::from_u16(status.as_u16()).ok().filter(|s| [StatusCode::BAD_REQUEST, StatusCode::NOT_FOUND].contains(s));
    if let Some(status) = passed_on {
        let mut error = ApiError::from_status(status, &said);
        error.message = format!("{answered}: {}", error.message);
        return error;
    }
    let message = match (status, signed) {
        (reqwest::StatusCode::UNAUTHORIZED, true) => format!(
            "{answered}: it does not accept this server's signature. Run node {node}'s agent with the token it registers with, and check that the two machines' clocks agree within 5 minutes"
        ),
        (reqwest::StatusCode::UNAUTHORIZED, false) => format!(
            "the server could not sign its request to the agent of node {node}, so the agent refused it ({status}): the server has no token for node {node} yet, because its agent has not registered or renewed its lease since the server started and the tokens file has no `<token> node {node}` line. Retry after the agent's next lease renewal (every 10 s by default), or give node {node} a node token of its own in the tokens file and run its agent with it"
        ),
        _ => answered.clone(),
    };
    ApiError::bad_gateway(message, format!("{answered}: {said}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name that resolves to 0.0.0.0, which reaches this host, and to a multicast address:
    /// without the resolver's check, the request would reach the listener.
    fn unspecified_and_multicast(_: String) -> Found {
        Box::pin(async { Ok(vec!["0.0.0.0:0".parse().unwrap(), "[ff02::1]:0".parse().unwrap()]) })
    }

    async fn listener() -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(listener, axum::Router::new().fallback(|| async { "logs" })).await.unwrap() });
        port
    }

    #[tokio::test]
    async fn a_name_that_resolves_only_to_refused_addresses_is_not_reached() {
        let url = format!("http://agent.test:{}/logs/default/web", listener().await);
        let error = client_resolving_with(unspecified_and_multicast).get(&url).send().await.expect_err("no address is left");
        let refused = unreachable("n1", &url, &error);
        assert_eq!(refused.status, axum::http::StatusCode::BAD_GATEWAY);
        assert!(refused.message.contains("node n1 names host agent.test, which resolves only to link-local"), "{}", refused.message);
        let cause = refused.cause.unwrap_or_default();
        assert!(cause.contains("0.0.0.0 (an unspecified address), ff02::1 (a multicast address)"), "{cause}");
    }

    #[tokio::test]
    async fn a_name_of_a_loopback_address_is_reached() {
        let url = format!("http://localhost:{}/logs/default/web", listener().await);
        let answer = client().get(&url).send().await.unwrap();
        assert_eq!(answer.text().await.unwrap(), "logs");
    }
}
