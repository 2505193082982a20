//! Prometheus metrics in the text exposition format: request latency per route, scheduling
//! attempts and latency, and pod create→bound and create→Running latency.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::api::AppState;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 16] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

#[derive(Debug, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        for (i, bound) in BUCKETS.iter().enumerate() {
            if seconds <= *bound {
                self.counts[i] += 1;
            }
        }
        self.count += 1;
        self.sum += seconds;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (i, bound) in BUCKETS.iter().enumerate() {
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {}", self.counts[i]);
        }
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}", self.count);
        let braces = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        let _ = writeln!(out, "{name}_sum{braces} {}", self.sum);
        let _ = writeln!(out, "{name}_count{braces} {}", self.count);
    }
}

/// A histogram family: series keyed by a hash of their labels (so that the hot path does
/// not build strings), each with its rendered label set.
#[derive(Debug, Default)]
struct Family {
    series: Mutex<HashMap<u64, (String, Histogram)>>,
}

impl Family {
    fn observe(&self, labels: String, seconds: f64) {
        self.observe_keyed(fnv1a(labels.as_bytes(), FNV_OFFSET), || labels, seconds);
    }

    fn observe_keyed(&self, key: u64, labels: impl FnOnce() -> String, seconds: f64) {
        let mut series = self.series.lock().expect("metrics lock");
        series.entry(key).or_insert_with(|| (labels(), Histogram::default())).1.observe(seconds);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let series = self.series.lock().expect("metrics lock");
        let mut sorted: Vec<&(String, Histogram)> = series.values().collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        for (labels, histogram) in sorted {
            histogram.render(out, name, labels);
        }
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv1a(bytes: &[u8], mut hash: u64) -> u64 {
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The outcome of one scheduling attempt, a label of `shepherd_scheduler_attempts_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    Scheduled,
    Unschedulable,
    Error,
}

#[derive(Debug, Default)]
pub struct Metrics {
    requests: Family,
    attempts: [AtomicU64; 3],
    attempt_latency: Family,
    create_to_bound: Family,
    create_to_running: Family,
}

fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

impl Metrics {
    pub fn observe_request(&self, method: &str, route: &str, code: u16, elapsed: Duration) {
        let key = fnv1a(&code.to_le_bytes(), fnv1a(route.as_bytes(), fnv1a(method.as_bytes(), FNV_OFFSET)));
        let labels = || format!("method=\"{}\",route=\"{}\",code=\"{code}\"", escape(method), escape(route));
        self.requests.observe_keyed(key, labels, elapsed.as_secs_f64());
    }

    /// One pass of the scheduling algorithm for one pod, and how long it took.
    pub fn observe_attempt(&self, attempt: Attempt, elapsed: Duration) {
        self.attempts[attempt as usize].fetch_add(1, Ordering::Relaxed);
        let result = match attempt {
            Attempt::Scheduled => "scheduled",
            Attempt::Unschedulable => "unschedulable",
            Attempt::Error => "error",
        };
        self.attempt_latency.observe(format!("result=\"{result}\""), elapsed.as_secs_f64());
    }

    pub fn observe_create_to_bound(&self, elapsed: Duration) {
        self.create_to_bound.observe(String::new(), elapsed.as_secs_f64());
    }

    pub fn observe_create_to_running(&self, elapsed: Duration) {
        self.create_to_running.observe(String::new(), elapsed.as_secs_f64());
    }

    pub fn attempts(&self, attempt: Attempt) -> u64 {
        self.attempts[attempt as usize].load(Ordering::Relaxed)
    }

    /// The exposition text, with the store's gauges appended by the caller's values.
    pub fn render(&self, gauges: &[(&str, &str, u64)]) -> String {
        let mut out = String::new();
        self.requests.render(&mut out, "shepherd_http_request_duration_seconds", "HTTP request latency by method, route and status code.");
        let _ = writeln!(
            out,
            "# HELP shepherd_scheduler_attempts_total Scheduling attempts by result.\n# TYPE shepherd_scheduler_attempts_total counter"
        );
        for (attempt, label) in [(Attempt::Scheduled, "scheduled"), (Attempt::Unschedulable, "unschedulable"), (Attempt::Error, "error")] {
            let _ = writeln!(out, "shepherd_scheduler_attempts_total{{result=\"{label}\"}} {}", self.attempts(attempt));
        }
        self.attempt_latency.render(
            &mut out,
            "shepherd_scheduler_attempt_duration_seconds",
            "Time the scheduling algorithm took for one pod, by result.",
        );
        self.create_to_bound.render(
            &mut out,
            "shepherd_pod_scheduling_duration_seconds",
            "Time from a pod's creation to its binding to a node.",
        );
        self.create_to_running.render(
            &mut out,
            "shepherd_pod_create_to_running_seconds",
            "Time from a pod's creation to the first report of it Running.",
        );
        for (name, help, value) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}");
        }
        out
    }
}

/// Times every request under its route template (`/api/v1/namespaces/{ns}/pods`).
pub async fn track(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let method = request.method().clone();
    let route = request.extensions().get::<MatchedPath>().cloned();
    let response = next.run(request).await;
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    state.metrics.observe_request(method.as_str(), route, response.status().as_u16(), started.elapsed());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_cumulative_buckets() {
        let m = Metrics::default();
        m.observe_request("GET", "/healthz", 200, Duration::from_micros(700));
        m.observe_request("GET", "/healthz", 200, Duration::from_millis(20));
        m.observe_attempt(Attempt::Unschedulable, Duration::from_micros(100));
        let text = m.render(&[("shepherd_store_revision", "The store's revision.", 7)]);
        assert!(
            text.contains("shepherd_http_request_duration_seconds_bucket{method=\"GET\",route=\"/healthz\",code=\"200\",le=\"0.001\"} 1")
        );
        assert!(
            text.contains("shepherd_http_request_duration_seconds_bucket{method=\"GET\",route=\"/healthz\",code=\"200\",le=\"0.025\"} 2")
        );
        assert!(text.contains("shepherd_http_request_duration_seconds_count{method=\"GET\",route=\"/healthz\",code=\"200\"} 2"));
        assert!(text.contains("shepherd_scheduler_attempts_total{result=\"unschedulable\"} 1"));
        assert!(text.contains("shepherd_store_revision 7"));
    }
}
