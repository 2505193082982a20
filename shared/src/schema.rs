//! JSON Schemas for what serde reads by hand: quantities (an integer or a quantity string,
//! within the bounds of [`crate::validation`]), label selectors and [`Object`].

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use crate::model::{Deployment, Event, Namespace, Node, Object, Pod, Service};
use crate::selector::{LabelSelector, StructuredSelector};
use crate::validation::{MAX_CPU_MILLICORES, MAX_MEMORY_BYTES};

/// A decimal with an optional suffix, as `parse_memory` and `parse_cpu` read it.
fn quantity_pattern(suffixes: &str) -> String {
    format!(r"^\s*([0-9]+(\.[0-9]*)?|\.[0-9]+)({suffixes})?\s*$")
}

pub(crate) fn memory(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "bytes: an integer, or a quantity string such as \"64Mi\" or \"1.5Gi\"",
        "anyOf": [
            {"type": "integer", "minimum": 0, "maximum": MAX_MEMORY_BYTES},
            {"type": "string", "pattern": quantity_pattern("k|K|M|G|T|P|Ki|Mi|Gi|Ti|Pi")}
        ]
    })
}

pub(crate) fn cpu(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "millicores: an integer, or a quantity string such as \"250m\" or \"0.5\" (cores)",
        "anyOf": [
            {"type": "integer", "minimum": 0, "maximum": MAX_CPU_MILLICORES},
            {"type": "string", "pattern": r"^\s*([0-9]+m|([0-9]+(\.[0-9]*)?|\.[0-9]+))\s*$"}
        ]
    })
}

impl JsonSchema for LabelSelector {
    fn schema_name() -> Cow<'static, str> {
        "LabelSelector".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let structured = generator.subschema_for::<StructuredSelector>();
        json_schema!({
            "description": "a map of labels ({\"app\": \"web\"}), or {\"match_labels\": {...}, \"match_expressions\": [...]}",
            "anyOf": [{"type": "object", "additionalProperties": {"type": "string"}}, structured]
        })
    }
}

impl JsonSchema for Object {
    fn schema_name() -> Cow<'static, str> {
        "Object".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let kinds = [
            generator.subschema_for::<Pod>(),
            generator.subschema_for::<Deployment>(),
            generator.subschema_for::<Service>(),
            generator.subschema_for::<Node>(),
            generator.subschema_for::<Event>(),
            generator.subschema_for::<Namespace>(),
        ];
        json_schema!({"description": "an object of any kind; its `kind` says which", "anyOf": kinds})
    }
}
