//! The components, one per file: the app shell, then one per page, then shared pieces.
//!
//! Layout:
//! - [`app`]: the root: session and cluster reducers as contexts, the URL hash, the watches;
//! - pages: [`cluster`] (pens and the meadow), [`nodes`] (cordon, uncordon), [`pod_detail`]
//!   (why Pending, timeline, decision), [`deployments`] (scale, a rollout drawn, undo, pause, resume), [`services`] (endpoints),
//!   [`events`], [`apply`] (a manifest checked, sent and followed) and [`simulator`];
//! - shared pieces: [`nav`] (the top bar), [`login`] (the token dialog), [`command_box`] (a
//!   command run in a pod's container), [`decision_table`],
//!   [`node_pen`] (a node as a pen), [`sheep`] (a pod as a sheep), [`stage_board`] (pods in
//!   a column per stage), [`replica_sets`] (a deployment's ReplicaSets side by side),
//!   [`rollout_chart`] (its counts over time) and [`table_head`] (a table's header row).

pub mod app;
pub mod apply;
pub mod cluster;
pub mod command_box;
pub mod decision_table;
pub mod deployments;
pub mod events;
pub mod login;
pub mod nav;
pub mod node_pen;
pub mod nodes;
pub mod pod_detail;
pub mod replica_sets;
pub mod rollout_chart;
pub mod services;
pub mod sheep;
pub mod simulator;
pub mod stage_board;
pub mod table_head;
