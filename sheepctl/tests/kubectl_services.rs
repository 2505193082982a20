//! The real kubectl (v1.32, on PATH) with Services through the Kubernetes-compatible API, on
//! a simulated node: `expose` gives a CLUSTER-IP (and a NodePort with `--type=NodePort`),
//! `get svc` shows them, `get endpointslices` and `describe svc` show the ready pods, and a
//! clusterIP out of the range is refused with kube-apiserver's words. Fails, never skips,
//! when kubectl is missing.

mod support;

use std::time::Duration;

use support::{Kubectl, TestServer};
use tokio_util::sync::CancellationToken;

const SHOP: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop
spec:
  replicas: 2
  selector:
    matchLabels:
      app: shop
  template:
    metadata:
      labels:
        app: shop
    spec:
      containers:
      - name: shop
        image: minimal
";

const ELSEWHERE: &str = "apiVersion: v1
kind: Service
metadata:
  name: elsewhere
spec:
  clusterIP: 10.97.0.1
  selector:
    app: shop
  ports:
  - port: 80
";

fn start_node(url: &str, shutdown: CancellationToken) -> std::thread::JoinHandle<()> {
    support::start_simulated_node(url, "kubectl-services-node", Duration::from_millis(200), shutdown)
}

/// The row of `name` in a kubectl table, split into its columns.
fn row(table: &str, name: &str) -> Vec<String> {
    let line = table.lines().find(|l| l.split_whitespace().next() == Some(name)).unwrap_or_else(|| panic!("no {name} in\n{table}"));
    line.split_whitespace().map(str::to_string).collect()
}

#[test]
fn kubectl_exposes_a_deployment_on_a_cluster_ip_and_lists_its_endpoint_slices() {
    let server = TestServer::start();
    let shutdown = CancellationToken::new();
    let node = start_node(&server.url, shutdown.clone());
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::saved_by(&server, dir.path());

    let shop = dir.path().join("shop.yaml");
    std::fs::write(&shop, SHOP).unwrap();
    assert_eq!(kubectl.run(&["apply", "-f", shop.to_str().unwrap()]), "deployment.apps/shop created\n");
    assert_eq!(kubectl.run(&["expose", "deploy", "shop", "--port=80"]), "service/shop exposed\n");
    let services = kubectl.run(&["get", "svc"]);
    assert!(services.starts_with("NAME") && services.contains("CLUSTER-IP"), "{services}");
    let shop = row(&services, "shop");
    assert_eq!((shop[1].as_str(), shop[3].as_str(), shop[4].as_str()), ("ClusterIP", "<none>", "80/TCP"), "{services}");
    let cluster_ip = shop[2].clone();
    assert!(cluster_ip.starts_with("10.96."), "{services}");

    assert!(kubectl.run(&["rollout", "status", "deploy/shop", "--timeout=60s"]).contains("successfully rolled out"));
    let slices = (0..100)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(100));
            kubectl.run(&["get", "endpointslices"])
        })
        .find(|table| {
            table.lines().any(|l| l.starts_with("shop ") && l.split_whitespace().nth(3).is_some_and(|e| e.split(',').count() == 2))
        })
        .expect("the shop's slice lists both pods within 10 s");
    assert!(slices.starts_with("NAME") && slices.contains("ADDRESSTYPE"), "{slices}");
    let slice = row(&slices, "shop");
    assert_eq!((slice[1].as_str(), slice[2].as_str()), ("IPv4", "80"), "{slices}");
    let by_label = kubectl.run(&["get", "endpointslices", "-l", "kubernetes.io/service-name=shop", "-o", "name"]);
    assert_eq!(by_label, "endpointslice.discovery.k8s.io/shop\n");

    let described = kubectl.run(&["describe", "svc", "shop"]);
    assert!(described.lines().any(|l| l.starts_with("IP:") && l.ends_with(&cluster_ip)), "{described}");
    let endpoints = described.lines().find(|l| l.starts_with("Endpoints:")).unwrap_or_else(|| panic!("{described}"));
    assert_eq!(endpoints.matches(":80").count(), 2, "{described}");

    assert_eq!(
        kubectl.run(&["expose", "deploy", "shop", "--port=80", "--name=shop-outside", "--type=NodePort"]),
        "service/shop-outside exposed\n"
    );
    let outside = row(&kubectl.run(&["get", "svc", "shop-outside"]), "shop-outside");
    assert_eq!(outside[1], "NodePort");
    let (port, node_port) = outside[4].split_once(':').unwrap_or_else(|| panic!("{outside:?}"));
    assert!(port == "80" && node_port.trim_end_matches("/TCP").parse::<u16>().is_ok_and(|p| (30000..=32767).contains(&p)), "{outside:?}");

    let elsewhere = dir.path().join("elsewhere.yaml");
    std::fs::write(&elsewhere, ELSEWHERE).unwrap();
    let refused = kubectl.output(&["apply", "-f", elsewhere.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && said.contains("The range of valid IPs is 10.96.0.0/16"), "{said}");

    shutdown.cancel();
    node.join().unwrap();
}
