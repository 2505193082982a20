//! `sheepctl image push`: a local image into the cluster's registry, through the local
//! Docker engine (bollard), signed in with the token when there is one. The tag and push are
//! `shepherd_image::push`, which `shepherd-agent bootstrap-image --push` runs too.

use anyhow::{Context as _, Result};
use bollard::Docker;
use shepherd_image::RegistryLogin;

use crate::cli::ImageCommand;

pub async fn run(token: Option<&str>, command: &ImageCommand) -> Result<()> {
    match command {
        ImageCommand::Push(args) => {
            let docker = Docker::connect_with_local_defaults()
                .context("cannot reach the Docker engine (set DOCKER_HOST, or start dockerd)")?
                .negotiate_version()
                .await
                .context("cannot reach the Docker engine (set DOCKER_HOST, or start dockerd)")?;
            // An empty token counts as none, as everywhere in sheepctl.
            let login = token.filter(|t| !t.trim().is_empty()).map(|password| RegistryLogin {
                registry: args.registry.clone(),
                username: args.registry_user.clone(),
                password: password.to_string(),
            });
            let pushed = shepherd_image::push(&docker, &args.name, &args.registry, login.as_ref()).await?;
            super::output::print(&format!("pushed {pushed}\n"))
        }
    }
}
