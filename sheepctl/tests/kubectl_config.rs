//! The real kubectl (v1.32, on PATH) with ConfigMaps and Secrets through the
//! Kubernetes-compatible API: `create configmap` and `create secret generic`, whose typed
//! bodies are protobuf, `get`, `describe` (a Secret's sizes, never its values), `apply -f`
//! and `delete`. Fails, never skips, when kubectl is missing.

mod support;

use support::{Kubectl, TestServer};

#[test]
fn kubectl_creates_reads_describes_applies_and_deletes_config_maps_and_secrets() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::saved_by(&server, dir.path());

    assert_eq!(
        kubectl.run(&["create", "configmap", "app", "--from-literal=a=b", "--from-literal=greeting=hello"]),
        "configmap/app created\n"
    );
    assert_eq!(
        kubectl.run(&["create", "secret", "generic", "db", "--from-literal=p=q", "--from-literal=password=s3cret"]),
        "secret/db created\n"
    );
    assert_eq!(kubectl.run(&["get", "cm", "app", "-o", "jsonpath={.data.greeting}"]), "hello");
    assert_eq!(kubectl.run(&["get", "secret", "db", "-o", "jsonpath={.data.password}"]), "czNjcmV0", "base64, as Kubernetes");

    let maps = kubectl.run(&["get", "cm"]);
    let header: Vec<&str> = maps.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAME", "DATA", "AGE"], "{maps}");
    assert!(maps.lines().any(|l| l.split_whitespace().take(2).eq(["app", "2"])), "{maps}");
    let secrets = kubectl.run(&["get", "secrets"]);
    let header: Vec<&str> = secrets.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAME", "TYPE", "DATA", "AGE"], "{secrets}");
    assert!(secrets.lines().any(|l| l.split_whitespace().take(3).eq(["db", "Opaque", "2"])), "{secrets}");

    let described = kubectl.run(&["describe", "cm", "app"]);
    assert!(described.contains("greeting:\n----\nhello"), "{described}");
    let described = kubectl.run(&["describe", "secret", "db"]);
    assert!(described.contains("Type:  Opaque") && described.contains("password:  6 bytes"), "{described}");
    assert!(!described.contains("s3cret"), "describe shows sizes, never values:\n{described}");

    let manifest = dir.path().join("config.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: fast\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata:\n  name: token\nstringData:\n  token: abc\n",
    )
    .unwrap();
    let applied = kubectl.run(&["apply", "-f", manifest.to_str().unwrap()]);
    assert_eq!(applied, "configmap/settings created\nsecret/token created\n");
    assert_eq!(kubectl.run(&["get", "secret", "token", "-o", "jsonpath={.data.token}"]), "YWJj");
    let again = kubectl.run(&["apply", "-f", manifest.to_str().unwrap()]);
    // stringData is never read back, so kubectl patches it again each time, as against
    // kube-apiserver: `configured`, with the same value.
    assert_eq!(again, "configmap/settings unchanged\nsecret/token configured\n");
    assert_eq!(kubectl.run(&["get", "secret", "token", "-o", "jsonpath={.data.token}"]), "YWJj");

    assert_eq!(kubectl.run(&["delete", "cm", "app", "settings"]), "configmap \"app\" deleted\nconfigmap \"settings\" deleted\n");
    assert_eq!(kubectl.run(&["delete", "secret", "db"]), "secret \"db\" deleted\n");
    let missing = kubectl.output(&["get", "secret", "db"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("secrets \"db\" not found"), "{missing:?}");
}
