//! The agent's own small HTTP API, like the kubelet's: `GET /healthz` and
//! `GET /logs/{namespace}/{pod}?container=&tail=&follow=`, which streams a container's output
//! as plain text. The API server's pod log endpoint proxies to it.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt;
use serde::Deserialize;
use shared::api::{ApiErrorBody, ApiErrorStatus};
use tokio_util::sync::CancellationToken;

use crate::runtime::{ContainerRuntime, LABEL_CONTAINER, LABEL_NAMESPACE, LABEL_NODE, LABEL_POD};

#[derive(Clone)]
pub struct AppState {
    pub node_name: String,
    pub runtime: Arc<dyn ContainerRuntime>,
    /// Ends followed log streams, so that a graceful shutdown does not wait for them.
    pub shutdown: CancellationToken,
}

/// An error answer in the API's JSON shape.
#[derive(Debug)]
pub struct HttpError {
    status: StatusCode,
    reason: &'static str,
    message: String,
}

impl HttpError {
    fn new(status: StatusCode, reason: &'static str, message: String) -> Self {
        HttpError { status, reason, message }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let body = ApiErrorBody {
            error: ApiErrorStatus { code: self.status.as_u16(), reason: self.reason.to_string(), message: self.message, details: vec![] },
        };
        (self.status, axum::Json(body)).into_response()
    }
}

#[derive(Debug, Deserialize)]
pub struct LogQuery {
    #[serde(default)]
    container: String,
    tail: Option<String>,
    #[serde(default)]
    follow: Option<String>,
}

fn parse_flag(name: &str, value: Option<&str>) -> Result<bool, HttpError> {
    match value {
        None | Some("") | Some("false") | Some("0") => Ok(false),
        Some("true") | Some("1") => Ok(true),
        Some(other) => Err(HttpError::new(StatusCode::BAD_REQUEST, "BadRequest", format!("{name} must be true or false, got {other:?}"))),
    }
}

async fn logs(
    State(state): State<AppState>,
    Path((namespace, pod)): Path<(String, String)>,
    Query(query): Query<LogQuery>,
) -> Result<Response, HttpError> {
    let follow = parse_flag("follow", query.follow.as_deref())?;
    let tail =
        match query.tail.as_deref() {
            None | Some("") | Some("-1") | Some("all") => None,
            Some(text) => Some(text.parse::<u64>().map_err(|_| {
                HttpError::new(StatusCode::BAD_REQUEST, "BadRequest", format!("tail must be a number of lines, got {text:?}"))
            })?),
        };
    let containers = state
        .runtime
        .list(&[(LABEL_NODE, state.node_name.as_str()), (LABEL_NAMESPACE, namespace.as_str()), (LABEL_POD, pod.as_str())])
        .await
        .map_err(|e| HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", e.to_string()))?;
    if containers.is_empty() {
        return Err(HttpError::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("pod {namespace}/{pod} has no containers on node {}", state.node_name),
        ));
    }
    let mut names: Vec<&str> = containers.iter().map(|c| c.label(LABEL_CONTAINER)).collect();
    names.sort_unstable();
    let chosen = if query.container.is_empty() {
        match containers.as_slice() {
            [only] => only,
            _ => {
                return Err(HttpError::new(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    format!("pod {namespace}/{pod} has several containers; choose one with container= ({})", names.join(", ")),
                ));
            }
        }
    } else {
        containers.iter().find(|c| c.label(LABEL_CONTAINER) == query.container).ok_or_else(|| {
            HttpError::new(
                StatusCode::NOT_FOUND,
                "NotFound",
                format!("pod {namespace}/{pod} has no container {:?} (it has {})", query.container, names.join(", ")),
            )
        })?
    };
    let stream = state
        .runtime
        .logs(&chosen.id, tail, follow)
        .map(|chunk| chunk.map_err(std::io::Error::other))
        .take_until(state.shutdown.clone().cancelled_owned());
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], Body::from_stream(stream)).into_response())
}

async fn healthz() -> &'static str {
    "ok"
}

/// The whole agent API.
pub fn app(state: AppState) -> Router {
    Router::new().route("/healthz", get(healthz)).route("/logs/{namespace}/{pod}", get(logs)).with_state(state)
}

/// Serves the agent API on `listener` until `shutdown`.
pub async fn run(listener: tokio::net::TcpListener, state: AppState) -> std::io::Result<()> {
    let shutdown = state.shutdown.clone();
    axum::serve(listener, app(state)).with_graceful_shutdown(async move { shutdown.cancelled().await }).await
}
