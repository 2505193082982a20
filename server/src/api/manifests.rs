//! `POST /api/v1/manifests/parse`: reads a manifest as users write it, JSON or YAML
//! (`Content-Type: application/yaml`), one document or several, with `shared::manifest`, and
//! answers its objects as JSON, or a 400 whose message starts with the problem's line and
//! column. A manifest written Kubernetes' way (`apiVersion`, camelCase) is read as `/k8s` reads
//! a body, into the objects a create there would store. Nothing is stored: the dashboard
//! checks YAML here, so its bundle holds no YAML reader, and `sheepctl apply` sends the
//! Kubernetes manifests it is given.
//! A text whose aliases copy too much, or whose answer would be over [`ANSWER_LIMIT`], is a 413.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::config::BODY_LIMIT;
use crate::error::{ApiError, ApiResult};
use crate::extract::{JSON, YAML_MEDIA_TYPES, media_type};
use crate::state::AppState;

/// The largest answer. A manifest written out in full answers about its own size; this
/// leaves room for defaulted fields and what aliases copy (at most `shared::yaml::ALIAS_BYTES`),
/// and refuses a flood of one-line documents each answered ten times over (`kind: Deployment`
/// is 242 bytes of JSON), which a body within [`BODY_LIMIT`] could otherwise turn into 36 MB.
pub const ANSWER_LIMIT: usize = 4 * BODY_LIMIT;

/// Answers `{"items": [object, …]}` in the order the documents come.
pub async fn parse(State(state): State<AppState>, request: Request) -> ApiResult<Response> {
    let media = media_type(request.headers());
    let json = match media.as_deref() {
        Some(JSON) => true,
        Some(media) if YAML_MEDIA_TYPES.contains(&media) => false,
        other => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "UnsupportedMediaType",
                format!("send the manifest with Content-Type: application/yaml or {} (got {})", JSON, other.unwrap_or("none")),
            ));
        }
    };
    let bytes = Bytes::from_request(request, &()).await.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::too_large(BODY_LIMIT),
        _ => ApiError::bad_request(format!("cannot read the request body: {}", rejection.body_text())),
    })?;
    let text = std::str::from_utf8(&bytes).map_err(|e| ApiError::bad_request(format!("the manifest is not UTF-8: {e}")))?;
    if json && !shared::manifest::is_json(text) {
        return Err(ApiError::bad_request(format!("the body is labelled {} but is not JSON: send YAML as application/yaml", JSON)));
    }
    let objects = match shared::manifest::kubernetes_documents(text) {
        Some(documents) => documents
            .iter()
            .enumerate()
            .map(|(i, document)| {
                (state.kubernetes_manifest)(document).map_err(|e| ApiError::bad_request(format!("document {}: {e}", i + 1)))
            })
            .collect::<ApiResult<Vec<_>>>()?,
        None => shared::manifest::parse(text).map_err(|e| match e.too_large {
            true => ApiError::too_large(BODY_LIMIT),
            false => ApiError::bad_request(e.to_string()),
        })?,
    };
    let answer = serde_json::to_vec(&json!({ "items": objects }))
        .map_err(|e| ApiError::internal(format!("cannot encode the manifest's objects as JSON: {e}")))?;
    if answer.len() > ANSWER_LIMIT {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "PayloadTooLarge",
            format!(
                "the manifest's objects come to {} bytes of JSON, over this server's limit of {ANSWER_LIMIT} for an answer: send fewer documents at a time",
                answer.len()
            ),
        ));
    }
    Ok(([(header::CONTENT_TYPE, JSON)], answer).into_response())
}
