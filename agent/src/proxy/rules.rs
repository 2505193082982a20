//! The service proxy's tables, as kube-proxy's iptables mode writes them, built from the
//! Services and their ready endpoints as text for `iptables-restore --noflush`: pure, so that
//! each rule is tested here and the I/O stays in [`super::host`].
//!
//! In the nat table:
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
//! In the filter table, for a Service port without a ready endpoint, a REJECT (ICMP port
//! unreachable, which a TCP client reads as "connection refused") of new connections to its
//! cluster IP in `SHEP-SERVICES-<c>` (jumped to from OUTPUT and FORWARD) and to its node
//! port in `SHEP-EXTERNAL-SERVICES-<c>` (from INPUT and FORWARD), as kube-proxy's
//! `KUBE-SERVICES` and `KUBE-EXTERNAL-SERVICES`: without them the client's packets would
//! leave by the default route and wait for a timeout. After them, a REJECT of anything else
//! still addressed to a cluster IP (a port the Service lacks), which nat did not translate,
//! as kube-proxy's nftables mode does. And in `SHEP-EXTERNAL-SERVICES-<c>`, first, kube-proxy's
//! "block incoming localnet connections" DROP, which `route_localnet` needs.
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

    /// The filter chain that rejects node ports without a ready endpoint.
    pub fn external_services_chain(&self) -> String {
        format!("{PREFIX}EXTERNAL-SERVICES-{}", self.tag)
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
        [self.services_chain(), self.external_services_chain(), self.node_ports_chain(), self.mark_chain(), self.postrouting_chain()]
            .contains(&chain.to_string())
            || ["SVC", "SEP"].iter().any(|kind| chain.starts_with(&format!("{PREFIX}{kind}-{}-", self.tag)))
    }

    /// The nat chains every table of this scope has.
    fn top_nat_chains(&self) -> [String; 4] {
        [self.services_chain(), self.node_ports_chain(), self.mark_chain(), self.postrouting_chain()]
    }

    /// The filter chains every table of this scope has.
    fn top_filter_chains(&self) -> [String; 2] {
        [self.services_chain(), self.external_services_chain()]
    }
}

/// One port of a Service with a cluster IP.
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

/// The proxy's chains of one table, in the order written, and their rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chains {
    pub chains: Vec<String>,
    pub rules: Vec<String>,
}

impl Chains {
    /// The `iptables-restore` section of table `name` that makes it hold this: each chain
    /// declared (which empties it, in the same commit that fills it again, so that no packet
    /// finds it empty) and its rules; `stale`, the chains of the scope that exist and are no
    /// longer wanted, emptied and deleted.
    fn restore_section(&self, name: &str, stale: &[String], text: &mut String) {
        let _ = writeln!(text, "*{name}");
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
    }
}

/// What the proxy wants in the nat and filter tables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    pub nat: Chains,
    pub filter: Chains,
}

/// The chains of the scope that exist in each table (and are not wanted, for
/// [`Table::restore_text`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Existing {
    pub nat: Vec<String>,
    pub filter: Vec<String>,
}

impl Table {
    /// No chain and no jump wanted: the table of a proxy that takes its rules away as it stops.
    pub fn is_empty(&self) -> bool {
        self.nat.chains.is_empty() && self.filter.chains.is_empty()
    }

    /// The `iptables-restore --noflush` input that makes both tables hold this, each in one
    /// commit, with the `stale` chains emptied and deleted.
    pub fn restore_text(&self, stale: &Existing) -> String {
        let mut text = String::new();
        self.nat.restore_section("nat", &stale.nat, &mut text);
        self.filter.restore_section("filter", &stale.filter, &mut text);
        text
    }
}

/// The tables the Services want: every port of a Service with a cluster IP is sent to one
/// of its ready endpoints, or, with none, rejected (never sent to a pod that is not ready);
/// an empty table when no Service has a cluster IP.
pub fn table<'a>(scope: &Scope, services: impl IntoIterator<Item = &'a Service>) -> Table {
    let mut ports: Vec<Proxied> = Vec::new();
    for service in services {
        let Some(cluster_ip) = service.spec.virtual_ip() else { continue };
        ports.extend(service.spec.ports.iter().map(|port| Proxied { service, cluster_ip, port }));
    }
    ports.sort_by_key(|p| (p.service.metadata.key(), p.port.port, p.protocol()));
    let mut addressed: Vec<(String, &str)> = ports.iter().map(|p| (p.service.metadata.key(), p.cluster_ip)).collect();
    addressed.dedup();
    let (proxied, rejected): (Vec<Proxied>, Vec<Proxied>) = ports.into_iter().partition(|p| !p.service.status.endpoints.is_empty());
    Table { nat: nat_chains(scope, &proxied), filter: filter_chains(scope, &rejected, &addressed) }
}

/// The REJECTs of the Service ports without a ready endpoint, kube-proxy's words in the
/// comments, then of every other port of each cluster IP (`addressed`: Service and cluster
/// IP); and the guard that `route_localnet` needs, as kube-proxy's (CVE-2020-8558): the
/// host's loopback services are not reached from outside the loopback interface.
fn filter_chains(scope: &Scope, rejected: &[Proxied], addressed: &[(String, &str)]) -> Chains {
    let mut chains = Chains { chains: scope.top_filter_chains().to_vec(), rules: Vec::new() };
    let (services_chain, external_chain) = (scope.services_chain(), scope.external_services_chain());
    chains.rules.push(format!(
        "-A {external_chain} -m comment --comment \"block incoming localnet connections\" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP"
    ));
    for p in rejected {
        let (comment, protocol) = (format!("-m comment --comment \"{} has no endpoints\"", p.name()), p.protocol());
        chains.rules.push(format!(
            "-A {services_chain} {comment} -d {}/32 -p {protocol} -m {protocol} --dport {} -j REJECT",
            p.cluster_ip, p.port.port
        ));
        if p.port.node_port != 0 {
            chains.rules.push(format!(
                "-A {external_chain} {comment} -m addrtype --dst-type LOCAL -p {protocol} -m {protocol} --dport {} -j REJECT",
                p.port.node_port
            ));
        }
    }
    // A DNATted packet no longer goes to the cluster IP (nat comes first): what still does
    // asked for a port the Service lacks, and would otherwise leave by the default route.
    for (service, cluster_ip) in addressed {
        chains.rules.push(format!("-A {services_chain} -m comment --comment \"{service} has no such port\" -d {cluster_ip}/32 -j REJECT"));
    }
    chains
}

/// The nat rules that send each Service port with ready endpoints to one of them.
fn nat_chains(scope: &Scope, proxied: &[Proxied]) -> Chains {
    let (services_chain, node_ports_chain, mark_chain, postrouting_chain) =
        (scope.services_chain(), scope.node_ports_chain(), scope.mark_chain(), scope.postrouting_chain());
    let mut table = Chains { chains: scope.top_nat_chains().to_vec(), rules: Vec::new() };
    let rules = &mut table.rules;
    rules.push(format!("-A {postrouting_chain} -m mark ! --mark {MASQUERADE_MARK}/{MASQUERADE_MARK} -j RETURN"));
    rules.push(format!("-A {postrouting_chain} -j MARK --xor-mark {MASQUERADE_MARK}"));
    rules.push(format!("-A {postrouting_chain} -m comment --comment \"shepherd service traffic requiring SNAT\" -j MASQUERADE"));
    rules.push(format!("-A {mark_chain} -j MARK --or-mark {MASQUERADE_MARK}"));
    for p in proxied {
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
        let table = table(&scope, [&web(&["10.77.0.4", "10.77.0.5", "10.77.0.6"])]).nat;
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
        let table = table(&scope, [&web(&["10.77.0.4"])]).nat;
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
    fn services_without_an_address_get_no_rules() {
        let scope = scope();
        let mut headless = web(&["10.77.0.4"]);
        headless.spec.cluster_ip = service::HEADLESS.into();
        let mut unallocated = web(&["10.77.0.4"]);
        unallocated.spec.cluster_ip.clear();
        let table = table(&scope, [&headless, &unallocated]);
        assert!(!table.nat.rules.iter().any(|r| r.contains("10.77.0.4")), "{:?}", table.nat.rules);
        assert_eq!(table.filter.rules, [localnet_guard(&scope)], "only the guard");
        assert!(!table.is_empty(), "the top chains and the guard stay while the proxy runs");
    }

    fn localnet_guard(scope: &Scope) -> String {
        format!(
            "-A SHEP-EXTERNAL-SERVICES-{} -m comment --comment \"block incoming localnet connections\" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP",
            scope.tag
        )
    }

    #[test]
    fn every_other_port_of_a_cluster_ip_is_rejected_after_the_services_ports() {
        let scope = scope();
        let mut two_ports = web(&["10.77.0.4"]);
        two_ports.spec.ports.push(ServicePort { name: "admin".into(), port: 8081, ..Default::default() });
        let mut other = web(&[]);
        other.metadata.name = "api".into();
        other.spec.cluster_ip = "10.96.1.2".into();
        let rules = table(&scope, [&two_ports, &other]).filter.rules;
        let t = &scope.tag;
        assert_eq!(
            rules[rules.len() - 2..],
            [
                format!("-A SHEP-SERVICES-{t} -m comment --comment \"default/api has no such port\" -d 10.96.1.2/32 -j REJECT"),
                format!("-A SHEP-SERVICES-{t} -m comment --comment \"default/web has no such port\" -d 10.96.1.1/32 -j REJECT"),
            ],
            "one per cluster IP, however many ports it has"
        );
    }

    #[test]
    fn a_service_without_a_ready_endpoint_is_rejected_on_its_cluster_ip_and_node_port_and_never_dnatted() {
        let scope = scope();
        let mut not_ready = web(&[]);
        not_ready.status.not_ready_endpoints = vec![endpoint("10.77.0.9")];
        let table = table(&scope, [&not_ready, &web(&["10.77.0.4"])]);
        let t = &scope.tag;
        assert_eq!(table.filter.chains, [format!("SHEP-SERVICES-{t}"), format!("SHEP-EXTERNAL-SERVICES-{t}")]);
        assert!(table.filter.chains.iter().all(|chain| chain.len() <= 28 && scope.owns(chain)), "iptables takes 28 characters");
        assert_eq!(
            table.filter.rules[1..3],
            [
                format!(
                    "-A SHEP-SERVICES-{t} -m comment --comment \"default/web:http has no endpoints\" -d 10.96.1.1/32 -p tcp -m tcp --dport 80 -j REJECT"
                ),
                format!(
                    "-A SHEP-EXTERNAL-SERVICES-{t} -m comment --comment \"default/web:http has no endpoints\" -m addrtype --dst-type LOCAL -p tcp -m tcp --dport 30086 -j REJECT"
                ),
            ],
            "one Service is rejected, the one with an endpoint is not"
        );
        assert!(!table.nat.rules.iter().any(|r| r.contains("10.77.0.9")), "a pod that is not ready gets nothing");
        assert_eq!(table.nat.rules.iter().filter(|r| r.contains("-j DNAT")).count(), 1, "the ready one is proxied");

        let alone = super::table(&scope, [&not_ready]);
        assert_eq!(alone.filter.rules.len(), 4, "the guard, two rejects, and the cluster IP's other ports");
        assert_eq!(alone.nat.chains.len(), 4, "the nat table keeps only its top chains");
        assert!(!alone.is_empty(), "the jumps stay, so that the rejects apply");
    }

    #[test]
    fn the_restore_text_rewrites_the_chains_in_one_commit_and_deletes_the_stale_ones() {
        let scope = scope();
        let table = table(&scope, [&web(&["10.77.0.4"])]);
        let stale = format!("SHEP-SVC-{}-0123456789ab", scope.tag);
        let text = table.restore_text(&Existing { nat: vec![stale.clone()], filter: Vec::new() });
        let (nat, filter) = text.split_at(text.find("*filter").expect("a filter section"));
        let lines: Vec<&str> = nat.lines().collect();
        assert_eq!(lines[0], "*nat");
        assert_eq!(lines[1], format!(":SHEP-SERVICES-{} - [0:0]", scope.tag));
        assert!(lines.contains(&format!(":{stale} - [0:0]").as_str()), "a stale chain is emptied before it is deleted");
        assert_eq!(&lines[lines.len() - 2..], [format!("-X {stale}").as_str(), "COMMIT"]);
        assert_eq!(
            filter.lines().collect::<Vec<_>>(),
            [
                "*filter",
                &format!(":SHEP-SERVICES-{} - [0:0]", scope.tag),
                &format!(":SHEP-EXTERNAL-SERVICES-{} - [0:0]", scope.tag),
                &localnet_guard(&scope),
                &format!("-A SHEP-SERVICES-{} -m comment --comment \"default/web has no such port\" -d 10.96.1.1/32 -j REJECT", scope.tag),
                "COMMIT"
            ]
        );
        for builtin in ["PREROUTING", ":OUTPUT", ":INPUT", ":FORWARD"] {
            assert!(!text.contains(builtin), "built-in chains are never declared, so never flushed");
        }
        assert!(table.nat.chains.iter().all(|chain| scope.owns(chain)));
        assert!(
            !scope.owns("KUBE-SERVICES") && !Scope::new("cluster-b", scope.pod_subnet).owns(&table.nat.chains[4]),
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
