//! One small file per subcommand. Each takes the shared [`Context`] (settings and client)
//! and its own flags, talks to the server through `shepherd_client`, and writes to stdout.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context as _, Result};
use chrono::Utc;
use serde::Serialize;
use shared::backoff::Backoff;
use shared::model::{Kind, Lease, Time};
use shared::readiness::DEFAULT_NODE_MONITOR_GRACE;
use shared::selector::LabelSelector;
use shepherd_client::watcher::{Changes, Collection, Watcher};
use shepherd_client::{Client, Selection};

use crate::cli::{Cli, Command, OutputFormat};
use crate::settings::Settings;
use shared::readiness::NodeJudge;

mod apply;
mod completion;
mod delete;
mod describe;
mod events;
mod get;
mod info;
mod kubeconfig;
mod logs;
mod nodes;
mod scale;
mod wait;

/// What every subcommand needs.
pub struct Context {
    pub settings: Settings,
    pub client: Client,
}

/// The watch's retries: 200 ms, doubling to 2 s.
const WATCH_BACKOFF: Backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(2));
/// Failures in a row (the server unreachable) before a watch gives up.
const WATCH_ATTEMPTS: u32 = 10;
/// Failed attempts to open the stream before a watch polls the list instead, and how often.
const STREAM_ATTEMPTS: u32 = 3;
const POLL_INTERVAL: Duration = Duration::from_secs(1);

impl Context {
    pub fn now(&self) -> Time {
        Utc::now()
    }

    /// How the server judges nodes: how long one may go without a heartbeat before it is not
    /// ready (its `--node-monitor-grace`), and the nodes' leases, whose renewals are their
    /// heartbeats.
    pub async fn node_judge(&self) -> Result<NodeJudge> {
        let info = self.client.info().await?;
        let grace =
            if info.node_monitor_grace_ms > 0 { Duration::from_millis(info.node_monitor_grace_ms) } else { DEFAULT_NODE_MONITOR_GRACE };
        let leases = self.client.list::<Lease>(&Selection::default()).await?;
        Ok(NodeJudge::new(grace, leases.items))
    }

    /// A watch of `kind` in `namespace` (every namespace when `None`), of the objects that
    /// match `selector` and the field selector `fields` (the server evaluates it): it
    /// reconnects, lists again, and polls when the server cannot stream.
    pub fn changes(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        selector: Option<LabelSelector>,
        fields: Option<String>,
    ) -> Changes<Collection> {
        let selector = selector.unwrap_or_default();
        let selection = Selection {
            namespace: namespace.filter(|_| kind.namespaced()).map(str::to_string),
            label_selector: (!selector.is_empty()).then(|| selector.to_string()),
            field_selector: fields,
        };
        let source = Collection { client: self.client.clone(), kind, selection };
        let watcher = Watcher::new(source, WATCH_BACKOFF).give_up_after(WATCH_ATTEMPTS).poll_after(STREAM_ATTEMPTS, POLL_INTERVAL);
        Changes::new(watcher).matching(selector)
    }
}

pub async fn run(cli: Cli) -> Result<()> {
    // Completion needs no server, so a bad --server must not stop it.
    let settings = match &cli.command {
        Command::Completion(args) => return completion::run(args),
        _ => Settings::from_cli(&cli)?,
    };
    let authority = match &settings.certificate_authority {
        Some(path) => Some(std::fs::read(path).with_context(|| format!("cannot read the certificate authority {}", path.display()))?),
        None => None,
    };
    let mut client = Client::new(&settings.base_url, settings.token.clone())?.named("sheepctl");
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
        Command::Logs(args) => logs::run(&context, args).await,
        Command::Events(args) => events::run(&context, args).await,
        Command::Nodes(args) => nodes::run(&context, args).await,
        Command::Cordon(args) => nodes::cordon(&context, args, true).await,
        Command::Uncordon(args) => nodes::cordon(&context, args, false).await,
        Command::Info(args) => info::run(&context, args).await,
        Command::Wait(args) => wait::run(&context, args).await,
        Command::Completion(args) => completion::run(args),
        Command::Kubeconfig(args) => kubeconfig::run(&context.settings, authority.as_deref(), args),
    }
}

/// Writes text to standard output, its control characters shown ([`crate::terminal`]), and
/// flushes it, so `-w` output appears at once.
pub fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(crate::terminal::safe(text).as_bytes())?;
    out.flush()?;
    Ok(())
}

/// An object or list as JSON or YAML, for `-o json|yaml`.
pub fn serialized<T: Serialize>(value: &T, format: OutputFormat) -> Result<String> {
    Ok(match format {
        OutputFormat::Yaml => serde_norway::to_string(value)?,
        _ => serde_json::to_string_pretty(value)? + "\n",
    })
}
