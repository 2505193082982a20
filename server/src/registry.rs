//! `shepherd registry`: the cluster's image registry, distribution's own (`docker-registry`,
//! Debian's package), which this process configures, starts and stops. Shepherd writes its
//! configuration under the data directory (`registry/`: the config, the htpasswd file and
//! the image store) and passes signals on; the registry does the rest. With tokens, every
//! request signs in with basic auth: the users are `auth::Tokens::registry_users`, each with
//! its token as password, kept bcrypt-hashed as distribution's htpasswd wants them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::auth::Tokens;

/// The program that serves the registry: distribution 2.x as Debian installs it.
pub const DEFAULT_BINARY: &str = "docker-registry";
/// The folder of the data directory the registry keeps everything in.
pub const DIR: &str = "registry";
/// How long the registry has to stop after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot write the registry's {what} {path}: {source}")]
    Write { what: &'static str, path: String, source: std::io::Error },
    #[error("cannot hash the registry password of {user}: {message}")]
    Hash { user: String, message: String },
    #[error("the registry user {0} would stand for two tokens (a node may not be named like an admin user: admin, admin-2, …)")]
    SameUser(String),
    #[error("cannot start {binary}: {source} (Debian: apt-get install docker-registry)")]
    Start { binary: String, source: std::io::Error },
    #[error("the registry ({binary}) stopped: {status}")]
    Exited { binary: String, status: std::process::ExitStatus },
    #[error("cannot wait for the registry: {0}")]
    Wait(std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What `shepherd registry` runs.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    /// Where `config.yml`, `htpasswd` and the images (`storage/`) go.
    pub dir: PathBuf,
    /// Empty: an open registry (refused off loopback, as the API server refuses).
    pub tokens: Tokens,
    /// Serve HTTPS with this certificate chain and key (PEM).
    pub tls: Option<(PathBuf, PathBuf)>,
    pub binary: PathBuf,
}

/// Distribution's configuration. Paths are written as JSON strings, which YAML reads as
/// they are whatever they hold.
pub fn config_yaml(settings: &Settings, htpasswd: Option<&Path>) -> String {
    let quoted = |path: &Path| serde_json::to_string(&path.display().to_string()).expect("a string serializes");
    let mut yaml = format!(
        "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {}\n  headers:\n    X-Content-Type-Options: [nosniff]\n",
        quoted(&settings.dir.join("storage")),
        serde_json::to_string(&settings.listen.to_string()).expect("a string serializes"),
    );
    if let Some((cert, key)) = &settings.tls {
        yaml.push_str(&format!("  tls:\n    certificate: {}\n    key: {}\n", quoted(cert), quoted(key)));
    }
    if let Some(path) = htpasswd {
        yaml.push_str(&format!("auth:\n  htpasswd:\n    realm: shepherd\n    path: {}\n", quoted(path)));
    }
    yaml
}

/// The htpasswd file of `tokens`: one `user:bcrypt(token)` per registry user.
pub fn htpasswd(tokens: &Tokens) -> Result<String> {
    let mut text = String::new();
    let mut seen = std::collections::HashSet::new();
    for (user, token) in tokens.registry_users() {
        if !seen.insert(user.clone()) {
            return Err(Error::SameUser(user));
        }
        // Cost 10, htpasswd -B's default: each sign-in costs the registry about 50 ms.
        let hash = bcrypt::hash(token, 10).map_err(|e| Error::Hash { user: user.clone(), message: e.to_string() })?;
        text.push_str(&format!("{user}:{hash}\n"));
    }
    Ok(text)
}

/// Writes `path` readable by its owner only: it holds password hashes or names them.
fn write_private(path: &Path, what: &'static str, text: &str) -> Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let error = |source| Error::Write { what, path: path.display().to_string(), source };
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path).map_err(error)?;
    // `mode` applies only to a new file: one from before keeps its bits unless they are set.
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600)).map_err(error)?;
    file.write_all(text.as_bytes()).map_err(error)
}

/// Writes the configuration (and htpasswd file) under `settings.dir`; returns the config's path.
pub fn prepare(settings: &Settings) -> Result<PathBuf> {
    let dir_error = |source| Error::Write { what: "directory", path: settings.dir.display().to_string(), source };
    std::fs::create_dir_all(settings.dir.join("storage")).map_err(dir_error)?;
    let htpasswd_path = settings.dir.join("htpasswd");
    let htpasswd_path = match settings.tokens.is_empty() {
        true => {
            // No tokens now: a file from a run with tokens must not linger as if it applied.
            let _ = std::fs::remove_file(&htpasswd_path);
            None
        }
        false => {
            write_private(&htpasswd_path, "htpasswd file", &htpasswd(&settings.tokens)?)?;
            Some(htpasswd_path)
        }
    };
    let config = settings.dir.join("config.yml");
    write_private(&config, "configuration", &config_yaml(settings, htpasswd_path.as_deref()))?;
    Ok(config)
}

/// Writes the configuration, runs the registry until `shutdown` (then sends it SIGTERM, and
/// SIGKILL after 10 s), and fails when it stops by itself.
pub async fn run(settings: &Settings, shutdown: CancellationToken) -> Result<()> {
    let config = prepare(settings)?;
    let binary = settings.binary.display().to_string();
    let mut child = tokio::process::Command::new(&settings.binary)
        .arg("serve")
        .arg(&config)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| Error::Start { binary: binary.clone(), source })?;
    tracing::info!(listen = %settings.listen, dir = %settings.dir.display(), auth = !settings.tokens.is_empty(), "registry started");
    tokio::select! {
        status = child.wait() => {
            let status = status.map_err(Error::Wait)?;
            Err(Error::Exited { binary, status })
        }
        () = shutdown.cancelled() => {
            if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
                // SAFETY: kill takes plain integers; the pid is our own child's, not yet reaped.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
            match tokio::time::timeout(STOP_GRACE, child.wait()).await {
                Ok(status) => {
                    status.map_err(Error::Wait)?;
                }
                Err(_) => {
                    tracing::warn!("the registry did not stop within {STOP_GRACE:?} of SIGTERM: killing it");
                    child.kill().await.map_err(Error::Wait)?;
                }
            }
            tracing::info!("registry stopped");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(tokens: Tokens) -> Settings {
        Settings {
            listen: "127.0.0.1:5000".parse().unwrap(),
            dir: PathBuf::from("/data/registry"),
            tokens,
            tls: None,
            binary: DEFAULT_BINARY.into(),
        }
    }

    #[test]
    fn the_config_names_the_address_the_storage_and_the_users() {
        let open = config_yaml(&settings(Tokens::default()), None);
        assert!(open.contains("addr: \"127.0.0.1:5000\"") && open.contains("rootdirectory: \"/data/registry/storage\""), "{open}");
        assert!(!open.contains("auth:"), "{open}");
        let closed = config_yaml(&settings(Tokens::default()), Some(Path::new("/data/registry/htpasswd")));
        assert!(closed.ends_with("auth:\n  htpasswd:\n    realm: shepherd\n    path: \"/data/registry/htpasswd\"\n"), "{closed}");
    }

    #[test]
    fn htpasswd_holds_a_bcrypt_hash_of_each_token_and_never_the_token() {
        let tokens = Tokens::parse("admin-secret admin\nnode-one-secret node node-1\nviewer-secret viewer\n", "t").unwrap();
        let text = htpasswd(&tokens).unwrap();
        let lines: Vec<(&str, &str)> = text.lines().map(|l| l.split_once(':').unwrap()).collect();
        assert_eq!(lines.iter().map(|(u, _)| *u).collect::<Vec<_>>(), ["admin", "node-1"]);
        assert!(bcrypt::verify("admin-secret", lines[0].1).unwrap());
        assert!(bcrypt::verify("node-one-secret", lines[1].1).unwrap());
        assert!(!text.contains("secret"), "{text}");
        let clash = Tokens::parse("admin-secret admin\nnode-one-secret node admin\n", "t").unwrap();
        assert!(matches!(htpasswd(&clash), Err(Error::SameUser(user)) if user == "admin"));
    }

    #[test]
    fn prepare_keeps_the_files_to_their_owner_and_drops_a_stale_htpasswd() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let mut settings = settings(Tokens::parse("admin-secret admin\n", "t").unwrap());
        settings.dir = dir.path().join(DIR);
        std::fs::create_dir_all(&settings.dir).unwrap();
        let htpasswd = settings.dir.join("htpasswd");
        std::fs::write(&htpasswd, "old").unwrap();
        std::fs::set_permissions(&htpasswd, std::fs::Permissions::from_mode(0o644)).unwrap();
        let config = prepare(&settings).unwrap();
        assert_eq!((mode(&config), mode(&htpasswd)), (0o600, 0o600));
        assert!(std::fs::read_to_string(&config).unwrap().contains(&format!("path: \"{}\"", htpasswd.display())));
        settings.tokens = Tokens::default();
        let config = prepare(&settings).unwrap();
        assert!(!htpasswd.exists(), "an open registry leaves no htpasswd behind");
        assert!(!std::fs::read_to_string(&config).unwrap().contains("auth:"));
    }
}
