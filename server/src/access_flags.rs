//! The flags that say who may call a process and how it is reached, the same for the API
//! server and `shepherd registry`: bearer tokens and a certificate.

use std::path::PathBuf;

use clap::Args;
use server::auth::Tokens;

#[derive(Debug, Args)]
pub struct AccessFlags {
    /// An admin bearer token, at least 8 characters long.
    #[arg(long, env = "SHEPHERD_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A file of tokens, one `<token> <role> [node-name]` per line; roles: admin, node, viewer.
    #[arg(long)]
    pub tokens_file: Option<PathBuf>,
    /// Serve HTTPS with this certificate chain (PEM, the server's certificate first).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

impl AccessFlags {
    /// The tokens of --tokens-file and --token.
    pub fn tokens(&self) -> anyhow::Result<Tokens> {
        let mut tokens = match &self.tokens_file {
            Some(path) => Tokens::load(path)?,
            None => Tokens::default(),
        };
        if let Some(token) = &self.token {
            anyhow::ensure!(token.len() >= 8, "--token must be at least 8 characters long");
            tokens.add_flag_token(token)?;
        }
        Ok(tokens)
    }

    /// --tls-cert and --tls-key, which clap gives together or not at all.
    pub fn certificate(&self) -> Option<(PathBuf, PathBuf)> {
        self.tls_cert.clone().zip(self.tls_key.clone())
    }
}
