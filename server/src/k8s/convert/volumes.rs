//! A pod's volumes and its containers' volume mounts, both ways. Sources other than
//! `emptyDir`, `hostPath`, `configMap` and `secret` do not come back from the round trip,
//! so [`super::strict::decode`] refuses them by name.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use shared::model::{
    ConfigMapVolumeSource, EmptyDirVolumeSource, HostPathVolumeSource, KeyToPath, SecretVolumeSource, Volume, VolumeMount,
};
use shared::quantity::{exact_memory, parse_memory};

use super::meta::{list, some};
use super::strict::Cause;

pub(super) fn volumes_out(volumes: &[Volume]) -> Option<Vec<core::Volume>> {
    list(volumes.iter().map(volume_out).collect())
}

fn volume_out(v: &Volume) -> core::Volume {
    core::Volume {
        name: v.name.clone(),
        empty_dir: v.empty_dir.as_ref().map(|e| core::EmptyDirVolumeSource {
            medium: some(&e.medium),
            size_limit: (e.size_limit != 0).then(|| Quantity(exact_memory(e.size_limit))),
        }),
        host_path: v.host_path.as_ref().map(|h| core::HostPathVolumeSource { path: h.path.clone(), type_: some(&h.type_) }),
        config_map: v.config_map.as_ref().map(|c| core::ConfigMapVolumeSource {
            name: c.name.clone(),
            items: items_out(&c.items),
            default_mode: c.default_mode,
            optional: c.optional,
        }),
        secret: v.secret.as_ref().map(|s| core::SecretVolumeSource {
            secret_name: some(&s.secret_name),
            items: items_out(&s.items),
            default_mode: s.default_mode,
            optional: s.optional,
        }),
        ..Default::default()
    }
}

fn items_out(items: &[KeyToPath]) -> Option<Vec<core::KeyToPath>> {
    list(items.iter().map(|i| core::KeyToPath { key: i.key.clone(), path: i.path.clone(), mode: i.mode }).collect())
}

fn items_in(items: Option<Vec<core::KeyToPath>>) -> Vec<KeyToPath> {
    items.unwrap_or_default().into_iter().map(|i| KeyToPath { key: i.key, path: i.path, mode: i.mode }).collect()
}

pub(super) fn volumes_in(volumes: Option<Vec<core::Volume>>, path: &str, errors: &mut Vec<Cause>) -> Vec<Volume> {
    let volumes = volumes.unwrap_or_default().into_iter().enumerate();
    volumes.map(|(i, v)| volume_in(v, &format!("{path}.volumes[{i}]"), errors)).collect()
}

fn volume_in(v: core::Volume, path: &str, errors: &mut Vec<Cause>) -> Volume {
    Volume {
        name: v.name,
        empty_dir: v.empty_dir.map(|e| EmptyDirVolumeSource {
            medium: e.medium.unwrap_or_default(),
            size_limit: e.size_limit.map_or(0, |Quantity(text)| {
                parse_memory(&text).unwrap_or_else(|message| {
                    errors.push(Cause::invalid(format!("{path}.emptyDir.sizeLimit"), message));
                    0
                })
            }),
        }),
        host_path: v.host_path.map(|h| HostPathVolumeSource { path: h.path, type_: h.type_.unwrap_or_default() }),
        config_map: v.config_map.map(|c| ConfigMapVolumeSource {
            name: c.name,
            items: items_in(c.items),
            default_mode: c.default_mode,
            optional: c.optional,
        }),
        secret: v.secret.map(|s| SecretVolumeSource {
            secret_name: s.secret_name.unwrap_or_default(),
            items: items_in(s.items),
            default_mode: s.default_mode,
            optional: s.optional,
        }),
    }
}

pub(super) fn mounts_out(mounts: &[VolumeMount]) -> Option<Vec<core::VolumeMount>> {
    list(
        mounts
            .iter()
            .map(|m| core::VolumeMount {
                name: m.name.clone(),
                mount_path: m.mount_path.clone(),
                read_only: m.read_only.then_some(true),
                sub_path: some(&m.sub_path),
                ..Default::default()
            })
            .collect(),
    )
}

pub(super) fn mounts_in(mounts: Option<Vec<core::VolumeMount>>) -> Vec<VolumeMount> {
    mounts
        .unwrap_or_default()
        .into_iter()
        .map(|m| VolumeMount {
            name: m.name,
            mount_path: m.mount_path,
            read_only: m.read_only.unwrap_or(false),
            sub_path: m.sub_path.unwrap_or_default(),
        })
        .collect()
}
