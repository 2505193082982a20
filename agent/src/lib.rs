//! The Shepherd node agent, a small kubelet: it registers a node, keeps it alive with
//! lease renewals (and a rare status heartbeat), and runs the pods bound to it as containers.
//!
//! Layout:
//! - [`runtime`]: the `ContainerRuntime` trait, with Docker (bollard) and simulated runtimes;
//! - [`pod`]: one pod: its worker's level-triggered reconcile (sandbox, image, create, start,
//!   restart), its container configs, the status it reports, and its termination;
//! - [`workers`]: the worker per pod, full syncs, and the sweep of orphaned containers;
//! - [`pod_feed`]: where a node's pods come from: its own watch with a periodic re-list, or a
//!   fleet's; [`runtime_events`]: container events that wake pods and shrink the pool;
//! - [`sandbox`]: pod sandboxes (the pod's network namespace, as Kubernetes' pause container)
//!   and the warm pool of started ones;
//! - [`network`]: the node's pod network: CNI (bridge, host-local, portmap for host ports) on
//!   the sandboxes' namespaces, or Docker's bridge; [`cni`]: the CNI protocol it speaks;
//!   [`iptables`]: the node-wide masquerade and FORWARD rules the CNI network needs;
//!   [`hostport`]: the host ports of CNI sandboxes, held open for each sandbox's life;
//!   [`subnet`]: IPv4 subnets, `shared`'s;
//! - [`services`]: the cluster's Services as the node watches them; [`dns`]: the node's cluster
//!   DNS (hickory-server) answering for them, and pods' resolv.conf naming it; [`proxy`]: the
//!   service proxy, kube-proxy's iptables mode, programming the nat rules of cluster IPs and
//!   NodePorts;
//! - [`retry`]: retrying until shutdown, with back-off;
//! - [`node`]: the node object (capacity from the host), registration, lease renewals and status heartbeats;
//! - [`fleet`]: N simulated nodes in one process on one API client, one pod watch and one
//!   agent API address;
//! - [`client`]: what the agent asks of the API server (`ApiClient`), done by `shepherd-client`;
//! - [`http`]: the agent's own HTTP API (logs, exec, attach, port-forward, stats, health);
//!   [`usage`]: what the node's pods use, measured for the stats path;
//!   [`remote_command`]: one exec or attach session over a WebSocket; [`port_forward`]: the
//!   port-forward protocol's server side, connecting inside the pod's network namespace;
//! - [`image`]: `bootstrap-image`, the `minimal` image made from the host's busybox;
//! - `fixtures` (unit tests only): the one fake API server, which records what the agent
//!   wrote, and a node context on the simulated runtime.
//!
//! Log set-up and signal handling are `shepherd-process`'s, shared with the server.
//!
//! [`run`] is the entry point the `shepherd-agent` binary and the `shepherd` server (to run
//! a local node) both call.

pub mod client;
pub mod cni;
pub mod dns;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod fleet;
pub mod hostport;
pub mod http;
pub mod image;
pub mod iptables;
pub mod network;
pub mod node;
pub mod pod;
pub mod pod_feed;
pub mod port_forward;
pub mod proxy;
pub mod remote_command;
pub mod retry;
pub mod runtime;
pub mod runtime_events;
pub mod sandbox;
pub mod services;
pub mod usage;
pub use shared::subnet;
pub mod workers;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use shared::backoff::Backoff;
use shared::model::{Labels, NodeInfo, NodeResources, Taint};
use shared::registration::NodeDescription;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::client::ApiClient;
use crate::pod::context::NodeContext;
use crate::runtime::{ContainerRuntime, DockerRuntime, SimulatedRuntime};
use crate::subnet::Subnet;

/// The default address of the agent's HTTP API, the kubelet's port.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:10250";
/// The environment variable that sets where the agent's HTTP API listens, for the agent's
/// `--listen` as for a server's local node.
pub const LISTEN_ENV: &str = "SHEPHERD_AGENT_LISTEN";

/// The address [`LISTEN_ENV`]'s value names; `None` when it is unset or empty (which counts as
/// unset, as an empty SHEPHERD_API does).
pub fn listen_from_variable(value: Option<&str>) -> std::result::Result<Option<SocketAddr>, String> {
    match value.map(str::trim) {
        None | Some("") => Ok(None),
        Some(text) => {
            text.parse().map(Some).map_err(|_| format!("{LISTEN_ENV} is not an address with a port (like {DEFAULT_LISTEN}): {text:?}"))
        }
    }
}
/// How restarts, image pulls and deletion confirmations back off by default: 1 s, doubling
/// to 60 s (the binaries' `--backoff-base` and `--backoff-max`).
pub const DEFAULT_BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
/// How long a call to the API server may take.
pub const API_TIMEOUT: Duration = Duration::from_secs(10);
/// How many started, unclaimed pod sandboxes `shepherd-agent` and `shepherd --local-node`
/// keep by default (BENCHMARKS.md, "Agent / real Docker", says why).
pub const DEFAULT_WARM_SANDBOXES: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Runtime(#[from] runtime::Error),
    #[error("cannot listen on {addr} for the agent API")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error(
        "refusing to serve the agent API on {0} without a token: anyone who can reach it could read every pod's logs. Pass --token, or listen on 127.0.0.1"
    )]
    OpenApi(SocketAddr),
    #[error("the agent API stopped: {0}")]
    Serve(std::io::Error),
    #[error(transparent)]
    Client(#[from] shepherd_client::Error),
    #[error("a fleet runs simulated nodes only: add --runtime simulated")]
    FleetNotSimulated,
    #[error(transparent)]
    PodNetwork(#[from] network::Error),
    #[error(transparent)]
    Dns(#[from] dns::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Which runtime runs the pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeChoice {
    Docker,
    /// No containers: pods reach Running after `start_delay`.
    Simulated {
        start_delay: Duration,
    },
}

/// Everything one node agent needs; [`AgentConfig::new`] fills in the defaults.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The API server's base URL, such as `http://127.0.0.1:9876`, or several of one cluster
    /// separated by commas (the client moves on from one it cannot reach).
    pub server: String,
    pub token: Option<String>,
    /// The PEM certificate authority an https server must be signed by; `None` trusts the
    /// system's.
    pub certificate_authority: Option<String>,
    pub node_name: String,
    pub labels: Labels,
    pub taints: Vec<Taint>,
    /// CPU in millicores, memory in bytes, and the pod limit.
    pub capacity: NodeResources,
    /// The node's address: pods' `host_ip`, where host ports are published by default.
    pub address: String,
    pub runtime: RuntimeChoice,
    /// Where the agent API (logs) listens; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Lease renewals and status heartbeats.
    pub heartbeats: node::Heartbeats,
    /// How often the pod list is read in full, whatever the watch said.
    pub resync_interval: Duration,
    /// Restart, image pull and deletion confirmation back-off.
    pub backoff: Backoff,
    /// How many started, unclaimed pod sandboxes to keep ready (runtimes with sandboxes).
    /// The pool outlives the agent, for the next one to adopt (or remove, under another cluster
    /// id), and the stop line says so: a
    /// program that embeds the agent and turns it on removes the node's containers when it is done.
    pub warm_sandboxes: usize,
    /// On exit, remove every container of this node: its pods', their sandboxes and the
    /// warm pool. Otherwise they keep running, for the next agent to adopt.
    pub remove_containers_on_exit: bool,
    /// How pod sandboxes get their network (runtimes with sandboxes): CNI or Docker's bridge.
    pub pod_network: network::PodNetworkConfig,
    /// The cluster registry's sign-in (Docker): its pulls send it, no other registry's do.
    pub registry_login: Option<shepherd_image::RegistryLogin>,
    /// The cluster domain and where other names go, for the node's DNS (CNI pod network).
    pub dns: dns::DnsConfig,
}

impl AgentConfig {
    /// Defaults: the host name as node name, capacity detected from the host, Docker,
    /// address 127.0.0.1, API on 127.0.0.1:10250, lease renewal 10 s, status heartbeat at
    /// least every 5 min, resync 10 s, no warm pool (the binaries' flag defaults to
    /// [`DEFAULT_WARM_SANDBOXES`]), CNI pod networking when its plugins are installed, and
    /// the cluster domain `cluster.local` with other names forwarded to the host's resolver.
    pub fn new(server: &str) -> Self {
        AgentConfig {
            server: server.to_string(),
            token: None,
            certificate_authority: None,
            node_name: node::hostname(),
            labels: Labels::new(),
            taints: Vec::new(),
            capacity: node::detect_capacity(),
            address: "127.0.0.1".to_string(),
            runtime: RuntimeChoice::Docker,
            listen: DEFAULT_LISTEN.parse().expect("the default listen address is valid"),
            heartbeats: node::Heartbeats::default(),
            resync_interval: Duration::from_secs(10),
            backoff: DEFAULT_BACKOFF,
            warm_sandboxes: 0,
            remove_containers_on_exit: false,
            pod_network: network::PodNetworkConfig::default(),
            registry_login: None,
            dns: dns::DnsConfig::default(),
        }
    }
}

/// Connects the runtime `config` chooses for its node.
pub async fn connect_runtime(config: &AgentConfig) -> Result<Arc<dyn ContainerRuntime>> {
    Ok(match config.runtime {
        RuntimeChoice::Docker => Arc::new(DockerRuntime::connect().await?.with_login(config.registry_login.clone())),
        RuntimeChoice::Simulated { start_delay } => {
            Arc::new(SimulatedRuntime::new(start_delay).with_pod_block(runtime::simulated::pod_block(&config.node_name)))
        }
    })
}

/// Refuses an agent API off loopback without a token (`shared::listen`): with a token it
/// serves only the requests the server signed with it.
fn check_listen(config: &AgentConfig) -> Result<()> {
    match shared::listen::may_listen(config.listen, config.token.is_some()) {
        true => Ok(()),
        false => Err(Error::OpenApi(config.listen)),
    }
}

/// Where the agent API listening on `local` answers: at `address` (the node's) when it
/// listens on every interface. An IPv6 address goes in brackets, as in any URL.
fn api_url(local: SocketAddr, address: &str) -> String {
    if !local.ip().is_unspecified() {
        return format!("http://{local}");
    }
    match address.parse::<std::net::Ipv6Addr>() {
        Ok(_) => format!("http://[{address}]:{}", local.port()),
        Err(_) => format!("http://{address}:{}", local.port()),
    }
}

/// Runs a node agent until `shutdown`: connects the runtime, listens for the agent API and
/// talks to the server over HTTP. Pods keep running after it returns.
pub async fn run(config: AgentConfig, shutdown: CancellationToken) -> Result<()> {
    check_listen(&config)?;
    let runtime = connect_runtime(&config).await?;
    let listener = TcpListener::bind(config.listen).await.map_err(|source| Error::Bind { addr: config.listen, source })?;
    let api = api_client(&config)?.named("agent").with_timeout(API_TIMEOUT);
    let api = Arc::new(api);
    run_node(config, runtime, api, listener, shutdown).await
}

/// The client of the server `config` names, with its token and certificate authority.
pub fn api_client(config: &AgentConfig) -> Result<shepherd_client::Client> {
    let client = shepherd_client::Client::new(&config.server, config.token.clone())?;
    Ok(match &config.certificate_authority {
        Some(pem) => client.with_certificate_authority(pem.as_bytes())?,
        None => client,
    })
}

/// Runs a node agent on a given runtime, API client and listener (tests): its own agent API
/// on `listener` and its own watch of its pods.
pub async fn run_node(
    config: AgentConfig,
    runtime: Arc<dyn ContainerRuntime>,
    api: Arc<dyn ApiClient>,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<()> {
    let local = listener.local_addr().map_err(|source| Error::Bind { addr: config.listen, source })?;
    let pod_network = match runtime.pod_sandboxes() {
        true => Some(network::PodNetwork::choose(&config.pod_network, runtime.as_ref()).await?),
        false => None,
    };
    let cni = match &pod_network {
        Some(network::PodNetwork::Cni(cni)) => Some(cni.clone()),
        _ => None,
    };
    let proxied_subnet = match &pod_network {
        Some(network::PodNetwork::Cni(_)) => Subnet::parse(&config.pod_network.subnet),
        _ => None,
    };
    let Some(cluster) = node::cluster_id(api.as_ref(), &shutdown).await else { return Ok(()) };
    // From here on the function ends only through `dns::leave`, so that the address never stays.
    let (cluster_dns, resolv_confs, dns_address) = match &cni {
        Some(cni) => {
            let (server, files, held) =
                dns::on_pod_network(cni.clone(), &config.dns, &config.node_name, &config.pod_network.state_dir).await?;
            (Some(server), Some(files), Some(held))
        }
        None => (None, None, None),
    };
    let endpoint = api_url(local, &config.address);
    let services = services::Services::watched();
    let node = NodeAgent::with_pod_network(&config, runtime, api.clone(), &cluster, endpoint, pod_network)
        .await
        .with_services(services.clone(), resolv_confs);
    let serve = http::run(listener, node.http_state(shutdown.clone()), config.token.as_deref());
    let feed = pod_feed::NodeWatch::new(api.clone(), &config.node_name, config.resync_interval);
    let answer = async {
        if let Some(server) = cluster_dns {
            server.run(services.clone(), shutdown.clone()).await;
        }
    };
    let proxy = async {
        if let Some(subnet) = proxied_subnet {
            let scope = proxy::rules::Scope::new(&cluster, subnet);
            proxy::run(services.clone(), scope, config.remove_containers_on_exit, shutdown.clone()).await;
        }
    };
    let (served, (), (), (), ()) =
        tokio::join!(serve, node.run(feed, shutdown.clone()), services.follow(api, shutdown.clone()), answer, proxy);
    // A clean stop never leaves the address on the loopback interface.
    if let (Some(cni), Some(held)) = (cni, dns_address) {
        let kept = !config.remove_containers_on_exit;
        let left = tokio::task::spawn_blocking(move || dns::leave(&cni, &config.node_name, kept, held)).await.expect("no panic");
        if let Err(e) = left {
            tracing::warn!(error = %e, "cannot let the address of the node's DNS go");
        }
    }
    served.map_err(Error::Serve)
}

/// One node once its cluster is known: what it registers, and its pod workers' context.
/// A real agent runs one with its own watch; a [`fleet`] runs many with a shared one.
pub struct NodeAgent {
    description: NodeDescription,
    ctx: Arc<NodeContext>,
    /// What registration, lease renewals and status reports go through.
    heartbeat_api: Arc<dyn ApiClient>,
    heartbeats: node::Heartbeats,
    remove_containers_on_exit: bool,
}

impl NodeAgent {
    /// The node of `config` on `runtime`, whose agent API answers at `agent_endpoint`; its
    /// sandboxes, if the runtime has them, are on the runtime's own network.
    pub async fn new(
        config: &AgentConfig,
        runtime: Arc<dyn ContainerRuntime>,
        api: Arc<dyn ApiClient>,
        cluster: &str,
        agent_endpoint: String,
    ) -> NodeAgent {
        let pod_network = runtime.pod_sandboxes().then(|| network::PodNetwork::Docker(runtime.network().to_string()));
        Self::with_pod_network(config, runtime, api, cluster, agent_endpoint, pod_network).await
    }

    /// [`NodeAgent::new`] with sandboxes on `pod_network` (chosen by
    /// [`network::PodNetwork::choose`]; `None` for a runtime without sandboxes).
    pub async fn with_pod_network(
        config: &AgentConfig,
        runtime: Arc<dyn ContainerRuntime>,
        api: Arc<dyn ApiClient>,
        cluster: &str,
        agent_endpoint: String,
        pod_network: Option<network::PodNetwork>,
    ) -> NodeAgent {
        let runtime_version = match runtime.version().await {
            Ok(version) => version,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the runtime version");
                String::new()
            }
        };
        let description = NodeDescription {
            name: config.node_name.clone(),
            labels: config.labels.clone(),
            taints: config.taints.clone(),
            capacity: config.capacity,
            address: config.address.clone(),
            agent_endpoint,
            info: NodeInfo {
                runtime: runtime.kind().to_string(),
                runtime_version,
                agent_version: env!("CARGO_PKG_VERSION").to_string(),
                os: std::env::consts::OS.to_string(),
                arch: std::env::consts::ARCH.to_string(),
                simulated: runtime.kind() == "simulated",
                pod_network: pod_network.as_ref().map_or("", network::PodNetwork::kind).to_string(),
            },
        };
        let sandboxes =
            pod_network.map(|network| sandbox::Sandboxes::new(runtime.clone(), &config.node_name, cluster, network, config.warm_sandboxes));
        let ctx = Arc::new(NodeContext {
            node_name: config.node_name.clone(),
            cluster: cluster.to_string(),
            address: config.address.clone(),
            network: runtime.network().to_string(),
            runtime,
            api: api.clone(),
            events: api.clone(),
            backoff: config.backoff,
            sandboxes,
            services: services::Services::none(),
            resolv_confs: None,
            volumes: pod::volumes::PodVolumes::new(&config.pod_network.state_dir, &config.node_name),
        });
        NodeAgent {
            description,
            ctx,
            heartbeat_api: api,
            heartbeats: config.heartbeats,
            remove_containers_on_exit: config.remove_containers_on_exit,
        }
    }

    /// Sends the node's registration, lease renewals and status through `api` rather than
    /// the client its pods use: a fleet's pod calls may queue by the thousand, and a lease
    /// that waits behind them expires.
    pub fn with_heartbeat_api(mut self, api: Arc<dyn ApiClient>) -> NodeAgent {
        self.heartbeat_api = api;
        self
    }

    /// Sends the pods' events through `api` rather than the client their status writes use.
    pub fn with_event_api(mut self, api: Arc<dyn ApiClient>) -> NodeAgent {
        Arc::get_mut(&mut self.ctx).expect("a new agent's context is not shared yet").events = api;
        self
    }

    /// Gives the node's containers the variables of `services` (after their first list) and,
    /// with `resolv_confs`, the node's DNS.
    pub fn with_services(mut self, services: Arc<services::Services>, resolv_confs: Option<dns::resolv::ResolvConfs>) -> NodeAgent {
        let ctx = Arc::get_mut(&mut self.ctx).expect("a new agent's context is not shared yet");
        ctx.services = services;
        ctx.resolv_confs = resolv_confs;
        self
    }

    /// What the agent API needs to answer for this node.
    pub fn http_state(&self, shutdown: CancellationToken) -> http::AppState {
        http::AppState {
            node_name: self.ctx.node_name.clone(),
            runtime: self.ctx.runtime.clone(),
            sandboxes: self.ctx.sandboxes.clone(),
            shutdown,
        }
    }

    /// Registers the node and keeps it alive, and runs its pods as `feed` says, until
    /// `shutdown`. Pods keep running after it returns, unless it removes them on exit.
    pub async fn run(self, feed: impl pod_feed::PodFeed, shutdown: CancellationToken) {
        let NodeAgent { description, ctx, heartbeat_api, heartbeats, remove_containers_on_exit } = self;
        let (runtime, cluster) = (ctx.runtime.clone(), ctx.cluster.clone());
        tracing::info!(node = %description.name, runtime = ctx.runtime.kind(), endpoint = %description.agent_endpoint, "agent starting");
        let sandboxes = ctx.sandboxes.clone();
        let sandboxes_left = sandboxes.clone();
        let ctx_services = ctx.services.clone();
        let volumes = ctx.volumes.clone();
        let manager = workers::PodManager::new(ctx, shutdown.clone());
        let lifecycle = async {
            if node::register(heartbeat_api.as_ref(), &description, &shutdown).await {
                node::lease_loop(heartbeat_api.as_ref(), &description, &|now| description.heartbeat(now), heartbeats, &shutdown).await;
            }
        };
        let pool = async {
            if let Some(sandboxes) = sandboxes {
                sandboxes.run(shutdown.clone()).await;
            }
        };
        // As the kubelet, no container starts before the Services were read once: it would
        // miss their variables.
        let (services, pod_manager) = (ctx_services, manager.clone());
        let pods = async {
            if services.synced(&shutdown).await.is_some() {
                pod_feed::follow_pods(pod_manager, feed, shutdown.clone()).await;
            }
        };
        tokio::join!(lifecycle, pods, runtime_events::follow_runtime_events(manager, shutdown.clone()), pool,);
        if !remove_containers_on_exit {
            let warm = sandboxes_left.as_ref().map_or(0, |sandboxes| sandboxes.available());
            tracing::info!(node = %description.name, "{}", kept_running(warm));
            return;
        }
        let removed = remove_containers(runtime.as_ref(), &description.name, &cluster).await;
        if let Some(sandboxes) = &sandboxes_left {
            sandboxes.reclaim(&std::collections::HashSet::new()).await;
        }
        // What the agent mounted for the pods (tmpfs, subPath binds) goes with their containers.
        for uid in volumes.pods_with_volumes() {
            if let Err(e) = volumes.tear_down(&uid) {
                tracing::error!(node = %description.name, pod_uid = %uid, "cannot remove the volumes of a pod on exit: {e}");
            }
        }
        match removed {
            Ok(removed) => {
                tracing::info!(node = %description.name, "agent stopped; removed its {removed} container(s): pods, sandboxes and warm pool")
            }
            Err(e) => tracing::error!(node = %description.name, "agent stopped, but removing its containers failed: {e}"),
        }
    }
}

/// The stop line of an agent that leaves its containers: the pods keep running on purpose,
/// and a warm pool left running says who takes it over, and how not to leave it.
fn kept_running(warm: usize) -> String {
    match warm {
        0 => "agent stopped; the containers of its pods, if any, keep running".to_string(),
        n => format!(
            "agent stopped; the containers of its pods, if any, and its {n} warm sandbox(es) keep running; the next start of this node adopts \
             or removes them (removes them if it joins another cluster id; --remove-containers-on-exit removes them on exit)"
        ),
    }
}

/// Removes every container of `node` in `cluster`, whatever made it; returns how many.
async fn remove_containers(runtime: &dyn ContainerRuntime, node: &str, cluster: &str) -> Result<usize> {
    let containers = runtime.list(&[(runtime::LABEL_NODE, node), (runtime::LABEL_CLUSTER, cluster)]).await?;
    for container in &containers {
        runtime.remove(&container.id).await?;
    }
    Ok(containers.len())
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::fixtures::RecordingApi;
    use crate::pod_feed::PodChange;

    #[test]
    fn the_agent_api_leaves_loopback_only_with_a_token() {
        let mut config = AgentConfig::new("http://127.0.0.1:9876");
        config.listen = "0.0.0.0:10250".parse().unwrap();
        let refused = check_listen(&config).unwrap_err().to_string();
        assert!(refused.starts_with("refusing to serve the agent API on 0.0.0.0:10250 without a token"), "{refused}");
        config.token = Some("node-token-1".into());
        check_listen(&config).expect("with a token");
    }

    #[test]
    fn an_agent_api_url_holds_an_ipv6_address_in_brackets() {
        assert_eq!(api_url("127.0.0.1:10250".parse().unwrap(), "192.0.2.7"), "http://127.0.0.1:10250");
        assert_eq!(api_url("[::1]:10250".parse().unwrap(), "::1"), "http://[::1]:10250");
        assert_eq!(api_url("0.0.0.0:10250".parse().unwrap(), "192.0.2.7"), "http://192.0.2.7:10250");
        assert_eq!(api_url("[::]:10250".parse().unwrap(), "2001:db8::7"), "http://[2001:db8::7]:10250");
        assert_eq!(api_url("0.0.0.0:10250".parse().unwrap(), "node-1.lan"), "http://node-1.lan:10250");
    }

    /// Log lines written while it lives, on this thread (a current-thread test runtime's).
    #[derive(Clone, Default)]
    struct Logs(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Logs {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_clean_stop_that_keeps_the_warm_pool_says_the_next_start_adopts_or_removes_it() {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || writer.clone()).finish();
        let _logging = tracing::subscriber::set_default(subscriber);
        let runtime = Arc::new(SimulatedRuntime::new(Duration::ZERO));
        let mut config = AgentConfig::new("http://unused");
        config.node_name = "n1".into();
        config.warm_sandboxes = 2;
        let pod_network = Some(network::PodNetwork::Docker(String::new()));
        let node =
            NodeAgent::with_pod_network(&config, runtime.clone(), Arc::new(RecordingApi::default()), "c1", "http://n1".into(), pod_network)
                .await;
        let pool = node.ctx.sandboxes.clone().expect("a pool");
        let (_feed, pods) = tokio::sync::mpsc::unbounded_channel::<PodChange>();
        let shutdown = CancellationToken::new();
        let agent = tokio::spawn(node.run(pods, shutdown.clone()));
        // The paused clock: the pool's quiet waits, and these looks, take no real time.
        shepherd_testing::poll(Duration::from_secs(10), "a pool of 2 warm sandboxes", || {
            let available = pool.available();
            async move { (available >= 2).then_some(()) }
        })
        .await;
        shutdown.cancel();
        agent.await.unwrap();
        assert_eq!(runtime.list(&pool.selector()).await.unwrap().len(), 2, "the pool is left for the next start");
        let logged = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
        let stopped = logged.lines().find(|line| line.contains("agent stopped")).unwrap_or_else(|| panic!("no stop line in {logged}"));
        assert!(stopped.contains("its 2 warm sandbox(es) keep running; the next start of this node adopts or removes them"), "{stopped}");
        assert!(stopped.contains("--remove-containers-on-exit"), "{stopped}");
    }
}
