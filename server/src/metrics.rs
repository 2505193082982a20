//! Prometheus metrics, kept and encoded by `prometheus-client`: request latency per route,
//! scheduling attempts and their latency, pod create→bound and create→Running latency, and
//! the store's revision and object counts, read from the store at each scrape.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use shared::model::Kind;

use crate::store::Store;

/// The media type of the exposition text `prometheus-client` writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 16] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

fn latency() -> Histogram {
    Histogram::new(BUCKETS)
}

type Latencies<L> = Family<L, Histogram, fn() -> Histogram>;

/// The outcome of one scheduling attempt, a label of `shepherd_scheduler_attempts_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Attempt {
    Scheduled,
    Unschedulable,
    Error,
}

impl Attempt {
    const ALL: [Attempt; 3] = [Attempt::Scheduled, Attempt::Unschedulable, Attempt::Error];

    fn as_str(self) -> &'static str {
        match self {
            Attempt::Scheduled => "scheduled",
            Attempt::Unschedulable => "unschedulable",
            Attempt::Error => "error",
        }
    }
}

impl EncodeLabelValue for Attempt {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
        encoder.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct AttemptLabels {
    result: Attempt,
}

/// The request's method as a label: a standard method by name, any other as `other` (as
/// Prometheus' own instrumentation does), so made-up methods cannot add series without bound.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct MethodLabel(Option<Method>);

impl MethodLabel {
    const STANDARD: [Method; 9] = [
        Method::GET,
        Method::HEAD,
        Method::POST,
        Method::PUT,
        Method::PATCH,
        Method::DELETE,
        Method::OPTIONS,
        Method::CONNECT,
        Method::TRACE,
    ];

    fn new(method: &Method) -> MethodLabel {
        MethodLabel(MethodLabel::STANDARD.contains(method).then(|| method.clone()))
    }
}

impl EncodeLabelValue for MethodLabel {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
        encoder.write_str(self.0.as_ref().map_or("other", Method::as_str))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    method: MethodLabel,
    route: String,
    code: u16,
}

#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Latencies<RequestLabels>,
    attempts: Family<AttemptLabels, Counter>,
    attempt_latency: Latencies<AttemptLabels>,
    create_to_bound: Histogram,
    create_to_running: Histogram,
    revision: Gauge,
    objects: Vec<(Kind, Gauge)>,
    leading: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Latencies::<RequestLabels>::new_with_constructor(latency as fn() -> Histogram);
        registry.register(
            "shepherd_http_request_duration_seconds",
            "HTTP request latency by method, route and status code",
            requests.clone(),
        );
        // Registered without `_total`, which the encoder appends to a counter's samples.
        let attempts = Family::<AttemptLabels, Counter>::default();
        for result in Attempt::ALL {
            // Every result shows, at 0 until it happens.
            drop(attempts.get_or_create(&AttemptLabels { result }));
        }
        registry.register("shepherd_scheduler_attempts", "Scheduling attempts by result", attempts.clone());
        let attempt_latency = Latencies::<AttemptLabels>::new_with_constructor(latency as fn() -> Histogram);
        registry.register(
            "shepherd_scheduler_attempt_duration_seconds",
            "Time the scheduling algorithm took for one pod, by result",
            attempt_latency.clone(),
        );
        let create_to_bound = latency();
        registry.register(
            "shepherd_pod_scheduling_duration_seconds",
            "Time from a pod's creation to its binding to a node",
            create_to_bound.clone(),
        );
        let create_to_running = latency();
        registry.register(
            "shepherd_pod_create_to_running_seconds",
            "Time from a pod's creation to the first report of it Running",
            create_to_running.clone(),
        );
        let revision = Gauge::default();
        registry.register("shepherd_store_revision", "The store's current revision", revision.clone());
        let objects: Vec<(Kind, Gauge)> = Kind::ALL.iter().map(|kind| (*kind, Gauge::default())).collect();
        for (kind, gauge) in &objects {
            registry.register(format!("shepherd_objects_{}", kind.plural()), "Objects of this kind in the store", gauge.clone());
        }
        let leading = Gauge::default();
        registry.register(
            "shepherd_leader_election_master_status",
            "1 while this server runs the scheduler and the controllers (client-go's leader_election_master_status)",
            leading.clone(),
        );
        Metrics { registry, requests, attempts, attempt_latency, create_to_bound, create_to_running, revision, objects, leading }
    }
}

impl Metrics {
    /// `route` is a route template or `unmatched`, never a raw path, so routes are bounded too.
    pub fn observe_request(&self, method: &Method, route: &str, code: u16, elapsed: Duration) {
        let labels = RequestLabels { method: MethodLabel::new(method), route: route.to_string(), code };
        self.requests.get_or_create(&labels).observe(elapsed.as_secs_f64());
    }

    /// One pass of the scheduling algorithm for one pod, and how long it took.
    pub fn observe_attempt(&self, attempt: Attempt, elapsed: Duration) {
        let labels = AttemptLabels { result: attempt };
        self.attempts.get_or_create(&labels).inc();
        self.attempt_latency.get_or_create(&labels).observe(elapsed.as_secs_f64());
    }

    pub fn observe_create_to_bound(&self, elapsed: Duration) {
        self.create_to_bound.observe(elapsed.as_secs_f64());
    }

    pub fn observe_create_to_running(&self, elapsed: Duration) {
        self.create_to_running.observe(elapsed.as_secs_f64());
    }

    /// Whether this server's scheduler and controllers run (it leads, or elects no leader).
    pub fn set_leading(&self, leading: bool) {
        self.leading.set(i64::from(leading));
    }

    pub fn leading(&self) -> bool {
        self.leading.get() == 1
    }

    pub fn attempts(&self, attempt: Attempt) -> u64 {
        self.attempts.get_or_create(&AttemptLabels { result: attempt }).get()
    }

    /// The exposition text, with the store's revision and object counts as they are now.
    pub fn render(&self, store: &dyn Store) -> String {
        self.revision.set(i64::try_from(store.revision()).unwrap_or(i64::MAX));
        for (kind, gauge) in &self.objects {
            gauge.set(i64::try_from(store.count(*kind)).unwrap_or(i64::MAX));
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Times every request under its route template (`/api/v1/namespaces/{ns}/pods`).
pub async fn track(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let method = request.method().clone();
    let route = request.extensions().get::<MatchedPath>().cloned();
    let response = next.run(request).await;
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    metrics.observe_request(&method, route, response.status().as_u16(), started.elapsed());
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::CachedStore;

    #[test]
    fn renders_cumulative_buckets_and_the_stores_gauges() {
        let m = Metrics::default();
        m.observe_request(&Method::GET, "/healthz", 200, Duration::from_micros(700));
        m.observe_request(&Method::GET, "/healthz", 200, Duration::from_millis(20));
        m.observe_attempt(Attempt::Unschedulable, Duration::from_micros(100));
        let text = m.render(&CachedStore::in_memory(10));
        assert!(
            text.contains("shepherd_http_request_duration_seconds_bucket{le=\"0.001\",method=\"GET\",route=\"/healthz\",code=\"200\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("shepherd_http_request_duration_seconds_bucket{le=\"0.025\",method=\"GET\",route=\"/healthz\",code=\"200\"} 2"),
            "{text}"
        );
        assert!(text.contains("shepherd_http_request_duration_seconds_count{method=\"GET\",route=\"/healthz\",code=\"200\"} 2"), "{text}");
        assert!(text.contains("# HELP shepherd_http_request_duration_seconds HTTP request latency by method, route and status code.\n"));
        assert!(text.contains("shepherd_scheduler_attempts_total{result=\"unschedulable\"} 1"), "{text}");
        assert!(text.contains("shepherd_scheduler_attempts_total{result=\"scheduled\"} 0"), "{text}");
        assert!(text.contains("# TYPE shepherd_store_revision gauge\nshepherd_store_revision 0\n"), "{text}");
        assert!(text.contains("# HELP shepherd_objects_pods Objects of this kind in the store.\n"), "{text}");
        assert!(text.contains("shepherd_objects_pods 0\n"), "{text}");
    }
}
