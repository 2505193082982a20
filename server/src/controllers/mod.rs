//! Level-triggered controllers: each is a `reconcile(key, ctx, now) -> Result<Action>` that
//! reads the current state, acts and may run again at any time with the same result. The
//! runner here feeds it keys from the store's watch and a periodic resync, dedups them,
//! rests a key whose reconciles are long ([`RECONCILE_PACE`]), and requeues on error with
//! a delay from the shared back-off curve.
//!
//! - [`deployment`]: rollouts over ReplicaSets (RollingUpdate, Recreate), proportional scaling,
//!   revision history, progress deadline, cascade delete of its sets, status;
//! - [`replicaset`]: replicas up and down, adoption and release, replacement of finished pods,
//!   cascade delete of its pods, status;
//! - [`endpoints`]: a service's endpoints from its running, ready pods;
//! - [`service_repair`]: a Service stored without its cluster IP or node ports gets them;
//! - [`node_lifecycle`]: NotReady after missed heartbeats (lease renewals), NodeLost pods past a grace period;
//! - [`pod_gc`]: terminating pods no agent will confirm, or whose agent is overdue, are removed;
//! - [`collect_events`]: events past their TTL, and the oldest beyond the event limit, are deleted.

pub mod deployment;
pub mod endpoints;
pub mod node_lifecycle;
pub mod pod_gc;
pub mod replicaset;
pub mod service_repair;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use shared::backoff::Backoff;
use shared::capacity::GiveBack;
use shared::model::{Kind, Object, Time};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::time::{DelayQueue, delay_queue};

use crate::config::Config;
use crate::store::{Change, Key, Store, StoreError, StoreEvent, Txn, Write};

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("{controller} could not reconcile {key}: {source}")]
    Store { controller: &'static str, key: String, source: StoreError },
}

pub type Result<T, E = ControllerError> = std::result::Result<T, E>;

/// What to do with a key after a successful reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing until the next change or resync.
    AwaitChange,
    /// Look again after this long (a deadline the controller waits for).
    RequeueAfter(Duration),
}

/// What every reconcile gets: the store and the settings.
#[derive(Clone)]
pub struct Context {
    pub store: Arc<dyn Store>,
    pub config: Arc<Config>,
}

/// A controller: which kinds it watches, which keys a change concerns, and its reconcile.
pub trait Controller: Send + Sync + 'static {
    const NAME: &'static str;
    fn watched(&self) -> &'static [Kind];
    /// The keys a change concerns (they are reconciled, not the change itself).
    fn keys_for(&self, store: &dyn Store, event: &StoreEvent) -> Vec<Key>;
    /// Every key, for the periodic resync.
    fn all_keys(&self, store: &dyn Store) -> Vec<Key>;
    fn reconcile(&self, key: &Key, ctx: &Context, now: Time) -> impl Future<Output = Result<Action>> + Send;
}

/// A key that keeps failing waits 100 ms, doubling to 30 s.
const FAILURE_BACKOFF: Backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(30));

/// A key's reconciles take at most one part in `RECONCILE_PACE` of its controller's time:
/// after a reconcile that took `t`, a change waits until `t * (RECONCILE_PACE - 1)` has
/// passed. A deployment of 20,000 replicas reads all its pods in each reconcile, and each of
/// their changes asks for one: back to back, they kept a core busy through a burst.
const RECONCILE_PACE: u32 = 4;

/// Keys waiting for a reconcile: each at most once in the ready queue; delayed ones wait in
/// a timer wheel until their deadline (the earliest, when a key is delayed twice).
#[derive(Default)]
struct WorkQueue {
    ready: VecDeque<Key>,
    queued: HashSet<Key>,
    delayed: DelayQueue<Key>,
    deadlines: HashMap<Key, (delay_queue::Key, Instant)>,
    failures: HashMap<Key, u32>,
    /// Keys whose last reconcile was long, and until when they rest ([`RECONCILE_PACE`]).
    resting: HashMap<Key, Instant>,
}

impl WorkQueue {
    fn add(&mut self, key: Key) {
        if let Some(&until) = self.resting.get(&key) {
            if until > Instant::now() {
                return self.add_after(key, until);
            }
            self.resting.remove(&key);
            self.resting.give_back_spare();
        }
        if let Some((timer, _)) = self.deadlines.remove(&key) {
            self.delayed.remove(&timer);
        }
        if self.queued.insert(key.clone()) {
            self.ready.push_back(key);
        }
    }

    fn add_after(&mut self, key: Key, at: Instant) {
        if self.queued.contains(&key) {
            return;
        }
        match self.deadlines.get_mut(&key) {
            Some((timer, deadline)) if at < *deadline => {
                self.delayed.reset_at(timer, at);
                *deadline = at;
            }
            Some(_) => {}
            None => {
                let timer = self.delayed.insert_at(key.clone(), at);
                self.deadlines.insert(key, (timer, at));
            }
        }
    }

    fn pop(&mut self) -> Option<Key> {
        let key = self.ready.pop_front()?;
        self.queued.remove(&key);
        self.ready.give_back_spare();
        self.queued.give_back_spare();
        Some(key)
    }

    /// The next key whose deadline passed, as soon as one does; `None` when none waits.
    async fn expired(&mut self) -> Option<Key> {
        let key = self.delayed.next().await?.into_inner();
        self.deadlines.remove(&key);
        self.deadlines.give_back_spare();
        Some(key)
    }

    /// Notes that reconciling `key` took from `began` until now: it rests three times as long.
    fn reconciled(&mut self, key: &Key, began: Instant) {
        let now = Instant::now();
        let rest = now.duration_since(began) * (RECONCILE_PACE - 1);
        if !rest.is_zero() {
            self.resting.insert(key.clone(), now + rest);
        }
    }

    fn failed(&mut self, key: &Key) -> Duration {
        let n = self.failures.entry(key.clone()).or_insert(0);
        *n += 1;
        FAILURE_BACKOFF.delay(*n)
    }
}

/// Runs a controller until `shutdown`: watch, resync every `resync`, reconcile, requeue.
pub async fn run<C: Controller>(controller: C, ctx: Context, resync: Duration, shutdown: CancellationToken) {
    let store = ctx.store.clone();
    let mut queue = WorkQueue::default();
    let start = store.revision();
    for key in controller.all_keys(&*store) {
        queue.add(key);
    }
    let mut changes = match store.watch(controller.watched(), start) {
        Ok(w) => w,
        Err(e) => {
            tracing::error!("{} cannot watch the store: {e}", C::NAME);
            return;
        }
    };
    let mut resync_tick = tokio::time::interval_at(Instant::now() + resync, resync);
    resync_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let (has_work, has_deadlines) = (!queue.ready.is_empty(), !queue.delayed.is_empty());
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            batch = changes.next() => match batch {
                Some(batch) => {
                    for event in &batch.events {
                        for key in controller.keys_for(&*store, event) {
                            queue.add(key);
                        }
                    }
                }
                None => break,
            },
            _ = resync_tick.tick() => {
                let now = Instant::now();
                queue.resting.retain(|_, until| *until > now);
                for key in controller.all_keys(&*store) {
                    queue.add(key);
                }
            }
            Some(key) = queue.expired(), if has_deadlines => queue.add(key),
            _ = std::future::ready(()), if has_work => {
                let Some(key) = queue.pop() else { continue };
                let began = Instant::now();
                let outcome = controller.reconcile(&key, &ctx, chrono::Utc::now()).await;
                queue.reconciled(&key, began);
                match outcome {
                    Ok(action) => {
                        queue.failures.remove(&key);
                        queue.failures.give_back_spare();
                        if let Action::RequeueAfter(after) = action {
                            queue.add_after(key, Instant::now() + after);
                        }
                    }
                    Err(e) => {
                        let wait = queue.failed(&key);
                        tracing::warn!("{e}; retrying in {wait:?}");
                        queue.add_after(key, Instant::now() + wait);
                    }
                }
            }
        }
    }
}

/// How often events are collected: often enough that a burst of pods (several events
/// each) cannot pile up far past the limit.
const EVENT_GC_PERIOD: Duration = Duration::from_secs(10);
/// The most deletions one collection commits at once.
const EVENT_GC_BATCH: usize = 5_000;

/// Deletes events whose last occurrence is older than `ttl`, and the oldest beyond the
/// newest `limit`; returns how many.
pub async fn collect_events(store: &dyn Store, ttl: Duration, limit: usize, now: Time) -> Result<usize> {
    let cutoff = now - chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::MAX);
    let (_, events) = store.list(Kind::Event, None);
    let mut by_age: Vec<(Option<Time>, &Object)> = events
        .iter()
        .filter_map(|o| match &**o {
            Object::Event(e) => Some((e.last_timestamp.or(e.metadata.created_at), &**o)),
            _ => None,
        })
        .collect();
    by_age.sort_by_key(|(last, _)| *last);
    let over_limit = by_age.len().saturating_sub(limit);
    let doomed: Vec<&Object> = by_age
        .iter()
        .enumerate()
        .take_while(|(i, (last, _))| *i < over_limit || last.is_some_and(|t| t < cutoff))
        .map(|(_, (_, object))| *object)
        .collect();
    for chunk in doomed.chunks(EVENT_GC_BATCH) {
        let txn = Txn { writes: chunk.iter().map(|o| delete_unless_repeated(o)).collect(), ..Txn::default() };
        store.commit(txn).await.map_err(|source| ControllerError::Store { controller: "event-gc", key: "events".into(), source })?;
    }
    Ok(doomed.len())
}

/// Deletes an event as it was judged; one repeated (or deleted) meanwhile is left for the
/// next collection, without failing the others in its transaction.
fn delete_unless_repeated(event: &Object) -> Write {
    let judged = event.metadata().resource_version;
    Write::new(Key::of(event), move |_, current| {
        Ok(if current.is_some_and(|c| c.metadata().resource_version == judged) { Change::Delete } else { Change::Keep })
    })
}

/// When the events that stay are moved to fresh memory ([`Store::compact`]): once the
/// collections have deleted a quarter of the limit or more, at the first that deletes none,
/// so that a burst is compacted once, after it.
#[derive(Debug, Default)]
struct EventChurn {
    deleted: usize,
}

impl EventChurn {
    /// Counts a collection that deleted `deleted` events; true when it is time to compact.
    fn collected(&mut self, deleted: usize, limit: usize) -> bool {
        self.deleted += deleted;
        let due = deleted == 0 && self.deleted > 0 && self.deleted >= limit / 4;
        if due {
            self.deleted = 0;
        }
        due
    }
}

/// Runs [`collect_events`] every [`EVENT_GC_PERIOD`] until `shutdown`, and compacts the
/// events after a burst of deletions (see [`EventChurn`]).
pub async fn run_event_gc(store: Arc<dyn Store>, ttl: Duration, limit: usize, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(EVENT_GC_PERIOD);
    let mut churn = EventChurn::default();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => match collect_events(&*store, ttl, limit, chrono::Utc::now()).await {
                Ok(deleted) => {
                    if churn.collected(deleted, limit) {
                        store.compact(Kind::Event);
                    }
                }
                Err(e) => tracing::warn!("{e}"),
            }
        }
    }
}

/// A store error met while reconciling `key`.
pub(crate) fn store_error(controller: &'static str, key: &Key, source: StoreError) -> ControllerError {
    ControllerError::Store { controller, key: key.to_string(), source }
}

#[cfg(test)]
pub(crate) mod fixtures {
    use crate::ops;
    use shared::api::Heartbeat;
    use shared::model::{Condition, Namespace, NodeResources, ObjectMeta, Pod, PodPhase, Time, conditions};
    use shared::registration::{NodeDescription, Registrant};

    use super::*;
    use crate::store::{CachedStore, Change, Write};

    pub async fn context() -> Context {
        let store = CachedStore::in_memory(10_000);
        let ns = Namespace { kind: "Namespace".into(), metadata: ObjectMeta::named("", "default"), ..Default::default() };
        store.commit(Txn::new().with(ops::create(ns))).await.unwrap();
        Context { store: Arc::new(store), config: Arc::new(Config::default()) }
    }

    pub async fn put(ctx: &Context, object: Object) {
        let key = Key::of(&object);
        ctx.store.commit(Txn::new().with(Write::new(key, move |_, _| Ok(Change::Put(object.clone()))))).await.unwrap();
    }

    pub fn pod(name: &str, labels: &[(&str, &str)], node: &str, phase: PodPhase) -> Pod {
        let mut p: Pod = serde_json::from_str(include_str!("../../../examples/pod.json")).unwrap();
        p.metadata.name = name.into();
        p.metadata.labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        p.spec.containers[0].ports.clear();
        crate::resources::stamp_new(&mut p, chrono::Utc::now());
        p.spec.node_name = node.into();
        p.status.phase = phase;
        p
    }

    /// Registers node `name` (4 CPU, 8Gi, 110 pods) at `at` exactly as its agent does.
    pub async fn register_node(ctx: &Context, name: &str, at: Time) {
        let description = NodeDescription::new(name, NodeResources { cpu: 4000, memory: 8 << 30, pods: 110 });
        let registration = ops::register_node(description.to_node(at), Registrant::OwnNode, at, ctx.config.node_monitor_grace);
        ctx.store.commit(registration).await.unwrap();
    }

    /// The agent's frequent heartbeat at `at`: a renewal of the node's lease.
    pub async fn renew(ctx: &Context, name: &str, at: Time) {
        ctx.store.commit(Txn::new().with(ops::renew_lease(name, at, ctx.config.node_monitor_grace))).await.unwrap();
    }

    /// A status heartbeat at `at` whose Ready condition has `status` (`True`, `False`, `Unknown`).
    pub async fn heartbeat(ctx: &Context, name: &str, status: &str, at: Time) {
        let ready = Condition { type_: conditions::NODE_READY.into(), status: status.into(), ..Default::default() };
        let beat = Heartbeat { conditions: vec![ready], ..Heartbeat::default() };
        ctx.store.commit(Txn::new().with(ops::heartbeat(name, beat, at))).await.unwrap();
    }

    /// A registered node whose agent reports Ready `status` now.
    pub async fn node_with_ready(ctx: &Context, name: &str, status: &str) {
        let now = chrono::Utc::now();
        register_node(ctx, name, now).await;
        heartbeat(ctx, name, status, now).await;
    }

    pub fn pods(ctx: &Context) -> Vec<Pod> {
        ctx.store
            .list(Kind::Pod, None)
            .1
            .iter()
            .filter_map(|o| match &**o {
                Object::Pod(p) => Some(p.clone()),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use shared::model::{ObjectReference, event_types};

    use super::*;
    use crate::events;

    #[test]
    fn events_are_compacted_once_after_a_burst_of_deletions() {
        let mut churn = EventChurn::default();
        let compacted: Vec<bool> =
            [0, 100, 2_000, 2_000, 0, 0, 1_000, 0, 4_000, 0].iter().map(|deleted| churn.collected(*deleted, 20_000)).collect();
        // 4,100 deleted are not yet a quarter of 20,000; with 1,000 more they are.
        assert_eq!(compacted, [false, false, false, false, false, false, false, true, false, false]);
        let mut small = EventChurn::default();
        assert_eq!([0, 1, 0, 0].map(|deleted| small.collected(deleted, 2)), [false, false, true, false], "a limit under 4");
    }

    #[tokio::test]
    async fn old_events_are_collected() {
        let ctx = fixtures::context().await;
        let now = chrono::Utc::now();
        let involved = ObjectReference { kind: "Pod".into(), namespace: "default".into(), name: "a".into(), uid: "1".into() };
        let old = events::new_event(involved.clone(), event_types::NORMAL, "Old", "old", "test");
        let new = events::new_event(involved, event_types::NORMAL, "New", "new", "test");
        ctx.store.commit(Txn::new().with(events::record(old, now - chrono::Duration::hours(2)))).await.unwrap();
        ctx.store.commit(Txn::new().with(events::record(new, now))).await.unwrap();
        assert_eq!(collect_events(&*ctx.store, Duration::from_secs(3600), 10, now).await.unwrap(), 1);
        assert_eq!(ctx.store.count(Kind::Event), 1);
    }

    #[tokio::test]
    async fn events_beyond_the_limit_are_collected_oldest_first() {
        let ctx = fixtures::context().await;
        let now = chrono::Utc::now();
        for i in 0..12 {
            let involved = ObjectReference { kind: "Pod".into(), namespace: "default".into(), name: format!("p{i}"), uid: i.to_string() };
            let event = events::new_event(involved, event_types::NORMAL, "Started", "started", "test");
            ctx.store.commit(Txn::new().with(events::record(event, now - chrono::Duration::seconds(60 - i)))).await.unwrap();
        }
        assert_eq!(collect_events(&*ctx.store, Duration::from_secs(3600), 5, now).await.unwrap(), 7);
        let (_, kept) = ctx.store.list(Kind::Event, None);
        let mut names: Vec<String> = kept
            .iter()
            .map(|o| match &**o {
                Object::Event(e) => e.involved_object.name.clone(),
                _ => unreachable!(),
            })
            .collect();
        names.sort();
        assert_eq!(names, ["p10", "p11", "p7", "p8", "p9"], "the five newest stay");
    }

    #[tokio::test(start_paused = true)]
    async fn the_work_queue_dedups_backs_off_and_keeps_the_earliest_deadline() {
        let mut q = WorkQueue::default();
        let k = Key::new(Kind::Pod, "default", "a");
        q.add(k.clone());
        q.add(k.clone());
        assert_eq!(q.ready.len(), 1);
        assert_eq!(q.pop(), Some(k.clone()));
        let waits: Vec<u64> = (0..10).map(|_| q.failed(&k).as_millis() as u64).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 6400, 12_800, 25_600, 30_000]);

        let began = Instant::now();
        q.add_after(k.clone(), began + Duration::from_secs(5));
        q.add_after(k.clone(), began + Duration::from_secs(1));
        q.add_after(k.clone(), began + Duration::from_secs(3));
        assert_eq!(q.expired().await, Some(k.clone()));
        assert_eq!(began.elapsed(), Duration::from_secs(1), "the earliest deadline wins");
        assert!(q.delayed.is_empty() && q.deadlines.is_empty());

        q.add_after(k.clone(), Instant::now() + Duration::from_secs(1));
        q.add(k.clone());
        assert!(q.delayed.is_empty(), "a key made ready leaves the timer");
        q.add_after(k.clone(), Instant::now() + Duration::from_secs(1));
        assert!(q.delayed.is_empty(), "a ready key is not delayed");
        assert_eq!(q.expired().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_whose_reconcile_was_long_rests_three_times_as_long_before_the_next() {
        let mut q = WorkQueue::default();
        let (slow, quick) = (Key::new(Kind::Deployment, "default", "big"), Key::new(Kind::Deployment, "default", "small"));
        let began = Instant::now();
        tokio::time::advance(Duration::from_millis(10)).await;
        q.reconciled(&slow, began);
        q.reconciled(&quick, Instant::now());

        q.add(quick.clone());
        assert_eq!(q.pop(), Some(quick), "a reconcile that took no time leaves no rest");
        q.add(slow.clone());
        q.add(slow.clone());
        assert!(q.ready.is_empty(), "changes during the rest wait for its end");
        assert_eq!(q.expired().await, Some(slow.clone()));
        assert_eq!(began.elapsed(), Duration::from_millis(40), "10 ms of work, 30 ms of rest");
        q.add(slow.clone());
        assert_eq!(q.pop(), Some(slow.clone()), "ready once rested");
        assert!(q.resting.is_empty());
    }
}
