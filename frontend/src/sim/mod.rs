//! The workshop simulator: the server's own scheduler and scheduling queue (`shared::scheduler`)
//! run in the page on made-up nodes and pods. Spread and bin-pack get the same inputs, side by
//! side; a 5,000-node preset shows percentageOfNodesToScore at work. Pure: callers pass `now`.
//!
//! - [`input`]: the form's fields read into labels, taints, tolerations and quantities;
//! - [`engine`]: one scheduler, its queue and the cluster they see, stepped as the server's loop;
//! - [`lab`]: both schedulers fed alike, the presets, and the yew reducer.

pub mod engine;
#[cfg(test)]
mod fixtures;
pub mod input;
pub mod lab;
