//! `sheepctl top pods [NAME] [-l S] [--containers]` and `sheepctl top nodes [NAME] [-l S]`:
//! what pods and nodes use now, from `metrics.k8s.io`, in `kubectl top`'s columns (CPU in
//! millicores, memory in MiB, a node's against its allocatable).

use anyhow::{Result, bail};
use shared::metrics::{PodMetrics, ResourceUsage};
use shared::model::Node;
use shared::usage::percent;
use shepherd_client::Selection;

use super::context::Context;
use super::output::print;
use crate::cli::{TopCommand, TopNodesArgs, TopPodsArgs};
use crate::table::Table;

pub async fn run(context: &Context, command: &TopCommand) -> Result<()> {
    match command {
        TopCommand::Pods(args) => pods(context, args).await,
        TopCommand::Nodes(args) => nodes(context, args).await,
    }
}

/// CPU and memory as `kubectl top` prints them: `12m`, `45Mi`.
fn cells(usage: &ResourceUsage) -> [String; 2] {
    [format!("{}m", usage.cpu_millis()), format!("{}Mi", usage.memory_bytes() / (1 << 20))]
}

async fn pods(context: &Context, args: &TopPodsArgs) -> Result<()> {
    let scope = context.settings.list_scope();
    let selection = Selection { namespace: scope.map(str::to_string), label_selector: args.selector.clone(), field_selector: None };
    let mut pods: Vec<PodMetrics> = context
        .client
        .pod_metrics(&selection)
        .await?
        .into_iter()
        .filter(|p| args.name.as_ref().is_none_or(|n| *n == p.metadata.name))
        .collect();
    if pods.is_empty() {
        match &args.name {
            Some(name) => bail!("no metrics for pod {name:?}: it is not running yet, or its node's agent did not answer"),
            None => bail!("no pod metrics found: no pod runs here yet, or their nodes' agents did not answer"),
        }
    }
    pods.sort_by(|a, b| (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name)));
    let mut headers = Vec::new();
    if scope.is_none() {
        headers.push("NAMESPACE");
    }
    headers.extend(if args.containers { &["POD", "NAME"][..] } else { &["NAME"][..] });
    headers.extend(["CPU(cores)", "MEMORY(bytes)"]);
    let mut table = Table::new(headers);
    for pod in &pods {
        let lead = || -> Vec<String> {
            scope.is_none().then(|| pod.metadata.namespace.clone()).into_iter().chain([pod.metadata.name.clone()]).collect()
        };
        if args.containers {
            for container in &pod.containers {
                table.push(lead().into_iter().chain([container.name.clone()]).chain(cells(&container.usage)).collect());
            }
        } else {
            let nanos: u64 = pod.containers.iter().map(|c| c.usage.nano_cores().unsigned_abs()).sum();
            let bytes: u64 = pod.containers.iter().map(|c| c.usage.memory_bytes().unsigned_abs()).sum();
            table.push(lead().into_iter().chain(cells(&ResourceUsage::new(nanos, bytes))).collect());
        }
    }
    print(&table.render())
}

async fn nodes(context: &Context, args: &TopNodesArgs) -> Result<()> {
    let mut metrics = context.client.node_metrics(args.selector.as_deref()).await?;
    metrics.retain(|m| args.name.as_ref().is_none_or(|n| *n == m.metadata.name));
    if metrics.is_empty() {
        match &args.name {
            Some(name) => bail!("no metrics for node {name:?}: it does not exist, or its agent did not answer"),
            None => bail!("no node metrics found: no node's agent answered"),
        }
    }
    metrics.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let selection = Selection { label_selector: args.selector.clone(), ..Selection::default() };
    let nodes = context.client.list::<Node>(&selection).await?.items;
    let mut table = Table::new(["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]);
    for m in &metrics {
        let allocatable = nodes.iter().find(|n| n.metadata.name == m.metadata.name).map(|n| n.status.allocatable.clone());
        let share = |part: i64, whole: Option<i64>| whole.map_or("<unknown>".to_string(), |w| format!("{}%", percent(part, w)));
        let [cpu, memory] = cells(&m.usage);
        table.push(vec![
            m.metadata.name.clone(),
            cpu,
            share(m.usage.cpu_millis(), allocatable.as_ref().map(|a| a.cpu)),
            memory,
            share(m.usage.memory_bytes(), allocatable.as_ref().map(|a| a.memory)),
        ]);
    }
    print(&table.render())
}
