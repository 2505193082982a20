//! The real kubectl (v1.32, on PATH) reading the OpenAPI v3 schemas: `explain` prints
//! Kubernetes' descriptions, marks the fields Shepherd refuses, walks `--recursive`, and
//! `apply -f` of a kind Shepherd does not serve names the kind. Fails, never skips, when
//! kubectl is missing.

mod support;

use support::{Kubectl, TestServer};

#[test]
fn kubectl_explain_prints_kubernetes_descriptions() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::saved_by(&server, dir.path());

    let containers = kubectl.run(&["explain", "pod.spec.containers"]);
    assert!(containers.starts_with("KIND:       Pod\nVERSION:    v1\n\nFIELD: containers <[]Container>\n"), "{containers}");
    assert!(containers.contains("List of containers belonging to the pod."), "{containers}");
    assert!(containers.contains("image\t<string>"), "{containers}");
    assert!(containers.contains("Not supported by Shepherd: Actions that the management system"), "lifecycle is marked: {containers}");

    let strategy = kubectl.run(&["explain", "deploy.spec.strategy"]);
    assert!(strategy.starts_with("GROUP:      apps\nKIND:       Deployment\nVERSION:    v1\n"), "{strategy}");
    assert!(strategy.contains("rollingUpdate\t<RollingUpdateDeployment>"), "{strategy}");
    assert!(kubectl.run(&["explain", "svc"]).contains("Service is a named abstraction of software service"));
    assert!(kubectl.run(&["explain", "configmap"]).contains("ConfigMap holds configuration data for pods to consume."));
    let recursive = kubectl.run(&["explain", "--recursive", "pod.spec"]);
    assert!(recursive.contains("      httpGet\t<HTTPGetAction>"), "{recursive}");

    let job = dir.path().join("job.yaml");
    std::fs::write(&job, "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: once\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: minimal\n").unwrap();
    let applied = kubectl.output(&["apply", "-f", job.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&applied.stderr);
    assert!(!applied.status.success() && said.contains("no matches for kind \"Job\" in version \"batch/v1\""), "{said}");
}
