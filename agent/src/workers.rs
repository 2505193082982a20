//! The node's pod workers: one per pod (one pod's operations serialized, pods in parallel),
//! each handed its pod's latest state and woken to look again; a full list syncs them all,
//! and the sweep that follows removes containers, sandboxes and volumes whose pod is gone.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shared::model::Pod;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::pod::context::NodeContext;
use crate::pod::termination::{grace_period, hurry, remove_orphan};
use crate::pod::worker::PodWorker;
use crate::runtime::{LABEL_CLUSTER, LABEL_NODE, LABEL_POD_UID, LABEL_SANDBOX};
use crate::sandbox::{Owner, clean, owner};

/// What a worker is told about its pod.
#[derive(Debug, Clone)]
enum PodUpdate {
    Present(Pod),
    Deleted(Pod),
}

struct WorkerHandle {
    updates: watch::Sender<PodUpdate>,
    /// Set by a poke: the next pass reconciles even if the pod it is handed is the echo of
    /// the worker's own status write (the two arrive as one change of `updates`).
    poked: Arc<AtomicBool>,
}

impl WorkerHandle {
    fn poke(&self) {
        self.poked.store(true, Ordering::Release);
        self.updates.send_modify(|_| {});
    }
}

/// The pods of one node and their workers.
pub struct PodManager {
    pub(crate) ctx: Arc<NodeContext>,
    workers: Mutex<HashMap<String, WorkerHandle>>,
    shutdown: CancellationToken,
}

impl PodManager {
    pub fn new(ctx: Arc<NodeContext>, shutdown: CancellationToken) -> Arc<Self> {
        Arc::new(PodManager { ctx, workers: Mutex::new(HashMap::new()), shutdown })
    }

    fn workers(&self) -> std::sync::MutexGuard<'_, HashMap<String, WorkerHandle>> {
        self.workers.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The uids of the pods that have a worker.
    pub fn pod_uids(&self) -> HashSet<String> {
        self.workers().keys().cloned().collect()
    }

    /// A pod was added or changed: hand it to its worker, starting one if needed.
    pub fn upsert(self: &Arc<Self>, pod: Pod) {
        let uid = pod.metadata.uid.clone();
        if uid.is_empty() {
            tracing::warn!(pod = %pod.metadata.key(), "ignoring a pod without uid");
            return;
        }
        let mut workers = self.workers();
        if let Some(handle) = workers.get(&uid) {
            handle.updates.send_replace(PodUpdate::Present(pod));
            return;
        }
        let (tx, rx) = watch::channel(PodUpdate::Present(pod));
        let poked = Arc::new(AtomicBool::new(false));
        workers.insert(uid.clone(), WorkerHandle { updates: tx, poked: poked.clone() });
        drop(workers);
        let manager = self.clone();
        tokio::spawn(async move { manager.run_worker(uid, rx, poked).await });
    }

    /// A pod was deleted: its worker stops and removes the containers, then ends. (A pod
    /// that is only terminating comes through [`Self::upsert`]; its worker also tells the
    /// server once the containers are gone.)
    pub fn delete(&self, pod: Pod) {
        if let Some(handle) = self.workers().get(&pod.metadata.uid) {
            handle.updates.send_replace(PodUpdate::Deleted(pod));
        }
    }

    /// Wakes a pod's worker to look again (a container died, started, …).
    pub fn poke(&self, uid: &str) {
        if let Some(handle) = self.workers().get(uid) {
            handle.poke();
        }
    }

    /// Wakes the worker of the pod whose uid reads `clean_uid` once [`clean`]ed (a sandbox
    /// name's).
    pub(crate) fn poke_sandbox_owner(&self, clean_uid: &str) {
        for (uid, handle) in self.workers().iter() {
            if clean(uid) == clean_uid {
                handle.poke();
            }
        }
    }

    pub fn poke_all(&self) {
        for handle in self.workers().values() {
            handle.poke();
        }
    }

    /// Applies a full list of the node's pods: every listed pod to its worker, every other
    /// worker's pod deleted, and containers of unknown pods removed.
    pub fn full_sync(self: &Arc<Self>, pods: Vec<Pod>) {
        let listed: HashSet<String> = pods.iter().map(|p| p.metadata.uid.clone()).collect();
        let gone: Vec<Pod> = {
            let workers = self.workers();
            workers
                .iter()
                .filter(|(uid, _)| !listed.contains(*uid))
                .filter_map(|(_, handle)| match &*handle.updates.borrow() {
                    PodUpdate::Present(pod) => Some(pod.clone()),
                    PodUpdate::Deleted(_) => None,
                })
                .collect()
        };
        for pod in gone {
            self.delete(pod);
        }
        for pod in pods {
            self.upsert(pod);
        }
        let manager = self.clone();
        tokio::spawn(async move { manager.sweep_orphans().await });
    }

    /// Removes containers of this node whose pod has no worker, and sandboxes claimed by such
    /// a pod. A pod known before or after the (slow) list is left alone: its worker is
    /// creating or removing containers itself. The warm pool is the pool's business. Then
    /// the networks of sandboxes that are gone (removed behind the agent's back) are taken
    /// down and their addresses freed, and the pod network's node-wide rules checked.
    async fn sweep_orphans(&self) {
        let known_before = self.pod_uids();
        let node = self.ctx.node_name.clone();
        let containers = match self.ctx.runtime.list(&[(LABEL_NODE, node.as_str()), (LABEL_CLUSTER, self.ctx.cluster.as_str())]).await {
            Ok(containers) => containers,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list containers to sweep orphans");
                return;
            }
        };
        let known_after = self.pod_uids();
        let present: HashSet<String> = containers.iter().map(|c| c.id.clone()).collect();
        let known: HashSet<String> = known_before.iter().chain(&known_after).map(|uid| clean(uid)).collect();
        let orphans = containers.into_iter().filter(|c| {
            if c.labels.contains_key(LABEL_SANDBOX) {
                return match owner(&c.name) {
                    Owner::Pool => false,
                    Owner::Pod(uid) => !known.contains(uid),
                    Owner::Unknown => true,
                };
            }
            let uid = c.label(LABEL_POD_UID);
            !known_before.contains(uid) && !known_after.contains(uid)
        });
        let removals = orphans.map(|info| {
            let runtime = self.ctx.runtime.clone();
            let sandboxes = self.ctx.sandboxes.clone();
            async move {
                let removed = match sandboxes.filter(|_| info.labels.contains_key(LABEL_SANDBOX)) {
                    Some(sandboxes) => {
                        // Nothing of the pod's runs in it: no grace period to give.
                        tracing::info!(sandbox = %info.name, "removing a sandbox whose pod is gone");
                        sandboxes.remove(&info.id).await
                    }
                    None => remove_orphan(runtime.as_ref(), &info).await,
                };
                if let Err(e) = removed {
                    tracing::warn!(error = %e, "cannot remove an orphan container");
                }
            }
        });
        futures::future::join_all(removals).await;
        // Volumes of pods the agent does not know (gone while it was away): their
        // containers went just above.
        for uid in self.ctx.volumes.pods_with_volumes() {
            if known_before.contains(&uid) || self.pod_uids().contains(&uid) {
                continue;
            }
            tracing::info!(pod_uid = %uid, "removing the volumes of a pod that is gone");
            if let Err(e) = self.ctx.volumes.tear_down(&uid) {
                tracing::warn!(error = %e, "cannot remove the volumes of a pod that is gone");
            }
        }
        if let Some(sandboxes) = &self.ctx.sandboxes {
            sandboxes.reclaim(&present).await;
            sandboxes.keep_rules().await;
        }
    }

    async fn run_worker(self: Arc<Self>, uid: String, mut updates: watch::Receiver<PodUpdate>, poked: Arc<AtomicBool>) {
        // A probe's changed result wakes this worker as a change to its pod does.
        let wake = {
            let (manager, uid) = (Arc::downgrade(&self), uid.clone());
            Arc::new(move || {
                if let Some(manager) = manager.upgrade() {
                    manager.poke(&uid);
                }
            })
        };
        let mut worker = PodWorker::new(self.ctx.clone(), wake);
        let busy = || self.ctx.sandboxes.as_ref().map(|sandboxes| sandboxes.busy());
        let mut seen_version = 0;
        let mut wake_at: Option<Instant> = None;
        // How long to wait before confirming a terminated pod's deletion again (doubling).
        let mut confirm_delay = Duration::ZERO;
        loop {
            let update = updates.borrow_and_update().clone();
            let poked = poked.swap(false, Ordering::AcqRel);
            let requeue = match &update {
                // The echo of our own status write, and nothing else woke us: nothing to do,
                // keep the pending wake-up.
                PodUpdate::Present(pod)
                    if !poked
                        && pod.metadata.deletion_timestamp.is_none()
                        && pod.metadata.resource_version > seen_version
                        && worker.is_echo(pod) =>
                {
                    seen_version = pod.metadata.resource_version;
                    wake_at.map(|at| at.saturating_duration_since(Instant::now()))
                }
                PodUpdate::Present(pod) if pod.metadata.deletion_timestamp.is_none() => {
                    seen_version = pod.metadata.resource_version;
                    let _busy = busy();
                    match worker.reconcile(pod).await {
                        Ok(requeue) => requeue,
                        Err(e) => {
                            tracing::warn!(error = %e, "reconcile failed; retrying");
                            Some(Duration::from_secs(2))
                        }
                    }
                }
                PodUpdate::Present(pod) | PodUpdate::Deleted(pod) => {
                    let busy = busy();
                    let mut grace = grace_period(pod);
                    let terminate = worker.terminate(pod);
                    tokio::pin!(terminate);
                    // Stopping may take the whole grace period: a second DELETE that shortens
                    // it hurries the containers meanwhile.
                    let terminated = loop {
                        tokio::select! {
                            outcome = &mut terminate => break outcome,
                            changed = updates.changed() => {
                                if changed.is_err() {
                                    break terminate.await;
                                }
                                let newer = match &*updates.borrow() {
                                    PodUpdate::Present(newer) | PodUpdate::Deleted(newer) => grace_period(newer),
                                };
                                if newer < grace {
                                    grace = newer;
                                    tracing::info!(pod = %pod.metadata.key(), grace = ?grace, "grace period shortened; stopping sooner");
                                    if let Err(e) = hurry(&self.ctx, pod, grace).await {
                                        tracing::warn!(error = %e, "cannot stop the pod's containers sooner");
                                    }
                                }
                            }
                        }
                    };
                    drop(busy);
                    match terminated {
                        Ok(()) if matches!(update, PodUpdate::Deleted(_)) => {
                            tracing::info!(pod = %pod.metadata.key(), "pod deleted; containers removed");
                            break;
                        }
                        // Terminating: its containers are gone, so the server may remove it.
                        Ok(()) => match self.ctx.api.delete_pod_now(pod).await {
                            Ok(()) => {
                                tracing::info!(pod = %pod.metadata.key(), "pod terminated; its deletion is confirmed");
                                break;
                            }
                            Err(e) if e.is_not_found() || e.is_conflict() => {
                                tracing::info!(pod = %pod.metadata.key(), "pod terminated; the server had removed it already");
                                break;
                            }
                            Err(e) => {
                                confirm_delay = self.ctx.backoff.next(confirm_delay);
                                tracing::warn!(error = %e, retry_in = ?confirm_delay, "cannot confirm the pod's deletion; retrying");
                                Some(confirm_delay)
                            }
                        },
                        Err(e) => {
                            tracing::warn!(error = %e, "termination failed; retrying");
                            Some(Duration::from_secs(1))
                        }
                    }
                }
            };
            wake_at = requeue.map(|delay| Instant::now() + delay);
            let sleep = async {
                match wake_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = updates.changed() => if changed.is_err() { return },
                _ = sleep => {}
                _ = self.shutdown.cancelled() => return,
            }
        }
        let mut workers = self.workers();
        if workers.get(&uid).is_some_and(|h| h.updates.subscribe().same_channel(&updates)) {
            workers.remove(&uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use shared::backoff::Backoff;
    use shared::model::{Container, ContainerState, ObjectMeta, PodPhase, PodSpec};

    use super::*;
    use crate::client::Error as ClientError;
    use crate::fixtures::{self, FaultyRuntime, RecordingApi, answer};
    use crate::network::PodNetwork;
    use crate::runtime::{ContainerRuntime, SimulatedRuntime};
    use crate::runtime_events::follow_runtime_events;
    use crate::sandbox::Sandboxes;

    fn manager(failures: usize, then: fn() -> Option<ClientError>) -> (Arc<PodManager>, Arc<RecordingApi>, Arc<SimulatedRuntime>) {
        let api = Arc::new(RecordingApi::confirming(failures, then));
        let runtime = Arc::new(SimulatedRuntime::new(Duration::ZERO));
        let ctx = NodeContext {
            network: String::new(),
            backoff: Backoff { base: Duration::from_millis(20), max: Duration::from_millis(80) },
            ..fixtures::context(api.clone(), runtime.clone())
        };
        (PodManager::new(Arc::new(ctx), CancellationToken::new()), api, runtime)
    }

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: "web".into(),
                namespace: "default".into(),
                uid: "uid-1".into(),
                resource_version: 1,
                ..Default::default()
            },
            spec: PodSpec {
                node_name: "n1".into(),
                containers: vec![Container { name: "main".into(), image: "minimal".into(), ..Default::default() }],
                termination_grace_period_seconds: Some(5),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn terminating(mut pod: Pod) -> Pod {
        pod.metadata.resource_version += 1;
        pod.metadata.deletion_timestamp = Some(Utc::now());
        pod.metadata.deletion_grace_period_seconds = Some(0);
        pod
    }

    async fn containers(runtime: &SimulatedRuntime) -> usize {
        runtime.list(&[(LABEL_POD_UID, "uid-1")]).await.unwrap().len()
    }

    // Every test here runs on the paused clock: back-offs and timeouts take no real time.
    #[tokio::test(start_paused = true)]
    async fn a_terminating_pod_loses_its_containers_then_its_deletion_is_confirmed_once() {
        let (manager, api, runtime) = manager(0, || None);
        manager.upsert(pod());
        let running = || api.last_status().filter(|s| s.phase == PodPhase::Running);
        api.until("Running", || running().is_some()).await;
        assert_eq!(containers(&runtime).await, 1);
        // Only the deletion marks differ from the worker's own last write: not an echo.
        let mut pod = terminating(pod());
        pod.status = running().unwrap();
        manager.upsert(pod);
        api.until("the worker's end", || manager.pod_uids().is_empty()).await;
        assert_eq!(containers(&runtime).await, 0, "confirmed before its containers were gone");
        assert_eq!(*api.confirmed.lock().unwrap(), vec!["uid-1".to_string()]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_poke_that_comes_with_the_echo_of_the_workers_own_status_is_not_lost() {
        let (manager, api, runtime) = manager(0, || None);
        manager.upsert(pod());
        let running = || api.last_status().filter(|s| s.phase == PodPhase::Running);
        api.until("Running", || running().is_some()).await;
        let container = runtime.list(&[(LABEL_POD_UID, "uid-1")]).await.unwrap().remove(0);
        runtime.stop(&container.id, Duration::ZERO).await.unwrap();
        // The container's end pokes the worker, and the watch brings the echo of its last
        // status write before the worker runs: one wake-up for both.
        let mut echo = pod();
        echo.metadata.resource_version = 2;
        echo.status = running().unwrap();
        manager.poke("uid-1");
        manager.upsert(echo);
        api.until("the restart reported", || {
            api.last_status().is_some_and(|s| s.container_statuses.first().is_some_and(|c| c.restart_count == 1))
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_pull_policy_of_always_pulls_a_present_image_and_the_default_uses_it() {
        for (policy, wanted) in [("Always", "Successfully pulled image \"minimal\""), ("", "already present on machine")] {
            let (manager, api, _runtime) = manager(0, || None);
            let mut pod = pod();
            pod.spec.containers[0].image_pull_policy = policy.into();
            manager.upsert(pod);
            api.until("Running", || api.last_status().is_some_and(|s| s.phase == PodPhase::Running)).await;
            let pulled = api.messages_of("Pulled");
            assert!(pulled.len() == 1 && pulled[0].contains(wanted), "policy {policy:?}: {pulled:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_confirmation_is_retried_until_the_server_takes_it() {
        let (manager, api, _runtime) = manager(3, || None);
        manager.upsert(terminating(pod()));
        api.until("the worker's end", || manager.pod_uids().is_empty()).await;
        assert_eq!(api.confirmed.lock().unwrap().len(), 4, "three failures, then the confirmation");
    }

    #[tokio::test(start_paused = true)]
    async fn not_found_and_conflict_both_mean_the_pod_is_gone() {
        for then in
            [(|| Some(answer(404, "NotFound", "gone"))) as fn() -> Option<ClientError>, || Some(answer(409, "Conflict", "uid differs"))]
        {
            let (manager, api, _runtime) = manager(0, then);
            manager.upsert(terminating(pod()));
            api.until("the worker's end", || manager.pod_uids().is_empty()).await;
            assert_eq!(api.confirmed.lock().unwrap().len(), 1, "no retry after the pod is known gone");
        }
    }

    /// A node whose pods' sandboxes die as they start, with a 1 s back-off doubling to 8 s,
    /// following its runtime's events as the agent does, until the API has seen too many events.
    fn dying_sandboxes() -> (Arc<PodManager>, Arc<RecordingApi>) {
        let api = Arc::new(RecordingApi::default());
        let runtime: Arc<dyn ContainerRuntime> = Arc::new(FaultyRuntime { sandboxes_die: true, ..FaultyRuntime::default() });
        let sandboxes = Sandboxes::new(runtime.clone(), "n1", "c1", PodNetwork::Docker(String::new()), 0);
        let ctx = NodeContext {
            network: String::new(),
            backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(8)),
            sandboxes: Some(sandboxes),
            ..fixtures::context(api.clone(), runtime)
        };
        let manager = PodManager::new(Arc::new(ctx), api.too_many_events.clone());
        tokio::spawn(follow_runtime_events(manager.clone(), api.too_many_events.clone()));
        (manager, api)
    }

    /// Two containers share a namespace, so the pod needs a sandbox on Docker's network too.
    fn pod_with_a_sidecar() -> Pod {
        let mut pod = pod();
        let sidecar = Container { name: "sidecar".into(), ..pod.spec.containers[0].clone() };
        pod.spec.containers.push(sidecar);
        pod
    }

    #[tokio::test(start_paused = true)]
    async fn a_pod_whose_sandbox_cannot_be_made_is_still_container_creating_and_says_why() {
        let (manager, api) = dying_sandboxes();
        manager.upsert(pod_with_a_sidecar());
        api.until("a status", || api.last_status().is_some()).await;
        // Each status written, the one of the failed try as those of the back-off after it.
        for status in api.statuses.lock().unwrap().iter() {
            assert_eq!(status.phase, PodPhase::Pending);
            assert_eq!(status.container_statuses.len(), 2);
            for container in &status.container_statuses {
                match &container.state {
                    ContainerState::Waiting { reason, message } => {
                        assert_eq!(reason, "ContainerCreating", "{container:?}");
                        assert!(message.contains("the sandbox stopped at once"), "{message}");
                    }
                    other => panic!("{} is {other:?}", container.name),
                }
            }
        }
        assert_eq!(api.times_of("FailedCreatePodSandBox", Instant::now()).len(), 1, "one sandbox for the pod, not one per container");
    }

    #[tokio::test(start_paused = true)]
    async fn a_pod_whose_sandbox_dies_retries_on_its_back_off_not_when_the_sandbox_ends() {
        let (manager, api) = dying_sandboxes();
        let began = Instant::now();
        manager.upsert(pod_with_a_sidecar());
        // The paused clock moves on only while every task waits: 16 s of back-off, at once.
        tokio::time::sleep(Duration::from_millis(15_500)).await;
        let attempts = api.times_of("FailedCreatePodSandBox", began);
        let seconds: Vec<u64> = attempts.iter().map(Duration::as_secs).collect();
        assert_eq!(seconds, [0, 1, 3, 7, 15], "a try, then after 1, 2, 4 and 8 s: {attempts:?}");
    }
}
