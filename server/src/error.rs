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
    pub message: String,
    pub details: Vec<FieldError>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(status: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, reason, message: message.into(), details: Vec::new() }
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

    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", message)
    }

    /// 422 with every field error.
    pub fn invalid(what: &str, details: Vec<FieldError>) -> Self {
        let summary: Vec<String> = details.iter().map(ToString::to_string).collect();
        ApiError {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            reason: "Invalid",
            message: format!("{what} is invalid: {}", summary.join("; ")),
            details,
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
        let message =
            if text.trim().is_empty() { status.canonical_reason().unwrap_or("error").to_string() } else { text.trim().to_string() };
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
            tracing::error!("{}", self.message);
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
                ApiError { status: StatusCode::UNPROCESSABLE_ENTITY, reason: "Invalid", message, details }
            }
            StoreError::Gone { .. } => ApiError::new(StatusCode::GONE, "Gone", message),
            StoreError::Backend(_) => ApiError::internal(message),
            StoreError::Closed => ApiError::unavailable("the server is shutting down; retry against the restarted server"),
        }
    }
}
