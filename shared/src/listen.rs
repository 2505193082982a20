//! Where an API may listen without a token: on loopback only, so that no other machine
//! reaches it. The server's `--addr` and every agent API (a node's, a fleet's, a server's
//! local node's) follow this one rule.

use std::net::SocketAddr;

/// Whether a listener on `addr` is reachable from this machine alone: `127.0.0.0/8`, `::1`,
/// or an IPv4 loopback written as IPv6 (`::ffff:127.0.0.1`). `0.0.0.0` and `::` listen on
/// every interface, so they are not.
pub fn is_loopback_only(addr: SocketAddr) -> bool {
    addr.ip().to_canonical().is_loopback()
}

/// Whether an API with `has_token` (it checks callers' tokens) may listen on `addr`: off
/// loopback only when it does.
pub fn may_listen(addr: SocketAddr, has_token: bool) -> bool {
    has_token || is_loopback_only(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn loopback_only_is_the_loopback_range_however_it_is_written() {
        for loopback in ["127.0.0.1:10250", "127.3.2.1:0", "[::1]:10250", "[::ffff:127.0.0.1]:10250"] {
            assert!(is_loopback_only(addr(loopback)), "{loopback}");
        }
        for open in ["0.0.0.0:10250", "[::]:10250", "192.0.2.7:10250", "[2001:db8::7]:10250", "[::ffff:192.0.2.7]:10250"] {
            assert!(!is_loopback_only(addr(open)), "{open}");
        }
    }

    #[test]
    fn off_loopback_an_api_needs_a_token() {
        assert!(may_listen(addr("127.0.0.1:9876"), false));
        assert!(!may_listen(addr("0.0.0.0:9876"), false));
        assert!(may_listen(addr("0.0.0.0:9876"), true));
    }
}
