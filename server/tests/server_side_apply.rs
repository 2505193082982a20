//! Server-side apply and `managedFields` under `/k8s`, against a real server on 127.0.0.1:0
//! (on etcd when `SHEPHERD_TEST_ETCD` is set): an apply creates, a second apply by the same
//! manager removes what it dropped, another manager's different value is a 409 with
//! kube's causes unless forced, ordinary writes record `Update` entries, and bad bodies
//! and options are refused with kube's codes, storing nothing.

mod common;

use common::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const DEPLOYMENTS: &str = "/k8s/apis/apps/v1/namespaces/default/deployments";
const APPLY: &str = "application/apply-patch+yaml";

async fn send(server: &TestServer, method: Method, path: &str, content_type: &str, body: String) -> (StatusCode, Value) {
    let request = server.bare(method, path).header("content-type", content_type).header("user-agent", "kubectl/v1.32.0 (linux/amd64)");
    let response = request.body(body).send().await.expect("the server answers");
    let status = response.status();
    (status, response.json().await.expect("a JSON answer"))
}

/// A `/k8s` read (the test server's own `get` checks native answers against their schema).
async fn get(server: &TestServer, name: &str) -> (StatusCode, Value) {
    let response = server.bare(Method::GET, &format!("{DEPLOYMENTS}/{name}")).send().await.expect("the server answers");
    let status = response.status();
    (status, response.json().await.expect("a JSON answer"))
}

async fn apply(server: &TestServer, query: &str, yaml: &str) -> (StatusCode, Value) {
    send(server, Method::PATCH, &format!("{DEPLOYMENTS}/web?{query}"), APPLY, yaml.to_string()).await
}

fn manifest(replicas: u32, labels: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {{{labels}}}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: web
        image: minimal
"
    )
}

/// The managers of `object` that own `path` (FieldsV1 steps), with their operations.
fn owners(object: &Value, path: &[&str]) -> Vec<(String, String)> {
    let entries = object["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
    entries
        .iter()
        .filter(|e| {
            assert_eq!(e["fieldsType"], "FieldsV1", "{e}");
            path.iter().try_fold(&e["fieldsV1"], |node, step| node.get(*step)).is_some()
        })
        .map(|e| (e["manager"].as_str().unwrap_or("").to_string(), e["operation"].as_str().unwrap_or("").to_string()))
        .collect()
}

fn owned(manager: &str, operation: &str) -> Vec<(String, String)> {
    vec![(manager.to_string(), operation.to_string())]
}

#[tokio::test]
async fn apply_creates_then_removes_dropped_fields_and_conflicts_with_another_manager() {
    let server = TestServer::in_memory().await;
    let (status, created) = apply(&server, "fieldManager=alice", &manifest(2, "app: web, tier: front")).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(owners(&created, &["f:spec", "f:replicas"]), owned("alice", "Apply"));
    assert_eq!(created["metadata"]["labels"]["tier"], "front");

    // The same manager again, without the tier label: the label goes.
    let (status, second) = apply(&server, "fieldManager=alice", &manifest(2, "app: web")).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(second["metadata"]["labels"], json!({"app": "web"}));
    let (_, read) = get(&server, "web").await;
    assert_eq!(read["metadata"]["managedFields"], second["metadata"]["managedFields"], "GET returns what the apply stored");

    // Another manager with another replicas: kube's 409, and nothing changes.
    let (status, conflict) = apply(&server, "fieldManager=bob", &manifest(5, "app: web")).await;
    assert_eq!(status, StatusCode::CONFLICT, "{conflict}");
    assert_eq!(conflict["reason"], "Conflict");
    assert_eq!(conflict["message"], "Apply failed with 1 conflict: conflict with \"alice\": .spec.replicas");
    assert_eq!(
        conflict["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"alice\"", "field": ".spec.replicas"}])
    );
    assert_eq!(get(&server, "web").await.1["spec"]["replicas"], 2);

    // Forced, bob takes replicas; alice keeps the rest.
    let (status, forced) = apply(&server, "fieldManager=bob&force=true", &manifest(5, "app: web")).await;
    assert_eq!(status, StatusCode::OK, "{forced}");
    assert_eq!(forced["spec"]["replicas"], 5);
    assert_eq!(owners(&forced, &["f:spec", "f:replicas"]), owned("bob", "Apply"));
    assert_eq!(owners(&forced, &["f:metadata", "f:labels", "f:app"]).len(), 2, "both applied the label: {forced}");
    server.stop().await;
}

#[tokio::test]
async fn ordinary_writes_record_update_entries_that_an_apply_conflicts_with() {
    let server = TestServer::in_memory().await;
    let body = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "minimal"}]}}}
    });
    let (status, created) =
        send(&server, Method::POST, &format!("{DEPLOYMENTS}?fieldManager=kubectl-create"), "application/json", body.to_string()).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(owners(&created, &["f:spec", "f:replicas"]), owned("kubectl-create", "Update"));
    assert_eq!(created["metadata"]["managedFields"][0]["apiVersion"], "apps/v1");

    // Without fieldManager the user agent names the manager.
    let scaled = json!({"spec": {"replicas": 3}});
    let (status, patched) =
        send(&server, Method::PATCH, &format!("{DEPLOYMENTS}/web"), "application/merge-patch+json", scaled.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(owners(&patched, &["f:spec", "f:replicas"]), owned("kubectl", "Update"));

    let (status, conflict) = apply(&server, "fieldManager=alice", &manifest(2, "app: web")).await;
    assert_eq!(status, StatusCode::CONFLICT, "{conflict}");
    let message = conflict["message"].as_str().unwrap_or("");
    assert!(message.starts_with("Apply failed with 1 conflict: conflict with \"kubectl\" using apps/v1 at "), "{message}");

    // A native write that does not send managed fields keeps them.
    let (_, native) = server.get("/api/v1/namespaces/default/deployments/web").await;
    let mut relabelled = native.clone();
    relabelled["metadata"]["labels"] = json!({"team": "blue"});
    // Neither managed fields nor a version (the controller writes the status meanwhile).
    relabelled["metadata"].as_object_mut().unwrap().remove("managed_fields");
    relabelled["metadata"].as_object_mut().unwrap().remove("resource_version");
    let (status, replaced) = server.put("/api/v1/namespaces/default/deployments/web", relabelled).await;
    assert_eq!(status, StatusCode::OK, "{replaced}");
    assert_eq!(replaced["metadata"]["managed_fields"], native["metadata"]["managed_fields"]);
    server.stop().await;
}

#[tokio::test]
async fn bad_applies_are_refused_with_kube_codes_and_store_nothing() {
    let server = TestServer::in_memory().await;
    let (status, refused) = apply(&server, "", &manifest(1, "")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["message"], "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch");
    let long = "m".repeat(129);
    let (status, refused) = apply(&server, &format!("fieldManager={long}"), &manifest(1, "")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");

    for (body, what) in [
        ("kind: [unclosed", "bad YAML"),
        ("a: 1\n---\nb: 2\n", "two documents"),
        ("- 1\n- 2\n", "a list"),
        ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: other}\n", "another name"),
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers: [{image: x}]\n",
            "a container without its name",
        ),
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers: [{name: a}, {name: a}]\n",
            "one name twice",
        ),
    ] {
        let (status, refused) = apply(&server, "fieldManager=alice", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{what}: {refused}");
    }
    let nested = format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec: {}1{}\n", "[".repeat(200), "]".repeat(200));
    let (status, refused) = apply(&server, "fieldManager=alice", &nested).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "deep nesting: {refused}");
    let (status, refused) =
        send(&server, Method::PATCH, &format!("{DEPLOYMENTS}/web?force=true"), "application/merge-patch+json", "{}".into()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "force on a merge patch: {refused}");
    assert_eq!(get(&server, "web").await.0, StatusCode::NOT_FOUND);

    // An apply that the object's own rules refuse is the 422 a create answers.
    let (status, refused) =
        apply(&server, "fieldManager=alice", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: -1}\n").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    server.stop().await;
}

#[tokio::test]
async fn a_dry_run_apply_stores_nothing() {
    let server = TestServer::in_memory().await;
    let (status, answer) = apply(&server, "fieldManager=alice&dryRun=All", &manifest(1, "app: web")).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_eq!(owners(&answer, &["f:spec", "f:replicas"]), owned("alice", "Apply"));
    assert_eq!(get(&server, "web").await.0, StatusCode::NOT_FOUND);
    server.stop().await;
}
