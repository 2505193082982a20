//! The node's pod workers: one per pod (one pod's operations serialized, pods in parallel),
//! each handed its pod's latest state and woken to look again; a full list syncs them all,
//! and the sweep that follows removes containers and sandboxes whose pod is gone.

use std::collections::{HashMap, HashSet};
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
        workers.insert(uid.clone(), WorkerHandle { updates: tx });
        drop(workers);
        let manager = self.clone();
        tokio::spawn(async move { manager.run_worker(uid, rx).await });
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
            handle.updates.send_modify(|_| {});
        }
    }

    /// Wakes the worker of the pod whose uid reads `clean_uid` once [`clean`]ed (a sandbox
    /// name's).
    pub(crate) fn poke_sandbox_owner(&self, clean_uid: &str) {
        for (uid, handle) in self.workers().iter() {
            if clean(uid) == clean_uid {
                handle.updates.send_modify(|_| {});
            }
        }
    }

    pub fn poke_all(&self) {
        for handle in self.workers().values() {
            handle.updates.send_modify(|_| {});
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
        if let Some(sandboxes) = &self.ctx.sandboxes {
            sandboxes.reclaim(&present).await;
            sandboxes.keep_rules().await;
        }
    }

    async fn run_worker(self: Arc<Self>, uid: String, mut updates: watch::Receiver<PodUpdate>) {
        let mut worker = PodWorker::new(self.ctx.clone());
        let busy = || self.ctx.sandboxes.as_ref().map(|sandboxes| sandboxes.busy());
        let mut seen_version = 0;
        let mut wake_at: Option<Instant> = None;
        // How long to wait before confirming a terminated pod's deletion again (doubling).
        let mut confirm_delay = Duration::ZERO;
        loop {
            let update = updates.borrow_and_update().clone();
            let requeue = match &update {
                // The echo of our own status write: nothing to do, keep the pending wake-up.
                PodUpdate::Present(pod)
                    if pod.metadata.deletion_timestamp.is_none() && pod.metadata.resource_version > seen_version && worker.is_echo(pod) =>
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
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use bytes::Bytes;
    use chrono::Utc;
    use futures::stream::BoxStream;
    use shared::api::{ApiErrorStatus, Heartbeat, List};
    use shared::backoff::Backoff;
    use shared::model::{Container, ContainerState, Event, Node, ObjectMeta, PodPhase, PodSpec, PodStatus};

    use super::*;
    use crate::client::{ApiClient, Error as ClientError, Result as ClientResult, WatchStream};
    use crate::network::PodNetwork;
    use crate::runtime::{ContainerConfig, ContainerInfo, ContainerRuntime, Result as RuntimeResult, RuntimeEvent, SimulatedRuntime};
    use crate::runtime_events::follow_runtime_events;
    use crate::sandbox::Sandboxes;

    /// What the server answers `code` with.
    fn answer(code: u16, reason: &str, message: &str) -> ClientError {
        let status = ApiErrorStatus { code, reason: reason.into(), message: message.into(), details: vec![] };
        ClientError::Api { action: "confirm".into(), status }
    }

    /// Records deletion confirmations; the first `failures` of them fail, then it answers
    /// `then` (None: success).
    struct ConfirmingApi {
        confirmed: Mutex<Vec<String>>,
        /// The status the worker last wrote.
        status: Mutex<Option<PodStatus>>,
        /// Every status the worker wrote.
        statuses: Mutex<Vec<PodStatus>>,
        failures: AtomicUsize,
        then: fn() -> Option<ClientError>,
        /// Every event, and when it came.
        events: Mutex<Vec<(Instant, Event)>>,
        /// Cancelled at the 50th event: a worker that retries without pause stops there.
        too_many_events: CancellationToken,
        /// Bumped by every call, for a test to wait on what the worker did.
        calls: watch::Sender<usize>,
    }

    impl ConfirmingApi {
        fn new(failures: usize, then: fn() -> Option<ClientError>) -> Self {
            ConfirmingApi {
                confirmed: Mutex::new(vec![]),
                status: Mutex::new(None),
                statuses: Mutex::new(vec![]),
                failures: AtomicUsize::new(failures),
                then,
                events: Mutex::new(vec![]),
                too_many_events: CancellationToken::new(),
                calls: watch::Sender::new(0),
            }
        }

        fn called(&self) {
            self.calls.send_modify(|n| *n += 1);
        }

        /// Waits until `check` holds, looking again after each call the worker makes (its
        /// last one, such as a confirmation, is also its last step: a test runs on one thread).
        async fn until(&self, what: &str, check: impl Fn() -> bool) {
            let mut calls = self.calls.subscribe();
            while !check() {
                let called = tokio::time::timeout(Duration::from_secs(10), calls.changed()).await;
                assert!(called.is_ok(), "{what} did not happen within 10 s");
            }
        }

        /// When each event of `reason` came, counted from `since`.
        fn times_of(&self, reason: &str, since: Instant) -> Vec<Duration> {
            self.events.lock().unwrap().iter().filter(|(_, e)| e.reason == reason).map(|(at, _)| *at - since).collect()
        }
    }

    #[async_trait]
    impl ApiClient for ConfirmingApi {
        async fn cluster_id(&self) -> ClientResult<String> {
            Ok("c1".into())
        }
        async fn register_node(&self, node: &Node) -> ClientResult<Node> {
            Ok(node.clone())
        }
        async fn renew_lease(&self, _: &str) -> ClientResult<shared::model::Lease> {
            Ok(shared::model::Lease::default())
        }
        async fn heartbeat(&self, _: &str, _: &Heartbeat) -> ClientResult<()> {
            Ok(())
        }
        async fn list_pods(&self, _: &str) -> ClientResult<List<Pod>> {
            Ok(List { kind: "PodList".into(), resource_version: 0, items: vec![] })
        }
        async fn watch_pods(&self, _: &str, _: u64) -> ClientResult<WatchStream> {
            Ok(Box::pin(futures::stream::empty()))
        }
        async fn update_pod_status(&self, pod: &Pod) -> ClientResult<Pod> {
            *self.status.lock().unwrap() = Some(pod.status.clone());
            self.statuses.lock().unwrap().push(pod.status.clone());
            self.called();
            Ok(pod.clone())
        }
        async fn delete_pod_now(&self, pod: &Pod) -> ClientResult<()> {
            self.confirmed.lock().unwrap().push(pod.metadata.uid.clone());
            let failed = self.failures.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
            self.called();
            if failed {
                return Err(answer(503, "Unavailable", "busy"));
            }
            (self.then)().map_or(Ok(()), Err)
        }
        async fn create_event(&self, event: &Event) -> ClientResult<()> {
            let mut events = self.events.lock().unwrap();
            events.push((Instant::now(), event.clone()));
            if events.len() >= 50 {
                self.too_many_events.cancel();
            }
            Ok(())
        }
    }

    fn manager(failures: usize, then: fn() -> Option<ClientError>) -> (Arc<PodManager>, Arc<ConfirmingApi>, Arc<SimulatedRuntime>) {
        let api = Arc::new(ConfirmingApi::new(failures, then));
        let runtime = Arc::new(SimulatedRuntime::new(Duration::ZERO));
        let ctx = NodeContext {
            node_name: "n1".into(),
            cluster: "c1".into(),
            address: "127.0.0.1".into(),
            network: String::new(),
            runtime: runtime.clone(),
            api: api.clone(),
            events: api.clone(),
            backoff: Backoff { base: Duration::from_millis(20), max: Duration::from_millis(80) },
            sandboxes: None,
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
        let running = || api.status.lock().unwrap().clone().filter(|s| s.phase == PodPhase::Running);
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
    async fn a_pull_policy_of_always_pulls_a_present_image_and_the_default_uses_it() {
        for (policy, wanted) in [("Always", "Successfully pulled image \"minimal\""), ("", "already present on machine")] {
            let (manager, api, _runtime) = manager(0, || None);
            let mut pod = pod();
            pod.spec.containers[0].image_pull_policy = policy.into();
            manager.upsert(pod);
            api.until("Running", || api.status.lock().unwrap().as_ref().is_some_and(|s| s.phase == PodPhase::Running)).await;
            let events = api.events.lock().unwrap();
            let pulled: Vec<&str> = events.iter().filter(|(_, e)| e.reason == "Pulled").map(|(_, e)| e.message.as_str()).collect();
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

    /// A runtime whose pod sandboxes die as they start: the agent removes each again, and
    /// the engine reports its end (`die`, `destroy`) as Docker would.
    struct DyingSandboxes(SimulatedRuntime);

    #[async_trait]
    impl ContainerRuntime for DyingSandboxes {
        fn kind(&self) -> &'static str {
            self.0.kind()
        }
        async fn version(&self) -> RuntimeResult<String> {
            self.0.version().await
        }
        async fn has_image(&self, image: &str) -> RuntimeResult<bool> {
            self.0.has_image(image).await
        }
        async fn pull_image(&self, image: &str) -> RuntimeResult<()> {
            self.0.pull_image(image).await
        }
        async fn create(&self, config: &ContainerConfig) -> RuntimeResult<String> {
            self.0.create(config).await
        }
        async fn start(&self, id: &str) -> RuntimeResult<()> {
            self.0.start(id).await?;
            if self.0.inspect(id).await?.is_some_and(|info| info.labels.contains_key(LABEL_SANDBOX)) {
                self.0.stop(id, Duration::ZERO).await?;
            }
            Ok(())
        }
        async fn rename(&self, id: &str, name: &str) -> RuntimeResult<()> {
            self.0.rename(id, name).await
        }
        async fn stop(&self, id: &str, grace: Duration) -> RuntimeResult<()> {
            self.0.stop(id, grace).await
        }
        async fn remove(&self, id: &str) -> RuntimeResult<()> {
            self.0.remove(id).await
        }
        async fn inspect(&self, id: &str) -> RuntimeResult<Option<ContainerInfo>> {
            self.0.inspect(id).await
        }
        async fn list(&self, labels: &[(&str, &str)]) -> RuntimeResult<Vec<ContainerInfo>> {
            self.0.list(labels).await
        }
        fn logs(&self, id: &str, tail: Option<u64>, follow: bool) -> BoxStream<'static, RuntimeResult<Bytes>> {
            self.0.logs(id, tail, follow)
        }
        fn events(&self, labels: &[(&str, &str)]) -> BoxStream<'static, RuntimeResult<RuntimeEvent>> {
            self.0.events(labels)
        }
    }

    /// A node whose pods' sandboxes die as they start, with a 1 s back-off doubling to 8 s,
    /// following its runtime's events as the agent does, until the API has seen too many events.
    fn dying_sandboxes() -> (Arc<PodManager>, Arc<ConfirmingApi>) {
        let api = Arc::new(ConfirmingApi::new(0, || None));
        let runtime: Arc<dyn ContainerRuntime> = Arc::new(DyingSandboxes(SimulatedRuntime::new(Duration::ZERO)));
        let sandboxes = Sandboxes::new(runtime.clone(), "n1", "c1", PodNetwork::Docker(String::new()), 0);
        let ctx = NodeContext {
            node_name: "n1".into(),
            cluster: "c1".into(),
            address: "127.0.0.1".into(),
            network: String::new(),
            runtime,
            api: api.clone(),
            events: api.clone(),
            backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(8)),
            sandboxes: Some(sandboxes),
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
        api.until("a status", || api.status.lock().unwrap().is_some()).await;
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
