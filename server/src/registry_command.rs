//! `shepherd registry`: its flags, turned into [`server::registry::Settings`]. The registry
//! is a process of its own beside the API server, as an image registry is beside a
//! Kubernetes cluster, and it signs users in with the same tokens the server reads.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::Args;
use server::config::default_data_dir;
use server::registry::Settings;
use tokio_util::sync::CancellationToken;

use crate::access_flags::AccessFlags;

#[derive(Debug, Args)]
#[command(after_help = "Its tokens are the server's: each node token signs in as its node, admin tokens as admin, admin-2, … \
(viewer tokens cannot sign in). Its certificate may be the server's tls/server.crt.")]
pub struct RegistryArgs {
    /// Where the registry listens. Anything but loopback requires --token or --tokens-file.
    #[arg(long, default_value = shared::image::DEFAULT_REGISTRY)]
    listen: SocketAddr,
    /// The server's data directory: the registry keeps its configuration and images in
    /// its registry/ [default: $XDG_DATA_HOME/shepherd, else ~/.local/share/shepherd].
    #[arg(long, env = "SHEPHERD_DATA_DIR")]
    data_dir: Option<PathBuf>,
    #[command(flatten)]
    access: AccessFlags,
    /// The distribution registry program.
    #[arg(long, value_name = "PATH", default_value = server::registry::DEFAULT_BINARY)]
    registry_binary: PathBuf,
}

impl RegistryArgs {
    fn settings(self) -> anyhow::Result<Settings> {
        let tokens = self.access.tokens()?;
        if !shared::listen::may_listen(self.listen, !tokens.is_empty()) {
            bail!(
                "refusing to serve the registry on {} without a token: anyone who can reach it could replace the cluster's images. Pass --token or --tokens-file, or listen on 127.0.0.1",
                self.listen
            );
        }
        let dir = self.data_dir.unwrap_or_else(default_data_dir).join(server::registry::DIR);
        let tls = self.access.certificate();
        Ok(Settings { listen: self.listen, dir, tokens, tls, binary: self.registry_binary })
    }
}

pub async fn run(args: RegistryArgs) -> anyhow::Result<()> {
    let settings = args.settings()?;
    let shutdown = CancellationToken::new();
    shepherd_process::signal::cancel_on_signal(shutdown.clone()).context("cannot listen for SIGINT and SIGTERM")?;
    server::registry::run(&settings, shutdown).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: RegistryArgs,
    }

    fn settings(flags: &[&str]) -> anyhow::Result<Settings> {
        Cli::try_parse_from(["registry", "--data-dir", "/d"].iter().chain(flags))?.args.settings()
    }

    #[test]
    fn the_registry_keeps_to_the_data_directory_and_loopback_without_a_token() {
        let open = settings(&[]).unwrap();
        assert_eq!((open.listen.to_string(), open.dir), ("127.0.0.1:5000".to_string(), PathBuf::from("/d/registry")));
        let refused = settings(&["--listen", "0.0.0.0:5000"]).map(|_| ()).unwrap_err().to_string();
        assert!(refused.starts_with("refusing to serve the registry on 0.0.0.0:5000 without a token"), "{refused}");
        let closed = settings(&["--listen", "0.0.0.0:5000", "--token", "admin-secret"]).unwrap();
        assert_eq!(closed.tokens.registry_users(), [("admin".to_string(), "admin-secret")]);
    }
}
