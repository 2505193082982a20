//! Conditions of pods, nodes and deployments: their shape, the types and reasons named as in
//! Kubernetes, and how one is found and set.

use serde::{Deserialize, Serialize};

use super::meta::Time;

/// Condition types and reasons, named as in Kubernetes.
pub mod conditions {
    pub const POD_SCHEDULED: &str = "PodScheduled";
    pub const READY: &str = "Ready";
    pub const CONTAINERS_READY: &str = "ContainersReady";
    pub const INITIALIZED: &str = "Initialized";
    pub const NODE_READY: &str = "Ready";
    pub const UNSCHEDULABLE: &str = "Unschedulable";
    pub const TRUE: &str = "True";
    pub const FALSE: &str = "False";
    pub const UNKNOWN: &str = "Unknown";
}

/// A pod or node condition: `{type, status, reason, message, last_transition_time}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, deserialize_with = "super::meta::de_time", skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Deployments only: when the condition was last written with news (a rollout's
    /// progress), from which the progress deadline counts.
    #[serde(default, deserialize_with = "super::meta::de_time", skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// Nodes only: when the agent last confirmed this condition.
    #[serde(default, deserialize_with = "super::meta::de_time", skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_time: Option<Time>,
}

/// Finds a condition by type.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Sets a condition, keeping `last_transition_time` unless the status changes.
/// Returns whether anything changed.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition, now: Time) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(existing) => {
            new.last_transition_time = if existing.status == new.status { existing.last_transition_time } else { Some(now) };
            if new.last_heartbeat_time.is_none() {
                new.last_heartbeat_time = existing.last_heartbeat_time;
            }
            let changed = *existing != new;
            *existing = new;
            changed
        }
        None => {
            new.last_transition_time = Some(now);
            conditions.push(new);
            true
        }
    }
}
