//! The object store: every object by kind and key, one global revision counter, atomic
//! read-modify-write transactions (the compare-and-swap every update relies on) and the
//! watch history. [`Store`] is the seam a distributed backend (etcd) would implement;
//! [`CachedStore`] is the embedded one, over SQLite or memory. A watcher says what it
//! selects ([`Interest`]): the store hands it those changes alone and wakes it for nothing else.

mod cached;
mod sqlite;

use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::Stream;
use futures::future::BoxFuture;
use shared::api::FieldError;
use shared::model::{Kind, Object};
use tokio_util::sync::CancellationToken;

pub use cached::{CachedStore, History, MemoryPersistence, PersistedChange, Persistence, Snapshot};
pub use sqlite::SqlitePersistence;

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("{kind} {key:?} not found")]
    NotFound { kind: Kind, key: String },
    #[error("{kind} {key:?} already exists")]
    AlreadyExists { kind: Kind, key: String },
    /// A compare-and-swap lost: the message says what was expected and what was found.
    #[error("{0}")]
    Conflict(String),
    /// A write the object's current state does not allow, with the fields at fault.
    #[error("{message}")]
    Invalid { message: String, details: Vec<FieldError> },
    #[error(
        "resource_version {requested} is too old: the server keeps history only after revision {oldest}; list again and watch from the list's resource_version"
    )]
    Gone { requested: u64, oldest: u64 },
    /// A remote watcher that fell further behind than the history reaches.
    #[error("resource_version {requested} is newer than the store's revision {current}; watch from a revision a list or a watch returned")]
    Future { requested: u64, current: u64 },
    #[error("the store failed to persist the write: {0}")]
    Backend(String),
    #[error("the store is shut down")]
    Closed,
}

impl StoreError {
    pub fn conflict(message: impl Into<String>) -> Self {
        StoreError::Conflict(message.into())
    }

    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        StoreError::Invalid { message: format!("{field}: {message}"), details: vec![FieldError { field: field.to_string(), message }] }
    }
}

/// Where an object lives: its kind and `namespace/name` (or `name` when cluster-scoped).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub kind: Kind,
    pub key: String,
}

impl Key {
    pub fn new(kind: Kind, namespace: &str, name: &str) -> Self {
        let key = if kind.namespaced() { format!("{namespace}/{name}") } else { name.to_string() };
        Key { kind, key }
    }

    pub fn of(object: &Object) -> Self {
        Key::new(object.kind(), &object.metadata().namespace, &object.metadata().name)
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.key)
    }
}

/// What a mutation decides, given the object's current state. (`Put` is large, but a
/// `Change` lives only for the moment the writer applies it: boxing would cost more.)
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Change {
    /// Store this state; the store stamps the new resource_version.
    Put(Object),
    Delete,
    /// Nothing to write: the revision does not move.
    Keep,
}

/// Read access for a mutation: the state as of every write committed or staged before it.
pub trait View {
    fn get(&self, key: &Key) -> Option<&Object>;
    /// Every pod whose `spec.node_name` is `node` (the field index a bind checks room with).
    fn pods_on_node(&self, node: &str) -> Vec<&Object>;
}

/// A read-modify-write of one object, run by the store's single writer against the latest
/// state, so that the check and the write are atomic.
pub type Mutate = Box<dyn FnOnce(&dyn View, Option<&Object>) -> Result<Change> + Send>;

pub struct Write {
    pub key: Key,
    pub mutate: Mutate,
}

impl Write {
    pub fn new(key: Key, mutate: impl FnOnce(&dyn View, Option<&Object>) -> Result<Change> + Send + 'static) -> Self {
        Write { key, mutate: Box::new(mutate) }
    }
}

/// Writes that commit together or not at all.
#[derive(Default)]
pub struct Txn {
    pub writes: Vec<Write>,
}

impl Txn {
    pub fn new() -> Self {
        Txn::default()
    }

    pub fn with(mut self, write: Write) -> Self {
        self.writes.push(write);
        self
    }

    pub fn push(&mut self, write: Write) {
        self.writes.push(write);
    }
}

/// The result of one write of a committed transaction.
#[derive(Debug, Clone)]
pub enum Outcome {
    Put { object: Arc<Object>, created: bool },
    Deleted(Arc<Object>),
    Kept(Option<Arc<Object>>),
}

impl Outcome {
    /// The object as it now is (or was, when deleted).
    pub fn object(&self) -> Option<&Arc<Object>> {
        match self {
            Outcome::Put { object, .. } | Outcome::Deleted(object) => Some(object),
            Outcome::Kept(object) => object.as_ref(),
        }
    }
}

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
    fn nodes(&self) -> impl Iterator<Item = &str> {
        let now = pod_node(&self.object);
        let before = self.prev.as_deref().and_then(pod_node).filter(|before| Some(*before) != now);
        now.into_iter().chain(before)
    }
}

/// The node a pod is bound to.
pub(crate) fn pod_node(object: &Object) -> Option<&str> {
    match object {
        Object::Pod(p) if !p.spec.node_name.is_empty() => Some(&p.spec.node_name),
        _ => None,
    }
}

/// The deployment that controls a pod, by its controller reference: the key of the store's
/// owner index, and the deployment controller's work for the pod.
pub fn pod_owner(object: &Object) -> Option<Key> {
    match object {
        Object::Pod(p) => {
            p.metadata.controller().filter(|r| r.kind == "Deployment").map(|r| Key::new(Kind::Deployment, &p.metadata.namespace, &r.name))
        }
        _ => None,
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
    /// `LagLimit` in the cached store); an in-process one never falls behind.
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

/// The store every part of the server uses.
pub trait Store: Send + Sync + 'static {
    /// `sqlite` or `memory`.
    fn backend(&self) -> &'static str;
    /// The revision of the last committed write.
    fn revision(&self) -> u64;
    fn get(&self, key: &Key) -> Option<Arc<Object>>;
    /// Objects of a kind, in one namespace or all, with the revision they were read at.
    fn list(&self, kind: Kind, namespace: Option<&str>) -> (u64, Vec<Arc<Object>>);
    /// Pods bound to a node, read through the `spec.node_name` index.
    fn pods_on_node(&self, node: &str) -> (u64, Vec<Arc<Object>>);
    /// Pods whose controller is `owner` (see [`pod_owner`]), read through the owner index,
    /// so that a deployment's reconcile reads its own pods, not its namespace's.
    fn pods_owned_by(&self, owner: &Key) -> (u64, Vec<Arc<Object>>);
    fn count(&self, kind: Kind) -> usize;
    /// Commits a transaction; resolves once it is durable, with one outcome per write.
    fn commit(&self, txn: Txn) -> BoxFuture<'static, Result<Vec<Outcome>>>;
    /// Every change `interest` selects strictly after revision `from` (0: from now), then
    /// live ones. From before the retained history, an interest whose selection is
    /// permanent gets each object changed since in its current state, and the deletions
    /// since, in revision order; otherwise, and when deletions since `from` are no longer
    /// kept, it fails with [`StoreError::Gone`]. Fails with [`StoreError::Future`] when
    /// `from` is newer than the store.
    fn watch_interest(&self, interest: Interest, from: u64) -> Result<WatchStream>;
    /// Every change of `kinds`, for an in-process watcher.
    fn watch(&self, kinds: &[Kind], from: u64) -> Result<WatchStream> {
        self.watch_interest(Interest::kinds(kinds), from)
    }
    /// Drops the changes older than the history keeps, as every commit does: for a store
    /// that has had no commit for a while.
    fn expire_history(&self);
    /// Moves the objects of `kind` to fresh memory, unchanged and with no new revision, so
    /// that what a mass deletion left thinly spread goes back to the system (see
    /// [`crate::heaps`]).
    fn compact(&self, kind: Kind);
    /// Stops taking writes, lets the queued ones commit and closes the backend.
    fn close(&self) -> BoxFuture<'static, ()>;
}

/// How often an idle store's history is aged ([`Store::expire_history`]).
pub const HISTORY_EXPIRY_PERIOD: Duration = Duration::from_secs(5);

/// Ages the history every [`HISTORY_EXPIRY_PERIOD`] until `shutdown`.
pub async fn expire_history(store: Arc<dyn Store>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(HISTORY_EXPIRY_PERIOD);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => store.expire_history(),
        }
    }
}

/// Commits one write and returns its outcome.
pub async fn commit_one(store: &dyn Store, write: Write) -> Result<Outcome> {
    let mut outcomes = store.commit(Txn::new().with(write)).await?;
    outcomes.pop().ok_or(StoreError::Closed)
}
