//! `env` written as a map, as the original project's manifests write it: the native API
//! takes it in JSON and YAML and stores the list; `/k8s` keeps Kubernetes' list only.

mod common;

use common::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn the_native_api_takes_env_as_a_map_and_the_kubernetes_one_does_not() {
    let server = TestServer::in_memory().await;
    let pod = json!({"kind": "Pod", "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "web", "image": "minimal", "env": {"POSTGRES_HOST": "db", "PORT": 5432}}]}});
    let (status, created) = server.post("/api/v1/namespaces/default/pods", pod).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(
        created["spec"]["containers"][0]["env"],
        json!([{"name": "PORT", "value": "5432"}, {"name": "POSTGRES_HOST", "value": "db"}])
    );

    let yaml = "kind: Pod\nmetadata:\n  name: web-yaml\nspec:\n  containers:\n    - name: web\n      image: minimal\n      env:\n        POSTGRES_HOST: db\n";
    let request = server.bare(Method::POST, "/api/v1/namespaces/default/pods").header("content-type", "application/yaml").body(yaml);
    let (status, created) = server.answer(request).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["spec"]["containers"][0]["env"], json!([{"name": "POSTGRES_HOST", "value": "db"}]));

    let k8s = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "k8s"},
        "spec": {"containers": [{"name": "web", "image": "minimal", "env": {"POSTGRES_HOST": "db"}}]}});
    let response = server.bare(Method::POST, "/k8s/api/v1/namespaces/default/pods").json(&k8s).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST, "Kubernetes' env is a list");
}
