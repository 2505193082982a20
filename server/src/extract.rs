//! What handlers of both API dialects read from a request: the body, whole and within
//! [`BODY_LIMIT`], in a media type no web page can send on its own, parsed strictly into its
//! type with the field, line and column of any error; and query parameters. YAML bodies (the
//! native API's create and replace) are read by `shared::manifest` and parsed as their JSON.
//! Every failure is an [`ApiError`] in the one JSON shape.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use shared::model::Kind;

use crate::config::BODY_LIMIT;
use crate::error::{ApiError, ApiResult};
use crate::resources::Resource;

/// The media type of every request body.
pub const JSON: &str = "application/json";
/// The media type of a YAML body, which the native API's create and replace also take.
pub const YAML: &str = "application/yaml";
/// Every media type a YAML body may come as (`application/x-yaml` is the older name).
pub const YAML_MEDIA_TYPES: [&str; 2] = [YAML, "application/x-yaml"];

/// `type/subtype` of a Content-Type, lower case, without parameters such as `charset`.
pub fn media_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?;
    let text = String::from_utf8_lossy(value.as_bytes());
    Some(text.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
}

/// The 415 for a body that is not JSON: a form or text body is what a web page could send.
pub fn unsupported_media_type(media: &str) -> ApiError {
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "UnsupportedMediaType",
        format!("send the body as JSON with Content-Type: {JSON} (got {media})"),
    )
}

/// A request body read whole, within [`BODY_LIMIT`], as JSON; too large is 413 in the JSON shape.
pub struct BodyBytes(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for BodyBytes {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let media = media_type(request.headers());
        let bytes = read_body(request, state).await?;
        // A form or text body is what a web page can post anywhere without asking.
        if !bytes.is_empty() && media.as_deref() != Some(JSON) {
            return Err(unsupported_media_type(media.as_deref().unwrap_or("no Content-Type")));
        }
        Ok(BodyBytes(bytes))
    }
}

/// The body of a create or replace: JSON, or YAML as kube-apiserver also takes it, handed on
/// as JSON so that both are parsed alike.
pub struct ObjectBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for ObjectBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !media_type(request.headers()).is_some_and(|media| YAML_MEDIA_TYPES.contains(&media.as_str())) {
            return BodyBytes::from_request(request, state).await.map(|BodyBytes(bytes)| ObjectBody(bytes));
        }
        let bytes = read_body(request, state).await?;
        yaml_as_json(&bytes).map(ObjectBody)
    }
}

async fn read_body<S: Send + Sync>(request: Request, state: &S) -> ApiResult<Bytes> {
    Bytes::from_request(request, state).await.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::too_large(BODY_LIMIT),
        _ => ApiError::bad_request(format!("cannot read the request body: {}", rejection.body_text())),
    })
}

/// The one object a YAML body holds, as JSON. `shared::manifest` reads it, so that a problem
/// is named with its line and column in the text the client sent. Aliases make a short text
/// stand for a long one: JSON over [`BODY_LIMIT`] is a 413, as the same JSON sent is.
fn yaml_as_json(bytes: &[u8]) -> ApiResult<Bytes> {
    let text = std::str::from_utf8(bytes).map_err(|e| ApiError::bad_request(format!("the YAML body is not UTF-8 text: {e}")))?;
    let objects = shared::manifest::parse(text).map_err(|e| match e.too_large {
        true => ApiError::too_large(BODY_LIMIT),
        false => ApiError::bad_request(format!("the body is not a valid YAML object: {e}")),
    })?;
    match objects.as_slice() {
        [object] => match serde_json::to_vec(object) {
            Ok(json) if json.len() > BODY_LIMIT => Err(ApiError::too_large(BODY_LIMIT)),
            Ok(json) => Ok(Bytes::from(json)),
            Err(e) => Err(ApiError::internal(format!("cannot encode the object of a YAML body as JSON: {e}"))),
        },
        more => Err(ApiError::bad_request(format!(
            "the body holds {} YAML documents; a create or replace takes one object, so send each in its own request",
            more.len()
        ))),
    }
}

/// Parses a JSON body into `T`, with the field's path, line and column on error, refusing
/// every field `T` does not hold (a typo, or a field at the wrong level, which would
/// otherwise be dropped without a word) as kube-apiserver's strict field validation does.
pub fn parse_json<T: DeserializeOwned + Serialize + PartialEq>(bytes: &[u8], what: &str) -> Result<T, ApiError> {
    let value = read_json(bytes, what)?;
    refuse_unknown_fields(bytes, value, what)
}

/// `typed`, read from `bytes`, unless `bytes` set fields `T` does not hold: a 400 naming each.
pub fn refuse_unknown_fields<T: DeserializeOwned + Serialize + PartialEq>(bytes: &[u8], typed: T, what: &str) -> Result<T, ApiError> {
    let sent: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| ApiError::bad_request(format!("the body is not JSON: {e}")))?;
    let unknown = shared::strict::unknown_fields(&sent, &typed);
    if unknown.is_empty() {
        return Ok(typed);
    }
    let mut error = ApiError::bad_request(format!("the body is not a valid {what}: {}", shared::strict::name_unknown(&unknown)));
    error.details = unknown
        .into_iter()
        .map(|field| shared::api::FieldError {
            field: field.path,
            message: format!("unknown field: a {what} has no such field (a typo, or at the wrong level?)"),
            ..Default::default()
        })
        .collect();
    Err(error)
}

/// Parses a JSON body into `T`, with the field's path, line and column on error; fields `T`
/// does not hold are ignored.
pub fn read_json<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, ApiError> {
    let mut body = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut body).map_err(|e| {
        let field = match e.path().to_string() {
            path if path == "." => String::new(),
            path => format!("{path}: "),
        };
        let e = e.into_inner();
        ApiError::bad_request(format!(
            "the body is not a valid {what}: {field}{} at line {}, column {}",
            shared::decode_error::without_values(&strip_position(&e)),
            e.line(),
            e.column()
        ))
    })?;
    // Anything after the one value (a second object, stray braces) makes the body invalid.
    body.end().map_err(|e| {
        ApiError::bad_request(format!("the body is not a valid {what}: {} at line {}, column {}", strip_position(&e), e.line(), e.column()))
    })?;
    Ok(value)
}

/// serde_json's message without its own trailing " at line L column C".
fn strip_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// Query parameters whose parse errors are 400s in the JSON shape. The parameter types
/// deny unknown fields, so a parameter a route does not take is refused by name, as serde
/// words it: ``labelSelector: unknown field `labelSelector`, expected one of `label_selector`, …``.
pub struct Params<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state).await.map(|Query(v)| Params(v)).map_err(|e| {
            let text = e.body_text();
            let said = text.strip_prefix("Failed to deserialize query string: ").unwrap_or(&text);
            ApiError::bad_request(format!("invalid query parameters: {said}"))
        })
    }
}

/// Parses a body meant for `R`: malformed JSON and a `kind` that is not `R`'s are 400s
/// (an unknown kind says so), an absent `kind` means `R`.
pub fn parse_object<R: Resource>(bytes: &[u8]) -> ApiResult<R> {
    #[derive(Deserialize)]
    struct Head {
        #[serde(default)]
        kind: serde_json::Value,
    }
    // The common case parses once; only a failure or a foreign kind looks at `kind` alone.
    if let Ok(object) = serde_json::from_slice::<R>(bytes)
        && (object.kind_field().is_empty() || object.kind_field() == R::KIND.as_str())
    {
        return refuse_unknown_fields(bytes, object, R::KIND.as_str());
    }
    let head: Head = read_json(bytes, R::KIND.as_str())?;
    match &head.kind {
        serde_json::Value::Null => {}
        serde_json::Value::String(k) if k.is_empty() || k == R::KIND.as_str() => {}
        serde_json::Value::String(k) => {
            return Err(match Kind::ALL.iter().find(|known| known.as_str() == k) {
                Some(other) => ApiError::bad_request(format!(
                    "the body is a {other} but this path takes a {}: send it to {}",
                    R::KIND,
                    shared::api::paths::collection(*other, None)
                )),
                None => ApiError::bad_request(format!(
                    "unknown kind {k:?}: Shepherd serves Pod, Deployment, ReplicaSet, Service, ConfigMap, Secret, Node, Event, Namespace and Lease"
                )),
            });
        }
        other => return Err(ApiError::bad_request(format!("\"kind\" must be a string such as {:?}, got {other}", R::KIND.as_str()))),
    }
    parse_json(bytes, R::KIND.as_str())
}

#[cfg(test)]
mod tests {
    use shared::model::Pod;

    use super::*;

    #[test]
    fn a_body_of_another_kind_or_an_unknown_kind_is_a_400() {
        let err = parse_object::<Pod>(br#"{"kind":"Deployment"}"#).unwrap_err();
        assert!(err.message.contains("this path takes a Pod"), "{}", err.message);
        let err = parse_object::<Pod>(br#"{"kind":"Sheep"}"#).unwrap_err();
        assert!(err.message.contains("unknown kind \"Sheep\""), "{}", err.message);
        let err = parse_object::<Pod>(b"{\n  \"kind\": \"Pod\",\n  \"metadata\": {\"name\": 3}\n}").unwrap_err();
        assert!(err.message.contains("line 3, column"), "{}", err.message);
        assert!(parse_object::<Pod>(br#"{"metadata":{"name":"a"}}"#).is_ok());
    }
}
