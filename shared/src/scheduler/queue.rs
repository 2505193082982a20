//! The scheduling queue, as kube-scheduler keeps it: an active queue of pods to decide on,
//! pods backing off after a failed attempt (1 s doubling to 10 s), and unschedulable pods
//! parked until a cluster change might fit them or until the 5-minute flush. Pure: the
//! caller passes `now` in milliseconds on any clock that does not go backwards, so the
//! server's loop and the browser's simulator drive the very same queue.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::backoff::Backoff;
use crate::capacity::GiveBack;
use crate::readiness::Readiness;
use crate::words;

/// The first wait after a failed attempt.
pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait after failed attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// The longest an unschedulable pod waits without a cluster change before it is retried.
pub const UNSCHEDULABLE_FLUSH: Duration = Duration::from_secs(300);

/// The queue's timings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSettings {
    pub backoff: Backoff,
    pub flush: Duration,
}

impl Default for QueueSettings {
    fn default() -> Self {
        QueueSettings { backoff: Backoff::new(INITIAL_BACKOFF, MAX_BACKOFF), flush: UNSCHEDULABLE_FLUSH }
    }
}

/// A change in the cluster that may fit a pod that did not fit before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterEvent {
    NodeAdded {
        node: String,
    },
    /// The node passes the readiness filter at the same instant it failed it before.
    NodeReady {
        node: String,
        before: Readiness,
    },
    NodeUncordoned {
        node: String,
    },
    NodeGrew {
        node: String,
    },
    NodeLabelsChanged {
        node: String,
    },
    NodeTaintsChanged {
        node: String,
    },
    /// A pod counted on a node finished or was deleted.
    PodFreedRoom {
        pod: String,
        node: String,
    },
}

impl fmt::Display for ClusterEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClusterEvent::NodeAdded { node } => write!(f, "node {node} joined"),
            ClusterEvent::NodeReady { node, before: Readiness::NoHeartbeat } => write!(f, "node {node} sent its first heartbeat"),
            ClusterEvent::NodeReady { node, before: Readiness::Stale { .. } } => write!(f, "node {node} is heartbeating again"),
            ClusterEvent::NodeReady { node, .. } => write!(f, "node {node} became Ready"),
            ClusterEvent::NodeUncordoned { node } => write!(f, "node {node} was uncordoned"),
            ClusterEvent::NodeGrew { node } => write!(f, "node {node} has more allocatable resources"),
            ClusterEvent::NodeLabelsChanged { node } => write!(f, "the labels of node {node} changed"),
            ClusterEvent::NodeTaintsChanged { node } => write!(f, "the taints of node {node} changed"),
            ClusterEvent::PodFreedRoom { pod, node } => write!(f, "pod {pod} freed room on node {node}"),
        }
    }
}

/// Why a waiting pod went back to the active queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requeue {
    Cluster(ClusterEvent),
    /// Its back-off ended.
    BackoffEnded,
    /// It waited the whole flush interval without a cluster change.
    Flush(Duration),
}

impl fmt::Display for Requeue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Requeue::Cluster(event) => event.fmt(f),
            Requeue::BackoffEnded => f.write_str("its back-off ended"),
            Requeue::Flush(flush) => write!(f, "{} passed without a cluster change", words::wait(*flush)),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Active,
    Backoff {
        until: i64,
    },
    Unschedulable {
        flush_at: i64,
        backoff_until: i64,
    },
    /// Popped: being decided on, or its bind is in flight.
    InFlight,
}

#[derive(Debug, Clone)]
struct Entry {
    place: Place,
    /// Failed attempts in a row.
    attempts: u32,
    requeued_by: Option<Requeue>,
}

/// Keys waiting until an instant; the earliest is found and the due ones taken in O(log n).
#[derive(Debug, Clone)]
struct Deadlines<K> {
    order: BTreeSet<(i64, K)>,
}

impl<K: Ord + Clone> Deadlines<K> {
    fn new() -> Self {
        Deadlines { order: BTreeSet::new() }
    }

    fn insert(&mut self, key: K, at: i64) {
        self.order.insert((at, key));
    }

    fn remove(&mut self, key: &K, at: i64) {
        self.order.remove(&(at, key.clone()));
    }

    fn earliest(&self) -> Option<i64> {
        self.order.first().map(|(at, _)| *at)
    }

    fn take_due(&mut self, now: i64) -> Vec<K> {
        let mut due = Vec::new();
        while self.order.first().is_some_and(|(at, _)| *at <= now) {
            if let Some((_, key)) = self.order.pop_first() {
                due.push(key);
            }
        }
        due
    }
}

/// Where a pod waits, as people read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum QueueState {
    /// In the active queue, to be decided on next.
    Active,
    /// Waiting out its back-off after a failed attempt.
    BackingOff,
    /// No node fitted: parked until a cluster change or the flush.
    Unschedulable,
    /// Being decided on, or its bind is in flight.
    Binding,
}

/// One pod's place in the queue, for `sheepctl describe` and the simulator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QueueStatus {
    pub state: QueueState,
    /// Failed attempts in a row.
    pub attempts: u32,
    /// The back-off those attempts earned.
    pub backoff_ms: u64,
    /// When its back-off ends, from now; 0 when it has.
    pub retry_in_ms: u64,
    /// For an unschedulable pod: when the flush retries it, from now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flush_in_ms: Option<u64>,
    /// What last moved it back to the active queue (kept through later attempts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeued_by: Option<String>,
}

impl QueueStatus {
    /// The pod's place in one line, as `sheepctl describe` and the simulator show it.
    pub fn describe(&self) -> String {
        let attempts = match self.attempts {
            0 => String::new(),
            1 => " after 1 failed attempt".to_string(),
            n => format!(" after {n} failed attempts"),
        };
        let mut text = match self.state {
            QueueState::Active => format!("in the active queue{attempts}"),
            QueueState::Binding => "being bound".to_string(),
            QueueState::BackingOff => format!(
                "backing off {}{attempts}, retried in {}",
                words::wait(Duration::from_millis(self.backoff_ms)),
                words::wait(Duration::from_millis(self.retry_in_ms))
            ),
            QueueState::Unschedulable => {
                let mut text = format!("unschedulable{attempts}, waiting for a cluster change");
                if self.retry_in_ms > 0 {
                    text.push_str(&format!(" (back-off {} left)", words::wait(Duration::from_millis(self.retry_in_ms))));
                }
                if let Some(flush) = self.flush_in_ms {
                    text.push_str(&format!(" or the flush in {}", words::wait(Duration::from_millis(flush))));
                }
                text
            }
        };
        if let Some(why) = &self.requeued_by {
            text.push_str(&format!("; requeued because {why}"));
        }
        text
    }
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The queue of pods `K` (a key that names one pod) to schedule.
#[derive(Debug, Clone)]
pub struct SchedulingQueue<K> {
    settings: QueueSettings,
    entries: HashMap<K, Entry>,
    /// May hold keys that have since left the active place; `pop` skips them.
    active: VecDeque<K>,
    active_len: usize,
    backoff: Deadlines<K>,
    /// By flush instant.
    unschedulable: Deadlines<K>,
    in_flight: usize,
}

impl<K: Clone + Eq + Hash + Ord> Default for SchedulingQueue<K> {
    fn default() -> Self {
        SchedulingQueue::new(QueueSettings::default())
    }
}

impl<K: Clone + Eq + Hash + Ord> SchedulingQueue<K> {
    pub fn new(settings: QueueSettings) -> Self {
        SchedulingQueue {
            settings,
            entries: HashMap::new(),
            active: VecDeque::new(),
            active_len: 0,
            backoff: Deadlines::new(),
            unschedulable: Deadlines::new(),
            in_flight: 0,
        }
    }

    pub fn settings(&self) -> QueueSettings {
        self.settings
    }

    /// Pods the queue tracks, wherever they wait.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Pods ready to be popped.
    pub fn active_len(&self) -> usize {
        self.active_len
    }

    /// Pods popped and not yet reported on.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    pub fn contains(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }

    pub fn is_in_flight(&self, key: &K) -> bool {
        self.entries.get(key).is_some_and(|e| e.place == Place::InFlight)
    }

    /// A pod that needs scheduling (created, seen on the watch, found by a sweep): queued
    /// unless it already waits somewhere. Returns whether it was new.
    pub fn add(&mut self, key: K) -> bool {
        if self.entries.contains_key(&key) {
            return false;
        }
        self.entries.insert(key.clone(), Entry { place: Place::Active, attempts: 0, requeued_by: None });
        self.push_active(key);
        true
    }

    fn push_active(&mut self, key: K) {
        self.active.push_back(key);
        self.active_len += 1;
    }

    /// The next pod to decide on; it stays in flight until [`Self::scheduled`],
    /// [`Self::failed`], [`Self::unschedulable`] or [`Self::remove`].
    pub fn pop(&mut self) -> Option<K> {
        while let Some(key) = self.active.pop_front() {
            let Some(entry) = self.entries.get_mut(&key) else { continue };
            if entry.place != Place::Active {
                continue;
            }
            entry.place = Place::InFlight;
            self.active_len -= 1;
            self.in_flight += 1;
            self.active.give_back_spare();
            return Some(key);
        }
        self.active.give_back_spare();
        None
    }

    /// The pod is bound: it leaves the queue.
    pub fn scheduled(&mut self, key: &K) {
        self.remove(key);
    }

    /// The pod no longer needs scheduling (deleted, bound elsewhere): it leaves the queue.
    pub fn remove(&mut self, key: &K) {
        let Some(entry) = self.entries.remove(key) else { return };
        self.entries.give_back_spare();
        self.leave(key, entry.place);
    }

    fn leave(&mut self, key: &K, place: Place) {
        match place {
            Place::Active => self.active_len -= 1,
            Place::Backoff { until } => self.backoff.remove(key, until),
            Place::Unschedulable { flush_at, .. } => self.unschedulable.remove(key, flush_at),
            Place::InFlight => self.in_flight -= 1,
        }
    }

    fn move_to(&mut self, key: &K, place: Place) {
        let Some(entry) = self.entries.get_mut(key) else { return };
        let old = std::mem::replace(&mut entry.place, place);
        self.leave(key, old);
        self.enter(key.clone(), place);
    }

    fn enter(&mut self, key: K, place: Place) {
        match place {
            Place::Active => self.push_active(key),
            Place::Backoff { until } => self.backoff.insert(key, until),
            Place::Unschedulable { flush_at, .. } => self.unschedulable.insert(key, flush_at),
            Place::InFlight => self.in_flight += 1,
        }
    }

    fn backoff_of(&self, attempts: u32) -> i64 {
        ms(self.settings.backoff.delay(attempts))
    }

    /// Counts a failed attempt and returns the back-off it earns.
    fn count_failure(&mut self, key: &K) -> Option<i64> {
        let entry = self.entries.get_mut(key)?;
        entry.attempts = entry.attempts.saturating_add(1);
        let attempts = entry.attempts;
        Some(self.backoff_of(attempts))
    }

    /// The attempt failed for a reason other than "no node fits" (the bind lost a race, an
    /// error): the pod backs off, then goes back to the active queue because its back-off
    /// ended.
    pub fn failed(&mut self, key: &K, now: i64) {
        if let Some(backoff) = self.count_failure(key) {
            if let Some(entry) = self.entries.get_mut(key) {
                entry.requeued_by = None;
            }
            self.move_to(key, Place::Backoff { until: now.saturating_add(backoff) });
        }
    }

    /// No node fits the pod: it is parked until a cluster change (but at least until its
    /// back-off ends) or until the flush.
    pub fn unschedulable(&mut self, key: &K, now: i64) {
        if let Some(backoff) = self.count_failure(key) {
            let flush_at = now.saturating_add(ms(self.settings.flush));
            self.move_to(key, Place::Unschedulable { flush_at, backoff_until: now.saturating_add(backoff) });
        }
    }

    /// A change that may fit parked pods: every unschedulable pod goes back, to the active
    /// queue if its back-off is over, else to wait it out.
    pub fn cluster_changed(&mut self, event: &ClusterEvent, now: i64) {
        let parked = std::mem::replace(&mut self.unschedulable, Deadlines::new());
        for (_, key) in parked.order {
            let Some(entry) = self.entries.get_mut(&key) else { continue };
            let Place::Unschedulable { backoff_until, .. } = entry.place else { continue };
            let place = if backoff_until <= now { Place::Active } else { Place::Backoff { until: backoff_until } };
            entry.place = place;
            entry.requeued_by = Some(Requeue::Cluster(event.clone()));
            self.enter(key, place);
        }
    }

    /// Moves pods whose back-off ended, and unschedulable pods whose flush came, to the
    /// active queue.
    pub fn tick(&mut self, now: i64) {
        for key in self.backoff.take_due(now) {
            if let Some(entry) = self.entries.get_mut(&key) {
                entry.place = Place::Active;
                entry.requeued_by.get_or_insert(Requeue::BackoffEnded);
                self.push_active(key);
            }
        }
        let flush = self.settings.flush;
        for key in self.unschedulable.take_due(now) {
            if let Some(entry) = self.entries.get_mut(&key) {
                entry.place = Place::Active;
                entry.requeued_by = Some(Requeue::Flush(flush));
                self.push_active(key);
            }
        }
    }

    /// When [`Self::tick`] next has something to do.
    pub fn next_wake(&self) -> Option<i64> {
        match (self.backoff.earliest(), self.unschedulable.earliest()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Why the pod last went back to the active queue.
    pub fn requeued_by(&self, key: &K) -> Option<&Requeue> {
        self.entries.get(key)?.requeued_by.as_ref()
    }

    /// The pod's place at `now`, for people.
    pub fn status(&self, key: &K, now: i64) -> Option<QueueStatus> {
        let entry = self.entries.get(key)?;
        let left = |at: i64| u64::try_from(at.saturating_sub(now)).unwrap_or(0);
        let (state, retry_in_ms, flush_in_ms) = match entry.place {
            Place::Active => (QueueState::Active, 0, None),
            Place::InFlight => (QueueState::Binding, 0, None),
            Place::Backoff { until } => (QueueState::BackingOff, left(until), None),
            Place::Unschedulable { flush_at, backoff_until } => (QueueState::Unschedulable, left(backoff_until), Some(left(flush_at))),
        };
        Some(QueueStatus {
            state,
            attempts: entry.attempts,
            backoff_ms: u64::try_from(self.backoff_of(entry.attempts)).unwrap_or(0),
            retry_in_ms,
            flush_in_ms,
            requeued_by: entry.requeued_by.as_ref().map(ToString::to_string),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1000;

    fn event() -> ClusterEvent {
        ClusterEvent::NodeReady { node: "n1".into(), before: Readiness::NoHeartbeat }
    }

    #[test]
    fn a_queue_that_emptied_after_a_burst_gives_its_room_back() {
        let mut q = SchedulingQueue::default();
        for pod in 0..150_000u32 {
            q.add(pod);
        }
        while let Some(pod) = q.pop() {
            q.scheduled(&pod);
        }
        assert!(q.is_empty());
        assert!(q.entries.capacity() < 10_000 && q.active.capacity() < 10_000, "{} {}", q.entries.capacity(), q.active.capacity());
    }

    #[test]
    fn a_failed_pod_backs_off_from_one_second_doubling_to_ten() {
        let mut q = SchedulingQueue::default();
        q.add("a");
        let mut waits = Vec::new();
        let mut now = 0;
        for _ in 0..6 {
            assert_eq!(q.pop(), Some("a"));
            q.failed(&"a", now);
            let until = q.next_wake().unwrap();
            waits.push((until - now) / S);
            q.tick(until - 1);
            assert_eq!(q.active_len(), 0, "not before its back-off ends");
            q.tick(until);
            now = until;
        }
        assert_eq!(waits, [1, 2, 4, 8, 10, 10]);
        assert_eq!(q.requeued_by(&"a"), Some(&Requeue::BackoffEnded));
    }

    #[test]
    fn a_cluster_change_requeues_unschedulable_pods_respecting_their_backoff() {
        let mut q = SchedulingQueue::default();
        for key in ["a", "b"] {
            q.add(key);
        }
        assert_eq!(q.pop(), Some("a"));
        q.unschedulable(&"a", 0);
        assert_eq!(q.pop(), Some("b"));
        q.unschedulable(&"b", 0);
        assert!(!q.add("a"), "a tracked pod is not queued twice");
        q.cluster_changed(&event(), 500);
        assert_eq!(q.active_len(), 0, "both are still within their 1 s back-off");
        assert_eq!(q.status(&"a", 500).unwrap().state, QueueState::BackingOff);
        q.tick(S);
        assert_eq!((q.pop(), q.pop(), q.pop()), (Some("a"), Some("b"), None));
        assert_eq!(q.requeued_by(&"a").unwrap().to_string(), "node n1 sent its first heartbeat");
    }

    #[test]
    fn unschedulable_pods_are_retried_after_five_minutes_without_a_change() {
        let mut q = SchedulingQueue::default();
        q.add("a");
        q.pop();
        q.unschedulable(&"a", 0);
        q.tick(299 * S);
        assert_eq!(q.active_len(), 0);
        assert_eq!(q.next_wake(), Some(300 * S));
        q.tick(300 * S);
        assert_eq!(q.pop(), Some("a"));
        assert_eq!(q.requeued_by(&"a").unwrap().to_string(), "5m passed without a cluster change");
    }

    #[test]
    fn removed_and_finished_pods_leave_every_place() {
        let mut q = SchedulingQueue::default();
        for key in ["active", "backoff", "parked", "flight", "bound"] {
            q.add(key);
        }
        q.remove(&"active");
        let popped: Vec<&str> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(popped, ["backoff", "parked", "flight", "bound"], "a removed pod is never popped");
        q.failed(&"backoff", 0);
        q.unschedulable(&"parked", 0);
        q.scheduled(&"bound");
        assert_eq!((q.len(), q.in_flight(), q.active_len()), (3, 1, 0));
        for key in ["backoff", "parked", "flight"] {
            q.remove(&key);
        }
        assert!(q.is_empty());
        assert_eq!((q.in_flight(), q.next_wake()), (0, None));
        q.cluster_changed(&event(), 10 * S);
        q.tick(1000 * S);
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn status_says_where_a_pod_waits_and_why_it_came_back() {
        let mut q = SchedulingQueue::default();
        q.add("a");
        assert_eq!(q.status(&"a", 0).unwrap().describe(), "in the active queue");
        q.pop();
        assert_eq!(q.status(&"a", 0).unwrap().describe(), "being bound");
        q.failed(&"a", 0);
        q.tick(S);
        q.pop();
        q.unschedulable(&"a", S);
        assert_eq!(
            q.status(&"a", 1500).unwrap().describe(),
            "unschedulable after 2 failed attempts, waiting for a cluster change (back-off 1.5s left) or the flush in 4m59s; \
             requeued because its back-off ended"
        );
        q.cluster_changed(&ClusterEvent::PodFreedRoom { pod: "default/b".into(), node: "n1".into() }, 1500);
        assert_eq!(
            q.status(&"a", 1500).unwrap().describe(),
            "backing off 2s after 2 failed attempts, retried in 1.5s; requeued because pod default/b freed room on node n1"
        );
    }
}
