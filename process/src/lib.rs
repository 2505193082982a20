//! What Shepherd's binaries (`shepherd`, `shepherd-agent`, the agent's benches) share as
//! processes, so that each is written once.
//!
//! Layout:
//! - [`logging`]: log lines to standard error, and the exit status of a run;
//! - [`signal`]: shutdown on SIGINT (Ctrl-C) or SIGTERM.

pub mod logging;
pub mod signal;
