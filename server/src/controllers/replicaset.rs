//! The ReplicaSet controller: keeps `spec.replicas` active pods from the template, named
//! `<replicaset>-<5 random characters>` and owned by the ReplicaSet (controller reference);
//! adopts orphan pods its selector matches and releases owned pods it no longer matches (as
//! Kubernetes' `controller_ref_manager`); replaces pods that finished, scales down newest
//! and least advanced first, deletes the pods of a deleted ReplicaSet (the cascade's last
//! step), and writes its status once a reconcile. Pods are deleted gracefully; terminating
//! pods no longer count as replicas. As Kubernetes does, pods are created and deleted in
//! batches that grow (1, 2, 4, …, at most [`BURST_REPLICAS`] a reconcile), each pod in its
//! own write, so that a set of any size fills and one failure stops only what comes after it.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use shared::model::{
    Condition, Kind, Object, ObjectMeta, OwnerReference, Pod, PodPhase, ReplicaSet, ReplicaSetStatus, Time, conditions, event_types,
    find_condition,
};
use shared::rollout::{SAFE_ALPHABET, reasons};

use super::{Action, Context, Controller, Result, store_error};
use crate::events::{self, SOURCE_REPLICASET_CONTROLLER};
use crate::ops;
use crate::resources::stamp_new;
use crate::store::{EventType, Key, Store, StoreError, StoreEvent, Txn, Write, pod_owner};

#[derive(Default)]
pub struct ReplicaSetController {
    /// Orphan pods (no controller, not terminating) by namespace, as the watch and each
    /// resync's full list show them (an informer's index): what a set may adopt, found
    /// without reading every pod of its namespace in each reconcile.
    orphans: Mutex<HashMap<String, BTreeSet<String>>>,
}

impl ReplicaSetController {
    fn orphans(&self) -> MutexGuard<'_, HashMap<String, BTreeSet<String>>> {
        self.orphans.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn is_orphan(pod: &Pod) -> bool {
    pod.metadata.controller().is_none() && pod.metadata.deletion_timestamp.is_none()
}

/// Pods one reconcile creates or deletes at most (Kubernetes' `burstReplicas`); the changes
/// it makes bring the next reconcile, which goes on.
pub const BURST_REPLICAS: usize = 500;
/// How often a pod whose random name is taken is tried again with another name.
const NAME_TRIES: usize = 5;

fn random_suffix() -> String {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    bytes.iter().take(5).map(|b| SAFE_ALPHABET[*b as usize % SAFE_ALPHABET.len()] as char).collect()
}

/// Scale-down order: unbound before bound, Pending before Running, not ready before ready,
/// newest first.
fn deletion_rank(pod: &Pod) -> (bool, bool, bool, std::cmp::Reverse<Option<Time>>) {
    (pod.is_bound(), pod.status.phase == PodPhase::Running, pod.is_ready(), std::cmp::Reverse(pod.metadata.created_at))
}

/// The most of a generated pod name that comes from its owner's (`<name>-`), as
/// Kubernetes' name generator keeps it: with the suffix, at most 63 characters, however
/// long the owner's name (up to 253) is.
const GENERATED_BASE_LENGTH: usize = 58;

/// The controller reference an owner puts on what it owns.
pub(crate) fn controller_reference(kind: Kind, meta: &ObjectMeta) -> OwnerReference {
    OwnerReference::controlled_by(kind.as_str(), meta)
}

pub(crate) fn pod_named(rs: &ReplicaSet, suffix: &str, now: Time) -> Pod {
    let template = &rs.spec.template;
    let mut base = format!("{}-", rs.metadata.name);
    // Names are ASCII (validated), so a byte is a character.
    base.truncate(GENERATED_BASE_LENGTH);
    let mut pod = Pod {
        kind: "Pod".into(),
        metadata: ObjectMeta {
            name: format!("{base}{suffix}"),
            namespace: rs.metadata.namespace.clone(),
            labels: template.metadata.labels.clone(),
            annotations: template.metadata.annotations.clone(),
            owner_references: vec![controller_reference(Kind::ReplicaSet, &rs.metadata)],
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: Default::default(),
    };
    pod.spec.node_name.clear();
    stamp_new(&mut pod, now);
    pod
}

fn rs_event(rs: &ReplicaSet, type_: &str, reason: &str, message: String, now: Time) -> Write {
    let involved = events::reference(&Object::ReplicaSet(Box::new(rs.clone())));
    events::record(events::new_event(involved, type_, reason, message, SOURCE_REPLICASET_CONTROLLER), now)
}

fn as_pod(object: &Object) -> Option<&Pod> {
    match object {
        Object::Pod(p) => Some(p),
        _ => None,
    }
}

/// The ReplicaSet that controls a pod, if one does.
fn replicaset_of(object: &Object) -> Option<Key> {
    pod_owner(object).filter(|key| key.kind == Kind::ReplicaSet)
}

/// When a ready pod has been ready for `min_ready_seconds`: Kubernetes' `IsPodAvailable`.
/// A pod whose readiness has no time counts from its creation.
fn available_at(pod: &Pod, min_ready_seconds: i32) -> Option<Time> {
    let ready_since =
        find_condition(&pod.status.conditions, conditions::READY).and_then(|c| c.last_transition_time).or(pod.metadata.created_at)?;
    Some(ready_since + chrono::Duration::seconds(i64::from(min_ready_seconds)))
}

impl Controller for ReplicaSetController {
    const NAME: &'static str = "replicaset-controller";

    fn watched(&self) -> &'static [Kind] {
        &[Kind::ReplicaSet, Kind::Pod]
    }

    fn keys_for(&self, store: &dyn Store, event: &StoreEvent) -> Vec<Key> {
        match &*event.object {
            Object::ReplicaSet(_) => vec![Key::of(&event.object)],
            Object::Pod(pod) => {
                let mut keys: Vec<Key> = replicaset_of(&event.object).into_iter().collect();
                // The owner a pod was released from, and the sets that may adopt an orphan.
                if let Some(before) = event.prev.as_deref().and_then(replicaset_of)
                    && !keys.contains(&before)
                {
                    keys.push(before);
                }
                let (namespace, name) = (&pod.metadata.namespace, &pod.metadata.name);
                let orphan = event.type_ != EventType::Deleted && is_orphan(pod);
                let mut orphans = self.orphans();
                if orphan {
                    orphans.entry(namespace.clone()).or_default().insert(name.clone());
                } else if let Some(names) = orphans.get_mut(namespace) {
                    names.remove(name);
                    if names.is_empty() {
                        orphans.remove(namespace);
                    }
                }
                drop(orphans);
                if orphan {
                    let sets = store.list(Kind::ReplicaSet, Some(&pod.metadata.namespace)).1;
                    keys.extend(sets.iter().filter_map(|o| match &**o {
                        Object::ReplicaSet(rs) if rs.spec.selector.matches(&pod.metadata.labels) => Some(Key::of(o)),
                        _ => None,
                    }));
                }
                keys
            }
            _ => Vec::new(),
        }
    }

    fn all_keys(&self, store: &dyn Store) -> Vec<Key> {
        let mut keys: Vec<Key> = store.list(Kind::ReplicaSet, None).1.iter().map(|rs| Key::of(rs)).collect();
        // Owners of pods whose ReplicaSet is gone: the cascade after a crash or a missed
        // event. The orphans are learnt afresh from the same list.
        let mut orphans: HashMap<String, BTreeSet<String>> = HashMap::new();
        for pod in store.list(Kind::Pod, None).1 {
            if let Some(owner) = replicaset_of(&pod)
                && store.get(&owner).is_none()
            {
                keys.push(owner);
            }
            if let Object::Pod(p) = &*pod
                && is_orphan(p)
            {
                orphans.entry(p.metadata.namespace.clone()).or_default().insert(p.metadata.name.clone());
            }
        }
        *self.orphans() = orphans;
        keys.sort();
        keys.dedup();
        keys
    }

    async fn reconcile(&self, key: &Key, ctx: &Context, now: Time) -> Result<Action> {
        let err = |e| store_error(Self::NAME, key, e);
        let store = &ctx.store;
        let grace = ctx.config.node_monitor_grace;
        let (namespace, name) = key.namespace_and_name();
        let rs = match store.get(key).as_deref() {
            Some(Object::ReplicaSet(rs)) if rs.metadata.deletion_timestamp.is_none() => Some(ReplicaSet::clone(rs)),
            _ => None,
        };
        // Terminating pods are on their way out: they are no replicas (as in Kubernetes), so
        // their replacements start at once, and nothing deletes them again. Read through the
        // owner index and borrowed: a reconcile neither visits other sets' pods nor copies its own.
        let listed = store.pods_owned_by(key).1;
        let owned: Vec<&Pod> = listed.iter().filter_map(|o| as_pod(o)).filter(|p| p.metadata.deletion_timestamp.is_none()).collect();

        let Some(rs) = rs else {
            // Cascade: the set is gone, so are its pods, each gracefully, a burst at a time
            // (the deletions bring the next reconcile).
            if !owned.is_empty() {
                let burst = &owned[..owned.len().min(BURST_REPLICAS)];
                delete_ignoring_gone(store, burst, now, grace).await.map_err(err)?;
                tracing::info!("deleting {} of the {} pods of deleted replica set {namespace}/{name}", burst.len(), owned.len());
            }
            return Ok(Action::AwaitChange);
        };

        // Pods of an earlier set with the same name are not ours: delete them. Ours that the
        // selector no longer matches are let go; orphans it matches are taken in.
        let (mine, strays): (Vec<&Pod>, Vec<&Pod>) =
            owned.into_iter().partition(|p| p.metadata.controller().is_some_and(|r| r.uid == rs.metadata.uid));
        let (mine, unmatched): (Vec<&Pod>, Vec<&Pod>) = mine.into_iter().partition(|p| rs.spec.selector.matches(&p.metadata.labels));
        release(store, &rs, &unmatched).await.map_err(err)?;
        let candidates: Vec<String> = self.orphans().get(namespace).map(|names| names.iter().cloned().collect()).unwrap_or_default();
        let adopted = adopt(store, &rs, &candidates).await.map_err(err)?;
        let (mut active, finished): (Vec<&Pod>, Vec<&Pod>) =
            mine.into_iter().chain(adopted.iter()).partition(|p| !p.status.phase.is_terminal());
        let want = rs.spec.replicas.max(0) as usize;
        let mut txn = Txn::new();

        for pod in strays.iter().chain(finished.iter()) {
            txn.push(delete_pod(pod, pod.metadata.resource_version, now, grace));
        }
        if !finished.is_empty() {
            let message = format!("Deleted finished pods {} to replace them", names(&finished));
            txn.push(rs_event(&rs, event_types::NORMAL, "ReplacingFinishedPods", message, now));
        }
        let mut created = Vec::new();
        let mut failure = None;
        if active.len() > want {
            active.sort_by_key(|p| deletion_rank(p));
            let excess: Vec<&Pod> = active.drain(..(active.len() - want).min(BURST_REPLICAS)).collect();
            delete_ignoring_gone(store, &excess, now, grace).await.map_err(err)?;
            txn.push(rs_event(&rs, event_types::NORMAL, "SuccessfulDelete", format!("Deleted pods: {}", names(&excess)), now));
        }
        if !txn.writes.is_empty() {
            store.commit(txn).await.map_err(err)?;
        }
        if active.len() < want {
            let missing = (want - active.len()).min(BURST_REPLICAS);
            let outcome = create_pods(store, &rs, missing, now).await;
            created = outcome.0;
            failure = outcome.1;
            let mut report = Txn::new();
            if !created.is_empty() {
                let message =
                    format!("Created {} ({} of {want} now): {}", pods(created.len()), active.len() + created.len(), list(&created));
                report.push(rs_event(&rs, event_types::NORMAL, "SuccessfulCreate", message, now));
            }
            if let Some(e) = &failure {
                let message = format!("Error creating pods ({} of {want} exist): {e}", active.len() + created.len());
                report.push(rs_event(&rs, event_types::WARNING, reasons::FAILED_CREATE, message, now));
            }
            if !report.writes.is_empty() {
                store.commit(report).await.map_err(err)?;
            }
        }

        let (status, next_available) = status_of(&rs, &active, created.len(), failure.as_ref(), now);
        if status != rs.status {
            let expected = rs.metadata.resource_version;
            let write = ops::modify::<ReplicaSet>(key.clone(), move |_, rs| {
                if rs.metadata.resource_version != expected {
                    return Err(StoreError::conflict("the replica set changed during the reconcile"));
                }
                rs.status = status.clone();
                Ok(())
            });
            match store.commit(Txn::new().with(write)).await {
                Ok(_) | Err(StoreError::NotFound { .. }) => {}
                // A newer version will be reconciled from its own watch event.
                Err(StoreError::Conflict(_)) => return Ok(Action::AwaitChange),
                Err(e) => return Err(err(e)),
            }
        }
        match (failure, next_available) {
            // The error policy backs the set off before the next try.
            (Some(e), _) => Err(err(e)),
            // A ready pod becomes available once it has been ready for min_ready_seconds.
            (None, Some(at)) => Ok(Action::RequeueAfter((at - now).to_std().unwrap_or(Duration::ZERO) + Duration::from_millis(1))),
            (None, None) => Ok(Action::AwaitChange),
        }
    }
}

/// The status of `rs` with `active` pods and `created` more, and when the next ready pod
/// becomes available, if one is waiting for `min_ready_seconds`.
fn status_of(
    rs: &ReplicaSet,
    active: &[&Pod],
    created: usize,
    failure: Option<&StoreError>,
    now: Time,
) -> (ReplicaSetStatus, Option<Time>) {
    let template_labels = &rs.spec.template.metadata.labels;
    let fully_labeled = active.iter().filter(|p| template_labels.iter().all(|(k, v)| p.metadata.labels.get(k) == Some(v))).count();
    let ready: Vec<&&Pod> = active.iter().filter(|p| p.is_ready()).collect();
    let mut available = 0;
    let mut next_available: Option<Time> = None;
    for pod in &ready {
        match available_at(pod, rs.spec.min_ready_seconds) {
            Some(at) if rs.spec.min_ready_seconds > 0 && at > now => {
                next_available = Some(next_available.map_or(at, |next| next.min(at)));
            }
            _ => available += 1,
        }
    }
    let mut conditions: Vec<Condition> = rs.status.conditions.iter().filter(|c| c.type_ != reasons::REPLICA_FAILURE).cloned().collect();
    if let Some(e) = failure {
        let kept = find_condition(&rs.status.conditions, reasons::REPLICA_FAILURE).cloned();
        conditions.push(kept.unwrap_or_else(|| Condition {
            type_: reasons::REPLICA_FAILURE.into(),
            status: conditions::TRUE.into(),
            reason: reasons::FAILED_CREATE.into(),
            message: e.to_string(),
            last_transition_time: Some(now),
            ..Condition::default()
        }));
    }
    let status = ReplicaSetStatus {
        replicas: (active.len() + created) as i32,
        fully_labeled_replicas: (fully_labeled + created) as i32,
        ready_replicas: ready.len() as i32,
        available_replicas: available,
        observed_generation: rs.metadata.generation,
        conditions,
    };
    (status, next_available)
}

/// Takes the controller reference of `rs` off pods its selector no longer matches.
async fn release(store: &Arc<dyn Store>, rs: &ReplicaSet, pods: &[&Pod]) -> Result<(), StoreError> {
    let writes = pods.iter().map(|pod| {
        let uid = rs.metadata.uid.clone();
        let write = ops::modify::<Pod>(Key::new(Kind::Pod, &pod.metadata.namespace, &pod.metadata.name), move |_, p| {
            p.metadata.owner_references.retain(|r| r.uid != uid);
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
    Ok(())
}

/// Makes `rs` the controller of the orphan pods among `candidates` (names in its namespace)
/// that its selector matches; returns them as adopted.
async fn adopt(store: &Arc<dyn Store>, rs: &ReplicaSet, candidates: &[String]) -> Result<Vec<Pod>, StoreError> {
    let namespace = &rs.metadata.namespace;
    let selector = &rs.spec.selector;
    let found: Vec<Arc<Object>> = candidates.iter().filter_map(|name| store.get(&Key::new(Kind::Pod, namespace, name))).collect();
    let orphans: Vec<&Pod> =
        found.iter().filter_map(|o| as_pod(o)).filter(|p| is_orphan(p) && selector.matches(&p.metadata.labels)).collect();
    let writes = orphans.iter().map(|pod| {
        let (reference, selector) = (controller_reference(Kind::ReplicaSet, &rs.metadata), selector.clone());
        let write = ops::modify::<Pod>(Key::new(Kind::Pod, &pod.metadata.namespace, &pod.metadata.name), move |_, p| {
            // Someone else may have taken it, or its labels changed, since it was listed.
            if p.metadata.controller().is_none() && p.metadata.deletion_timestamp.is_none() && selector.matches(&p.metadata.labels) {
                p.metadata.owner_references.push(reference.clone());
            }
            Ok(())
        });
        store.commit(Txn::new().with(write))
    });
    let mut adopted = Vec::new();
    for result in futures::future::join_all(writes).await {
        match result {
            Ok(outcomes) => {
                let pod = outcomes.first().and_then(|o| o.object()).and_then(|o| as_pod(o).cloned());
                adopted.extend(pod.filter(|p| p.metadata.controller().is_some_and(|r| r.uid == rs.metadata.uid)));
            }
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(adopted)
}

/// `1 pod`, `2 pods`.
fn pods(n: usize) -> String {
    if n == 1 { "1 pod".to_string() } else { format!("{n} pods") }
}

/// `a, b, c`, or the first ten and how many more.
fn list(names: &[String]) -> String {
    const SHOWN: usize = 10;
    let shown = names[..names.len().min(SHOWN)].join(", ");
    if names.len() > SHOWN { format!("{shown} and {} more", names.len() - SHOWN) } else { shown }
}

fn names(pods: &[&Pod]) -> String {
    list(&pods.iter().map(|p| p.metadata.name.clone()).collect::<Vec<_>>())
}

/// Creates one pod of the set with its `Created` event, under a new name from `suffix`
/// whenever the name is taken.
async fn create_pod(store: &Arc<dyn Store>, rs: &ReplicaSet, now: Time, mut suffix: impl FnMut() -> String) -> Result<String, StoreError> {
    let mut tries = 0;
    loop {
        let pod = pod_named(rs, &suffix(), now);
        let name = pod.metadata.name.clone();
        let involved = events::reference(&Object::Pod(pod.clone()));
        let created =
            events::new_event(involved, event_types::NORMAL, "Created", format!("Pod {name} created"), SOURCE_REPLICASET_CONTROLLER);
        match store.commit(Txn::new().with(ops::create(pod)).with(events::record(created, now))).await {
            Ok(_) => return Ok(name),
            Err(StoreError::AlreadyExists { .. }) if tries + 1 < NAME_TRIES => tries += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Creates `count` pods in batches of 1, 2, 4, …, each pod its own write; a batch with a
/// failure is the last. Returns the names made and the first error.
async fn create_pods(store: &Arc<dyn Store>, rs: &ReplicaSet, count: usize, now: Time) -> (Vec<String>, Option<StoreError>) {
    let mut created = Vec::with_capacity(count);
    let mut batch = 1;
    while created.len() < count {
        let size = batch.min(count - created.len());
        let results = futures::future::join_all((0..size).map(|_| create_pod(store, rs, now, random_suffix))).await;
        let mut failure = None;
        for result in results {
            match result {
                Ok(name) => created.push(name),
                Err(e) => failure = failure.or(Some(e)),
            }
        }
        if failure.is_some() {
            return (created, failure);
        }
        batch *= 2;
    }
    (created, None)
}

/// The graceful delete of one of our pods: only that pod (its uid), at `resource_version`
/// when non-zero, with the pod's own grace period.
fn delete_pod(pod: &Pod, resource_version: u64, now: Time, node_monitor_grace: Duration) -> Write {
    let request = ops::PodDelete { resource_version, uid: Some(pod.metadata.uid.clone()), ..ops::PodDelete::default() };
    ops::delete_pod(&pod.metadata.namespace, &pod.metadata.name, request, now, node_monitor_grace)
}

/// Deletes `pods` gracefully in batches of 1, 2, 4, …, each pod its own write; pods
/// already gone count as deleted.
pub(crate) async fn delete_ignoring_gone(
    store: &Arc<dyn Store>,
    pods: &[&Pod],
    now: Time,
    node_monitor_grace: Duration,
) -> Result<(), StoreError> {
    let mut batch = 1;
    let mut rest = pods;
    while !rest.is_empty() {
        let (now_batch, later) = rest.split_at(batch.min(rest.len()));
        let deletes = now_batch.iter().map(|pod| store.commit(Txn::new().with(delete_pod(pod, 0, now, node_monitor_grace))));
        for result in futures::future::join_all(deletes).await {
            match result {
                Ok(_) | Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        rest = later;
        batch *= 2;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use shared::model::Deployment;
    use shared::rollout::POD_TEMPLATE_HASH_LABEL;

    use super::super::fixtures;
    use super::*;

    /// A ReplicaSet of `replicas` from the example deployment's template, as the deployment
    /// controller makes one (hash label on selector, template and set).
    pub fn replicaset(replicas: i32) -> ReplicaSet {
        let d: Deployment = serde_json::from_str(include_str!("../../../examples/deployment.json")).unwrap();
        let mut rs = ReplicaSet {
            kind: "ReplicaSet".into(),
            metadata: ObjectMeta::named("default", "web-abc"),
            spec: shared::model::ReplicaSetSpec {
                replicas,
                min_ready_seconds: 0,
                selector: d.spec.selector.clone(),
                template: d.spec.template.clone(),
            },
            status: Default::default(),
        };
        for labels in [&mut rs.metadata.labels, &mut rs.spec.template.metadata.labels, &mut rs.spec.selector.match_labels] {
            labels.insert(POD_TEMPLATE_HASH_LABEL.into(), "abc".into());
        }
        stamp_new(&mut rs, chrono::Utc::now());
        rs
    }

    fn key() -> Key {
        Key::new(Kind::ReplicaSet, "default", "web-abc")
    }

    /// A reconcile by a controller that has listed the store, as the runner's first resync.
    async fn reconcile(ctx: &Context, now: Time) -> Action {
        let controller = ReplicaSetController::default();
        controller.all_keys(&*ctx.store);
        controller.reconcile(&key(), ctx, now).await.unwrap()
    }

    fn stored(ctx: &Context) -> ReplicaSet {
        match ctx.store.get(&key()).as_deref() {
            Some(Object::ReplicaSet(rs)) => ReplicaSet::clone(rs),
            _ => panic!("replica set missing"),
        }
    }

    /// Every live pod Running on n1 and Ready since `since`, as an agent reports it.
    pub async fn run_all(ctx: &Context, since: Time) {
        for mut pod in fixtures::pods(ctx).into_iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
            if pod.is_ready() {
                continue;
            }
            pod.spec.node_name = "n1".into();
            pod.status.phase = PodPhase::Running;
            let ready = Condition {
                type_: conditions::READY.into(),
                status: conditions::TRUE.into(),
                last_transition_time: Some(since),
                ..Condition::default()
            };
            pod.status.conditions = vec![ready];
            fixtures::put(ctx, Object::Pod(pod)).await;
        }
    }

    #[tokio::test]
    async fn scales_up_with_owned_named_pods_and_is_idempotent() {
        let ctx = fixtures::context().await;
        let rs = replicaset(3);
        fixtures::put(&ctx, Object::ReplicaSet(Box::new(rs.clone()))).await;
        reconcile(&ctx, chrono::Utc::now()).await;
        reconcile(&ctx, chrono::Utc::now()).await;
        let pods = fixtures::pods(&ctx);
        assert_eq!(pods.len(), 3);
        for p in &pods {
            assert!(p.metadata.name.starts_with("web-abc-") && p.metadata.name.len() == "web-abc-".len() + 5, "{}", p.metadata.name);
            let owner = p.metadata.controller().unwrap();
            assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("ReplicaSet", rs.metadata.uid.as_str()));
            assert!(owner.block_owner_deletion, "as Kubernetes' controllers write it");
            assert_eq!(p.metadata.labels[POD_TEMPLATE_HASH_LABEL], "abc");
        }
        let status = stored(&ctx).status;
        assert_eq!((status.replicas, status.fully_labeled_replicas, status.ready_replicas, status.observed_generation), (3, 3, 0, 1));
    }

    #[tokio::test]
    async fn orphans_the_selector_matches_are_adopted_and_pods_it_no_longer_matches_are_released() {
        let ctx = fixtures::context().await;
        let rs = replicaset(2);
        fixtures::put(&ctx, Object::ReplicaSet(Box::new(rs.clone()))).await;
        let orphan = fixtures::pod("orphan", &[("app", "web"), (POD_TEMPLATE_HASH_LABEL, "abc")], "", PodPhase::Pending);
        let stranger = fixtures::pod("stranger", &[("app", "web")], "", PodPhase::Pending);
        for pod in [&orphan, &stranger] {
            fixtures::put(&ctx, Object::Pod(pod.clone())).await;
        }
        let event = crate::store::StoreEvent::new(crate::store::EventType::Added, 1, Arc::new(Object::Pod(orphan.clone())), None);
        let controller = ReplicaSetController::default();
        assert_eq!(controller.keys_for(&*ctx.store, &event), vec![key()], "an orphan wakes the sets that may adopt it");
        assert_eq!(controller.orphans().get("default").map(|names| names.len()), Some(1), "and is noted as one");
        reconcile(&ctx, chrono::Utc::now()).await;
        let owned = fixtures::pods(&ctx).iter().filter(|p| p.metadata.controller().is_some()).count();
        assert_eq!(owned, 2, "the orphan counts as one of the two");
        let controller = |name: &str| {
            fixtures::pods(&ctx).into_iter().find(|p| p.metadata.name == name).and_then(|p| p.metadata.controller().map(|r| r.uid.clone()))
        };
        assert_eq!(controller("orphan"), Some(rs.metadata.uid.clone()));
        assert_eq!(controller("stranger"), None, "the selector needs the hash label too");

        // Relabelled, the adopted pod is let go, and replaced.
        let mut relabelled = fixtures::pods(&ctx).into_iter().find(|p| p.metadata.name == "orphan").unwrap();
        relabelled.metadata.labels.insert(POD_TEMPLATE_HASH_LABEL.into(), "other".into());
        fixtures::put(&ctx, Object::Pod(relabelled)).await;
        reconcile(&ctx, chrono::Utc::now()).await;
        assert_eq!(controller("orphan"), None, "released");
        let owned = fixtures::pods(&ctx).iter().filter(|p| p.metadata.controller().is_some()).count();
        assert_eq!(owned, 2, "a replacement for the released pod");
    }

    #[tokio::test]
    async fn deleting_the_replicaset_deletes_its_pods_and_only_them() {
        let ctx = fixtures::context().await;
        fixtures::put(&ctx, Object::ReplicaSet(Box::new(replicaset(2)))).await;
        reconcile(&ctx, chrono::Utc::now()).await;
        let other = fixtures::pod("unowned", &[("app", "web")], "", PodPhase::Pending);
        fixtures::put(&ctx, Object::Pod(other)).await;
        ctx.store.commit(Txn::new().with(ops::delete(key(), 0))).await.unwrap();
        assert_eq!(ReplicaSetController::default().all_keys(&*ctx.store), vec![key()], "the owner of orphaned pods is still visited");
        reconcile(&ctx, chrono::Utc::now()).await;
        let left: Vec<String> = fixtures::pods(&ctx).iter().map(|p| p.metadata.name.clone()).collect();
        assert_eq!(left, vec!["unowned".to_string()]);
    }

    #[tokio::test]
    async fn a_failed_create_is_in_the_status_and_an_event() {
        let ctx = fixtures::context().await;
        let mut rs = replicaset(3);
        rs.metadata.namespace = "gone".into();
        fixtures::put(&ctx, Object::ReplicaSet(Box::new(rs))).await;
        let key = Key::new(Kind::ReplicaSet, "gone", "web-abc");
        let err = ReplicaSetController::default().reconcile(&key, &ctx, chrono::Utc::now()).await.unwrap_err();
        assert!(err.to_string().contains("gone"), "{err}");
        let Some(Object::ReplicaSet(rs)) = ctx.store.get(&key).as_deref().cloned() else { panic!("replica set missing") };
        let failure = find_condition(&rs.status.conditions, reasons::REPLICA_FAILURE).expect("a ReplicaFailure condition");
        assert_eq!((failure.status.as_str(), failure.reason.as_str()), ("True", "FailedCreate"));
        assert_eq!(rs.status.replicas, 0);
        let events = ctx.store.list(Kind::Event, Some("gone")).1;
        let warned =
            events.iter().any(|e| matches!(&**e, Object::Event(e) if e.reason == "FailedCreate" && e.message.contains("0 of 3 exist")));
        assert!(warned, "{events:?}");
    }

    #[tokio::test]
    async fn a_ready_pod_is_available_after_min_ready_seconds_and_the_set_looks_again_then() {
        let ctx = fixtures::context().await;
        let mut rs = replicaset(2);
        rs.spec.min_ready_seconds = 10;
        fixtures::put(&ctx, Object::ReplicaSet(Box::new(rs))).await;
        let t0 = chrono::Utc::now();
        reconcile(&ctx, t0).await;
        run_all(&ctx, t0).await;
        let action = reconcile(&ctx, t0 + chrono::Duration::seconds(4)).await;
        assert_eq!(action, Action::RequeueAfter(Duration::from_millis(6_001)), "at the moment the first becomes available");
        let status = stored(&ctx).status;
        assert_eq!((status.ready_replicas, status.available_replicas), (2, 0));
        assert_eq!(reconcile(&ctx, t0 + chrono::Duration::seconds(11)).await, Action::AwaitChange);
        assert_eq!(stored(&ctx).status.available_replicas, 2);
    }

    #[test]
    fn a_generated_pod_name_keeps_at_most_58_characters_of_its_owners() {
        let mut long = replicaset(1);
        long.metadata.name = "w".repeat(250);
        let pod = pod_named(&long, "xh8b2", chrono::Utc::now());
        assert_eq!(pod.metadata.name, format!("{}xh8b2", "w".repeat(58)));
        assert!(shared::validation::validate_pod(&pod).is_ok(), "{:?}", shared::validation::validate_pod(&pod));
    }

    #[tokio::test]
    async fn a_name_collision_is_retried_for_that_pod_alone() {
        let ctx = fixtures::context().await;
        let rs = replicaset(1);
        fixtures::put(&ctx, Object::ReplicaSet(Box::new(rs.clone()))).await;
        for taken in ["aaaaa", "bbbbb"] {
            fixtures::put(&ctx, Object::Pod(pod_named(&rs, taken, chrono::Utc::now()))).await;
        }
        let mut names = ["aaaaa", "bbbbb", "ccccc"].into_iter().map(str::to_string);
        let name = create_pod(&ctx.store, &rs, chrono::Utc::now(), || names.next().unwrap()).await.unwrap();
        assert_eq!(name, "web-abc-ccccc", "the two taken names were skipped");
        let err = create_pod(&ctx.store, &rs, chrono::Utc::now(), || "aaaaa".to_string()).await.unwrap_err();
        assert!(matches!(err, StoreError::AlreadyExists { .. }), "{err}");
    }

    #[tokio::test]
    async fn scales_down_unbound_pods_first_replaces_finished_ones_and_a_terminating_pod_is_no_replica() {
        let ctx = fixtures::context().await;
        fixtures::node_with_ready(&ctx, "n1", conditions::TRUE).await;
        let rs = replicaset(2);
        fixtures::put(&ctx, Object::ReplicaSet(Box::new(rs.clone()))).await;
        let on_n1 = |phase| {
            let mut pod = pod_named(&rs, &random_suffix(), chrono::Utc::now());
            pod.spec.node_name = "n1".into();
            pod.status.phase = phase;
            pod
        };
        let (running, failed, pending) = (on_n1(PodPhase::Running), on_n1(PodPhase::Failed), pod_named(&rs, "pend1", chrono::Utc::now()));
        let mut leaving = on_n1(PodPhase::Running);
        leaving.metadata.deletion_timestamp = Some(chrono::Utc::now());
        leaving.metadata.deletion_grace_period_seconds = Some(30);
        for p in [&running, &failed, &pending, &leaving] {
            fixtures::put(&ctx, Object::Pod(p.clone())).await;
        }
        reconcile(&ctx, chrono::Utc::now()).await;
        let live: Vec<Pod> = fixtures::pods(&ctx).into_iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
        assert!(!live.iter().any(|p| p.metadata.name == failed.metadata.name), "the failed pod is replaced");
        assert_eq!(live.len(), 2, "{live:?}");
        assert_eq!(stored(&ctx).status.replicas, 2, "the terminating pod is not counted");

        let mut scaled = stored(&ctx);
        scaled.spec.replicas = 1;
        fixtures::put(&ctx, Object::ReplicaSet(Box::new(scaled))).await;
        reconcile(&ctx, chrono::Utc::now()).await;
        let live: Vec<String> =
            fixtures::pods(&ctx).into_iter().filter(|p| p.metadata.deletion_timestamp.is_none()).map(|p| p.metadata.name).collect();
        assert_eq!(live, vec![running.metadata.name.clone()], "the running pod is kept");
    }
}
