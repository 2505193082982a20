//! Log output for Shepherd's binaries, and how a run's failure reaches the terminal.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Sends log lines to standard error at `default_level` unless `RUST_LOG` says otherwise,
/// coloured only on a terminal. A line that cannot be written (standard error piped into a
/// `head` that has exited) is dropped: the subscriber's own report of the failed write would
/// panic the task that logged, and with it the signal handler that stops the process.
pub fn init(default_level: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level)))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .log_internal_errors(false)
        .init();
}

/// The exit status of a binary's run: a failure is one `error:` line with its causes, never
/// the backtrace that returning an `anyhow::Error` from `main` prints when `RUST_BACKTRACE`
/// is set.
pub fn exit_code(result: anyhow::Result<()>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
