//! `?watch=true&resource_version=N` as Server-Sent Events: every change strictly after N
//! (replayed from the store's history, then live), filtered like the list, with a BOOKMARK
//! every `bookmark_interval`. N older than the history is a 410 before any byte streams;
//! N newer than the store is waited for ([`catch_up`]), then a 410 too.
//! Each event's SSE id is its revision, so the `Last-Event-ID` header of a reconnecting
//! EventSource resumes as `resource_version` does, and wins over it ([`resume_from`]).
//! The store hands the stream only the changes of its kind, namespace and node; each
//! object's JSON is encoded once however many streams send it.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{FutureExt, StreamExt};
use shared::api::{SSE_EVENT_WATCH, WatchEvent, WatchEventType};
use shared::model::Kind;
use tokio_util::sync::CancellationToken;

use crate::error::{ApiError, ApiResult};
use crate::query::{Filter, translate};
use crate::state::AppState;
use crate::store::{Store, StoreEvent, WatchBatch, WatchStream};

/// The `data:` of a [`WatchEvent`], around the object's shared JSON.
fn change(type_: WatchEventType, event: &StoreEvent) -> SseEvent {
    let type_ = serde_json::to_string(&type_).unwrap_or_default();
    let data = format!(r#"{{"type":{type_},"resource_version":{},"object":{}}}"#, event.revision, event.object_json());
    SseEvent::default().event(SSE_EVENT_WATCH).id(event.revision.to_string()).data(data)
}

fn bookmark(revision: u64) -> SseEvent {
    let event = WatchEvent { type_: WatchEventType::Bookmark, resource_version: revision, object: None };
    let data = serde_json::to_string(&event).unwrap_or_default();
    SseEvent::default().event(SSE_EVENT_WATCH).id(revision.to_string()).data(data)
}

struct Streamer {
    store: Arc<dyn Store>,
    changes: WatchStream,
    filter: Filter,
    revision: u64,
    bookmarks: tokio::time::Interval,
    pending: VecDeque<SseEvent>,
    shutdown: CancellationToken,
}

impl Streamer {
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            tokio::select! {
                _ = self.shutdown.cancelled() => return None,
                _ = self.bookmarks.tick() => {
                    if !self.bookmark_due() {
                        return None;
                    }
                }
                batch = self.changes.next() => match batch {
                    None => return None,
                    Some(item) => self.take(item),
                },
            }
        }
    }

    /// A bookmark tick; false when the stream has ended. Every change up to the store's
    /// revision is in this stream's mailbox by now: when the mailbox is empty, all were sent
    /// and a bookmark at that revision holds. Else the batch taken goes first, and a later
    /// tick bookmarks.
    fn bookmark_due(&mut self) -> bool {
        let revision = self.store.revision();
        match self.changes.next().now_or_never() {
            None => {
                self.revision = self.revision.max(revision);
                self.pending.push_back(bookmark(self.revision));
                true
            }
            Some(Some(item)) => {
                self.take(item);
                true
            }
            // Ended (it fell behind): no bookmark may claim what it did not send.
            Some(None) => false,
        }
    }

    fn take(&mut self, batch: WatchBatch) {
        self.revision = self.revision.max(batch.revision);
        let filter = &self.filter;
        self.pending.extend(batch.events.iter().filter_map(|e| translate(e, filter).map(|type_| change(type_, e))));
    }
}

/// The revision a watch starts after: the `Last-Event-ID` header when given, else the
/// query's `resource_version`, else 0 (from now). The header wins because an EventSource
/// reconnects with the URL it was opened with, whose revision is older than the last event
/// the client received; a client that sets only the query gets the query.
pub fn resume_from(headers: &HeaderMap, resource_version: Option<u64>) -> ApiResult<u64> {
    let Some(header) = headers.get("last-event-id") else { return Ok(resource_version.unwrap_or(0)) };
    let text = header.to_str().map_err(|_| ApiError::bad_request("Last-Event-ID: not text; send the id of the last event received"))?;
    match text.trim() {
        "" => Ok(resource_version.unwrap_or(0)),
        id => shared::parse::revision(id).map_err(|e| ApiError::bad_request(format!("Last-Event-ID: {e}"))),
    }
}

/// Waits, up to `watch_catch_up`, until the store has `from`, as kube-apiserver waits for a
/// too-large resourceVersion: a client that fails over from another server on the same etcd
/// resumes from a revision this server's cache may not have applied yet. A revision the
/// store does not reach in time is left to the watch to refuse.
pub async fn catch_up(state: &AppState, from: u64) {
    if from > state.store.revision() {
        state.store.wait_for(from, state.config.watch_catch_up).await;
    }
}

/// Starts a watch of `kind` from `from` (0: from now).
pub async fn watch(state: AppState, kind: Kind, filter: Filter, from: u64) -> ApiResult<Response> {
    catch_up(&state, from).await;
    // Start from an explicit revision so that bookmarks never run ahead of the events.
    let start = if from == 0 { state.store.revision() } else { from };
    let changes = state.store.watch_interest(filter.interest(kind), start).map_err(ApiError::from)?;
    let period = state.config.bookmark_interval.max(Duration::from_millis(10));
    let mut bookmarks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    bookmarks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let streamer = Streamer {
        store: state.store.clone(),
        changes,
        filter,
        revision: start,
        bookmarks,
        pending: VecDeque::new(),
        shutdown: state.shutdown.clone(),
    };
    let stream = futures::stream::unfold(streamer, |mut s| async move { s.next().await.map(|e| (Ok::<_, Infallible>(e), s)) });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response())
}

#[cfg(test)]
mod tests {
    use shared::model::{Object, ObjectMeta, Pod};
    use shared::selector::LabelSelector;

    use super::*;
    use crate::store::{CachedStore, Change, Interest, Key, Txn, Write};

    #[tokio::test]
    async fn a_bookmark_waits_until_the_mailbox_is_empty() {
        let store: Arc<dyn Store> = Arc::new(CachedStore::in_memory(10_000));
        let mut txn = Txn::new();
        for i in 0..3000 {
            let pod = Object::Pod(Pod { kind: "Pod".into(), metadata: ObjectMeta::named("default", &format!("p{i}")), ..Pod::default() });
            txn.push(Write::new(Key::of(&pod), move |_, _| Ok(Change::Put(pod.clone()))));
        }
        store.commit(txn).await.unwrap();
        let interest = Interest { kinds: vec![Kind::Pod], remote: true, ..Interest::default() };
        let mut streamer = Streamer {
            changes: store.watch_interest(interest, 1).unwrap(),
            store: store.clone(),
            filter: Filter { namespace: None, labels: LabelSelector::default(), fields: Vec::new() },
            revision: 1,
            bookmarks: tokio::time::interval(Duration::from_secs(3600)),
            pending: VecDeque::new(),
            shutdown: CancellationToken::new(),
        };
        let mut sent = Vec::new();
        while sent.len() < 3 {
            assert!(streamer.bookmark_due());
            sent.push(std::mem::take(&mut streamer.pending).len());
        }
        assert_eq!(sent, [1024, 1024, 951], "the replay of revisions 2 to 3000, a batch a tick, and no bookmark among them");
        assert!(streamer.bookmark_due());
        assert_eq!((streamer.pending.len(), streamer.revision), (1, 3000), "then the bookmark, at the store's revision");
    }
}
