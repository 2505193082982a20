//! The server signs what it asks of a node's agent API with the token that agent speaks to
//! it with (or, until it has spoken, the node's token from the tokens file), and an agent
//! with a token serves nothing else: pod logs through the server work, and the agent's own
//! address refuses an unsigned or forged request. Real agents (simulated runtime) in process,
//! and stand-ins that check the signature with `shepherd_client::agent_auth`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{StatusCode, header};
use common::{TestServer, eventually, pod};
use futures::StreamExt;
use serde_json::json;
use server::Config;
use server::auth::{Principal, Role, Tokens};
use shared::model::{Node, Object, Pod, PodPhase};
use shepherd_client::{Client, LogOptions, agent_auth};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);
const ADMIN: &str = "admin-token-1";
const NODE_1: &str = "node-1-token";

fn tokens() -> Tokens {
    let mut tokens = Tokens::default();
    tokens.add(ADMIN, Principal::new(Role::Admin, None));
    tokens.add(NODE_1, Principal::new(Role::Node, Some("node-1".into())));
    tokens
}

/// The configuration of an agent for `node` with `token`, on a loopback port, simulated.
fn agent_config(server: &TestServer, node: &str, token: &str) -> agent::AgentConfig {
    let mut config = agent::AgentConfig::new(&server.url);
    config.node_name = node.to_string();
    config.token = Some(token.to_string());
    config.runtime = agent::RuntimeChoice::Simulated { start_delay: Duration::from_millis(50) };
    config.listen = "127.0.0.1:0".parse().unwrap();
    config
}

/// An agent for `node` with `token` until `shutdown`.
fn start_agent(server: &TestServer, node: &str, token: &str, shutdown: &CancellationToken) {
    let config = agent_config(server, node, token);
    let runtime = Arc::new(agent::runtime::SimulatedRuntime::new(Duration::from_millis(50)));
    let api = Arc::new(Client::new(&server.url, Some(token.to_string())).unwrap().named("agent"));
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        let listener = tokio::net::TcpListener::bind(config.listen).await.unwrap();
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

/// The first chunk of pod `name`'s log through the server, or the server's error.
async fn first_log_chunk(client: &Client, name: &str) -> Result<String, String> {
    let mut log = client.logs("default", name, &LogOptions::default()).await.map_err(|e| e.to_string())?;
    let chunk = log.next().await.expect("a first chunk").expect("the log streams");
    Ok(String::from_utf8_lossy(&chunk).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_reach_an_agent_with_a_token_only_signed_with_it() {
    let server = TestServer::start(Config { tokens: tokens(), ..Config::in_memory() }).await;
    let admin = Client::new(&server.url, Some(ADMIN.to_string())).unwrap();
    let shutdown = CancellationToken::new();
    start_agent(&server, "node-1", NODE_1, &shutdown);
    // An agent on an admin token: the server signs with the token it registered with.
    start_agent(&server, "node-2", ADMIN, &shutdown);

    let signed = running_pod_on(&admin, "node-1").await;
    let first = first_log_chunk(&admin, &signed).await.expect("the log through the server");
    assert!(first.starts_with("[simulated]"), "{first:?}");

    let node = admin.get::<Node>("", "node-1").await.unwrap();
    let direct = format!("{}/logs/default/{signed}", node.status.agent_endpoint);
    let unsigned = reqwest::get(&direct).await.unwrap();
    assert_eq!(unsigned.status(), 401, "the agent's own address, unsigned");
    let bearer = reqwest::Client::new().get(&direct).bearer_auth(NODE_1).send().await.unwrap();
    assert_eq!(bearer.status(), 401, "the node's token itself is no signature");
    let health = reqwest::get(format!("{}/healthz", node.status.agent_endpoint)).await.unwrap();
    assert_eq!(health.status(), 200, "health stays open");

    // A container the pod does not have is the server's 400, in kube-apiserver's words.
    let options = LogOptions { container: Some("nope".into()), ..LogOptions::default() };
    let error = admin.logs("default", &signed, &options).await.err().expect("no container nope").to_string();
    assert!(error.contains(&format!("container nope is not valid for pod {signed}")) && !error.contains('{'), "{error}");

    let on_admin_token = running_pod_on(&admin, "node-2").await;
    let first = first_log_chunk(&admin, &on_admin_token).await.expect("the log of a node whose agent has an admin token");
    assert!(first.starts_with("[simulated]"), "{first:?}");
    shutdown.cancel();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_on_one_admin_token_serves_every_nodes_logs_through_the_server() {
    let server = TestServer::start(Config { tokens: tokens(), ..Config::in_memory() }).await;
    let admin = Client::new(&server.url, Some(ADMIN.to_string())).unwrap();
    let shutdown = CancellationToken::new();
    let fleet = agent::fleet::FleetConfig { node: agent_config(&server, "sim", ADMIN), nodes: 2, max_in_flight: 4 };
    let running = tokio::spawn(agent::fleet::run(fleet, shutdown.clone()));

    for node in ["sim-0", "sim-1"] {
        let name = running_pod_on(&admin, node).await;
        let first = first_log_chunk(&admin, &name).await.unwrap_or_else(|e| panic!("the log of a pod on {node}: {e}"));
        assert!(first.starts_with("[simulated]"), "{node}: {first:?}");
    }
    let node = admin.get::<Node>("", "sim-1").await.unwrap();
    let unsigned = reqwest::get(format!("{}/logs/default/on-sim-1", node.status.agent_endpoint)).await.unwrap();
    assert_eq!(unsigned.status(), 401, "the fleet's own address, unsigned");
    shutdown.cancel();
    running.await.unwrap().expect("the fleet stops cleanly");
    server.stop().await;
}

/// A stand-in for an agent API that serves `/logs/...` only to requests signed with `key`.
async fn stand_in_agent(key: &'static str) -> String {
    let check = move |request: Request| async move {
        let target = request.uri().path_and_query().map_or_else(String::new, |p| p.as_str().to_string());
        let authorization = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        match agent_auth::verify(key, "GET", &target, authorization, now) {
            Ok(()) => (StatusCode::OK, format!("log of {target}\n")),
            Err(refusal) => (StatusCode::UNAUTHORIZED, refusal.to_string()),
        }
    };
    let app = axum::Router::new().route("/logs/{namespace}/{pod}", axum::routing::get(check));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    endpoint
}

#[tokio::test]
async fn after_a_restart_the_node_token_signs_until_the_agent_speaks_again() {
    let dir = tempfile::tempdir().unwrap();
    let config = || Config { tokens: tokens(), run_scheduler: false, ..Config::durable(dir.path()) };
    let server = TestServer::start(config()).await;
    for (node, token) in [("node-1", NODE_1), ("node-2", ADMIN)] {
        let mut description = shepherd_testing::node(node);
        description.agent_endpoint = stand_in_agent(token).await;
        shepherd_testing::register_node(&shepherd_testing::client(&server.url, Some(token)), &description).await;
        let admin = server.with_token(ADMIN);
        assert_eq!(admin.post("/api/v1/pods", pod(&format!("on-{node}"), 1, 1)).await.0, StatusCode::CREATED);
        let binding = json!({"target": {"name": node}});
        assert_eq!(admin.post(&format!("/api/v1/namespaces/default/pods/on-{node}/binding"), binding).await.0, StatusCode::CREATED);
    }
    let admin = Client::new(&server.url, Some(ADMIN.to_string())).unwrap();
    assert_eq!(first_log_chunk(&admin, "on-node-2").await.as_deref(), Ok("log of /logs/default/on-node-2?container=web\n"));
    server.stop().await;

    // The restarted server has heard from no agent yet.
    let server = TestServer::start(config()).await;
    let admin = Client::new(&server.url, Some(ADMIN.to_string())).unwrap();
    assert_eq!(
        first_log_chunk(&admin, "on-node-1").await.as_deref(),
        Ok("log of /logs/default/on-node-1?container=web\n"),
        "the node token"
    );
    let error = first_log_chunk(&admin, "on-node-2").await.expect_err("nothing to sign with for an agent on an admin token");
    assert!(error.contains("the server could not sign its request to the agent of node node-2, so the agent refused it (401"), "{error}");
    assert!(!error.contains("the agent of node node-2 answered"), "the server could not sign; the agent did not fail: {error}");
    let (status, body) = server.with_token(ADMIN).get("/api/v1/namespaces/default/pods/on-node-2/log").await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "the agent's 401 is the server's trouble, not a reason for the client to log in: {body}");
    assert!(error.contains("`<token> node node-2`"), "the error names the fix: {error}");
    shepherd_testing::renew_lease(&admin, &shepherd_testing::node("node-2")).await;
    assert_eq!(first_log_chunk(&admin, "on-node-2").await.as_deref(), Ok("log of /logs/default/on-node-2?container=web\n"), "renewed");
    server.stop().await;
}

/// A listener that counts the requests it gets, and its address.
async fn counting_listener() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    let app = axum::Router::new().fallback(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async { "secret" }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (address, hits)
}

#[tokio::test]
async fn a_node_cannot_aim_the_log_proxy_at_another_path_a_refused_address_or_a_redirect() {
    let server = TestServer::start(Config { run_scheduler: false, ..Config::in_memory() }).await;
    // Registered as the agent does, with each endpoint a node token could send.
    let node = |endpoint: &str| {
        let mut description = shepherd_testing::node("n1");
        description.agent_endpoint = endpoint.to_string();
        shepherd_testing::registration(&description)
    };
    let (secret, hits) = counting_listener().await;
    let (status, error) = server.post("/api/v1/nodes", node(&format!("{secret}/latest/meta-data"))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error}");
    assert_eq!(error["error"]["details"][0]["field"], "status.agent_endpoint", "{error}");
    // The cloud's metadata service, and this machine's loopback spelt as one number (which
    // the URL parser would turn into 127.0.0.1), as a node token would register them.
    let port = secret.rsplit(':').next().unwrap();
    for (endpoint, why) in [
        ("http://169.254.169.254:80".to_string(), "names 169.254.169.254, a link-local address, which the server sends no request to"),
        ("http://[::ffff:169.254.169.254]:80".to_string(), "a link-local address"),
        // The same address through NAT64, in the IPv4-compatible form and through 6to4.
        ("http://[64:ff9b::a9fe:a9fe]:80".to_string(), "(which carries 169.254.169.254), a link-local address"),
        ("http://[::169.254.169.254]:80".to_string(), "(which carries 169.254.169.254), a link-local address"),
        ("http://[2002:a9fe:a9fe::]:80".to_string(), "(which carries 169.254.169.254), a link-local address"),
        ("http://255.255.255.255:80".to_string(), "names 255.255.255.255, a broadcast address"),
        // A port with a leading zero: this machine's agent port, written so a check of the
        // text would miss it.
        (format!("http://127.0.0.1:0{port}"), "must be http:// or https://, a host and a port"),
        (format!("http://0x7f000001:{port}"), "a resolver reads it as an IPv4 address"),
        (format!("http://2130706433:{port}"), "a resolver reads it as an IPv4 address"),
    ] {
        let (status, error) = server.post("/api/v1/nodes", node(&endpoint)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{endpoint}: {error}");
        assert!(error["error"]["details"][0]["message"].as_str().unwrap().contains(why), "{error}");
    }

    // An endpoint that answers with a redirect to somewhere else.
    let target = format!("{secret}/secret");
    let redirect = axum::Router::new().fallback(move || {
        let target = target.clone();
        async move { (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, target)]) }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let redirecting = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, redirect).await.unwrap() });
    let mut description = shepherd_testing::node("n1");
    description.agent_endpoint = redirecting.clone();
    shepherd_testing::register_node(&server.client, &description).await;
    assert_eq!(server.post("/api/v1/pods", pod("web", 1, 1)).await.0, StatusCode::CREATED);
    let binding = json!({"target": {"name": "n1"}});
    assert_eq!(server.post("/api/v1/namespaces/default/pods/web/binding", binding).await.0, StatusCode::CREATED);
    let (status, error) = server.get("/api/v1/namespaces/default/pods/web/log").await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{error}");
    assert!(error["error"]["message"].as_str().unwrap().starts_with("the agent of node n1 answered 307"), "{error}");
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0, "the redirect was not followed");

    let mut changed = node(&format!("{secret}/?x="));
    changed["metadata"]["name"] = json!("n1");
    let (status, error) = server.put("/api/v1/nodes/n1/status", changed).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "a status update is checked too: {error}");
    let (_, stored) = server.get("/api/v1/nodes/n1").await;
    assert_eq!(stored["status"]["agent_endpoint"], redirecting.as_str(), "nothing changed");
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0);
    server.stop().await;
}

/// A stand-in agent that accepts any exec upgrade (speaking v5.channel.k8s.io) and sends on
/// the subprotocols and the Authorization each one came with.
async fn recording_exec_agent() -> (String, tokio::sync::mpsc::UnboundedReceiver<(String, String)>) {
    let (seen, heard) = tokio::sync::mpsc::unbounded_channel();
    let accept = move |headers: axum::http::HeaderMap, upgrade: axum::extract::ws::WebSocketUpgrade| {
        let header = |name| headers.get(name).and_then(|v: &axum::http::HeaderValue| v.to_str().ok()).unwrap_or("").to_string();
        let _ = seen.send((header(header::SEC_WEBSOCKET_PROTOCOL), header(header::AUTHORIZATION)));
        async move { upgrade.protocols([shared::remote_command::V5]).on_upgrade(|_socket| async {}) }
    };
    let app = axum::Router::new().route("/exec/{namespace}/{pod}", axum::routing::get(accept));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (endpoint, heard)
}

#[tokio::test]
async fn a_browser_websocket_authenticates_with_its_token_in_a_subprotocol_that_never_reaches_the_agent() {
    let mut tokens = tokens();
    tokens.add("viewer-token", Principal::new(Role::Viewer, None));
    let server = TestServer::start(Config { tokens, run_scheduler: false, ..Config::in_memory() }).await;
    let (endpoint, mut heard) = recording_exec_agent().await;
    let mut description = shepherd_testing::node("node-1");
    description.agent_endpoint = endpoint;
    shepherd_testing::register_node(&shepherd_testing::client(&server.url, Some(NODE_1)), &description).await;
    let admin = server.with_token(ADMIN);
    assert_eq!(admin.post("/api/v1/pods", pod("web", 1, 1)).await.0, StatusCode::CREATED);
    let binding = json!({"target": {"name": "node-1"}});
    assert_eq!(admin.post("/api/v1/namespaces/default/pods/web/binding", binding).await.0, StatusCode::CREATED);

    // As a browser opens it: no Authorization header, the token beside the session's subprotocol.
    let open = |protocols: String| {
        reqwest::Client::new()
            .get(format!("{}/api/v1/namespaces/default/pods/web/exec?command=ls&stdout=true", server.url))
            .header(header::CONNECTION, "Upgrade")
            .header(header::UPGRADE, "websocket")
            .header(header::SEC_WEBSOCKET_VERSION, "13")
            .header(header::SEC_WEBSOCKET_KEY, "dGhlIHNhbXBsZSBub25jZQ==")
            .header(header::SEC_WEBSOCKET_PROTOCOL, protocols)
            .send()
    };
    let with_token = |token: &str| format!("{}, {}", shared::remote_command::V5, shared::api::bearer_protocol(token));
    let opened = open(with_token(ADMIN)).await.unwrap();
    assert_eq!(opened.status(), StatusCode::SWITCHING_PROTOCOLS);
    assert_eq!(opened.headers()[header::SEC_WEBSOCKET_PROTOCOL], shared::remote_command::V5, "the session's own subprotocol answers");
    let (protocols, authorization) = heard.recv().await.unwrap();
    assert_eq!(protocols, shared::remote_command::V5, "the token's subprotocol stays with the server");
    assert!(!authorization.contains(ADMIN) && !authorization.is_empty(), "the agent sees the server's signature: {authorization}");

    let refused = |status: StatusCode, words: &'static str| {
        move |answer: (StatusCode, String)| {
            assert_eq!(answer.0, status, "{}", answer.1);
            assert!(answer.1.contains(words), "{}", answer.1);
        }
    };
    let answer = |response: reqwest::Response| async move { (response.status(), response.text().await.unwrap()) };
    refused(StatusCode::FORBIDDEN, "needs write rights")(answer(open(with_token("viewer-token")).await.unwrap()).await);
    refused(StatusCode::UNAUTHORIZED, "not known to this server")(answer(open(with_token("forged")).await.unwrap()).await);
    let alone = shared::api::bearer_protocol(ADMIN);
    refused(StatusCode::UNAUTHORIZED, "needs another subprotocol")(answer(open(alone).await.unwrap()).await);
    let garbled = format!("{}, {}!!", shared::remote_command::V5, shared::api::BEARER_PROTOCOL_PREFIX);
    refused(StatusCode::UNAUTHORIZED, "not unpadded base64url")(answer(open(garbled).await.unwrap()).await);
    // A container the pod does not have is refused before the upgrade, in kube-apiserver's words.
    for session in ["exec?command=ls&", "attach?"] {
        let wrong = server
            .bare(reqwest::Method::GET, &format!("/api/v1/namespaces/default/pods/web/{session}container=nope&stdout=true"))
            .bearer_auth(ADMIN)
            .header(header::CONNECTION, "Upgrade")
            .header(header::UPGRADE, "websocket")
            .header(header::SEC_WEBSOCKET_VERSION, "13")
            .header(header::SEC_WEBSOCKET_KEY, "dGhlIHNhbXBsZSBub25jZQ==")
            .header(header::SEC_WEBSOCKET_PROTOCOL, shared::remote_command::V5)
            .send()
            .await
            .unwrap();
        refused(StatusCode::BAD_REQUEST, "container nope is not valid for pod web")(answer(wrong).await);
    }
    assert!(heard.try_recv().is_err(), "no refused session reached the agent");
}
