//! What the agent asks of the API server, as the [`ApiClient`] trait (so that tests can
//! stand in for the server), implemented by `shepherd_client::Client`: the agent writes no
//! HTTP of its own.

use async_trait::async_trait;
use shared::api::{Heartbeat, List};
use shared::model::{Event, Kind, Lease, Node, Pod, Service};
use shepherd_client::{Client, DeleteOptions, Selection};
pub use shepherd_client::{Error, Result, WatchStream};

/// Everything the agent asks of the API server.
#[async_trait]
pub trait ApiClient: Send + Sync + 'static {
    /// The cluster's id (`Info::cluster_id`), which the agent's containers are labelled with.
    async fn cluster_id(&self) -> Result<String>;
    /// Registers the node (creates it, or updates capacity and info of an existing one).
    async fn register_node(&self, node: &Node) -> Result<Node>;
    /// Renews the node's lease: the frequent heartbeat, which leaves the Node alone.
    async fn renew_lease(&self, node: &str) -> Result<Lease>;
    /// Reports the node's status (a Node write), when it changed or every few minutes.
    async fn heartbeat(&self, node: &str, heartbeat: &Heartbeat) -> Result<()>;
    /// The pods bound to `node`, with the revision the list was read at.
    async fn list_pods(&self, node: &str) -> Result<List<Pod>>;
    /// Changes to the pods bound to `node` strictly after `resource_version`.
    async fn watch_pods(&self, node: &str, resource_version: u64) -> Result<WatchStream>;
    /// Writes the pod's status (the status subresource; only `status` is taken).
    async fn update_pod_status(&self, pod: &Pod) -> Result<Pod>;
    /// Removes the pod at once (grace period 0) if the stored pod still has `pod`'s uid: the
    /// agent's word that a terminating pod's containers are gone. Not found and conflict
    /// both mean that pod is gone already.
    async fn delete_pod_now(&self, pod: &Pod) -> Result<()>;
    async fn create_event(&self, event: &Event) -> Result<()>;
    /// Every Service of the cluster (for the node's DNS and pods' service variables).
    async fn list_services(&self) -> Result<List<Service>>;
    /// Changes to the Services strictly after `resource_version`.
    async fn watch_services(&self, resource_version: u64) -> Result<WatchStream>;
}

#[async_trait]
impl ApiClient for Client {
    async fn cluster_id(&self) -> Result<String> {
        Ok(self.info().await?.cluster_id)
    }

    async fn register_node(&self, node: &Node) -> Result<Node> {
        Client::register_node(self, node).await
    }

    async fn renew_lease(&self, node: &str) -> Result<Lease> {
        Client::renew_lease(self, node).await
    }

    async fn heartbeat(&self, node: &str, heartbeat: &Heartbeat) -> Result<()> {
        Client::heartbeat(self, node, heartbeat).await
    }

    async fn list_pods(&self, node: &str) -> Result<List<Pod>> {
        self.list(&Selection::on_node(node)).await
    }

    async fn watch_pods(&self, node: &str, resource_version: u64) -> Result<WatchStream> {
        self.watch(Kind::Pod, &Selection::on_node(node), resource_version).await
    }

    async fn update_pod_status(&self, pod: &Pod) -> Result<Pod> {
        Client::update_pod_status(self, pod).await
    }

    async fn delete_pod_now(&self, pod: &Pod) -> Result<()> {
        let now = DeleteOptions { grace_period_seconds: Some(0), uid: Some(pod.metadata.uid.clone()) };
        self.delete(Kind::Pod, &pod.metadata.namespace, &pod.metadata.name, &now).await
    }

    async fn create_event(&self, event: &Event) -> Result<()> {
        Client::create_event(self, event).await
    }

    async fn list_services(&self) -> Result<List<Service>> {
        self.list(&Selection::default()).await
    }

    async fn watch_services(&self, resource_version: u64) -> Result<WatchStream> {
        self.watch(Kind::Service, &Selection::default(), resource_version).await
    }
}
