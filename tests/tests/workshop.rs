//! docs/workshop.md, run as an instructor runs it the day before: every command block in
//! order, read from the file itself, against a real `shepherd --local-node` on the Docker
//! engine and a simulated fleet of three nodes, each in a terminal of its own, and the
//! participant's commands in a third. It checks what the text promises at each step, and
//! that after the wrap-up nothing labelled with this cluster's id is left in Docker.
//!
//! How the text is read is in `tests::workshop` (the marks on the blocks). What the test
//! sets that the text does not:
//! - a checkout laid out in a temporary directory as `shepherd/`: the workspace's files,
//!   with `target/release` holding the binaries this test builds (debug ones) and a
//!   `scripts/demo.sh` that runs what the real one runs once it has set up and built
//!   (its lines from `bin=` on), so that `cd shepherd`, `export PATH=…` and `scripts/demo.sh` run as
//!   written;
//! - the environment of every terminal: `SHEPHERD_ADDR=127.0.0.1:0` and a data directory of
//!   its own for the server, whose address (from its log) every other terminal gets as
//!   `SHEPHERD_API`; `SHEPHERD_AGENT_LISTEN=127.0.0.1:0` for the fleet; a `HOME` of its own
//!   (the kubeconfig goes there). So it runs beside anything on 9876 or 10250.
//!
//! Transcripts of the terminals land in `target/e2e/workshop/`.
//! Fails, never skips, when Docker, busybox or kubectl is missing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use shepherd_testing::poll_blocking;
use tests::Browser;
use tests::terminal::{Ran, Terminal};
use tests::workshop::{self, Step};

/// The participant's terminal.
const PARTICIPANT: &str = "participant";
/// The terminal of `scripts/demo.sh`: the server and the local node.
const SERVER: &str = "shepherd";

/// How long one command may take: a deletion waits out a 30 s grace period.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("the workspace")
}

/// Builds `shepherd`, `shepherd-agent` and `sheepctl` (a no-op when they are fresh) into
/// this test's own target directory; the directory that holds them.
fn build_binaries() -> PathBuf {
    let exe = std::env::current_exe().expect("this test's path");
    // …/target/debug/deps/workshop-…: the binaries are in …/target/debug.
    let bin = exe.parent().and_then(Path::parent).expect("the profile directory").to_path_buf();
    let target = bin.parent().expect("the target directory");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    build.args(["build", "--quiet", "-p", "server", "-p", "agent", "-p", "sheepctl", "--target-dir"]).arg(target);
    if bin.ends_with("release") {
        build.arg("--release");
    }
    let status = build.current_dir(workspace()).status().expect("cargo runs");
    assert!(status.success(), "cannot build the binaries the workshop runs");
    bin
}

/// `shepherd/` in `dir`: the workspace's files as a participant's clone has them, with
/// `bin` as `target/release` and `scripts/demo.sh` without its set-up and build.
fn lay_out_checkout(dir: &Path, bin: &Path) -> PathBuf {
    let checkout = dir.join("shepherd");
    std::fs::create_dir_all(checkout.join("scripts")).unwrap();
    std::fs::create_dir_all(checkout.join("target")).unwrap();
    std::os::unix::fs::symlink(bin, checkout.join("target/release")).unwrap();
    for entry in std::fs::read_dir(workspace()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if !["target", "scripts"].contains(&name.to_str().unwrap_or_default()) {
            std::os::unix::fs::symlink(entry.path(), checkout.join(&name)).unwrap();
        }
    }
    let scripts = workspace().join("scripts");
    for entry in std::fs::read_dir(&scripts).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "demo.sh" {
            std::os::unix::fs::symlink(entry.path(), checkout.join("scripts").join(entry.file_name())).unwrap();
        }
    }
    let demo = std::fs::read_to_string(scripts.join("demo.sh")).expect("scripts/demo.sh");
    let lines: Vec<&str> = demo.lines().collect();
    assert!(lines.last().is_some_and(|l| l.starts_with("exec ")), "scripts/demo.sh ends by exec'ing shepherd");
    let built = lines.iter().position(|l| l.starts_with("bin=")).expect("scripts/demo.sh names where its binaries are (bin=…)");
    let run = lines[built..].join("\n");
    let stand_in = checkout.join("scripts/demo.sh");
    // The checkout's own target/release, whatever target directory this test was built in.
    std::fs::write(
        &stand_in,
        format!(
            "#!/usr/bin/env bash\n# scripts/demo.sh once set up and built\nset -euo pipefail\ncd \"$(dirname \"$0\")/..\"\nunset CARGO_TARGET_DIR\n. scripts/target-dir.sh\n{run}\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&stand_in, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    checkout
}

/// How a claim is checked.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum How {
    /// The command succeeds and its output holds at once.
    Once,
    /// The command fails, and its output says why as promised.
    Fails,
    /// The command is run again, as an instructor would, until its output holds.
    Eventually(Duration),
    /// The command keeps running: its output comes to hold, then it gets a Ctrl-C.
    UntilCtrlC(Duration),
}

/// Whether a command's output keeps the promise, given what else is known.
type Check = dyn Fn(&str, &Facts) -> bool;

/// What the text promises about one of its commands: the first command, after the one the
/// previous claim was about, that starts with `command`.
struct Claim {
    command: &'static str,
    promise: &'static str,
    how: How,
    check: Box<Check>,
}

fn claim(command: &'static str, how: How, promise: &'static str, check: impl Fn(&str, &Facts) -> bool + 'static) -> Claim {
    Claim { command, promise, how, check: Box::new(check) }
}

/// What the test knows besides a command's own output.
struct Facts {
    bin: PathBuf,
    /// The server's URL, from its log.
    api: String,
    /// The cluster's id, as the server tells it.
    cluster: String,
    /// The local node's name (the host's).
    host: String,
    /// Each command run so far in the participant's terminal, with its output.
    history: Vec<(String, String)>,
}

impl Facts {
    /// The test's own look at the cluster, outside every terminal: `sheepctl args`.
    fn sheepctl(&self, args: &[&str]) -> String {
        let out = Command::new(self.bin.join("sheepctl"))
            .args(args)
            .env("SHEPHERD_API", &self.api)
            .env_remove("SHEPHERD_TOKEN")
            .output()
            .expect("sheepctl runs");
        assert!(out.status.success(), "sheepctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The node pod `name` is bound to.
    fn node_of(&self, pod: &str) -> String {
        let pod: serde_json::Value = serde_json::from_str(&self.sheepctl(&["get", "pod", pod, "-o", "json"])).expect("a pod as JSON");
        pod["spec"]["node_name"].as_str().unwrap_or_default().to_string()
    }

    /// The `shepherd.cluster` label of Docker container `id`.
    fn cluster_of_container(&self, id: &str) -> String {
        let label = format!("{{{{index .Config.Labels \"{}\"}}}}", agent::runtime::LABEL_CLUSTER);
        let out = Command::new("docker").args(["inspect", "--format", &label, id]).output().expect("docker runs");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The outputs of every command so far that started with `command`, in order.
    fn outputs_of(&self, command: &str) -> Vec<&str> {
        self.history.iter().filter(|(c, _)| c.starts_with(command)).map(|(_, o)| o.as_str()).collect()
    }

    /// The output of the last command that started with `command`.
    fn output_of(&self, command: &str) -> &str {
        self.history.iter().rev().find(|(c, _)| c.starts_with(command)).map_or("", |(_, o)| o.as_str())
    }
}

/// The rows of a table (`sheepctl get`, `kubectl get`), header left out, split in words.
fn rows(table: &str) -> Vec<Vec<&str>> {
    table.lines().skip(1).map(|l| l.split_whitespace().collect()).filter(|r: &Vec<&str>| !r.is_empty()).collect()
}

/// The value of `label` in `sheepctl info`'s output.
fn info_row<'a>(info: &'a str, label: &str) -> &'a str {
    info.lines().find_map(|l| l.strip_prefix(label)?.strip_prefix(':')).map_or("", str::trim)
}

/// The names of the pods in a `get pods` table whose row satisfies `wanted`.
fn pods_where(table: &str, wanted: impl Fn(&[&str]) -> bool) -> Vec<String> {
    rows(table).into_iter().filter(|r| wanted(r)).map(|r| r[0].to_string()).collect()
}

/// The deployment's pods: web-… but not web-server.
fn is_replica(row: &[&str]) -> bool {
    row[0].starts_with("web-") && row[0] != "web-server"
}

/// The rows of `kubectl get rs`: each ReplicaSet's name, and its DESIRED, CURRENT and READY.
fn replica_sets(table: &str) -> Vec<(String, [u32; 3])> {
    let count = |word: Option<&&str>| word.and_then(|w| w.parse().ok());
    rows(table).into_iter().filter_map(|r| Some((r[0].to_string(), [count(r.get(1))?, count(r.get(2))?, count(r.get(3))?]))).collect()
}

/// The ReplicaSet of `kubectl get rs` that has its 3 replicas, all ready.
fn full_replica_set(table: &str) -> Option<String> {
    replica_sets(table).into_iter().find(|(_, counts)| *counts == [3, 3, 3]).map(|(name, _)| name)
}

/// The ReplicaSet of version 2 of `shop`: the one at 3 once `set image` rolled out.
fn version_2(facts: &Facts) -> Option<String> {
    facts.outputs_of("kubectl get rs -l app=shop").get(1).and_then(|out| full_replica_set(out))
}

/// The REVISION column of `rollout history`.
fn revisions(history: &str) -> Vec<&str> {
    history.lines().skip_while(|l| !l.starts_with("REVISION")).skip(1).filter_map(|l| l.split_whitespace().next()).collect()
}

/// The addresses in the ENDPOINTS column of `kubectl get endpoints` for `service`.
fn endpoints<'a>(table: &'a str, service: &str) -> Vec<&'a str> {
    let column = rows(table).into_iter().find(|r| r[0] == service).and_then(|r| r.get(1).copied()).unwrap_or("<none>");
    column.split(',').filter(|a| *a != "<none>").collect()
}

/// An event line (`sheepctl events`) with `reason`.
fn event<'a>(events: &'a str, reason: &str) -> Option<&'a str> {
    events.lines().find(|l| l.split_whitespace().any(|w| w == reason))
}

fn claims() -> Vec<Claim> {
    use How::*;
    let minute = Duration::from_secs(60);
    vec![
        // Setup check.
        claim("sheepctl info", Eventually(minute), "Server, Store: sqlite, Auth required: no, Scheduler: spread", |out, _| {
            info_row(out, "Store") == "sqlite" && info_row(out, "Auth required") == "no" && info_row(out, "Scheduler") == "spread"
        }),
        claim("sheepctl nodes", Once, "your host, Ready, and no other node yet", |out, facts| {
            let rows = rows(out);
            rows.len() == 1 && rows[0][0] == facts.host && rows[0][1] == "Ready"
        }),
        // 1. Async scheduling.
        claim(
            "CLEANUP=1 examples/try-it-yourself.sh",
            Once,
            "created at once, Running on the host, the events' story, deleted",
            |out, facts| {
                let on_host =
                    |l: &&str| l.starts_with("web-server ") && l.contains("Running") && l.split_whitespace().any(|w| w == facts.host);
                out.lines().any(|l| on_host(&l))
                    && !out.contains("executes nothing")
                    && out.contains("pod/web-server created")
                    && out.contains("pod/web-server condition met")
                    && ["Created", "Scheduled", "Pulled", "Started", "Running"].iter().all(|r| event(out, r).is_some())
                    && out.contains("after it was created")
                    && out.contains("pod \"web-server\" deleted")
            },
        ),
        claim("kubectl apply -f examples/kubernetes/pod.yaml", Once, "the same pod, created", |out, _| {
            out.contains("pod/web-server created")
        }),
        claim("kubectl get pods -o wide", Once, "web-server with its NODE, the host", |out, facts| {
            rows(out).iter().any(|r| r[0] == "web-server" && r.get(6) == Some(&facts.host.as_str()))
        }),
        claim("kubectl wait --for=condition=Ready pod/web-server", Once, "the pod gets Ready", |out, _| {
            out.contains("pod/web-server condition met")
        }),
        claim("kubectl describe pod web-server", Once, "the pod's Events: this pod's, not the earlier web-server's", |out, _| {
            let events = out.split("Events:").nth(1).unwrap_or_default();
            ["Scheduled", "Pulled", "Started"].iter().all(|r| event(events, r).is_some())
                && events.lines().filter(|l| l.split_whitespace().any(|w| w == "Scheduled")).count() == 1
        }),
        claim("kubectl delete pod web-server", Once, "deleted", |out, _| out.contains("pod \"web-server\" deleted")),
        // 2. Reconcile loops.
        claim("sheepctl nodes", Eventually(minute), "your host and sim-0, sim-1, sim-2, all Ready", |out, facts| {
            let ready: Vec<&str> = rows(out).into_iter().filter(|r| r[1] == "Ready").map(|r| r[0]).collect();
            ready.len() == 4 && [facts.host.as_str(), "sim-0", "sim-1", "sim-2"].iter().all(|n| ready.contains(n))
        }),
        claim("sheepctl wait --for=Running pod/on-host", Once, "the pinned pod runs on the host", |_, facts| {
            facts.node_of("on-host") == facts.host
        }),
        claim("sheepctl describe pod on-host | grep 'Container ID'", Once, "the container this cluster started", |out, facts| {
            out.contains("Container ID") && out.split_whitespace().last().is_some_and(|id| facts.cluster_of_container(id) == facts.cluster)
        }),
        claim("sheepctl get pods -w", UntilCtrlC(minute), "on-host Running again, RESTARTS 1", |out, _| {
            // EVENT NAME READY STATUS RESTARTS …
            out.lines().map(|l| l.split_whitespace().collect::<Vec<_>>()).any(|r| r.get(1..5) == Some(&["on-host", "1/1", "Running", "1"]))
        }),
        claim("sheepctl events --for pod/on-host", Eventually(Duration::from_secs(20)), "Created (x2), Started (x2)", |out, _| {
            ["Created", "Started"].iter().all(|r| out.lines().any(|l| l.contains("(x2)") && l.split_whitespace().any(|w| w == *r)))
        }),
        claim("sheepctl delete pod on-host --grace-period=1", Once, "deleted", |out, _| out.contains("pod \"on-host\" deleted")),
        claim("sheepctl wait --for=Running deployment/web", Once, "the deployment's replicas run", |_, _| true),
        claim("sheepctl get pods -o wide", Once, "spread over sim-0, sim-1, sim-2", |out, _| {
            let mut nodes: Vec<&str> = rows(out).into_iter().filter(|r| is_replica(r)).map(|r| r[4]).collect();
            nodes.sort();
            nodes == ["sim-0", "sim-1", "sim-2"]
        }),
        claim("sheepctl delete $(", Once, "one of the deployment's pods, deleted", |out, _| out.contains("\" deleted")),
        claim("sheepctl get pods -o wide", Once, "a new web-xxxxx is already there", |out, facts| {
            let deleted = facts.output_of("sheepctl delete $(").split('"').nth(1).unwrap_or_default().to_string();
            let replicas = pods_where(out, is_replica);
            replicas.len() == 3 && !deleted.is_empty() && !replicas.contains(&deleted)
        }),
        claim("kubectl get deployment web", Eventually(Duration::from_secs(20)), "READY 3/3 once the new pod runs", |out, _| {
            rows(out).iter().any(|r| r[0] == "web" && r[1] == "3/3")
        }),
        claim("kubectl delete $(", Once, "one of the deployment's pods, deleted", |out, _| out.contains("\" deleted")),
        claim(
            "kubectl get pods -l 'app=web,!tier' -o wide",
            Eventually(Duration::from_secs(20)),
            "three again, one of them new",
            |out, facts| {
                let deleted = facts.output_of("kubectl delete $(").split('"').nth(1).unwrap_or_default().to_string();
                let replicas = pods_where(out, is_replica);
                replicas.len() == 3 && !deleted.is_empty() && !replicas.contains(&deleted)
            },
        ),
        claim("sheepctl nodes", Eventually(minute), "after ~10 s: sim-* STATUS NotReady", |out, facts| {
            let rows = rows(out);
            rows.iter().filter(|r| r[0].starts_with("sim-") && r[1] == "NotReady").count() == 3
                && rows.iter().any(|r| r[0] == facts.host && r[1] == "Ready")
        }),
        claim(
            "sheepctl events | grep",
            Eventually(minute),
            "NodeNotReady, NodeLost, ReplacingFinishedPods, of the fleet's nodes",
            |out, facts| {
                let host = format!("node/{}", facts.host);
                ["NodeNotReady", "NodeLost", "ReplacingFinishedPods"].iter().all(|r| event(out, r).is_some())
                    && !out.lines().any(|l| l.split_whitespace().any(|w| w == host))
            },
        ),
        claim("sheepctl get pods -o wide", Eventually(minute), "~10 s later: the web pods run on your host", |out, facts| {
            let running: Vec<Vec<&str>> = rows(out).into_iter().filter(|r| is_replica(r) && r[2] == "Running").collect();
            running.len() == 3 && running.iter().all(|r| r[4] == facts.host)
        }),
        // 3. The CAS race.
        claim("sheepctl apply -f /tmp/picky.json", Once, "created", |out, _| out.contains("pod/picky created")),
        claim(
            "sheepctl get pod picky -o wide",
            Eventually(Duration::from_secs(20)),
            "Unschedulable: 0/4 nodes … didn't match node selector",
            |out, _| out.contains("Unschedulable: 0/4 nodes are available: 4 node(s) didn't match node selector."),
        ),
        claim("bind sim-0 & bind sim-1 & wait", Once, "one binding answers 201, the other 409", |out, _| {
            let answers: Vec<&str> =
                out.lines().filter_map(|l| l.strip_prefix("bind to sim-")?.split_once(": HTTP ")).map(|(_, c)| c.trim()).collect();
            let mut answers = answers;
            answers.sort();
            answers == ["201", "409"]
        }),
        claim("grep -h Conflict /tmp/bind-sim-", Once, "the loser's 409 names the winner's node", |out, facts| {
            let winner = facts.node_of("picky");
            out.lines().count() == 1 && out.contains(&format!("already bound to node {winner}\""))
        }),
        claim("for who in alice bob; do", Once, "alice's PUT answers 200, bob's stale one 409", |out, _| {
            let lines: Vec<&str> = out.lines().map(str::trim).collect();
            lines.len() == 3
                && lines[0] == "HTTP 200"
                && lines[1].ends_with("read it again and reapply your change")
                && lines[2] == "HTTP 409"
        }),
        claim("sheepctl delete pod picky", Once, "deleted", |out, _| out.contains("pod \"picky\" deleted")),
        // 4. Unschedulable reasons and backoff.
        claim(
            "sheepctl get pods -o wide",
            Eventually(Duration::from_secs(20)),
            "too-big Pending <none> Unschedulable: … 4 Insufficient memory.",
            |out, _| {
                out.lines().any(|l| {
                    l.starts_with("too-big ")
                        && l.contains("Pending")
                        && l.contains("Unschedulable: 0/4 nodes are available: 4 Insufficient memory.")
                })
            },
        ),
        claim("sheepctl describe pod too-big", Once, "PodScheduled False Unschedulable, the per-node table, FailedScheduling", |out, _| {
            out.contains("PodScheduled")
                && out.contains("Unschedulable")
                && out.contains("NodeResourcesFit: Insufficient memory (the pod requests memory 64Ti")
                && out.contains("queue:")
                && event(out, "FailedScheduling").is_some_and(|l| l.contains("Warning"))
        }),
        claim("kubectl get pod too-big -o jsonpath=", Once, "the PodScheduled condition's message", |out, _| {
            out.trim() == "0/4 nodes are available: 4 Insufficient memory."
        }),
        claim(
            "kubectl describe pod too-big | grep FailedScheduling",
            Once,
            "Warning FailedScheduling … 4 Insufficient memory.",
            |out, _| out.contains("Warning") && out.contains("FailedScheduling") && out.contains("4 Insufficient memory."),
        ),
        claim("sheepctl wait --for=Running pod/too-big --timeout=2s", Fails, "says which stage the pod is stuck in", |_, _| true),
        claim("sheepctl events --for pod/too-big", Once, "FailedScheduling, no count yet", |out, _| {
            event(out, "FailedScheduling").is_some_and(|l| !l.contains("(x"))
        }),
        claim("sheepctl events --for pod/too-big", Eventually(Duration::from_secs(20)), "FailedScheduling (x2)", |out, _| {
            event(out, "FailedScheduling").is_some_and(|l| l.contains("(x2)"))
        }),
        claim(
            "sheepctl get pod web-server -o wide",
            Eventually(Duration::from_secs(20)),
            "Unschedulable: … 4 node(s) were unschedulable.",
            |out, _| out.contains("Unschedulable: 0/4 nodes are available: 4 node(s) were unschedulable."),
        ),
        claim("sheepctl wait --for=Running pod/web-server", Once, "bound to sim-1 right after the uncordon", |_, facts| {
            facts.node_of("web-server") == "sim-1"
        }),
        claim("sheepctl delete pod too-big web-server", Once, "both deleted", |out, _| {
            out.contains("pod \"too-big\" deleted") && out.contains("pod \"web-server\" deleted")
        }),
        // 6. Rollouts.
        claim("kubectl apply -f /tmp/shop.yaml", Once, "created", |out, _| out.contains("deployment.apps/shop created")),
        claim("kubectl rollout status deployment/shop", Once, "successfully rolled out", |out, _| {
            out.trim_end().ends_with("deployment \"shop\" successfully rolled out")
        }),
        claim(
            "kubectl get rs -l app=shop",
            Once,
            "one ReplicaSet, shop-<hash>, DESIRED 3, READY 3",
            |out, _| matches!(replica_sets(out).as_slice(), [(name, [3, 3, 3])] if name.starts_with("shop-")),
        ),
        claim("kubectl set image deployment/shop front=minimal:v2", Once, "image updated", |out, _| {
            out.contains("deployment.apps/shop image updated")
        }),
        claim("sheepctl rollout status deployment/shop", Once, "until: deployment \"shop\" successfully rolled out", |out, _| {
            out.trim_end().ends_with("deployment \"shop\" successfully rolled out")
        }),
        claim(
            "kubectl get rs -l app=shop",
            Eventually(Duration::from_secs(30)),
            "the new ReplicaSet at 3, the old one at 0",
            |out, facts| {
                let first = facts.outputs_of("kubectl get rs -l app=shop")[0];
                let Some(old) = full_replica_set(first) else { return false };
                let sets = replica_sets(out);
                sets.len() == 2 && full_replica_set(out).is_some_and(|new| new != old) && sets.contains(&(old, [0, 0, 0]))
            },
        ),
        claim("kubectl patch deployment shop", Once, "patched", |out, _| out.contains("deployment.apps/shop patched")),
        claim("kubectl get deployment shop", Eventually(minute), "READY 2/3, UP-TO-DATE 2, AVAILABLE 2", |out, _| {
            rows(out).iter().any(|r| r.get(..4) == Some(&["shop", "2/3", "2", "2"]))
        }),
        claim(
            "kubectl get pods -l app=shop",
            Eventually(minute),
            "two v2 pods Running 1/1, two v3 pods 0/1 Error or CrashLoopBackOff",
            |out, facts| {
                let Some(v2) = version_2(facts) else { return false };
                let rows = rows(out);
                let serving = rows.iter().filter(|r| r[0].starts_with(&format!("{v2}-")) && r[1..3] == ["1/1", "Running"]).count();
                let crashing = rows.iter().filter(|r| r[1] == "0/1" && ["Error", "CrashLoopBackOff"].contains(&r[2])).count();
                rows.len() == 4 && serving == 2 && crashing == 2
            },
        ),
        claim("kubectl rollout status deployment/shop", Fails, "error: deployment \"shop\" exceeded its progress deadline", |out, _| {
            out.contains("error: deployment \"shop\" exceeded its progress deadline")
        }),
        claim("kubectl get deployment shop -o jsonpath=", Once, "ProgressDeadlineExceeded", |out, _| {
            out.trim() == "ProgressDeadlineExceeded"
        }),
        claim("kubectl rollout undo deployment/shop", Once, "rolled back", |out, _| out.contains("deployment.apps/shop rolled back")),
        claim("kubectl rollout status deployment/shop", Once, "successfully rolled out", |out, _| {
            out.trim_end().ends_with("deployment \"shop\" successfully rolled out")
        }),
        claim("kubectl get rs -l app=shop", Eventually(minute), "v2's ReplicaSet back at 3, v3's at 0", |out, facts| {
            let sets = replica_sets(out);
            version_2(facts).is_some_and(|v2| sets.contains(&(v2, [3, 3, 3])))
                && sets.len() == 3
                && sets.iter().filter(|(_, counts)| *counts == [0, 0, 0]).count() == 2
        }),
        claim("kubectl rollout history deployment/shop", Once, "revisions 1, 3, 4", |out, _| revisions(out) == ["1", "3", "4"]),
        claim("kubectl rollout history deployment/shop --revision=3", Once, "the bad release's template", |out, _| {
            out.contains("v3 cannot read its config")
        }),
        claim("sheepctl rollout history deployment/shop", Once, "revisions 1, 3, 4", |out, _| revisions(out) == ["1", "3", "4"]),
        // 7. Services.
        claim("kubectl apply -f examples/kubernetes/two-tier.yaml", Once, "the app's objects, created", |out, _| {
            ["configmap/backend-page", "secret/backend-auth", "service/backend", "deployment.apps/frontend", "service/frontend"]
                .iter()
                .all(|object| out.contains(&format!("{object} created")))
        }),
        claim("kubectl rollout status deployment/backend", Once, "successfully rolled out", |out, _| {
            out.trim_end().ends_with("deployment \"backend\" successfully rolled out")
        }),
        claim("kubectl rollout status deployment/frontend", Once, "successfully rolled out", |out, _| {
            out.trim_end().ends_with("deployment \"frontend\" successfully rolled out")
        }),
        claim("kubectl get svc backend frontend", Once, "backend ClusterIP 10.96.…; frontend NodePort 80:30080/TCP", |out, _| {
            let rows = rows(out);
            let row = |name: &str| rows.iter().find(|r| r[0] == name).cloned().unwrap_or_default();
            let (backend, frontend) = (row("backend"), row("frontend"));
            backend.get(1..5).is_some_and(|r| r[0] == "ClusterIP" && r[1].starts_with("10.96.") && r[3] == "80/TCP")
                && frontend.get(1..5).is_some_and(|r| r[0] == "NodePort" && r[3] == "80:30080/TCP")
        }),
        claim("kubectl get endpoints backend", Eventually(minute), "the two backend pods' addresses, port 8080", |out, _| {
            let addresses = endpoints(out, "backend");
            addresses.len() == 2 && addresses.iter().all(|a| a.ends_with(":8080"))
        }),
        claim(
            "curl -s http://127.0.0.1:30080/",
            Eventually(minute),
            "the backend's page, fetched by its DNS name through its cluster IP with the Secret's password",
            |out, facts| {
                let services = facts.output_of("kubectl get svc backend frontend");
                let backend_ip = rows(services).into_iter().find(|r| r[0] == "backend").and_then(|r| r.get(2).map(|ip| ip.to_string()));
                backend_ip.is_some_and(|ip| out.contains(&format!("backend.default.svc.cluster.local is {ip})")))
                    && out.contains("The backend answered: HTTP/1.1 200 OK")
                    && out.contains("<h1>Hello from the backend</h1>")
                    && !out.contains("s3cret")
            },
        ),
        claim("kubectl expose deployment backend --name=backend-direct", Once, "exposed", |out, _| {
            out.contains("service/backend-direct exposed")
        }),
        claim("kubectl get svc backend-direct", Once, "NodePort 80:3…/TCP, a port from 30000-32767", |out, _| {
            let port = |r: &Vec<&str>| r.get(4)?.strip_prefix("80:")?.strip_suffix("/TCP")?.parse::<u16>().ok();
            rows(out)
                .iter()
                .any(|r| r[0] == "backend-direct" && r[1] == "NodePort" && port(r).is_some_and(|p| (30000..=32767).contains(&p)))
        }),
        claim("curl -s -o /dev/null -w", Eventually(Duration::from_secs(30)), "401: the backend wants the password", |out, _| {
            out.trim() == "401"
        }),
        claim("kubectl get endpoints backend", Eventually(minute), "three addresses, once the new pod is ready", |out, _| {
            endpoints(out, "backend").len() == 3
        }),
        claim("kubectl get endpoints backend", Eventually(minute), "one address", |out, _| endpoints(out, "backend").len() == 1),
        claim("curl -s http://127.0.0.1:30080/ | tail -n 2", Eventually(Duration::from_secs(30)), "still the backend's page", |out, _| {
            out.contains("<h1>Hello from the backend</h1>")
        }),
        claim("curl -s http://127.0.0.1:30080/ | tail -n 1", Eventually(minute), "<h1>Version 2</h1>, within a minute", |out, _| {
            out.trim() == "<h1>Version 2</h1>"
        }),
        // 8. Debugging a pod.
        claim("kubectl run crasher", Once, "created", |out, _| out.contains("pod/crasher created")),
        claim("kubectl logs crasher --previous", Once, "the run that crashed", |out, _| {
            out.contains("run started") && out.contains("giving up")
        }),
        claim("sheepctl logs crasher --previous", Once, "the same", |out, _| out.contains("run started") && out.contains("giving up")),
        claim("sheepctl exec $pod -- sh -c 'ps; exit 3'", Once, "httpd runs; sheepctl exited with 3", |out, _| {
            out.contains("httpd") && out.contains("sheepctl exited with 3")
        }),
        claim("cat back.html", Once, "the page, copied in and back out", |out, _| out.contains("<h1>Version 2</h1>")),
        // Wrap-up.
        claim("cluster=$(", Once, "the cluster's id", |_, _| true),
        claim("sheepctl delete deployment web shop", Once, "both deleted", |out, _| {
            out.contains("deployment \"web\" deleted") && out.contains("deployment \"shop\" deleted")
        }),
        claim("kubectl delete -f examples/kubernetes/two-tier.yaml", Once, "part 7's app, deleted", |out, _| {
            out.contains("deployment.apps \"frontend\" deleted") && out.contains("configmap \"backend-page\" deleted")
        }),
        claim("sheepctl delete pod web-server --grace-period=1", Once, "part 5's pod, deleted", |out, _| {
            out.contains("pod \"web-server\" deleted")
        }),
        claim("sheepctl get pods", Once, "no web-server, only the deployments' pods, Terminating", |out, _| {
            let owned = |r: &[&str]| is_replica(r) || ["shop-", "frontend-", "backend-"].iter().any(|p| r[0].starts_with(p));
            rows(out).iter().all(|r| owned(r) && r[2] == "Terminating")
        }),
        claim("docker ps -a --filter label=shepherd.cluster=$cluster", Once, "lists none", |out, _| {
            out.lines().count() == 1 && out.starts_with("CONTAINER ID")
        }),
    ]
}

/// The terminals of the session, and what the test learnt from them.
struct Session {
    dir: tempfile::TempDir,
    transcripts: PathBuf,
    /// The server's URL, from its log.
    api: Option<String>,
    /// The cluster's id, once the server answers.
    cluster: Option<String>,
    terminals: Vec<Terminal>,
}

impl Session {
    fn env(&self) -> Vec<(&'static str, String)> {
        let home = self.dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let mut env = vec![
            ("HOME", home.display().to_string()),
            ("NO_COLOR", "1".into()),
            ("SHEPHERD_ADDR", "127.0.0.1:0".into()),
            ("SHEPHERD_DATA_DIR", self.dir.path().join("data").display().to_string()),
            ("SHEPHERD_AGENT_LISTEN", "127.0.0.1:0".into()),
        ];
        if let Some(api) = &self.api {
            env.push(("SHEPHERD_API", api.clone()));
        }
        env
    }

    fn terminal(&mut self, name: &str) -> &mut Terminal {
        if !self.terminals.iter().any(|t| t.name == name) {
            let env = self.env();
            let transcript = self.transcripts.join(format!("{name}.txt"));
            let unset = ["SHEPHERD_TOKEN", "SHEPHERD_API", "KUBECONFIG", "XDG_CONFIG_HOME", "RUST_LOG"];
            self.terminals.push(Terminal::open(name, self.dir.path(), &env, &unset, &transcript));
        }
        self.terminals.iter_mut().find(|t| t.name == name).expect("opened above")
    }
}

impl Drop for Session {
    /// The fleet and the server get their Ctrl-C (the server last: it removes its node's
    /// containers on the way out); whatever of this cluster is still in Docker then goes.
    fn drop(&mut self) {
        let server = self.terminals.iter().position(|t| t.name == SERVER);
        let server = server.map(|i| self.terminals.remove(i));
        self.terminals.clear();
        drop(server);
        if let Some(cluster) = &self.cluster {
            let left = containers_of(cluster);
            if !left.is_empty() {
                let _ = Command::new("docker").arg("rm").arg("-f").args(&left).output();
            }
        }
    }
}

/// The ids of every container, running or not, labelled with `cluster`.
fn containers_of(cluster: &str) -> Vec<String> {
    let filter = format!("label={}={cluster}", agent::runtime::LABEL_CLUSTER);
    let out = Command::new("docker").args(["ps", "-aq", "--filter", &filter]).output().expect("docker runs (apt-get install docker.io)");
    assert!(out.status.success(), "docker ps: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).split_whitespace().map(String::from).collect()
}

/// Runs `command` in `terminal` as `claim` says, until its promise holds; its output.
fn run_claimed(terminal: &mut Terminal, command: &workshop::Command, claim: Option<&Claim>, facts: &Facts) -> String {
    let context = |ran: &Ran| {
        format!("docs/workshop.md line {}: {}\nexit status {}, output:\n{}", command.line, command.text, ran.status, ran.output)
    };
    let Some(claim) = claim else {
        assert!(!command.runs_until_interrupted(), "docs/workshop.md line {}: nothing says when to Ctrl-C {}", command.line, command.text);
        let ran = terminal.run(&command.text, COMMAND_TIMEOUT);
        assert_eq!(ran.status, 0, "{}", context(&ran));
        return ran.output;
    };
    match claim.how {
        How::Once | How::Fails => {
            let ran = terminal.run(&command.text, COMMAND_TIMEOUT);
            let failed = ran.status != 0;
            assert_eq!(failed, claim.how == How::Fails, "{}", context(&ran));
            assert!((claim.check)(&ran.output, facts), "the text promises: {}\n{}", claim.promise, context(&ran));
            ran.output
        }
        How::Eventually(within) => {
            let deadline = Instant::now() + within;
            loop {
                let ran = terminal.run(&command.text, COMMAND_TIMEOUT);
                if ran.status == 0 && (claim.check)(&ran.output, facts) {
                    return ran.output;
                }
                assert!(Instant::now() < deadline, "not within {within:?}, the text promises: {}\n{}", claim.promise, context(&ran));
                // An instructor runs it again a moment later.
                std::thread::sleep(Duration::from_millis(500));
            }
        }
        How::UntilCtrlC(within) => {
            assert!(
                command.runs_until_interrupted(),
                "docs/workshop.md line {}: {} is expected to run until Ctrl-C",
                command.line,
                command.text
            );
            terminal.start(&command.text);
            let mut shown = terminal.expect_output(claim.promise, within, |out| (claim.check)(out, facts));
            let ended = terminal.interrupt(Duration::from_secs(10));
            shown.push_str(&ended.output);
            shown
        }
    }
}

/// The caption the text promises under the simulator's heat map after the first decision on
/// 5,000 nodes: 500 feasible nodes to find (10 %), a quarter of the nodes nearly full.
const FIRST_DECISION_ON_5000_NODES: [&str; 2] = [
    "Last decision: evaluated 659 of 5000 nodes (13%) from index 0, stopping once 500 were feasible",
    "; 159 infeasible node(s) passed over on the way.",
];

/// What the text says bin-pack's last decision says in simulator step 3, once node-2 is
/// cordoned and node-1 full.
const BIN_PACK_AFTER_THE_CORDON: &str =
    "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {gpu: true}, 1 node(s) were unschedulable.";

/// What the text says the scheduling queue lists for `big` in simulator step 4, after the
/// Step that fails it, and after **Delete** `web` (`…`: the node varies).
const BIG_UNSCHEDULABLE: &str = "unschedulable after 1 failed attempt, waiting for a cluster change (back-off 1s left) or the flush in 5m";
const BIG_REQUEUED: &str = "requeued because pod default/web-1 freed room on node …";

/// The dashboard as participants use it: a headless chromium on the server's URL. The
/// simulator keeps its state in the page, so its steps share one browser, as a participant's
/// tab does through Part 5.
struct Dashboard {
    runtime: tokio::runtime::Runtime,
    simulator: Option<Browser>,
}

impl Dashboard {
    fn new() -> Dashboard {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
        Dashboard { runtime, simulator: None }
    }

    fn close(mut self) {
        if let Some(browser) = self.simulator.take() {
            self.runtime.block_on(browser.close());
        }
    }
}

/// Does in the dashboard what the text has participants do there, and checks what it says
/// they see.
fn run_dashboard(dashboard: &mut Dashboard, what: &str, line: usize, facts: &Facts) {
    let Dashboard { runtime, simulator } = dashboard;
    runtime.block_on(async {
        let failure = workspace().join(format!("target/e2e/workshop/dashboard-line-{line}.png"));
        if let Some(step) = what.strip_prefix("simulator ") {
            if simulator.is_none() {
                let browser = Browser::start().await;
                browser.client.goto(&format!("{}/#/simulator", facts.api)).await.expect("the simulator opens");
                *simulator = Some(browser);
            }
            let browser = simulator.as_ref().expect("opened above");
            return run_simulator(browser, step, line, &failure).await;
        }
        let browser = Browser::start().await;
        let wait = |css: String, secs: u64| {
            let (browser, failure) = (&browser, &failure);
            async move { browser.wait_for(&css, Duration::from_secs(secs), failure).await }
        };
        match what {
            "cluster" => {
                browser.client.goto(&format!("{}/#/", facts.api)).await.expect("the dashboard opens");
                wait("[data-testid=watch-status][data-state=live]".into(), 30).await;
                wait(format!("[data-testid=node-pen][data-node='{}']", facts.host), 10).await;
                let pens = browser.client.find_all(fantoccini::Locator::Css("[data-testid=node-pen]")).await.expect("node pens");
                assert_eq!(pens.len(), 1, "docs/workshop.md line {line}: the Cluster page shows one node, the host");
            }
            "apply examples/pod.json" => {
                let manifest = std::fs::read_to_string(workspace().join("examples/pod.json")).expect("examples/pod.json");
                browser.client.goto(&format!("{}/#/apply", facts.api)).await.expect("the dashboard opens");
                wait("[data-testid=apply-editor]".into(), 30).await;
                // Paste: set the text and fire one input event.
                let paste = "const editor = document.querySelector('[data-testid=apply-editor]');
                     editor.value = arguments[0];
                     editor.dispatchEvent(new Event('input', { bubbles: true }));";
                browser.client.execute(paste, vec![manifest.into()]).await.expect("the manifest is pasted");
                wait("[data-testid=apply-check][data-state=ready]".into(), 10).await;
                wait("[data-testid=apply-submit]".into(), 5).await.click().await.expect("Apply is clicked");
                let headline = wait("[data-testid=apply-result] h2".into(), 10).await.text().await.expect("the answer's headline");
                assert!(
                    headline.starts_with("201 Created"),
                    "docs/workshop.md line {line}: the text promises 201 Created, the page shows {headline}"
                );
                let answer = wait("[data-testid=apply-answer]".into(), 10).await.text().await.expect("the answer");
                assert!(answer.starts_with("phase Pending, node_name \"\""), "docs/workshop.md line {line}: the 201 answer: {answer}");
                wait("[data-testid=apply-tracker][data-stage=Running]".into(), 60).await;
            }
            _ => panic!("docs/workshop.md line {line}: the test does not know the dashboard step {what:?}"),
        }
        browser.close().await;
    });
}

/// What the simulator page shows, per column (spread, then bin-pack): its scheduling queue
/// (pod, where it waits), its decisions (pod, node), its last decision's message and
/// node-2's row in it (filter column, cell); and the Pods form's fields.
const SIMULATOR_PAGE: &str = "
    const texts = (rows, cells) => [...rows].map(r => cells.map(i => r.cells[i].textContent));
    return {
        queues: [...document.querySelectorAll('.sim-queue')].map(q => texts(q.querySelectorAll('[data-testid=sim-queue-row]'), [0, 1])),
        decisions: [...document.querySelectorAll('[data-testid=sim-history]')].map(t => texts(t.tBodies[0].rows, [1, 2])),
        messages: [...document.querySelectorAll('[data-testid=decision-message]')].map(m => m.textContent.trim()),
        node2: [...document.querySelectorAll('[data-testid=decision-table]')].map(t => {
            const heads = [...t.querySelectorAll('thead th')].map(h => h.textContent);
            const row = t.querySelector('[data-testid=decision-row][data-node=node-2]');
            return row ? heads.map((h, i) => [h, row.cells[i].textContent]) : [];
        }),
        form: ['prefix', 'count', 'cpu', 'memory'].map(f => document.querySelector(`[data-testid=sim-pod-${f}]`).value),
    };";

async fn simulator_page(browser: &Browser) -> serde_json::Value {
    browser.client.execute(SIMULATOR_PAGE, vec![]).await.expect("the simulator page is read")
}

/// The pairs of `page[key][column]` (queue rows, decisions, node-2's cells).
fn pairs(page: &serde_json::Value, key: &str, column: usize) -> Vec<(String, String)> {
    let pair = |p: &serde_json::Value| (p[0].as_str().unwrap_or_default().to_string(), p[1].as_str().unwrap_or_default().to_string());
    page[key][column].as_array().map(|a| a.iter().map(pair).collect()).unwrap_or_default()
}

/// Types `value` into the input `testid`, as a participant does (one input event).
async fn fill(browser: &Browser, testid: &str, value: &str) {
    let script = "const input = document.querySelector(`[data-testid=${arguments[0]}]`);
         input.value = arguments[1];
         input.dispatchEvent(new Event(input.tagName === 'SELECT' ? 'change' : 'input', { bubbles: true }));";
    browser.client.execute(script, vec![testid.into(), value.into()]).await.unwrap_or_else(|e| panic!("cannot type into {testid}: {e}"));
}

async fn click(browser: &Browser, css: &str, failure: &Path) {
    browser.wait_for(css, Duration::from_secs(30), failure).await.click().await.unwrap_or_else(|e| panic!("cannot click {css}: {e}"));
}

/// Clicks Step, as a participant does, until `done` holds for the page (a back-off of a
/// second or two may lie between two clicks that decide anything).
async fn step_until(browser: &Browser, failure: &Path, what: &str, done: impl Fn(&serde_json::Value) -> Result<(), String>) {
    shepherd_testing::poll(Duration::from_secs(30), what, || async {
        let page = simulator_page(browser).await;
        if done(&page).is_ok() {
            return Ok(());
        }
        click(browser, "[data-testid=sim-step]", failure).await;
        done(&simulator_page(browser).await)
    })
    .await;
}

/// Simulator steps of Part 5, in one browser from the first to the last.
async fn run_simulator(browser: &Browser, step: &str, line: usize, failure: &Path) {
    let at = format!("docs/workshop.md line {line}");
    let queues_empty = |page: &serde_json::Value| match (pairs(page, "queues", 0), pairs(page, "queues", 1)) {
        (spread, bin_pack) if spread.is_empty() && bin_pack.is_empty() => Ok(()),
        queues => Err(format!("the queues hold {queues:?}")),
    };
    match step {
        // Steps 1 and 2: three nodes, five `web` pods (the form's defaults), then one that
        // tolerates node-3's taint.
        "3 nodes, 5 pods, 1 gpu pod" => {
            click(browser, "[data-testid=sim-small]", failure).await;
            click(browser, "[data-testid=sim-add-pods]", failure).await;
            step_until(browser, failure, "both queues to be empty", queues_empty).await;
            fill(browser, "sim-pod-prefix", "gpu").await;
            fill(browser, "sim-pod-count", "1").await;
            fill(browser, "sim-pod-tolerations", "gpu=true:NoSchedule").await;
            click(browser, "[data-testid=sim-add-pods]", failure).await;
            step_until(browser, failure, "the gpu pod to be bound", queues_empty).await;
            let page = simulator_page(browser).await;
            for column in 0..2 {
                let message = page["messages"][column].as_str().unwrap_or_default();
                assert!(
                    message.starts_with("Successfully assigned default/gpu-6") && message.contains("3 of 3 evaluated nodes feasible"),
                    "{at}: the text promises node-3 is feasible for the gpu pod; column {column}: {message}"
                );
            }
        }
        // Step 3: cordon node-2, the form back to 5 × web, add, step until the queues settle.
        "cordon node-2" => {
            click(browser, ".sim-pen:has([data-node=node-2]) [data-testid=sim-cordon]", failure).await;
            fill(browser, "sim-pod-prefix", "web").await;
            fill(browser, "sim-pod-count", "5").await;
            fill(browser, "sim-pod-tolerations", "").await;
            click(browser, "[data-testid=sim-add-pods]", failure).await;
            // Settled: spread's queue empty, bin-pack's three pods parked as unschedulable.
            step_until(browser, failure, "the queues to settle after the cordon", |page| {
                let bin_pack = pairs(page, "queues", 1);
                let parked = bin_pack.len() == 3 && bin_pack.iter().all(|(_, at)| at.starts_with("unschedulable"));
                if pairs(page, "queues", 0).is_empty() && parked { Ok(()) } else { Err(format!("the queues hold {:?}", page["queues"])) }
            })
            .await;
            let page = simulator_page(browser).await;
            for (column, fitted) in [(0, 5), (1, 2)] {
                // This step's pods are web-7 to web-11 (gpu-6 came before them).
                let bound: Vec<(String, String)> = pairs(&page, "decisions", column)
                    .into_iter()
                    .filter(|(pod, node)| {
                        pod.strip_prefix("default/web-").and_then(|n| n.parse::<u32>().ok()).is_some_and(|n| n > 6)
                            && node.starts_with("node-")
                    })
                    .collect();
                assert!(
                    bound.len() == fitted && bound.iter().all(|(_, node)| node == "node-1"),
                    "{at}: the text promises {fitted} new pods on node-1 only; column {column} bound {bound:?}"
                );
                let node2 = pairs(&page, "node2", column);
                let unschedulable = node2.iter().find(|(filter, _)| filter == "NodeUnschedulable");
                assert!(
                    unschedulable.is_some_and(|(_, cell)| cell.starts_with('✗')),
                    "{at}: the text promises node-2's row fails NodeUnschedulable; column {column}: {node2:?}"
                );
            }
            assert_eq!(page["messages"][1], BIN_PACK_AFTER_THE_CORDON, "{at}: bin-pack's last decision");
        }
        // Step 4: 6 × web at 900m, then 1 × big at 1900m, 10 decisions per step, Step; then
        // Delete web, and the next Step binds big.
        "big unschedulable, then requeued" => {
            click(browser, "[data-testid=sim-small]", failure).await;
            fill(browser, "sim-pod-count", "6").await;
            fill(browser, "sim-pod-cpu", "900m").await;
            click(browser, "[data-testid=sim-add-pods]", failure).await;
            fill(browser, "sim-pod-prefix", "big").await;
            fill(browser, "sim-pod-count", "1").await;
            fill(browser, "sim-pod-cpu", "1900m").await;
            click(browser, "[data-testid=sim-add-pods]", failure).await;
            fill(browser, "sim-per-step", "10").await;
            click(browser, "[data-testid=sim-step]", failure).await;
            let page = simulator_page(browser).await;
            for column in 0..2 {
                let queue = pairs(&page, "queues", column);
                assert_eq!(
                    queue,
                    [("default/big-7".to_string(), BIG_UNSCHEDULABLE.to_string())],
                    "{at}: the text promises the queue lists big as {BIG_UNSCHEDULABLE:?}; column {column}"
                );
            }
            fill(browser, "sim-delete-name", "web").await;
            click(browser, "[data-testid=sim-delete]", failure).await;
            let page = simulator_page(browser).await;
            for column in 0..2 {
                let queue = pairs(&page, "queues", column);
                assert!(
                    queue.len() == 1 && queue[0].0 == "default/big-7" && queue[0].1.contains(BIG_REQUEUED.trim_end_matches('…')),
                    "{at}: the text promises the queue says {BIG_REQUEUED:?}; column {column}: {queue:?}"
                );
            }
            step_until(browser, failure, "big to be bound in both columns", |page| {
                let bound =
                    |column| pairs(page, "decisions", column).iter().any(|(pod, node)| pod == "default/big-7" && node.starts_with("node-"));
                if bound(0) && bound(1) { Ok(()) } else { Err(format!("decisions {:?}", page["decisions"])) }
            })
            .await;
        }
        // Step 5: the form still holds step 4's big; set back to 5 × web, 250m, 256Mi.
        "5000 nodes" => {
            click(browser, "[data-testid=sim-big]", failure).await;
            let form = simulator_page(browser).await["form"].clone();
            assert_eq!(
                form,
                serde_json::json!(["big", "1", "1900m", "256Mi"]),
                "{at}: the text says the Pods form still holds step 4's big"
            );
            for (field, value) in [("prefix", "web"), ("count", "5"), ("cpu", "250m"), ("memory", "256Mi")] {
                fill(browser, &format!("sim-pod-{field}"), value).await;
            }
            fill(browser, "sim-per-step", "1").await;
            click(browser, "[data-testid=sim-add-pods]", failure).await;
            click(browser, "[data-testid=sim-step]", failure).await;
            let caption = browser.wait_for("[data-testid=sim-coverage]", Duration::from_secs(60), failure).await;
            let caption = caption.text().await.expect("the caption");
            assert!(
                caption.starts_with(FIRST_DECISION_ON_5000_NODES[0]) && caption.contains(FIRST_DECISION_ON_5000_NODES[1]),
                "{at}: the text promises the caption {FIRST_DECISION_ON_5000_NODES:?}, the page shows {caption}"
            );
        }
        _ => panic!("{at}: the test does not know the simulator step {step:?}"),
    }
}

/// Whether `printed` is the line `shown` shows, where `…` in `shown` stands for any text.
fn shows(shown: &str, printed: &str) -> bool {
    let mut parts = shown.split('…');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = printed.strip_prefix(first) else { return false };
    let mut parts: Vec<&str> = parts.collect();
    let Some(last) = parts.pop() else { return rest.is_empty() };
    for part in parts {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// The URL in the server's `dashboard and API at http://…;` line.
fn served_at(log: &str) -> Option<String> {
    let rest = log.split_once("dashboard and API at ")?.1;
    Some(rest.split(';').next()?.trim().to_string())
}

#[test]
fn an_ellipsis_in_shown_output_stands_for_what_varies() {
    assert!(shows("flush in …; see it", "flush in 4m58s; see it"));
    assert!(shows("change… or the flush", "change (back-off 1s left) or the flush"));
    assert!(shows("change… or the flush", "change or the flush"));
    assert!(shows("exact", "exact"));
    assert!(!shows("exact", "exactly"));
    assert!(!shows("a … c", "a b d"));
    assert!(!shows("a …", "b c"));
}

#[test]
fn the_workshop_runs_as_written() {
    let text = std::fs::read_to_string(workspace().join("docs/workshop.md")).expect("docs/workshop.md");
    let steps = workshop::steps(&text).unwrap_or_else(|e| panic!("{e}"));
    let bin = build_binaries();
    for tool in ["kubectl", "docker"] {
        let found = Command::new(tool).arg("version").output().is_ok();
        assert!(found, "{tool} is not on PATH: the workshop runs it (scripts/setup.sh installs it)");
    }
    let dir = tempfile::tempdir().unwrap();
    lay_out_checkout(dir.path(), &bin);
    let transcripts = workspace().join("target/e2e/workshop");
    let _ = std::fs::remove_dir_all(&transcripts);
    let mut session = Session { dir, transcripts, api: None, cluster: None, terminals: Vec::new() };
    let mut facts = Facts { bin, api: String::new(), cluster: String::new(), host: String::new(), history: Vec::new() };
    let mut claims = claims().into_iter().peekable();
    let mut last_output = String::new();
    let mut dashboard = Dashboard::new();

    for step in steps {
        match step {
            Step::Commands { terminal: Some(name), commands, line } => {
                let (last, before) = commands.split_last().unwrap_or_else(|| panic!("docs/workshop.md line {line}: an empty block"));
                let terminal = session.terminal(&name);
                for command in before {
                    let ran = terminal.run(&command.text, COMMAND_TIMEOUT);
                    assert_eq!(ran.status, 0, "{name} terminal, docs/workshop.md line {}: {}\n{}", command.line, command.text, ran.output);
                }
                terminal.start(&last.text);
                if name == SERVER {
                    let shown = terminal.expect_output("the address it serves", Duration::from_secs(60), |out| served_at(out).is_some());
                    session.api = served_at(&shown);
                    facts.api = session.api.clone().expect("just read");
                    let info: serde_json::Value = serde_json::from_str(&facts.sheepctl(&["info", "-o", "json"])).expect("info as JSON");
                    facts.cluster = info["cluster_id"].as_str().expect("a cluster id").to_string();
                    session.cluster = Some(facts.cluster.clone());
                    // The instructor goes on once the local node is Ready: the host's name.
                    let host = poll_blocking(Duration::from_secs(60), "the local node to be Ready", || {
                        let nodes = facts.sheepctl(&["nodes"]);
                        rows(&nodes).into_iter().find(|r| r[1] == "Ready").map(|r| r[0].to_string()).ok_or(nodes)
                    });
                    facts.host = host;
                }
            }
            Step::Commands { terminal: None, commands, .. } => {
                for command in commands {
                    let claim = claims.next_if(|c| command.text.starts_with(c.command));
                    let terminal = session.terminal(PARTICIPANT);
                    last_output = run_claimed(terminal, &command, claim.as_ref(), &facts);
                    facts.history.push((command.text.clone(), last_output.clone()));
                }
            }
            Step::Output { text, line } => {
                let shown: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
                let printed: Vec<&str> = last_output.lines().map(str::trim).collect();
                assert!(
                    printed.windows(shown.len().max(1)).any(|w| w.iter().zip(&shown).all(|(p, s)| shows(s, p))),
                    "docs/workshop.md line {line} shows what the command before prints:\n{text}\nit printed:\n{last_output}"
                );
            }
            Step::Dashboard { what, line } => run_dashboard(&mut dashboard, &what, line, &facts),
            Step::Interrupt { terminal, line } => {
                let ran = session.terminal(&terminal).interrupt(Duration::from_secs(90));
                assert!(
                    [0, 130].contains(&ran.status),
                    "docs/workshop.md line {line}: Ctrl-C in the {terminal} terminal, exit status {}:\n{}",
                    ran.status,
                    ran.output
                );
                if terminal == SERVER {
                    assert!(ran.output.contains("stopped cleanly"), "shepherd stops cleanly on Ctrl-C:\n{}", ran.output);
                }
            }
        }
    }
    dashboard.close();
    if let Some(claim) = claims.next() {
        panic!(
            "docs/workshop.md no longer runs a command that starts with {:?} where the test expects it ({})",
            claim.command, claim.promise
        );
    }
    let cluster = session.cluster.clone().expect("the cluster's id");
    assert_eq!(containers_of(&cluster), Vec::<String>::new(), "after the wrap-up, containers of cluster {cluster} are left in Docker");
}
