//! The deployment controller, over ReplicaSets as Kubernetes' (`pkg/controller/deployment`):
//! the ReplicaSet whose template is the deployment's is the new one, named
//! `<deployment>-<pod-template-hash>`; the others are old. `RollingUpdate` moves replicas
//! from old to new within `maxSurge` and `maxUnavailable`, `Recreate` scales the old to zero
//! and waits for their pods to go before it scales the new up. A change of `replicas` alone
//! (or any change while paused) is spread over the active sets in proportion to their size.
//! It writes the revision annotations, the conditions `Progressing` (with its deadline) and
//! `Available`, and the status, once a sync; deletes old sets at zero beyond
//! `revisionHistoryLimit`; and deletes the sets of a deleted deployment (the cascade's first
//! step: the ReplicaSet controller deletes their pods).
//!
//! Pods made before ReplicaSets existed are controlled by their deployment directly: each
//! sync hands those that run the current template to the new ReplicaSet (it adopts them)
//! and deletes the others, which ran a template the earlier version never rolled out.

use std::cmp::Reverse;
use std::sync::Arc;
use std::time::Duration;

use shared::model::{
    Condition, Deployment, DeploymentStatus, Kind, Object, ObjectMeta, Pod, ReplicaSet, ReplicaSetSpec, Time, conditions, event_types,
    find_condition, set_condition,
};
use shared::rollout::{
    DEPLOYMENT_OWN_ANNOTATIONS, DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, POD_TEMPLATE_HASH_LABEL, REVISION_ANNOTATION,
    count_annotation, equal_ignoring_hash, next_revision, pod_template_hash, reasons, revision,
};

use super::replicaset::{BURST_REPLICAS, controller_reference, delete_ignoring_gone};
use super::{Action, Context, Controller, Result, store_error};
use crate::events::{self, SOURCE_DEPLOYMENT_CONTROLLER};
use crate::ops;
use crate::store::{Key, Store, StoreError, StoreEvent, Txn, Write, pod_owner};

mod scaling;
mod status;
mod strategy;
mod sync;
#[cfg(test)]
mod tests;

use status::*;
use sync::*;

pub struct DeploymentController;

fn as_rs(object: &Object) -> Option<&ReplicaSet> {
    match object {
        Object::ReplicaSet(rs) => Some(rs),
        _ => None,
    }
}

/// The deployment that controls a ReplicaSet, if one does.
fn deployment_of(rs: &ReplicaSet) -> Option<Key> {
    rs.metadata
        .controller()
        .filter(|r| r.kind == Kind::Deployment.as_str())
        .map(|r| Key::new(Kind::Deployment, &rs.metadata.namespace, &r.name))
}

/// Oldest first, by creation and then name, as Kubernetes sorts ReplicaSets.
fn by_creation(a: &ReplicaSet, b: &ReplicaSet) -> std::cmp::Ordering {
    (a.metadata.created_at, &a.metadata.name).cmp(&(b.metadata.created_at, &b.metadata.name))
}

fn replicas_of<'a>(sets: impl IntoIterator<Item = &'a ReplicaSet>) -> i32 {
    sets.into_iter().map(|rs| rs.spec.replicas).sum()
}

impl Controller for DeploymentController {
    const NAME: &'static str = "deployment-controller";

    fn watched(&self) -> &'static [Kind] {
        &[Kind::Deployment, Kind::ReplicaSet, Kind::Pod]
    }

    fn keys_for(&self, store: &dyn Store, event: &StoreEvent) -> Vec<Key> {
        match &*event.object {
            Object::Deployment(_) => vec![Key::of(&event.object)],
            Object::ReplicaSet(rs) => {
                let mut keys: Vec<Key> = deployment_of(rs).into_iter().collect();
                if let Some(before) = event.prev.as_deref().and_then(as_rs).and_then(deployment_of)
                    && !keys.contains(&before)
                {
                    keys.push(before);
                }
                // An orphan set: the deployments that may adopt it.
                if rs.metadata.controller().is_none() && rs.metadata.deletion_timestamp.is_none() {
                    let deployments = store.list(Kind::Deployment, Some(&rs.metadata.namespace)).1;
                    keys.extend(deployments.iter().filter_map(|o| match &**o {
                        Object::Deployment(d) if d.spec.selector.matches(&rs.metadata.labels) => Some(Key::of(o)),
                        _ => None,
                    }));
                }
                keys
            }
            // Pods made before ReplicaSets; and a pod gone, which a Recreate may wait for.
            Object::Pod(_) => match pod_owner(&event.object) {
                Some(owner) if owner.kind == Kind::Deployment => vec![owner],
                Some(owner) if event.type_ == crate::store::EventType::Deleted => {
                    store.get(&owner).as_deref().and_then(as_rs).and_then(deployment_of).into_iter().collect()
                }
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    fn all_keys(&self, store: &dyn Store) -> Vec<Key> {
        let mut keys: Vec<Key> = store.list(Kind::Deployment, None).1.iter().map(|d| Key::of(d)).collect();
        // Owners of sets (and of pods made before sets) whose deployment is gone: the
        // cascade after a crash or a missed event.
        let owners = store.list(Kind::ReplicaSet, None).1.iter().filter_map(|o| as_rs(o).and_then(deployment_of)).collect::<Vec<_>>();
        let legacy =
            store.list(Kind::Pod, None).1.iter().filter_map(|p| pod_owner(p)).filter(|k| k.kind == Kind::Deployment).collect::<Vec<_>>();
        for owner in owners.into_iter().chain(legacy) {
            if store.get(&owner).is_none() {
                keys.push(owner);
            }
        }
        keys.sort();
        keys.dedup();
        keys
    }

    async fn reconcile(&self, key: &Key, ctx: &Context, now: Time) -> Result<Action> {
        let err = |e| store_error(Self::NAME, key, e);
        let store = &ctx.store;
        let (namespace, name) = key.namespace_and_name();
        let deployment = match store.get(key).as_deref() {
            Some(Object::Deployment(d)) if d.metadata.deletion_timestamp.is_none() => Some(Deployment::clone(d)),
            _ => None,
        };
        let in_namespace = store.list(Kind::ReplicaSet, Some(namespace)).1;
        let named_owner = |rs: &ReplicaSet| rs.metadata.controller().is_some_and(|r| r.kind == Kind::Deployment.as_str() && r.name == name);
        let legacy_listed = store.pods_owned_by(key).1;
        let legacy: Vec<&Pod> = legacy_listed
            .iter()
            .filter_map(|o| match &**o {
                Object::Pod(p) if p.metadata.deletion_timestamp.is_none() => Some(p),
                _ => None,
            })
            .collect();

        let Some(d) = deployment else {
            // Cascade: the deployment is gone, so are its sets (their controller deletes
            // their pods) and any pods it controlled itself.
            let doomed: Vec<&ReplicaSet> = in_namespace.iter().filter_map(|o| as_rs(o)).filter(|rs| named_owner(rs)).collect();
            delete_sets(store, &doomed).await.map_err(err)?;
            if !legacy.is_empty() {
                let burst = &legacy[..legacy.len().min(BURST_REPLICAS)];
                delete_ignoring_gone(store, burst, now, ctx.config.node_monitor_grace).await.map_err(err)?;
            }
            if !doomed.is_empty() || !legacy.is_empty() {
                tracing::info!("deleting {} replica sets and {} pods of deleted deployment {namespace}/{name}", doomed.len(), legacy.len());
            }
            return Ok(Action::AwaitChange);
        };

        // Sets of an earlier deployment of this name are not ours: delete them. Ours that
        // the selector no longer matches are let go; orphans it matches are taken in.
        let mut sets = Vec::new();
        let mut strays = Vec::new();
        let mut unmatched = Vec::new();
        let mut orphans = Vec::new();
        for rs in in_namespace.iter().filter_map(|o| as_rs(o)) {
            let matches = d.spec.selector.matches(&rs.metadata.labels);
            match rs.metadata.controller() {
                Some(r) if r.uid == d.metadata.uid && matches => sets.push(rs.clone()),
                Some(r) if r.uid == d.metadata.uid => unmatched.push(rs),
                Some(_) if named_owner(rs) => strays.push(rs),
                None if matches && rs.metadata.deletion_timestamp.is_none() => orphans.push(rs),
                _ => {}
            }
        }
        delete_sets(store, &strays).await.map_err(err)?;
        claim(store, &d, &unmatched, &orphans, &mut sets).await.map_err(err)?;
        sets.sort_by(by_creation);
        if !legacy.is_empty() {
            hand_over(store, &d, &sets, &legacy, now, ctx.config.node_monitor_grace).await.map_err(err)?;
        }

        let new = sets.iter().position(|rs| equal_ignoring_hash(&rs.spec.template, &d.spec.template)).map(|i| sets.remove(i));
        let mut sync = Sync { store, now, stored: d.clone(), d, new, old: sets };
        match sync.run().await {
            Ok(action) => Ok(action),
            // A newer version will be synced from its own watch event.
            Err(StoreError::Conflict(_)) => Ok(Action::AwaitChange),
            Err(e) => Err(err(e)),
        }
    }
}

/// Deletes ReplicaSets (their controller then deletes their pods); ones already gone count.
async fn delete_sets(store: &Arc<dyn Store>, sets: &[&ReplicaSet]) -> Result<(), StoreError> {
    let deletes = sets
        .iter()
        .map(|rs| store.commit(Txn::new().with(ops::delete(Key::new(Kind::ReplicaSet, &rs.metadata.namespace, &rs.metadata.name), 0))));
    for result in futures::future::join_all(deletes).await {
        match result {
            Ok(_) | Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Releases the deployment's sets in `unmatched` and adopts `orphans` into `sets`.
async fn claim(
    store: &Arc<dyn Store>,
    d: &Deployment,
    unmatched: &[&ReplicaSet],
    orphans: &[&ReplicaSet],
    sets: &mut Vec<ReplicaSet>,
) -> Result<(), StoreError> {
    for rs in unmatched {
        let uid = d.metadata.uid.clone();
        let write = ops::modify::<ReplicaSet>(Key::new(Kind::ReplicaSet, &rs.metadata.namespace, &rs.metadata.name), move |_, rs| {
            rs.metadata.owner_references.retain(|r| r.uid != uid);
            Ok(())
        });
        match store.commit(Txn::new().with(write)).await {
            Ok(_) | Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    for rs in orphans {
        let (reference, selector) = (controller_reference(Kind::Deployment, &d.metadata), d.spec.selector.clone());
        let write = ops::modify::<ReplicaSet>(Key::new(Kind::ReplicaSet, &rs.metadata.namespace, &rs.metadata.name), move |_, rs| {
            if rs.metadata.controller().is_none() && rs.metadata.deletion_timestamp.is_none() && selector.matches(&rs.metadata.labels) {
                rs.metadata.owner_references.push(reference.clone());
            }
            Ok(())
        });
        match store.commit(Txn::new().with(write)).await {
            Ok(outcomes) => {
                let adopted = outcomes.first().and_then(|o| o.object()).and_then(|o| as_rs(o).cloned());
                sets.extend(adopted.filter(|rs| rs.metadata.controller().is_some_and(|r| r.uid == d.metadata.uid)));
            }
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Pods the deployment controls itself (made before ReplicaSets): those that run the
/// current template lose that reference and gain the new set's hash label, so that the new
/// set adopts them; the others are deleted gracefully.
async fn hand_over(
    store: &Arc<dyn Store>,
    d: &Deployment,
    sets: &[ReplicaSet],
    legacy: &[&Pod],
    now: Time,
    node_monitor_grace: Duration,
) -> Result<(), StoreError> {
    let new = sets.iter().find(|rs| equal_ignoring_hash(&rs.spec.template, &d.spec.template));
    let hash = match new.and_then(|rs| rs.spec.template.metadata.labels.get(POD_TEMPLATE_HASH_LABEL)) {
        Some(hash) => hash.clone(),
        None => pod_template_hash(&d.spec.template, d.status.collision_count),
    };
    let runs_template = |pod: &Pod| {
        let mut spec = pod.spec.clone();
        spec.node_name.clear();
        spec == d.spec.template.spec && d.spec.template.metadata.labels.iter().all(|(k, v)| pod.metadata.labels.get(k) == Some(v))
    };
    let (current, outdated): (Vec<&Pod>, Vec<&Pod>) = legacy.iter().take(BURST_REPLICAS).partition(|p| runs_template(p));
    let uid = d.metadata.uid.clone();
    let writes = current.iter().map(|pod| {
        let (uid, hash) = (uid.clone(), hash.clone());
        let write = ops::modify::<Pod>(Key::new(Kind::Pod, &pod.metadata.namespace, &pod.metadata.name), move |_, p| {
            if p.metadata.controller().is_some_and(|r| r.uid == uid) {
                p.metadata.owner_references.retain(|r| r.uid != uid);
                p.metadata.labels.insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
            }
            Ok(())
        });
        store.commit(Txn::new().with(write))
    });
    for result in futures::future::join_all(writes).await {
        match result {
            Ok(_) | Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    delete_ignoring_gone(store, &outdated, now, node_monitor_grace).await
}
