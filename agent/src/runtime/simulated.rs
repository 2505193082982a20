//! The simulated runtime: containers that exist only in memory and reach Running after a
//! configurable delay, for scale tests (many nodes in one process, like KWOK) and laptops
//! without Docker. Every image is "present"; nothing is executed. Each node's pods get
//! addresses of their own from the node's block of the shared address space (RFC 6598).
//! Mounts are recorded, not made: a container's info lists what it would see.
//! Probes succeed, except every probe of a container whose environment sets
//! [`UNHEALTHY_ENV`] to `true`: so a rollout to an unhealthy version can be watched at scale.
//! Nothing listens in a simulated container: port-forward to one says so. Exec and attach
//! are refused by name: there is no process to run a command beside or join.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::Utc;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::broadcast;
use tokio_stream::wrappers::BroadcastStream;

use super::seam::{
    Attached, ContainerConfig, ContainerInfo, ContainerRuntime, Error, LABEL_POD_UID, LogRequest, ProbeAction, ProbeOutcome, Result,
    RunState, RuntimeEvent, Usage,
};
use shared::metrics::CpuReading;

/// The window a simulated container's usage is measured over: metrics-server's resolution.
const USAGE_WINDOW: chrono::TimeDelta = chrono::TimeDelta::seconds(15);

/// How many container events a follower may lag behind before it is told to re-read: the
/// start of every pod of a full node (110 by default) fits. A broadcast channel allocates
/// all of them at once, and a fleet has one runtime per node (at 1,024 they were 128 KiB of
/// each node's 140).
const EVENT_BUFFER: usize = 128;

/// Where simulated pod addresses come from: 100.64.0.0/10, the shared address space
/// (RFC 6598) that no internet host uses. Shown as pod IPs, never contacted.
const POD_ADDRESSES: u32 = u32::from_be_bytes([100, 64, 0, 0]);
/// Addresses in a node's block: a /23, 510 pods at once (a node's default limit is 110).
const BLOCK_SIZE: u32 = 512;
/// How many node blocks the space holds: nodes in different blocks never share an address.
pub const BLOCKS: u32 = (1 << 22) / BLOCK_SIZE;

/// The address block of the node called `node`, from its name (FNV-1a): two nodes' blocks
/// differ unless their names collide (a fleet numbers its nodes' blocks instead).
pub fn pod_block(node: &str) -> u32 {
    let hash = node.bytes().fold(0x811c_9dc5_u32, |hash, byte| (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193));
    hash % BLOCKS
}

/// The environment variable that makes every probe of a simulated container fail when it
/// is `true`: its readiness probe never passes, its liveness probe restarts it.
pub const UNHEALTHY_ENV: &str = "SHEPHERD_SIMULATED_UNHEALTHY";

/// In-memory containers. Cheap enough to run thousands of pods in one process.
pub struct SimulatedRuntime {
    start_delay: Duration,
    /// The node's address block ([`pod_block`]).
    block: u32,
    containers: Mutex<HashMap<String, ContainerInfo>>,
    /// The containers whose probes fail ([`UNHEALTHY_ENV`]).
    unhealthy: Mutex<HashSet<String>>,
    next_id: AtomicU64,
    events: broadcast::Sender<RuntimeEvent>,
}

impl SimulatedRuntime {
    pub fn new(start_delay: Duration) -> Self {
        SimulatedRuntime {
            start_delay,
            block: 0,
            containers: Mutex::new(HashMap::new()),
            unhealthy: Mutex::new(HashSet::new()),
            next_id: AtomicU64::new(1),
            events: broadcast::channel(EVENT_BUFFER).0,
        }
    }

    /// Gives the node's pods addresses from `block` (taken modulo [`BLOCKS`]) rather than the first.
    pub fn with_pod_block(mut self, block: u32) -> Self {
        self.block = block % BLOCKS;
        self
    }

    /// The address of a new container of the pod `uid`: the one its pod's other containers
    /// have (they share the pod's network, as in a sandbox), else the lowest of the node's
    /// block that no container has. A full block starts again at its first address.
    fn address(&self, containers: &HashMap<String, ContainerInfo>, uid: Option<&String>, n: u64) -> String {
        let pod = uid.and_then(|uid| containers.values().find(|c| c.labels.get(LABEL_POD_UID) == Some(uid)));
        if let Some(sibling) = pod {
            return sibling.ip.clone();
        }
        let taken: HashSet<&str> = containers.values().map(|c| c.ip.as_str()).collect();
        let first = POD_ADDRESSES + self.block * BLOCK_SIZE;
        let hosts = (1..BLOCK_SIZE - 1).map(|host| Ipv4Addr::from(first + host).to_string());
        let full = || Ipv4Addr::from(first + 1 + (n % u64::from(BLOCK_SIZE - 2)) as u32).to_string();
        hosts.into_iter().find(|ip| !taken.contains(ip.as_str())).unwrap_or_else(full)
    }

    fn containers(&self) -> std::sync::MutexGuard<'_, HashMap<String, ContainerInfo>> {
        self.containers.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn unhealthy(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.unhealthy.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn emit(&self, info: &ContainerInfo, action: &str) {
        // No subscriber is fine: nobody is watching yet.
        let _ = self.events.send(RuntimeEvent {
            container_id: info.id.clone(),
            name: info.name.clone(),
            action: action.to_string(),
            labels: info.labels.clone(),
        });
    }

    /// Moves a container to its end state, as if its process had exited.
    fn finish(&self, id: &str, exit_code: i64) -> Result<()> {
        let info = {
            let mut containers = self.containers();
            let info = containers.get_mut(id).ok_or_else(|| Error::NotFound(id.to_string()))?;
            if info.state != RunState::Running {
                return Ok(());
            }
            info.state = RunState::Exited { exit_code, oom_killed: false };
            info.finished_at = Some(Utc::now());
            info.clone()
        };
        self.emit(&info, "die");
        Ok(())
    }
}

fn matches(info: &ContainerInfo, labels: &[(&str, &str)]) -> bool {
    labels.iter().all(|(k, v)| info.labels.get(*k).is_some_and(|value| value == v))
}

fn no_processes(action: &'static str, id: &str) -> Error {
    Error::Container {
        action,
        container: id.to_string(),
        message: "a simulated node runs no processes: run the pod on a node with the docker runtime".into(),
    }
}

#[async_trait]
impl ContainerRuntime for SimulatedRuntime {
    fn kind(&self) -> &'static str {
        "simulated"
    }

    async fn version(&self) -> Result<String> {
        Ok(env!("CARGO_PKG_VERSION").to_string())
    }

    async fn has_image(&self, _image: &str) -> Result<bool> {
        Ok(true)
    }

    async fn pull_image(&self, _image: &str) -> Result<()> {
        Ok(())
    }

    async fn create(&self, config: &ContainerConfig) -> Result<String> {
        let mut containers = self.containers();
        if let Some(existing) = containers.values().find(|c| c.name == config.name) {
            return Ok(existing.id.clone());
        }
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let id = format!("sim{n:013x}");
        let ip = self.address(&containers, config.labels.get(LABEL_POD_UID), n);
        // As Docker: a container in a sandbox gets the sandbox's hostname, another its id's start.
        let hostname = match containers.get(&config.sandbox) {
            Some(sandbox) => sandbox.hostname.clone(),
            None if config.hostname.is_empty() => id[..12].to_string(),
            None => config.hostname.clone(),
        };
        let info = ContainerInfo {
            id: id.clone(),
            name: config.name.clone(),
            image: config.image.clone(),
            labels: config.labels.clone(),
            state: RunState::Created,
            created_at: Some(Utc::now()),
            started_at: None,
            finished_at: None,
            ip,
            pid: 0,
            memory_limit: config.memory_limit,
            nano_cpus: config.nano_cpus,
            command: config.command.iter().chain(&config.args).cloned().collect(),
            mounts: config.mounts.clone(),
            hostname,
        };
        containers.insert(id.clone(), info);
        if config.env.iter().any(|(name, value)| name == UNHEALTHY_ENV && value == "true") {
            self.unhealthy().insert(id.clone());
        }
        Ok(id)
    }

    async fn start(&self, id: &str) -> Result<()> {
        if !self.containers().contains_key(id) {
            return Err(Error::NotFound(id.to_string()));
        }
        tokio::time::sleep(self.start_delay).await;
        let info = {
            let mut containers = self.containers();
            let info = containers.get_mut(id).ok_or_else(|| Error::NotFound(id.to_string()))?;
            if info.state == RunState::Running {
                return Ok(());
            }
            info.state = RunState::Running;
            info.started_at = Some(Utc::now());
            info.finished_at = None;
            info.clone()
        };
        self.emit(&info, "start");
        Ok(())
    }

    async fn rename(&self, id: &str, name: &str) -> Result<()> {
        let mut containers = self.containers();
        if containers.values().any(|c| c.name == name && c.id != id) {
            return Err(Error::Container { action: "rename", container: id.to_string(), message: format!("the name {name} is in use") });
        }
        let info = containers.get_mut(id).ok_or_else(|| Error::NotFound(id.to_string()))?;
        info.name = name.to_string();
        Ok(())
    }

    async fn stop(&self, id: &str, _grace: Duration) -> Result<()> {
        match self.finish(id, 0) {
            Err(Error::NotFound(_)) => Ok(()),
            other => other,
        }
    }

    async fn remove(&self, id: &str) -> Result<()> {
        let removed = self.containers().remove(id);
        self.unhealthy().remove(id);
        if let Some(info) = removed {
            self.emit(&info, "destroy");
        }
        Ok(())
    }

    async fn inspect(&self, id: &str) -> Result<Option<ContainerInfo>> {
        let containers = self.containers();
        Ok(containers.get(id).or_else(|| containers.values().find(|c| c.name == id)).cloned())
    }

    /// Recorded as the container's hostname.
    async fn set_hostname(&self, id: &str, hostname: &str) -> Result<()> {
        let mut containers = self.containers();
        let info = containers.get_mut(id).ok_or_else(|| Error::NotFound(id.to_string()))?;
        if info.state != RunState::Running {
            return Err(Error::Container {
                action: "set the hostname of",
                container: id.to_string(),
                message: "the container is not running".into(),
            });
        }
        info.hostname = hostname.to_string();
        Ok(())
    }

    async fn connect_inside(&self, id: &str, _port: u16) -> Result<tokio::net::TcpStream> {
        Err(Error::Container {
            action: "connect inside",
            container: id.to_string(),
            message: "a simulated container has no network namespace and nothing listening in it".into(),
        })
    }

    async fn probe(&self, id: &str, _action: &ProbeAction, _timeout: Duration) -> Result<ProbeOutcome> {
        match self.containers().get(id) {
            Some(info) if info.state == RunState::Running => {}
            _ => {
                return Err(Error::Container {
                    action: "probe",
                    container: id.to_string(),
                    message: "the container is not running".into(),
                });
            }
        }
        Ok(match self.unhealthy().contains(id) {
            true => ProbeOutcome::Failure(format!("simulated failure: the container sets {UNHEALTHY_ENV}=true")),
            false => ProbeOutcome::Success,
        })
    }

    /// Figures from the container's name, so that a pod's stay the same from one request to
    /// the next: 1 to 50 millicores and 4 to 64 MiB, within its limits, over a window of
    /// metrics-server's 15 s (or its life, when shorter).
    async fn usage(&self, id: &str) -> Result<Usage> {
        let (name, started_at, nano_cpus, memory_limit) = match self.containers().get(id) {
            Some(info @ ContainerInfo { state: RunState::Running, .. }) => {
                (info.name.clone(), info.started_at.unwrap_or_else(Utc::now), info.nano_cpus, info.memory_limit)
            }
            _ => {
                return Err(Error::Container {
                    action: "read the usage of",
                    container: id.to_string(),
                    message: "it is not running".into(),
                });
            }
        };
        let hash = u64::from(pod_block(&name));
        let nano_cores = (1 + hash % 50) * 1_000_000;
        let nano_cores = if nano_cpus > 0 { nano_cores.min(nano_cpus.unsigned_abs()) } else { nano_cores };
        let bytes = (4 + (hash / 50) % 61) << 20;
        let working_set_bytes = if memory_limit > 0 { bytes.min(memory_limit.unsigned_abs()) } else { bytes };
        let now = Utc::now();
        let start = (now - USAGE_WINDOW).max(started_at).min(now);
        let used = |at: chrono::DateTime<Utc>| {
            let nanos = u64::try_from((at - started_at).num_nanoseconds().unwrap_or(0)).unwrap_or(0);
            u64::try_from(u128::from(nanos) * u128::from(nano_cores) / 1_000_000_000).unwrap_or(u64::MAX)
        };
        Ok(Usage {
            cpu_before: CpuReading { usage_nanos: used(start), at: start },
            cpu_after: CpuReading { usage_nanos: used(now), at: now },
            working_set_bytes,
        })
    }

    async fn list(&self, labels: &[(&str, &str)]) -> Result<Vec<ContainerInfo>> {
        let mut found: Vec<ContainerInfo> = self.containers().values().filter(|c| matches(c, labels)).cloned().collect();
        found.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(found)
    }

    fn logs(&self, id: &str, request: &LogRequest) -> BoxStream<'static, Result<Bytes>> {
        let line = match self.containers().get(id) {
            Some(info) => Ok(Bytes::from(format!(
                "{}[simulated] container {} runs image {} with command {:?}; a simulated node executes nothing\n",
                // Written when it started, as Docker stamps a line when it is written.
                match (request.timestamps, info.started_at) {
                    (true, Some(at)) => format!("{} ", at.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)),
                    _ => String::new(),
                },
                info.name,
                info.image,
                info.command
            ))),
            None => Err(Error::NotFound(id.to_string())),
        };
        futures::stream::once(async move { line }).boxed()
    }

    async fn exec(&self, id: &str, _options: &shared::remote_command::Options) -> Result<Attached> {
        Err(no_processes("exec in", id))
    }

    async fn attach(&self, id: &str, _options: &shared::remote_command::Options) -> Result<Attached> {
        Err(no_processes("attach to", id))
    }

    fn events(&self, labels: &[(&str, &str)]) -> BoxStream<'static, Result<RuntimeEvent>> {
        let wanted: BTreeMap<String, String> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        BroadcastStream::new(self.events.subscribe())
            .filter_map(move |event| {
                let keep = match &event {
                    Ok(e) => wanted.iter().all(|(k, v)| e.labels.get(k) == Some(v)),
                    Err(_) => true,
                };
                async move {
                    match event {
                        Ok(e) if keep => Some(Ok(e)),
                        Ok(_) => None,
                        // Lagged behind: say so, the caller resyncs from a full list.
                        Err(e) => Some(Err(Error::Other { action: "follow simulated events", message: e.to_string() })),
                    }
                }
            })
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(name: &str, uid: &str) -> ContainerConfig {
        ContainerConfig {
            name: name.into(),
            image: "minimal".into(),
            labels: BTreeMap::from([(LABEL_POD_UID.to_string(), uid.to_string())]),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn containers_run_after_the_delay_and_stop_idempotently() {
        let runtime = SimulatedRuntime::new(Duration::from_millis(20));
        let mut events = runtime.events(&[(LABEL_POD_UID, "u1")]);
        let id = runtime.create(&config("a", "u1")).await.unwrap();
        assert_eq!(runtime.create(&config("a", "u1")).await.unwrap(), id, "create is idempotent by name");
        assert_eq!(runtime.inspect(&id).await.unwrap().unwrap().state, RunState::Created);
        let began = std::time::Instant::now();
        runtime.start(&id).await.unwrap();
        assert!(began.elapsed() >= Duration::from_millis(20));
        assert_eq!(runtime.inspect(&id).await.unwrap().unwrap().state, RunState::Running);
        assert_eq!(events.next().await.unwrap().unwrap().action, "start");
        runtime.stop(&id, Duration::ZERO).await.unwrap();
        runtime.stop(&id, Duration::ZERO).await.unwrap();
        assert_eq!(runtime.inspect(&id).await.unwrap().unwrap().state, RunState::Exited { exit_code: 0, oom_killed: false });
        runtime.remove(&id).await.unwrap();
        runtime.remove(&id).await.unwrap();
        assert!(runtime.inspect(&id).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn probes_succeed_unless_the_container_says_it_is_unhealthy() {
        let runtime = SimulatedRuntime::new(Duration::ZERO);
        let action = ProbeAction::TcpSocket { port: 80 };
        let healthy = runtime.create(&config("a", "u1")).await.unwrap();
        let unhealthy_config = ContainerConfig { env: vec![(UNHEALTHY_ENV.into(), "true".into())], ..config("b", "u1") };
        let unhealthy = runtime.create(&unhealthy_config).await.unwrap();
        assert!(runtime.probe(&healthy, &action, Duration::from_secs(1)).await.is_err(), "not running yet: no probe");
        for id in [&healthy, &unhealthy] {
            runtime.start(id).await.unwrap();
        }
        assert_eq!(runtime.probe(&healthy, &action, Duration::from_secs(1)).await.unwrap(), ProbeOutcome::Success);
        let failed = runtime.probe(&unhealthy, &action, Duration::from_secs(1)).await.unwrap();
        assert!(matches!(&failed, ProbeOutcome::Failure(m) if m.contains(UNHEALTHY_ENV)), "{failed:?}");
    }

    #[tokio::test]
    async fn list_and_events_filter_by_label() {
        let runtime = SimulatedRuntime::new(Duration::ZERO);
        let mut events = runtime.events(&[(LABEL_POD_UID, "u2")]);
        let a = runtime.create(&config("a", "u1")).await.unwrap();
        let b = runtime.create(&config("b", "u2")).await.unwrap();
        runtime.start(&a).await.unwrap();
        runtime.start(&b).await.unwrap();
        let listed = runtime.list(&[(LABEL_POD_UID, "u2")]).await.unwrap();
        assert_eq!(listed.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), vec![b.as_str()]);
        assert_eq!(events.next().await.unwrap().unwrap().container_id, b);
    }

    async fn ip(runtime: &SimulatedRuntime, name: &str, uid: &str) -> String {
        let id = runtime.create(&config(name, uid)).await.unwrap();
        runtime.inspect(&id).await.unwrap().unwrap().ip
    }

    #[tokio::test]
    async fn every_pod_of_a_node_has_an_address_of_its_own_that_its_containers_share() {
        let runtime = SimulatedRuntime::new(Duration::ZERO).with_pod_block(pod_block("n1"));
        let web = ip(&runtime, "web", "u1").await;
        assert_eq!(ip(&runtime, "web-sidecar", "u1").await, web, "one address per pod");
        let db = ip(&runtime, "db", "u2").await;
        assert_ne!(db, web);
        for address in [&web, &db] {
            let parsed: Ipv4Addr = address.parse().unwrap();
            assert_eq!(u32::from(parsed) >> 22, POD_ADDRESSES >> 22, "in 100.64.0.0/10: {address}");
        }
        // A removed pod's address is free again, never a live one's.
        let web_ids = runtime.list(&[(LABEL_POD_UID, "u1")]).await.unwrap();
        for container in &web_ids {
            runtime.remove(&container.id).await.unwrap();
        }
        let again = ip(&runtime, "cache", "u3").await;
        assert_eq!(again, web);
        assert_ne!(again, db);
    }

    #[tokio::test]
    async fn pods_of_different_nodes_have_different_addresses() {
        let names = ["sim-0", "sim-1", "sim-2", "laptop", "node-1"];
        let mut seen = HashSet::new();
        for name in names {
            let runtime = SimulatedRuntime::new(Duration::ZERO).with_pod_block(pod_block(name));
            assert!(seen.insert(ip(&runtime, "web", "u1").await), "{name}'s first pod has another node's address");
        }
    }
}
