//! Test support: the real Docker engine (failing loudly when it is missing), the real API
//! server in process ([`api`]), and a running agent per test, on the CNI pod network (failing
//! loudly when its plugins are missing) with a state directory per node.
#![allow(dead_code)]

pub mod api;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent::network::{Choice, CniNetwork, PodNetworkConfig, Subnet};
use agent::runtime::{ContainerRuntime, DockerRuntime, LABEL_NODE};
use agent::sandbox::PoolStatus;
use agent::{AgentConfig, RuntimeChoice};
pub use api::Api;
use shared::backoff::Backoff;
use shared::model::{Container, PodSpec};
use tokio_util::sync::CancellationToken;

/// Connects to Docker or fails the test with what to do about it.
pub async fn docker() -> Arc<DockerRuntime> {
    match DockerRuntime::connect().await {
        Ok(runtime) => Arc::new(runtime),
        Err(e) => panic!(
            "these tests need a running Docker engine and none answered: {e}\n\
             install it (Debian: apt-get install docker.io busybox-static) and start dockerd, then run again"
        ),
    }
}

/// Makes sure the `minimal` image exists (built from the host's busybox).
pub async fn minimal_image(docker: &DockerRuntime) {
    agent::image::bootstrap(docker.client(), "minimal", std::path::Path::new(agent::image::DEFAULT_BUSYBOX), false)
        .await
        .expect("cannot bootstrap the minimal image from /bin/busybox (apt-get install busybox-static)");
}

pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", &uuid::Uuid::new_v4().simple().to_string()[..10])
}

/// The shutdown tokens of the agents each test node ran, so that a failed test stops them.
static AGENTS: Mutex<Vec<(String, CancellationToken)>> = Mutex::new(Vec::new());

/// The state directory of a test node's agent: where its sandboxes' namespaces and CNI
/// results are, for an agent that restarts on the node and for [`Cleanup`].
pub fn state_dir(node: &str) -> PathBuf {
    std::env::temp_dir().join("shepherd-agent-tests").join(node)
}

/// The CNI pod network settings of a test node: the default subnet and plugins, and the
/// node's own state directory. Fails the test when the plugins are missing.
pub fn pod_network(node: &str) -> PodNetworkConfig {
    let config = PodNetworkConfig { choice: Choice::Cni, state_dir: state_dir(node), ..PodNetworkConfig::default() };
    let path = agent::cni::PluginPath(config.plugin_dirs.clone());
    let missing: Vec<&str> = agent::network::PLUGINS.iter().copied().filter(|p| path.find(p).is_err()).collect();
    assert!(
        missing.is_empty(),
        "these tests need the CNI plugins {missing:?} and root: install them ({}) and run again",
        agent::network::INSTALL
    );
    config
}

/// Removes every container of a test node (its warm pool too), even when the test panics;
/// then it first stops the node's agents, which would otherwise keep creating containers.
/// Then it takes down the networks its sandboxes had (veths, host port rules,
/// address leases, kept namespaces), lets its DNS address go and removes its state directory.
pub struct Cleanup(pub String);

impl Cleanup {
    fn remove_all(&self) {
        let filter = format!("label={LABEL_NODE}={}", self.0);
        if let Ok(out) = std::process::Command::new("docker").args(["ps", "-aq", "--filter", &filter]).output() {
            let ids: Vec<String> = String::from_utf8_lossy(&out.stdout).split_whitespace().map(String::from).collect();
            if !ids.is_empty() {
                let _ = std::process::Command::new("docker").arg("rm").arg("-f").args(&ids).output();
            }
        }
        let config = PodNetworkConfig { state_dir: state_dir(&self.0), ..PodNetworkConfig::default() };
        let subnet = Subnet::parse(&config.subnet).expect("the default subnet parses");
        let network = CniNetwork::new(subnet, &config.state_dir, &config.plugin_dirs);
        for sandbox in network.attached() {
            if let Err(e) = network.detach(&sandbox) {
                eprintln!("cannot take down the network of test sandbox {sandbox}: {e}");
            }
        }
        if let Err(e) = agent::dns::release(&network, &self.0) {
            eprintln!("cannot let the DNS address of test node {} go: {e}", self.0);
        }
        if network.attached().is_empty() {
            let _ = std::fs::remove_dir_all(&config.state_dir);
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for (node, agent) in AGENTS.lock().unwrap_or_else(|p| p.into_inner()).iter() {
                if *node == self.0 {
                    agent.cancel();
                }
            }
            // Let an operation in flight end before sweeping.
            std::thread::sleep(Duration::from_secs(1));
        }
        self.remove_all();
    }
}

/// Takes a test cluster's service proxy rules away when the test ends, also when it fails
/// half-way: its agents leave them for the next agent when they keep their containers.
pub struct RemoveRules(pub agent::proxy::rules::Scope);

impl RemoveRules {
    pub fn of(api: &Api) -> RemoveRules {
        RemoveRules(agent::proxy::rules::Scope::new(&api.cluster, Subnet::parse(agent::network::DEFAULT_SUBNET).unwrap()))
    }
}

impl Drop for RemoveRules {
    fn drop(&mut self) {
        if let Err(e) = agent::proxy::host::apply(&self.0, &agent::proxy::rules::Table::default()) {
            eprintln!("cannot remove the test cluster's rules: {e}");
        }
    }
}

/// One Docker test node: the engine with `minimal` on it, a unique node name whose
/// containers (sandboxes too) are removed when `cleanup` drops, the real API server, and an
/// agent on both with a warm pool of [`TEST_POOL`] sandboxes.
pub struct DockerNode {
    pub docker: Arc<DockerRuntime>,
    pub node: String,
    pub api: Arc<Api>,
    pub agent: TestAgent,
    pub cleanup: Cleanup,
}

pub async fn docker_node() -> DockerNode {
    docker_node_with_pool(TEST_POOL).await
}

/// [`docker_node`] with `warm` sandboxes in the pool, returned once the pool is full.
pub async fn docker_node_with_pool(warm: usize) -> DockerNode {
    let docker = docker().await;
    minimal_image(&docker).await;
    let node = unique("node");
    let cleanup = Cleanup(node.clone());
    let api = Api::start().await;
    let agent = TestAgent::start_with_pool(&node, docker.clone(), api.clone(), warm).await;
    agent.wait_pool(warm).await;
    DockerNode { docker, node, api, agent, cleanup }
}

/// The warm pool of the tests' agents: one sandbox, ready before the test begins, so that a
/// test's first pod runs in a warm sandbox; later pods may start cold or warm, and both must
/// give the same results.
pub const TEST_POOL: usize = 1;

/// A running agent for one test node.
pub struct TestAgent {
    pub node: String,
    pub endpoint: String,
    pub shutdown: CancellationToken,
    pub task: tokio::task::JoinHandle<agent::Result<()>>,
}

impl TestAgent {
    pub async fn start(node: &str, runtime: Arc<dyn ContainerRuntime>, api: Arc<Api>) -> TestAgent {
        Self::start_with_pool(node, runtime, api, TEST_POOL).await
    }

    pub async fn start_with_pool(node: &str, runtime: Arc<dyn ContainerRuntime>, api: Arc<Api>, warm: usize) -> TestAgent {
        Self::start_configured(node, runtime, api, warm, |_| {}).await
    }

    /// An agent whose test settings `adjust` changes before it starts.
    pub async fn start_configured(
        node: &str,
        runtime: Arc<dyn ContainerRuntime>,
        api: Arc<Api>,
        warm: usize,
        adjust: impl FnOnce(&mut AgentConfig),
    ) -> TestAgent {
        let mut config = AgentConfig::new(&api.server.url);
        config.node_name = node.to_string();
        config.listen = "127.0.0.1:0".parse().unwrap();
        config.resync_interval = Duration::from_secs(2);
        config.heartbeats.lease_renew_interval = Duration::from_millis(300);
        config.backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(4));
        config.runtime = RuntimeChoice::Docker;
        config.warm_sandboxes = warm;
        config.pod_network = pod_network(node);
        // Tests never resolve a name outside the cluster: the node's DNS forwards nothing.
        config.dns.forward = agent::dns::Forward::None;
        adjust(&mut config);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let shutdown = CancellationToken::new();
        AGENTS.lock().unwrap_or_else(|p| p.into_inner()).push((node.to_string(), shutdown.clone()));
        let run = agent::run_node(config, runtime, api.agent_client(), listener, shutdown.clone());
        let name = node.to_string();
        // Said at once: a test waiting on the agent would otherwise only time out.
        let task = tokio::spawn(async move { run.await.inspect_err(|e| eprintln!("the agent of {name} failed: {e}")) });
        TestAgent { node: node.to_string(), endpoint, shutdown, task }
    }

    /// Waits until the agent's warm pool holds `n` ready sandboxes, as its API says.
    pub async fn wait_pool(&self, n: usize) {
        let url = format!("{}/sandboxes", self.endpoint);
        shepherd_testing::poll(Duration::from_secs(30), &format!("the warm pool of {} at {n}", self.node), || async {
            let status = match reqwest::get(&url).await {
                Ok(response) => response.json::<PoolStatus>().await.ok(),
                Err(_) => None,
            };
            status.as_ref().is_some_and(|s| s.ready == n).then_some(()).ok_or(format!("{status:?}"))
        })
        .await
    }

    /// Stops the agent the way SIGTERM does, and waits for it.
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("the agent did not stop within 10 s")
            .expect("the agent task panicked")
            .expect("the agent failed");
    }
}

pub fn container(name: &str, command: &[&str]) -> Container {
    Container { name: name.into(), image: "minimal".into(), command: command.iter().map(|s| s.to_string()).collect(), ..Default::default() }
}

pub fn spec(containers: Vec<Container>, restart_policy: &str) -> PodSpec {
    PodSpec { containers, restart_policy: restart_policy.into(), termination_grace_period_seconds: Some(1), ..Default::default() }
}
