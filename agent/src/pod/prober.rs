//! A container's probes, run as the kubelet's prober workers run them: one task per probe
//! on tokio's clock, probing at once and then every period, none before the initial delay
//! since the container started, counting results in a row against the success and failure
//! thresholds. The startup probe holds the other two back until it passes, then stops.
//! Readiness starts as failed; a liveness or startup failure past its threshold marks the
//! container to be killed and stops that probe. The results belong to one run of the
//! container: a restarted container is probed from the start again.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use shared::model::{Container, Probe, ProbeKind};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use crate::runtime::ProbeOutcome;

/// One probe's check of the container: the runtime running the probe's handler.
pub type Check = Arc<dyn Fn() -> BoxFuture<'static, crate::runtime::Result<ProbeOutcome>> + Send + Sync>;

/// What a prober tells its pod's worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// A probe ran and failed: the kubelet's `Unhealthy` event, one per failure.
    Failed { kind: ProbeKind, message: String },
    /// A probe could not run; the result counts neither way.
    Errored { kind: ProbeKind, message: String },
    /// A result changed (started, ready, or a kill is due): the worker looks again.
    Changed,
}

pub type Observer = Arc<dyn Fn(Report) + Send + Sync>;

/// The run of a container that probes belong to: its id and when it started (a container
/// that Docker starts again keeps its id).
pub type Run = (String, Option<DateTime<Utc>>);

#[derive(Debug, Default)]
struct Results {
    started: bool,
    ready: bool,
    failed: Option<ProbeKind>,
}

/// The probers of one run of one container, stopped when dropped.
pub struct ContainerProbes {
    run: Run,
    results: Arc<Mutex<Results>>,
    has_readiness: bool,
    tasks: Vec<JoinHandle<()>>,
}

impl ContainerProbes {
    /// Starts a prober for each probe of `container` (`None` if it has none) against `run`,
    /// which started `running_for` ago; `check` makes each probe's check.
    pub fn start(
        container: &Container,
        run: Run,
        running_for: Duration,
        check: impl Fn(&Probe) -> Check,
        observer: Observer,
    ) -> Option<ContainerProbes> {
        container.probes().next()?;
        let results = Arc::new(Mutex::new(Results { started: container.startup_probe.is_none(), ..Results::default() }));
        let tasks = container
            .probes()
            .map(|(kind, probe)| {
                let probe = probe.defaulted();
                tokio::spawn(run_prober(kind, check(&probe), probe, running_for, results.clone(), observer.clone()))
            })
            .collect();
        Some(ContainerProbes { run, results, has_readiness: container.readiness_probe.is_some(), tasks })
    }

    pub fn run(&self) -> &Run {
        &self.run
    }

    fn results(&self) -> std::sync::MutexGuard<'_, Results> {
        lock(&self.results)
    }

    /// Past its startup probe, if it has one.
    pub fn started(&self) -> bool {
        self.results().started
    }

    /// Started, and past its readiness probe if it has one.
    pub fn ready(&self) -> bool {
        let results = self.results();
        results.started && (!self.has_readiness || results.ready)
    }

    /// The probe that failed past its threshold, when the container must be killed.
    pub fn failed(&self) -> Option<ProbeKind> {
        self.results().failed
    }
}

impl Drop for ContainerProbes {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn lock(results: &Mutex<Results>) -> std::sync::MutexGuard<'_, Results> {
    results.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Seconds as a duration; validation keeps them from being negative.
fn seconds(value: i32) -> Duration {
    Duration::from_secs(u64::try_from(value).unwrap_or_default())
}

/// One probe's loop (kubelet's `worker.run` and `doProbe`).
async fn run_prober(kind: ProbeKind, check: Check, probe: Probe, running_for: Duration, results: Arc<Mutex<Results>>, observer: Observer) {
    let probing_from = Instant::now() + seconds(probe.initial_delay_seconds).saturating_sub(running_for);
    let mut ticks = tokio::time::interval(seconds(probe.period_seconds).max(Duration::from_secs(1)));
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut last: Option<bool> = None;
    let mut in_a_row = 0;
    loop {
        ticks.tick().await;
        if Instant::now() < probing_from {
            continue;
        }
        // The startup probe runs until the container has started; the others only after.
        if lock(&results).started == (kind == ProbeKind::Startup) {
            continue;
        }
        let passed = match check().await {
            Ok(ProbeOutcome::Success) => true,
            Ok(ProbeOutcome::Failure(message)) => {
                observer(Report::Failed { kind, message });
                false
            }
            Err(e) => {
                observer(Report::Errored { kind, message: e.to_string() });
                continue;
            }
        };
        if last == Some(passed) {
            in_a_row += 1;
        } else {
            last = Some(passed);
            in_a_row = 1;
        }
        let threshold = if passed { probe.success_threshold } else { probe.failure_threshold };
        if in_a_row < threshold {
            continue;
        }
        let changed = {
            let mut results = lock(&results);
            let before = (results.started, results.ready, results.failed);
            match (kind, passed) {
                (ProbeKind::Startup, true) => results.started = true,
                (ProbeKind::Readiness, ready) => results.ready = ready,
                (ProbeKind::Liveness, true) => {}
                (ProbeKind::Liveness | ProbeKind::Startup, false) => results.failed = Some(kind),
            }
            before != (results.started, results.ready, results.failed)
        };
        if changed {
            observer(Report::Changed);
        }
        if kind.kills() && !passed {
            // Held until the container runs again, as new probers.
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use shared::model::{ExecAction, ProbeKind};

    use super::*;

    fn probe(period: i32, initial_delay: i32, success: i32, failure: i32) -> Probe {
        Probe {
            exec: Some(ExecAction { command: vec!["true".into()] }),
            period_seconds: period,
            initial_delay_seconds: initial_delay,
            success_threshold: success,
            failure_threshold: failure,
            ..Probe::default()
        }
    }

    /// A check per probe kind that answers from a script (then success), and counts its calls
    /// with the time of each.
    struct Script {
        answers: Mutex<Vec<(ProbeKind, VecDeque<bool>)>>,
        calls: Mutex<Vec<(ProbeKind, Duration)>>,
        began: Instant,
    }

    impl Script {
        fn new(answers: Vec<(ProbeKind, Vec<bool>)>) -> Arc<Script> {
            Arc::new(Script {
                answers: Mutex::new(answers.into_iter().map(|(k, a)| (k, a.into())).collect()),
                calls: Mutex::new(vec![]),
                began: Instant::now(),
            })
        }

        fn check(self: &Arc<Self>, kind: ProbeKind) -> Check {
            let script = self.clone();
            Arc::new(move || {
                script.calls.lock().unwrap().push((kind, script.began.elapsed()));
                let mut answers = script.answers.lock().unwrap();
                let next = answers.iter_mut().find(|(k, _)| *k == kind).and_then(|(_, a)| a.pop_front()).unwrap_or(true);
                Box::pin(async move { Ok(if next { ProbeOutcome::Success } else { ProbeOutcome::Failure(format!("{kind:?} says no")) }) })
            })
        }

        fn calls(&self, kind: ProbeKind) -> Vec<u64> {
            self.calls.lock().unwrap().iter().filter(|(k, _)| *k == kind).map(|(_, t)| t.as_secs()).collect()
        }
    }

    fn start(container: &Container, script: &Arc<Script>, reports: &Arc<Mutex<Vec<Report>>>) -> ContainerProbes {
        let reports = reports.clone();
        let observer: Observer = Arc::new(move |report| reports.lock().unwrap().push(report));
        let kinds: Vec<(ProbeKind, Probe)> = container.probes().map(|(k, p)| (k, p.defaulted())).collect();
        ContainerProbes::start(
            container,
            ("c1".into(), None),
            Duration::ZERO,
            |probe| {
                let kind = kinds.iter().find(|(_, p)| p == probe).map(|(k, _)| *k).unwrap();
                script.check(kind)
            },
            observer,
        )
        .expect("the container has probes")
    }

    async fn advance(seconds: u64) {
        for _ in 0..seconds * 10 {
            tokio::time::advance(Duration::from_millis(100)).await;
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn readiness_is_false_until_the_first_success_and_follows_the_thresholds() {
        let container = Container { readiness_probe: Some(probe(10, 5, 2, 3)), ..Container::default() };
        // Two successes make it ready, then three failures in a row make it not ready.
        let script = Script::new(vec![(ProbeKind::Readiness, vec![true, true, true, false, false, true, false, false, false])]);
        let reports = Arc::new(Mutex::new(vec![]));
        let probes = start(&container, &script, &reports);
        advance(1).await;
        assert!(probes.started() && !probes.ready(), "not ready before the first success");
        assert!(script.calls(ProbeKind::Readiness).is_empty(), "nothing within the initial delay");
        advance(10).await;
        assert_eq!(script.calls(ProbeKind::Readiness), vec![10], "the first tick past the initial delay");
        assert!(!probes.ready(), "one success of the two the threshold asks");
        advance(10).await;
        assert!(probes.ready(), "two successes in a row");
        advance(40).await;
        assert!(probes.ready(), "a failure, two, then a success: never three in a row");
        advance(30).await;
        assert!(!probes.ready(), "three failures in a row");
        assert_eq!(script.calls(ProbeKind::Readiness), vec![10, 20, 30, 40, 50, 60, 70, 80, 90]);
        let failed = reports.lock().unwrap().iter().filter(|r| matches!(r, Report::Failed { .. })).count();
        assert_eq!(failed, 5, "an Unhealthy report for every failed probe");
        assert_eq!(reports.lock().unwrap().iter().filter(|r| **r == Report::Changed).count(), 2, "ready, then not ready");
        assert_eq!(probes.failed(), None, "readiness never kills");
    }

    #[tokio::test(start_paused = true)]
    async fn liveness_failing_past_its_threshold_marks_a_kill_and_stops_probing() {
        let container = Container { liveness_probe: Some(probe(5, 0, 1, 3)), ..Container::default() };
        let script = Script::new(vec![(ProbeKind::Liveness, vec![false, false, true, false, false, false, false])]);
        let reports = Arc::new(Mutex::new(vec![]));
        let probes = start(&container, &script, &reports);
        assert!(probes.ready(), "no readiness probe: ready once started");
        advance(16).await;
        assert_eq!(probes.failed(), None, "two failures, then a success: the count starts again");
        advance(5).await;
        assert_eq!(probes.failed(), None, "two failures in a row of the three");
        advance(5).await;
        assert_eq!(probes.failed(), Some(ProbeKind::Liveness));
        advance(60).await;
        assert_eq!(script.calls(ProbeKind::Liveness), vec![0, 5, 10, 15, 20, 25], "on hold once it failed");
    }

    #[tokio::test(start_paused = true)]
    async fn the_startup_probe_holds_the_others_back_until_it_passes() {
        let container = Container {
            startup_probe: Some(probe(2, 0, 1, 10)),
            readiness_probe: Some(probe(10, 0, 1, 3)),
            liveness_probe: Some(probe(10, 0, 1, 4)),
            ..Container::default()
        };
        let script = Script::new(vec![(ProbeKind::Startup, vec![false, false, false])]);
        let reports = Arc::new(Mutex::new(vec![]));
        let probes = start(&container, &script, &reports);
        advance(5).await;
        assert!(!probes.started() && !probes.ready());
        assert!(script.calls(ProbeKind::Liveness).is_empty() && script.calls(ProbeKind::Readiness).is_empty());
        advance(2).await;
        assert!(probes.started(), "the fourth startup probe passed at 6 s");
        assert!(!probes.ready(), "readiness has not passed yet");
        advance(10).await;
        assert!(probes.ready());
        assert_eq!(script.calls(ProbeKind::Startup), vec![0, 2, 4, 6], "the startup probe stops once it passed");
        assert_eq!(script.calls(ProbeKind::Readiness), vec![10], "the next readiness tick after the start");
        assert_eq!(script.calls(ProbeKind::Liveness), vec![10]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_startup_probe_that_never_passes_kills_the_container() {
        let container =
            Container { startup_probe: Some(probe(1, 0, 1, 3)), liveness_probe: Some(probe(1, 0, 1, 1)), ..Container::default() };
        let script = Script::new(vec![(ProbeKind::Startup, vec![false; 10])]);
        let reports = Arc::new(Mutex::new(vec![]));
        let probes = start(&container, &script, &reports);
        advance(3).await;
        assert_eq!(probes.failed(), Some(ProbeKind::Startup));
        assert!(!probes.started());
        assert!(script.calls(ProbeKind::Liveness).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_run_starts_from_the_initial_results_and_a_dropped_one_stops() {
        let container = Container { readiness_probe: Some(probe(1, 0, 1, 1)), ..Container::default() };
        let script = Script::new(vec![]);
        let reports = Arc::new(Mutex::new(vec![]));
        let first = start(&container, &script, &reports);
        advance(1).await;
        assert!(first.ready());
        drop(first);
        let calls = script.calls(ProbeKind::Readiness).len();
        advance(5).await;
        assert_eq!(script.calls(ProbeKind::Readiness).len(), calls, "a dropped run's probers stop");
        let second = start(&container, &script, &reports);
        assert!(!second.ready(), "readiness starts as failed for every run");
    }
}
