//! Shows the state of objects being waited for: on a terminal a spinner, with each change
//! printed above it; otherwise one plain line per change, or nothing at all.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A spinner on standard error, for a person watching a terminal.
    Spinner,
    /// One line per change on standard output, for logs and scripts.
    Lines,
    Quiet,
}

impl Mode {
    /// A spinner when standard error is a terminal, else `otherwise`.
    pub fn detect(otherwise: Mode) -> Mode {
        if std::io::stderr().is_terminal() { Mode::Spinner } else { otherwise }
    }
}

pub struct Progress {
    mode: Mode,
    bar: Option<ProgressBar>,
    last: BTreeMap<String, String>,
}

impl Progress {
    pub fn new(mode: Mode) -> Progress {
        let bar = (mode == Mode::Spinner).then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("{spinner} {msg} ({elapsed})").unwrap_or_else(|_| ProgressStyle::default_spinner());
            bar.set_style(style);
            bar.enable_steady_tick(Duration::from_millis(100));
            bar
        });
        Progress { mode, bar, last: BTreeMap::new() }
    }

    /// Reports `name`'s state; prints only when it differs from the last one reported.
    pub fn update(&mut self, name: &str, state: &str) {
        if self.last.get(name).is_some_and(|s| s == state) {
            return;
        }
        self.last.insert(name.to_string(), state.to_string());
        let line = crate::terminal::safe(&format!("{name}: {state}")).into_owned();
        match (&self.bar, self.mode) {
            (Some(bar), _) => {
                bar.println(&line);
                bar.set_message(line);
            }
            (None, Mode::Lines) => {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }
            _ => {}
        }
    }

    /// Removes the spinner; lines already printed stay.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_not_reported() {
        let mut progress = Progress::new(Mode::Quiet);
        progress.update("pod/a", "Pending");
        progress.update("pod/a", "Pending");
        progress.update("pod/b", "Pending");
        assert_eq!(progress.last.len(), 2);
        progress.update("pod/a", "Running");
        assert_eq!(progress.last["pod/a"], "Running");
    }
}
