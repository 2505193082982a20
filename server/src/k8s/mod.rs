//! The Kubernetes-compatible API under `/k8s`, so that kubectl and client libraries drive
//! Shepherd. It is a translation in front of the native API's own reads and writes
//! (`api::objects`, `ops`): the same store objects, validation and rules. Layout:
//! - [`kinds`]: the one table of what it serves (group, version, kind, plural, verbs);
//! - [`discovery`]: `/version`, the discovery documents and OpenAPI, read from that table, with
//!   [`schemas`]: the OpenAPI schemas of the served kinds, refused fields marked;
//! - [`objects`]: the objects' routes, list paging and field selectors, and the verbs;
//! - [`convert`]: Kubernetes' shapes and the rules for refusing fields; [`patch`]: PATCH
//!   bodies; [`managed`]: server-side apply and `managedFields`, over [`fields`]' field
//!   sets; [`protobuf`]: the protobuf bodies kubectl's typed commands send;
//! - [`table`]: Table answers; [`watch`]: watch lines; [`status`]: every failure as a `Status`;
//! - [`access`]: `kubectl auth can-i`, answered by the role rules every request passes;
//! - [`metrics`]: `metrics.k8s.io`, the usage `kubectl top` reads, asked of the agents.

pub mod access;
mod convert;
pub mod discovery;
mod fields;
mod kinds;
mod managed;
pub mod metrics;
mod objects;
mod patch;
mod protobuf;
mod schemas;
mod status;
mod table;
mod watch;

pub use convert::from_manifest;
pub use watch::WATCH_CONTENT_TYPE;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use shared::api::ApiErrorBody;

use crate::error::ApiError;
use crate::state::AppState;
use status::{Status, kubernetes_reason};

/// The prefix every route of this API lives under; kubectl takes it as part of the server URL.
pub const PREFIX: &str = "/k8s";

/// Whether a request path belongs to this API.
pub fn owns(path: &str) -> bool {
    path == PREFIX || path.starts_with("/k8s/")
}

pub fn router() -> Router<AppState> {
    use crate::api::sessions;
    use axum::routing::get;
    // Sessions take the whole request, to upgrade it: routes of their own, before the
    // object routes' subresource path.
    Router::new()
        .merge(discovery::router())
        .merge(objects::router())
        .merge(access::router())
        .merge(metrics::router())
        .route("/k8s/api/v1/namespaces/{namespace}/pods/{name}/exec", get(sessions::exec).post(sessions::exec))
        .route("/k8s/api/v1/namespaces/{namespace}/pods/{name}/attach", get(sessions::attach).post(sessions::attach))
        .route("/k8s/api/v1/namespaces/{namespace}/pods/{name}/portforward", get(sessions::port_forward).post(sessions::port_forward))
}

/// Answers every failure under `/k8s` as a `Status`, also those the shared layers produce
/// in the native shape (401 and 403 from auth, the guard against web pages, 404 for no
/// route, 405, 413): kubectl reads only `Status`.
pub async fn statuses(request: Request, next: Next) -> Response {
    if !owns(request.uri().path()) {
        return next.run(request).await;
    }
    let asked = format!("{} {}", request.method(), request.uri().path());
    let response = next.run(request).await;
    let code = response.status();
    if !(code.is_client_error() || code.is_server_error()) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 1024 * 1024).await.unwrap_or_default();
    if let Ok(native) = serde_json::from_slice::<ApiErrorBody>(&bytes) {
        let e = native.error;
        let causes = e.details.into_iter().map(|f| (f, "FieldValueInvalid")).collect();
        let mut status = Status::new(code, kubernetes_reason(code, &e.reason), e.message).with_causes(causes);
        if code == StatusCode::NOT_FOUND && status.message.starts_with("no route for") {
            status.message =
                format!("the server could not find the requested resource ({asked}); /k8s/api and /k8s/apis list what it serves");
        }
        let mut rebuilt = status.into_response();
        if let Some(allow) = parts.headers.get(header::ALLOW) {
            rebuilt.headers_mut().insert(header::ALLOW, allow.clone());
        }
        if let Some(challenge) = parts.headers.get(header::WWW_AUTHENTICATE) {
            rebuilt.headers_mut().insert(header::WWW_AUTHENTICATE, challenge.clone());
        }
        return rebuilt;
    }
    if serde_json::from_slice::<meta::Status>(&bytes).is_ok_and(|status| status.code.is_some()) {
        let mut response = Response::from_parts(parts, axum::body::Body::from(bytes));
        response.headers_mut().entry(header::CONTENT_TYPE).or_insert(HeaderValue::from_static("application/json"));
        return response;
    }
    // A layer's plain-text answer (the body limit's, a timeout's): the same words, as a Status.
    let text = String::from_utf8_lossy(&bytes).trim().to_string();
    let reason = match code {
        StatusCode::PAYLOAD_TOO_LARGE => "RequestEntityTooLarge",
        StatusCode::REQUEST_TIMEOUT | StatusCode::GATEWAY_TIMEOUT => "Timeout",
        c if c.is_server_error() => "InternalError",
        _ => "BadRequest",
    };
    let message = if code == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::too_large(crate::config::BODY_LIMIT).message
    } else if text.is_empty() {
        code.canonical_reason().unwrap_or("failed").to_string()
    } else {
        text
    };
    Status::new(code, reason, message).into_response()
}
