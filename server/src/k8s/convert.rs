//! The one translation between Kubernetes' shapes (`k8s-openapi`) and `shared::model`, both
//! ways. A body is read into the Kubernetes type, translated, and translated back: any field
//! the body set that does not come back is one Shepherd does not hold, and is refused by name.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::autoscaling::v1 as autoscaling;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use shared::api::FieldError;
use shared::model::{
    Condition, Container, ContainerPort, ContainerState, ContainerStatus, Deployment, DeploymentSpec, DeploymentStatus, EnvVar, Event,
    Kind, Labels, Namespace, NamespaceStatus, Node, NodeResources, ObjectMeta, ObjectReference, OwnerReference, POD_NETWORK_ANNOTATION,
    Pod, PodSpec, PodStatus, PodTemplateSpec, ResourceRequirements, Scale, ScaleSpec, ScaleStatus, Service, ServicePort, ServiceSpec,
    Taint, Time, Toleration, exact_memory, format_cpu, parse_cpu, parse_memory,
};
use shared::selector::{LabelSelector, Operator, Requirement};
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

    pub fn unknown(field: impl Into<String>) -> Cause {
        Cause { problem: Problem::Unknown, field: field.into(), message: "Kubernetes' schema has no such field (a typo?)".into() }
    }

    /// The cause's `reason` in a Status: Kubernetes' `FieldValueNotSupported` or `FieldValueInvalid`.
    pub fn reason(&self) -> &'static str {
        match self.problem {
            Problem::Unsupported => "FieldValueNotSupported",
            Problem::Invalid => "FieldValueInvalid",
            Problem::Unknown => "FieldValueUnknown",
        }
    }

    /// `Unsupported: ...` or `Invalid value: ...`, the words Kubernetes' causes start with.
    pub fn words(&self) -> String {
        match self.problem {
            Problem::Unsupported => format!("Unsupported: {}", self.message),
            Problem::Invalid => format!("Invalid value: {}", self.message),
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
        Error::Malformed { kind, message: if path == "." { e.inner().to_string() } else { format!("{path}: {}", e.inner()) } }
    })?;
    let name = value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let mut causes = Vec::new();
    // What even Kubernetes' own types do not hold: unknown fields, not unsupported ones.
    let unknown = unkept(value, &serde_json::to_value(&typed).unwrap_or(Value::Null));
    let object = R::from_k8s(typed, &mut causes);
    // Every refused field at once: a field with a bad value is also one the round trip lacks,
    // and what did translate is validated too, so a bad quantity hides no bad port.
    let back = serde_json::to_value(object.to_k8s()).unwrap_or(Value::Null);
    let mut dropped = unkept(value, &back);
    if let Err(errors) = shared::validation::validate(&object.clone().into_object()) {
        causes.extend(invalid_causes(R::KIND, errors));
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

/// Whether `field` is `path` or a field inside it (`spec.a` is in `spec`, `spec.ab` is not).
fn within(field: &str, path: &str) -> bool {
    field.strip_prefix(path).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// The native validation's field errors of an object of `kind`, as causes named in
/// Kubernetes' fields.
pub fn invalid_causes(kind: Kind, errors: Vec<FieldError>) -> Vec<Cause> {
    errors.into_iter().map(|e| Cause::invalid(k8s_field(kind, &e.field), e.message)).collect()
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
            || (kind == Kind::Service && shape == "spec.selector");
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
/// `hostUsers: false` asks for a user namespace. (`enableServiceLinks: false` and
/// `automountServiceAccountToken: false` ask for what Shepherd does anyway: it injects no
/// service variables and mounts no token.)
fn false_asks_for_something(path: &str, value: &Value) -> bool {
    *value == Value::Bool(false) && path.rsplit('.').next() == Some("hostUsers")
}

/// Fields Shepherd does not store whose value names what it does anyway, so a manifest (or
/// `kubectl run`) that spells them out means nothing else: its containers use the node's
/// DNS (there is no cluster DNS, so `ClusterFirst` resolves as `Default` does), an image is
/// pulled only when the node lacks it, and its one scheduler is the default one.
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
    matches!(
        (spec, value),
        (Some("dnsPolicy"), "ClusterFirst" | "Default")
            | (Some("containers[].imagePullPolicy"), "IfNotPresent")
            | (Some("schedulerName"), "default-scheduler")
    )
}

/// Fields of a body that say nothing Shepherd must keep: empty ones (except a `false` that
/// asks for something), the server's own, and those naming what Shepherd does anyway.
fn passed(path: &str, value: &Value) -> bool {
    (is_empty(value) && !false_asks_for_something(path, value)) || SERVER_OWNED.contains(&path) || is_what_shepherd_does(path, value)
}

/// The paths set in `sent` that `kept` lacks.
fn unkept(sent: &Value, kept: &Value) -> Vec<String> {
    let mut out = Vec::new();
    shared::strict::unkept(sent, kept, &passed, &mut out);
    out.into_iter().map(|field| field.path).collect()
}

// ---------------------------------------------------------------------------------------------
// Small pieces

pub fn time(t: Time) -> meta::Time {
    let nanos = i128::from(t.timestamp()) * 1_000_000_000 + i128::from(t.timestamp_subsec_nanos());
    meta::Time(k8s_openapi::jiff::Timestamp::from_nanosecond(nanos).unwrap_or_default())
}

fn time_in(t: meta::Time) -> Option<Time> {
    chrono::DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().max(0) as u32)
}

fn some(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

fn map(labels: &Labels) -> Option<BTreeMap<String, String>> {
    (!labels.is_empty()).then(|| labels.clone())
}

fn list<T>(items: Vec<T>) -> Option<Vec<T>> {
    (!items.is_empty()).then_some(items)
}

fn api_version_of(kind: &str) -> &'static str {
    if kind == "Deployment" { "apps/v1" } else { "v1" }
}

fn meta_out(m: &ObjectMeta) -> meta::ObjectMeta {
    meta::ObjectMeta {
        name: some(&m.name),
        namespace: some(&m.namespace),
        uid: some(&m.uid),
        labels: map(&m.labels),
        annotations: map(&m.annotations),
        resource_version: (m.resource_version > 0).then(|| m.resource_version.to_string()),
        generation: (m.generation > 0).then(|| i64::try_from(m.generation).unwrap_or(i64::MAX)),
        creation_timestamp: m.created_at.map(time),
        deletion_timestamp: m.deletion_timestamp.map(time),
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        owner_references: list(
            m.owner_references
                .iter()
                .map(|r| meta::OwnerReference {
                    api_version: api_version_of(&r.kind).into(),
                    kind: r.kind.clone(),
                    name: r.name.clone(),
                    uid: r.uid.clone(),
                    controller: r.controller.then_some(true),
                    block_owner_deletion: None,
                })
                .collect(),
        ),
        ..Default::default()
    }
}

fn meta_in(m: meta::ObjectMeta, errors: &mut Vec<Cause>) -> ObjectMeta {
    let resource_version = match m.resource_version.as_deref() {
        None | Some("") => 0,
        Some(text) => text.parse().unwrap_or_else(|_| {
            errors.push(Cause::invalid("metadata.resourceVersion", format!("{text:?} is not a resourceVersion this server issued")));
            0
        }),
    };
    ObjectMeta {
        name: m.name.unwrap_or_default(),
        namespace: m.namespace.unwrap_or_default(),
        labels: m.labels.unwrap_or_default(),
        annotations: m.annotations.unwrap_or_default(),
        resource_version,
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        owner_references: m
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .map(|r| OwnerReference { kind: r.kind, name: r.name, uid: r.uid, controller: r.controller.unwrap_or(false) })
            .collect(),
        ..Default::default()
    }
}

fn condition_out(c: &Condition) -> core::PodCondition {
    core::PodCondition {
        type_: c.type_.clone(),
        status: c.status.clone(),
        reason: some(&c.reason),
        message: some(&c.message),
        last_transition_time: c.last_transition_time.map(time),
        ..Default::default()
    }
}

fn node_condition_out(c: &Condition) -> core::NodeCondition {
    core::NodeCondition {
        type_: c.type_.clone(),
        status: c.status.clone(),
        reason: some(&c.reason),
        message: some(&c.message),
        last_transition_time: c.last_transition_time.map(time),
        last_heartbeat_time: c.last_heartbeat_time.map(time),
    }
}

fn quantities(cpu: i64, memory: i64) -> BTreeMap<String, Quantity> {
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
        env: list(c.env.iter().map(|e| core::EnvVar { name: e.name.clone(), value: Some(e.value.clone()), value_from: None }).collect()),
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
        ..Default::default()
    }
}

fn container_in(c: core::Container, path: &str, errors: &mut Vec<Cause>) -> Container {
    Container {
        name: c.name,
        image: c.image.unwrap_or_default(),
        command: c.command.unwrap_or_default(),
        args: c.args.unwrap_or_default(),
        env: c.env.unwrap_or_default().into_iter().map(|e| EnvVar { name: e.name, value: e.value.unwrap_or_default() }).collect(),
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
    }
}

fn pod_spec_out(s: &PodSpec) -> core::PodSpec {
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
        ..Default::default()
    }
}

fn pod_spec_in(s: core::PodSpec, path: &str, errors: &mut Vec<Cause>) -> PodSpec {
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
        started: Some(matches!(c.state, ContainerState::Running { .. })),
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

fn selector_out(s: &LabelSelector) -> meta::LabelSelector {
    meta::LabelSelector {
        match_labels: map(&s.match_labels),
        match_expressions: list(
            s.match_expressions
                .iter()
                .map(|r| meta::LabelSelectorRequirement {
                    key: r.key.clone(),
                    operator: format!("{:?}", r.operator),
                    values: list(r.values.clone()),
                })
                .collect(),
        ),
    }
}

fn selector_in(s: meta::LabelSelector, errors: &mut Vec<Cause>) -> LabelSelector {
    let mut expressions = Vec::new();
    for (i, r) in s.match_expressions.unwrap_or_default().into_iter().enumerate() {
        let operator = match r.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            other => {
                errors.push(Cause::invalid(
                    format!("spec.selector.matchExpressions[{i}].operator"),
                    format!("unknown operator {other:?}: use In, NotIn, Exists or DoesNotExist"),
                ));
                continue;
            }
        };
        expressions.push(Requirement { key: r.key, operator, values: r.values.unwrap_or_default() });
    }
    LabelSelector { match_labels: s.match_labels.unwrap_or_default(), match_expressions: expressions }
}

/// `app=web,tier in (a,b)`: a Scale's `status.selector`.
pub fn selector_text(s: &LabelSelector) -> String {
    let mut terms: Vec<String> = s.match_labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    for r in &s.match_expressions {
        terms.push(match r.operator {
            Operator::In => format!("{} in ({})", r.key, r.values.join(",")),
            Operator::NotIn => format!("{} notin ({})", r.key, r.values.join(",")),
            Operator::Exists => r.key.clone(),
            Operator::DoesNotExist => format!("!{}", r.key),
        });
    }
    terms.join(",")
}

// ---------------------------------------------------------------------------------------------
// Kinds

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

impl Convert for Deployment {
    type K8s = apps::Deployment;

    fn to_k8s(&self) -> apps::Deployment {
        let s = &self.status;
        let count = |n: i32| (n != 0).then_some(n);
        apps::Deployment {
            metadata: meta_out(&self.metadata),
            spec: Some(apps::DeploymentSpec {
                replicas: Some(self.spec.replicas),
                selector: selector_out(&self.spec.selector),
                template: core::PodTemplateSpec {
                    metadata: Some(meta_out(&self.spec.template.metadata)),
                    spec: Some(pod_spec_out(&self.spec.template.spec)),
                },
                ..Default::default()
            }),
            status: Some(apps::DeploymentStatus {
                replicas: count(s.replicas),
                ready_replicas: count(s.ready_replicas),
                available_replicas: count(s.available_replicas),
                unavailable_replicas: count((self.spec.replicas - s.available_replicas).max(0)),
                observed_generation: (s.observed_generation > 0).then(|| i64::try_from(s.observed_generation).unwrap_or(i64::MAX)),
                conditions: list(
                    s.conditions
                        .iter()
                        .map(|c| apps::DeploymentCondition {
                            type_: c.type_.clone(),
                            status: c.status.clone(),
                            reason: some(&c.reason),
                            message: some(&c.message),
                            last_transition_time: c.last_transition_time.map(time),
                            last_update_time: c.last_transition_time.map(time),
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
        }
    }

    fn from_k8s(d: apps::Deployment, errors: &mut Vec<Cause>) -> Deployment {
        let metadata = meta_in(d.metadata, errors);
        let spec = d.spec.unwrap_or_default();
        let template_meta = meta_in(spec.template.metadata.unwrap_or_default(), errors);
        let template_spec = pod_spec_in(spec.template.spec.unwrap_or_default(), "spec.template.spec", errors);
        let spec = DeploymentSpec {
            // Kubernetes' default when a manifest leaves it out.
            replicas: spec.replicas.unwrap_or(1),
            selector: selector_in(spec.selector, errors),
            template: PodTemplateSpec { metadata: template_meta, spec: template_spec },
        };
        Deployment { kind: "Deployment".into(), metadata, spec, status: DeploymentStatus::default() }
    }
}

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
                            protocol: some(&p.protocol),
                            ..Default::default()
                        })
                        .collect(),
                ),
                type_: some(&self.spec.type_),
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
            });
        }
        let spec = ServiceSpec { selector: spec.selector.unwrap_or_default(), ports, type_: spec.type_.unwrap_or_default() };
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

/// A service's endpoints as Kubernetes' Endpoints object: one subset with every ready pod
/// the endpoints controller found and the service's target ports.
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
    let addresses: Vec<core::EndpointAddress> = service
        .status
        .endpoints
        .iter()
        .map(|e| core::EndpointAddress {
            ip: e.ip.clone(),
            node_name: some(&e.node_name),
            target_ref: Some(core::ObjectReference {
                kind: Some("Pod".into()),
                namespace: some(&m.namespace),
                name: some(&e.pod),
                ..Default::default()
            }),
            hostname: None,
        })
        .collect();
    let ports = service
        .spec
        .ports
        .iter()
        .map(|p| core::EndpointPort {
            name: some(&p.name),
            port: p.target_port,
            protocol: Some(if p.protocol.is_empty() { "TCP".into() } else { p.protocol.to_ascii_uppercase() }),
            app_protocol: None,
        })
        .collect();
    let subsets = (!addresses.is_empty())
        .then(|| vec![core::EndpointSubset { addresses: Some(addresses), ports: Some(ports), not_ready_addresses: None }]);
    core::Endpoints { metadata, subsets }
}

pub fn scale_out(d: &Deployment) -> autoscaling::Scale {
    let m = &d.metadata;
    autoscaling::Scale {
        metadata: meta::ObjectMeta {
            name: some(&m.name),
            namespace: some(&m.namespace),
            uid: some(&m.uid),
            resource_version: Some(m.resource_version.to_string()),
            creation_timestamp: m.created_at.map(time),
            ..Default::default()
        },
        spec: Some(autoscaling::ScaleSpec { replicas: Some(d.spec.replicas) }),
        status: Some(autoscaling::ScaleStatus { replicas: d.status.replicas, selector: Some(selector_text(&d.spec.selector)) }),
    }
}

/// Reads an `autoscaling/v1` Scale body into the native one, refusing the fields a Scale
/// does not have, as [`decode`] refuses them for whole objects.
pub fn scale_in(value: &Value) -> Result<Scale> {
    let s: autoscaling::Scale = serde_path_to_error::deserialize(value)
        .map_err(|e| Error::Malformed { kind: "Scale", message: format!("{}: {}", e.path(), e.inner()) })?;
    let mut errors: Vec<Cause> = unkept(value, &serde_json::to_value(&s).unwrap_or(Value::Null)).into_iter().map(Cause::unknown).collect();
    let metadata = meta_in(s.metadata, &mut errors);
    let name = metadata.name.clone();
    let Some(replicas) = s.spec.and_then(|spec| spec.replicas) else {
        errors.push(Cause::invalid("spec.replicas", "a Scale must say how many replicas"));
        return Err(Error::Refused { kind: "Scale", name, causes: errors });
    };
    if !errors.is_empty() {
        return Err(Error::Refused { kind: "Scale", name, causes: errors });
    }
    Ok(Scale { kind: "Scale".into(), metadata, spec: ScaleSpec { replicas }, status: ScaleStatus::default() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Resource as _;
    use shared::model::{Object, Resource as _};

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
                assert!(causes.iter().all(|c| c.problem == Problem::Invalid), "{causes:?}");
                R::from_k8s(serde_json::from_value(body).unwrap(), &mut Vec::new())
            }
            Err(e) => panic!("{e}"),
        };
        serde_json::to_value(object.to_k8s()).unwrap()
    }

    fn pod_spec_json() -> Value {
        serde_json::json!({"containers": [{"name": "c", "image": "i", "env": [{"name": "A", "value": "1"}],
            "ports": [{"name": "p", "containerPort": 1, "hostPort": 1, "protocol": "TCP"}],
            "resources": {"requests": {"cpu": "1", "memory": "1Mi"}}}],
            "restartPolicy": "Always", "nodeSelector": {"a": "b"}, "nodeName": "n", "terminationGracePeriodSeconds": 1,
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
        let env = |name: &str| EnvVar { name: name.into(), value: String::new() };
        let container = Container {
            name: "Bad_Name".into(),
            image: String::new(),
            env: vec![env(""), env("A"), env("A")],
            ports: vec![port("Bad_Name", 70000), port("p", 70000)],
            resources: ResourceRequirements { cpu: -1, memory: -1 },
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
                ServicePort { name: "a".into(), port: 0, target_port: 70000, protocol: "icmp".into() },
                ServicePort { name: "a".into(), port: 1, target_port: 1, protocol: String::new() },
            ],
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
        assert_eq!(named.len(), 77, "{named:#?}");
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

        let mut bad = body.clone();
        bad["spec"]["containers"][0]["imagePullPolicy"] = "Always".into();
        bad["spec"]["dnsPolicy"] = "ClusterFirst".into();
        bad["spec"]["volumes"] = serde_json::json!([{"name": "v"}]);
        bad["spec"]["madeUp"] = 1.into();
        bad["spec"]["hostUsers"] = false.into();
        bad["spec"]["enableServiceLinks"] = false.into();
        let Err(Error::Refused { causes, .. }) = decode::<Pod>(&bad) else { panic!("refused") };
        let names: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(names, ["spec.containers[0].imagePullPolicy", "spec.hostUsers", "spec.madeUp", "spec.volumes"]);
        let unknown: Vec<&str> = causes.iter().filter(|c| c.problem == Problem::Unknown).map(|c| c.field.as_str()).collect();
        assert_eq!(unknown, ["spec.madeUp"], "a typo is not told as a field Kubernetes has");
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

    #[test]
    fn every_refused_field_is_named_at_once_each_unsupported_or_invalid() {
        let body = serde_json::json!({"metadata": {"name": "p"}, "spec": {"volumes": [{"name": "v"}], "containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": "100m", "memory": "lots"}, "limits": {"cpu": "200m", "memory": "1Gi"}}}]}});
        let Err(error @ Error::Refused { .. }) = decode::<Pod>(&body) else { panic!("refused") };
        let Error::Refused { causes, .. } = &error else { unreachable!() };
        let seen: Vec<(&str, Problem)> = causes.iter().map(|c| (c.field.as_str(), c.problem)).collect();
        assert_eq!(
            seen,
            [
                ("spec.containers[0].resources.limits.cpu", Problem::Unsupported),
                ("spec.containers[0].resources.requests.memory", Problem::Invalid),
                ("spec.volumes", Problem::Unsupported),
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
        assert!(message.ends_with(", spec.volumes: Unsupported: Shepherd does not support this field]"), "{message}");
        assert_eq!(causes[1].reason(), "FieldValueInvalid");
        assert_eq!(causes[2].reason(), "FieldValueNotSupported");
    }
}
