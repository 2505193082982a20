//! A real `shepherd` process for tests and benches that kill, stop or freeze it: started with
//! the given flags on 127.0.0.1:0, its address read from its log, which goes on being read.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, Command};

/// How long the binary gets to listen.
const LISTEN_LIMIT: Duration = Duration::from_secs(30);

pub struct ShepherdProcess {
    pub url: String,
    pub child: Child,
    /// The data directory [`ShepherdProcess::start`] made, removed with the process.
    _dir: Option<tempfile::TempDir>,
}

/// The rest of a process's log (standard error), line by line.
pub type Log = Lines<BufReader<ChildStderr>>;

impl ShepherdProcess {
    /// Starts `binary` (`env!("CARGO_BIN_EXE_shepherd")`) with `args`, a data directory of
    /// its own and `--addr 127.0.0.1:0`.
    pub async fn start(binary: impl AsRef<Path>, args: &[&str]) -> ShepherdProcess {
        let dir = tempfile::tempdir().expect("a data directory");
        let mut process = ShepherdProcess::start_in(binary, dir.path(), args).await;
        process._dir = Some(dir);
        process
    }

    /// Starts `binary` with `args` on the data directory `dir`, which outlives the process,
    /// so that another can start on what it left.
    pub async fn start_in(binary: impl AsRef<Path>, dir: &Path, args: &[&str]) -> ShepherdProcess {
        let (process, mut log) = ShepherdProcess::start_reading_log(binary, dir, args).await;
        tokio::spawn(async move { while let Ok(Some(_)) = log.next_line().await {} });
        process
    }

    /// [`ShepherdProcess::start_in`], handing back the rest of its log for the caller to read
    /// or to drop, as `shepherd 2>&1 | head` does.
    pub async fn start_reading_log(binary: impl AsRef<Path>, dir: &Path, args: &[&str]) -> (ShepherdProcess, Log) {
        let mut child = Command::new(binary.as_ref())
            .args(["--addr", "127.0.0.1:0", "--data-dir"])
            .arg(dir)
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the shepherd binary starts");
        let mut lines = BufReader::new(child.stderr.take().expect("its log")).lines();
        let url = tokio::time::timeout(LISTEN_LIMIT, async {
            while let Some(line) = lines.next_line().await.expect("its log reads") {
                if let Some(rest) = line.split("listening on ").nth(1) {
                    return rest.split_whitespace().next().expect("an address").to_string();
                }
            }
            panic!("shepherd {args:?} exited before listening");
        })
        .await
        .expect("shepherd listens within 30 s");
        (ShepherdProcess { url, child, _dir: None }, lines)
    }

    /// Sends `signal` (SIGTERM, SIGSTOP, SIGCONT …) to the process.
    pub fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id().expect("still running")).expect("a pid");
        // SAFETY: kill takes plain integers.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill({pid}, {signal})");
    }

    /// The server's `/api/v1/info`, or `None` while it does not answer.
    pub async fn info(&self) -> Option<serde_json::Value> {
        reqwest::get(format!("{}/api/v1/info", self.url)).await.ok()?.json().await.ok()
    }
}
