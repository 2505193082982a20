//! What a Kubernetes client asks first: `/version` (also at the server's root, where
//! `kubectl get --raw /version` asks: a raw path is taken from the host, not from the
//! kubeconfig's `/k8s`), the legacy discovery documents (`/api`,
//! `/api/v1`, `/apis`, `/apis/apps/v1`) and OpenAPI v3, all read from [`KINDS`]. The OpenAPI documents list each
//! resource's operations with `x-kubernetes-group-version-kind` and the `fieldValidation`
//! parameter, which is how kubectl learns that the server validates fields itself: it then
//! sends `kubectl apply` bodies as they are and the server refuses unsupported fields (422).
//! Their schemas ([`schemas`](super::schemas)) are what `kubectl explain` shows. Each
//! document is built once, on first request, and named in the index by its hash, which
//! kubectl caches it by. `/openapi/v2` is the same operations as one Swagger 2.0 JSON
//! document, without schemas, for clients that read only v2; asked for protobuf (kubectl's
//! client-side validation of a kind the v3 documents lack), it is an empty document, so that
//! kubectl goes on to say the kind is not served.

use std::sync::OnceLock;

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, Request};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::{Value, json};
use shared::model::Kind;

use super::kinds::{self, Entry, Gvk, KINDS, Served, group_path, group_version};
use super::schemas;
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
        .route(
            "/k8s/openapi/v3/api/v1",
            get(|query: Query<HashQuery>, request: Request| async move { serve(document("").await, query, request) }),
        )
        .route("/k8s/openapi/v3/apis/{group}/{version}", get(openapi_group))
        .route("/k8s/openapi/v2", get(openapi_v2))
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

/// One group version's OpenAPI v3 document, built once: its JSON and the hash naming it.
struct Document {
    group: &'static str,
    json: bytes::Bytes,
    hash: String,
}

/// Every group version's document, built on the first request for any, on a blocking thread:
/// probing every field takes a while (about 1.7 s in a debug build).
async fn documents() -> &'static [Document] {
    static DOCUMENTS: OnceLock<Vec<Document>> = OnceLock::new();
    if let Some(built) = DOCUMENTS.get() {
        return built;
    }
    let build = || {
        kinds::groups()
            .into_iter()
            .map(|group| {
                let json = openapi_document(group).to_string();
                Document { group, hash: hash(&json), json: json.into() }
            })
            .collect()
    };
    match tokio::task::spawn_blocking(move || DOCUMENTS.get_or_init(build).as_slice()).await {
        Ok(built) => built,
        Err(panicked) => std::panic::resume_unwind(panicked.into_panic()),
    }
}

async fn document(group: &str) -> &'static Document {
    documents().await.iter().find(|d| d.group == group).unwrap_or_else(|| unreachable!("a document for every served group"))
}

/// A stable hash of a document, so that kubectl's cache stays valid across restarts of the
/// same build and changes with the next.
fn hash(json: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (env!("CARGO_PKG_VERSION"), json).hash(&mut hasher);
    format!("{:016X}", hasher.finish())
}

async fn openapi_index() -> Json<Value> {
    let entry = |document: &Document| {
        let path = group_path(document.group).trim_start_matches('/').to_string();
        (path.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={}", document.hash)}))
    };
    let paths: serde_json::Map<String, Value> = documents().await.iter().map(entry).collect();
    Json(json!({ "paths": paths }))
}

#[derive(serde::Deserialize)]
struct HashQuery {
    hash: Option<String>,
}

/// A document as kube-apiserver serves it: asked by its current hash, cacheable for good; by
/// an older hash, redirected to the current one; without a hash, revalidated each time.
fn serve(document: &Document, Query(query): Query<HashQuery>, request: Request) -> Response {
    let cache = match query.hash {
        Some(hash) if hash != document.hash => {
            return Redirect::permanent(&format!("{}?hash={}", request.uri().path(), document.hash)).into_response();
        }
        Some(_) => "public, immutable, max-age=31536000",
        None => "no-cache, private",
    };
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
        (header::CACHE_CONTROL, HeaderValue::from_static(cache)),
        (header::ETAG, HeaderValue::from_str(&format!("\"{}\"", document.hash)).unwrap_or(HeaderValue::from_static("\"\""))),
    ];
    (headers, document.json.clone()).into_response()
}

async fn openapi_group(Path((group, version)): Path<(String, String)>, query: Query<HashQuery>, request: Request) -> Response {
    if let Some(document) = documents().await.iter().find(|d| !d.group.is_empty() && d.group == group && kinds::version(d.group) == version)
    {
        return serve(document, query, request);
    }
    let served: Vec<String> = kinds::groups().into_iter().filter(|g| !g.is_empty()).map(group_version).collect();
    let message = format!("this server serves no API group version {group}/{version}; it serves {}", served.join(", "));
    Status::not_found("", &group, message).into_response()
}

/// The media type kubectl asks OpenAPI v2 in protobuf by (gnostic's `openapi_v2.Document`).
const OPENAPI_V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The same media type as kube-apiserver answers it: Go's media type parser refuses the `@`.
const OPENAPI_V2_PROTOBUF_ANSWER: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

async fn openapi_v2(headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if accept.contains(OPENAPI_V2_PROTOBUF) {
        return (StatusCode::OK, [(header::CONTENT_TYPE, OPENAPI_V2_PROTOBUF_ANSWER)], swagger_header_protobuf()).into_response();
    }
    Json(swagger()).into_response()
}

/// An `openapi_v2.Document` holding only `swagger` (field 1): no definitions, so kubectl's
/// client-side validation finds no model and leaves every kind to the server.
fn swagger_header_protobuf() -> Vec<u8> {
    let version = b"2.0";
    [&[1 << 3 | 2, version.len() as u8][..], version].concat()
}

const TITLE: &str = "Shepherd's Kubernetes-compatible API";

fn api_version() -> String {
    format!("v1.32.0-shepherd.{}", env!("CARGO_PKG_VERSION"))
}

/// Both group versions' operations as Swagger 2.0: parameters carry their type directly.
fn swagger() -> Value {
    let mut paths = serde_json::Map::new();
    for group in kinds::groups() {
        paths.extend(operations(group));
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
        "info": {"title": TITLE, "version": api_version()},
        "paths": paths,
        "definitions": {},
    })
}

/// The OpenAPI v3 document of one group version: every path with its operations, and the
/// schemas of the kinds they read and write.
fn openapi_document(group: &str) -> Value {
    let mut kinds: Vec<(Gvk, Option<Kind>)> = Vec::new();
    for r in listed(group) {
        let written = match (r.sub, r.entry.served) {
            (None, Served::Stored(kind)) if r.verbs.contains(&"create") => Some(kind),
            _ => None,
        };
        if !kinds.iter().any(|(gvk, _)| gvk.api_version == r.gvk.api_version && gvk.kind == r.gvk.kind) {
            kinds.push((r.gvk, written));
        }
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": TITLE, "version": api_version()},
        "paths": operations(group),
        "components": {"schemas": schemas::components(&kinds)},
    })
}

/// Every path of one group version with its operations.
fn operations(group: &str) -> serde_json::Map<String, Value> {
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
    paths
}
