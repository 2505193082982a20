//! HTTPS for the API: the serving certificate (from files, or a certificate authority and a
//! certificate the server makes in its data directory and renews, as k3s does) and the listener that
//! does each connection's TLS handshake for axum. kubectl sends a kubeconfig's token only
//! over TLS, so a server with tokens needs HTTPS to be driven by kubectl.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::serve::Listener;
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use time::OffsetDateTime;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::server::TlsStream;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;

/// The directory under the data directory that holds a made certificate.
pub const SELF_SIGNED_DIR: &str = "tls";
/// The certificate authority clients trust, in [`SELF_SIGNED_DIR`].
pub const CA_FILE: &str = "ca.crt";
/// Its key, kept (owner only) to sign the next serving certificate.
const CA_KEY_FILE: &str = "ca.key";
const CERT_FILE: &str = "server.crt";
const KEY_FILE: &str = "server.key";
/// kubeadm's lifetimes: ten years for the authority, one for a serving certificate.
const CA_VALIDITY: time::Duration = time::Duration::days(3650);
const SERVING_VALIDITY: time::Duration = time::Duration::days(365);
/// A serving certificate this close to its end is made again when the server starts.
const RENEW_BEFORE: time::Duration = time::Duration::days(30);
/// How far a made certificate starts in the past, for a client whose clock is behind.
const BACKDATE: time::Duration = time::Duration::minutes(5);
/// A handshake that takes longer than this is dropped, so a silent client holds no slot.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshaken connections waiting for axum to take them.
const ACCEPTED_BACKLOG: usize = 128;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {path}: {cause}")]
    Read { path: PathBuf, cause: String },
    #[error("cannot write {path}: {cause}")]
    Write { path: PathBuf, cause: String },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: PathBuf },
    #[error("the {what} is not valid PEM: {cause}")]
    Pem { what: &'static str, cause: String },
    #[error("cannot read the certificate {path}: {cause}")]
    Certificate { path: PathBuf, cause: String },
    #[error("cannot make a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("the certificate and key cannot serve TLS: {0}")]
    Config(#[from] tokio_rustls::rustls::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What the server serves TLS with: a certificate chain and its key (PEM), and the PEM a
/// client should trust to reach it (the made certificate authority, or the chain itself).
#[derive(Clone)]
pub struct Identity {
    certificates: String,
    key: String,
    pub trust: String,
}

/// Never prints the key.
impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Identity(..)")
    }
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| Error::Read { path: path.to_path_buf(), cause: e.to_string() })
}

fn write(path: &Path, text: &str, mode: u32) -> Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let failed = |e: std::io::Error| Error::Write { path: path.to_path_buf(), cause: e.to_string() };
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(mode).open(path).map_err(failed)?;
    file.write_all(text.as_bytes()).map_err(failed)
}

impl Identity {
    /// A certificate chain (leaf first) and its private key, both PEM files. Clients are
    /// expected to trust the chain's issuer; the local node trusts the chain file itself.
    pub fn from_files(certificates_path: &Path, key_path: &Path) -> Result<Identity> {
        let certificates = read(certificates_path)?;
        if CertificateDer::pem_slice_iter(certificates.as_bytes()).next().is_none() {
            return Err(Error::NoCertificate { path: certificates_path.to_path_buf() });
        }
        let identity = Identity { trust: certificates.clone(), certificates, key: read(key_path)? };
        identity.server_config().map(|_| identity)
    }

    /// The certificate made in `data_dir/tls` on an earlier start, else a new certificate
    /// authority (`ca.crt`, its key in `ca.key`) and a serving certificate it signs for
    /// `hosts` (names or IP addresses). A stored serving certificate that ends within
    /// [`RENEW_BEFORE`] or does not cover `hosts` is made again by the same authority, so
    /// clients keep trusting `ca.crt`. Returns it with the path of `ca.crt`.
    pub fn self_signed(data_dir: &Path, hosts: &[String]) -> Result<(Identity, PathBuf)> {
        Identity::self_signed_at(data_dir, hosts, OffsetDateTime::now_utc())
    }

    fn self_signed_at(data_dir: &Path, hosts: &[String], now: OffsetDateTime) -> Result<(Identity, PathBuf)> {
        let dir = data_dir.join(SELF_SIGNED_DIR);
        let (ca_path, ca_key_path) = (dir.join(CA_FILE), dir.join(CA_KEY_FILE));
        let (cert_path, key_path) = (dir.join(CERT_FILE), dir.join(KEY_FILE));
        let stored = ca_path.is_file() && cert_path.is_file() && key_path.is_file();
        let identity = if stored {
            let identity = Identity { certificates: read(&cert_path)?, key: read(&key_path)?, trust: read(&ca_path)? };
            let Some(why) = renewal_reason(&cert_path, &identity.certificates, hosts, now)? else {
                return identity.server_config().map(|_| (identity, ca_path));
            };
            let ca_ends = not_after(&ca_path, &identity.trust)?;
            if ca_key_path.is_file() && ca_ends - now > RENEW_BEFORE {
                let ca_key = KeyPair::from_pem(&read(&ca_key_path)?)?;
                let issuer = Issuer::from_ca_cert_pem(&identity.trust, ca_key)?;
                let renewed = Identity::issue(&issuer, identity.trust, hosts, now, ca_ends)?;
                tracing::info!(
                    "made a new serving certificate {} for {}, signed by the same authority {}: the stored one {why}",
                    cert_path.display(),
                    hosts.join(", "),
                    ca_path.display()
                );
                renewed
            } else {
                tracing::warn!(
                    "made a new certificate authority {}: the serving certificate {why} and the authority {}; clients must trust the new {CA_FILE}",
                    ca_path.display(),
                    if ca_key_path.is_file() { "ends within 30 days" } else { "has no key here to sign another" }
                );
                Identity::new_authority(&dir, hosts, now)?
            }
        } else {
            Identity::new_authority(&dir, hosts, now)?
        };
        std::fs::create_dir_all(&dir).map_err(|e| Error::Write { path: dir.clone(), cause: e.to_string() })?;
        write(&key_path, &identity.key, 0o600)?;
        write(&cert_path, &identity.certificates, 0o644)?;
        write(&ca_path, &identity.trust, 0o644)?;
        Ok((identity, ca_path))
    }

    /// A new certificate authority, its key written to `dir/ca.key`, and a serving
    /// certificate it signs.
    fn new_authority(dir: &Path, hosts: &[String], now: OffsetDateTime) -> Result<Identity> {
        let (issuer, ca_key, ca_pem) = authority(now)?;
        std::fs::create_dir_all(dir).map_err(|e| Error::Write { path: dir.to_path_buf(), cause: e.to_string() })?;
        write(&dir.join(CA_KEY_FILE), &ca_key, 0o600)?;
        Identity::issue(&issuer, ca_pem, hosts, now, now + CA_VALIDITY)
    }

    /// A new certificate authority and a serving certificate it signs for `hosts`; the
    /// authority's key is not kept.
    pub fn generate(hosts: &[String]) -> Result<Identity> {
        let now = OffsetDateTime::now_utc();
        let (issuer, _, ca_pem) = authority(now)?;
        Identity::issue(&issuer, ca_pem, hosts, now, now + CA_VALIDITY)
    }

    /// A serving certificate for `hosts` from `issuer`, for [`SERVING_VALIDITY`] but never
    /// past the authority's own end.
    fn issue(
        issuer: &Issuer<'_, KeyPair>,
        ca_pem: String,
        hosts: &[String],
        now: OffsetDateTime,
        ca_ends: OffsetDateTime,
    ) -> Result<Identity> {
        let mut leaf = CertificateParams::new(hosts.to_vec())?;
        leaf.distinguished_name.push(DnType::CommonName, "shepherd");
        leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        leaf.use_authority_key_identifier_extension = true;
        leaf.not_before = now - BACKDATE;
        leaf.not_after = (now + SERVING_VALIDITY).min(ca_ends);
        let leaf_key = KeyPair::generate()?;
        let leaf_pem = leaf.signed_by(&leaf_key, issuer)?.pem();
        Ok(Identity { certificates: leaf_pem, key: leaf_key.serialize_pem(), trust: ca_pem })
    }

    /// The rustls settings: this certificate, HTTP/1.1 (axum serves no HTTP/2 here).
    pub fn server_config(&self) -> Result<Arc<ServerConfig>> {
        let chain = CertificateDer::pem_slice_iter(self.certificates.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Error::Pem { what: "certificate", cause: e.to_string() })?;
        let key =
            PrivateKeyDer::from_pem_slice(self.key.as_bytes()).map_err(|e| Error::Pem { what: "private key", cause: e.to_string() })?;
        let mut config = ServerConfig::builder().with_no_client_auth().with_single_cert(chain, key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// A new certificate authority for [`CA_VALIDITY`]: its issuer, its key (PEM) and its
/// certificate (PEM).
fn authority(now: OffsetDateTime) -> Result<(Issuer<'static, KeyPair>, String, String)> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name.push(DnType::CommonName, "shepherd-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    ca.not_before = now - BACKDATE;
    ca.not_after = now + CA_VALIDITY;
    let ca_key = KeyPair::generate()?;
    let ca_pem = ca.self_signed(&ca_key)?.pem();
    let key_pem = ca_key.serialize_pem();
    Ok((Issuer::new(ca, ca_key), key_pem, ca_pem))
}

/// Runs `f` on the first certificate in `pem`, read from `path`.
fn with_certificate<T>(path: &Path, pem: &str, f: impl FnOnce(&X509Certificate<'_>) -> Result<T>) -> Result<T> {
    let certificate = |cause: String| Error::Certificate { path: path.to_path_buf(), cause };
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(|e| certificate(e.to_string()))?;
    let parsed = pem.parse_x509().map_err(|e| certificate(e.to_string()))?;
    f(&parsed)
}

/// When the first certificate in `pem` (read from `path`) ends.
fn not_after(path: &Path, pem: &str) -> Result<OffsetDateTime> {
    with_certificate(path, pem, |parsed| Ok(parsed.validity().not_after.to_datetime()))
}

/// Why the stored serving certificate must be made again, if it must: it ends within
/// [`RENEW_BEFORE`] of `now`, or a host asked for is not among its names.
fn renewal_reason(path: &Path, pem: &str, hosts: &[String], now: OffsetDateTime) -> Result<Option<String>> {
    with_certificate(path, pem, |parsed| {
        let ends = parsed.validity().not_after.to_datetime();
        if ends - now <= RENEW_BEFORE {
            return Ok(Some(format!("ends {}", ends.date())));
        }
        let names = parsed.subject_alternative_name().map_err(|e| Error::Certificate { path: path.to_path_buf(), cause: e.to_string() })?;
        let (mut dns, mut ips) = (Vec::new(), Vec::new());
        for name in names.iter().flat_map(|n| &n.value.general_names) {
            match name {
                GeneralName::DNSName(host) => dns.push(host.to_ascii_lowercase()),
                GeneralName::IPAddress(bytes) => {
                    if let Ok(v4) = <[u8; 4]>::try_from(*bytes) {
                        ips.push(IpAddr::from(v4));
                    } else if let Ok(v6) = <[u8; 16]>::try_from(*bytes) {
                        ips.push(IpAddr::from(v6));
                    }
                }
                _ => {}
            }
        }
        let missing: Vec<&str> = hosts
            .iter()
            .filter(|host| match host.parse::<IpAddr>() {
                Ok(ip) => !ips.contains(&ip),
                Err(_) => !dns.contains(&host.to_ascii_lowercase()),
            })
            .map(String::as_str)
            .collect();
        Ok((!missing.is_empty()).then(|| format!("does not cover {}", missing.join(", "))))
    })
}

/// The names a made certificate is for: loopback by every name, and the address listened on
/// when it is a specific one.
pub fn default_hosts(addr: SocketAddr) -> Vec<String> {
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).into();
    let ip = addr.ip();
    if !ip.is_unspecified() && !hosts.contains(&ip.to_string()) {
        hosts.push(ip.to_string());
    }
    hosts
}

/// A TCP listener whose connections come out TLS-handshaken. Handshakes run on tasks of
/// their own, so a slow or silent client never stalls the accepting of others.
pub struct TlsListener {
    accepted: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    acceptor: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    pub fn new(listener: TcpListener, config: Arc<ServerConfig>) -> std::io::Result<TlsListener> {
        let local = listener.local_addr()?;
        let (tx, accepted) = mpsc::channel(ACCEPTED_BACKLOG);
        let acceptor = tokio::spawn(accept_loop(listener, TlsAcceptor::from(config), tx));
        Ok(TlsListener { accepted, local, acceptor })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

async fn accept_loop(mut listener: TcpListener, acceptor: TlsAcceptor, tx: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>) {
    loop {
        // axum's own accept: it logs and backs off on errors such as too many open files.
        let (tcp, peer) = Listener::accept(&mut listener).await;
        let (acceptor, tx) = (acceptor.clone(), tx.clone());
        tokio::spawn(async move {
            let handshake = async {
                if !starts_with_tls(&tcp).await {
                    refuse_plain_http(tcp).await;
                    return Err(std::io::Error::other("the client spoke plain HTTP"));
                }
                acceptor.accept(tcp).await
            };
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
                Ok(Ok(tls)) => {
                    let _ = tx.send((tls, peer)).await;
                }
                Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
}

/// Whether the first byte is a TLS handshake record's (22), as a TLS client's always is.
async fn starts_with_tls(tcp: &TcpStream) -> bool {
    let mut first = [0u8; 1];
    matches!(tcp.peek(&mut first).await, Ok(1) if first[0] == 0x16)
}

/// Answers a plain HTTP request on the TLS port with a 400 that says what to change, as
/// Kubernetes' API server does, instead of closing the connection without a word.
/// Go's words for a plain-HTTP request to a TLS port, with what to do about it.
pub const PLAIN_HTTP_REFUSAL: &str = "Client sent an HTTP request to an HTTPS server: use https:// in the server address";

/// The start of a plain-HTTP request this server reads to choose the answer's shape.
const REQUEST_LINE_LIMIT: usize = 2048;

/// Answers a plain-HTTP request with an error that names https, then closes the connection.
/// The native API gets a 400 in its JSON error shape. Under `/k8s` it is a 403 in plain
/// text: kubectl's first request is discovery, which client-go reads as raw bytes, so any
/// error answer becomes a generic one that keeps the server's words only for a text body
/// with 403 (a 400, Go's own answer, prints "the server rejected our request for an
/// unknown reason").
async fn refuse_plain_http(mut tcp: TcpStream) {
    use axum::http::{StatusCode, header};
    use tokio::io::AsyncWriteExt as _;
    let mut start = vec![0u8; REQUEST_LINE_LIMIT];
    let read = tcp.peek(&mut start).await.unwrap_or(0);
    let (status, content_type, body) = if crate::k8s::owns(&request_path(&start[..read])) {
        (StatusCode::FORBIDDEN, "text/plain; charset=utf-8".to_string(), format!("{PLAIN_HTTP_REFUSAL}\n").into_bytes().into())
    } else {
        let (parts, body) =
            axum::response::IntoResponse::into_response(crate::error::ApiError::bad_request(PLAIN_HTTP_REFUSAL)).into_parts();
        let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("application/json").to_string();
        (parts.status, content_type, axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default())
    };
    let head = format!("HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len());
    let _ = tcp.write_all(head.as_bytes()).await;
    let _ = tcp.write_all(&body).await;
    let _ = tcp.shutdown().await;
}

/// The path of the request line `GET /k8s/api?timeout=32s HTTP/1.1`, empty when the bytes
/// hold none.
fn request_path(start: &[u8]) -> String {
    let line = String::from_utf8_lossy(start.split(|b| *b == b'\n').next().unwrap_or_default()).into_owned();
    let target = line.split(' ').nth(1).unwrap_or_default();
    target.split('?').next().unwrap_or_default().to_string()
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.accepted.recv().await {
            Some(connection) => connection,
            // The accept loop never ends while the listener lives.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_made_certificate_is_kept_and_found_again() {
        let dir = tempfile::tempdir().unwrap();
        let hosts = default_hosts("127.0.0.1:9876".parse().unwrap());
        let (made, ca) = Identity::self_signed(dir.path(), &hosts).unwrap();
        assert_eq!(ca, dir.path().join("tls/ca.crt"));
        assert!(made.trust.starts_with("-----BEGIN CERTIFICATE-----"), "{}", made.trust);
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.path().join("tls/server.key")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the key is the owner's only");
        let mode = std::fs::metadata(dir.path().join("tls/ca.key")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "and so is the authority's");
        let (again, _) = Identity::self_signed(dir.path(), &hosts).unwrap();
        assert_eq!(again.trust, made.trust, "a restart serves the same certificate, so clients keep trusting it");
    }

    /// Whole days from `now` to the end of the certificate in `pem` (which keeps seconds only).
    fn days_left(pem: &str, now: OffsetDateTime) -> i64 {
        (not_after(Path::new("test"), pem).unwrap() - now + time::Duration::seconds(1)).whole_days()
    }

    #[test]
    fn made_certificates_live_as_long_as_kubeadms() {
        let dir = tempfile::tempdir().unwrap();
        let now = OffsetDateTime::now_utc();
        let (made, _) = Identity::self_signed_at(dir.path(), &["localhost".to_string()], now).unwrap();
        let days = |pem: &str| days_left(pem, now);
        assert_eq!((days(&made.trust), days(&made.certificates)), (3650, 365));
        let generated = Identity::generate(&["localhost".to_string()]).unwrap();
        assert_eq!((days(&generated.trust), days(&generated.certificates)), (3650, 365));
    }

    #[test]
    fn a_serving_certificate_near_its_end_is_made_again_by_the_same_authority() {
        let dir = tempfile::tempdir().unwrap();
        let hosts = default_hosts("127.0.0.1:9876".parse().unwrap());
        let now = OffsetDateTime::now_utc();
        // Made 340 days ago: 25 days left.
        let (old, _) = Identity::self_signed_at(dir.path(), &hosts, now - time::Duration::days(340)).unwrap();
        assert_eq!(days_left(&old.certificates, now), 25);
        let (renewed, ca) = Identity::self_signed_at(dir.path(), &hosts, now).unwrap();
        assert_eq!(renewed.trust, old.trust, "the authority is kept, so clients keep trusting it");
        assert_ne!(renewed.certificates, old.certificates);
        assert_eq!(days_left(&renewed.certificates, now), 365);
        assert_eq!(std::fs::read_to_string(dir.path().join("tls/server.crt")).unwrap(), renewed.certificates, "and stored");
        assert_eq!(std::fs::read_to_string(&ca).unwrap(), old.trust);
        renewed.server_config().unwrap();
        assert_chain(&renewed, "127.0.0.1", now);

        // More names than the stored certificate covers: made again, also by the same authority.
        let mut more = hosts.clone();
        more.extend(["shepherd.example".to_string(), "192.0.2.7".to_string()]);
        let (wider, _) = Identity::self_signed_at(dir.path(), &more, now).unwrap();
        assert_ne!(wider.certificates, renewed.certificates);
        assert_eq!(wider.trust, old.trust);
        assert_chain(&wider, "shepherd.example", now);
        assert_eq!(renewal_reason(Path::new("t"), &wider.certificates, &more, now).unwrap(), None);
        let (again, _) = Identity::self_signed_at(dir.path(), &more, now).unwrap();
        assert_eq!(again.certificates, wider.certificates, "a certificate that still serves is kept");

        // A store from before the authority's key was kept: a new authority, said in the log.
        std::fs::remove_file(dir.path().join("tls/ca.key")).unwrap();
        let later = now + time::Duration::days(340);
        let (fresh, _) = Identity::self_signed_at(dir.path(), &more, later).unwrap();
        assert_ne!(fresh.trust, old.trust);
        assert!(dir.path().join("tls/ca.key").is_file());
        assert_chain(&fresh, "192.0.2.7", later);
    }

    /// The serving certificate verifies against its authority for `host` at `at`.
    fn assert_chain(identity: &Identity, host: &str, at: OffsetDateTime) {
        use tokio_rustls::rustls::client::WebPkiServerVerifier;
        use tokio_rustls::rustls::client::danger::ServerCertVerifier as _;
        use tokio_rustls::rustls::pki_types::{ServerName, UnixTime};
        let mut roots = tokio_rustls::rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_slice(identity.trust.as_bytes()).unwrap()).unwrap();
        let verifier = WebPkiServerVerifier::builder(Arc::new(roots)).build().unwrap();
        let leaf = CertificateDer::from_pem_slice(identity.certificates.as_bytes()).unwrap();
        let name = ServerName::try_from(host.to_string()).unwrap();
        let at = UnixTime::since_unix_epoch(Duration::from_secs(at.unix_timestamp().try_into().unwrap()));
        verifier.verify_server_cert(&leaf, &[], &name, &[], at).unwrap_or_else(|e| panic!("{host}: {e}"));
    }

    #[test]
    fn files_without_a_certificate_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        std::fs::write(&cert, "not a certificate").unwrap();
        std::fs::write(&key, "not a key").unwrap();
        let err = Identity::from_files(&cert, &key).unwrap_err();
        assert!(err.to_string().contains("c.pem holds no PEM certificate"), "{err}");
        let missing = Identity::from_files(&dir.path().join("none.pem"), &key).unwrap_err();
        assert!(missing.to_string().starts_with("cannot read"), "{missing}");
    }

    #[test]
    fn a_plain_request_names_its_path_and_junk_names_none() {
        assert_eq!(request_path(b"GET /k8s/api?timeout=32s HTTP/1.1\r\nHost: x\r\n"), "/k8s/api");
        assert_eq!(request_path(b"GET /api/v1/pods HTTP/1.1"), "/api/v1/pods");
        assert_eq!(request_path(b"\x00\xff"), "");
        assert_eq!(request_path(b""), "");
    }

    #[test]
    fn the_default_names_add_a_specific_address() {
        assert_eq!(default_hosts("0.0.0.0:1".parse().unwrap()), ["localhost", "127.0.0.1", "::1"]);
        assert_eq!(default_hosts("192.0.2.7:1".parse().unwrap()).last().map(String::as_str), Some("192.0.2.7"));
    }
}
