//! `examples/try-it-yourself.sh`, the seed's walk-through as a script, runs to the end
//! against a real server and a node (simulated, so that the script's timing is the
//! scheduler's and the agent's, not the Docker engine's).

mod support;

use std::time::Duration;

use support::TestServer;
use tokio_util::sync::CancellationToken;

/// Runs a simulated node agent on a thread of its own until `shutdown`.
fn start_node(url: &str, shutdown: CancellationToken) -> std::thread::JoinHandle<()> {
    support::start_simulated_node(url, "try-it-node", Duration::from_millis(300), shutdown)
}

#[test]
fn the_walk_through_runs_to_the_end() {
    let server = TestServer::start();
    let shutdown = CancellationToken::new();
    let node = start_node(&server.url, shutdown.clone());

    let output = std::process::Command::new("bash")
        .arg(support::example("try-it-yourself.sh"))
        .env("SHEEPCTL", env!("CARGO_BIN_EXE_sheepctl"))
        .env("SHEPHERD_API", &server.url)
        .env("WAIT_TIMEOUT", "30s")
        .env("CLEANUP", "1")
        .env_remove("SHEPHERD_TOKEN")
        .output()
        .expect("bash runs the script");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the script failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("pod/web-server created"), "{stdout}");
    assert!(stdout.contains("pod/web-server condition met") || stdout.contains("Running"), "{stdout}");
    // The events tell the story in order, ending with Running: the REASON column of the
    // `events` table, each reason where it first appears.
    let events = stdout.split("What happened, oldest first:").nth(1).expect("the script lists the events");
    let mut story: Vec<&str> = Vec::new();
    for line in events.lines().skip_while(|l| !l.starts_with("LAST SEEN")).skip(1).take_while(|l| !l.trim().is_empty()) {
        let reason = line.split_whitespace().nth(2).unwrap_or_default();
        if ["Created", "Scheduled", "Started", "Running"].contains(&reason) && !story.contains(&reason) {
            story.push(reason);
        }
    }
    assert_eq!(story, ["Created", "Scheduled", "Started", "Running"], "{stdout}");
    let cleanup = stdout.split("Clean up.").nth(1).expect("CLEANUP=1 deletes the pod");
    assert!(
        stdout.contains("marks it\n# Terminating; the node's agent"),
        "one paragraph of commentary is printed as one, its lines together\n{stdout}"
    );
    assert!(cleanup.contains("pod \"web-server\" deleted"), "{stdout}");
    assert!(cleanup.contains("pod/web-server condition met"), "the script waits until the pod is gone\n{stdout}");

    shutdown.cancel();
    node.join().expect("the node thread ends");
}
