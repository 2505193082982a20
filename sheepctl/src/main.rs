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
    let result = runtime.block_on(sheepctl::commands::run(cli));
    // exec -i reads stdin on a blocking thread, which a terminal may hold forever after the
    // remote command has ended: the process ends without waiting for it.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // `sheepctl get pods | head` closes the pipe early: that is not a failure.
        Err(e) if e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)) => {
            ExitCode::SUCCESS
        }
        // The remote command's own exit code, as kubectl exits with it.
        Err(e) if e.is::<sheepctl::commands::exec::RemoteExit>() => {
            eprintln!("{e}");
            let code = e.downcast_ref::<sheepctl::commands::exec::RemoteExit>().map_or(1, |exit| exit.0 & 0xff);
            ExitCode::from(u8::try_from(code).unwrap_or(1))
        }
        Err(e) => {
            eprintln!("{}", sheepctl::terminal::safe(&format!("error: {e:#}")));
            ExitCode::FAILURE
        }
    }
}
