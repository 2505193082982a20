//! The scheduler loop: the server task that runs `shared::scheduler` on every Pending pod
//! without a node. It learns of pods from the create handler's non-blocking hint, from the
//! store's watch, from a sweep every 2 s (the safety net) and from cluster changes that
//! move unschedulable pods back to the active queue. Each failing pod backs off from 1 s,
//! doubling to 10 s; unschedulable pods are retried at least every 5 minutes. A decision
//! is assumed before the bind and forgotten if the bind (a store CAS) fails.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
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

/// Pods that wait until an instant. The earliest is found, and the due ones taken, in
/// O(log n), so a queue of many thousand waiting pods costs nothing per scheduling turn.
#[derive(Default)]
struct Deadlines {
    by_pod: HashMap<Key, Instant>,
    order: BTreeSet<(Instant, Key)>,
}

impl Deadlines {
    fn insert(&mut self, key: Key, at: Instant) {
        if let Some(old) = self.by_pod.insert(key.clone(), at) {
            self.order.remove(&(old, key.clone()));
        }
        self.order.insert((at, key));
    }

    fn remove(&mut self, key: &Key) -> Option<Instant> {
        let at = self.by_pod.remove(key)?;
        self.order.remove(&(at, key.clone()));
        Some(at)
    }

    fn contains_key(&self, key: &Key) -> bool {
        self.by_pod.contains_key(key)
    }

    fn earliest(&self) -> Option<Instant> {
        self.order.first().map(|(at, _)| *at)
    }

    /// Takes every pod whose instant is not after `now`, earliest first.
    fn take_due(&mut self, now: Instant) -> Vec<Key> {
        let mut due = Vec::new();
        while self.order.first().is_some_and(|(at, _)| *at <= now) {
            if let Some((_, key)) = self.order.pop_first() {
                self.by_pod.remove(&key);
                due.push(key);
            }
        }
        due
    }
}

/// Where each pod the loop knows of waits.
#[derive(Default)]
struct Queue {
    active: VecDeque<Key>,
    in_active: HashSet<Key>,
    /// Pods waiting out their backoff, until the instant they may go again.
    backoff: Deadlines,
    /// Pods no node fits, until 5 minutes after they were parked; a cluster change frees
    /// them sooner.
    unschedulable: Deadlines,
    /// When each unschedulable pod's backoff ends.
    unschedulable_backoff: HashMap<Key, Instant>,
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

    /// Parks a pod no node fits: it waits for a cluster change (but at least until
    /// `backoff_until`), or 5 minutes from `since`.
    fn park_unschedulable(&mut self, key: Key, since: Instant, backoff_until: Instant) {
        self.unschedulable_backoff.insert(key.clone(), backoff_until);
        self.unschedulable.insert(key, since + UNSCHEDULABLE_FLUSH);
    }

    fn remove(&mut self, key: &Key) {
        self.in_active.remove(key);
        self.backoff.remove(key);
        self.unschedulable.remove(key);
        self.unschedulable_backoff.remove(key);
        self.attempts.remove(key);
    }

    /// A change that may make room: every unschedulable pod goes back, to the active queue
    /// if its backoff is over, else to wait it out.
    fn cluster_changed(&mut self, now: Instant) {
        std::mem::take(&mut self.unschedulable);
        for (key, until) in std::mem::take(&mut self.unschedulable_backoff) {
            if until <= now {
                self.activate(key);
            } else {
                self.backoff.insert(key, until);
            }
        }
    }

    /// Moves pods whose backoff ended, and unschedulable pods waiting 5 minutes, to active.
    fn tick(&mut self, now: Instant) {
        for key in self.backoff.take_due(now) {
            self.activate(key);
        }
        for key in self.unschedulable.take_due(now) {
            self.unschedulable_backoff.remove(&key);
            self.activate(key);
        }
    }

    fn next_wake(&self) -> Option<Instant> {
        match (self.backoff.earliest(), self.unschedulable.earliest()) {
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
                self.queue.park_unschedulable(key, at, at + wait);
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
        q.park_unschedulable(a.clone(), now, now);
        q.park_unschedulable(b.clone(), now, now + Duration::from_secs(5));
        q.add(a.clone());
        assert!(q.active.is_empty(), "a tracked pod is not queued twice");
        q.cluster_changed(now);
        assert_eq!(q.active, VecDeque::from([a.clone()]));
        assert!(q.backoff.contains_key(&b));
        q.tick(now + Duration::from_secs(6));
        assert_eq!(q.active.len(), 2);
    }

    #[test]
    fn deadlines_give_the_due_pods_earliest_first_and_follow_moves() {
        let mut d = Deadlines::default();
        let now = Instant::now();
        let key = |name: &str| Key::new(Kind::Pod, "default", name);
        d.insert(key("late"), now + Duration::from_secs(9));
        d.insert(key("moved"), now + Duration::from_secs(1));
        d.insert(key("early"), now + Duration::from_secs(2));
        d.insert(key("moved"), now + Duration::from_secs(3));
        d.insert(key("gone"), now);
        assert_eq!(d.remove(&key("gone")), Some(now));
        assert_eq!(d.earliest(), Some(now + Duration::from_secs(2)));
        assert_eq!(d.take_due(now + Duration::from_secs(3)), vec![key("early"), key("moved")]);
        assert!(!d.contains_key(&key("moved")));
        assert_eq!(d.earliest(), Some(now + Duration::from_secs(9)));
        assert!(d.take_due(now + Duration::from_secs(8)).is_empty());
    }

    #[test]
    fn unschedulable_pods_are_retried_after_five_minutes_without_change() {
        let mut q = Queue::default();
        let now = Instant::now();
        let a = Key::new(Kind::Pod, "default", "a");
        q.park_unschedulable(a.clone(), now, now + Duration::from_secs(1));
        q.tick(now + Duration::from_secs(299));
        assert!(q.active.is_empty());
        assert_eq!(q.next_wake(), Some(now + UNSCHEDULABLE_FLUSH));
        q.tick(now + UNSCHEDULABLE_FLUSH);
        assert_eq!(q.active, VecDeque::from([a]));
    }
}
