//! Shutdown on SIGINT (Ctrl-C) or SIGTERM: the one signal handler of both binaries.

use std::fmt;
use std::future::Future;

use tokio_util::sync::CancellationToken;

/// The signal that asked the process to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Interrupt,
    Terminate,
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
        })
    }
}

/// Resolves on the first SIGINT or SIGTERM. Both handlers are installed before it returns,
/// so a signal that comes before the future is first polled is not lost; the error is the
/// one of installing them.
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = Signal> + Send + 'static> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        Ok(async move {
            tokio::select! {
                _ = interrupt.recv() => Signal::Interrupt,
                _ = terminate.recv() => Signal::Terminate,
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            // Without a handler Ctrl-C ends the process abruptly; with a failed one it never resolves.
            match tokio::signal::ctrl_c().await {
                Ok(()) => Signal::Interrupt,
                Err(_) => std::future::pending().await,
            }
        })
    }
}

/// Cancels `shutdown` on the first SIGINT or SIGTERM, saying which came.
pub fn cancel_on_signal(shutdown: CancellationToken) -> std::io::Result<()> {
    let signal = shutdown_signal()?;
    tokio::spawn(async move {
        let signal = signal.await;
        tracing::info!("{signal}: shutting down");
        shutdown.cancel();
    });
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sigterm_cancels_the_shutdown_token() {
        let shutdown = CancellationToken::new();
        cancel_on_signal(shutdown.clone()).unwrap();
        assert!(!shutdown.is_cancelled());
        // SAFETY: raise takes a plain signal number and sends it to this process.
        assert_eq!(unsafe { libc::raise(libc::SIGTERM) }, 0);
        shutdown.cancelled().await;
    }
}
