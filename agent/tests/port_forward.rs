//! Port-forward against a real Docker pod running busybox httpd, published nowhere: the
//! agent connects inside the pod's network namespace. The client side is the one sheepctl
//! uses (`shepherd_client::port_forward`), talking to the agent's own path.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{DockerNode, container, docker_node, spec};
use futures::{SinkExt, StreamExt};
use shared::api::agent_paths;
use shared::api::port_forward::SUBPROTOCOL;
use shared::model::PodPhase;
use shepherd_client::Client;
use shepherd_client::port_forward::{ForwardError, PortForward};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

const WAIT: Duration = Duration::from_secs(20);
/// The page httpd serves: big enough to take many frames.
const PAGE_LINES: usize = 20_000;

/// A pod whose httpd serves `/page` on port 80 of its own loopback only.
async fn web_pod(node: &DockerNode) {
    let script = format!("mkdir -p /www && seq {PAGE_LINES} > /www/page && exec httpd -f -p 80 -h /www");
    let pod = node.api.add_pod(&node.node, "web", spec(vec![container("web", &["sh", "-c", &script])], "Always")).await;
    node.api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
}

fn agent_client(node: &DockerNode) -> Client {
    Client::new(&node.agent.endpoint, None).unwrap()
}

async fn connect(node: &DockerNode) -> PortForward {
    let socket = agent_client(node).websocket(&agent_paths::port_forward("default", "web"), SUBPROTOCOL).await.unwrap();
    PortForward::over(socket)
}

fn page() -> String {
    (1..=PAGE_LINES).map(|n| format!("{n}\n")).collect()
}

/// `GET /page` through `forward` to port 80, as a local client would send it.
async fn get_page(forward: &PortForward) -> Result<String, ForwardError> {
    let (mut ours, theirs) = tokio::io::duplex(64 * 1024);
    let (forwarded, answer) = tokio::join!(forward.forward(80, theirs), async {
        ours.write_all(b"GET /page HTTP/1.0\r\n\r\n").await.unwrap();
        let mut answer = String::new();
        ours.read_to_string(&mut answer).await.unwrap();
        answer
    });
    forwarded.map(|()| answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_through_the_forward_several_streams_at_once_and_each_ends_alone() {
    let node = docker_node().await;
    web_pod(&node).await;
    let forward = connect(&node).await;

    let answer = get_page(&forward).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{}", &answer[..answer.len().min(200)]);
    assert!(answer.ends_with(&page()), "the whole page came through");

    // Two connections at once: the first waits half-sent while the second is served and
    // reset; then the first finishes on the same WebSocket.
    let mut first = forward.open(80).await.unwrap();
    first.data.writer.write(Bytes::from_static(b"GET /page HTTP/1.0\r\n")).await.unwrap();
    let (second, third) = tokio::join!(get_page(&forward), get_page(&forward));
    assert!(second.unwrap().ends_with(&page()));
    assert!(third.unwrap().ends_with(&page()));
    first.data.writer.write(Bytes::from_static(b"\r\n")).await.unwrap();
    first.data.writer.finish().await.unwrap();
    let answer = String::from_utf8(first.data.reader.read_to_end().await).unwrap();
    assert!(answer.ends_with(&page()), "the waiting connection is answered after the others ended");
    first.data.writer.reset().await;
    assert_eq!(first.error.read_to_end().await, b"", "nothing went wrong");

    // A stream reset halfway ends only itself.
    let mut cut = forward.open(80).await.unwrap();
    cut.data.writer.write(Bytes::from_static(b"GET /page HTTP/1.0\r\n\r\n")).await.unwrap();
    assert!(cut.data.reader.read().await.is_some(), "the answer began");
    cut.data.writer.reset().await;
    assert!(get_page(&forward).await.unwrap().ends_with(&page()));

    node.agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_port_is_told_on_the_error_stream_and_the_connection_goes_on() {
    let node = docker_node().await;
    web_pod(&node).await;
    let forward = connect(&node).await;

    let (_ours, theirs) = tokio::io::duplex(1024);
    let error = forward.forward(9, theirs).await.unwrap_err().to_string();
    assert!(error.starts_with("error forwarding port 9 to pod default/web, uid "), "{error}");
    assert!(error.contains("dial tcp4 127.0.0.1:9: connect: connection refused"), "{error}");
    assert!(get_page(&forward).await.unwrap().ends_with(&page()), "the WebSocket still forwards");

    node.agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_or_wrong_requests_end_their_connection_with_a_reason_and_nothing_else() {
    let node = docker_node().await;
    web_pod(&node).await;
    let client = agent_client(&node);
    let path = agent_paths::port_forward("default", "web");

    // Bytes that are no SPDY frame: the agent says GOAWAY and closes.
    let mut socket = client.websocket(&path, SUBPROTOCOL).await.unwrap();
    socket.send(Message::Binary(Bytes::from_static(&[0x80, 0x02, 0, 1, 0, 0, 0, 0]))).await.unwrap();
    let mut received = Vec::new();
    while let Some(Ok(message)) = tokio::time::timeout(WAIT, socket.next()).await.expect("the agent closes the connection") {
        received.push(message);
    }
    let go_away = [0x80, 0x03, 0x00, 0x07, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1];
    assert!(received.iter().any(|m| m.clone().into_data() == go_away[..]), "{received:?}");

    // A header block that is not zlib, and a frame that claims 16 MiB then stops.
    for bytes in [
        Bytes::from_static(&[0x80, 0x03, 0x00, 0x01, 0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xde, 0xad]),
        Bytes::from_static(&[0, 0, 0, 1, 0, 0xff, 0xff, 0xff, b'x']),
    ] {
        let mut socket = client.websocket(&path, SUBPROTOCOL).await.unwrap();
        socket.send(Message::Binary(bytes)).await.unwrap();
        socket.close(None).await.unwrap();
        while let Some(Ok(_)) = tokio::time::timeout(WAIT, socket.next()).await.expect("the agent closes the connection") {}
    }

    // The wrong subprotocol, an unknown pod and a plain GET are JSON errors.
    let error = client.websocket(&path, "v5.channel.k8s.io").await.unwrap_err().to_string();
    assert!(error.contains("port-forward speaks SPDY/3.1+portforward.k8s.io over a WebSocket"), "{error}");
    let error = client.websocket(&agent_paths::port_forward("default", "nope"), SUBPROTOCOL).await.unwrap_err().to_string();
    assert!(error.contains("pod default/nope has no running container on node"), "{error}");
    let plain = reqwest::get(format!("{}{path}", node.agent.endpoint)).await.unwrap();
    assert_eq!(plain.status(), 400);

    // The agent serves on.
    assert!(get_page(&connect(&node).await).await.unwrap().ends_with(&page()));
    node.agent.stop().await;
}

/// Stands in for the API server's port-forward route (the server's proxy to agents is built
/// apart): a connection whose first request is a pod's port-forward upgrade goes to the
/// agent's path, byte for byte as the server proxies it; any other goes to the API server.
async fn stand_in_proxy(api: &str, agent: &str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (api, agent) = (api.trim_start_matches("http://").to_string(), agent.trim_start_matches("http://").to_string());
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let (api, agent) = (api.clone(), agent.clone());
            tokio::spawn(async move {
                let mut head = Vec::new();
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    let mut buffer = [0u8; 4096];
                    match client.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buffer[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head).into_owned();
                let path = text.split_whitespace().nth(1).unwrap_or_default().to_string();
                let segments: Vec<&str> = path.split('?').next().unwrap_or_default().split('/').collect();
                let (target, path_there) = match segments.as_slice() {
                    ["", "k8s", "api", "v1", "namespaces", namespace, "pods", pod, "portforward"] => {
                        (agent.clone(), agent_paths::port_forward(namespace, pod))
                    }
                    _ => (api, path.clone()),
                };
                // The request as it was, for the path and Host of where it goes; an API request
                // closes its connection, so that the next one comes here again.
                let upgrade = target == agent;
                let head = text
                    .replacen(&path, &path_there, 1)
                    .split("\r\n")
                    .map(|line| match line.to_ascii_lowercase() {
                        lower if lower.starts_with("host:") => format!("Host: {target}"),
                        lower if lower.starts_with("connection:") && !upgrade => "Connection: close".to_string(),
                        _ => line.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join("\r\n");
                let head = if upgrade || text.to_ascii_lowercase().contains("\r\nconnection:") {
                    head
                } else {
                    head.replacen("\r\n", "\r\nConnection: close\r\n", 1)
                };
                let Ok(mut upstream) = tokio::net::TcpStream::connect(&target).await else { return };
                if upstream.write_all(head.as_bytes()).await.is_ok() {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                }
            });
        }
    });
    format!("http://{address}")
}

/// `kubectl port-forward pod/web :<port>` through [`stand_in_proxy`], once it listens: the
/// child, its local port, and its output so far.
async fn kubectl_port_forward(kubeconfig: &std::path::Path, port: u16) -> (tokio::process::Child, u16) {
    let mut child = tokio::process::Command::new("kubectl")
        .args(["--kubeconfig", kubeconfig.to_str().unwrap(), "port-forward", "pod/web", &format!(":{port}")])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl v1.32 on the PATH");
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    tokio::time::timeout(WAIT, tokio::io::AsyncBufReadExt::read_line(&mut stdout, &mut line)).await.unwrap().unwrap();
    // "Forwarding from 127.0.0.1:40123 -> 80"
    let local = line.split_whitespace().nth(2).and_then(|a| a.rsplit(':').next()).and_then(|p| p.parse().ok());
    let Some(local) = local else {
        let mut stderr = String::new();
        let _ = child.stderr.take().unwrap().read_to_string(&mut stderr).await;
        panic!("kubectl said {line:?} {stderr}");
    };
    tokio::spawn(async move { tokio::io::copy(&mut stdout, &mut tokio::io::sink()).await });
    (child, local)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_port_forward_reaches_the_pod_and_reports_a_refused_port() {
    let node = docker_node().await;
    web_pod(&node).await;
    let proxy = stand_in_proxy(&node.api.server.url, &node.agent.endpoint).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {proxy}/k8s\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n    namespace: default\ncurrent-context: c\nusers:\n- name: u\n  user: {{}}\n"
        ),
    )
    .unwrap();

    let (mut forward, local) = kubectl_port_forward(&kubeconfig, 80).await;
    let url = format!("http://127.0.0.1:{local}/page");
    let (first, second) = tokio::join!(reqwest::get(&url), reqwest::get(&url));
    for answer in [first, second] {
        assert_eq!(answer.unwrap().text().await.unwrap(), page());
    }
    assert_eq!(reqwest::get(&url).await.unwrap().text().await.unwrap(), page(), "a third connection on the same forward");
    forward.kill().await.unwrap();

    let (refused, local) = kubectl_port_forward(&kubeconfig, 9).await;
    assert!(reqwest::get(format!("http://127.0.0.1:{local}/")).await.is_err(), "nothing answers on port 9");
    let output = tokio::time::timeout(WAIT, refused.wait_with_output()).await.expect("kubectl ends after the error").unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("error forwarding port 9 to pod default/web"), "{stderr}");
    assert!(stderr.contains("connect: connection refused"), "{stderr}");

    node.agent.stop().await;
}
