//! Events: what happened to an object, who reported it and how often.

use serde::{Deserialize, Serialize};

use super::meta::{ObjectMeta, ObjectReference, Time};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Event {
    pub kind: String,
    pub metadata: ObjectMeta,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub message: String,
    pub involved_object: ObjectReference,
    /// The component that reported it: `api-server`, `scheduler`, `agent/node-1`, ….
    #[serde(skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// How many times this event happened; repeats update one event instead of adding more.
    pub count: u32,
    #[serde(default, deserialize_with = "super::meta::de_time", skip_serializing_if = "Option::is_none")]
    pub first_timestamp: Option<Time>,
    #[serde(default, deserialize_with = "super::meta::de_time", skip_serializing_if = "Option::is_none")]
    pub last_timestamp: Option<Time>,
}

/// The source of the events a node's agent records: `agent/<node>`. A node's token may record
/// events from this source only.
pub fn node_event_source(node: &str) -> String {
    format!("{NODE_SOURCE_PREFIX}{node}")
}

/// What every node's event source starts with.
pub const NODE_SOURCE_PREFIX: &str = "agent/";

pub mod event_types {
    pub const NORMAL: &str = "Normal";
    pub const WARNING: &str = "Warning";
}
