//! `sheepctl wait --for=… KIND/NAME… --timeout=30s` (or `KIND -l SELECTOR`): follows the
//! objects on one watch stream per kind (which reconnects, re-lists, or falls back to polling
//! by itself) until the condition holds for all, exits 0 then, fails at once when one can
//! never meet it, and fails with the last state seen when time runs out.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use shared::api::WatchEventType;
use shared::model::{Kind, Object};
use tokio::time::Instant;

use super::context::Context;
use super::get::parse_selector;
use super::output::print;
use crate::cli::WaitArgs;
use crate::condition::{Check, WaitFor, state};
use crate::progress::{Mode, Progress};
use crate::settings::{self, kind_word};
use shared::readiness::NodeJudge;

/// Objects of one kind in one namespace to wait for, by name: one watch follows them all.
#[derive(Debug, Clone)]
pub struct Targets<'a> {
    pub kind: Kind,
    pub namespace: &'a str,
    pub names: Vec<String>,
}

impl<'a> Targets<'a> {
    /// Groups `(kind, namespace, name)` by kind and namespace, in the order each group first
    /// appears, keeping the names' order within a group.
    pub fn grouped(objects: impl IntoIterator<Item = (Kind, &'a str, String)>) -> Vec<Targets<'a>> {
        let mut groups: Vec<Targets<'a>> = Vec::new();
        for (kind, namespace, name) in objects {
            match groups.iter_mut().find(|g| g.kind == kind && g.namespace == namespace) {
                Some(group) => group.names.push(name),
                None => groups.push(Targets { kind, namespace, names: vec![name] }),
            }
        }
        groups
    }
}

pub async fn run(context: &Context, args: &WaitArgs) -> Result<()> {
    let condition = WaitFor::parse(&args.condition)?;
    let timeout = shared::parse::duration(&args.timeout)?;
    let targets = match &args.selector {
        None => settings::targets(&args.target)?,
        Some(text) => matching(context, &args.target, text).await?,
    };
    for (kind, _) in &targets {
        condition.applies_to(*kind)?;
    }
    let deadline = Instant::now() + timeout;
    let mut progress = Progress::new(Mode::detect(Mode::Quiet));
    let namespace = context.settings.namespace.as_str();
    for group in Targets::grouped(targets.iter().map(|(kind, name)| (*kind, namespace, name.clone()))) {
        until(context, &group, &condition, deadline, &args.timeout, &mut progress).await?;
    }
    progress.finish();
    let met: String = targets.iter().map(|(kind, name)| format!("{}/{name} condition met\n", kind_word(*kind))).collect();
    print(&met)
}

/// `wait KIND -l SELECTOR`: the objects that match now, as kubectl resolves them once
/// before it waits. None matching is an error, not an instant success.
async fn matching(context: &Context, words: &[String], selector_text: &str) -> Result<Vec<(Kind, String)>> {
    let kind = match words {
        [word] if !word.contains('/') => settings::kind(word)?,
        _ => bail!("with -l, name one kind and no objects, e.g. `sheepctl wait --for=Running pods -l {selector_text}`"),
    };
    let selector = parse_selector(Some(selector_text))?;
    let namespace = kind.namespaced().then_some(context.settings.namespace.as_str());
    let mut watcher = context.changes(kind, namespace, selector, None);
    let mut names: Vec<String> = watcher.list().await?.iter().map(|o| o.metadata().name.clone()).collect();
    if names.is_empty() {
        match namespace {
            Some(ns) => bail!("no {} match -l {selector_text} in namespace {ns:?}", kind.plural()),
            None => bail!("no {} match -l {selector_text}", kind.plural()),
        }
    }
    names.sort();
    Ok(names.into_iter().map(|name| (kind, name)).collect())
}

/// What the condition means for this kind, as in "waiting for pod/web to be Running".
fn goal(condition: &WaitFor, kind: Kind) -> String {
    match (condition, kind) {
        (WaitFor::Running, Kind::Deployment) => "be available".to_string(),
        (WaitFor::Running, Kind::Node) => "be Ready".to_string(),
        (WaitFor::Running, Kind::Service) => "have endpoints".to_string(),
        (WaitFor::Running, _) => "be Running".to_string(),
        (WaitFor::Phase(phase), _) => format!("reach phase {phase}"),
        (WaitFor::Condition { type_, status }, _) => format!("have condition {type_}={status}"),
        (WaitFor::Delete, _) => "be deleted".to_string(),
    }
}

/// Where one target stands while the others are waited for.
struct Waiting {
    object: Option<Object>,
    /// What its state is, for the timeout message.
    seen: String,
}

/// Waits until `condition` holds for every target, on one watch of their kind, reporting
/// each state change to `progress`. Fails at once when the condition can no longer be met
/// for one of them, and at `deadline` with the state of the first still waiting.
/// `timeout_text` is how the user wrote the timeout, for the message.
pub async fn until(
    context: &Context,
    targets: &Targets<'_>,
    condition: &WaitFor,
    deadline: Instant,
    timeout_text: &str,
    progress: &mut Progress,
) -> Result<()> {
    let kind = targets.kind;
    let label = |name: &str| format!("{}/{name}", kind_word(kind));
    let goal = goal(condition, kind);
    let mut waiting: BTreeMap<&str, Waiting> = targets
        .names
        .iter()
        .map(|name| (name.as_str(), Waiting { object: None, seen: "it was not read before the time ran out".to_string() }))
        .collect();
    let following = async {
        let namespace = kind.namespaced().then_some(targets.namespace);
        let mut watcher = context.changes(kind, namespace, None, None);
        for object in watcher.list().await? {
            if let Some(target) = waiting.get_mut(object.metadata().name.as_str()) {
                target.object = Some(object);
            }
        }
        if *condition != WaitFor::Delete
            && let Some(name) = targets.names.iter().find(|name| waiting[name.as_str()].object.is_none())
        {
            match namespace {
                Some(ns) => bail!("{} not found in namespace {ns:?}: create it first, or pass -n", label(name)),
                None => bail!("{} not found", label(name)),
            }
        }
        let mut changed: Vec<String> = targets.names.clone();
        loop {
            // A node is Ready by the server's own judgement of its heartbeat: its grace and the
            // leases, read again at each look, since a renewal does not change the node.
            let nodes = if kind == Kind::Node { context.node_judge().await? } else { NodeJudge::default() };
            let now = context.now();
            for name in changed.drain(..) {
                let Some(target) = waiting.get_mut(name.as_str()) else { continue };
                let check = condition.check(target.object.as_ref(), now, &nodes);
                if let Some(object) = &target.object {
                    progress.update(&label(&name), &state(object, now, &nodes));
                }
                match check {
                    Check::Met => {
                        waiting.remove(name.as_str());
                    }
                    Check::Never(why) => bail!("{} will never {goal}: {why}", label(&name)),
                    Check::NotYet(seen) => target.seen = seen,
                }
            }
            if waiting.is_empty() {
                return Ok(());
            }
            let change = watcher.next().await?;
            let name = change.object.metadata().name.clone();
            if let Some(target) = waiting.get_mut(name.as_str()) {
                target.object = (change.type_ != WatchEventType::Deleted).then_some(change.object);
                changed.push(name);
            }
        }
    };
    let outcome = tokio::time::timeout_at(deadline, following).await;
    match outcome {
        Ok(result) => result,
        Err(_) => {
            let first = targets.names.iter().find_map(|name| waiting.get_key_value(name.as_str()));
            let Some((name, target)) = first else { return Ok(()) };
            let hint = match kind {
                Kind::Pod | Kind::Deployment | Kind::Node | Kind::Service => {
                    format!("; see `sheepctl describe {} {name}`", kind_word(kind))
                }
                _ => String::new(),
            };
            // A pod the scheduler has yet to place: its reason is from the last attempt, which
            // may predate the cluster as it is now.
            let unscheduled = matches!(&target.object, Some(Object::Pod(p)) if p.needs_scheduling());
            let queue =
                if unscheduled { context.client.scheduling(targets.namespace, name).await.ok().and_then(|e| e.queue) } else { None };
            let attempt = match queue {
                Some(queue) => format!("; that reason is from the scheduler's last attempt, and now the pod is {}", queue.describe()),
                None => String::new(),
            };
            let others = match waiting.len() - 1 {
                0 => String::new(),
                1 => format!("; 1 other {} is still waiting to {goal}", kind_word(kind)),
                n => format!("; {n} other {} are still waiting to {goal}", kind.plural()),
            };
            bail!("timed out after {timeout_text} waiting for {} to {goal}: {}{attempt}{others}{hint}", label(name), target.seen)
        }
    }
}

#[cfg(test)]
mod tests {
    use shared::model::PodPhase;

    use super::*;

    #[test]
    fn goals_read_naturally() {
        assert_eq!(goal(&WaitFor::Running, Kind::Pod), "be Running");
        assert_eq!(goal(&WaitFor::Running, Kind::Deployment), "be available");
        assert_eq!(goal(&WaitFor::Phase(PodPhase::Succeeded), Kind::Pod), "reach phase Succeeded");
        assert_eq!(goal(&WaitFor::parse("condition=PodScheduled").unwrap(), Kind::Pod), "have condition PodScheduled=True");
        assert_eq!(goal(&WaitFor::Delete, Kind::Service), "be deleted");
    }
}
