//! How long the control plane is without a leader: three real `shepherd` servers on one etcd
//! member (started here, on loopback), at the default lease timings (15 s, 10 s, 2 s). Ten
//! times the leader is killed with SIGKILL, and ten times stopped with SIGTERM; each time
//! the bench measures from the signal until another server reports that it leads, then
//! starts a server again so that three stay. Bounded: 20 rounds, each within 60 s.
//!
//! `cargo bench -p server --bench failover` prints a Markdown table for BENCHMARKS.md.

use std::time::{Duration, Instant};

use shepherd_testing::{Etcd, ShepherdProcess};

const ROUNDS: usize = 10;
const ROUND_LIMIT: Duration = Duration::from_secs(60);

struct Server {
    id: String,
    process: ShepherdProcess,
}

async fn start(etcd: &Etcd, id: String) -> Server {
    let endpoints = etcd.endpoints().join(",");
    let args = ["--store", "etcd", "--etcd-endpoints", &endpoints, "--etcd-prefix", "/failover", "--server-id", &id, "--disable-scheduler"];
    // The scheduler off keeps the servers idle; the election and the controllers run as ever.
    Server { process: ShepherdProcess::start(env!("CARGO_BIN_EXE_shepherd"), &args).await, id }
}

/// The leader as `server` reports it, polled every 10 ms, once it is not `old`.
async fn new_leader(server: &Server, old: &str) -> String {
    let deadline = Instant::now() + ROUND_LIMIT;
    loop {
        if let Some(leader) = server.process.info().await.and_then(|i| i["leader"].as_str().map(str::to_string))
            && !leader.is_empty()
            && leader != old
        {
            return leader;
        }
        assert!(Instant::now() < deadline, "no new leader within {ROUND_LIMIT:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn summary(label: &str, mut times: Vec<Duration>) -> String {
    times.sort();
    let median = times[times.len() / 2];
    let worst = times[times.len() - 1];
    format!("| {label} | {} | {:.2} s | {:.2} s |", times.len(), median.as_secs_f64(), worst.as_secs_f64())
}

async fn run() {
    let etcd = Etcd::start(1).await;
    let mut next = 0;
    let mut servers = Vec::new();
    for _ in 0..3 {
        next += 1;
        servers.push(start(&etcd, format!("server-{next}")).await);
    }
    let mut leader = new_leader(&servers[0], "").await;
    let mut results = Vec::new();
    for signal in [libc::SIGKILL, libc::SIGTERM] {
        let mut times = Vec::new();
        for _ in 0..ROUNDS {
            let index = servers.iter().position(|s| s.id == leader).expect("the leader is one of ours");
            let mut gone = servers.remove(index);
            gone.process.signal(signal);
            let at = Instant::now();
            let successor = new_leader(&servers[0], &leader).await;
            times.push(at.elapsed());
            let _ = gone.process.child.wait().await;
            leader = successor;
            // A new identity: a server back under its old one would take its own lease at once.
            next += 1;
            servers.push(start(&etcd, format!("server-{next}")).await);
        }
        results.push(summary(if signal == libc::SIGKILL { "SIGKILL" } else { "SIGTERM" }, times));
    }
    println!("| leader stopped by | rounds | median until another leads | worst |");
    println!("|---|---:|---:|---:|");
    for row in results {
        println!("{row}");
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a tokio runtime");
    runtime.block_on(run());
}
