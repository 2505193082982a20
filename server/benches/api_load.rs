//! Load benchmark of the real `shepherd` binary over loopback, on the durable SQLite store
//! (and, for comparison, the memory store):
//! create-pod throughput and latency at 1, 16 and 64 concurrent clients, and scheduling
//! throughput with 1,000 registered nodes. Bounded in requests and time; 127.0.0.1 only.
//!
//! `cargo bench -p server --bench api_load` prints a Markdown table for BENCHMARKS.md.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

struct Shepherd {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

async fn start(extra: &[&str]) -> Shepherd {
    let dir = tempfile::tempdir().expect("a temporary data dir");
    let mut command = Command::new(env!("CARGO_BIN_EXE_shepherd"));
    command.args(["--addr", "127.0.0.1:0"]).args(extra);
    if !extra.contains(&"--in-memory") {
        command.arg("--data-dir").arg(dir.path());
    }
    let mut child = command
        .env("RUST_LOG", "warn,server=info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the shepherd binary starts");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let url = loop {
        let line = lines.next_line().await.expect("read the log").expect("shepherd exited before listening");
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.split_whitespace().next().expect("an address").to_string();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Shepherd { child, url, _dir: dir }
}

fn pod(name: &str) -> Value {
    json!({
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web", "tier": "frontend"}},
        "spec": {"containers": [{"name": "web", "image": "minimal", "resources": {"memory": 67108864, "cpu": 250}}]}
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// `total` creates spread over `clients` concurrent keep-alive clients; at most 60 s.
async fn create_load(url: &str, clients: usize, total: usize, prefix: &str) -> (f64, Duration, Duration, usize) {
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (client, url, prefix) = (client.clone(), url.to_string(), prefix.to_string());
        let share = total / clients + usize::from(c < total % clients);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(share);
            for i in 0..share {
                if Instant::now() > deadline {
                    break;
                }
                let body = pod(&format!("{prefix}-{c}-{i}"));
                let sent = Instant::now();
                let response = client.post(format!("{url}/api/v1/pods")).json(&body).send().await.expect("the server answers");
                assert_eq!(response.status(), reqwest::StatusCode::CREATED);
                response.bytes().await.expect("the body");
                latencies.push(sent.elapsed());
            }
            latencies
        }));
    }
    let mut latencies = Vec::with_capacity(total);
    for t in tasks {
        latencies.extend(t.await.expect("a client task"));
    }
    let elapsed = started.elapsed();
    latencies.sort();
    (latencies.len() as f64 / elapsed.as_secs_f64(), percentile(&latencies, 0.50), percentile(&latencies, 0.99), latencies.len())
}

async fn bound_count(client: &reqwest::Client, url: &str) -> usize {
    let list: Value = client
        .get(format!("{url}/api/v1/pods?field_selector=spec.node_name%21%3D"))
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    list["items"].as_array().map_or(0, Vec::len)
}

async fn register_nodes(client: &reqwest::Client, url: &str, count: usize) {
    let mut batch = Vec::new();
    for i in 0..count {
        let (client, url) = (client.clone(), url.to_string());
        batch.push(tokio::spawn(async move {
            let name = format!("node-{i:04}");
            let node = json!({"metadata": {"name": name}, "status": {"capacity": {"cpu": 4000, "memory": 34359738368i64, "pods": 110}}});
            client.post(format!("{url}/api/v1/nodes")).json(&node).send().await.expect("register");
            let beat = json!({"conditions": [{"type": "Ready", "status": "True"}]});
            client.post(format!("{url}/api/v1/nodes/{name}/heartbeat")).json(&beat).send().await.expect("heartbeat");
        }));
        if batch.len() == 64 {
            for t in batch.drain(..) {
                t.await.expect("a registration");
            }
        }
    }
    for t in batch {
        t.await.expect("a registration");
    }
}

/// Pods bound per second with 1,000 nodes: `pods` created by 64 clients, timed from the
/// first create until the last pod is bound (at most 120 s).
async fn scheduling(pods: usize) -> (f64, f64, Duration) {
    let server = start(&[]).await;
    let client = reqwest::Client::new();
    register_nodes(&client, &server.url, 1000).await;
    let started = Instant::now();
    let (create_rate, _, _, created) = create_load(&server.url, 64, pods, "sched").await;
    let deadline = Instant::now() + Duration::from_secs(120);
    while bound_count(&client, &server.url).await < created && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = started.elapsed();
    let bound = bound_count(&client, &server.url).await;
    assert_eq!(bound, created, "every pod got bound within the time limit");
    (bound as f64 / elapsed.as_secs_f64(), create_rate, elapsed)
}

async fn run() {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("Load average when the run started: {}\n", load.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
    println!("### Create-pod throughput (loopback)\n");
    println!("| server | clients | creates | creates/s | p50 | p99 |");
    println!("|---|---:|---:|---:|---:|---:|");
    let configs: [(&str, &[&str]); 3] = [
        ("SQLite, API only (`--disable-scheduler`)", &["--disable-scheduler"]),
        ("SQLite, full pipeline (scheduler on, 0 nodes)", &[]),
        ("memory, API only (`--in-memory --disable-scheduler`)", &["--in-memory", "--disable-scheduler"]),
    ];
    for (label, extra) in configs {
        for (clients, total) in [(1, 2_000), (16, 10_000), (64, 20_000)] {
            let server = start(extra).await;
            let (rate, p50, p99, done) = create_load(&server.url, clients, total, "bench").await;
            println!("| {label} | {clients} | {done} | {rate:.0} | {} | {} |", ms(p50), ms(p99));
            drop(server.child);
        }
    }
    println!("\n### Scheduling throughput (1,000 nodes, real API)\n");
    let (bound_rate, create_rate, elapsed) = scheduling(10_000).await;
    println!("| nodes | pods | first create → last bound | pods bound/s | creates/s meanwhile |");
    println!("|---:|---:|---:|---:|---:|");
    println!("| 1,000 | 10,000 | {:.2} s | {bound_rate:.0} | {create_rate:.0} |", elapsed.as_secs_f64());
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a tokio runtime");
    runtime.block_on(run());
}
