//! Lists and watches: label and field selectors (Kubernetes' field labels translated to the
//! native ones), the list order, `limit`/`continue` paging, and the start of a watch.

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use shared::model::{Kind, Object};

use super::request::{Req, flag, parse_version, wants_table};
use crate::k8s::convert::{self, to_json};
use crate::k8s::kinds::Served;
use crate::k8s::status::{Result, Status};
use crate::k8s::{table, watch};
use crate::paging::{self, Page};
use crate::query::{Filter, ListParams};

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
        if field.is_empty() && !rest.is_empty() {
            return Err(Status::bad_request(format!(
                "invalid field selector term {term:?}: expected field=value, field==value or field!=value"
            )));
        }
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

/// A list's `metadata`, as Kubernetes' `ListMeta`: the revision it was read at and, when
/// more pages follow, the next one's token and, with no selector, how many objects remain.
pub fn list_meta(page: &Page) -> Value {
    let mut metadata = json!({"resourceVersion": page.revision.to_string()});
    if let Some(next) = &page.next {
        metadata["continue"] = next.as_str().into();
    }
    if let Some(remaining) = page.remaining {
        metadata["remainingItemCount"] = remaining.into();
    }
    metadata
}

impl Req {
    fn filter(&self) -> Result<Filter> {
        let mut field_selector = match self.query.field_selector.as_deref().filter(|s| !s.is_empty()) {
            Some(text) => Some(native_field_selector(self.target.kind.stored(), text)?),
            None => None,
        };
        let mut namespace = self.target.namespace.clone();
        if self.target.kind == Served::Stored(Kind::Lease)
            && let Some(asked) = namespace.take()
        {
            // The store keeps leases cluster-scoped (a node's has no namespace), so it
            // selects them by the field, in its own spelling of the namespace.
            let term = format!("metadata.namespace={}", convert::lease_store_namespace(&asked));
            field_selector = Some(field_selector.map_or_else(|| term.clone(), |text| format!("{text},{term}")));
        }
        let params = ListParams {
            label_selector: self.query.label_selector.clone().filter(|s| !s.is_empty()),
            field_selector,
            ..ListParams::default()
        };
        let mut filter = Filter::new(self.target.kind.stored(), namespace, &params)?;
        if self.target.kind == Served::EndpointSlices {
            convert::select_slices(&mut filter);
        }
        Ok(filter)
    }

    pub(super) async fn list(&self) -> Result<Response> {
        let filter = self.filter()?;
        if flag(&self.query.watch)? {
            if self.query.continue_.as_deref().is_some_and(|c| !c.is_empty()) {
                return Err(Status::bad_request("a watch takes no continue token: watch from the resourceVersion of the list"));
            }
            return self.watch(filter).await;
        }
        // Any state at least as new is served (Kubernetes' "NotOlderThan"), unless the page
        // is to be one at an exact revision; junk is refused.
        let version = parse_version(self.query.resource_version.as_deref())?;
        self.reach(version).await?;
        let continue_ = self.query.continue_.as_deref().filter(|c| !c.is_empty());
        if continue_.is_some() && version != 0 {
            return Err(Status::bad_request("specifying resource version is not allowed when using continue"));
        }
        let limit = self.query.limit.unwrap_or(0);
        let at = match self.query.resource_version_match.as_deref().filter(|m| !m.is_empty()) {
            Some("Exact") if version == 0 => {
                return Err(Status::bad_request("resourceVersionMatch=Exact needs a resourceVersion other than 0"));
            }
            Some("Exact") => Some(version),
            Some("NotOlderThan") => None,
            Some(other) => {
                return Err(Status::bad_request(format!("resourceVersionMatch {other:?} is not Exact or NotOlderThan")));
            }
            // Kubernetes' legacy meaning: a first page at a revision is one at that revision.
            None => (limit > 0 && version > 0).then_some(version),
        };
        let request = paging::Request { limit, continue_, at };
        let page = paging::page(&self.state, self.target.kind.stored(), &filter, request).await?;
        let objects: Vec<Object> = page.objects.iter().map(|o| Object::clone(o)).collect();
        if wants_table(&self.headers) {
            let table = table::table(self.target.kind, &objects, &self.state, self.include_object(), Some(&page));
            return Ok(Json(table).into_response());
        }
        let items: Vec<Value> = objects.iter().map(|o| to_json(self.target.kind, o)).collect();
        Ok(Json(json!({
            "apiVersion": self.target.kind.api_version(),
            "kind": format!("{}List", self.kind_name()),
            "metadata": list_meta(&page),
            "items": items,
        }))
        .into_response())
    }

    /// The objects the filter selects now, and the revision they were read at.
    fn listed(&self, filter: &Filter) -> (u64, Vec<Object>) {
        let (revision, objects) = paging::selected_now(&self.state, self.target.kind.stored(), filter);
        (revision, objects.iter().map(|o| Object::clone(o)).collect())
    }

    async fn watch(&self, filter: Filter) -> Result<Response> {
        if flag(&self.query.send_initial_events)? {
            return Err(Status::bad_request(
                "sendInitialEvents (watch-list) is not supported: list, then watch from the list's resourceVersion",
            ));
        }
        let from = parse_version(self.query.resource_version.as_deref())?;
        self.reach(from).await?;
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
