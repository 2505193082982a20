//! What every object carries: its identity and bookkeeping ([`ObjectMeta`]), references
//! to other objects by owner or by name, and the time and label types the model is built on.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};

use super::kind::Kind;

/// The annotation `kubectl apply` records what it applied in; it may hold a Secret's values
/// in clear, so `describe` never prints it, as kubectl's does not.
pub const KUBECTL_LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// A point in time. `shared` never reads the clock: callers pass `now` in.
pub type Time = DateTime<Utc>;

/// Reads a [`Time`] field as RFC 3339, Kubernetes' form for `metav1.Time`, with chrono's
/// RFC 3339 reader. chrono's own serde goes through its general format interpreter, which
/// accepts a few more forms and would add about 12 KB to the dashboard's wasm.
pub(crate) fn de_time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Time>, D::Error> {
    match Option::<String>::deserialize(d)? {
        None => Ok(None),
        Some(text) => DateTime::parse_from_rfc3339(&text).map(|t| Some(t.to_utc())).map_err(serde::de::Error::custom),
    }
}

/// Labels and node selectors: ordered so that output is stable.
pub type Labels = BTreeMap<String, String>;

pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

pub(crate) fn is_zero_i32(n: &i32) -> bool {
    *n == 0
}

pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

/// Identity and bookkeeping common to every object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ObjectMeta {
    pub name: String,
    /// Empty for cluster-scoped objects (nodes, namespaces).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: Labels,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: Labels,
    /// The store's global revision at this object's last write; the token for every
    /// compare-and-swap update.
    #[serde(skip_serializing_if = "is_zero")]
    pub resource_version: u64,
    /// Bumped by the server when the spec changes.
    #[serde(skip_serializing_if = "is_zero")]
    pub generation: u64,
    #[serde(default, deserialize_with = "de_time", skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Time>,
    /// Set when a graceful delete has begun; the object goes once its owner lets go.
    #[serde(default, deserialize_with = "de_time", skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<Time>,
    /// The grace period of that delete, in seconds: how long the agent lets the containers
    /// stop after SIGTERM before it kills them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_grace_period_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub owner_references: Vec<OwnerReference>,
    /// Who set which fields: one entry per manager, operation and subresource, as written
    /// by the Kubernetes-compatible API's applies and updates.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub managed_fields: Vec<ManagedFieldsEntry>,
}

impl ObjectMeta {
    pub fn named(namespace: &str, name: &str) -> Self {
        ObjectMeta { name: name.to_string(), namespace: namespace.to_string(), ..Default::default() }
    }

    /// `namespace/name`, or just `name` for cluster-scoped objects.
    pub fn key(&self) -> String {
        if self.namespace.is_empty() { self.name.clone() } else { format!("{}/{}", self.namespace, self.name) }
    }

    pub fn controller(&self) -> Option<&OwnerReference> {
        self.owner_references.iter().find(|r| r.controller)
    }
}

/// Kubernetes' `ManagedFieldsEntry`: the fields one manager owns, in the `FieldsV1` encoding
/// (`{"f:spec":{"f:replicas":{}}}`), and when that manager last changed them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ManagedFieldsEntry {
    pub manager: String,
    pub operation: ManagedOperation,
    /// The version of the kind the fields were written in (`apps/v1`).
    pub api_version: String,
    #[serde(default, deserialize_with = "de_time", skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,
    pub fields_v1: serde_json::Value,
    /// Empty for the object itself; `status` or `scale` for a subresource's writes.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

/// How a manager wrote its fields: a server-side apply, or any other write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum ManagedOperation {
    Apply,
    #[default]
    Update,
}

impl ManagedOperation {
    pub fn as_str(self) -> &'static str {
        match self {
            ManagedOperation::Apply => "Apply",
            ManagedOperation::Update => "Update",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct OwnerReference {
    pub kind: String,
    pub name: String,
    pub uid: String,
    #[serde(skip_serializing_if = "is_false")]
    pub controller: bool,
    /// Whether a foreground deletion of the owner waits for this object; Kubernetes'
    /// controllers set it on every reference they write.
    #[serde(skip_serializing_if = "is_false")]
    pub block_owner_deletion: bool,
}

impl OwnerReference {
    /// The reference a controller writes on what it owns, as Kubernetes' controllers write
    /// it: `controller` and `blockOwnerDeletion` both true.
    pub fn controlled_by(kind: &str, owner: &ObjectMeta) -> OwnerReference {
        OwnerReference {
            kind: kind.to_string(),
            name: owner.name.clone(),
            uid: owner.uid.clone(),
            controller: true,
            block_owner_deletion: true,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ObjectReference {
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

impl ObjectReference {
    /// `pod/web-server`, the original's `Object` field.
    pub fn short(&self) -> String {
        format!("{}/{}", self.kind.to_ascii_lowercase(), self.name)
    }

    /// Whether this names the object of `kind` with `meta`: the same kind, namespace and
    /// name and, when both carry one, the same uid, so that a recreated object of the same
    /// name is not its predecessor.
    pub fn refers_to(&self, kind: Kind, meta: &ObjectMeta) -> bool {
        Kind::from_alias(&self.kind) == Some(kind)
            && self.name == meta.name
            && (self.namespace.is_empty() || !kind.namespaced() || self.namespace == meta.namespace)
            && (self.uid.is_empty() || meta.uid.is_empty() || self.uid == meta.uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_references_use_the_lower_case_kind() {
        let reference = ObjectReference { kind: "Pod".into(), namespace: "default".into(), name: "web-server".into(), uid: String::new() };
        assert_eq!(reference.short(), "pod/web-server");
    }

    #[test]
    fn times_are_read_as_rfc_3339_in_utc() {
        let meta = |json: serde_json::Value| serde_json::from_value::<ObjectMeta>(json);
        let read = meta(serde_json::json!({"created_at": "2026-12-06T08:00:00.5+01:00", "deletion_timestamp": null})).unwrap();
        assert_eq!(read.created_at.unwrap().to_rfc3339(), "2026-12-06T07:00:00.500+00:00");
        assert_eq!(read.deletion_timestamp, None);
        assert_eq!(meta(serde_json::json!({})).unwrap().created_at, None, "an absent time is none");
        let written = ObjectMeta { created_at: read.created_at, ..Default::default() };
        assert_eq!(meta(serde_json::to_value(&written).unwrap()).unwrap(), written, "a written time reads back");
        let error = meta(serde_json::json!({"created_at": "2026-12-06"})).unwrap_err().to_string();
        assert!(error.contains("premature end of input"), "{error}");
    }
}
