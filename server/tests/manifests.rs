//! `POST /api/v1/manifests/parse` against a real server on 127.0.0.1:0: YAML and JSON
//! manifests answered as their objects, problems as 400s with line and column, the body
//! and answer limits, and the auth of a read.

mod common;

use common::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use server::Config;
use server::auth::{Principal, Role, Tokens};

const PATH: &str = shared::api::paths::MANIFESTS_PARSE;

async fn send(server: &TestServer, media: &str, body: impl Into<reqwest::Body>) -> (StatusCode, Value) {
    server.answer(server.client.request(Method::POST, PATH).header("content-type", media).body(body)).await
}

const YAML: &str = "kind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: minimal\n    resources: {memory: 64Mi}\n---\n# a comment only\n---\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector: {app: web}\n";

#[tokio::test]
async fn yaml_documents_come_back_as_json_objects() {
    let server = TestServer::in_memory().await;
    let (status, answer) = send(&server, "application/yaml", YAML).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let items = answer["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "the empty document is skipped: {answer}");
    assert_eq!((items[0]["kind"].as_str(), items[0]["metadata"]["name"].as_str()), (Some("Pod"), Some("web")));
    assert_eq!(items[0]["spec"]["containers"][0]["resources"]["memory"], 64 << 20);
    assert_eq!(items[1]["kind"], "Service");
    let (_, pods) = server.get("/api/v1/pods").await;
    assert_eq!(pods["items"].as_array().unwrap().len(), 0, "nothing is stored");

    let json = r#"{"kind":"Namespace","metadata":{"name":"team"}} {"kind":"Namespace","metadata":{"name":"other"}}"#;
    let (status, answer) = send(&server, "application/json", json).await;
    assert_eq!((status, answer["items"].as_array().map(Vec::len)), (StatusCode::OK, Some(2)), "{answer}");
    server.stop().await;
}

#[tokio::test]
async fn a_kubernetes_manifest_comes_back_as_a_create_through_k8s_would_store_it() {
    let server = TestServer::in_memory().await;
    let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: page}\ndata: {index.html: hello}\n---\n\
                apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector:\n    matchLabels: {app: web}\n  \
                template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: c\n        image: minimal\n        \
                env:\n        - name: NAME\n          valueFrom:\n            fieldRef: {fieldPath: metadata.name}\n";
    let (status, answer) = send(&server, "application/yaml", text).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let items = answer["items"].as_array().unwrap();
    assert_eq!((items[0]["kind"].as_str(), items[0]["data"]["index.html"].as_str()), (Some("ConfigMap"), Some("hello")));
    assert_eq!(items[1]["kind"], "Deployment");
    assert_eq!(items[1]["spec"]["selector"]["app"], "web", "matchLabels, in the native shape: {answer}");
    assert_eq!(items[1]["spec"]["template"]["spec"]["containers"][0]["env"][0]["value_from"]["field_ref"]["field_path"], "metadata.name");

    for (text, says) in [
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - {name: c, image: minimal, bogus: 1}\n",
            "document 1: Pod \"a\" is invalid: spec.containers[0].bogus",
        ),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: Pod\nmetadata: {name: b}\n",
            "document 2: apiVersion \"\" and kind \"Pod\" name no kind",
        ),
        ("apiVersion: v1\nkind: Endpoints\nmetadata: {name: a}\n", "document 1: apiVersion \"v1\" and kind \"Endpoints\" name no kind"),
    ] {
        let (status, answer) = send(&server, "application/yaml", text).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(says), "{message}");
    }
    server.stop().await;
}

#[tokio::test]
async fn problems_are_400s_with_line_and_column() {
    let server = TestServer::in_memory().await;
    for (text, starts) in [
        ("kind: Pod\nmetadata: [unclosed\n", "line 2, column 11: this [ is never closed"),
        (
            "kind: Namespace\nmetadata: {name: a}\n---\nkind: Pod\nmetadata:\n  name: b\n  colour: red\n",
            "line 7, column 11: invalid Pod: unknown field \"metadata.colour\"",
        ),
        ("kind: Pod\nmetadata: {name: a}\nspec:\n  containers: 3\n", "line 4, column 15: invalid Pod"),
    ] {
        let (status, answer) = send(&server, "application/yaml", text).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
        assert_eq!(answer["error"]["reason"], "BadRequest");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(starts), "{message}");
    }
    let (status, answer) = send(&server, "application/json", "kind: Pod\n").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "YAML labelled JSON: {answer}");
    let (status, answer) = send(&server, "text/plain", YAML).await;
    assert_eq!((status, answer["error"]["reason"].as_str()), (StatusCode::UNSUPPORTED_MEDIA_TYPE, Some("UnsupportedMediaType")));
    server.stop().await;
}

#[tokio::test]
async fn the_body_limit_holds() {
    let server = TestServer::in_memory().await;
    let big = format!("kind: Namespace\nmetadata: {{name: a}}\n# {}\n", "x".repeat(server::config::BODY_LIMIT));
    let (status, answer) = send(&server, "application/yaml", big).await;
    assert_eq!((status, answer["error"]["reason"].as_str()), (StatusCode::PAYLOAD_TOO_LARGE, Some("PayloadTooLarge")), "{answer}");
    server.stop().await;
}

#[tokio::test]
async fn aliases_that_copy_too_much_and_answers_too_large_are_413s() {
    let server = TestServer::in_memory().await;
    let fan_out = format!("kind: Namespace\nmetadata: {{name: a}}\nx: &s {}\nl:\n{}", "x".repeat(10_000), "- *s\n".repeat(50_000));
    let (status, answer) = send(&server, "application/yaml", fan_out).await;
    assert_eq!((status, answer["error"]["reason"].as_str()), (StatusCode::PAYLOAD_TOO_LARGE, Some("PayloadTooLarge")), "{answer}");
    // One-line documents answered with their defaulted fields: Namespaces fit, Deployments
    // (ten times their size) do not.
    let (status, answer) = send(&server, "application/yaml", "---\nkind: Namespace\n".repeat(135_000)).await;
    assert_eq!((status, answer["items"].as_array().map(Vec::len)), (StatusCode::OK, Some(135_000)));
    let (status, answer) = send(&server, "application/yaml", "---\nkind: Deployment\n".repeat(135_000)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("send fewer documents"), "{answer}");
    server.stop().await;
}

#[tokio::test]
async fn it_needs_a_token_as_every_read_does_and_a_viewer_may() {
    let mut tokens = Tokens::default();
    tokens.add("viewer-token", Principal::new(Role::Viewer, None));
    tokens.add("node-token", Principal::new(Role::Node, Some("node-1".into())));
    let anonymous = TestServer::start(Config { tokens, run_scheduler: false, ..Config::in_memory() }).await;
    assert_eq!(send(&anonymous, "application/yaml", YAML).await.0, StatusCode::UNAUTHORIZED);
    for token in ["viewer-token", "node-token"] {
        let (status, answer) = send(&anonymous.with_token(token), "application/yaml", YAML).await;
        assert_eq!(status, StatusCode::OK, "{token}: {answer}");
    }
    anonymous.stop().await;
}
