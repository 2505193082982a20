//! The audit lines of sessions: a session the roles refuse is audited too, naming the token
//! by its fingerprint and never the token, as Kubernetes audits denied requests.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use common::{TestServer, pod};
use reqwest::{Method, StatusCode};
use serde_json::json;
use server::Config;
use server::auth::{Principal, Role, Tokens};

const ADMIN: &str = "audit-admin-token";
const VIEWER: &str = "audit-viewer-token";
const OTHER_NODE: &str = "audit-other-node-token";

/// Where the test's subscriber writes what the `audit` target logs.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn sha256_prefix(token: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes());
    digest.as_ref()[..4].iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn a_refused_session_is_audited_naming_the_token_by_its_fingerprint() {
    let lines = Lines::default();
    let writer = lines.clone();
    tracing_subscriber::fmt()
        .with_env_filter("audit=info")
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .try_init()
        .expect("the one subscriber of this test binary");
    let mut tokens = Tokens::default();
    tokens.add(ADMIN, Principal::new(Role::Admin, None));
    tokens.add(VIEWER, Principal::new(Role::Viewer, None));
    tokens.add(OTHER_NODE, Principal::new(Role::Node, Some("node-2".into())));
    let anonymous = TestServer::start(Config { tokens, run_scheduler: false, ..Config::in_memory() }).await;
    let admin = anonymous.with_token(ADMIN);
    shepherd_testing::register_node(&admin.client, &shepherd_testing::node("node-1")).await;
    assert_eq!(admin.post("/api/v1/pods", pod("web", 1, 1)).await.0, StatusCode::CREATED);
    let binding = json!({"target": {"name": "node-1"}});
    assert_eq!(admin.post("/api/v1/namespaces/default/pods/web/binding", binding).await.0, StatusCode::CREATED);

    for (token, session) in [(VIEWER, "exec?command=true&stdout=true"), (OTHER_NODE, "attach?stdout=true"), (VIEWER, "portforward")] {
        let path = format!("/k8s/api/v1/namespaces/default/pods/web/{session}");
        let refused = anonymous.bare(Method::GET, &path).bearer_auth(token).send().await.unwrap();
        assert_eq!(refused.status(), StatusCode::FORBIDDEN, "{token} {path}");
    }
    let logged = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    let refusals: Vec<&str> = logged.lines().filter(|l| l.contains("refused:")).collect();
    assert_eq!(refusals.len(), 3, "{logged}");
    let viewer = format!("a viewer token (sha256 {}) exec pod default/web: refused: ", sha256_prefix(VIEWER));
    assert!(refusals[0].contains(&viewer), "{logged}");
    let node = format!("the token of node node-2 (sha256 {}) attach pod default/web: refused: ", sha256_prefix(OTHER_NODE));
    assert!(refusals[1].contains(&node), "{logged}");
    assert!(refusals[2].contains("portforward pod default/web: refused: "), "{logged}");
    assert!(![VIEWER, OTHER_NODE, ADMIN].iter().any(|token| logged.contains(token)), "no token in the log: {logged}");
}
