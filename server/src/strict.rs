//! Strict field validation for both API dialects, as kube-apiserver's `fieldValidation=Strict`:
//! a body is read into its type and written back, and a field it set that does not come back
//! is one the type does not hold. `/k8s` compares against Kubernetes' types ([`unkept`]),
//! `/api/v1` against Shepherd's own ([`unknown_fields`]).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A field of a body: its path as errors name it (`spec.containers[0].colour`) and its JSON
/// pointer (`/spec/containers/0/colour`), which finds it whatever its keys hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub path: String,
    pub pointer: String,
}

impl Field {
    fn key(&self, key: &str) -> Field {
        Field {
            path: if self.path.is_empty() { key.to_string() } else { format!("{}.{key}", self.path) },
            pointer: format!("{}/{}", self.pointer, key.replace('~', "~0").replace('/', "~1")),
        }
    }

    fn index(&self, index: usize) -> Field {
        Field { path: format!("{}[{index}]", self.path), pointer: format!("{}/{index}", self.pointer) }
    }
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
    walk(sent, kept, &Field { path: String::new(), pointer: String::new() }, passed, out);
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

/// The paths of the fields in `sent` that `T` does not hold, given `typed`, what `sent` reads
/// as. A field the round trip lacks is unknown only if `sent` without it reads the same: a
/// selector's `match_labels` comes back as a plain map, and is not unknown. Empty values say
/// nothing and are let through.
pub fn unknown_fields<T: Serialize + DeserializeOwned + PartialEq>(sent: &Value, typed: &T) -> Vec<String> {
    let Ok(kept) = serde_json::to_value(typed) else { return Vec::new() };
    let mut missing = Vec::new();
    unkept(sent, &kept, &|_, value| is_empty(value), &mut missing);
    missing.into_iter().filter(|field| without(sent, &field.pointer).is_some_and(|rest| reads_as(rest, typed))).map(|f| f.path).collect()
}

fn reads_as<T: DeserializeOwned + PartialEq>(value: Value, typed: &T) -> bool {
    serde_json::from_value::<T>(value).is_ok_and(|other| other == *typed)
}

/// `value` with the member or item at `pointer` taken out.
fn without(value: &Value, pointer: &str) -> Option<Value> {
    let (parent, last) = pointer.rsplit_once('/')?;
    let mut rest = value.clone();
    match rest.pointer_mut(parent)? {
        Value::Object(map) => {
            map.remove(&last.replace("~1", "/").replace("~0", "~"))?;
        }
        Value::Array(items) => {
            let index: usize = last.parse().ok()?;
            (index < items.len()).then(|| items.remove(index))?;
        }
        _ => return None,
    }
    Some(rest)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use shared::model::{Deployment, Pod};

    use super::*;

    fn unknown<T: Serialize + DeserializeOwned + PartialEq>(sent: Value) -> Vec<String> {
        let typed: T = serde_json::from_value(sent.clone()).unwrap();
        unknown_fields(&sent, &typed)
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
