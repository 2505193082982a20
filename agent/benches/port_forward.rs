//! Port-forward throughput on the real Docker engine: a 100 MB download from busybox httpd
//! in a pod, through the agent's port-forward (SPDY/3.1 over WebSocket, the agent connecting
//! inside the pod) from a local listener as `sheepctl port-forward` has, against the same
//! download straight from the pod's host port on 127.0.0.1. Both in the same run, several
//! times each; the median and the best are printed.
//!
//! `cargo bench -p agent --bench port_forward -- [--megabytes N] [--runs N]`. Traffic stays
//! on 127.0.0.1; the pod is removed at the end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent::AgentConfig;
use agent::network::PodNetworkConfig;
use agent::runtime::{ContainerRuntime, DockerRuntime, LABEL_NODE};
use serde_json::json;
use shared::api::agent_paths;
use shared::api::port_forward::SUBPROTOCOL;
use shared::model::{Kind, Pod, PodPhase};
use shepherd_client::port_forward::PortForward;
use shepherd_client::{Client, DeleteOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// `GET /big` from `address`; the bytes of the answer.
async fn download(address: std::net::SocketAddr) -> usize {
    let mut connection = tokio::net::TcpStream::connect(address).await.unwrap();
    connection.write_all(b"GET /big HTTP/1.0\r\n\r\n").await.unwrap();
    let mut buffer = vec![0u8; 256 * 1024];
    let mut total = 0;
    loop {
        match connection.read(&mut buffer).await.unwrap() {
            0 => return total,
            n => total += n,
        }
    }
}

/// MB/s of `runs` downloads of `bytes` from `address`: the median and the best.
async fn measure(address: std::net::SocketAddr, bytes: usize, runs: usize) -> (f64, f64) {
    let mut rates = Vec::with_capacity(runs);
    for _ in 0..runs {
        let began = Instant::now();
        let received = download(address).await;
        assert!(received > bytes, "the whole file and its head came: {received} bytes");
        rates.push(bytes as f64 / 1e6 / began.elapsed().as_secs_f64());
    }
    rates.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (rates[rates.len() / 2], *rates.last().unwrap())
}

fn main() {
    shepherd_process::logging::init("warn");
    let mut args = std::env::args().skip(1);
    let (mut megabytes, mut runs) = (100usize, 5usize);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--megabytes" => megabytes = args.next().and_then(|n| n.parse().ok()).expect("--megabytes N"),
            "--runs" => runs = args.next().and_then(|n| n.parse().ok()).expect("--runs N"),
            _ => {} // cargo bench passes --bench
        }
    }
    let bytes = megabytes * 1024 * 1024;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let runtime = Arc::new(DockerRuntime::connect().await.expect("this benchmark needs a running Docker engine"));
        let busybox = std::path::Path::new(agent::image::DEFAULT_BUSYBOX);
        agent::image::bootstrap(runtime.client(), "minimal", busybox, false).await.expect("cannot bootstrap the minimal image");

        let server_shutdown = CancellationToken::new();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(server::run(listener, server::Config::in_memory(), server_shutdown.clone()));

        let node = format!("bench-pf-{}", std::process::id());
        let mut config = AgentConfig::new(&base);
        config.node_name = node.clone();
        config.pod_network =
            PodNetworkConfig { state_dir: std::env::temp_dir().join("shepherd-bench-pf").join(&node), ..PodNetworkConfig::default() };
        let agent_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", agent_listener.local_addr().unwrap());
        let shutdown = CancellationToken::new();
        let agent = tokio::spawn(agent::run_node(
            config,
            runtime.clone(),
            Arc::new(Client::new(&base, None).unwrap()),
            agent_listener,
            shutdown.clone(),
        ));

        let client = Client::new(&base, None).unwrap();
        let host_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let script = format!("mkdir -p /www && head -c {bytes} /dev/zero > /www/big && exec httpd -f -p 80 -h /www");
        let pod = json!({
            "kind": "Pod",
            "metadata": {"name": "big", "namespace": "default"},
            "spec": {
                "containers": [{"name": "web", "image": "minimal", "command": ["sh", "-c", script],
                                "ports": [{"container_port": 80, "host_port": host_port}]}],
                "termination_grace_period_seconds": 0
            }
        });
        let response = client.request(reqwest::Method::POST, "/api/v1/pods").json(&pod).send().await.unwrap();
        assert!(response.status().is_success(), "{}", response.text().await.unwrap());
        let began = Instant::now();
        let direct: std::net::SocketAddr = ([127, 0, 0, 1], host_port).into();
        // Running, and the file written: the host port answers.
        while !client.get::<Pod>("default", "big").await.is_ok_and(|p| p.status.phase == PodPhase::Running)
            || tokio::net::TcpStream::connect(direct).await.is_err()
        {
            assert!(began.elapsed() < Duration::from_secs(120), "the pod did not run within 120 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        let socket =
            Client::new(&endpoint, None).unwrap().websocket(&agent_paths::port_forward("default", "big"), SUBPROTOCOL).await.unwrap();
        let forward = Arc::new(PortForward::over(socket));
        let local = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let forwarded = local.local_addr().unwrap();
        let accepting = forward.clone();
        tokio::spawn(async move {
            while let Ok((connection, _)) = local.accept().await {
                let forward = accepting.clone();
                tokio::spawn(async move { forward.forward(80, connection).await.unwrap() });
            }
        });

        println!("| {megabytes} MiB download, {runs} runs each | median MB/s | best MB/s |");
        println!("|---|---|---|");
        let (median, best) = measure(direct, bytes, runs).await;
        println!("| straight from the pod's host port on 127.0.0.1 | {median:.0} | {best:.0} |");
        let (median, best) = measure(forwarded, bytes, runs).await;
        println!("| through port-forward (SPDY over WebSocket, agent inside the pod) | {median:.0} | {best:.0} |");

        forward.close().await;
        client.delete(Kind::Pod, "default", "big", &DeleteOptions::default()).await.unwrap();
        let began = Instant::now();
        while runtime.list(&[(LABEL_NODE, node.as_str())]).await.unwrap().iter().any(|c| c.name.contains("big")) {
            assert!(began.elapsed() < Duration::from_secs(60), "the pod's containers are still there");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        shutdown.cancel();
        agent.await.unwrap().unwrap();
        server_shutdown.cancel();
        server.await.unwrap().unwrap();
    });
}
