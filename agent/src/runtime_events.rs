//! The runtime's container events for this node: the end of a container wakes its pod's
//! worker (or its sandbox's owner), and a warm sandbox that stopped leaves the pool.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::runtime::{LABEL_CLUSTER, LABEL_NODE, LABEL_POD_UID, LABEL_SANDBOX, RuntimeEvent};
use crate::sandbox::{Owner, owner};
use crate::workers::PodManager;

/// What a runtime event asks for.
#[derive(Debug, PartialEq, Eq)]
enum Wake<'a> {
    Nobody,
    /// The worker of the pod with this uid looks again.
    Pod(&'a str),
    /// The worker of the pod whose uid reads this once [`crate::sandbox::clean`]ed (a sandbox name's).
    SandboxOwner(&'a str),
    /// A warm sandbox stopped or vanished: it leaves the pool.
    Pool,
}

/// Whom `event` concerns. Only ends matter (a container that died, was OOM-killed or was
/// removed): a container starts by its worker's hand, and the worker inspects it right
/// after, so a pass for its start event would only repeat that work.
fn wakes(event: &RuntimeEvent) -> Wake<'_> {
    if !matches!(event.action.as_str(), "die" | "oom" | "destroy") {
        return Wake::Nobody;
    }
    if event.labels.contains_key(LABEL_SANDBOX) {
        return match (event.action.as_str(), owner(&event.name)) {
            (_, Owner::Unknown) | ("oom", _) => Wake::Nobody,
            (_, Owner::Pod(uid)) => Wake::SandboxOwner(uid),
            (_, Owner::Pool) => Wake::Pool,
        };
    }
    event.labels.get(LABEL_POD_UID).map_or(Wake::Nobody, |uid| Wake::Pod(uid))
}

/// Follows the runtime's container events for this node and wakes the pods they concern;
/// a warm sandbox that stopped leaves the pool.
pub async fn follow_runtime_events(manager: Arc<PodManager>, shutdown: CancellationToken) {
    let node = manager.ctx.node_name.clone();
    loop {
        let mut events = manager.ctx.runtime.events(&[(LABEL_NODE, node.as_str()), (LABEL_CLUSTER, manager.ctx.cluster.as_str())]);
        loop {
            let next = tokio::select! {
                next = events.next() => next,
                _ = shutdown.cancelled() => return,
            };
            match next {
                Some(Ok(event)) => {
                    tracing::debug!(action = %event.action, container = %event.container_id, "runtime event");
                    match wakes(&event) {
                        Wake::Nobody => {}
                        Wake::Pod(uid) => manager.poke(uid),
                        Wake::SandboxOwner(uid) => manager.poke_sandbox_owner(uid),
                        Wake::Pool => {
                            if let Some(sandboxes) = manager.ctx.sandboxes.clone() {
                                let id = event.container_id.clone();
                                tokio::spawn(async move { sandboxes.lost(&id).await });
                            }
                        }
                    }
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "runtime events interrupted");
                    break;
                }
                None => break,
            }
        }
        // Anything missed while reconnecting is caught by looking at every pod again.
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => manager.poke_all(),
            _ = shutdown.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(action: &str, name: &str, labels: &[(&str, &str)]) -> RuntimeEvent {
        RuntimeEvent {
            container_id: "c1".into(),
            name: name.into(),
            action: action.into(),
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }

    #[test]
    fn only_the_end_of_a_container_wakes_its_pod() {
        let app = [(LABEL_POD_UID, "uid-1")];
        assert_eq!(wakes(&event("start", "shepherd_default_web_main_uid1", &app)), Wake::Nobody, "the worker started it itself");
        for action in ["die", "oom", "destroy"] {
            assert_eq!(wakes(&event(action, "shepherd_default_web_main_uid1", &app)), Wake::Pod("uid-1"), "{action}");
        }
        let sandbox = [(LABEL_SANDBOX, "true")];
        let claimed = "shepherd_default_web_POD_uid-1";
        assert_eq!(wakes(&event("start", claimed, &sandbox)), Wake::Nobody);
        assert_eq!(wakes(&event("die", claimed, &sandbox)), Wake::SandboxOwner("uid-1"));
        assert_eq!(wakes(&event("destroy", "shepherd-pool_n1_1a", &sandbox)), Wake::Pool);
        assert_eq!(wakes(&event("die", "someone-elses", &sandbox)), Wake::Nobody);
        assert_eq!(wakes(&event("die", "no-labels", &[])), Wake::Nobody);
    }
}
