//! kubectl sends a kubeconfig's token only over TLS: against a server that serves HTTPS and
//! checks tokens, the kubeconfig `sheepctl kubeconfig` writes (https, the certificate
//! authority, the token) lets the real kubectl in, a wrong token is Unauthorized and a
//! viewer's write Forbidden, as Kubernetes answers them. sheepctl reaches the same server.

mod support;

use support::{Kubectl, TestServer};

const TOKENS: &str = "admin-secret-token admin\nviewer-secret-token viewer\n";

#[test]
fn kubectl_uses_the_kubeconfigs_token_over_https() {
    let server = TestServer::https_with_tokens(TOKENS);
    assert!(server.url.starts_with("https://"), "{}", server.url);
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, server.trust().expect("an https server")).unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let saved = server
        .sheepctl()
        .env("SHEPHERD_CA", &ca)
        .env("SHEPHERD_TOKEN", "admin-secret-token")
        .args(["kubeconfig", "--save", kubeconfig.to_str().unwrap()])
        .assert()
        .success();
    assert!(saved.get_output().stderr.is_empty(), "no warning over https: {:?}", String::from_utf8_lossy(&saved.get_output().stderr));
    let text = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(text.contains("certificate-authority-data:") && text.contains(&format!("server: {}/k8s", server.url)), "{text}");
    let kubectl = Kubectl { kubeconfig };

    let empty = kubectl.output(&["get", "pods"]);
    assert!(empty.status.success(), "{empty:?}");
    assert!(String::from_utf8_lossy(&empty.stderr).contains("No resources found in default namespace."), "{empty:?}");
    let manifest = support::example("kubernetes/pod.yaml");
    assert!(kubectl.run(&["apply", "-f", manifest.to_str().unwrap()]).contains("pod/web-server created"));
    let pods = kubectl.run(&["get", "pods"]);
    assert!(pods.lines().any(|l| l.starts_with("web-server ") && l.contains("Pending")), "{pods}");

    let stranger = kubectl.output(&["--token", "wrong-token-value", "get", "pods"]);
    assert!(!stranger.status.success());
    let said = String::from_utf8_lossy(&stranger.stderr);
    // kubectl's words for a 401, with the server's reason in the brackets.
    assert!(said.contains("error: You must be logged in to the server (the bearer token is not known to this server)"), "{said}");
    let viewer = kubectl.output(&["--token", "viewer-secret-token", "delete", "pod", "web-server"]);
    assert!(!viewer.status.success());
    let said = String::from_utf8_lossy(&viewer.stderr);
    assert!(said.contains("Error from server (Forbidden)") && said.contains("read-only"), "{said}");
    assert!(kubectl.run(&["--token", "viewer-secret-token", "get", "pod", "web-server"]).contains("web-server"), "a viewer reads");

    // `kubectl auth can-i` is answered by the rules the requests themselves pass.
    assert_eq!(kubectl.run(&["auth", "can-i", "create", "pods"]).trim(), "yes");
    let can = |args: &[&str]| {
        let out = kubectl.output(&[&["--token", "viewer-secret-token", "auth", "can-i"], args].concat());
        (out.status.code(), String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    assert_eq!(can(&["list", "pods"]), (Some(0), "yes".to_string()));
    let (code, said) = can(&["create", "pods"]);
    assert!(code == Some(1) && said.starts_with("no") && said.contains("read-only"), "{said}");
    let (code, said) = can(&["get", "secrets"]);
    assert!(code == Some(1) && said.contains("may not read secrets"), "{said}");
    assert_eq!(can(&["get", "deployments.apps", "-n", "team"]).1, "yes");
    let listed = can(&["--list"]).1;
    let row = |resource: &str| listed.lines().find(|l| l.split_whitespace().next() == Some(resource)).map(str::to_string);
    assert!(row("pods").is_some_and(|r| r.ends_with("[get list watch]")), "{listed}");
    assert!(row("deployments.apps").is_some_and(|r| r.ends_with("[get list watch]")), "{listed}");
    assert_eq!(row("secrets"), None, "a viewer may not read secrets: {listed}");

    // sheepctl, with the same authority and token; without the authority it says what to set.
    let listed =
        server.sheepctl().env("SHEPHERD_CA", &ca).env("SHEPHERD_TOKEN", "admin-secret-token").args(["get", "pods"]).assert().success();
    assert!(String::from_utf8_lossy(&listed.get_output().stdout).contains("web-server"));
    let untrusted = server.sheepctl().env("SHEPHERD_TOKEN", "admin-secret-token").args(["get", "pods"]).assert().failure();
    let said = String::from_utf8_lossy(&untrusted.get_output().stderr);
    assert!(said.contains("does not trust") && said.contains("SHEPHERD_CA"), "{said}");
}

#[test]
fn a_token_over_plain_http_gets_a_warning_that_says_to_serve_https() {
    let server = TestServer::start();
    let out = server.sheepctl().env("SHEPHERD_TOKEN", "admin-secret-token").args(["kubeconfig"]).assert().success();
    let said = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(said.contains("kubectl sends a bearer token only over HTTPS") && said.contains("--tls-self-signed"), "{said}");
}

/// A kubeconfig that says http:// for a server that speaks HTTPS: kubectl prints the
/// server's words, which name https, not "the server rejected our request for an unknown
/// reason" (what Go's own plain-text answer makes it print).
#[test]
fn kubectl_over_plain_http_to_the_tls_port_is_told_to_use_https() {
    let server = TestServer::https_with_tokens(TOKENS);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let plain = format!("{}/k8s", server.url.replace("https://", "http://"));
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster: {{server: \"{plain}\"}}\ncontexts:\n- name: s\n  context: {{cluster: s, user: u}}\ncurrent-context: s\nusers:\n- name: u\n  user: {{}}\n"
    );
    std::fs::write(&kubeconfig, config).unwrap();
    let out = Kubectl { kubeconfig }.output(&["get", "pods"]);
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("Client sent an HTTP request to an HTTPS server: use https://"), "{said}");
    assert!(!said.contains("unknown reason"), "{said}");
}
