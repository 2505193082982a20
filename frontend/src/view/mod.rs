//! View-model: what the pages show, computed from the cache as plain data. No yew here, so
//! native tests cover it.
//!
//! - [`stages`]: the stages of a pod in the seed's words, and the node pens of the cluster page;
//! - [`time`]: `T+` offsets, deltas and the wall clock as the pages print them;
//! - [`pod_detail`]: a pod's events, timeline, conditions and plain-words Pending reason;
//! - [`decision_table`]: the scheduler's explanation as a table;
//! - [`rollout`]: a deployment's ReplicaSets side by side and its counts over time, charted.

pub mod decision_table;
#[cfg(test)]
mod fixtures;
pub mod pod_detail;
pub mod rollout;
pub mod stages;
pub mod time;
