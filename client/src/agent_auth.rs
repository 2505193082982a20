//! How the API server proves itself to a node's agent API, as the kubelet's callers must. The
//! node's token, which it authenticates to the server with, never travels over the agent's
//! plain-HTTP API: the server signs each request it proxies with an HMAC-SHA256 keyed by that
//! token, over the method, the path and query as sent, and an expiry. The agent recomputes
//! the signature with its own token. A stolen header opens one path for a minute at most.
//!
//! The header: `Authorization: Shepherd-Signature expires=<unix seconds>,signature=<hex>`.
//! Time is a parameter, so the rule has no clock of its own.

use aws_lc_rs::hmac;

/// The `Authorization` scheme.
pub const SCHEME: &str = "Shepherd-Signature";
/// How long a signature is good for.
pub const VALIDITY_SECONDS: u64 = 60;
/// How far ahead of the agent's clock an expiry may be: the validity plus the clock skew
/// between two machines that this tolerates.
pub const MAX_AHEAD_SECONDS: u64 = VALIDITY_SECONDS + 300;

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("this agent serves only requests signed by the API server with the node's token (Authorization: {SCHEME} …)")]
    Missing,
    #[error("the Authorization header is not `{SCHEME} expires=<unix seconds>,signature=<hex>`")]
    Malformed,
    #[error("the signature expired at {expires} (now {now}): check that the server's and the node's clocks agree")]
    Expired { expires: u64, now: u64 },
    #[error("the signature expires at {expires}, too far after now ({now}): check that the server's and the node's clocks agree")]
    TooFarAhead { expires: u64, now: u64 },
    #[error("the signature does not match: the server signed with another token than this node's, or for another request")]
    Wrong,
}

fn key(token: &str) -> hmac::Key {
    hmac::Key::new(hmac::HMAC_SHA256, token.as_bytes())
}

fn message(method: &str, path_and_query: &str, expires: u64) -> String {
    format!("{method}\n{path_and_query}\n{expires}")
}

/// The `Authorization` value for `method` on `path_and_query`, good until `expires`.
pub fn sign(token: &str, method: &str, path_and_query: &str, expires: u64) -> String {
    let tag = hmac::sign(&key(token), message(method, path_and_query, expires).as_bytes());
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("{SCHEME} expires={expires},signature={hex}")
}

/// The `Authorization` value for a request sent at `now`.
pub fn sign_now(token: &str, method: &str, path_and_query: &str, now: u64) -> String {
    sign(token, method, path_and_query, now + VALIDITY_SECONDS)
}

/// Whether `authorization` signs `method` on `path_and_query` with `token`, at `now`. The
/// comparison takes the same time whatever the signature holds.
pub fn verify(token: &str, method: &str, path_and_query: &str, authorization: Option<&str>, now: u64) -> Result<(), Refusal> {
    let value = authorization.ok_or(Refusal::Missing)?;
    let fields = value.strip_prefix(SCHEME).and_then(|rest| rest.strip_prefix(' ')).ok_or(Refusal::Malformed)?;
    let (expires, signature) = fields
        .split_once(',')
        .and_then(|(expires, signature)| Some((expires.strip_prefix("expires=")?, signature.strip_prefix("signature=")?)))
        .ok_or(Refusal::Malformed)?;
    // Digits alone, as `sign` writes them: `u64::from_str` would also take `+N`.
    if expires.is_empty() || !expires.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Refusal::Malformed);
    }
    let expires: u64 = expires.parse().map_err(|_| Refusal::Malformed)?;
    let signature = decode_hex(signature).ok_or(Refusal::Malformed)?;
    if expires < now {
        return Err(Refusal::Expired { expires, now });
    }
    if expires - now > MAX_AHEAD_SECONDS {
        return Err(Refusal::TooFarAhead { expires, now });
    }
    hmac::verify(&key(token), message(method, path_and_query, expires).as_bytes(), &signature).map_err(|_| Refusal::Wrong)
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;
    const PATH: &str = "/logs/default/web?container=main&follow=true";

    #[test]
    fn a_signature_opens_its_own_request_until_it_expires() {
        let header = sign_now("node-token-1", "GET", PATH, NOW);
        assert!(header.starts_with("Shepherd-Signature expires=1800000060,signature="), "{header}");
        assert_eq!(verify("node-token-1", "GET", PATH, Some(&header), NOW), Ok(()));
        assert_eq!(verify("node-token-1", "GET", PATH, Some(&header), NOW + VALIDITY_SECONDS), Ok(()));
        assert_eq!(
            verify("node-token-1", "GET", PATH, Some(&header), NOW + VALIDITY_SECONDS + 1),
            Err(Refusal::Expired { expires: NOW + VALIDITY_SECONDS, now: NOW + VALIDITY_SECONDS + 1 })
        );
    }

    #[test]
    fn a_signature_opens_nothing_else() {
        let header = sign_now("node-token-1", "GET", PATH, NOW);
        let wrong = Err(Refusal::Wrong);
        assert_eq!(verify("node-token-2", "GET", PATH, Some(&header), NOW), wrong, "another token");
        assert_eq!(verify("node-token-1", "POST", PATH, Some(&header), NOW), wrong, "another method");
        assert_eq!(verify("node-token-1", "GET", "/logs/default/db?container=main&follow=true", Some(&header), NOW), wrong);
        assert_eq!(verify("node-token-1", "GET", "/logs/default/web?container=main", Some(&header), NOW), wrong, "another query");
        let later = header.replace("expires=1800000060", "expires=1800000090");
        assert_eq!(verify("node-token-1", "GET", PATH, Some(&later), NOW), wrong, "an expiry moved on");
        let flipped = format!("{}{}", &header[..header.len() - 1], if header.ends_with('0') { '1' } else { '0' });
        assert_eq!(verify("node-token-1", "GET", PATH, Some(&flipped), NOW), wrong, "one digit changed");
    }

    #[test]
    fn a_missing_malformed_or_far_future_signature_is_refused_by_name() {
        assert_eq!(verify("t", "GET", PATH, None, NOW), Err(Refusal::Missing));
        for malformed in [
            "Bearer node-token-1",
            "Shepherd-Signature",
            "Shepherd-Signature expires=soon,signature=00",
            "Shepherd-Signature expires=1800000060",
            "Shepherd-Signature expires=1800000060,signature=xyz",
            "Shepherd-Signature expires=1800000060,signature=0é",
        ] {
            assert_eq!(verify("t", "GET", PATH, Some(malformed), NOW), Err(Refusal::Malformed), "{malformed}");
        }
        let plus = sign("t", "GET", PATH, NOW + 60).replace("expires=", "expires=+");
        assert_eq!(verify("t", "GET", PATH, Some(&plus), NOW), Err(Refusal::Malformed), "a sign before the expiry: {plus}");
        let far = sign("t", "GET", PATH, NOW + MAX_AHEAD_SECONDS + 1);
        assert_eq!(verify("t", "GET", PATH, Some(&far), NOW), Err(Refusal::TooFarAhead { expires: NOW + MAX_AHEAD_SECONDS + 1, now: NOW }));
        let skewed = sign("t", "GET", PATH, NOW + MAX_AHEAD_SECONDS);
        assert_eq!(verify("t", "GET", PATH, Some(&skewed), NOW), Ok(()), "a clock a few minutes behind");
    }
}
