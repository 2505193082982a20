//! The Kubernetes-compatible API under `/k8s` against a real server on 127.0.0.1:0: discovery,
//! Kubernetes' shapes over the same store objects as the native API, the 422 for fields
//! Shepherd does not hold (on the scale subresource too), Table answers, watch lines (and the
//! 410 ERROR), merge and strategic patches, and Status errors.

mod common;

use std::time::Duration;

use common::{TestServer, add_node, open_watch, pod};
use futures::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use server::Config;

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// Sends a request as kubectl does (no Shepherd header): JSON body with `content_type`.
async fn call(server: &TestServer, method: Method, path: &str, body: Option<(&str, Value)>, accept: Option<&str>) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new().request(method, format!("{}{path}", server.url)).header("user-agent", "kubectl/v1.32.0");
    if let Some((content_type, body)) = body {
        request = request.header("content-type", content_type).body(body.to_string());
    }
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    let response = request.send().await.expect("the server answers");
    let status = response.status();
    let text = response.text().await.expect("a body");
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

async fn get(server: &TestServer, path: &str) -> (StatusCode, Value) {
    call(server, Method::GET, path, None, None).await
}

async fn post(server: &TestServer, path: &str, body: Value) -> (StatusCode, Value) {
    call(server, Method::POST, path, Some(("application/json", body)), None).await
}

fn k8s_pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "minimal", "ports": [{"containerPort": 80}],
            "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}]},
    })
}

fn assert_status(body: &Value, code: u16, reason: &str) {
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["apiVersion"], "v1", "{body}");
    assert_eq!(body["status"], "Failure", "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["reason"], reason, "{body}");
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
}

#[tokio::test]
async fn discovery_lists_the_resources_kubectl_needs() {
    let server = TestServer::in_memory().await;
    let (status, version) = get(&server, "/k8s/version").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!((version["major"].as_str(), version["minor"].as_str()), (Some("1"), Some("32")));
    // `kubectl get --raw /version` asks the server's root, whatever the kubeconfig's path.
    assert_eq!(get(&server, "/version").await, (StatusCode::OK, version.clone()));
    assert_eq!(get(&server, "/k8s/api").await.1["versions"], json!(["v1"]));
    assert_eq!(get(&server, "/k8s/apis").await.1["groups"][0]["preferredVersion"]["groupVersion"], "apps/v1");

    let (_, core) = get(&server, "/k8s/api/v1").await;
    let resources = core["resources"].as_array().unwrap();
    let find = |name: &str| resources.iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("{name} in {core}")).clone();
    for name in ["pods/log", "pods/status", "pods/binding", "nodes/status", "endpoints", "events", "services", "namespaces"] {
        find(name);
    }
    let pods = find("pods");
    assert_eq!(pods["shortNames"], json!(["po"]));
    assert_eq!(pods["singularName"], "pod");
    assert_eq!(pods["namespaced"], true);
    assert!(pods["verbs"].as_array().unwrap().contains(&json!("watch")));
    assert_eq!(find("nodes")["namespaced"], false);

    let (_, apps) = get(&server, "/k8s/apis/apps/v1").await;
    let scale = apps["resources"].as_array().unwrap().iter().find(|r| r["name"] == "deployments/scale").unwrap().clone();
    assert_eq!((scale["group"].as_str(), scale["kind"].as_str()), (Some("autoscaling"), Some("Scale")));

    // kubectl apply checks that the server validates fields itself before it sends a body.
    let (_, index) = get(&server, "/k8s/openapi/v3").await;
    let url = index["paths"]["api/v1"]["serverRelativeURL"].as_str().unwrap().to_string();
    let (status, document) = get(&server, &format!("/k8s{url}")).await;
    assert_eq!(status, StatusCode::OK);
    let patch = &document["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
    assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Pod");
    assert!(patch["parameters"].as_array().unwrap().iter().any(|p| p["name"] == "fieldValidation"));
    let (status, swagger) = get(&server, "/k8s/openapi/v2").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(swagger["swagger"], "2.0");
    assert!(swagger["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]["patch"].is_object());
    server.stop().await;
}

#[tokio::test]
async fn a_pod_is_one_store_object_in_both_dialects() {
    let server = TestServer::in_memory().await;
    let (status, created) = post(&server, "/k8s/api/v1/namespaces/default/pods", k8s_pod("k8s-made")).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["apiVersion"], "v1");
    assert!(created["metadata"]["resourceVersion"].is_string());
    assert!(created["metadata"]["creationTimestamp"].is_string());
    assert_eq!(created["status"]["phase"], "Pending");

    let (_, native) = server.get("/api/v1/namespaces/default/pods/k8s-made").await;
    assert_eq!(native["spec"]["containers"][0]["resources"], json!({"cpu": 250, "memory": 64 << 20}));
    assert_eq!(native["metadata"]["uid"], created["metadata"]["uid"]);

    server.post("/api/v1/pods", pod("native-made", 500, 128 << 20)).await;
    let (status, seen) = get(&server, "/k8s/api/v1/namespaces/default/pods/native-made").await;
    assert_eq!(status, StatusCode::OK);
    let container = &seen["spec"]["containers"][0];
    assert_eq!(container["resources"]["requests"], json!({"cpu": "500m", "memory": "128Mi"}));
    assert_eq!(seen["spec"]["restartPolicy"], "Always");

    let (_, list) = get(&server, "/k8s/api/v1/pods?labelSelector=app%3Dweb&fieldSelector=metadata.name%3Dk8s-made").await;
    assert_eq!(list["kind"], "PodList");
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");
    let (_, page) = get(&server, "/k8s/api/v1/namespaces/default/pods?limit=1").await;
    let token = page["metadata"]["continue"].as_str().expect("a continue token").to_string();
    let (_, rest) = get(&server, &format!("/k8s/api/v1/namespaces/default/pods?limit=1&continue={token}")).await;
    assert_ne!(page["items"][0]["metadata"]["name"], rest["items"][0]["metadata"]["name"]);
    server.stop().await;
}

/// The names of a list's `items`.
fn names(list: &Value) -> Vec<&str> {
    list["items"].as_array().expect("items").iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect()
}

/// Adds a label to pod `name` through the native API.
async fn relabel(server: &TestServer, name: &str) {
    let path = format!("/api/v1/namespaces/default/pods/{name}");
    let (_, mut pod) = server.get(&path).await;
    pod["metadata"]["labels"]["changed"] = json!("yes");
    let (status, body) = server.put(&path, pod).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// Every page of a paged list, in both dialects and as a Table, shows the state at the first
/// page's revision and says it, whatever was created, changed or deleted since on either side
/// of where the next page starts; a token the history no longer reaches is 410 Expired, with
/// a token that goes on from the current state.
#[tokio::test]
async fn every_page_of_a_list_is_read_at_the_first_pages_revision() {
    let server = TestServer::start(Config { watch_history: 60, ..Config::in_memory() }).await;
    for name in ["a", "b", "c", "d", "e", "f"] {
        server.post("/api/v1/pods", pod(name, 100, 1 << 20)).await;
    }
    let (_, first) = get(&server, "/k8s/api/v1/namespaces/default/pods?limit=2").await;
    let (_, native_first) = server.get("/api/v1/namespaces/default/pods?limit=2").await;
    let revision = first["metadata"]["resourceVersion"].as_str().expect("a revision").to_string();
    assert_eq!((names(&first), &first["metadata"]["remainingItemCount"]), (vec!["a", "b"], &json!(4)), "{first}");
    assert_eq!((names(&native_first), native_first["resource_version"].to_string()), (vec!["a", "b"], revision.clone()));
    assert_eq!(native_first["remaining_item_count"], 4, "{native_first}");
    let (_, selected) = get(&server, "/k8s/api/v1/namespaces/default/pods?limit=2&labelSelector=app%3Dweb").await;
    assert!(selected["metadata"]["continue"].is_string() && selected["metadata"].get("remainingItemCount").is_none(), "{selected}");

    // Before where page 2 starts: a deleted, b changed; after it: bb and g made, d deleted, e changed.
    for gone in ["a", "d"] {
        server.delete(&format!("/api/v1/namespaces/default/pods/{gone}?grace_period_seconds=0")).await;
    }
    for changed in ["b", "e"] {
        relabel(&server, changed).await;
    }
    for name in ["bb", "g"] {
        server.post("/api/v1/pods", pod(name, 100, 1 << 20)).await;
    }

    let token = first["metadata"]["continue"].as_str().expect("a continue token");
    let (_, second) = get(&server, &format!("/k8s/api/v1/namespaces/default/pods?limit=2&continue={token}")).await;
    assert_eq!(names(&second), ["c", "d"], "{second}");
    assert_eq!((&second["metadata"]["resourceVersion"], &second["metadata"]["remainingItemCount"]), (&json!(revision), &json!(2)));
    let (_, table) =
        call(&server, Method::GET, &format!("/k8s/api/v1/namespaces/default/pods?limit=2&continue={token}"), None, Some(TABLE)).await;
    assert_eq!((table["rows"].as_array().unwrap().len(), &table["metadata"]["resourceVersion"]), (2, &json!(revision)), "{table}");
    let token = second["metadata"]["continue"].as_str().expect("a continue token");
    let (_, third) = get(&server, &format!("/k8s/api/v1/namespaces/default/pods?limit=2&continue={token}")).await;
    assert_eq!((names(&third), &third["metadata"]["resourceVersion"]), (vec!["e", "f"], &json!(revision)), "{third}");
    assert!(third["metadata"].get("continue").is_none() && third["items"][0]["metadata"]["labels"].get("changed").is_none(), "{third}");

    let mut native = vec![];
    let mut page = native_first;
    while let Some(token) = page["continue"].as_str() {
        native.extend(names(&page).into_iter().map(str::to_string));
        page = server.get(&format!("/api/v1/namespaces/default/pods?limit=2&continue={token}")).await.1;
        assert_eq!(page["resource_version"].to_string(), revision, "{page}");
    }
    native.extend(names(&page).into_iter().map(str::to_string));
    assert_eq!(native, ["a", "b", "c", "d", "e", "f"], "the native pages, at the first page's revision");
    let (_, now) = get(&server, "/k8s/api/v1/namespaces/default/pods").await;
    assert_eq!(names(&now), ["b", "bb", "c", "e", "f", "g"]);

    // Past the history (60 changes; a pod and its event are two): 410 Expired, as kube-apiserver says it.
    for i in 0..31 {
        server.post("/api/v1/pods", pod(&format!("z-{i}"), 100, 1 << 20)).await;
    }
    let (status, expired) = get(&server, &format!("/k8s/api/v1/namespaces/default/pods?limit=2&continue={token}")).await;
    assert_eq!(status, StatusCode::GONE, "{expired}");
    assert_status(&expired, 410, "Expired");
    assert!(expired["message"].as_str().unwrap().starts_with("The provided continue parameter is too old to display a consistent list"));
    let inconsistent = expired["metadata"]["continue"].as_str().expect("a token to go on with");
    let (_, rest) = get(&server, &format!("/k8s/api/v1/namespaces/default/pods?limit=2&continue={inconsistent}")).await;
    assert_eq!(names(&rest), ["e", "f"], "after d, as things are now");
    assert_eq!(rest["items"][0]["metadata"]["labels"]["changed"], "yes", "{rest}");
    assert_ne!(rest["metadata"]["resourceVersion"], json!(revision));
    let (status, expired) = server.get(&format!("/api/v1/namespaces/default/pods?limit=2&continue={token}")).await;
    assert_eq!((status, &expired["error"]["reason"]), (StatusCode::GONE, &json!("Expired")), "{expired}");
    assert!(expired["error"]["message"].as_str().unwrap().contains("The token to go on with: "), "{expired}");

    // A token with a resourceVersion, or one this server did not issue, is a 400.
    let (status, refused) = get(&server, &format!("/k8s/api/v1/namespaces/default/pods?continue={inconsistent}&resourceVersion=5")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    let (status, refused) = server.get("/api/v1/pods?limit=1&continue=djEuNjE").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(
        refused["error"]["message"].as_str().unwrap().starts_with("invalid continue token \"djEuNjE\": it does not hold a continue key"),
        "{refused}"
    );
    server.stop().await;
}

#[tokio::test]
async fn fields_shepherd_does_not_hold_are_refused_by_name() {
    let server = TestServer::in_memory().await;
    let mut body = k8s_pod("web");
    body["spec"]["volumes"] = json!([{"name": "data", "emptyDir": {}}]);
    body["spec"]["containers"][0]["volumeMounts"] = json!([{"name": "data", "mountPath": "/data", "mountPropagation": "Bidirectional"}]);
    body["metadata"]["annotations"] = json!({"kubectl.kubernetes.io/last-applied-configuration": "{}"});
    let (status, refused) = post(&server, "/k8s/api/v1/namespaces/default/pods", body).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_status(&refused, 422, "Invalid");
    assert_eq!(refused["details"]["name"], "web");
    let fields: Vec<&str> = refused["details"]["causes"].as_array().unwrap().iter().filter_map(|c| c["field"].as_str()).collect();
    assert_eq!(fields, ["spec.containers[0].volumeMounts[0].mountPropagation"]);
    assert_eq!(get(&server, "/k8s/api/v1/namespaces/default/pods/web").await.0, StatusCode::NOT_FOUND);

    // What kubectl itself sets is kept.
    let mut body = k8s_pod("web");
    body["metadata"]["annotations"] = json!({"kubectl.kubernetes.io/last-applied-configuration": "{}"});
    let (status, created) = post(&server, "/k8s/api/v1/namespaces/default/pods", body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"], "{}");
    server.stop().await;
}

#[tokio::test]
async fn an_invalid_object_is_one_422_with_every_cause_in_kubernetes_fields() {
    let server = TestServer::in_memory().await;
    let mut body = k8s_pod("web");
    let container = &mut body["spec"]["containers"][0];
    // The one amount is refused, so no `resources` come back from the translation.
    container["resources"] = json!({"requests": {"cpu": "-1"}});
    container["ports"] = json!([{"name": "Bad_Name", "containerPort": 80, "hostPort": 70000}]);
    body["spec"]["terminationGracePeriodSeconds"] = json!(-1);
    let (status, refused) = post(&server, "/k8s/api/v1/namespaces/default/pods", body).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_status(&refused, 422, "Invalid");
    assert_eq!((refused["details"]["kind"].as_str(), refused["details"]["name"].as_str()), (Some("Pod"), Some("web")), "{refused}");
    let causes = refused["details"]["causes"].as_array().unwrap();
    let fields: Vec<&str> = causes.iter().filter_map(|c| c["field"].as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.containers[0].ports[0].hostPort",
            "spec.containers[0].ports[0].name",
            "spec.containers[0].resources.requests.cpu",
            "spec.terminationGracePeriodSeconds",
        ],
        "the bad quantity hides neither the ports nor the grace period: {refused}"
    );
    assert!(causes.iter().all(|c| c["reason"] == "FieldValueInvalid"), "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "Pod \"web\" is invalid: [spec.containers[0].ports[0].hostPort: Invalid value: 70000: must be between 1 and 65535, inclusive, "
        ),
        "{message}"
    );

    // The rules the native write paths apply after translation are named the same way.
    let mut bound = k8s_pod("bound");
    bound["spec"]["nodeName"] = json!("node-1");
    let (status, refused) = post(&server, "/k8s/api/v1/namespaces/default/pods", bound).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["details"]["kind"], "Pod", "{refused}");
    assert_eq!(refused["details"]["name"], "bound", "{refused}");
    assert_eq!(refused["details"]["causes"][0]["field"], "spec.nodeName", "{refused}");
    assert!(
        refused["message"].as_str().unwrap().starts_with("Pod \"bound\" is invalid: spec.nodeName: Invalid value: must be empty"),
        "{refused}"
    );

    let (status, _) = post(&server, "/k8s/api/v1/namespaces/default/pods", k8s_pod("web")).await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, mut current) = get(&server, "/k8s/api/v1/namespaces/default/pods/web").await;
    current["spec"]["restartPolicy"] = json!("Never");
    let (status, refused) =
        call(&server, Method::PUT, "/k8s/api/v1/namespaces/default/pods/web", Some(("application/json", current)), None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!((refused["details"]["kind"].as_str(), refused["details"]["name"].as_str()), (Some("Pod"), Some("web")), "{refused}");
    assert_eq!(refused["details"]["causes"][0]["field"], "spec", "{refused}");

    let (status, refused) = call(
        &server,
        Method::DELETE,
        "/k8s/api/v1/namespaces/default/pods/web",
        Some(("application/json", json!({"gracePeriodSeconds": -5}))),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["details"]["causes"][0]["field"], "gracePeriodSeconds", "{refused}");
    server.stop().await;
}

#[tokio::test]
async fn tables_carry_kubectls_columns() {
    let server = TestServer::in_memory().await;
    add_node(&server, "node-1", 4000, 8 << 30, 110).await;
    post(&server, "/k8s/api/v1/namespaces/default/pods", k8s_pod("web")).await;
    let (status, table) = call(&server, Method::GET, "/k8s/api/v1/namespaces/default/pods", None, Some(TABLE)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(table["kind"], "Table");
    let names: Vec<(&str, u64)> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["priority"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        names,
        [
            ("Name", 0),
            ("Ready", 0),
            ("Status", 0),
            ("Restarts", 0),
            ("Age", 0),
            ("IP", 1),
            ("Node", 1),
            ("Nominated Node", 1),
            ("Readiness Gates", 1)
        ]
    );
    let row = &table["rows"][0];
    assert_eq!(row["cells"][0], "web");
    assert_eq!(row["cells"][1], "0/1");
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(row["object"]["metadata"]["name"], "web");

    let (_, nodes) = call(&server, Method::GET, "/k8s/api/v1/nodes", None, Some(TABLE)).await;
    let columns: Vec<&str> = nodes["columnDefinitions"].as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(&columns[..5], ["Name", "Status", "Roles", "Age", "Version"]);
    assert_eq!(nodes["rows"][0]["cells"][1], "Ready");
    let (_, events) = call(&server, Method::GET, "/k8s/api/v1/namespaces/default/events", None, Some(TABLE)).await;
    let columns: Vec<&str> =
        events["columnDefinitions"].as_array().unwrap().iter().filter(|c| c["priority"] == 0).filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(columns, ["Last Seen", "Type", "Reason", "Object", "Message"]);
    server.stop().await;
}

/// Reads the JSON lines of a watch.
struct Lines {
    stream: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: Vec<u8>,
}

impl Lines {
    async fn open(server: &TestServer, path: &str) -> Lines {
        Lines::open_as(server, path, "application/json").await
    }

    async fn open_as(server: &TestServer, path: &str, accept: &str) -> Lines {
        let request = reqwest::Client::new().get(format!("{}{path}", server.url)).header("accept", accept);
        let response = request.send().await.expect("the watch opens");
        assert_eq!(response.status(), StatusCode::OK);
        assert!(response.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
        Lines { stream: response.bytes_stream().boxed(), buffer: Vec::new() }
    }

    async fn next(&mut self) -> Value {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                return serde_json::from_slice(&line).expect("each line is one JSON event");
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.stream.next()).await.expect("an event in time");
            self.buffer.extend_from_slice(&chunk.expect("the stream stays open").expect("a chunk"));
        }
    }
}

#[tokio::test]
async fn a_watch_streams_json_lines_across_both_dialects_and_resumes_from_before_its_history() {
    let config = Config { run_scheduler: false, watch_history: 8, ..Config::in_memory() };
    let server = TestServer::start(config).await;
    // The revision before the first pod: 1 in memory, etcd's own on etcd.
    let (_, list) = server.get("/api/v1/pods").await;
    let start = list["resource_version"].as_u64().unwrap();
    post(&server, "/k8s/api/v1/namespaces/default/pods", k8s_pod("first")).await;
    let mut watch = Lines::open(&server, "/k8s/api/v1/namespaces/default/pods?watch=1").await;
    let added = watch.next().await;
    assert_eq!((added["type"].as_str(), added["object"]["metadata"]["name"].as_str()), (Some("ADDED"), Some("first")));
    assert_eq!(added["object"]["kind"], "Pod");

    // `kubectl get -w` asks for each event as a one-row Table.
    let mut rows = Lines::open_as(&server, "/k8s/api/v1/namespaces/default/pods?watch=true", TABLE).await;
    let row = rows.next().await;
    assert_eq!((row["type"].as_str(), row["object"]["kind"].as_str()), (Some("ADDED"), Some("Table")));
    assert_eq!(row["object"]["rows"][0]["cells"][0], "first");

    // The native SSE watch sees what the Kubernetes dialect creates.
    let (_, list) = server.get("/api/v1/pods").await;
    let from = list["resource_version"].as_u64().unwrap();
    let mut native = open_watch(&server, &format!("/api/v1/pods?watch=true&resource_version={from}")).await;
    post(&server, "/k8s/api/v1/namespaces/default/pods", k8s_pod("second")).await;
    let seen = native.next(Duration::from_secs(5)).await.expect("a native event").watch_event();
    assert_eq!(seen.object.unwrap().metadata().name, "second");
    assert_eq!(watch.next().await["object"]["metadata"]["name"], "second");

    server.post("/api/v1/pods", pod("native", 1, 1)).await;
    let next = watch.next().await;
    assert_eq!((next["type"].as_str(), next["object"]["metadata"]["name"].as_str()), (Some("ADDED"), Some("native")));
    let version = next["object"]["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    server.delete("/api/v1/namespaces/default/pods/native").await;
    assert_eq!(watch.next().await["type"], "DELETED");

    // Resuming after `version` sees only what came later.
    let mut resumed = Lines::open(&server, &format!("/k8s/api/v1/namespaces/default/pods?watch=true&resourceVersion={version}")).await;
    assert_eq!(resumed.next().await["type"], "DELETED");

    for i in 0..20 {
        server.post("/api/v1/pods", pod(&format!("churn-{i}"), 1, 1)).await;
    }
    // A selection that labels decide cannot be answered from the state.
    let mut expired =
        Lines::open(&server, &format!("/k8s/api/v1/namespaces/default/pods?watch=true&resourceVersion={start}&labelSelector=app%3Dweb"))
            .await;
    let error = expired.next().await;
    assert_eq!(error["type"], "ERROR");
    assert_status(&error["object"], 410, "Expired");
    let message = error["object"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("too old resource version: {start} (")),
        "in kube-apiserver's words, not the native API's: {message}"
    );
    // Every pod can: each one changed since, as it is now, then the deletions.
    let mut from_state = Lines::open(&server, &format!("/k8s/api/v1/namespaces/default/pods?watch=true&resourceVersion={start}")).await;
    let mut seen = Vec::new();
    while seen.len() < 23 {
        let line = from_state.next().await;
        seen.push(format!("{} {}", line["type"].as_str().unwrap(), line["object"]["metadata"]["name"].as_str().unwrap()));
    }
    assert_eq!(seen[..3], ["ADDED first", "ADDED second", "DELETED native"], "{seen:?}");
    assert_eq!(seen[22], "ADDED churn-19");
    server.stop().await;
}

#[tokio::test]
async fn merge_and_strategic_patches_go_through_the_native_update() {
    let server = TestServer::in_memory().await;
    add_node(&server, "node-1", 4000, 8 << 30, 110).await;
    post(&server, "/k8s/api/v1/namespaces/default/pods", k8s_pod("web")).await;
    let patch = |content_type: &'static str, path: &'static str, body: Value| {
        let server = &server;
        async move { call(server, Method::PATCH, path, Some((content_type, body)), None).await }
    };
    let (status, labelled) = patch(
        "application/merge-patch+json",
        "/k8s/api/v1/namespaces/default/pods/web",
        json!({"metadata": {"labels": {"tier": "front"}}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{labelled}");
    assert_eq!(labelled["metadata"]["labels"], json!({"app": "web", "tier": "front"}));

    let (status, cordoned) =
        patch("application/strategic-merge-patch+json", "/k8s/api/v1/nodes/node-1", json!({"spec": {"unschedulable": true}})).await;
    assert_eq!(status, StatusCode::OK, "{cordoned}");
    assert_eq!(server.get("/api/v1/nodes/node-1").await.1["status"]["unschedulable"], true);

    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "hello"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "hello"}},
            "template": {"metadata": {"labels": {"app": "hello"}}, "spec": {"containers": [{"name": "hello", "image": "minimal:1"}]}}},
    });
    let (status, created) = post(&server, "/k8s/apis/apps/v1/namespaces/default/deployments", deployment).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let strategic = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "hello"}],
        "containers": [{"name": "hello", "image": "minimal:2"}]}}}});
    let (status, patched) =
        patch("application/strategic-merge-patch+json", "/k8s/apis/apps/v1/namespaces/default/deployments/hello", strategic).await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["spec"]["template"]["spec"]["containers"][0]["image"], "minimal:2");

    let (status, scale) = patch(
        "application/merge-patch+json",
        "/k8s/apis/apps/v1/namespaces/default/deployments/hello/scale",
        json!({"spec": {"replicas": 3}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{scale}");
    assert_eq!((scale["kind"].as_str(), scale["apiVersion"].as_str()), (Some("Scale"), Some("autoscaling/v1")));
    assert_eq!(server.get("/api/v1/namespaces/default/deployments/hello").await.1["spec"]["replicas"], 3);
    let (status, refused) = patch(
        "application/merge-patch+json",
        "/k8s/apis/apps/v1/namespaces/default/deployments/hello/scale",
        json!({"spec": {"replicas": -1}}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(
        (refused["details"]["kind"].as_str(), refused["details"]["name"].as_str()),
        (Some("deployments"), Some("hello")),
        "{refused}"
    );
    let (status, refused) = call(
        &server,
        Method::PUT,
        "/k8s/apis/apps/v1/namespaces/default/deployments/hello/scale",
        Some(("application/json", json!({"metadata": {"name": "other"}, "spec": {"replicas": 2}}))),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a Scale of another name: {refused}");

    let (status, refused) = patch("application/apply-patch+yaml", "/k8s/api/v1/namespaces/default/pods/web", json!({})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "an apply without fieldManager: {refused}");
    assert_status(&refused, 422, "Invalid");
    server.stop().await;
}

#[tokio::test]
async fn the_scale_subresource_refuses_unknown_fields_as_the_deployment_does() {
    let server = TestServer::in_memory().await;
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d1"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "d1"}},
            "template": {"metadata": {"labels": {"app": "d1"}}, "spec": {"containers": [{"name": "c", "image": "minimal"}]}}},
    });
    let (status, created) = post(&server, "/k8s/apis/apps/v1/namespaces/default/deployments", deployment).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let scale = "/k8s/apis/apps/v1/namespaces/default/deployments/d1/scale";
    let cases = [
        (Method::PATCH, "application/merge-patch+json", json!({"spec": {"replicas": 1, "zz": 1}}), vec!["spec.zz"]),
        (
            Method::PUT,
            "application/json",
            json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "d1"}, "spec": {"replicas": 2, "zz": 1}, "bogus": 1}),
            vec!["bogus", "spec.zz"],
        ),
        (Method::PATCH, "application/json-patch+json", json!([{"op": "add", "path": "/spec/qq", "value": 1}]), vec!["spec.qq"]),
        (Method::PATCH, "application/strategic-merge-patch+json", json!({"foo": {"bar": 1}}), vec!["foo"]),
    ];
    for (method, content_type, body, unknown) in cases {
        let (status, refused) = call(&server, method, scale, Some((content_type, body)), None).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{content_type}: {refused}");
        assert_status(&refused, 422, "Invalid");
        let causes = refused["details"]["causes"].as_array().unwrap();
        let fields: Vec<&str> = causes.iter().filter_map(|c| c["field"].as_str()).collect();
        assert_eq!(fields, unknown, "{content_type}: {refused}");
        assert!(causes.iter().all(|c| c["reason"] == "FieldValueUnknown"), "{refused}");
    }
    assert_eq!(server.get("/api/v1/namespaces/default/deployments/d1").await.1["spec"]["replicas"], 0, "no refused scale applied");
    server.stop().await;
}

#[tokio::test]
async fn failures_are_kubernetes_statuses() {
    let server = TestServer::in_memory().await;
    let (status, missing) = get(&server, "/k8s/api/v1/namespaces/default/pods/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_status(&missing, 404, "NotFound");
    assert_eq!(missing["details"]["name"], "nope");

    post(&server, "/k8s/api/v1/namespaces/default/pods", k8s_pod("web")).await;
    let (status, again) = post(&server, "/k8s/api/v1/namespaces/default/pods", k8s_pod("web")).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_status(&again, 409, "AlreadyExists");

    let (_, current) = get(&server, "/k8s/api/v1/namespaces/default/pods/web").await;
    let mut stale = current.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    stale["metadata"]["labels"]["x"] = json!("y");
    let (status, conflict) =
        call(&server, Method::PUT, "/k8s/api/v1/namespaces/default/pods/web", Some(("application/json", stale)), None).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_status(&conflict, 409, "Conflict");

    let (status, unknown) = get(&server, "/k8s/api/v1/sheep").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_status(&unknown, 404, "NotFound");
    let (status, wrong) =
        call(&server, Method::POST, "/k8s/api/v1/namespaces/default/endpoints", Some(("application/json", json!({}))), None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_status(&wrong, 405, "MethodNotAllowed");

    let (status, deleted) = call(
        &server,
        Method::DELETE,
        "/k8s/api/v1/namespaces/default/pods/web",
        Some(("application/json", json!({"gracePeriodSeconds": 0, "propagationPolicy": "Background"}))),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    assert_eq!(deleted["metadata"]["name"], "web");
    assert_eq!(get(&server, "/k8s/api/v1/namespaces/default/pods/web").await.0, StatusCode::NOT_FOUND);

    // Field selectors are refused in Kubernetes' spelling, with the fields it can name.
    let (status, refused) = get(&server, "/k8s/api/v1/pods?fieldSelector=spec.bogus%3Dx").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("field label not supported: spec.bogus") && message.contains("spec.nodeName"), "{message}");
    assert!(!message.contains("node_name"), "no native spelling under /k8s: {message}");
    let (_, refused) = get(&server, "/k8s/api/v1/events?fieldSelector=involvedObject.bogus%3Dx").await;
    assert!(refused["message"].as_str().unwrap().contains("involvedObject.uid"), "{refused}");
    // Too large a body is Kubernetes' RequestEntityTooLarge.
    let mut big = k8s_pod("big");
    big["metadata"]["annotations"] = json!({"filler": "x".repeat(4 * 1024 * 1024)});
    let (status, too_large) = post(&server, "/k8s/api/v1/namespaces/default/pods", big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_status(&too_large, 413, "RequestEntityTooLarge");
    assert_eq!(too_large["message"], "the request body is larger than this server's limit of 3145728 bytes (3 MiB)", "{too_large}");
    server.stop().await;
}

#[tokio::test]
async fn lists_take_kubernetes_field_labels_and_their_own_continue_tokens() {
    let server = TestServer::in_memory().await;
    post(&server, "/k8s/api/v1/namespaces/default/pods", k8s_pod("web")).await;
    // Only Kubernetes' field labels: the native spelling is another API's.
    let (status, refused) = get(&server, "/k8s/api/v1/pods?fieldSelector=spec.node_name%3Dnode-1").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(refused["message"].as_str().unwrap().starts_with("field label not supported: spec.node_name ("), "{refused}");
    assert_eq!(get(&server, "/k8s/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1").await.0, StatusCode::OK);
    // kubectl's spelling comes back in the errors, never the native one; a term without a
    // field says so.
    let (status, refused) = get(&server, "/k8s/api/v1/pods?fieldSelector=spec.nodeName%3D%3D%3D").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("value \"=\"") && !message.contains("node_name"), "{message}");
    let (status, refused) = get(&server, "/k8s/api/v1/pods?fieldSelector=%21spec.nodeName").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("expected field=value"), "{refused}");
    let (status, refused) = get(&server, "/k8s/api/v1/events?fieldSelector=involvedObject.fieldPath%3Dspec.containers%7Bweb%7D").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("field label not supported: involvedObject.fieldPath") && message.contains("no field path"), "{message}");
    assert!(message.contains("(Shepherd's events are about whole objects"), "{message}");

    // A continue token is one this server issued.
    let (status, refused) = get(&server, "/k8s/api/v1/namespaces/default/pods?limit=1&continue=%25%25%25garbage").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_status(&refused, 400, "BadRequest");
    assert!(refused["message"].as_str().unwrap().starts_with("invalid continue token \"%%%garbage\": it is not base64url"), "{refused}");
    for junk in ["abc", "-1"] {
        let (status, refused) = get(&server, &format!("/k8s/api/v1/pods?resourceVersion={junk}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "resourceVersion {junk}: {refused}");
    }
    let (status, refused) = get(&server, "/k8s/api/v1/pods?watch=1&continue=v1.61").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");

    server.stop().await;
}

#[tokio::test]
async fn tokens_and_roles_are_the_native_apis() {
    let tokens = server::auth::Tokens::parse("admin-secret admin\nviewer-secret viewer\nnode-secret node n1\n", "test").unwrap();
    let server = TestServer::start(Config { tokens, ..Config::in_memory() }).await;
    let (status, body) = get(&server, "/k8s/api/v1/pods").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_status(&body, 401, "Unauthorized");
    let as_viewer = reqwest::Client::new()
        .post(format!("{}/k8s/api/v1/namespaces/default/pods", server.url))
        .bearer_auth("viewer-secret")
        .header("content-type", "application/json")
        .body(k8s_pod("web").to_string());
    let response = as_viewer.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert_status(&response.json().await.unwrap(), 403, "Forbidden");
    let as_node = reqwest::Client::new()
        .patch(format!("{}/k8s/api/v1/nodes/n1", server.url))
        .bearer_auth("node-secret")
        .header("content-type", "application/merge-patch+json")
        .body("{}");
    let refused: Value = as_node.send().await.unwrap().json().await.unwrap();
    assert_status(&refused, 403, "Forbidden");
    assert!(refused["message"].as_str().unwrap().contains("may only read through /k8s"), "{refused}");
    let as_admin = reqwest::Client::new().get(format!("{}/k8s/api/v1/pods", server.url)).bearer_auth("admin-secret");
    assert_eq!(as_admin.send().await.unwrap().status(), StatusCode::OK);
    server.stop().await;
}

fn k8s_deployment(name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "web", "image": "minimal"}]}}
        }
    })
}

/// The fields a 422 names.
fn refused_fields(refused: &Value) -> Vec<String> {
    refused["details"]["causes"].as_array().unwrap().iter().filter_map(|c| c["field"].as_str().map(str::to_string)).collect()
}

#[tokio::test]
async fn a_deployment_gets_kubernetes_defaults_rolls_through_replicasets_and_bad_strategies_get_422() {
    let server = TestServer::in_memory().await;
    const DEPLOYMENTS: &str = "/k8s/apis/apps/v1/namespaces/default/deployments";
    let (status, created) = post(&server, DEPLOYMENTS, k8s_deployment("web")).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let spec = &created["spec"];
    assert_eq!(spec["strategy"], json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}));
    assert_eq!((spec["revisionHistoryLimit"].as_i64(), spec["progressDeadlineSeconds"].as_i64()), (Some(10), Some(600)));

    let (_, sets) = shepherd_testing::eventually(&server.client, Duration::from_secs(5), "a replica set", || async {
        let (status, sets) = get(&server, "/k8s/apis/apps/v1/namespaces/default/replicasets").await;
        (sets["items"].as_array().is_some_and(|items| items.len() == 1)).then_some((status, sets))
    })
    .await;
    let rs = &sets["items"][0];
    assert_eq!(rs["apiVersion"], "apps/v1");
    assert_eq!(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "1");
    assert_eq!(rs["metadata"]["ownerReferences"][0]["kind"], "Deployment");
    let (status, table) = call(
        &server,
        Method::GET,
        "/k8s/apis/apps/v1/namespaces/default/replicasets",
        None,
        Some("application/json;as=Table;v=v1;g=meta.k8s.io"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let columns: Vec<&str> = table["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(columns[..5], ["Name", "Desired", "Current", "Ready", "Age"]);
    assert_eq!(table["rows"][0]["cells"][1], 2);
    let rs_name = rs["metadata"]["name"].as_str().unwrap();
    let (status, scale) = get(&server, &format!("/k8s/apis/apps/v1/namespaces/default/replicasets/{rs_name}/scale")).await;
    assert_eq!((status, &scale["kind"], &scale["spec"]["replicas"]), (StatusCode::OK, &json!("Scale"), &json!(2)), "{scale}");

    // What `kubectl rollout pause` sends.
    let pause = json!({"spec": {"paused": true}});
    let path = format!("{DEPLOYMENTS}/web");
    let (status, paused) = call(&server, Method::PATCH, &path, Some(("application/strategic-merge-patch+json", pause)), None).await;
    assert_eq!((status, &paused["spec"]["paused"]), (StatusCode::OK, &json!(true)), "{paused}");
    // A selector is immutable in apps/v1.
    let reselect = json!({"spec": {"selector": {"matchLabels": {"app": "other"}}, "template": {"metadata": {"labels": {"app": "other"}}}}});
    let (status, refused) = call(&server, Method::PATCH, &path, Some(("application/merge-patch+json", reselect)), None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused_fields(&refused), ["spec.selector"]);

    // Kubernetes' fields, in the causes and in their words, with the bad value.
    for (strategy, field, words) in [
        (
            json!({"rollingUpdate": {"maxSurge": "0%", "maxUnavailable": 0}}),
            "spec.strategy.rollingUpdate.maxUnavailable",
            "Invalid value: 0: may not be 0 when `maxSurge` is 0",
        ),
        (
            json!({"rollingUpdate": {"maxSurge": -1}}),
            "spec.strategy.rollingUpdate.maxSurge",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            json!({"rollingUpdate": {"maxUnavailable": "101%"}}),
            "spec.strategy.rollingUpdate.maxUnavailable",
            "Invalid value: \"101%\": must not be greater than 100%",
        ),
        (
            json!({"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}),
            "spec.strategy.rollingUpdate",
            "Forbidden: may not be specified when strategy `type` is 'Recreate'",
        ),
        (
            json!({"type": "Sideways"}),
            "spec.strategy.type",
            "Unsupported value: \"Sideways\": supported values: \"Recreate\", \"RollingUpdate\"",
        ),
    ] {
        let mut body = k8s_deployment("bad");
        body["spec"]["strategy"] = strategy.clone();
        let (status, refused) = post(&server, DEPLOYMENTS, body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{strategy}: {refused}");
        assert_eq!(refused_fields(&refused), [field], "{strategy}: {refused}");
        assert_eq!(refused["details"]["causes"][0]["message"], words, "{strategy}: {refused}");
    }
    let mut late = k8s_deployment("bad");
    late["spec"]["minReadySeconds"] = json!(10);
    late["spec"]["progressDeadlineSeconds"] = json!(5);
    let (status, refused) = post(&server, DEPLOYMENTS, late).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(
        refused["details"]["causes"][0],
        json!({"field": "spec.progressDeadlineSeconds", "reason": "FieldValueInvalid",
            "message": "Invalid value: 5: must be greater than `minReadySeconds`"}),
        "{refused}"
    );
    let mut early = k8s_deployment("bad");
    early["spec"]["minReadySeconds"] = json!(-1);
    let (status, refused) = post(&server, DEPLOYMENTS, early).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["details"]["causes"][0]["message"], "Invalid value: -1: must be greater than or equal to 0", "{refused}");
    let mut unmatched = k8s_deployment("bad");
    unmatched["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    let (status, refused) = post(&server, DEPLOYMENTS, unmatched).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused_fields(&refused), ["spec.template.metadata.labels"]);
    server.stop().await;
}

/// A resourceVersion the store has not reached, on a get, a list (either match) and a watch:
/// kube-apiserver waits for it a moment, then answers storage's too-large error, a 504
/// `Timeout` to retry after a second, never a 410 (which would make client-go re-list).
#[tokio::test]
async fn a_resource_version_the_store_has_not_reached_is_a_504_timeout_to_retry() {
    let config = Config { watch_catch_up: Duration::from_millis(50), ..Config::in_memory() };
    let server = TestServer::start(config).await;
    post(&server, "/k8s/api/v1/namespaces/default/pods", k8s_pod("web")).await;
    let (_, list) = get(&server, "/k8s/api/v1/namespaces/default/pods").await;
    let current: u64 = list["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    let ahead = current + 1000;
    for query in [
        format!("pods/web?resourceVersion={ahead}"),
        format!("pods?resourceVersion={ahead}"),
        format!("pods?resourceVersion={ahead}&resourceVersionMatch=NotOlderThan"),
        format!("pods?resourceVersion={ahead}&resourceVersionMatch=Exact&limit=10"),
        format!("pods?watch=true&resourceVersion={ahead}"),
    ] {
        let response = reqwest::get(format!("{}/k8s/api/v1/namespaces/default/{query}", server.url)).await.unwrap();
        assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT, "{query}");
        assert_eq!(response.headers().get("retry-after").map(|v| v.to_str().unwrap()), Some("1"), "{query}");
        let body: Value = response.json().await.unwrap();
        assert_status(&body, 504, "Timeout");
        let message = body["message"].as_str().unwrap();
        assert!(message.starts_with(&format!("Timeout: Too large resource version: {ahead}, current: ")), "{query}: {message}");
        assert_eq!(body["details"]["retryAfterSeconds"], 1, "{query}: {body}");
        assert_eq!(
            body["details"]["causes"],
            json!([{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]),
            "{query}: {body}"
        );
    }
    // The version itself is served.
    let (status, _) = get(&server, &format!("/k8s/api/v1/namespaces/default/pods/web?resourceVersion={current}")).await;
    assert_eq!(status, StatusCode::OK);
    server.stop().await;
}
