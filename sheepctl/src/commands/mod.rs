//! One small file per subcommand. Each takes the shared [`Context`] (settings and client)
//! and its own flags, talks to the server through `shepherd_client`, and writes to stdout
//! through `output`; this file only dispatches.
//!
//! Layout:
//! - `context`: the settings, client, clock and reconnecting watch every subcommand uses;
//! - `output`: how subcommands write text, JSON and YAML;
//! - a file per subcommand: `apply`, `get`, `describe`, `delete`, `scale`, `rollout`,
//!   `set` (`set image`), `logs`, `exec`, `cp`, `port_forward`,
//!   `events`, `nodes` (with `cordon` and `uncordon`), `top`, `info`, `wait`, `completion`,
//!   `kubeconfig`.

use anyhow::{Context as _, Result};

use shepherd_client::Client;

use crate::cli::{Cli, Command};
use crate::settings::Settings;

mod apply;
mod completion;
mod context;
mod cp;
mod delete;
mod describe;
mod events;
pub mod exec;
mod get;
mod image;
mod info;
mod kubeconfig;
mod logs;
mod nodes;
mod output;
mod port_forward;
mod rollout;
mod scale;
mod set;
mod top;
mod wait;

pub use context::Context;

pub async fn run(cli: Cli) -> Result<()> {
    // Completion needs no server, so a bad --server must not stop it.
    let settings = match &cli.command {
        Command::Completion(args) => return completion::run(args),
        // Images go through the local Docker engine, not the server.
        Command::Image(command) => return image::run(cli.token.as_deref(), command).await,
        _ => Settings::from_cli(&cli)?,
    };
    let authority = match &settings.certificate_authority {
        Some(path) => Some(std::fs::read(path).with_context(|| format!("cannot read the certificate authority {}", path.display()))?),
        None => None,
    };
    let mut client = Client::new(&settings.servers.join(","), settings.token.clone())?.named("sheepctl");
    if let Some(pem) = &authority {
        client = client.with_certificate_authority(pem)?;
    }
    let context = Context { settings, client };
    match &cli.command {
        Command::Apply(args) => apply::run(&context, args).await,
        Command::Get(args) => get::run(&context, args).await,
        Command::Describe(args) => describe::run(&context, args).await,
        Command::Delete(args) => delete::run(&context, args).await,
        Command::Scale(args) => scale::run(&context, args).await,
        Command::Rollout(command) => rollout::run(&context, command).await,
        Command::Set(command) => set::run(&context, command).await,
        Command::Logs(args) => logs::run(&context, args).await,
        Command::Exec(args) => exec::run(&context, args).await,
        Command::Cp(args) => cp::run(&context, args).await,
        Command::PortForward(args) => port_forward::run(&context, args).await,
        Command::Events(args) => events::run(&context, args).await,
        Command::Nodes(args) => nodes::run(&context, args).await,
        Command::Top(command) => top::run(&context, command).await,
        Command::Cordon(args) => nodes::cordon(&context, args, true).await,
        Command::Uncordon(args) => nodes::cordon(&context, args, false).await,
        Command::Info(args) => info::run(&context, args).await,
        Command::Wait(args) => wait::run(&context, args).await,
        Command::Completion(args) => completion::run(args),
        Command::Image(command) => image::run(cli.token.as_deref(), command).await,
        Command::Kubeconfig(args) => kubeconfig::run(&context.settings, authority.as_deref(), args),
    }
}
