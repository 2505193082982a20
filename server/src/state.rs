//! What every handler of both API dialects shares: the store, the settings, the metrics,
//! the scheduler's hint channel, the client for node agents and their signing keys, the
//! reader of Kubernetes manifests, in one
//! [`AppState`] that is cheap to clone per request.

use std::sync::Arc;

use shared::model::{Object, Time};
use tokio_util::sync::CancellationToken;

use crate::auth::AgentKeys;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::scheduler::SchedulerHandle;
use crate::store::Store;

/// What every handler shares: one reference-counted [`Shared`], cheap to clone per request.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> Self {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

pub struct Shared {
    pub store: Arc<dyn Store>,
    pub config: Arc<Config>,
    pub metrics: Arc<Metrics>,
    pub scheduler: SchedulerHandle,
    pub started_at: Time,
    pub shutdown: CancellationToken,
    /// For proxying logs from node agents.
    pub http: reqwest::Client,
    /// What to sign the requests proxied to each node's agent with.
    pub agent_keys: AgentKeys,
    /// This server's identity in the leases (`<hostname>_<uuid>`, or `--server-id`).
    pub identity: String,
    /// Reads a manifest's document written Kubernetes' way into the object a create through
    /// `/k8s` would store, for `POST /api/v1/manifests/parse`: `k8s::from_manifest`, handed
    /// in by `lib.rs`, since `api` sits below `k8s`.
    pub kubernetes_manifest: fn(&serde_json::Value) -> Result<Object, String>,
}
