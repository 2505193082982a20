//! `sheepctl kubeconfig`: a kubeconfig for the server sheepctl points at, with the
//! Kubernetes-compatible API's prefix, the certificate authority sheepctl trusts and the
//! token when one is set, so that kubectl reaches the same cluster as the same user. kubectl
//! has one server per cluster entry, so several servers become one cluster and context each,
//! the first the current one. `--save` writes it to a file and prints the path, for
//! `KUBECONFIG=$(sheepctl kubeconfig --save)`: kubectl 1.32 reads its kubeconfig more than
//! once, so `KUBECONFIG=<(sheepctl kubeconfig)` finds the pipe empty the second time.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};
use shared::api::paths::KUBERNETES_PREFIX;

use crate::cli::KubeconfigArgs;
use crate::settings::Settings;

pub fn run(settings: &Settings, authority: Option<&[u8]>, args: &KubeconfigArgs) -> Result<()> {
    let text = render(settings, authority, &args.context)?;
    if settings.servers.len() > 1 {
        let names = context_names(&args.context, settings.servers.len());
        let listed: Vec<String> = names.iter().zip(&settings.servers).map(|(name, server)| format!("{name} ({server})")).collect();
        eprintln!(
            "note: kubectl talks to one server per context: this kubeconfig has a context per server, {}; {} is the \
             current one, and `kubectl config use-context {}` moves to the next when it is down",
            listed.join(", "),
            names[0],
            names[1]
        );
    }
    if settings.token.is_some() && settings.servers.iter().any(|s| s.starts_with("http://")) {
        // Measured with kubectl 1.32: it sends no Authorization header to an http:// server.
        eprintln!(
            "warning: kubectl sends a bearer token only over HTTPS, so against this plain-HTTP server, which needs \
             a token, kubectl's requests will be refused with 401: serve HTTPS (shepherd --tls-self-signed) and \
             point sheepctl at it (SHEPHERD_API=https://HOST:PORT SHEPHERD_CA=DATA_DIR/tls/ca.crt)"
        );
    }
    let Some(path) = &args.save else { return super::output::print(&text) };
    let path = match path {
        Some(path) => path.clone(),
        None => default_path()?,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // Owner-only from the first byte: the file may hold the token.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    // A file that existed keeps its mode through open: narrow it too.
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .with_context(|| format!("cannot make {} private", path.display()))?;
    file.write_all(text.as_bytes()).with_context(|| format!("cannot write {}", path.display()))?;
    super::output::print(&format!("{}\n", path.display()))
}

/// `$XDG_CONFIG_HOME/shepherd/kubeconfig`, else `~/.config/shepherd/kubeconfig`.
fn default_path() -> Result<PathBuf> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    match (var("XDG_CONFIG_HOME"), var("HOME")) {
        (Some(config), _) => Ok(config.join("shepherd/kubeconfig")),
        (None, Some(home)) => Ok(home.join(".config/shepherd/kubeconfig")),
        (None, None) => bail!("neither XDG_CONFIG_HOME nor HOME is set: give the file, e.g. --save ./shepherd.kubeconfig"),
    }
}

/// `name` for the first server's cluster and context, then `name-2`, `name-3`, …
fn context_names(name: &str, servers: usize) -> Vec<String> {
    (1..=servers).map(|i| if i == 1 { name.to_string() } else { format!("{name}-{i}") }).collect()
}

/// The kubeconfig as YAML: one user named `name`, and a cluster and a context for each
/// server ([`context_names`]), with sheepctl's namespace as each context's and the
/// certificate authority (PEM) embedded; the first server's context is the current one.
fn render(settings: &Settings, authority: Option<&[u8]>, name: &str) -> Result<String> {
    use base64::Engine as _;
    let user = match &settings.token {
        Some(token) => json!({ "token": token }),
        None => json!({}),
    };
    let names = context_names(name, settings.servers.len());
    let mut clusters = Vec::new();
    let mut contexts = Vec::new();
    for (server, context) in settings.servers.iter().zip(&names) {
        let mut cluster = json!({ "server": format!("{server}{KUBERNETES_PREFIX}") });
        if let Some(pem) = authority.filter(|_| server.starts_with("https://")) {
            cluster["certificate-authority-data"] = base64::engine::general_purpose::STANDARD.encode(pem).into();
        }
        clusters.push(json!({ "name": context, "cluster": cluster }));
        contexts.push(json!({ "name": context, "context": { "cluster": context, "user": name, "namespace": settings.namespace } }));
    }
    let config: Value = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters,
        "users": [{ "name": name, "user": user }],
        "contexts": contexts,
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
            servers: vec!["http://127.0.0.1:9876".into()],
            token: token.map(str::to_string),
            certificate_authority: None,
            namespace: "team".into(),
            namespace_explicit: true,
            all_namespaces: false,
        }
    }

    #[test]
    fn names_the_prefixed_server_the_namespace_and_the_token() {
        let text = render(&settings(Some("s3cret-token")), None, "shepherd").unwrap();
        let config: Value = serde_norway::from_str(&text).unwrap();
        assert_eq!(config["clusters"][0]["cluster"]["server"], "http://127.0.0.1:9876/k8s");
        assert_eq!(config["users"][0]["user"]["token"], "s3cret-token");
        assert_eq!(config["contexts"][0]["context"]["namespace"], "team");
        assert_eq!(config["current-context"], "shepherd");
    }

    #[test]
    fn several_servers_make_a_cluster_and_a_context_each_the_first_current() {
        let two = Settings { servers: vec!["http://a:1".into(), "http://b:2".into()], ..settings(None) };
        let config: Value = serde_norway::from_str(&render(&two, None, "lab").unwrap()).unwrap();
        let servers: Vec<&str> = config["clusters"].as_array().unwrap().iter().map(|c| c["cluster"]["server"].as_str().unwrap()).collect();
        assert_eq!(servers, ["http://a:1/k8s", "http://b:2/k8s"]);
        assert_eq!(config["contexts"][1]["name"], "lab-2");
        assert_eq!(config["contexts"][1]["context"]["cluster"], "lab-2");
        assert_eq!(config["contexts"][1]["context"]["user"], "lab");
        assert_eq!(config["current-context"], "lab");
    }

    #[test]
    fn save_writes_an_owner_only_file_even_over_a_readable_one() {
        use std::os::unix::fs::PermissionsExt as _;
        let path = std::env::temp_dir().join(format!("sheepctl-kubeconfig-{}", std::process::id()));
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let args = KubeconfigArgs { context: "shepherd".into(), save: Some(Some(path.clone())) };
        run(&settings(Some("s3cret-token")), None, &args).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(mode, 0o600);
        assert!(text.contains("s3cret-token") && !text.contains("old"), "{text}");
    }

    #[test]
    fn has_no_token_when_none_is_set() {
        let text = render(&settings(None), None, "lab").unwrap();
        assert!(!text.contains("token"), "{text}");
        assert!(text.contains("current-context: lab"), "{text}");
    }

    #[test]
    fn embeds_the_certificate_authority_for_an_https_server() {
        let pem = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        let https = Settings { servers: vec!["https://127.0.0.1:9876".into()], ..settings(Some("s3cret-token")) };
        let config: Value = serde_norway::from_str(&render(&https, Some(pem), "shepherd").unwrap()).unwrap();
        let cluster = &config["clusters"][0]["cluster"];
        assert_eq!(cluster["server"], "https://127.0.0.1:9876/k8s");
        use base64::Engine as _;
        let data = base64::engine::general_purpose::STANDARD.decode(cluster["certificate-authority-data"].as_str().unwrap()).unwrap();
        assert_eq!(data, pem);
        let plain = render(&settings(None), Some(pem), "shepherd").unwrap();
        assert!(!plain.contains("certificate-authority"), "plain HTTP has no certificate to trust\n{plain}");
    }
}
