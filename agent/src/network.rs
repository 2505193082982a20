//! The node's pod network, chosen at start (`--pod-network cni|docker`). With CNI, as the
//! kubelet does it, a pod sandbox gets no network from the engine (`NetworkDisabled`): the
//! agent bind-mounts the sandbox's namespace under its state directory, so that it outlives
//! the sandbox's process, and runs `loopback` and, side by side, `bridge` with `host-local`
//! addresses from the node's pod subnet, followed by `portmap` only for a sandbox with host
//! ports (their sockets held by [`crate::hostport`]). Masquerading and FORWARD accepts are
//! node-wide rules ([`crate::iptables`]), not per pod. A record per sandbox keeps the chain
//! ADD ran and its result: the pod's address and host ports after an agent restart, and
//! what DEL needs. With Docker, sandboxes join the engine's `shepherd` bridge.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::cni::{self, Attachment, NetworkList, PluginPath};
use crate::iptables;
use crate::runtime::{ContainerRuntime, PortMapping};
pub use crate::subnet::Subnet;

/// The node's pod subnet unless `--pod-subnet` says otherwise: outside Docker's default
/// address pools (172.17–31.x and 192.168.x).
pub const DEFAULT_SUBNET: &str = "10.77.0.0/16";
/// The bridge pods' veths join; every agent on a host shares it (and so its subnet).
pub const BRIDGE: &str = "shepherd0";
/// The CNI network's name: host-local keeps its leases in `/var/lib/cni/networks/<name>`.
pub const NETWORK_NAME: &str = "shepherd";
/// Where the agent keeps sandbox namespaces and CNI results unless `--state-dir` says otherwise.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/shepherd-agent";
/// Where CNI plugins are looked for: the usual place, then Debian's.
pub const DEFAULT_PLUGIN_DIRS: [&str; 2] = ["/opt/cni/bin", "/usr/lib/cni"];
/// The plugins the chains run.
pub const PLUGINS: [&str; 4] = ["loopback", "bridge", "host-local", "portmap"];
/// How to get them on Debian and Ubuntu.
pub const INSTALL: &str = "apt-get install containernetworking-plugins";
/// `statfs` magic of a namespace file (`nsfs`): a bind mount that still holds its namespace.
const NSFS_MAGIC: i64 = 0x6e73_6673;
/// How a held address record is waited for ([`CniNetwork::take_record`]): 50 ms, doubling,
/// over six tries (about 1.5 s).
const RECORD_BACKOFF: shared::backoff::Backoff = shared::backoff::Backoff::new(Duration::from_millis(50), Duration::from_millis(800));
const RECORD_TRIES: u32 = 6;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "--pod-network cni needs the CNI plugins {missing}, which are not in {dirs}: install them ({INSTALL}) or use --pod-network docker"
    )]
    PluginsMissing { missing: String, dirs: String },
    #[error("--pod-network cni needs root: the CNI plugins make interfaces and firewall rules (or use --pod-network docker)")]
    NotRoot,
    #[error("--pod-subnet {0:?} is not an IPv4 subnet such as {DEFAULT_SUBNET}")]
    BadSubnet(String),
    #[error("the pod subnet {subnet} overlaps {other} ({what}): choose another with --pod-subnet")]
    Overlap { subnet: Subnet, other: Subnet, what: String },
    #[error("cannot read the engine's networks to check the pod subnet: {0}")]
    Runtime(#[from] crate::runtime::Error),
    #[error("sandbox {container}: {source}")]
    Cni { container: String, source: cni::Error },
    #[error("cannot {action} {}: {source}", .path.display())]
    Io { action: &'static str, path: PathBuf, source: std::io::Error },
    #[error("sandbox {0}: the CNI result gives the container no address")]
    NoAddress(String),
    #[error("the pod network's node-wide rules: {0}")]
    Rules(#[from] iptables::Error),
    #[error("`ip {command}` failed: {message}")]
    Ip { command: String, message: String },
    #[error("another agent holds the address of {0} (is an agent of this node already running?)")]
    AddressHeld(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `--pod-network`: which one, or CNI when its plugins are installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Auto,
    Cni,
    Docker,
}

/// The pod network settings of an agent.
#[derive(Debug, Clone)]
pub struct PodNetworkConfig {
    pub choice: Choice,
    /// `--pod-subnet`, such as 10.77.0.0/16.
    pub subnet: String,
    /// `--state-dir`: sandbox namespaces and CNI results live under it.
    pub state_dir: PathBuf,
    pub plugin_dirs: Vec<PathBuf>,
}

impl Default for PodNetworkConfig {
    fn default() -> Self {
        PodNetworkConfig {
            choice: Choice::Auto,
            subnet: DEFAULT_SUBNET.to_string(),
            state_dir: PathBuf::from(DEFAULT_STATE_DIR),
            plugin_dirs: DEFAULT_PLUGIN_DIRS.iter().map(PathBuf::from).collect(),
        }
    }
}

/// The routes of `/proc/net/route` other than default routes and those through `skip`: the
/// interface and the subnet each reaches.
pub fn routes(proc_net_route: &str, skip: &str) -> Vec<(String, Subnet)> {
    let hex = |field: &str| u32::from_str_radix(field, 16).ok().map(u32::from_be);
    proc_net_route
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (interface, destination, mask) = (fields.first()?, hex(fields.get(1)?)?, hex(fields.get(7)?)?);
            let subnet = Subnet::masked(destination, mask);
            (subnet.prefix() > 0 && *interface != skip).then(|| (interface.to_string(), subnet))
        })
        .collect()
}

/// How a node's pod sandboxes get their network.
pub enum PodNetwork {
    /// The engine's network of this name.
    Docker(String),
    Cni(Arc<CniNetwork>),
}

impl PodNetwork {
    /// `cni` or `docker`: the node's `node_info.pod_network`.
    pub fn kind(&self) -> &'static str {
        match self {
            PodNetwork::Docker(_) => "docker",
            PodNetwork::Cni(_) => "cni",
        }
    }

    /// Settles `--pod-network` for a runtime with sandboxes. Auto takes CNI when its plugins
    /// are installed and the agent is root, else says how to get it and takes Docker's bridge.
    pub async fn choose(config: &PodNetworkConfig, runtime: &dyn ContainerRuntime) -> Result<PodNetwork> {
        let docker = PodNetwork::Docker(runtime.network().to_string());
        let missing: Vec<&str> = PLUGINS.iter().copied().filter(|p| PluginPath(config.plugin_dirs.clone()).find(p).is_err()).collect();
        let root = unsafe { libc::geteuid() } == 0;
        match config.choice {
            Choice::Docker => return Ok(docker),
            Choice::Auto if !missing.is_empty() => {
                tracing::warn!(
                    "pods use Docker's bridge network: the CNI plugins {} are not in {}; for CNI networking, as the kubelet does it \
                     (and faster pod starts), install them: {INSTALL}",
                    missing.join(", "),
                    dirs_text(&config.plugin_dirs)
                );
                return Ok(docker);
            }
            Choice::Auto if !root => {
                tracing::warn!("pods use Docker's bridge network: CNI networking needs the agent to run as root");
                return Ok(docker);
            }
            Choice::Cni if !missing.is_empty() => {
                return Err(Error::PluginsMissing { missing: missing.join(", "), dirs: dirs_text(&config.plugin_dirs) });
            }
            Choice::Cni if !root => return Err(Error::NotRoot),
            Choice::Auto | Choice::Cni => {}
        }
        let subnet = Subnet::parse(&config.subnet).ok_or_else(|| Error::BadSubnet(config.subnet.clone()))?;
        for other in runtime.network_subnets().await? {
            if let Some(other_subnet) = Subnet::parse(&other.1).filter(|s| s.overlaps(&subnet)) {
                return Err(Error::Overlap { subnet, other: other_subnet, what: format!("Docker network {}", other.0) });
            }
        }
        let table = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
        if let Some((interface, other)) = routes(&table, BRIDGE).into_iter().find(|(_, s)| s.overlaps(&subnet)) {
            return Err(Error::Overlap { subnet, other, what: format!("a route through {interface}") });
        }
        let network = CniNetwork::new(subnet, &config.state_dir, &config.plugin_dirs);
        network.ensure_rules()?;
        tracing::info!(%subnet, bridge = BRIDGE, state = %config.state_dir.display(), "pods use CNI networking");
        Ok(PodNetwork::Cni(Arc::new(network)))
    }
}

fn dirs_text(dirs: &[PathBuf]) -> String {
    dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(":")
}

/// What the agent keeps of one sandbox's network: written before ADD (so that a crash in
/// between still leaves something to DEL) and again with ADD's result.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Record {
    runtime_config: Map<String, Value>,
    /// The plugins ADD ran on `eth0`, as configured: DEL runs the same ones. Empty in a record
    /// an agent wrote before the chain depended on host ports ([`CniNetwork::legacy_plugins`]).
    #[serde(default)]
    plugins: Vec<Value>,
    #[serde(default)]
    result: Option<Value>,
}

/// The CNI networking of a node's sandboxes. Its methods block (they run plugins): call them
/// off the async threads.
pub struct CniNetwork {
    path: PluginPath,
    loopback: NetworkList,
    bridge: Value,
    portmap: Value,
    rules: Vec<iptables::Rule>,
    state_dir: PathBuf,
}

impl CniNetwork {
    pub fn new(subnet: Subnet, state_dir: &Path, plugin_dirs: &[PathBuf]) -> CniNetwork {
        // No `ipMasq`: one node-wide rule masquerades for every pod.
        let bridge = json!({
            "type": "bridge",
            "bridge": BRIDGE,
            "isGateway": true,
            "hairpinMode": true,
            "ipam": {"type": "host-local", "ranges": [[{"subnet": subnet.to_string()}]], "routes": [{"dst": "0.0.0.0/0"}]},
        });
        CniNetwork {
            path: PluginPath(plugin_dirs.to_vec()),
            loopback: NetworkList { name: format!("{NETWORK_NAME}-loopback"), plugins: vec![json!({"type": "loopback"})] },
            bridge,
            portmap: json!({"type": "portmap", "capabilities": {"portMappings": true}}),
            rules: iptables::rules(&subnet, BRIDGE),
            state_dir: state_dir.to_path_buf(),
        }
    }

    /// Adds the node-wide rules that are missing (at start, and again in each orphan sweep,
    /// should something have removed them); returns how many were.
    pub fn ensure_rules(&self) -> Result<usize> {
        Ok(iptables::ensure(&self.rules)?)
    }

    /// The `eth0` chain of a sandbox: `bridge`, then `portmap` when it has host ports (a
    /// portmap DEL runs a dozen iptables commands even for a sandbox with none).
    fn plugins(&self, runtime_config: &Map<String, Value>) -> Vec<Value> {
        let mut plugins = vec![self.bridge.clone()];
        if !runtime_config.is_empty() {
            plugins.push(self.portmap.clone());
        }
        plugins
    }

    /// The chain of agents before the node-wide rules, for a DEL of what they set up:
    /// masquerading per pod, `portmap` always and `firewall`.
    fn legacy_plugins(&self) -> Vec<Value> {
        let mut bridge = self.bridge.clone();
        bridge["ipMasq"] = Value::Bool(true);
        vec![bridge, self.portmap.clone(), json!({"type": "firewall"})]
    }

    fn pods(&self, plugins: Vec<Value>) -> NetworkList {
        NetworkList { name: NETWORK_NAME.to_string(), plugins }
    }

    fn netns_path(&self, id: &str) -> PathBuf {
        self.state_dir.join("netns").join(id)
    }

    fn record_path(&self, id: &str) -> PathBuf {
        self.state_dir.join("sandboxes").join(format!("{id}.json"))
    }

    fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> Error + 'a {
        move |source| Error::Io { action, path: path.to_path_buf(), source }
    }

    fn write_record(&self, id: &str, record: &Record) -> Result<()> {
        let path = self.record_path(id);
        let dir = path.parent().expect("a record has a directory");
        std::fs::create_dir_all(dir).map_err(Self::io("create", dir))?;
        let partial = path.with_extension("json.partial");
        std::fs::write(&partial, serde_json::to_vec(record).expect("a record serializes")).map_err(Self::io("write", &partial))?;
        std::fs::rename(&partial, &path).map_err(Self::io("write", &path))
    }

    fn read_record(&self, id: &str) -> Option<Record> {
        let text = std::fs::read(self.record_path(id)).ok()?;
        // A record that cannot be read still means a network to take down.
        Some(serde_json::from_slice(&text).unwrap_or_default())
    }

    /// Networks the sandbox `id` whose process is `pid`, publishing `ports`; returns its address.
    pub fn attach(&self, id: &str, pid: i64, ports: &[PortMapping]) -> Result<String> {
        let runtime_config = runtime_config(ports);
        let mut record = Record { plugins: self.plugins(&runtime_config), runtime_config, result: None };
        self.write_record(id, &record)?;
        let attached = self.keep_namespace(id, pid).and_then(|netns| {
            let cni_error = |source| Error::Cni { container: id.to_string(), source };
            let pods = self.pods(record.plugins.clone());
            let at = Attachment { container_id: id, netns: &netns, ifname: "eth0" };
            // `lo` and `eth0` do not depend on each other.
            let (lo, eth0) = std::thread::scope(|scope| {
                let lo = scope
                    .spawn(|| self.loopback.add(&self.path, &Attachment { container_id: id, netns: &netns, ifname: "lo" }, &Map::new()));
                let eth0 = pods.add(&self.path, &at, &record.runtime_config);
                (lo.join().expect("the loopback ADD does not panic"), eth0)
            });
            lo.map_err(cni_error)?;
            let result = eth0.map_err(cni_error)?;
            let address = cni::container_address(&result).ok_or_else(|| Error::NoAddress(id.to_string()))?;
            record.result = Some(result);
            self.write_record(id, &record)?;
            Ok(address)
        });
        if attached.is_err()
            && let Err(e) = self.detach(id)
        {
            tracing::warn!(sandbox = id, error = %e, "cannot take down a half-made pod network");
        }
        attached
    }

    /// Bind-mounts `/proc/<pid>/ns/net` on the sandbox's file under the state directory.
    fn keep_namespace(&self, id: &str, pid: i64) -> Result<PathBuf> {
        let target = self.netns_path(id);
        let dir = target.parent().expect("a namespace file has a directory");
        std::fs::create_dir_all(dir).map_err(Self::io("create", dir))?;
        std::fs::File::create(&target).map_err(Self::io("create", &target))?;
        let source = PathBuf::from(format!("/proc/{pid}/ns/net"));
        let c_path = |path: &Path| std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("a path has no NUL");
        let (source_c, target_c) = (c_path(&source), c_path(&target));
        // SAFETY: both are valid NUL-terminated paths; a bind mount takes no file system type or data.
        let mounted = unsafe { libc::mount(source_c.as_ptr(), target_c.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()) };
        if mounted != 0 {
            return Err(Error::Io {
                action: "bind-mount the namespace of the sandbox on",
                path: target,
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(target)
    }

    /// Takes the sandbox's network down (CNI DEL, with ADD's result), lets its namespace go
    /// and forgets it. Safe to repeat; the namespace's process may be long gone.
    pub fn detach(&self, id: &str) -> Result<()> {
        let netns = self.netns_path(id);
        let Some(record) = self.read_record(id) else {
            release_namespace(&netns);
            return Ok(());
        };
        // After a host reboot the file is no longer a namespace: plugins then release only
        // what lives outside it.
        let live = is_namespace(&netns);
        let path = if live { netns.as_path() } else { Path::new("") };
        let cni_error = |source| Error::Cni { container: id.to_string(), source };
        let plugins = if record.plugins.is_empty() { self.legacy_plugins() } else { record.plugins };
        let pods = self.pods(plugins);
        let (eth0, lo) = std::thread::scope(|scope| {
            let lo = scope
                .spawn(|| self.loopback.del(&self.path, &Attachment { container_id: id, netns: path, ifname: "lo" }, None, &Map::new()));
            let at = Attachment { container_id: id, netns: path, ifname: "eth0" };
            let eth0 = pods.del(&self.path, &at, record.result.as_ref(), &record.runtime_config);
            (eth0, lo.join().expect("the loopback DEL does not panic"))
        });
        eth0.map_err(cni_error)?;
        lo.map_err(cni_error)?;
        release_namespace(&netns);
        let record_path = self.record_path(id);
        match std::fs::remove_file(&record_path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Io { action: "remove", path: record_path, source: e }),
            _ => Ok(()),
        }
    }

    /// The address ADD gave the sandbox `id`; `None` when it has no network of this kind.
    pub fn address(&self, id: &str) -> Option<String> {
        self.read_record(id)?.result.as_ref().and_then(cni::container_address)
    }

    /// The host ports portmap publishes for the sandbox `id`, as its record says.
    pub fn published(&self, id: &str) -> Vec<PortMapping> {
        self.read_record(id).map_or_else(Vec::new, |record| port_mappings(&record.runtime_config))
    }

    /// The sandboxes that have (or had) a network here.
    pub fn attached(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.state_dir.join("sandboxes")) else { return Vec::new() };
        entries.filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".json").map(String::from)).collect()
    }

    /// An address of `owner`'s own from the pod subnet, on the host's loopback interface:
    /// pods reach it across the bridge (the host answers ARP for any of its addresses), and
    /// each agent on a host has its own. host-local leases it under the id `shepherd-<owner>`,
    /// and `<state-dir>/addresses/<owner>` keeps it across restarts, so that running pods
    /// keep reaching it. The node's DNS listens there. The record stays locked while the
    /// returned [`OwnAddress`] lives, so that [`CniNetwork::sweep_own_addresses`] knows it
    /// is in use.
    pub fn own_address(&self, owner: &str) -> Result<OwnAddress> {
        let record = self.address_record(owner);
        let dir = record.parent().expect("a record has a directory");
        std::fs::create_dir_all(dir).map_err(Self::io("create", dir))?;
        let lock = Self::take_record(&record)?.ok_or_else(|| Error::AddressHeld(format!("shepherd-{owner}")))?;
        let address = match read_address(&record) {
            Some(address) => address,
            None => {
                // A lease left without its record (a crash between the two) is let go first.
                self.lease(cni::Operation::Del, owner)?;
                let result = self.lease(cni::Operation::Add, owner)?;
                let address = result["ips"][0]["address"].as_str().and_then(|a| a.split('/').next()?.parse::<IpAddr>().ok());
                let address = address.ok_or_else(|| Error::NoAddress(format!("shepherd-{owner}")))?;
                std::fs::write(&record, address.to_string()).map_err(Self::io("write", &record))?;
                address
            }
        };
        ip(&["address", "replace", &format!("{address}/32"), "dev", "lo"])?;
        Ok(OwnAddress { address, _lock: lock })
    }

    /// The lock on an address record, waited for a moment: the agent before this one may
    /// have let it go just now while a process another thread was starting still shared the
    /// record's open file (until that process runs its program). One that stays held is
    /// another running agent's.
    fn take_record(record: &Path) -> Result<Option<iptables::Lock>> {
        let mut failures = 0;
        loop {
            match iptables::Lock::try_take(record)? {
                None if failures + 1 < RECORD_TRIES => {
                    failures += 1;
                    std::thread::sleep(RECORD_BACKOFF.delay(failures));
                }
                taken => return Ok(taken),
            }
        }
    }

    fn address_record(&self, owner: &str) -> PathBuf {
        self.state_dir.join("addresses").join(owner)
    }

    /// Takes `owner`'s own address off the loopback interface, keeping its lease and record
    /// for its next [`CniNetwork::own_address`] (running pods were told it).
    pub fn set_aside_own_address(&self, owner: &str) {
        if let Some(address) = read_address(&self.address_record(owner)) {
            // Already gone is as good.
            let _ = ip(&["address", "del", &format!("{address}/32"), "dev", "lo"]);
        }
    }

    /// Lets `owner`'s own address go: off the loopback interface, its lease and its record.
    pub fn release_own_address(&self, owner: &str) -> Result<()> {
        self.set_aside_own_address(owner);
        self.lease(cni::Operation::Del, owner)?;
        let record = self.address_record(owner);
        match std::fs::remove_file(&record) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Io { action: "remove", path: record, source: e }),
            _ => Ok(()),
        }
    }

    /// Sets aside the own addresses of this state directory that no running agent holds (a
    /// crashed one left them on the loopback interface); returns their owners.
    pub fn sweep_own_addresses(&self) -> Result<Vec<String>> {
        let Ok(entries) = std::fs::read_dir(self.state_dir.join("addresses")) else { return Ok(Vec::new()) };
        let mut swept = Vec::new();
        for owner in entries.filter_map(|e| e.ok()?.file_name().into_string().ok()) {
            if let Some(_unused) = iptables::Lock::try_take(&self.address_record(&owner))? {
                self.set_aside_own_address(&owner);
                swept.push(owner);
            }
        }
        Ok(swept)
    }

    /// Runs host-local alone on the pod subnet for `owner`.
    fn lease(&self, operation: cni::Operation, owner: &str) -> Result<Value> {
        let mut config = json!({"cniVersion": cni::VERSION, "name": NETWORK_NAME, "ipam": self.bridge["ipam"].clone()});
        config["type"] = config["ipam"]["type"].clone();
        let id = format!("shepherd-{owner}");
        let at = Attachment { container_id: &id, netns: Path::new("/"), ifname: "own" };
        cni::invoke(&self.path, operation, &at, &config).map_err(|source| Error::Cni { container: id.clone(), source })
    }
}

/// portmap's `portMappings`: host ports only; an unspecified host address means every one.
fn runtime_config(ports: &[PortMapping]) -> Map<String, Value> {
    let mappings: Vec<Value> = ports
        .iter()
        .filter(|p| p.host_port > 0)
        .map(|p| {
            let mut mapping = json!({"hostPort": p.host_port, "containerPort": p.container_port, "protocol": p.protocol});
            if !p.host_ip.is_empty() && p.host_ip != "0.0.0.0" {
                mapping["hostIP"] = Value::from(p.host_ip.clone());
            }
            mapping
        })
        .collect();
    if mappings.is_empty() { Map::new() } else { Map::from_iter([("portMappings".to_string(), Value::Array(mappings))]) }
}

/// What [`runtime_config`] made of host ports; no `hostIP` is every address.
fn port_mappings(runtime_config: &Map<String, Value>) -> Vec<PortMapping> {
    let Some(Value::Array(mappings)) = runtime_config.get("portMappings") else { return Vec::new() };
    let number = |mapping: &Value, key: &str| mapping[key].as_i64().and_then(|n| i32::try_from(n).ok()).unwrap_or(0);
    let text = |mapping: &Value, key: &str| mapping[key].as_str().unwrap_or_default().to_string();
    mappings
        .iter()
        .map(|m| PortMapping {
            container_port: number(m, "containerPort"),
            host_port: number(m, "hostPort"),
            host_ip: text(m, "hostIP"),
            protocol: text(m, "protocol"),
        })
        .collect()
}

/// Runs `ip` (iproute2) with `args`.
/// The address a record of [`CniNetwork::own_address`] holds.
fn read_address(record: &Path) -> Option<IpAddr> {
    std::fs::read_to_string(record).ok()?.trim().parse().ok()
}

/// An address of an agent's own, held (its record locked) while this lives.
#[derive(Debug)]
pub struct OwnAddress {
    pub address: IpAddr,
    _lock: iptables::Lock,
}

fn ip(args: &[&str]) -> Result<()> {
    let command = args.join(" ");
    let output =
        std::process::Command::new("ip").args(args).output().map_err(|e| Error::Ip { command: command.clone(), message: e.to_string() })?;
    match output.status.success() {
        true => Ok(()),
        false => Err(Error::Ip { command, message: String::from_utf8_lossy(&output.stderr).trim().to_string() }),
    }
}

fn is_namespace(path: &Path) -> bool {
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else { return false };
    // SAFETY: statfs only writes into the zeroed struct it is given.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    (unsafe { libc::statfs(c_path.as_ptr(), &mut stat) } == 0) && stat.f_type as i64 == NSFS_MAGIC
}

/// Unmounts a kept namespace (it goes once nothing else holds it) and removes its file.
fn release_namespace(path: &Path) {
    if let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) {
        // SAFETY: a valid path; not mounted (EINVAL) or missing (ENOENT) are both fine.
        while is_namespace(path) && unsafe { libc::umount2(c_path.as_ptr(), libc::MNT_DETACH) } == 0 {}
    }
    let _ = std::fs::remove_file(path);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_come_from_proc_without_the_default_route_or_the_pod_bridge() {
        let table = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                     eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
                     docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n\
                     shepherd0\t00004D0A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n";
        assert_eq!(routes(table, BRIDGE), vec![("docker0".to_string(), Subnet::parse("172.17.0.0/16").unwrap())]);
    }

    #[test]
    fn host_ports_become_port_mappings_on_their_address() {
        let port =
            |host_port, host_ip: &str| PortMapping { container_port: 80, host_port, host_ip: host_ip.into(), protocol: "tcp".into() };
        let config = runtime_config(&[port(8080, "127.0.0.1"), port(0, "127.0.0.1"), port(9090, "0.0.0.0")]);
        assert_eq!(
            Value::Object(config.clone()),
            json!({"portMappings": [
                {"hostPort": 8080, "containerPort": 80, "protocol": "tcp", "hostIP": "127.0.0.1"},
                {"hostPort": 9090, "containerPort": 80, "protocol": "tcp"},
            ]})
        );
        assert!(runtime_config(&[port(0, "")]).is_empty(), "no host port, nothing for portmap");
        let read_back = port_mappings(&config);
        assert_eq!(read_back, [port(8080, "127.0.0.1"), port(9090, "")], "what portmap publishes, read back from a record");
        assert!(port_mappings(&Map::new()).is_empty());
    }

    #[test]
    fn a_sandbox_without_a_record_detaches_as_a_no_op_and_records_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        let network = CniNetwork::new(Subnet::parse(DEFAULT_SUBNET).unwrap(), dir.path(), &[dir.path().join("no-plugins")]);
        network.detach("gone").unwrap();
        network.write_record("abc", &Record { result: Some(json!({"ips": [{"address": "10.77.0.4/16"}]})), ..Default::default() }).unwrap();
        assert_eq!(network.attached(), vec!["abc".to_string()]);
        assert_eq!(network.address("abc").as_deref(), Some("10.77.0.4"));
        assert_eq!(network.address("gone"), None);
        // No plugins to run DEL: the record stays, for the next sweep.
        assert!(network.detach("abc").is_err());
        assert_eq!(network.attached(), vec!["abc".to_string()]);
    }

    /// Fake plugins in a directory: each logs `TYPE COMMAND IFNAME ipMasq` to `calls`.
    fn fake_plugins(dir: &Path) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let plugins = dir.join("plugins");
        std::fs::create_dir_all(&plugins).unwrap();
        for name in ["loopback", "bridge", "portmap", "firewall"] {
            let script = format!(
                "#!/bin/sh\nread -r input\nmasq=$(echo \"$input\" | grep -o '\"ipMasq\":true')\necho \"{name} $CNI_COMMAND $CNI_IFNAME $masq\" >> {}\n",
                dir.join("calls").display()
            );
            std::fs::write(plugins.join(name), script).unwrap();
            std::fs::set_permissions(plugins.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        plugins
    }

    fn calls(dir: &Path) -> Vec<String> {
        let mut calls: Vec<String> = std::fs::read_to_string(dir.join("calls")).unwrap().lines().map(|l| l.trim().to_string()).collect();
        // `lo` and `eth0` run side by side: only the order within `eth0` is fixed.
        calls.sort_by_key(|call| call.contains(" lo"));
        calls
    }

    #[test]
    fn portmap_runs_only_for_host_ports_and_masquerading_is_not_per_pod() {
        let dir = tempfile::tempdir().unwrap();
        let network = CniNetwork::new(Subnet::parse(DEFAULT_SUBNET).unwrap(), dir.path(), &[dir.path().to_path_buf()]);
        let types = |plugins: Vec<Value>| plugins.iter().map(|p| p["type"].as_str().unwrap().to_string()).collect::<Vec<_>>();
        let port = PortMapping { container_port: 80, host_port: 8080, host_ip: "127.0.0.1".into(), protocol: "tcp".into() };
        assert_eq!(types(network.plugins(&runtime_config(&[]))), ["bridge"]);
        assert_eq!(types(network.plugins(&runtime_config(&[port]))), ["bridge", "portmap"]);
        assert_eq!(network.bridge.get("ipMasq"), None, "one node-wide rule masquerades");
        assert_eq!(network.bridge["ipam"]["ranges"][0][0]["subnet"], DEFAULT_SUBNET);
    }

    #[test]
    fn del_runs_the_chain_add_recorded_or_for_an_older_record_the_chain_of_before() {
        let dir = tempfile::tempdir().unwrap();
        let network = CniNetwork::new(Subnet::parse(DEFAULT_SUBNET).unwrap(), dir.path(), &[fake_plugins(dir.path())]);
        let record = Record { plugins: network.plugins(&Map::new()), ..Default::default() };
        network.write_record("new", &record).unwrap();
        network.detach("new").unwrap();
        assert_eq!(calls(dir.path()), ["bridge DEL eth0", "loopback DEL lo"]);
        assert!(network.attached().is_empty(), "the record goes with the network");

        std::fs::remove_file(dir.path().join("calls")).unwrap();
        let older = r#"{"runtime_config":{},"result":{"ips":[{"address":"10.77.0.4/16"}]}}"#;
        std::fs::write(network.record_path("old"), older).unwrap();
        network.detach("old").unwrap();
        assert_eq!(calls(dir.path()), ["firewall DEL eth0", "portmap DEL eth0", "bridge DEL eth0 \"ipMasq\":true", "loopback DEL lo"]);
    }
}
