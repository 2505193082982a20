//! Strict field validation, as kube-apiserver's `fieldValidation=Strict`: a document is read
//! into its type and written back, and a field it set that does not come back is one the type
//! does not hold. The server's `/api/v1` and manifests compare against Shepherd's own types
//! ([`unknown_fields`]), the server's `/k8s` against Kubernetes' ([`unkept`]).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::yaml::Step;

/// A field of a document: its path as errors name it (`spec.containers[0].colour`) and the
/// steps to it, which find it whatever its keys hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub path: String,
    pub steps: Vec<Step>,
}

impl Field {
    fn key(&self, key: &str) -> Field {
        Field {
            path: if self.path.is_empty() { key.to_string() } else { format!("{}.{key}", self.path) },
            steps: self.steps.iter().cloned().chain([Step::Key(key.to_string())]).collect(),
        }
    }

    fn index(&self, index: usize) -> Field {
        Field { path: format!("{}[{index}]", self.path), steps: self.steps.iter().cloned().chain([Step::Index(index)]).collect() }
    }
}

/// `unknown field "a", unknown field "b"`: the words the API and manifests name them in.
pub fn name_unknown(fields: &[Field]) -> String {
    fields.iter().map(|field| format!("unknown field {:?}", field.path)).collect::<Vec<_>>().join(", ")
}

/// A value that says nothing: leaving it out means the same.
pub fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// Collects the fields set in `sent` that `kept` lacks, passing over each member of an object
/// that `passed(path, value)` says to. Only presence counts: a value may come back in another
/// spelling (`0.5` as `500m`).
pub fn unkept(sent: &Value, kept: &Value, passed: &dyn Fn(&str, &Value) -> bool, out: &mut Vec<Field>) {
    walk(sent, kept, &Field { path: String::new(), steps: Vec::new() }, passed, out);
}

fn walk(sent: &Value, kept: &Value, here: &Field, passed: &dyn Fn(&str, &Value) -> bool, out: &mut Vec<Field>) {
    match (sent, kept) {
        (Value::Object(sent), Value::Object(kept)) => {
            for (key, value) in sent {
                let field = here.key(key);
                if passed(&field.path, value) {
                    continue;
                }
                match kept.get(key) {
                    Some(back) => walk(value, back, &field, passed, out),
                    None => out.push(field),
                }
            }
        }
        (Value::Array(sent), Value::Array(kept)) => {
            for (index, value) in sent.iter().enumerate() {
                let field = here.index(index);
                match kept.get(index) {
                    Some(back) => walk(value, back, &field, passed, out),
                    None if !is_empty(value) => out.push(field),
                    None => {}
                }
            }
        }
        (Value::Object(_) | Value::Array(_), _) if !is_empty(sent) => out.push(here.clone()),
        _ => {}
    }
}

/// The fields in `sent` that `T` does not hold, given `typed`, what `sent` reads as. A field
/// the round trip lacks is unknown only if `sent` without it reads the same: a selector's
/// `match_labels` comes back as a plain map, and is not unknown. Empty values say nothing and
/// are let through.
pub fn unknown_fields<T: Serialize + DeserializeOwned + PartialEq>(sent: &Value, typed: &T) -> Vec<Field> {
    let Ok(kept) = serde_json::to_value(typed) else { return Vec::new() };
    let mut missing = Vec::new();
    unkept(sent, &kept, &|_, value| is_empty(value), &mut missing);
    missing.retain(|field| without(sent, &field.steps).is_some_and(|rest| reads_as(rest, typed)));
    missing
}

fn reads_as<T: DeserializeOwned + PartialEq>(value: Value, typed: &T) -> bool {
    serde_json::from_value::<T>(value).is_ok_and(|other| other == *typed)
}

/// `value` with the member or item at the end of `steps` taken out.
fn without(value: &Value, steps: &[Step]) -> Option<Value> {
    let (last, parent) = steps.split_last()?;
    let mut rest = value.clone();
    let holder = parent.iter().try_fold(&mut rest, |value, step| match step {
        Step::Key(key) => value.get_mut(key.as_str()),
        Step::Index(index) => value.get_mut(*index),
    })?;
    match (holder, last) {
        (Value::Object(map), Step::Key(key)) => {
            map.remove(key)?;
        }
        (Value::Array(items), Step::Index(index)) => {
            (*index < items.len()).then(|| items.remove(*index))?;
        }
        _ => return None,
    }
    Some(rest)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::{Deployment, Pod};

    fn unknown<T: Serialize + DeserializeOwned + PartialEq>(sent: Value) -> Vec<String> {
        let typed: T = serde_json::from_value(sent.clone()).unwrap();
        unknown_fields(&sent, &typed).into_iter().map(|field| field.path).collect()
    }

    #[test]
    fn every_unknown_field_is_named_by_its_path() {
        let sent = json!({
            "bogus": 1,
            "metadata": {"name": "web", "labels": {"a.b/c": "x"}, "colour": "red"},
            "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"container_port": 80, "hostport": 8080}]}]},
            "status": {"phase": "Pending", "odd/key~": {"x": 1}}
        });
        assert_eq!(
            unknown::<Pod>(sent),
            ["bogus", "metadata.colour", "spec.containers[0].ports[0].hostport", "status.odd/key~"],
            "each, with the path to it"
        );
    }

    #[test]
    fn another_spelling_of_a_known_field_is_not_unknown() {
        let sent = json!({
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 2,
                "selector": {"match_labels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                    {"name": "c", "image": "i", "resources": {"cpu": "0.5", "memory": "64Mi"}}
                ]}}
            }
        });
        assert!(unknown::<Deployment>(sent).is_empty());
        let empty = json!({"metadata": {"name": "web", "bogus": ""}, "spec": {"node_name": "", "containers": []}});
        assert!(unknown::<Pod>(empty).is_empty(), "an empty value says nothing, known or not");
    }
}
