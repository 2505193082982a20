//! The pod page's view-model: a pod's events, its timeline from Created to Running with
//! T+ms deltas, its conditions in kubectl's order, and the plain-words reason it is Pending.

use std::rc::Rc;

use shared::model::{Condition, ContainerState, Event, Kind, Node, Pod, PodPhase, Time, conditions, find_condition};
use shared::scheduler::{Explanation, Verdict, reasons};
use shared::words::{PendingReason, first_seen, pending_reason as pending};

use crate::view::time::millis_between;
use shared::sort;

/// Events about one pod, oldest first. A recreated pod of the same name has a new uid: its
/// predecessor's events are left out when both carry one.
pub fn pod_events<'a>(pod: &Pod, events: impl IntoIterator<Item = &'a Rc<Event>>) -> Vec<Rc<Event>> {
    let mut out: Vec<Rc<Event>> = events.into_iter().filter(|e| e.involved_object.refers_to(Kind::Pod, &pod.metadata)).cloned().collect();
    sort::by_cached_key(&mut out, |e| (first_seen(e), e.metadata.resource_version));
    out
}

/// The seed's steps of a pod's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Created,
    Scheduled,
    Pulled,
    Started,
    Running,
}

impl Step {
    pub const ALL: [Step; 5] = [Step::Created, Step::Scheduled, Step::Pulled, Step::Started, Step::Running];

    pub fn name(self) -> &'static str {
        match self {
            Step::Created => "Created",
            Step::Scheduled => "Scheduled",
            Step::Pulled => "Pulled",
            Step::Started => "Started",
            Step::Running => "Running",
        }
    }

    /// Who does this step, as the seed tells it.
    pub fn actor(self) -> &'static str {
        match self {
            Step::Created => "API server stores the pod: Pending, node_name \"\"",
            Step::Scheduled => "scheduler binds it to a node",
            Step::Pulled => "agent has the image",
            Step::Started => "agent started the container",
            Step::Running => "agent reports phase Running",
        }
    }
}

/// One row of the timeline table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineRow {
    pub step: Step,
    pub at: Option<Time>,
    /// Since Created.
    pub t_plus_ms: Option<i64>,
    /// Since the previous step that happened.
    pub delta_ms: Option<i64>,
    /// The event's message, or where the time came from.
    pub detail: String,
}

/// Created → Scheduled → Pulled → Started → Running, from the pod and its events.
pub fn timeline(pod: &Pod, events: &[Rc<Event>]) -> Vec<TimelineRow> {
    let first = |reason: &str| events.iter().filter(|e| e.reason == reason).find_map(|e| first_seen(e).map(|t| (t, e.message.clone())));
    let condition_true = |type_: &str| {
        find_condition(&pod.status.conditions, type_)
            .filter(|c| c.status == conditions::TRUE)
            .and_then(|c| c.last_transition_time.map(|t| (t, format!("{type_}=True"))))
    };
    let container_running = || {
        pod.status
            .container_statuses
            .iter()
            .filter_map(|s| match &s.state {
                ContainerState::Running { started_at: Some(t) } => Some(*t),
                _ => None,
            })
            .max()
            .map(|t| (t, "container running".to_string()))
    };
    let running = pod.status.phase != PodPhase::Pending;
    let found = |step: Step| -> Option<(Time, String)> {
        match step {
            Step::Created => pod.metadata.created_at.map(|t| (t, "metadata.created_at".to_string())),
            Step::Scheduled => first("Scheduled").or_else(|| condition_true(conditions::POD_SCHEDULED)),
            Step::Pulled => first("Pulled"),
            Step::Started => first("Started"),
            Step::Running if running => condition_true(conditions::READY)
                .or_else(|| first("Running"))
                .or_else(container_running)
                .or_else(|| pod.status.start_time.map(|t| (t, "status.start_time".to_string()))),
            Step::Running => None,
        }
    };
    let created = pod.metadata.created_at;
    let mut previous: Option<Time> = None;
    Step::ALL
        .iter()
        .map(|&step| {
            let hit = found(step);
            let at = hit.as_ref().map(|(t, _)| *t);
            let row = TimelineRow {
                step,
                at,
                t_plus_ms: at.zip(created).map(|(at, created)| millis_between(created, at)),
                delta_ms: at.zip(previous).map(|(at, prev)| millis_between(prev, at)),
                detail: hit.map(|(_, d)| d).unwrap_or_default(),
            };
            if at.is_some() {
                previous = at;
            }
            row
        })
        .collect()
}

/// One bar of the drawn timeline: a step reached, spanning the wait since the step reached
/// before it, on a scale from Created (0) to the last step reached ([`TIMELINE_SCALE`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineBar {
    pub step: Step,
    pub from: i64,
    pub to: i64,
    pub t_plus_ms: i64,
}

/// The timeline's scale in integers: formatting floats would bring core's float printing
/// (Grisu, Dragon and their tables) into the wasm bundle.
pub const TIMELINE_SCALE: i64 = 1000;

/// The bars of the steps `rows` reached, in order.
pub fn timeline_bars(rows: &[TimelineRow]) -> Vec<TimelineBar> {
    let reached: Vec<(Step, i64)> = rows.iter().filter_map(|row| row.t_plus_ms.map(|ms| (row.step, ms.max(0)))).collect();
    let span = reached.iter().map(|&(_, ms)| ms).max().unwrap_or(0).max(1);
    let mut previous = 0;
    reached
        .into_iter()
        .map(|(step, ms)| {
            // A step logged before the one before it (clocks of two machines) is drawn as a mark.
            let start = previous.min(ms);
            previous = ms;
            TimelineBar { step, from: start * TIMELINE_SCALE / span, to: ms * TIMELINE_SCALE / span, t_plus_ms: ms }
        })
        .collect()
}

/// What the dashboard knows of a pod's node, for the pending reason: the node, judged by
/// its Ready condition (the dashboard does not watch leases), and the server's grace.
#[derive(Debug, Clone, Copy)]
pub struct NodeAt<'a> {
    pub node: &'a Node,
    pub grace: std::time::Duration,
}

/// Why a Pending pod is not running, in plain words: `shared::words`' reason told at length;
/// `None` once it left Pending.
pub fn pending_reason(pod: &Pod, explanation: Option<&Explanation>, node: Option<NodeAt>) -> Option<String> {
    match pending(pod)? {
        PendingReason::WaitingForScheduler => Some(
            "Waiting for the scheduler: no node has been chosen yet. The API server answered 201 at once; \
             the scheduler places new pods within milliseconds and sweeps every Pending pod without a node every 2 seconds."
                .to_string(),
        ),
        PendingReason::Unschedulable { message } => {
            let mut text = String::from("No node can take this pod right now");
            let reasons = explanation.map(failure_histogram).unwrap_or_default();
            if reasons.is_empty() {
                if message.is_empty() {
                    text.push('.');
                } else {
                    text.push_str(&format!(": {message}"));
                }
            } else {
                let total = explanation.map_or(0, |e| e.nodes_evaluated);
                let parts: Vec<String> = reasons.iter().map(|(reason, n)| format!("{n} {}", plain_reason(reason, *n))).collect();
                text.push_str(&format!(". Of {total} node(s) checked, {}.", parts.join(", ")));
            }
            text.push_str(
                " It stays Pending, and the scheduler tries again when the cluster changes in a way \
                 that could fit it (a node joins, sends a heartbeat after a silence, is uncordoned or grows; \
                 a pod goes away), after its back-off, and at the latest after 5 minutes.",
            );
            if let Some(queue) = explanation.and_then(|e| e.queue.as_ref()) {
                text.push_str(&format!(" Now: {}.", queue.describe()));
            }
            Some(text)
        }
        PendingReason::WaitingForAgent { node: node_name, .. } => {
            let mut text = format!("Scheduled to {node_name}; waiting for that node's agent to pull the image and start the containers.");
            if let Some(NodeAt { node, grace }) = node {
                let readiness = node.reported_readiness();
                if !readiness.is_ready() {
                    text.push_str(&format!(
                        " {node_name} is not Ready ({}): its agent may be down, so the pod waits until it comes back.",
                        readiness.explain(grace)
                    ));
                }
            }
            for status in &pod.status.container_statuses {
                if let ContainerState::Waiting { reason, message } = &status.state
                    && !reason.is_empty()
                {
                    text.push_str(&format!(" Container {}: {reason}", status.name));
                    if !message.is_empty() {
                        text.push_str(&format!(" ({message})"));
                    }
                    text.push('.');
                }
            }
            Some(text)
        }
    }
}

/// How many evaluated nodes failed for each reason, in first-seen order.
pub fn failure_histogram(explanation: &Explanation) -> Vec<(String, usize)> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for node in &explanation.nodes {
        for filter in node.filters.iter().filter(|f| f.verdict == Verdict::Failed) {
            for reason in filter.reason.split(", ").filter(|r| !r.is_empty()) {
                match counts.iter_mut().find(|(r, _)| r == reason) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((reason.to_string(), 1)),
                }
            }
        }
    }
    counts
}

/// Kubernetes' terse reason, as a sentence fragment after a count.
pub fn plain_reason(reason: &str, count: usize) -> String {
    let (is, has, lacks) = if count == 1 { ("is", "has", "does not have") } else { ("are", "have", "do not have") };
    match reason {
        reasons::NOT_READY => format!("{is} not Ready (no recent heartbeat from the agent)"),
        reasons::UNSCHEDULABLE => format!("{is} cordoned"),
        reasons::SELECTOR_MISMATCH => format!("{lacks} the labels the pod's node_selector asks for"),
        reasons::INSUFFICIENT_CPU => format!("{lacks} enough unrequested CPU"),
        reasons::INSUFFICIENT_MEMORY => format!("{lacks} enough unrequested memory"),
        reasons::TOO_MANY_PODS => format!("{is} full (pod limit reached)"),
        reasons::PORTS => format!("already {has} the requested host port in use"),
        other if other.starts_with("node(s) had untolerated taint") => {
            let taint = other.trim_start_matches("node(s) had untolerated taint").trim();
            format!("{has} a taint {taint} the pod does not tolerate")
        }
        other => format!("failed: {other}"),
    }
}

/// Conditions sorted as kubectl lists them: PodScheduled first, then the rest by type.
pub fn sorted_conditions(list: &[Condition]) -> Vec<Condition> {
    let mut out = list.to_vec();
    sort::by_cached_key(&mut out, |c| (c.type_ != conditions::POD_SCHEDULED, c.type_.clone()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::fixtures::{event, explanation, ms, node, pod, t0};
    use shared::model::{ContainerStatus, set_condition};
    use shared::scheduler::FilterVerdict;

    #[test]
    fn the_timeline_has_the_seeds_steps_with_t_plus_and_deltas() {
        let mut p = pod("default", "web", "n1", PodPhase::Running, 0);
        set_condition(&mut p.status.conditions, Condition { type_: "Ready".into(), status: "True".into(), ..Default::default() }, ms(3600));
        let events = vec![
            event("Created", 1, "web", "api-server"),
            event("Scheduled", 100, "web", "scheduler"),
            event("Pulled", 3000, "web", "agent/n1"),
            event("Started", 3500, "web", "agent/n1"),
            event("Scheduled", 5, "other", "scheduler"),
        ];
        let mine = pod_events(&p, &events);
        assert_eq!(mine.len(), 4);
        let rows = timeline(&p, &mine);
        let cells: Vec<(&str, Option<i64>, Option<i64>)> = rows.iter().map(|r| (r.step.name(), r.t_plus_ms, r.delta_ms)).collect();
        assert_eq!(
            cells,
            vec![
                ("Created", Some(0), None),
                ("Scheduled", Some(100), Some(100)),
                ("Pulled", Some(3000), Some(2900)),
                ("Started", Some(3500), Some(500)),
                ("Running", Some(3600), Some(100)),
            ]
        );
        assert_eq!(rows[1].detail, "Scheduled web");
    }

    #[test]
    fn the_drawn_timeline_spans_each_wait_on_one_scale_and_leaves_out_steps_not_reached() {
        let p = pod("default", "web", "n1", PodPhase::Pending, 0);
        let events = vec![event("Scheduled", 100, "web", "scheduler"), event("Started", 400, "web", "agent/n1")];
        let bars = timeline_bars(&timeline(&p, &pod_events(&p, &events)));
        let spans: Vec<(&str, i64, i64, i64)> = bars.iter().map(|b| (b.step.name(), b.from, b.to, b.t_plus_ms)).collect();
        assert_eq!(spans, vec![("Created", 0, 0, 0), ("Scheduled", 0, 250, 100), ("Started", 250, 1000, 400)]);
        assert_eq!(timeline_bars(&timeline(&p, &[]))[0].to, 0, "a pod only created is one mark at 0");
    }

    #[test]
    fn a_pending_pod_has_no_running_step_and_deltas_skip_missing_steps() {
        let p = pod("default", "web", "n1", PodPhase::Pending, 0);
        let events = vec![event("Scheduled", 40, "web", "scheduler"), event("Started", 900, "web", "agent/n1")];
        let rows = timeline(&p, &pod_events(&p, &events));
        assert_eq!(rows[2].at, None);
        assert_eq!(rows[3].delta_ms, Some(860), "Started's delta is from Scheduled, the last step that happened");
        assert_eq!(rows[4].at, None);
    }

    #[test]
    fn events_of_a_predecessor_with_another_uid_are_left_out() {
        let mut p = pod("default", "web", "", PodPhase::Pending, 0);
        p.metadata.uid = "new".into();
        let mut old = (*event("Scheduled", 1, "web", "scheduler")).clone();
        old.involved_object.uid = "old".into();
        let mut new = old.clone();
        new.involved_object.uid = "new".into();
        let events = vec![Rc::new(old), Rc::new(new)];
        assert_eq!(pod_events(&p, &events).len(), 1);
    }

    #[test]
    fn unschedulable_reason_counts_nodes_in_plain_words() {
        let mut p = pod("default", "big", "", PodPhase::Pending, 0);
        set_condition(
            &mut p.status.conditions,
            Condition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: "Unschedulable".into(),
                message: "0/3 nodes are available: 3 Insufficient cpu.".into(),
                ..Default::default()
            },
            t0(),
        );
        let mut e = explanation();
        e.selected = None;
        for node in &mut e.nodes {
            node.selected = false;
            node.feasible = false;
            node.filters[1] = FilterVerdict {
                filter: "NodeResourcesFit".into(),
                verdict: Verdict::Failed,
                reason: "Insufficient cpu".into(),
                detail: String::new(),
            };
        }
        e.nodes[0].filters[0] = FilterVerdict {
            filter: "NodeReady".into(),
            verdict: Verdict::Failed,
            reason: reasons::NOT_READY.into(),
            detail: String::new(),
        };
        let text = pending_reason(&p, Some(&e), None).unwrap();
        assert!(
            text.starts_with("No node can take this pod right now. Of 3 node(s) checked, 1 is not Ready (no recent heartbeat from the agent), 3 do not have enough unrequested CPU."),
            "{text}"
        );
        // Without the scheduler's table the condition's message is the reason.
        let text = pending_reason(&p, None, None).unwrap();
        assert!(text.contains("0/3 nodes are available: 3 Insufficient cpu."), "{text}");
    }

    #[test]
    fn waiting_for_agent_names_the_node_and_the_container_reason() {
        let mut p = pod("default", "web", "n1", PodPhase::Pending, 0);
        p.status.container_statuses = vec![ContainerStatus {
            name: "web".into(),
            state: ContainerState::Waiting { reason: "ErrImagePull".into(), message: "no such image".into() },
            ..Default::default()
        }];
        let grace = shared::readiness::DEFAULT_NODE_MONITOR_GRACE;
        let down = node("n1", false);
        let text = pending_reason(&p, None, Some(NodeAt { node: &down, grace })).unwrap();
        assert!(text.starts_with("Scheduled to n1; waiting"), "{text}");
        assert!(text.contains("n1 is not Ready (the node's Ready condition is False)"), "{text}");
        // Without leases the dashboard reads the condition node lifecycle keeps: a quiet node
        // is Ready until it marks it Unknown.
        let mut quiet = node("n1", true);
        quiet.status.last_heartbeat = Some(t0());
        let text = pending_reason(&p, None, Some(NodeAt { node: &quiet, grace })).unwrap();
        assert!(!text.contains("not Ready"), "{text}");
        quiet.status.conditions[0].status = "Unknown".into();
        let text = pending_reason(&p, None, Some(NodeAt { node: &quiet, grace })).unwrap();
        assert!(text.contains("n1 is not Ready (the node's Ready condition is Unknown)"), "{text}");
        assert!(text.contains("Container web: ErrImagePull (no such image)."), "{text}");
        assert_eq!(pending_reason(&pod("default", "r", "n1", PodPhase::Running, 0), None, None), None);
        assert!(
            pending_reason(&pod("default", "w", "", PodPhase::Pending, 0), None, None).unwrap().starts_with("Waiting for the scheduler")
        );
    }

    #[test]
    fn taint_reasons_read_as_sentences() {
        assert_eq!(plain_reason(&reasons::untolerated_taint("gpu", "true"), 2), "have a taint {gpu: true} the pod does not tolerate");
        assert_eq!(plain_reason(reasons::UNSCHEDULABLE, 1), "is cordoned");
    }

    #[test]
    fn conditions_start_with_pod_scheduled() {
        let list = vec![
            Condition { type_: "Ready".into(), ..Default::default() },
            Condition { type_: "PodScheduled".into(), ..Default::default() },
            Condition { type_: "Initialized".into(), ..Default::default() },
        ];
        let types: Vec<String> = sorted_conditions(&list).into_iter().map(|c| c.type_).collect();
        assert_eq!(types, ["PodScheduled", "Initialized", "Ready"]);
    }
}
