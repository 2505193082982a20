//! The real kubectl (v1.32, on PATH) against Shepherd's Kubernetes-compatible API, with a
//! real Docker node: the kubeconfig comes from `sheepctl kubeconfig --save`, and the
//! manifests are plain Kubernetes ones (`apiVersion: v1`, `resources.requests`); and its
//! paged lists (`--chunk-size`), which need no node. Fails, never skips, when kubectl or
//! Docker is missing.

mod support;

use std::time::Duration;

use support::{Background, Kubectl, TestServer};
use tokio_util::sync::CancellationToken;

const NODE: &str = "kubectl-node";

/// The walk-through's manifests as plain Kubernetes ones (`apiVersion: v1`,
/// `resources.requests`), as the docs show them to kubectl users.
fn manifest(name: &str) -> String {
    support::example(&format!("kubernetes/{name}")).to_str().expect("a UTF-8 path").to_string()
}

#[test]
fn kubectl_drives_a_docker_node_through_the_compatible_api() {
    let _cleanup = support::RemoveNodeContainers(NODE);
    let server = TestServer::start();
    let shutdown = CancellationToken::new();
    let node = support::start_docker_node(&server.url, NODE, |_| {}, shutdown.clone());
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::saved_by(&server, dir.path());

    let nodes = server.eventually("/api/v1/nodes", "one node", |list| list["items"].as_array().is_some_and(|n| n.len() == 1));
    assert_eq!(nodes["items"][0]["metadata"]["name"], NODE);
    let table = kubectl.run(&["get", "nodes"]);
    assert!(table.starts_with("NAME") && table.contains("STATUS"), "{table}");
    assert!(table.lines().any(|l| l.starts_with(NODE) && l.split_whitespace().nth(1) == Some("Ready")), "{table}");

    // An invalid manifest: kubectl prints every cause, in the Kubernetes object's fields.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad-ports\nspec:\n  terminationGracePeriodSeconds: -1\n  containers:\n  - name: web\n    image: minimal\n    ports:\n    - {name: Bad_Name, containerPort: 80, hostPort: 70000}\n    resources:\n      requests: {cpu: \"-1\"}\n",
    )
    .unwrap();
    let refused = kubectl.output(&["apply", "-f", bad.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(stderr.contains("The Pod \"bad-ports\" is invalid"), "{stderr}");
    for cause in [
        "* spec.containers[0].ports[0].hostPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
        "* spec.containers[0].ports[0].name: Invalid value: port name \"Bad_Name\"",
        "* spec.containers[0].resources.requests.cpu: Invalid value:",
        "* spec.terminationGracePeriodSeconds: Invalid value:",
    ] {
        assert!(stderr.contains(cause), "{cause} in {stderr}");
    }
    assert!(!stderr.contains("Unsupported"), "a refused amount is not also an unsupported field: {stderr}");

    // With the node cordoned the pod waits in Pending, so the watch surely sees it there,
    // then goes through ContainerCreating to Running once the node takes pods again.
    assert!(kubectl.run(&["cordon", NODE]).contains(&format!("node/{NODE} cordoned")));
    assert!(kubectl.run(&["apply", "-f", &manifest("pod.yaml")]).contains("pod/web-server created"));
    let mut watch = Background::spawn_command(kubectl.command(&["get", "pods", "-w"]));
    watch.expect_line("Pending", Duration::from_secs(30));
    assert!(kubectl.run(&["get", "nodes"]).contains("SchedulingDisabled"));
    assert!(kubectl.run(&["uncordon", NODE]).contains(&format!("node/{NODE} uncordoned")));
    let met = kubectl.run(&["wait", "--for=condition=Ready", "pod/web-server", "--timeout=60s"]);
    assert!(met.contains("pod/web-server condition met"), "{met}");
    watch.expect_line("Running", Duration::from_secs(30));
    assert!(watch.is_running(), "kubectl get -w keeps watching");
    drop(watch);

    let wide = kubectl.run(&["get", "pods", "-o", "wide"]);
    let row = wide.lines().find(|l| l.starts_with("web-server ")).unwrap_or_else(|| panic!("{wide}"));
    assert!(row.contains("1/1") && row.contains("Running") && row.contains(NODE), "{wide}");
    assert_eq!(kubectl.run(&["get", "pod", "web-server", "-o", "jsonpath={.status.phase}"]), "Running");
    assert_eq!(kubectl.run(&["get", "pod", "web-server", "-o", "jsonpath={.spec.containers[0].resources.requests.cpu}"]), "250m");
    let yaml = kubectl.run(&["get", "pod", "web-server", "-o", "yaml"]);
    assert!(yaml.contains("apiVersion: v1") && yaml.contains("kind: Pod") && yaml.contains("creationTimestamp:"), "{yaml}");
    // Seen through the native API too: the same store object.
    assert_eq!(server.get("/api/v1/namespaces/default/pods/web-server")["status"]["phase"], "Running");

    let logs = kubectl.run(&["logs", "web-server"]);
    assert!(logs.contains("Hello from Sheep!"), "{logs}");
    // Each line after the time Docker stamped it; a span or a time bounds what is shown.
    let stamped = kubectl.run(&["logs", "web-server", "--timestamps"]);
    let line = stamped.lines().find(|l| l.ends_with("Hello from Sheep!")).unwrap_or_else(|| panic!("{stamped}"));
    assert!(chrono::DateTime::parse_from_rfc3339(line.split(' ').next().unwrap_or_default()).is_ok(), "{stamped}");
    assert!(kubectl.run(&["logs", "web-server", "--since=1h"]).contains("Hello from Sheep!"));
    assert_eq!(kubectl.run(&["logs", "web-server", "--since-time=2999-01-01T00:00:00Z"]), "", "nothing written since");
    let none = kubectl.output(&["logs", "web-server", "--previous"]);
    let said = String::from_utf8_lossy(&none.stderr);
    assert!(!none.status.success() && said.contains(r#"previous terminated container "web" in pod "web-server" not found"#), "{said}");
    let described = kubectl.run(&["describe", "pod", "web-server"]);
    assert!(described.contains("Name:") && described.contains("web-server") && described.contains(NODE), "{described}");
    assert!(described.contains("Running"), "{described}");

    // A deployment's pods, by label; scaled.
    assert!(kubectl.run(&["apply", "-f", &manifest("deployment.yaml")]).contains("deployment.apps/web created"));
    // The deployment's pods: app=web without the tier label web-server has.
    let replicas = "/api/v1/namespaces/default/pods?label_selector=app%3Dweb%2C%21tier";
    server.eventually(replicas, "three pods", |list| list["items"].as_array().is_some_and(|p| p.len() == 3));
    kubectl.run(&["wait", "--for=condition=Ready", "pod", "-l", "app=web,!tier", "--timeout=60s"]);
    assert!(kubectl.run(&["scale", "deployment", "web", "--replicas=4"]).contains("deployment.apps/web scaled"));
    server.eventually(replicas, "four pods", |list| list["items"].as_array().is_some_and(|p| p.len() == 4));
    assert!(!kubectl.run(&["get", "nodes"]).contains("SchedulingDisabled"));

    // kubectl delete waits until the object is gone.
    // Its sleep ignores SIGTERM: 1 s of grace instead of 30.
    assert!(kubectl.run(&["delete", "pod", "web-server", "--grace-period=1"]).contains("pod \"web-server\" deleted"));
    let (status, _) = server.request(support::Method::GET, "/api/v1/namespaces/default/pods/web-server", None);
    assert_eq!(status, 404, "deleted means gone");
    assert!(kubectl.run(&["delete", "deployment", "web"]).contains("deployment.apps \"web\" deleted"));
    // Its pods go gracefully (30 s: their sleep ignores SIGTERM); kubectl waits for them.
    kubectl.run(&["wait", "--for=delete", "pod", "-l", "app=web", "--timeout=90s"]);
    let left = server.get("/api/v1/namespaces/default/pods");
    assert_eq!(left["items"].as_array().map(Vec::len), Some(0), "{left}");
    let missing = kubectl.output(&["get", "pod", "web-server"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("pods \"web-server\" not found"), "{missing:?}");

    // Probes: the pod runs at once and turns Ready only once its readiness probe passes;
    // describe prints each probe as against Kubernetes, with the failures as events.
    assert!(kubectl.run(&["apply", "-f", &manifest("probes.yaml")]).contains("pod/probed created"));
    let met = kubectl.run(&["wait", "--for=condition=Ready", "pod/probed", "--timeout=60s"]);
    assert!(met.contains("pod/probed condition met"), "{met}");
    let described = kubectl.run(&["describe", "pod", "probed"]);
    for line in [
        "Liveness:       exec [cat /tmp/alive] delay=5s timeout=1s period=5s #success=1 #failure=3",
        "Readiness:      http-get http://:http/healthz delay=0s timeout=1s period=2s #success=1 #failure=3",
        "Startup:        tcp-socket :http delay=0s timeout=1s period=1s #success=1 #failure=30",
        "Readiness probe failed: HTTP probe failed with statuscode: 404",
    ] {
        assert!(described.contains(line), "{line} in {described}");
    }
    assert_eq!(kubectl.run(&["get", "pod", "probed", "-o", "jsonpath={.status.containerStatuses[0].started}"]), "true");
    assert!(kubectl.run(&["delete", "pod", "probed", "--grace-period=1"]).contains("pod \"probed\" deleted"));

    // A container that restarts: --previous shows its run before the last restart alone.
    let crash = dir.path().join("crash.yaml");
    std::fs::write(
        &crash,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: crash\nspec:\n  containers:\n  - name: c\n    image: minimal\n    command: [\"/bin/sh\", \"-c\", \"echo run at $(date +%s%N); exit 1\"]\n    resources:\n      requests: {cpu: 50m, memory: 16Mi}\n",
    )
    .unwrap();
    kubectl.run(&["apply", "-f", crash.to_str().unwrap()]);
    server.eventually("/api/v1/namespaces/default/pods/crash", "restarted", |pod| {
        pod["status"]["container_statuses"][0]["last_state"]["terminated"]["finished_at"].is_string()
    });
    let previous = kubectl.run(&["logs", "crash", "--previous"]);
    assert_eq!(previous.lines().filter(|l| l.starts_with("run at ")).count(), 1, "one run: {previous}");
    kubectl.run(&["delete", "pod", "crash", "--grace-period=1"]);

    shutdown.cancel();
    node.join().expect("the node thread ends");
}

/// `kubectl get --chunk-size` pages the list (kubectl's default is 500 a page); the pages,
/// each at the first page's revision, come back as one list and one table.
#[test]
fn kubectl_pages_a_list_with_chunk_size() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::saved_by(&server, dir.path());
    let names: Vec<String> = (0..5).map(|i| format!("chunk-{i}")).collect();
    for name in &names {
        let pod = serde_json::json!({"kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "minimal", "resources": {"cpu": 100, "memory": 1 << 20}}]}});
        assert_eq!(server.request(support::Method::POST, "/api/v1/pods", Some(pod)).0, 201);
    }

    let listed = kubectl.output(&["get", "pods", "--chunk-size=2", "-o", "name", "-v=6"]);
    assert!(listed.status.success(), "{listed:?}");
    let expected: Vec<String> = names.iter().map(|n| format!("pod/{n}")).collect();
    assert_eq!(String::from_utf8_lossy(&listed.stdout).lines().collect::<Vec<_>>(), expected);
    // Three GETs of two pods at most: kubectl followed the continue tokens.
    let pages = String::from_utf8_lossy(&listed.stderr).lines().filter(|l| l.contains("GET") && l.contains("limit=2")).count();
    assert_eq!(pages, 3, "{}", String::from_utf8_lossy(&listed.stderr));
    let table = kubectl.run(&["get", "pods", "--chunk-size=2"]);
    assert_eq!(table.lines().filter(|l| l.starts_with("chunk-")).count(), 5, "{table}");
    assert_eq!(table.lines().filter(|l| l.starts_with("NAME")).count(), 1, "one header for all pages: {table}");
}

/// A node's lease is `coordination.k8s.io/v1` in `kube-node-lease`, where `kubectl describe
/// node` reads it; `get leases -A` lists it beside the control plane's, and a write is refused
/// (its agent renews it through the native API).
#[test]
fn kubectl_reads_node_leases() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::saved_by(&server, dir.path());
    server.register_node("lease-node");
    server.renew_lease("lease-node");

    let described = kubectl.run(&["describe", "node", "lease-node"]);
    assert!(!described.contains("Failed to get lease"), "{described}");
    let lease: Vec<&str> = described.lines().skip_while(|l| !l.starts_with("Lease:")).take(4).collect();
    assert_eq!(lease.get(1).map(|l| l.split_whitespace().collect::<Vec<_>>()), Some(vec!["HolderIdentity:", "lease-node"]), "{described}");
    assert!(lease.get(2).is_some_and(|l| l.contains("AcquireTime:") && l.contains("<unset>")), "{described}");
    assert!(lease.get(3).is_some_and(|l| l.contains("RenewTime:") && !l.contains("<unset>")), "{described}");

    let all = kubectl.run(&["get", "leases", "-A"]);
    let header: Vec<&str> = all.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAMESPACE", "NAME", "HOLDER", "AGE"], "{all}");
    assert!(all.lines().any(|l| l.split_whitespace().take(3).eq(["kube-node-lease", "lease-node", "lease-node"])), "{all}");
    let nodes = kubectl.run(&["get", "leases", "-n", "kube-node-lease", "-o", "name"]);
    assert_eq!(nodes.trim(), "lease.coordination.k8s.io/lease-node", "only the nodes' leases: {nodes}");
    let yaml = kubectl.run(&["get", "lease", "lease-node", "-n", "kube-node-lease", "-o", "yaml"]);
    assert!(yaml.contains("apiVersion: coordination.k8s.io/v1") && yaml.contains("leaseDurationSeconds: 40"), "{yaml}");

    let refused = kubectl.output(&["delete", "lease", "lease-node", "-n", "kube-node-lease"]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && said.contains("MethodNotAllowed") && said.contains("renews its node's lease"), "{said}");
}
