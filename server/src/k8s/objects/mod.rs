//! The object routes: every path of every group in [`KINDS`], and which verb a method and
//! path ask for. Lists and watches are [`list`]'s, the verbs on one object [`verbs`]', and
//! what a request carries [`request`]'s.

mod list;
mod request;
mod verbs;

pub use list::list_meta;
pub(super) use request::media_type;

use std::collections::HashMap;

use axum::Extension;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use axum::routing::any;

use self::request::{K8sQuery, Req, Target};
use crate::auth::Principal;
use crate::k8s::kinds::{self, KINDS, Served};
use crate::k8s::status::{Result, Status};
use crate::state::AppState;

/// Every group's routes. Paths outside a namespace name an object only in a group that has a
/// kind living outside one (the core group's nodes and namespaces).
pub fn router() -> Router<AppState> {
    kinds::groups().into_iter().fold(Router::new(), |router, group| router.merge(group_routes(group)))
}

fn group_routes(group: &'static str) -> Router<AppState> {
    let handler = move |state: State<AppState>,
                        principal: Extension<Principal>,
                        method: Method,
                        headers: HeaderMap,
                        Path(path): Path<HashMap<String, String>>,
                        query: std::result::Result<Query<K8sQuery>, QueryRejection>,
                        body: Bytes| async move {
        serve(state, principal, method, headers, group, path, query, body).await.unwrap_or_else(IntoResponse::into_response)
    };
    let mut paths = vec![
        "/{plural}",
        "/namespaces/{namespace}/{plural}",
        "/namespaces/{namespace}/{plural}/{name}",
        "/namespaces/{namespace}/{plural}/{name}/{sub}",
    ];
    if KINDS.iter().any(|e| e.gvk.group == group && !e.served.namespaced()) {
        paths.extend(["/{plural}/{name}", "/{plural}/{name}/{sub}"]);
    }
    let base = format!("/k8s{}", kinds::group_path(group));
    paths.into_iter().fold(Router::new(), |router, path| router.route(&format!("{base}{path}"), any(handler)))
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
            let known: Vec<&str> = KINDS.iter().filter(|e| e.gvk.group == group).map(|e| e.plural).collect();
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
        if !kind.entry().subresources.iter().any(|s| s.name == sub) {
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
    // Reads take no dryRun, as in Kubernetes.
    let options = match method {
        Method::POST => Some("CreateOptions"),
        Method::PUT => Some("UpdateOptions"),
        Method::PATCH => Some("PatchOptions"),
        Method::DELETE => Some("DeleteOptions"),
        _ => None,
    };
    let dry_run = match options {
        Some(options) => request::dry_run(options, query.dry_run.as_slice())?,
        None => false,
    };
    // A failure about one object names it, as Kubernetes' `details` do, whichever layer failed.
    let named = target.name.clone().map(|name| (target.kind.plural(), name));
    let req = Req { state, principal, method: method.clone(), headers, query, target, dry_run };
    let answer = match (&method, req.target.name.is_some(), req.target.sub.as_deref()) {
        (&Method::GET, false, None) => req.list().await,
        (&Method::POST, false, None) => req.create(&body).await,
        (&Method::GET, true, None) => req.get().await,
        (&Method::PUT, true, None) => req.replace(&body).await,
        (&Method::PATCH, true, None) => req.patch(&body).await,
        (&Method::DELETE, true, None) => req.delete(&body).await,
        (&Method::GET, true, Some("log")) => req.log().await,
        (&Method::GET, true, Some("status")) => req.get().await,
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
