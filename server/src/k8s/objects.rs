//! The object routes: list (with selectors, `limit`/`continue`, Table), watch, get, create,
//! replace, patch and delete for every kind [`RESOURCES`] names, and the subresources `log`,
//! `status`, `binding` and `scale`. Every read and write goes through the native API's own
//! functions (`api::objects`, `api::pods`), after [`convert`] has translated the body.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Extension;
use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use serde::Deserialize;
use serde_json::{Value, json};
use shared::model::{Deployment, Event, Kind, Namespace, Node, Object, Pod, Service};

use super::convert::{self, Convert};
use super::discovery::RESOURCES;
use super::{Result, Status, patch, protobuf, table, watch};
use crate::api::AppState;
use crate::api::objects::{self as native, DeleteParams, Filter, ListParams};
use crate::auth::Principal;
use crate::error::ApiError;
use crate::resources::Resource;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/k8s/api/v1/{plural}", any(core))
        .route("/k8s/api/v1/{plural}/{name}", any(core))
        .route("/k8s/api/v1/{plural}/{name}/{sub}", any(core))
        .route("/k8s/api/v1/namespaces/{namespace}/{plural}", any(core))
        .route("/k8s/api/v1/namespaces/{namespace}/{plural}/{name}", any(core))
        .route("/k8s/api/v1/namespaces/{namespace}/{plural}/{name}/{sub}", any(core))
        .route("/k8s/apis/apps/v1/{plural}", any(apps))
        .route("/k8s/apis/apps/v1/namespaces/{namespace}/{plural}", any(apps))
        .route("/k8s/apis/apps/v1/namespaces/{namespace}/{plural}/{name}", any(apps))
        .route("/k8s/apis/apps/v1/namespaces/{namespace}/{plural}/{name}/{sub}", any(apps))
}

/// The query parameters Kubernetes' clients send that change an answer; the ones Shepherd
/// cannot honour are refused. Others are ignored: `fieldValidation` (fields are always
/// checked strictly), `fieldManager`, `pretty`, `resourceVersionMatch=NotOlderThan`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct K8sQuery {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub watch: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
    pub limit: Option<usize>,
    #[serde(rename = "continue")]
    pub continue_: Option<String>,
    pub include_object: Option<String>,
    pub allow_watch_bookmarks: Option<String>,
    pub timeout_seconds: Option<u64>,
    pub send_initial_events: Option<String>,
    pub grace_period_seconds: Option<i64>,
    pub propagation_policy: Option<String>,
    pub dry_run: Option<String>,
    pub container: Option<String>,
    pub follow: Option<String>,
    pub tail_lines: Option<u64>,
    pub timestamps: Option<String>,
    pub previous: Option<String>,
    pub since_seconds: Option<i64>,
    pub limit_bytes: Option<u64>,
}

pub fn flag(value: &Option<String>) -> Result<bool> {
    value.as_deref().map_or(Ok(false), |text| shared::parse::flag(text).map_err(|e| Status::bad_request(e.to_string())))
}

/// Where a request points: the resource, and the namespace, name and subresource if any.
#[derive(Debug, Clone)]
struct Target {
    kind: Served,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

/// Leases are the native API's alone (`/api/v1/leases`): [`Served::parse`] names none.
pub const NO_LEASES: &str = "the Kubernetes-compatible API serves no leases";

/// What a plural names: a stored kind, or the endpoints derived from services.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    Stored(Kind),
    Endpoints,
}

impl Served {
    fn parse(group: &str, plural: &str) -> Option<Served> {
        let served = match (group, plural) {
            ("", "pods") => Served::Stored(Kind::Pod),
            ("", "nodes") => Served::Stored(Kind::Node),
            ("", "namespaces") => Served::Stored(Kind::Namespace),
            ("", "services") => Served::Stored(Kind::Service),
            ("", "events") => Served::Stored(Kind::Event),
            ("", "endpoints") => Served::Endpoints,
            ("apps", "deployments") => Served::Stored(Kind::Deployment),
            _ => return None,
        };
        Some(served)
    }

    /// The kind the store holds for it.
    pub fn stored(self) -> Kind {
        match self {
            Served::Stored(kind) => kind,
            Served::Endpoints => Kind::Service,
        }
    }

    pub fn kind_name(self) -> &'static str {
        match self {
            Served::Stored(kind) => kind.as_str(),
            Served::Endpoints => "Endpoints",
        }
    }

    fn plural(self) -> &'static str {
        match self {
            Served::Stored(kind) => kind.plural(),
            Served::Endpoints => "endpoints",
        }
    }

    fn namespaced(self) -> bool {
        self.stored().namespaced()
    }

    pub fn api_version(self) -> &'static str {
        if self == Served::Stored(Kind::Deployment) { "apps/v1" } else { "v1" }
    }
}

/// An object in Kubernetes' JSON shape.
pub fn to_json(served: Served, object: &Object) -> Value {
    let value = match (served, object) {
        (Served::Endpoints, Object::Service(s)) => serde_json::to_value(convert::endpoints(s)),
        (_, Object::Pod(o)) => serde_json::to_value(o.to_k8s()),
        (_, Object::Node(o)) => serde_json::to_value(o.to_k8s()),
        (_, Object::Deployment(o)) => serde_json::to_value(o.to_k8s()),
        (_, Object::Service(o)) => serde_json::to_value(o.to_k8s()),
        (_, Object::Event(o)) => serde_json::to_value(o.to_k8s()),
        (_, Object::Namespace(o)) => serde_json::to_value(o.to_k8s()),
        (_, Object::Lease(_)) => unreachable!("{NO_LEASES}"),
    };
    value.unwrap_or(Value::Null)
}

async fn core(
    state: State<AppState>,
    principal: Extension<Principal>,
    method: Method,
    headers: HeaderMap,
    Path(path): Path<HashMap<String, String>>,
    query: std::result::Result<Query<K8sQuery>, QueryRejection>,
    body: Bytes,
) -> Response {
    serve(state, principal, method, headers, "", path, query, body).await.unwrap_or_else(IntoResponse::into_response)
}

async fn apps(
    state: State<AppState>,
    principal: Extension<Principal>,
    method: Method,
    headers: HeaderMap,
    Path(path): Path<HashMap<String, String>>,
    query: std::result::Result<Query<K8sQuery>, QueryRejection>,
    body: Bytes,
) -> Response {
    serve(state, principal, method, headers, "apps", path, query, body).await.unwrap_or_else(IntoResponse::into_response)
}

fn target(group: &str, mut path: HashMap<String, String>) -> Result<Target> {
    let plural = path.remove("plural").unwrap_or_default();
    let mut namespace = path.remove("namespace");
    let name = path.remove("name");
    let sub = path.remove("sub");
    // `/api/v1/namespaces/{name}` is a namespace, not a list in a namespace.
    let kind = match Served::parse(group, &plural) {
        Some(kind) => kind,
        None => {
            let known: Vec<&str> = RESOURCES.iter().filter(|r| r.group == group && !r.name.contains('/')).map(|r| r.name).collect();
            return Err(Status::not_found(
                &plural,
                "",
                format!("the server doesn't have a resource type {plural:?}; this API serves {}", known.join(", ")),
            ));
        }
    };
    if !kind.namespaced() {
        if let Some(ns) = namespace.take() {
            return Err(Status::not_found(
                kind.plural(),
                name.as_deref().unwrap_or(""),
                format!("{} are not namespaced (asked in {ns:?})", kind.plural()),
            ));
        }
    } else if name.is_some() && namespace.is_none() {
        return Err(Status::not_found(
            kind.plural(),
            "",
            format!("{} live in a namespace: use /namespaces/{{namespace}}/{}", kind.plural(), kind.plural()),
        ));
    }
    if let Some(sub) = &sub {
        let full = format!("{}/{sub}", kind.plural());
        if !RESOURCES.iter().any(|r| r.group == group && r.name == full) {
            return Err(Status::not_found(&full, name.as_deref().unwrap_or(""), format!("the server doesn't have a subresource {full:?}")));
        }
    }
    Ok(Target { kind, namespace, name, sub })
}

#[allow(clippy::too_many_arguments)]
async fn serve(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    method: Method,
    headers: HeaderMap,
    group: &str,
    path: HashMap<String, String>,
    query: std::result::Result<Query<K8sQuery>, QueryRejection>,
    body: Bytes,
) -> Result<Response> {
    let target = target(group, path)?;
    let Query(query) = query.map_err(|e| Status::bad_request(format!("invalid query parameters: {}", e.body_text())))?;
    if query.dry_run.as_deref().is_some_and(|d| !d.is_empty()) {
        return Err(Status::bad_request("Shepherd does not support dryRun: every write it accepts is made"));
    }
    // A failure about one object names it, as Kubernetes' `details` do, whichever layer failed.
    let named = target.name.clone().map(|name| (target.kind.plural(), name));
    let req = Req { state, principal, headers, query, target };
    let answer = match (&method, req.target.name.is_some(), req.target.sub.as_deref()) {
        (&Method::GET, false, None) => req.list().await,
        (&Method::POST, false, None) => req.create(&body).await,
        (&Method::GET, true, None) => req.get(),
        (&Method::PUT, true, None) => req.replace(&body).await,
        (&Method::PATCH, true, None) => req.patch(&body).await,
        (&Method::DELETE, true, None) => req.delete(&body).await,
        (&Method::GET, true, Some("log")) => req.log().await,
        (&Method::GET, true, Some("status")) => req.get(),
        (&Method::POST, true, Some("binding")) => req.bind(&body).await,
        (&Method::GET, true, Some("scale")) => req.get_scale(),
        (&Method::PUT, true, Some("scale")) => req.put_scale(&body).await,
        (&Method::PATCH, true, Some("scale")) => req.patch_scale(&body).await,
        _ => Err(Status::method_not_allowed(format!(
            "{method} is not supported on {}{}; discovery lists each resource's verbs",
            req.target.kind.plural(),
            req.target.sub.as_deref().map(|s| format!("/{s}")).unwrap_or_default()
        ))),
    };
    answer.map_err(|status| match named {
        Some((kind, name)) if status.kind.is_none() => status.about(kind, &name),
        _ => status,
    })
}

struct Req {
    state: AppState,
    principal: Principal,
    headers: HeaderMap,
    query: K8sQuery,
    target: Target,
}

/// Calls `$f::<R>` for the stored kind `$kind` (and awaits it when asked).
macro_rules! by_kind {
    ($kind:expr, $f:ident($($arg:expr),*) $(.$await:ident)?) => {
        match $kind {
            Kind::Pod => $f::<Pod>($($arg),*)$(.$await)?,
            Kind::Node => $f::<Node>($($arg),*)$(.$await)?,
            Kind::Deployment => $f::<Deployment>($($arg),*)$(.$await)?,
            Kind::Service => $f::<Service>($($arg),*)$(.$await)?,
            Kind::Event => $f::<Event>($($arg),*)$(.$await)?,
            Kind::Namespace => $f::<Namespace>($($arg),*)$(.$await)?,
            Kind::Lease => unreachable!("{NO_LEASES}"),
        }
    };
}

/// A field selector in Kubernetes' field labels (`spec.nodeName`, each the translation of a
/// native field `kind` can be selected by), in the native API's spelling; any other label,
/// the native spelling included, is refused as Kubernetes refuses it.
fn native_field_selector(kind: Kind, text: &str) -> Result<String> {
    let mut labels: Vec<(String, &str)> =
        crate::api::objects::supported_fields(kind).iter().map(|native| (convert::k8s_field(kind, native), *native)).collect();
    labels.dedup_by(|a, b| a.0 == b.0);
    let mut terms = Vec::new();
    for term in text.split(',') {
        let at = term.find(['=', '!']).unwrap_or(term.len());
        let (field, rest) = term.split_at(at);
        let field = field.trim();
        if rest.is_empty() {
            // Not `field=value`: the native parser says so.
            terms.push(term.to_string());
            continue;
        }
        let Some((_, native)) = labels.iter().find(|(label, _)| label == field) else {
            let named: Vec<&str> = labels.iter().map(|(label, _)| label.as_str()).collect();
            let why = if kind == Kind::Event && field == "involvedObject.fieldPath" {
                "Shepherd's events are about whole objects and carry no field path; "
            } else {
                ""
            };
            return Err(Status::bad_request(format!(
                "field label not supported: {field} ({why}{} can be selected by {})",
                kind.plural(),
                named.join(", ")
            )));
        };
        terms.push(format!("{native}{rest}"));
    }
    Ok(terms.join(","))
}

/// The order a list answers in, which `continue` resumes after: events by when they last
/// happened, then first (the order `kubectl describe` sorts them in, and a time-ordered
/// `kubectl get events`), everything else by namespace and name.
fn list_order(object: &Object) -> String {
    match object {
        Object::Event(event) => {
            let at = |time: &Option<shared::model::Time>| time.map(|t| t.format("%Y-%m-%dT%H:%M:%S%.9fZ").to_string()).unwrap_or_default();
            format!("{} {} {}", at(&event.last_timestamp), at(&event.first_timestamp), event.metadata.key())
        }
        other => other.metadata().key(),
    }
}

/// The `continue` token of a page that ends at the list order key `after`: versioned, and
/// hex so that it is opaque and safe in a URL.
fn continue_token(after: &str) -> String {
    let hex: String = after.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{CONTINUE_VERSION}{hex}")
}

const CONTINUE_VERSION: &str = "v1.";

/// The list order key a [`continue_token`] holds; anything else is Kubernetes' 400.
fn continue_after(token: &str) -> Result<String> {
    let bytes = token.strip_prefix(CONTINUE_VERSION).filter(|hex| hex.len() % 2 == 0).and_then(|hex| {
        (0..hex.len()).step_by(2).map(|i| hex.get(i..i + 2).and_then(|pair| u8::from_str_radix(pair, 16).ok())).collect::<Option<Vec<u8>>>()
    });
    bytes.and_then(|b| String::from_utf8(b).ok()).ok_or_else(|| {
        Status::bad_request(format!(
            "invalid continue token: {token:?} is not one this server issued; pass the previous page's metadata.continue as it came, or leave continue out to list from the start"
        ))
    })
}

fn parse_version(text: Option<&str>) -> Result<u64> {
    match text {
        None | Some("") => Ok(0),
        Some(text) => text.parse().map_err(|_| Status::bad_request(format!("resourceVersion {text:?} is not one this server issued"))),
    }
}

fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.split(',').next().is_some_and(|first| first.contains("as=Table") && first.contains("g=meta.k8s.io")))
}

fn media_type(headers: &HeaderMap) -> String {
    let text = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    text.split(';').next().unwrap_or("").trim().to_ascii_lowercase()
}

fn parse_body(body: &[u8]) -> Result<Value> {
    serde_json::from_slice(body).map_err(|e| Status::bad_request(format!("the body is not valid JSON: {e}")))
}

impl Req {
    fn filter(&self) -> Result<Filter> {
        let params = ListParams {
            label_selector: self.query.label_selector.clone().filter(|s| !s.is_empty()),
            field_selector: match self.query.field_selector.as_deref().filter(|s| !s.is_empty()) {
                Some(text) => Some(native_field_selector(self.target.kind.stored(), text)?),
                None => None,
            },
            watch: None,
            resource_version: None,
        };
        Ok(Filter::new(self.target.kind.stored(), self.target.namespace.clone(), &params)?)
    }

    fn kind_name(&self) -> &'static str {
        self.target.kind.kind_name()
    }

    fn name(&self) -> &str {
        self.target.name.as_deref().unwrap_or_default()
    }

    fn namespace(&self) -> &str {
        self.target.namespace.as_deref().unwrap_or_default()
    }

    fn stored(&self) -> Result<Arc<Object>> {
        let kind = self.target.kind.stored();
        let key = crate::store::Key::new(kind, self.namespace(), self.name());
        self.state.store.get(&key).ok_or_else(|| {
            Status::not_found(
                self.target.kind.plural(),
                self.name(),
                format!("{} \"{}\" not found", self.target.kind.plural(), self.name()),
            )
        })
    }

    /// One object, or a Table of it.
    fn answer(&self, code: StatusCode, object: &Object) -> Response {
        if wants_table(&self.headers) {
            let table = table::table(self.target.kind, std::slice::from_ref(object), &self.state, self.include_object(), None);
            return (code, Json(table)).into_response();
        }
        (code, Json(to_json(self.target.kind, object))).into_response()
    }

    fn include_object(&self) -> table::Include {
        match self.query.include_object.as_deref() {
            Some("Object") => table::Include::Object,
            Some("None") => table::Include::None,
            _ => table::Include::Metadata,
        }
    }

    fn get(&self) -> Result<Response> {
        Ok(self.answer(StatusCode::OK, &*self.stored()?))
    }

    async fn list(&self) -> Result<Response> {
        let filter = self.filter()?;
        if flag(&self.query.watch)? {
            if self.query.continue_.as_deref().is_some_and(|c| !c.is_empty()) {
                return Err(Status::bad_request("a watch takes no continue token: watch from the resourceVersion of the list"));
            }
            return self.watch(filter);
        }
        // Any state at least as new is served (Kubernetes' "NotOlderThan"); junk is refused.
        parse_version(self.query.resource_version.as_deref())?;
        if self.query.resource_version_match.as_deref().is_some_and(|m| m == "Exact") {
            return Err(Status::bad_request("Shepherd keeps no old states: resourceVersionMatch=Exact is not supported"));
        }
        let (revision, mut objects) = self.listed(&filter);
        objects.sort_by_cached_key(list_order);
        // `continue` holds the order key of the last object of the previous page.
        if let Some(token) = self.query.continue_.as_deref().filter(|c| !c.is_empty()) {
            let after = continue_after(token)?;
            objects.retain(|o| list_order(o) > after);
        }
        let mut next = None;
        let mut remaining = None;
        if let Some(limit) = self.query.limit.filter(|l| *l > 0 && *l < objects.len()) {
            remaining = Some(objects.len() - limit);
            objects.truncate(limit);
            next = objects.last().map(|o| continue_token(&list_order(o)));
        }
        if wants_table(&self.headers) {
            let page = Some((revision, next));
            return Ok(Json(table::table(self.target.kind, &objects, &self.state, self.include_object(), page)).into_response());
        }
        let items: Vec<Value> = objects.iter().map(|o| to_json(self.target.kind, o)).collect();
        let mut metadata = json!({"resourceVersion": revision.to_string()});
        if let Some(next) = next {
            metadata["continue"] = next.into();
            metadata["remainingItemCount"] = remaining.unwrap_or_default().into();
        }
        Ok(Json(json!({
            "apiVersion": self.target.kind.api_version(),
            "kind": format!("{}List", self.kind_name()),
            "metadata": metadata,
            "items": items,
        }))
        .into_response())
    }

    /// The objects the filter selects, read through the native list, and the revision.
    fn listed(&self, filter: &Filter) -> (u64, Vec<Object>) {
        fn read<R: Resource>(state: &AppState, filter: &Filter) -> (u64, Vec<Object>) {
            let list = native::list::<R>(state, filter);
            (list.resource_version, list.items.into_iter().map(|o| o.into_object()).collect())
        }
        by_kind!(self.target.kind.stored(), read(&self.state, filter))
    }

    fn watch(&self, filter: Filter) -> Result<Response> {
        if flag(&self.query.send_initial_events)? {
            return Err(Status::bad_request(
                "sendInitialEvents (watch-list) is not supported: list, then watch from the list's resourceVersion",
            ));
        }
        let from = parse_version(self.query.resource_version.as_deref())?;
        let initial = if from == 0 { Some(self.listed(&filter)) } else { None };
        let shape = watch::Shape {
            kind: self.target.kind,
            table: wants_table(&self.headers).then(|| self.include_object()),
            bookmarks: flag(&self.query.allow_watch_bookmarks)?,
        };
        let timeout = self.query.timeout_seconds.map(std::time::Duration::from_secs);
        Ok(watch::stream(self.state.clone(), filter, from, initial, shape, timeout))
    }

    fn refuse_endpoints(&self) -> Result<()> {
        if self.target.kind == Served::Endpoints {
            return Err(Status::method_not_allowed(
                "endpoints are derived from services and their ready pods by the endpoints controller; they cannot be written",
            ));
        }
        Ok(())
    }

    /// A whole object's body as JSON: JSON itself, or the protobuf kubectl's typed commands
    /// send (`create namespace`).
    fn object_body(&self, body: &[u8]) -> Result<Value> {
        match media_type(&self.headers).as_str() {
            "application/json" | "" => parse_body(body),
            protobuf::MEDIA_TYPE => protobuf::namespace(body),
            other => Err(Status::unsupported_media_type(format!("send the body as application/json (got {other})"))),
        }
    }

    async fn create(&self, body: &[u8]) -> Result<Response> {
        self.refuse_endpoints()?;
        let value = self.object_body(body)?;
        let outcome = by_kind!(self.target.kind.stored(), create_as(self, &value).await)?;
        let object = outcome.object().ok_or_else(|| Status::from(ApiError::internal("the store returned no object")))?;
        Ok(self.answer(StatusCode::CREATED, object))
    }

    async fn replace(&self, body: &[u8]) -> Result<Response> {
        self.refuse_endpoints()?;
        let value = self.object_body(body)?;
        self.write(&value).await
    }

    /// Writes a whole object in Kubernetes' shape over the stored one (PUT, and a patch's result).
    async fn write(&self, value: &Value) -> Result<Response> {
        let outcome = by_kind!(self.target.kind.stored(), replace_as(self, value).await)?;
        let object = outcome.object().ok_or_else(|| Status::from(ApiError::internal("the store returned no object")))?;
        Ok(self.answer(StatusCode::OK, object))
    }

    async fn patch(&self, body: &[u8]) -> Result<Response> {
        self.refuse_endpoints()?;
        let kind = patch::PatchKind::from_media_type(&media_type(&self.headers))?;
        let patch_value = parse_body(body)?;
        // A patch is read-modify-write; a lost race is retried on the fresh state unless the
        // patch itself names the version it expects.
        let mut attempts = 0;
        loop {
            let current = to_json(self.target.kind, &*self.stored()?);
            let patched = patch::apply(kind, current, &patch_value)?;
            match self.write(&patched).await {
                Err(status)
                    if status.reason == "Conflict" && attempts < 3 && patch_value.pointer("/metadata/resourceVersion").is_none() =>
                {
                    attempts += 1;
                }
                result => return result,
            }
        }
    }

    async fn delete(&self, body: &[u8]) -> Result<Response> {
        self.refuse_endpoints()?;
        let options = match media_type(&self.headers).as_str() {
            _ if body.is_empty() => json!({}),
            // `kubectl drain` deletes through a typed client.
            protobuf::MEDIA_TYPE => protobuf::delete_options(body)?,
            _ => parse_body(body)?,
        };
        if options.get("orphanDependents").and_then(Value::as_bool) == Some(true)
            || options.get("dryRun").and_then(Value::as_array).is_some_and(|d| !d.is_empty())
        {
            return Err(Status::bad_request("orphanDependents and dryRun are not supported: Shepherd deletes in the background"));
        }
        let grace = options.get("gracePeriodSeconds").and_then(Value::as_i64).or(self.query.grace_period_seconds);
        if let Some(message) = grace.and_then(shared::validation::grace_seconds_error) {
            let causes = vec![convert::Cause::invalid("gracePeriodSeconds", message)];
            return Err(convert::Error::Refused { kind: self.kind_name(), name: self.name().to_string(), causes }.into());
        }
        let policy = options.get("propagationPolicy").and_then(Value::as_str).or(self.query.propagation_policy.as_deref());
        if let Some(policy) = policy.filter(|p| *p != "Background") {
            return Err(Status::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                format!(
                    "propagationPolicy {policy:?} is not supported: Shepherd deletes in the background (a deployment's controller removes its pods)"
                ),
            ));
        }
        let preconditions = options.get("preconditions");
        let resource_version = parse_version(preconditions.and_then(|p| p.get("resourceVersion")).and_then(Value::as_str))?;
        let uid = preconditions.and_then(|p| p.get("uid")).and_then(Value::as_str).map(str::to_string);
        if let Some(uid) = uid.as_deref().filter(|_| self.target.kind != Served::Stored(Kind::Pod))
            && self.stored()?.metadata().uid != uid
        {
            return Err(Status::new(
                StatusCode::CONFLICT,
                "Conflict",
                format!("the uid precondition {uid} does not match {} {}", self.kind_name(), self.name()),
            ));
        }
        let params =
            DeleteParams { resource_version: (resource_version > 0).then_some(resource_version), grace_period_seconds: grace, uid };
        let outcome = by_kind!(self.target.kind.stored(), delete_as(self, params).await)?;
        match outcome {
            crate::store::Outcome::Put { object, .. } => Ok(self.answer(StatusCode::OK, &object)),
            other => match other.object() {
                Some(object) => Ok(self.answer(StatusCode::OK, object)),
                None => Ok(Json(success(self.target.kind, self.name())).into_response()),
            },
        }
    }

    async fn log(&self) -> Result<Response> {
        if flag(&self.query.timestamps)?
            || flag(&self.query.previous)?
            || self.query.since_seconds.is_some()
            || self.query.limit_bytes.is_some()
        {
            return Err(Status::bad_request(
                "Shepherd's logs support follow, tailLines and container; timestamps, previous, sinceSeconds and limitBytes are not supported",
            ));
        }
        let params = crate::api::pods::LogParams {
            container: self.query.container.clone(),
            tail: self.query.tail_lines,
            follow: self.query.follow.as_ref().map(|_| flag(&self.query.follow)).transpose()?,
        };
        let path = Path((self.namespace().to_string(), self.name().to_string()));
        Ok(crate::api::pods::log(State(self.state.clone()), path, crate::api::Params(params)).await?)
    }

    async fn bind(&self, body: &[u8]) -> Result<Response> {
        let binding: k8s_openapi::api::core::v1::Binding =
            serde_json::from_slice(body).map_err(|e| Status::bad_request(format!("the body is not a valid Binding: {e}")))?;
        let native_binding = json!({
            "kind": "Binding",
            "metadata": {"name": binding.metadata.name.unwrap_or_default(), "uid": binding.metadata.uid.unwrap_or_default()},
            "target": {"kind": binding.target.kind.unwrap_or_default(), "name": binding.target.name.unwrap_or_default()},
        });
        let path = Path((self.namespace().to_string(), self.name().to_string()));
        let bytes = crate::api::BodyBytes(Bytes::from(native_binding.to_string()));
        crate::api::pods::bind(State(self.state.clone()), path, bytes).await?;
        Ok((StatusCode::CREATED, Json(json!({"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201, "metadata": {}})))
            .into_response())
    }

    fn deployment(&self) -> Result<Deployment> {
        match &*self.stored()? {
            Object::Deployment(d) => Ok(Deployment::clone(d)),
            _ => Err(Status::not_found("deployments", self.name(), "not a deployment")),
        }
    }

    fn get_scale(&self) -> Result<Response> {
        Ok(Json(convert::scale_out(&self.deployment()?)).into_response())
    }

    async fn scale_to(&self, value: &Value) -> Result<Response> {
        let scale = convert::scale_in(value)?;
        if !scale.metadata.name.is_empty() && scale.metadata.name != self.name() {
            return Err(Status::bad_request(format!(
                "the Scale names {:?}, but the path names deployment {:?}",
                scale.metadata.name,
                self.name()
            )));
        }
        let deployment = native::scale_deployment(&self.state, self.namespace(), self.name(), scale).await?;
        Ok(Json(convert::scale_out(&deployment)).into_response())
    }

    async fn put_scale(&self, body: &[u8]) -> Result<Response> {
        match media_type(&self.headers).as_str() {
            "application/json" | "" => self.scale_to(&parse_body(body)?).await,
            other => Err(Status::unsupported_media_type(format!("send the Scale as application/json (got {other})"))),
        }
    }

    async fn patch_scale(&self, body: &[u8]) -> Result<Response> {
        let kind = patch::PatchKind::from_media_type(&media_type(&self.headers))?;
        let current = serde_json::to_value(convert::scale_out(&self.deployment()?)).unwrap_or_default();
        let mut patched = patch::apply(kind, current, &parse_body(body)?)?;
        // The patch is against the state just read: no version check of its own.
        if let Some(meta) = patched.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
        }
        self.scale_to(&patched).await
    }
}

/// The `Status` a delete answers when the object is gone and there is nothing to return.
fn success(kind: Served, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Status", "status": "Success", "metadata": {}, "details": {"name": name, "kind": kind.plural()}})
}

fn decode_for<R: Convert>(req: &Req, value: &Value) -> Result<R> {
    if let Some(kind) = value.get("kind").and_then(Value::as_str).filter(|k| *k != req.kind_name()) {
        return Err(Status::bad_request(format!("the body is a {kind} but this path takes a {}", req.kind_name())));
    }
    if let Some(version) = value.get("apiVersion").and_then(Value::as_str).filter(|v| *v != req.target.kind.api_version()) {
        return Err(Status::bad_request(format!(
            "apiVersion {version:?} is not served for {}: use {}",
            req.kind_name(),
            req.target.kind.api_version()
        )));
    }
    Ok(convert::decode::<R>(value)?)
}

/// A native failure as a Status: a 422's field errors become causes named in the fields of
/// the Kubernetes object, with its kind and name, as when [`convert`] refuses a body.
fn refused(kind: Kind, name: String) -> impl FnOnce(ApiError) -> Status {
    move |e| {
        if e.status != StatusCode::UNPROCESSABLE_ENTITY || e.details.is_empty() {
            return Status::from(e);
        }
        let causes = convert::invalid_causes(kind, e.details);
        Status::from(convert::Error::Refused { kind: kind.as_str(), name, causes })
    }
}

async fn create_as<R: Convert>(req: &Req, value: &Value) -> Result<crate::store::Outcome> {
    let mut object: R = decode_for(req, value)?;
    if !R::KIND.namespaced() {
        object.meta_mut().namespace.clear();
    }
    native::settle_namespace(&mut object, req.target.namespace.as_deref())?;
    let name = object.meta().name.clone();
    native::create(&req.state, &req.principal, object).await.map_err(refused(R::KIND, name))
}

async fn replace_as<R: Convert>(req: &Req, value: &Value) -> Result<crate::store::Outcome> {
    let object: R = decode_for(req, value)?;
    native::replace_object(&req.state, &req.principal, req.namespace(), req.name(), object)
        .await
        .map_err(refused(R::KIND, req.name().to_string()))
}

async fn delete_as<R: Convert>(req: &Req, params: DeleteParams) -> Result<crate::store::Outcome> {
    Ok(native::delete::<R>(&req.state, &req.principal, req.namespace(), req.name(), params).await?)
}
