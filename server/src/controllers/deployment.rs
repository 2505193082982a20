//! The deployment controller: keeps `spec.replicas` active pods from the template, named
//! `<deployment>-<5 random characters>` and owned by the deployment (controller reference);
//! replaces pods that failed, scales down newest and least advanced first, deletes the
//! pods of a deleted deployment (cascade), and writes `status.replicas` / `ready_replicas`.
//! Pods are deleted gracefully; terminating pods no longer count as replicas. As Kubernetes'
//! ReplicaSet controller does, pods are created and deleted in batches that grow (1, 2, 4,
//! …, at most [`BURST_REPLICAS`] a reconcile), each pod in its own write, so that a
//! deployment of any size fills and one failure stops only what comes after it.

use std::sync::Arc;
use std::time::Duration;

use shared::model::{
    Condition, Deployment, DeploymentStatus, Kind, Object, ObjectMeta, OwnerReference, Pod, PodPhase, Time, conditions, event_types,
    find_condition, set_condition,
};

use super::{Action, Context, Controller, Result, store_error};
use crate::events::{self, SOURCE_DEPLOYMENT_CONTROLLER};
use crate::ops;
use crate::resources::stamp_new;
use crate::store::{Key, Store, StoreError, StoreEvent, Txn, pod_owner};

pub struct DeploymentController;

/// Pods one reconcile creates or deletes at most (Kubernetes' `burstReplicas`); the changes
/// it makes bring the next reconcile, which goes on.
pub const BURST_REPLICAS: usize = 500;
/// How often a pod whose random name is taken is tried again with another name.
const NAME_TRIES: usize = 5;
/// The condition that says creating pods failed, as in Kubernetes.
pub const REPLICA_FAILURE: &str = "ReplicaFailure";
/// The condition that says whether every wanted replica is ready, as in Kubernetes.
pub const AVAILABLE: &str = "Available";

/// The alphabet Kubernetes draws name suffixes from: no vowels, no look-alikes.
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn random_suffix() -> String {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    bytes.iter().take(5).map(|b| SUFFIX_ALPHABET[*b as usize % SUFFIX_ALPHABET.len()] as char).collect()
}

/// Scale-down order: unbound before bound, Pending before Running, not ready before ready,
/// newest first.
fn deletion_rank(pod: &Pod) -> (bool, bool, bool, std::cmp::Reverse<Option<Time>>) {
    (pod.is_bound(), pod.status.phase == PodPhase::Running, pod.is_ready(), std::cmp::Reverse(pod.metadata.created_at))
}

/// The most of a generated pod name that comes from its deployment's (`<name>-`), as
/// Kubernetes' name generator keeps it: with the suffix, at most 63 characters, however
/// long the deployment's name (up to 253) is.
const GENERATED_BASE_LENGTH: usize = 58;

fn pod_named(deployment: &Deployment, suffix: &str, now: Time) -> Pod {
    let template = &deployment.spec.template;
    let mut base = format!("{}-", deployment.metadata.name);
    // Names are ASCII (validated), so a byte is a character.
    base.truncate(GENERATED_BASE_LENGTH);
    let mut pod = Pod {
        kind: "Pod".into(),
        metadata: ObjectMeta {
            name: format!("{base}{suffix}"),
            namespace: deployment.metadata.namespace.clone(),
            labels: template.metadata.labels.clone(),
            annotations: template.metadata.annotations.clone(),
            owner_references: vec![OwnerReference {
                kind: "Deployment".into(),
                name: deployment.metadata.name.clone(),
                uid: deployment.metadata.uid.clone(),
                controller: true,
            }],
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: Default::default(),
    };
    pod.spec.node_name.clear();
    stamp_new(&mut pod, now);
    pod
}

fn deployment_event(deployment: &Deployment, type_: &str, reason: &str, message: String, now: Time) -> crate::store::Write {
    let involved = events::reference(&Object::Deployment(Box::new(deployment.clone())));
    events::record(events::new_event(involved, type_, reason, message, SOURCE_DEPLOYMENT_CONTROLLER), now)
}

impl Controller for DeploymentController {
    const NAME: &'static str = "deployment-controller";

    fn watched(&self) -> &'static [Kind] {
        &[Kind::Deployment, Kind::Pod]
    }

    fn keys_for(&self, _store: &dyn Store, event: &StoreEvent) -> Vec<Key> {
        match &*event.object {
            Object::Deployment(_) => vec![Key::of(&event.object)],
            Object::Pod(_) => pod_owner(&event.object).into_iter().collect(),
            _ => Vec::new(),
        }
    }

    fn all_keys(&self, store: &dyn Store) -> Vec<Key> {
        let mut keys: Vec<Key> = store.list(Kind::Deployment, None).1.iter().map(|d| Key::of(d)).collect();
        // Owners of pods whose deployment is gone: the cascade after a crash or a missed event.
        for pod in store.list(Kind::Pod, None).1 {
            if let Some(owner) = pod_owner(&pod)
                && store.get(&owner).is_none()
            {
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
            Some(Object::Deployment(d)) if d.metadata.deletion_timestamp.is_none() => Some(d.clone()),
            _ => None,
        };
        // Terminating pods are on their way out: they are no replicas (as in Kubernetes'
        // ReplicaSet), so their replacements start at once, and nothing deletes them again.
        // Read through the owner index and borrowed: a reconcile neither visits other
        // deployments' pods nor copies its own.
        let listed = store.pods_owned_by(key).1;
        let owned: Vec<&Pod> = listed
            .iter()
            .filter_map(|o| match &**o {
                Object::Pod(p) if p.metadata.deletion_timestamp.is_none() => Some(p),
                _ => None,
            })
            .collect();

        let Some(deployment) = deployment else {
            // Cascade: the deployment is gone, so are its pods, each gracefully, a burst at a
            // time (the deletions bring the next reconcile).
            if !owned.is_empty() {
                let burst = &owned[..owned.len().min(BURST_REPLICAS)];
                delete_ignoring_gone(store, burst, now, ctx.config.node_monitor_grace).await.map_err(err)?;
                tracing::info!("deleting {} of the {} pods of deleted deployment {namespace}/{name}", burst.len(), owned.len());
            }
            return Ok(Action::AwaitChange);
        };

        // Pods of an earlier deployment with the same name are not ours: delete them.
        let (mine, strays): (Vec<&Pod>, Vec<&Pod>) =
            owned.into_iter().partition(|p| p.metadata.controller().is_some_and(|r| r.uid == deployment.metadata.uid));
        let (mut active, finished): (Vec<&Pod>, Vec<&Pod>) = mine.into_iter().partition(|p| !p.status.phase.is_terminal());
        let want = deployment.spec.replicas.max(0) as usize;
        let mut txn = Txn::new();

        for pod in strays.iter().chain(finished.iter()) {
            txn.push(delete_pod(pod, pod.metadata.resource_version, now, ctx.config.node_monitor_grace));
        }
        if !finished.is_empty() {
            let names: Vec<&str> = finished.iter().map(|p| p.metadata.name.as_str()).collect();
            txn.push(deployment_event(
                &deployment,
                event_types::NORMAL,
                "ReplacingFinishedPods",
                format!("Deleted finished pods {} to replace them", names.join(", ")),
                now,
            ));
        }
        let mut created = Vec::new();
        let mut failure = None;
        if active.len() > want {
            active.sort_by_key(|p| deletion_rank(p));
            let excess: Vec<&Pod> = active.drain(..(active.len() - want).min(BURST_REPLICAS)).collect();
            delete_ignoring_gone(store, &excess, now, ctx.config.node_monitor_grace).await.map_err(err)?;
            txn.push(deployment_event(
                &deployment,
                event_types::NORMAL,
                "SuccessfulDelete",
                format!("Deleted pods: {}", names(&excess)),
                now,
            ));
        }
        if !txn.writes.is_empty() {
            store.commit(txn).await.map_err(err)?;
        }
        if active.len() < want {
            let missing = (want - active.len()).min(BURST_REPLICAS);
            let outcome = create_pods(store, &deployment, missing, now).await;
            created = outcome.0;
            failure = outcome.1;
            let mut report = Txn::new();
            if !created.is_empty() {
                let message =
                    format!("Created {} ({} of {want} now): {}", pods(created.len()), active.len() + created.len(), list(&created));
                report.push(deployment_event(&deployment, event_types::NORMAL, "SuccessfulCreate", message, now));
            }
            if let Some(e) = &failure {
                let message = format!("Error creating pods ({} of {want} exist): {e}", active.len() + created.len());
                report.push(deployment_event(&deployment, event_types::WARNING, "FailedCreate", message, now));
            }
            if !report.writes.is_empty() {
                store.commit(report).await.map_err(err)?;
            }
        }

        let ready = active.iter().filter(|p| p.is_ready()).count() as i32;
        let mut conditions = deployment.status.conditions.clone();
        let replica_failure = match &failure {
            Some(e) => Condition {
                type_: REPLICA_FAILURE.into(),
                status: conditions::TRUE.into(),
                reason: "FailedCreate".into(),
                message: e.to_string(),
                ..Condition::default()
            },
            None => Condition { type_: REPLICA_FAILURE.into(), status: conditions::FALSE.into(), ..Condition::default() },
        };
        if failure.is_some() || find_condition(&conditions, REPLICA_FAILURE).is_some() {
            set_condition(&mut conditions, replica_failure, now);
        }
        set_condition(&mut conditions, availability(&active, ready as usize, want), now);
        let status = DeploymentStatus {
            replicas: (active.len() + created.len()) as i32,
            ready_replicas: ready,
            available_replicas: ready,
            observed_generation: deployment.metadata.generation,
            conditions,
        };
        if status != deployment.status {
            let expected = deployment.metadata.resource_version;
            let write = ops::modify::<Deployment>(key.clone(), move |_, d| {
                if d.metadata.resource_version != expected {
                    return Err(StoreError::conflict("the deployment changed during the reconcile"));
                }
                d.status = status.clone();
                Ok(())
            });
            match store.commit(Txn::new().with(write)).await {
                Ok(_) | Err(StoreError::NotFound { .. }) => {}
                // A newer version will be reconciled from its own watch event.
                Err(StoreError::Conflict(_)) => return Ok(Action::AwaitChange),
                Err(e) => return Err(err(e)),
            }
        }
        match failure {
            // The error policy backs the deployment off before the next try.
            Some(e) => Err(err(e)),
            None => Ok(Action::AwaitChange),
        }
    }
}

/// `Available`, and when it is False, why: how many pods the scheduler cannot place, with
/// its reason for one of them (Kubernetes says only that availability is short).
fn availability(active: &[&Pod], ready: usize, want: usize) -> Condition {
    let (status, reason, message) = if ready >= want {
        (conditions::TRUE, "MinimumReplicasAvailable", "Deployment has minimum availability.".to_string())
    } else {
        let unschedulable: Vec<&str> =
            active.iter().filter(|p| p.spec.node_name.is_empty()).filter_map(|p| p.unschedulable_because()).collect();
        let mut message = format!("Deployment does not have minimum availability: {ready} of {want} replicas are ready.");
        if let Some(why) = unschedulable.first() {
            let pods = if unschedulable.len() == 1 { "1 pod".to_string() } else { format!("{} pods", unschedulable.len()) };
            message.push_str(&format!(" {pods} cannot be scheduled: {why}"));
        }
        (conditions::FALSE, "MinimumReplicasUnavailable", message)
    };
    Condition { type_: AVAILABLE.into(), status: status.into(), reason: reason.into(), message, ..Condition::default() }
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

/// Creates one pod of the deployment with its `Created` event, under a new name from
/// `suffix` whenever the name is taken.
async fn create_pod(
    store: &Arc<dyn Store>,
    deployment: &Deployment,
    now: Time,
    mut suffix: impl FnMut() -> String,
) -> Result<String, StoreError> {
    let mut tries = 0;
    loop {
        let pod = pod_named(deployment, &suffix(), now);
        let name = pod.metadata.name.clone();
        let involved = events::reference(&Object::Pod(pod.clone()));
        let created =
            events::new_event(involved, event_types::NORMAL, "Created", format!("Pod {name} created"), SOURCE_DEPLOYMENT_CONTROLLER);
        match store.commit(Txn::new().with(ops::create(pod)).with(events::record(created, now))).await {
            Ok(_) => return Ok(name),
            Err(StoreError::AlreadyExists { .. }) if tries + 1 < NAME_TRIES => tries += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Creates `count` pods in batches of 1, 2, 4, …, each pod its own write; a batch with a
/// failure is the last. Returns the names made and the first error.
async fn create_pods(store: &Arc<dyn Store>, deployment: &Deployment, count: usize, now: Time) -> (Vec<String>, Option<StoreError>) {
    let mut created = Vec::with_capacity(count);
    let mut batch = 1;
    while created.len() < count {
        let size = batch.min(count - created.len());
        let results = futures::future::join_all((0..size).map(|_| create_pod(store, deployment, now, random_suffix))).await;
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
fn delete_pod(pod: &Pod, resource_version: u64, now: Time, node_monitor_grace: Duration) -> crate::store::Write {
    let request = ops::PodDelete { resource_version, uid: Some(pod.metadata.uid.clone()), ..ops::PodDelete::default() };
    ops::delete_pod(&pod.metadata.namespace, &pod.metadata.name, request, now, node_monitor_grace)
}

/// Deletes `pods` gracefully in batches of 1, 2, 4, …, each pod its own write; pods
/// already gone count as deleted.
async fn delete_ignoring_gone(store: &Arc<dyn Store>, pods: &[&Pod], now: Time, node_monitor_grace: Duration) -> Result<(), StoreError> {
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
mod tests {
    use super::super::fixtures;
    use super::*;

    fn deployment(replicas: i32) -> Deployment {
        let mut d: Deployment = serde_json::from_str(include_str!("../../../examples/deployment.json")).unwrap();
        d.spec.replicas = replicas;
        stamp_new(&mut d, chrono::Utc::now());
        d
    }

    fn new_pod(deployment: &Deployment, now: Time) -> Pod {
        pod_named(deployment, &random_suffix(), now)
    }

    async fn reconcile(ctx: &Context) {
        let key = Key::new(Kind::Deployment, "default", "web");
        DeploymentController.reconcile(&key, ctx, chrono::Utc::now()).await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deployment_of_thirty_thousand_replicas_gets_every_pod() {
        let ctx = fixtures::context().await;
        let shutdown = tokio_util::sync::CancellationToken::new();
        tokio::spawn(super::super::run(DeploymentController, ctx.clone(), Duration::from_secs(30), shutdown.clone()));
        fixtures::put(&ctx, Object::Deployment(Box::new(deployment(30_000)))).await;
        let began = std::time::Instant::now();
        while ctx.store.count(Kind::Pod) < 30_000 {
            assert!(began.elapsed() < Duration::from_secs(300), "{} of 30000 pods after 5 minutes", ctx.store.count(Kind::Pod));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let status = loop {
            match ctx.store.get(&Key::new(Kind::Deployment, "default", "web")).as_deref() {
                Some(Object::Deployment(d)) if d.status.replicas == 30_000 => break d.status.clone(),
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        assert_eq!(ctx.store.count(Kind::Pod), 30_000, "no more than asked");
        assert!(find_condition(&status.conditions, REPLICA_FAILURE).is_none(), "{status:?}");
        shutdown.cancel();
    }

    fn available(ctx: &Context) -> Condition {
        match ctx.store.get(&Key::new(Kind::Deployment, "default", "web")).as_deref() {
            Some(Object::Deployment(d)) => find_condition(&d.status.conditions, AVAILABLE).expect("an Available condition").clone(),
            _ => panic!("deployment missing"),
        }
    }

    #[tokio::test]
    async fn availability_says_how_many_replicas_are_ready_and_why_the_others_have_no_node() {
        let ctx = fixtures::context().await;
        let d = deployment(3);
        fixtures::put(&ctx, Object::Deployment(Box::new(d.clone()))).await;
        let ready = [running_on_n1(&d), running_on_n1(&d)];
        for pod in &ready {
            fixtures::put(&ctx, Object::Pod(pod.clone())).await;
        }
        let stuck = new_pod(&d, chrono::Utc::now());
        fixtures::put(&ctx, Object::Pod(stuck.clone())).await;
        ctx.store
            .commit(ops::mark_unschedulable(&stuck, "0/1 nodes are available: 1 Insufficient cpu.", chrono::Utc::now()))
            .await
            .unwrap();
        reconcile(&ctx).await;
        let short = available(&ctx);
        assert_eq!((short.status.as_str(), short.reason.as_str()), ("False", "MinimumReplicasUnavailable"));
        assert_eq!(
            short.message,
            "Deployment does not have minimum availability: 2 of 3 replicas are ready. 1 pod cannot be scheduled: 0/1 nodes are available: 1 Insufficient cpu."
        );

        let mut scaled = d.clone();
        scaled.spec.replicas = 2;
        fixtures::put(&ctx, Object::Deployment(Box::new(scaled))).await;
        reconcile(&ctx).await;
        let full = available(&ctx);
        assert_eq!((full.status.as_str(), full.reason.as_str()), ("True", "MinimumReplicasAvailable"), "{full:?}");
    }

    #[tokio::test]
    async fn a_failed_create_is_in_the_status_and_an_event() {
        let ctx = fixtures::context().await;
        let mut d = deployment(3);
        d.metadata.namespace = "gone".into();
        fixtures::put(&ctx, Object::Deployment(Box::new(d))).await;
        let key = Key::new(Kind::Deployment, "gone", "web");
        let err = DeploymentController.reconcile(&key, &ctx, chrono::Utc::now()).await.unwrap_err();
        assert!(err.to_string().contains("gone"), "{err}");
        let Some(Object::Deployment(d)) = ctx.store.get(&key).as_deref().cloned() else { panic!("deployment missing") };
        let failure = find_condition(&d.status.conditions, REPLICA_FAILURE).expect("a ReplicaFailure condition");
        assert_eq!((failure.status.as_str(), failure.reason.as_str()), ("True", "FailedCreate"));
        assert_eq!(d.status.replicas, 0);
        let events = ctx.store.list(Kind::Event, Some("gone")).1;
        let warned =
            events.iter().any(|e| matches!(&**e, Object::Event(e) if e.reason == "FailedCreate" && e.message.contains("0 of 3 exist")));
        assert!(warned, "{events:?}");
    }

    #[test]
    fn a_generated_pod_name_keeps_at_most_58_characters_of_its_deployments() {
        let mut long = deployment(1);
        long.metadata.name = "w".repeat(250);
        let pod = pod_named(&long, "xh8b2", chrono::Utc::now());
        assert_eq!(pod.metadata.name, format!("{}xh8b2", "w".repeat(58)));
        assert!(shared::validation::validate_pod(&pod).is_ok(), "{:?}", shared::validation::validate_pod(&pod));
        assert_eq!(pod_named(&deployment(1), "xh8b2", chrono::Utc::now()).metadata.name, "web-xh8b2");
    }

    #[tokio::test]
    async fn a_name_collision_is_retried_for_that_pod_alone() {
        let ctx = fixtures::context().await;
        let d = deployment(1);
        fixtures::put(&ctx, Object::Deployment(Box::new(d.clone()))).await;
        for taken in ["aaaaa", "bbbbb"] {
            fixtures::put(&ctx, Object::Pod(pod_named(&d, taken, chrono::Utc::now()))).await;
        }
        let mut names = ["aaaaa", "bbbbb", "ccccc"].into_iter().map(str::to_string);
        let name = create_pod(&ctx.store, &d, chrono::Utc::now(), || names.next().unwrap()).await.unwrap();
        assert_eq!(name, "web-ccccc", "the two taken names were skipped");
        let mut always_taken = || "aaaaa".to_string();
        let err = create_pod(&ctx.store, &d, chrono::Utc::now(), &mut always_taken).await.unwrap_err();
        assert!(matches!(err, StoreError::AlreadyExists { .. }), "{err}");
        assert_eq!(fixtures::pods(&ctx).len(), 3);
    }

    #[tokio::test]
    async fn scales_up_with_owned_named_pods_and_is_idempotent() {
        let ctx = fixtures::context().await;
        let d = deployment(3);
        fixtures::put(&ctx, Object::Deployment(Box::new(d.clone()))).await;
        reconcile(&ctx).await;
        reconcile(&ctx).await;
        let pods = fixtures::pods(&ctx);
        assert_eq!(pods.len(), 3);
        for p in &pods {
            assert!(p.metadata.name.starts_with("web-") && p.metadata.name.len() == "web-".len() + 5, "{}", p.metadata.name);
            let owner = p.metadata.controller().unwrap();
            assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("Deployment", d.metadata.uid.as_str()));
            assert_eq!(p.metadata.labels["app"], "web");
            assert_eq!(p.status.phase, PodPhase::Pending);
        }
        match ctx.store.get(&Key::new(Kind::Deployment, "default", "web")).as_deref() {
            Some(Object::Deployment(d)) => assert_eq!(d.status.replicas, 3),
            _ => panic!("deployment missing"),
        }
    }

    #[tokio::test]
    async fn scales_down_unbound_pods_first_and_replaces_failed_ones() {
        let ctx = fixtures::context().await;
        let d = deployment(2);
        fixtures::put(&ctx, Object::Deployment(Box::new(d.clone()))).await;
        let mut running = new_pod(&d, chrono::Utc::now());
        running.spec.node_name = "n1".into();
        running.status.phase = PodPhase::Running;
        let pending = new_pod(&d, chrono::Utc::now());
        let mut failed = new_pod(&d, chrono::Utc::now());
        failed.spec.node_name = "n1".into();
        failed.status.phase = PodPhase::Failed;
        for p in [&running, &pending, &failed] {
            fixtures::put(&ctx, Object::Pod(p.clone())).await;
        }
        reconcile(&ctx).await;
        let names: Vec<String> = fixtures::pods(&ctx).iter().map(|p| p.metadata.name.clone()).collect();
        assert_eq!(names.len(), 2);
        assert!(!names.contains(&failed.metadata.name), "the failed pod is replaced");

        let mut scaled = match ctx.store.get(&Key::new(Kind::Deployment, "default", "web")).as_deref() {
            Some(Object::Deployment(d)) => d.clone(),
            _ => panic!(),
        };
        scaled.spec.replicas = 1;
        fixtures::put(&ctx, Object::Deployment(scaled)).await;
        reconcile(&ctx).await;
        let left = fixtures::pods(&ctx);
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].metadata.name, running.metadata.name, "the running pod is kept");
    }

    async fn ready_node(ctx: &Context) {
        fixtures::node_with_ready(ctx, "n1", conditions::TRUE).await;
    }

    fn running_on_n1(d: &Deployment) -> Pod {
        let mut pod = new_pod(d, chrono::Utc::now());
        pod.spec.node_name = "n1".into();
        pod.status.phase = PodPhase::Running;
        pod
    }

    /// A running pod of `d` on n1 whose graceful delete has begun.
    fn terminating_on_n1(d: &Deployment) -> Pod {
        let mut pod = running_on_n1(d);
        pod.metadata.deletion_timestamp = Some(chrono::Utc::now());
        pod.metadata.deletion_grace_period_seconds = Some(30);
        pod
    }

    #[tokio::test]
    async fn a_terminating_pod_is_no_replica_and_is_replaced_at_once() {
        let ctx = fixtures::context().await;
        ready_node(&ctx).await;
        let d = deployment(1);
        fixtures::put(&ctx, Object::Deployment(Box::new(d.clone()))).await;
        let leaving = terminating_on_n1(&d);
        fixtures::put(&ctx, Object::Pod(leaving.clone())).await;
        reconcile(&ctx).await;
        let pods = fixtures::pods(&ctx);
        assert_eq!(pods.len(), 2, "a replacement next to the terminating pod");
        let replacement = pods.iter().find(|p| p.metadata.name != leaving.metadata.name).unwrap();
        assert!(replacement.metadata.deletion_timestamp.is_none());
        match ctx.store.get(&Key::new(Kind::Deployment, "default", "web")).as_deref() {
            Some(Object::Deployment(d)) => assert_eq!(d.status.replicas, 1, "the terminating pod is not counted"),
            _ => panic!("deployment missing"),
        }
        let revision = ctx.store.revision();
        reconcile(&ctx).await;
        assert_eq!(ctx.store.revision(), revision, "idempotent: the terminating pod is not deleted again");
    }

    #[tokio::test]
    async fn scale_down_and_cascade_delete_gracefully_among_pods_not_yet_terminating() {
        let ctx = fixtures::context().await;
        ready_node(&ctx).await;
        let d = deployment(1);
        fixtures::put(&ctx, Object::Deployment(Box::new(d.clone()))).await;
        let leaving = terminating_on_n1(&d);
        let (older, newer) = (running_on_n1(&d), running_on_n1(&d));
        for p in [&leaving, &older, &newer] {
            fixtures::put(&ctx, Object::Pod(p.clone())).await;
        }
        let version_of_leaving =
            || fixtures::pods(&ctx).iter().find(|p| p.metadata.name == leaving.metadata.name).unwrap().metadata.resource_version;
        let before = version_of_leaving();
        reconcile(&ctx).await;
        let pods = fixtures::pods(&ctx);
        assert_eq!(pods.len(), 3, "a scale-down on a Ready node only marks the pod");
        let terminating: Vec<&str> =
            pods.iter().filter(|p| p.metadata.deletion_timestamp.is_some()).map(|p| p.metadata.name.as_str()).collect();
        assert_eq!(terminating.len(), 2);
        assert!(terminating.contains(&leaving.metadata.name.as_str()), "one of older and newer joins the pod already leaving");
        assert_eq!(version_of_leaving(), before, "the pod already terminating is untouched");

        ctx.store.commit(Txn::new().with(ops::delete(Key::new(Kind::Deployment, "default", "web"), 0))).await.unwrap();
        reconcile(&ctx).await;
        let pods = fixtures::pods(&ctx);
        assert_eq!(pods.len(), 3, "the cascade is graceful too");
        assert!(pods.iter().all(|p| p.metadata.deletion_timestamp.is_some()));
    }

    #[tokio::test]
    async fn deleting_the_deployment_deletes_its_pods() {
        let ctx = fixtures::context().await;
        fixtures::put(&ctx, Object::Deployment(Box::new(deployment(2)))).await;
        reconcile(&ctx).await;
        let other = fixtures::pod("unowned", &[("app", "web")], "", PodPhase::Pending);
        fixtures::put(&ctx, Object::Pod(other)).await;
        ctx.store.commit(Txn::new().with(ops::delete(Key::new(Kind::Deployment, "default", "web"), 0))).await.unwrap();
        assert_eq!(DeploymentController.all_keys(&*ctx.store), vec![Key::new(Kind::Deployment, "default", "web")]);
        reconcile(&ctx).await;
        let left: Vec<String> = fixtures::pods(&ctx).iter().map(|p| p.metadata.name.clone()).collect();
        assert_eq!(left, vec!["unowned".to_string()]);
    }
}
