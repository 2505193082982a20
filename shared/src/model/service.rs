//! Services: the selector and ports users write, and the endpoints the controller keeps.

use serde::{Deserialize, Serialize};

use super::meta::{Labels, ObjectMeta};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Service {
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: ServiceSpec,
    pub status: ServiceStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ServiceSpec {
    pub selector: Labels,
    pub ports: Vec<ServicePort>,
    /// [`CLUSTER_IP`] (the default) or [`NODE_PORT`].
    #[serde(rename = "type")]
    pub type_: String,
    /// The Service's virtual address from the service range, [`HEADLESS`] for a headless
    /// Service, empty until the server allocates one.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster_ip: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ServicePort {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    pub port: i32,
    pub target_port: i32,
    /// The port every node serves the Service on (type `NodePort`), 0 until allocated.
    #[serde(skip_serializing_if = "is_zero")]
    pub node_port: i32,
    /// `tcp`/`TCP` or `udp`/`UDP`: the reference writes it in lower case.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub protocol: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ServiceStatus {
    /// The running, ready pods the selector matches, kept by the endpoints controller.
    pub endpoints: Vec<Endpoint>,
    /// The matching pods that have an address but are not ready (Kubernetes'
    /// `notReadyAddresses`): they get no traffic until their readiness probe passes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_ready_endpoints: Vec<Endpoint>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Endpoint {
    pub ip: String,
    pub pod: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub node_name: String,
}

/// The type of a Service reached on its cluster IP only, the default.
pub const CLUSTER_IP: &str = "ClusterIP";
/// The type of a Service also served on a port of every node's address.
pub const NODE_PORT: &str = "NodePort";
/// The `cluster_ip` of a headless Service: no virtual address, its name resolves to the pods.
pub const HEADLESS: &str = "None";

impl ServiceSpec {
    pub fn is_node_port(&self) -> bool {
        self.type_ == NODE_PORT
    }

    /// The virtual address the proxy serves, once allocated (none for a headless Service).
    pub fn virtual_ip(&self) -> Option<&str> {
        (!self.cluster_ip.is_empty() && self.cluster_ip != HEADLESS).then_some(self.cluster_ip.as_str())
    }
}

impl ServicePort {
    /// The protocol as Kubernetes and iptables name it: `TCP` (the default) or `UDP`.
    pub fn protocol_name(&self) -> String {
        if self.protocol.is_empty() { "TCP".into() } else { self.protocol.to_ascii_uppercase() }
    }
}

fn is_zero(port: &i32) -> bool {
    *port == 0
}
