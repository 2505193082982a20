//! What watchers see: one committed change ([`StoreEvent`], its JSON encoded once), what a
//! watcher selects ([`Interest`]) and what each wake-up of a watch yields ([`WatchBatch`]).

use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use futures::Stream;
use shared::model::{Kind, Object};

use super::key::pod_node;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One committed change, as watchers see it. Clones share the object and its JSON.
#[derive(Debug, Clone)]
pub struct StoreEvent {
    pub type_: EventType,
    pub revision: u64,
    /// The new state; for `Deleted` the last state.
    pub object: Arc<Object>,
    /// The state before, for `Modified` and `Deleted`.
    pub prev: Option<Arc<Object>>,
    /// `object` as JSON, encoded once for every remote watcher that sends it.
    json: Arc<OnceLock<String>>,
}

impl StoreEvent {
    /// The event's own allocations go in the heap of its object's kind, as the object does
    /// (`crate::heaps`): pods' events and encodings, gone with the history, then leave
    /// no page of the shared heap resident.
    pub fn new(type_: EventType, revision: u64, object: Arc<Object>, prev: Option<Arc<Object>>) -> Self {
        let json = crate::heaps::in_heap_of(object.kind(), Arc::default);
        StoreEvent { type_, revision, object, prev, json }
    }

    /// The object as JSON, encoded by the first watcher that asks.
    pub fn object_json(&self) -> &str {
        self.json.get_or_init(|| {
            crate::heaps::in_heap_of(self.object.kind(), || serde_json::to_string(&*self.object))
                .unwrap_or_else(|e| format!("{{\"error\":\"cannot encode the object: {e}\"}}"))
        })
    }

    /// The nodes a pod change concerns: where the pod is bound now and where it was.
    pub(super) fn nodes(&self) -> impl Iterator<Item = &str> {
        let now = pod_node(&self.object);
        let before = self.prev.as_deref().and_then(pod_node).filter(|before| Some(*before) != now);
        now.into_iter().chain(before)
    }
}

/// What a watcher selects. The store delivers it only these changes, so a watcher of one
/// node's pods is never woken for another node's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interest {
    pub kinds: Vec<Kind>,
    /// Only objects of this namespace (cluster-scoped objects are in none and always pass).
    pub namespace: Option<String>,
    /// Only pods bound to this node, before or after the change.
    pub node_name: Option<String>,
    /// A remote watcher (an HTTP client) is ended once it falls too far behind (see
    /// `LagLimit` in the store's watchers); an in-process one never falls behind.
    pub remote: bool,
    /// The client's whole selection is this interest's, or stays true of an object from
    /// the change that selects it until its deletion (no labels, no mutable field): a
    /// watch from before the history can then be answered from the state, with each
    /// object changed since as it is now and the deletions the store still keeps.
    pub selection_is_permanent: bool,
}

impl Interest {
    /// Every change of `kinds`, for an in-process watcher.
    pub fn kinds(kinds: &[Kind]) -> Self {
        Interest { kinds: kinds.to_vec(), ..Interest::default() }
    }

    /// The slots of the store's watcher and tombstone indexes this interest reads: one
    /// node's pods by that node, every other kind whole.
    pub(super) fn slots(&self) -> impl Iterator<Item = (Kind, Option<&str>)> + '_ {
        self.kinds.iter().map(move |kind| match (kind, &self.node_name) {
            (Kind::Pod, Some(node)) => (Kind::Pod, Some(node.as_str())),
            _ => (*kind, None),
        })
    }

    pub fn selects(&self, event: &StoreEvent) -> bool {
        let object = &event.object;
        let kind = object.kind();
        if !self.kinds.contains(&kind) {
            return false;
        }
        if let Some(namespace) = &self.namespace
            && kind.namespaced()
            && &object.metadata().namespace != namespace
        {
            return false;
        }
        match &self.node_name {
            Some(node) if kind == Kind::Pod => event.nodes().any(|n| n == node),
            _ => true,
        }
    }
}

/// What a watch yields on every wake-up: the selected events after the previous batch, and
/// the revision of the last of them.
#[derive(Debug, Clone)]
pub struct WatchBatch {
    pub events: Vec<StoreEvent>,
    pub revision: u64,
}

pub type WatchStream = Pin<Box<dyn Stream<Item = WatchBatch> + Send>>;
