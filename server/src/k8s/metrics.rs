//! `metrics.k8s.io/v1beta1`, what `kubectl top` reads: `NodeMetrics` and `PodMetrics`, read
//! only. Each request asks the agents of the nodes concerned what their pods use, on the
//! signed agent path (as metrics-server scrapes each kubelet), and stores nothing: no status
//! write per node every 15 s at 5,000 nodes, and figures as fresh as the request. A node whose
//! agent does not answer is left out of a list, as metrics-server leaves out what it could
//! not scrape. A node's usage is the sum of its pods'.

use std::collections::HashMap;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::routing::get;
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde::Deserialize;
use serde_json::{Value, json};
use shared::metrics::{API_VERSION, ContainerMetrics, MetricsMeta, NodeMetrics, NodeUsage, PodMetrics, PodUsage, ResourceUsage, window};
use shared::model::{Kind, Node, Object, Pod, PodPhase};
use shared::selector::LabelSelector;

use super::status::{Result, Status};
use crate::state::AppState;
use crate::store::Key;

pub const GROUP: &str = "metrics.k8s.io";
const VERSION: &str = "v1beta1";
const BASE: &str = shared::metrics::PATH;

/// Agents asked at once: a fleet of 5,000 nodes answers `top nodes` in batches, without
/// opening thousands of connections.
const AGENTS_AT_ONCE: usize = 64;
/// How long an agent may take: Docker measures each container over about a second.
const AGENT_TIMEOUT: Duration = Duration::from_secs(10);

pub fn router() -> Router<AppState> {
    Router::new()
        .route(BASE, get(resources))
        .route(&format!("{BASE}/nodes"), get(nodes))
        .route(&format!("{BASE}/nodes/{{name}}"), get(node))
        .route(&format!("{BASE}/pods"), get(all_pods))
        .route(&format!("{BASE}/namespaces/{{namespace}}/pods"), get(pods))
        .route(&format!("{BASE}/namespaces/{{namespace}}/pods/{{name}}"), get(pod))
}

/// The group as `/apis` lists it.
pub fn group() -> meta::APIGroup {
    let version = meta::GroupVersionForDiscovery { group_version: API_VERSION.into(), version: VERSION.into() };
    meta::APIGroup {
        name: GROUP.into(),
        preferred_version: Some(version.clone()),
        versions: vec![version],
        server_address_by_client_cidrs: None,
    }
}

async fn resources() -> Json<meta::APIResourceList> {
    let resource = |name: &str, kind: &str, namespaced: bool| meta::APIResource {
        name: name.into(),
        singular_name: String::new(),
        kind: kind.into(),
        namespaced,
        verbs: vec!["get".into(), "list".into()],
        ..Default::default()
    };
    Json(meta::APIResourceList {
        group_version: API_VERSION.into(),
        resources: vec![resource("nodes", "NodeMetrics", false), resource("pods", "PodMetrics", true)],
    })
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetricsQuery {
    label_selector: Option<String>,
    field_selector: Option<String>,
}

type Queried = std::result::Result<Query<MetricsQuery>, QueryRejection>;

/// The label selector a list asks for; field selectors are refused by name.
fn selector(query: Queried) -> Result<LabelSelector> {
    let Query(query) = query.map_err(|e| Status::bad_request(format!("invalid query parameters: {}", e.body_text())))?;
    if query.field_selector.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(Status::bad_request("Shepherd's metrics take a labelSelector; fieldSelector is not supported"));
    }
    LabelSelector::parse(query.label_selector.as_deref().unwrap_or("")).map_err(|e| Status::bad_request(e.to_string()))
}

fn list(kind: &str, items: Vec<Value>) -> Json<Value> {
    Json(json!({"kind": kind, "apiVersion": API_VERSION, "metadata": {}, "items": items}))
}

fn object(kind: &str, value: impl serde::Serialize) -> Json<Value> {
    let mut value = serde_json::to_value(value).expect("metrics serialize");
    value["kind"] = kind.into();
    value["apiVersion"] = API_VERSION.into();
    Json(value)
}

async fn nodes(State(state): State<AppState>, query: Queried) -> Result<Json<Value>> {
    let selector = selector(query)?;
    let (_, stored) = state.store.list(Kind::Node, None);
    let chosen: Vec<&Node> = stored
        .iter()
        .filter_map(|o| if let Object::Node(n) = &**o { Some(n) } else { None })
        .filter(|n| selector.matches(&n.metadata.labels))
        .collect();
    let usage = measure(&state, chosen.iter().map(|n| (*n).clone()).collect()).await;
    let items = chosen
        .into_iter()
        .filter_map(|node| Some(node_metrics(node, usage.get(&node.metadata.name)?.as_ref().ok()?)))
        .map(|m| serde_json::to_value(m).expect("metrics serialize"))
        .collect();
    Ok(list("NodeMetricsList", items))
}

async fn node(State(state): State<AppState>, Path(name): Path<String>) -> Result<Json<Value>> {
    let node = match state.store.get(&Key::new(Kind::Node, "", &name)).as_deref() {
        Some(Object::Node(node)) => node.clone(),
        _ => return Err(not_found("nodemetrics", &name)),
    };
    let mut usage = measure(&state, vec![node.clone()]).await;
    match usage.remove(&name) {
        Some(Ok(usage)) => Ok(object("NodeMetrics", node_metrics(&node, &usage))),
        Some(Err(why)) => Err(Status::from(crate::error::ApiError::unavailable(why))),
        None => Err(not_found("nodemetrics", &name)),
    }
}

async fn all_pods(state: State<AppState>, query: Queried) -> Result<Json<Value>> {
    pods_in(state, None, query).await
}

async fn pods(state: State<AppState>, Path(namespace): Path<String>, query: Queried) -> Result<Json<Value>> {
    pods_in(state, Some(namespace), query).await
}

async fn pods_in(State(state): State<AppState>, namespace: Option<String>, query: Queried) -> Result<Json<Value>> {
    let selector = selector(query)?;
    let (_, stored) = state.store.list(Kind::Pod, namespace.as_deref());
    let chosen: Vec<Pod> = stored
        .iter()
        .filter_map(|o| if let Object::Pod(p) = &**o { Some(p) } else { None })
        .filter(|p| selector.matches(&p.metadata.labels))
        .cloned()
        .collect();
    let items = pod_metrics(&state, &chosen).await.into_iter().map(|m| serde_json::to_value(m).expect("metrics serialize")).collect();
    Ok(list("PodMetricsList", items))
}

async fn pod(State(state): State<AppState>, Path((namespace, name)): Path<(String, String)>) -> Result<Json<Value>> {
    let pod = match state.store.get(&Key::new(Kind::Pod, &namespace, &name)).as_deref() {
        Some(Object::Pod(pod)) => pod.clone(),
        _ => return Err(not_found("podmetrics", &format!("{namespace}/{name}"))),
    };
    match pod_metrics(&state, std::slice::from_ref(&pod)).await.pop() {
        Some(metrics) => Ok(object("PodMetrics", metrics)),
        None => Err(not_found("podmetrics", &format!("{namespace}/{name}"))),
    }
}

/// metrics-server's words for an object it has no figures of.
fn not_found(plural: &str, name: &str) -> Status {
    Status::not_found(&format!("{plural}.{GROUP}"), name, format!("{plural}.{GROUP} {name:?} not found"))
}

/// The metrics of those `pods` whose agents reported them: running pods only.
async fn pod_metrics(state: &AppState, pods: &[Pod]) -> Vec<PodMetrics> {
    let running: Vec<&Pod> = pods.iter().filter(|p| p.status.phase == PodPhase::Running && !p.spec.node_name.is_empty()).collect();
    let mut node_names: Vec<&str> = running.iter().map(|p| p.spec.node_name.as_str()).collect();
    node_names.sort_unstable();
    node_names.dedup();
    let nodes: Vec<Node> = node_names
        .into_iter()
        .filter_map(|name| match state.store.get(&Key::new(Kind::Node, "", name)).as_deref() {
            Some(Object::Node(node)) => Some(node.clone()),
            _ => None,
        })
        .collect();
    let usage = measure(state, nodes).await;
    let reported: HashMap<(&str, &str), &PodUsage> = usage
        .values()
        .filter_map(|u| u.as_ref().ok())
        .flat_map(|u| &u.pods)
        .map(|p| ((p.namespace.as_str(), p.name.as_str()), p))
        .collect();
    running
        .into_iter()
        .filter_map(|pod| {
            let usage = reported.get(&(pod.metadata.namespace.as_str(), pod.metadata.name.as_str()))?;
            Some(PodMetrics {
                metadata: MetricsMeta {
                    name: pod.metadata.name.clone(),
                    namespace: pod.metadata.namespace.clone(),
                    creation_timestamp: pod.metadata.created_at,
                    labels: pod.metadata.labels.clone(),
                },
                timestamp: Some(usage.timestamp),
                window: window(usage.window_ms),
                containers: usage
                    .containers
                    .iter()
                    .map(|c| ContainerMetrics { name: c.name.clone(), usage: ResourceUsage::new(c.nano_cores, c.working_set_bytes) })
                    .collect(),
            })
        })
        .collect()
}

/// A node's usage: the sum of its pods', measured when the latest of them was.
fn node_metrics(node: &Node, usage: &NodeUsage) -> NodeMetrics {
    let containers = usage.pods.iter().flat_map(|p| &p.containers);
    let nano_cores = containers.clone().fold(0u64, |sum, c| sum.saturating_add(c.nano_cores));
    let bytes = containers.fold(0u64, |sum, c| sum.saturating_add(c.working_set_bytes));
    NodeMetrics {
        metadata: MetricsMeta {
            name: node.metadata.name.clone(),
            namespace: String::new(),
            creation_timestamp: node.metadata.created_at,
            labels: node.metadata.labels.clone(),
        },
        timestamp: Some(usage.pods.iter().map(|p| p.timestamp).max().unwrap_or_else(chrono::Utc::now)),
        window: window(usage.pods.iter().map(|p| p.window_ms).max().unwrap_or(0)),
        usage: ResourceUsage::new(nano_cores, bytes),
    }
}

/// Asks each node's agent what its pods use, [`AGENTS_AT_ONCE`] at a time: by node name,
/// the answer or why there is none.
async fn measure(state: &AppState, nodes: Vec<Node>) -> HashMap<String, std::result::Result<NodeUsage, String>> {
    futures::stream::iter(nodes.into_iter().map(|node| {
        let state = state.clone();
        async move { (node.metadata.name.clone(), ask(&state, &node).await) }
    }))
    .buffer_unordered(AGENTS_AT_ONCE)
    .collect()
    .await
}

async fn ask(state: &AppState, node: &Node) -> std::result::Result<NodeUsage, String> {
    let agent = crate::agent_client::node_agent(node, "usage").map_err(|e| e.message)?;
    let url = format!("{}{}", agent.endpoint, shared::api::agent_paths::STATS);
    let unreachable = |e: reqwest::Error| crate::agent_client::unreachable(&agent.node, &url, &e).message;
    let mut request = state.http.get(&url).timeout(AGENT_TIMEOUT).build().map_err(unreachable)?;
    let signed = crate::agent_client::sign(state, &agent.node, &mut request);
    let answer = state.http.execute(request).await.map_err(unreachable)?;
    if !answer.status().is_success() {
        let refused = crate::agent_client::refused(&agent.node, answer, signed).await.message;
        tracing::warn!("no usage of node {}: {refused}", agent.node);
        return Err(refused);
    }
    answer.json().await.map_err(|e| format!("the agent of node {} answered usage that does not read: {e}", agent.node))
}
