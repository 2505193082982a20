//! The scheduler loop: the server task that runs `shared::scheduler` on every Pending pod
//! without a node. It learns of pods from the create handler's non-blocking hint, from the
//! store's watch, from a sweep every 2 s (the safety net) and from cluster changes that
//! move unschedulable pods back to the active queue. Each failing pod backs off from 1 s,
//! doubling to 10 s; unschedulable pods are retried at least every 5 minutes. A decision
//! is assumed before the bind and forgotten if the bind (a store CAS) fails.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use shared::model::{Kind, Node, Object, Pod};
use shared::scheduler::{Decision, Explanation, Profile, Scheduler};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::events::SOURCE_SCHEDULER;
use crate::metrics::{Attempt, Metrics};
use crate::ops;
use crate::store::{EventType, Key, Outcome, Store, StoreError, StoreEvent, WatchStream};

pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// The longest an unschedulable pod waits without a cluster change before it is retried.
pub const UNSCHEDULABLE_FLUSH: Duration = Duration::from_secs(300);
/// Binds in flight at once; the loop stops deciding while this many wait for the store.
const MAX_IN_FLIGHT: usize = 1024;
/// Decisions kept for `GET …/scheduling`, oldest evicted first.
const DECISIONS_KEPT: usize = 10_000;

/// The backoff after `attempts` failed attempts: 1 s, 2 s, 4 s, 8 s, then 10 s.
pub fn backoff(attempts: u32) -> Duration {
    let exponent = attempts.saturating_sub(1).min(16);
    (INITIAL_BACKOFF * 2u32.pow(exponent)).min(MAX_BACKOFF)
}

#[derive(Default)]
struct Decisions {
    by_pod: HashMap<Key, (u64, Decision)>,
    order: VecDeque<(u64, Key)>,
    seq: u64,
}

/// What the API shares with the scheduler loop: the hint channel and the last decisions.
#[derive(Clone)]
pub struct SchedulerHandle {
    hints: mpsc::Sender<Key>,
    decisions: Arc<Mutex<Decisions>>,
}

impl SchedulerHandle {
    /// A handle and the receiving end of its hints, for [`SchedulerLoop::new`].
    pub fn new() -> (SchedulerHandle, mpsc::Receiver<Key>) {
        let (hints, receiver) = mpsc::channel(16_384);
        (SchedulerHandle { hints, decisions: Arc::default() }, receiver)
    }

    /// Tells the scheduler a pod was created. Never waits: a full or closed channel drops
    /// the hint, and the sweep finds the pod anyway.
    pub fn hint(&self, pod: Key) {
        let _ = self.hints.try_send(pod);
    }

    /// The explanation of the last decision about a pod.
    pub fn decision(&self, pod: &Key) -> Option<Explanation> {
        let decisions = self.decisions.lock().expect("decisions lock");
        decisions.by_pod.get(pod).map(|(_, d)| d.explain())
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
    }

    fn forget(&self, pod: &Key) {
        self.decisions.lock().expect("decisions lock").by_pod.remove(pod);
    }
}

/// Where each pod the loop knows of waits.
#[derive(Default)]
struct Queue {
    active: VecDeque<Key>,
    in_active: HashSet<Key>,
    /// Pods waiting out their backoff, with the instant they may go again.
    backoff: HashMap<Key, Instant>,
    /// Pods no node fits: (since, end of backoff). A cluster change or 5 minutes frees them.
    unschedulable: HashMap<Key, (Instant, Instant)>,
    attempts: HashMap<Key, u32>,
    in_flight: HashSet<Key>,
}

impl Queue {
    fn tracked(&self, key: &Key) -> bool {
        self.in_active.contains(key)
            || self.backoff.contains_key(key)
            || self.unschedulable.contains_key(key)
            || self.in_flight.contains(key)
    }

    fn activate(&mut self, key: Key) {
        if self.in_active.insert(key.clone()) {
            self.active.push_back(key);
        }
    }

    /// A hint, a watch event or the sweep: queue the pod unless it is already waiting.
    fn add(&mut self, key: Key) {
        if !self.tracked(&key) {
            self.activate(key);
        }
    }

    fn failed(&mut self, key: &Key) -> Duration {
        let attempts = self.attempts.entry(key.clone()).or_insert(0);
        *attempts += 1;
        backoff(*attempts)
    }

    fn remove(&mut self, key: &Key) {
        self.in_active.remove(key);
        self.backoff.remove(key);
        self.unschedulable.remove(key);
        self.attempts.remove(key);
    }

    /// A change that may make room: every unschedulable pod goes back, to the active queue
    /// if its backoff is over, else to wait it out.
    fn cluster_changed(&mut self, now: Instant) {
        for (key, (_, until)) in std::mem::take(&mut self.unschedulable) {
            if until <= now {
                self.activate(key);
            } else {
                self.backoff.insert(key, until);
            }
        }
    }

    /// Moves pods whose backoff ended, and unschedulable pods waiting 5 minutes, to active.
    fn tick(&mut self, now: Instant) {
        let ready: Vec<Key> = self.backoff.iter().filter(|(_, t)| **t <= now).map(|(k, _)| k.clone()).collect();
        for key in ready {
            self.backoff.remove(&key);
            self.activate(key);
        }
        let stale: Vec<Key> = self
            .unschedulable
            .iter()
            .filter(|(_, (since, _))| now.duration_since(*since) >= UNSCHEDULABLE_FLUSH)
            .map(|(k, _)| k.clone())
            .collect();
        for key in stale {
            self.unschedulable.remove(&key);
            self.activate(key);
        }
    }

    fn next_wake(&self) -> Option<Instant> {
        let backoff = self.backoff.values().min().copied();
        let flush = self.unschedulable.values().map(|(since, _)| *since + UNSCHEDULABLE_FLUSH).min();
        match (backoff, flush) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

type BindResult = (Key, Pod, Result<Vec<Outcome>, StoreError>);

/// The scheduler task. Build it with [`SchedulerLoop::new`], then `run` it.
pub struct SchedulerLoop {
    store: Arc<dyn Store>,
    handle: SchedulerHandle,
    hints: mpsc::Receiver<Key>,
    metrics: Arc<Metrics>,
    profile: Profile,
    sweep: Duration,
    scheduler: Scheduler,
    queue: Queue,
    results_tx: mpsc::UnboundedSender<BindResult>,
    results: mpsc::UnboundedReceiver<BindResult>,
}

fn is_pod(key: &Key) -> bool {
    key.kind == Kind::Pod
}

/// Whether a node change can make room for pods that did not fit: a new node, an uncordon,
/// a node turning Ready, more allocatable, or changed labels or taints.
fn node_opened_up(prev: Option<&Node>, node: &Node) -> bool {
    let Some(prev) = prev else { return true };
    (prev.status.unschedulable && !node.status.unschedulable)
        || (!prev.is_ready() && node.is_ready())
        || node.status.allocatable.cpu > prev.status.allocatable.cpu
        || node.status.allocatable.memory > prev.status.allocatable.memory
        || node.status.allocatable.pods > prev.status.allocatable.pods
        || node.metadata.labels != prev.metadata.labels
        || node.status.taints != prev.status.taints
}

/// Whether a pod change frees room on its node: it finished, or it was deleted while bound.
fn pod_freed_room(event: &StoreEvent) -> bool {
    let prev = match event.prev.as_deref() {
        Some(Object::Pod(p)) => p,
        _ => return false,
    };
    let was_holding = prev.is_bound() && !prev.status.phase.is_terminal();
    match (event.type_, &*event.object) {
        (EventType::Deleted, _) => was_holding,
        (_, Object::Pod(now)) => was_holding && now.status.phase.is_terminal(),
        _ => false,
    }
}

impl SchedulerLoop {
    pub fn new(
        store: Arc<dyn Store>,
        handle: SchedulerHandle,
        hints: mpsc::Receiver<Key>,
        metrics: Arc<Metrics>,
        profile: Profile,
        sweep: Duration,
    ) -> Self {
        let (results_tx, results) = mpsc::unbounded_channel();
        SchedulerLoop {
            store,
            handle,
            hints,
            metrics,
            scheduler: Scheduler::new(profile.clone()),
            profile,
            sweep,
            queue: Queue::default(),
            results_tx,
            results,
        }
    }

    /// Rebuilds the scheduler's view from a fresh list and watches from its revision.
    fn relist(&mut self) -> Result<WatchStream, StoreError> {
        let (revision, nodes) = self.store.list(Kind::Node, None);
        let (_, pods) = self.store.list(Kind::Pod, None);
        let mut scheduler = Scheduler::new(self.profile.clone());
        for node in &nodes {
            if let Object::Node(n) = &**node {
                scheduler.upsert_node(n);
            }
        }
        for pod in &pods {
            if let Object::Pod(p) = &**pod {
                scheduler.upsert_pod(p);
                if p.needs_scheduling() {
                    self.queue.add(Key::of(pod));
                }
            }
        }
        self.scheduler = scheduler;
        // Pods listed after the nodes may be newer than `revision`: replaying them is harmless.
        self.store.watch(&[Kind::Node, Kind::Pod], revision)
    }

    pub async fn run(mut self, shutdown: CancellationToken) {
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
            let now = Instant::now();
            self.queue.tick(now);
            let wake = self.queue.next_wake().unwrap_or(now + self.sweep);
            let can_schedule = !self.queue.active.is_empty() && self.queue.in_flight.len() < MAX_IN_FLIGHT;
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                Some(result) = self.results.recv() => self.bind_finished(result),
                batch = changes.next() => match batch {
                    Some(Ok(batch)) => {
                        for event in &batch.events {
                            self.observe(event);
                        }
                    }
                    Some(Err(e)) => {
                        tracing::warn!("the scheduler's watch fell behind ({e}); listing again");
                        match self.relist() {
                            Ok(w) => changes = w,
                            Err(e) => { tracing::error!("the scheduler cannot watch the store: {e}"); break; }
                        }
                    }
                    None => break,
                },
                Some(key) = self.hints.recv() => self.queue.add(key),
                _ = sweep.tick() => self.sweep(),
                _ = std::future::ready(()), if can_schedule => {
                    if let Some(key) = self.queue.active.pop_front() {
                        self.queue.in_active.remove(&key);
                        self.schedule_one(key);
                    }
                }
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    /// Feeds one store change to the scheduler's cache and the queue.
    fn observe(&mut self, event: &StoreEvent) {
        let key = Key::of(&event.object);
        match (&*event.object, event.type_) {
            (Object::Node(node), EventType::Deleted) => self.scheduler.remove_node(&node.metadata.name),
            (Object::Node(node), _) => {
                let prev = match event.prev.as_deref() {
                    Some(Object::Node(p)) => Some(p),
                    _ => None,
                };
                self.scheduler.upsert_node(node);
                if node_opened_up(prev, node) {
                    self.queue.cluster_changed(Instant::now());
                }
            }
            (Object::Pod(pod), EventType::Deleted) => {
                self.scheduler.remove_pod(pod);
                self.queue.remove(&key);
                self.handle.forget(&key);
                if pod_freed_room(event) {
                    self.queue.cluster_changed(Instant::now());
                }
            }
            (Object::Pod(pod), _) => {
                self.scheduler.upsert_pod(pod);
                if pod.needs_scheduling() {
                    self.queue.add(key);
                } else if !self.queue.in_flight.contains(&key) {
                    self.queue.remove(&key);
                }
                if pod_freed_room(event) {
                    self.queue.cluster_changed(Instant::now());
                }
            }
            _ => {}
        }
    }

    /// The safety net: every Pending pod without a node that nothing is tracking.
    fn sweep(&mut self) {
        let (_, pods) = self.store.list(Kind::Pod, None);
        for pod in pods {
            if let Object::Pod(p) = &*pod
                && p.needs_scheduling()
            {
                self.queue.add(Key::of(&pod));
            }
        }
    }

    fn schedule_one(&mut self, key: Key) {
        if !is_pod(&key) {
            return;
        }
        let pod = match self.store.get(&key).as_deref() {
            Some(Object::Pod(p)) if p.needs_scheduling() => p.clone(),
            _ => {
                self.queue.remove(&key);
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
                    let wait = self.queue.failed(&key);
                    self.queue.backoff.insert(key, Instant::now() + wait);
                    return;
                }
                self.metrics.observe_attempt(Attempt::Scheduled, elapsed);
                self.queue.in_flight.insert(key.clone());
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
                let wait = self.queue.failed(&key);
                let at = Instant::now();
                self.queue.unschedulable.insert(key, (at, at + wait));
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
        self.queue.in_flight.remove(&key);
        match result {
            Ok(_) => {
                self.queue.remove(&key);
                if let Some(created) = pod.metadata.created_at {
                    self.metrics.observe_create_to_bound((chrono::Utc::now() - created).to_std().unwrap_or_default());
                }
            }
            Err(e) => {
                self.scheduler.forget(&pod);
                let still_pending = matches!(self.store.get(&key).as_deref(), Some(Object::Pod(p)) if p.needs_scheduling());
                if still_pending {
                    tracing::debug!("binding pod {} failed, backing off: {e}", key.key);
                    let wait = self.queue.failed(&key);
                    self.queue.backoff.insert(key, Instant::now() + wait);
                } else {
                    self.queue.remove(&key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_one_second_to_ten() {
        let waits: Vec<u64> = (1..=6).map(|a| backoff(a).as_secs()).collect();
        assert_eq!(waits, vec![1, 2, 4, 8, 10, 10]);
    }

    #[test]
    fn a_cluster_change_requeues_unschedulable_pods_respecting_backoff() {
        let mut q = Queue::default();
        let now = Instant::now();
        let a = Key::new(Kind::Pod, "default", "a");
        let b = Key::new(Kind::Pod, "default", "b");
        q.unschedulable.insert(a.clone(), (now, now));
        q.unschedulable.insert(b.clone(), (now, now + Duration::from_secs(5)));
        q.add(a.clone());
        assert!(q.active.is_empty(), "a tracked pod is not queued twice");
        q.cluster_changed(now);
        assert_eq!(q.active, VecDeque::from([a.clone()]));
        assert!(q.backoff.contains_key(&b));
        q.tick(now + Duration::from_secs(6));
        assert_eq!(q.active.len(), 2);
    }

    #[test]
    fn unschedulable_pods_are_retried_after_five_minutes_without_change() {
        let mut q = Queue::default();
        let now = Instant::now();
        let a = Key::new(Kind::Pod, "default", "a");
        q.unschedulable.insert(a.clone(), (now, now + Duration::from_secs(1)));
        q.tick(now + Duration::from_secs(299));
        assert!(q.active.is_empty());
        assert_eq!(q.next_wake(), Some(now + UNSCHEDULABLE_FLUSH));
        q.tick(now + UNSCHEDULABLE_FLUSH);
        assert_eq!(q.active, VecDeque::from([a]));
    }
}
