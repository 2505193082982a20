//! The OpenAPI documents under `/k8s/openapi` against a real server on 127.0.0.1:0: the v3
//! documents hold a schema for every served kind, with Kubernetes' names, descriptions and
//! the group, version and kind `kubectl explain` finds it by; fields Shepherd refuses say so;
//! the index's hash URLs are cached for good, older hashes redirected; v2 in protobuf is a
//! document kubectl can read.

mod common;

use common::TestServer;
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn get(server: &TestServer, path: &str) -> reqwest::Response {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}{path}", server.url))
        .send()
        .await
        .expect("the server answers")
}

async fn document(server: &TestServer, path: &str) -> Value {
    let index: Value = get(server, "/k8s/openapi/v3").await.json().await.unwrap();
    let url = index["paths"][path]["serverRelativeURL"].as_str().unwrap_or_else(|| panic!("{path} in {index}")).to_string();
    get(server, &format!("/k8s{url}")).await.json().await.unwrap()
}

/// The component schema kubectl explain finds for `kind`: the one tagged with its group,
/// version and kind.
fn schema_of<'a>(document: &'a Value, group: &str, kind: &str) -> (&'a String, &'a Value) {
    let schemas = document["components"]["schemas"].as_object().expect("components.schemas");
    let tag = json!({"group": group, "kind": kind, "version": "v1"});
    schemas
        .iter()
        .find(|(_, s)| s["x-kubernetes-group-version-kind"].as_array().is_some_and(|tags| tags.contains(&tag)))
        .unwrap_or_else(|| panic!("no schema tagged {tag}"))
}

#[tokio::test]
async fn every_served_kind_has_kubernetes_schema_with_refused_fields_marked() {
    let server = TestServer::in_memory().await;
    let core = document(&server, "api/v1").await;
    for kind in ["Pod", "Node", "Namespace", "Service", "ConfigMap", "Secret", "Endpoints", "Event", "Binding"] {
        let (name, schema) = schema_of(&core, "", kind);
        assert_eq!(name, &format!("io.k8s.api.core.v1.{kind}"));
        assert!(schema["description"].as_str().is_some_and(|d| !d.is_empty()), "{kind} has a description");
    }
    let apps = document(&server, "apis/apps/v1").await;
    for kind in ["Deployment", "ReplicaSet"] {
        assert_eq!(schema_of(&apps, "apps", kind).0, &format!("io.k8s.api.apps.v1.{kind}"));
    }
    assert_eq!(schema_of(&apps, "autoscaling", "Scale").0, "io.k8s.api.autoscaling.v1.Scale");
    let slices = document(&server, "apis/discovery.k8s.io/v1").await;
    schema_of(&slices, "discovery.k8s.io", "EndpointSlice");
    let leases = document(&server, "apis/coordination.k8s.io/v1").await;
    schema_of(&leases, "coordination.k8s.io", "Lease");

    // Kubernetes' descriptions, and a reference as kube-apiserver writes one: in allOf.
    let pod_spec = &core["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"];
    let containers = pod_spec["containers"]["description"].as_str().unwrap();
    assert!(containers.starts_with("List of containers belonging to the pod."), "{containers}");
    assert_eq!(pod_spec["containers"]["items"]["$ref"], "#/components/schemas/io.k8s.api.core.v1.Container");
    let spec = &core["components"]["schemas"]["io.k8s.api.core.v1.Pod"]["properties"]["spec"];
    assert_eq!(spec["allOf"], json!([{"$ref": "#/components/schemas/io.k8s.api.core.v1.PodSpec"}]));

    // What the strict conversion refuses is marked; what it keeps is not.
    let described = |document: &Value, schema: &str, field: &str| {
        document["components"]["schemas"][schema]["properties"][field]["description"].as_str().unwrap_or_default().to_string()
    };
    for (schema, field) in [
        ("io.k8s.api.core.v1.PodSpec", "initContainers"),
        ("io.k8s.api.core.v1.Container", "lifecycle"),
        ("io.k8s.api.core.v1.Volume", "nfs"),
        ("io.k8s.api.core.v1.ServiceSpec", "externalName"),
    ] {
        let said = described(&core, schema, field);
        assert!(said.starts_with("Not supported by Shepherd: ") && said.len() > 40, "{schema}.{field}: {said}");
    }
    for (schema, field) in [
        ("io.k8s.api.core.v1.PodSpec", "containers"),
        ("io.k8s.api.core.v1.Container", "resources"),
        ("io.k8s.api.core.v1.Container", "image"),
        ("io.k8s.api.core.v1.Volume", "configMap"),
        ("io.k8s.api.core.v1.ServiceSpec", "ports"),
    ] {
        assert!(!described(&core, schema, field).starts_with("Not supported"), "{schema}.{field} is held");
    }
    assert!(described(&apps, "io.k8s.api.core.v1.PodSpec", "initContainers").starts_with("Not supported by Shepherd: "));
    assert!(!described(&apps, "io.k8s.api.apps.v1.DeploymentSpec", "strategy").starts_with("Not supported"));
    server.stop().await;
}

#[tokio::test]
async fn hash_urls_are_cached_for_good_and_older_hashes_redirected() {
    let server = TestServer::in_memory().await;
    let index: Value = get(&server, "/k8s/openapi/v3").await.json().await.unwrap();
    let url = index["paths"]["apis/apps/v1"]["serverRelativeURL"].as_str().unwrap().to_string();
    let (path, hash) = url.split_once("?hash=").expect("a hash URL");
    assert_eq!(path, "/openapi/v3/apis/apps/v1");

    let current = get(&server, &format!("/k8s{url}")).await;
    assert_eq!(current.status(), StatusCode::OK);
    assert_eq!(current.headers()["cache-control"], "public, immutable, max-age=31536000");
    assert_eq!(current.headers()["etag"].to_str().unwrap(), format!("\"{hash}\""));
    let by_hash: Value = current.json().await.unwrap();

    let older = get(&server, &format!("/k8s{path}?hash=0123456789ABCDEF")).await;
    assert_eq!(older.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(older.headers()["location"].to_str().unwrap(), format!("/k8s{url}"));

    let plain = get(&server, &format!("/k8s{path}")).await;
    assert_eq!(plain.headers()["cache-control"], "no-cache, private");
    assert_eq!(plain.json::<Value>().await.unwrap(), by_hash, "the same document with or without its hash");
    server.stop().await;
}

#[tokio::test]
async fn openapi_v2_in_protobuf_is_a_document_without_definitions() {
    let server = TestServer::in_memory().await;
    let protobuf = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
    let answer = reqwest::Client::new().get(format!("{}/k8s/openapi/v2", server.url)).header("accept", protobuf).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(answer.headers()["content-type"], "application/com.github.proto-openapi.spec.v2.v1.0+protobuf");
    // Field 1 (swagger), a string of 3 bytes: "2.0".
    assert_eq!(&answer.bytes().await.unwrap()[..], b"\x0a\x032.0");
    let json: Value = get(&server, "/k8s/openapi/v2").await.json().await.unwrap();
    assert_eq!(json["swagger"], "2.0");
    server.stop().await;
}
