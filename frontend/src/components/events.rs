//! Events, newest first, live: what the API server, the scheduler and the agents reported.

use std::rc::Rc;

use shared::model::{Event, Kind};
use shared::words::{age, last_seen};
use yew::prelude::*;

use crate::browser;
use crate::components::table_head::table_head;
use crate::context::{use_cluster, use_session, use_watch};
use crate::route::Route;
use crate::view::stages::in_namespace;
use shared::sort;

/// The table shows at most this many rows.
const MAX_ROWS: usize = 500;

#[component]
pub fn Events() -> Html {
    let session = use_session();
    let cluster = use_cluster();
    use_watch(Kind::Event, &session, &cluster, true);
    let warnings_only = use_state(|| false);
    let namespace = session.namespace.clone();
    let mut events: Vec<Rc<Event>> = cluster
        .events
        .values()
        .filter(|e| in_namespace(&e.metadata.namespace, namespace.as_deref()))
        .filter(|e| !*warnings_only || e.type_ == "Warning")
        .cloned()
        .collect();
    sort::by_cached_key(&mut events, |e| std::cmp::Reverse((last_seen(e), e.metadata.resource_version)));
    let total = events.len();
    let now = browser::now();
    let toggle = {
        let warnings_only = warnings_only.clone();
        Callback::from(move |_| warnings_only.set(!*warnings_only))
    };
    html! {
        <section class="page" data-testid="events-page">
            <header class="page-head">
                <h1>{ "Events" }</h1>
                <label><input type="checkbox" checked={*warnings_only} onchange={toggle} />{ " warnings only" }</label>
                <span class="muted">{ format!("{total} event(s)") }</span>
            </header>
            <table class="grid">
                { table_head(&["Last seen", "Type", "Reason", "Object", "Source", "Count", "Message"]) }
                <tbody>
                    { for events.iter().take(MAX_ROWS).map(|e| {
                        let object = &e.involved_object;
                        let target = if object.kind == "Pod" {
                            let ns = if object.namespace.is_empty() { e.metadata.namespace.clone() } else { object.namespace.clone() };
                            html! { <a href={Route::Pod { namespace: ns, name: object.name.clone() }.href()}>{ object.short() }</a> }
                        } else {
                            html! { { object.short() } }
                        };
                        html! {
                            <tr class={classes!((e.type_ == "Warning").then_some("warning"))} data-testid="event-row" data-reason={e.reason.clone()}>
                                <td>{ last_seen(e).map(|t| age(now, Some(t))).unwrap_or_default() }</td>
                                <td>{ &e.type_ }</td><td>{ &e.reason }</td><td>{ target }</td><td>{ &e.source }</td>
                                <td class="num">{ e.count }</td><td>{ &e.message }</td>
                            </tr>
                        }
                    }) }
                </tbody>
            </table>
            if total > MAX_ROWS { <p class="muted">{ format!("Showing the newest {MAX_ROWS} of {total}.") }</p> }
            if total == 0 { <p class="muted">{ "No events yet." }</p> }
        </section>
    }
}
