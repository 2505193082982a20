//! Field sets, as structured-merge-diff keeps them for server-side apply: the paths of an
//! object's fields in Kubernetes' JSON shape, and their `FieldsV1` encoding in
//! `metadata.managedFields` (`f:` a field, `k:` a list element by its merge key, `.` the node
//! itself when it also has children). A list with a merge key (the strategic merge's, from
//! [`patch::merge_key`]) is associative, its elements owned one by one; every other list,
//! and the selectors Kubernetes marks atomic, is one value.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::patch;

/// One step of a path, as `FieldsV1` writes it: `f:replicas`, `k:{"name":"web"}`.
pub type Path = Vec<String>;
pub type FieldSet = BTreeSet<Path>;

/// The fields of an object the server keeps for itself: no manager owns them, as in
/// Kubernetes' field manager, which strips them (and a main resource's status) first.
const SERVER_FIELDS: [&str; 3] = ["apiVersion", "kind", "status"];
const SERVER_METADATA: [&str; 9] =
    ["name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "selfLink", "managedFields", "deletionTimestamp"];

/// Maps Kubernetes declares atomic (`+mapType=atomic`, `+structType=atomic`): replaced and
/// owned whole.
pub(super) fn atomic_map(field: &str) -> bool {
    matches!(field, "selector" | "nodeSelector")
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldsError {
    /// An element of an associative list lacks its key, or two share one.
    BadListElement { path: String, message: String },
    /// A `FieldsV1` value that is not the encoding.
    BadEncoding(String),
}

impl std::fmt::Display for FieldsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FieldsError::BadListElement { path, message } => write!(f, "{path}: {message}"),
            FieldsError::BadEncoding(message) => write!(f, "invalid managedFields: {message}"),
        }
    }
}

/// Each owned path of `object` and what is there: `Some` value for a leaf (a scalar, an
/// atomic value, an empty map), `None` for a list element, owned with its fields.
pub fn leaves(object: &Value) -> Result<BTreeMap<Path, Option<&Value>>, FieldsError> {
    let mut out = BTreeMap::new();
    if let Value::Object(fields) = object {
        for (key, value) in fields {
            if SERVER_FIELDS.contains(&key.as_str()) {
                continue;
            }
            let mut path = vec![field(key)];
            if key == "metadata"
                && let Value::Object(meta) = value
            {
                for (key, value) in meta.iter().filter(|(k, _)| !SERVER_METADATA.contains(&k.as_str())) {
                    path.push(field(key));
                    walk(value, &mut path, &format!("metadata.{key}"), &mut out)?;
                    path.pop();
                }
                continue;
            }
            walk(value, &mut path, key, &mut out)?;
        }
    }
    Ok(out)
}

/// The paths of `object`'s fields: what a manager that applies it owns.
pub fn field_set(object: &Value) -> Result<FieldSet, FieldsError> {
    Ok(leaves(object)?.into_keys().collect())
}

fn field(name: &str) -> String {
    format!("f:{name}")
}

/// `k:{"name":"web"}`: the element of a list keyed by `key`.
fn element(key: &str, value: &Value) -> String {
    let mut one = Map::new();
    one.insert(key.to_string(), value.clone());
    format!("k:{}", Value::Object(one))
}

fn walk<'a>(value: &'a Value, path: &mut Path, schema: &str, out: &mut BTreeMap<Path, Option<&'a Value>>) -> Result<(), FieldsError> {
    let name = schema.rsplit('.').next().unwrap_or(schema);
    match value {
        Value::Object(fields) if !fields.is_empty() && !atomic_map(name) => {
            for (key, child) in fields {
                path.push(field(key));
                walk(child, path, &format!("{schema}.{key}"), out)?;
                path.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => match patch::merge_key(schema) {
            Some(key) => {
                let bad = |path: &Path, message: String| FieldsError::BadListElement { path: display(path), message };
                let mut seen = BTreeSet::new();
                for item in items {
                    let Some(id) = item.get(key) else {
                        return Err(bad(path, format!("every element needs its {key:?}")));
                    };
                    let step = element(key, id);
                    if !seen.insert(step.clone()) {
                        return Err(bad(path, format!("two elements have the {key} {id}")));
                    }
                    path.push(step);
                    out.insert(path.clone(), None);
                    walk(item, path, schema, out)?;
                    path.pop();
                }
            }
            None => {
                out.insert(path.clone(), Some(value));
            }
        },
        _ => {
            out.insert(path.clone(), Some(value));
        }
    }
    Ok(())
}

/// A path as Kubernetes prints it in a conflict: `.spec.containers[name="web"].image`.
pub fn display(path: &Path) -> String {
    path.iter()
        .map(|step| match step.split_once(':') {
            Some(("f", name)) => format!(".{name}"),
            Some(("k", key)) => match serde_json::from_str::<Map<String, Value>>(key) {
                Ok(key) => format!("[{}]", key.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")),
                Err(_) => format!("[{key}]"),
            },
            Some(("v", value)) => format!("[={value}]"),
            Some(("i", index)) => format!("[{index}]"),
            _ => step.clone(),
        })
        .collect()
}

/// The `FieldsV1` encoding of `set`.
pub fn encode(set: &FieldSet) -> Value {
    #[derive(Default)]
    struct Node {
        member: bool,
        children: BTreeMap<String, Node>,
    }
    fn to_value(node: Node) -> Value {
        let mut map = Map::new();
        if node.member && !node.children.is_empty() {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        for (step, child) in node.children {
            map.insert(step, to_value(child));
        }
        Value::Object(map)
    }
    let mut root = Node::default();
    for path in set {
        let mut node = &mut root;
        for step in path {
            node = node.children.entry(step.clone()).or_default();
        }
        node.member = true;
    }
    to_value(root)
}

/// The set a `FieldsV1` value encodes.
pub fn decode(fields: &Value) -> Result<FieldSet, FieldsError> {
    fn walk(value: &Value, path: &mut Path, out: &mut FieldSet) -> Result<(), FieldsError> {
        let Value::Object(map) = value else {
            return Err(FieldsError::BadEncoding(format!("{} is not an object", display(path))));
        };
        for (step, child) in map {
            if step == "." {
                out.insert(path.clone());
                continue;
            }
            if !matches!(step.split_once(':'), Some(("f" | "k" | "v" | "i", _))) {
                return Err(FieldsError::BadEncoding(format!("{step:?} is neither f:, k:, v: nor i:")));
            }
            path.push(step.clone());
            if child.as_object().is_some_and(Map::is_empty) {
                out.insert(path.clone());
            } else {
                walk(child, path, out)?;
            }
            path.pop();
        }
        Ok(())
    }
    let mut out = FieldSet::new();
    walk(fields, &mut Vec::new(), &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "resourceVersion": "7", "labels": {"app": "web"}},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{"name": "c", "image": "minimal", "ports": [{"containerPort": 80}]}]}}
            },
            "status": {"replicas": 2}
        })
    }

    fn path(steps: &[&str]) -> Path {
        steps.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_set_holds_leaves_and_list_elements_but_not_server_fields() {
        let container = ["f:spec", "f:template", "f:spec", "f:containers", r#"k:{"name":"c"}"#];
        let port = [&container[..], &["f:ports", r#"k:{"containerPort":80}"#]].concat();
        let expected: FieldSet = [
            path(&["f:metadata", "f:labels", "f:app"]),
            path(&["f:spec", "f:replicas"]),
            path(&["f:spec", "f:selector"]),
            path(&container),
            path(&[&container[..], &["f:image"]].concat()),
            path(&[&container[..], &["f:name"]].concat()),
            path(&port),
            path(&[&port[..], &["f:containerPort"]].concat()),
        ]
        .into_iter()
        .collect();
        assert_eq!(field_set(&deployment()).unwrap(), expected);
    }

    #[test]
    fn the_encoding_round_trips_and_marks_members_with_children() {
        let set = field_set(&deployment()).unwrap();
        let encoded = encode(&set);
        assert_eq!(encoded["f:spec"]["f:replicas"], json!({}));
        let element = &encoded["f:spec"]["f:template"]["f:spec"]["f:containers"][r#"k:{"name":"c"}"#];
        assert_eq!(element["."], json!({}));
        assert_eq!(encoded["f:spec"].get("."), None);
        assert_eq!(decode(&encoded).unwrap(), set);
    }

    #[test]
    fn paths_print_as_kubernetes_prints_them() {
        assert_eq!(display(&path(&["f:spec", "f:replicas"])), ".spec.replicas");
        assert_eq!(display(&path(&["f:spec", "f:containers", r#"k:{"name":"c"}"#, "f:image"])), r#".spec.containers[name="c"].image"#);
    }

    #[test]
    fn bad_input_is_an_error() {
        let no_key = json!({"spec": {"containers": [{"image": "x"}]}});
        assert!(matches!(field_set(&no_key), Err(FieldsError::BadListElement { .. })));
        let twice = json!({"spec": {"containers": [{"name": "a"}, {"name": "a"}]}});
        assert!(matches!(field_set(&twice), Err(FieldsError::BadListElement { .. })));
        assert!(matches!(decode(&json!({"x:y": {}})), Err(FieldsError::BadEncoding(_))));
        assert!(matches!(decode(&json!({"f:a": 3})), Err(FieldsError::BadEncoding(_))));
    }

    #[test]
    fn deep_nesting_and_huge_lists_are_walked() {
        let mut deep = json!("leaf");
        for _ in 0..100 {
            deep = json!({ "a": deep });
        }
        assert_eq!(field_set(&json!({ "spec": deep })).unwrap().iter().next().unwrap().len(), 101);
        let env: Vec<Value> = (0..20_000).map(|i| json!({"name": format!("V{i}"), "value": "x"})).collect();
        let set = field_set(&json!({"spec": {"containers": [{"name": "c", "env": env}]}})).unwrap();
        assert_eq!(set.len(), 2 + 3 * 20_000);
        assert_eq!(decode(&encode(&set)).unwrap(), set);
    }
}
