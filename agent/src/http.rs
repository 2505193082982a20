//! The agent's own small HTTP API, like the kubelet's: `GET /healthz`,
//! `GET /logs/{namespace}/{pod}?container=&tail=&follow=&timestamps=&since=&previous=` (`since`
//! in Unix seconds; `previous`: the instance before a restart), which streams a container's output
//! as plain text (the API server's pod log endpoint proxies to it), `GET /exec/{namespace}/{pod}`
//! and `GET /attach/{namespace}/{pod}`, WebSocket sessions ([`crate::remote_command`]) that the
//! API server's `pods/exec` and `pods/attach` proxy to, `GET /portforward/{namespace}/{pod}`, a
//! WebSocket that forwards connections to the pod's ports ([`crate::port_forward`]), and
//! `GET /sandboxes`, the warm pool's size and how many sandboxes in it are ready, and
//! `GET /stats`, what the node's running pods use ([`crate::usage`]). A fleet
//! serves each of its nodes' APIs under `/nodes/{node}` on one address ([`fleet_app`]).
//!
//! An agent with a token serves logs, sessions, port-forward, sandboxes and stats only to requests the API server signed
//! with it (`shepherd_client::agent_auth`); one without listens on loopback only and serves
//! them only to requests for its own loopback address with no Origin ([`Access`]).
//! `/healthz` stays open, as the kubelet's does.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt;
use serde::Deserialize;
use shared::api::{ApiErrorBody, ApiErrorStatus};
use tokio_util::sync::CancellationToken;

use crate::port_forward::{self, Target};
use crate::remote_command::Session;
use crate::runtime::{ContainerInfo, ContainerRuntime, LABEL_CONTAINER, LABEL_NAMESPACE, LABEL_NODE, LABEL_POD, LABEL_POD_UID, RunState};
use crate::sandbox::Sandboxes;

/// Which requests the agent API answers, `/healthz` aside.
#[derive(Clone)]
pub enum Access {
    /// Those the API server signed with this token.
    Signed(Arc<str>),
    /// An agent without a token, which listens on loopback only: those for its own loopback
    /// address and `port` that carry no Origin. Any web page the user opens can reach such
    /// a port, and one that points its own name at 127.0.0.1 (DNS rebinding) sends that name
    /// as the Host; the API server sends no Origin.
    Loopback { port: u16 },
}

impl Access {
    /// The access of an agent API with `token` listening on `local`.
    pub fn new(token: Option<&str>, local: SocketAddr) -> Access {
        match token {
            Some(token) => Access::Signed(Arc::from(token)),
            None => Access::Loopback { port: local.port() },
        }
    }
}

#[derive(Clone)]
pub struct AppState {
    pub node_name: String,
    pub runtime: Arc<dyn ContainerRuntime>,
    /// The node's sandboxes, when its runtime has them.
    pub sandboxes: Option<Arc<Sandboxes>>,
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
    timestamps: Option<String>,
    since: Option<String>,
    previous: Option<String>,
}

async fn logs(
    State(state): State<AppState>,
    Path((namespace, pod)): Path<(String, String)>,
    Query(query): Query<LogQuery>,
) -> Result<Response, HttpError> {
    logs_of(&state, namespace, pod, query).await
}

async fn logs_of(state: &AppState, namespace: String, pod: String, query: LogQuery) -> Result<Response, HttpError> {
    let flag = |name: &str, value: &Option<String>| {
        shared::parse::flag(value.as_deref().unwrap_or_default())
            .map_err(|e| HttpError::new(StatusCode::BAD_REQUEST, "BadRequest", format!("{name}: {e}")))
    };
    let seconds = |name: &str, value: &Option<String>| match value.as_deref() {
        None | Some("") => Ok(None),
        Some(text) => text.parse::<i64>().map(Some).map_err(|_| {
            HttpError::new(StatusCode::BAD_REQUEST, "BadRequest", format!("{name} must be a time in Unix seconds, got {text:?}"))
        }),
    };
    let follow = flag("follow", &query.follow)?;
    let (timestamps, since, previous) =
        (flag("timestamps", &query.timestamps)?, seconds("since", &query.since)?, flag("previous", &query.previous)?);
    let tail =
        match query.tail.as_deref() {
            None | Some("") | Some("-1") | Some("all") => None,
            Some(text) => Some(text.parse::<u64>().map_err(|_| {
                HttpError::new(StatusCode::BAD_REQUEST, "BadRequest", format!("tail must be a number of lines, got {text:?}"))
            })?),
        };
    let mut chosen = container_of(state, &namespace, &pod, &query.container).await?;
    if previous {
        chosen = previous_instance(state, &pod, &chosen).await?;
    }
    let stream = state
        .runtime
        .logs(&chosen.id, &crate::runtime::LogRequest { tail, follow, timestamps, since })
        .map(|chunk| chunk.map_err(std::io::Error::other))
        .take_until(state.shutdown.clone().cancelled_owned());
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], Body::from_stream(stream)).into_response())
}

/// The container `container` of pod `namespace/pod` on this node, or its only container
/// when `container` is empty.
async fn container_of(state: &AppState, namespace: &str, pod: &str, container: &str) -> Result<ContainerInfo, HttpError> {
    let containers = state
        .runtime
        .list(&[(LABEL_NODE, state.node_name.as_str()), (LABEL_NAMESPACE, namespace), (LABEL_POD, pod)])
        .await
        .map_err(|e| HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", e.to_string()))?;
    if containers.is_empty() {
        return Err(HttpError::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("pod {namespace}/{pod} has no containers on node {}", state.node_name),
        ));
    }
    // A pod deleted and created again under the same name may still have its old container:
    // the newest container of each name belongs to the current pod.
    let mut containers = containers;
    containers.sort_by_key(|c| std::cmp::Reverse(c.created_at));
    let mut seen = std::collections::HashSet::new();
    containers.retain(|c| seen.insert(c.label(LABEL_CONTAINER).to_string()));
    let mut names: Vec<&str> = containers.iter().map(|c| c.label(LABEL_CONTAINER)).collect();
    names.sort_unstable();
    if container.is_empty() {
        match containers.as_slice() {
            [only] => Ok(only.clone()),
            _ => Err(HttpError::new(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                format!("pod {namespace}/{pod} has several containers; choose one with container= ({})", names.join(", ")),
            )),
        }
    } else {
        containers.iter().find(|c| c.label(LABEL_CONTAINER) == container).cloned().ok_or_else(|| {
            HttpError::new(
                StatusCode::NOT_FOUND,
                "NotFound",
                format!("pod {namespace}/{pod} has no container {:?} (it has {})", container, names.join(", ")),
            )
        })
    }
}

/// The run of `current`'s container that its status reports as `last_state`: the newest
/// that ended, which is `current` itself while it waits out its back-off (as the kubelet
/// reads the container of `lastState`). Each restart is a new container, and the worker keeps
/// the one before until the next restart.
async fn previous_instance(state: &AppState, pod: &str, current: &ContainerInfo) -> Result<ContainerInfo, HttpError> {
    let name = current.label(LABEL_CONTAINER);
    let runs = state
        .runtime
        .list(&[(LABEL_POD_UID, current.label(LABEL_POD_UID)), (LABEL_CONTAINER, name)])
        .await
        .map_err(|e| HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", e.to_string()))?;
    runs.into_iter().filter(|c| matches!(c.state, RunState::Exited { .. })).max_by_key(|c| c.created_at).ok_or_else(|| {
        HttpError::new(StatusCode::BAD_REQUEST, "BadRequest", format!("previous terminated container {name:?} in pod {pod:?} not found"))
    })
}

/// Which session a WebSocket request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Join {
    /// A new process: `command` runs beside the container's own.
    Exec,
    /// The container's own process.
    Attach,
}

async fn exec(
    State(state): State<AppState>,
    Path((namespace, pod)): Path<(String, String)>,
    Query(query): Query<Vec<(String, String)>>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, HttpError> {
    join(&state, Join::Exec, &namespace, &pod, &query, upgrade).await
}

async fn attach(
    State(state): State<AppState>,
    Path((namespace, pod)): Path<(String, String)>,
    Query(query): Query<Vec<(String, String)>>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, HttpError> {
    join(&state, Join::Attach, &namespace, &pod, &query, upgrade).await
}

/// Starts the session `query` asks for in a running container of the pod, then upgrades:
/// what fails before the upgrade is an HTTP error the API server passes on.
async fn join(
    state: &AppState,
    join: Join,
    namespace: &str,
    pod: &str,
    query: &[(String, String)],
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, HttpError> {
    let bad_request = |message: String| HttpError::new(StatusCode::BAD_REQUEST, "BadRequest", message);
    let upgrade =
        upgrade.map_err(|e| bad_request(format!("this is a WebSocket session ({}): {e}", shared::remote_command::PROTOCOLS.join(", "))))?;
    let options = shared::remote_command::Options::from_query(query).map_err(bad_request)?;
    if join == Join::Exec && options.command.is_empty() {
        return Err(bad_request("exec needs the command to run: command=<program>&command=<argument>…".into()));
    }
    let container = container_of(state, namespace, pod, &options.container).await?;
    if container.state != RunState::Running {
        return Err(bad_request(format!("container {} of pod {namespace}/{pod} is not running", container.label(LABEL_CONTAINER))));
    }
    let attached = match join {
        Join::Exec => state.runtime.exec(&container.id, &options).await,
        Join::Attach => state.runtime.attach(&container.id, &options).await,
    }
    .map_err(|e| bad_request(e.to_string()))?;
    let session = Session::from(attached);
    let shutdown = state.shutdown.clone();
    Ok(upgrade
        .protocols(shared::remote_command::PROTOCOLS)
        .on_upgrade(move |socket| crate::remote_command::serve(socket, session, shutdown)))
}

async fn port_forward(
    State(state): State<AppState>,
    Path((namespace, pod)): Path<(String, String)>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, HttpError> {
    port_forward_to(&state, namespace, pod, upgrade).await
}

/// Upgrades to a port-forward WebSocket once the request offers its subprotocol and the pod
/// runs here; otherwise a JSON error says which is missing.
async fn port_forward_to(
    state: &AppState,
    namespace: String,
    pod: String,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, HttpError> {
    use shared::api::port_forward::SUBPROTOCOL;
    let not_spoken = |why: String| {
        HttpError::new(StatusCode::BAD_REQUEST, "BadRequest", format!("port-forward speaks {SUBPROTOCOL} over a WebSocket: {why}"))
    };
    let upgrade = upgrade
        .map_err(|rejection| not_spoken(rejection.to_string()))?
        .protocols([SUBPROTOCOL])
        .max_message_size(port_forward::MAX_MESSAGE)
        .max_frame_size(port_forward::MAX_MESSAGE);
    if upgrade.selected_protocol().is_none() {
        return Err(not_spoken("the request does not offer that subprotocol".into()));
    }
    let target = Target::find(state.runtime.as_ref(), &state.node_name, &namespace, &pod)
        .await
        .map_err(|message| HttpError::new(StatusCode::NOT_FOUND, "NotFound", message))?;
    let (runtime, shutdown) = (state.runtime.clone(), state.shutdown.clone());
    Ok(upgrade.on_upgrade(move |socket| port_forward::serve(socket, runtime, target, shutdown)))
}

async fn stats(State(state): State<AppState>) -> Result<axum::Json<shared::metrics::NodeUsage>, HttpError> {
    stats_of(&state).await
}

async fn stats_of(state: &AppState) -> Result<axum::Json<shared::metrics::NodeUsage>, HttpError> {
    let usage = crate::usage::of_node(state.runtime.as_ref(), &state.node_name).await;
    usage.map(axum::Json).map_err(|e| HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", e.to_string()))
}

async fn healthz() -> &'static str {
    "ok"
}

/// Lets through only what `access` allows.
async fn require_access(State(access): State<Access>, request: Request, next: Next) -> Response {
    let token = match access {
        Access::Signed(token) => token,
        Access::Loopback { port } => {
            return match refusal_of_an_open_agent(&request, port) {
                Some(refusal) => HttpError::new(StatusCode::FORBIDDEN, "Forbidden", refusal).into_response(),
                None => next.run(request).await,
            };
        }
    };
    let target = request.uri().path_and_query().map_or_else(|| request.uri().path(), |p| p.as_str());
    let authorization = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    match shepherd_client::agent_auth::verify(&token, request.method().as_str(), target, authorization, now) {
        Ok(()) => next.run(request).await,
        Err(refusal) => HttpError::new(StatusCode::UNAUTHORIZED, "Unauthorized", refusal.to_string()).into_response(),
    }
}

/// Why an agent without a token refuses `request`, if it does: a Host (every one it carries)
/// that is not its own loopback address and `port`, or any Origin.
fn refusal_of_an_open_agent(request: &Request, port: u16) -> Option<String> {
    let headers = request.headers();
    let host_headers = headers.get_all(header::HOST).iter().map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let hosts: Vec<String> = request.uri().authority().map(|a| a.to_string()).into_iter().chain(host_headers).collect();
    if hosts.is_empty() {
        return Some("the request has no Host header; this agent has no token and answers only requests for its own address".into());
    }
    if let Some(host) = hosts.iter().find(|host| !shared::listen::is_own_loopback_host(host, port, false)) {
        return Some(format!(
            "this agent has no token, so it answers only requests for its own address: Host {host:?} is not localhost, \
             127.0.0.1 or [::1] with port {port}"
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        return Some(format!(
            "this agent has no token, so no web page may call it (the request came from {:?})",
            String::from_utf8_lossy(origin.as_bytes())
        ));
    }
    None
}

async fn sandboxes(State(state): State<AppState>) -> Result<axum::Json<crate::sandbox::PoolStatus>, HttpError> {
    sandboxes_of(&state)
}

fn sandboxes_of(state: &AppState) -> Result<axum::Json<crate::sandbox::PoolStatus>, HttpError> {
    match &state.sandboxes {
        Some(sandboxes) => Ok(axum::Json(sandboxes.status())),
        None => Err(HttpError::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("node {} runs its pods without sandboxes (simulated runtime)", state.node_name),
        )),
    }
}

/// The whole agent API, its logs, sessions and sandboxes as `access` allows.
pub fn app(state: AppState, access: Access) -> Router {
    Router::new()
        .route("/logs/{namespace}/{pod}", get(logs))
        .route("/portforward/{namespace}/{pod}", get(port_forward))
        .route("/exec/{namespace}/{pod}", get(exec))
        .route("/attach/{namespace}/{pod}", get(attach))
        .route("/sandboxes", get(sandboxes))
        .route(shared::api::agent_paths::STATS, get(stats))
        .route_layer(middleware::from_fn_with_state(access, require_access))
        .route("/healthz", get(healthz))
        .with_state(state)
}

/// Serves the agent API on `listener` until `shutdown`, signed by `token` when there is one.
pub async fn run(listener: tokio::net::TcpListener, state: AppState, token: Option<&str>) -> std::io::Result<()> {
    let access = Access::new(token, listener.local_addr()?);
    let shutdown = state.shutdown.clone();
    axum::serve(listener, app(state, access)).with_graceful_shutdown(async move { shutdown.cancelled().await }).await
}

/// The agent APIs of a fleet's nodes, by node name.
pub type Fleet = Arc<HashMap<String, AppState>>;

fn node_of<'a>(fleet: &'a Fleet, node: &str) -> Result<&'a AppState, HttpError> {
    fleet.get(node).ok_or_else(|| HttpError::new(StatusCode::NOT_FOUND, "NotFound", format!("this fleet has no node {node}")))
}

async fn fleet_logs(
    State(fleet): State<Fleet>,
    Path((node, namespace, pod)): Path<(String, String, String)>,
    Query(query): Query<LogQuery>,
) -> Result<Response, HttpError> {
    logs_of(node_of(&fleet, &node)?, namespace, pod, query).await
}

async fn fleet_port_forward(
    State(fleet): State<Fleet>,
    Path((node, namespace, pod)): Path<(String, String, String)>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, HttpError> {
    port_forward_to(node_of(&fleet, &node)?, namespace, pod, upgrade).await
}

async fn fleet_exec(
    State(fleet): State<Fleet>,
    Path((node, namespace, pod)): Path<(String, String, String)>,
    Query(query): Query<Vec<(String, String)>>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, HttpError> {
    join(node_of(&fleet, &node)?, Join::Exec, &namespace, &pod, &query, upgrade).await
}

async fn fleet_attach(
    State(fleet): State<Fleet>,
    Path((node, namespace, pod)): Path<(String, String, String)>,
    Query(query): Query<Vec<(String, String)>>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, HttpError> {
    join(node_of(&fleet, &node)?, Join::Attach, &namespace, &pod, &query, upgrade).await
}

async fn fleet_healthz(State(fleet): State<Fleet>, Path(node): Path<String>) -> Result<&'static str, HttpError> {
    node_of(&fleet, &node).map(|_| "ok")
}

async fn fleet_sandboxes(
    State(fleet): State<Fleet>,
    Path(node): Path<String>,
) -> Result<axum::Json<crate::sandbox::PoolStatus>, HttpError> {
    sandboxes_of(node_of(&fleet, &node)?)
}

async fn fleet_stats(State(fleet): State<Fleet>, Path(node): Path<String>) -> Result<axum::Json<shared::metrics::NodeUsage>, HttpError> {
    stats_of(node_of(&fleet, &node)?).await
}

/// Every node's agent API on one address: node N's under `/nodes/N`, which is the
/// endpoint N registers, so the API server reaches each node's logs through this one port.
pub fn fleet_app(fleet: Fleet, access: Access) -> Router {
    Router::new()
        .route("/nodes/{node}/logs/{namespace}/{pod}", get(fleet_logs))
        .route("/nodes/{node}/portforward/{namespace}/{pod}", get(fleet_port_forward))
        .route("/nodes/{node}/exec/{namespace}/{pod}", get(fleet_exec))
        .route("/nodes/{node}/attach/{namespace}/{pod}", get(fleet_attach))
        .route("/nodes/{node}/sandboxes", get(fleet_sandboxes))
        .route("/nodes/{node}/stats", get(fleet_stats))
        .route_layer(middleware::from_fn_with_state(access, require_access))
        .route("/healthz", get(healthz))
        .route("/nodes/{node}/healthz", get(fleet_healthz))
        .with_state(fleet)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;
    use crate::runtime::{ContainerConfig, LABEL_POD_UID, SimulatedRuntime};

    async fn state_with(containers: &[&str]) -> AppState {
        let runtime = Arc::new(SimulatedRuntime::new(Duration::ZERO));
        for name in containers {
            let labels =
                [(LABEL_NODE, "n1"), (LABEL_NAMESPACE, "default"), (LABEL_POD, "web"), (LABEL_CONTAINER, name), (LABEL_POD_UID, "u1")]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>();
            let id = runtime
                .create(&ContainerConfig { name: format!("c-{name}"), image: "minimal".into(), labels, ..Default::default() })
                .await
                .unwrap();
            runtime.start(&id).await.unwrap();
        }
        AppState { node_name: "n1".into(), runtime, sandboxes: None, shutdown: CancellationToken::new() }
    }

    async fn answer(router: Router, request: Request<Body>) -> (StatusCode, String) {
        let response = router.oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (status, String::from_utf8_lossy(&bytes).to_string())
    }

    /// The port an open agent in these tests listens on, and the Host its requests name.
    const PORT: u16 = 10250;
    const OWN_HOST: &str = "127.0.0.1:10250";

    fn open() -> Access {
        Access::Loopback { port: PORT }
    }

    async fn get(state: AppState, uri: &str) -> (StatusCode, String) {
        answer(app(state, open()), request(uri, None)).await
    }

    fn now() -> u64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
    }

    /// `uri` for the agent's own address, with an `Authorization` of `authorization`, if any.
    fn request(uri: &str, authorization: Option<String>) -> Request<Body> {
        let mut request = Request::get(uri).header(header::HOST, OWN_HOST);
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        request.body(Body::empty()).unwrap()
    }

    #[tokio::test]
    async fn an_agent_with_a_token_serves_only_what_the_server_signed_with_it() {
        use shepherd_client::agent_auth::sign_now;
        let state = state_with(&["main"]).await;
        let signed = |token: &str, path: &str| Some(sign_now(token, "GET", path, now()));
        let call = |uri: &str, authorization: Option<String>| {
            answer(app(state.clone(), Access::Signed("node-token-1".into())), request(uri, authorization))
        };
        let (status, body) = call("/logs/default/web", None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        assert!(body.contains("signed by the API server with the node's token"), "{body}");
        let (status, body) = call("/logs/default/web", signed("node-token-1", "/logs/default/web")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(body.contains("c-main"), "{body}");
        let (status, body) = call("/logs/default/web?container=main", signed("node-token-1", "/logs/default/web")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "a signature of another query: {body}");
        let (status, _) = call("/logs/default/web", signed("node-token-1", "/logs/default/db")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "a signature of another pod's path");
        let (status, _) = call("/logs/default/web", signed("node-token-2", "/logs/default/web")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "another token");
        let (status, _) = call("/logs/default/web", Some("Bearer node-token-1".into())).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "the token itself is no signature");
        assert_eq!(call("/sandboxes", None).await.0, StatusCode::UNAUTHORIZED);
        assert_eq!(call("/portforward/default/web", None).await.0, StatusCode::UNAUTHORIZED);
        let (status, body) = call("/portforward/default/web", signed("node-token-1", "/portforward/default/web")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "signed, but no WebSocket: {body}");
        assert!(body.contains("port-forward speaks SPDY/3.1+portforward.k8s.io over a WebSocket"), "{body}");
        assert_eq!(call("/healthz", None).await, (StatusCode::OK, "ok".to_string()), "health stays open");

        let fleet: Fleet = Arc::new(HashMap::from([("n1".to_string(), state.clone())]));
        let fleet_call =
            |uri: &str, authorization| answer(fleet_app(fleet.clone(), Access::Signed("node-token-1".into())), request(uri, authorization));
        assert_eq!(fleet_call("/nodes/n1/logs/default/web", None).await.0, StatusCode::UNAUTHORIZED);
        let path = "/nodes/n1/logs/default/web";
        assert_eq!(fleet_call(path, signed("node-token-1", path)).await.0, StatusCode::OK);
        assert_eq!(fleet_call("/nodes/n1/healthz", None).await.0, StatusCode::OK);
    }

    #[tokio::test]
    async fn an_agent_without_a_token_answers_only_requests_for_its_own_address_and_no_web_page() {
        let state = state_with(&["main"]).await;
        let call = |request: Request<Body>| answer(app(state.clone(), open()), request);
        let with = |headers: &[(&str, &str)]| {
            let mut request = Request::get("/logs/default/web");
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            request.body(Body::empty()).unwrap()
        };
        for host in ["127.0.0.1:10250", "localhost:10250", "[::1]:10250"] {
            assert_eq!(call(with(&[("host", host)])).await.0, StatusCode::OK, "{host}");
        }
        let (status, body) = call(with(&[])).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "no Host: {body}");
        for host in ["evil.example:10250", "localhost:10251", "127.0.0.1", "0.0.0.0:10250"] {
            let (status, body) = call(with(&[("host", host)])).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "Host {host}: {body}");
            assert!(body.contains("answers only requests for its own address"), "{body}");
        }
        let (status, body) = call(with(&[("host", OWN_HOST), ("host", "evil.example:10250")])).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "a second Host: {body}");
        for origin in ["http://evil.example", "http://127.0.0.1:10250", "null"] {
            let (status, body) = call(with(&[("host", OWN_HOST), ("origin", origin)])).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "Origin {origin}: {body}");
            assert!(body.contains("no web page may call it"), "{body}");
        }
        let sandboxes = Request::get("/sandboxes").header("host", "evil.example:10250").body(Body::empty()).unwrap();
        assert_eq!(call(sandboxes).await.0, StatusCode::FORBIDDEN);
        let health = Request::get("/healthz").header("host", "evil.example:10250").body(Body::empty()).unwrap();
        assert_eq!(call(health).await.0, StatusCode::OK, "health stays open");
    }

    #[tokio::test]
    async fn logs_of_the_only_container() {
        let (status, body) = get(state_with(&["main"]).await, "/logs/default/web").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("c-main"), "{body}");
    }

    #[tokio::test]
    async fn several_containers_need_a_choice() {
        let state = state_with(&["a", "b"]).await;
        let (status, body) = get(state.clone(), "/logs/default/web").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("choose one with container= (a, b)"), "{body}");
        let (status, body) = get(state.clone(), "/logs/default/web?container=b").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("c-b"), "{body}");
        let (status, body) = get(state, "/logs/default/web?container=c").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let error: ApiErrorBody = serde_json::from_str(&body).unwrap();
        assert_eq!(error.error.reason, "NotFound");
    }

    #[tokio::test]
    async fn unknown_pods_and_bad_parameters_are_clear_errors() {
        let (status, body) = get(state_with(&[]).await, "/logs/default/nope").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(body.contains("pod default/nope has no containers on node n1"), "{body}");
        let (status, body) = get(state_with(&["main"]).await, "/logs/default/web?follow=maybe").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("follow: invalid boolean") && body.contains("maybe"), "{body}");
        let (status, body) = get(state_with(&[]).await, "/healthz").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));
        let (status, body) = get(state_with(&[]).await, "/sandboxes").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(body.contains("node n1 runs its pods without sandboxes"), "{body}");
    }

    #[tokio::test]
    async fn a_fleet_serves_each_nodes_api_under_its_name() {
        let fleet: Fleet = Arc::new(HashMap::from([("n1".to_string(), state_with(&["main"]).await)]));
        let call = |uri: &'static str| {
            let app = fleet_app(fleet.clone(), open());
            async move {
                let response = app.oneshot(request(uri, None)).await.unwrap();
                let status = response.status();
                let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
                (status, String::from_utf8_lossy(&bytes).to_string())
            }
        };
        let (status, body) = call("/nodes/n1/logs/default/web").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("c-main"), "{body}");
        assert_eq!(call("/nodes/n1/healthz").await, (StatusCode::OK, "ok".to_string()));
        assert_eq!(call("/healthz").await, (StatusCode::OK, "ok".to_string()));
        let (status, body) = call("/nodes/n2/logs/default/web").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(body.contains("this fleet has no node n2"), "{body}");
        assert_eq!(call("/nodes/n1/sandboxes").await.0, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn the_pool_reports_its_size_and_ready_sandboxes() {
        let mut state = state_with(&[]).await;
        state.sandboxes = Some(Sandboxes::new(state.runtime.clone(), "n1", "c1", crate::network::PodNetwork::Docker(String::new()), 3));
        let (status, body) = get(state, "/sandboxes").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(serde_json::from_str::<serde_json::Value>(&body).unwrap(), serde_json::json!({"target": 3, "ready": 0}));
    }
}
