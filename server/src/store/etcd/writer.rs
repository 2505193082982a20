//! The etcd store's writer. It stages each transaction against the cache, as the embedded
//! store's committer does, and commits it as one etcd transaction of its own that compares
//! the mod revision of every key it writes with the one the cache holds (absent keys:
//! version 0). So every request's writes have a revision of their own, as in Kubernetes,
//! and a watcher that resumes after revision r misses nothing of r.
//!
//! Several transactions are in flight at once, each staged on the cache alone: one that
//! reads or writes what another still in flight writes (the same object, pods of the
//! same node, which a bind's room check counts, or any object of a kind it listed whole, as
//! a Service's allocation does) waits for it. A compare that fails means
//! another server wrote first: the transaction waits until the cache has that write and is
//! staged again, as kube-apiserver's GuaranteedUpdate tries its update again on fresh
//! state. A write is answered once the cache holds it, so that this server never serves a
//! read older than a write it acknowledged.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Compare, CompareOp, GetOptions, TxnOp, TxnOpResponse};
use shared::model::{Kind, Object};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::super::error::{Result, StoreError};
use super::super::key::{Key, pod_node};
use super::super::staging::{Reads, Staging};
use super::super::state::kept;
use super::super::txn::{Outcome, Txn};
use super::Inner;
use super::feed::{on_a_member, unavailable};

/// etcd's default `--max-txn-ops`: the most compares, and the most writes, of one transaction.
pub(super) const MAX_TXN_OPS: usize = 128;
/// Transactions sent to etcd and not yet answered, at most.
const MAX_IN_FLIGHT: usize = 64;
/// How often a transaction is staged again after other servers' writes before it gives up.
const MAX_TRIES: usize = 20;
/// How long a write waits for the cache to reach etcd's revision.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(10);
/// How long the writer waits for the watch to bring a revision before it touches the
/// progress key (a revision of another prefix never arrives as a change).
const PROGRESS_AFTER: Duration = Duration::from_millis(20);

pub(super) struct Request {
    pub(super) txn: Txn,
    pub(super) reply: oneshot::Sender<Result<Vec<Outcome>>>,
    /// Times it was staged again on state at least as new as etcd's.
    pub(super) tries: usize,
}

impl Request {
    pub(super) fn new(txn: Txn, reply: oneshot::Sender<Result<Vec<Outcome>>>) -> Request {
        Request { txn, reply, tries: 0 }
    }
}

/// What an in-flight transaction writes: the keys, their kinds, and the nodes of the pods among them.
#[derive(Default)]
struct Footprint {
    keys: HashSet<Key>,
    kinds: HashSet<Kind>,
    nodes: HashSet<String>,
}

impl Footprint {
    fn of(changes: &[Changed]) -> Footprint {
        let mut footprint = Footprint::default();
        for change in changes {
            footprint.keys.insert(change.key.clone());
            footprint.kinds.insert(change.key.kind);
            for object in [&change.object, &change.before].into_iter().flatten() {
                footprint.nodes.extend(pod_node(object).map(str::to_string));
            }
        }
        footprint
    }

    fn meets(&self, reads: &Reads, writes: &Footprint) -> bool {
        reads.keys.iter().chain(&writes.keys).any(|key| self.keys.contains(key))
            || reads.nodes.iter().chain(&writes.nodes).any(|node| self.nodes.contains(node))
            || reads.kinds.iter().any(|kind| self.kinds.contains(kind))
    }
}

/// One key's new state, with the state the cache had before.
struct Changed {
    key: Key,
    object: Option<Arc<Object>>,
    before: Option<Arc<Object>>,
}

/// A transaction staged: its outcomes (their Put objects not yet at their revision) and
/// changes, or the error its writes gave; and what it read.
struct Staged {
    result: Result<(Vec<Outcome>, Vec<Changed>)>,
    reads: Reads,
    /// The cache's revision it was staged at.
    seen: u64,
}

/// What a transaction checks besides its own keys: the guards of the nodes whose pods it
/// counted and of the kinds it listed whole, unchanged since the revision it was staged at.
struct Guards {
    nodes: Vec<String>,
    kinds: Vec<Kind>,
    seen: u64,
}

/// What a task reports to the writer when its transaction is done with etcd.
enum Done {
    /// Answered: its slot is free.
    Answered(u64),
    /// Stage it again on fresher state: its slot is free.
    Again(u64, Request),
}

/// Commits what `queue` brings until every sender is gone and nothing is in flight.
pub(super) async fn run(inner: Arc<Inner>, mut queue: mpsc::Receiver<Request>) {
    let (done, mut finished) = mpsc::unbounded_channel::<Done>();
    let mut in_flight: HashMap<u64, Footprint> = HashMap::new();
    let mut waiting: VecDeque<Request> = VecDeque::new();
    let mut next_id = 0u64;
    let mut open = true;
    while open || !waiting.is_empty() || !in_flight.is_empty() {
        tokio::select! {
            biased;
            Some(report) = finished.recv() => match report {
                Done::Answered(id) => drop(in_flight.remove(&id)),
                Done::Again(id, request) => {
                    in_flight.remove(&id);
                    waiting.push_front(request);
                }
            },
            request = queue.recv(), if open && waiting.len() < MAX_IN_FLIGHT => match request {
                Some(request) => waiting.push_back(request),
                None => open = false,
            },
        }
        let mut held = VecDeque::new();
        while let Some(request) = waiting.pop_front() {
            if in_flight.len() >= MAX_IN_FLIGHT {
                held.push_back(request);
                continue;
            }
            if request.txn.writes.len() > MAX_TXN_OPS {
                split(request, &mut held);
                continue;
            }
            let staged = stage(&inner, &request.txn);
            let writes = staged.result.as_ref().map(|(_, changes)| Footprint::of(changes)).unwrap_or_default();
            if in_flight.values().any(|other| other.meets(&staged.reads, &writes)) {
                held.push_back(request);
                continue;
            }
            match staged.result {
                // A refusal may come from a cache behind another server's write: judged again
                // on state at least as new as etcd's, once.
                Err(_) if request.tries == 0 => {
                    next_id += 1;
                    // A slot that holds nothing back, so that the writer waits for it to end.
                    in_flight.insert(next_id, Footprint::default());
                    let (inner, done, id) = (inner.clone(), done.clone(), next_id);
                    tokio::spawn(async move {
                        let report = match catch_up(&inner).await {
                            Ok(()) => Done::Again(id, Request { tries: 1, ..request }),
                            Err(e) => {
                                let _ = request.reply.send(Err(e));
                                Done::Answered(id)
                            }
                        };
                        let _ = done.send(report);
                    });
                }
                Err(e) => drop(request.reply.send(Err(e))),
                Ok((outcomes, changes)) if changes.is_empty() => drop(request.reply.send(Ok(outcomes))),
                Ok((outcomes, changes)) => {
                    next_id += 1;
                    in_flight.insert(next_id, writes);
                    let guards = Guards {
                        nodes: staged.reads.nodes.into_iter().collect(),
                        kinds: staged.reads.kinds.into_iter().collect(),
                        seen: staged.seen,
                    };
                    tokio::spawn(send(inner.clone(), next_id, request, (outcomes, changes, guards), done.clone()));
                }
            }
        }
        waiting = held;
    }
}

/// A transaction with more writes than etcd takes at once commits in consecutive parts,
/// each atomic: the callers that write so much at once (a deployment scaled down by
/// thousands, its events) need no atomicity across the objects.
fn split(request: Request, waiting: &mut VecDeque<Request>) {
    let mut writes = request.txn.writes.into_iter().peekable();
    let mut answers = Vec::new();
    while writes.peek().is_some() {
        let (reply, answer) = oneshot::channel();
        waiting.push_back(Request::new(Txn { writes: writes.by_ref().take(MAX_TXN_OPS).collect(), ..Txn::default() }, reply));
        answers.push(answer);
    }
    tokio::spawn(async move {
        let mut outcomes = Vec::new();
        for answer in answers {
            match answer.await.unwrap_or(Err(StoreError::Closed)) {
                Ok(part) => outcomes.extend(part),
                Err(e) => {
                    let _ = request.reply.send(Err(e));
                    return;
                }
            }
        }
        let _ = request.reply.send(Ok(outcomes));
    });
}

/// Runs every write of `txn` against the cache, each seeing those before it.
fn stage(inner: &Inner, txn: &Txn) -> Staged {
    let state = inner.cache.state.read().expect("store state lock");
    let mut staging = Staging::tracking(&state);
    let result = staging.run(&txn.writes);
    let changes: Vec<Changed> = staging
        .overlay
        .iter()
        .map(|(key, object)| Changed { key: key.clone(), object: object.clone(), before: state.get(key).cloned() })
        .collect();
    let mut reads = staging.reads();
    // Writing a key is reading it too: a failed write waits for what is in flight on it.
    reads.keys.extend(txn.writes.iter().map(|write| write.key.clone()));
    Staged { result: result.map(|outcomes| (outcomes, changes)), reads, seen: state.revision() }
}

/// Sends one staged transaction to etcd and answers it, or hands it back to be staged again.
async fn send(
    inner: Arc<Inner>,
    id: u64,
    request: Request,
    (outcomes, changes, guards): (Vec<Outcome>, Vec<Changed>, Guards),
    done: mpsc::UnboundedSender<Done>,
) {
    let report = match commit(&inner, &changes, &guards).await {
        Err(e) => {
            let _ = request.reply.send(Err(e));
            Done::Answered(id)
        }
        // Committed or not, the cache must reach etcd's revision: to answer, or to stage again.
        Ok(sent) => {
            let revision = match &sent {
                Sent::Committed(revision) | Sent::Conflict { revision, .. } => *revision,
            };
            match (wait_for(&inner, revision, CATCH_UP_LIMIT).await, sent) {
                (Err(e), _) => {
                    let _ = request.reply.send(Err(e));
                    Done::Answered(id)
                }
                (Ok(()), Sent::Committed(_)) => {
                    let _ = request.reply.send(Ok(stamped(outcomes, revision)));
                    Done::Answered(id)
                }
                (Ok(()), Sent::Conflict { found, .. }) if let Some(key) = unreadable(&inner, &found) => {
                    // A value that came while this write was staged, which the cache holds as unreadable.
                    let refused = inner.cache.state().unreadable(&key).unwrap_or_else(|| {
                        StoreError::Backend(format!(
                            "the value of {} in etcd is not a Shepherd object, so the server cannot judge a write to it; delete or fix it with etcdctl",
                            inner.layout.key(&key)
                        ))
                    });
                    let _ = request.reply.send(Err(refused));
                    Done::Answered(id)
                }
                (Ok(()), Sent::Conflict { .. }) if request.tries >= MAX_TRIES => {
                    let conflict = format!("other servers kept writing the same objects; gave up after {MAX_TRIES} tries: try again");
                    let _ = request.reply.send(Err(StoreError::conflict(conflict)));
                    Done::Answered(id)
                }
                (Ok(()), Sent::Conflict { .. }) => Done::Again(id, Request { tries: request.tries + 1, ..request }),
            }
        }
    };
    // The writer is gone only once nothing is in flight.
    let _ = done.send(report);
}

/// What etcd answered a transaction.
enum Sent {
    Committed(u64),
    /// A compare failed: etcd's revision then, and the mod revision each written key had
    /// (0: absent).
    Conflict {
        revision: u64,
        found: Vec<(Key, u64)>,
    },
}

/// Sends the changes as one etcd transaction that compares every key with the state it was
/// staged on, and the guards of the nodes it counted pods of with the revision it was staged at.
async fn commit(inner: &Inner, changes: &[Changed], guards: &Guards) -> Result<Sent> {
    let guarded = guards.nodes.len() + guards.kinds.len();
    let mut compares = Vec::with_capacity(changes.len() + guarded);
    let mut operations = Vec::with_capacity(changes.len() + guarded);
    let mut reads = Vec::with_capacity(changes.len());
    for change in changes {
        let etcd_key = inner.layout.key(&change.key);
        compares.push(match &change.before {
            Some(before) => Compare::mod_revision(etcd_key.clone(), CompareOp::Equal, revision_of(before)),
            None => Compare::version(etcd_key.clone(), CompareOp::Equal, 0),
        });
        reads.push(TxnOp::get(etcd_key.clone(), Some(GetOptions::new().with_keys_only())));
        match &change.object {
            Some(object) => operations.push(TxnOp::put(etcd_key, inner.layout.encode(object)?, None)),
            None if change.before.is_some() => operations.push(TxnOp::delete(etcd_key, None)),
            // Made and deleted within the transaction: etcd never sees it.
            None => {}
        }
    }
    // Another server that bound to the same node, or allocated from a kind's shared pool,
    // since `seen` wrote its guard: judge again.
    let seen = i64::try_from(guards.seen).unwrap_or(i64::MAX);
    let node_guards = guards.nodes.iter().map(|node| inner.layout.node_guard(node));
    for guard in node_guards.chain(guards.kinds.iter().map(|kind| inner.layout.list_guard(*kind))) {
        compares.push(Compare::mod_revision(guard.clone(), CompareOp::Less, seen.saturating_add(1)));
        operations.push(TxnOp::put(guard, "", None));
    }
    let txn = etcd_client::Txn::new().when(compares).and_then(operations).or_else(reads);
    let response = on_a_member(|| {
        let (mut kv, txn) = (inner.client.kv_client(), txn.clone());
        async move { kv.txn(txn).await }
    })
    .await
    .map_err(|e| unavailable("commit a write", &e))?;
    let revision = response.header().map_or(0, |h| u64::try_from(h.revision()).unwrap_or_default());
    if response.succeeded() {
        return Ok(Sent::Committed(revision));
    }
    let found = changes
        .iter()
        .zip(response.op_responses())
        .map(|(change, read)| {
            let at = match read {
                TxnOpResponse::Get(get) => get.kvs().first().map_or(0, |kv| u64::try_from(kv.mod_revision()).unwrap_or_default()),
                _ => 0,
            };
            (change.key.clone(), at)
        })
        .collect();
    Ok(Sent::Conflict { revision, found })
}

/// A key that etcd had at a revision the cache has reached, but the cache holds older or not
/// at all: its value is one the cache could not read, and staging again would never match.
fn unreadable(inner: &Inner, found: &[(Key, u64)]) -> Option<Key> {
    let state = inner.cache.state();
    found
        .iter()
        .find(|(key, at)| *at > 0 && state.get(key).map_or(0, |object| object.metadata().resource_version) < *at)
        .map(|(key, _)| key.clone())
}

fn revision_of(object: &Object) -> i64 {
    i64::try_from(object.metadata().resource_version).unwrap_or(i64::MAX)
}

/// The outcomes of a committed transaction, their new states at its revision.
fn stamped(outcomes: Vec<Outcome>, revision: u64) -> Vec<Outcome> {
    outcomes
        .into_iter()
        .map(|outcome| match outcome {
            Outcome::Put { object, created } => {
                let mut object = Object::clone(&object);
                object.metadata_mut().resource_version = revision;
                Outcome::Put { object: kept(object), created }
            }
            other => other,
        })
        .collect()
}

/// Waits until the cache holds every change up to etcd's current revision.
async fn catch_up(inner: &Inner) -> Result<()> {
    let response = on_a_member(|| {
        let (mut kv, marker) = (inner.client.kv_client(), inner.layout.marker());
        async move { kv.get(marker, Some(GetOptions::new().with_count_only())).await }
    })
    .await
    .map_err(|e| unavailable("read the current revision", &e))?;
    wait_for(inner, response.header().map_or(0, |h| u64::try_from(h.revision()).unwrap_or_default()), CATCH_UP_LIMIT).await
}

/// Waits until the cache has applied `revision`. A revision of another prefix's (or of a
/// change this store has none of) never comes as a change: the writer then touches the
/// progress key, whose change comes after every change before it.
pub(super) async fn wait_for(inner: &Inner, revision: u64, limit: Duration) -> Result<()> {
    let mut applied = inner.applied.subscribe();
    let deadline = Instant::now() + limit;
    let mut touch_at = Instant::now() + PROGRESS_AFTER;
    loop {
        if *applied.borrow_and_update() >= revision {
            return Ok(());
        }
        tokio::select! {
            _ = inner.shutdown.cancelled() => return Err(StoreError::Closed),
            _ = tokio::time::sleep_until(deadline) => {
                return Err(StoreError::Unavailable(format!(
                    "the cache did not reach etcd's revision {revision} within {limit:?}: the watch of etcd is behind or broken"
                )));
            }
            _ = applied.changed() => {}
            _ = tokio::time::sleep_until(touch_at) => {
                let touched = on_a_member(|| {
                    let (mut kv, key) = (inner.client.kv_client(), inner.layout.progress());
                    async move { kv.put(key, "", None).await }
                })
                .await;
                if let Err(e) = touched {
                    return Err(unavailable("learn the watch's progress", &e));
                }
                touch_at = Instant::now() + PROGRESS_AFTER * 25;
            }
        }
    }
}
