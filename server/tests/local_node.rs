//! The `shepherd` binary and the stand-alone agent's `SHEPHERD_AGENT_LISTEN`: a local node's
//! agent API listens where it says, a server without a local node still starts where a
//! shell exports it for the agent, and a local node that cannot listen stops the server.

use std::process::Stdio;
use std::time::Duration;

use shared::model::Node;
use shepherd_client::{Client, Selection};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const WAIT: Duration = Duration::from_secs(20);

/// Starts the binary with `flags` and `SHEPHERD_AGENT_LISTEN=listen`; returns it and the
/// URL its log says it serves.
async fn start(flags: &[&str], listen: &str) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_shepherd"))
        .args(["--in-memory", "--addr", "127.0.0.1:0"])
        .args(flags)
        .env("SHEPHERD_AGENT_LISTEN", listen)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the shepherd binary runs");
    let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
    let url = tokio::time::timeout(WAIT, async {
        let mut seen = String::new();
        while let Some(line) = lines.next_line().await.expect("its log") {
            if let Some(rest) = line.split_once("shepherd API listening on ").map(|(_, rest)| rest) {
                return rest.split_whitespace().next().expect("a URL").to_string();
            }
            seen.push_str(&line);
            seen.push('\n');
        }
        panic!("shepherd stopped before it listened:\n{seen}");
    })
    .await
    .expect("shepherd listens within 20 s");
    // The rest of its log is not read: keep the pipe drained so that it never blocks.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

#[tokio::test]
async fn the_local_node_listens_where_shepherd_agent_listen_says() {
    let (_server, url) = start(&["--local-node", "--local-runtime", "simulated"], "127.0.0.1:19047").await;
    let client = Client::new(&url, None).unwrap();
    let endpoint = shepherd_testing::eventually(&client, WAIT, "the local node to register", || async {
        let nodes = client.list::<Node>(&Selection::default()).await.expect("the nodes");
        nodes.items.iter().find(|n| !n.status.agent_endpoint.is_empty()).map(|n| n.status.agent_endpoint.clone())
    })
    .await;
    assert_eq!(endpoint, "http://127.0.0.1:19047");
    let health = reqwest::get(format!("{endpoint}/healthz")).await.expect("the local node's agent API answers");
    assert!(health.status().is_success(), "{health:?}");
}

#[tokio::test]
async fn a_server_without_a_local_node_starts_where_the_agents_variable_is_set() {
    // Exported for a stand-alone agent in the same shell: the server has no use for it,
    // whatever it holds.
    for listen in ["127.0.0.1:19048", "junk", ""] {
        let (_server, url) = start(&[], listen).await;
        let client = Client::new(&url, None).unwrap();
        assert!(client.list::<Node>(&Selection::default()).await.expect("the nodes").items.is_empty(), "{listen:?}");
    }
}

/// A local node that cannot listen where it is told stops the whole server with its error:
/// a server that went on without its node would look healthy and run no pod.
#[tokio::test]
async fn a_local_node_that_cannot_listen_stops_the_server_with_why() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_addr = taken.local_addr().unwrap().to_string();
    let ended = Command::new(env!("CARGO_BIN_EXE_shepherd"))
        .args(["--in-memory", "--addr", "127.0.0.1:0", "--local-node", "--local-runtime", "simulated"])
        .args(["--local-node-listen", &taken_addr])
        .env_remove("SHEPHERD_AGENT_LISTEN")
        .kill_on_drop(true)
        .output();
    let ended = tokio::time::timeout(WAIT, ended).await.expect("shepherd exits within 20 s").expect("the shepherd binary runs");
    let stderr = String::from_utf8_lossy(&ended.stderr);
    assert!(!ended.status.success(), "{stderr}");
    let error = stderr.lines().find(|l| l.starts_with("error: ")).unwrap_or_else(|| panic!("no error line:\n{stderr}"));
    assert!(error.contains(&format!("cannot listen on {taken_addr} for the agent API")), "{error}");
    assert_eq!(error.matches("Address already in use").count(), 1, "the cause once: {error}");
}
