//! The service proxy against the real Docker engine, the CNI pod network and the host's
//! iptables: a busybox httpd Deployment behind a NodePort Service answers on 127.0.0.1 from
//! the host and on its cluster IP from a pod on the bridge, and keeps answering, request
//! after request, while the agent restarts and writes its rules again; its rules go when
//! the agent leaves with its containers; a Service without a ready endpoint refuses a
//! connection to its cluster IP at once. The host sends only to 127.0.0.1; the pod only to
//! the Service, on the pod bridge.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::{Api, Cleanup, RemoveRules, TestAgent, container, docker, minimal_image, spec, unique};
use serde_json::json;
use server::service_addresses::ServiceRanges;
use shared::model::{Deployment, PodPhase, Service};
use shared::registration::HOSTNAME_LABEL;
use shepherd_testing::{eventually, poll};

const WAIT: Duration = Duration::from_secs(60);
/// At most this many requests go through the NodePort across the restart.
const MAX_REQUESTS: usize = 3000;

/// A range no other test's cluster allocates from, so that their rules never meet ours.
fn ranges() -> ServiceRanges {
    ServiceRanges::parse("10.96.251.0/24", "32700-32767", &[]).unwrap()
}

fn nat_table() -> String {
    iptables_table("nat")
}

fn iptables_table(name: &str) -> String {
    let output = std::process::Command::new("iptables-save").args(["-t", name]).output().expect("iptables-save runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

async fn service(api: &Api, name: &str, type_: &str) -> Service {
    service_selecting(api, name, type_, "shop").await
}

async fn service_selecting(api: &Api, name: &str, type_: &str, app: &str) -> Service {
    let service: Service = serde_json::from_value(json!({
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": type_, "selector": {"app": app}, "ports": [{"name": "http", "port": 80, "target_port": 8080}]}
    }))
    .unwrap();
    api.client().create(&service).await.expect("the service is created")
}

/// The page of one request to `url` on a new connection, so that each goes through the rules.
async fn fetch(http: &reqwest::Client, url: &str) -> Result<String, String> {
    let response = http.get(url).send().await.map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("status {}", response.status()));
    }
    response.text().await.map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_port_and_a_cluster_ip_reach_the_pods_and_keep_doing_so_across_an_agent_restart() {
    let docker = docker().await;
    minimal_image(&docker).await;
    let node = unique("node");
    let _cleanup = Cleanup(node.clone());
    let api = Api::start_with(server::Config { service_ranges: ranges(), ..server::Config::in_memory() }).await;
    let agent = TestAgent::start(&node, docker.clone(), api.clone()).await;
    let remove_rules = RemoveRules::of(&api);
    let scope = remove_rules.0.clone();

    let deployment: Deployment = serde_json::from_value(json!({
        "kind": "Deployment",
        "metadata": {"name": "shop", "namespace": "default"},
        "spec": {
            "replicas": 2,
            "selector": {"app": "shop"},
            "template": {
                "metadata": {"labels": {"app": "shop"}},
                "spec": {
                    "node_selector": {(HOSTNAME_LABEL): node},
                    "termination_grace_period_seconds": 1,
                    "containers": [{
                        "name": "httpd",
                        "image": "minimal",
                        "command": ["/bin/sh", "-c", "mkdir -p /www && echo \"the shop on $(hostname)\" > /www/index.html && exec httpd -f -p 8080 -h /www"]
                    }]
                }
            }
        }
    }))
    .unwrap();
    api.client().create(&deployment).await.expect("the deployment is created");
    let shop = service(&api, "shop", "NodePort").await;
    let (cluster_ip, node_port) = (shop.spec.cluster_ip.clone(), shop.spec.ports[0].node_port);
    assert!(cluster_ip.starts_with("10.96.251.") && (32700..=32767).contains(&node_port), "{:?}", shop.spec);
    eventually(api.client(), WAIT, "two ready endpoints", || async {
        let shop: Service = api.client().get("default", "shop").await.map_err(|e| e.to_string())?;
        (shop.status.endpoints.len() == 2).then_some(()).ok_or(format!("{:?}", shop.status))
    })
    .await;

    // From the host, on 127.0.0.1, each request on a connection of its own.
    let http = reqwest::Client::builder().pool_max_idle_per_host(0).timeout(Duration::from_secs(5)).build().unwrap();
    let url = format!("http://127.0.0.1:{node_port}/");
    let pages = poll(WAIT, "the NodePort on 127.0.0.1 to answer", || async { fetch(&http, &url).await.ok() }).await;
    assert!(pages.starts_with("the shop on "), "{pages}");
    // The server may list both endpoints a moment before the proxy has both in its rules:
    // asked until both answered (a pick that never reaches one fails at WAIT).
    let served_by = std::sync::Mutex::new(std::collections::HashSet::new());
    poll(WAIT, "the random pick to reach both pods", || async {
        let page = fetch(&http, &url).await.expect("the NodePort answers");
        let mut served_by = served_by.lock().unwrap();
        served_by.insert(page);
        (served_by.len() == 2).then_some(())
    })
    .await;

    // From a pod on the bridge, to the cluster IP.
    // busybox's wget crashes in the static `minimal` image; its nc speaks the request.
    let request = format!("printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 {cluster_ip} 80 2>&1 | grep 'the shop on '");
    let fetcher = container("fetch", &["/bin/sh", "-c", &request]);
    let pod = api.add_pod(&node, "fetcher", spec(vec![fetcher], "Never")).await;
    let done = api.wait_for(&pod.metadata.uid, "Succeeded or Failed", WAIT, |p| p.status.phase.is_terminal()).await;
    if done.status.phase != PodPhase::Succeeded {
        let id = &done.status.container_statuses[0].container_id;
        let logs = std::process::Command::new("docker").args(["logs", id]).output().expect("docker logs");
        panic!(
            "a request to the cluster IP from a pod: {:?}\n{}{}",
            done.status.message,
            String::from_utf8_lossy(&logs.stdout),
            String::from_utf8_lossy(&logs.stderr)
        );
    }

    // A loop of requests through the NodePort while the agent stops and another starts and
    // writes the rules again: a Service made in between tells when the new rules are in.
    let (stop, sent, failures) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let requests = {
        let (stop, sent, failures, http, url) = (stop.clone(), sent.clone(), failures.clone(), http.clone(), url.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) && sent.load(Ordering::SeqCst) < MAX_REQUESTS {
                if let Err(e) = fetch(&http, &url).await {
                    eprintln!("request {} failed: {e}", sent.load(Ordering::SeqCst));
                    failures.fetch_add(1, Ordering::SeqCst);
                }
                sent.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    agent.stop().await;
    let marker = service(&api, "marker", "ClusterIP").await;
    let restarted =
        TestAgent::start_configured(&node, docker.clone(), api.clone(), 0, |config| config.remove_containers_on_exit = true).await;
    poll(WAIT, "the restarted agent's rules", || async {
        nat_table().contains(&format!("-d {}/32", marker.spec.cluster_ip)).then_some(())
    })
    .await;
    let rewritten_at = sent.load(Ordering::SeqCst);
    poll(WAIT, "requests after the rewrite", || async { (sent.load(Ordering::SeqCst) >= rewritten_at + 50).then_some(()) }).await;
    stop.store(true, Ordering::SeqCst);
    requests.await.unwrap();
    let (sent, failures) = (sent.load(Ordering::SeqCst), failures.load(Ordering::SeqCst));
    eprintln!("{sent} requests through the NodePort across the restart, {failures} failed");
    assert!(sent < MAX_REQUESTS, "the rewrite came before the loop's bound");
    assert_eq!(failures, 0, "of {sent} requests");

    // A Service that goes takes its chains along; an agent that leaves with its containers, the rest.
    let chains_with_marker = nat_table().lines().filter(|l| l.starts_with(":SHEP-SVC-") && scope.owns(&l[1..l.find(' ').unwrap()])).count();
    api.client().delete(shared::model::Kind::Service, "default", "marker", &Default::default()).await.unwrap();
    poll(WAIT, "the marker's chain to go", || async {
        let left = nat_table().lines().filter(|l| l.starts_with(":SHEP-SVC-") && scope.owns(&l[1..l.find(' ').unwrap()])).count();
        (left == chains_with_marker - 1).then_some(())
    })
    .await;
    restarted.stop().await;
    let table = nat_table();
    assert!(!table.contains(&scope.services_chain()), "no chain of the cluster is left:\n{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_to_a_service_without_endpoints_is_refused_at_once() {
    let docker = docker().await;
    minimal_image(&docker).await;
    let node = unique("node");
    let _cleanup = Cleanup(node.clone());
    let ranges = ServiceRanges::parse("10.96.250.0/24", "32600-32699", &[]).unwrap();
    let api = Api::start_with(server::Config { service_ranges: ranges, ..server::Config::in_memory() }).await;
    let agent = TestAgent::start(&node, docker.clone(), api.clone()).await;
    let remove_rules = RemoveRules::of(&api);
    let scope = remove_rules.0.clone();

    let empty = service_selecting(&api, "empty", "NodePort", "nothing-has-this").await;
    let cluster_ip = empty.spec.cluster_ip.clone();
    poll(WAIT, "the REJECTs of the Service's port and of its other ports in the filter table", || async {
        let filter = iptables_table("filter");
        let rule = format!("-A {} -d {cluster_ip}/32", scope.services_chain());
        let rejects: Vec<&str> =
            filter.lines().filter(|l| l.starts_with(&rule) && l.ends_with("-j REJECT --reject-with icmp-port-unreachable")).collect();
        let port = rejects.iter().any(|l| l.contains("--dport 80") && l.contains("has no endpoints"));
        let others = rejects.iter().any(|l| !l.contains("--dport") && l.contains("has no such port"));
        (port && others).then_some(())
    })
    .await;

    // Sent only once the REJECTs are in, so that nothing leaves the bridge. nc waits up to
    // 20 s for a connection; without a REJECT it would time out and say so. Port 81 is not
    // the Service's.
    let connect = format!("for port in 80 81; do nc -w 20 {cluster_ip} $port </dev/null 2>&1; echo exit $?; done");
    let pod = api.add_pod(&node, "client", spec(vec![container("connect", &["/bin/sh", "-c", &connect])], "Never")).await;
    let done = api.wait_for(&pod.metadata.uid, "Succeeded or Failed", WAIT, |p| p.status.phase.is_terminal()).await;
    let id = &done.status.container_statuses[0].container_id;
    let logs = std::process::Command::new("docker").args(["logs", id]).output().expect("docker logs");
    let said = String::from_utf8_lossy(&logs.stdout).into_owned();
    assert_eq!(said.matches("Connection refused").count(), 2, "nc to {cluster_ip}:80 and :81: {said}");
    assert_eq!(said.matches("exit 1").count(), 2, "nc to {cluster_ip}:80 and :81: {said}");
    agent.stop().await;
}
