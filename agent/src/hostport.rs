//! The host ports of the node's CNI sandboxes, held open as the kubelet's hostport manager
//! does (`openLocalPort`): the agent binds each one before portmap DNATs it to the pod and
//! keeps the socket until the sandbox's network is taken down. The bind is the check and
//! the claim in one step: a port a host process or another pod has is refused, and a host
//! process that comes later gets `EADDRINUSE` rather than silently losing its traffic.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpListener, UdpSocket};
use std::os::fd::OwnedFd;
use std::sync::{Mutex, MutexGuard};

use crate::runtime::PortMapping;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("host port {port}/{protocol} on {address} is in use by another process or pod on this machine")]
    HostPortTaken { port: i32, protocol: String, address: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The sockets bound for one sandbox's host ports; dropping them frees the ports.
#[derive(Debug, Default)]
pub struct Bound(Vec<OwnedFd>);

impl Bound {
    /// Whether no socket is held: the sandbox asked no host port the agent can hold.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The bound host ports of the node's sandboxes, by sandbox id.
#[derive(Debug, Default)]
pub struct HostPorts {
    held: Mutex<HashMap<String, Bound>>,
}

impl HostPorts {
    fn held(&self) -> MutexGuard<'_, HashMap<String, Bound>> {
        self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Binds every host port of `ports`: all of them, or none and the first that is taken.
    pub fn bind(ports: &[PortMapping]) -> Result<Bound> {
        let mut bound = Vec::new();
        for port in ports {
            bound.extend(open(port)?);
        }
        Ok(Bound(bound))
    }

    /// Holds `bound` for the sandbox `id` until [`HostPorts::release`].
    pub fn keep(&self, id: &str, bound: Bound) {
        if !bound.is_empty() {
            tracing::debug!(sandbox = id, ports = bound.0.len(), "holding the sandbox's host ports");
            self.held().insert(id.to_string(), bound);
        }
    }

    /// Binds again the host ports of a sandbox an earlier agent made, unless they are held
    /// already: each one that is free; returns those taken since.
    pub fn rebind(&self, id: &str, ports: &[PortMapping]) -> Vec<Error> {
        if self.held().contains_key(id) {
            return Vec::new();
        }
        let (mut bound, mut taken) = (Vec::new(), Vec::new());
        for port in ports {
            match open(port) {
                Ok(socket) => bound.extend(socket),
                Err(e) => taken.push(e),
            }
        }
        self.keep(id, Bound(bound));
        taken
    }

    /// Frees the host ports of the sandbox `id` (none held is fine): its DNAT is gone.
    pub fn release(&self, id: &str) {
        self.held().remove(id);
    }
}

/// Binds one host port on the address it names (empty: every IPv4 address, as portmap's
/// DNAT covers): TCP listens, UDP binds. `None` when there is nothing to hold.
fn open(port: &PortMapping) -> Result<Option<OwnedFd>> {
    if port.host_port <= 0 {
        return Ok(None);
    }
    let address = if port.host_ip.is_empty() { "0.0.0.0" } else { port.host_ip.as_str() };
    // Not an address: portmap refuses it with its own error.
    let (Ok(ip), Ok(number)) = (address.parse::<IpAddr>(), u16::try_from(port.host_port)) else { return Ok(None) };
    let at = SocketAddr::new(ip, number);
    let bound = match port.protocol.as_str() {
        "udp" => UdpSocket::bind(at).map(OwnedFd::from),
        _ => TcpListener::bind(at).map(OwnedFd::from),
    };
    match bound {
        Ok(socket) => Ok(Some(socket)),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            Err(Error::HostPortTaken { port: port.host_port, protocol: port.protocol.to_uppercase(), address: address.to_string() })
        }
        // Such as an address not on this machine: portmap's DNAT still applies to it, as
        // before the agent held ports.
        Err(e) => {
            tracing::warn!(%at, protocol = %port.protocol, error = %e, "cannot hold a host port; portmap publishes it without");
            Ok(None)
        }
    }
}
