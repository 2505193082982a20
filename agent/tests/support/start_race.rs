//! One agent-start race, as a new user meets it: a fresh server, a `shepherd-agent` process
//! starting, and a pod applied the moment the agent's node registers, before or after its
//! first heartbeat. Shared by the test that repeats it and the bench that measures it.

use std::time::{Duration, Instant};

use shared::model::{Node, Pod, PodPhase};
use shepherd_testing::TestServer;

/// When the pod, created as the agent started, was bound and when it ran.
pub struct RaceOutcome {
    pub bound_after: Duration,
    pub running_after: Duration,
}

/// Runs one race; `Err` says how far the pod got by `timeout`.
pub async fn agent_start_race(agent_binary: &str, timeout: Duration) -> Result<RaceOutcome, String> {
    let server = TestServer::start(server::Config::in_memory()).await;
    let client = &server.client;
    let mut agent = std::process::Command::new(agent_binary)
        .args(["--server", &server.url, "--node-name", "racer", "--runtime", "simulated", "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "error")
        .spawn()
        .expect("cannot start shepherd-agent");
    // Polled as fast as a user's script would: the race is the moment of registration.
    let registered = Instant::now();
    while client.get::<Node>("", "racer").await.is_err() {
        assert!(registered.elapsed() < timeout, "the agent did not register within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let pod = shared::manifest::parse(include_str!("../../../examples/pod.json")).expect("the example pod").remove(0);
    client.create_object(&pod).await.expect("the pod is created");
    let began = Instant::now();
    let mut bound_after = None;
    let outcome = loop {
        let pod: Pod = client.get("default", "web-server").await.expect("the pod");
        if bound_after.is_none() && pod.spec.node_name == "racer" {
            bound_after = Some(began.elapsed());
        }
        if let (Some(bound_after), PodPhase::Running) = (bound_after, pod.status.phase) {
            break Ok(RaceOutcome { bound_after, running_after: began.elapsed() });
        }
        if began.elapsed() > timeout {
            break Err(format!("after {timeout:?} the pod is still {}: {:?}", pod.status.phase, pod.status.conditions));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let _ = agent.kill();
    let _ = agent.wait();
    server.stop().await;
    outcome
}
