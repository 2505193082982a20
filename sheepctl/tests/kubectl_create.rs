//! The real kubectl (v1.32, on PATH) with its create shortcuts, whose typed clients send
//! protobuf: `create deployment`, `create service clusterip|nodeport`, `create namespace`,
//! `create configmap` and `create secret generic`, each then shown by `get`. Fails, never
//! skips, when kubectl is missing.

mod support;

use support::{Kubectl, TestServer};

#[test]
fn kubectl_create_shortcuts_make_what_get_then_shows() {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::saved_by(&server, dir.path());

    let created = [
        (vec!["create", "deployment", "d2", "--image=minimal"], "deployment.apps/d2 created\n"),
        (vec!["create", "deployment", "d3", "--image=minimal", "--replicas=0", "--port=80"], "deployment.apps/d3 created\n"),
        (vec!["create", "service", "clusterip", "web", "--tcp=80:8080"], "service/web created\n"),
        (vec!["create", "service", "nodeport", "shop", "--tcp=80:8080", "--node-port=30080"], "service/shop created\n"),
        (vec!["create", "namespace", "team"], "namespace/team created\n"),
        (vec!["create", "configmap", "site", "--from-literal=greeting=hello"], "configmap/site created\n"),
        (vec!["create", "secret", "generic", "db", "--from-literal=password=s3cret"], "secret/db created\n"),
    ];
    for (args, answer) in created {
        assert_eq!(kubectl.run(&args), answer, "kubectl {}", args.join(" "));
    }

    let image = "{.spec.template.spec.containers[0].image} {.spec.replicas} {.spec.selector.matchLabels.app}";
    assert_eq!(kubectl.run(&["get", "deployment", "d2", "-o", &format!("jsonpath={image}")]), "minimal 1 d2");
    let d3 = "{.spec.replicas} {.spec.template.spec.containers[0].ports[0].containerPort}";
    assert_eq!(kubectl.run(&["get", "deployment", "d3", "-o", &format!("jsonpath={d3}")]), "0 80", "replicas 0 is kept");
    let ports = "{.spec.type} {.spec.ports[0].port} {.spec.ports[0].targetPort} {.spec.ports[0].nodePort}";
    assert_eq!(kubectl.run(&["get", "service", "web", "-o", &format!("jsonpath={ports}")]), "ClusterIP 80 8080 ");
    assert_eq!(kubectl.run(&["get", "service", "shop", "-o", &format!("jsonpath={ports}")]), "NodePort 80 8080 30080");
    assert!(kubectl.run(&["get", "service", "web", "-o", "jsonpath={.spec.clusterIP}"]).starts_with("10.96."));
    assert_eq!(kubectl.run(&["get", "namespace", "team", "-o", "name"]), "namespace/team\n");
    assert_eq!(kubectl.run(&["get", "configmap", "site", "-o", "jsonpath={.data.greeting}"]), "hello");
    assert_eq!(kubectl.run(&["get", "secret", "db", "-o", "jsonpath={.data.password}"]), "czNjcmV0");

    // A field Shepherd refuses gets the answer a JSON body gets.
    let refused = kubectl.output(&["create", "service", "loadbalancer", "lb", "--tcp=80:80"]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && said.contains("spec.type") && said.contains("LoadBalancer"), "{said}");
    let applied = dir.path().join("lb.yaml");
    std::fs::write(&applied, "apiVersion: v1\nkind: Service\nmetadata:\n  name: lb\nspec:\n  type: LoadBalancer\n  ports:\n  - port: 80\n")
        .unwrap();
    let as_json = kubectl.output(&["create", "-f", applied.to_str().unwrap()]);
    // kubectl words the two commands' failures differently around the server's message.
    let server_said = String::from_utf8_lossy(&as_json.stderr).trim().trim_start_matches("The ").to_string();
    assert!(server_said.starts_with("Service \"lb\" is invalid: spec.type"), "{server_said}");
    assert!(said.contains(&server_said), "the same refusal for protobuf and JSON: {said} / {server_said}");
}
