//! `sheepctl rollout status|history|undo|pause|resume|restart deployment/NAME`: kubectl's
//! rollout verbs for deployments, with kubectl's words. The rules (the history, the undo
//! target, when a rollout is done) are `shared::rollout`'s; this file fetches and writes.

use std::future::Future;

use anyhow::{Result, bail};
use chrono::SecondsFormat;
use shared::api::WatchEventType;
use shared::model::{Deployment, Kind, Object, ReplicaSet};
use shared::rollout::{self, RESTARTED_AT_ANNOTATION, RolloutStatus, Undo};
use shepherd_client::Selection;
use tokio::time::Instant;

use super::context::Context;
use super::describe::{Text, template_text};
use super::output::print;
use crate::cli::{DeploymentArgs, RolloutCommand, RolloutHistoryArgs, RolloutStatusArgs, RolloutUndoArgs};
use crate::settings;
use crate::table::Table;

/// How often a write that lost a race with another writer reads and tries again.
const ATTEMPTS: usize = 5;

pub async fn run(context: &Context, command: &RolloutCommand) -> Result<()> {
    match command {
        RolloutCommand::Status(args) => status(context, args).await,
        RolloutCommand::History(args) => history(context, args).await,
        RolloutCommand::Undo(args) => undo(context, args).await,
        RolloutCommand::Pause(args) => set_paused(context, args, true).await,
        RolloutCommand::Resume(args) => set_paused(context, args, false).await,
        RolloutCommand::Restart(args) => restart(context, args).await,
    }
}

/// The one deployment `words` name: `deployment/NAME` or `deployment NAME`.
pub fn deployment_name(words: &[String]) -> Result<String> {
    let targets = settings::targets(words)?;
    let [(kind, name)] = targets.as_slice() else {
        bail!("name one deployment: deployment/NAME or deployment NAME");
    };
    if *kind != Kind::Deployment {
        bail!("only deployments roll out: use deployment/NAME (a {} has no rollout)", settings::kind_word(*kind));
    }
    Ok(name.clone())
}

/// Reads the deployment, lets `change` edit it (or answer `None`: nothing to write) and
/// writes it back, reading again when another writer came first. Answers what `change`
/// answered.
pub async fn update_deployment<T, F, Fut>(context: &Context, name: &str, mut change: F) -> Result<T>
where
    F: FnMut(Deployment) -> Fut,
    Fut: Future<Output = Result<(T, Option<Deployment>)>>,
{
    let namespace = &context.settings.namespace;
    for attempt in 1.. {
        let deployment: Deployment = context.client.get(namespace, name).await?;
        let (answer, write) = change(deployment).await?;
        let Some(changed) = write else { return Ok(answer) };
        match context.client.replace_object(&Object::Deployment(Box::new(changed))).await {
            Ok(_) => return Ok(answer),
            Err(e) if e.is_conflict() && attempt < ATTEMPTS => continue,
            Err(e) => return Err(e.into()),
        }
    }
    unreachable!("the loop returns")
}

async fn replica_sets(context: &Context, deployment: &Deployment) -> Result<Vec<ReplicaSet>> {
    let selection =
        Selection { label_selector: Some(deployment.spec.selector.to_string()), ..Selection::namespace(Some(&context.settings.namespace)) };
    Ok(context.client.list::<ReplicaSet>(&selection).await?.items)
}

async fn status(context: &Context, args: &RolloutStatusArgs) -> Result<()> {
    let name = deployment_name(&args.deployment.target)?;
    let timeout = shared::parse::duration(&args.timeout)?;
    let deadline = (!timeout.is_zero()).then(|| Instant::now() + timeout);
    let mut watcher = context.changes(Kind::Deployment, Some(&context.settings.namespace), None, None).named(&name);
    let listed = watcher.list().await?;
    let Some(Object::Deployment(first)) = listed.into_iter().next() else {
        bail!("deployment {name:?} not found in namespace {:?}", context.settings.namespace);
    };
    let mut last = String::new();
    let mut deployment = *first;
    loop {
        let line = match rollout::rollout_status(&deployment)? {
            RolloutStatus::Done(line) => return print(&format!("{line}\n")),
            RolloutStatus::Waiting(line) => line,
        };
        if line != last {
            print(&format!("{line}\n"))?;
            last = line;
        }
        if !args.watch {
            return Ok(());
        }
        let next = watcher.next();
        let change = match deadline {
            Some(deadline) => match tokio::time::timeout_at(deadline, next).await {
                Ok(change) => change?,
                Err(_) => bail!("timed out waiting for the condition after {}", args.timeout),
            },
            None => next.await?,
        };
        match (change.type_, change.object) {
            (WatchEventType::Deleted, _) => bail!("deployment {name:?} has been deleted"),
            (_, Object::Deployment(d)) => deployment = *d,
            _ => {}
        }
    }
}

async fn history(context: &Context, args: &RolloutHistoryArgs) -> Result<()> {
    let name = deployment_name(&args.deployment.target)?;
    let deployment: Deployment = context.client.get(&context.settings.namespace, &name).await?;
    let sets = replica_sets(context, &deployment).await?;
    let history = rollout::history(&deployment, &sets);
    if let Some(number) = args.revision.filter(|n| *n > 0) {
        // Revisions are int64, as in Kubernetes: a larger number names none.
        let number = i64::try_from(number).unwrap_or(i64::MIN);
        let Some(revision) = history.iter().find(|r| r.number == number) else {
            bail!("unable to find the specified revision {number}");
        };
        let mut text = Text::default();
        template_text(&mut text, revision.template());
        return print(&format!("deployment.apps/{name} with revision #{number}\n{}", text.0));
    }
    if history.is_empty() {
        return print(&format!("deployment.apps/{name}\nNo rollout history found.\n"));
    }
    let mut table = Table::new(["REVISION", "CHANGE-CAUSE"]);
    for revision in &history {
        table.push(vec![revision.number.to_string(), revision.change_cause().unwrap_or("<none>").to_string()]);
    }
    print(&format!("deployment.apps/{name} \n{}", table.render()))
}

async fn undo(context: &Context, args: &RolloutUndoArgs) -> Result<()> {
    let name = deployment_name(&args.deployment.target)?;
    let summary = update_deployment(context, &name, |mut deployment| async move {
        let sets = replica_sets(context, &deployment).await?;
        let to_revision = i64::try_from(args.to_revision)
            .map_err(|_| anyhow::anyhow!("unable to find specified revision {} in history", args.to_revision))?;
        let undo = rollout::undo(&deployment, &sets, to_revision)?;
        let summary = undo.summary();
        Ok(match undo {
            Undo::AlreadyCurrent { .. } => (summary, None),
            Undo::RollBack(rollback) => {
                rollback.apply_to(&mut deployment);
                (summary, Some(deployment))
            }
        })
    })
    .await?;
    print(&format!("deployment.apps/{name} {summary}\n"))
}

async fn set_paused(context: &Context, args: &DeploymentArgs, paused: bool) -> Result<()> {
    let name = deployment_name(&args.target)?;
    let word = if paused { "paused" } else { "resumed" };
    let changed = update_deployment(context, &name, |mut deployment| async move {
        if deployment.spec.paused == paused {
            return Ok((false, None));
        }
        deployment.spec.paused = paused;
        Ok((true, Some(deployment)))
    })
    .await?;
    print(&format!("deployment.apps/{name} {}{word}\n", if changed { "" } else { "already " }))
}

async fn restart(context: &Context, args: &DeploymentArgs) -> Result<()> {
    let name = deployment_name(&args.target)?;
    let now = context.now().to_rfc3339_opts(SecondsFormat::Secs, true);
    update_deployment(context, &name, |mut deployment| {
        let now = now.clone();
        async move {
            if deployment.spec.paused {
                bail!("can't restart paused deployment (run rollout resume first)");
            }
            deployment.spec.template.metadata.annotations.insert(RESTARTED_AT_ANNOTATION.into(), now);
            Ok(((), Some(deployment)))
        }
    })
    .await?;
    print(&format!("deployment.apps/{name} restarted\n"))
}
