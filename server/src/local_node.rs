//! `shepherd --local-node`: a node agent in the server's own process, as k3s's server runs
//! one, so that one command gives a working cluster. Docker when an engine answers (with the
//! `minimal` image made sure of), else simulated pods with a warning that says how to get
//! real containers.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use agent::{AgentConfig, RuntimeChoice};
use anyhow::Context as _;
use server::auth::{Principal, Role};
use server::config::Config;
use tokio_util::sync::CancellationToken;

/// The image the reference manifests use.
const MINIMAL_IMAGE: &str = "minimal";
/// How long a simulated pod takes to "start".
const SIMULATED_START_DELAY: Duration = Duration::from_millis(500);
/// Where the local node's agent API listens by default: any free port, for only the server
/// in the same process needs to find it.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:0";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LocalRuntime {
    /// Docker when an engine answers, else simulated.
    Auto,
    Docker,
    Simulated,
}

/// The local node's flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub runtime: LocalRuntime,
    /// Pod sandboxes to keep ready.
    pub warm_sandboxes: usize,
    pub remove_containers_on_exit: bool,
    /// Where its agent API listens.
    pub listen: SocketAddr,
    /// Its DNS's cluster domain and forwarding.
    pub dns: agent::dns::DnsConfig,
}

/// Picks the runtime: `Auto` falls back to simulated pods with a warning.
pub async fn choose_runtime(wanted: LocalRuntime) -> anyhow::Result<RuntimeChoice> {
    let simulated = RuntimeChoice::Simulated { start_delay: SIMULATED_START_DELAY };
    match wanted {
        LocalRuntime::Simulated => Ok(simulated),
        LocalRuntime::Docker => {
            ensure_minimal_image().await?;
            Ok(RuntimeChoice::Docker)
        }
        LocalRuntime::Auto => match ensure_minimal_image().await {
            Ok(()) => Ok(RuntimeChoice::Docker),
            Err(e) => {
                tracing::warn!(
                    "no usable Docker engine ({e:#}): the local node runs SIMULATED pods, no real containers. \
                     For real containers install Docker (apt-get install docker.io busybox-static), start dockerd, and restart shepherd"
                );
                Ok(simulated)
            }
        },
    }
}

async fn ensure_minimal_image() -> anyhow::Result<()> {
    let runtime = agent::runtime::DockerRuntime::connect().await?;
    let busybox = Path::new(agent::image::DEFAULT_BUSYBOX);
    anyhow::ensure!(
        busybox.is_file(),
        "{} is missing, so the {MINIMAL_IMAGE:?} image cannot be built (apt-get install busybox-static)",
        busybox.display()
    );
    if let agent::image::Outcome::Imported = agent::image::bootstrap(runtime.client(), MINIMAL_IMAGE, busybox, false).await? {
        tracing::info!("built the {MINIMAL_IMAGE:?} image from the host's busybox");
    }
    Ok(())
}

/// The agent's settings for a node served by this process at `api`, as `settings` say. It
/// renews its lease at least every quarter of the server's node monitor grace, as the
/// kubelet's defaults do (10 s of 40 s), so that a shortened grace does not make it look
/// NotReady between two renewals. When the server checks tokens, the node gets a node token
/// of its own, added to `config`; without tokens, its agent API listens on loopback only,
/// as the server's own API does.
pub fn agent_config(api: &str, runtime: RuntimeChoice, settings: &Settings, config: &mut Config) -> anyhow::Result<AgentConfig> {
    anyhow::ensure!(
        shared::listen::may_listen(settings.listen, !config.tokens.is_empty()),
        "refusing to serve the local node's agent API on {} without a token: anyone who can reach it could read every pod's logs. \
         Pass --token or --tokens-file, or listen on 127.0.0.1",
        settings.listen
    );
    let mut agent = AgentConfig::new(api);
    agent.runtime = runtime;
    agent.warm_sandboxes = settings.warm_sandboxes;
    agent.remove_containers_on_exit = settings.remove_containers_on_exit;
    agent.listen = settings.listen;
    settings.dns.origin()?;
    agent.dns = settings.dns.clone();
    let renew = &mut agent.heartbeats.lease_renew_interval;
    *renew = (*renew).min(config.node_monitor_grace / 4).max(Duration::from_millis(100));
    agent.certificate_authority = config.tls.as_ref().map(|tls| tls.trust.clone());
    if !config.tokens.is_empty() {
        // A node has one token: the tokens file's for this node's name, when it has one.
        let token = match config.tokens.of_node(&agent.node_name) {
            Some(token) => token.to_string(),
            None => {
                let token = uuid::Uuid::new_v4().simple().to_string();
                config.tokens.add(&token, Principal::new(Role::Node, Some(agent.node_name.clone())));
                token
            }
        };
        agent.token = Some(token);
    }
    Ok(agent)
}

/// Runs the agent until `shutdown`. It fails only as it starts (its runtime, its listener),
/// and then the whole server stops with its error: a `--local-node` without its node is
/// not what was asked for.
pub async fn run(agent: AgentConfig, shutdown: CancellationToken) -> anyhow::Result<()> {
    let node = agent.node_name.clone();
    agent::run(agent, shutdown).await.with_context(|| format!("the local node {node} could not start"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(listen: &str) -> Settings {
        Settings {
            runtime: LocalRuntime::Simulated,
            warm_sandboxes: 2,
            remove_containers_on_exit: true,
            listen: listen.parse().unwrap(),
            dns: agent::dns::DnsConfig::default(),
        }
    }

    #[test]
    fn the_agent_gets_the_local_nodes_settings() {
        let mut config = Config::default();
        let simulated = RuntimeChoice::Simulated { start_delay: SIMULATED_START_DELAY };
        let agent = agent_config("http://127.0.0.1:19000", simulated, &settings("127.0.0.1:19001"), &mut config).unwrap();
        assert_eq!(agent.listen, "127.0.0.1:19001".parse().unwrap());
        assert_eq!((agent.warm_sandboxes, agent.remove_containers_on_exit), (2, true));
        assert_eq!(agent.server, "http://127.0.0.1:19000");
        assert!(agent.token.is_none(), "a server without tokens gives its node none");
        let refusing = agent::dns::DnsConfig { domain: "corp.example".into(), forward: agent::dns::Forward::None };
        let quiet = Settings { dns: refusing.clone(), ..settings("127.0.0.1:19001") };
        assert_eq!(agent_config("http://127.0.0.1:19000", simulated, &quiet, &mut config).unwrap().dns, refusing);
        let bad = Settings { dns: agent::dns::DnsConfig { domain: "a..b".into(), ..refusing }, ..settings("127.0.0.1:19001") };
        let refused = agent_config("http://127.0.0.1:19000", simulated, &bad, &mut config).unwrap_err().to_string();
        assert!(refused.contains("--cluster-domain \"a..b\""), "{refused}");
    }

    #[test]
    fn the_local_nodes_agent_api_leaves_loopback_only_with_tokens() {
        let simulated = RuntimeChoice::Simulated { start_delay: SIMULATED_START_DELAY };
        for open in ["0.0.0.0:19001", "[::]:19001", "192.0.2.7:19001"] {
            let refused = agent_config("http://127.0.0.1:19000", simulated, &settings(open), &mut Config::default()).unwrap_err();
            assert!(refused.to_string().contains("without a token"), "{open}: {refused}");
        }
        agent_config("http://127.0.0.1:19000", simulated, &settings("[::1]:19001"), &mut Config::default()).expect("loopback");
        let mut guarded = Config::default();
        guarded.tokens.add_flag_token("admin-token-1").unwrap();
        let agent = agent_config("http://127.0.0.1:19000", simulated, &settings("0.0.0.0:19001"), &mut guarded).expect("with a token");
        assert!(agent.token.is_some(), "the node gets a token of its own");
    }

    #[test]
    fn the_local_node_takes_the_token_the_tokens_file_gives_its_name() {
        let simulated = RuntimeChoice::Simulated { start_delay: SIMULATED_START_DELAY };
        let name = AgentConfig::new("http://127.0.0.1:19000").node_name;
        let tokens = server::auth::Tokens::parse(&format!("admin-token-1 admin\nfile-node-token node {name}\n"), "t").unwrap();
        let mut config = Config { tokens, ..Config::default() };
        let agent = agent_config("http://127.0.0.1:19000", simulated, &settings("127.0.0.1:19001"), &mut config).unwrap();
        assert_eq!(agent.token.as_deref(), Some("file-node-token"), "no second token for node {name}");
        assert_eq!(config.tokens.of_node(&name), Some("file-node-token"));
    }
}
