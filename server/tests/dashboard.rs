//! The dashboard is served outside `/api` without a token, with `index.html` for the
//! single-page app's own routes; the API keeps its JSON errors.

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
    let response = reqwest::get(url).await.unwrap();
    let status = response.status().as_u16();
    let content_type = response.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    (status, content_type, response.text().await.unwrap())
}

#[tokio::test]
async fn files_and_app_routes_are_served_without_a_token() {
    let dir = dashboard();
    let mut tokens = Tokens::default();
    tokens.add("admin-token-1", Principal { role: Role::Admin, node: None });
    let server = TestServer::start(Config { dashboard_dir: Some(dir.path().to_path_buf()), tokens, ..Config::in_memory() }).await;

    let (status, content_type, body) = get_text(&format!("{}/", server.url)).await;
    assert_eq!((status, content_type.starts_with("text/html")), (200, true));
    assert!(body.contains("<title>Shepherd</title>"));
    let (status, _, body) = get_text(&format!("{}/app.js", server.url)).await;
    assert_eq!((status, body.as_str()), (200, "console.log('sheep')"));
    // A route of the app itself, loaded on refresh, gets the page.
    let (status, _, body) = get_text(&format!("{}/pods/default/web-server", server.url)).await;
    assert_eq!(status, 200);
    assert!(body.contains("<title>Shepherd</title>"));

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
