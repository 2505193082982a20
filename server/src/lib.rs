//! The Shepherd control plane: the API server, its durable store, the scheduler loop and
//! the controllers, all in one process that [`run`] starts and one cancellation token stops.
//!
//! Layout:
//! - [`store`]: objects by kind and key, one global revision, atomic read-modify-write
//!   transactions with group commit, watch history; SQLite (WAL) or memory underneath;
//! - [`ops`]: the writes of the API as store mutations (create, CAS update, graceful pod
//!   delete, bind, status);
//! - [`resources`]: per kind, what create defaults and what a PUT may change;
//! - [`events`]: events deduplicated by (involved object, reason, source);
//! - [`api`]: the axum router, one JSON error shape ([`error`]), watch over SSE, OpenAPI;
//! - [`k8s`]: the Kubernetes-compatible API under `/k8s`, for kubectl, in front of the same writes;
//! - [`auth`]: bearer tokens with the roles admin, node and viewer;
//! - [`agent_client`]: the client the server asks agents with, which reaches no refused address;
//! - [`scheduler`]: the loop around `shared::scheduler`: queue, backoff, assume, bind;
//! - [`controllers`]: node lifecycle, deployments, service endpoints, terminating pods, event expiry;
//! - [`metrics`]: Prometheus text; [`config`]: the validated settings;
//! - [`tls`]: HTTPS: the serving certificate (given, or made in the data directory) and the listener.

pub mod agent_client;
pub mod api;
pub mod auth;
pub mod config;
pub mod controllers;
pub mod error;
pub mod events;
pub mod heaps;
pub mod k8s;
pub mod metrics;
pub mod ops;
pub mod resources;
pub mod scheduler;
pub mod store;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

use shared::model::{Kind, Namespace, ObjectMeta};
use shared::scheduler::Profile;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub use api::{AppState, app};
pub use config::Config;

use crate::controllers::{
    Context, deployment::DeploymentController, endpoints::EndpointsController, node_lifecycle::NodeLifecycleController,
    pod_gc::PodGcController,
};
use crate::metrics::Metrics;
use crate::scheduler::{SchedulerHandle, SchedulerLoop};
use crate::store::{CachedStore, Key, SqlitePersistence, Store, StoreError, Txn};

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(
        "refusing to listen on {0} without a token: anyone who can reach it could run containers. Pass --token or --tokens-file, or listen on 127.0.0.1"
    )]
    InsecureBind(SocketAddr),
    #[error("unknown scheduler profile {0:?}: use spread or bin-pack")]
    UnknownProfile(String),
    #[error("cannot open the store: {0}")]
    Store(#[from] StoreError),
    #[error("cannot serve HTTPS: {0}")]
    Tls(#[from] tls::Error),
    #[error("the HTTP server failed: {0}")]
    Io(#[from] std::io::Error),
}

/// A started control plane: store open, scheduler and controllers running. Serve its
/// [`Server::router`] on any listener, then [`Server::wait`] after `shutdown` is cancelled.
pub struct Server {
    state: AppState,
    tasks: JoinSet<()>,
}

impl Server {
    /// Opens the store (SQLite under `data_dir`, else memory), makes sure the `default`
    /// namespace exists, and starts the scheduler loop and the controllers.
    pub async fn start(config: Config, shutdown: CancellationToken) -> Result<Server, ServerError> {
        let mut profile =
            Profile::by_name(&config.scheduler_profile).ok_or_else(|| ServerError::UnknownProfile(config.scheduler_profile.clone()))?;
        profile.node_monitor_grace = config.node_monitor_grace;
        let store: Arc<dyn Store> = match &config.data_dir {
            Some(dir) => Arc::new(CachedStore::open(Box::new(SqlitePersistence::open(dir)?), config.history())?),
            None => Arc::new(CachedStore::in_memory(config.history())),
        };
        ensure_default_namespace(&*store).await?;
        let config = Arc::new(config);
        let metrics = Arc::new(Metrics::default());
        let (handle, hints) = SchedulerHandle::new();
        let state = AppState::new(api::Shared {
            store: store.clone(),
            config: config.clone(),
            metrics: metrics.clone(),
            scheduler: handle.clone(),
            started_at: chrono::Utc::now(),
            shutdown: shutdown.clone(),
            http: agent_client::client(),
            agent_keys: auth::AgentKeys::default(),
        });
        let mut tasks = JoinSet::new();
        if config.run_scheduler {
            let scheduler = SchedulerLoop::new(store.clone(), handle, hints, metrics, profile, config.scheduler_sweep);
            tasks.spawn(scheduler.run(shutdown.clone()));
        }
        let ctx = Context { store: store.clone(), config: config.clone() };
        tasks.spawn(controllers::run(NodeLifecycleController, ctx.clone(), config.node_monitor_period, shutdown.clone()));
        tasks.spawn(controllers::run(DeploymentController, ctx.clone(), config.controller_resync, shutdown.clone()));
        tasks.spawn(controllers::run(PodGcController, ctx.clone(), config.pod_gc_period, shutdown.clone()));
        tasks.spawn(controllers::run(EndpointsController, ctx, config.controller_resync, shutdown.clone()));
        tasks.spawn(controllers::run_event_gc(store.clone(), config.event_ttl, config.event_limit, shutdown.clone()));
        tasks.spawn(store::expire_history(store, shutdown));
        Ok(Server { state, tasks })
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    pub fn router(&self) -> axum::Router {
        app(self.state.clone())
    }

    /// Waits for every loop to stop (cancel the shutdown token first), then lets the store
    /// commit what is queued and close.
    pub async fn wait(mut self) {
        while let Some(result) = self.tasks.join_next().await {
            if let Err(e) = result {
                tracing::error!("a background loop failed: {e}");
            }
        }
        self.state.store.close().await;
    }
}

async fn ensure_default_namespace(store: &dyn Store) -> Result<(), StoreError> {
    if store.get(&Key::new(Kind::Namespace, "", shared::model::DEFAULT_NAMESPACE)).is_some() {
        return Ok(());
    }
    let mut namespace =
        Namespace { kind: "Namespace".into(), metadata: ObjectMeta::named("", shared::model::DEFAULT_NAMESPACE), ..Namespace::default() };
    resources::stamp_new(&mut namespace, chrono::Utc::now());
    store.commit(Txn::new().with(ops::create(namespace))).await.map(|_| ())
}

/// Serves the whole control plane on `listener` until `shutdown` is cancelled: in-flight
/// requests finish, watches end, the loops stop and the store closes cleanly.
///
/// A listener on a non-loopback address needs at least one token.
pub async fn run(listener: TcpListener, config: Config, shutdown: CancellationToken) -> Result<(), ServerError> {
    let addr = listener.local_addr()?;
    if !shared::listen::may_listen(addr, !config.tokens.is_empty()) {
        return Err(ServerError::InsecureBind(addr));
    }
    let tls = config.tls.as_ref().map(tls::Identity::server_config).transpose()?;
    let server = Server::start(config, shutdown.clone()).await?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!("shepherd API listening on {scheme}://{addr} ({} store)", server.state().store.backend());
    let router = server.router();
    let served = match tls {
        Some(tls) => serve(tls::TlsListener::new(listener, tls)?, router, shutdown.clone()).await,
        None => serve(listener, router, shutdown.clone()).await,
    };
    shutdown.cancel();
    server.wait().await;
    served.map_err(ServerError::Io)
}

/// Serves `router` on `listener` until `shutdown`, telling each request which local port and
/// scheme its connection has, for the Host and Origin checks of an open server.
async fn serve<L>(listener: L, router: axum::Router, shutdown: CancellationToken) -> std::io::Result<()>
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
    for<'a> api::web_pages::Connection: axum::extract::connect_info::Connected<axum::serve::IncomingStream<'a, L>>,
{
    let service = router.into_make_service_with_connect_info::<api::web_pages::Connection>();
    axum::serve(listener, service).with_graceful_shutdown(shutdown.cancelled_owned()).await
}
