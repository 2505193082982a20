//! `sheepctl completion bash|zsh|fish|…`: prints a completion script generated from the
//! same clap definitions the parser uses, so it never falls behind the flags.

use anyhow::Result;
use clap::CommandFactory;

use crate::cli::{Cli, CompletionArgs};

pub fn run(args: &CompletionArgs) -> Result<()> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "sheepctl", &mut script);
    super::output::print(&String::from_utf8_lossy(&script))
}
