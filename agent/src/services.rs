//! The cluster's Services as this node sees them: listed and watched through the API client
//! by the shared watcher, and published as one snapshot that the node's DNS answers from and
//! pods' service variables are made of, as the kubelet's service informer serves both.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use shared::api::List;
use shared::cache::Cache;
use shared::model::{Kind, Object, Service};
use shepherd_client::watcher::{Event, Source, Watcher};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::client::{ApiClient, Result as ClientResult, WatchStream};
use crate::pod_feed::WATCH_BACKOFF;

/// Every Service of the cluster by `namespace/name`, and whether the first list came yet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub services: BTreeMap<String, Service>,
    /// False until the first list: a container started before it would miss its variables,
    /// so the kubelet, and this agent, wait for it.
    pub synced: bool,
}

impl Snapshot {
    /// The Services of `namespace`, by name.
    pub fn in_namespace<'a>(&'a self, namespace: &'a str) -> impl Iterator<Item = &'a Service> {
        self.services.values().filter(move |service| service.metadata.namespace == namespace)
    }
}

/// The node's view of the Services, kept by [`Services::follow`].
pub struct Services {
    snapshot: watch::Sender<Arc<Snapshot>>,
}

impl Services {
    /// A view that [`Services::follow`] fills; containers wait for its first list.
    pub fn watched() -> Arc<Services> {
        Arc::new(Services { snapshot: watch::Sender::new(Arc::default()) })
    }

    /// A view that nothing fills (a fleet's simulated nodes): no Services, never waited for.
    pub fn none() -> Arc<Services> {
        Arc::new(Services { snapshot: watch::Sender::new(Arc::new(Snapshot { synced: true, ..Snapshot::default() })) })
    }

    /// A view holding these Services, listed (tests).
    pub fn of(services: impl IntoIterator<Item = Service>) -> Arc<Services> {
        let services = services.into_iter().map(|s| (s.metadata.key(), s)).collect();
        Arc::new(Services { snapshot: watch::Sender::new(Arc::new(Snapshot { services, synced: true })) })
    }

    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.borrow().clone()
    }

    /// Wakes on every new snapshot.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.snapshot.subscribe()
    }

    /// The snapshot once the first list came; `None` if `shutdown` comes first.
    pub async fn synced(&self, shutdown: &CancellationToken) -> Option<Arc<Snapshot>> {
        let mut updates = self.subscribe();
        tokio::select! {
            synced = updates.wait_for(|s| s.synced) => synced.ok().map(|s| s.clone()),
            _ = shutdown.cancelled() => None,
        }
    }

    /// Lists and watches the Services through `api` until `shutdown`, publishing each change.
    pub async fn follow(&self, api: Arc<dyn ApiClient>, shutdown: CancellationToken) {
        let mut watcher = Watcher::new(ClusterServices { api }, WATCH_BACKOFF);
        let mut known: Cache<Object> = Cache::default();
        loop {
            let seen = tokio::select! {
                seen = watcher.next() => seen,
                _ = shutdown.cancelled() => return,
            };
            match seen {
                Ok(Event::Listed { objects, .. }) => known.replace(objects),
                Ok(Event::Changed(event)) => {
                    let changed = event.object.and_then(|object| known.apply(event.type_, object));
                    if changed.is_none() {
                        continue;
                    }
                }
                // The watcher retries by itself.
                Err(e) => {
                    tracing::warn!(error = %e, "service watch failed");
                    continue;
                }
            }
            let services = known
                .values()
                .filter_map(|object| match object {
                    Object::Service(service) => Some((service.metadata.key(), service.clone())),
                    _ => None,
                })
                .collect();
            self.snapshot.send_replace(Arc::new(Snapshot { services, synced: true }));
        }
    }
}

/// Every Service of the cluster, through the agent's API client.
struct ClusterServices {
    api: Arc<dyn ApiClient>,
}

impl Source for ClusterServices {
    fn kind(&self) -> Kind {
        Kind::Service
    }

    fn list(&self) -> impl Future<Output = ClientResult<List<Object>>> + Send {
        let api = self.api.clone();
        async move {
            let list = api.list_services().await?;
            Ok(List::whole(list.kind, list.resource_version, list.items.into_iter().map(Object::Service).collect()))
        }
    }

    fn watch(&self, from: u64) -> impl Future<Output = ClientResult<WatchStream>> + Send {
        let api = self.api.clone();
        async move { api.watch_services(from).await }
    }
}
