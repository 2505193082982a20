//! The real kubectl (v1.32, on PATH) with server-side apply: `apply --server-side` creates
//! and applies again; another `--field-manager` with a changed replicas fails with kube's
//! conflict and kubectl's advice; `--force-conflicts` takes the field; an apply that drops
//! a label removes it; `get --show-managed-fields` shows the managers; `kubectl scale` owns
//! the replicas through the `scale` subresource until an apply forces them. Fails, never skips,
//! when kubectl is missing.

mod support;

use support::{Kubectl, TestServer};

fn manifest(replicas: Option<u32>, labels: &str) -> String {
    let replicas = replicas.map(|r| format!("  replicas: {r}\n")).unwrap_or_default();
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {{{labels}}}
spec:
{replicas}  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: web
        image: minimal
"
    )
}

#[test]
fn server_side_apply_twice_with_a_conflict_forced_and_a_dropped_label() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::saved_by(&server, dir.path());
    let write = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let first = write("first.yaml", manifest(Some(2), "app: web, tier: front"));
    // Another manager's configuration names only what it wants.
    let scaled = write("scaled.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 4}\n".into());
    let dropped = write("dropped.yaml", manifest(None, "app: web"));

    assert_eq!(kubectl.run(&["apply", "--server-side", "-f", &first]), "deployment.apps/web serverside-applied\n");
    assert_eq!(kubectl.run(&["apply", "--server-side", "-f", &first]), "deployment.apps/web serverside-applied\n");

    let conflict = kubectl.output(&["apply", "--server-side", "--field-manager=ops", "-f", &scaled]);
    let stderr = String::from_utf8_lossy(&conflict.stderr);
    assert!(!conflict.status.success(), "{conflict:?}");
    assert!(stderr.contains("Apply failed with 1 conflict: conflict with \"kubectl\": .spec.replicas"), "{stderr}");
    assert!(stderr.contains("--force-conflicts"), "kubectl's advice: {stderr}");
    assert_eq!(kubectl.run(&["get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"]), "2");

    let forced = ["apply", "--server-side", "--field-manager=ops", "--force-conflicts", "-f", &scaled];
    assert_eq!(kubectl.run(&forced), "deployment.apps/web serverside-applied\n");
    assert_eq!(kubectl.run(&["get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"]), "4");

    // kubectl's manager drops the tier label (and replicas, now ops'): the label goes, the
    // replicas stay.
    assert_eq!(kubectl.run(&["apply", "--server-side", "-f", &dropped]), "deployment.apps/web serverside-applied\n");
    assert_eq!(kubectl.run(&["get", "deployment", "web", "-o", "jsonpath={.metadata.labels}"]), r#"{"app":"web"}"#);
    assert_eq!(kubectl.run(&["get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"]), "4");
    let managers = kubectl.run(&[
        "get",
        "deployment",
        "web",
        "--show-managed-fields",
        "-o",
        "jsonpath={range .metadata.managedFields[*]}{.manager}/{.operation} {end}",
    ]);
    let mut managers: Vec<&str> = managers.split_whitespace().collect();
    managers.sort();
    assert_eq!(managers, ["kubectl/Apply", "ops/Apply"]);

    // Client-side apply still works beside them.
    assert_eq!(
        kubectl.run(&["apply", "-f", &write("client.yaml", manifest(Some(4), "app: web, team: blue"))]),
        "deployment.apps/web configured\n"
    );
    assert_eq!(kubectl.run(&["get", "deployment", "web", "-o", "jsonpath={.metadata.labels.team}"]), "blue");
}

/// `kubectl scale` writes the scale subresource: its manager (kubectl, named by its user
/// agent) owns the replicas as an `Update` with subresource `scale`, so an apply that sets
/// them conflicts with it, and `--force-conflicts` takes them back.
#[test]
fn a_scale_owns_the_replicas_until_an_apply_forces_them() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::saved_by(&server, dir.path());
    let applied = dir.path().join("web.yaml");
    std::fs::write(&applied, manifest(Some(2), "app: web")).unwrap();
    let applied = applied.to_str().unwrap();
    let managers = || {
        let listed = kubectl.run(&[
            "get",
            "deployment",
            "web",
            "--show-managed-fields",
            "-o",
            "jsonpath={range .metadata.managedFields[*]}{.manager}/{.operation}/{.subresource}={.fieldsV1.f:spec} {end}",
        ]);
        let mut managers: Vec<String> = listed.split_whitespace().map(str::to_string).collect();
        managers.sort();
        managers
    };

    assert_eq!(kubectl.run(&["apply", "--server-side", "-f", applied]), "deployment.apps/web serverside-applied\n");
    assert_eq!(kubectl.run(&["scale", "deployment", "web", "--replicas=5"]), "deployment.apps/web scaled\n");
    let after_scale = managers();
    assert_eq!(after_scale.len(), 2, "{after_scale:?}");
    assert!(!after_scale[0].contains("f:replicas"), "the applier lost the replicas: {after_scale:?}");
    assert_eq!(after_scale[1], r#"kubectl/Update/scale={"f:replicas":{}}"#);

    let conflict = kubectl.output(&["apply", "--server-side", "-f", applied]);
    let stderr = String::from_utf8_lossy(&conflict.stderr);
    assert!(!conflict.status.success(), "{conflict:?}");
    assert!(stderr.contains(r#"Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" using apps/v1"#), "{stderr}");
    assert!(stderr.contains(".spec.replicas"), "{stderr}");
    assert_eq!(kubectl.run(&["get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"]), "5");

    assert_eq!(kubectl.run(&["apply", "--server-side", "--force-conflicts", "-f", applied]), "deployment.apps/web serverside-applied\n");
    assert_eq!(kubectl.run(&["get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"]), "2");
    let after_force = managers();
    assert_eq!(after_force.len(), 1, "the scaler owns nothing more: {after_force:?}");
    assert!(after_force[0].starts_with("kubectl/Apply/=") && after_force[0].contains("f:replicas"), "{after_force:?}");
}
