//! Objects and writes the store's unit tests share: pods on a node or owned by a
//! deployment, nodes, and the names and types a watch batch carries.

use std::sync::Arc;

use shared::model::{Kind, Object, ObjectMeta, Pod};

use super::{Change, EventType, Interest, Key, WatchBatch, Write};

pub(super) fn pod(name: &str, node: &str) -> Object {
    let mut p = Pod { kind: "Pod".into(), metadata: ObjectMeta::named("default", name), ..Pod::default() };
    p.spec.node_name = node.to_string();
    Object::Pod(p)
}

pub(super) fn put(object: Object) -> Write {
    Write::new(Key::of(&object), move |_, _| Ok(Change::Put(object.clone())))
}

pub(super) fn delete(name: &str) -> Write {
    Write::new(Key::new(Kind::Pod, "default", name), |_, _| Ok(Change::Delete))
}

pub(super) fn pods_of(node: &str, remote: bool) -> Interest {
    Interest { kinds: vec![Kind::Pod], node_name: Some(node.into()), remote, ..Interest::default() }
}

pub(super) fn names(batch: &WatchBatch) -> Vec<String> {
    batch.events.iter().map(|e| e.object.metadata().name.clone()).collect()
}

pub(super) fn owned(name: &str, deployment: &str) -> Object {
    let mut object = pod(name, "");
    object.metadata_mut().owner_references = vec![shared::model::OwnerReference {
        uid: "u".into(),
        ..shared::model::OwnerReference::controlled_by("Deployment", &ObjectMeta::named("", deployment))
    }];
    object
}

pub(super) fn names_of(pods: &[Arc<Object>]) -> Vec<String> {
    pods.iter().map(|o| o.metadata().name.clone()).collect()
}

pub(super) fn node(name: &str) -> Object {
    Object::Node(shared::model::Node { kind: "Node".into(), metadata: ObjectMeta::named("", name), ..Default::default() })
}

pub(super) fn kinds_and_names(batch: &WatchBatch) -> Vec<(EventType, String)> {
    batch.events.iter().map(|e| (e.type_, e.object.metadata().name.clone())).collect()
}

pub(super) fn permanent(interest: Interest) -> Interest {
    Interest { selection_is_permanent: true, ..interest }
}
