//! `coordination.k8s.io/v1` Leases, which `/k8s` only reads: their holders write them through
//! the native API (a node's agent renews its node's lease, the servers their leader election
//! and identities). A node's lease is cluster-scoped in the store, keyed by its node's name;
//! here it lives in `kube-node-lease`, where `kubectl describe node` reads it, as in
//! Kubernetes. The control plane's leases are in `kube-system` in both.

use k8s_openapi::api::coordination::v1 as coordination;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use shared::model::Lease;

use super::meta::{meta_out, some, time};

/// Where Kubernetes keeps the nodes' leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// The store's namespace of the leases in Kubernetes' `namespace`.
pub fn lease_store_namespace(namespace: &str) -> &str {
    if namespace == NODE_LEASE_NAMESPACE { "" } else { namespace }
}

pub fn lease(lease: &Lease) -> coordination::Lease {
    let mut metadata = meta_out(&lease.metadata);
    if lease.is_node_lease() {
        metadata.namespace = Some(NODE_LEASE_NAMESPACE.into());
    }
    let spec = &lease.spec;
    let micro = |t| meta::MicroTime(time(t).0);
    coordination::Lease {
        metadata,
        spec: Some(coordination::LeaseSpec {
            holder_identity: some(&spec.holder_identity),
            lease_duration_seconds: Some(i32::try_from(spec.lease_duration_seconds).unwrap_or(i32::MAX)),
            acquire_time: spec.acquire_time.map(micro),
            renew_time: spec.renew_time.map(micro),
            lease_transitions: spec.lease_transitions,
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use shared::model::{LeaseSpec, ObjectMeta};

    use super::*;

    #[test]
    fn a_node_lease_lives_in_kube_node_lease_and_the_control_planes_where_they_are() {
        let at = chrono::DateTime::from_timestamp(1_700_000_000, 123_456_000).unwrap();
        let spec = LeaseSpec { holder_identity: "n1".into(), lease_duration_seconds: 40, renew_time: Some(at), ..LeaseSpec::default() };
        let node = Lease { kind: "Lease".into(), metadata: ObjectMeta::named("", "n1"), spec };
        let json = serde_json::to_value(lease(&node)).unwrap();
        assert_eq!(json["metadata"]["namespace"], NODE_LEASE_NAMESPACE);
        assert_eq!(json["spec"]["holderIdentity"], "n1");
        assert_eq!(json["spec"]["leaseDurationSeconds"], 40);
        assert_eq!(json["spec"]["renewTime"], "2023-11-14T22:13:20.123456Z", "a MicroTime");
        assert!(json["spec"].get("acquireTime").is_none());
        let leader = Lease { metadata: ObjectMeta::named("kube-system", "shepherd-leader"), ..node };
        assert_eq!(serde_json::to_value(lease(&leader)).unwrap()["metadata"]["namespace"], "kube-system");
        assert_eq!((lease_store_namespace(NODE_LEASE_NAMESPACE), lease_store_namespace("kube-system")), ("", "kube-system"));
    }
}
