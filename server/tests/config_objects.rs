//! ConfigMaps and Secrets against a real server on 127.0.0.1:0 (on etcd when
//! `SHEPHERD_TEST_ETCD` is set): both dialects over one stored object, base64 bytes,
//! `stringData` merged and never read back, immutability, and the 422s of bad keys, whose
//! messages never hold a value.

mod common;

use common::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// A `/k8s` call as kubectl makes it; its answer is Kubernetes', not the native document's.
async fn k8s_call(server: &TestServer, method: Method, path: &str, body: Option<Value>, accept: Option<&str>) -> (StatusCode, Value) {
    let mut request = server.bare(method, &format!("/k8s{path}")).header("user-agent", "kubectl/v1.32.0");
    if let Some(body) = body {
        request = request.header("content-type", "application/json").body(body.to_string());
    }
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    let response = request.send().await.expect("the server answers");
    let status = response.status();
    (status, response.json().await.expect("a JSON answer"))
}

async fn k8s(server: &TestServer, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    k8s_call(server, method, path, body, None).await
}

#[tokio::test]
async fn a_config_map_is_one_object_in_both_dialects_with_binary_data_in_base64() {
    let server = TestServer::in_memory().await;
    let native = json!({"kind": "ConfigMap", "metadata": {"name": "app"},
        "data": {"greeting": "hello"}, "binary_data": {"logo.bin": "AAEC"}});
    let (status, created) = server.post("/api/v1/namespaces/default/configmaps", native).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["binary_data"]["logo.bin"], "AAEC");

    let (status, read) = k8s(&server, Method::GET, "/api/v1/namespaces/default/configmaps/app", None).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!((read["apiVersion"].as_str(), read["kind"].as_str()), (Some("v1"), Some("ConfigMap")));
    assert_eq!(read["data"], json!({"greeting": "hello"}));
    assert_eq!(read["binaryData"], json!({"logo.bin": "AAEC"}));

    let table = k8s_call(&server, Method::GET, "/api/v1/namespaces/default/configmaps", None, Some(TABLE)).await.1;
    let columns: Vec<&str> = table["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(columns, ["Name", "Data", "Age"]);
    assert_eq!(table["rows"][0]["cells"][1], 2, "two keys");

    let (status, listed) = k8s(&server, Method::GET, "/api/v1/configmaps", None).await;
    assert_eq!((status, listed["kind"].as_str()), (StatusCode::OK, Some("ConfigMapList")));
    let (status, _) = k8s(&server, Method::DELETE, "/api/v1/namespaces/default/configmaps/app", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(server.get("/api/v1/namespaces/default/configmaps/app").await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn string_data_is_merged_on_every_write_and_never_read_back() {
    let server = TestServer::in_memory().await;
    let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
        "data": {"user": "YWRtaW4="}, "stringData": {"password": "s3cret"}});
    let (status, created) = k8s(&server, Method::POST, "/api/v1/namespaces/default/secrets", Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["type"], "Opaque");
    assert_eq!(created["data"], json!({"password": "czNjcmV0", "user": "YWRtaW4="}));
    assert!(created.get("stringData").is_none(), "{created}");

    let (_, mut native) = server.get("/api/v1/namespaces/default/secrets/db").await;
    assert!(native.get("string_data").is_none(), "{native}");
    native["string_data"] = json!({"password": "n3w"});
    let (status, replaced) = server.put("/api/v1/namespaces/default/secrets/db", native.clone()).await;
    assert_eq!(status, StatusCode::OK, "{replaced}");
    assert_eq!(replaced["data"]["password"], "bjN3");

    let table = k8s_call(&server, Method::GET, "/api/v1/namespaces/default/secrets", None, Some(TABLE)).await.1;
    assert_eq!(table["rows"][0]["cells"], json!(["db", "Opaque", 2, table["rows"][0]["cells"][3]]));

    let mut retyped = replaced.clone();
    retyped["type"] = "kubernetes.io/basic-auth".into();
    let (status, refused) = server.put("/api/v1/namespaces/default/secrets/db", retyped).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert!(refused.to_string().contains("type"), "{refused}");
}

#[tokio::test]
async fn an_immutable_config_map_keeps_its_data_and_stays_immutable() {
    let server = TestServer::in_memory().await;
    let map = json!({"kind": "ConfigMap", "metadata": {"name": "fixed"}, "data": {"a": "1"}, "immutable": true});
    let (_, created) = server.post("/api/v1/namespaces/default/configmaps", map).await;
    let mut changed = created.clone();
    changed["data"]["a"] = "2".into();
    changed["immutable"] = false.into();
    let (status, refused) = server.put("/api/v1/namespaces/default/configmaps/fixed", changed).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    let text = refused.to_string();
    assert!(text.contains("data") && text.contains("immutable") && text.contains("field is immutable when `immutable` is set"), "{text}");
    let mut relabelled = created.clone();
    relabelled["metadata"]["labels"] = json!({"team": "a"});
    assert_eq!(server.put("/api/v1/namespaces/default/configmaps/fixed", relabelled).await.0, StatusCode::OK, "labels may change");
}

#[tokio::test]
async fn bad_keys_are_422_naming_keys_and_never_values() {
    let server = TestServer::in_memory().await;
    let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bad"},
        "stringData": {"bad key": "hunter2", "..": "hunter3"}});
    let (status, refused) = k8s(&server, Method::POST, "/api/v1/namespaces/default/secrets", Some(body)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    let text = refused.to_string();
    assert!(text.contains("data[bad key]") && text.contains("data[..]"), "{text}");
    assert!(!text.contains("hunter"), "a value in {text}");

    let native = json!({"kind": "Secret", "metadata": {"name": "bad"}, "string_data": {"a/b": "hunter2"}});
    let (status, refused) = server.post("/api/v1/namespaces/default/secrets", native).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert!(refused.to_string().contains("string_data[a/b]") && !refused.to_string().contains("hunter2"), "{refused}");
}

#[tokio::test]
async fn a_value_of_the_wrong_type_is_a_400_naming_the_types_and_never_the_value() {
    let server = TestServer::in_memory().await;
    let secrets = "/api/v1/namespaces/default/secrets";
    let bodies = [
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pin"}, "stringData": {"pin": 918273645}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pin"}, "data": "hunter2"}),
    ];
    for body in bodies {
        let (status, refused) = k8s(&server, Method::POST, secrets, Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
        let text = refused.to_string();
        assert!(text.contains("invalid type: ") && !text.contains("918273645") && !text.contains("hunter2"), "{text}");
    }
    let native = json!({"kind": "Secret", "metadata": {"name": "pin"}, "string_data": {"pin": true, "code": 918273645}});
    let (status, refused) = server.post(secrets, native).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(refused.to_string().contains("invalid type: ") && !refused.to_string().contains("918273645"), "{refused}");
}

#[tokio::test]
async fn a_viewer_token_reads_config_maps_but_no_secrets_and_a_node_token_reads_both() {
    use server::Config;
    use server::auth::{Principal, Role, Tokens};
    let mut tokens = Tokens::default();
    tokens.add("admin-token", Principal::new(Role::Admin, None));
    tokens.add("node-token", Principal::new(Role::Node, Some("node-1".into())));
    tokens.add("viewer-token", Principal::new(Role::Viewer, None));
    let server = TestServer::start(Config { tokens, run_scheduler: false, ..Config::in_memory() }).await;
    let admin = server.with_token("admin-token");
    let secret = json!({"kind": "Secret", "metadata": {"name": "db"}, "string_data": {"password": "s3cret"}});
    assert_eq!(admin.post("/api/v1/namespaces/default/secrets", secret).await.0, StatusCode::CREATED);
    let map = json!({"kind": "ConfigMap", "metadata": {"name": "app"}, "data": {"a": "b"}});
    assert_eq!(admin.post("/api/v1/namespaces/default/configmaps", map).await.0, StatusCode::CREATED);

    let viewer = server.with_token("viewer-token");
    for path in [
        "/api/v1/secrets",
        "/api/v1/namespaces/default/secrets",
        "/api/v1/namespaces/default/secrets/db",
        "/api/v1/namespaces/default/secrets?watch=true",
        "/k8s/api/v1/namespaces/default/secrets/db",
        "/k8s/api/v1/secrets?watch=true",
        // Percent-encoded, as the router decodes a captured segment.
        "/k8s/api/v1/namespaces/default/%73ecrets/db",
        "/k8s/api/v1/namespaces/default/secret%73/db",
        "/k8s/api/v1/%73ecrets",
        "/k8s/api/v1/%73ecrets?watch=1",
        "/api/v1/namespaces/default/%73ecrets/db",
    ] {
        let response = viewer.bare(Method::GET, path).bearer_auth("viewer-token").send().await.unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{path}");
        let text = response.text().await.unwrap();
        assert!(text.contains("may not read secrets") && !text.contains("s3cret"), "{path}: {text}");
    }
    assert_eq!(viewer.get("/api/v1/namespaces/default/configmaps/app").await.0, StatusCode::OK);
    let (status, read) = server.with_token("node-token").get("/api/v1/namespaces/default/secrets/db").await;
    assert_eq!((status, &read["data"]["password"]), (StatusCode::OK, &json!("czNjcmV0")), "a node reads what its pods need");
}

/// Kubernetes' `MaxSecretSize`: 1 MiB of values, decoded, keys not counted. One byte over is
/// kube-apiserver's 422 through both APIs (the body limit, 3 MiB as kube-apiserver's, lets
/// such a body reach validation), the whole object's for a ConfigMap, `data`'s for a Secret.
#[tokio::test]
async fn a_config_map_or_secret_over_a_mebibyte_is_a_422_in_kubernetes_words() {
    const MEBIBYTE: usize = 1024 * 1024;
    let server = TestServer::in_memory().await;
    let filler = "x".repeat(MEBIBYTE - 1);
    // One byte of binary data is "AA==": exactly 1 MiB of values, stored.
    let full = json!({"kind": "ConfigMap", "metadata": {"name": "full"}, "data": {"a": filler}, "binary_data": {"b": "AA=="}});
    assert_eq!(server.post("/api/v1/namespaces/default/configmaps", full).await.0, StatusCode::CREATED);
    let over =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "over"}, "data": {"a": filler}, "binaryData": {"b": "AAA="}});
    let (status, refused) = k8s(&server, Method::POST, "/api/v1/namespaces/default/configmaps", Some(over)).await;
    assert_eq!((status, refused["reason"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("Invalid")), "{refused}");
    assert!(refused["message"].as_str().unwrap().ends_with("[]: Too long: must have at most 1048576 bytes"), "{refused}");
    assert_eq!(refused["details"]["causes"][0]["field"], "[]", "{refused}");
    assert_eq!(refused["details"]["causes"][0]["reason"], "FieldValueTooLong", "{refused}");

    // A Secret's stringData counts as merged into data.
    let secret = json!({"kind": "Secret", "metadata": {"name": "big"}, "data": {"a": "AA=="}, "string_data": {"b": filler.clone() + "x"}});
    let (status, refused) = server.post("/api/v1/namespaces/default/secrets", secret).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().ends_with("data: Too long: must have at most 1048576 bytes"), "{refused}");
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "big"}, "stringData": {"b": filler + "xx"}});
    let (status, refused) = k8s(&server, Method::POST, "/api/v1/namespaces/default/secrets", Some(secret)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["details"]["causes"][0]["field"], "data", "{refused}");
    assert!(!refused.to_string().contains("xxxxxxxx"), "no value in the answer");
}

/// A typed Secret holds what its type requires (Kubernetes' `ValidateSecret`): a 422 in
/// kube-apiserver's words and paths through `/k8s`, `stringData` counting as `data`, and a
/// docker config that is no JSON named by its key with `<secret contents redacted>` for its value.
#[tokio::test]
async fn a_typed_secret_without_what_its_type_requires_is_a_422_in_kubernetes_words() {
    let server = TestServer::in_memory().await;
    let secret = |name: &str, type_: &str, string_data: Value| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": type_, "stringData": string_data});
    for (body, words) in [
        (secret("tls", "kubernetes.io/tls", json!({"tls.crt": "c"})), "data[tls.key]: Required value"),
        (secret("ssh", "kubernetes.io/ssh-auth", json!({})), "data[ssh-privatekey]: Required value"),
        (secret("basic", "kubernetes.io/basic-auth", json!({})), "[data[password]: Required value, data[username]: Required value]"),
        (secret("cfg", "kubernetes.io/dockercfg", json!({})), "data[.dockercfg]: Required value"),
        (
            secret("token", "kubernetes.io/service-account-token", json!({})),
            "metadata.annotations[kubernetes.io/service-account.name]: Required value",
        ),
        (
            secret("pull", "kubernetes.io/dockerconfigjson", json!({".dockerconfigjson": "hunter2"})),
            r#"data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": expected value at line 1 column 1"#,
        ),
    ] {
        let name = body["metadata"]["name"].as_str().unwrap().to_string();
        let (status, refused) = k8s(&server, Method::POST, "/api/v1/namespaces/default/secrets", Some(body)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
        assert_eq!(refused["message"], format!("Secret {name:?} is invalid: {words}"), "{refused}");
        assert!(!refused.to_string().contains("hunter2"), "no value in the answer: {refused}");
    }
    let good = secret("pull", "kubernetes.io/dockerconfigjson", json!({".dockerconfigjson": r#"{"auths": {}}"#}));
    let (status, created) = k8s(&server, Method::POST, "/api/v1/namespaces/default/secrets", Some(good)).await;
    assert_eq!((status, &created["type"]), (StatusCode::CREATED, &json!("kubernetes.io/dockerconfigjson")), "{created}");
    server.stop().await;
}
