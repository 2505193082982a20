//! The one table of what `/k8s` serves: each resource's group, version, kind and plural (as
//! `k8s_openapi::Resource` gives them), its short names (the model's), verbs, categories and
//! subresources. Discovery, the routes and every `apiVersion` written read it: adding a kind
//! is one entry in [`KINDS`].

use k8s_openapi::Resource;
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::autoscaling::v1 as autoscaling;
use k8s_openapi::api::coordination::v1 as coordination;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use shared::model::Kind;

/// What a plural names: a stored kind, or the endpoints (as Endpoints or as EndpointSlices)
/// derived from services.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    Stored(Kind),
    Endpoints,
    EndpointSlices,
}

/// A group, version and kind, read from the `k8s-openapi` type.
#[derive(Debug, Clone, Copy)]
pub struct Gvk {
    pub group: &'static str,
    pub version: &'static str,
    /// `v1` or `apps/v1`: what an object's `apiVersion` says.
    pub api_version: &'static str,
    pub kind: &'static str,
    /// Adds the type's OpenAPI schema (and those it refers to) to a generator's definitions,
    /// returning the reference to it.
    pub schema: fn(&mut SchemaGenerator) -> Schema,
}

impl Gvk {
    const fn of<K: Resource + JsonSchema>() -> Gvk {
        Gvk {
            group: K::GROUP,
            version: K::VERSION,
            api_version: K::API_VERSION,
            kind: K::KIND,
            schema: SchemaGenerator::subschema_for::<K>,
        }
    }
}

/// A subresource (`pods/log`): its name, what it reads and writes if not its parent's kind,
/// and its verbs.
pub struct Subresource {
    pub name: &'static str,
    pub gvk: Option<Gvk>,
    pub verbs: &'static [&'static str],
}

/// One resource kubectl can name, with everything discovery says of it.
pub struct Entry {
    pub served: Served,
    pub gvk: Gvk,
    pub plural: &'static str,
    pub short: &'static [&'static str],
    pub verbs: &'static [&'static str],
    /// `all`, for the kinds `kubectl get all` lists.
    pub categories: &'static [&'static str],
    pub subresources: &'static [Subresource],
}

impl Entry {
    /// A stored kind served as the Kubernetes type `K`.
    const fn stored<K: Resource + JsonSchema>(kind: Kind, verbs: &'static [&'static str], subresources: &'static [Subresource]) -> Entry {
        Entry {
            served: Served::Stored(kind),
            gvk: Gvk::of::<K>(),
            plural: K::URL_PATH_SEGMENT,
            short: kind.short_names(),
            verbs,
            categories: &[],
            subresources,
        }
    }

    const fn in_all(mut self) -> Entry {
        self.categories = &["all"];
        self
    }
}

const ALL_VERBS: &[&str] = &["create", "delete", "get", "list", "patch", "update", "watch"];
const READ: &[&str] = &["get", "list", "watch"];
const GET: &[&str] = &["get"];
/// A WebSocket session's verbs: `get` upgrades, `create` is the POST of SPDY clients.
const SESSION: &[&str] = &["create", "get"];

const fn sub(name: &'static str, verbs: &'static [&'static str]) -> Subresource {
    Subresource { name, gvk: None, verbs }
}

/// Every resource this API serves, in the order discovery lists them.
pub const KINDS: &[Entry] = &[
    Entry::stored::<core::Pod>(
        Kind::Pod,
        ALL_VERBS,
        &[
            sub("log", GET),
            sub("status", GET),
            Subresource { name: "binding", gvk: Some(Gvk::of::<core::Binding>()), verbs: &["create"] },
            sub("exec", SESSION),
            sub("attach", SESSION),
        ],
    )
    .in_all(),
    Entry::stored::<core::Node>(Kind::Node, ALL_VERBS, &[sub("status", GET)]),
    Entry::stored::<core::Namespace>(Kind::Namespace, ALL_VERBS, &[]),
    Entry::stored::<core::Service>(Kind::Service, ALL_VERBS, &[]).in_all(),
    Entry::stored::<core::ConfigMap>(Kind::ConfigMap, ALL_VERBS, &[]),
    Entry::stored::<core::Secret>(Kind::Secret, ALL_VERBS, &[]),
    Entry {
        served: Served::Endpoints,
        gvk: Gvk::of::<core::Endpoints>(),
        plural: <core::Endpoints as Resource>::URL_PATH_SEGMENT,
        short: &["ep"],
        verbs: READ,
        categories: &[],
        subresources: &[],
    },
    Entry::stored::<core::Event>(Kind::Event, ALL_VERBS, &[]),
    Entry::stored::<apps::Deployment>(
        Kind::Deployment,
        ALL_VERBS,
        &[
            Subresource { name: "scale", gvk: Some(Gvk::of::<autoscaling::Scale>()), verbs: &["get", "patch", "update"] },
            sub("status", GET),
        ],
    )
    .in_all(),
    Entry::stored::<apps::ReplicaSet>(
        Kind::ReplicaSet,
        ALL_VERBS,
        &[
            Subresource { name: "scale", gvk: Some(Gvk::of::<autoscaling::Scale>()), verbs: &["get", "patch", "update"] },
            sub("status", GET),
        ],
    )
    .in_all(),
    Entry {
        served: Served::EndpointSlices,
        gvk: Gvk::of::<discovery::EndpointSlice>(),
        plural: <discovery::EndpointSlice as Resource>::URL_PATH_SEGMENT,
        short: &[],
        verbs: READ,
        categories: &[],
        subresources: &[],
    },
    // Read-only: their holders write them through the native API (convert::coordination).
    Entry::stored::<coordination::Lease>(Kind::Lease, READ, &[]),
];

/// The groups served, each once, the core group (`""`) first.
pub fn groups() -> Vec<&'static str> {
    let mut groups: Vec<&str> = Vec::new();
    for entry in KINDS {
        if !groups.contains(&entry.gvk.group) {
            groups.push(entry.gvk.group);
        }
    }
    groups
}

/// The one version a group serves, as its kinds' types name it (`v1` for a group not served).
pub fn version(group: &str) -> &'static str {
    KINDS.iter().find(|entry| entry.gvk.group == group).map_or("v1", |entry| entry.gvk.version)
}

/// `v1` or `apps/v1`: the group version a group serves.
pub fn group_version(group: &str) -> String {
    let version = version(group);
    if group.is_empty() { version.into() } else { format!("{group}/{version}") }
}

/// Where a group's resources live, below `/k8s`: `/api/v1`, `/apis/apps/v1`.
pub fn group_path(group: &str) -> String {
    if group.is_empty() { format!("/api/{}", version(group)) } else { format!("/apis/{}", group_version(group)) }
}

/// The `apiVersion` of a kind named in a reference (an owner, an event's object); `v1` for
/// a kind this API does not serve.
pub fn api_version_of(kind: &str) -> &'static str {
    KINDS.iter().find(|e| e.gvk.kind == kind).map_or("v1", |e| e.gvk.api_version)
}

impl Served {
    /// The resource a group's plural names.
    pub fn parse(group: &str, plural: &str) -> Option<Served> {
        KINDS.iter().find(|e| e.gvk.group == group && e.plural == plural).map(|e| e.served)
    }

    pub fn entry(self) -> &'static Entry {
        KINDS.iter().find(|e| e.served == self).unwrap_or_else(|| unreachable!("every Served is in KINDS"))
    }

    /// The kind the store holds for it.
    pub fn stored(self) -> Kind {
        match self {
            Served::Stored(kind) => kind,
            Served::Endpoints | Served::EndpointSlices => Kind::Service,
        }
    }

    pub fn kind_name(self) -> &'static str {
        self.entry().gvk.kind
    }

    pub fn plural(self) -> &'static str {
        self.entry().plural
    }

    /// Leases are namespaced here as in Kubernetes, though a node's has no namespace in the
    /// store (convert::NODE_LEASE_NAMESPACE).
    pub fn namespaced(self) -> bool {
        self == Served::Stored(Kind::Lease) || self.stored().namespaced()
    }

    pub fn api_version(self) -> &'static str {
        self.entry().gvk.api_version
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each stored kind's entry is the Kubernetes type of the same kind and plural.
    #[test]
    fn each_stored_kind_is_served_as_the_kubernetes_type_of_its_name() {
        for entry in KINDS {
            if let Served::Stored(kind) = entry.served {
                assert_eq!((entry.gvk.kind, entry.plural), (kind.as_str(), kind.plural()));
            }
            assert_eq!(Served::parse(entry.gvk.group, entry.plural), Some(entry.served));
        }
        assert_eq!(groups(), ["", "apps", "discovery.k8s.io", "coordination.k8s.io"]);
        assert!(Served::Stored(Kind::Lease).namespaced(), "in kube-node-lease and kube-system");
        assert_eq!(api_version_of("Deployment"), "apps/v1");
        assert_eq!(api_version_of("Pod"), "v1");
        assert_eq!(Served::Endpoints.kind_name(), "Endpoints");
        assert_eq!((Served::EndpointSlices.api_version(), Served::EndpointSlices.plural()), ("discovery.k8s.io/v1", "endpointslices"));
    }

    /// sheepctl accepts what discovery tells kubectl: each kind, plural and short name.
    #[test]
    fn the_model_reads_the_short_names_discovery_lists() {
        for entry in KINDS {
            let Served::Stored(kind) = entry.served else { continue };
            assert!(!entry.short.is_empty() || [Kind::Secret, Kind::Lease].contains(&kind), "{kind}: it has a short name in Kubernetes");
            for name in entry.short.iter().chain([&entry.gvk.kind, &entry.plural]) {
                assert_eq!(Kind::from_alias(name), Some(kind), "{name}");
                assert_eq!(Kind::from_alias(&name.to_ascii_uppercase()), Some(kind), "{name}");
            }
        }
        assert_eq!(Kind::from_alias("lease"), Some(Kind::Lease));
        assert_eq!(Kind::from_alias("ep"), None, "endpoints are /k8s's alone");
    }
}
