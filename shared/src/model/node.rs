//! Nodes: what an agent reports of its host (conditions, capacity, taints, runtime) and the
//! status word's raw material.

use serde::{Deserialize, Serialize};

use super::condition::{Condition, conditions, find_condition};
use super::meta::{ObjectMeta, Time, is_false};
use super::resources::NodeResources;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Node {
    pub kind: String,
    pub metadata: ObjectMeta,
    pub status: NodeStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct NodeStatus {
    /// `Ready` with status `True`, `False` or `Unknown`, written by the agent's status
    /// report and by the node lifecycle controller.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    pub capacity: NodeResources,
    pub allocatable: NodeResources,
    /// When the agent last reported this status (registration or a status heartbeat). Its
    /// frequent proof of life is its [`Lease`](super::lease::Lease)'s renewal instead, which leaves the node alone.
    #[serde(default, deserialize_with = "super::meta::de_time", skip_serializing_if = "Option::is_none")]
    pub last_heartbeat: Option<Time>,
    /// Cordoned: running pods stay, new pods are not scheduled here.
    #[serde(skip_serializing_if = "is_false")]
    pub unschedulable: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// The address the agent reports for its host; pods' `host_ip`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub address: String,
    /// Where the agent's own HTTP API (logs) listens, e.g. `http://127.0.0.1:10250`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub agent_endpoint: String,
    pub node_info: NodeInfo,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct NodeInfo {
    /// `docker` or `simulated`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub runtime: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub runtime_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub agent_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub os: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub arch: String,
    #[serde(skip_serializing_if = "is_false")]
    pub simulated: bool,
    /// How its pods get their network: `cni` or `docker` (empty when simulated).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub pod_network: String,
}

/// The annotation that shows a node's [`NodeInfo::pod_network`] through the Kubernetes API,
/// whose node has no field for it, as network plugins annotate their nodes.
pub const POD_NETWORK_ANNOTATION: &str = "shepherd/pod-network";

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Taint {
    pub key: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// One of [`TAINT_EFFECTS`].
    pub effect: String,
}

/// The effects a taint may have.
pub const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

impl Node {
    /// The `Ready` condition's status, `Unknown` when the node never reported one.
    pub fn ready_status(&self) -> &str {
        find_condition(&self.status.conditions, conditions::NODE_READY).map_or(conditions::UNKNOWN, |c| c.status.as_str())
    }
}
