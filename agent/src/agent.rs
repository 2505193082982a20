//! The node's pod loop: a worker per pod (one pod's operations serialized, pods in parallel),
//! fed by the server's watch stream with a full re-list every resync period, woken by runtime
//! events, plus the sweep that removes containers and sandboxes whose pod is gone.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use shared::api::WatchEventType;
use shared::model::{Object, Pod};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::Error as ClientError;
use crate::pod::{NodeContext, PodWorker, remove_orphan};
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
    ctx: Arc<NodeContext>,
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

    /// A pod was deleted: its worker stops and removes the containers, then ends.
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
    fn poke_sandbox_owner(&self, clean_uid: &str) {
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
    /// creating or removing containers itself. The warm pool is the pool's business.
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
            async move {
                let removed = if info.labels.contains_key(LABEL_SANDBOX) {
                    // Nothing of the pod's runs in it: no grace period to give.
                    tracing::info!(sandbox = %info.name, "removing a sandbox whose pod is gone");
                    runtime.remove(&info.id).await
                } else {
                    remove_orphan(runtime.as_ref(), &info).await
                };
                if let Err(e) = removed {
                    tracing::warn!(error = %e, "cannot remove an orphan container");
                }
            }
        });
        futures::future::join_all(removals).await;
    }

    async fn run_worker(self: Arc<Self>, uid: String, mut updates: watch::Receiver<PodUpdate>) {
        let mut worker = PodWorker::new(self.ctx.clone());
        let busy = || self.ctx.sandboxes.as_ref().map(|sandboxes| sandboxes.busy());
        let mut seen_version = 0;
        let mut wake_at: Option<Instant> = None;
        loop {
            let update = updates.borrow_and_update().clone();
            let requeue = match &update {
                // The echo of our own status write: nothing to do, keep the pending wake-up.
                PodUpdate::Present(pod) if pod.metadata.resource_version > seen_version && worker.is_echo(pod) => {
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
                    let terminated = worker.terminate(pod).await;
                    drop(busy);
                    match terminated {
                        Ok(()) if matches!(update, PodUpdate::Deleted(_)) => {
                            tracing::info!(pod = %pod.metadata.key(), "pod deleted; containers removed");
                            break;
                        }
                        Ok(()) => None,
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

/// Lists the node's pods and watches them, re-listing every `resync` (and on 410 Gone);
/// reconnects and resumes from the last resource_version when the stream drops. Losing the
/// server never touches running containers.
pub async fn watch_pods(manager: Arc<PodManager>, resync: Duration, shutdown: CancellationToken) {
    let api = manager.ctx.api.clone();
    let node = manager.ctx.node_name.clone();
    let mut retry = Duration::from_millis(200);
    loop {
        let list = tokio::select! {
            list = api.list_pods(&node) => list,
            _ = shutdown.cancelled() => return,
        };
        let list = match list {
            Ok(list) => list,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list pods; containers keep running, retrying");
                tokio::select! {
                    _ = tokio::time::sleep(retry) => {}
                    _ = shutdown.cancelled() => return,
                }
                retry = (retry * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        retry = Duration::from_millis(200);
        let mut resource_version = list.resource_version;
        manager.full_sync(list.items);
        let resync_at = Instant::now() + resync;
        'watch: while Instant::now() < resync_at {
            let stream = tokio::select! {
                stream = api.watch_pods(&node, resource_version) => stream,
                _ = shutdown.cancelled() => return,
            };
            let mut stream = match stream {
                Ok(stream) => stream,
                Err(ClientError::Gone(rv)) => {
                    tracing::info!(resource_version = rv, "watch history gone; listing again");
                    break 'watch;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot watch pods; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => continue 'watch,
                        _ = tokio::time::sleep_until(resync_at) => break 'watch,
                        _ = shutdown.cancelled() => return,
                    }
                }
            };
            loop {
                let next = tokio::select! {
                    next = stream.next() => next,
                    _ = tokio::time::sleep_until(resync_at) => break 'watch,
                    _ = shutdown.cancelled() => return,
                };
                let event = match next {
                    Some(Ok(event)) => event,
                    Some(Err(ClientError::Gone(rv))) => {
                        tracing::info!(resource_version = rv, "watch history gone mid-stream; listing again");
                        break 'watch;
                    }
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "pod watch interrupted; resuming");
                        break;
                    }
                    None => break,
                };
                resource_version = resource_version.max(event.resource_version);
                let pod = match event.object {
                    Some(Object::Pod(pod)) => pod,
                    _ => continue,
                };
                match event.type_ {
                    WatchEventType::Added | WatchEventType::Modified if pod.spec.node_name == node => manager.upsert(pod),
                    WatchEventType::Added | WatchEventType::Modified | WatchEventType::Deleted => manager.delete(pod),
                    WatchEventType::Bookmark => {}
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = shutdown.cancelled() => return,
            }
        }
    }
}

/// Follows the runtime's container events for this node and wakes the pods they concern;
/// a warm sandbox that stopped leaves the pool.
pub async fn follow_runtime_events(manager: Arc<PodManager>, shutdown: CancellationToken) {
    let node = manager.ctx.node_name.clone();
    loop {
        let mut events = manager.ctx.runtime.events(&[(LABEL_NODE, node.as_str()), (LABEL_CLUSTER, manager.ctx.cluster.as_str())]);
        loop {
            let next = tokio::select! {
                next = events.next() => next,
                _ = shutdown.cancelled() => return,
            };
            match next {
                Some(Ok(event)) => {
                    tracing::debug!(action = %event.action, container = %event.container_id, "runtime event");
                    if event.labels.contains_key(LABEL_SANDBOX) {
                        // A sandbox starting is the agent's own doing; only its end matters.
                        if !matches!(event.action.as_str(), "die" | "destroy") {
                            continue;
                        }
                        match owner(&event.name) {
                            Owner::Pod(uid) => manager.poke_sandbox_owner(uid),
                            Owner::Pool => {
                                if let Some(sandboxes) = manager.ctx.sandboxes.clone() {
                                    tokio::spawn(async move { sandboxes.lost(&event.container_id).await });
                                }
                            }
                            Owner::Unknown => {}
                        }
                    } else if let Some(uid) = event.labels.get(LABEL_POD_UID) {
                        manager.poke(uid);
                    }
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "runtime events interrupted");
                    break;
                }
                None => break,
            }
        }
        // Anything missed while reconnecting is caught by looking at every pod again.
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => manager.poke_all(),
            _ = shutdown.cancelled() => return,
        }
    }
}
