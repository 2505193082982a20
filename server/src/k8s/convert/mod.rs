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
use shared::model::{ConfigMap, Deployment, Event, Kind, Namespace, Node, Object, Pod, ReplicaSet, Resource, Secret, Service};

pub use self::apps::{scale_in, scale_out};
pub use self::coordination::lease_store_namespace;
pub use self::core::endpoints;
pub use self::discovery::{endpoint_slice, select_slices};
pub use self::strict::{Cause, Convert, Error, decode, decode_over, invalid_causes, k8s_field};
use super::kinds::{KINDS, Served};

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

/// The fields of `value`, a body of `kind`'s Kubernetes type, that a write through `/k8s`
/// refuses as ones Shepherd does not hold ([`strict::unsupported`]); none for a lease, which
/// `/k8s` only reads.
pub fn unsupported_fields(kind: Kind, value: &Value) -> Vec<String> {
    match kind {
        Kind::Pod => strict::unsupported::<Pod>(value),
        Kind::Node => strict::unsupported::<Node>(value),
        Kind::Deployment => strict::unsupported::<Deployment>(value),
        Kind::ReplicaSet => strict::unsupported::<ReplicaSet>(value),
        Kind::Service => strict::unsupported::<Service>(value),
        Kind::Event => strict::unsupported::<Event>(value),
        Kind::Namespace => strict::unsupported::<Namespace>(value),
        Kind::ConfigMap => strict::unsupported::<ConfigMap>(value),
        Kind::Secret => strict::unsupported::<Secret>(value),
        Kind::Lease => Vec::new(),
    }
}

/// A manifest's document written Kubernetes' way, as the native object a create through
/// `/k8s` would store: its `apiVersion` and `kind` name a kind stored here, and its fields
/// are read (and refused) as [`decode`] reads a body.
pub fn from_manifest(value: &Value) -> std::result::Result<Object, String> {
    let api_version = value.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or_default();
    let stored = KINDS.iter().find(|e| e.gvk.api_version == api_version && e.gvk.kind == kind).and_then(|e| match e.served {
        Served::Stored(kind) => Some(kind),
        Served::Endpoints | Served::EndpointSlices => None,
    });
    let Some(stored) = stored else {
        return Err(format!(
            "apiVersion {api_version:?} and kind {kind:?} name no kind this server stores: a manifest is written either Kubernetes' way, every document with its apiVersion, or Shepherd's"
        ));
    };
    fn read<R: Convert>(value: &Value) -> Result<Object, Error> {
        decode::<R>(value).map(Resource::into_object)
    }
    let object = match stored {
        Kind::Pod => read::<Pod>(value),
        Kind::Node => read::<Node>(value),
        Kind::Namespace => read::<Namespace>(value),
        Kind::Service => read::<Service>(value),
        Kind::ConfigMap => read::<ConfigMap>(value),
        Kind::Secret => read::<Secret>(value),
        Kind::Event => read::<Event>(value),
        Kind::Deployment => read::<Deployment>(value),
        Kind::ReplicaSet => read::<ReplicaSet>(value),
        Kind::Lease => return Err("a Lease is written by its holder through the native API, not from a manifest".to_string()),
    };
    object.map_err(|e| e.to_string())
}
