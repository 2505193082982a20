//! `sheepctl logs POD [-c CONTAINER] [-f] [--tail N] [--timestamps] [--since D | --since-time T]
//! [-p]`: the server proxies the container's
//! output from the node's agent; this copies it to stdout as it arrives.

use std::io::Write;

use anyhow::Result;
use futures::StreamExt;
use shared::model::Kind;
use shepherd_client::LogOptions;

use super::context::Context;
use crate::cli::LogsArgs;
use crate::settings;

pub async fn run(context: &Context, args: &LogsArgs) -> Result<()> {
    let name = settings::name_of(Kind::Pod, &args.pod)?;
    // kubectl's rounding: a span is whole seconds, at least one.
    let since_seconds = match &args.since {
        Some(text) => Some(i64::try_from(shared::parse::duration(text)?.as_secs_f64().ceil() as u64).unwrap_or(i64::MAX).max(1)),
        None => None,
    };
    let options = LogOptions {
        container: args.container.clone(),
        tail: args.tail,
        follow: args.follow,
        timestamps: args.timestamps,
        since_seconds,
        since_time: args.since_time.clone(),
        previous: args.previous,
    };
    let mut log = context.client.logs(&context.settings.namespace, &name, &options).await?;
    let mut out = std::io::stdout().lock();
    while let Some(chunk) = log.next().await.transpose()? {
        out.write_all(&chunk)?;
        out.flush()?;
    }
    Ok(())
}
