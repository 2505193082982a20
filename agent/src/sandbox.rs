//! Pod sandboxes, as Kubernetes' pause containers: a tiny container that owns a pod's network
//! namespace (its address from the node's pod network, its localhost) for the pod's containers
//! to join, networked and un-networked here ([`crate::network`]); and the warm pool of started,
//! unclaimed sandboxes that lets a pod skip a sandbox's set-up when it starts.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shared::backoff::Backoff;
use shared::model::Pod;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::hostport::{Bound, HostPorts};
use crate::network::{CniNetwork, PodNetwork};
use crate::retry;
use crate::runtime::{
    ContainerConfig, ContainerInfo, ContainerRuntime, Error, LABEL_CLUSTER, LABEL_NODE, LABEL_SANDBOX, PortMapping, Result, RunState,
};

/// The image sandboxes run: the agent's own `minimal` (busybox), so no registry is needed.
pub const SANDBOX_IMAGE: &str = crate::image::MINIMAL_IMAGE;
/// Sleeps until SIGTERM, then exits at once (as PID 1, the shell only dies of signals it traps).
const SANDBOX_SCRIPT: &str = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done";
/// How long no pod operation must have run before the pool makes its next sandbox.
const QUIET: Duration = Duration::from_millis(300);
/// The pool's retries: 0.5 s, doubling to 30 s.
const POOL_BACKOFF: Backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
/// The name prefix of unclaimed pool sandboxes.
const POOL_PREFIX: &str = "shepherd-pool_";
/// What separates a claimed sandbox's readable part from its pod's uid.
const POD_MARK: &str = "_POD_";

/// An engine-safe version of a name: letters, digits, `-` and `.`; anything else becomes `-`.
pub fn clean(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '-' }).collect()
}

/// The name of a pod's sandbox, `shepherd_<namespace>_<pod>_POD_<uid>`: the record of whose it
/// is (labels cannot change once a pool sandbox is claimed, so the claim renames it), and how
/// the pod's worker finds it again.
pub fn sandbox_name(pod: &Pod) -> String {
    format!("shepherd_{}_{}{POD_MARK}{}", clean(&pod.metadata.namespace), clean(&pod.metadata.name), clean(&pod.metadata.uid))
}

fn pool_name(node: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    format!("{POOL_PREFIX}{}_{:x}{:x}", clean(node), nanos, SEQUENCE.fetch_add(1, Ordering::Relaxed))
}

/// Whose a sandbox is, read from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner<'a> {
    /// Unclaimed, in the warm pool.
    Pool,
    /// Claimed by (or made for) the pod with this uid, as [`clean`] writes it.
    Pod(&'a str),
    /// Not a name the agent gives.
    Unknown,
}

/// `namespace/name` of the pod a claimed sandbox's name names, as [`clean`] wrote them.
fn pod_key(name: &str) -> Option<String> {
    let rest = name.trim_start_matches('/').strip_prefix("shepherd_")?.rsplit_once(POD_MARK)?.0;
    let (namespace, pod) = rest.split_once('_')?;
    Some(format!("{namespace}/{pod}"))
}

pub fn owner(name: &str) -> Owner<'_> {
    let name = name.trim_start_matches('/');
    if name.starts_with(POOL_PREFIX) {
        return Owner::Pool;
    }
    match name.strip_prefix("shepherd_").and_then(|rest| rest.rsplit_once(POD_MARK)) {
        Some((_, uid)) if !uid.is_empty() => Owner::Pod(uid),
        _ => Owner::Unknown,
    }
}

/// A running sandbox: the container id that pod containers join, the pod's address, and the
/// hostname the engine gives the containers that join it (a warm sandbox's is not its pod's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    pub id: String,
    pub ip: String,
    pub hostname: String,
}

/// What `GET /sandboxes` on the agent API answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PoolStatus {
    /// The pool's size (`--warm-sandboxes`).
    pub target: usize,
    /// Started sandboxes waiting to be claimed.
    pub ready: usize,
}

/// A node's sandboxes: how they are made, and the warm pool.
pub struct Sandboxes {
    runtime: Arc<dyn ContainerRuntime>,
    node: String,
    cluster: String,
    network: PodNetwork,
    /// The host ports of CNI sandboxes, held from before each is made until its DEL.
    host_ports: HostPorts,
    /// How many started, unclaimed sandboxes the pool keeps.
    target: usize,
    ready: Mutex<VecDeque<Sandbox>>,
    /// Pod operations in flight; the pool refills only when there are none.
    in_flight: AtomicUsize,
    /// Pod operations ever begun, to see one that began and ended during a quiet wait.
    begun: AtomicU64,
    /// A sandbox was claimed or lost: the pool may be short.
    short: Notify,
}

/// Marks a pod operation in flight while it lives.
pub struct Busy(Arc<Sandboxes>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Sandboxes {
    pub fn new(runtime: Arc<dyn ContainerRuntime>, node: &str, cluster: &str, network: PodNetwork, target: usize) -> Arc<Self> {
        Arc::new(Sandboxes {
            runtime,
            node: node.to_string(),
            cluster: cluster.to_string(),
            network,
            host_ports: HostPorts::default(),
            target,
            ready: Mutex::new(VecDeque::new()),
            in_flight: AtomicUsize::new(0),
            begun: AtomicU64::new(0),
            short: Notify::new(),
        })
    }

    fn ready(&self) -> std::sync::MutexGuard<'_, VecDeque<Sandbox>> {
        self.ready.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// How many warm sandboxes wait to be claimed.
    pub fn available(&self) -> usize {
        self.ready().len()
    }

    pub fn status(&self) -> PoolStatus {
        PoolStatus { target: self.target, ready: self.available() }
    }

    /// The labels every sandbox of this node carries, to list them.
    pub fn selector(&self) -> [(&str, &str); 3] {
        [(LABEL_SANDBOX, "true"), (LABEL_NODE, self.node.as_str()), (LABEL_CLUSTER, self.cluster.as_str())]
    }

    /// A pod operation begins; the pool does not compete with it.
    pub fn busy(self: &Arc<Self>) -> Busy {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.begun.fetch_add(1, Ordering::SeqCst);
        Busy(self.clone())
    }

    /// `cni` or `docker`: which pod network the sandboxes are on.
    pub fn pod_network(&self) -> &'static str {
        self.network.kind()
    }

    /// Whether a pod's container gets its network only from a sandbox (CNI), so that even a
    /// lone one needs a sandbox.
    pub fn every_pod_needs_one(&self) -> bool {
        matches!(self.network, PodNetwork::Cni(_))
    }

    fn cni(&self) -> Option<Arc<CniNetwork>> {
        match &self.network {
            PodNetwork::Cni(cni) => Some(cni.clone()),
            PodNetwork::Docker(_) => None,
        }
    }

    fn config(&self, name: &str, hostname: &str, ports: Vec<PortMapping>) -> ContainerConfig {
        let mut config = ContainerConfig {
            name: name.to_string(),
            hostname: hostname.to_string(),
            image: SANDBOX_IMAGE.to_string(),
            command: vec!["sh".to_string(), "-c".to_string(), SANDBOX_SCRIPT.to_string()],
            labels: self.selector().iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
            ..Default::default()
        };
        match &self.network {
            PodNetwork::Docker(network) => {
                config.network = network.clone();
                config.ports = ports;
            }
            // portmap publishes the ports once the namespace is networked.
            PodNetwork::Cni(_) => config.network_disabled = true,
        }
        config
    }

    /// Networks a started sandbox (CNI), or reads the address the engine gave it.
    async fn attach(&self, info: &ContainerInfo, ports: Vec<PortMapping>) -> Result<String> {
        let Some(cni) = self.cni() else { return Ok(info.ip.clone()) };
        let (id, pid) = (info.id.clone(), info.pid);
        let attached = tokio::task::spawn_blocking(move || cni.attach(&id, pid, &ports)).await;
        match attached {
            Ok(Ok(ip)) => Ok(ip),
            Ok(Err(e)) => Err(Error::Other { action: "set up the pod network", message: e.to_string() }),
            Err(e) => Err(Error::Other { action: "set up the pod network", message: e.to_string() }),
        }
    }

    /// Removes a sandbox: its network first (CNI DEL, then its host ports are let go; a DEL
    /// that fails stays for the sweep to retry, and the ports with it), then the container.
    pub async fn remove(&self, id: &str) -> Result<()> {
        if let Some(cni) = self.cni() {
            let sandbox = id.to_string();
            match tokio::task::spawn_blocking(move || cni.detach(&sandbox)).await {
                Ok(Ok(())) => self.host_ports.release(id),
                Ok(Err(e)) => tracing::warn!(sandbox = %id, error = %e, "cannot take the sandbox's network down; the sweep tries again"),
                Err(e) => tracing::warn!(sandbox = %id, error = %e, "cannot take the sandbox's network down"),
            }
        }
        self.runtime.remove(id).await
    }

    /// The sandbox `info` as the agent uses it, with the address its network gave it; `None`
    /// when it has none (made on another pod network, or lost before it was networked).
    pub fn found(&self, info: &ContainerInfo) -> Option<Sandbox> {
        let ip = match self.cni() {
            Some(cni) => cni.address(&info.id),
            None => Some(info.ip.clone()).filter(|ip| !ip.is_empty()),
        };
        Some(Sandbox { id: info.id.clone(), ip: ip?, hostname: info.hostname.clone() })
    }

    /// Adds back the pod network's node-wide rules if something removed them (a host firewall
    /// reload, an `iptables -F`).
    pub async fn keep_rules(&self) {
        let Some(cni) = self.cni() else { return };
        match tokio::task::spawn_blocking(move || cni.ensure_rules()).await {
            Ok(Ok(0)) => {}
            Ok(Ok(added)) => tracing::warn!(added, "the pod network's node-wide iptables rules were missing; added them again"),
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot check the pod network's node-wide iptables rules"),
            Err(e) => tracing::warn!(error = %e, "cannot check the pod network's node-wide iptables rules"),
        }
    }

    /// Takes down the networks of sandboxes that are gone from the engine (removed behind the
    /// agent's back, or while it was away): their veths, port rules and address leases.
    /// Whichever agent made them: a container id names one container on the engine. The ids
    /// in `present` were just seen on it.
    pub async fn reclaim(&self, present: &HashSet<String>) {
        let Some(cni) = self.cni() else { return };
        let listed = cni.clone();
        let Ok(attached) = tokio::task::spawn_blocking(move || listed.attached()).await else { return };
        for id in attached.into_iter().filter(|id| !present.contains(id)) {
            match self.runtime.inspect(&id).await {
                Ok(None) => {}
                Ok(Some(_)) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot check for sandboxes that are gone");
                    return;
                }
            }
            let cni = cni.clone();
            let sandbox = id.clone();
            match tokio::task::spawn_blocking(move || cni.detach(&sandbox)).await {
                Ok(Ok(())) => {
                    self.host_ports.release(&id);
                    tracing::info!(sandbox = %id, "took down the network of a sandbox that is gone, and freed its address")
                }
                Ok(Err(e)) => tracing::warn!(sandbox = %id, error = %e, "cannot take down the network of a sandbox that is gone"),
                Err(e) => tracing::warn!(sandbox = %id, error = %e, "cannot take down the network of a sandbox that is gone"),
            }
        }
    }

    /// Creates and starts a sandbox called `name` with the hostname `hostname` (empty for the
    /// engine's), publishing `ports` (a pod's host ports), and networks it. One that cannot
    /// start or get its network is removed again.
    pub async fn create(&self, name: &str, hostname: &str, ports: Vec<PortMapping>) -> Result<Sandbox> {
        // Bound before the sandbox exists: a refused pod makes no container whose end would
        // wake its worker ahead of its back-off. Docker's `-p` binds its own.
        let bound = match self.cni() {
            Some(_) => HostPorts::bind(&ports).map_err(|e| Error::Other { action: "set up the pod network", message: e.to_string() })?,
            None => Bound::default(),
        };
        let id = match self.runtime.create(&self.config(name, hostname, ports.clone())).await {
            Ok(id) => id,
            Err(e) if !self.runtime.has_image(SANDBOX_IMAGE).await.unwrap_or(true) => {
                return Err(Error::Other {
                    action: "create a pod sandbox",
                    message: format!("the sandbox image {SANDBOX_IMAGE:?} is missing ({e}); run `shepherd-agent bootstrap-image`"),
                });
            }
            Err(e) => return Err(e),
        };
        let started = match self.runtime.start(&id).await {
            Ok(()) => self.runtime.inspect(&id).await,
            Err(e) => Err(e),
        };
        let failure = match started {
            Ok(Some(info)) if info.state == RunState::Running => match self.attach(&info, ports).await {
                Ok(ip) => {
                    self.host_ports.keep(&id, bound);
                    return Ok(Sandbox { id, ip, hostname: info.hostname });
                }
                Err(e) => e,
            },
            Ok(info) => Error::Container {
                action: "start",
                container: name.to_string(),
                message: format!("the sandbox stopped at once ({:?})", info.map(|i| i.state)),
            },
            Err(e) => e,
        };
        let _ = self.remove(&id).await;
        Err(failure)
    }

    /// Takes a warm sandbox for a pod and renames it `name` (the claim). `None` when the pool
    /// is empty.
    pub async fn claim(&self, name: &str) -> Result<Option<Sandbox>> {
        loop {
            let next = self.ready().pop_front();
            let Some(sandbox) = next else { return Ok(None) };
            self.short.notify_one();
            match self.runtime.rename(&sandbox.id, name).await {
                Ok(()) => return Ok(Some(sandbox)),
                // Gone since it was made: take the next one.
                Err(Error::NotFound(_)) => continue,
                Err(e) => {
                    self.ready().push_front(sandbox);
                    return Err(e);
                }
            }
        }
    }

    /// A pool sandbox stopped or vanished: it leaves the pool and the engine.
    pub async fn lost(&self, id: &str) {
        let was_ready = {
            let mut ready = self.ready();
            let before = ready.len();
            ready.retain(|s| s.id != id);
            ready.len() != before
        };
        if was_ready {
            tracing::info!(sandbox = %id, "a warm sandbox stopped; replacing it");
            if let Err(e) = self.remove(id).await {
                tracing::warn!(error = %e, "cannot remove a stopped warm sandbox");
            }
            self.short.notify_one();
        }
    }

    /// Takes over the sandboxes a previous agent left: the host ports of running pods' ones
    /// are held again; pool ones of this cluster that run with a network, up to the pool size,
    /// are kept, the node's other pool ones (another cluster id's too: a fresh store's pool is
    /// never adopted) removed; then the networks of sandboxes that are gone are taken down.
    async fn adopt(&self) -> Result<()> {
        let node_pool = self.runtime.list(&[(LABEL_SANDBOX, "true"), (LABEL_NODE, self.node.as_str())]).await?;
        let mut removed = 0;
        for info in node_pool.iter().filter(|info| owner(&info.name) == Owner::Pool && info.label(LABEL_CLUSTER) != self.cluster) {
            self.remove(&info.id).await?;
            removed += 1;
        }
        let mut found = self.runtime.list(&self.selector()).await?;
        if let Some(cni) = self.cni() {
            let claimed = found.iter().filter(|info| matches!(owner(&info.name), Owner::Pod(_)) && info.state == RunState::Running);
            for info in claimed {
                for taken in self.host_ports.rebind(&info.id, &cni.published(&info.id)) {
                    // The pod keeps running: its DNAT still takes the port's traffic.
                    let pod = pod_key(&info.name).unwrap_or_else(|| info.name.clone());
                    tracing::warn!(%pod, sandbox = %info.id, "cannot hold the pod's host port again: {taken}");
                }
            }
        }
        found.retain(|info| owner(&info.name) == Owner::Pool);
        found.sort_by_key(|info| info.created_at);
        let mut kept = VecDeque::new();
        for info in found {
            match self.found(&info).filter(|_| info.state == RunState::Running && kept.len() < self.target) {
                Some(sandbox) => kept.push_back(sandbox),
                None => {
                    self.remove(&info.id).await?;
                    removed += 1;
                }
            }
        }
        self.reclaim(&HashSet::new()).await;
        if !kept.is_empty() {
            tracing::info!(sandboxes = kept.len(), "adopted warm sandboxes");
        }
        if removed > 0 {
            tracing::info!(sandboxes = removed, "removed warm sandboxes left on this node that the pool does not adopt");
        }
        *self.ready() = kept;
        Ok(())
    }

    /// Waits until no pod operation has run for [`QUIET`]. `false` on shutdown.
    async fn quiet(&self, shutdown: &CancellationToken) -> bool {
        loop {
            let begun = self.begun.load(Ordering::SeqCst);
            let idle = self.in_flight.load(Ordering::SeqCst) == 0;
            let pause = if idle { QUIET } else { Duration::from_millis(50) };
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = shutdown.cancelled() => return false,
            }
            if idle && self.in_flight.load(Ordering::SeqCst) == 0 && self.begun.load(Ordering::SeqCst) == begun {
                return true;
            }
        }
    }

    /// Adopts the pool a previous agent left, then keeps it at its size: one sandbox at a
    /// time, only while no pod operation runs. Until `shutdown`; the pool stays for the next
    /// agent.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        if retry::until_shutdown(POOL_BACKOFF, &shutdown, "cannot adopt warm sandboxes", || self.adopt()).await.is_none() {
            return;
        }
        loop {
            if self.available() >= self.target {
                tokio::select! {
                    _ = self.short.notified() => continue,
                    _ = shutdown.cancelled() => return,
                }
            }
            // Each try waits for quiet first; `None` inside: shutdown came meanwhile.
            let made = retry::until_shutdown(POOL_BACKOFF, &shutdown, "cannot make a warm sandbox", || async {
                match self.quiet(&shutdown).await {
                    true => self.create(&pool_name(&self.node), "", Vec::new()).await.map(Some),
                    false => Ok(None),
                }
            })
            .await;
            match made {
                Some(Some(sandbox)) => self.ready().push_back(sandbox),
                Some(None) | None => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use shared::model::ObjectMeta;

    use super::*;
    use crate::runtime::SimulatedRuntime;

    /// The simulated runtime's own network, as Docker's bridge would be.
    fn docker_network() -> PodNetwork {
        PodNetwork::Docker(String::new())
    }

    fn pod(namespace: &str, name: &str, uid: &str) -> Pod {
        Pod {
            metadata: ObjectMeta { name: name.into(), namespace: namespace.into(), uid: uid.into(), ..Default::default() },
            ..Default::default()
        }
    }

    #[test]
    fn a_sandbox_name_says_whose_it_is() {
        let name = sandbox_name(&pod("pool", "web_1", "1234-abcd"));
        assert_eq!(name, "shepherd_pool_web-1_POD_1234-abcd");
        assert_eq!(owner(&name), Owner::Pod("1234-abcd"));
        assert_eq!(owner(&format!("/{name}")), Owner::Pod("1234-abcd"), "Docker's leading slash");
        let pooled = pool_name("node_a");
        assert!(pooled.starts_with("shepherd-pool_node-a_"), "{pooled}");
        assert_eq!(owner(&pooled), Owner::Pool);
        assert_ne!(pool_name("n"), pool_name("n"), "pool names are unique");
        assert_eq!(owner("shepherd_default_web_web_1234abcd"), Owner::Unknown);
        assert_eq!(owner("shepherd_x_y_POD_"), Owner::Unknown);
        assert_eq!(owner("something-else"), Owner::Unknown);
        assert_eq!(pod_key(&format!("/{name}")).as_deref(), Some("pool/web-1"));
        assert_eq!(pod_key(&pooled), None);
    }

    // On the paused clock: the pool's quiet waits, and these looks at it, take no real time.
    #[tokio::test(start_paused = true)]
    async fn the_pool_fills_then_a_claim_renames_and_the_pool_refills() {
        let runtime: Arc<dyn ContainerRuntime> = Arc::new(SimulatedRuntime::new(Duration::ZERO));
        let sandboxes = Sandboxes::new(runtime.clone(), "n1", "c1", docker_network(), 2);
        let shutdown = CancellationToken::new();
        let pool = tokio::spawn(sandboxes.clone().run(shutdown.clone()));
        let filled = |n: usize| {
            let sandboxes = sandboxes.clone();
            async move {
                shepherd_testing::poll(Duration::from_secs(10), &format!("a pool of {n} warm sandboxes"), || {
                    let available = sandboxes.available();
                    async move { if available == n { Ok(()) } else { Err(format!("{available} available")) } }
                })
                .await
            }
        };
        filled(2).await;
        let busy = sandboxes.busy();
        let claimed = sandboxes.claim("shepherd_default_web_POD_u1").await.unwrap().expect("a warm sandbox");
        assert_eq!(runtime.inspect(&claimed.id).await.unwrap().unwrap().name, "shepherd_default_web_POD_u1");
        // Not while a pod operation runs.
        tokio::time::sleep(QUIET * 2).await;
        assert_eq!(sandboxes.available(), 1);
        drop(busy);
        filled(2).await;
        let all = runtime.list(&sandboxes.selector()).await.unwrap();
        assert_eq!(all.len(), 3);
        assert!(all.iter().all(|s| s.state == RunState::Running));
        // A lost pool sandbox is removed and replaced.
        let first = sandboxes.ready().front().cloned().unwrap();
        sandboxes.lost(&first.id).await;
        assert!(runtime.inspect(&first.id).await.unwrap().is_none());
        filled(2).await;
        shutdown.cancel();
        pool.await.unwrap();
    }

    #[tokio::test]
    async fn adoption_keeps_running_pool_sandboxes_up_to_the_size_removes_other_clusters_and_leaves_claimed_ones() {
        let runtime: Arc<dyn ContainerRuntime> = Arc::new(SimulatedRuntime::new(Duration::ZERO));
        let before = Sandboxes::new(runtime.clone(), "n1", "c1", docker_network(), 3);
        for _ in 0..3 {
            let sandbox = before.create(&pool_name("n1"), "", Vec::new()).await.unwrap();
            before.ready().push_back(sandbox);
        }
        let claimed = before.claim("shepherd_default_web_POD_u1").await.unwrap().unwrap();
        let stopped = before.ready().pop_front().unwrap();
        runtime.stop(&stopped.id, Duration::ZERO).await.unwrap();
        let other_node = Sandboxes::new(runtime.clone(), "n2", "c1", docker_network(), 1);
        let theirs = other_node.create(&pool_name("n2"), "", Vec::new()).await.unwrap();
        let other_cluster = Sandboxes::new(runtime.clone(), "n1", "c0", docker_network(), 1);
        let stale = other_cluster.create(&pool_name("n1"), "", Vec::new()).await.unwrap();

        let after = Sandboxes::new(runtime.clone(), "n1", "c1", docker_network(), 1);
        after.adopt().await.unwrap();
        assert_eq!(after.available(), 1);
        assert!(runtime.inspect(&stopped.id).await.unwrap().is_none(), "a stopped pool sandbox is removed");
        assert!(runtime.inspect(&claimed.id).await.unwrap().is_some(), "a claimed sandbox is its pod's business");
        assert!(runtime.inspect(&theirs.id).await.unwrap().is_some(), "another node's pool is left alone");
        assert!(runtime.inspect(&stale.id).await.unwrap().is_none(), "this node's pool of another cluster id is removed");
        assert_eq!(runtime.list(&after.selector()).await.unwrap().len(), 2);
    }
}
