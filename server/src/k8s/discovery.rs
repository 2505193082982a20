//! What a Kubernetes client asks first: `/version` (also at the server's root, where
//! `kubectl get --raw /version` asks: a raw path is taken from the host, not from the
//! kubeconfig's `/k8s`), the legacy discovery documents (`/api`,
//! `/api/v1`, `/apis`, `/apis/apps/v1`) and OpenAPI v3, all read from [`KINDS`]. The OpenAPI documents list each
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

use super::kinds::{self, Entry, Gvk, KINDS, group_path, group_version};
use super::status::Status;
use crate::state::AppState;

/// Where the server's version is read, by anyone, as kube-apiserver's `/version` (the
/// `system:public-info-viewer` role): kubectl reads it under the kubeconfig's `/k8s`, and
/// `kubectl get --raw /version` at the root.
pub const VERSION_PATHS: [&str; 2] = ["/k8s/version", "/version"];

pub fn router() -> Router<AppState> {
    let mut router = Router::new()
        .route(VERSION_PATHS[0], get(version))
        .route(VERSION_PATHS[1], get(version))
        .route("/k8s/api", get(api_versions))
        .route("/k8s/api/v1", get(|| async { resource_list("") }))
        .route("/k8s/apis", get(api_groups));
    for group in kinds::groups().into_iter().filter(|g| !g.is_empty()) {
        router = router.route(&format!("/k8s{}", group_path(group)), get(move || async move { resource_list(group) }));
    }
    router
        .route("/k8s/openapi/v3", get(openapi_index))
        .route("/k8s/openapi/v3/api/v1", get(|| async { Json(openapi_document("")) }))
        .route("/k8s/openapi/v3/apis/{group}/{version}", get(openapi_group))
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
    let groups = kinds::groups()
        .into_iter()
        .filter(|group| !group.is_empty())
        .map(|group| {
            let version = meta::GroupVersionForDiscovery { group_version: group_version(group), version: kinds::version(group).into() };
            meta::APIGroup {
                name: group.into(),
                preferred_version: Some(version.clone()),
                versions: vec![version],
                server_address_by_client_cidrs: None,
            }
        })
        .chain([super::metrics::group()])
        .collect();
    Json(meta::APIGroupList { groups })
}

/// One resource or subresource of a group as discovery and OpenAPI list it.
struct Listed {
    entry: &'static Entry,
    /// The subresource's name, for a subresource.
    sub: Option<&'static str>,
    gvk: Gvk,
    verbs: &'static [&'static str],
}

impl Listed {
    fn name(&self) -> String {
        match self.sub {
            Some(sub) => format!("{}/{sub}", self.entry.plural),
            None => self.entry.plural.to_string(),
        }
    }
}

/// The group's resources, each followed by its subresources.
fn listed(group: &str) -> impl Iterator<Item = Listed> {
    KINDS.iter().filter(move |e| e.gvk.group == group).flat_map(|entry| {
        let own = Listed { entry, sub: None, gvk: entry.gvk, verbs: entry.verbs };
        let subs =
            entry.subresources.iter().map(move |s| Listed { entry, sub: Some(s.name), gvk: s.gvk.unwrap_or(entry.gvk), verbs: s.verbs });
        std::iter::once(own).chain(subs)
    })
}

fn resource_list(group: &str) -> Json<meta::APIResourceList> {
    let resources = listed(group)
        .map(|r| {
            let whole = r.sub.is_none();
            // A subresource of another group's kind (a Scale is autoscaling/v1's) says so.
            let other = r.gvk.group != group;
            meta::APIResource {
                name: r.name(),
                singular_name: if whole { r.gvk.kind.to_ascii_lowercase() } else { String::new() },
                kind: r.gvk.kind.into(),
                namespaced: r.entry.served.namespaced(),
                short_names: (whole && !r.entry.short.is_empty()).then(|| r.entry.short.iter().map(|s| s.to_string()).collect()),
                verbs: r.verbs.iter().map(|v| v.to_string()).collect(),
                categories: (whole && !r.entry.categories.is_empty()).then(|| r.entry.categories.iter().map(|c| c.to_string()).collect()),
                group: other.then(|| r.gvk.group.to_string()),
                version: other.then(|| r.gvk.version.to_string()),
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
        let path = group_path(group).trim_start_matches('/').to_string();
        (path.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={}", hash(group))}))
    };
    let paths: serde_json::Map<String, Value> = kinds::groups().into_iter().map(entry).collect();
    Json(json!({ "paths": paths }))
}

async fn openapi_group(Path((group, version)): Path<(String, String)>) -> Response {
    let groups = kinds::groups();
    if !group.is_empty() && groups.contains(&group.as_str()) && kinds::version(&group) == version {
        return Json(openapi_document(&group)).into_response();
    }
    let served: Vec<String> = groups.into_iter().filter(|g| !g.is_empty()).map(group_version).collect();
    let message = format!("this server serves no API group version {group}/{version}; it serves {}", served.join(", "));
    Status::not_found("", &group, message).into_response()
}

/// Both group versions' operations as Swagger 2.0: parameters carry their type directly.
fn swagger() -> Value {
    let mut paths = serde_json::Map::new();
    for group in kinds::groups() {
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
    let prefix = group_path(group);
    let mut paths = serde_json::Map::new();
    for r in listed(group) {
        let (plural, sub) = (r.entry.plural, r.sub);
        let gvk = json!({"group": r.gvk.group, "version": r.gvk.version, "kind": r.gvk.kind});
        let base =
            if r.entry.served.namespaced() { format!("{prefix}/namespaces/{{namespace}}/{plural}") } else { format!("{prefix}/{plural}") };
        let operation = |action: &str| {
            let mut op = json!({
                "operationId": format!("{action}{}", r.name().replace('/', "_")),
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
