//! The API over HTTPS: a made certificate authority that clients trust, tokens, the checks
//! against web pages with https origins, and the answers a client gets when it speaks plain
//! HTTP to the TLS port or does not trust the certificate.

mod common;

use reqwest::{Method, StatusCode};
use server::Config;
use server::auth::{Principal, Role, Tokens};
use server::tls::{Identity, default_hosts};
use shared::api::CLIENT_HEADER;

use common::{TestServer, add_node};

fn https(config: Config) -> Config {
    let identity = Identity::generate(&default_hosts("127.0.0.1:0".parse().unwrap())).expect("a certificate");
    Config { tls: Some(identity), run_scheduler: false, ..config }
}

/// Sends a request outside the native API's document (under `/k8s`) and reads its JSON.
async fn kubernetes(request: reqwest::RequestBuilder) -> (StatusCode, serde_json::Value) {
    let answer = request.send().await.expect("an answer");
    (answer.status(), answer.json().await.expect("a JSON answer"))
}

fn port(server: &TestServer) -> String {
    server.url.rsplit(':').next().unwrap().to_string()
}

#[tokio::test]
async fn an_open_https_server_keeps_refusing_what_a_web_page_could_send() {
    let server = TestServer::start(https(Config::in_memory())).await;
    assert!(server.url.starts_with("https://127.0.0.1:"), "{}", server.url);
    add_node(&server, "n1", 1000, 1 << 30, 10).await;
    let port = port(&server);
    let cordon = || server.bare(Method::POST, "/api/v1/nodes/n1/cordon");

    let (status, error) = server.answer(cordon()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a bodyless write without the client header: {error}");
    let (status, error) = server.answer(server.bare(Method::GET, "/api/v1/pods").header("host", format!("evil.example:{port}"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a rebound Host: {error}");
    // The server's own origin is https now: the http one of the same address is another site.
    let plain_origin = cordon().header("origin", format!("http://localhost:{port}")).header(CLIENT_HEADER, "x");
    let (status, error) = server.answer(plain_origin).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("its own dashboard at https://"), "{error}");
    let from_a_page = server.bare(Method::GET, "/k8s/api/v1/pods").header("origin", "https://evil.example");
    let (status, refusal) = kubernetes(from_a_page).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(refusal["kind"], "Status", "kubectl's shape under /k8s: {refusal}");

    let dashboard = cordon().header("host", format!("localhost:{port}")).header("origin", format!("https://localhost:{port}"));
    let (status, error) = server.answer(dashboard.header(CLIENT_HEADER, "dashboard")).await;
    assert_eq!(status, StatusCode::OK, "the dashboard's own https origin: {error}");
    server.stop().await;
}

#[tokio::test]
async fn tokens_work_over_https_and_a_wrong_one_is_refused() {
    let mut tokens = Tokens::default();
    tokens.add("admin-secret-token", Principal::new(Role::Admin, None));
    let server = TestServer::start(https(Config { tokens, ..Config::in_memory() })).await;
    let (status, list) = kubernetes(server.bare(Method::GET, "/k8s/api/v1/pods").bearer_auth("admin-secret-token")).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["kind"], "PodList");
    let (status, refusal) = kubernetes(server.bare(Method::GET, "/k8s/api/v1/pods").bearer_auth("wrong-token-value")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!((refusal["kind"].as_str(), refusal["reason"].as_str()), (Some("Status"), Some("Unauthorized")), "{refusal}");
    server.stop().await;
}

#[tokio::test]
async fn plain_http_to_the_tls_port_is_told_to_use_https() {
    let server = TestServer::start(https(Config::in_memory())).await;
    let plain = server.url.replace("https://", "http://");
    let answer = reqwest::get(format!("{plain}/api/v1/pods")).await.expect("an answer, not a closed connection");
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    let native: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(native["error"]["message"], server::tls::PLAIN_HTTP_REFUSAL, "the native error shape: {native}");
    // kubectl's discovery keeps an error's words only from a text 403.
    let answer = reqwest::get(format!("{plain}/k8s/api?timeout=32s")).await.expect("an answer");
    assert_eq!(answer.status(), StatusCode::FORBIDDEN);
    assert_eq!(answer.headers()["content-type"], "text/plain; charset=utf-8");
    assert_eq!(answer.text().await.unwrap().trim(), server::tls::PLAIN_HTTP_REFUSAL);
    server.stop().await;
}

#[tokio::test]
async fn a_client_without_the_authority_is_told_how_to_trust_it() {
    let server = TestServer::start(https(Config::in_memory())).await;
    let stranger = shepherd_client::Client::new(&server.url, None).unwrap();
    let err = stranger.info().await.unwrap_err();
    let message = err.to_string();
    assert!(message.contains("has a certificate this client does not trust") && message.contains("SHEPHERD_CA"), "{message}");
    let other = Identity::generate(&["localhost".to_string()]).unwrap();
    let wrong = shepherd_client::Client::new(&server.url, None).unwrap().with_certificate_authority(other.trust.as_bytes()).unwrap();
    assert!(wrong.info().await.unwrap_err().to_string().contains("does not trust"), "another authority is not this one");
    assert!(server.client.info().await.is_ok(), "the made authority is trusted");
    let not_pem = shepherd_client::Client::new(&server.url, None).unwrap().with_certificate_authority(b"hello").unwrap_err();
    assert!(not_pem.to_string().contains("holds no PEM certificate"), "{not_pem}");
    server.stop().await;
}
