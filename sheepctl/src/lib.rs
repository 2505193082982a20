//! `sheepctl`, the kubectl-style command line for Shepherd. It is only a REST client.
//!
//! Layout:
//! - [`cli`]: every flag and subcommand (clap derive), and nothing else;
//! - [`settings`]: raw flags turned into validated settings, durations and `KIND/NAME`s;
//! - [`client`]: the HTTP client, the SSE watch stream and one-line errors;
//! - [`watch`]: list → watch → resume / re-list on 410 / fall back to polling;
//! - [`files`]: manifests from files, directories and stdin (parsing is `shared::manifest`);
//! - [`table`], [`view`]: tables, ages, and how each kind and each pod stage reads;
//! - [`condition`]: what `wait --for` means and whether an object meets it;
//! - [`progress`]: spinner on a terminal, plain lines elsewhere;
//! - [`commands`]: one small file per subcommand.

pub mod cli;
pub mod client;
pub mod commands;
pub mod condition;
pub mod files;
pub mod progress;
pub mod settings;
pub mod table;
pub mod view;
pub mod watch;
