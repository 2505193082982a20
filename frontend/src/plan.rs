//! What applying a manifest will do, checked before anything is sent: JSON read here by
//! `shared::manifest` (errors with line and column, or by field), YAML read by the server
//! (`POST /api/v1/manifests/parse`, so the bundle holds no YAML reader), every object
//! validated by `shared::validation` (errors by field), given the selected namespace when it
//! names none, with its URLs.

use shared::api::{FieldError, paths};
use shared::manifest;
use shared::model::Object;

/// One object of the manifest, ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub object: Object,
    /// `pod/web-server`, as kubectl prints it.
    pub label: String,
    /// Where a create is POSTed.
    pub collection: String,
    /// Where an update is PUT when the object already exists.
    pub path: String,
    /// What `shared::validation` found wrong; the server would answer 422 with the same.
    pub errors: Vec<FieldError>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Checked {
    /// Nothing typed yet.
    Empty,
    /// YAML, sent to the server to be read.
    Reading,
    /// Not JSON or YAML of known kinds: what is wrong, with its line and column where known.
    Syntax(String),
    Items(Vec<Item>),
}

impl Checked {
    /// Whether every object is valid, so Apply can go ahead.
    pub fn is_ready(&self) -> bool {
        matches!(self, Checked::Items(items) if items.iter().all(|i| i.errors.is_empty()))
    }
}

/// Checks `text` here when it is empty or JSON; `None` for YAML, which the server reads
/// (then [`check_objects`] takes what it answered).
pub fn check(text: &str, namespace: &str) -> Option<Checked> {
    if text.trim().is_empty() {
        return Some(Checked::Empty);
    }
    if !manifest::is_json(text) {
        return None;
    }
    Some(match manifest::parse_json(text) {
        Ok(objects) => check_objects(objects, namespace),
        Err(error) => Checked::Syntax(error.to_string()),
    })
}

/// Validates the objects of a manifest; objects without a namespace go to `namespace`.
pub fn check_objects(objects: Vec<Object>, namespace: &str) -> Checked {
    Checked::Items(
        objects
            .into_iter()
            .map(|mut object| {
                let kind = object.kind();
                let meta = object.metadata_mut();
                if kind.namespaced() && meta.namespace.is_empty() {
                    meta.namespace = namespace.to_string();
                }
                let meta = object.metadata();
                let errors = shared::validation::validate(&object).err().unwrap_or_default();
                Item {
                    label: format!("{}/{}", kind.as_str().to_ascii_lowercase(), meta.name),
                    collection: paths::collection(kind, Some(&meta.namespace)),
                    path: paths::object(kind, &meta.namespace, &meta.name),
                    errors,
                    object,
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const POD: &str = include_str!("../templates/pod.json");
    const DEPLOYMENT: &str = include_str!("../templates/deployment.json");
    const SERVICE: &str = include_str!("../templates/service.json");

    #[test]
    fn the_reference_templates_are_ready_to_apply() {
        for (text, label, collection) in [
            (POD, "pod/web-server", "/api/v1/namespaces/default/pods"),
            (DEPLOYMENT, "deployment/web", "/api/v1/namespaces/default/deployments"),
            (SERVICE, "service/web-service", "/api/v1/namespaces/default/services"),
        ] {
            let checked = check(text, "elsewhere").expect("JSON is checked here");
            assert!(checked.is_ready(), "{label}: {checked:?}");
            let Checked::Items(items) = checked else { unreachable!() };
            assert_eq!((items[0].label.as_str(), items[0].collection.as_str()), (label, collection));
        }
    }

    #[test]
    fn yaml_is_left_to_the_server() {
        assert_eq!(check("kind: Pod\nmetadata:\n  name: a\n", "team"), None);
    }

    #[test]
    fn objects_without_a_namespace_go_to_the_selected_one() {
        let pod = r#"{"kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"minimal"}]}}"#;
        let objects = manifest::parse_json(pod).unwrap();
        let Checked::Items(items) = check_objects(objects, "team") else { panic!("expected items") };
        assert_eq!(items[0].object.metadata().namespace, "team");
        assert_eq!(items[0].path, "/api/v1/namespaces/team/pods/a");
    }

    #[test]
    fn invalid_fields_are_reported_by_path_before_sending() {
        let checked =
            check(r#"{"kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":""}]}}"#, "default").unwrap();
        assert!(!checked.is_ready());
        let Checked::Items(items) = checked else { panic!("expected items") };
        assert!(items[0].errors.iter().any(|e| e.field.starts_with("spec.containers[0].image")), "{:?}", items[0].errors);
    }

    #[test]
    fn a_typo_d_field_is_refused_before_sending() {
        let text =
            r#"{"kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"minimal","comand":["sleep","1"]}]}}"#;
        let Some(Checked::Syntax(error)) = check(text, "default") else { panic!("expected the unknown field refused") };
        assert!(error.contains(r#"unknown field "spec.containers[0].comand""#), "{error}");
    }

    #[test]
    fn syntax_errors_carry_the_line() {
        let Some(Checked::Syntax(error)) = check("{\n  \"kind\": \"Pod\",\n  oops\n}", "default") else {
            panic!("expected a syntax error")
        };
        assert!(error.starts_with("line 3, column"), "{error}");
        assert_eq!(check("   \n", "default"), Some(Checked::Empty));
        assert!(!Checked::Empty.is_ready());
    }

    #[test]
    fn several_documents_become_several_items() {
        let text = format!("{POD}\n{SERVICE}");
        let Some(Checked::Items(items)) = check(&text, "default") else { panic!("expected items") };
        assert_eq!(items.len(), 2);
    }
}
