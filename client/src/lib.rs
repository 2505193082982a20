//! The one client of the Shepherd API, as kube-client is Kubernetes': the agent, `sheepctl`
//! and the tests talk to a server through it and write no HTTP or SSE code of their own.
//!
//! Layout:
//! - [`Client`] (this file): typed calls for every route in `shared::api::paths`, with the
//!   bearer token and every default header set in one request builder;
//! - [`servers`]: the servers a client may send to and when it moves on to the next one;
//! - [`agent_auth`]: how the server signs the requests it proxies to a node's agent API, and
//!   how the agent checks them;
//! - [`error`]: the one error, naming what was being done and why it failed (error answers
//!   are read and classified by `shared::api_error`, as the dashboard reads them);
//! - [`spdy`] and [`port_forward`]: SPDY/3.1 and the port-forward protocol over it, which the
//!   agent serves and sheepctl speaks, carried by the WebSocket [`Client::websocket`] opens;
//! - [`remote_command`]: exec's channel protocol over such a WebSocket;
//! - [`watcher`]: the async watcher that drives `shared::watch`'s state machine over a watch
//!   stream (decoded by `shared::sse`), and [`watcher::Changes`], the objects it keeps (in a
//!   `shared::cache`) with the change each event makes.

pub mod agent_auth;
pub mod error;
pub mod port_forward;
pub mod remote_command;
pub mod servers;
pub mod spdy;
pub mod watcher;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use reqwest::header::{
    ACCEPT, AUTHORIZATION, CONNECTION, CONTENT_TYPE, HeaderValue, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_PROTOCOL,
    SEC_WEBSOCKET_VERSION, UPGRADE, USER_AGENT,
};
use reqwest::{Method, RequestBuilder, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use shared::api::{CLIENT_HEADER, Heartbeat, Info, List, WatchEvent, paths};
use shared::api_error::ErrorAnswer;
use shared::metrics::{MetricsList, NodeMetrics, PodMetrics};
use shared::model::{Event, Kind, Lease, Node, Object, Pod, Resource, Scale, ScaleSpec};
use shared::scheduler::Explanation;
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio_tungstenite::WebSocketStream;

pub use crate::error::{Error, Result};
use crate::servers::Servers;

/// How long an ordinary call may take by default; watch and followed log streams have no limit.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A live watch: each item is one event, or the error that ended the stream.
pub type WatchStream = BoxStream<'static, Result<WatchEvent>>;

/// Which objects of a collection: a namespace (`None`: every namespace, and always for
/// cluster-scoped kinds), a label selector and a field selector, as the list endpoint takes them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    pub namespace: Option<String>,
    pub label_selector: Option<String>,
    /// `spec.node_name=NODE` is the one the server knows.
    pub field_selector: Option<String>,
}

impl Selection {
    pub fn namespace(namespace: Option<&str>) -> Selection {
        Selection { namespace: namespace.map(str::to_string), ..Selection::default() }
    }

    /// The pods bound to `node`.
    pub fn on_node(node: &str) -> Selection {
        Selection { field_selector: Some(format!("spec.node_name={node}")), ..Selection::default() }
    }

    fn query(&self) -> Vec<(&'static str, String)> {
        let mut query = Vec::new();
        if let Some(selector) = self.label_selector.as_ref().filter(|s| !s.is_empty()) {
            query.push(("label_selector", selector.clone()));
        }
        if let Some(selector) = self.field_selector.as_ref().filter(|s| !s.is_empty()) {
            query.push(("field_selector", selector.clone()));
        }
        query
    }

    /// `pods`, `pods in namespace default`, `pods matching app=web`.
    fn describe(&self, kind: Kind) -> String {
        let mut text = kind.plural().to_string();
        if let Some(ns) = self.namespace.as_ref().filter(|_| kind.namespaced()) {
            text.push_str(&format!(" in namespace {ns}"));
        }
        for selector in [&self.label_selector, &self.field_selector].into_iter().flatten() {
            text.push_str(&format!(" matching {selector}"));
        }
        text
    }
}

/// What a DELETE may say beyond the object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// Overrides a pod's own grace period; 0 removes it at once.
    pub grace_period_seconds: Option<i64>,
    /// Only if the stored object still has this uid (409 otherwise).
    pub uid: Option<String>,
}

/// Which part of a pod's log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub container: Option<String>,
    pub tail: Option<u64>,
    /// Keep streaming as the container writes.
    pub follow: bool,
    /// Each line after the time it was written (RFC 3339).
    pub timestamps: bool,
    /// Only what was written in the last this many seconds.
    pub since_seconds: Option<i64>,
    /// Only what was written from this time on (RFC 3339).
    pub since_time: Option<String>,
    /// The container's previous run, before its last restart.
    pub previous: bool,
}

/// `pod default/web`, `node node-1`: an object as actions name it.
fn object_words(kind: Kind, namespace: &str, name: &str) -> String {
    let kind = kind.as_str().to_ascii_lowercase();
    if namespace.is_empty() { format!("{kind} {name}") } else { format!("{kind} {namespace}/{name}") }
}

#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    /// Where calls go, and which server answered last (shared by every clone).
    servers: Servers,
    /// The `Authorization` header, as `shared::api::bearer` spells it for every client.
    authorization: Option<HeaderValue>,
    /// Sent as `shared::api::CLIENT_HEADER`, and with the version as the user agent.
    name: &'static str,
    timeout: Duration,
    /// Caps the ordinary calls in flight, and so the connections they hold.
    in_flight: Option<Arc<Semaphore>>,
    /// The HTTP client's settings, kept to build it again with other ones.
    transport: Transport,
}

/// What the HTTP client is built from.
#[derive(Debug, Clone)]
struct Transport {
    max_idle: usize,
    /// The only certificate authorities an https server may be signed by (PEM); `None`
    /// trusts the system's.
    authority: Option<Vec<reqwest::Certificate>>,
}

impl Client {
    /// A client of the servers in `servers`: one URL (`http://host:port`) or several,
    /// separated by commas, all serving one cluster; `token` is sent as a bearer token when
    /// there is one. Calls go to the server that answered last and move on to the next as
    /// [`servers`] says.
    pub fn new(servers: &str, token: Option<String>) -> Result<Client> {
        let authorization = match shared::api::bearer(token.as_deref()) {
            Some(value) => {
                let mut header = HeaderValue::try_from(value).map_err(|_| Error::Token)?;
                header.set_sensitive(true);
                Some(header)
            }
            None => None,
        };
        let servers = Servers::parse(servers)?;
        let transport = Transport { max_idle: 64, authority: None };
        let http = http_client(servers.current(), &transport)?;
        Ok(Client { http, servers, authorization, name: "shepherd-client", timeout: REQUEST_TIMEOUT, in_flight: None, transport })
    }

    /// Trusts only the certificate authorities in `pem` for an https server, as kubectl's
    /// `certificate-authority`: the one a server started with `--tls-self-signed` made.
    pub fn with_certificate_authority(mut self, pem: &[u8]) -> Result<Client> {
        let certificates = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| Error::Authority(error::error_chain(&e)))?;
        if certificates.is_empty() {
            return Err(Error::Authority("it holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into()));
        }
        self.transport.authority = Some(certificates);
        self.http = http_client(self.servers.current(), &self.transport)?;
        Ok(self)
    }

    /// Says who is calling: `sheepctl`, `agent`, `tests`.
    pub fn named(mut self, name: &'static str) -> Client {
        self.name = name;
        self
    }

    /// How long an ordinary call may take.
    pub fn with_timeout(mut self, timeout: Duration) -> Client {
        self.timeout = timeout;
        self
    }

    /// At most `calls` ordinary calls in flight at once; the others wait their turn, and the
    /// wait does not count against the time limit. Each call in flight holds one connection
    /// and at most `calls` idle ones are kept, so a process that shares this client (a fleet
    /// of simulated nodes) holds about `calls` of them, plus one per watch or followed log.
    /// (A connection goes back to the pool a moment after its answer is read, so a call
    /// right after may open one more; the idle cap closes it again.)
    pub fn with_max_in_flight(mut self, calls: usize) -> Result<Client> {
        let calls = calls.max(1);
        self.transport.max_idle = calls;
        self.http = http_client(self.servers.current(), &self.transport)?;
        self.in_flight = Some(Arc::new(Semaphore::new(calls)));
        Ok(self)
    }

    /// The server calls go to first: the one that answered last.
    pub fn base(&self) -> &str {
        self.servers.current()
    }

    /// Every server this client may send to, in the order given.
    pub fn servers(&self) -> &[String] {
        self.servers.all()
    }

    /// A request to `path` with every default header: the one place they are set (the
    /// client's name, which an open server wants on every write, and the token). It is
    /// addressed to the current server; the typed calls move it to the next one as
    /// [`servers`] says. Public for tests that check the server's answers to requests no
    /// typed call sends.
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let builder = self
            .http
            .request(method, format!("{}{path}", self.servers.current()))
            .header(CLIENT_HEADER, self.name)
            .header(USER_AGENT, format!("{}/{}", self.name, env!("CARGO_PKG_VERSION")));
        match &self.authorization {
            Some(value) => builder.header(AUTHORIZATION, value.clone()),
            None => builder,
        }
    }

    fn transport_error(&self, server: &str, action: &str, error: &reqwest::Error) -> Error {
        if error.is_timeout() {
            Error::Timeout { action: action.to_string(), after: self.timeout }
        } else {
            let cause = error::error_chain(error);
            if servers::untrusted(error) {
                return Error::Untrusted { server: server.to_string(), action: action.to_string(), cause };
            }
            Error::Unreachable { server: server.to_string(), action: action.to_string(), cause }
        }
    }

    /// Sends a request and turns transport failures and error answers into [`Error`]: the
    /// answer's head only, for a stream.
    async fn send(&self, action: &str, builder: RequestBuilder) -> Result<(String, Response)> {
        match self.exchange(action, builder, false).await? {
            (server, Answer::Head(response)) => Ok((server, response)),
            (_, Answer::Whole(_)) => unreachable!("a head was asked for"),
        }
    }

    /// Sends a request to the current server, and to the next ones while [`servers`] says
    /// that is safe; reads the whole answer when `whole`. Returns the server that answered.
    async fn exchange(&self, action: &str, builder: RequestBuilder, whole: bool) -> Result<(String, Answer)> {
        let request = builder.build().map_err(|e| self.transport_error(self.servers.current(), action, &e))?;
        let mut attempts = self.servers.attempts(request);
        let mut failures: Vec<Error> = Vec::new();
        while let Some(attempt) = attempts.next() {
            let safe = attempt.request.method().is_safe();
            let server = attempt.server.clone();
            // A stream has no time limit of its own: its head still must come in time.
            let sent = match attempt.request.timeout() {
                Some(_) => self.http.execute(attempt.request).await,
                None => match tokio::time::timeout(self.timeout, self.http.execute(attempt.request)).await {
                    Ok(sent) => sent,
                    Err(_) => {
                        failures.push(Error::Timeout { action: action.to_string(), after: self.timeout });
                        if safe && attempts.more() {
                            continue;
                        }
                        break;
                    }
                },
            };
            let response = match sent {
                Ok(response) => response,
                Err(e) => {
                    let move_on = servers::may_move_on(&e, safe) && attempts.more();
                    failures.push(self.transport_error(&server, action, &e));
                    if move_on {
                        tracing::warn!(server = %server, "cannot reach the server; trying the next one");
                        continue;
                    }
                    break;
                }
            };
            let code = response.status().as_u16();
            if !response.status().is_success() {
                let body = response.text().await.unwrap_or_default();
                failures.push(error_answer(action, code, &body));
                if servers::may_move_on_answer(code, safe) && attempts.more() {
                    tracing::warn!(server = %server, code, "server unavailable; trying the next one");
                    continue;
                }
                self.servers.answered(attempt.index);
                break;
            }
            if !whole {
                self.servers.answered(attempt.index);
                return Ok((server, Answer::Head(response)));
            }
            match response.bytes().await {
                Ok(bytes) => {
                    self.servers.answered(attempt.index);
                    return Ok((server, Answer::Whole(bytes)));
                }
                Err(e) => {
                    let move_on = servers::may_move_on(&e, safe) && attempts.more();
                    failures.push(self.transport_error(&server, action, &e));
                    if move_on {
                        continue;
                    }
                    break;
                }
            }
        }
        Err(servers::last_failure(failures, &attempts))
    }

    /// A turn to call, when calls in flight are capped.
    async fn turn(&self) -> Option<SemaphorePermit<'_>> {
        match &self.in_flight {
            // The semaphore is never closed.
            Some(semaphore) => semaphore.acquire().await.ok(),
            None => None,
        }
    }

    /// The whole answer of a call with the ordinary time limit, read while its turn is held.
    async fn call_bytes(&self, action: &str, builder: RequestBuilder) -> Result<Bytes> {
        let _turn = self.turn().await;
        match self.exchange(action, builder.timeout(self.timeout), true).await? {
            (_, Answer::Whole(bytes)) => Ok(bytes),
            (_, Answer::Head(_)) => unreachable!("the whole answer was asked for"),
        }
    }

    /// A call with the ordinary time limit whose JSON answer is decoded.
    async fn call<T: DeserializeOwned>(&self, action: &str, builder: RequestBuilder) -> Result<T> {
        let bytes = self.call_bytes(action, builder).await?;
        serde_json::from_slice(&bytes).map_err(|e| Error::Decode { action: action.to_string(), message: e.to_string() })
    }

    /// A call with the ordinary time limit whose answer is not needed. The answer is still
    /// read to its end, so that its connection goes back to the pool instead of closing.
    async fn call_ignoring_answer(&self, action: &str, builder: RequestBuilder) -> Result<()> {
        self.call_bytes(action, builder).await.map(drop)
    }

    /// Whether the server is up and ready to serve (`/readyz`).
    pub async fn ready(&self) -> Result<()> {
        self.call_ignoring_answer("check the server is ready", self.request(Method::GET, paths::READYZ)).await
    }

    pub async fn info(&self) -> Result<Info> {
        self.call("read the server's info", self.request(Method::GET, paths::INFO)).await
    }

    /// What the nodes `label_selector` chooses use (`metrics.k8s.io`, what `kubectl top` reads).
    pub async fn node_metrics(&self, label_selector: Option<&str>) -> Result<Vec<NodeMetrics>> {
        let path = shared::metrics::list_path("nodes", None);
        let request = self.request(Method::GET, &path).query(&[("labelSelector", label_selector.unwrap_or(""))]);
        Ok(self.call::<MetricsList<NodeMetrics>>("read the nodes' usage", request).await?.items)
    }

    /// What the running pods of `selection` (its namespace and label selector) use.
    pub async fn pod_metrics(&self, selection: &Selection) -> Result<Vec<PodMetrics>> {
        let path = shared::metrics::list_path("pods", selection.namespace.as_deref());
        let request = self.request(Method::GET, &path).query(&[("labelSelector", selection.label_selector.as_deref().unwrap_or(""))]);
        Ok(self.call::<MetricsList<PodMetrics>>("read the pods' usage", request).await?.items)
    }

    pub async fn get_object(&self, kind: Kind, namespace: &str, name: &str) -> Result<Object> {
        let action = format!("get {}", object_words(kind, namespace, name));
        let value = self.call(&action, self.request(Method::GET, &paths::object(kind, namespace, name))).await?;
        object_from_value(kind, value).map_err(|message| Error::Decode { action, message })
    }

    pub async fn get<R: Resource>(&self, namespace: &str, name: &str) -> Result<R> {
        let object = self.get_object(R::KIND, namespace, name).await?;
        typed(object, &format!("get {}", object_words(R::KIND, namespace, name)))
    }

    /// The objects of a collection, with the revision the list was read at.
    pub async fn list_objects(&self, kind: Kind, selection: &Selection) -> Result<List<Object>> {
        self.list_query(kind, selection, selection.query()).await
    }

    /// One page of a collection: at most `limit` objects, from where the previous page's
    /// `continue_` token says (`None`: the first page). The list's `continue_` is the next
    /// page's token, absent on the last page; every page is read at the first one's revision.
    pub async fn list_page(&self, kind: Kind, selection: &Selection, limit: usize, continue_: Option<&str>) -> Result<List<Object>> {
        let mut query = selection.query();
        query.push(("limit", limit.to_string()));
        if let Some(token) = continue_ {
            query.push(("continue", token.to_string()));
        }
        self.list_query(kind, selection, query).await
    }

    async fn list_query(&self, kind: Kind, selection: &Selection, query: Vec<(&'static str, String)>) -> Result<List<Object>> {
        let action = format!("list {}", selection.describe(kind));
        let path = paths::collection(kind, selection.namespace.as_deref());
        let list: List<serde_json::Value> = self.call(&action, self.request(Method::GET, &path).query(&query)).await?;
        list.try_map(|item| object_from_value(kind, item)).map_err(|message| Error::Decode { action, message })
    }

    pub async fn list<R: Resource>(&self, selection: &Selection) -> Result<List<R>> {
        let list = self.list_objects(R::KIND, selection).await?;
        let action = format!("list {}", selection.describe(R::KIND));
        list.try_map(|o| typed(o, &action))
    }

    /// Creates an object in its namespace; the server answers with what it stored.
    pub async fn create_object(&self, object: &Object) -> Result<Object> {
        let (kind, meta) = (object.kind(), object.metadata());
        let action = format!("create {}", object_words(kind, &meta.namespace, &meta.name));
        let path = paths::collection(kind, Some(&meta.namespace));
        let value = self.call(&action, self.request(Method::POST, &path).json(object)).await?;
        object_from_value(kind, value).map_err(|message| Error::Decode { action, message })
    }

    /// The objects of a manifest, read by the server and stored nowhere: one written
    /// Kubernetes' way comes back as a create through `/k8s` would store it.
    pub async fn parse_manifest(&self, text: &str) -> Result<Vec<Object>> {
        #[derive(serde::Deserialize)]
        struct Parsed {
            items: Vec<serde_json::Value>,
        }
        let action = "read the manifest";
        let request = self.request(Method::POST, paths::MANIFESTS_PARSE).header(CONTENT_TYPE, "application/yaml").body(text.to_string());
        let parsed: Parsed = self.call(action, request).await?;
        let decode = |value| Object::from_value(value).map_err(|e| Error::Decode { action: action.to_string(), message: e.to_string() });
        parsed.items.into_iter().map(decode).collect()
    }

    /// Replaces an object (compare-and-swap on its `resource_version` when it is not 0).
    pub async fn replace_object(&self, object: &Object) -> Result<Object> {
        let (kind, meta) = (object.kind(), object.metadata());
        let action = format!("update {}", object_words(kind, &meta.namespace, &meta.name));
        let path = paths::object(kind, &meta.namespace, &meta.name);
        let value = self.call(&action, self.request(Method::PUT, &path).json(object)).await?;
        object_from_value(kind, value).map_err(|message| Error::Decode { action, message })
    }

    pub async fn create<R: Resource + Serialize>(&self, object: &R) -> Result<R> {
        let meta = object.meta();
        let action = format!("create {}", object_words(R::KIND, &meta.namespace, &meta.name));
        typed(self.create_object(&object.clone().into_object()).await?, &action)
    }

    /// Deletes an object. A pod bound to a Ready node stays Terminating until its agent
    /// confirms with grace period 0 and the pod's uid.
    pub async fn delete(&self, kind: Kind, namespace: &str, name: &str, options: &DeleteOptions) -> Result<()> {
        let action = format!("delete {}", object_words(kind, namespace, name));
        let mut query: Vec<(&str, String)> = Vec::new();
        if let Some(grace) = options.grace_period_seconds {
            query.push(("grace_period_seconds", grace.to_string()));
        }
        if let Some(uid) = &options.uid {
            query.push(("uid", uid.clone()));
        }
        let builder = self.request(Method::DELETE, &paths::object(kind, namespace, name)).query(&query);
        self.call_ignoring_answer(&action, builder).await
    }

    /// Registers a node as its agent does: creates it, or updates capacity and info of an
    /// existing one. The server stamps the first heartbeat and renews the node's lease.
    pub async fn register_node(&self, node: &Node) -> Result<Node> {
        let action = format!("register node {}", node.metadata.name);
        self.call(&action, self.request(Method::POST, &paths::collection(Kind::Node, None)).json(node)).await
    }

    /// Reports the node's status (a Node write): when it changed, or every few minutes.
    pub async fn heartbeat(&self, node: &str, heartbeat: &Heartbeat) -> Result<()> {
        let action = format!("send the status heartbeat of node {node}");
        self.call_ignoring_answer(&action, self.request(Method::POST, &paths::node_heartbeat(node)).json(heartbeat)).await
    }

    /// Renews the node's lease, the frequent heartbeat: one small write that leaves the Node
    /// alone. The answer carries the server's `lease_duration_seconds` (its grace).
    pub async fn renew_lease(&self, node: &str) -> Result<Lease> {
        let action = format!("renew the lease of node {node}");
        self.call(&action, self.request(Method::PUT, &paths::object(Kind::Lease, "", node))).await
    }

    /// Cordons the node when `cordon`, else uncordons it.
    pub async fn cordon(&self, node: &str, cordon: bool) -> Result<()> {
        let (verb, path) = if cordon { ("cordon", paths::node_cordon(node)) } else { ("uncordon", paths::node_uncordon(node)) };
        self.call_ignoring_answer(&format!("{verb} node {node}"), self.request(Method::POST, &path)).await
    }

    /// Writes a pod's status (the status subresource: only `status` is taken).
    pub async fn update_pod_status(&self, pod: &Pod) -> Result<Pod> {
        let action = format!("update the status of {}", object_words(Kind::Pod, &pod.metadata.namespace, &pod.metadata.name));
        let path = paths::pod_status(&pod.metadata.namespace, &pod.metadata.name);
        self.call(&action, self.request(Method::PUT, &path).json(pod)).await
    }

    pub async fn create_event(&self, event: &Event) -> Result<()> {
        let action = format!("record event {} for {}", event.reason, event.involved_object.short());
        let path = paths::collection(Kind::Event, Some(&event.metadata.namespace));
        self.call_ignoring_answer(&action, self.request(Method::POST, &path).json(event)).await
    }

    /// Sets a deployment's replicas through its scale subresource.
    pub async fn scale(&self, namespace: &str, deployment: &str, replicas: i32) -> Result<Scale> {
        let action = format!("scale {}", object_words(Kind::Deployment, namespace, deployment));
        let scale = Scale {
            kind: "Scale".to_string(),
            metadata: shared::model::ObjectMeta::named(namespace, deployment),
            spec: ScaleSpec { replicas },
            ..Default::default()
        };
        self.call(&action, self.request(Method::PUT, &paths::scale(namespace, deployment)).json(&scale)).await
    }

    /// The scheduler's last decision for a pod, with every node's verdict.
    pub async fn scheduling(&self, namespace: &str, pod: &str) -> Result<Explanation> {
        let action = format!("read the scheduling of {}", object_words(Kind::Pod, namespace, pod));
        self.call(&action, self.request(Method::GET, &paths::pod_scheduling(namespace, pod))).await
    }

    /// A container's output as it arrives (the server proxies it from the node's agent).
    pub async fn logs(&self, namespace: &str, pod: &str, options: &LogOptions) -> Result<BoxStream<'static, Result<Bytes>>> {
        let action = format!("read the log of {}", object_words(Kind::Pod, namespace, pod));
        let mut query: Vec<(&str, String)> = Vec::new();
        if let Some(container) = &options.container {
            query.push(("container", container.clone()));
        }
        if let Some(tail) = options.tail {
            query.push(("tail", tail.to_string()));
        }
        if options.follow {
            query.push(("follow", "true".to_string()));
        }
        if options.timestamps {
            query.push(("timestamps", "true".to_string()));
        }
        query.extend(options.since_seconds.map(|s| ("since_seconds", s.to_string())));
        query.extend(options.since_time.clone().map(|t| ("since_time", t)));
        if options.previous {
            query.push(("previous", "true".to_string()));
        }
        let mut builder = self.request(Method::GET, &paths::pod_log(namespace, pod)).query(&query);
        if !options.follow {
            builder = builder.timeout(self.timeout);
        }
        let (server, response) = self.send(&action, builder).await?;
        let client = self.clone();
        Ok(response.bytes_stream().map(move |chunk| chunk.map_err(|e| client.transport_error(&server, &action, &e))).boxed())
    }

    /// Forwards connections to a pod's ports (the server proxies them to the node's agent).
    pub async fn port_forward(&self, namespace: &str, pod: &str) -> Result<port_forward::PortForward> {
        let path = paths::pod_port_forward(namespace, pod);
        let socket = self.websocket(&path, shared::api::port_forward::SUBPROTOCOL).await?;
        Ok(port_forward::PortForward::over(socket))
    }

    /// Runs a command in a pod's container (the server proxies the session to the node's agent).
    pub async fn exec(
        &self,
        namespace: &str,
        pod: &str,
        options: &shared::remote_command::Options,
    ) -> Result<remote_command::RemoteCommand<reqwest::Upgraded>> {
        let path = paths::pod_exec(namespace, pod);
        let socket = self.websocket_with_query(&path, &options.to_query(), shared::remote_command::V5).await?;
        Ok(remote_command::RemoteCommand::over(socket))
    }

    /// Opens a WebSocket on `path` speaking `subprotocol`, through this client's transport (its
    /// TLS trust and token) on the current server: a stream's upgrade is never sent twice.
    pub async fn websocket(&self, path: &str, subprotocol: &str) -> Result<WebSocketStream<reqwest::Upgraded>> {
        self.websocket_with_query(path, &[], subprotocol).await
    }

    /// [`Client::websocket`] with a query on `path`.
    pub async fn websocket_with_query(
        &self,
        path: &str,
        query: &[(&str, String)],
        subprotocol: &str,
    ) -> Result<WebSocketStream<reqwest::Upgraded>> {
        use tokio_tungstenite::tungstenite::handshake::{client::generate_key, derive_accept_key};
        let action = format!("open a WebSocket for {subprotocol} on {path}");
        let key = generate_key();
        let builder = self
            .request(Method::GET, path)
            .query(query)
            .header(CONNECTION, "Upgrade")
            .header(UPGRADE, "websocket")
            .header(SEC_WEBSOCKET_VERSION, "13")
            .header(SEC_WEBSOCKET_KEY, &key)
            .header(SEC_WEBSOCKET_PROTOCOL, subprotocol);
        let server = self.servers.current().to_string();
        let request = builder.build().map_err(|e| self.transport_error(&server, &action, &e))?;
        let response = match tokio::time::timeout(self.timeout, self.http.execute(request)).await {
            Ok(sent) => sent.map_err(|e| self.transport_error(&server, &action, &e))?,
            Err(_) => return Err(Error::Timeout { action, after: self.timeout }),
        };
        let code = response.status().as_u16();
        if code != 101 {
            let body = response.text().await.unwrap_or_default();
            return Err(error_answer(&action, code, &body));
        }
        let header = |name| response.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        if header(SEC_WEBSOCKET_ACCEPT) != derive_accept_key(key.as_bytes()) || header(SEC_WEBSOCKET_PROTOCOL) != subprotocol {
            let message = format!("the server switched protocols without accepting {subprotocol} over WebSocket");
            return Err(Error::Decode { action, message });
        }
        let upgraded = response.upgrade().await.map_err(|e| self.transport_error(&server, &action, &e))?;
        Ok(WebSocketStream::from_raw_socket(upgraded, tokio_tungstenite::tungstenite::protocol::Role::Client, None).await)
    }

    /// Opens a watch on a collection: every change strictly after `from`. A revision the
    /// server no longer keeps answers 410, for which [`Error::is_gone`] holds.
    pub async fn watch(&self, kind: Kind, selection: &Selection, from: u64) -> Result<WatchStream> {
        let action = format!("watch {}", selection.describe(kind));
        let mut query = selection.query();
        query.extend([("watch", "true".to_string()), ("resource_version", from.to_string())]);
        let path = paths::collection(kind, selection.namespace.as_deref());
        let builder = self.request(Method::GET, &path).query(&query).header(ACCEPT, "text/event-stream");
        let (server, response) = self.send(&action, builder).await?;
        let content_type = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        if !content_type.starts_with("text/event-stream") {
            let message = format!("a watch answered {content_type:?} instead of text/event-stream");
            return Err(Error::Decode { action, message });
        }
        let client = self.clone();
        let bytes = response.bytes_stream().map(move |chunk| chunk.map_err(|e| client.transport_error(&server, &action, &e)));
        Ok(watch_events(bytes, kind, format!("watch {}", selection.describe(kind))).boxed())
    }
}

/// An answer: its head, for a stream, or the whole of it.
enum Answer {
    Head(Response),
    Whole(Bytes),
}

fn http_client(base: &str, transport: &Transport) -> Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT).pool_max_idle_per_host(transport.max_idle);
    if let Some(authority) = &transport.authority {
        builder = builder.tls_certs_only(authority.iter().cloned());
    }
    let built = builder.build();
    built.map_err(|e| Error::Unreachable {
        server: base.to_string(),
        action: "set up the HTTP client".into(),
        cause: error::error_chain(&e),
    })
}

/// Decodes an SSE byte stream into watch events; an event that cannot be read becomes
/// [`Error::Decode`].
fn watch_events(
    bytes: impl Stream<Item = Result<Bytes>> + Send + 'static,
    kind: Kind,
    action: String,
) -> impl Stream<Item = Result<WatchEvent>> + Send + 'static {
    let mut parser = shared::sse::Parser::new();
    bytes
        .map(move |chunk| {
            let messages = match chunk {
                Ok(chunk) => parser.feed(&chunk),
                Err(e) => return vec![Err(e)],
            };
            messages
                .iter()
                .map(|message| {
                    shared::watch::decode(message, kind).map_err(|e| Error::Decode { action: action.clone(), message: e.to_string() })
                })
                .collect()
        })
        .flat_map(futures::stream::iter)
}

/// Turns an error answer, as `shared::api_error` reads it, into an [`Error`]. A body with
/// nothing to say is named by its status's reason phrase.
fn error_answer(action: &str, code: u16, body: &str) -> Error {
    match ErrorAnswer::read(code, body) {
        ErrorAnswer::Api(status) => Error::Api { action: action.to_string(), status },
        ErrorAnswer::Other { code, body } => {
            let body = if body.is_empty() {
                reqwest::StatusCode::from_u16(code).ok().and_then(|s| s.canonical_reason()).unwrap_or("no body").to_string()
            } else {
                body
            };
            Error::Http { action: action.to_string(), code, body }
        }
    }
}

/// Builds a typed object, filling in `kind` when the server left it out.
pub fn object_from_value(kind: Kind, mut value: serde_json::Value) -> std::result::Result<Object, String> {
    if let Some(map) = value.as_object_mut() {
        let missing = map.get("kind").and_then(|k| k.as_str()).is_none_or(str::is_empty);
        if missing {
            map.insert("kind".to_string(), serde_json::Value::String(kind.as_str().to_string()));
        }
    }
    Object::from_value(value).map_err(|e| e.to_string())
}

fn typed<R: Resource>(object: Object, action: &str) -> Result<R> {
    let found = object.kind();
    R::try_from_object(object)
        .ok_or_else(|| Error::Decode { action: action.to_string(), message: format!("expected a {}, got a {found}", R::KIND) })
}

#[cfg(test)]
mod tests {
    use futures::stream;
    use shared::api::WatchEventType;

    use super::*;

    #[tokio::test]
    async fn watch_events_survive_any_chunking_and_a_bad_event_is_a_decode_error() {
        let text = ": hello\nid: 3\nevent: watch\ndata: {\"type\":\"BOOKMARK\",\"resource_version\":3}\n\n\
                    event: watch\r\ndata: {\"type\":\"DELETED\",\"resource_version\":4,\r\ndata: \"object\":{\"metadata\":{\"name\":\"n1\"}}}\r\n\r\n\
                    event: watch\ndata: {\"type\":\"EXPLODED\"}\n\n";
        for split in 1..text.len() {
            let chunks = vec![Ok(Bytes::copy_from_slice(&text.as_bytes()[..split])), Ok(Bytes::copy_from_slice(&text.as_bytes()[split..]))];
            let items: Vec<Result<WatchEvent>> = watch_events(stream::iter(chunks), Kind::Node, "watch nodes".into()).collect().await;
            assert_eq!(items.len(), 3, "split at {split}");
            assert_eq!(items[0].as_ref().unwrap().type_, WatchEventType::Bookmark);
            let deleted = items[1].as_ref().unwrap();
            assert_eq!(deleted.object.as_ref().unwrap().kind(), Kind::Node, "the stream's kind fills in");
            assert!(matches!(items[2], Err(Error::Decode { .. })), "split at {split}: {:?}", items[2]);
        }
    }

    #[test]
    fn error_answers_keep_the_api_shape_or_the_first_line() {
        let json = r#"{"error":{"code":404,"reason":"NotFound","message":"Pod \"ghost\" not found"}}"#;
        let error = error_answer("get pod default/ghost", 404, json);
        assert!(error.is_not_found());
        assert_eq!(error.to_string(), "Pod \"ghost\" not found");
        let error = error_answer("list pods", 502, "Bad Gateway\n<html>");
        assert_eq!(error.to_string(), "cannot list pods: the server answered 502: Bad Gateway");
        let error = error_answer("list pods", 404, "<!DOCTYPE html>\n<html>");
        assert_eq!(error.to_string(), "cannot list pods: the server answered 404: not the Shepherd API");
        assert_eq!(error_answer("list pods", 503, "").to_string(), "cannot list pods: the server answered 503: Service Unavailable");
    }

    #[tokio::test]
    async fn an_unreachable_server_names_itself_the_action_and_the_cause() {
        // Port 1 on loopback refuses at once.
        let client = Client::new("http://127.0.0.1:1", None).unwrap();
        let error = client.list::<Pod>(&Selection::on_node("node-a")).await.unwrap_err();
        let text = error.to_string();
        assert!(error.is_unreachable(), "{text}");
        assert!(text.contains("http://127.0.0.1:1") && text.contains("node-a"), "{text}");
        assert!(text.to_lowercase().contains("refused"), "the cause is named: {text}");
    }

    fn a_pod() -> Object {
        Object::Pod(Pod { kind: "Pod".into(), metadata: shared::model::ObjectMeta::named("default", "web"), ..Pod::default() })
    }

    const EMPTY_LIST: &str = r#"{"kind":"PodList","resource_version":5,"items":[]}"#;

    /// The failover rule of `servers`: a write that reached a server (which then hung up, or
    /// answered 503) is not sent to the next one, a read is.
    #[tokio::test]
    async fn a_write_that_reached_a_server_is_not_sent_again_but_a_read_is() {
        let listed = crate::watcher::tests::json_answer("200 OK", EMPTY_LIST);
        let unavailable = crate::watcher::tests::json_answer(
            "503 Service Unavailable",
            r#"{"error":{"code":503,"reason":"ServiceUnavailable","message":"the server is shutting down"}}"#,
        );
        for first in [String::new(), unavailable] {
            let (first, first_seen) = crate::watcher::tests::fake_server(vec![first]).await;
            let (next, next_seen) = crate::watcher::tests::fake_server(vec![listed.clone()]).await;
            let client = Client::new(&format!("{first},{next}"), None).unwrap();
            let error = client.create_object(&a_pod()).await.unwrap_err();
            assert!(error.is_transient(), "{error}");
            assert_eq!(first_seen.lock().unwrap().len(), 1);
            assert!(next_seen.lock().unwrap().is_empty(), "the write was not sent again");
            client.list_objects(Kind::Pod, &Selection::default()).await.expect("the read moves on");
            assert_eq!(next_seen.lock().unwrap().len(), 1);
            assert_eq!(client.base(), next);
        }
    }

    #[tokio::test]
    async fn an_answer_other_than_503_is_the_clusters_and_does_not_move_on() {
        let broken = crate::watcher::tests::json_answer(
            "500 Internal Server Error",
            r#"{"error":{"code":500,"reason":"InternalError","message":"boom"}}"#,
        );
        let (first, _) = crate::watcher::tests::fake_server(vec![broken]).await;
        let (next, next_seen) = crate::watcher::tests::fake_server(vec![crate::watcher::tests::json_answer("200 OK", EMPTY_LIST)]).await;
        let client = Client::new(&format!("{first},{next}"), None).unwrap();
        let error = client.list_objects(Kind::Pod, &Selection::default()).await.unwrap_err();
        assert_eq!(error.status(), Some(500), "{error}");
        assert!(next_seen.lock().unwrap().is_empty());
    }

    #[test]
    fn selections_read_as_words_and_queries() {
        let selection = Selection { label_selector: Some("app=web".into()), ..Selection::namespace(Some("default")) };
        assert_eq!(selection.describe(Kind::Pod), "pods in namespace default matching app=web");
        assert_eq!(selection.query(), vec![("label_selector", "app=web".to_string())]);
        assert_eq!(Selection::on_node("n1").describe(Kind::Pod), "pods matching spec.node_name=n1");
        assert_eq!(object_words(Kind::Node, "", "n1"), "node n1");
    }
}
