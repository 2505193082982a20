//! The embedded [`Store`]: an in-memory [`State`] that serves every read, over a backend
//! that a [`Committer`] writes in group commits, with watches registered in [`Watchers`].

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use shared::model::{Kind, Object};
use tokio::time::Instant;

use super::committer::{Cache, Committer};
use super::error::Result;
use super::event::{Interest, WatchStream};
use super::interface::Store;
use super::key::Key;
use super::persistence::{MemoryPersistence, Persistence};
use super::state::State;
use super::subscription::Subscription;
use super::txn::{Outcome, Txn};
use super::watchers::{History, Mailbox, Watchers};

/// The embedded [`Store`]: cache, group-committing writer and watch history.
#[derive(Clone)]
pub struct CachedStore {
    inner: Arc<Inner>,
}

struct Inner {
    name: &'static str,
    cache: Arc<Cache>,
    committer: Committer,
}

impl CachedStore {
    /// Loads everything from `persistence` and starts its committer. `history` is what
    /// watches can replay.
    pub fn open(mut persistence: Box<dyn Persistence>, history: impl Into<History>) -> Result<CachedStore> {
        let history = history.into();
        let state = State::load(persistence.load()?);
        let cache = Arc::new(Cache {
            state: RwLock::new(state),
            watchers: Arc::new(Mutex::new(Watchers::default())),
            history: History { changes: history.changes.max(1), ..history },
        });
        let name = persistence.name();
        let committer = Committer::start(persistence, &cache)?;
        Ok(CachedStore { inner: Arc::new(Inner { name, cache, committer }) })
    }

    /// A store that keeps nothing on disk.
    pub fn in_memory(history: impl Into<History>) -> CachedStore {
        CachedStore::open(Box::new(MemoryPersistence), history).expect("the memory store cannot fail to open")
    }

    /// The oldest revision a watch can still start from.
    pub fn oldest_revision(&self) -> u64 {
        self.state().history_start()
    }

    fn state(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.inner.cache.state.read().expect("store state lock")
    }
}

impl Store for CachedStore {
    fn backend(&self) -> &'static str {
        self.inner.name
    }

    fn revision(&self) -> u64 {
        self.state().revision()
    }

    fn wait_for(&self, revision: u64, _limit: Duration) -> BoxFuture<'static, bool> {
        futures::future::ready(self.revision() >= revision).boxed()
    }

    fn get(&self, key: &Key) -> Option<Arc<Object>> {
        self.state().get(key).cloned()
    }

    fn list(&self, kind: Kind, namespace: Option<&str>) -> (u64, Vec<Arc<Object>>) {
        self.state().list(kind, namespace)
    }

    fn pods_on_node(&self, node: &str) -> (u64, Vec<Arc<Object>>) {
        self.state().pods_on_node(node)
    }

    fn pods_owned_by(&self, owner: &Key) -> (u64, Vec<Arc<Object>>) {
        self.state().pods_owned_by(owner)
    }

    fn count(&self, kind: Kind) -> usize {
        self.state().count(kind)
    }

    fn commit(&self, txn: Txn) -> BoxFuture<'static, Result<Vec<Outcome>>> {
        let inner = self.inner.clone();
        async move { inner.committer.commit(&inner.cache, txn).await }.boxed()
    }

    fn watch_interest(&self, interest: Interest, from: u64) -> Result<WatchStream> {
        let state = self.state();
        let replay = state.replay(&interest, from)?;
        let mailbox = Mailbox::new(interest, replay, state.revision());
        // Registered under the state lock: no commit falls between the replay and the mailbox.
        Subscription::register(&self.inner.cache.watchers, mailbox)
    }

    fn expire_history(&self) {
        let cache = &self.inner.cache;
        cache.state.write().expect("store state lock").forget_history(&cache.history, Instant::now());
    }

    fn compact(&self, kind: Kind) {
        self.inner.cache.state.write().expect("store state lock").compact(kind);
    }

    fn close(&self) -> BoxFuture<'static, ()> {
        let inner = self.inner.clone();
        async move {
            inner.committer.close().await;
            inner.cache.watchers.lock().expect("watchers lock").close();
        }
        .boxed()
    }
}

#[cfg(test)]
impl CachedStore {
    /// The registered watchers, for the tests of their index.
    pub(super) fn watchers(&self) -> std::sync::MutexGuard<'_, Watchers> {
        self.inner.cache.watchers.lock().expect("watchers lock")
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use shared::model::Kind;

    use super::*;
    use crate::store::*;

    #[tokio::test]
    async fn closing_the_store_ends_its_watches() {
        let store = CachedStore::in_memory(10);
        let mut watcher = store.watch(&[Kind::Pod], 0).unwrap();
        store.close().await;
        assert!(watcher.next().await.is_none());
        assert_eq!(store.watch(&[Kind::Pod], 0).err(), Some(StoreError::Closed));
    }
}
