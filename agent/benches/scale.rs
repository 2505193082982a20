//! The whole system at scale on this machine (issue 15): the release `shepherd` server (in
//! memory, or on the store `--store` names) and one `shepherd-agent --runtime simulated
//! --simulate-nodes N` process, both on 127.0.0.1. Each round:
//! 1. waits until all N nodes are Ready and the watch history has filled with their lease
//!    renewals (`--settle`), then measures the idle server's CPU and RSS;
//! 2. creates P replicas (deployments of at most `MAX_REPLICAS` each) while a reader GETs
//!    one object in a loop: time to all bound and all Running (from the server's metrics),
//!    pod start latency (created_at → Ready), reader latency, peak CPU and RSS;
//! 3. deletes the deployments with the reader still going: time until no pod is left, and
//!    RSS 5 s and 2 min after they are gone (past the watch history's 75 s);
//! 4. counts failures: 410s the fleet's watcher saw (and, beside them, the watches the server
//!    ended for lagging, which resume without a 410), agent requests that timed out, and
//!    nodes that went NotReady.
//!
//! With `--rollout` (issue 34), the P replicas are one deployment (maxSurge and maxUnavailable
//! 25 %), and between 2 and 3 its image changes: a watcher of every pod (list + watch, as a
//! user's) counts at each event the pods that exist (terminating ones too) and the replicas
//! unavailable, while the bench times the fresh create and the rollout to completion, each
//! with the server's peak RSS, and the reader's latency during the rollout; each figure is
//! printed against its goal.
//!
//! `bench/scale/run.sh --nodes 1000 --replicas 10000 [--per-deployment N] [--rounds 3] [--server-arg FLAG]` (it builds the server
//! first). `--server-bin PATH` runs another build of the server. `--store sqlite` runs the server on SQLite in a fresh data directory, `--store etcd`
//! on a one-member etcd started for the round (Debian's etcd-server); `--replicas 0` measures
//! the idle server alone (issue 33). Every loop is bounded in count and time; traffic stays on
//! 127.0.0.1.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;
use shared::api::{WatchEvent, WatchEventType};
use shared::limits::MAX_REPLICAS;
use shared::model::{Deployment, Event, Kind, Object, Pod, ReplicaSet, Resource, conditions, find_condition};
use shared::rollout::{POD_TEMPLATE_HASH_LABEL, RolloutStatus, new_and_old_sets, rollout_status};
use shepherd_client::watcher::{Collection, Event as WatcherEvent, Watcher};
use shepherd_client::{Client, DeleteOptions, Selection};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::watch;

/// Where the server keeps its objects.
#[derive(Clone, Copy, PartialEq)]
enum StoreChoice {
    Memory,
    Sqlite,
    Etcd,
}

struct Options {
    store: StoreChoice,
    nodes: usize,
    replicas: usize,
    rounds: usize,
    /// The most replicas one deployment has: P replicas are split into deployments of this size.
    per_deployment: usize,
    /// The longest any phase may take before the round is reported as unfinished.
    timeout: Duration,
    /// How long the idle cluster runs before the idle window: by default the server's watch
    /// history age and 5 s, so that idle is read at its steady state, the history full of
    /// lease renewals, as it is again when "RSS 2 min after" is read.
    settle: Duration,
    idle_window: Duration,
    /// Flags passed on to the server, such as `--event-limit=100`.
    server_args: Vec<String>,
    /// Another `shepherd` binary than the one built beside the agent, to compare two builds.
    server_bin: Option<PathBuf>,
    /// Roll the deployment out to a new image once it is available (issue 34).
    rollout: bool,
}

/// When "RSS 2 min after" is read, from the moment the last pod is gone: past the server's
/// watch history age (75 s), which keeps the deleted pods' last states, and a few of its
/// event collections.
const LATER: Duration = Duration::from_secs(120);

fn options() -> Options {
    let mut options = Options {
        store: StoreChoice::Memory,
        nodes: 1000,
        replicas: 10_000,
        rounds: 1,
        per_deployment: MAX_REPLICAS as usize,
        timeout: Duration::from_secs(600),
        settle: server::config::DEFAULT_WATCH_HISTORY_AGE + Duration::from_secs(5),
        idle_window: Duration::from_secs(20),
        server_args: Vec::new(),
        server_bin: None,
        rollout: false,
    };
    let mut args = std::env::args().skip(1);
    let number = |name: &str, value: Option<String>| {
        value.and_then(|n| n.replace('_', "").parse::<u64>().ok()).unwrap_or_else(|| panic!("{name} N"))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--store" => {
                options.store = match args.next().as_deref() {
                    Some("memory") => StoreChoice::Memory,
                    Some("sqlite") => StoreChoice::Sqlite,
                    Some("etcd") => StoreChoice::Etcd,
                    _ => panic!("--store memory|sqlite|etcd"),
                }
            }
            "--nodes" => options.nodes = number("--nodes", args.next()) as usize,
            "--replicas" => options.replicas = number("--replicas", args.next()) as usize,
            "--rounds" => options.rounds = number("--rounds", args.next()).max(1) as usize,
            "--per-deployment" => {
                options.per_deployment = (number("--per-deployment", args.next()) as usize).clamp(1, MAX_REPLICAS as usize);
            }
            "--timeout" => options.timeout = Duration::from_secs(number("--timeout (seconds)", args.next())),
            "--settle" => options.settle = Duration::from_secs(number("--settle (seconds)", args.next())),
            "--idle-window" => options.idle_window = Duration::from_secs(number("--idle-window (seconds)", args.next())),
            "--server-arg" => options.server_args.push(args.next().expect("--server-arg FLAG")),
            "--server-bin" => options.server_bin = Some(PathBuf::from(args.next().expect("--server-bin PATH"))),
            "--rollout" => options.rollout = true,
            _ => {} // cargo bench passes --bench
        }
    }
    assert!(
        !options.rollout || (options.replicas > 0 && options.replicas <= options.per_deployment),
        "--rollout rolls one deployment out: --replicas must be between 1 and --per-deployment ({})",
        options.per_deployment
    );
    options
}

/// A child process whose stderr lines are kept.
struct Process {
    child: Child,
    pid: u32,
    log: Arc<Mutex<Vec<String>>>,
}

impl Process {
    /// Starts `command`; returns once a line of its log contains `marker`, with that line.
    async fn start(mut command: Command, marker: &str) -> (Process, String) {
        let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).kill_on_drop(true).spawn().expect("the process starts");
        let pid = child.id().expect("a pid");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let log = Arc::new(Mutex::new(Vec::new()));
        let found = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let line = lines.next_line().await.expect("read the log").expect("the process exited while starting");
                log.lock().unwrap().push(line.clone());
                if line.contains(marker) {
                    break line;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no {marker:?} in the log within 60 s"));
        let keep = log.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                keep.lock().unwrap().push(line);
            }
        });
        (Process { child, pid, log }, found)
    }

    /// How many log lines contain `text`; the first few are printed, to say which part failed.
    fn log_lines_with(&self, text: &str) -> usize {
        let log = self.log.lock().unwrap();
        let lines: Vec<&String> = log.iter().filter(|l| l.contains(text)).collect();
        for line in lines.iter().take(3) {
            eprintln!("{line}");
        }
        lines.len()
    }

    async fn stop(mut self) {
        let _ = std::process::Command::new("kill").args(["-TERM", &self.pid.to_string()]).status();
        if tokio::time::timeout(Duration::from_secs(20), self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }
}

/// CPU seconds (user + system) the process has used so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|f| f.parse().ok()).unwrap_or(0) + fields.get(12).and_then(|f| f.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf reads a constant.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    ticks as f64 / per_second
}

/// `VmRSS` or `VmHWM` of the process, in MiB.
fn memory_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: f64 =
        status.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    kib / 1024.0
}

/// Starts the process's `VmHWM` afresh from its current RSS (`clear_refs` 5), so that the
/// next read of it is the peak of one phase.
fn reset_peak_rss(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset the server's peak RSS");
}

/// Samples a process's CPU (% of one core, per second) and RSS until told to stop, or for
/// `limit` at most. Returns the peaks.
fn sample(pid: u32, limit: Duration) -> (watch::Sender<bool>, tokio::task::JoinHandle<(f64, f64)>) {
    let (stop, mut stopped) = watch::channel(false);
    let task = tokio::spawn(async move {
        let (mut peak_cpu, mut peak_rss) = (0.0f64, memory_mib(pid, "VmRSS"));
        let began = Instant::now();
        let (mut last, mut at) = (cpu_seconds(pid), Instant::now());
        while began.elapsed() < limit && !*stopped.borrow() {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = stopped.changed() => {}
            }
            let (now, when) = (cpu_seconds(pid), Instant::now());
            peak_cpu = peak_cpu.max(100.0 * (now - last) / when.duration_since(at).as_secs_f64());
            peak_rss = peak_rss.max(memory_mib(pid, "VmRSS"));
            (last, at) = (now, when);
        }
        (peak_cpu, peak_rss)
    });
    (stop, task)
}

/// GETs one node in a loop, 20 ms apart, until told to stop (or 30,000 GETs, or `limit`).
/// Returns each answered GET's latency in milliseconds.
fn read_loop(client: Client, limit: Duration) -> (watch::Sender<bool>, tokio::task::JoinHandle<Vec<f64>>) {
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(async move {
        let began = Instant::now();
        let mut millis = Vec::new();
        while millis.len() < 30_000 && began.elapsed() < limit && !*stopped.borrow() {
            let at = Instant::now();
            if client.get_object(Kind::Node, "", "sim-0").await.is_ok() {
                millis.push(at.elapsed().as_secs_f64() * 1000.0);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        millis
    });
    (stop, task)
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

/// The server's metrics: each sample's value, summed over label sets, by name.
async fn metrics(client: &Client) -> HashMap<String, f64> {
    let Ok(response) = client.request(Method::GET, "/metrics").send().await else { return HashMap::new() };
    let text = response.text().await.unwrap_or_default();
    let mut values = HashMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((name, value)) = line.rsplit_once(' ') else { continue };
        let name = name.split('{').next().unwrap_or(name);
        *values.entry(name.to_string()).or_insert(0.0) += value.parse::<f64>().unwrap_or(0.0);
    }
    values
}

/// Polls the server's metrics every 250 ms until `done` holds or `limit` passes; returns
/// how long that took, or `None` at the limit.
async fn until(client: &Client, limit: Duration, done: impl Fn(&HashMap<String, f64>) -> bool) -> Option<Duration> {
    let began = Instant::now();
    while began.elapsed() < limit {
        if done(&metrics(client).await) {
            return Some(began.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}

async fn ready_nodes(client: &Client) -> (usize, usize) {
    match shepherd_testing::ready_nodes(client).await {
        Some((ready, total)) => (ready.len(), total),
        None => (0, 0),
    }
}

/// Milliseconds from the server's creation stamp to the agent's Ready=True transition.
fn start_latency(pod: &Pod) -> Option<f64> {
    let created = pod.metadata.created_at?;
    let ready = find_condition(&pod.status.conditions, conditions::READY).filter(|c| c.status == conditions::TRUE)?;
    Some((ready.last_transition_time? - created).num_microseconds()? as f64 / 1000.0)
}

/// One pod as the rollout's watcher keeps it.
struct WatchedPod {
    hash: String,
    terminating: bool,
    /// Ready and not terminating: available, as the deployment's pods have no minReadySeconds.
    available: bool,
}

impl WatchedPod {
    fn of(pod: &Pod) -> WatchedPod {
        let terminating = pod.metadata.deletion_timestamp.is_some();
        WatchedPod {
            hash: pod.metadata.labels.get(POD_TEMPLATE_HASH_LABEL).cloned().unwrap_or_default(),
            terminating,
            available: !terminating && pod.is_ready(),
        }
    }
}

/// What a watcher of every pod of the deployment sees, kept at each event: the pods that
/// exist (terminating ones too), by template hash, and from the moment the rollout begins the
/// most that existed at once and the most replicas unavailable at once, as `maxUnavailable`
/// counts them: `replicas` minus the available pods.
#[derive(Default)]
struct PodCounts {
    desired: usize,
    pods: HashMap<String, WatchedPod>,
    by_hash: HashMap<String, usize>,
    terminating: usize,
    available: usize,
    /// Set as the image changes: the maxima and `events` count from then.
    rolling: bool,
    max_existing: usize,
    /// Existing and not terminating: what Kubernetes holds within `replicas + maxSurge`.
    max_active: usize,
    max_unavailable: usize,
    /// Existing pods that are not available, terminating ones too.
    max_not_available: usize,
    events: usize,
    /// The first list and each one after the watch fell behind.
    lists: usize,
}

impl PodCounts {
    fn remove(&mut self, name: &str) {
        let Some(pod) = self.pods.remove(name) else { return };
        self.terminating -= usize::from(pod.terminating);
        self.available -= usize::from(pod.available);
        if let Some(n) = self.by_hash.get_mut(&pod.hash) {
            *n -= 1;
            if *n == 0 {
                self.by_hash.remove(&pod.hash);
            }
        }
    }

    fn insert(&mut self, pod: &Pod) {
        let watched = WatchedPod::of(pod);
        self.terminating += usize::from(watched.terminating);
        self.available += usize::from(watched.available);
        *self.by_hash.entry(watched.hash.clone()).or_default() += 1;
        self.pods.insert(pod.metadata.name.clone(), watched);
    }

    /// Takes a full list (the first, or one after the watch fell behind) in place of what was known.
    fn listed(&mut self, objects: &[Object]) {
        *self = PodCounts { desired: self.desired, rolling: self.rolling, events: self.events, lists: self.lists + 1, ..self.maxima() };
        for object in objects {
            if let Object::Pod(pod) = object {
                self.insert(pod);
            }
        }
        self.note();
    }

    fn changed(&mut self, event: WatchEvent) {
        let Some(Object::Pod(pod)) = event.object else { return };
        self.remove(&pod.metadata.name);
        if event.type_ != WatchEventType::Deleted {
            self.insert(&pod);
        }
        self.events += usize::from(self.rolling);
        self.note();
    }

    fn note(&mut self) {
        if !self.rolling {
            return;
        }
        let existing = self.pods.len();
        self.max_existing = self.max_existing.max(existing);
        self.max_active = self.max_active.max(existing - self.terminating);
        self.max_unavailable = self.max_unavailable.max(self.desired.saturating_sub(self.available));
        self.max_not_available = self.max_not_available.max(existing - self.available);
    }

    /// The maxima alone, on an empty view.
    fn maxima(&self) -> PodCounts {
        PodCounts {
            max_existing: self.max_existing,
            max_active: self.max_active,
            max_unavailable: self.max_unavailable,
            max_not_available: self.max_not_available,
            ..PodCounts::default()
        }
    }

    /// Every pod that exists runs the template of `hash`, and there are `desired` of them.
    fn only(&self, hash: &str) -> bool {
        self.pods.len() == self.desired && self.by_hash.len() == 1 && self.by_hash.contains_key(hash)
    }
}

/// Watches every pod of the bench's deployments through the client's watcher (a list, then
/// changes from its revision, a list again if it falls behind), counting at each event.
fn watch_pods(client: Client, desired: usize) -> (Arc<Mutex<PodCounts>>, tokio::task::JoinHandle<()>) {
    let counts = Arc::new(Mutex::new(PodCounts { desired, ..PodCounts::default() }));
    let kept = counts.clone();
    let selection = Selection { label_selector: Some("app=scale".into()), ..Selection::namespace(Some("default")) };
    let mut watcher = Watcher::new(Collection { client, kind: Kind::Pod, selection }, shared::watch::DEFAULT_BACKOFF);
    let task = tokio::spawn(async move {
        while let Ok(event) = watcher.next().await {
            match event {
                WatcherEvent::Listed { objects, .. } => kept.lock().unwrap().listed(&objects),
                WatcherEvent::Changed(event) => kept.lock().unwrap().changed(*event),
            }
        }
    });
    (counts, task)
}

/// Whether the deployment has rolled out completely: `kubectl rollout status`'s rule (the
/// controller has seen the latest spec, every replica is updated and available, none old is
/// left), `replicas`, `updatedReplicas` and `availableReplicas` all at `desired`, its old
/// ReplicaSets at 0, and in the watcher's view only the new set's pods, `desired` of them.
async fn rolled_out(client: &Client, name: &str, desired: usize, counts: &Mutex<PodCounts>) -> bool {
    let Ok(d) = client.get::<Deployment>("default", name).await else { return false };
    let status = &d.status;
    let desired = desired as i32;
    if !matches!(rollout_status(&d), Ok(RolloutStatus::Done(_)))
        || [status.replicas, status.updated_replicas, status.available_replicas] != [desired; 3]
    {
        return false;
    }
    let Ok(sets) = client.list::<ReplicaSet>(&Selection::namespace(Some("default"))).await else { return false };
    let (new, old) = new_and_old_sets(&d, &sets.items);
    let Some(hash) = new.and_then(|rs| rs.spec.template.metadata.labels.get(POD_TEMPLATE_HASH_LABEL)) else { return false };
    old.iter().all(|rs| rs.spec.replicas == 0 && rs.status.replicas == 0) && counts.lock().unwrap().only(hash)
}

/// Polls [`rolled_out`] every 250 ms until it holds or `limit` passes; how long that took.
async fn until_rolled_out(client: &Client, name: &str, desired: usize, counts: &Mutex<PodCounts>, limit: Duration) -> Option<Duration> {
    let began = Instant::now();
    while began.elapsed() < limit {
        if rolled_out(client, name, desired, counts).await {
            return Some(began.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}

/// A rollout's figures (`--rollout`).
#[derive(Debug, Default, Clone)]
struct RolloutRow {
    max_surge: usize,
    max_unavailable: usize,
    /// From the create until the fresh deployment has rolled out, and the server's peak RSS then.
    create: Option<f64>,
    create_peak_rss: f64,
    /// From the image's change until the deployment has rolled out again, and the peak then.
    rollout: Option<f64>,
    rollout_peak_rss: f64,
    read_p50: f64,
    read_p99: f64,
    seen_existing: usize,
    seen_active: usize,
    seen_unavailable: usize,
    seen_not_available: usize,
    events: usize,
    relists: usize,
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "FAIL" }
}

impl RolloutRow {
    fn print(&self, replicas: usize) {
        let limit_existing = replicas + self.max_surge;
        let ratio = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a / b);
        let time_ratio = ratio(self.rollout, self.create);
        let rss_ratio = self.rollout_peak_rss / self.create_peak_rss;
        println!();
        println!(
            "| rollout of {replicas} replicas (maxSurge {}, maxUnavailable {}) | measured | goal | |",
            self.max_surge, self.max_unavailable
        );
        println!("|---|---:|---:|---|");
        println!(
            "| pods existing at once, terminating ones too | {} | ≤ {limit_existing} | {} |",
            self.seen_existing,
            verdict(self.seen_existing <= limit_existing)
        );
        println!(
            "| replicas unavailable at once (replicas − available) | {} | ≤ {} | {} |",
            self.seen_unavailable,
            self.max_unavailable,
            verdict(self.seen_unavailable <= self.max_unavailable)
        );
        println!(
            "| rollout / fresh create, until rolled out | {} / {} = {} | ≤ 2× | {} |",
            seconds(self.rollout),
            seconds(self.create),
            time_ratio.map_or("-".to_string(), |r| format!("{r:.2}×")),
            verdict(time_ratio.is_some_and(|r| r <= 2.0))
        );
        println!(
            "| reader p50 / p99 during the rollout | {:.1} / {:.1} ms | p99 < 100 ms | {} |",
            self.read_p50,
            self.read_p99,
            verdict(self.read_p99 < 100.0)
        );
        println!(
            "| server peak RSS, rollout / fresh create | {:.0} / {:.0} MiB = {rss_ratio:.2}× | ≤ 2× | {} |",
            self.rollout_peak_rss,
            self.create_peak_rss,
            verdict(rss_ratio <= 2.0)
        );
        println!("| pods existing and not terminating at once (Kubernetes' surge count) | {} | | |", self.seen_active);
        println!("| pods not available at once, terminating ones too | {} | | |", self.seen_not_available);
        println!("| watch events during the rollout; lists after falling behind (whole round) | {}; {} | | |", self.events, self.relists);
    }
}

#[derive(Debug, Default, Clone)]
struct Row {
    idle_cpu: f64,
    idle_rss: f64,
    /// The etcd member's CPU over the same idle window, on `--store etcd`.
    etcd_idle_cpu: Option<f64>,
    bound: Option<f64>,
    running: Option<f64>,
    start_p50: f64,
    start_p99: f64,
    burst_read_p50: f64,
    burst_read_p99: f64,
    peak_cpu: f64,
    peak_rss: f64,
    delete: Option<f64>,
    delete_read_p50: f64,
    delete_read_p99: f64,
    rss_after: f64,
    rss_later: f64,
    gone_410: usize,
    lag_ends: usize,
    timeouts: usize,
    not_ready: usize,
    agent_rss: f64,
    rollout: Option<RolloutRow>,
}

fn seconds(value: Option<f64>) -> String {
    value.map_or("unfinished".to_string(), |s| format!("{s:.1} s"))
}

impl Row {
    fn print(&self, label: &str, idle_only: bool) {
        if idle_only {
            let etcd = self.etcd_idle_cpu.map_or("-".to_string(), |cpu| format!("{cpu:.1} %"));
            println!("| {label} | {:.1} % | {:.0} MiB | {etcd} | {} | {} |", self.idle_cpu, self.idle_rss, self.timeouts, self.not_ready);
            return;
        }
        println!(
            "| {label} | {:.1} % | {:.0} MiB | {} | {} | {:.0} / {:.0} ms | {:.1} / {:.1} ms | {:.0} % | {:.0} MiB | {} | {:.1} / {:.1} ms | {:.0} MiB | {:.0} MiB | {} ({}) | {} | {} | {:.0} MiB |",
            self.idle_cpu,
            self.idle_rss,
            seconds(self.bound),
            seconds(self.running),
            self.start_p50,
            self.start_p99,
            self.burst_read_p50,
            self.burst_read_p99,
            self.peak_cpu,
            self.peak_rss,
            seconds(self.delete),
            self.delete_read_p50,
            self.delete_read_p99,
            self.rss_after,
            self.rss_later,
            self.gone_410,
            self.lag_ends,
            self.timeouts,
            self.not_ready,
            self.agent_rss,
        );
    }
}

fn binaries() -> (PathBuf, PathBuf) {
    let agent = PathBuf::from(env!("CARGO_BIN_EXE_shepherd-agent"));
    let server = agent.with_file_name("shepherd");
    assert!(
        server.is_file(),
        "no {} next to the agent: build it first with `cargo build --release -p server --bin shepherd` (bench/scale/run.sh does)",
        server.display()
    );
    (server, agent)
}

async fn round(options: &Options) -> Row {
    let (built_server, agent_bin) = binaries();
    let server_bin = options.server_bin.clone().unwrap_or(built_server);
    // Kept until the round ends: the SQLite store's directory, and the etcd member.
    let data_dir = tempfile::tempdir().expect("a data directory");
    let etcd = match options.store {
        StoreChoice::Etcd => Some(shepherd_testing::Etcd::start(1).await),
        StoreChoice::Memory | StoreChoice::Sqlite => None,
    };
    let mut command = Command::new(&server_bin);
    command.args(["--addr", "127.0.0.1:0"]);
    match &etcd {
        None if options.store == StoreChoice::Memory => command.arg("--in-memory"),
        None => command.args(["--store", "sqlite", "--data-dir"]).arg(data_dir.path()),
        Some(etcd) => command.args(["--store", "etcd", "--etcd-endpoints", &etcd.endpoints().join(","), "--data-dir"]).arg(data_dir.path()),
    };
    command.args(&options.server_args).env("RUST_LOG", "warn,server=info");
    let (server, line) = Process::start(command, "listening on ").await;
    let url = line.split("listening on ").nth(1).and_then(|rest| rest.split_whitespace().next()).expect("an address").to_string();
    let client = Client::new(&url, None).expect("a client").named("bench").with_timeout(Duration::from_secs(60));

    let mut command = Command::new(&agent_bin);
    command
        .args(["--server", &url, "--runtime", "simulated", "--simulate-nodes", &options.nodes.to_string(), "--node-name", "sim"])
        .args(["--listen", "127.0.0.1:0", "--cpu", "32", "--memory", "64Gi", "--max-pods", "110"])
        .env("RUST_LOG", "warn,agent::fleet=info,shepherd_client=info");
    let (agent, _) = Process::start(command, "fleet starting").await;
    let mut row = Row::default();

    let began = Instant::now();
    loop {
        let (ready, registered) = ready_nodes(&client).await;
        if ready == options.nodes {
            eprintln!("all {ready} nodes Ready after {:.1} s", began.elapsed().as_secs_f64());
            break;
        }
        assert!(began.elapsed() < options.timeout, "only {ready} of {} nodes Ready ({registered} registered)", options.nodes);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Let start-up work (registration events, first lists) settle, and the watch history
    // fill, before the idle window.
    tokio::time::sleep(options.settle).await;
    let etcd_pids = etcd.as_ref().map_or_else(Vec::new, |etcd| etcd.pids());
    let etcd_cpu = || etcd_pids.iter().map(|pid| cpu_seconds(*pid)).sum::<f64>();
    let (cpu_before, etcd_before) = (cpu_seconds(server.pid), etcd_cpu());
    tokio::time::sleep(options.idle_window).await;
    let window = options.idle_window.as_secs_f64();
    row.idle_cpu = 100.0 * (cpu_seconds(server.pid) - cpu_before) / window;
    row.idle_rss = memory_mib(server.pid, "VmRSS");
    row.etcd_idle_cpu = etcd.is_some().then(|| 100.0 * (etcd_cpu() - etcd_before) / window);
    if options.replicas == 0 {
        row.not_ready = options.nodes - ready_nodes(&client).await.0;
        row.timeouts = agent.log_lines_with("no answer within");
        agent.stop().await;
        server.stop().await;
        return row;
    }

    // The watcher of every pod, from before the burst, so that both phases of a rollout round
    // bear its load.
    let watching = match options.rollout {
        true => {
            let (counts, task) = watch_pods(client.clone(), options.replicas);
            let began = Instant::now();
            while counts.lock().unwrap().lists == 0 {
                assert!(began.elapsed() < Duration::from_secs(60), "the watcher of pods has not listed within 60 s");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Some((counts, task))
        }
        false => None,
    };

    // The burst: deployments of at most `per_deployment` each (at most the validation's limit).
    let chunk = options.per_deployment;
    let deployments: Vec<(String, usize)> =
        (0..options.replicas.div_ceil(chunk)).map(|i| (format!("scale-{i}"), chunk.min(options.replicas - i * chunk))).collect();
    let (stop_sampling, sampling) = sample(server.pid, options.timeout * 3);
    let burst = Instant::now();
    for (name, replicas) in &deployments {
        let deployment = json!({
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "replicas": replicas,
                "strategy": {"type": "RollingUpdate", "rolling_update": {"max_surge": "25%", "max_unavailable": "25%"}},
                "selector": {"app": "scale", "deployment": name},
                "template": {
                    "metadata": {"labels": {"app": "scale", "deployment": name}},
                    "spec": {"containers": [{"name": "web", "image": "minimal", "resources": {"cpu": 100, "memory": 67108864}}]}
                }
            }
        });
        let object = shared::model::Object::from_value(deployment).expect("a deployment");
        client.create_object(&object).await.expect("the deployment is created");
    }
    let (stop_reading, reading) = read_loop(client.clone(), options.timeout);
    let target = options.replicas as f64;
    row.bound =
        until(&client, options.timeout, |m| m.get("shepherd_pod_scheduling_duration_seconds_count").copied().unwrap_or(0.0) >= target)
            .await
            .map(|_| burst.elapsed().as_secs_f64());
    let left = options.timeout.saturating_sub(burst.elapsed());
    row.running = until(&client, left, |m| m.get("shepherd_pod_create_to_running_seconds_count").copied().unwrap_or(0.0) >= target)
        .await
        .map(|_| burst.elapsed().as_secs_f64());
    let mut rollout = RolloutRow::default();
    if let Some((counts, _)) = &watching {
        let left = options.timeout.saturating_sub(burst.elapsed());
        rollout.create =
            until_rolled_out(&client, &deployments[0].0, options.replicas, counts, left).await.map(|_| burst.elapsed().as_secs_f64());
        rollout.create_peak_rss = memory_mib(server.pid, "VmHWM");
    }
    let _ = stop_reading.send(true);
    let mut reads = reading.await.expect("the reader");
    (row.burst_read_p50, row.burst_read_p99) = (percentile(&mut reads, 50.0), percentile(&mut reads, 99.0));
    let web = Selection { label_selector: Some("app=scale".into()), ..Selection::namespace(Some("default")) };
    if let Ok(pods) = client.list::<Pod>(&web).await {
        let mut latencies: Vec<f64> = pods.items.iter().filter_map(start_latency).collect();
        (row.start_p50, row.start_p99) = (percentile(&mut latencies, 50.0), percentile(&mut latencies, 99.0));
    }
    row.agent_rss = memory_mib(agent.pid, "VmHWM");

    if let Some((counts, task)) = watching {
        roll_out(&client, server.pid, &deployments[0].0, options, &counts, &mut rollout).await;
        task.abort();
        row.rollout = Some(rollout);
    }

    // The delete.
    let (stop_reading, reading) = read_loop(client.clone(), options.timeout);
    let deleting = Instant::now();
    for (name, _) in &deployments {
        client.delete(Kind::Deployment, "default", name, &DeleteOptions::default()).await.expect("the deployment is deleted");
    }
    row.delete = until(&client, options.timeout, |m| m.get("shepherd_objects_pods").is_some_and(|n| *n == 0.0))
        .await
        .map(|_| deleting.elapsed().as_secs_f64());
    let _ = stop_reading.send(true);
    let _ = stop_sampling.send(true);
    let mut reads = reading.await.expect("the reader");
    (row.delete_read_p50, row.delete_read_p99) = (percentile(&mut reads, 50.0), percentile(&mut reads, 99.0));
    (row.peak_cpu, row.peak_rss) = sampling.await.expect("the sampler");
    row.peak_rss = row.peak_rss.max(memory_mib(server.pid, "VmHWM"));
    tokio::time::sleep(Duration::from_secs(5)).await;
    row.rss_after = memory_mib(server.pid, "VmRSS");
    tokio::time::sleep(LATER - Duration::from_secs(5)).await;
    row.rss_later = memory_mib(server.pid, "VmRSS");

    let not_ready = Selection { field_selector: Some("reason=NodeNotReady".into()), ..Selection::default() };
    row.not_ready = client.list::<Event>(&not_ready).await.map_or(0, |events| events.items.len());
    let (ready, _) = ready_nodes(&client).await;
    row.not_ready = row.not_ready.max(options.nodes - ready);
    row.gone_410 = agent.log_lines_with("410 Gone");
    row.lag_ends = server.log_lines_with("a watch fell behind");
    row.timeouts = agent.log_lines_with("no answer within");
    agent.stop().await;
    server.stop().await;
    row
}

/// Changes the deployment's image and times its rollout to completion, with the server's peak
/// RSS over it, the reader's latency, and the watcher's maxima from the change on.
async fn roll_out(client: &Client, pid: u32, name: &str, options: &Options, counts: &Mutex<PodCounts>, row: &mut RolloutRow) {
    reset_peak_rss(pid);
    let (stop_reading, reading) = read_loop(client.clone(), options.timeout);
    counts.lock().unwrap().rolling = true;
    let began = Instant::now();
    // A status write between the read and the write is a conflict: read again (a few times).
    for attempt in 1.. {
        let mut deployment: Deployment = client.get("default", name).await.expect("the deployment");
        (row.max_surge, row.max_unavailable) = (deployment.max_surge() as usize, deployment.max_unavailable() as usize);
        deployment.spec.template.spec.containers[0].image = "minimal:v2".into();
        match client.replace_object(&deployment.into_object()).await {
            Ok(_) => break,
            Err(e) if e.is_conflict() && attempt < 5 => continue,
            Err(e) => panic!("the deployment's image is not changed: {e}"),
        }
    }
    row.rollout = until_rolled_out(client, name, options.replicas, counts, options.timeout).await.map(|d| d.as_secs_f64());
    let _ = stop_reading.send(true);
    row.rollout_peak_rss = memory_mib(pid, "VmHWM");
    eprintln!("rollout finished after {:.1} s", began.elapsed().as_secs_f64());
    let mut reads = reading.await.expect("the reader");
    (row.read_p50, row.read_p99) = (percentile(&mut reads, 50.0), percentile(&mut reads, 99.0));
    let counts = counts.lock().unwrap();
    (row.seen_existing, row.seen_active, row.seen_unavailable, row.seen_not_available) =
        (counts.max_existing, counts.max_active, counts.max_unavailable, counts.max_not_available);
    (row.events, row.relists) = (counts.events, counts.lists.saturating_sub(1));
}

/// The middle value, or the mean of the two middle ones.
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn median_of(rows: &[Row], field: fn(&Row) -> f64) -> f64 {
    median(&mut rows.iter().map(field).collect::<Vec<_>>())
}

/// The median of a value, if every round has it.
fn median_if_every_round(rows: &[Row], field: fn(&Row) -> Option<f64>) -> Option<f64> {
    let mut finished: Vec<f64> = rows.iter().filter_map(field).collect();
    (finished.len() == rows.len()).then(|| median(&mut finished))
}

#[tokio::main]
async fn main() {
    let options = options();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{} nodes × {} replicas, {} round(s), {} CPUs, load before {}",
        options.nodes,
        options.replicas,
        options.rounds,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    let idle_only = options.replicas == 0;
    if idle_only {
        println!("| round | idle CPU | idle RSS | etcd idle CPU | agent timeouts | NotReady |");
        println!("|---|---:|---:|---:|---:|---:|");
    } else {
        println!(
            "| round | idle CPU | idle RSS | all bound | all Running | start p50 / p99 | reader p50 / p99 (burst) | peak CPU | peak RSS | delete | reader p50 / p99 (delete) | RSS after | RSS 2 min after | 410s (watches ended for lag) | agent timeouts | NotReady | agent peak RSS |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    }
    let mut rows = Vec::new();
    for i in 1..=options.rounds {
        let row = round(&options).await;
        row.print(&i.to_string(), idle_only);
        if let Some(rollout) = &row.rollout {
            rollout.print(options.replicas);
        }
        rows.push(row);
    }
    if rows.len() > 1 {
        let median = Row {
            idle_cpu: median_of(&rows, |r| r.idle_cpu),
            idle_rss: median_of(&rows, |r| r.idle_rss),
            etcd_idle_cpu: median_if_every_round(&rows, |r| r.etcd_idle_cpu),
            bound: median_if_every_round(&rows, |r| r.bound),
            running: median_if_every_round(&rows, |r| r.running),
            start_p50: median_of(&rows, |r| r.start_p50),
            start_p99: median_of(&rows, |r| r.start_p99),
            burst_read_p50: median_of(&rows, |r| r.burst_read_p50),
            burst_read_p99: median_of(&rows, |r| r.burst_read_p99),
            peak_cpu: median_of(&rows, |r| r.peak_cpu),
            peak_rss: median_of(&rows, |r| r.peak_rss),
            delete: median_if_every_round(&rows, |r| r.delete),
            delete_read_p50: median_of(&rows, |r| r.delete_read_p50),
            delete_read_p99: median_of(&rows, |r| r.delete_read_p99),
            rss_after: median_of(&rows, |r| r.rss_after),
            rss_later: median_of(&rows, |r| r.rss_later),
            gone_410: median_of(&rows, |r| r.gone_410 as f64) as usize,
            lag_ends: median_of(&rows, |r| r.lag_ends as f64) as usize,
            timeouts: median_of(&rows, |r| r.timeouts as f64) as usize,
            not_ready: median_of(&rows, |r| r.not_ready as f64) as usize,
            agent_rss: median_of(&rows, |r| r.agent_rss),
            rollout: None,
        };
        median.print("median", idle_only);
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load after {}", load.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
}
