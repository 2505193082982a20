//! The object model: Pod, Node, Lease, Deployment, Service, Event, Binding, Namespace.
//!
//! The JSON shape is the original project's (`../shared/reference/examples/*.json`):
//! snake_case fields, memory in bytes, CPU in millicores. Every field a manifest may leave
//! out has a default, so the reference manifests deserialize unchanged.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::selector::LabelSelector;

/// A point in time. `shared` never reads the clock: callers pass `now` in.
pub type Time = DateTime<Utc>;

/// Labels and node selectors: ordered so that output is stable.
pub type Labels = BTreeMap<String, String>;

pub const DEFAULT_NAMESPACE: &str = "default";

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Identity and bookkeeping common to every object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ObjectMeta {
    pub name: String,
    /// Empty for cluster-scoped objects (nodes, namespaces).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: Labels,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: Labels,
    /// The store's global revision at this object's last write; the token for every
    /// compare-and-swap update.
    #[serde(skip_serializing_if = "is_zero")]
    pub resource_version: u64,
    /// Bumped by the server when the spec changes.
    #[serde(skip_serializing_if = "is_zero")]
    pub generation: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Time>,
    /// Set when a graceful delete has begun; the object goes once its owner lets go.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<Time>,
    /// The grace period of that delete, in seconds: how long the agent lets the containers
    /// stop after SIGTERM before it kills them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_grace_period_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub owner_references: Vec<OwnerReference>,
}

impl ObjectMeta {
    pub fn named(namespace: &str, name: &str) -> Self {
        ObjectMeta { name: name.to_string(), namespace: namespace.to_string(), ..Default::default() }
    }

    /// `namespace/name`, or just `name` for cluster-scoped objects.
    pub fn key(&self) -> String {
        if self.namespace.is_empty() { self.name.clone() } else { format!("{}/{}", self.namespace, self.name) }
    }

    pub fn controller(&self) -> Option<&OwnerReference> {
        self.owner_references.iter().find(|r| r.controller)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct OwnerReference {
    pub kind: String,
    pub name: String,
    pub uid: String,
    #[serde(skip_serializing_if = "is_false")]
    pub controller: bool,
}

// ---------------------------------------------------------------------------------------------
// Resources

/// What a container asks for, or what a node offers: memory in bytes, CPU in millicores.
///
/// Manifests may write either the original's plain integers (`"memory": 67108864`,
/// `"cpu": 250`) or Kubernetes quantity strings (`"memory": "64Mi"`, `"cpu": "250m"` or
/// `"0.5"`). A bare number is always bytes or millicores, as in the original, so a number
/// with a fraction or an exponent (`0.5`, `1.5e3`) is refused with what to write instead.
/// Validation bounds every amount.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ResourceRequirements {
    /// Bytes.
    #[serde(deserialize_with = "de_memory")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::schema::memory"))]
    pub memory: i64,
    /// Millicores.
    #[serde(deserialize_with = "de_cpu")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::schema::cpu"))]
    pub cpu: i64,
}

/// A node's capacity or allocatable amount.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct NodeResources {
    /// Millicores.
    #[serde(deserialize_with = "de_cpu")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::schema::cpu"))]
    pub cpu: i64,
    /// Bytes.
    #[serde(deserialize_with = "de_memory")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::schema::memory"))]
    pub memory: i64,
    #[cfg_attr(feature = "schema", schemars(range(min = 0, max = crate::validation::MAX_NODE_PODS)))]
    pub pods: i64,
}

/// Which amount a quantity measures: it picks the parser and words the errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Amount {
    Cpu,
    Memory,
}

impl Amount {
    fn name(self) -> &'static str {
        match self {
            Amount::Cpu => "cpu",
            Amount::Memory => "memory",
        }
    }

    fn parse(self, text: &str) -> Result<i64, String> {
        match self {
            Amount::Cpu => parse_cpu(text),
            Amount::Memory => parse_memory(text),
        }
    }

    /// What a manifest may write, for errors.
    fn accepted(self) -> &'static str {
        match self {
            Amount::Cpu => "millicores as an integer (250), or a string such as \"250m\" or \"0.5\" (cores)",
            Amount::Memory => "bytes as an integer (67108864), or a string such as \"64Mi\" or \"1.5Gi\"",
        }
    }

    /// The most any container or node may have, as people write it.
    fn bound(self) -> String {
        match self {
            Amount::Cpu => format!("{} cores", format_cpu(crate::validation::MAX_CPU_MILLICORES)),
            Amount::Memory => format_memory(crate::validation::MAX_MEMORY_BYTES),
        }
    }

    fn error(self, text: &str, error: QuantityError) -> String {
        let name = self.name();
        let why = match error {
            QuantityError::NotANumber => format!("expected {}", self.accepted()),
            QuantityError::Negative => format!("it is negative; {name} must be 0 or more"),
            QuantityError::TooLarge => format!("it is larger than the {} any container or node may have", self.bound()),
            QuantityError::TooPrecise => format!("it has more than {MAX_DECIMALS} decimal places"),
        };
        format!("invalid {name} quantity {text:?}: {why}")
    }
}

/// Reads a JSON integer or a quantity string. A visitor rather than an untagged enum, so
/// that an integer out of range or a fraction gets a message that says what to write.
struct QuantityVisitor(Amount);

impl<'de> serde::de::Visitor<'de> for QuantityVisitor {
    type Value = i64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.0.name(), self.0.accepted())
    }

    fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<i64, E> {
        Ok(value)
    }

    fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<i64, E> {
        i64::try_from(value).map_err(|_| E::custom(self.0.error(&value.to_string(), QuantityError::TooLarge)))
    }

    fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<i64, E> {
        let name = self.0.name();
        Err(E::custom(format!(
            "invalid {name} {value:?}: a number with a fraction or an exponent is not accepted; write {}",
            self.0.accepted()
        )))
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<i64, E> {
        self.0.parse(text).map_err(E::custom)
    }
}

fn de_memory<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    d.deserialize_any(QuantityVisitor(Amount::Memory))
}

fn de_cpu<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    d.deserialize_any(QuantityVisitor(Amount::Cpu))
}

/// Parses a memory quantity: `67108864`, `64Mi`, `1Gi`, `1.5Gi`, `500M`, `128k`. Negative
/// amounts and amounts past an i64 are errors that name the text.
pub fn parse_memory(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-')).unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let factor: i128 = match suffix {
        "" => 1,
        "k" | "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        _ => {
            return Err(format!(
                "invalid memory quantity {text:?}: unknown suffix {suffix:?} (use Ki, Mi, Gi, Ti, Pi, k, M, G, T, P or plain bytes)"
            ));
        }
    };
    scaled(number, factor).map_err(|e| Amount::Memory.error(text, e))
}

/// Parses a CPU quantity: `250m` (millicores), `2` or `0.5` (cores), as Kubernetes writes them.
pub fn parse_cpu(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let parsed = match text.strip_suffix('m') {
        Some(milli) if milli.contains('.') => Err(QuantityError::NotANumber),
        Some(milli) => scaled(milli, 1),
        None => scaled(text, 1000),
    };
    parsed.map_err(|e| Amount::Cpu.error(text, e))
}

/// Why a quantity's number was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QuantityError {
    NotANumber,
    Negative,
    TooLarge,
    TooPrecise,
}

/// Decimal places a quantity may have: enough for any factor up to 2^50 to round exactly.
const MAX_DECIMALS: usize = 18;

/// `number × factor`, rounded half away from zero, for a decimal such as `1.25`, in
/// checked integers: exact where floats are not, never wrapping, and without the float
/// parser's tables in the browser's bundle.
fn scaled(number: &str, factor: i128) -> Result<i64, QuantityError> {
    let (negative, digits) = match number.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, number),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if whole.len() + fraction.len() == 0 || !all_digits(whole) || !all_digits(fraction) {
        return Err(QuantityError::NotANumber);
    }
    let (whole, fraction) = (whole.trim_start_matches('0'), fraction.trim_end_matches('0'));
    // 19 whole digits already pass i64::MAX; with at most 18 decimals the mantissa fits an i128.
    if whole.len() > 19 {
        return Err(if negative { QuantityError::Negative } else { QuantityError::TooLarge });
    }
    if fraction.len() > MAX_DECIMALS {
        return Err(QuantityError::TooPrecise);
    }
    let mantissa = whole.bytes().chain(fraction.bytes()).fold(0i128, |m, digit| m * 10 + i128::from(digit - b'0'));
    let divisor = 10i128.pow(fraction.len() as u32);
    let doubled = mantissa.checked_mul(factor).and_then(|v| v.checked_mul(2)).and_then(|v| v.checked_add(divisor));
    let value = doubled.map(|v| v / (divisor * 2)).ok_or(QuantityError::TooLarge)?;
    match (negative, value) {
        (_, 0) => Ok(0),
        (true, _) => Err(QuantityError::Negative),
        (false, v) => i64::try_from(v).map_err(|_| QuantityError::TooLarge),
    }
}

/// Bytes as an exact quantity, for a manifest that must read back the same: the largest
/// binary or decimal unit that divides it (`64Mi`, `100k`), else the plain number.
pub fn exact_memory(bytes: i64) -> String {
    const UNITS: [(&str, i64); 8] = [
        ("Ti", 1 << 40),
        ("T", 1_000_000_000_000),
        ("Gi", 1 << 30),
        ("G", 1_000_000_000),
        ("Mi", 1 << 20),
        ("M", 1_000_000),
        ("Ki", 1 << 10),
        ("k", 1_000),
    ];
    match UNITS.iter().find(|(_, size)| bytes != 0 && bytes % size == 0) {
        Some((unit, size)) => format!("{}{unit}", bytes / size),
        None => bytes.to_string(),
    }
}

/// Formats bytes the way people read them: `64Mi`, `1.5Gi`.
pub fn format_memory(bytes: i64) -> String {
    const UNITS: [(&str, i64); 4] = [("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)];
    let sign = if bytes < 0 { "-" } else { "" };
    let magnitude = i128::from(bytes).abs();
    for (unit, size) in UNITS {
        let size = i128::from(size);
        if magnitude >= size {
            if magnitude % size == 0 {
                return format!("{sign}{}{unit}", magnitude / size);
            }
            let tenths = (magnitude * 20 + size) / (size * 2);
            return format!("{sign}{}.{}{unit}", tenths / 10, tenths % 10);
        }
    }
    bytes.to_string()
}

/// Formats millicores: `250m`, `2` (whole cores).
pub fn format_cpu(millis: i64) -> String {
    if millis % 1000 == 0 { (millis / 1000).to_string() } else { format!("{millis}m") }
}

// ---------------------------------------------------------------------------------------------
// Pods

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Pod {
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: PodSpec,
    pub status: PodStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct PodSpec {
    pub containers: Vec<Container>,
    /// `Always` (the default), `OnFailure` or `Never`; validation rejects anything else.
    pub restart_policy: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: Labels,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Empty until the scheduler binds the pod; written only through the binding subresource.
    pub node_name: String,
    /// Seconds an agent waits after SIGTERM before it kills the containers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
}

impl PodSpec {
    pub fn restart_policy(&self) -> Option<RestartPolicy> {
        RestartPolicy::parse(&self.restart_policy)
    }

    /// The sum of every container's requests: what the scheduler reserves on a node.
    /// Validation bounds each request so that the sum never reaches i64::MAX; it saturates
    /// rather than wraps for a pod that was never validated.
    pub fn requests(&self) -> ResourceRequirements {
        self.containers.iter().fold(ResourceRequirements::default(), |sum, c| ResourceRequirements {
            memory: sum.memory.saturating_add(c.resources.memory),
            cpu: sum.cpu.saturating_add(c.resources.cpu),
        })
    }

    /// Every host port the pod publishes, with its protocol.
    pub fn host_ports(&self) -> impl Iterator<Item = (i32, &str)> {
        self.containers
            .iter()
            .flat_map(|c| c.ports.iter())
            .filter_map(|p| p.host_port.filter(|&hp| hp > 0).map(|hp| (hp, p.protocol.as_str())))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

impl RestartPolicy {
    pub const ALL: [&'static str; 3] = ["Always", "OnFailure", "Never"];

    /// An empty policy means `Always`, as in Kubernetes.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "" | "Always" => Some(RestartPolicy::Always),
            "OnFailure" => Some(RestartPolicy::OnFailure),
            "Never" => Some(RestartPolicy::Never),
            _ => None,
        }
    }

    /// Whether a container that exited with `exit_code` is started again.
    pub fn restarts(self, exit_code: i64) -> bool {
        match self {
            RestartPolicy::Always => true,
            RestartPolicy::OnFailure => exit_code != 0,
            RestartPolicy::Never => false,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Container {
    pub name: String,
    pub image: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ContainerPort>,
    pub resources: ResourceRequirements,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct EnvVar {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ContainerPort {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    pub container_port: i32,
    /// Published on the node; the scheduler keeps two pods from claiming the same one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_port: Option<i32>,
    /// The node address the host port binds to; the agent defaults it to 127.0.0.1.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub host_ip: String,
    /// `TCP` (the default) or `UDP`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub protocol: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Toleration {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// `Equal` (the default) or `Exists`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub operator: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// Empty matches every effect.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub effect: String,
}

/// How long a pod's containers get between SIGTERM and SIGKILL when neither the deletion
/// nor the spec says, as in Kubernetes.
pub const DEFAULT_GRACE_SECONDS: i64 = 30;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum PodPhase {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl PodPhase {
    pub fn is_terminal(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PodPhase::Pending => "Pending",
            PodPhase::Running => "Running",
            PodPhase::Succeeded => "Succeeded",
            PodPhase::Failed => "Failed",
            PodPhase::Unknown => "Unknown",
        }
    }
}

impl fmt::Display for PodPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct PodStatus {
    pub phase: PodPhase,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// A short CamelCase reason for the phase, such as `NodeLost`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub host_ip: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub pod_ip: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub container_statuses: Vec<ContainerStatus>,
}

/// Condition types and reasons, named as in Kubernetes.
pub mod conditions {
    pub const POD_SCHEDULED: &str = "PodScheduled";
    pub const READY: &str = "Ready";
    pub const CONTAINERS_READY: &str = "ContainersReady";
    pub const INITIALIZED: &str = "Initialized";
    pub const NODE_READY: &str = "Ready";
    pub const UNSCHEDULABLE: &str = "Unschedulable";
    pub const TRUE: &str = "True";
    pub const FALSE: &str = "False";
    pub const UNKNOWN: &str = "Unknown";
}

/// A pod or node condition: `{type, status, reason, message, last_transition_time}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Nodes only: when the agent last confirmed this condition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_time: Option<Time>,
}

/// Finds a condition by type.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Sets a condition, keeping `last_transition_time` unless the status changes.
/// Returns whether anything changed.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition, now: Time) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(existing) => {
            new.last_transition_time = if existing.status == new.status { existing.last_transition_time } else { Some(now) };
            if new.last_heartbeat_time.is_none() {
                new.last_heartbeat_time = existing.last_heartbeat_time;
            }
            let changed = *existing != new;
            *existing = new;
            changed
        }
        None => {
            new.last_transition_time = Some(now);
            conditions.push(new);
            true
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ContainerStatus {
    pub name: String,
    pub state: ContainerState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_state: Option<ContainerState>,
    pub ready: bool,
    pub restart_count: u32,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub image: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub container_id: String,
}

/// A container's state, written as Kubernetes does: `{"running": {"started_at": …}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ContainerState {
    Waiting {
        #[serde(default)]
        reason: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        message: String,
    },
    Running {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        started_at: Option<Time>,
    },
    Terminated {
        #[serde(default)]
        exit_code: i64,
        #[serde(default)]
        reason: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        started_at: Option<Time>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        finished_at: Option<Time>,
    },
}

/// The waiting reason of a container being created, its sandbox included, as the kubelet
/// gives it: the pod's status word until something more telling happens.
pub const CONTAINER_CREATING: &str = "ContainerCreating";

impl Default for ContainerState {
    fn default() -> Self {
        ContainerState::Waiting { reason: CONTAINER_CREATING.to_string(), message: String::new() }
    }
}

impl ContainerState {
    /// The word `sheepctl get` shows: the waiting or terminated reason, or `Running`.
    pub fn summary(&self) -> &str {
        match self {
            ContainerState::Waiting { reason, .. } => reason,
            ContainerState::Running { .. } => "Running",
            ContainerState::Terminated { reason, .. } if !reason.is_empty() => reason,
            ContainerState::Terminated { .. } => "Terminated",
        }
    }
}

impl Pod {
    pub fn is_bound(&self) -> bool {
        !self.spec.node_name.is_empty()
    }

    /// Pending with no node: what the scheduler works on.
    pub fn needs_scheduling(&self) -> bool {
        self.status.phase == PodPhase::Pending && self.spec.node_name.is_empty() && self.metadata.deletion_timestamp.is_none()
    }

    /// Why the scheduler found no node for the pod, when that is where it stands.
    pub fn unschedulable_because(&self) -> Option<&str> {
        find_condition(&self.status.conditions, conditions::POD_SCHEDULED)
            .filter(|c| c.status == conditions::FALSE && c.reason == conditions::UNSCHEDULABLE)
            .map(|c| c.message.as_str())
    }

    /// Which of the seed's stages the pod is in, for views that colour or group pods.
    pub fn stage(&self) -> PodStage {
        match self.status.phase {
            PodPhase::Pending if self.spec.node_name.is_empty() => {
                if self.unschedulable_because().is_some() {
                    PodStage::Unschedulable
                } else {
                    PodStage::WaitingForScheduler
                }
            }
            PodPhase::Pending => PodStage::WaitingForAgent,
            PodPhase::Running => PodStage::Running,
            PodPhase::Succeeded => PodStage::Succeeded,
            PodPhase::Failed => PodStage::Failed,
            PodPhase::Unknown => PodStage::Unknown,
        }
    }

    /// `ready/total` containers, as in kubectl's READY column.
    pub fn ready_count(&self) -> (usize, usize) {
        let ready = self.status.container_statuses.iter().filter(|c| c.ready).count();
        (ready, self.spec.containers.len())
    }

    /// Restarts of every container, saturating: an agent's report is not validated.
    pub fn restart_count(&self) -> u32 {
        self.status.container_statuses.iter().fold(0u32, |sum, c| sum.saturating_add(c.restart_count))
    }
}

/// The stages a user must be able to tell apart (the seed's three Pending stages and after).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PodStage {
    /// Pending, no node yet: the scheduler has not placed it.
    WaitingForScheduler,
    /// Pending, no node, and the scheduler found none that fits (PodScheduled=False).
    Unschedulable,
    /// Pending with a node: the agent has not started it yet.
    WaitingForAgent,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

// ---------------------------------------------------------------------------------------------
// Nodes

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Node {
    pub kind: String,
    pub metadata: ObjectMeta,
    pub status: NodeStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct NodeStatus {
    /// `Ready` with status `True`, `False` or `Unknown`, written by the agent's status
    /// report and by the node lifecycle controller.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    pub capacity: NodeResources,
    pub allocatable: NodeResources,
    /// When the agent last reported this status (registration or a status heartbeat). Its
    /// frequent proof of life is its [`Lease`]'s renewal instead, which leaves the node alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_heartbeat: Option<Time>,
    /// Cordoned: running pods stay, new pods are not scheduled here.
    #[serde(skip_serializing_if = "is_false")]
    pub unschedulable: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// The address the agent reports for its host; pods' `host_ip`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub address: String,
    /// Where the agent's own HTTP API (logs) listens, e.g. `http://127.0.0.1:10250`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub agent_endpoint: String,
    pub node_info: NodeInfo,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct NodeInfo {
    /// `docker` or `simulated`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub runtime: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub runtime_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub agent_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub os: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub arch: String,
    #[serde(skip_serializing_if = "is_false")]
    pub simulated: bool,
    /// How its pods get their network: `cni` or `docker` (empty when simulated).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub pod_network: String,
}

/// The annotation that shows a node's [`NodeInfo::pod_network`] through the Kubernetes API,
/// whose node has no field for it, as network plugins annotate their nodes.
pub const POD_NETWORK_ANNOTATION: &str = "shepherd/pod-network";

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Taint {
    pub key: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// One of [`TAINT_EFFECTS`].
    pub effect: String,
}

/// The effects a taint may have.
pub const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

impl Node {
    /// The `Ready` condition's status, `Unknown` when the node never reported one.
    pub fn ready_status(&self) -> &str {
        find_condition(&self.status.conditions, conditions::NODE_READY).map_or(conditions::UNKNOWN, |c| c.status.as_str())
    }
}

// ---------------------------------------------------------------------------------------------
// Leases

/// A node's heartbeat as Kubernetes keeps it since KEP-589 (coordination.k8s.io/v1 Lease):
/// a small object named after its node, renewed every few seconds, so that proof of life
/// costs one small write that only lease watchers see, never a Node write.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Lease {
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: LeaseSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct LeaseSpec {
    /// The node whose agent renews it: a node's lease is held by the node itself.
    pub holder_identity: String,
    /// How long a renewal counts: the server's node monitor grace, in whole seconds.
    pub lease_duration_seconds: i64,
    /// The server's clock at the last renewal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub renew_time: Option<Time>,
}

// ---------------------------------------------------------------------------------------------
// Deployments

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Deployment {
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: DeploymentSpec,
    pub status: DeploymentStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct DeploymentSpec {
    pub replicas: i32,
    /// An equality map as in the reference (`{"app": "web"}`), or
    /// `{match_labels, match_expressions}` for set-based selection.
    pub selector: LabelSelector,
    pub template: PodTemplateSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct PodTemplateSpec {
    pub metadata: ObjectMeta,
    pub spec: PodSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct DeploymentStatus {
    pub replicas: i32,
    pub ready_replicas: i32,
    pub available_replicas: i32,
    #[serde(skip_serializing_if = "is_zero")]
    pub observed_generation: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The body of `GET/PUT …/deployments/{name}/scale`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Scale {
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: ScaleSpec,
    pub status: ScaleStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ScaleSpec {
    pub replicas: i32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ScaleStatus {
    pub replicas: i32,
}

// ---------------------------------------------------------------------------------------------
// Services

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Service {
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: ServiceSpec,
    pub status: ServiceStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ServiceSpec {
    pub selector: Labels,
    pub ports: Vec<ServicePort>,
    /// `ClusterIP`, the default and the only type.
    #[serde(rename = "type")]
    pub type_: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ServicePort {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    pub port: i32,
    pub target_port: i32,
    /// `tcp`/`TCP` or `udp`/`UDP`: the reference writes it in lower case.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub protocol: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ServiceStatus {
    /// The running, ready pods the selector matches, kept by the endpoints controller.
    pub endpoints: Vec<Endpoint>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Endpoint {
    pub ip: String,
    pub pod: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub node_name: String,
}

// ---------------------------------------------------------------------------------------------
// Events, bindings, namespaces

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Event {
    pub kind: String,
    pub metadata: ObjectMeta,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub message: String,
    pub involved_object: ObjectReference,
    /// The component that reported it: `api-server`, `scheduler`, `agent/node-1`, ….
    #[serde(skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// How many times this event happened; repeats update one event instead of adding more.
    pub count: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_timestamp: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_timestamp: Option<Time>,
}

/// The source of the events a node's agent records: `agent/<node>`. A node's token may record
/// events from this source only.
pub fn node_event_source(node: &str) -> String {
    format!("{NODE_SOURCE_PREFIX}{node}")
}

/// What every node's event source starts with.
pub const NODE_SOURCE_PREFIX: &str = "agent/";

pub mod event_types {
    pub const NORMAL: &str = "Normal";
    pub const WARNING: &str = "Warning";
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ObjectReference {
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

impl ObjectReference {
    /// `pod/web-server`, the original's `Object` field.
    pub fn short(&self) -> String {
        format!("{}/{}", self.kind.to_ascii_lowercase(), self.name)
    }

    /// Whether this names the object of `kind` with `meta`: the same kind, namespace and
    /// name and, when both carry one, the same uid, so that a recreated object of the same
    /// name is not its predecessor.
    pub fn refers_to(&self, kind: Kind, meta: &ObjectMeta) -> bool {
        Kind::from_alias(&self.kind) == Some(kind)
            && self.name == meta.name
            && (self.namespace.is_empty() || !kind.namespaced() || self.namespace == meta.namespace)
            && (self.uid.is_empty() || meta.uid.is_empty() || self.uid == meta.uid)
    }
}

/// The body of `POST …/pods/{name}/binding`: the scheduler's assignment letter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Binding {
    pub kind: String,
    pub metadata: ObjectMeta,
    pub target: ObjectReference,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Namespace {
    pub kind: String,
    pub metadata: ObjectMeta,
    pub status: NamespaceStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct NamespaceStatus {
    /// `Active` or `Terminating`.
    pub phase: String,
}

// ---------------------------------------------------------------------------------------------
// Any object

/// The kinds the API serves, with the names and aliases `sheepctl` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Kind {
    Pod,
    Deployment,
    Service,
    Node,
    Event,
    Namespace,
    Lease,
}

impl Kind {
    pub const ALL: [Kind; 7] = [Kind::Pod, Kind::Deployment, Kind::Service, Kind::Node, Kind::Event, Kind::Namespace, Kind::Lease];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Pod => "Pod",
            Kind::Deployment => "Deployment",
            Kind::Service => "Service",
            Kind::Node => "Node",
            Kind::Event => "Event",
            Kind::Namespace => "Namespace",
            Kind::Lease => "Lease",
        }
    }

    /// The plural used in URLs: `pods`, `deployments`, ….
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Pod => "pods",
            Kind::Deployment => "deployments",
            Kind::Service => "services",
            Kind::Node => "nodes",
            Kind::Event => "events",
            Kind::Namespace => "namespaces",
            Kind::Lease => "leases",
        }
    }

    pub fn namespaced(self) -> bool {
        !matches!(self, Kind::Node | Kind::Namespace | Kind::Lease)
    }

    /// Accepts the kind, its plural and the short names kubectl users know:
    /// `pods`/`pod`/`po`, `deployments`/`deployment`/`deploy`, `services`/`service`/`svc`,
    /// `nodes`/`node`/`no`, `events`/`event`/`ev`, `namespaces`/`namespace`/`ns`,
    /// `leases`/`lease`.
    pub fn from_alias(text: &str) -> Option<Kind> {
        match text.to_ascii_lowercase().as_str() {
            "pod" | "pods" | "po" => Some(Kind::Pod),
            "deployment" | "deployments" | "deploy" => Some(Kind::Deployment),
            "service" | "services" | "svc" => Some(Kind::Service),
            "node" | "nodes" | "no" => Some(Kind::Node),
            "event" | "events" | "ev" => Some(Kind::Event),
            "namespace" | "namespaces" | "ns" => Some(Kind::Namespace),
            "lease" | "leases" => Some(Kind::Lease),
            _ => None,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One object of any kind, as a manifest or a watch stream carries it.
/// Serialized as the object itself; `kind` says which.
///
/// The store keeps every object behind an `Arc`, and an enum is as large as its largest
/// variant: unboxed, a Deployment's 664 bytes set the block of every event (448 bytes) too.
#[derive(Debug, Clone, PartialEq)]
pub enum Object {
    Pod(Pod),
    Deployment(Box<Deployment>),
    Service(Service),
    Node(Node),
    Event(Event),
    Namespace(Namespace),
    Lease(Lease),
}

impl Object {
    pub fn kind(&self) -> Kind {
        match self {
            Object::Pod(_) => Kind::Pod,
            Object::Deployment(_) => Kind::Deployment,
            Object::Service(_) => Kind::Service,
            Object::Node(_) => Kind::Node,
            Object::Event(_) => Kind::Event,
            Object::Namespace(_) => Kind::Namespace,
            Object::Lease(_) => Kind::Lease,
        }
    }

    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            Object::Pod(o) => &o.metadata,
            Object::Deployment(o) => &o.metadata,
            Object::Service(o) => &o.metadata,
            Object::Node(o) => &o.metadata,
            Object::Event(o) => &o.metadata,
            Object::Namespace(o) => &o.metadata,
            Object::Lease(o) => &o.metadata,
        }
    }

    pub fn metadata_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Object::Pod(o) => &mut o.metadata,
            Object::Deployment(o) => &mut o.metadata,
            Object::Service(o) => &mut o.metadata,
            Object::Node(o) => &mut o.metadata,
            Object::Event(o) => &mut o.metadata,
            Object::Namespace(o) => &mut o.metadata,
            Object::Lease(o) => &mut o.metadata,
        }
    }

    /// Builds an object from JSON whose `kind` names it. An absent `kind` is an error:
    /// a manifest must say what it is.
    pub fn from_value(value: serde_json::Value) -> Result<Object, ObjectError> {
        let kind_text = value.get("kind").and_then(|k| k.as_str()).ok_or(ObjectError::MissingKind)?;
        let kind = match kind_text {
            "Pod" => Kind::Pod,
            "Deployment" => Kind::Deployment,
            "Service" => Kind::Service,
            "Node" => Kind::Node,
            "Event" => Kind::Event,
            "Namespace" => Kind::Namespace,
            "Lease" => Kind::Lease,
            other => return Err(ObjectError::UnknownKind(other.to_string())),
        };
        let bad = |e: serde_json::Error| ObjectError::Invalid { kind, message: e.to_string() };
        Ok(match kind {
            Kind::Pod => Object::Pod(serde_json::from_value(value).map_err(bad)?),
            Kind::Deployment => Object::Deployment(Box::new(serde_json::from_value(value).map_err(bad)?)),
            Kind::Service => Object::Service(serde_json::from_value(value).map_err(bad)?),
            Kind::Node => Object::Node(serde_json::from_value(value).map_err(bad)?),
            Kind::Event => Object::Event(serde_json::from_value(value).map_err(bad)?),
            Kind::Namespace => Object::Namespace(serde_json::from_value(value).map_err(bad)?),
            Kind::Lease => Object::Lease(serde_json::from_value(value).map_err(bad)?),
        })
    }
}

/// A kind of object the API serves: its [`Kind`], its metadata, and the way in and out of
/// [`Object`]. The server, the client and the dashboard's cache all take objects through it.
pub trait Resource: Clone + PartialEq + Sized + 'static {
    const KIND: Kind;
    fn meta(&self) -> &ObjectMeta;
    fn meta_mut(&mut self) -> &mut ObjectMeta;
    fn into_object(self) -> Object;
    /// The object as this kind, if it is one.
    fn from_object(object: &Object) -> Option<&Self>;
    /// The owned object as this kind, if it is one.
    fn try_from_object(object: Object) -> Option<Self>;
}

/// `resource!(Kind)`, or for a kind [`Object`] boxes, `resource!(Kind, o => *o)`: how its
/// variant's value becomes the owned object.
macro_rules! resource {
    ($kind:ident) => {
        resource!($kind, o => o);
    };
    ($kind:ident, $o:ident => $owned:expr) => {
        impl Resource for $kind {
            const KIND: Kind = Kind::$kind;
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
            fn into_object(self) -> Object {
                Object::$kind(self.into())
            }
            fn from_object(object: &Object) -> Option<&Self> {
                match object {
                    Object::$kind(o) => Some(o),
                    _ => None,
                }
            }
            fn try_from_object(object: Object) -> Option<Self> {
                match object {
                    Object::$kind($o) => Some($owned),
                    _ => None,
                }
            }
        }
    };
}

resource!(Pod);
resource!(Deployment, o => *o);
resource!(Service);
resource!(Node);
resource!(Event);
resource!(Namespace);
resource!(Lease);

impl Serialize for Object {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Object::Pod(o) => o.serialize(s),
            Object::Deployment(o) => o.serialize(s),
            Object::Service(o) => o.serialize(s),
            Object::Node(o) => o.serialize(s),
            Object::Event(o) => o.serialize(s),
            Object::Namespace(o) => o.serialize(s),
            Object::Lease(o) => o.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        Object::from_value(value).map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    #[error("the object has no \"kind\": say which it is (Pod, Deployment, Service, Node, Namespace)")]
    MissingKind,
    #[error("unknown kind {0:?}: Shepherd serves Pod, Deployment, Service, Node, Event, Namespace and Lease")]
    UnknownKind(String),
    #[error("invalid {kind}: {message}")]
    Invalid { kind: Kind, message: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_quantities_are_read_exactly() {
        let cases = [
            ("67108864", 67_108_864),
            ("64Mi", 67_108_864),
            (" 1.5Gi ", 1_610_612_736),
            ("500M", 500_000_000),
            ("128k", 128_000),
            ("0.5Ki", 512),
            ("1.0005K", 1001),
            ("8Ti", 8 << 40),
            ("2Pi", 2 << 50),
            ("-0", 0),
            ("0.000000000000001Pi", 1),
        ];
        for (text, bytes) in cases {
            assert_eq!(parse_memory(text), Ok(bytes), "{text}");
        }
        for text in ["", "Mi", "1.2.3Mi", "abcMi", "-", ".", "1e3", "9999999Ti", "64 Mi", "1--1", "7Ei"] {
            assert!(parse_memory(text).is_err(), "{text:?} is not a memory quantity");
        }
        assert_eq!(
            parse_memory("64Xi"),
            Err("invalid memory quantity \"64Xi\": unknown suffix \"Xi\" (use Ki, Mi, Gi, Ti, Pi, k, M, G, T, P or plain bytes)"
                .to_string())
        );
    }

    #[test]
    fn negative_and_overflowing_quantities_are_refused_with_their_text() {
        // Once stored as 1099511627775 bytes: the rounding step wrapped an i128.
        let attack = "-154742504910672534362390527Ti";
        assert_eq!(parse_memory(attack), Err(format!("invalid memory quantity \"{attack}\": it is negative; memory must be 0 or more")));
        for text in ["154742504910672534362390527Ti", "9223372036854775808", "99999999999999999999999Mi", "8589934592Gi"] {
            let message = parse_memory(text).unwrap_err();
            assert!(message.contains(text) && message.contains("larger than the 64Ti"), "{message}");
        }
        assert!(parse_memory("1.0000000000000000001").unwrap_err().contains("more than 18 decimal places"));
        for text in ["-1Mi", "-0.5"] {
            assert!(parse_memory(text).unwrap_err().contains("negative"), "{text}");
        }
        for text in ["-1", "-250m"] {
            assert!(parse_cpu(text).unwrap_err().contains("negative"), "{text}");
        }
        let message = parse_cpu("9223372036854775807000m").unwrap_err();
        assert!(message.contains("larger than the 1000000 cores"), "{message}");
    }

    #[test]
    fn cpu_quantities_are_millicores() {
        for (text, millis) in
            [("250m", 250), ("2", 2000), ("0.5", 500), ("1.2345", 1235), ("0.0005", 1), ("9223372036854775807m", i64::MAX)]
        {
            assert_eq!(parse_cpu(text), Ok(millis), "{text}");
        }
        for text in ["", ".", "x", "0.5m", "m", "1,5", "inf", "NaN", "9223372036854775.808"] {
            assert!(parse_cpu(text).is_err(), "{text:?} is not a cpu quantity");
        }
    }

    #[test]
    fn json_numbers_are_integers_in_range_and_anything_else_says_what_to_write() {
        let read = |json: &str| serde_json::from_str::<ResourceRequirements>(json).map_err(|e| e.to_string());
        assert_eq!(read(r#"{"cpu": 250, "memory": "64Mi"}"#), Ok(ResourceRequirements { cpu: 250, memory: 64 << 20 }));
        assert_eq!(read(r#"{"cpu": -5}"#).map(|r| r.cpu), Ok(-5), "validation refuses it, with its path");
        for (json, expected) in [
            (r#"{"cpu": 9223372036854775808}"#, "invalid cpu quantity \"9223372036854775808\": it is larger than the 1000000 cores"),
            (
                r#"{"memory": 1e30}"#,
                "invalid memory 1e30: a number with a fraction or an exponent is not accepted; write bytes as an integer",
            ),
            (
                r#"{"cpu": 1.5e3}"#,
                "invalid cpu 1500.0: a number with a fraction or an exponent is not accepted; write millicores as an integer (250), or a string such as \"250m\" or \"0.5\" (cores)",
            ),
            (r#"{"cpu": 0.5}"#, "\"250m\" or \"0.5\""),
            (r#"{"memory": true}"#, "expected memory bytes as an integer (67108864), or a string such as \"64Mi\""),
        ] {
            let message = read(json).unwrap_err();
            assert!(message.contains(expected), "{json}: {message}");
        }
    }

    #[test]
    fn a_pods_requests_saturate_instead_of_wrapping() {
        let container = |cpu| Container { resources: ResourceRequirements { cpu, memory: i64::MAX }, ..Container::default() };
        let spec =
            PodSpec { containers: vec![container(5_000_000_000_000_000_000), container(5_000_000_000_000_000_000)], ..PodSpec::default() };
        assert_eq!(spec.requests(), ResourceRequirements { cpu: i64::MAX, memory: i64::MAX });
    }

    #[test]
    fn memory_is_formatted_in_the_largest_whole_unit_or_with_one_decimal() {
        let cases = [
            (67_108_864, "64Mi"),
            (1_610_612_736, "1.5Gi"),
            (1000, "1000"),
            (1536, "1.5Ki"),
            ((1 << 30) - 1, "1024.0Mi"),
            (-1_048_576, "-1Mi"),
            (0, "0"),
            (i64::MIN, "-8388608Ti"),
        ];
        for (bytes, text) in cases {
            assert_eq!(format_memory(bytes), text, "{bytes}");
        }
        for bytes in [1 << 10, 3 << 20, 7 << 30, 5 << 40, 123_456_789] {
            let text = format_memory(bytes);
            if !text.contains('.') {
                assert_eq!(parse_memory(&text), Ok(bytes), "{text} reads back");
            }
        }
    }

    #[test]
    fn an_exact_memory_quantity_reads_back_as_the_same_bytes() {
        for (bytes, text) in [(64 << 20, "64Mi"), (100_000, "100k"), (1536, "1536"), (1_500_000, "1500k"), (100_044, "100044"), (0, "0")] {
            assert_eq!(exact_memory(bytes), text, "{bytes}");
            assert_eq!(parse_memory(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn short_references_use_the_lower_case_kind() {
        let reference = ObjectReference { kind: "Pod".into(), namespace: "default".into(), name: "web-server".into(), uid: String::new() };
        assert_eq!(reference.short(), "pod/web-server");
    }

    #[test]
    fn an_object_is_no_larger_than_its_largest_unboxed_kind() {
        let unboxed =
            [size_of::<Pod>(), size_of::<Service>(), size_of::<Node>(), size_of::<Event>(), size_of::<Namespace>(), size_of::<Lease>()];
        assert!(size_of::<Object>() < size_of::<Deployment>(), "a Deployment sets every object's size: box it");
        assert!(size_of::<Object>() <= unboxed.iter().max().unwrap() + 8, "{} bytes", size_of::<Object>());
    }
}
