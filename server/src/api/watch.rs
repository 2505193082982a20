//! `?watch=true&resource_version=N` as Server-Sent Events: every change strictly after N
//! (replayed from the store's history, then live), filtered like the list, with a BOOKMARK
//! every `bookmark_interval`. N older than the history is a 410 before any byte streams.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use shared::api::{ApiErrorBody, SSE_EVENT_WATCH, WatchEvent, WatchEventType};
use shared::model::{Kind, Object};
use tokio_util::sync::CancellationToken;

use super::AppState;
use super::objects::Filter;
use crate::error::{ApiError, ApiResult};
use crate::store::{EventType, StoreEvent, WatchStream};

/// What a store change looks like through a filter: an object entering the filter is
/// ADDED, one leaving it is DELETED, as Kubernetes does.
pub fn translate(event: &StoreEvent, filter: &Filter) -> Option<WatchEvent> {
    let now = event.type_ != EventType::Deleted && filter.matches(&event.object);
    let before = event.prev.as_ref().is_some_and(|p| filter.matches(p));
    let type_ = match (event.type_, before, now) {
        (EventType::Added, _, true) => WatchEventType::Added,
        (EventType::Modified, true, true) => WatchEventType::Modified,
        (EventType::Modified, false, true) => WatchEventType::Added,
        (EventType::Modified, true, false) | (EventType::Deleted, true, _) => WatchEventType::Deleted,
        _ => return None,
    };
    Some(WatchEvent { type_, resource_version: event.revision, object: Some(Object::clone(&event.object)) })
}

fn sse(event: &WatchEvent) -> SseEvent {
    let data = serde_json::to_string(event).unwrap_or_else(|e| format!("{{\"error\":\"cannot encode the event: {e}\"}}"));
    SseEvent::default().event(SSE_EVENT_WATCH).id(event.resource_version.to_string()).data(data)
}

fn bookmark(revision: u64) -> SseEvent {
    sse(&WatchEvent { type_: WatchEventType::Bookmark, resource_version: revision, object: None })
}

struct Streamer {
    changes: WatchStream,
    filter: Filter,
    revision: u64,
    bookmarks: tokio::time::Interval,
    pending: VecDeque<SseEvent>,
    shutdown: CancellationToken,
    done: bool,
}

impl Streamer {
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            if self.done {
                return None;
            }
            tokio::select! {
                _ = self.shutdown.cancelled() => return None,
                _ = self.bookmarks.tick() => return Some(bookmark(self.revision)),
                batch = self.changes.next() => match batch {
                    None => return None,
                    Some(Ok(batch)) => {
                        self.revision = batch.revision;
                        self.pending.extend(batch.events.iter().filter_map(|e| translate(e, &self.filter)).map(|e| sse(&e)));
                    }
                    Some(Err(e)) => {
                        self.done = true;
                        let body: ApiErrorBody = ApiError::from(e).body();
                        let data = serde_json::to_string(&body).unwrap_or_default();
                        return Some(SseEvent::default().event("error").data(data));
                    }
                },
            }
        }
    }
}

/// Starts a watch of `kind` from `from` (0: from now).
pub fn watch(state: AppState, kind: Kind, filter: Filter, from: u64) -> ApiResult<Response> {
    // Start from an explicit revision so that bookmarks never run ahead of the events.
    let start = if from == 0 { state.store.revision() } else { from };
    let changes = state.store.watch(&[kind], start).map_err(ApiError::from)?;
    let period = state.config.bookmark_interval.max(Duration::from_millis(10));
    let mut bookmarks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    bookmarks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let streamer =
        Streamer { changes, filter, revision: start, bookmarks, pending: VecDeque::new(), shutdown: state.shutdown.clone(), done: false };
    let stream = futures::stream::unfold(streamer, |mut s| async move { s.next().await.map(|e| (Ok::<_, Infallible>(e), s)) });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response())
}
