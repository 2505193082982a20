//! A pod's volumes and its containers' mounts, as `pkg/apis/core/validation` holds them:
//! unique names, one source each, mounts of declared volumes at unique absolute paths, and
//! paths inside a volume that stay inside it.

use std::collections::BTreeMap;

use super::{Errors, config_key_error, dns_label_error};
use crate::model::{HOST_PATH_TYPES, KeyToPath, MAX_FILE_MODE, MEDIUM_MEMORY, PodSpec, VolumeSource};

/// The volumes of `spec` (at `path`) and every container's mounts of them.
pub(super) fn check_volumes(errors: &mut Errors, path: &str, spec: &PodSpec) {
    let mut declared = BTreeMap::new();
    for (i, volume) in spec.volumes.iter().enumerate() {
        let volume_path = format!("{path}.volumes[{i}]");
        if let Some(message) = dns_label_error(&volume.name) {
            errors.add(format!("{volume_path}.name"), message);
        } else if declared.insert(volume.name.as_str(), i).is_some() {
            errors.add(format!("{volume_path}.name"), format!("duplicate volume name {:?}", volume.name));
        }
        let sources = volume.sources();
        match sources.as_slice() {
            [] => errors.add(&volume_path, "must specify a volume type: Shepherd runs emptyDir, hostPath, configMap and secret volumes"),
            [(_, source)] => check_source(errors, &volume_path, *source),
            [_, (second, _), ..] => errors.add(format!("{volume_path}.{second}"), "may not specify more than 1 volume type"),
        }
    }
    for (i, container) in spec.containers.iter().enumerate() {
        let mut paths = BTreeMap::new();
        for (j, mount) in container.volume_mounts.iter().enumerate() {
            let mount_path = format!("{path}.containers[{i}].volume_mounts[{j}]");
            if mount.name.is_empty() {
                errors.add(format!("{mount_path}.name"), "must name one of the pod's volumes");
            } else if !declared.contains_key(mount.name.as_str()) {
                errors
                    .add(format!("{mount_path}.name"), format!("names no volume of the pod: {:?} is not declared in volumes", mount.name));
            }
            if mount.mount_path.is_empty() {
                errors.add(format!("{mount_path}.mount_path"), "must not be empty");
            } else if !mount.mount_path.starts_with('/') {
                errors.invalid(format!("{mount_path}.mount_path"), &mount.mount_path, "must be an absolute path");
            } else if let Some(other) = paths.insert(normalized(&mount.mount_path), mount.mount_path.as_str()) {
                errors.add(format!("{mount_path}.mount_path"), format!("must be unique: another mount of this container is at {other:?}"));
            }
            if !mount.sub_path.is_empty()
                && let Some(message) = descending_path_error(&mount.sub_path)
            {
                errors.add(format!("{mount_path}.sub_path"), message);
            }
        }
    }
}

/// `/data/` and `/data` are one place in a container.
fn normalized(path: &str) -> String {
    path.split('/').filter(|part| !part.is_empty() && *part != ".").collect::<Vec<_>>().join("/")
}

fn check_source(errors: &mut Errors, path: &str, source: VolumeSource<'_>) {
    match source {
        VolumeSource::EmptyDir(empty_dir) => {
            if !matches!(empty_dir.medium.as_str(), "" | MEDIUM_MEMORY) {
                errors.invalid(
                    format!("{path}.empty_dir.medium"),
                    &empty_dir.medium,
                    format!("must be empty (the node's disk) or {MEDIUM_MEMORY}"),
                );
            }
            if empty_dir.size_limit < 0 {
                errors.invalid(format!("{path}.empty_dir.size_limit"), &empty_dir.size_limit, "must not be negative");
            }
        }
        VolumeSource::HostPath(host_path) => {
            if host_path.path.is_empty() {
                errors.add(format!("{path}.host_path.path"), "must not be empty");
            } else if !host_path.path.starts_with('/') {
                errors.invalid(format!("{path}.host_path.path"), &host_path.path, "must be an absolute path");
            } else if host_path.path.split('/').any(|part| part == "..") {
                errors.add(format!("{path}.host_path.path"), "must not contain '..'");
            }
            if !HOST_PATH_TYPES.contains(&host_path.type_.as_str()) {
                errors.not_supported(format!("{path}.host_path.type"), &host_path.type_, &HOST_PATH_TYPES);
            }
        }
        VolumeSource::ConfigMap(config_map) => {
            if config_map.name.is_empty() {
                errors.add(format!("{path}.config_map.name"), "must name the ConfigMap");
            }
            check_files(errors, &format!("{path}.config_map"), &config_map.items, config_map.default_mode);
        }
        VolumeSource::Secret(secret) => {
            if secret.secret_name.is_empty() {
                errors.add(format!("{path}.secret.secret_name"), "must name the Secret");
            }
            check_files(errors, &format!("{path}.secret"), &secret.items, secret.default_mode);
        }
    }
}

/// The files of a configMap or secret volume: items with a valid key at a path that stays
/// inside the volume, and modes from 0 to 0777.
fn check_files(errors: &mut Errors, path: &str, items: &[KeyToPath], default_mode: Option<i32>) {
    if let Some(mode) = default_mode {
        check_mode(errors, &format!("{path}.default_mode"), mode);
    }
    let mut paths = BTreeMap::new();
    for (i, item) in items.iter().enumerate() {
        let item_path = format!("{path}.items[{i}]");
        if let Some(message) = config_key_error(&item.key) {
            errors.add(format!("{item_path}.key"), message);
        }
        match descending_path_error(&item.path) {
            _ if item.path.is_empty() => errors.add(format!("{item_path}.path"), "must not be empty"),
            Some(message) => errors.add(format!("{item_path}.path"), message),
            // Kubernetes' ValidateLocalNonReservedPath: `..data` and `..<version>` are the
            // atomic writer's own names.
            None if item.path.starts_with("..") => errors.invalid(format!("{item_path}.path"), &item.path, "must not start with '..'"),
            None => {
                if let Some(other) = paths.insert(normalized(&item.path), item.path.as_str()) {
                    errors.add(format!("{item_path}.path"), format!("must be unique: another item is at {other:?}"));
                }
            }
        }
        if let Some(mode) = item.mode {
            check_mode(errors, &format!("{item_path}.mode"), mode);
        }
    }
}

fn check_mode(errors: &mut Errors, path: &str, mode: i32) {
    if !(0..=MAX_FILE_MODE).contains(&mode) {
        // As Kubernetes: the value in decimal before the message, so -1 reads -1.
        errors.invalid(path, &mode, "must be a number between 0 and 0777 (octal), both inclusive");
    }
}

/// A path inside a volume (a `sub_path`, an item's `path`): relative, and with no `..`
/// that could climb out of the volume.
fn descending_path_error(path: &str) -> Option<String> {
    if path.starts_with('/') {
        Some(format!("must be a relative path, got {path:?}"))
    } else if path.split('/').any(|part| part == "..") {
        Some(format!("must not contain '..', got {path:?}"))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use crate::api::FieldError;
    use crate::model::Pod;
    use crate::validation::validate_pod;

    /// A pod read from the native JSON, with `volumes` and the first container's `mounts`.
    fn pod(volumes: serde_json::Value, mounts: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({"kind": "Pod", "metadata": {"name": "web"},
            "spec": {"volumes": volumes, "containers": [{"name": "web", "image": "minimal", "volume_mounts": mounts}]}}))
        .unwrap()
    }

    fn errors(pod: &Pod) -> Vec<(String, String)> {
        validate_pod(pod).err().unwrap_or_default().into_iter().map(|FieldError { field, message, .. }| (field, message)).collect()
    }

    fn fields(pod: &Pod) -> Vec<String> {
        errors(pod).into_iter().map(|(field, _)| field).collect()
    }

    #[test]
    fn every_source_with_its_mounts_passes() {
        let pod = pod(
            serde_json::json!([
                {"name": "scratch", "empty_dir": {}},
                {"name": "cache", "empty_dir": {"medium": "Memory", "size_limit": "64Mi"}},
                {"name": "logs", "host_path": {"path": "/var/log", "type": "Directory"}},
                {"name": "conf", "config_map": {"name": "web", "items": [{"key": "nginx.conf", "path": "conf/nginx.conf", "mode": 0o600}],
                    "default_mode": 0o644}},
                {"name": "creds", "secret": {"secret_name": "db", "optional": true}},
            ]),
            serde_json::json!([
                {"name": "scratch", "mount_path": "/scratch"},
                {"name": "cache", "mount_path": "/cache"},
                {"name": "logs", "mount_path": "/logs", "read_only": true},
                {"name": "conf", "mount_path": "/etc/nginx/nginx.conf", "sub_path": "conf/nginx.conf"},
                {"name": "creds", "mount_path": "/creds"},
            ]),
        );
        assert_eq!(errors(&pod), []);
        assert_eq!(pod.spec.volumes[1].empty_dir.as_ref().unwrap().size_limit, 64 << 20);
    }

    #[test]
    fn a_volume_name_used_twice_is_refused() {
        let pod = pod(serde_json::json!([{"name": "data", "empty_dir": {}}, {"name": "data", "empty_dir": {}}]), serde_json::json!([]));
        assert_eq!(errors(&pod), [("spec.volumes[1].name".to_string(), "duplicate volume name \"data\"".to_string())]);
    }

    #[test]
    fn a_mount_of_an_undeclared_volume_is_refused() {
        let pod =
            pod(serde_json::json!([{"name": "data", "empty_dir": {}}]), serde_json::json!([{"name": "other", "mount_path": "/data"}]));
        assert_eq!(
            errors(&pod),
            [(
                "spec.containers[0].volume_mounts[0].name".to_string(),
                "names no volume of the pod: \"other\" is not declared in volumes".to_string()
            )]
        );
    }

    #[test]
    fn a_sub_path_stays_inside_its_volume() {
        let mounts = |sub_path: &str| serde_json::json!([{"name": "data", "mount_path": "/data", "sub_path": sub_path}]);
        let volumes = serde_json::json!([{"name": "data", "empty_dir": {}}]);
        for (sub_path, message) in [
            ("../etc", "must not contain '..', got \"../etc\""),
            ("a/../../b", "must not contain '..', got \"a/../../b\""),
            ("/etc", "must be a relative path, got \"/etc\""),
        ] {
            assert_eq!(
                errors(&pod(volumes.clone(), mounts(sub_path))),
                [("spec.containers[0].volume_mounts[0].sub_path".to_string(), message.to_string())]
            );
        }
        assert_eq!(errors(&pod(volumes, mounts("a..b/c"))), [], "'..' inside a name is no parent");
    }

    #[test]
    fn a_mount_path_is_required_absolute_and_unique() {
        let volumes = serde_json::json!([{"name": "data", "empty_dir": {}}]);
        let pod = pod(
            volumes,
            serde_json::json!([
                {"name": "data", "mount_path": ""},
                {"name": "data", "mount_path": "data"},
                {"name": "data", "mount_path": "/data"},
                {"name": "data", "mount_path": "/data/"},
            ]),
        );
        assert_eq!(
            fields(&pod),
            [
                "spec.containers[0].volume_mounts[0].mount_path",
                "spec.containers[0].volume_mounts[1].mount_path",
                "spec.containers[0].volume_mounts[3].mount_path",
            ]
        );
    }

    #[test]
    fn a_volume_has_exactly_one_known_source() {
        let pod = pod(
            serde_json::json!([
                {"name": "none"},
                {"name": "two", "empty_dir": {}, "host_path": {"path": "/tmp"}},
                {"name": "ram", "empty_dir": {"medium": "HugePages"}},
                {"name": "host", "host_path": {"path": "tmp/../x", "type": "Folder"}},
                {"name": "Bad_Name", "config_map": {"name": ""}},
                {"name": "creds", "secret": {"secret_name": ""}},
            ]),
            serde_json::json!([]),
        );
        assert_eq!(
            fields(&pod),
            [
                "spec.volumes[0]",
                "spec.volumes[1].host_path",
                "spec.volumes[2].empty_dir.medium",
                "spec.volumes[3].host_path.path",
                "spec.volumes[3].host_path.type",
                "spec.volumes[4].name",
                "spec.volumes[4].config_map.name",
                "spec.volumes[5].secret.secret_name",
            ]
        );
    }

    #[test]
    fn items_name_valid_keys_at_relative_paths_and_modes_are_at_most_0777() {
        let pod = pod(
            serde_json::json!([{"name": "conf", "config_map": {"name": "web", "default_mode": 0o1000, "items": [
                {"key": "ok.conf", "path": "ok.conf", "mode": 0o777},
                {"key": "no/slash", "path": "/abs"},
                {"key": "..hidden", "path": "../up", "mode": -1},
                {"key": "x", "path": ""},
                {"key": "y", "path": "ok.conf"},
                {"key": "z", "path": "..data"},
                {"key": "w", "path": "..2026_12_06/w"},
                {"key": "v", "path": "a/..v"},
            ]}}]),
            serde_json::json!([]),
        );
        assert_eq!(
            fields(&pod),
            [
                "spec.volumes[0].config_map.default_mode",
                "spec.volumes[0].config_map.items[1].key",
                "spec.volumes[0].config_map.items[1].path",
                "spec.volumes[0].config_map.items[2].key",
                "spec.volumes[0].config_map.items[2].path",
                "spec.volumes[0].config_map.items[2].mode",
                "spec.volumes[0].config_map.items[3].path",
                "spec.volumes[0].config_map.items[4].path",
                "spec.volumes[0].config_map.items[5].path",
                "spec.volumes[0].config_map.items[6].path",
            ]
        );
        let modes: Vec<(String, String)> = validate_pod(&pod)
            .unwrap_err()
            .into_iter()
            .filter(|e| e.field.ends_with("mode"))
            .map(|e| (e.value.unwrap_or_default(), e.message))
            .collect();
        let message = "must be a number between 0 and 0777 (octal), both inclusive".to_string();
        assert_eq!(modes, [("512".to_string(), message.clone()), ("-1".to_string(), message)]);
        let found = errors(&pod);
        assert_eq!(found[8], ("spec.volumes[0].config_map.items[5].path".to_string(), "must not start with '..'".to_string()));
    }

    #[test]
    fn a_configmap_or_secret_volume_gets_kubernetes_default_mode() {
        let mut pod = pod(
            serde_json::json!([{"name": "a", "config_map": {"name": "c"}}, {"name": "b", "secret": {"secret_name": "s", "default_mode": 0o400}}]),
            serde_json::json!([]),
        );
        pod.spec.set_defaults();
        assert_eq!(pod.spec.volumes[0].config_map.as_ref().unwrap().default_mode, Some(0o644));
        assert_eq!(pod.spec.volumes[1].secret.as_ref().unwrap().default_mode, Some(0o400));
    }
}
