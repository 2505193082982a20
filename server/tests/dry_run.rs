//! Dry run against a real server on 127.0.0.1:0 (on etcd when `SHEPHERD_TEST_ETCD` is
//! set): every write of both dialects with `dry_run=All` (`dryRun=All` under `/k8s`) is
//! validated, defaulted and answered as the real write is, and stores nothing: the store's
//! revision does not move, no watcher hears of it, and a Service's addresses are not taken.
//! A value other than `All` is the 422 kube-apiserver answers.

mod common;

use std::time::Duration;

use common::{TestServer, add_node, open_watch, pod};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use server::Config;

const PODS: &str = "/api/v1/namespaces/default/pods";
const DEPLOYMENTS: &str = "/api/v1/namespaces/default/deployments";
const SERVICES: &str = "/api/v1/namespaces/default/services";

/// A `/k8s` call with a JSON body of `content_type`, as kubectl sends it.
async fn k8s(server: &TestServer, method: Method, path: &str, body: Option<(&str, Value)>) -> (StatusCode, Value) {
    let mut request = server.bare(method, &format!("/k8s{path}"));
    if let Some((content_type, body)) = body {
        request = request.header("content-type", content_type).body(body.to_string());
    }
    let response = request.send().await.expect("the server answers");
    let status = response.status();
    (status, response.json().await.expect("a JSON answer"))
}

/// The store's revision, as a list reports it.
async fn revision(server: &TestServer) -> u64 {
    let (status, list) = server.get("/api/v1/namespaces").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    list["resource_version"].as_u64().expect("a list's resource_version")
}

async fn deployment(server: &TestServer) -> Value {
    server.get(&format!("{DEPLOYMENTS}/web")).await.1
}

#[tokio::test]
async fn every_write_of_both_dialects_is_answered_as_the_real_one_and_stores_nothing() {
    // No scheduler: the pod stays unbound for the dry binding.
    let server = TestServer::start(Config { run_scheduler: false, ..Config::in_memory() }).await;
    add_node(&server, "n1", 4000, 8 << 30, 110).await;
    let manifest: Value = serde_json::from_str(include_str!("../../examples/deployment.json")).unwrap();
    assert_eq!(server.post(DEPLOYMENTS, manifest.clone()).await.0, StatusCode::CREATED);
    assert_eq!(server.post(PODS, pod("waiting", 100, 1 << 20)).await.0, StatusCode::CREATED);
    // The controller's own writes (the ReplicaSet, the pods, the status) settle first.
    shepherd_testing::eventually(&server.client, Duration::from_secs(10), "the deployment's status", || async {
        let web = deployment(&server).await;
        (web["status"]["observed_generation"] == 1 && web["status"]["replicas"] == 3).then_some(())
    })
    .await;
    let before = revision(&server).await;
    let stored = deployment(&server).await;
    let mut pods = open_watch(&server, &format!("{PODS}?watch=true&resource_version={before}")).await;

    // Native: create, replace, scale, status, binding, delete.
    let (status, dry_pod) = server.post(&format!("{PODS}?dry_run=All"), pod("dry", 100, 1 << 20)).await;
    assert_eq!(status, StatusCode::CREATED, "{dry_pod}");
    assert_eq!(dry_pod["status"]["phase"], "Pending", "defaulted as a created pod: {dry_pod}");
    assert!(dry_pod["metadata"]["uid"].as_str().is_some_and(|u| !u.is_empty()), "{dry_pod}");
    assert_eq!(server.get(&format!("{PODS}/dry")).await.0, StatusCode::NOT_FOUND);

    let mut wider = stored.clone();
    wider["spec"]["replicas"] = json!(7);
    let (status, answer) = server.put(&format!("{DEPLOYMENTS}/web?dry_run=All"), wider).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!((answer["spec"]["replicas"].as_i64(), answer["metadata"]["generation"].as_u64()), (Some(7), Some(2)));
    let scale = json!({"kind": "Scale", "metadata": {"name": "web"}, "spec": {"replicas": 9}});
    let (status, answer) = server.put(&format!("{DEPLOYMENTS}/web/scale?dry_run=All"), scale).await;
    assert_eq!((status, answer["spec"]["replicas"].as_i64()), (StatusCode::OK, Some(9)), "{answer}");

    let mut reported = server.get(&format!("{PODS}/waiting")).await.1;
    reported["status"]["message"] = json!("reported");
    let (status, answer) = server.put(&format!("{PODS}/waiting/status?dry_run=All"), reported).await;
    assert_eq!((status, answer["status"]["message"].as_str()), (StatusCode::OK, Some("reported")), "{answer}");
    let binding = json!({"kind": "Binding", "metadata": {"name": "waiting"}, "target": {"kind": "Node", "name": "n1"}});
    let (status, answer) = server.post(&format!("{PODS}/waiting/binding?dry_run=All"), binding).await;
    assert_eq!((status, answer["spec"]["node_name"].as_str()), (StatusCode::CREATED, Some("n1")), "{answer}");
    let (status, answer) = server.delete(&format!("{DEPLOYMENTS}/web?dry_run=All")).await;
    assert_eq!((status, answer["metadata"]["name"].as_str()), (StatusCode::OK, Some("web")), "{answer}");

    // A refusal is the real write's: the pod's spec cannot change, a dry run or not.
    let mut changed = server.get(&format!("{PODS}/waiting")).await.1;
    changed["spec"]["containers"][0]["image"] = json!("other");
    let (status, answer) = server.put(&format!("{PODS}/waiting?dry_run=All"), changed).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");

    // Kubernetes' dialect: create, merge and strategic patches, scale, binding, delete with
    // DeleteOptions in the body (kubectl's way) and in the query.
    let k8s_pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "dry"},
        "spec": {"containers": [{"name": "web", "image": "minimal"}]}});
    let (status, answer) =
        k8s(&server, Method::POST, "/api/v1/namespaces/default/pods?dryRun=All", Some(("application/json", k8s_pod))).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_eq!(answer["metadata"].get("resourceVersion"), None, "no version for what was never stored, as kube-apiserver: {answer}");
    assert_eq!(answer["spec"]["restartPolicy"], "Always", "defaulted: {answer}");
    let web = "/apis/apps/v1/namespaces/default/deployments/web";
    for content_type in ["application/merge-patch+json", "application/strategic-merge-patch+json"] {
        let patch = json!({"spec": {"replicas": 5}});
        let (status, answer) = k8s(&server, Method::PATCH, &format!("{web}?dryRun=All"), Some((content_type, patch))).await;
        assert_eq!((status, answer["spec"]["replicas"].as_i64()), (StatusCode::OK, Some(5)), "{content_type}: {answer}");
        assert_eq!(answer["metadata"]["resourceVersion"], stored["metadata"]["resource_version"].to_string(), "{answer}");
    }
    let scale = json!({"spec": {"replicas": 8}});
    let (status, answer) =
        k8s(&server, Method::PATCH, &format!("{web}/scale?dryRun=All"), Some(("application/merge-patch+json", scale))).await;
    assert_eq!((status, answer["spec"]["replicas"].as_i64()), (StatusCode::OK, Some(8)), "{answer}");
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "waiting"}, "target": {"kind": "Node", "name": "n1"}});
    let path = "/api/v1/namespaces/default/pods/waiting/binding?dryRun=All";
    assert_eq!(k8s(&server, Method::POST, path, Some(("application/json", binding))).await.0, StatusCode::CREATED);
    let options = json!({"apiVersion": "v1", "kind": "DeleteOptions", "dryRun": ["All"]});
    let (status, answer) = k8s(&server, Method::DELETE, web, Some(("application/json", options))).await;
    assert_eq!((status, answer["kind"].as_str()), (StatusCode::OK, Some("Deployment")), "{answer}");
    let (status, _) = k8s(&server, Method::DELETE, "/api/v1/namespaces/default/pods/waiting?dryRun=All", None).await;
    assert_eq!(status, StatusCode::OK);

    // Nothing of it was stored, and no watcher heard of it: the next real write is the next
    // revision, and the first change the pods' watch sees. An etcd member is shared with the
    // other tests, whose writes take revisions too: there only the watch can tell.
    let private_store = shepherd_testing::store_under_test() != "etcd";
    if private_store {
        assert_eq!(revision(&server).await, before, "a dry run takes no revision");
    }
    assert_eq!(deployment(&server).await, stored);
    let waiting = server.get(&format!("{PODS}/waiting")).await.1;
    assert_eq!((waiting["spec"]["node_name"].as_str(), waiting["status"].get("message")), (Some(""), None), "{waiting}");
    let (status, sentinel) = server.post(PODS, pod("sentinel", 100, 1 << 20)).await;
    assert_eq!(status, StatusCode::CREATED, "{sentinel}");
    let taken = sentinel["metadata"]["resource_version"].as_u64().expect("a resource_version");
    assert!(if private_store { taken == before + 1 } else { taken > before }, "after {before}: {sentinel}");
    let first = pods.next(Duration::from_secs(10)).await.expect("the sentinel's event").watch_event();
    assert_eq!(first.object.as_ref().map(|o| o.metadata().name.as_str()), Some("sentinel"), "{first:?}");
}

#[tokio::test]
async fn a_dry_run_service_is_given_addresses_that_stay_free_and_a_taken_one_is_refused() {
    let server = TestServer::in_memory().await;
    let service = |name: &str, spec: Value| {
        let mut spec = spec;
        spec["selector"] = json!({"app": name});
        spec["ports"] = json!([{"port": 80, "target_port": 8080}]);
        json!({"kind": "Service", "metadata": {"name": name}, "spec": spec})
    };
    let (status, dry) = server.post(&format!("{SERVICES}?dry_run=All"), service("web", json!({"type": "NodePort"}))).await;
    assert_eq!(status, StatusCode::CREATED, "{dry}");
    let (ip, port) = (dry["spec"]["cluster_ip"].clone(), dry["spec"]["ports"][0]["node_port"].clone());
    assert!(ip.as_str().is_some_and(|ip| ip.starts_with("10.96.")) && port.as_i64().is_some(), "{dry}");
    // Not taken: the real create gets the same ones.
    let (status, real) = server.post(SERVICES, service("web", json!({"type": "NodePort"}))).await;
    assert_eq!(status, StatusCode::CREATED, "{real}");
    assert_eq!((&real["spec"]["cluster_ip"], &real["spec"]["ports"][0]["node_port"]), (&ip, &port));
    // Checked: now that the real one holds it, a dry run asking for it is refused.
    let (status, refused) = server.post(&format!("{SERVICES}?dry_run=All"), service("other", json!({"cluster_ip": ip}))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert!(refused["error"]["details"][0]["message"].as_str().unwrap().contains("provided IP is already allocated"), "{refused}");
}

#[tokio::test]
async fn a_dry_run_value_other_than_all_is_refused_as_kube_apiserver_refuses_it() {
    let server = TestServer::in_memory().await;
    let map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app"}});
    let (status, answer) =
        k8s(&server, Method::POST, "/api/v1/namespaces/default/configmaps?dryRun=Server", Some(("application/json", map))).await;
    assert_eq!((status, answer["reason"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("Invalid")), "{answer}");
    assert_eq!(
        answer["message"],
        r#"CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"Server"}: supported values: "All""#
    );
    assert_eq!(answer["details"]["causes"][0]["reason"], "FieldValueNotSupported");
    let options = json!({"kind": "DeleteOptions", "dryRun": ["all"]});
    let (status, answer) =
        k8s(&server, Method::DELETE, "/api/v1/namespaces/default/configmaps/app", Some(("application/json", options))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(answer["message"].as_str().unwrap().starts_with("DeleteOptions.meta.k8s.io"), "{answer}");

    let native = json!({"kind": "ConfigMap", "metadata": {"name": "app"}});
    let (status, answer) = server.post("/api/v1/namespaces/default/configmaps?dry_run=yes", native).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert_eq!(answer["error"]["details"][0]["field"], "dry_run", "{answer}");
    assert_eq!(server.get("/api/v1/namespaces/default/configmaps/app").await.0, StatusCode::NOT_FOUND);
}
