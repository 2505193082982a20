//! Durability under the embedded store: the [`Persistence`] trait that loads everything at
//! start and commits batches atomically (SQLite implements it), and the memory one.

use shared::model::{Kind, Object};

use super::error::Result;
use super::key::Key;

/// Everything a backend holds: the revision it reached, every object, the keys whose
/// stored value cannot be read, with why, and those whose value is stale (read with a key
/// that no longer encrypts, see [`Encryption`](super::Encryption)).
#[derive(Debug, Default)]
pub struct Snapshot {
    pub revision: u64,
    pub objects: Vec<Object>,
    pub unreadable: Vec<(Key, String)>,
    pub stale: Vec<Key>,
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
