//! `sheepctl set image deployment/NAME CONTAINER=IMAGE...` (or `*=IMAGE`): changes the
//! images of a deployment's template, which starts a rollout.

use anyhow::{Result, bail};

use super::context::Context;
use super::output::print;
use super::rollout::{deployment_name, update_deployment};
use crate::cli::{SetCommand, SetImageArgs};

pub async fn run(context: &Context, command: &SetCommand) -> Result<()> {
    match command {
        SetCommand::Image(args) => image(context, args).await,
    }
}

async fn image(context: &Context, args: &SetImageArgs) -> Result<()> {
    let (images, target): (Vec<&String>, Vec<&String>) = args.words.iter().partition(|w| w.contains('='));
    let target: Vec<String> = target.into_iter().cloned().collect();
    let name = deployment_name(&target)?;
    let mut pairs = Vec::new();
    for word in images {
        match word.split_once('=') {
            Some((container, image)) if !container.is_empty() && !image.is_empty() => pairs.push((container, image)),
            _ => bail!("{word:?} is not CONTAINER=IMAGE"),
        }
    }
    if pairs.is_empty() {
        bail!("at least one image update is required: CONTAINER=IMAGE");
    }
    if pairs.len() > 1 && pairs.iter().any(|(container, _)| *container == "*") {
        bail!("all containers are already specified by *, but saw more than one container_name=container_image pairs");
    }
    let pairs = &pairs;
    update_deployment(context, &name, |mut deployment| async move {
        let containers = &mut deployment.spec.template.spec.containers;
        for (container, image) in pairs {
            let mut found = false;
            for c in containers.iter_mut().filter(|c| *container == "*" || c.name == *container) {
                c.image = image.to_string();
                found = true;
            }
            if !found {
                bail!("unable to find container named {container:?}");
            }
        }
        Ok(((), Some(deployment)))
    })
    .await?;
    print(&format!("deployment.apps/{name} image updated\n"))
}
