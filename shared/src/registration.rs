//! What an agent says about its node: the Node object it registers and the heartbeat it
//! sends. Test fixtures register nodes through [`NodeDescription::to_node`] too, so that a
//! test node is exactly what a real agent sends.

use crate::api::Heartbeat;
use crate::model::{Condition, Labels, Node, NodeInfo, NodeResources, NodeStatus, ObjectMeta, Taint, Time, conditions};

/// The label every node carries with its own name, as in Kubernetes.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// Who registers a node: an admin (or anyone, on an open server), or the node itself with
/// its node token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registrant {
    Admin,
    OwnNode,
}

/// `labels` with [`HOSTNAME_LABEL`] set to `name`. The server sets it on every node write,
/// whoever writes, so that a selector on it picks that node and no other.
pub fn with_own_hostname(name: &str, mut labels: Labels) -> Labels {
    labels.insert(HOSTNAME_LABEL.to_string(), name.to_string());
    labels
}

/// The labels of node `name` once `registrant` has registered it with `sent`; `stored` are
/// its labels when it exists already. A node labels itself only when it creates its node, as
/// the kubelet's `--node-labels`; after that only an admin changes them (Kubernetes'
/// NodeRestriction), so that a node cannot take another node's labels, and its pods with
/// them. An admin's labels are merged into the stored ones.
pub fn registered_labels(name: &str, stored: Option<&Labels>, sent: Labels, registrant: Registrant) -> Labels {
    let labels = match (stored, registrant) {
        (None, _) => sent,
        (Some(stored), Registrant::OwnNode) => stored.clone(),
        (Some(stored), Registrant::Admin) => {
            let mut merged = stored.clone();
            merged.extend(sent);
            merged
        }
    };
    with_own_hostname(name, labels)
}

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
        last_update_time: None,
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
        Node {
            kind: "Node".to_string(),
            metadata: ObjectMeta {
                name: self.name.clone(),
                labels: with_own_hostname(&self.name, self.labels.clone()),
                ..Default::default()
            },
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

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_hostname_label_is_always_the_nodes_own_name() {
        let sent = labels(&[(HOSTNAME_LABEL, "n2"), ("disk", "ssd")]);
        for registrant in [Registrant::Admin, Registrant::OwnNode] {
            let created = registered_labels("n1", None, sent.clone(), registrant);
            assert_eq!(created, labels(&[(HOSTNAME_LABEL, "n1"), ("disk", "ssd")]), "{registrant:?}");
        }
        assert_eq!(with_own_hostname("n1", Labels::new()), labels(&[(HOSTNAME_LABEL, "n1")]));
        let description = NodeDescription { labels: sent, ..NodeDescription::new("n1", NodeResources::default()) };
        assert_eq!(description.to_node(Time::default()).metadata.labels[HOSTNAME_LABEL], "n1");
    }

    #[test]
    fn a_node_relabels_only_the_node_it_creates_and_an_admin_merges() {
        let stored = labels(&[(HOSTNAME_LABEL, "n1"), ("zone", "a")]);
        let sent = labels(&[(HOSTNAME_LABEL, "n2"), ("zone", "b"), ("disk", "ssd")]);
        assert_eq!(registered_labels("n1", Some(&stored), sent.clone(), Registrant::OwnNode), stored);
        assert_eq!(
            registered_labels("n1", Some(&stored), sent, Registrant::Admin),
            labels(&[(HOSTNAME_LABEL, "n1"), ("zone", "b"), ("disk", "ssd")])
        );
    }
}
