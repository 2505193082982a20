//! The node object the agent registers: capacity detected from the host (CPU count, memory
//! from `/proc/meminfo`) unless overridden, labels, taints and node info; and the heartbeat
//! loop that keeps it Ready and re-registers a node an admin deleted.

use std::time::Duration;

use chrono::Utc;
use shared::model::{NodeResources, Taint};
use shared::registration::NodeDescription;
use tokio_util::sync::CancellationToken;

use crate::client::{ApiClient, Error as ClientError};

/// Kubernetes' default pod limit per node.
pub const DEFAULT_MAX_PODS: i64 = 110;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid taint {0:?}: write key=value:Effect or key:Effect, Effect one of NoSchedule, PreferNoSchedule, NoExecute")]
    Taint(String),
    #[error("invalid label {0:?}: write key=value")]
    Label(String),
}

/// Parses `key=value:Effect` or `key:Effect`.
pub fn parse_taint(text: &str) -> Result<Taint, Error> {
    let (kv, effect) = text.rsplit_once(':').ok_or_else(|| Error::Taint(text.to_string()))?;
    if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        return Err(Error::Taint(text.to_string()));
    }
    let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
    if key.is_empty() {
        return Err(Error::Taint(text.to_string()));
    }
    Ok(Taint { key: key.to_string(), value: value.to_string(), effect: effect.to_string() })
}

/// Parses `key=value`.
pub fn parse_label(text: &str) -> Result<(String, String), Error> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(Error::Label(text.to_string())),
    }
}

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
    let mut delay = Duration::from_millis(200);
    loop {
        match api.cluster_id().await {
            Ok(id) => return Some(id),
            Err(e) => tracing::warn!(error = %e, "cannot learn which cluster this is; retrying"),
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.cancelled() => return None,
        }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// Registers the node, retrying while the server is away. Returns `false` on shutdown.
pub async fn register(api: &dyn ApiClient, node: &NodeDescription, shutdown: &CancellationToken) -> bool {
    let mut delay = Duration::from_millis(200);
    loop {
        match api.register_node(&node.to_node(Utc::now())).await {
            Ok(_) => {
                tracing::info!(node = %node.name, "node registered");
                return true;
            }
            Err(e) => tracing::warn!(error = %e, "registration failed; retrying"),
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.cancelled() => return false,
        }
        delay = (delay * 2).min(Duration::from_secs(5));
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
            Err(ClientError::NotFound { .. }) => {
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
    fn taints_parse_with_and_without_value() {
        assert_eq!(
            parse_taint("gpu=true:NoSchedule").unwrap(),
            Taint { key: "gpu".into(), value: "true".into(), effect: "NoSchedule".into() }
        );
        assert_eq!(parse_taint("dedicated:NoExecute").unwrap().value, "");
        assert!(parse_taint("gpu=true").is_err());
        assert!(parse_taint("gpu=true:Sometimes").is_err());
        assert!(parse_taint("=x:NoSchedule").is_err());
    }

    #[test]
    fn labels_need_a_key() {
        assert_eq!(parse_label("zone=a").unwrap(), ("zone".to_string(), "a".to_string()));
        assert_eq!(parse_label("flag=").unwrap(), ("flag".to_string(), String::new()));
        assert!(parse_label("zone").is_err());
        assert!(parse_label("=a").is_err());
    }

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
