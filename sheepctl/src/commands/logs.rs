//! `sheepctl logs POD [-c CONTAINER] [-f] [--tail N]`: the server proxies the container's
//! output from the node's agent; this copies it to stdout as it arrives.

use std::io::Write;

use anyhow::{Context as _, Result};
use shared::api::paths;
use shared::model::Kind;

use super::Context;
use crate::cli::LogsArgs;
use crate::settings;

pub async fn run(context: &Context, args: &LogsArgs) -> Result<()> {
    let name = settings::name_of(Kind::Pod, &args.pod)?;
    let path = paths::pod_log(&context.settings.namespace, &name);
    let mut query = Vec::new();
    if let Some(container) = &args.container {
        query.push(("container", container.clone()));
    }
    if let Some(tail) = args.tail {
        query.push(("tail", tail.to_string()));
    }
    if args.follow {
        query.push(("follow", "true".to_string()));
    }
    let mut response = context.client.stream_text(&path, &query, args.follow).await?;
    let mut out = std::io::stdout().lock();
    while let Some(chunk) = response.chunk().await.with_context(|| format!("the log stream of pod/{name} broke"))? {
        out.write_all(&chunk)?;
        out.flush()?;
    }
    Ok(())
}
