//! `sheepctl delete KIND NAME…` and `delete -f FILE`: deletes each object and says so, then
//! waits until they are gone (`--wait=false` returns at once). A pod bound to a Ready node is
//! Terminating until its agent has stopped the containers: `--grace-period` sets how long they
//! get, `--force` removes the pod from the API at once. `--ignore-not-found` makes deleting
//! something already gone a success.

use anyhow::{Result, bail};
use shared::model::Kind;
use shepherd_client::DeleteOptions;
use tokio::time::Instant;

use super::apply;
use super::context::Context;
use super::output::print;
use super::wait::{Targets, until};
use crate::cli::DeleteArgs;
use crate::condition::WaitFor;
use crate::files;
use crate::progress::{Mode, Progress};
use crate::settings::{self, kind_word};

/// What `--timeout=0s` means, as in kubectl: a week.
const FOREVER: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

pub async fn run(context: &Context, args: &DeleteArgs) -> Result<()> {
    let grace = grace_period(args.grace_period, args.force)?;
    let (timeout, timeout_text) = match shared::parse::duration(&args.timeout)? {
        zero if zero.is_zero() => (FOREVER, "a week"),
        timeout => (timeout, args.timeout.as_str()),
    };
    let targets: Vec<(Kind, String, String)> = if args.files.is_empty() {
        settings::targets(&args.target)?.into_iter().map(|(kind, name)| (kind, context.settings.namespace.clone(), name)).collect()
    } else {
        files::load(&context.client, &args.files)
            .await?
            .into_iter()
            .map(|loaded| {
                let object = apply::resolve(&context.settings, loaded)?;
                let meta = object.metadata();
                Ok((object.kind(), meta.namespace.clone(), meta.name.clone()))
            })
            .collect::<Result<_>>()?
    };
    if args.force {
        eprintln!(
            "warning: a forced deletion does not wait for the node to confirm that the pod's containers stopped; \
             they may go on running for a while"
        );
    }
    let total = targets.len();
    let mut failed = 0;
    let mut deleted = Vec::with_capacity(total);
    for (kind, namespace, name) in targets {
        let label = format!("{}/{name}", kind_word(kind));
        let options = DeleteOptions { grace_period_seconds: if kind == Kind::Pod { grace } else { None }, uid: None };
        match context.client.delete(kind, &namespace, &name, &options).await {
            Ok(()) => {
                let how = if args.force { "force deleted" } else { "deleted" };
                print(&format!("{} \"{name}\" {how}\n", kind_word(kind)))?;
                deleted.push((kind, namespace, name));
            }
            Err(e) if e.is_not_found() && args.ignore_not_found => {}
            Err(e) if e.is_unreachable() => return Err(e.into()),
            Err(e) if total == 1 => return Err(anyhow::Error::new(e).context(format!("cannot delete {label}"))),
            Err(e) => {
                eprintln!("{}", crate::terminal::safe(&format!("error: cannot delete {label}: {e}")));
                failed += 1;
            }
        }
    }
    if args.wait {
        let deadline = Instant::now() + timeout;
        let mut quiet = Progress::new(Mode::Quiet);
        for group in Targets::grouped(deleted.iter().map(|(kind, namespace, name)| (*kind, namespace.as_str(), name.clone()))) {
            until(context, &group, &WaitFor::Delete, deadline, timeout_text, &mut quiet).await?;
        }
    }
    if failed > 0 {
        bail!("{failed} of {total} objects could not be deleted (see above)");
    }
    Ok(())
}

/// The grace period to send with each pod deletion, from `--grace-period` and `--force`:
/// `None` for the pod's own.
fn grace_period(seconds: i64, force: bool) -> Result<Option<i64>> {
    match (seconds, force) {
        (-1, false) => Ok(None),
        (-1 | 0, true) => Ok(Some(0)),
        (0, false) => bail!(
            "--grace-period=0 removes a pod from the API at once, without waiting for its node to stop the containers: \
             add --force if that is what you want, or give the containers 1 second or more"
        ),
        (n, _) if n < 0 => bail!("--grace-period must be -1 (the pod's own), or 0 and more seconds, not {n}"),
        (n, true) => bail!("--force removes pods at once, so it cannot go with --grace-period={n}: drop one of the two"),
        (n, false) => Ok(Some(n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_zero_needs_force_and_force_alone_means_zero() {
        assert_eq!(grace_period(-1, false).unwrap(), None);
        assert_eq!(grace_period(5, false).unwrap(), Some(5));
        assert_eq!(grace_period(0, true).unwrap(), Some(0));
        assert_eq!(grace_period(-1, true).unwrap(), Some(0));
        let refused = grace_period(0, false).unwrap_err().to_string();
        assert!(refused.contains("--force"), "{refused}");
        assert!(grace_period(5, true).unwrap_err().to_string().contains("--grace-period=5"));
        assert!(grace_period(-2, false).unwrap_err().to_string().contains("not -2"));
    }
}
