//! PATCH bodies applied to an object in Kubernetes' JSON shape: JSON merge patch (RFC 7386)
//! and JSON patch (RFC 6902) by the `json-patch` crate, and strategic merge patch, which
//! merges the lists Kubernetes gives a merge key (containers by name, ports by port, …)
//! instead of replacing them. The strategic merge is written here: its merge keys live in
//! Kubernetes' Go struct tags, and no Rust crate applies it to `k8s-openapi`'s types. What
//! `kubectl apply`, `cordon`, `label`, `scale` and `patch --type=json` send. Server-side
//! apply ([`APPLY_MEDIA_TYPE`]) is [`managed`](super::managed)'s.

use axum::http::StatusCode;
use json_patch::{CopyOperation, MoveOperation, PatchErrorKind, PatchOperation};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::status::{Result, Status};

/// Server-side apply's body type.
pub const APPLY_MEDIA_TYPE: &str = "application/apply-patch+yaml";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Merge,
    Strategic,
    Json,
}

impl PatchKind {
    pub fn from_media_type(media: &str) -> Result<PatchKind> {
        match media {
            "application/merge-patch+json" => Ok(PatchKind::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchKind::Strategic),
            "application/json-patch+json" => Ok(PatchKind::Json),
            other => Err(Status::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "UnsupportedMediaType",
                format!(
                    "the patch type {other:?} is not supported: send application/merge-patch+json, application/strategic-merge-patch+json, application/json-patch+json or {APPLY_MEDIA_TYPE}"
                ),
            )),
        }
    }
}

/// `current` with `patch` applied.
pub fn apply(kind: PatchKind, mut current: Value, patch: &Value) -> Result<Value> {
    match kind {
        PatchKind::Json => json_patch(&mut current, patch)?,
        _ if !patch.is_object() => return Err(Status::bad_request("a merge patch must be a JSON object")),
        PatchKind::Merge => json_patch::merge(&mut current, patch),
        PatchKind::Strategic => strategic(&mut current, patch, "")?,
    }
    Ok(current)
}

/// RFC 6902, all or nothing: a failed operation leaves `doc` half patched, and the caller
/// drops it. A failed `test` is a 422, as Kubernetes answers; any other failure a 400.
fn json_patch(doc: &mut Value, patch: &Value) -> Result<()> {
    let Value::Array(items) = patch else {
        return Err(Status::bad_request("a JSON patch must be an array of operations"));
    };
    let operations = items
        .iter()
        .enumerate()
        .map(|(i, item)| PatchOperation::deserialize(item).map_err(|e| Status::bad_request(format!("JSON patch operation {i}: {e}"))))
        .collect::<Result<Vec<_>>>()?;
    json_patch::patch_unsafe(doc, &operations).map_err(|e| {
        let i = e.operation;
        match (&e.kind, operations.get(i)) {
            (PatchErrorKind::TestFailed, _) => {
                Status::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", format!("JSON patch operation {i}: the test of {} failed", e.path))
            }
            (PatchErrorKind::CannotMoveInsideItself, Some(PatchOperation::Move(op))) => {
                Status::bad_request(format!("JSON patch operation {i}: {} cannot be moved into its own child {}", op.from, op.path))
            }
            (PatchErrorKind::InvalidFromPointer, Some(PatchOperation::Move(MoveOperation { from, .. })))
            | (PatchErrorKind::InvalidFromPointer, Some(PatchOperation::Copy(CopyOperation { from, .. }))) => {
                Status::bad_request(format!("JSON patch operation {i}: {from} does not exist"))
            }
            _ => Status::bad_request(format!("JSON patch operation {i}: {} does not exist", e.path)),
        }
    })
}

/// The merge key of the list at `path` (a dotted path without indices), as Kubernetes' types
/// declare it; lists without one are replaced whole. Server-side apply's associative lists.
pub(super) fn merge_key(path: &str) -> Option<&'static str> {
    let field = path.rsplit('.').next().unwrap_or(path);
    match field {
        "containers" | "initContainers" | "env" | "volumes" | "imagePullSecrets" => Some("name"),
        "ports" if path.contains("containers") => Some("containerPort"),
        "ports" => Some("port"),
        "volumeMounts" => Some("mountPath"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        "addresses" => Some("type"),
        _ => None,
    }
}

fn strategic(target: &mut Value, patch: &Value, path: &str) -> Result<()> {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return Ok(());
    };
    if patch.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replaced = patch.clone();
        replaced.remove("$patch");
        *target = Value::Object(replaced);
        return Ok(());
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target) = target else { return Ok(()) };
    for (key, value) in patch {
        // Directives that only order lists or retain keys change nothing Shepherd stores.
        if key.starts_with("$setElementOrder/") || key == "$retainKeys" || key == "$patch" {
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(remove)) = (target.get_mut(field), value) {
                list.retain(|item| !remove.contains(item));
            }
            continue;
        }
        if key.starts_with('$') {
            return Err(Status::bad_request(format!("the strategic merge patch directive {key:?} is not supported")));
        }
        let here = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Array(items) => match merge_key(&here) {
                Some(merge_on) => {
                    let existing = target.entry(key.clone()).or_insert_with(|| Value::Array(Vec::new()));
                    if !existing.is_array() {
                        *existing = Value::Array(Vec::new());
                    }
                    let Value::Array(list) = existing else { continue };
                    merge_list(list, items, merge_on, &here)?;
                }
                None => {
                    target.insert(key.clone(), value.clone());
                }
            },
            Value::Object(_) => strategic(target.entry(key.clone()).or_insert(Value::Null), value, &here)?,
            other => {
                target.insert(key.clone(), other.clone());
            }
        }
    }
    Ok(())
}

/// Merges `items` into `list` by `merge_on`: a matching element is patched (or removed with
/// `$patch: delete`), a new one is appended.
fn merge_list(list: &mut Vec<Value>, items: &[Value], merge_on: &str, path: &str) -> Result<()> {
    for item in items {
        let Some(key) = item.get(merge_on).cloned() else {
            return Err(Status::bad_request(format!("every element of {path} in a strategic merge patch needs its {merge_on:?}")));
        };
        let found = list.iter().position(|existing| existing.get(merge_on) == Some(&key));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (found, delete) {
            (Some(i), true) => {
                list.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => strategic(&mut list[i], item, path)?,
            (None, false) => {
                let mut fresh = Value::Null;
                strategic(&mut fresh, item, path)?;
                list.push(fresh);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_merge_patch_replaces_lists_and_null_removes() {
        let current = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}});
        let patch = json!({"metadata": {"labels": {"a": null, "c": "3"}}, "spec": {"containers": [{"name": "d"}]}});
        let out = apply(PatchKind::Merge, current, &patch).unwrap();
        assert_eq!(out, json!({"metadata": {"labels": {"b": "2", "c": "3"}}, "spec": {"containers": [{"name": "d"}]}}));
    }

    #[test]
    fn a_strategic_patch_merges_containers_by_name() {
        let current = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}});
        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"name": "b", "image": "z"}, {"name": "a", "$patch": "delete"}, {"name": "c", "image": "w"}]}});
        let out = apply(PatchKind::Strategic, current, &patch).unwrap();
        assert_eq!(out, json!({"spec": {"containers": [{"name": "b", "image": "z"}, {"name": "c", "image": "w"}]}}));
    }

    #[test]
    fn a_json_patch_applies_its_operations_in_order() {
        let current = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "a", "image": "x"}]}});
        let patch = json!([
            {"op": "replace", "path": "/spec/containers/0/image", "value": "y"},
            {"op": "add", "path": "/metadata/labels/tier", "value": "front"},
            {"op": "remove", "path": "/metadata/labels/app"},
            {"op": "test", "path": "/spec/containers/0/name", "value": "a"},
        ]);
        let out = apply(PatchKind::Json, current.clone(), &patch).unwrap();
        assert_eq!(out, json!({"metadata": {"labels": {"tier": "front"}}, "spec": {"containers": [{"name": "a", "image": "y"}]}}));
        let failing = json!([{"op": "test", "path": "/spec/containers/0/name", "value": "b"}]);
        assert_eq!(apply(PatchKind::Json, current, &failing).unwrap_err().code, StatusCode::UNPROCESSABLE_ENTITY);
    }

    #[test]
    fn a_json_patch_cannot_move_a_value_into_its_own_child() {
        let current = json!({"metadata": {"labels": {"app": "web"}}});
        let into_child = json!([{"op": "move", "from": "/metadata/labels", "path": "/metadata/labels/inner"}]);
        let err = apply(PatchKind::Json, current.clone(), &into_child).unwrap_err();
        assert_eq!(err.code, StatusCode::BAD_REQUEST);
        assert!(err.message.contains("/metadata/labels cannot be moved into its own child /metadata/labels/inner"), "{}", err.message);
        let beside = json!([{"op": "move", "from": "/metadata/labels", "path": "/metadata/labelsx"}]);
        assert_eq!(apply(PatchKind::Json, current, &beside).unwrap(), json!({"metadata": {"labelsx": {"app": "web"}}}));
    }
}
