//! Lists and watches: label and field selectors (Kubernetes' field labels translated to the
//! native ones), the list order, `limit`/`continue` paging, and the start of a watch.

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use shared::model::{Kind, Object};

use super::request::{Req, by_kind, flag, parse_version, wants_table};
use crate::api::objects as native;
use crate::api::watch as native_watch;
use crate::k8s::convert::{self, to_json};
use crate::k8s::status::{Result, Status};
use crate::k8s::{table, watch};
use crate::query::{Filter, ListParams};
use crate::resources::Resource;
use crate::state::AppState;

/// A field selector in Kubernetes' field labels (`spec.nodeName`, each the translation of a
/// native field `kind` can be selected by), in the native API's spelling; any other label,
/// the native spelling included, is refused as Kubernetes refuses it.
fn native_field_selector(kind: Kind, text: &str) -> Result<String> {
    let mut labels: Vec<(String, &str)> =
        crate::query::supported_fields(kind).iter().map(|native| (convert::k8s_field(kind, native), *native)).collect();
    labels.dedup_by(|a, b| a.0 == b.0);
    let mut terms = Vec::new();
    for term in crate::query::field_selector_terms(text) {
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

    pub(super) async fn list(&self) -> Result<Response> {
        let filter = self.filter()?;
        if flag(&self.query.watch)? {
            if self.query.continue_.as_deref().is_some_and(|c| !c.is_empty()) {
                return Err(Status::bad_request("a watch takes no continue token: watch from the resourceVersion of the list"));
            }
            return self.watch(filter).await;
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

    async fn watch(&self, filter: Filter) -> Result<Response> {
        if flag(&self.query.send_initial_events)? {
            return Err(Status::bad_request(
                "sendInitialEvents (watch-list) is not supported: list, then watch from the list's resourceVersion",
            ));
        }
        let from = parse_version(self.query.resource_version.as_deref())?;
        native_watch::catch_up(&self.state, from).await;
        let initial = if from == 0 { Some(self.listed(&filter)) } else { None };
        let shape = watch::Shape {
            kind: self.target.kind,
            table: wants_table(&self.headers).then(|| self.include_object()),
            bookmarks: flag(&self.query.allow_watch_bookmarks)?,
        };
        let timeout = self.query.timeout_seconds.map(std::time::Duration::from_secs);
        Ok(watch::stream(self.state.clone(), filter, from, initial, shape, timeout))
    }
}
