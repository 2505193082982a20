//! The Shepherd dashboard: a Yew single-page app that shows scheduling live, applies
//! manifests and explains every decision; its simulator runs `shared::scheduler` in the page.
//!
//! Layout:
//! - [`store`]: the cluster cache, a `Reducible` fed by lists and watch events;
//! - [`watch`]: the list → watch → resume / re-list state machine and event decoding;
//! - [`sse`]: the Server-Sent Events parser the watch stream reads through;
//! - [`view`]: view-model: stages, pens, timeline, decision table, Pending reasons;
//! - [`route`]: pages and their `#/…` URLs.

pub mod route;
pub mod sse;
pub mod store;
pub mod view;
pub mod watch;

use yew::prelude::*;

#[component]
fn App() -> Html {
    html! { <h1>{ "Shepherd" }</h1> }
}

/// Mounts the dashboard on the document body.
pub fn start() {
    yew::Renderer::<App>::new().render();
}
