//! Secrets encrypted at rest (`--encryption-key-file`) on both durable stores, against real
//! servers: the SQLite file and its WAL, and etcd's values, hold ciphertext while the API
//! reads the Secret back; keys rotate, by `get | replace` of unchanged Secrets as the docs
//! say; a Secret under a key the server lacks, or a value copied to another key, is a 500
//! naming the decrypt failure, for that object and for a list that reads it.

mod common;

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use common::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use server::Config;
use server::store::{Encryption, EtcdSettings};
use shepherd_testing::{Etcd, poll};

const K1: &str = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const K2: &str = "k2:MDEyMzQ1Njc4OWFiY2RlZg==";
const K3: &str = "k3:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3";
/// The value and its base64, the form a Secret's JSON holds.
const VALUE: [&str; 2] = ["s3cret-value", "czNjcmV0LXZhbHVl"];
const PATH: &str = "/api/v1/namespaces/default/secrets/db";

fn keys(lines: &[&str]) -> Encryption {
    Encryption::parse(Path::new("keys"), &lines.join("\n")).unwrap()
}

fn holds(bytes: &[u8], text: &str) -> bool {
    bytes.windows(text.len()).any(|w| w == text.as_bytes())
}

/// Every byte SQLite keeps for the store: the database and its WAL.
fn on_disk(dir: &Path) -> Vec<u8> {
    ["shepherd.db", "shepherd.db-wal"].iter().filter_map(|f| std::fs::read(dir.join(f)).ok()).flatten().collect()
}

async fn create_secret(server: &TestServer, name: &str) {
    let secret = json!({"kind": "Secret", "metadata": {"name": name}, "string_data": {"password": VALUE[0]}});
    let (status, created) = server.post("/api/v1/namespaces/default/secrets", secret).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
}

async fn password(server: &TestServer, path: &str) -> Value {
    let (status, read) = server.get(path).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    read["data"]["password"].clone()
}

/// The answer of kubectl's GET of a Secret through `/k8s`.
async fn kubectl_get(server: &TestServer, path: &str) -> (StatusCode, Value) {
    kubectl(server.bare(Method::GET, &format!("/k8s{path}"))).await
}

/// The answer to a request to `/k8s`, as kubectl reads it.
async fn kubectl(request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let response = request.send().await.expect("the server answers");
    (response.status(), response.json().await.expect("a JSON answer"))
}

/// A Secret the server cannot decrypt: 500 through both APIs, naming the failure, and no
/// write replaces it.
async fn assert_unreadable(server: &TestServer, path: &str, why: &str) {
    let (status, native) = server.get(path).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{native}");
    let message = native["error"]["message"].as_str().unwrap();
    assert!(message.contains("cannot be read") && message.contains(why), "{message}");
    let (status, status_body) = kubectl_get(server, path).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{status_body}");
    assert_eq!(status_body["reason"], "InternalError");
    assert!(status_body["message"].as_str().unwrap().contains(why), "{status_body}");
    let name = path.rsplit('/').next().unwrap();
    let replacement = json!({"kind": "Secret", "metadata": {"name": name}, "string_data": {"password": "new"}});
    assert_eq!(server.put(path, replacement).await.0, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(server.delete(path).await.0, StatusCode::INTERNAL_SERVER_ERROR);
    for value in VALUE {
        assert!(!message.contains(value));
    }
}

#[tokio::test]
async fn in_sqlite_a_secret_is_ciphertext_on_disk_rotates_and_fails_alone_under_a_missing_key() {
    let dir = tempfile::tempdir().unwrap();
    let start = |encryption: Encryption| TestServer::start(Config { encryption, ..Config::durable(dir.path()) });

    let server = start(keys(&[K1])).await;
    create_secret(&server, "db").await;
    assert_eq!(password(&server, PATH).await, VALUE[1]);
    let disk = on_disk(dir.path());
    assert!(holds(&disk, "k8s:enc:aesgcm:v1:k1:"), "the Secret is stored encrypted with k1");
    for value in VALUE {
        assert!(!holds(&disk, value), "{value} is on disk");
    }
    server.stop().await;

    // Rotated: k2 encrypts, k1 still decrypts; a write moves the Secret to k2.
    let server = start(keys(&[K2, K1])).await;
    let (_, mut secret) = server.get(PATH).await;
    assert_eq!(secret["data"]["password"], VALUE[1]);
    secret["metadata"]["labels"] = json!({"rotated": "yes"});
    assert_eq!(server.put(PATH, secret).await.0, StatusCode::OK);
    server.stop().await;
    let disk = on_disk(dir.path());
    assert!(holds(&disk, "k8s:enc:aesgcm:v1:k2:") && !holds(&disk, "k8s:enc:aesgcm:v1:k1:"), "written again with k2");

    // Without k2 the server starts, and that Secret fails, and every list that reads it, as
    // kube-apiserver's list fails on a value it cannot transform.
    let server = start(keys(&[K3])).await;
    let why = "failed to decrypt: it was encrypted with the key \"k2\"";
    assert_unreadable(&server, PATH, why).await;
    assert_eq!(server.get("/api/v1/namespaces/default").await.0, StatusCode::OK);
    create_secret(&server, "another").await;
    create_secret(&server, "other").await;
    let unreadable_list = |status: StatusCode, body: &Value, message: &Value| {
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
        let message = message.as_str().unwrap();
        assert!(message.contains("Secret \"default/db\"") && message.contains(why), "{message}");
        for value in VALUE {
            assert!(!message.contains(value));
        }
    };
    for path in ["/api/v1/namespaces/default/secrets", "/api/v1/secrets"] {
        let (status, list) = server.get(path).await;
        unreadable_list(status, &list, &list["error"]["message"]);
    }
    let (status, list) = kubectl_get(&server, "/api/v1/namespaces/default/secrets").await;
    unreadable_list(status, &list, &list["message"]);
    assert_eq!(list["reason"], "InternalError");
    // A page that ends before it reads only what it holds; the next one reads it.
    let (status, page) = server.get("/api/v1/namespaces/default/secrets?limit=1").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["items"][0]["metadata"]["name"], "another");
    let next = format!("/api/v1/namespaces/default/secrets?limit=1&continue={}", page["continue"].as_str().unwrap());
    let (status, page) = server.get(&next).await;
    unreadable_list(status, &page, &page["error"]["message"]);
    assert_eq!(server.get("/api/v1/namespaces/default/configmaps").await.0, StatusCode::OK, "other kinds list");
    server.stop().await;
}

#[tokio::test]
async fn in_etcd_a_secret_is_ciphertext_and_a_copied_value_or_another_servers_key_fails_alone() {
    let etcd = Etcd::start(1).await;
    let settings = EtcdSettings { endpoints: etcd.endpoints(), prefix: "/enc".into(), compaction_interval: Duration::ZERO };
    let on_etcd = |encryption: Encryption| Config { etcd: Some(settings.clone()), encryption, run_scheduler: false, ..Config::in_memory() };
    let first = TestServer::start(on_etcd(keys(&[K1]))).await;
    create_secret(&first, "db").await;
    assert_eq!(password(&first, PATH).await, VALUE[1]);

    let mut kv = etcd_client::Client::connect(etcd.endpoints(), None).await.unwrap().kv_client();
    let stored = kv.get("/enc/secrets/default/db", None).await.unwrap().kvs()[0].value().to_vec();
    assert!(stored.starts_with(b"k8s:enc:aesgcm:v1:k1:"), "{}", String::from_utf8_lossy(&stored));
    for value in VALUE {
        assert!(!holds(&stored, value), "{value} is in etcd");
    }

    // The value copied to another key does not decrypt there (the etcd key is authenticated).
    kv.put("/enc/secrets/default/copy", stored, None).await.unwrap();
    let copy = "/api/v1/namespaces/default/secrets/copy";
    poll(Duration::from_secs(5), "the copy to reach the cache", || async {
        (first.get(copy).await.0 == StatusCode::INTERNAL_SERVER_ERROR).then_some(())
    })
    .await;
    assert_unreadable(&first, copy, "failed to decrypt with the key \"k1\"").await;

    // A second server with k2 first rotates the Secret on its write: the first, without k2,
    // can no longer read it, and says so.
    let second = TestServer::start(on_etcd(keys(&[K2, K1]))).await;
    let (_, mut secret) = second.get(PATH).await;
    assert_eq!(secret["data"]["password"], VALUE[1]);
    secret["metadata"]["labels"] = json!({"rotated": "yes"});
    assert_eq!(second.put(PATH, secret).await.0, StatusCode::OK);
    poll(Duration::from_secs(5), "the rotated Secret to reach the first server", || async {
        (first.get(PATH).await.0 == StatusCode::INTERNAL_SERVER_ERROR).then_some(())
    })
    .await;
    assert_unreadable(&first, PATH, "it was encrypted with the key \"k2\"").await;
    assert_eq!(password(&second, PATH).await, VALUE[1], "the second still reads it");

    // Deleted through the server that can read it: gone for both.
    assert_eq!(second.delete(PATH).await.0, StatusCode::OK);
    poll(Duration::from_secs(5), "the deletion to reach the first server", || async {
        (first.get(PATH).await.0 == StatusCode::NOT_FOUND).then_some(())
    })
    .await;
    first.stop().await;
    second.stop().await;
}

/// The documented rotation on a store that `start` opens with a key list, one server at a
/// time: Secrets written under k1 are read and replaced unchanged under [k2, k1], one through
/// the native API and one through `/k8s` as `kubectl replace` sends it, then read under k2 alone.
async fn rotates_by_get_and_replace<S, F>(start: S)
where
    S: Fn(Encryption) -> F,
    F: Future<Output = TestServer>,
{
    const API_PATH: &str = "/api/v1/namespaces/default/secrets/api";
    let server = start(keys(&[K1])).await;
    create_secret(&server, "db").await;
    create_secret(&server, "api").await;
    server.stop().await;

    let server = start(keys(&[K2, K1])).await;
    let (_, read) = server.get(PATH).await;
    let (status, replaced) = server.put(PATH, read.clone()).await;
    assert_eq!(status, StatusCode::OK, "{replaced}");
    let version = |object: &Value| object["metadata"]["resource_version"].as_u64().unwrap();
    assert!(version(&replaced) > version(&read), "read with k1, the unchanged Secret is written again with k2");
    assert_eq!(replaced["data"], read["data"]);
    let (status, again) = server.put(PATH, replaced.clone()).await;
    assert_eq!((status, version(&again)), (StatusCode::OK, version(&replaced)), "written with k2, it is current: nothing to write");

    let (status, read) = kubectl_get(&server, API_PATH).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    let (status, replaced) = kubectl(server.bare(Method::PUT, &format!("/k8s{API_PATH}")).json(&read)).await;
    assert_eq!(status, StatusCode::OK, "{replaced}");
    assert_ne!(replaced["metadata"]["resourceVersion"], read["metadata"]["resourceVersion"], "kubectl replace writes it with k2");
    assert_eq!(replaced["data"], read["data"]);
    server.stop().await;

    let server = start(keys(&[K2])).await;
    for path in [PATH, API_PATH] {
        assert_eq!(password(&server, path).await, VALUE[1], "{path} reads without k1");
    }
    let (status, list) = server.get("/api/v1/namespaces/default/secrets").await;
    assert_eq!((status, list["items"].as_array().map(Vec::len)), (StatusCode::OK, Some(2)), "{list}");
    server.stop().await;
}

#[tokio::test]
async fn in_sqlite_a_rotation_by_get_and_replace_rewrites_unchanged_secrets_with_the_new_key() {
    let dir = tempfile::tempdir().unwrap();
    rotates_by_get_and_replace(|encryption| TestServer::start(Config { encryption, ..Config::durable(dir.path()) })).await;
    assert!(!holds(&on_disk(dir.path()), "k8s:enc:aesgcm:v1:k1:"), "nothing is left under k1");
}

#[tokio::test]
async fn in_etcd_a_rotation_by_get_and_replace_rewrites_unchanged_secrets_with_the_new_key() {
    let etcd = Etcd::start(1).await;
    let settings = EtcdSettings { endpoints: etcd.endpoints(), prefix: "/rotate".into(), compaction_interval: Duration::ZERO };
    rotates_by_get_and_replace(|encryption| {
        TestServer::start(Config { etcd: Some(settings.clone()), encryption, run_scheduler: false, ..Config::in_memory() })
    })
    .await;
}
