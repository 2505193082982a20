//! docs/api.md against the running server: every route of `/api/openapi.json` has its row in
//! the reference, and the reference has no row for a route the server lacks. A row is a
//! table line whose first cell is `` `METHOD /path` ``.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::TestServer;
use reqwest::StatusCode;
use serde_json::Value;

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "DELETE", "PATCH"];

fn reference() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/api.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// The routes the reference documents, each with the line it is on. A route listed twice
/// is an error, and so is a row whose first cell looks like a route but is malformed.
fn documented(markdown: &str) -> Result<BTreeMap<String, usize>, Vec<String>> {
    let mut routes = BTreeMap::new();
    let mut problems = Vec::new();
    for (index, line) in markdown.lines().enumerate() {
        let number = index + 1;
        let Some(rest) = line.trim_start().strip_prefix("| `") else { continue };
        let Some((cell, _)) = rest.split_once('`') else {
            problems.push(format!("docs/api.md line {number}: the first cell has no closing backtick"));
            continue;
        };
        let Some((method, path)) = cell.split_once(' ') else { continue };
        if !METHODS.contains(&method) {
            continue;
        }
        if !path.starts_with('/') || path.contains(char::is_whitespace) {
            problems.push(format!("docs/api.md line {number}: {cell:?} is not `METHOD /path`"));
            continue;
        }
        if let Some(first) = routes.insert(cell.to_string(), number) {
            problems.push(format!("docs/api.md line {number}: {cell} is already documented on line {first}"));
        }
    }
    if problems.is_empty() { Ok(routes) } else { Err(problems) }
}

/// Every `METHOD /path` of an OpenAPI document.
fn served(openapi: &Value) -> BTreeSet<String> {
    let paths = openapi["paths"].as_object().expect("the OpenAPI document has paths");
    paths
        .iter()
        .flat_map(|(path, operations)| {
            operations.as_object().expect("a path item is an object").keys().map(move |method| format!("{} {path}", method.to_uppercase()))
        })
        .collect()
}

/// What is wrong between the reference and the server, one line per route.
fn compare(markdown: &str, openapi: &Value) -> Vec<String> {
    let documented = match documented(markdown) {
        Ok(routes) => routes,
        Err(problems) => return problems,
    };
    let served = served(openapi);
    let mut problems: Vec<String> = served
        .iter()
        .filter(|route| !documented.contains_key(*route))
        .map(|route| format!("{route} is served but docs/api.md has no row `{route}`"))
        .collect();
    problems.extend(
        documented
            .iter()
            .filter(|(route, _)| !served.contains(*route))
            .map(|(route, line)| format!("docs/api.md line {line} documents {route}, which the server does not serve")),
    );
    problems
}

#[tokio::test]
async fn the_reference_documents_exactly_the_routes_the_server_serves() {
    let server = TestServer::in_memory().await;
    let (status, openapi) = server.get("/api/openapi.json").await;
    assert_eq!(status, StatusCode::OK, "{openapi}");
    let served = served(&openapi);
    assert!(served.len() > 50, "the document names only {} routes: {served:?}", served.len());
    let problems = compare(&reference(), &openapi);
    assert!(problems.is_empty(), "docs/api.md and /api/openapi.json disagree:\n{}", problems.join("\n"));
    server.stop().await;
}

#[test]
fn the_check_catches_a_missing_row_an_extra_row_and_a_duplicate() {
    let openapi = serde_json::json!({"paths": {
        "/healthz": {"get": {}},
        "/api/v1/pods": {"get": {}, "post": {}}
    }});
    let complete =
        "| route | answer |\n|---|---|\n| `GET /healthz` | ok |\n| `GET /api/v1/pods` | list |\n| `POST /api/v1/pods` | create |\n";
    assert_eq!(compare(complete, &openapi), Vec::<String>::new());

    let missing = complete.replace("| `POST /api/v1/pods` | create |\n", "");
    assert_eq!(compare(&missing, &openapi), vec!["POST /api/v1/pods is served but docs/api.md has no row `POST /api/v1/pods`"]);

    let extra = format!("{complete}| `DELETE /api/v1/pods` | nothing |\n");
    assert_eq!(compare(&extra, &openapi), vec!["docs/api.md line 6 documents DELETE /api/v1/pods, which the server does not serve"]);

    let twice = format!("{complete}| `GET /healthz` | again |\n");
    assert_eq!(compare(&twice, &openapi), vec!["docs/api.md line 6: GET /healthz is already documented on line 3"]);

    let prose = "Text that mentions `GET /api/v1/nodes` outside a table is not a row.\n";
    assert_eq!(compare(&format!("{complete}{prose}"), &openapi), Vec::<String>::new());
}
