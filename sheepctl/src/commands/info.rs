//! `sheepctl info`: what the server says about itself (version, store, revision, counts,
//! the cluster id its nodes label their containers with), and which address sheepctl used
//! to reach it.

use anyhow::Result;

use super::context::Context;
use super::output::{print, serialized};
use crate::cli::{InfoArgs, OutputFormat};
use shared::words::age;

pub async fn run(context: &Context, args: &InfoArgs) -> Result<()> {
    let info = context.client.info().await?;
    if let Some(format @ (OutputFormat::Json | OutputFormat::Yaml)) = args.output {
        return print(&serialized(&info, format)?);
    }
    let started = match info.started_at {
        Some(t) => format!("{} ({} ago)", t.format("%Y-%m-%d %H:%M:%S UTC"), age(context.now(), Some(t))),
        None => "<unknown>".to_string(),
    };
    let rows = [
        ("Server", context.client.base().to_string()),
        ("Name", info.name),
        ("Version", info.version),
        ("Started", started),
        ("Store", info.store),
        ("Revision", info.resource_version.to_string()),
        ("Auth required", if info.auth_required { "yes" } else { "no" }.to_string()),
        ("Nodes", info.nodes.to_string()),
        ("Pods", info.pods.to_string()),
        ("Scheduler", info.scheduler_profile),
        ("Cluster", info.cluster_id),
    ];
    let text: String = rows.iter().map(|(label, value)| format!("{:<15}{value}\n", format!("{label}:"))).collect();
    print(&text)
}
