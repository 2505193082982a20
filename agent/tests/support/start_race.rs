//! One agent-start race, as a new user meets it: a fresh server, a `shepherd-agent` process
//! starting, and a pod applied the moment the agent's node registers, before or after its
//! first heartbeat. Shared by the test that repeats it and the bench that measures it.

use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// When the pod, created as the agent started, was bound and when it ran.
pub struct RaceOutcome {
    pub bound_after: Duration,
    pub running_after: Duration,
}

/// Runs one race; `Err` says how far the pod got by `timeout`.
pub async fn agent_start_race(agent_binary: &str, timeout: Duration) -> Result<RaceOutcome, String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(server::run(listener, server::Config::in_memory(), shutdown.clone()));
    let http = reqwest::Client::new();
    while !http.get(format!("{base}/readyz")).send().await.is_ok_and(|r| r.status().is_success()) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut agent = std::process::Command::new(agent_binary)
        .args(["--server", &base, "--node-name", "racer", "--runtime", "simulated", "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "error")
        .spawn()
        .expect("cannot start shepherd-agent");
    let node = format!("{base}/api/v1/nodes/racer");
    let registered = Instant::now();
    while !http.get(&node).send().await.is_ok_and(|r| r.status().is_success()) {
        assert!(registered.elapsed() < timeout, "the agent did not register within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let pod: Value = serde_json::from_str(include_str!("../../../examples/pod.json")).unwrap();
    let created = http.post(format!("{base}/api/v1/pods")).json(&pod).send().await.unwrap();
    assert_eq!(created.status().as_u16(), 201);
    let began = Instant::now();
    let mut bound_after = None;
    let outcome = loop {
        let pod: Value = http.get(format!("{base}/api/v1/namespaces/default/pods/web-server")).send().await.unwrap().json().await.unwrap();
        if bound_after.is_none() && pod["spec"]["node_name"] == "racer" {
            bound_after = Some(began.elapsed());
        }
        if let (Some(bound_after), "Running") = (bound_after, pod["status"]["phase"].as_str().unwrap_or_default()) {
            break Ok(RaceOutcome { bound_after, running_after: began.elapsed() });
        }
        if began.elapsed() > timeout {
            break Err(format!("after {timeout:?} the pod is still {}: {}", pod["status"]["phase"], pod["status"]["conditions"]));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let _ = agent.kill();
    let _ = agent.wait();
    shutdown.cancel();
    let _ = server.await;
    outcome
}
