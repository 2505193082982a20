//! What one request to an object route carries: the query parameters Kubernetes' clients
//! send, the resource it points at, and the reads every verb shares (the stored object, the
//! answer as JSON or a Table).

use std::sync::Arc;

use axum::Json;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;
use shared::model::Object;

use crate::auth::Principal;
use crate::k8s::convert::{self, to_json};
use crate::k8s::kinds::Served;
use crate::k8s::status::{Result, Status};
use crate::k8s::table;
use crate::state::AppState;

/// The query parameters Kubernetes' clients send that change an answer; the ones Shepherd
/// cannot honour are refused. Others are ignored: `fieldValidation` (fields are always
/// checked strictly), `pretty`, `resourceVersionMatch=NotOlderThan`.
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
    pub since_time: Option<String>,
    pub limit_bytes: Option<u64>,
    pub field_manager: Option<String>,
    pub force: Option<String>,
}

pub(super) fn flag(value: &Option<String>) -> Result<bool> {
    value.as_deref().map_or(Ok(false), |text| shared::parse::flag(text).map_err(|e| Status::bad_request(e.to_string())))
}

/// Where a request points: the resource, and the namespace, name and subresource if any.
#[derive(Debug, Clone)]
pub(super) struct Target {
    pub(super) kind: Served,
    pub(super) namespace: Option<String>,
    pub(super) name: Option<String>,
    pub(super) sub: Option<String>,
}

pub(super) struct Req {
    pub(super) state: AppState,
    pub(super) principal: Principal,
    pub(super) method: axum::http::Method,
    pub(super) headers: HeaderMap,
    pub(super) query: K8sQuery,
    pub(super) target: Target,
    /// `dryRun=All`: the write is judged and answered, and stores nothing.
    pub(super) dry_run: bool,
}

/// Whether `values` of `dryRun` ask for a dry run; another value than `All` is the 422
/// kube-apiserver answers, about the write's options (`CreateOptions`, `DeleteOptions`, …).
pub(super) fn dry_run<S: AsRef<str>>(options: &str, values: &[S]) -> Result<bool> {
    crate::query::dry_run(values).map_err(|detail| invalid_options(options, "dryRun", detail, "FieldValueNotSupported"))
}

/// kube-apiserver's 422 for a write's options (`PatchOptions.meta.k8s.io "" is invalid: …`).
pub(super) fn invalid_options(options: &str, field: &str, detail: String, reason: &'static str) -> Status {
    let message = format!("{options}.meta.k8s.io \"\" is invalid: {field}: {detail}");
    let cause = shared::api::FieldError::new(field, detail);
    let mut status = Status::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", message).with_causes(vec![(cause, reason)]);
    status.kind = Some(options.to_string());
    status
}

/// Calls `$f::<R>` for the stored kind `$kind` (and awaits it when asked).
macro_rules! by_kind {
    ($kind:expr, $f:ident($($arg:expr),*) $(.$await:ident)?) => {
        match $kind {
            ::shared::model::Kind::Pod => $f::<::shared::model::Pod>($($arg),*)$(.$await)?,
            ::shared::model::Kind::Node => $f::<::shared::model::Node>($($arg),*)$(.$await)?,
            ::shared::model::Kind::Deployment => $f::<::shared::model::Deployment>($($arg),*)$(.$await)?,
            ::shared::model::Kind::ReplicaSet => $f::<::shared::model::ReplicaSet>($($arg),*)$(.$await)?,
            ::shared::model::Kind::Service => $f::<::shared::model::Service>($($arg),*)$(.$await)?,
            ::shared::model::Kind::Event => $f::<::shared::model::Event>($($arg),*)$(.$await)?,
            ::shared::model::Kind::Namespace => $f::<::shared::model::Namespace>($($arg),*)$(.$await)?,
            ::shared::model::Kind::ConfigMap => $f::<::shared::model::ConfigMap>($($arg),*)$(.$await)?,
            ::shared::model::Kind::Secret => $f::<::shared::model::Secret>($($arg),*)$(.$await)?,
            // Read-only here: `refuse_writes` stops every write first.
            ::shared::model::Kind::Lease => unreachable!("leases are not written through /k8s"),
        }
    };
}
pub(super) use by_kind;

pub(super) fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.split(',').next().is_some_and(|first| first.contains("as=Table") && first.contains("g=meta.k8s.io")))
}

pub(in crate::k8s) fn media_type(headers: &HeaderMap) -> String {
    let text = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    text.split(';').next().unwrap_or("").trim().to_ascii_lowercase()
}

pub(super) fn parse_body(body: &[u8]) -> Result<Value> {
    serde_json::from_slice(body).map_err(|e| Status::bad_request(format!("the body is not valid JSON: {e}")))
}

pub(super) fn parse_version(text: Option<&str>) -> Result<u64> {
    match text {
        None | Some("") => Ok(0),
        Some(text) => text.parse().map_err(|_| Status::bad_request(format!("resourceVersion {text:?} is not one this server issued"))),
    }
}

impl Req {
    /// Waits, as kube-apiserver's watch cache waits, until the store has `version` (0: any);
    /// a version it does not reach in time is storage's too-large error, a 504.
    pub(super) async fn reach(&self, version: u64) -> Result<()> {
        crate::api::watch::catch_up(&self.state, version).await;
        let current = self.state.store.revision();
        if version > current {
            return Err(Status::from(crate::store::StoreError::Future { requested: version, current }));
        }
        Ok(())
    }

    pub(super) fn kind_name(&self) -> &'static str {
        self.target.kind.kind_name()
    }

    pub(super) fn name(&self) -> &str {
        self.target.name.as_deref().unwrap_or_default()
    }

    pub(super) fn namespace(&self) -> &str {
        self.target.namespace.as_deref().unwrap_or_default()
    }

    /// The namespace the store keeps the path's objects in: a node's lease has none.
    pub(super) fn store_namespace(&self) -> &str {
        match self.target.kind {
            Served::Stored(shared::model::Kind::Lease) => convert::lease_store_namespace(self.namespace()),
            _ => self.namespace(),
        }
    }

    pub(super) fn stored(&self) -> Result<Arc<Object>> {
        let kind = self.target.kind.stored();
        let key = crate::store::Key::new(kind, self.store_namespace(), self.name());
        self.state.store.get(&key).ok_or_else(|| match self.state.store.unreadable(&key) {
            Some(unreadable) => Status::from(unreadable),
            None => Status::not_found(
                self.target.kind.plural(),
                self.name(),
                format!("{} \"{}\" not found", self.target.kind.plural(), self.name()),
            ),
        })
    }

    /// One object, or a Table of it.
    pub(super) fn answer(&self, code: StatusCode, object: &Object) -> Response {
        if wants_table(&self.headers) {
            let table = table::table(self.target.kind, std::slice::from_ref(object), &self.state, self.include_object(), None);
            return (code, Json(table)).into_response();
        }
        (code, Json(to_json(self.target.kind, object))).into_response()
    }

    pub(super) fn include_object(&self) -> table::Include {
        match self.query.include_object.as_deref() {
            Some("Object") => table::Include::Object,
            Some("None") => table::Include::None,
            _ => table::Include::Metadata,
        }
    }
}
