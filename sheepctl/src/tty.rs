//! The local terminal of `exec -t`: raw mode for the session's length, so that every key
//! reaches the remote shell as typed, and the window's size, sent at the start and on each
//! SIGWINCH as kubectl sends it.

use std::io::IsTerminal;

use futures::{Stream, StreamExt, future};
use rustix::termios::{OptionalActions, Termios, tcgetattr, tcgetwinsize, tcsetattr};
use shepherd_client::remote_command::TerminalSize;
use tokio::signal::unix::{SignalKind, signal};

/// Standard input in raw mode until dropped, which restores the mode it had.
pub struct RawMode {
    saved: Termios,
}

impl RawMode {
    /// Raw mode on standard input, or `None` when it is not a terminal (kubectl then runs
    /// the session without one's modes, and says so).
    pub fn enter() -> std::io::Result<Option<RawMode>> {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return Ok(None);
        }
        let saved = tcgetattr(&stdin)?;
        let mut raw = saved.clone();
        raw.make_raw();
        tcsetattr(&stdin, OptionalActions::Now, &raw)?;
        Ok(Some(RawMode { saved }))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = tcsetattr(std::io::stdin(), OptionalActions::Now, &self.saved);
    }
}

/// The size of the terminal on standard output, if it is one.
fn size() -> Option<TerminalSize> {
    let size = tcgetwinsize(std::io::stdout()).ok()?;
    (size.ws_col > 0 && size.ws_row > 0).then_some(TerminalSize { width: size.ws_col, height: size.ws_row })
}

/// The terminal's size now, then after each change.
pub fn sizes() -> std::io::Result<impl Stream<Item = TerminalSize> + Unpin> {
    let changes = signal(SignalKind::window_change())?;
    let later = futures::stream::unfold(changes, |mut changes| async move {
        changes.recv().await?;
        Some((size(), changes))
    });
    Ok(Box::pin(futures::stream::iter([size()]).chain(later).filter_map(future::ready)))
}
