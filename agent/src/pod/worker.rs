//! One pod's worker: the level-triggered reconcile that makes the runtime match a pod spec
//! (sandbox, image, create, start, restart with back-off, terminal phases), with the
//! in-memory state it keeps between passes (restart counts, failing pulls and sandboxes).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use shared::model::{
    CONTAINER_CREATING, Container, ContainerState, ContainerStatus, Pod, PodStatus, Probe, PullPolicy, RestartPolicy, event_types,
};
// Tokio's clock, which tests can pause: back-offs are timing logic.
use tokio::time::Instant;

use super::config::{container_config, port_mappings};
use super::config_volumes;
use super::context::NodeContext;
use super::hosts;
use super::prober::{Check, ContainerProbes, Observer, Report};
use super::status::{Step, pod_status, terminated, waiting};
use super::termination::{grace_period, terminate};
use super::volumes::Error as VolumeError;
use super::{Error, Result};
use super::{env, service_env};
use crate::runtime::{ContainerInfo, LABEL_CONTAINER, LABEL_SANDBOX_ID, PortMapping, ProbeAction, RunState};
use crate::sandbox::{Sandbox, sandbox_name};

/// A container's restart bookkeeping: how many times the agent started it again, and the
/// delay before the next restart.
#[derive(Debug, Clone, Copy)]
struct Restarts {
    count: u32,
    delay: Duration,
}

/// The reason of a container held back by a missing ConfigMap, Secret or key.
pub const CREATE_CONTAINER_CONFIG_ERROR: &str = "CreateContainerConfigError";

/// The reason of a container whose image reference Docker cannot read.
const INVALID_IMAGE_NAME: &str = "InvalidImageName";

/// A failing image pull or pod sandbox: retry only once `until` has passed.
#[derive(Debug, Clone)]
struct Failing {
    delay: Duration,
    until: Instant,
    message: String,
}

/// Wakes the pod's worker for another pass (a probe's result changed).
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// The in-memory state of one pod's worker; everything else is read again on every pass.
pub struct PodWorker {
    ctx: Arc<NodeContext>,
    wake: Wake,
    /// The probers of each running container that has probes, by container name.
    probes: HashMap<String, ContainerProbes>,
    restarts: HashMap<String, Restarts>,
    pulls: HashMap<String, Failing>,
    /// The pod's sandbox could not be made: none is tried again before its back-off is over,
    /// whatever wakes the worker sooner (the end of the sandbox the failure removed).
    sandbox_failing: Option<Failing>,
    last_reported: Option<PodStatus>,
    /// The spec of the last pass.
    last_spec: Option<shared::model::PodSpec>,
    seeded: bool,
    /// The pod's running sandbox, as this pass found or made it.
    sandbox: Option<Sandbox>,
    /// How containers ended that were removed because their sandbox went away: the
    /// `last_state` of the ones created in their place.
    replaced: HashMap<String, ContainerState>,
    /// Containers this worker removed to replace them (their restart is already counted).
    /// A container that ended and stays as the previous instance is not one: its
    /// replacement counts the restart.
    removed: HashSet<String>,
    /// The previous instance of each container (it ended before the current one was made),
    /// kept for `logs --previous` until the next restart.
    previous: HashMap<String, String>,
    /// Containers stopped for failing a liveness or startup probe: restarted under any
    /// policy but Never, whatever their exit code, as the kubelet does.
    probe_killed: HashSet<String>,
    /// Why this pass could not write the pod's ConfigMap or Secret volumes: no new container
    /// starts until it can.
    config_volumes_failing: Option<String>,
}

impl PodWorker {
    pub fn new(ctx: Arc<NodeContext>, wake: Wake) -> Self {
        PodWorker {
            ctx,
            wake,
            probes: HashMap::new(),
            restarts: HashMap::new(),
            pulls: HashMap::new(),
            sandbox_failing: None,
            last_reported: None,
            last_spec: None,
            seeded: false,
            sandbox: None,
            replaced: HashMap::new(),
            removed: HashSet::new(),
            previous: HashMap::new(),
            probe_killed: HashSet::new(),
            config_volumes_failing: None,
        }
    }

    /// Continues from what the server knows (after an agent restart): restart counts and the
    /// status last written.
    fn seed(&mut self, pod: &Pod) {
        if self.seeded {
            return;
        }
        self.seeded = true;
        for status in &pod.status.container_statuses {
            self.restarts.insert(status.name.clone(), Restarts { count: status.restart_count, delay: self.ctx.backoff.base });
        }
        self.last_reported = Some(pod.status.clone());
    }

    /// Whether `pod` is what this worker last reconciled plus the status it wrote itself:
    /// the watch echoing our own write, which needs no new pass.
    pub fn is_echo(&self, pod: &Pod) -> bool {
        self.last_spec.as_ref() == Some(&pod.spec) && self.last_reported.as_ref() == Some(&pod.status)
    }

    /// Makes the runtime match the pod and reports its status. Returns when to look again
    /// (`None`: only on the next change or resync).
    pub async fn reconcile(&mut self, pod: &Pod) -> Result<Option<Duration>> {
        self.seed(pod);
        self.last_spec = Some(pod.spec.clone());
        let key = pod.metadata.key();
        let runtime_error = |source| Error::Runtime { pod: key.clone(), source };
        let uid = pod.metadata.uid.as_str();
        let existing = self.ctx.pod_containers(uid).await.map_err(runtime_error)?;
        let mut by_name: HashMap<String, Vec<ContainerInfo>> = HashMap::new();
        for info in existing {
            by_name.entry(info.label(LABEL_CONTAINER).to_string()).or_default().push(info);
        }
        // Containers the spec does not name go. Of those it names, the newest (a running one
        // first) is the current instance, and the newest exited one before it the previous,
        // kept for `logs --previous` as the kubelet keeps one dead container; others go.
        for (name, infos) in by_name.iter_mut() {
            if !pod.spec.containers.iter().any(|c| &c.name == name) {
                for info in infos.drain(..) {
                    self.ctx.runtime.remove(&info.id).await.map_err(runtime_error)?;
                }
                continue;
            }
            infos.sort_by_key(|i| (i.state == RunState::Running, i.created_at));
            let current = infos.pop();
            match infos.iter().rposition(|i| matches!(i.state, RunState::Exited { .. })) {
                Some(at) => self.previous.insert(name.clone(), infos.remove(at).id),
                None => self.previous.remove(name),
            };
            for extra in infos.drain(..) {
                if !matches!(extra.state, RunState::Exited { .. }) {
                    tracing::warn!(pod = %key, container = %extra.name, "removing a duplicate container");
                }
                self.ctx.runtime.remove(&extra.id).await.map_err(runtime_error)?;
            }
            infos.extend(current);
        }

        let policy = pod.spec.restart_policy().unwrap_or(RestartPolicy::Always);
        let terminal = pod.status.phase.is_terminal();
        self.sandbox = self.sync_sandbox(pod, &mut by_name, policy, terminal).await.map_err(runtime_error)?;
        let config_volumes = !terminal && config_volumes::has_config_volumes(pod);
        self.config_volumes_failing = match config_volumes {
            true => config_volumes::sync(&self.ctx, pod).await.err().map(|e| e.to_string()),
            false => None,
        };
        let mut steps = Vec::with_capacity(pod.spec.containers.len());
        for container in &pod.spec.containers {
            let found = by_name.get(&container.name).and_then(|v| v.first()).cloned();
            let step = match found {
                Some(info) => self.existing_container(pod, container, info, policy).await.map_err(runtime_error)?,
                None if terminal => Step { status: self.previous_status(pod, container), requeue: None, ip: String::new(), done: true },
                None => self.new_container(pod, container).await.map_err(runtime_error)?,
            };
            steps.push(step);
        }
        let mut requeue = steps.iter().filter_map(|s| s.requeue).min();
        if config_volumes {
            // The files follow the server's objects: look again within the refresh period.
            requeue = Some(requeue.map_or(config_volumes::REFRESH, |r| r.min(config_volumes::REFRESH)));
        }
        let status = pod_status(pod, &steps, &self.ctx.address, self.sandbox.as_ref().map(|s| s.ip.as_str()));
        if status.phase.is_terminal() {
            // Nothing runs in it any more: free its address and its volumes, as the kubelet does.
            if let (Some(sandbox), Some(sandboxes)) = (self.sandbox.take(), &self.ctx.sandboxes) {
                sandboxes.remove(&sandbox.id).await.map_err(runtime_error)?;
            }
            self.ctx.volumes.tear_down(uid).map_err(|source| Error::Volumes { pod: key.clone(), source })?;
        }
        self.report(pod, status).await?;
        Ok(requeue)
    }

    /// Finds the pod's sandbox (runtimes with sandboxes only); a finished pod's is removed.
    /// A container whose sandbox stopped, vanished or was replaced lost its network: as the
    /// kubelet does, it is stopped, and removed to be created again in a new sandbox unless
    /// the restart policy is Never or it had finished for good.
    async fn sync_sandbox(
        &mut self,
        pod: &Pod,
        by_name: &mut HashMap<String, Vec<ContainerInfo>>,
        policy: RestartPolicy,
        terminal: bool,
    ) -> crate::runtime::Result<Option<Sandbox>> {
        let Some(sandboxes) = self.ctx.sandboxes.clone() else { return Ok(None) };
        let runtime = self.ctx.runtime.clone();
        let sandbox = match runtime.inspect(&sandbox_name(pod)).await? {
            Some(info) if info.state == RunState::Running && !terminal => match sandboxes.found(&info) {
                Some(sandbox) => Some(sandbox),
                None => {
                    tracing::info!(pod = %pod.metadata.key(), sandbox = %info.id, "the pod's sandbox has no network on this node's pod network");
                    sandboxes.remove(&info.id).await?;
                    None
                }
            },
            Some(info) => {
                if !terminal {
                    tracing::info!(pod = %pod.metadata.key(), sandbox = %info.id, state = ?info.state, "the pod's sandbox stopped");
                }
                sandboxes.remove(&info.id).await?;
                None
            }
            None => None,
        };
        if terminal {
            return Ok(None);
        }
        let current = sandbox.as_ref().map_or("", |s| s.id.as_str());
        let mut announced = false;
        for (name, infos) in by_name.iter_mut() {
            let Some(info) = infos.first().cloned() else { continue };
            let joined = info.label(LABEL_SANDBOX_ID);
            if joined.is_empty() || joined == current {
                continue;
            }
            if matches!(info.state, RunState::Exited { exit_code, .. } if !policy.restarts(exit_code)) {
                continue;
            }
            if !announced {
                announced = true;
                self.ctx.event(
                    pod,
                    event_types::NORMAL,
                    "SandboxChanged",
                    "The pod's sandbox went away: its containers stop, and start again in a new one".to_string(),
                );
            }
            if !matches!(info.state, RunState::Exited { .. }) {
                runtime.stop(&info.id, grace_period(pod)).await?;
            }
            let ended = runtime.inspect(&info.id).await?;
            if policy == RestartPolicy::Never {
                // Stopped for good: it reports how it ended.
                infos[0] = ended.unwrap_or(info);
                continue;
            }
            if let Some(ended @ ContainerInfo { state: RunState::Exited { exit_code, oom_killed }, .. }) = &ended {
                self.replaced.insert(name.clone(), terminated(ended, *exit_code, *oom_killed));
            }
            if info.started_at.is_some() {
                self.restarts(name).count += 1;
            }
            runtime.remove(&info.id).await?;
            self.removed.insert(info.id.clone());
            infos.clear();
        }
        Ok(sandbox)
    }

    /// The sandbox a new container joins: the pod's own if it has one; else a warm one from
    /// the pool, unless the pod publishes host ports (they are published when a sandbox is
    /// made, too early for a pool); else a new one for a pod of several containers, which
    /// must share a namespace, and for every pod on the CNI pod network, where only a sandbox
    /// gets a network. On Docker's network a lone container with no warm sandbox at hand gets
    /// a namespace of its own, as before sandboxes: it pays for one new namespace either way,
    /// and a new sandbox would only add a container to create and start.
    async fn sandbox_for(&mut self, pod: &Pod) -> crate::runtime::Result<Option<Sandbox>> {
        let Some(sandboxes) = self.ctx.sandboxes.clone() else { return Ok(None) };
        if self.sandbox.is_some() {
            return Ok(self.sandbox.clone());
        }
        let ports: Vec<PortMapping> = pod.spec.containers.iter().flat_map(|c| port_mappings(&self.ctx, c)).collect();
        let name = sandbox_name(pod);
        let warm = if ports.iter().any(|p| p.host_port > 0) { None } else { sandboxes.claim(&name).await? };
        let sandbox = match warm {
            Some(sandbox) => {
                tracing::debug!(pod = %pod.metadata.key(), sandbox = %sandbox.id, "claimed a warm sandbox");
                Some(sandbox)
            }
            None if pod.spec.containers.len() > 1 || sandboxes.every_pod_needs_one() => {
                Some(sandboxes.create(&name, &hosts::hostname(pod), ports).await?)
            }
            None => None,
        };
        self.sandbox = sandbox.clone();
        Ok(sandbox)
    }

    fn previous_status(&self, pod: &Pod, container: &Container) -> ContainerStatus {
        pod.status.container_statuses.iter().find(|s| s.name == container.name).cloned().unwrap_or_else(|| ContainerStatus {
            name: container.name.clone(),
            image: container.image.clone(),
            ..Default::default()
        })
    }

    fn restarts(&mut self, container: &str) -> &mut Restarts {
        let base = self.ctx.backoff.base;
        self.restarts.entry(container.to_string()).or_insert(Restarts { count: 0, delay: base })
    }

    fn base_status(&mut self, container: &Container, state: ContainerState) -> ContainerStatus {
        let restart_count = self.restarts(&container.name).count;
        // As the kubelet: a running container without probes is started and ready.
        let (started, ready) = match state {
            ContainerState::Running { .. } => self.probes.get(&container.name).map_or((true, true), |p| (p.started(), p.ready())),
            _ => (false, false),
        };
        ContainerStatus {
            name: container.name.clone(),
            ready,
            started,
            state,
            last_state: None,
            restart_count,
            image: container.image.clone(),
            container_id: String::new(),
        }
    }

    /// Makes the container's image present as its pull policy says (Kubernetes'
    /// `imagePullPolicy`), before each start of the container as the kubelet does: `Always`
    /// pulls every time, `IfNotPresent` only a missing image, `Never` never. Returns the
    /// step to report when the image is not there (or its pull is in back-off).
    async fn pull(&mut self, pod: &Pod, container: &Container) -> crate::runtime::Result<Option<Step>> {
        let image = container.image.as_str();
        if let Some(error) = shared::image::reference_error(image) {
            // The kubelet's words. Nothing changes until the spec does, which wakes the
            // worker: no pass looks again before.
            let message = format!("Failed to apply default image tag {image:?}: couldn't parse image reference {image:?}: {error}");
            self.ctx.event(pod, event_types::WARNING, "InspectFailed", message.clone());
            let status = self.base_status(container, waiting(INVALID_IMAGE_NAME, message));
            return Ok(Some(Step::new(status, None, String::new())));
        }
        if let Some(backoff) = self.pulls.get(image) {
            let now = Instant::now();
            if now < backoff.until {
                let message = format!("Back-off pulling image {image:?}: {}", backoff.message);
                let requeue = backoff.until - now;
                self.ctx.event(pod, event_types::WARNING, "BackOff", message.clone());
                let status = self.base_status(container, waiting("ImagePullBackOff", message));
                return Ok(Some(Step::new(status, Some(requeue), String::new())));
            }
        }
        // Validation refuses any other policy; a stored one from before it is read as the default.
        let policy = container.pull_policy().unwrap_or(PullPolicy::IfNotPresent);
        let present = match policy {
            PullPolicy::Always => false,
            PullPolicy::IfNotPresent | PullPolicy::Never => self.ctx.runtime.has_image(image).await?,
        };
        if present {
            // As the kubelet, on every start of the container, a restart's too.
            self.pulls.remove(image);
            self.ctx.event(pod, event_types::NORMAL, "Pulled", format!("Container image {image:?} already present on machine"));
            return Ok(None);
        }
        if policy == PullPolicy::Never {
            // The kubelet's words; it does not back off, the image may appear at any time.
            let message = format!("Container image {image:?} is not present with pull policy of Never");
            self.ctx.event(pod, event_types::WARNING, "ErrImageNeverPull", message.clone());
            let status = self.base_status(container, waiting("ErrImageNeverPull", message));
            return Ok(Some(Step::new(status, Some(self.ctx.backoff.max), String::new())));
        }
        self.ctx.event(pod, event_types::NORMAL, "Pulling", format!("Pulling image {image:?}"));
        let began = Instant::now();
        match self.ctx.runtime.pull_image(image).await {
            Ok(()) => {
                self.pulls.remove(image);
                let took = began.elapsed().as_secs_f64();
                self.ctx.event(pod, event_types::NORMAL, "Pulled", format!("Successfully pulled image {image:?} in {took:.2}s"));
                Ok(None)
            }
            Err(e) => {
                // The registry's own words; the event and status already name the image.
                let message = match e {
                    crate::runtime::Error::Pull { message, .. } => message,
                    other => other.to_string(),
                };
                let delay = self.pulls.get(image).map_or(self.ctx.backoff.base, |b| self.ctx.backoff.next(b.delay));
                self.pulls.insert(image.to_string(), Failing { delay, until: Instant::now() + delay, message: message.clone() });
                self.ctx.event(pod, event_types::WARNING, "Failed", format!("Failed to pull image {image:?}: {message}"));
                let status = self.base_status(container, waiting("ErrImagePull", message));
                // Look again within the back-off, to show ImagePullBackOff.
                Ok(Some(Step::new(status, Some(delay / 2), String::new())))
            }
        }
    }

    /// No container yet: image, create, start.
    async fn new_container(&mut self, pod: &Pod, container: &Container) -> crate::runtime::Result<Step> {
        self.probes.remove(&container.name);
        if let Some(step) = self.pull(pod, container).await? {
            return Ok(step);
        }
        // The pod's sandbox failed: its back-off is waited out whatever wakes this pass (the
        // end of the sandbox the failure removed does at once).
        if let Some(failing) = self.sandbox_failing.as_ref().filter(|f| self.sandbox.is_none() && Instant::now() < f.until) {
            let (requeue, message) = (failing.until - Instant::now(), failing.message.clone());
            let status = self.base_status(container, waiting(CONTAINER_CREATING, message));
            return Ok(Step::new(status, Some(requeue), String::new()));
        }
        let sandbox = match self.sandbox_for(pod).await {
            Ok(sandbox) => {
                self.sandbox_failing = None;
                sandbox
            }
            Err(e) => {
                let message = e.to_string();
                self.ctx.event(pod, event_types::WARNING, "FailedCreatePodSandBox", format!("Error: {message}"));
                let delay = self.sandbox_failing.as_ref().map_or(self.ctx.backoff.base, |f| self.ctx.backoff.next(f.delay));
                self.sandbox_failing = Some(Failing { delay, until: Instant::now() + delay, message: message.clone() });
                // As the kubelet: while its sandbox cannot be made, a container is still being
                // created; the event and the message say why.
                let status = self.base_status(container, waiting(CONTAINER_CREATING, message));
                return Ok(Step::new(status, Some(delay), String::new()));
            }
        };
        let pod_ip = sandbox.as_ref().map_or(pod.status.pod_ip.as_str(), |s| s.ip.as_str());
        let services = service_env::for_pod(&self.ctx.services, pod);
        let environment = match env::environment(&*self.ctx.api, pod, container, pod_ip, services).await {
            Ok(environment) => environment,
            Err(e) => {
                // As the kubelet: no container, and it starts by itself once the object or key
                // appears; looked for again on the back-off, as a volume that cannot be set up,
                // so that a long wait is not an event a second.
                let message = e.to_string();
                self.ctx.event(pod, event_types::WARNING, "Failed", format!("Error: {message}"));
                let delay = self.bump_delay(&container.name);
                let status = self.base_status(container, waiting(CREATE_CONTAINER_CONFIG_ERROR, message));
                return Ok(Step::new(status, Some(delay), String::new()));
            }
        };
        // The container the pod last reported ended (it stays as the previous instance) or is
        // gone, and not by this worker's hand (someone removed it, maybe while the agent was
        // down): its replacement is a restart, as the kubelet counts it, named by its attempt.
        let previous = self.previous_status(pod, container).container_id;
        let restart = !previous.is_empty() && !self.removed.contains(&previous);
        let attempt = self.restarts(&container.name).count + u32::from(restart);
        let secrets = environment.secret_values.clone();
        let mut config = container_config(&self.ctx, pod, container, environment.variables, attempt);
        let mounts = match &self.config_volumes_failing {
            Some(message) => Err((CONTAINER_CREATING, message.clone())),
            None => self.ctx.volumes.mounts(pod, container).map_err(|e| match e {
                e @ VolumeError::SubPath { .. } => (CREATE_CONTAINER_CONFIG_ERROR, e.to_string()),
                e => (CONTAINER_CREATING, e.to_string()),
            }),
        };
        config.mounts = match mounts {
            Ok(mounts) => mounts,
            Err((reason, message)) => {
                // As the kubelet: a volume that cannot be set up keeps the container being
                // created, a subPath that cannot be prepared is an error of its config; an
                // event says why.
                match reason {
                    CONTAINER_CREATING => self.ctx.event(pod, event_types::WARNING, "FailedMount", message.clone()),
                    _ => self.ctx.event(pod, event_types::WARNING, "Failed", format!("Error: {message}")),
                }
                let delay = self.bump_delay(&container.name);
                let status = self.base_status(container, waiting(reason, message));
                return Ok(Step::new(status, Some(delay), String::new()));
            }
        };
        if let Some(sandbox) = &sandbox {
            config.sandbox = sandbox.id.clone();
            config.network.clear();
            config.ports.clear();
            config.hostname.clear();
            config.labels.insert(LABEL_SANDBOX_ID.to_string(), sandbox.id.clone());
            match hosts::mounts(&self.ctx.volumes, pod, container, &sandbox.ip) {
                Ok(files) => config.mounts.extend(files),
                Err(e) => tracing::warn!(pod = %pod.metadata.key(), error = %e, "cannot write the pod's hosts file; it keeps Docker's"),
            }
        }
        if let Some(files) = self.ctx.resolv_confs.as_ref().filter(|_| pod.spec.uses_cluster_dns()) {
            match files.for_namespace(&pod.metadata.namespace) {
                Ok(path) => config.resolv_conf = path.display().to_string(),
                Err(e) => tracing::warn!(pod = %pod.metadata.key(), error = %e, "cannot write the pod's resolv.conf; it keeps the image's"),
            }
        }
        let id = match self.ctx.runtime.create(&config).await {
            Ok(id) => id,
            Err(e) => {
                let message = env::without_secrets(e.to_string(), &secrets);
                self.ctx.event(pod, event_types::WARNING, "Failed", format!("Error: {message}"));
                let delay = self.bump_delay(&container.name);
                let status = self.base_status(container, waiting("CreateContainerError", message));
                return Ok(Step::new(status, Some(delay), String::new()));
            }
        };
        self.removed.remove(&previous);
        if restart {
            self.restarts(&container.name).count += 1;
        }
        self.ctx.event(pod, event_types::NORMAL, "Created", format!("Created container {}", container.name));
        let last_state = self.replaced.remove(&container.name);
        self.start(pod, container, &id, last_state, &secrets).await
    }

    /// The delay before the next attempt, doubling it for the one after.
    fn bump_delay(&mut self, container: &str) -> Duration {
        let backoff = self.ctx.backoff;
        let restarts = self.restarts(container);
        let delay = restarts.delay;
        restarts.delay = backoff.next(delay);
        delay
    }

    async fn start(
        &mut self,
        pod: &Pod,
        container: &Container,
        id: &str,
        last_state: Option<ContainerState>,
        secrets: &[String],
    ) -> crate::runtime::Result<Step> {
        if let Err(e) = self.ctx.runtime.start(id).await {
            let message = env::without_secrets(e.to_string(), secrets);
            self.ctx.event(pod, event_types::WARNING, "Failed", format!("Error: {message}"));
            let delay = self.bump_delay(&container.name);
            let mut status = self.base_status(container, waiting("RunContainerError", message));
            status.container_id = id.to_string();
            status.last_state = last_state;
            return Ok(Step::new(status, Some(delay), String::new()));
        }
        self.give_hostname(pod, id).await;
        self.ctx.event(pod, event_types::NORMAL, "Started", format!("Started container {}", container.name));
        let info = self.ctx.runtime.inspect(id).await?;
        let (state, ip, requeue) = match &info {
            // It has exited already: the next pass applies the restart policy.
            Some(info @ ContainerInfo { state: RunState::Exited { exit_code, oom_killed }, .. }) => {
                (terminated(info, *exit_code, *oom_killed), info.ip.clone(), Some(Duration::ZERO))
            }
            Some(info) => {
                self.sync_probes(pod, container, info);
                (ContainerState::Running { started_at: info.started_at.or(Some(Utc::now())) }, info.ip.clone(), None)
            }
            None => (ContainerState::Running { started_at: Some(Utc::now()) }, String::new(), Some(Duration::ZERO)),
        };
        let mut status = self.base_status(container, state);
        status.container_id = id.to_string();
        status.last_state = last_state;
        Ok(Step::new(status, requeue, ip))
    }

    /// Sets the pod's hostname in the just started container `id` when its sandbox gives
    /// another (a warm sandbox, made before its pod). Until then, the container's first
    /// moments see the sandbox's: Docker cannot be told otherwise, as each container that
    /// joins a sandbox gets a UTS namespace of its own named after the sandbox.
    async fn give_hostname(&self, pod: &Pod, id: &str) {
        let hostname = hosts::hostname(pod);
        if self.sandbox.as_ref().is_none_or(|sandbox| sandbox.hostname == hostname) {
            return;
        }
        if let Err(e) = self.ctx.runtime.set_hostname(id, &hostname).await {
            // Ended already: its next start tries again.
            tracing::warn!(pod = %pod.metadata.key(), container = %id, error = %e, "cannot set the pod's hostname in its container");
        }
    }

    async fn existing_container(
        &mut self,
        pod: &Pod,
        container: &Container,
        info: ContainerInfo,
        policy: RestartPolicy,
    ) -> crate::runtime::Result<Step> {
        // What the agent last wrote: the pod it was handed may predate that write.
        let reported = self.last_reported.as_ref().unwrap_or(&pod.status);
        let previous_last_state = reported.container_statuses.iter().find(|s| s.name == container.name).and_then(|s| s.last_state.clone());
        if info.state != RunState::Running {
            // Probe results belong to one run: a restarted container starts from the beginning.
            self.probes.remove(&container.name);
        }
        match info.state.clone() {
            RunState::Running => {
                self.sync_probes(pod, container, &info);
                if let Some(kind) = self.probes.get(&container.name).and_then(ContainerProbes::failed) {
                    return self.kill_unhealthy(pod, container, info, kind, policy).await;
                }
                let mut status = self.base_status(container, ContainerState::Running { started_at: info.started_at });
                status.container_id = info.id.clone();
                status.last_state = previous_last_state;
                self.maybe_reset_backoff(&container.name, &info);
                Ok(Step::new(status, None, info.ip))
            }
            RunState::Created => {
                let id = info.id.clone();
                self.start(pod, container, &id, previous_last_state, &[]).await
            }
            RunState::Exited { exit_code, oom_killed } => {
                self.exited(pod, container, &info, (exit_code, oom_killed), policy, previous_last_state).await
            }
            RunState::Other(state) => {
                let mut status = self.base_status(container, waiting(CONTAINER_CREATING, format!("container is {state}")));
                status.container_id = info.id.clone();
                Ok(Step::new(status, Some(Duration::from_secs(1)), info.ip))
            }
        }
    }

    /// An exited container: finished for good, in back-off, or started again.
    async fn exited(
        &mut self,
        pod: &Pod,
        container: &Container,
        info: &ContainerInfo,
        (exit_code, oom_killed): (i64, bool),
        policy: RestartPolicy,
        previous_last_state: Option<ContainerState>,
    ) -> crate::runtime::Result<Step> {
        let ended = terminated(info, exit_code, oom_killed);
        let killed = policy != RestartPolicy::Never && self.probe_killed.contains(&info.id);
        if pod.status.phase.is_terminal() || !(policy.restarts(exit_code) || killed) {
            let mut status = self.base_status(container, ended);
            status.container_id = info.id.clone();
            status.last_state = previous_last_state;
            return Ok(Step { status, requeue: None, ip: String::new(), done: true });
        }
        let delay = self.restarts(&container.name).delay;
        let finished = info.finished_at.unwrap_or_else(Utc::now);
        let due = finished + chrono::Duration::from_std(delay).unwrap_or_default();
        let now = Utc::now();
        if now < due {
            let wait = (due - now).to_std().unwrap_or_default();
            let message =
                format!("back-off {}s restarting failed container={} pod={}", delay.as_secs_f64(), container.name, pod.metadata.key());
            self.ctx.event(pod, event_types::WARNING, "BackOff", format!("Back-off restarting failed container {}", container.name));
            let mut status = self.base_status(container, waiting("CrashLoopBackOff", message));
            status.container_id = info.id.clone();
            status.last_state = Some(ended);
            return Ok(Step::new(status, Some(wait), String::new()));
        }
        if oom_killed {
            self.ctx.event(pod, event_types::WARNING, "OOMKilled", format!("Container {} was killed: out of memory", container.name));
        }
        self.bump_delay(&container.name);
        self.probe_killed.remove(&info.id);
        // As the kubelet: a new container, its mounts and environment made again (a
        // ConfigMap's subPath binds its current version); the ended one becomes the previous,
        // in place of the one before it.
        if let Some(older) = self.previous.remove(&container.name) {
            self.ctx.runtime.remove(&older).await?;
        }
        self.replaced.insert(container.name.clone(), ended);
        self.new_container(pod, container).await
    }

    /// Keeps the probers of the container's current run, or starts them for a new run.
    fn sync_probes(&mut self, pod: &Pod, container: &Container, info: &ContainerInfo) {
        let run = (info.id.clone(), info.started_at);
        if self.probes.get(&container.name).is_some_and(|p| *p.run() == run) {
            return;
        }
        self.probes.remove(&container.name);
        let running_for = info.started_at.and_then(|t| (Utc::now() - t).to_std().ok()).unwrap_or_default();
        let runtime = self.ctx.runtime.clone();
        let check = |probe: &Probe| -> Check {
            let action = probe_action(container, probe);
            let timeout = Duration::from_secs(u64::try_from(probe.timeout_seconds).unwrap_or(1).max(1));
            let (runtime, id) = (runtime.clone(), info.id.clone());
            Arc::new(move || {
                let (runtime, id, action) = (runtime.clone(), id.clone(), action.clone());
                Box::pin(async move {
                    match action {
                        Ok(action) => runtime.probe(&id, &action, timeout).await,
                        Err(message) => Err(crate::runtime::Error::Other { action: "probe", message }),
                    }
                })
            })
        };
        let (ctx, wake, snapshot) = (self.ctx.clone(), self.wake.clone(), pod.clone());
        let observer: Observer = Arc::new(move |report| match report {
            Report::Failed { kind, message } => {
                ctx.event(&snapshot, event_types::WARNING, "Unhealthy", format!("{} probe failed: {message}", kind.as_str()));
            }
            Report::Errored { kind, message } => {
                ctx.event(&snapshot, event_types::WARNING, "Unhealthy", format!("{} probe errored: {message}", kind.as_str()));
            }
            Report::Changed => wake(),
        });
        if let Some(probes) = ContainerProbes::start(container, run, running_for, check, observer) {
            self.probes.insert(container.name.clone(), probes);
        }
    }

    /// A liveness or startup probe failed past its threshold: the container is stopped
    /// within the pod's grace period, as the kubelet does, and the restart policy decides
    /// what follows.
    async fn kill_unhealthy(
        &mut self,
        pod: &Pod,
        container: &Container,
        info: ContainerInfo,
        kind: shared::model::ProbeKind,
        policy: RestartPolicy,
    ) -> crate::runtime::Result<Step> {
        let mut message = format!("Container {} failed {} probe", container.name, kind.as_str().to_lowercase());
        if policy != RestartPolicy::Never {
            message.push_str(", will be restarted");
        }
        self.ctx.event(pod, event_types::NORMAL, "Killing", message);
        self.probes.remove(&container.name);
        self.probe_killed.insert(info.id.clone());
        self.ctx.runtime.stop(&info.id, grace_period(pod)).await?;
        match self.ctx.runtime.inspect(&info.id).await? {
            Some(ended @ ContainerInfo { state: RunState::Exited { exit_code, oom_killed }, .. }) => {
                let previous_last_state = self
                    .last_reported
                    .as_ref()
                    .and_then(|s| s.container_statuses.iter().find(|s| s.name == container.name))
                    .and_then(|s| s.last_state.clone());
                self.exited(pod, container, &ended, (exit_code, oom_killed), policy, previous_last_state).await
            }
            // Gone, or not stopped yet: the next pass sees which.
            _ => {
                let mut status =
                    self.base_status(container, waiting(CONTAINER_CREATING, format!("container {} is being killed", container.name)));
                status.container_id = info.id.clone();
                Ok(Step::new(status, Some(Duration::from_secs(1)), info.ip))
            }
        }
    }

    /// A container that has run well for a while earns a fresh back-off.
    fn maybe_reset_backoff(&mut self, container: &str, info: &ContainerInfo) {
        let backoff = self.ctx.backoff;
        let ran_long = info.started_at.is_some_and(|t| (Utc::now() - t).to_std().unwrap_or_default() >= backoff.max * 2);
        if ran_long {
            self.restarts(container).delay = backoff.base;
        }
    }

    async fn report(&mut self, pod: &Pod, status: PodStatus) -> Result<()> {
        if self.last_reported.as_ref() == Some(&status) {
            return Ok(());
        }
        super::status::write(self.ctx.api.as_ref(), pod, &status).await?;
        self.last_reported = Some(status);
        Ok(())
    }

    /// Stops every container of the pod within its grace period, then removes them and its
    /// sandbox.
    pub async fn terminate(&mut self, pod: &Pod) -> Result<()> {
        self.sandbox = None;
        self.probes.clear();
        terminate(&self.ctx, pod).await
    }
}

/// What the runtime runs for `probe`, its port resolved by the container's port names.
fn probe_action(container: &Container, probe: &Probe) -> Result<ProbeAction, String> {
    let port = |port| {
        container.probe_port(port).and_then(|n| u16::try_from(n).ok()).ok_or_else(|| format!("port {port:?} is not one of the container's"))
    };
    if let Some(exec) = &probe.exec {
        return Ok(ProbeAction::Exec { command: exec.command.clone() });
    }
    if let Some(http) = &probe.http_get {
        let headers = http.http_headers.iter().map(|h| (h.name.clone(), h.value.clone())).collect();
        return Ok(ProbeAction::HttpGet { port: port(&http.port)?, path: http.request_path().to_string(), headers });
    }
    match &probe.tcp_socket {
        Some(tcp) => Ok(ProbeAction::TcpSocket { port: port(&tcp.port)? }),
        None => Err("the probe has no handler".into()),
    }
}

#[cfg(test)]
mod tests {
    use shared::model::{EnvVar, ExecAction, PodPhase, conditions, find_condition};

    use super::*;
    use crate::fixtures::{RecordingApi, context, ctx, pod};
    use crate::runtime::simulated::UNHEALTHY_ENV;
    use crate::runtime::{LABEL_POD_UID, SimulatedRuntime};

    /// Lets the probers run for `seconds` of tokio's paused clock.
    async fn advance(seconds: u64) {
        for _ in 0..seconds * 10 {
            tokio::time::advance(Duration::from_millis(100)).await;
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn probes_set_readiness_and_a_failed_liveness_probe_restarts_the_container() {
        let api = Arc::new(RecordingApi::default());
        let ctx = Arc::new(context(api.clone(), Arc::new(SimulatedRuntime::new(Duration::ZERO))));
        let woken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let wake: Wake = {
            let woken = woken.clone();
            Arc::new(move || {
                woken.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            })
        };
        let mut worker = PodWorker::new(ctx.clone(), wake);
        let mut pod = pod();
        let probe = Probe { exec: Some(ExecAction { command: vec!["true".into()] }), period_seconds: 1, ..Probe::default() };
        pod.spec.containers[0].readiness_probe = Some(probe.clone());
        pod.spec.containers[0].liveness_probe = Some(probe);
        worker.reconcile(&pod).await.unwrap();
        let status = api.last_status().unwrap();
        assert_eq!(status.phase, PodPhase::Running);
        assert!(status.container_statuses[0].started && !status.container_statuses[0].ready, "not ready before its first probe");
        let ready = |status: &PodStatus| find_condition(&status.conditions, conditions::READY).map(|c| c.status.clone());
        assert_eq!(ready(&status).as_deref(), Some(conditions::FALSE));
        advance(1).await;
        assert_eq!(woken.load(std::sync::atomic::Ordering::SeqCst), 1, "the readiness probe passed: the worker is woken");
        pod.status = status;
        worker.reconcile(&pod).await.unwrap();
        let status = api.last_status().unwrap();
        assert!(status.container_statuses[0].ready);
        assert_eq!(ready(&status).as_deref(), Some(conditions::TRUE));
        assert_eq!(find_condition(&status.conditions, conditions::CONTAINERS_READY).unwrap().status, conditions::TRUE);

        // The same pod, unhealthy: readiness never passes, liveness kills it after three
        // failures, and it is restarted even under OnFailure although it exited with 0.
        let sick = Arc::new(RecordingApi::default());
        let ctx = Arc::new(context(sick.clone(), Arc::new(SimulatedRuntime::new(Duration::ZERO))));
        let mut worker = PodWorker::new(ctx, Arc::new(|| {}));
        pod.status = PodStatus::default();
        pod.spec.restart_policy = "OnFailure".into();
        pod.spec.containers[0].env.push(EnvVar::literal(UNHEALTHY_ENV, "true"));
        worker.reconcile(&pod).await.unwrap();
        advance(3).await;
        worker.reconcile(&pod).await.unwrap();
        // Events are written by tasks of their own.
        advance(1).await;
        let status = sick.last_status().unwrap();
        let liveness = sick.messages_of("Unhealthy").into_iter().filter(|m| m.starts_with("Liveness probe failed: ")).count();
        assert_eq!(liveness, 3, "{:?}", sick.messages_of("Unhealthy"));
        assert!(sick.messages_of("Unhealthy").iter().any(|m| m.starts_with("Readiness probe failed: simulated failure")));
        assert_eq!(sick.messages_of("Killing"), vec!["Container web failed liveness probe, will be restarted"]);
        assert_eq!(status.phase, PodPhase::Running);
        let container = &status.container_statuses[0];
        assert!(matches!(container.last_state, Some(ContainerState::Terminated { exit_code: 0, .. })), "{container:?}");
        assert!(matches!(&container.state, ContainerState::Waiting { reason, .. } if reason == "CrashLoopBackOff"), "{container:?}");
        assert!(!container.ready);
        assert_eq!(ready(&status).as_deref(), Some(conditions::FALSE));
    }

    #[tokio::test]
    async fn containers_get_the_pods_volumes_which_outlive_a_restart_and_go_with_the_pod() {
        use shared::model::{EmptyDirVolumeSource, Volume, VolumeMount};

        let state = tempfile::tempdir().unwrap();
        // No back-off: the stopped container starts again on the next pass.
        let backoff = shared::backoff::Backoff { base: Duration::ZERO, max: Duration::ZERO };
        let ctx = Arc::new(NodeContext { volumes: super::super::volumes::PodVolumes::new(state.path(), "n1"), backoff, ..ctx() });
        let mut worker = PodWorker::new(ctx.clone(), Arc::new(|| {}));
        let mut pod = pod();
        pod.spec.volumes = vec![Volume { name: "shared".into(), empty_dir: Some(EmptyDirVolumeSource::default()), ..Volume::default() }];
        let mount =
            |path: &str, read_only| VolumeMount { name: "shared".into(), mount_path: path.into(), read_only, sub_path: String::new() };
        pod.spec.containers[0].volume_mounts = vec![mount("/data", false)];
        let sidecar = Container { name: "reader".into(), volume_mounts: vec![mount("/in", true)], ..pod.spec.containers[0].clone() };
        pod.spec.containers.push(sidecar);
        worker.reconcile(&pod).await.unwrap();
        let dir = state.path().join("nodes/n1/pods/1234-abcd-5678/volumes/empty-dir/shared");
        let containers = ctx.runtime.list(&[(LABEL_POD_UID, "1234-abcd-5678")]).await.unwrap();
        let mut plan: Vec<(String, Vec<crate::runtime::Mount>)> =
            containers.iter().map(|c| (c.label(crate::runtime::LABEL_CONTAINER).to_string(), c.mounts.clone())).collect();
        plan.sort_by(|a, b| a.0.cmp(&b.0));
        let bound = |target: &str, read_only| crate::runtime::Mount { source: dir.clone(), target: target.into(), read_only };
        assert_eq!(plan, [("reader".to_string(), vec![bound("/in", true)]), ("web".to_string(), vec![bound("/data", false)])]);
        std::fs::write(dir.join("note"), "kept").unwrap();

        // A container that ends and starts again finds the volume as it was.
        let web = containers.iter().find(|c| c.label(crate::runtime::LABEL_CONTAINER) == "web").unwrap();
        ctx.runtime.stop(&web.id, Duration::ZERO).await.unwrap();
        pod.status = worker.last_reported.clone().unwrap();
        worker.reconcile(&pod).await.unwrap();
        let web_runs = ctx.runtime.list(&[(LABEL_POD_UID, "1234-abcd-5678"), (crate::runtime::LABEL_CONTAINER, "web")]).await.unwrap();
        let states: Vec<(bool, RunState)> = web_runs.iter().map(|c| (c.id == web.id, c.state.clone())).collect();
        assert_eq!(web_runs.len(), 2, "a new container, the ended one kept as the previous: {states:?}");
        assert!(states.contains(&(true, RunState::Exited { exit_code: 0, oom_killed: false })), "{states:?}");
        assert!(states.contains(&(false, RunState::Running)), "restarted as a new container: {states:?}");
        let second = web_runs.iter().find(|c| c.id != web.id).unwrap().clone();
        assert_eq!(second.mounts, web.mounts, "its mounts made again");
        ctx.runtime.stop(&second.id, Duration::ZERO).await.unwrap();
        pod.status = worker.last_reported.clone().unwrap();
        worker.reconcile(&pod).await.unwrap();
        pod.status = worker.last_reported.clone().unwrap();
        worker.reconcile(&pod).await.unwrap();
        let web_runs = ctx.runtime.list(&[(LABEL_POD_UID, "1234-abcd-5678"), (crate::runtime::LABEL_CONTAINER, "web")]).await.unwrap();
        assert_eq!(web_runs.len(), 2, "one previous instance is kept, not every one");
        assert!(web_runs.iter().all(|c| c.id != web.id) && web_runs.iter().any(|c| c.id == second.id));
        let web_status = worker.last_reported.as_ref().unwrap().container_statuses.iter().find(|s| s.name == "web").unwrap().clone();
        assert_eq!(web_status.restart_count, 2);
        assert_eq!(std::fs::read_to_string(dir.join("note")).unwrap(), "kept");

        worker.terminate(&pod).await.unwrap();
        assert!(!state.path().join("nodes/n1/pods/1234-abcd-5678").exists(), "the volume goes with the pod");
    }

    #[tokio::test]
    async fn a_volume_that_cannot_be_set_up_keeps_the_container_creating_with_a_failed_mount_event() {
        use shared::model::{HostPathVolumeSource, Volume, VolumeMount};

        let api = Arc::new(RecordingApi::default());
        let ctx = Arc::new(context(api.clone(), Arc::new(SimulatedRuntime::new(Duration::ZERO))));
        let mut worker = PodWorker::new(ctx.clone(), Arc::new(|| {}));
        let mut pod = pod();
        let host_path = HostPathVolumeSource { path: "/nonexistent/shepherd-test".into(), type_: "Directory".into() };
        pod.spec.volumes = vec![Volume { name: "host".into(), host_path: Some(host_path), ..Volume::default() }];
        pod.spec.containers[0].volume_mounts =
            vec![VolumeMount { name: "host".into(), mount_path: "/host".into(), ..VolumeMount::default() }];
        assert!(worker.reconcile(&pod).await.unwrap().is_some(), "it looks again after a back-off");
        let status = api.last_status().unwrap();
        assert_eq!(status.phase, PodPhase::Pending);
        let ContainerState::Waiting { reason, message } = &status.container_statuses[0].state else { panic!("{status:?}") };
        assert_eq!(reason, CONTAINER_CREATING);
        assert!(message.starts_with("MountVolume.SetUp failed for volume \"host\": hostPath type check failed"), "{message}");
        assert!(ctx.runtime.list(&[(LABEL_POD_UID, "1234-abcd-5678")]).await.unwrap().is_empty(), "no container is made");
        tokio::task::yield_now().await;
        shepherd_testing::poll(Duration::from_secs(5), "the FailedMount event", || {
            let events = api.messages_of("FailedMount");
            async move { (!events.is_empty()).then_some(()) }
        })
        .await;
    }

    #[tokio::test]
    async fn a_pod_waits_for_its_configmap_then_its_files_follow_it() {
        use shared::model::{ConfigMap, ConfigMapVolumeSource, Volume, VolumeMount};

        let state = tempfile::tempdir().unwrap();
        let api = Arc::new(RecordingApi::default());
        let runtime = Arc::new(SimulatedRuntime::new(Duration::ZERO));
        let ctx =
            Arc::new(NodeContext { volumes: super::super::volumes::PodVolumes::new(state.path(), "n1"), ..context(api.clone(), runtime) });
        let mut worker = PodWorker::new(ctx.clone(), Arc::new(|| {}));
        let mut pod = pod();
        let source = ConfigMapVolumeSource { name: "site".into(), default_mode: Some(0o644), ..Default::default() };
        pod.spec.volumes = vec![Volume { name: "conf".into(), config_map: Some(source), ..Volume::default() }];
        pod.spec.containers[0].volume_mounts = vec![VolumeMount { name: "conf".into(), mount_path: "/conf".into(), ..Default::default() }];
        let requeue = worker.reconcile(&pod).await.unwrap();
        assert!(requeue.is_some_and(|r| r <= super::config_volumes::REFRESH), "{requeue:?}");
        let ContainerState::Waiting { reason, message } = &api.last_status().unwrap().container_statuses[0].state else { panic!() };
        assert_eq!(
            (reason.as_str(), message.as_str()),
            (CONTAINER_CREATING, "MountVolume.SetUp failed for volume \"conf\": configmap \"site\" not found")
        );

        let site = |page: &str| ConfigMap { data: [("index.html".to_string(), page.to_string())].into(), ..ConfigMap::default() };
        api.config_maps.lock().unwrap().insert("site".into(), site("v1"));
        worker.reconcile(&pod).await.unwrap();
        assert_eq!(api.last_status().unwrap().phase, PodPhase::Running, "it starts by itself once the ConfigMap is there");
        let file = state.path().join("nodes/n1/pods/1234-abcd-5678/volumes/configmap/conf/index.html");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "v1");
        api.config_maps.lock().unwrap().insert("site".into(), site("v2"));
        pod.status = api.last_status().unwrap();
        worker.reconcile(&pod).await.unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "v2", "the next pass writes the new version");
        worker.terminate(&pod).await.unwrap();
        assert!(!file.exists());
    }

    #[tokio::test]
    async fn a_container_waits_in_create_container_config_error_until_its_secret_has_the_key() {
        use shared::model::{EnvVar, EnvVarSource, KeySelector, Secret};

        let api = Arc::new(RecordingApi::default());
        let ctx = Arc::new(context(api.clone(), Arc::new(SimulatedRuntime::new(Duration::ZERO))));
        let mut worker = PodWorker::new(ctx.clone(), Arc::new(|| {}));
        let mut pod = pod();
        let key_ref = KeySelector { name: "db".into(), key: "password".into(), optional: None };
        let value_from = Some(EnvVarSource { secret_key_ref: Some(key_ref), ..Default::default() });
        pod.spec.containers[0].env.push(EnvVar { name: "PASSWORD".into(), value: String::new(), value_from });
        let waiting_on = |expected: &str| {
            let status = api.last_status().unwrap();
            let ContainerState::Waiting { reason, message } = &status.container_statuses[0].state else { panic!("{status:?}") };
            assert_eq!((reason.as_str(), message.as_str()), (CREATE_CONTAINER_CONFIG_ERROR, expected));
            assert_eq!(status.phase, PodPhase::Pending);
        };

        let requeue = worker.reconcile(&pod).await.unwrap();
        assert_eq!(requeue, Some(ctx.backoff.base), "it looks again after the back-off");
        waiting_on("secret \"db\" not found");
        assert!(ctx.runtime.list(&[(LABEL_POD_UID, "1234-abcd-5678")]).await.unwrap().is_empty(), "no container is made");

        let secret = |pairs: &[(&str, &str)]| Secret {
            data: pairs.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect(),
            ..Secret::default()
        };
        api.secrets.lock().unwrap().insert("db".into(), secret(&[("user", "admin-value")]));
        worker.reconcile(&pod).await.unwrap();
        waiting_on("couldn't find key password in Secret default/db");

        api.secrets.lock().unwrap().insert("db".into(), secret(&[("user", "admin-value"), ("password", "s3cret-value")]));
        worker.reconcile(&pod).await.unwrap();
        assert_eq!(api.last_status().unwrap().phase, PodPhase::Running, "it starts by itself once the key is there");
        tokio::task::yield_now().await;
        let failures = shepherd_testing::poll(Duration::from_secs(5), "the two Failed events", || {
            let events = api.messages_of("Failed");
            async move { (events.len() >= 2).then_some(events) }
        })
        .await;
        assert_eq!(failures, ["Error: secret \"db\" not found", "Error: couldn't find key password in Secret default/db"]);
        let every_event = ["Failed", "Pulled", "Created", "Started"].map(|reason| api.messages_of(reason)).concat();
        assert!(!every_event.iter().any(|m| m.contains("-value")), "no value in an event: {every_event:?}");
    }

    #[tokio::test]
    async fn a_restart_records_pulled_created_and_started_again() {
        let api = Arc::new(RecordingApi::default());
        // No back-off: the stopped container starts again on the next pass.
        let backoff = shared::backoff::Backoff { base: Duration::ZERO, max: Duration::ZERO };
        let ctx = Arc::new(NodeContext { backoff, ..context(api.clone(), Arc::new(SimulatedRuntime::new(Duration::ZERO))) });
        let mut worker = PodWorker::new(ctx.clone(), Arc::new(|| {}));
        let mut pod = pod();
        worker.reconcile(&pod).await.unwrap();
        let containers = ctx.runtime.list(&[(LABEL_POD_UID, "1234-abcd-5678")]).await.unwrap();
        ctx.runtime.stop(&containers[0].id, Duration::ZERO).await.unwrap();
        pod.status = worker.last_reported.clone().unwrap();
        worker.reconcile(&pod).await.unwrap();
        assert_eq!(api.last_status().unwrap().container_statuses[0].restart_count, 1);
        tokio::task::yield_now().await;
        shepherd_testing::poll(Duration::from_secs(5), "two Started events", || {
            let started = api.messages_of("Started");
            async move { (started.len() == 2).then_some(()) }
        })
        .await;
        let twice = |message: &str| vec![message.to_string(); 2];
        assert_eq!(api.messages_of("Pulled"), twice("Container image \"minimal\" already present on machine"));
        assert_eq!(api.messages_of("Created"), twice("Created container web"));
        assert_eq!(api.messages_of("Started"), twice("Started container web"));
    }

    #[tokio::test]
    async fn an_image_docker_cannot_read_waits_as_invalid_image_name_without_retrying() {
        let api = Arc::new(RecordingApi::default());
        let ctx = Arc::new(context(api.clone(), Arc::new(SimulatedRuntime::new(Duration::ZERO))));
        let mut worker = PodWorker::new(ctx.clone(), Arc::new(|| {}));
        let mut pod = pod();
        pod.spec.containers[0].image = "Minimal:V3".into();
        assert_eq!(worker.reconcile(&pod).await.unwrap(), None, "nothing to look at again until the spec changes");
        let status = api.last_status().unwrap();
        assert_eq!(status.phase, PodPhase::Pending);
        let ContainerState::Waiting { reason, message } = &status.container_statuses[0].state else { panic!("{status:?}") };
        let expected = "Failed to apply default image tag \"Minimal:V3\": couldn't parse image reference \"Minimal:V3\": \
                        invalid reference format: repository name (library/Minimal) must be lowercase";
        assert_eq!((reason.as_str(), message.as_str()), (INVALID_IMAGE_NAME, expected));
        assert!(ctx.runtime.list(&[(LABEL_POD_UID, "1234-abcd-5678")]).await.unwrap().is_empty(), "no container is made");
        tokio::task::yield_now().await;
        let events = shepherd_testing::poll(Duration::from_secs(5), "the InspectFailed event", || {
            let events = api.messages_of("InspectFailed");
            async move { (!events.is_empty()).then_some(events) }
        })
        .await;
        assert_eq!(events, [expected]);
        assert!(api.messages_of("Pulling").is_empty());
    }

    #[tokio::test]
    async fn a_simulated_pod_runs_then_terminates() {
        let ctx = Arc::new(ctx());
        let mut worker = PodWorker::new(ctx.clone(), Arc::new(|| {}));
        let mut pod = pod();
        assert_eq!(worker.reconcile(&pod).await.unwrap(), None);
        let status = worker.last_reported.clone().unwrap();
        assert_eq!(status.phase, PodPhase::Running);
        assert_eq!(status.host_ip, "127.0.0.1");
        assert!(status.pod_ip.starts_with("100.64."), "{}", status.pod_ip);
        assert!(status.container_statuses[0].ready);
        // Level-triggered: a second pass changes nothing and creates nothing.
        pod.status = status.clone();
        worker.reconcile(&pod).await.unwrap();
        assert_eq!(worker.last_reported.as_ref(), Some(&status));
        assert_eq!(ctx.runtime.list(&[(LABEL_POD_UID, "1234-abcd-5678")]).await.unwrap().len(), 1);
        worker.terminate(&pod).await.unwrap();
        assert!(ctx.runtime.list(&[(LABEL_POD_UID, "1234-abcd-5678")]).await.unwrap().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_container_is_named_after_its_pod_in_a_warm_sandbox_as_in_its_own_and_mounts_its_hosts_file() {
        use crate::network::PodNetwork;
        use crate::sandbox::Sandboxes;

        let state = tempfile::tempdir().unwrap();
        let runtime: Arc<dyn crate::runtime::ContainerRuntime> = Arc::new(SimulatedRuntime::new(Duration::ZERO));
        let sandboxes = Sandboxes::new(runtime.clone(), "n1", "c1", PodNetwork::Docker(String::new()), 1);
        let shutdown = tokio_util::sync::CancellationToken::new();
        let pool = tokio::spawn(sandboxes.clone().run(shutdown.clone()));
        shepherd_testing::poll(Duration::from_secs(10), "a warm sandbox", || async { (sandboxes.available() == 1).then_some(()) }).await;
        let ctx = Arc::new(NodeContext {
            network: String::new(),
            sandboxes: Some(sandboxes.clone()),
            volumes: super::super::volumes::PodVolumes::new(state.path(), "n1"),
            ..context(Arc::new(RecordingApi::default()), runtime)
        });
        // Without host ports, a lone container claims the warm sandbox; with a sidecar and its
        // host port, the pod gets a sandbox of its own.
        let mut warm = pod();
        (warm.metadata.name, warm.metadata.uid) = ("warm".into(), "u-warm".into());
        warm.spec.containers[0].ports.clear();
        let mut own = pod();
        (own.metadata.name, own.metadata.uid) = ("own".into(), "u-own".into());
        own.spec.containers.push(Container { name: "sidecar".into(), ports: Vec::new(), ..own.spec.containers[0].clone() });
        for pod in [warm, own] {
            let mut worker = PodWorker::new(ctx.clone(), Arc::new(|| {}));
            worker.reconcile(&pod).await.unwrap();
            let sandbox = worker.sandbox.clone().expect("a sandbox");
            let name = &pod.metadata.name;
            let containers = ctx.runtime.list(&[(LABEL_POD_UID, pod.metadata.uid.as_str())]).await.unwrap();
            assert_eq!(containers.len(), pod.spec.containers.len());
            for container in containers {
                assert_eq!(container.state, RunState::Running);
                assert_eq!(&container.hostname, name, "{name}'s sandbox is named {}", sandbox.hostname);
                let hosts = container.mounts.iter().find(|m| m.target == "/etc/hosts").expect("the hosts file is mounted");
                let text = std::fs::read_to_string(&hosts.source).unwrap();
                assert!(text.ends_with(&format!("{}\t{name}\n", sandbox.ip)), "{text}");
            }
        }
        shutdown.cancel();
        pool.await.unwrap();
    }
}
