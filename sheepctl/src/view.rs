//! How each kind reads in a table, and the one-line state of a pod or deployment that
//! `apply --wait`, `wait` and `describe` use. The words themselves (AGE, STATUS, the pending
//! reason, the node status) are `shared::words`, the dashboard's too.

use std::collections::BTreeMap;

use shared::model::{Deployment, Event, Kind, Lease, Namespace, Node, Object, Pod, PodPhase, ReplicaSet, Service, Time};
use shared::quantity::{format_cpu, format_memory};
use shared::readiness::NodeJudge;
use shared::usage::Requested;
use shared::words::{age, first_seen, last_seen, pending_reason, service_ports};

use crate::settings::kind_word;
use crate::table::Table;

/// Everything a row may need besides the object itself.
#[derive(Debug, Clone)]
pub struct RowContext {
    pub now: Time,
    pub wide: bool,
    pub all_namespaces: bool,
    /// For the node table; `None` leaves the usage columns out.
    pub node_usage: Option<BTreeMap<String, Requested>>,
    /// The server's grace and the leases, for the node STATUS.
    pub nodes: NodeJudge,
}

pub fn headers(kind: Kind, context: &RowContext) -> Vec<&'static str> {
    let mut headers: Vec<&'static str> = Vec::new();
    if context.all_namespaces && kind.namespaced() {
        headers.push("NAMESPACE");
    }
    headers.extend_from_slice(match kind {
        Kind::Pod => &["NAME", "READY", "STATUS", "RESTARTS", "NODE", "AGE"],
        Kind::Deployment => &["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        Kind::ReplicaSet => &["NAME", "DESIRED", "CURRENT", "READY", "AGE"],
        Kind::Service => &["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"],
        Kind::Node if context.node_usage.is_some() => &["NAME", "STATUS", "PODS", "CPU", "MEMORY", "AGE"],
        Kind::Node => &["NAME", "STATUS", "CPU", "MEMORY", "AGE"],
        Kind::Event => &["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        Kind::Namespace => &["NAME", "STATUS", "AGE"],
        Kind::Lease => &["NAME", "HOLDER", "RENEWED", "AGE"],
        Kind::ConfigMap => &["NAME", "DATA", "AGE"],
        Kind::Secret => &["NAME", "TYPE", "DATA", "AGE"],
    });
    if context.wide {
        headers.extend_from_slice(match kind {
            Kind::Pod => &["IP", "REASON"],
            Kind::Deployment | Kind::ReplicaSet => &["IMAGES", "SELECTOR"],
            Kind::Service => &["SELECTOR"],
            Kind::Node => &["RUNTIME", "ADDRESS", "TAINTS"],
            Kind::Event => &["SOURCE"],
            Kind::Namespace | Kind::Lease | Kind::ConfigMap | Kind::Secret => &[],
        });
    }
    headers
}

pub fn row(object: &Object, context: &RowContext) -> Vec<String> {
    let mut cells = Vec::new();
    if context.all_namespaces && object.kind().namespaced() {
        cells.push(object.metadata().namespace.clone());
    }
    match object {
        Object::Pod(pod) => pod_row(pod, context, &mut cells),
        Object::Deployment(deployment) => deployment_row(deployment, context, &mut cells),
        Object::ReplicaSet(rs) => replicaset_row(rs, context, &mut cells),
        Object::Service(service) => service_row(service, context, &mut cells),
        Object::Node(node) => node_row(node, context, &mut cells),
        Object::Event(event) => event_row(event, context, &mut cells),
        Object::Namespace(namespace) => namespace_row(namespace, context, &mut cells),
        Object::Lease(lease) => lease_row(lease, context, &mut cells),
        Object::ConfigMap(map) => {
            cells.extend([map.metadata.name.clone(), map.len().to_string(), age(context.now, map.metadata.created_at)])
        }
        Object::Secret(secret) => cells.extend([
            secret.metadata.name.clone(),
            secret.type_.clone(),
            secret.data.len().to_string(),
            age(context.now, secret.metadata.created_at),
        ]),
    }
    cells
}

pub fn table(kind: Kind, objects: &[Object], context: &RowContext) -> Table {
    let mut table = Table::new(headers(kind, context));
    for object in objects {
        table.push(row(object, context));
    }
    table
}

fn or_none(text: &str) -> String {
    if text.is_empty() { "<none>".to_string() } else { text.to_string() }
}

fn pod_row(pod: &Pod, context: &RowContext, cells: &mut Vec<String>) {
    let (ready, total) = pod.ready_count();
    cells.extend([
        pod.metadata.name.clone(),
        format!("{ready}/{total}"),
        pod.display_status(),
        pod.restart_count().to_string(),
        or_none(&pod.spec.node_name),
        age(context.now, pod.metadata.created_at),
    ]);
    if context.wide {
        cells.push(or_none(&pod.status.pod_ip));
        cells.push(or_none(&pending_reason(pod).map(|r| r.to_string()).unwrap_or_default()));
    }
}

/// The state of a pod in a few words: `Pending (waiting for the scheduler)`,
/// `Running on node-1`, `Failed: Error`.
pub fn pod_state(pod: &Pod) -> String {
    if let Some(reason) = pending_reason(pod) {
        return format!("Pending ({reason})");
    }
    let status = pod.display_status();
    match pod.status.phase {
        PodPhase::Running if status == "Running" => format!("Running on {}", pod.spec.node_name),
        PodPhase::Running => format!("Running on {} ({status})", pod.spec.node_name),
        phase if status != phase.as_str() => format!("{phase} ({status})"),
        phase => phase.to_string(),
    }
}

/// `2/3 ready, 2 available`.
pub fn deployment_state(deployment: &Deployment) -> String {
    let status = &deployment.status;
    format!("{}/{} ready, {} available", status.ready_replicas, deployment.spec.replicas, status.available_replicas)
}

fn deployment_row(deployment: &Deployment, context: &RowContext, cells: &mut Vec<String>) {
    let status = &deployment.status;
    cells.extend([
        deployment.metadata.name.clone(),
        format!("{}/{}", status.ready_replicas, deployment.spec.replicas),
        status.updated_replicas.to_string(),
        status.available_replicas.to_string(),
        age(context.now, deployment.metadata.created_at),
    ]);
    if context.wide {
        let images: Vec<&str> = deployment.spec.template.spec.containers.iter().map(|c| c.image.as_str()).collect();
        cells.push(or_none(&images.join(",")));
        cells.push(or_none(&deployment.spec.selector.to_string()));
    }
}

fn replicaset_row(rs: &ReplicaSet, context: &RowContext, cells: &mut Vec<String>) {
    cells.extend([
        rs.metadata.name.clone(),
        rs.spec.replicas.to_string(),
        rs.status.replicas.to_string(),
        rs.status.ready_replicas.to_string(),
        age(context.now, rs.metadata.created_at),
    ]);
    if context.wide {
        let images: Vec<&str> = rs.spec.template.spec.containers.iter().map(|c| c.image.as_str()).collect();
        cells.push(or_none(&images.join(",")));
        cells.push(or_none(&rs.spec.selector.to_string()));
    }
}

fn service_row(service: &Service, context: &RowContext, cells: &mut Vec<String>) {
    let type_ = if service.spec.type_.is_empty() { "ClusterIP" } else { &service.spec.type_ };
    cells.extend([
        service.metadata.name.clone(),
        type_.to_string(),
        or_none(&service.spec.cluster_ip),
        "<none>".to_string(),
        service_ports(&service.spec.ports),
        age(context.now, service.metadata.created_at),
    ]);
    if context.wide {
        let selector: Vec<String> = service.spec.selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
        cells.push(or_none(&selector.join(",")));
    }
}

fn node_row(node: &Node, context: &RowContext, cells: &mut Vec<String>) {
    let allocatable = node.status.allocatable;
    cells.push(node.metadata.name.clone());
    cells.push(context.nodes.status(node, context.now));
    match &context.node_usage {
        Some(usage) => {
            let used = usage.get(&node.metadata.name).copied().unwrap_or_default();
            cells.push(format!("{}/{}", used.pods, allocatable.pods));
            cells.push(format!("{}/{}", format_cpu(used.cpu), format_cpu(allocatable.cpu)));
            cells.push(format!("{}/{}", format_memory(used.memory), format_memory(allocatable.memory)));
        }
        None => {
            cells.push(format_cpu(allocatable.cpu));
            cells.push(format_memory(allocatable.memory));
        }
    }
    cells.push(age(context.now, node.metadata.created_at));
    if context.wide {
        let info = &node.status.node_info;
        let runtime = if info.simulated { "simulated".to_string() } else { info.runtime.clone() };
        let taints: Vec<String> = node
            .status
            .taints
            .iter()
            .map(|t| if t.value.is_empty() { format!("{}:{}", t.key, t.effect) } else { format!("{}={}:{}", t.key, t.value, t.effect) })
            .collect();
        cells.push(or_none(&runtime));
        cells.push(or_none(&node.status.address));
        cells.push(or_none(&taints.join(",")));
    }
}

/// `kind/name` of the object an event is about, in lower case as in `pod/web-server`.
pub fn event_object(event: &Event) -> String {
    match Kind::from_alias(&event.involved_object.kind) {
        Some(kind) => format!("{}/{}", kind_word(kind), event.involved_object.name),
        None => event.involved_object.short(),
    }
}

fn event_row(event: &Event, context: &RowContext, cells: &mut Vec<String>) {
    let mut seen = age(context.now, last_seen(event));
    if event.count > 1 {
        seen.push_str(&format!(" (x{})", event.count));
    }
    cells.extend([seen, event.type_.clone(), event.reason.clone(), event_object(event), event.message.clone()]);
    if context.wide {
        cells.push(or_none(&event.source));
    }
}

fn namespace_row(namespace: &Namespace, context: &RowContext, cells: &mut Vec<String>) {
    let phase = if namespace.status.phase.is_empty() { "Active" } else { &namespace.status.phase };
    cells.extend([namespace.metadata.name.clone(), phase.to_string(), age(context.now, namespace.metadata.created_at)]);
}

/// RENEWED is how long ago, as AGE is.
fn lease_row(lease: &Lease, context: &RowContext, cells: &mut Vec<String>) {
    cells.extend([
        lease.metadata.name.clone(),
        or_none(&lease.spec.holder_identity),
        age(context.now, lease.spec.renew_time),
        age(context.now, lease.metadata.created_at),
    ]);
}

/// Oldest first by when each event first happened, as the story of a pod reads:
/// Created → Scheduled → Pulled → Started. Reporters race to post their events, so the
/// time an event happened tells the story better than the time the server stored it.
pub fn sort_events(events: &mut [Object]) {
    events.sort_by_key(|o| match o {
        Object::Event(e) => (first_seen(e), e.metadata.resource_version),
        _ => (None, 0),
    });
}

/// `pod/web-server`.
pub fn object_name(object: &Object) -> String {
    format!("{}/{}", kind_word(object.kind()), object.metadata().name)
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, TimeZone, Utc};
    use shared::model::{Condition, ContainerState, ContainerStatus, NodeResources, ObjectMeta, ServicePort};

    use super::*;

    fn now() -> Time {
        Utc.with_ymd_and_hms(2025, 3, 1, 10, 0, 0).unwrap()
    }

    fn pod(name: &str) -> Pod {
        let mut pod = Pod { kind: "Pod".into(), metadata: ObjectMeta::named("default", name), ..Default::default() };
        pod.metadata.created_at = Some(now() - Duration::seconds(42));
        pod.spec.containers.push(Default::default());
        pod
    }

    fn context(wide: bool) -> RowContext {
        RowContext { now: now(), wide, all_namespaces: false, node_usage: None, nodes: NodeJudge::default() }
    }

    #[test]
    fn pod_states_wrap_the_pending_reason_or_name_the_node() {
        let waiting = pod("a");
        assert_eq!(pod_state(&waiting), "Pending (waiting for the scheduler)");

        let mut bound = pod("c");
        bound.spec.node_name = "node-1".into();
        assert_eq!(pod_state(&bound), "Pending (scheduled to node-1, waiting for its agent)");
        bound.status.container_statuses.push(ContainerStatus {
            state: ContainerState::Waiting { reason: "ErrImagePull".into(), message: String::new() },
            ..Default::default()
        });
        assert_eq!(pod_state(&bound), "Pending (ErrImagePull on node-1)");

        let mut running = pod("d");
        running.spec.node_name = "node-2".into();
        running.status.phase = PodPhase::Running;
        assert_eq!(pod_state(&running), "Running on node-2");
    }

    #[test]
    fn pod_rows_have_the_columns_users_know() {
        let mut running = pod("web-server");
        running.spec.node_name = "node-1".into();
        running.status.phase = PodPhase::Running;
        running.status.pod_ip = "10.20.0.2".into();
        running.status.container_statuses.push(ContainerStatus { ready: true, restart_count: 2, ..Default::default() });
        let pending = pod("stuck");
        let objects = vec![Object::Pod(running), Object::Pod(pending)];

        assert_eq!(
            table(Kind::Pod, &objects, &context(false)).render(),
            "NAME         READY   STATUS    RESTARTS   NODE     AGE\n\
             web-server   1/1     Running   2          node-1   42s\n\
             stuck        0/1     Pending   0          <none>   42s\n"
        );
        let wide = table(Kind::Pod, &objects, &context(true)).render();
        assert!(wide.lines().next().unwrap().ends_with("AGE   IP          REASON"), "{wide}");
        assert!(wide.contains("10.20.0.2   <none>"), "{wide}");
        assert!(wide.contains("<none>      waiting for the scheduler"), "{wide}");

        let all = RowContext { all_namespaces: true, ..context(false) };
        assert_eq!(headers(Kind::Pod, &all)[0], "NAMESPACE");
        assert_eq!(row(&objects[0], &all)[0], "default");
        assert_eq!(headers(Kind::Node, &all)[0], "NAME");
    }

    #[test]
    fn services_show_the_cluster_ip_and_the_node_ports_as_kubectl() {
        let mut service = Service { metadata: ObjectMeta::named("default", "web"), ..Default::default() };
        service.spec.type_ = "NodePort".into();
        service.spec.cluster_ip = "10.96.0.10".into();
        service.spec.ports.push(ServicePort {
            port: 80,
            target_port: 8080,
            node_port: 30080,
            protocol: "tcp".into(),
            ..Default::default()
        });
        service.spec.ports.push(ServicePort { port: 53, target_port: 53, protocol: "UDP".into(), ..Default::default() });
        let context = context(false);
        assert_eq!(headers(Kind::Service, &context), ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]);
        assert_eq!(row(&Object::Service(service), &context)[..5], ["web", "NodePort", "10.96.0.10", "<none>", "80:30080/TCP,53/UDP"]);
    }

    #[test]
    fn nodes_show_readiness_cordon_and_usage() {
        let mut node = Node { metadata: ObjectMeta::named("", "node-1"), ..Default::default() };
        node.status.conditions.push(Condition { type_: "Ready".into(), status: "True".into(), ..Default::default() });
        node.status.last_heartbeat = Some(now() - Duration::seconds(5));
        node.status.unschedulable = true;
        node.status.allocatable = NodeResources { cpu: 2000, memory: 1 << 30, pods: 110 };

        let mut p = pod("a");
        p.spec.node_name = "node-1".into();
        p.spec.containers[0].resources.cpu = 250;
        p.spec.containers[0].resources.memory = 64 << 20;
        let usage = shared::usage::requested_by_node([&p]);
        let context = RowContext { node_usage: Some(usage), ..context(false) };
        assert_eq!(
            row(&Object::Node(node), &context),
            vec!["node-1", "Ready,SchedulingDisabled", "1/110", "250m/2", "64Mi/1Gi", "<unknown>"]
        );
    }

    #[test]
    fn events_sort_oldest_first_and_show_repeats() {
        let event = |reason: &str, seconds_ago: i64, count: u32| {
            Object::Event(Event {
                metadata: ObjectMeta::named("default", reason),
                type_: "Normal".into(),
                reason: reason.into(),
                message: format!("{reason} it"),
                involved_object: shared::model::ObjectReference { kind: "Pod".into(), name: "web-server".into(), ..Default::default() },
                count,
                last_timestamp: Some(now() - Duration::seconds(seconds_ago)),
                ..Default::default()
            })
        };
        let mut events = vec![event("Started", 1, 1), event("Created", 5, 1), event("Scheduled", 4, 3)];
        sort_events(&mut events);
        // What happened first comes first, even when it was stored (or repeated) later.
        let mut raced = vec![event("Created", 3, 1), event("Pulled", 2, 1)];
        if let Object::Event(pulled) = &mut raced[1] {
            pulled.first_timestamp = Some(now() - Duration::seconds(4));
        }
        sort_events(&mut raced);
        assert_eq!(raced[0].metadata().name, "Pulled");
        let text = table(Kind::Event, &events, &context(false)).render();
        assert_eq!(
            text,
            "LAST SEEN   TYPE     REASON      OBJECT           MESSAGE\n\
             5s          Normal   Created     pod/web-server   Created it\n\
             4s (x3)     Normal   Scheduled   pod/web-server   Scheduled it\n\
             1s          Normal   Started     pod/web-server   Started it\n"
        );
    }
}
