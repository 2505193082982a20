//! The one way a test waits: look at a condition now, look again on each wake, fail with what
//! it waited for (and what it saw last) at a deadline. Woken by the watch stream when the
//! condition is on the API ([`eventually`]), by a short tick when it is not ([`poll`], and
//! [`poll_blocking`] for tests without a runtime).

use std::future::Future;
use std::time::{Duration, Instant};

use futures::stream::{BoxStream, select_all};
use futures::{Stream, StreamExt};
use shared::model::Kind;
use shepherd_client::{Client, Selection};

/// How often [`poll`] and [`poll_blocking`] look again.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// What one look at a condition found: `Some`/`Ok` is the value waited for; `None`/`Err` is
/// not yet, `Err` saying what was seen instead, for the failure message.
pub trait Look<T> {
    fn found(self) -> Result<T, String>;
}

impl<T> Look<T> for Option<T> {
    fn found(self) -> Result<T, String> {
        self.ok_or_else(String::new)
    }
}

impl<T> Look<T> for Result<T, String> {
    fn found(self) -> Result<T, String> {
        self
    }
}

/// The failure at the deadline: what the test waited for, and what it saw last.
fn timed_out(timeout: Duration, what: &str, seen: &str) -> ! {
    match seen {
        "" => panic!("timed out after {timeout:?} waiting for {what}"),
        seen => panic!("timed out after {timeout:?} waiting for {what}; last seen: {seen}"),
    }
}

/// Looks at `check` now and again at each item of `wakes` until it finds its value.
async fn until<T, L, F, Fut>(timeout: Duration, what: &str, mut wakes: impl Stream<Item = Result<(), String>> + Unpin, mut check: F) -> T
where
    L: Look<T>,
    F: FnMut() -> Fut,
    Fut: Future<Output = L>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let seen = match check().await.found() {
            Ok(value) => return value,
            Err(seen) => seen,
        };
        match tokio::time::timeout_at(deadline, wakes.next()).await {
            Ok(Some(Ok(()))) => {}
            Ok(Some(Err(e))) => panic!("the watch broke while waiting for {what}: {e}"),
            Ok(None) => panic!("the watch ended while waiting for {what}"),
            Err(_) => timed_out(timeout, what, &seen),
        }
    }
}

/// Waits for a condition on the API: `check` runs now, then again each time a watch stream
/// says something (a change to any object, or a bookmark, so that a condition on time passing
/// is looked at again every bookmark interval). Panics with `what` after `timeout`.
pub async fn eventually<T, L, F, Fut>(client: &Client, timeout: Duration, what: &str, check: F) -> T
where
    L: Look<T>,
    F: FnMut() -> Fut,
    Fut: Future<Output = L>,
{
    until(timeout, what, changes(client).await, check).await
}

/// Waits for a condition no watch reports (a container, a file, an agent's own API): `check`
/// runs now and every [`POLL_INTERVAL`]. Panics with `what` after `timeout`.
pub async fn poll<T, L, F, Fut>(timeout: Duration, what: &str, check: F) -> T
where
    L: Look<T>,
    F: FnMut() -> Fut,
    Fut: Future<Output = L>,
{
    let ticks = futures::stream::unfold((), |()| async {
        tokio::time::sleep(POLL_INTERVAL).await;
        Some((Ok(()), ()))
    });
    until(timeout, what, Box::pin(ticks), check).await
}

/// [`poll`] for a test that blocks (one that drives a binary), with no runtime of its own.
pub fn poll_blocking<T, L: Look<T>>(timeout: Duration, what: &str, mut check: impl FnMut() -> L) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        let seen = match check().found() {
            Ok(value) => return value,
            Err(seen) => seen,
        };
        if Instant::now() >= deadline {
            timed_out(timeout, what, &seen);
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// One item for every event and bookmark on the watch of every kind, from now on.
async fn changes(client: &Client) -> BoxStream<'static, Result<(), String>> {
    let mut streams = Vec::new();
    for kind in Kind::ALL {
        let everything = Selection::default();
        let list = client.list_objects(kind, &everything).await.unwrap_or_else(|e| panic!("cannot list {}: {e}", kind.plural()));
        let stream =
            client.watch(kind, &everything, list.resource_version).await.unwrap_or_else(|e| panic!("cannot watch {}: {e}", kind.plural()));
        streams.push(stream.map(|item| item.map(drop).map_err(|e| e.to_string())).boxed());
    }
    select_all(streams).boxed()
}

/// Waits for `child` to exit, as after a SIGTERM; panics after `timeout`.
pub async fn exited(child: &mut std::process::Child, timeout: Duration) -> std::process::ExitStatus {
    poll(timeout, &format!("process {} to exit", child.id()), || {
        let status = child.try_wait().expect("the child's status");
        async move { status }
    })
    .await
}
