//! The words a user reads, the same in `sheepctl` and in the dashboard: AGE as kubectl prints
//! it, the pod status word, why a pod is Pending, the node status word, and when an event
//! happened. Time is passed in; node words come from the one readiness judgement.

use std::fmt;
use std::time::Duration;

use crate::model::{CONTAINER_CREATING, ContainerState, Event, Node, Pod, PodStage, ServicePort, Time, conditions, find_condition};
use crate::readiness::{NodeJudge, Readiness};

/// How long ago `then` was, as kubectl's AGE column: `<unknown>` when there is no time.
pub fn age(now: Time, then: Option<Time>) -> String {
    match then {
        Some(then) => human_duration(now - then),
        None => "<unknown>".to_string(),
    }
}

/// A Service's ports as kubectl's PORT(S) column writes them: `80/TCP`, `80:30080/TCP` with a
/// node port, joined by commas; `<none>` when it has none.
pub fn service_ports(ports: &[ServicePort]) -> String {
    let ports: Vec<String> = ports
        .iter()
        .map(|p| match p.node_port {
            0 => format!("{}/{}", p.port, p.protocol_name()),
            node_port => format!("{}:{node_port}/{}", p.port, p.protocol_name()),
        })
        .collect();
    if ports.is_empty() { "<none>".to_string() } else { ports.join(",") }
}

/// A span as kubectl's `HumanDuration` writes it: `90s`, `5m30s` under ten minutes, `42m`,
/// `3h10m` under eight hours, `20h`, `2d4h` under eight days, `30d`, `3y120d` under eight
/// years, then `9y`. A second of clock skew reads `0s`; more than that, `<invalid>`.
pub fn human_duration(span: chrono::Duration) -> String {
    // Whole seconds, rounded toward zero as Go's int(d.Seconds()).
    let seconds = span.num_seconds();
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    let seconds = seconds.max(0);
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    let hours = minutes / 60;
    let days = hours / 24;
    let years = days / 365;
    match () {
        _ if minutes < 10 => with_rest(minutes, 'm', seconds % 60, 's'),
        _ if minutes < 3 * 60 => format!("{minutes}m"),
        _ if hours < 8 => with_rest(hours, 'h', minutes % 60, 'm'),
        _ if hours < 48 => format!("{hours}h"),
        _ if hours < 8 * 24 => with_rest(days, 'd', hours % 24, 'h'),
        _ if hours < 2 * 365 * 24 => format!("{days}d"),
        _ if hours < 8 * 365 * 24 => with_rest(years, 'y', days % 365, 'd'),
        _ => format!("{years}y"),
    }
}

/// A wait to the tenth of a second, as the scheduling queue's words show it: `1.5s`, `10s`,
/// `4m10s`.
pub fn wait(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 60_000 {
        // Tenths in integers: float formatting would cost the dashboard's bundle 8 KB.
        let tenths = ms.div_ceil(100);
        if ms.is_multiple_of(1000) { format!("{}s", ms / 1000) } else { format!("{}.{}s", tenths / 10, tenths % 10) }
    } else {
        let secs = d.as_secs();
        if secs.is_multiple_of(60) { format!("{}m", secs / 60) } else { format!("{}m{}s", secs / 60, secs % 60) }
    }
}

fn with_rest(big: i64, big_unit: char, small: i64, small_unit: char) -> String {
    if small == 0 { format!("{big}{big_unit}") } else { format!("{big}{big_unit}{small}{small_unit}") }
}

impl Pod {
    /// The STATUS word: `Terminating` once deleted, a container's waiting or terminated reason
    /// (`ErrImagePull`, `CrashLoopBackOff`) over the phase, `ContainerCreating` while bound but
    /// not started, else the phase, as kubectl shows it.
    pub fn display_status(&self) -> String {
        if self.metadata.deletion_timestamp.is_some() {
            return "Terminating".to_string();
        }
        for status in &self.status.container_statuses {
            match &status.state {
                ContainerState::Waiting { reason, .. } if !reason.is_empty() && reason != CONTAINER_CREATING => return reason.clone(),
                ContainerState::Terminated { reason, .. } if !self.status.phase.is_terminal() && !reason.is_empty() => {
                    return reason.clone();
                }
                _ => {}
            }
        }
        if !self.status.reason.is_empty() && self.status.phase.is_terminal() {
            return self.status.reason.clone();
        }
        match self.stage() {
            PodStage::WaitingForAgent => CONTAINER_CREATING.to_string(),
            _ => self.status.phase.to_string(),
        }
    }
}

/// Why a Pending pod is not running yet, in the seed's three stages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PendingReason {
    WaitingForScheduler,
    /// No node fits; the PodScheduled condition's message (or reason).
    Unschedulable {
        message: String,
    },
    /// Bound to `node`, whose agent has not started it; `status` is the pod's status word.
    /// `message` is a container's waiting message while that word is `ContainerCreating`,
    /// which alone does not say that something failed (a sandbox that cannot be made); the
    /// other words name their failure themselves.
    WaitingForAgent {
        node: String,
        status: String,
        message: String,
    },
}

/// The pod's [`PendingReason`], `None` once it left Pending.
pub fn pending_reason(pod: &Pod) -> Option<PendingReason> {
    match pod.stage() {
        PodStage::WaitingForScheduler => Some(PendingReason::WaitingForScheduler),
        PodStage::Unschedulable => {
            let condition = find_condition(&pod.status.conditions, conditions::POD_SCHEDULED);
            let message = condition.map(|c| if c.message.is_empty() { c.reason.clone() } else { c.message.clone() });
            Some(PendingReason::Unschedulable { message: message.unwrap_or_default() })
        }
        PodStage::WaitingForAgent => {
            let status = pod.display_status();
            let message = if status == CONTAINER_CREATING { creating_message(pod) } else { String::new() };
            Some(PendingReason::WaitingForAgent { node: pod.spec.node_name.clone(), status, message })
        }
        _ => None,
    }
}

/// The first message of a container still being created, such as why its sandbox cannot be
/// made; empty when none has one.
fn creating_message(pod: &Pod) -> String {
    let message = pod.status.container_statuses.iter().find_map(|status| match &status.state {
        ContainerState::Waiting { reason, message } if reason == CONTAINER_CREATING && !message.is_empty() => Some(message),
        _ => None,
    });
    message.cloned().unwrap_or_default()
}

impl fmt::Display for PendingReason {
    /// `waiting for the scheduler`, `Unschedulable: 0/2 nodes are available: …`,
    /// `scheduled to node-1, waiting for its agent`, `ContainerCreating on node-1: failed to
    /// set up the pod network: …`, `ErrImagePull on node-1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PendingReason::WaitingForScheduler => f.write_str("waiting for the scheduler"),
            PendingReason::Unschedulable { message } if message.is_empty() => f.write_str("Unschedulable"),
            PendingReason::Unschedulable { message } => write!(f, "Unschedulable: {message}"),
            PendingReason::WaitingForAgent { node, status, message } if status == CONTAINER_CREATING && message.is_empty() => {
                write!(f, "scheduled to {node}, waiting for its agent")
            }
            PendingReason::WaitingForAgent { node, status, message } if message.is_empty() => write!(f, "{status} on {node}"),
            PendingReason::WaitingForAgent { node, status, message } => write!(f, "{status} on {node}: {message}"),
        }
    }
}

/// The node's STATUS word as kubectl shows it, from the caller's `readiness` of it
/// (`shared::readiness`): `Ready`, `NotReady` (its Ready condition is not True, or its last
/// heartbeat is older than the grace: what node lifecycle will mark it), `Unknown` when it
/// never reported a Ready condition, and `,SchedulingDisabled` when cordoned.
pub fn node_status(node: &Node, readiness: Readiness) -> String {
    let ready = if readiness.is_ready() {
        "Ready"
    } else if find_condition(&node.status.conditions, conditions::NODE_READY).is_none() {
        "Unknown"
    } else {
        "NotReady"
    };
    if node.status.unschedulable { format!("{ready},SchedulingDisabled") } else { ready.to_string() }
}

impl NodeJudge {
    /// The node's STATUS word at `now`.
    pub fn status(&self, node: &Node, now: Time) -> String {
        node_status(node, self.readiness(node, now))
    }
}

/// When an event last happened, as kubectl's LAST SEEN: its last timestamp, else its first,
/// else its creation.
pub fn last_seen(event: &Event) -> Option<Time> {
    event.last_timestamp.or(event.first_timestamp).or(event.metadata.created_at)
}

/// When an event first happened, for telling a pod's story in order: its first timestamp,
/// else its last, else its creation.
pub fn first_seen(event: &Event) -> Option<Time> {
    event.first_timestamp.or(event.last_timestamp).or(event.metadata.created_at)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::model::{Condition, ContainerStatus, ObjectMeta, PodPhase};

    fn now() -> Time {
        chrono::Utc.with_ymd_and_hms(2025, 3, 1, 10, 0, 0).unwrap()
    }

    #[test]
    fn ages_read_like_kubectl() {
        let cases = [
            (0, "0s"),
            (-1, "0s"),
            (-2, "<invalid>"),
            (45, "45s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (330, "5m30s"),
            (600, "10m"),
            (2 * 3600 + 59 * 60, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 600, "3h10m"),
            (8 * 3600 + 600, "8h"),
            (20 * 3600, "20h"),
            (2 * 86_400 + 4 * 3600, "2d4h"),
            (8 * 86_400 + 4 * 3600, "8d"),
            (30 * 86_400, "30d"),
            (730 * 86_400, "2y"),
            (800 * 86_400, "2y70d"),
            (3000 * 86_400, "8y"),
        ];
        for (seconds, expected) in cases {
            assert_eq!(human_duration(chrono::Duration::seconds(seconds)), expected, "{seconds}s");
        }
        assert_eq!(human_duration(chrono::Duration::milliseconds(-1_900)), "0s", "1.9 s of skew is still now");
        assert_eq!(age(now(), Some(now() - chrono::Duration::seconds(90))), "90s");
        assert_eq!(age(now(), None), "<unknown>");
    }

    fn pod() -> Pod {
        let mut pod = Pod { metadata: ObjectMeta::named("default", "web"), ..Default::default() };
        pod.spec.containers.push(Default::default());
        pod
    }

    #[test]
    fn pending_pods_say_which_stage_they_are_in() {
        let waiting = pod();
        assert_eq!(pending_reason(&waiting).unwrap().to_string(), "waiting for the scheduler");
        assert_eq!(waiting.display_status(), "Pending");

        let mut unschedulable = pod();
        unschedulable.status.conditions.push(Condition {
            type_: conditions::POD_SCHEDULED.into(),
            status: conditions::FALSE.into(),
            reason: conditions::UNSCHEDULABLE.into(),
            message: "0/2 nodes are available: 2 Insufficient memory".into(),
            ..Default::default()
        });
        assert_eq!(pending_reason(&unschedulable).unwrap().to_string(), "Unschedulable: 0/2 nodes are available: 2 Insufficient memory");

        let mut bound = pod();
        bound.spec.node_name = "node-1".into();
        assert_eq!(pending_reason(&bound).unwrap().to_string(), "scheduled to node-1, waiting for its agent");
        assert_eq!(bound.display_status(), "ContainerCreating");
        // A sandbox that cannot be made keeps the word, as kubectl shows it; the reason says why.
        let mut refused = bound.clone();
        refused.status.container_statuses.push(ContainerStatus {
            state: ContainerState::Waiting {
                reason: "ContainerCreating".into(),
                message: "failed to set up the pod network: host port 8080/TCP on 127.0.0.1 is in use".into(),
            },
            ..Default::default()
        });
        assert_eq!(refused.display_status(), "ContainerCreating");
        assert_eq!(
            pending_reason(&refused).unwrap().to_string(),
            "ContainerCreating on node-1: failed to set up the pod network: host port 8080/TCP on 127.0.0.1 is in use"
        );
        bound.status.container_statuses.push(ContainerStatus {
            state: ContainerState::Waiting { reason: "ErrImagePull".into(), message: String::new() },
            ..Default::default()
        });
        assert_eq!(pending_reason(&bound).unwrap().to_string(), "ErrImagePull on node-1");
        assert_eq!(bound.display_status(), "ErrImagePull");

        bound.status.phase = PodPhase::Running;
        assert_eq!(pending_reason(&bound), None);
        bound.metadata.deletion_timestamp = Some(now());
        assert_eq!(bound.display_status(), "Terminating");
    }

    #[test]
    fn node_status_comes_from_readiness() {
        let grace = Duration::from_secs(40);
        let status = |node: &Node| node_status(node, node.readiness(None, now(), grace));
        let mut node = Node { metadata: ObjectMeta::named("", "node-1"), ..Default::default() };
        assert_eq!(status(&node), "Unknown");
        node.status.conditions.push(Condition { type_: "Ready".into(), status: "True".into(), ..Default::default() });
        node.status.last_heartbeat = Some(now() - chrono::Duration::seconds(10));
        assert_eq!(status(&node), "Ready");
        node.status.unschedulable = true;
        assert_eq!(status(&node), "Ready,SchedulingDisabled");
        node.status.last_heartbeat = Some(now() - chrono::Duration::seconds(41));
        assert_eq!(status(&node), "NotReady,SchedulingDisabled", "a stale heartbeat is NotReady");
        node.status.unschedulable = false;
        node.status.last_heartbeat = Some(now());
        node.status.conditions[0].status = "Unknown".into();
        assert_eq!(status(&node), "NotReady", "as kubectl shows a node its controller marked Unknown");
    }

    #[test]
    fn events_are_seen_first_and_last() {
        let mut event = Event::default();
        assert_eq!((first_seen(&event), last_seen(&event)), (None, None));
        event.metadata.created_at = Some(now());
        assert_eq!(last_seen(&event), Some(now()));
        let (first, last) = (now() - chrono::Duration::seconds(60), now() - chrono::Duration::seconds(5));
        event.first_timestamp = Some(first);
        assert_eq!((first_seen(&event), last_seen(&event)), (Some(first), Some(first)));
        event.last_timestamp = Some(last);
        assert_eq!((first_seen(&event), last_seen(&event)), (Some(first), Some(last)));
    }
}
