//! The store's single writer: it stages each transaction against the latest state, commits
//! the concurrent ones to the backend together (group commit), then applies and dispatches
//! them, on a writer thread of its own or in the turn of the caller that found none under way.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use shared::model::Object;
use tokio::sync::{Semaphore, oneshot};
use tokio::time::Instant;

use super::cache::Cache;
use super::error::{Result, StoreError};
use super::key::Key;
use super::persistence::{PersistedChange, Persistence};
use super::staging::Staging;
use super::state::kept;
use super::txn::{Change, Outcome, Txn};

/// The most transactions one backend commit takes.
const MAX_BATCH: usize = 2048;
/// Transactions waiting for the writer thread before `commit` callers wait for room.
const QUEUE_DEPTH: usize = 8192;

type Reply = oneshot::Sender<Result<Vec<Outcome>>>;

pub(super) struct Request {
    txn: Txn,
    reply: Reply,
}

/// Who commits the transactions callers hand in.
pub(super) enum Committer {
    /// A thread of its own, for a backend that waits on a disk.
    Thread { queue: Arc<WriterQueue>, handle: Mutex<Option<JoinHandle<()>>> },
    /// The caller that finds no commit under way commits every transaction queued, its own
    /// and those that arrive meanwhile, then returns. An idle store's write costs no thread
    /// hand-off (at 5,000 nodes' lease renewals that hand-off was a third of the server's
    /// idle CPU), and a burst still commits in batches.
    Callers { queue: Mutex<CallerQueue>, persistence: Mutex<Option<Box<dyn Persistence>>> },
}

#[derive(Default)]
pub(super) struct CallerQueue {
    requests: Vec<Request>,
    committing: bool,
    closed: bool,
}

/// What callers hand the writer thread. A transaction that may wait ([`Txn::may_wait`])
/// wakes the thread only when it is the first of a batch, and the thread sleeps until the
/// earliest moment a queued transaction is due: the lease renewals of thousands of nodes
/// then share a disk sync and a wake-up instead of costing one each.
pub(super) struct WriterQueue {
    pending: Mutex<Pending>,
    wake: Condvar,
    /// Room for [`QUEUE_DEPTH`] transactions; the writer gives it back as it takes them.
    room: Semaphore,
}

#[derive(Default)]
struct Pending {
    requests: Vec<Request>,
    /// When the writer must take the queue: the earliest any transaction in it is due.
    due: Option<std::time::Instant>,
    /// The writer sleeps on `wake`; otherwise it looks at the queue before it sleeps again.
    sleeping: bool,
    closed: bool,
}

impl WriterQueue {
    fn new() -> WriterQueue {
        WriterQueue { pending: Mutex::default(), wake: Condvar::new(), room: Semaphore::new(QUEUE_DEPTH) }
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().expect("writer queue lock")
    }

    async fn push(&self, txn: Txn, reply: Reply) -> Result<()> {
        self.room.acquire().await.map_err(|_| StoreError::Closed)?.forget();
        let now = std::time::Instant::now();
        // A wait too long to reckon commits at once.
        let due = now.checked_add(txn.may_wait).unwrap_or(now);
        let mut pending = self.lock();
        if pending.closed {
            return Err(StoreError::Closed);
        }
        pending.requests.push(Request { txn, reply });
        if pending.due.is_none_or(|earliest| due < earliest) {
            pending.due = Some(due);
            if pending.sleeping {
                self.wake.notify_one();
            }
        }
        Ok(())
    }

    /// The next batch, once one of its transactions is due; `None` once closed and empty.
    fn next_batch(&self) -> Option<Vec<Request>> {
        let mut pending = self.lock();
        loop {
            let now = std::time::Instant::now();
            match pending.due {
                Some(due) if due <= now || pending.closed => {
                    let take = pending.requests.len().min(MAX_BATCH);
                    let batch: Vec<Request> = pending.requests.drain(..take).collect();
                    // What a full batch left behind goes next, at once.
                    pending.due = (!pending.requests.is_empty()).then_some(now);
                    self.room.add_permits(batch.len());
                    return Some(batch);
                }
                None if pending.closed => return None,
                Some(due) => {
                    pending.sleeping = true;
                    pending = self.wake.wait_timeout(pending, due - now).expect("writer queue lock").0;
                    pending.sleeping = false;
                }
                None => {
                    drop(pending);
                    crate::heaps::collect_parked_thread();
                    pending = self.lock();
                    if pending.due.is_none() && !pending.closed {
                        pending.sleeping = true;
                        pending = self.wake.wait(pending).expect("writer queue lock");
                        pending.sleeping = false;
                    }
                }
            }
        }
    }

    /// Takes no more transactions; the writer commits those queued, then ends.
    fn close(&self) {
        self.lock().closed = true;
        self.room.close();
        self.wake.notify_one();
    }
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

impl Committer {
    /// The committer of `persistence` into `cache`: a writer thread when the backend
    /// waits on a disk, else the callers.
    pub(super) fn start(persistence: Box<dyn Persistence>, cache: &Arc<Cache>) -> Result<Committer> {
        if !persistence.waits_on_disk() {
            return Ok(Committer::Callers { queue: Mutex::default(), persistence: Mutex::new(Some(persistence)) });
        }
        let queue = Arc::new(WriterQueue::new());
        let (cache, taken) = (cache.clone(), queue.clone());
        let handle = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer_loop(cache, persistence, taken))
            .map_err(|e| StoreError::Backend(format!("cannot start the store writer thread: {e}")))?;
        Ok(Committer::Thread { queue, handle: Mutex::new(Some(handle)) })
    }

    /// Commits a transaction; resolves once it is durable, with one outcome per write.
    pub(super) async fn commit(&self, cache: &Cache, txn: Txn) -> Result<Vec<Outcome>> {
        let (reply, answer) = oneshot::channel();
        match self {
            Committer::Thread { queue, .. } => queue.push(txn, reply).await?,
            Committer::Callers { queue, persistence } => {
                let my_turn = {
                    let mut queue = queue.lock().expect("commit queue lock");
                    if queue.closed {
                        return Err(StoreError::Closed);
                    }
                    queue.requests.push(Request { txn, reply });
                    !std::mem::replace(&mut queue.committing, true)
                };
                if my_turn {
                    commit_queued(cache, queue, persistence);
                }
            }
        }
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// Stops taking transactions, lets the queued ones commit and closes the backend.
    pub(super) async fn close(&self) {
        match self {
            Committer::Thread { queue, handle } => {
                queue.close();
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
    }
}

/// Commits queued transactions in batches until none is left (the caller's turn).
fn commit_queued(cache: &Cache, queue: &Mutex<CallerQueue>, persistence: &Mutex<Option<Box<dyn Persistence>>>) {
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
            Some(backend) => commit_batch(cache, backend, batch),
            // Closed: dropping the replies answers each caller with Closed.
            None => drop(batch),
        }
    }
}

struct Staged {
    key: Key,
    object: Option<Arc<Object>>,
    prev: Option<Arc<Object>>,
    revision: u64,
}

/// Closes the queue when the writer thread dies of a panic (a transaction's closure), so that
/// callers hear `Closed` instead of waiting for ever.
struct WriterAlive<'a>(&'a WriterQueue);

impl Drop for WriterAlive<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut pending = self.0.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            pending.closed = true;
            pending.requests.clear();
            self.0.room.close();
        }
    }
}

fn writer_loop(cache: Arc<Cache>, mut persistence: Box<dyn Persistence>, queue: Arc<WriterQueue>) {
    let _alive = WriterAlive(&queue);
    while let Some(batch) = queue.next_batch() {
        commit_batch(&cache, persistence.as_mut(), batch);
    }
    if let Err(e) = persistence.close() {
        tracing::error!("closing the {} store: {e}", persistence.name());
    }
}

fn commit_batch(cache: &Cache, persistence: &mut dyn Persistence, batch: Vec<Request>) {
    let mut staged: Vec<Staged> = Vec::new();
    // Per request: its outcomes, or the error that rejected it.
    let mut results: Vec<(Reply, Result<Vec<Outcome>>)> = Vec::with_capacity(batch.len());
    let base_revision;
    {
        let state = cache.state.read().expect("store state lock");
        base_revision = state.revision();
        let mut staging = Staging::new(&state);
        let mut revision = base_revision;
        for request in batch {
            let staged_before = staged.len();
            let revision_before = revision;
            let mut undo: Vec<(Key, Option<Option<Arc<Object>>>)> = Vec::new();
            let mut outcomes = Vec::with_capacity(request.txn.writes.len());
            let mut failure = None;
            for write in request.txn.writes {
                if let Some(unreadable) = state.unreadable(&write.key) {
                    failure = Some(unreadable);
                    break;
                }
                let current = staging.current(&write.key);
                match staging.decide(&write, current.as_ref()) {
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
        let mut state = cache.state.write().expect("store state lock");
        let now = Instant::now();
        let events: Vec<_> = staged.into_iter().map(|s| state.record(&s.key, s.object, s.prev, s.revision, now)).collect();
        state.forget_history(&cache.history, now);
        // Still under the state lock: a watch that registers sees each change either in
        // the history it replays or in its mailbox, never in both or neither.
        cache.watchers.lock().expect("watchers lock").dispatch(&events, state.lag_limit(&cache.history));
    }
    for (reply, result) in results {
        let _ = reply.send(result);
    }
    crate::heaps::collect_if_due();
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use futures::FutureExt;
    use shared::model::{Kind, Object};

    use super::*;
    use crate::store::fixtures::*;
    use crate::store::*;

    /// A backend on a disk that keeps the names each commit wrote, fails a commit when told,
    /// and, when it has a gate, says it began a commit and holds it until the gate opens.
    #[derive(Clone, Default)]
    struct Disk {
        commits: Arc<Mutex<Vec<Vec<String>>>>,
        fail_next: Arc<Mutex<bool>>,
        gate: Option<(mpsc::SyncSender<()>, Arc<Mutex<mpsc::Receiver<()>>>)>,
    }

    impl Persistence for Disk {
        fn name(&self) -> &'static str {
            "disk"
        }

        fn load(&mut self) -> Result<Snapshot> {
            Ok(Snapshot::default())
        }

        fn commit(&mut self, changes: &[PersistedChange<'_>], _revision: u64) -> Result<()> {
            if let Some((began, open)) = &self.gate {
                began.send(()).unwrap();
                open.lock().unwrap().recv().unwrap();
            }
            if std::mem::take(&mut *self.fail_next.lock().unwrap()) {
                return Err(StoreError::Backend("the disk is full".into()));
            }
            self.commits.lock().unwrap().push(changes.iter().map(|c| c.key.to_string()).collect());
            Ok(())
        }

        fn close(&mut self) -> Result<()> {
            Ok(())
        }
    }

    fn waiting(name: &str, limit: Duration) -> Txn {
        Txn::new().with(put(pod(name, ""))).may_wait(limit)
    }

    #[tokio::test]
    async fn writes_that_may_wait_share_the_commit_of_the_next_that_may_not_and_are_answered_only_once_it_is_durable() {
        let (began, on_begin) = mpsc::sync_channel(1);
        let (open, opened) = mpsc::sync_channel(1);
        let disk = Disk { gate: Some((began, Arc::new(Mutex::new(opened)))), ..Disk::default() };
        let store = CachedStore::open(Box::new(disk.clone()), 100).unwrap();
        // Queued, each for up to an hour.
        let mut first = store.commit(waiting("a", Duration::from_secs(3600)));
        let mut second = store.commit(waiting("b", Duration::from_secs(3600)));
        assert!(futures::poll!(&mut first).is_pending() && futures::poll!(&mut second).is_pending());
        let mut third = store.commit(Txn::new().with(put(pod("c", ""))));
        assert!(futures::poll!(&mut third).is_pending());
        // The writer took all three into one commit, which the disk holds.
        tokio::task::spawn_blocking(move || on_begin.recv().unwrap()).await.unwrap();
        assert!(futures::poll!(&mut first).is_pending() && futures::poll!(&mut third).is_pending());
        assert!(store.get(&Key::new(Kind::Pod, "default", "a")).is_none(), "nothing is seen before it is durable");
        open.send(()).unwrap();
        for (answer, revision) in [(first, 1), (second, 2), (third, 3)] {
            assert_eq!(answer.await.unwrap()[0].object().unwrap().metadata().resource_version, revision);
        }
        assert_eq!(*disk.commits.lock().unwrap(), vec![vec!["default/a", "default/b", "default/c"]]);
        drop(open);
        store.close().await;
    }

    #[tokio::test]
    async fn a_write_that_may_wait_is_committed_once_its_wait_is_over() {
        let disk = Disk::default();
        let store = CachedStore::open(Box::new(disk.clone()), 100).unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(30), store.commit(waiting("a", Duration::from_millis(20))));
        assert_eq!(answer.await.expect("committed within its wait").unwrap().len(), 1);
        assert_eq!(*disk.commits.lock().unwrap(), vec![vec!["default/a"]]);
        store.close().await;
    }

    #[tokio::test]
    async fn a_failed_commit_fails_every_write_of_its_batch_and_keeps_every_write_answered_before() {
        let disk = Disk::default();
        let store = CachedStore::open(Box::new(disk.clone()), 100).unwrap();
        store.commit(Txn::new().with(put(pod("kept", "")))).await.unwrap();
        *disk.fail_next.lock().unwrap() = true;
        let mut first = store.commit(waiting("a", Duration::from_secs(3600)));
        assert!(futures::poll!(&mut first).is_pending());
        let second = store.commit(Txn::new().with(put(pod("b", ""))));
        let failure = StoreError::Backend("the disk is full".into());
        assert_eq!(second.await.unwrap_err(), failure);
        assert_eq!(first.now_or_never().expect("answered with its batch").unwrap_err(), failure);
        for name in ["a", "b"] {
            assert!(store.get(&Key::new(Kind::Pod, "default", name)).is_none(), "{name} was not committed");
        }
        assert!(store.get(&Key::new(Kind::Pod, "default", "kept")).is_some());
        assert_eq!(store.revision(), 1);
        // The next write takes the revision the failed batch did not.
        let outcome = store.commit(Txn::new().with(put(pod("c", "")))).await.unwrap();
        assert_eq!(outcome[0].object().unwrap().metadata().resource_version, 2);
        assert_eq!(*disk.commits.lock().unwrap(), vec![vec!["default/kept"], vec!["default/c"]]);
        store.close().await;
    }

    #[tokio::test]
    async fn closing_commits_the_writes_still_waiting() {
        let disk = Disk::default();
        let store = CachedStore::open(Box::new(disk.clone()), 100).unwrap();
        let mut waiting_write = store.commit(waiting("a", Duration::from_secs(3600)));
        assert!(futures::poll!(&mut waiting_write).is_pending());
        store.close().await;
        assert!(waiting_write.await.is_ok());
        assert_eq!(*disk.commits.lock().unwrap(), vec![vec!["default/a"]]);
        assert_eq!(store.commit(Txn::new().with(put(pod("b", "")))).await.unwrap_err(), StoreError::Closed);
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
}
