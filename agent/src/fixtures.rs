//! What the agent's unit tests share: the one fake API server ([`RecordingApi`]), which takes
//! every call and records what the agent wrote; the simulated runtime with faults a test
//! switches on ([`FaultyRuntime`]); and a node context on them. Tests that can reach a real
//! server use `shepherd_testing::TestServer` instead.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use shared::api::{ApiErrorStatus, Heartbeat, List};
use shared::model::{
    Container, ContainerPort, EnvVar, Event, Lease, Node, ObjectMeta, Pod, PodSpec, PodStatus, ResourceRequirements, Service,
};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::{ApiClient, Error as ClientError, Result as ClientResult, WatchStream};
use crate::pod::context::NodeContext;
use crate::runtime::{
    ContainerConfig, ContainerInfo, ContainerRuntime, Error as RuntimeError, LABEL_SANDBOX, ProbeAction, ProbeOutcome,
    Result as RuntimeResult, RuntimeEvent, SimulatedRuntime,
};

/// What the server answers `code` with.
pub fn answer(code: u16, reason: &str, message: &str) -> ClientError {
    let status = ApiErrorStatus { code, reason: reason.into(), message: message.into(), details: vec![] };
    ClientError::Api { action: "confirm".into(), status }
}

/// An API server that takes every call and records the statuses, deletion confirmations and
/// events the agent sent. The first `failures` confirmations fail, then it answers `then`
/// (None: success).
pub struct RecordingApi {
    /// The uid of each pod whose deletion was confirmed, in order.
    pub confirmed: Mutex<Vec<String>>,
    /// Every status the agent wrote.
    pub statuses: Mutex<Vec<PodStatus>>,
    failures: AtomicUsize,
    then: fn() -> Option<ClientError>,
    /// Every event, and when it came.
    events: Mutex<Vec<(Instant, Event)>>,
    /// Cancelled at the 50th event: a worker that retries without pause stops there.
    pub too_many_events: CancellationToken,
    /// Bumped by every status and confirmation, for a test to wait on what the agent did.
    calls: watch::Sender<usize>,
    /// The ConfigMaps the server holds, by name (namespace `default`).
    pub config_maps: Mutex<HashMap<String, shared::model::ConfigMap>>,
    /// The Secrets the server holds, by name (namespace `default`).
    pub secrets: Mutex<HashMap<String, shared::model::Secret>>,
}

impl Default for RecordingApi {
    fn default() -> Self {
        RecordingApi::confirming(0, || None)
    }
}

impl RecordingApi {
    pub fn confirming(failures: usize, then: fn() -> Option<ClientError>) -> Self {
        RecordingApi {
            confirmed: Mutex::new(vec![]),
            statuses: Mutex::new(vec![]),
            failures: AtomicUsize::new(failures),
            then,
            events: Mutex::new(vec![]),
            too_many_events: CancellationToken::new(),
            calls: watch::Sender::new(0),
            config_maps: Mutex::new(HashMap::new()),
            secrets: Mutex::new(HashMap::new()),
        }
    }

    /// The status the agent last wrote.
    pub fn last_status(&self) -> Option<PodStatus> {
        self.statuses.lock().unwrap().last().cloned()
    }

    fn called(&self) {
        self.calls.send_modify(|n| *n += 1);
    }

    /// Waits until `check` holds, looking again after each call the agent makes (its last
    /// one, such as a confirmation, is also its last step: a test runs on one thread).
    pub async fn until(&self, what: &str, check: impl Fn() -> bool) {
        let mut calls = self.calls.subscribe();
        while !check() {
            let called = tokio::time::timeout(Duration::from_secs(10), calls.changed()).await;
            assert!(called.is_ok(), "{what} did not happen within 10 s");
        }
    }

    /// When each event of `reason` came, counted from `since`.
    pub fn times_of(&self, reason: &str, since: Instant) -> Vec<Duration> {
        self.events.lock().unwrap().iter().filter(|(_, e)| e.reason == reason).map(|(at, _)| *at - since).collect()
    }

    /// The message of each event of `reason`, in order.
    pub fn messages_of(&self, reason: &str) -> Vec<String> {
        self.events.lock().unwrap().iter().filter(|(_, e)| e.reason == reason).map(|(_, e)| e.message.clone()).collect()
    }
}

#[async_trait]
impl ApiClient for RecordingApi {
    async fn cluster_id(&self) -> ClientResult<String> {
        Ok("c1".into())
    }
    async fn register_node(&self, node: &Node) -> ClientResult<Node> {
        Ok(node.clone())
    }
    async fn renew_lease(&self, _: &str) -> ClientResult<Lease> {
        Ok(Lease::default())
    }
    async fn heartbeat(&self, _: &str, _: &Heartbeat) -> ClientResult<()> {
        Ok(())
    }
    async fn list_pods(&self, _: &str) -> ClientResult<List<Pod>> {
        Ok(List::whole("PodList", 0, vec![]))
    }
    async fn watch_pods(&self, _: &str, _: u64) -> ClientResult<WatchStream> {
        Ok(Box::pin(futures::stream::empty()))
    }
    async fn update_pod_status(&self, pod: &Pod) -> ClientResult<Pod> {
        self.statuses.lock().unwrap().push(pod.status.clone());
        self.called();
        Ok(pod.clone())
    }
    async fn delete_pod_now(&self, pod: &Pod) -> ClientResult<()> {
        self.confirmed.lock().unwrap().push(pod.metadata.uid.clone());
        let failed = self.failures.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        self.called();
        if failed {
            return Err(answer(503, "Unavailable", "busy"));
        }
        (self.then)().map_or(Ok(()), Err)
    }
    async fn config_map(&self, _namespace: &str, name: &str) -> ClientResult<Option<shared::model::ConfigMap>> {
        Ok(self.config_maps.lock().unwrap().get(name).cloned())
    }

    async fn secret(&self, _namespace: &str, name: &str) -> ClientResult<Option<shared::model::Secret>> {
        Ok(self.secrets.lock().unwrap().get(name).cloned())
    }

    async fn create_event(&self, event: &Event) -> ClientResult<()> {
        let mut events = self.events.lock().unwrap();
        events.push((Instant::now(), event.clone()));
        if events.len() >= 50 {
            self.too_many_events.cancel();
        }
        Ok(())
    }
    async fn list_services(&self) -> ClientResult<List<Service>> {
        Ok(List::whole("ServiceList", 0, vec![]))
    }
    async fn watch_services(&self, _: u64) -> ClientResult<WatchStream> {
        Ok(Box::pin(futures::stream::empty()))
    }
}

/// The simulated runtime (containers start at once), with the faults a test switches on.
/// Every time the agent opens the event stream is recorded.
pub struct FaultyRuntime {
    pub inner: SimulatedRuntime,
    /// Pod sandboxes die as they start: the agent removes each again, and the engine reports
    /// its end (`die`, `destroy`) as Docker would.
    pub sandboxes_die: bool,
    /// The event stream fails at once, as Docker's does while the daemon is down.
    pub events_fail: bool,
    pub events_opened: Mutex<Vec<Instant>>,
}

impl Default for FaultyRuntime {
    fn default() -> Self {
        FaultyRuntime {
            inner: SimulatedRuntime::new(Duration::ZERO),
            sandboxes_die: false,
            events_fail: false,
            events_opened: Mutex::new(vec![]),
        }
    }
}

#[async_trait]
impl ContainerRuntime for FaultyRuntime {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
    async fn version(&self) -> RuntimeResult<String> {
        self.inner.version().await
    }
    async fn has_image(&self, image: &str) -> RuntimeResult<bool> {
        self.inner.has_image(image).await
    }
    async fn pull_image(&self, image: &str) -> RuntimeResult<()> {
        self.inner.pull_image(image).await
    }
    async fn create(&self, config: &ContainerConfig) -> RuntimeResult<String> {
        self.inner.create(config).await
    }
    async fn start(&self, id: &str) -> RuntimeResult<()> {
        self.inner.start(id).await?;
        if self.sandboxes_die && self.inner.inspect(id).await?.is_some_and(|info| info.labels.contains_key(LABEL_SANDBOX)) {
            self.inner.stop(id, Duration::ZERO).await?;
        }
        Ok(())
    }
    async fn rename(&self, id: &str, name: &str) -> RuntimeResult<()> {
        self.inner.rename(id, name).await
    }
    async fn stop(&self, id: &str, grace: Duration) -> RuntimeResult<()> {
        self.inner.stop(id, grace).await
    }
    async fn remove(&self, id: &str) -> RuntimeResult<()> {
        self.inner.remove(id).await
    }
    async fn inspect(&self, id: &str) -> RuntimeResult<Option<ContainerInfo>> {
        self.inner.inspect(id).await
    }
    async fn list(&self, labels: &[(&str, &str)]) -> RuntimeResult<Vec<ContainerInfo>> {
        self.inner.list(labels).await
    }
    async fn probe(&self, id: &str, action: &ProbeAction, timeout: Duration) -> RuntimeResult<ProbeOutcome> {
        self.inner.probe(id, action, timeout).await
    }
    async fn set_hostname(&self, id: &str, hostname: &str) -> RuntimeResult<()> {
        self.inner.set_hostname(id, hostname).await
    }
    async fn connect_inside(&self, id: &str, port: u16) -> RuntimeResult<tokio::net::TcpStream> {
        self.inner.connect_inside(id, port).await
    }
    async fn usage(&self, id: &str) -> RuntimeResult<crate::runtime::Usage> {
        self.inner.usage(id).await
    }
    fn logs(&self, id: &str, request: &crate::runtime::LogRequest) -> BoxStream<'static, RuntimeResult<Bytes>> {
        self.inner.logs(id, request)
    }
    async fn exec(&self, id: &str, options: &shared::remote_command::Options) -> RuntimeResult<crate::runtime::Attached> {
        self.inner.exec(id, options).await
    }
    async fn attach(&self, id: &str, options: &shared::remote_command::Options) -> RuntimeResult<crate::runtime::Attached> {
        self.inner.attach(id, options).await
    }
    fn events(&self, labels: &[(&str, &str)]) -> BoxStream<'static, RuntimeResult<RuntimeEvent>> {
        self.events_opened.lock().unwrap().push(Instant::now());
        if self.events_fail {
            return futures::stream::once(async { Err(RuntimeError::Unreachable("the daemon is down".into())) }).boxed();
        }
        self.inner.events(labels)
    }
}

/// Node `n1` of cluster `c1` on `runtime`, talking to `api`, with the default back-off, no
/// sandboxes, no Services and no DNS.
pub fn context(api: Arc<RecordingApi>, runtime: Arc<dyn ContainerRuntime>) -> NodeContext {
    NodeContext {
        node_name: "n1".into(),
        cluster: "c1".into(),
        address: "127.0.0.1".into(),
        network: "shepherd".into(),
        runtime,
        api: api.clone(),
        events: api,
        backoff: crate::DEFAULT_BACKOFF,
        sandboxes: None,
        services: crate::services::Services::none(),
        resolv_confs: None,
        volumes: crate::pod::volumes::PodVolumes::new(&std::env::temp_dir().join("shepherd-agent-unit-tests"), "n1"),
    }
}

/// [`context`] on a simulated runtime whose containers start at once.
pub fn ctx() -> NodeContext {
    context(Arc::new(RecordingApi::default()), Arc::new(SimulatedRuntime::new(Duration::ZERO)))
}

pub fn pod() -> Pod {
    Pod {
        metadata: ObjectMeta { name: "web_1".into(), namespace: "default".into(), uid: "1234-abcd-5678".into(), ..Default::default() },
        spec: PodSpec {
            containers: vec![Container {
                name: "web".into(),
                image: "minimal".into(),
                command: vec!["sh".into()],
                args: vec!["-c".into(), "sleep 1".into()],
                env: vec![EnvVar::literal("A", "1")],
                ports: vec![ContainerPort { container_port: 80, host_port: Some(8080), ..Default::default() }],
                resources: ResourceRequirements { memory: 64 << 20, cpu: 250 },
                ..Default::default()
            }],
            termination_grace_period_seconds: Some(3),
            ..Default::default()
        },
        ..Default::default()
    }
}
