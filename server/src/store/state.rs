//! The embedded store's state: every object by kind and key, the pod indexes by node and by
//! owner, the ring of recent changes watches replay from, and the tombstones past it.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use shared::capacity::GiveBack;
use shared::model::{Kind, Object};
use tokio::time::Instant;

use super::error::{Result, StoreError};
use super::event::{EventType, Interest, StoreEvent};
use super::interface::{Range, Slice};
use super::key::{Key, pod_node, pod_owner};
use super::persistence::Snapshot;
use super::watchers::{History, LagLimit};

#[derive(Default)]
pub(super) struct State {
    objects: HashMap<Kind, BTreeMap<String, Arc<Object>>>,
    /// Pods by `spec.node_name` (bound pods only), each with its current state, so that a
    /// reader of a node's or a deployment's pods takes them without a search per pod.
    by_node: HashMap<String, PodIndex>,
    /// Pods by the deployment that controls them, each with its current state.
    by_owner: HashMap<Key, PodIndex>,
    revision: u64,
    /// Every change after `history_start`, in revision order, with when it was committed.
    /// Revisions may skip (etcd's count every key, not only this store's) and repeat (one
    /// etcd transaction writes several keys at one revision).
    history: VecDeque<(Instant, StoreEvent)>,
    history_start: u64,
    tombstones: Tombstones,
    /// Keys stored with a value that cannot be read, and why: not in `objects`, and no write
    /// may replace what it cannot read.
    unreadable: HashMap<Key, String>,
    /// Keys whose stored value is stale (see [`Encryption`](super::Encryption)): a write of
    /// one stores its object again even when unchanged, as kube's GuaranteedUpdate does.
    stale: HashSet<Key>,
}

impl State {
    /// The state a backend loaded, with no history before it.
    pub(super) fn load(snapshot: Snapshot) -> State {
        let tombstones = Tombstones { opened_at: snapshot.revision, ..Tombstones::default() };
        let mut state = State { revision: snapshot.revision, history_start: snapshot.revision, tombstones, ..State::default() };
        for object in snapshot.objects {
            let key = Key::of(&object);
            state.apply(&key, Some(kept(object)));
        }
        state.unreadable.extend(snapshot.unreadable);
        state.stale.extend(snapshot.stale);
        state
    }

    /// Whether the value stored at `key` is stale.
    pub(super) fn is_stale(&self, key: &Key) -> bool {
        self.stale.contains(key)
    }

    /// Marks the value just recorded at `key` as stale.
    pub(super) fn mark_stale(&mut self, key: &Key) {
        self.stale.insert(key.clone());
    }

    /// Why the value stored at `key` cannot be read, when it cannot.
    pub(super) fn unreadable(&self, key: &Key) -> Option<StoreError> {
        let why = self.unreadable.get(key)?;
        Some(StoreError::Unreadable { kind: key.kind, key: key.key.clone(), why: why.clone() })
    }

    /// See [`Store::unreadable_in`](super::Store::unreadable_in).
    pub(super) fn unreadable_in(&self, kind: Kind, namespace: Option<&str>, start: &str, until: Option<&str>) -> Option<StoreError> {
        let prefix = namespace.filter(|_| kind.namespaced()).map(|ns| format!("{ns}/"));
        let first = self
            .unreadable
            .keys()
            .filter(|key| key.kind == kind && prefix.as_deref().is_none_or(|prefix| key.key.starts_with(prefix)))
            .filter(|key| key.key.as_str() >= start && until.is_none_or(|until| key.key.as_str() <= until))
            .min_by(|a, b| a.key.cmp(&b.key))?;
        self.unreadable(first)
    }

    /// Marks `key` as stored with a value that cannot be read, at `revision`: to watchers its
    /// object, if the state held one, is deleted.
    pub(super) fn record_unreadable(&mut self, key: &Key, why: String, revision: u64, now: Instant) -> Option<StoreEvent> {
        let prev = self.get(key).cloned();
        let event = prev.map(|prev| self.record(key, None, Some(prev), revision, now));
        self.stale.remove(key);
        self.unreadable.insert(key.clone(), why);
        event
    }

    /// `key` holds no value any more (it was deleted, or was never readable).
    pub(super) fn forget_unreadable(&mut self, key: &Key) {
        self.unreadable.remove(key);
    }

    /// The revision of the last committed change.
    pub(super) fn revision(&self) -> u64 {
        self.revision
    }

    /// The oldest revision a watch can still start from.
    pub(super) fn history_start(&self) -> u64 {
        self.history_start
    }

    /// Applies one committed change at `revision` and records it: in the history, and a
    /// deletion in the tombstones too; its value is taken as current, not stale. Returns the
    /// change as watchers see it.
    pub(super) fn record(
        &mut self,
        key: &Key,
        object: Option<Arc<Object>>,
        prev: Option<Arc<Object>>,
        revision: u64,
        now: Instant,
    ) -> StoreEvent {
        self.unreadable.remove(key);
        self.stale.remove(key);
        self.apply(key, object.clone());
        let event = match (object, prev) {
            (Some(object), None) => StoreEvent::new(EventType::Added, revision, object, None),
            (Some(object), Some(prev)) => StoreEvent::new(EventType::Modified, revision, object, Some(prev)),
            (None, Some(prev)) => StoreEvent::new(EventType::Deleted, revision, prev.clone(), Some(prev)),
            (None, None) => unreachable!("a staged change always has a new or a previous state"),
        };
        if event.type_ == EventType::Deleted {
            self.tombstones.keep(Deletion { at: now, revision, last: event.object.clone() });
        }
        self.history.push_back((now, event.clone()));
        self.revision = revision;
        event
    }

    /// Moves the revision to `revision` with no change: a backend that counts the writes of
    /// others too (etcd) says that nothing this store holds changed up to there.
    pub(super) fn advance(&mut self, revision: u64) {
        self.revision = self.revision.max(revision);
    }

    /// When a remote watcher is ended, as of this state's history.
    pub(super) fn lag_limit(&self, limits: &History) -> LagLimit {
        LagLimit { unread: limits.unread_limit(), oldest_read: self.history_start + self.history.len() as u64 / 4 }
    }

    /// Drops the oldest changes beyond `limits`, so that a watch from before them gets 410.
    pub(super) fn forget_history(&mut self, limits: &History, now: Instant) {
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
        for (kind, node) in interest.slots() {
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

    /// What a watch of `interest` from `from` (0: from now) starts with: the changes it
    /// selects after `from` from the history or, before the history, from the state (see
    /// [`Store::watch_interest`](super::Store::watch_interest)).
    pub(super) fn replay(&self, interest: &Interest, from: u64) -> Result<Vec<StoreEvent>> {
        if from > self.revision {
            return Err(StoreError::Future { requested: from, current: self.revision });
        }
        let from = if from == 0 { self.revision } else { from };
        if from >= self.history_start {
            let first = self.history.partition_point(|(_, e)| e.revision <= from);
            return Ok(self.history.range(first..).map(|(_, e)| e).filter(|e| interest.selects(e)).cloned().collect());
        }
        if interest.selection_is_permanent
            && let Some(changes) = self.changes_since(interest, from)
        {
            return Ok(changes);
        }
        let oldest = if interest.selection_is_permanent {
            interest.kinds.iter().map(|kind| self.tombstones.start(*kind)).max().unwrap_or(self.history_start)
        } else {
            self.history_start
        };
        Err(StoreError::Gone { requested: from, oldest })
    }

    pub(super) fn get(&self, key: &Key) -> Option<&Arc<Object>> {
        self.objects.get(&key.kind).and_then(|m| m.get(&key.key))
    }

    /// Objects of a kind, in one namespace or all, with the revision they were read at.
    pub(super) fn list(&self, kind: Kind, namespace: Option<&str>) -> (u64, Vec<Arc<Object>>) {
        (self.revision, self.in_scope(kind, namespace, "").map(|(_, object)| object.clone()).collect())
    }

    /// Objects of a kind, in one namespace or all, by key in key order, from key `start` on.
    pub(super) fn in_scope(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        start: &str,
    ) -> Box<dyn Iterator<Item = (&String, &Arc<Object>)> + '_> {
        let Some(map) = self.objects.get(&kind) else { return Box::new(std::iter::empty()) };
        match namespace.filter(|_| kind.namespaced()) {
            Some(ns) => {
                let prefix = format!("{ns}/");
                let from = prefix.as_str().max(start).to_string();
                Box::new(map.range(from..).take_while(move |(k, _)| k.starts_with(&prefix)))
            }
            None => Box::new(map.range(start.to_string()..)),
        }
    }

    /// The objects of a kind in one namespace or all, as they were at `revision` (`None`:
    /// now), that `range` takes (see [`Store::list_at`](super::Store::list_at)): the current
    /// ones with every later change in the history undone (the state each change replaced),
    /// read from the range's start key and no further than the page and a count of the rest.
    /// Gone once the history no longer reaches back to `revision`.
    pub(super) fn list_at(&self, kind: Kind, namespace: Option<&str>, revision: Option<u64>, range: Range<'_>) -> Result<Slice> {
        let revision = revision.unwrap_or(self.revision);
        if revision > self.revision {
            return Err(StoreError::Future { requested: revision, current: self.revision });
        }
        if revision < self.history_start {
            return Err(StoreError::Gone { requested: revision, oldest: self.history_start });
        }
        let namespace = namespace.filter(|_| kind.namespaced());
        // Each key in the range changed since, with its state before the first change: newest
        // first, so that the oldest change's is the one kept.
        let mut undone: BTreeMap<String, Option<&Arc<Object>>> = BTreeMap::new();
        let later = self.history.iter().rev().map(|(_, e)| e).take_while(|e| e.revision > revision);
        for event in later.filter(|e| e.object.kind() == kind && namespace.is_none_or(|ns| e.object.metadata().namespace == ns)) {
            let key = Key::of(&event.object).key;
            if key.as_str() >= range.start {
                undone.insert(key, event.prev.as_ref());
            }
        }
        // Both in key order: merged, a key changed since takes its state before.
        let mut undone = undone.into_iter().peekable();
        let mut current = self.in_scope(kind, namespace, range.start).peekable();
        let mut then = std::iter::from_fn(|| {
            loop {
                let next_current = current.peek().map(|(key, _)| key.as_str());
                match (next_current, undone.peek()) {
                    (None, None) => return None,
                    (Some(key), Some((changed, _))) if changed.as_str() <= key => {
                        if changed.as_str() == key {
                            current.next();
                        }
                        if let Some((_, Some(before))) = undone.next() {
                            return Some(before);
                        }
                    }
                    (Some(_), _) => return current.next().map(|(_, object)| object),
                    (None, Some(_)) => {
                        if let Some((_, Some(deleted))) = undone.next() {
                            return Some(deleted);
                        }
                    }
                }
            }
        });
        let mut objects = Vec::new();
        for object in then.by_ref() {
            if (range.selects)(object) {
                objects.push(object.clone());
                if objects.len() == range.limit {
                    break;
                }
            }
        }
        // Past a full page: the rest is counted only if one more object is selected.
        let mut rest = then.skip_while(|object| !(range.selects)(object));
        let following = rest.next().map(|_| 1 + rest.count());
        Ok(Slice { revision, objects, following })
    }

    pub(super) fn count(&self, kind: Kind) -> usize {
        self.objects.get(&kind).map_or(0, BTreeMap::len)
    }

    pub(super) fn pods_on_node(&self, node: &str) -> (u64, Vec<Arc<Object>>) {
        self.pods_in(&self.by_node, node)
    }

    pub(super) fn pods_owned_by(&self, owner: &Key) -> (u64, Vec<Arc<Object>>) {
        self.pods_in(&self.by_owner, owner)
    }

    /// The pods bound to `node`, by key, as the node index holds them.
    pub(super) fn bound_to(&self, node: &str) -> Option<&PodIndex> {
        self.by_node.get(node)
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

    /// Moves the objects of `kind` to fresh memory, unchanged (see [`crate::heaps`]).
    pub(super) fn compact(&mut self, kind: Kind) {
        let Some(objects) = self.objects.get_mut(&kind) else { return };
        crate::heaps::renew(kind);
        // The old copies go as their last readers (the history, a list being sent) let go.
        *objects =
            crate::heaps::in_heap_of(kind, || objects.iter().map(|(key, object)| (key.clone(), Arc::new(Object::clone(object)))).collect());
        if kind == Kind::Pod {
            // The pod indexes hold states too: they take the new copies, or keep the old alive.
            let slots = self.by_node.values_mut().chain(self.by_owner.values_mut());
            for (key, pod) in slots.flat_map(|slot| slot.iter_mut()) {
                if let Some(copy) = objects.get(key) {
                    *pod = copy.clone();
                }
            }
        }
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
pub(super) fn kept(object: Object) -> Arc<Object> {
    crate::heaps::in_heap_of(object.kind(), || Arc::new(object.clone()))
}

/// One slot of a pod index: its pods' current states by key.
pub(super) type PodIndex = BTreeMap<String, Arc<Object>>;

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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use futures::StreamExt;
    use shared::model::{Kind, Object, ObjectMeta};

    use super::*;
    use crate::store::fixtures::*;
    use crate::store::*;

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
    async fn a_list_at_a_past_revision_undoes_the_creates_updates_and_deletes_since() {
        let store = CachedStore::in_memory(History { changes: 8, deletions: 8, age: None });
        for name in ["a", "b", "c"] {
            store.commit(Txn::new().with(put(pod(name, "")))).await.unwrap();
        }
        let (at, before) = store.list(Kind::Pod, Some("default"));
        store.commit(Txn::new().with(put(pod("b", "n1")))).await.unwrap();
        store.commit(Txn::new().with(put(pod("b", "n2")))).await.unwrap();
        store.commit(Txn::new().with(delete("c"))).await.unwrap();
        store.commit(Txn::new().with(put(pod("d", "")))).await.unwrap();
        store.commit(Txn::new().with(put(node("n1")))).await.unwrap();
        let then = all_at(&store, Kind::Pod, Some("default"), at).unwrap();
        assert_eq!(names_of(&then), ["a", "b", "c"], "d not yet made, c not yet deleted");
        assert!(then.iter().zip(&before).all(|(then, before)| Arc::ptr_eq(then, before)), "each as it was, b before both updates");
        assert!(all_at(&store, Kind::Pod, Some("other"), at).unwrap().is_empty());
        assert_eq!(names_of(&all_at(&store, Kind::Node, None, at).unwrap()), Vec::<String>::new());
        assert_eq!(names_of(&all_at(&store, Kind::Pod, None, store.revision()).unwrap()), ["a", "b", "d"]);

        for name in ["e", "f", "g", "h"] {
            store.commit(Txn::new().with(put(pod(name, "")))).await.unwrap();
        }
        assert_eq!(all_at(&store, Kind::Pod, None, at).err(), Some(StoreError::Gone { requested: 3, oldest: 4 }));
        assert_eq!(all_at(&store, Kind::Pod, None, 99).err(), Some(StoreError::Future { requested: 99, current: 12 }));
    }

    fn all_at(store: &CachedStore, kind: Kind, namespace: Option<&str>, at: u64) -> Result<Vec<Arc<Object>>> {
        let range = Range { start: "", limit: 0, selects: &|_| true };
        Ok(store.list_at(kind, namespace, Some(at), range)?.objects)
    }

    #[tokio::test]
    async fn a_page_reads_from_its_start_key_and_stops_after_its_limit_counting_the_rest() {
        let store = CachedStore::in_memory(History { changes: 1000, deletions: 10, age: None });
        for i in 0..100 {
            store.commit(Txn::new().with(put(pod(&format!("p{i:03}"), "")))).await.unwrap();
        }
        let at = store.revision();
        store.commit(Txn::new().with(delete("p051"))).await.unwrap();
        store.commit(Txn::new().with(put(pod("p050x", "")))).await.unwrap();
        let looked_at = std::cell::Cell::new(0);
        let selects = |_: &Object| {
            looked_at.set(looked_at.get() + 1);
            true
        };
        let page =
            store.list_at(Kind::Pod, Some("default"), Some(at), Range { start: "default/p050\0", limit: 2, selects: &selects }).unwrap();
        assert_eq!(names_of(&page.objects), ["p051", "p052"], "p051 deleted since, p050x made since: as at the revision");
        assert_eq!(page.following, Some(47), "p053 to p099");
        assert_eq!(looked_at.get(), 3, "the page's two and the first of the rest; the rest is only counted");
        let last = store.list_at(Kind::Pod, None, None, Range { start: "default/p098\0", limit: 2, selects: &|_| true }).unwrap();
        assert_eq!((names_of(&last.objects), last.following), (vec!["p099".to_string()], None));
    }

    #[tokio::test]
    async fn a_watch_from_a_revision_the_store_has_not_reached_is_refused() {
        let store = CachedStore::in_memory(10);
        store.commit(Txn::new().with(put(pod("a", "")))).await.unwrap();
        assert_eq!(store.watch(&[Kind::Pod], 5).err(), Some(StoreError::Future { requested: 5, current: 1 }));
        assert!(store.watch(&[Kind::Pod], 1).is_ok());
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
