//! Transactions: each write a read-modify-write closure ([`Write`]) that sees the state as
//! of every write before it ([`View`]) and decides a [`Change`]; the [`Outcome`] of each.

use std::sync::Arc;
use std::time::Duration;

use shared::model::{Kind, Object};

use super::error::Result;
use super::key::Key;

/// What a mutation decides, given the object's current state. (`Put` is large, but a
/// `Change` lives only for the moment the writer applies it: boxing would cost more.)
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Change {
    /// Store this state; the store stamps the new resource_version.
    Put(Object),
    Delete,
    /// Nothing to write: the revision does not move.
    Keep,
}

/// Read access for a mutation: the state as of every write committed or staged before it.
pub trait View {
    fn get(&self, key: &Key) -> Option<&Object>;
    /// Every pod whose `spec.node_name` is `node` (the field index a bind checks room with).
    fn pods_on_node(&self, node: &str) -> Vec<&Object>;
    /// Every object of `kind` in every namespace: what a write that allocates from a pool
    /// all of them share (a Service's cluster IP and node ports) checks against. On etcd the
    /// transaction then commits only if no other server wrote a listing writer of the kind since.
    fn list(&self, kind: Kind) -> Vec<&Object>;
}

/// A read-modify-write of one object, run by the store's single writer against the latest
/// state, so that the check and the write are atomic. A store whose state may lag its
/// backend (etcd) runs it again on fresher state when the backend's compare fails, as
/// kube-apiserver's GuaranteedUpdate runs its tryUpdate again: so it is `Fn`.
pub type Mutate = Box<dyn Fn(&dyn View, Option<&Object>) -> Result<Change> + Send + Sync>;

pub struct Write {
    pub key: Key,
    pub mutate: Mutate,
}

impl Write {
    pub fn new(key: Key, mutate: impl Fn(&dyn View, Option<&Object>) -> Result<Change> + Send + Sync + 'static) -> Self {
        Write { key, mutate: Box::new(mutate) }
    }
}

/// Writes that commit together or not at all.
#[derive(Default)]
pub struct Txn {
    pub writes: Vec<Write>,
    /// How long the transaction may wait for others to share its commit ([`Txn::may_wait`]).
    pub may_wait: Duration,
    /// Judged but not written ([`Txn::dry_run`]).
    pub dry_run: bool,
}

impl Txn {
    pub fn new() -> Self {
        Txn::default()
    }

    /// Lets the transaction wait up to `limit` for others to share its commit: a write
    /// nobody waits on closely (a node's lease renewal) then shares one disk sync with the
    /// writes around it, and is committed at once with the next one that may not wait.
    /// It is answered only once durable, as every transaction. A backend that commits
    /// each transaction on its own (memory, etcd) commits it at once.
    pub fn may_wait(mut self, limit: Duration) -> Self {
        self.may_wait = limit;
        self
    }

    /// Makes the commit a dry run when `dry_run` (Kubernetes' `dryRun=All`): every write
    /// runs against the current state, each seeing those before it, and its outcome is
    /// answered as a commit's, but nothing is stored, no revision is taken and no watcher
    /// hears of it. A `Put` keeps the resource_version its write gave it (none for a new
    /// object, the stored one for a change), as kube-apiserver's dry-run storage answers.
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    pub fn with(mut self, write: Write) -> Self {
        self.writes.push(write);
        self
    }

    pub fn push(&mut self, write: Write) {
        self.writes.push(write);
    }
}

/// The result of one write of a committed transaction.
#[derive(Debug, Clone)]
pub enum Outcome {
    Put { object: Arc<Object>, created: bool },
    Deleted(Arc<Object>),
    Kept(Option<Arc<Object>>),
}

impl Outcome {
    /// The object as it now is (or was, when deleted).
    pub fn object(&self) -> Option<&Arc<Object>> {
        match self {
            Outcome::Put { object, .. } | Outcome::Deleted(object) => Some(object),
            Outcome::Kept(object) => object.as_ref(),
        }
    }
}
