//! Namespaces and the one every namespaced object defaults to.

use serde::{Deserialize, Serialize};

use super::meta::ObjectMeta;

pub const DEFAULT_NAMESPACE: &str = "default";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Namespace {
    pub kind: String,
    pub metadata: ObjectMeta,
    pub status: NamespaceStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct NamespaceStatus {
    /// `Active` or `Terminating`.
    pub phase: String,
}
