//! The wire contract between the server and its clients (agent, sheepctl, dashboard):
//! the one error shape, list and watch envelopes, node heartbeats, and the URL of each
//! resource. Clients build URLs here so that no route is spelled twice.

use serde::{Deserialize, Serialize};

use crate::model::{Condition, Kind, NodeResources, Object, Time};

/// The default address of the API server, as in the original.
pub const DEFAULT_ADDR: &str = "127.0.0.1:9876";
/// The environment variable that names the server, as in the original.
pub const API_ENV: &str = "SHEPHERD_API";
pub const TOKEN_ENV: &str = "SHEPHERD_TOKEN";
/// The environment variable that names the PEM file of the certificate authority an https
/// server's certificate must be signed by (the clients' `--certificate-authority`).
pub const CA_ENV: &str = "SHEPHERD_CA";
/// The header sheepctl, the agent and the dashboard send with every request (its value names
/// the client). A web page cannot send it to another site without that site's consent, so an
/// open server takes it as proof that a write does not come from some page the user opened.
pub const CLIENT_HEADER: &str = "x-shepherd-client";

/// The `Authorization` header's value for `token`, as every client sends it: `Bearer <token>`.
/// No token, or an empty one (a cleared field), sends no header.
pub fn bearer(token: Option<&str>) -> Option<String> {
    token.filter(|t| !t.is_empty()).map(|t| format!("Bearer {t}"))
}

/// The WebSocket subprotocol that carries a bearer token for a client that cannot set
/// `Authorization` (a browser's WebSocket), as kube-apiserver reads it: this prefix, then the
/// token in unpadded base64url, offered beside the session's own subprotocol.
pub const BEARER_PROTOCOL_PREFIX: &str = "base64url.bearer.authorization.k8s.io.";

/// The subprotocol that carries `token` ([`BEARER_PROTOCOL_PREFIX`]).
pub fn bearer_protocol(token: &str) -> String {
    use base64::Engine;
    format!("{BEARER_PROTOCOL_PREFIX}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token))
}

/// A bearer token read from a WebSocket's subprotocols, and the subprotocols left without it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolBearer {
    pub token: String,
    pub others: Vec<String>,
}

/// Reads the token from every `Sec-WebSocket-Protocol` value (each a comma-separated list),
/// as kube-apiserver does: none is no token; more than one, a token that is not base64url of
/// UTF-8 text, or a token offered without another subprotocol to answer with is refused.
pub fn bearer_of_protocols<'a>(values: impl IntoIterator<Item = &'a str>) -> Result<Option<ProtocolBearer>, String> {
    use base64::Engine;
    let mut token = None;
    let mut others = Vec::new();
    for protocol in values.into_iter().flat_map(|value| value.split(',')).map(str::trim) {
        let Some(encoded) = protocol.strip_prefix(BEARER_PROTOCOL_PREFIX) else {
            others.push(protocol.to_string());
            continue;
        };
        if token.is_some() {
            return Err("more than one base64url.bearer.authorization.k8s.io token subprotocol".into());
        }
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(encoded)
            .map_err(|_| "the base64url.bearer.authorization.k8s.io token is not unpadded base64url".to_string())?;
        token =
            Some(String::from_utf8(bytes).map_err(|_| "the base64url.bearer.authorization.k8s.io token is not UTF-8 text".to_string())?);
    }
    match token.filter(|token| !token.is_empty()) {
        None => Ok(None),
        Some(_) if others.is_empty() => {
            Err("a bearer token subprotocol needs another subprotocol beside it for the server to answer with".into())
        }
        Some(token) => Ok(Some(ProtocolBearer { token, others })),
    }
}

/// Server-Sent Events `event:` names on a watch stream.
pub const SSE_EVENT_WATCH: &str = "watch";

/// Every error the API returns: `{"error": {"code", "reason", "message", "details"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ApiErrorBody {
    pub error: ApiErrorStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ApiErrorStatus {
    /// The HTTP status code.
    pub code: u16,
    /// A CamelCase word a script can match: `NotFound`, `Conflict`, `Invalid`, `BadRequest`,
    /// `Unauthorized`, `Forbidden`, `Gone`, `PayloadTooLarge`, `InternalError`.
    pub reason: String,
    pub message: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<FieldError>,
}

/// One invalid field: `{"field": "spec.containers[0].image", "message": "must not be empty"}`,
/// with the refused value apart when the message is about one
/// (`{"field": "….port", "message": "must be between 1 and 65535, inclusive", "value": "70000"}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FieldError {
    pub field: String,
    pub message: String,
    /// `Invalid` (a bad value) unless the field is missing (`Required`) or may not be set at
    /// all (`Forbidden`): Kubernetes' `field.ErrorType`, by which `/k8s` words the cause.
    #[serde(rename = "type", default, skip_serializing_if = "FieldErrorType::is_invalid")]
    pub type_: FieldErrorType,
    /// The refused value as JSON (`"http"`, `-1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// What is wrong with a field, in Kubernetes' classes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum FieldErrorType {
    #[default]
    Invalid,
    Required,
    Forbidden,
    /// A value outside a fixed set (`field.NotSupported`); the message lists the set.
    NotSupported,
    /// Over a size limit (`field.TooLong`); the message holds Kubernetes' words.
    TooLong,
    /// A value given twice where each must be unique (`field.Duplicate`).
    Duplicate,
}

impl FieldErrorType {
    pub fn is_invalid(&self) -> bool {
        *self == FieldErrorType::Invalid
    }
}

impl FieldError {
    /// A bad value, said in `message` alone.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError { field: field.into(), message: message.into(), ..FieldError::default() }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.type_ {
            // As Kubernetes words a required field that needs no more said.
            FieldErrorType::Required if self.message.is_empty() => write!(f, "{}: Required value", self.field)?,
            _ => write!(f, "{}: {}", self.field, self.message)?,
        }
        match &self.value {
            Some(value) => write!(f, ", got {value}"),
            None => Ok(()),
        }
    }
}

/// The answer of a list endpoint. `resource_version` is the store revision the list was
/// read at: a watch from it misses nothing. A list asked for with `limit` is paged: while
/// more follow, `continue` is the next page's token and `remaining_item_count` (for a list
/// with no selector) how many objects remain; every page is read at the first's revision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "{T}List"))]
pub struct List<T> {
    pub kind: String,
    pub resource_version: u64,
    #[serde(rename = "continue", default, skip_serializing_if = "Option::is_none")]
    pub continue_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_item_count: Option<usize>,
    pub items: Vec<T>,
}

impl<T> List<T> {
    /// A whole list (one page with nothing after it).
    pub fn whole(kind: impl Into<String>, resource_version: u64, items: Vec<T>) -> List<T> {
        List { kind: kind.into(), resource_version, continue_: None, remaining_item_count: None, items }
    }

    /// The same page with each item turned by `turn`, or its first error.
    pub fn try_map<U, E>(self, turn: impl FnMut(T) -> Result<U, E>) -> Result<List<U>, E> {
        let items = self.items.into_iter().map(turn).collect::<Result<Vec<U>, E>>()?;
        Ok(List {
            kind: self.kind,
            resource_version: self.resource_version,
            continue_: self.continue_,
            remaining_item_count: self.remaining_item_count,
            items,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WatchEventType {
    Added,
    Modified,
    Deleted,
    /// Carries no change: only the revision the stream has reached, so a client can resume.
    Bookmark,
}

/// One change on a watch stream (`?watch=true&resource_version=N`), sent as an SSE `data:`
/// line. For DELETED the object is its last state; for BOOKMARK it is absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WatchEvent {
    #[serde(rename = "type")]
    pub type_: WatchEventType,
    pub resource_version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Object>,
}

/// `POST /api/v1/nodes/{name}/heartbeat`: the agent's periodic proof of life.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Heartbeat {
    /// Conditions the agent reports (`Ready`); the server stamps the heartbeat time.
    pub conditions: Vec<Condition>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<NodeResources>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocatable: Option<NodeResources>,
}

/// `GET /api/v1/info`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Info {
    pub name: String,
    pub version: String,
    #[serde(deserialize_with = "crate::model::de_time")]
    pub started_at: Option<Time>,
    /// The store's current revision.
    pub resource_version: u64,
    /// `sqlite`, `memory` or `etcd`.
    pub store: String,
    pub auth_required: bool,
    pub nodes: usize,
    pub pods: usize,
    pub scheduler_profile: String,
    /// The server's `--node-monitor-grace` in milliseconds: a node whose last heartbeat is
    /// older is not ready (`shared::readiness`), in every client's judgement too.
    pub node_monitor_grace_ms: u64,
    /// Stable for the life of the store (the `default` namespace's uid). Agents label their
    /// containers with it, so two clusters sharing one Docker engine never touch each
    /// other's containers, even with nodes of the same name.
    pub cluster_id: String,
    /// The identity of the server that answered (`<hostname>_<uuid>`).
    pub server_identity: String,
    /// The identity of the server whose scheduler and controllers run, as the leader's
    /// lease says; empty when none holds it (or leader election is off).
    pub leader: String,
    /// The API servers that answer, by their fresh identity leases.
    pub servers: Vec<ApiServer>,
}

/// An API server of the cluster, as its identity lease announces it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ApiServer {
    pub identity: String,
    /// Where it answers (`--advertise-url`, else the address it listens on).
    pub url: String,
}

/// URL paths under the server's base URL.
pub mod paths {
    use super::Kind;

    pub const PREFIX: &str = "/api/v1";
    /// Where the Kubernetes-compatible API lives: kubectl takes it as its server's path.
    pub const KUBERNETES_PREFIX: &str = "/k8s";

    /// The list path for a kind: namespaced kinds in `namespace`, or across every namespace
    /// when it is `None`.
    pub fn collection(kind: Kind, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) if kind.namespaced() => format!("{PREFIX}/namespaces/{}/{}", segment(ns), kind.plural()),
            _ => format!("{PREFIX}/{}", kind.plural()),
        }
    }

    /// The path of one object; `namespace` is ignored for cluster-scoped kinds.
    pub fn object(kind: Kind, namespace: &str, name: &str) -> String {
        if kind.namespaced() {
            format!("{PREFIX}/namespaces/{}/{}/{}", segment(namespace), kind.plural(), segment(name))
        } else {
            format!("{PREFIX}/{}/{}", kind.plural(), segment(name))
        }
    }

    /// A name or namespace as one path segment, whatever it holds: a hostile manifest's
    /// `../../nodes/n1` or `a?watch=1` stays a name (that the server does not have) and never
    /// reaches another path. Every byte but letters, digits, `-`, `_` and `.` is
    /// percent-encoded; a segment of dots alone, which URL parsers resolve even encoded, has
    /// its dots encoded twice, so the server reads a name such as `%2E%2E` that none has.
    fn segment(text: &str) -> String {
        let dots_alone = !text.is_empty() && text.bytes().all(|b| b == b'.');
        let mut out = String::with_capacity(text.len());
        for byte in text.bytes() {
            match byte {
                b'.' if dots_alone => out.push_str("%252E"),
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => out.push(char::from(byte)),
                other => out.push_str(&format!("%{other:02X}")),
            }
        }
        out
    }

    pub fn binding(namespace: &str, pod: &str) -> String {
        format!("{}/binding", object(Kind::Pod, namespace, pod))
    }

    pub fn pod_status(namespace: &str, pod: &str) -> String {
        format!("{}/status", object(Kind::Pod, namespace, pod))
    }

    pub fn pod_log(namespace: &str, pod: &str) -> String {
        format!("{}/log", object(Kind::Pod, namespace, pod))
    }

    /// Runs a command in one of a pod's containers, a WebSocket session
    /// ([`crate::remote_command`]).
    pub fn pod_exec(namespace: &str, pod: &str) -> String {
        format!("{}/exec", object(Kind::Pod, namespace, pod))
    }

    /// Forwards connections to a pod's ports ([`super::port_forward`]).
    pub fn pod_port_forward(namespace: &str, pod: &str) -> String {
        format!("{}/portforward", object(Kind::Pod, namespace, pod))
    }

    /// The scheduler's last decision for a pod, with every node's verdict.
    pub fn pod_scheduling(namespace: &str, pod: &str) -> String {
        format!("{}/scheduling", object(Kind::Pod, namespace, pod))
    }

    pub fn scale(namespace: &str, deployment: &str) -> String {
        format!("{}/scale", object(Kind::Deployment, namespace, deployment))
    }

    pub fn node_heartbeat(node: &str) -> String {
        format!("{}/heartbeat", object(Kind::Node, "", node))
    }

    pub fn node_cordon(node: &str) -> String {
        format!("{}/cordon", object(Kind::Node, "", node))
    }

    pub fn node_uncordon(node: &str) -> String {
        format!("{}/uncordon", object(Kind::Node, "", node))
    }

    pub const INFO: &str = "/api/v1/info";
    /// Reads a JSON or YAML manifest into its objects, storing nothing.
    pub const MANIFESTS_PARSE: &str = "/api/v1/manifests/parse";
    pub const HEALTHZ: &str = "/healthz";
    pub const READYZ: &str = "/readyz";
    pub const METRICS: &str = "/metrics";
    pub const OPENAPI: &str = "/api/openapi.json";
}

/// URL paths of a node agent's API, under the node's `agent_endpoint`.
pub mod agent_paths {
    /// A pod's container output. Namespaces and names are validated DNS names, so they
    /// need no escaping.
    pub fn logs(namespace: &str, pod: &str) -> String {
        format!("/logs/{namespace}/{pod}")
    }

    /// Forwards connections to a pod's ports, from inside its network namespace
    /// ([`super::port_forward`]).
    pub fn port_forward(namespace: &str, pod: &str) -> String {
        format!("/portforward/{namespace}/{pod}")
    }

    /// A command run in one of a pod's containers, as a WebSocket session
    /// ([`crate::remote_command`]).
    pub fn exec(namespace: &str, pod: &str) -> String {
        format!("/exec/{namespace}/{pod}")
    }

    /// The session that joins a container's own process, as [`exec`] does a new one's.
    pub fn attach(namespace: &str, pod: &str) -> String {
        format!("/attach/{namespace}/{pod}")
    }

    /// The usage of the node's running pods ([`crate::metrics::NodeUsage`]), measured when asked.
    pub const STATS: &str = "/stats";

    /// Where, under a fleet's one agent API, node `node`'s API answers: the path its
    /// `agent_endpoint` ends with.
    pub fn fleet_node(node: &str) -> String {
        format!("/nodes/{node}")
    }
}

/// The words of the port-forward protocol, as Kubernetes has them: SPDY/3.1 carried in binary
/// WebSocket messages (what kubectl 1.32 asks for first), where each forwarded connection is a
/// pair of SPDY streams, one for its bytes and one for the error that ended it.
pub mod port_forward {
    /// The WebSocket subprotocol: SPDY tunneled over WebSocket, speaking `portforward.k8s.io`.
    pub const SUBPROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";
    /// The stream header naming a stream's role: [`STREAM_DATA`] or [`STREAM_ERROR`].
    pub const STREAM_TYPE_HEADER: &str = "streamtype";
    /// The stream header naming the pod's port.
    pub const PORT_HEADER: &str = "port";
    /// The stream header pairing a connection's data and error streams.
    pub const REQUEST_ID_HEADER: &str = "requestid";
    /// The stream that carries a forwarded connection's bytes both ways.
    pub const STREAM_DATA: &str = "data";
    /// The stream on which the agent writes why a forwarded connection failed, then ends.
    pub const STREAM_ERROR: &str = "error";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_goes_in_a_bearer_header_and_an_empty_one_in_none() {
        assert_eq!(bearer(Some("s3cret")).as_deref(), Some("Bearer s3cret"));
        assert_eq!(bearer(Some("")), None);
        assert_eq!(bearer(None), None);
    }

    #[test]
    fn a_token_rides_in_a_websocket_subprotocol_beside_the_sessions_own() {
        let protocol = bearer_protocol("s3cret/+?");
        assert_eq!(protocol, "base64url.bearer.authorization.k8s.io.czNjcmV0Lys_");
        let read = bearer_of_protocols([format!("v5.channel.k8s.io, {protocol}").as_str(), "v4.channel.k8s.io"]).unwrap();
        assert_eq!(
            read,
            Some(ProtocolBearer { token: "s3cret/+?".into(), others: vec!["v5.channel.k8s.io".into(), "v4.channel.k8s.io".into()] })
        );
        assert_eq!(bearer_of_protocols(["v5.channel.k8s.io"]), Ok(None));
        assert!(bearer_of_protocols([protocol.as_str()]).unwrap_err().contains("needs another subprotocol"));
        assert!(bearer_of_protocols([protocol.as_str(), protocol.as_str(), "v5.channel.k8s.io"]).unwrap_err().contains("more than one"));
        let padded = format!("{BEARER_PROTOCOL_PREFIX}czNjcmV0==,v5.channel.k8s.io");
        assert!(bearer_of_protocols([padded.as_str()]).unwrap_err().contains("not unpadded base64url"));
        let latin1 = format!("{BEARER_PROTOCOL_PREFIX}_w,v5.channel.k8s.io");
        assert!(bearer_of_protocols([latin1.as_str()]).unwrap_err().contains("not UTF-8"));
    }

    #[test]
    fn a_hostile_name_stays_one_segment_of_its_own_kind() {
        assert_eq!(paths::object(Kind::Pod, "default", "web-1.x"), "/api/v1/namespaces/default/pods/web-1.x");
        assert_eq!(paths::object(Kind::Pod, "default", "../../../nodes/n1"), "/api/v1/namespaces/default/pods/..%2F..%2F..%2Fnodes%2Fn1");
        assert_eq!(paths::object(Kind::Pod, "default", "?watch=1"), "/api/v1/namespaces/default/pods/%3Fwatch%3D1");
        assert_eq!(paths::object(Kind::Pod, "default", "%2e%2e"), "/api/v1/namespaces/default/pods/%252e%252e");
        assert_eq!(paths::object(Kind::Pod, "..", ".."), "/api/v1/namespaces/%252E%252E/pods/%252E%252E");
        assert_eq!(paths::object(Kind::Node, "ignored", "."), "/api/v1/nodes/%252E");
        assert_eq!(paths::collection(Kind::Pod, Some("a/b")), "/api/v1/namespaces/a%2Fb/pods");
        assert_eq!(paths::pod_log("default", "é"), "/api/v1/namespaces/default/pods/%C3%A9/log");
        assert_eq!(paths::pod_exec("default", "web"), "/api/v1/namespaces/default/pods/web/exec");
    }

    #[test]
    fn paths_follow_the_original_routes() {
        assert_eq!(paths::collection(Kind::Pod, None), "/api/v1/pods");
        assert_eq!(paths::collection(Kind::Pod, Some("default")), "/api/v1/namespaces/default/pods");
        assert_eq!(paths::collection(Kind::Node, Some("default")), "/api/v1/nodes");
        assert_eq!(paths::binding("default", "web-0"), "/api/v1/namespaces/default/pods/web-0/binding");
        assert_eq!(paths::node_heartbeat("node-1"), "/api/v1/nodes/node-1/heartbeat");
        assert_eq!(paths::scale("default", "web"), "/api/v1/namespaces/default/deployments/web/scale");
    }

    #[test]
    fn watch_event_round_trips_with_its_object() {
        let json = r#"{"type":"ADDED","resource_version":7,"object":{"kind":"Pod","metadata":{"name":"a"}}}"#;
        let event: WatchEvent = serde_json::from_str(json).unwrap();
        assert_eq!(event.type_, WatchEventType::Added);
        assert_eq!(event.object.as_ref().unwrap().metadata().name, "a");
        let again: WatchEvent = serde_json::from_str(&serde_json::to_string(&event).unwrap()).unwrap();
        assert_eq!(again, event);
    }
}
