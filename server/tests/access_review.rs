//! `kubectl auth can-i` agrees with the requests it asks about: for every role and each
//! session (exec, attach, portforward), the log, pods, secrets and a node's status, the
//! test asks the SelfSubjectAccessReview as kubectl sends it, then sends the real request,
//! and both must say the same. A node token may open sessions only in its own node's pods.

mod common;

use common::{TestServer, pod};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use server::Config;
use server::auth::{Principal, Role, Tokens};

const ADMIN: &str = "admin-token-1";
const NODE_1: &str = "node-1-token";
const VIEWER: &str = "viewer-token";
const REVIEWS: &str = "/k8s/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
const PODS: &str = "/k8s/api/v1/namespaces/default/pods";
const SECRETS: &str = "/k8s/api/v1/namespaces/default/secrets";

/// One question: the review's attributes as `kubectl auth can-i VERB RESOURCE[/NAME]
/// [--subresource=S]` sends them, and the request kubectl would make for it.
struct Case {
    verb: &'static str,
    resource: &'static str,
    subresource: &'static str,
    name: &'static str,
    method: Method,
    path: String,
    body: Option<Value>,
    upgrade: bool,
}

fn case(verb: &'static str, resource: &'static str, subresource: &'static str, name: &'static str, method: Method, path: String) -> Case {
    Case { verb, resource, subresource, name, method, path, body: None, upgrade: false }
}

/// A session kubectl opens: a WebSocket upgrade (GET), though it asks `create`.
fn session(subresource: &'static str, name: &'static str, query: &str) -> Case {
    let path = format!("{PODS}/{name}/{subresource}?{query}");
    Case { upgrade: true, ..case("create", "pods", subresource, name, Method::GET, path) }
}

fn cases(node_status: Value) -> Vec<Case> {
    let mut cases = Vec::new();
    for pod in ["mine", "theirs"] {
        cases.push(session("exec", pod, "command=true&stdout=true"));
        cases.push(session("attach", pod, "stdout=true"));
        cases.push(session("portforward", pod, "ports=80"));
        cases.push(case("get", "pods", "log", pod, Method::GET, format!("{PODS}/{pod}/log")));
        cases.push(case("get", "pods", "", pod, Method::GET, format!("{PODS}/{pod}")));
        cases.push(case("delete", "pods", "", pod, Method::DELETE, format!("{PODS}/{pod}?dryRun=All")));
    }
    cases.push(case("list", "pods", "", "", Method::GET, PODS.to_string()));
    let new_pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "new"},
                         "spec": {"containers": [{"name": "c", "image": "minimal"}]}});
    cases.push(Case { body: Some(new_pod), ..case("create", "pods", "", "", Method::POST, format!("{PODS}?dryRun=All")) });
    cases.push(case("get", "secrets", "", "db", Method::GET, format!("{SECRETS}/db")));
    cases.push(case("list", "secrets", "", "", Method::GET, SECRETS.to_string()));
    let new_secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "new"}, "stringData": {"k": "v"}});
    cases.push(Case { body: Some(new_secret), ..case("create", "secrets", "", "", Method::POST, format!("{SECRETS}?dryRun=All")) });
    cases.push(case("get", "nodes", "status", "node-1", Method::GET, "/k8s/api/v1/nodes/node-1/status".into()));
    let path = "/k8s/api/v1/nodes/node-1/status?dryRun=All".to_string();
    cases.push(Case { body: Some(node_status), ..case("update", "nodes", "status", "node-1", Method::PUT, path) });
    cases
}

/// The review's answer: allowed, and the reason of a refusal.
async fn review(server: &TestServer, token: &str, case: &Case) -> (bool, String) {
    // kubectl names its current namespace even for a cluster-scoped resource such as nodes.
    let attributes = json!({"namespace": "default", "verb": case.verb, "resource": case.resource,
                            "subresource": case.subresource, "name": case.name});
    let body = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                      "spec": {"resourceAttributes": attributes}});
    let response = server.bare(Method::POST, REVIEWS).bearer_auth(token).json(&body).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let answer: Value = response.json().await.unwrap();
    (answer["status"]["allowed"] == true, answer["status"]["reason"].as_str().unwrap_or("").to_string())
}

/// The real request's status and body.
async fn request(server: &TestServer, token: &str, case: &Case) -> (StatusCode, String) {
    let mut request = server.bare(case.method.clone(), &case.path).bearer_auth(token);
    if case.upgrade {
        request = request
            .header("Connection", "Upgrade")
            .header("Upgrade", "websocket")
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
            .header("Sec-WebSocket-Protocol", shared::remote_command::V5);
    }
    if let Some(body) = &case.body {
        request = request.json(body);
    }
    let response = request.send().await.unwrap();
    (response.status(), response.text().await.unwrap())
}

#[tokio::test]
async fn every_review_answers_as_the_request_it_asks_about_is_answered() {
    let mut tokens = Tokens::default();
    tokens.add(ADMIN, Principal::new(Role::Admin, None));
    tokens.add(NODE_1, Principal::new(Role::Node, Some("node-1".into())));
    tokens.add(VIEWER, Principal::new(Role::Viewer, None));
    let anonymous = TestServer::start(Config { tokens, run_scheduler: false, ..Config::in_memory() }).await;
    let admin = anonymous.with_token(ADMIN);
    for node in ["node-1", "node-2"] {
        shepherd_testing::register_node(&admin.client, &shepherd_testing::node(node)).await;
    }
    for (name, node) in [("mine", "node-1"), ("theirs", "node-2")] {
        assert_eq!(admin.post("/api/v1/pods", pod(name, 1, 1)).await.0, StatusCode::CREATED);
        let binding = json!({"target": {"name": node}});
        assert_eq!(admin.post(&format!("/api/v1/namespaces/default/pods/{name}/binding"), binding).await.0, StatusCode::CREATED);
    }
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "stringData": {"password": "x"}});
    let created = anonymous.bare(Method::POST, SECRETS).bearer_auth(ADMIN).json(&secret).send().await.unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let read = anonymous.bare(Method::GET, "/k8s/api/v1/nodes/node-1/status").bearer_auth(ADMIN).send().await.unwrap();
    assert_eq!(read.status(), StatusCode::OK);
    let node_status: Value = read.json().await.unwrap();

    let mut refused = Vec::new();
    for token in [ADMIN, NODE_1, VIEWER] {
        for case in cases(node_status.clone()) {
            let (allowed, reason) = review(&anonymous, token, &case).await;
            let (status, body) = request(&anonymous, token, &case).await;
            let what = format!("{token}: can-i {} {}/{} --subresource={:?}", case.verb, case.resource, case.name, case.subresource);
            assert_ne!(status, StatusCode::UNAUTHORIZED, "{what}: {body}");
            assert_eq!(
                allowed,
                status != StatusCode::FORBIDDEN,
                "{what}: the review says {allowed} ({reason}), the request {status}: {body}"
            );
            if !allowed {
                assert!(body.contains(&reason), "{what}: the review's reason {reason:?} is the request's refusal: {body}");
                refused.push(format!("{token} {} {}/{} {}", case.verb, case.resource, case.name, case.subresource));
            }
        }
    }
    // The cases where the roles differ, so that the agreement above is not all yes.
    for expected in [
        "node-1-token create pods/theirs exec",
        "node-1-token create pods/theirs attach",
        "node-1-token create pods/theirs portforward",
        "node-1-token update nodes/node-1 status",
        "viewer-token create pods/mine exec",
        "viewer-token get secrets/db ",
        "viewer-token delete pods/mine ",
    ] {
        assert!(refused.iter().any(|r| r == expected), "{expected} is refused: {refused:#?}");
    }
    for allowed in ["node-1-token create pods/mine exec", "node-1-token create pods/mine portforward", "viewer-token get pods/mine log"] {
        assert!(!refused.iter().any(|r| r == allowed), "{allowed} is allowed: {refused:#?}");
    }
    assert!(!refused.iter().any(|r| r.starts_with(ADMIN)), "an admin may do anything: {refused:#?}");
    anonymous.stop().await;
}
