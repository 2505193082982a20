//! A pod's `exec` and `attach`, WebSocket sessions (`shared::remote_command`), and its
//! `portforward` (`shared::api::port_forward`), proxied to the agent of the pod's node
//! ([`crate::agent_upgrade`]). Each is a write on the pod, as Kubernetes asks `create` on
//! `pods/exec` and `pods/portforward`, which `app::authorize` has checked against the pod's
//! node before a handler here runs. Each session writes one audit line: which token
//! ([`Principal::audited`]) ran what in which pod and container, or forwarded to it, and how
//! it ended.

use std::sync::{Arc, Mutex};

use axum::Extension;
use axum::extract::{Path, Query, Request, State};
use axum::response::Response;
use shared::remote_command::{Options, StatusTap, exit_code};

use crate::agent_upgrade::{AgentSession, SessionEnd, proxy};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Which session a request opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Join {
    /// `command` run beside the container's own process.
    Exec,
    /// The container's own process.
    Attach,
}

impl Join {
    fn as_str(self) -> &'static str {
        match self {
            Join::Exec => "exec",
            Join::Attach => "attach",
        }
    }
}

/// `GET` (WebSocket) or `POST` `…/pods/{name}/exec?command=…&container=…&stdin=…`.
pub async fn exec(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path((namespace, name)): Path<(String, String)>,
    Query(query): Query<Vec<(String, String)>>,
    request: Request,
) -> ApiResult<Response> {
    join(&state, &principal, Join::Exec, &namespace, &name, &query, request).await
}

/// `GET` (WebSocket) or `POST` `…/pods/{name}/attach?container=…&stdin=…`.
pub async fn attach(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path((namespace, name)): Path<(String, String)>,
    Query(query): Query<Vec<(String, String)>>,
    request: Request,
) -> ApiResult<Response> {
    join(&state, &principal, Join::Attach, &namespace, &name, &query, request).await
}

async fn join(
    state: &AppState,
    principal: &Principal,
    join: Join,
    namespace: &str,
    name: &str,
    query: &[(String, String)],
    request: Request,
) -> ApiResult<Response> {
    let pod = super::pods::stored_pod(state, namespace, name)?;
    let mut options = Options::from_query(query).map_err(ApiError::bad_request)?;
    // Checked here, before any upgrade, as kube-apiserver does: the agent knows only the
    // containers that run, and kubectl takes its refusal for a failed WebSocket handshake.
    options.container = pod.container_for(&options.container).map_err(ApiError::bad_request)?.to_string();
    if join == Join::Exec && options.command.is_empty() {
        return Err(ApiError::bad_request("exec needs the command to run: command=<program>&command=<argument>…"));
    }
    let path = match join {
        Join::Exec => shared::api::agent_paths::exec(namespace, name),
        Join::Attach => shared::api::agent_paths::attach(namespace, name),
    };
    let status = Arc::new(Mutex::new(StatusTap::default()));
    let tapped = status.clone();
    let tap = Box::new(move |bytes: &[u8]| tapped.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).feed(bytes));
    let line = format!(
        "{} {} pod {namespace}/{name} container {:?} command {:?}",
        principal.audited(),
        join.as_str(),
        options.container,
        options.command
    );
    let audit = move |end: SessionEnd| {
        let status = status.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let outcome = match (status.status().map(exit_code), end.error) {
            (Some(Ok(code)), _) => format!("exit code {code}"),
            (Some(Err(failure)), _) => format!("failed: {failure}"),
            (None, Some(error)) => format!("broke off: {error}"),
            (None, None) => "ended without a status (the client left)".to_string(),
        };
        tracing::info!(target: "audit", "{line}: {outcome} after {:.3} s", end.duration.as_secs_f64());
    };
    let session = AgentSession { pod: &pod, wanted: join.as_str(), path, query: options.to_query() };
    proxy(state, request, session, tap, audit).await
}

/// `GET` (WebSocket) `…/pods/{name}/portforward`: the ports are named in each stream's
/// headers, so the query says nothing the agent needs.
pub async fn port_forward(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path((namespace, name)): Path<(String, String)>,
    request: Request,
) -> ApiResult<Response> {
    let pod = super::pods::stored_pod(&state, &namespace, &name)?;
    let line = format!("{} portforward pod {namespace}/{name}", principal.audited());
    let audit = move |end: SessionEnd| {
        let outcome = match end.error {
            Some(error) => format!("broke off: {error}"),
            None => "ended".to_string(),
        };
        tracing::info!(target: "audit", "{line}: {outcome} after {:.3} s", end.duration.as_secs_f64());
    };
    let path = shared::api::agent_paths::port_forward(&namespace, &name);
    let session = AgentSession { pod: &pod, wanted: "portforward", path, query: Vec::new() };
    proxy(&state, request, session, Box::new(|_: &[u8]| {}), audit).await
}
