//! Where an API may listen without a token: on loopback only, so that no other machine
//! reaches it. The server's `--addr` and every agent API (a node's, a fleet's, a server's
//! local node's) follow this one rule. Such an API still hears every web page the user
//! opens, so it answers only requests for its own loopback address
//! ([`is_own_loopback_host`]): a page that points its own name at 127.0.0.1 (DNS
//! rebinding) sends its own name as the Host.

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

/// `localhost`, a 127.0.0.0/8 address or `[::1]`, with `port` (when the Host names none, the
/// scheme's: 443 over TLS, else 80): a Host header an API without tokens answers.
pub fn is_own_loopback_host(host: &str, port: u16, tls: bool) -> bool {
    let (name, named_port) = match host.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((address, rest)) => (address, rest.strip_prefix(':')),
            None => return false,
        },
        None => match host.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        },
    };
    let loopback = name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    let default_port = if tls { 443 } else { 80 };
    loopback && named_port.map_or(Some(default_port), |p| p.parse::<u16>().ok()) == Some(port)
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

    #[test]
    fn only_loopback_names_with_the_servers_port_are_its_own() {
        for host in ["localhost:9876", "LOCALHOST:9876", "127.0.0.1:9876", "127.1.2.3:9876", "[::1]:9876"] {
            assert!(is_own_loopback_host(host, 9876, false), "{host}");
        }
        assert!(is_own_loopback_host("localhost", 80, false));
        assert!(is_own_loopback_host("localhost", 443, true));
        assert!(!is_own_loopback_host("localhost", 80, true));
        for host in [
            "evil.example:9876",
            "localhost:9877",
            "localhost",
            "127.0.0.1",
            "[::1]",
            "10.0.0.1:9876",
            "localhost.evil.example:9876",
            "[::1:9876",
            "localhost:port",
            "0.0.0.0:9876",
        ] {
            assert!(!is_own_loopback_host(host, 9876, false), "{host}");
        }
    }
}
