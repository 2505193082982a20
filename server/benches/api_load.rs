//! Load benchmark of the real `shepherd` binary over loopback, on the durable SQLite store
//! (and, for comparison, the memory store):
//! create-pod throughput and latency at 1, 16 and 64 concurrent clients, and scheduling
//! throughput with 1,000 registered nodes. Bounded in requests and time; 127.0.0.1 only.
//!
//! `cargo bench -p server --bench api_load` prints a Markdown table for BENCHMARKS.md;
//! `-- stores` compares durable creates on SQLite and on etcd (one member, three).

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use shared::model::NodeResources;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
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

/// The reference pod (250m, 64Mi) as JSON around its name, so that a client formats a
/// request with one copy of the name and no JSON serializer.
const POD_HEAD: &str = r#"{"kind":"Pod","metadata":{"name":""#;
const POD_TAIL: &str = r#"","labels":{"app":"web","tier":"frontend"}},"spec":{"containers":[{"name":"web","image":"minimal","resources":{"memory":67108864,"cpu":250}}]}}"#;

/// One keep-alive HTTP/1.1 connection that POSTs pods and reads each whole answer: a
/// load generator cheap enough to leave the two cores to the server. The server under
/// test still gets real requests (headers, JSON body) and sends full responses.
struct Connection {
    stream: TcpStream,
    host: String,
    request: Vec<u8>,
    answer: Vec<u8>,
}

impl Connection {
    async fn open(url: &str) -> Connection {
        let host = url.trim_start_matches("http://").to_string();
        let stream = TcpStream::connect(&host).await.expect("connect to the server");
        stream.set_nodelay(true).expect("TCP_NODELAY");
        Connection { stream, host, request: Vec::with_capacity(512), answer: Vec::with_capacity(4096) }
    }

    /// POSTs the pod `name` to `/api/v1/pods` and returns the status code once the whole
    /// body has arrived.
    async fn create_pod(&mut self, name: &str) -> u16 {
        use std::io::Write as _;
        let length = POD_HEAD.len() + name.len() + POD_TAIL.len();
        self.request.clear();
        write!(
            self.request,
            "POST /api/v1/pods HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n{POD_HEAD}{name}{POD_TAIL}",
            self.host
        )
        .expect("format a request");
        self.stream.write_all(&self.request).await.expect("send a request");
        self.read_answer().await
    }

    async fn read_answer(&mut self) -> u16 {
        self.answer.clear();
        let (head_end, status, length) = loop {
            if let Some(end) = self.answer.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = std::str::from_utf8(&self.answer[..end]).expect("an ASCII response head");
                let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status line");
                let length = head
                    .lines()
                    .find_map(|l| l.split_once(':').filter(|(n, _)| n.eq_ignore_ascii_case("content-length")))
                    .map(|(_, v)| v.trim().parse::<usize>().expect("a numeric Content-Length"))
                    .expect("the server sends Content-Length");
                break (end + 4, status, length);
            }
            self.fill().await;
        };
        while self.answer.len() < head_end + length {
            self.fill().await;
        }
        assert_eq!(self.answer.len(), head_end + length, "one answer per request");
        status
    }

    async fn fill(&mut self) {
        let read = self.stream.read_buf(&mut self.answer).await.expect("read the answer");
        assert!(read > 0, "the server closed the connection");
    }
}

/// CPU time (user + system) a process has used so far, from `/proc/<pid>/stat`.
fn cpu_time(pid: &str) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|u| u.parse().ok()).unwrap_or(0) + fields.get(12).and_then(|s| s.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_micros(ticks * 1_000_000 / hz)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// What one create run measured.
struct Load {
    rate: f64,
    p50: Duration,
    p99: Duration,
    done: usize,
    /// Server and load-generator CPU time per create.
    server_cpu: Duration,
    client_cpu: Duration,
}

/// How a run sends its creates.
#[derive(Clone, Copy)]
enum Pace {
    /// Closed loop: each client sends its next create as soon as the answer arrives, so
    /// the run finds the highest rate, and latency is what that saturation costs.
    AsFastAsPossible,
    /// Open loop at this many creates per second in total: client `c` sends its `i`-th
    /// create at `start + (i * clients + c) / rate`. When an answer comes after the next
    /// planned moment, the next create's latency counts from that planned moment, so a
    /// slow server also pays for the creates queued behind it (no coordinated omission).
    Fixed(f64),
}

/// `total` creates spread over `clients` concurrent keep-alive connections; at most 60 s.
async fn create_load(server: &Shepherd, clients: usize, total: usize, prefix: &str, pace: Pace) -> Load {
    let url = &server.url;
    let pid = server.child.id().map(|p| p.to_string()).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut connections = Vec::with_capacity(clients);
    for _ in 0..clients {
        connections.push(Connection::open(url).await);
    }
    let (server_before, client_before) = (cpu_time(&pid), cpu_time("self"));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (c, mut connection) in connections.into_iter().enumerate() {
        let prefix = prefix.to_string();
        let share = total / clients + usize::from(c < total % clients);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(share);
            let mut name = String::with_capacity(64);
            let mut previous_answer = started;
            for i in 0..share {
                if Instant::now() > deadline {
                    break;
                }
                name.clear();
                std::fmt::Write::write_fmt(&mut name, format_args!("{prefix}-{c}-{i}")).expect("format a name");
                let since = match pace {
                    Pace::AsFastAsPossible => Instant::now(),
                    Pace::Fixed(rate) => {
                        let planned = started + Duration::from_secs_f64((i * clients + c) as f64 / rate);
                        if previous_answer > planned {
                            // The previous answer came late: the wait counts.
                            planned
                        } else {
                            // A timer that wakes late, or a task polled late, is the
                            // generator's delay, not the server's.
                            tokio::time::sleep_until(planned.into()).await;
                            Instant::now()
                        }
                    }
                };
                let status = connection.create_pod(&name).await;
                assert_eq!(status, 201, "creating pod {name}");
                previous_answer = Instant::now();
                latencies.push(previous_answer - since);
            }
            latencies
        }));
    }
    let mut latencies = Vec::with_capacity(total);
    for t in tasks {
        latencies.extend(t.await.expect("a client task"));
    }
    let elapsed = started.elapsed();
    let per_create = |d: Duration| d / latencies.len().max(1) as u32;
    let (server_cpu, client_cpu) = (per_create(cpu_time(&pid) - server_before), per_create(cpu_time("self") - client_before));
    latencies.sort();
    Load {
        rate: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
        done: latencies.len(),
        server_cpu,
        client_cpu,
    }
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
            // Registered as its agent registers it: Ready, and stamped with a first heartbeat.
            let mut node = shepherd_testing::node(&format!("node-{i:04}"));
            node.capacity = NodeResources { cpu: 4000, memory: 32 << 30, pods: 110 };
            let body = shepherd_testing::registration(&node);
            client.post(format!("{url}/api/v1/nodes")).json(&body).send().await.expect("register").error_for_status().expect("registered");
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
    let load = create_load(&server, 64, pods, "sched", Pace::AsFastAsPossible).await;
    let (create_rate, created) = (load.rate, load.done);
    let deadline = Instant::now() + Duration::from_secs(120);
    while bound_count(&client, &server.url).await < created && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = started.elapsed();
    let bound = bound_count(&client, &server.url).await;
    assert_eq!(bound, created, "every pod got bound within the time limit");
    (bound as f64 / elapsed.as_secs_f64(), create_rate, elapsed)
}

fn load_average() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

const TABLE_HEAD: &str = "| server | clients | creates | creates/s | p50 | p99 | server CPU/create | bench CPU/create |\n|---|---:|---:|---:|---:|---:|---:|---:|";

fn row(label: &str, clients: usize, load: &Load) -> String {
    format!(
        "| {label} | {clients} | {} | {:.0} | {} | {} | {} µs | {} µs |",
        load.done,
        load.rate,
        ms(load.p50),
        ms(load.p99),
        load.server_cpu.as_micros(),
        load.client_cpu.as_micros()
    )
}

/// The goal's rate: 64 clients together offer this many creates per second.
const GOAL_RATE: f64 = 5_000.0;

/// The issue's goal, measured `rounds` times on SQLite, API only, with the server's
/// default runtime: 64 clients offering [`GOAL_RATE`] (does the server keep up, and what
/// is p99 at that rate?) and 64 clients as fast as they can (the saturation rate, and the
/// latency it costs). Each round runs both, so they share the machine's load.
async fn goal(rounds: usize, grown: bool) {
    let store = if grown { "a store grown by 20,000 creates first" } else { "a fresh store" };
    println!("Goal runs (64 clients, 20,000 creates, SQLite, API only, {store}), load average at start: {}\n", load_average());
    println!("{TABLE_HEAD}");
    let variants = [
        ("SQLite, API only, 64 clients offering 5,000/s", Pace::Fixed(GOAL_RATE)),
        ("SQLite, API only, 64 clients as fast as possible", Pace::AsFastAsPossible),
    ];
    let mut results: Vec<Vec<Load>> = variants.iter().map(|_| Vec::new()).collect();
    for _ in 0..rounds {
        for (v, (label, pace)) in variants.iter().enumerate() {
            let server = start(&["--disable-scheduler"]).await;
            if grown {
                // A server that has run a while: its WAL and database files have their size.
                create_load(&server, 64, 20_000, "grow", Pace::AsFastAsPossible).await;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            let load = create_load(&server, 64, 20_000, "goal", *pace).await;
            println!("{} (load {})", row(label, 64, &load), load_average());
            results[v].push(load);
        }
    }
    println!("\nMedians over {rounds} rounds (p50 and p99 are the medians of each run's p50 and p99):\n");
    println!("{TABLE_HEAD}");
    for ((label, _), loads) in variants.iter().zip(&mut results) {
        let median = |mut values: Vec<Duration>| {
            values.sort();
            values[values.len() / 2]
        };
        let mut rates: Vec<f64> = loads.iter().map(|l| l.rate).collect();
        rates.sort_by(f64::total_cmp);
        let summary = Load {
            rate: rates[rates.len() / 2],
            p50: median(loads.iter().map(|l| l.p50).collect()),
            p99: median(loads.iter().map(|l| l.p99).collect()),
            done: loads.iter().map(|l| l.done).sum::<usize>() / loads.len(),
            server_cpu: median(loads.iter().map(|l| l.server_cpu).collect()),
            client_cpu: median(loads.iter().map(|l| l.client_cpu).collect()),
        };
        println!("{}", row(label, 64, &summary));
    }
}

async fn run() {
    println!("Load average when the run started: {}\n", load_average());
    println!("### Create-pod throughput (loopback)\n");
    println!("{TABLE_HEAD}");
    let configs: [(&str, &[&str]); 3] = [
        ("SQLite, API only (`--disable-scheduler`)", &["--disable-scheduler"]),
        ("SQLite, full pipeline (scheduler on, 0 nodes)", &[]),
        ("memory, API only (`--in-memory --disable-scheduler`)", &["--in-memory", "--disable-scheduler"]),
    ];
    for (label, extra) in configs {
        let runs = [(1, 2_000, Pace::AsFastAsPossible), (16, 10_000, Pace::AsFastAsPossible), (64, 20_000, Pace::AsFastAsPossible)];
        for (clients, total, pace) in runs.into_iter().chain([(64, 20_000, Pace::Fixed(GOAL_RATE))]) {
            let server = start(extra).await;
            let load = create_load(&server, clients, total, "bench", pace).await;
            let label = match pace {
                Pace::AsFastAsPossible => label.to_string(),
                Pace::Fixed(rate) => format!("{label}, offered {rate:.0}/s"),
            };
            println!("{}", row(&label, clients, &load));
            drop(server.child);
        }
    }
    println!("\n### Scheduling throughput (1,000 nodes, real API)\n");
    let (bound_rate, create_rate, elapsed) = scheduling(10_000).await;
    println!("| nodes | pods | first create → last bound | pods bound/s | creates/s meanwhile |");
    println!("|---:|---:|---:|---:|---:|");
    println!("| 1,000 | 10,000 | {:.2} s | {bound_rate:.0} | {create_rate:.0} |", elapsed.as_secs_f64());
}

/// Durable creates on each store in one run: SQLite, etcd with one member and with three
/// (members from Debian's etcd-server on loopback ports, started here).
async fn stores() {
    println!("Load average when the run started: {}\n", load_average());
    println!("### Durable creates by store (loopback, API only)\n");
    println!("{TABLE_HEAD}");
    let one = shepherd_testing::Etcd::start(1).await;
    let three = shepherd_testing::Etcd::start(3).await;
    let etcd = |members: &shepherd_testing::Etcd| {
        vec!["--disable-scheduler".to_string(), "--store".into(), "etcd".into(), "--etcd-endpoints".into(), members.endpoints().join(",")]
    };
    let configs = [
        ("SQLite (`--disable-scheduler`)", vec!["--disable-scheduler".to_string()]),
        ("etcd, 1 member (`--store etcd --disable-scheduler`)", etcd(&one)),
        ("etcd, 3 members (`--store etcd --disable-scheduler`)", etcd(&three)),
    ];
    for (run, (label, extra)) in configs.iter().enumerate() {
        for (clients, total) in [(1, 1_000), (16, 10_000), (64, 20_000)] {
            // Each server under a prefix of its own: etcd keeps what the one before made.
            let prefix = format!("/bench-{run}-{clients}");
            let mut args: Vec<&str> = extra.iter().map(String::as_str).collect();
            args.extend(["--etcd-prefix", &prefix]);
            let server = start(&args).await;
            let load = create_load(&server, clients, total, "bench", Pace::AsFastAsPossible).await;
            println!("{}", row(label, clients, &load));
            drop(server.child);
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `-- goal [rounds] [grown]` runs only the goal's rows,
    // `-- stores` the comparison of SQLite and etcd.
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a tokio runtime");
    match args.first().map(String::as_str) {
        Some("goal") => {
            let rounds = args.get(1).map_or(5, |r| r.parse().expect("the number of rounds"));
            let grown = match args.get(2).map(String::as_str) {
                None => false,
                Some("grown") => true,
                Some(other) => panic!("unknown argument {other:?}: `goal [rounds] [grown]`"),
            };
            runtime.block_on(goal(rounds, grown));
        }
        Some("stores") => runtime.block_on(stores()),
        Some(other) => panic!("unknown argument {other:?}: run with no argument for every table, `goal [rounds] [grown]` or `stores`"),
        None => runtime.block_on(run()),
    }
}
