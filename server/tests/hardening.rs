//! What an outside tester found before authentication, tried against a real server: made-up
//! methods that grew /metrics without bound, connections that send half their headers or body
//! and hold a slot for ever, a `text/plain` DELETE body read as DeleteOptions, and answers a
//! browser could sniff into another type.

mod common;

use std::time::Duration;

use common::{TestServer, open_watch, pod};
use futures::StreamExt as _;
use reqwest::{Method, StatusCode};
use server::Config;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// Longer than any shortened timeout below takes to fire, far shorter than the defaults.
const PATIENCE: Duration = Duration::from_secs(5);

#[tokio::test]
async fn made_up_methods_share_one_other_series() {
    let server = TestServer::in_memory().await;
    let http = reqwest::Client::new();
    for n in 0..50 {
        let method = Method::from_bytes(format!("MFOOBAR{n}").as_bytes()).unwrap();
        http.request(method, format!("{}/api/v1/pods", server.url)).send().await.unwrap();
    }
    // Lowercase is another method to HTTP, and not a standard one.
    http.request(Method::from_bytes(b"delete").unwrap(), format!("{}/api/v1/pods", server.url)).send().await.unwrap();
    let (_, metrics) = server.get("/metrics").await;
    let metrics = metrics.as_str().unwrap();
    let counts: Vec<&str> = metrics.lines().filter(|l| l.starts_with("shepherd_http_request_duration_seconds_count")).collect();
    let other: Vec<&&str> = counts.iter().filter(|l| l.contains("method=\"other\"")).collect();
    assert_eq!(other.len(), 1, "{counts:#?}");
    assert!(other[0].contains("route=\"/api/v1/pods\"") && other[0].ends_with(" 51"), "{other:?}");
    assert!(!metrics.contains("MFOOBAR") && !metrics.contains("method=\"delete\""), "{metrics}");
    server.stop().await;
}

#[tokio::test]
async fn raw_paths_are_not_route_labels() {
    let server = TestServer::in_memory().await;
    for n in 0..20 {
        server.get(&format!("/api/v1/namespaces/default/pods/missing-{n}")).await;
        server.get(&format!("/no/such/path/{n}")).await;
    }
    let (_, metrics) = server.get("/metrics").await;
    let metrics = metrics.as_str().unwrap();
    assert!(!metrics.contains("missing-") && !metrics.contains("/no/such"), "{metrics}");
    assert!(metrics.contains("route=\"/api/v1/namespaces/{namespace}/pods/{name}\",code=\"404\"} 20"), "{metrics}");
    server.stop().await;
}

/// Reads what the server sends until it closes the connection; `None` if it is still open
/// after [`PATIENCE`].
async fn answer_then_close(stream: &mut TcpStream) -> Option<String> {
    let mut answer = Vec::new();
    match tokio::time::timeout(PATIENCE, stream.read_to_end(&mut answer)).await {
        Ok(_) => Some(String::from_utf8_lossy(&answer).into_owned()),
        Err(_) => None,
    }
}

async fn send(server: &TestServer, text: &str) -> TcpStream {
    let mut stream = TcpStream::connect(server.url.trim_start_matches("http://")).await.unwrap();
    stream.write_all(text.as_bytes()).await.unwrap();
    stream
}

#[tokio::test]
async fn slow_headers_and_bodies_are_cut_off_but_watches_stay_open() {
    let timeout = Duration::from_millis(300);
    let config = Config { header_read_timeout: timeout, body_read_timeout: timeout, ..Config::in_memory() };
    let server = TestServer::start(config).await;
    let mut native = open_watch(&server, "/api/v1/pods?watch=true").await;
    let k8s = server.client.request(Method::GET, "/k8s/api/v1/namespaces/default/pods?watch=true").send().await.unwrap();
    assert_eq!(k8s.status(), StatusCode::OK);
    let mut k8s = k8s.bytes_stream();

    let mut half_headers = send(&server, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n").await;
    let answer = answer_then_close(&mut half_headers).await;
    assert!(answer.is_some(), "a connection with half its headers stays open");

    let host = server.url.trim_start_matches("http://");
    let head = format!("POST /api/v1/pods HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n");
    let mut half_body = send(&server, &format!("{head}{{\"kind\"")).await;
    let answer = answer_then_close(&mut half_body).await.expect("a connection with half its body stays open");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("the request body did not all come within 0.3 s"), "{answer}");

    // Both timeouts have passed: the watches still deliver.
    assert_eq!(server.post("/api/v1/pods", pod("late", 1, 1)).await.0, StatusCode::CREATED);
    let event = native.next(PATIENCE).await.expect("the native watch ended");
    assert!(event.data.contains("\"late\""), "{event:?}");
    let mut seen = String::new();
    while !seen.contains("\"late\"") {
        let chunk = tokio::time::timeout(PATIENCE, k8s.next()).await.expect("the /k8s watch went quiet");
        seen.push_str(&String::from_utf8_lossy(&chunk.expect("the /k8s watch ended").unwrap()));
    }
    server.stop().await;
}

#[tokio::test]
async fn a_k8s_delete_reads_delete_options_only_from_json() {
    let server = TestServer::start(Config { run_scheduler: false, ..Config::in_memory() }).await;
    assert_eq!(server.post("/api/v1/pods", pod("kept", 1, 1)).await.0, StatusCode::CREATED);
    let path = "/k8s/api/v1/namespaces/default/pods/kept";
    let text = server.client.request(Method::DELETE, path).header("content-type", "text/plain").body(r#"{"gracePeriodSeconds":0}"#);
    let refused = text.send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let refused: serde_json::Value = refused.json().await.unwrap();
    assert!(refused["message"].as_str().unwrap().contains("application/json (got text/plain)"), "{refused}");
    assert_eq!(server.get("/api/v1/namespaces/default/pods/kept").await.0, StatusCode::OK, "the pod is still there");
    let json = server.client.request(Method::DELETE, path).header("content-type", "application/json").body(r#"{"gracePeriodSeconds":0}"#);
    assert_eq!(json.send().await.unwrap().status(), StatusCode::OK);
    assert_eq!(server.post("/api/v1/pods", pod("bodyless", 1, 1)).await.0, StatusCode::CREATED);
    let bodyless = server.client.request(Method::DELETE, "/k8s/api/v1/namespaces/default/pods/bodyless");
    assert_eq!(bodyless.send().await.unwrap().status(), StatusCode::OK);
    server.stop().await;
}

#[tokio::test]
async fn api_and_dashboard_answers_say_nosniff() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("index.html"), "<!doctype html><title>Shepherd</title>").unwrap();
    let server = TestServer::start(Config { dashboard_dir: Some(dir.path().to_path_buf()), ..Config::in_memory() }).await;
    for path in ["/api/v1/pods", "/api/v1/no-such-route", "/", "/index.html"] {
        let response = server.client.request(Method::GET, path).send().await.unwrap();
        let nosniff = response.headers().get("x-content-type-options").map(|v| v.to_str().unwrap().to_string());
        assert_eq!(nosniff.as_deref(), Some("nosniff"), "{path}");
    }
    server.stop().await;
}
