//! What a pod's worker reports: each container's state as Kubernetes words it, the pod's
//! phase, addresses and conditions from them, and the status write.

use std::time::Duration;

use chrono::Utc;
use shared::model::{Condition, ContainerState, ContainerStatus, Pod, PodPhase, PodStatus, Time, conditions, set_condition};

use super::{Error, Result};
use crate::client::ApiClient;
use crate::runtime::ContainerInfo;

/// Terminated `reason` as Kubernetes writes it.
fn exit_reason(exit_code: i64, oom_killed: bool) -> &'static str {
    if oom_killed {
        "OOMKilled"
    } else if exit_code == 0 {
        "Completed"
    } else {
        "Error"
    }
}

pub fn terminated(info: &ContainerInfo, exit_code: i64, oom_killed: bool) -> ContainerState {
    ContainerState::Terminated {
        exit_code,
        reason: exit_reason(exit_code, oom_killed).to_string(),
        message: String::new(),
        started_at: info.started_at,
        finished_at: info.finished_at,
    }
}

pub fn waiting(reason: &str, message: String) -> ContainerState {
    ContainerState::Waiting { reason: reason.to_string(), message }
}

/// The outcome of reconciling one container.
pub struct Step {
    pub status: ContainerStatus,
    pub requeue: Option<Duration>,
    pub ip: String,
    /// Finished for good: exited and the restart policy does not start it again.
    pub done: bool,
}

impl Step {
    pub fn new(status: ContainerStatus, requeue: Option<Duration>, ip: String) -> Self {
        Step { status, requeue, ip, done: false }
    }
}

/// The pod's status after a pass whose containers came out as `steps`: phase, addresses,
/// container statuses and conditions. `sandbox_ip` is the address of the pod's sandbox, if any.
pub fn pod_status(pod: &Pod, steps: &[Step], host_ip: &str, sandbox_ip: Option<&str>) -> PodStatus {
    let now: Time = Utc::now();
    let all_done = !steps.is_empty() && steps.iter().all(|s| s.done);
    // Running: at least one container runs, or is between restarts.
    let live = steps.iter().any(|s| {
        matches!(&s.status.state, ContainerState::Running { .. })
            || matches!(&s.status.state, ContainerState::Waiting { reason, .. } if reason == "CrashLoopBackOff")
            || (!s.done && s.status.restart_count > 0)
    });
    let phase = if pod.status.phase.is_terminal() {
        pod.status.phase
    } else if all_done {
        let failed = steps.iter().any(|s| matches!(&s.status.state, ContainerState::Terminated { exit_code, .. } if *exit_code != 0));
        if failed { PodPhase::Failed } else { PodPhase::Succeeded }
    } else if live {
        PodPhase::Running
    } else {
        PodPhase::Pending
    };
    let ready = !steps.is_empty() && steps.iter().all(|s| s.status.ready) && phase == PodPhase::Running;
    let mut status = pod.status.clone();
    status.phase = phase;
    status.host_ip = host_ip.to_string();
    // The sandbox's address when the pod has one; else its container's.
    if let Some(ip) = sandbox_ip.into_iter().chain(steps.iter().map(|s| s.ip.as_str())).find(|ip| !ip.is_empty()) {
        status.pod_ip = ip.to_string();
    }
    if status.start_time.is_none() {
        status.start_time = Some(now);
    }
    status.container_statuses = steps.iter().map(|s| s.status.clone()).collect();
    let (reason, message) = match phase {
        PodPhase::Failed | PodPhase::Succeeded => {
            let summary = steps
                .iter()
                .filter_map(|s| match &s.status.state {
                    ContainerState::Terminated { exit_code, reason, .. } => {
                        Some(format!("container {} exited with code {exit_code} ({reason})", s.status.name))
                    }
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("; ");
            (String::new(), summary)
        }
        _ => (String::new(), String::new()),
    };
    if !pod.status.phase.is_terminal() {
        status.reason = reason;
        status.message = message;
    }
    let condition = |type_: &str, ok: bool, reason: &str| Condition {
        type_: type_.to_string(),
        status: if ok { conditions::TRUE } else { conditions::FALSE }.to_string(),
        reason: if ok { String::new() } else { reason.to_string() },
        ..Default::default()
    };
    set_condition(&mut status.conditions, condition(conditions::INITIALIZED, true, ""), now);
    let not_ready_reason = if phase.is_terminal() { "PodCompleted" } else { "ContainersNotReady" };
    set_condition(&mut status.conditions, condition(conditions::CONTAINERS_READY, ready, not_ready_reason), now);
    set_condition(&mut status.conditions, condition(conditions::READY, ready, not_ready_reason), now);
    status
}

/// Writes `status` as the pod's: the agent owns the status of its pods, so without
/// compare-and-swap.
pub async fn write(api: &dyn ApiClient, pod: &Pod, status: &PodStatus) -> Result<()> {
    let mut update = pod.clone();
    update.metadata.resource_version = 0;
    update.status = status.clone();
    api.update_pod_status(&update).await.map_err(|source| Error::Api { pod: pod.metadata.key(), source })?;
    if pod.status.phase != status.phase && status.phase.is_terminal() {
        tracing::info!(pod = %pod.metadata.key(), phase = %status.phase, "pod finished");
    }
    Ok(())
}
