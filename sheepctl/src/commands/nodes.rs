//! `sheepctl nodes`, `cordon NODE` and `uncordon NODE`: the node list with what pods ask
//! of each node, and switching a node's schedulability.

use anyhow::Result;
use shared::model::Kind;

use super::context::Context;
use super::get::{self, Query};
use super::output::print;
use crate::cli::{NodeArgs, NodesArgs};
use crate::settings;

pub async fn run(context: &Context, args: &NodesArgs) -> Result<()> {
    let selector = get::parse_selector(args.selector.as_deref())?;
    get::show(
        context,
        Query { kind: Kind::Node, name: None, selector, fields: None, chunk_size: crate::cli::CHUNK_SIZE },
        args.output,
        false,
    )
    .await
}

/// Cordons the node when `cordon`, else uncordons it.
pub async fn cordon(context: &Context, args: &NodeArgs, cordon: bool) -> Result<()> {
    let name = settings::name_of(Kind::Node, &args.node)?;
    context.client.cordon(&name, cordon).await?;
    print(&format!("node/{name} {}\n", if cordon { "cordoned" } else { "uncordoned" }))
}
