//! A container's environment as the kubelet's `makeEnvironmentVariables` makes it: every
//! `envFrom` source's keys first, each under its prefix, then `env`, later entries winning,
//! with `valueFrom` read from the pod's ConfigMaps, Secrets and own fields and a literal value's
//! `$(NAME)` references expanded from the variables set so far and then the Services'; last,
//! the Services' variables that are still unset ([`super::service_env`]). Errors name objects
//! and keys, never a value.

use std::collections::BTreeMap;

use shared::expansion::expand;
use shared::model::{ConfigMap, Container, EnvSourceRef, FieldSelector, KeySelector, Pod, Secret};

use super::service_env::with_service_variables;
use crate::client::ApiClient;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubelet's words for a ConfigMap or Secret that is not there.
    #[error("{kind} {name:?} not found")]
    NotFound { kind: &'static str, name: String },
    #[error("couldn't find key {key} in {kind} {namespace}/{name}")]
    MissingKey { kind: &'static str, namespace: String, name: String, key: String },
    #[error("reading {kind} {name:?}: {message}")]
    Api { kind: &'static str, name: String, message: String },
    /// The runtime would refuse it, quoting the value: only the variable and its source are named.
    #[error("the value of variable {name} ({origin}) holds a NUL byte, which a container's environment cannot carry")]
    Nul { name: String, origin: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The container's variables.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Environment {
    pub variables: Vec<(String, String)>,
    /// The values read from Secrets, which no message may quote ([`without_secrets`]).
    pub secret_values: Vec<String>,
}

impl Environment {
    /// Sets `name` to a value read from `source` (`secret default/db key password`),
    /// replacing an earlier value in its place. A NUL is refused here, before the runtime
    /// could refuse it with the value in its message.
    fn set(&mut self, name: String, value: String, source: impl FnOnce() -> String) -> Result<()> {
        if value.contains('\0') {
            return Err(Error::Nul { name, origin: source() });
        }
        match self.variables.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.variables.push((name, value)),
        }
        Ok(())
    }
}

/// What is shown of a runtime's error about a container whose environment holds
/// `secrets`: its message, unless it quotes one of them (an engine may echo the variables
/// it refuses), as Secret values never reach events or status.
pub fn without_secrets(message: String, secrets: &[String]) -> String {
    match secrets.iter().any(|value| !value.is_empty() && message.contains(value.as_str())) {
        true => "the container runtime refused the container; its message is not shown because it quotes a Secret's value".to_string(),
        false => message,
    }
}

/// One object's keys as text; a Secret's values are never formatted by this module.
struct Keys(BTreeMap<String, String>);

impl Keys {
    fn of_config_map(c: ConfigMap) -> Keys {
        let binary = c.binary_data.into_iter().filter_map(|(k, v)| String::from_utf8(v).ok().map(|v| (k, v)));
        Keys(c.data.into_iter().chain(binary).collect())
    }

    fn of_secret(s: Secret) -> Keys {
        Keys(s.data.into_iter().filter_map(|(k, v)| String::from_utf8(v).ok().map(|v| (k, v))).collect())
    }
}

#[derive(Clone, Copy)]
enum Source {
    ConfigMap,
    Secret,
}

impl Source {
    /// As the API's not-found message spells the kind.
    fn lower(self) -> &'static str {
        match self {
            Source::ConfigMap => "configmap",
            Source::Secret => "secret",
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Source::ConfigMap => "ConfigMap",
            Source::Secret => "Secret",
        }
    }
}

/// Reads each named object once per container.
struct Reader<'a> {
    api: &'a dyn ApiClient,
    namespace: &'a str,
    read: BTreeMap<(u8, String), Option<Keys>>,
}

impl Reader<'_> {
    async fn keys(&mut self, source: Source, name: &str) -> Result<Option<&Keys>> {
        let slot = (source as u8, name.to_string());
        if !self.read.contains_key(&slot) {
            let api_error = |e: crate::client::Error| Error::Api { kind: source.lower(), name: name.to_string(), message: e.to_string() };
            let keys = match source {
                Source::ConfigMap => self.api.config_map(self.namespace, name).await.map_err(api_error)?.map(Keys::of_config_map),
                Source::Secret => self.api.secret(self.namespace, name).await.map_err(api_error)?.map(Keys::of_secret),
            };
            self.read.insert(slot.clone(), keys);
        }
        Ok(self.read[&slot].as_ref())
    }

    /// One key, or `None` when it may be left out; an error when it may not.
    async fn key(&mut self, source: Source, selector: &KeySelector) -> Result<Option<String>> {
        let optional = selector.optional.unwrap_or(false);
        let namespace = self.namespace.to_string();
        match self.keys(source, &selector.name).await? {
            Some(keys) => match keys.0.get(&selector.key) {
                Some(value) => Ok(Some(value.clone())),
                None if optional => Ok(None),
                None => Err(Error::MissingKey { kind: source.kind(), namespace, name: selector.name.clone(), key: selector.key.clone() }),
            },
            None if optional => Ok(None),
            None => Err(Error::NotFound { kind: source.lower(), name: selector.name.clone() }),
        }
    }

    /// Every key of one `envFrom` object, prefixed. As the kubelet since Kubernetes 1.30, no
    /// key is left out for its name: a config key (`[-._a-zA-Z0-9]+`) behind a valid prefix is
    /// always a valid variable name under the relaxed rule validation holds both to
    /// ([`shared::validation::env_name_error`]), so `1st`, `app.mode` and `log-level` are set.
    async fn all(&mut self, source: Source, reference: &EnvSourceRef, prefix: &str, env: &mut Environment) -> Result<()> {
        let namespace = self.namespace.to_string();
        let Some(keys) = self.keys(source, &reference.name).await? else {
            return match reference.optional.unwrap_or(false) {
                true => Ok(()),
                false => Err(Error::NotFound { kind: source.lower(), name: reference.name.clone() }),
            };
        };
        for (key, value) in &keys.0 {
            if matches!(source, Source::Secret) {
                env.secret_values.push(value.clone());
            }
            env.set(format!("{prefix}{key}"), value.clone(), || format!("{} {namespace}/{} key {key}", source.lower(), reference.name))?
        }
        Ok(())
    }
}

/// The value of one of the pod's fields ([`shared::model::ENV_FIELD_PATHS`]); `pod_ip` is the
/// sandbox's address when the pod has one.
fn field(pod: &Pod, selector: &FieldSelector, pod_ip: &str) -> String {
    match selector.field_path.as_str() {
        "metadata.name" => pod.metadata.name.clone(),
        "metadata.namespace" => pod.metadata.namespace.clone(),
        "metadata.uid" => pod.metadata.uid.clone(),
        "spec.nodeName" => pod.spec.node_name.clone(),
        "status.podIP" => pod_ip.to_string(),
        // Validation admits no other path.
        _ => String::new(),
    }
}

/// The container's variables: `envFrom`, then `env`, then `services` (its pod's service
/// variables, [`super::service_env::for_pod`]) for names still unset.
pub async fn environment(
    api: &dyn ApiClient,
    pod: &Pod,
    container: &Container,
    pod_ip: &str,
    services: Vec<(String, String)>,
) -> Result<Environment> {
    let mut reader = Reader { api, namespace: &pod.metadata.namespace, read: BTreeMap::new() };
    let mut env = Environment::default();
    for from in &container.env_from {
        if let Some(reference) = &from.config_map_ref {
            reader.all(Source::ConfigMap, reference, &from.prefix, &mut env).await?;
        }
        if let Some(reference) = &from.secret_ref {
            reader.all(Source::Secret, reference, &from.prefix, &mut env).await?;
        }
    }
    let namespace = &pod.metadata.namespace;
    for var in &container.env {
        let key_source =
            |source: Source, selector: &KeySelector| format!("{} {namespace}/{} key {}", source.lower(), selector.name, selector.key);
        let (value, source) = match &var.value_from {
            None => {
                let defined = |name: &str| env.variables.iter().chain(&services).find(|(n, _)| n == name).map(|(_, value)| value.as_str());
                (Some(expand(&var.value, defined)), "its value".to_string())
            }
            Some(from) => match (&from.config_map_key_ref, &from.secret_key_ref, &from.field_ref) {
                (Some(selector), _, _) => (reader.key(Source::ConfigMap, selector).await?, key_source(Source::ConfigMap, selector)),
                (_, Some(selector), _) => {
                    let value = reader.key(Source::Secret, selector).await?;
                    env.secret_values.extend(value.clone());
                    (value, key_source(Source::Secret, selector))
                }
                (_, _, Some(selector)) => (Some(field(pod, selector, pod_ip)), format!("field {}", selector.field_path)),
                (None, None, None) => (None, String::new()),
            },
        };
        if let Some(value) = value {
            env.set(var.name.clone(), value, || source)?;
        }
    }
    env.variables = with_service_variables(env.variables, services);
    Ok(env)
}

#[cfg(test)]
mod tests {
    use shared::model::{EnvFromSource, EnvVar, EnvVarSource};

    use super::*;
    use crate::fixtures::{RecordingApi, pod};

    fn config_map(pairs: &[(&str, &str)]) -> ConfigMap {
        ConfigMap { data: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), ..ConfigMap::default() }
    }

    fn secret(pairs: &[(&str, &str)]) -> Secret {
        Secret { data: pairs.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect(), ..Secret::default() }
    }

    fn key(name: &str, key: &str, optional: Option<bool>) -> KeySelector {
        KeySelector { name: name.into(), key: key.into(), optional }
    }

    fn from_config_map(key_ref: KeySelector) -> Option<EnvVarSource> {
        Some(EnvVarSource { config_map_key_ref: Some(key_ref), ..Default::default() })
    }

    fn from_secret(key_ref: KeySelector) -> Option<EnvVarSource> {
        Some(EnvVarSource { secret_key_ref: Some(key_ref), ..Default::default() })
    }

    fn from_field(path: &str) -> Option<EnvVarSource> {
        Some(EnvVarSource { field_ref: Some(FieldSelector { field_path: path.into(), ..Default::default() }), ..Default::default() })
    }

    fn var(name: &str, value_from: Option<EnvVarSource>) -> EnvVar {
        EnvVar { name: name.into(), value: String::new(), value_from }
    }

    fn api() -> RecordingApi {
        let api = RecordingApi::default();
        api.config_maps
            .lock()
            .unwrap()
            .insert("settings".into(), config_map(&[("MODE", "fast"), ("LEVEL", "3"), ("1st", "one"), ("log.level", "debug")]));
        api.secrets.lock().unwrap().insert("db".into(), secret(&[("password", "s3cret"), ("MODE", "secret-mode")]));
        api
    }

    async fn resolve(api: &RecordingApi, container: &Container) -> Result<Environment> {
        resolve_with_services(api, container, &[]).await
    }

    async fn resolve_with_services(api: &RecordingApi, container: &Container, services: &[(&str, &str)]) -> Result<Environment> {
        let mut pod = pod();
        pod.spec.node_name = "n1".into();
        let services = services.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        environment(api, &pod, container, "10.77.0.5", services).await
    }

    fn pairs(env: &Environment) -> Vec<(&str, &str)> {
        env.variables.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect()
    }

    #[tokio::test]
    async fn env_from_comes_first_then_env_in_order_later_winning() {
        let api = api();
        let container = Container {
            env_from: vec![
                EnvFromSource { config_map_ref: Some(EnvSourceRef { name: "settings".into(), optional: None }), ..Default::default() },
                EnvFromSource {
                    prefix: "DB_".into(),
                    secret_ref: Some(EnvSourceRef { name: "db".into(), optional: None }),
                    ..Default::default()
                },
            ],
            env: vec![
                EnvVar::literal("LEVEL", "9"),
                var("PASSWORD", from_secret(key("db", "password", None))),
                var("POD", from_field("metadata.name")),
                var("IP", from_field("status.podIP")),
                var("NODE", from_field("spec.nodeName")),
                var("NS", from_field("metadata.namespace")),
                var("UID", from_field("metadata.uid")),
                EnvVar::literal("MODE", "env-wins"),
            ],
            ..Container::default()
        };
        let env = resolve(&api, &container).await.unwrap();
        assert_eq!(
            pairs(&env),
            [
                ("1st", "one"),
                ("LEVEL", "9"),
                ("MODE", "env-wins"),
                ("log.level", "debug"),
                ("DB_MODE", "secret-mode"),
                ("DB_password", "s3cret"),
                ("PASSWORD", "s3cret"),
                ("POD", "web_1"),
                ("IP", "10.77.0.5"),
                ("NODE", "n1"),
                ("NS", "default"),
                ("UID", "1234-abcd-5678"),
            ]
        );
    }

    #[tokio::test]
    async fn a_literal_value_expands_references_to_variables_set_before_it_then_to_services() {
        let api = api();
        let container = Container {
            env_from: vec![EnvFromSource {
                prefix: "APP_".into(),
                config_map_ref: Some(EnvSourceRef { name: "settings".into(), optional: None }),
                ..Default::default()
            }],
            env: vec![
                EnvVar::literal("A", "a"),
                EnvVar::literal("B", "b"),
                EnvVar::literal("CHAIN", "$(A)-$(B)"),
                EnvVar::literal("LATER", "$(C) is set after"),
                EnvVar::literal("C", "c"),
                EnvVar::literal("FROM", "$(APP_MODE)/$(APP_log.level)/$(WEB_SERVICE_HOST)"),
                var("PASSWORD", from_secret(key("db", "password", None))),
                EnvVar::literal("URL", "db://app:$(PASSWORD)@$(WEB_SERVICE_HOST)"),
                EnvVar::literal("KEPT", "$$(A) $(UNSET) $(A"),
                EnvVar::literal("APP_MODE", "$(APP_MODE)-again"),
                EnvVar::literal("WEB_SERVICE_HOST", "mine, not $(WEB_SERVICE_HOST)"),
                EnvVar::literal("AFTER", "$(WEB_SERVICE_HOST)"),
            ],
            ..Container::default()
        };
        let env = resolve_with_services(&api, &container, &[("WEB_SERVICE_HOST", "10.96.0.10"), ("WEB_SERVICE_PORT", "80")]).await.unwrap();
        let value = |name: &str| pairs(&env).into_iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string());
        assert_eq!(value("CHAIN").as_deref(), Some("a-b"));
        assert_eq!(value("LATER").as_deref(), Some("$(C) is set after"), "only what is set before it");
        assert_eq!(value("FROM").as_deref(), Some("fast/debug/10.96.0.10"));
        assert_eq!(value("URL").as_deref(), Some("db://app:s3cret@10.96.0.10"));
        assert_eq!(value("KEPT").as_deref(), Some("$(A) $(UNSET) $(A"));
        assert_eq!(value("APP_MODE").as_deref(), Some("fast-again"), "its own earlier value, from envFrom");
        assert_eq!(value("WEB_SERVICE_HOST").as_deref(), Some("mine, not 10.96.0.10"));
        assert_eq!(value("AFTER").as_deref(), Some("mine, not 10.96.0.10"), "the container's own variable wins over the Service's");
        assert_eq!(value("WEB_SERVICE_PORT").as_deref(), Some("80"), "a service variable it does not set comes last");
        assert_eq!(env.variables.last(), Some(&("WEB_SERVICE_PORT".to_string(), "80".to_string())));
        assert_eq!(env.variables.iter().filter(|(n, _)| n == "WEB_SERVICE_HOST").count(), 1);
    }

    #[tokio::test]
    async fn an_optional_source_that_is_missing_is_left_out() {
        let api = api();
        let container = Container {
            env_from: vec![EnvFromSource {
                secret_ref: Some(EnvSourceRef { name: "absent".into(), optional: Some(true) }),
                ..Default::default()
            }],
            env: vec![
                var("A", from_config_map(key("absent", "k", Some(true)))),
                var("B", from_config_map(key("settings", "absent", Some(true)))),
                var("C", from_secret(key("db", "absent", Some(true)))),
                EnvVar::literal("D", "1"),
            ],
            ..Container::default()
        };
        assert_eq!(pairs(&resolve(&api, &container).await.unwrap()), [("D", "1")]);
    }

    #[tokio::test]
    async fn a_missing_object_or_key_is_an_error_in_the_kubelets_words_without_values() {
        let api = api();
        let cases = [
            (var("A", from_config_map(key("absent", "k", None))), "configmap \"absent\" not found"),
            (var("A", from_config_map(key("settings", "k", Some(false)))), "couldn't find key k in ConfigMap default/settings"),
            (var("A", from_secret(key("absent", "password", None))), "secret \"absent\" not found"),
            (var("A", from_secret(key("db", "user", None))), "couldn't find key user in Secret default/db"),
        ];
        for (env, message) in cases {
            let container = Container { env: vec![env], ..Container::default() };
            assert_eq!(resolve(&api, &container).await.unwrap_err().to_string(), message);
        }
        let container = Container {
            env_from: vec![EnvFromSource {
                config_map_ref: Some(EnvSourceRef { name: "absent".into(), optional: None }),
                ..Default::default()
            }],
            ..Container::default()
        };
        assert_eq!(resolve(&api, &container).await.unwrap_err().to_string(), "configmap \"absent\" not found");
    }

    #[tokio::test]
    async fn a_nul_in_a_value_is_refused_naming_the_variable_and_its_source_never_the_value() {
        let api = api();
        api.secrets.lock().unwrap().insert("nul".into(), secret(&[("password", "se\0cret-value"), ("OK", "fine")]));
        let container = Container { env: vec![var("PASSWORD", from_secret(key("nul", "password", None)))], ..Container::default() };
        let refused = resolve(&api, &container).await.unwrap_err().to_string();
        assert_eq!(
            refused,
            "the value of variable PASSWORD (secret default/nul key password) holds a NUL byte, which a container's environment cannot carry"
        );
        let from = EnvFromSource { secret_ref: Some(EnvSourceRef { name: "nul".into(), optional: None }), ..Default::default() };
        let refused = resolve(&api, &Container { env_from: vec![from], ..Container::default() }).await.unwrap_err().to_string();
        assert!(refused.contains("variable password (secret default/nul key password)") && !refused.contains("value\""), "{refused}");
        let literal = Container { env: vec![EnvVar::literal("A", "x\0y")], ..Container::default() };
        assert!(resolve(&api, &literal).await.unwrap_err().to_string().starts_with("the value of variable A (its value) holds a NUL"));
    }

    #[tokio::test]
    async fn a_runtime_message_that_quotes_a_secret_value_is_not_shown() {
        let api = api();
        let container = Container {
            env: vec![
                var("PASSWORD", from_secret(key("db", "password", None))),
                var("MODE", from_config_map(key("settings", "MODE", None))),
            ],
            ..Container::default()
        };
        let env = resolve(&api, &container).await.unwrap();
        assert_eq!(env.secret_values, ["s3cret"]);
        let quoted = without_secrets("invalid environment variable: PASSWORD=s3cret".into(), &env.secret_values);
        assert!(!quoted.contains("s3cret") && quoted.contains("not shown"), "{quoted}");
        let plain = "no such image".to_string();
        assert_eq!(without_secrets(plain.clone(), &env.secret_values), plain);
    }
}
