//! The real runtime: Docker Engine through bollard. Containers go on a `shepherd` bridge
//! network created on first use; Docker's 304/404/409 answers are read as "already done" so
//! that every operation can be repeated safely.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use async_trait::async_trait;
use bollard::Docker;
use bollard::errors::Error as BollardError;
use bollard::models::{
    ContainerCpuStats, ContainerCreateBody, ContainerInspectResponse, ContainerStateStatusEnum, EndpointSettings, EventMessage, HostConfig,
    Mount as DockerMount, MountBindOptions, MountBindOptionsPropagationEnum, MountType, NetworkCreateRequest, NetworkingConfig,
    PortBinding,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, EventsOptionsBuilder, InspectContainerOptions, ListContainersOptionsBuilder,
    ListNetworksOptionsBuilder, LogsOptionsBuilder, RemoveContainerOptionsBuilder, RenameContainerOptionsBuilder, StartContainerOptions,
    StatsOptionsBuilder, StopContainerOptionsBuilder,
};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use shared::metrics::CpuReading;
use shared::remote_command::Options;
use shepherd_image::RegistryLogin;

use super::seam::{
    Attached, ContainerConfig, ContainerInfo, ContainerRuntime, Error, LogRequest, Mount, Output, ProbeAction, ProbeOutcome, Result,
    RunState, RuntimeEvent, Usage,
};
use super::{cgroup, docker_session, loopback_probe, namespaces};

/// The most of an exec probe's output kept for its event, as the kubelet's 10 KiB.
const PROBE_OUTPUT_LIMIT: usize = 10 * 1024;

/// How far apart the two readings of a container's cgroup counters are: Docker's own
/// stats interval.
const CGROUP_READINGS_APART: Duration = Duration::from_secs(1);

/// The bridge network every pod container joins.
pub const NETWORK: &str = "shepherd";

/// Docker Engine, reached over its local socket.
pub struct DockerRuntime {
    docker: Docker,
    /// The sign-in of the cluster's registry, sent with pulls from it alone.
    login: Option<RegistryLogin>,
    /// Network ids by name, resolved once.
    networks: tokio::sync::Mutex<HashMap<String, String>>,
}

impl DockerRuntime {
    /// Connects to the local engine (`DOCKER_HOST` or `/var/run/docker.sock`), agrees on an
    /// API version and checks that the engine answers.
    pub async fn connect() -> Result<Self> {
        let unreachable = |e: BollardError| {
            Error::Unreachable(format!(
                "cannot reach the Docker engine ({e}); install Docker (Debian: apt-get install docker.io) and start dockerd, \
                 or point DOCKER_HOST at a running engine"
            ))
        };
        let docker = Docker::connect_with_local_defaults().map_err(unreachable)?;
        let docker = docker.negotiate_version().await.map_err(unreachable)?;
        docker.ping().await.map_err(unreachable)?;
        Ok(DockerRuntime { docker, login: None, networks: Default::default() })
    }

    /// Pulls from `login.registry` sign in with `login`.
    pub fn with_login(mut self, login: Option<RegistryLogin>) -> Self {
        self.login = login;
        self
    }

    /// The bollard client, for callers that need more than the trait offers (image bootstrap).
    pub fn client(&self) -> &Docker {
        &self.docker
    }

    /// The id of the network called `name`, created if missing. Docker allows several networks
    /// of one name (two agents creating it at once): the oldest wins and the others are removed.
    async fn network_id(&self, name: &str) -> Result<String> {
        let mut cache = self.networks.lock().await;
        if let Some(id) = cache.get(name) {
            return Ok(id.clone());
        }
        let id = match self.canonical_network(name).await? {
            Some(id) => id,
            None => {
                let request = NetworkCreateRequest {
                    name: name.to_string(),
                    driver: Some("bridge".to_string()),
                    labels: Some(HashMap::from([("shepherd.network".to_string(), "true".to_string())])),
                    ..Default::default()
                };
                self.docker
                    .create_network(request)
                    .await
                    .map_err(|e| Error::Other { action: "create the shepherd network", message: e.to_string() })?;
                tracing::info!(network = name, "created the bridge network");
                self.canonical_network(name).await?.ok_or_else(|| Error::Other {
                    action: "create the shepherd network",
                    message: format!("network {name} vanished right after it was created"),
                })?
            }
        };
        cache.insert(name.to_string(), id.clone());
        Ok(id)
    }

    /// The oldest network named exactly `name`, removing younger namesakes.
    async fn canonical_network(&self, name: &str) -> Result<Option<String>> {
        let filters = HashMap::from([("name", vec![name.to_string()])]);
        let options = ListNetworksOptionsBuilder::default().filters(&filters).build();
        let networks =
            self.docker.list_networks(Some(options)).await.map_err(|e| Error::Other { action: "list networks", message: e.to_string() })?;
        let mut same: Vec<(String, String)> = networks
            .into_iter()
            .filter(|n| n.name.as_deref() == Some(name))
            .filter_map(|n| n.id.map(|id| (n.created.unwrap_or_default(), id)))
            .collect();
        same.sort();
        let mut ids = same.into_iter().map(|(_, id)| id);
        let first = ids.next();
        for extra in ids {
            // In use by someone else's container: leave it, it does no harm.
            let _ = self.docker.remove_network(&extra).await;
        }
        Ok(first)
    }

    /// Runs `command` in the container for at most `timeout`: success is exit code 0, and
    /// the output is the failure's message. A command still running at the timeout is
    /// ended, as containerd ends a timed-out exec for the kubelet, by the session's own way
    /// of ending an exec ([`super::AttachedProcess::abandon`]); else every probe would leave one.
    async fn exec_probe(&self, id: &str, command: &[String], timeout: Duration) -> Result<ProbeOutcome> {
        let deadline = tokio::time::Instant::now() + timeout;
        let timed_out = || ProbeOutcome::Failure(format!("command {:?} timed out", command.join(" ")));
        let options = Options { command: command.to_vec(), stdout: true, stderr: true, ..Options::default() };
        let Ok(attached) = tokio::time::timeout_at(deadline, docker_session::exec(&self.docker, id, &options)).await else {
            return Ok(timed_out());
        };
        let Attached { mut output, process, .. } = attached?;
        let mut kept = Vec::new();
        let read = async {
            while let Some(chunk) = output.next().await {
                let (Output::Stdout(bytes) | Output::Stderr(bytes)) = chunk?;
                let room = PROBE_OUTPUT_LIMIT.saturating_sub(kept.len());
                kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
            }
            Ok::<_, Error>(())
        };
        if tokio::time::timeout_at(deadline, read).await.is_err() {
            process.abandon().await?;
            return Ok(timed_out());
        }
        Ok(match process.exit_code().await? {
            0 => ProbeOutcome::Success,
            _ => ProbeOutcome::Failure(String::from_utf8_lossy(&kept).trim_end().to_string()),
        })
    }

    /// `network` is the id of `config.network`, empty for the engine's default. A container
    /// that joins a sandbox gets the mode `container:<id>` and neither network nor ports.
    fn create_body(config: &ContainerConfig, network: &str) -> ContainerCreateBody {
        let mut exposed = Vec::new();
        let mut bindings: HashMap<String, Option<Vec<PortBinding>>> = HashMap::new();
        for port in &config.ports {
            let key = format!("{}/{}", port.container_port, port.protocol);
            exposed.push(key.clone());
            if port.host_port > 0 {
                bindings
                    .entry(key)
                    .or_insert_with(|| Some(Vec::new()))
                    .get_or_insert_with(Vec::new)
                    .push(PortBinding { host_ip: Some(port.host_ip.clone()), host_port: Some(port.host_port.to_string()) });
            }
        }
        let joins = !config.sandbox.is_empty();
        let networking_config = (!network.is_empty() && !joins && !config.network_disabled)
            .then(|| NetworkingConfig { endpoints_config: Some(HashMap::from([(network.to_string(), EndpointSettings::default())])) });
        let network_mode =
            if joins { Some(format!("container:{}", config.sandbox)) } else { (!network.is_empty()).then(|| network.to_string()) };
        ContainerCreateBody {
            image: Some(config.image.clone()),
            hostname: (!config.hostname.is_empty()).then(|| config.hostname.clone()),
            entrypoint: (!config.command.is_empty()).then(|| config.command.clone()),
            cmd: (!config.args.is_empty()).then(|| config.args.clone()),
            env: Some(config.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            labels: Some(config.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
            exposed_ports: (!exposed.is_empty()).then_some(exposed),
            network_disabled: config.network_disabled.then_some(true),
            open_stdin: config.stdin.then_some(true),
            stdin_once: config.stdin_once.then_some(true),
            tty: config.tty.then_some(true),
            host_config: Some(HostConfig {
                memory: (config.memory_limit > 0).then_some(config.memory_limit),
                // No swap beyond the limit, as Kubernetes: over the limit means OOM-killed.
                memory_swap: (config.memory_limit > 0).then_some(config.memory_limit),
                nano_cpus: (config.nano_cpus > 0).then_some(config.nano_cpus),
                port_bindings: (!bindings.is_empty()).then_some(bindings),
                network_mode,
                binds: (!config.resolv_conf.is_empty()).then(|| vec![format!("{}:/etc/resolv.conf:ro", config.resolv_conf)]),
                mounts: (!config.mounts.is_empty()).then(|| config.mounts.iter().map(bind_mount).collect()),
                ..Default::default()
            }),
            networking_config,
            ..Default::default()
        }
    }
}

/// A volume as a bind mount. Private propagation: what the node mounts later under the
/// source (a volume's tmpfs is mounted before the container is made) stays out of sight.
fn bind_mount(mount: &Mount) -> DockerMount {
    DockerMount {
        target: Some(mount.target.clone()),
        source: Some(mount.source.to_string_lossy().into_owned()),
        typ: Some(MountType::BIND),
        read_only: Some(mount.read_only),
        bind_options: Some(MountBindOptions { propagation: Some(MountBindOptionsPropagationEnum::RPRIVATE), ..Default::default() }),
        ..Default::default()
    }
}

/// The HTTP status of a Docker error answer.
fn status(error: &BollardError) -> Option<u16> {
    match error {
        BollardError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

fn parse_time(text: Option<&str>) -> Option<DateTime<Utc>> {
    let time = DateTime::parse_from_rfc3339(text?).ok()?.with_timezone(&Utc);
    // Docker writes the zero time (year 1) for "never".
    (time.timestamp() > 0).then_some(time)
}

fn info_from_inspect(inspect: ContainerInspectResponse) -> ContainerInfo {
    let state = inspect.state.unwrap_or_default();
    let run_state = match state.status {
        Some(ContainerStateStatusEnum::CREATED) => RunState::Created,
        Some(ContainerStateStatusEnum::RUNNING) => RunState::Running,
        Some(ContainerStateStatusEnum::EXITED | ContainerStateStatusEnum::DEAD) => {
            RunState::Exited { exit_code: state.exit_code.unwrap_or(0), oom_killed: state.oom_killed.unwrap_or(false) }
        }
        Some(other) => RunState::Other(other.to_string()),
        None => RunState::Other(String::new()),
    };
    let pid = if run_state == RunState::Running { state.pid.unwrap_or(0) } else { 0 };
    let config = inspect.config.unwrap_or_default();
    let host = inspect.host_config.unwrap_or_default();
    let ip = inspect
        .network_settings
        .and_then(|n| n.networks)
        .and_then(|networks| {
            let mut addresses: Vec<(String, String)> =
                networks.into_iter().filter_map(|(name, e)| e.ip_address.filter(|ip| !ip.is_empty()).map(|ip| (name, ip))).collect();
            addresses.sort_by_key(|(name, _)| name != NETWORK);
            addresses.into_iter().next().map(|(_, ip)| ip)
        })
        .unwrap_or_default();
    let mut command = inspect.path.into_iter().filter(|p| !p.is_empty()).collect::<Vec<_>>();
    command.extend(inspect.args.unwrap_or_default());
    ContainerInfo {
        id: inspect.id.unwrap_or_default(),
        name: inspect.name.unwrap_or_default().trim_start_matches('/').to_string(),
        image: config.image.unwrap_or_default(),
        labels: config.labels.unwrap_or_default().into_iter().collect(),
        state: run_state,
        created_at: inspect.created.as_deref().and_then(|t| parse_time(Some(t))),
        started_at: parse_time(state.started_at.as_deref()),
        finished_at: parse_time(state.finished_at.as_deref()),
        ip,
        pid,
        memory_limit: host.memory.unwrap_or(0),
        nano_cpus: host.nano_cpus.unwrap_or(0),
        command,
        hostname: config.hostname.unwrap_or_default(),
        mounts: inspect
            .mounts
            .unwrap_or_default()
            .into_iter()
            .map(|m| Mount {
                source: m.source.unwrap_or_default().into(),
                target: m.destination.unwrap_or_default(),
                read_only: m.rw == Some(false),
            })
            .collect(),
    }
}

/// Splits `repo[:tag]` for the pull API, which pulls every tag when none is given.
fn split_reference(image: &str) -> (&str, &str) {
    if image.contains('@') {
        return (image, "");
    }
    let last_slash = image.rfind('/').map_or(0, |i| i + 1);
    match image[last_slash..].rfind(':') {
        Some(i) => (&image[..last_slash + i], &image[last_slash + i + 1..]),
        None => (image, "latest"),
    }
}

fn label_filters(labels: &[(&str, &str)]) -> Vec<String> {
    labels.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

impl DockerRuntime {
    /// Two readings of the container's cgroup counters a second apart, as Docker's own.
    async fn cgroup_usage(&self, id: &str) -> std::result::Result<Usage, String> {
        let pid = match self.inspect(id).await.map_err(|e| e.to_string())? {
            Some(info) if info.pid > 0 => info.pid,
            _ => return Err("the container is not running".into()),
        };
        let read = move || async move {
            let counters = tokio::task::spawn_blocking(move || cgroup::read(pid)).await.map_err(|e| e.to_string())??;
            Ok::<_, String>((CpuReading { usage_nanos: counters.cpu_usage_nanos, at: Utc::now() }, counters))
        };
        let (cpu_before, _) = read().await?;
        tokio::time::sleep(CGROUP_READINGS_APART).await;
        let (cpu_after, counters) = read().await?;
        let working_set_bytes = shared::metrics::working_set(counters.memory_usage_bytes, counters.inactive_file_bytes);
        Ok(Usage { cpu_before, cpu_after, working_set_bytes })
    }
}

#[async_trait]
impl ContainerRuntime for DockerRuntime {
    fn kind(&self) -> &'static str {
        "docker"
    }

    fn network(&self) -> &str {
        NETWORK
    }

    fn pod_sandboxes(&self) -> bool {
        true
    }

    async fn network_subnets(&self) -> Result<Vec<(String, String)>> {
        let networks = self
            .docker
            .list_networks(None::<bollard::query_parameters::ListNetworksOptions>)
            .await
            .map_err(|e| Error::Other { action: "list networks", message: e.to_string() })?;
        Ok(networks
            .into_iter()
            .flat_map(|n| {
                let name = n.name.unwrap_or_default();
                let configs = n.ipam.and_then(|ipam| ipam.config).unwrap_or_default();
                configs.into_iter().filter_map(move |c| c.subnet.map(|subnet| (name.clone(), subnet)))
            })
            .collect())
    }

    async fn version(&self) -> Result<String> {
        let version = self.docker.version().await.map_err(|e| Error::Unreachable(e.to_string()))?;
        Ok(version.version.unwrap_or_default())
    }

    async fn has_image(&self, image: &str) -> Result<bool> {
        match self.docker.inspect_image(image).await {
            Ok(_) => Ok(true),
            Err(e) if status(&e) == Some(404) => Ok(false),
            Err(e) => Err(Error::Other { action: "inspect an image", message: format!("{image}: {e}") }),
        }
    }

    async fn pull_image(&self, image: &str) -> Result<()> {
        let (repo, tag) = split_reference(image);
        let mut options = CreateImageOptionsBuilder::default().from_image(repo);
        if !tag.is_empty() {
            options = options.tag(tag);
        }
        let credentials = self.login.as_ref().and_then(|login| login.credentials_for(image));
        let mut progress = self.docker.create_image(Some(options.build()), None, credentials);
        while let Some(step) = progress.next().await {
            // Docker's pull errors carry the registry's answer, the message a person can act on.
            step.map_err(|e| Error::Pull { image: image.to_string(), message: shepherd_image::engine_message(e) })?;
        }
        Ok(())
    }

    async fn create(&self, config: &ContainerConfig) -> Result<String> {
        if !config.sandbox.is_empty() && (!config.network.is_empty() || !config.ports.is_empty() || !config.hostname.is_empty()) {
            return Err(Error::Container {
                action: "create",
                container: config.name.clone(),
                message: "a container that joins a sandbox has no network, ports or hostname of its own: they are the sandbox's"
                    .to_string(),
            });
        }
        if config.network_disabled && (!config.network.is_empty() || !config.ports.is_empty()) {
            return Err(Error::Container {
                action: "create",
                container: config.name.clone(),
                message: "a container without a network from the engine has no engine network or published ports".to_string(),
            });
        }
        let network = if config.network.is_empty() { String::new() } else { self.network_id(&config.network).await? };
        let options = CreateContainerOptionsBuilder::default().name(&config.name).build();
        let attempt = self.docker.create_container(Some(options.clone()), Self::create_body(config, &network)).await;
        let attempt = match attempt {
            // The network was removed behind our back: make it again, once.
            Err(e) if status(&e) == Some(404) && e.to_string().contains("network") => {
                self.networks.lock().await.remove(&config.network);
                let network = self.network_id(&config.network).await?;
                self.docker.create_container(Some(options), Self::create_body(config, &network)).await
            }
            other => other,
        };
        match attempt {
            Ok(created) => Ok(created.id),
            // Already there (a retry after a lost answer): the name is unique, use it.
            Err(e) if status(&e) == Some(409) => match self.inspect(&config.name).await? {
                Some(existing) => Ok(existing.id),
                None => Err(Error::Container { action: "create", container: config.name.clone(), message: e.to_string() }),
            },
            Err(e) => Err(Error::Container { action: "create", container: config.name.clone(), message: e.to_string() }),
        }
    }

    async fn start(&self, id: &str) -> Result<()> {
        match self.docker.start_container(id, None::<StartContainerOptions>).await {
            Ok(()) => Ok(()),
            Err(e) if status(&e) == Some(404) => Err(Error::NotFound(id.to_string())),
            Err(e) => Err(Error::Container { action: "start", container: id.to_string(), message: e.to_string() }),
        }
    }

    async fn rename(&self, id: &str, name: &str) -> Result<()> {
        let options = RenameContainerOptionsBuilder::default().name(name).build();
        match self.docker.rename_container(id, options).await {
            Ok(()) => Ok(()),
            Err(e) if status(&e) == Some(404) => Err(Error::NotFound(id.to_string())),
            Err(e) => Err(Error::Container { action: "rename", container: id.to_string(), message: e.to_string() }),
        }
    }

    async fn stop(&self, id: &str, grace: Duration) -> Result<()> {
        let seconds = i32::try_from(grace.as_secs()).unwrap_or(i32::MAX);
        let options = StopContainerOptionsBuilder::default().t(seconds).build();
        match self.docker.stop_container(id, Some(options)).await {
            Ok(()) => Ok(()),
            Err(e) if matches!(status(&e), Some(304 | 404)) => Ok(()),
            Err(e) => Err(Error::Container { action: "stop", container: id.to_string(), message: e.to_string() }),
        }
    }

    async fn remove(&self, id: &str) -> Result<()> {
        let options = RemoveContainerOptionsBuilder::default().force(true).build();
        match self.docker.remove_container(id, Some(options)).await {
            Ok(()) => Ok(()),
            Err(e) if matches!(status(&e), Some(404 | 409)) => Ok(()),
            Err(e) => Err(Error::Container { action: "remove", container: id.to_string(), message: e.to_string() }),
        }
    }

    async fn inspect(&self, id: &str) -> Result<Option<ContainerInfo>> {
        match self.docker.inspect_container(id, None::<InspectContainerOptions>).await {
            Ok(inspect) => Ok(Some(info_from_inspect(inspect))),
            Err(e) if status(&e) == Some(404) => Ok(None),
            Err(e) => Err(Error::Container { action: "inspect", container: id.to_string(), message: e.to_string() }),
        }
    }

    async fn probe(&self, id: &str, action: &ProbeAction, timeout: Duration) -> Result<ProbeOutcome> {
        let failed = |message: String| Error::Container { action: "probe", container: id.to_string(), message };
        if let ProbeAction::Exec { command } = action {
            return self.exec_probe(id, command, timeout).await.map_err(|e| failed(e.to_string()));
        }
        let pid = match self.inspect(id).await? {
            Some(info) if info.pid > 0 => info.pid,
            _ => return Err(failed("the container is not running".into())),
        };
        loopback_probe::probe(pid, action.clone(), timeout).await.map_err(failed)
    }

    async fn connect_inside(&self, id: &str, port: u16) -> Result<tokio::net::TcpStream> {
        let failed = |message: String| Error::Container { action: "connect inside", container: id.to_string(), message };
        let pid = match self.inspect(id).await? {
            Some(info) if info.pid > 0 => info.pid,
            _ => return Err(failed("the container is not running".into())),
        };
        namespaces::connect_loopback(pid, port).await.map_err(failed)
    }

    async fn set_hostname(&self, id: &str, hostname: &str) -> Result<()> {
        let failed = |message: String| Error::Container { action: "set the hostname of", container: id.to_string(), message };
        let pid = match self.inspect(id).await? {
            Some(info) if info.pid > 0 => info.pid,
            _ => return Err(failed("the container is not running".into())),
        };
        namespaces::set_hostname(pid, hostname).await.map_err(failed)
    }

    /// Docker's own two readings about a second apart (`stream=false` without `one-shot`
    /// sends the one before as `precpu_stats`): one call gives a rate, and the agent keeps
    /// no readings between requests. When Docker's figures are empty, as some engines leave
    /// them for a container in another's network namespace, the cgroup files the same way.
    async fn usage(&self, id: &str) -> Result<Usage> {
        let failed = |message: String| Error::Container { action: "read the usage of", container: id.to_string(), message };
        let options = StatsOptionsBuilder::new().stream(false).one_shot(false).build();
        let stats = match std::pin::pin!(self.docker.stats(id, Some(options))).next().await {
            Some(stats) => stats.map_err(|e| failed(e.to_string()))?,
            None => return Err(failed("the engine sent no figures".into())),
        };
        let reading = |cpu: Option<&ContainerCpuStats>, at: Option<&str>| {
            let at = parse_time(at).filter(|at| at.timestamp() > 0)?;
            Some(CpuReading { usage_nanos: cpu?.cpu_usage.as_ref()?.total_usage?, at })
        };
        let before = reading(stats.precpu_stats.as_ref(), stats.preread.as_deref());
        let after = reading(stats.cpu_stats.as_ref(), stats.read.as_deref());
        let (Some(cpu_before), Some(cpu_after)) = (before, after) else {
            return self.cgroup_usage(id).await.map_err(failed);
        };
        let memory = stats.memory_stats.unwrap_or_default();
        // The inactive page cache: cgroup v1 counts the hierarchy's as `total_inactive_file`, v2 has only `inactive_file`.
        let inactive = memory.stats.as_ref().and_then(|s| s.get("total_inactive_file").or_else(|| s.get("inactive_file")).copied());
        let working_set_bytes = shared::metrics::working_set(memory.usage.unwrap_or(0), inactive.unwrap_or(0));
        Ok(Usage { cpu_before, cpu_after, working_set_bytes })
    }

    async fn list(&self, labels: &[(&str, &str)]) -> Result<Vec<ContainerInfo>> {
        let filters = HashMap::from([("label", label_filters(labels))]);
        let options = ListContainersOptionsBuilder::default().all(true).filters(&filters).build();
        let summaries = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(|e| Error::Other { action: "list containers", message: e.to_string() })?;
        let inspected = futures::future::join_all(summaries.iter().filter_map(|s| s.id.as_deref()).map(|id| self.inspect(id))).await;
        let mut infos = Vec::with_capacity(inspected.len());
        for info in inspected {
            // A container removed between the list and the inspect is simply gone.
            if let Some(info) = info? {
                infos.push(info);
            }
        }
        Ok(infos)
    }

    fn logs(&self, id: &str, request: &LogRequest) -> BoxStream<'static, Result<Bytes>> {
        let tail = request.tail.map_or_else(|| "all".to_string(), |n| n.to_string());
        let seconds = |at: Option<i64>| at.map_or(0, |s| i32::try_from(s).unwrap_or(i32::MAX));
        let options = LogsOptionsBuilder::default()
            .stdout(true)
            .stderr(true)
            .follow(request.follow)
            .tail(&tail)
            .timestamps(request.timestamps)
            .since(seconds(request.since))
            .build();
        let container = id.to_string();
        self.docker
            .logs(id, Some(options))
            .map_ok(|output| output.into_bytes())
            .map_err(move |e| match status(&e) {
                Some(404) => Error::NotFound(container.clone()),
                _ => Error::Container { action: "read the logs of", container: container.clone(), message: e.to_string() },
            })
            .boxed()
    }

    async fn exec(&self, id: &str, options: &Options) -> Result<Attached> {
        docker_session::exec(&self.docker, id, options).await
    }

    async fn attach(&self, id: &str, options: &Options) -> Result<Attached> {
        docker_session::attach(&self.docker, id, options).await
    }

    fn events(&self, labels: &[(&str, &str)]) -> BoxStream<'static, Result<RuntimeEvent>> {
        let filters = HashMap::from([
            ("type", vec!["container".to_string()]),
            // What the agent acts on (`crate::runtime_events`): containers that end.
            ("event", ["die", "oom", "destroy"].map(String::from).to_vec()),
            ("label", label_filters(labels)),
        ]);
        let options = EventsOptionsBuilder::default().filters(&filters).build();
        self.docker
            .events(Some(options))
            .map_ok(|message: EventMessage| {
                let actor = message.actor.unwrap_or_default();
                let attributes = actor.attributes.unwrap_or_default();
                RuntimeEvent {
                    container_id: actor.id.unwrap_or_default(),
                    // Docker puts the container's name among the labels.
                    name: attributes.get("name").cloned().unwrap_or_default(),
                    action: message.action.unwrap_or_default(),
                    labels: attributes.into_iter().collect::<BTreeMap<_, _>>(),
                }
            })
            .map_err(|e| Error::Other { action: "watch Docker events", message: e.to_string() })
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_split_into_repo_and_tag() {
        assert_eq!(split_reference("minimal"), ("minimal", "latest"));
        assert_eq!(split_reference("busybox:1.36"), ("busybox", "1.36"));
        assert_eq!(split_reference("127.0.0.1:5000/team/app"), ("127.0.0.1:5000/team/app", "latest"));
        assert_eq!(split_reference("127.0.0.1:5000/team/app:v2"), ("127.0.0.1:5000/team/app", "v2"));
        assert_eq!(split_reference("app@sha256:abc"), ("app@sha256:abc", ""));
    }

    #[test]
    fn zero_time_means_never() {
        assert_eq!(parse_time(Some("0001-01-01T00:00:00Z")), None);
        assert!(parse_time(Some("2026-01-02T03:04:05.123456789Z")).is_some());
        assert_eq!(parse_time(None), None);
    }

    #[test]
    fn create_body_publishes_ports_on_the_given_address() {
        let config = ContainerConfig {
            name: "x".into(),
            image: "minimal".into(),
            command: vec!["/bin/sh".into()],
            ports: vec![crate::runtime::PortMapping {
                container_port: 8080,
                host_port: 18080,
                host_ip: "127.0.0.1".into(),
                protocol: "tcp".into(),
            }],
            memory_limit: 64 << 20,
            nano_cpus: 250_000_000,
            network: NETWORK.into(),
            ..Default::default()
        };
        let body = DockerRuntime::create_body(&config, "0123abcd");
        let host = body.host_config.unwrap();
        let binding = &host.port_bindings.unwrap()["8080/tcp"].clone().unwrap()[0];
        assert_eq!(binding.host_ip.as_deref(), Some("127.0.0.1"));
        assert_eq!(binding.host_port.as_deref(), Some("18080"));
        assert_eq!(host.memory, Some(64 << 20));
        assert_eq!(host.nano_cpus, Some(250_000_000));
        assert_eq!(body.entrypoint, Some(vec!["/bin/sh".to_string()]));
        assert_eq!(body.cmd, None);
        assert_eq!(host.network_mode.as_deref(), Some("0123abcd"));
        assert_eq!(host.mounts, None);
        assert_eq!(body.hostname, None, "Docker's own");
        let named = ContainerConfig { hostname: "web-1".into(), ..config };
        assert_eq!(DockerRuntime::create_body(&named, "0123abcd").hostname.as_deref(), Some("web-1"));
    }

    #[test]
    fn a_volume_is_a_bind_mount_read_only_when_asked() {
        let mounts = vec![
            Mount { source: "/var/lib/shepherd-agent/pods/u/volumes/empty-dir/data".into(), target: "/data".into(), read_only: false },
            Mount { source: "/etc/ssl".into(), target: "/ssl".into(), read_only: true },
        ];
        let config = ContainerConfig { name: "x".into(), image: "minimal".into(), mounts, ..Default::default() };
        let mounts = DockerRuntime::create_body(&config, "").host_config.unwrap().mounts.unwrap();
        assert_eq!(mounts[0].typ, Some(MountType::BIND));
        assert_eq!(mounts[0].source.as_deref(), Some("/var/lib/shepherd-agent/pods/u/volumes/empty-dir/data"));
        assert_eq!(mounts[0].target.as_deref(), Some("/data"));
        assert_eq!((mounts[0].read_only, mounts[1].read_only), (Some(false), Some(true)));
    }

    #[test]
    fn a_container_in_a_sandbox_joins_its_namespace_without_network_or_ports() {
        let config = ContainerConfig { name: "x".into(), image: "minimal".into(), sandbox: "cafe01".into(), ..Default::default() };
        let body = DockerRuntime::create_body(&config, "");
        assert_eq!(body.hostname, None, "the sandbox's, from Docker");
        let host = body.host_config.unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("container:cafe01"));
        assert_eq!(host.binds, None, "the engine's resolv.conf");
        assert!(body.networking_config.is_none());
        assert!(body.exposed_ports.is_none());
    }

    #[test]
    fn the_pods_resolv_conf_is_mounted_read_only() {
        let config =
            ContainerConfig { sandbox: "cafe01".into(), resolv_conf: "/state/dns/n1/shop/resolv.conf".into(), ..Default::default() };
        let host = DockerRuntime::create_body(&config, "").host_config.unwrap();
        assert_eq!(host.binds, Some(vec!["/state/dns/n1/shop/resolv.conf:/etc/resolv.conf:ro".to_string()]));
    }
}
