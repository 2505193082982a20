//! `shepherd`: the control plane binary. Parses flags into a [`server::Config`], binds the
//! address and runs until SIGINT or SIGTERM.

mod access_flags;
mod local_node;
mod registry_command;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use server::config::{Config, default_data_dir};
use server::service_addresses::ServiceRanges;
use server::store::{Encryption, EtcdSettings};
use server::tls::Identity;
use tokio_util::sync::CancellationToken;

/// mimalloc instead of glibc's malloc: every request allocates and frees many small
/// buffers across threads, where glibc's arenas spent about a tenth of the server's CPU.
/// Stored objects go in a heap per kind (see `server::heaps`).
#[global_allocator]
static ALLOCATOR: server::heaps::Allocator = server::heaps::Allocator;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum StoreKind {
    Sqlite,
    Memory,
    Etcd,
}

#[derive(Debug, Parser)]
#[command(
    name = "shepherd",
    version,
    about = "The Shepherd control plane: API server, store, scheduler and controllers.",
    // `shepherd --data-dir D registry` would run the registry without D: say so instead.
    args_conflicts_with_subcommands = true
)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Address to listen on. Anything but loopback requires --token or --tokens-file.
    #[arg(long, env = "SHEPHERD_ADDR", default_value = shared::api::DEFAULT_ADDR)]
    addr: SocketAddr,
    /// Where the SQLite store lives [default: $XDG_DATA_HOME/shepherd, else ~/.local/share/shepherd].
    #[arg(long, env = "SHEPHERD_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Where objects are kept: sqlite (in --data-dir), memory (nothing survives a restart)
    /// or etcd (--etcd-endpoints; several servers may share it).
    #[arg(long, value_enum, default_value = "sqlite")]
    store: StoreKind,
    /// The same as --store memory.
    #[arg(long, conflicts_with_all = ["data_dir", "store"])]
    in_memory: bool,
    /// The etcd members for --store etcd, comma-separated.
    #[arg(long, env = "SHEPHERD_ETCD_ENDPOINTS", value_delimiter = ',', default_value = "http://127.0.0.1:2379")]
    etcd_endpoints: Vec<String>,
    /// Where this cluster's keys live in etcd, as kube-apiserver's --etcd-prefix.
    #[arg(long, default_value = "/registry")]
    etcd_prefix: String,
    /// How often etcd's history is compacted, in seconds (0: never), as kube-apiserver's
    /// --etcd-compaction-interval.
    #[arg(long, default_value_t = 300)]
    etcd_compaction_interval: u64,
    /// Encrypt Secrets in the store (SQLite or etcd) with AES-GCM, as kube-apiserver's aesgcm
    /// provider: a file of `name:<base64 of 16, 24 or 32 random bytes>` lines, the first key
    /// encrypting and every key decrypting (docs/api.md, "Secrets at rest").
    #[arg(long, value_name = "PATH")]
    encryption_key_file: Option<PathBuf>,
    #[command(flatten)]
    access: access_flags::AccessFlags,
    /// Serve HTTPS with a certificate made in the data directory (tls/ca.crt is the authority
    /// clients trust, made once and kept), for localhost, 127.0.0.1, ::1 and --addr; made
    /// again on start within 30 days of its end.
    #[arg(long, conflicts_with_all = ["tls_cert", "in_memory"])]
    tls_self_signed: bool,
    /// Another name or address the made certificate is for (repeatable).
    #[arg(long, value_name = "HOST", requires = "tls_self_signed")]
    tls_san: Vec<String>,
    /// Scheduler profile: spread (least allocated, spread a deployment's pods) or bin-pack.
    #[arg(long, default_value = "spread", value_parser = ["spread", "bin-pack"])]
    scheduler_profile: String,
    /// Do not run the built-in scheduler (another one binds pods through the binding API).
    #[arg(long)]
    disable_scheduler: bool,
    /// How many changes a watch can replay before it gets 410 Gone. A streaming watch that
    /// falls half as many behind is ended, and resumes from its last revision. At least 100.
    #[arg(long, default_value_t = server::config::DEFAULT_WATCH_HISTORY, value_parser = watch_history)]
    watch_history: usize,
    /// Seconds of changes a watch can replay (at most --watch-history of them).
    #[arg(long, default_value_t = server::config::DEFAULT_WATCH_HISTORY_AGE.as_secs())]
    watch_history_age: u64,
    /// Seconds without a heartbeat before a node becomes NotReady. The local node renews its
    /// lease every quarter of it, at most every 10 s.
    #[arg(long, default_value_t = shared::readiness::DEFAULT_NODE_MONITOR_GRACE.as_secs())]
    node_monitor_grace: u64,
    /// Seconds a node stays NotReady before its pods are marked Failed (NodeLost).
    #[arg(long, default_value_t = 60)]
    pod_eviction_grace: u64,
    /// Seconds events are kept after they last happened.
    #[arg(long, default_value_t = 3600)]
    event_ttl: u64,
    /// The most events kept; beyond it the oldest are deleted.
    #[arg(long, default_value_t = 20_000)]
    event_limit: usize,
    /// The built dashboard to serve at / [default: ./dist, else the dist/ of the source tree this binary was built from].
    #[arg(long, env = "SHEPHERD_DASHBOARD_DIR")]
    dashboard_dir: Option<PathBuf>,
    /// Also run a node agent in this process (like k3s's server), named after the host.
    #[arg(long)]
    local_node: bool,
    /// The local node's runtime: auto uses Docker when an engine answers, else simulated pods.
    #[arg(long, value_enum, default_value = "auto", requires = "local_node")]
    local_runtime: local_node::LocalRuntime,
    /// Started, unclaimed pod sandboxes the local node keeps ready (Docker): a pod that claims
    /// one skips the engine's network set-up when it starts. 0 turns the pool off.
    #[arg(long, value_name = "N", default_value_t = agent::DEFAULT_WARM_SANDBOXES, requires = "local_node")]
    warm_sandboxes: usize,
    /// When shepherd stops, remove the local node's containers: its pods', their sandboxes
    /// and the warm pool (by default they keep running, for the next start to adopt).
    #[arg(long, requires = "local_node")]
    remove_containers_on_exit: bool,
    /// Where the local node's agent API (the logs the server proxies) listens [default: $SHEPHERD_AGENT_LISTEN,
    /// else 127.0.0.1:0, a free port]. The same setting as shepherd-agent's --listen. Only with --local-node.
    #[arg(long, value_name = "ADDR")]
    local_node_listen: Option<SocketAddr>,
    /// The cluster's DNS domain, which the local node's DNS answers for its pods (CNI pod
    /// network). The same setting as shepherd-agent's --cluster-domain.
    #[arg(long, default_value = agent::dns::records::DEFAULT_DOMAIN, requires = "local_node")]
    cluster_domain: String,
    /// Where the local node's DNS sends other names: `host` (the host's resolv.conf),
    /// nameservers `IP[:PORT],…`, or `none` (refused). The same as shepherd-agent's --dns-forward.
    #[arg(long, default_value = "host", value_parser = parse_dns_forward, requires = "local_node")]
    dns_forward: agent::dns::Forward,
    /// Run the scheduler and the controllers only while this server holds the leader's lease
    /// (kube-system/shepherd-control-plane), so that servers sharing a store never both act.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    leader_elect: bool,
    /// How long a candidate waits, from when it last saw the leader's lease change, before it takes it.
    #[arg(long, default_value = "15s", value_parser = duration)]
    leader_elect_lease_duration: Duration,
    /// How long the leader tries to renew before it stops scheduling and reconciling.
    #[arg(long, default_value = "10s", value_parser = duration)]
    leader_elect_renew_deadline: Duration,
    /// How often candidates try to acquire the lease and the leader to renew it.
    #[arg(long, default_value = "2s", value_parser = duration)]
    leader_elect_retry_period: Duration,
    /// This server's identity in the leases [default: <hostname>_<a new uuid>]; each server
    /// needs its own.
    #[arg(long, value_name = "ID", value_parser = server_id)]
    server_id: Option<String>,
    /// Where clients reach this server, announced to the others [default: the address it listens on].
    #[arg(long, value_name = "URL", value_parser = advertise_url)]
    advertise_url: Option<String>,
    /// Allow pods with hostPath volumes, which read and write this machine's files (a node's,
    /// for every node's agent): without it such a pod, deployment or ReplicaSet gets 403.
    #[arg(long)]
    allow_host_path: bool,
    /// The range Services' cluster IPs come from, as kube-apiserver's flag; it must stay
    /// apart from the pod subnet (agents' --pod-subnet, 10.77.0.0/16 by default).
    #[arg(long, value_name = "CIDR", default_value = server::service_addresses::DEFAULT_SERVICE_CIDR)]
    service_cidr: String,
    /// The ports NodePort Services are served on, on every node's address.
    #[arg(long, value_name = "FIRST-LAST", default_value = server::service_addresses::DEFAULT_NODE_PORT_RANGE)]
    service_node_port_range: String,
    /// Threads that serve HTTP and run the loops [default: one per CPU core]. The store's
    /// writer has its own thread either way.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    worker_threads: Option<u16>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the cluster's image registry (distribution's docker-registry) with its storage in
    /// the data directory; nodes pull REGISTRY/NAME:TAG from it.
    Registry(registry_command::RegistryArgs),
}

/// `--watch-history`: a number of changes, at least 100.
fn watch_history(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(changes) if changes >= 100 => Ok(changes),
        Ok(_) => Err("the history keeps at least 100 changes".to_string()),
        Err(_) => Err("a number of changes, at least 100".to_string()),
    }
}

/// A duration as Kubernetes' flags take one: `15s`, `1m30s`, `500ms`.
/// An http or https URL with a host: the dashboard and `sheepctl info` show it to users.
fn advertise_url(text: &str) -> Result<String, String> {
    let rest = text.strip_prefix("http://").or_else(|| text.strip_prefix("https://"));
    match rest {
        Some(rest) if !rest.is_empty() && !text.chars().any(|c| c.is_control() || c.is_whitespace()) => Ok(text.to_string()),
        _ => Err("give the URL clients reach this server at, such as https://m1:9876".into()),
    }
}

fn server_id(text: &str) -> Result<String, String> {
    if text.trim().is_empty() || text.chars().any(char::is_control) {
        return Err("give each server a non-empty identity of printable characters".into());
    }
    Ok(text.to_string())
}

fn parse_dns_forward(text: &str) -> Result<agent::dns::Forward, String> {
    agent::dns::Forward::parse(text).ok_or_else(|| format!("{text:?} is not host, none, or nameservers IP[:PORT] separated by commas"))
}

fn duration(text: &str) -> Result<Duration, String> {
    shared::parse::duration(text).map_err(|e| e.to_string())
}

/// `./dist` when it holds a build, else the `dist/` beside the workspace this binary came
/// from, so `target/release/shepherd` finds the dashboard from any directory.
fn default_dashboard_dir() -> Option<PathBuf> {
    let here = PathBuf::from("dist");
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../dist");
    [here, built].into_iter().find(|dir| dir.join("index.html").is_file())
}

impl Args {
    /// The flags of `matches`. `--local-node-listen` is read as a flag only: its variable is
    /// the stand-alone agent's as well, which a shell may export for both, so it is read
    /// when the local node runs ([`Args::local_node_settings`]) and ignored otherwise.
    fn from_matches(matches: &clap::ArgMatches) -> Result<Args, clap::Error> {
        let args = Args::from_arg_matches(matches)?;
        if !args.local_node && args.local_node_listen.is_some() {
            let message = "--local-node-listen is the local node's: add --local-node";
            return Err(Args::command().error(clap::error::ErrorKind::MissingRequiredArgument, message));
        }
        Ok(args)
    }

    /// The local node's settings, when it runs; `agent_listen` is the agent's variable.
    fn local_node_settings(&self, agent_listen: Option<&str>) -> anyhow::Result<Option<local_node::Settings>> {
        if !self.local_node {
            return Ok(None);
        }
        let listen = match self.local_node_listen {
            Some(flag) => flag,
            None => agent::listen_from_variable(agent_listen)
                .map_err(anyhow::Error::msg)?
                .unwrap_or_else(|| local_node::DEFAULT_LISTEN.parse().expect("the default is an address")),
        };
        Ok(Some(local_node::Settings {
            runtime: self.local_runtime,
            warm_sandboxes: self.warm_sandboxes,
            remove_containers_on_exit: self.remove_containers_on_exit,
            listen,
            dns: agent::dns::DnsConfig { domain: self.cluster_domain.clone(), forward: self.dns_forward.clone() },
        }))
    }

    fn into_config(self) -> anyhow::Result<Config> {
        let tokens = self.access.tokens()?;
        let store = if self.in_memory { StoreKind::Memory } else { self.store };
        let data_dir = match store {
            StoreKind::Memory => None,
            StoreKind::Sqlite | StoreKind::Etcd => Some(self.data_dir.unwrap_or_else(default_data_dir)),
        };
        anyhow::ensure!(
            data_dir.is_some() || !self.tls_self_signed,
            "--tls-self-signed keeps its certificate in the data directory: use it with --store sqlite or etcd"
        );
        let etcd = (store == StoreKind::Etcd).then(|| EtcdSettings {
            endpoints: self.etcd_endpoints.clone(),
            prefix: self.etcd_prefix.clone(),
            compaction_interval: Duration::from_secs(self.etcd_compaction_interval),
        });
        let encryption = match &self.encryption_key_file {
            Some(path) => {
                anyhow::ensure!(
                    store != StoreKind::Memory,
                    "--encryption-key-file encrypts Secrets at rest: use it with --store sqlite or etcd"
                );
                let encryption = Encryption::from_file(path)?;
                let names: Vec<&str> = encryption.key_names().collect();
                tracing::info!("Secrets are encrypted at rest with the key {:?}; keys that decrypt: {}", names[0], names.join(", "));
                encryption
            }
            None => Encryption::default(),
        };
        let dashboard_dir = self.dashboard_dir.or_else(default_dashboard_dir);
        let tls = match (self.access.certificate(), &data_dir) {
            (Some((cert, key)), _) => Some(Identity::from_files(&cert, &key)?),
            (None, Some(dir)) if self.tls_self_signed => {
                let mut hosts = server::tls::default_hosts(self.addr);
                hosts.extend(self.tls_san.iter().cloned());
                let (identity, ca) = Identity::self_signed(dir, &hosts)?;
                tracing::info!(
                    "serving HTTPS with the certificate in {}; clients trust its authority: SHEPHERD_CA={}",
                    dir.join(server::tls::SELF_SIGNED_DIR).display(),
                    ca.display()
                );
                Some(identity)
            }
            _ => None,
        };
        let leader_election = server::config::LeaderElection {
            leader_elect: self.leader_elect,
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
        };
        if leader_election.leader_elect {
            leader_election.validate().map_err(anyhow::Error::msg)?;
        }
        let pods = shared::subnet::Subnet::parse(agent::network::DEFAULT_SUBNET).expect("the default pod subnet is valid");
        let service_ranges =
            ServiceRanges::parse(&self.service_cidr, &self.service_node_port_range, &[pods]).map_err(anyhow::Error::msg)?;
        Ok(Config {
            data_dir,
            etcd,
            encryption,
            tokens,
            scheduler_profile: self.scheduler_profile,
            run_scheduler: !self.disable_scheduler,
            watch_history: self.watch_history,
            watch_history_age: Duration::from_secs(self.watch_history_age),
            node_monitor_grace: Duration::from_secs(self.node_monitor_grace),
            pod_eviction_grace: Duration::from_secs(self.pod_eviction_grace),
            event_ttl: Duration::from_secs(self.event_ttl),
            event_limit: self.event_limit,
            dashboard_dir,
            tls,
            leader_election,
            server_id: self.server_id,
            advertise_url: self.advertise_url,
            allow_host_path: self.allow_host_path,
            service_ranges,
            ..Config::default()
        })
    }
}

/// Turns transparent huge pages off for this process. mimalloc asks for huge pages, and the
/// cache grows with every object: on a virtual machine each first touch of a fresh 2 MiB
/// page stalled the thread that made it for 5 to 15 ms (zeroing, plus the host mapping the
/// memory), which put the store's writer, and every create queued behind it, over 10 ms.
#[cfg(target_os = "linux")]
fn disable_transparent_huge_pages() {
    // SAFETY: PR_SET_THP_DISABLE takes plain integers and touches no memory of ours.
    if unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } != 0 {
        tracing::warn!("cannot turn transparent huge pages off: {}", std::io::Error::last_os_error());
    }
}

fn main() -> std::process::ExitCode {
    shepherd_process::logging::exit_code(start())
}

fn start() -> anyhow::Result<()> {
    shepherd_process::logging::init("info");
    #[cfg(target_os = "linux")]
    disable_transparent_huge_pages();
    let args = Args::from_matches(&Args::command().get_matches()).unwrap_or_else(|e| e.exit());
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.on_thread_park(server::heaps::collect_parked_thread);
    if let Some(threads) = args.worker_threads {
        runtime.worker_threads(usize::from(threads));
    }
    let runtime = runtime.enable_all().build().context("cannot start the tokio runtime")?;
    match args.command {
        Some(Command::Registry(registry)) => runtime.block_on(registry_command::run(registry)),
        None => runtime.block_on(serve(args)),
    }
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let addr = args.addr;
    let local = args.local_node_settings(std::env::var(agent::LISTEN_ENV).ok().as_deref())?;
    let mut config = args.into_config()?;
    if let Some(dir) = &config.data_dir {
        tracing::info!("data directory: {}", dir.display());
    }
    match &config.dashboard_dir {
        Some(dir) => tracing::info!("dashboard: {}", dir.display()),
        None => tracing::warn!("the dashboard is not built (run `cargo xtask frontend`): only the API is served"),
    }
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    let scheme = if config.tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{}", listener.local_addr()?);
    let signalled = CancellationToken::new();
    shepherd_process::signal::cancel_on_signal(signalled.clone()).context("cannot listen for SIGINT and SIGTERM")?;
    // On a signal the local node stops first, while the API still answers its last calls
    // (a pod's deletion confirmed), and the control plane after it.
    let (shutdown, local_agent) = match local {
        Some(settings) => {
            let runtime = local_node::choose_runtime(settings.runtime).await?;
            let agent = local_node::agent_config(&url, runtime, &settings, &mut config)?;
            let shutdown = CancellationToken::new();
            let (stop_server, signal) = (shutdown.clone(), signalled.clone());
            let agent = tokio::spawn(local_node::run(agent, signalled.clone()));
            let stopping = tokio::spawn(async move {
                let ended = agent.await.unwrap_or_else(|e| Err(anyhow::anyhow!("the local node's task ended: {e}")));
                if ended.is_ok() {
                    signal.cancelled().await;
                }
                stop_server.cancel();
                ended
            });
            (shutdown, Some(stopping))
        }
        None => (signalled.clone(), None),
    };
    let served = server::run(listener, config, shutdown).await;
    // The server may also end on an error: the local node still stops before the process.
    signalled.cancel();
    let local_ended = match local_agent {
        Some(stopping) => stopping.await.unwrap_or_else(|e| Err(anyhow::anyhow!("the local node's task ended: {e}"))),
        None => Ok(()),
    };
    served?;
    local_ended?;
    tracing::info!("stopped cleanly");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(flags: &[&str]) -> Result<Args, clap::Error> {
        Args::from_matches(&Args::command().try_get_matches_from(["shepherd", "--in-memory"].iter().chain(flags))?)
    }

    #[test]
    fn the_local_node_listens_where_its_flag_or_else_the_agents_variable_says() {
        let listen =
            |flags: &[&str], variable: Option<&str>| parse(flags).unwrap().local_node_settings(variable).map(|s| s.map(|s| s.listen));
        let flag = "127.0.0.1:19002".parse().unwrap();
        assert_eq!(listen(&["--local-node", "--local-node-listen", "127.0.0.1:19002"], Some("127.0.0.1:19003")).unwrap(), Some(flag));
        assert_eq!(listen(&["--local-node"], Some("127.0.0.1:19002")).unwrap(), Some(flag));
        let default = local_node::DEFAULT_LISTEN.parse().unwrap();
        assert_eq!(listen(&["--local-node"], None).unwrap(), Some(default));
        assert_eq!(listen(&["--local-node"], Some("")).unwrap(), Some(default), "an empty variable is no setting");
        let junk = listen(&["--local-node"], Some("junk")).unwrap_err().to_string();
        assert!(junk.contains(agent::LISTEN_ENV) && junk.contains("junk"), "{junk}");
    }

    #[test]
    fn the_local_nodes_dns_flags_reach_its_settings() {
        let dns = |flags: &[&str]| parse(flags).unwrap().local_node_settings(None).unwrap().map(|s| s.dns);
        assert_eq!(dns(&["--local-node"]), Some(agent::dns::DnsConfig::default()));
        let set = dns(&["--local-node", "--cluster-domain", "corp.example", "--dns-forward", "none"]);
        assert_eq!(set, Some(agent::dns::DnsConfig { domain: "corp.example".into(), forward: agent::dns::Forward::None }));
        assert!(parse(&["--dns-forward", "none"]).is_err(), "the local node's: without it, refused");
        assert!(parse(&["--local-node", "--dns-forward", "elsewhere"]).is_err());
    }

    #[test]
    fn without_the_local_node_its_listen_flag_is_refused_and_the_agents_variable_ignored() {
        let alone = parse(&["--local-node-listen", "127.0.0.1:19002"]).map(|_| ()).expect_err("refused without --local-node").to_string();
        assert!(alone.contains("add --local-node"), "{alone}");
        for variable in [Some("junk"), Some(""), Some("127.0.0.1:19002"), None] {
            assert_eq!(parse(&[]).unwrap().local_node_settings(variable).unwrap(), None, "{variable:?}");
        }
        let command = Args::command();
        let flag = command.get_arguments().find(|a| a.get_id() == "local_node_listen").expect("the flag");
        assert_eq!(flag.get_env(), None, "clap must not read (and reject) the agent's variable for a server without a local node");
    }

    #[test]
    fn the_servers_flags_before_registry_are_refused_not_ignored() {
        let matches = |args: &[&str]| Args::command().try_get_matches_from(args).map(|_| ());
        let refused = matches(&["shepherd", "--data-dir", "/d", "registry"]).unwrap_err().to_string();
        assert!(refused.contains("the subcommand 'registry' cannot be used with '--data-dir"), "{refused}");
        matches(&["shepherd", "registry", "--data-dir", "/d"]).unwrap();
    }

    #[test]
    fn an_encryption_key_file_is_read_at_start_and_a_bad_one_stops_the_server() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("keys");
        let config = |file: &std::path::Path| {
            let flags = ["shepherd", "--data-dir", dir.path().to_str().unwrap(), "--encryption-key-file", file.to_str().unwrap()];
            Args::from_matches(&Args::command().try_get_matches_from(flags).unwrap()).unwrap().into_config()
        };
        std::fs::write(&file, "# the first encrypts\nk2:MDEyMzQ1Njc4OWFiY2RlZg==\nk1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n")
            .unwrap();
        let read = config(&file).unwrap().encryption;
        assert_eq!(read.key_names().collect::<Vec<_>>(), ["k2", "k1"]);
        std::fs::write(&file, "k1:MDEyMzQ1Njc4OWFiY2RlZg==\nk1:MDEyMzQ1Njc4OWFiY2RlZg==\n").unwrap();
        let duplicate = config(&file).unwrap_err().to_string();
        assert!(duplicate.contains("line 2: the key name \"k1\" is on line 1 already"), "{duplicate}");
        let missing = config(&dir.path().join("absent")).unwrap_err().to_string();
        assert!(missing.contains("cannot read the encryption key file"), "{missing}");
        let in_memory = parse(&["--encryption-key-file", file.to_str().unwrap()]).unwrap().into_config().unwrap_err().to_string();
        assert!(in_memory.contains("use it with --store sqlite or etcd"), "{in_memory}");
    }

    #[test]
    fn a_server_id_must_be_printable_and_not_empty() {
        for bad in ["", "  ", "a\nb"] {
            assert!(parse(&["--server-id", bad]).is_err(), "{bad:?}");
        }
        assert_eq!(parse(&["--server-id", "s1"]).unwrap().server_id.as_deref(), Some("s1"));
    }

    #[test]
    fn an_advertised_url_is_http_or_https_with_a_host() {
        for bad in ["javascript:alert(1)", "http://", "m1:9876", "https://m1 :1"] {
            assert!(parse(&["--advertise-url", bad]).is_err(), "{bad:?}");
        }
        assert!(parse(&["--advertise-url", "https://m1:9876"]).is_ok());
    }

    #[test]
    fn leader_election_takes_kubernetes_flags_and_defaults_and_refuses_timings_that_could_overlap() {
        let default = parse(&[]).unwrap().into_config().unwrap().leader_election;
        assert_eq!(default, server::config::LeaderElection::default());
        assert!(default.leader_elect && default.lease_duration == Duration::from_secs(15));
        let off = parse(&["--leader-elect=false"]).unwrap().into_config().unwrap().leader_election;
        assert!(!off.leader_elect);
        let set = parse(&[
            "--leader-elect-lease-duration",
            "30s",
            "--leader-elect-renew-deadline",
            "20s",
            "--leader-elect-retry-period",
            "500ms",
        ])
        .unwrap()
        .into_config()
        .unwrap()
        .leader_election;
        assert_eq!(
            (set.lease_duration, set.renew_deadline, set.retry_period),
            (Duration::from_secs(30), Duration::from_secs(20), Duration::from_millis(500))
        );
        let overlap = parse(&["--leader-elect-renew-deadline", "15s"]).unwrap().into_config().unwrap_err().to_string();
        assert!(overlap.contains("--leader-elect-lease-duration") && overlap.contains("greater than"), "{overlap}");
    }

    #[test]
    fn a_watch_history_below_a_hundred_is_refused_not_raised() {
        let refused = parse(&["--watch-history", "99"]).map(|_| ()).unwrap_err().to_string();
        assert!(refused.contains("--watch-history") && refused.contains("at least 100 changes"), "{refused}");
        let kept = parse(&["--watch-history", "100"]).unwrap().into_config().unwrap();
        assert_eq!(kept.watch_history, 100);
    }
}
