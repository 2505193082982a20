//! `sheepctl delete KIND NAME…` and `delete -f FILE`: deletes each object and says so;
//! `--ignore-not-found` makes deleting something already gone a success.

use anyhow::{Result, bail};
use shared::model::Kind;

use super::{Context, apply, print};
use crate::cli::DeleteArgs;
use crate::files;
use crate::settings::{self, kind_word};

pub async fn run(context: &Context, args: &DeleteArgs) -> Result<()> {
    let targets: Vec<(Kind, String, String)> = if args.files.is_empty() {
        settings::targets(&args.target)?.into_iter().map(|(kind, name)| (kind, context.settings.namespace.clone(), name)).collect()
    } else {
        files::load(&args.files)?
            .into_iter()
            .map(|loaded| {
                let object = apply::resolve(&context.settings, loaded)?;
                let meta = object.metadata();
                Ok((object.kind(), meta.namespace.clone(), meta.name.clone()))
            })
            .collect::<Result<_>>()?
    };
    let total = targets.len();
    let mut failed = 0;
    for (kind, namespace, name) in targets {
        let label = format!("{}/{name}", kind_word(kind));
        match context.client.delete(kind, &namespace, &name).await {
            Ok(()) => print(&format!("{label} deleted\n"))?,
            Err(e) if e.is_not_found() && args.ignore_not_found => {}
            Err(e) if e.is_unreachable() => return Err(e.into()),
            Err(e) if total == 1 => return Err(anyhow::Error::new(e).context(format!("cannot delete {label}"))),
            Err(e) => {
                eprintln!("error: cannot delete {label}: {e}");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        bail!("{failed} of {total} objects could not be deleted (see above)");
    }
    Ok(())
}
