//! The REST contract against a real server on 127.0.0.1:0: the async create→schedule→bind
//! pipeline, the binding CAS, every kind of bad input, updates, selectors and visibility
//! of why a pod is Pending.

mod common;

use std::time::Duration;

use common::{TestServer, add_node, eventually, pod};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use server::Config;

const GI: i64 = 1 << 30;

#[tokio::test]
async fn a_created_pod_is_pending_at_once_then_bound_with_events() {
    let server = TestServer::in_memory().await;
    add_node(&server, "node-1", 4000, 8 * GI, 110).await;
    let (status, created) = server.post("/api/v1/pods", pod("web-0", 250, 64 << 20)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["status"]["phase"], "Pending");
    assert_eq!(created["spec"]["node_name"], "");
    assert_eq!(created["metadata"]["namespace"], "default");
    assert!(created["metadata"]["uid"].as_str().is_some_and(|u| !u.is_empty()));
    assert!(created["metadata"]["created_at"].is_string());
    assert!(created["metadata"]["resource_version"].as_u64().unwrap() > 0);

    let bound = eventually(&server.client, Duration::from_secs(5), "the pod to be bound", || async {
        let (_, p) = server.get("/api/v1/namespaces/default/pods/web-0").await;
        (p["spec"]["node_name"] == "node-1").then_some(p)
    })
    .await;
    let scheduled = bound["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "PodScheduled").unwrap();
    assert_eq!(scheduled["status"], "True");

    let (_, events) = server.get("/api/v1/namespaces/default/events?field_selector=involved_object.name=web-0").await;
    let reasons: Vec<&str> = events["items"].as_array().unwrap().iter().map(|e| e["reason"].as_str().unwrap()).collect();
    assert!(reasons.contains(&"Created") && reasons.contains(&"Scheduled"), "{reasons:?}");

    let (status, explanation) = server.get("/api/v1/namespaces/default/pods/web-0/scheduling").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(explanation["selected"], "node-1");
    assert_eq!(explanation["nodes"][0]["node"], "node-1");

    let (_, metrics) = server.get("/metrics").await;
    let metrics = metrics.as_str().unwrap();
    assert!(metrics.contains("shepherd_scheduler_attempts_total{result=\"scheduled\"} 1"), "{metrics}");
    assert!(metrics.contains("route=\"/api/v1/pods\",code=\"201\""), "{metrics}");
    server.stop().await;
}

#[tokio::test]
async fn binding_is_a_compare_and_swap() {
    let server = TestServer::start(Config { run_scheduler: false, ..Config::in_memory() }).await;
    add_node(&server, "node-1", 1000, GI, 10).await;
    add_node(&server, "node-2", 1000, GI, 10).await;
    server.post("/api/v1/namespaces/default/pods", pod("a", 100, 1 << 20)).await;
    let binding = |node: &str| json!({"kind": "Binding", "target": {"kind": "Node", "name": node}});
    let (status, bound) = server.post("/api/v1/namespaces/default/pods/a/binding", binding("node-1")).await;
    assert_eq!(status, StatusCode::CREATED, "{bound}");
    assert_eq!(bound["spec"]["node_name"], "node-1");
    let (status, err) = server.post("/api/v1/namespaces/default/pods/a/binding", binding("node-2")).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(err["error"]["reason"], "Conflict");
    assert!(err["error"]["message"].as_str().unwrap().contains("already bound to node node-1"), "{err}");

    server.post("/api/v1/namespaces/default/pods", pod("big", 2000, 1 << 20)).await;
    let (status, err) = server.post("/api/v1/namespaces/default/pods/big/binding", binding("node-2")).await;
    assert_eq!(status, StatusCode::CONFLICT, "a bind never oversells a node: {err}");
    assert!(err["error"]["message"].as_str().unwrap().contains("no room"), "{err}");

    let (status, err) = server.post("/api/v1/namespaces/default/pods/big/binding", json!({"target": {"name": ""}})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(err["error"]["details"][0]["field"], "target.name");
    let (status, _) = server.post("/api/v1/namespaces/default/pods/missing/binding", binding("node-1")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    server.stop().await;
}

#[tokio::test]
async fn validation_reports_every_field_and_stores_nothing() {
    let server = TestServer::in_memory().await;
    let bad = json!({
        "kind": "Pod",
        "metadata": {"name": "Bad_Name"},
        "spec": {
            "containers": [
                {"name": "web", "image": "", "ports": [{"container_port": 70000}], "resources": {"cpu": -1}},
                {"name": "web", "image": "minimal"}
            ],
            "restart_policy": "Sometimes"
        }
    });
    let (status, err) = server.post("/api/v1/pods", bad).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert_eq!(err["error"]["reason"], "Invalid");
    let fields: Vec<&str> = err["error"]["details"].as_array().unwrap().iter().map(|d| d["field"].as_str().unwrap()).collect();
    for expected in [
        "metadata.name",
        "spec.containers[0].image",
        "spec.containers[0].ports[0].container_port",
        "spec.containers[0].resources.cpu",
        "spec.containers[1].name",
        "spec.restart_policy",
    ] {
        assert!(fields.contains(&expected), "{expected} missing from {fields:?}");
    }
    let (_, pods) = server.get("/api/v1/pods").await;
    assert_eq!(pods["items"].as_array().unwrap().len(), 0, "nothing half-written");
    let (_, events) = server.get("/api/v1/namespaces/default/events").await;
    assert_eq!(events["items"].as_array().unwrap().len(), 0, "no Created event either");

    // A name is limited as in Kubernetes, to 253 characters in all, and a refusal for its
    // length says the limit.
    let (status, created) = server.post("/api/v1/pods", pod(&"b".repeat(64), 1, 1)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let (status, err) = server.post("/api/v1/pods", pod(&"b".repeat(254), 1, 1)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert_eq!(err["error"]["details"][0]["message"], "must be at most 253 characters, got 254", "{err}");
    server.stop().await;
}

#[tokio::test]
async fn malformed_bodies_get_json_errors_with_line_and_column() {
    let server = TestServer::in_memory().await;
    let (status, err) = server.raw(Method::POST, "/api/v1/pods", "{\n  \"kind\": \"Pod\",\n  \"metadata\": {\"name\": \"a\",}\n}").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let message = err["error"]["message"].as_str().unwrap();
    assert!(message.contains("line 3, column"), "{message}");

    let (status, err) = server.raw(Method::POST, "/api/v1/pods", r#"{"kind": "Sheep", "metadata": {"name": "dolly"}}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(err["error"]["message"].as_str().unwrap().contains("unknown kind \"Sheep\""), "{err}");

    let (status, err) = server.raw(Method::POST, "/api/v1/pods", r#"{"kind": "Service", "metadata": {"name": "s"}}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(err["error"]["message"].as_str().unwrap().contains("this path takes a Pod"), "{err}");

    let big = format!("{{\"kind\": \"Pod\", \"metadata\": {{\"name\": \"a\", \"labels\": {{\"x\": \"{}\"}}}}}}", "y".repeat(3_200_000));
    let (status, err) = server.raw(Method::POST, "/api/v1/pods", big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(err["error"]["reason"], "PayloadTooLarge");

    let plain = server.client.request(Method::POST, "/api/v1/pods").header("content-type", "text/plain").body(pod("p", 1, 1).to_string());
    let response = plain.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE, "a form or text post from a web page is refused");
    let preflight = server
        .client
        .request(Method::OPTIONS, "/api/v1/pods")
        .header("origin", "http://evil.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert!(preflight.headers().get("access-control-allow-origin").is_none(), "no CORS for foreign origins");

    let (status, err) = server.get("/api/v1/sheep").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(err["error"]["reason"], "NotFound");
    let (status, err) = server.request(Method::PATCH, "/api/v1/pods", None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(err["error"]["reason"], "MethodNotAllowed");
    let (status, err) = server.get("/api/v1/pods?watch=maybe").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(err["error"]["message"].as_str().unwrap().contains("invalid boolean \"maybe\""), "{err}");
    // Booleans as Kubernetes reads them: `watch=1` streams.
    let stream = reqwest::get(format!("{}/api/v1/pods?watch=1", server.url)).await.unwrap();
    assert_eq!(stream.headers()["content-type"], "text/event-stream", "{stream:?}");
    drop(stream);
    let (status, err) = server.get("/api/v1/pods?watch=true&resource_version=-1").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(err["error"]["message"].as_str().unwrap().contains("invalid resource version \"-1\""), "{err}");
    let (status, list) = server.get("/api/v1/pods?resource_version=").await;
    assert_eq!(status, StatusCode::OK, "an empty resource version is unset: {list}");
    let (status, err) = server.get("/api/v1/pods?label_selector=app%3E3").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    let (status, _) = server.get("/api/v1/namespaces/default/pods/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    server.stop().await;
}

/// The dashboard sends a manifest as the user wrote it; kube-apiserver takes YAML too.
#[tokio::test]
async fn a_yaml_body_creates_and_replaces_and_bad_yaml_says_where() {
    // No scheduler, so that nothing else changes the pod between its create and replace.
    let server = TestServer::start(Config { run_scheduler: false, ..Config::in_memory() }).await;
    let yaml = |method: Method, path: &str, body: &str| {
        server.bare(method, path).header("content-type", "application/yaml").body(body.to_string())
    };
    let manifest = "kind: Pod\nmetadata:\n  name: from-yaml\nspec:\n  containers:\n    - name: main\n      image: nginx\n";
    let (status, created) = server.answer(yaml(Method::POST, "/api/v1/namespaces/default/pods", manifest)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["spec"]["containers"][0]["image"], "nginx", "{created}");

    let version = created["metadata"]["resource_version"].as_u64().unwrap();
    let labelled =
        manifest.replace("  name: from-yaml\n", &format!("  name: from-yaml\n  labels: {{app: web}}\n  resource_version: {version}\n"));
    let (status, replaced) = server.answer(yaml(Method::PUT, "/api/v1/namespaces/default/pods/from-yaml", &labelled)).await;
    assert_eq!(status, StatusCode::OK, "{replaced}");
    assert_eq!(replaced["metadata"]["labels"]["app"], "web", "{replaced}");

    let (status, error) = server.answer(yaml(Method::POST, "/api/v1/pods", "kind: Pod\nmetadata:\n  name: [broken\n")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("the body is not a valid YAML object: line 3, column "), "{message}");

    let (status, error) = server.answer(yaml(Method::POST, "/api/v1/pods", &format!("{manifest}---\n{manifest}"))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("holds 2 YAML documents"), "{error}");
    server.stop().await;
}

/// Aliases let a few kilobytes of YAML stand for megabytes of JSON; what JSON sent whole
/// would get, a 413, the YAML gets too, and nothing is stored.
#[tokio::test]
async fn a_yaml_body_whose_aliases_pass_the_body_limit_is_a_413() {
    let server = TestServer::in_memory().await;
    let pod = |scalar: usize, aliases: usize| {
        let command = format!("[&s {}{}]", "x".repeat(scalar), ", *s".repeat(aliases));
        format!("kind: Pod\nmetadata:\n  name: big\nspec:\n  containers:\n    - name: main\n      image: nginx\n      command: {command}\n")
    };
    // 1 KB copied 4,000 times: the reader stops at 3 MiB of copies. 100 bytes copied 30,700
    // times: within what the reader lets aliases copy, but the pod's JSON is over 3 MiB.
    for (scalar, aliases) in [(1_000, 4_000), (100, 30_700)] {
        let body = pod(scalar, aliases);
        assert!(body.len() < 128 << 10, "{}", body.len());
        let request = server.bare(Method::POST, "/api/v1/namespaces/default/pods").header("content-type", "application/yaml").body(body);
        let (status, answer) = server.answer(request).await;
        assert_eq!(
            (status, answer["error"]["reason"].as_str()),
            (StatusCode::PAYLOAD_TOO_LARGE, Some("PayloadTooLarge")),
            "{scalar} × {aliases}"
        );
    }
    let (_, pods) = server.get("/api/v1/pods").await;
    assert_eq!(pods["items"].as_array().map(Vec::len), Some(0), "{pods}");
    server.stop().await;
}

#[tokio::test]
async fn updates_are_compare_and_swap_and_never_touch_status_or_node() {
    let server = TestServer::start(Config { run_scheduler: false, ..Config::in_memory() }).await;
    let deployment: Value = serde_json::from_str(include_str!("../../examples/deployment.json")).unwrap();
    let (status, created) = server.post("/api/v1/namespaces/default/deployments", deployment).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    // The deployment controller writes the status once it has created the pods.
    let created = eventually(&server.client, Duration::from_secs(5), "the deployment's status", || async {
        let (_, d) = server.get("/api/v1/namespaces/default/deployments/web").await;
        (d["status"]["replicas"] == 3 && d["status"]["observed_generation"] == 1).then_some(d)
    })
    .await;
    let rv = created["metadata"]["resource_version"].as_u64().unwrap();

    let mut changed = created.clone();
    changed["spec"]["replicas"] = json!(5);
    changed["metadata"]["resource_version"] = json!(rv);
    let (status, updated) = server.put("/api/v1/namespaces/default/deployments/web", changed.clone()).await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(updated["spec"]["replicas"], 5);
    assert_eq!(updated["metadata"]["generation"], 2);

    let (status, err) = server.put("/api/v1/namespaces/default/deployments/web", changed).await;
    assert_eq!(status, StatusCode::CONFLICT, "a stale resource_version loses");
    assert!(err["error"]["message"].as_str().unwrap().contains(&format!("you sent resource_version {rv}")), "{err}");

    let mut reselected = updated.clone();
    reselected["spec"]["selector"] = json!({"app": "other"});
    reselected["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    reselected["metadata"].as_object_mut().unwrap().remove("resource_version");
    let (status, err) = server.put("/api/v1/namespaces/default/deployments/web", reselected).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert_eq!(err["error"]["details"][0]["field"], "spec.selector", "{err}");

    let (status, scale) = server.put("/api/v1/namespaces/default/deployments/web/scale", json!({"spec": {"replicas": 1}})).await;
    assert_eq!((status, scale["spec"]["replicas"].clone()), (StatusCode::OK, json!(1)));
    let (_, scale) = server.get("/api/v1/namespaces/default/deployments/web/scale").await;
    assert_eq!(scale["spec"]["replicas"], 1);

    add_node(&server, "node-1", 1000, GI, 10).await;
    server.post("/api/v1/pods", pod("p", 10, 1)).await;
    server.post("/api/v1/namespaces/default/pods/p/binding", json!({"target": {"name": "node-1"}})).await;
    let (_, stored) = server.get("/api/v1/namespaces/default/pods/p").await;
    let mut edit = stored.clone();
    edit["metadata"]["labels"]["tier"] = json!("frontend");
    edit["spec"]["node_name"] = json!("");
    edit["status"]["phase"] = json!("Running");
    let (status, updated) = server.put("/api/v1/namespaces/default/pods/p", edit).await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(updated["metadata"]["labels"]["tier"], "frontend");
    assert_eq!(updated["spec"]["node_name"], "node-1");
    assert_eq!(updated["status"]["phase"], "Pending");
    let mut new_image = updated.clone();
    new_image["spec"]["containers"][0]["image"] = json!("other");
    let (status, err) = server.put("/api/v1/namespaces/default/pods/p", new_image).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "no container would run the new image: {err}");
    let mut moved = updated.clone();
    moved["spec"]["node_name"] = json!("elsewhere");
    let (status, err) = server.put("/api/v1/namespaces/default/pods/p", moved).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "a bound pod does not move: {err}");

    let mut running = updated.clone();
    running["status"]["phase"] = json!("Running");
    running["status"]["pod_ip"] = json!("10.20.0.2");
    let (status, after) = server.put("/api/v1/namespaces/default/pods/p/status", running).await;
    assert_eq!(status, StatusCode::OK, "{after}");
    assert_eq!(after["status"]["phase"], "Running");
    assert_eq!(after["metadata"]["labels"]["tier"], "frontend");
    // Reaching Running closes the seed's walk-through with an event, once.
    server.put("/api/v1/namespaces/default/pods/p/status", after.clone()).await;
    let (_, events) = server.get("/api/v1/namespaces/default/events").await;
    let running_events: Vec<&Value> =
        events["items"].as_array().unwrap().iter().filter(|e| e["reason"] == "Running" && e["involved_object"]["name"] == "p").collect();
    assert_eq!(running_events.len(), 1, "{events}");
    assert_eq!(running_events[0]["count"], 1);
    assert!(running_events[0]["message"].as_str().unwrap().contains("is running on node node-1, "), "{}", running_events[0]);
    assert!(running_events[0]["message"].as_str().unwrap().ends_with("ms after it was created"), "{}", running_events[0]);
    // Containers recreated: Pending, then Running again. The same event counts it, without
    // a time from creation (that time is the first start's).
    let mut again = after.clone();
    again["status"]["phase"] = json!("Pending");
    let (_, pending) = server.put("/api/v1/namespaces/default/pods/p/status", again).await;
    let mut again = pending.clone();
    again["status"]["phase"] = json!("Running");
    let (status, body) = server.put("/api/v1/namespaces/default/pods/p/status", again).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, events) = server.get("/api/v1/namespaces/default/events").await;
    let running_events: Vec<&Value> =
        events["items"].as_array().unwrap().iter().filter(|e| e["reason"] == "Running" && e["involved_object"]["name"] == "p").collect();
    assert_eq!(running_events.len(), 1, "{events}");
    assert_eq!(running_events[0]["count"], 2);
    assert_eq!(running_events[0]["message"], "Pod p is running again on node node-1");

    let (_, by_label) = server.get("/api/v1/pods?label_selector=tier%3Dfrontend").await;
    assert_eq!(by_label["items"].as_array().unwrap().len(), 1);
    let (_, none) = server.get("/api/v1/pods?label_selector=tier,tier%21%3Dfrontend").await;
    assert_eq!(none["items"].as_array().unwrap().len(), 0);
    let (_, on_node) = server.get("/api/v1/pods?field_selector=spec.node_name%3Dnode-1").await;
    assert_eq!(on_node["items"].as_array().unwrap().len(), 1);
    let (_, running) = server.get("/api/v1/pods?field_selector=status.phase%3DRunning").await;
    assert_eq!(running["items"].as_array().unwrap().len(), 1);

    // Bound to a Ready node: the delete is graceful, the pod stays Terminating for its agent.
    let (status, deleted) = server.delete("/api/v1/namespaces/default/pods/p").await;
    assert_eq!((status, deleted["metadata"]["name"].clone()), (StatusCode::OK, json!("p")));
    assert!(deleted["metadata"]["deletion_timestamp"].is_string(), "{deleted}");
    server.stop().await;
}

#[tokio::test]
async fn namespaces_must_exist_and_can_be_listed() {
    let server = TestServer::in_memory().await;
    let (status, err) = server.post("/api/v1/namespaces/shop/pods", pod("a", 1, 1)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{err}");
    assert!(err["error"]["message"].as_str().unwrap().contains("Namespace \"shop\""), "{err}");
    let (status, _) = server.post("/api/v1/namespaces", json!({"metadata": {"name": "shop"}})).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, created) = server.post("/api/v1/namespaces/shop/pods", pod("a", 1, 1)).await;
    assert_eq!((status, created["metadata"]["namespace"].clone()), (StatusCode::CREATED, json!("shop")));
    let (_, list) = server.get("/api/v1/namespaces").await;
    let names: Vec<&str> = list["items"].as_array().unwrap().iter().map(|n| n["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["default", "kube-system", "shop"], "kube-system holds the control plane's leases");
    let (status, _) = server.delete("/api/v1/namespaces/shop").await;
    assert_eq!(status, StatusCode::CONFLICT, "a namespace with pods is not deleted");
    let (_, info) = server.get("/api/v1/info").await;
    assert_eq!(info["pods"], 1);
    assert_eq!(info["store"], shepherd_testing::store_under_test());
    server.stop().await;
}

#[tokio::test]
async fn an_unschedulable_pod_says_why_with_one_growing_event() {
    let server = TestServer::in_memory().await;
    add_node(&server, "small", 1000, GI, 10).await;
    server.post("/api/v1/pods", pod("huge", 500, 64 * GI)).await;
    let condition = eventually(&server.client, Duration::from_secs(5), "PodScheduled=False", || async {
        let (_, p) = server.get("/api/v1/namespaces/default/pods/huge").await;
        p["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled" && c["status"] == "False").cloned())
    })
    .await;
    assert_eq!(condition["reason"], "Unschedulable");
    assert!(condition["message"].as_str().unwrap().contains("0/1 nodes are available: 1 Insufficient memory"), "{condition}");

    let failed_events = || async {
        let (_, events) = server.get("/api/v1/namespaces/default/events?field_selector=reason%3DFailedScheduling").await;
        events["items"].as_array().unwrap().clone()
    };
    let first = eventually(&server.client, Duration::from_secs(5), "a FailedScheduling event", || async {
        let events = failed_events().await;
        (events.len() == 1).then(|| events[0].clone())
    })
    .await;
    assert_eq!(first["type"], "Warning");
    assert_eq!(first["count"], 1);

    // A new node that is still too small: a cluster change, so the pod is retried after its backoff.
    add_node(&server, "small-2", 1000, GI, 10).await;
    let bumped = eventually(&server.client, Duration::from_secs(8), "the event's count to grow", || async {
        let events = failed_events().await;
        (events.len() == 1 && events[0]["count"].as_u64() >= Some(2)).then(|| events[0].clone())
    })
    .await;
    assert!(bumped["message"].as_str().unwrap().contains("0/2 nodes are available"), "{bumped}");
    assert_ne!(bumped["last_timestamp"], first["last_timestamp"]);

    let (_, explanation) = server.get("/api/v1/namespaces/default/pods/huge/scheduling").await;
    assert_eq!(explanation["selected"], Value::Null);
    assert_eq!(explanation["nodes"].as_array().unwrap().len(), 2);

    // A node that fits: the pod is bound.
    add_node(&server, "big", 4000, 128 * GI, 10).await;
    eventually(&server.client, Duration::from_secs(15), "the pod to be bound to big", || async {
        let (_, p) = server.get("/api/v1/namespaces/default/pods/huge").await;
        (p["spec"]["node_name"] == "big").then_some(())
    })
    .await;
    server.stop().await;
}

#[tokio::test]
async fn health_info_metrics_and_openapi_answer() {
    let server = TestServer::in_memory().await;
    assert_eq!(server.get("/healthz").await, (StatusCode::OK, json!("ok")));
    assert_eq!(server.get("/readyz").await, (StatusCode::OK, json!("ok")));
    let (status, doc) = server.get("/api/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    assert!(doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/binding"]["post"].is_object());
    let (_, info) = server.get("/api/v1/info").await;
    assert_eq!(info["scheduler_profile"], "spread");
    assert_eq!(info["auth_required"], false);
    server.stop().await;
}

#[tokio::test]
async fn logs_come_from_the_nodes_agent_and_registration_keeps_the_cordon() {
    // A stand-in for the agent's log API, on loopback.
    let agent = axum::Router::new().route(
        "/logs/{namespace}/{pod}",
        axum::routing::get(
            |axum::extract::Path((ns, pod)): axum::extract::Path<(String, String)>,
             axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>| async move {
                format!(
                    "log of {ns}/{pod} container={} tail={}\n",
                    q.get("container").cloned().unwrap_or_default(),
                    q.get("tail").cloned().unwrap_or_default()
                )
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, agent).await.unwrap() });

    let server = TestServer::start(Config { run_scheduler: false, ..Config::in_memory() }).await;
    let node = json!({"metadata": {"name": "node-1", "labels": {"zone": "a"}},
                      "status": {"capacity": {"cpu": 1000, "memory": GI, "pods": 10}, "agent_endpoint": endpoint}});
    assert_eq!(server.post("/api/v1/nodes", node.clone()).await.0, StatusCode::CREATED);
    server.post("/api/v1/nodes/node-1/cordon", json!({})).await;
    let (status, again) = server.post("/api/v1/nodes", node).await;
    assert_eq!(status, StatusCode::OK, "a second registration updates: {again}");
    assert_eq!(again["status"]["unschedulable"], true, "registration keeps the admin's cordon");
    assert_eq!(again["status"]["allocatable"]["cpu"], 1000, "allocatable defaults to capacity");

    server.post("/api/v1/pods", pod("web", 100, 1)).await;
    let (status, err) = server.get("/api/v1/namespaces/default/pods/web/log").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "an unscheduled pod has no logs: {err}");
    server.post("/api/v1/namespaces/default/pods/web/binding", json!({"target": {"name": "node-1"}})).await;
    let (status, text) = server.get("/api/v1/namespaces/default/pods/web/log?container=web&tail=5").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(text, json!("log of default/web container=web tail=5\n"));

    server.put("/api/v1/namespaces/default/pods/web/status", json!({"status": {"phase": "Running"}})).await;
    let (_, metrics) = server.get("/metrics").await;
    assert!(metrics.as_str().unwrap().contains("shepherd_pod_create_to_running_seconds_count 1"), "{metrics}");
    server.stop().await;
}

#[tokio::test]
async fn a_body_with_anything_after_its_json_is_refused() {
    let server = TestServer::in_memory().await;
    for tail in ["garbage", "{}", "}}}"] {
        let body =
            format!(r#"{{"kind":"Pod","metadata":{{"name":"trail"}},"spec":{{"containers":[{{"name":"c","image":"minimal"}}]}}}}{tail}"#);
        let (status, answer) = server.raw(reqwest::Method::POST, "/api/v1/namespaces/default/pods", body).await;
        assert_eq!(status, reqwest::StatusCode::BAD_REQUEST, "{tail}: {answer}");
    }
    assert_eq!(server.get("/api/v1/namespaces/default/pods/trail").await.0, reqwest::StatusCode::NOT_FOUND);
    server.stop().await;
}

#[tokio::test]
async fn lists_are_gzipped_for_a_client_that_accepts_it_and_watches_are_not() {
    let server = TestServer::start(Config::in_memory()).await;
    for i in 0..20 {
        server.post("/api/v1/pods", pod(&format!("p{i}"), 1, 1)).await;
    }
    let raw = reqwest::Client::builder().no_gzip().build().unwrap();
    let one = raw.get(format!("{}/api/v1/namespaces/default/pods/p0", server.url)).header("accept-encoding", "gzip").send().await.unwrap();
    assert!(one.headers().get("content-encoding").is_none(), "a small answer stays plain");
    let get = |path: &str| raw.get(format!("{}{path}", server.url)).header("accept-encoding", "gzip");
    let list = get("/api/v1/pods").send().await.unwrap();
    assert_eq!(list.headers().get("content-encoding").map(|v| v.to_str().unwrap()), Some("gzip"));
    let zipped = list.bytes().await.unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&zipped[..]), &mut text).unwrap();
    let plain: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(plain["items"].as_array().unwrap().len(), 20);
    assert!(text.len() > 8 * 1024, "the list is large enough to be compressed: {} bytes", text.len());
    assert!(zipped.len() * 4 < text.len(), "{} bytes gzipped from {}", zipped.len(), text.len());

    let unzipped = raw.get(format!("{}/api/v1/pods", server.url)).send().await.unwrap();
    assert!(unzipped.headers().get("content-encoding").is_none(), "no Accept-Encoding, no gzip");

    let watch = get("/api/v1/pods?watch=true").send().await.unwrap();
    assert!(watch.headers().get("content-encoding").is_none(), "an SSE stream is sent as it happens");
    server.stop().await;
}

#[tokio::test]
async fn every_write_with_a_body_refuses_unknown_fields_by_their_paths() {
    let server = TestServer::start(Config { run_scheduler: false, ..Config::in_memory() }).await;
    add_node(&server, "late", 4000, 8 * GI, 110).await;
    let (_, before) = server.get("/api/v1/nodes/late").await;
    let unknown = |answer: &Value| -> Vec<String> {
        answer["error"]["details"].as_array().into_iter().flatten().map(|d| d["field"].as_str().unwrap().to_string()).collect()
    };

    // A status without its `status` wrapper would have wiped the node's capacity and address.
    let (status, answer) = server.put("/api/v1/nodes/late/status", json!({"capacity": {"cpu": 4000}})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(unknown(&answer), ["capacity"]);
    assert!(answer["error"]["message"].as_str().unwrap().contains("unknown field \"capacity\""), "{answer}");
    assert_eq!(server.get("/api/v1/nodes/late").await.1, before, "the node is untouched");
    // Nor does a body of empty values, which no field check can tell from empty known ones.
    for empty in [json!({}), json!({"conditions": [], "capacity": {}, "agent_endpoint": ""})] {
        let (status, answer) = server.put("/api/v1/nodes/late/status", empty).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains("the body has no \"status\""), "{answer}");
        assert_eq!(server.get("/api/v1/nodes/late").await.1, before, "the node is untouched");
    }

    let mut bogus = pod("web", 100, 1 << 20);
    bogus["bogus"] = json!(1);
    bogus["spec"]["containers"][0]["colour"] = json!("red");
    let (status, answer) = server.post("/api/v1/pods", bogus.clone()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(unknown(&answer), ["bogus", "spec.containers[0].colour"], "each one, by its path");
    assert_eq!(server.post("/api/v1/namespaces/default/pods", bogus).await.0, StatusCode::BAD_REQUEST);

    let (status, created) = server.post("/api/v1/pods", pod("web", 100, 1 << 20)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let mut replaced = created.clone();
    replaced["metadata"]["lables"] = json!({"app": "web"});
    let (status, answer) = server.put("/api/v1/namespaces/default/pods/web", replaced).await;
    assert_eq!((status, unknown(&answer)), (StatusCode::BAD_REQUEST, vec!["metadata.lables".to_string()]), "{answer}");
    let (status, answer) =
        server.put("/api/v1/namespaces/default/pods/web/status", json!({"status": {"phase": "Running", "ready": true}})).await;
    assert_eq!((status, unknown(&answer)), (StatusCode::BAD_REQUEST, vec!["status.ready".to_string()]), "{answer}");
    let binding = json!({"kind": "Binding", "target": {"kind": "Node", "name": "late", "node": "late"}});
    let (status, answer) = server.post("/api/v1/namespaces/default/pods/web/binding", binding).await;
    assert_eq!((status, unknown(&answer)), (StatusCode::BAD_REQUEST, vec!["target.node".to_string()]), "{answer}");
    let (status, answer) = server.post("/api/v1/nodes/late/heartbeat", json!({"address": "10.0.0.9"})).await;
    assert_eq!((status, unknown(&answer)), (StatusCode::BAD_REQUEST, vec!["address".to_string()]), "{answer}");
    let (status, answer) = server.put("/api/v1/leases/late", json!({"metadata": {"name": "late"}, "spec": {"holder": "me"}})).await;
    assert_eq!((status, unknown(&answer)), (StatusCode::BAD_REQUEST, vec!["spec.holder".to_string()]), "{answer}");

    let deployment: Value = serde_json::from_str(include_str!("../../examples/deployment.json")).unwrap();
    assert_eq!(server.post("/api/v1/namespaces/default/deployments", deployment).await.0, StatusCode::CREATED);
    let (status, answer) = server.put("/api/v1/namespaces/default/deployments/web/scale", json!({"spec": {"replica": 3}})).await;
    assert_eq!((status, unknown(&answer)), (StatusCode::BAD_REQUEST, vec!["spec.replica".to_string()]), "{answer}");
    server.stop().await;
}

/// A query parameter the route does not take is a 400 that names it, as a field of a body
/// is: `labelSelector` (kubectl's spelling) must not silently list every pod, nor
/// `grace_period` delete with the default grace. A single object's read is no exception.
#[tokio::test]
async fn an_unknown_query_parameter_is_refused_by_name() {
    let server = TestServer::in_memory().await;
    server.post("/api/v1/pods", pod("web", 1, 1)).await;
    for (method, path, unknown) in [
        (Method::GET, "/api/v1/pods?labelSelector=app%3Dother", "labelSelector"),
        (Method::GET, "/api/v1/namespaces/default/pods?watch=false&colour=red", "colour"),
        (Method::DELETE, "/api/v1/namespaces/default/pods/web?grace_period=1", "grace_period"),
        (Method::GET, "/api/v1/namespaces/default/pods/web/log?lines=5", "lines"),
    ] {
        let (status, err) = server.request(method.clone(), path, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{method} {path}: {err}");
        let message = err["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("invalid query parameters: "), "{message}");
        assert!(message.contains(&format!("unknown field `{unknown}`, expected one of")), "{message}");
    }
    // A single object's read takes none, and says so rather than ignoring it.
    for path in [
        "/api/v1/namespaces/default/pods/web?foo=1",
        "/api/v1/namespaces/default/pods/web/status?foo=1",
        "/api/v1/namespaces/default/pods/web/scheduling?foo=1",
        "/api/v1/nodes/n1?foo=1",
    ] {
        let (status, err) = server.get(path).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {err}");
        assert_eq!(err["error"]["message"], "invalid query parameters: foo: unknown field `foo`, there are no fields", "{path}");
    }
    assert_eq!(server.get("/api/v1/namespaces/default/pods/web").await.0, StatusCode::OK);
    // Nothing was deleted by the refused request; the known parameters still work.
    let (status, list) = server.get("/api/v1/pods?label_selector=app%3Dweb&limit=5").await;
    assert_eq!((status, list["items"].as_array().map(Vec::len)), (StatusCode::OK, Some(1)), "{list}");
    server.stop().await;
}
