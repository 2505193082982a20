//! `sheepctl wait --for=… KIND/NAME --timeout=30s` (or `KIND -l SELECTOR`): follows the object on the watch stream
//! (which reconnects, re-lists, or falls back to polling by itself) until the condition
//! holds, exits 0 then, and fails with the object's last state when time runs out.

use anyhow::{Result, bail};
use shared::api::WatchEventType;
use shared::model::{Kind, Object};
use tokio::time::Instant;

use super::get::parse_selector;
use super::{Context, print};
use crate::cli::WaitArgs;
use crate::condition::{Check, WaitFor, state};
use crate::progress::{Mode, Progress};
use crate::settings::{self, kind_word};
use shared::readiness::NodeJudge;

/// One object to wait for.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub kind: Kind,
    pub namespace: &'a str,
    pub name: &'a str,
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
    let mut met = String::new();
    for (kind, name) in &targets {
        let target = Target { kind: *kind, namespace: &context.settings.namespace, name };
        until(context, target, &condition, deadline, &args.timeout, &mut progress).await?;
        met.push_str(&format!("{}/{name} condition met\n", kind_word(*kind)));
    }
    progress.finish();
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
    let mut watcher = context.changes(kind, namespace, selector);
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

/// Waits until `condition` holds for the target, reporting each state change to `progress`.
/// Fails at once when the condition can no longer be met, and at `deadline` with the last
/// state seen. `timeout_text` is how the user wrote the timeout, for the message.
pub async fn until(
    context: &Context,
    target: Target<'_>,
    condition: &WaitFor,
    deadline: Instant,
    timeout_text: &str,
    progress: &mut Progress,
) -> Result<()> {
    let label = format!("{}/{}", kind_word(target.kind), target.name);
    let goal = goal(condition, target.kind);
    let mut last_state = "it was not read before the time ran out".to_string();
    // A pod the scheduler has yet to place: its reason is from the last attempt, which may
    // predate the cluster as it is now.
    let mut unscheduled = false;
    let waiting = async {
        let namespace = target.kind.namespaced().then_some(target.namespace);
        let mut watcher = context.changes(target.kind, namespace, None).named(target.name);
        let mut current = watcher.list().await?.into_iter().next();
        if current.is_none() && *condition != WaitFor::Delete {
            match namespace {
                Some(ns) => bail!("{label} not found in namespace {ns:?}: create it first, or pass -n"),
                None => bail!("{label} not found"),
            }
        }
        loop {
            // A node is Ready by the server's own judgement of its heartbeat: its grace and the
            // leases, read again at each look, since a renewal does not change the node.
            let nodes = if target.kind == Kind::Node { context.node_judge().await? } else { NodeJudge::default() };
            let now = context.now();
            match condition.check(current.as_ref(), now, &nodes) {
                Check::Met => {
                    if let Some(object) = &current {
                        progress.update(&label, &state(object, now, &nodes));
                    }
                    return Ok(());
                }
                Check::Never(why) => bail!("{label} will never {goal}: {why}"),
                Check::NotYet(seen) => {
                    if let Some(object) = &current {
                        progress.update(&label, &state(object, now, &nodes));
                    }
                    last_state = seen;
                    unscheduled = matches!(&current, Some(Object::Pod(p)) if p.needs_scheduling());
                }
            }
            let change = watcher.next().await?;
            current = if change.type_ == WatchEventType::Deleted { None } else { Some(change.object) };
        }
    };
    let outcome = tokio::time::timeout_at(deadline, waiting).await;
    match outcome {
        Ok(result) => result,
        Err(_) => {
            let hint = match target.kind {
                Kind::Pod | Kind::Deployment | Kind::Node | Kind::Service => {
                    format!("; see `sheepctl describe {} {}`", kind_word(target.kind), target.name)
                }
                _ => String::new(),
            };
            let queue =
                if unscheduled { context.client.scheduling(target.namespace, target.name).await.ok().and_then(|e| e.queue) } else { None };
            let attempt = match queue {
                Some(queue) => format!("; that reason is from the scheduler's last attempt, and now the pod is {}", queue.describe()),
                None => String::new(),
            };
            bail!("timed out after {timeout_text} waiting for {label} to {goal}: {last_state}{attempt}{hint}")
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
