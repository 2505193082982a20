//! The watcher as an explicit state machine: list, watch from the list's revision, resume
//! from the last revision seen, list again on 410 Gone, back off between failed attempts, and
//! poll the list instead when a server cannot stream. Also the reading of one SSE message
//! into a [`WatchEvent`]. No I/O and no clock: the client crate's watcher and the dashboard's
//! drive the machine, tests drive it directly.

use std::time::Duration;

use crate::api::WatchEvent;
use crate::backoff::Backoff;
use crate::model::Kind;
use crate::sse::Message;

/// The server sends a BOOKMARK about every 5 s: a stream silent for this long is dead.
pub const STALL: Duration = Duration::from_secs(20);

/// The waits between failed watch attempts unless a caller needs another curve: 0.5 s,
/// doubling to 30 s, so a server that is away for long gets few knocks. The dashboard watches
/// with it; the agent and sheepctl pass shorter curves, as they must notice a return sooner.
pub const DEFAULT_BACKOFF: Backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));

/// What the watcher does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// GET the collection and replace what is known with it.
    List,
    /// Open `?watch=true&resource_version=from`.
    Watch { from: u64 },
    /// Sleep before the next attempt.
    Wait(Duration),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    backoff: Backoff,
    resource_version: u64,
    must_list: bool,
    failures: u32,
    wait_pending: bool,
    /// Set once the server cannot stream: list every this often instead.
    poll: Option<Duration>,
    poll_pending: bool,
}

impl Machine {
    /// A watcher that resumes from `resource_version`, or lists first when it is 0, and waits
    /// between failed attempts as `backoff` says.
    pub fn new(resource_version: u64, backoff: Backoff) -> Self {
        Machine {
            backoff,
            resource_version,
            must_list: resource_version == 0,
            failures: 0,
            wait_pending: false,
            poll: None,
            poll_pending: false,
        }
    }

    /// Failed attempts since the last one that worked.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// The revision the watcher has caught up with.
    pub fn resource_version(&self) -> u64 {
        self.resource_version
    }

    pub fn is_polling(&self) -> bool {
        self.poll.is_some()
    }

    pub fn next_step(&mut self) -> Step {
        if self.wait_pending {
            self.wait_pending = false;
            return Step::Wait(self.backoff.delay(self.failures));
        }
        if let Some(interval) = self.poll {
            if self.poll_pending {
                self.poll_pending = false;
                return Step::Wait(interval);
            }
            return Step::List;
        }
        if self.must_list { Step::List } else { Step::Watch { from: self.resource_version } }
    }

    /// A list answered at `resource_version`.
    pub fn listed(&mut self, resource_version: u64) {
        self.resource_version = resource_version;
        self.must_list = false;
        self.failures = 0;
        self.poll_pending = self.poll.is_some();
    }

    /// An event (or bookmark) arrived: the stream works, so failures are forgiven.
    pub fn progressed(&mut self, resource_version: u64) {
        self.resource_version = self.resource_version.max(resource_version);
        self.failures = 0;
    }

    /// 410 Gone (the revision fell out of the server's history), an event that could not be
    /// read, or a periodic resync: only a fresh list is sure to miss nothing.
    pub fn relist(&mut self) {
        self.must_list = true;
    }

    /// A network error, a 5xx, or a stalled stream: wait, then try the same step again.
    pub fn failed(&mut self) {
        self.failures = self.failures.saturating_add(1);
        self.wait_pending = true;
    }

    /// The server answers a watch with something other than a stream: from now on, list
    /// every `interval` instead.
    pub fn poll(&mut self, interval: Duration) {
        self.poll = Some(interval);
        self.poll_pending = true;
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("a {kind} watch event is not JSON: {message}")]
    Json { kind: Kind, message: String },
    #[error("a {kind} watch event could not be read: {message}")]
    Shape { kind: Kind, message: String },
}

/// Reads one message of a `kind` watch stream. An object that omits its `kind` gets the
/// stream's, so the typed [`crate::model::Object`] can be built either way.
pub fn decode(message: &Message, kind: Kind) -> Result<WatchEvent, DecodeError> {
    let json = |e: serde_json::Error| DecodeError::Json { kind, message: e.to_string() };
    let shape = |e: serde_json::Error| DecodeError::Shape { kind, message: e.to_string() };
    // Through `Value`, as every answer is read, so the dashboard's bundle holds one decoder.
    let mut value: serde_json::Value = serde_json::from_str(&message.data).map_err(json)?;
    if let Some(object) = value.get_mut("object").and_then(|o| o.as_object_mut())
        && !object.contains_key("kind")
    {
        object.insert("kind".into(), serde_json::Value::String(kind.as_str().into()));
    }
    serde_json::from_value(value).map_err(shape)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::WatchEventType;

    const BACKOFF: Backoff = DEFAULT_BACKOFF;

    #[test]
    fn a_new_watcher_lists_then_watches_from_the_list_revision_and_lists_again_when_told() {
        let mut machine = Machine::new(0, BACKOFF);
        assert_eq!(machine.next_step(), Step::List);
        machine.listed(42);
        assert_eq!(machine.next_step(), Step::Watch { from: 42 });
        machine.relist();
        assert_eq!(machine.next_step(), Step::List);
        machine.listed(80);
        assert_eq!(machine.next_step(), Step::Watch { from: 80 });
    }

    #[test]
    fn a_watcher_with_a_revision_resumes_without_listing() {
        let mut machine = Machine::new(17, BACKOFF);
        assert_eq!(machine.next_step(), Step::Watch { from: 17 });
    }

    #[test]
    fn after_a_clean_end_it_resumes_from_the_last_event() {
        let mut machine = Machine::new(0, BACKOFF);
        machine.listed(10);
        machine.progressed(12);
        machine.progressed(11);
        assert_eq!(machine.next_step(), Step::Watch { from: 12 });
        assert_eq!(machine.resource_version(), 12);
    }

    #[test]
    fn failures_back_off_on_the_curve_and_resume_from_the_last_revision() {
        let mut machine = Machine::new(0, BACKOFF);
        machine.listed(7);
        machine.failed();
        assert_eq!(machine.next_step(), Step::Wait(Duration::from_millis(500)));
        assert_eq!(machine.next_step(), Step::Watch { from: 7 });
        machine.failed();
        assert_eq!(machine.next_step(), Step::Wait(Duration::from_secs(1)));
        machine.failed();
        assert_eq!(machine.next_step(), Step::Wait(Duration::from_secs(2)));
        assert_eq!(machine.failures(), 3);
        for _ in 0..20 {
            machine.failed();
        }
        assert_eq!(machine.next_step(), Step::Wait(Duration::from_secs(30)), "capped at the curve's max");
        machine.progressed(9);
        assert_eq!(machine.failures(), 0);
        assert_eq!(machine.next_step(), Step::Watch { from: 9 });
    }

    #[test]
    fn a_failed_first_list_is_retried_as_a_list() {
        let mut machine = Machine::new(0, BACKOFF);
        machine.failed();
        assert!(matches!(machine.next_step(), Step::Wait(_)));
        assert_eq!(machine.next_step(), Step::List);
    }

    #[test]
    fn polling_lists_every_interval_and_never_watches() {
        let mut machine = Machine::new(0, BACKOFF);
        machine.listed(3);
        machine.poll(Duration::from_secs(1));
        assert!(machine.is_polling());
        assert_eq!(machine.next_step(), Step::Wait(Duration::from_secs(1)));
        assert_eq!(machine.next_step(), Step::List);
        machine.listed(4);
        assert_eq!(machine.next_step(), Step::Wait(Duration::from_secs(1)));
        assert_eq!(machine.next_step(), Step::List);
        machine.failed();
        assert_eq!(machine.next_step(), Step::Wait(Duration::from_millis(500)), "a failed poll backs off");
        assert_eq!(machine.next_step(), Step::List);
    }

    fn message(event: &str, data: &str) -> Message {
        Message { id: None, event: Some(event.to_string()), data: data.to_string() }
    }

    #[test]
    fn decodes_events_with_and_without_kind() {
        let with = decode(
            &message("watch", r#"{"type":"ADDED","resource_version":3,"object":{"kind":"Pod","metadata":{"name":"a"}}}"#),
            Kind::Pod,
        )
        .unwrap();
        assert_eq!(with.type_, WatchEventType::Added);
        let without =
            decode(&message("watch", r#"{"type":"DELETED","resource_version":4,"object":{"metadata":{"name":"n1"}}}"#), Kind::Node)
                .unwrap();
        assert_eq!(without.object.unwrap().kind(), Kind::Node);
        let bookmark = decode(&message("watch", r#"{"type":"BOOKMARK","resource_version":9}"#), Kind::Pod).unwrap();
        assert_eq!((bookmark.type_, bookmark.object), (WatchEventType::Bookmark, None));
    }

    #[test]
    fn bad_events_say_which_stream_and_why() {
        let error = decode(&message("watch", "not json"), Kind::Pod).unwrap_err();
        assert!(error.to_string().starts_with("a Pod watch event is not JSON"), "{error}");
        let error = decode(&message("watch", r#"{"type":"EXPLODED","resource_version":1}"#), Kind::Node).unwrap_err();
        assert!(matches!(error, DecodeError::Shape { kind: Kind::Node, .. }), "{error}");
    }
}
