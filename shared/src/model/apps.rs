//! Deployments, their pod template, strategy and status, and the scale subresource.

use serde::{Deserialize, Serialize};

use super::condition::Condition;
use super::meta::{ObjectMeta, is_false, is_zero, is_zero_i32};
use super::pod::PodSpec;
use crate::selector::LabelSelector;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Deployment {
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: DeploymentSpec,
    pub status: DeploymentStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct DeploymentSpec {
    pub replicas: i32,
    /// An equality map as in the reference (`{"app": "web"}`), or
    /// `{match_labels, match_expressions}` for set-based selection.
    pub selector: LabelSelector,
    pub template: PodTemplateSpec,
    /// How old pods make way for new ones; Kubernetes' defaults when left out.
    pub strategy: DeploymentStrategy,
    /// How long a new pod must have been ready before it counts as available.
    #[serde(skip_serializing_if = "is_zero_i32")]
    pub min_ready_seconds: i32,
    /// Old ReplicaSets kept for `rollout undo` (10 when left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// Seconds without progress before the rollout is reported stuck (600 when left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress_deadline_seconds: Option<i32>,
    /// A paused deployment scales but rolls nothing out.
    #[serde(skip_serializing_if = "is_false")]
    pub paused: bool,
}

/// `RollingUpdate` (the default) or `Recreate`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct DeploymentStrategy {
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateDeployment>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct RollingUpdateDeployment {
    /// Pods above `replicas` a rollout may create: a count or a percentage (`"25%"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// Pods below `replicas` a rollout may leave unavailable: a count or a percentage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
}

/// A count (`1`) or a percentage (`"25%"`), as Kubernetes' `IntOrString`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum IntOrString {
    Int(i32),
    String(String),
}

impl std::fmt::Display for IntOrString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IntOrString::Int(n) => write!(f, "{n}"),
            IntOrString::String(s) => f.write_str(s),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct PodTemplateSpec {
    pub metadata: ObjectMeta,
    pub spec: PodSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct DeploymentStatus {
    pub replicas: i32,
    /// Pods of the newest ReplicaSet, the one that runs the current template.
    pub updated_replicas: i32,
    pub ready_replicas: i32,
    pub available_replicas: i32,
    pub unavailable_replicas: i32,
    #[serde(skip_serializing_if = "is_zero")]
    pub observed_generation: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Bumped when the name of a new ReplicaSet is taken by another: it salts the hash.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
}

/// The body of `GET/PUT …/deployments/{name}/scale`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Scale {
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: ScaleSpec,
    pub status: ScaleStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ScaleSpec {
    pub replicas: i32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ScaleStatus {
    pub replicas: i32,
}
