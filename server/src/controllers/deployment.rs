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
    DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, POD_TEMPLATE_HASH_LABEL, REVISION_ANNOTATION, count_annotation,
    equal_ignoring_hash, pod_template_hash, reasons, revision,
};

use super::replicaset::{BURST_REPLICAS, controller_reference, delete_ignoring_gone};
use super::{Action, Context, Controller, Result, store_error};
use crate::events::{self, SOURCE_DEPLOYMENT_CONTROLLER};
use crate::ops;
use crate::store::{Key, Store, StoreError, StoreEvent, Txn, Write, pod_owner};

pub struct DeploymentController;

/// Deployment annotations a ReplicaSet does not take from its deployment.
const NOT_COPIED: [&str; 5] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION_ANNOTATION,
    "deployment.kubernetes.io/revision-history",
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
];

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
        let (namespace, name) = key.key.split_once('/').unwrap_or(("", &key.key));
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

/// Which of a sync's sets: the new one or an old one (by index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    New,
    Old(usize),
}

/// One sync of a deployment (`syncDeployment`): its sets as read and as this sync changes
/// them, and the deployment whose revision annotation and status it writes once, at the end.
struct Sync<'a> {
    store: &'a Arc<dyn Store>,
    now: Time,
    /// The deployment as read.
    stored: Deployment,
    /// The deployment with this sync's revision annotation and conditions.
    d: Deployment,
    /// The set whose template is the deployment's.
    new: Option<ReplicaSet>,
    /// The others, oldest first.
    old: Vec<ReplicaSet>,
}

/// A deployment condition with both times now.
fn condition(type_: &str, status: &str, reason: &str, message: String, now: Time) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        last_transition_time: Some(now),
        last_update_time: Some(now),
        ..Condition::default()
    }
}

/// Kubernetes' `SetDeploymentCondition`: a condition of the same status and reason stays as
/// it is; one of the same status keeps its transition time.
fn set_deployment_condition(conditions: &mut Vec<Condition>, mut new: Condition) {
    if let Some(current) = find_condition(conditions, &new.type_) {
        if current.status == new.status && current.reason == new.reason {
            return;
        }
        if current.status == new.status {
            new.last_transition_time = current.last_transition_time;
        }
    }
    conditions.retain(|c| c.type_ != new.type_);
    conditions.push(new);
}

/// Every replica updated, running and available, for the current generation.
fn complete(d: &Deployment, status: &DeploymentStatus) -> bool {
    let want = d.spec.replicas;
    status.updated_replicas == want
        && status.replicas == want
        && status.available_replicas == want
        && status.observed_generation >= d.metadata.generation
}

/// Whether `after` moved on from `before`: more updated, ready or available replicas, or
/// fewer old ones.
fn progressed(before: &DeploymentStatus, after: &DeploymentStatus) -> bool {
    after.updated_replicas > before.updated_replicas
        || after.replicas - after.updated_replicas < before.replicas - before.updated_replicas
        || after.ready_replicas > before.ready_replicas
        || after.available_replicas > before.available_replicas
}

/// When the progress deadline of the rollout `progressing` reports passes.
fn deadline_of(d: &Deployment, progressing: &Condition) -> Option<Time> {
    let from = progressing.last_update_time.or(progressing.last_transition_time)?;
    Some(from + chrono::Duration::seconds(i64::from(d.progress_deadline_seconds())))
}

impl Sync<'_> {
    async fn run(&mut self) -> Result<Action, StoreError> {
        self.note_pause();
        if self.d.spec.paused || self.is_scaling_event() {
            self.sync_revision(false).await?;
            self.scale().await?;
            if self.d.spec.paused {
                self.clean_up().await?;
            }
            return self.finish(false).await;
        }
        if self.d.is_recreate() {
            self.recreate().await?;
        } else {
            self.roll().await?;
        }
        self.finish(true).await
    }

    fn all(&self) -> impl Iterator<Item = &ReplicaSet> {
        self.old.iter().chain(self.new.iter())
    }

    fn get(&self, which: Which) -> &ReplicaSet {
        match which {
            Which::New => self.new.as_ref().expect("the new set exists when named"),
            Which::Old(i) => &self.old[i],
        }
    }

    fn event(&self, reason: &str, message: String) -> Write {
        let involved = events::reference(&Object::Deployment(Box::new(self.d.clone())));
        events::record(events::new_event(involved, event_types::NORMAL, reason, message, SOURCE_DEPLOYMENT_CONTROLLER), self.now)
    }

    /// `Progressing` says when a rollout is paused and resumed (a reported timeout stays).
    fn note_pause(&mut self) {
        let current = find_condition(&self.d.status.conditions, reasons::PROGRESSING);
        if current.is_some_and(|c| c.reason == reasons::TIMED_OUT) {
            return;
        }
        let noted = current.is_some_and(|c| c.reason == reasons::PAUSED);
        let (reason, message) = match (self.d.spec.paused, noted) {
            (true, false) => (reasons::PAUSED, "Deployment is paused"),
            (false, true) => (reasons::RESUMED, "Deployment is resumed"),
            _ => return,
        };
        let paused = condition(reasons::PROGRESSING, conditions::UNKNOWN, reason, message.into(), self.now);
        set_deployment_condition(&mut self.d.status.conditions, paused);
    }

    /// A change of `replicas` alone: an active set was last sized for another count.
    fn is_scaling_event(&self) -> bool {
        self.all()
            .filter(|rs| rs.spec.replicas > 0)
            .any(|rs| count_annotation(rs, DESIRED_REPLICAS_ANNOTATION).is_some_and(|desired| desired != self.d.spec.replicas))
    }

    /// Sets the desired-replicas and max-replicas annotations a set is sized by; true when
    /// they changed.
    fn annotate_replicas(&self, rs: &mut ReplicaSet) -> bool {
        let desired = self.d.spec.replicas.to_string();
        let max = (self.d.spec.replicas + self.d.max_surge()).to_string();
        let annotations = &mut rs.metadata.annotations;
        let changed =
            annotations.get(DESIRED_REPLICAS_ANNOTATION) != Some(&desired) || annotations.get(MAX_REPLICAS_ANNOTATION) != Some(&max);
        annotations.insert(DESIRED_REPLICAS_ANNOTATION.into(), desired);
        annotations.insert(MAX_REPLICAS_ANNOTATION.into(), max);
        changed
    }

    /// The new set's annotations: the deployment's own, and the revision `revision` when
    /// its own is older; true when they changed.
    fn annotate_new(&self, rs: &mut ReplicaSet, new_revision: u64) -> bool {
        let mut changed = false;
        for (k, v) in &self.d.metadata.annotations {
            if !NOT_COPIED.contains(&k.as_str()) && rs.metadata.annotations.get(k) != Some(v) {
                rs.metadata.annotations.insert(k.clone(), v.clone());
                changed = true;
            }
        }
        if revision(rs) < new_revision {
            rs.metadata.annotations.insert(REVISION_ANNOTATION.into(), new_revision.to_string());
            changed = true;
        }
        changed
    }

    /// The replicas the new set may have now: `NewRSNewReplicas`.
    fn new_replicas(&self, new: &ReplicaSet) -> i32 {
        let want = self.d.spec.replicas;
        if self.d.is_recreate() {
            return want;
        }
        let current = replicas_of(&self.old) + new.spec.replicas;
        let max_total = want + self.d.max_surge();
        if current >= max_total {
            return new.spec.replicas;
        }
        new.spec.replicas + (max_total - current).min(want - new.spec.replicas)
    }

    /// Writes a set's spec and annotations (with an event), unless it changed since read.
    async fn update(&self, rs: ReplicaSet, event: Option<Write>) -> Result<ReplicaSet, StoreError> {
        let key = Key::new(Kind::ReplicaSet, &rs.metadata.namespace, &rs.metadata.name);
        let expected = rs.metadata.resource_version;
        let write = ops::modify::<ReplicaSet>(key.clone(), move |_, stored| {
            if stored.metadata.resource_version != expected {
                return Err(StoreError::conflict("the replica set changed during the sync"));
            }
            if stored.spec != rs.spec {
                stored.spec = rs.spec.clone();
                stored.metadata.generation += 1;
            }
            stored.metadata.annotations = rs.metadata.annotations.clone();
            Ok(())
        });
        let mut txn = Txn::new().with(write);
        if let Some(event) = event {
            txn.push(event);
        }
        let outcomes = self.store.commit(txn).await?;
        outcomes
            .first()
            .and_then(|o| o.object())
            .and_then(|o| as_rs(o).cloned())
            .ok_or_else(|| StoreError::NotFound { kind: Kind::ReplicaSet, key: key.key })
    }

    /// Sizes a set to `to` (and its replicas annotations); true when its size changed.
    async fn scale_to(&mut self, which: Which, to: i32) -> Result<bool, StoreError> {
        let rs = self.get(which);
        let resized = rs.spec.replicas != to;
        let mut copy = rs.clone();
        let annotated = self.annotate_replicas(&mut copy);
        if !resized && !annotated {
            return Ok(false);
        }
        copy.spec.replicas = to;
        let event = resized.then(|| {
            let direction = if to > rs.spec.replicas { "up" } else { "down" };
            self.event(
                "ScalingReplicaSet",
                format!("Scaled {direction} replica set {} from {} to {to}", rs.metadata.name, rs.spec.replicas),
            )
        });
        let updated = self.update(copy, event).await?;
        match which {
            Which::New => self.new = Some(updated),
            Which::Old(i) => self.old[i] = updated,
        }
        Ok(resized)
    }

    /// `getAllReplicaSetsAndSyncRevision`: the new set takes the next revision and the
    /// deployment's annotations, and is created when `create` and there is none.
    async fn sync_revision(&mut self, create: bool) -> Result<(), StoreError> {
        let new_revision = self.old.iter().map(revision).max().unwrap_or(0) + 1;
        if let Some(existing) = self.new.clone() {
            let mut rs = existing.clone();
            let mut changed = self.annotate_new(&mut rs, new_revision);
            if rs.spec.min_ready_seconds != self.d.spec.min_ready_seconds {
                rs.spec.min_ready_seconds = self.d.spec.min_ready_seconds;
                changed = true;
            }
            if changed {
                self.new = Some(self.update(rs, None).await?);
            }
            self.note_revision();
            if find_condition(&self.d.status.conditions, reasons::PROGRESSING).is_none() {
                let name = &existing.metadata.name;
                let found = condition(
                    reasons::PROGRESSING,
                    conditions::TRUE,
                    reasons::FOUND_NEW_RS,
                    format!("Found new replica set {name:?}"),
                    self.now,
                );
                set_deployment_condition(&mut self.d.status.conditions, found);
            }
            return Ok(());
        }
        if !create {
            return Ok(());
        }
        let d = &self.d;
        let hash = pod_template_hash(&d.spec.template, d.status.collision_count);
        let mut template = d.spec.template.clone();
        template.metadata.labels.insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
        let mut selector = d.spec.selector.clone();
        selector.match_labels.insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
        let mut rs = ReplicaSet {
            kind: Kind::ReplicaSet.as_str().into(),
            metadata: ObjectMeta {
                name: format!("{}-{hash}", d.metadata.name),
                namespace: d.metadata.namespace.clone(),
                labels: template.metadata.labels.clone(),
                owner_references: vec![controller_reference(Kind::Deployment, &d.metadata)],
                ..ObjectMeta::default()
            },
            spec: ReplicaSetSpec { replicas: 0, min_ready_seconds: d.spec.min_ready_seconds, selector, template },
            status: Default::default(),
        };
        rs.spec.replicas = self.new_replicas(&rs);
        self.annotate_new(&mut rs, new_revision);
        self.annotate_replicas(&mut rs);
        crate::resources::stamp_new(&mut rs, self.now);
        let replicas = rs.spec.replicas;
        let key = Key::new(Kind::ReplicaSet, &rs.metadata.namespace, &rs.metadata.name);
        let mut txn = Txn::new().with(ops::create(rs.clone()));
        if replicas > 0 {
            txn.push(self.event("ScalingReplicaSet", format!("Scaled up replica set {} from 0 to {replicas}", rs.metadata.name)));
        }
        let created = match self.store.commit(txn).await {
            Ok(outcomes) => outcomes.first().and_then(|o| o.object()).and_then(|o| as_rs(o).cloned()).unwrap_or(rs),
            Err(StoreError::AlreadyExists { .. }) => {
                let taken = self.store.get(&key).as_deref().and_then(as_rs).cloned();
                let ours = |rs: &ReplicaSet| {
                    rs.metadata.controller().is_some_and(|r| r.uid == self.d.metadata.uid)
                        && equal_ignoring_hash(&rs.spec.template, &self.d.spec.template)
                };
                match taken.filter(ours) {
                    Some(rs) => rs,
                    None => return Err(self.note_collision(&key).await),
                }
            }
            Err(e) => return Err(e),
        };
        let message = format!("Created new replica set {:?}", created.metadata.name);
        self.new = Some(created);
        self.note_revision();
        set_deployment_condition(
            &mut self.d.status.conditions,
            condition(reasons::PROGRESSING, conditions::TRUE, reasons::NEW_RS_CREATED, message, self.now),
        );
        Ok(())
    }

    /// The name of the new set is another's: the next hash is salted by one more collision.
    async fn note_collision(&self, key: &Key) -> StoreError {
        let expected = self.stored.metadata.resource_version;
        let write = ops::modify::<Deployment>(Key::of(&Object::Deployment(Box::new(self.stored.clone()))), move |_, d| {
            if d.metadata.resource_version != expected {
                return Err(StoreError::conflict("the deployment changed during the sync"));
            }
            d.status.collision_count = Some(d.status.collision_count.unwrap_or(0) + 1);
            Ok(())
        });
        match self.store.commit(Txn::new().with(write)).await {
            Ok(_) => StoreError::AlreadyExists { kind: key.kind, key: key.key.clone() },
            Err(e) => e,
        }
    }

    /// The deployment's revision is its new set's.
    fn note_revision(&mut self) {
        if let Some(revision) = self.new.as_ref().and_then(|rs| rs.metadata.annotations.get(REVISION_ANNOTATION)) {
            self.d.metadata.annotations.insert(REVISION_ANNOTATION.into(), revision.clone());
        }
    }

    /// `rolloutRolling`: up with the new set within the surge, down with the old ones
    /// within the unavailability, and old history cleaned once complete.
    async fn roll(&mut self) -> Result<(), StoreError> {
        self.sync_revision(true).await?;
        if self.reconcile_new().await? || self.reconcile_old().await? {
            return Ok(());
        }
        if complete(&self.d, &self.d.status) {
            self.clean_up().await?;
        }
        Ok(())
    }

    async fn reconcile_new(&mut self) -> Result<bool, StoreError> {
        let Some(new) = &self.new else { return Ok(false) };
        let want = self.d.spec.replicas;
        if new.spec.replicas == want {
            return Ok(false);
        }
        let to = if new.spec.replicas > want { want } else { self.new_replicas(new) };
        self.scale_to(Which::New, to).await
    }

    async fn reconcile_old(&mut self) -> Result<bool, StoreError> {
        let old_replicas = replicas_of(&self.old);
        if old_replicas == 0 {
            return Ok(false);
        }
        let new = self.new.as_ref();
        let all_replicas = old_replicas + new.map_or(0, |rs| rs.spec.replicas);
        let min_available = self.d.spec.replicas - self.d.max_unavailable();
        let new_unavailable = new.map_or(0, |rs| rs.spec.replicas - rs.status.available_replicas);
        let max_scaled_down = all_replicas - min_available - new_unavailable;
        if max_scaled_down <= 0 {
            return Ok(false);
        }
        let cleaned = self.clean_up_unhealthy(max_scaled_down).await?;
        let scaled = self.scale_down_old().await?;
        Ok(cleaned + scaled > 0)
    }

    /// Old sets' unavailable replicas go first, oldest set first, at most `max`.
    async fn clean_up_unhealthy(&mut self, max: i32) -> Result<i32, StoreError> {
        let mut total = 0;
        for i in 0..self.old.len() {
            if total >= max {
                break;
            }
            let rs = &self.old[i];
            if rs.spec.replicas == 0 || rs.spec.replicas == rs.status.available_replicas {
                continue;
            }
            let down = (max - total).min(rs.spec.replicas - rs.status.available_replicas);
            let to = rs.spec.replicas - down;
            self.scale_to(Which::Old(i), to).await?;
            total += down;
        }
        Ok(total)
    }

    /// Old sets shrink, oldest first, while the available pods stay at `replicas -
    /// maxUnavailable` or more.
    async fn scale_down_old(&mut self) -> Result<i32, StoreError> {
        let min_available = self.d.spec.replicas - self.d.max_unavailable();
        let available: i32 = self.all().map(|rs| rs.status.available_replicas).sum();
        if available <= min_available {
            return Ok(0);
        }
        let total = available - min_available;
        let mut done = 0;
        for i in 0..self.old.len() {
            if done >= total {
                break;
            }
            let replicas = self.old[i].spec.replicas;
            if replicas == 0 {
                continue;
            }
            let down = replicas.min(total - done);
            self.scale_to(Which::Old(i), replicas - down).await?;
            done += down;
        }
        Ok(done)
    }

    /// `rolloutRecreate`: every old set to zero, then, once no old pod runs, the new set
    /// at `replicas`.
    async fn recreate(&mut self) -> Result<(), StoreError> {
        self.sync_revision(false).await?;
        let mut scaled_down = false;
        for i in 0..self.old.len() {
            if self.old[i].spec.replicas > 0 {
                scaled_down |= self.scale_to(Which::Old(i), 0).await?;
            }
        }
        if scaled_down || self.old_pods_running() {
            return Ok(());
        }
        if self.new.is_none() {
            self.sync_revision(true).await?;
        }
        if self.new.is_some() {
            self.scale_to(Which::New, self.d.spec.replicas).await?;
        }
        if complete(&self.d, &self.d.status) {
            self.clean_up().await?;
        }
        Ok(())
    }

    /// Whether a pod of an old set exists that has not finished (terminating ones too).
    fn old_pods_running(&self) -> bool {
        if self.old.iter().map(|rs| rs.status.replicas).sum::<i32>() > 0 {
            return true;
        }
        self.old.iter().any(|rs| {
            let key = Key::new(Kind::ReplicaSet, &rs.metadata.namespace, &rs.metadata.name);
            self.store.pods_owned_by(&key).1.iter().any(|o| matches!(&**o, Object::Pod(p) if !p.status.phase.is_terminal()))
        })
    }

    /// The one set that should hold every replica when there is one: the only active set,
    /// or, with none active, the new one or the newest old one.
    fn active_or_latest(&self) -> Option<Which> {
        let active: Vec<Which> = (0..self.old.len())
            .map(Which::Old)
            .chain(self.new.as_ref().map(|_| Which::New))
            .filter(|w| self.get(*w).spec.replicas > 0)
            .collect();
        match active.len() {
            0 if self.new.is_some() => Some(Which::New),
            0 => self.old.iter().enumerate().max_by(|a, b| by_creation(a.1, b.1)).map(|(i, _)| Which::Old(i)),
            1 => Some(active[0]),
            _ => None,
        }
    }

    /// The new set holds every replica and all are available.
    fn saturated(&self) -> bool {
        let want = self.d.spec.replicas;
        self.new.as_ref().is_some_and(|rs| {
            count_annotation(rs, DESIRED_REPLICAS_ANNOTATION) == Some(want)
                && rs.spec.replicas == want
                && rs.status.available_replicas == want
        })
    }

    /// `scale`: a change of `replicas` goes to the one active set, or, mid-rollout, to every
    /// active set in proportion to its size (the largest takes what rounding leaves).
    async fn scale(&mut self) -> Result<(), StoreError> {
        let want = self.d.spec.replicas;
        if let Some(which) = self.active_or_latest() {
            if self.get(which).spec.replicas != want {
                self.scale_to(which, want).await?;
            }
            return Ok(());
        }
        if self.saturated() {
            for i in 0..self.old.len() {
                if self.old[i].spec.replicas > 0 {
                    self.scale_to(Which::Old(i), 0).await?;
                }
            }
            return Ok(());
        }
        if self.d.is_recreate() {
            return Ok(());
        }
        let mut active: Vec<Which> = (0..self.old.len())
            .map(Which::Old)
            .chain(self.new.as_ref().map(|_| Which::New))
            .filter(|w| self.get(*w).spec.replicas > 0)
            .collect();
        let allowed = if want > 0 { want + self.d.max_surge() } else { 0 };
        let to_add = allowed - active.iter().map(|w| self.get(*w).spec.replicas).sum::<i32>();
        // Largest first; among equals, newest first when growing and oldest first when shrinking.
        let rank = |w: &Which| {
            let rs = self.get(*w);
            (Reverse(rs.spec.replicas), rs.metadata.created_at, rs.metadata.name.clone())
        };
        active.sort_by(|a, b| {
            let (ra, rb) = (rank(a), rank(b));
            if to_add > 0 { ra.0.cmp(&rb.0).then_with(|| (rb.1, &rb.2).cmp(&(ra.1, &ra.2))) } else { ra.cmp(&rb) }
        });
        let mut added = 0;
        let mut sizes: Vec<i32> = Vec::with_capacity(active.len());
        for w in &active {
            let rs = self.get(*w);
            let share = if to_add == 0 { 0 } else { self.proportion(rs, to_add, added) };
            sizes.push(rs.spec.replicas + share);
            added += share;
        }
        if let Some(first) = sizes.first_mut()
            && to_add != 0
        {
            *first = (*first + to_add - added).max(0);
        }
        for (w, size) in active.into_iter().zip(sizes) {
            self.scale_to(w, size).await?;
        }
        Ok(())
    }

    /// A set's share of `to_add` replicas of which `added` are placed (`GetProportion`).
    fn proportion(&self, rs: &ReplicaSet, to_add: i32, added: i32) -> i32 {
        if rs.spec.replicas == 0 || to_add == added {
            return 0;
        }
        let allowed = to_add - added;
        let fraction = self.fraction(rs);
        if to_add > 0 { fraction.min(allowed) } else { fraction.max(allowed) }
    }

    /// How many replicas a set gains (or loses) when the deployment resizes: its size scaled
    /// from the `max-replicas` it was sized for to the new `replicas + maxSurge`.
    fn fraction(&self, rs: &ReplicaSet) -> i32 {
        let want = self.d.spec.replicas;
        if want == 0 {
            return -rs.spec.replicas;
        }
        let total = want + self.d.max_surge();
        let sized_for = count_annotation(rs, MAX_REPLICAS_ANNOTATION).unwrap_or(self.d.status.replicas);
        if sized_for <= 0 {
            return 0;
        }
        let size = f64::from(rs.spec.replicas) * f64::from(total) / f64::from(sized_for);
        size.round() as i32 - rs.spec.replicas
    }

    /// Deletes the oldest revisions at zero replicas beyond `revisionHistoryLimit`.
    async fn clean_up(&mut self) -> Result<(), StoreError> {
        let limit = self.d.revision_history_limit().max(0) as usize;
        let mut cleanable: Vec<&ReplicaSet> = self.old.iter().filter(|rs| rs.metadata.deletion_timestamp.is_none()).collect();
        if cleanable.len() <= limit {
            return Ok(());
        }
        let excess = cleanable.len() - limit;
        cleanable.sort_by_key(|rs| (revision(rs), rs.metadata.created_at, rs.metadata.name.clone()));
        let doomed: Vec<&ReplicaSet> = cleanable[..excess]
            .iter()
            .filter(|rs| rs.status.replicas == 0 && rs.spec.replicas == 0 && rs.metadata.generation <= rs.status.observed_generation)
            .copied()
            .collect();
        if doomed.is_empty() {
            return Ok(());
        }
        delete_sets(self.store, &doomed).await?;
        let gone: Vec<String> = doomed.iter().map(|rs| rs.metadata.name.clone()).collect();
        self.old.retain(|rs| !gone.contains(&rs.metadata.name));
        Ok(())
    }

    /// The status the sets add up to, with `Available` (`calculateStatus`).
    fn calculate_status(&self) -> DeploymentStatus {
        let available: i32 = self.all().map(|rs| rs.status.available_replicas).sum();
        let mut status = DeploymentStatus {
            replicas: self.all().map(|rs| rs.status.replicas).sum(),
            updated_replicas: self.new.as_ref().map_or(0, |rs| rs.status.replicas),
            ready_replicas: self.all().map(|rs| rs.status.ready_replicas).sum(),
            available_replicas: available,
            unavailable_replicas: (replicas_of(self.all()) - available).max(0),
            observed_generation: self.d.metadata.generation,
            conditions: self.d.status.conditions.clone(),
            collision_count: self.d.status.collision_count,
        };
        let want = self.d.spec.replicas;
        let availability = if available >= want - self.d.max_unavailable() {
            let message = "Deployment has minimum availability.".to_string();
            Condition {
                status: conditions::TRUE.into(),
                reason: reasons::MINIMUM_REPLICAS_AVAILABLE.into(),
                message,
                ..Condition::default()
            }
        } else {
            let message = self.short_of_availability(available);
            Condition {
                status: conditions::FALSE.into(),
                reason: reasons::MINIMUM_REPLICAS_UNAVAILABLE.into(),
                message,
                ..Condition::default()
            }
        };
        set_condition(&mut status.conditions, Condition { type_: reasons::AVAILABLE.into(), ..availability }, self.now);
        status
    }

    /// Why availability is short: how many replicas are available, and how many pods the
    /// scheduler cannot place, with its reason for one of them (Kubernetes says only that
    /// availability is short).
    fn short_of_availability(&self, available: i32) -> String {
        let mut message =
            format!("Deployment does not have minimum availability: {available} of {} replicas are available.", self.d.spec.replicas);
        let mut unschedulable = 0;
        let mut why = None;
        for rs in self.all().filter(|rs| rs.spec.replicas > 0) {
            let key = Key::new(Kind::ReplicaSet, &rs.metadata.namespace, &rs.metadata.name);
            for pod in self.store.pods_owned_by(&key).1 {
                if let Object::Pod(p) = &*pod
                    && p.spec.node_name.is_empty()
                    && p.metadata.deletion_timestamp.is_none()
                    && let Some(reason) = p.unschedulable_because()
                {
                    unschedulable += 1;
                    why.get_or_insert_with(|| reason.to_string());
                }
            }
        }
        if let Some(why) = why {
            let pods = if unschedulable == 1 { "1 pod".to_string() } else { format!("{unschedulable} pods") };
            message.push_str(&format!(" {pods} cannot be scheduled: {why}"));
        }
        message
    }

    /// Computes the status; with `progress`, the `Progressing` condition and its deadline
    /// and the sets' `ReplicaFailure` (`syncRolloutStatus`); writes the revision annotation
    /// and status when they changed, and asks to look again at the progress deadline.
    async fn finish(&mut self, progress: bool) -> Result<Action, StoreError> {
        let mut status = self.calculate_status();
        let mut action = Action::AwaitChange;
        if progress {
            self.note_progress(&mut status);
            let failure = self.all().find_map(|rs| find_condition(&rs.status.conditions, reasons::REPLICA_FAILURE)).cloned();
            match failure {
                Some(failure) => set_deployment_condition(&mut status.conditions, failure),
                None => status.conditions.retain(|c| c.type_ != reasons::REPLICA_FAILURE),
            }
            // Level-triggered: look again when the deadline passes, if nothing changes first.
            let current = find_condition(&self.d.status.conditions, reasons::PROGRESSING);
            if let Some(deadline) = current.filter(|c| c.reason != reasons::TIMED_OUT).and_then(|c| deadline_of(&self.d, c))
                && !complete(&self.d, &status)
            {
                let after = (deadline - self.now).to_std().unwrap_or(Duration::ZERO);
                action = Action::RequeueAfter(after + Duration::from_secs(1));
            }
        }
        let annotation = self.d.metadata.annotations.get(REVISION_ANNOTATION).cloned();
        if status == self.stored.status && annotation == self.stored.metadata.annotations.get(REVISION_ANNOTATION).cloned() {
            return Ok(action);
        }
        let expected = self.stored.metadata.resource_version;
        let key = Key::of(&Object::Deployment(Box::new(self.stored.clone())));
        let write = ops::modify::<Deployment>(key, move |_, d| {
            if d.metadata.resource_version != expected {
                return Err(StoreError::conflict("the deployment changed during the sync"));
            }
            d.status = status.clone();
            if let Some(revision) = &annotation {
                d.metadata.annotations.insert(REVISION_ANNOTATION.into(), revision.clone());
            }
            Ok(())
        });
        match self.store.commit(Txn::new().with(write)).await {
            Ok(_) | Err(StoreError::NotFound { .. }) => Ok(action),
            Err(e) => Err(e),
        }
    }

    /// `Progressing`: complete, progressing (its update time now), or past its deadline.
    fn note_progress(&self, status: &mut DeploymentStatus) {
        let current = find_condition(&self.d.status.conditions, reasons::PROGRESSING).cloned();
        let was_complete =
            status.replicas == status.updated_replicas && current.as_ref().is_some_and(|c| c.reason == reasons::NEW_RS_AVAILABLE);
        if was_complete {
            return;
        }
        let name = match &self.new {
            Some(rs) => format!("ReplicaSet {:?}", rs.metadata.name),
            None => format!("Deployment {:?}", self.d.metadata.name),
        };
        if complete(&self.d, status) {
            let done = condition(
                reasons::PROGRESSING,
                conditions::TRUE,
                reasons::NEW_RS_AVAILABLE,
                format!("{name} has successfully progressed."),
                self.now,
            );
            set_deployment_condition(&mut status.conditions, done);
        } else if progressed(&self.d.status, status) {
            let mut moving =
                condition(reasons::PROGRESSING, conditions::TRUE, reasons::RS_UPDATED, format!("{name} is progressing."), self.now);
            if let Some(current) = &current {
                if current.status == conditions::TRUE {
                    moving.last_transition_time = current.last_transition_time;
                }
                status.conditions.retain(|c| c.type_ != reasons::PROGRESSING);
            }
            set_deployment_condition(&mut status.conditions, moving);
        } else if self.timed_out(status) {
            let stuck = condition(
                reasons::PROGRESSING,
                conditions::FALSE,
                reasons::TIMED_OUT,
                format!("{name} has timed out progressing."),
                self.now,
            );
            set_deployment_condition(&mut status.conditions, stuck);
        }
    }

    fn timed_out(&self, status: &DeploymentStatus) -> bool {
        match find_condition(&status.conditions, reasons::PROGRESSING) {
            Some(c) if c.reason == reasons::NEW_RS_AVAILABLE => false,
            Some(c) if c.reason == reasons::TIMED_OUT => true,
            Some(c) => deadline_of(&self.d, c).is_some_and(|deadline| deadline < self.now),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use shared::model::{IntOrString, PodPhase, RollingUpdateDeployment};

    use super::super::fixtures;
    use super::super::replicaset::ReplicaSetController;
    use super::super::replicaset::tests::run_all;
    use super::*;
    use crate::resources::stamp_new;

    fn deployment(replicas: i32) -> Deployment {
        let mut d: Deployment = serde_json::from_str(include_str!("../../../examples/deployment.json")).unwrap();
        d.spec.replicas = replicas;
        stamp_new(&mut d, chrono::Utc::now());
        d
    }

    fn key() -> Key {
        Key::new(Kind::Deployment, "default", "web")
    }

    fn stored(ctx: &Context) -> Deployment {
        match ctx.store.get(&key()).as_deref() {
            Some(Object::Deployment(d)) => Deployment::clone(d),
            _ => panic!("deployment missing"),
        }
    }

    /// The deployment's sets, oldest first.
    fn sets(ctx: &Context) -> Vec<ReplicaSet> {
        let mut sets: Vec<ReplicaSet> = ctx.store.list(Kind::ReplicaSet, None).1.iter().filter_map(|o| as_rs(o).cloned()).collect();
        sets.sort_by(by_creation);
        sets
    }

    /// `spec.replicas` of each set, oldest first.
    fn sizes(ctx: &Context) -> Vec<i32> {
        sets(ctx).iter().map(|rs| rs.spec.replicas).collect()
    }

    /// Changes the deployment as a user's PUT does (a new generation).
    async fn edit(ctx: &Context, change: impl FnOnce(&mut Deployment)) {
        let mut d = stored(ctx);
        change(&mut d);
        d.metadata.generation += 1;
        fixtures::put(ctx, Object::Deployment(Box::new(d))).await;
    }

    fn new_image(d: &mut Deployment) {
        d.spec.template.spec.containers[0].image = format!("{}-next", d.spec.template.spec.containers[0].image);
    }

    /// One deployment sync, then one sync of each set, at `now`; the deployment's action.
    async fn step(ctx: &Context, now: Time) -> Action {
        let action = DeploymentController.reconcile(&key(), ctx, now).await.unwrap();
        let sets_controller = ReplicaSetController::default();
        sets_controller.all_keys(&*ctx.store);
        for rs in sets(ctx) {
            let rs_key = Key::new(Kind::ReplicaSet, &rs.metadata.namespace, &rs.metadata.name);
            sets_controller.reconcile(&rs_key, ctx, now).await.unwrap();
        }
        action
    }

    /// Steps until nothing changes; the last deployment action.
    async fn settle(ctx: &Context, now: Time) -> Action {
        for _ in 0..50 {
            let before = ctx.store.revision();
            let action = step(ctx, now).await;
            if ctx.store.revision() == before {
                return action;
            }
        }
        panic!("the controllers did not settle: {:?}", sizes(ctx));
    }

    /// Steps, with every pod running and ready, until the rollout completes; the sizes of
    /// the sets at each step.
    async fn roll_to_completion(ctx: &Context, now: Time) -> Vec<Vec<i32>> {
        let mut seen = Vec::new();
        for _ in 0..100 {
            settle(ctx, now).await;
            seen.push(sizes(ctx));
            run_all(ctx, now).await;
            settle(ctx, now).await;
            let d = stored(ctx);
            if complete(&d, &d.status) && sets(ctx).iter().filter(|rs| rs.spec.replicas > 0).count() == 1 {
                return seen;
            }
        }
        panic!("the rollout did not complete: {seen:?}");
    }

    fn progressing(ctx: &Context) -> Condition {
        find_condition(&stored(ctx).status.conditions, reasons::PROGRESSING).expect("a Progressing condition").clone()
    }

    fn rolling(d: &mut Deployment, surge: IntOrString, unavailable: IntOrString) {
        d.spec.strategy.rolling_update = Some(RollingUpdateDeployment { max_surge: Some(surge), max_unavailable: Some(unavailable) });
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deployment_of_thirty_thousand_replicas_gets_every_pod_through_its_replicaset() {
        let ctx = fixtures::context().await;
        let shutdown = tokio_util::sync::CancellationToken::new();
        tokio::spawn(super::super::run(DeploymentController, ctx.clone(), Duration::from_secs(30), shutdown.clone()));
        tokio::spawn(super::super::run(ReplicaSetController::default(), ctx.clone(), Duration::from_secs(30), shutdown.clone()));
        fixtures::put(&ctx, Object::Deployment(Box::new(deployment(30_000)))).await;
        let began = std::time::Instant::now();
        loop {
            let d = stored(&ctx);
            if d.status.replicas == 30_000 && d.status.updated_replicas == 30_000 {
                assert!(find_condition(&d.status.conditions, reasons::REPLICA_FAILURE).is_none(), "{:?}", d.status);
                break;
            }
            assert!(began.elapsed() < Duration::from_secs(300), "{} of 30000 pods after 5 minutes", ctx.store.count(Kind::Pod));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(ctx.store.count(Kind::Pod), 30_000, "no more than asked");
        assert_eq!(sizes(&ctx), [30_000]);
        shutdown.cancel();
    }

    #[tokio::test]
    async fn a_new_deployment_gets_one_replicaset_named_by_its_template_hash() {
        let ctx = fixtures::context().await;
        let d = deployment(3);
        fixtures::put(&ctx, Object::Deployment(Box::new(d.clone()))).await;
        let now = chrono::Utc::now();
        step(&ctx, now).await;
        assert_eq!(progressing(&ctx).reason, reasons::NEW_RS_CREATED);
        settle(&ctx, now).await;
        let [rs] = sets(&ctx).try_into().expect("one set");
        let hash = pod_template_hash(&d.spec.template, None);
        assert_eq!(rs.metadata.name, format!("web-{hash}"));
        assert_eq!(rs.spec.selector.match_labels[POD_TEMPLATE_HASH_LABEL], hash);
        assert_eq!(rs.spec.template.metadata.labels[POD_TEMPLATE_HASH_LABEL], hash);
        assert_eq!(rs.metadata.controller().map(|r| (r.kind.as_str(), r.uid.as_str())), Some(("Deployment", d.metadata.uid.as_str())));
        assert_eq!(rs.spec.replicas, 3);
        assert_eq!(rs.metadata.annotations[REVISION_ANNOTATION], "1");
        assert_eq!(rs.metadata.annotations[DESIRED_REPLICAS_ANNOTATION], "3");
        assert_eq!(rs.metadata.annotations[MAX_REPLICAS_ANNOTATION], "4", "3 + 25 % rounded up");
        let pods = fixtures::pods(&ctx);
        assert_eq!(pods.len(), 3);
        assert!(
            pods.iter().all(|p| p.metadata.name.starts_with(&format!("web-{hash}-")) && p.metadata.labels[POD_TEMPLATE_HASH_LABEL] == hash)
        );
        let written = stored(&ctx);
        assert_eq!(written.metadata.annotations[REVISION_ANNOTATION], "1");
        assert_eq!((written.status.replicas, written.status.updated_replicas, written.status.unavailable_replicas), (3, 3, 3));
        assert_eq!(progressing(&ctx).reason, reasons::RS_UPDATED);

        run_all(&ctx, now).await;
        settle(&ctx, now).await;
        let done = stored(&ctx).status;
        assert_eq!((done.ready_replicas, done.available_replicas, done.unavailable_replicas), (3, 3, 0));
        assert_eq!(progressing(&ctx).reason, reasons::NEW_RS_AVAILABLE);
        let available = find_condition(&done.conditions, reasons::AVAILABLE).unwrap();
        assert_eq!((available.status.as_str(), available.reason.as_str()), ("True", "MinimumReplicasAvailable"));
    }

    #[tokio::test]
    async fn a_rolling_update_surges_up_and_takes_down_within_the_limits() {
        let ctx = fixtures::context().await;
        let mut d = deployment(10);
        d.set_defaults();
        fixtures::put(&ctx, Object::Deployment(Box::new(d))).await;
        let now = chrono::Utc::now();
        settle(&ctx, now).await;
        run_all(&ctx, now).await;
        settle(&ctx, now).await;

        edit(&ctx, new_image).await;
        // 25 % of 10: a surge of 3 (rounded up), 2 unavailable (rounded down).
        step(&ctx, now).await;
        assert_eq!(sizes(&ctx), [8, 3], "the new set surges to 13 pods in all, the old goes down to 10 - 2 available");
        settle(&ctx, now).await;
        assert_eq!(sizes(&ctx), [8, 5], "the new set fills the surge the old left");
        settle(&ctx, now).await;
        assert_eq!(sizes(&ctx), [8, 5], "nothing moves until new pods are available");
        assert_eq!(progressing(&ctx).reason, reasons::RS_UPDATED);

        let seen = roll_to_completion(&ctx, now).await;
        for sizes in &seen {
            assert!(sizes.iter().sum::<i32>() <= 13, "never more than 10 + 3: {seen:?}");
        }
        assert_eq!(sizes(&ctx), [0, 10]);
        let d = stored(&ctx);
        assert_eq!(d.metadata.annotations[REVISION_ANNOTATION], "2");
        assert_eq!((d.status.updated_replicas, d.status.replicas, d.status.available_replicas), (10, 10, 10));
        assert_eq!(progressing(&ctx).reason, reasons::NEW_RS_AVAILABLE);
    }

    #[tokio::test]
    async fn surge_and_unavailability_resolve_from_counts_and_percentages() {
        let now = chrono::Utc::now();
        for (surge, unavailable, first) in [
            (IntOrString::Int(1), IntOrString::Int(0), [4, 1]),
            (IntOrString::Int(0), IntOrString::Int(1), [3, 1]),
            (IntOrString::String("50%".into()), IntOrString::String("50%".into()), [2, 4]),
            // 10 % of 4 rounds up to a surge of 1 and down to 0 unavailable.
            (IntOrString::String("10%".into()), IntOrString::String("10%".into()), [4, 1]),
            // Both 0 after rounding: one pod may be unavailable.
            (IntOrString::String("0%".into()), IntOrString::String("10%".into()), [3, 1]),
        ] {
            let ctx = fixtures::context().await;
            let mut d = deployment(4);
            rolling(&mut d, surge.clone(), unavailable.clone());
            fixtures::put(&ctx, Object::Deployment(Box::new(d))).await;
            settle(&ctx, now).await;
            run_all(&ctx, now).await;
            settle(&ctx, now).await;
            edit(&ctx, new_image).await;
            settle(&ctx, now).await;
            let mut sizes = sizes(&ctx);
            if sizes.len() == 1 {
                sizes.push(0);
            }
            assert_eq!(sizes, first, "maxSurge {surge}, maxUnavailable {unavailable}");
        }
    }

    #[tokio::test]
    async fn scaling_during_a_rollout_spreads_the_change_in_proportion() {
        let ctx = fixtures::context().await;
        fixtures::put(&ctx, Object::Deployment(Box::new(deployment(10)))).await;
        let now = chrono::Utc::now();
        settle(&ctx, now).await;
        run_all(&ctx, now).await;
        settle(&ctx, now).await;
        edit(&ctx, new_image).await;
        settle(&ctx, now).await;
        assert_eq!(sizes(&ctx), [8, 5]);

        edit(&ctx, |d| d.spec.replicas = 20).await;
        step(&ctx, now).await;
        // 20 + 5 allowed, each set sized for 13: the old 8 × 25/13 → 15, the new 5 × 25/13 → 10.
        assert_eq!(sizes(&ctx), [15, 10]);
        let events = ctx.store.list(Kind::Event, Some("default")).1;
        let scaled = events.iter().find_map(|e| match &**e {
            Object::Event(e) if e.reason == "ScalingReplicaSet" => Some(e.message.clone()),
            _ => None,
        });
        let new = &sets(&ctx)[1].metadata.name;
        assert_eq!(scaled, Some(format!("Scaled up replica set {new} from 5 to 10")), "the last of the scalings");

        edit(&ctx, |d| d.spec.replicas = 5).await;
        step(&ctx, now).await;
        // 5 + 2 allowed: 15 × 7/25 → 4, 10 × 7/25 → 3.
        assert_eq!(sizes(&ctx), [4, 3]);

        edit(&ctx, |d| d.spec.replicas = 6).await;
        step(&ctx, now).await;
        // 6 + 2 allowed, one to add: 4 × 8/7 → 5 (+1) takes it; the new set's share is spent.
        assert_eq!(sizes(&ctx), [5, 3]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_rollout_that_makes_no_progress_exceeds_its_deadline() {
        let ctx = fixtures::context().await;
        let mut d = deployment(2);
        d.spec.progress_deadline_seconds = Some(60);
        fixtures::put(&ctx, Object::Deployment(Box::new(d))).await;
        let t0 = chrono::Utc::now();
        settle(&ctx, t0).await;
        run_all(&ctx, t0).await;
        settle(&ctx, t0).await;
        edit(&ctx, new_image).await;
        // The new pods never become ready (an image that crash-loops).
        let action = settle(&ctx, t0).await;
        assert_eq!(progressing(&ctx).reason, reasons::RS_UPDATED);
        assert_eq!(action, Action::RequeueAfter(Duration::from_secs(61)), "a look again when the deadline passes");
        settle(&ctx, t0 + chrono::Duration::seconds(30)).await;
        assert_eq!(progressing(&ctx).reason, reasons::RS_UPDATED, "not yet");
        let action = settle(&ctx, t0 + chrono::Duration::seconds(61)).await;
        let stuck = progressing(&ctx);
        assert_eq!((stuck.status.as_str(), stuck.reason.as_str()), ("False", "ProgressDeadlineExceeded"));
        assert!(stuck.message.ends_with("has timed out progressing."), "{}", stuck.message);
        assert_eq!(action, Action::AwaitChange);
        assert_eq!(sizes(&ctx), [2, 1], "the old pods stay: maxUnavailable 0 of 2");
    }

    #[tokio::test]
    async fn recreate_scales_the_old_set_to_zero_and_waits_for_its_pods_to_go() {
        let ctx = fixtures::context().await;
        fixtures::node_with_ready(&ctx, "n1", conditions::TRUE).await;
        let mut d = deployment(3);
        d.spec.strategy.type_ = shared::rollout::RECREATE.into();
        fixtures::put(&ctx, Object::Deployment(Box::new(d))).await;
        let now = chrono::Utc::now();
        settle(&ctx, now).await;
        run_all(&ctx, now).await;
        settle(&ctx, now).await;
        edit(&ctx, new_image).await;
        settle(&ctx, now).await;
        assert_eq!(sizes(&ctx), [0], "no new set while old pods run");
        let terminating = fixtures::pods(&ctx);
        assert_eq!(terminating.len(), 3);
        assert!(terminating.iter().all(|p| p.metadata.deletion_timestamp.is_some()), "the old pods stop gracefully");
        for pod in terminating {
            ctx.store.commit(Txn::new().with(ops::delete(Key::new(Kind::Pod, "default", &pod.metadata.name), 0))).await.unwrap();
        }
        settle(&ctx, now).await;
        assert_eq!(sizes(&ctx), [0, 3]);
        assert_eq!(fixtures::pods(&ctx).len(), 3);
    }

    #[tokio::test]
    async fn old_sets_at_zero_beyond_the_revision_history_limit_are_deleted() {
        let ctx = fixtures::context().await;
        let mut d = deployment(2);
        d.spec.revision_history_limit = Some(1);
        fixtures::put(&ctx, Object::Deployment(Box::new(d))).await;
        let now = chrono::Utc::now();
        roll_to_completion(&ctx, now).await;
        for _ in 0..3 {
            edit(&ctx, new_image).await;
            roll_to_completion(&ctx, now).await;
        }
        let mut revisions: Vec<u64> = sets(&ctx).iter().map(revision).collect();
        revisions.sort();
        assert_eq!(revisions, [3, 4], "the newest and one old revision");
        assert_eq!(stored(&ctx).metadata.annotations[REVISION_ANNOTATION], "4");
    }

    #[tokio::test]
    async fn a_paused_deployment_scales_but_rolls_nothing_out() {
        let ctx = fixtures::context().await;
        fixtures::put(&ctx, Object::Deployment(Box::new(deployment(2)))).await;
        let now = chrono::Utc::now();
        settle(&ctx, now).await;
        edit(&ctx, |d| {
            d.spec.paused = true;
            new_image(d);
            d.spec.replicas = 4;
        })
        .await;
        settle(&ctx, now).await;
        assert_eq!(sizes(&ctx), [4], "scaled, and no new set");
        let paused = progressing(&ctx);
        assert_eq!((paused.status.as_str(), paused.reason.as_str()), ("Unknown", "DeploymentPaused"));
        edit(&ctx, |d| d.spec.paused = false).await;
        settle(&ctx, now).await;
        assert_eq!(sizes(&ctx).len(), 2, "resumed, the rollout begins");
        assert_ne!(progressing(&ctx).reason, reasons::PAUSED);
    }

    #[tokio::test]
    async fn undo_makes_the_old_set_new_again_under_the_next_revision() {
        let ctx = fixtures::context().await;
        fixtures::put(&ctx, Object::Deployment(Box::new(deployment(2)))).await;
        let now = chrono::Utc::now();
        roll_to_completion(&ctx, now).await;
        let first = sets(&ctx)[0].clone();
        edit(&ctx, new_image).await;
        roll_to_completion(&ctx, now).await;
        // What `kubectl rollout undo` patches in: the old set's template without its hash.
        let mut template = first.spec.template.clone();
        template.metadata.labels.remove(POD_TEMPLATE_HASH_LABEL);
        edit(&ctx, |d| d.spec.template = template).await;
        roll_to_completion(&ctx, now).await;
        let sets = sets(&ctx);
        assert_eq!(sets.len(), 2, "no third set");
        assert_eq!((sets[0].metadata.name.as_str(), revision(&sets[0]), sets[0].spec.replicas), (first.metadata.name.as_str(), 3, 2));
        assert_eq!(stored(&ctx).metadata.annotations[REVISION_ANNOTATION], "3");
    }

    #[tokio::test]
    async fn deleting_the_deployment_deletes_its_sets_and_then_their_pods() {
        let ctx = fixtures::context().await;
        fixtures::put(&ctx, Object::Deployment(Box::new(deployment(2)))).await;
        let now = chrono::Utc::now();
        settle(&ctx, now).await;
        let unowned = fixtures::pod("unowned", &[("app", "web")], "", PodPhase::Pending);
        fixtures::put(&ctx, Object::Pod(unowned)).await;
        let rs_key = Key::of(&Object::ReplicaSet(Box::new(sets(&ctx)[0].clone())));
        ctx.store.commit(Txn::new().with(ops::delete(key(), 0))).await.unwrap();
        assert_eq!(DeploymentController.all_keys(&*ctx.store), vec![key()], "the owner of orphaned sets is still visited");
        DeploymentController.reconcile(&key(), &ctx, now).await.unwrap();
        assert!(sets(&ctx).is_empty());
        ReplicaSetController::default().reconcile(&rs_key, &ctx, now).await.unwrap();
        let left: Vec<String> = fixtures::pods(&ctx).iter().map(|p| p.metadata.name.clone()).collect();
        assert_eq!(left, vec!["unowned".to_string()]);
    }

    #[tokio::test]
    async fn pods_a_deployment_controlled_itself_go_to_its_new_set_when_they_run_its_template() {
        let ctx = fixtures::context().await;
        let d = deployment(3);
        fixtures::put(&ctx, Object::Deployment(Box::new(d.clone()))).await;
        let legacy = |name: &str, image: &str| {
            let mut pod = fixtures::pod(name, &[("app", "web")], "n1", PodPhase::Running);
            pod.spec = d.spec.template.spec.clone();
            pod.spec.containers[0].image = image.into();
            pod.spec.node_name = "n1".into();
            pod.metadata.owner_references = vec![controller_reference(Kind::Deployment, &d.metadata)];
            pod
        };
        for pod in [legacy("current-1", "minimal"), legacy("current-2", "minimal"), legacy("outdated", "older")] {
            fixtures::put(&ctx, Object::Pod(pod)).await;
        }
        settle(&ctx, chrono::Utc::now()).await;
        let rs = sets(&ctx).pop().expect("a set");
        let pods = fixtures::pods(&ctx);
        let names: Vec<&str> = pods.iter().map(|p| p.metadata.name.as_str()).collect();
        assert_eq!(pods.len(), 3, "{names:?}");
        assert!(names.contains(&"current-1") && names.contains(&"current-2") && !names.contains(&"outdated"), "{names:?}");
        assert!(pods.iter().all(|p| p.metadata.controller().is_some_and(|r| r.uid == rs.metadata.uid)), "all the new set's");
    }
}
