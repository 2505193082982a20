//! The node object the agent registers: capacity detected from the host (CPU count, memory
//! from `/proc/meminfo`) unless overridden, labels, taints and node info; and the lease
//! loop that keeps it Ready (KEP-589: a lease renewal often, the node's status rarely) and
//! re-registers a node an admin deleted.

use std::time::Duration;

use chrono::Utc;
use shared::api::Heartbeat;
use shared::backoff::Backoff;
use shared::model::{NodeResources, Time};
use shared::registration::NodeDescription;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::ApiClient;
use crate::retry;

/// Kubernetes' default pod limit per node.
pub const DEFAULT_MAX_PODS: i64 = 110;
/// Retries while the server is away: 200 ms, doubling to 5 s.
const SERVER_AWAY_BACKOFF: Backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));

/// The memory the kernel reports in `/proc/meminfo` (`MemTotal`), in bytes.
pub fn parse_meminfo(text: &str) -> Option<i64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut fields = line.split_whitespace().skip(1);
    let value: i64 = fields.next()?.parse().ok()?;
    match fields.next() {
        Some("kB") | None => Some(value * 1024),
        Some(_) => None,
    }
}

/// The host's CPU (millicores) and memory, and the default pod limit.
pub fn detect_capacity() -> NodeResources {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as i64;
    let memory = std::fs::read_to_string("/proc/meminfo").ok().as_deref().and_then(parse_meminfo).unwrap_or(0);
    NodeResources { cpu: cpus * 1000, memory, pods: DEFAULT_MAX_PODS }
}

/// The host name, for the default node name.
pub fn hostname() -> String {
    hostname::get().ok().and_then(|h| h.into_string().ok()).filter(|h| !h.is_empty()).unwrap_or_else(|| "localhost".to_string())
}

/// Reads the cluster's id, retrying while the server is away. `None` on shutdown.
pub async fn cluster_id(api: &dyn ApiClient, shutdown: &CancellationToken) -> Option<String> {
    retry::until_shutdown(SERVER_AWAY_BACKOFF, shutdown, "cannot learn which cluster this is", || api.cluster_id()).await
}

/// Registers the node, retrying while the server is away. Returns `false` on shutdown.
pub async fn register(api: &dyn ApiClient, node: &NodeDescription, shutdown: &CancellationToken) -> bool {
    let attempt = || async move { api.register_node(&node.to_node(Utc::now())).await };
    let registered = retry::until_shutdown(SERVER_AWAY_BACKOFF, shutdown, "registration failed", attempt).await;
    if registered.is_some() {
        tracing::info!(node = %node.name, "node registered");
    }
    registered.is_some()
}

/// How often the agent proves its node is alive, as the kubelet's flags of the same names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeats {
    /// Between lease renewals: 10 s, a quarter of the default node monitor grace.
    pub lease_renew_interval: Duration,
    /// The longest between two status heartbeats when nothing changed: 5 min.
    pub node_status_report_interval: Duration,
}

impl Default for Heartbeats {
    fn default() -> Self {
        Heartbeats { lease_renew_interval: Duration::from_secs(10), node_status_report_interval: Duration::from_secs(300) }
    }
}

/// The status as reported, without the times the server stamps anyway: what "changed" compares.
fn unstamped(mut status: Heartbeat) -> Heartbeat {
    for condition in &mut status.conditions {
        condition.last_transition_time = None;
        condition.last_heartbeat_time = None;
    }
    status
}

/// When the node's status was last reported, and what it said.
struct Reported {
    status: Heartbeat,
    at: Instant,
}

/// Renews the node's lease every `lease_renew_interval` until shutdown, and sends its status
/// heartbeat (a Node write) only when `status(now)` changed, every
/// `node_status_report_interval`, or after a renewal that came more than half the lease's
/// duration after the one before: node lifecycle may have marked the node Unknown meanwhile,
/// and only the agent's status makes it Ready again. Registers again if the node is gone.
/// Starts right after a registration, which reported the status and renewed the lease.
pub async fn lease_loop(
    api: &dyn ApiClient,
    node: &NodeDescription,
    status: &(dyn Fn(Time) -> Heartbeat + Sync),
    heartbeats: Heartbeats,
    shutdown: &CancellationToken,
) {
    let mut ticker = tokio::time::interval_at(Instant::now() + heartbeats.lease_renew_interval, heartbeats.lease_renew_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut reported = Reported { status: unstamped(status(Utc::now())), at: Instant::now() };
    let mut renewed = Instant::now();
    // A report that was due and failed is owed until one succeeds.
    let mut owed = false;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shutdown.cancelled() => return,
        }
        let lease = match api.renew_lease(&node.name).await {
            Ok(lease) => lease,
            Err(e) if e.is_not_found() => {
                tracing::warn!(node = %node.name, "the server has no such node any more; registering again");
                if !register(api, node, shutdown).await {
                    return;
                }
                // Registration reported the status and renewed the lease.
                (reported, renewed, owed) = (Reported { status: unstamped(status(Utc::now())), at: Instant::now() }, Instant::now(), false);
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "lease renewal failed");
                continue;
            }
        };
        let gap = std::mem::replace(&mut renewed, Instant::now()).elapsed();
        let half_lease = Duration::from_secs(u64::try_from(lease.spec.lease_duration_seconds).unwrap_or(0)) / 2;
        let now = Utc::now();
        let current = unstamped(status(now));
        let due = owed || current != reported.status || reported.at.elapsed() >= heartbeats.node_status_report_interval || gap > half_lease;
        if !due {
            continue;
        }
        match api.heartbeat(&node.name, &status(now)).await {
            Ok(()) => (reported, owed) = (Reported { status: current, at: Instant::now() }, false),
            Err(e) => {
                tracing::warn!(error = %e, "status heartbeat failed; sending it again with the next renewal");
                owed = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_total_in_bytes() {
        let text = "MemTotal:        8048576 kB\nMemFree:         1000 kB\n";
        assert_eq!(parse_meminfo(text), Some(8048576 * 1024));
        assert_eq!(parse_meminfo("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn detected_capacity_is_plausible() {
        let capacity = detect_capacity();
        assert!(capacity.cpu >= 1000 && capacity.cpu % 1000 == 0, "{capacity:?}");
        assert!(capacity.memory > 0, "{capacity:?}");
        assert_eq!(capacity.pods, DEFAULT_MAX_PODS);
    }
}
