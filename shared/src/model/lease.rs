//! Leases: a node's frequent proof of life, kept apart from the node itself; the leader
//! election of the control plane; and each API server's identity.

use serde::{Deserialize, Serialize};

use super::meta::{ObjectMeta, Time};

/// Where the control plane's own leases live (the leader's and each API server's identity),
/// as in Kubernetes.
pub const SYSTEM_NAMESPACE: &str = "kube-system";

/// The label of an API server's identity lease, as kube-apiserver sets it; its value is the
/// component, [`IDENTITY_COMPONENT`].
pub const IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";
pub const IDENTITY_COMPONENT: &str = "shepherd";

/// The annotation of an identity lease that says where that server answers.
pub const ADVERTISE_URL_ANNOTATION: &str = "shepherd/advertise-url";

/// A lease as Kubernetes keeps it (coordination.k8s.io/v1 Lease). A node's heartbeat since
/// KEP-589: a small object named after its node, renewed every few seconds, so that proof of
/// life costs one small write that only lease watchers see, never a Node write. Node leases
/// are cluster-scoped (no namespace; Kubernetes keeps them in `kube-node-lease`); the control
/// plane's are in [`SYSTEM_NAMESPACE`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Lease {
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: LeaseSpec,
}

impl Lease {
    /// A node's lease, named after its node; the others are the control plane's.
    pub fn is_node_lease(&self) -> bool {
        self.metadata.namespace.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct LeaseSpec {
    /// Who holds it: a node's lease is held by the node itself, the leader's by the server
    /// that leads; empty when released.
    pub holder_identity: String,
    /// How long a renewal counts, in whole seconds: for a node, the server's node monitor grace.
    pub lease_duration_seconds: i64,
    /// When the current holder acquired it (leader election).
    #[serde(default, deserialize_with = "super::meta::de_time", skip_serializing_if = "Option::is_none")]
    pub acquire_time: Option<Time>,
    /// The holder's clock at the last renewal (for a node, the server's).
    #[serde(default, deserialize_with = "super::meta::de_time", skip_serializing_if = "Option::is_none")]
    pub renew_time: Option<Time>,
    /// How many times the lease changed holders (leader election).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_transitions: Option<i32>,
}

impl LeaseSpec {
    /// The holder, if it renewed within the lease's duration before `now` by its own
    /// `renew_time`. For display only: an elector judges expiry by its own clock from when
    /// it saw the lease change, never by another server's clock.
    pub fn holder_at(&self, now: Time) -> Option<&str> {
        let renewed = self.renew_time?;
        let fresh = renewed + chrono::Duration::seconds(self.lease_duration_seconds) > now;
        (fresh && !self.holder_identity.is_empty()).then_some(self.holder_identity.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_counts_while_its_renewal_is_fresh_and_a_released_lease_has_none() {
        let at = |s: i64| chrono::DateTime::from_timestamp(1_000 + s, 0).unwrap();
        let spec = LeaseSpec { holder_identity: "a".into(), lease_duration_seconds: 15, renew_time: Some(at(0)), ..LeaseSpec::default() };
        assert_eq!(spec.holder_at(at(14)), Some("a"));
        assert_eq!(spec.holder_at(at(15)), None);
        assert_eq!(LeaseSpec { holder_identity: String::new(), ..spec.clone() }.holder_at(at(1)), None);
        assert_eq!(LeaseSpec { renew_time: None, ..spec }.holder_at(at(1)), None);
    }

    #[test]
    fn a_node_lease_reads_and_writes_as_before() {
        let json = r#"{"kind":"Lease","metadata":{"name":"n1"},"spec":{"holder_identity":"n1","lease_duration_seconds":40}}"#;
        let lease: Lease = serde_json::from_str(json).unwrap();
        let written = serde_json::to_value(&lease.spec).unwrap();
        assert_eq!(written, serde_json::json!({"holder_identity": "n1", "lease_duration_seconds": 40}));
        assert!(lease.is_node_lease());
    }
}
