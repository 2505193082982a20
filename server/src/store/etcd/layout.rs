//! Where objects sit in etcd and how: under `<prefix>/<plural>/<namespace>/<name>` (or
//! `<plural>/<name>` for a cluster-scoped kind), as kube-apiserver keeps them under
//! `/registry/…`; as JSON with no resource_version, which is the key's mod revision, a
//! Secret's encrypted with its etcd key as the authenticated data when a key file is given
//! (as kube-apiserver's); and the marker key that says a prefix holds a Shepherd store.

use shared::model::{Kind, Object};

use super::super::encryption::Encryption;
use super::super::error::{Result, StoreError};
use super::super::key::Key;

/// The marker's value: what a prefix written by Shepherd holds at [`Layout::marker`].
const MARKER: &str = r#"{"store":"shepherd","format":1}"#;

/// The keys of one store: every one begins with its prefix and a slash.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    prefix: String,
    encryption: Encryption,
}

impl Layout {
    /// A layout under `prefix`: an absolute path with no trailing slash (`/registry`), whose
    /// Secrets are written with `encryption` and read with it.
    pub(crate) fn new(prefix: &str, encryption: Encryption) -> Result<Layout> {
        let valid = prefix.len() > 1 && prefix.starts_with('/') && !prefix.ends_with('/') && !prefix.contains("//");
        if !valid {
            return Err(StoreError::Backend(format!(
                "--etcd-prefix {prefix:?}: give an absolute path such as /registry, without a trailing slash"
            )));
        }
        Ok(Layout { prefix: prefix.to_string(), encryption })
    }

    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The start of every key of this store: watched and listed as one range.
    pub(crate) fn range(&self) -> String {
        format!("{}/", self.prefix)
    }

    /// The key that marks the prefix as Shepherd's; no object's key, as no kind's plural
    /// starts with a dot (nor do the node guards').
    pub(crate) fn marker(&self) -> String {
        format!("{}/.shepherd", self.prefix)
    }

    pub(crate) fn marker_value() -> &'static str {
        MARKER
    }

    /// The key every bind to `node` writes: two servers binding to one node at once both
    /// compare it, so that one of them judges the node's room again (see the writer).
    pub(crate) fn node_guard(&self, node: &str) -> String {
        format!("{}/.binds/{node}", self.prefix)
    }

    /// The key every write that lists `kind` whole writes (a Service that takes a cluster IP
    /// or a node port from the pool all Services share): two servers allocating at once both
    /// compare it, so that one of them allocates again on the other's result.
    pub(crate) fn list_guard(&self, kind: Kind) -> String {
        format!("{}/.lists/{}", self.prefix, kind.plural())
    }

    /// The key a writer touches to learn that the cache has every change up to now: its
    /// change comes through the watch after every change before it. (etcd 3.4's progress
    /// notifications can overtake changes still on their way, etcd issue 15220.)
    pub(crate) fn progress(&self) -> String {
        format!("{}/.progress", self.prefix)
    }

    pub(crate) fn key(&self, key: &Key) -> String {
        format!("{}/{}/{}", self.prefix, key.kind.plural(), key.key)
    }

    /// The object key an etcd key names; `None` for the marker and for what no kind owns.
    pub(crate) fn parse(&self, etcd_key: &[u8]) -> Option<Key> {
        let text = std::str::from_utf8(etcd_key).ok()?;
        let (plural, key) = text.strip_prefix(&self.range())?.split_once('/')?;
        let kind = Kind::ALL.into_iter().find(|kind| kind.plural() == plural)?;
        Some(Key { kind, key: key.to_string() })
    }

    /// The stored bytes of `object`, whose resource_version the key's mod revision stands for.
    pub(crate) fn encode(&self, object: &Object) -> Result<Vec<u8>> {
        let key = Key::of(object);
        let mut value = serde_json::to_value(object).map_err(|e| StoreError::Backend(format!("cannot encode {key}: {e}")))?;
        if let Some(metadata) = value.get_mut("metadata").and_then(serde_json::Value::as_object_mut) {
            metadata.remove("resource_version");
        }
        let json = serde_json::to_vec(&value).map_err(|e| StoreError::Backend(format!("cannot encode {key}: {e}")))?;
        self.encryption.seal(key.kind, &self.key(&key), json).map_err(|e| StoreError::Backend(format!("cannot store {key}: {e}")))
    }

    /// The object stored at `key` with mod revision `revision` and whether its value is stale
    /// (see [`Encryption`]), or why it cannot be read.
    pub(crate) fn decode(&self, key: &Key, value: &[u8], revision: i64) -> std::result::Result<(Object, bool), String> {
        let location = self.key(key);
        let opened = self.encryption.open(key.kind, &location, value).map_err(|e| format!("its value at {location} in etcd: {e}"))?;
        let value = opened.value;
        let corrupt = |why: String| format!("its value at {location} in etcd is not a Shepherd object: {why}");
        let value: serde_json::Value = serde_json::from_slice(&value).map_err(|e| corrupt(e.to_string()))?;
        let mut object = Object::from_value(value).map_err(|e| corrupt(e.to_string()))?;
        if Key::of(&object) != *key {
            return Err(corrupt(format!("it holds {}", Key::of(&object))));
        }
        object.metadata_mut().resource_version = u64::try_from(revision).unwrap_or_default();
        Ok((object, opened.stale))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fixtures::pod;

    #[test]
    fn keys_follow_kube_apiservers_registry_and_parse_back() {
        let layout = Layout::new("/registry", Encryption::default()).unwrap();
        let key = Key::new(Kind::Pod, "default", "web");
        assert_eq!(layout.key(&key), "/registry/pods/default/web");
        assert_eq!(layout.parse(b"/registry/pods/default/web"), Some(key));
        assert_eq!(layout.key(&Key::new(Kind::Node, "", "n1")), "/registry/nodes/n1");
        assert_eq!(layout.parse(layout.marker().as_bytes()), None);
        assert_eq!(layout.parse(layout.node_guard("n1").as_bytes()), None);
        assert_eq!(layout.parse(layout.list_guard(Kind::Service).as_bytes()), None);
        assert_eq!(layout.parse(b"/registry/minions/n1"), None, "no kind of Shepherd's");
        assert_eq!(layout.parse(b"/registryx/pods/default/web"), None);
        for bad in ["", "/", "registry", "/registry/", "//registry"] {
            assert!(Layout::new(bad, Encryption::default()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_value_keeps_no_resource_version_and_reads_back_at_its_mod_revision() {
        let layout = Layout::new("/r", Encryption::default()).unwrap();
        let mut object = pod("web", "n1");
        object.metadata_mut().resource_version = 7;
        let bytes = layout.encode(&object).unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains("resource_version"));
        let (read, stale) = layout.decode(&Key::of(&object), &bytes, 42).unwrap();
        assert!(!stale);
        assert_eq!(read.metadata().resource_version, 42);
        assert_eq!(read.metadata().name, "web");
        let elsewhere = layout.decode(&Key::new(Kind::Pod, "default", "other"), &bytes, 42).unwrap_err();
        assert!(elsewhere.contains("/r/pods/default/other"), "{elsewhere}");
        assert!(layout.decode(&Key::of(&object), b"k8s\0\x0a", 1).is_err(), "a kube-apiserver protobuf value");
    }
}
