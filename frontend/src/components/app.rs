//! The root component: owns the session and cluster reducers, provides them as contexts,
//! follows the URL hash, keeps pods and nodes watched, and picks the page.

use shared::api::{Info, paths};
use shared::model::Kind;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use yew::prelude::*;

use crate::api::ApiError;
use crate::browser;
use crate::components::apply::Apply;
use crate::components::cluster::ClusterView;
use crate::components::deployments::Deployments;
use crate::components::events::Events;
use crate::components::login::Login;
use crate::components::nav::Nav;
use crate::components::nodes::Nodes;
use crate::components::pod_detail::PodDetail;
use crate::components::services::Services;
use crate::components::simulator::Simulator;
use crate::context::{ClusterContext, SessionContext, use_watch};
use crate::route::Route;
use crate::session::{NAMESPACE_KEY, Session, SessionAction, TOKEN_KEY};
use crate::store::{Cluster, SyncState};

/// How often the server's info is asked again: the leader election's default lease duration.
const INFO_REFRESH_MS: u32 = 15_000;

#[component]
pub fn App() -> Html {
    let session =
        use_reducer(|| Session::restore(Route::parse(&browser::location_hash()), browser::load(TOKEN_KEY), browser::load(NAMESPACE_KEY)));
    let cluster = use_reducer(Cluster::default);

    {
        let dispatcher = session.dispatcher();
        use_effect_with((), move |_| {
            let listener = Closure::<dyn Fn()>::new(move || {
                dispatcher.dispatch(SessionAction::Navigate(Route::parse(&browser::location_hash())));
            });
            let window = web_sys::window();
            if let Some(window) = &window {
                let _ = window.add_event_listener_with_callback("hashchange", listener.as_ref().unchecked_ref());
            }
            move || {
                if let Some(window) = window {
                    let _ = window.remove_event_listener_with_callback("hashchange", listener.as_ref().unchecked_ref());
                }
            }
        });
    }
    use_effect_with(session.token.clone(), |token| browser::save(TOKEN_KEY, token.as_deref()));
    use_effect_with(session.namespace_setting().to_string(), |ns| browser::save(NAMESPACE_KEY, Some(ns)));
    {
        let session = session.clone();
        use_effect_with(session.token.clone(), move |_| {
            let client = session.client();
            let dispatcher = session.dispatcher();
            let fetch = move || {
                let (client, dispatcher) = (client.clone(), dispatcher.clone());
                wasm_bindgen_futures::spawn_local(async move {
                    let answer = match client.get::<Info>(paths::INFO).await {
                        Ok(info) => Ok(info),
                        Err(ApiError::Unauthorized(message)) => {
                            dispatcher.dispatch(SessionAction::Unauthorized(message));
                            return;
                        }
                        Err(error) => Err(error.to_string()),
                    };
                    dispatcher.dispatch(SessionAction::ServerInfo(answer));
                });
            };
            fetch();
            // Asked again now and then, so that the header follows a change of leader.
            let again = gloo_timers::callback::Interval::new(INFO_REFRESH_MS, fetch);
            move || drop(again)
        });
    }
    use_effect_with((), |_| browser::mark_document("data-first-render-ms", &(browser::performance_now().round() as i64).to_string()));

    let live = session.route.needs_server();
    use_watch(Kind::Pod, &session, &cluster, live);
    use_watch(Kind::Node, &session, &cluster, live);

    let page = match &session.route {
        Route::Cluster => html! { <ClusterView /> },
        Route::Apply => html! { <Apply /> },
        Route::Pod { namespace, name } => html! { <PodDetail namespace={namespace.clone()} name={name.clone()} /> },
        Route::Events => html! { <Events /> },
        Route::Deployments => html! { <Deployments /> },
        Route::Services => html! { <Services /> },
        Route::Nodes => html! { <Nodes /> },
        Route::Simulator => html! { <Simulator /> },
        Route::NotFound(path) => html! {
            <section class="page" data-testid="not-found">
                <h1>{ "No such page" }</h1>
                <p>{ format!("Nothing lives at #/{path}. ") }<a href={Route::Cluster.href()}>{ "Back to the cluster" }</a></p>
            </section>
        },
    };
    let login = session.login.clone();
    let trouble = match (&cluster.pods.sync, live) {
        (SyncState::Retrying { attempt, error }, true) => Some(format!(
            "Lost the watch stream (attempt {attempt}): {error}. Reconnecting and resuming from the last resource version; the view may be stale until then."
        )),
        _ => None,
    };

    html! {
        <ContextProvider<SessionContext> context={session}>
            <ContextProvider<ClusterContext> context={cluster}>
                <Nav />
                <main>
                    if let Some(text) = trouble { <p class="banner" data-testid="stream-trouble">{ text }</p> }
                    { page }
                </main>
                if let Some(message) = login { <Login {message} /> }
            </ContextProvider<ClusterContext>>
        </ContextProvider<SessionContext>>
    }
}
