//! `env[].valueFrom` and `envFrom` through both API dialects on a real server: each source is
//! stored and read back, and a source that is missing, doubled or unsupported is a 422 that
//! stores nothing.

mod common;

use common::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

async fn k8s_post(server: &TestServer, env: Value, env_from: Value, name: &str) -> (StatusCode, Value) {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "web", "image": "minimal", "env": env, "envFrom": env_from}]}});
    let response = server.bare(Method::POST, "/k8s/api/v1/namespaces/default/pods").json(&pod).send().await.expect("the server answers");
    let status = response.status();
    (status, response.json().await.expect("a JSON answer"))
}

#[tokio::test]
async fn every_source_is_stored_and_read_back_in_both_dialects() {
    let server = TestServer::in_memory().await;
    let env = json!([
        {"name": "GREETING", "value": "hi"},
        {"name": "PAGE", "valueFrom": {"configMapKeyRef": {"name": "web", "key": "page"}}},
        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password", "optional": true}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}},
    ]);
    let env_from = json!([{"prefix": "WEB_", "configMapRef": {"name": "web"}}, {"secretRef": {"name": "db", "optional": false}}]);
    let (status, created) = k8s_post(&server, env.clone(), env_from.clone(), "web").await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["spec"]["containers"][0]["env"], env);
    assert_eq!(created["spec"]["containers"][0]["envFrom"], env_from);

    let (status, native) = server.get("/api/v1/namespaces/default/pods/web").await;
    assert_eq!(status, StatusCode::OK, "{native}");
    let container = &native["spec"]["containers"][0];
    assert_eq!(container["env"][1]["value_from"], json!({"config_map_key_ref": {"name": "web", "key": "page"}}));
    assert_eq!(container["env_from"][0], json!({"prefix": "WEB_", "config_map_ref": {"name": "web"}}));
    // The scheduler may write the pod's status between the GET and the PUT: a conflict reads
    // it again, as kubectl does.
    let (mut status, mut again) = server.put("/api/v1/namespaces/default/pods/web", native.clone()).await;
    for _ in 0..10 {
        if status != StatusCode::CONFLICT {
            break;
        }
        let shown = server.get("/api/v1/namespaces/default/pods/web").await.1;
        (status, again) = server.put("/api/v1/namespaces/default/pods/web", shown).await;
    }
    assert_eq!(status, StatusCode::OK, "what a GET showed, sent back: {again}");

    let native_pod = json!({"kind": "Pod", "metadata": {"name": "native"}, "spec": {"containers": [{"name": "web", "image": "minimal",
        "env": [{"name": "NODE", "value_from": {"field_ref": {"field_path": "spec.nodeName"}}}],
        "env_from": [{"secret_ref": {"name": "db"}}]}]}});
    let (status, created) = server.post("/api/v1/namespaces/default/pods", native_pod).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    server.stop().await;
}

#[tokio::test]
async fn bad_sources_are_422s_that_store_nothing() {
    let server = TestServer::in_memory().await;
    let cases = [
        (
            "both",
            json!([{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}, "fieldRef": {"fieldPath": "metadata.name"}}}]),
            json!([]),
            "spec.containers[0].env[0].valueFrom",
        ),
        (
            "field",
            json!([{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.containers"}}}]),
            json!([]),
            "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath",
        ),
        (
            "nameless",
            json!([{"name": "A", "valueFrom": {"secretKeyRef": {"name": "", "key": "k"}}}]),
            json!([]),
            "spec.containers[0].env[0].valueFrom.secretKeyRef.name",
        ),
        ("empty", json!([]), json!([{"prefix": "P_"}]), "spec.containers[0].envFrom[0]"),
    ];
    for (name, env, env_from, field) in cases {
        let (status, refused) = k8s_post(&server, env, env_from, name).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{name}: {refused}");
        assert_eq!(refused["details"]["causes"][0]["field"], field, "{name}: {refused}");
        assert_eq!(server.get(&format!("/api/v1/namespaces/default/pods/{name}")).await.0, StatusCode::NOT_FOUND, "{name}");
    }
    let (status, refused) =
        k8s_post(&server, json!([{"name": "A", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}]), json!([]), "resource")
            .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("resourceFieldRef"), "{refused}");

    let native_pod = json!({"kind": "Pod", "metadata": {"name": "native"}, "spec": {"containers": [{"name": "web", "image": "minimal",
        "env": [{"name": "A", "value": "x", "value_from": {"field_ref": {"field_path": "metadata.name"}}}]}]}});
    let (status, refused) = server.post("/api/v1/namespaces/default/pods", native_pod).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["error"]["details"][0]["field"], "spec.containers[0].env[0].value_from", "{refused}");
    server.stop().await;
}
