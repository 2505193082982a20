//! `sheepctl info` (or `cluster-info`, kubectl's name): what the server says about itself
//! (version, store, revision, counts, the cluster id its nodes label their containers with,
//! which server leads and which answer), and which address sheepctl used to reach it.

use anyhow::Result;

use super::context::Context;
use super::output::{print, serialized};
use crate::cli::{InfoArgs, OutputFormat};
use shared::api::ApiServer;
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
        ("Answered by", info.server_identity),
        ("Leader", if info.leader.is_empty() { "<none>".to_string() } else { info.leader }),
        ("Servers", servers(&info.servers)),
    ];
    let text: String = rows.iter().map(|(label, value)| format!("{:<15}{value}\n", format!("{label}:"))).collect();
    print(&text)
}

/// One server a line, `identity url`, the lines after the first indented under the value.
fn servers(servers: &[ApiServer]) -> String {
    if servers.is_empty() {
        return "<none>".to_string();
    }
    let lines: Vec<String> = servers.iter().map(|s| format!("{}  {}", s.identity, s.url).trim_end().to_string()).collect();
    lines.join(&format!("\n{:15}", ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_are_listed_one_a_line_under_the_label() {
        let list = [
            ApiServer { identity: "a_1".into(), url: "http://10.0.0.1:8080".into() },
            ApiServer { identity: "b_2".into(), url: String::new() },
        ];
        assert_eq!(servers(&list), format!("a_1  http://10.0.0.1:8080\n{:15}b_2", ""));
        assert_eq!(servers(&[]), "<none>");
    }
}
