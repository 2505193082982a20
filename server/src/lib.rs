//! The Shepherd control plane: the API server, its durable store, the scheduler loop and
//! the controllers, all in one process that [`run`] starts and one cancellation token stops.
//!
//! Layout:
//! - [`store`]: objects by kind and key, one global revision, atomic read-modify-write
//!   transactions with group commit, watch history; SQLite (WAL) or memory underneath.
//!   The seam's types and the `Store` trait sit in files of their own; the embedded store is
//!   `state` (objects, indexes, history, tombstones), `committer`, `watchers` (mailboxes, lag
//!   limit), `subscription` and `persistence`, put together in `cached`;
//! - [`heaps`]: an allocator heap per stored kind, so a mass deletion gives its memory back;
//! - [`ops`]: the writes of the API as store mutations (create, CAS update, graceful pod
//!   delete, bind, status);
//! - [`resources`]: per kind, what create defaults and what a PUT may change;
//! - [`admission`]: what is refused for what it would do on a node (a `hostPath` volume
//!   without `--allow-host-path`);
//! - [`service_addresses`]: Services' cluster IPs and node ports, taken from their ranges
//!   within the write's transaction;
//! - [`events`]: events deduplicated by (involved object, reason, source);
//! - [`app`](mod@app): the whole HTTP app: both APIs and the dashboard's files under one router, with
//!   the guard against web pages, authentication, metrics, the body limit and a timeout;
//! - [`api`]: the native API under `/api/v1`: its routes, watch over SSE, OpenAPI;
//! - [`k8s`]: the Kubernetes-compatible API under `/k8s`, for kubectl, in front of the same writes;
//! - [`state`], [`extract`], [`query`], [`paging`]: what both APIs' handlers share: the state
//!   they hold, bodies and query parameters read strictly, the filter of a list, watch or
//!   delete, and a list's pages, each at the first page's revision;
//! - [`error`]: the one error every handler returns, in one JSON shape;
//! - [`auth`]: bearer tokens with the roles admin, node and viewer;
//! - [`agent_client`]: the client the server asks agents with, which reaches no refused address;
//!   [`agent_upgrade`]: the proxy of an upgraded connection (exec, attach) to a pod's agent;
//! - [`scheduler`]: the loop around `shared::scheduler`: queue, backoff, assume, bind;
//! - [`controllers`]: node lifecycle, deployments, service endpoints, terminating pods, event expiry;
//! - [`leader_election`]: the Lease that elects the one server whose scheduler and
//!   controllers run, as client-go elects kube-scheduler's; [`identity`]: each server's own
//!   lease, which says who answers and where;
//! - [`metrics`]: Prometheus metrics, by `prometheus-client`; [`config`]: the validated settings;
//! - [`registry`]: `shepherd registry`: distribution's registry, configured and supervised,
//!   signing in with the server's tokens;
//! - [`tls`]: HTTPS: the serving certificate (given, or made in the data directory) and the listener.
//!
//! The `shepherd` binary adds `local_node`, the agent that `--local-node` runs in-process,
//! and `registry_command`, the flags of `shepherd registry`.

pub mod admission;
pub mod agent_client;
pub mod agent_upgrade;
pub mod api;
pub mod app;
pub mod auth;
pub mod config;
pub mod controllers;
pub mod error;
pub mod events;
pub mod extract;
pub mod heaps;
pub mod identity;
pub mod k8s;
pub mod leader_election;
pub mod metrics;
pub mod ops;
pub mod paging;
pub mod query;
pub mod registry;
pub mod resources;
pub mod scheduler;
pub mod service_addresses;
pub mod state;
pub mod store;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use shared::model::{Kind, Namespace, ObjectMeta};
use shared::scheduler::Profile;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub use app::app;
pub use config::Config;
pub use state::AppState;

use crate::controllers::{
    Context, deployment::DeploymentController, endpoints::EndpointsController, node_lifecycle::NodeLifecycleController,
    pod_gc::PodGcController, replicaset::ReplicaSetController, service_repair::ServiceRepairController,
};
use crate::leader_election::Elector;
use crate::metrics::Metrics;
use crate::scheduler::{SchedulerHandle, SchedulerLoop};
use crate::store::{CachedStore, EtcdStore, Key, SqlitePersistence, Store, StoreError, Txn};

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(
        "refusing to listen on {0} without a token: anyone who can reach it could run containers. Pass --token or --tokens-file, or listen on 127.0.0.1"
    )]
    InsecureBind(SocketAddr),
    #[error("unknown scheduler profile {0:?}: use spread or bin-pack")]
    UnknownProfile(String),
    // The cause follows in the error's chain, which `main` prints.
    #[error("cannot open the store")]
    Store(#[from] StoreError),
    #[error("invalid leader election settings: {0}")]
    LeaderElection(String),
    #[error("cannot serve HTTPS")]
    Tls(#[from] tls::Error),
    #[error("the HTTP server failed")]
    Io(#[from] std::io::Error),
}

/// A started control plane: store open, scheduler and controllers running (on the leader
/// alone, with leader election). Serve its [`Server::router`] on any listener, then
/// [`Server::wait`] after `shutdown` is cancelled.
pub struct Server {
    state: AppState,
    tasks: JoinSet<()>,
    /// Whether [`Server::wait`] closes the store: not one it was given, which others share.
    owns_store: bool,
}

impl Server {
    /// Opens the store (etcd, SQLite under `data_dir`, else memory), Secrets encrypted in it
    /// with `config.encryption`, and starts the server on it ([`Server::start_on`]).
    pub async fn start(config: Config, shutdown: CancellationToken) -> Result<Server, ServerError> {
        let encryption = config.encryption.clone();
        let store: Arc<dyn Store> = match (&config.etcd, &config.data_dir) {
            (Some(etcd), _) => Arc::new(EtcdStore::connect(etcd, encryption, config.history()).await?),
            (None, Some(dir)) => Arc::new(CachedStore::open(Box::new(SqlitePersistence::open(dir, encryption)?), config.history())?),
            (None, None) => Arc::new(CachedStore::in_memory(config.history())),
        };
        let mut server = Server::start_on(store, config, shutdown).await?;
        server.owns_store = true;
        Ok(server)
    }

    /// Starts a server on `store`, which other servers may share: makes sure the `default`
    /// and `kube-system` namespaces exist, announces this server's identity, and starts the
    /// scheduler loop and the controllers, or, with leader election, the campaign that runs
    /// them while this server leads. `store` is left open when the server stops.
    pub async fn start_on(store: Arc<dyn Store>, config: Config, shutdown: CancellationToken) -> Result<Server, ServerError> {
        let election = config.leader_election;
        if election.leader_elect {
            election.validate().map_err(ServerError::LeaderElection)?;
        }
        let mut profile =
            Profile::by_name(&config.scheduler_profile).ok_or_else(|| ServerError::UnknownProfile(config.scheduler_profile.clone()))?;
        profile.node_monitor_grace = config.node_monitor_grace;
        ensure_namespace(&*store, shared::model::DEFAULT_NAMESPACE).await?;
        ensure_namespace(&*store, shared::model::SYSTEM_NAMESPACE).await?;
        let identity = config.server_id.clone().unwrap_or_else(identity::new_identity);
        if config.server_id.is_some() && identity::servers(&*store, chrono::Utc::now()).iter().any(|s| s.identity == identity) {
            tracing::warn!(
                "a server announced itself as {identity} less than {} s ago: if it still runs, two servers with one --server-id both lead; give each server its own",
                identity::IDENTITY_LEASE_DURATION.as_secs()
            );
        }
        let announcer = identity::Announcer::new(store.clone(), &identity, config.advertise_url.as_deref().unwrap_or_default());
        announcer.announce().await?;
        let config = Arc::new(config);
        let metrics = Arc::new(Metrics::default());
        let handle = SchedulerHandle::default();
        let state = AppState::new(state::Shared {
            store: store.clone(),
            config: config.clone(),
            metrics: metrics.clone(),
            scheduler: handle.clone(),
            started_at: chrono::Utc::now(),
            shutdown: shutdown.clone(),
            http: agent_client::client(),
            agent_keys: auth::AgentKeys::default(),
            identity: identity.clone(),
            kubernetes_manifest: k8s::from_manifest,
        });
        let loops = Loops { store: store.clone(), config, metrics: metrics.clone(), scheduler: handle, profile };
        let mut tasks = JoinSet::new();
        if election.leader_elect {
            let mut elector = Elector::new(store.clone(), leader_election::control_plane_lease_key(), identity, election, metrics);
            let won = elector.try_once().await;
            tasks.spawn(elector.run(won, shutdown.clone(), move |leading| loops.spawn(leading)));
        } else {
            metrics.set_leading(true);
            let mut running = loops.spawn(shutdown.clone());
            tasks.spawn(async move { while running.join_next().await.is_some() {} });
        }
        tasks.spawn(announcer.run(shutdown.clone()));
        tasks.spawn(store::expire_history(store, shutdown));
        Ok(Server { state, tasks, owns_store: false })
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    pub fn router(&self) -> axum::Router {
        app(self.state.clone())
    }

    /// Waits for every loop to stop (cancel the shutdown token first), then, if the server
    /// opened its store, lets it commit what is queued and close.
    pub async fn wait(mut self) {
        while let Some(result) = self.tasks.join_next().await {
            if let Err(e) = result {
                tracing::error!("a background loop failed: {e}");
            }
        }
        if self.owns_store {
            self.state.store.close().await;
        }
    }
}

/// What writes on its own: the scheduler loop and the controllers, which run on the leader.
struct Loops {
    store: Arc<dyn Store>,
    config: Arc<Config>,
    metrics: Arc<Metrics>,
    scheduler: SchedulerHandle,
    profile: Profile,
}

impl Loops {
    /// Starts every loop under `token`: cancel it and wait for the set to stop them.
    fn spawn(&self, token: CancellationToken) -> JoinSet<()> {
        let (store, config) = (&self.store, &self.config);
        let mut tasks = JoinSet::new();
        if config.run_scheduler {
            let scheduler = SchedulerLoop::new(
                store.clone(),
                self.scheduler.clone(),
                self.metrics.clone(),
                self.profile.clone(),
                config.scheduler_sweep,
            );
            tasks.spawn(scheduler.run(token.clone()));
        }
        let ctx = Context { store: store.clone(), config: config.clone() };
        tasks.spawn(controllers::run(NodeLifecycleController, ctx.clone(), config.node_monitor_period, token.clone()));
        tasks.spawn(controllers::run(DeploymentController, ctx.clone(), config.controller_resync, token.clone()));
        tasks.spawn(controllers::run(ReplicaSetController::default(), ctx.clone(), config.controller_resync, token.clone()));
        tasks.spawn(controllers::run(PodGcController, ctx.clone(), config.pod_gc_period, token.clone()));
        tasks.spawn(controllers::run(EndpointsController, ctx.clone(), config.controller_resync, token.clone()));
        tasks.spawn(controllers::run(ServiceRepairController, ctx, config.controller_resync, token.clone()));
        tasks.spawn(controllers::run_event_gc(store.clone(), config.event_ttl, config.event_limit, token));
        tasks
    }
}

/// Creates namespace `name` unless it exists; servers starting together on one store may
/// race to create it, and the one that loses finds it there.
async fn ensure_namespace(store: &dyn Store, name: &str) -> Result<(), StoreError> {
    if store.get(&Key::new(Kind::Namespace, "", name)).is_some() {
        return Ok(());
    }
    let mut namespace = Namespace { kind: "Namespace".into(), metadata: ObjectMeta::named("", name), ..Namespace::default() };
    resources::stamp_new(&mut namespace, chrono::Utc::now());
    match store.commit(Txn::new().with(ops::create(namespace))).await {
        // Another server on the same store made it first.
        Ok(_) | Err(StoreError::AlreadyExists { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Serves the whole control plane on `listener` until `shutdown` is cancelled: in-flight
/// requests finish, watches end, the loops stop and the store closes cleanly.
///
/// A listener on a non-loopback address needs at least one token.
pub async fn run(listener: TcpListener, config: Config, shutdown: CancellationToken) -> Result<(), ServerError> {
    serve_control_plane(listener, None, config, shutdown).await
}

/// [`run`] on a store that other servers share ([`Server::start_on`]), which stays open.
pub async fn run_on(listener: TcpListener, store: Arc<dyn Store>, config: Config, shutdown: CancellationToken) -> Result<(), ServerError> {
    serve_control_plane(listener, Some(store), config, shutdown).await
}

async fn serve_control_plane(
    listener: TcpListener,
    store: Option<Arc<dyn Store>>,
    config: Config,
    shutdown: CancellationToken,
) -> Result<(), ServerError> {
    let addr = listener.local_addr()?;
    if !shared::listen::may_listen(addr, !config.tokens.is_empty()) {
        return Err(ServerError::InsecureBind(addr));
    }
    let tls = config.tls.as_ref().map(tls::Identity::server_config).transpose()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut config = config;
    config.advertise_url.get_or_insert_with(|| format!("{scheme}://{addr}"));
    let server = match store {
        Some(store) => Server::start_on(store, config, shutdown.clone()).await?,
        None => Server::start(config, shutdown.clone()).await?,
    };
    // Said once the store is open, so that a server that cannot open it never says it serves.
    tracing::info!("shepherd API listening on {scheme}://{addr} ({} store)", server.state().store.backend());
    let trust = if tls.is_some() { " SHEPHERD_CA=<the authority's certificate>" } else { "" };
    tracing::info!(
        "dashboard and API at {scheme}://{addr}; try: SHEPHERD_API={scheme}://{addr}{trust} sheepctl apply -f examples/pod.json"
    );
    let router = server.router();
    let header_timeout = server.state().config.header_read_timeout;
    let served = match tls {
        Some(tls) => serve(tls::TlsListener::new(listener, tls)?, router, header_timeout, shutdown.clone()).await,
        None => serve(listener, router, header_timeout, shutdown.clone()).await,
    };
    shutdown.cancel();
    server.wait().await;
    served.map_err(ServerError::Io)
}

/// Serves `router` on `listener` until `shutdown`, telling each request which local port and
/// scheme its connection has, for the Host and Origin checks of an open server. Connections
/// are served by hyper as `axum::serve` does, plus a header read timeout, which axum does not
/// expose; on shutdown each finishes its requests in flight and closes.
async fn serve<L>(mut listener: L, router: axum::Router, header_timeout: Duration, shutdown: CancellationToken) -> std::io::Result<()>
where
    L: axum::serve::Listener,
    L::Io: app::web_pages::Transport,
{
    use hyper_util::rt::{TokioIo, TokioTimer};
    // HTTP/1.1 only, as before: the workspace's axum has no HTTP/2. Upgrades (exec, attach)
    // leave the connection for their own task.
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(header_timeout);
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        let io = tokio::select! {
            (io, _) = listener.accept() => io,
            () = shutdown.cancelled() => break,
        };
        let info = axum::extract::ConnectInfo(app::web_pages::Transport::connection(&io));
        let router = router.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(info);
            tower::ServiceExt::oneshot(router.clone(), request.map(axum::body::Body::new))
        });
        let connection = builder.serve_connection(TokioIo::new(io), service).with_upgrades();
        let shutdown = shutdown.clone();
        connections.spawn(async move {
            tokio::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            // A client that hangs up or breaks the protocol ends only its own connection.
            if let Err(e) = served {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
    drop(listener);
    connections.close();
    connections.wait().await;
    Ok(())
}
