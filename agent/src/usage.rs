//! What the node's running pods use, measured when the API server asks (as metrics-server
//! asks each kubelet's `/stats/summary`): each pod container's CPU rate and memory working
//! set from the runtime, grouped by pod. Nothing is kept between requests.

use std::collections::BTreeMap;

use futures::StreamExt;
use shared::metrics::{ContainerUsage, NodeUsage, PodUsage, nano_cores};

use crate::runtime::{ContainerRuntime, LABEL_CONTAINER, LABEL_NAMESPACE, LABEL_NODE, LABEL_POD, Result, RunState};

/// Containers measured at once: Docker takes about a second for each.
const MEASURED_AT_ONCE: usize = 8;

/// The usage of node `node`'s running pods. A container that stops while it is measured is
/// left out, as metrics-server leaves out what it could not read.
pub async fn of_node(runtime: &dyn ContainerRuntime, node: &str) -> Result<NodeUsage> {
    let running: Vec<_> = runtime
        .list(&[(LABEL_NODE, node)])
        .await?
        .into_iter()
        .filter(|c| c.state == RunState::Running && !c.label(LABEL_POD).is_empty())
        .collect();
    let measured: Vec<_> = futures::stream::iter(running)
        .map(|c| async move {
            let usage = runtime.usage(&c.id).await.ok()?;
            Some((c, usage))
        })
        .buffer_unordered(MEASURED_AT_ONCE)
        .filter_map(|m| async move { m })
        .collect()
        .await;
    let mut pods: BTreeMap<(String, String), PodUsage> = BTreeMap::new();
    for (container, usage) in measured {
        let key = (container.label(LABEL_NAMESPACE).to_string(), container.label(LABEL_POD).to_string());
        let window = usage.cpu_after.at - usage.cpu_before.at;
        let pod = pods.entry(key.clone()).or_insert_with(|| PodUsage {
            namespace: key.0,
            name: key.1,
            timestamp: usage.cpu_after.at,
            window_ms: 0,
            containers: Vec::new(),
        });
        pod.timestamp = pod.timestamp.max(usage.cpu_after.at);
        pod.window_ms = pod.window_ms.max(u64::try_from(window.num_milliseconds()).unwrap_or(0));
        pod.containers.push(ContainerUsage {
            name: container.label(LABEL_CONTAINER).to_string(),
            nano_cores: nano_cores(usage.cpu_before, usage.cpu_after).unwrap_or(0),
            working_set_bytes: usage.working_set_bytes,
        });
    }
    let mut pods: Vec<PodUsage> = pods.into_values().collect();
    for pod in &mut pods {
        pod.containers.sort_by(|a, b| a.name.cmp(&b.name));
    }
    Ok(NodeUsage { pods })
}
