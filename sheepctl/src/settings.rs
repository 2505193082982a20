//! Turns raw flags into validated settings: the servers' base URLs, the namespace scope, and
//! object references such as `pod/web-server` or `pods web` (durations are `shared::parse`'s).
//! Every function here is pure, so each rule has a unit test.

use std::path::PathBuf;

use shared::api::DEFAULT_ADDR;
use shared::model::{DEFAULT_NAMESPACE, Kind};

use crate::cli::Cli;

/// One validation error per bad flag, each saying what to type instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("invalid server address {0:?}: expected host:port, http://host:port or https://host:port, e.g. 127.0.0.1:9876")]
    BadServer(String),
    #[error("unknown kind {0:?}: use pods (po), deployments (deploy), services (svc), nodes (no), events (ev) or namespaces (ns)")]
    UnknownKind(String),
    #[error("{0:?} names no object: use KIND/NAME, e.g. pod/web-server")]
    MissingName(String),
    #[error("expected a {expected}, but {given:?} is a {actual}")]
    WrongKind { expected: &'static str, given: String, actual: &'static str },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where and as whom `sheepctl` talks, and in which namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The servers of the cluster, each `http://host:port` or `https://host:port` without a
    /// trailing slash; the client tries them in turn (`shepherd_client::servers`).
    pub servers: Vec<String>,
    pub token: Option<String>,
    /// The PEM file of the certificate authority to trust for https (`None`: the system's).
    pub certificate_authority: Option<PathBuf>,
    /// The namespace for namespaced objects (`-n`, else `default`).
    pub namespace: String,
    /// Whether `-n` was given, so a manifest's own namespace cannot silently disagree.
    pub namespace_explicit: bool,
    /// `-A`: list across every namespace.
    pub all_namespaces: bool,
}

impl Settings {
    pub fn from_cli(cli: &Cli) -> Result<Settings> {
        // An empty SHEPHERD_API counts as unset, as shells often export empty variables.
        let server = cli.server.as_deref().filter(|s| !s.trim().is_empty()).unwrap_or(DEFAULT_ADDR);
        Ok(Settings {
            servers: servers(server)?,
            token: cli.token.clone().filter(|t| !t.trim().is_empty()),
            certificate_authority: cli.certificate_authority.clone().filter(|p| !p.as_os_str().is_empty()),
            namespace: cli.namespace.clone().unwrap_or_else(|| DEFAULT_NAMESPACE.to_string()),
            namespace_explicit: cli.namespace.is_some(),
            all_namespaces: cli.all_namespaces,
        })
    }

    /// The namespace a list reads: `None` means every namespace.
    pub fn list_scope(&self) -> Option<&str> {
        if self.all_namespaces { None } else { Some(&self.namespace) }
    }
}

/// Several servers of one cluster, separated by commas, each as [`base_url`] reads it.
pub fn servers(text: &str) -> Result<Vec<String>> {
    text.split(',').map(base_url).collect()
}

/// Accepts `host:port`, `http://host:port`, `https://host:port` and a trailing slash (plain
/// http when no scheme is given); refuses paths.
pub fn base_url(text: &str) -> Result<String> {
    let trimmed = text.trim();
    let (scheme, rest) = match trimmed.strip_prefix("https://") {
        Some(rest) => ("https", rest),
        None => ("http", trimmed.strip_prefix("http://").unwrap_or(trimmed)),
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let valid = !rest.contains("://") && !rest.contains('/') && !rest.contains(char::is_whitespace) && host_and_port_ok(rest);
    if !valid {
        return Err(Error::BadServer(text.to_string()));
    }
    Ok(format!("{scheme}://{rest}"))
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`, with a port from 1 to 65535.
fn host_and_port_ok(text: &str) -> bool {
    let port_ok = |port: &str| port.parse::<u16>().is_ok_and(|p| p > 0);
    if let Some(bracketed) = text.strip_prefix('[') {
        return match bracketed.split_once(']') {
            Some((host, "")) => !host.is_empty(),
            Some((host, tail)) => !host.is_empty() && tail.strip_prefix(':').is_some_and(port_ok),
            None => false,
        };
    }
    match text.split_once(':') {
        None => !text.is_empty(),
        Some((host, port)) => !host.is_empty() && port_ok(port),
    }
}

pub fn kind(text: &str) -> Result<Kind> {
    Kind::from_alias(text).ok_or_else(|| Error::UnknownKind(text.to_string()))
}

/// Reads `KIND/NAME...` or `KIND NAME...` (the first word names the kind for every name).
pub fn targets(words: &[String]) -> Result<Vec<(Kind, String)>> {
    let Some(first) = words.first() else {
        return Ok(Vec::new());
    };
    if first.contains('/') {
        return words.iter().map(|w| slash_target(w)).collect();
    }
    let kind = kind(first)?;
    if words.len() == 1 {
        return Err(Error::MissingName(first.clone()));
    }
    words[1..]
        .iter()
        .map(|w| match w.split_once('/') {
            Some(_) => slash_target(w),
            None => Ok((kind, w.clone())),
        })
        .collect()
}

pub fn slash_target(word: &str) -> Result<(Kind, String)> {
    match word.split_once('/') {
        Some((k, name)) if !name.is_empty() && !name.contains('/') => Ok((kind(k)?, name.to_string())),
        _ => Err(Error::MissingName(word.to_string())),
    }
}

/// A name for a command that takes only one kind (`logs POD`, `cordon NODE`): `NAME` or
/// `KIND/NAME`, where KIND must be that kind.
pub fn name_of(expected: Kind, word: &str) -> Result<String> {
    match word.split_once('/') {
        None if !word.is_empty() => Ok(word.to_string()),
        None => Err(Error::MissingName(word.to_string())),
        Some(_) => {
            let (kind, name) = slash_target(word)?;
            if kind != expected {
                return Err(Error::WrongKind { expected: kind_word(expected), given: word.to_string(), actual: kind_word(kind) });
            }
            Ok(name)
        }
    }
}

/// The lower-case word for a kind, as in `pod/web-server`.
pub fn kind_word(kind: Kind) -> &'static str {
    match kind {
        Kind::Pod => "pod",
        Kind::Deployment => "deployment",
        Kind::ReplicaSet => "replicaset",
        Kind::Service => "service",
        Kind::Node => "node",
        Kind::Event => "event",
        Kind::Namespace => "namespace",
        Kind::Lease => "lease",
        Kind::ConfigMap => "configmap",
        Kind::Secret => "secret",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_addresses_with_or_without_scheme() {
        assert_eq!(base_url("localhost:9876").unwrap(), "http://localhost:9876");
        assert_eq!(base_url("http://127.0.0.1:9876/").unwrap(), "http://127.0.0.1:9876");
        assert_eq!(base_url("http://[::1]:80").unwrap(), "http://[::1]:80");
        assert_eq!(base_url("shepherd").unwrap(), "http://shepherd");
        assert_eq!(base_url("https://127.0.0.1:9876/").unwrap(), "https://127.0.0.1:9876");
        assert!(matches!(base_url("https://h:1/api"), Err(Error::BadServer(_))));
        for bad in ["", "h:", "h:port", "h:0", "h:1/api", "ftp://h:1", "a b:1", "::1:80", ":80"] {
            assert!(matches!(base_url(bad), Err(Error::BadServer(_))), "{bad:?} should be refused");
        }
    }

    #[test]
    fn several_servers_separated_by_commas() {
        assert_eq!(servers("a:1, https://b:2/").unwrap(), ["http://a:1", "https://b:2"]);
        assert_eq!(servers("a:1").unwrap(), ["http://a:1"]);
        for bad in ["a:1,", "a:1,,b:2", ",a:1", "a:1,b:port"] {
            assert!(matches!(servers(bad), Err(Error::BadServer(_))), "{bad:?} should be refused");
        }
    }

    #[test]
    fn targets_in_both_forms() {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(targets(&words(&["pod/web"])).unwrap(), vec![(Kind::Pod, "web".into())]);
        assert_eq!(targets(&words(&["po", "a", "b"])).unwrap(), vec![(Kind::Pod, "a".into()), (Kind::Pod, "b".into())]);
        assert_eq!(
            targets(&words(&["deploy/web", "svc/web"])).unwrap(),
            vec![(Kind::Deployment, "web".into()), (Kind::Service, "web".into())]
        );
        assert_eq!(targets(&words(&["pods"])), Err(Error::MissingName("pods".into())));
        assert_eq!(targets(&words(&["pod/"])), Err(Error::MissingName("pod/".into())));
        assert_eq!(targets(&words(&["sheep/dolly"])), Err(Error::UnknownKind("sheep".into())));
        let err = targets(&words(&["sheep", "dolly"])).unwrap_err();
        assert!(err.to_string().contains("use pods (po)"), "{err}");
    }

    #[test]
    fn names_of_one_kind() {
        assert_eq!(name_of(Kind::Node, "node-1").unwrap(), "node-1");
        assert_eq!(name_of(Kind::Node, "no/node-1").unwrap(), "node-1");
        let err = name_of(Kind::Pod, "node/node-1").unwrap_err();
        assert_eq!(err.to_string(), "expected a pod, but \"node/node-1\" is a node");
    }
}
