//! The object store: every object by kind and key, one global revision counter, atomic
//! read-modify-write transactions (the compare-and-swap every update relies on) and the
//! watch history. [`Store`] is the seam both backends implement: [`CachedStore`], the
//! embedded one over SQLite or memory, and [`EtcdStore`], several servers' one on etcd. A watcher says what it
//! selects ([`Interest`]): the store hands it those changes alone and wakes it for nothing else.
//!
//! Layout, each file below the ones that use it:
//! - `error`, `key`, `txn`, `event`: the types of the seam; `interface`: the [`Store`] trait;
//! - `persistence`: the backend trait under the embedded store, and memory; `sqlite`: SQLite;
//! - `encryption`: Secrets encrypted at rest, for SQLite and etcd alike;
//! - `state`: objects, pod indexes, history and tombstones; `watchers`: the mailboxes and the
//!   lag limit; `subscription`: a watch's stream; `committer`: the single writer, group commit;
//! - `cache`: the state and watchers both stores serve from, and the one implementation of
//!   [`Store`]'s reads and watches over them;
//! - `staging`: a transaction's view of the state with the writes staged before it;
//! - `cached`: [`CachedStore`], which puts those together;
//! - `etcd/`: [`EtcdStore`], the same state and watchers fed by an etcd watch, written by
//!   etcd transactions.

mod cache;
mod cached;
mod committer;
mod encryption;
mod error;
mod etcd;
mod event;
#[cfg(test)]
mod fixtures;
mod interface;
mod key;
mod persistence;
mod sqlite;
mod staging;
mod state;
mod subscription;
mod txn;
mod watchers;

pub use cached::CachedStore;
pub use encryption::{Encryption, EncryptionError};
pub use error::{Result, StoreError};
pub use etcd::{EtcdSettings, EtcdStore};
pub use event::{EventType, Interest, StoreEvent, WatchBatch, WatchStream};
pub use interface::{HISTORY_EXPIRY_PERIOD, Range, Slice, Store, commit_one, expire_history};
pub use key::{Key, pod_owner};
pub use persistence::{MemoryPersistence, PersistedChange, Persistence, Snapshot};
pub use sqlite::SqlitePersistence;
pub use txn::{Change, Mutate, Outcome, Txn, View, Write};
pub use watchers::History;
