//! The node object the agent registers: capacity detected from the host (CPU count, memory
//! from `/proc/meminfo`) unless overridden, labels, taints and node info; and the heartbeat
//! loop that keeps it Ready and re-registers a node an admin deleted.

use std::time::Duration;

use chrono::Utc;
use shared::backoff::Backoff;
use shared::model::NodeResources;
use shared::registration::NodeDescription;
use tokio_util::sync::CancellationToken;

use crate::client::ApiClient;

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
    let mut failures = 0;
    loop {
        failures += 1;
        match api.cluster_id().await {
            Ok(id) => return Some(id),
            Err(e) => tracing::warn!(error = %e, "cannot learn which cluster this is; retrying"),
        }
        tokio::select! {
            _ = tokio::time::sleep(SERVER_AWAY_BACKOFF.delay(failures)) => {}
            _ = shutdown.cancelled() => return None,
        }
    }
}

/// Registers the node, retrying while the server is away. Returns `false` on shutdown.
pub async fn register(api: &dyn ApiClient, node: &NodeDescription, shutdown: &CancellationToken) -> bool {
    let mut failures = 0;
    loop {
        failures += 1;
        match api.register_node(&node.to_node(Utc::now())).await {
            Ok(_) => {
                tracing::info!(node = %node.name, "node registered");
                return true;
            }
            Err(e) => tracing::warn!(error = %e, "registration failed; retrying"),
        }
        tokio::select! {
            _ = tokio::time::sleep(SERVER_AWAY_BACKOFF.delay(failures)) => {}
            _ = shutdown.cancelled() => return false,
        }
    }
}

/// Sends a heartbeat every `interval` until shutdown; registers again if the node is gone.
pub async fn heartbeat_loop(api: &dyn ApiClient, node: &NodeDescription, interval: Duration, shutdown: &CancellationToken) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shutdown.cancelled() => return,
        }
        match api.heartbeat(&node.name, &node.heartbeat(Utc::now())).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {
                tracing::warn!(node = %node.name, "the server has no such node any more; registering again");
                if !register(api, node, shutdown).await {
                    return;
                }
            }
            Err(e) => tracing::warn!(error = %e, "heartbeat failed"),
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
