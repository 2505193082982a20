//! Kubernetes' `Status`, the one shape every failure under `/k8s` answers in, and how the
//! native errors, the store's and [`convert`](super::convert)'s refusals become one.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use shared::api::FieldError;

use super::convert;
use crate::error::ApiError;

/// A failure as Kubernetes' `Status`: `reason`, `code`, `details` with the object's kind,
/// name and one cause per field. Boxed: every handler's `Result` carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status(Box<Failure>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: StatusCode,
    pub reason: String,
    pub message: String,
    pub kind: Option<String>,
    pub name: Option<String>,
    pub causes: Vec<(FieldError, &'static str)>,
    /// The token an expired list's answer offers to go on from the current state.
    pub continue_: Option<String>,
    /// When to try again: `details.retryAfterSeconds` and the `Retry-After` header.
    pub retry_after_seconds: Option<i32>,
}

pub type Result<T, E = Status> = std::result::Result<T, E>;

impl std::ops::Deref for Status {
    type Target = Failure;

    fn deref(&self) -> &Failure {
        &self.0
    }
}

impl std::ops::DerefMut for Status {
    fn deref_mut(&mut self) -> &mut Failure {
        &mut self.0
    }
}

impl Status {
    pub fn new(code: StatusCode, reason: &str, message: impl Into<String>) -> Self {
        Status(Box::new(Failure {
            code,
            reason: reason.into(),
            message: message.into(),
            kind: None,
            name: None,
            causes: Vec::new(),
            continue_: None,
            retry_after_seconds: None,
        }))
    }

    pub(super) fn with_causes(mut self, causes: Vec<(FieldError, &'static str)>) -> Self {
        self.causes = causes;
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Status::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    pub fn not_found(kind: &str, name: &str, message: impl Into<String>) -> Self {
        Status::new(StatusCode::NOT_FOUND, "NotFound", message).about(kind, name)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Status::new(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", message)
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Status::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "UnsupportedMediaType", message)
    }

    /// Names the object in `details`, in the lower-case plural Kubernetes puts there.
    pub fn about(mut self, kind: &str, name: &str) -> Self {
        self.kind = Some(kind.to_string());
        self.name = (!name.is_empty()).then(|| name.to_string());
        self
    }

    pub fn body(&self) -> meta::Status {
        let causes: Vec<meta::StatusCause> = self
            .causes
            .iter()
            .map(|(f, reason)| meta::StatusCause {
                field: (!f.field.is_empty()).then(|| f.field.clone()),
                message: Some(f.message.clone()),
                reason: Some((*reason).to_string()),
            })
            .collect();
        let details = (self.kind.is_some() || self.name.is_some() || !causes.is_empty() || self.retry_after_seconds.is_some()).then(|| {
            meta::StatusDetails {
                kind: self.kind.clone(),
                name: self.name.clone(),
                causes: (!causes.is_empty()).then_some(causes),
                retry_after_seconds: self.retry_after_seconds,
                ..Default::default()
            }
        });
        meta::Status {
            status: Some("Failure".into()),
            code: Some(i32::from(self.code.as_u16())),
            reason: Some(self.reason.clone()),
            message: Some(self.message.clone()),
            details,
            metadata: meta::ListMeta { continue_: self.continue_.clone(), ..Default::default() },
        }
    }
}

impl From<ApiError> for Status {
    fn from(e: ApiError) -> Self {
        // The native error's message never holds internals; its cause goes to the log only.
        if e.status.is_server_error() {
            tracing::error!(status = e.status.as_u16(), cause = e.cause.as_deref().unwrap_or_default(), "{}", e.message);
        }
        let causes = e.details.iter().map(|f| (f.clone(), "FieldValueInvalid")).collect();
        Status::new(e.status, kubernetes_reason(e.status, e.reason), e.message).with_causes(causes)
    }
}

/// The native reason as Kubernetes names it where the words differ (413).
pub(super) fn kubernetes_reason(code: StatusCode, native: &str) -> &str {
    match code {
        StatusCode::PAYLOAD_TOO_LARGE => "RequestEntityTooLarge",
        _ => native,
    }
}

/// How long a client is told to wait before it asks again for a resourceVersion the store
/// has not reached: kube-apiserver's watch cache says 1 s.
const TOO_LARGE_RETRY_SECONDS: i32 = 1;

impl From<crate::store::StoreError> for Status {
    /// A resourceVersion outside the history in kube-apiserver's words: too old is `Expired`
    /// (client-go and kubectl list again), too large (the store did not reach it in time) is
    /// storage's `NewTooLargeResourceVersionError`, a 504 `Timeout` to retry after a second.
    fn from(e: crate::store::StoreError) -> Self {
        use crate::store::StoreError;
        match e {
            StoreError::Gone { requested, oldest } => {
                Status::new(StatusCode::GONE, "Expired", format!("too old resource version: {requested} ({oldest})"))
            }
            StoreError::Future { requested, current } => {
                let mut status = Status::new(
                    StatusCode::GATEWAY_TIMEOUT,
                    "Timeout",
                    format!("Timeout: Too large resource version: {requested}, current: {current}"),
                );
                status.retry_after_seconds = Some(TOO_LARGE_RETRY_SECONDS);
                let cause = FieldError::new(String::new(), "Too large resource version");
                status.with_causes(vec![(cause, "ResourceVersionTooLarge")])
            }
            other => Status::from(ApiError::from(other)),
        }
    }
}

impl From<crate::paging::Error> for Status {
    fn from(e: crate::paging::Error) -> Self {
        use crate::paging::Error;
        match e {
            Error::Malformed { .. } => Status::bad_request(e.to_string()),
            Error::Expired { ref inconsistent } => {
                let mut status = Status::new(StatusCode::GONE, "Expired", e.to_string());
                status.continue_ = Some(inconsistent.clone());
                status
            }
            Error::Store(e) => Status::from(e),
        }
    }
}

impl From<convert::Error> for Status {
    fn from(e: convert::Error) -> Self {
        let message = e.to_string();
        match e {
            convert::Error::Malformed { kind, .. } => Status::bad_request(message).about(kind, ""),
            convert::Error::Refused { kind, name, causes } => Status::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", message)
                .about(kind, &name)
                .with_causes(causes.into_iter().map(|c| (FieldError::new(c.field.clone(), c.words()), c.reason())).collect()),
        }
    }
}

impl IntoResponse for Status {
    fn into_response(self) -> Response {
        let mut response = (self.code, axum::Json(self.body())).into_response();
        if let Some(seconds) = self.retry_after_seconds {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, seconds.into());
        }
        response
    }
}
