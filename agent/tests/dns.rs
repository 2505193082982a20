//! The node's cluster DNS and service variables, seen from inside real Docker pods on the
//! CNI pod network: busybox's `nslookup` asks the node's DNS across the pod bridge, and `env`
//! shows the variables. The node forwards nothing (tests never resolve a name outside the
//! cluster), and nothing but the test's own pods sends a packet.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use agent::network::{CniNetwork, DEFAULT_SUBNET, Subnet};
use common::{DockerNode, RemoveRules, container, docker_node, pod_network, spec, state_dir, unique};
use shared::model::{ObjectMeta, PodPhase, Service, ServicePort, ServiceSpec};

const WAIT: Duration = Duration::from_secs(30);

fn service(name: &str, cluster_ip: &str, selector: &str, port: ServicePort) -> Service {
    Service {
        kind: "Service".into(),
        metadata: ObjectMeta::named("default", name),
        spec: ServiceSpec {
            selector: BTreeMap::from([("app".to_string(), selector.to_string())]),
            ports: vec![port],
            cluster_ip: cluster_ip.into(),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// What the script printed after the line `== <name>`, up to the next such line.
fn section<'a>(output: &'a str, name: &str) -> &'a str {
    let start = output.find(&format!("== {name}\n")).unwrap_or_else(|| panic!("no section {name} in:\n{output}")) + name.len() + 4;
    let rest = &output[start..];
    &rest[..rest.find("\n== ").map_or(rest.len(), |end| end + 1)]
}

/// The addresses `nslookup` printed as answers (not the server's own `Address:` line).
fn answers(section: &str) -> Vec<String> {
    let mut addresses: Vec<String> = section
        .lines()
        .filter_map(|line| line.strip_prefix("Address:"))
        .map(str::trim)
        .filter(|address| !address.contains(':'))
        .map(String::from)
        .collect();
    addresses.sort();
    addresses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_find_a_service_a_headless_service_and_not_an_unknown_name_through_the_nodes_dns() {
    let DockerNode { node, api, agent, cleanup: _cleanup, .. } = docker_node().await;
    let _remove_rules = RemoveRules::of(&api);
    let client = api.client();
    let http = ServicePort { name: "http".into(), port: 80, target_port: 8080, ..Default::default() };
    client.create(&service("web-api", "10.96.77.7", "web", http)).await.expect("the Service web-api");
    let pg = ServicePort { name: "pg".into(), port: 5432, target_port: 5432, ..Default::default() };
    client.create(&service("db", "None", "db", pg)).await.expect("the headless Service db");

    let labels = BTreeMap::from([("app".to_string(), "db".to_string())]);
    let mut db_ips = Vec::new();
    for name in ["db-0", "db-1"] {
        let pod = api.add_labelled_pod(&node, name, labels.clone(), spec(vec![container("db", &["sleep", "3600"])], "Always")).await;
        let running = api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
        db_ips.push(running.status.pod_ip);
    }
    db_ips.sort();

    // The headless Service's answer follows its endpoints, which the controller fills once
    // both pods are ready: the client asks until it has both.
    let script = "for i in $(seq 100); do [ $(nslookup -type=a db | grep -c '^Address: 10\\.') = 2 ] && break; sleep 0.2; done; \
         echo '== short'; nslookup -type=a web-api; \
         echo '== full'; nslookup -type=a web-api.default.svc.cluster.local; \
         echo '== headless'; nslookup -type=a db; \
         echo '== unknown'; nslookup -type=a nope.default.svc.cluster.local.; \
         echo '== env'; env | grep '^WEB_API_' | sort; \
         echo '== resolv'; cat /etc/resolv.conf; echo '== end'"
        .to_string();
    let asker = api.add_pod(&node, "asker", spec(vec![container("asker", &["sh", "-c", &script])], "Never")).await;
    api.wait_for(&asker.metadata.uid, "the asker done", WAIT, |p| p.status.phase == PodPhase::Succeeded).await;
    let output = reqwest::get(format!("{}/logs/default/asker", agent.endpoint)).await.unwrap().text().await.unwrap();

    assert_eq!(answers(section(&output, "short")), ["10.96.77.7"], "the short name, through the search list:\n{output}");
    assert_eq!(answers(section(&output, "full")), ["10.96.77.7"], "the full name:\n{output}");
    assert_eq!(answers(section(&output, "headless")), db_ips, "one address per ready pod:\n{output}");
    assert!(section(&output, "unknown").contains("NXDOMAIN"), "an unknown name:\n{output}");

    let env = section(&output, "env");
    for variable in [
        "WEB_API_SERVICE_HOST=10.96.77.7",
        "WEB_API_SERVICE_PORT=80",
        "WEB_API_SERVICE_PORT_HTTP=80",
        "WEB_API_PORT=tcp://10.96.77.7:80",
        "WEB_API_PORT_80_TCP_ADDR=10.96.77.7",
    ] {
        assert!(env.lines().any(|line| line == variable), "{variable} missing from the container's environment:\n{env}");
    }
    assert!(!output.contains("DB_SERVICE_HOST"), "a headless Service has no variables");

    let resolv = section(&output, "resolv");
    let nameserver = resolv.lines().find_map(|l| l.strip_prefix("nameserver ")).unwrap_or_else(|| panic!("no nameserver in:\n{resolv}"));
    let pod_subnet = agent::network::Subnet::parse(agent::network::DEFAULT_SUBNET).unwrap();
    assert!(pod_subnet.overlaps(&agent::network::Subnet::parse(&format!("{nameserver}/32")).unwrap()), "on the pod bridge: {resolv}");
    assert!(resolv.contains("search default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"), "{resolv}");

    // `dnsPolicy: Default` keeps the engine's resolv.conf; `enableServiceLinks: false` no variables.
    let mut plain = spec(vec![container("plain", &["sh", "-c", "cat /etc/resolv.conf; env"])], "Never");
    plain.dns_policy = "Default".into();
    plain.enable_service_links = Some(false);
    let plain = api.add_pod(&node, "plain", plain).await;
    api.wait_for(&plain.metadata.uid, "plain done", WAIT, |p| p.status.phase == PodPhase::Succeeded).await;
    let output = reqwest::get(format!("{}/logs/default/plain", agent.endpoint)).await.unwrap().text().await.unwrap();
    assert!(output.contains("PATH="), "the container ran: {output}");
    assert!(!output.contains(nameserver) && !output.contains("svc.cluster.local"), "not the cluster's DNS:\n{output}");
    assert!(!output.contains("WEB_API_"), "no service variables:\n{output}");
    agent.stop().await;
}

/// The addresses on the host's loopback interface.
fn loopback_addresses() -> String {
    let out = std::process::Command::new("ip").args(["-o", "address", "show", "dev", "lo"]).output().expect("ip runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn each_node_has_a_dns_address_of_its_own_kept_across_restarts_until_it_lets_it_go() {
    let (first, second) = (unique("node"), unique("node"));
    let network = |node: &str| {
        let config = pod_network(node);
        CniNetwork::new(Subnet::parse(DEFAULT_SUBNET).unwrap(), &config.state_dir, &config.plugin_dirs)
    };
    let on_loopback = |address: std::net::IpAddr| loopback_addresses().contains(&format!(" {address}/32 "));
    let (one, two) = (network(&first), network(&second));
    let held = one.own_address(&first).unwrap();
    let address = held.address;
    assert!(Subnet::parse(DEFAULT_SUBNET).unwrap().overlaps(&Subnet::parse(&format!("{address}/32")).unwrap()), "{address}");
    assert!(on_loopback(address), "on the loopback: {}", loopback_addresses());
    let twice = network(&first).own_address(&first).unwrap_err();
    assert!(matches!(twice, agent::network::Error::AddressHeld(_)), "one holder at a time: {twice}");
    assert!(one.sweep_own_addresses().unwrap().is_empty(), "a held address is not swept");

    // As an agent that crashed: the address stays on the loopback until the next start sweeps it.
    drop(held);
    assert!(on_loopback(address));
    assert_eq!(network(&first).sweep_own_addresses().unwrap(), std::slice::from_ref(&first));
    assert!(!on_loopback(address), "swept: {}", loopback_addresses());
    let again = network(&first).own_address(&first).unwrap();
    assert_eq!(again.address, address, "the same after a restart");
    assert!(on_loopback(address));
    let other = two.own_address(&second).unwrap();
    let other_address = other.address;
    assert_ne!(other_address, address, "another node on the host has its own");

    drop((again, other));
    one.release_own_address(&first).unwrap();
    two.release_own_address(&second).unwrap();
    assert!(!on_loopback(address) && !on_loopback(other_address), "let go: {}", loopback_addresses());
    one.release_own_address(&first).expect("letting go again is fine");
    for node in [first, second] {
        let _ = std::fs::remove_dir_all(state_dir(&node));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_stops_takes_its_dns_address_off_the_loopback_and_the_next_one_puts_it_back() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node().await;
    let record = state_dir(&node).join("addresses").join(format!("dns-{node}"));
    let address = std::fs::read_to_string(&record).expect("the agent's DNS address is recorded").trim().to_string();
    let on_loopback = || loopback_addresses().contains(&format!(" {address}/32 "));
    assert!(on_loopback(), "{address} on the loopback while the agent runs: {}", loopback_addresses());

    agent.stop().await;
    assert!(!on_loopback(), "a stopped agent leaves nothing on the loopback: {}", loopback_addresses());
    assert!(record.exists(), "its containers are kept, and their resolv.conf names the address: it stays leased");

    let restarted = common::TestAgent::start_configured(&node, docker.clone(), api.clone(), 0, |config| {
        config.remove_containers_on_exit = true;
    })
    .await;
    shepherd_testing::poll(WAIT, "the address back on the loopback", || async { on_loopback().then_some(()) }).await;
    assert_eq!(std::fs::read_to_string(&record).unwrap().trim(), address, "the same address again");
    restarted.stop().await;
    assert!(!on_loopback() && !record.exists(), "gone with the node's containers: {}", loopback_addresses());
}
