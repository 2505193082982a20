//! Test support: the real Docker engine (failing loudly when it is missing), an in-memory
//! API server behind the agent's `ApiClient` trait, and a running agent per test, on the CNI
//! pod network (failing loudly when its plugins are missing) with a state directory per node.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::path::PathBuf;

use agent::client::{ApiClient, Error as ClientError, WatchStream};
use agent::network::{Choice, CniNetwork, PodNetworkConfig, Subnet};
use agent::runtime::{ContainerRuntime, DockerRuntime, LABEL_NODE};
use agent::sandbox::PoolStatus;
use agent::{AgentConfig, RuntimeChoice};
use async_trait::async_trait;
use futures::StreamExt;
use shared::api::{ApiErrorStatus, Heartbeat, List, WatchEvent, WatchEventType};
use shared::backoff::Backoff;
use shared::model::{Container, Event, Lease, LeaseSpec, Node, Object, ObjectMeta, Pod, PodSpec};
use tokio::sync::broadcast;
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
/// address leases, kept namespaces) and removes its state directory.
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

#[derive(Default)]
struct Store {
    rv: u64,
    pods: BTreeMap<String, Pod>,
    history: Vec<WatchEvent>,
    events: Vec<Event>,
    nodes: BTreeMap<String, Node>,
    renewals: u64,
    heartbeats: u64,
}

/// An in-memory API server: pods, events, nodes, and a watch with full history.
pub struct FakeApi {
    /// Each fake server is a cluster of its own.
    pub cluster: String,
    store: Mutex<Store>,
    live: broadcast::Sender<WatchEvent>,
    /// While set, every call fails as if the server were down.
    pub down: std::sync::atomic::AtomicBool,
}

impl FakeApi {
    pub fn new() -> Arc<Self> {
        Arc::new(FakeApi {
            cluster: format!("cluster-{}", uuid::Uuid::new_v4().simple()),
            store: Mutex::new(Store::default()),
            live: broadcast::channel(4096).0,
            down: Default::default(),
        })
    }

    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap()
    }

    fn record(store: &mut Store, live: &broadcast::Sender<WatchEvent>, type_: WatchEventType, pod: &Pod) {
        let event = WatchEvent { type_, resource_version: store.rv, object: Some(Object::Pod(pod.clone())) };
        store.history.push(event.clone());
        let _ = live.send(event);
    }

    /// Creates a pod already bound to `node`.
    pub fn add_pod(&self, node: &str, name: &str, spec: PodSpec) -> Pod {
        let mut store = self.store();
        store.rv += 1;
        let mut pod = Pod {
            kind: "Pod".into(),
            metadata: ObjectMeta {
                name: name.into(),
                namespace: "default".into(),
                uid: uuid::Uuid::new_v4().to_string(),
                resource_version: store.rv,
                ..Default::default()
            },
            spec,
            status: Default::default(),
        };
        pod.spec.node_name = node.into();
        store.pods.insert(pod.metadata.uid.clone(), pod.clone());
        Self::record(&mut store, &self.live, WatchEventType::Added, &pod);
        pod
    }

    pub fn delete_pod(&self, uid: &str) {
        let mut store = self.store();
        store.rv += 1;
        let mut pod = store.pods.remove(uid).expect("no such pod");
        pod.metadata.resource_version = store.rv;
        Self::record(&mut store, &self.live, WatchEventType::Deleted, &pod);
    }

    /// Marks a pod Terminating with `grace` seconds, as a DELETE of a bound pod does: watchers
    /// see MODIFIED, and the pod stays until its agent confirms.
    pub fn terminate_pod(&self, uid: &str, grace: i64) -> Pod {
        let mut store = self.store();
        store.rv += 1;
        let rv = store.rv;
        let pod = store.pods.get_mut(uid).expect("no such pod");
        pod.metadata.deletion_timestamp = Some(chrono::Utc::now());
        pod.metadata.deletion_grace_period_seconds = Some(grace);
        pod.metadata.resource_version = rv;
        let pod = pod.clone();
        Self::record(&mut store, &self.live, WatchEventType::Modified, &pod);
        pod
    }

    /// Whether the store still has the pod.
    pub fn has_pod(&self, uid: &str) -> bool {
        self.store().pods.contains_key(uid)
    }

    /// Removes a pod without telling any watcher, as if the DELETED event were lost.
    pub fn forget_pod(&self, uid: &str) {
        let mut store = self.store();
        store.rv += 1;
        store.pods.remove(uid).expect("no such pod");
    }

    pub fn pod(&self, uid: &str) -> Pod {
        self.store().pods.get(uid).cloned().expect("no such pod")
    }

    pub fn events_for(&self, pod: &str) -> Vec<Event> {
        self.store().events.iter().filter(|e| e.involved_object.name == pod).cloned().collect()
    }

    pub fn node(&self, name: &str) -> Option<Node> {
        self.store().nodes.get(name).cloned()
    }

    pub fn heartbeats(&self) -> u64 {
        self.store().heartbeats
    }

    pub fn renewals(&self) -> u64 {
        self.store().renewals
    }

    fn check_up(&self, action: &str) -> Result<(), ClientError> {
        if self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(ClientError::Unreachable { server: "fake".into(), action: action.into(), cause: "down".into() });
        }
        Ok(())
    }

    /// Every version of the pod the server has stored, oldest first.
    pub fn history(&self, uid: &str) -> Vec<Pod> {
        self.store()
            .history
            .iter()
            .filter_map(|e| match &e.object {
                Some(Object::Pod(p)) if p.metadata.uid == uid => Some(p.clone()),
                _ => None,
            })
            .collect()
    }

    /// Waits until some stored version of the pod, at or after position `from` in its
    /// history, satisfies `check` (so a state that lasted a moment is not missed). Returns
    /// that version's position and the pod.
    pub async fn wait_for_version(
        &self,
        uid: &str,
        from: usize,
        what: &str,
        timeout: Duration,
        check: impl Fn(&Pod) -> bool,
    ) -> (usize, Pod) {
        let began = Instant::now();
        loop {
            let history = self.history(uid);
            if let Some((i, pod)) = history.iter().enumerate().skip(from).find(|(_, p)| check(p)) {
                return (i, pod.clone());
            }
            if began.elapsed() > timeout {
                panic!("pod {uid} never reached {what} within {timeout:?}; last status: {:#?}", history.last().map(|p| &p.status));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Polls the pod until `check` holds, or fails with the last state seen.
    pub async fn wait_for(&self, uid: &str, what: &str, timeout: Duration, check: impl Fn(&Pod) -> bool) -> Pod {
        let began = Instant::now();
        loop {
            let pod = self.pod(uid);
            if check(&pod) {
                return pod;
            }
            if began.elapsed() > timeout {
                panic!("pod {} did not reach {what} within {timeout:?}; last status: {:#?}", pod.metadata.name, pod.status);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// What a real server answers `code` with.
fn refused(action: &str, code: u16, message: &str) -> ClientError {
    ClientError::Api { action: action.into(), status: ApiErrorStatus { code, message: message.into(), ..ApiErrorStatus::default() } }
}

#[async_trait]
impl ApiClient for FakeApi {
    async fn cluster_id(&self) -> Result<String, ClientError> {
        self.check_up("info")?;
        Ok(self.cluster.clone())
    }

    async fn register_node(&self, node: &Node) -> Result<Node, ClientError> {
        self.check_up("register")?;
        self.store().nodes.insert(node.metadata.name.clone(), node.clone());
        Ok(node.clone())
    }

    async fn renew_lease(&self, node: &str) -> Result<Lease, ClientError> {
        self.check_up("renew")?;
        self.store().renewals += 1;
        let spec = LeaseSpec { holder_identity: node.into(), lease_duration_seconds: 40, renew_time: Some(chrono::Utc::now()) };
        Ok(Lease { kind: "Lease".into(), metadata: ObjectMeta::named("", node), spec })
    }

    async fn heartbeat(&self, _node: &str, _heartbeat: &Heartbeat) -> Result<(), ClientError> {
        self.check_up("heartbeat")?;
        self.store().heartbeats += 1;
        Ok(())
    }

    async fn list_pods(&self, node: &str) -> Result<List<Pod>, ClientError> {
        self.check_up("list")?;
        let store = self.store();
        let items = store.pods.values().filter(|p| p.spec.node_name == node).cloned().collect();
        Ok(List { kind: "PodList".into(), resource_version: store.rv, items })
    }

    async fn watch_pods(&self, node: &str, resource_version: u64) -> Result<WatchStream, ClientError> {
        self.check_up("watch")?;
        let live = self.live.subscribe();
        let (replay, last) = {
            let store = self.store();
            let replay: Vec<WatchEvent> = store.history.iter().filter(|e| e.resource_version > resource_version).cloned().collect();
            (replay, store.rv)
        };
        let node = node.to_string();
        let live = tokio_stream::wrappers::BroadcastStream::new(live)
            .filter_map(move |e| futures::future::ready(e.ok().filter(|e| e.resource_version > last)));
        let on_node = move |e: &WatchEvent| matches!(&e.object, Some(Object::Pod(p)) if p.spec.node_name == node);
        Ok(futures::stream::iter(replay).chain(live).filter(move |e| futures::future::ready(on_node(e))).map(Ok).boxed())
    }

    async fn update_pod_status(&self, pod: &Pod) -> Result<Pod, ClientError> {
        self.check_up("update status")?;
        let mut store = self.store();
        store.rv += 1;
        let rv = store.rv;
        let stored = store.pods.get_mut(&pod.metadata.uid).ok_or_else(|| refused("update status", 404, &pod.metadata.name))?;
        stored.status = pod.status.clone();
        stored.metadata.resource_version = rv;
        let stored = stored.clone();
        Self::record(&mut store, &self.live, WatchEventType::Modified, &stored);
        Ok(stored)
    }

    async fn delete_pod_now(&self, pod: &Pod) -> Result<(), ClientError> {
        self.check_up("delete")?;
        let stored = {
            let store = self.store();
            let found =
                store.pods.values().find(|p| p.metadata.namespace == pod.metadata.namespace && p.metadata.name == pod.metadata.name);
            found.map(|p| p.metadata.uid.clone())
        };
        match stored {
            None => Err(refused("delete", 404, &pod.metadata.name)),
            Some(uid) if uid != pod.metadata.uid => Err(refused("delete", 409, "uid differs")),
            Some(uid) => {
                self.delete_pod(&uid);
                Ok(())
            }
        }
    }

    async fn create_event(&self, event: &Event) -> Result<(), ClientError> {
        self.check_up("event")?;
        self.store().events.push(event.clone());
        Ok(())
    }
}

/// One Docker test node: the engine with `minimal` on it, a unique node name whose
/// containers (sandboxes too) are removed when `cleanup` drops, a fake API server, and an
/// agent on both with a warm pool of [`TEST_POOL`] sandboxes.
pub struct DockerNode {
    pub docker: Arc<DockerRuntime>,
    pub node: String,
    pub api: Arc<FakeApi>,
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
    let api = FakeApi::new();
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
    pub async fn start(node: &str, runtime: Arc<dyn ContainerRuntime>, api: Arc<FakeApi>) -> TestAgent {
        Self::start_with_pool(node, runtime, api, TEST_POOL).await
    }

    pub async fn start_with_pool(node: &str, runtime: Arc<dyn ContainerRuntime>, api: Arc<FakeApi>, warm: usize) -> TestAgent {
        Self::start_configured(node, runtime, api, warm, |_| {}).await
    }

    /// An agent whose test settings `adjust` changes before it starts.
    pub async fn start_configured(
        node: &str,
        runtime: Arc<dyn ContainerRuntime>,
        api: Arc<FakeApi>,
        warm: usize,
        adjust: impl FnOnce(&mut AgentConfig),
    ) -> TestAgent {
        let mut config = AgentConfig::new("http://fake");
        config.node_name = node.to_string();
        config.listen = "127.0.0.1:0".parse().unwrap();
        config.resync_interval = Duration::from_secs(2);
        config.heartbeats.lease_renew_interval = Duration::from_millis(300);
        config.backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(4));
        config.runtime = RuntimeChoice::Docker;
        config.warm_sandboxes = warm;
        config.pod_network = pod_network(node);
        adjust(&mut config);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let shutdown = CancellationToken::new();
        AGENTS.lock().unwrap_or_else(|p| p.into_inner()).push((node.to_string(), shutdown.clone()));
        let task = tokio::spawn(agent::run_node(config, runtime, api, listener, shutdown.clone()));
        TestAgent { node: node.to_string(), endpoint, shutdown, task }
    }

    /// Waits until the agent's warm pool holds `n` ready sandboxes, as its API says.
    pub async fn wait_pool(&self, n: usize) {
        let began = Instant::now();
        loop {
            let status = match reqwest::get(format!("{}/sandboxes", self.endpoint)).await {
                Ok(response) => response.json::<PoolStatus>().await.ok(),
                Err(_) => None,
            };
            if status.is_some_and(|s| s.ready == n) {
                return;
            }
            assert!(began.elapsed() < Duration::from_secs(30), "the warm pool of {} is not at {n}: {status:?}", self.node);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
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
