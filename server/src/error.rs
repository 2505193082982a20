//! The one error every handler returns, rendered as `api::ApiErrorBody` JSON: 4xx say what
//! the client did wrong; 5xx log the detail and send a short message.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use shared::api::{ApiErrorBody, ApiErrorStatus, FieldError};

use crate::store::StoreError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status}: {message}")]
pub struct ApiError {
    pub status: StatusCode,
    pub reason: &'static str,
    /// What the client reads.
    pub message: String,
    pub details: Vec<FieldError>,
    /// For the server's log only: what failed inside (a path, a database error), which the
    /// client must not read.
    pub cause: Option<String>,
}

/// The message of a 500: the cause goes to the log.
const INTERNAL_MESSAGE: &str = "the server failed to handle this request; its log says why";

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(status: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, reason, message: message.into(), details: Vec::new(), cause: None }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "NotFound", message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::CONFLICT, "Conflict", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, "Forbidden", message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, "Unauthorized", message)
    }

    /// A 500: `cause` is logged, the client reads only that the server failed.
    pub fn internal(cause: impl Into<String>) -> Self {
        ApiError { cause: Some(cause.into()), ..ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", INTERNAL_MESSAGE) }
    }

    /// A 502: `message` says which upstream failed, `cause` (logged) how.
    pub fn bad_gateway(message: impl Into<String>, cause: impl Into<String>) -> Self {
        ApiError { cause: Some(cause.into()), ..ApiError::new(StatusCode::BAD_GATEWAY, "BadGateway", message) }
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", message)
    }

    /// 413: a body over `limit` bytes ([`crate::config::BODY_LIMIT`]), in the server's words
    /// whichever layer found it.
    pub fn too_large(limit: usize) -> Self {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "PayloadTooLarge",
            format!("the request body is larger than this server's limit of {limit} bytes ({} MiB)", limit >> 20),
        )
    }

    /// 422 with every field error.
    pub fn invalid(what: &str, details: Vec<FieldError>) -> Self {
        let summary: Vec<String> = details.iter().map(ToString::to_string).collect();
        ApiError {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            reason: "Invalid",
            message: format!("{what} is invalid: {}", summary.join("; ")),
            details,
            cause: None,
        }
    }

    /// The error for any status a layer below the handlers produced (404 route, 405, …).
    pub fn from_status(status: StatusCode, text: &str) -> Self {
        let reason = match status {
            StatusCode::BAD_REQUEST => "BadRequest",
            StatusCode::UNAUTHORIZED => "Unauthorized",
            StatusCode::FORBIDDEN => "Forbidden",
            StatusCode::NOT_FOUND => "NotFound",
            StatusCode::METHOD_NOT_ALLOWED => "MethodNotAllowed",
            StatusCode::CONFLICT => "Conflict",
            StatusCode::GONE => "Gone",
            StatusCode::PAYLOAD_TOO_LARGE => "PayloadTooLarge",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "UnsupportedMediaType",
            StatusCode::UNPROCESSABLE_ENTITY => "Invalid",
            StatusCode::REQUEST_TIMEOUT => "Timeout",
            StatusCode::SERVICE_UNAVAILABLE => "ServiceUnavailable",
            s if s.is_server_error() => "InternalError",
            _ => "BadRequest",
        };
        let canonical = status.canonical_reason().unwrap_or("error");
        if status.is_server_error() {
            let message = format!("{canonical}: the server's log says why");
            return ApiError { cause: Some(text.trim().to_string()), ..ApiError::new(status, reason, message) };
        }
        let message = if text.trim().is_empty() { canonical.to_string() } else { text.trim().to_string() };
        ApiError::new(status, reason, message)
    }

    pub fn body(&self) -> ApiErrorBody {
        ApiErrorBody {
            error: ApiErrorStatus {
                code: self.status.as_u16(),
                reason: self.reason.to_string(),
                message: self.message.clone(),
                details: self.details.clone(),
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            match &self.cause {
                Some(cause) => tracing::error!(status = self.status.as_u16(), "{}: {cause}", self.message),
                None => tracing::error!(status = self.status.as_u16(), "{}", self.message),
            }
        }
        (self.status, Json(self.body())).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let message = e.to_string();
        match e {
            StoreError::NotFound { .. } => ApiError::not_found(message),
            StoreError::AlreadyExists { .. } => ApiError::new(StatusCode::CONFLICT, "AlreadyExists", message),
            StoreError::Conflict(_) => ApiError::conflict(message),
            StoreError::Invalid { message, details } => {
                ApiError { status: StatusCode::UNPROCESSABLE_ENTITY, reason: "Invalid", message, details, cause: None }
            }
            // A watch the client must restart from a fresh list (a revision from before a
            // restart of an in-memory server is newer than the store).
            StoreError::Gone { .. } | StoreError::Future { .. } => ApiError::new(StatusCode::GONE, "Gone", message),
            StoreError::Backend(_) | StoreError::Unusable(_) => ApiError::internal(message),
            // Names the object and why, with no path: kube-apiserver's 500 says it failed to decrypt.
            StoreError::Unreadable { .. } => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", message),
            StoreError::Unavailable(_) => ApiError::unavailable(message),
            StoreError::Closed => ApiError::unavailable("the server is shutting down; retry against the restarted server"),
        }
    }
}

impl From<crate::paging::Error> for ApiError {
    fn from(e: crate::paging::Error) -> Self {
        use crate::paging::Error;
        match e {
            Error::Malformed { .. } => ApiError::bad_request(e.to_string()),
            // Kubernetes puts the token in the Status' metadata; this shape has only the message.
            Error::Expired { ref inconsistent } => {
                ApiError::new(StatusCode::GONE, "Expired", format!("{e} The token to go on with: {inconsistent}"))
            }
            Error::Store(e) => ApiError::from(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_of(error: ApiError) -> String {
        let response = error.into_response();
        String::from_utf8(axum::body::to_bytes(response.into_body(), 4096).await.unwrap().to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_5xx_body_carries_no_internals() {
        let cause = "cannot write /home/alice/.local/share/shepherd/shepherd.db: disk I/O error";
        for error in [
            ApiError::from(StoreError::Backend(cause.into())),
            ApiError::internal(cause),
            ApiError::bad_gateway("cannot reach the agent of node n1", cause),
            ApiError::from_status(StatusCode::INTERNAL_SERVER_ERROR, cause),
        ] {
            let body = body_of(error).await;
            assert!(!body.contains("shepherd.db") && !body.contains("disk"), "{body}");
            assert!(body.contains("\"code\":5"), "{body}");
        }
        assert!(body_of(ApiError::unavailable("the server is shutting down")).await.contains("shutting down"), "a 503 says why");
    }
}
