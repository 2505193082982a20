//! `sheepctl kubeconfig`: a kubeconfig for the server sheepctl points at, with the
//! Kubernetes-compatible API's prefix and the token when one is set, so that kubectl
//! reaches the same cluster. It goes to a file: kubectl 1.32 reads its kubeconfig more
//! than once, so `KUBECONFIG=<(sheepctl kubeconfig)` finds the pipe empty the second time.

use anyhow::Result;
use serde_json::{Value, json};
use shared::api::paths::KUBERNETES_PREFIX;

use crate::settings::Settings;

/// The kubeconfig as YAML: one cluster, one user and one context, all named `name`, with
/// sheepctl's namespace as the context's.
pub fn render(settings: &Settings, name: &str) -> Result<String> {
    let user = match &settings.token {
        Some(token) => json!({ "token": token }),
        None => json!({}),
    };
    let config: Value = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": name, "cluster": { "server": format!("{}{KUBERNETES_PREFIX}", settings.base_url) } }],
        "users": [{ "name": name, "user": user }],
        "contexts": [{ "name": name, "context": { "cluster": name, "user": name, "namespace": settings.namespace } }],
        "current-context": name,
        "preferences": {},
    });
    Ok(serde_norway::to_string(&config)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(token: Option<&str>) -> Settings {
        Settings {
            base_url: "http://127.0.0.1:9876".into(),
            token: token.map(str::to_string),
            namespace: "team".into(),
            namespace_explicit: true,
            all_namespaces: false,
        }
    }

    #[test]
    fn names_the_prefixed_server_the_namespace_and_the_token() {
        let text = render(&settings(Some("s3cret-token")), "shepherd").unwrap();
        let config: Value = serde_norway::from_str(&text).unwrap();
        assert_eq!(config["clusters"][0]["cluster"]["server"], "http://127.0.0.1:9876/k8s");
        assert_eq!(config["users"][0]["user"]["token"], "s3cret-token");
        assert_eq!(config["contexts"][0]["context"]["namespace"], "team");
        assert_eq!(config["current-context"], "shepherd");
    }

    #[test]
    fn has_no_token_when_none_is_set() {
        let text = render(&settings(None), "lab").unwrap();
        assert!(!text.contains("token"), "{text}");
        assert!(text.contains("current-context: lab"), "{text}");
    }
}
