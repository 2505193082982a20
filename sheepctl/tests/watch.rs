//! `get -w` and `events -w` print each change live from the watch stream.

mod support;

use std::time::Duration;

use support::{TestServer, example};

#[test]
fn get_watch_prints_each_change() {
    let server = TestServer::start();
    let watch = server.spawn(&["get", "pods", "-w"]);
    watch.expect_line("EVENT", Duration::from_secs(10));
    server.sheepctl().args(["apply", "-f"]).arg(example("pod.json")).assert().success();
    let added = watch.expect_line("web-server", Duration::from_secs(10));
    assert!(added.starts_with("ADDED"), "{added}");
    server.register_node("node-1");
    let bound = watch.expect_line("node-1", Duration::from_secs(10));
    assert!(bound.starts_with("MODIFIED"), "{bound}");
    // Bound to a Ready node, the pod first shows Terminating; forced, it goes.
    server.sheepctl().args(["delete", "pod", "web-server", "--wait=false"]).assert().success();
    let terminating = watch.expect_line("Terminating", Duration::from_secs(10));
    assert!(terminating.starts_with("MODIFIED"), "{terminating}");
    server.sheepctl().args(["delete", "pod", "web-server", "--grace-period=0", "--force"]).assert().success();
    watch.expect_line("DELETED", Duration::from_secs(10));
}

#[test]
fn events_watch_prints_new_events() {
    let server = TestServer::start();
    let watch = server.spawn(&["events", "-w", "-o", "wide"]);
    watch.expect_line("LAST SEEN", Duration::from_secs(10));
    server.sheepctl().args(["apply", "-f"]).arg(example("pod.json")).assert().success();
    let created = watch.expect_line("Created", Duration::from_secs(10));
    assert!(created.contains("pod/web-server"), "{created}");
}

#[test]
fn get_watch_json_lines_are_machine_readable() {
    let server = TestServer::start();
    server.sheepctl().args(["apply", "-f"]).arg(example("pod.json")).assert().success();
    let watch = server.spawn(&["get", "pod", "web-server", "-w", "-o", "json"]);
    let first: serde_json::Value = serde_json::from_str(&watch.expect_line("ADDED", Duration::from_secs(10))).unwrap();
    assert_eq!(first["object"]["metadata"]["name"], "web-server");
    server.register_node("node-1");
    let next: serde_json::Value = serde_json::from_str(&watch.expect_line("MODIFIED", Duration::from_secs(10))).unwrap();
    assert_eq!(next["type"], "MODIFIED");
}
