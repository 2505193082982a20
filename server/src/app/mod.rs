//! The whole HTTP app, above both API dialects: [`app`] mounts the native routes (`api`)
//! beside the Kubernetes ones (`k8s`) and the dashboard's files, and wraps them in the layers
//! every request passes: the guard against web pages ([`web_pages`]), authentication
//! ([`authenticate`]), metrics, the body limit, timeouts, `nosniff`, and the one JSON error shape
//! for every failure (unknown routes, rejected extractors, panics).

mod authenticate;
pub use authenticate::{authorize, role_allows};
mod dashboard;
pub mod web_pages;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};

use crate::config::BODY_LIMIT;
use crate::error::ApiError;
use crate::state::AppState;
use crate::{api, k8s};

/// The longest a handler may take to start its response.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The whole app: both API dialects, the dashboard, and every layer a request passes.
pub fn app(state: AppState) -> Router {
    api::router()
        .merge(k8s::router())
        .fallback(dashboard::serve)
        .layer(middleware::from_fn_with_state(state.clone(), authenticate::authenticate))
        .layer(middleware::from_fn_with_state(state.clone(), web_pages::refuse_web_pages))
        .layer(middleware::from_fn(refuse_targets_without_path))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(middleware::from_fn_with_state(state.config.body_read_timeout, bound_body))
        // Until the response starts: watch and log streams run on after it.
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, REQUEST_TIMEOUT))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panicked))
        .layer(middleware::from_fn_with_state(state.metrics.clone(), crate::metrics::track))
        .layer(middleware::from_fn(json_errors))
        .layer(middleware::from_fn(k8s::statuses))
        .layer(compression())
        .layer(middleware::map_response(nosniff))
        .with_state(state)
}

/// Answers at least this large are gzipped when the client accepts it.
const COMPRESS_ABOVE: u64 = 8 * 1024;

/// gzip for a large answer a client accepts it for (lists of thousands of objects shrink
/// about tenfold), except streams: a watch (SSE, or Kubernetes' JSON lines) or a followed
/// log must reach the client line by line, not when a compressor's buffer fills. Small answers, the bulk of an
/// agent's calls, stay plain: compressing them saves nothing, and a client that decodes a
/// gzipped answer may not reuse its connection.
fn compression() -> tower_http::compression::CompressionLayer<impl tower_http::compression::Predicate> {
    use tower_http::compression::predicate::{NotForContentType, Predicate as _, SizeAbove};
    let predicate = SizeAbove::new(COMPRESS_ABOVE)
        .and(NotForContentType::GRPC)
        .and(NotForContentType::IMAGES)
        .and(NotForContentType::SSE)
        .and(NotForContentType::const_new("text/plain"))
        .and(NotForContentType::const_new(k8s::WATCH_CONTENT_TYPE));
    tower_http::compression::CompressionLayer::new().compress_when(predicate)
}

/// A request body not whole within `limit` of the request (a slowloris'
/// `Content-Length: 1000000` and a few bytes, or a trickle of one byte at a time) fails its
/// reader and gets a 408. Only the request side is bounded: a watch or a followed log
/// answers for as long as it likes.
async fn bound_body(State(limit): State<Duration>, request: Request, next: Next) -> Response {
    use http_body_util::BodyExt as _;
    let timed_out = Arc::new(AtomicBool::new(false));
    let seen = timed_out.clone();
    let (parts, body) = request.into_parts();
    let body = tower_http::timeout::DeadlineBody::new(limit, body).map_err(move |e| {
        if e.is::<tower_http::timeout::TimeoutError>() {
            seen.store(true, Ordering::Relaxed);
        }
        e
    });
    let response = next.run(Request::from_parts(parts, Body::new(body))).await;
    if timed_out.load(Ordering::Relaxed) {
        let message = format!("the request body did not all come within {} s", limit.as_secs_f64());
        return ApiError::from_status(StatusCode::REQUEST_TIMEOUT, &message).into_response();
    }
    response
}

/// Every answer (API, logs, dashboard files) is read as the type it names: a browser must not
/// guess a script or a page out of a log line or a JSON error.
async fn nosniff(mut response: Response) -> Response {
    response.headers_mut().insert(header::X_CONTENT_TYPE_OPTIONS, header::HeaderValue::from_static("nosniff"));
    response
}

/// A handler that panicked: a 500 in the one error shape instead of a closed connection.
fn panicked(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let what = panic.downcast_ref::<String>().map(String::as_str).or_else(|| panic.downcast_ref::<&str>().copied());
    ApiError::internal(format!("a handler panicked: {}", what.unwrap_or("(no message)"))).into_response()
}

/// Refuses every request target that is not a path (RFC 9112, section 3.2): the asterisk form
/// (`GET * HTTP/1.1`), with which only OPTIONS may ask about the server as a whole, and the
/// authority form (`GET 127.0.0.1:9876 HTTP/1.1`), which is for CONNECT to a proxy, and this
/// server is none; the dashboard's file server failed on it with an ERROR in the log. The
/// origin form (`/api/v1/pods`) and the absolute form (`http://host/api/v1/pods`) pass.
async fn refuse_targets_without_path(request: Request, next: Next) -> Response {
    let (method, uri) = (request.method(), request.uri());
    if uri.path() == "*" && method != Method::OPTIONS {
        return ApiError::bad_request(format!("the request target * is only for OPTIONS; {method} needs a path such as /api/v1/pods"))
            .into_response();
    }
    if uri.scheme().is_none()
        && let Some(authority) = uri.authority()
    {
        return ApiError::bad_request(format!(
            "the request target {authority} is only a host and port, which a proxy answers and this server is not one; \
             {method} needs a path such as /api/v1/pods"
        ))
        .into_response();
    }
    next.run(request).await
}

/// Turns any error response that is not already JSON (405 from the router, a rejection
/// a layer produced) into the one error shape.
async fn json_errors(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let response = next.run(request).await;
    let status = response.status();
    let is_json =
        response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024).await.map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let mut error = match status {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::too_large(BODY_LIMIT),
        _ => ApiError::from_status(status, &text),
    };
    if status == StatusCode::METHOD_NOT_ALLOWED {
        // The router adds the Allow header outside this layer, so it is not always here yet.
        error.message = match parts.headers.get(header::ALLOW).and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty()) {
            Some(allowed) => format!("{method} is not allowed on {path}; this route answers {allowed}"),
            None => format!("{method} is not allowed on {path}; the Allow header and /api/openapi.json list what it answers"),
        };
    }
    let mut rebuilt = error.into_response();
    if let Some(allow) = parts.headers.get(header::ALLOW) {
        rebuilt.headers_mut().insert(header::ALLOW, allow.clone());
    }
    rebuilt
}
