//! `get`, `describe`, `delete`, `scale`, `nodes`, `cordon`, `events` and `info` against a
//! real server.

mod support;

use predicates::prelude::*;
use serde_json::Value;
use support::{Method, TestServer, example};

fn apply(server: &TestServer, file: &str) {
    server.sheepctl().args(["apply", "-f"]).arg(example(file)).assert().success();
}

fn stdout(command: &mut assert_cmd::Command) -> String {
    let output = command.output().expect("run sheepctl");
    assert!(output.status.success(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("utf-8")
}

#[test]
fn get_pods_as_a_table_and_in_every_format() {
    let server = TestServer::start();
    apply(&server, "pod.json");

    let table = stdout(server.sheepctl().args(["get", "pods"]));
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "STATUS", "RESTARTS", "NODE", "AGE"]);
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..5], ["web-server", "0/1", "Pending", "0", "<none>"]);

    // No node exists: wide output says why the pod waits.
    let wide = stdout(server.sheepctl().args(["get", "po", "-o", "wide"]));
    assert!(wide.lines().next().unwrap().ends_with("IP       REASON"), "{wide}");
    let reason = wide.lines().nth(1).unwrap();
    assert!(reason.contains("waiting for the scheduler") || reason.contains("Unschedulable: 0/0 nodes are available"), "{wide}");

    let list: Value = serde_json::from_str(&stdout(server.sheepctl().args(["get", "pods", "-o", "json"]))).unwrap();
    assert_eq!(list["items"][0]["metadata"]["name"], "web-server");
    assert!(list["resource_version"].as_u64().unwrap() > 0);
    let one: Value = serde_json::from_str(&stdout(server.sheepctl().args(["get", "pod/web-server", "-o", "json"]))).unwrap();
    assert_eq!(one["kind"], "Pod");
    let yaml = stdout(server.sheepctl().args(["get", "pod", "web-server", "-o", "yaml"]));
    assert!(yaml.contains("name: web-server"), "{yaml}");
    server.sheepctl().args(["get", "pods", "-o", "name"]).assert().success().stdout("pod/web-server\n");

    server.sheepctl().args(["get", "pods", "-l", "app=web,tier in (frontend)", "-o", "name"]).assert().success().stdout("pod/web-server\n");
    server
        .sheepctl()
        .args(["get", "pods", "-l", "app=db"])
        .assert()
        .success()
        .stdout("")
        .stderr("No pods found in namespace \"default\".\n");
    server.sheepctl().args(["get", "pods", "-A"]).assert().success().stdout(predicate::str::starts_with("NAMESPACE   NAME"));

    // The server evaluates a field selector, and says what is wrong with a bad one.
    let fields = |selector: &str| server.sheepctl().args(["get", "pods", "--field-selector", selector, "-o", "name"]).assert();
    fields("status.phase=Pending,spec.node_name=").success().stdout("pod/web-server\n");
    fields("status.phase=Running").success().stdout("");
    fields("spec.colour=blue").failure().stderr(predicate::str::contains("spec.colour"));
    server.sheepctl().args(["get", "pod", "web-server", "--field-selector", "status.phase=Pending"]).assert().failure();
}

#[test]
fn describe_explains_the_scheduling_decision_and_shows_events() {
    let server = TestServer::start();
    server.register_node("node-1");
    apply(&server, "pod.json");
    server.pod_bound("default", "web-server");

    let text = stdout(server.sheepctl().args(["describe", "pod", "web-server"]));
    for expected in [
        "Name:           web-server",
        "Namespace:      default",
        "Labels:         app=web",
        "Node:           node-1",
        "    Image:          minimal",
        "    Requests:       cpu 250m, memory 64Mi",
        "Pending:        scheduled to node-1, waiting for its agent",
        "Scheduling:",
        "Successfully assigned default/web-server to node-1",
        "node-1   selected",
        "Events:",
        "Created",
        "Scheduled",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    assert!(!text.contains("shepherd.io/last-applied"), "the apply record is not shown:\n{text}");
}

#[test]
fn describe_says_why_a_pod_is_pending() {
    let server = TestServer::start();
    server.register_node("node-1");
    apply(&server, "unschedulable-pod.json");
    server.eventually("/api/v1/namespaces/default/pods/too-big", "unschedulable", |pod| {
        pod["status"]["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["reason"] == "Unschedulable"))
    });
    let text = stdout(server.sheepctl().args(["describe", "po/too-big"]));
    assert!(text.contains("Pending:        Unschedulable: 0/1 nodes are available: 1 Insufficient memory"), "{text}");
    assert!(text.contains("node-1   filtered out"), "{text}");
    assert!(text.contains("NodeResourcesFit: Insufficient memory (the pod requests memory 64Ti"), "{text}");
}

#[test]
fn describe_deployments_services_and_nodes() {
    let server = TestServer::start();
    server.register_node("node-1");
    apply(&server, "deployment.json");
    apply(&server, "service.json");
    let deployment = stdout(server.sheepctl().args(["describe", "deploy", "web"]));
    assert!(deployment.contains("Replicas:       3 desired"), "{deployment}");
    assert!(deployment.contains("Selector:       app=web"), "{deployment}");
    let service = stdout(server.sheepctl().args(["describe", "svc/web-service"]));
    assert!(service.contains("Port:           http  80/TCP\nTargetPort:     8080/TCP\n"), "{service}");
    assert!(service.contains("IP:             10."), "{service}");
    let node = stdout(server.sheepctl().args(["describe", "node", "node-1"]));
    assert!(node.contains("Status:         Ready"), "{node}");
    assert!(node.contains("Allocatable:    cpu 4, memory 8Gi, pods 110"), "{node}");
}

#[test]
fn scale_then_delete_by_name_and_by_manifest() {
    let server = TestServer::start();
    apply(&server, "deployment.json");
    apply(&server, "service.json");
    apply(&server, "pod.json");

    server.sheepctl().args(["scale", "deployment/web", "--replicas=1"]).assert().success().stdout("deployment/web scaled to 1 replicas\n");
    assert_eq!(server.get("/api/v1/namespaces/default/deployments/web")["spec"]["replicas"], 1);
    server.sheepctl().args(["scale", "deploy", "web", "--replicas", "0"]).assert().success();
    assert_eq!(server.get("/api/v1/namespaces/default/deployments/web")["spec"]["replicas"], 0);

    server.sheepctl().args(["delete", "pod", "web-server"]).assert().success().stdout("pod \"web-server\" deleted\n");
    server.sheepctl().args(["delete", "-f"]).arg(example("service.json")).assert().success().stdout("service \"web-service\" deleted\n");
    server.sheepctl().args(["get", "svc", "web-service"]).assert().code(1);
    server.sheepctl().args(["delete", "pod/web-server", "--ignore-not-found"]).assert().success().stdout("");
    server.sheepctl().args(["delete", "deploy/web"]).assert().success().stdout("deployment \"web\" deleted\n");
}

#[test]
fn nodes_cordon_and_uncordon() {
    let server = TestServer::start();
    server.register_node("node-1");
    let table = stdout(server.sheepctl().args(["nodes"]));
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "STATUS", "PODS", "CPU", "MEMORY", "AGE"]);
    assert!(table.contains("node-1   Ready    0/110   0/4   0/8Gi"), "{table}");

    server.sheepctl().args(["cordon", "node-1"]).assert().success().stdout("node/node-1 cordoned\n");
    server.sheepctl().args(["get", "nodes"]).assert().success().stdout(predicate::str::contains("Ready,SchedulingDisabled"));
    server.sheepctl().args(["uncordon", "node/node-1"]).assert().success().stdout("node/node-1 uncordoned\n");
    server.sheepctl().args(["get", "no", "node-1", "-o", "name"]).assert().success().stdout("node/node-1\n");
}

#[test]
fn one_node_shows_what_its_own_pods_request() {
    let server = TestServer::start();
    server.register_node("node-1");
    server.register_node("node-2");
    apply(&server, "pod.json");
    let pod = server.pod_bound("default", "web-server");
    let (bound, idle) = if pod["spec"]["node_name"] == "node-1" { ("node-1", "node-2") } else { ("node-2", "node-1") };
    // The pod asks 250m of CPU: its node's row says so, the other's does not.
    let row = |node: &str| stdout(server.sheepctl().args(["get", "node", node])).lines().nth(1).unwrap().to_string();
    assert!(row(bound).contains("250m"), "{}", row(bound));
    assert!(!row(idle).contains("250m"), "{}", row(idle));
    let all = stdout(server.sheepctl().args(["get", "nodes"]));
    assert!(all.lines().any(|l| l.starts_with(bound) && l.contains("250m")), "{all}");
}

#[test]
fn a_node_is_ready_while_its_lease_is_renewed_though_its_status_is_old() {
    // Renewed as the agent does, well within the grace, while the status stays as registered.
    let server = TestServer::start_with(|c| c.node_monitor_grace = std::time::Duration::from_secs(3));
    server.register_node("node-1");
    let reported = server.get("/api/v1/nodes/node-1")["status"]["last_heartbeat"].as_str().unwrap().to_string();
    let reported = chrono::DateTime::parse_from_rfc3339(&reported).expect("the status's time");
    // Renewed at each look until the status is older than the grace, so that only the lease
    // can make the node Ready.
    shepherd_testing::poll_blocking(std::time::Duration::from_secs(10), "the status to be older than the 3 s grace", || {
        server.renew_lease("node-1");
        let age = chrono::Utc::now().signed_duration_since(reported);
        (age > chrono::Duration::milliseconds(3200)).then_some(()).ok_or(format!("{age}"))
    });
    let table = stdout(server.sheepctl().args(["get", "nodes"]));
    assert!(table.contains("node-1   Ready"), "the status is over 3s old, the lease fresh:\n{table}");
    let leases = stdout(server.sheepctl().args(["get", "leases"]));
    let header: Vec<&str> = leases.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "HOLDER", "RENEWED", "AGE"]);
    // The control plane's own leases (kube-system) are listed beside the node's.
    assert!(leases.lines().any(|l| l.split_whitespace().take(2).eq(["node-1", "node-1"])), "{leases}");
    server.sheepctl().args(["wait", "node/node-1", "--for=Running", "--timeout=5s"]).assert().success();
    server
        .sheepctl()
        .args(["describe", "lease", "node-1"])
        .assert()
        .success()
        .stdout(predicate::str::contains("Holder:").and(predicate::str::contains("node-1")));
}

#[test]
fn events_tell_the_story_oldest_first() {
    let server = TestServer::start();
    server.register_node("node-1");
    apply(&server, "pod.json");
    server.pod_bound("default", "web-server");
    let text = stdout(server.sheepctl().args(["events", "--for", "pod/web-server"]));
    let reasons: Vec<&str> = text.lines().skip(1).map(|l| l.split_whitespace().nth(2).unwrap_or("")).collect();
    let created = reasons.iter().position(|r| *r == "Created").expect("Created");
    let scheduled = reasons.iter().position(|r| *r == "Scheduled").expect("Scheduled");
    assert!(created < scheduled, "{text}");
}

#[test]
fn events_are_chosen_by_type_and_by_field() {
    let server = TestServer::start();
    server.register_node("node-1");
    apply(&server, "pod.json");
    server.pod_bound("default", "web-server");
    apply(&server, "unschedulable-pod.json");
    server.eventually("/api/v1/namespaces/default/events?field_selector=reason%3DFailedScheduling", "a FailedScheduling event", |list| {
        list["items"].as_array().is_some_and(|items| !items.is_empty())
    });
    let reasons = |args: &[&str]| -> Vec<String> {
        let text = stdout(server.sheepctl().arg("events").args(args));
        text.lines().skip(1).map(|l| l.split_whitespace().nth(2).unwrap_or("").to_string()).collect()
    };
    let warnings = reasons(&["--types", "warning"]);
    assert!(!warnings.is_empty() && warnings.iter().all(|r| r == "FailedScheduling"), "{warnings:?}");
    let both = reasons(&["--types", "Normal,Warning"]);
    assert!(both.contains(&"FailedScheduling".to_string()) && both.contains(&"Scheduled".to_string()), "{both:?}");
    assert_eq!(reasons(&["--field-selector", "reason=Scheduled"]), ["Scheduled"]);
    assert_eq!(reasons(&["--field-selector", "type=Warning", "--types", "Normal"]), Vec::<String>::new());

    server
        .sheepctl()
        .args(["events", "--types", "Error"])
        .assert()
        .failure()
        .stderr("error: --types \"Error\": an event's type is Normal or Warning\n");
    server.sheepctl().args(["events", "--field-selector", "colour=red"]).assert().failure().stderr(predicate::str::contains("colour"));
}

#[test]
fn events_for_an_object_are_of_the_one_with_that_name_now_unless_all_instances() {
    let server = TestServer::start();
    apply(&server, "pod.json");
    let first_uid = server.get("/api/v1/namespaces/default/pods/web-server")["metadata"]["uid"].as_str().unwrap().to_string();
    server.sheepctl().args(["delete", "pod", "web-server"]).assert().success();
    server.eventually("/api/v1/namespaces/default/pods", "empty", |l| l["items"].as_array().is_some_and(|i| i.is_empty()));
    apply(&server, "pod.json");
    let uid_of = |text: &str| -> Vec<String> {
        let list: Value = serde_json::from_str(text).unwrap();
        list["items"].as_array().unwrap().iter().map(|e| e["involved_object"]["uid"].as_str().unwrap().to_string()).collect()
    };
    let now = uid_of(&stdout(server.sheepctl().args(["events", "--for", "pod/web-server", "-o", "json"])));
    assert!(!now.is_empty() && !now.contains(&first_uid), "only the current pod's events: {now:?}");
    let all = uid_of(&stdout(server.sheepctl().args(["events", "--for", "pod/web-server", "--all-instances", "-o", "json"])));
    assert!(all.contains(&first_uid) && all.len() > now.len(), "{all:?}");

    server.sheepctl().args(["delete", "pod", "web-server"]).assert().success();
    server.eventually("/api/v1/namespaces/default/pods", "empty", |l| l["items"].as_array().is_some_and(|i| i.is_empty()));
    server
        .sheepctl()
        .args(["events", "--for", "pod/web-server"])
        .assert()
        .success()
        .stderr(predicates::str::contains("does not exist now: these are the events of every earlier one"));
    server.sheepctl().args(["events", "--all-instances"]).assert().failure();
}

#[test]
fn control_characters_from_the_cluster_are_shown_not_sent_to_the_terminal() {
    let server = TestServer::start();
    let mut pod: Value = serde_json::from_str(&std::fs::read_to_string(example("pod.json")).unwrap()).unwrap();
    let note = "\u{1b}[2J\u{1b}]0;owned\u{7}cleared\rhidden\u{7f}\u{9b}";
    pod["metadata"]["annotations"] = serde_json::json!({"note": note});
    let (status, body) = server.request(Method::POST, "/api/v1/namespaces/default/pods", Some(pod));
    assert_eq!(status, 201, "{body}");

    let text = stdout(server.sheepctl().args(["describe", "pod", "web-server"]));
    assert!(!text.contains('\u{1b}') && !text.contains('\r') && !text.contains('\u{7}'), "{text:?}");
    assert!(text.contains("note: ^[[2J^[]0;owned\\u0007cleared\\rhidden\\u007f\\u009b"), "{text}");
    let yaml = stdout(server.sheepctl().args(["get", "pod", "web-server", "-o", "yaml"]));
    assert!(!yaml.contains('\u{1b}'), "{yaml:?}");
    // serde_json leaves DEL and C1 controls raw: shown as JSON escapes, the output stays JSON.
    let json = stdout(server.sheepctl().args(["get", "pod", "web-server", "-o", "json"]));
    assert!(!json.contains('\u{7f}') && !json.contains('\u{9b}'), "{json:?}");
    let read: Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(read["metadata"]["annotations"]["note"], note);
}

#[test]
fn info_names_the_server() {
    let server = TestServer::start();
    let text = stdout(server.sheepctl().args(["info"]));
    assert!(text.starts_with(&format!("Server:        {}\n", server.url)), "{text}");
    assert!(text.contains("Store:         sqlite"), "{text}");
    let json: Value = serde_json::from_str(&stdout(server.sheepctl().args(["info", "-o", "json"]))).unwrap();
    assert_eq!(json["store"], "sqlite");
    let cluster = json["cluster_id"].as_str().expect("a cluster id");
    assert!(text.contains(&format!("Cluster:       {cluster}\n")), "the id its nodes label containers with\n{text}");
    let leader = json["leader"].as_str().expect("a leader");
    assert!(!leader.is_empty() && json["server_identity"] == leader, "a lone server leads from its start: {json}");
    let text = stdout(server.sheepctl().args(["cluster-info"]));
    assert!(text.contains(&format!("Leader:        {leader}\n")), "{text}");
    assert!(text.contains(&format!("Servers:       {leader}  {}\n", server.url)), "{text}");
}

/// A stand-in for a node agent's log API: answers one request with a fixed text and
/// hands back the request line it got.
fn fake_agent() -> (String, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut request_line = String::new();
        reader.read_line(&mut request_line).unwrap();
        let mut header = String::new();
        while reader.read_line(&mut header).unwrap() > 2 {
            header.clear();
        }
        let body = "Hello from Sheep!\nstill here\n";
        let mut stream = stream;
        write!(stream, "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len())
            .unwrap();
        tx.send(request_line.trim().to_string()).unwrap();
    });
    (endpoint, rx)
}

#[test]
fn logs_come_from_the_nodes_agent_through_the_server() {
    let server = TestServer::start();
    let (endpoint, requests) = fake_agent();
    server.register_node("node-1");
    let mut node = server.get("/api/v1/nodes/node-1");
    node["status"]["agent_endpoint"] = Value::String(endpoint);
    node["metadata"]["resource_version"] = serde_json::json!(0);
    let (status, body) = server.request(Method::PUT, "/api/v1/nodes/node-1/status", Some(node));
    assert_eq!(status, 200, "{body}");
    apply(&server, "pod.json");
    server.pod_bound("default", "web-server");

    server
        .sheepctl()
        .args(["logs", "pod/web-server", "-c", "web", "--tail", "2"])
        .assert()
        .success()
        .stdout("Hello from Sheep!\nstill here\n");
    let request = requests.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
    assert!(request.starts_with("GET /logs/default/web-server?"), "{request}");
    assert!(request.contains("container=web") && request.contains("tail=2"), "{request}");
}

/// `--server` takes several servers of one cluster: one that refuses connections is skipped,
/// and `sheepctl kubeconfig` writes a context for each.
#[test]
fn several_servers_the_first_dead() {
    let server = TestServer::start();
    apply(&server, "pod.json");
    let servers = format!("{},{}", support::dead_address(), server.url);
    let listed = stdout(server.sheepctl().args(["--server", &servers, "get", "pods"]));
    assert!(listed.contains("web-server"), "{listed}");

    let output = server.sheepctl().args(["--server", &servers, "kubeconfig"]).output().expect("run sheepctl");
    assert!(output.status.success(), "{output:?}");
    let config: Value = serde_norway::from_slice(&output.stdout).expect("a kubeconfig");
    assert_eq!(config["clusters"].as_array().map(Vec::len), Some(2), "{config}");
    assert_eq!(config["clusters"][1]["cluster"]["server"], format!("{}/k8s", server.url));
    assert_eq!(config["current-context"], "shepherd");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("shepherd-2") && stderr.contains("use-context"), "the output says so: {stderr}");
}

/// A list prints a page at a time (`--chunk-size`, 500 by default as kubectl's): one header,
/// every row, one GET a page; columns widen for a later page's wider cell and never narrow.
#[test]
fn get_lists_in_pages_and_prints_each() {
    let server = TestServer::start();
    for name in ["a", "b", "c-pod-with-a-much-longer-name", "d", "e"] {
        let pod = serde_json::json!({"kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "minimal", "resources": {"cpu": 100, "memory": 1 << 20}}]}});
        assert_eq!(server.request(Method::POST, "/api/v1/pods", Some(pod)).0, 201);
    }
    const PODS: &str = "/api/v1/namespaces/{namespace}/pods";
    let before = server.answered_gets(PODS);
    let table = stdout(server.sheepctl().args(["get", "pods", "--chunk-size=2"]));
    assert_eq!(server.answered_gets(PODS) - before, 3, "three pages of two pods at most");
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 6, "one header and five rows: {table}");
    assert!(lines[0].starts_with("NAME") && lines[1].starts_with("a "), "{table}");
    let status_at = |line: &str| line.find("Pending").unwrap_or_else(|| panic!("{table}"));
    assert_eq!(status_at(lines[2]), status_at(lines[1]), "the first page: {table}");
    assert!(status_at(lines[3]) > status_at(lines[1]), "the second page widens for its long name: {table}");
    assert_eq!(status_at(lines[5]), status_at(lines[3]), "and the third keeps that width: {table}");
    let names = stdout(server.sheepctl().args(["get", "pods", "-o", "name", "--chunk-size=2"]));
    assert_eq!(names.lines().count(), 5, "{names}");
    assert_eq!(stdout(server.sheepctl().args(["get", "pods", "--chunk-size=0"])).lines().count(), 6, "one list");
}
