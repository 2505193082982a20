//! The schemas of the `/k8s/openapi/v3` documents: each served kind's Kubernetes type as the
//! `k8s-openapi` crate describes it (its `schemars` support, with the descriptions of
//! Kubernetes' Go docs), under Kubernetes' names (`io.k8s.api.core.v1.PodSpec`), each kind's
//! own with the `x-kubernetes-group-version-kind` that `kubectl explain` finds it by. A field
//! Shepherd refuses says so first in its description: the strict conversion, the one judge of
//! refused fields, is asked about each field of each written kind, one field at a time.

use std::collections::HashMap;

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};
use shared::model::Kind;

use super::convert;
use super::kinds::Gvk;

/// What the description of a field Shepherd refuses starts with.
pub const UNSUPPORTED: &str = "Not supported by Shepherd: ";

const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

const REFERENCE_PREFIX: &str = "#/components/schemas/";

/// Deeper than any path of the served types: a guard against a type that holds itself.
const MAX_DEPTH: usize = 16;

/// The component schemas of a document whose operations read and write `kinds`: each a
/// group, version and kind, with the stored kind its bodies are written as, if written.
pub fn components(kinds: &[(Gvk, Option<Kind>)]) -> Map<String, Value> {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let named: Vec<(String, Gvk, Option<Kind>)> = kinds
        .iter()
        .map(|&(gvk, kind)| {
            let reference = (gvk.schema)(&mut generator);
            let name = reference.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix(REFERENCE_PREFIX));
            (name.unwrap_or_default().to_string(), gvk, kind)
        })
        .collect();
    let mut schemas = generator.take_definitions(true);
    for (name, gvk, _) in &named {
        let Some(Value::Object(schema)) = schemas.get_mut(name) else { continue };
        let tag = json!({"group": gvk.group, "kind": gvk.kind, "version": gvk.version});
        if let Value::Array(tags) = schema.entry("x-kubernetes-group-version-kind").or_insert_with(|| json!([]))
            && !tags.contains(&tag)
        {
            tags.push(tag);
        }
    }
    let mut verdicts = Verdicts::new();
    for (name, gvk, kind) in &named {
        if let Some(kind) = kind {
            Probe { schemas: &schemas, kind: *kind, verdicts: &mut verdicts }.kind(name, gvk);
        }
    }
    for ((definition, property), verdict) in verdicts {
        if verdict.refused > 0 && verdict.kept == 0 {
            let field = schemas.get_mut(&definition).and_then(|d| d.pointer_mut(&format!("/properties/{property}")));
            if let Some(Value::Object(field)) = field {
                let said = field.get("description").and_then(Value::as_str).unwrap_or_default();
                let description = format!("{UNSUPPORTED}{said}");
                field.insert("description".into(), description.into());
            }
        }
    }
    schemas
}

/// How the probes that reached one property of one definition came out: refused there, or
/// kept (a probe refused at a field around it says nothing of it).
#[derive(Default)]
struct Verdict {
    refused: usize,
    kept: usize,
}

/// Each property's verdict, by definition and property name.
type Verdicts = HashMap<(String, String), Verdict>;

/// How a field's value sits in the object around it.
#[derive(Clone, Copy)]
enum Holder {
    Field,
    /// The first item of a list.
    List,
    /// The value of a key of a map.
    Map(&'static str),
}

/// One object on the way to a probed field: the object with its required fields filled, the
/// property the way goes on by, and where that property is defined.
#[derive(Clone)]
struct Frame {
    object: Value,
    definition: String,
    property: String,
    holder: Holder,
}

struct Probe<'a> {
    schemas: &'a Map<String, Value>,
    kind: Kind,
    verdicts: &'a mut Verdicts,
}

impl<'a> Probe<'a> {
    /// Probes every field of the kind's schema `name`.
    fn kind(&mut self, name: &str, gvk: &Gvk) {
        let Some(root) = self.schemas.get(name) else { return };
        let mut object = self.minimal(root, 0);
        object["apiVersion"] = gvk.api_version.into();
        object["kind"] = gvk.kind.into();
        object["metadata"] = json!({"name": "a"});
        self.fields(name, root, &object, &mut Vec::new());
    }

    /// Probes each field of `schema` (defined as `definition`), an object reached by `trail`.
    fn fields(&mut self, definition: &str, schema: &'a Value, object: &Value, trail: &mut Vec<Frame>) {
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return };
        for (property, field) in properties {
            let (holder, inner) = self.holder(field);
            trail.push(Frame { object: object.clone(), definition: definition.to_string(), property: property.clone(), holder });
            match self.reference(inner) {
                Some((name, target)) if target.get("properties").is_some() && trail.len() < MAX_DEPTH => {
                    let inner_object = self.minimal(target, 0);
                    self.fields(&name, target, &inner_object, trail);
                }
                _ => self.leaf(inner, trail),
            }
            trail.pop();
        }
    }

    /// How a field holds its values (itself, a list, a map) and the schema of one value.
    fn holder(&self, field: &'a Value) -> (Holder, &'a Value) {
        let resolved = self.resolve(field);
        if let Some(items) = resolved.get("items") {
            return (Holder::List, items);
        }
        match resolved.get("additionalProperties") {
            Some(values) if values.is_object() => (Holder::Map(self.key(values)), values),
            _ => (Holder::Field, field),
        }
    }

    /// Probes the field at the end of `trail`, holding `value_schema`'s sample.
    fn leaf(&mut self, value_schema: &'a Value, trail: &[Frame]) {
        let mut value = self.sample(value_schema, 0);
        let mut paths = Vec::with_capacity(trail.len());
        let mut path = String::new();
        for frame in trail {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(&frame.property);
            paths.push(path.clone());
            if let Holder::Map(key) = frame.holder {
                path.push('.');
                path.push_str(key);
            }
        }
        for frame in trail.iter().rev() {
            let held = match frame.holder {
                Holder::Field => value,
                Holder::List => json!([value]),
                Holder::Map(key) => json!({ key: value }),
            };
            let mut object = frame.object.clone();
            object[&frame.property] = held;
            value = object;
        }
        let refused = convert::unsupported_fields(self.kind, &value);
        let refused: Vec<String> = refused.iter().map(|f| strip_indices(f)).collect();
        for (frame, path) in trail.iter().zip(&paths) {
            let verdict = self.verdicts.entry((frame.definition.clone(), frame.property.clone())).or_default();
            if refused.contains(path) {
                verdict.refused += 1;
            } else if !refused.iter().any(|f| is_inside(path, f)) {
                verdict.kept += 1;
            }
        }
    }

    /// The schema a field's schema names: itself, or the definition it refers to (directly or
    /// as the one member of `allOf`), with that definition's name.
    fn reference(&self, schema: &'a Value) -> Option<(String, &'a Value)> {
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            let name = reference.strip_prefix(REFERENCE_PREFIX)?;
            return self.schemas.get(name).map(|s| (name.to_string(), s));
        }
        match schema.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
            Some([only]) => self.reference(only),
            _ => None,
        }
    }

    fn resolve(&self, schema: &'a Value) -> &'a Value {
        self.reference(schema).map_or(schema, |(_, target)| target)
    }

    /// A key of a map whose values are `values`: a resource's name for amounts.
    fn key(&self, values: &'a Value) -> &'static str {
        match self.reference(values) {
            Some((name, _)) if name == QUANTITY => "cpu",
            _ => "a",
        }
    }

    /// An object of `schema` with each of its required fields set.
    fn minimal(&self, schema: &'a Value, depth: usize) -> Value {
        let mut object = Map::new();
        let required = schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
        for name in required {
            if let Some(field) = schema.pointer(&format!("/properties/{name}")) {
                object.insert(name.to_string(), self.sample(field, depth + 1));
            }
        }
        Value::Object(object)
    }

    /// A value of `schema` that says something (no empty string, no zero, no `false`).
    fn sample(&self, schema: &'a Value, depth: usize) -> Value {
        let name = self.reference(schema).map(|(name, _)| name);
        let schema = self.resolve(schema);
        if name.as_deref() == Some(QUANTITY) {
            return "1".into();
        }
        if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
            return 1.into();
        }
        if depth > MAX_DEPTH {
            return json!({});
        }
        match (schema.get("type").and_then(Value::as_str), schema.get("format").and_then(Value::as_str)) {
            (Some("string"), Some("date-time")) => "2025-01-01T00:00:00Z".into(),
            (Some("string"), Some("byte")) => "YQ==".into(),
            (Some("string"), _) => "a".into(),
            (Some("integer" | "number"), _) => 1.into(),
            (Some("boolean"), _) => true.into(),
            (Some("array"), _) => match schema.get("items") {
                Some(items) => json!([self.sample(items, depth + 1)]),
                None => json!(["a"]),
            },
            _ if schema.get("properties").is_some() => self.minimal(schema, depth),
            _ => match schema.get("additionalProperties") {
                Some(values) if values.is_object() => json!({ self.key(values): self.sample(values, depth + 1) }),
                _ => json!({"a": "a"}),
            },
        }
    }
}

/// `spec.containers.name` for `spec.containers[0].name`, as the probed paths are named.
fn strip_indices(path: &str) -> String {
    path.replace("[0]", "")
}

/// Whether the field `path` is inside the field `outer` (indices left out of both).
fn is_inside(path: &str, outer: &str) -> bool {
    path.strip_prefix(outer).is_some_and(|rest| rest.starts_with('.'))
}
