//! The watcher as an explicit state machine (list → watch → resume or re-list), and the
//! decoding of one SSE `data:` line into a [`WatchEvent`]. No I/O here: `api::watch` drives
//! the machine over the network, tests drive it directly.

use shared::api::WatchEvent;
use shared::model::Kind;

/// The first retry waits this long; each further failure doubles it up to [`MAX_BACKOFF_MS`].
pub const FIRST_BACKOFF_MS: u32 = 500;
pub const MAX_BACKOFF_MS: u32 = 30_000;
/// The server sends a BOOKMARK about every 5 s: a stream silent for this long is dead.
pub const STALL_MS: u32 = 20_000;

/// What the watcher does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// GET the collection and replace the cache with it.
    List,
    /// Open `?watch=true&resource_version=from`.
    Watch { from: u64 },
    /// Sleep before the next attempt.
    Wait { ms: u32 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    resource_version: u64,
    must_list: bool,
    failures: u32,
    wait_pending: bool,
}

impl Machine {
    /// A watcher that resumes from `resource_version`, or lists first when it is 0.
    pub fn new(resource_version: u64) -> Self {
        Machine { resource_version, must_list: resource_version == 0, failures: 0, wait_pending: false }
    }

    pub fn failures(&self) -> u32 {
        self.failures
    }

    pub fn next_step(&mut self) -> Step {
        if self.wait_pending {
            self.wait_pending = false;
            return Step::Wait { ms: backoff_ms(self.failures) };
        }
        if self.must_list { Step::List } else { Step::Watch { from: self.resource_version } }
    }

    /// A list answered at `resource_version`.
    pub fn listed(&mut self, resource_version: u64) {
        self.resource_version = resource_version;
        self.must_list = false;
        self.failures = 0;
    }

    /// An event (or bookmark) arrived: the stream works, so failures are forgiven.
    pub fn progressed(&mut self, resource_version: u64) {
        self.resource_version = self.resource_version.max(resource_version);
        self.failures = 0;
    }

    /// 410 Gone: the revision fell out of the server's history; only a re-list is safe.
    pub fn gone(&mut self) {
        self.must_list = true;
    }

    /// A network error, a 5xx, or a stalled stream: wait, then try the same step again.
    pub fn failed(&mut self) {
        self.failures += 1;
        self.wait_pending = true;
    }
}

/// The wait before retry number `failures` (1-based): 0.5 s, 1 s, 2 s, … capped at 30 s.
pub fn backoff_ms(failures: u32) -> u32 {
    let shift = failures.saturating_sub(1).min(16);
    FIRST_BACKOFF_MS.saturating_mul(1 << shift).min(MAX_BACKOFF_MS)
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("a {kind} watch event is not JSON: {message}")]
    Json { kind: Kind, message: String },
    #[error("a {kind} watch event could not be read: {message}")]
    Shape { kind: Kind, message: String },
}

/// Reads one `data:` payload. An object that omits its `kind` gets the stream's kind, so
/// the typed [`shared::model::Object`] can be built either way.
pub fn decode_event(data: &str, kind: Kind) -> Result<WatchEvent, DecodeError> {
    let mut value: serde_json::Value = serde_json::from_str(data).map_err(|e| DecodeError::Json { kind, message: e.to_string() })?;
    if let Some(object) = value.get_mut("object").and_then(|o| o.as_object_mut())
        && !object.contains_key("kind")
    {
        object.insert("kind".into(), serde_json::Value::String(kind.as_str().into()));
    }
    serde_json::from_value(value).map_err(|e| DecodeError::Shape { kind, message: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::api::WatchEventType;

    #[test]
    fn a_new_watcher_lists_then_watches_from_the_list_revision() {
        let mut machine = Machine::new(0);
        assert_eq!(machine.next_step(), Step::List);
        machine.listed(42);
        assert_eq!(machine.next_step(), Step::Watch { from: 42 });
    }

    #[test]
    fn a_watcher_with_a_revision_resumes_without_listing() {
        let mut machine = Machine::new(17);
        assert_eq!(machine.next_step(), Step::Watch { from: 17 });
    }

    #[test]
    fn after_a_clean_end_it_resumes_from_the_last_event() {
        let mut machine = Machine::new(0);
        machine.listed(10);
        machine.progressed(12);
        machine.progressed(11);
        // The stream ended cleanly: nothing to record, the next step resumes.
        assert_eq!(machine.next_step(), Step::Watch { from: 12 });
    }

    #[test]
    fn gone_forces_a_relist() {
        let mut machine = Machine::new(5);
        machine.gone();
        assert_eq!(machine.next_step(), Step::List);
        machine.listed(80);
        assert_eq!(machine.next_step(), Step::Watch { from: 80 });
    }

    #[test]
    fn failures_back_off_exponentially_and_resume_from_the_last_revision() {
        let mut machine = Machine::new(0);
        machine.listed(7);
        machine.failed();
        assert_eq!(machine.next_step(), Step::Wait { ms: 500 });
        assert_eq!(machine.next_step(), Step::Watch { from: 7 });
        machine.failed();
        assert_eq!(machine.next_step(), Step::Wait { ms: 1000 });
        machine.failed();
        assert_eq!(machine.next_step(), Step::Wait { ms: 2000 });
        assert_eq!(machine.failures(), 3);
        machine.progressed(9);
        assert_eq!(machine.failures(), 0);
        assert_eq!(machine.next_step(), Step::Watch { from: 9 });
    }

    #[test]
    fn a_failed_first_list_is_retried_as_a_list() {
        let mut machine = Machine::new(0);
        machine.failed();
        assert!(matches!(machine.next_step(), Step::Wait { .. }));
        assert_eq!(machine.next_step(), Step::List);
    }

    #[test]
    fn backoff_is_capped() {
        assert_eq!(backoff_ms(1), 500);
        assert_eq!(backoff_ms(7), 30_000);
        assert_eq!(backoff_ms(1000), 30_000);
    }

    #[test]
    fn decodes_events_with_and_without_kind() {
        let with =
            decode_event(r#"{"type":"ADDED","resource_version":3,"object":{"kind":"Pod","metadata":{"name":"a"}}}"#, Kind::Pod).unwrap();
        assert_eq!(with.type_, WatchEventType::Added);
        let without = decode_event(r#"{"type":"DELETED","resource_version":4,"object":{"metadata":{"name":"n1"}}}"#, Kind::Node).unwrap();
        assert_eq!(without.object.unwrap().kind(), Kind::Node);
        let bookmark = decode_event(r#"{"type":"BOOKMARK","resource_version":9}"#, Kind::Pod).unwrap();
        assert_eq!((bookmark.type_, bookmark.object), (WatchEventType::Bookmark, None));
    }

    #[test]
    fn bad_events_say_which_stream_and_why() {
        let error = decode_event("not json", Kind::Pod).unwrap_err();
        assert!(error.to_string().starts_with("a Pod watch event is not JSON"), "{error}");
        let error = decode_event(r#"{"type":"EXPLODED","resource_version":1}"#, Kind::Node).unwrap_err();
        assert!(matches!(error, DecodeError::Shape { kind: Kind::Node, .. }), "{error}");
    }
}
