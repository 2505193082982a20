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
    /// `ClusterIP` (the default) or `NodePort`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The Service's virtual address from the service range, `None` for a headless
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

fn is_zero(port: &i32) -> bool {
    *port == 0
}
