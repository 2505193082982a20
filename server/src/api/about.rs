//! What the server says about itself: liveness, readiness, `/api/v1/info` and the
//! Prometheus metrics.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use shared::api::Info;
use shared::model::Kind;

use crate::error::ApiError;
use crate::state::AppState;

pub(super) async fn healthz() -> &'static str {
    "ok"
}

pub(super) async fn readyz(State(state): State<AppState>) -> Response {
    if state.shutdown.is_cancelled() {
        return ApiError::unavailable("the server is shutting down").into_response();
    }
    "ok".into_response()
}

pub(super) async fn info(State(state): State<AppState>) -> Json<Info> {
    let now = chrono::Utc::now();
    Json(Info {
        name: "shepherd".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        started_at: Some(state.started_at),
        resource_version: state.store.revision(),
        store: state.store.backend().into(),
        auth_required: !state.config.tokens.is_empty(),
        nodes: state.store.count(Kind::Node),
        pods: state.store.count(Kind::Pod),
        scheduler_profile: state.config.scheduler_profile.clone(),
        node_monitor_grace_ms: u64::try_from(state.config.node_monitor_grace.as_millis()).unwrap_or(u64::MAX),
        cluster_id: state
            .store
            .get(&crate::store::Key::new(Kind::Namespace, "", shared::model::DEFAULT_NAMESPACE))
            .map(|namespace| namespace.metadata().uid.clone())
            .unwrap_or_default(),
        server_identity: state.identity.clone(),
        leader: leader(&*state.store, now),
        servers: crate::identity::servers(&*state.store, now),
    })
}

/// The holder of the leader's lease, while its renewals are fresh by this server's clock.
fn leader(store: &dyn crate::store::Store, now: shared::model::Time) -> String {
    match store.get(&crate::leader_election::control_plane_lease_key()).as_deref() {
        Some(shared::model::Object::Lease(lease)) => lease.spec.holder_at(now).unwrap_or_default().to_string(),
        _ => String::new(),
    }
}

pub(super) async fn metrics(State(state): State<AppState>) -> Response {
    let mut response = Body::from(state.metrics.render(&*state.store)).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(crate::metrics::CONTENT_TYPE));
    response
}
