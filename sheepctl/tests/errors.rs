//! Bad input gets one `error: …` line that says what to do, a non-zero exit, and never a
//! panic: missing files, invalid JSON and YAML with line and column, unknown kinds, a
//! server that is down, and 4xx answers with the server's field errors one per line.

mod support;

use assert_cmd::Command;
use predicates::prelude::*;
use support::{TestServer, dead_address, example};

/// Asserts one error line (plus optional indented field lines) and exit code 1.
fn fails_with(command: &mut Command, message: &str) -> String {
    let output = command.output().expect("run sheepctl");
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(output.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains(message), "expected {message:?} in {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for extra in stderr.lines().skip(1) {
        assert!(extra.starts_with("  "), "only field errors follow the first line: {stderr}");
    }
    assert!(output.stdout.is_empty(), "nothing on stdout: {}", String::from_utf8_lossy(&output.stdout));
    stderr
}

fn offline() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sheepctl"));
    command.env("SHEPHERD_API", dead_address()).env_remove("SHEPHERD_TOKEN");
    command
}

#[test]
fn a_missing_file() {
    fails_with(
        offline().args(["apply", "-f", "no/such/pod.json"]),
        "cannot read no/such/pod.json: no such file or directory (check the path, or pass - to read standard input)",
    );
}

#[test]
fn invalid_json_and_yaml_name_the_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("pod.json");
    std::fs::write(&json, "{\n  \"kind\": \"Pod\",\n  \"metadata\": {\"name\": \"x\",}\n}\n").unwrap();
    let stderr = fails_with(offline().args(["apply", "-f"]).arg(&json), &format!("invalid manifest {}: line 3, column ", json.display()));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    let yaml = dir.path().join("pod.yaml");
    std::fs::write(&yaml, "kind: Pod\nmetadata:\n  name: x\n   labels: oops\n").unwrap();
    fails_with(offline().args(["apply", "-f"]).arg(&yaml), &format!("invalid manifest {}: line 4, column ", yaml.display()));

    fails_with(offline().args(["apply", "-f", "-"]).write_stdin("{\"kind\": \"Sheep\", \"metadata\": {\"name\": \"dolly\"}}"), "Sheep");
}

#[test]
fn an_unknown_kind() {
    fails_with(offline().args(["get", "sheep"]), "unknown kind \"sheep\": use pods (po), deployments (deploy)");
    fails_with(offline().args(["describe", "flock/dolly"]), "unknown kind \"flock\"");
}

#[test]
fn a_server_that_is_down() {
    let address = dead_address();
    let mut command = Command::new(env!("CARGO_BIN_EXE_sheepctl"));
    command.args(["get", "pods", "--server", &address]);
    fails_with(
        &mut command,
        &format!("cannot reach the Shepherd API at http://{address}: is `shepherd` running? set --server or SHEPHERD_API"),
    );
    fails_with(offline().args(["apply", "-f"]).arg(example("pod.json")), "cannot reach the Shepherd API");
    fails_with(offline().args(["wait", "--for=Running", "pod/web-server"]), "cannot reach the Shepherd API");
}

#[test]
fn bad_flags_are_refused_before_connecting() {
    fails_with(offline().args(["get", "pods", "--server", "https://example:1/api"]), "invalid server address \"https://example:1/api\"");
    fails_with(
        offline().args(["get", "pods", "--certificate-authority", "no/such/ca.crt"]),
        "cannot read the certificate authority no/such/ca.crt",
    );
    fails_with(offline().args(["wait", "--for=Sleeping", "pod/x"]), "invalid --for=\"Sleeping\"");
    fails_with(offline().args(["wait", "--for=Running", "pod/x", "--timeout=soon"]), "invalid duration \"soon\"");
    fails_with(offline().args(["get", "pods", "-l", "app in (web"]), "invalid label selector");
    fails_with(offline().args(["scale", "pod/x", "--replicas=2"]), "only deployments can be scaled");
}

#[test]
fn not_found_and_validation_errors_from_the_server() {
    let server = TestServer::start();
    fails_with(server.sheepctl().args(["describe", "pod", "ghost"]), "ghost");
    fails_with(server.sheepctl().args(["delete", "pod", "ghost"]), "cannot delete pod/ghost");
    fails_with(server.sheepctl().args(["get", "deploy", "ghost"]), "ghost");

    let invalid = r#"{"kind": "Pod", "metadata": {"name": "Bad_Name"}, "spec": {"containers": [{"name": "c", "image": ""}]}}"#;
    let stderr = fails_with(server.sheepctl().args(["apply", "-f", "-"]).write_stdin(invalid), "cannot apply pod/Bad_Name");
    let fields: Vec<&str> = stderr.lines().skip(1).collect();
    assert!(fields.iter().any(|l| l.starts_with("  metadata.name: ")), "{stderr}");
    assert!(fields.iter().any(|l| l.starts_with("  spec.containers[0].image: ")), "{stderr}");
}

#[test]
fn completion_needs_no_server() {
    offline().args(["completion", "bash"]).assert().success().stdout(predicate::str::contains("_sheepctl()"));
    offline().args(["completion", "fish"]).assert().success().stdout(predicate::str::contains("complete -c sheepctl"));
    offline().args(["completion", "zsh"]).assert().success().stdout(predicate::str::contains("#compdef sheepctl"));
}

#[test]
fn tokens_are_sent_and_auth_errors_say_what_to_do() {
    let server = TestServer::start_with(|config| {
        config.tokens = server::auth::Tokens::parse("admin-secret admin\nviewer-secret viewer\n", "test").unwrap();
    });
    fails_with(server.sheepctl().args(["get", "pods"]), "(set --token or SHEPHERD_TOKEN)");
    server.sheepctl().args(["get", "pods", "--token", "admin-secret"]).assert().success();
    server.sheepctl().env("SHEPHERD_TOKEN", "viewer-secret").args(["get", "pods"]).assert().success();
    fails_with(
        server.sheepctl().env("SHEPHERD_TOKEN", "viewer-secret").args(["apply", "-f"]).arg(example("pod.json")),
        "(this token is not allowed to do that)",
    );
    server.sheepctl().args(["apply", "--token", "admin-secret", "-f"]).arg(example("pod.json")).assert().success();
}
