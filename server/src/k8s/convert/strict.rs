//! The rules for refusing fields: a body is read into the Kubernetes type, translated, and
//! translated back; any field the body set that does not come back is one Shepherd does not
//! hold, and is refused by name ([`decode`]), with native field paths spelled as Kubernetes'.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use shared::api::{FieldError, FieldErrorType};
use shared::model::Kind;
use shared::strict::is_empty;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Not the Kubernetes shape at all (a string where an object belongs, bad JSON).
    #[error("the body is not a valid {kind}: {message}")]
    Malformed { kind: &'static str, message: String },
    /// Every field Shepherd refuses, each unsupported (Kubernetes has it, Shepherd does not
    /// do it) or invalid (a bad value), as Kubernetes' `Pod "web" is invalid: ...`.
    #[error("{kind} {name:?} is invalid: {}", summary(.causes))]
    Refused { kind: &'static str, name: String, causes: Vec<Cause> },
}

/// One cause as it is, several in brackets: how Kubernetes joins a list of field errors.
fn summary(causes: &[Cause]) -> String {
    let each: Vec<String> = causes.iter().map(ToString::to_string).collect();
    match each.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Why a field is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// A Kubernetes field or value that Shepherd does not do.
    Unsupported,
    /// A value that is wrong in Kubernetes too.
    Invalid,
    /// A field Kubernetes requires, left out.
    Required,
    /// A field that may not be set here at all.
    Forbidden,
    /// A value outside the set Kubernetes allows (`field.NotSupported`).
    NotSupported,
    /// A value over a size limit.
    TooLong,
    /// A value given twice where each must be unique.
    Duplicate,
    /// A field Kubernetes does not have either: a typo, most likely.
    Unknown,
}

/// One refused field: which, why, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    pub problem: Problem,
    pub field: String,
    pub message: String,
}

impl Cause {
    pub fn unsupported(field: impl Into<String>, message: impl Into<String>) -> Cause {
        Cause { problem: Problem::Unsupported, field: field.into(), message: message.into() }
    }

    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Cause {
        Cause { problem: Problem::Invalid, field: field.into(), message: message.into() }
    }

    /// A native field error in Kubernetes' words: its class, the bad value before the
    /// message (`Invalid value: "http": …`), and the fields the message names in backticks
    /// spelled as Kubernetes' (`` `max_unavailable` `` is `` `maxUnavailable` ``).
    fn from_native(kind: Kind, error: FieldError) -> Cause {
        let field = k8s_field(kind, &error.field);
        let message = backticked_fields_in_camel_case(&error.message);
        match (error.type_, error.value) {
            (FieldErrorType::Required, _) => Cause { problem: Problem::Required, field, message },
            (FieldErrorType::Forbidden, _) => Cause { problem: Problem::Forbidden, field, message },
            (FieldErrorType::TooLong, _) => Cause { problem: Problem::TooLong, field, message },
            (FieldErrorType::Duplicate, value) => Cause { problem: Problem::Duplicate, field, message: value.unwrap_or(message) },
            (FieldErrorType::NotSupported, value) => {
                let message = value.map_or(message.clone(), |value| format!("{value}: {message}"));
                Cause { problem: Problem::NotSupported, field, message }
            }
            (FieldErrorType::Invalid, Some(value)) => Cause::invalid(field, format!("{value}: {message}")),
            (FieldErrorType::Invalid, None) => Cause::invalid(field, message),
        }
    }

    pub fn unknown(field: impl Into<String>) -> Cause {
        Cause { problem: Problem::Unknown, field: field.into(), message: "Kubernetes' schema has no such field (a typo?)".into() }
    }

    /// The cause's `reason` in a Status: Kubernetes' `FieldValueNotSupported` or `FieldValueInvalid`.
    pub fn reason(&self) -> &'static str {
        match self.problem {
            Problem::Unsupported | Problem::NotSupported => "FieldValueNotSupported",
            Problem::TooLong => "FieldValueTooLong",
            Problem::Duplicate => "FieldValueDuplicate",
            Problem::Invalid => "FieldValueInvalid",
            Problem::Required => "FieldValueRequired",
            Problem::Forbidden => "FieldValueForbidden",
            Problem::Unknown => "FieldValueUnknown",
        }
    }

    /// `Unsupported: ...`, `Invalid value: ...`, `Required value: ...` or `Forbidden: ...`,
    /// the words Kubernetes' causes start with.
    pub fn words(&self) -> String {
        match self.problem {
            Problem::Unsupported => format!("Unsupported: {}", self.message),
            Problem::Invalid => format!("Invalid value: {}", self.message),
            Problem::Required if self.message.is_empty() => "Required value".to_string(),
            Problem::Required => format!("Required value: {}", self.message),
            Problem::Forbidden => format!("Forbidden: {}", self.message),
            Problem::NotSupported => format!("Unsupported value: {}", self.message),
            // The native message already says `Too long: …`.
            Problem::TooLong => self.message.clone(),
            Problem::Duplicate => format!("Duplicate value: {}", self.message),
            Problem::Unknown => format!("unknown field: {}", self.message),
        }
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.words())
    }
}

/// A kind both dialects serve: its Kubernetes type and the translation both ways.
pub trait Convert: crate::resources::Resource {
    type K8s: Serialize + DeserializeOwned + k8s_openapi::Resource;
    fn to_k8s(&self) -> Self::K8s;
    /// Pushes a cause for each value Shepherd cannot keep and returns what it can keep;
    /// fields it does not hold at all are found by [`decode`].
    fn from_k8s(object: Self::K8s, causes: &mut Vec<Cause>) -> Self;
    /// Annotations that `to_k8s` shows from the object's own fields: a body that sends them
    /// back (an edit, a patch of what was read) changes nothing by them, and they are not kept.
    const SHOWN_ANNOTATIONS: &'static [&'static str] = &[];
    /// Top-level fields that `from_k8s` folds into others (a Secret's `stringData` into
    /// `data`): a read never shows them, so the round trip does not judge them.
    const WRITE_ONLY: &'static [&'static str] = &[];
}

/// `value` without `annotations`; an emptied map goes too.
fn without_annotations(value: &Value, annotations: &[&str]) -> Value {
    let mut value = value.clone();
    if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        if let Some(map) = metadata.get_mut("annotations").and_then(Value::as_object_mut) {
            map.retain(|key, _| !annotations.contains(&key.as_str()));
        }
        if metadata.get("annotations").and_then(Value::as_object).is_some_and(serde_json::Map::is_empty) {
            metadata.remove("annotations");
        }
    }
    value
}

/// Fields a client may send that Shepherd does not keep from a body, as Kubernetes does not:
/// the server owns them, or (managedFields, status) they have their own way in.
const SERVER_OWNED: [&str; 9] = [
    "apiVersion",
    "kind",
    "status",
    "metadata.managedFields",
    "metadata.creationTimestamp",
    "metadata.generation",
    "metadata.selfLink",
    "metadata.uid",
    "metadata.deletionTimestamp",
];

/// Reads `value` as a `R`, refusing (with every path) the fields Shepherd would drop.
pub fn decode<R: Convert>(value: &Value) -> Result<R> {
    decode_over(value, None)
}

/// Reads `value` as a `R` that replaces `stored` (when there is one): as [`decode`], with
/// what the update takes from the stored object ([`Resource::carry_from`]) taken before
/// it is validated, as kube-apiserver prepares an update before validating it.
///
/// [`Resource::carry_from`]: crate::resources::Resource::carry_from
pub fn decode_over<R: Convert>(value: &Value, stored: Option<&R>) -> Result<R> {
    let stripped;
    let value = match R::SHOWN_ANNOTATIONS {
        [] => value,
        shown => {
            stripped = without_annotations(value, shown);
            &stripped
        }
    };
    let kind = <R::K8s as k8s_openapi::Resource>::KIND;
    let typed: R::K8s = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let message = shared::decode_error::without_values(&e.inner().to_string());
        Error::Malformed { kind, message: if path == "." { message } else { format!("{path}: {message}") } }
    })?;
    let name = value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let mut causes = Vec::new();
    // What even Kubernetes' own types do not hold: unknown fields, not unsupported ones.
    let unknown = unkept(value, &serde_json::to_value(&typed).unwrap_or(Value::Null));
    let mut object = R::from_k8s(typed, &mut causes);
    // Every refused field at once: a field with a bad value is also one the round trip lacks,
    // and what did translate is validated too, so a bad quantity hides no bad port.
    let back = serde_json::to_value(object.to_k8s()).unwrap_or(Value::Null);
    let mut dropped = unkept(value, &back);
    dropped.retain(|field| !R::WRITE_ONLY.iter().any(|written| within(field, written)));
    if let Some(stored) = stored {
        // A field sent back as the stored object has it that the new object no longer holds
        // (a Service's externalTrafficPolicy once its type is ClusterIP) is dropped, as
        // kube-apiserver drops the type-dependent fields an update left as they were.
        let before = serde_json::to_value(stored.to_k8s()).unwrap_or(Value::Null);
        dropped.retain(|field| at_path(value, field).is_none_or(|sent| at_path(&before, field) != Some(sent)));
        // After the round trip, which compares what was sent: a carried value was not sent.
        if let Err(errors) = R::carry_from(stored, &mut object) {
            causes.extend(invalid_causes(R::KIND, errors));
        }
    }
    if let Err(errors) = shared::validation::validate(&object.clone().into_object()) {
        // A refused field leaves what holds it without it (a gRPC probe, a probe with no
        // handler): saying that the holder then lacks a field would only repeat the refusal.
        let refused: Vec<String> = causes.iter().map(|c| c.field.clone()).chain(dropped.iter().cloned()).collect();
        let repeats = |c: &Cause| c.problem == Problem::Required && refused.iter().any(|f| f != &c.field && within(f, &c.field));
        causes.extend(invalid_causes(R::KIND, errors).into_iter().filter(|c| !repeats(c)));
    }
    let mut named = std::collections::BTreeSet::new();
    causes.retain(|c| named.insert((c.field.clone(), c.message.clone())));
    // A refused value leaves its field, or the object around it, out of the round trip.
    dropped.retain(|field| !causes.iter().any(|c| within(&c.field, field)));
    causes.extend(dropped.into_iter().map(|field| match unknown.contains(&field) {
        true => Cause::unknown(field),
        false => Cause::unsupported(field, "Shepherd does not support this field"),
    }));
    if causes.is_empty() {
        return Ok(object);
    }
    causes.sort_by(|a, b| a.field.cmp(&b.field));
    Err(Error::Refused { kind, name, causes })
}

/// The fields of `value` that [`decode`] refuses as ones Shepherd does not hold, Kubernetes'
/// field paths; a body that is not an `R` at all names none.
pub fn unsupported<R: Convert>(value: &Value) -> Vec<String> {
    match decode::<R>(value) {
        Err(Error::Refused { causes, .. }) => causes.into_iter().filter(|c| c.problem == Problem::Unsupported).map(|c| c.field).collect(),
        Ok(_) | Err(Error::Malformed { .. }) => Vec::new(),
    }
}

/// The value at a field path as causes name it (`spec.ports[0].nodePort`).
fn at_path<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    let pointer: String =
        path.split('.').flat_map(|segment| segment.split('[')).map(|step| format!("/{}", step.trim_end_matches(']'))).collect();
    value.pointer(&pointer)
}

/// Whether `field` is `path` or a field inside it (`spec.a` is in `spec`, `spec.ab` is not).
fn within(field: &str, path: &str) -> bool {
    field.strip_prefix(path).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// The native validation's field errors of an object of `kind`, as causes named in
/// Kubernetes' fields.
pub fn invalid_causes(kind: Kind, errors: Vec<FieldError>) -> Vec<Cause> {
    errors.into_iter().map(|e| Cause::from_native(kind, e)).collect()
}

/// `message` with each field it names in backticks in camelCase, as Kubernetes names it.
fn backticked_fields_in_camel_case(message: &str) -> String {
    message
        .split('`')
        .enumerate()
        .map(|(i, part)| if i % 2 == 1 { camel_case(part) } else { part.to_string() })
        .collect::<Vec<_>>()
        .join("`")
}

/// The field of the Kubernetes object of `kind` that a native field path names:
/// `spec.containers[0].ports[0].host_port` is `spec.containers[0].ports[0].hostPort`, a
/// container's one amount (`resources.cpu`) is its request, a node's taints and cordon are in
/// its spec. The keys of a map (labels, a selector) stay as written.
pub fn k8s_field(kind: Kind, native: &str) -> String {
    let mut out = String::with_capacity(native.len() + 8);
    let mut shape = String::new();
    let mut rest = native;
    while !rest.is_empty() {
        let (segment, tail) = rest.split_once('.').unwrap_or((rest, ""));
        let (name, index) = segment.split_at(segment.find('[').unwrap_or(segment.len()));
        if !shape.is_empty() {
            shape.push('.');
        }
        shape.push_str(name);
        let spelled = match (kind, shape.as_str()) {
            (Kind::Node, "status") if tail.starts_with("taints") || tail == "unschedulable" => "spec".to_string(),
            (Kind::Service, "spec.cluster_ip") => "clusterIP".to_string(),
            (_, path) if path.ends_with("containers.resources.cpu") || path.ends_with("containers.resources.memory") => {
                format!("requests.{name}")
            }
            _ => camel_case(name),
        };
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(&spelled);
        out.push_str(index);
        let is_map = matches!(name, "labels" | "annotations" | "node_selector" | "match_labels")
            || (kind == Kind::Service && shape == "spec.selector")
            || (matches!(kind, Kind::ConfigMap | Kind::Secret) && matches!(name, "data" | "binary_data" | "string_data"));
        if is_map && !tail.is_empty() {
            out.push('.');
            out.push_str(tail);
            break;
        }
        rest = tail;
    }
    out
}

/// `involved_object` as Kubernetes spells it: `involvedObject`.
fn camel_case(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut upper = false;
    for c in field.chars() {
        match c {
            '_' => upper = true,
            c if upper => {
                out.push(c.to_ascii_uppercase());
                upper = false;
            }
            c => out.push(c),
        }
    }
    out
}

/// A `false` that asks for more than Shepherd does where Kubernetes' default is `true`:
/// `hostUsers: false` asks for a user namespace. (`automountServiceAccountToken: false` asks
/// for what Shepherd does anyway: it mounts no token.)
fn false_asks_for_something(path: &str, value: &Value) -> bool {
    *value == Value::Bool(false) && path.rsplit('.').next() == Some("hostUsers")
}

/// Fields Shepherd does not store whose value names what it does anyway, so a manifest (or
/// `kubectl run`) that spells them out means nothing else: its one scheduler is the default
/// one.
fn is_what_shepherd_does(path: &str, value: &Value) -> bool {
    let mut shape = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => {
                in_index = true;
                shape.push_str("[]");
            }
            ']' => in_index = false,
            _ if in_index => {}
            c => shape.push(c),
        }
    }
    let spec = shape.strip_prefix("spec.template.spec.").or_else(|| shape.strip_prefix("spec."));
    let value = value.as_str().unwrap_or_default();
    matches!((spec, value), (Some("schedulerName"), "default-scheduler"))
}

/// Fields of a body that say nothing Shepherd must keep: empty ones (except a `false` that
/// asks for something), the server's own, and those naming what Shepherd does anyway.
fn passed(path: &str, value: &Value) -> bool {
    (is_empty(value) && !false_asks_for_something(path, value)) || SERVER_OWNED.contains(&path) || is_what_shepherd_does(path, value)
}

/// The paths set in `sent` that `kept` lacks.
pub(super) fn unkept(sent: &Value, kept: &Value) -> Vec<String> {
    let mut out = Vec::new();
    shared::strict::unkept(sent, kept, &passed, &mut out);
    out.into_iter().map(|field| field.path).collect()
}

#[cfg(test)]
mod tests {
    use shared::model::{
        Container, ContainerPort, Deployment, EnvVar, Event, ExecAction, HttpGetAction, HttpHeader, Namespace, Node, NodeResources, Object,
        ObjectMeta, Pod, PodSpec, PodTemplateSpec, Probe, ProbePort, Resource as _, ResourceRequirements, Service, ServicePort,
        ServiceSpec, Taint, TcpSocketAction, Toleration,
    };
    use shared::selector::{LabelSelector, Operator, Requirement};

    use super::*;
    use crate::resources::Resource as _;

    /// Resolves a Kubernetes field path in `value`, indices read as `[0]`; a map's key
    /// (labels, a selector) is any key.
    fn resolves(value: &Value, path: &str) -> bool {
        let mut here = value;
        let mut rest = path;
        while !rest.is_empty() {
            let (segment, tail) = rest.split_once('.').unwrap_or((rest, ""));
            let (name, index) = segment.split_at(segment.find('[').unwrap_or(segment.len()));
            let Some(next) = here.get(name) else { return false };
            here = if index.is_empty() {
                next
            } else {
                match next.get(0) {
                    Some(item) => item,
                    None => return false,
                }
            };
            if matches!(name, "labels" | "annotations" | "nodeSelector" | "matchLabels" | "selector") && here.get("matchLabels").is_none() {
                return here.is_object();
            }
            rest = tail;
        }
        true
    }

    /// A Kubernetes object with every field Shepherd validates, as a GET answers it; each
    /// field is one Shepherd holds (its body decodes without an unsupported field).
    fn reference<R: Convert>(body: Value) -> Value {
        let object: R = match decode(&body) {
            Ok(object) => object,
            Err(Error::Refused { causes, .. }) => {
                assert!(causes.iter().all(|c| matches!(c.problem, Problem::Invalid | Problem::Forbidden)), "{causes:?}");
                R::from_k8s(serde_json::from_value(body).unwrap(), &mut Vec::new())
            }
            Err(e) => panic!("{e}"),
        };
        serde_json::to_value(object.to_k8s()).unwrap()
    }

    /// A probe with every handler (one too many: a reference, not a valid probe) and timing.
    fn probe_json() -> Value {
        serde_json::json!({"exec": {"command": ["true"]},
            "httpGet": {"path": "/", "port": 1, "host": "localhost", "scheme": "HTTP", "httpHeaders": [{"name": "a", "value": "b"}]},
            "tcpSocket": {"port": "p", "host": "127.0.0.1"}, "initialDelaySeconds": 1, "timeoutSeconds": 1, "periodSeconds": 1,
            "successThreshold": 1, "failureThreshold": 1})
    }

    fn pod_spec_json() -> Value {
        serde_json::json!({"containers": [{"name": "c", "image": "i", "env": [{"name": "A", "value": "1"}],
            "ports": [{"name": "p", "containerPort": 1, "hostPort": 1, "protocol": "TCP"}],
            "livenessProbe": probe_json(), "readinessProbe": probe_json(), "startupProbe": probe_json(),
            "resources": {"requests": {"cpu": "1", "memory": "1Mi"}}}],
            "restartPolicy": "Always", "nodeSelector": {"a": "b"}, "nodeName": "n", "terminationGracePeriodSeconds": 1,
            "dnsPolicy": "Default", "enableServiceLinks": false,
            "tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}]})
    }

    fn broken_pod_spec() -> PodSpec {
        let port = |name: &str, host_port| ContainerPort {
            name: name.into(),
            container_port: 0,
            host_port: Some(host_port),
            protocol: "icmp".into(),
            ..Default::default()
        };
        let env = |name: &str| EnvVar::literal(name, "");
        let container = Container {
            name: "Bad_Name".into(),
            image: String::new(),
            env: vec![env(""), env("A"), env("A")],
            ports: vec![port("Bad_Name", 70000), port("p", 70000)],
            resources: ResourceRequirements { cpu: -1, memory: -1 },
            liveness_probe: Some(broken_probe()),
            readiness_probe: Some(Probe::default()),
            startup_probe: Some(broken_probe()),
            ..Default::default()
        };
        PodSpec {
            containers: vec![container.clone(), container],
            restart_policy: "Sometimes".into(),
            node_selector: [("bad key".to_string(), "v".to_string())].into(),
            tolerations: vec![
                Toleration { operator: "Maybe".into(), ..Default::default() },
                Toleration { operator: "Equal".into(), ..Default::default() },
                Toleration { operator: "Exists".into(), value: "v".into(), effect: "Sometimes".into(), ..Default::default() },
            ],
            node_name: "n".into(),
            termination_grace_period_seconds: Some(-1),
            dns_policy: "None".into(),
            enable_service_links: None,
            ..Default::default()
        }
    }

    /// A probe with every rule broken: three handlers, bad ports, hosts, scheme, path,
    /// headers and timing.
    fn broken_probe() -> Probe {
        Probe {
            exec: Some(ExecAction { command: vec![] }),
            http_get: Some(HttpGetAction {
                path: "no slash".into(),
                port: ProbePort::Number(0),
                host: "10.0.0.1".into(),
                scheme: "HTTPS".into(),
                http_headers: vec![HttpHeader { name: String::new(), value: "\n".into() }],
            }),
            tcp_socket: Some(TcpSocketAction { port: ProbePort::Name("nope".into()), host: "example.com".into() }),
            initial_delay_seconds: -1,
            timeout_seconds: -1,
            period_seconds: -1,
            success_threshold: 2,
            failure_threshold: -1,
        }
    }

    fn broken_meta() -> ObjectMeta {
        ObjectMeta {
            name: "Bad_Name".into(),
            namespace: "Bad_Namespace".into(),
            labels: [("bad key".to_string(), "-v".to_string())].into(),
            ..Default::default()
        }
    }

    /// Every field the native validation (shared, and the server's rules of each kind) names
    /// of an object with every rule broken: its Kubernetes name is a field of the Kubernetes
    /// object.
    #[test]
    fn every_field_validation_names_has_its_kubernetes_name() {
        let meta = || serde_json::json!({"name": "a", "namespace": "b", "labels": {"a": "b"}});
        let pod = Pod { metadata: broken_meta(), spec: broken_pod_spec(), ..Default::default() };
        let mut deployment = Deployment { metadata: broken_meta(), ..Default::default() };
        deployment.spec.replicas = -1;
        deployment.spec.selector.match_expressions =
            vec![Requirement { key: "bad key".into(), operator: Operator::In, values: Vec::new() }];
        deployment.spec.template = PodTemplateSpec { metadata: broken_meta(), spec: broken_pod_spec() };
        let mut matching = deployment.clone();
        matching.spec.selector = LabelSelector { match_labels: [("bad key".to_string(), "v".to_string())].into(), ..Default::default() };
        let mut service = Service { metadata: broken_meta(), ..Default::default() };
        service.spec = ServiceSpec {
            selector: [("bad key".to_string(), "v".to_string())].into(),
            type_: "LoadBalancer".into(),
            ports: vec![
                ServicePort { name: "a".into(), port: 0, target_port: 70000, protocol: "icmp".into(), node_port: 0 },
                ServicePort { name: "a".into(), port: 1, target_port: 1, protocol: String::new(), node_port: 0 },
            ],
            cluster_ip: String::new(),
        };
        let mut node = Node { metadata: broken_meta(), ..Default::default() };
        node.status.capacity = NodeResources { cpu: -1, memory: -1, pods: -1 };
        node.status.allocatable = node.status.capacity;
        node.status.taints = vec![Taint { key: "bad key".into(), value: String::new(), effect: "Never".into() }];
        let empty_deployment = Deployment { metadata: broken_meta(), ..Default::default() };
        let empty_pod = Pod { metadata: broken_meta(), ..Default::default() };
        let event = Event { metadata: broken_meta(), type_: "Bad".into(), ..Default::default() };
        let namespace = Namespace { metadata: broken_meta(), ..Default::default() };

        let pod_ref = reference::<Pod>(serde_json::json!({"metadata": meta(), "spec": pod_spec_json()}));
        let deployment_ref = reference::<Deployment>(serde_json::json!({"metadata": meta(), "spec": {"replicas": 1,
            "selector": {"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]},
            "template": {"metadata": meta(), "spec": pod_spec_json()}}}));
        let service_ref =
            reference::<Service>(serde_json::json!({"metadata": meta(), "spec": {"selector": {"a": "b"}, "type": "ClusterIP",
            "ports": [{"name": "p", "port": 1, "targetPort": 1, "protocol": "TCP"}]}}));
        let mut full_node = Node {
            metadata: ObjectMeta { name: "a".into(), labels: [("a".to_string(), "b".to_string())].into(), ..Default::default() },
            ..Default::default()
        };
        full_node.status.capacity = NodeResources { cpu: 1, memory: 1, pods: 1 };
        full_node.status.allocatable = full_node.status.capacity;
        full_node.status.unschedulable = true;
        full_node.status.taints = vec![Taint { key: "k".into(), value: "v".into(), effect: "NoSchedule".into() }];
        let node_ref = serde_json::to_value(full_node.to_k8s()).unwrap();
        let event_ref = reference::<Event>(serde_json::json!({"metadata": meta(), "type": "Normal", "reason": "R",
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "b", "uid": "u"}}));
        let namespace_ref = reference::<Namespace>(serde_json::json!({"metadata": {"name": "a", "labels": {"a": "b"}}}));

        let cases = [
            (pod.into_object(), &pod_ref),
            (deployment.into_object(), &deployment_ref),
            (matching.into_object(), &deployment_ref),
            (empty_deployment.into_object(), &deployment_ref),
            (empty_pod.into_object(), &pod_ref),
            (service.into_object(), &service_ref),
            (node.into_object(), &node_ref),
            (event.into_object(), &event_ref),
            (namespace.into_object(), &namespace_ref),
        ];
        let mut named = std::collections::BTreeSet::new();
        for (object, reference) in cases {
            let kind = object.kind();
            let mut errors = shared::validation::validate(&object).unwrap_err();
            if let Object::Pod(pod) = &object {
                errors.extend(pod.validate().unwrap_err());
            }
            for error in errors {
                let field = k8s_field(kind, &error.field);
                assert!(resolves(reference, &field), "{kind} {} is {field}, which is no field of {reference}", error.field);
                assert!(!field.contains('_') || field.contains("Bad_") || field.contains("bad key"), "{field}");
                let shape: String = error.field.split('[').map(|part| part.split_once(']').map_or(part, |(_, rest)| rest)).collect();
                named.insert(format!("{kind} {shape}"));
            }
        }
        // Every field shared::validation and the server's pod rule name, of every kind
        // this API serves.
        assert_eq!(named.len(), 145, "{named:#?}");
        assert_eq!(k8s_field(Kind::Pod, "spec.containers[1].ports[0].host_port"), "spec.containers[1].ports[0].hostPort");
        assert_eq!(k8s_field(Kind::Pod, "spec.containers[0].resources.cpu"), "spec.containers[0].resources.requests.cpu");
        assert_eq!(k8s_field(Kind::Node, "status.taints[0].key"), "spec.taints[0].key");
        assert_eq!(k8s_field(Kind::Node, "status.capacity.cpu"), "status.capacity.cpu");
        assert_eq!(k8s_field(Kind::Pod, "metadata.labels.example.com/some_key"), "metadata.labels.example.com/some_key");
        assert_eq!(k8s_field(Kind::Service, "spec.selector.some_key"), "spec.selector.some_key");
        assert_eq!(k8s_field(Kind::Event, "involved_object.kind"), "involvedObject.kind");
    }

    #[test]
    fn a_pod_round_trips_and_unsupported_fields_are_named() {
        let body = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "labels": {"app": "web"}, "creationTimestamp": null,
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {}}}]},
        });
        let pod: Pod = decode(&body).unwrap();
        assert_eq!(pod.spec.containers[0].resources, ResourceRequirements { cpu: 250, memory: 64 << 20 });
        let out = serde_json::to_value(pod.to_k8s()).unwrap();
        assert_eq!(out["spec"]["containers"][0]["resources"]["requests"]["cpu"], "250m");
        assert_eq!(out["apiVersion"], "v1");
        let mut resolving = body.clone();
        resolving["spec"]["dnsPolicy"] = "Default".into();
        resolving["spec"]["enableServiceLinks"] = false.into();
        let pod: Pod = decode(&resolving).unwrap();
        assert_eq!((pod.spec.dns_policy.as_str(), pod.spec.enable_service_links), ("Default", Some(false)));
        let out = serde_json::to_value(pod.to_k8s()).unwrap();
        assert_eq!((&out["spec"]["dnsPolicy"], &out["spec"]["enableServiceLinks"]), (&"Default".into(), &false.into()));

        let mut bad = body.clone();
        bad["spec"]["containers"][0]["imagePullPolicy"] = "Always".into();
        bad["spec"]["dnsPolicy"] = "ClusterFirst".into();
        bad["spec"]["volumes"] =
            serde_json::json!([{"name": "v", "emptyDir": {}}, {"name": "w", "persistentVolumeClaim": {"claimName": "c"}}]);
        bad["spec"]["madeUp"] = 1.into();
        bad["spec"]["hostUsers"] = false.into();
        bad["spec"]["enableServiceLinks"] = false.into();
        let Err(Error::Refused { causes, .. }) = decode::<Pod>(&bad) else { panic!("refused") };
        let names: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            names,
            ["spec.hostUsers", "spec.madeUp", "spec.volumes[1]", "spec.volumes[1].persistentVolumeClaim"],
            "imagePullPolicy and the emptyDir are kept; the claim is unsupported, which leaves its volume without a type"
        );
        let unknown: Vec<&str> = causes.iter().filter(|c| c.problem == Problem::Unknown).map(|c| c.field.as_str()).collect();
        assert_eq!(unknown, ["spec.madeUp"], "a typo is not told as a field Kubernetes has");
    }

    #[test]
    fn every_refused_field_is_named_at_once_each_unsupported_or_invalid() {
        let body = serde_json::json!({"metadata": {"name": "p"}, "spec": {"volumes": [{"name": "v", "nfs": {"server": "s", "path": "/"}}], "containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": "100m", "memory": "lots"}, "limits": {"cpu": "200m", "memory": "1Gi"}}}]}});
        let Err(error @ Error::Refused { .. }) = decode::<Pod>(&body) else { panic!("refused") };
        let Error::Refused { causes, .. } = &error else { unreachable!() };
        let seen: Vec<(&str, Problem)> = causes.iter().map(|c| (c.field.as_str(), c.problem)).collect();
        assert_eq!(
            seen,
            [
                ("spec.containers[0].resources.limits.cpu", Problem::Unsupported),
                ("spec.containers[0].resources.requests.memory", Problem::Invalid),
                ("spec.volumes[0]", Problem::Invalid),
                ("spec.volumes[0].nfs", Problem::Unsupported),
            ],
            "a limit other than the request hides nothing else"
        );
        let message = error.to_string();
        assert!(
            message
                .starts_with("Pod \"p\" is invalid: [spec.containers[0].resources.limits.cpu: Unsupported: a limit other than the request"),
            "{message}"
        );
        assert!(message.contains("requests.memory: Invalid value: invalid memory quantity \"lots\""), "{message}");
        assert!(message.ends_with(", spec.volumes[0].nfs: Unsupported: Shepherd does not support this field]"), "{message}");
        assert_eq!(causes[1].reason(), "FieldValueInvalid");
        assert_eq!(causes[3].reason(), "FieldValueNotSupported");
    }
}
