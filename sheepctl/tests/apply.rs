//! `sheepctl apply` against a real server: the reference manifests unchanged, repeat
//! applies, updates, YAML with several documents, standard input, unknown fields refused,
//! and `--wait`.

mod support;

use std::time::Duration;

use predicates::prelude::*;
use support::{Method, TestServer, example};

#[test]
fn applies_the_three_reference_manifests_unchanged() {
    let server = TestServer::start();
    for (file, expected) in [
        ("pod.json", "pod/web-server created\n"),
        ("deployment.json", "deployment/web created\n"),
        ("service.json", "service/web-service created\n"),
    ] {
        server.sheepctl().args(["apply", "-f"]).arg(example(file)).assert().success().stdout(expected);
    }
    let pod = server.get("/api/v1/namespaces/default/pods/web-server");
    assert_eq!(pod["metadata"]["labels"]["tier"], "frontend");
    assert_eq!(pod["spec"]["containers"][0]["resources"]["memory"], 67108864);
    let deployment = server.get("/api/v1/namespaces/default/deployments/web");
    assert_eq!(deployment["spec"]["replicas"], 3);
    let service = server.get("/api/v1/namespaces/default/services/web-service");
    assert_eq!(service["spec"]["ports"][0]["target_port"], 8080);
}

#[test]
fn a_kubernetes_manifest_applies_as_kubectl_applies_it() {
    let server = TestServer::start();
    let two_tier = example("kubernetes/two-tier.yaml");
    let created = "configmap/backend-page created\nsecret/backend-auth created\ndeployment/backend created\nservice/backend created\n\
                   configmap/frontend-cgi created\ndeployment/frontend created\nservice/frontend created\n";
    server.sheepctl().args(["apply", "-f"]).arg(&two_tier).assert().success().stdout(created);
    let unchanged = created.replace("created", "unchanged");
    server.sheepctl().args(["apply", "-f"]).arg(&two_tier).assert().success().stdout(unchanged);
    let frontend = server.get("/api/v1/namespaces/default/services/frontend");
    assert_eq!(frontend["spec"]["ports"][0]["node_port"], 30080);
    let deployment = server.get("/api/v1/namespaces/default/deployments/frontend");
    let env = &deployment["spec"]["template"]["spec"]["containers"][0]["env"][1];
    assert_eq!(env["value_from"]["secret_key_ref"]["name"], "backend-auth", "{deployment}");
    let secret = server.get("/api/v1/namespaces/default/secrets/backend-auth");
    assert!(secret["data"]["password"].is_string(), "stringData is stored as data: {secret}");
}

#[test]
fn applying_again_is_unchanged_and_an_edit_is_configured() {
    let server = TestServer::start();
    server.sheepctl().args(["apply", "-f"]).arg(example("deployment.json")).assert().success().stdout("deployment/web created\n");
    server.sheepctl().args(["apply", "-f"]).arg(example("deployment.json")).assert().success().stdout("deployment/web unchanged\n");

    let edited = std::fs::read_to_string(example("deployment.json")).unwrap().replace("\"replicas\": 3", "\"replicas\": 1");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deployment.json");
    std::fs::write(&path, edited).unwrap();
    server.sheepctl().args(["apply", "-f"]).arg(&path).assert().success().stdout("deployment/web configured\n");
    assert_eq!(server.get("/api/v1/namespaces/default/deployments/web")["spec"]["replicas"], 1);
    server.sheepctl().args(["apply", "-f"]).arg(&path).assert().success().stdout("deployment/web unchanged\n");
}

#[test]
fn yaml_with_several_documents_a_directory_and_stdin() {
    let server = TestServer::start();
    server
        .sheepctl()
        .args(["apply", "-f"])
        .arg(example("shop.yaml"))
        .assert()
        .success()
        .stdout("deployment/shop created\nservice/shop created\n");
    assert_eq!(server.get("/api/v1/namespaces/default/deployments/shop")["spec"]["replicas"], 2);

    let dir = tempfile::tempdir().unwrap();
    for file in ["pod.json", "service.json"] {
        std::fs::copy(example(file), dir.path().join(file)).unwrap();
    }
    server
        .sheepctl()
        .args(["apply", "-f"])
        .arg(dir.path())
        .assert()
        .success()
        .stdout("pod/web-server created\nservice/web-service created\n");

    let yaml = "kind: Namespace\nmetadata:\n  name: staging\n---\nkind: Pod\nmetadata:\n  name: from-stdin\n  namespace: staging\nspec:\n  containers:\n    - name: c\n      image: minimal\n";
    server
        .sheepctl()
        .args(["apply", "-f", "-"])
        .write_stdin(yaml)
        .assert()
        .success()
        .stdout("namespace/staging created\npod/from-stdin created\n");
    server.sheepctl().args(["get", "pods", "-n", "staging", "-o", "name"]).assert().success().stdout("pod/from-stdin\n");
}

#[test]
fn a_manifest_namespace_that_contradicts_the_flag_is_refused_before_anything_is_applied() {
    let server = TestServer::start();
    server
        .sheepctl()
        .args(["apply", "-n", "prod", "-f"])
        .arg(example("pod.json"))
        .assert()
        .failure()
        .stderr(predicate::str::contains("is in namespace \"default\" but -n says \"prod\""));
    let (status, _) = server.request(Method::GET, "/api/v1/namespaces/default/pods/web-server", None);
    assert_eq!(status, 404);
}

#[test]
fn a_typo_d_field_is_refused_by_path_and_nothing_is_applied() {
    let server = TestServer::start();
    let json =
        r#"{"kind":"Pod","metadata":{"name":"typo1"},"spec":{"containers":[{"name":"c","image":"minimal","comand":["sleep","1"]}]}}"#;
    server.sheepctl().args(["apply", "-f", "-"]).write_stdin(json).assert().failure().stderr(predicate::str::contains(
        "invalid manifest standard input: line 1, column 104: invalid Pod: unknown field \"spec.containers[0].comand\"",
    ));
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("typo.yaml");
    std::fs::write(
        &yaml,
        "kind: Pod\nmetadata:\n  name: typo2\nspec:\n  containers:\n  - name: c\n    image: minimal\n    comand: [sleep, \"1\"]\n",
    )
    .unwrap();
    server.sheepctl().args(["apply", "-f"]).arg(&yaml).assert().failure().stderr(predicate::str::contains(format!(
        "invalid manifest {}: line 8, column 13: invalid Pod: unknown field \"spec.containers[0].comand\"",
        yaml.display()
    )));
    // A Kubernetes manifest's typo is named by the server, in Kubernetes' words.
    let kubernetes = dir.path().join("kubernetes.yaml");
    std::fs::write(
        &kubernetes,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: typo3}\nspec:\n  containers:\n  - {name: c, image: minimal, comand: [sleep]}\n",
    )
    .unwrap();
    server.sheepctl().args(["apply", "-f"]).arg(&kubernetes).assert().failure().stderr(predicate::str::contains(format!(
        "invalid manifest {}: document 1: Pod \"typo3\" is invalid: spec.containers[0].comand",
        kubernetes.display()
    )));
    for name in ["typo1", "typo2", "typo3"] {
        let (status, _) = server.request(Method::GET, &format!("/api/v1/namespaces/default/pods/{name}"), None);
        assert_eq!(status, 404, "{name} was applied");
    }
}

#[test]
fn apply_wait_follows_the_pod_until_it_runs() {
    let server = TestServer::start();
    server.register_node("node-1");
    let apply = server.spawn(&["apply", "-f", support::example("pod.json").to_str().unwrap(), "--wait", "--timeout=30s"]);
    apply.expect_line("pod/web-server created", Duration::from_secs(10));
    server.pod_bound("default", "web-server");
    server.report_running("default", "web-server");
    let (code, out, err) = apply.finish(Duration::from_secs(20));
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert!(out.lines().any(|l| l == "pod/web-server: Running on node-1"), "{out}");
}

#[test]
fn apply_wait_times_out_with_the_reason() {
    let server = TestServer::start();
    server
        .sheepctl()
        .args(["apply", "--wait", "--timeout=1s", "-f"])
        .arg(example("pod.json"))
        .assert()
        .code(1)
        .stdout(predicate::str::starts_with("pod/web-server created\n"))
        .stderr(predicate::str::contains("error: timed out after 1s waiting for pod/web-server to be Running: it is Pending ("));
}
