//! Log output for Shepherd's binaries, and how a run's failure reaches the terminal.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::{DefaultFields, Writer};

/// Sends log lines to standard error at `default_level` unless `RUST_LOG` says otherwise,
/// coloured only on a terminal, their fields [`EscapedFields`]. A line that cannot be written (standard error piped into a
/// `head` that has exited) is dropped: the subscriber's own report of the failed write would
/// panic the task that logged, and with it the signal handler that stops the process.
pub fn init(default_level: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level)))
        .fmt_fields(EscapedFields)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .log_internal_errors(false)
        .init();
}

/// A line's fields as tracing writes them, every control character escaped (`\0`,
/// `\u{1b}`, `\n`): names and images come from users, unchecked (a pod's image is one the
/// API accepts with any byte but a space), and a NUL, a terminal sequence or a newline in
/// one would garble the terminal or forge a line of its own.
pub struct EscapedFields;

impl<'writer> FormatFields<'writer> for EscapedFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'writer>, fields: R) -> std::fmt::Result {
        let mut plain = String::new();
        DefaultFields::new().format_fields(Writer::new(&mut plain), fields)?;
        for c in plain.chars() {
            match c.is_control() {
                true => write!(writer, "{}", c.escape_debug())?,
                false => writer.write_char(c)?,
            }
        }
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn control_bytes_in_fields_are_escaped_and_a_line_stays_one_line() {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt().fmt_fields(EscapedFields).with_ansi(false).with_writer(move || writer.clone()).finish();
        tracing::subscriber::with_default(subscriber, || {
            let image = "mini\0mal\u{1b}[31m\nINFO forged line";
            tracing::warn!(image = %image, error = %format!("failed to pull {image}"), "reconcile failed; retrying");
        });
        let logged = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        assert_eq!(logged.lines().count(), 1, "{logged}");
        assert!(!logged.trim_end().chars().any(char::is_control), "{logged:?}");
        assert!(logged.contains(r"image=mini\0mal\u{1b}[31m\nINFO forged line"), "{logged}");
        assert!(logged.contains("reconcile failed; retrying"), "{logged}");
    }
}
