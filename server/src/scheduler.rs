//! The scheduler loop: the server task that drives `shared::scheduler` (the decisions) and
//! its `SchedulingQueue` (active, backing off, unschedulable) on every Pending pod without a
//! node. It learns of pods from the create handler's non-blocking hint, from the store's
//! watch and from a sweep every 2 s (the safety net); it watches nodes and their leases for
//! readiness, and the cache tells it which node, lease and pod changes may fit parked pods. A decision is assumed before the bind and forgotten if the
//! bind (a store CAS) fails.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use shared::capacity::GiveBack;
use shared::model::{Kind, Object, Pod};
use shared::scheduler::{ClusterEvent, Decision, Explanation, Profile, Scheduler, SchedulingQueue};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::events::SOURCE_SCHEDULER;
use crate::metrics::{Attempt, Metrics};
use crate::ops;
use crate::store::{EventType, Key, Outcome, Store, StoreError, StoreEvent, WatchStream};

/// Binds in flight at once; the loop stops deciding while this many wait for the store.
const MAX_IN_FLIGHT: usize = 1024;
/// Decisions kept for `GET …/scheduling`, oldest evicted first.
const DECISIONS_KEPT: usize = 10_000;

#[derive(Default)]
struct Decisions {
    by_pod: HashMap<Key, (u64, Decision)>,
    order: VecDeque<(u64, Key)>,
    seq: u64,
}

/// The queue, shared with the API so that `GET …/scheduling` can say where a pod waits.
/// Its clock is milliseconds since `origin` on tokio's clock.
struct SharedQueue {
    queue: Mutex<SchedulingQueue<Key>>,
    origin: Instant,
}

impl SharedQueue {
    fn now_ms(&self) -> i64 {
        i64::try_from(self.origin.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SchedulingQueue<Key>> {
        self.queue.lock().expect("scheduling queue lock")
    }
}

/// What the API shares with the scheduler loop: the hint channel, the last decisions and
/// the queue. It outlives the loop, which runs again under each term of leadership.
#[derive(Clone)]
pub struct SchedulerHandle {
    hints: mpsc::Sender<Key>,
    /// The hints' receiving end, held by the running loop; kept here between terms.
    receiver: Arc<tokio::sync::Mutex<mpsc::Receiver<Key>>>,
    decisions: Arc<Mutex<Decisions>>,
    queue: Arc<SharedQueue>,
}

impl Default for SchedulerHandle {
    fn default() -> SchedulerHandle {
        let (hints, receiver) = mpsc::channel(16_384);
        let queue = Arc::new(SharedQueue { queue: Mutex::new(SchedulingQueue::default()), origin: Instant::now() });
        SchedulerHandle { hints, receiver: Arc::new(tokio::sync::Mutex::new(receiver)), decisions: Arc::default(), queue }
    }
}

impl SchedulerHandle {
    /// Tells the scheduler a pod was created. Never waits: a full or closed channel drops
    /// the hint, and the sweep finds the pod anyway.
    pub fn hint(&self, pod: Key) {
        let _ = self.hints.try_send(pod);
    }

    /// The explanation of the last decision about a pod, with where it waits now.
    pub fn decision(&self, pod: &Key) -> Option<Explanation> {
        let mut explanation = {
            let decisions = self.decisions.lock().expect("decisions lock");
            decisions.by_pod.get(pod).map(|(_, d)| d.explain())?
        };
        explanation.queue = self.queue.lock().status(pod, self.queue.now_ms());
        Some(explanation)
    }

    fn record(&self, pod: Key, decision: Decision) {
        let mut d = self.decisions.lock().expect("decisions lock");
        d.seq += 1;
        let seq = d.seq;
        d.order.push_back((seq, pod.clone()));
        d.by_pod.insert(pod, (seq, decision));
        while d.by_pod.len() > DECISIONS_KEPT || d.order.len() > 2 * DECISIONS_KEPT {
            let Some((seq, key)) = d.order.pop_front() else { break };
            if d.by_pod.get(&key).is_some_and(|(s, _)| *s == seq) {
                d.by_pod.remove(&key);
            }
        }
        d.order.give_back_spare();
    }

    fn forget(&self, pod: &Key) {
        let mut d = self.decisions.lock().expect("decisions lock");
        d.by_pod.remove(pod);
        d.by_pod.give_back_spare();
    }
}

type BindResult = (Key, Pod, Result<Vec<Outcome>, StoreError>);

/// The scheduler task. Build it with [`SchedulerLoop::new`], then `run` it.
pub struct SchedulerLoop {
    store: Arc<dyn Store>,
    handle: SchedulerHandle,
    metrics: Arc<Metrics>,
    profile: Profile,
    sweep: Duration,
    scheduler: Scheduler,
    results_tx: mpsc::UnboundedSender<BindResult>,
    results: mpsc::UnboundedReceiver<BindResult>,
}

impl SchedulerLoop {
    pub fn new(store: Arc<dyn Store>, handle: SchedulerHandle, metrics: Arc<Metrics>, profile: Profile, sweep: Duration) -> Self {
        let (results_tx, results) = mpsc::unbounded_channel();
        SchedulerLoop { store, handle, metrics, scheduler: Scheduler::new(profile.clone()), profile, sweep, results_tx, results }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, SchedulingQueue<Key>> {
        self.handle.queue.lock()
    }

    fn now_ms(&self) -> i64 {
        self.handle.queue.now_ms()
    }

    /// Rebuilds the scheduler's view from a fresh list and watches from its revision.
    fn relist(&mut self) -> Result<WatchStream, StoreError> {
        let (revision, nodes) = self.store.list(Kind::Node, None);
        let (_, leases) = self.store.list(Kind::Lease, None);
        let (_, pods) = self.store.list(Kind::Pod, None);
        let now = chrono::Utc::now();
        let mut scheduler = Scheduler::new(self.profile.clone());
        for node in &nodes {
            if let Object::Node(n) = &**node {
                scheduler.upsert_node(n, now);
            }
        }
        for lease in &leases {
            if let Object::Lease(l) = &**lease
                && l.is_node_lease()
            {
                scheduler.upsert_lease(&l.metadata.name, l.spec.renew_time, now);
            }
        }
        let mut queue = self.queue();
        for pod in &pods {
            if let Object::Pod(p) = &**pod {
                scheduler.upsert_pod(p);
                if p.needs_scheduling() {
                    queue.add(Key::of(pod));
                }
            }
        }
        drop(queue);
        self.scheduler = scheduler;
        // Leases and pods listed after the nodes may be newer than `revision`: replaying them is harmless.
        self.store.watch(&[Kind::Node, Kind::Lease, Kind::Pod], revision)
    }

    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut hints = self.handle.receiver.clone().lock_owned().await;
        // A loop that starts again (a new term of leadership) forgets the last one's queue,
        // in flight binds included: the list below fills it from the store.
        *self.queue() = SchedulingQueue::default();
        let mut changes = match self.relist() {
            Ok(w) => w,
            Err(e) => {
                tracing::error!("the scheduler cannot watch the store: {e}");
                return;
            }
        };
        let mut sweep = tokio::time::interval(self.sweep);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let (can_schedule, wake) = {
                let now_ms = self.now_ms();
                let mut queue = self.queue();
                queue.tick(now_ms);
                let wake_ms = queue.next_wake().map_or(self.sweep.as_millis() as i64, |at| at.saturating_sub(now_ms).max(0));
                (queue.active_len() > 0 && queue.in_flight() < MAX_IN_FLIGHT, Instant::now() + Duration::from_millis(wake_ms as u64))
            };
            // Fairness: decisions, bind results and watch batches take turns (an unbiased
            // select), so a burst of changes never starves the pods already queued.
            tokio::select! {
                _ = shutdown.cancelled() => break,
                Some(result) = self.results.recv() => self.bind_finished(result),
                batch = changes.next() => match batch {
                    Some(batch) => {
                        for event in &batch.events {
                            self.observe(event);
                        }
                    }
                    None => break,
                },
                Some(key) = hints.recv() => { self.queue().add(key); }
                _ = sweep.tick() => self.sweep(),
                _ = std::future::ready(()), if can_schedule => {
                    let next = self.queue().pop();
                    if let Some(key) = next {
                        self.schedule_one(key);
                    }
                }
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    fn cluster_changed(&self, event: Option<ClusterEvent>) {
        if let Some(event) = event {
            let now_ms = self.now_ms();
            tracing::debug!("requeueing unschedulable pods: {event}");
            self.queue().cluster_changed(&event, now_ms);
        }
    }

    /// Feeds one store change to the scheduler's cache and the queue.
    fn observe(&mut self, event: &StoreEvent) {
        let key = Key::of(&event.object);
        match (&*event.object, event.type_) {
            (Object::Node(node), EventType::Deleted) => self.scheduler.remove_node(&node.metadata.name),
            (Object::Node(node), _) => {
                let change = self.scheduler.upsert_node(node, chrono::Utc::now());
                self.cluster_changed(change);
            }
            // The control plane's own leases (leader, identities) say nothing of nodes.
            (Object::Lease(lease), _) if !lease.is_node_lease() => {}
            (Object::Lease(lease), EventType::Deleted) => {
                self.scheduler.upsert_lease(&lease.metadata.name, None, chrono::Utc::now());
            }
            (Object::Lease(lease), _) => {
                let change = self.scheduler.upsert_lease(&lease.metadata.name, lease.spec.renew_time, chrono::Utc::now());
                self.cluster_changed(change);
            }
            (Object::Pod(pod), EventType::Deleted) => {
                let change = self.scheduler.remove_pod(pod);
                self.queue().remove(&key);
                self.handle.forget(&key);
                self.cluster_changed(change);
            }
            (Object::Pod(pod), _) => {
                let change = self.scheduler.upsert_pod(pod);
                {
                    let mut queue = self.queue();
                    if pod.needs_scheduling() {
                        queue.add(key);
                    } else if !queue.is_in_flight(&key) {
                        queue.remove(&key);
                    }
                }
                self.cluster_changed(change);
            }
            _ => {}
        }
    }

    /// The safety net: every Pending pod without a node that nothing is tracking.
    fn sweep(&mut self) {
        let (_, pods) = self.store.list(Kind::Pod, None);
        let mut queue = self.queue();
        for pod in pods {
            if let Object::Pod(p) = &*pod
                && p.needs_scheduling()
            {
                queue.add(Key::of(&pod));
            }
        }
    }

    fn schedule_one(&mut self, key: Key) {
        let pod = match self.store.get(&key).as_deref() {
            Some(Object::Pod(p)) if p.needs_scheduling() => p.clone(),
            _ => {
                self.queue().remove(&key);
                return;
            }
        };
        let started = std::time::Instant::now();
        let now = chrono::Utc::now();
        let decision = self.scheduler.schedule(&pod, now);
        let elapsed = started.elapsed();
        let selected = decision.selected().map(str::to_string);
        let message = decision.unschedulable_message();
        self.handle.record(key.clone(), decision);
        match selected {
            Some(node) => {
                if let Err(e) = self.scheduler.assume(&pod, &node) {
                    self.metrics.observe_attempt(Attempt::Error, elapsed);
                    tracing::warn!("{e}");
                    let now_ms = self.now_ms();
                    self.queue().failed(&key, now_ms);
                    return;
                }
                self.metrics.observe_attempt(Attempt::Scheduled, elapsed);
                let txn = ops::bind(&pod.metadata.namespace, &pod.metadata.name, &node, &pod.metadata.uid, SOURCE_SCHEDULER, now);
                let store = self.store.clone();
                let results = self.results_tx.clone();
                tokio::spawn(async move {
                    let result = store.commit(txn).await;
                    let _ = results.send((key, pod, result));
                });
            }
            None => {
                self.metrics.observe_attempt(Attempt::Unschedulable, elapsed);
                let message = message.unwrap_or_else(|| "no node fits the pod".to_string());
                tracing::debug!("pod {} is unschedulable: {message}", key.key);
                let now_ms = self.now_ms();
                self.queue().unschedulable(&key, now_ms);
                let txn = ops::mark_unschedulable(&pod, &message, now);
                let store = self.store.clone();
                tokio::spawn(async move {
                    if let Err(e) = store.commit(txn).await
                        && !matches!(e, StoreError::Conflict(_) | StoreError::NotFound { .. })
                    {
                        tracing::warn!("cannot record that pod {} is unschedulable: {e}", pod.metadata.key());
                    }
                });
            }
        }
    }

    fn bind_finished(&mut self, (key, pod, result): BindResult) {
        match result {
            Ok(_) => {
                self.queue().scheduled(&key);
                if let Some(created) = pod.metadata.created_at {
                    self.metrics.observe_create_to_bound((chrono::Utc::now() - created).to_std().unwrap_or_default());
                }
            }
            Err(e) => {
                self.scheduler.forget(&pod);
                let still_pending = matches!(self.store.get(&key).as_deref(), Some(Object::Pod(p)) if p.needs_scheduling());
                let now_ms = self.now_ms();
                let mut queue = self.queue();
                if still_pending {
                    tracing::debug!("binding pod {} failed, backing off: {e}", key.key);
                    queue.failed(&key, now_ms);
                } else {
                    queue.remove(&key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use shared::model::{Namespace, ObjectMeta};
    use shared::registration::{NodeDescription, Registrant};
    use shared::scheduler::QueueState;

    use super::*;
    use crate::store::{CachedStore, Txn};

    const GRACE: Duration = shared::readiness::DEFAULT_NODE_MONITOR_GRACE;

    async fn started() -> (Arc<dyn Store>, SchedulerHandle, CancellationToken) {
        let store: Arc<dyn Store> = Arc::new(CachedStore::in_memory(10_000));
        let namespace = Namespace { kind: "Namespace".into(), metadata: ObjectMeta::named("", "default"), ..Namespace::default() };
        store.commit(Txn::new().with(ops::create(namespace))).await.unwrap();
        let handle = SchedulerHandle::default();
        let scheduler = SchedulerLoop::new(store.clone(), handle.clone(), Arc::default(), Profile::spread(), Duration::from_secs(2));
        let shutdown = CancellationToken::new();
        tokio::spawn(scheduler.run(shutdown.clone()));
        (store, handle, shutdown)
    }

    async fn create_pod(store: &Arc<dyn Store>, name: &str, cpu: i64) -> Key {
        let mut pod: Pod = serde_json::from_str(include_str!("../../examples/pod.json")).unwrap();
        pod.metadata.name = name.into();
        pod.spec.containers[0].resources.cpu = cpu;
        crate::resources::stamp_new(&mut pod, chrono::Utc::now());
        store.commit(Txn::new().with(ops::create(pod))).await.unwrap();
        Key::new(Kind::Pod, "default", name)
    }

    /// Polls the handle (on tokio's clock) until the pod's queue status satisfies `check`.
    async fn queue_status(
        handle: &SchedulerHandle,
        key: &Key,
        check: impl Fn(&shared::scheduler::QueueStatus) -> bool,
    ) -> shared::scheduler::QueueStatus {
        loop {
            if let Some(status) = handle.decision(key).and_then(|d| d.queue).filter(|s| check(s)) {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn bound_to(store: &Arc<dyn Store>, key: &Key) -> Option<String> {
        match store.get(key).as_deref() {
            Some(Object::Pod(p)) if p.is_bound() => Some(p.spec.node_name.clone()),
            _ => None,
        }
    }

    /// Waits until the pod is bound; returns the last requeue reason a poll saw on the way.
    /// The store's writer is a thread, so the paused clock may jump past a back-off while a
    /// change is committed: the pod may be bound before any poll sees it requeued.
    async fn requeue_until_bound(store: &Arc<dyn Store>, handle: &SchedulerHandle, key: &Key) -> Option<String> {
        let mut requeued_by = None;
        while bound_to(store, key).is_none() {
            if let Some(reason) = handle.decision(key).and_then(|d| d.queue).and_then(|q| q.requeued_by) {
                requeued_by = Some(reason);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        requeued_by
    }

    #[tokio::test(start_paused = true)]
    async fn an_unschedulable_pod_waits_five_minutes_for_the_flush_when_nothing_changes() {
        let (store, handle, shutdown) = started().await;
        let key = create_pod(&store, "web", 100).await;
        let parked = queue_status(&handle, &key, |s| s.state == QueueState::Unschedulable).await;
        assert_eq!(parked.attempts, 1);
        let since = Instant::now();
        tokio::time::sleep(Duration::from_secs(290)).await;
        let waiting = handle.decision(&key).and_then(|d| d.queue).unwrap();
        assert_eq!((waiting.state, waiting.attempts), (QueueState::Unschedulable, 1), "neither the sweep nor time alone retries it");
        let retried = queue_status(&handle, &key, |s| s.attempts == 2).await;
        let waited = since.elapsed();
        assert!(waited >= Duration::from_secs(298) && waited <= Duration::from_secs(302), "retried after {waited:?}");
        assert_eq!(retried.requeued_by.as_deref(), Some("5m passed without a cluster change"));
        shutdown.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn a_node_joining_requeues_a_parked_pod_after_its_backoff() {
        let (store, handle, shutdown) = started().await;
        let key = create_pod(&store, "web", 100).await;
        queue_status(&handle, &key, |s| s.state == QueueState::Unschedulable).await;
        let now = chrono::Utc::now();
        let node = NodeDescription::new("n1", shared::model::NodeResources { cpu: 1000, memory: 1 << 30, pods: 10 }).to_node(now);
        store.commit(ops::register_node(node, Registrant::OwnNode, now, GRACE)).await.unwrap();
        let changed = Instant::now();
        let requeued_by = requeue_until_bound(&store, &handle, &key).await;
        assert_eq!(bound_to(&store, &key).as_deref(), Some("n1"));
        assert!(changed.elapsed() < Duration::from_secs(30), "bound by the change, not by the 5-minute flush");
        assert!(requeued_by.as_deref().is_none_or(|r| r == "node n1 joined"), "{requeued_by:?}");
        while handle.decision(&key).unwrap().queue.is_some() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        shutdown.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_renewal_after_a_stale_period_requeues_the_pod_the_node_could_not_take() {
        let (store, handle, shutdown) = started().await;
        let long_ago = chrono::Utc::now() - chrono::Duration::seconds(60);
        let node = NodeDescription::new("n1", shared::model::NodeResources { cpu: 1000, memory: 1 << 30, pods: 10 }).to_node(long_ago);
        store.commit(ops::register_node(node, Registrant::OwnNode, long_ago, GRACE)).await.unwrap();
        let key = create_pod(&store, "web", 100).await;
        queue_status(&handle, &key, |s| s.state == QueueState::Unschedulable).await;
        let node_revision = store.get(&Key::new(Kind::Node, "", "n1")).unwrap().metadata().resource_version;
        store.commit(Txn::new().with(ops::renew_lease("n1", chrono::Utc::now(), GRACE))).await.unwrap();
        let changed = Instant::now();
        let requeued_by = requeue_until_bound(&store, &handle, &key).await;
        assert_eq!(bound_to(&store, &key).as_deref(), Some("n1"));
        assert!(changed.elapsed() < Duration::from_secs(30), "bound by the renewal, not by the 5-minute flush");
        assert!(requeued_by.as_deref().is_none_or(|r| r == "node n1 is heartbeating again"), "{requeued_by:?}");
        let node = store.get(&Key::new(Kind::Node, "", "n1")).unwrap();
        assert_eq!(node.metadata().resource_version, node_revision, "the renewal did not write the node");
        shutdown.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn a_pod_that_frees_room_requeues_the_pod_that_did_not_fit() {
        let (store, handle, shutdown) = started().await;
        let now = chrono::Utc::now();
        let node = NodeDescription::new("n1", shared::model::NodeResources { cpu: 1000, memory: 1 << 30, pods: 10 }).to_node(now);
        store.commit(ops::register_node(node, Registrant::OwnNode, now, GRACE)).await.unwrap();
        let first = create_pod(&store, "first", 1000).await;
        while bound_to(&store, &first).is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let second = create_pod(&store, "second", 500).await;
        queue_status(&handle, &second, |s| s.state == QueueState::Unschedulable).await;
        let delete = ops::PodDelete { grace_seconds: Some(0), ..ops::PodDelete::default() };
        store.commit(Txn::new().with(ops::delete_pod("default", "first", delete, chrono::Utc::now(), GRACE))).await.unwrap();
        let changed = Instant::now();
        let requeued_by = requeue_until_bound(&store, &handle, &second).await;
        assert!(changed.elapsed() < Duration::from_secs(30), "bound by the change, not by the 5-minute flush");
        assert!(requeued_by.as_deref().is_none_or(|r| r == "pod default/first freed room on node n1"), "{requeued_by:?}");
        shutdown.cancel();
    }
}
