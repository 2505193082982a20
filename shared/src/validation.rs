//! Validation of objects before they are stored. Every error is collected, not just the
//! first, each with the path of its field (`spec.containers[0].image`), so a user fixes a
//! manifest in one pass.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::api::{FieldError, FieldErrorType, Heartbeat, agent_paths};
use crate::limits::{MAX_CONTAINERS, MAX_CPU_MILLICORES, MAX_GRACE_SECONDS, MAX_MEMORY_BYTES, MAX_NODE_PODS, MAX_REPLICAS};
use crate::model::{
    BinaryData, ConfigMap, Container, DNS_POLICIES, Deployment, Event, IntOrString, Labels, Lease, MAX_CONFIG_BYTES, Namespace, Node,
    NodeResources, Object, ObjectMeta, PROBE_HOSTS, Pod, PodSpec, PodTemplateSpec, Probe, ProbeKind, ProbePort, PullPolicy, ReplicaSet,
    RestartPolicy, Scale, Secret, Service, TAINT_EFFECTS, service,
};
use crate::quantity::{format_cpu, format_memory};
use crate::rollout::{RECREATE, ROLLING_UPDATE, parse_percent};
use crate::selector::LabelSelector;

mod env;
mod volumes;

pub use env::env_name_error;

const MAX_NAME: usize = 253;
const MAX_LABEL: usize = 63;
const MAX_PORT_NAME: usize = 15;
/// Kubernetes' limit on an object's annotations, keys and values together (256 KiB).
pub const MAX_ANNOTATION_BYTES: usize = 256 * 1024;

/// Collects the errors of one object.
#[derive(Default)]
struct Errors(Vec<FieldError>);

impl Errors {
    fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError::new(field, message));
    }

    /// A bad value, kept apart from the message as Kubernetes' `field.Invalid` keeps it.
    fn invalid(&mut self, field: impl Into<String>, value: &impl serde::Serialize, message: impl Into<String>) {
        self.0.push(FieldError { value: serde_json::to_string(value).ok(), ..FieldError::new(field, message) });
    }

    /// A field that must be set and is not (`field.Required`).
    fn required(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError { type_: FieldErrorType::Required, ..FieldError::new(field, message) });
    }

    /// A field that may not be set here at all (`field.Forbidden`).
    fn forbidden(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError { type_: FieldErrorType::Forbidden, ..FieldError::new(field, message) });
    }

    /// A value outside `supported` (`field.NotSupported`), which the message lists as
    /// Kubernetes does.
    fn not_supported(&mut self, field: impl Into<String>, value: &str, supported: &[&str]) {
        let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        let message = format!("supported values: {}", supported.join(", "));
        self.0.push(FieldError {
            type_: FieldErrorType::NotSupported,
            value: serde_json::to_string(value).ok(),
            ..FieldError::new(field, message)
        });
    }

    /// Over `limit` bytes (`field.TooLong`), in Kubernetes' words.
    fn too_long(&mut self, field: impl Into<String>, limit: usize) {
        let message = format!("Too long: must have at most {limit} bytes");
        self.0.push(FieldError { type_: FieldErrorType::TooLong, ..FieldError::new(field, message) });
    }

    /// A value given twice where each must be unique (`field.Duplicate`).
    fn duplicate(&mut self, field: impl Into<String>, value: &impl serde::Serialize) {
        self.0.push(FieldError {
            type_: FieldErrorType::Duplicate,
            value: serde_json::to_string(value).ok(),
            ..FieldError::new(field, "duplicate value")
        });
    }

    fn finish(self) -> Result<(), Vec<FieldError>> {
        if self.0.is_empty() { Ok(()) } else { Err(self.0) }
    }
}

/// Validates an object of any kind.
pub fn validate(object: &Object) -> Result<(), Vec<FieldError>> {
    match object {
        Object::Pod(o) => validate_pod(o),
        Object::Deployment(o) => validate_deployment(o),
        Object::ReplicaSet(o) => validate_replicaset(o),
        Object::Service(o) => validate_service(o),
        Object::Node(o) => validate_node(o),
        Object::Event(o) => validate_event(o),
        Object::Namespace(o) => validate_namespace(o),
        Object::Lease(o) => validate_lease(o),
        Object::ConfigMap(o) => validate_config_map(o),
        Object::Secret(o) => validate_secret(o),
    }
}

pub fn validate_pod(pod: &Pod) -> Result<(), Vec<FieldError>> {
    let mut errors = Errors::default();
    check_meta(&mut errors, &pod.metadata, true, NameRule::Subdomain);
    check_pod_spec(&mut errors, "spec", &pod.spec);
    errors.finish()
}

pub fn validate_deployment(deployment: &Deployment) -> Result<(), Vec<FieldError>> {
    let mut errors = Errors::default();
    check_meta(&mut errors, &deployment.metadata, true, NameRule::Subdomain);
    let spec = &deployment.spec;
    check_replicas(&mut errors, "spec.replicas", spec.replicas);
    check_pod_set(&mut errors, &spec.selector, &spec.template);
    check_strategy(&mut errors, deployment);
    if spec.min_ready_seconds < 0 {
        errors.invalid("spec.min_ready_seconds", &spec.min_ready_seconds, "must be greater than or equal to 0");
    }
    if let Some(limit) = spec.revision_history_limit.filter(|l| *l < 0) {
        errors.invalid("spec.revision_history_limit", &limit, "must be greater than or equal to 0");
    }
    if let Some(deadline) = spec.progress_deadline_seconds {
        if deadline <= 0 {
            errors.invalid("spec.progress_deadline_seconds", &deadline, "must be greater than 0");
        } else if deadline <= spec.min_ready_seconds {
            errors.invalid("spec.progress_deadline_seconds", &deadline, "must be greater than `min_ready_seconds`");
        }
    }
    errors.finish()
}

pub fn validate_replicaset(rs: &ReplicaSet) -> Result<(), Vec<FieldError>> {
    let mut errors = Errors::default();
    check_meta(&mut errors, &rs.metadata, true, NameRule::Subdomain);
    check_replicas(&mut errors, "spec.replicas", rs.spec.replicas);
    check_pod_set(&mut errors, &rs.spec.selector, &rs.spec.template);
    if rs.spec.min_ready_seconds < 0 {
        errors.invalid("spec.min_ready_seconds", &rs.spec.min_ready_seconds, "must be greater than or equal to 0");
    }
    errors.finish()
}

/// The selector and template of a set of pods (a deployment's, a ReplicaSet's): the selector
/// selects something, and the template's labels match it.
fn check_pod_set(errors: &mut Errors, selector: &LabelSelector, template: &PodTemplateSpec) {
    if selector.is_empty() {
        errors.add("spec.selector", "must not be empty: it says which pods are owned");
    } else if !selector.matches(&template.metadata.labels) {
        errors.add("spec.template.metadata.labels", format!("must match the selector {:?}", selector.to_string()));
    }
    for (i, requirement) in selector.match_expressions.iter().enumerate() {
        check_label_key(errors, &format!("spec.selector.match_expressions[{i}].key"), &requirement.key);
        let needs_values = matches!(requirement.operator, crate::selector::Operator::In | crate::selector::Operator::NotIn);
        if needs_values == requirement.values.is_empty() {
            let message = if needs_values { "In and NotIn need at least one value" } else { "Exists and DoesNotExist take no values" };
            errors.add(format!("spec.selector.match_expressions[{i}].values"), message);
        }
    }
    check_labels(errors, "spec.selector.match_labels", &selector.match_labels);
    check_labels(errors, "spec.template.metadata.labels", &template.metadata.labels);
    check_pod_spec(errors, "spec.template.spec", &template.spec);
    if !template.spec.node_name.is_empty() {
        errors.add("spec.template.spec.node_name", "must be empty: the scheduler places these pods");
    }
}

/// The strategy, as `pkg/apis/apps/validation` holds it.
fn check_strategy(errors: &mut Errors, deployment: &Deployment) {
    let strategy = &deployment.spec.strategy;
    match strategy.type_.as_str() {
        "" | ROLLING_UPDATE => {}
        RECREATE => {
            if strategy.rolling_update.is_some() {
                errors.forbidden("spec.strategy.rolling_update", "may not be specified when strategy `type` is 'Recreate'");
            }
        }
        other => errors.not_supported("spec.strategy.type", other, &[RECREATE, ROLLING_UPDATE]),
    }
    let Some(rolling) = &strategy.rolling_update else { return };
    let surge = check_int_or_percent(errors, "spec.strategy.rolling_update.max_surge", rolling.max_surge.as_ref());
    let unavailable = check_int_or_percent(errors, "spec.strategy.rolling_update.max_unavailable", rolling.max_unavailable.as_ref());
    if let Some(IntOrString::String(_)) = &rolling.max_unavailable
        && unavailable.is_some_and(|n| n > 100)
    {
        errors.invalid("spec.strategy.rolling_update.max_unavailable", &rolling.max_unavailable, "must not be greater than 100%");
    }
    if unavailable == Some(0) && surge == Some(0) {
        // Kubernetes names maxUnavailable, the field a rolling update cannot start without.
        errors.invalid("spec.strategy.rolling_update.max_unavailable", &rolling.max_unavailable, "may not be 0 when `max_surge` is 0");
    }
}

/// A count or percentage that is not negative; returns its number.
fn check_int_or_percent(errors: &mut Errors, path: &str, value: Option<&IntOrString>) -> Option<i32> {
    let n = match value? {
        IntOrString::Int(n) => *n,
        IntOrString::String(text) => match parse_percent(text) {
            Ok(n) => n,
            Err(message) => {
                errors.add(path, message);
                return None;
            }
        },
    };
    if n < 0 {
        errors.invalid(path, &n, "must be greater than or equal to 0");
    }
    Some(n)
}

pub fn validate_service(service: &Service) -> Result<(), Vec<FieldError>> {
    let mut errors = Errors::default();
    check_meta(&mut errors, &service.metadata, true, NameRule::Dns1035Label);
    check_labels(&mut errors, "spec.selector", &service.spec.selector);
    let spec = &service.spec;
    if !matches!(spec.type_.as_str(), "" | service::CLUSTER_IP | service::NODE_PORT) {
        errors.invalid("spec.type", &spec.type_, format!("must be {} or {}", service::CLUSTER_IP, service::NODE_PORT));
    }
    if !matches!(spec.cluster_ip.as_str(), "" | service::HEADLESS) && spec.cluster_ip.parse::<Ipv4Addr>().is_err() {
        errors.invalid("spec.cluster_ip", &spec.cluster_ip, format!("must be empty, {} or an IPv4 address", service::HEADLESS));
    }
    if spec.is_node_port() && spec.cluster_ip == service::HEADLESS {
        errors.add("spec.cluster_ip", format!("may not be set to '{}' for {} services", service::HEADLESS, service::NODE_PORT));
    }
    let mut names = BTreeSet::new();
    let (mut ports, mut node_ports) = (BTreeSet::new(), BTreeSet::new());
    for (i, port) in spec.ports.iter().enumerate() {
        let path = format!("spec.ports[{i}]");
        // As Kubernetes: names tell the ports of a Service apart once there are several, and
        // a port, or a node port, serves one protocol once.
        if port.name.is_empty() && spec.ports.len() > 1 {
            errors.required(format!("{path}.name"), "");
        }
        if !ports.insert((port.port, port.protocol_name())) {
            errors.duplicate(&path, &serde_json::json!({"port": port.port, "protocol": port.protocol_name()}));
        }
        if port.node_port != 0 && !node_ports.insert((port.node_port, port.protocol_name())) {
            errors.duplicate(format!("{path}.node_port"), &port.node_port);
        }
        check_port(&mut errors, &format!("{path}.port"), port.port);
        if port.target_port != 0 {
            check_port(&mut errors, &format!("{path}.target_port"), port.target_port);
        }
        if port.node_port != 0 && !spec.is_node_port() {
            errors.add(format!("{path}.node_port"), format!("may not be used when `type` is '{}'", service::CLUSTER_IP));
        } else if port.node_port != 0 {
            check_port(&mut errors, &format!("{path}.node_port"), port.node_port);
        }
        check_protocol(&mut errors, &format!("{path}.protocol"), &port.protocol);
        // A DNS-1123 label, as in Kubernetes: it names the port's SRV records.
        if let Some(message) = Some(&port.name).filter(|name| !name.is_empty()).and_then(|name| dns_label_error(name)) {
            errors.invalid(format!("{path}.name"), &port.name, message);
        } else if !port.name.is_empty() && !names.insert(port.name.as_str()) {
            errors.duplicate(format!("{path}.name"), &port.name);
        }
    }
    errors.finish()
}

pub fn validate_node(node: &Node) -> Result<(), Vec<FieldError>> {
    let mut errors = Errors::default();
    check_meta(&mut errors, &node.metadata, false, NameRule::Subdomain);
    // check_meta has said what is wrong with a name that is no DNS-1123 subdomain.
    if let Some(message) = node_name_error(&node.metadata.name).filter(|_| dns_subdomain_error(&node.metadata.name).is_none()) {
        errors.add("metadata.name", message);
    }
    let status = &node.status;
    check_node_resources(&mut errors, "status.capacity", &status.capacity);
    check_node_resources(&mut errors, "status.allocatable", &status.allocatable);
    for (i, taint) in status.taints.iter().enumerate() {
        check_label_key(&mut errors, &format!("status.taints[{i}].key"), &taint.key);
        if !TAINT_EFFECTS.contains(&taint.effect.as_str()) {
            errors.not_supported(format!("status.taints[{i}].effect"), &taint.effect, &TAINT_EFFECTS);
        }
    }
    if !status.agent_endpoint.is_empty()
        && let Some(message) = agent_endpoint_error(&status.agent_endpoint, &node.metadata.name)
    {
        errors.add("status.agent_endpoint", message);
    }
    errors.finish()
}

/// Where the server may send what it asks of node `node`'s agent (its logs):
/// `http://` or `https://`, a host (a DNS name, an IPv4 address or a bracketed IPv6 one) and
/// a port, then nothing, or a fleet's [`agent_paths::fleet_node`] path of this node. The server adds the
/// rest of the path itself, so a node cannot aim it at another path, a user or a query. An
/// address must pass [`unproxyable_address`], and a name must not read as a number; the
/// server checks the addresses a name resolves to when it connects.
pub fn agent_endpoint_error(endpoint: &str, node: &str) -> Option<String> {
    let expected = || {
        format!(
            "must be http:// or https://, a host and a port, optionally followed by {}, got {endpoint:?}",
            agent_paths::fleet_node(node)
        )
    };
    let Some(rest) = endpoint.strip_prefix("http://").or_else(|| endpoint.strip_prefix("https://")) else {
        return Some(expected());
    };
    let (authority, path) = rest.find('/').map_or((rest, ""), |slash| rest.split_at(slash));
    if !path.is_empty() && path != agent_paths::fleet_node(node) {
        return Some(expected());
    }
    let Some((host, port)) = authority.rsplit_once(':') else {
        return Some(expected());
    };
    let address = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
        None => host.parse::<Ipv4Addr>().ok().map(IpAddr::V4),
    };
    let host_is_valid = address.is_some() || (dns_subdomain_error(host).is_none() && host.split('.').all(is_dns_label));
    // Written as the number itself: `080` or `+80` is one to a URL parser, another to a person.
    let port_is_valid = port.parse::<u16>().is_ok_and(|p| p > 0 && p.to_string() == port);
    if !host_is_valid || !port_is_valid {
        return Some(expected());
    }
    if let Some(kind) = address.and_then(unproxyable_address) {
        let carried = match address {
            Some(IpAddr::V6(v6)) => embedded_ipv4(v6).map(|v4| format!(" (which carries {v4})")).unwrap_or_default(),
            _ => String::new(),
        };
        return Some(format!(
            "names {host}{carried}, {kind} address, which the server sends no request to (no {UNPROXYABLE_KINDS} address), got {endpoint:?}"
        ));
    }
    // A resolver reads such a name as an IPv4 address (0x7f000001, 2130706433, 127.1) and
    // the URL parser rewrites it to one: a host name must not hide an address.
    if address.is_none() && host.rsplit('.').next().is_some_and(|last| last.starts_with(|c: char| c.is_ascii_digit())) {
        return Some(format!(
            "names host {host:?}, whose last label starts with a digit, so a resolver reads it as an IPv4 address: write the address as four decimal numbers (a.b.c.d), got {endpoint:?}"
        ));
    }
    None
}

/// The kinds of address [`unproxyable_address`] refuses, as a message lists them.
pub const UNPROXYABLE_KINDS: &str = "link-local, unspecified, broadcast or multicast";

/// Why the server sends no request to `ip`: `Some("a link-local")`, `Some("an unspecified")`,
/// `Some("a broadcast")` or `Some("a multicast")`, an IPv6 address that carries an IPv4 one
/// ([`embedded_ipv4`]) judged as that IPv4 address. Kubernetes' apiserver proxies to none of
/// these (`IsProxyableIP`): 169.254.169.254 is a cloud's metadata service. Loopback and
/// private addresses are where agents run, so they pass.
pub fn unproxyable_address(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) if v4.is_link_local() => Some("a link-local"),
        // 0.0.0.0/8 is "this network", never a destination (RFC 1122); 0.0.0.0 reaches the host itself.
        IpAddr::V4(v4) if v4.octets()[0] == 0 => Some("an unspecified"),
        IpAddr::V4(v4) if v4.is_broadcast() => Some("a broadcast"),
        IpAddr::V4(v4) if v4.is_multicast() => Some("a multicast"),
        IpAddr::V4(_) => None,
        IpAddr::V6(v6) => match embedded_ipv4(v6) {
            Some(v4) => unproxyable_address(IpAddr::V4(v4)),
            None if v6.is_unicast_link_local() => Some("a link-local"),
            None if v6.is_unspecified() => Some("an unspecified"),
            None if v6.is_multicast() => Some("a multicast"),
            None => None,
        },
    }
}

/// The IPv4 address that an IPv6 address reaches through a translator or tunnel:
/// IPv4-mapped (`::ffff:0:0/96`), NAT64 (`64:ff9b::/96`, RFC 6052), IPv4-compatible (`::/96`
/// except `::` and `::1`, RFC 4291) and 6to4 (`2002::/16`, the next 32 bits, RFC 3056).
fn embedded_ipv4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let o = v6.octets();
    let last_32_bits = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    match v6.segments() {
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(last_32_bits),
        [0, 0, 0, 0, 0, 0, _, _] if !v6.is_unspecified() && !v6.is_loopback() => Some(last_32_bits),
        [0x2002, ..] => Some(Ipv4Addr::new(o[2], o[3], o[4], o[5])),
        _ => None,
    }
}

/// A heartbeat's capacity and allocatable, bounded as a node's.
pub fn validate_heartbeat(heartbeat: &Heartbeat) -> Result<(), Vec<FieldError>> {
    let mut errors = Errors::default();
    if let Some(capacity) = &heartbeat.capacity {
        check_node_resources(&mut errors, "capacity", capacity);
    }
    if let Some(allocatable) = &heartbeat.allocatable {
        check_node_resources(&mut errors, "allocatable", allocatable);
    }
    errors.finish()
}

/// A node's lease: named as a node, and held by that node.
pub fn validate_lease(lease: &Lease) -> Result<(), Vec<FieldError>> {
    let mut errors = Errors::default();
    check_meta(&mut errors, &lease.metadata, false, NameRule::Subdomain);
    let holder = &lease.spec.holder_identity;
    if !holder.is_empty() && *holder != lease.metadata.name {
        errors.invalid("spec.holder_identity", &holder, format!("must be the node the lease is named after, {:?}", lease.metadata.name));
    }
    if lease.spec.lease_duration_seconds < 0 {
        errors.invalid("spec.lease_duration_seconds", &lease.spec.lease_duration_seconds, "must be 0 or more");
    }
    errors.finish()
}

/// The body of a deployment's `/scale`.
pub fn validate_scale(scale: &Scale) -> Result<(), Vec<FieldError>> {
    let mut errors = Errors::default();
    check_replicas(&mut errors, "spec.replicas", scale.spec.replicas);
    errors.finish()
}

/// A DELETE's `grace_period_seconds`, or a pod's `termination_grace_period_seconds`.
pub fn grace_seconds_error(seconds: i64) -> Option<String> {
    (!(0..=MAX_GRACE_SECONDS).contains(&seconds))
        .then(|| format!("must be between 0 and {MAX_GRACE_SECONDS} seconds (a year), got {seconds}"))
}

fn check_replicas(errors: &mut Errors, path: &str, replicas: i32) {
    if !(0..=MAX_REPLICAS).contains(&replicas) {
        errors.invalid(path, &replicas, format!("must be between 0 and {MAX_REPLICAS}"));
    }
}

fn check_node_resources(errors: &mut Errors, path: &str, resources: &NodeResources) {
    check_cpu(errors, &format!("{path}.cpu"), resources.cpu);
    check_memory(errors, &format!("{path}.memory"), resources.memory);
    if !(0..=MAX_NODE_PODS).contains(&resources.pods) {
        errors.invalid(format!("{path}.pods"), &resources.pods, format!("must be between 0 and {MAX_NODE_PODS}"));
    }
}

fn check_cpu(errors: &mut Errors, path: &str, millicores: i64) {
    if !(0..=MAX_CPU_MILLICORES).contains(&millicores) {
        errors.invalid(
            path,
            &millicores,
            format!("must be between 0 and {MAX_CPU_MILLICORES} millicores ({} cores)", format_cpu(MAX_CPU_MILLICORES)),
        );
    }
}

fn check_memory(errors: &mut Errors, path: &str, bytes: i64) {
    if !(0..=MAX_MEMORY_BYTES).contains(&bytes) {
        errors.invalid(path, &bytes, format!("must be between 0 and {MAX_MEMORY_BYTES} bytes ({})", format_memory(MAX_MEMORY_BYTES)));
    }
}

pub fn validate_event(event: &Event) -> Result<(), Vec<FieldError>> {
    let mut errors = Errors::default();
    check_meta(&mut errors, &event.metadata, true, NameRule::Subdomain);
    if !matches!(event.type_.as_str(), "Normal" | "Warning") {
        errors.invalid("type", &event.type_, "must be Normal or Warning");
    }
    if event.reason.is_empty() {
        errors.add("reason", "must not be empty");
    }
    if event.involved_object.kind.is_empty() {
        errors.add("involved_object.kind", "must not be empty");
    }
    if event.involved_object.name.is_empty() {
        errors.add("involved_object.name", "must not be empty");
    }
    errors.finish()
}

pub fn validate_namespace(namespace: &Namespace) -> Result<(), Vec<FieldError>> {
    let mut errors = Errors::default();
    check_meta(&mut errors, &namespace.metadata, false, NameRule::Subdomain);
    if let Some(message) = dns_label_error(&namespace.metadata.name) {
        errors.add("metadata.name", message);
    }
    errors.finish()
}

/// A ConfigMap as Kubernetes' `ValidateConfigMap`: each key a [config key](config_key_error),
/// no key in both maps, at most 1 MiB of values in both (the error is the whole object's, `[]`).
pub fn validate_config_map(map: &ConfigMap) -> Result<(), Vec<FieldError>> {
    let mut errors = Errors::default();
    check_meta(&mut errors, &map.metadata, true, NameRule::Subdomain);
    check_config_keys(&mut errors, "data", map.data.keys());
    check_config_keys(&mut errors, "binary_data", map.binary_data.keys());
    for key in map.binary_data.keys().filter(|key| map.data.contains_key(*key)) {
        errors.add(format!("binary_data[{key}]"), "duplicate of key present in data");
    }
    let size = map.data.values().map(String::len).sum::<usize>() + binary_size(&map.binary_data);
    check_config_size(&mut errors, "[]", size);
    errors.finish()
}

/// A Secret as Kubernetes' `ValidateSecret`, with `string_data` counted as merged into
/// `data`: config keys, at most 1 MiB of values (the error is `data`'s), and what its type
/// requires. No message holds a value.
pub fn validate_secret(secret: &Secret) -> Result<(), Vec<FieldError>> {
    let mut errors = Errors::default();
    check_meta(&mut errors, &secret.metadata, true, NameRule::Subdomain);
    check_config_keys(&mut errors, "data", secret.data.keys());
    check_config_keys(&mut errors, "string_data", secret.string_data.keys());
    let mut merged = secret.clone();
    merged.merge_string_data();
    check_config_size(&mut errors, "data", binary_size(&merged.data));
    check_secret_type(&mut errors, &merged);
    errors.finish()
}

/// The keys (or annotation) each of Kubernetes' built-in Secret types requires, with its
/// field paths; other types, `Opaque` among them, require nothing.
fn check_secret_type(errors: &mut Errors, secret: &Secret) {
    let data = &secret.data;
    match secret.type_.as_str() {
        "kubernetes.io/service-account-token" => {
            const ACCOUNT: &str = "kubernetes.io/service-account.name";
            if secret.metadata.annotations.get(ACCOUNT).is_none_or(String::is_empty) {
                errors.required(format!("metadata.annotations[{ACCOUNT}]"), "");
            }
        }
        "kubernetes.io/dockercfg" => check_json_key(errors, data, ".dockercfg"),
        "kubernetes.io/dockerconfigjson" => check_json_key(errors, data, ".dockerconfigjson"),
        // Either may be empty, but one must be there.
        "kubernetes.io/basic-auth" if !data.contains_key("username") && !data.contains_key("password") => {
            require_key(errors, data, "username");
            require_key(errors, data, "password");
        }
        // Unlike the others, an empty private key counts as missing.
        "kubernetes.io/ssh-auth" if data.get("ssh-privatekey").is_none_or(Vec::is_empty) => errors.required("data[ssh-privatekey]", ""),
        "kubernetes.io/tls" => {
            require_key(errors, data, "tls.crt");
            require_key(errors, data, "tls.key");
        }
        _ => {}
    }
}

fn require_key(errors: &mut Errors, data: &BinaryData, key: &str) {
    if !data.contains_key(key) {
        errors.required(format!("data[{key}]"), "");
    }
}

/// A docker config key: present, and a JSON object (or `null`, which Kubernetes' decoder also
/// takes). The error stands `<secret contents redacted>` where the value would be, and says
/// only where the JSON breaks, never what it holds.
fn check_json_key(errors: &mut Errors, data: &BinaryData, key: &str) {
    use serde_json::error::Category;
    let field = format!("data[{key}]");
    let Some(content) = data.get(key) else {
        errors.required(field, "");
        return;
    };
    let problem = match serde_json::from_slice::<serde_json::Value>(content) {
        Ok(serde_json::Value::Object(_) | serde_json::Value::Null) => return,
        Ok(other) => format!("must be a JSON object, not {}", json_kind(&other)),
        // serde_json's words for a syntax error are fixed; other kinds of error may quote the value.
        Err(error) if matches!(error.classify(), Category::Syntax | Category::Eof) => error.to_string(),
        Err(error) => format!("invalid JSON at line {} column {}", error.line(), error.column()),
    };
    errors.invalid(field, &"<secret contents redacted>", problem);
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

fn check_config_keys<'a>(errors: &mut Errors, path: &str, keys: impl Iterator<Item = &'a String>) {
    for key in keys {
        if let Some(message) = config_key_error(key) {
            errors.add(format!("{path}[{key}]"), message);
        }
    }
}

/// The bytes of the values, as Kubernetes counts them (decoded, keys not counted).
fn binary_size(data: &BinaryData) -> usize {
    data.values().map(Vec::len).sum()
}

/// Kubernetes' `field.TooLong` for `MaxSecretSize`, in its words.
fn check_config_size(errors: &mut Errors, field: &str, size: usize) {
    if size > MAX_CONFIG_BYTES {
        errors.too_long(field, MAX_CONFIG_BYTES);
    }
}

/// A key of a ConfigMap or Secret (Kubernetes' `IsConfigMapKey`): at most 253 of
/// `[-._a-zA-Z0-9]`, and not `.`, `..` or anything starting with `..`, since a volume makes
/// each key a file name.
pub fn config_key_error(key: &str) -> Option<String> {
    if key.len() > MAX_NAME {
        return Some(format!("must be no more than {MAX_NAME} characters"));
    }
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')) {
        return Some(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name', or 'KEY_NAME', or \
             'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
                .into(),
        );
    }
    match key {
        "." => Some("must not be '.'".into()),
        ".." => Some("must not be '..'".into()),
        _ if key.starts_with("..") => Some("must not start with '..'".into()),
        _ => None,
    }
}

/// The rule an object's name follows, as Kubernetes' `ValidateNameFunc` of its kind.
#[derive(Clone, Copy)]
enum NameRule {
    /// Most kinds: [`dns_subdomain_error`].
    Subdomain,
    /// A Service, whose name is a DNS label of its own and the prefix of its pods'
    /// environment variables: [`dns_1035_label_errors`].
    Dns1035Label,
}

fn check_meta(errors: &mut Errors, meta: &ObjectMeta, namespaced: bool, name_rule: NameRule) {
    match name_rule {
        NameRule::Subdomain => {
            if let Some(message) = dns_subdomain_error(&meta.name) {
                errors.add("metadata.name", message);
            }
        }
        NameRule::Dns1035Label => {
            for message in dns_1035_label_errors(&meta.name) {
                errors.invalid("metadata.name", &meta.name, message);
            }
        }
    }
    if namespaced
        && !meta.namespace.is_empty()
        && let Some(message) = dns_label_error(&meta.namespace)
    {
        errors.add("metadata.namespace", message);
    }
    check_labels(errors, "metadata.labels", &meta.labels);
    let annotation_bytes: usize = meta.annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if annotation_bytes > MAX_ANNOTATION_BYTES {
        errors.too_long("metadata.annotations", MAX_ANNOTATION_BYTES);
    }
}

fn check_pod_spec(errors: &mut Errors, path: &str, spec: &PodSpec) {
    if spec.containers.is_empty() {
        errors.add(format!("{path}.containers"), "must have at least one container");
    }
    if spec.containers.len() > MAX_CONTAINERS {
        errors.invalid(format!("{path}.containers"), &spec.containers.len(), format!("must have at most {MAX_CONTAINERS} containers"));
    }
    let mut names = BTreeSet::new();
    let mut host_ports = BTreeSet::new();
    for (i, container) in spec.containers.iter().enumerate() {
        let container_path = format!("{path}.containers[{i}]");
        check_container(errors, &container_path, container);
        if !container.name.is_empty() && !names.insert(container.name.as_str()) {
            errors.add(format!("{container_path}.name"), format!("duplicate container name {:?}", container.name));
        }
        for (j, port) in container.ports.iter().enumerate() {
            if let Some(host_port) = port.host_port.filter(|&p| p != 0) {
                let protocol = if port.protocol.is_empty() { "TCP".to_string() } else { port.protocol.to_ascii_uppercase() };
                if !host_ports.insert((host_port, protocol)) {
                    errors.add(format!("{container_path}.ports[{j}].host_port"), format!("host port {host_port} is published twice"));
                }
            }
        }
    }
    if RestartPolicy::parse(&spec.restart_policy).is_none() {
        errors.not_supported(format!("{path}.restart_policy"), &spec.restart_policy, &RestartPolicy::ALL);
    }
    if !spec.dns_policy.is_empty() && !DNS_POLICIES.contains(&spec.dns_policy.as_str()) {
        errors.not_supported(format!("{path}.dns_policy"), &spec.dns_policy, &DNS_POLICIES);
    }
    check_labels(errors, &format!("{path}.node_selector"), &spec.node_selector);
    for (i, toleration) in spec.tolerations.iter().enumerate() {
        let toleration_path = format!("{path}.tolerations[{i}]");
        match toleration.operator.as_str() {
            "" | "Equal" => {
                if toleration.key.is_empty() {
                    errors.add(
                        format!("{toleration_path}.key"),
                        "must not be empty with operator Equal (use Exists to tolerate every taint)",
                    );
                }
            }
            "Exists" => {
                if !toleration.value.is_empty() {
                    errors.add(format!("{toleration_path}.value"), "must be empty with operator Exists");
                }
            }
            other => errors.not_supported(format!("{toleration_path}.operator"), other, &["Equal", "Exists"]),
        }
        if !toleration.effect.is_empty() && !TAINT_EFFECTS.contains(&toleration.effect.as_str()) {
            errors.not_supported(format!("{toleration_path}.effect"), &toleration.effect, &TAINT_EFFECTS);
        }
    }
    if let Some(message) = spec.termination_grace_period_seconds.and_then(grace_seconds_error) {
        errors.add(format!("{path}.termination_grace_period_seconds"), message);
    }
    volumes::check_volumes(errors, path, spec);
}

fn check_container(errors: &mut Errors, path: &str, container: &Container) {
    if let Some(message) = dns_label_error(&container.name) {
        errors.add(format!("{path}.name"), message);
    }
    if container.image.trim().is_empty() {
        errors.add(format!("{path}.image"), "must not be empty");
    } else if container.image.chars().any(char::is_whitespace) {
        errors.invalid(format!("{path}.image"), &container.image, "must not contain spaces");
    }
    if !container.image_pull_policy.is_empty() && PullPolicy::parse(&container.image_pull_policy).is_none() {
        errors.not_supported(format!("{path}.image_pull_policy"), &container.image_pull_policy, &PullPolicy::ALL);
    }
    check_memory(errors, &format!("{path}.resources.memory"), container.resources.memory);
    check_cpu(errors, &format!("{path}.resources.cpu"), container.resources.cpu);
    env::check_env(errors, path, container);
    for (i, port) in container.ports.iter().enumerate() {
        if let Some(message) = port_name_error(&port.name) {
            errors.add(format!("{path}.ports[{i}].name"), message);
        }
        check_port(errors, &format!("{path}.ports[{i}].container_port"), port.container_port);
        if let Some(host_port) = port.host_port.filter(|&p| p != 0) {
            check_port(errors, &format!("{path}.ports[{i}].host_port"), host_port);
        }
        check_protocol(errors, &format!("{path}.ports[{i}].protocol"), &port.protocol);
    }
    for (kind, probe) in container.probes() {
        check_probe(errors, &format!("{path}.{}", kind.field()), kind, probe, container);
    }
}

/// A probe as Kubernetes validates it (its words), and its host and scheme as Shepherd
/// runs it: from inside the pod, over plain HTTP.
fn check_probe(errors: &mut Errors, path: &str, kind: ProbeKind, probe: &Probe, container: &Container) {
    // As Kubernetes: the first handler set counts, each further one is refused by name.
    let set = [("exec", probe.exec.is_some()), ("http_get", probe.http_get.is_some()), ("tcp_socket", probe.tcp_socket.is_some())];
    let mut handlers = set.into_iter().filter(|(_, set)| *set).map(|(name, _)| name);
    match handlers.next() {
        None => errors.required(path, "must specify a handler type"),
        Some(_) => handlers.for_each(|extra| errors.forbidden(format!("{path}.{extra}"), "may not specify more than 1 handler type")),
    }
    let timing = [
        ("initial_delay_seconds", probe.initial_delay_seconds),
        ("timeout_seconds", probe.timeout_seconds),
        ("period_seconds", probe.period_seconds),
        ("success_threshold", probe.success_threshold),
        ("failure_threshold", probe.failure_threshold),
    ];
    for (field, value) in timing {
        if value < 0 {
            errors.invalid(format!("{path}.{field}"), &value, "must be greater than or equal to 0");
        }
    }
    if kind.kills() && probe.success_threshold > 1 {
        errors.invalid(format!("{path}.success_threshold"), &probe.success_threshold, "must be 1");
    }
    if let Some(exec) = &probe.exec
        && exec.command.is_empty()
    {
        errors.required(format!("{path}.exec.command"), "must not be empty");
    }
    let check_target = |errors: &mut Errors, handler: &str, port: &ProbePort, host: &str| {
        match container.probe_port(port) {
            Some(number) => check_port(errors, &format!("{path}.{handler}.port"), number),
            None => errors.invalid(format!("{path}.{handler}.port"), port, "must be a number or the name of one of the container's ports"),
        }
        if !PROBE_HOSTS.contains(&host) {
            errors.invalid(
                format!("{path}.{handler}.host"),
                &host,
                "must be empty, 127.0.0.1 or localhost: the node probes from inside the pod's network namespace",
            );
        }
    };
    if let Some(http) = &probe.http_get {
        check_target(errors, "http_get", &http.port, &http.host);
        if !matches!(http.scheme.as_str(), "" | "HTTP") {
            errors.invalid(format!("{path}.http_get.scheme"), &http.scheme, "must be HTTP (HTTPS probes are not supported)");
        }
        // Kubernetes takes a path without its leading '/' (the prober adds it); spaces and
        // control bytes could not be sent in a request line.
        if http.path.chars().any(|c| c.is_whitespace() || c.is_control()) {
            errors.invalid(format!("{path}.http_get.path"), &http.path, "must hold no spaces or control characters");
        }
        for (i, header) in http.http_headers.iter().enumerate() {
            let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
            if header.name.is_empty() || !header.name.chars().all(token) {
                errors.invalid(format!("{path}.http_get.http_headers[{i}].name"), &header.name, "must be an HTTP header name");
            }
            if header.value.chars().any(|c| c.is_control() && c != '\t') {
                errors.invalid(format!("{path}.http_get.http_headers[{i}].value"), &header.value, "must not hold control characters");
            }
        }
    }
    if let Some(tcp) = &probe.tcp_socket {
        check_target(errors, "tcp_socket", &tcp.port, &tcp.host);
    }
}

/// A container port's name, when it has one: an IANA service name, as Kubernetes requires
/// (at most 15 lower-case letters, digits and '-', with a letter, and no '-' at either end
/// or twice in a row).
fn port_name_error(name: &str) -> Option<String> {
    let problem = if name.is_empty() {
        return None;
    } else if name.len() > MAX_PORT_NAME {
        format!("must be at most {MAX_PORT_NAME} characters")
    } else if !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
        "must be lower-case letters, digits and '-'".to_string()
    } else if !name.chars().any(|c| c.is_ascii_lowercase()) {
        "must contain at least one letter".to_string()
    } else if name.starts_with('-') || name.ends_with('-') {
        "must not begin or end with '-'".to_string()
    } else if name.contains("--") {
        "must not contain '--'".to_string()
    } else {
        return None;
    };
    Some(format!("port name {name:?} {problem} (an IANA service name, such as \"http\" or \"metrics-2\")"))
}

fn check_port(errors: &mut Errors, path: &str, port: i32) {
    if !(1..=65535).contains(&port) {
        errors.invalid(path, &port, "must be between 1 and 65535, inclusive");
    }
}

fn check_protocol(errors: &mut Errors, path: &str, protocol: &str) {
    if !matches!(protocol.to_ascii_uppercase().as_str(), "" | "TCP" | "UDP") {
        errors.not_supported(path, protocol, &["TCP", "UDP"]);
    }
}

fn check_labels(errors: &mut Errors, path: &str, labels: &Labels) {
    for (key, value) in labels {
        check_label_key(errors, &format!("{path}.{key}"), key);
        if !value.is_empty() && label_part_error(value).is_some() {
            errors.add(
                format!("{path}.{key}"),
                format!(
                    "label value {value:?} must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
                ),
            );
        }
    }
}

fn check_label_key(errors: &mut Errors, path: &str, key: &str) {
    let name = match key.split_once('/') {
        Some((prefix, name)) => {
            if let Some(message) = dns_subdomain_error(prefix) {
                errors.add(path, format!("label key prefix {prefix:?}: {message}"));
            }
            name
        }
        None => key,
    };
    if let Some(message) = label_part_error(name) {
        errors.add(path, format!("label key {key:?}: {message}"));
    }
}

/// A label key's name or a label value: at most 63 of `[A-Za-z0-9_.-]`, alphanumeric at both ends.
fn label_part_error(text: &str) -> Option<String> {
    if text.is_empty() {
        return Some("must not be empty".into());
    }
    if text.len() > MAX_LABEL {
        return Some(format!("must be at most {MAX_LABEL} characters"));
    }
    let ends_ok = text.starts_with(|c: char| c.is_ascii_alphanumeric()) && text.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !ends_ok || !text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) {
        return Some("must be letters, digits, '-', '_' or '.', starting and ending with a letter or digit".into());
    }
    None
}

/// A DNS-1123 label: at most 63 lower-case letters, digits and '-', alphanumeric at both ends.
pub fn dns_label_error(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("must not be empty".into());
    }
    if name.len() > MAX_LABEL {
        return Some(format!("must be at most {MAX_LABEL} characters, got {}", name.len()));
    }
    if !is_dns_label(name) {
        return Some(format!(
            "{name:?} is not a valid DNS-1123 label: use lower-case letters, digits and '-', starting and ending with a letter or digit"
        ));
    }
    None
}

/// A node's name: a DNS-1123 subdomain that is also a valid value of the node's
/// `kubernetes.io/hostname` label, which the server sets to it, so at most 63 characters
/// (the kubelet cannot register a longer one either).
pub fn node_name_error(name: &str) -> Option<String> {
    dns_subdomain_error(name).or_else(|| {
        (name.len() > MAX_LABEL).then(|| {
            format!(
                "must be at most {MAX_LABEL} characters, as it is the value of the node's kubernetes.io/hostname label, got {}",
                name.len()
            )
        })
    })
}

/// A DNS-1123 subdomain as Kubernetes checks an object's name (`IsDNS1123Subdomain`): at
/// most 253 characters of dot-separated parts written as DNS-1123 labels, with no limit of
/// their own on the parts (a host name's labels have one: [`agent_endpoint_error`]).
pub fn dns_subdomain_error(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("must not be empty".into());
    }
    if name.len() > MAX_NAME {
        return Some(format!("must be at most {MAX_NAME} characters, got {}", name.len()));
    }
    if !name.split('.').all(is_dns_label_text) {
        return Some(format!(
            "{name:?} is not a valid DNS-1123 name: use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
        ));
    }
    None
}

/// A DNS-1035 label as Kubernetes checks a Service's name (`IsDNS1035Label`): at most 63
/// lower-case letters, digits and '-', starting with a letter and ending with a letter or
/// digit. Kubernetes' words, one message for each rule broken.
pub fn dns_1035_label_errors(name: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if name.len() > MAX_LABEL {
        errors.push(format!("must be no more than {MAX_LABEL} characters"));
    }
    let well_formed = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-');
    if !well_formed {
        errors.push(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end \
             with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
                .into(),
        );
    }
    errors
}

fn is_dns_label(part: &str) -> bool {
    part.len() <= MAX_LABEL && is_dns_label_text(part)
}

/// Lower-case letters, digits and '-', alphanumeric at both ends, of any length.
fn is_dns_label_text(part: &str) -> bool {
    !part.is_empty()
        && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !part.starts_with('-')
        && !part.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ContainerPort, Toleration};

    fn pod() -> Pod {
        serde_json::from_str(
            r#"{"kind":"Pod","metadata":{"name":"web","labels":{"app":"web"}},
                "spec":{"containers":[{"name":"web","image":"minimal","resources":{"memory":1,"cpu":1}}]}}"#,
        )
        .unwrap()
    }

    fn fields(result: Result<(), Vec<FieldError>>) -> Vec<String> {
        result.unwrap_err().into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn a_good_pod_passes() {
        assert_eq!(validate_pod(&pod()), Ok(()));
    }

    #[test]
    fn every_error_is_reported_with_its_path() {
        let mut p = pod();
        p.metadata.name = "Web_Server".into();
        p.spec.restart_policy = "Sometimes".into();
        p.spec.dns_policy = "None".into();
        let mut second = p.spec.containers[0].clone();
        second.image = String::new();
        second.image_pull_policy = "Sometimes".into();
        second.resources.memory = -1;
        second.resources.cpu = -5;
        second.ports = vec![ContainerPort { container_port: 70000, ..Default::default() }];
        p.spec.containers.push(second);
        let errors = fields(validate_pod(&p));
        assert_eq!(
            errors,
            vec![
                "metadata.name",
                "spec.containers[1].image",
                "spec.containers[1].image_pull_policy",
                "spec.containers[1].resources.memory",
                "spec.containers[1].resources.cpu",
                "spec.containers[1].ports[0].container_port",
                "spec.containers[1].name",
                "spec.restart_policy",
                "spec.dns_policy",
            ]
        );
        for policy in ["", "ClusterFirst", "ClusterFirstWithHostNet", "Default"] {
            let mut good = pod();
            good.spec.dns_policy = policy.into();
            assert_eq!(validate_pod(&good), Ok(()), "{policy:?}");
        }
    }

    #[test]
    fn every_amount_and_count_is_bounded() {
        let mut p = pod();
        p.spec.containers[0].resources =
            crate::model::ResourceRequirements { cpu: 5_000_000_000_000_000_000, memory: MAX_MEMORY_BYTES + 1 };
        p.spec.termination_grace_period_seconds = Some(i64::MAX);
        assert_eq!(
            fields(validate_pod(&p)),
            vec!["spec.containers[0].resources.memory", "spec.containers[0].resources.cpu", "spec.termination_grace_period_seconds"]
        );
        let error = validate_pod(&p).unwrap_err()[1].clone();
        assert_eq!(error.value.as_deref(), Some("5000000000000000000"), "the bad value apart, as Kubernetes' field.Invalid keeps it");
        assert_eq!(
            error.to_string(),
            "spec.containers[0].resources.cpu: must be between 0 and 1000000000 millicores (1000000 cores), got 5000000000000000000"
        );

        let mut at_the_bounds = pod();
        at_the_bounds.spec.containers[0].resources =
            crate::model::ResourceRequirements { cpu: MAX_CPU_MILLICORES, memory: MAX_MEMORY_BYTES };
        at_the_bounds.spec.termination_grace_period_seconds = Some(MAX_GRACE_SECONDS);
        let container = at_the_bounds.spec.containers[0].clone();
        at_the_bounds.spec.containers = (0..MAX_CONTAINERS).map(|i| Container { name: format!("c{i}"), ..container.clone() }).collect();
        assert_eq!(validate_pod(&at_the_bounds), Ok(()));
        at_the_bounds.spec.containers.push(Container { name: "one-more".into(), ..container });
        assert_eq!(fields(validate_pod(&at_the_bounds)), vec!["spec.containers"]);

        let huge = NodeResources { cpu: MAX_CPU_MILLICORES + 1, memory: -1, pods: MAX_NODE_PODS + 1 };
        let beat = Heartbeat { capacity: Some(huge), allocatable: Some(NodeResources::default()), ..Heartbeat::default() };
        assert_eq!(fields(validate_heartbeat(&beat)), vec!["capacity.cpu", "capacity.memory", "capacity.pods"]);
        let scale = Scale { spec: crate::model::ScaleSpec { replicas: MAX_REPLICAS + 1 }, ..Scale::default() };
        assert_eq!(fields(validate_scale(&scale)), vec!["spec.replicas"]);
        assert_eq!(grace_seconds_error(MAX_GRACE_SECONDS), None);
        assert!(grace_seconds_error(-1).is_some());
    }

    #[test]
    fn annotations_of_every_kind_are_at_most_256_kib_keys_and_values_together() {
        let mut p = pod();
        p.metadata.annotations.insert("a".into(), "x".repeat(MAX_ANNOTATION_BYTES - 1));
        assert_eq!(validate_pod(&p), Ok(()), "exactly at the limit");
        p.metadata.annotations.insert("b".into(), String::new());
        let errors = validate_pod(&p).unwrap_err();
        assert_eq!(errors.len(), 1);
        assert_eq!((errors[0].field.as_str(), errors[0].type_), ("metadata.annotations", FieldErrorType::TooLong));
        assert_eq!(errors[0].message, "Too long: must have at most 262144 bytes");
        let mut map = ConfigMap { metadata: ObjectMeta::named("default", "big"), ..Default::default() };
        map.metadata.annotations = p.metadata.annotations.clone();
        assert_eq!(fields(validate_config_map(&map)), vec!["metadata.annotations"]);
    }

    #[test]
    fn probes_are_refused_as_kubernetes_refuses_them() {
        use crate::model::{ExecAction, HttpGetAction, TcpSocketAction};
        let mut p = pod();
        p.spec.containers[0].liveness_probe = Some(Probe {
            exec: Some(ExecAction { command: vec!["true".into()] }),
            http_get: Some(HttpGetAction { port: ProbePort::Number(80), ..Default::default() }),
            tcp_socket: Some(TcpSocketAction { port: ProbePort::Number(80), ..Default::default() }),
            ..Default::default()
        });
        let errors = validate_pod(&p).unwrap_err();
        let extra: Vec<(&str, FieldErrorType)> = errors.iter().map(|e| (e.field.as_str(), e.type_)).collect();
        assert_eq!(
            extra,
            [
                ("spec.containers[0].liveness_probe.http_get", FieldErrorType::Forbidden),
                ("spec.containers[0].liveness_probe.tcp_socket", FieldErrorType::Forbidden)
            ],
            "each extra handler by name"
        );
        let probe = p.spec.containers[0].liveness_probe.as_mut().unwrap();
        (probe.exec, probe.tcp_socket) = (None, None);
        probe.http_get.as_mut().unwrap().path = "healthz".into();
        assert_eq!(validate_pod(&p), Ok(()), "a path without its leading '/' is taken, as Kubernetes takes it");
        p.spec.containers[0].liveness_probe.as_mut().unwrap().http_get.as_mut().unwrap().path = "/a b".into();
        assert_eq!(fields(validate_pod(&p)), vec!["spec.containers[0].liveness_probe.http_get.path"]);
    }

    #[test]
    fn a_value_outside_a_fixed_set_lists_the_set() {
        let mut p = pod();
        p.spec.restart_policy = "Sometimes".into();
        let error = validate_pod(&p).unwrap_err().remove(0);
        assert_eq!(error.type_, FieldErrorType::NotSupported);
        assert_eq!(
            (error.value.as_deref(), error.message.as_str()),
            (Some("\"Sometimes\""), "supported values: \"Always\", \"OnFailure\", \"Never\"")
        );
    }

    #[test]
    fn a_pod_needs_containers() {
        let mut p = pod();
        p.spec.containers.clear();
        assert_eq!(fields(validate_pod(&p)), vec!["spec.containers"]);
    }

    #[test]
    fn names_must_be_dns_1123() {
        assert!(dns_subdomain_error("web-server.v1").is_none());
        assert!(dns_subdomain_error("-web").is_some());
        assert!(dns_subdomain_error("web-").is_some());
        assert!(dns_subdomain_error("WEB").is_some());
        assert!(dns_subdomain_error("a..b").is_some());
        assert_eq!(dns_subdomain_error(&"a".repeat(254)).unwrap(), "must be at most 253 characters, got 254");
        // Kubernetes limits an object's name, not its parts: a 64-character pod name is valid.
        assert_eq!(dns_subdomain_error(&"b".repeat(64)), None);
        assert_eq!(dns_subdomain_error(&format!("{}.{}", "b".repeat(126), "c".repeat(126))), None);
        // A node's name is also its hostname label's value.
        assert_eq!(node_name_error(&"n".repeat(63)), None);
        assert!(node_name_error(&format!("{}.example", "n".repeat(60))).unwrap().starts_with("must be at most 63 characters, as it is"));
        assert!(node_name_error("N1").unwrap().contains("is not a valid DNS-1123 name"));
        let mut node: Node = serde_json::from_str(r#"{"kind":"Node","metadata":{"name":"node-1"}}"#).unwrap();
        node.metadata.name = "n".repeat(64);
        assert_eq!(fields(validate_node(&node)), vec!["metadata.name"]);
        node.metadata.name = "N".repeat(64);
        assert_eq!(fields(validate_node(&node)), vec!["metadata.name"], "one error for one name");
        assert!(dns_label_error("a.b").is_some());
        assert!(dns_label_error(&"a".repeat(64)).is_some());
        assert!(dns_label_error(&"a".repeat(63)).is_none());
    }

    #[test]
    fn ports_and_protocols_are_checked() {
        let mut p = pod();
        p.spec.containers[0].ports = vec![
            ContainerPort { container_port: 0, ..Default::default() },
            ContainerPort { container_port: 80, host_port: Some(8080), protocol: "tcp".into(), ..Default::default() },
            ContainerPort { container_port: 81, host_port: Some(8080), ..Default::default() },
            ContainerPort { container_port: 82, host_port: Some(8080), protocol: "UDP".into(), ..Default::default() },
            ContainerPort { container_port: 83, protocol: "sctp".into(), ..Default::default() },
        ];
        assert_eq!(
            fields(validate_pod(&p)),
            vec![
                "spec.containers[0].ports[0].container_port",
                "spec.containers[0].ports[4].protocol",
                "spec.containers[0].ports[2].host_port"
            ]
        );
    }

    #[test]
    fn container_port_names_are_iana_service_names() {
        for good in ["", "http", "metrics-2", "a", "h2c", "abcdefghijklmno"] {
            assert_eq!(port_name_error(good), None, "{good:?}");
        }
        for bad in ["Bad_Name", "HTTP", "abcdefghijklmnop", "8080", "-http", "http-", "my--port", "web.api"] {
            assert!(port_name_error(bad).is_some(), "{bad:?}");
        }
        let mut p = pod();
        p.spec.containers[0].ports = vec![ContainerPort { name: "Bad_Name".into(), container_port: 80, ..Default::default() }];
        let errors = validate_pod(&p).unwrap_err();
        assert_eq!(errors[0].field, "spec.containers[0].ports[0].name");
        assert!(errors[0].message.starts_with("port name \"Bad_Name\" must be lower-case letters"), "{}", errors[0].message);
    }

    #[test]
    fn tolerations_are_checked() {
        let mut p = pod();
        p.spec.tolerations = vec![
            Toleration { operator: "Exists".into(), ..Default::default() },
            Toleration { key: "gpu".into(), operator: "Maybe".into(), ..Default::default() },
            Toleration { key: "".into(), ..Default::default() },
            Toleration { key: "gpu".into(), effect: "Sometimes".into(), ..Default::default() },
        ];
        assert_eq!(fields(validate_pod(&p)), vec!["spec.tolerations[1].operator", "spec.tolerations[2].key", "spec.tolerations[3].effect"]);
    }

    #[test]
    fn a_deployment_selector_must_match_its_template() {
        let mut d: Deployment = serde_json::from_str(
            r#"{"kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":2,"selector":{"app":"web"},
                "template":{"metadata":{"labels":{"app":"api"}},"spec":{"containers":[{"name":"c","image":"minimal"}]}}}}"#,
        )
        .unwrap();
        assert_eq!(fields(validate_deployment(&d)), vec!["spec.template.metadata.labels"]);
        d.spec.replicas = -1;
        d.spec.selector = Default::default();
        assert_eq!(fields(validate_deployment(&d)), vec!["spec.replicas", "spec.selector"]);
    }

    #[test]
    fn labels_are_checked() {
        let mut p = pod();
        p.metadata.labels.insert("bad key".into(), "v".into());
        p.metadata.labels.insert("example.com/ok".into(), "-bad".into());
        assert_eq!(fields(validate_pod(&p)), vec!["metadata.labels.bad key", "metadata.labels.example.com/ok"]);
    }

    #[test]
    fn services_and_nodes_are_checked() {
        let s: Service = serde_json::from_str(
            r#"{"kind":"Service","metadata":{"name":"svc"},"spec":{"type":"LoadBalancer","ports":[{"port":0,"target_port":8080,"protocol":"icmp"}]}}"#,
        )
        .unwrap();
        assert_eq!(fields(validate_service(&s)), vec!["spec.type", "spec.ports[0].port", "spec.ports[0].protocol"]);
        let n: Node = serde_json::from_str(
            r#"{"kind":"Node","metadata":{"name":"node-1"},"status":{"capacity":{"cpu":-1},"taints":[{"key":"gpu","effect":"Never"}]}}"#,
        )
        .unwrap();
        assert_eq!(fields(validate_node(&n)), vec!["status.capacity.cpu", "status.taints[0].effect"]);
    }

    #[test]
    fn the_ports_of_a_service_are_named_once_there_are_several_and_each_serves_one_protocol_once() {
        let service = |ports: &str| -> Service {
            serde_json::from_str(&format!(
                r#"{{"kind":"Service","metadata":{{"name":"svc"}},"spec":{{"type":"NodePort","ports":{ports}}}}}"#
            ))
            .unwrap()
        };
        let errors = validate_service(&service(r#"[{"port":80},{"port":81}]"#)).unwrap_err();
        assert_eq!(fields(Err(errors.clone())), vec!["spec.ports[0].name", "spec.ports[1].name"]);
        assert!(errors.iter().all(|e| e.type_ == FieldErrorType::Required));
        let errors = validate_service(&service(
            r#"[{"name":"a","port":80,"node_port":30080},{"name":"a","port":80,"protocol":"TCP","node_port":30080},{"name":"c","port":80,"protocol":"UDP","node_port":30080}]"#,
        ))
        .unwrap_err();
        assert_eq!(fields(Err(errors.clone())), vec!["spec.ports[1]", "spec.ports[1].node_port", "spec.ports[1].name"]);
        assert!(errors.iter().all(|e| e.type_ == FieldErrorType::Duplicate), "{errors:?}");
        assert_eq!(errors[0].value.as_deref(), Some(r#"{"port":80,"protocol":"TCP"}"#));
        assert!(validate_service(&service(r#"[{"name":"dns","port":53},{"name":"dns-udp","port":53,"protocol":"UDP"}]"#)).is_ok());
        let errors = validate_service(&service(r#"[{"name":"HTTP","port":80},{"name":"a.b","port":81}]"#)).unwrap_err();
        assert_eq!(fields(Err(errors.clone())), vec!["spec.ports[0].name", "spec.ports[1].name"], "names of SRV records");
        assert_eq!(errors[0].value.as_deref(), Some(r#""HTTP""#));
    }

    #[test]
    fn an_agent_endpoint_is_a_scheme_host_and_port_and_at_most_the_fleet_path_of_its_node() {
        for good in [
            "http://127.0.0.1:10250",
            "https://node-1.example:10250",
            "http://[::1]:10250",
            "http://localhost:1",
            "http://127.0.0.1:23001/nodes/node-1",
        ] {
            assert_eq!(agent_endpoint_error(good, "node-1"), None, "{good}");
        }
        for bad in [
            "127.0.0.1:10250",
            "ftp://127.0.0.1:10250",
            "http://127.0.0.1",
            "http://127.0.0.1:0",
            "http://127.0.0.1:+80",
            "http://127.0.0.1:080",
            "http://127.0.0.1:00080",
            "http://127.0.0.1:00",
            "http://127.0.0.1:65536",
            "http://127.0.0.1:10250/",
            "http://127.0.0.1:10250/admin",
            "http://127.0.0.1:10250/nodes/node-2",
            "http://127.0.0.1:10250/nodes/node-1/..",
            "http://127.0.0.1:10250?x=1",
            "http://127.0.0.1:10250#x",
            "http://user:secret@127.0.0.1:10250",
            "http://[::1:10250",
            "http://Node.example:10250",
            "http://node-1.bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.example:10250",
            "http://a b:10250",
        ] {
            let error = agent_endpoint_error(bad, "node-1").unwrap_or_else(|| panic!("{bad} passed"));
            assert!(error.contains("/nodes/node-1") && error.contains(bad), "{error}");
        }
        for good in [
            "http://10.0.0.7:10250",
            "http://192.168.1.2:10250",
            "http://[::ffff:127.0.0.1]:10250",
            "http://[fd00::1]:10250",
            "http://node-1.a9:10250",
            "http://127.0.0.1:65535",
            "http://[64:ff9b::a00:7]:10250",
            "http://[::10.0.0.7]:10250",
            "http://[2002:7f00:1::]:10250",
            "http://[::1]:10250",
            "http://255.255.255.254:10250",
        ] {
            assert_eq!(agent_endpoint_error(good, "node-1"), None, "loopback and private addresses are where agents run: {good}");
        }
        for (bad, kind) in [
            ("http://169.254.169.254:80", "a link-local"),
            ("http://[fe80::1]:10250", "a link-local"),
            ("http://[::ffff:169.254.169.254]:80", "a link-local"),
            ("http://[::ffff:a9fe:a9fe]:80", "a link-local"),
            ("http://0.0.0.0:10250", "an unspecified"),
            ("http://0.1.2.3:10250", "an unspecified"),
            ("http://[::]:10250", "an unspecified"),
            ("http://[::ffff:0.0.0.0]:10250", "an unspecified"),
            ("http://224.0.0.1:10250", "a multicast"),
            ("http://[ff02::1]:10250", "a multicast"),
            ("http://255.255.255.255:80", "a broadcast"),
            ("http://[::ffff:255.255.255.255]:80", "a broadcast"),
            // NAT64 (64:ff9b::/96), IPv4-compatible (::/96) and 6to4 (2002::/16) forms embed
            // an IPv4 address that a gateway or tunnel reaches.
            ("http://[64:ff9b::a9fe:a9fe]:80", "a link-local"),
            ("http://[64:ff9b::169.254.169.254]:80", "a link-local"),
            ("http://[::169.254.169.254]:80", "a link-local"),
            ("http://[::a9fe:a9fe]:80", "a link-local"),
            ("http://[2002:a9fe:a9fe::]:80", "a link-local"),
            ("http://[2002:a9fe:a9fe:1::1]:80", "a link-local"),
            ("http://[64:ff9b::e000:1]:10250", "a multicast"),
            ("http://[::0.0.0.2]:10250", "an unspecified"),
            ("http://[2002:ffff:ffff::]:80", "a broadcast"),
        ] {
            let error = agent_endpoint_error(bad, "node-1").unwrap_or_else(|| panic!("{bad} passed"));
            assert!(error.contains(&format!("{kind} address, which the server sends no request to")) && error.contains(bad), "{error}");
        }
        let error = agent_endpoint_error("http://[2002:a9fe:a9fe::]:80", "node-1").unwrap();
        assert!(error.contains("names [2002:a9fe:a9fe::] (which carries 169.254.169.254), a link-local address"), "{error}");
        for bad in [
            "http://0x7f000001:19890",
            "http://2130706433:80",
            "http://127.1:80",
            "http://0xa9.0xfe.0xa9.0xfe:80",
            "http://169.254.169.0254:80",
            "http://a.1e:80",
        ] {
            let error = agent_endpoint_error(bad, "node-1").unwrap_or_else(|| panic!("{bad} passed"));
            assert!(error.contains("a resolver reads it as an IPv4 address") && error.contains(bad), "{error}");
        }
        let mut n: Node = serde_json::from_str(r#"{"kind":"Node","metadata":{"name":"node-1"}}"#).unwrap();
        n.status.agent_endpoint = "http://169.254.169.254:80/latest/meta-data".into();
        assert_eq!(fields(validate_node(&n)), vec!["status.agent_endpoint"]);
    }

    #[test]
    fn config_keys_sizes_and_duplicates_are_checked_as_kubernetes_does() {
        for good in ["a", "KEY_NAME", "key.name", "key-name", ".hidden", "a..b"] {
            assert_eq!(config_key_error(good), None, "{good}");
        }
        for (bad, words) in [
            ("", "a valid config key"),
            ("has space", "a valid config key"),
            ("a/b", "a valid config key"),
            (".", "must not be '.'"),
            ("..", "must not be '..'"),
            ("..data", "must not start with '..'"),
        ] {
            assert!(config_key_error(bad).is_some_and(|m| m.contains(words)), "{bad:?}");
        }
        assert!(config_key_error(&"k".repeat(254)).unwrap().contains("253"));

        let mut map = ConfigMap { kind: "ConfigMap".into(), metadata: ObjectMeta::named("default", "cfg"), ..Default::default() };
        map.data.insert("a".into(), "1".into());
        map.binary_data.insert("a".into(), vec![0]);
        map.binary_data.insert("bad key".into(), vec![0]);
        assert_eq!(fields(validate_config_map(&map)), vec!["binary_data[bad key]", "binary_data[a]"]);
        map.binary_data.clear();
        map.data = [("big".to_string(), "x".repeat(MAX_CONFIG_BYTES - 1))].into();
        map.binary_data.insert("one".into(), vec![0]);
        assert_eq!(validate_config_map(&map), Ok(()), "1 MiB of values in both maps, keys not counted");
        map.binary_data.insert("two".into(), vec![0]);
        let errors = validate_config_map(&map).unwrap_err();
        assert_eq!(errors.iter().map(ToString::to_string).collect::<Vec<_>>(), ["[]: Too long: must have at most 1048576 bytes"]);
    }

    #[test]
    fn a_secrets_errors_name_keys_and_never_values() {
        let mut secret = Secret { kind: "Secret".into(), metadata: ObjectMeta::named("default", "s"), ..Default::default() };
        secret.string_data.insert("bad key".into(), "hunter2".into());
        secret.type_ = "kubernetes.io/tls".into();
        let errors = validate_secret(&secret).unwrap_err();
        let text = format!("{errors:?}");
        assert!(!text.contains("hunter2"), "{text}");
        assert_eq!(
            errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "string_data[bad key]: a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name', \
                 or 'KEY_NAME', or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                "data[tls.crt]: Required value",
                "data[tls.key]: Required value"
            ]
        );
        secret.string_data = [("big".to_string(), "x".repeat(MAX_CONFIG_BYTES))].into();
        secret.type_.clear();
        assert_eq!(validate_secret(&secret), Ok(()), "exactly 1 MiB of values");
        secret.data.insert("more".into(), vec![0]);
        let errors = validate_secret(&secret).unwrap_err();
        assert_eq!(
            errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["data: Too long: must have at most 1048576 bytes"],
            "string_data counts as merged"
        );
    }

    fn typed_secret(type_: &str, data: &[(&str, &str)]) -> Secret {
        let mut secret =
            Secret { kind: "Secret".into(), metadata: ObjectMeta::named("default", "s"), type_: type_.into(), ..Default::default() };
        secret.string_data = data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        secret
    }

    fn messages(result: Result<(), Vec<FieldError>>) -> Vec<String> {
        result.err().unwrap_or_default().iter().map(ToString::to_string).collect()
    }

    #[test]
    fn each_built_in_secret_type_requires_what_kubernetes_requires() {
        for (type_, data, expected) in [
            ("Opaque", &[][..], &[][..]),
            ("", &[], &[]),
            ("example.com/custom", &[], &[]),
            ("kubernetes.io/tls", &[("tls.crt", "c")], &["data[tls.key]: Required value"]),
            ("kubernetes.io/tls", &[("tls.crt", ""), ("tls.key", "")], &[]),
            ("kubernetes.io/ssh-auth", &[], &["data[ssh-privatekey]: Required value"]),
            ("kubernetes.io/ssh-auth", &[("ssh-privatekey", "")], &["data[ssh-privatekey]: Required value"]),
            ("kubernetes.io/ssh-auth", &[("ssh-privatekey", "k")], &[]),
            ("kubernetes.io/basic-auth", &[], &["data[username]: Required value", "data[password]: Required value"]),
            ("kubernetes.io/basic-auth", &[("password", "")], &[]),
            ("kubernetes.io/basic-auth", &[("username", "u")], &[]),
            ("kubernetes.io/dockercfg", &[], &["data[.dockercfg]: Required value"]),
            ("kubernetes.io/dockercfg", &[(".dockercfg", r#"{"registry": {}}"#)], &[]),
            ("kubernetes.io/dockerconfigjson", &[], &["data[.dockerconfigjson]: Required value"]),
            ("kubernetes.io/dockerconfigjson", &[(".dockerconfigjson", r#"{"auths": {}}"#)], &[]),
            ("kubernetes.io/dockerconfigjson", &[(".dockerconfigjson", "null")], &[]),
            ("kubernetes.io/service-account-token", &[], &["metadata.annotations[kubernetes.io/service-account.name]: Required value"]),
        ] {
            assert_eq!(messages(validate_secret(&typed_secret(type_, data))), expected, "{type_} {data:?}");
        }
        let mut token = typed_secret("kubernetes.io/service-account-token", &[]);
        token.metadata.annotations.insert("kubernetes.io/service-account.name".into(), "builder".into());
        assert_eq!(validate_secret(&token), Ok(()));
        token.metadata.annotations.insert("kubernetes.io/service-account.name".into(), String::new());
        assert_eq!(fields(validate_secret(&token)), ["metadata.annotations[kubernetes.io/service-account.name]"]);
        // Given in `data` as in `string_data`.
        let mut tls = typed_secret("kubernetes.io/tls", &[("tls.crt", "c")]);
        tls.data.insert("tls.key".into(), b"k".to_vec());
        assert_eq!(validate_secret(&tls), Ok(()));
    }

    #[test]
    fn a_docker_config_that_is_no_json_object_is_refused_without_its_content() {
        for (content, problem) in [
            ("hunter2", "expected value at line 1 column 1"),
            (r#"{"auths": "hunter2""#, "EOF while parsing an object at line 1 column 19"),
            (r#"["hunter2"]"#, "must be a JSON object, not an array"),
            (r#""hunter2""#, "must be a JSON object, not a string"),
        ] {
            let errors = validate_secret(&typed_secret("kubernetes.io/dockerconfigjson", &[(".dockerconfigjson", content)])).unwrap_err();
            assert_eq!(
                messages(Err(errors.clone())),
                [format!("data[.dockerconfigjson]: {problem}, got \"<secret contents redacted>\"")],
                "{content}"
            );
            assert!(!format!("{errors:?}").contains("hunter2"));
        }
        let errors = messages(validate_secret(&typed_secret("kubernetes.io/dockercfg", &[(".dockercfg", "hunter2")])));
        assert_eq!(errors, ["data[.dockercfg]: expected value at line 1 column 1, got \"<secret contents redacted>\""]);
    }

    #[test]
    fn a_service_name_is_a_dns_1035_label_in_kubernetes_words() {
        const RULE: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic \
                            character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for \
                            validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
        for good in ["a", "web", "web-1", "a1b2", &"s".repeat(63)] {
            assert_eq!(dns_1035_label_errors(good), Vec::<String>::new(), "{good}");
        }
        for bad in ["a.b", "1abc", "web.default", "-web", "web-", "Web", "a_b", ""] {
            assert_eq!(dns_1035_label_errors(bad), [RULE], "{bad}");
        }
        assert_eq!(dns_1035_label_errors(&"s".repeat(64)), ["must be no more than 63 characters"]);
        assert_eq!(dns_1035_label_errors(&"S".repeat(64)), ["must be no more than 63 characters", RULE]);

        let mut service: Service = serde_json::from_str(r#"{"kind":"Service","metadata":{"name":"a.b"}}"#).unwrap();
        let errors = validate_service(&service).unwrap_err();
        assert_eq!(
            errors,
            [FieldError { value: Some(r#""a.b""#.into()), ..FieldError::new("metadata.name", RULE) }],
            "one error, with the name"
        );
        service.metadata.name = "1abc".into();
        assert_eq!(fields(validate_service(&service)), ["metadata.name"]);
        // Other kinds keep the DNS-1123 subdomain rule.
        let mut p = pod();
        p.metadata.name = "1abc.web".into();
        assert_eq!(validate_pod(&p), Ok(()));
    }
}
