//! The cluster IPs and node ports of Services, given as kube-apiserver's ipallocator and
//! portallocator give them: from `--service-cidr` and `--service-node-port-range`, a
//! requested one when it is free and in range, else the first free one of the range's upper
//! band (the lower band is left for requests, as Kubernetes' static subrange does).
//!
//! There is no pool object: what is taken is read from the stored Services in the same
//! transaction that takes more ([`crate::store::View::list`]). So two creates never get one
//! address, a restarted server knows what is taken, and two servers on one etcd agree (the
//! store compares the Services' list guard). kube-apiserver picks within the band at random
//! because its bitmap's writers race; here the transaction orders them, so the first free
//! address is as safe and easier to follow.

use std::collections::HashSet;
use std::fmt;
use std::net::Ipv4Addr;

use shared::api::FieldError;
use shared::model::{Kind, Object, Service, ServiceSpec, service};
use shared::subnet::Subnet;

use crate::store::{Key, StoreError, View};

pub const DEFAULT_SERVICE_CIDR: &str = "10.96.0.0/16";
pub const DEFAULT_NODE_PORT_RANGE: &str = "30000-32767";
/// kube-apiserver refuses a service range with more addresses than a /12.
const WIDEST_PREFIX: u8 = 12;
/// A range needs addresses besides its network and broadcast ones.
const NARROWEST_PREFIX: u8 = 30;

/// The node ports Services may take, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    pub first: i32,
    pub last: i32,
}

impl PortRange {
    /// `30000-32767`, as `--service-node-port-range` takes it.
    pub fn parse(text: &str) -> Result<PortRange, String> {
        let parsed = text.split_once('-').and_then(|(first, last)| Some((first.trim().parse().ok()?, last.trim().parse().ok()?)));
        match parsed {
            Some((first, last)) if 1 <= first && first <= last && last <= 65535 => Ok(PortRange { first, last }),
            _ => Err(format!(
                "--service-node-port-range {text:?}: give two ports between 1 and 65535, the lower first, such as {DEFAULT_NODE_PORT_RANGE}"
            )),
        }
    }

    pub fn contains(&self, port: i32) -> bool {
        (self.first..=self.last).contains(&port)
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

/// Where Services' cluster IPs and node ports come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceRanges {
    pub cluster_ips: Subnet,
    pub node_ports: PortRange,
}

impl Default for ServiceRanges {
    fn default() -> Self {
        ServiceRanges::parse(DEFAULT_SERVICE_CIDR, DEFAULT_NODE_PORT_RANGE, &[]).expect("the default ranges are valid")
    }
}

impl ServiceRanges {
    /// The ranges `--service-cidr` and `--service-node-port-range` give; a service range
    /// that overlaps a pod subnet in `pod_subnets` is refused, as its addresses would be
    /// both a pod's and a Service's.
    pub fn parse(cidr: &str, node_ports: &str, pod_subnets: &[Subnet]) -> Result<ServiceRanges, String> {
        let cluster_ips =
            Subnet::parse(cidr).ok_or_else(|| format!("--service-cidr {cidr:?} is not an IPv4 subnet such as {DEFAULT_SERVICE_CIDR}"))?;
        if !(WIDEST_PREFIX..=NARROWEST_PREFIX).contains(&cluster_ips.prefix()) {
            return Err(format!("--service-cidr {cidr}: the prefix must be between /{WIDEST_PREFIX} and /{NARROWEST_PREFIX}"));
        }
        if let Some(pods) = pod_subnets.iter().find(|pods| pods.overlaps(&cluster_ips)) {
            return Err(format!("--service-cidr {cluster_ips} overlaps the pod subnet {pods}: choose a range apart from it"));
        }
        Ok(ServiceRanges { cluster_ips, node_ports: PortRange::parse(node_ports)? })
    }
}

/// The cluster IPs and node ports other Services hold.
#[derive(Debug, Default)]
struct Taken {
    ips: HashSet<Ipv4Addr>,
    node_ports: HashSet<i32>,
}

impl Taken {
    /// What every Service but `own` holds, as the transaction sees them.
    fn read(view: &dyn View, own: &Key) -> Taken {
        let mut taken = Taken::default();
        for object in view.list(Kind::Service) {
            let Object::Service(other) = object else { continue };
            if Key::of(object) == *own {
                continue;
            }
            taken.ips.extend(other.spec.virtual_ip().and_then(|ip| ip.parse::<Ipv4Addr>().ok()));
            taken.node_ports.extend(other.spec.ports.iter().map(|p| p.node_port).filter(|p| *p != 0));
        }
        taken
    }
}

/// The start of the upper band of `size` values, where allocations begin: Kubernetes'
/// `min(max(16, size / step), cap)`.
fn band_start(size: u64, step: u64, cap: u64) -> u64 {
    (size / step).clamp(16, cap).min(size)
}

/// The first free usable address (neither the network's nor the broadcast one) from the
/// upper band on, then from the lower.
fn next_ip(range: &Subnet, taken: &HashSet<Ipv4Addr>) -> Option<Ipv4Addr> {
    let usable = range.size() - 2;
    let start = band_start(usable, 16, 256);
    (start..usable).chain(0..start).filter_map(|i| range.address_at(i + 1)).find(|ip| !taken.contains(ip))
}

/// The first free port from the upper band on, then from the lower.
fn next_port(range: &PortRange, taken: &HashSet<i32>) -> Option<i32> {
    let size = u64::try_from(range.last - range.first + 1).unwrap_or(0);
    let start = i32::try_from(band_start(size, 32, 128)).unwrap_or(0);
    (range.first + start..=range.last).chain(range.first..range.first + start).find(|p| !taken.contains(p))
}

fn usable(range: &Subnet, ip: Ipv4Addr) -> bool {
    range.offset_of(ip).is_some_and(|offset| offset != 0 && offset != range.size() - 1)
}

/// Gives `service` its cluster IP and node ports: kept ones stay, requested ones are
/// checked against the ranges and every other Service, missing ones are allocated.
/// `stored` is the Service before an update. Refusals are Kubernetes' 422s.
pub fn claim(service: &mut Service, stored: Option<&Service>, view: &dyn View, ranges: &ServiceRanges) -> Result<(), StoreError> {
    let key = Key::new(Kind::Service, &service.metadata.namespace, &service.metadata.name);
    let taken = Taken::read(view, &key);
    let kept = stored.map(|s| &s.spec);
    let mut errors = Vec::new();
    claim_ip(&mut service.spec, kept, &taken, ranges, &mut errors);
    claim_node_ports(&mut service.spec, kept, &taken, ranges, &mut errors);
    if errors.is_empty() {
        return Ok(());
    }
    Err(StoreError::Invalid { message: format!("Service {} is invalid", key.key), details: errors })
}

fn claim_ip(spec: &mut ServiceSpec, kept: Option<&ServiceSpec>, taken: &Taken, ranges: &ServiceRanges, errors: &mut Vec<FieldError>) {
    let range = &ranges.cluster_ips;
    let unchanged = kept.is_some_and(|k| !k.cluster_ip.is_empty() && k.cluster_ip == spec.cluster_ip);
    if spec.cluster_ip == service::HEADLESS || unchanged {
        return;
    }
    let field = "spec.cluster_ip".to_string();
    if spec.cluster_ip.is_empty() {
        match next_ip(range, &taken.ips) {
            Some(ip) => spec.cluster_ip = ip.to_string(),
            None => errors.push(FieldError {
                field,
                message: format!("failed to allocate a cluster IP: the range {range} is full"),
                ..Default::default()
            }),
        }
        return;
    }
    let Ok(ip) = spec.cluster_ip.parse::<Ipv4Addr>() else { return };
    let why = if !usable(range, ip) {
        format!("provided IP ({ip}) is not in the valid range. The range of valid IPs is {range}")
    } else if taken.ips.contains(&ip) {
        "provided IP is already allocated".to_string()
    } else {
        return;
    };
    errors.push(FieldError { field, message: format!("failed to allocate IP {ip}: {why}"), ..Default::default() });
}

fn claim_node_ports(
    spec: &mut ServiceSpec,
    kept: Option<&ServiceSpec>,
    taken: &Taken,
    ranges: &ServiceRanges,
    errors: &mut Vec<FieldError>,
) {
    if !spec.is_node_port() {
        return;
    }
    let held: HashSet<i32> = kept.map(|k| k.ports.iter().map(|p| p.node_port).collect()).unwrap_or_default();
    let mut used = taken.node_ports.clone();
    // A node port this Service already claimed for another protocol: validation keeps one
    // protocol to one node port, and TCP and UDP may share its number, as in Kubernetes.
    let mut own = HashSet::new();
    // Requested (and kept) ports first, so that an allocation never takes one of them.
    for (i, port) in spec.ports.iter().enumerate().filter(|(_, p)| p.node_port != 0) {
        let field = format!("spec.ports[{i}].node_port");
        let node_port = port.node_port;
        if !held.contains(&node_port) && !ranges.node_ports.contains(node_port) {
            let message = format!("provided port is not in the valid range. The range of valid ports is {}", ranges.node_ports);
            errors.push(FieldError { field, message, ..Default::default() });
        } else if !own.contains(&node_port) && !used.insert(node_port) {
            errors.push(FieldError { field, message: "provided port is already allocated".into(), ..Default::default() });
        }
        own.insert(node_port);
    }
    for i in 0..spec.ports.len() {
        if spec.ports[i].node_port != 0 {
            continue;
        }
        // Ports of the same number (TCP and UDP of one service) share one node port, as
        // kube-apiserver allocates them.
        let port = spec.ports[i].port;
        if let Some(shared) = spec.ports.iter().find(|p| p.port == port && p.node_port != 0).map(|p| p.node_port) {
            spec.ports[i].node_port = shared;
            continue;
        }
        let port = &mut spec.ports[i];
        match next_port(&ranges.node_ports, &used) {
            Some(node_port) => {
                used.insert(node_port);
                port.node_port = node_port;
            }
            None => errors.push(FieldError {
                field: format!("spec.ports[{i}].node_port"),
                message: format!("failed to allocate a node port: the range {} is full", ranges.node_ports),
                ..Default::default()
            }),
        }
    }
}

/// What an update keeps of the stored Service's allocations, as kube-apiserver's strategy
/// does: a cluster IP or node port left out is the stored one (a manifest applied again
/// rarely names them), a cluster IP never changes, and going back from `NodePort` to
/// `ClusterIP` gives the stored node ports back.
pub fn carry_allocations(stored: &ServiceSpec, new: &mut ServiceSpec) -> Result<(), Vec<FieldError>> {
    if new.cluster_ip.is_empty() {
        new.cluster_ip = stored.cluster_ip.clone();
    }
    if !stored.cluster_ip.is_empty() && new.cluster_ip != stored.cluster_ip {
        return Err(vec![FieldError { field: "spec.cluster_ip".into(), message: "field is immutable".into(), ..Default::default() }]);
    }
    match (stored.is_node_port(), new.is_node_port()) {
        (true, true) => {
            for port in new.ports.iter_mut().filter(|p| p.node_port == 0) {
                let same = stored.ports.iter().find(|s| s.port == port.port && s.protocol_name() == port.protocol_name());
                port.node_port = same.map_or(0, |s| s.node_port);
            }
        }
        (true, false) => {
            let held: HashSet<i32> = stored.ports.iter().map(|p| p.node_port).collect();
            for port in new.ports.iter_mut().filter(|p| held.contains(&p.node_port)) {
                port.node_port = 0;
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use shared::model::{ObjectMeta, ServicePort};

    use super::*;

    fn ranges(cidr: &str, ports: &str) -> ServiceRanges {
        ServiceRanges::parse(cidr, ports, &[]).unwrap()
    }

    #[test]
    fn the_ranges_are_checked_at_start() {
        let defaults = ServiceRanges::default();
        assert_eq!((defaults.cluster_ips.to_string(), defaults.node_ports.to_string()), ("10.96.0.0/16".into(), "30000-32767".into()));
        let pods = Subnet::parse("10.77.0.0/16").unwrap();
        let overlap = ServiceRanges::parse("10.77.128.0/20", DEFAULT_NODE_PORT_RANGE, &[pods]).unwrap_err();
        assert!(overlap.contains("overlaps the pod subnet 10.77.0.0/16"), "{overlap}");
        for (cidr, ports, flag) in [
            ("10.96.0.0", "30000-32767", "--service-cidr"),
            ("10.0.0.0/8", "30000-32767", "/12"),
            ("10.96.0.0/16", "32767-30000", "--service-node-port-range"),
        ] {
            assert!(ServiceRanges::parse(cidr, ports, &[pods]).unwrap_err().contains(flag), "{cidr} {ports}");
        }
    }

    #[test]
    fn addresses_come_from_the_upper_band_first_and_skip_the_network_and_broadcast_addresses() {
        let range = Subnet::parse("10.96.0.0/16").unwrap();
        let mut taken = HashSet::new();
        assert_eq!(next_ip(&range, &taken), Some(Ipv4Addr::new(10, 96, 1, 1)), "past the 256 addresses kept for requests");
        taken.insert(Ipv4Addr::new(10, 96, 1, 1));
        assert_eq!(next_ip(&range, &taken), Some(Ipv4Addr::new(10, 96, 1, 2)));

        let small = Subnet::parse("10.96.0.0/30").unwrap();
        let all: Vec<Ipv4Addr> = std::iter::from_fn(|| {
            let ip = next_ip(&small, &taken)?;
            taken.insert(ip);
            Some(ip)
        })
        .collect();
        assert_eq!(all, [Ipv4Addr::new(10, 96, 0, 1), Ipv4Addr::new(10, 96, 0, 2)], "a /30 has two, then it is full");
        assert!(!usable(&small, Ipv4Addr::new(10, 96, 0, 0)) && !usable(&small, Ipv4Addr::new(10, 96, 0, 3)));
    }

    #[test]
    fn node_ports_come_from_the_upper_band_first_then_wrap() {
        let range = PortRange::parse("30000-32767").unwrap();
        assert_eq!(next_port(&range, &HashSet::new()), Some(30086), "2768 / 32 ports kept for requests");
        let tiny = PortRange::parse("30000-30001").unwrap();
        assert_eq!(next_port(&tiny, &HashSet::from([30000])), Some(30001));
        assert_eq!(next_port(&tiny, &HashSet::from([30001])), Some(30000));
        assert_eq!(next_port(&tiny, &HashSet::from([30000, 30001])), None);
    }

    #[test]
    fn tcp_and_udp_of_one_port_share_a_node_port_that_other_services_may_not_take() {
        let ranges = ranges("10.96.0.0/16", "30000-32767");
        let port = |protocol: &str, node_port| ServicePort { port: 53, protocol: protocol.into(), node_port, ..Default::default() };
        let mut errors = Vec::new();
        let mut asked =
            ServiceSpec { type_: service::NODE_PORT.into(), ports: vec![port("TCP", 30053), port("UDP", 30053)], ..Default::default() };
        claim_node_ports(&mut asked, None, &Taken::default(), &ranges, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        let mut allocated =
            ServiceSpec { type_: service::NODE_PORT.into(), ports: vec![port("TCP", 0), port("UDP", 0)], ..Default::default() };
        claim_node_ports(&mut allocated, None, &Taken::default(), &ranges, &mut errors);
        assert!(errors.is_empty() && allocated.ports[0].node_port != 0, "{errors:?}");
        assert_eq!(allocated.ports[0].node_port, allocated.ports[1].node_port);
        let taken = Taken { node_ports: HashSet::from([30053]), ..Taken::default() };
        claim_node_ports(&mut asked, None, &taken, &ranges, &mut errors);
        assert_eq!(errors.len(), 1, "another Service holds it: {errors:?}");
    }

    fn spec(type_: &str, cluster_ip: &str, node_ports: &[i32]) -> ServiceSpec {
        let ports = node_ports.iter().enumerate().map(|(i, n)| ServicePort { port: 80 + i as i32, node_port: *n, ..Default::default() });
        ServiceSpec { type_: type_.into(), cluster_ip: cluster_ip.into(), ports: ports.collect(), ..Default::default() }
    }

    #[test]
    fn an_update_keeps_the_allocations_and_never_changes_the_address() {
        let stored = spec(service::NODE_PORT, "10.96.1.1", &[30086, 30087]);
        let mut reapplied = spec(service::NODE_PORT, "", &[0, 31000]);
        carry_allocations(&stored, &mut reapplied).unwrap();
        assert_eq!(reapplied.cluster_ip, "10.96.1.1");
        assert_eq!(reapplied.ports.iter().map(|p| p.node_port).collect::<Vec<_>>(), [30086, 31000]);

        let mut back = spec(service::CLUSTER_IP, "10.96.1.1", &[30086, 0]);
        carry_allocations(&stored, &mut back).unwrap();
        assert!(back.ports.iter().all(|p| p.node_port == 0), "ClusterIP again: the node ports go");

        let mut moved = spec(service::NODE_PORT, "10.96.1.2", &[30086]);
        let errors = carry_allocations(&stored, &mut moved).unwrap_err();
        assert_eq!((errors[0].field.as_str(), errors[0].message.as_str()), ("spec.cluster_ip", "field is immutable"));
    }

    /// The Services a transaction would see, for [`claim`].
    struct Services(Vec<Object>);

    impl View for Services {
        fn get(&self, key: &Key) -> Option<&Object> {
            self.0.iter().find(|o| Key::of(o) == *key)
        }
        fn pods_on_node(&self, _: &str) -> Vec<&Object> {
            Vec::new()
        }
        fn list(&self, kind: Kind) -> Vec<&Object> {
            self.0.iter().filter(|o| o.kind() == kind).collect()
        }
    }

    fn named(name: &str, spec: ServiceSpec) -> Service {
        Service { kind: "Service".into(), metadata: ObjectMeta::named("default", name), spec, ..Default::default() }
    }

    fn refusal(result: Result<(), StoreError>) -> FieldError {
        match result {
            Err(StoreError::Invalid { details, .. }) => details.into_iter().next().unwrap(),
            other => panic!("expected a 422, got {other:?}"),
        }
    }

    #[test]
    fn a_claim_allocates_what_is_missing_and_refuses_what_is_out_of_range_or_taken() {
        let ranges = ranges("10.96.0.0/24", "30000-30099");
        let existing = Services(vec![Object::Service(named("a", spec(service::NODE_PORT, "10.96.0.20", &[30016])))]);

        let mut fresh = named("b", spec(service::NODE_PORT, "", &[0]));
        claim(&mut fresh, None, &existing, &ranges).unwrap();
        assert_eq!((fresh.spec.cluster_ip.as_str(), fresh.spec.ports[0].node_port), ("10.96.0.17", 30017), "the first free past the band");

        let mut headless = named("h", spec(service::CLUSTER_IP, service::HEADLESS, &[]));
        claim(&mut headless, None, &existing, &ranges).unwrap();
        assert_eq!(headless.spec.cluster_ip, "None");

        let cases = [
            (
                spec(service::CLUSTER_IP, "10.97.0.5", &[]),
                "spec.cluster_ip",
                "failed to allocate IP 10.97.0.5: provided IP (10.97.0.5) is not in the valid range. The range of valid IPs is 10.96.0.0/24",
            ),
            (spec(service::CLUSTER_IP, "10.96.0.255", &[]), "spec.cluster_ip", "not in the valid range"),
            (
                spec(service::CLUSTER_IP, "10.96.0.20", &[]),
                "spec.cluster_ip",
                "failed to allocate IP 10.96.0.20: provided IP is already allocated",
            ),
            (
                spec(service::NODE_PORT, "", &[80]),
                "spec.ports[0].node_port",
                "provided port is not in the valid range. The range of valid ports is 30000-30099",
            ),
            (spec(service::NODE_PORT, "", &[30016]), "spec.ports[0].node_port", "provided port is already allocated"),
        ];
        for (asked, field, message) in cases {
            let error = refusal(claim(&mut named("c", asked.clone()), None, &existing, &ranges));
            assert_eq!(error.field, field, "{asked:?}");
            assert!(error.message.contains(message), "{}", error.message);
        }

        // Its own address is no conflict on an update, and a kept one is not judged again.
        let stored = named("a", spec(service::NODE_PORT, "10.96.0.20", &[30016]));
        let mut again = stored.clone();
        claim(&mut again, Some(&stored), &existing, &ranges).unwrap();
        assert_eq!(again, stored);
    }
}
