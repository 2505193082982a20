//! Whether a node is ready: the one judgement that the scheduler's filter and requeue
//! decision, node lifecycle, pod deletion, pod GC and `sheepctl` all make. A node is ready
//! when its `Ready` condition is `True` and its last heartbeat is no older than the node
//! monitor grace (the server's `--node-monitor-grace`). The last heartbeat is the later of
//! its [`Lease`]'s renewal and the node's own status report (`last_heartbeat`), so every
//! caller passes the lease it knows. Registration stamps both, so a node is judged from the
//! moment its agent registers it. The dashboard, which does not watch leases, reads the
//! condition alone ([`Node::reported_readiness`]): node lifecycle turns it Unknown once
//! the lease goes stale.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::model::{Lease, Node, Time};

/// How long a node may go without a heartbeat before it is not ready: the default of the
/// server's `--node-monitor-grace`, as in Kubernetes.
pub const DEFAULT_NODE_MONITOR_GRACE: Duration = Duration::from_secs(40);

/// The node's `Ready` condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadyState {
    True,
    False,
    Unknown,
}

impl ReadyState {
    pub fn parse(status: &str) -> ReadyState {
        match status {
            "True" => ReadyState::True,
            "False" => ReadyState::False,
            _ => ReadyState::Unknown,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ReadyState::True => "True",
            ReadyState::False => "False",
            ReadyState::Unknown => "Unknown",
        }
    }
}

/// The verdict on a node at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// The `Ready` condition is not `True`.
    Condition(ReadyState),
    /// Ready, but no heartbeat was ever stamped (a node stored before registration stamped one).
    NoHeartbeat,
    /// Ready, but the last heartbeat is older than the grace.
    Stale {
        age_ms: i64,
    },
}

impl Readiness {
    pub fn is_ready(self) -> bool {
        self == Readiness::Ready
    }

    /// What happened, in words, for a node that is not ready.
    pub fn explain(self, grace: Duration) -> String {
        match self {
            Readiness::Ready => format!("Ready, heartbeat within the last {}", grace_text(grace)),
            Readiness::Condition(state) => format!("the node's Ready condition is {}", state.as_str()),
            Readiness::NoHeartbeat => "the node has never sent a heartbeat".to_string(),
            Readiness::Stale { age_ms } => {
                format!("last heartbeat {}s ago, older than the node monitor grace of {}", age_ms / 1000, grace_text(grace))
            }
        }
    }
}

/// The judgement from a node's parts, for callers that keep them apart (the scheduler's
/// cache). `heartbeat_ms` (the last heartbeat of either kind) and `now_ms` are
/// milliseconds since the epoch.
pub fn judge(ready: ReadyState, heartbeat_ms: Option<i64>, now_ms: i64, grace: Duration) -> Readiness {
    if ready != ReadyState::True {
        return Readiness::Condition(ready);
    }
    heartbeat(heartbeat_ms, now_ms, grace)
}

/// The heartbeat half of the judgement: `Ready` when the last heartbeat is within the grace.
fn heartbeat(heartbeat_ms: Option<i64>, now_ms: i64, grace: Duration) -> Readiness {
    let Some(heartbeat_ms) = heartbeat_ms else { return Readiness::NoHeartbeat };
    let age_ms = now_ms.saturating_sub(heartbeat_ms);
    if age_ms > i64::try_from(grace.as_millis()).unwrap_or(i64::MAX) {
        return Readiness::Stale { age_ms };
    }
    Readiness::Ready
}

impl Node {
    /// The `Ready` condition's status, `Unknown` when the node never reported one.
    pub fn ready_state(&self) -> ReadyState {
        ReadyState::parse(self.ready_status())
    }

    /// Whether the node is ready at `now` with `lease` (its own, if known), see the module's doc.
    pub fn readiness(&self, lease: Option<&Lease>, now: Time, grace: Duration) -> Readiness {
        judge(self.ready_state(), self.last_heartbeat(lease).map(|t| t.timestamp_millis()), now.timestamp_millis(), grace)
    }

    /// The `Ready` condition alone, for a client that does not know the leases.
    pub fn reported_readiness(&self) -> Readiness {
        match self.ready_state() {
            ReadyState::True => Readiness::Ready,
            state => Readiness::Condition(state),
        }
    }

    /// Whether its agent has gone quiet at `now`, whatever its condition says: the last
    /// heartbeat is missing or older than the grace (node lifecycle then marks it Unknown).
    pub fn heartbeat_lost(&self, lease: Option<&Lease>, now: Time, grace: Duration) -> bool {
        !heartbeat(self.last_heartbeat(lease).map(|t| t.timestamp_millis()), now.timestamp_millis(), grace).is_ready()
    }

    /// The later of the lease's renewal and the node's own status heartbeat. A lease of
    /// another node does not count.
    pub fn last_heartbeat(&self, lease: Option<&Lease>) -> Option<Time> {
        let renewed = lease.filter(|l| l.metadata.name == self.metadata.name).and_then(|l| l.spec.renew_time);
        renewed.max(self.status.last_heartbeat)
    }
}

/// What judging nodes needs besides each node: the server's node monitor grace and the
/// leases, for a client that lists them with the nodes (sheepctl, tests, benchmarks).
#[derive(Debug, Clone)]
pub struct NodeJudge {
    pub grace: Duration,
    leases: BTreeMap<String, Lease>,
}

impl Default for NodeJudge {
    fn default() -> Self {
        NodeJudge::new(DEFAULT_NODE_MONITOR_GRACE, Vec::new())
    }
}

impl NodeJudge {
    pub fn new(grace: Duration, leases: Vec<Lease>) -> NodeJudge {
        NodeJudge { grace, leases: leases.into_iter().map(|l| (l.metadata.name.clone(), l)).collect() }
    }

    pub fn readiness(&self, node: &Node, now: Time) -> Readiness {
        node.readiness(self.leases.get(&node.metadata.name), now, self.grace)
    }
}

/// `40s`, or `600ms` below a second.
pub fn grace_text(grace: Duration) -> String {
    if grace.as_secs() == 0 || grace.subsec_millis() != 0 { format!("{}ms", grace.as_millis()) } else { format!("{}s", grace.as_secs()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Condition, LeaseSpec, ObjectMeta, conditions, set_condition};

    fn node(ready: &str, heartbeat_age: Option<i64>, now: Time) -> Node {
        let mut node = Node { metadata: ObjectMeta::named("", "n1"), ..Node::default() };
        set_condition(
            &mut node.status.conditions,
            Condition { type_: conditions::NODE_READY.into(), status: ready.into(), ..Condition::default() },
            now,
        );
        node.status.last_heartbeat = heartbeat_age.map(|age| now - chrono::Duration::seconds(age));
        node
    }

    #[test]
    fn ready_needs_the_condition_and_a_heartbeat_within_the_grace() {
        let now = chrono::DateTime::from_timestamp(1_700_000_000, 0).expect("a valid instant");
        let grace = DEFAULT_NODE_MONITOR_GRACE;
        assert_eq!(node("True", Some(40), now).readiness(None, now, grace), Readiness::Ready);
        assert_eq!(node("True", Some(41), now).readiness(None, now, grace), Readiness::Stale { age_ms: 41_000 });
        assert_eq!(node("True", None, now).readiness(None, now, grace), Readiness::NoHeartbeat);
        assert_eq!(node("False", Some(0), now).readiness(None, now, grace), Readiness::Condition(ReadyState::False));
        assert_eq!(Node::default().readiness(None, now, grace), Readiness::Condition(ReadyState::Unknown));
        assert_eq!(node("True", Some(41), now).readiness(None, now, Duration::from_secs(120)), Readiness::Ready);
    }

    fn lease(name: &str, renewed_age: i64, now: Time) -> Lease {
        let renew_time = Some(now - chrono::Duration::seconds(renewed_age));
        Lease { metadata: ObjectMeta::named("", name), spec: LeaseSpec { renew_time, ..LeaseSpec::default() }, ..Lease::default() }
    }

    #[test]
    fn the_later_of_the_lease_renewal_and_the_status_heartbeat_counts() {
        let now = chrono::DateTime::from_timestamp(1_700_000_000, 0).expect("a valid instant");
        let grace = DEFAULT_NODE_MONITOR_GRACE;
        let reported_long_ago = node("True", Some(300), now);
        assert_eq!(reported_long_ago.readiness(Some(&lease("n1", 10, now)), now, grace), Readiness::Ready);
        assert_eq!(reported_long_ago.readiness(Some(&lease("n1", 50, now)), now, grace), Readiness::Stale { age_ms: 50_000 });
        assert_eq!(node("True", None, now).readiness(Some(&lease("n1", 5, now)), now, grace), Readiness::Ready);
        assert_eq!(node("True", Some(10), now).readiness(Some(&lease("n1", 300, now)), now, grace), Readiness::Ready);
        assert_eq!(
            reported_long_ago.readiness(Some(&lease("n2", 1, now)), now, grace),
            Readiness::Stale { age_ms: 300_000 },
            "not its lease"
        );
        assert!(reported_long_ago.heartbeat_lost(None, now, grace));
        assert!(!reported_long_ago.heartbeat_lost(Some(&lease("n1", 1, now)), now, grace));
        assert_eq!(
            node("False", Some(0), now).readiness(Some(&lease("n1", 0, now)), now, grace),
            Readiness::Condition(ReadyState::False),
            "a fresh lease does not make a node Ready that says it is not"
        );
    }

    #[test]
    fn without_leases_the_condition_alone_is_read() {
        let now = chrono::DateTime::from_timestamp(1_700_000_000, 0).expect("a valid instant");
        assert_eq!(node("True", Some(300), now).reported_readiness(), Readiness::Ready);
        assert_eq!(node("Unknown", Some(0), now).reported_readiness(), Readiness::Condition(ReadyState::Unknown));
        assert_eq!(Node::default().reported_readiness(), Readiness::Condition(ReadyState::Unknown));
    }

    #[test]
    fn words_name_the_grace() {
        assert_eq!(
            Readiness::Stale { age_ms: 41_500 }.explain(DEFAULT_NODE_MONITOR_GRACE),
            "last heartbeat 41s ago, older than the node monitor grace of 40s"
        );
        assert_eq!(grace_text(Duration::from_millis(600)), "600ms");
    }
}
