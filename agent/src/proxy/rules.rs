//! The service proxy's nat table, as kube-proxy's iptables mode writes it, built from the
//! Services and their ready endpoints as text for `iptables-restore --noflush`: pure, so that
//! each rule is tested here and the I/O stays in [`super::host`].
//!
//! - `SHEP-SERVICES-<c>` (jumped to from PREROUTING and OUTPUT) sends each cluster IP and
//!   port to its Service port's chain, and ends with the node ports of local addresses;
//! - `SHEP-SVC-<c>-<hash>` picks one ready endpoint at random: the i-th of n with
//!   probability 1/(n−i), so that each gets 1/n, as kube-proxy's `-m statistic` rules do;
//! - `SHEP-SEP-<c>-<hash>` DNATs to one endpoint;
//! - `SHEP-MARK-MASQ-<c>` marks a connection for masquerading and `SHEP-POSTROUTING-<c>`
//!   masquerades what is marked: node-port traffic (its source may be 127.0.0.1, which
//!   cannot leave the host), cluster-IP traffic from outside the pod subnet, and a pod
//!   reaching itself through its Service (hairpin).
//!
//! `<c>` is the cluster's tag: the chains of several clusters on one host (tests run
//! several) never meet, and each cluster's stale chains are known by their names.

use std::fmt::Write as _;

use aws_lc_rs::digest;
use shared::model::{Endpoint, Service, ServicePort};
use shared::subnet::Subnet;

/// Every chain of the proxy begins so.
pub const PREFIX: &str = "SHEP-";
/// The mark bit of a connection to masquerade, kube-proxy's.
const MASQUERADE_MARK: &str = "0x4000";

/// Whose rules these are and which sources are pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// Five hex digits of the cluster id's hash.
    pub tag: String,
    /// The pods' subnet: traffic from it to a cluster IP keeps its source.
    pub pod_subnet: Subnet,
}

fn sha256_hex(parts: &[&str], digits: usize) -> String {
    let digest = digest::digest(&digest::SHA256, parts.join("\u{0}").as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect::<String>()[..digits].to_string()
}

impl Scope {
    pub fn new(cluster: &str, pod_subnet: Subnet) -> Scope {
        Scope { tag: sha256_hex(&[cluster], 5), pod_subnet }
    }

    pub fn services_chain(&self) -> String {
        format!("{PREFIX}SERVICES-{}", self.tag)
    }

    fn node_ports_chain(&self) -> String {
        format!("{PREFIX}NODEPORTS-{}", self.tag)
    }

    fn mark_chain(&self) -> String {
        format!("{PREFIX}MARK-MASQ-{}", self.tag)
    }

    pub fn postrouting_chain(&self) -> String {
        format!("{PREFIX}POSTROUTING-{}", self.tag)
    }

    fn hashed_chain(&self, kind: &str, parts: &[&str]) -> String {
        let mut all = vec![self.tag.as_str()];
        all.extend_from_slice(parts);
        format!("{PREFIX}{kind}-{}-{}", self.tag, sha256_hex(&all, 12))
    }

    /// Whether `chain` is one this cluster's proxy writes (and so may delete).
    pub fn owns(&self, chain: &str) -> bool {
        [self.services_chain(), self.node_ports_chain(), self.mark_chain(), self.postrouting_chain()].contains(&chain.to_string())
            || ["SVC", "SEP"].iter().any(|kind| chain.starts_with(&format!("{PREFIX}{kind}-{}-", self.tag)))
    }

    /// The chains every table of this scope has.
    fn top_chains(&self) -> [String; 4] {
        [self.services_chain(), self.node_ports_chain(), self.mark_chain(), self.postrouting_chain()]
    }
}

/// One proxied port of a Service with a cluster IP and ready endpoints.
struct Proxied<'a> {
    service: &'a Service,
    cluster_ip: &'a str,
    port: &'a ServicePort,
}

impl Proxied<'_> {
    /// `namespace/name:port`, as kube-proxy's comments name a Service port.
    fn name(&self) -> String {
        let port = if self.port.name.is_empty() { self.port.port.to_string() } else { self.port.name.clone() };
        format!("{}:{port}", self.service.metadata.key())
    }

    fn protocol(&self) -> String {
        self.port.protocol_name().to_ascii_lowercase()
    }

    fn target_port(&self) -> i32 {
        if self.port.target_port == 0 { self.port.port } else { self.port.target_port }
    }

    fn chain(&self, scope: &Scope) -> String {
        scope.hashed_chain("SVC", &[&self.name(), &self.protocol()])
    }

    fn endpoint_chain(&self, scope: &Scope, endpoint: &Endpoint) -> String {
        scope.hashed_chain("SEP", &[&self.name(), &self.protocol(), &endpoint.ip, &self.target_port().to_string()])
    }
}

/// What the proxy wants in the nat table: its chains, in the order written, and their rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    pub chains: Vec<String>,
    pub rules: Vec<String>,
}

impl Table {
    /// Nothing to proxy: no chain and no jump is wanted.
    pub fn is_empty(&self) -> bool {
        self.chains.is_empty()
    }

    /// The `iptables-restore --noflush` input that makes the nat table hold this: each of
    /// its chains declared (which empties it, in the same commit that fills it again, so
    /// that no packet finds it empty) and its rules; `stale`, the chains of the scope that
    /// exist and are no longer wanted, emptied and deleted.
    pub fn restore_text(&self, stale: &[String]) -> String {
        let mut text = String::from("*nat\n");
        for chain in self.chains.iter().chain(stale) {
            let _ = writeln!(text, ":{chain} - [0:0]");
        }
        for rule in &self.rules {
            text.push_str(rule);
            text.push('\n');
        }
        for chain in stale {
            let _ = writeln!(text, "-X {chain}");
        }
        text.push_str("COMMIT\n");
        text
    }
}

/// The nat table the Services want: every port of a Service with a cluster IP and at
/// least one ready endpoint (a Service without any gets no rule, so that nothing is sent
/// to a pod that is not ready); an empty table when no Service has one.
pub fn table<'a>(scope: &Scope, services: impl IntoIterator<Item = &'a Service>) -> Table {
    let mut proxied: Vec<Proxied> = Vec::new();
    for service in services {
        let Some(cluster_ip) = service.spec.virtual_ip() else { continue };
        if service.status.endpoints.is_empty() {
            continue;
        }
        proxied.extend(service.spec.ports.iter().map(|port| Proxied { service, cluster_ip, port }));
    }
    if proxied.is_empty() {
        return Table::default();
    }
    proxied.sort_by_key(|p| (p.service.metadata.key(), p.port.port, p.protocol()));
    let (services_chain, node_ports_chain, mark_chain, postrouting_chain) =
        (scope.services_chain(), scope.node_ports_chain(), scope.mark_chain(), scope.postrouting_chain());
    let mut table = Table { chains: scope.top_chains().to_vec(), rules: Vec::new() };
    let rules = &mut table.rules;
    rules.push(format!("-A {postrouting_chain} -m mark ! --mark {MASQUERADE_MARK}/{MASQUERADE_MARK} -j RETURN"));
    rules.push(format!("-A {postrouting_chain} -j MARK --xor-mark {MASQUERADE_MARK}"));
    rules.push(format!("-A {postrouting_chain} -m comment --comment \"shepherd service traffic requiring SNAT\" -j MASQUERADE"));
    rules.push(format!("-A {mark_chain} -j MARK --or-mark {MASQUERADE_MARK}"));
    for p in &proxied {
        let (name, protocol, chain) = (p.name(), p.protocol(), p.chain(scope));
        let destination = format!("-d {}/32 -p {protocol} -m {protocol} --dport {}", p.cluster_ip, p.port.port);
        rules.push(format!("-A {services_chain} -m comment --comment \"{name} cluster IP\" {destination} -j {chain}"));
        if p.port.node_port != 0 {
            let node_port = format!("-m comment --comment \"{name}\" -p {protocol} -m {protocol} --dport {}", p.port.node_port);
            rules.push(format!("-A {node_ports_chain} {node_port} -j {mark_chain}"));
            rules.push(format!("-A {node_ports_chain} {node_port} -j {chain}"));
        }
        table.chains.push(chain.clone());
        rules
            .push(format!("-A {chain} -m comment --comment \"{name} cluster IP\" ! -s {} {destination} -j {mark_chain}", scope.pod_subnet));
        let endpoints = &p.service.status.endpoints;
        for (i, endpoint) in endpoints.iter().enumerate() {
            let endpoint_chain = p.endpoint_chain(scope, endpoint);
            let target = format!("{}:{}", endpoint.ip, p.target_port());
            let left = endpoints.len() - i;
            let pick =
                if left > 1 { format!(" -m statistic --mode random --probability {:.10}", 1.0 / left as f64) } else { String::new() };
            rules.push(format!("-A {chain} -m comment --comment \"{name} -> {target}\"{pick} -j {endpoint_chain}"));
            table.chains.push(endpoint_chain.clone());
            rules.push(format!("-A {endpoint_chain} -m comment --comment \"{name}\" -s {}/32 -j {mark_chain}", endpoint.ip));
            rules.push(format!(
                "-A {endpoint_chain} -m comment --comment \"{name}\" -p {protocol} -m {protocol} -j DNAT --to-destination {target}"
            ));
        }
    }
    rules.push(format!(
        "-A {services_chain} -m comment --comment \"shepherd service nodeports; this must be the last rule in this chain\" -m addrtype --dst-type LOCAL -j {node_ports_chain}"
    ));
    table
}

#[cfg(test)]
mod tests {
    use shared::model::{ObjectMeta, ServiceSpec, service};

    use super::*;

    fn scope() -> Scope {
        Scope::new("cluster-a", Subnet::parse("10.77.0.0/16").unwrap())
    }

    fn endpoint(ip: &str) -> Endpoint {
        Endpoint { ip: ip.into(), pod: format!("pod-{ip}"), node_name: "n1".into() }
    }

    fn web(endpoints: &[&str]) -> Service {
        let mut service = Service { metadata: ObjectMeta::named("default", "web"), ..Default::default() };
        service.spec = ServiceSpec {
            type_: service::NODE_PORT.into(),
            cluster_ip: "10.96.1.1".into(),
            ports: vec![ServicePort { name: "http".into(), port: 80, target_port: 8080, node_port: 30086, protocol: String::new() }],
            ..Default::default()
        };
        service.status.endpoints = endpoints.iter().map(|ip| endpoint(ip)).collect();
        service
    }

    #[test]
    fn each_service_port_picks_among_its_ready_endpoints_at_random_and_dnats() {
        let scope = scope();
        let table = table(&scope, [&web(&["10.77.0.4", "10.77.0.5", "10.77.0.6"])]);
        let svc = table.chains[4].clone();
        let seps = &table.chains[5..];
        assert_eq!(table.chains.len(), 4 + 1 + 3, "the top chains, one per service port, one per endpoint");
        assert!(svc.starts_with(&format!("SHEP-SVC-{}-", scope.tag)) && svc.len() <= 28, "{svc}");
        let t = &scope.tag;
        let rules = &table.rules;
        assert!(rules.contains(&format!(
            "-A SHEP-SERVICES-{t} -m comment --comment \"default/web:http cluster IP\" -d 10.96.1.1/32 -p tcp -m tcp --dport 80 -j {svc}"
        )));
        let picks: Vec<&String> =
            rules.iter().filter(|r| r.starts_with(&format!("-A {svc} -m comment --comment \"default/web:http ->"))).collect();
        assert_eq!(picks.len(), 3);
        assert!(picks[0].contains("10.77.0.4:8080\" -m statistic --mode random --probability 0.3333333333 -j "), "{}", picks[0]);
        assert!(picks[1].contains("--probability 0.5000000000 -j "), "{}", picks[1]);
        assert!(!picks[2].contains("statistic") && picks[2].ends_with(&seps[2]), "the last takes what is left: {}", picks[2]);
        assert!(rules.contains(&format!(
            "-A {} -m comment --comment \"default/web:http\" -p tcp -m tcp -j DNAT --to-destination 10.77.0.6:8080",
            seps[2]
        )));
        assert!(
            rules.contains(&format!("-A {} -m comment --comment \"default/web:http\" -s 10.77.0.4/32 -j SHEP-MARK-MASQ-{t}", seps[0])),
            "hairpin"
        );
        assert!(rules.contains(&format!("-A {svc} -m comment --comment \"default/web:http cluster IP\" ! -s 10.77.0.0/16 -d 10.96.1.1/32 -p tcp -m tcp --dport 80 -j SHEP-MARK-MASQ-{t}")));
        assert_eq!(
            rules.last().unwrap(),
            &format!(
                "-A SHEP-SERVICES-{t} -m comment --comment \"shepherd service nodeports; this must be the last rule in this chain\" -m addrtype --dst-type LOCAL -j SHEP-NODEPORTS-{t}"
            )
        );
    }

    #[test]
    fn a_node_port_is_marked_for_masquerading_and_sent_to_the_service_chain() {
        let scope = scope();
        let table = table(&scope, [&web(&["10.77.0.4"])]);
        let (t, svc) = (&scope.tag, &table.chains[4]);
        let node_port = "-m comment --comment \"default/web:http\" -p tcp -m tcp --dport 30086";
        let at = |rule: &str| table.rules.iter().position(|r| r == rule).unwrap_or_else(|| panic!("no {rule}"));
        assert!(
            at(&format!("-A SHEP-NODEPORTS-{t} {node_port} -j SHEP-MARK-MASQ-{t}"))
                < at(&format!("-A SHEP-NODEPORTS-{t} {node_port} -j {svc}"))
        );
        assert!(
            table.rules.contains(&format!(
                "-A SHEP-POSTROUTING-{t} -m comment --comment \"shepherd service traffic requiring SNAT\" -j MASQUERADE"
            ))
        );
        let single = table.rules.iter().find(|r| r.starts_with(&format!("-A {svc} -m comment --comment \"default/web:http ->"))).unwrap();
        assert!(!single.contains("statistic"), "one endpoint takes everything: {single}");
    }

    #[test]
    fn services_without_an_address_or_a_ready_endpoint_get_no_rules() {
        let scope = scope();
        let mut headless = web(&["10.77.0.4"]);
        headless.spec.cluster_ip = service::HEADLESS.into();
        let mut unallocated = web(&["10.77.0.4"]);
        unallocated.spec.cluster_ip.clear();
        let mut not_ready = web(&[]);
        not_ready.status.not_ready_endpoints = vec![endpoint("10.77.0.9")];
        assert!(table(&scope, [&headless, &unallocated, &not_ready]).is_empty());
    }

    #[test]
    fn the_restore_text_rewrites_the_chains_in_one_commit_and_deletes_the_stale_ones() {
        let scope = scope();
        let table = table(&scope, [&web(&["10.77.0.4"])]);
        let stale = format!("SHEP-SVC-{}-0123456789ab", scope.tag);
        let text = table.restore_text(std::slice::from_ref(&stale));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "*nat");
        assert_eq!(lines[1], format!(":SHEP-SERVICES-{} - [0:0]", scope.tag));
        assert!(lines.contains(&format!(":{stale} - [0:0]").as_str()), "a stale chain is emptied before it is deleted");
        assert_eq!(&lines[lines.len() - 2..], [format!("-X {stale}").as_str(), "COMMIT"]);
        assert!(!text.contains("PREROUTING") && !text.contains(":OUTPUT"), "built-in chains are never declared, so never flushed");
        assert!(table.chains.iter().all(|chain| scope.owns(chain)));
        assert!(
            !scope.owns("KUBE-SERVICES") && !Scope::new("cluster-b", scope.pod_subnet).owns(&table.chains[4]),
            "another cluster's are not ours"
        );
    }

    #[test]
    fn the_same_services_give_the_same_text() {
        let scope = scope();
        let (a, b) = (web(&["10.77.0.4", "10.77.0.5"]), web(&["10.77.0.4", "10.77.0.5"]));
        assert_eq!(table(&scope, [&a]), table(&scope, [&b]), "a restarted agent writes what the last one wrote");
    }
}
