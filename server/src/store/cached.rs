//! The embedded store: an in-memory cache that serves every read, a committer that batches
//! concurrent transactions into one backend commit (group commit), the ring of
//! recent changes that watches replay from, the recent deletions that a watch of a
//! permanent selection resumes from past that ring, and the watchers' mailboxes: each commit puts
//! each change in the mailboxes of the watchers that select it, found through an index by
//! kind and by node, and wakes those alone.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use shared::capacity::GiveBack;
use shared::model::{Kind, Object};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::time::Instant;

use super::{
    Change, EventType, Interest, Key, Outcome, Result, Store, StoreError, StoreEvent, Txn, View, WatchBatch, WatchStream, pod_node,
    pod_owner,
};

/// The most transactions one backend commit takes.
const MAX_BATCH: usize = 2048;
/// Transactions waiting for the writer thread before `commit` callers wait for room.
const QUEUE_DEPTH: usize = 8192;
/// The most changes a remote watcher's stream takes at once, so that what its client may
/// not have read yet is known to within one batch.
const REMOTE_BATCH: usize = 1024;

/// Everything a backend holds: the revision it reached and every object.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub revision: u64,
    pub objects: Vec<Object>,
}

/// One key's new state in a backend commit; `None` deletes it.
pub struct PersistedChange<'a> {
    pub kind: Kind,
    pub key: &'a str,
    pub object: Option<&'a Object>,
    /// The resource_version of the state it replaces, when there was one: a backend that
    /// keeps each state under its revision finds the old one by it.
    pub replaces: Option<u64>,
}

/// Durability under the cache: loads everything at start, then commits batches atomically.
pub trait Persistence: Send + 'static {
    fn name(&self) -> &'static str;
    /// Whether a commit waits on a disk: such a backend commits on a thread of its own, so
    /// that no async task waits; the others are committed by the callers themselves.
    fn waits_on_disk(&self) -> bool {
        true
    }
    fn load(&mut self) -> Result<Snapshot>;
    /// Writes every change and the new revision in one atomic, durable step.
    fn commit(&mut self, changes: &[PersistedChange<'_>], revision: u64) -> Result<()>;
    fn close(&mut self) -> Result<()>;
}

/// No durability: for tests, benchmarks and throwaway clusters.
pub struct MemoryPersistence;

impl Persistence for MemoryPersistence {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn waits_on_disk(&self) -> bool {
        false
    }

    fn load(&mut self) -> Result<Snapshot> {
        Ok(Snapshot::default())
    }

    fn commit(&mut self, _changes: &[PersistedChange<'_>], _revision: u64) -> Result<()> {
        Ok(())
    }

    fn close(&mut self) -> Result<()> {
        Ok(())
    }
}

#[derive(Default)]
struct State {
    objects: HashMap<Kind, BTreeMap<String, Arc<Object>>>,
    /// Pods by `spec.node_name` (bound pods only), each with its current state, so that a
    /// reader of a node's or a deployment's pods takes them without a search per pod.
    by_node: HashMap<String, PodIndex>,
    /// Pods by the deployment that controls them, each with its current state.
    by_owner: HashMap<Key, PodIndex>,
    revision: u64,
    /// Every change after `history_start`, in order, with when it was committed: the change
    /// at revision r sits at index `r - history_start - 1`.
    history: VecDeque<(Instant, StoreEvent)>,
    history_start: u64,
    tombstones: Tombstones,
}

impl State {
    /// Drops the oldest changes beyond `limits`, so that a watch from before them gets 410.
    fn forget_history(&mut self, limits: &History, now: Instant) {
        while let Some((at, oldest)) = self.history.front() {
            let expired = limits.age.is_some_and(|age| now.duration_since(*at) > age);
            if self.history.len() <= limits.changes && !expired {
                break;
            }
            self.history_start = oldest.revision;
            self.history.pop_front();
        }
        self.tombstones.forget(limits, now);
    }

    /// The start of a watch from `from`, before the history, of an interest whose selection
    /// is permanent: each selected object changed since, as it is now (`Modified` with no
    /// state before, which a filter passes on as `ADDED`), and each deletion since, in
    /// revision order. `None` when a deletion after `from` is no longer kept.
    fn changes_since(&self, interest: &Interest, from: u64) -> Option<Vec<StoreEvent>> {
        if interest.kinds.iter().any(|kind| from < self.tombstones.start(*kind)) {
            return None;
        }
        let mut events = Vec::new();
        for (kind, node) in Watchers::slots(interest) {
            let changed = |object: &Arc<Object>| {
                let revision = object.metadata().resource_version;
                (revision > from).then(|| StoreEvent::new(EventType::Modified, revision, object.clone(), None))
            };
            match node {
                Some(node) => events.extend(self.pods_in(&self.by_node, node).1.iter().filter_map(changed)),
                None => events.extend(self.objects.get(&kind).into_iter().flat_map(BTreeMap::values).filter_map(changed)),
            }
            events.extend(self.tombstones.since(kind, node, from));
        }
        events.retain(|e| interest.selects(e));
        events.sort_unstable_by_key(|e| e.revision);
        Some(events)
    }

    fn get(&self, key: &Key) -> Option<&Arc<Object>> {
        self.objects.get(&key.kind).and_then(|m| m.get(&key.key))
    }

    /// Puts or removes one object; the map's and the indexes' new entries go in the heap of
    /// the object's kind, as the object itself does ([`kept`]).
    fn apply(&mut self, key: &Key, object: Option<Arc<Object>>) -> Option<Arc<Object>> {
        crate::heaps::in_heap_of(key.kind, || self.apply_in_heap(key, object))
    }

    fn apply_in_heap(&mut self, key: &Key, object: Option<Arc<Object>>) -> Option<Arc<Object>> {
        let map = self.objects.entry(key.kind).or_default();
        let prev = match &object {
            Some(o) => map.insert(key.key.clone(), o.clone()),
            None => map.remove(&key.key),
        };
        if key.kind == Kind::Pod {
            let node = |o: &Arc<Object>| pod_node(o).map(str::to_string);
            let (before, after) = (prev.as_ref().and_then(node), object.as_ref().and_then(|o| Some((node(o)?, o))));
            reindex(&mut self.by_node, before, after, &key.key);
            let (before, after) = (prev.as_deref().and_then(pod_owner), object.as_ref().and_then(|o| Some((pod_owner(o)?, o))));
            reindex(&mut self.by_owner, before, after, &key.key);
        }
        prev
    }

    /// The pods an index holds under `slot`, with the revision they were read at.
    fn pods_in<K>(&self, index: &HashMap<K::Owned, PodIndex>, slot: &K) -> (u64, Vec<Arc<Object>>)
    where
        K: Eq + std::hash::Hash + ToOwned + ?Sized,
        K::Owned: Eq + std::hash::Hash + std::borrow::Borrow<K>,
    {
        (self.revision, index.get(slot).map(|pods| pods.values().cloned().collect()).unwrap_or_default())
    }
}

/// The last states of deleted objects, kept past the history (as long as its age allows,
/// and at most [`History::deletions`] of each kind), so that a watcher whose selection is
/// permanent can resume from before the history without listing again. Only the objects
/// are kept, in the heap of their kind, not their events and encodings. Events keep no
/// tombstones: the event limit deletes them by the hundred thousand in a burst of pods,
/// and kept for the history's age they would leave the heap of the events that stay
/// fragmented; an events watcher from before the history lists again.
#[derive(Default)]
struct Tombstones {
    by_kind: HashMap<Kind, Deletions>,
    /// The deletions of pods bound to each node, for the watchers of one node.
    pods_by_node: HashMap<String, VecDeque<Deletion>>,
    /// Where each kind's deletions start when it has had none yet.
    opened_at: u64,
}

/// One kind's kept deletions, in revision order.
struct Deletions {
    /// A deletion at or before this revision may have been forgotten.
    start: u64,
    kept: VecDeque<Deletion>,
}

#[derive(Clone)]
struct Deletion {
    at: Instant,
    revision: u64,
    last: Arc<Object>,
}

impl Deletion {
    fn event(&self) -> StoreEvent {
        StoreEvent::new(EventType::Deleted, self.revision, self.last.clone(), Some(self.last.clone()))
    }
}

impl Tombstones {
    fn keep(&mut self, deletion: Deletion) {
        let opened_at = self.opened_at;
        let deletions = self.by_kind.entry(deletion.last.kind()).or_insert_with(|| Deletions { start: opened_at, kept: VecDeque::new() });
        if deletion.last.kind() == Kind::Event {
            deletions.start = deletion.revision;
            return;
        }
        if let Some(node) = pod_node(&deletion.last) {
            self.pods_by_node.entry(node.to_string()).or_default().push_back(deletion.clone());
        }
        deletions.kept.push_back(deletion);
    }

    /// The revision from which a watch of `kind` can start from the state.
    fn start(&self, kind: Kind) -> u64 {
        self.by_kind.get(&kind).map_or(self.opened_at, |d| d.start)
    }

    fn forget(&mut self, limits: &History, now: Instant) {
        for deletions in self.by_kind.values_mut() {
            while let Some(oldest) = deletions.kept.front() {
                let expired = limits.age.is_some_and(|age| now.duration_since(oldest.at) > age);
                if deletions.kept.len() <= limits.deletions && !expired {
                    break;
                }
                if let Some(node) = pod_node(&oldest.last)
                    && let Some(pods) = self.pods_by_node.get_mut(node)
                {
                    pods.pop_front();
                    if pods.is_empty() {
                        self.pods_by_node.remove(node);
                    }
                }
                deletions.start = oldest.revision;
                deletions.kept.pop_front();
            }
            deletions.kept.give_back_spare();
        }
    }

    /// The deletions of `kind` after `from`, of pods bound to `node` when it is given.
    fn since(&self, kind: Kind, node: Option<&str>, from: u64) -> Vec<StoreEvent> {
        let kept = match node {
            Some(node) => self.pods_by_node.get(node),
            None => self.by_kind.get(&kind).map(|d| &d.kept),
        };
        let Some(kept) = kept else { return Vec::new() };
        kept.range(kept.partition_point(|d| d.revision <= from)..).map(Deletion::event).collect()
    }
}

/// `object` as the store keeps it: copied into the heap of its kind, so that objects that
/// stay (events, nodes) do not keep the pages of those deleted by the thousand (pods) resident.
fn kept(object: Object) -> Arc<Object> {
    crate::heaps::in_heap_of(object.kind(), || Arc::new(object.clone()))
}

/// One slot of a pod index: its pods' current states by key.
type PodIndex = BTreeMap<String, Arc<Object>>;

/// Moves pod `key` in `index` from the slot of its previous state to that of its new one,
/// with its new state; an emptied slot goes.
fn reindex<K: Eq + std::hash::Hash>(index: &mut HashMap<K, PodIndex>, before: Option<K>, after: Option<(K, &Arc<Object>)>, key: &str) {
    if let Some(before) = before
        && after.as_ref().is_none_or(|(slot, _)| *slot != before)
        && let Some(pods) = index.get_mut(&before)
    {
        pods.remove(key);
        if pods.is_empty() {
            index.remove(&before);
        }
    }
    if let Some((slot, object)) = after {
        let pods = index.entry(slot).or_default();
        // The key is copied only for a pod new to the slot.
        if let Some(state) = pods.get_mut(key) {
            *state = object.clone();
        } else {
            pods.insert(key.to_string(), object.clone());
        }
    }
}

type Reply = oneshot::Sender<Result<Vec<Outcome>>>;

struct Request {
    txn: Txn,
    reply: Reply,
}

struct Inner {
    name: &'static str,
    state: RwLock<State>,
    /// Taken after `state` whenever both are held.
    watchers: Mutex<Watchers>,
    /// What the history keeps; its count is also how far a remote watcher may fall behind.
    history: History,
    committer: Committer,
}

/// Who commits the transactions callers hand in.
enum Committer {
    /// A thread of its own, for a backend that waits on a disk.
    Thread { sender: RwLock<Option<mpsc::Sender<Request>>>, handle: Mutex<Option<JoinHandle<()>>> },
    /// The caller that finds no commit under way commits every transaction queued, its own
    /// and those that arrive meanwhile, then returns. An idle store's write costs no thread
    /// hand-off (at 5,000 nodes' lease renewals that hand-off was a third of the server's
    /// idle CPU), and a burst still commits in batches.
    Callers { queue: Mutex<CallerQueue>, persistence: Mutex<Option<Box<dyn Persistence>>> },
}

#[derive(Default)]
struct CallerQueue {
    requests: Vec<Request>,
    committing: bool,
    closed: bool,
}

/// Ends a caller's turn as committer even if a transaction's closure panics, so that the
/// next caller takes over instead of every later write waiting forever.
struct CommitTurn<'a>(&'a Mutex<CallerQueue>);

impl Drop for CommitTurn<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut queue = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            queue.committing = false;
        }
    }
}

impl Inner {
    /// Commits queued transactions in batches until none is left (the caller's turn).
    fn commit_queued(&self, queue: &Mutex<CallerQueue>, persistence: &Mutex<Option<Box<dyn Persistence>>>) {
        let _turn = CommitTurn(queue);
        // A turn that panicked left nothing half-applied to the backend that matters here.
        let mut persistence = persistence.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        loop {
            let batch = {
                let mut queue = queue.lock().expect("commit queue lock");
                if queue.requests.is_empty() {
                    queue.committing = false;
                    return;
                }
                let take = queue.requests.len().min(MAX_BATCH);
                queue.requests.drain(..take).collect::<Vec<_>>()
            };
            match persistence.as_deref_mut() {
                Some(backend) => commit_batch(self, backend, batch),
                // Closed: dropping the replies answers each caller with Closed.
                None => drop(batch),
            }
        }
    }
}

/// One watcher's undelivered changes.
struct Mailbox {
    interest: Interest,
    queue: Mutex<Queue>,
    wake: Notify,
}

#[derive(Default)]
struct Queue {
    events: Vec<StoreEvent>,
    /// The first revision of the batch the stream took last, until it asks for the next:
    /// its client may not have read that batch yet.
    taken_from: Option<u64>,
    /// The watch lagged or the store closed: once the events are taken, the stream ends.
    ended: bool,
    /// The revision the watch started at, for a watcher whose selection is permanent: the
    /// changes it started with, up to there, are not counted as unread. They can be one
    /// per object (a start from the state), and they share the objects the store holds.
    started_at: u64,
}

impl Queue {
    /// The last revision this watcher's client surely read: just before the oldest change
    /// it may not have read.
    fn read_up_to(&self, arriving: &[StoreEvent]) -> Option<u64> {
        let oldest_unread = self.taken_from.or(self.events.first().map(|e| e.revision)).or(arriving.first().map(|e| e.revision))?;
        Some(oldest_unread - 1)
    }

    /// Changes queued that arrived after the watch started.
    fn unread_since_start(&self) -> usize {
        self.events.len() - self.events.partition_point(|e| e.revision <= self.started_at)
    }
}

impl Mailbox {
    /// Queues `events` for the watcher; a remote watcher past `limit` is ended instead.
    fn deliver(&self, events: Vec<StoreEvent>, limit: LagLimit) {
        let mut queue = self.queue.lock().expect("mailbox lock");
        if queue.ended {
            return;
        }
        let read_up_to = queue.read_up_to(&events).unwrap_or(u64::MAX);
        // A watcher whose selection is permanent resumes from the state, however old its
        // revision: only what it holds unread ends it.
        let (unread, lagging) = if self.interest.selection_is_permanent {
            let unread = queue.unread_since_start() + events.len();
            (unread, unread > limit.unread)
        } else {
            let unread = queue.events.len() + events.len();
            (unread, unread > limit.unread || read_up_to < limit.oldest_read)
        };
        if self.interest.remote && lagging {
            tracing::warn!(unread, read_up_to, "a watch fell behind and was closed; it resumes from its last revision");
            // It still sends its oldest batch, so that each resume moves on.
            queue.events.truncate(REMOTE_BATCH);
            let room = REMOTE_BATCH - queue.events.len();
            queue.events.extend(events.into_iter().take(room));
            queue.events.shrink_to_fit();
            queue.ended = true;
        } else {
            queue.events.extend(events);
        }
        drop(queue);
        self.wake.notify_one();
    }

    fn end(&self) {
        self.queue.lock().expect("mailbox lock").ended = true;
        self.wake.notify_one();
    }
}

/// The registered watchers, indexed so that a change finds the ones that may select it
/// without looking at the others: pod watchers of one node by that node, the rest by kind.
#[derive(Default)]
struct Watchers {
    next_id: u64,
    by_kind: HashMap<Kind, HashMap<u64, Arc<Mailbox>>>,
    pods_by_node: HashMap<String, HashMap<u64, Arc<Mailbox>>>,
    closed: bool,
}

impl Watchers {
    /// The index slots a watcher sits in.
    fn slots<'a>(interest: &'a Interest) -> impl Iterator<Item = (Kind, Option<&'a str>)> + 'a {
        interest.kinds.iter().map(move |kind| match (kind, &interest.node_name) {
            (Kind::Pod, Some(node)) => (Kind::Pod, Some(node.as_str())),
            _ => (*kind, None),
        })
    }

    fn slot(&mut self, kind: Kind, node: Option<&str>) -> &mut HashMap<u64, Arc<Mailbox>> {
        match node {
            Some(node) => self.pods_by_node.entry(node.to_string()).or_default(),
            None => self.by_kind.entry(kind).or_default(),
        }
    }

    fn add(&mut self, mailbox: Arc<Mailbox>) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        for (kind, node) in Watchers::slots(&mailbox.interest) {
            self.slot(kind, node).insert(id, mailbox.clone());
        }
        id
    }

    fn remove(&mut self, id: u64, interest: &Interest) {
        for (kind, node) in Watchers::slots(interest) {
            let slot = self.slot(kind, node);
            slot.remove(&id);
            if slot.is_empty() {
                match node {
                    Some(node) => self.pods_by_node.remove(node),
                    None => self.by_kind.remove(&kind),
                };
            }
        }
    }

    /// Puts every event in the mailboxes of the watchers that select it, one delivery (and
    /// one wake-up) per watcher.
    fn dispatch(&self, events: &[StoreEvent], limit: LagLimit) {
        let mut deliveries: HashMap<u64, (&Arc<Mailbox>, Vec<StoreEvent>)> = HashMap::new();
        for event in events {
            let kind = event.object.kind();
            let by_node = (kind == Kind::Pod).then(|| event.nodes().filter_map(|node| self.pods_by_node.get(node))).into_iter().flatten();
            for (id, mailbox) in self.by_kind.get(&kind).into_iter().chain(by_node).flatten() {
                if mailbox.interest.selects(event) {
                    deliveries.entry(*id).or_insert_with(|| (mailbox, Vec::new())).1.push(event.clone());
                }
            }
        }
        for (mailbox, events) in deliveries.into_values() {
            mailbox.deliver(events, limit);
        }
    }
}

/// When a remote watcher is ended, as Kubernetes ends a watcher too slow for its cache.
#[derive(Debug, Clone, Copy)]
struct LagLimit {
    /// The most changes it may hold unread: what a client that stopped reading may cost.
    unread: usize,
    /// The oldest revision its client may have read last. The client resumes from there,
    /// so the watcher is ended while that revision is still in the history, with a quarter
    /// of the history to spare; changes of kinds it does not watch move it too.
    oldest_read: u64,
}

/// How much of the past a watch can replay from.
#[derive(Debug, Clone, Copy)]
pub struct History {
    /// The most changes kept.
    pub changes: usize,
    /// The most deletions kept past the history, for watchers that resume from the state
    /// (see [`Interest::selection_is_permanent`]).
    pub deletions: usize,
    /// Changes older than this are dropped even when fewer are kept, as Kubernetes' watch
    /// cache keeps the last 75 s: a mass deletion's last states do not stay in memory until
    /// as many new changes come, and a watcher that was away longer lists again.
    pub age: Option<Duration>,
}

impl History {
    /// The most unread changes a remote watcher may hold before its stream is ended: half
    /// the history.
    pub fn unread_limit(&self) -> usize {
        (self.changes / 2).max(1)
    }
}

impl From<usize> for History {
    /// The last `changes` changes, however old.
    fn from(changes: usize) -> Self {
        History { changes, deletions: changes, age: None }
    }
}

/// The embedded [`Store`]: cache, group-committing writer and watch history.
#[derive(Clone)]
pub struct CachedStore {
    inner: Arc<Inner>,
}

impl CachedStore {
    /// Loads everything from `persistence` and starts its committer. `history` is what
    /// watches can replay.
    pub fn open(mut persistence: Box<dyn Persistence>, history: impl Into<History>) -> Result<CachedStore> {
        let history = history.into();
        let snapshot = persistence.load()?;
        let tombstones = Tombstones { opened_at: snapshot.revision, ..Tombstones::default() };
        let mut state = State { revision: snapshot.revision, history_start: snapshot.revision, tombstones, ..State::default() };
        for object in snapshot.objects {
            let key = Key::of(&object);
            state.apply(&key, Some(kept(object)));
        }
        let name = persistence.name();
        let new = |committer| {
            Arc::new(Inner {
                name,
                state: RwLock::new(state),
                watchers: Mutex::new(Watchers::default()),
                history: History { changes: history.changes.max(1), ..history },
                committer,
            })
        };
        if !persistence.waits_on_disk() {
            let committer = Committer::Callers { queue: Mutex::default(), persistence: Mutex::new(Some(persistence)) };
            return Ok(CachedStore { inner: new(committer) });
        }
        let (sender, receiver) = mpsc::channel(QUEUE_DEPTH);
        let inner = new(Committer::Thread { sender: RwLock::new(Some(sender)), handle: Mutex::new(None) });
        let writer_inner = inner.clone();
        let handle = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer_loop(writer_inner, persistence, receiver))
            .map_err(|e| StoreError::Backend(format!("cannot start the store writer thread: {e}")))?;
        if let Committer::Thread { handle: slot, .. } = &inner.committer {
            *slot.lock().expect("writer handle lock") = Some(handle);
        }
        Ok(CachedStore { inner })
    }

    /// A store that keeps nothing on disk.
    pub fn in_memory(history: impl Into<History>) -> CachedStore {
        CachedStore::open(Box::new(MemoryPersistence), history).expect("the memory store cannot fail to open")
    }

    /// The oldest revision a watch can still start from.
    pub fn oldest_revision(&self) -> u64 {
        self.inner.state.read().expect("store state lock").history_start
    }
}

struct Staging<'a> {
    state: &'a State,
    overlay: HashMap<Key, Option<Arc<Object>>>,
    overlay_by_node: HashMap<String, HashSet<String>>,
}

impl Staging<'_> {
    fn current(&self, key: &Key) -> Option<Arc<Object>> {
        match self.overlay.get(key) {
            Some(staged) => staged.clone(),
            None => self.state.get(key).cloned(),
        }
    }

    fn stage(&mut self, key: &Key, object: Option<Arc<Object>>) -> Option<Option<Arc<Object>>> {
        if let Some(node) = object.as_deref().and_then(pod_node) {
            self.overlay_by_node.entry(node.to_string()).or_default().insert(key.key.clone());
        }
        self.overlay.insert(key.clone(), object)
    }
}

impl View for Staging<'_> {
    fn get(&self, key: &Key) -> Option<&Object> {
        match self.overlay.get(key) {
            Some(staged) => staged.as_deref(),
            None => self.state.get(key).map(|o| &**o),
        }
    }

    fn pods_on_node(&self, node: &str) -> Vec<&Object> {
        let mut pods: Vec<&Object> = Vec::new();
        if let Some(bound) = self.state.by_node.get(node) {
            for (key, object) in bound {
                if !self.overlay.contains_key(&Key { kind: Kind::Pod, key: key.clone() }) {
                    pods.push(object);
                }
            }
        }
        if let Some(keys) = self.overlay_by_node.get(node) {
            for key in keys {
                let k = Key { kind: Kind::Pod, key: key.clone() };
                if let Some(Some(o)) = self.overlay.get(&k)
                    && pod_node(o) == Some(node)
                {
                    pods.push(o);
                }
            }
        }
        pods
    }
}

struct Staged {
    key: Key,
    object: Option<Arc<Object>>,
    prev: Option<Arc<Object>>,
    revision: u64,
}

fn writer_loop(inner: Arc<Inner>, mut persistence: Box<dyn Persistence>, mut receiver: mpsc::Receiver<Request>) {
    loop {
        if receiver.is_empty() {
            crate::heaps::collect_parked_thread();
        }
        let Some(first) = receiver.blocking_recv() else { break };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match receiver.try_recv() {
                Ok(request) => batch.push(request),
                Err(_) => break,
            }
        }
        commit_batch(&inner, persistence.as_mut(), batch);
    }
    if let Err(e) = persistence.close() {
        tracing::error!("closing the {} store: {e}", persistence.name());
    }
}

fn commit_batch(inner: &Inner, persistence: &mut dyn Persistence, batch: Vec<Request>) {
    let mut staged: Vec<Staged> = Vec::new();
    // Per request: its outcomes, or the error that rejected it.
    let mut results: Vec<(Reply, Result<Vec<Outcome>>)> = Vec::with_capacity(batch.len());
    let base_revision;
    {
        let state = inner.state.read().expect("store state lock");
        base_revision = state.revision;
        let mut staging = Staging { state: &state, overlay: HashMap::new(), overlay_by_node: HashMap::new() };
        let mut revision = base_revision;
        for request in batch {
            let staged_before = staged.len();
            let revision_before = revision;
            let mut undo: Vec<(Key, Option<Option<Arc<Object>>>)> = Vec::new();
            let mut outcomes = Vec::with_capacity(request.txn.writes.len());
            let mut failure = None;
            for write in request.txn.writes {
                let current = staging.current(&write.key);
                match (write.mutate)(&staging, current.as_deref()) {
                    Ok(Change::Keep) => outcomes.push(Outcome::Kept(current)),
                    Ok(Change::Delete) => match current {
                        Some(prev) => {
                            revision += 1;
                            undo.push((write.key.clone(), staging.stage(&write.key, None)));
                            staged.push(Staged { key: write.key, object: None, prev: Some(prev.clone()), revision });
                            outcomes.push(Outcome::Deleted(prev));
                        }
                        None => {
                            failure = Some(StoreError::NotFound { kind: write.key.kind, key: write.key.key });
                            break;
                        }
                    },
                    Ok(Change::Put(mut object)) => {
                        if Key::of(&object) != write.key {
                            failure = Some(StoreError::Backend(format!("a write to {} tried to store {}", write.key, Key::of(&object))));
                            break;
                        }
                        revision += 1;
                        object.metadata_mut().resource_version = revision;
                        let object = kept(object);
                        undo.push((write.key.clone(), staging.stage(&write.key, Some(object.clone()))));
                        outcomes.push(Outcome::Put { object: object.clone(), created: current.is_none() });
                        staged.push(Staged { key: write.key, object: Some(object), prev: current, revision });
                    }
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
            match failure {
                None => results.push((request.reply, Ok(outcomes))),
                Some(e) => {
                    for (key, previous) in undo.into_iter().rev() {
                        match previous {
                            Some(p) => staging.overlay.insert(key, p),
                            None => staging.overlay.remove(&key),
                        };
                    }
                    staged.truncate(staged_before);
                    revision = revision_before;
                    results.push((request.reply, Err(e)));
                }
            }
        }
    }

    if !staged.is_empty() {
        let changes: Vec<PersistedChange<'_>> = staged
            .iter()
            .map(|s| PersistedChange {
                kind: s.key.kind,
                key: &s.key.key,
                object: s.object.as_deref(),
                replaces: s.prev.as_ref().map(|p| p.metadata().resource_version),
            })
            .collect();
        let last = staged.last().map_or(base_revision, |s| s.revision);
        if let Err(e) = persistence.commit(&changes, last) {
            tracing::error!("store commit of {} changes failed: {e}", staged.len());
            for (reply, result) in results {
                let _ = reply.send(result.and(Err(e.clone())));
            }
            return;
        }
        let mut state = inner.state.write().expect("store state lock");
        let now = Instant::now();
        let mut events = Vec::with_capacity(staged.len());
        for s in staged {
            state.apply(&s.key, s.object.clone());
            let event = match (s.object, s.prev) {
                (Some(object), None) => StoreEvent::new(EventType::Added, s.revision, object, None),
                (Some(object), Some(prev)) => StoreEvent::new(EventType::Modified, s.revision, object, Some(prev)),
                (None, Some(prev)) => StoreEvent::new(EventType::Deleted, s.revision, prev.clone(), Some(prev)),
                (None, None) => unreachable!("a staged change always has a new or a previous state"),
            };
            if event.type_ == EventType::Deleted {
                state.tombstones.keep(Deletion { at: now, revision: event.revision, last: event.object.clone() });
            }
            state.history.push_back((now, event.clone()));
            events.push(event);
            state.revision = s.revision;
        }
        state.forget_history(&inner.history, now);
        // Still under the state lock: a watch that registers sees each change either in
        // the history it replays or in its mailbox, never in both or neither.
        let limit = LagLimit { unread: inner.history.unread_limit(), oldest_read: state.history_start + state.history.len() as u64 / 4 };
        inner.watchers.lock().expect("watchers lock").dispatch(&events, limit);
    }
    for (reply, result) in results {
        let _ = reply.send(result);
    }
    crate::heaps::collect_if_due();
}

impl Store for CachedStore {
    fn backend(&self) -> &'static str {
        self.inner.name
    }

    fn revision(&self) -> u64 {
        self.inner.state.read().expect("store state lock").revision
    }

    fn get(&self, key: &Key) -> Option<Arc<Object>> {
        self.inner.state.read().expect("store state lock").get(key).cloned()
    }

    fn list(&self, kind: Kind, namespace: Option<&str>) -> (u64, Vec<Arc<Object>>) {
        let state = self.inner.state.read().expect("store state lock");
        let Some(map) = state.objects.get(&kind) else { return (state.revision, Vec::new()) };
        let items = match namespace.filter(|_| kind.namespaced()) {
            Some(ns) => {
                let prefix = format!("{ns}/");
                map.range(prefix.clone()..).take_while(|(k, _)| k.starts_with(&prefix)).map(|(_, v)| v.clone()).collect()
            }
            None => map.values().cloned().collect(),
        };
        (state.revision, items)
    }

    fn pods_on_node(&self, node: &str) -> (u64, Vec<Arc<Object>>) {
        let state = self.inner.state.read().expect("store state lock");
        state.pods_in(&state.by_node, node)
    }

    fn pods_owned_by(&self, owner: &Key) -> (u64, Vec<Arc<Object>>) {
        let state = self.inner.state.read().expect("store state lock");
        state.pods_in(&state.by_owner, owner)
    }

    fn count(&self, kind: Kind) -> usize {
        self.inner.state.read().expect("store state lock").objects.get(&kind).map_or(0, BTreeMap::len)
    }

    fn commit(&self, txn: Txn) -> BoxFuture<'static, Result<Vec<Outcome>>> {
        let inner = self.inner.clone();
        async move {
            let (reply, answer) = oneshot::channel();
            let request = Request { txn, reply };
            match &inner.committer {
                Committer::Thread { sender, .. } => {
                    let sender = sender.read().expect("store sender lock").clone().ok_or(StoreError::Closed)?;
                    sender.send(request).await.map_err(|_| StoreError::Closed)?;
                }
                Committer::Callers { queue, persistence } => {
                    let my_turn = {
                        let mut queue = queue.lock().expect("commit queue lock");
                        if queue.closed {
                            return Err(StoreError::Closed);
                        }
                        queue.requests.push(request);
                        !std::mem::replace(&mut queue.committing, true)
                    };
                    if my_turn {
                        inner.commit_queued(queue, persistence);
                    }
                }
            }
            answer.await.map_err(|_| StoreError::Closed)?
        }
        .boxed()
    }

    fn watch_interest(&self, interest: Interest, from: u64) -> Result<WatchStream> {
        let state = self.inner.state.read().expect("store state lock");
        if from > state.revision {
            return Err(StoreError::Future { requested: from, current: state.revision });
        }
        let from = if from == 0 { state.revision } else { from };
        let replay = if from >= state.history_start {
            state.history.range((from - state.history_start) as usize..).map(|(_, e)| e).filter(|e| interest.selects(e)).cloned().collect()
        } else if interest.selection_is_permanent
            && let Some(changes) = state.changes_since(&interest, from)
        {
            changes
        } else {
            let oldest = if interest.selection_is_permanent {
                interest.kinds.iter().map(|kind| state.tombstones.start(*kind)).max().unwrap_or(state.history_start)
            } else {
                state.history_start
            };
            return Err(StoreError::Gone { requested: from, oldest });
        };
        let started_at = if interest.selection_is_permanent { state.revision } else { 0 };
        let queue = Queue { events: replay, started_at, ..Queue::default() };
        let mailbox = Arc::new(Mailbox { interest, queue: Mutex::new(queue), wake: Notify::new() });
        let mut watchers = self.inner.watchers.lock().expect("watchers lock");
        if watchers.closed {
            return Err(StoreError::Closed);
        }
        let id = watchers.add(mailbox.clone());
        drop(watchers);
        drop(state);
        let subscription = Subscription { inner: self.inner.clone(), id, mailbox };
        Ok(futures::stream::unfold(subscription, |mut s| async move { s.next().await.map(|item| (item, s)) }).boxed())
    }

    fn expire_history(&self) {
        self.inner.state.write().expect("store state lock").forget_history(&self.inner.history, Instant::now());
    }

    fn compact(&self, kind: Kind) {
        let mut state = self.inner.state.write().expect("store state lock");
        let state = &mut *state;
        let Some(objects) = state.objects.get_mut(&kind) else { return };
        crate::heaps::renew(kind);
        // The old copies go as their last readers (the history, a list being sent) let go.
        *objects =
            crate::heaps::in_heap_of(kind, || objects.iter().map(|(key, object)| (key.clone(), Arc::new(Object::clone(object)))).collect());
        if kind == Kind::Pod {
            // The pod indexes hold states too: they take the new copies, or keep the old alive.
            let slots = state.by_node.values_mut().chain(state.by_owner.values_mut());
            for (key, pod) in slots.flat_map(|slot| slot.iter_mut()) {
                if let Some(copy) = objects.get(key) {
                    *pod = copy.clone();
                }
            }
        }
    }

    fn close(&self) -> BoxFuture<'static, ()> {
        let inner = self.inner.clone();
        async move {
            match &inner.committer {
                Committer::Thread { sender, handle } => {
                    drop(sender.write().expect("store sender lock").take());
                    let handle = handle.lock().expect("writer handle lock").take();
                    if let Some(handle) = handle {
                        let _ = tokio::task::spawn_blocking(move || handle.join()).await;
                    }
                }
                Committer::Callers { queue, persistence } => {
                    queue.lock().expect("commit queue lock").closed = true;
                    // Waits for a turn under way; later callers find the queue closed.
                    if let Some(mut backend) = persistence.lock().expect("persistence lock").take()
                        && let Err(e) = backend.close()
                    {
                        tracing::error!("closing the {} store: {e}", backend.name());
                    }
                }
            }
            let mut watchers = inner.watchers.lock().expect("watchers lock");
            watchers.closed = true;
            for mailbox in watchers.by_kind.values().chain(watchers.pods_by_node.values()).flat_map(HashMap::values) {
                mailbox.end();
            }
        }
        .boxed()
    }
}

/// A registered watch: takes what commits put in its mailbox; leaves the index when dropped.
struct Subscription {
    inner: Arc<Inner>,
    id: u64,
    mailbox: Arc<Mailbox>,
}

impl Subscription {
    async fn next(&mut self) -> Option<WatchBatch> {
        loop {
            {
                let mut queue = self.mailbox.queue.lock().expect("mailbox lock");
                // Asked again: the batch taken before has been passed on.
                queue.taken_from = queue.events.first().map(|e| e.revision);
                if !queue.events.is_empty() {
                    let events = if self.mailbox.interest.remote && queue.events.len() > REMOTE_BATCH {
                        queue.events.drain(..REMOTE_BATCH).collect()
                    } else {
                        std::mem::take(&mut queue.events)
                    };
                    let revision = events.last().map_or(0, |e| e.revision);
                    return Some(WatchBatch { events, revision });
                }
                if queue.ended {
                    return None;
                }
            }
            self.mailbox.wake.notified().await;
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.inner.watchers.lock().expect("watchers lock").remove(self.id, &self.mailbox.interest);
    }
}

#[cfg(test)]
mod tests {
    use shared::model::{ObjectMeta, Pod};

    use super::*;
    use crate::store::Write;

    fn pod(name: &str, node: &str) -> Object {
        let mut p = Pod { kind: "Pod".into(), metadata: ObjectMeta::named("default", name), ..Pod::default() };
        p.spec.node_name = node.to_string();
        Object::Pod(p)
    }

    fn put(object: Object) -> Write {
        Write::new(Key::of(&object), move |_, _| Ok(Change::Put(object)))
    }

    #[tokio::test]
    async fn revisions_grow_by_one_per_change_and_a_failed_txn_leaves_nothing() {
        let store = CachedStore::in_memory(100);
        store.commit(Txn::new().with(put(pod("a", "")))).await.unwrap();
        let failing = Txn::new()
            .with(put(pod("b", "")))
            .with(Write::new(Key::new(Kind::Pod, "default", "c"), |_, _| Err(StoreError::conflict("no"))));
        assert_eq!(store.commit(failing).await.unwrap_err(), StoreError::conflict("no"));
        assert!(store.get(&Key::new(Kind::Pod, "default", "b")).is_none());
        let outcomes = store.commit(Txn::new().with(put(pod("d", "n1")))).await.unwrap();
        assert_eq!(outcomes[0].object().unwrap().metadata().resource_version, 2);
        assert_eq!(store.revision(), 2);
        assert_eq!(store.pods_on_node("n1").1.len(), 1);
    }

    #[tokio::test]
    async fn concurrent_writes_see_each_other_within_a_batch() {
        let store = CachedStore::in_memory(100);
        let mut tasks = Vec::new();
        for i in 0..50 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let key = Key::new(Kind::Pod, "default", "counter");
                let write = Write::new(key, move |view, current| {
                    let on_node = view.pods_on_node("n1").len();
                    let mut p = match current {
                        Some(Object::Pod(p)) => p.clone(),
                        _ => match pod("counter", "n1") {
                            Object::Pod(p) => p,
                            _ => unreachable!(),
                        },
                    };
                    p.metadata.labels.insert(format!("w{i}"), on_node.to_string());
                    Ok(Change::Put(Object::Pod(p)))
                });
                store.commit(Txn::new().with(write)).await.unwrap();
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let Some(obj) = store.get(&Key::new(Kind::Pod, "default", "counter")) else { panic!("missing") };
        assert_eq!(obj.metadata().labels.len(), 50);
        assert_eq!(store.revision(), 50);
    }

    #[tokio::test]
    async fn watch_replays_then_streams_and_reports_gone() {
        let store = CachedStore::in_memory(3);
        for name in ["a", "b", "c", "d"] {
            store.commit(Txn::new().with(put(pod(name, "")))).await.unwrap();
        }
        assert_eq!(store.oldest_revision(), 1);
        assert!(store.watch(&[Kind::Pod], 0).is_ok(), "0 means from now");
        assert!(store.watch(&[Kind::Pod], 1).is_ok(), "revision 1 is the oldest retained");
        let mut stream = store.watch(&[Kind::Pod], 2).unwrap();
        let batch = stream.next().await.unwrap();
        assert_eq!(batch.events.iter().map(|e| e.revision).collect::<Vec<_>>(), vec![3, 4]);
        store.commit(Txn::new().with(Write::new(Key::new(Kind::Pod, "default", "a"), |_, _| Ok(Change::Delete)))).await.unwrap();
        let batch = stream.next().await.unwrap();
        assert_eq!(batch.events[0].type_, EventType::Deleted);
        assert_eq!(batch.revision, 5);
        match store.watch(&[Kind::Pod], 1) {
            Err(StoreError::Gone { oldest, .. }) => assert_eq!(oldest, 2),
            _ => panic!("expected Gone"),
        }
    }

    fn delete(name: &str) -> Write {
        Write::new(Key::new(Kind::Pod, "default", name), |_, _| Ok(Change::Delete))
    }

    fn pods_of(node: &str, remote: bool) -> Interest {
        Interest { kinds: vec![Kind::Pod], node_name: Some(node.into()), remote, ..Interest::default() }
    }

    fn names(batch: &WatchBatch) -> Vec<String> {
        batch.events.iter().map(|e| e.object.metadata().name.clone()).collect()
    }

    fn owned(name: &str, deployment: &str) -> Object {
        let mut object = pod(name, "");
        object.metadata_mut().owner_references =
            vec![shared::model::OwnerReference { kind: "Deployment".into(), name: deployment.into(), uid: "u".into(), controller: true }];
        object
    }

    fn names_of(pods: &[Arc<Object>]) -> Vec<String> {
        pods.iter().map(|o| o.metadata().name.clone()).collect()
    }

    #[tokio::test]
    async fn the_owner_index_follows_a_pods_controller_through_updates_and_deletes() {
        let store = CachedStore::in_memory(100);
        let web = Key::new(Kind::Deployment, "default", "web");
        for object in [owned("w1", "web"), owned("w2", "web"), owned("a1", "api"), pod("loose", "")] {
            store.commit(Txn::new().with(put(object))).await.unwrap();
        }
        assert_eq!(names_of(&store.pods_owned_by(&web).1), ["w1", "w2"]);
        store.commit(Txn::new().with(put(owned("w2", "api")))).await.unwrap();
        store.commit(Txn::new().with(Write::new(Key::new(Kind::Pod, "default", "w1"), |_, _| Ok(Change::Delete)))).await.unwrap();
        assert!(store.pods_owned_by(&web).1.is_empty(), "a pod that changed owner or went is no longer web's");
        assert_eq!(names_of(&store.pods_owned_by(&Key::new(Kind::Deployment, "default", "api")).1), ["a1", "w2"]);
        assert!(store.pods_owned_by(&Key::new(Kind::Deployment, "other", "api")).1.is_empty(), "owners are per namespace");
    }

    #[tokio::test]
    async fn the_pod_indexes_give_each_pods_current_state_also_after_a_compaction() {
        let store = CachedStore::in_memory(100);
        let web = Key::new(Kind::Deployment, "default", "web");
        let on_n1 = |name: &str| {
            let mut object = owned(name, "web");
            if let Object::Pod(p) = &mut object {
                p.spec.node_name = "n1".into();
            }
            object
        };
        for name in ["w1", "w2"] {
            store.commit(Txn::new().with(put(on_n1(name)))).await.unwrap();
        }
        let mut changed = on_n1("w1");
        changed.metadata_mut().labels.insert("changed".into(), "yes".into());
        store.commit(Txn::new().with(put(changed))).await.unwrap();
        let current =
            |pods: Vec<Arc<Object>>| pods.iter().all(|p| store.get(&Key::of(p)).is_some_and(|now| Arc::ptr_eq(&now, p))) && pods.len() == 2;
        assert!(current(store.pods_owned_by(&web).1) && current(store.pods_on_node("n1").1), "the states after the update, same slot");
        assert!(store.pods_on_node("n1").1.iter().any(|p| p.metadata().labels.contains_key("changed")));

        store.compact(Kind::Pod);
        assert!(current(store.pods_owned_by(&web).1), "the owner index holds the compacted copies");
        assert!(current(store.pods_on_node("n1").1), "the node index holds the compacted copies");
    }

    #[tokio::test]
    async fn a_node_watcher_gets_only_its_pods_including_one_bound_to_it_or_moved_off() {
        let store = CachedStore::in_memory(100);
        let mut n1 = store.watch_interest(pods_of("n1", true), 0).unwrap();
        store.commit(Txn::new().with(put(pod("elsewhere", "n2"))).with(put(pod("unbound", "")))).await.unwrap();
        assert!(n1.next().now_or_never().is_none(), "n2's and unbound pods never reach n1's watcher");
        store.commit(Txn::new().with(put(pod("unbound", "n1")))).await.unwrap();
        store.commit(Txn::new().with(put(pod("elsewhere", "n1")))).await.unwrap();
        let batch = n1.next().await.unwrap();
        assert_eq!(names(&batch), ["unbound", "elsewhere"]);
        assert_eq!(batch.revision, 4);
        store.commit(Txn::new().with(put(pod("unbound", "n3")))).await.unwrap();
        let batch = n1.next().await.unwrap();
        assert_eq!(names(&batch), ["unbound"], "a pod leaving n1 is n1's change too");
        let watchers = store.inner.watchers.lock().unwrap();
        assert!(watchers.by_kind.is_empty() && watchers.pods_by_node.keys().collect::<Vec<_>>() == ["n1"], "indexed by node alone");
    }

    #[tokio::test]
    async fn a_namespace_watcher_skips_other_namespaces_and_a_dropped_watch_leaves_the_index() {
        let store = CachedStore::in_memory(100);
        let interest = Interest { kinds: vec![Kind::Pod], namespace: Some("team".into()), ..Interest::default() };
        let mut team = store.watch_interest(interest, 0).unwrap();
        let mut other = pod("x", "");
        other.metadata_mut().namespace = "team".into();
        store.commit(Txn::new().with(put(pod("x", ""))).with(put(other))).await.unwrap();
        let batch = team.next().await.unwrap();
        assert_eq!(batch.events.len(), 1);
        assert_eq!(batch.events[0].object.metadata().namespace, "team");
        drop(team);
        let watchers = store.inner.watchers.lock().unwrap();
        assert!(watchers.by_kind.is_empty() && watchers.pods_by_node.is_empty());
    }

    #[tokio::test]
    async fn one_transaction_larger_than_the_history_does_not_expire_an_in_process_watcher() {
        let store = CachedStore::in_memory(3);
        let mut watcher = store.watch(&[Kind::Pod], 0).unwrap();
        let mut txn = Txn::new();
        for i in 0..10 {
            txn.push(put(pod(&format!("p{i}"), "")));
        }
        store.commit(txn).await.unwrap();
        assert_eq!(store.oldest_revision(), 7, "the history keeps the last 3 changes");
        let batch = watcher.next().await.unwrap();
        assert_eq!(batch.events.iter().map(|e| e.revision).collect::<Vec<_>>(), (1..=10).collect::<Vec<_>>());
    }

    #[tokio::test(start_paused = true)]
    async fn changes_older_than_the_history_age_are_forgotten_by_the_next_commit_or_expiry() {
        let store = CachedStore::in_memory(History { changes: 100, deletions: 100, age: Some(Duration::from_secs(75)) });
        for name in ["a", "b"] {
            store.commit(Txn::new().with(put(pod(name, "")))).await.unwrap();
        }
        tokio::time::advance(Duration::from_secs(60)).await;
        store.commit(Txn::new().with(put(pod("c", "")))).await.unwrap();
        tokio::time::advance(Duration::from_secs(16)).await;
        store.expire_history();
        assert_eq!(store.oldest_revision(), 2, "a and b are 76 s old, c 16 s");
        assert_eq!(store.watch(&[Kind::Pod], 1).err(), Some(StoreError::Gone { requested: 1, oldest: 2 }));
        let mut from_b = store.watch(&[Kind::Pod], 2).unwrap();
        assert_eq!(from_b.next().await.unwrap().events.iter().map(|e| e.revision).collect::<Vec<_>>(), [3]);

        tokio::time::advance(Duration::from_secs(60)).await;
        store.commit(Txn::new().with(put(pod("d", "")))).await.unwrap();
        assert_eq!(store.oldest_revision(), 3, "the commit of d forgot c");
        assert!(store.watch(&[Kind::Pod], 3).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_history_without_an_age_keeps_its_count_however_old() {
        let store = CachedStore::in_memory(2);
        for name in ["a", "b", "c"] {
            store.commit(Txn::new().with(put(pod(name, "")))).await.unwrap();
        }
        tokio::time::advance(Duration::from_secs(24 * 3600)).await;
        store.expire_history();
        assert_eq!(store.oldest_revision(), 1);
        assert!(store.watch(&[Kind::Pod], 1).is_ok());
    }

    #[tokio::test]
    async fn a_remote_watcher_half_the_history_behind_is_ended_and_resumes_where_it_stopped() {
        let store = CachedStore::in_memory(4);
        let interest = Interest { remote: true, ..Interest::kinds(&[Kind::Pod]) };
        let mut remote = store.watch_interest(interest.clone(), 0).unwrap();
        store.commit(Txn::new().with(put(pod("a", "")))).await.unwrap();
        let read = remote.next().await.unwrap().revision;
        for name in ["b", "c", "d"] {
            store.commit(Txn::new().with(put(pod(name, "")))).await.unwrap();
        }
        assert_eq!(names(&remote.next().await.unwrap()), ["b", "c", "d"], "an ended watch still sends the oldest batch it holds");
        assert!(
            remote.next().await.is_none(),
            "with d, the history is 1..=4 and the last revision surely read, 0, is in its oldest quarter"
        );

        let mut resumed = store.watch_interest(interest, read).expect("the last revision read is still in the history");
        let names: Vec<String> = resumed.next().await.unwrap().events.iter().map(|e| e.object.metadata().name.clone()).collect();
        assert_eq!(names, ["b", "c", "d"]);
    }

    fn node(name: &str) -> Object {
        Object::Node(shared::model::Node { kind: "Node".into(), metadata: ObjectMeta::named("", name), ..Default::default() })
    }

    #[tokio::test]
    async fn a_remote_watcher_is_ended_before_its_last_read_revision_leaves_the_history() {
        let store = CachedStore::in_memory(8);
        let interest = Interest { remote: true, ..Interest::kinds(&[Kind::Pod]) };
        let mut remote = store.watch_interest(interest.clone(), 0).unwrap();
        store.commit(Txn::new().with(put(pod("a", "")))).await.unwrap();
        let read = remote.next().await.unwrap().revision;
        for i in 0..6 {
            store.commit(Txn::new().with(put(node(&format!("n{i}"))))).await.unwrap();
        }
        store.commit(Txn::new().with(put(pod("b", "")))).await.unwrap();
        assert_eq!(names(&remote.next().await.unwrap()), ["b"], "an ended watch still sends the oldest batch it holds");
        assert!(remote.next().await.is_none(), "one pod unread, but the last revision surely read is in the history's oldest quarter");

        let mut resumed = store.watch_interest(interest, read).expect("the last revision read is still in the history");
        assert_eq!(names(&resumed.next().await.unwrap()), ["b"]);
    }

    #[tokio::test]
    async fn a_remote_stream_takes_its_changes_a_batch_at_a_time_and_an_ended_one_keeps_only_its_oldest() {
        let store = CachedStore::in_memory(10_000);
        let many = |prefix: &str, count: usize| {
            let mut txn = Txn::new();
            for i in 0..count {
                txn.push(put(pod(&format!("{prefix}{i}"), "")));
            }
            txn
        };
        store.commit(many("p", 3000)).await.unwrap();
        let interest = Interest { remote: true, ..Interest::kinds(&[Kind::Pod]) };
        let mut remote = store.watch_interest(interest.clone(), 1).unwrap();
        let sizes = [remote.next().await.unwrap().events.len(), remote.next().await.unwrap().events.len()];
        assert_eq!(sizes, [REMOTE_BATCH, REMOTE_BATCH]);

        let mut stalled = store.watch_interest(interest, 1).unwrap();
        store.commit(many("q", 5000)).await.unwrap();
        let kept = stalled.next().await.unwrap();
        assert_eq!((kept.events.len(), kept.events[0].revision), (REMOTE_BATCH, 2), "ended with 7,999 unread, over 5,000");
        assert!(stalled.next().await.is_none());
    }

    #[tokio::test]
    async fn a_resumed_watcher_that_reads_its_replay_is_not_ended_for_starting_behind() {
        let store = CachedStore::in_memory(8);
        for i in 0..6 {
            store.commit(Txn::new().with(put(pod(&format!("p{i}"), "")))).await.unwrap();
        }
        let mut resumed = store.watch_interest(Interest { remote: true, ..Interest::kinds(&[Kind::Pod]) }, 2).unwrap();
        assert_eq!(resumed.next().await.unwrap().events.len(), 4, "the replay of revisions 3 to 6");
        store.commit(Txn::new().with(put(pod("new", "")))).await.unwrap();
        assert_eq!(names(&resumed.next().await.unwrap()), ["new"], "revision 2 is not in the oldest quarter of 0..=7");
    }

    #[tokio::test]
    async fn a_remote_watcher_that_keeps_reading_is_not_ended_however_many_changes_pass() {
        let store = CachedStore::in_memory(4);
        let mut remote = store.watch_interest(Interest { remote: true, ..Interest::kinds(&[Kind::Pod]) }, 0).unwrap();
        for i in 0..20 {
            store.commit(Txn::new().with(put(pod(&format!("p{i}"), "")))).await.unwrap();
            assert!(remote.next().await.is_some(), "change {i} arrives");
            assert!(remote.next().now_or_never().is_none(), "and the watcher asks for the next");
        }
    }

    #[tokio::test]
    async fn a_watch_from_a_revision_the_store_has_not_reached_is_refused() {
        let store = CachedStore::in_memory(10);
        store.commit(Txn::new().with(put(pod("a", "")))).await.unwrap();
        assert_eq!(store.watch(&[Kind::Pod], 5).err(), Some(StoreError::Future { requested: 5, current: 1 }));
        assert!(store.watch(&[Kind::Pod], 1).is_ok());
    }

    #[tokio::test]
    async fn every_watcher_shares_one_encoding_of_an_event() {
        let store = CachedStore::in_memory(10);
        let mut first = store.watch(&[Kind::Pod], 0).unwrap();
        let mut second = store.watch(&[Kind::Pod], 0).unwrap();
        store.commit(Txn::new().with(put(pod("a", "n1")))).await.unwrap();
        let (a, b) = (first.next().await.unwrap(), second.next().await.unwrap());
        assert!(std::ptr::eq(a.events[0].object_json(), b.events[0].object_json()));
        assert!(a.events[0].object_json().contains(r#""node_name":"n1""#));
        store.commit(Txn::new().with(delete("a"))).await.unwrap();
        assert_eq!(first.next().await.unwrap().events[0].type_, EventType::Deleted);
    }

    #[tokio::test]
    async fn closing_the_store_ends_its_watches() {
        let store = CachedStore::in_memory(10);
        let mut watcher = store.watch(&[Kind::Pod], 0).unwrap();
        store.close().await;
        assert!(watcher.next().await.is_none());
        assert_eq!(store.watch(&[Kind::Pod], 0).err(), Some(StoreError::Closed));
    }

    fn kinds_and_names(batch: &WatchBatch) -> Vec<(EventType, String)> {
        batch.events.iter().map(|e| (e.type_, e.object.metadata().name.clone())).collect()
    }

    fn permanent(interest: Interest) -> Interest {
        Interest { selection_is_permanent: true, ..interest }
    }

    #[tokio::test]
    async fn a_watcher_with_a_permanent_selection_resumes_from_before_the_history_with_the_state_and_the_deletions() {
        let store = CachedStore::in_memory(History { changes: 2, deletions: 10, age: None });
        for (name, node) in [("a", "n1"), ("b", "n1"), ("c", "n2"), ("d", "n1")] {
            store.commit(Txn::new().with(put(pod(name, node)))).await.unwrap();
        }
        store.commit(Txn::new().with(put(pod("a", "n1")))).await.unwrap();
        store.commit(Txn::new().with(delete("b"))).await.unwrap();
        store.commit(Txn::new().with(delete("c"))).await.unwrap();
        for i in 0..3 {
            store.commit(Txn::new().with(put(node(&format!("n{i}"))))).await.unwrap();
        }
        assert_eq!(store.oldest_revision(), 8, "the history holds revisions 9 and 10");

        let mut n1 = store.watch_interest(permanent(pods_of("n1", true)), 1).expect("a resume from the state");
        let resumed = n1.next().await.unwrap();
        assert_eq!(
            kinds_and_names(&resumed),
            [(EventType::Modified, "d".into()), (EventType::Modified, "a".into()), (EventType::Deleted, "b".into())],
            "d and a as they are now, at revisions 4 and 5, then b's deletion at 6; c is on n2"
        );
        assert_eq!(resumed.events.iter().map(|e| e.revision).collect::<Vec<_>>(), [4, 5, 6]);
        assert!(resumed.events.iter().all(|e| e.type_ == EventType::Deleted || e.prev.is_none()), "no state before is claimed");
        let mut all = store.watch_interest(permanent(Interest { remote: true, ..Interest::kinds(&[Kind::Pod]) }), 5).unwrap();
        assert_eq!(kinds_and_names(&all.next().await.unwrap()), [(EventType::Deleted, "b".into()), (EventType::Deleted, "c".into())]);

        store.commit(Txn::new().with(put(pod("e", "n1")))).await.unwrap();
        assert_eq!(names(&n1.next().await.unwrap()), ["e"], "then the live changes");
        assert_eq!(
            store.watch_interest(pods_of("n1", true), 1).err(),
            Some(StoreError::Gone { requested: 1, oldest: 9 }),
            "a selection that may change (labels, a phase) cannot be answered from the state"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_resume_from_before_a_forgotten_deletion_is_gone() {
        let store = CachedStore::in_memory(History { changes: 1, deletions: 2, age: Some(Duration::from_secs(75)) });
        for name in ["a", "b", "c"] {
            store.commit(Txn::new().with(put(pod(name, "n1")))).await.unwrap();
        }
        let interest = permanent(pods_of("n1", true));
        for name in ["a", "b", "c"] {
            store.commit(Txn::new().with(delete(name))).await.unwrap();
        }
        assert_eq!(
            store.watch_interest(interest.clone(), 3).err(),
            Some(StoreError::Gone { requested: 3, oldest: 4 }),
            "a's deletion is gone"
        );
        assert_eq!(
            kinds_and_names(&store.watch_interest(interest.clone(), 4).unwrap().next().await.unwrap())[0],
            (EventType::Deleted, "b".into())
        );

        tokio::time::advance(Duration::from_secs(76)).await;
        store.expire_history();
        assert_eq!(
            store.watch_interest(interest, 4).err(),
            Some(StoreError::Gone { requested: 4, oldest: 6 }),
            "deletions go at the history's age"
        );
    }

    #[tokio::test]
    async fn a_watcher_that_resumed_from_the_state_is_ended_only_for_what_arrived_since() {
        let store = CachedStore::in_memory(History { changes: 4, deletions: 4, age: None });
        for i in 0..10 {
            store.commit(Txn::new().with(put(pod(&format!("p{i}"), "n1")))).await.unwrap();
        }
        let mut resumed = store.watch_interest(permanent(pods_of("n1", true)), 1).unwrap();
        store.commit(Txn::new().with(put(pod("q0", "n1")))).await.unwrap();
        store.commit(Txn::new().with(put(pod("q1", "n1")))).await.unwrap();
        assert_eq!(resumed.next().await.unwrap().events.len(), 11, "9 replayed and 2 new: within the 2 unread allowed");
        for name in ["r0", "r1", "r2"] {
            store.commit(Txn::new().with(put(pod(name, "n1")))).await.unwrap();
        }
        assert_eq!(names(&resumed.next().await.unwrap()), ["r0", "r1", "r2"], "an ended watch still sends the oldest batch it holds");
        assert!(resumed.next().await.is_none(), "3 new changes unread, over 2");
    }

    #[tokio::test]
    async fn deleted_events_keep_no_tombstones_and_cost_a_pod_watcher_nothing() {
        let store = CachedStore::in_memory(History { changes: 1, deletions: 10, age: None });
        let event = |name: &str| {
            Object::Event(shared::model::Event { kind: "Event".into(), metadata: ObjectMeta::named("default", name), ..Default::default() })
        };
        store.commit(Txn::new().with(put(event("e1"))).with(put(pod("a", "n1")))).await.unwrap();
        store.commit(Txn::new().with(Write::new(Key::new(Kind::Event, "default", "e1"), |_, _| Ok(Change::Delete)))).await.unwrap();
        store.commit(Txn::new().with(put(node("n1")))).await.unwrap();

        let events = permanent(Interest { remote: true, ..Interest::kinds(&[Kind::Event]) });
        assert_eq!(store.watch_interest(events, 1).err(), Some(StoreError::Gone { requested: 1, oldest: 3 }), "e1's deletion is not kept");
        let mut pods = store.watch_interest(permanent(pods_of("n1", true)), 1).expect("no pod deletion was forgotten");
        assert_eq!(kinds_and_names(&pods.next().await.unwrap()), [(EventType::Modified, "a".into())]);
    }
}
