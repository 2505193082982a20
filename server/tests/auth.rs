//! Bearer tokens: admin may do anything, a node only its own node, its pods' status and
//! their deletion, a viewer only reads; no token on a non-loopback address refuses to start.

mod common;

use common::{TestServer, pod};
use reqwest::StatusCode;
use serde_json::json;
use server::Config;
use server::auth::{Principal, Role, Tokens};
use tokio_util::sync::CancellationToken;

const ADMIN: &str = "admin-token-1";
const NODE_1: &str = "node-1-token";
const VIEWER: &str = "viewer-token";

async fn secured() -> TestServer {
    let mut tokens = Tokens::default();
    tokens.add(ADMIN, Principal::new(Role::Admin, None));
    tokens.add(NODE_1, Principal::new(Role::Node, Some("node-1".into())));
    tokens.add(VIEWER, Principal::new(Role::Viewer, None));
    TestServer::start(Config { tokens, run_scheduler: false, ..Config::in_memory() }).await
}

/// Node `name`'s registration, as its agent sends it.
fn node(name: &str) -> serde_json::Value {
    shepherd_testing::registration(&shepherd_testing::node(name))
}

#[tokio::test]
async fn every_role_gets_exactly_its_rights() {
    let anonymous = secured().await;
    let (status, err) = anonymous.get("/api/v1/pods").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(err["error"]["reason"], "Unauthorized");
    assert_eq!(anonymous.get("/healthz").await.0, StatusCode::OK, "probes need no token");
    // The Kubernetes dialect's answers are checked in k8s.rs, not against the native document.
    for version in ["/version", "/k8s/version"] {
        let response = anonymous.bare(reqwest::Method::GET, version).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{version}, public as kube-apiserver's");
        assert_eq!(response.json::<serde_json::Value>().await.unwrap()["major"], "1");
    }
    let discovery = anonymous.bare(reqwest::Method::GET, "/k8s/api").send().await.unwrap();
    assert_eq!(discovery.status(), StatusCode::UNAUTHORIZED, "the rest of /k8s needs a token");
    assert_eq!(anonymous.with_token("not-a-known-token").get("/api/v1/pods").await.0, StatusCode::UNAUTHORIZED);

    let admin = anonymous.with_token(ADMIN);
    let agent = anonymous.with_token(NODE_1);
    let viewer = anonymous.with_token(VIEWER);

    // The agent registers and heartbeats its own node only.
    assert_eq!(agent.post("/api/v1/nodes", node("node-1")).await.0, StatusCode::CREATED);
    assert_eq!(agent.post("/api/v1/nodes", node("node-2")).await.0, StatusCode::FORBIDDEN);
    assert_eq!(admin.post("/api/v1/nodes", node("node-2")).await.0, StatusCode::CREATED);
    let ready = |name| shepherd_testing::heartbeat_body(&shepherd_testing::node(name));
    assert_eq!(agent.post("/api/v1/nodes/node-1/heartbeat", ready("node-1")).await.0, StatusCode::OK);
    assert_eq!(admin.post("/api/v1/nodes/node-2/heartbeat", ready("node-2")).await.0, StatusCode::OK);
    let (status, err) = agent.post("/api/v1/nodes/node-2/heartbeat", json!({})).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(err["error"]["message"].as_str().unwrap().contains("node node-1 may not write node node-2"), "{err}");
    assert_eq!(agent.post("/api/v1/nodes/node-1/cordon", json!({})).await.0, StatusCode::FORBIDDEN, "cordon is an admin's");

    // Leases: the agent renews its own lease only; anyone with a token reads them.
    let (status, lease) = agent.put("/api/v1/leases/node-1", json!({})).await;
    assert_eq!((status, lease["spec"]["holder_identity"].as_str()), (StatusCode::OK, Some("node-1")), "{lease}");
    let before = admin.get("/api/v1/leases/node-2").await.1;
    let (status, err) = agent.put("/api/v1/leases/node-2", json!({})).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(err["error"]["message"].as_str().unwrap().contains("node node-1 may not write node node-2"), "{err}");
    assert_eq!(admin.get("/api/v1/leases/node-2").await.1, before, "node-2's lease is untouched");
    let (status, err) = agent.put("/api/v1/leases/node-1", json!({"spec": {"holder_identity": "node-2"}})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert_eq!(viewer.put("/api/v1/leases/node-1", json!({})).await.0, StatusCode::FORBIDDEN);
    assert_eq!(viewer.get("/api/v1/leases").await.0, StatusCode::OK);
    assert_eq!(agent.delete("/api/v1/leases/node-1").await.0, StatusCode::FORBIDDEN);

    // Pods: only admins create and bind; the agent writes the status of its own pods.
    assert_eq!(agent.post("/api/v1/pods", pod("x", 1, 1)).await.0, StatusCode::FORBIDDEN);
    assert_eq!(viewer.post("/api/v1/pods", pod("x", 1, 1)).await.0, StatusCode::FORBIDDEN);
    for (name, target) in [("mine", "node-1"), ("theirs", "node-2")] {
        assert_eq!(admin.post("/api/v1/pods", pod(name, 1, 1)).await.0, StatusCode::CREATED);
        let binding = json!({"target": {"name": target}});
        assert_eq!(admin.post(&format!("/api/v1/namespaces/default/pods/{name}/binding"), binding).await.0, StatusCode::CREATED);
    }
    let running = json!({"status": {"phase": "Running", "pod_ip": "10.20.0.2"}});
    assert_eq!(agent.put("/api/v1/namespaces/default/pods/mine/status", running.clone()).await.0, StatusCode::OK);
    assert_eq!(agent.put("/api/v1/namespaces/default/pods/theirs/status", running).await.0, StatusCode::FORBIDDEN);
    let event_from = |source: &str| {
        json!({"type": "Normal", "reason": "Started", "message": "started", "source": source,
               "involved_object": {"kind": "Pod", "namespace": "default", "name": "mine"}})
    };
    let event = event_from("agent/node-1");
    assert_eq!(agent.post("/api/v1/namespaces/default/events", event).await.0, StatusCode::CREATED);
    for spoofed in ["scheduler", "agent/node-2"] {
        let mut event = event_from(spoofed);
        event["reason"] = json!("Spoofed");
        let (status, error) = agent.post("/api/v1/namespaces/default/events", event).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "a node token names only its own agent as an event's source: {error}");
    }

    // The viewer reads everything and writes nothing.
    let (status, pods) = viewer.get("/api/v1/pods").await;
    assert_eq!((status, pods["items"].as_array().unwrap().len()), (StatusCode::OK, 2));
    assert_eq!(viewer.delete("/api/v1/namespaces/default/pods/mine").await.0, StatusCode::FORBIDDEN);
    let (_, info) = viewer.get("/api/v1/info").await;
    assert_eq!(info["auth_required"], true);

    // Deletion: an admin asks, the pod's own agent confirms; nobody else may.
    for name in ["mine", "theirs"] {
        let (status, terminating) = admin.delete(&format!("/api/v1/namespaces/default/pods/{name}")).await;
        assert_eq!(status, StatusCode::OK);
        assert!(terminating["metadata"]["deletion_timestamp"].is_string(), "{terminating}");
    }
    let (_, mine) = admin.get("/api/v1/namespaces/default/pods/mine").await;
    let confirm = format!("/api/v1/namespaces/default/pods/mine?grace_period_seconds=0&uid={}", mine["metadata"]["uid"].as_str().unwrap());
    assert_eq!(viewer.delete(&confirm).await.0, StatusCode::FORBIDDEN);
    let (status, err) = agent.delete("/api/v1/namespaces/default/pods/theirs?grace_period_seconds=0").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(err["error"]["message"].as_str().unwrap().contains("may not delete pod default/theirs, which is bound to node-2"), "{err}");
    assert_eq!(agent.delete("/api/v1/namespaces/default/deployments/web").await.0, StatusCode::FORBIDDEN);
    assert_eq!(agent.delete(&confirm).await.0, StatusCode::OK);
    assert_eq!(admin.get("/api/v1/namespaces/default/pods/mine").await.0, StatusCode::NOT_FOUND);
    assert_eq!(admin.get("/api/v1/namespaces/default/pods/theirs").await.0, StatusCode::OK);

    // A late confirmation meets a new pod of the same name on another node: the uid
    // precondition answers (409, so the agent knows its pod is gone), and nothing is deleted.
    assert_eq!(admin.post("/api/v1/pods", pod("mine", 1, 1)).await.0, StatusCode::CREATED);
    let binding = json!({"target": {"name": "node-2"}});
    assert_eq!(admin.post("/api/v1/namespaces/default/pods/mine/binding", binding).await.0, StatusCode::CREATED);
    let (status, err) = agent.delete(&confirm).await;
    assert_eq!(status, StatusCode::CONFLICT, "{err}");
    assert!(err["error"]["message"].as_str().unwrap().contains("it is another pod of the same name"), "{err}");
    assert_eq!(admin.get("/api/v1/namespaces/default/pods/mine").await.0, StatusCode::OK);
    let (status, _) = agent.delete("/api/v1/namespaces/default/pods/mine?grace_period_seconds=0").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "without a uid of its own pod, the node may not delete another node's pod");
    anonymous.stop().await;
}

/// A node token registers its node's labels once; re-registering keeps them, so that it
/// cannot take on another node's labels and the pods that select them. Whoever writes,
/// `kubernetes.io/hostname` is the node's own name.
#[tokio::test]
async fn a_node_token_cannot_relabel_its_node_and_the_hostname_label_is_its_name() {
    let anonymous = secured().await;
    let (admin, agent) = (anonymous.with_token(ADMIN), anonymous.with_token(NODE_1));
    let labelled = |name: &str, labels: serde_json::Value| {
        let mut body = node(name);
        body["metadata"]["labels"] = labels;
        body
    };
    let labels = |n: &serde_json::Value| n["metadata"]["labels"].clone();
    let (status, created) = agent.post("/api/v1/nodes", labelled("node-1", json!({"kubernetes.io/hostname": "node-2", "zone": "a"}))).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(labels(&created), json!({"kubernetes.io/hostname": "node-1", "zone": "a"}));

    let stolen = labelled("node-1", json!({"kubernetes.io/hostname": "node-2", "zone": "b", "gpu": "true"}));
    let (status, registered) = agent.post("/api/v1/nodes", stolen).await;
    assert_eq!(status, StatusCode::OK, "{registered}");
    assert_eq!(labels(&registered), json!({"kubernetes.io/hostname": "node-1", "zone": "a"}), "the node's labels stay as they were");

    let (status, merged) = admin.post("/api/v1/nodes", labelled("node-1", json!({"kubernetes.io/hostname": "x", "zone": "b"}))).await;
    assert_eq!(status, StatusCode::OK, "{merged}");
    assert_eq!(labels(&merged), json!({"kubernetes.io/hostname": "node-1", "zone": "b"}), "an admin's registration merges labels");

    let mut put = merged.clone();
    put["metadata"]["labels"] = json!({"kubernetes.io/hostname": "node-2", "disk": "ssd"});
    let (status, replaced) = admin.put("/api/v1/nodes/node-1", put).await;
    assert_eq!(status, StatusCode::OK, "{replaced}");
    assert_eq!(
        labels(&replaced),
        json!({"kubernetes.io/hostname": "node-1", "disk": "ssd"}),
        "an admin's PUT sets the labels, but the name's"
    );
    anonymous.stop().await;
}

#[tokio::test]
async fn a_non_loopback_address_without_a_token_is_refused() {
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let err = server::run(listener, Config::in_memory(), CancellationToken::new()).await.unwrap_err();
    assert!(matches!(err, server::ServerError::InsecureBind(_)), "{err}");
    assert!(err.to_string().contains("without a token"), "{err}");
}

/// The real `shepherd` binary, in memory on a free loopback port, with `file` as its tokens
/// file and `extra` flags; its log is piped.
fn shepherd_with_tokens_file(file: &std::path::Path, extra: &[&str]) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_shepherd"))
        .args(["--in-memory", "--addr", "127.0.0.1:0", "--tokens-file"])
        .arg(file)
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the shepherd binary runs")
}

/// The real binary warns at start about a tokens file its group or others may read, naming
/// the file and the fix, and says nothing about one only its owner reads.
#[cfg(unix)]
#[tokio::test]
async fn a_tokens_file_others_may_read_is_warned_about_at_start() {
    use std::os::unix::fs::PermissionsExt;
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens");
    std::fs::write(&file, "admin-secret admin\n").unwrap();
    // The lines the binary logs until it serves.
    let start_up = |mode: u32| {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        let mut child = shepherd_with_tokens_file(&file, &[]);
        async move {
            let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
            let mut seen = Vec::new();
            let serving = async {
                while let Some(line) = lines.next_line().await.unwrap() {
                    let done = line.contains("dashboard and API at");
                    seen.push(line);
                    if done {
                        return;
                    }
                }
                panic!("shepherd stopped before serving: {seen:?}");
            };
            tokio::time::timeout(std::time::Duration::from_secs(20), serving).await.expect("shepherd serves");
            child.kill().await.unwrap();
            seen.join("\n")
        }
    };
    let logged = start_up(0o644).await;
    let warning = format!("the tokens file {} is open to its group or others (mode 0644)", file.display());
    assert!(logged.contains(&warning) && logged.contains(&format!("chmod 600 {}", file.display())), "{logged}");
    let logged = start_up(0o600).await;
    assert!(!logged.contains("tokens file"), "{logged}");
}

/// The real binary refuses to start when one token would name two principals: twice in the
/// tokens file, or `--token` also in it.
#[tokio::test]
async fn a_repeated_token_stops_the_binary_with_both_places() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens");
    std::fs::write(&file, "# the team\nfirst-secret admin\nnode-secret node node-1\nfirst-secret viewer\n").unwrap();
    let start = |extra: &'static [&'static str]| {
        let child = shepherd_with_tokens_file(&file, extra);
        async move {
            let out = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait_with_output())
                .await
                .expect("shepherd stops at once instead of serving")
                .unwrap();
            assert!(!out.status.success(), "it must not start: {out:?}");
            String::from_utf8_lossy(&out.stderr).into_owned()
        }
    };
    let stderr = start(&[]).await;
    assert!(stderr.contains(&format!("{} line 4: the token of line 2 again", file.display())), "{stderr}");

    std::fs::write(&file, "first-secret admin\nnode-secret node node-1\n").unwrap();
    let stderr = start(&["--token", "node-secret"]).await;
    assert!(stderr.contains(&format!("--token is also the token on line 2 of the tokens file {}", file.display())), "{stderr}");
}
