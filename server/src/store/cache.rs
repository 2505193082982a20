//! What both stores are: the state in memory that serves every read and watch, with the
//! watchers each change wakes. A backend ([`CacheBackend`]) adds only how it commits, how it
//! waits for a revision and how it closes; every other part of [`Store`] is written here once.

use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use shared::model::{Kind, Object};
use tokio::time::Instant;

use super::error::{Result, StoreError};
use super::event::{Interest, WatchStream};
use super::interface::{Range, Slice, Store};
use super::key::Key;
use super::persistence::Snapshot;
use super::staging::Staging;
use super::state::State;
use super::subscription::Subscription;
use super::txn::{Outcome, Txn};
use super::watchers::{History, Mailbox, Watchers};

/// The state every read takes, and the watchers each change wakes.
pub(super) struct Cache {
    pub(super) state: RwLock<State>,
    /// Taken after `state` whenever both are held.
    pub(super) watchers: Arc<Mutex<Watchers>>,
    /// What the history keeps; its count is also how far a remote watcher may fall behind.
    pub(super) history: History,
}

impl Cache {
    /// The state a backend loaded, with no watcher yet.
    pub(super) fn new(snapshot: Snapshot, history: History) -> Cache {
        Cache {
            state: RwLock::new(State::load(snapshot)),
            watchers: Arc::new(Mutex::new(Watchers::default())),
            history: History { changes: history.changes.max(1), ..history },
        }
    }

    pub(super) fn state(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().expect("store state lock")
    }
}

/// A store over a [`Cache`]: what it does besides serving from it.
pub(super) trait CacheBackend: Send + Sync + 'static {
    /// `sqlite`, `memory` or `etcd`.
    fn name(&self) -> &'static str;
    fn cache(&self) -> &Cache;
    fn commit_txn(&self, txn: Txn) -> BoxFuture<'static, Result<Vec<Outcome>>>;
    /// Whether the cache reaches `revision` within `limit`.
    fn reach(&self, revision: u64, limit: Duration) -> BoxFuture<'static, bool>;
    fn shut(&self) -> BoxFuture<'static, ()>;
}

impl<B: CacheBackend> Store for B {
    fn backend(&self) -> &'static str {
        self.name()
    }

    fn revision(&self) -> u64 {
        self.cache().state().revision()
    }

    fn get(&self, key: &Key) -> Option<Arc<Object>> {
        self.cache().state().get(key).cloned()
    }

    fn unreadable(&self, key: &Key) -> Option<StoreError> {
        self.cache().state().unreadable(key)
    }

    fn unreadable_in(&self, kind: Kind, namespace: Option<&str>, start: &str, until: Option<&str>) -> Option<StoreError> {
        self.cache().state().unreadable_in(kind, namespace, start, until)
    }

    fn list(&self, kind: Kind, namespace: Option<&str>) -> (u64, Vec<Arc<Object>>) {
        self.cache().state().list(kind, namespace)
    }

    fn list_at(&self, kind: Kind, namespace: Option<&str>, revision: Option<u64>, range: Range<'_>) -> Result<Slice> {
        self.cache().state().list_at(kind, namespace, revision, range)
    }

    fn pods_on_node(&self, node: &str) -> (u64, Vec<Arc<Object>>) {
        self.cache().state().pods_on_node(node)
    }

    fn pods_owned_by(&self, owner: &Key) -> (u64, Vec<Arc<Object>>) {
        self.cache().state().pods_owned_by(owner)
    }

    fn count(&self, kind: Kind) -> usize {
        self.cache().state().count(kind)
    }

    fn wait_for(&self, revision: u64, limit: Duration) -> BoxFuture<'static, bool> {
        self.reach(revision, limit)
    }

    /// The one place a dry run stops: judged on the state every read takes, never handed
    /// to the backend.
    fn commit(&self, txn: Txn) -> BoxFuture<'static, Result<Vec<Outcome>>> {
        if txn.dry_run {
            let state = self.cache().state();
            return futures::future::ready(Staging::new(&state).run(&txn.writes)).boxed();
        }
        self.commit_txn(txn)
    }

    fn watch_interest(&self, interest: Interest, from: u64) -> Result<WatchStream> {
        let state = self.cache().state();
        let replay = state.replay(&interest, from)?;
        let mailbox = Mailbox::new(interest, replay, state.revision());
        // Registered under the state lock: no change falls between the replay and the mailbox.
        Subscription::register(&self.cache().watchers, mailbox)
    }

    fn expire_history(&self) {
        let cache = self.cache();
        cache.state.write().expect("store state lock").forget_history(&cache.history, Instant::now());
    }

    fn compact(&self, kind: Kind) {
        self.cache().state.write().expect("store state lock").compact(kind);
    }

    fn close(&self) -> BoxFuture<'static, ()> {
        self.shut()
    }
}
