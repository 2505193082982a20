//! Pod start-up on the real Docker engine, with the real server in process, pods on the CNI
//! pod network (the agent's default; it needs containernetworking-plugins) unless a row says
//! otherwise:
//! 1. create→Running latency of single-container pods, one at a time and in a burst
//!    (from the server's `created_at` to the agent's Ready transition), with no warm pool;
//! 2. a deployment's replicas all Running with no warm pool (cold), on the CNI pod network and
//!    again on Docker's bridge network;
//! 3. the agent again with a warm pool as large as the deployment, filled before any clock
//!    starts (the time that takes is printed apart): single pods one at a time, then the
//!    deployment (warm);
//! 4. `docker service create --replicas` of the same image (Docker Swarm on the same engine,
//!    left afterwards) and the floor of as many sequential `docker run -d`.
//!
//! `cargo bench -p agent --bench docker_pods -- [--pods N] [--replicas N] [--skip-swarm]`
//! (bench/agent/run.sh). Traffic stays on 127.0.0.1; containers are removed at the end.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent::AgentConfig;
use agent::network::{Choice, CniNetwork, PodNetworkConfig, Subnet};
use agent::runtime::{ContainerRuntime, DockerRuntime, LABEL_NODE, LABEL_SANDBOX, LABEL_SANDBOX_ID};
use agent::sandbox::{Owner, PoolStatus, owner};
use serde_json::{Value, json};
use shared::model::{Kind, Lease, Node, Pod, PodPhase, conditions, find_condition};
use shared::readiness::DEFAULT_NODE_MONITOR_GRACE;
use shepherd_client::{Client, DeleteOptions, Selection};
use tokio_util::sync::CancellationToken;

struct Options {
    pods: usize,
    replicas: usize,
    swarm: bool,
}

fn options() -> Options {
    let mut options = Options { pods: 100, replicas: 50, swarm: true };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--pods" => options.pods = args.next().and_then(|n| n.parse().ok()).expect("--pods N"),
            "--replicas" => options.replicas = args.next().and_then(|n| n.parse().ok()).expect("--replicas N"),
            "--skip-swarm" => options.swarm = false,
            _ => {} // cargo bench passes --bench
        }
    }
    options
}

struct Bench {
    client: Client,
    /// For the agent's own API.
    http: reqwest::Client,
    runtime: Arc<DockerRuntime>,
    node: String,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn summary(name: &str, mut millis: Vec<f64>) {
    millis.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "| {name} | {} | {:.0} | {:.0} | {:.0} | {:.0} |",
        millis.len(),
        percentile(&millis, 50.0),
        percentile(&millis, 90.0),
        percentile(&millis, 99.0),
        millis.last().unwrap()
    );
}

/// Milliseconds from the server's creation stamp to the agent's Ready=True transition.
fn start_latency(pod: &Pod) -> Option<f64> {
    let created = pod.metadata.created_at?;
    let ready = find_condition(&pod.status.conditions, conditions::READY).filter(|c| c.status == conditions::TRUE)?;
    Some((ready.last_transition_time? - created).num_microseconds()? as f64 / 1000.0)
}

fn pod_body(name: &str) -> Value {
    json!({
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"bench": "latency"}},
        "spec": {
            "containers": [{"name": "main", "image": "minimal", "command": ["sleep", "3600"]}],
            "restart_policy": "Always",
            "termination_grace_period_seconds": 0
        }
    })
}

impl Bench {
    async fn post(&self, path: &str, body: &Value) {
        let response = self.client.request(reqwest::Method::POST, path).json(body).send().await.unwrap();
        assert!(response.status().is_success(), "POST {path}: {}", response.text().await.unwrap());
    }

    async fn pods(&self, selector: &str) -> Vec<Pod> {
        let selection = Selection { label_selector: Some(selector.to_string()), ..Selection::namespace(Some("default")) };
        self.client.list::<Pod>(&selection).await.unwrap().items
    }

    async fn wait_running(&self, selector: &str, count: usize, limit: Duration) -> Vec<Pod> {
        let began = Instant::now();
        loop {
            let pods = self.pods(selector).await;
            if pods.len() == count && pods.iter().all(|p| p.status.phase == PodPhase::Running) {
                return pods;
            }
            if began.elapsed() > limit {
                let statuses: Vec<String> = pods
                    .iter()
                    .map(|p| format!("{} node={:?} {}: {:?}", p.metadata.name, p.spec.node_name, p.display_status(), p.status.conditions))
                    .collect();
                panic!("{count} pods ({selector}) not Running within {limit:?}: {statuses:#?}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn delete_pods(&self, selector: &str) {
        for pod in self.pods(selector).await {
            self.client.delete(Kind::Pod, "default", &pod.metadata.name, &DeleteOptions::default()).await.unwrap();
        }
        self.wait_no_containers().await;
    }

    async fn wait_node_ready(&self) {
        let began = Instant::now();
        loop {
            let node = self.client.get::<Node>("", &self.node).await;
            let lease = self.client.get::<Lease>("", &self.node).await.ok();
            if node.is_ok_and(|n| n.readiness(lease.as_ref(), chrono::Utc::now(), DEFAULT_NODE_MONITOR_GRACE).is_ready()) {
                return;
            }
            assert!(began.elapsed() < Duration::from_secs(30), "node {} did not register as Ready", self.node);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the node has no container but its warm pool's.
    async fn wait_no_containers(&self) {
        let began = Instant::now();
        loop {
            let left = self.runtime.list(&[(LABEL_NODE, self.node.as_str())]).await.unwrap();
            if left.iter().all(|c| c.labels.contains_key(LABEL_SANDBOX) && owner(&c.name) == Owner::Pool) {
                return;
            }
            assert!(began.elapsed() < Duration::from_secs(120), "containers of deleted pods are still there");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the agent at `endpoint` has `n` warm sandboxes ready; returns how long
    /// that took.
    async fn wait_pool(&self, endpoint: &str, n: usize) -> Duration {
        let began = Instant::now();
        loop {
            let status = match self.http.get(format!("{endpoint}/sandboxes")).send().await {
                Ok(response) => response.json::<PoolStatus>().await.ok(),
                Err(_) => None,
            };
            if status.is_some_and(|s| s.ready >= n) {
                return began.elapsed();
            }
            assert!(began.elapsed() < Duration::from_secs(600), "the warm pool is not at {n} after 600 s: {status:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// How many of the node's pod containers joined a sandbox.
    async fn in_sandboxes(&self) -> usize {
        let containers = self.runtime.list(&[(LABEL_NODE, self.node.as_str())]).await.unwrap();
        containers.iter().filter(|c| !c.label(LABEL_SANDBOX_ID).is_empty()).count()
    }

    async fn latency_one_at_a_time(&self, n: usize, label: &str) {
        let mut millis = Vec::with_capacity(n);
        for i in 0..n {
            let name = format!("seq-{i}");
            self.post("/api/v1/pods", &pod_body(&name)).await;
            let began = Instant::now();
            let pod = loop {
                let pod: Pod = self.client.get("default", &name).await.unwrap();
                if pod.status.phase == PodPhase::Running {
                    break pod;
                }
                assert!(began.elapsed() < Duration::from_secs(30), "pod {name} not Running within 30 s");
                tokio::time::sleep(Duration::from_millis(5)).await;
            };
            millis.push(start_latency(&pod).expect("a Running pod has a Ready transition"));
        }
        summary(&format!("{n} pods, one at a time{label}"), millis);
        self.delete_pods("bench=latency").await;
    }

    async fn latency_burst(&self, n: usize) {
        for i in 0..n {
            self.post("/api/v1/pods", &pod_body(&format!("burst-{i}"))).await;
        }
        let pods = self.wait_running("bench=latency", n, Duration::from_secs(300)).await;
        summary(&format!("{n} pods created at once"), pods.iter().filter_map(start_latency).collect());
        self.delete_pods("bench=latency").await;
    }

    /// Seconds until every replica runs, and how many of them joined a sandbox.
    async fn deployment(&self, replicas: usize) -> (Duration, usize) {
        let body = json!({
            "kind": "Deployment",
            "metadata": {"name": "bench", "namespace": "default"},
            "spec": {
                "replicas": replicas,
                "selector": {"app": "bench"},
                "template": {
                    "metadata": {"labels": {"app": "bench"}},
                    "spec": {
                        "containers": [{"name": "main", "image": "minimal", "command": ["sleep", "3600"]}],
                        "termination_grace_period_seconds": 0
                    }
                }
            }
        });
        let began = Instant::now();
        self.post("/api/v1/namespaces/default/deployments", &body).await;
        self.wait_running("app=bench", replicas, Duration::from_secs(300)).await;
        let took = began.elapsed();
        let joined = self.in_sandboxes().await;
        self.client.delete(Kind::Deployment, "default", "bench", &DeleteOptions::default()).await.unwrap();
        self.wait_no_containers().await;
        (took, joined)
    }
}

fn docker_cli(args: &[&str]) -> String {
    let output = Command::new("docker").args(args).output().expect("the docker CLI is needed for the comparison");
    assert!(output.status.success(), "docker {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

fn running_with_label(label: &str) -> usize {
    docker_cli(&["ps", "-q", "--filter", &format!("label={label}"), "--filter", "status=running"]).lines().count()
}

fn remove_with_label(label: &str) {
    let ids = docker_cli(&["ps", "-aq", "--filter", &format!("label={label}")]);
    let ids: Vec<&str> = ids.lines().collect();
    if !ids.is_empty() {
        let mut args = vec!["rm", "-f"];
        args.extend(ids);
        docker_cli(&args);
    }
}

/// `docker service create --replicas n` until n tasks run; leaves swarm mode afterwards.
fn swarm(replicas: usize) -> Option<Duration> {
    if docker_cli(&["info", "--format", "{{.Swarm.LocalNodeState}}"]) != "inactive" {
        println!("(swarm skipped: this engine is already in swarm mode; not touching it)");
        return None;
    }
    let had_gwbridge = !docker_cli(&["network", "ls", "-q", "--filter", "name=^docker_gwbridge$"]).is_empty();
    docker_cli(&["swarm", "init", "--advertise-addr", "127.0.0.1"]);
    let name = format!("shepherd-bench-{}", std::process::id());
    let label = format!("com.docker.swarm.service.name={name}");
    let began = Instant::now();
    let replicas_text = replicas.to_string();
    docker_cli(&[
        "service",
        "create",
        "-d",
        "--no-resolve-image",
        "--replicas",
        &replicas_text,
        "--name",
        &name,
        "minimal",
        "sleep",
        "3600",
    ]);
    while running_with_label(&label) < replicas {
        assert!(began.elapsed() < Duration::from_secs(300), "swarm did not run {replicas} tasks within 300 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = began.elapsed();
    docker_cli(&["service", "rm", &name]);
    let began = Instant::now();
    while !docker_cli(&["ps", "-aq", "--filter", &format!("label={label}")]).is_empty() && began.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(200));
    }
    docker_cli(&["swarm", "leave", "--force"]);
    if !had_gwbridge {
        let _ = Command::new("docker").args(["network", "rm", "docker_gwbridge"]).output();
    }
    Some(took)
}

/// The floor: `docker run -d` n times in a row.
fn docker_run_floor(replicas: usize) -> Duration {
    let label = format!("shepherd.bench-floor={}", std::process::id());
    let began = Instant::now();
    for _ in 0..replicas {
        docker_cli(&["run", "-d", "--label", &label, "minimal", "sleep", "3600"]);
    }
    let took = began.elapsed();
    remove_with_label(&label);
    took
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg").map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" ")).unwrap_or_default()
}

/// The bench's own agent state directory: sandbox namespaces and CNI results.
fn state_dir(node: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("shepherd-{node}"))
}

/// Takes down what the CNI networks of the bench's (removed) sandboxes left, if anything.
fn reclaim_networks(node: &str) {
    let config = PodNetworkConfig { state_dir: state_dir(node), ..PodNetworkConfig::default() };
    let network = CniNetwork::new(Subnet::parse(&config.subnet).unwrap(), &config.state_dir, &config.plugin_dirs);
    for sandbox in network.attached() {
        if let Err(e) = network.detach(&sandbox) {
            eprintln!("cannot take down the network of sandbox {sandbox}: {e}");
        }
    }
    let _ = std::fs::remove_dir_all(&config.state_dir);
}

/// Starts the node's agent with `warm` sandboxes in its pool, its pods on `network`; it
/// adopts what a previous one left. Returns its shutdown, its task and its API's address.
fn start_agent(
    base: &str,
    node: &str,
    runtime: &Arc<DockerRuntime>,
    warm: usize,
    network: Choice,
) -> (CancellationToken, tokio::task::JoinHandle<agent::Result<()>>, String) {
    let mut config = AgentConfig::new(base);
    config.node_name = node.to_string();
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.capacity.pods = 1000;
    config.backoff = agent::DEFAULT_BACKOFF;
    config.warm_sandboxes = warm;
    config.pod_network = PodNetworkConfig { choice: network, state_dir: state_dir(node), ..PodNetworkConfig::default() };
    let listener = std::net::TcpListener::bind(config.listen).unwrap();
    listener.set_nonblocking(true).unwrap();
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let api = Arc::new(Client::new(base, None).unwrap());
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(agent::run_node(config, runtime.clone(), api, listener, shutdown.clone()));
    (shutdown, task, endpoint)
}

fn main() {
    shepherd_process::logging::init("warn");
    let options = options();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let runtime = match DockerRuntime::connect().await {
            Ok(runtime) => Arc::new(runtime),
            Err(e) => panic!("this benchmark needs a running Docker engine: {e}"),
        };
        let busybox = std::path::Path::new(agent::image::DEFAULT_BUSYBOX);
        agent::image::bootstrap(runtime.client(), "minimal", busybox, false).await.expect("cannot bootstrap the minimal image");

        let server_shutdown = CancellationToken::new();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(server::run(listener, server::Config::in_memory(), server_shutdown.clone()));

        let node = format!("bench-{}", std::process::id());
        let (shutdown, agent, _) = start_agent(&base, &node, &runtime, 0, Choice::Cni);
        let bench = Bench { client: Client::new(&base, None).unwrap(), http: reqwest::Client::new(), runtime: runtime.clone(), node: node.clone() };
        bench.wait_no_containers().await;
        bench.wait_node_ready().await;
        let registered: Node = bench.client.get("", &node).await.unwrap();
        println!("pod network: {}", registered.status.node_info.pod_network);
        // Warm-up, not measured: the node registers, the watch connects, the network exists.
        bench.post("/api/v1/pods", &pod_body("warm-up")).await;
        bench.wait_running("bench=latency", 1, Duration::from_secs(60)).await;
        bench.delete_pods("bench=latency").await;
        println!("| create→Running | pods | p50 ms | p90 ms | p99 ms | max ms |");
        println!("|---|---|---|---|---|---|");
        let cold_load = load();
        bench.latency_one_at_a_time(options.pods, "").await;
        bench.latency_burst(options.pods).await;
        let (cold, cold_joined) = bench.deployment(options.replicas).await;
        let cold_load = format!("{cold_load} → {}", load());

        // The same node on Docker's bridge network, cold, for comparison.
        shutdown.cancel();
        agent.await.unwrap().unwrap();
        let (shutdown, agent, _) = start_agent(&base, &node, &runtime, 0, Choice::Docker);
        let docker_load = load();
        let (cold_docker, _) = bench.deployment(options.replicas).await;
        let docker_load = format!("{docker_load} → {}", load());

        // The same node again on CNI, now with a warm pool as large as the deployment.
        shutdown.cancel();
        agent.await.unwrap().unwrap();
        let n = options.replicas;
        let (shutdown, agent, endpoint) = start_agent(&base, &node, &runtime, n, Choice::Cni);
        let fill = bench.wait_pool(&endpoint, n).await;
        let warm_load = load();
        let singles = options.pods.min(n);
        bench.latency_one_at_a_time(singles, ", warm pool").await;
        bench.wait_pool(&endpoint, n).await;
        let before_deployment = load();
        let (warm, warm_joined) = bench.deployment(n).await;
        let warm_load = format!("{warm_load} → {}", load());
        shutdown.cancel();
        agent.await.unwrap().unwrap();
        server_shutdown.cancel();
        server.await.unwrap().unwrap();
        // The pool outlives its agent by design; the benchmark's goes with it.
        remove_with_label(&format!("{LABEL_NODE}={node}"));
        reclaim_networks(&node);

        println!();
        println!("| {n} replicas all running | seconds |");
        println!("|---|---|");
        println!("| Shepherd deployment, no warm pool (cold), CNI pod network | {:.2} |", cold.as_secs_f64());
        println!("| Shepherd deployment, no warm pool (cold), Docker bridge network | {:.2} |", cold_docker.as_secs_f64());
        println!(
            "| Shepherd deployment, warm pool of {n} filled before the clock (in {:.1} s) | {:.2} |",
            fill.as_secs_f64(),
            warm.as_secs_f64()
        );
        let swarm_load = load();
        let swarm = if options.swarm { tokio::task::spawn_blocking(move || swarm(n)).await.unwrap() } else { None };
        if let Some(swarm) = swarm {
            println!("| docker service create --replicas {n} (Swarm) | {:.2} |", swarm.as_secs_f64());
        }
        let floor = tokio::task::spawn_blocking(move || docker_run_floor(n)).await.unwrap();
        println!("| {n} × docker run -d, one after another (floor) | {:.2} |", floor.as_secs_f64());
        println!();
        println!("pods that joined a sandbox: cold {cold_joined} of {n}, warm {warm_joined} of {n}");
        println!(
            "load average (1, 5, 15 min): cold part {cold_load}; cold on Docker's network {docker_load}; warm part {warm_load} (before the warm deployment {before_deployment}); before Swarm {swarm_load}; end {}",
            load()
        );
    });
}
