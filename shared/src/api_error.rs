//! How every client reads an error answer of the API: the JSON error shape when it is one,
//! else the gist of whatever answered, and what the status tells the caller to do (log in,
//! list again, try again, give up). The client crate and the dashboard both read answers here;
//! each keeps only its transport's own failures.

use crate::api::{ApiErrorBody, ApiErrorStatus, FieldError};

/// The most of a non-API error body kept: enough for a proxy's one-line reason.
const GIST_CHARS: usize = 300;

/// An error answer of the server (a status outside 2xx).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorAnswer {
    /// The API's JSON error: `{"error": {"code", "reason", "message", "details"}}`.
    Api(ApiErrorStatus),
    /// Anything else at that address (a proxy, a static file server, another program): the
    /// status and the gist of its body, empty when it sent none.
    Other { code: u16, body: String },
}

impl ErrorAnswer {
    /// Reads the answer `body` sent with status `code`.
    pub fn read(code: u16, body: &str) -> ErrorAnswer {
        // Through `Value`, as every answer is read, so the dashboard's bundle holds one decoder.
        let parsed = serde_json::from_str::<serde_json::Value>(body).and_then(serde_json::from_value::<ApiErrorBody>);
        match parsed {
            Ok(parsed) => {
                let mut status = parsed.error;
                if status.code == 0 {
                    status.code = code;
                }
                ErrorAnswer::Api(status)
            }
            Err(_) => ErrorAnswer::Other { code, body: gist(body) },
        }
    }

    pub fn code(&self) -> u16 {
        match self {
            ErrorAnswer::Api(status) => status.code,
            ErrorAnswer::Other { code, .. } => *code,
        }
    }

    pub fn class(&self) -> Class {
        Class::of(self.code())
    }

    /// The per-field errors of a 422.
    pub fn details(&self) -> &[FieldError] {
        match self {
            ErrorAnswer::Api(status) => &status.details,
            ErrorAnswer::Other { .. } => &[],
        }
    }
}

/// The first line of a body that is not the API's, trimmed and cut to [`GIST_CHARS`]. An HTML
/// page says nothing useful in its first line, only that something else answered.
fn gist(body: &str) -> String {
    let body = body.trim_start();
    if body.starts_with('<') {
        return "not the Shepherd API".to_string();
    }
    body.lines().next().unwrap_or("").trim_end().chars().take(GIST_CHARS).collect()
}

/// The server's message in one line: without the field errors it repeats (callers list
/// [`ApiErrorStatus::details`] themselves), or the status when it said nothing.
pub fn headline(status: &ApiErrorStatus) -> String {
    let mut text = if status.message.is_empty() {
        format!("the Shepherd API answered {} {}", status.code, status.reason)
    } else {
        status.message.clone()
    };
    if let Some(first) = status.details.first()
        && let Some(at) = text.find(&format!("{}: {}", first.field, first.message))
        && at > 0
    {
        text.truncate(at);
        text.truncate(text.trim_end_matches([' ', ':', ';', ',']).len());
    }
    text
}

/// What an error status tells a client to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// 401: the server wants a (valid) token.
    Unauthorized,
    /// 403: this token may not do that.
    Forbidden,
    NotFound,
    /// 409: the object exists, or changed since it was read.
    Conflict,
    /// 410: the revision fell out of the server's history; list again.
    Gone,
    /// 429 and 5xx: the server is overloaded or failing for now; the same call may work later.
    Transient,
    /// Any other status: trying again as it is cannot change the answer.
    Refused,
}

impl Class {
    pub fn of(code: u16) -> Class {
        match code {
            401 => Class::Unauthorized,
            403 => Class::Forbidden,
            404 => Class::NotFound,
            409 => Class::Conflict,
            410 => Class::Gone,
            429 | 500.. => Class::Transient,
            _ => Class::Refused,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_shape_keeps_its_reason_and_field_details() {
        let text = r#"{"error":{"code":422,"reason":"Invalid","message":"Pod default/x is invalid","details":[{"field":"spec.containers[0].image","message":"must not be empty"}]}}"#;
        let answer = ErrorAnswer::read(422, text);
        assert_eq!(answer.code(), 422);
        assert_eq!(answer.details()[0].field, "spec.containers[0].image");
        let ErrorAnswer::Api(status) = &answer else { panic!("the API shape: {answer:?}") };
        assert_eq!(headline(status), "Pod default/x is invalid");
        // A body without its own code takes the answer's.
        assert_eq!(ErrorAnswer::read(410, r#"{"error":{"reason":"Gone","message":"too old"}}"#).class(), Class::Gone);
    }

    #[test]
    fn other_bodies_keep_their_first_line_and_an_html_page_says_who_answered() {
        assert_eq!(ErrorAnswer::read(502, "Bad Gateway\n<html>"), ErrorAnswer::Other { code: 502, body: "Bad Gateway".into() });
        assert_eq!(ErrorAnswer::read(503, ""), ErrorAnswer::Other { code: 503, body: String::new() });
        let page = ErrorAnswer::read(404, "  <!DOCTYPE HTML><html>…");
        assert_eq!(page, ErrorAnswer::Other { code: 404, body: "not the Shepherd API".into() });
        assert!(page.details().is_empty());
        let long = "x".repeat(1000);
        let ErrorAnswer::Other { body, .. } = ErrorAnswer::read(500, &long) else { panic!("not the API shape") };
        assert_eq!(body.len(), GIST_CHARS);
    }

    #[test]
    fn the_headline_drops_repeated_field_errors_and_names_a_silent_status() {
        let status = ApiErrorStatus {
            code: 422,
            reason: "Invalid".into(),
            message: "Pod \"web\" is invalid: spec.replicas: must be 0 or more; metadata.name: bad".into(),
            details: vec![FieldError::new("spec.replicas", "must be 0 or more")],
        };
        assert_eq!(headline(&status), "Pod \"web\" is invalid");
        let silent = ApiErrorStatus { code: 403, reason: "Forbidden".into(), ..Default::default() };
        assert_eq!(headline(&silent), "the Shepherd API answered 403 Forbidden");
    }

    #[test]
    fn statuses_classify() {
        let classes: Vec<Class> = [401, 403, 404, 409, 410, 429, 500, 503, 400, 422].into_iter().map(Class::of).collect();
        assert_eq!(
            classes,
            [
                Class::Unauthorized,
                Class::Forbidden,
                Class::NotFound,
                Class::Conflict,
                Class::Gone,
                Class::Transient,
                Class::Transient,
                Class::Transient,
                Class::Refused,
                Class::Refused
            ]
        );
    }
}
