//! `limit`/`continue` paging of a list, which both API dialects answer with as kube-apiserver
//! does: a page of `limit` objects ends with a continue token that holds the first page's
//! revision and the list order key the next page starts at, and every later page is read at
//! that revision ([`Store::list_at`](crate::store::Store::list_at)) and says it, so that the
//! pages together are one list at one revision. A page copies only its own objects: it reads
//! from its start key and stops after its limit, then only counts the rest. A token whose revision the history no
//! longer reaches is [`Error::Expired`], which offers a token that goes on from the current
//! state instead.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use shared::model::{Kind, Object};

use crate::query::Filter;
use crate::state::AppState;
use crate::store::{Key, Range, Slice, StoreError};

/// The version of Kubernetes' token encoding, which Shepherd's tokens follow.
const TOKEN_VERSION: &str = "meta.k8s.io/v1";

/// What a continue token holds, as base64url (no padding) JSON, in Kubernetes' field names:
/// `rv` is the revision of the list's first page, or -1 for "the current state" (the token
/// an [`Error::Expired`] offers); `start` is the list order key the next page starts at.
#[derive(Serialize, Deserialize)]
struct Token {
    #[serde(rename = "v")]
    version: String,
    #[serde(rename = "rv")]
    revision: i64,
    start: String,
}

/// Where a page starts: the revision to read at (`None`: the current state) and the first
/// list order key it may hold.
struct Continue {
    revision: Option<u64>,
    start: String,
}

impl Continue {
    fn decode(token: &str) -> Result<Continue, Error> {
        let malformed = |why: String| Error::Malformed { token: token.to_string(), why };
        let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|e| malformed(format!("it is not base64url: {e}")))?;
        let decoded: Token = serde_json::from_slice(&bytes).map_err(|e| malformed(format!("it does not hold a continue key: {e}")))?;
        if decoded.version != TOKEN_VERSION {
            return Err(malformed(format!("this server does not know its encoding version {:?}", decoded.version)));
        }
        let revision = match decoded.revision {
            0 => return Err(malformed("its resourceVersion is 0".into())),
            rv => u64::try_from(rv).ok(),
        };
        if decoded.start.is_empty() {
            return Err(malformed("its start key is empty".into()));
        }
        Ok(Continue { revision, start: decoded.start })
    }

    /// The token of a page that starts at `start`, read at `revision` (`None`: the current state).
    fn encode(start: String, revision: Option<u64>) -> String {
        let revision = revision.map_or(-1, |rv| i64::try_from(rv).unwrap_or(i64::MAX));
        let token = Token { version: TOKEN_VERSION.into(), revision, start };
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&token).expect("a token serializes"))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(
        "invalid continue token {token:?}: {why}; pass the previous page's continue token as it came, or leave continue out to list from the start"
    )]
    Malformed { token: String, why: String },
    /// Kubernetes' words, which clients match on; `inconsistent` goes on from the current state.
    #[error(
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
    )]
    Expired { inconsistent: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a list asks for: at most `limit` objects (0: all), from where `continue_` says, or
/// read at revision `at` (Kubernetes' `resourceVersionMatch=Exact`).
#[derive(Debug, Default, Clone, Copy)]
pub struct Request<'a> {
    pub limit: usize,
    pub continue_: Option<&'a str>,
    pub at: Option<u64>,
}

/// One page of a list: the revision it was read at, its objects in list order, and, when
/// more follow, the next page's token and, for a list with no selector, how many remain
/// (as Kubernetes counts `remainingItemCount`).
pub struct Page {
    pub revision: u64,
    pub objects: Vec<Arc<Object>>,
    pub next: Option<String>,
    pub remaining: Option<usize>,
}

/// The order a list answers in, which `continue` resumes after: events by when they last
/// happened, then first (the order `kubectl describe` sorts them in, and a time-ordered
/// `kubectl get events`), everything else by namespace and name, the store's key order.
pub fn list_order(object: &Object) -> String {
    match object {
        Object::Event(event) => {
            let at = |time: &Option<shared::model::Time>| time.map(|t| t.format("%Y-%m-%dT%H:%M:%S%.9fZ").to_string()).unwrap_or_default();
            format!("{} {} {}", at(&event.last_timestamp), at(&event.first_timestamp), event.metadata.key())
        }
        other => other.metadata().key(),
    }
}

/// The objects of `kind` that `filter` selects now, in key order, with the revision they were
/// read at; a node's pods are read through the store's index.
pub fn selected_now(state: &AppState, kind: Kind, filter: &Filter) -> (u64, Vec<Arc<Object>>) {
    let (revision, objects) = match filter.bound_node() {
        Some(node) if kind == Kind::Pod => state.store.pods_on_node(node),
        _ => state.store.list(kind, filter.namespace.as_deref()),
    };
    (revision, objects.into_iter().filter(|o| filter.matches(o)).collect())
}

/// The page of the objects of `kind` that `filter` selects that `request` asks for. A page
/// reads from its start key and stops after its limit; events, whose list order is not the
/// store's key order, are read whole and sorted.
pub async fn page(state: &AppState, kind: Kind, filter: &Filter, request: Request<'_>) -> Result<Page, Error> {
    let from = request.continue_.filter(|t| !t.is_empty()).map(Continue::decode).transpose()?;
    let revision = from.as_ref().map_or(request.at, |c| c.revision);
    if revision.is_none() && request.limit == 0 && kind != Kind::Event {
        let (revision, objects) = selected_now(state, kind, filter);
        if let Some(unreadable) = state.store.unreadable_in(kind, filter.namespace.as_deref(), "", None) {
            return Err(unreadable.into());
        }
        return Ok(Page { revision, objects, next: None, remaining: None });
    }
    if let Some(revision) = revision {
        crate::api::watch::catch_up(state, revision).await;
    }
    let in_key_order = kind != Kind::Event;
    let start = from.as_ref().map_or("", |from| from.start.as_str());
    let selects = |object: &Object| filter.matches(object);
    let range = if in_key_order {
        Range { start, limit: request.limit, selects: &selects }
    } else {
        Range { start: "", limit: 0, selects: &selects }
    };
    let mut slice = match (state.store.list_at(kind, filter.namespace.as_deref(), revision, range), &from) {
        (Ok(slice), _) => slice,
        (Err(StoreError::Gone { .. }), Some(from)) => {
            return Err(Error::Expired { inconsistent: Continue::encode(from.start.clone(), None) });
        }
        (Err(e), _) => return Err(e.into()),
    };
    if !in_key_order {
        slice.objects.sort_by_cached_key(|o| list_order(o));
        slice.objects.drain(..slice.objects.partition_point(|o| list_order(o).as_str() < start));
        if request.limit > 0 && request.limit < slice.objects.len() {
            slice.following = Some(slice.objects.len() - request.limit);
            slice.objects.truncate(request.limit);
        }
    }
    let Slice { revision, objects, following } = slice;
    // The keys the page read: from its start to its last object, or on to the end when none
    // follows; events were read whole.
    let (read_from, until) = match in_key_order {
        true => (start, following.and_then(|_| objects.last()).map(|last| Key::of(last).key)),
        false => ("", None),
    };
    if let Some(unreadable) = state.store.unreadable_in(kind, filter.namespace.as_deref(), read_from, until.as_deref()) {
        return Err(unreadable.into());
    }
    // Just past the last key: the next page starts after it, as Kubernetes' tokens do.
    let next = following.and_then(|_| objects.last()).map(|last| Continue::encode(format!("{}\0", list_order(last)), Some(revision)));
    let remaining = following.filter(|_| filter.selects_all());
    Ok(Page { revision, objects, next, remaining })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_holds_the_revision_and_the_start_key_as_kubernetes_encodes_them() {
        let token = Continue::encode("default/web-1\0".into(), Some(42));
        let json: serde_json::Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&token).unwrap()).unwrap();
        assert_eq!(json, serde_json::json!({"v": "meta.k8s.io/v1", "rv": 42, "start": "default/web-1\u{0}"}));
        let decoded = Continue::decode(&token).unwrap();
        assert_eq!((decoded.revision, decoded.start.as_str()), (Some(42), "default/web-1\0"));
        assert_eq!(Continue::decode(&Continue::encode("a\0".into(), None)).unwrap().revision, None, "-1: the current state");
    }

    #[test]
    fn a_token_this_server_did_not_issue_is_refused_with_why() {
        let why = |token: &str| match Continue::decode(token) {
            Err(Error::Malformed { why, .. }) => why,
            _ => panic!("{token:?} was taken"),
        };
        let encoded = |json: &str| URL_SAFE_NO_PAD.encode(json);
        assert!(why("%%%").starts_with("it is not base64url"));
        assert!(why(&encoded("[1]")).starts_with("it does not hold a continue key"));
        assert!(why(&encoded(r#"{"v":"meta.k8s.io/v2","rv":1,"start":"a"}"#)).contains("encoding version \"meta.k8s.io/v2\""));
        assert_eq!(why(&encoded(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#)), "its resourceVersion is 0");
        assert_eq!(why(&encoded(r#"{"v":"meta.k8s.io/v1","rv":3,"start":""}"#)), "its start key is empty");
    }
}
