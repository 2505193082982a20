//! What `wait --for=…` and `apply --wait` wait for, and whether an object's current state
//! meets it, cannot meet it any more, or not yet. Pure: the waiting itself is in
//! `commands::wait`.

use shared::model::{Deployment, Kind, Object, Pod, PodPhase, Time, conditions, find_condition};

use crate::settings::kind_word;
use crate::view::{deployment_state, pod_state};
use shared::readiness::NodeJudge;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("invalid --for={0:?}: use Running, phase=PHASE, condition=TYPE[=True|False] or delete (e.g. --for=condition=PodScheduled)")]
    Syntax(String),
    #[error("invalid --for=phase={0}: a pod phase is Pending, Running, Succeeded, Failed or Unknown")]
    Phase(String),
    #[error("--for={condition} does not apply to {kind}s: {hint}")]
    NotApplicable { condition: String, kind: &'static str, hint: &'static str },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitFor {
    /// Pods Running, deployments with every replica available, nodes Ready, services with
    /// at least one endpoint.
    Running,
    Phase(PodPhase),
    Condition {
        type_: String,
        status: String,
    },
    Delete,
}

/// The verdict on one object's current state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    Met,
    /// Not yet; the text says what the state is now.
    NotYet(String),
    /// It can never be met from here (a pod that finished, an object that was deleted).
    Never(String),
}

impl WaitFor {
    pub fn parse(text: &str) -> Result<WaitFor, Error> {
        let syntax = || Error::Syntax(text.to_string());
        let trimmed = text.trim();
        if trimmed.eq_ignore_ascii_case("running") || trimmed.eq_ignore_ascii_case("available") {
            return Ok(WaitFor::Running);
        }
        if trimmed.eq_ignore_ascii_case("delete") || trimmed.eq_ignore_ascii_case("deleted") {
            return Ok(WaitFor::Delete);
        }
        let (key, value) = trimmed.split_once('=').ok_or_else(syntax)?;
        match key.to_ascii_lowercase().as_str() {
            "phase" | "jsonpath={.status.phase}" => {
                let phase = [PodPhase::Pending, PodPhase::Running, PodPhase::Succeeded, PodPhase::Failed, PodPhase::Unknown]
                    .into_iter()
                    .find(|p| p.as_str().eq_ignore_ascii_case(value))
                    .ok_or_else(|| Error::Phase(value.to_string()))?;
                Ok(WaitFor::Phase(phase))
            }
            "condition" => {
                let (type_, status) = match value.split_once('=') {
                    Some((type_, status)) => (type_, status),
                    None => (value, conditions::TRUE),
                };
                let status = match status.to_ascii_lowercase().as_str() {
                    "true" => conditions::TRUE,
                    "false" => conditions::FALSE,
                    "unknown" => conditions::UNKNOWN,
                    _ => return Err(syntax()),
                };
                if type_.is_empty() || !type_.chars().all(|c| c.is_ascii_alphanumeric()) {
                    return Err(syntax());
                }
                Ok(WaitFor::Condition { type_: type_.to_string(), status: status.to_string() })
            }
            _ => Err(syntax()),
        }
    }

    /// Refuses conditions that make no sense for a kind before any waiting starts.
    pub fn applies_to(&self, kind: Kind) -> Result<(), Error> {
        let not = |hint| Err(Error::NotApplicable { condition: self.to_string(), kind: kind_word(kind), hint });
        match (self, kind) {
            (WaitFor::Delete, _) => Ok(()),
            (WaitFor::Running, Kind::Pod | Kind::Deployment | Kind::Node | Kind::Service) => Ok(()),
            (WaitFor::Phase(_), Kind::Pod) => Ok(()),
            (WaitFor::Phase(_), _) => not("only pods have a phase; try --for=Running"),
            (WaitFor::Condition { .. }, Kind::Pod | Kind::Deployment | Kind::Node) => Ok(()),
            _ => not("wait for pods, deployments, nodes or services, or use --for=delete"),
        }
    }

    /// Judges the object's current state at `now`; `None` means it does not exist. A node is
    /// Ready as `shared::readiness` judges it with the server's grace and the node's lease.
    pub fn check(&self, object: Option<&Object>, now: Time, nodes: &NodeJudge) -> Check {
        let Some(object) = object else {
            return match self {
                WaitFor::Delete => Check::Met,
                _ => Check::Never("it was deleted".to_string()),
            };
        };
        match (self, object) {
            (WaitFor::Delete, _) => Check::NotYet(format!("it still exists ({})", state(object, now, nodes))),
            (WaitFor::Running, Object::Pod(pod)) => pod_phase(pod, PodPhase::Running),
            (WaitFor::Phase(phase), Object::Pod(pod)) => pod_phase(pod, *phase),
            (WaitFor::Running, Object::Deployment(d)) => deployment_available(d),
            (WaitFor::Running, Object::Node(node)) => {
                if nodes.readiness(node, now).is_ready() {
                    Check::Met
                } else {
                    Check::NotYet(format!("it is {}", nodes.status(node, now)))
                }
            }
            (WaitFor::Running, Object::Service(service)) => match service.status.endpoints.len() {
                0 => Check::NotYet("it has no endpoints yet".to_string()),
                _ => Check::Met,
            },
            (WaitFor::Condition { type_, status }, object) => condition(object, type_, status, now, nodes),
            _ => Check::NotYet(state(object, now, nodes)),
        }
    }
}

impl std::fmt::Display for WaitFor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaitFor::Running => f.write_str("Running"),
            WaitFor::Phase(phase) => write!(f, "phase={phase}"),
            WaitFor::Condition { type_, status } => write!(f, "condition={type_}={status}"),
            WaitFor::Delete => f.write_str("delete"),
        }
    }
}

/// The state of any object at `now` in a few words, for progress and timeout messages.
pub fn state(object: &Object, now: Time, nodes: &NodeJudge) -> String {
    match object {
        Object::Pod(pod) => pod_state(pod),
        Object::Deployment(deployment) => deployment_state(deployment),
        Object::ReplicaSet(rs) => format!("{}/{} ready", rs.status.ready_replicas, rs.spec.replicas),
        Object::Node(node) => nodes.status(node, now),
        Object::Service(service) => format!("{} endpoints", service.status.endpoints.len()),
        Object::Namespace(namespace) if namespace.status.phase.is_empty() => "Active".to_string(),
        Object::Namespace(namespace) => namespace.status.phase.clone(),
        Object::Event(event) => event.reason.clone(),
        Object::Lease(lease) => format!("held by {}", lease.spec.holder_identity),
        Object::ConfigMap(map) => format!("{} keys", map.len()),
        Object::Secret(secret) => format!("{} keys", secret.data.len()),
    }
}

fn pod_phase(pod: &Pod, wanted: PodPhase) -> Check {
    let phase = pod.status.phase;
    if phase == wanted {
        Check::Met
    } else if phase.is_terminal() {
        // A finished pod never changes phase again.
        Check::Never(format!("it finished as {}", pod_state(pod)))
    } else if pod.metadata.deletion_timestamp.is_some() {
        Check::Never("it is being deleted".to_string())
    } else {
        Check::NotYet(format!("it is {}", pod_state(pod)))
    }
}

fn deployment_available(deployment: &Deployment) -> Check {
    let wanted = deployment.spec.replicas;
    let status = &deployment.status;
    let observed = status.observed_generation == 0 || status.observed_generation >= deployment.metadata.generation;
    if observed && status.available_replicas >= wanted && status.replicas == wanted {
        Check::Met
    } else {
        Check::NotYet(format!("it has {}", deployment_state(deployment)))
    }
}

fn condition(object: &Object, type_: &str, wanted: &str, now: Time, nodes: &NodeJudge) -> Check {
    let list = match object {
        Object::Pod(pod) => &pod.status.conditions,
        Object::Node(node) => &node.status.conditions,
        Object::Deployment(deployment) => &deployment.status.conditions,
        _ => return Check::NotYet(state(object, now, nodes)),
    };
    match find_condition(list, type_) {
        Some(c) if c.status == wanted => Check::Met,
        Some(c) => {
            let why = if c.message.is_empty() { c.reason.clone() } else { c.message.clone() };
            let why = if why.is_empty() { String::new() } else { format!(": {why}") };
            Check::NotYet(format!("{type_} is {}{why}", c.status))
        }
        None => match object {
            // A finished pod will not gain conditions.
            Object::Pod(pod) if pod.status.phase.is_terminal() => Check::Never(format!("it finished as {}", pod_state(pod))),
            _ => Check::NotYet(format!("it has no {type_} condition yet ({})", state(object, now, nodes))),
        },
    }
}

#[cfg(test)]
mod tests {
    use shared::model::{Condition, Lease, LeaseSpec, Node, ObjectMeta, Service};
    use shared::readiness::DEFAULT_NODE_MONITOR_GRACE;

    use super::*;

    fn now() -> Time {
        chrono::DateTime::from_timestamp(1_700_000_000, 0).expect("a valid instant")
    }

    fn check(wait: &WaitFor, object: Option<&Object>) -> Check {
        wait.check(object, now(), &NodeJudge::default())
    }

    fn pod(phase: PodPhase) -> Object {
        let mut pod = Pod { metadata: ObjectMeta::named("default", "web"), ..Default::default() };
        pod.status.phase = phase;
        if phase != PodPhase::Pending {
            pod.spec.node_name = "node-1".into();
        }
        Object::Pod(pod)
    }

    #[test]
    fn parses_every_form() {
        assert_eq!(WaitFor::parse("Running").unwrap(), WaitFor::Running);
        assert_eq!(WaitFor::parse("available").unwrap(), WaitFor::Running);
        assert_eq!(WaitFor::parse("delete").unwrap(), WaitFor::Delete);
        assert_eq!(WaitFor::parse("phase=succeeded").unwrap(), WaitFor::Phase(PodPhase::Succeeded));
        assert_eq!(
            WaitFor::parse("condition=PodScheduled").unwrap(),
            WaitFor::Condition { type_: "PodScheduled".into(), status: "True".into() }
        );
        assert_eq!(
            WaitFor::parse("condition=PodScheduled=false").unwrap(),
            WaitFor::Condition { type_: "PodScheduled".into(), status: "False".into() }
        );
        assert!(matches!(WaitFor::parse("phase=Sleeping"), Err(Error::Phase(_))));
        for bad in ["Ready", "condition=", "condition=A=maybe", "status=Running", ""] {
            assert!(matches!(WaitFor::parse(bad), Err(Error::Syntax(_))), "{bad:?}");
        }
    }

    #[test]
    fn refuses_conditions_a_kind_cannot_have() {
        assert!(WaitFor::Phase(PodPhase::Running).applies_to(Kind::Pod).is_ok());
        let err = WaitFor::Phase(PodPhase::Running).applies_to(Kind::Deployment).unwrap_err();
        assert_eq!(err.to_string(), "--for=phase=Running does not apply to deployments: only pods have a phase; try --for=Running");
        assert!(WaitFor::Running.applies_to(Kind::Namespace).is_err());
        assert!(WaitFor::Delete.applies_to(Kind::Namespace).is_ok());
    }

    #[test]
    fn pods_reach_running_or_can_never_reach_it() {
        assert_eq!(check(&WaitFor::Running, Some(&pod(PodPhase::Running))), Check::Met);
        assert_eq!(
            check(&WaitFor::Running, Some(&pod(PodPhase::Pending))),
            Check::NotYet("it is Pending (waiting for the scheduler)".into())
        );
        assert!(matches!(check(&WaitFor::Running, Some(&pod(PodPhase::Failed))), Check::Never(_)));
        assert_eq!(check(&WaitFor::Phase(PodPhase::Failed), Some(&pod(PodPhase::Failed))), Check::Met);
        assert_eq!(check(&WaitFor::Running, None), Check::Never("it was deleted".into()));
        assert_eq!(check(&WaitFor::Delete, None), Check::Met);
        assert!(matches!(check(&WaitFor::Delete, Some(&pod(PodPhase::Running))), Check::NotYet(_)));
    }

    #[test]
    fn conditions_by_type_and_status() {
        let Object::Pod(mut scheduled) = pod(PodPhase::Pending) else { unreachable!() };
        let wait = WaitFor::parse("condition=PodScheduled").unwrap();
        assert!(matches!(check(&wait, Some(&Object::Pod(scheduled.clone()))), Check::NotYet(_)));
        scheduled.status.conditions.push(Condition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: "Unschedulable".into(),
            message: "0/1 nodes are available".into(),
            ..Default::default()
        });
        assert_eq!(
            check(&wait, Some(&Object::Pod(scheduled.clone()))),
            Check::NotYet("PodScheduled is False: 0/1 nodes are available".into())
        );
        assert_eq!(check(&WaitFor::parse("condition=PodScheduled=False").unwrap(), Some(&Object::Pod(scheduled.clone()))), Check::Met);
        scheduled.status.conditions[0].status = "True".into();
        assert_eq!(check(&wait, Some(&Object::Pod(scheduled))), Check::Met);
    }

    #[test]
    fn deployments_are_running_when_every_replica_is_available() {
        let mut deployment = Deployment { metadata: ObjectMeta::named("default", "web"), ..Default::default() };
        deployment.spec.replicas = 3;
        deployment.status.replicas = 3;
        deployment.status.available_replicas = 2;
        assert_eq!(
            check(&WaitFor::Running, Some(&Object::Deployment(Box::new(deployment.clone())))),
            Check::NotYet("it has 0/3 ready, 2 available".into())
        );
        deployment.status.available_replicas = 3;
        assert_eq!(check(&WaitFor::Running, Some(&Object::Deployment(Box::new(deployment)))), Check::Met);
        let service = Service::default();
        assert!(matches!(check(&WaitFor::Running, Some(&Object::Service(service))), Check::NotYet(_)));
    }

    #[test]
    fn a_node_is_running_while_its_heartbeat_is_within_the_grace() {
        let mut node = Node { metadata: ObjectMeta::named("", "node-1"), ..Default::default() };
        node.status.conditions.push(Condition { type_: "Ready".into(), status: "True".into(), ..Default::default() });
        node.status.last_heartbeat = Some(now() - chrono::Duration::seconds(5));
        assert_eq!(check(&WaitFor::Running, Some(&Object::Node(node.clone()))), Check::Met);
        node.status.last_heartbeat = Some(now() - chrono::Duration::seconds(60));
        assert_eq!(check(&WaitFor::Running, Some(&Object::Node(node.clone()))), Check::NotYet("it is NotReady".into()));
        let renewed = LeaseSpec { renew_time: Some(now() - chrono::Duration::seconds(3)), ..LeaseSpec::default() };
        let lease = Lease { metadata: ObjectMeta::named("", "node-1"), spec: renewed, ..Lease::default() };
        let judge = NodeJudge::new(DEFAULT_NODE_MONITOR_GRACE, vec![lease]);
        assert_eq!(WaitFor::Running.check(Some(&Object::Node(node)), now(), &judge), Check::Met, "its lease was renewed");
    }
}
