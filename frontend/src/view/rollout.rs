//! A deployment's rollout as the Deployments page draws it: its ReplicaSets side by side,
//! each with its pods, and a bounded history of its replica counts with the band its
//! strategy allows, laid out for the chart. The ReplicaSets a deployment has, their
//! revisions and the band's rounding are `shared::rollout`'s.

use std::collections::VecDeque;
use std::rc::Rc;

use shared::model::{Deployment, Pod, ReplicaSet};
use shared::rollout::{equal_ignoring_hash, history};

use crate::view::time::one_decimal;

/// One of a deployment's ReplicaSets, as a column of the page.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaSetColumn {
    pub name: String,
    pub revision: i64,
    /// It runs the deployment's template: the rollout's new ReplicaSet.
    pub new: bool,
    pub desired: i32,
    pub current: i32,
    pub ready: i32,
    /// Its pods (by controller reference), in the order given (the cache's: by name).
    pub pods: Vec<PodMark>,
}

/// A pod as a mark in its ReplicaSet's column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodMark {
    pub namespace: String,
    pub name: String,
    pub ready: bool,
    pub terminating: bool,
}

/// The ReplicaSets of `deployment` worth a column, oldest revision first: the new one, every
/// old one that still has or wants pods, and, when no old one has, the newest old one (the
/// revision an undo returns to), so that a finished rollout still shows where it came from.
pub fn replica_set_columns<'a>(
    deployment: &Deployment,
    sets: &[ReplicaSet],
    pods: impl IntoIterator<Item = &'a Rc<Pod>>,
) -> Vec<ReplicaSetColumn> {
    let revisions = history(deployment, sets);
    let is_new = |rs: &ReplicaSet| equal_ignoring_hash(&rs.spec.template, &deployment.spec.template);
    let busy = |rs: &ReplicaSet| rs.spec.replicas > 0 || rs.status.replicas > 0;
    let previous = revisions.iter().rev().find(|r| !is_new(r.replica_set)).map(|r| r.number);
    let any_old_busy = revisions.iter().any(|r| !is_new(r.replica_set) && busy(r.replica_set));
    let shown: Vec<_> = revisions
        .iter()
        .filter(|r| is_new(r.replica_set) || busy(r.replica_set) || (!any_old_busy && Some(r.number) == previous))
        .collect();
    // A list per shown set, found by a scan: a deployment has a few sets, and a map here
    // would add its own copy of the map's code to the bundle.
    let mut marks: Vec<Vec<PodMark>> = vec![Vec::new(); shown.len()];
    for pod in pods {
        let owner = pod.metadata.controller().map(|o| o.uid.as_str());
        if let Some(i) = owner.and_then(|uid| shown.iter().position(|r| r.replica_set.metadata.uid == uid)) {
            marks[i].push(PodMark {
                namespace: pod.metadata.namespace.clone(),
                name: pod.metadata.name.clone(),
                ready: pod.is_ready(),
                terminating: pod.metadata.deletion_timestamp.is_some(),
            });
        }
    }
    shown
        .iter()
        .zip(marks)
        .map(|(r, pods)| {
            let rs = r.replica_set;
            ReplicaSetColumn {
                name: rs.metadata.name.clone(),
                revision: r.number,
                new: is_new(rs),
                desired: rs.spec.replicas,
                current: rs.status.replicas,
                ready: rs.status.ready_replicas,
                pods,
            }
        })
        .collect()
}

/// How many colours the marks of successive revisions cycle through (`rev-0` … in the
/// stylesheet).
pub const REVISION_COLOURS: i64 = 6;

/// The stylesheet class of a revision's colour.
pub fn revision_class(revision: i64) -> String {
    format!("rev-{}", revision.rem_euclid(REVISION_COLOURS))
}

/// A deployment's counts at one moment, as its status reported them, and the band its
/// strategy allows then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Milliseconds since the epoch, by the browser's clock when the change arrived.
    pub at_ms: i64,
    /// Pods of every ReplicaSet (`status.replicas`).
    pub pods: i32,
    pub updated: i32,
    pub ready: i32,
    pub unavailable: i32,
    /// `replicas + maxSurge`: the most pods the rollout may run.
    pub ceiling: i32,
    /// `replicas − maxUnavailable`: the fewest available pods it may leave.
    pub floor: i32,
}

impl Sample {
    pub fn of(deployment: &Deployment, at_ms: i64) -> Sample {
        let (spec, status) = (&deployment.spec, &deployment.status);
        Sample {
            at_ms,
            pods: status.replicas,
            updated: status.updated_replicas,
            ready: status.ready_replicas,
            unavailable: status.unavailable_replicas,
            ceiling: spec.replicas + deployment.max_surge(),
            floor: spec.replicas - deployment.max_unavailable(),
        }
    }

    fn same_counts(&self, other: &Sample) -> bool {
        Sample { at_ms: other.at_ms, ..*self } == *other
    }
}

/// How far back the chart reaches.
pub const HISTORY_MS: i64 = 5 * 60 * 1000;
/// The narrowest window the chart shows, so that a page just opened is not all one instant.
pub const MIN_WINDOW_MS: i64 = 60 * 1000;
/// At most this many samples a deployment, whatever the rate of change.
pub const MAX_SAMPLES: usize = 600;

/// The samples of every deployment on the page, by uid (a deployment deleted and made again
/// starts afresh); each series behind an `Rc` that changes exactly when a sample is added.
/// A list, not a map: a page holds a few deployments, and each map type adds its own code to
/// the bundle.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RolloutHistory {
    series: Vec<(String, Rc<VecDeque<Sample>>)>,
}

impl RolloutHistory {
    pub fn samples(&self, uid: &str) -> Option<&Rc<VecDeque<Sample>>> {
        self.series.iter().find(|(id, _)| id == uid).map(|(_, samples)| samples)
    }

    /// Records each deployment's counts when they differ from its last sample, drops samples
    /// older than [`HISTORY_MS`] (but the last of them, where the line enters the window)
    /// and the series of deployments no longer listed. Returns whether anything changed.
    pub fn observe<'a>(&mut self, deployments: impl IntoIterator<Item = &'a Deployment>, now_ms: i64) -> bool {
        let mut changed = false;
        let mut kept = Vec::new();
        for deployment in deployments {
            let uid = &deployment.metadata.uid;
            let sample = Sample::of(deployment, now_ms);
            let mut series = self.samples(uid).cloned().unwrap_or_default();
            if series.back().is_none_or(|last| !last.same_counts(&sample)) {
                let samples = Rc::make_mut(&mut series);
                samples.push_back(sample);
                while samples.len() > MAX_SAMPLES || samples.get(1).is_some_and(|s| s.at_ms <= now_ms - HISTORY_MS) {
                    samples.pop_front();
                }
                changed = true;
            }
            kept.push((uid.clone(), series));
        }
        // A deployment no longer listed takes its series along.
        changed |= self.series.iter().any(|(uid, _)| !kept.iter().any(|(id, _)| id == uid));
        self.series = kept;
        changed
    }
}

/// The chart's lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Series {
    Pods,
    Updated,
    Ready,
    Unavailable,
}

impl Series {
    pub const ALL: [Series; 4] = [Series::Pods, Series::Updated, Series::Ready, Series::Unavailable];

    pub fn name(self) -> &'static str {
        match self {
            Series::Pods => "pods",
            Series::Updated => "updated",
            Series::Ready => "ready",
            Series::Unavailable => "unavailable",
        }
    }

    pub fn value(self, sample: &Sample) -> i32 {
        match self {
            Series::Pods => sample.pods,
            Series::Updated => sample.updated,
            Series::Ready => sample.ready,
            Series::Unavailable => sample.unavailable,
        }
    }
}

/// The chart's drawing area, in the SVG's own units.
pub const CHART_WIDTH: i32 = 600;
pub const CHART_HEIGHT: i32 = 170;
/// Room for the count labels on the left and the time labels below.
pub const PLOT_LEFT: i32 = 30;
pub const PLOT_TOP: i32 = 8;
pub const PLOT_RIGHT: i32 = CHART_WIDTH - 8;
pub const PLOT_BOTTOM: i32 = CHART_HEIGHT - 22;

/// The chart laid out: each series as polyline points, the band as polygon points, and the
/// scale. Lines are steps: a count holds until the next sample changes it, and the last one
/// reaches to now.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartLayout {
    pub lines: Vec<(Series, String)>,
    pub band: String,
    /// The count at the top of the plot (the bottom is 0), and the y of a count.
    pub top_count: i32,
    /// How many milliseconds the x axis spans, ending now.
    pub window_ms: i64,
}

impl ChartLayout {
    pub fn y(&self, count: i32) -> i32 {
        y_of(count, self.top_count)
    }
}

fn y_of(count: i32, top_count: i32) -> i32 {
    let plot = i64::from(PLOT_BOTTOM - PLOT_TOP);
    let above = i64::from(top_count - count.clamp(0, top_count));
    PLOT_TOP + ((plot * above + i64::from(top_count) / 2) / i64::from(top_count)) as i32
}

/// Lays out `samples` (oldest first) on a window that ends at `now_ms`: the last
/// [`MIN_WINDOW_MS`] at least, and back to the first sample, at most [`HISTORY_MS`].
pub fn chart_layout(samples: &VecDeque<Sample>, now_ms: i64) -> Option<ChartLayout> {
    let first = samples.front()?;
    let last = samples.back()?;
    let now_ms = now_ms.max(last.at_ms);
    let window_ms = (now_ms - first.at_ms).clamp(MIN_WINDOW_MS, HISTORY_MS);
    let start = now_ms - window_ms;
    let x = |at_ms: i64| {
        let width = i64::from(PLOT_RIGHT - PLOT_LEFT);
        PLOT_LEFT + ((at_ms.max(start) - start) * width / window_ms) as i32
    };
    let top_count = samples.iter().flat_map(|s| [s.ceiling, s.floor, s.pods, s.updated, s.ready, s.unavailable]).max().unwrap_or(0).max(1);
    // A step line through (at, count) pairs, from the first sample to now.
    let steps = |count: &dyn Fn(&Sample) -> i32| -> Vec<(i32, i32)> {
        let mut points = Vec::with_capacity(samples.len() * 2 + 1);
        for (i, sample) in samples.iter().enumerate() {
            let (sx, sy) = (x(sample.at_ms), y_of(count(sample), top_count));
            if i > 0 {
                points.push((sx, y_of(count(&samples[i - 1]), top_count)));
            }
            points.push((sx, sy));
        }
        points.push((x(now_ms), y_of(count(last), top_count)));
        points
    };
    let lines = Series::ALL.iter().map(|&series| (series, points_text(&steps(&|s: &Sample| series.value(s))))).collect();
    let mut band = steps(&|s: &Sample| s.ceiling);
    band.extend(steps(&|s: &Sample| s.floor).into_iter().rev());
    Some(ChartLayout { lines, band: points_text(&band), top_count, window_ms })
}

/// Points as SVG's `points` attribute spells them.
fn points_text(points: &[(i32, i32)]) -> String {
    points.iter().map(|(x, y)| format!("{x},{y}")).collect::<Vec<_>>().join(" ")
}

/// Where the x axis starts, in words: `60 s ago`, then `2.5 min ago` past two minutes.
pub fn window_label(window_ms: i64) -> String {
    let seconds = window_ms / 1000;
    if seconds < 120 { format!("{seconds} s ago") } else { format!("{} min ago", one_decimal(window_ms / 6000)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::fixtures::{deployment, owner_of_kind, pod, replica_set_of};
    use shared::model::{IntOrString, PodPhase};

    fn owner_of(rs: &ReplicaSet) -> shared::model::OwnerReference {
        owner_of_kind("ReplicaSet", &rs.metadata)
    }

    fn sample(at_ms: i64, pods: i32, updated: i32, ready: i32, unavailable: i32) -> Sample {
        Sample { at_ms, pods, updated, ready, unavailable, ceiling: 5, floor: 3 }
    }

    #[test]
    fn a_rollout_shows_the_old_and_the_new_set_with_their_own_pods() {
        let mut d = deployment("web", 4, "minimal:1");
        let old = replica_set_of(&d, 1, 3);
        d.spec.template.spec.containers[0].image = "minimal:2".into();
        let new = replica_set_of(&d, 2, 2);
        let retired = replica_set_of(&deployment("web", 4, "minimal:0"), 0, 0);
        let mut old_pod = pod("default", "web-old-b", "n1", PodPhase::Running, 0);
        old_pod.metadata.owner_references = vec![owner_of(&old)];
        let mut leaving = pod("default", "web-old-a", "n1", PodPhase::Running, 0);
        leaving.metadata.owner_references = vec![owner_of(&old)];
        leaving.metadata.deletion_timestamp = leaving.metadata.created_at;
        let mut new_pod = pod("default", "web-new", "", PodPhase::Pending, 0);
        new_pod.metadata.owner_references = vec![owner_of(&new)];
        let stranger = pod("default", "lonely", "n1", PodPhase::Running, 0);
        let pods: Vec<Rc<Pod>> = [leaving, old_pod, new_pod, stranger].into_iter().map(Rc::new).collect();

        let columns = replica_set_columns(&d, &[new.clone(), retired, old.clone()], &pods);
        let shape: Vec<(&str, i64, bool, i32)> = columns.iter().map(|c| (c.name.as_str(), c.revision, c.new, c.desired)).collect();
        assert_eq!(
            shape,
            vec![(old.metadata.name.as_str(), 1, false, 3), (new.metadata.name.as_str(), 2, true, 2)],
            "revision 0 has no pods"
        );
        let names = |c: &ReplicaSetColumn| c.pods.iter().map(|p| (p.name.clone(), p.ready, p.terminating)).collect::<Vec<_>>();
        assert_eq!(names(&columns[0]), vec![("web-old-a".into(), true, true), ("web-old-b".into(), true, false)]);
        assert_eq!(names(&columns[1]), vec![("web-new".into(), false, false)]);
    }

    #[test]
    fn a_finished_rollout_still_shows_the_revision_before() {
        let mut d = deployment("web", 2, "minimal:1");
        let first = replica_set_of(&d, 1, 0);
        d.spec.template.spec.containers[0].image = "minimal:2".into();
        let second = replica_set_of(&d, 2, 0);
        d.spec.template.spec.containers[0].image = "minimal:3".into();
        let third = replica_set_of(&d, 3, 2);
        let columns = replica_set_columns(&d, &[first, second, third], &[]);
        assert_eq!(columns.iter().map(|c| (c.revision, c.new)).collect::<Vec<_>>(), vec![(2, false), (3, true)]);
        assert_eq!(revision_class(3), "rev-3");
        assert_eq!(revision_class(7), "rev-1");
    }

    #[test]
    fn a_sample_takes_the_band_as_kubernetes_rounds_it() {
        let mut d = deployment("web", 10, "minimal:1");
        d.set_defaults();
        d.status.replicas = 12;
        d.status.updated_replicas = 5;
        d.status.ready_replicas = 9;
        d.status.unavailable_replicas = 3;
        // 25 % of 10: surge rounds up to 3, unavailable down to 2.
        assert_eq!(Sample::of(&d, 7), Sample { at_ms: 7, pods: 12, updated: 5, ready: 9, unavailable: 3, ceiling: 13, floor: 8 });
        d.spec.strategy.rolling_update.as_mut().unwrap().max_unavailable = Some(IntOrString::Int(0));
        d.spec.strategy.rolling_update.as_mut().unwrap().max_surge = Some(IntOrString::String("0%".into()));
        assert_eq!((Sample::of(&d, 7).ceiling, Sample::of(&d, 7).floor), (10, 9), "both 0: one may be unavailable");
    }

    #[test]
    fn history_records_changes_only_and_stays_bounded() {
        let mut d = deployment("web", 3, "minimal:1");
        d.set_defaults();
        let mut history = RolloutHistory::default();
        assert!(history.observe([&d], 0));
        assert!(!history.observe([&d], 1_000), "the same counts again are no sample");
        let before = history.samples(&d.metadata.uid).unwrap().clone();
        d.status.updated_replicas = 1;
        assert!(history.observe([&d], 2_000));
        assert!(!Rc::ptr_eq(&before, history.samples(&d.metadata.uid).unwrap()), "a new sample is a new Rc");
        let times: Vec<i64> = history.samples(&d.metadata.uid).unwrap().iter().map(|s| s.at_ms).collect();
        assert_eq!(times, [0, 2_000]);

        // Older than the window: dropped, but for the last one, where the line enters it.
        d.status.updated_replicas = 2;
        history.observe([&d], 3_000 + HISTORY_MS);
        let times: Vec<i64> = history.samples(&d.metadata.uid).unwrap().iter().map(|s| s.at_ms).collect();
        assert_eq!(times, [2_000, 3_000 + HISTORY_MS]);

        for n in 0..(MAX_SAMPLES as i32 + 10) {
            d.status.ready_replicas = n;
            history.observe([&d], 4_000 + HISTORY_MS + i64::from(n));
        }
        assert_eq!(history.samples(&d.metadata.uid).unwrap().len(), MAX_SAMPLES);

        assert!(history.observe([], 10 * HISTORY_MS), "a deployment gone takes its series along");
        assert!(history.samples(&d.metadata.uid).is_none());
        assert!(!history.observe([], 10 * HISTORY_MS));
    }

    #[test]
    fn the_chart_draws_steps_to_now_and_the_band_between_ceiling_and_floor() {
        let samples = VecDeque::from([sample(0, 4, 0, 4, 0), sample(30_000, 5, 1, 4, 1)]);
        let layout = chart_layout(&samples, 60_000).unwrap();
        assert_eq!(layout.window_ms, MIN_WINDOW_MS);
        assert_eq!(layout.top_count, 5, "the ceiling is the highest count");
        let (x0, xm, x1) = (PLOT_LEFT, (PLOT_LEFT + PLOT_RIGHT) / 2, PLOT_RIGHT);
        assert_eq!((layout.y(5), layout.y(0)), (PLOT_TOP, PLOT_BOTTOM));
        let (y0, y1) = (layout.y(0), layout.y(1));
        let updated = &layout.lines.iter().find(|(s, _)| *s == Series::Updated).unwrap().1;
        assert_eq!(updated, &format!("{x0},{y0} {xm},{y0} {xm},{y1} {x1},{y1}"));
        let (y5, y3) = (layout.y(5), layout.y(3));
        assert_eq!(layout.band, format!("{x0},{y5} {xm},{y5} {xm},{y5} {x1},{y5} {x1},{y3} {xm},{y3} {xm},{y3} {x0},{y3}"));
    }

    #[test]
    fn the_window_grows_from_a_minute_to_the_history_and_then_slides() {
        let samples = VecDeque::from([sample(0, 1, 1, 1, 0)]);
        assert_eq!(chart_layout(&samples, 1_000).unwrap().window_ms, MIN_WINDOW_MS);
        assert_eq!(chart_layout(&samples, 90_000).unwrap().window_ms, 90_000);
        let old = chart_layout(&samples, 2 * HISTORY_MS).unwrap();
        assert_eq!(old.window_ms, HISTORY_MS);
        let pods = &old.lines[0].1;
        assert!(pods.starts_with(&format!("{PLOT_LEFT},")), "a sample before the window enters at its left edge: {pods}");
        assert!(chart_layout(&VecDeque::new(), 0).is_none());
        assert_eq!(window_label(MIN_WINDOW_MS), "60 s ago");
        assert_eq!(window_label(150_000), "2.5 min ago");
        assert_eq!(window_label(HISTORY_MS), "5.0 min ago");
    }
}
