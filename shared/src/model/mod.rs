//! The object model: Pod, Node, Lease, Deployment, ReplicaSet, Service, ConfigMap, Secret, Event, Binding, Namespace, one
//! file per kind family, every type re-exported here as `shared::model::X`.
//!
//! Layout:
//! - [`meta`]: what every object carries (metadata, references, labels, time);
//! - [`pod`], [`node`], [`lease`], [`apps`] (deployments and scale), [`replicaset`], [`service`], [`event`],
//!   [`namespace`], [`config`] (ConfigMaps and Secrets): a kind family each; [`volume`]: a pod's
//!   volumes and its containers' mounts;
//! - [`condition`]: conditions of pods, nodes and deployments, their types and reasons;
//! - [`resources`]: what a container asks for and a node offers;
//! - [`kind`]: the kinds the API serves, with plurals and aliases; [`object`]: one object of
//!   any kind and the `Resource` trait.
//!
//! The JSON shape is the original project's (`../shared/reference/examples/*.json`):
//! snake_case fields, memory in bytes, CPU in millicores. Every field a manifest may leave
//! out has a default, so the reference manifests deserialize unchanged.

pub mod apps;
pub mod condition;
pub mod config;
pub mod event;
pub mod kind;
pub mod lease;
pub mod meta;
pub mod namespace;
pub mod node;
pub mod object;
pub mod pod;
pub mod replicaset;
pub mod resources;
pub mod service;
pub mod volume;

pub use apps::{
    Deployment, DeploymentSpec, DeploymentStatus, DeploymentStrategy, IntOrString, PodTemplateSpec, RollingUpdateDeployment, Scale,
    ScaleSpec, ScaleStatus,
};
pub use condition::{Condition, conditions, find_condition, set_condition};
pub use config::{BinaryData, ConfigMap, MAX_CONFIG_BYTES, SECRET_TYPE_OPAQUE, Secret, StringData};
pub use event::{Event, NODE_SOURCE_PREFIX, event_types, node_event_source};
pub use kind::Kind;
pub use lease::{ADVERTISE_URL_ANNOTATION, IDENTITY_COMPONENT, IDENTITY_LABEL, Lease, LeaseSpec, SYSTEM_NAMESPACE};
pub(crate) use meta::de_time;
pub use meta::{KUBECTL_LAST_APPLIED, Labels, ManagedFieldsEntry, ManagedOperation, ObjectMeta, ObjectReference, OwnerReference, Time};
pub use namespace::{DEFAULT_NAMESPACE, Namespace, NamespaceStatus};
pub use node::{Node, NodeInfo, NodeStatus, POD_NETWORK_ANNOTATION, TAINT_EFFECTS, Taint};
pub use object::{Object, ObjectError, Resource};
pub use pod::{
    Binding, CONTAINER_CREATING, Container, ContainerPort, ContainerState, ContainerStatus, DEFAULT_GRACE_SECONDS, DNS_POLICIES,
    ENV_FIELD_PATHS, EnvFromSource, EnvSourceRef, EnvVar, EnvVarSource, ExecAction, FieldSelector, HttpGetAction, HttpHeader, KeySelector,
    PROBE_HOSTS, Pod, PodPhase, PodSpec, PodStage, PodStatus, Probe, ProbeKind, ProbePort, PullPolicy, RestartPolicy, TcpSocketAction,
    Toleration,
};
pub use replicaset::{ReplicaSet, ReplicaSetSpec, ReplicaSetStatus};
pub use resources::{NodeResources, ResourceRequirements};
pub use service::{Endpoint, Service, ServicePort, ServiceSpec, ServiceStatus};
pub use volume::{
    ConfigMapVolumeSource, DEFAULT_FILE_MODE, EmptyDirVolumeSource, HOST_PATH_TYPES, HostPathVolumeSource, KeyToPath, MAX_FILE_MODE,
    MEDIUM_MEMORY, SecretVolumeSource, Volume, VolumeMount, VolumeSource,
};
