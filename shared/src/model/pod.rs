//! Pods: the spec of their containers, their status as the agent reports it, the stage a
//! user must tell apart, whether a pod is ready, and the binding the scheduler posts.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::condition::{Condition, conditions, find_condition};
use super::meta::{Labels, ObjectMeta, ObjectReference, Time};
use super::resources::ResourceRequirements;
use super::volume::{Volume, VolumeMount};

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
    /// `ClusterFirst` (empty means it too: the node's cluster DNS, which forwards other names)
    /// or `Default` (the node's own resolver, as the engine gives it); `ClusterFirstWithHostNet`
    /// means `ClusterFirst` for a pod without the host's network, as in Kubernetes.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub dns_policy: String,
    /// Whether containers get the variables of the Services of the pod's namespace (unset
    /// means yes, as in Kubernetes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_service_links: Option<bool>,
    /// What the containers may mount ([`Container::volume_mounts`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
}

/// The `dns_policy` values a pod may have.
pub const DNS_POLICIES: [&str; 3] = ["ClusterFirst", "ClusterFirstWithHostNet", "Default"];

impl PodSpec {
    pub fn restart_policy(&self) -> Option<RestartPolicy> {
        RestartPolicy::parse(&self.restart_policy)
    }

    /// Whether the pod's resolver is the cluster's DNS (every policy but `Default`).
    pub fn uses_cluster_dns(&self) -> bool {
        self.dns_policy != "Default"
    }

    /// Whether its containers get the service variables of its namespace.
    pub fn service_links(&self) -> bool {
        self.enable_service_links != Some(false)
    }

    /// What Kubernetes fills in when an object is created: the restart policy, every
    /// probe's timing defaults, the ports' protocol and the volumes' file modes.
    pub fn set_defaults(&mut self) {
        if self.restart_policy.is_empty() {
            self.restart_policy = "Always".into();
        }
        self.volumes.iter_mut().for_each(Volume::set_defaults);
        for container in &mut self.containers {
            for port in container.ports.iter_mut().filter(|p| p.protocol.is_empty()) {
                port.protocol = "TCP".into();
            }
            for probe in [&mut container.liveness_probe, &mut container.readiness_probe, &mut container.startup_probe].into_iter().flatten()
            {
                probe.set_defaults();
            }
        }
    }

    /// The sum of every container's requests: what the scheduler reserves on a node, and
    /// what `sheepctl` and the dashboard show it holds. Validation bounds each request so
    /// that the sum never reaches i64::MAX and refuses negative ones; for a pod that was
    /// never validated, a negative request counts as none and the sum saturates rather
    /// than wraps.
    pub fn requests(&self) -> ResourceRequirements {
        self.containers.iter().fold(ResourceRequirements::default(), |sum, c| ResourceRequirements {
            memory: sum.memory.saturating_add(c.resources.memory.max(0)),
            cpu: sum.cpu.saturating_add(c.resources.cpu.max(0)),
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
    /// A list of `{name, value}`, or, as the original project's manifests write it, a map
    /// of names to values (taken in name order); stored and shown as the list.
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "env_list_or_map")]
    pub env: Vec<EnvVar>,
    /// Whole ConfigMaps and Secrets as variables; `env` wins over them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env_from: Vec<EnvFromSource>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ContainerPort>,
    pub resources: ResourceRequirements,
    /// `Always`, `IfNotPresent` or `Never`; empty for the default of the image
    /// ([`crate::image::Reference::default_pull_policy`]); validation rejects anything else.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub image_pull_policy: String,
    /// Restarts the container when it fails (Kubernetes' `livenessProbe`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub liveness_probe: Option<Probe>,
    /// Says when the container may receive traffic: the pod's `Ready` condition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<Probe>,
    /// Holds the other two probes back until it succeeds once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_probe: Option<Probe>,
    /// The pod's volumes this container sees, and where.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
    /// Keeps the container's stdin open for `attach` (`kubectl run -i`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stdin: bool,
    /// Closes that stdin when the first attached session ends it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stdin_once: bool,
    /// Gives the container a terminal (`kubectl run -it`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tty: bool,
}

impl Container {
    /// The container's probes that are set, each with its kind.
    pub fn probes(&self) -> impl Iterator<Item = (ProbeKind, &Probe)> {
        [
            (ProbeKind::Startup, &self.startup_probe),
            (ProbeKind::Readiness, &self.readiness_probe),
            (ProbeKind::Liveness, &self.liveness_probe),
        ]
        .into_iter()
        .filter_map(|(kind, probe)| probe.as_ref().map(|p| (kind, p)))
    }

    /// The number of the container port a probe names (`None`: no port of that name).
    pub fn probe_port(&self, port: &ProbePort) -> Option<i32> {
        match port {
            ProbePort::Number(n) => Some(*n),
            ProbePort::Name(name) => self.ports.iter().find(|p| &p.name == name).map(|p| p.container_port),
        }
    }

    /// The policy the node pulls this container's image by (`None` for an invalid one).
    pub fn pull_policy(&self) -> Option<PullPolicy> {
        match self.image_pull_policy.as_str() {
            "" => Some(crate::image::Reference::parse(&self.image).default_pull_policy()),
            text => PullPolicy::parse(text),
        }
    }
}

/// Which of a container's three probes, as the kubelet names them in events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeKind {
    Startup,
    Readiness,
    Liveness,
}

impl ProbeKind {
    /// `Liveness`, `Readiness` or `Startup`: the word the `Unhealthy` event starts with.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeKind::Startup => "Startup",
            ProbeKind::Readiness => "Readiness",
            ProbeKind::Liveness => "Liveness",
        }
    }

    /// Whether a failure past the threshold kills the container (liveness and startup).
    pub fn kills(self) -> bool {
        matches!(self, ProbeKind::Liveness | ProbeKind::Startup)
    }

    /// The container's field: `liveness_probe`, …
    pub fn field(self) -> &'static str {
        match self {
            ProbeKind::Startup => "startup_probe",
            ProbeKind::Readiness => "readiness_probe",
            ProbeKind::Liveness => "liveness_probe",
        }
    }
}

/// A check of a container, as Kubernetes' `Probe`: exactly one handler and its timing. A
/// timing field of 0 is Kubernetes' default; [`Probe::set_defaults`] writes the defaults in
/// when an object is created, as Kubernetes stores them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Probe {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecAction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_get: Option<HttpGetAction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_socket: Option<TcpSocketAction>,
    /// Seconds after the container starts before the first probe.
    pub initial_delay_seconds: i32,
    /// Seconds a probe may take (default 1).
    pub timeout_seconds: i32,
    /// Seconds between probes (default 10).
    pub period_seconds: i32,
    /// Successes in a row after a failure that count as success (default 1; 1 for liveness and startup).
    pub success_threshold: i32,
    /// Failures in a row that count as failure (default 3).
    pub failure_threshold: i32,
}

impl Probe {
    pub const DEFAULT_TIMEOUT_SECONDS: i32 = 1;
    pub const DEFAULT_PERIOD_SECONDS: i32 = 10;
    pub const DEFAULT_SUCCESS_THRESHOLD: i32 = 1;
    pub const DEFAULT_FAILURE_THRESHOLD: i32 = 3;

    /// Kubernetes' defaults in place of zeros.
    pub fn set_defaults(&mut self) {
        let default = |field: &mut i32, value: i32| {
            if *field == 0 {
                *field = value;
            }
        };
        default(&mut self.timeout_seconds, Self::DEFAULT_TIMEOUT_SECONDS);
        default(&mut self.period_seconds, Self::DEFAULT_PERIOD_SECONDS);
        default(&mut self.success_threshold, Self::DEFAULT_SUCCESS_THRESHOLD);
        default(&mut self.failure_threshold, Self::DEFAULT_FAILURE_THRESHOLD);
        if let Some(http) = &mut self.http_get {
            if http.path.is_empty() {
                http.path = "/".into();
            }
            if http.scheme.is_empty() {
                http.scheme = "HTTP".into();
            }
        }
    }

    /// The probe with its defaults: what the prober runs by.
    pub fn defaulted(&self) -> Probe {
        let mut probe = self.clone();
        probe.set_defaults();
        probe
    }

    /// One line as `kubectl describe` writes a probe: `http-get http://:8080/healthz
    /// delay=0s timeout=1s period=10s #success=1 #failure=3`.
    pub fn summary(&self) -> String {
        let p = self.defaulted();
        let port = |port: &ProbePort| match port {
            ProbePort::Number(n) => n.to_string(),
            ProbePort::Name(name) => name.clone(),
        };
        let handler = if let Some(exec) = &p.exec {
            format!("exec [{}]", exec.command.join(" "))
        } else if let Some(http) = &p.http_get {
            format!("http-get http://{}:{}{}", http.host, port(&http.port), http.request_path())
        } else if let Some(tcp) = &p.tcp_socket {
            format!("tcp-socket {}:{}", tcp.host, port(&tcp.port))
        } else {
            "unknown".to_string()
        };
        format!(
            "{handler} delay={}s timeout={}s period={}s #success={} #failure={}",
            p.initial_delay_seconds, p.timeout_seconds, p.period_seconds, p.success_threshold, p.failure_threshold
        )
    }

    /// How many handlers are set: validation requires exactly one.
    pub fn handlers(&self) -> usize {
        usize::from(self.exec.is_some()) + usize::from(self.http_get.is_some()) + usize::from(self.tcp_socket.is_some())
    }
}

/// Runs a command in the container: success is exit code 0.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ExecAction {
    pub command: Vec<String>,
}

/// An HTTP GET to `127.0.0.1:<port><path>` inside the pod's network namespace: success is
/// a status from 200 to 399.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct HttpGetAction {
    /// Defaults to `/`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub path: String,
    pub port: ProbePort,
    /// Empty, `127.0.0.1` or `localhost` ([`PROBE_HOSTS`]): the probe never leaves the pod.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub host: String,
    /// `HTTP` (the default) only.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub scheme: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub http_headers: Vec<HttpHeader>,
}

impl HttpGetAction {
    /// The path the request asks for: `/` when none is given.
    pub fn request_path(&self) -> &str {
        if self.path.is_empty() { "/" } else { &self.path }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct HttpHeader {
    pub name: String,
    pub value: String,
}

/// A TCP connection to `127.0.0.1:<port>` inside the pod's network namespace: success is
/// the connection being accepted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct TcpSocketAction {
    pub port: ProbePort,
    /// Empty, `127.0.0.1` or `localhost` ([`PROBE_HOSTS`]).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub host: String,
}

/// The hosts a probe may name: each is the pod itself, reached from inside its network
/// namespace, so no probe packet is sent to any other address. (Kubernetes' empty host is
/// the pod's IP, which from inside the pod is the same listener on an address of its own.)
pub const PROBE_HOSTS: [&str; 3] = ["", "127.0.0.1", "localhost"];

/// A probe's port: a number, or the name of one of the container's ports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum ProbePort {
    Number(i32),
    Name(String),
}

impl Default for ProbePort {
    fn default() -> Self {
        ProbePort::Number(0)
    }
}

/// When a node pulls a container's image, as Kubernetes' `imagePullPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PullPolicy {
    /// Before every container is created, even when the image is present.
    Always,
    /// Only when the image is missing.
    IfNotPresent,
    /// Never: a missing image is an error.
    Never,
}

impl PullPolicy {
    pub const ALL: [&'static str; 3] = ["Always", "IfNotPresent", "Never"];

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "Always" => Some(PullPolicy::Always),
            "IfNotPresent" => Some(PullPolicy::IfNotPresent),
            "Never" => Some(PullPolicy::Never),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct EnvVar {
    pub name: String,
    pub value: String,
    /// Where the value comes from when it is not written here; exclusive with `value`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_from: Option<EnvVarSource>,
}

impl EnvVar {
    pub fn literal(name: impl Into<String>, value: impl Into<String>) -> Self {
        EnvVar { name: name.into(), value: value.into(), value_from: None }
    }
}

/// Exactly one source of a variable's value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct EnvVarSource {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_map_key_ref: Option<KeySelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<KeySelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field_ref: Option<FieldSelector>,
}

/// One key of a ConfigMap or Secret in the pod's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct KeySelector {
    pub name: String,
    pub key: String,
    /// When true, a missing object or key leaves the variable out instead of holding the
    /// container back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

/// A field of the pod itself (one of [`ENV_FIELD_PATHS`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct FieldSelector {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    pub field_path: String,
}

/// The pod fields a `fieldRef` may name.
pub const ENV_FIELD_PATHS: [&str; 5] = ["metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "status.podIP"];

/// Every key of one ConfigMap or Secret, each under `prefix` + its key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct EnvFromSource {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub prefix: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<EnvSourceRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<EnvSourceRef>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct EnvSourceRef {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

/// `env` as a list of [`EnvVar`], or as a map of names to scalar values (`{"PORT": 5432}`
/// in YAML is the text `5432`).
fn env_list_or_map<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<EnvVar>, D::Error> {
    use serde::de::Error;
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Env {
        List(Vec<EnvVar>),
        Map(BTreeMap<String, serde_json::Value>),
    }
    let map = match Env::deserialize(d) {
        Ok(Env::List(list)) => return Ok(list),
        Ok(Env::Map(map)) => map,
        Err(_) => return Err(D::Error::custom("env must be a list of {name, value} or a map of names to values")),
    };
    map.into_iter()
        .map(|(name, value)| {
            let value = match value {
                serde_json::Value::String(text) => text,
                serde_json::Value::Number(n) => n.to_string(),
                serde_json::Value::Bool(b) => b.to_string(),
                _ => return Err(D::Error::custom(format!("env {name:?}: a value in the map form must be a string, number or boolean"))),
            };
            Ok(EnvVar::literal(name, value))
        })
        .collect()
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
    #[serde(default, deserialize_with = "super::meta::de_time", skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub container_statuses: Vec<ContainerStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ContainerStatus {
    pub name: String,
    pub state: ContainerState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_state: Option<ContainerState>,
    /// Running, started, and passing its readiness probe if it has one.
    pub ready: bool,
    /// Running and past its startup probe if it has one (Kubernetes' `started`).
    pub started: bool,
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
        #[serde(default, deserialize_with = "super::meta::de_time", skip_serializing_if = "Option::is_none")]
        started_at: Option<Time>,
    },
    Terminated {
        #[serde(default)]
        exit_code: i64,
        #[serde(default)]
        reason: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        message: String,
        #[serde(default, deserialize_with = "super::meta::de_time", skip_serializing_if = "Option::is_none")]
        started_at: Option<Time>,
        #[serde(default, deserialize_with = "super::meta::de_time", skip_serializing_if = "Option::is_none")]
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

    /// The container a request for `requested` (empty: none named) of this pod's `exec`,
    /// `attach` or `log` is for, else kube-apiserver's words for the 400: an empty name is
    /// the only container, and a name must be one of the pod's containers (Shepherd has no
    /// init or ephemeral ones).
    pub fn container_for(&self, requested: &str) -> Result<&str, String> {
        let name = &self.metadata.name;
        let names: Vec<&str> = self.spec.containers.iter().map(|c| c.name.as_str()).collect();
        match (requested, names.as_slice()) {
            ("", [only]) => Ok(only),
            ("", []) => Err(format!("a container name must be specified for pod {name}")),
            ("", several) => Err(format!("a container name must be specified for pod {name}, choose one of: [{}]", several.join(" "))),
            (wanted, _) => {
                names.into_iter().find(|n| *n == wanted).ok_or_else(|| format!("container {wanted} is not valid for pod {name}"))
            }
        }
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

    /// Running, and Ready when the agent reports readiness: counted as a deployment's ready
    /// replica and listed as a service's endpoint.
    pub fn is_ready(&self) -> bool {
        self.status.phase == PodPhase::Running
            && find_condition(&self.status.conditions, conditions::READY).is_none_or(|c| c.status == conditions::TRUE)
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

/// The body of `POST …/pods/{name}/binding`: the scheduler's assignment letter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Binding {
    pub kind: String,
    pub metadata: ObjectMeta,
    pub target: ObjectReference,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_or_log_is_for_a_named_container_or_the_only_one_in_kube_apiservers_words() {
        let pod = |names: &[&str]| {
            let mut pod = Pod::default();
            pod.metadata.name = "web".into();
            pod.spec.containers = names.iter().map(|n| Container { name: n.to_string(), ..Container::default() }).collect();
            pod
        };
        assert_eq!(pod(&["main"]).container_for(""), Ok("main"));
        assert_eq!(pod(&["main", "side"]).container_for("side"), Ok("side"));
        assert_eq!(pod(&["main"]).container_for("nope"), Err("container nope is not valid for pod web".to_string()));
        assert_eq!(
            pod(&["main", "side"]).container_for(""),
            Err("a container name must be specified for pod web, choose one of: [main side]".to_string())
        );
        assert_eq!(pod(&[]).container_for(""), Err("a container name must be specified for pod web".to_string()));
    }

    #[test]
    fn env_written_as_a_map_means_the_same_as_the_list() {
        let container =
            |env: serde_json::Value| -> Container { serde_json::from_value(serde_json::json!({"name": "db", "env": env})).unwrap() };
        let listed = container(serde_json::json!([{"name": "PORT", "value": "5432"}, {"name": "POSTGRES_HOST", "value": "db"}]));
        let mapped = container(serde_json::json!({"PORT": 5432, "POSTGRES_HOST": "db"}));
        assert_eq!(mapped, listed);
        assert_eq!(
            serde_json::to_value(&mapped).unwrap()["env"][0],
            serde_json::json!({"name": "PORT", "value": "5432"}),
            "shown as the list"
        );
        let refused = serde_json::from_value::<Container>(serde_json::json!({"env": {"A": ["x"]}})).unwrap_err().to_string();
        assert!(refused.contains("env \"A\""), "{refused}");
    }

    #[test]
    fn a_pods_requests_saturate_instead_of_wrapping() {
        let container = |cpu| Container { resources: ResourceRequirements { cpu, memory: i64::MAX }, ..Container::default() };
        let spec =
            PodSpec { containers: vec![container(5_000_000_000_000_000_000), container(5_000_000_000_000_000_000)], ..PodSpec::default() };
        assert_eq!(spec.requests(), ResourceRequirements { cpu: i64::MAX, memory: i64::MAX });
    }

    #[test]
    fn a_negative_request_counts_as_none() {
        let container = |cpu, memory| Container { resources: ResourceRequirements { cpu, memory }, ..Container::default() };
        let spec = PodSpec { containers: vec![container(-500, 64), container(250, -1 << 20)], ..PodSpec::default() };
        assert_eq!(spec.requests(), ResourceRequirements { cpu: 250, memory: 64 });
    }

    #[test]
    fn a_probe_reads_as_kubectl_describe_writes_it() {
        let http = HttpGetAction { path: "/healthz".into(), port: ProbePort::Name("http".into()), ..HttpGetAction::default() };
        let probe = Probe { http_get: Some(http), period_seconds: 2, ..Probe::default() };
        assert_eq!(probe.summary(), "http-get http://:http/healthz delay=0s timeout=1s period=2s #success=1 #failure=3");
        let exec = Probe {
            exec: Some(ExecAction { command: vec!["cat".into(), "/tmp/alive".into()] }),
            initial_delay_seconds: 5,
            ..Probe::default()
        };
        assert_eq!(exec.summary(), "exec [cat /tmp/alive] delay=5s timeout=1s period=10s #success=1 #failure=3");
        let tcp = Probe { tcp_socket: Some(TcpSocketAction { port: ProbePort::Number(9000), host: String::new() }), ..Probe::default() };
        assert_eq!(tcp.summary(), "tcp-socket :9000 delay=0s timeout=1s period=10s #success=1 #failure=3");
    }

    #[test]
    fn a_pod_is_ready_when_running_and_not_reported_unready() {
        let mut pod = Pod::default();
        assert!(!pod.is_ready(), "Pending");
        pod.status.phase = PodPhase::Running;
        assert!(pod.is_ready(), "Running, no Ready condition reported");
        let ready = |status: &str| Condition { type_: conditions::READY.into(), status: status.into(), ..Condition::default() };
        pod.status.conditions = vec![ready(conditions::FALSE)];
        assert!(!pod.is_ready(), "reported not ready");
        pod.status.conditions = vec![ready(conditions::TRUE)];
        assert!(pod.is_ready());
    }
}
