//! The node's cluster DNS, as CoreDNS serves a cluster's, built on hickory-server (its
//! catalog, its UDP and TCP serving and its forwarder; no DNS codec here): the cluster
//! domain from the Services the node watches ([`records`], [`handler`]), other names
//! forwarded to the host's resolver or given nameservers, or refused
//! (`--dns-forward host|none|IP[:PORT],…`). On the CNI pod
//! network it listens on port 53 of an address of the node's own ([`crate::network::CniNetwork::own_address`]),
//! and pods get a resolv.conf naming it ([`resolv`]).

pub mod handler;
pub mod records;
pub mod resolv;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hickory_resolver::config::{NameServerConfig, ResolverOpts};
use hickory_server::Server;
use hickory_server::proto::rr::{LowerName, Name};
use hickory_server::store::forwarder::{ForwardConfig, ForwardZoneHandler};
use hickory_server::zone_handler::{Catalog, ZoneHandler};
use shared::backoff::Backoff;
use tokio::net::{TcpListener, UdpSocket};
use tokio_util::sync::CancellationToken;

use self::handler::{ClusterDomain, ClusterReverse};
use self::records::ClusterZone;
use self::resolv::ResolvConfs;
use crate::network::{CniNetwork, OwnAddress};
use crate::services::Services;

/// The port pods ask on.
pub const PORT: u16 = 53;
/// How long a TCP client may stay silent before its connection is closed.
const TCP_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("--cluster-domain {0:?} is not a domain name such as {default}", default = records::DEFAULT_DOMAIN)]
    BadDomain(String),
    #[error("cannot listen for DNS on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("--dns-forward host: cannot read the host's resolver configuration (/etc/resolv.conf): {0}")]
    HostResolver(String),
    #[error("cannot make the DNS forwarder: {0}")]
    Forwarder(String),
    #[error("no address for the node's DNS on the pod network: {0}")]
    Address(#[from] crate::network::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `--dns-forward`: where names outside the cluster domain go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forward {
    /// To the nameservers of the host's `/etc/resolv.conf`, as CoreDNS's `forward . /etc/resolv.conf`.
    Host,
    /// To these nameservers, as CoreDNS's `forward . 192.0.2.53`.
    To(Vec<SocketAddr>),
    /// Nowhere: answered REFUSED, so that nothing leaves the machine (tests).
    None,
}

impl Forward {
    /// `host`, `none`, or nameservers as `IP` or `IP:PORT` (port 53 by default) separated by
    /// commas; `None` for anything else.
    pub fn parse(text: &str) -> Option<Forward> {
        match text.trim() {
            "host" => Some(Forward::Host),
            "none" => Some(Forward::None),
            servers => servers
                .split(',')
                .map(|server| {
                    let server = server.trim();
                    server.parse::<SocketAddr>().ok().or_else(|| Some(SocketAddr::new(server.parse().ok()?, PORT)))
                })
                .collect::<Option<Vec<_>>>()
                .map(Forward::To),
        }
    }
}

/// The DNS settings of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsConfig {
    /// `--cluster-domain`, such as `cluster.local`.
    pub domain: String,
    pub forward: Forward,
}

impl Default for DnsConfig {
    fn default() -> Self {
        DnsConfig { domain: records::DEFAULT_DOMAIN.to_string(), forward: Forward::Host }
    }
}

impl DnsConfig {
    /// The cluster domain as a fully qualified name.
    pub fn origin(&self) -> Result<Name> {
        let mut name = Name::from_ascii(&self.domain).map_err(|_| Error::BadDomain(self.domain.clone()))?;
        if name.num_labels() == 0 {
            return Err(Error::BadDomain(self.domain.clone()));
        }
        name.set_fqdn(true);
        Ok(name)
    }
}

/// A DNS server answering for the cluster, bound and ready to run.
pub struct ClusterDns {
    server: Server<Catalog>,
    domain: Arc<ClusterDomain>,
    origin: Name,
    local: SocketAddr,
}

/// How a port in use is waited for: the agent that stopped before this one may still be
/// letting its sockets go. 0.1 s, doubling, over six tries (about 3 s).
const BIND_BACKOFF: Backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
const BIND_TRIES: u32 = 6;

/// A UDP socket and a TCP listener on one address, tried again while the port is in use. For
/// port 0 the UDP socket picks the port, which TCP may already use elsewhere on the host:
/// then the next try picks another.
async fn bind_both(addr: SocketAddr) -> Result<(UdpSocket, TcpListener, SocketAddr)> {
    let mut failures = 0;
    loop {
        match try_bind_both(addr).await {
            Err(Error::Bind { source, .. }) if source.kind() == std::io::ErrorKind::AddrInUse && failures + 1 < BIND_TRIES => {
                failures += 1;
                tokio::time::sleep(BIND_BACKOFF.delay(failures)).await;
            }
            bound => return bound,
        }
    }
}

async fn try_bind_both(addr: SocketAddr) -> Result<(UdpSocket, TcpListener, SocketAddr)> {
    let bind_error = |source| Error::Bind { addr, source };
    let udp = UdpSocket::bind(addr).await.map_err(bind_error)?;
    let local = udp.local_addr().map_err(bind_error)?;
    let tcp = TcpListener::bind(local).await.map_err(|source| Error::Bind { addr: local, source })?;
    Ok((udp, tcp, local))
}

impl ClusterDns {
    /// Binds UDP and TCP on `addr` (port 0 picks a free one, the same for both).
    pub async fn bind(config: &DnsConfig, addr: SocketAddr) -> Result<ClusterDns> {
        let origin = config.origin()?;
        let (udp, tcp, local) = bind_both(addr).await?;
        let domain = Arc::new(ClusterDomain::new(ClusterZone::new(&origin, [], 0)));
        let mut catalog = Catalog::new();
        catalog.upsert(LowerName::from(origin.clone()), vec![domain.clone() as Arc<dyn ZoneHandler>]);
        let forwarder = match &config.forward {
            Forward::None => None,
            // A node whose own resolver cannot be read still serves the cluster's names.
            Forward::Host => host_forwarder().inspect_err(|e| tracing::warn!("{e}; names outside the cluster domain are refused")).ok(),
            Forward::To(servers) => Some(forwarder(servers.iter().map(name_server).collect(), ResolverOpts::default())?),
        };
        let forwarder: Option<Arc<dyn ZoneHandler>> = forwarder.map(|f| Arc::new(f) as Arc<dyn ZoneHandler>);
        for reverse_zone in ["in-addr.arpa.", "ip6.arpa."] {
            let origin = Name::from_ascii(reverse_zone).expect("a valid name");
            let reverse = Arc::new(ClusterReverse::new(origin.clone(), domain.clone(), forwarder.is_some())) as Arc<dyn ZoneHandler>;
            catalog.upsert(LowerName::from(origin), [Some(reverse), forwarder.clone()].into_iter().flatten().collect());
        }
        if let Some(forwarder) = forwarder {
            catalog.upsert(LowerName::from(Name::root()), vec![forwarder]);
        }
        let mut server = Server::new(catalog);
        server.register_socket(udp);
        server.register_listener(tcp, TCP_TIMEOUT, 64 * 1024);
        Ok(ClusterDns { server, domain, origin, local })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Answers from `services`, rebuilding the zone at each change, until `shutdown`.
    pub async fn run(mut self, services: Arc<Services>, shutdown: CancellationToken) {
        let mut updates = services.subscribe();
        let mut serial: u32 = 0;
        loop {
            let snapshot = updates.borrow_and_update().clone();
            serial = serial.wrapping_add(1);
            self.domain.replace(ClusterZone::new(&self.origin, snapshot.services.values(), serial));
            tokio::select! {
                changed = updates.changed() => if changed.is_err() { break },
                _ = shutdown.cancelled() => break,
            }
        }
        if let Err(e) = self.server.shutdown_gracefully().await {
            tracing::warn!(error = %e, "the DNS server stopped with an error");
        }
    }
}

/// The DNS of `node` on the CNI pod network: bound on port 53 of the node's own address, the
/// resolv.conf files that name it, under `state_dir`, and the address, held until [`leave`].
/// First the addresses that crashed agents of the state directory left on the loopback
/// interface are taken off it (their nodes get them back when they start again).
pub async fn on_pod_network(
    cni: Arc<CniNetwork>,
    config: &DnsConfig,
    node: &str,
    state_dir: &Path,
) -> Result<(ClusterDns, ResolvConfs, OwnAddress)> {
    let owner = format!("dns-{node}");
    let (network, own) = (cni.clone(), owner.clone());
    let held = tokio::task::spawn_blocking(move || {
        let swept = cni.sweep_own_addresses()?;
        if !swept.is_empty() {
            tracing::info!(?swept, "took the addresses of agents that stopped without letting them go off the loopback interface");
        }
        cni.own_address(&own)
    })
    .await
    .expect("the address lease does not panic")?;
    let dns = match ClusterDns::bind(config, SocketAddr::new(held.address, PORT)).await {
        Ok(dns) => dns,
        Err(e) => {
            network.set_aside_own_address(&owner);
            return Err(e);
        }
    };
    tracing::info!(address = %dns.local_addr(), domain = %config.domain, forward = ?config.forward, "cluster DNS listening for the node's pods");
    Ok((dns, ResolvConfs::new(&state_dir.join("dns").join(node), held.address, &config.domain), held))
}

/// Takes the address of `node`'s DNS off the host as its agent stops: all of it with the
/// node's containers ([`release`]); with them kept, only off the loopback interface, and its
/// lease and record stay for the next agent of the node, since the kept pods were told it.
pub fn leave(cni: &CniNetwork, node: &str, containers_kept: bool, held: OwnAddress) -> Result<()> {
    let result = match containers_kept {
        true => {
            cni.set_aside_own_address(&format!("dns-{node}"));
            Ok(())
        }
        false => release(cni, node),
    };
    drop(held);
    result
}

/// Lets the address of `node`'s DNS go: off the loopback interface, its lease and its record.
pub fn release(cni: &CniNetwork, node: &str) -> Result<()> {
    Ok(cni.release_own_address(&format!("dns-{node}"))?)
}

/// hickory's forwarder to the nameservers of the host's resolv.conf, for every name.
fn host_forwarder() -> Result<ForwardZoneHandler> {
    let (resolver, options) = hickory_resolver::system_conf::read_system_conf().map_err(|e| Error::HostResolver(e.to_string()))?;
    forwarder(resolver.name_servers().to_vec(), options)
}

/// hickory's forwarder to `name_servers`, for every name.
fn forwarder(name_servers: Vec<NameServerConfig>, options: ResolverOpts) -> Result<ForwardZoneHandler> {
    let config = ForwardConfig { name_servers, options: Some(options) };
    ForwardZoneHandler::builder_tokio(config).with_origin(Name::root()).build().map_err(Error::Forwarder)
}

/// A nameserver asked over UDP, and TCP for long answers, on its port.
fn name_server(server: &SocketAddr) -> NameServerConfig {
    let mut config = NameServerConfig::udp_and_tcp(server.ip());
    for connection in &mut config.connections {
        connection.port = server.port();
    }
    config
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use hickory_server::proto::op::{Message, Query, ResponseCode};
    use hickory_server::proto::rr::{Record, RecordType};
    use shared::model::{Endpoint, ObjectMeta, Service, ServicePort, ServiceSpec, ServiceStatus};

    use super::*;

    fn service(name: &str, cluster_ip: &str, endpoints: &[&str]) -> Service {
        let port = ServicePort { name: "http".into(), port: 80, target_port: 8080, ..Default::default() };
        Service {
            kind: "Service".into(),
            metadata: ObjectMeta::named("default", name),
            spec: ServiceSpec { ports: vec![port], cluster_ip: cluster_ip.into(), ..Default::default() },
            status: ServiceStatus {
                endpoints: endpoints.iter().map(|ip| Endpoint { ip: ip.to_string(), pod: "p".into(), node_name: "n1".into() }).collect(),
                ..Default::default()
            },
        }
    }

    /// One question over UDP, as a pod's resolver asks it.
    async fn ask(server: SocketAddr, name: &str, type_: RecordType) -> Message {
        let mut query = Message::query();
        query.metadata.recursion_desired = true;
        query.add_query(Query::query(Name::from_str(name).unwrap(), type_));
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        socket.send_to(&query.to_vec().unwrap(), server).await.unwrap();
        let mut buffer = vec![0; 4096];
        let (length, _) = tokio::time::timeout(Duration::from_secs(10), socket.recv_from(&mut buffer)).await.expect("an answer").unwrap();
        let answer = Message::from_vec(&buffer[..length]).unwrap();
        assert_eq!(answer.metadata.id, query.metadata.id);
        answer
    }

    fn addresses(records: &[Record]) -> Vec<String> {
        let mut addresses: Vec<String> = records.iter().map(|r| r.data.to_string()).collect();
        addresses.sort();
        addresses
    }

    #[tokio::test(start_paused = true)]
    async fn a_port_let_go_while_the_bind_waits_is_bound() {
        let held = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = held.local_addr().unwrap();
        let waited = tokio::time::Instant::now();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(250)).await;
            drop(held);
        });
        let (_udp, _tcp, local) = bind_both(addr).await.expect("bound once the holder lets the port go");
        assert_eq!(local, addr);
        assert_eq!(waited.elapsed(), Duration::from_millis(300), "tries at 0, 0.1 and 0.3 s");
    }

    #[tokio::test(start_paused = true)]
    async fn a_port_held_for_good_fails_after_the_last_try() {
        let held = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = held.local_addr().unwrap();
        let waited = tokio::time::Instant::now();
        let error = bind_both(addr).await.expect_err("the port stays in use");
        assert!(matches!(&error, Error::Bind { source, .. } if source.kind() == std::io::ErrorKind::AddrInUse), "{error}");
        assert_eq!(waited.elapsed(), Duration::from_millis(100 + 200 + 400 + 800 + 1600), "five waits between six tries");
    }

    #[tokio::test]
    async fn the_server_answers_services_on_udp_and_refuses_other_names_when_it_may_not_forward() {
        let services = Services::of([service("web", "10.96.0.10", &[]), service("db", records::HEADLESS, &["10.77.0.7", "10.77.0.8"])]);
        let config = DnsConfig { forward: Forward::None, ..DnsConfig::default() };
        let dns = ClusterDns::bind(&config, "127.0.0.1:0".parse().unwrap()).await.unwrap();
        let at = dns.local_addr();
        let shutdown = CancellationToken::new();
        let running = tokio::spawn(dns.run(services.clone(), shutdown.clone()));

        let web = shepherd_testing::poll(Duration::from_secs(10), "the zone holds web", || async {
            let answer = ask(at, "web.default.svc.cluster.local.", RecordType::A).await;
            if answer.answers.is_empty() { Err(format!("{answer:?}")) } else { Ok(answer) }
        })
        .await;
        assert_eq!(web.metadata.response_code, ResponseCode::NoError);
        assert!(web.metadata.authoritative);
        assert_eq!(addresses(&web.answers), ["10.96.0.10"]);
        assert_eq!(addresses(&ask(at, "db.default.svc.cluster.local.", RecordType::A).await.answers), ["10.77.0.7", "10.77.0.8"]);
        let srv = ask(at, "_http._tcp.web.default.svc.cluster.local.", RecordType::SRV).await;
        assert_eq!(addresses(&srv.answers), ["0 100 80 web.default.svc.cluster.local."]);
        assert_eq!(addresses(&srv.additionals), ["10.96.0.10"]);

        let unknown = ask(at, "nope.default.svc.cluster.local.", RecordType::A).await;
        assert_eq!(unknown.metadata.response_code, ResponseCode::NXDomain);
        assert!(unknown.answers.is_empty());
        assert_eq!(unknown.authorities.first().map(|r| r.record_type()), Some(RecordType::SOA), "the SOA says how long to remember");
        assert_eq!(ask(at, "web.default.svc.cluster.local.", RecordType::AAAA).await.metadata.response_code, ResponseCode::NoError);
        let outside = ask(at, "example.com.", RecordType::A).await;
        assert_eq!(outside.metadata.response_code, ResponseCode::Refused, "nothing is forwarded");
        let ptr = ask(at, "10.0.96.10.in-addr.arpa.", RecordType::PTR).await;
        assert_eq!(addresses(&ptr.answers), ["web.default.svc.cluster.local."], "a cluster IP's name");
        let other = ask(at, "1.2.0.192.in-addr.arpa.", RecordType::PTR).await;
        assert_eq!(other.metadata.response_code, ResponseCode::Refused, "not the cluster's, and not forwarded");

        shutdown.cancel();
        running.await.unwrap();
    }

    #[tokio::test]
    async fn the_server_answers_over_tcp_too() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let config = DnsConfig { domain: "corp.example".into(), forward: Forward::None };
        let dns = ClusterDns::bind(&config, "127.0.0.1:0".parse().unwrap()).await.unwrap();
        let at = dns.local_addr();
        let shutdown = CancellationToken::new();
        let running = tokio::spawn(dns.run(Services::of([service("web", "10.96.0.10", &[])]), shutdown.clone()));
        let answer = shepherd_testing::poll(Duration::from_secs(10), "a TCP answer for web", || async {
            let mut query = Message::query();
            query.metadata.recursion_desired = true;
            query.add_query(Query::query(Name::from_str("web.default.svc.corp.example.").unwrap(), RecordType::A));
            let bytes = query.to_vec().unwrap();
            let mut stream = tokio::net::TcpStream::connect(at).await.unwrap();
            // DNS over TCP: each message after its length in two bytes.
            stream.write_all(&u16::try_from(bytes.len()).unwrap().to_be_bytes()).await.unwrap();
            stream.write_all(&bytes).await.unwrap();
            let length = stream.read_u16().await.unwrap();
            let mut buffer = vec![0; usize::from(length)];
            stream.read_exact(&mut buffer).await.unwrap();
            let answer = Message::from_vec(&buffer).unwrap();
            if answer.answers.is_empty() { Err(format!("{answer:?}")) } else { Ok(answer) }
        })
        .await;
        assert_eq!(addresses(&answer.answers), ["10.96.0.10"], "under the configured domain");
        shutdown.cancel();
        running.await.unwrap();
    }

    #[tokio::test]
    async fn other_names_go_to_the_nameservers_it_forwards_to() {
        // The upstream: another cluster's DNS, on loopback.
        let outside = DnsConfig { domain: "outside.test".into(), forward: Forward::None };
        let upstream = ClusterDns::bind(&outside, "127.0.0.1:0".parse().unwrap()).await.unwrap();
        let upstream_at = upstream.local_addr();
        let shutdown = CancellationToken::new();
        let upstream = tokio::spawn(upstream.run(Services::of([service("far", "10.96.9.9", &[])]), shutdown.clone()));
        let config = DnsConfig { forward: Forward::To(vec![upstream_at]), ..DnsConfig::default() };
        let dns = ClusterDns::bind(&config, "127.0.0.1:0".parse().unwrap()).await.unwrap();
        let at = dns.local_addr();
        let node = tokio::spawn(dns.run(Services::of([service("web", "10.96.0.10", &[])]), shutdown.clone()));

        let far = shepherd_testing::poll(Duration::from_secs(10), "a forwarded answer", || async {
            let answer = ask(at, "far.default.svc.outside.test.", RecordType::A).await;
            if answer.answers.is_empty() { Err(format!("{answer:?}")) } else { Ok(answer) }
        })
        .await;
        assert_eq!(addresses(&far.answers), ["10.96.9.9"]);
        assert!(!far.metadata.authoritative && far.metadata.recursion_available, "forwarded, not its own: {far:?}");
        let gone = ask(at, "gone.default.svc.outside.test.", RecordType::A).await;
        assert_eq!(gone.metadata.response_code, ResponseCode::NXDomain, "the upstream's NXDOMAIN");
        assert_eq!(
            addresses(&ask(at, "web.default.svc.cluster.local.", RecordType::A).await.answers),
            ["10.96.0.10"],
            "its own names stay"
        );
        let far_ptr = ask(at, "9.9.96.10.in-addr.arpa.", RecordType::PTR).await;
        assert_eq!(addresses(&far_ptr.answers), ["far.default.svc.outside.test."], "a reverse name not the cluster's goes on");
        assert_eq!(addresses(&ask(at, "10.0.96.10.in-addr.arpa.", RecordType::PTR).await.answers), ["web.default.svc.cluster.local."]);
        shutdown.cancel();
        upstream.await.unwrap();
        node.await.unwrap();
    }

    #[test]
    fn forward_is_host_none_or_nameservers() {
        assert_eq!(Forward::parse("host"), Some(Forward::Host));
        assert_eq!(Forward::parse("none"), Some(Forward::None));
        assert_eq!(
            Forward::parse("192.0.2.53, 127.0.0.1:5353"),
            Some(Forward::To(vec!["192.0.2.53:53".parse().unwrap(), "127.0.0.1:5353".parse().unwrap()]))
        );
        for bad in ["", "hosts", "192.0.2.53,", "example.com:53"] {
            assert_eq!(Forward::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_cluster_domain_must_be_a_domain_name() {
        assert_eq!(DnsConfig::default().origin().unwrap().to_string(), "cluster.local.");
        for bad in [".", "", "a..b"] {
            let config = DnsConfig { domain: bad.into(), ..DnsConfig::default() };
            assert!(matches!(config.origin(), Err(Error::BadDomain(_))), "{bad:?}");
        }
    }
}
