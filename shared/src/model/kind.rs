//! The kinds the API serves: their names, plurals, scope and the aliases users type.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The kinds the API serves, with the names and aliases `sheepctl` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Kind {
    Pod,
    Deployment,
    ReplicaSet,
    Service,
    Node,
    Event,
    Namespace,
    Lease,
    ConfigMap,
    Secret,
}

impl Kind {
    pub const ALL: [Kind; 10] = [
        Kind::Pod,
        Kind::Deployment,
        Kind::ReplicaSet,
        Kind::Service,
        Kind::Node,
        Kind::Event,
        Kind::Namespace,
        Kind::Lease,
        Kind::ConfigMap,
        Kind::Secret,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Pod => "Pod",
            Kind::Deployment => "Deployment",
            Kind::ReplicaSet => "ReplicaSet",
            Kind::Service => "Service",
            Kind::Node => "Node",
            Kind::Event => "Event",
            Kind::Namespace => "Namespace",
            Kind::Lease => "Lease",
            Kind::ConfigMap => "ConfigMap",
            Kind::Secret => "Secret",
        }
    }

    /// The plural used in URLs: `pods`, `deployments`, ….
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Pod => "pods",
            Kind::Deployment => "deployments",
            Kind::ReplicaSet => "replicasets",
            Kind::Service => "services",
            Kind::Node => "nodes",
            Kind::Event => "events",
            Kind::Namespace => "namespaces",
            Kind::Lease => "leases",
            Kind::ConfigMap => "configmaps",
            Kind::Secret => "secrets",
        }
    }

    pub fn namespaced(self) -> bool {
        !matches!(self, Kind::Node | Kind::Namespace | Kind::Lease)
    }

    /// The short names kubectl users know: `po`, `deploy`, `rs`, `svc`, `no`, `ev`, `ns`, `cm`
    /// (Secrets have none).
    pub const fn short_names(self) -> &'static [&'static str] {
        match self {
            Kind::Pod => &["po"],
            Kind::Deployment => &["deploy"],
            Kind::ReplicaSet => &["rs"],
            Kind::Service => &["svc"],
            Kind::Node => &["no"],
            Kind::Event => &["ev"],
            Kind::Namespace => &["ns"],
            Kind::Lease | Kind::Secret => &[],
            Kind::ConfigMap => &["cm"],
        }
    }

    /// Accepts the kind, its plural and its [short names](Kind::short_names), in any case.
    pub fn from_alias(text: &str) -> Option<Kind> {
        let text = text.to_ascii_lowercase();
        Kind::ALL
            .into_iter()
            .find(|kind| text == kind.as_str().to_ascii_lowercase() || text == kind.plural() || kind.short_names().contains(&text.as_str()))
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
