//! The real kubectl (v1.32, on PATH) with server-side dry run: `--dry-run=server` of
//! `create`, `apply`, `delete` and `scale` answers as the real command and creates, changes
//! and removes nothing (`get` shows the old state, and a watch opened before them hears only
//! the real write after them); `kubectl diff` exits 0 for an unchanged object and 1 with the
//! diff for a changed one, changing nothing. Fails, never skips, when kubectl is missing.

mod support;

use std::time::Duration;

use support::{Background, Kubectl, TestServer, example};

const SETTINGS: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  mode: fast
";

#[test]
fn server_dry_runs_and_diff_change_nothing() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::saved_by(&server, dir.path());
    let settings = dir.path().join("settings.yaml");
    std::fs::write(&settings, SETTINGS).unwrap();
    let settings = settings.to_str().unwrap();
    let deployment = example("kubernetes/deployment.yaml");
    let deployment = deployment.to_str().unwrap();

    assert_eq!(kubectl.run(&["apply", "-f", deployment, "--dry-run=server"]), "deployment.apps/web created (server dry run)\n");
    let none = kubectl.output(&["get", "deployment", "web"]);
    assert!(String::from_utf8_lossy(&none.stderr).contains("\"web\" not found"), "{none:?}");
    assert_eq!(kubectl.run(&["apply", "-f", deployment]), "deployment.apps/web created\n");
    assert_eq!(kubectl.run(&["apply", "-f", settings]), "configmap/settings created\n");

    let watch = Background::spawn_command(kubectl.command(&["get", "configmaps", "--watch", "-o", "name"]));
    assert_eq!(watch.expect_line("configmap/", Duration::from_secs(10)), "configmap/settings");

    let dry = [
        (vec!["create", "configmap", "extra", "--from-literal=a=b", "--dry-run=server"], "configmap/extra created (server dry run)\n"),
        (vec!["delete", "configmap", "settings", "--dry-run=server"], "configmap \"settings\" deleted (server dry run)\n"),
        (vec!["scale", "deployment", "web", "--replicas=5", "--dry-run=server"], "deployment.apps/web scaled (server dry run)\n"),
        (vec!["delete", "deployment", "web", "--dry-run=server"], "deployment.apps \"web\" deleted (server dry run)\n"),
    ];
    for (args, answer) in dry {
        assert_eq!(kubectl.run(&args), answer, "kubectl {}", args.join(" "));
    }
    let changed = dir.path().join("changed.yaml");
    std::fs::write(&changed, SETTINGS.replace("fast", "slow")).unwrap();
    let changed = changed.to_str().unwrap();
    assert_eq!(kubectl.run(&["apply", "-f", changed, "--dry-run=server"]), "configmap/settings configured (server dry run)\n");

    // diff: unchanged exits 0 and prints nothing; changed exits 1 with the change.
    let same = kubectl.output(&["diff", "-f", settings]);
    assert_eq!((same.status.code(), same.stdout.is_empty()), (Some(0), true), "{same:?}");
    let different = kubectl.output(&["diff", "-f", changed]);
    let shown = String::from_utf8_lossy(&different.stdout);
    assert_eq!(different.status.code(), Some(1), "{different:?}");
    assert!(shown.contains("-  mode: fast") && shown.contains("+  mode: slow"), "{shown}");

    assert_eq!(kubectl.run(&["get", "configmap", "settings", "-o", "jsonpath={.data.mode}"]), "fast");
    assert_eq!(kubectl.run(&["get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"]), "3");
    assert!(!kubectl.output(&["get", "configmap", "extra"]).status.success(), "the dry-run create made nothing");
    // The watch hears the next real write first: nothing before it changed.
    assert_eq!(kubectl.run(&["create", "configmap", "sentinel", "--from-literal=x=y"]), "configmap/sentinel created\n");
    assert_eq!(watch.expect_line("configmap/", Duration::from_secs(10)), "configmap/sentinel");
}
