//! The top bar: page links, the namespace switcher, the watch stream's light and the server.

use std::collections::BTreeSet;

use shared::api::{List, paths};
use shared::model::{Kind, Namespace};
use web_sys::HtmlSelectElement;
use yew::prelude::*;

use crate::api::ApiError;
use crate::components::sheep::sheep_icon;
use crate::context::{use_cluster, use_session};
use crate::route::Route;
use crate::session::{ALL_NAMESPACES, Server, SessionAction};
use crate::store::SyncState;

const LINKS: [(Route, &str, &str); 7] = [
    (Route::Cluster, "Cluster", "nav-cluster"),
    (Route::Apply, "Apply", "nav-apply"),
    (Route::Events, "Events", "nav-events"),
    (Route::Deployments, "Deployments", "nav-deployments"),
    (Route::Services, "Services", "nav-services"),
    (Route::Nodes, "Nodes", "nav-nodes"),
    (Route::Simulator, "Simulator", "nav-simulator"),
];

#[component]
pub fn Nav() -> Html {
    let session = use_session();
    let cluster = use_cluster();
    let listed = use_state(Vec::<String>::new);
    {
        let listed = listed.clone();
        let session = session.clone();
        use_effect_with(session.token.clone(), move |_| {
            let client = session.client();
            wasm_bindgen_futures::spawn_local(async move {
                match client.get::<List<Namespace>>(&paths::collection(Kind::Namespace, None)).await {
                    Ok(list) => listed.set(list.items.into_iter().map(|n| n.metadata.name).collect()),
                    Err(ApiError::Unauthorized(message)) => session.dispatch(SessionAction::Unauthorized(message)),
                    Err(_) => {}
                }
            });
        });
    }

    // Extended rather than collected: collecting into a set sorts first, with a copy of the
    // sort code of its own in the bundle.
    let mut namespaces = BTreeSet::new();
    namespaces.extend(listed.iter().cloned());
    namespaces.extend(cluster.pods.values().map(|p| p.metadata.namespace.clone()));
    namespaces.insert(shared::model::DEFAULT_NAMESPACE.to_string());
    if let Some(ns) = &session.namespace {
        namespaces.insert(ns.clone());
    }
    let onchange = {
        let session = session.clone();
        Callback::from(move |e: Event| {
            let value = e.target_unchecked_into::<HtmlSelectElement>().value();
            session.dispatch(SessionAction::SetNamespace(Some(value).filter(|v| v != ALL_NAMESPACES)));
        })
    };
    let selected = session.namespace_setting().to_string();

    let (light, light_text) = if !session.route.needs_server() {
        ("idle", "simulator: no server needed".to_string())
    } else {
        match (&cluster.pods.sync, &cluster.nodes.sync) {
            (SyncState::Unauthorized, _) | (_, SyncState::Unauthorized) => ("down", "the server needs a token".to_string()),
            (SyncState::Live, SyncState::Live) => ("live", "watching pods and nodes live".to_string()),
            (SyncState::Retrying { attempt, error }, _) | (_, SyncState::Retrying { attempt, error }) => {
                ("retrying", format!("reconnecting (attempt {attempt}): {error}"))
            }
            _ => ("connecting", "connecting".to_string()),
        }
    };
    let server = match &session.server {
        Server::Up(info) => crate::session::server_line(info),
        Server::Down(message) => format!("no server: {message}"),
        Server::Unknown => String::new(),
    };
    let logout = {
        let session = session.clone();
        Callback::from(move |_| session.dispatch(SessionAction::LogOut))
    };

    html! {
        <header class="topbar">
            <a class="brand" href={Route::Cluster.href()}>{ sheep_icon() }{ "Shepherd" }</a>
            <nav>
                { for LINKS.iter().map(|(route, label, id)| {
                    let active = same_page(route, &session.route);
                    html! { <a href={route.href()} class={classes!(active.then_some("active"))} data-testid={*id}>{ *label }</a> }
                }) }
            </nav>
            <label class="namespace">
                { "Namespace " }
                <select {onchange} data-testid="namespace-select">
                    <option value={ALL_NAMESPACES} selected={selected == ALL_NAMESPACES}>{ "All namespaces" }</option>
                    { for namespaces.iter().map(|ns| html! { <option value={ns.clone()} selected={*ns == selected}>{ ns }</option> }) }
                </select>
            </label>
            <span class={classes!("light", light)} title={light_text.clone()} data-testid="watch-status" data-state={light}>{ light }</span>
            <span class="server" title={server.clone()}>{ server.clone() }</span>
            if session.token.is_some() {
                <button class="link" onclick={logout} data-testid="logout">{ "Log out" }</button>
            }
        </header>
    }
}

/// The pod detail page belongs to the cluster tab.
fn same_page(link: &Route, current: &Route) -> bool {
    link == current || (matches!(link, Route::Cluster) && matches!(current, Route::Pod { .. }))
}
