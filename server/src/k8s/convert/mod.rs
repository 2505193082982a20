//! The one translation between Kubernetes' shapes (`k8s-openapi`) and `shared::model`, both
//! ways: [`strict`] holds the rules for refusing fields, [`meta`] the pieces every kind shares,
//! and one file per API group maps its kinds ([`core`] for `v1`, [`apps`] for `apps/v1`,
//! [`discovery`] for the EndpointSlices of `discovery.k8s.io/v1`, [`coordination`] for the
//! read-only Leases of `coordination.k8s.io/v1`), but for `v1`'s ConfigMap and Secret, which
//! have [`config`], and a pod's volumes and mounts, which have [`volumes`].

mod apps;
mod config;
mod coordination;
mod core;
mod discovery;
mod env;
mod meta;
mod strict;
mod volumes;

use serde_json::Value;
use shared::model::Object;

pub use self::apps::{scale_in, scale_out};
pub use self::coordination::lease_store_namespace;
pub use self::core::endpoints;
pub use self::discovery::{endpoint_slice, select_slices};
pub use self::strict::{Cause, Convert, Error, decode, invalid_causes, k8s_field};
use super::kinds::Served;

/// An object in Kubernetes' JSON shape.
pub fn to_json(served: Served, object: &Object) -> Value {
    let value = match (served, object) {
        (Served::Endpoints, Object::Service(s)) => serde_json::to_value(endpoints(s)),
        (Served::EndpointSlices, Object::Service(s)) => serde_json::to_value(endpoint_slice(s)),
        (_, Object::Pod(o)) => serde_json::to_value(o.to_k8s()),
        (_, Object::Node(o)) => serde_json::to_value(o.to_k8s()),
        (_, Object::Deployment(o)) => serde_json::to_value(o.to_k8s()),
        (_, Object::ReplicaSet(o)) => serde_json::to_value(o.to_k8s()),
        (_, Object::Service(o)) => serde_json::to_value(o.to_k8s()),
        (_, Object::Event(o)) => serde_json::to_value(o.to_k8s()),
        (_, Object::Namespace(o)) => serde_json::to_value(o.to_k8s()),
        (_, Object::ConfigMap(o)) => serde_json::to_value(o.to_k8s()),
        (_, Object::Secret(o)) => serde_json::to_value(o.to_k8s()),
        (_, Object::Lease(o)) => serde_json::to_value(coordination::lease(o)),
    };
    value.unwrap_or(Value::Null)
}
