//! The watcher, as kube-runtime's: `shared::watch`'s state machine driven over the network.
//! It lists, streams changes from the list's revision, resumes from the last revision seen
//! after a break, lists again on 410 Gone, backs off on the shared curve between failed
//! attempts, and can fall back to polling the list when a server will not stream. It yields
//! each list and each change; [`Changes`] keeps the objects in `shared::cache` (the
//! dashboard's staleness rule too) and says what each event changed.

use std::collections::VecDeque;
use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use shared::api::{List, WatchEvent, WatchEventType};
use shared::backoff::Backoff;
use shared::cache::Cache;
use shared::model::{Kind, Object};
use shared::selector::LabelSelector;
use shared::watch::{Machine, STALL, Step};

use crate::{Client, Error, Result, Selection, WatchStream};

/// Where a watcher lists and watches: a collection on a server ([`Collection`]), or a
/// stand-in for one in tests.
pub trait Source: Send + Sync {
    fn kind(&self) -> Kind;
    fn list(&self) -> impl Future<Output = Result<List<Object>>> + Send;
    /// Every change strictly after `from`.
    fn watch(&self, from: u64) -> impl Future<Output = Result<WatchStream>> + Send;
}

/// One collection of a server: a kind and which of its objects.
#[derive(Debug, Clone)]
pub struct Collection {
    pub client: Client,
    pub kind: Kind,
    pub selection: Selection,
}

impl Source for Collection {
    fn kind(&self) -> Kind {
        self.kind
    }

    fn list(&self) -> impl Future<Output = Result<List<Object>>> + Send {
        self.client.list_objects(self.kind, &self.selection)
    }

    fn watch(&self, from: u64) -> impl Future<Output = Result<WatchStream>> + Send {
        self.client.watch(self.kind, &self.selection, from)
    }
}

/// What the watcher saw.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A full list: everything there is now (after a start, a 410, a resync or a poll).
    Listed { resource_version: u64, objects: Vec<Object> },
    /// One change from the stream (never a bookmark).
    Changed(Box<WatchEvent>),
}

pub struct Watcher<S> {
    source: S,
    machine: Machine,
    stream: Option<WatchStream>,
    /// Give up after this many failures in a row, or on an answer that retrying cannot fix.
    give_up_after: Option<u32>,
    /// List every `.1` instead of streaming once `.0` attempts to open the stream failed.
    poll_after: Option<(u32, Duration)>,
}

impl<S: Source> Watcher<S> {
    /// A watcher that lists first, and waits between failed attempts as `backoff` says
    /// (`shared::watch::DEFAULT_BACKOFF` unless the caller must notice a return sooner).
    pub fn new(source: S, backoff: Backoff) -> Self {
        Watcher { source, machine: Machine::new(0, backoff), stream: None, give_up_after: None, poll_after: None }
    }

    /// Ends [`Watcher::next`] with the error after `failures` failures in a row, and at once
    /// on an answer that trying again cannot change (403, 404, …). Without it the watcher
    /// retries for ever.
    pub fn give_up_after(mut self, failures: u32) -> Self {
        self.give_up_after = Some(failures);
        self
    }

    /// Lists every `interval` instead of streaming when the stream cannot be opened
    /// `failures` times in a row, or when the server answers a watch with no stream.
    pub fn poll_after(mut self, failures: u32, interval: Duration) -> Self {
        self.poll_after = Some((failures, interval));
        self
    }

    /// The revision the watcher has caught up with.
    pub fn resource_version(&self) -> u64 {
        self.machine.resource_version()
    }

    pub fn is_polling(&self) -> bool {
        self.machine.is_polling()
    }

    /// Lists again at the next step, whatever the stream says: a periodic resync.
    pub fn relist(&mut self) {
        self.stream = None;
        self.machine.relist();
    }

    /// Lists now, once: the first list of a command, whose error the caller wants at once.
    pub async fn list(&mut self) -> Result<(u64, Vec<Object>)> {
        let list = self.source.list().await?;
        self.machine.listed(list.resource_version);
        Ok((list.resource_version, list.items))
    }

    /// The next list or change. Reconnects, lists again and backs off by itself; an error
    /// comes back only as [`Watcher::give_up_after`] says.
    pub async fn next(&mut self) -> Result<Event> {
        loop {
            if let Some(stream) = &mut self.stream {
                match tokio::time::timeout(STALL, stream.next()).await {
                    Ok(Some(Ok(event))) => {
                        self.machine.progressed(event.resource_version);
                        if event.type_ != WatchEventType::Bookmark {
                            return Ok(Event::Changed(Box::new(event)));
                        }
                    }
                    // History gone, or an event that cannot be read: a list misses nothing.
                    Ok(Some(Err(e))) if e.is_gone() || matches!(e, Error::Decode { .. }) => {
                        self.fell_behind(&e);
                        self.relist();
                    }
                    Ok(Some(Err(e))) => {
                        self.stream = None;
                        self.failed(e)?;
                    }
                    Ok(None) => {
                        self.stream = None;
                        self.failed(self.broken("the server ended the stream"))?;
                    }
                    Err(_) => {
                        self.stream = None;
                        self.failed(self.broken(&format!("no event or bookmark for {} s", STALL.as_secs())))?;
                    }
                }
                continue;
            }
            match self.machine.next_step() {
                Step::Wait(wait) => tokio::time::sleep(wait).await,
                Step::List => match self.source.list().await {
                    Ok(list) => {
                        self.machine.listed(list.resource_version);
                        return Ok(Event::Listed { resource_version: list.resource_version, objects: list.items });
                    }
                    Err(e) if self.give_up_after.is_some() && !e.is_transient() => return Err(e),
                    Err(e) => self.failed(e)?,
                },
                Step::Watch { from } => match self.source.watch(from).await {
                    Ok(stream) => self.stream = Some(stream),
                    Err(e) if e.is_gone() => {
                        self.fell_behind(&e);
                        self.machine.relist();
                    }
                    Err(e) if e.is_transient() => {
                        self.failed(e)?;
                        if let Some((failures, interval)) = self.poll_after
                            && self.machine.failures() >= failures
                        {
                            self.machine.poll(interval);
                        }
                    }
                    // The server does not stream this collection: poll it, if that is allowed.
                    Err(e) => match self.poll_after {
                        Some((_, interval)) => self.machine.poll(interval),
                        None => self.failed(e)?,
                    },
                },
            }
        }
    }

    /// Says why the watcher lists again. At info: that is the watcher working, but a 410
    /// also means the server's history was too short for this watcher, which the scale
    /// benchmark counts.
    fn fell_behind(&self, error: &Error) {
        let kind = self.source.kind().plural();
        if error.is_gone() {
            tracing::info!(error = %error, "the watch of {kind} fell behind the server's history (410 Gone); listing again");
        } else {
            tracing::info!(error = %error, "an event of the watch of {kind} cannot be read; listing again");
        }
    }

    /// Counts a failure (the next step waits), or gives up as configured.
    fn failed(&mut self, error: Error) -> Result<()> {
        self.machine.failed();
        let failures = self.machine.failures();
        match self.give_up_after {
            Some(limit) if failures >= limit => Err(error),
            _ => {
                tracing::warn!(error = %error, failures, "watch attempt failed; trying again");
                Ok(())
            }
        }
    }

    fn broken(&self, cause: &str) -> Error {
        Error::Broken { action: format!("watch {}", self.source.kind().plural()), cause: cause.to_string() }
    }
}

/// One change to an object of a watched collection.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Never [`WatchEventType::Bookmark`].
    pub type_: WatchEventType,
    pub object: Object,
}

/// The objects of a watch, kept current, and the change each list or event makes to them: a
/// re-list after a break comes out as the ADDED, MODIFIED and DELETED it amounts to, and an
/// event the cache's staleness rule skips (one already seen) comes out not at all. Optionally only one name, or only the objects a
/// selector matches (one that stops matching is DELETED to this watch).
pub struct Changes<S> {
    watcher: Watcher<S>,
    name: Option<String>,
    selector: LabelSelector,
    known: Cache<Object>,
    queue: VecDeque<Change>,
}

impl<S: Source> Changes<S> {
    pub fn new(watcher: Watcher<S>) -> Self {
        Changes { watcher, name: None, selector: LabelSelector::default(), known: Cache::default(), queue: VecDeque::new() }
    }

    /// Only the object with this name.
    pub fn named(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }

    /// Only the objects `selector` matches.
    pub fn matching(mut self, selector: LabelSelector) -> Self {
        self.selector = selector;
        self
    }

    pub fn resource_version(&self) -> u64 {
        self.watcher.resource_version()
    }

    pub fn is_polling(&self) -> bool {
        self.watcher.is_polling()
    }

    /// The first list: the objects as they are now, or the error at once. Later changes
    /// come from [`Changes::next`].
    pub async fn list(&mut self) -> Result<Vec<Object>> {
        let (_, objects) = self.watcher.list().await?;
        let wanted: Vec<Object> = objects.into_iter().filter(|o| self.wanted(o)).collect();
        self.known.replace(wanted);
        Ok(self.known.values().cloned().collect())
    }

    pub async fn next(&mut self) -> Result<Change> {
        loop {
            if let Some(change) = self.queue.pop_front() {
                return Ok(change);
            }
            match self.watcher.next().await? {
                Event::Listed { objects, .. } => self.replace_all(objects),
                Event::Changed(event) => {
                    if let WatchEvent { type_, object: Some(object), .. } = *event {
                        self.apply(type_, object);
                    }
                }
            }
        }
    }

    fn wanted(&self, object: &Object) -> bool {
        self.name.as_ref().is_none_or(|n| *n == object.metadata().name) && self.selector.matches(&object.metadata().labels)
    }

    /// Applies one streamed event to what is known, queueing the change it makes. An object
    /// that stops matching leaves this watch: DELETED to it.
    fn apply(&mut self, type_: WatchEventType, object: Object) {
        if matches!(type_, WatchEventType::Added | WatchEventType::Modified) && !self.wanted(&object) {
            if self.known.remove(&object.metadata().key()).is_some() {
                self.queue.push_back(Change { type_: WatchEventType::Deleted, object });
            }
            return;
        }
        if let Some(type_) = self.known.apply(type_, object.clone()) {
            self.queue.push_back(Change { type_, object });
        }
    }

    /// After a re-list or a poll: every difference from what was known becomes a change.
    fn replace_all(&mut self, items: Vec<Object>) {
        let wanted: Vec<Object> = items.into_iter().filter(|o| self.wanted(o)).collect();
        for (type_, object) in self.known.relist(wanted) {
            self.queue.push_back(Change { type_, object });
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    const BACKOFF: Backoff = Backoff::new(Duration::from_millis(10), Duration::from_millis(40));

    /// A scripted HTTP server: the n-th request gets the n-th answer (the last one repeats),
    /// and every request line is recorded.
    /// An empty answer closes the connection without answering.
    pub(crate) async fn fake_server(answers: Vec<String>) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            let mut n = 0;
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if socket.read(&mut byte).await.unwrap_or(0) == 0 {
                        break;
                    }
                    head.push(byte[0]);
                }
                let line = String::from_utf8_lossy(&head).lines().next().unwrap_or("").to_string();
                log.lock().unwrap().push(line);
                let answer = answers[n.min(answers.len() - 1)].clone();
                n += 1;
                let _ = socket.write_all(answer.as_bytes()).await;
                let _ = socket.shutdown().await;
            }
        });
        (address, seen)
    }

    pub(crate) fn json_answer(status: &str, body: &str) -> String {
        format!("HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len())
    }

    fn pod(name: &str, rv: u64, phase: &str) -> String {
        format!(
            r#"{{"kind":"Pod","metadata":{{"name":"{name}","namespace":"default","resource_version":{rv}}},"status":{{"phase":"{phase}"}}}}"#
        )
    }

    fn list(rv: u64, pods: &[String]) -> String {
        json_answer("200 OK", &format!(r#"{{"kind":"PodList","resource_version":{rv},"items":[{}]}}"#, pods.join(",")))
    }

    fn sse(events: &[(u64, &str, String)]) -> String {
        let mut body = String::new();
        for (id, type_, object) in events {
            body.push_str(&format!("id: {id}\ndata: {{\"type\":\"{type_}\",\"resource_version\":{id},\"object\":{object}}}\n\n"));
        }
        format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}")
    }

    fn summary(change: &Change) -> String {
        let Object::Pod(pod) = &change.object else { panic!("expected a pod") };
        format!("{:?} {} {}", change.type_, pod.metadata.name, pod.status.phase)
    }

    fn changes(address: &str) -> Changes<Collection> {
        let client = Client::new(address, None).unwrap();
        let source = Collection { client, kind: Kind::Pod, selection: Selection::namespace(Some("default")) };
        Changes::new(Watcher::new(source, BACKOFF).give_up_after(10).poll_after(3, Duration::from_millis(10)))
    }

    #[tokio::test]
    async fn resumes_from_the_last_revision_after_the_stream_breaks() {
        let (address, seen) = fake_server(vec![
            list(5, &[pod("a", 5, "Pending")]),
            sse(&[(6, "ADDED", pod("b", 6, "Pending"))]),
            sse(&[(7, "MODIFIED", pod("a", 7, "Running"))]),
        ])
        .await;
        let mut changes = changes(&address);
        assert_eq!(changes.list().await.unwrap().len(), 1);
        assert_eq!(summary(&changes.next().await.unwrap()), "Added b Pending");
        assert_eq!(summary(&changes.next().await.unwrap()), "Modified a Running");
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen[0], "GET /api/v1/namespaces/default/pods HTTP/1.1");
        assert!(seen[1].contains("watch=true&resource_version=5"), "{seen:?}");
        assert!(seen[2].contains("watch=true&resource_version=6"), "{seen:?}");
        assert!(!changes.is_polling());
    }

    #[tokio::test]
    async fn lists_again_when_the_revision_is_gone() {
        let gone = json_answer("410 Gone", r#"{"error":{"code":410,"reason":"Gone","message":"too old"}}"#);
        let (address, seen) = fake_server(vec![
            list(5, &[pod("a", 5, "Pending")]),
            gone,
            list(20, &[pod("b", 19, "Running")]),
            sse(&[(21, "MODIFIED", pod("b", 21, "Failed"))]),
        ])
        .await;
        let mut changes = changes(&address);
        changes.list().await.unwrap();
        assert_eq!(summary(&changes.next().await.unwrap()), "Deleted a Pending");
        assert_eq!(summary(&changes.next().await.unwrap()), "Added b Running");
        assert_eq!(summary(&changes.next().await.unwrap()), "Modified b Failed");
        let seen = seen.lock().unwrap().clone();
        assert!(seen[3].contains("resource_version=20"), "{seen:?}");
    }

    #[tokio::test]
    async fn falls_back_to_polling_when_the_server_cannot_stream() {
        let not_a_stream = json_answer("200 OK", r#"{"kind":"PodList","resource_version":5,"items":[]}"#);
        let (address, _) = fake_server(vec![
            list(5, &[pod("a", 5, "Pending")]),
            not_a_stream,
            list(6, &[pod("a", 5, "Pending")]),
            list(7, &[pod("a", 7, "Running")]),
        ])
        .await;
        let mut changes = changes(&address);
        changes.list().await.unwrap();
        assert_eq!(summary(&changes.next().await.unwrap()), "Modified a Running");
        assert!(changes.is_polling());
    }

    #[tokio::test]
    async fn a_named_watch_ignores_other_objects_and_stale_replays() {
        let (address, _) = fake_server(vec![
            list(5, &[pod("a", 5, "Pending"), pod("b", 4, "Pending")]),
            sse(&[
                (6, "MODIFIED", pod("b", 6, "Running")),
                (7, "MODIFIED", pod("a", 5, "Running")),
                (8, "DELETED", pod("a", 8, "Running")),
            ]),
        ])
        .await;
        let mut changes = changes(&address).named("a");
        assert_eq!(changes.list().await.unwrap().len(), 1);
        assert_eq!(summary(&changes.next().await.unwrap()), "Deleted a Running");
    }

    #[tokio::test]
    async fn a_watcher_that_may_give_up_does_so_on_a_refusal_and_after_its_failures() {
        let forbidden = json_answer("403 Forbidden", r#"{"error":{"code":403,"reason":"Forbidden","message":"no"}}"#);
        let (address, _) = fake_server(vec![forbidden]).await;
        let mut refused = changes(&address);
        let error = refused.next().await.unwrap_err();
        assert_eq!(error.status(), Some(403), "{error}");

        let client = Client::new("http://127.0.0.1:1", None).unwrap();
        let source = Collection { client, kind: Kind::Pod, selection: Selection::default() };
        let mut away = Watcher::new(source, BACKOFF).give_up_after(3);
        let error = away.next().await.unwrap_err();
        assert!(error.is_unreachable(), "{error}");
    }

    #[tokio::test]
    async fn a_resync_lists_again_and_yields_the_whole_list() {
        let (address, seen) = fake_server(vec![list(5, &[pod("a", 5, "Pending")]), list(9, &[pod("a", 9, "Running")])]).await;
        let client = Client::new(&address, None).unwrap();
        let mut watcher = Watcher::new(Collection { client, kind: Kind::Pod, selection: Selection::default() }, BACKOFF);
        assert!(matches!(watcher.next().await.unwrap(), Event::Listed { resource_version: 5, .. }));
        watcher.relist();
        let Event::Listed { resource_version, objects } = watcher.next().await.unwrap() else { panic!("a list") };
        assert_eq!((resource_version, objects.len()), (9, 1));
        assert_eq!(seen.lock().unwrap().len(), 2, "no watch was opened in between");
    }
}
