//! List, watch, get, create, replace and delete for every kind, plus a deployment's
//! `/scale`. Creating a pod stores it Pending with a `Created` event, answers 201 and only
//! then hints the scheduler.

use axum::Extension;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use shared::api::List;
use shared::model::{Deployment, Kind, Object, Pod, Scale, ScaleSpec, ScaleStatus, event_types};
use shared::registration::Registrant;
use shared::selector::LabelSelector;

use super::{AppState, BodyBytes, Params, parse_json};
use crate::auth::{Bearer, Principal, Role};
use crate::error::{ApiError, ApiResult};
use crate::events::{self, SOURCE_API};
use crate::ops;
use crate::resources::{Resource, stamp_new};
use crate::store::{Interest, Key, Outcome, Txn, Write, commit_one};

/// `?label_selector=…&field_selector=…&watch=true&resource_version=N`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ListParams {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    #[serde(deserialize_with = "shared::parse::deserialize_flag")]
    pub watch: Option<bool>,
    #[serde(deserialize_with = "shared::parse::deserialize_revision")]
    pub resource_version: Option<u64>,
}

/// One `field=value` or `field!=value` term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldTerm {
    pub field: String,
    pub value: String,
    pub equal: bool,
}

/// Which objects a list or watch returns.
#[derive(Debug, Clone)]
pub struct Filter {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: Vec<FieldTerm>,
}

/// The fields a field selector can name, per kind.
fn field_value(object: &Object, field: &str) -> Option<String> {
    let meta = object.metadata();
    match (object, field) {
        (_, "metadata.name") => Some(meta.name.clone()),
        (_, "metadata.namespace") => Some(meta.namespace.clone()),
        (Object::Pod(p), "spec.node_name") => Some(p.spec.node_name.clone()),
        (Object::Pod(p), "status.phase") => Some(p.status.phase.to_string()),
        (Object::Event(e), "involved_object.kind") => Some(e.involved_object.kind.clone()),
        (Object::Event(e), "involved_object.name") => Some(e.involved_object.name.clone()),
        (Object::Event(e), "involved_object.namespace") => Some(e.involved_object.namespace.clone()),
        (Object::Event(e), "involved_object.uid") => Some(e.involved_object.uid.clone()),
        (Object::Event(e), "reason") => Some(e.reason.clone()),
        (Object::Event(e), "type") => Some(e.type_.clone()),
        (Object::Event(e), "source") => Some(e.source.clone()),
        (Object::Node(n), "spec.unschedulable" | "status.unschedulable") => Some(n.status.unschedulable.to_string()),
        _ => None,
    }
}

pub(crate) fn supported_fields(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Pod => &["metadata.name", "metadata.namespace", "spec.node_name", "status.phase"],
        Kind::Event => &[
            "metadata.name",
            "metadata.namespace",
            "involved_object.kind",
            "involved_object.name",
            "involved_object.namespace",
            "involved_object.uid",
            "reason",
            "type",
            "source",
        ],
        Kind::Node => &["metadata.name", "status.unschedulable"],
        _ => &["metadata.name", "metadata.namespace"],
    }
}

/// Parses `spec.node_name=node-1,status.phase!=Failed` for `kind`.
pub fn parse_field_selector(kind: Kind, text: &str) -> ApiResult<Vec<FieldTerm>> {
    let mut terms = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (field, value, equal) = if let Some((f, v)) = part.split_once("!=") {
            (f, v, false)
        } else if let Some((f, v)) = part.split_once("==") {
            (f, v, true)
        } else if let Some((f, v)) = part.split_once('=') {
            (f, v, true)
        } else {
            return Err(ApiError::bad_request(format!("invalid field selector term {part:?}: expected field=value or field!=value")));
        };
        let field = field.trim();
        if !supported_fields(kind).contains(&field) {
            return Err(ApiError::bad_request(format!(
                "field selector: {kind} has no selectable field {field:?}; use one of {}",
                supported_fields(kind).join(", ")
            )));
        }
        terms.push(FieldTerm { field: field.to_string(), value: value.trim().to_string(), equal });
    }
    Ok(terms)
}

impl Filter {
    pub fn new(kind: Kind, namespace: Option<String>, params: &ListParams) -> ApiResult<Filter> {
        let labels = match params.label_selector.as_deref() {
            Some(text) => LabelSelector::parse(text).map_err(|e| ApiError::bad_request(e.to_string()))?,
            None => LabelSelector::default(),
        };
        let fields = match params.field_selector.as_deref() {
            Some(text) => parse_field_selector(kind, text)?,
            None => Vec::new(),
        };
        Ok(Filter { namespace, labels, fields })
    }

    pub fn matches(&self, object: &Object) -> bool {
        let meta = object.metadata();
        if let Some(ns) = &self.namespace
            && object.kind().namespaced()
            && &meta.namespace != ns
        {
            return false;
        }
        self.labels.matches(&meta.labels)
            && self.fields.iter().all(|t| field_value(object, &t.field).is_some_and(|v| (v == t.value) == t.equal))
    }

    /// Whether an object this filter selects stays selected until it is deleted: names and
    /// namespaces never change, and a pod's node is set once, by its binding, so "bound to
    /// n" and "bound" hold from then on. Labels and a pod's phase change.
    pub fn selection_is_permanent(&self) -> bool {
        self.labels.is_empty()
            && self.fields.iter().all(|t| match t.field.as_str() {
                "metadata.name" | "metadata.namespace" => true,
                "spec.node_name" => t.equal != t.value.is_empty(),
                _ => false,
            })
    }

    /// The node an equality term on `spec.node_name` names, for the index.
    pub fn bound_node(&self) -> Option<&str> {
        self.fields.iter().find(|t| t.field == "spec.node_name" && t.equal && !t.value.is_empty()).map(|t| t.value.as_str())
    }

    /// What a remote watch of `kind` through this filter asks of the store.
    pub fn interest(&self, kind: Kind) -> Interest {
        Interest {
            kinds: vec![kind],
            namespace: self.namespace.clone(),
            node_name: self.bound_node().map(str::to_string),
            remote: true,
            selection_is_permanent: self.selection_is_permanent(),
        }
    }
}

pub(crate) fn list<R: Resource>(state: &AppState, filter: &Filter) -> List<R> {
    let (revision, objects) = match filter.bound_node() {
        Some(node) if R::KIND == Kind::Pod => state.store.pods_on_node(node),
        _ => state.store.list(R::KIND, filter.namespace.as_deref()),
    };
    let items = objects.iter().filter(|o| filter.matches(o)).filter_map(|o| R::from_object(o).cloned()).collect();
    List { kind: format!("{}List", R::KIND.as_str()), resource_version: revision, items }
}

fn list_or_watch<R: Resource>(state: AppState, namespace: Option<String>, params: ListParams) -> ApiResult<Response> {
    let filter = Filter::new(R::KIND, namespace, &params)?;
    if params.watch.unwrap_or(false) {
        return super::watch::watch(state, R::KIND, filter, params.resource_version.unwrap_or(0));
    }
    Ok(Json(list::<R>(&state, &filter)).into_response())
}

pub async fn list_all<R: Resource>(State(state): State<AppState>, Params(params): Params<ListParams>) -> ApiResult<Response> {
    list_or_watch::<R>(state, None, params)
}

pub async fn list_namespaced<R: Resource>(
    State(state): State<AppState>,
    Path(namespace): Path<String>,
    Params(params): Params<ListParams>,
) -> ApiResult<Response> {
    list_or_watch::<R>(state, Some(namespace), params)
}

pub(crate) fn get_object<R: Resource>(state: &AppState, namespace: &str, name: &str) -> ApiResult<R> {
    let key = Key::new(R::KIND, namespace, name);
    state
        .store
        .get(&key)
        .and_then(|o| R::from_object(&o).cloned())
        .ok_or_else(|| ApiError::not_found(format!("{} {:?} not found", R::KIND, key.key)))
}

pub async fn get_namespaced<R: Resource>(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
) -> ApiResult<Json<R>> {
    get_object::<R>(&state, &namespace, &name).map(Json)
}

pub async fn get_cluster<R: Resource>(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<R>> {
    get_object::<R>(&state, "", &name).map(Json)
}

/// Parses a body meant for `R`: malformed JSON and a `kind` that is not `R`'s are 400s
/// (an unknown kind says so), an absent `kind` means `R`.
pub fn parse_object<R: Resource>(bytes: &[u8]) -> ApiResult<R> {
    #[derive(Deserialize)]
    struct Head {
        #[serde(default)]
        kind: serde_json::Value,
    }
    // The common case parses once; only a failure or a foreign kind looks at `kind` alone.
    if let Ok(object) = serde_json::from_slice::<R>(bytes)
        && (object.kind_field().is_empty() || object.kind_field() == R::KIND.as_str())
    {
        return super::refuse_unknown_fields(bytes, object, R::KIND.as_str());
    }
    let head: Head = super::read_json(bytes, R::KIND.as_str())?;
    match &head.kind {
        serde_json::Value::Null => {}
        serde_json::Value::String(k) if k.is_empty() || k == R::KIND.as_str() => {}
        serde_json::Value::String(k) => {
            return Err(match Kind::ALL.iter().find(|known| known.as_str() == k) {
                Some(other) => ApiError::bad_request(format!(
                    "the body is a {other} but this path takes a {}: send it to {}",
                    R::KIND,
                    shared::api::paths::collection(*other, None)
                )),
                None => ApiError::bad_request(format!(
                    "unknown kind {k:?}: Shepherd serves Pod, Deployment, Service, Node, Event, Namespace and Lease"
                )),
            });
        }
        other => return Err(ApiError::bad_request(format!("\"kind\" must be a string such as {:?}, got {other}", R::KIND.as_str()))),
    }
    parse_json(bytes, R::KIND.as_str())
}

fn validate<R: Resource>(object: &R) -> ApiResult<()> {
    object.validate().map_err(|details| ApiError::invalid(&format!("{} {:?}", R::KIND, object.meta().name), details))
}

fn created(outcome: &Outcome) -> StatusCode {
    match outcome {
        Outcome::Put { created: true, .. } => StatusCode::CREATED,
        _ => StatusCode::OK,
    }
}

fn object_response(status: StatusCode, object: Option<&std::sync::Arc<Object>>) -> Response {
    match object {
        Some(o) => (status, Json(&**o)).into_response(),
        None => status.into_response(),
    }
}

/// Creates an object whose namespace has been settled: nodes register, events dedup, pods
/// get their `Created` event and a scheduler hint. Both API dialects create through it.
pub(crate) async fn create<R: Resource>(state: &AppState, principal: &Principal, mut object: R) -> ApiResult<Outcome> {
    let now = chrono::Utc::now();
    if R::KIND == Kind::Node {
        principal.may_write_node(&object.meta().name)?;
    }
    if object.meta().name.is_empty() && R::KIND == Kind::Event {
        object.meta_mut().name = "event".into();
    }
    validate(&object)?;
    let object = object.into_object();
    let outcome = match object {
        Object::Node(node) => {
            let registrant = if principal.role == Role::Node { Registrant::OwnNode } else { Registrant::Admin };
            let mut outcomes = state.store.commit(ops::register_node(node, registrant, now, state.config.node_monitor_grace)).await?;
            outcomes.truncate(1);
            outcomes.pop().ok_or_else(|| ApiError::internal("the store returned no outcome"))?
        }
        Object::Event(event) => {
            principal.may_record_event_from(&event.source)?;
            commit_one(&*state.store, events::record(event, now)).await?
        }
        Object::Pod(mut pod) => {
            stamp_new(&mut pod, now);
            let event = events::new_event(
                events::reference(&Object::Pod(pod.clone())),
                event_types::NORMAL,
                "Created",
                format!("Pod {} created", pod.metadata.name),
                SOURCE_API,
            );
            let key = Key::new(Kind::Pod, &pod.metadata.namespace, &pod.metadata.name);
            let mut outcomes = state.store.commit(Txn::new().with(ops::create(pod)).with(events::record(event, now))).await?;
            outcomes.truncate(1);
            let outcome = outcomes.pop().ok_or_else(|| ApiError::internal("the store returned no outcome"))?;
            state.scheduler.hint(key);
            return Ok(outcome);
        }
        Object::Deployment(o) => {
            let mut o = *o;
            stamp_new(&mut o, now);
            commit_one(&*state.store, ops::create(o)).await?
        }
        Object::Service(mut o) => {
            stamp_new(&mut o, now);
            commit_one(&*state.store, ops::create(o)).await?
        }
        Object::Namespace(mut o) => {
            stamp_new(&mut o, now);
            commit_one(&*state.store, ops::create(o)).await?
        }
        Object::Lease(_) => return Err(ApiError::bad_request("leases are written by node registration and renewal, not created")),
    };
    Ok(outcome)
}

async fn create_response<R: Resource>(state: AppState, principal: Principal, object: R) -> ApiResult<Response> {
    let outcome = create(&state, &principal, object).await?;
    Ok(object_response(created(&outcome), outcome.object()))
}

/// Settles the namespace: the path's, else the body's, else `default`; both given must agree.
pub(crate) fn settle_namespace<R: Resource>(object: &mut R, path_namespace: Option<&str>) -> ApiResult<()> {
    if !R::KIND.namespaced() {
        object.meta_mut().namespace.clear();
        return Ok(());
    }
    let body = object.meta().namespace.clone();
    let namespace = match (path_namespace, body.as_str()) {
        (Some(p), "") => p.to_string(),
        (Some(p), b) if p == b => p.to_string(),
        (Some(p), b) => {
            return Err(ApiError::bad_request(format!(
                "the body's metadata.namespace {b:?} does not match the namespace {p:?} in the path"
            )));
        }
        (None, "") => shared::model::DEFAULT_NAMESPACE.to_string(),
        (None, b) => b.to_string(),
    };
    object.meta_mut().namespace = namespace;
    Ok(())
}

pub async fn create_from_body<R: Resource>(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    bearer: Option<Extension<Bearer>>,
    BodyBytes(body): BodyBytes,
) -> ApiResult<Response> {
    let mut object = parse_object::<R>(&body)?;
    settle_namespace(&mut object, None)?;
    // A node registers with its agent's token, which the server signs that agent's requests with.
    let registration = match (R::KIND, bearer) {
        (Kind::Node, Some(Extension(bearer))) => Some((object.meta().name.clone(), bearer)),
        _ => None,
    };
    let response = create_response(state.clone(), principal, object).await?;
    if let Some((node, bearer)) = registration {
        state.agent_keys.record(&node, &bearer);
    }
    Ok(response)
}

pub async fn create_namespaced<R: Resource>(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(namespace): Path<String>,
    BodyBytes(body): BodyBytes,
) -> ApiResult<Response> {
    let mut object = parse_object::<R>(&body)?;
    settle_namespace(&mut object, Some(&namespace))?;
    create_response(state, principal, object).await
}

async fn replace<R: Resource>(state: AppState, principal: Principal, namespace: &str, name: &str, body: &[u8]) -> ApiResult<Response> {
    let object = parse_object::<R>(body)?;
    let outcome = replace_object(&state, &principal, namespace, name, object).await?;
    Ok(object_response(StatusCode::OK, outcome.object()))
}

/// A PUT of `object` onto `namespace/name`: the names must agree, and the update is a CAS
/// on the body's resource_version. Both API dialects replace through it.
pub(crate) async fn replace_object<R: Resource>(
    state: &AppState,
    principal: &Principal,
    namespace: &str,
    name: &str,
    mut object: R,
) -> ApiResult<Outcome> {
    settle_namespace(&mut object, if R::KIND.namespaced() { Some(namespace) } else { None })?;
    if object.meta().name.is_empty() {
        object.meta_mut().name = name.to_string();
    } else if object.meta().name != name {
        return Err(ApiError::bad_request(format!(
            "the body's metadata.name {:?} does not match the name {name:?} in the path",
            object.meta().name
        )));
    }
    if R::KIND == Kind::Node {
        principal.may_write_node(name)?;
    }
    Ok(commit_one(&*state.store, ops::update(object)).await?)
}

pub async fn replace_namespaced<R: Resource>(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path((namespace, name)): Path<(String, String)>,
    BodyBytes(body): BodyBytes,
) -> ApiResult<Response> {
    replace::<R>(state, principal, &namespace, &name, &body).await
}

pub async fn replace_cluster<R: Resource>(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
    BodyBytes(body): BodyBytes,
) -> ApiResult<Response> {
    replace::<R>(state, principal, "", &name, &body).await
}

/// `?resource_version=N` makes a delete conditional. For pods, `grace_period_seconds=N`
/// sets how long the containers get to stop (0 removes the pod at once) and `uid=U`
/// deletes only the pod with that uid.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct DeleteParams {
    #[serde(deserialize_with = "shared::parse::deserialize_revision")]
    pub resource_version: Option<u64>,
    pub grace_period_seconds: Option<i64>,
    pub uid: Option<String>,
}

/// Deletes an object; both API dialects delete through it.
pub(crate) async fn delete<R: Resource>(
    state: &AppState,
    principal: &Principal,
    namespace: &str,
    name: &str,
    params: DeleteParams,
) -> ApiResult<Outcome> {
    let key = Key::new(R::KIND, namespace, name);
    let expected = params.resource_version.unwrap_or(0);
    let txn = match R::KIND {
        Kind::Pod => Txn::new().with(delete_pod(state, principal, namespace, name, params)?),
        Kind::Namespace => {
            check_namespace_empty(state, name)?;
            Txn::new().with(ops::delete(key, expected))
        }
        Kind::Node => ops::delete_node(name, expected),
        _ => Txn::new().with(ops::delete(key, expected)),
    };
    // A node's delete takes its lease along: the first outcome is the object asked for.
    let mut outcomes = state.store.commit(txn).await?;
    if R::KIND == Kind::Node {
        state.agent_keys.forget(name);
    }
    outcomes.truncate(1);
    outcomes.pop().ok_or_else(|| ApiError::internal("the store returned no outcome"))
}

/// The graceful delete of a pod (see [`ops::delete_pod`]); a node's token may delete only
/// the pods bound to its node.
fn delete_pod(state: &AppState, principal: &Principal, namespace: &str, name: &str, params: DeleteParams) -> ApiResult<Write> {
    if let Some(message) = params.grace_period_seconds.and_then(shared::validation::grace_seconds_error) {
        return Err(ApiError::bad_request(format!("grace_period_seconds {message}; 0 deletes pod {namespace}/{name} at once")));
    }
    let uid = params.uid.filter(|u| !u.is_empty());
    let bound_to = if principal.role == Role::Admin {
        None
    } else {
        let pod = get_object::<Pod>(state, namespace, name)?;
        // A confirmation for an older pod of this name meets another pod here: the uid
        // precondition answers it (409), whichever node the new pod is on. No uid comes
        // back, so that answer can never delete anything.
        if uid.as_deref().is_none_or(|u| u == pod.metadata.uid) {
            principal.may_delete_pod(&pod.metadata.key(), &pod.spec.node_name)?;
        }
        Some(pod.spec.node_name)
    };
    let request = ops::PodDelete {
        resource_version: params.resource_version.unwrap_or(0),
        uid,
        grace_seconds: params.grace_period_seconds,
        bound_to,
    };
    Ok(ops::delete_pod(namespace, name, request, chrono::Utc::now(), state.config.node_monitor_grace))
}

fn check_namespace_empty(state: &AppState, name: &str) -> ApiResult<()> {
    if name == shared::model::DEFAULT_NAMESPACE {
        return Err(ApiError::forbidden("the default namespace cannot be deleted"));
    }
    let mut left = Vec::new();
    for kind in [Kind::Pod, Kind::Deployment, Kind::Service] {
        let n = state.store.list(kind, Some(name)).1.len();
        if n > 0 {
            left.push(format!("{n} {}", kind.plural()));
        }
    }
    if left.is_empty() {
        Ok(())
    } else {
        Err(ApiError::conflict(format!("namespace {name} still holds {}; delete them first", left.join(", "))))
    }
}

pub async fn delete_namespaced<R: Resource>(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path((namespace, name)): Path<(String, String)>,
    Params(params): Params<DeleteParams>,
) -> ApiResult<Response> {
    let outcome = delete::<R>(&state, &principal, &namespace, &name, params).await?;
    Ok(object_response(StatusCode::OK, outcome.object()))
}

pub async fn delete_cluster<R: Resource>(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
    Params(params): Params<DeleteParams>,
) -> ApiResult<Response> {
    let outcome = delete::<R>(&state, &principal, "", &name, params).await?;
    Ok(object_response(StatusCode::OK, outcome.object()))
}

fn scale_of(deployment: &Deployment) -> Scale {
    Scale {
        kind: "Scale".into(),
        metadata: shared::model::ObjectMeta {
            name: deployment.metadata.name.clone(),
            namespace: deployment.metadata.namespace.clone(),
            uid: deployment.metadata.uid.clone(),
            resource_version: deployment.metadata.resource_version,
            ..Default::default()
        },
        spec: ScaleSpec { replicas: deployment.spec.replicas },
        status: ScaleStatus { replicas: deployment.status.replicas },
    }
}

pub async fn get_scale(State(state): State<AppState>, Path((namespace, name)): Path<(String, String)>) -> ApiResult<Json<Scale>> {
    let deployment = get_object::<Deployment>(&state, &namespace, &name)?;
    Ok(Json(scale_of(&deployment)))
}

pub async fn put_scale(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    BodyBytes(body): BodyBytes,
) -> ApiResult<Json<Scale>> {
    let scale: Scale = parse_json(&body, "Scale")?;
    scale_deployment(&state, &namespace, &name, scale).await.map(|d| Json(scale_of(&d)))
}

/// Sets a deployment's replicas from a Scale (CAS on its resource_version when non-zero);
/// both API dialects scale through it.
pub(crate) async fn scale_deployment(state: &AppState, namespace: &str, name: &str, scale: Scale) -> ApiResult<Deployment> {
    shared::validation::validate_scale(&scale)
        .map_err(|details| ApiError::invalid(&format!("the scale of deployment {namespace}/{name}"), details))?;
    let key = Key::new(Kind::Deployment, namespace, name);
    let expected = scale.metadata.resource_version;
    let check_key = key.clone();
    let write = ops::modify::<Deployment>(key, move |_, d| {
        ops::check_version(&check_key, expected, &Object::Deployment(Box::new(d.clone())))?;
        if d.spec.replicas != scale.spec.replicas {
            d.spec.replicas = scale.spec.replicas;
            d.metadata.generation += 1;
        }
        Ok(())
    });
    let outcome = commit_one(&*state.store, write).await?;
    match outcome.object().map(|o| &**o) {
        Some(Object::Deployment(d)) => Ok(Deployment::clone(d)),
        _ => Err(ApiError::internal(format!("deployment {namespace}/{name} vanished during the scale"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_namespaces_and_a_pods_binding_make_a_selection_permanent() {
        let permanent = |labels: Option<&str>, fields: Option<&str>| {
            let params =
                ListParams { label_selector: labels.map(Into::into), field_selector: fields.map(Into::into), ..ListParams::default() };
            Filter::new(Kind::Pod, Some("default".into()), &params).unwrap().selection_is_permanent()
        };
        assert!(permanent(None, None));
        assert!(permanent(None, Some("spec.node_name=n1,metadata.name=a")));
        assert!(permanent(None, Some("spec.node_name!=")), "bound stays bound");
        assert!(!permanent(None, Some("spec.node_name=")), "unbound pods get bound");
        assert!(!permanent(None, Some("spec.node_name!=n1")), "a pod not on n1 may be bound to it");
        assert!(!permanent(None, Some("status.phase=Running")));
        assert!(!permanent(Some("app=web"), None));
    }

    #[test]
    fn a_body_of_another_kind_or_an_unknown_kind_is_a_400() {
        let err = parse_object::<Pod>(br#"{"kind":"Deployment"}"#).unwrap_err();
        assert!(err.message.contains("this path takes a Pod"), "{}", err.message);
        let err = parse_object::<Pod>(br#"{"kind":"Sheep"}"#).unwrap_err();
        assert!(err.message.contains("unknown kind \"Sheep\""), "{}", err.message);
        let err = parse_object::<Pod>(b"{\n  \"kind\": \"Pod\",\n  \"metadata\": {\"name\": 3}\n}").unwrap_err();
        assert!(err.message.contains("line 3, column"), "{}", err.message);
        assert!(parse_object::<Pod>(br#"{"metadata":{"name":"a"}}"#).is_ok());
    }

    #[test]
    fn field_selectors_name_supported_fields_only() {
        let terms = parse_field_selector(Kind::Pod, "spec.node_name=n1,status.phase!=Failed").unwrap();
        assert_eq!(terms.len(), 2);
        assert!(!terms[1].equal);
        let err = parse_field_selector(Kind::Pod, "spec.color=red").unwrap_err();
        assert!(err.message.contains("no selectable field \"spec.color\""), "{}", err.message);
    }
}
