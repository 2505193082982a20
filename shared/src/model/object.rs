//! One object of any kind ([`Object`]), the [`Resource`] trait that takes each kind in and
//! out of it, and the errors of reading one from JSON.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::apps::Deployment;
use super::config::{ConfigMap, Secret};
use super::event::Event;
use super::kind::Kind;
use super::lease::Lease;
use super::meta::ObjectMeta;
use super::namespace::Namespace;
use super::node::Node;
use super::pod::Pod;
use super::replicaset::ReplicaSet;
use super::service::Service;

/// One object of any kind, as a manifest or a watch stream carries it.
/// Serialized as the object itself; `kind` says which.
///
/// The store keeps every object behind an `Arc`, and an enum is as large as its largest
/// variant: unboxed, a Deployment's 664 bytes set the block of every event (448 bytes) too.
#[derive(Debug, Clone, PartialEq)]
pub enum Object {
    Pod(Pod),
    Deployment(Box<Deployment>),
    ReplicaSet(Box<ReplicaSet>),
    Service(Service),
    Node(Node),
    Event(Event),
    Namespace(Namespace),
    Lease(Lease),
    ConfigMap(Box<ConfigMap>),
    Secret(Box<Secret>),
}

impl Object {
    pub fn kind(&self) -> Kind {
        match self {
            Object::Pod(_) => Kind::Pod,
            Object::Deployment(_) => Kind::Deployment,
            Object::ReplicaSet(_) => Kind::ReplicaSet,
            Object::Service(_) => Kind::Service,
            Object::Node(_) => Kind::Node,
            Object::Event(_) => Kind::Event,
            Object::Namespace(_) => Kind::Namespace,
            Object::Lease(_) => Kind::Lease,
            Object::ConfigMap(_) => Kind::ConfigMap,
            Object::Secret(_) => Kind::Secret,
        }
    }

    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            Object::Pod(o) => &o.metadata,
            Object::Deployment(o) => &o.metadata,
            Object::ReplicaSet(o) => &o.metadata,
            Object::Service(o) => &o.metadata,
            Object::Node(o) => &o.metadata,
            Object::Event(o) => &o.metadata,
            Object::Namespace(o) => &o.metadata,
            Object::Lease(o) => &o.metadata,
            Object::ConfigMap(o) => &o.metadata,
            Object::Secret(o) => &o.metadata,
        }
    }

    pub fn metadata_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Object::Pod(o) => &mut o.metadata,
            Object::Deployment(o) => &mut o.metadata,
            Object::ReplicaSet(o) => &mut o.metadata,
            Object::Service(o) => &mut o.metadata,
            Object::Node(o) => &mut o.metadata,
            Object::Event(o) => &mut o.metadata,
            Object::Namespace(o) => &mut o.metadata,
            Object::Lease(o) => &mut o.metadata,
            Object::ConfigMap(o) => &mut o.metadata,
            Object::Secret(o) => &mut o.metadata,
        }
    }

    /// Builds an object from JSON whose `kind` names it. An absent `kind` is an error:
    /// a manifest must say what it is.
    pub fn from_value(value: serde_json::Value) -> Result<Object, ObjectError> {
        let kind_text = value.get("kind").and_then(|k| k.as_str()).ok_or(ObjectError::MissingKind)?;
        let kind = match kind_text {
            "Pod" => Kind::Pod,
            "Deployment" => Kind::Deployment,
            "ReplicaSet" => Kind::ReplicaSet,
            "Service" => Kind::Service,
            "Node" => Kind::Node,
            "Event" => Kind::Event,
            "Namespace" => Kind::Namespace,
            "Lease" => Kind::Lease,
            "ConfigMap" => Kind::ConfigMap,
            "Secret" => Kind::Secret,
            other => return Err(ObjectError::UnknownKind(other.to_string())),
        };
        let bad = |e: serde_json::Error| ObjectError::Invalid { kind, message: e.to_string() };
        Ok(match kind {
            Kind::Pod => Object::Pod(serde_json::from_value(value).map_err(bad)?),
            Kind::Deployment => Object::Deployment(Box::new(serde_json::from_value(value).map_err(bad)?)),
            Kind::ReplicaSet => Object::ReplicaSet(Box::new(serde_json::from_value(value).map_err(bad)?)),
            Kind::Service => Object::Service(serde_json::from_value(value).map_err(bad)?),
            Kind::Node => Object::Node(serde_json::from_value(value).map_err(bad)?),
            Kind::Event => Object::Event(serde_json::from_value(value).map_err(bad)?),
            Kind::Namespace => Object::Namespace(serde_json::from_value(value).map_err(bad)?),
            Kind::Lease => Object::Lease(serde_json::from_value(value).map_err(bad)?),
            Kind::ConfigMap => Object::ConfigMap(Box::new(serde_json::from_value(value).map_err(bad)?)),
            Kind::Secret => Object::Secret(Box::new(serde_json::from_value(value).map_err(bad)?)),
        })
    }
}

/// A kind of object the API serves: its [`Kind`], its metadata, and the way in and out of
/// [`Object`]. The server, the client and the dashboard's cache all take objects through it.
pub trait Resource: Clone + PartialEq + Sized + 'static {
    const KIND: Kind;
    fn meta(&self) -> &ObjectMeta;
    fn meta_mut(&mut self) -> &mut ObjectMeta;
    fn into_object(self) -> Object;
    /// The object as this kind, if it is one.
    fn from_object(object: &Object) -> Option<&Self>;
    /// The owned object as this kind, if it is one.
    fn try_from_object(object: Object) -> Option<Self>;
}

/// `resource!(Kind)`, or for a kind [`Object`] boxes, `resource!(Kind, o => *o)`: how its
/// variant's value becomes the owned object.
macro_rules! resource {
    ($kind:ident) => {
        resource!($kind, o => o);
    };
    ($kind:ident, $o:ident => $owned:expr) => {
        impl Resource for $kind {
            const KIND: Kind = Kind::$kind;
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
            fn into_object(self) -> Object {
                Object::$kind(self.into())
            }
            fn from_object(object: &Object) -> Option<&Self> {
                match object {
                    Object::$kind(o) => Some(o),
                    _ => None,
                }
            }
            fn try_from_object(object: Object) -> Option<Self> {
                match object {
                    Object::$kind($o) => Some($owned),
                    _ => None,
                }
            }
        }
    };
}

resource!(Pod);
resource!(Deployment, o => *o);
resource!(ReplicaSet, o => *o);
resource!(Service);
resource!(Node);
resource!(Event);
resource!(Namespace);
resource!(Lease);
resource!(ConfigMap, o => *o);
resource!(Secret, o => *o);

impl Serialize for Object {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Object::Pod(o) => o.serialize(s),
            Object::Deployment(o) => o.serialize(s),
            Object::ReplicaSet(o) => o.serialize(s),
            Object::Service(o) => o.serialize(s),
            Object::Node(o) => o.serialize(s),
            Object::Event(o) => o.serialize(s),
            Object::Namespace(o) => o.serialize(s),
            Object::Lease(o) => o.serialize(s),
            Object::ConfigMap(o) => o.serialize(s),
            Object::Secret(o) => o.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        Object::from_value(value).map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    #[error("the object has no \"kind\": say which it is (Pod, Deployment, ReplicaSet, Service, ConfigMap, Secret, Node, Namespace)")]
    MissingKind,
    #[error(
        "unknown kind {0:?}: Shepherd serves Pod, Deployment, ReplicaSet, Service, ConfigMap, Secret, Node, Event, Namespace and Lease"
    )]
    UnknownKind(String),
    #[error("invalid {kind}: {message}")]
    Invalid { kind: Kind, message: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_no_larger_than_its_largest_unboxed_kind() {
        let unboxed =
            [size_of::<Pod>(), size_of::<Service>(), size_of::<Node>(), size_of::<Event>(), size_of::<Namespace>(), size_of::<Lease>()];
        assert!(size_of::<Object>() < size_of::<Deployment>(), "a Deployment sets every object's size: box it");
        assert!(size_of::<Object>() <= unboxed.iter().max().unwrap() + 8, "{} bytes", size_of::<Object>());
    }
}
