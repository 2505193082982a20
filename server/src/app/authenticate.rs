//! The layer that authenticates every request: it finds the bearer token's [`Principal`],
//! authorizes the request ([`authorize`]: each role's rules by method and path, which API a
//! path belongs to being known only up here, above both, and a session's pod as stored) and
//! leaves the principal for the handlers' checks of which node a write is for.

use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use shared::api::paths;
use shared::model::{Kind, Object};

use super::dashboard::is_api;
use crate::auth::{Principal, Role};
use crate::error::ApiError;
use crate::k8s;
use crate::state::AppState;
use crate::store::Key;

/// Paths anyone may read without a token: liveness and readiness probes, the server's
/// version, and the dashboard's files (the dashboard asks for a token itself when the API
/// answers 401).
fn is_public(path: &str) -> bool {
    path == paths::HEALTHZ || path == paths::READYZ || k8s::discovery::VERSION_PATHS.contains(&path) || !is_api(path)
}

/// Whether a node token may attempt this write at all; handlers check which node and pod.
fn node_may_attempt(method: &Method, path: &str) -> bool {
    let parts: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    matches!(
        (method, parts.as_slice()),
        (&Method::POST, ["", "api", "v1", "nodes"])
            | (&Method::POST, ["", "api", "v1", "nodes", _, "heartbeat"])
            | (&Method::PUT, ["", "api", "v1", "leases", _])
            | (&Method::PUT, ["", "api", "v1", "nodes", _, "status"])
            | (&Method::PUT, ["", "api", "v1", "namespaces", _, "pods", _, "status"])
            | (&Method::DELETE, ["", "api", "v1", "namespaces", _, "pods", _])
            | (&Method::POST, ["", "api", "v1", "namespaces", _, "events"])
    )
}

/// Whether a path names Secrets, in either dialect: what Kubernetes' `view` role may not
/// read, since a Secret's values are the keys to other systems.
fn names_secrets(path: &str) -> bool {
    let path = path.strip_prefix(k8s::PREFIX).unwrap_or(path);
    let parts: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    matches!(parts.as_slice(), ["", "api", "v1", "secrets", ..] | ["", "api", "v1", "namespaces", _, "secrets", ..])
}

/// A session a path opens (`exec`, `attach`, `portforward`) in pod `namespace/name`.
struct Session<'a> {
    kind: &'a str,
    namespace: &'a str,
    name: &'a str,
}

impl Session<'_> {
    fn pod(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The session a path opens, in either dialect. A session is a write whatever its method,
/// since kubectl opens a WebSocket with GET and falls back to SPDY with POST.
fn session_of(path: &str) -> Option<Session<'_>> {
    let path = path.strip_prefix(k8s::PREFIX).unwrap_or(path);
    let parts: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    match parts.as_slice() {
        ["", "api", "v1", "namespaces", namespace, "pods", name, kind @ ("exec" | "attach" | "portforward")] => {
            Some(Session { kind, namespace, name })
        }
        _ => None,
    }
}

/// Whether `principal` may send `method` to `path`: its role's rules ([`role_allows`]) and,
/// for a session, whether the pod as stored is one it may join (`Principal::may_join_pod`;
/// a pod not stored is bound to no node). The one home of authorization: every request
/// passes it, and `kubectl auth can-i` asks it of a named object (`k8s::access`).
pub fn authorize(state: &AppState, principal: &Principal, method: &Method, path: &str) -> Result<(), ApiError> {
    role_allows(principal, method, path)?;
    match session_of(path) {
        Some(session) => {
            let key = Key::new(Kind::Pod, session.namespace, session.name);
            let node = match state.store.get(&key).as_deref() {
                Some(Object::Pod(pod)) => pod.spec.node_name.clone(),
                _ => String::new(),
            };
            principal.may_join_pod(session.kind, &session.pod(), &node)
        }
        None => Ok(()),
    }
}

/// Whether `principal`'s role allows `method` on `path`, whichever object it names: each
/// role's coarse rules, which [`authorize`] applies first and `kubectl auth can-i` asks
/// alone when it names no object (`k8s::access`). Handlers check which node a write is for.
pub fn role_allows(principal: &Principal, method: &Method, path: &str) -> Result<(), ApiError> {
    // Reading a manifest is a read, though its body needs a POST; so is asking what one may do.
    let session = session_of(path);
    let read = session.is_none()
        && (method == Method::GET || method == Method::HEAD || path == shared::api::paths::MANIFESTS_PARSE || k8s::access::is_review(path));
    match principal.role {
        Role::Admin => Ok(()),
        Role::Node if session.is_some() => Ok(()),
        Role::Viewer if let Some(session) = &session => principal.may_join_pod(session.kind, &session.pod(), ""),
        Role::Viewer if !read => Err(ApiError::forbidden(format!("a viewer token is read-only: {method} {path} is not allowed"))),
        Role::Viewer if names_secrets(path) => Err(ApiError::forbidden(format!(
            "a viewer token may not read secrets (as Kubernetes' view role): {method} {path} is not allowed"
        ))),
        Role::Node if !read && k8s::owns(path) => Err(ApiError::forbidden(format!(
            "{} may only read through /k8s (its agent writes through /api/v1), not {method} {path}",
            principal.describe()
        ))),
        Role::Node if !read && !node_may_attempt(method, path) => Err(ApiError::forbidden(format!(
            "{} may write only its node, its heartbeat and lease, the status of its pods and events, and delete its pods, not {method} {path}",
            principal.describe()
        ))),
        _ => Ok(()),
    }
}

/// The path as the router reads it: each segment percent-decoded, as the router decodes what
/// it captures (`/k8s/api/v1/namespaces/a/%73ecrets` is routed to `secrets`), so that the
/// roles judge the resource that will be served. A segment that decodes to a `/` or to
/// bytes that are not UTF-8 names nothing a route serves, and is refused.
fn decoded_path(raw: &str) -> Result<String, ApiError> {
    let segments = raw.split('/').map(|segment| {
        let decoded = percent_encoding::percent_decode_str(segment).decode_utf8().ok().filter(|s| !s.contains('/'));
        decoded.ok_or_else(|| ApiError::bad_request(format!("the path segment {segment:?} does not decode to a UTF-8 name without '/'")))
    });
    Ok(segments.collect::<Result<Vec<_>, _>>()?.join("/"))
}

/// The bearer token of a request: its `Authorization` header's, else, on a WebSocket
/// upgrade, the one a `base64url.bearer.authorization.k8s.io.` subprotocol carries (a browser
/// cannot set the header), as kube-apiserver reads both. That subprotocol is taken out of the
/// request, so no token goes on to a node's agent with the upgrade.
fn bearer_token(request: &mut Request) -> Result<Option<String>, ApiError> {
    let protocols = request.headers().get_all(header::SEC_WEBSOCKET_PROTOCOL).iter().filter_map(|v| v.to_str().ok());
    let in_protocol = if request.headers().contains_key(header::UPGRADE) {
        shared::api::bearer_of_protocols(protocols).map_err(ApiError::unauthorized)?
    } else {
        None
    };
    if let Some(in_protocol) = &in_protocol {
        let others = axum::http::HeaderValue::from_str(&in_protocol.others.join(", "))
            .map_err(|_| ApiError::unauthorized("the WebSocket subprotocols are not a valid header value"))?;
        request.headers_mut().insert(header::SEC_WEBSOCKET_PROTOCOL, others);
    }
    let Some(header) = request.headers().get(header::AUTHORIZATION) else {
        return Ok(in_protocol.map(|bearer| bearer.token));
    };
    let header = header.to_str().unwrap_or("");
    // The scheme is case-insensitive (RFC 9110 §11.1): `bearer` is `Bearer`.
    let token = header.split_once(' ').filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer")).map(|(_, token)| token.trim());
    match token {
        Some(token) => Ok(Some(token.to_string())),
        None => Err(ApiError::unauthorized("the Authorization header must be \"Bearer <token>\"")),
    }
}

/// Authenticates the bearer token, applies each role's coarse rules and leaves the
/// [`Principal`] in the request's extensions for the handlers' finer checks.
pub async fn authenticate(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let tokens = &state.config.tokens;
    let path = match decoded_path(request.uri().path()) {
        Ok(path) => path,
        Err(refusal) => return refusal.into_response(),
    };
    let (principal, bearer) = if tokens.is_empty() || is_public(&path) {
        (Principal::anonymous(), None)
    } else {
        let token = match bearer_token(&mut request) {
            Ok(Some(token)) => token,
            Ok(None) => {
                return ApiError::unauthorized("this server requires a bearer token: send Authorization: Bearer <token>").into_response();
            }
            Err(refusal) => return refusal.into_response(),
        };
        match tokens.lookup(&token) {
            Some((bearer, p)) => (p.clone(), Some(bearer)),
            None => return ApiError::unauthorized("the bearer token is not known to this server").into_response(),
        }
    };
    if let Err(refusal) = authorize(&state, &principal, request.method(), &path) {
        // A session refused is audited as one that ran, as Kubernetes audits denied requests.
        if let Some(session) = session_of(&path) {
            tracing::info!(target: "audit", "{} {} pod {}: refused: {}", principal.audited(), session.kind, session.pod(), refusal.message);
        }
        return refusal.into_response();
    }
    request.extensions_mut().insert(principal);
    if let Some(bearer) = bearer {
        request.extensions_mut().insert(bearer);
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_may_attempt_only_its_agents_writes() {
        assert!(node_may_attempt(&Method::PUT, "/api/v1/namespaces/default/pods/a/status"));
        assert!(node_may_attempt(&Method::DELETE, "/api/v1/namespaces/default/pods/a"), "the agent confirms a pod's deletion");
        assert!(!node_may_attempt(&Method::DELETE, "/api/v1/namespaces/default/deployments/a"));
        assert!(!node_may_attempt(&Method::DELETE, "/api/v1/nodes/n1"));
        assert!(node_may_attempt(&Method::PUT, "/api/v1/leases/n1"), "the handler checks which lease");
        assert!(!node_may_attempt(&Method::DELETE, "/api/v1/leases/n1"));
        assert!(!node_may_attempt(&Method::POST, "/api/v1/namespaces/default/pods"));
    }

    #[test]
    fn sessions_are_named_in_either_dialect_and_nothing_else_is() {
        for path in [
            "/api/v1/namespaces/default/pods/web/exec",
            "/k8s/api/v1/namespaces/a/pods/b/attach",
            "/api/v1/namespaces/a/pods/b/portforward",
        ] {
            assert!(session_of(path).is_some(), "{path}");
        }
        for path in ["/api/v1/namespaces/default/pods/exec", "/k8s/api/v1/namespaces/a/services/b/exec", "/api/v1/pods/b/exec"] {
            assert!(session_of(path).is_none(), "{path}");
        }
    }

    #[test]
    fn the_roles_judge_the_path_the_router_decodes() {
        assert_eq!(decoded_path("/k8s/api/v1/namespaces/default/%73ecrets/db").unwrap(), "/k8s/api/v1/namespaces/default/secrets/db");
        assert_eq!(decoded_path("/api/v1/secret%73").unwrap(), "/api/v1/secrets");
        assert_eq!(decoded_path("/api/v1/pods/a%20b").unwrap(), "/api/v1/pods/a b");
        assert!(decoded_path("/api/v1/namespaces/a%2Fb/pods").is_err(), "an encoded slash would shift the segments");
        assert!(decoded_path("/api/v1/pods/%FF").is_err(), "not UTF-8");
        let viewer = Principal::new(Role::Viewer, None);
        let path = decoded_path("/k8s/api/v1/namespaces/default/%73ecrets/db").unwrap();
        assert!(role_allows(&viewer, &Method::GET, &path).is_err());
    }

    #[test]
    fn secrets_are_named_in_either_dialect_and_nothing_else_is() {
        for path in ["/api/v1/secrets", "/api/v1/namespaces/default/secrets/db", "/k8s/api/v1/namespaces/a/secrets", "/k8s/api/v1/secrets/"]
        {
            assert!(names_secrets(path), "{path}");
        }
        for path in ["/api/v1/configmaps", "/api/v1/namespaces/secrets/pods", "/api/v1/namespaces/default/pods/secrets"] {
            assert!(!names_secrets(path), "{path}");
        }
    }
}
