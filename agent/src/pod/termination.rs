//! How a pod's containers stop: the grace period between SIGTERM and SIGKILL, the
//! termination of a deleted or terminating pod (containers, then its sandbox), stopping sooner
//! when a second DELETE shortens the grace, and the removal of a container whose pod is gone.

use std::time::Duration;

use shared::model::{DEFAULT_GRACE_SECONDS, Pod, event_types};

use super::context::NodeContext;
use super::{Error, Result};
use crate::runtime::{ContainerInfo, ContainerRuntime, LABEL_CONTAINER, LABEL_GRACE, LABEL_NAMESPACE, LABEL_POD, RunState};
use crate::sandbox::sandbox_name;

/// How long the pod's containers get between SIGTERM and SIGKILL: the grace the deletion set
/// (a second DELETE may have shortened it), else the spec's, else [`DEFAULT_GRACE_SECONDS`].
pub fn grace_period(pod: &Pod) -> Duration {
    let seconds = pod.metadata.deletion_grace_period_seconds.or(pod.spec.termination_grace_period_seconds).unwrap_or(DEFAULT_GRACE_SECONDS);
    Duration::from_secs(seconds.max(0) as u64)
}

/// Stops every container of the pod within its grace period, then removes them, its
/// sandbox and its volumes.
pub async fn terminate(ctx: &NodeContext, pod: &Pod) -> Result<()> {
    let key = pod.metadata.key();
    let runtime_error = |source| Error::Runtime { pod: key.clone(), source };
    let containers = ctx.pod_containers(&pod.metadata.uid).await.map_err(runtime_error)?;
    let grace = grace_period(pod);
    let stops = containers.iter().map(|info| async {
        if info.state == RunState::Running {
            ctx.event(
                pod,
                event_types::NORMAL,
                "Killing",
                format!("Stopping container {} (grace period {}s)", info.label(LABEL_CONTAINER), grace.as_secs()),
            );
            ctx.runtime.stop(&info.id, grace).await?;
        }
        ctx.runtime.remove(&info.id).await
    });
    for outcome in futures::future::join_all(stops).await {
        outcome.map_err(runtime_error)?;
    }
    if let Some(sandboxes) = &ctx.sandboxes
        && let Some(sandbox) = ctx.runtime.inspect(&sandbox_name(pod)).await.map_err(runtime_error)?
    {
        sandboxes.remove(&sandbox.id).await.map_err(runtime_error)?;
    }
    ctx.volumes.tear_down(&pod.metadata.uid).map_err(|source| Error::Volumes { pod: key.clone(), source })
}

/// Stops the pod's running containers again with a shorter grace period, while an earlier
/// [`terminate`] still waits out the longer one (a second DELETE shortened it).
pub async fn hurry(ctx: &NodeContext, pod: &Pod, grace: Duration) -> crate::runtime::Result<()> {
    let running = ctx.pod_containers(&pod.metadata.uid).await?.into_iter().filter(|info| info.state == RunState::Running);
    let stops = running.map(|info| async move {
        ctx.event(
            pod,
            event_types::NORMAL,
            "Killing",
            format!("Stopping container {} sooner (grace period shortened to {}s)", info.label(LABEL_CONTAINER), grace.as_secs()),
        );
        ctx.runtime.stop(&info.id, grace).await
    });
    futures::future::join_all(stops).await.into_iter().collect()
}

/// Stops and removes a container whose pod is gone, within the grace period its labels
/// recorded.
pub async fn remove_orphan(runtime: &dyn ContainerRuntime, info: &ContainerInfo) -> crate::runtime::Result<()> {
    let grace = info.label(LABEL_GRACE).parse::<u64>().map_or(Duration::from_secs(DEFAULT_GRACE_SECONDS as u64), Duration::from_secs);
    tracing::info!(container = %info.name, pod = %format!("{}/{}", info.label(LABEL_NAMESPACE), info.label(LABEL_POD)), "removing a container whose pod is gone");
    if info.state == RunState::Running {
        runtime.stop(&info.id, grace).await?;
    }
    runtime.remove(&info.id).await
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::fixtures::pod;

    #[test]
    fn grace_defaults_to_thirty_seconds_and_never_goes_negative() {
        let mut pod = pod();
        assert_eq!(grace_period(&pod), Duration::from_secs(3));
        pod.spec.termination_grace_period_seconds = None;
        assert_eq!(grace_period(&pod), Duration::from_secs(30));
        pod.spec.termination_grace_period_seconds = Some(-5);
        assert_eq!(grace_period(&pod), Duration::ZERO);
    }

    #[test]
    fn the_deletions_grace_wins_over_the_specs() {
        let mut pod = pod();
        pod.metadata.deletion_timestamp = Some(Utc::now());
        pod.metadata.deletion_grace_period_seconds = Some(1);
        assert_eq!(grace_period(&pod), Duration::from_secs(1));
        pod.spec.termination_grace_period_seconds = None;
        pod.metadata.deletion_grace_period_seconds = Some(7);
        assert_eq!(grace_period(&pod), Duration::from_secs(7));
        pod.metadata.deletion_grace_period_seconds = None;
        assert_eq!(grace_period(&pod), Duration::from_secs(30));
    }
}
