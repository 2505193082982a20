//! `httpGet` and `tcpSocket` probes from inside a container's network namespace to
//! 127.0.0.1 ([`namespaces`]), so that no probe packet is ever sent to a pod address.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::namespaces::{self, loopback, words};
use super::seam::{ProbeAction, ProbeOutcome};

/// The most of a response read to find its status line.
const STATUS_LINE_LIMIT: usize = 4096;

/// Runs an `HttpGet` or `TcpSocket` probe in the network namespace of the process `pid`.
/// `Err` says why the namespace could not be entered (or the action is not one for here).
pub async fn probe(pid: i64, action: ProbeAction, timeout: Duration) -> Result<ProbeOutcome, String> {
    namespaces::inside(pid, "probe-netns", move || probe_inside(&action, timeout)).await
}

/// Inside the namespace: probes.
fn probe_inside(action: &ProbeAction, timeout: Duration) -> Result<ProbeOutcome, String> {
    let deadline = Instant::now() + timeout;
    Ok(match action {
        ProbeAction::TcpSocket { port } => {
            let address = loopback(*port);
            match TcpStream::connect_timeout(&address, timeout) {
                Ok(_) => ProbeOutcome::Success,
                Err(e) => ProbeOutcome::Failure(format!("dial tcp {address}: connect: {}", words(&e))),
            }
        }
        ProbeAction::HttpGet { port, path, headers } => http_get(loopback(*port), path, headers, deadline),
        ProbeAction::Exec { .. } => return Err("an exec probe does not connect".into()),
    })
}

/// A minimal HTTP/1.1 GET, as the kubelet's: success is a status from 200 to 399.
fn http_get(address: SocketAddr, path: &str, headers: &[(String, String)], deadline: Instant) -> ProbeOutcome {
    // As the kubelet's URL: a path without its leading slash (`index.html`) asks `/index.html`.
    let path = match path.starts_with('/') {
        true => path.to_string(),
        false => format!("/{path}"),
    };
    let url = format!("http://{address}{path}");
    let left = || deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    let status = (|| -> std::io::Result<String> {
        let mut stream = TcpStream::connect_timeout(&address, left())?;
        stream.set_write_timeout(Some(left()))?;
        let mut request =
            format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nUser-Agent: kube-probe/shepherd\r\nAccept: */*\r\nConnection: close\r\n");
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        stream.write_all(request.as_bytes())?;
        let mut received = Vec::new();
        let mut buffer = [0u8; 512];
        while !received.windows(2).any(|w| w == b"\r\n") && received.len() < STATUS_LINE_LIMIT {
            stream.set_read_timeout(Some(left()))?;
            let n = stream.read(&mut buffer)?;
            if n == 0 {
                break;
            }
            received.extend_from_slice(&buffer[..n]);
        }
        let text = String::from_utf8_lossy(&received);
        Ok(text.lines().next().unwrap_or_default().to_string())
    })();
    match status {
        Err(e) => ProbeOutcome::Failure(format!("Get {url:?}: {}", words(&e))),
        Ok(line) => match line.split_whitespace().nth(1).and_then(|code| code.parse::<u16>().ok()) {
            Some(code) if (200..400).contains(&code) => ProbeOutcome::Success,
            Some(code) => ProbeOutcome::Failure(format!("HTTP probe failed with statuscode: {code}")),
            None => ProbeOutcome::Failure(format!("Get {url:?}: malformed HTTP response {line:?}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader};
    use std::net::TcpListener;

    use super::*;

    /// The request line an `httpGet` probe of `path` sends, read by a listener on 127.0.0.1.
    fn request_line(path: &str) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut line = String::new();
            BufReader::new(stream.try_clone().unwrap()).read_line(&mut line).unwrap();
            stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").unwrap();
            line
        });
        let outcome = http_get(address, path, &[], Instant::now() + Duration::from_secs(10));
        assert_eq!(outcome, ProbeOutcome::Success);
        server.join().unwrap().trim_end().to_string()
    }

    #[test]
    fn a_path_without_its_leading_slash_is_asked_with_one_as_the_kubelet_asks() {
        assert_eq!(request_line("index.html"), "GET /index.html HTTP/1.1");
        assert_eq!(request_line("/healthz"), "GET /healthz HTTP/1.1");
        assert_eq!(request_line(""), "GET / HTTP/1.1");
    }
}
