//! `sheepctl scale deployment/NAME --replicas=N`: writes the deployment's scale
//! subresource; the deployment controller then adds or removes pods.

use anyhow::{Result, bail};
use shared::model::Kind;

use super::context::Context;
use super::output::print;
use crate::cli::ScaleArgs;
use crate::settings;

pub async fn run(context: &Context, args: &ScaleArgs) -> Result<()> {
    let targets = settings::targets(&args.target)?;
    let [(kind, name)] = targets.as_slice() else {
        bail!("scale one deployment at a time: deployment/NAME --replicas=N");
    };
    if *kind != Kind::Deployment {
        bail!("only deployments can be scaled: use deployment/NAME (pods, services and nodes have no replicas)");
    }
    if args.replicas < 0 {
        bail!("--replicas={} is negative: give 0 or more", args.replicas);
    }
    context.client.scale(&context.settings.namespace, name, args.replicas).await?;
    print(&format!("deployment/{name} scaled to {} replicas\n", args.replicas))
}
