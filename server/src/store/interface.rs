//! The [`Store`] trait every part of the server uses, which the embedded store and the etcd
//! store implement, with the helpers built on it (one write, the history's ageing loop).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use shared::model::{Kind, Object};
use tokio_util::sync::CancellationToken;

use super::error::{Result, StoreError};
use super::event::{Interest, WatchStream};
use super::key::Key;
use super::txn::{Outcome, Txn, Write};

/// Which objects of a list a read takes: those from key `start` on, in key order, that
/// `selects` takes, at most `limit` of them (0: all).
#[derive(Clone, Copy)]
pub struct Range<'a> {
    pub start: &'a str,
    pub limit: usize,
    pub selects: &'a dyn Fn(&Object) -> bool,
}

/// What a read of a [`Range`] took, at the revision it was read at, and, when an object the
/// range selects follows them, how many objects (selected or not) follow.
pub struct Slice {
    pub revision: u64,
    pub objects: Vec<Arc<Object>>,
    pub following: Option<usize>,
}

/// The store every part of the server uses.
pub trait Store: Send + Sync + 'static {
    /// `sqlite`, `memory` or `etcd`.
    fn backend(&self) -> &'static str;
    /// The revision of the last committed write.
    fn revision(&self) -> u64;
    fn get(&self, key: &Key) -> Option<Arc<Object>>;
    /// Why the value stored at `key` cannot be read ([`StoreError::Unreadable`]), when
    /// [`Store::get`] finds nothing there because it cannot: a reader answers that, not 404.
    fn unreadable(&self, key: &Key) -> Option<StoreError>;
    /// Why the first value of `kind` in one namespace or all, by key from `start` up to
    /// `until` (`None`: to the end), cannot be read, when one cannot: a list that reads it
    /// fails, as kube-apiserver's does.
    fn unreadable_in(&self, kind: Kind, namespace: Option<&str>, start: &str, until: Option<&str>) -> Option<StoreError>;
    /// Objects of a kind, in one namespace or all, with the revision they were read at.
    fn list(&self, kind: Kind, namespace: Option<&str>) -> (u64, Vec<Arc<Object>>);
    /// The objects of a kind in one namespace or all that `range` takes, in key order, as
    /// they were at `revision` (`None`: now), so that every page of a paged list shows the
    /// state its first page was read at: the current ones with the history's later changes
    /// undone. A page reads from its start key and stops after its limit, counting the
    /// rest, as etcd answers a range read with a limit. Fails with [`StoreError::Gone`] once
    /// the history no longer reaches back to `revision`, and with [`StoreError::Future`]
    /// when the store has not reached it.
    fn list_at(&self, kind: Kind, namespace: Option<&str>, revision: Option<u64>, range: Range<'_>) -> Result<Slice>;
    /// Pods bound to a node, read through the `spec.node_name` index.
    fn pods_on_node(&self, node: &str) -> (u64, Vec<Arc<Object>>);
    /// Pods whose controller is `owner` (see [`pod_owner`](super::pod_owner)), read through
    /// the owner index, so that a deployment's reconcile reads its own pods, not its namespace's.
    fn pods_owned_by(&self, owner: &Key) -> (u64, Vec<Arc<Object>>);
    fn count(&self, kind: Kind) -> usize;
    /// True as soon as the store has `revision`, false when it still has not after `limit`:
    /// a store whose cache follows a shared backend (etcd) may not have yet a revision that
    /// another server wrote and answered; the embedded store's revision is the cluster's, so
    /// it answers at once.
    fn wait_for(&self, revision: u64, limit: Duration) -> BoxFuture<'static, bool>;
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
