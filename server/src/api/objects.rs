//! List, watch, get, create, replace and delete for every kind, plus a deployment's
//! `/scale`. Creating a pod stores it Pending with a `Created` event, answers 201 and only
//! then hints the scheduler.

use axum::Extension;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use shared::api::List;
use shared::model::{Kind, ManagedFieldsEntry, Object, Pod, Scale, ScaleSpec, ScaleStatus, event_types};
use shared::registration::Registrant;

use crate::auth::{Bearer, Principal, Role};
use crate::error::{ApiError, ApiResult};
use crate::events::{self, SOURCE_API};
use crate::extract::{BodyBytes, ObjectBody, Params, parse_json, parse_object};
use crate::ops;
use crate::paging;
use crate::query::{DeleteParams, Filter, ListParams, ReadParams, WriteParams};
use crate::resources::{Resource, Scalable, stamp_new};
use crate::state::AppState;
use crate::store::{Key, Outcome, Txn, Write};

async fn list_or_watch<R: Resource>(
    state: AppState,
    namespace: Option<String>,
    params: ListParams,
    headers: &HeaderMap,
) -> ApiResult<Response> {
    let filter = Filter::new(R::KIND, namespace, &params)?;
    let continue_ = params.continue_.as_deref().filter(|c| !c.is_empty());
    if params.watch.unwrap_or(false) {
        if continue_.is_some() {
            return Err(ApiError::bad_request("a watch takes no continue token: watch from the resource_version of the list"));
        }
        return super::watch::watch(state, R::KIND, filter, super::watch::resume_from(headers, params.resource_version)?).await;
    }
    let request = paging::Request { limit: params.limit.unwrap_or(0), continue_, at: None };
    let page = paging::page(&state, R::KIND, &filter, request).await?;
    let items = page.objects.iter().filter_map(|o| R::from_object(o).cloned()).collect();
    let list = List {
        kind: format!("{}List", R::KIND.as_str()),
        resource_version: page.revision,
        continue_: page.next,
        remaining_item_count: page.remaining,
        items,
    };
    Ok(Json(list).into_response())
}

pub async fn list_all<R: Resource>(
    State(state): State<AppState>,
    headers: HeaderMap,
    Params(params): Params<ListParams>,
) -> ApiResult<Response> {
    list_or_watch::<R>(state, None, params, &headers).await
}

pub async fn list_namespaced<R: Resource>(
    State(state): State<AppState>,
    Path(namespace): Path<String>,
    headers: HeaderMap,
    Params(params): Params<ListParams>,
) -> ApiResult<Response> {
    list_or_watch::<R>(state, Some(namespace), params, &headers).await
}

pub(crate) fn get_object<R: Resource>(state: &AppState, namespace: &str, name: &str) -> ApiResult<R> {
    let key = Key::new(R::KIND, namespace, name);
    state.store.get(&key).and_then(|o| R::from_object(&o).cloned()).ok_or_else(|| match state.store.unreadable(&key) {
        Some(unreadable) => ApiError::from(unreadable),
        None => ApiError::not_found(format!("{} {:?} not found", R::KIND, key.key)),
    })
}

pub async fn get_namespaced<R: Resource>(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    Params(ReadParams {}): Params<ReadParams>,
) -> ApiResult<Json<R>> {
    get_object::<R>(&state, &namespace, &name).map(Json)
}

pub async fn get_cluster<R: Resource>(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Params(ReadParams {}): Params<ReadParams>,
) -> ApiResult<Json<R>> {
    get_object::<R>(&state, "", &name).map(Json)
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
/// get their `Created` event and a scheduler hint. Both API dialects create through it. A dry
/// run is judged as the create and stores nothing (no event, no hint).
pub(crate) async fn create<R: Resource>(state: &AppState, principal: &Principal, mut object: R, dry_run: bool) -> ApiResult<Outcome> {
    let now = chrono::Utc::now();
    if R::KIND == Kind::Node {
        principal.may_write_node(&object.meta().name)?;
    }
    if object.meta().name.is_empty() && R::KIND == Kind::Event {
        object.meta_mut().name = "event".into();
    }
    validate(&object)?;
    let object = object.into_object();
    crate::admission::check(&object, state.config.allow_host_path)?;
    let mut hint = None;
    // The first write of each transaction is the object asked for.
    let txn = match object {
        Object::Node(node) => {
            let registrant = if principal.role == Role::Node { Registrant::OwnNode } else { Registrant::Admin };
            ops::register_node(node, registrant, now, state.config.node_monitor_grace)
        }
        Object::Event(event) => {
            principal.may_record_event_from(&event.source)?;
            Txn::new().with(events::record(event, now))
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
            hint = Some(Key::new(Kind::Pod, &pod.metadata.namespace, &pod.metadata.name));
            Txn::new().with(ops::create(pod)).with(events::record(event, now))
        }
        Object::Deployment(o) => Txn::new().with(ops::create(stamped(*o, now))),
        Object::ReplicaSet(o) => Txn::new().with(ops::create(stamped(*o, now))),
        Object::Service(o) => Txn::new().with(ops::create_service(stamped(o, now), state.config.service_ranges)),
        Object::Namespace(o) => Txn::new().with(ops::create(stamped(o, now))),
        Object::ConfigMap(o) => Txn::new().with(ops::create(stamped(*o, now))),
        Object::Secret(o) => Txn::new().with(ops::create(stamped(*o, now))),
        Object::Lease(_) => return Err(ApiError::bad_request("leases are written by node registration and renewal, not created")),
    };
    let outcome = first_outcome(state, txn.dry_run(dry_run)).await?;
    if let Some(key) = hint.filter(|_| !dry_run) {
        state.scheduler.hint(key);
    }
    Ok(outcome)
}

fn stamped<R: Resource>(mut object: R, now: shared::model::Time) -> R {
    stamp_new(&mut object, now);
    object
}

/// Commits `txn` and answers the outcome of its first write, the object asked for.
async fn first_outcome(state: &AppState, txn: Txn) -> ApiResult<Outcome> {
    let mut outcomes = state.store.commit(txn).await?;
    outcomes.truncate(1);
    outcomes.pop().ok_or_else(|| ApiError::internal("the store returned no outcome"))
}

async fn create_response<R: Resource>(state: AppState, principal: Principal, object: R, dry_run: bool) -> ApiResult<Response> {
    let outcome = create(&state, &principal, object, dry_run).await?;
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
    Params(params): Params<WriteParams>,
    ObjectBody(body): ObjectBody,
) -> ApiResult<Response> {
    let dry_run = params.is_dry_run()?;
    let mut object = parse_object::<R>(&body)?;
    settle_namespace(&mut object, None)?;
    // A node registers with its agent's token, which the server signs that agent's requests with.
    let registration = match (R::KIND, bearer) {
        (Kind::Node, Some(Extension(bearer))) if !dry_run => Some((object.meta().name.clone(), bearer)),
        _ => None,
    };
    let response = create_response(state.clone(), principal, object, dry_run).await?;
    if let Some((node, bearer)) = registration {
        state.agent_keys.record(&node, &bearer);
    }
    Ok(response)
}

pub async fn create_namespaced<R: Resource>(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(namespace): Path<String>,
    Params(params): Params<WriteParams>,
    ObjectBody(body): ObjectBody,
) -> ApiResult<Response> {
    let dry_run = params.is_dry_run()?;
    let mut object = parse_object::<R>(&body)?;
    settle_namespace(&mut object, Some(&namespace))?;
    create_response(state, principal, object, dry_run).await
}

async fn replace<R: Resource>(
    state: AppState,
    principal: Principal,
    namespace: &str,
    name: &str,
    params: WriteParams,
    body: &[u8],
) -> ApiResult<Response> {
    let dry_run = params.is_dry_run()?;
    let object = parse_object::<R>(body)?;
    let outcome = replace_object(&state, &principal, namespace, name, object, dry_run).await?;
    Ok(object_response(StatusCode::OK, outcome.object()))
}

/// A PUT of `object` onto `namespace/name`: the names must agree, and the update is a CAS
/// on the body's resource_version. Both API dialects replace through it; a dry run stores nothing.
pub(crate) async fn replace_object<R: Resource>(
    state: &AppState,
    principal: &Principal,
    namespace: &str,
    name: &str,
    mut object: R,
    dry_run: bool,
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
    crate::admission::check(&object.clone().into_object(), state.config.allow_host_path)?;
    let write = match object.into_object() {
        Object::Service(service) => ops::update_service(service, state.config.service_ranges),
        other => ops::update(R::from_object(&other).expect("an object of its own kind").clone()),
    };
    first_outcome(state, Txn::new().with(write).dry_run(dry_run)).await
}

pub async fn replace_namespaced<R: Resource>(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path((namespace, name)): Path<(String, String)>,
    Params(params): Params<WriteParams>,
    ObjectBody(body): ObjectBody,
) -> ApiResult<Response> {
    replace::<R>(state, principal, &namespace, &name, params, &body).await
}

pub async fn replace_cluster<R: Resource>(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
    Params(params): Params<WriteParams>,
    ObjectBody(body): ObjectBody,
) -> ApiResult<Response> {
    replace::<R>(state, principal, "", &name, params, &body).await
}

/// Deletes an object; both API dialects delete through it. A dry run deletes nothing.
pub(crate) async fn delete<R: Resource>(
    state: &AppState,
    principal: &Principal,
    namespace: &str,
    name: &str,
    params: DeleteParams,
) -> ApiResult<Outcome> {
    let dry_run = params.is_dry_run()?;
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
    let outcome = first_outcome(state, txn.dry_run(dry_run)).await?;
    if R::KIND == Kind::Node && !dry_run {
        state.agent_keys.forget(name);
    }
    Ok(outcome)
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
    for kind in [Kind::Pod, Kind::Deployment, Kind::ReplicaSet, Kind::Service, Kind::ConfigMap, Kind::Secret] {
        let n = state.store.list(kind, Some(name)).1.len();
        if n > 0 {
            let noun = if n == 1 { kind.as_str().to_ascii_lowercase() } else { kind.plural().to_string() };
            left.push(format!("{n} {noun}"));
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

fn scale_of<R: Scalable>(object: &R) -> Scale {
    let meta = object.meta();
    Scale {
        kind: "Scale".into(),
        metadata: shared::model::ObjectMeta {
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version,
            ..Default::default()
        },
        spec: ScaleSpec { replicas: object.replicas() },
        status: ScaleStatus { replicas: object.counted() },
    }
}

pub async fn get_scale<R: Scalable>(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    Params(ReadParams {}): Params<ReadParams>,
) -> ApiResult<Json<Scale>> {
    let object = get_object::<R>(&state, &namespace, &name)?;
    Ok(Json(scale_of(&object)))
}

pub async fn put_scale<R: Scalable>(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    Params(params): Params<WriteParams>,
    BodyBytes(body): BodyBytes,
) -> ApiResult<Json<Scale>> {
    let dry_run = params.is_dry_run()?;
    let scale: Scale = parse_json(&body, "Scale")?;
    // The native API names no field manager: the entries stay as they are.
    let keep = |entries: &[ManagedFieldsEntry], _, _| entries.to_vec();
    scale_object::<R>(&state, &namespace, &name, scale, keep, dry_run).await.map(|o| Json(scale_of(&o)))
}

/// Sets a deployment's or ReplicaSet's replicas from a Scale (CAS on its resource_version
/// when non-zero); both API dialects scale through it. `record` turns the managed fields,
/// the replicas before and after into the entries a change of replicas leaves. A dry run
/// stores nothing.
pub(crate) async fn scale_object<R: Scalable>(
    state: &AppState,
    namespace: &str,
    name: &str,
    scale: Scale,
    record: impl Fn(&[ManagedFieldsEntry], i32, i32) -> Vec<ManagedFieldsEntry> + Send + Sync + 'static,
    dry_run: bool,
) -> ApiResult<R> {
    let noun = R::KIND.as_str().to_ascii_lowercase();
    shared::validation::validate_scale(&scale)
        .map_err(|details| ApiError::invalid(&format!("the scale of {noun} {namespace}/{name}"), details))?;
    let key = Key::new(R::KIND, namespace, name);
    let expected = scale.metadata.resource_version;
    let check_key = key.clone();
    let write = ops::modify::<R>(key, move |_, object| {
        ops::check_version(&check_key, expected, &object.clone().into_object())?;
        if object.replicas() != scale.spec.replicas {
            let managed = record(&object.meta().managed_fields, object.replicas(), scale.spec.replicas);
            object.set_replicas(scale.spec.replicas);
            object.meta_mut().generation += 1;
            object.meta_mut().managed_fields = managed;
        }
        Ok(())
    });
    let outcome = first_outcome(state, Txn::new().with(write).dry_run(dry_run)).await?;
    match outcome.object().and_then(|o| R::from_object(o)) {
        Some(object) => Ok(object.clone()),
        _ => Err(ApiError::internal(format!("{noun} {namespace}/{name} vanished during the scale"))),
    }
}
