//! The container runtime seam: the [`ContainerRuntime`] trait the pod workers drive, the
//! plain data it speaks (container configs, container snapshots, runtime events) and the
//! labels by which the agent finds its containers again. Docker and the simulator implement it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::BoxStream;
use shared::metrics::CpuReading;
use shared::remote_command::Options;
use tokio::io::AsyncWrite;

/// The pod's uid: the key the agent groups containers by.
pub const LABEL_POD_UID: &str = "shepherd.pod-uid";
pub const LABEL_NAMESPACE: &str = "shepherd.namespace";
pub const LABEL_POD: &str = "shepherd.pod";
pub const LABEL_CONTAINER: &str = "shepherd.container";
/// The node whose agent owns the container, so that several agents can share one engine.
pub const LABEL_NODE: &str = "shepherd.node";
/// The cluster (`Info::cluster_id`) a container belongs to: with the node, what an agent
/// lists, adopts and cleans up, so that another cluster's node of the same name on the same
/// engine is never touched.
pub const LABEL_CLUSTER: &str = "shepherd.cluster";
/// The pod's termination grace period in seconds, so that an orphan is stopped as gently
/// as its pod asked even after the pod is gone.
pub const LABEL_GRACE: &str = "shepherd.grace-seconds";
/// `true` on a pod sandbox (see [`crate::sandbox`]). A sandbox carries no pod labels: a pool
/// sandbox is made before its pod exists, and its name says whose it is once claimed.
pub const LABEL_SANDBOX: &str = "shepherd.sandbox";
/// On a pod's container: the id of the sandbox whose network namespace it joined.
pub const LABEL_SANDBOX_ID: &str = "shepherd.sandbox-id";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("container runtime unreachable: {0}")]
    Unreachable(String),
    #[error("failed to pull image {image:?}: {message}")]
    Pull { image: String, message: String },
    #[error("failed to {action} container {container}: {message}")]
    Container { action: &'static str, container: String, message: String },
    #[error("container {0} does not exist")]
    NotFound(String),
    #[error("failed to {action}: {message}")]
    Other { action: &'static str, message: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One published port: `host_ip:host_port -> container_port/protocol`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMapping {
    pub container_port: i32,
    pub host_port: i32,
    pub host_ip: String,
    /// `tcp` or `udp`, lower case as Docker writes it.
    pub protocol: String,
}

/// A file or directory of the node bind-mounted into a container (a pod's volume).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// On the node.
    pub source: PathBuf,
    /// In the container: an absolute path.
    pub target: String,
    pub read_only: bool,
}

/// Everything needed to create one container of a pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerConfig {
    /// The engine-level name, unique on the engine.
    pub name: String,
    pub image: String,
    /// Replaces the image's entrypoint when non-empty.
    pub command: Vec<String>,
    /// Replaces the image's default arguments when non-empty.
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub labels: BTreeMap<String, String>,
    /// Bytes; 0 means no limit.
    pub memory_limit: i64,
    /// Billionths of a CPU; 0 means no limit.
    pub nano_cpus: i64,
    pub ports: Vec<PortMapping>,
    /// The network to attach to; empty for the engine's default.
    pub network: String,
    /// No network from the engine: a namespace with nothing in it, for CNI to fill (a pod
    /// sandbox on the CNI pod network). Then `network` and `ports` must be empty.
    pub network_disabled: bool,
    /// The id of a running container whose network namespace this one joins (the pod's
    /// sandbox); then `network`, `ports` and `hostname` must be empty: they belong to the
    /// sandbox, whose hostname the engine gives this one at each start.
    pub sandbox: String,
    /// The kernel's hostname in the container; empty for the engine's (its id's first 12
    /// characters on Docker).
    pub hostname: String,
    /// A file of the host mounted read-only on `/etc/resolv.conf` (the pod's cluster DNS);
    /// empty for the engine's own.
    pub resolv_conf: String,
    /// The pod's volumes as this container sees them.
    pub mounts: Vec<Mount>,
    /// A stdin kept open for attach sessions, closed after the first one when `stdin_once`.
    pub stdin: bool,
    pub stdin_once: bool,
    /// A terminal for the container's process.
    pub tty: bool,
}

/// Where a container is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunState {
    /// Created and never started.
    Created,
    Running,
    /// Exited or dead: `exit_code` and whether the kernel's OOM killer ended it.
    Exited {
        exit_code: i64,
        oom_killed: bool,
    },
    /// Paused, restarting by the engine's own policy, being removed.
    Other(String),
}

/// Which of a container's output to read: the last `tail` lines (or all of it) written
/// from `since` (Unix seconds, as the engine takes them), each line after
/// its RFC 3339 time when `timestamps` is set, then new lines as they come when `follow` is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogRequest {
    pub tail: Option<u64>,
    pub follow: bool,
    pub timestamps: bool,
    pub since: Option<i64>,
}

/// A snapshot of one container as the runtime sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerInfo {
    pub id: String,
    pub name: String,
    pub image: String,
    pub labels: BTreeMap<String, String>,
    pub state: RunState,
    pub created_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The container's address on its network: reported as the pod IP, never contacted.
    pub ip: String,
    /// The host PID of its main process while it runs, else 0.
    pub pid: i64,
    pub memory_limit: i64,
    pub nano_cpus: i64,
    /// Entrypoint followed by arguments, as the container runs them.
    pub command: Vec<String>,
    /// What is bind-mounted into it.
    pub mounts: Vec<Mount>,
    /// Its hostname as the engine reports it: Docker's is the one it gave the container when
    /// it was made or started, not one set inside since ([`ContainerRuntime::set_hostname`]).
    pub hostname: String,
}

impl ContainerInfo {
    pub fn label(&self, key: &str) -> &str {
        self.labels.get(key).map_or("", String::as_str)
    }
}

/// What one probe does, ready for a runtime to run: its port is a number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeAction {
    /// Runs the command in the container: success is exit code 0.
    Exec { command: Vec<String> },
    /// `GET <path>` to `127.0.0.1:<port>` in the container's network namespace: success is
    /// a status from 200 to 399.
    HttpGet { port: u16, path: String, headers: Vec<(String, String)> },
    /// A connection to `127.0.0.1:<port>` in the container's network namespace.
    TcpSocket { port: u16 },
}

/// How one probe went, with the output the `Unhealthy` event shows on failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeOutcome {
    Success,
    Failure(String),
}

/// A piece of an attached process' output, by the stream it came on. A terminal has one
/// stream, which is stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    Stdout(Bytes),
    Stderr(Bytes),
}

/// A process a client is joined to (exec, attach): its output until it ends, its input
/// (shut down for its end of input), and its [`AttachedProcess`].
pub struct Attached {
    pub output: BoxStream<'static, Result<Output>>,
    pub input: Pin<Box<dyn AsyncWrite + Send>>,
    pub process: Box<dyn AttachedProcess>,
}

/// What a session may do with the process it is joined to.
#[async_trait]
pub trait AttachedProcess: Send + Sync {
    /// Gives its terminal a new size.
    async fn resize(&self, width: u16, height: u16) -> Result<()>;

    /// Its exit code, once its output has ended.
    async fn exit_code(&self) -> Result<i64>;

    /// The client went away: ends the process if the session started it (exec), so that
    /// nothing it started stays behind; leaves a container's own process (attach) running.
    async fn abandon(&self) -> Result<()>;
}

/// A running container's use of the machine as the engine measured it: two readings of its
/// cumulative CPU counter, whose difference over their window is its CPU rate
/// ([`shared::metrics::nano_cores`]), and its memory working set at the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub cpu_before: CpuReading,
    pub cpu_after: CpuReading,
    pub working_set_bytes: u64,
}

/// Something happened to a container: the agent looks at the pod it belongs to again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeEvent {
    pub container_id: String,
    /// The container's name when the event happened.
    pub name: String,
    /// `start`, `die`, `oom`, `destroy`, …
    pub action: String,
    pub labels: BTreeMap<String, String>,
}

/// The operations a pod worker needs from a container engine. Create, stop and remove are
/// idempotent: stopping a stopped container or removing a removed one is not an error.
#[async_trait]
pub trait ContainerRuntime: Send + Sync + 'static {
    /// `docker` or `simulated`: the node's `node_info.runtime`.
    fn kind(&self) -> &'static str;

    /// The network pod containers join; empty for the engine's default.
    fn network(&self) -> &str {
        ""
    }

    /// Whether pods get sandboxes: containers that can join another one's network namespace
    /// ([`ContainerConfig::sandbox`]) and be renamed.
    fn pod_sandboxes(&self) -> bool {
        false
    }

    /// The subnets of the engine's networks, by network name: a pod subnet must not overlap them.
    async fn network_subnets(&self) -> Result<Vec<(String, String)>> {
        Ok(Vec::new())
    }

    /// The engine's version, for `node_info.runtime_version`.
    async fn version(&self) -> Result<String>;

    /// Whether the image is present locally.
    async fn has_image(&self, image: &str) -> Result<bool>;

    /// Pulls the image from its registry.
    async fn pull_image(&self, image: &str) -> Result<()>;

    /// Makes sure the image is present: uses a local one, pulls a missing one.
    /// Returns whether it pulled.
    async fn ensure_image(&self, image: &str) -> Result<bool> {
        if self.has_image(image).await? {
            return Ok(false);
        }
        self.pull_image(image).await?;
        Ok(true)
    }

    /// Creates the container (and its network if missing) and returns its id.
    async fn create(&self, config: &ContainerConfig) -> Result<String>;

    async fn start(&self, id: &str) -> Result<()>;

    /// Gives the container a new engine-level name.
    async fn rename(&self, id: &str, name: &str) -> Result<()>;

    /// Sends SIGTERM, then SIGKILL once `grace` has passed.
    async fn stop(&self, id: &str, grace: Duration) -> Result<()>;

    /// Removes the container, killing it if it still runs.
    async fn remove(&self, id: &str) -> Result<()>;

    /// The container's current state, `None` when it does not exist.
    async fn inspect(&self, id: &str) -> Result<Option<ContainerInfo>>;

    /// Every container, running or not, that carries all the given labels.
    async fn list(&self, labels: &[(&str, &str)]) -> Result<Vec<ContainerInfo>>;

    /// Runs one probe of the running container `id`, taking at most about `timeout`. An
    /// `Err` is a probe that could not be run at all (the kubelet's "probe errored"), which
    /// counts neither way; a probe that ran and failed is `Ok(ProbeOutcome::Failure)`.
    async fn probe(&self, id: &str, action: &ProbeAction, timeout: Duration) -> Result<ProbeOutcome>;

    /// A TCP connection to `127.0.0.1:port` inside the network namespace of the running
    /// container `id` (a pod's sandbox): what port-forward carries, so that nothing is sent
    /// to a pod address.
    async fn connect_inside(&self, id: &str, port: u16) -> Result<tokio::net::TcpStream>;

    /// Sets the kernel's hostname in the UTS namespace of the running container `id`: a
    /// container that joins a sandbox made before its pod was known (a warm one) gets the
    /// sandbox's from the engine, and nothing else can give it the pod's.
    async fn set_hostname(&self, id: &str, hostname: &str) -> Result<()>;

    /// What the running container `id` uses now.
    async fn usage(&self, id: &str) -> Result<Usage>;

    /// The container's output (stdout and stderr) that `request` asks for.
    fn logs(&self, id: &str, request: &LogRequest) -> BoxStream<'static, Result<Bytes>>;

    /// Runs `options.command` in the running container `id`, joined to the streams
    /// `options` asks for.
    async fn exec(&self, id: &str, options: &Options) -> Result<Attached>;

    /// Joins the streams `options` asks for of the running container `id`'s own process.
    async fn attach(&self, id: &str, options: &Options) -> Result<Attached>;

    /// Lifecycle events of containers that carry all the given labels. The stream ends when
    /// the engine goes away; the caller subscribes again.
    fn events(&self, labels: &[(&str, &str)]) -> BoxStream<'static, Result<RuntimeEvent>>;
}
