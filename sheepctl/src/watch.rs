//! A watcher over one collection, as an explicit state machine: list, then stream changes
//! from the list's revision; on a broken stream resume from the last revision seen; on 410
//! Gone list again; and when the stream keeps failing, fall back to polling the list.
//! Callers see one sequence of ADDED / MODIFIED / DELETED changes whatever the transport.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use futures::StreamExt;
use shared::api::WatchEventType;
use shared::model::{Kind, Object};
use shared::selector::LabelSelector;

use crate::client::{Client, Error, Result, WatchStream};

/// A BOOKMARK comes every ~5 s; this much silence means the connection is dead.
const IDLE_LIMIT: Duration = Duration::from_secs(20);
/// Failed attempts to open the stream before switching to polling.
const STREAM_ATTEMPTS: u32 = 3;
/// Failed polls in a row (server unreachable) before giving up.
const POLL_ATTEMPTS: u32 = 10;
const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// One change to an object in the watched collection.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Never [`WatchEventType::Bookmark`].
    pub type_: WatchEventType,
    pub object: Object,
}

enum State {
    /// List (again) and diff against what is known.
    Listing,
    /// Open the stream from the current revision.
    Connecting,
    Streaming(WatchStream),
    /// The stream is unavailable: list every `poll_interval` and diff.
    Polling,
}

/// Which transport the watcher is using, for callers that want to say so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Stream,
    Polling,
}

pub struct Watcher {
    client: Client,
    kind: Kind,
    namespace: Option<String>,
    selector_text: Option<String>,
    selector: LabelSelector,
    name: Option<String>,
    resource_version: u64,
    state: State,
    known: BTreeMap<String, Object>,
    queue: VecDeque<Change>,
    failures: u32,
    poll_interval: Duration,
}

impl Watcher {
    /// Watches `kind` in `namespace` (every namespace when `None`), optionally only the
    /// objects that match `selector`.
    pub fn new(client: Client, kind: Kind, namespace: Option<&str>, selector: Option<LabelSelector>) -> Watcher {
        let selector = selector.unwrap_or_default();
        Watcher {
            client,
            kind,
            namespace: namespace.filter(|_| kind.namespaced()).map(str::to_string),
            selector_text: (!selector.is_empty()).then(|| selector.to_string()),
            selector,
            name: None,
            resource_version: 0,
            state: State::Listing,
            known: BTreeMap::new(),
            queue: VecDeque::new(),
            failures: 0,
            poll_interval: DEFAULT_POLL_INTERVAL,
        }
    }

    /// Only the object with this name.
    pub fn named(mut self, name: &str) -> Watcher {
        self.name = Some(name.to_string());
        self
    }

    pub fn poll_interval(mut self, interval: Duration) -> Watcher {
        self.poll_interval = interval;
        self
    }

    /// The revision the watcher has caught up with.
    pub fn resource_version(&self) -> u64 {
        self.resource_version
    }

    pub fn transport(&self) -> Transport {
        if matches!(self.state, State::Polling) { Transport::Polling } else { Transport::Stream }
    }

    /// The first list: the objects as they are now. Later changes come from [`Watcher::next`].
    pub async fn list(&mut self) -> Result<Vec<Object>> {
        let list = self.client.list(self.kind, self.namespace.as_deref(), self.selector_text.as_deref()).await?;
        self.resource_version = list.resource_version;
        self.known = list.items.into_iter().filter(|o| self.wanted(o)).map(|o| (o.metadata().key(), o)).collect();
        self.state = State::Connecting;
        Ok(self.known.values().cloned().collect())
    }

    /// The next change. Reconnects, re-lists and falls back to polling on its own; returns
    /// an error only when the server stays unreachable or refuses the list itself.
    pub async fn next(&mut self) -> Result<Change> {
        loop {
            if let Some(change) = self.queue.pop_front() {
                return Ok(change);
            }
            match &mut self.state {
                State::Listing => match self.client.list(self.kind, self.namespace.as_deref(), self.selector_text.as_deref()).await {
                    Ok(list) => {
                        self.failures = 0;
                        self.resource_version = list.resource_version;
                        self.replace_all(list.items);
                        self.state = State::Connecting;
                    }
                    Err(e) => self.unreachable_or_fail(e, POLL_ATTEMPTS).await?,
                },
                State::Connecting => {
                    let opened =
                        self.client.watch(self.kind, self.namespace.as_deref(), self.selector_text.as_deref(), self.resource_version).await;
                    match opened {
                        Ok(stream) => self.state = State::Streaming(stream),
                        Err(e) if e.is_gone() => self.state = State::Listing,
                        Err(e) if e.is_unreachable() || e.status().is_some_and(|s| s >= 500) => {
                            self.failures += 1;
                            if self.failures >= STREAM_ATTEMPTS {
                                self.state = State::Polling;
                            } else {
                                tokio::time::sleep(backoff(self.failures)).await;
                            }
                        }
                        // The server does not stream this collection: poll it instead.
                        Err(_) => self.state = State::Polling,
                    }
                }
                State::Streaming(stream) => match tokio::time::timeout(IDLE_LIMIT, stream.next()).await {
                    Ok(Some(Ok(event))) => {
                        self.failures = 0;
                        self.resource_version = self.resource_version.max(event.resource_version);
                        if let Some(object) = event.object {
                            self.apply(event.type_, object);
                        }
                    }
                    // An event we could not read: list again so nothing is lost.
                    Ok(Some(Err(Error::Decode { .. }))) => self.state = State::Listing,
                    Ok(Some(Err(_))) | Ok(None) | Err(_) => {
                        self.failures += 1;
                        tokio::time::sleep(backoff(self.failures)).await;
                        self.state = State::Connecting;
                    }
                },
                State::Polling => {
                    tokio::time::sleep(self.poll_interval).await;
                    match self.client.list(self.kind, self.namespace.as_deref(), self.selector_text.as_deref()).await {
                        Ok(list) => {
                            self.failures = 0;
                            self.resource_version = list.resource_version;
                            self.replace_all(list.items);
                        }
                        Err(e) => self.unreachable_or_fail(e, POLL_ATTEMPTS).await?,
                    }
                }
            }
        }
    }

    /// Counts an unreachable server and waits; any other error, or too many, ends the watch.
    async fn unreachable_or_fail(&mut self, error: Error, limit: u32) -> Result<()> {
        if !error.is_unreachable() {
            return Err(error);
        }
        self.failures += 1;
        if self.failures >= limit {
            return Err(error);
        }
        tokio::time::sleep(backoff(self.failures)).await;
        Ok(())
    }

    fn wanted(&self, object: &Object) -> bool {
        self.name.as_ref().is_none_or(|n| *n == object.metadata().name) && self.selector.matches(&object.metadata().labels)
    }

    /// Applies one streamed event to what is known, queueing the change it makes.
    fn apply(&mut self, type_: WatchEventType, object: Object) {
        let key = object.metadata().key();
        let known_version = self.known.get(&key).map(|k| k.metadata().resource_version);
        match type_ {
            WatchEventType::Bookmark => {}
            WatchEventType::Deleted => {
                if self.known.remove(&key).is_some() {
                    self.queue.push_back(Change { type_: WatchEventType::Deleted, object });
                }
            }
            WatchEventType::Added | WatchEventType::Modified => {
                if !self.wanted(&object) {
                    // It no longer matches the selector: to this watch it is gone.
                    if self.known.remove(&key).is_some() {
                        self.queue.push_back(Change { type_: WatchEventType::Deleted, object });
                    }
                    return;
                }
                let new_version = object.metadata().resource_version;
                if known_version.is_some_and(|old| old != 0 && new_version != 0 && new_version <= old) {
                    // A replay of something already seen.
                    return;
                }
                let type_ = if known_version.is_some() { WatchEventType::Modified } else { WatchEventType::Added };
                self.known.insert(key, object.clone());
                self.queue.push_back(Change { type_, object });
            }
        }
    }

    /// After a re-list or a poll: every difference from what was known becomes a change.
    fn replace_all(&mut self, items: Vec<Object>) {
        let fresh: BTreeMap<String, Object> = items.into_iter().filter(|o| self.wanted(o)).map(|o| (o.metadata().key(), o)).collect();
        for (key, object) in &self.known {
            if !fresh.contains_key(key) {
                self.queue.push_back(Change { type_: WatchEventType::Deleted, object: object.clone() });
            }
        }
        for (key, object) in &fresh {
            match self.known.get(key) {
                None => self.queue.push_back(Change { type_: WatchEventType::Added, object: object.clone() }),
                Some(old) if old != object => self.queue.push_back(Change { type_: WatchEventType::Modified, object: object.clone() }),
                Some(_) => {}
            }
        }
        self.known = fresh;
    }
}

/// 200 ms, 400 ms, 800 ms, … at most 2 s.
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(200u64.saturating_mul(1 << attempt.saturating_sub(1).min(4))).min(Duration::from_secs(2))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// A scripted HTTP server: the n-th request gets the n-th answer (the last one repeats),
    /// and every request line is recorded.
    async fn fake_server(answers: Vec<String>) -> (String, Arc<Mutex<Vec<String>>>) {
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

    fn json_answer(status: &str, body: &str) -> String {
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

    #[tokio::test]
    async fn resumes_from_the_last_revision_after_the_stream_breaks() {
        let (address, seen) = fake_server(vec![
            list(5, &[pod("a", 5, "Pending")]),
            sse(&[(6, "ADDED", pod("b", 6, "Pending"))]),
            sse(&[(7, "MODIFIED", pod("a", 7, "Running"))]),
        ])
        .await;
        let client = Client::new(&address, None).unwrap();
        let mut watcher = Watcher::new(client, Kind::Pod, Some("default"), None);
        assert_eq!(watcher.list().await.unwrap().len(), 1);
        assert_eq!(summary(&watcher.next().await.unwrap()), "Added b Pending");
        assert_eq!(summary(&watcher.next().await.unwrap()), "Modified a Running");
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen[0], "GET /api/v1/namespaces/default/pods HTTP/1.1");
        assert!(seen[1].contains("watch=true&resource_version=5"), "{seen:?}");
        assert!(seen[2].contains("watch=true&resource_version=6"), "{seen:?}");
        assert_eq!(watcher.transport(), Transport::Stream);
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
        let client = Client::new(&address, None).unwrap();
        let mut watcher = Watcher::new(client, Kind::Pod, Some("default"), None);
        watcher.list().await.unwrap();
        assert_eq!(summary(&watcher.next().await.unwrap()), "Deleted a Pending");
        assert_eq!(summary(&watcher.next().await.unwrap()), "Added b Running");
        assert_eq!(summary(&watcher.next().await.unwrap()), "Modified b Failed");
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
        let client = Client::new(&address, None).unwrap();
        let mut watcher = Watcher::new(client, Kind::Pod, Some("default"), None).poll_interval(Duration::from_millis(10));
        watcher.list().await.unwrap();
        assert_eq!(summary(&watcher.next().await.unwrap()), "Modified a Running");
        assert_eq!(watcher.transport(), Transport::Polling);
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
        let client = Client::new(&address, None).unwrap();
        let mut watcher = Watcher::new(client, Kind::Pod, Some("default"), None).named("a");
        let items = watcher.list().await.unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(summary(&watcher.next().await.unwrap()), "Deleted a Running");
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        assert_eq!(backoff(1), Duration::from_millis(200));
        assert_eq!(backoff(2), Duration::from_millis(400));
        assert_eq!(backoff(4), Duration::from_millis(1600));
        assert_eq!(backoff(9), Duration::from_secs(2));
    }
}
