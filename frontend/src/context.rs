//! The two app-wide contexts and the hooks pages use to reach them, to keep a kind watched
//! and to follow what the nodes use.

use std::rc::Rc;

use shared::metrics::NodeMetrics;
use shared::model::Kind;
use yew::prelude::*;

use crate::api::{self, ApiError, Cancel};
use crate::browser;
use crate::session::{Session, SessionAction};
use crate::store::{Cluster, ClusterAction, SyncState};

pub type SessionContext = UseReducerHandle<Session>;
pub type ClusterContext = UseReducerHandle<Cluster>;

#[hook]
pub fn use_session() -> SessionContext {
    use_context::<SessionContext>().expect("the session context is provided by App")
}

#[hook]
pub fn use_cluster() -> ClusterContext {
    use_context::<ClusterContext>().expect("the cluster context is provided by App")
}

/// Keeps the cache's collection of `kind` current while the calling component is mounted
/// and `enabled`: resumes from the revision the cache reached, restarts when the token changes.
#[hook]
pub fn use_watch(kind: Kind, session: &SessionContext, cluster: &ClusterContext, enabled: bool) {
    let token = session.token.clone();
    let session = session.dispatcher();
    let cluster = cluster.clone();
    use_effect_with((token, enabled), move |(token, enabled)| {
        let cancel = Cancel::default();
        let enabled = *enabled;
        let dispatch: Callback<ClusterAction> = cluster.dispatcher().into();
        if enabled {
            let resume = cluster.resource_version(kind);
            let on_unauthorized = Callback::from(move |message| session.dispatch(SessionAction::Unauthorized(message)));
            let client = api::Client::new(token.as_deref());
            wasm_bindgen_futures::spawn_local(api::watch(client, kind, resume, dispatch.clone(), on_unauthorized, cancel.clone()));
        }
        move || {
            cancel.cancel();
            if enabled {
                dispatch.emit(ClusterAction::Sync { kind, sync: SyncState::Idle });
            }
        }
    });
}

/// How often the nodes' usage is asked again. Usage is not in the watch stream, and each
/// request makes the server ask every node's agent, so the pens poll gently.
const NODE_METRICS_REFRESH_MS: u32 = 10_000;

/// What the nodes use (`metrics.k8s.io`), asked when the calling page mounts and again every
/// [`NODE_METRICS_REFRESH_MS`] while the page is visible. `None` until the first answer; a
/// failed request gives an empty list, so that no pen shows stale figures as current.
#[hook]
pub fn use_node_metrics(session: &SessionContext) -> Option<Rc<Vec<NodeMetrics>>> {
    let metrics = use_state(|| None::<Rc<Vec<NodeMetrics>>>);
    {
        let (metrics, token, session) = (metrics.setter(), session.token.clone(), session.dispatcher());
        use_effect_with(token, move |token| {
            let client = api::Client::new(token.as_deref());
            let fetch = move || {
                if !browser::page_visible() {
                    return;
                }
                let (client, metrics, session) = (client.clone(), metrics.clone(), session.clone());
                wasm_bindgen_futures::spawn_local(async move {
                    match client.node_metrics().await {
                        Ok(items) => metrics.set(Some(Rc::new(items))),
                        Err(ApiError::Unauthorized(message)) => session.dispatch(SessionAction::Unauthorized(message)),
                        Err(_) => metrics.set(Some(Rc::default())),
                    }
                });
            };
            fetch();
            let again = gloo_timers::callback::Interval::new(NODE_METRICS_REFRESH_MS, fetch);
            move || drop(again)
        });
    }
    (*metrics).clone()
}
