//! Image references and the pull policy: which registry an image comes from, its tag, the
//! policy a container pulls by when its spec names none, and the cluster registry's words
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
