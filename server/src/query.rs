//! The query of a list, watch or delete, as both API dialects read it: the parameters,
//! label and field selectors as one [`Filter`], and what a store change looks like through
//! that filter (a watch's ADDED, MODIFIED and DELETED).

use serde::Deserialize;
use shared::api::{FieldError, WatchEventType};
use shared::model::{Kind, Object};
use shared::selector::LabelSelector;

use crate::error::{ApiError, ApiResult};
use crate::store::{EventType, Interest, StoreEvent};

/// `?label_selector=…&field_selector=…&watch=true&resource_version=N&limit=N&continue=…`;
/// any other parameter is refused by name (a misspelt `labelSelector` would otherwise list
/// everything).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ListParams {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    #[serde(deserialize_with = "shared::parse::deserialize_flag")]
    pub watch: Option<bool>,
    #[serde(deserialize_with = "shared::parse::deserialize_revision")]
    pub resource_version: Option<u64>,
    /// The most objects a page holds; 0 or none: all.
    pub limit: Option<usize>,
    /// The previous page's `continue` token.
    #[serde(rename = "continue")]
    pub continue_: Option<String>,
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

pub fn supported_fields(kind: Kind) -> &'static [&'static str] {
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
    for part in field_selector_terms(text).map(str::trim).filter(|p| !p.is_empty()) {
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
        let value = value.trim();
        let value = unescape_field_value(value).map_err(|c| {
            ApiError::bad_request(format!("invalid field selector value {value:?}: a {c:?} in a value must be escaped as \\{c}"))
        })?;
        terms.push(FieldTerm { field: field.to_string(), value, equal });
    }
    Ok(terms)
}

/// The terms of a field selector: split at each comma that no backslash escapes.
pub fn field_selector_terms(text: &str) -> impl Iterator<Item = &str> {
    let mut escaped = false;
    text.split(move |c| {
        let split = c == ',' && !escaped;
        escaped = c == '\\' && !escaped;
        split
    })
}

/// A field selector value with `\,`, `\=` and `\\` escapes resolved; a bare `,` or `=`
/// (as in `spec.nodeName===`) is refused as Kubernetes refuses it, by the offending character.
fn unescape_field_value(text: &str) -> Result<String, char> {
    let mut value = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped @ ('\\' | ',' | '=')) => value.push(escaped),
                _ => return Err('\\'),
            },
            ',' | '=' => return Err(c),
            _ => value.push(c),
        }
    }
    Ok(value)
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

    /// Whether this filter selects every object in its scope: no label or field selector.
    pub fn selects_all(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
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

/// `?resource_version=N` makes a delete conditional. For pods, `grace_period_seconds=N`
/// sets how long the containers get to stop (0 removes the pod at once) and `uid=U`
/// deletes only the pod with that uid. Any other parameter is refused by name.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeleteParams {
    #[serde(deserialize_with = "shared::parse::deserialize_revision")]
    pub resource_version: Option<u64>,
    pub grace_period_seconds: Option<i64>,
    pub uid: Option<String>,
    /// `All`: judge the delete, delete nothing ([`dry_run`]).
    pub dry_run: Option<String>,
}

/// A single object's read (`GET …/pods/web`, its status, its scale) takes no parameter:
/// any one is refused by name, as on lists and writes, rather than ignored.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadParams {}

/// `?dry_run=All` on any other write: judged and answered as a real one, stored nowhere
/// ([`dry_run`]). Any other parameter is refused by name.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WriteParams {
    pub dry_run: Option<String>,
}

/// The one value of Kubernetes' `dryRun`: every stage of the write but its storage.
pub const DRY_RUN_ALL: &str = "All";

/// Whether a write's `dryRun` values ask for a dry run: none asks for a real write, and
/// `All` (each of them) for a dry run. Any other value is refused with the detail
/// kube-apiserver gives: `Unsupported value: []string{"Foo"}: supported values: "All"`.
pub fn dry_run<S: AsRef<str>>(values: &[S]) -> Result<bool, String> {
    if values.iter().all(|v| v.as_ref() == DRY_RUN_ALL) {
        return Ok(!values.is_empty());
    }
    let quoted: Vec<String> = values.iter().map(|v| format!("{:?}", v.as_ref())).collect();
    Err(format!("Unsupported value: []string{{{}}}: supported values: \"{DRY_RUN_ALL}\"", quoted.join(", ")))
}

impl WriteParams {
    /// The native API's dry run: 422 for a value other than `All`.
    pub fn is_dry_run(&self) -> ApiResult<bool> {
        native_dry_run(self.dry_run.as_deref())
    }
}

impl DeleteParams {
    pub fn is_dry_run(&self) -> ApiResult<bool> {
        native_dry_run(self.dry_run.as_deref())
    }
}

fn native_dry_run(value: Option<&str>) -> ApiResult<bool> {
    dry_run(value.as_slice()).map_err(|message| ApiError::invalid("the write's options", vec![FieldError::new("dry_run", message)]))
}

/// What a store change looks like through a filter: an object entering the filter is
/// ADDED, one leaving it is DELETED, as Kubernetes does.
pub fn translate(event: &StoreEvent, filter: &Filter) -> Option<WatchEventType> {
    let now = event.type_ != EventType::Deleted && filter.matches(&event.object);
    let before = event.prev.as_ref().is_some_and(|p| filter.matches(p));
    match (event.type_, before, now) {
        (EventType::Added, _, true) => Some(WatchEventType::Added),
        (EventType::Modified, true, true) => Some(WatchEventType::Modified),
        (EventType::Modified, false, true) => Some(WatchEventType::Added),
        (EventType::Modified, true, false) | (EventType::Deleted, true, _) => Some(WatchEventType::Deleted),
        _ => None,
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
    fn field_selectors_name_supported_fields_only() {
        let terms = parse_field_selector(Kind::Pod, "spec.node_name=n1,status.phase!=Failed").unwrap();
        assert_eq!(terms.len(), 2);
        assert!(!terms[1].equal);
        let err = parse_field_selector(Kind::Pod, "spec.color=red").unwrap_err();
        assert!(err.message.contains("no selectable field \"spec.color\""), "{}", err.message);
    }

    #[test]
    fn field_selector_values_escape_commas_and_equals_and_refuse_them_bare() {
        let terms = parse_field_selector(Kind::Pod, r"metadata.name=a\,b\=c\\,status.phase=Running").unwrap();
        assert_eq!(terms.iter().map(|t| t.value.as_str()).collect::<Vec<_>>(), [r"a,b=c\", "Running"]);
        for bad in ["spec.node_name===", "spec.node_name==a=b", r"metadata.name=a\"] {
            let err = parse_field_selector(Kind::Pod, bad).unwrap_err();
            assert_eq!(err.status, axum::http::StatusCode::BAD_REQUEST, "{bad}");
            assert!(err.message.contains("must be escaped"), "{bad}: {}", err.message);
        }
    }
}
