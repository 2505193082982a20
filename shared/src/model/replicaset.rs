//! ReplicaSets: a set of pods from one template, kept at `spec.replicas`. A deployment rolls
//! out by moving replicas from its old ReplicaSets to the new one.

use serde::{Deserialize, Serialize};

use super::apps::PodTemplateSpec;
use super::condition::Condition;
use super::meta::{ObjectMeta, is_zero, is_zero_i32};
use crate::selector::LabelSelector;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ReplicaSet {
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: ReplicaSetSpec,
    pub status: ReplicaSetStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ReplicaSetSpec {
    pub replicas: i32,
    /// How long a new pod must have been ready before it counts as available.
    #[serde(skip_serializing_if = "is_zero_i32")]
    pub min_ready_seconds: i32,
    pub selector: LabelSelector,
    pub template: PodTemplateSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ReplicaSetStatus {
    pub replicas: i32,
    /// Pods that carry every label of the template, not just the selector's.
    pub fully_labeled_replicas: i32,
    pub ready_replicas: i32,
    /// Ready for at least `min_ready_seconds`.
    pub available_replicas: i32,
    #[serde(skip_serializing_if = "is_zero")]
    pub observed_generation: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
