//! The attacks of issue 14, tried over HTTP against a real server: quantities that overflow
//! or wrap, media types that only start like JSON, and requests that a web page could send to
//! an open local server (bodyless posts, another site's Origin, a rebound Host).

mod common;

use common::{TestServer, add_node, pod};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use server::Config;
use server::auth::{Principal, Role, Tokens};
use shared::api::CLIENT_HEADER;

async fn manual_binding_server() -> TestServer {
    TestServer::start(Config { run_scheduler: false, ..Config::in_memory() }).await
}

fn binding(node: &str) -> Value {
    json!({"target": {"kind": "Node", "name": node}})
}

fn fields(error: &Value) -> Vec<&str> {
    error["error"]["details"].as_array().map(|d| d.iter().filter_map(|e| e["field"].as_str()).collect()).unwrap_or_default()
}

#[tokio::test]
async fn requests_that_would_overflow_are_refused_and_no_node_is_oversold() {
    let server = manual_binding_server().await;
    add_node(&server, "small", 1000, 1 << 30, 10).await;
    assert_eq!(server.post("/api/v1/pods", pod("first", 1000, 1)).await.0, StatusCode::CREATED);
    assert_eq!(server.post("/api/v1/namespaces/default/pods/first/binding", binding("small")).await.0, StatusCode::CREATED);

    // Two containers whose sum wraps an i64 below zero, which once skipped the room check.
    let mut wrapping = pod("wrapping", 0, 1);
    let container = wrapping["spec"]["containers"][0].clone();
    wrapping["spec"]["containers"] = json!([container.clone(), container]);
    wrapping["spec"]["containers"][0]["resources"]["cpu"] = json!(5_000_000_000_000_000_000i64);
    wrapping["spec"]["containers"][1]["name"] = json!("second");
    wrapping["spec"]["containers"][1]["resources"]["cpu"] = json!(5_000_000_000_000_000_000i64);
    let (status, error) = server.post("/api/v1/pods", wrapping).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error}");
    assert_eq!(fields(&error), vec!["spec.containers[0].resources.cpu", "spec.containers[1].resources.cpu"]);
    assert!(error["error"]["message"].as_str().unwrap().contains("must be between 0 and 1000000000 millicores"), "{error}");

    for name in ["late-1", "late-2", "late-3", "late-4"] {
        assert_eq!(server.post("/api/v1/pods", pod(name, 1000, 1)).await.0, StatusCode::CREATED);
        let (status, error) = server.post(&format!("/api/v1/namespaces/default/pods/{name}/binding"), binding("small")).await;
        assert_eq!(status, StatusCode::CONFLICT, "{name} must not fit next to first: {error}");
    }
    let (_, pods) = server.get("/api/v1/pods?field_selector=spec.node_name=small").await;
    assert_eq!(pods["items"].as_array().unwrap().len(), 1, "only the first pod is bound: {pods}");
    server.stop().await;
}

#[tokio::test]
async fn quantities_past_an_i64_or_below_zero_name_the_field_and_the_value() {
    let server = manual_binding_server().await;
    let with_memory = |memory: Value| {
        let mut manifest = pod("q", 1, 1);
        manifest["spec"]["containers"][0]["resources"]["memory"] = memory;
        manifest
    };
    let cases = [
        (json!("-154742504910672534362390527Ti"), "it is negative"),
        (json!("154742504910672534362390527Ti"), "larger than the 64Ti"),
        (json!(9_223_372_036_854_775_808u64), "larger than the 64Ti"),
        (json!(1e30), "write bytes as an integer (67108864), or a string such as \"64Mi\""),
        (json!(1.5e3), "a number with a fraction or an exponent is not accepted"),
    ];
    for (memory, expected) in cases {
        let (status, error) = server.post("/api/v1/pods", with_memory(memory.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{memory}: {error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains("spec.containers[0].resources.memory: invalid memory"), "{memory}: {message}");
        assert!(message.contains(expected), "{memory}: {message}");
    }
    let (status, error) = server.post("/api/v1/pods", with_memory(json!("65Ti"))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error}");
    assert_eq!(fields(&error), vec!["spec.containers[0].resources.memory"]);
    let (_, pods) = server.get("/api/v1/pods").await;
    assert_eq!(pods["items"], json!([]), "nothing was stored");
    server.stop().await;
}

#[tokio::test]
async fn node_capacity_is_bounded_on_register_heartbeat_and_status() {
    let server = manual_binding_server().await;
    let huge = json!({"cpu": i64::MAX, "memory": "1Pi", "pods": 1_000_000});
    let (status, error) =
        server.post("/api/v1/nodes", json!({"kind": "Node", "metadata": {"name": "n1"}, "status": {"capacity": huge}})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error}");
    assert_eq!(fields(&error), vec!["status.capacity.cpu", "status.capacity.memory", "status.capacity.pods"]);

    add_node(&server, "n1", 1000, 1 << 30, 10).await;
    let (status, error) = server.post("/api/v1/nodes/n1/heartbeat", json!({"allocatable": huge})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error}");
    assert_eq!(fields(&error), vec!["allocatable.cpu", "allocatable.memory", "allocatable.pods"]);
    let (status, error) = server.put("/api/v1/nodes/n1/status", json!({"kind": "Node", "status": {"allocatable": huge}})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error}");
    assert_eq!(fields(&error), vec!["status.allocatable.cpu", "status.allocatable.memory", "status.allocatable.pods"]);
    let (_, node) = server.get("/api/v1/nodes/n1").await;
    assert_eq!(node["status"]["allocatable"], json!({"cpu": 1000, "memory": 1 << 30, "pods": 10}), "nothing changed");
    server.stop().await;
}

/// A request as a browser or curl would send it: no client header unless asked for.
fn bare(server: &TestServer, method: Method, path: &str) -> reqwest::RequestBuilder {
    server.bare(method, path)
}

#[tokio::test]
async fn a_body_needs_exactly_the_json_media_type() {
    let server = manual_binding_server().await;
    let body = pod("typed", 1, 1).to_string();
    let post = |content_type: &str| bare(&server, Method::POST, "/api/v1/pods").header("content-type", content_type).body(body.clone());
    let (status, error) = server.answer(post("application/jsonfoo")).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{error}");
    assert_eq!(error["error"]["message"], "send the body as JSON with Content-Type: application/json (got application/jsonfoo)");
    let (status, _) = server.answer(post("application/jsonfoo").header(CLIENT_HEADER, "tests")).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "the client header does not make a body JSON");
    let (status, _) = server.answer(post("text/plain; application/json")).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let (status, created) = server.answer(post("Application/JSON; charset=utf-8")).await;
    assert_eq!(status, StatusCode::CREATED, "parameters and case do not matter: {created}");
    server.stop().await;
}

#[tokio::test]
async fn an_open_server_refuses_what_a_web_page_could_send() {
    let server = manual_binding_server().await;
    add_node(&server, "dead", 1000, 1 << 30, 10).await;
    let port = server.url.rsplit(':').next().unwrap().to_string();
    for action in ["cordon", "uncordon", "heartbeat"] {
        let path = format!("/api/v1/nodes/dead/{action}");
        let (status, error) = server.answer(bare(&server, Method::POST, &path)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "a bodyless {action} without the client header: {error}");
        assert!(error["error"]["message"].as_str().unwrap().contains("x-shepherd-client"), "{error}");
        let from_a_page = bare(&server, Method::POST, &path).header("origin", "http://evil.example").header(CLIENT_HEADER, "x");
        let (status, error) = server.answer(from_a_page).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{action} from another site's page: {error}");
        assert!(error["error"]["message"].as_str().unwrap().contains("a page from http://evil.example may not call"), "{error}");
    }
    // A page that rebinds its name to 127.0.0.1 sends its own name as the Host: even reads.
    for host in [format!("evil.example:{port}"), "localhost:1".to_string(), "127.0.0.1".to_string()] {
        let (status, error) = server.answer(bare(&server, Method::GET, "/api/v1/pods").header("host", &host)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "Host {host}: {error}");
        let post = bare(&server, Method::POST, "/api/v1/pods").header("host", &host).json(&pod("rebound", 1, 1));
        assert_eq!(server.answer(post).await.0, StatusCode::FORBIDDEN, "Host {host}");
    }
    let (_, node) = server.get("/api/v1/nodes/dead").await;
    assert_eq!(node["status"]["unschedulable"], Value::Null, "no refused cordon took effect: {node}");

    // What the real clients and kubectl-style clients send still works.
    let (status, _) = server.answer(bare(&server, Method::POST, "/api/v1/nodes/dead/cordon").header(CLIENT_HEADER, "sheepctl")).await;
    assert_eq!(status, StatusCode::OK);
    for media in ["application/json", "application/merge-patch+json", "application/strategic-merge-patch+json"] {
        let (status, error) = server.answer(bare(&server, Method::POST, "/api/v1/nodes/dead/uncordon").header("content-type", media)).await;
        assert_eq!(status, StatusCode::OK, "{media}: {error}");
    }
    let own = format!("http://localhost:{port}");
    let dashboard = bare(&server, Method::POST, "/api/v1/nodes/dead/cordon")
        .header("host", format!("localhost:{port}"))
        .header("origin", &own)
        .header(CLIENT_HEADER, "dashboard");
    assert_eq!(server.answer(dashboard).await.0, StatusCode::OK, "the dashboard's own origin");
    let second_origin = bare(&server, Method::POST, "/api/v1/nodes/dead/cordon")
        .header("host", format!("localhost:{port}"))
        .header("origin", &own)
        .header("origin", "http://evil.example")
        .header(CLIENT_HEADER, "x");
    let (status, error) = server.answer(second_origin).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "every Origin is checked, not the first alone: {error}");
    // kubectl's exec asks for a stream upgrade, with no body: it learns that /k8s has no exec.
    let exec = bare(&server, Method::POST, "/k8s/api/v1/namespaces/default/pods/web/exec").header("upgrade", "SPDY/3.1");
    let refused = exec.send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::NOT_FOUND, "{:?}", refused.text().await);
    let upgrade_elsewhere = bare(&server, Method::POST, "/api/v1/nodes/dead/uncordon").header("upgrade", "websocket");
    assert_eq!(server.answer(upgrade_elsewhere).await.0, StatusCode::FORBIDDEN, "Upgrade opens only the stream paths");
    let kubectl_delete = bare(&server, Method::DELETE, "/api/v1/nodes/dead").json(&json!({"kind": "DeleteOptions"}));
    assert_eq!(server.answer(kubectl_delete).await.0, StatusCode::OK);
    server.stop().await;
}

/// A page may send GET, HEAD and POST anywhere; a DELETE, PUT or PATCH to another site needs
/// a CORS preflight, which this server never grants. So curl's bare DELETE, PUT and PATCH
/// are served, and only a POST must prove that no page sent it.
#[tokio::test]
async fn an_open_server_takes_a_bare_delete_put_and_patch_and_refuses_a_form_post() {
    let server = manual_binding_server().await;
    let (_, created) = server.post("/api/v1/pods", pod("web", 1, 1)).await;
    let mut replaced = created.clone();
    replaced["metadata"]["labels"] = json!({"tier": "web"});
    let put = bare(&server, Method::PUT, "/api/v1/namespaces/default/pods/web").json(&replaced);
    let (status, answer) = server.answer(put).await;
    assert_eq!(status, StatusCode::OK, "curl -X PUT with a JSON body, no client header: {answer}");
    assert_eq!(answer["metadata"]["labels"]["tier"], "web", "{answer}");
    let patch = bare(&server, Method::PATCH, "/k8s/api/v1/namespaces/default/pods/web")
        .header("content-type", "application/merge-patch+json")
        .body(json!({"metadata": {"labels": {"patched": "yes"}}}).to_string());
    // Sent as it is: the native API's OpenAPI document, which answers are checked against,
    // has no /k8s paths.
    let answer = patch.send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK, "curl -X PATCH, no client header");
    let patched: Value = answer.json().await.unwrap();
    assert_eq!(patched["metadata"]["labels"]["patched"], "yes", "{patched}");
    let (status, deleted) = server.answer(bare(&server, Method::DELETE, "/api/v1/namespaces/default/pods/web")).await;
    assert_eq!(status, StatusCode::OK, "curl -X DELETE, no header: {deleted}");
    assert_eq!(deleted["metadata"]["name"], "web", "{deleted}");

    let form = |request: reqwest::RequestBuilder| {
        request.header("content-type", "application/x-www-form-urlencoded").body(pod("formed", 1, 1).to_string())
    };
    let (status, error) = server.answer(form(bare(&server, Method::POST, "/api/v1/pods"))).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "a form post: {error}");
    let from_a_page = form(bare(&server, Method::POST, "/api/v1/pods")).header("origin", "http://evil.example");
    let (status, error) = server.answer(from_a_page).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a form post from another site's page: {error}");
    let (status, _) = server.get("/api/v1/namespaces/default/pods/formed").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "no refused post created anything");
    server.stop().await;
}

#[tokio::test]
async fn tokens_keep_working_as_before_and_the_scheme_is_case_insensitive() {
    let mut tokens = Tokens::default();
    tokens.add("admin-secret-token", Principal::new(Role::Admin, None));
    let server = TestServer::start(Config { tokens, run_scheduler: false, ..Config::in_memory() }).await;
    let admin = server.with_token("admin-secret-token");
    add_node(&admin, "n1", 1000, 1 << 30, 10).await;
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let cordon = bare(&server, Method::POST, "/api/v1/nodes/n1/cordon")
            .header("authorization", format!("{scheme} admin-secret-token"))
            .header("host", "shepherd.example:443");
        let (status, error) = server.answer(cordon).await;
        assert_eq!(status, StatusCode::OK, "{scheme}: {error}");
    }
    let (status, _) = server.answer(bare(&server, Method::POST, "/api/v1/nodes/n1/cordon").header("authorization", "Basic YWRtaW4=")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    server.stop().await;
}

/// Sends `request` as it is over one connection and reads the whole answer.
async fn raw_http(server: &TestServer, request: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(server.url.trim_start_matches("http://")).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

/// A server that serves a dashboard page, whose title shows where a request reached it;
/// the page's directory lives as long as the first value.
async fn with_a_dashboard() -> (tempfile::TempDir, TestServer) {
    let dashboard = tempfile::tempdir().unwrap();
    std::fs::write(dashboard.path().join("index.html"), "<!doctype html><title>Shepherd</title>").unwrap();
    let server = TestServer::start(Config { dashboard_dir: Some(dashboard.path().to_path_buf()), ..Config::in_memory() }).await;
    (dashboard, server)
}

#[tokio::test]
async fn the_asterisk_request_target_is_only_for_options() {
    let (_dashboard, server) = with_a_dashboard().await;
    let host = server.url.trim_start_matches("http://").to_string();
    for method in ["GET", "HEAD", "POST", "DELETE"] {
        let answer = raw_http(&server, &format!("{method} * HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{method} *: {answer}");
        assert!(answer.contains("application/json") && !answer.contains("<title>"), "{method} *: {answer}");
        if method != "HEAD" {
            assert!(answer.contains("the request target * is only for OPTIONS"), "{answer}");
        }
    }
    let answer = raw_http(&server, &format!("OPTIONS * HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")).await;
    assert!(!answer.starts_with("HTTP/1.1 400"), "{answer}");
    server.stop().await;
}

/// A request target that is only a host and port (the authority form of a proxy's CONNECT)
/// reached the dashboard's file server, which logged an ERROR and answered 500: anyone could
/// fill the log. It is a 400 now; the absolute form with a path is still served.
#[tokio::test]
async fn a_request_target_without_a_path_is_refused() {
    let (_dashboard, server) = with_a_dashboard().await;
    let host = server.url.trim_start_matches("http://").to_string();
    let port = host.rsplit_once(':').unwrap().1;
    for target in [host.clone(), format!("localhost:{port}")] {
        for method in ["GET", "HEAD", "POST", "CONNECT"] {
            let answer = raw_http(&server, &format!("{method} {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")).await;
            assert!(answer.starts_with("HTTP/1.1 400"), "{method} {target}: {answer}");
            assert!(answer.contains("application/json") && !answer.contains("<title>"), "{method} {target}: {answer}");
            if method != "HEAD" {
                assert!(answer.contains(&format!("the request target {target} is only a host and port")), "{answer}");
            }
        }
    }
    for target in [format!("http://{host}/"), format!("http://{host}"), format!("http://{host}/healthz")] {
        let answer = raw_http(&server, &format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "GET {target}: {answer}");
    }
    server.stop().await;
}

/// Protobuf bodies as a typed client would send them, broken: cut short, a length past the
/// end or past any memory, a field Kubernetes does not have. Each is a 400 that says what is
/// wrong, and nothing is created.
#[tokio::test]
async fn hostile_protobuf_bodies_are_a_clear_400() {
    let server = TestServer::in_memory().await;
    let field = |number: u8, body: &[u8]| [vec![(number << 3) | 2, body.len() as u8], body.to_vec()].concat();
    let envelope = |raw: &[u8]| {
        let type_meta = [field(1, b"apps/v1"), field(2, b"Deployment")].concat();
        [b"k8s\0".to_vec(), field(1, &type_meta), field(2, raw)].concat()
    };
    let named = field(1, &field(1, b"web"));
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (envelope(&named)[..20].to_vec(), "runs past the end"),
        (envelope(&[0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]), "runs past the end"),
        (envelope(&[named.clone(), field(12, b"x")].concat()), "Deployment has no field 12 in Kubernetes"),
        (b"k8s\0\x0a".to_vec(), "it ends inside a number"),
        (b"not protobuf".to_vec(), "does not start with the k8s envelope"),
    ];
    for (body, says) in cases {
        let request = server
            .bare(Method::POST, "/k8s/apis/apps/v1/namespaces/default/deployments")
            .header("content-type", "application/vnd.kubernetes.protobuf")
            .body(body);
        let response = request.send().await.expect("the server answers");
        let status = response.status();
        let answer: Value = response.json().await.expect("a Status");
        assert_eq!((status, answer["reason"].as_str()), (StatusCode::BAD_REQUEST, Some("BadRequest")), "{answer}");
        assert!(answer["message"].as_str().unwrap().contains(says), "{answer} should say {says:?}");
    }
    assert_eq!(server.get("/api/v1/namespaces/default/deployments").await.1["items"], json!([]));
}
