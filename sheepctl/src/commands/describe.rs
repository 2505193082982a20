//! `sheepctl describe KIND NAME`: one object for a person. A summary of its spec, its
//! conditions and container states, for a pod the scheduler's decision (why this node and
//! not the others, or why it is Pending), and the object's events with their ages.

use anyhow::{Result, bail};
use shared::model::{
    Condition, ConfigMap, Container, ContainerState, Deployment, EnvFromSource, EnvVar, Event, IntOrString, Kind, Labels, Lease, Namespace,
    Node, Object, Pod, PodSpec, PodTemplateSpec, ReplicaSet, Resource, Secret, Service, Time,
};
use shared::quantity::{format_cpu, format_memory};
use shared::rollout::new_and_old_sets;
use shared::scheduler::{Explanation, Verdict};
use shared::usage::{self, requested_by_node};
use shared::words::{age, last_seen, pending_reason};
use shepherd_client::Selection;

use super::apply::LAST_APPLIED;
use super::context::Context;
use super::output::print;
use crate::cli::DescribeArgs;
use crate::settings;
use crate::table::Table;
use crate::view;

/// Where values start: column 16 for the top level, column 20 inside a section (container
/// fields have longer labels, such as `Restart Count`).
const TOP_WIDTH: usize = 16;
const NESTED_WIDTH: usize = 20;

pub async fn run(context: &Context, args: &DescribeArgs) -> Result<()> {
    let targets = settings::targets(&args.target)?;
    let [(kind, name)] = targets.as_slice() else {
        bail!("describe shows one object: give KIND NAME or KIND/NAME");
    };
    let namespace = &context.settings.namespace;
    let object = context.client.get_object(*kind, namespace, name).await?;
    let now = context.now();
    let mut text = Text::default();
    match &object {
        Object::Pod(pod) => {
            pod_text(&mut text, pod, now);
            let explanation = scheduling(context, pod).await?;
            scheduling_text(&mut text, pod, explanation.as_ref());
        }
        Object::Deployment(deployment) => {
            let selector = deployment.spec.selector.to_string();
            let selection = Selection { label_selector: Some(selector), ..Selection::namespace(Some(namespace)) };
            let pods = context.client.list_objects(Kind::Pod, &selection).await?;
            let sets = context.client.list::<ReplicaSet>(&selection).await?.items;
            let (new, old) = new_and_old_sets(deployment, &sets);
            // Only the pods this deployment manages (through its ReplicaSets), not every pod
            // its selector happens to match.
            let controllers: Vec<&str> =
                new.iter().chain(&old).map(|rs| rs.metadata.uid.as_str()).chain([deployment.metadata.uid.as_str()]).collect();
            let owned: Vec<Object> = pods
                .items
                .into_iter()
                .filter(|p| p.metadata().controller().is_some_and(|r| controllers.contains(&r.uid.as_str())))
                .collect();
            deployment_text(&mut text, deployment, (new, &old), &owned, now);
        }
        Object::ReplicaSet(rs) => {
            let selection = Selection { label_selector: Some(rs.spec.selector.to_string()), ..Selection::namespace(Some(namespace)) };
            let pods = context.client.list_objects(Kind::Pod, &selection).await?;
            let owned: Vec<Object> =
                pods.items.into_iter().filter(|p| p.metadata().controller().is_some_and(|r| r.uid == rs.metadata.uid)).collect();
            replicaset_text(&mut text, rs, &owned, now);
        }
        Object::Service(service) => service_text(&mut text, service, now),
        Object::Node(node) => {
            let pods = context.client.list_objects(Kind::Pod, &Selection::default()).await?;
            node_text(&mut text, node, &pods.items, now, &context.node_judge().await?);
        }
        Object::Namespace(namespace) => namespace_text(&mut text, namespace, now),
        Object::Event(event) => event_text(&mut text, event, now),
        Object::Lease(lease) => lease_text(&mut text, lease, now),
        Object::ConfigMap(map) => config_map_text(&mut text, map, now),
        Object::Secret(secret) => secret_text(&mut text, secret, now),
    }
    if *kind != Kind::Event {
        let events = events_about(context, &object).await?;
        events_text(&mut text, &events, now);
    }
    print(&text.0)
}

/// The scheduler's last decision, or `None` when it has none for this pod.
async fn scheduling(context: &Context, pod: &Pod) -> Result<Option<Explanation>> {
    match context.client.scheduling(&pod.metadata.namespace, &pod.metadata.name).await {
        Ok(explanation) => Ok(Some(explanation)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The events whose involved object is this one, oldest first.
async fn events_about(context: &Context, object: &Object) -> Result<Vec<Event>> {
    let meta = object.metadata();
    let scope = if object.kind().namespaced() { Some(meta.namespace.as_str()) } else { None };
    let mut list = context.client.list_objects(Kind::Event, &Selection::namespace(scope)).await?.items;
    view::sort_events(&mut list);
    Ok(list
        .into_iter()
        .filter_map(|o| match o {
            Object::Event(e) => Some(e),
            _ => None,
        })
        .filter(|e| e.involved_object.refers_to(object.kind(), meta))
        .collect())
}

/// Lines of `Label:  value`, indented by section.
#[derive(Default)]
pub(super) struct Text(pub(super) String);

impl Text {
    pub(super) fn field(&mut self, indent: usize, label: &str, value: impl AsRef<str>) {
        let total = if indent == 0 { TOP_WIDTH } else { NESTED_WIDTH };
        // At least one space between a long label and its value.
        let width = total.saturating_sub(indent).max(label.chars().count() + 2);
        let value = value.as_ref();
        let value = if value.is_empty() { "<none>" } else { value };
        let mut lines = value.lines();
        let first = lines.next().unwrap_or("");
        self.0.push_str(&format!("{:indent$}{:<width$}{first}\n", "", format!("{label}:")));
        for line in lines {
            self.0.push_str(&format!("{:indent$}{:width$}{line}\n", "", ""));
        }
    }

    fn heading(&mut self, indent: usize, label: &str) {
        self.0.push_str(&format!("{:indent$}{label}:\n", ""));
    }

    fn line(&mut self, indent: usize, line: &str) {
        self.0.push_str(&format!("{:indent$}{line}\n", ""));
    }

    fn table(&mut self, indent: usize, table: &Table) {
        for line in table.render().lines() {
            self.line(indent, line);
        }
    }
}

fn labels_text(labels: &Labels) -> String {
    labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("\n")
}

/// The annotations but the records of what was applied, which may hold a Secret's values.
fn annotations_text(annotations: &Labels) -> String {
    let recorded = |key: &str| key == LAST_APPLIED || key == shared::model::KUBECTL_LAST_APPLIED;
    annotations.iter().filter(|(k, _)| !recorded(k)).map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join("\n")
}

fn when(now: Time, time: Option<Time>) -> String {
    match time {
        Some(t) => format!("{} ({} ago)", t.format("%Y-%m-%d %H:%M:%S UTC"), age(now, Some(t))),
        None => String::new(),
    }
}

fn meta_text(text: &mut Text, object_meta: &shared::model::ObjectMeta, now: Time) {
    text.field(0, "Name", &object_meta.name);
    if !object_meta.namespace.is_empty() {
        text.field(0, "Namespace", &object_meta.namespace);
    }
    text.field(0, "Labels", labels_text(&object_meta.labels));
    text.field(0, "Annotations", annotations_text(&object_meta.annotations));
    text.field(0, "Created", when(now, object_meta.created_at));
    if let Some(owner) = object_meta.controller() {
        text.field(0, "Controlled By", format!("{}/{}", owner.kind, owner.name));
    }
    if object_meta.deletion_timestamp.is_some() {
        let since = when(now, object_meta.deletion_timestamp);
        match object_meta.deletion_grace_period_seconds {
            Some(grace) => text.field(0, "Deleting Since", format!("{since}, grace period {grace}s")),
            None => text.field(0, "Deleting Since", since),
        }
    }
}

fn pod_text(text: &mut Text, pod: &Pod, now: Time) {
    meta_text(text, &pod.metadata, now);
    let node = match (pod.spec.node_name.as_str(), pod.status.host_ip.as_str()) {
        ("", _) => String::new(),
        (node, "") => node.to_string(),
        (node, ip) => format!("{node} ({ip})"),
    };
    text.field(0, "Node", node);
    text.field(0, "Status", pod.display_status());
    if let Some(reason) = pending_reason(pod) {
        text.field(0, "Pending", reason.to_string());
    }
    if !pod.status.message.is_empty() {
        text.field(0, "Message", &pod.status.message);
    }
    text.field(0, "IP", &pod.status.pod_ip);
    // The pod's, when its node took it on (kubectl's words): its containers may not have started.
    text.field(0, "Start Time", when(now, pod.status.start_time));
    spec_text(text, 0, &pod.spec);
    text.heading(0, "Containers");
    for container in &pod.spec.containers {
        text.heading(2, &container.name);
        container_text(text, 4, container);
        if let Some(status) = pod.status.container_statuses.iter().find(|s| s.name == container.name) {
            text.field(4, "State", state_text(&status.state, now));
            if let Some(last) = &status.last_state {
                text.field(4, "Last State", state_text(last, now));
            }
            text.field(4, "Ready", if status.ready { "True" } else { "False" });
            if container.probes().next().is_some() {
                text.field(4, "Started", if status.started { "True" } else { "False" });
            }
            text.field(4, "Restart Count", status.restart_count.to_string());
            if !status.container_id.is_empty() {
                text.field(4, "Container ID", &status.container_id);
            }
        } else {
            text.field(4, "State", "not reported yet");
        }
    }
    conditions_text(text, &pod.status.conditions, now);
}

fn spec_text(text: &mut Text, indent: usize, spec: &PodSpec) {
    text.field(indent, "Restart Policy", if spec.restart_policy.is_empty() { "Always" } else { &spec.restart_policy });
    text.field(indent, "Node Selector", labels_text(&spec.node_selector));
    let tolerations: Vec<String> = spec
        .tolerations
        .iter()
        .map(|t| {
            let key = if t.key.is_empty() { "*".to_string() } else { t.key.clone() };
            let value = if t.value.is_empty() { String::new() } else { format!("={}", t.value) };
            let effect = if t.effect.is_empty() { "any effect".to_string() } else { t.effect.clone() };
            format!("{key}{value}:{effect}")
        })
        .collect();
    text.field(indent, "Tolerations", tolerations.join("\n"));
    let requests = spec.requests();
    text.field(indent, "Requests", format!("cpu {}, memory {}", format_cpu(requests.cpu), format_memory(requests.memory)));
}

fn container_text(text: &mut Text, indent: usize, container: &Container) {
    text.field(indent, "Image", &container.image);
    if !container.command.is_empty() {
        text.field(indent, "Command", container.command.join(" "));
    }
    if !container.args.is_empty() {
        text.field(indent, "Args", container.args.join(" "));
    }
    let ports: Vec<String> = container
        .ports
        .iter()
        .map(|p| {
            let protocol = if p.protocol.is_empty() { "TCP".to_string() } else { p.protocol.to_uppercase() };
            match p.host_port {
                Some(host) if host > 0 => format!("{}/{protocol} (host port {host})", p.container_port),
                _ => format!("{}/{protocol}", p.container_port),
            }
        })
        .collect();
    text.field(indent, "Ports", ports.join(", "));
    let resources = container.resources;
    text.field(indent, "Requests", format!("cpu {}, memory {}", format_cpu(resources.cpu), format_memory(resources.memory)));
    for (kind, probe) in container.probes() {
        text.field(indent, kind.as_str(), probe.summary());
    }
    if !container.env_from.is_empty() {
        text.field(indent, "Environment Variables from", container.env_from.iter().map(env_from_text).collect::<Vec<_>>().join("\n"));
    }
    if !container.env.is_empty() {
        text.field(indent, "Environment", container.env.iter().map(env_text).collect::<Vec<_>>().join("\n"));
    }
}

/// A variable as kubectl describes it: the value, or where it comes from (never a Secret's value).
fn env_text(env: &EnvVar) -> String {
    let optional = |o: Option<bool>| o.unwrap_or(false);
    let Some(source) = &env.value_from else { return format!("{}={}", env.name, env.value) };
    let from = match (&source.config_map_key_ref, &source.secret_key_ref, &source.field_ref) {
        (Some(k), _, _) => format!("<set to the key '{}' of config map '{}'>  Optional: {}", k.key, k.name, optional(k.optional)),
        (_, Some(k), _) => format!("<set to the key '{}' in secret '{}'>  Optional: {}", k.key, k.name, optional(k.optional)),
        (_, _, Some(f)) => format!("({}:{})", if f.api_version.is_empty() { "v1" } else { &f.api_version }, f.field_path),
        (None, None, None) => String::new(),
    };
    format!("{}: {from}", env.name)
}

fn env_from_text(from: &EnvFromSource) -> String {
    let (name, kind, optional) = match (&from.config_map_ref, &from.secret_ref) {
        (Some(r), _) => (&r.name, "ConfigMap", r.optional),
        (_, Some(r)) => (&r.name, "Secret", r.optional),
        (None, None) => return String::new(),
    };
    let prefix = if from.prefix.is_empty() { String::new() } else { format!(" with prefix '{}'", from.prefix) };
    format!("{name}  {kind}{prefix}  Optional: {}", optional.unwrap_or(false))
}

fn state_text(state: &ContainerState, now: Time) -> String {
    match state {
        ContainerState::Waiting { reason, message } if message.is_empty() => format!("Waiting ({reason})"),
        ContainerState::Waiting { reason, message } => format!("Waiting ({reason}: {message})"),
        ContainerState::Running { started_at } => match started_at {
            Some(_) => format!("Running since {}", when(now, *started_at)),
            None => "Running".to_string(),
        },
        ContainerState::Terminated { exit_code, reason, message, finished_at, .. } => {
            let mut words = format!("Terminated ({}, exit code {exit_code})", if reason.is_empty() { "Completed" } else { reason });
            if !message.is_empty() {
                words.push_str(&format!(": {message}"));
            }
            if finished_at.is_some() {
                words.push_str(&format!(", finished {}", when(now, *finished_at)));
            }
            words
        }
    }
}

fn conditions_text(text: &mut Text, conditions: &[Condition], now: Time) {
    if conditions.is_empty() {
        text.field(0, "Conditions", "");
        return;
    }
    text.heading(0, "Conditions");
    let mut table = Table::new(["TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"]);
    for c in conditions {
        table.push(vec![c.type_.clone(), c.status.clone(), c.reason.clone(), age(now, c.last_transition_time), c.message.clone()]);
    }
    text.table(2, &table);
}

/// Why this node and not the others, or why no node fits.
fn scheduling_text(text: &mut Text, pod: &Pod, explanation: Option<&Explanation>) {
    text.heading(0, "Scheduling");
    let Some(explanation) = explanation else {
        let line = if pod.spec.node_name.is_empty() {
            "no decision yet: the scheduler has not looked at this pod".to_string()
        } else {
            format!("bound to {}; the scheduler no longer keeps the explanation of that decision", pod.spec.node_name)
        };
        text.line(2, &line);
        return;
    };
    text.line(2, &explanation.message);
    if let Some(queue) = &explanation.queue {
        text.line(2, &format!("queue: {}", queue.describe()));
    }
    let mut scope = format!(
        "profile {:?}: {} node(s), {} evaluated, {} feasible",
        explanation.profile, explanation.total_nodes, explanation.nodes_evaluated, explanation.feasible_nodes
    );
    if explanation.nodes_evaluated < explanation.total_nodes {
        scope.push_str(&format!(" (stopped after finding {} feasible)", explanation.nodes_to_find));
    }
    text.line(2, &scope);
    if explanation.nodes.is_empty() {
        return;
    }
    let mut table = Table::new(["NODE", "RESULT", "SCORE", "WHY"]);
    for node in &explanation.nodes {
        let result = if node.selected {
            "selected"
        } else if node.feasible {
            "feasible"
        } else {
            "filtered out"
        };
        let why = match node.filters.iter().find(|f| f.verdict == Verdict::Failed) {
            Some(failed) if failed.detail.is_empty() => format!("{}: {}", failed.filter, failed.reason),
            Some(failed) => format!("{}: {} ({})", failed.filter, failed.reason, failed.detail),
            None => node.scores.iter().map(|s| format!("{} {}x{}", s.plugin, s.raw, s.weight)).collect::<Vec<_>>().join(", "),
        };
        let score = node.total.map_or("-".to_string(), |t| t.to_string());
        table.push(vec![node.node.clone(), result.to_string(), score, why]);
    }
    text.table(2, &table);
}

/// Kubernetes' lines: the replica counts of `status`, as `get deploy` shows them, the
/// strategy, and the new and old ReplicaSets.
fn deployment_text(
    text: &mut Text,
    deployment: &Deployment,
    (new, old): (Option<&ReplicaSet>, &[&ReplicaSet]),
    pods: &[Object],
    now: Time,
) {
    meta_text(text, &deployment.metadata, now);
    let status = &deployment.status;
    text.field(0, "Selector", deployment.spec.selector.to_string());
    text.field(
        0,
        "Replicas",
        format!(
            "{} desired | {} updated | {} total | {} available | {} unavailable",
            deployment.spec.replicas, status.updated_replicas, status.replicas, status.available_replicas, status.unavailable_replicas
        ),
    );
    text.field(0, "StrategyType", &deployment.spec.strategy.type_);
    text.field(0, "MinReadySeconds", deployment.spec.min_ready_seconds.to_string());
    if let Some(rolling) = &deployment.spec.strategy.rolling_update {
        let words = |v: &Option<IntOrString>| v.as_ref().map(IntOrString::to_string).unwrap_or_default();
        text.field(
            0,
            "RollingUpdateStrategy",
            format!("{} max unavailable, {} max surge", words(&rolling.max_unavailable), words(&rolling.max_surge)),
        );
    }
    template_text(text, &deployment.spec.template);
    conditions_text(text, &status.conditions, now);
    if new.is_some() || !old.is_empty() {
        let sets = |sets: &[&ReplicaSet]| {
            sets.iter()
                .map(|rs| format!("{} ({}/{} replicas created)", rs.metadata.name, rs.status.replicas, rs.spec.replicas))
                .collect::<Vec<_>>()
                .join(", ")
        };
        text.field(0, "OldReplicaSets", sets(old));
        text.field(0, "NewReplicaSet", sets(new.as_slice()));
    }
    pods_text(text, pods, now);
}

/// A pod template's labels, annotations, spec and containers, as `describe` and `rollout
/// history --revision` show it.
pub(super) fn template_text(text: &mut Text, template: &PodTemplateSpec) {
    text.heading(0, "Pod Template");
    text.field(2, "Labels", labels_text(&template.metadata.labels));
    if !template.metadata.annotations.is_empty() {
        text.field(2, "Annotations", labels_text(&template.metadata.annotations));
    }
    spec_text(text, 2, &template.spec);
    text.heading(2, "Containers");
    for container in &template.spec.containers {
        text.heading(4, &container.name);
        container_text(text, 6, container);
    }
}

fn replicaset_text(text: &mut Text, rs: &ReplicaSet, pods: &[Object], now: Time) {
    meta_text(text, &rs.metadata, now);
    let status = &rs.status;
    text.field(0, "Selector", rs.spec.selector.to_string());
    text.field(0, "Replicas", format!("{} current / {} desired", status.replicas, rs.spec.replicas));
    template_text(text, &rs.spec.template);
    conditions_text(text, &status.conditions, now);
    pods_text(text, pods, now);
}

fn pods_text(text: &mut Text, pods: &[Object], now: Time) {
    if pods.is_empty() {
        text.field(0, "Pods", "");
        return;
    }
    text.heading(0, "Pods");
    let context =
        view::RowContext { now, wide: false, all_namespaces: false, node_usage: None, nodes: shared::readiness::NodeJudge::default() };
    text.table(2, &view::table(Kind::Pod, pods, &context));
}

fn service_text(text: &mut Text, service: &Service, now: Time) {
    meta_text(text, &service.metadata, now);
    text.field(0, "Type", if service.spec.type_.is_empty() { "ClusterIP" } else { &service.spec.type_ });
    text.field(0, "Selector", labels_text(&service.spec.selector));
    text.field(0, "IP", &service.spec.cluster_ip);
    // As kubectl: each port's name (or <unset>), port, target port and node port.
    for port in &service.spec.ports {
        let (name, protocol) = (if port.name.is_empty() { "<unset>" } else { &port.name }, port.protocol_name());
        text.field(0, "Port", format!("{name}  {}/{protocol}", port.port));
        text.field(0, "TargetPort", format!("{}/{protocol}", port.target_port));
        if port.node_port != 0 {
            text.field(0, "NodePort", format!("{name}  {}/{protocol}", port.node_port));
        }
    }
    let endpoints: Vec<String> = service
        .status
        .endpoints
        .iter()
        .map(|e| {
            let node = if e.node_name.is_empty() { String::new() } else { format!(" on {}", e.node_name) };
            format!("{} (pod/{}{node})", e.ip, e.pod)
        })
        .collect();
    text.field(0, "Endpoints", endpoints.join("\n"));
}

fn node_text(text: &mut Text, node: &Node, pods: &[Object], now: Time, nodes: &shared::readiness::NodeJudge) {
    meta_text(text, &node.metadata, now);
    let status = &node.status;
    text.field(0, "Status", nodes.status(node, now));
    text.field(0, "Address", &status.address);
    text.field(0, "Agent", &status.agent_endpoint);
    text.field(0, "Last Heartbeat", when(now, status.last_heartbeat));
    let taints: Vec<String> = status
        .taints
        .iter()
        .map(|t| if t.value.is_empty() { format!("{}:{}", t.key, t.effect) } else { format!("{}={}:{}", t.key, t.value, t.effect) })
        .collect();
    text.field(0, "Taints", taints.join("\n"));
    conditions_text(text, &status.conditions, now);
    let resources =
        |r: shared::model::NodeResources| format!("cpu {}, memory {}, pods {}", format_cpu(r.cpu), format_memory(r.memory), r.pods);
    text.field(0, "Capacity", resources(status.capacity));
    text.field(0, "Allocatable", resources(status.allocatable));
    let info = &status.node_info;
    let runtime = match (info.simulated, info.runtime.as_str(), info.runtime_version.as_str()) {
        (true, _, _) => "simulated".to_string(),
        (false, runtime, "") => runtime.to_string(),
        (false, runtime, version) => format!("{runtime} {version}"),
    };
    text.field(0, "Runtime", runtime);
    if !info.pod_network.is_empty() {
        text.field(0, "Pod Network", &info.pod_network);
    }
    text.field(0, "Agent Version", &info.agent_version);
    if !info.os.is_empty() || !info.arch.is_empty() {
        text.field(0, "Platform", format!("{}/{}", info.os, info.arch));
    }

    let on_node: Vec<Object> =
        pods.iter().filter(|o| matches!(o, Object::Pod(p) if p.spec.node_name == node.metadata.name)).cloned().collect();
    let usage = requested_by_node(on_node.iter().filter_map(Pod::from_object)).remove(&node.metadata.name).unwrap_or_default();
    let percent = |used: i64, total: i64| if total > 0 { format!(" ({}%)", usage::percent(used, total)) } else { String::new() };
    text.field(
        0,
        "Requested",
        format!(
            "cpu {}{}, memory {}{}, pods {} of {}",
            format_cpu(usage.cpu),
            percent(usage.cpu, status.allocatable.cpu),
            format_memory(usage.memory),
            percent(usage.memory, status.allocatable.memory),
            usage.pods,
            status.allocatable.pods
        ),
    );
    if on_node.is_empty() {
        text.field(0, "Pods", "");
        return;
    }
    text.heading(0, "Pods");
    let context = view::RowContext { now, wide: false, all_namespaces: true, node_usage: None, nodes: nodes.clone() };
    text.table(2, &view::table(Kind::Pod, &on_node, &context));
}

fn namespace_text(text: &mut Text, namespace: &Namespace, now: Time) {
    meta_text(text, &namespace.metadata, now);
    text.field(0, "Status", if namespace.status.phase.is_empty() { "Active" } else { &namespace.status.phase });
}

fn lease_text(text: &mut Text, lease: &Lease, now: Time) {
    meta_text(text, &lease.metadata, now);
    text.field(0, "Holder", &lease.spec.holder_identity);
    text.field(0, "Duration", format!("{}s", lease.spec.lease_duration_seconds));
    text.field(0, "Renewed", when(now, lease.spec.renew_time));
}

/// As `kubectl describe configmap`: each text value under its key, binary values by size.
fn config_map_text(text: &mut Text, map: &ConfigMap, now: Time) {
    meta_text(text, &map.metadata, now);
    text.line(0, "");
    text.line(0, "Data");
    text.line(0, "====");
    for (key, value) in &map.data {
        text.line(0, &format!("{key}:"));
        text.line(0, "----");
        text.0.push_str(value);
        text.line(0, "");
        text.line(0, "");
    }
    text.line(0, "");
    text.line(0, "BinaryData");
    text.line(0, "====");
    for (key, value) in &map.binary_data {
        text.line(0, &format!("{key}: {} bytes", value.len()));
    }
    text.line(0, "");
}

/// As `kubectl describe secret`: each key with its size, never its value.
fn secret_text(text: &mut Text, secret: &Secret, now: Time) {
    meta_text(text, &secret.metadata, now);
    text.line(0, "");
    text.field(0, "Type", &secret.type_);
    text.line(0, "");
    text.line(0, "Data");
    text.line(0, "====");
    for (key, value) in &secret.data {
        text.line(0, &format!("{key}:  {} bytes", value.len()));
    }
    text.line(0, "");
}

fn event_text(text: &mut Text, event: &Event, now: Time) {
    meta_text(text, &event.metadata, now);
    text.field(0, "Type", &event.type_);
    text.field(0, "Reason", &event.reason);
    text.field(0, "Object", view::event_object(event));
    text.field(0, "Message", &event.message);
    text.field(0, "Source", &event.source);
    text.field(0, "Count", event.count.to_string());
    text.field(0, "First Seen", when(now, event.first_timestamp));
    text.field(0, "Last Seen", when(now, event.last_timestamp));
}

fn events_text(text: &mut Text, events: &[Event], now: Time) {
    if events.is_empty() {
        text.field(0, "Events", "");
        return;
    }
    text.heading(0, "Events");
    let mut table = Table::new(["LAST SEEN", "TYPE", "REASON", "FROM", "MESSAGE"]);
    for event in events {
        let mut seen = age(now, last_seen(event));
        if event.count > 1 {
            seen.push_str(&format!(" (x{})", event.count));
        }
        table.push(vec![seen, event.type_.clone(), event.reason.clone(), event.source.clone(), event.message.clone()]);
    }
    text.table(2, &table);
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, TimeZone, Utc};
    use shared::model::ObjectMeta;
    use shared::scheduler::{FilterVerdict, NodeExplanation, QueueState, QueueStatus, ScoreEntry};

    use super::*;

    fn now() -> Time {
        Utc.with_ymd_and_hms(2025, 3, 1, 10, 0, 0).unwrap()
    }

    #[test]
    fn a_secret_hides_what_kubectl_apply_recorded_of_it_as_kubectl_does() {
        let mut secret = Secret { metadata: ObjectMeta::named("default", "db"), ..Default::default() };
        let annotations = &mut secret.metadata.annotations;
        annotations.insert(shared::model::KUBECTL_LAST_APPLIED.into(), r#"{"stringData":{"password":"hunter2"}}"#.into());
        annotations.insert(LAST_APPLIED.into(), "hunter2".into());
        annotations.insert("team".into(), "db".into());
        secret.data.insert("password".into(), b"hunter2".to_vec());
        let mut text = Text::default();
        secret_text(&mut text, &secret, now());
        assert!(!text.0.contains("hunter2") && !text.0.contains("last-applied"), "{}", text.0);
        assert!(text.0.contains("Annotations:    team: db\n") && text.0.contains("password:  7 bytes"), "{}", text.0);
    }

    #[test]
    fn a_service_shows_its_cluster_ip_and_each_ports_node_port_as_kubectl_does() {
        let mut service = Service { metadata: ObjectMeta::named("default", "web"), ..Default::default() };
        service.spec.type_ = "NodePort".into();
        service.spec.cluster_ip = "10.96.0.10".into();
        let port = shared::model::ServicePort { port: 80, target_port: 8080, node_port: 30080, ..Default::default() };
        service.spec.ports.push(port);
        let mut text = Text::default();
        service_text(&mut text, &service, now());
        let expected =
            "IP:             10.96.0.10\nPort:           <unset>  80/TCP\nTargetPort:     8080/TCP\nNodePort:       <unset>  30080/TCP\n";
        assert!(text.0.contains(expected), "{}", text.0);
    }

    #[test]
    fn fields_align_and_empty_values_read_none() {
        let mut text = Text::default();
        text.field(0, "Name", "web");
        text.field(0, "Labels", "app=web\ntier=fe");
        text.field(2, "Image", "");
        text.field(4, "Restart Count", "0");
        text.field(0, "A Very Long Label", "x");
        assert_eq!(
            text.0,
            "Name:           web\nLabels:         app=web\n                tier=fe\n  Image:            <none>\n    \
             Restart Count:  0\nA Very Long Label: x\n"
        );
    }

    #[test]
    fn a_node_says_how_its_pods_are_networked_unless_it_is_simulated() {
        let mut node = Node { metadata: ObjectMeta::named("", "node-1"), ..Default::default() };
        node.status.node_info.runtime = "docker".into();
        node.status.node_info.pod_network = "cni".into();
        let mut text = Text::default();
        node_text(&mut text, &node, &[], now(), &shared::readiness::NodeJudge::default());
        assert!(text.0.contains("Runtime:        docker\nPod Network:    cni\n"), "{}", text.0);
        node.status.node_info = shared::model::NodeInfo { runtime: "simulated".into(), simulated: true, ..Default::default() };
        let mut text = Text::default();
        node_text(&mut text, &node, &[], now(), &shared::readiness::NodeJudge::default());
        assert!(!text.0.contains("Pod Network"), "{}", text.0);
    }

    #[test]
    fn the_scheduling_section_says_why_each_node_won_or_lost() {
        let pod = Pod { metadata: ObjectMeta::named("default", "web"), ..Default::default() };
        let passed =
            |name: &str| FilterVerdict { filter: name.into(), verdict: Verdict::Passed, reason: String::new(), detail: String::new() };
        let explanation = Explanation {
            pod: "default/web".into(),
            profile: "default".into(),
            total_nodes: 2,
            nodes_evaluated: 2,
            feasible_nodes: 1,
            nodes_to_find: 2,
            start_index: 0,
            selected: Some("node-1".into()),
            message: "Successfully assigned default/web to node-1".into(),
            nodes: vec![
                NodeExplanation {
                    node: "node-1".into(),
                    feasible: true,
                    filters: vec![passed("NodeResourcesFit")],
                    scores: vec![ScoreEntry { plugin: "LeastAllocated".into(), raw: 80, weight: 1, weighted: 80, detail: String::new() }],
                    total: Some(80),
                    selected: true,
                },
                NodeExplanation {
                    node: "node-2".into(),
                    feasible: false,
                    filters: vec![FilterVerdict {
                        filter: "NodeResourcesFit".into(),
                        verdict: Verdict::Failed,
                        reason: "Insufficient memory".into(),
                        detail: "the pod requests memory 64Mi; 1Gi of 1Gi already requested, 0 free".into(),
                    }],
                    scores: vec![],
                    total: None,
                    selected: false,
                },
            ],
            queue: None,
        };
        let mut text = Text::default();
        scheduling_text(&mut text, &pod, Some(&explanation));
        assert_eq!(
            text.0,
            "Scheduling:\n  Successfully assigned default/web to node-1\n  profile \"default\": 2 node(s), 2 evaluated, 1 feasible\n  \
             NODE     RESULT         SCORE   WHY\n  \
             node-1   selected       80      LeastAllocated 80x1\n  \
             node-2   filtered out   -       NodeResourcesFit: Insufficient memory (the pod requests memory 64Mi; 1Gi of 1Gi already requested, 0 free)\n"
        );

        let mut waiting = explanation.clone();
        waiting.queue = Some(QueueStatus {
            state: QueueState::Unschedulable,
            attempts: 2,
            backoff_ms: 2000,
            retry_in_ms: 0,
            flush_in_ms: Some(290_000),
            requeued_by: Some("node node-2 was uncordoned".into()),
        });
        let mut text = Text::default();
        scheduling_text(&mut text, &pod, Some(&waiting));
        assert!(
            text.0.contains(
                "\n  queue: unschedulable after 2 failed attempts, waiting for a cluster change or the flush in 4m50s; \
                 requeued because node node-2 was uncordoned\n"
            ),
            "{}",
            text.0
        );

        let mut pending = Text::default();
        scheduling_text(&mut pending, &pod, None);
        assert_eq!(pending.0, "Scheduling:\n  no decision yet: the scheduler has not looked at this pod\n");
    }

    #[test]
    fn a_variable_from_a_source_says_where_it_comes_from_not_its_value() {
        use shared::model::{EnvSourceRef, EnvVarSource, FieldSelector, KeySelector};
        let from = |source: EnvVarSource| EnvVar { name: "V".into(), value: String::new(), value_from: Some(source) };
        let key = KeySelector { name: "db".into(), key: "password".into(), optional: Some(true) };
        let container = Container {
            env: vec![
                EnvVar::literal("A", "1"),
                from(EnvVarSource { secret_key_ref: Some(key.clone()), ..Default::default() }),
                from(EnvVarSource { config_map_key_ref: Some(key), ..Default::default() }),
                from(EnvVarSource {
                    field_ref: Some(FieldSelector { field_path: "status.podIP".into(), ..Default::default() }),
                    ..Default::default()
                }),
            ],
            env_from: vec![EnvFromSource {
                prefix: "APP_".into(),
                config_map_ref: Some(EnvSourceRef { name: "settings".into(), optional: None }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut text = Text::default();
        container_text(&mut text, 0, &container);
        let env = text.0.split_once("Environment Variables from").map(|(_, tail)| tail).unwrap_or_default();
        assert_eq!(
            env,
            ": settings  ConfigMap with prefix 'APP_'  Optional: false\nEnvironment:    A=1\n                \
             V: <set to the key 'password' in secret 'db'>  Optional: true\n                \
             V: <set to the key 'password' of config map 'db'>  Optional: true\n                V: (v1:status.podIP)\n",
            "{}",
            text.0
        );
    }

    #[test]
    fn container_states_in_words() {
        let started = now() - Duration::seconds(30);
        assert_eq!(
            state_text(&ContainerState::Running { started_at: Some(started) }, now()),
            "Running since 2025-03-01 09:59:30 UTC (30s ago)"
        );
        assert_eq!(
            state_text(&ContainerState::Waiting { reason: "ErrImagePull".into(), message: "no such image".into() }, now()),
            "Waiting (ErrImagePull: no such image)"
        );
        let terminated = ContainerState::Terminated {
            exit_code: 1,
            reason: "Error".into(),
            message: String::new(),
            started_at: None,
            finished_at: None,
        };
        assert_eq!(state_text(&terminated, now()), "Terminated (Error, exit code 1)");
    }

    #[test]
    fn a_pod_whose_container_never_started_shows_its_start_time_not_a_start() {
        let mut pod = Pod::default();
        pod.status.start_time = Some(now() - Duration::seconds(8));
        let waiting = ContainerState::Waiting { reason: "ContainerCreating".into(), message: String::new() };
        pod.spec.containers.push(Container { name: "main".into(), ..Container::default() });
        pod.status.container_statuses.push(shared::model::ContainerStatus { name: "main".into(), state: waiting, ..Default::default() });
        let mut text = Text::default();
        pod_text(&mut text, &pod, now());
        assert!(text.0.contains("Start Time:"), "{}", text.0);
        assert!(!text.0.lines().any(|l| l.trim_start().starts_with("Started")), "{}", text.0);
        assert!(text.0.contains("Waiting (ContainerCreating)"), "{}", text.0);
    }

    #[test]
    fn a_container_shows_its_probes_and_whether_it_started() {
        let mut pod = Pod::default();
        let http =
            shared::model::HttpGetAction { path: "/healthz".into(), port: shared::model::ProbePort::Number(8080), ..Default::default() };
        let probe = shared::model::Probe { http_get: Some(http), ..Default::default() };
        pod.spec.containers.push(Container { name: "web".into(), readiness_probe: Some(probe), ..Container::default() });
        let running = ContainerState::Running { started_at: None };
        pod.status.container_statuses.push(shared::model::ContainerStatus { name: "web".into(), state: running, ..Default::default() });
        let mut text = Text::default();
        pod_text(&mut text, &pod, now());
        assert!(text.0.contains("Readiness:") && text.0.contains("http-get http://:8080/healthz delay=0s"), "{}", text.0);
        assert!(text.0.lines().any(|l| l.trim_start().starts_with("Started:") && l.trim_end().ends_with("False")), "{}", text.0);
    }
}
