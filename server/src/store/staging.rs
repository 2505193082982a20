//! A transaction's view while it is staged: the store's state with the writes staged before
//! it laid over, so that each write of a batch sees those before it (a bind sees the pods
//! bound earlier in the same batch).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use shared::model::{Kind, Object};

use super::error::{Result, StoreError};
use super::key::{Key, pod_node};
use super::state::State;
use super::txn::{Change, Outcome, View, Write};

pub(super) struct Staging<'a> {
    pub(super) state: &'a State,
    pub(super) overlay: HashMap<Key, Option<Arc<Object>>>,
    pub(super) overlay_by_node: HashMap<String, HashSet<String>>,
    /// What the writes read, when asked for ([`Staging::tracking`]).
    reads: Option<RefCell<Reads>>,
}

/// The keys a transaction's writes read, the nodes whose pods they listed, and the kinds
/// they listed whole.
#[derive(Debug, Default)]
pub(super) struct Reads {
    pub(super) keys: HashSet<Key>,
    pub(super) nodes: HashSet<String>,
    pub(super) kinds: HashSet<Kind>,
}

impl<'a> Staging<'a> {
    pub(super) fn new(state: &'a State) -> Staging<'a> {
        Staging { state, overlay: HashMap::new(), overlay_by_node: HashMap::new(), reads: None }
    }

    /// A staging that records what it is asked: a writer that commits several transactions
    /// at once holds back one that reads what another one still in flight writes.
    pub(super) fn tracking(state: &'a State) -> Staging<'a> {
        Staging { reads: Some(RefCell::default()), ..Staging::new(state) }
    }

    pub(super) fn reads(self) -> Reads {
        self.reads.map(RefCell::into_inner).unwrap_or_default()
    }

    pub(super) fn current(&self, key: &Key) -> Option<Arc<Object>> {
        match self.overlay.get(key) {
            Some(staged) => staged.clone(),
            None => self.state.get(key).cloned(),
        }
    }

    pub(super) fn stage(&mut self, key: &Key, object: Option<Arc<Object>>) -> Option<Option<Arc<Object>>> {
        if let Some(node) = object.as_deref().and_then(pod_node) {
            self.overlay_by_node.entry(node.to_string()).or_default().insert(key.key.clone());
        }
        self.overlay.insert(key.clone(), object)
    }

    /// What `write` decides given `current`, as the store carries it out: an object left
    /// unchanged whose stored value is stale is stored again, so that a rotation's
    /// `get | replace` writes each Secret with the key that encrypts now, as kube's
    /// GuaranteedUpdate writes when its transformer says the value is stale.
    pub(super) fn decide(&self, write: &Write, current: Option<&Arc<Object>>) -> Result<Change> {
        let change = (write.mutate)(self, current.map(|object| &**object))?;
        let rewrite = !self.overlay.contains_key(&write.key) && self.state.is_stale(&write.key);
        Ok(match (change, current) {
            (Change::Keep, Some(current)) if rewrite => Change::Put(Object::clone(current)),
            (change, _) => change,
        })
    }

    /// Runs `writes` in order, each seeing those before it staged, and answers what each
    /// decided, with no new revision stamped: the etcd writer's staging of a transaction,
    /// and all a dry run does.
    pub(super) fn run(&mut self, writes: &[Write]) -> Result<Vec<Outcome>> {
        let mut outcomes = Vec::with_capacity(writes.len());
        for write in writes {
            if let Some(unreadable) = self.state.unreadable(&write.key) {
                return Err(unreadable);
            }
            let current = self.current(&write.key);
            match self.decide(write, current.as_ref())? {
                Change::Keep => outcomes.push(Outcome::Kept(current)),
                Change::Delete => {
                    let prev = current.ok_or_else(|| StoreError::NotFound { kind: write.key.kind, key: write.key.key.clone() })?;
                    self.stage(&write.key, None);
                    outcomes.push(Outcome::Deleted(prev));
                }
                Change::Put(object) => {
                    if Key::of(&object) != write.key {
                        return Err(StoreError::Backend(format!("a write to {} tried to store {}", write.key, Key::of(&object))));
                    }
                    let object = Arc::new(object);
                    self.stage(&write.key, Some(object.clone()));
                    outcomes.push(Outcome::Put { object, created: current.is_none() });
                }
            }
        }
        Ok(outcomes)
    }
}

impl View for Staging<'_> {
    fn get(&self, key: &Key) -> Option<&Object> {
        if let Some(reads) = &self.reads {
            reads.borrow_mut().keys.insert(key.clone());
        }
        match self.overlay.get(key) {
            Some(staged) => staged.as_deref(),
            None => self.state.get(key).map(|o| &**o),
        }
    }

    fn pods_on_node(&self, node: &str) -> Vec<&Object> {
        if let Some(reads) = &self.reads {
            reads.borrow_mut().nodes.insert(node.to_string());
        }
        let mut pods: Vec<&Object> = Vec::new();
        if let Some(bound) = self.state.bound_to(node) {
            for (key, object) in bound {
                if !self.overlay.contains_key(&Key { kind: Kind::Pod, key: key.clone() }) {
                    pods.push(object);
                }
            }
        }
        if let Some(keys) = self.overlay_by_node.get(node) {
            for key in keys {
                let k = Key { kind: Kind::Pod, key: key.clone() };
                if let Some(Some(o)) = self.overlay.get(&k)
                    && pod_node(o) == Some(node)
                {
                    pods.push(o);
                }
            }
        }
        pods
    }

    fn list(&self, kind: Kind) -> Vec<&Object> {
        if let Some(reads) = &self.reads {
            reads.borrow_mut().kinds.insert(kind);
        }
        let stored = self.state.in_scope(kind, None, "").filter(|(key, _)| !self.overlay.contains_key(&Key { kind, key: (*key).clone() }));
        let staged = self.overlay.iter().filter(|(key, _)| key.kind == kind).filter_map(|(_, object)| object.as_deref());
        stored.map(|(_, object)| &**object).chain(staged).collect()
    }
}
