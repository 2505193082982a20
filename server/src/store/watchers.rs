//! The watchers' mailboxes: each commit puts each change in the mailboxes of the watchers
//! that select it, found through an index by kind and by node, and ends a remote watcher
//! that falls behind its lag limit; [`History`] is how much of the past a watch can replay.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shared::model::Kind;
use tokio::sync::Notify;

use super::error::{Result, StoreError};
use super::event::{Interest, StoreEvent};

/// The most changes a remote watcher's stream takes at once, so that what its client may
/// not have read yet is known to within one batch.
pub(super) const REMOTE_BATCH: usize = 1024;

/// One watcher's undelivered changes.
pub(super) struct Mailbox {
    pub(super) interest: Interest,
    pub(super) queue: Mutex<Queue>,
    pub(super) wake: Notify,
}

#[derive(Default)]
pub(super) struct Queue {
    pub(super) events: Vec<StoreEvent>,
    /// The first revision of the batch the stream took last, until it asks for the next:
    /// its client may not have read that batch yet.
    pub(super) taken_from: Option<u64>,
    /// The watch lagged or the store closed: once the events are taken, the stream ends.
    pub(super) ended: bool,
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
    /// A watcher's mailbox, holding the changes its watch starts with, at the store's
    /// `revision`.
    pub(super) fn new(interest: Interest, replay: Vec<StoreEvent>, revision: u64) -> Mailbox {
        let started_at = if interest.selection_is_permanent { revision } else { 0 };
        let queue = Queue { events: replay, started_at, ..Queue::default() };
        Mailbox { interest, queue: Mutex::new(queue), wake: Notify::new() }
    }

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
pub(super) struct Watchers {
    next_id: u64,
    by_kind: HashMap<Kind, HashMap<u64, Arc<Mailbox>>>,
    pods_by_node: HashMap<String, HashMap<u64, Arc<Mailbox>>>,
    closed: bool,
}

impl Watchers {
    fn slot(&mut self, kind: Kind, node: Option<&str>) -> &mut HashMap<u64, Arc<Mailbox>> {
        match node {
            Some(node) => self.pods_by_node.entry(node.to_string()).or_default(),
            None => self.by_kind.entry(kind).or_default(),
        }
    }

    /// Registers a watcher under the slots of its interest; its id removes it.
    pub(super) fn add(&mut self, mailbox: Arc<Mailbox>) -> Result<u64> {
        if self.closed {
            return Err(StoreError::Closed);
        }
        self.next_id += 1;
        let id = self.next_id;
        for (kind, node) in mailbox.interest.slots() {
            self.slot(kind, node).insert(id, mailbox.clone());
        }
        Ok(id)
    }

    pub(super) fn remove(&mut self, id: u64, interest: &Interest) {
        for (kind, node) in interest.slots() {
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

    /// Ends every watch and takes no new one: the store is closing.
    pub(super) fn close(&mut self) {
        self.closed = true;
        self.end_all();
    }

    /// Ends every watch and keeps taking new ones: the state was loaded again (an etcd watch
    /// that could not resume), and their clients must list again.
    pub(super) fn restart(&mut self) {
        self.end_all();
        self.by_kind.clear();
        self.pods_by_node.clear();
    }

    fn end_all(&self) {
        for mailbox in self.by_kind.values().chain(self.pods_by_node.values()).flat_map(HashMap::values) {
            mailbox.end();
        }
    }

    /// Puts every event in the mailboxes of the watchers that select it, one delivery (and
    /// one wake-up) per watcher.
    pub(super) fn dispatch(&self, events: &[StoreEvent], limit: LagLimit) {
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
pub(super) struct LagLimit {
    /// The most changes it may hold unread: what a client that stopped reading may cost.
    pub(super) unread: usize,
    /// The oldest revision its client may have read last. The client resumes from there,
    /// so the watcher is ended while that revision is still in the history, with a quarter
    /// of the history to spare; changes of kinds it does not watch move it too.
    pub(super) oldest_read: u64,
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

#[cfg(test)]
mod tests {
    use futures::{FutureExt, StreamExt};
    use shared::model::Kind;

    use super::*;
    use crate::store::fixtures::*;
    use crate::store::*;

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
        let watchers = store.watchers();
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
        let watchers = store.watchers();
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
}
