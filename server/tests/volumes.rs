//! Volumes through both API dialects on a real server: a pod with each source is stored and
//! read back (with Kubernetes' default file mode), every bad volume or mount is a 422 that
//! stores nothing, and a hostPath is a 403 naming the flag unless the server allows it.

mod common;

use common::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use server::Config;

/// A native pod with `volumes` and its container's `mounts`.
fn native_pod(name: &str, volumes: Value, mounts: Value) -> Value {
    json!({"kind": "Pod", "metadata": {"name": name},
        "spec": {"volumes": volumes, "containers": [{"name": "web", "image": "minimal", "volume_mounts": mounts}]}})
}

/// The same in Kubernetes' shape.
fn k8s_pod(name: &str, volumes: Value, mounts: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"volumes": volumes, "containers": [{"name": "web", "image": "minimal", "volumeMounts": mounts}]}})
}

async fn k8s_post(server: &TestServer, body: Value) -> (StatusCode, Value) {
    let request = reqwest::Client::new()
        .request(Method::POST, format!("{}/k8s/api/v1/namespaces/default/pods", server.url))
        .header("content-type", "application/json")
        .body(body.to_string());
    let response = request.send().await.expect("the server answers");
    let status = response.status();
    (status, response.json().await.expect("a JSON answer"))
}

#[tokio::test]
async fn every_source_is_stored_and_read_back_in_both_dialects() {
    let server = TestServer::in_memory().await;
    let volumes = json!([
        {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
        {"name": "conf", "configMap": {"name": "web", "items": [{"key": "index.html", "path": "html/index.html"}]}},
        {"name": "creds", "secret": {"secretName": "db", "defaultMode": 0o400, "optional": true}},
    ]);
    let mounts = json!([
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": "conf", "mountPath": "/www", "readOnly": true},
        {"name": "creds", "mountPath": "/creds/password", "subPath": "password"},
    ]);
    let (status, created) = k8s_post(&server, k8s_pod("web", volumes, mounts)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["spec"]["volumes"][0]["emptyDir"], json!({"medium": "Memory", "sizeLimit": "16Mi"}));
    assert_eq!(created["spec"]["volumes"][1]["configMap"]["defaultMode"], 0o644, "Kubernetes' default mode");
    assert_eq!(created["spec"]["volumes"][2]["secret"], json!({"secretName": "db", "defaultMode": 0o400, "optional": true}));
    assert_eq!(created["spec"]["containers"][0]["volumeMounts"][1], json!({"name": "conf", "mountPath": "/www", "readOnly": true}));

    let (status, native) = server.get("/api/v1/namespaces/default/pods/web").await;
    assert_eq!(status, StatusCode::OK, "{native}");
    assert_eq!(native["spec"]["volumes"][0]["empty_dir"], json!({"medium": "Memory", "size_limit": 16 << 20}));
    assert_eq!(
        native["spec"]["containers"][0]["volume_mounts"][2],
        json!({"name": "creds", "mount_path": "/creds/password", "sub_path": "password"})
    );

    // What a GET showed, sent back, is no change (kubectl apply, edit). The scheduler may
    // write the pod's status between the two, so a conflict reads it again, as kubectl does.
    let mut shown = native.clone();
    let (mut status, mut again) = server.put("/api/v1/namespaces/default/pods/web", shown.clone()).await;
    for _ in 0..10 {
        if status != StatusCode::CONFLICT {
            break;
        }
        shown = server.get("/api/v1/namespaces/default/pods/web").await.1;
        (status, again) = server.put("/api/v1/namespaces/default/pods/web", shown.clone()).await;
    }
    assert_eq!(status, StatusCode::OK, "{again}");
    server.stop().await;
}

#[tokio::test]
async fn bad_volumes_and_mounts_are_422s_that_store_nothing() {
    let server = TestServer::in_memory().await;
    let empty = json!({"name": "data", "empty_dir": {}});
    let cases = [
        ("twice", json!([empty, empty]), json!([]), "spec.volumes[1].name", "duplicate volume name \"data\""),
        (
            "undeclared",
            json!([empty]),
            json!([{"name": "other", "mount_path": "/data"}]),
            "spec.containers[0].volume_mounts[0].name",
            "names no volume of the pod: \"other\" is not declared in volumes",
        ),
        (
            "climbing",
            json!([empty]),
            json!([{"name": "data", "mount_path": "/data", "sub_path": "../../etc"}]),
            "spec.containers[0].volume_mounts[0].sub_path",
            "must not contain '..', got \"../../etc\"",
        ),
    ];
    for (name, volumes, mounts, field, message) in cases {
        let (status, refused) = server.post("/api/v1/namespaces/default/pods", native_pod(name, volumes.clone(), mounts.clone())).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{name}: {refused}");
        let details = &refused["error"]["details"];
        assert_eq!(details, &json!([{"field": field, "message": message}]), "{name}: {refused}");
        assert_eq!(server.get(&format!("/api/v1/namespaces/default/pods/{name}")).await.0, StatusCode::NOT_FOUND, "{name}");
    }

    // The same through /k8s, with Kubernetes' field names.
    let data = json!({"name": "data", "emptyDir": {}});
    let (status, refused) =
        k8s_post(&server, k8s_pod("climbing", json!([data]), json!([{"name": "data", "mountPath": "/data", "subPath": "../x"}]))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["details"]["causes"][0]["field"], "spec.containers[0].volumeMounts[0].subPath", "{refused}");
    let (status, refused) = k8s_post(&server, k8s_pod("twice", json!([data, data]), json!([]))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["details"]["causes"][0]["field"], "spec.volumes[1].name", "{refused}");
    let (status, refused) = k8s_post(&server, k8s_pod("nowhere", json!([]), json!([{"name": "data", "mountPath": "/data"}]))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["details"]["causes"][0]["field"], "spec.containers[0].volumeMounts[0].name", "{refused}");
    let (status, refused) =
        k8s_post(&server, k8s_pod("claim", json!([{"name": "c", "persistentVolumeClaim": {"claimName": "c"}}]), json!([]))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("spec.volumes[0].persistentVolumeClaim: Unsupported"), "{message}");
    assert!(message.contains("Shepherd runs emptyDir, hostPath, configMap and secret volumes"), "{message}");
    server.stop().await;
}

#[tokio::test]
async fn a_host_path_is_forbidden_naming_the_flag_unless_the_server_allows_it() {
    let server = TestServer::in_memory().await;
    let volumes = json!([{"name": "logs", "host_path": {"path": "/var/log", "type": "Directory"}}]);
    let mounts = json!([{"name": "logs", "mount_path": "/logs", "read_only": true}]);
    let (status, refused) = server.post("/api/v1/namespaces/default/pods", native_pod("reader", volumes.clone(), mounts.clone())).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("--allow-host-path"), "{refused}");
    let deployment = json!({"kind": "Deployment", "metadata": {"name": "readers"}, "spec": {"replicas": 1,
        "selector": {"match_labels": {"app": "r"}},
        "template": {"metadata": {"labels": {"app": "r"}}, "spec": native_pod("x", volumes.clone(), mounts.clone())["spec"]}}});
    let (status, refused) = server.post("/api/v1/namespaces/default/deployments", deployment).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a template of pods too: {refused}");
    let k8s_volumes = json!([{"name": "logs", "hostPath": {"path": "/var/log"}}]);
    let (status, refused) = k8s_post(&server, k8s_pod("reader", k8s_volumes.clone(), json!([]))).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["reason"], "Forbidden", "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("--allow-host-path"), "{refused}");
    server.stop().await;

    let allowing = TestServer::start(Config { allow_host_path: true, ..Config::in_memory() }).await;
    let (status, created) = allowing.post("/api/v1/namespaces/default/pods", native_pod("reader", volumes, mounts)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let (status, created) = k8s_post(&allowing, k8s_pod("reader-2", k8s_volumes, json!([]))).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    allowing.stop().await;
}
