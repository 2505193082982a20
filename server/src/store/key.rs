//! Where an object lives ([`Key`]), and the pod fields the store indexes by: the node a pod
//! is bound to and the ReplicaSet that controls it.

use shared::model::{Kind, Object};

/// Where an object lives: its kind and `namespace/name` (or `name` when cluster-scoped).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub kind: Kind,
    pub key: String,
}

impl Key {
    /// A lease with a namespace is the control plane's (`kube-system`) and keyed by it; a
    /// node's lease has none and is keyed by its node's name, as before such leases existed.
    pub fn new(kind: Kind, namespace: &str, name: &str) -> Self {
        let scoped = kind.namespaced() || (kind == Kind::Lease && !namespace.is_empty());
        let key = if scoped { format!("{namespace}/{name}") } else { name.to_string() };
        Key { kind, key }
    }

    pub fn of(object: &Object) -> Self {
        Key::new(object.kind(), &object.metadata().namespace, &object.metadata().name)
    }

    /// The namespace (empty for a cluster-scoped kind) and the name that [`Key::new`] joined.
    pub fn namespace_and_name(&self) -> (&str, &str) {
        self.key.split_once('/').unwrap_or(("", &self.key))
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.key)
    }
}

/// The node a pod is bound to.
pub(super) fn pod_node(object: &Object) -> Option<&str> {
    match object {
        Object::Pod(p) if !p.spec.node_name.is_empty() => Some(&p.spec.node_name),
        _ => None,
    }
}

/// The ReplicaSet (or, for pods made before ReplicaSets, the deployment) that controls a
/// pod, by its controller reference: the key of the store's owner index, and its
/// controller's work for the pod.
pub fn pod_owner(object: &Object) -> Option<Key> {
    match object {
        Object::Pod(p) => {
            let owner = p.metadata.controller()?;
            let kind = [Kind::ReplicaSet, Kind::Deployment].into_iter().find(|kind| kind.as_str() == owner.kind)?;
            Some(Key::new(kind, &p.metadata.namespace, &owner.name))
        }
        _ => None,
    }
}
