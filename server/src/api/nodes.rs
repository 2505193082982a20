//! A node's subresources: the status heartbeat and status (the agent's, only for its own node) and
//! cordon / uncordon (admins').

use axum::Extension;
use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use shared::api::Heartbeat;
use shared::model::{Kind, Node, Object};

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::{BodyBytes, Params, parse_json, parse_object};
use crate::ops;
use crate::query::{ReadParams, WriteParams};
use crate::state::AppState;
use crate::store::{Key, Outcome, Txn, Write};

/// Commits a write of a node (none on a dry run) and answers the node.
async fn write_node(state: &AppState, write: Write, params: &WriteParams) -> ApiResult<Response> {
    let txn = Txn::new().with(write).dry_run(params.is_dry_run()?);
    let outcome = state.store.commit(txn).await?.pop();
    match outcome.as_ref().and_then(Outcome::object) {
        Some(o) => Ok(Json(&**o).into_response()),
        None => Err(ApiError::internal("the store returned no node")),
    }
}

pub async fn heartbeat(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
    Params(params): Params<WriteParams>,
    BodyBytes(body): BodyBytes,
) -> ApiResult<Response> {
    principal.may_write_node(&name)?;
    let beat: Heartbeat = if body.is_empty() { Heartbeat::default() } else { parse_json(&body, "Heartbeat")? };
    shared::validation::validate_heartbeat(&beat)
        .map_err(|details| ApiError::invalid(&format!("the heartbeat of node {name}"), details))?;
    write_node(&state, ops::heartbeat(&name, beat, chrono::Utc::now()), &params).await
}

pub async fn get_status(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Params(ReadParams {}): Params<ReadParams>,
) -> ApiResult<Json<Node>> {
    match state.store.get(&Key::new(Kind::Node, "", &name)).as_deref() {
        Some(Object::Node(n)) => Ok(Json(n.clone())),
        _ => Err(ApiError::not_found(format!("node {name:?} not found"))),
    }
}

/// `PUT /api/v1/nodes/{name}/status` with a whole node: its status is taken, except
/// cordon and taints, which belong to admins.
pub async fn put_status(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
    Params(params): Params<WriteParams>,
    BodyBytes(body): BodyBytes,
) -> ApiResult<Response> {
    principal.may_write_node(&name)?;
    let node: Node = parse_object(&body)?;
    if !carries_status(&body) {
        return Err(ApiError::bad_request(
            "the body has no \"status\": a status update sends the whole node, its status under \"status\" (send \"status\": {} to clear it)",
        ));
    }
    if !node.metadata.name.is_empty() && node.metadata.name != name {
        return Err(ApiError::bad_request(format!(
            "the body's metadata.name {:?} does not match the name {name:?} in the path",
            node.metadata.name
        )));
    }
    let mut check = node.clone();
    check.metadata.name = name.clone();
    shared::validation::validate_node(&check).map_err(|details| ApiError::invalid(&format!("the status of node {name}"), details))?;
    let write = ops::set_node_status(&name, node.status, node.metadata.resource_version, chrono::Utc::now());
    write_node(&state, write, &params).await
}

/// Whether a JSON object has a top-level `status`: without it, a status update would clear
/// every field of the node's status, as a body that left out its wrapper did.
fn carries_status(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Head {
        status: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Head>(body).is_ok_and(|head| head.status.is_some())
}

pub async fn cordon(State(state): State<AppState>, Path(name): Path<String>, Params(params): Params<WriteParams>) -> ApiResult<Response> {
    write_node(&state, ops::set_cordon(&name, true), &params).await
}

pub async fn uncordon(State(state): State<AppState>, Path(name): Path<String>, Params(params): Params<WriteParams>) -> ApiResult<Response> {
    write_node(&state, ops::set_cordon(&name, false), &params).await
}
