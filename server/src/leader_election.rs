//! Leader election through a Lease in the store, as client-go's `tools/leaderelection` does
//! it for kube-scheduler and kube-controller-manager: acquire, renew and release are
//! compare-and-swap writes of one Lease; a candidate judges a lease expired by its own clock,
//! from when it saw the lease last change; the leader stops acting before anyone may take
//! its lease. Built on [`Store`] alone, so it works on any store.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use shared::model::{Kind, Lease, LeaseSpec, Object, ObjectMeta, SYSTEM_NAMESPACE, event_types};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::LeaderElection;
use crate::metrics::Metrics;
use crate::store::{Key, Store, StoreError, Txn, WatchStream, commit_one};
use crate::{events, ops};

/// The leader's lease. Kubernetes has one per component (`kube-scheduler`,
/// `kube-controller-manager`); Shepherd's scheduler and controllers run in one process and
/// share the scheduler's queue with the API, so one lease elects them together.
pub const CONTROL_PLANE_LEASE: &str = "shepherd-control-plane";

/// The reason of the event a new leader records on the lease, as client-go's resource lock.
pub const LEADER_ELECTION_REASON: &str = "LeaderElection";

/// The key of the leader's lease.
pub fn control_plane_lease_key() -> Key {
    Key::new(Kind::Lease, SYSTEM_NAMESPACE, CONTROL_PLANE_LEASE)
}

/// The lease as this elector last saw it change, and when, by its own clock.
#[derive(Debug, Clone)]
struct Observed {
    spec: LeaseSpec,
    at: Instant,
}

/// How a term of leadership ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// No renewal within the renew deadline, or another holder seen.
    Lost,
    Shutdown,
}

/// One candidate for one lease.
pub struct Elector {
    store: Arc<dyn Store>,
    key: Key,
    identity: String,
    timing: LeaderElection,
    observed: Option<Observed>,
    metrics: Arc<Metrics>,
}

impl Elector {
    pub fn new(store: Arc<dyn Store>, key: Key, identity: impl Into<String>, timing: LeaderElection, metrics: Arc<Metrics>) -> Self {
        Elector { store, key, identity: identity.into(), timing, observed: None, metrics }
    }

    /// Whether the lease as last seen names this candidate (client-go's `IsLeader`).
    fn is_leader(&self) -> bool {
        self.observed.as_ref().is_some_and(|o| o.spec.holder_identity == self.identity)
    }

    fn observe(&mut self, spec: LeaseSpec) {
        self.observed = Some(Observed { spec, at: Instant::now() });
    }

    /// Campaigns until `shutdown`. Each time it wins it runs `lead` under a child token,
    /// renews, and on losing cancels that token and waits for every task `lead` started
    /// before it campaigns again; on shutdown it releases the lease after they stopped
    /// (client-go's `ReleaseOnCancel`), so that another server leads at once.
    ///
    /// `won` is a first attempt's success ([`Elector::try_once`]).
    pub async fn run(mut self, won: Option<Instant>, shutdown: CancellationToken, mut lead: impl FnMut(CancellationToken) -> JoinSet<()>) {
        let mut won = won;
        loop {
            let renewed_at = match won.take() {
                Some(at) => at,
                None => match self.acquire(&shutdown).await {
                    Some(at) => at,
                    None => return,
                },
            };
            tracing::info!("{} became leader ({})", self.identity, self.key);
            self.record_event(format!("{} became leader", self.identity)).await;
            let leading = shutdown.child_token();
            self.metrics.set_leading(true);
            let mut tasks = lead(leading.clone());
            let ended = self.renew(renewed_at, &shutdown).await;
            leading.cancel();
            while let Some(result) = tasks.join_next().await {
                if let Err(e) = result {
                    tracing::error!("a loop of the leader failed: {e}");
                }
            }
            self.metrics.set_leading(false);
            if ended == Ended::Shutdown {
                self.release().await;
                return;
            }
            tracing::info!("{} stopped leading ({}): the scheduler and the controllers stopped", self.identity, self.key);
        }
    }

    /// One attempt to acquire the lease, for a server to take an absent or released lease
    /// before it answers, so that a lone server schedules from its start. Returns when the
    /// attempt started if it won.
    pub async fn try_once(&mut self) -> Option<Instant> {
        let started = Instant::now();
        match tokio::time::timeout(self.timing.renew_deadline, self.try_acquire_or_renew()).await {
            Ok(Ok(true)) => Some(started),
            _ => None,
        }
    }

    /// Tries every retry period, and whenever the lease changes, until it holds the lease.
    /// Returns when the winning attempt started, from which the renew deadline counts.
    async fn acquire(&mut self, shutdown: &CancellationToken) -> Option<Instant> {
        let mut changes = self.store.watch(&[Kind::Lease], 0).ok();
        loop {
            let started = Instant::now();
            let attempt = tokio::select! {
                _ = shutdown.cancelled() => return None,
                attempt = tokio::time::timeout(self.timing.renew_deadline, self.try_acquire_or_renew()) => attempt,
            };
            match attempt {
                Ok(Ok(true)) => return Some(started),
                Ok(Ok(false)) => {}
                Ok(Err(e)) => tracing::warn!("cannot acquire {}: {e}", self.key),
                Err(_) => tracing::warn!("cannot acquire {}: the store did not answer within {:?}", self.key, self.timing.renew_deadline),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return None,
                _ = tokio::time::sleep(self.timing.retry_period) => {}
                // A released lease is taken at once, not a retry period later.
                () = changed(&mut changes, &self.key) => {}
            }
        }
    }

    /// Renews every retry period. The term ends once no renewal succeeded within the renew
    /// deadline, counted from the start of the last successful attempt (not its end, so a
    /// slow commit cannot stretch it): every other candidate saw that write no earlier, and
    /// waits a whole lease duration from then. A hung commit is abandoned at the deadline.
    async fn renew(&mut self, mut renewed_at: Instant, shutdown: &CancellationToken) -> Ended {
        loop {
            let deadline = renewed_at + self.timing.renew_deadline;
            tokio::select! {
                _ = shutdown.cancelled() => return Ended::Shutdown,
                _ = tokio::time::sleep_until(deadline) => return self.lost("no renewal within the renew deadline"),
                _ = tokio::time::sleep(self.timing.retry_period) => {}
            }
            let started = Instant::now();
            let attempt = tokio::select! {
                _ = shutdown.cancelled() => return Ended::Shutdown,
                attempt = tokio::time::timeout_at(deadline, self.try_acquire_or_renew()) => attempt,
            };
            match attempt {
                Ok(Ok(true)) => renewed_at = started,
                Ok(Ok(false)) if !self.is_leader() => return self.lost("another server holds the lease"),
                Ok(Ok(false)) => {}
                Ok(Err(e)) => tracing::warn!("cannot renew {}: {e}", self.key),
                Err(_) => return self.lost("no renewal within the renew deadline"),
            }
        }
    }

    /// Whether `observed` names another holder whose lease has not run out by this
    /// candidate's clock, counted from when it saw the lease change.
    fn held_by_another(&self, observed: &Observed) -> bool {
        let duration = Duration::from_secs(u64::try_from(observed.spec.lease_duration_seconds).unwrap_or(0));
        !observed.spec.holder_identity.is_empty()
            && observed.spec.holder_identity != self.identity
            && observed.at + duration > Instant::now()
    }

    fn lost(&self, why: &str) -> Ended {
        tracing::info!("{} lost {}: {why}", self.identity, self.key);
        Ended::Lost
    }

    /// client-go's `tryAcquireOrRenew`: takes the lease when it is absent, released, expired
    /// (by this candidate's clock since it last saw it change) or already this candidate's.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, StoreError> {
        let now = chrono::Utc::now();
        let mut spec = LeaseSpec {
            holder_identity: self.identity.clone(),
            lease_duration_seconds: ops::lease_seconds(self.timing.lease_duration),
            acquire_time: Some(now),
            renew_time: Some(now),
            lease_transitions: Some(0),
        };
        let Some(current) = self.store.get(&self.key) else {
            // A lease deleted by hand does not end its holder's term: that server acts until
            // its renewal fails, so the term as last seen runs out first.
            if self.observed.as_ref().is_some_and(|o| self.held_by_another(o)) {
                return Ok(false);
            }
            let mut lease =
                Lease { metadata: ObjectMeta::named(SYSTEM_NAMESPACE, &self.key_name()), spec: spec.clone(), ..Lease::default() };
            crate::resources::stamp_new(&mut lease, now);
            self.swap(0, lease).await?;
            self.observe(spec);
            return Ok(true);
        };
        let Object::Lease(old) = &*current else {
            return Err(StoreError::Backend(format!("{} holds another kind", self.key)));
        };
        if self.observed.as_ref().is_none_or(|o| o.spec != old.spec) {
            self.observe(old.spec.clone());
        }
        if self.observed.as_ref().is_some_and(|o| self.held_by_another(o)) {
            return Ok(false);
        }
        let transitions = old.spec.lease_transitions.unwrap_or(0);
        if old.spec.holder_identity == self.identity {
            spec.acquire_time = old.spec.acquire_time;
            spec.lease_transitions = Some(transitions);
        } else {
            spec.lease_transitions = Some(transitions.saturating_add(1));
        }
        let lease = Lease { spec: spec.clone(), ..old.clone() };
        match self.swap(old.metadata.resource_version, lease).await {
            Ok(()) => {
                self.observe(spec);
                Ok(true)
            }
            // Another candidate wrote first: it is seen at the next attempt.
            Err(StoreError::Conflict(why)) => {
                tracing::debug!("{why}");
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// client-go's `release`: an empty holder and a one-second lease, so that another
    /// candidate takes it at once. Only what this candidate still holds is released.
    async fn release(&mut self) {
        if !self.is_leader() {
            return;
        }
        let Some(current) = self.store.get(&self.key) else { return };
        let Object::Lease(old) = &*current else { return };
        if old.spec.holder_identity != self.identity {
            return;
        }
        let now = chrono::Utc::now();
        let spec = LeaseSpec {
            holder_identity: String::new(),
            lease_duration_seconds: 1,
            acquire_time: Some(now),
            renew_time: Some(now),
            lease_transitions: old.spec.lease_transitions,
        };
        let released = Lease { spec: spec.clone(), ..old.clone() };
        match tokio::time::timeout(self.timing.renew_deadline, self.swap(old.metadata.resource_version, released)).await {
            Ok(Ok(())) => {
                self.observe(spec);
                tracing::info!("{} released {}", self.identity, self.key);
            }
            Ok(Err(e)) => tracing::warn!("cannot release {}: {e}", self.key),
            Err(_) => tracing::warn!("cannot release {}: the store did not answer", self.key),
        }
    }

    /// Writes `lease` if the stored one is still at `version` (0: if there is none).
    async fn swap(&self, version: u64, lease: Lease) -> Result<(), StoreError> {
        commit_one(&*self.store, ops::swap_lease(self.key.clone(), version, lease)).await.map(|_| ())
    }

    /// client-go's resource lock records `LeaderElection` events on the lease.
    async fn record_event(&self, message: String) {
        let Some(lease) = self.store.get(&self.key) else { return };
        let event = events::new_event(events::reference(&lease), event_types::NORMAL, LEADER_ELECTION_REASON, message, &self.key_name());
        if let Err(e) = self.store.commit(Txn::new().with(events::record(event, chrono::Utc::now()))).await {
            tracing::warn!("cannot record the leader election event of {}: {e}", self.key);
        }
    }

    fn key_name(&self) -> String {
        self.key.key.rsplit('/').next().unwrap_or_default().to_string()
    }
}

/// Resolves when a change of `key` arrives; never, once the watch has ended.
async fn changed(changes: &mut Option<WatchStream>, key: &Key) {
    while let Some(stream) = changes {
        match stream.next().await {
            Some(batch) if batch.events.iter().any(|e| Key::of(&e.object) == *key) => return,
            Some(_) => {}
            None => *changes = None,
        }
    }
    std::future::pending().await
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use futures::FutureExt;
    use futures::future::BoxFuture;

    use super::*;
    use crate::store::{CachedStore, Change, Interest, Outcome, Write};

    const TIMING: LeaderElection = LeaderElection {
        leader_elect: true,
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
    };

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Mode {
        Pass,
        /// Every commit fails at once.
        Fail,
        /// Every commit waits forever, as on a store that stopped answering.
        Hang,
    }

    /// One candidate's view of the shared store, whose commits can be made to fail or hang.
    #[derive(Clone)]
    struct Faulty {
        inner: CachedStore,
        mode: Arc<Mutex<Mode>>,
        /// When this candidate's last commit went through.
        last_ok: Arc<Mutex<Option<Instant>>>,
    }

    impl Faulty {
        fn new(inner: &CachedStore) -> Self {
            Faulty { inner: inner.clone(), mode: Arc::new(Mutex::new(Mode::Pass)), last_ok: Arc::default() }
        }

        fn set(&self, mode: Mode) {
            *self.mode.lock().unwrap() = mode;
        }

        fn last_ok(&self) -> Instant {
            self.last_ok.lock().unwrap().expect("a commit went through")
        }
    }

    impl Store for Faulty {
        fn backend(&self) -> &'static str {
            "faulty"
        }
        fn revision(&self) -> u64 {
            self.inner.revision()
        }
        fn get(&self, key: &Key) -> Option<Arc<Object>> {
            self.inner.get(key)
        }
        fn unreadable(&self, key: &Key) -> Option<crate::store::StoreError> {
            self.inner.unreadable(key)
        }
        fn unreadable_in(&self, kind: Kind, namespace: Option<&str>, start: &str, until: Option<&str>) -> Option<crate::store::StoreError> {
            self.inner.unreadable_in(kind, namespace, start, until)
        }
        fn list(&self, kind: Kind, namespace: Option<&str>) -> (u64, Vec<Arc<Object>>) {
            self.inner.list(kind, namespace)
        }
        fn list_at(
            &self,
            kind: Kind,
            namespace: Option<&str>,
            revision: Option<u64>,
            range: crate::store::Range<'_>,
        ) -> crate::store::Result<crate::store::Slice> {
            self.inner.list_at(kind, namespace, revision, range)
        }
        fn pods_on_node(&self, node: &str) -> (u64, Vec<Arc<Object>>) {
            self.inner.pods_on_node(node)
        }
        fn pods_owned_by(&self, owner: &Key) -> (u64, Vec<Arc<Object>>) {
            self.inner.pods_owned_by(owner)
        }
        fn count(&self, kind: Kind) -> usize {
            self.inner.count(kind)
        }
        fn wait_for(&self, revision: u64, limit: Duration) -> BoxFuture<'static, bool> {
            self.inner.wait_for(revision, limit)
        }
        fn commit(&self, txn: Txn) -> BoxFuture<'static, crate::store::Result<Vec<Outcome>>> {
            let (mode, inner, last_ok) = (*self.mode.lock().unwrap(), self.inner.clone(), self.last_ok.clone());
            async move {
                match mode {
                    Mode::Pass => {}
                    Mode::Fail => return Err(StoreError::Backend("the store is unreachable".into())),
                    Mode::Hang => std::future::pending::<()>().await,
                }
                let outcomes = inner.commit(txn).await?;
                *last_ok.lock().unwrap() = Some(Instant::now());
                Ok(outcomes)
            }
            .boxed()
        }
        fn watch_interest(&self, interest: Interest, from: u64) -> crate::store::Result<WatchStream> {
            self.inner.watch_interest(interest, from)
        }
        fn expire_history(&self) {}
        fn compact(&self, _: Kind) {}
        fn close(&self) -> BoxFuture<'static, ()> {
            self.inner.close()
        }
    }

    /// Who acts, when: each candidate's `lead` records when its loop starts and stops.
    #[derive(Clone, Default)]
    struct Acting {
        now: Arc<Mutex<Vec<String>>>,
        most_at_once: Arc<Mutex<usize>>,
        log: Arc<Mutex<Vec<(Instant, String, bool)>>>,
    }

    impl Acting {
        fn lead(&self, id: &str) -> impl FnMut(CancellationToken) -> JoinSet<()> + use<> {
            let (acting, id) = (self.clone(), id.to_string());
            move |token: CancellationToken| {
                let (acting, id) = (acting.clone(), id.clone());
                let mut tasks = JoinSet::new();
                tasks.spawn(async move {
                    acting.mark(&id, true);
                    token.cancelled().await;
                    acting.mark(&id, false);
                });
                tasks
            }
        }

        fn mark(&self, id: &str, started: bool) {
            let mut now = self.now.lock().unwrap();
            if started {
                now.push(id.to_string());
            } else {
                now.retain(|n| n != id);
            }
            let mut most = self.most_at_once.lock().unwrap();
            *most = (*most).max(now.len());
            self.log.lock().unwrap().push((Instant::now(), id.to_string(), started));
        }

        fn leaders(&self) -> Vec<String> {
            self.now.lock().unwrap().clone()
        }

        /// When `id` last started (`true`) or stopped acting.
        fn last(&self, id: &str, started: bool) -> Option<Instant> {
            self.log.lock().unwrap().iter().rev().find(|(_, i, s)| i == id && *s == started).map(|(at, ..)| *at)
        }

        fn most_at_once(&self) -> usize {
            *self.most_at_once.lock().unwrap()
        }

        /// Lets time pass in steps of 100 ms until `done`, at most `limit`.
        async fn until(&self, limit: Duration, done: impl Fn(&Acting) -> bool) {
            let end = Instant::now() + limit;
            while !done(self) {
                assert!(Instant::now() < end, "not within {limit:?}: acting {:?}", self.leaders());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    fn candidate(store: Arc<dyn Store>, id: &str, acting: &Acting) -> (CancellationToken, tokio::task::JoinHandle<()>) {
        candidate_with(store, id, acting, Arc::default())
    }

    fn candidate_with(
        store: Arc<dyn Store>,
        id: &str,
        acting: &Acting,
        metrics: Arc<Metrics>,
    ) -> (CancellationToken, tokio::task::JoinHandle<()>) {
        let shutdown = CancellationToken::new();
        let elector = Elector::new(store, control_plane_lease_key(), id, TIMING, metrics);
        (shutdown.clone(), tokio::spawn(elector.run(None, shutdown, acting.lead(id))))
    }

    fn lease(store: &dyn Store) -> Lease {
        match store.get(&control_plane_lease_key()).as_deref() {
            Some(Object::Lease(l)) => l.clone(),
            other => panic!("no lease: {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn of_two_candidates_on_one_store_exactly_one_leads_and_keeps_leading() {
        let store = CachedStore::in_memory(1_000);
        let acting = Acting::default();
        let metrics = [Arc::new(Metrics::default()), Arc::new(Metrics::default())];
        let _a = candidate_with(Arc::new(store.clone()), "a", &acting, metrics[0].clone());
        let _b = candidate_with(Arc::new(store.clone()), "b", &acting, metrics[1].clone());
        acting.until(Duration::from_secs(1), |a| a.leaders().len() == 1).await;
        let leader = acting.leaders()[0].clone();
        let leading = if leader == "a" { [true, false] } else { [false, true] };
        assert_eq!([metrics[0].leading(), metrics[1].leading()], leading);
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert_eq!(acting.leaders(), std::slice::from_ref(&leader), "the same leader, renewing");
        assert_eq!(acting.most_at_once(), 1);
        let held = lease(&store);
        assert_eq!(held.spec.holder_identity, leader);
        assert_eq!((held.spec.lease_duration_seconds, held.spec.lease_transitions), (15, Some(0)));
        assert!(held.spec.renew_time > held.spec.acquire_time, "renewed since it was acquired");
        let (_, events) = store.list(Kind::Event, Some(SYSTEM_NAMESPACE));
        let Some(Object::Event(event)) = events.first().map(|e| &**e) else { panic!("no event") };
        assert_eq!((event.reason.as_str(), event.message.clone()), (LEADER_ELECTION_REASON, format!("{leader} became leader")));
        assert_eq!(event.involved_object.name, CONTROL_PLANE_LEASE);
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_that_cannot_renew_stops_before_its_lease_expires_and_the_other_waits_a_lease_duration() {
        for mode in [Mode::Fail, Mode::Hang] {
            let store = CachedStore::in_memory(1_000);
            let acting = Acting::default();
            let a_store = Faulty::new(&store);
            let _a = candidate(Arc::new(a_store.clone()), "a", &acting);
            acting.until(Duration::from_secs(1), |a| a.leaders() == ["a"]).await;
            let _b = candidate(Arc::new(store.clone()), "b", &acting);
            tokio::time::sleep(Duration::from_secs(7)).await;
            a_store.set(mode);
            acting.until(Duration::from_secs(30), |a| a.leaders() == ["b"]).await;
            let renewed = a_store.last_ok();
            let (stopped, took_over) = (acting.last("a", false).unwrap(), acting.last("b", true).unwrap());
            assert!(stopped <= renewed + TIMING.renew_deadline, "{mode:?}: a acted {:?} after its last renewal", stopped - renewed);
            assert!(took_over >= renewed + TIMING.lease_duration, "{mode:?}: b took over {:?} after a's renewal", took_over - renewed);
            assert_eq!(acting.most_at_once(), 1, "{mode:?}");
            assert_eq!(lease(&store).spec.lease_transitions, Some(1), "{mode:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_that_shuts_down_releases_the_lease_and_the_other_leads_within_a_retry_period() {
        let store = CachedStore::in_memory(1_000);
        let acting = Acting::default();
        let (stop_a, a) = candidate(Arc::new(store.clone()), "a", &acting);
        acting.until(Duration::from_secs(1), |a| a.leaders() == ["a"]).await;
        let _b = candidate(Arc::new(store.clone()), "b", &acting);
        tokio::time::sleep(Duration::from_secs(5)).await;
        let stopping = Instant::now();
        stop_a.cancel();
        a.await.unwrap();
        acting.until(TIMING.retry_period, |a| a.leaders() == ["b"]).await;
        assert!(acting.last("b", true).unwrap() - stopping <= TIMING.retry_period);
        assert_eq!(acting.most_at_once(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_candidate_judges_expiry_by_its_own_clock_from_when_it_saw_the_lease_change() {
        let store = CachedStore::in_memory(1_000);
        // Held by a server whose clock runs an hour behind: its renew_time says nothing.
        let behind = chrono::Utc::now() - chrono::Duration::hours(1);
        let spec = LeaseSpec {
            holder_identity: "x".into(),
            lease_duration_seconds: 15,
            acquire_time: Some(behind),
            renew_time: Some(behind),
            lease_transitions: Some(3),
        };
        let held = Lease { metadata: ObjectMeta::named(SYSTEM_NAMESPACE, CONTROL_PLANE_LEASE), spec, ..Lease::default() };
        commit_one(&store, Write::new(control_plane_lease_key(), move |_, _| Ok(Change::Put(Object::Lease(held.clone()))))).await.unwrap();
        let acting = Acting::default();
        let started = Instant::now();
        let _b = candidate(Arc::new(store.clone()), "b", &acting);
        acting.until(Duration::from_secs(20), |a| a.leaders() == ["b"]).await;
        let waited = acting.last("b", true).unwrap() - started;
        assert!(waited >= TIMING.lease_duration && waited <= TIMING.lease_duration + TIMING.retry_period, "{waited:?}");
        assert_eq!(lease(&store).spec.lease_transitions, Some(4));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_leader_whose_lease_was_taken_does_not_act_when_it_resumes_and_campaigns_again() {
        let store = CachedStore::in_memory(1_000);
        let acting = Acting::default();
        let a_store = Faulty::new(&store);
        let _a = candidate(Arc::new(a_store.clone()), "a", &acting);
        acting.until(Duration::from_secs(1), |a| a.leaders() == ["a"]).await;
        let (stop_b, b) = candidate(Arc::new(store.clone()), "b", &acting);
        a_store.set(Mode::Hang);
        acting.until(Duration::from_secs(30), |a| a.leaders() == ["b"]).await;
        a_store.set(Mode::Pass);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(acting.leaders(), ["b"], "a, answered again, saw b's lease and waits");
        assert_eq!(acting.most_at_once(), 1);
        stop_b.cancel();
        b.await.unwrap();
        acting.until(TIMING.retry_period, |a| a.leaders() == ["a"]).await;
        assert_eq!(lease(&store).spec.lease_transitions, Some(2), "a leads again, a new term under a new token");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_deleted_by_hand_stays_its_holders_until_the_term_last_seen_runs_out() {
        let store = CachedStore::in_memory(1_000);
        let acting = Acting::default();
        let _a = candidate(Arc::new(store.clone()), "a", &acting);
        acting.until(Duration::from_secs(1), |a| a.leaders() == ["a"]).await;
        let _b = candidate(Arc::new(store.clone()), "b", &acting);
        tokio::time::sleep(Duration::from_secs(5)).await;
        commit_one(&store, Write::new(control_plane_lease_key(), |_, _| Ok(Change::Delete))).await.unwrap();
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(acting.leaders(), ["a"], "a wrote its lease again at its next renewal; b never acted");
        assert_eq!(acting.most_at_once(), 1);
        assert_eq!(lease(&store).spec.holder_identity, "a");
    }
}
