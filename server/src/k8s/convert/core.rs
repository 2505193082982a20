//! The core group's kinds (`v1`): Pod, Node, Service, Event, Namespace, and the Endpoints
//! derived from a service, with the pod spec and containers a template shares.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use shared::model::{
    Condition, Container, ContainerPort, ContainerState, ContainerStatus, Endpoint, Event, ExecAction, HttpGetAction, HttpHeader,
    Namespace, NamespaceStatus, Node, NodeResources, ObjectReference, POD_NETWORK_ANNOTATION, Pod, PodSpec, PodStatus, Probe, ProbePort,
    ResourceRequirements, Service, ServicePort, ServiceSpec, Taint, TcpSocketAction, Toleration,
};
use shared::quantity::{exact_memory, format_cpu, parse_cpu, parse_memory};

use super::env::{env_from_in, env_from_out, env_in, env_out};
use super::meta::{kubernetes_condition, list, map, meta_in, meta_out, some, time, time_in};
use super::strict::{Cause, Convert};
use super::volumes::{mounts_in, mounts_out, volumes_in, volumes_out};
use crate::k8s::kinds::api_version_of;

fn condition_out(c: &Condition) -> core::PodCondition {
    kubernetes_condition!(core::PodCondition, c, ..Default::default())
}

fn node_condition_out(c: &Condition) -> core::NodeCondition {
    kubernetes_condition!(core::NodeCondition, c, last_heartbeat_time: c.last_heartbeat_time.map(time))
}

pub(super) fn quantities(cpu: i64, memory: i64) -> BTreeMap<String, Quantity> {
    let mut out = BTreeMap::new();
    if cpu > 0 {
        out.insert("cpu".to_string(), Quantity(format_cpu(cpu)));
    }
    if memory > 0 {
        out.insert("memory".to_string(), Quantity(exact_memory(memory)));
    }
    out
}

/// Shepherd holds one amount per container: the scheduler reserves it and the runtime caps
/// the container at it. So it is both the request and the limit.
fn resources_out(r: &ResourceRequirements) -> Option<core::ResourceRequirements> {
    let amounts = quantities(r.cpu, r.memory);
    (!amounts.is_empty()).then(|| core::ResourceRequirements {
        requests: Some(amounts.clone()),
        limits: Some(amounts),
        ..Default::default()
    })
}

fn amounts_in(amounts: &BTreeMap<String, Quantity>, path: &str, errors: &mut Vec<Cause>) -> ResourceRequirements {
    let mut out = ResourceRequirements::default();
    for (name, Quantity(text)) in amounts {
        let parsed = match name.as_str() {
            "cpu" => parse_cpu(text).map(|v| out.cpu = v),
            "memory" => parse_memory(text).map(|v| out.memory = v),
            _ => continue,
        };
        if let Err(message) = parsed {
            errors.push(Cause::invalid(format!("{path}.{name}"), message));
        }
    }
    out
}

fn resources_in(r: Option<core::ResourceRequirements>, path: &str, errors: &mut Vec<Cause>) -> ResourceRequirements {
    let Some(r) = r else { return ResourceRequirements::default() };
    let requests = r.requests.map(|q| amounts_in(&q, &format!("{path}.requests"), errors));
    let limits = r.limits.map(|q| amounts_in(&q, &format!("{path}.limits"), errors));
    match (requests, limits) {
        (Some(requests), Some(limits)) => {
            let pick = |request: i64, limit: i64, name: &str, errors: &mut Vec<Cause>| match (request, limit) {
                (r, 0) => r,
                (0, l) => l,
                (r, l) if r == l => r,
                _ => {
                    errors.push(Cause::unsupported(
                        format!("{path}.limits.{name}"),
                        "a limit other than the request: Shepherd holds one amount per container, used as both request and limit; make the limit equal to the request or leave one out",
                    ));
                    request
                }
            };
            ResourceRequirements {
                cpu: pick(requests.cpu, limits.cpu, "cpu", errors),
                memory: pick(requests.memory, limits.memory, "memory", errors),
            }
        }
        (Some(one), None) | (None, Some(one)) => one,
        (None, None) => ResourceRequirements::default(),
    }
}

fn container_out(c: &Container) -> core::Container {
    core::Container {
        name: c.name.clone(),
        image: some(&c.image),
        command: list(c.command.clone()),
        args: list(c.args.clone()),
        env: env_out(&c.env),
        env_from: env_from_out(&c.env_from),
        ports: list(
            c.ports
                .iter()
                .map(|p| core::ContainerPort {
                    name: some(&p.name),
                    container_port: p.container_port,
                    host_port: p.host_port,
                    host_ip: some(&p.host_ip),
                    // As stored: a PUT of what a GET returned must not look like a spec change.
                    protocol: some(&p.protocol),
                })
                .collect(),
        ),
        resources: resources_out(&c.resources),
        image_pull_policy: some(&c.image_pull_policy),
        liveness_probe: c.liveness_probe.as_ref().map(probe_out),
        readiness_probe: c.readiness_probe.as_ref().map(probe_out),
        startup_probe: c.startup_probe.as_ref().map(probe_out),
        volume_mounts: mounts_out(&c.volume_mounts),
        stdin: c.stdin.then_some(true),
        stdin_once: c.stdin_once.then_some(true),
        tty: c.tty.then_some(true),
        ..Default::default()
    }
}

fn probe_port_out(port: &ProbePort) -> IntOrString {
    match port {
        ProbePort::Number(n) => IntOrString::Int(*n),
        ProbePort::Name(name) => IntOrString::String(name.clone()),
    }
}

fn probe_port_in(port: IntOrString) -> ProbePort {
    match port {
        IntOrString::Int(n) => ProbePort::Number(n),
        IntOrString::String(name) => ProbePort::Name(name),
    }
}

/// A probe as a GET shows it: with Kubernetes' defaults, as the server stores it.
fn probe_out(p: &Probe) -> core::Probe {
    let p = p.defaulted();
    core::Probe {
        exec: p.exec.as_ref().map(|e| core::ExecAction { command: Some(e.command.clone()) }),
        http_get: p.http_get.as_ref().map(|h| core::HTTPGetAction {
            path: some(&h.path),
            port: probe_port_out(&h.port),
            host: some(&h.host),
            scheme: some(&h.scheme),
            http_headers: list(h.http_headers.iter().map(|h| core::HTTPHeader { name: h.name.clone(), value: h.value.clone() }).collect()),
        }),
        tcp_socket: p.tcp_socket.as_ref().map(|t| core::TCPSocketAction { port: probe_port_out(&t.port), host: some(&t.host) }),
        initial_delay_seconds: (p.initial_delay_seconds != 0).then_some(p.initial_delay_seconds),
        timeout_seconds: Some(p.timeout_seconds),
        period_seconds: Some(p.period_seconds),
        success_threshold: Some(p.success_threshold),
        failure_threshold: Some(p.failure_threshold),
        ..Default::default()
    }
}

fn probe_in(p: core::Probe) -> Probe {
    Probe {
        exec: p.exec.map(|e| ExecAction { command: e.command.unwrap_or_default() }),
        http_get: p.http_get.map(|h| HttpGetAction {
            path: h.path.unwrap_or_default(),
            port: probe_port_in(h.port),
            host: h.host.unwrap_or_default(),
            scheme: h.scheme.unwrap_or_default(),
            http_headers: h.http_headers.unwrap_or_default().into_iter().map(|h| HttpHeader { name: h.name, value: h.value }).collect(),
        }),
        tcp_socket: p.tcp_socket.map(|t| TcpSocketAction { port: probe_port_in(t.port), host: t.host.unwrap_or_default() }),
        initial_delay_seconds: p.initial_delay_seconds.unwrap_or_default(),
        timeout_seconds: p.timeout_seconds.unwrap_or_default(),
        period_seconds: p.period_seconds.unwrap_or_default(),
        success_threshold: p.success_threshold.unwrap_or_default(),
        failure_threshold: p.failure_threshold.unwrap_or_default(),
    }
}

fn container_in(c: core::Container, path: &str, errors: &mut Vec<Cause>) -> Container {
    Container {
        name: c.name,
        image: c.image.unwrap_or_default(),
        command: c.command.unwrap_or_default(),
        args: c.args.unwrap_or_default(),
        env: env_in(c.env),
        env_from: env_from_in(c.env_from),
        ports: c
            .ports
            .unwrap_or_default()
            .into_iter()
            .map(|p| ContainerPort {
                name: p.name.unwrap_or_default(),
                container_port: p.container_port,
                host_port: p.host_port,
                host_ip: p.host_ip.unwrap_or_default(),
                protocol: p.protocol.unwrap_or_default(),
            })
            .collect(),
        resources: resources_in(c.resources, &format!("{path}.resources"), errors),
        image_pull_policy: c.image_pull_policy.unwrap_or_default(),
        liveness_probe: c.liveness_probe.map(probe_in),
        readiness_probe: c.readiness_probe.map(probe_in),
        startup_probe: c.startup_probe.map(probe_in),
        volume_mounts: mounts_in(c.volume_mounts),
        stdin: c.stdin.unwrap_or_default(),
        stdin_once: c.stdin_once.unwrap_or_default(),
        tty: c.tty.unwrap_or_default(),
    }
}

pub(super) fn pod_spec_out(s: &PodSpec) -> core::PodSpec {
    core::PodSpec {
        containers: s.containers.iter().map(container_out).collect(),
        restart_policy: some(&s.restart_policy),
        node_selector: map(&s.node_selector),
        tolerations: list(
            s.tolerations
                .iter()
                .map(|t| core::Toleration {
                    key: some(&t.key),
                    operator: some(&t.operator),
                    value: some(&t.value),
                    effect: some(&t.effect),
                    toleration_seconds: None,
                })
                .collect(),
        ),
        node_name: some(&s.node_name),
        termination_grace_period_seconds: s.termination_grace_period_seconds,
        dns_policy: some(&s.dns_policy),
        enable_service_links: s.enable_service_links,
        volumes: volumes_out(&s.volumes),
        ..Default::default()
    }
}

pub(super) fn pod_spec_in(s: core::PodSpec, path: &str, errors: &mut Vec<Cause>) -> PodSpec {
    PodSpec {
        containers: s
            .containers
            .into_iter()
            .enumerate()
            .map(|(i, c)| container_in(c, &format!("{path}.containers[{i}]"), errors))
            .collect(),
        restart_policy: s.restart_policy.unwrap_or_default(),
        node_selector: s.node_selector.unwrap_or_default(),
        tolerations: s
            .tolerations
            .unwrap_or_default()
            .into_iter()
            .map(|t| Toleration {
                key: t.key.unwrap_or_default(),
                operator: t.operator.unwrap_or_default(),
                value: t.value.unwrap_or_default(),
                effect: t.effect.unwrap_or_default(),
            })
            .collect(),
        node_name: s.node_name.unwrap_or_default(),
        termination_grace_period_seconds: s.termination_grace_period_seconds,
        dns_policy: s.dns_policy.unwrap_or_default(),
        enable_service_links: s.enable_service_links,
        volumes: volumes_in(s.volumes, path, errors),
    }
}

fn state_out(s: &ContainerState) -> core::ContainerState {
    match s {
        ContainerState::Waiting { reason, message } => core::ContainerState {
            waiting: Some(core::ContainerStateWaiting { reason: some(reason), message: some(message) }),
            ..Default::default()
        },
        ContainerState::Running { started_at } => {
            core::ContainerState { running: Some(core::ContainerStateRunning { started_at: started_at.map(time) }), ..Default::default() }
        }
        ContainerState::Terminated { exit_code, reason, message, started_at, finished_at } => core::ContainerState {
            terminated: Some(core::ContainerStateTerminated {
                exit_code: i32::try_from(*exit_code).unwrap_or(i32::MAX),
                reason: some(reason),
                message: some(message),
                started_at: started_at.map(time),
                finished_at: finished_at.map(time),
                ..Default::default()
            }),
            ..Default::default()
        },
    }
}

fn container_status_out(c: &ContainerStatus) -> core::ContainerStatus {
    core::ContainerStatus {
        name: c.name.clone(),
        state: Some(state_out(&c.state)),
        last_state: c.last_state.as_ref().map(state_out),
        ready: c.ready,
        restart_count: i32::try_from(c.restart_count).unwrap_or(i32::MAX),
        image: c.image.clone(),
        container_id: some(&c.container_id),
        started: Some(c.started),
        ..Default::default()
    }
}

fn pod_status_out(s: &PodStatus) -> core::PodStatus {
    core::PodStatus {
        phase: Some(s.phase.to_string()),
        conditions: list(s.conditions.iter().map(condition_out).collect()),
        reason: some(&s.reason),
        message: some(&s.message),
        host_ip: some(&s.host_ip),
        host_ips: some(&s.host_ip).map(|ip| vec![core::HostIP { ip }]),
        pod_ip: some(&s.pod_ip),
        pod_ips: some(&s.pod_ip).map(|ip| vec![core::PodIP { ip }]),
        start_time: s.start_time.map(time),
        container_statuses: list(s.container_statuses.iter().map(container_status_out).collect()),
        ..Default::default()
    }
}

impl Convert for Pod {
    type K8s = core::Pod;

    fn to_k8s(&self) -> core::Pod {
        core::Pod { metadata: meta_out(&self.metadata), spec: Some(pod_spec_out(&self.spec)), status: Some(pod_status_out(&self.status)) }
    }

    fn from_k8s(pod: core::Pod, errors: &mut Vec<Cause>) -> Pod {
        let metadata = meta_in(pod.metadata, errors);
        let spec = pod_spec_in(pod.spec.unwrap_or_default(), "spec", errors);
        Pod { kind: "Pod".into(), metadata, spec, status: PodStatus::default() }
    }
}

impl Convert for Node {
    type K8s = core::Node;

    fn to_k8s(&self) -> core::Node {
        let s = &self.status;
        let info = &s.node_info;
        let mut addresses = Vec::new();
        if !s.address.is_empty() {
            addresses.push(core::NodeAddress { type_: "InternalIP".into(), address: s.address.clone() });
        }
        addresses.push(core::NodeAddress { type_: "Hostname".into(), address: self.metadata.name.clone() });
        let resources = |r: &NodeResources| {
            let mut q = quantities(r.cpu, r.memory);
            q.insert("pods".into(), Quantity(r.pods.to_string()));
            q
        };
        let runtime = match (info.runtime.as_str(), info.runtime_version.as_str()) {
            ("", _) => String::new(),
            (name, "") => format!("{name}://"),
            (name, version) => format!("{name}://{version}"),
        };
        let mut metadata = meta_out(&self.metadata);
        if !info.pod_network.is_empty() {
            metadata.annotations.get_or_insert_default().insert(POD_NETWORK_ANNOTATION.into(), info.pod_network.clone());
        }
        core::Node {
            metadata,
            spec: Some(core::NodeSpec {
                unschedulable: s.unschedulable.then_some(true),
                taints: list(
                    s.taints
                        .iter()
                        .map(|t| core::Taint { key: t.key.clone(), value: some(&t.value), effect: t.effect.clone(), time_added: None })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: Some(core::NodeStatus {
                capacity: Some(resources(&s.capacity)),
                allocatable: Some(resources(&s.allocatable)),
                conditions: list(s.conditions.iter().map(node_condition_out).collect()),
                addresses: Some(addresses),
                node_info: Some(core::NodeSystemInfo {
                    architecture: info.arch.clone(),
                    operating_system: info.os.clone(),
                    os_image: if info.simulated { "simulated".into() } else { info.os.clone() },
                    container_runtime_version: runtime,
                    kubelet_version: info.agent_version.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        }
    }

    /// Only what an admin may change through the API: labels, annotations, cordon, taints.
    const SHOWN_ANNOTATIONS: &'static [&'static str] = &[POD_NETWORK_ANNOTATION];

    fn from_k8s(node: core::Node, errors: &mut Vec<Cause>) -> Node {
        let metadata = meta_in(node.metadata, errors);
        let spec = node.spec.unwrap_or_default();
        let mut out = Node { kind: "Node".into(), metadata, ..Node::default() };
        out.status.unschedulable = spec.unschedulable.unwrap_or(false);
        out.status.taints = spec
            .taints
            .unwrap_or_default()
            .into_iter()
            .map(|t| Taint { key: t.key, value: t.value.unwrap_or_default(), effect: t.effect })
            .collect();
        out
    }
}

/// The one session affinity, address family and traffic policy Shepherd's Services have.
const SESSION_AFFINITY: &str = "None";
const IP_FAMILY: &str = "IPv4";
const IP_FAMILY_POLICY: &str = "SingleStack";
const TRAFFIC_POLICY: &str = "Cluster";

impl Convert for Service {
    type K8s = core::Service;

    fn to_k8s(&self) -> core::Service {
        core::Service {
            metadata: meta_out(&self.metadata),
            spec: Some(core::ServiceSpec {
                selector: map(&self.spec.selector),
                ports: list(
                    self.spec
                        .ports
                        .iter()
                        .map(|p| core::ServicePort {
                            name: some(&p.name),
                            port: p.port,
                            target_port: Some(IntOrString::Int(p.target_port)),
                            protocol: Some(p.protocol_name()),
                            node_port: (p.node_port != 0).then_some(p.node_port),
                            ..Default::default()
                        })
                        .collect(),
                ),
                type_: some(&self.spec.type_),
                cluster_ip: some(&self.spec.cluster_ip),
                cluster_ips: (!self.spec.cluster_ip.is_empty()).then(|| vec![self.spec.cluster_ip.clone()]),
                // What kube-apiserver defaults and Shepherd's proxy does: a body that carries
                // these values (a Service exported from a cluster) reads back unchanged.
                session_affinity: Some(SESSION_AFFINITY.into()),
                ip_families: Some(vec![IP_FAMILY.into()]),
                ip_family_policy: Some(IP_FAMILY_POLICY.into()),
                internal_traffic_policy: Some(TRAFFIC_POLICY.into()),
                external_traffic_policy: self.spec.is_node_port().then(|| TRAFFIC_POLICY.into()),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn from_k8s(s: core::Service, errors: &mut Vec<Cause>) -> Service {
        let metadata = meta_in(s.metadata, errors);
        let spec = s.spec.unwrap_or_default();
        let mut ports = Vec::new();
        for (i, p) in spec.ports.unwrap_or_default().into_iter().enumerate() {
            let target_port = match p.target_port {
                None => p.port,
                Some(IntOrString::Int(n)) => n,
                Some(IntOrString::String(text)) => text.parse().unwrap_or_else(|_| {
                    errors.push(Cause::unsupported(
                        format!("spec.ports[{i}].targetPort"),
                        format!("a named port ({text:?}): Shepherd does not resolve them; give the container port's number"),
                    ));
                    0
                }),
            };
            ports.push(ServicePort {
                name: p.name.unwrap_or_default(),
                port: p.port,
                target_port,
                protocol: p.protocol.unwrap_or_default(),
                node_port: p.node_port.unwrap_or_default(),
            });
        }
        let fixed = [
            ("sessionAffinity", spec.session_affinity.as_slice(), SESSION_AFFINITY),
            ("ipFamilies", spec.ip_families.as_deref().unwrap_or_default(), IP_FAMILY),
            ("ipFamilyPolicy", spec.ip_family_policy.as_slice(), IP_FAMILY_POLICY),
            ("internalTrafficPolicy", spec.internal_traffic_policy.as_slice(), TRAFFIC_POLICY),
            ("externalTrafficPolicy", spec.external_traffic_policy.as_slice(), TRAFFIC_POLICY),
        ];
        for (field, values, only) in fixed {
            if let Some(value) = values.iter().find(|v| *v != only) {
                errors.push(Cause::unsupported(format!("spec.{field}"), format!("{value:?}: Shepherd's Services have {only:?} only")));
            }
        }
        let spec = ServiceSpec {
            selector: spec.selector.unwrap_or_default(),
            ports,
            type_: spec.type_.unwrap_or_default(),
            cluster_ip: spec.cluster_ip.unwrap_or_default(),
        };
        Service { kind: "Service".into(), metadata, spec, status: Default::default() }
    }
}

impl Convert for Event {
    type K8s = core::Event;

    fn to_k8s(&self) -> core::Event {
        let o = &self.involved_object;
        core::Event {
            metadata: meta_out(&self.metadata),
            involved_object: object_reference(o),
            type_: some(&self.type_),
            reason: some(&self.reason),
            message: some(&self.message),
            source: some(&self.source).map(|component| core::EventSource { component: Some(component), host: None }),
            reporting_component: some(&self.source),
            count: Some(i32::try_from(self.count).unwrap_or(i32::MAX)),
            first_timestamp: self.first_timestamp.map(time),
            last_timestamp: self.last_timestamp.map(time),
            ..Default::default()
        }
    }

    fn from_k8s(e: core::Event, errors: &mut Vec<Cause>) -> Event {
        let metadata = meta_in(e.metadata, errors);
        let o = e.involved_object;
        let source = e.source.and_then(|s| s.component).or(e.reporting_component).unwrap_or_default();
        Event {
            kind: "Event".into(),
            metadata,
            type_: e.type_.unwrap_or_default(),
            reason: e.reason.unwrap_or_default(),
            message: e.message.unwrap_or_default(),
            involved_object: ObjectReference {
                kind: o.kind.unwrap_or_default(),
                namespace: o.namespace.unwrap_or_default(),
                name: o.name.unwrap_or_default(),
                uid: o.uid.unwrap_or_default(),
            },
            source,
            count: e.count.and_then(|c| u32::try_from(c).ok()).unwrap_or(1),
            first_timestamp: e.first_timestamp.and_then(time_in),
            last_timestamp: e.last_timestamp.and_then(time_in),
        }
    }
}

fn object_reference(o: &ObjectReference) -> core::ObjectReference {
    core::ObjectReference {
        api_version: some(&o.kind).map(|k| api_version_of(&k).to_string()),
        kind: some(&o.kind),
        namespace: some(&o.namespace),
        name: some(&o.name),
        uid: some(&o.uid),
        ..Default::default()
    }
}

impl Convert for Namespace {
    type K8s = core::Namespace;

    fn to_k8s(&self) -> core::Namespace {
        core::Namespace {
            metadata: meta_out(&self.metadata),
            spec: None,
            status: Some(core::NamespaceStatus { phase: some(&self.status.phase), conditions: None }),
        }
    }

    fn from_k8s(n: core::Namespace, errors: &mut Vec<Cause>) -> Namespace {
        let metadata = meta_in(n.metadata, errors);
        Namespace { kind: "Namespace".into(), metadata, status: NamespaceStatus::default() }
    }
}

/// A service's endpoints as Kubernetes' Endpoints object: one subset with every pod the
/// endpoints controller found, ready ones in `addresses` and the others in
/// `notReadyAddresses`, and the service's target ports.
pub fn endpoints(service: &Service) -> core::Endpoints {
    let m = &service.metadata;
    let metadata = meta::ObjectMeta {
        name: some(&m.name),
        namespace: some(&m.namespace),
        uid: some(&m.uid),
        labels: map(&m.labels),
        resource_version: (m.resource_version > 0).then(|| m.resource_version.to_string()),
        creation_timestamp: m.created_at.map(time),
        ..Default::default()
    };
    let address = |e: &Endpoint| core::EndpointAddress {
        ip: e.ip.clone(),
        node_name: some(&e.node_name),
        target_ref: Some(pod_reference(&m.namespace, &e.pod)),
        hostname: None,
    };
    let addresses: Vec<core::EndpointAddress> = service.status.endpoints.iter().map(address).collect();
    let not_ready: Vec<core::EndpointAddress> = service.status.not_ready_endpoints.iter().map(address).collect();
    let ports = service
        .spec
        .ports
        .iter()
        .map(|p| core::EndpointPort { name: some(&p.name), port: p.target_port, protocol: Some(p.protocol_name()), app_protocol: None })
        .collect();
    let subsets = (!addresses.is_empty() || !not_ready.is_empty())
        .then(|| vec![core::EndpointSubset { addresses: list(addresses), ports: Some(ports), not_ready_addresses: list(not_ready) }]);
    core::Endpoints { metadata, subsets }
}

/// The pod behind an endpoint, as Endpoints and EndpointSlices name it.
pub(super) fn pod_reference(namespace: &str, pod: &str) -> core::ObjectReference {
    core::ObjectReference { kind: Some("Pod".into()), namespace: some(namespace), name: some(pod), ..Default::default() }
}

#[cfg(test)]
mod tests {
    use shared::model::ObjectMeta;

    use super::super::strict::decode;
    use super::*;

    fn pod_with(container: serde_json::Value) -> serde_json::Value {
        serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}, "spec": {"containers": [container]}})
    }

    #[test]
    fn probes_convert_both_ways_and_a_get_shows_kubernetes_defaults() {
        let body = pod_with(serde_json::json!({"name": "web", "image": "minimal",
            "ports": [{"name": "http", "containerPort": 8080}],
            "livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}, "initialDelaySeconds": 5},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": "http", "httpHeaders": [{"name": "X-Probe", "value": "1"}]},
                "periodSeconds": 2, "successThreshold": 2},
            "startupProbe": {"tcpSocket": {"port": 8080}, "failureThreshold": 30}}));
        let mut pod: Pod = decode(&body).expect("a pod with three probes is taken");
        let container = &pod.spec.containers[0];
        assert_eq!(container.readiness_probe.as_ref().unwrap().http_get.as_ref().unwrap().port, ProbePort::Name("http".into()));
        assert_eq!(container.startup_probe.as_ref().unwrap().failure_threshold, 30);
        pod.spec.set_defaults();
        let out = serde_json::to_value(pod.to_k8s()).unwrap();
        let container = &out["spec"]["containers"][0];
        assert_eq!(
            container["livenessProbe"],
            serde_json::json!({"exec": {"command": ["cat", "/tmp/healthy"]}, "initialDelaySeconds": 5, "timeoutSeconds": 1,
                "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(container["readinessProbe"]["httpGet"]["scheme"], "HTTP");
        assert_eq!(container["readinessProbe"]["httpGet"]["port"], "http");
        assert_eq!(container["readinessProbe"]["successThreshold"], 2);
        assert_eq!(container["startupProbe"]["tcpSocket"]["port"], 8080);
        assert_eq!(container["ports"][0]["protocol"], "TCP", "as Kubernetes defaults it, so `describe` shows 8080/TCP");
        let again: Pod = decode(&out).expect("what a GET shows is taken back");
        assert_eq!(again.spec, pod.spec, "and means the same");
    }

    fn refused(container: serde_json::Value) -> Vec<String> {
        match decode::<Pod>(&pod_with(container)) {
            Err(super::super::strict::Error::Refused { causes, .. }) => causes.iter().map(ToString::to_string).collect(),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_probes_causes_are_worded_as_kubernetes_words_them_with_the_bad_value() {
        let container = |probe: serde_json::Value| serde_json::json!({"name": "web", "image": "minimal", "livenessProbe": probe});
        assert_eq!(
            refused(container(serde_json::json!({"periodSeconds": 1}))),
            vec!["spec.containers[0].livenessProbe: Required value: must specify a handler type"]
        );
        assert_eq!(
            refused(container(serde_json::json!({"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}}))),
            vec!["spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type"]
        );
        assert_eq!(
            refused(container(serde_json::json!({"exec": {"command": ["true"]}, "httpGet": {"port": 80}, "tcpSocket": {"port": 80}}))),
            vec![
                "spec.containers[0].livenessProbe.httpGet: Forbidden: may not specify more than 1 handler type",
                "spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type"
            ],
            "each extra handler, as Kubernetes lists them"
        );
        assert_eq!(
            refused(container(serde_json::json!({"exec": {"command": ["true"]}, "successThreshold": 2, "periodSeconds": -1}))),
            vec![
                "spec.containers[0].livenessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0",
                "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
            ]
        );
        assert_eq!(
            refused(container(serde_json::json!({"exec": {"command": []}}))),
            vec!["spec.containers[0].livenessProbe.exec.command: Required value: must not be empty"]
        );
        assert_eq!(
            refused(container(serde_json::json!({"httpGet": {"port": 80, "host": "10.1.2.3"}}))),
            vec![
                "spec.containers[0].livenessProbe.httpGet.host: Invalid value: \"10.1.2.3\": must be empty, 127.0.0.1 or localhost: \
                 the node probes from inside the pod's network namespace"
            ]
        );
        // A name is the value as written, never a Rust Debug string such as `Name("http")`.
        assert_eq!(
            refused(container(serde_json::json!({"tcpSocket": {"port": "http"}}))),
            vec![
                "spec.containers[0].livenessProbe.tcpSocket.port: Invalid value: \"http\": \
                 must be a number or the name of one of the container's ports"
            ]
        );
        assert_eq!(
            refused(container(serde_json::json!({"tcpSocket": {"port": 70000}}))),
            vec!["spec.containers[0].livenessProbe.tcpSocket.port: Invalid value: 70000: must be between 1 and 65535, inclusive"]
        );
        assert_eq!(
            refused(container(serde_json::json!({"grpc": {"port": 80}}))),
            vec!["spec.containers[0].livenessProbe.grpc: Unsupported: Shepherd does not support this field"],
            "one cause: the probe lacks a handler only because gRPC is refused"
        );
    }

    #[test]
    fn a_container_status_says_whether_it_started() {
        let mut pod = Pod::default();
        pod.status.container_statuses = vec![ContainerStatus { name: "web".into(), started: false, ..Default::default() }];
        assert_eq!(pod.to_k8s().status.unwrap().container_statuses.unwrap()[0].started, Some(false));
        pod.status.container_statuses[0].started = true;
        assert_eq!(pod.to_k8s().status.unwrap().container_statuses.unwrap()[0].started, Some(true));
    }

    #[test]
    fn not_ready_endpoints_are_not_ready_addresses() {
        let mut service = Service { metadata: ObjectMeta::named("default", "web"), ..Service::default() };
        service.spec.ports = vec![ServicePort { port: 80, target_port: 8080, ..Default::default() }];
        service.status.not_ready_endpoints = vec![Endpoint { ip: "10.77.0.9".into(), pod: "web-1".into(), node_name: "n1".into() }];
        let subsets = endpoints(&service).subsets.expect("a subset for the not ready pod");
        assert_eq!(subsets[0].addresses, None);
        let not_ready = subsets[0].not_ready_addresses.as_ref().unwrap();
        assert_eq!(not_ready[0].ip, "10.77.0.9");
        assert_eq!(not_ready[0].target_ref.as_ref().unwrap().name.as_deref(), Some("web-1"));
    }

    #[test]
    fn a_nodes_pod_network_shows_as_an_annotation_that_an_edit_does_not_keep() {
        let mut node = Node { kind: "Node".into(), metadata: ObjectMeta::named("", "vm"), ..Node::default() };
        node.status.node_info.pod_network = "cni".into();
        let out = node.to_k8s();
        assert_eq!(out.metadata.annotations.as_ref().and_then(|a| a.get(POD_NETWORK_ANNOTATION)).map(String::as_str), Some("cni"));
        let mut edited = serde_json::to_value(out).unwrap();
        edited["spec"]["unschedulable"] = true.into();
        let back: Node = decode(&edited).expect("what was read, sent back with a change, is taken");
        assert!(back.status.unschedulable && back.metadata.annotations.is_empty(), "{:?}", back.metadata.annotations);
    }
}
