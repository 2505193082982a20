//! A terminal as a participant has one: one bash for the whole session, fed one command
//! at a time, so that variables and `export`s carry over; stdout and stderr together, as
//! a screen shows them; a command that keeps running (a server, an agent, a `-w` watch) runs
//! as a job of its own process group, which Ctrl-C (SIGINT to the group) ends. Everything
//! the terminal shows is also written to a transcript file.

use std::io::Write as _;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What a command printed and how it ended.
#[derive(Debug, Clone)]
pub struct Ran {
    pub status: i32,
    pub output: String,
}

pub struct Terminal {
    pub name: String,
    bash: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    /// Ends every marker line this terminal's bash prints, so no output can forge one.
    marker: String,
    job: Option<u32>,
    transcript: PathBuf,
}

impl Terminal {
    /// Opens a terminal in `dir` with `env` on top of this process's environment, minus
    /// `unset`; what it shows goes to `transcript` as well.
    pub fn open(name: &str, dir: &Path, env: &[(&str, String)], unset: &[&str], transcript: &Path) -> Terminal {
        let mut command = std::process::Command::new("bash");
        command.args(["--noprofile", "--norc"]).current_dir(dir).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
        for name in unset {
            command.env_remove(name);
        }
        command.envs(env.iter().map(|(k, v)| (k, v)));
        // A terminal's Ctrl-C ends its foreground command even when this test was started
        // with SIGINT ignored (in the background of a script), which every child would inherit.
        // SAFETY: signal(2) is async-signal-safe and touches no memory of this process.
        unsafe {
            command.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        let mut bash = command.spawn().unwrap_or_else(|e| panic!("cannot start bash for the {name} terminal: {e}"));
        let stdin = bash.stdin.take().expect("bash's stdin");
        let stdout = bash.stdout.take().expect("bash's stdout");
        if let Some(parent) = transcript.parent() {
            std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("cannot create {}: {e}", parent.display()));
        }
        let mut file = std::fs::File::create(transcript).unwrap_or_else(|e| panic!("cannot write {}: {e}", transcript.display()));
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = writeln!(file, "{line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let marker = format!("@@{name}-{}-{nanos}@@", std::process::id());
        let mut terminal = Terminal { name: name.into(), bash, stdin, lines, marker, job: None, transcript: transcript.into() };
        // The screen shows both streams, in the order they were written.
        terminal.send("exec 2>&1\nset -o pipefail\n");
        terminal
    }

    fn send(&mut self, text: &str) {
        self.stdin
            .write_all(text.as_bytes())
            .and_then(|()| self.stdin.flush())
            .unwrap_or_else(|e| panic!("the {} terminal's bash is gone: {e}", self.name));
    }

    /// Runs `command` to its end, at most `within`: what it printed and its exit status.
    pub fn run(&mut self, command: &str, within: Duration) -> Ran {
        assert!(self.job.is_none(), "the {} terminal is still running a job: Ctrl-C it first", self.name);
        // Its own stdin is not the stream of commands to come.
        self.send(&format!("{{ {command}\n}} </dev/null\necho \"{m}$?{m}\"\n", m = self.marker));
        let (output, status) = self.until_marker(within, command);
        Ran { status: status.parse().unwrap_or_else(|_| panic!("a status, not {status:?}")), output }
    }

    /// Starts `command` as a job in a process group of its own, the way a terminal runs a
    /// foreground command that Ctrl-C can reach.
    pub fn start(&mut self, command: &str) {
        assert!(self.job.is_none(), "the {} terminal is already running a job", self.name);
        self.send(&format!("set -m\n{{ {command}\n}} </dev/null &\nset +m\necho \"{m}$!{m}\"\n", m = self.marker));
        let (_, pid) = self.until_marker(Duration::from_secs(10), command);
        self.job = Some(pid.parse().unwrap_or_else(|_| panic!("a pid, not {pid:?}")));
    }

    /// Reads what the running job prints until all of it so far satisfies `wanted`; that
    /// output. Panics with what it saw after `within`.
    pub fn expect_output(&mut self, what: &str, within: Duration, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + within;
        let mut shown = String::new();
        while !wanted(&shown) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    shown.push_str(&line);
                    shown.push('\n');
                }
                Err(_) => panic!("the {} terminal never showed {what} within {within:?}; it showed:\n{shown}", self.name),
            }
        }
        shown
    }

    /// Ctrl-C: SIGINT to the job's process group, then waits at most `within` for it to
    /// end; what it printed meanwhile and its exit status.
    pub fn interrupt(&mut self, within: Duration) -> Ran {
        let pid = self.job.take().unwrap_or_else(|| panic!("Ctrl-C in the {} terminal, but nothing runs there", self.name));
        signal("INT", pid);
        self.send(&format!("wait {pid}\necho \"{m}$?{m}\"\n", m = self.marker));
        let (output, status) = self.until_marker(within, "the job to end after Ctrl-C");
        Ran { status: status.parse().unwrap_or_else(|_| panic!("a status, not {status:?}")), output }
    }

    /// The lines up to this terminal's marker, and what the marker line carried before it.
    fn until_marker(&mut self, within: Duration, doing: &str) -> (String, String) {
        let deadline = Instant::now() + within;
        let mut output = String::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                // A last line without a newline runs into the marker line.
                Ok(line) => match line.split_once(&self.marker) {
                    Some((before, value)) => {
                        output.push_str(before);
                        return (output, value.trim_end_matches(&self.marker).to_string());
                    }
                    None => {
                        output.push_str(&line);
                        output.push('\n');
                    }
                },
                Err(mpsc::RecvTimeoutError::Timeout) => break,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("the {} terminal's bash ended while running {doing}\n{output}", self.name)
                }
            }
        }
        panic!(
            "the {} terminal did not finish {doing} within {within:?} (transcript: {}); it showed:\n{output}",
            self.name,
            self.transcript.display()
        )
    }
}

impl Drop for Terminal {
    /// Ctrl-C to a job still running, then SIGKILL if it has not ended within a minute
    /// (a node removes its containers on the way out), and the shell goes.
    fn drop(&mut self) {
        if let Some(pid) = self.job.take() {
            signal("INT", pid);
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline && group_alive(pid) {
                std::thread::sleep(Duration::from_millis(100));
            }
            signal("KILL", pid);
        }
        let _ = self.bash.kill();
        let _ = self.bash.wait();
    }
}

/// Sends `signal` to the process group `group`.
fn signal(signal: &str, group: u32) {
    let _ = std::process::Command::new("kill").args([&format!("-{signal}"), "--", &format!("-{group}")]).stderr(Stdio::null()).status();
}

fn group_alive(group: u32) -> bool {
    std::process::Command::new("kill").args(["-0", "--", &format!("-{group}")]).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}
