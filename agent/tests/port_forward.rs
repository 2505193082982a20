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
