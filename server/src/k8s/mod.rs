//! The Kubernetes-compatible API under `/k8s`, so that kubectl and client libraries drive
//! Shepherd: discovery and OpenAPI ([`discovery`]), Kubernetes' shapes ([`convert`]), the
//! objects' routes ([`objects`]), Table answers ([`table`]), watch lines ([`watch`]),
//! patches ([`patch`]) and the protobuf bodies kubectl's typed commands send ([`protobuf`]). It is a translation in front of the native API's own reads and
//! writes (`api::objects`, `ops`): the same store objects, validation and rules.

mod convert;
pub mod discovery;
mod objects;
mod patch;
mod protobuf;
mod table;
mod watch;

pub use watch::WATCH_CONTENT_TYPE;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use shared::api::{ApiErrorBody, FieldError};

use crate::api::AppState;
use crate::error::ApiError;

/// The prefix every route of this API lives under; kubectl takes it as part of the server URL.
pub const PREFIX: &str = "/k8s";

/// Whether a request path belongs to this API.
pub fn owns(path: &str) -> bool {
    path == PREFIX || path.starts_with("/k8s/")
}

pub fn router() -> Router<AppState> {
    Router::new().merge(discovery::router()).merge(objects::router())
}

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
        Status(Box::new(Failure { code, reason: reason.into(), message: message.into(), kind: None, name: None, causes: Vec::new() }))
    }

    fn with_causes(mut self, causes: Vec<(FieldError, &'static str)>) -> Self {
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
                field: Some(f.field.clone()),
                message: Some(f.message.clone()),
                reason: Some((*reason).to_string()),
            })
            .collect();
        let details = (self.kind.is_some() || self.name.is_some() || !causes.is_empty()).then(|| meta::StatusDetails {
            kind: self.kind.clone(),
            name: self.name.clone(),
            causes: (!causes.is_empty()).then_some(causes),
            ..Default::default()
        });
        meta::Status {
            status: Some("Failure".into()),
            code: Some(i32::from(self.code.as_u16())),
            reason: Some(self.reason.clone()),
            message: Some(self.message.clone()),
            details,
            metadata: Default::default(),
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
fn kubernetes_reason(code: StatusCode, native: &str) -> &str {
    match code {
        StatusCode::PAYLOAD_TOO_LARGE => "RequestEntityTooLarge",
        _ => native,
    }
}

impl From<crate::store::StoreError> for Status {
    /// A watch from outside the history in kube-apiserver's words: client-go and kubectl
    /// know its `Expired` and list again.
    fn from(e: crate::store::StoreError) -> Self {
        use crate::store::StoreError;
        match e {
            StoreError::Gone { requested, oldest } => {
                Status::new(StatusCode::GONE, "Expired", format!("too old resource version: {requested} ({oldest})"))
            }
            StoreError::Future { requested, current } => Status::new(
                StatusCode::GONE,
                "Expired",
                format!("too large resource version: {requested}, current: {current}; watch from the resourceVersion of a list"),
            ),
            other => Status::from(ApiError::from(other)),
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
                .with_causes(causes.into_iter().map(|c| (FieldError { message: c.words(), field: c.field.clone() }, c.reason())).collect()),
        }
    }
}

impl IntoResponse for Status {
    fn into_response(self) -> Response {
        (self.code, axum::Json(self.body())).into_response()
    }
}

/// Answers every failure under `/k8s` as a `Status`, also those the shared layers produce
/// in the native shape (401 and 403 from auth, the guard against web pages, 404 for no
/// route, 405, 413): kubectl reads only `Status`.
pub async fn statuses(request: Request, next: Next) -> Response {
    if !owns(request.uri().path()) {
        return next.run(request).await;
    }
    let asked = format!("{} {}", request.method(), request.uri().path());
    let response = next.run(request).await;
    let code = response.status();
    if !(code.is_client_error() || code.is_server_error()) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 1024 * 1024).await.unwrap_or_default();
    if let Ok(native) = serde_json::from_slice::<ApiErrorBody>(&bytes) {
        let e = native.error;
        let causes = e.details.into_iter().map(|f| (f, "FieldValueInvalid")).collect();
        let mut status = Status::new(code, kubernetes_reason(code, &e.reason), e.message).with_causes(causes);
        if code == StatusCode::NOT_FOUND && status.message.starts_with("no route for") {
            status.message =
                format!("the server could not find the requested resource ({asked}); /k8s/api and /k8s/apis list what it serves");
        }
        let mut rebuilt = status.into_response();
        if let Some(allow) = parts.headers.get(header::ALLOW) {
            rebuilt.headers_mut().insert(header::ALLOW, allow.clone());
        }
        if let Some(challenge) = parts.headers.get(header::WWW_AUTHENTICATE) {
            rebuilt.headers_mut().insert(header::WWW_AUTHENTICATE, challenge.clone());
        }
        return rebuilt;
    }
    if serde_json::from_slice::<meta::Status>(&bytes).is_ok_and(|status| status.code.is_some()) {
        let mut response = Response::from_parts(parts, axum::body::Body::from(bytes));
        response.headers_mut().entry(header::CONTENT_TYPE).or_insert(HeaderValue::from_static("application/json"));
        return response;
    }
    // A layer's plain-text answer (the body limit's, a timeout's): the same words, as a Status.
    let text = String::from_utf8_lossy(&bytes).trim().to_string();
    let reason = match code {
        StatusCode::PAYLOAD_TOO_LARGE => "RequestEntityTooLarge",
        StatusCode::REQUEST_TIMEOUT | StatusCode::GATEWAY_TIMEOUT => "Timeout",
        c if c.is_server_error() => "InternalError",
        _ => "BadRequest",
    };
    let message = if code == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::too_large().message
    } else if text.is_empty() {
        code.canonical_reason().unwrap_or("failed").to_string()
    } else {
        text
    };
    Status::new(code, reason, message).into_response()
}
