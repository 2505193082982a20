//! `?watch=true` as Kubernetes streams it: one JSON `{"type","object"}` per line. Without a
//! resourceVersion (or with 0) the current objects come first as ADDED, then every change;
//! with one, every change after it. A version older than the store's history is an ERROR
//! event carrying a 410 `Status`, as kube-apiserver sends. Changes come from the same store
//! watch as the native SSE stream, translated by its filter (entering it is ADDED, leaving
//! it DELETED), so a write through either API reaches both.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};
use shared::api::WatchEventType;
use shared::model::Object;

use super::convert::to_json;
use super::kinds::Served;
use super::status::Status;
use super::table::{self, Include};
use crate::query::{Filter, translate};
use crate::state::AppState;
use crate::store::WatchStream;

/// The media type of a watch; compression skips it so that each line leaves at once.
pub const WATCH_CONTENT_TYPE: &str = "application/json;stream=watch";

/// How each event's object is written.
pub struct Shape {
    pub kind: Served,
    /// A one-row Table per event, for `kubectl get -w`.
    pub table: Option<Include>,
    /// Whether the client asked for BOOKMARK events.
    pub bookmarks: bool,
}

fn type_word(type_: WatchEventType) -> &'static str {
    match type_ {
        WatchEventType::Added => "ADDED",
        WatchEventType::Modified => "MODIFIED",
        WatchEventType::Deleted => "DELETED",
        WatchEventType::Bookmark => "BOOKMARK",
    }
}

struct Streamer {
    state: AppState,
    shape: Shape,
    filter: Filter,
    changes: Option<WatchStream>,
    pending: VecDeque<Bytes>,
    revision: u64,
    bookmarks: tokio::time::Interval,
    deadline: Option<tokio::time::Instant>,
}

impl Streamer {
    fn line(&self, type_: WatchEventType, object: &Object) -> Bytes {
        let rendered = match self.shape.table {
            Some(include) => table::table(self.shape.kind, std::slice::from_ref(object), &self.state, include, None),
            None => to_json(self.shape.kind, object),
        };
        line(type_word(type_), rendered)
    }

    fn bookmark(&self) -> Bytes {
        let (api_version, kind) = match self.shape.table {
            Some(_) => ("meta.k8s.io/v1", "Table".to_string()),
            None => (self.shape.kind.api_version(), self.shape.kind.kind_name().to_string()),
        };
        line("BOOKMARK", json!({"apiVersion": api_version, "kind": kind, "metadata": {"resourceVersion": self.revision.to_string()}}))
    }

    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(line) = self.pending.pop_front() {
                return Some(line);
            }
            let changes = self.changes.as_mut()?;
            let deadline = self.deadline;
            tokio::select! {
                _ = self.state.shutdown.cancelled() => return None,
                _ = async move { match deadline { Some(at) => tokio::time::sleep_until(at).await, None => std::future::pending().await } } => return None,
                _ = self.bookmarks.tick(), if self.shape.bookmarks => {
                    let bookmark = self.bookmark();
                    self.pending.push_back(bookmark);
                }
                batch = changes.next() => match batch {
                    None => return None,
                    Some(batch) => {
                        self.revision = self.revision.max(batch.revision);
                        for event in &batch.events {
                            if let Some(type_) = translate(event, &self.filter) {
                                let line = self.line(type_, &event.object);
                                self.pending.push_back(line);
                            }
                        }
                    }
                },
            }
        }
    }
}

fn line(type_: &str, object: Value) -> Bytes {
    let mut text = json!({"type": type_, "object": object}).to_string();
    text.push('\n');
    Bytes::from(text)
}

fn error_line(status: &Status) -> Bytes {
    let mut body = serde_json::to_value(status.body()).unwrap_or_default();
    body["apiVersion"] = "v1".into();
    body["kind"] = "Status".into();
    line("ERROR", body)
}

/// Streams the changes `filter` selects after `from`; `initial` (the list at its revision)
/// comes first as ADDED when the client gave no version.
pub fn stream(
    state: AppState,
    filter: Filter,
    from: u64,
    initial: Option<(u64, Vec<Object>)>,
    shape: Shape,
    timeout: Option<Duration>,
) -> Response {
    let start = initial.as_ref().map_or(from, |(revision, _)| *revision);
    let interest = filter.interest(shape.kind.stored());
    let period = state.config.bookmark_interval.max(Duration::from_millis(10));
    let mut streamer = Streamer {
        state: state.clone(),
        shape,
        filter,
        changes: None,
        pending: VecDeque::new(),
        revision: start,
        bookmarks: tokio::time::interval_at(tokio::time::Instant::now() + period, period),
        deadline: timeout.map(|t| tokio::time::Instant::now() + t),
    };
    match state.store.watch_interest(interest, start) {
        Ok(changes) => {
            streamer.changes = Some(changes);
            for object in initial.map(|(_, objects)| objects).unwrap_or_default() {
                let line = streamer.line(WatchEventType::Added, &object);
                streamer.pending.push_back(line);
            }
        }
        Err(e) => streamer.pending.push_back(error_line(&Status::from(e))),
    }
    let body = futures::stream::unfold(streamer, |mut s| async move { s.next().await.map(|line| (Ok::<_, Infallible>(line), s)) });
    let mut response = Body::from_stream(body).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(WATCH_CONTENT_TYPE));
    response
}
