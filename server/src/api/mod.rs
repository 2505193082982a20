//! The HTTP API: [`app`] builds the whole router (routes, auth, the guard against web pages,
//! metrics, the 1 MiB body limit and the one JSON error shape for every failure, including
//! unknown routes, rejected extractors and panics). Handlers live in one file per resource
//! family.

mod leases;
pub(crate) mod nodes;
pub(crate) mod objects;
pub mod openapi;
pub(crate) mod pods;
pub(crate) mod watch;
pub mod web_pages;

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use axum::{Json, Router};
use serde::Serialize;
use serde::de::DeserializeOwned;
use shared::api::{Info, paths};
use shared::model::{Deployment, Event, Kind, Lease, Namespace, Node, Pod, Service, Time};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::scheduler::SchedulerHandle;
use crate::store::Store;

/// The largest request body the API reads.
pub const BODY_LIMIT: usize = 1024 * 1024;
/// The longest a handler may take to start its response.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// What every handler shares: one reference-counted [`Shared`], cheap to clone per request.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> Self {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

pub struct Shared {
    pub store: Arc<dyn Store>,
    pub config: Arc<Config>,
    pub metrics: Arc<Metrics>,
    pub scheduler: SchedulerHandle,
    pub started_at: Time,
    pub shutdown: CancellationToken,
    /// For proxying logs from node agents.
    pub http: reqwest::Client,
    /// What to sign the requests proxied to each node's agent with.
    pub agent_keys: crate::auth::AgentKeys,
}

/// A route and the methods it answers, as registered: the OpenAPI test compares the
/// document against this table.
pub type RouteTable = Vec<(String, Vec<Method>)>;

struct Routes {
    router: Router<AppState>,
    table: RouteTable,
}

impl Routes {
    fn add(mut self, path: &str, methods: &[Method], handler: MethodRouter<AppState>) -> Self {
        self.router = self.router.route(path, handler);
        self.table.push((path.to_string(), methods.to_vec()));
        self
    }

    /// The five routes of a namespaced kind: list across namespaces (and create from the
    /// body's namespace), list/create in a namespace, get/replace/delete one.
    fn namespaced<R: crate::resources::Resource>(self) -> Self {
        let plural = R::KIND.plural();
        self.add(
            &format!("/api/v1/{plural}"),
            &[Method::GET, Method::POST],
            get(objects::list_all::<R>).post(objects::create_from_body::<R>),
        )
        .add(
            &format!("/api/v1/namespaces/{{namespace}}/{plural}"),
            &[Method::GET, Method::POST],
            get(objects::list_namespaced::<R>).post(objects::create_namespaced::<R>),
        )
        .add(
            &format!("/api/v1/namespaces/{{namespace}}/{plural}/{{name}}"),
            &[Method::GET, Method::PUT, Method::DELETE],
            get(objects::get_namespaced::<R>).put(objects::replace_namespaced::<R>).delete(objects::delete_namespaced::<R>),
        )
    }

    fn cluster_scoped<R: crate::resources::Resource>(self) -> Self {
        let plural = R::KIND.plural();
        self.add(
            &format!("/api/v1/{plural}"),
            &[Method::GET, Method::POST],
            get(objects::list_all::<R>).post(objects::create_from_body::<R>),
        )
        .add(
            &format!("/api/v1/{plural}/{{name}}"),
            &[Method::GET, Method::PUT, Method::DELETE],
            get(objects::get_cluster::<R>).put(objects::replace_cluster::<R>).delete(objects::delete_cluster::<R>),
        )
    }
}

fn routes() -> Routes {
    Routes { router: Router::new(), table: Vec::new() }
        .add(paths::HEALTHZ, &[Method::GET], get(healthz))
        .add(paths::READYZ, &[Method::GET], get(readyz))
        .add(paths::METRICS, &[Method::GET], get(metrics))
        .add(paths::OPENAPI, &[Method::GET], get(openapi::serve))
        .add(paths::INFO, &[Method::GET], get(info))
        .namespaced::<Pod>()
        .namespaced::<Deployment>()
        .namespaced::<Service>()
        .namespaced::<Event>()
        .cluster_scoped::<Node>()
        .cluster_scoped::<Namespace>()
        // Leases are read like any kind; only registration and renewal write them.
        .add(&paths::collection(Kind::Lease, None), &[Method::GET], get(objects::list_all::<Lease>))
        .add("/api/v1/leases/{name}", &[Method::GET, Method::PUT], get(objects::get_cluster::<Lease>).put(leases::renew))
        .add("/api/v1/namespaces/{namespace}/pods/{name}/binding", &[Method::POST], post(pods::bind))
        .add("/api/v1/namespaces/{namespace}/pods/{name}/status", &[Method::GET, Method::PUT], get(pods::get_status).put(pods::put_status))
        .add("/api/v1/namespaces/{namespace}/pods/{name}/scheduling", &[Method::GET], get(pods::scheduling))
        .add("/api/v1/namespaces/{namespace}/pods/{name}/log", &[Method::GET], get(pods::log))
        .add(
            "/api/v1/namespaces/{namespace}/deployments/{name}/scale",
            &[Method::GET, Method::PUT],
            get(objects::get_scale).put(objects::put_scale),
        )
        .add("/api/v1/nodes/{name}/heartbeat", &[Method::POST], post(nodes::heartbeat))
        .add("/api/v1/nodes/{name}/status", &[Method::GET, Method::PUT], get(nodes::get_status).put(nodes::put_status))
        .add("/api/v1/nodes/{name}/cordon", &[Method::POST], post(nodes::cordon))
        .add("/api/v1/nodes/{name}/uncordon", &[Method::POST], post(nodes::uncordon))
}

/// Every route the API serves, with its methods.
pub fn route_table() -> RouteTable {
    routes().table
}

/// The whole API.
pub fn app(state: AppState) -> Router {
    routes()
        .router
        .merge(crate::k8s::router())
        .fallback(dashboard_or_unknown)
        .layer(middleware::from_fn_with_state(state.clone(), crate::auth::authenticate))
        .layer(middleware::from_fn_with_state(state.clone(), web_pages::refuse_web_pages))
        .layer(middleware::from_fn(refuse_targets_without_path))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        // Until the response starts: watch and log streams run on after it.
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, REQUEST_TIMEOUT))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panicked))
        .layer(middleware::from_fn_with_state(state.clone(), crate::metrics::track))
        .layer(middleware::from_fn(json_errors))
        .layer(middleware::from_fn(crate::k8s::statuses))
        .layer(compression())
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
        .and(NotForContentType::const_new(crate::k8s::WATCH_CONTENT_TYPE));
    tower_http::compression::CompressionLayer::new().compress_when(predicate)
}

/// A handler that panicked: a 500 in the one error shape instead of a closed connection.
fn panicked(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let what = panic.downcast_ref::<String>().map(String::as_str).or_else(|| panic.downcast_ref::<&str>().copied());
    ApiError::internal(format!("a handler panicked: {}", what.unwrap_or("(no message)"))).into_response()
}

fn unknown_route(method: &Method, uri: &Uri) -> ApiError {
    ApiError::not_found(format!("no route for {method} {}: see /api/openapi.json for the routes this server has", uri.path()))
}

/// Everything outside the API is the dashboard's files: `/` is its one page (its routes live
/// in the URL's fragment, which never reaches the server) and the rest are what that page
/// loads. Any other path is a 404 in the JSON shape, not the page: a client that asks the
/// wrong path (`/apis` for `/k8s/apis`) reads that it is wrong.
async fn dashboard_or_unknown(State(state): State<AppState>, request: Request) -> Response {
    use tower::ServiceExt as _;
    use tower_http::services::ServeDir;
    let path = request.uri().path();
    let is_api = path == "/api" || path.starts_with("/api/") || path == paths::METRICS || crate::k8s::owns(path);
    if is_api || !matches!(*request.method(), Method::GET | Method::HEAD) {
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
    // No other site may frame the dashboard and trick a click into it (clickjacking).
    let headers = response.headers_mut();
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("frame-ancestors 'none'"));
    response
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
    let mut error = ApiError::from_status(status, &text);
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

/// A request body read whole, within [`BODY_LIMIT`]; too large is 413 in the JSON shape.
pub struct BodyBytes(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for BodyBytes {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let media = web_pages::media_type(request.headers());
        match Bytes::from_request(request, state).await {
            // A form or text body is what a web page can post anywhere without asking.
            Ok(bytes) if !bytes.is_empty() && media.as_deref() != Some(web_pages::JSON) => {
                Err(web_pages::unsupported_media_type(media.as_deref().unwrap_or("no Content-Type")))
            }
            Ok(bytes) => Ok(BodyBytes(bytes)),
            Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(ApiError::too_large()),
            Err(rejection) => Err(ApiError::bad_request(format!("cannot read the request body: {}", rejection.body_text()))),
        }
    }
}

/// Parses a JSON body into `T`, with the field's path, line and column on error, refusing
/// every field `T` does not hold (a typo, or a field at the wrong level, which would
/// otherwise be dropped without a word) as kube-apiserver's strict field validation does.
pub fn parse_json<T: DeserializeOwned + Serialize + PartialEq>(bytes: &[u8], what: &str) -> Result<T, ApiError> {
    let value = read_json(bytes, what)?;
    refuse_unknown_fields(bytes, value, what)
}

/// `typed`, read from `bytes`, unless `bytes` set fields `T` does not hold: a 400 naming each.
pub fn refuse_unknown_fields<T: DeserializeOwned + Serialize + PartialEq>(bytes: &[u8], typed: T, what: &str) -> Result<T, ApiError> {
    let sent: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| ApiError::bad_request(format!("the body is not JSON: {e}")))?;
    let unknown = shared::strict::unknown_fields(&sent, &typed);
    if unknown.is_empty() {
        return Ok(typed);
    }
    let mut error = ApiError::bad_request(format!("the body is not a valid {what}: {}", shared::strict::name_unknown(&unknown)));
    error.details = unknown
        .into_iter()
        .map(|field| shared::api::FieldError {
            field: field.path,
            message: format!("unknown field: a {what} has no such field (a typo, or at the wrong level?)"),
        })
        .collect();
    Err(error)
}

/// Parses a JSON body into `T`, with the field's path, line and column on error; fields `T`
/// does not hold are ignored.
pub fn read_json<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, ApiError> {
    let mut body = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut body).map_err(|e| {
        let field = match e.path().to_string() {
            path if path == "." => String::new(),
            path => format!("{path}: "),
        };
        let e = e.into_inner();
        ApiError::bad_request(format!(
            "the body is not a valid {what}: {field}{} at line {}, column {}",
            strip_position(&e),
            e.line(),
            e.column()
        ))
    })?;
    // Anything after the one value (a second object, stray braces) makes the body invalid.
    body.end().map_err(|e| {
        ApiError::bad_request(format!("the body is not a valid {what}: {} at line {}, column {}", strip_position(&e), e.line(), e.column()))
    })?;
    Ok(value)
}

/// serde_json's message without its own trailing " at line L column C".
fn strip_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// Query parameters whose parse errors are 400s in the JSON shape.
pub struct Params<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| Params(v))
            .map_err(|e| ApiError::bad_request(format!("invalid query parameters: {}", e.body_text())))
    }
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<AppState>) -> Response {
    if state.shutdown.is_cancelled() {
        return ApiError::unavailable("the server is shutting down").into_response();
    }
    "ok".into_response()
}

async fn info(State(state): State<AppState>) -> Json<Info> {
    Json(Info {
        name: "shepherd".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        started_at: Some(state.started_at),
        resource_version: state.store.revision(),
        store: state.store.backend().into(),
        auth_required: !state.config.tokens.is_empty(),
        nodes: state.store.count(Kind::Node),
        pods: state.store.count(Kind::Pod),
        scheduler_profile: state.config.scheduler_profile.clone(),
        node_monitor_grace_ms: u64::try_from(state.config.node_monitor_grace.as_millis()).unwrap_or(u64::MAX),
        cluster_id: state
            .store
            .get(&crate::store::Key::new(Kind::Namespace, "", shared::model::DEFAULT_NAMESPACE))
            .map(|namespace| namespace.metadata().uid.clone())
            .unwrap_or_default(),
    })
}

async fn metrics(State(state): State<AppState>) -> Response {
    let store = &state.store;
    let mut gauges = vec![("shepherd_store_revision", "The store's current revision.", store.revision())];
    let counts: Vec<(String, u64)> =
        Kind::ALL.iter().map(|k| (format!("shepherd_objects_{}", k.plural()), store.count(*k) as u64)).collect();
    for (name, count) in &counts {
        gauges.push((name.as_str(), "Objects of this kind in the store.", *count));
    }
    let text = state.metrics.render(&gauges);
    let mut response = Body::from(text).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    response
}
