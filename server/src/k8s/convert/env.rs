//! A container's `env` and `envFrom`, both ways. `resourceFieldRef` has no counterpart, so
//! it does not come back from the round trip and [`super::strict::decode`] refuses it by name.

use k8s_openapi::api::core::v1 as core;
use shared::model::{EnvFromSource, EnvSourceRef, EnvVar, EnvVarSource, FieldSelector, KeySelector};

use super::meta::{list, some};

pub(super) fn env_out(env: &[EnvVar]) -> Option<Vec<core::EnvVar>> {
    list(
        env.iter()
            .map(|e| core::EnvVar {
                name: e.name.clone(),
                value: (e.value_from.is_none() || !e.value.is_empty()).then(|| e.value.clone()),
                value_from: e.value_from.as_ref().map(|s| core::EnvVarSource {
                    config_map_key_ref: s.config_map_key_ref.as_ref().map(|k| core::ConfigMapKeySelector {
                        name: k.name.clone(),
                        key: k.key.clone(),
                        optional: k.optional,
                    }),
                    secret_key_ref: s.secret_key_ref.as_ref().map(|k| core::SecretKeySelector {
                        name: k.name.clone(),
                        key: k.key.clone(),
                        optional: k.optional,
                    }),
                    field_ref: s
                        .field_ref
                        .as_ref()
                        .map(|f| core::ObjectFieldSelector { api_version: some(&f.api_version), field_path: f.field_path.clone() }),
                    resource_field_ref: None,
                }),
            })
            .collect(),
    )
}

pub(super) fn env_in(env: Option<Vec<core::EnvVar>>) -> Vec<EnvVar> {
    env.unwrap_or_default()
        .into_iter()
        .map(|e| EnvVar {
            name: e.name,
            value: e.value.unwrap_or_default(),
            value_from: e.value_from.map(|s| EnvVarSource {
                config_map_key_ref: s.config_map_key_ref.map(|k| KeySelector { name: k.name, key: k.key, optional: k.optional }),
                secret_key_ref: s.secret_key_ref.map(|k| KeySelector { name: k.name, key: k.key, optional: k.optional }),
                field_ref: s.field_ref.map(|f| FieldSelector { api_version: f.api_version.unwrap_or_default(), field_path: f.field_path }),
            }),
        })
        .collect()
}

pub(super) fn env_from_out(env_from: &[EnvFromSource]) -> Option<Vec<core::EnvFromSource>> {
    list(
        env_from
            .iter()
            .map(|e| core::EnvFromSource {
                prefix: some(&e.prefix),
                config_map_ref: e.config_map_ref.as_ref().map(|r| core::ConfigMapEnvSource { name: r.name.clone(), optional: r.optional }),
                secret_ref: e.secret_ref.as_ref().map(|r| core::SecretEnvSource { name: r.name.clone(), optional: r.optional }),
            })
            .collect(),
    )
}

pub(super) fn env_from_in(env_from: Option<Vec<core::EnvFromSource>>) -> Vec<EnvFromSource> {
    env_from
        .unwrap_or_default()
        .into_iter()
        .map(|e| EnvFromSource {
            prefix: e.prefix.unwrap_or_default(),
            config_map_ref: e.config_map_ref.map(|r| EnvSourceRef { name: r.name, optional: r.optional }),
            secret_ref: e.secret_ref.map(|r| EnvSourceRef { name: r.name, optional: r.optional }),
        })
        .collect()
}
