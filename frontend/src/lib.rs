//! The Shepherd dashboard.

use yew::prelude::*;

#[component]
fn App() -> Html {
    html! { <h1>{ "Shepherd" }</h1> }
}

/// Mounts the dashboard on the document body.
pub fn start() {
    yew::Renderer::<App>::new().render();
}
