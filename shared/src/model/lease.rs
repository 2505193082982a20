//! Leases: a node's frequent proof of life, kept apart from the node itself.

use serde::{Deserialize, Serialize};

use super::meta::{ObjectMeta, Time};

/// A node's heartbeat as Kubernetes keeps it since KEP-589 (coordination.k8s.io/v1 Lease):
/// a small object named after its node, renewed every few seconds, so that proof of life
/// costs one small write that only lease watchers see, never a Node write.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Lease {
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: LeaseSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct LeaseSpec {
    /// The node whose agent renews it: a node's lease is held by the node itself.
    pub holder_identity: String,
    /// How long a renewal counts: the server's node monitor grace, in whole seconds.
    pub lease_duration_seconds: i64,
    /// The server's clock at the last renewal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub renew_time: Option<Time>,
}
