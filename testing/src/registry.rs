//! A real image registry for tests: `shepherd registry`'s own code running distribution's
//! `docker-registry` on a free loopback port with its storage in a temporary directory.
//! It can be stopped and started again on the same port and storage, as an outage does.

use std::time::Duration;

use server::auth::Tokens;
use server::registry::Settings;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long the registry may take to answer after it starts.
const START_LIMIT: Duration = Duration::from_secs(30);

/// A registry on `127.0.0.1:<free port>`; stopped (and its storage removed) when dropped.
pub struct TestRegistry {
    /// `127.0.0.1:PORT`, as image references name it.
    pub address: String,
    settings: Settings,
    _storage: tempfile::TempDir,
    running: Option<(CancellationToken, JoinHandle<server::registry::Result<()>>)>,
}

/// Whether `docker-registry` is installed. When it is not, a test skips with what to install,
/// except under CI (`CI` set), where it must run and so fails.
pub fn registry_available(test: &str) -> bool {
    let found = std::process::Command::new(server::registry::DEFAULT_BINARY).arg("--version").output().is_ok();
    if !found {
        let install = "install it (Debian: apt-get install docker-registry; scripts/test.sh does)";
        assert!(std::env::var_os("CI").is_none(), "{test} needs distribution's docker-registry under CI: {install}");
        eprintln!("skipping {test}: docker-registry is not installed; {install}");
    }
    found
}

impl TestRegistry {
    /// Starts a registry that signs in `tokens`' users (none: an open registry) and waits
    /// until it answers.
    pub async fn start(tokens: Tokens) -> TestRegistry {
        let storage = tempfile::tempdir().expect("a temporary directory for the registry");
        // A free port now; the registry binds it a moment later, and again after a restart.
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let settings = Settings {
            listen: format!("127.0.0.1:{port}").parse().expect("an address"),
            dir: storage.path().join(server::registry::DIR),
            tokens,
            tls: None,
            binary: server::registry::DEFAULT_BINARY.into(),
        };
        let mut registry = TestRegistry { address: settings.listen.to_string(), settings, _storage: storage, running: None };
        registry.resume().await;
        registry
    }

    /// Starts the registry again on the same port and storage, and waits until it answers.
    pub async fn resume(&mut self) {
        assert!(self.running.is_none(), "the registry at {} already runs", self.address);
        let shutdown = CancellationToken::new();
        let settings = self.settings.clone();
        let stop = shutdown.clone();
        let task = tokio::spawn(async move { server::registry::run(&settings, stop).await });
        self.running = Some((shutdown, task));
        let url = format!("http://{}/v2/", self.address);
        crate::poll(START_LIMIT, &format!("the registry at {} to answer", self.address), || async {
            if let Some((_, task)) = &self.running
                && task.is_finished()
            {
                panic!("the registry at {} stopped as it started (see its log above)", self.address);
            }
            match reqwest::get(&url).await {
                // 401: it answers, and wants a sign-in.
                Ok(answer) if matches!(answer.status().as_u16(), 200 | 401) => Ok(()),
                Ok(answer) => Err(format!("{}", answer.status())),
                Err(e) => Err(e.to_string()),
            }
        })
        .await
    }

    /// Stops the registry (SIGTERM) and waits until it has.
    pub async fn stop(&mut self) {
        let (shutdown, task) = self.running.take().unwrap_or_else(|| panic!("the registry at {} is not running", self.address));
        shutdown.cancel();
        task.await.expect("the registry task panicked").expect("the registry stopped with an error");
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        // The child is killed on drop (`kill_on_drop`) when its task is aborted.
        if let Some((shutdown, task)) = self.running.take() {
            shutdown.cancel();
            task.abort();
        }
    }
}
