//! Where a node's pods come from: the [`PodFeed`] seam, served by the node's own watch with a
//! full re-list every resync period ([`NodeWatch`]) or by its share of a fleet's watch, and the
//! loop that hands each change to the node's pod workers.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use shared::api::{List, WatchEvent, WatchEventType};
use shared::backoff::Backoff;
use shared::model::{Kind, Object, Pod};
use shepherd_client::watcher::{Event as WatchedEvent, Source, Watcher};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::{ApiClient, Result as ClientResult, WatchStream};
use crate::workers::PodManager;

/// What a node is told about its pods, by whichever feed serves it: its own watch
/// ([`NodeWatch`]) or a fleet's one watch of every node's pods (`crate::fleet`).
#[derive(Debug, Clone)]
pub enum PodChange {
    /// Every pod bound to the node, now.
    Listed(Vec<Pod>),
    /// A pod bound to the node was added or changed.
    Applied(Pod),
    /// A pod left the node (deleted, or no longer selected).
    Deleted(Pod),
}

/// The seam between where a node's pods come from and the pod logic they drive.
pub trait PodFeed: Send {
    /// The next change; `None` when the feed has ended.
    fn next(&mut self) -> impl Future<Output = Option<PodChange>> + Send;
}

/// A fleet hands each node its share of the fleet's watch through a channel.
impl PodFeed for tokio::sync::mpsc::UnboundedReceiver<PodChange> {
    fn next(&mut self) -> impl Future<Output = Option<PodChange>> + Send {
        self.recv()
    }
}

/// The watch's retries: 200 ms, doubling to 5 s.
pub const WATCH_BACKOFF: Backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));

/// The node's pods, as the watcher lists and watches them through the agent's API client.
struct NodePods {
    api: Arc<dyn ApiClient>,
    node: String,
}

impl Source for NodePods {
    fn kind(&self) -> Kind {
        Kind::Pod
    }

    fn list(&self) -> impl Future<Output = ClientResult<List<Object>>> + Send {
        let (api, node) = (self.api.clone(), self.node.clone());
        async move {
            let list = api.list_pods(&node).await?;
            Ok(List::whole(list.kind, list.resource_version, list.items.into_iter().map(Object::Pod).collect()))
        }
    }

    fn watch(&self, from: u64) -> impl Future<Output = ClientResult<WatchStream>> + Send {
        let (api, node) = (self.api.clone(), self.node.clone());
        async move { api.watch_pods(&node, from).await }
    }
}

/// One node's own feed: its pods listed and watched through the shared watcher (resume
/// after a break, re-list on 410 Gone, back off), and listed again every `resync` whatever
/// the watch said.
pub struct NodeWatch {
    watcher: Watcher<NodePods>,
    node: String,
    resync: tokio::time::Interval,
}

impl NodeWatch {
    pub fn new(api: Arc<dyn ApiClient>, node: &str, resync: Duration) -> Self {
        let mut resync = tokio::time::interval_at(Instant::now() + resync, resync);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        NodeWatch { watcher: Watcher::new(NodePods { api, node: node.to_string() }, WATCH_BACKOFF), node: node.to_string(), resync }
    }

    async fn next_change(&mut self) -> PodChange {
        loop {
            let seen = tokio::select! {
                seen = self.watcher.next() => seen,
                _ = self.resync.tick() => {
                    self.watcher.relist();
                    continue;
                }
            };
            match seen {
                Ok(WatchedEvent::Listed { objects, .. }) => return PodChange::Listed(objects.into_iter().filter_map(pod_of).collect()),
                Ok(WatchedEvent::Changed(event)) => {
                    if let Some(change) = change_for(&self.node, *event) {
                        return change;
                    }
                }
                // The watcher retries by itself; it has no limit to give up at.
                Err(e) => tracing::warn!(error = %e, "pod watch failed"),
            }
        }
    }
}

impl PodFeed for NodeWatch {
    async fn next(&mut self) -> Option<PodChange> {
        Some(self.next_change().await)
    }
}

pub fn pod_of(object: Object) -> Option<Pod> {
    match object {
        Object::Pod(pod) => Some(pod),
        _ => None,
    }
}

/// What a watched pod event means to `node`: a pod that is (still) bound to it applies, any
/// other is gone from it.
pub fn change_for(node: &str, event: WatchEvent) -> Option<PodChange> {
    let WatchEvent { type_, object, .. } = event;
    let pod = object.and_then(pod_of)?;
    match type_ {
        WatchEventType::Added | WatchEventType::Modified if pod.spec.node_name == node => Some(PodChange::Applied(pod)),
        WatchEventType::Added | WatchEventType::Modified | WatchEventType::Deleted => Some(PodChange::Deleted(pod)),
        WatchEventType::Bookmark => None,
    }
}

/// Drives the node's pod workers from `feed` until it ends or shutdown. Losing the server
/// never touches running containers.
pub async fn follow_pods(manager: Arc<PodManager>, mut feed: impl PodFeed, shutdown: CancellationToken) {
    loop {
        let change = tokio::select! {
            change = feed.next() => change,
            _ = shutdown.cancelled() => return,
        };
        match change {
            Some(PodChange::Listed(pods)) => manager.full_sync(pods),
            Some(PodChange::Applied(pod)) => manager.upsert(pod),
            Some(PodChange::Deleted(pod)) => manager.delete(pod),
            None => return,
        }
    }
}
