//! The Shepherd dashboard: a Yew single-page app that shows scheduling live, applies
//! manifests and explains every decision; its simulator runs `shared::scheduler` in the page.
//!
//! Layout:
//! - [`store`]: the cluster cache, a `Reducible` fed by lists and watch events, each kind kept
//!   in a `shared::cache` under the client crate's staleness rule;
//! - [`api`]: every network call over the browser's fetch: JSON requests with the token,
//!   error answers read by `shared::api_error`, the watch loop (driving `shared::watch`'s
//!   state machine over `shared::sse`), followed logs;
//! - [`session`]: route, namespace, token and server info, a `Reducible`;
//! - [`view`]: view-model: stages and pens ([`view::stages`]), times ([`view::time`]), the pod
//!   page's timeline and Pending reason ([`view::pod_detail`]), the decision table
//!   ([`view::decision_table`]);
//! - [`plan`]: a manifest checked and validated before it is applied;
//! - [`sim`]: the simulator: its form inputs ([`sim::input`]), one scheduler over a made-up
//!   cluster ([`sim::engine`]), and both schedulers side by side as yew state ([`sim::lab`]);
//! - [`route`]: pages and their `#/…` URLs;
//! - [`context`], [`browser`], [`components`]: the yew side.

pub mod api;
pub mod browser;
pub mod components;
pub mod context;
pub mod plan;
pub mod route;
pub mod session;
pub mod sim;
pub mod store;
pub mod view;

/// Mounts the dashboard on the document body.
pub fn start() {
    yew::Renderer::<components::app::App>::new().render();
}
