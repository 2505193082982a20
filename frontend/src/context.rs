//! The two app-wide contexts and the hooks pages use to reach them and to keep a kind watched.

use shared::model::Kind;
use yew::prelude::*;

use crate::api::{self, Cancel};
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
