//! The one error of every call: what was being done, on which object, and why it failed.
//! Error answers are read and classified by `shared::api_error`, as the dashboard reads them;
//! this file adds the transport's own failures and the words a terminal user needs.

use std::time::Duration;

use shared::api::ApiErrorStatus;
use shared::api_error::{Class, headline};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Nothing answered at the server's address, or the connection broke.
    #[error("cannot reach the Shepherd API at {server}: is `shepherd` running? set --server or SHEPHERD_API ({action}: {cause})")]
    Unreachable { server: String, action: String, cause: String },
    /// The server's certificate is not signed by an authority this client trusts.
    #[error(
        "cannot {action}: the server at {server} has a certificate this client does not trust: name its certificate \
         authority with --certificate-authority or SHEPHERD_CA (a server started with --tls-self-signed keeps it in its \
         data directory, tls/ca.crt) ({cause})"
    )]
    Untrusted { server: String, action: String, cause: String },
    /// A server URL that is not `http://host:port` or `https://host:port`.
    #[error("cannot use the server URL {url:?}: {cause}; give http://host:port, or several separated by commas")]
    ServerUrl { url: String, cause: String },
    /// The certificate authority to trust is not a PEM certificate.
    #[error("cannot trust the certificate authority: {0}")]
    Authority(String),
    /// The token holds bytes an HTTP header cannot carry (a pasted line break, say).
    #[error("the token cannot be sent: an HTTP header cannot carry it (a line break or a control character?)")]
    Token,
    #[error("cannot {action}: no answer within {}s: the server is busy or stuck; try again", .after.as_secs())]
    Timeout { action: String, after: Duration },
    /// A watch stream ended or went silent.
    #[error("cannot {action}: the stream broke: {cause}")]
    Broken { action: String, cause: String },
    /// The server's JSON error; its message names the object and the cause.
    #[error("{}", api_message(.status))]
    Api { action: String, status: ApiErrorStatus },
    /// An error answer not in the API's shape (a proxy, another server on that port).
    #[error("cannot {action}: the server answered {code}: {body}")]
    Http { action: String, code: u16, body: String },
    #[error("cannot {action}: the answer cannot be read: {message}")]
    Decode { action: String, message: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The HTTP status of an error the server answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } => Some(status.code),
            Error::Http { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// What the status of an error the server answered tells the caller to do.
    pub fn class(&self) -> Option<Class> {
        self.status().map(Class::of)
    }

    pub fn is_not_found(&self) -> bool {
        self.class() == Some(Class::NotFound)
    }

    pub fn is_conflict(&self) -> bool {
        self.class() == Some(Class::Conflict)
    }

    /// A watch from a revision the server no longer keeps: list again.
    pub fn is_gone(&self) -> bool {
        self.class() == Some(Class::Gone)
    }

    /// The server could not be reached at all, did not answer in time, or left a stream.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Error::Unreachable { .. } | Error::Timeout { .. } | Error::Broken { .. })
    }

    /// Worth trying again as it is: the server is away, overloaded or failing for now.
    pub fn is_transient(&self) -> bool {
        self.is_unreachable() || self.class() == Some(Class::Transient)
    }
}

/// The server's message, a hint for auth errors, and every field error on its own line.
fn api_message(status: &ApiErrorStatus) -> String {
    let mut text = headline(status);
    match Class::of(status.code) {
        Class::Unauthorized => text.push_str(" (set --token or SHEPHERD_TOKEN)"),
        Class::Forbidden => text.push_str(" (this token is not allowed to do that)"),
        _ => {}
    }
    for detail in &status.details {
        text.push_str(&format!("\n  {}: {}", detail.field, detail.message));
    }
    text
}

/// An error with its causes: reqwest's own message alone hides "connection refused".
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use shared::api::FieldError;

    use super::*;

    fn api(status: ApiErrorStatus) -> Error {
        Error::Api { action: "apply pod/web".into(), status }
    }

    /// A 422 with `message` and these field errors.
    fn invalid(message: &str, fields: &[(&str, &str)]) -> Error {
        let details = fields.iter().map(|(field, message)| FieldError::new(field.to_string(), message.to_string())).collect();
        api(ApiErrorStatus { code: 422, reason: "Invalid".into(), message: message.into(), details })
    }

    #[test]
    fn api_errors_list_each_field_on_its_own_line() {
        let error = invalid(
            "Pod \"web\" is invalid",
            &[("spec.containers[0].image", "must not be empty"), ("metadata.name", "must be a DNS label")],
        );
        assert_eq!(
            error.to_string(),
            "Pod \"web\" is invalid\n  spec.containers[0].image: must not be empty\n  metadata.name: must be a DNS label"
        );
        let repeated = invalid(
            "Pod \"web\" is invalid: spec.replicas: must be 0 or more; metadata.name: bad",
            &[("spec.replicas", "must be 0 or more"), ("metadata.name", "bad")],
        );
        assert_eq!(repeated.to_string(), "Pod \"web\" is invalid\n  spec.replicas: must be 0 or more\n  metadata.name: bad");
    }

    #[test]
    fn auth_errors_say_what_to_do_and_codes_classify() {
        let unauthorized =
            api(ApiErrorStatus { code: 401, reason: "Unauthorized".into(), message: "a token is needed".into(), ..Default::default() });
        assert_eq!(unauthorized.to_string(), "a token is needed (set --token or SHEPHERD_TOKEN)");
        let forbidden = api(ApiErrorStatus { code: 403, reason: "Forbidden".into(), ..Default::default() });
        assert_eq!(forbidden.to_string(), "the Shepherd API answered 403 Forbidden (this token is not allowed to do that)");
        let gone = Error::Http { action: "watch pods".into(), code: 410, body: "Gone".into() };
        assert!(gone.is_gone() && !gone.is_transient());
        let busy = Error::Http { action: "list pods".into(), code: 503, body: "busy".into() };
        assert!(busy.is_transient() && !busy.is_unreachable());
        let away = Error::Unreachable { server: "http://127.0.0.1:1".into(), action: "list pods".into(), cause: "refused".into() };
        assert!(away.is_unreachable() && away.status().is_none());
    }
}
