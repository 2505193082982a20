//! A container's environment, as `pkg/apis/core/validation` checks it: names, and exactly one
//! source for each `valueFrom` and `envFrom` entry, each naming what it reads.

use super::{Errors, config_key_error, dns_subdomain_error};
use crate::model::{Container, ENV_FIELD_PATHS, EnvVarSource, KeySelector};

/// A variable name as Kubernetes' relaxed rule takes it: printable ASCII without `=`. A config
/// key behind a prefix that passes it passes too, which is why the agent, as the kubelet since
/// 1.30, sets every `envFrom` key.
pub fn env_name_error(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("must not be empty".into());
    }
    if !name.chars().all(|c| c.is_ascii_graphic() || c == ' ') || name.contains('=') {
        return Some("a valid environment variable name must consist only of printable ASCII characters other than '='".into());
    }
    None
}

pub(super) fn check_env(errors: &mut Errors, path: &str, container: &Container) {
    // A name given twice is no error, as in Kubernetes: the later one wins.
    for (i, env) in container.env.iter().enumerate() {
        let env_path = format!("{path}.env[{i}]");
        if let Some(message) = env_name_error(&env.name) {
            errors.invalid(format!("{env_path}.name"), &env.name, message);
        }
        if let Some(source) = &env.value_from {
            if !env.value.is_empty() {
                errors.add(format!("{env_path}.value_from"), "may not be specified when `value` is not empty");
            }
            check_source(errors, &format!("{env_path}.value_from"), source);
        }
    }
    for (i, from) in container.env_from.iter().enumerate() {
        let from_path = format!("{path}.env_from[{i}]");
        if !from.prefix.is_empty()
            && let Some(message) = env_name_error(&from.prefix)
        {
            errors.invalid(format!("{from_path}.prefix"), &from.prefix, message);
        }
        let refs: Vec<_> = [("config_map_ref", &from.config_map_ref), ("secret_ref", &from.secret_ref)]
            .into_iter()
            .filter_map(|(field, r)| r.as_ref().map(|r| (field, r)))
            .collect();
        match refs.as_slice() {
            [] => errors.add(&from_path, "must specify one of: `configMapRef` or `secretRef`"),
            [(field, r)] => check_object_name(errors, &format!("{from_path}.{field}.name"), &r.name),
            [_, (second, _), ..] => errors.add(format!("{from_path}.{second}"), "may not have more than one field specified at a time"),
        }
    }
}

fn check_source(errors: &mut Errors, path: &str, source: &EnvVarSource) {
    let mut set = Vec::new();
    if let Some(selector) = &source.config_map_key_ref {
        set.push("config_map_key_ref");
        check_key_selector(errors, &format!("{path}.config_map_key_ref"), selector);
    }
    if let Some(selector) = &source.secret_key_ref {
        set.push("secret_key_ref");
        check_key_selector(errors, &format!("{path}.secret_key_ref"), selector);
    }
    if let Some(field) = &source.field_ref {
        set.push("field_ref");
        let field_path = format!("{path}.field_ref.field_path");
        if field.field_path.is_empty() {
            errors.required(field_path, "must name a field of the pod");
        } else if !ENV_FIELD_PATHS.contains(&field.field_path.as_str()) {
            errors.invalid(field_path, &field.field_path, format!("supported values: {}", ENV_FIELD_PATHS.join(", ")));
        }
        if !field.api_version.is_empty() && field.api_version != "v1" {
            errors.invalid(format!("{path}.field_ref.api_version"), &field.api_version, "supported values: v1");
        }
    }
    match set.as_slice() {
        [] => errors.add(path, "must specify one of: `configMapKeyRef`, `secretKeyRef` or `fieldRef`"),
        [_] => {}
        _ => errors.add(path, "may not have more than one field specified at a time"),
    }
}

fn check_key_selector(errors: &mut Errors, path: &str, selector: &KeySelector) {
    check_object_name(errors, &format!("{path}.name"), &selector.name);
    if selector.key.is_empty() {
        errors.required(format!("{path}.key"), "must name a key");
    } else if let Some(message) = config_key_error(&selector.key) {
        errors.invalid(format!("{path}.key"), &selector.key, message);
    }
}

fn check_object_name(errors: &mut Errors, path: &str, name: &str) {
    if name.is_empty() {
        errors.required(path, "must name an object in the pod's namespace");
    } else if let Some(message) = dns_subdomain_error(name) {
        errors.invalid(path, &name, message);
    }
}

#[cfg(test)]
mod tests {
    use crate::api::FieldError;
    use crate::model::Pod;
    use crate::validation::validate_pod;

    /// The fields a pod whose container has `env` and `env_from` fails on.
    fn fields(env: serde_json::Value, env_from: serde_json::Value) -> Vec<String> {
        let pod: Pod = serde_json::from_value(serde_json::json!({"kind": "Pod", "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "web", "image": "minimal", "env": env, "env_from": env_from}]}}))
        .unwrap();
        validate_pod(&pod).err().unwrap_or_default().into_iter().map(|FieldError { field, .. }| field).collect()
    }

    #[test]
    fn every_source_passes() {
        let env = serde_json::json!([
            {"name": "A", "value": "1"},
            {"name": "B", "value_from": {"config_map_key_ref": {"name": "settings", "key": "b.txt"}}},
            {"name": "C", "value_from": {"secret_key_ref": {"name": "db", "key": "password", "optional": true}}},
            {"name": "D", "value_from": {"field_ref": {"field_path": "status.podIP"}}},
            {"name": "E", "value_from": {"field_ref": {"api_version": "v1", "field_path": "metadata.uid"}}},
        ]);
        let env_from = serde_json::json!([{"prefix": "APP_", "config_map_ref": {"name": "settings"}}, {"secret_ref": {"name": "db"}}]);
        assert_eq!(fields(env, env_from), Vec::<String>::new());
    }

    #[test]
    fn a_source_must_be_one_and_name_what_it_reads() {
        let env = serde_json::json!([
            {"name": "A", "value": "1", "value_from": {"field_ref": {"field_path": "metadata.name"}}},
            {"name": "B", "value_from": {}},
            {"name": "C", "value_from": {"config_map_key_ref": {"name": "s", "key": "k"}, "secret_key_ref": {"name": "s", "key": "k"}}},
            {"name": "D", "value_from": {"config_map_key_ref": {"key": "../k"}}},
            {"name": "E", "value_from": {"field_ref": {"field_path": "spec.containers"}}},
            {"name": "F=G", "value": "1"},
        ]);
        let env_from = serde_json::json!([{}, {"prefix": "A=", "secret_ref": {"name": "db"}}, {"config_map_ref": {"name": ""}, "secret_ref": {"name": "db"}}]);
        let p = "spec.containers[0]";
        assert_eq!(
            fields(env, env_from),
            [
                format!("{p}.env[0].value_from"),
                format!("{p}.env[1].value_from"),
                format!("{p}.env[2].value_from"),
                format!("{p}.env[3].value_from.config_map_key_ref.name"),
                format!("{p}.env[3].value_from.config_map_key_ref.key"),
                format!("{p}.env[4].value_from.field_ref.field_path"),
                format!("{p}.env[5].name"),
                format!("{p}.env_from[0]"),
                format!("{p}.env_from[1].prefix"),
                format!("{p}.env_from[2].secret_ref"),
            ]
        );
    }

    /// The agent sets every `envFrom` key as the kubelet does, with no check of its own: this
    /// holds only while every config key behind every valid prefix is a valid variable name.
    #[test]
    fn a_config_key_behind_a_valid_prefix_is_a_valid_variable_name() {
        use crate::validation::{config_key_error, env_name_error};
        for prefix in ["", "APP_", "1", "my app:", "~"] {
            assert_eq!(env_name_error(prefix).is_none(), !prefix.is_empty(), "{prefix:?}");
            for byte in 0..=u8::MAX {
                let key = format!("k{}", byte as char);
                if config_key_error(&key).is_none() {
                    assert_eq!(env_name_error(&format!("{prefix}{key}")), None, "{prefix:?} + {key:?}");
                }
            }
            for key in ["1st", "app.mode", "log-level", ".hidden", "_", "x".repeat(253).as_str()] {
                assert_eq!(config_key_error(key), None, "{key:?}");
                assert_eq!(env_name_error(&format!("{prefix}{key}")), None, "{prefix:?} + {key:?}");
            }
        }
    }
}
