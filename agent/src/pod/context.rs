//! What every pod worker of a node shares: the node's name, cluster and address, the runtime,
//! the API clients, the back-off, the sandboxes, the volumes, the Services and the node's
//! DNS; and how a worker records a pod's events.

use std::sync::Arc;

use chrono::Utc;
use shared::backoff::Backoff;
use shared::model::{Event, ObjectMeta, ObjectReference, Pod};

use super::volumes::PodVolumes;
use crate::client::ApiClient;
use crate::dns::resolv::ResolvConfs;
use crate::runtime::{ContainerInfo, ContainerRuntime, LABEL_CLUSTER, LABEL_NODE, LABEL_POD_UID};
use crate::sandbox::Sandboxes;
use crate::services::Services;

/// What every pod worker of a node shares.
pub struct NodeContext {
    pub node_name: String,
    /// The cluster's id: with the node name, what marks this agent's containers.
    pub cluster: String,
    /// The node's address: pods' `host_ip`, and where host ports are published by default.
    pub address: String,
    /// The network containers join; empty for the runtime's default.
    pub network: String,
    pub runtime: Arc<dyn ContainerRuntime>,
    pub api: Arc<dyn ApiClient>,
    /// What the pods' events go through: `api`, or in a fleet a client of their own, so
    /// that three events per pod started never queue ahead of the status writes.
    pub events: Arc<dyn ApiClient>,
    pub backoff: Backoff,
    /// Pod sandboxes, their network and their warm pool, when the runtime has sandboxes (Docker).
    pub sandboxes: Option<Arc<Sandboxes>>,
    /// The cluster's Services: containers' service variables.
    pub services: Arc<Services>,
    /// The resolv.conf files naming the node's DNS, when it runs one (the CNI pod network).
    pub resolv_confs: Option<ResolvConfs>,
    /// The pods' volumes on this node.
    pub volumes: PodVolumes,
}

impl NodeContext {
    /// The containers of the pod `uid` on this node of this cluster.
    pub(crate) async fn pod_containers(&self, uid: &str) -> crate::runtime::Result<Vec<ContainerInfo>> {
        self.runtime.list(&[(LABEL_POD_UID, uid), (LABEL_NODE, self.node_name.as_str()), (LABEL_CLUSTER, self.cluster.as_str())]).await
    }

    fn source(&self) -> String {
        shared::model::node_event_source(&self.node_name)
    }

    /// Records an event without waiting for the server: a lost event never holds a pod back.
    pub(crate) fn event(&self, pod: &Pod, type_: &str, reason: &str, message: String) {
        let now = Utc::now();
        let event = Event {
            kind: "Event".to_string(),
            metadata: ObjectMeta {
                name: format!("{}.{:x}", pod.metadata.name, now.timestamp_nanos_opt().unwrap_or_default()),
                namespace: pod.metadata.namespace.clone(),
                ..Default::default()
            },
            type_: type_.to_string(),
            reason: reason.to_string(),
            message,
            involved_object: ObjectReference {
                kind: "Pod".to_string(),
                namespace: pod.metadata.namespace.clone(),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            },
            source: self.source(),
            count: 1,
            first_timestamp: Some(now),
            last_timestamp: Some(now),
        };
        let api = self.events.clone();
        tokio::spawn(async move {
            if let Err(e) = api.create_event(&event).await {
                tracing::debug!(error = %e, "event not recorded");
            }
        });
    }
}
