//! Every network call the dashboard makes: JSON requests with the Bearer token, and the watch
//! loop that drives `shared::watch`'s state machine: list, stream `?watch=true` as Server-Sent
//! Events (read by `shared::sse`), resume from the last resource_version and re-list on 410
//! Gone. URLs come from `shared::api::paths`, and `shared::metrics` for the nodes' usage.
//!
//! A command run in a pod ([`exec`]) is a WebSocket speaking `v5.channel.k8s.io`, as
//! kubectl's exec.
//!
//! The stream is read with `fetch` rather than `EventSource`: an `EventSource` can neither
//! send `Authorization` nor see the HTTP status, and the watch needs both (401 → login,
//! 410 → re-list).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use futures::future::{Either, select};
use gloo_net::http::{Request, RequestBuilder, Response};
use gloo_timers::future::TimeoutFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use shared::api::{FieldError, List, paths};
use shared::api_error::{Class, ErrorAnswer, headline};
use shared::metrics::{MetricsList, NodeMetrics};
use shared::model::{Kind, Object};
use shared::watch::{self, DecodeError, Machine, Step};
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortController, ReadableStreamDefaultReader};
use yew::Callback;

use crate::store::{ClusterAction, SyncState};

/// A failed call: an error answer, read and classified by `shared::api_error` as every
/// client reads it, or what the browser's fetch reports.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// 401: the server wants a (valid) token.
    #[error("{0}")]
    Unauthorized(String),
    /// Any other error answer.
    #[error("{}", describe(.path, .answer))]
    Answered { path: String, answer: ErrorAnswer },
    #[error("cannot reach the server for {path}: {message}")]
    Network { path: String, message: String },
    #[error("unexpected answer from {path}: {message}")]
    Decode { path: String, message: String },
}

impl ApiError {
    pub fn code(&self) -> Option<u16> {
        match self {
            ApiError::Unauthorized(_) => Some(401),
            ApiError::Answered { answer, .. } => Some(answer.code()),
            _ => None,
        }
    }

    pub fn class(&self) -> Option<Class> {
        self.code().map(Class::of)
    }

    /// The per-field errors of a 422.
    pub fn details(&self) -> &[FieldError] {
        match self {
            ApiError::Answered { answer, .. } => answer.details(),
            _ => &[],
        }
    }
}

/// An answer in the API's shape says what failed; anything else names the status and the path.
fn describe(path: &str, answer: &ErrorAnswer) -> String {
    match answer {
        ErrorAnswer::Api(status) => headline(status),
        ErrorAnswer::Other { code, body } if body.is_empty() => format!("HTTP {code} from {path}"),
        ErrorAnswer::Other { code, body } => format!("HTTP {code} from {path}: {body}"),
    }
}

/// Turns an error answer into an [`ApiError`].
pub fn error_from(code: u16, path: &str, text: &str) -> ApiError {
    let answer = ErrorAnswer::read(code, text);
    match answer {
        ErrorAnswer::Api(status) if status.code == 401 && !status.message.is_empty() => ApiError::Unauthorized(status.message),
        answer if answer.class() == Class::Unauthorized => ApiError::Unauthorized("the server needs a token".to_string()),
        answer => ApiError::Answered { path: path.to_string(), answer },
    }
}

/// A successful answer and its status (201 Created vs 200 OK matters to Apply).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer<T> {
    pub status: u16,
    pub body: T,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Post,
    Put,
}

/// The API client: same origin as the page, with the token if one is set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Client {
    /// The `Authorization` header, as `shared::api::bearer` spells it for every client.
    authorization: Option<Rc<str>>,
}

impl Client {
    pub fn new(token: Option<&str>) -> Self {
        Client { authorization: shared::api::bearer(token).map(Rc::from) }
    }

    /// Names the dashboard (an open server takes writes only from its own clients) and adds
    /// the token, if any.
    fn identify(&self, builder: RequestBuilder) -> RequestBuilder {
        let builder = builder.header(shared::api::CLIENT_HEADER, "dashboard");
        match &self.authorization {
            Some(value) => builder.header("Authorization", value),
            None => builder,
        }
    }

    async fn answer(path: &str, sent: Result<Response, gloo_net::Error>) -> Result<(u16, String), ApiError> {
        let response = sent.map_err(|e| ApiError::Network { path: path.to_string(), message: e.to_string() })?;
        let status = response.status();
        let text = response.text().await.map_err(|e| ApiError::Network { path: path.to_string(), message: e.to_string() })?;
        if (200..300).contains(&status) { Ok((status, text)) } else { Err(error_from(status, path, &text)) }
    }

    /// Reads through `serde_json::Value`, as watch events are read: every type then has one
    /// deserializer instantiated instead of two, which keeps the wasm bundle smaller.
    fn decode<T: DeserializeOwned>(path: &str, text: &str) -> Result<T, ApiError> {
        let bad = |e: serde_json::Error| ApiError::Decode { path: path.to_string(), message: e.to_string() };
        serde_json::from_str::<serde_json::Value>(text).and_then(serde_json::from_value).map_err(bad)
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ApiError> {
        let (_, text) = Self::answer(path, self.identify(Request::get(path)).send().await).await?;
        Self::decode(path, &text)
    }

    /// What every node's pods use (`metrics.k8s.io`, what `sheepctl top nodes` reads). A node
    /// whose agent did not answer is left out of the list.
    pub async fn node_metrics(&self) -> Result<Vec<NodeMetrics>, ApiError> {
        let list: MetricsList<NodeMetrics> = self.get(&shared::metrics::list_path("nodes", None)).await?;
        Ok(list.items)
    }

    pub async fn get_text(&self, path: &str) -> Result<String, ApiError> {
        Self::answer(path, self.identify(Request::get(path)).send().await).await.map(|(_, text)| text)
    }

    /// POST or PUT a JSON body; decodes the answer.
    pub async fn send<B: Serialize, T: DeserializeOwned>(&self, method: Method, path: &str, body: &B) -> Result<Answer<T>, ApiError> {
        let builder = match method {
            Method::Post => Request::post(path),
            Method::Put => Request::put(path),
        };
        // Through `Value`, as `shared::strict` serializes objects: one serializer per model type.
        let bad = |e: serde_json::Error| ApiError::Decode { path: path.to_string(), message: e.to_string() };
        let body = serde_json::to_value(body).map_err(bad)?;
        let request =
            self.identify(builder).json(&body).map_err(|e| ApiError::Decode { path: path.to_string(), message: e.to_string() })?;
        let (status, text) = Self::answer(path, request.send().await).await?;
        Ok(Answer { status, body: Self::decode(path, &text)? })
    }

    /// POST a text body of `media` type (a YAML manifest); decodes the answer.
    pub async fn post_text<T: DeserializeOwned>(&self, path: &str, media: &str, body: String) -> Result<T, ApiError> {
        let request = self.identify(Request::post(path)).header("Content-Type", media).body(body);
        let request = request.map_err(|e| ApiError::Decode { path: path.to_string(), message: e.to_string() })?;
        let (_, text) = Self::answer(path, request.send().await).await?;
        Self::decode(path, &text)
    }

    /// POST without a body (cordon, uncordon); decodes the answer.
    pub async fn post_empty<T: DeserializeOwned>(&self, path: &str) -> Result<T, ApiError> {
        let (_, text) = Self::answer(path, self.identify(Request::post(path)).send().await).await?;
        Self::decode(path, &text)
    }

    pub async fn delete<T: DeserializeOwned>(&self, path: &str) -> Result<T, ApiError> {
        let (_, text) = Self::answer(path, self.identify(Request::delete(path)).send().await).await?;
        Self::decode(path, &text)
    }
}

/// Stops a running loop (the watch, a followed log) and aborts its request in flight.
/// Owned by the effect that started the loop; dropping it does not cancel, `cancel` does.
#[derive(Clone, Default)]
pub struct Cancel(Rc<CancelInner>);

#[derive(Default)]
struct CancelInner {
    cancelled: Cell<bool>,
    controller: RefCell<Option<AbortController>>,
}

impl Cancel {
    pub fn cancel(&self) {
        self.0.cancelled.set(true);
        if let Some(controller) = self.0.controller.borrow_mut().take() {
            controller.abort();
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.get()
    }

    /// A fresh abort signal for the next request, tied to this handle.
    fn signal(&self) -> Option<web_sys::AbortSignal> {
        let controller = AbortController::new().ok()?;
        let signal = controller.signal();
        *self.0.controller.borrow_mut() = Some(controller);
        Some(signal)
    }
}

/// How a streamed body ended.
enum StreamEnd {
    /// The server closed it.
    Closed,
    /// Nothing arrived for `stall`.
    Stalled,
    Failed(String),
    Cancelled,
}

/// Opens a streamed GET. `Ok` only for a 2xx answer with a body.
async fn open_stream(client: &Client, path: &str, cancel: &Cancel) -> Result<ReadableStreamDefaultReader, ApiError> {
    let request = client.identify(Request::get(path)).header("Accept", "text/event-stream").abort_signal(cancel.signal().as_ref());
    let response = request.send().await.map_err(|e| ApiError::Network { path: path.to_string(), message: e.to_string() })?;
    let status = response.status();
    if !(200..300).contains(&status) {
        let text = response.text().await.unwrap_or_default();
        return Err(error_from(status, path, &text));
    }
    let body = response.body().ok_or_else(|| ApiError::Decode { path: path.to_string(), message: "the answer has no body".into() })?;
    body.get_reader()
        .dyn_into::<ReadableStreamDefaultReader>()
        .map_err(|_| ApiError::Decode { path: path.to_string(), message: "the body cannot be read as a stream".into() })
}

/// Reads a stream chunk by chunk until it ends, stalls or is cancelled.
async fn read_stream(
    reader: &ReadableStreamDefaultReader,
    cancel: &Cancel,
    stall: Option<std::time::Duration>,
    mut on_chunk: impl FnMut(&[u8]),
) -> StreamEnd {
    loop {
        if cancel.is_cancelled() {
            return StreamEnd::Cancelled;
        }
        let read = JsFuture::from(reader.read());
        let result = match stall {
            Some(stall) => match select(read, TimeoutFuture::new(millis(stall))).await {
                Either::Left((result, _)) => result,
                Either::Right(_) => {
                    let _ = reader.cancel();
                    return StreamEnd::Stalled;
                }
            },
            None => read.await,
        };
        let result = match result {
            Ok(result) => result,
            Err(_) if cancel.is_cancelled() => return StreamEnd::Cancelled,
            Err(e) => return StreamEnd::Failed(format!("{e:?}")),
        };
        let done = js_sys::Reflect::get(&result, &"done".into()).ok().and_then(|v| v.as_bool()).unwrap_or(true);
        if done {
            return StreamEnd::Closed;
        }
        if let Ok(value) = js_sys::Reflect::get(&result, &"value".into()) {
            let bytes = js_sys::Uint8Array::new(&value).to_vec();
            on_chunk(&bytes);
        }
    }
}

/// Keeps the cache's collection of `T` current until `cancel`: list, watch, resume from the
/// last resource_version after a break, re-list after 410 Gone, back off on errors, and stop
/// with [`SyncState::Unauthorized`] (and `on_unauthorized`) on 401.
pub async fn watch(
    client: Client,
    kind: Kind,
    resume_from: u64,
    dispatch: Callback<ClusterAction>,
    on_unauthorized: Callback<String>,
    cancel: Cancel,
) {
    let sync = |sync: SyncState| dispatch.emit(ClusterAction::Sync { kind, sync });
    let mut machine = Machine::new(resume_from, watch::DEFAULT_BACKOFF);
    let mut last_error = String::new();
    let mut unreachable = false;
    while !cancel.is_cancelled() {
        let outcome = match machine.next_step() {
            Step::Wait(wait) => {
                sync(SyncState::Retrying { attempt: machine.failures(), error: last_error.clone() });
                wait_unless_back(&client, wait, unreachable, &cancel).await;
                continue;
            }
            Step::List => {
                sync(SyncState::Listing);
                let path = paths::collection(kind, None);
                match client.get::<List<serde_json::Value>>(&path).await.and_then(|list| typed_list(list, kind, &path)) {
                    Ok((resource_version, items)) => {
                        if cancel.is_cancelled() {
                            return;
                        }
                        machine.listed(resource_version);
                        dispatch.emit(ClusterAction::Listed { kind, resource_version, items });
                        continue;
                    }
                    Err(error) => Err(error),
                }
            }
            Step::Watch { from } => stream_watch(&client, kind, from, &mut machine, &dispatch, &cancel).await,
        };
        if cancel.is_cancelled() {
            return;
        }
        match outcome {
            Ok(()) => {}
            Err(ApiError::Unauthorized(message)) => {
                sync(SyncState::Unauthorized);
                on_unauthorized.emit(message);
                return;
            }
            Err(error) if error.class() == Some(Class::Gone) => machine.relist(),
            Err(error) => {
                unreachable = matches!(error, ApiError::Network { .. }) || error.code() == Some(503);
                last_error = error.to_string();
                machine.failed();
            }
        }
    }
}

/// How often a watch whose server is away asks whether it is back.
const PROBE_MS: u32 = 1000;

/// Waits out a back-off of `wait`. When the page's server could not be reached (stopped,
/// restarting), it asks `/readyz` every [`PROBE_MS`] and ends the wait once the server
/// answers, so that the watch reconnects, and resumes from its revision, within a second of
/// the server's return instead of up to 30 s of back-off later. The page keeps to its own
/// server: the dashboard is served by each server at its own origin, and its calls are
/// same-origin.
async fn wait_unless_back(client: &Client, wait: std::time::Duration, unreachable: bool, cancel: &Cancel) {
    let mut left = millis(wait);
    while left > 0 && !cancel.is_cancelled() {
        let slice = if unreachable { left.min(PROBE_MS) } else { left };
        TimeoutFuture::new(slice).await;
        left -= slice;
        if unreachable && left > 0 && client.get_text(paths::READYZ).await.is_ok() {
            return;
        }
    }
}

/// A wait as the browser's timers take it.
fn millis(wait: std::time::Duration) -> u32 {
    u32::try_from(wait.as_millis()).unwrap_or(u32::MAX)
}

/// Coalesces watch events into one cache update every [`FLUSH_MS`] at most: under a burst
/// (a deployment scaled to 1,000) the page renders a few times a second instead of once
/// per network chunk, and a quiet stream still shows each change within a frame or three.
#[derive(Clone)]
struct Batch(Rc<BatchInner>);

struct BatchInner {
    kind: Kind,
    dispatch: Callback<ClusterAction>,
    cancel: Cancel,
    pending: RefCell<Vec<shared::api::WatchEvent>>,
    scheduled: Cell<bool>,
}

/// The longest a watch event waits before it reaches the cache.
const FLUSH_MS: u32 = 50;
/// The most events applied in one turn of the event loop.
const FLUSH_MAX: usize = 100;

impl Batch {
    fn new(kind: Kind, dispatch: Callback<ClusterAction>, cancel: Cancel) -> Self {
        Batch(Rc::new(BatchInner { kind, dispatch, cancel, pending: RefCell::default(), scheduled: Cell::new(false) }))
    }

    fn add(&self, events: Vec<shared::api::WatchEvent>) {
        self.0.pending.borrow_mut().extend(events);
        if self.0.pending.borrow().is_empty() {
            return;
        }
        if !self.0.scheduled.replace(true) {
            let batch = self.clone();
            gloo_timers::callback::Timeout::new(FLUSH_MS, move || batch.flush()).forget();
        }
    }

    /// Applies what is pending, at most [`FLUSH_MAX`] events; the rest waits for the next
    /// turn so the browser can paint in between.
    fn flush(&self) {
        self.0.scheduled.set(false);
        let events = {
            let mut pending = self.0.pending.borrow_mut();
            let take = pending.len().min(FLUSH_MAX);
            pending.drain(..take).collect::<Vec<_>>()
        };
        if !events.is_empty() && !self.0.cancel.is_cancelled() {
            self.0.dispatch.emit(ClusterAction::Watched { kind: self.0.kind, events });
        }
        if !self.0.pending.borrow().is_empty() {
            self.add(Vec::new());
        }
    }

    /// Applies everything pending now: before the stream is left, so nothing is lost.
    fn flush_all(&self) {
        while !self.0.pending.borrow().is_empty() && !self.0.cancel.is_cancelled() {
            self.flush();
        }
    }
}

/// A list's items as typed objects; an item that omits `kind` gets the list's. One code
/// path for every kind keeps a single copy of the watch loop in the bundle.
fn typed_list(list: List<serde_json::Value>, kind: Kind, path: &str) -> Result<(u64, Vec<Object>), ApiError> {
    let items = list
        .items
        .into_iter()
        .map(|mut item| {
            if let Some(fields) = item.as_object_mut() {
                fields.entry("kind").or_insert_with(|| kind.as_str().into());
            }
            Object::from_value(item).map_err(|e| ApiError::Decode { path: path.to_string(), message: e.to_string() })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((list.resource_version, items))
}

/// One watch connection: `Ok` when the server closed it cleanly.
async fn stream_watch(
    client: &Client,
    kind: Kind,
    from: u64,
    machine: &mut Machine,
    dispatch: &Callback<ClusterAction>,
    cancel: &Cancel,
) -> Result<(), ApiError> {
    let path = format!("{}?watch=true&resource_version={from}", paths::collection(kind, None));
    let reader = open_stream(client, &path, cancel).await?;
    dispatch.emit(ClusterAction::Sync { kind, sync: SyncState::Live });
    let mut parser = shared::sse::Parser::new();
    let mut bad: Option<DecodeError> = None;
    let batch = Batch::new(kind, dispatch.clone(), cancel.clone());
    let end = read_stream(&reader, cancel, Some(watch::STALL), |chunk| {
        let mut events = Vec::new();
        for message in parser.feed(chunk) {
            match watch::decode(&message, kind) {
                Ok(event) => events.push(event),
                Err(error) => bad = Some(error),
            }
        }
        if let Some(newest) = events.iter().map(|e| e.resource_version).max() {
            machine.progressed(newest);
        }
        batch.add(events);
    })
    .await;
    batch.flush_all();
    let broken = |message: String| ApiError::Network { path: path.clone(), message };
    match (end, bad) {
        (_, Some(error)) => Err(ApiError::Decode { path: path.clone(), message: error.to_string() }),
        (StreamEnd::Closed | StreamEnd::Cancelled, None) => Ok(()),
        (StreamEnd::Stalled, None) => Err(broken(format!("no event or bookmark for {} s", watch::STALL.as_secs()))),
        (StreamEnd::Failed(message), None) => Err(broken(message)),
    }
}

/// Streams a text body (a followed log) into `on_text` until it ends or `cancel`.
pub async fn follow_text(client: &Client, path: &str, cancel: &Cancel, on_text: Callback<String>) -> Result<(), ApiError> {
    let reader = open_stream(client, path, cancel).await?;
    let mut pending: Vec<u8> = Vec::new();
    let end = read_stream(&reader, cancel, None, |chunk| {
        pending.extend_from_slice(chunk);
        // Hand over only whole UTF-8 characters; keep a split one for the next chunk.
        let valid = match std::str::from_utf8(&pending) {
            Ok(_) => pending.len(),
            Err(e) => e.valid_up_to(),
        };
        if valid > 0 {
            let text = String::from_utf8_lossy(&pending[..valid]).into_owned();
            pending.drain(..valid);
            on_text.emit(text);
        }
    })
    .await;
    match end {
        StreamEnd::Closed | StreamEnd::Cancelled | StreamEnd::Stalled => Ok(()),
        StreamEnd::Failed(message) => Err(ApiError::Network { path: path.to_string(), message }),
    }
}

/// What a command run in a pod reports, in order: its output as it comes, then its end.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecOutput {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    /// The exit code, or why the session gave none.
    Exit(Result<i64, String>),
}

/// Runs the session `path` (a pod's `exec` with its query) over a WebSocket. A browser's
/// WebSocket cannot send `Authorization`, so the token rides in a subprotocol
/// (`shared::api::bearer_protocol`), as kube-apiserver reads it; nor can it read a refused
/// upgrade's answer, so a session that never opened asks the same path with fetch for the
/// server's words (a viewer's 403).
pub fn exec(client: &Client, token: Option<&str>, path: &str, on_output: Callback<ExecOutput>) -> Result<(), ApiError> {
    use shared::remote_command::{V5, channel, exit_code};
    use wasm_bindgen::closure::Closure;
    let failed = |e: wasm_bindgen::JsValue| ApiError::Network { path: path.to_string(), message: format!("{e:?}") };
    let location = web_sys::window().ok_or_else(|| failed("no window".into()))?.location();
    let scheme = if location.protocol().map_err(failed)? == "https:" { "wss" } else { "ws" };
    let protocols = js_sys::Array::of1(&V5.into());
    if let Some(token) = token.filter(|token| !token.is_empty()) {
        protocols.push(&shared::api::bearer_protocol(token).into());
    }
    let url = format!("{scheme}://{}{path}", location.host().map_err(failed)?);
    let socket = web_sys::WebSocket::new_with_str_sequence(&url, &protocols).map_err(failed)?;
    socket.set_binary_type(web_sys::BinaryType::Arraybuffer);
    let opened = Rc::new(Cell::new(false));
    let status: Rc<RefCell<Option<Vec<u8>>>> = Rc::default();
    let on_open = {
        let opened = opened.clone();
        Closure::<dyn FnMut()>::new(move || opened.set(true))
    };
    let on_message = {
        let (status, on_output) = (status.clone(), on_output.clone());
        Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |event: web_sys::MessageEvent| {
            let Ok(buffer) = event.data().dyn_into::<js_sys::ArrayBuffer>() else { return };
            match js_sys::Uint8Array::new(&buffer).to_vec().split_first() {
                Some((&channel::STDOUT, bytes)) => on_output.emit(ExecOutput::Stdout(bytes.to_vec())),
                Some((&channel::STDERR, bytes)) => on_output.emit(ExecOutput::Stderr(bytes.to_vec())),
                Some((&channel::ERROR, bytes)) => *status.borrow_mut() = Some(bytes.to_vec()),
                _ => {}
            }
        })
    };
    let on_close = {
        let (client, path) = (client.clone(), path.to_string());
        Closure::<dyn FnMut()>::new(move || {
            if let Some(status) = status.borrow_mut().take() {
                return on_output.emit(ExecOutput::Exit(exit_code(&status)));
            }
            if opened.get() {
                return on_output.emit(ExecOutput::Exit(Err("the session ended without a status".into())));
            }
            let (client, path, on_output) = (client.clone(), path.clone(), on_output.clone());
            wasm_bindgen_futures::spawn_local(async move {
                let message = match client.get_text(&path).await {
                    Err(refused) if matches!(refused.code(), Some(401 | 403)) => refused.to_string(),
                    _ => "the session could not open: the server or the node's agent refused the WebSocket".to_string(),
                };
                on_output.emit(ExecOutput::Exit(Err(message)));
            });
        })
    };
    socket.set_onopen(Some(on_open.as_ref().unchecked_ref()));
    socket.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    socket.set_onclose(Some(on_close.as_ref().unchecked_ref()));
    // The socket holds its handlers for its life: each session's three are small and few.
    on_open.forget();
    on_message.forget();
    on_close.forget();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_errors_keep_their_reason_and_field_details() {
        let text = r#"{"error":{"code":422,"reason":"Invalid","message":"Pod default/x is invalid","details":[{"field":"spec.containers[0].image","message":"must not be empty"}]}}"#;
        let error = error_from(422, "/api/v1/pods", text);
        assert_eq!(error.code(), Some(422));
        assert_eq!(error.details()[0].field, "spec.containers[0].image");
        assert_eq!(error.to_string(), "Pod default/x is invalid");
    }

    #[test]
    fn gone_is_recognised_by_its_code() {
        let text = r#"{"error":{"code":410,"reason":"Gone","message":"resource version 3 is too old"}}"#;
        assert_eq!(error_from(410, "/api/v1/pods", text).class(), Some(Class::Gone));
    }

    #[test]
    fn unauthorized_and_plain_text_errors() {
        assert!(matches!(error_from(401, "/p", ""), ApiError::Unauthorized(m) if m == "the server needs a token"));
        let told = error_from(401, "/p", r#"{"error":{"code":401,"reason":"Unauthorized","message":"the bearer token is not known"}}"#);
        assert_eq!(told, ApiError::Unauthorized("the bearer token is not known".into()));
        let error = error_from(502, "/api/v1/nodes", "Bad Gateway");
        assert_eq!(error.to_string(), "HTTP 502 from /api/v1/nodes: Bad Gateway");
        assert!(error.details().is_empty());
        let error = error_from(404, "/api/v1/info", "<!DOCTYPE HTML><html>…");
        assert_eq!(error.to_string(), "HTTP 404 from /api/v1/info: not the Shepherd API");
        assert_eq!(error_from(503, "/api/v1/pods", "").to_string(), "HTTP 503 from /api/v1/pods");
    }

    #[test]
    fn list_items_get_the_list_kind_when_they_omit_it() {
        let list: List<serde_json::Value> = serde_json::from_str(
            r#"{"kind":"NodeList","resource_version":9,"items":[{"metadata":{"name":"n1"}},{"kind":"Node","metadata":{"name":"n2"}}]}"#,
        )
        .unwrap();
        let (rv, items) = typed_list(list, Kind::Node, "/api/v1/nodes").unwrap();
        assert_eq!(rv, 9);
        assert_eq!(items.iter().map(|o| o.kind()).collect::<Vec<_>>(), [Kind::Node, Kind::Node]);
        let bad: List<serde_json::Value> =
            serde_json::from_str(r#"{"kind":"PodList","resource_version":1,"items":[{"metadata":{"name":"p"},"spec":{"containers":7}}]}"#)
                .unwrap();
        assert!(matches!(typed_list(bad, Kind::Pod, "/api/v1/pods"), Err(ApiError::Decode { .. })));
    }

    #[test]
    fn an_empty_token_sends_no_header() {
        assert_eq!(Client::new(Some("")), Client::default());
        assert_ne!(Client::new(Some("t")), Client::default());
    }
}
