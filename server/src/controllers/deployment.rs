//! The deployment controller: keeps `spec.replicas` active pods from the template, named
//! `<deployment>-<5 random characters>` and owned by the deployment (controller reference);
//! replaces pods that failed, scales down newest and least advanced first, deletes the
//! pods of a deleted deployment (cascade), and writes `status.replicas` / `ready_replicas`.
//! Pods are deleted gracefully; terminating pods no longer count as replicas.

use std::sync::Arc;
use std::time::Duration;

use shared::model::{
    Deployment, DeploymentStatus, Kind, Object, ObjectMeta, OwnerReference, Pod, PodPhase, Time, conditions, event_types, find_condition,
};

use super::{Action, Context, Controller, Result, store_error};
use crate::events::{self, SOURCE_DEPLOYMENT_CONTROLLER};
use crate::ops;
use crate::resources::stamp_new;
use crate::store::{Key, Store, StoreError, StoreEvent, Txn};

pub struct DeploymentController;

/// The alphabet Kubernetes draws name suffixes from: no vowels, no look-alikes.
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn random_suffix() -> String {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    bytes.iter().take(5).map(|b| SUFFIX_ALPHABET[*b as usize % SUFFIX_ALPHABET.len()] as char).collect()
}

/// The deployment a pod belongs to, by its controller reference.
fn owner_key(pod: &Pod) -> Option<Key> {
    pod.metadata.controller().filter(|r| r.kind == "Deployment").map(|r| Key::new(Kind::Deployment, &pod.metadata.namespace, &r.name))
}

/// Running, and Ready when the agent reports readiness.
pub fn pod_is_ready(pod: &Pod) -> bool {
    pod.status.phase == PodPhase::Running
        && find_condition(&pod.status.conditions, conditions::READY).is_none_or(|c| c.status == conditions::TRUE)
}

/// Scale-down order: unbound before bound, Pending before Running, not ready before ready,
/// newest first.
fn deletion_rank(pod: &Pod) -> (bool, bool, bool, std::cmp::Reverse<Option<Time>>) {
    (pod.is_bound(), pod.status.phase == PodPhase::Running, pod_is_ready(pod), std::cmp::Reverse(pod.metadata.created_at))
}

fn new_pod(deployment: &Deployment, now: Time) -> Pod {
    let template = &deployment.spec.template;
    let mut pod = Pod {
        kind: "Pod".into(),
        metadata: ObjectMeta {
            name: format!("{}-{}", deployment.metadata.name, random_suffix()),
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
    let involved = events::reference(&Object::Deployment(deployment.clone()));
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
            Object::Pod(pod) => owner_key(pod).into_iter().collect(),
            _ => Vec::new(),
        }
    }

    fn all_keys(&self, store: &dyn Store) -> Vec<Key> {
        let mut keys: Vec<Key> = store.list(Kind::Deployment, None).1.iter().map(|d| Key::of(d)).collect();
        // Owners of pods whose deployment is gone: the cascade after a crash or a missed event.
        for pod in store.list(Kind::Pod, None).1 {
            if let Object::Pod(p) = &*pod
                && let Some(owner) = owner_key(p)
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
        let owned: Vec<Pod> = store
            .list(Kind::Pod, Some(namespace))
            .1
            .iter()
            .filter_map(|o| match &**o {
                Object::Pod(p) if owner_key(p).as_ref() == Some(key) => Some(p.clone()),
                _ => None,
            })
            .collect();

        // Terminating pods are on their way out: they are no replicas (as in Kubernetes'
        // ReplicaSet), so their replacements start at once, and nothing deletes them again.
        let owned: Vec<Pod> = owned.into_iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();

        let Some(deployment) = deployment else {
            // Cascade: the deployment is gone, so are its pods, each gracefully.
            if !owned.is_empty() {
                delete_ignoring_gone(store, &owned, now, ctx.config.node_monitor_grace).await.map_err(err)?;
                tracing::info!("deleting {} pods of deleted deployment {namespace}/{name}", owned.len());
            }
            return Ok(Action::AwaitChange);
        };

        // Pods of an earlier deployment with the same name are not ours: delete them.
        let (mine, strays): (Vec<Pod>, Vec<Pod>) =
            owned.into_iter().partition(|p| p.metadata.controller().is_some_and(|r| r.uid == deployment.metadata.uid));
        let (mut active, finished): (Vec<Pod>, Vec<Pod>) = mine.into_iter().partition(|p| !p.status.phase.is_terminal());
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
        if active.len() < want {
            for _ in active.len()..want {
                let pod = new_pod(&deployment, now);
                created.push(pod.metadata.name.clone());
                let involved = events::reference(&Object::Pod(pod.clone()));
                txn.push(ops::create(pod));
                txn.push(events::record(
                    events::new_event(
                        involved.clone(),
                        event_types::NORMAL,
                        "Created",
                        format!("Pod {} created", involved.name),
                        SOURCE_DEPLOYMENT_CONTROLLER,
                    ),
                    now,
                ));
            }
            txn.push(deployment_event(
                &deployment,
                event_types::NORMAL,
                "SuccessfulCreate",
                format!("Created pods: {}", created.join(", ")),
                now,
            ));
        } else if active.len() > want {
            active.sort_by_key(deletion_rank);
            let excess: Vec<Pod> = active.drain(..active.len() - want).collect();
            for pod in &excess {
                txn.push(delete_pod(pod, pod.metadata.resource_version, now, ctx.config.node_monitor_grace));
            }
            let names: Vec<&str> = excess.iter().map(|p| p.metadata.name.as_str()).collect();
            txn.push(deployment_event(
                &deployment,
                event_types::NORMAL,
                "SuccessfulDelete",
                format!("Deleted pods: {}", names.join(", ")),
                now,
            ));
        }
        if !txn.writes.is_empty() {
            store.commit(txn).await.map_err(err)?;
        }

        let ready = active.iter().filter(|p| pod_is_ready(p)).count() as i32;
        let status = DeploymentStatus {
            replicas: (active.len() + created.len()) as i32,
            ready_replicas: ready,
            available_replicas: ready,
            observed_generation: deployment.metadata.generation,
            conditions: deployment.status.conditions.clone(),
        };
        if status != deployment.status {
            let expected = deployment.metadata.resource_version;
            let write = ops::modify::<Deployment>(key.clone(), move |_, d| {
                if d.metadata.resource_version != expected {
                    return Err(StoreError::conflict("the deployment changed during the reconcile"));
                }
                d.status = status;
                Ok(())
            });
            match store.commit(Txn::new().with(write)).await {
                Ok(_) | Err(StoreError::NotFound { .. }) => {}
                // A newer version will be reconciled from its own watch event.
                Err(StoreError::Conflict(_)) => return Ok(Action::AwaitChange),
                Err(e) => return Err(err(e)),
            }
        }
        Ok(Action::AwaitChange)
    }
}

/// The graceful delete of one of our pods: only that pod (its uid), at `resource_version`
/// when non-zero, with the pod's own grace period.
fn delete_pod(pod: &Pod, resource_version: u64, now: Time, node_monitor_grace: Duration) -> crate::store::Write {
    let request = ops::PodDelete { resource_version, uid: Some(pod.metadata.uid.clone()), ..ops::PodDelete::default() };
    ops::delete_pod(&pod.metadata.namespace, &pod.metadata.name, request, now, node_monitor_grace)
}

/// Deletes `pods` gracefully, treating pods already gone as deleted.
async fn delete_ignoring_gone(store: &Arc<dyn Store>, pods: &[Pod], now: Time, node_monitor_grace: Duration) -> Result<(), StoreError> {
    let txn = |pods: &mut dyn Iterator<Item = &Pod>| {
        let mut txn = Txn::new();
        for pod in pods {
            txn.push(delete_pod(pod, 0, now, node_monitor_grace));
        }
        txn
    };
    match store.commit(txn(&mut pods.iter())).await {
        Ok(_) => Ok(()),
        Err(StoreError::NotFound { .. }) => {
            let mut left = pods.iter().filter(|p| store.get(&Key::new(Kind::Pod, &p.metadata.namespace, &p.metadata.name)).is_some());
            store.commit(txn(&mut left)).await.map(|_| ())
        }
        Err(e) => Err(e),
    }
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

    async fn reconcile(ctx: &Context) {
        let key = Key::new(Kind::Deployment, "default", "web");
        DeploymentController.reconcile(&key, ctx, chrono::Utc::now()).await.unwrap();
    }

    #[tokio::test]
    async fn scales_up_with_owned_named_pods_and_is_idempotent() {
        let ctx = fixtures::context().await;
        let d = deployment(3);
        fixtures::put(&ctx, Object::Deployment(d.clone())).await;
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
        fixtures::put(&ctx, Object::Deployment(d.clone())).await;
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
        fixtures::put(&ctx, Object::Deployment(d.clone())).await;
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
        fixtures::put(&ctx, Object::Deployment(d.clone())).await;
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
        fixtures::put(&ctx, Object::Deployment(deployment(2))).await;
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
