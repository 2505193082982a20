//! A fleet: N simulated nodes in one process, like KWOK. They share what a real agent has
//! per node, so the server sees a fixed number of connections whatever N is:
//! - one API client for pod calls and one for heartbeats, each with its calls in flight capped;
//! - one list+watch of every bound pod, dispatched to each node's pod workers;
//! - one agent API on `--listen`, with node N's under `/nodes/N`;
//! - one read of the cluster's id.

use std::collections::HashMap;
use std::sync::Arc;

use shared::model::{Kind, Object, Pod};
use shepherd_client::watcher::{Collection, Event as WatchedEvent, Watcher};
use shepherd_client::{Client, Selection};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::client::ApiClient;
use crate::pod_feed::{PodChange, WATCH_BACKOFF, change_for, pod_of};
use crate::runtime::{SimulatedRuntime, simulated};
use crate::{API_TIMEOUT, AgentConfig, Error, NodeAgent, Result, RuntimeChoice, http, node};

/// How many calls the fleet has in flight to the server by default: enough to keep two cores
/// busy, few enough that 5,000 nodes hold 37 connections (with the heartbeats, the events and
/// the watch).
pub const DEFAULT_MAX_IN_FLIGHT: u16 = 16;

/// Calls in flight for the nodes' registrations, lease renewals and status reports, on a
/// client of their own: 500 renewals a second at 5,000 nodes, each a few hundred
/// microseconds, and never queued behind the pods' calls (150,000 pods starting queue
/// that many status writes, and a renewal waiting behind them let leases expire). With 4,
/// renewals fell behind while 20,000 pods started on 5,000 nodes (a busy server answers in
/// tens of milliseconds), and 43–182 nodes went NotReady; with 16, none did.
pub const HEARTBEAT_IN_FLIGHT: usize = 16;

/// Calls in flight for the pods' events, on a client of their own. A pod started records
/// three (Pulled, Created, Started), so 20,000 pods starting queued 60,000 event calls
/// among their 20,000 status writes, and the last pods reached Running only once those
/// had drained. The kubelet likewise sends events from a queue of their own, rate-limited.
pub const EVENT_IN_FLIGHT: usize = 4;

/// The pods bound to any node: the fleet keeps those of its own nodes.
const BOUND_PODS: &str = "spec.node_name!=";

/// What a fleet needs beyond one node's configuration.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// Every node's settings; node `i` is named `{node_name}-{i}`.
    pub node: AgentConfig,
    pub nodes: usize,
    /// The API client's cap on calls in flight.
    pub max_in_flight: u16,
}

/// Runs the fleet until `shutdown`: raises the descriptor limit, reads the cluster's id,
/// registers the nodes spread over one heartbeat interval (so registrations and the
/// heartbeats after them come at an even rate), and serves every node's agent API on
/// `config.node.listen`.
pub async fn run(config: FleetConfig, shutdown: CancellationToken) -> Result<()> {
    let RuntimeChoice::Simulated { start_delay } = config.node.runtime else { return Err(Error::FleetNotSimulated) };
    crate::check_listen(&config.node)?;
    raise_fd_limit();
    let listen = config.node.listen;
    let listener = TcpListener::bind(listen).await.map_err(|source| Error::Bind { addr: listen, source })?;
    let local = listener.local_addr().map_err(|source| Error::Bind { addr: listen, source })?;
    let api_url = crate::api_url(local, &config.node.address);
    let client =
        crate::api_client(&config.node)?.named("agent").with_timeout(API_TIMEOUT).with_max_in_flight(config.max_in_flight.into())?;
    let api: Arc<dyn ApiClient> = Arc::new(client.clone());
    let heartbeat_api: Arc<dyn ApiClient> =
        Arc::new(crate::api_client(&config.node)?.named("agent").with_timeout(API_TIMEOUT).with_max_in_flight(HEARTBEAT_IN_FLIGHT)?);
    let event_api: Arc<dyn ApiClient> =
        Arc::new(crate::api_client(&config.node)?.named("agent").with_timeout(API_TIMEOUT).with_max_in_flight(EVENT_IN_FLIGHT)?);
    let Some(cluster) = node::cluster_id(api.as_ref(), &shutdown).await else { return Ok(()) };

    let mut states = HashMap::with_capacity(config.nodes);
    let mut feeds = HashMap::with_capacity(config.nodes);
    let mut nodes = tokio::task::JoinSet::new();
    let spread = config.node.heartbeats.lease_renew_interval;
    for i in 0..config.nodes {
        let mut node_config = config.node.clone();
        node_config.node_name = format!("{}-{i}", config.node.node_name);
        let name = node_config.node_name.clone();
        let endpoint = format!("{api_url}{}", shared::api::agent_paths::fleet_node(&name));
        // Numbered blocks: no two of the fleet's nodes give a pod the same address.
        let block = simulated::pod_block(&config.node.node_name).wrapping_add(i as u32);
        let runtime = Arc::new(SimulatedRuntime::new(start_delay).with_pod_block(block));
        let agent = NodeAgent::new(&node_config, runtime, api.clone(), &cluster, endpoint)
            .await
            .with_heartbeat_api(heartbeat_api.clone())
            .with_event_api(event_api.clone());
        states.insert(name.clone(), agent.http_state(shutdown.clone()));
        let (tx, rx) = mpsc::unbounded_channel();
        feeds.insert(name, tx);
        let offset = spread.mul_f64(i as f64 / config.nodes as f64);
        let shutdown = shutdown.clone();
        nodes.spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(offset) => agent.run(rx, shutdown).await,
                _ = shutdown.cancelled() => {}
            }
        });
    }
    tracing::info!(nodes = config.nodes, cluster = %cluster, listen = %local, max_in_flight = config.max_in_flight, "fleet starting");
    let app = http::fleet_app(Arc::new(states), http::Access::new(config.node.token.as_deref(), local));
    let stop = shutdown.clone();
    let serve = axum::serve(listener, app).with_graceful_shutdown(async move { stop.cancelled().await });
    let all_nodes = async {
        while let Some(done) = nodes.join_next().await {
            if let Err(e) = done {
                tracing::error!(error = %e, "a simulated node panicked");
            }
        }
    };
    let (served, (), ()) = tokio::join!(serve, dispatch(client, feeds, shutdown.clone()), all_nodes);
    served.map_err(Error::Serve)
}

/// Lists and watches every bound pod once for the whole fleet, and hands each node its own.
/// A list (the first, or after 410 Gone) reaches every node, as an empty one if it has no
/// pods, so that each node's full sync drops what is gone. Unlike a node's own watch this
/// one is not listed again on a timer: one list of every pod of every node each resync is
/// the cost the fleet exists to avoid, and the watcher resumes without a gap after a break.
async fn dispatch(client: Client, feeds: HashMap<String, mpsc::UnboundedSender<PodChange>>, shutdown: CancellationToken) {
    let selection = Selection { field_selector: Some(BOUND_PODS.to_string()), ..Selection::default() };
    let mut watcher = Watcher::new(Collection { client, kind: Kind::Pod, selection }, WATCH_BACKOFF);
    loop {
        let seen = tokio::select! {
            seen = watcher.next() => seen,
            _ = shutdown.cancelled() => return,
        };
        match seen {
            Ok(WatchedEvent::Listed { objects, .. }) => {
                let mut by_node: HashMap<String, Vec<Pod>> = HashMap::new();
                for pod in objects.into_iter().filter_map(pod_of) {
                    by_node.entry(pod.spec.node_name.clone()).or_default().push(pod);
                }
                for (name, feed) in &feeds {
                    // A node that has ended no longer listens: nothing to tell it.
                    let _ = feed.send(PodChange::Listed(by_node.remove(name).unwrap_or_default()));
                }
            }
            Ok(WatchedEvent::Changed(event)) => {
                let Some(Object::Pod(pod)) = &event.object else { continue };
                let node = pod.spec.node_name.clone();
                if let (Some(feed), Some(change)) = (feeds.get(&node), change_for(&node, *event)) {
                    let _ = feed.send(change);
                }
            }
            // The watcher retries by itself; it has no limit to give up at.
            Err(e) => tracing::warn!(error = %e, "the fleet's pod watch failed"),
        }
    }
}

/// Raises this process's soft limit on open files to its hard limit. The fleet's own
/// connections are few, but every log request the server proxies to `--listen` is one more,
/// and the usual soft limit is 1,024.
fn raise_fd_limit() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed to them.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "cannot read the open file limit");
        return;
    }
    let soft = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    // SAFETY: as above.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } == 0 {
        tracing::info!(from = soft, to = limit.rlim_max, "open file limit raised to the hard limit");
    } else {
        tracing::warn!(error = %std::io::Error::last_os_error(), soft, hard = limit.rlim_max, "cannot raise the open file limit");
    }
}
