//! The core group's configuration kinds (`v1`): ConfigMap and Secret. A Secret's
//! `stringData` is merged into `data` here, as kube-apiserver's conversion does, so it is
//! write-only: a read never shows it.

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1 as core;
use shared::model::{BinaryData, ConfigMap, Secret};

use super::meta::{meta_in, meta_out, some};
use super::strict::{Cause, Convert};

fn bytes_out(data: &BinaryData) -> Option<std::collections::BTreeMap<String, ByteString>> {
    (!data.is_empty()).then(|| data.iter().map(|(k, v)| (k.clone(), ByteString(v.clone()))).collect())
}

fn bytes_in(data: Option<std::collections::BTreeMap<String, ByteString>>) -> BinaryData {
    data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect()
}

impl Convert for ConfigMap {
    type K8s = core::ConfigMap;

    fn to_k8s(&self) -> core::ConfigMap {
        core::ConfigMap {
            metadata: meta_out(&self.metadata),
            data: (!self.data.is_empty()).then(|| self.data.clone()),
            binary_data: bytes_out(&self.binary_data),
            immutable: self.immutable.then_some(true),
        }
    }

    fn from_k8s(map: core::ConfigMap, errors: &mut Vec<Cause>) -> ConfigMap {
        ConfigMap {
            kind: "ConfigMap".into(),
            metadata: meta_in(map.metadata, errors),
            data: map.data.unwrap_or_default(),
            binary_data: bytes_in(map.binary_data),
            immutable: map.immutable.unwrap_or(false),
        }
    }
}

impl Convert for Secret {
    type K8s = core::Secret;

    fn to_k8s(&self) -> core::Secret {
        core::Secret {
            metadata: meta_out(&self.metadata),
            type_: some(&self.type_),
            data: bytes_out(&self.data),
            string_data: None,
            immutable: self.immutable.then_some(true),
        }
    }

    fn from_k8s(secret: core::Secret, errors: &mut Vec<Cause>) -> Secret {
        let mut out = Secret {
            kind: "Secret".into(),
            metadata: meta_in(secret.metadata, errors),
            type_: secret.type_.unwrap_or_default(),
            data: bytes_in(secret.data),
            string_data: secret.string_data.unwrap_or_default(),
            immutable: secret.immutable.unwrap_or(false),
        };
        out.merge_string_data();
        out
    }

    const WRITE_ONLY: &'static [&'static str] = &["stringData"];
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::strict::{Error, decode};
    use super::*;

    #[test]
    fn string_data_is_merged_into_data_and_never_read_back() {
        let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
            "data": {"user": "YWRtaW4=", "password": "b2xk"}, "stringData": {"password": "new"}});
        let secret: Secret = decode(&body).expect("a Secret with stringData is taken");
        assert_eq!((secret.text("user").as_deref(), secret.text("password").as_deref()), (Some("admin"), Some("new")));
        let out = serde_json::to_value(secret.to_k8s()).unwrap();
        assert_eq!(out["type"], "Opaque");
        assert_eq!(out["data"], json!({"password": "bmV3", "user": "YWRtaW4="}));
        assert!(out.get("stringData").is_none());
    }

    #[test]
    fn a_refused_secret_names_the_key_and_never_the_value() {
        let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
            "stringData": {"bad key": "hunter2"}});
        let Err(Error::Refused { causes, .. }) = decode::<Secret>(&body) else { panic!("a bad key is refused") };
        let text: Vec<String> = causes.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 1, "{text:?}");
        // Merged into data first, as kube-apiserver validates it.
        assert!(text[0].starts_with("data[bad key]: Invalid value: a valid config key"), "{text:?}");
        assert!(!text[0].contains("hunter2"));

        let map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
            "data": {"a": "1"}, "binaryData": {"a": "AAE=", "b.bin": "AAE="}, "immutable": true});
        let Err(Error::Refused { causes, .. }) = decode::<ConfigMap>(&map) else { panic!("a key in both maps is refused") };
        assert_eq!(
            causes.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["binaryData[a]: Invalid value: duplicate of key present in data"]
        );
    }
}
