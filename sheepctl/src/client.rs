//! The HTTP client for the Shepherd REST API: typed calls for every route `sheepctl` uses,
//! the watch stream as Server-Sent Events, and one error type whose messages say what went
//! wrong and what to do (server down, JSON error bodies with their field errors, timeouts).

use std::fmt;
use std::pin::Pin;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::{Stream, StreamExt};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use shared::api::{ApiErrorBody, ApiErrorStatus, List, WatchEvent, WatchEventType, paths};
use shared::model::{Kind, Object};

/// How long an ordinary call may take; watch and log streams have no such limit.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot reach the Shepherd API at {base}: is `shepherd` running? set --server or SHEPHERD_API")]
    Unreachable { base: String },
    #[error("{}", api_message(.0))]
    Api(ApiErrorStatus),
    #[error("the Shepherd API answered {status} for {method} {path}: {body}")]
    Http { method: Method, path: String, status: StatusCode, body: String },
    #[error("the Shepherd API sent an answer sheepctl cannot read for {path}: {message}")]
    Decode { path: String, message: String },
    #[error("{method} {path} got no answer within {}s: the server is busy or stuck; try again", .after.as_secs())]
    Timeout { method: Method, path: String, after: Duration },
    #[error("{method} {path} failed: {message}")]
    Transport { method: Method, path: String, message: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The HTTP status of an API error, if the server answered one.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api(status) => Some(status.code),
            Error::Http { status, .. } => Some(status.as_u16()),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    pub fn is_conflict(&self) -> bool {
        self.status() == Some(409)
    }

    /// A watch from a revision the server no longer keeps: list again.
    pub fn is_gone(&self) -> bool {
        self.status() == Some(410)
    }

    /// The server could not be reached at all, or the connection broke.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Error::Unreachable { .. } | Error::Transport { .. } | Error::Timeout { .. })
    }
}

/// The server's message, a hint for auth errors, and every field error on its own line.
fn api_message(status: &ApiErrorStatus) -> String {
    let mut text = if status.message.is_empty() {
        format!("the Shepherd API answered {} {}", status.code, status.reason)
    } else {
        status.message.clone()
    };
    // Servers often repeat the field errors in the message; they follow one per line.
    if let Some(first) = status.details.first()
        && let Some(at) = text.find(&format!("{}: {}", first.field, first.message))
        && at > 0
    {
        text.truncate(at);
        text.truncate(text.trim_end_matches([' ', ':', ';', ',']).len());
    }
    match status.code {
        401 => text.push_str(" (set --token or SHEPHERD_TOKEN)"),
        403 => text.push_str(" (this token is not allowed to do that)"),
        _ => {}
    }
    for detail in &status.details {
        text.push_str(&format!("\n  {}: {}", detail.field, detail.message));
    }
    text
}

/// A live watch: each item is one event, or the error that ended the stream.
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<WatchEvent>> + Send>>;

#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Client {
    /// `base` is `http://host:port` without a trailing slash (see `settings::base_url`).
    pub fn new(base: &str, token: Option<String>) -> Result<Client> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("sheepctl/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::Transport { method: Method::GET, path: base.to_string(), message: error_chain(&e) })?;
        Ok(Client { http, base: base.to_string(), token })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let builder = self.http.request(method, format!("{}{path}", self.base)).header(shared::api::CLIENT_HEADER, "sheepctl");
        match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    /// Sends a request and turns transport failures and error statuses into [`Error`].
    async fn send(&self, method: Method, path: &str, builder: RequestBuilder) -> Result<Response> {
        let response = builder.send().await.map_err(|e| self.transport_error(&method, path, e))?;
        if response.status().is_success() {
            return Ok(response);
        }
        Err(self.error_from(method, path, response).await)
    }

    fn transport_error(&self, method: &Method, path: &str, error: reqwest::Error) -> Error {
        if error.is_connect() {
            Error::Unreachable { base: self.base.clone() }
        } else if error.is_timeout() {
            Error::Timeout { method: method.clone(), path: path.to_string(), after: REQUEST_TIMEOUT }
        } else {
            Error::Transport { method: method.clone(), path: path.to_string(), message: error_chain(&error) }
        }
    }

    async fn error_from(&self, method: Method, path: &str, response: Response) -> Error {
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        match serde_json::from_str::<ApiErrorBody>(&body) {
            Ok(parsed) => {
                let mut error = parsed.error;
                if error.code == 0 {
                    error.code = status.as_u16();
                }
                Error::Api(error)
            }
            Err(_) => {
                let first_line = body.lines().next().unwrap_or("").trim();
                let body =
                    if first_line.is_empty() { status.canonical_reason().unwrap_or("no body").to_string() } else { first_line.to_string() };
                Error::Http { method, path: path.to_string(), status, body }
            }
        }
    }

    async fn decode<T: DeserializeOwned>(&self, path: &str, response: Response) -> Result<T> {
        let bytes = response.bytes().await.map_err(|e| Error::Transport {
            method: Method::GET,
            path: path.to_string(),
            message: error_chain(&e),
        })?;
        serde_json::from_slice(&bytes).map_err(|e| Error::Decode { path: path.to_string(), message: e.to_string() })
    }

    pub async fn get_json<T: DeserializeOwned>(&self, path: &str, query: &[(&str, String)]) -> Result<T> {
        let builder = self.request(Method::GET, path).query(query).timeout(REQUEST_TIMEOUT);
        let response = self.send(Method::GET, path, builder).await?;
        self.decode(path, response).await
    }

    /// Sends a JSON body and decodes the JSON answer.
    pub async fn send_json<B: Serialize + ?Sized, T: DeserializeOwned>(&self, method: Method, path: &str, body: &B) -> Result<T> {
        let builder = self.request(method.clone(), path).json(body).timeout(REQUEST_TIMEOUT);
        let response = self.send(method, path, builder).await?;
        self.decode(path, response).await
    }

    /// Deletes one object; the server answers with its last state (a pod bound to a Ready
    /// node: Terminating, until its agent confirms). `grace_period_seconds` overrides a pod's
    /// own grace period; 0 removes it at once.
    pub async fn delete(&self, kind: Kind, namespace: &str, name: &str, grace_period_seconds: Option<i64>) -> Result<()> {
        let path = paths::object(kind, namespace, name);
        let query: Vec<(&str, String)> = grace_period_seconds.map(|g| ("grace_period_seconds", g.to_string())).into_iter().collect();
        let builder = self.request(Method::DELETE, &path).query(&query).timeout(REQUEST_TIMEOUT);
        self.send(Method::DELETE, &path, builder).await.map(drop)
    }

    /// A call whose answer is ignored beyond its status (`cordon`, `uncordon`).
    pub async fn post_empty(&self, path: &str) -> Result<()> {
        let builder = self.request(Method::POST, path).timeout(REQUEST_TIMEOUT);
        self.send(Method::POST, path, builder).await.map(drop)
    }

    /// A plain-text answer, streamed: logs.
    pub async fn stream_text(&self, path: &str, query: &[(&str, String)], follow: bool) -> Result<Response> {
        let mut builder = self.request(Method::GET, path).query(query);
        if !follow {
            builder = builder.timeout(REQUEST_TIMEOUT);
        }
        self.send(Method::GET, path, builder).await
    }

    pub async fn get_object(&self, kind: Kind, namespace: &str, name: &str) -> Result<Object> {
        let path = paths::object(kind, namespace, name);
        let value: serde_json::Value = self.get_json(&path, &[]).await?;
        object_from_value(kind, value).map_err(|message| Error::Decode { path, message })
    }

    /// Lists a kind in one namespace, or in all when `namespace` is `None`.
    pub async fn list(&self, kind: Kind, namespace: Option<&str>, selector: Option<&str>) -> Result<List<Object>> {
        let path = paths::collection(kind, namespace);
        let mut query = Vec::new();
        if let Some(selector) = selector.filter(|s| !s.is_empty()) {
            query.push(("label_selector", selector.to_string()));
        }
        let list: List<serde_json::Value> = self.get_json(&path, &query).await?;
        let items = list
            .items
            .into_iter()
            .map(|item| object_from_value(kind, item))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|message| Error::Decode { path: path.clone(), message })?;
        Ok(List { kind: list.kind, resource_version: list.resource_version, items })
    }

    /// Opens a watch on a collection from revision `since`. A 410 answer (history gone)
    /// comes back as an error for which [`Error::is_gone`] holds.
    pub async fn watch(&self, kind: Kind, namespace: Option<&str>, selector: Option<&str>, since: u64) -> Result<WatchStream> {
        let path = paths::collection(kind, namespace);
        let mut query = vec![("watch", "true".to_string()), ("resource_version", since.to_string())];
        if let Some(selector) = selector.filter(|s| !s.is_empty()) {
            query.push(("label_selector", selector.to_string()));
        }
        let builder = self.request(Method::GET, &path).query(&query).header(reqwest::header::ACCEPT, "text/event-stream");
        let response = self.send(Method::GET, &path, builder).await?;
        let content_type = response.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        if !content_type.starts_with("text/event-stream") {
            return Err(Error::Decode { path, message: format!("a watch answered {content_type:?} instead of text/event-stream") });
        }
        let stream = response.bytes_stream().eventsource().map(move |item| match item {
            Ok(event) => parse_watch_event(kind, &event.data).map_err(|message| Error::Decode { path: path.clone(), message }),
            Err(e) => Err(Error::Transport { method: Method::GET, path: path.clone(), message: e.to_string() }),
        });
        Ok(Box::pin(stream))
    }
}

/// Reads one SSE `data:` payload as a watch event of `kind`.
pub fn parse_watch_event(kind: Kind, data: &str) -> std::result::Result<WatchEvent, String> {
    #[derive(serde::Deserialize)]
    struct Raw {
        #[serde(rename = "type")]
        type_: WatchEventType,
        #[serde(default)]
        resource_version: u64,
        #[serde(default)]
        object: Option<serde_json::Value>,
    }
    let raw: Raw = serde_json::from_str(data).map_err(|e| format!("bad watch event: {e}"))?;
    let object = match raw.object {
        Some(value) if !value.is_null() => Some(object_from_value(kind, value)?),
        _ => None,
    };
    Ok(WatchEvent { type_: raw.type_, resource_version: raw.resource_version, object })
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

/// reqwest's error and its causes, joined: the top message alone is often just "error
/// sending request".
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.base)
    }
}

#[cfg(test)]
mod tests {
    use shared::api::FieldError;

    use super::*;

    #[test]
    fn api_errors_list_each_field_on_its_own_line() {
        let error = Error::Api(ApiErrorStatus {
            code: 422,
            reason: "Invalid".into(),
            message: "Pod \"web\" is invalid".into(),
            details: vec![
                FieldError { field: "spec.containers[0].image".into(), message: "must not be empty".into() },
                FieldError { field: "metadata.name".into(), message: "must be a DNS label".into() },
            ],
        });
        assert_eq!(
            error.to_string(),
            "Pod \"web\" is invalid\n  spec.containers[0].image: must not be empty\n  metadata.name: must be a DNS label"
        );

        let repeated = Error::Api(ApiErrorStatus {
            code: 422,
            reason: "Invalid".into(),
            message: "Pod \"web\" is invalid: spec.replicas: must be 0 or more; metadata.name: bad".into(),
            details: vec![
                FieldError { field: "spec.replicas".into(), message: "must be 0 or more".into() },
                FieldError { field: "metadata.name".into(), message: "bad".into() },
            ],
        });
        assert_eq!(repeated.to_string(), "Pod \"web\" is invalid\n  spec.replicas: must be 0 or more\n  metadata.name: bad");
    }

    #[test]
    fn auth_errors_say_how_to_pass_a_token() {
        let error = Error::Api(ApiErrorStatus {
            code: 401,
            reason: "Unauthorized".into(),
            message: "a bearer token is required".into(),
            details: vec![],
        });
        assert_eq!(error.to_string(), "a bearer token is required (set --token or SHEPHERD_TOKEN)");
        let bare = Error::Api(ApiErrorStatus { code: 500, reason: "InternalError".into(), ..Default::default() });
        assert_eq!(bare.to_string(), "the Shepherd API answered 500 InternalError");
    }

    #[test]
    fn unreachable_names_the_address_and_the_fix() {
        let error = Error::Unreachable { base: "http://127.0.0.1:9".into() };
        assert_eq!(
            error.to_string(),
            "cannot reach the Shepherd API at http://127.0.0.1:9: is `shepherd` running? set --server or SHEPHERD_API"
        );
        assert!(error.is_unreachable());
    }

    #[test]
    fn objects_without_kind_get_the_listed_kind() {
        let object = object_from_value(Kind::Pod, serde_json::json!({"metadata": {"name": "a"}})).unwrap();
        assert_eq!(object.kind(), Kind::Pod);
        assert_eq!(object.metadata().name, "a");
        let event =
            parse_watch_event(Kind::Node, r#"{"type":"DELETED","resource_version":9,"object":{"metadata":{"name":"n1"}}}"#).unwrap();
        assert_eq!(event.type_, WatchEventType::Deleted);
        assert_eq!(event.object.unwrap().kind(), Kind::Node);
        let bookmark = parse_watch_event(Kind::Pod, r#"{"type":"BOOKMARK","resource_version":12}"#).unwrap();
        assert!(bookmark.object.is_none());
        assert!(parse_watch_event(Kind::Pod, "not json").is_err());
    }
}
