//! The host ports a sandbox holds, against host processes on every address and family.
//! A binary of its own: the agent's unit tests spawn processes, and a child forked while a
//! socket here is open holds a copy of it until its exec, so a port just released or just
//! probed could seem taken.

use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};
use std::os::fd::OwnedFd;

use agent::hostport::{Bound, Error, HostPorts, Result};
use agent::runtime::PortMapping;

fn mapping(port: u16, host_ip: &str, protocol: &str) -> PortMapping {
    PortMapping { container_port: 80, host_port: i32::from(port), host_ip: host_ip.into(), protocol: protocol.into() }
}

/// A port free for TCP and UDP alike, below the kernel's ephemeral range (32768 up by
/// default) and from a counter: a port the kernel hands another test's socket or
/// outgoing connection in the meantime can never be this one.
fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    const FIRST: u16 = 20_000;
    const COUNT: u16 = 12_000;
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let start = (std::process::id() % u32::from(COUNT)) as u16;
    loop {
        let port = FIRST + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % COUNT;
        if TcpListener::bind(("0.0.0.0", port)).is_ok() && UdpSocket::bind(("0.0.0.0", port)).is_ok() {
            return port;
        }
    }
}

fn two_free_ports() -> (u16, u16) {
    let first = free_port();
    (first, std::iter::repeat_with(free_port).find(|p| *p != first).unwrap())
}

/// Whether the socket has `IPV6_V6ONLY` set.
fn only_v6(socket: &OwnedFd) -> bool {
    use std::os::fd::AsRawFd;
    let mut value: libc::c_int = 0;
    let mut length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `length` bytes into `value`.
    let read = unsafe { libc::getsockopt(socket.as_raw_fd(), libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, (&raw mut value).cast(), &mut length) };
    assert_eq!(read, 0, "getsockopt(IPV6_V6ONLY): {}", std::io::Error::last_os_error());
    value != 0
}

fn taken(result: Result<Bound>) -> bool {
    matches!(result, Err(Error::HostPortTaken { .. }))
}

#[test]
fn a_held_port_refuses_a_host_process_and_is_free_again_once_released() {
    let ports = HostPorts::default();
    let port = free_port();
    let bound = HostPorts::bind(&[mapping(port, "127.0.0.1", "tcp"), mapping(port, "", "udp")]).unwrap();
    ports.keep("sandbox-1", bound);
    let in_use = TcpListener::bind(("127.0.0.1", port)).unwrap_err();
    assert_eq!(in_use.kind(), ErrorKind::AddrInUse);
    assert_eq!(UdpSocket::bind(("127.0.0.1", port)).unwrap_err().kind(), ErrorKind::AddrInUse);

    ports.release("sandbox-1");
    drop(TcpListener::bind(("127.0.0.1", port)).expect("the TCP port is free once released"));
    drop(UdpSocket::bind(("127.0.0.1", port)).expect("the UDP port is free once released"));
    let again = HostPorts::bind(&[mapping(port, "127.0.0.1", "tcp")]).expect("bound again after the release");
    ports.keep("sandbox-2", again);
    assert!(TcpListener::bind(("127.0.0.1", port)).is_err());
    ports.release("sandbox-unknown");
    assert!(TcpListener::bind(("127.0.0.1", port)).is_err(), "releasing another sandbox frees nothing");
}

#[test]
fn a_second_sandbox_asking_a_held_port_is_refused_and_binds_nothing() {
    let ports = HostPorts::default();
    let (port, other) = two_free_ports();
    ports.keep("first", HostPorts::bind(&[mapping(port, "", "tcp")]).unwrap());
    let refused = HostPorts::bind(&[mapping(other, "127.0.0.1", "tcp"), mapping(port, "127.0.0.1", "tcp")]).unwrap_err();
    assert_eq!(refused.to_string(), format!("host port {port}/TCP on 127.0.0.1 is in use by another process or pod on this machine"));
    drop(TcpListener::bind(("127.0.0.1", other)).expect("all or nothing: the free port bound first was let go"));
}

#[test]
fn a_host_port_overlapping_a_host_listener_on_any_address_or_family_is_refused() {
    for protocol in ["tcp", "udp"] {
        let bind = |at: &str| -> std::io::Result<OwnedFd> {
            match protocol {
                "udp" => UdpSocket::bind(at).map(OwnedFd::from),
                _ => TcpListener::bind(at).map(OwnedFd::from),
            }
        };
        // A host process on every address, IPv6 with IPv4 mapped in (IPV6_V6ONLY off).
        let port = free_port();
        let dual = bind(&format!("[::]:{port}")).unwrap();
        assert!(!only_v6(&dual), "[::]:{port} takes IPv4 too");
        assert!(taken(HostPorts::bind(&[mapping(port, "127.0.0.1", protocol)])), "{protocol}: [::] against 127.0.0.1");
        assert!(taken(HostPorts::bind(&[mapping(port, "", protocol)])), "{protocol}: [::] against every address");

        let port = free_port();
        let _every = bind(&format!("0.0.0.0:{port}")).unwrap();
        assert!(taken(HostPorts::bind(&[mapping(port, "127.0.0.1", protocol)])), "{protocol}: 0.0.0.0 against 127.0.0.1");

        let port = free_port();
        let _loopback = bind(&format!("127.0.0.1:{port}")).unwrap();
        assert!(taken(HostPorts::bind(&[mapping(port, "", protocol)])), "{protocol}: 127.0.0.1 against every address");
        assert!(taken(HostPorts::bind(&[mapping(port, "0.0.0.0", protocol)])), "{protocol}: 127.0.0.1 against 0.0.0.0");

        // And the other way: the pod holds first, then a host process asks.
        let port = free_port();
        let held = HostPorts::bind(&[mapping(port, "127.0.0.1", protocol)]).unwrap();
        for at in [format!("[::]:{port}"), format!("0.0.0.0:{port}"), format!("127.0.0.1:{port}")] {
            assert_eq!(bind(&at).unwrap_err().kind(), ErrorKind::AddrInUse, "{protocol}: {at} against a held 127.0.0.1");
        }
        drop(held);
        let port = free_port();
        let _held = HostPorts::bind(&[mapping(port, "", protocol)]).unwrap();
        assert_eq!(bind(&format!("127.0.0.1:{port}")).unwrap_err().kind(), ErrorKind::AddrInUse, "{protocol}");
    }
}

#[test]
fn rebinding_holds_what_is_free_returns_what_is_taken_and_is_done_once() {
    let ports = HostPorts::default();
    let (free, busy) = two_free_ports();
    let holder = TcpListener::bind(("127.0.0.1", busy)).unwrap();
    let wanted = [mapping(free, "127.0.0.1", "tcp"), mapping(busy, "127.0.0.1", "tcp")];
    let taken = ports.rebind("adopted", &wanted);
    assert_eq!(taken.len(), 1);
    assert!(matches!(&taken[0], Error::HostPortTaken { port, .. } if *port == i32::from(busy)), "{taken:?}");
    assert!(TcpListener::bind(("127.0.0.1", free)).is_err(), "the free port is held");
    drop(holder);
    assert!(ports.rebind("adopted", &wanted).is_empty(), "a sandbox already held is left as it is");
    drop(TcpListener::bind(("127.0.0.1", busy)).expect("not taken again by a second rebind"));
    ports.release("adopted");
    drop(TcpListener::bind(("127.0.0.1", free)).expect("released"));
}

#[test]
fn no_host_port_or_no_address_holds_nothing() {
    let bound = HostPorts::bind(&[mapping(0, "127.0.0.1", "tcp"), mapping(8080, "node-1.lan", "tcp")]).unwrap();
    assert!(bound.is_empty());
}
