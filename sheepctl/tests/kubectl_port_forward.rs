//! The real kubectl (v1.32, on PATH) and `sheepctl` forward local ports through Shepherd's
//! `pods/portforward` to busybox httpd in a real Docker pod, over HTTPS with tokens as a
//! cluster runs: to the pod and to a Service, two connections sharing one forward, and one
//! closed while the other keeps working. httpd listens on the pod's loopback only, so only
//! the agent, inside the pod, can reach it. Fails, never skips, when kubectl or Docker is
//! missing.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use support::{Background, RemoveNodeContainers, SecureDockerCluster};

const NODE: &str = "forward-node";
const TOKENS: &str = "forward-admin-token admin\nforward-node-token node forward-node\n";
const LINES: usize = 20_000;

/// httpd on the pod's 127.0.0.1:80, ready once it accepts connections, and a Service
/// whose port 8080 leads to it.
fn manifests() -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels:\n    app: web\nspec:\n  containers:\n  - name: httpd\n    image: minimal\n    \
         command: [sh, -c, \"mkdir -p /www && seq {LINES} > /www/page && exec httpd -f -p 127.0.0.1:80 -h /www\"]\n    ports:\n    \
         - containerPort: 80\n    readinessProbe:\n      tcpSocket:\n        port: 80\n      periodSeconds: 1\n---\n\
         apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector:\n    app: web\n  ports:\n  - port: 8080\n    targetPort: 80\n"
    )
}

/// The local port of a forward, from its "Forwarding from 127.0.0.1:PORT -> REMOTE" line.
fn forwarded_port(forward: &Background) -> u16 {
    let line = forward.expect_line("Forwarding from 127.0.0.1:", Duration::from_secs(30));
    let port = line.trim_start_matches("Forwarding from 127.0.0.1:").split_whitespace().next().unwrap_or_default();
    port.parse().unwrap_or_else(|_| panic!("a port in {line:?}"))
}

/// The httpd processes in the pod's container: the server and one child per connection.
fn httpd_processes() -> usize {
    let (pod, container) = (format!("label={}=web", agent::runtime::LABEL_POD), format!("label={}=httpd", agent::runtime::LABEL_CONTAINER));
    // This node's only: another cluster on the machine may run a pod of the same name.
    let node = format!("label={}={NODE}", agent::runtime::LABEL_NODE);
    let containers =
        Command::new("docker").args(["ps", "-q", "--filter", &pod, "--filter", &container, "--filter", &node]).output().unwrap();
    let id = String::from_utf8_lossy(&containers.stdout).trim().to_string();
    assert!(!id.is_empty() && !id.contains('\n'), "the pod's one container runs: {id:?}");
    let top = Command::new("docker").args(["top", &id]).output().unwrap();
    String::from_utf8_lossy(&top.stdout).lines().filter(|line| line.contains("httpd -f")).count()
}

/// Waits until the pod's httpd serves `connections` connections.
fn wait_for_connections(connections: usize) {
    shepherd_testing::poll_blocking(Duration::from_secs(20), &format!("httpd to serve {connections} connections"), || {
        // The server process, then one child per connection.
        let serving = httpd_processes().checked_sub(1).ok_or("httpd is not running")?;
        (serving == connections).then_some(()).ok_or(format!("{serving} connections"))
    });
}

/// Sends the start of `GET /page`, without the blank line that ends it.
fn start_request(port: u16) -> TcpStream {
    let mut connection = TcpStream::connect(("127.0.0.1", port)).unwrap();
    connection.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    connection.write_all(b"GET /page HTTP/1.0\r\n").unwrap();
    connection
}

/// Ends the request `start_request` began and checks the whole page comes back.
fn finish_request(mut connection: TcpStream) {
    connection.write_all(b"\r\n").unwrap();
    let mut answer = String::new();
    connection.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or_else(|| panic!("an HTTP answer: {answer:?}"));
    assert!(head.starts_with("HTTP/1.") && head.contains(" 200 "), "{head}");
    let expected: String = (1..=LINES).map(|n| format!("{n}\n")).collect();
    assert!(body == expected, "the page came whole: {} bytes of {}", body.len(), expected.len());
}

/// Through the forward at `port`: two connections reach httpd at once; the first closes,
/// and once httpd has seen it go, the second still gets its page, and so does a new one.
fn two_connections_then_one_closed(port: u16) {
    let first = start_request(port);
    let second = start_request(port);
    wait_for_connections(2);
    drop(first);
    wait_for_connections(1);
    finish_request(second);
    finish_request(start_request(port));
    wait_for_connections(0);
}

#[test]
fn kubectl_and_sheepctl_forward_ports_to_a_pod_and_a_service() {
    let _cleanup = RemoveNodeContainers(NODE);
    let cluster = SecureDockerCluster::start(TOKENS, NODE, "forward-node-token", "forward-admin-token");
    let (server, dir, ca, kubectl) = (&cluster.server, &cluster.dir, &cluster.ca, &cluster.kubectl);
    let file = dir.path().join("web.yaml");
    std::fs::write(&file, manifests()).unwrap();
    let applied = kubectl.run(&["apply", "-f", file.to_str().unwrap()]);
    assert!(applied.contains("pod/web created") && applied.contains("service/web created"), "{applied}");
    let ready = kubectl.run(&["wait", "--for=condition=Ready", "pod/web", "--timeout=60s"]);
    assert!(ready.contains("condition met"), "{ready}");

    for target in [["pod/web", ":80"], ["svc/web", ":8080"]] {
        let forward = Background::spawn_command(kubectl.command(&["port-forward", target[0], target[1]]));
        two_connections_then_one_closed(forwarded_port(&forward));
    }

    for target in [["pod/web", ":80"], ["svc/web", ":8080"]] {
        let mut sheepctl = Command::new(env!("CARGO_BIN_EXE_sheepctl"));
        sheepctl
            .args(["port-forward", target[0], target[1]])
            .env("SHEPHERD_API", &server.url)
            .env("SHEPHERD_CA", &ca)
            .env("SHEPHERD_TOKEN", "forward-admin-token");
        let forward = Background::spawn_command(sheepctl);
        two_connections_then_one_closed(forwarded_port(&forward));
    }
}
