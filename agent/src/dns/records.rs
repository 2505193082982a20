//! The records of the cluster domain, made from the Services as CoreDNS's `kubernetes`
//! plugin makes them, and the answer to one question about them. Pure: no sockets, so that
//! every answer is unit-tested.
//!
//! - `<service>.<namespace>.svc.<domain>`: A (or AAAA) of the cluster IP; for a headless
//!   Service (`cluster_ip: None`), one per ready endpoint.
//! - `<endpoint>.<service>.<namespace>.svc.<domain>` of a headless Service: its endpoint, named
//!   by its address with dashes (`10-77-0-4`).
//! - `_<port>._<protocol>.<service>.<namespace>.svc.<domain>` for each named port: SRV at the
//!   port to the Service's name, or, headless, at the target port to each endpoint's name,
//!   each with an equal share of the weight 100; the targets' addresses go along.
//! - `<a-b-c-d>.<namespace>.pod.<domain>`: A of the address the name spells, as CoreDNS's
//!   `pods insecure` (the default of kubeadm's Corefile) answers it, without looking for the pod.
//! - The reverse names (`in-addr.arpa`, `ip6.arpa`) of cluster IPs and headless endpoints:
//!   PTR to the names above; other reverse names are not the cluster's ([`ClusterZone::reverse`]).
//! - A name under the domain that holds no record but names one that does (`svc.<domain>`,
//!   `<namespace>.svc.<domain>`) exists with no data; any other is NXDOMAIN.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

use hickory_server::proto::rr::rdata::{A, AAAA, PTR, SOA, SRV};
use hickory_server::proto::rr::{LowerName, Name, RData, Record, RecordType};
use shared::model::{Endpoint, Service, ServicePort};

/// The cluster domain unless `--cluster-domain` says otherwise, as the kubelet's.
pub const DEFAULT_DOMAIN: &str = "cluster.local";
/// Seconds a client may keep an answer: CoreDNS's default for the kubernetes plugin.
pub const TTL: u32 = 5;
/// `cluster_ip` of a headless Service.
pub const HEADLESS: &str = "None";

/// What the zone says to one question.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The records of that name and type, and the addresses of the names they point at.
    Records { answers: Vec<Record>, additionals: Vec<Record> },
    /// The name exists, with nothing of that type.
    NoData,
    /// No such name in the domain.
    NxDomain,
}

/// Every record of the cluster domain at one moment.
#[derive(Debug, Clone)]
pub struct ClusterZone {
    origin: Name,
    records: BTreeMap<LowerName, Vec<Record>>,
    /// The names that hold no record but lead to one that does.
    between: BTreeSet<LowerName>,
    /// PTR records by reverse name.
    reverse: BTreeMap<LowerName, Vec<Record>>,
    serial: u32,
}

impl ClusterZone {
    /// The zone of `domain` (such as `cluster.local`) holding the records of `services`;
    /// `serial` numbers this version of it in its SOA.
    pub fn new<'a>(domain: &Name, services: impl IntoIterator<Item = &'a Service>, serial: u32) -> ClusterZone {
        let mut origin = domain.clone();
        origin.set_fqdn(true);
        let mut zone = ClusterZone { origin, records: BTreeMap::new(), between: BTreeSet::new(), reverse: BTreeMap::new(), serial };
        for service in services {
            zone.add_service(service);
        }
        let origin = LowerName::from(zone.origin.clone());
        for name in zone.records.keys() {
            let mut parent = name.base_name();
            while origin.zone_of(&parent) && !zone.records.contains_key(&parent) {
                zone.between.insert(parent.clone());
                if parent == origin {
                    break;
                }
                parent = parent.base_name();
            }
        }
        zone.between.insert(origin);
        zone
    }

    pub fn origin(&self) -> &Name {
        &self.origin
    }

    /// The zone's SOA record, as CoreDNS writes it (`ns.dns.<domain>`, `hostmaster.<domain>`).
    pub fn soa(&self) -> Record {
        let name = |prefix: &str| Name::from_ascii(prefix).and_then(|n| n.append_domain(&self.origin)).expect("a valid name");
        let soa = SOA::new(name("ns.dns"), name("hostmaster"), self.serial, 7200, 1800, 86400, TTL);
        Record::from_rdata(self.origin.clone(), TTL, RData::SOA(soa))
    }

    /// The answer to `name` and `type_`; `name` is in the zone (the server asks only then).
    pub fn lookup(&self, name: &LowerName, type_: RecordType) -> Answer {
        if type_ == RecordType::SOA && *name == LowerName::from(self.origin.clone()) {
            return Answer::Records { answers: vec![self.soa()], additionals: Vec::new() };
        }
        if let Some(address) = self.pod_address(name) {
            return match type_ {
                RecordType::A | RecordType::ANY => Answer::Records {
                    answers: vec![Record::from_rdata(Name::from(name.clone()), TTL, RData::A(A(address)))],
                    additionals: Vec::new(),
                },
                _ => Answer::NoData,
            };
        }
        let Some(records) = self.records.get(name) else {
            return if self.between.contains(name) { Answer::NoData } else { Answer::NxDomain };
        };
        let answers: Vec<Record> = records.iter().filter(|r| type_ == RecordType::ANY || r.record_type() == type_).cloned().collect();
        if answers.is_empty() {
            return Answer::NoData;
        }
        let additionals = answers
            .iter()
            .filter_map(|r| match &r.data {
                RData::SRV(srv) => self.records.get(&LowerName::from(srv.target.clone())),
                _ => None,
            })
            .flatten()
            .cloned()
            .collect::<Vec<_>>();
        Answer::Records { answers, additionals: dedup(additionals) }
    }

    /// The answer for a reverse name of a cluster IP or a headless endpoint; `None` for any
    /// other reverse name, which the cluster does not own (CoreDNS's `fallthrough`).
    pub fn reverse(&self, name: &LowerName, type_: RecordType) -> Option<Answer> {
        let records = self.reverse.get(name)?;
        Some(match type_ {
            RecordType::PTR | RecordType::ANY => Answer::Records { answers: records.clone(), additionals: Vec::new() },
            _ => Answer::NoData,
        })
    }

    fn add_reverse(&mut self, address: IpAddr, target: &Name) {
        let name = Name::from(address);
        self.reverse.entry(LowerName::from(name.clone())).or_default().push(Record::from_rdata(name, TTL, RData::PTR(PTR(target.clone()))));
    }

    /// The address a pod name `<a-b-c-d>.<namespace>.pod.<domain>` spells.
    fn pod_address(&self, name: &LowerName) -> Option<Ipv4Addr> {
        let name = Name::from(name.clone());
        if name.num_labels() != self.origin.num_labels() + 3 || !self.origin.zone_of(&name) {
            return None;
        }
        let labels: Vec<String> = name.iter().take(3).map(|label| String::from_utf8_lossy(label).to_ascii_lowercase()).collect();
        if labels[2] != "pod" {
            return None;
        }
        labels[0].replace('-', ".").parse().ok()
    }

    fn name(&self, labels: &[&str]) -> Option<Name> {
        let mut name = Name::from_labels(labels.iter().map(|l| l.as_bytes())).ok()?;
        name = name.append_domain(&self.origin).ok()?;
        Some(name)
    }

    fn add(&mut self, name: &Name, data: RData) {
        self.records.entry(LowerName::from(name.clone())).or_default().push(Record::from_rdata(name.clone(), TTL, data));
    }

    fn add_service(&mut self, service: &Service) {
        let (namespace, service_name) = (service.metadata.namespace.as_str(), service.metadata.name.as_str());
        let Some(name) = self.name(&[service_name, namespace, "svc"]) else { return };
        let named_ports: Vec<&ServicePort> = service.spec.ports.iter().filter(|p| !p.name.is_empty()).collect();
        if service.spec.cluster_ip == HEADLESS {
            // The service's name exists even while no endpoint is ready.
            self.records.entry(LowerName::from(name.clone())).or_default();
            let endpoints: Vec<(&Endpoint, IpAddr)> =
                service.status.endpoints.iter().filter_map(|e| Some((e, e.ip.parse::<IpAddr>().ok()?))).collect();
            let weight = share(endpoints.len());
            for (endpoint, address) in &endpoints {
                self.add(&name, address_data(*address));
                let Ok(host) = Name::from_ascii(endpoint_label(endpoint)).and_then(|h| h.append_domain(&name)) else { continue };
                self.add(&host, address_data(*address));
                self.add_reverse(*address, &host);
                for port in &named_ports {
                    let target_port = if port.target_port > 0 { port.target_port } else { port.port };
                    if let Some(srv_name) = self.srv_name(port, service_name, namespace) {
                        self.add(&srv_name, RData::SRV(SRV::new(0, weight, u16::try_from(target_port).unwrap_or(0), host.clone())));
                    }
                }
            }
            return;
        }
        let Ok(address) = service.spec.cluster_ip.parse::<IpAddr>() else { return };
        self.add(&name, address_data(address));
        self.add_reverse(address, &name);
        for port in named_ports {
            if let Some(srv_name) = self.srv_name(port, service_name, namespace) {
                self.add(&srv_name, RData::SRV(SRV::new(0, share(1), u16::try_from(port.port).unwrap_or(0), name.clone())));
            }
        }
    }

    /// `_<port>._<protocol>.<service>.<namespace>.svc.<domain>`.
    fn srv_name(&self, port: &ServicePort, service: &str, namespace: &str) -> Option<Name> {
        let protocol = if port.protocol.is_empty() { "tcp".to_string() } else { port.protocol.to_ascii_lowercase() };
        self.name(&[&format!("_{}", port.name), &format!("_{protocol}"), service, namespace, "svc"])
    }
}

fn address_data(address: IpAddr) -> RData {
    match address {
        IpAddr::V4(v4) => RData::A(A(v4)),
        IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
    }
}

/// An endpoint's name under its headless Service: its address with dashes, as CoreDNS names
/// an endpoint without a hostname.
fn endpoint_label(endpoint: &Endpoint) -> String {
    endpoint.ip.replace(['.', ':'], "-")
}

/// Each of `count` SRV records' weight: an equal share of 100, as CoreDNS divides it.
fn share(count: usize) -> u16 {
    u16::try_from(100 / count.max(1)).unwrap_or(100)
}

fn dedup(records: Vec<Record>) -> Vec<Record> {
    let mut kept: Vec<Record> = Vec::with_capacity(records.len());
    for record in records {
        if !kept.contains(&record) {
            kept.push(record);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use shared::model::{ObjectMeta, ServiceSpec, ServiceStatus};

    use super::*;

    fn port(name: &str, port: i32, target_port: i32) -> ServicePort {
        ServicePort { name: name.into(), port, target_port, protocol: "TCP".into(), ..Default::default() }
    }

    fn endpoint(ip: &str, pod: &str) -> Endpoint {
        Endpoint { ip: ip.into(), pod: pod.into(), node_name: "n1".into() }
    }

    fn service(namespace: &str, name: &str, cluster_ip: &str, ports: Vec<ServicePort>, endpoints: Vec<Endpoint>) -> Service {
        Service {
            kind: "Service".into(),
            metadata: ObjectMeta::named(namespace, name),
            spec: ServiceSpec { ports, cluster_ip: cluster_ip.into(), ..Default::default() },
            status: ServiceStatus { endpoints, not_ready_endpoints: vec![endpoint("10.77.0.99", "starting")] },
        }
    }

    fn zone() -> ClusterZone {
        let services = [
            service("shop", "web", "10.96.0.10", vec![port("http", 80, 8080), port("", 81, 81)], vec![endpoint("10.77.0.4", "web-1")]),
            service(
                "shop",
                "db",
                HEADLESS,
                vec![port("pg", 5432, 15432)],
                vec![endpoint("10.77.0.7", "db-0"), endpoint("10.77.0.8", "db-1")],
            ),
            service("shop", "quiet", HEADLESS, vec![], vec![]),
            service("shop", "pending", "", vec![port("http", 80, 80)], vec![]),
            service("other", "web", "10.96.3.4", vec![], vec![]),
        ];
        ClusterZone::new(&Name::from_ascii(DEFAULT_DOMAIN).unwrap(), &services, 7)
    }

    fn ask(zone: &ClusterZone, name: &str, type_: RecordType) -> Answer {
        zone.lookup(&LowerName::from(Name::from_str(name).unwrap()), type_)
    }

    fn data(answer: &Answer) -> Vec<String> {
        let Answer::Records { answers, .. } = answer else { panic!("no records: {answer:?}") };
        answers.iter().map(|r| format!("{} {}", r.name, r.data)).collect()
    }

    #[test]
    fn a_service_answers_its_cluster_ip_under_its_namespace() {
        let zone = zone();
        assert_eq!(data(&ask(&zone, "web.shop.svc.cluster.local.", RecordType::A)), ["web.shop.svc.cluster.local. 10.96.0.10"]);
        assert_eq!(data(&ask(&zone, "WEB.Shop.svc.cluster.local.", RecordType::A)), ["web.shop.svc.cluster.local. 10.96.0.10"]);
        assert_eq!(data(&ask(&zone, "web.other.svc.cluster.local.", RecordType::A)), ["web.other.svc.cluster.local. 10.96.3.4"]);
        assert_eq!(ask(&zone, "web.shop.svc.cluster.local.", RecordType::AAAA), Answer::NoData, "the name exists, with no IPv6");
        let Answer::Records { answers, .. } = ask(&zone, "web.shop.svc.cluster.local.", RecordType::A) else { unreachable!() };
        assert_eq!(answers[0].ttl, TTL);
    }

    #[test]
    fn a_headless_service_answers_each_ready_endpoint_and_names_them() {
        let zone = zone();
        let mut addresses = data(&ask(&zone, "db.shop.svc.cluster.local.", RecordType::A));
        addresses.sort();
        assert_eq!(addresses, ["db.shop.svc.cluster.local. 10.77.0.7", "db.shop.svc.cluster.local. 10.77.0.8"], "not the one not ready");
        assert_eq!(
            data(&ask(&zone, "10-77-0-8.db.shop.svc.cluster.local.", RecordType::A)),
            ["10-77-0-8.db.shop.svc.cluster.local. 10.77.0.8"]
        );
        assert_eq!(ask(&zone, "10-77-0-99.db.shop.svc.cluster.local.", RecordType::A), Answer::NxDomain);
        assert_eq!(ask(&zone, "quiet.shop.svc.cluster.local.", RecordType::A), Answer::NoData, "headless with no ready endpoint");
    }

    #[test]
    fn named_ports_have_srv_records_at_the_service_or_each_endpoint() {
        let zone = zone();
        let web = ask(&zone, "_http._tcp.web.shop.svc.cluster.local.", RecordType::SRV);
        assert_eq!(data(&web), ["_http._tcp.web.shop.svc.cluster.local. 0 100 80 web.shop.svc.cluster.local."]);
        let Answer::Records { additionals, .. } = &web else { unreachable!() };
        assert_eq!(additionals.iter().map(|r| r.data.to_string()).collect::<Vec<_>>(), ["10.96.0.10"], "the target's address goes along");
        let db = ask(&zone, "_pg._tcp.db.shop.svc.cluster.local.", RecordType::SRV);
        let mut targets = data(&db);
        targets.sort();
        assert_eq!(
            targets,
            [
                "_pg._tcp.db.shop.svc.cluster.local. 0 50 15432 10-77-0-7.db.shop.svc.cluster.local.",
                "_pg._tcp.db.shop.svc.cluster.local. 0 50 15432 10-77-0-8.db.shop.svc.cluster.local.",
            ],
            "headless: the target port of each endpoint, the weight shared"
        );
        assert_eq!(ask(&zone, "_pg._udp.db.shop.svc.cluster.local.", RecordType::SRV), Answer::NxDomain, "that port is TCP");
        assert_eq!(ask(&zone, "_http._tcp.pending.shop.svc.cluster.local.", RecordType::SRV), Answer::NxDomain);
    }

    #[test]
    fn unknown_names_are_nxdomain_and_names_on_the_way_exist() {
        let zone = zone();
        assert_eq!(ask(&zone, "nope.shop.svc.cluster.local.", RecordType::A), Answer::NxDomain);
        assert_eq!(ask(&zone, "web.nope.svc.cluster.local.", RecordType::A), Answer::NxDomain);
        assert_eq!(ask(&zone, "pending.shop.svc.cluster.local.", RecordType::A), Answer::NxDomain, "no cluster IP yet");
        assert_eq!(ask(&zone, "web.shop.cluster.local.", RecordType::A), Answer::NxDomain);
        for between in ["shop.svc.cluster.local.", "svc.cluster.local.", "cluster.local."] {
            assert_eq!(ask(&zone, between, RecordType::A), Answer::NoData, "{between}");
        }
        assert_eq!(
            data(&ask(&zone, "cluster.local.", RecordType::SOA)),
            ["cluster.local. ns.dns.cluster.local. hostmaster.cluster.local. 7 7200 1800 86400 5"]
        );
    }

    #[test]
    fn cluster_ips_and_headless_endpoints_have_reverse_names_and_other_addresses_are_not_the_clusters() {
        let zone = zone();
        let reverse = |address: &str, type_| zone.reverse(&LowerName::from(Name::from(address.parse::<IpAddr>().unwrap())), type_);
        assert_eq!(data(&reverse("10.96.0.10", RecordType::PTR).unwrap()), ["10.0.96.10.in-addr.arpa. web.shop.svc.cluster.local."]);
        assert_eq!(data(&reverse("10.77.0.8", RecordType::PTR).unwrap()), ["8.0.77.10.in-addr.arpa. 10-77-0-8.db.shop.svc.cluster.local."]);
        assert_eq!(reverse("10.96.0.10", RecordType::A), Some(Answer::NoData));
        assert_eq!(reverse("10.77.0.99", RecordType::PTR), None, "not ready: no name");
        assert_eq!(reverse("192.0.2.1", RecordType::PTR), None);
    }

    #[test]
    fn a_pod_name_spells_its_address() {
        let zone = zone();
        assert_eq!(data(&ask(&zone, "10-77-0-4.shop.pod.cluster.local.", RecordType::A)), ["10-77-0-4.shop.pod.cluster.local. 10.77.0.4"]);
        assert_eq!(ask(&zone, "10-77-0-4.shop.pod.cluster.local.", RecordType::AAAA), Answer::NoData);
        for not_a_pod in ["10-77-0-999.shop.pod.cluster.local.", "web.shop.pod.cluster.local.", "x.10-77-0-4.shop.pod.cluster.local."] {
            assert_eq!(ask(&zone, not_a_pod, RecordType::A), Answer::NxDomain, "{not_a_pod}");
        }
    }

    #[test]
    fn another_domain_holds_the_same_names_under_it() {
        let services = [service("shop", "web", "10.96.0.10", vec![], vec![])];
        let zone = ClusterZone::new(&Name::from_ascii("corp.example").unwrap(), &services, 1);
        assert_eq!(data(&ask(&zone, "web.shop.svc.corp.example.", RecordType::A)), ["web.shop.svc.corp.example. 10.96.0.10"]);
    }
}
