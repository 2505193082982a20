//! One small file per subcommand. Each takes the shared [`Context`] (settings and client)
//! and its own flags, talks to the server through `crate::client`, and writes to stdout.

use std::io::Write;

use anyhow::Result;
use chrono::Utc;
use serde::Serialize;
use shared::model::Time;

use crate::cli::{Cli, Command, OutputFormat};
use crate::client::Client;
use crate::settings::Settings;

mod apply;
mod completion;
mod delete;
mod describe;
mod events;
mod get;
mod info;
mod logs;
mod nodes;
mod scale;
mod wait;

/// What every subcommand needs.
pub struct Context {
    pub settings: Settings,
    pub client: Client,
}

impl Context {
    pub fn now(&self) -> Time {
        Utc::now()
    }
}

pub async fn run(cli: Cli) -> Result<()> {
    // Completion needs no server, so a bad --server must not stop it.
    let settings = match &cli.command {
        Command::Completion(args) => return completion::run(args),
        _ => Settings::from_cli(&cli)?,
    };
    let client = Client::new(&settings.base_url, settings.token.clone())?;
    let context = Context { settings, client };
    match &cli.command {
        Command::Apply(args) => apply::run(&context, args).await,
        Command::Get(args) => get::run(&context, args).await,
        Command::Describe(args) => describe::run(&context, args).await,
        Command::Delete(args) => delete::run(&context, args).await,
        Command::Scale(args) => scale::run(&context, args).await,
        Command::Logs(args) => logs::run(&context, args).await,
        Command::Events(args) => events::run(&context, args).await,
        Command::Nodes(args) => nodes::run(&context, args).await,
        Command::Cordon(args) => nodes::cordon(&context, args, true).await,
        Command::Uncordon(args) => nodes::cordon(&context, args, false).await,
        Command::Info(args) => info::run(&context, args).await,
        Command::Wait(args) => wait::run(&context, args).await,
        Command::Completion(args) => completion::run(args),
    }
}

/// Writes text to standard output and flushes it, so `-w` output appears at once.
pub fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// An object or list as JSON or YAML, for `-o json|yaml`.
pub fn serialized<T: Serialize>(value: &T, format: OutputFormat) -> Result<String> {
    Ok(match format {
        OutputFormat::Yaml => serde_yaml::to_string(value)?,
        _ => serde_json::to_string_pretty(value)? + "\n",
    })
}
