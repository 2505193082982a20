//! The two-tier example, `examples/kubernetes/two-tier.yaml`, end to end on the real Docker
//! engine, the CNI pod network, the node's DNS and its proxy: applied unchanged with the real
//! kubectl, its page on `http://127.0.0.1:30080/` is the backend's ConfigMap as the frontend
//! fetched it by the backend Service's DNS name, through the cluster IP, with the Secret's
//! password; a change of the ConfigMap reaches the page within a minute, as the kubelet's does.
//! The host sends only to 127.0.0.1; the pods only to each other, on the pod bridge. Every
//! container, NAT rule and address the agent made goes with it. Fails, never skips, when
//! kubectl is missing.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent::proxy::rules::{Scope, Table};
use common::{Api, Cleanup, TestAgent, docker, minimal_image, unique};
use server::service_addresses::ServiceRanges;
use shared::model::Service;
use shepherd_testing::poll;

const WAIT: Duration = Duration::from_secs(60);
/// The NodePort the example asks for.
const NODE_PORT: u16 = 30080;
/// The Secret's password, which the page must never show.
const PASSWORD: &str = "s3cret-sheep";

/// A cluster IP range no other test's cluster allocates from, and the example's NodePort.
fn ranges() -> ServiceRanges {
    ServiceRanges::parse("10.96.250.0/24", "30080-30089", &[]).unwrap()
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/kubernetes/two-tier.yaml")
}

/// The real kubectl, on a kubeconfig of its own that names the test's server.
struct Kubectl {
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn new(dir: &Path, server: &str) -> Kubectl {
        let kubeconfig = dir.join("kubeconfig");
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {server}/k8s\n\
             contexts:\n- name: test\n  context:\n    cluster: test\n    user: test\ncurrent-context: test\nusers:\n- name: test\n  user: {{}}\n"
        );
        std::fs::write(&kubeconfig, config).unwrap();
        Kubectl { kubeconfig }
    }

    /// Runs kubectl with `args`; its output, or the test fails with what it said.
    fn run(&self, args: &[&str]) -> String {
        let output = std::process::Command::new("kubectl")
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .output()
            .unwrap_or_else(|e| panic!("kubectl is not on PATH ({e}): scripts/setup.sh installs it"));
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "kubectl {args:?}: {stdout}{}", String::from_utf8_lossy(&output.stderr));
        stdout
    }
}

/// The frontend's page, on a new connection, so that each request goes through the rules.
async fn page(http: &reqwest::Client) -> Result<String, String> {
    let response = http.get(format!("http://127.0.0.1:{NODE_PORT}/")).send().await.map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response.text().await.map_err(|e| e.to_string())?;
    if status.is_success() { Ok(body) } else { Err(format!("status {status}: {body}")) }
}

/// Takes the cluster's rules away when the test ends, also when it fails half-way.
struct RemoveRules(Scope);

impl Drop for RemoveRules {
    fn drop(&mut self) {
        if let Err(e) = agent::proxy::host::apply(&self.0, &Table::default()) {
            eprintln!("cannot remove the test cluster's rules: {e}");
        }
    }
}

fn nat_table() -> String {
    let output = std::process::Command::new("iptables-save").args(["-t", "nat"]).output().expect("iptables-save runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_two_tier_example_serves_the_backends_page_through_dns_the_cluster_ip_and_a_node_port() {
    let docker = docker().await;
    minimal_image(&docker).await;
    let node = unique("node");
    let cleanup = Cleanup(node.clone());
    let api = Api::start_with(server::Config { service_ranges: ranges(), ..server::Config::in_memory() }).await;
    let agent = TestAgent::start_configured(&node, docker.clone(), api.clone(), 0, |config| config.remove_containers_on_exit = true).await;
    let scope = Scope::new(&api.cluster, agent::network::Subnet::parse(agent::network::DEFAULT_SUBNET).unwrap());
    let remove_rules = RemoveRules(scope.clone());
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::new(dir.path(), &api.server.url);
    let example = example();

    let applied = kubectl.run(&["apply", "-f", example.to_str().unwrap()]);
    for object in [
        "configmap/backend-page",
        "secret/backend-auth",
        "deployment.apps/backend",
        "service/backend",
        "configmap/frontend-cgi",
        "deployment.apps/frontend",
        "service/frontend",
    ] {
        assert!(applied.contains(&format!("{object} created")), "{applied}");
    }
    for deployment in ["backend", "frontend"] {
        let status = kubectl.run(&["rollout", "status", &format!("deployment/{deployment}"), "--timeout=60s"]);
        assert!(status.contains("successfully rolled out"), "{status}");
    }
    let mut cluster_ips = Vec::new();
    for name in ["backend", "frontend"] {
        let service = poll(WAIT, &format!("two ready endpoints of {name}"), || async {
            let service: Service = api.client().get("default", name).await.ok()?;
            (service.status.endpoints.len() == 2).then_some(service)
        })
        .await;
        cluster_ips.push(service.spec.cluster_ip);
    }
    assert!(cluster_ips.iter().all(|ip| ip.starts_with("10.96.250.")), "{cluster_ips:?}");
    let frontend: Service = api.client().get("default", "frontend").await.unwrap();
    assert_eq!(frontend.spec.ports[0].node_port, i32::from(NODE_PORT), "the example's NodePort is honoured");

    // Nothing is sent to a cluster IP before its rules are in: without them it would leave
    // the machine by the default route.
    poll(WAIT, "the rules of both Services", || async {
        let table = nat_table();
        cluster_ips.iter().all(|ip| table.contains(&format!("-d {ip}/32"))).then_some(())
    })
    .await;

    // From the host, on 127.0.0.1: the frontend asked the backend by name, got its cluster
    // IP from the node's DNS, and was let in with the Secret's password.
    let http = reqwest::Client::builder().pool_max_idle_per_host(0).timeout(Duration::from_secs(15)).build().unwrap();
    let first = poll(WAIT, "the NodePort on 127.0.0.1 to answer", || async { page(&http).await.ok() }).await;
    let resolved = format!("backend.default.svc.cluster.local is {})", cluster_ips[0]);
    for promised in [
        "<h1>Hello from the backend</h1>",
        "This page is the ConfigMap backend-page",
        resolved.as_str(),
        "The backend answered: HTTP/1.1 200 OK",
        &format!("Secret backend-auth ({} characters)", PASSWORD.len()),
    ] {
        assert!(first.contains(promised), "the page shows {promised:?}:\n{first}");
    }
    assert!(!first.contains(PASSWORD), "the page never shows the password:\n{first}");
    let mut served_by = std::collections::HashSet::new();
    for _ in 0..20 {
        let page = page(&http).await.expect("the NodePort answers");
        let pod = page.split("Frontend pod ").nth(1).and_then(|rest| rest.split_whitespace().next()).map(str::to_string);
        served_by.insert(pod.unwrap_or_else(|| panic!("the page names the frontend pod:\n{page}")));
    }
    assert!(served_by.iter().all(|pod| pod.starts_with("frontend-")), "{served_by:?}");
    assert_eq!(served_by.len(), 2, "the NodePort's random pick reaches both frontend pods: {served_by:?}");

    // The page is fetched per request, from files the agent updates in place.
    let patch = r#"{"data":{"index.html":"<h1>Version 2</h1>\n"}}"#;
    assert!(kubectl.run(&["patch", "configmap", "backend-page", "-p", patch]).contains("patched"));
    let changed = tokio::time::Instant::now();
    let second = poll(WAIT, "the ConfigMap's change to reach the page", || async {
        page(&http).await.ok().filter(|page| page.contains("<h1>Version 2</h1>"))
    })
    .await;
    eprintln!("the ConfigMap's change reached the page after {:?}", changed.elapsed());
    assert!(!second.contains("Hello from the backend"), "{second}");

    // Everything goes: the objects, then the agent with its containers, rules and address.
    let dns_record = common::state_dir(&node).join("addresses").join(format!("dns-{node}"));
    let dns_address = std::fs::read_to_string(&dns_record).expect("the node's DNS address is recorded").trim().to_string();
    assert!(kubectl.run(&["delete", "-f", example.to_str().unwrap(), "--wait=false"]).contains("deleted"));
    agent.stop().await;
    drop(remove_rules);
    drop(cleanup);
    let table = nat_table();
    assert!(!table.contains(&scope.services_chain()), "no chain of the cluster is left:\n{table}");
    let containers = std::process::Command::new("docker")
        .args(["ps", "-aq", "--filter", &format!("label={}={node}", agent::runtime::LABEL_NODE)])
        .output()
        .expect("docker runs");
    assert!(containers.stdout.is_empty(), "no container of the node is left: {}", String::from_utf8_lossy(&containers.stdout));
    let loopback = std::process::Command::new("ip").args(["-4", "address", "show", "dev", "lo"]).output().expect("ip runs");
    let loopback = String::from_utf8_lossy(&loopback.stdout).into_owned();
    assert!(!loopback.contains(&format!("inet {dns_address}/32")), "the node's DNS address {dns_address} is left on lo:\n{loopback}");
}
