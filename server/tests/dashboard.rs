//! The dashboard is served outside `/api` without a token: `/` is its one page (its routes
//! are in the fragment), with the files it loads; any other path, and the API's unknown
//! routes, are JSON errors.

mod common;

use common::TestServer;
use server::Config;
use server::auth::{Principal, Role, Tokens};

fn dashboard() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("index.html"), "<!doctype html><title>Shepherd</title>").unwrap();
    std::fs::write(dir.path().join("app.js"), "console.log('sheep')").unwrap();
    dir
}

async fn get_text(url: &str) -> (u16, String, String) {
    let (status, content_type, _, body) = get_page(url).await;
    (status, content_type, body)
}

/// Status, Content-Type, the headers that keep other sites from framing it, and the body.
async fn get_page(url: &str) -> (u16, String, [String; 2], String) {
    let response = reqwest::get(url).await.unwrap();
    let header = |name: &str| response.headers().get(name).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    let framing = [header("x-frame-options"), header("content-security-policy")];
    let status = response.status().as_u16();
    let content_type = response.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    (status, content_type, framing, response.text().await.unwrap())
}

#[tokio::test]
async fn the_page_and_its_files_are_served_without_a_token_and_nothing_else_is() {
    let dir = dashboard();
    let mut tokens = Tokens::default();
    tokens.add("admin-token-1", Principal::new(Role::Admin, None));
    let server = TestServer::start(Config { dashboard_dir: Some(dir.path().to_path_buf()), tokens, ..Config::in_memory() }).await;

    for page in ["/", "/index.html"] {
        let (status, content_type, framing, body) = get_page(&format!("{}{page}", server.url)).await;
        assert_eq!((status, content_type.starts_with("text/html")), (200, true), "{page}");
        assert!(body.contains("<title>Shepherd</title>"));
        assert_eq!(framing, ["DENY", "frame-ancestors 'none'"], "{page}: no other site may frame the dashboard");
    }
    let (status, _, body) = get_text(&format!("{}/app.js", server.url)).await;
    assert_eq!((status, body.as_str()), (200, "console.log('sheep')"));
    // The app's routes are in the fragment (`/#/pods/default/web-server`); a path is not one.
    for path in ["/versions", "/pods/default/web-server", "/healthz/x", "/index.html/x"] {
        let (status, content_type, body) = get_text(&format!("{}{path}", server.url)).await;
        assert_eq!((status, content_type.as_str()), (404, "application/json"), "{path}: {body}");
        assert!(body.contains(&format!("no route for GET {path}")), "{body}");
    }

    // The API still wants its token, and unknown API routes are JSON errors, not the page.
    let (status, content_type, body) = get_text(&format!("{}/api/v1/pods", server.url)).await;
    assert_eq!((status, content_type.as_str()), (401, "application/json"));
    assert!(body.contains("bearer token"), "{body}");
    let (status, body) = server.with_token("admin-token-1").get("/api/v1/nothing-here").await;
    assert_eq!(status.as_u16(), 404);
    assert!(body["error"]["message"].as_str().unwrap().contains("no route for GET /api/v1/nothing-here"), "{body}");
    server.stop().await;
}

#[tokio::test]
async fn without_a_build_the_page_says_how_to_make_one() {
    let server = TestServer::in_memory().await;
    let (status, body) = server.get("/").await;
    assert_eq!(status.as_u16(), 404);
    assert!(body["error"]["message"].as_str().unwrap().contains("cargo xtask frontend"), "{body}");
    server.stop().await;
}
