//! The components, one per file: the app shell, then one per page, then shared pieces.

pub mod app;
pub mod apply;
pub mod cluster;
pub mod decision_table;
pub mod deployments;
pub mod events;
pub mod login;
pub mod nav;
pub mod node_pen;
pub mod nodes;
pub mod pod_detail;
pub mod services;
pub mod sheep;
pub mod simulator;
pub mod stage_board;
pub mod table_head;
