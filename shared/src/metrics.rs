//! Resource usage as `kubectl top` reads it: the arithmetic that turns an engine's cumulative
//! counters into metrics-server's figures (a CPU rate over a window, the memory working set),
//! what a node's agent reports ([`NodeUsage`]), and the `metrics.k8s.io/v1beta1` shapes the
//! server answers and the clients read ([`NodeMetrics`], [`PodMetrics`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::Time;

/// The group version the usage API is served under.
pub const API_VERSION: &str = "metrics.k8s.io/v1beta1";
/// Where it is served.
pub const PATH: &str = "/k8s/apis/metrics.k8s.io/v1beta1";

/// The path of a list of `plural` (`nodes`, `pods`), in `namespace` or in every one.
pub fn list_path(plural: &str, namespace: Option<&str>) -> String {
    match namespace {
        Some(namespace) => format!("{PATH}/namespaces/{namespace}/{plural}"),
        None => format!("{PATH}/{plural}"),
    }
}

/// A `NodeMetricsList` or `PodMetricsList`, as a client reads one.
#[derive(Debug, Clone, Deserialize)]
pub struct MetricsList<T> {
    pub items: Vec<T>,
}

/// A cumulative CPU counter read at one moment: the nanoseconds of CPU time used so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuReading {
    pub usage_nanos: u64,
    pub at: Time,
}

/// The average CPU use between two readings of one counter, in billionths of a core, as the
/// kubelet's `usageNanoCores`: `None` when the window is empty or the counter went back (the
/// container restarted between the readings).
pub fn nano_cores(before: CpuReading, after: CpuReading) -> Option<u64> {
    let window = u128::try_from((after.at - before.at).num_nanoseconds()?).ok().filter(|w| *w > 0)?;
    let used = u128::from(after.usage_nanos.checked_sub(before.usage_nanos)?);
    u64::try_from(used * 1_000_000_000 / window).ok()
}

/// The memory the kernel cannot simply drop, as cAdvisor and metrics-server count it: the
/// usage minus the inactive page cache, never below zero.
pub fn working_set(usage_bytes: u64, inactive_file_bytes: u64) -> u64 {
    usage_bytes.saturating_sub(inactive_file_bytes)
}

/// One container's usage as its node's agent measured it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerUsage {
    pub name: String,
    pub nano_cores: u64,
    pub working_set_bytes: u64,
}

/// One pod's containers' usage, measured over `window_ms` milliseconds ending at `timestamp`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodUsage {
    pub namespace: String,
    pub name: String,
    pub timestamp: Time,
    pub window_ms: u64,
    pub containers: Vec<ContainerUsage>,
}

/// What a node's agent answers on its stats path: the usage of each running pod.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeUsage {
    pub pods: Vec<PodUsage>,
}

/// A `metrics.k8s.io` object's metadata: what metrics-server copies from the node or pod.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricsMeta {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, deserialize_with = "crate::model::de_time")]
    pub creation_timestamp: Option<Time>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// CPU and memory as Kubernetes quantities: nanocores (`1234567n`) and bytes (`2048Ki`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceUsage {
    pub cpu: String,
    pub memory: String,
}

impl ResourceUsage {
    pub fn new(nano_cores: u64, bytes: u64) -> ResourceUsage {
        let memory = if bytes.is_multiple_of(1024) && bytes != 0 { format!("{}Ki", bytes / 1024) } else { bytes.to_string() };
        ResourceUsage { cpu: format!("{nano_cores}n"), memory }
    }

    /// Billionths of a core, from nanocores (`1234n`) or any other CPU quantity.
    pub fn nano_cores(&self) -> i64 {
        match self.cpu.strip_suffix('n').map(str::parse::<i64>) {
            Some(Ok(nanos)) => nanos,
            _ => crate::quantity::parse_cpu(&self.cpu).unwrap_or(0).saturating_mul(1_000_000),
        }
    }

    /// Millicores, rounded up as kubectl's `MilliValue` does.
    pub fn cpu_millis(&self) -> i64 {
        self.nano_cores().saturating_add(999_999) / 1_000_000
    }

    pub fn memory_bytes(&self) -> i64 {
        crate::quantity::parse_memory(&self.memory).unwrap_or(0)
    }
}

/// `NodeMetrics`: a node's usage, the sum of its pods'.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeMetrics {
    pub metadata: MetricsMeta,
    #[serde(default, deserialize_with = "crate::model::de_time")]
    pub timestamp: Option<Time>,
    /// A duration as Kubernetes writes one: `15s`, `1.002s`.
    pub window: String,
    pub usage: ResourceUsage,
}

/// One container of a [`PodMetrics`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerMetrics {
    pub name: String,
    pub usage: ResourceUsage,
}

/// `PodMetrics`: a pod's usage, container by container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodMetrics {
    pub metadata: MetricsMeta,
    #[serde(default, deserialize_with = "crate::model::de_time")]
    pub timestamp: Option<Time>,
    pub window: String,
    pub containers: Vec<ContainerMetrics>,
}

/// A window in milliseconds as a Go duration string, as metrics-server writes it.
pub fn window(ms: u64) -> String {
    match ms % 1000 {
        0 => format!("{}s", ms / 1000),
        rest => format!("{}.{rest:03}s", ms / 1000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        chrono::DateTime::from_timestamp(seconds, 0).unwrap()
    }

    #[test]
    fn cpu_is_a_rate_over_the_window_between_two_readings() {
        // 3 s of CPU time over 15 s is a fifth of a core.
        let before = CpuReading { usage_nanos: 7_000_000_000, at: at(100) };
        let after = CpuReading { usage_nanos: 10_000_000_000, at: at(115) };
        assert_eq!(nano_cores(before, after), Some(200_000_000));
        assert_eq!(ResourceUsage::new(200_000_000, 0).cpu_millis(), 200);
        assert_eq!(ResourceUsage::new(1, 0).cpu_millis(), 1, "any use shows as at least 1m, as kubectl rounds up");
        assert_eq!(ResourceUsage { cpu: "250m".into(), memory: String::new() }.nano_cores(), 250_000_000);
        assert_eq!(nano_cores(after, before), None, "a counter that went back: the container restarted");
        assert_eq!(nano_cores(before, CpuReading { at: at(100), ..after }), None, "an empty window");
    }

    #[test]
    fn the_working_set_leaves_out_the_inactive_page_cache() {
        assert_eq!(working_set(64 << 20, 16 << 20), 48 << 20);
        assert_eq!(working_set(1 << 20, 2 << 20), 0, "never below zero");
        let usage = ResourceUsage::new(0, 48 << 20);
        assert_eq!((usage.memory.as_str(), usage.memory_bytes()), ("49152Ki", 48 << 20));
        assert_eq!(ResourceUsage::new(0, 1000).memory_bytes(), 1000);
        assert_eq!((window(15_000), window(1_002)), ("15s".to_string(), "1.002s".to_string()));
    }
}
