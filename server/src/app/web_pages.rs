//! What keeps web pages away from an open server. Without tokens the server listens only on
//! loopback, where any page the user opens can send it requests. So it answers only requests
//! whose Host is a loopback name or address with its own port (no DNS rebinding), whose
//! Origin, when there is one, is its own (no other site's page), and, when they are a POST,
//! that carry a JSON or YAML media type or [`CLIENT_HEADER`] (no form or bodyless post, which
//! browsers send anywhere without asking), or are kubectl's stream requests. A page can send
//! a DELETE, PUT or PATCH to another site only after a CORS preflight, which this server never
//! grants, so those need no proof. With tokens, the token is the proof: browsers never attach
//! one on their own.

use axum::extract::connect_info::ConnectInfo;
use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use shared::api::CLIENT_HEADER;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use crate::error::ApiError;
use crate::extract::{JSON, YAML_MEDIA_TYPES, media_type, unsupported_media_type};
use crate::state::AppState;

/// Kubernetes' patch and protobuf bodies: kubectl-style clients send them, and no browser
/// form can (any of them forces a CORS preflight). Whether `/k8s` accepts one is its call.
const KUBERNETES_MEDIA_TYPES: [&str; 5] = [
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/json-patch+json",
    "application/apply-patch+yaml",
    "application/vnd.kubernetes.protobuf",
];

/// The local port a connection came in on (the port a Host must name) and whether it is
/// TLS (the scheme of the server's own Origin).
#[derive(Debug, Clone, Copy)]
pub struct Connection {
    port: Option<u16>,
    tls: bool,
}

/// A stream that can say which local port it came in on and whether it is TLS.
pub trait Transport {
    fn connection(&self) -> Connection;
}

impl Transport for TcpStream {
    fn connection(&self) -> Connection {
        Connection { port: self.local_addr().ok().map(|addr| addr.port()), tls: false }
    }
}

impl Transport for TlsStream<TcpStream> {
    fn connection(&self) -> Connection {
        Connection { port: self.get_ref().0.local_addr().ok().map(|addr| addr.port()), tls: true }
    }
}

/// kubectl's exec, attach and port-forward: a bodyless POST with `Upgrade`, which no page
/// can set (a forbidden header for fetch, absent from forms). They pass on to `/k8s`'s 404.
fn asks_for_a_stream(request: &Request) -> bool {
    let path = request.uri().path();
    request.headers().contains_key(header::UPGRADE)
        && crate::k8s::owns(path)
        && ["/exec", "/attach", "/portforward"].iter().any(|sub| path.ends_with(sub))
}

/// Refuses what a web page could have sent, on a server without tokens.
pub async fn refuse_web_pages(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if state.config.tokens.is_empty()
        && let Err(refusal) = check(&request)
    {
        return refusal.into_response();
    }
    next.run(request).await
}

fn check(request: &Request) -> Result<(), ApiError> {
    let connection = request.extensions().get::<ConnectInfo<Connection>>().map(|info| info.0);
    let Some((port, tls)) = connection.and_then(|c| Some((c.port?, c.tls))) else {
        return Err(ApiError::forbidden("this server has no tokens and cannot tell which port the request came in on, so it refuses it"));
    };
    let headers = request.headers();
    // Every Host and Origin a request carries is checked, not just the first.
    let host_headers = headers.get_all(header::HOST).iter().map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let hosts: Vec<String> = request.uri().authority().map(|a| a.to_string()).into_iter().chain(host_headers).collect();
    if hosts.is_empty() {
        return Err(ApiError::forbidden(
            "the request has no Host header; this server has no tokens and answers only requests for its own address",
        ));
    }
    let scheme = if tls { "https" } else { "http" };
    if let Some(host) = hosts.iter().find(|host| !shared::listen::is_own_loopback_host(host, port, tls)) {
        return Err(ApiError::forbidden(format!(
            "this server has no tokens, so it answers only requests for its own address: Host {host:?} is not localhost, \
             127.0.0.1 or [::1] with port {port} (a web page that points its own name at this machine sends such a Host)"
        )));
    }
    let own_origin = format!("{scheme}://{}", hosts[0]);
    let origins = headers.get_all(header::ORIGIN).iter().map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    if let Some(origin) = origins.into_iter().find(|origin| !origin.eq_ignore_ascii_case(&own_origin)) {
        return Err(ApiError::forbidden(format!(
            "a page from {origin} may not call this server: it has no tokens, so only its own dashboard at {own_origin} may"
        )));
    }
    // GET, HEAD and POST are the methods a page may send anywhere without a preflight; of
    // them only POST changes state.
    if request.method() != Method::POST || headers.contains_key(CLIENT_HEADER) || asks_for_a_stream(request) {
        return Ok(());
    }
    match media_type(headers) {
        Some(media) if media == JSON || YAML_MEDIA_TYPES.contains(&media.as_str()) || KUBERNETES_MEDIA_TYPES.contains(&media.as_str()) => {
            Ok(())
        }
        Some(media) => Err(unsupported_media_type(&media)),
        None => Err(ApiError::forbidden(format!(
            "a POST needs Content-Type: {JSON} or the {CLIENT_HEADER} header (any value), which no web \
             page can send to this server; sheepctl, the agent and the dashboard send it"
        ))),
    }
}
