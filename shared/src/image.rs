//! Image references and the pull policy: which registry an image comes from, its tag,
//! whether Docker can read it at all, the policy a container pulls by when its spec names none, and the cluster registry's words
//! (its default address and the user a token signs in as). The agent, `sheepctl` and the
//! server's `registry` command all read references and users here.

use crate::model::PullPolicy;

/// Where `shepherd registry` listens unless told otherwise.
pub const DEFAULT_REGISTRY: &str = "127.0.0.1:5000";
/// The environment variable naming the cluster's registry (`HOST:PORT`) for the agent,
/// `sheepctl image push` and `shepherd-agent bootstrap-image --push`.
pub const REGISTRY_ENV: &str = "SHEPHERD_REGISTRY";
/// The registry user of an admin token (the first one; further ones are `admin-2`, …).
pub const ADMIN_USER: &str = "admin";

/// A parsed `[REGISTRY/]REPOSITORY[:TAG][@DIGEST]`, as Docker reads one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference<'a> {
    /// `HOST[:PORT]` when the first component names one (it has a `.` or a `:`, or is
    /// `localhost`); `None` means Docker Hub.
    pub registry: Option<&'a str>,
    pub repository: &'a str,
    /// The tag as written; `None` when there is none (Docker then means `latest`).
    pub tag: Option<&'a str>,
    pub digest: Option<&'a str>,
}

impl<'a> Reference<'a> {
    pub fn parse(image: &'a str) -> Reference<'a> {
        let (name, digest) = match image.split_once('@') {
            Some((name, digest)) => (name, Some(digest)),
            None => (image, None),
        };
        let (registry, path) = match name.split_once('/') {
            Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => (Some(first), rest),
            _ => (None, name),
        };
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repository, tag)) => (repository, Some(tag)),
            None => (path, None),
        };
        Reference { registry, repository, tag, digest }
    }

    /// The tag the engine uses: the written one, else `latest` (none with a digest).
    pub fn tag_or_latest(&self) -> Option<&'a str> {
        match (self.tag, self.digest) {
            (Some(tag), _) => Some(tag),
            (None, Some(_)) => None,
            (None, None) => Some("latest"),
        }
    }

    /// The policy a container pulls its image by when its spec names none. As Kubernetes
    /// defaults it: `Always` for `:latest` or no tag, else `IfNotPresent`; a digest never
    /// changes, so it is `IfNotPresent`. One difference: an image that names no registry is
    /// `IfNotPresent` whatever its tag, because Shepherd's nodes cannot reach Docker Hub and
    /// such an image (`minimal`) is one made on the node.
    pub fn default_pull_policy(&self) -> PullPolicy {
        match (self.registry, self.digest, self.tag_or_latest()) {
            (Some(_), None, Some("latest")) => PullPolicy::Always,
            _ => PullPolicy::IfNotPresent,
        }
    }

    /// `registry/repository:tag`: this image as the given registry would hold it; the
    /// reference's own registry, if any, is replaced.
    pub fn in_registry(&self, registry: &str) -> String {
        let tag = self.tag_or_latest().unwrap_or("latest");
        format!("{}/{}:{tag}", registry.trim_end_matches('/'), self.repository)
    }
}

/// Why Docker cannot read `image`, in the words of its reference library
/// (`ParseNormalizedNamed`, which the kubelet calls before it pulls); `None` when it can.
/// A familiar name is read as Docker Hub's (`minimal` is `docker.io/library/minimal`), so
/// the words name what Docker read. Hand-written because the one crate with this grammar
/// (oci-spec) lacks that normalising step, whose words the kubelet reports, and would bring
/// four proc-macro crates into this wasm crate.
pub fn reference_error(image: &str) -> Option<String> {
    if image.len() == 64 && image.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Some(format!("invalid repository name ({image}), cannot specify 64-byte hexadecimal strings"));
    }
    let (domain, remainder) = split_docker_domain(image);
    let remote = remainder.split_once(':').map_or(remainder.as_str(), |(remote, _)| remote);
    if remote.to_lowercase() != remote {
        return Some(format!("invalid reference format: repository name ({remote}) must be lowercase"));
    }
    let normalized = format!("{domain}/{remainder}");
    // Docker's other words, for a name with capitals or none, cannot follow the checks above.
    let Some((path, digest)) = match_reference(&normalized) else { return Some("invalid reference format".to_string()) };
    if path.len() > REPOSITORY_NAME_MAX {
        return Some(format!("repository name must not be more than {REPOSITORY_NAME_MAX} characters"));
    }
    digest.and_then(digest_error).map(str::to_string)
}

/// The longest repository path Docker accepts.
const REPOSITORY_NAME_MAX: usize = 255;
const DOCKER_HUB: &str = "docker.io";

/// Docker's `splitDockerDomain`: the registry a name is read from, and the rest, with
/// Docker Hub's `library/` before a one-part name.
fn split_docker_domain(name: &str) -> (String, String) {
    let (domain, remote) = match name.split_once('/') {
        None => return (DOCKER_HUB.to_string(), format!("library/{name}")),
        Some(("index.docker.io", remote)) => (DOCKER_HUB, remote),
        Some((first, remote)) if first == "localhost" || first.contains(['.', ':']) || first.to_lowercase() != first => (first, remote),
        Some(_) => (DOCKER_HUB, name),
    };
    let remote = if domain == DOCKER_HUB && !remote.contains('/') { format!("library/{remote}") } else { remote.to_string() };
    (domain.to_string(), remote)
}

/// Matches Docker's reference grammar, `[HOST[:PORT]/]PATH[:TAG][@DIGEST]`: the path and
/// the digest when it matches.
fn match_reference(reference: &str) -> Option<(&str, Option<&str>)> {
    let (name_tag, digest) = match reference.split_once('@') {
        Some((name_tag, digest)) => (name_tag, Some(Some(digest).filter(|d| is_digest(d))?)),
        None => (reference, None),
    };
    let last_slash = name_tag.rfind('/').map_or(0, |i| i + 1);
    let name = match name_tag[last_slash..].rfind(':') {
        Some(colon) => {
            let tag = &name_tag[last_slash + colon + 1..];
            let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
            let valid = tag.len() <= 128 && tag.starts_with(word) && tag.chars().all(|c| word(c) || c == '.' || c == '-');
            valid.then_some(&name_tag[..last_slash + colon])?
        }
        None => name_tag,
    };
    let all_path = |path: &str| path.split('/').all(is_path_component);
    // As in Docker's grammar, a first part that can be a domain is one.
    if let Some((domain, path)) = name.split_once('/')
        && is_domain_and_port(domain)
        && all_path(path)
    {
        return Some((path, digest));
    }
    all_path(name).then_some((name, digest))
}

/// `[a-z0-9]+` runs joined by `.`, `_`, `__` or dashes.
fn is_path_component(component: &str) -> bool {
    let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    // Split on every alphanumeric, the pieces left are the separators (or empty).
    component.starts_with(alphanumeric)
        && component.ends_with(alphanumeric)
        && component.split(alphanumeric).all(|separator| matches!(separator, "." | "_" | "__") || separator.bytes().all(|b| b == b'-'))
}

/// A domain name or a bracketed IPv6 address, then an optional `:PORT`.
fn is_domain_and_port(domain: &str) -> bool {
    let (host_valid, port) = match domain.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((address, port)) => (!address.is_empty() && address.chars().all(|c| c.is_ascii_hexdigit() || c == ':'), port),
            None => return false,
        },
        None => {
            let (host, port) = domain.find(':').map_or((domain, ""), |colon| domain.split_at(colon));
            let label = |l: &str| {
                !l.is_empty() && !l.starts_with('-') && !l.ends_with('-') && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            };
            (host.split('.').all(label), port)
        }
    };
    let port_valid = port.is_empty() || port.strip_prefix(':').is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    host_valid && port_valid
}

/// `ALGORITHM:HEX`, the hex at least 32 digits: what the reference grammar takes as a digest.
fn is_digest(digest: &str) -> bool {
    let Some((algorithm, hex)) = digest.split_once(':') else { return false };
    let part = |p: &str| p.starts_with(|c: char| c.is_ascii_alphabetic()) && p.chars().all(|c| c.is_ascii_alphanumeric());
    algorithm.split(['-', '_', '+', '.']).all(part) && hex.len() >= 32 && hex.chars().all(|c| c.is_ascii_hexdigit())
}

/// Why a digest the grammar took is still wrong for its algorithm (go-digest's `Validate`).
fn digest_error(digest: &str) -> Option<&'static str> {
    let (algorithm, hex) = digest.split_once(':')?;
    let length = match algorithm {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return Some("unsupported digest algorithm"),
    };
    if hex.len() != length {
        return Some("invalid checksum digest length");
    }
    (!hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))).then_some("invalid checksum digest format")
}

/// The registry user a token signs in as: the node's name for a node token; `admin`,
/// `admin-2`, … for admin tokens in the order the server reads them (`index` from 0).
pub fn admin_user(index: usize) -> String {
    match index {
        0 => ADMIN_USER.to_string(),
        n => format!("{ADMIN_USER}-{}", n + 1),
    }
}

/// Whether `registry` is a `HOST:PORT` (or a bare host) an image reference can start with.
pub fn registry_error(registry: &str) -> Option<String> {
    let reference = Reference::parse(registry);
    let looks_like_host = !registry.is_empty()
        && !registry.contains(['/', '@'])
        && (registry.contains(['.', ':']) || registry == "localhost")
        && reference.repository.chars().all(|c| c.is_ascii_alphanumeric() || "-.[]".contains(c));
    (!looks_like_host).then(|| format!("a registry is HOST:PORT such as {DEFAULT_REGISTRY}, got {registry:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_split_as_docker_reads_them() {
        let r = Reference::parse("127.0.0.1:5000/team/app:v2");
        assert_eq!((r.registry, r.repository, r.tag, r.digest), (Some("127.0.0.1:5000"), "team/app", Some("v2"), None));
        let r = Reference::parse("minimal");
        assert_eq!((r.registry, r.repository, r.tag), (None, "minimal", None));
        let r = Reference::parse("library/busybox:1.36");
        assert_eq!((r.registry, r.repository, r.tag), (None, "library/busybox", Some("1.36")));
        let r = Reference::parse("localhost/app@sha256:abc");
        assert_eq!((r.registry, r.repository, r.tag, r.digest), (Some("localhost"), "app", None, Some("sha256:abc")));
        assert_eq!(Reference::parse("m1:5000/minimal").tag_or_latest(), Some("latest"));
    }

    #[test]
    fn references_docker_cannot_read_get_its_words() {
        for valid in [
            "minimal",
            "minimal:1.0-rc_2",
            "127.0.0.1:5000/team/app:v2",
            "localhost/app",
            "[::1]:5000/app",
            "Registry.Example/app",
            "a__b/c-----d.e",
            "minimal@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(reference_error(valid), None, "{valid}");
        }
        let error = |image: &str| reference_error(image).unwrap_or_default();
        assert_eq!(error("Minimal:V3"), "invalid reference format: repository name (library/Minimal) must be lowercase");
        assert_eq!(error("MINIMAL"), "invalid reference format: repository name (library/MINIMAL) must be lowercase");
        assert_eq!(error("Registry.Example/App"), "invalid reference format: repository name (App) must be lowercase");
        assert_eq!(
            error("minimal@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"),
            "invalid checksum digest format"
        );
        assert_eq!(error("minimal@sha256:zz"), "invalid reference format");
        assert_eq!(error("minimal@sha256:0123456789abcdef0123456789abcdef"), "invalid checksum digest length");
        assert_eq!(error("minimal@md5:0123456789abcdef0123456789abcdef"), "unsupported digest algorithm");
        assert_eq!(error(&"a".repeat(10_000)), "repository name must not be more than 255 characters");
        assert_eq!(reference_error(&"a".repeat(247)), None, "library/ and 247 characters are 255");
        assert_eq!(error(&"a".repeat(248)), "repository name must not be more than 255 characters");
        for broken in
            ["mini\0mal", "mini\u{1b}[31mmal", "", "minimal:", "minimal:-1", "-minimal", "minimal_", "a/b//c", "a...b", "m1:port/app"]
        {
            assert_eq!(error(broken), "invalid reference format", "{broken:?}");
        }
        let hex = "0123456789abcdef".repeat(4);
        assert_eq!(error(&hex), format!("invalid repository name ({hex}), cannot specify 64-byte hexadecimal strings"));
    }

    #[test]
    fn latest_from_a_registry_is_always_pulled_and_local_images_are_not() {
        let policy = |image| Reference::parse(image).default_pull_policy();
        assert_eq!(policy("127.0.0.1:5000/minimal"), PullPolicy::Always);
        assert_eq!(policy("registry.example:5000/minimal:latest"), PullPolicy::Always);
        assert_eq!(policy("127.0.0.1:5000/minimal:1"), PullPolicy::IfNotPresent);
        assert_eq!(policy("127.0.0.1:5000/minimal@sha256:abc"), PullPolicy::IfNotPresent);
        assert_eq!(policy("minimal"), PullPolicy::IfNotPresent);
        assert_eq!(policy("minimal:latest"), PullPolicy::IfNotPresent);
    }

    #[test]
    fn an_image_moves_into_a_registry_with_its_tag() {
        assert_eq!(Reference::parse("minimal").in_registry("127.0.0.1:5000"), "127.0.0.1:5000/minimal:latest");
        assert_eq!(Reference::parse("old:5000/team/app:v2").in_registry("m1:5000/"), "m1:5000/team/app:v2");
    }

    #[test]
    fn registries_are_host_and_port() {
        assert_eq!(registry_error("127.0.0.1:5000"), None);
        assert_eq!(registry_error("m1.lan:5000"), None);
        assert_eq!(registry_error("localhost"), None);
        assert!(registry_error("m1").is_some());
        assert!(registry_error("http://m1:5000").is_some());
        assert!(registry_error("").is_some());
    }

    #[test]
    fn admin_tokens_become_numbered_users() {
        assert_eq!((admin_user(0), admin_user(1)), ("admin".to_string(), "admin-2".to_string()));
    }
}
