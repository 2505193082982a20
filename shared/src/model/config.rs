//! ConfigMaps and Secrets: named sets of keys that pods read as environment variables (and
//! volumes read as files). Bytes travel as base64 in JSON, as in Kubernetes; a Secret's
//! `string_data` is written as text, merged into `data` when the server stores it, and never
//! read back.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::meta::{ObjectMeta, is_false};

/// The most a ConfigMap's or Secret's keys and values may hold together: Kubernetes'
/// `MaxSecretSize`, 1 MiB.
pub const MAX_CONFIG_BYTES: usize = 1024 * 1024;

/// A Secret's type when none is given.
pub const SECRET_TYPE_OPAQUE: &str = "Opaque";

/// Keys to text values.
pub type StringData = BTreeMap<String, String>;

/// Keys to bytes, base64 in JSON.
pub type BinaryData = BTreeMap<String, Vec<u8>>;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ConfigMap {
    pub kind: String,
    pub metadata: ObjectMeta,
    /// UTF-8 values.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub data: StringData,
    /// Other bytes, base64 in JSON; no key may be in both.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", with = "base64_values")]
    #[cfg_attr(feature = "schema", schemars(with = "StringData"))]
    pub binary_data: BinaryData,
    /// Once true, the data cannot change and this cannot be unset: delete and create again.
    #[serde(skip_serializing_if = "is_false")]
    pub immutable: bool,
}

impl ConfigMap {
    /// The number of keys, kubectl's DATA column.
    pub fn len(&self) -> usize {
        self.data.len() + self.binary_data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of `key`, from either map: `None` when absent, or when binary and not UTF-8
    /// (Kubernetes puts such a key into no environment variable either).
    pub fn text(&self, key: &str) -> Option<String> {
        self.data.get(key).cloned().or_else(|| self.binary_data.get(key).and_then(|b| String::from_utf8(b.clone()).ok()))
    }
}

#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Secret {
    pub kind: String,
    pub metadata: ObjectMeta,
    /// `Opaque` (the default) or one of Kubernetes' types (`kubernetes.io/tls`, …), which
    /// name the keys the Secret must hold.
    #[serde(rename = "type")]
    pub type_: String,
    /// The values, base64 in JSON.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", with = "base64_values")]
    #[cfg_attr(feature = "schema", schemars(with = "StringData"))]
    pub data: BinaryData,
    /// Write-only text values: merged into `data` when stored (a key here wins), never shown.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub string_data: StringData,
    /// Once true, the data cannot change and this cannot be unset: delete and create again.
    #[serde(skip_serializing_if = "is_false")]
    pub immutable: bool,
}

impl Secret {
    /// Moves `string_data` into `data`, as kube-apiserver does when it stores a Secret, and
    /// fills in the default type.
    pub fn merge_string_data(&mut self) {
        for (key, value) in std::mem::take(&mut self.string_data) {
            self.data.insert(key, value.into_bytes());
        }
        if self.type_.is_empty() {
            self.type_ = SECRET_TYPE_OPAQUE.into();
        }
    }

    /// The value of `key` as text, as an environment variable takes it: `None` when absent
    /// or not UTF-8.
    pub fn text(&self, key: &str) -> Option<String> {
        self.data.get(key).and_then(|b| String::from_utf8(b.clone()).ok())
    }
}

/// Keys and sizes only: a Secret's values never reach a log line through `{:?}`.
impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sizes = |m: &BinaryData| m.iter().map(|(k, v)| (k.clone(), v.len())).collect::<BTreeMap<_, _>>();
        let string_sizes: BTreeMap<_, _> = self.string_data.iter().map(|(k, v)| (k.clone(), v.len())).collect();
        f.debug_struct("Secret")
            .field("kind", &self.kind)
            .field("metadata", &self.metadata)
            .field("type_", &self.type_)
            .field("data (bytes per key)", &sizes(&self.data))
            .field("string_data (bytes per key)", &string_sizes)
            .field("immutable", &self.immutable)
            .finish()
    }
}

/// Serde for a map of bytes written as base64 strings (standard alphabet, padded), as
/// Kubernetes writes `[]byte`.
mod base64_values {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};

    use super::BinaryData;

    pub fn serialize<S: Serializer>(map: &BinaryData, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(map.iter().map(|(k, v)| (k, STANDARD.encode(v))))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BinaryData, D::Error> {
        let text: std::collections::BTreeMap<String, String> = Deserialize::deserialize(d)?;
        text.into_iter()
            .map(|(key, value)| match STANDARD.decode(value.as_bytes()) {
                Ok(bytes) => Ok((key, bytes)),
                // The key, never the value: this may be a Secret's.
                Err(e) => Err(D::Error::custom(format!("the value of {key:?} is not valid base64 ({e})"))),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_base64_in_json_and_string_data_merges_into_data() {
        let mut secret: Secret = serde_json::from_value(serde_json::json!({
            "kind": "Secret", "metadata": {"name": "db"},
            "data": {"user": "YWRtaW4=", "password": "b2xk"}, "string_data": {"password": "new"}
        }))
        .unwrap();
        assert_eq!(secret.data["user"], b"admin");
        secret.merge_string_data();
        assert_eq!((secret.text("password").as_deref(), secret.type_.as_str()), (Some("new"), "Opaque"));
        let json = serde_json::to_value(&secret).unwrap();
        assert_eq!(json["data"], serde_json::json!({"password": "bmV3", "user": "YWRtaW4="}));
        assert!(json.get("string_data").is_none());
        let debug = format!("{secret:?}");
        assert!(!debug.contains("admin") && !debug.contains("new\"") && debug.contains("\"user\": 5"), "{debug}");
    }

    #[test]
    fn a_bad_base64_value_is_named_by_its_key_alone() {
        let error = serde_json::from_value::<Secret>(serde_json::json!({"data": {"token": "s3cr3t!"}})).unwrap_err().to_string();
        assert!(error.contains("\"token\"") && !error.contains("s3cr3t"), "{error}");
        let map: ConfigMap = serde_json::from_value(serde_json::json!({"data": {"a": "x"}, "binary_data": {"b": "AAE="}})).unwrap();
        assert_eq!((map.len(), map.text("a").as_deref(), map.text("b")), (2, Some("x"), Some("\0\u{1}".into())));
    }
}
