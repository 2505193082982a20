//! The dashboard's files, served for every path outside the APIs, and the JSON 404 for
//! an unknown path inside them.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use shared::api::paths;

use crate::error::ApiError;
use crate::k8s;
use crate::state::AppState;

/// Whether a path belongs to one of the APIs rather than to the dashboard.
pub(super) fn is_api(path: &str) -> bool {
    path == "/api" || path.starts_with("/api/") || path == paths::METRICS || k8s::owns(path)
}

fn unknown_route(method: &Method, uri: &Uri) -> ApiError {
    ApiError::not_found(format!("no route for {method} {}: see /api/openapi.json for the routes this server has", uri.path()))
}

/// Everything outside the API is the dashboard's files: `/` is its one page (its routes live
/// in the URL's fragment, which never reaches the server) and the rest are what that page
/// loads. Any other path is a 404 in the JSON shape, not the page: a client that asks the
/// wrong path (`/apis` for `/k8s/apis`) reads that it is wrong.
pub(super) async fn serve(State(state): State<AppState>, request: Request) -> Response {
    use tower::ServiceExt as _;
    use tower_http::services::ServeDir;
    let path = request.uri().path();
    if is_api(path) || !matches!(*request.method(), Method::GET | Method::HEAD) {
        return unknown_route(request.method(), request.uri()).into_response();
    }
    let Some(dir) = state.config.dashboard_dir.as_ref().filter(|dir| dir.join("index.html").is_file()) else {
        return ApiError::not_found(
            "the dashboard is not built: run `cargo xtask frontend` and start shepherd with --dashboard-dir pointing at its dist/ folder",
        )
        .into_response();
    };
    let (method, uri) = (request.method().clone(), request.uri().clone());
    let mut response = match ServeDir::new(dir).oneshot(request).await {
        Ok(response) => response.map(Body::new),
        Err(never) => match never {},
    };
    if response.status() == StatusCode::NOT_FOUND {
        return unknown_route(&method, &uri).into_response();
    }
    // No other site may frame the dashboard and trick a click into it (clickjacking);
    // `X-Content-Type-Options: nosniff` is set on every answer by the app's layers.
    let headers = response.headers_mut();
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("frame-ancestors 'none'"));
    response
}
