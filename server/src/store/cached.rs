//! The embedded [`Store`](super::Store): the in-memory [`Cache`] that serves every read, over a
//! backend that a [`Committer`] writes in group commits.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;

use super::cache::{Cache, CacheBackend};
use super::committer::Committer;
use super::error::Result;
use super::interface::Store;
use super::persistence::{MemoryPersistence, Persistence};
use super::txn::{Outcome, Txn};
use super::watchers::History;
#[cfg(test)]
use super::watchers::Watchers;

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
        let cache = Arc::new(Cache::new(persistence.load()?, history));
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
        self.inner.cache.state().history_start()
    }
}

impl CacheBackend for CachedStore {
    fn name(&self) -> &'static str {
        self.inner.name
    }

    fn cache(&self) -> &Cache {
        &self.inner.cache
    }

    fn commit_txn(&self, txn: Txn) -> BoxFuture<'static, Result<Vec<Outcome>>> {
        let inner = self.inner.clone();
        async move { inner.committer.commit(&inner.cache, txn).await }.boxed()
    }

    /// Every write is in the state once committed: a revision not there yet never comes.
    fn reach(&self, revision: u64, _limit: Duration) -> BoxFuture<'static, bool> {
        futures::future::ready(self.revision() >= revision).boxed()
    }

    fn shut(&self) -> BoxFuture<'static, ()> {
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
