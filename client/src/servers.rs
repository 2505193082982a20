//! The servers one client may send to (several `shepherd` servers on one etcd serve one
//! cluster, each at its own URL) and the failover rule, in this one place: a call goes to the
//! server that answered last and moves on to the next one only when sending it again cannot
//! do anything twice.
//!
//! - A read or a watch (GET) moves on whenever a server cannot be reached: connection refused
//!   or reset, no answer in time, or a 503 (a server shutting down, or one that lost etcd).
//!   Reading twice changes nothing, and a watch resumes from its revision on any server,
//!   since every server's revisions are etcd's.
//! - A write moves on only when its connection could not be opened, so that the server cannot
//!   have received it. A write that reached a server (then a reset, a time-out or a 503) may
//!   have been applied: sent again it could create twice or apply an update on top of itself,
//!   so its error goes to the caller, as Kubernetes' clients surface such errors.
//! - Any other answer (404, 409, 500, …) is the cluster's answer, the same on every server.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use reqwest::{Request, Url};

use crate::error::{Error, Result, error_chain};

/// The servers of one client, and which answered last; clones share the latter, so that one
/// failover serves every call after it.
#[derive(Debug, Clone)]
pub(crate) struct Servers {
    /// Each URL without a trailing slash, as given (after URL normalisation).
    all: Arc<[String]>,
    current: Arc<AtomicUsize>,
}

impl Servers {
    /// `http://a:8080` or `http://a:8080,http://b:8080`; spaces around commas are allowed.
    pub(crate) fn parse(list: &str) -> Result<Servers> {
        let mut all = Vec::new();
        for text in list.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let bad = |cause: &str| Error::ServerUrl { url: text.to_string(), cause: cause.to_string() };
            let url = Url::parse(text).map_err(|e| bad(&e.to_string()))?;
            if !matches!(url.scheme(), "http" | "https") || !url.has_host() {
                return Err(bad("it must be http://host:port or https://host:port"));
            }
            if url.query().is_some() || url.fragment().is_some() {
                return Err(bad("a server URL takes no query or fragment"));
            }
            all.push(url.as_str().trim_end_matches('/').to_string());
        }
        if all.is_empty() {
            return Err(Error::ServerUrl { url: list.to_string(), cause: "no server URL given".into() });
        }
        Ok(Servers { all: all.into(), current: Arc::new(AtomicUsize::new(0)) })
    }

    pub(crate) fn all(&self) -> &[String] {
        &self.all
    }

    pub(crate) fn current(&self) -> &str {
        &self.all[self.current.load(Ordering::Relaxed) % self.all.len()]
    }

    /// The server at `index` answered: calls go there first from now on.
    pub(crate) fn answered(&self, index: usize) {
        self.current.store(index, Ordering::Relaxed);
    }

    /// `request` addressed to each server in turn, from the current one. A request whose
    /// body cannot be copied, or whose URL is not under one of the servers, is sent once.
    pub(crate) fn attempts(&self, request: Request) -> Attempts {
        let url = request.url().as_str();
        let path = self.all.iter().find_map(|server| url.strip_prefix(server.as_str()).filter(|rest| rest.starts_with(['/', '?'])));
        let path = path.map(str::to_string);
        let count = if path.is_some() && request.try_clone().is_some() { self.all.len() } else { 1 };
        let first = self.current.load(Ordering::Relaxed) % self.all.len();
        Attempts { servers: self.all.clone(), request: Some(request), path, first, count, made: 0 }
    }
}

/// One request, addressed to each server in turn.
pub(crate) struct Attempts {
    servers: Arc<[String]>,
    request: Option<Request>,
    /// The path and query, the part of the URL after the server.
    path: Option<String>,
    first: usize,
    count: usize,
    made: usize,
}

pub(crate) struct Attempt {
    /// Which server, for [`Servers::answered`].
    pub(crate) index: usize,
    pub(crate) server: String,
    pub(crate) request: Request,
}

impl Attempts {
    pub(crate) fn next(&mut self) -> Option<Attempt> {
        if self.made >= self.count {
            return None;
        }
        let index = (self.first + self.made) % self.servers.len();
        self.made += 1;
        let mut request = if self.made < self.count { self.request.as_ref()?.try_clone()? } else { self.request.take()? };
        let server = self.servers[index].clone();
        if let Some(path) = &self.path {
            // Parsed before, as the server and the path it was built from.
            *request.url_mut() = Url::parse(&format!("{server}{path}")).ok()?;
        }
        Some(Attempt { index, server, request })
    }

    /// Whether a server is left to try after the attempt made last.
    pub(crate) fn more(&self) -> bool {
        self.made < self.count
    }

    /// The servers tried so far, in order.
    fn tried(&self) -> Vec<String> {
        (0..self.made).map(|i| self.servers[(self.first + i) % self.servers.len()].clone()).collect()
    }
}

/// Whether a call whose request failed in transport may go to the next server: a read
/// always (it changes nothing), a write only when its connection could not be opened. A
/// certificate this client does not trust is a setting to fix, not a server away.
pub(crate) fn may_move_on(error: &reqwest::Error, read: bool) -> bool {
    !untrusted(error) && (read || error.is_connect())
}

/// Whether a call the server answered with `code` may go to the next server: a read that
/// met a server shutting down or without its store (503). Every other answer is the
/// cluster's.
pub(crate) fn may_move_on_answer(code: u16, read: bool) -> bool {
    read && code == 503
}

/// rustls's words for a chain it cannot verify: "invalid peer certificate: UnknownIssuer".
pub(crate) fn untrusted(error: &reqwest::Error) -> bool {
    error_chain(error).contains("invalid peer certificate")
}

/// The error of a call every server failed: the last one, naming every server tried when
/// none could be reached.
pub(crate) fn last_failure(mut failures: Vec<Error>, attempts: &Attempts) -> Error {
    let last = failures.pop().unwrap_or(Error::ServerUrl { url: String::new(), cause: "no server to send to".into() });
    match last {
        Error::Unreachable { action, cause, .. } => Error::Unreachable { server: attempts.tried().join(", "), action, cause },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use reqwest::Method;

    use super::*;

    #[test]
    fn a_list_of_servers_is_read_and_checked() {
        let servers = Servers::parse(" http://a:1/ , https://b:2/prefix,").unwrap();
        assert_eq!(servers.all(), ["http://a:1", "https://b:2/prefix"]);
        assert_eq!(servers.current(), "http://a:1");
        for bad in ["", " , ", "a:1", "ftp://a", "http://a:1?x=1", "http://[::1"] {
            assert!(matches!(Servers::parse(bad), Err(Error::ServerUrl { .. })), "{bad}");
        }
    }

    #[test]
    fn attempts_go_round_from_the_server_that_answered_last() {
        let servers = Servers::parse("http://a:1,http://b:2,http://c:3").unwrap();
        servers.clone().answered(1);
        let request = Request::new(Method::GET, Url::parse("http://a:1/api/v1/pods?watch=true").unwrap());
        let mut attempts = servers.attempts(request);
        let mut urls = Vec::new();
        while let Some(attempt) = attempts.next() {
            urls.push(attempt.request.url().to_string());
        }
        assert_eq!(urls, ["http://b:2/api/v1/pods?watch=true", "http://c:3/api/v1/pods?watch=true", "http://a:1/api/v1/pods?watch=true"]);
        assert!(!attempts.more());
        let failure = Error::Unreachable { server: "http://a:1".into(), action: "list pods".into(), cause: "refused".into() };
        let text = last_failure(vec![failure], &attempts).to_string();
        assert!(text.contains("http://b:2, http://c:3, http://a:1"), "{text}");
    }

    #[test]
    fn only_reads_move_on_after_a_503() {
        assert!(may_move_on_answer(503, true));
        assert!(!may_move_on_answer(503, false));
        assert!(!may_move_on_answer(500, true) && !may_move_on_answer(404, true));
    }
}
