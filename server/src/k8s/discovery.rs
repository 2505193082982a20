//! What a Kubernetes client asks first: `/version` (also at the server's root, where
//! `kubectl get --raw /version` asks: a raw path is taken from the host, not from the
//! kubeconfig's `/k8s`), the legacy discovery documents (`/api`,
//! `/api/v1`, `/apis`, `/apis/apps/v1`) and OpenAPI v3. The OpenAPI documents list each
//! resource's operations with `x-kubernetes-group-version-kind` and the `fieldValidation`
//! parameter, which is how kubectl learns that the server validates fields itself: it then
//! sends `kubectl apply` bodies as they are and the server refuses unsupported fields (422).
//! They carry no schemas, so `kubectl explain` has nothing to show. `/openapi/v2` is the
//! same operations as one Swagger 2.0 JSON document, for clients that read only v2 (kubectl
//! itself asks v2 for protobuf, which Shepherd does not speak, and uses v3).

use axum::Json;
use axum::Router;
use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::{Value, json};

use super::Status;
use crate::api::AppState;

/// A resource kubectl can name, with what discovery says of it. Subresources have a `/`.
pub struct ResourceInfo {
    pub group: &'static str,
    pub name: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub short: &'static [&'static str],
    pub verbs: &'static [&'static str],
}

const ALL_VERBS: &[&str] = &["create", "delete", "get", "list", "patch", "update", "watch"];
const READ: &[&str] = &["get", "list", "watch"];
const GET: &[&str] = &["get"];

const fn resource(
    group: &'static str,
    name: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    verbs: &'static [&'static str],
) -> ResourceInfo {
    ResourceInfo { group, name, singular, kind, namespaced, short, verbs }
}

/// Every resource this API serves; the routes in `objects` answer exactly these.
pub const RESOURCES: &[ResourceInfo] = &[
    resource("", "pods", "pod", "Pod", true, &["po"], ALL_VERBS),
    resource("", "pods/log", "", "Pod", true, &[], GET),
    resource("", "pods/status", "", "Pod", true, &[], GET),
    resource("", "pods/binding", "", "Binding", true, &[], &["create"]),
    resource("", "nodes", "node", "Node", false, &["no"], ALL_VERBS),
    resource("", "nodes/status", "", "Node", false, &[], GET),
    resource("", "namespaces", "namespace", "Namespace", false, &["ns"], ALL_VERBS),
    resource("", "services", "service", "Service", true, &["svc"], ALL_VERBS),
    resource("", "endpoints", "endpoints", "Endpoints", true, &["ep"], READ),
    resource("", "events", "event", "Event", true, &["ev"], ALL_VERBS),
    resource("apps", "deployments", "deployment", "Deployment", true, &["deploy"], ALL_VERBS),
    resource("apps", "deployments/scale", "", "Scale", true, &[], &["get", "patch", "update"]),
    resource("apps", "deployments/status", "", "Deployment", true, &[], GET),
];

/// Where the server's version is read, by anyone, as kube-apiserver's `/version` (the
/// `system:public-info-viewer` role): kubectl reads it under the kubeconfig's `/k8s`, and
/// `kubectl get --raw /version` at the root.
pub const VERSION_PATHS: [&str; 2] = ["/k8s/version", "/version"];

pub fn router() -> Router<AppState> {
    Router::new()
        .route(VERSION_PATHS[0], get(version))
        .route(VERSION_PATHS[1], get(version))
        .route("/k8s/api", get(api_versions))
        .route("/k8s/api/v1", get(|| async { resource_list("") }))
        .route("/k8s/apis", get(api_groups))
        .route("/k8s/apis/apps/v1", get(|| async { resource_list("apps") }))
        .route("/k8s/openapi/v3", get(openapi_index))
        .route("/k8s/openapi/v3/api/v1", get(|| async { Json(openapi_document("")) }))
        .route("/k8s/openapi/v3/apis/{group}/v1", get(openapi_group))
        .route("/k8s/openapi/v2", get(|| async { Json(swagger()) }))
}

async fn version() -> Json<k8s_openapi::apimachinery::pkg::version::Info> {
    Json(k8s_openapi::apimachinery::pkg::version::Info {
        major: "1".into(),
        minor: "32".into(),
        git_version: format!("v1.32.0-shepherd.{}", env!("CARGO_PKG_VERSION")),
        platform: format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
        ..Default::default()
    })
}

async fn api_versions() -> Json<meta::APIVersions> {
    Json(meta::APIVersions { versions: vec!["v1".into()], server_address_by_client_cidrs: Vec::new() })
}

async fn api_groups() -> Json<meta::APIGroupList> {
    let version = meta::GroupVersionForDiscovery { group_version: "apps/v1".into(), version: "v1".into() };
    Json(meta::APIGroupList {
        groups: vec![meta::APIGroup {
            name: "apps".into(),
            preferred_version: Some(version.clone()),
            versions: vec![version],
            server_address_by_client_cidrs: None,
        }],
    })
}

fn group_version(group: &str) -> String {
    if group.is_empty() { "v1".into() } else { format!("{group}/v1") }
}

fn resource_list(group: &str) -> Json<meta::APIResourceList> {
    let resources = RESOURCES
        .iter()
        .filter(|r| r.group == group)
        .map(|r| {
            // A scale subresource is autoscaling/v1's Scale.
            let (scale_group, scale_version) =
                if r.kind == "Scale" { (Some("autoscaling".to_string()), Some("v1".to_string())) } else { (None, None) };
            meta::APIResource {
                name: r.name.into(),
                singular_name: r.singular.into(),
                kind: r.kind.into(),
                namespaced: r.namespaced,
                short_names: (!r.short.is_empty()).then(|| r.short.iter().map(|s| s.to_string()).collect()),
                verbs: r.verbs.iter().map(|v| v.to_string()).collect(),
                categories: (r.name == "pods" || r.name == "services" || r.name == "deployments").then(|| vec!["all".into()]),
                group: scale_group,
                version: scale_version,
                storage_version_hash: None,
            }
        })
        .collect();
    Json(meta::APIResourceList { group_version: group_version(group), resources })
}

/// A stable hash of a document, so that kubectl's cache stays valid across restarts of the
/// same build and changes with the next.
fn hash(group: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (env!("CARGO_PKG_VERSION"), group, openapi_document(group).to_string()).hash(&mut hasher);
    format!("{:016X}", hasher.finish())
}

async fn openapi_index() -> Json<Value> {
    let entry = |group: &str| {
        let path = if group.is_empty() { "api/v1".to_string() } else { format!("apis/{group}/v1") };
        (path.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={}", hash(group))}))
    };
    let paths: serde_json::Map<String, Value> = ["", "apps"].into_iter().map(entry).collect();
    Json(json!({ "paths": paths }))
}

async fn openapi_group(Path(group): Path<String>) -> Response {
    if group == "apps" {
        return Json(openapi_document("apps")).into_response();
    }
    Status::not_found("", &group, format!("this server serves no API group {group:?}; it serves apps")).into_response()
}

/// Both group versions' operations as Swagger 2.0: parameters carry their type directly.
fn swagger() -> Value {
    let mut paths = serde_json::Map::new();
    for group in ["", "apps"] {
        if let Value::Object(group_paths) = openapi_document(group)["paths"].take() {
            paths.extend(group_paths);
        }
    }
    for operation in paths.values_mut().filter_map(Value::as_object_mut).flat_map(|item| item.values_mut()) {
        if let Some(Value::Array(parameters)) = operation.get_mut("parameters") {
            for parameter in parameters.iter_mut() {
                parameter["type"] = "string".into();
                parameter.as_object_mut().map(|p| p.remove("schema"));
            }
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Shepherd's Kubernetes-compatible API", "version": format!("v1.32.0-shepherd.{}", env!("CARGO_PKG_VERSION"))},
        "paths": paths,
        "definitions": {},
    })
}

/// The OpenAPI v3 document of one group version: every path with its operations.
fn openapi_document(group: &str) -> Value {
    let prefix = if group.is_empty() { "/api/v1".to_string() } else { format!("/apis/{group}/v1") };
    let mut paths = serde_json::Map::new();
    for r in RESOURCES.iter().filter(|r| r.group == group) {
        let (plural, sub) = match r.name.split_once('/') {
            Some((plural, sub)) => (plural, Some(sub)),
            None => (r.name, None),
        };
        let (kind_group, version) = if r.kind == "Scale" { ("autoscaling", "v1") } else { (group, "v1") };
        let gvk = json!({"group": kind_group, "version": version, "kind": r.kind});
        let base = if r.namespaced { format!("{prefix}/namespaces/{{namespace}}/{plural}") } else { format!("{prefix}/{plural}") };
        let operation = |action: &str| {
            let mut op = json!({
                "operationId": format!("{action}{}", r.name.replace('/', "_")),
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "responses": {"200": {"description": "OK"}},
            });
            if matches!(action, "post" | "put" | "patch") {
                op["parameters"] = json!([
                    {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
                ]);
            }
            op
        };
        let verbs = r.verbs;
        let has = |verb: &str| verbs.contains(&verb);
        if sub.is_none() {
            let mut collection = serde_json::Map::new();
            if has("list") {
                collection.insert("get".into(), operation("list"));
            }
            if has("create") {
                collection.insert("post".into(), operation("post"));
            }
            paths.insert(base.clone(), Value::Object(collection));
        }
        let item = match sub {
            Some(sub) => format!("{base}/{{name}}/{sub}"),
            None => format!("{base}/{{name}}"),
        };
        let mut one = serde_json::Map::new();
        for (verb, method, action) in
            [("get", "get", "get"), ("update", "put", "put"), ("patch", "patch", "patch"), ("delete", "delete", "delete")]
        {
            if has(verb) {
                one.insert(method.into(), operation(action));
            }
        }
        if has("create") && sub.is_some() {
            one.insert("post".into(), operation("post"));
        }
        paths.insert(item, Value::Object(one));
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Shepherd's Kubernetes-compatible API", "version": format!("v1.32.0-shepherd.{}", env!("CARGO_PKG_VERSION"))},
        "paths": paths,
        "components": {"schemas": {}},
    })
}
