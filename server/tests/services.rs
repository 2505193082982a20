//! Services' cluster IPs and node ports through the API, on the store under test (memory,
//! or etcd when `SHEPHERD_TEST_ETCD` is set): allocated, requested, refused with 422 when out
//! of range or taken, kept on update and immutable; the same after a restart of a durable
//! server, and through two servers on one etcd at once.

mod common;

use common::TestServer;
use reqwest::StatusCode;
use serde_json::{Value, json};
use server::Config;
use server::service_addresses::ServiceRanges;
use shepherd_testing::Etcd;

const SERVICES: &str = "/api/v1/namespaces/default/services";

fn service(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["selector"] = json!({"app": name});
    if spec.get("ports").is_none() {
        spec["ports"] = json!([{"port": 80, "target_port": 8080}]);
    }
    json!({"kind": "Service", "metadata": {"name": name}, "spec": spec})
}

/// A small range, so that its edges are easy to name.
fn small_ranges() -> ServiceRanges {
    ServiceRanges::parse("10.96.0.0/24", "30000-30099", &[]).unwrap()
}

fn refusal(answer: &Value) -> (String, String) {
    let detail = &answer["error"]["details"][0];
    (detail["field"].as_str().unwrap_or_default().to_string(), detail["message"].as_str().unwrap_or_default().to_string())
}

#[tokio::test]
async fn cluster_ips_and_node_ports_are_allocated_checked_and_kept() {
    let server = TestServer::start(Config { service_ranges: small_ranges(), ..Config::in_memory() }).await;
    let (status, web) = server.post(SERVICES, service("web", json!({}))).await;
    assert_eq!(status, StatusCode::CREATED, "{web}");
    assert_eq!((web["spec"]["cluster_ip"].as_str(), web["spec"]["type"].as_str()), (Some("10.96.0.17"), Some("ClusterIP")));
    let (_, shop) = server.post(SERVICES, service("shop", json!({"type": "NodePort"}))).await;
    assert_eq!((shop["spec"]["cluster_ip"].as_str(), shop["spec"]["ports"][0]["node_port"].as_i64()), (Some("10.96.0.18"), Some(30016)));
    let (_, headless) = server.post(SERVICES, service("db", json!({"cluster_ip": "None"}))).await;
    assert_eq!(headless["spec"]["cluster_ip"], "None");
    let (status, asked) = server
        .post(
            SERVICES,
            service("asked", json!({"cluster_ip": "10.96.0.5", "type": "NodePort", "ports": [{"port": 80, "node_port": 30000}]})),
        )
        .await;
    assert_eq!(
        (status, asked["spec"]["cluster_ip"].as_str(), asked["spec"]["ports"][0]["node_port"].as_i64()),
        (StatusCode::CREATED, Some("10.96.0.5"), Some(30000))
    );

    let refused = [
        (json!({"cluster_ip": "10.96.0.5"}), "spec.cluster_ip", "failed to allocate IP 10.96.0.5: provided IP is already allocated"),
        (json!({"cluster_ip": "10.97.0.5"}), "spec.cluster_ip", "The range of valid IPs is 10.96.0.0/24"),
        (
            json!({"type": "NodePort", "ports": [{"port": 80, "node_port": 30000}]}),
            "spec.ports[0].node_port",
            "provided port is already allocated",
        ),
        (
            json!({"type": "NodePort", "ports": [{"port": 80, "node_port": 32000}]}),
            "spec.ports[0].node_port",
            "The range of valid ports is 30000-30099",
        ),
        (json!({"ports": [{"port": 80, "node_port": 30050}]}), "spec.ports[0].node_port", "may not be used when `type` is 'ClusterIP'"),
        (json!({"type": "NodePort", "cluster_ip": "None"}), "spec.cluster_ip", "may not be set to 'None' for NodePort services"),
    ];
    for (spec, field, message) in refused {
        let (status, answer) = server.post(SERVICES, service("refused", spec.clone())).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{spec}: {answer}");
        let (got_field, got_message) = refusal(&answer);
        assert_eq!(got_field, field, "{answer}");
        assert!(got_message.contains(message), "{spec}: {answer}");
    }
    assert_eq!(server.get(&format!("{SERVICES}/refused")).await.0, StatusCode::NOT_FOUND, "a refused create stores nothing");

    // A manifest applied again without the allocations keeps them; the selector may change.
    let mut again = service("shop", json!({"type": "NodePort"}));
    again["spec"]["selector"] = json!({"app": "shop", "tier": "front"});
    let (status, kept) = server.put(&format!("{SERVICES}/shop"), again).await;
    assert_eq!(status, StatusCode::OK, "{kept}");
    assert_eq!((kept["spec"]["cluster_ip"].as_str(), kept["spec"]["ports"][0]["node_port"].as_i64()), (Some("10.96.0.18"), Some(30016)));
    assert_eq!(kept["spec"]["selector"]["tier"], "front");

    let (status, answer) = server.put(&format!("{SERVICES}/shop"), service("shop", json!({"cluster_ip": "10.96.0.40"}))).await;
    assert_eq!((status, refusal(&answer)), (StatusCode::UNPROCESSABLE_ENTITY, ("spec.cluster_ip".into(), "field is immutable".into())));

    // Back to ClusterIP gives the node port back, for another Service to take.
    let (_, back) = server.put(&format!("{SERVICES}/shop"), service("shop", json!({"type": "ClusterIP"}))).await;
    assert_eq!((back["spec"]["type"].as_str(), back["spec"]["ports"][0].get("node_port")), (Some("ClusterIP"), None), "{back}");
    let (status, taker) =
        server.post(SERVICES, service("taker", json!({"type": "NodePort", "ports": [{"port": 80, "node_port": 30016}]}))).await;
    assert_eq!(status, StatusCode::CREATED, "{taker}");
    // And ClusterIP to NodePort allocates one.
    let (_, web) = server.put(&format!("{SERVICES}/web"), service("web", json!({"type": "NodePort"}))).await;
    assert_eq!(web["spec"]["ports"][0]["node_port"].as_i64(), Some(30017), "{web}");

    // A deleted Service's address is free again.
    assert_eq!(server.delete(&format!("{SERVICES}/asked")).await.0, StatusCode::OK);
    let (status, reused) = server.post(SERVICES, service("reused", json!({"cluster_ip": "10.96.0.5"}))).await;
    assert_eq!(status, StatusCode::CREATED, "{reused}");
    server.stop().await;
}

/// A Service as a cluster writes it back (the defaults kube-apiserver fills in) applies under
/// `/k8s` and reads back with the same values; what Shepherd's proxy does not do is refused,
/// and ports given twice are Kubernetes' `Duplicate value`.
#[tokio::test]
async fn a_service_exported_from_a_cluster_applies_and_duplicate_ports_are_refused_in_kubernetes_words() {
    let server = TestServer::start(Config { service_ranges: small_ranges(), ..Config::in_memory() }).await;
    let post = |body: Value| {
        let request = server.bare(reqwest::Method::POST, "/k8s/api/v1/namespaces/default/services").json(&body);
        async move {
            let response = request.send().await.expect("the server answers");
            (response.status(), response.json::<Value>().await.expect("a JSON answer"))
        }
    };
    let exported = json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "front"},
        "spec": {
            "type": "NodePort", "selector": {"app": "front"},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
            "sessionAffinity": "None", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster", "externalTrafficPolicy": "Cluster"
        }
    });
    let (status, created) = post(exported).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let spec = &created["spec"];
    assert_eq!(
        (&spec["sessionAffinity"], &spec["ipFamilyPolicy"], &spec["ipFamilies"][0], &spec["ports"][0]["protocol"]),
        (&json!("None"), &json!("SingleStack"), &json!("IPv4"), &json!("TCP"))
    );

    let (status, answer) =
        post(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "sticky"}, "spec": {"sessionAffinity": "ClientIP", "ports": [{"port": 80}]}}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("spec.sessionAffinity: Unsupported"), "{answer}");

    let (status, answer) =
        post(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "twice"}, "spec": {"ports": [{"name": "a", "port": 80}, {"name": "b", "port": 80}, {"port": 81}]}}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(message.contains(r#"spec.ports[1]: Duplicate value: {"port":80,"protocol":"TCP"}"#), "{message}");
    assert!(message.contains("spec.ports[2].name: Required value"), "{message}");
    let reasons: Vec<&str> = answer["details"]["causes"].as_array().unwrap().iter().filter_map(|c| c["reason"].as_str()).collect();
    assert!(reasons.contains(&"FieldValueDuplicate"), "{answer}");
    server.stop().await;
}

/// A patch that takes a Service from NodePort back to ClusterIP under `/k8s` gives its node
/// ports back, as kube-apiserver does when they are the ones it holds; a node port the patch
/// changes stays and is refused.
#[tokio::test]
async fn a_k8s_patch_back_to_cluster_ip_gives_the_node_ports_back() {
    let server = TestServer::start(Config { service_ranges: small_ranges(), ..Config::in_memory() }).await;
    let send = |method: reqwest::Method, path: &str, body: Value| {
        let media_type = if method == reqwest::Method::PATCH { "application/merge-patch+json" } else { "application/json" };
        let request = server.bare(method, path).header("content-type", media_type).body(body.to_string());
        async move {
            let response = request.send().await.expect("the server answers");
            (response.status(), response.json::<Value>().await.expect("a JSON answer"))
        }
    };
    let path = "/k8s/api/v1/namespaces/default/services";
    for name in ["back", "moved"] {
        let body = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}});
        let (status, created) = send(reqwest::Method::POST, path, body).await;
        assert!(status == StatusCode::CREATED && created["spec"]["ports"][0]["nodePort"].is_number(), "{created}");
    }

    let (status, back) = send(reqwest::Method::PATCH, &format!("{path}/back"), json!({"spec": {"type": "ClusterIP"}})).await;
    assert_eq!(status, StatusCode::OK, "{back}");
    assert_eq!((&back["spec"]["type"], back["spec"]["ports"][0].get("nodePort")), (&json!("ClusterIP"), None), "{back}");

    let changed = json!({"spec": {"type": "ClusterIP", "ports": [{"port": 80, "nodePort": 30099}]}});
    let (status, refused) = send(reqwest::Method::PATCH, &format!("{path}/moved"), changed).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("spec.ports[0].nodePort"), "{refused}");
    server.stop().await;
}

/// The taken addresses are read from the stored Services, so a restarted server knows them.
#[tokio::test]
async fn a_restarted_server_never_gives_an_address_twice() {
    let dir = tempfile::tempdir().unwrap();
    let durable = || Config { service_ranges: small_ranges(), ..Config::durable(dir.path()) };
    let first = TestServer::start(durable()).await;
    let (_, a) = first.post(SERVICES, service("a", json!({"type": "NodePort"}))).await;
    first.stop().await;
    let second = TestServer::start(durable()).await;
    let (_, b) = second.post(SERVICES, service("b", json!({"type": "NodePort"}))).await;
    assert_eq!((a["spec"]["cluster_ip"].as_str(), b["spec"]["cluster_ip"].as_str()), (Some("10.96.0.17"), Some("10.96.0.18")));
    assert_eq!((a["spec"]["ports"][0]["node_port"].as_i64(), b["spec"]["ports"][0]["node_port"].as_i64()), (Some(30016), Some(30017)));
    second.stop().await;
}

/// Two servers on one etcd create Services at once, each from a cache without the other's:
/// the Services' list guard makes the later one allocate again, so no address is given twice.
#[tokio::test]
async fn two_servers_on_one_etcd_never_give_one_address_twice() {
    let etcd = Etcd::start(1).await;
    let on_etcd = || {
        let settings = server::store::EtcdSettings {
            endpoints: etcd.endpoints(),
            prefix: "/services".into(),
            compaction_interval: std::time::Duration::ZERO,
        };
        Config { etcd: Some(settings), run_scheduler: false, service_ranges: small_ranges(), ..Config::in_memory() }
    };
    let (a, b) = (TestServer::start(on_etcd()).await, TestServer::start(on_etcd()).await);
    let mut addresses = Vec::new();
    for trial in 0..5 {
        let (left, right) = (
            service(&format!("left-{trial}"), json!({"type": "NodePort"})),
            service(&format!("right-{trial}"), json!({"type": "NodePort"})),
        );
        let ((left_status, left), (right_status, right)) = tokio::join!(a.post(SERVICES, left), b.post(SERVICES, right));
        assert_eq!((left_status, right_status), (StatusCode::CREATED, StatusCode::CREATED), "{left} {right}");
        for created in [left, right] {
            addresses.push((
                created["spec"]["cluster_ip"].as_str().unwrap().to_string(),
                created["spec"]["ports"][0]["node_port"].as_i64().unwrap(),
            ));
        }
    }
    let ips: std::collections::HashSet<&String> = addresses.iter().map(|(ip, _)| ip).collect();
    let ports: std::collections::HashSet<i64> = addresses.iter().map(|(_, port)| *port).collect();
    assert_eq!((ips.len(), ports.len()), (10, 10), "{addresses:?}");
    a.stop().await;
    b.stop().await;
}

/// A Service's name is a DNS-1035 label (Kubernetes' `ValidateServiceName`), since it becomes
/// a DNS name and its pods' variables: the names an outside tester got created are a 422 in
/// kube-apiserver's words through `/k8s`, and in the native API, with nothing stored.
#[tokio::test]
async fn a_service_name_that_is_no_dns_1035_label_is_a_422_in_kubernetes_words() {
    const RULE: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic \
                        character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for \
                        validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
    let server = TestServer::in_memory().await;
    let long = "s".repeat(64);
    for (name, words) in [
        ("a.b", format!(r#"metadata.name: Invalid value: "a.b": {RULE}"#)),
        ("1abc", format!(r#"metadata.name: Invalid value: "1abc": {RULE}"#)),
        ("web.default", format!(r#"metadata.name: Invalid value: "web.default": {RULE}"#)),
        (&long, format!(r#"metadata.name: Invalid value: "{long}": must be no more than 63 characters"#)),
    ] {
        let body = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": {"ports": [{"port": 80}]}});
        let request = server.bare(reqwest::Method::POST, "/k8s/api/v1/namespaces/default/services").json(&body);
        let response = request.send().await.expect("the server answers");
        let (status, answer) = (response.status(), response.json::<Value>().await.expect("a JSON answer"));
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
        assert_eq!(answer["message"], format!("Service {name:?} is invalid: {words}"), "{answer}");
        assert_eq!(answer["details"]["causes"][0]["reason"], "FieldValueInvalid", "{answer}");

        let (status, answer) = server.post(SERVICES, service(name, json!({}))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
        assert_eq!(refusal(&answer).0, "metadata.name", "{answer}");
    }
    let (status, list) = server.get(SERVICES).await;
    assert_eq!((status, list["items"].as_array().map(Vec::len)), (StatusCode::OK, Some(0)), "{list}");
    server.stop().await;
}
