//! A pod's volumes and where its containers mount them, with Kubernetes' four sources that
//! Shepherd runs: `emptyDir`, `hostPath`, `configMap` and `secret`.

use serde::{Deserialize, Serialize};

/// One volume of a pod: a name its containers' mounts refer to and exactly one source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct Volume {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub empty_dir: Option<EmptyDirVolumeSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_path: Option<HostPathVolumeSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapVolumeSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretVolumeSource>,
}

/// The source of a volume, as the agent sets it up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeSource<'a> {
    EmptyDir(&'a EmptyDirVolumeSource),
    HostPath(&'a HostPathVolumeSource),
    ConfigMap(&'a ConfigMapVolumeSource),
    Secret(&'a SecretVolumeSource),
}

impl Volume {
    /// The sources set, with their field names: validation wants exactly one.
    pub fn sources(&self) -> Vec<(&'static str, VolumeSource<'_>)> {
        let mut sources = Vec::with_capacity(1);
        if let Some(s) = &self.empty_dir {
            sources.push(("empty_dir", VolumeSource::EmptyDir(s)));
        }
        if let Some(s) = &self.host_path {
            sources.push(("host_path", VolumeSource::HostPath(s)));
        }
        if let Some(s) = &self.config_map {
            sources.push(("config_map", VolumeSource::ConfigMap(s)));
        }
        if let Some(s) = &self.secret {
            sources.push(("secret", VolumeSource::Secret(s)));
        }
        sources
    }

    /// The one source of a valid volume.
    pub fn source(&self) -> Option<VolumeSource<'_>> {
        self.sources().first().map(|(_, source)| *source)
    }

    /// What Kubernetes fills in when a pod is created: the files' mode of a configMap or
    /// secret volume.
    pub fn set_defaults(&mut self) {
        for mode in
            [self.config_map.as_mut().map(|c| &mut c.default_mode), self.secret.as_mut().map(|s| &mut s.default_mode)].into_iter().flatten()
        {
            mode.get_or_insert(DEFAULT_FILE_MODE);
        }
    }
}

/// The mode of a configMap's or secret's files when the volume names none: 0644.
pub const DEFAULT_FILE_MODE: i32 = 0o644;
/// The most a file mode may be: 0777.
pub const MAX_FILE_MODE: i32 = 0o777;

/// `Memory`: the medium of an emptyDir held in RAM (a tmpfs); empty: the node's disk.
pub const MEDIUM_MEMORY: &str = "Memory";

/// A directory that starts empty, lives as long as its pod, and is shared by its containers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct EmptyDirVolumeSource {
    /// Empty (the node's disk) or `Memory` (a tmpfs, counted in the container's memory).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub medium: String,
    /// Bytes; 0 for no limit. A `Memory` volume's tmpfs is this size.
    #[serde(deserialize_with = "crate::quantity::de_memory", skip_serializing_if = "is_zero")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::quantity::memory_schema"))]
    pub size_limit: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// The types a hostPath may name, checked on the node before the pod's containers start.
pub const HOST_PATH_TYPES: [&str; 8] =
    ["", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice"];

/// A file or directory of the node, which the server allows only with `--allow-host-path`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct HostPathVolumeSource {
    pub path: String,
    /// One of [`HOST_PATH_TYPES`]; empty checks nothing.
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
}

/// A ConfigMap's keys as files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ConfigMapVolumeSource {
    /// The ConfigMap, in the pod's namespace.
    pub name: String,
    /// Only these keys, at these paths; empty: every key, as a file of its name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<KeyToPath>,
    /// The files' mode, 0 to 0777 (default 0644).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_mode: Option<i32>,
    /// Whether the pod starts without the ConfigMap (or an item's key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

/// A Secret's keys as files, on a tmpfs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct SecretVolumeSource {
    /// The Secret, in the pod's namespace.
    pub secret_name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<KeyToPath>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_mode: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

/// One key of a ConfigMap or Secret as a file at `path`, relative to the volume.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct KeyToPath {
    pub key: String,
    pub path: String,
    /// This file's mode, 0 to 0777; none takes the volume's `default_mode`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<i32>,
}

/// Where a container sees a volume.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct VolumeMount {
    /// The pod's volume.
    pub name: String,
    /// An absolute path in the container, one mount per path.
    pub mount_path: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    /// A path inside the volume to mount instead of its root: relative, without `..`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub sub_path: String,
}
