//! Retrying until shutdown: an attempt, then after each failure a wait that backs off
//! (`shared::backoff`), until it succeeds or the agent shuts down.

use std::fmt::Display;
use std::future::Future;

use shared::backoff::Backoff;
use tokio_util::sync::CancellationToken;

/// Runs `attempt` until it succeeds, logging each failure as "`failed`: error; retrying" and
/// waiting out `backoff` before the next. `None` on shutdown; an attempt under way is never
/// cut short, only the waits between them.
pub async fn until_shutdown<T, E, F, Fut>(backoff: Backoff, shutdown: &CancellationToken, failed: &str, mut attempt: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: Display,
{
    let mut failures = 0;
    loop {
        match attempt().await {
            Ok(value) => return Some(value),
            Err(e) => tracing::warn!(error = %e, "{failed}; retrying"),
        }
        failures += 1;
        tokio::select! {
            _ = tokio::time::sleep(backoff.delay(failures)) => {}
            _ = shutdown.cancelled() => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;

    const BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(4));

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_until_an_attempt_succeeds() {
        let began = Instant::now();
        let mut attempts = Vec::new();
        let shutdown = CancellationToken::new();
        let got = until_shutdown(BACKOFF, &shutdown, "cannot do it", || {
            attempts.push(began.elapsed().as_secs());
            let n = attempts.len();
            async move { if n < 5 { Err("not yet") } else { Ok(n) } }
        })
        .await;
        assert_eq!(got, Some(5));
        assert_eq!(attempts, [0, 1, 3, 7, 11], "waits of 1, 2, 4, then at most 4 s");
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_ends_the_wait_between_attempts() {
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            stop.cancel();
        });
        let mut attempts = 0;
        let got: Option<()> = until_shutdown(BACKOFF, &shutdown, "cannot do it", || {
            attempts += 1;
            async { Err("never") }
        })
        .await;
        assert_eq!((got, attempts), (None, 2), "a try at 0 s and 1 s; none at 3 s");
    }
}
