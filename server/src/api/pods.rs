//! A pod's subresources: `binding` (the scheduler's compare-and-swap), `status` (the
//! agent's reports), `scheduling` (the last decision's explanation) and `log` (streamed
//! from the node's agent).

use std::sync::Arc;

use axum::Extension;
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use shared::api::FieldError;
use shared::model::{Binding, ContainerState, ContainerStatus, Kind, Object, Pod, PodPhase, PodStatus, event_types};

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::events::{self, SOURCE_SCHEDULER};
use crate::extract::{BodyBytes, Params, parse_json, parse_object};
use crate::ops;
use crate::query::{ReadParams, WriteParams};
use crate::state::AppState;
use crate::store::{Key, Txn};

pub(crate) fn stored_pod(state: &AppState, namespace: &str, name: &str) -> ApiResult<Pod> {
    match state.store.get(&Key::new(Kind::Pod, namespace, name)).as_deref() {
        Some(Object::Pod(p)) => Ok(p.clone()),
        _ => Err(ApiError::not_found(format!("pod \"{namespace}/{name}\" not found"))),
    }
}

/// `POST …/pods/{name}/binding`: sets node_name only if it is still empty (else 409) and
/// the node still has room (else 409).
pub async fn bind(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    Params(params): Params<WriteParams>,
    BodyBytes(body): BodyBytes,
) -> ApiResult<Response> {
    let dry_run = params.is_dry_run()?;
    let binding: Binding = parse_json(&body, "Binding")?;
    let pod = bind_pod(&state, &namespace, &name, &binding, dry_run).await?;
    Ok(match pod {
        Some(p) => (StatusCode::CREATED, Json(&*p)).into_response(),
        None => StatusCode::CREATED.into_response(),
    })
}

/// Binds a pod as its binding asks; both API dialects bind through it. A dry run binds nothing.
pub(crate) async fn bind_pod(
    state: &AppState,
    namespace: &str,
    name: &str,
    binding: &Binding,
    dry_run: bool,
) -> ApiResult<Option<Arc<Object>>> {
    let mut details = Vec::new();
    if !binding.target.kind.is_empty() && binding.target.kind != "Node" {
        details.push(FieldError::new("target.kind", format!("must be Node, got {:?}", binding.target.kind)));
    }
    if binding.target.name.is_empty() {
        details.push(FieldError::new("target.name", "must name the node to bind the pod to"));
    }
    if !details.is_empty() {
        return Err(ApiError::invalid(&format!("the binding of pod {namespace}/{name}"), details));
    }
    let txn = ops::bind(namespace, name, &binding.target.name, &binding.metadata.uid, SOURCE_SCHEDULER, chrono::Utc::now());
    let outcomes = state.store.commit(txn.dry_run(dry_run)).await?;
    let pod = outcomes.first().and_then(|o| o.object()).cloned();
    if let Some(Object::Pod(p)) = pod.as_deref().filter(|_| !dry_run)
        && let Some(created) = p.metadata.created_at
    {
        state.metrics.observe_create_to_bound((chrono::Utc::now() - created).to_std().unwrap_or_default());
    }
    Ok(pod)
}

pub async fn get_status(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    Params(ReadParams {}): Params<ReadParams>,
) -> ApiResult<Json<Pod>> {
    stored_pod(&state, &namespace, &name).map(Json)
}

/// `PUT …/pods/{name}/status` with a whole pod: only its status is taken.
pub async fn put_status(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path((namespace, name)): Path<(String, String)>,
    Params(params): Params<WriteParams>,
    BodyBytes(body): BodyBytes,
) -> ApiResult<Response> {
    let dry_run = params.is_dry_run()?;
    let pod: Pod = parse_object(&body)?;
    if !pod.metadata.name.is_empty() && pod.metadata.name != name {
        return Err(ApiError::bad_request(format!(
            "the body's metadata.name {:?} does not match the name {name:?} in the path",
            pod.metadata.name
        )));
    }
    let before = stored_pod(&state, &namespace, &name)?;
    principal.may_write_pod_status(&format!("{namespace}/{name}"), &before.spec.node_name)?;
    let status: PodStatus = pod.status;
    let write = ops::set_pod_status(&namespace, &name, status, pod.metadata.resource_version);
    let after = state.store.commit(Txn::new().with(write).dry_run(dry_run)).await?.pop().and_then(|o| o.object().cloned());
    if let Some(Object::Pod(p)) = after.as_deref().filter(|_| !dry_run)
        && before.status.phase != PodPhase::Running
        && p.status.phase == PodPhase::Running
    {
        record_running(&state, p).await;
    }
    Ok(match after {
        Some(p) => Json(&*p).into_response(),
        None => StatusCode::OK.into_response(),
    })
}

/// Marks the end of the seed's walk-through (Created → Scheduled → … → Running) with an
/// event that says how long the pod took, and feeds the create→Running metric. A pod that
/// runs again (its containers were recreated) bumps the same event, without a time from
/// creation and without a second metric sample. The status is already stored: a lost
/// event is logged, not an error for the agent.
async fn record_running(state: &AppState, pod: &Pod) {
    let now = chrono::Utc::now();
    let involved = events::reference(&Object::Pod(pod.clone()));
    let (namespace, name) = events::event_key(&involved, "Running", events::SOURCE_API, "");
    let ran_before = state.store.get(&Key::new(Kind::Event, &namespace, &name)).is_some();
    let took = pod.metadata.created_at.filter(|_| !ran_before).map(|created| (now - created).to_std().unwrap_or_default());
    if let Some(took) = took {
        state.metrics.observe_create_to_running(took);
    }
    let message = match took {
        Some(took) => {
            format!("Pod {} is running on node {}, {} ms after it was created", pod.metadata.name, pod.spec.node_name, took.as_millis())
        }
        None if ran_before => format!("Pod {} is running again on node {}", pod.metadata.name, pod.spec.node_name),
        None => format!("Pod {} is running on node {}", pod.metadata.name, pod.spec.node_name),
    };
    let event = events::new_event(involved, event_types::NORMAL, "Running", message, events::SOURCE_API);
    if let Err(e) = state.store.commit(Txn::new().with(events::record(event, now))).await {
        tracing::warn!(pod = %pod.metadata.key(), error = %e, "cannot record the Running event");
    }
}

/// `GET …/pods/{name}/scheduling`: the explanation of the scheduler's last decision.
pub async fn scheduling(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    Params(ReadParams {}): Params<ReadParams>,
) -> ApiResult<Response> {
    let pod = stored_pod(&state, &namespace, &name)?;
    match state.scheduler.decision(&Key::new(Kind::Pod, &namespace, &name)) {
        Some(explanation) => Ok(Json(explanation).into_response()),
        None if pod.is_bound() => Err(ApiError::not_found(format!(
            "pod {namespace}/{name} is bound to {} but this server has no record of the decision (it was bound by another scheduler or before a restart)",
            pod.spec.node_name
        ))),
        None => Err(ApiError::not_found(format!("the scheduler has not tried pod {namespace}/{name} yet"))),
    }
}

/// `?container=…&tail=N&follow=true&timestamps=true&since_seconds=N&since_time=RFC3339&previous=true`;
/// any other parameter is refused by name.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogParams {
    pub container: Option<String>,
    pub tail: Option<u64>,
    #[serde(deserialize_with = "shared::parse::deserialize_flag")]
    pub follow: Option<bool>,
    #[serde(deserialize_with = "shared::parse::deserialize_flag")]
    pub timestamps: Option<bool>,
    pub since_seconds: Option<i64>,
    pub since_time: Option<String>,
    #[serde(deserialize_with = "shared::parse::deserialize_flag")]
    pub previous: Option<bool>,
}

/// The part of a container's output a log request asks for: from `since` (Unix seconds, as
/// the agent and Docker take them), of the instance before the last restart when `previous`.
#[derive(Debug, Default, PartialEq, Eq)]
struct LogWindow {
    since: Option<i64>,
    previous: bool,
}

/// The window of `params` for `pod` at `now`. Each restart is a new container and the agent
/// keeps the one before (`previous`), as the kubelet does, while the status reports how it
/// ended as `last_state`.
fn log_window(pod: &Pod, container: &str, params: &LogParams, now: chrono::DateTime<chrono::Utc>) -> ApiResult<LogWindow> {
    let since = match (params.since_seconds, params.since_time.as_deref()) {
        (Some(_), Some(_)) => return Err(ApiError::bad_request("at most one of sinceTime or sinceSeconds may be specified")),
        (Some(seconds), None) if seconds < 1 => return Err(ApiError::bad_request("sinceSeconds must be greater than 0")),
        (Some(seconds), None) => Some(now.timestamp() - seconds),
        (None, Some(text)) => Some(
            chrono::DateTime::parse_from_rfc3339(text)
                .map_err(|e| ApiError::bad_request(format!("sinceTime {text:?} is not an RFC 3339 time: {e}")))?
                .timestamp(),
        ),
        (None, None) => None,
    };
    if params.previous != Some(true) {
        // As the kubelet: a container that has not run yet has nothing to show.
        let status = pod.status.container_statuses.iter().find(|s| s.name == container);
        if let Some(ContainerStatus { state: ContainerState::Waiting { reason, .. }, last_state, .. }) = status
            && !matches!(last_state, Some(ContainerState::Terminated { .. }))
        {
            let why = match reason.as_str() {
                "" => " - no logs yet".to_string(),
                "ErrImagePull" => ": image can't be pulled".to_string(),
                "ImagePullBackOff" => ": trying and failing to pull image".to_string(),
                reason => format!(": {reason}"),
            };
            return Err(ApiError::bad_request(format!("container {container:?} in pod {:?} is waiting to start{why}", pod.metadata.name)));
        }
        return Ok(LogWindow { since, previous: false });
    }
    let last = pod.status.container_statuses.iter().find(|s| s.name == container).and_then(|s| s.last_state.as_ref());
    match last {
        Some(ContainerState::Terminated { .. }) => Ok(LogWindow { since, previous: true }),
        _ => Err(ApiError::bad_request(format!("previous terminated container {container:?} in pod {:?} not found", pod.metadata.name))),
    }
}

/// `GET …/pods/{name}/log`: proxied from the agent at the node's `agent_endpoint`, signed
/// with the token that agent speaks with when the server knows it ([`AgentKeys`]).
///
/// [`AgentKeys`]: crate::auth::AgentKeys
pub async fn log(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    Params(params): Params<LogParams>,
) -> ApiResult<Response> {
    let pod = stored_pod(&state, &namespace, &name)?;
    let container = pod.container_for(params.container.as_deref().unwrap_or("")).map_err(ApiError::bad_request)?.to_string();
    let agent = crate::agent_client::pod_agent(&state, &pod, "logs")?;
    let window = log_window(&pod, &container, &params, chrono::Utc::now())?;
    let mut query: Vec<(&str, String)> = vec![("container", container)];
    if let Some(t) = params.tail {
        query.push(("tail", t.to_string()));
    }
    if let Some(f) = params.follow {
        query.push(("follow", f.to_string()));
    }
    if params.timestamps == Some(true) {
        query.push(("timestamps", "true".into()));
    }
    query.extend(window.since.map(|s| ("since", s.to_string())));
    if window.previous {
        query.push(("previous", "true".into()));
    }
    let url = format!("{}{}", agent.endpoint, shared::api::agent_paths::logs(&namespace, &name));
    let unreachable = |e: reqwest::Error| crate::agent_client::unreachable(&agent.node, &url, &e);
    let mut request = state.http.get(&url).query(&query).build().map_err(unreachable)?;
    let signed = crate::agent_client::sign(&state, &agent.node, &mut request);
    let upstream = state.http.execute(request).await.map_err(unreachable)?;
    let status = upstream.status();
    if !status.is_success() {
        return Err(crate::agent_client::refused(&agent.node, upstream, signed).await);
    }
    let mut response = Body::from_stream(upstream.bytes_stream()).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use shared::model::Container;

    use super::*;

    fn pod(last_state: Option<ContainerState>) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = "web".into();
        pod.spec.containers = vec![Container { name: "c".into(), ..Container::default() }];
        let state = ContainerState::Running { started_at: None };
        pod.status.container_statuses = vec![ContainerStatus { name: "c".into(), state, last_state, ..ContainerStatus::default() }];
        pod
    }

    #[test]
    fn a_container_that_has_not_run_yet_has_no_logs_in_the_kubelets_words() {
        let now = chrono::DateTime::from_timestamp(1_000, 0).unwrap();
        let waiting = |reason: &str, last_state: Option<ContainerState>| {
            let mut pod = pod(last_state);
            pod.status.container_statuses[0].state = ContainerState::Waiting { reason: reason.into(), message: String::new() };
            log_window(&pod, "c", &LogParams::default(), now)
        };
        let refused = |reason: &str| waiting(reason, None).unwrap_err().message;
        assert_eq!(refused("ContainerCreating"), r#"container "c" in pod "web" is waiting to start: ContainerCreating"#);
        assert_eq!(refused("ImagePullBackOff"), r#"container "c" in pod "web" is waiting to start: trying and failing to pull image"#);
        assert_eq!(refused(""), r#"container "c" in pod "web" is waiting to start - no logs yet"#);
        let ended = ContainerState::Terminated {
            exit_code: 1,
            reason: "Error".into(),
            message: String::new(),
            started_at: None,
            finished_at: None,
        };
        assert!(waiting("CrashLoopBackOff", Some(ended)).is_ok(), "the run that ended is shown, as the kubelet shows it");
    }

    #[test]
    fn a_log_window_is_a_span_a_time_or_the_previous_run() {
        let at = |s: i64| chrono::DateTime::from_timestamp(s, 500_000_000).unwrap();
        let now = at(1_000);
        let window = |params: LogParams, pod: &Pod| log_window(pod, "c", &params, now);
        let plain = pod(None);
        assert_eq!(
            window(LogParams { since_seconds: Some(5), ..LogParams::default() }, &plain).unwrap(),
            LogWindow { since: Some(995), previous: false }
        );
        let time = LogParams { since_time: Some("1970-01-01T00:10:00Z".into()), ..LogParams::default() };
        assert_eq!(window(time, &plain).unwrap().since, Some(600));
        let both = LogParams { since_seconds: Some(5), since_time: Some("1970-01-01T00:10:00Z".into()), ..LogParams::default() };
        assert!(window(both, &plain).unwrap_err().message.contains("at most one of sinceTime or sinceSeconds"));
        assert!(window(LogParams { since_seconds: Some(0), ..LogParams::default() }, &plain).is_err());

        let previous = || LogParams { previous: Some(true), ..LogParams::default() };
        let refused = window(previous(), &plain).unwrap_err();
        assert_eq!(refused.message, r#"previous terminated container "c" in pod "web" not found"#);
        let ended = ContainerState::Terminated {
            exit_code: 1,
            reason: "Error".into(),
            message: String::new(),
            started_at: Some(at(900)),
            finished_at: Some(at(901)),
        };
        let restarted = pod(Some(ended));
        assert_eq!(window(previous(), &restarted).unwrap(), LogWindow { since: None, previous: true });
        let later = LogParams { since_time: Some("1970-01-01T00:15:00.5Z".into()), ..previous() };
        assert_eq!(window(later, &restarted).unwrap(), LogWindow { since: Some(900), previous: true });
    }
}
