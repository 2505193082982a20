//! What keeps the cache in step with etcd, as kube-apiserver's reflector keeps its watch
//! cache: a list of the whole prefix at one revision, then a watch from the next, applied
//! in order and passed to the cache's watchers. A watch that breaks resumes from the last
//! revision applied; one that etcd has compacted past lists again and ends every watch, so
//! that their clients list again too.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, EventType as EtcdEventType, GetOptions, WatchOptions, WatchResponse};
use tokio::time::Instant;

use super::super::error::{Result, StoreError};
use super::super::persistence::Snapshot;
use super::super::state::{State, kept};
use super::Inner;
use super::layout::Layout;

/// Keys a list reads at once.
const PAGE: i64 = 1000;
/// How long a broken watch waits before it is opened again.
const REOPEN_AFTER: Duration = Duration::from_millis(500);

/// Every object under the prefix, read at one revision page by page.
pub(super) async fn list(client: &Client, layout: &Layout) -> Result<Snapshot> {
    let kv = client.kv_client();
    let range_end = prefix_end(&layout.range());
    let mut start = layout.range().into_bytes();
    let mut revision = 0;
    let mut objects = Vec::new();
    let mut unreadable = Vec::new();
    let mut stale = Vec::new();
    loop {
        let mut options = GetOptions::new().with_range(range_end.clone()).with_limit(PAGE);
        if revision > 0 {
            options = options.with_revision(revision);
        }
        let page = on_a_member(|| {
            let (mut kv, start, options) = (kv.clone(), start.clone(), options.clone());
            async move { kv.get(start, Some(options)).await }
        })
        .await
        .map_err(|e| unavailable("list the store", &e))?;
        if revision == 0 {
            revision = page.header().map_or(0, |h| h.revision());
        }
        for kv in page.kvs() {
            let Some(key) = layout.parse(kv.key()) else { continue };
            // As the watch does: one bad value must not keep the whole cluster from starting.
            match layout.decode(&key, kv.value(), kv.mod_revision()) {
                Ok((object, is_stale)) => {
                    if is_stale {
                        stale.push(key);
                    }
                    objects.push(object);
                }
                Err(why) => {
                    tracing::error!("{key} cannot be read: {why}; reads and writes of it fail until it is fixed");
                    unreadable.push((key, why));
                }
            }
        }
        match page.kvs().last() {
            Some(last) if page.more() => {
                start = last.key().to_vec();
                start.push(0);
            }
            _ => break,
        }
    }
    Ok(Snapshot { revision: u64::try_from(revision).unwrap_or_default(), objects, unreadable, stale })
}

/// The end of the range of every key that starts with `prefix`, as etcd's `WithPrefix`.
pub(super) fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// How often a call that could not connect to a member goes again, to another.
const CONNECT_TRIES: usize = 6;

/// Runs `call`, again while it fails to connect to a member (one that is down; the client
/// balances over every endpoint): such a request never reached etcd, so it is safe to send again.
pub(super) async fn on_a_member<T, F, Fut>(mut call: F) -> std::result::Result<T, etcd_client::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
{
    let mut tries = 1;
    loop {
        match call().await {
            Err(e) if tries < CONNECT_TRIES && e.to_string().contains("tcp connect error") => tries += 1,
            done => return done,
        }
    }
}

pub(super) fn unavailable(what: &str, error: &etcd_client::Error) -> StoreError {
    StoreError::Unavailable(format!("cannot {what} in etcd: {error}"))
}

/// Watches the prefix from after the cache's revision until shutdown, applying each change.
pub(super) async fn run(inner: Arc<Inner>) {
    while !inner.shutdown.is_cancelled() {
        if let Err(e) = follow(&inner).await {
            tracing::warn!("the etcd watch of {} broke: {e}; opening it again", inner.layout.prefix());
        }
        tokio::select! {
            _ = inner.shutdown.cancelled() => break,
            _ = tokio::time::sleep(REOPEN_AFTER) => {}
        }
    }
}

/// One watch stream, from after the revision the cache has, until it breaks or shutdown.
async fn follow(inner: &Inner) -> Result<()> {
    let from = inner.cache.state.read().expect("store state lock").revision();
    let options =
        WatchOptions::new().with_range(prefix_end(&inner.layout.range())).with_start_revision(i64::try_from(from + 1).unwrap_or(i64::MAX));
    let mut stream = inner.client.watch_client().watch(inner.layout.range(), Some(options)).await.map_err(|e| unavailable("watch", &e))?;
    loop {
        tokio::select! {
            _ = inner.shutdown.cancelled() => return Ok(()),
            response = stream.message() => match response.map_err(|e| unavailable("watch", &e))? {
                Some(response) if response.canceled() => {
                    if response.compact_revision() > 0 {
                        relist(inner).await?;
                    }
                    return Err(StoreError::Unavailable(format!("etcd ended the watch: {}", response.cancel_reason())));
                }
                Some(response) => apply(inner, &response),
                None => return Err(StoreError::Unavailable("etcd closed the watch".into())),
            },
        }
    }
}

/// Applies one watch response's changes, in order.
fn apply(inner: &Inner, response: &WatchResponse) {
    if response.events().is_empty() {
        return;
    }
    let mut state = inner.cache.state.write().expect("store state lock");
    let now = Instant::now();
    let mut events = Vec::with_capacity(response.events().len());
    let mut last = 0;
    for event in response.events() {
        let Some(kv) = event.kv() else { continue };
        let revision = u64::try_from(kv.mod_revision()).unwrap_or_default();
        last = last.max(revision);
        // The marker, the node guards and the progress key are no objects, but their
        // revisions count: every change before them has come.
        let Some(key) = inner.layout.parse(kv.key()) else { continue };
        let (object, stale) = match event.event_type() {
            EtcdEventType::Put => match inner.layout.decode(&key, kv.value(), kv.mod_revision()) {
                Ok((object, stale)) => (Some(kept(object)), stale),
                Err(why) => {
                    tracing::error!("{key} cannot be read: {why}; reads and writes of it fail until it is fixed");
                    events.extend(state.record_unreadable(&key, why, revision, now));
                    continue;
                }
            },
            EtcdEventType::Delete => (None, false),
        };
        let prev = state.get(&key).cloned();
        if object.is_none() && prev.is_none() {
            state.forget_unreadable(&key);
            continue;
        }
        events.push(state.record(&key, object, prev, revision, now));
        if stale {
            state.mark_stale(&key);
        }
    }
    state.advance(last);
    state.forget_history(&inner.cache.history, now);
    // Under the state lock, as the embedded store dispatches: a watch that registers sees each
    // change in its replay or in its mailbox, never both.
    inner.cache.watchers.lock().expect("watchers lock").dispatch(&events, state.lag_limit(&inner.cache.history));
    inner.applied.send_replace(state.revision());
}

/// Loads the whole prefix again after etcd compacted past the cache's revision, and ends
/// every watch: what changed in between is known only as the new state.
async fn relist(inner: &Inner) -> Result<()> {
    let snapshot = list(&inner.client, &inner.layout).await?;
    tracing::warn!(
        "etcd compacted past the cache's revision: listed {} objects again at revision {}",
        snapshot.objects.len(),
        snapshot.revision
    );
    let mut state = inner.cache.state.write().expect("store state lock");
    *state = State::load(snapshot);
    inner.cache.watchers.lock().expect("watchers lock").restart();
    inner.applied.send_replace(state.revision());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_range_ends_after_its_last_key() {
        assert_eq!(prefix_end("/registry/"), b"/registry0".to_vec());
        assert_eq!(prefix_end("a\u{7f}"), b"a\x80".to_vec());
        assert_eq!(String::from_utf8_lossy(&prefix_end("/r/")), "/r0");
    }
}
