//! Work done inside a container's namespaces: in its network namespace, so that nothing is
//! ever sent to a pod address, and in its UTS namespace, to give it its pod's hostname. A
//! dedicated OS thread enters the namespace (`setns`), does one thing and ends, so no thread
//! that anything else runs on ever leaves the host's namespaces. A socket made there keeps
//! its namespace when the thread is gone.

use std::fs::File;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// How long a connection to a pod's own loopback may take to be accepted.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A kind of namespace a thread can enter.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Network,
    /// Hostname and domain name.
    Uts,
}

impl Kind {
    /// Its name under `/proc/<pid>/ns/`, its `setns` flag and its words.
    fn parts(self) -> (&'static str, libc::c_int, &'static str) {
        match self {
            Kind::Network => ("net", libc::CLONE_NEWNET, "network namespace"),
            Kind::Uts => ("uts", libc::CLONE_NEWUTS, "UTS namespace"),
        }
    }
}

/// Runs `work` on a new thread inside the network namespace of the process `pid`. `Err`
/// says why the namespace could not be entered, or what `work` returned as its error.
pub async fn inside<T, F>(pid: i64, name: &str, work: F) -> Result<T, String>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, String> + Send + 'static,
{
    within(Kind::Network, pid, name, work).await
}

async fn within<T, F>(kind: Kind, pid: i64, name: &str, work: F) -> Result<T, String>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, String> + Send + 'static,
{
    let words = kind.parts().2;
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            // The receiver may have given up; nothing to tell then.
            let _ = tx.send(enter(kind, pid).and_then(|()| work()));
        })
        .map_err(|e| format!("cannot start a thread to enter a {words}: {e}"))?;
    rx.await.map_err(|_| format!("the thread in the {words} ended without an answer"))?
}

/// On this thread: enters the namespace of `pid` for good (the thread ends after).
fn enter(kind: Kind, pid: i64) -> Result<(), String> {
    let (file, flag, words) = kind.parts();
    let path = format!("/proc/{pid}/ns/{file}");
    let namespace = File::open(&path).map_err(|e| format!("cannot open the container's {words} {path}: {e}"))?;
    // SAFETY: a valid open descriptor of a namespace of this kind; only this thread moves into it.
    if unsafe { libc::setns(namespace.as_raw_fd(), flag) } != 0 {
        return Err(format!("cannot enter the container's {words} {path}: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Sets the hostname in the UTS namespace of the process `pid`.
pub async fn set_hostname(pid: i64, hostname: &str) -> Result<(), String> {
    let name = hostname.to_string();
    within(Kind::Uts, pid, "hostname-uts", move || {
        // SAFETY: the pointer and length describe `name`'s bytes, which outlive the call.
        if unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) } != 0 {
            return Err(format!("cannot set the hostname {name:?}: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    })
    .await
}

/// `127.0.0.1:port`: the only address anything in here connects to.
pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Go's words for the errors a connection meets, as the kubelet's messages have them.
pub fn words(e: &std::io::Error) -> String {
    match e.kind() {
        ErrorKind::TimedOut | ErrorKind::WouldBlock => "i/o timeout".into(),
        kind => kind.to_string(),
    }
}

/// A TCP connection to `127.0.0.1:port` inside the network namespace of `pid`.
pub async fn connect_loopback(pid: i64, port: u16) -> Result<tokio::net::TcpStream, String> {
    let stream = inside(pid, "connect-netns", move || {
        let address = loopback(port);
        let stream =
            TcpStream::connect_timeout(&address, CONNECT_TIMEOUT).map_err(|e| format!("dial tcp4 {address}: connect: {}", words(&e)))?;
        stream.set_nonblocking(true).map_err(|e| format!("cannot make the connection to {address} non-blocking: {e}"))?;
        Ok(stream)
    })
    .await?;
    tokio::net::TcpStream::from_std(stream).map_err(|e| format!("cannot hand the connection to the runtime: {e}"))
}
