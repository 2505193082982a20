//! The runtime's container events for this node: the end of a container wakes its pod's
//! worker (or its sandbox's owner), and a warm sandbox that stopped leaves the pool.

use std::sync::Arc;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::retry;
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
/// a warm sandbox that stopped leaves the pool. A stream that ends or fails is opened again
/// on the node's back-off (`retry`), which starts afresh after a stream that delivered events,
/// as a watcher's does after a good watch.
pub async fn follow_runtime_events(manager: Arc<PodManager>, shutdown: CancellationToken) {
    let mut reconnecting = false;
    loop {
        let followed = retry::until_shutdown(manager.ctx.backoff, &shutdown, "runtime events interrupted", || {
            // Anything missed while reconnecting is caught by looking at every pod again.
            if std::mem::replace(&mut reconnecting, true) {
                manager.poke_all();
            }
            follow(&manager, &shutdown)
        })
        .await;
        if followed.is_none() || shutdown.is_cancelled() {
            return;
        }
    }
}

/// Follows one event stream until it ends or shutdown: `Ok` when shut down or when the stream
/// delivered events before it ended, `Err` when it ended or failed before delivering any.
async fn follow(manager: &PodManager, shutdown: &CancellationToken) -> Result<(), String> {
    let node = manager.ctx.node_name.as_str();
    let mut events = manager.ctx.runtime.events(&[(LABEL_NODE, node), (LABEL_CLUSTER, manager.ctx.cluster.as_str())]);
    let mut delivered = false;
    loop {
        let next = tokio::select! {
            next = events.next() => next,
            _ = shutdown.cancelled() => return Ok(()),
        };
        let ended = match next {
            Some(Ok(event)) => {
                delivered = true;
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
                continue;
            }
            Some(Err(e)) => e.to_string(),
            None => "the stream ended".to_string(),
        };
        if delivered {
            tracing::warn!(error = %ended, "runtime events interrupted; reconnecting");
            return Ok(());
        }
        return Err(ended);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use shared::backoff::Backoff;
    use tokio::time::Instant;

    use super::*;
    use crate::fixtures::{self, FaultyRuntime, RecordingApi};
    use crate::pod::context::NodeContext;

    // On the paused clock: 15 s of back-off take no real time.
    #[tokio::test(start_paused = true)]
    async fn a_failing_event_stream_is_opened_again_on_the_back_off() {
        let runtime = Arc::new(FaultyRuntime { events_fail: true, ..FaultyRuntime::default() });
        let ctx = NodeContext {
            backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(8)),
            ..fixtures::context(Arc::new(RecordingApi::default()), runtime.clone())
        };
        let shutdown = CancellationToken::new();
        let manager = PodManager::new(Arc::new(ctx), shutdown.clone());
        let began = Instant::now();
        let following = tokio::spawn(follow_runtime_events(manager, shutdown.clone()));
        tokio::time::sleep(Duration::from_millis(15_500)).await;
        shutdown.cancel();
        following.await.unwrap();
        let opened: Vec<u64> = runtime.events_opened.lock().unwrap().iter().map(|at| (*at - began).as_secs()).collect();
        assert_eq!(opened, [0, 1, 3, 7, 15], "a try, then after 1, 2, 4 and 8 s");
    }

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
