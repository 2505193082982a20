//! What an agent says about its node: the Node object it registers and the heartbeat it
//! sends. Test fixtures register nodes through [`NodeDescription::to_node`] too, so that a
//! test node is exactly what a real agent sends.

use crate::api::Heartbeat;
use crate::model::{Condition, Labels, Node, NodeInfo, NodeResources, NodeStatus, ObjectMeta, Taint, Time, conditions};

/// The label every node carries with its own name, as in Kubernetes.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeDescription {
    pub name: String,
    pub labels: Labels,
    pub taints: Vec<Taint>,
    pub capacity: NodeResources,
    pub address: String,
    pub agent_endpoint: String,
    pub info: NodeInfo,
}

fn ready_condition(now: Time) -> Condition {
    Condition {
        type_: conditions::NODE_READY.to_string(),
        status: conditions::TRUE.to_string(),
        reason: "AgentReady".to_string(),
        message: "shepherd-agent is posting ready status".to_string(),
        last_transition_time: Some(now),
        last_heartbeat_time: Some(now),
    }
}

impl NodeDescription {
    /// A node of `capacity` and nothing else said about it.
    pub fn new(name: &str, capacity: NodeResources) -> NodeDescription {
        NodeDescription { name: name.to_string(), capacity, ..NodeDescription::default() }
    }

    /// The body of the agent's registration: Ready, allocatable = capacity. The server
    /// stamps the first heartbeat when it stores it.
    pub fn to_node(&self, now: Time) -> Node {
        let mut labels = self.labels.clone();
        labels.entry(HOSTNAME_LABEL.to_string()).or_insert_with(|| self.name.clone());
        Node {
            kind: "Node".to_string(),
            metadata: ObjectMeta { name: self.name.clone(), labels, ..Default::default() },
            status: NodeStatus {
                conditions: vec![ready_condition(now)],
                capacity: self.capacity,
                allocatable: self.capacity,
                taints: self.taints.clone(),
                address: self.address.clone(),
                agent_endpoint: self.agent_endpoint.clone(),
                node_info: self.info.clone(),
                ..Default::default()
            },
        }
    }

    pub fn heartbeat(&self, now: Time) -> Heartbeat {
        Heartbeat { conditions: vec![ready_condition(now)], capacity: Some(self.capacity), allocatable: Some(self.capacity) }
    }
}
