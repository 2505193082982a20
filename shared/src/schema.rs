//! JSON Schemas for what serde reads by hand: label selectors and [`Object`]. Quantities'
//! schemas live with their parser, in [`crate::quantity`].

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use crate::model::{ConfigMap, Deployment, Event, Namespace, Node, Object, Pod, ReplicaSet, Secret, Service};
use crate::selector::{LabelSelector, StructuredSelector};

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
            generator.subschema_for::<ReplicaSet>(),
            generator.subschema_for::<Service>(),
            generator.subschema_for::<ConfigMap>(),
            generator.subschema_for::<Secret>(),
            generator.subschema_for::<Node>(),
            generator.subschema_for::<Event>(),
            generator.subschema_for::<Namespace>(),
        ];
        json_schema!({"description": "an object of any kind; its `kind` says which", "anyOf": kinds})
    }
}
