//! The `sheepctl` binary: parse the flags, run the command, and turn any error into one
//! `error: …` message and a non-zero exit.

use std::process::ExitCode;

use clap::Parser;
use sheepctl::cli::Cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(sheepctl::commands::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        // `sheepctl get pods | head` closes the pipe early: that is not a failure.
        Err(e) if e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)) => {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{}", sheepctl::terminal::safe(&format!("error: {e:#}")));
            ExitCode::FAILURE
        }
    }
}
