//! The server signs what it asks of a node's agent API with the node's token, and an agent
//! with a token serves nothing else: pod logs through the server work, and the agent's own
//! address refuses an unsigned or forged request. Real agents (simulated runtime) in process.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{TestServer, eventually};
use futures::StreamExt;
use serde_json::json;
use server::Config;
use server::auth::{Principal, Role, Tokens};
use shared::model::{Node, Object, Pod, PodPhase};
use shepherd_client::{Client, LogOptions};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);
const ADMIN: &str = "admin-token-1";
const NODE_1: &str = "node-1-token";

/// An agent for `node` with `token`, on a loopback port, until `shutdown`.
fn start_agent(server: &TestServer, node: &str, token: &str, shutdown: &CancellationToken) {
    let mut config = agent::AgentConfig::new(&server.url);
    config.node_name = node.to_string();
    config.token = Some(token.to_string());
    config.runtime = agent::RuntimeChoice::Simulated { start_delay: Duration::from_millis(50) };
    let runtime = Arc::new(agent::runtime::SimulatedRuntime::new(Duration::from_millis(50)));
    let api = Arc::new(Client::new(&server.url, Some(token.to_string())).unwrap().named("agent"));
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        agent::run_node(config, runtime, api, listener, shutdown).await.unwrap();
    });
}

async fn running_pod_on(admin: &Client, node: &str) -> String {
    let name = format!("on-{node}");
    let pod = json!({
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"node_selector": {"kubernetes.io/hostname": node},
                 "containers": [{"name": "main", "image": "minimal", "command": ["sleep", "3600"]}]}
    });
    admin.create_object(&Object::from_value(pod).unwrap()).await.expect("the pod is created");
    eventually(admin, WAIT, &format!("pod {name} Running"), || async {
        let pod = admin.get::<Pod>("default", &name).await.ok()?;
        (pod.status.phase == PodPhase::Running).then_some(())
    })
    .await;
    name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_reach_an_agent_with_a_token_only_signed_with_it() {
    let mut tokens = Tokens::default();
    tokens.add(ADMIN, Principal { role: Role::Admin, node: None });
    tokens.add(NODE_1, Principal { role: Role::Node, node: Some("node-1".into()) });
    let server = TestServer::start(Config { tokens, ..Config::in_memory() }).await;
    let admin = Client::new(&server.url, Some(ADMIN.to_string())).unwrap();
    let shutdown = CancellationToken::new();
    start_agent(&server, "node-1", NODE_1, &shutdown);
    // A node whose agent was given an admin token: the server has no node token to sign with.
    start_agent(&server, "node-2", ADMIN, &shutdown);

    let signed = running_pod_on(&admin, "node-1").await;
    let mut log = admin.logs("default", &signed, &LogOptions::default()).await.expect("the log through the server");
    let first = log.next().await.expect("a first chunk").expect("the log streams");
    assert!(first.starts_with(b"[simulated]"), "{first:?}");

    let node = admin.get::<Node>("", "node-1").await.unwrap();
    let direct = format!("{}/logs/default/{signed}", node.status.agent_endpoint);
    let unsigned = reqwest::get(&direct).await.unwrap();
    assert_eq!(unsigned.status(), 401, "the agent's own address, unsigned");
    let bearer = reqwest::Client::new().get(&direct).bearer_auth(NODE_1).send().await.unwrap();
    assert_eq!(bearer.status(), 401, "the node's token itself is no signature");
    let health = reqwest::get(format!("{}/healthz", node.status.agent_endpoint)).await.unwrap();
    assert_eq!(health.status(), 200, "health stays open");

    let unsignable = running_pod_on(&admin, "node-2").await;
    let error = match admin.logs("default", &unsignable, &LogOptions::default()).await {
        Ok(_) => panic!("an agent with a token must refuse an unsigned request"),
        Err(e) => e.to_string(),
    };
    assert!(error.contains("401") && error.contains("no node token for node node-2"), "{error}");
    shutdown.cancel();
    server.stop().await;
}
