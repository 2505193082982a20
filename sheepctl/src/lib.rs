//! `sheepctl`, the kubectl-style command line for Shepherd. It talks to the server only
//! through `shepherd-client`, and its words (AGE, STATUS, pending reasons) are `shared::words`.
//!
//! Layout:
//! - [`cli`]: every flag and subcommand (clap derive), and nothing else;
//! - [`settings`]: raw flags turned into validated settings, durations and `KIND/NAME`s;
//! - [`files`]: manifests from files, directories and stdin (parsing is `shared::manifest`);
//! - [`table`], [`view`]: tables, and how each kind reads in them;
//! - [`condition`]: what `wait --for` means and whether an object meets it;
//! - [`progress`]: spinner on a terminal, plain lines elsewhere;
//! - [`terminal`]: the cluster's text with its control characters shown, not obeyed;
//! - [`tty`]: the local terminal's raw mode and size, for `exec -t`;
//! - [`commands`]: one small file per subcommand.

pub mod cli;
pub mod commands;
pub mod condition;
pub mod files;
pub mod progress;
pub mod settings;
pub mod table;
pub mod terminal;
pub mod tty;
pub mod view;
