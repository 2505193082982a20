//! Field managers, as Kubernetes' field manager and structured-merge-diff keep them: a
//! server-side apply merges the applied configuration into the live object, answers a 409
//! for fields another manager set to another value (unless forced), and removes the fields
//! its manager applied before and no manager holds any longer; every other write records
//! an `Update` entry for the fields it changed and takes them from their former managers.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::{Map, Value};
use shared::api::FieldError;
use shared::model::{ManagedFieldsEntry, ManagedOperation, Time};

use super::fields::{self, FieldSet, FieldsError, Path};
use super::patch;
use super::status::Status;

/// Who writes: the manager's name, the version its fields are written in, and the
/// subresource written through (empty for the object itself). Kubernetes tells managers
/// apart by all three, so `kubectl` scaling and `kubectl` editing are two managers.
#[derive(Debug, Clone, Copy)]
pub struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    pub subresource: &'a str,
    pub now: Time,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManagedError {
    Fields(FieldsError),
    /// Fields other managers own with other values: each manager as Kubernetes prints it,
    /// and the path.
    Conflicts(Vec<(String, Path)>),
}

impl From<FieldsError> for ManagedError {
    fn from(e: FieldsError) -> Self {
        ManagedError::Fields(e)
    }
}

impl From<ManagedError> for Status {
    fn from(e: ManagedError) -> Self {
        match e {
            ManagedError::Fields(e) => Status::bad_request(e.to_string()),
            ManagedError::Conflicts(conflicts) => conflict_status(&conflicts),
        }
    }
}

/// Kubernetes' 409 for an apply's conflicts: one `FieldManagerConflict` cause per field,
/// and the message kubectl shows above its advice.
fn conflict_status(conflicts: &[(String, Path)]) -> Status {
    let message = match conflicts {
        [(manager, path)] => format!("Apply failed with 1 conflict: conflict with {manager}: {}", fields::display(path)),
        _ => {
            let mut by_manager: BTreeMap<&str, Vec<String>> = BTreeMap::new();
            for (manager, path) in conflicts {
                by_manager.entry(manager).or_default().push(format!("- {}", fields::display(path)));
            }
            let lines: Vec<String> = by_manager
                .into_iter()
                .flat_map(|(manager, paths)| std::iter::once(format!("conflicts with {manager}:")).chain(paths))
                .collect();
            format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
        }
    };
    let causes = conflicts
        .iter()
        .map(|(manager, path)| (FieldError::new(fields::display(path), format!("conflict with {manager}")), "FieldManagerConflict"))
        .collect();
    Status::new(StatusCode::CONFLICT, "Conflict", message).with_causes(causes)
}

/// A manager as a conflict names it: `"mgr"`, and for an update `"mgr" using apps/v1`.
fn printed(entry: &ManagedFieldsEntry) -> String {
    let mut name = format!("{:?}", entry.manager);
    if !entry.subresource.is_empty() {
        name = format!("{name} with subresource {:?}", entry.subresource);
    }
    match (entry.operation, entry.time) {
        (ManagedOperation::Apply, _) => name,
        (ManagedOperation::Update, None) => format!("{name} using {}", entry.api_version),
        (ManagedOperation::Update, Some(time)) => {
            format!("{name} using {} at {}", entry.api_version, time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        }
    }
}

/// The managers' entries with their decoded sets; an entry whose encoding is broken owns
/// nothing (Kubernetes resets such managed fields rather than refuse the write).
fn decoded(entries: &[ManagedFieldsEntry]) -> Vec<(ManagedFieldsEntry, FieldSet)> {
    entries.iter().map(|e| (e.clone(), fields::decode(&e.fields_v1).unwrap_or_default())).collect()
}

fn is_writer(entry: &ManagedFieldsEntry, writer: &Writer, operation: ManagedOperation) -> bool {
    entry.manager == writer.manager
        && entry.operation == operation
        && entry.subresource == writer.subresource
        && (operation == ManagedOperation::Apply || entry.api_version == writer.api_version)
}

/// What changed from `live` to `new`: the paths added or given another value, and the
/// paths removed.
fn compare(live: &Value, new: &Value) -> Result<(FieldSet, FieldSet), FieldsError> {
    let before = fields::leaves(live)?;
    let after = fields::leaves(new)?;
    let changed = after.iter().filter(|(path, value)| before.get(*path) != Some(value)).map(|(path, _)| path.clone()).collect();
    let removed = before.keys().filter(|path| !after.contains_key(*path)).cloned().collect();
    Ok((changed, removed))
}

/// How many `Update` entries an object keeps, as Kubernetes caps them: the oldest beyond it
/// fold into one [`ANCIENT_CHANGES`] entry, so that many writers cannot grow an object.
const MAX_UPDATE_MANAGERS: usize = 10;
const ANCIENT_CHANGES: &str = "ancient-changes";

fn cap_updates(managers: &mut Vec<(ManagedFieldsEntry, FieldSet)>) {
    let updates =
        |managers: &[(ManagedFieldsEntry, FieldSet)]| managers.iter().filter(|(e, _)| e.operation == ManagedOperation::Update).count();
    while updates(managers) > MAX_UPDATE_MANAGERS {
        let oldest = managers
            .iter()
            .enumerate()
            .filter(|(_, (e, _))| e.operation == ManagedOperation::Update && e.manager != ANCIENT_CHANGES)
            .min_by_key(|(_, (e, _))| e.time)
            .map(|(i, _)| i);
        let Some(oldest) = oldest else { return };
        let (folded, set) = managers.remove(oldest);
        match managers.iter_mut().find(|(e, _)| e.manager == ANCIENT_CHANGES && e.operation == ManagedOperation::Update) {
            Some((_, ancient)) => ancient.extend(set),
            None => managers.push((ManagedFieldsEntry { manager: ANCIENT_CHANGES.into(), ..folded }, set)),
        }
    }
}

/// Drops the managers left with nothing, caps the updates, and encodes the sets.
fn finish(mut managers: Vec<(ManagedFieldsEntry, FieldSet)>) -> Vec<ManagedFieldsEntry> {
    managers.retain(|(_, set)| !set.is_empty());
    cap_updates(&mut managers);
    // Kubernetes' order: applies first, then by time, manager, version and subresource.
    managers.sort_by(|(a, _), (b, _)| {
        let key = |e: &ManagedFieldsEntry| {
            (e.operation.as_str(), e.time.map(|t| t.timestamp()), e.manager.clone(), e.api_version.clone(), e.subresource.clone())
        };
        key(a).cmp(&key(b))
    });
    managers
        .into_iter()
        .map(|(mut entry, set)| {
            entry.fields_v1 = fields::encode(&set);
            entry
        })
        .collect()
}

fn entry(writer: &Writer, operation: ManagedOperation) -> ManagedFieldsEntry {
    ManagedFieldsEntry {
        manager: writer.manager.to_string(),
        operation,
        api_version: writer.api_version.to_string(),
        time: Some(writer.now),
        subresource: writer.subresource.to_string(),
        ..Default::default()
    }
}

/// The entries after a write other than an apply turned `live` (`None` for a create) into
/// `new`: the writer's `Update` entry gains what changed, and other managers lose it. Such a
/// write never fails for its field sets: a body they cannot describe (two list elements
/// with one key) is left to validation, and the object keeps no entries, as kube-apiserver's
/// `UpdateNoErrors` does.
pub fn update(live: Option<&Value>, new: &Value, entries: &[ManagedFieldsEntry], writer: &Writer) -> Vec<ManagedFieldsEntry> {
    updated(live, new, entries, writer).unwrap_or_default()
}

fn updated(
    live: Option<&Value>,
    new: &Value,
    entries: &[ManagedFieldsEntry],
    writer: &Writer,
) -> Result<Vec<ManagedFieldsEntry>, FieldsError> {
    let empty = Value::Object(Map::new());
    let (changed, removed) = compare(live.unwrap_or(&empty), new)?;
    let mut managers = decoded(entries);
    let mine = match managers.iter().position(|(e, _)| is_writer(e, writer, ManagedOperation::Update)) {
        Some(i) => managers.remove(i).1,
        None => FieldSet::new(),
    };
    for (_, set) in &mut managers {
        set.retain(|path| !changed.contains(path) && !removed.contains(path));
    }
    let set: FieldSet = mine.difference(&removed).chain(&changed).cloned().collect();
    if set != mine {
        managers.push((entry(writer, ManagedOperation::Update), set));
    } else if !set.is_empty() {
        let kept = entries
            .iter()
            .find(|e| is_writer(e, writer, ManagedOperation::Update))
            .cloned()
            .unwrap_or_else(|| entry(writer, ManagedOperation::Update));
        managers.push((kept, set));
    }
    Ok(finish(managers))
}

/// The entries after a write of the `scale` subresource set `spec.replicas` from `from` to
/// `to`, as Kubernetes' scale handler maps them back onto the object: the writer's `Update`
/// entry with subresource `scale`, in the object's version, gains `f:spec.f:replicas`,
/// and every other manager loses it.
pub fn scale(entries: &[ManagedFieldsEntry], from: i32, to: i32, writer: &Writer) -> Vec<ManagedFieldsEntry> {
    let replicas = |n: i32| serde_json::json!({"spec": {"replicas": n}});
    update(Some(&replicas(from)), &replicas(to), entries, writer)
}

/// A server-side apply of `config` onto `live` (`None` when the apply creates): the object
/// to store and its entries, or the conflicts `force` would take.
pub fn apply(
    live: Option<&Value>,
    config: &Value,
    entries: &[ManagedFieldsEntry],
    writer: &Writer,
    force: bool,
) -> Result<(Value, Vec<ManagedFieldsEntry>), ManagedError> {
    let empty = Value::Object(Map::new());
    let live = live.unwrap_or(&empty);
    let applied = fields::field_set(config)?;
    let mut managers = decoded(entries);
    let last = match managers.iter().position(|(e, _)| is_writer(e, writer, ManagedOperation::Apply)) {
        Some(i) => managers.remove(i).1,
        None => FieldSet::new(),
    };
    let mut merged = live.clone();
    merge(&mut merged, config, "");
    // What this manager applied before and nobody holds now goes, unless a field under it
    // is still held.
    let held: FieldSet = managers.iter().flat_map(|(_, set)| set.iter()).chain(&applied).cloned().collect();
    for path in last.difference(&held) {
        if !held.iter().any(|h| h.len() > path.len() && h.starts_with(path)) {
            remove(&mut merged, path);
        }
    }
    let (changed, removed) = compare(live, &merged)?;
    let conflicts: Vec<(String, Path)> =
        managers.iter().flat_map(|(e, set)| set.intersection(&changed).map(|path| (printed(e), path.clone()))).collect();
    if !conflicts.is_empty() && !force {
        return Err(ManagedError::Conflicts(conflicts));
    }
    for (_, set) in &mut managers {
        set.retain(|path| !changed.contains(path) && !removed.contains(path));
    }
    managers.push((entry(writer, ManagedOperation::Apply), applied));
    Ok((merged, finish(managers)))
}

/// Merges `config` into `live` as structured-merge-diff does: maps field by field, lists
/// with a merge key element by element, everything else replaced.
fn merge(live: &mut Value, config: &Value, schema: &str) {
    let name = schema.rsplit('.').next().unwrap_or(schema);
    match (live, config) {
        (Value::Object(live), Value::Object(config)) if !fields::atomic_map(name) => {
            for (key, value) in config {
                let here = if schema.is_empty() { key.clone() } else { format!("{schema}.{key}") };
                match live.get_mut(key) {
                    Some(existing) => merge(existing, value, &here),
                    None => {
                        live.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (Value::Array(live), Value::Array(config)) if patch::merge_key(schema).is_some() => {
            let key = patch::merge_key(schema).unwrap_or_default();
            for item in config {
                match live.iter_mut().find(|existing| existing.get(key).is_some() && existing.get(key) == item.get(key)) {
                    Some(existing) => merge(existing, item, schema),
                    None => live.push(item.clone()),
                }
            }
        }
        (live, config) => *live = config.clone(),
    }
}

/// Removes the field or list element at `path` from `value`.
fn remove(value: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut node = value;
    for step in parents {
        let next = match step.split_once(':') {
            Some(("f", name)) => node.get_mut(name),
            Some(("k", key)) => element(node, key),
            _ => None,
        };
        match next {
            Some(next) => node = next,
            None => return,
        }
    }
    match last.split_once(':') {
        Some(("f", name)) => {
            if let Value::Object(map) = node {
                map.remove(name);
            }
        }
        Some(("k", key)) => {
            if let (Value::Array(items), Ok(key)) = (node, serde_json::from_str::<Map<String, Value>>(key)) {
                items.retain(|item| !key.iter().all(|(k, v)| item.get(k) == Some(v)));
            }
        }
        _ => {}
    }
}

fn element<'a>(list: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    let key: Map<String, Value> = serde_json::from_str(key).ok()?;
    list.as_array_mut()?.iter_mut().find(|item| key.iter().all(|(k, v)| item.get(k) == Some(v)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn writer(manager: &str) -> Writer<'_> {
        Writer { manager, api_version: "apps/v1", subresource: "", now: chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap() }
    }

    fn config(replicas: i64, labels: Value) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": labels},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "image": "minimal"}]}}}
        })
    }

    fn owners<'a>(entries: &'a [ManagedFieldsEntry], path: &[&str]) -> Vec<&'a str> {
        let path: Path = path.iter().map(|s| s.to_string()).collect();
        entries.iter().filter(|e| fields::decode(&e.fields_v1).unwrap().contains(&path)).map(|e| e.manager.as_str()).collect()
    }

    #[test]
    fn an_apply_creates_then_a_second_apply_removes_what_it_dropped() {
        let first = config(2, json!({"app": "web", "tier": "front"}));
        let (live, entries) = apply(None, &first, &[], &writer("a"), false).unwrap();
        assert_eq!(live, first);
        assert_eq!(entries[0].operation, ManagedOperation::Apply);
        assert_eq!(owners(&entries, &["f:spec", "f:replicas"]), ["a"]);
        let second = config(2, json!({"app": "web"}));
        let (live, entries) = apply(Some(&live), &second, &entries, &writer("a"), false).unwrap();
        assert_eq!(live["metadata"]["labels"], json!({"app": "web"}));
        assert_eq!(entries.len(), 1);
    }

    #[test]
    fn another_manager_changing_an_owned_field_conflicts_unless_forced() {
        let (live, entries) = apply(None, &config(2, json!({})), &[], &writer("a"), false).unwrap();
        // The same value is shared ownership, not a conflict.
        let (_, shared) = apply(Some(&live), &config(2, json!({})), &entries, &writer("b"), false).unwrap();
        assert_eq!(owners(&shared, &["f:spec", "f:replicas"]), ["a", "b"]);
        let err = apply(Some(&live), &config(3, json!({})), &entries, &writer("b"), false).unwrap_err();
        assert_eq!(err, ManagedError::Conflicts(vec![("\"a\"".into(), vec!["f:spec".into(), "f:replicas".into()])]));
        let status = Status::from(err);
        assert_eq!(status.code, StatusCode::CONFLICT);
        assert_eq!(status.message, "Apply failed with 1 conflict: conflict with \"a\": .spec.replicas");
        assert_eq!(status.causes[0].0.field, ".spec.replicas");
        assert_eq!(status.causes[0].1, "FieldManagerConflict");
        let (forced, entries) = apply(Some(&live), &config(3, json!({})), &entries, &writer("b"), true).unwrap();
        assert_eq!(forced["spec"]["replicas"], 3);
        assert_eq!(owners(&entries, &["f:spec", "f:replicas"]), ["b"]);
    }

    #[test]
    fn a_field_another_manager_also_holds_stays_when_dropped() {
        let (live, entries) = apply(None, &config(2, json!({"app": "web"})), &[], &writer("a"), false).unwrap();
        let (live, entries) = apply(Some(&live), &config(2, json!({"app": "web"})), &entries, &writer("b"), false).unwrap();
        let (live, _) = apply(Some(&live), &config(2, json!({})), &entries, &writer("a"), false).unwrap();
        assert_eq!(live["metadata"]["labels"], json!({"app": "web"}));
    }

    #[test]
    fn an_update_takes_the_fields_it_changes_and_an_apply_then_conflicts_with_it() {
        let (live, entries) = apply(None, &config(2, json!({})), &[], &writer("a"), false).unwrap();
        let mut edited = live.clone();
        edited["spec"]["replicas"] = json!(5);
        let entries = updated(Some(&live), &edited, &entries, &writer("kubectl-edit")).unwrap();
        assert_eq!(owners(&entries, &["f:spec", "f:replicas"]), ["kubectl-edit"]);
        let err = apply(Some(&edited), &config(2, json!({})), &entries, &writer("a"), false).unwrap_err();
        let ManagedError::Conflicts(conflicts) = err else { panic!("{err:?}") };
        assert_eq!(conflicts[0].0, "\"kubectl-edit\" using apps/v1 at 2023-11-14T22:13:20Z");
        // An update that changes nothing records nothing.
        assert_eq!(updated(Some(&edited), &edited, &[], &writer("x")).unwrap(), Vec::new());
    }

    #[test]
    fn a_scale_records_its_manager_with_the_subresource_and_an_apply_then_conflicts_with_it() {
        let (live, entries) = apply(None, &config(2, json!({})), &[], &writer("a"), false).unwrap();
        let scaler = Writer { subresource: "scale", ..writer("kubectl") };
        let entries = scale(&entries, 2, 5, &scaler);
        let scaled = entries.iter().find(|e| e.subresource == "scale").unwrap();
        assert_eq!(
            (scaled.manager.as_str(), scaled.operation, scaled.api_version.as_str(), scaled.time),
            ("kubectl", ManagedOperation::Update, "apps/v1", Some(scaler.now))
        );
        assert_eq!(fields::decode(&scaled.fields_v1).unwrap(), FieldSet::from([vec!["f:spec".to_string(), "f:replicas".to_string()]]));
        assert_eq!(owners(&entries, &["f:spec", "f:replicas"]), ["kubectl"]);
        // Scaling again is the same manager; an edit by the same client is another one.
        let entries = scale(&entries, 5, 6, &scaler);
        assert_eq!(entries.iter().filter(|e| e.subresource == "scale").count(), 1);
        let mut edited = live.clone();
        edited["spec"]["replicas"] = json!(6);
        let mut labelled = edited.clone();
        labelled["metadata"]["labels"]["tier"] = json!("front");
        let edits = update(Some(&edited), &labelled, &entries, &writer("kubectl"));
        assert_eq!(edits.iter().filter(|e| e.manager == "kubectl").count(), 2);

        let mut live = live;
        live["spec"]["replicas"] = json!(6);
        let err = apply(Some(&live), &config(3, json!({})), &entries, &writer("a"), false).unwrap_err();
        assert_eq!(
            Status::from(err).message,
            "Apply failed with 1 conflict: conflict with \"kubectl\" with subresource \"scale\" using apps/v1 at 2023-11-14T22:13:20Z: .spec.replicas"
        );
        let (forced, entries) = apply(Some(&live), &config(3, json!({})), &entries, &writer("a"), true).unwrap();
        assert_eq!(forced["spec"]["replicas"], 3);
        assert_eq!(owners(&entries, &["f:spec", "f:replicas"]), ["a"]);
        assert!(entries.iter().all(|e| e.subresource.is_empty()), "the scaler owns nothing more: {entries:?}");
    }

    #[test]
    fn containers_merge_by_name_and_a_dropped_container_goes() {
        let two = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}});
        let (live, entries) = apply(None, &two, &[], &writer("m"), false).unwrap();
        let one = json!({"spec": {"containers": [{"name": "b", "image": "z"}]}});
        let (live, _) = apply(Some(&live), &one, &entries, &writer("m"), false).unwrap();
        assert_eq!(live, json!({"spec": {"containers": [{"name": "b", "image": "z"}]}}));
    }

    #[test]
    fn many_updating_managers_fold_into_ancient_changes() {
        let mut live = json!({"metadata": {"labels": {}}});
        let mut entries = Vec::new();
        for i in 0..25 {
            let mut next = live.clone();
            next["metadata"]["labels"][format!("l{i}")] = json!("x");
            let name = format!("writer-{i}");
            let writer = Writer { now: writer("x").now + chrono::Duration::seconds(i), ..writer(&name) };
            entries = updated(Some(&live), &next, &entries, &writer).unwrap();
            live = next;
        }
        assert_eq!(entries.len(), MAX_UPDATE_MANAGERS);
        assert_eq!(owners(&entries, &["f:metadata", "f:labels", "f:l0"]), [ANCIENT_CHANGES]);
        assert_eq!(owners(&entries, &["f:metadata", "f:labels", "f:l24"]), ["writer-24"]);
    }

    #[test]
    fn an_element_without_its_key_is_a_bad_request() {
        let bad = json!({"spec": {"containers": [{"image": "x"}]}});
        let err = apply(None, &bad, &[], &writer("m"), false).unwrap_err();
        assert_eq!(Status::from(err).code, StatusCode::BAD_REQUEST);
    }
}
