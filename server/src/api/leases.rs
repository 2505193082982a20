//! A node's lease renewal, `PUT /api/v1/leases/{name}`: the agent's frequent heartbeat
//! (KEP-589), one small write of the Lease alone, so that Node watchers see nothing.

use std::time::Duration;

use axum::Extension;
use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use shared::model::Lease;

use crate::auth::{Bearer, Principal};
use crate::error::{ApiError, ApiResult};
use crate::extract::{BodyBytes, Params, parse_object};
use crate::ops;
use crate::query::WriteParams;
use crate::state::AppState;
use crate::store::Txn;

/// How long a renewal may wait for other writes to share its commit (see [`Txn::may_wait`]):
/// at 5,000 nodes, renewals arrive about every 2 ms, so some ten share each disk sync, and an
/// agent that renews every 10 s against a 40 s grace hears back at most 20 ms later. Short
/// enough that a client renewing many nodes with 16 calls in flight (the simulated fleet)
/// keeps up with 800 renewals a second.
const RENEWAL_WAIT: Duration = Duration::from_millis(20);

/// Renews the lease of node `name` (a node's token: only its own). The body may be empty or
/// a Lease naming that node; the server's clock stamps `renew_time` and its node monitor
/// grace `lease_duration_seconds`, so that agents' clocks never matter. The renewing token is
/// the node's agent's: the server signs its requests to that agent with it.
pub async fn renew(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    bearer: Option<Extension<Bearer>>,
    Path(name): Path<String>,
    Params(params): Params<WriteParams>,
    BodyBytes(body): BodyBytes,
) -> ApiResult<Response> {
    principal.may_write_node(&name)?;
    let dry_run = params.is_dry_run()?;
    if !body.is_empty() {
        let mut sent: Lease = parse_object(&body)?;
        if !sent.metadata.name.is_empty() && sent.metadata.name != name {
            return Err(ApiError::bad_request(format!(
                "the body's metadata.name {:?} does not match the name {name:?} in the path",
                sent.metadata.name
            )));
        }
        sent.metadata.name = name.clone();
        shared::validation::validate_lease(&sent).map_err(|details| ApiError::invalid(&format!("the lease of node {name}"), details))?;
    }
    let renewal = Txn::new().with(ops::renew_lease(&name, chrono::Utc::now(), state.config.node_monitor_grace)).may_wait(RENEWAL_WAIT);
    let outcome = state.store.commit(renewal.dry_run(dry_run)).await?.pop();
    if let Some(Extension(bearer)) = bearer.filter(|_| !dry_run) {
        state.agent_keys.record(&name, &bearer);
    }
    match outcome.as_ref().and_then(|o| o.object()) {
        Some(o) => Ok(Json(&**o).into_response()),
        None => Err(ApiError::internal("the store returned no lease")),
    }
}
