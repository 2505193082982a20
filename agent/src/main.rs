//! `shepherd-agent`: runs a Shepherd node (or N simulated ones), or bootstraps the `minimal`
//! image. Flags are parsed here and turned into `agent::AgentConfig`; the work is in the library.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use agent::{AgentConfig, RuntimeChoice};
use anyhow::{Context, bail};
use clap::{Parser, Subcommand, ValueEnum};
use shared::api::{API_ENV, CA_ENV, DEFAULT_ADDR, TOKEN_ENV};
use shared::backoff::Backoff;
use shared::image::REGISTRY_ENV;
use shared::quantity::{parse_cpu, parse_memory};
use tokio_util::sync::CancellationToken;

#[derive(Parser, Debug)]
#[command(name = "shepherd-agent", version, about = "The Shepherd node agent: runs the pods bound to this node.")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    /// The API server's URL, http:// or https:// [default: http://127.0.0.1:9876]; several
    /// servers of one cluster (on one etcd) separated by commas, tried in turn.
    #[arg(long, env = API_ENV)]
    server: Option<String>,
    /// The PEM file of the certificate authority an https server's certificate must be
    /// signed by (a server's --tls-self-signed makes tls/ca.crt in its data directory).
    #[arg(long, env = CA_ENV, value_name = "FILE")]
    certificate_authority: Option<PathBuf>,
    /// The node's name (default: the host name).
    #[arg(long)]
    node_name: Option<String>,
    /// Where pods run.
    #[arg(long, value_enum, default_value_t = RuntimeKind::Docker)]
    runtime: RuntimeKind,
    /// Run N simulated nodes in this process (like KWOK), named NAME-0 … NAME-(N-1) after
    /// --node-name. They share one API client, one pod watch and the agent API on --listen.
    #[arg(long, value_name = "N")]
    simulate_nodes: Option<usize>,
    /// With --simulate-nodes: how many calls the fleet has in flight to the server at once,
    /// and so how many connections it holds besides its pod watch.
    #[arg(long, value_name = "N", default_value_t = agent::fleet::DEFAULT_MAX_IN_FLIGHT, value_parser = clap::value_parser!(u16).range(1..))]
    max_in_flight: u16,
    /// How long a simulated container takes to start, e.g. 500ms or 2s.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    simulated_start_delay: Duration,
    /// A node label, key=value (repeat for more).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    labels: Vec<String>,
    /// A node taint, key=value:Effect (repeat for more).
    #[arg(long = "taint", value_name = "KEY=VALUE:EFFECT")]
    taints: Vec<String>,
    /// Bearer token for the API server.
    #[arg(long, env = TOKEN_ENV, hide_env_values = true)]
    token: Option<String>,
    /// CPU capacity (250m, 2, 0.5; default: the host's CPU count).
    #[arg(long)]
    cpu: Option<String>,
    /// Memory capacity (512Mi, 4Gi; default: the host's MemTotal).
    #[arg(long)]
    memory: Option<String>,
    /// Pod limit.
    #[arg(long)]
    max_pods: Option<i64>,
    /// The node's address: pods' host_ip and where host ports are published.
    #[arg(long, default_value = "127.0.0.1")]
    address: String,
    /// Where the agent API (logs) listens; 127.0.0.1:0 picks a free port. Off loopback it needs
    /// --token, and serves only what the server signed with it.
    /// Default: $SHEPHERD_AGENT_LISTEN, else 127.0.0.1:10250.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// First delay of the restart and image pull back-off, doubling up to --backoff-max.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    backoff_base: Duration,
    /// The longest back-off delay.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    backoff_max: Duration,
    /// How often the node's lease is renewed (its heartbeat); keep it well below the
    /// server's --node-monitor-grace (40s by default).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    lease_renew_interval: Duration,
    /// The longest between two reports of the node's status when it does not change.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    node_status_report_interval: Duration,
    /// Started, unclaimed pod sandboxes to keep ready (Docker): a pod that claims one skips
    /// the engine's network set-up when it starts. 0 turns the pool off.
    #[arg(long, value_name = "N", default_value_t = agent::DEFAULT_WARM_SANDBOXES)]
    warm_sandboxes: usize,
    /// On exit, remove this node's containers: its pods', their sandboxes and the warm pool
    /// (by default they keep running, for the next agent to adopt).
    #[arg(long)]
    remove_containers_on_exit: bool,
    /// How pods get their network (Docker): CNI plugins on each pod sandbox, as the kubelet
    /// does, or Docker's bridge network [default: cni when the CNI plugins are installed].
    #[arg(long, value_enum)]
    pod_network: Option<PodNetworkKind>,
    /// The node's pod subnet, where CNI gives pods their addresses; it must not overlap
    /// Docker's networks or the host's routes. Agents on one host share it.
    #[arg(long, default_value = agent::network::DEFAULT_SUBNET)]
    pod_subnet: String,
    /// Where the CNI plugins are (repeat for more) [default: /opt/cni/bin, /usr/lib/cni].
    #[arg(long = "cni-bin-dir", value_name = "DIR")]
    cni_bin_dirs: Vec<PathBuf>,
    /// Where the agent keeps pod sandboxes' network namespaces, CNI results and pods' volumes and hosts files.
    #[arg(long, default_value = agent::network::DEFAULT_STATE_DIR)]
    state_dir: PathBuf,
    /// The cluster's registry (`shepherd registry`), HOST:PORT. Pulls from it sign in as this
    /// node (--node-name) with --token; images from other registries are pulled without them.
    #[arg(long, env = REGISTRY_ENV, value_name = "HOST:PORT")]
    registry: Option<String>,
    /// The cluster's DNS domain: the node's DNS answers `<service>.<namespace>.svc.<domain>`
    /// for its pods (CNI pod network), and their resolv.conf searches it.
    #[arg(long, default_value = agent::dns::records::DEFAULT_DOMAIN)]
    cluster_domain: String,
    /// Where the node's DNS sends names outside the cluster domain: `host` (the nameservers
    /// of the host's /etc/resolv.conf), nameservers `IP[:PORT],…`, or `none` (answered REFUSED).
    #[arg(long, default_value = "host", value_parser = parse_forward)]
    dns_forward: agent::dns::Forward,
}

fn parse_forward(text: &str) -> Result<agent::dns::Forward, String> {
    agent::dns::Forward::parse(text).ok_or_else(|| format!("{text:?} is not host, none, or nameservers IP[:PORT] separated by commas"))
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Build a tiny local image from the host's static busybox, with no registry.
    BootstrapImage {
        /// The image name (only busybox-based images can be made).
        #[arg(default_value = agent::image::MINIMAL_IMAGE)]
        name: String,
        /// The static busybox binary to use.
        #[arg(long, default_value = agent::image::DEFAULT_BUSYBOX)]
        busybox: PathBuf,
        /// Build and import again even if the image exists.
        #[arg(long)]
        force: bool,
        /// Then tag it as REGISTRY/NAME:TAG and push it there (a `shepherd registry`).
        #[arg(long, value_name = "HOST:PORT")]
        push: Option<String>,
        /// The registry user --push signs in as, with --token as password (a node token's
        /// user is its node's name).
        #[arg(long, default_value = shared::image::ADMIN_USER)]
        registry_user: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PodNetworkKind {
    Cni,
    Docker,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum RuntimeKind {
    Docker,
    Simulated,
}

/// A duration flag, as `shared::parse` reads them: `500ms`, `2s`, `1m30s`, or seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    shared::parse::duration(text).map_err(|e| e.to_string())
}

/// The agent's configuration from its flags and `listen_variable`, the value of
/// [`agent::LISTEN_ENV`].
fn config(cli: &Cli, listen_variable: Option<&str>) -> anyhow::Result<AgentConfig> {
    // An empty SHEPHERD_API counts as unset, as in sheepctl.
    let server = cli.server.clone().filter(|s| !s.trim().is_empty()).unwrap_or_else(|| format!("http://{DEFAULT_ADDR}"));
    if !server.split(',').map(str::trim).all(|s| s.starts_with("http://") || s.starts_with("https://")) {
        bail!("--server must be http:// or https:// URLs separated by commas, such as http://{DEFAULT_ADDR}, got {server:?}");
    }
    let mut config = AgentConfig::new(&server);
    if let Some(path) = cli.certificate_authority.as_ref().filter(|p| !p.as_os_str().is_empty()) {
        let pem = std::fs::read_to_string(path).with_context(|| format!("cannot read --certificate-authority {}", path.display()))?;
        config.certificate_authority = Some(pem);
    }
    if let Some(name) = &cli.node_name {
        config.node_name = name.clone();
    }
    for label in &cli.labels {
        let (k, v) = shared::parse::label(label)?;
        config.labels.insert(k, v);
    }
    for taint in &cli.taints {
        config.taints.push(shared::parse::taint(taint)?);
    }
    if let Some(cpu) = &cli.cpu {
        config.capacity.cpu = parse_cpu(cpu).map_err(anyhow::Error::msg).context("--cpu")?;
    }
    if let Some(memory) = &cli.memory {
        config.capacity.memory = parse_memory(memory).map_err(anyhow::Error::msg).context("--memory")?;
    }
    if let Some(pods) = cli.max_pods {
        config.capacity.pods = pods;
    }
    // An empty token counts as none, as an empty SHEPHERD_API does: it could not sign anything.
    config.token = cli.token.clone().filter(|token| !token.is_empty());
    config.address = cli.address.clone();
    config.listen = match cli.listen {
        Some(flag) => flag,
        None => agent::listen_from_variable(listen_variable)
            .map_err(anyhow::Error::msg)?
            .unwrap_or_else(|| agent::DEFAULT_LISTEN.parse().expect("the default listen address is valid")),
    };
    config.runtime = match cli.runtime {
        RuntimeKind::Docker => RuntimeChoice::Docker,
        RuntimeKind::Simulated => RuntimeChoice::Simulated { start_delay: cli.simulated_start_delay },
    };
    if cli.backoff_base.is_zero() || cli.backoff_max < cli.backoff_base {
        bail!("--backoff-base must be above zero and at most --backoff-max");
    }
    config.backoff = Backoff::new(cli.backoff_base, cli.backoff_max);
    config.warm_sandboxes = cli.warm_sandboxes;
    config.remove_containers_on_exit = cli.remove_containers_on_exit;
    config.pod_network.choice = match cli.pod_network {
        None => agent::network::Choice::Auto,
        Some(PodNetworkKind::Cni) => agent::network::Choice::Cni,
        Some(PodNetworkKind::Docker) => agent::network::Choice::Docker,
    };
    if agent::network::Subnet::parse(&cli.pod_subnet).is_none() {
        bail!("--pod-subnet {:?} is not an IPv4 subnet such as {}", cli.pod_subnet, agent::network::DEFAULT_SUBNET);
    }
    config.pod_network.subnet = cli.pod_subnet.clone();
    config.dns = agent::dns::DnsConfig { domain: cli.cluster_domain.clone(), forward: cli.dns_forward.clone() };
    config.dns.origin()?;
    config.pod_network.state_dir = cli.state_dir.clone();
    if !cli.cni_bin_dirs.is_empty() {
        config.pod_network.plugin_dirs = cli.cni_bin_dirs.clone();
    }
    // A zero interval would renew in a busy loop (and tokio's interval refuses it).
    for (flag, interval) in
        [("--lease-renew-interval", cli.lease_renew_interval), ("--node-status-report-interval", cli.node_status_report_interval)]
    {
        if interval.is_zero() {
            bail!("{flag} must be more than 0s");
        }
    }
    config.heartbeats = agent::node::Heartbeats {
        lease_renew_interval: cli.lease_renew_interval,
        node_status_report_interval: cli.node_status_report_interval,
    };
    // An empty SHEPHERD_REGISTRY counts as unset, as an empty SHEPHERD_API does.
    if let Some(registry) = cli.registry.as_ref().filter(|r| !r.is_empty()) {
        if let Some(message) = shared::image::registry_error(registry) {
            bail!("--registry: {message}");
        }
        config.registry_login = config.token.clone().map(|password| shepherd_image::RegistryLogin {
            registry: registry.clone(),
            username: config.node_name.clone(),
            password,
        });
    }
    Ok(config)
}

/// `bootstrap-image`: builds the image, then pushes it when `push` names a registry, signed
/// in as `user` with `password` (the token) when there is one.
async fn bootstrap(
    name: &str,
    busybox: &std::path::Path,
    force: bool,
    push: Option<&str>,
    user: &str,
    password: Option<&str>,
) -> anyhow::Result<()> {
    let docker = agent::runtime::DockerRuntime::connect().await?;
    match agent::image::bootstrap(docker.client(), name, busybox, force).await? {
        agent::image::Outcome::Imported => println!("image {name} imported from {}", busybox.display()),
        agent::image::Outcome::AlreadyPresent => println!("image {name} already present (use --force to build it again)"),
    }
    if let Some(registry) = push {
        let login = password.map(|password| shepherd_image::RegistryLogin {
            registry: registry.to_string(),
            username: user.to_string(),
            password: password.to_string(),
        });
        let pushed = shepherd_image::push(docker.client(), name, registry, login.as_ref()).await?;
        println!("pushed {pushed}");
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    shepherd_process::logging::exit_code(start())
}

#[tokio::main]
async fn start() -> anyhow::Result<()> {
    shepherd_process::logging::init("info");
    let cli = Cli::parse();
    if let Some(Command::BootstrapImage { name, busybox, force, push, registry_user }) = &cli.command {
        let password = cli.token.as_deref().filter(|t| !t.is_empty());
        return bootstrap(name, busybox, *force, push.as_deref(), registry_user, password).await;
    }
    let config = config(&cli, std::env::var(agent::LISTEN_ENV).ok().as_deref())?;
    // The agent stops; each node then says whether its pods keep running or were removed
    // (`--remove-containers-on-exit`).
    let shutdown = CancellationToken::new();
    shepherd_process::signal::cancel_on_signal(shutdown.clone()).context("cannot listen for SIGINT and SIGTERM")?;
    match cli.simulate_nodes {
        None => agent::run(config, shutdown).await?,
        Some(0) => bail!("--simulate-nodes must be at least 1"),
        Some(n) => {
            if cli.runtime != RuntimeKind::Simulated {
                bail!("--simulate-nodes runs simulated nodes: add --runtime simulated");
            }
            let fleet = agent::fleet::FleetConfig { node: config, nodes: n, max_in_flight: cli.max_in_flight };
            agent::fleet::run(fleet, shutdown).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_flags_parse_and_refuse_with_the_reason() {
        let cli = Cli::parse_from(["shepherd-agent", "--backoff-base", "500ms", "--backoff-max", "1m30s"]);
        assert_eq!((cli.backoff_base, cli.backoff_max), (Duration::from_millis(500), Duration::from_secs(90)));
        let refused = Cli::try_parse_from(["shepherd-agent", "--backoff-max", "99999999999999999999h"]).unwrap_err().to_string();
        assert!(refused.contains("too long"), "{refused}");
        assert!(Cli::try_parse_from(["shepherd-agent", "--simulated-start-delay", "fast"]).is_err());
    }

    #[test]
    fn flags_become_a_config() {
        let cli = Cli::parse_from([
            "shepherd-agent",
            "--server",
            "http://127.0.0.1:1234",
            "--node-name",
            "n1",
            "--label",
            "zone=a",
            "--taint",
            "gpu=true:NoSchedule",
            "--cpu",
            "1500m",
            "--memory",
            "1Gi",
            "--max-pods",
            "7",
            "--runtime",
            "simulated",
            "--listen",
            "127.0.0.1:0",
            "--warm-sandboxes",
            "9",
            "--lease-renew-interval",
            "2s",
            "--node-status-report-interval",
            "1m",
        ]);
        let config = config(&cli, None).unwrap();
        assert_eq!(config.node_name, "n1");
        assert_eq!(config.server, "http://127.0.0.1:1234");
        assert_eq!(config.labels["zone"], "a");
        assert_eq!(config.taints[0].effect, "NoSchedule");
        assert_eq!((config.capacity.cpu, config.capacity.memory, config.capacity.pods), (1500, 1 << 30, 7));
        assert!(matches!(config.runtime, RuntimeChoice::Simulated { .. }));
        assert_eq!(config.warm_sandboxes, 9);
        assert_eq!(
            config.heartbeats,
            agent::node::Heartbeats { lease_renew_interval: Duration::from_secs(2), node_status_report_interval: Duration::from_secs(60) }
        );
        let defaults = config_of(&["shepherd-agent"]);
        assert_eq!(defaults.warm_sandboxes, agent::DEFAULT_WARM_SANDBOXES);
        assert!(!defaults.remove_containers_on_exit);
        assert!(config_of(&["shepherd-agent", "--remove-containers-on-exit"]).remove_containers_on_exit);
        assert_eq!(defaults.pod_network.choice, agent::network::Choice::Auto);
        assert_eq!(defaults.pod_network.subnet, agent::network::DEFAULT_SUBNET);
        let cni = config_of(&["shepherd-agent", "--pod-network", "docker", "--pod-subnet", "10.99.0.0/24", "--cni-bin-dir", "/x"]);
        assert_eq!(cni.pod_network.choice, agent::network::Choice::Docker);
        assert_eq!((cni.pod_network.subnet.as_str(), cni.pod_network.plugin_dirs.clone()), ("10.99.0.0/24", vec![PathBuf::from("/x")]));
        let bad = Cli::parse_from(["shepherd-agent", "--pod-subnet", "10.99.0.0"]);
        assert!(super::config(&bad, None).unwrap_err().to_string().contains("--pod-subnet"));
        assert_eq!(defaults.heartbeats, agent::node::Heartbeats::default());
        let zero = Cli::parse_from(["shepherd-agent", "--lease-renew-interval", "0s"]);
        assert!(super::config(&zero, None).unwrap_err().to_string().contains("--lease-renew-interval must be more than 0s"));
        assert_eq!(defaults.dns, agent::dns::DnsConfig { domain: "cluster.local".into(), forward: agent::dns::Forward::Host });
        let dns = config_of(&["shepherd-agent", "--cluster-domain", "corp.example", "--dns-forward", "none"]);
        assert_eq!(dns.dns, agent::dns::DnsConfig { domain: "corp.example".into(), forward: agent::dns::Forward::None });
        let upstream = config_of(&["shepherd-agent", "--dns-forward", "127.0.0.1:5353"]);
        assert_eq!(upstream.dns.forward, agent::dns::Forward::To(vec!["127.0.0.1:5353".parse().unwrap()]));
        assert!(Cli::try_parse_from(["shepherd-agent", "--dns-forward", "somewhere"]).is_err());
        let bad_domain = Cli::parse_from(["shepherd-agent", "--cluster-domain", "a..b"]);
        assert!(super::config(&bad_domain, None).unwrap_err().to_string().contains("--cluster-domain \"a..b\" is not a domain name"));
    }

    #[tokio::test]
    async fn an_open_agent_api_off_loopback_is_refused_before_anything_starts() {
        // An address this machine does not have: were the refusal missing, the bind would fail.
        let open = ["shepherd-agent", "--runtime", "simulated", "--listen", "192.0.2.7:23001"];
        let refused = agent::run(config_of(&open), CancellationToken::new()).await.unwrap_err().to_string();
        assert!(refused.starts_with("refusing to serve the agent API on 192.0.2.7:23001 without a token"), "{refused}");
        assert!(refused.ends_with("Pass --token, or listen on 127.0.0.1"), "{refused}");
    }

    #[test]
    fn the_agent_listens_where_its_flag_or_else_its_variable_says_and_an_empty_variable_is_unset() {
        let listen = |flags: &[&str], variable| {
            let args: Vec<&str> = ["shepherd-agent"].iter().chain(flags).copied().collect();
            config(&Cli::parse_from(args), variable).map(|c| c.listen)
        };
        let flag: SocketAddr = "127.0.0.1:19002".parse().unwrap();
        assert_eq!(listen(&["--listen", "127.0.0.1:19002"], Some("junk")).unwrap(), flag, "the flag wins");
        assert_eq!(listen(&[], Some("127.0.0.1:19002")).unwrap(), flag);
        let default: SocketAddr = agent::DEFAULT_LISTEN.parse().unwrap();
        assert_eq!(listen(&[], Some("")).unwrap(), default, "an empty variable is no setting");
        assert_eq!(listen(&[], None).unwrap(), default);
        let junk = listen(&[], Some("junk")).unwrap_err().to_string();
        assert!(junk.starts_with(agent::LISTEN_ENV) && junk.contains("\"junk\""), "{junk}");
    }

    #[tokio::test]
    async fn an_empty_token_is_no_token_and_does_not_open_the_api_off_loopback() {
        let open = ["shepherd-agent", "--runtime", "simulated", "--token", "", "--listen", "192.0.2.7:23001"];
        assert_eq!(config_of(&open).token, None);
        let refused = agent::run(config_of(&open), CancellationToken::new()).await.unwrap_err().to_string();
        assert!(refused.starts_with("refusing to serve the agent API on 192.0.2.7:23001 without a token"), "{refused}");
    }

    fn config_of(args: &[&str]) -> AgentConfig {
        config(&Cli::parse_from(args), None).unwrap()
    }

    #[test]
    fn the_registry_login_is_the_node_and_its_token_and_needs_both() {
        let login = config_of(&["shepherd-agent", "--node-name", "n1", "--token", "t0k3n-n1!", "--registry", "m1:5000"]).registry_login;
        let login = login.expect("a login with a token");
        assert_eq!((login.registry.as_str(), login.username.as_str(), login.password.as_str()), ("m1:5000", "n1", "t0k3n-n1!"));
        assert_eq!(config_of(&["shepherd-agent", "--registry", "m1:5000"]).registry_login, None, "no token, no sign-in");
        let bad = Cli::parse_from(["shepherd-agent", "--registry", "http://m1:5000"]);
        assert!(config(&bad, None).unwrap_err().to_string().starts_with("--registry: a registry is HOST:PORT"));
    }

    #[test]
    fn bad_flags_are_refused() {
        let cli = Cli::parse_from(["shepherd-agent", "--taint", "gpu"]);
        assert!(config(&cli, None).unwrap_err().to_string().contains("gpu"));
        let cli = Cli::parse_from(["shepherd-agent", "--server", "127.0.0.1:9876"]);
        assert!(config(&cli, None).unwrap_err().to_string().contains("http://"));
        let cli = Cli::parse_from(["shepherd-agent", "--server", "http://127.0.0.1:9876,127.0.0.1:9877"]);
        assert!(config(&cli, None).unwrap_err().to_string().contains("http://"));
        let cli = Cli::parse_from(["shepherd-agent", "--memory", "lots"]);
        assert!(format!("{:#}", config(&cli, None).unwrap_err()).contains("lots"));
    }
}
