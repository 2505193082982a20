//! The original project's three manifests (`../shared/reference/examples/`, beside the
//! repository) must deserialize unchanged, validate, and keep their JSON shape.

use std::path::PathBuf;

use shared::manifest;
use shared::model::{Kind, Object};
use shared::validation::validate;

fn reference_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/reference/examples")
}

fn read(name: &str) -> String {
    let path = reference_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read the reference manifest {}: {e}", path.display()))
}

#[test]
fn all_three_parse_and_validate() {
    for (file, kind) in [("pod.json", Kind::Pod), ("deployment.json", Kind::Deployment), ("service.json", Kind::Service)] {
        let objects = manifest::parse(&read(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(objects.len(), 1, "{file}");
        assert_eq!(objects[0].kind(), kind, "{file}");
        validate(&objects[0]).unwrap_or_else(|errors| panic!("{file} does not validate: {errors:?}"));
    }
}

#[test]
fn the_pod_keeps_every_field() {
    let objects = manifest::parse(&read("pod.json")).unwrap();
    let Object::Pod(pod) = &objects[0] else { panic!("pod.json is not a Pod") };
    assert_eq!(pod.metadata.name, "web-server");
    assert_eq!(pod.metadata.namespace, "default");
    assert_eq!(pod.metadata.labels["tier"], "frontend");
    let container = &pod.spec.containers[0];
    assert_eq!(container.image, "minimal");
    assert_eq!(container.command, ["/bin/sh", "-c", "echo 'Hello from Sheep!' && sleep 3600"]);
    assert_eq!(container.ports[0].container_port, 8080);
    assert_eq!((container.resources.memory, container.resources.cpu), (67108864, 250));
    assert_eq!(pod.spec.restart_policy, "Always");
    assert!(pod.spec.node_name.is_empty());
}

#[test]
fn the_deployment_and_service_keep_their_selectors() {
    let Object::Deployment(deployment) = manifest::parse(&read("deployment.json")).unwrap().remove(0) else { panic!("not a Deployment") };
    assert_eq!(deployment.spec.replicas, 3);
    assert!(deployment.spec.selector.matches(&deployment.spec.template.metadata.labels));
    assert_eq!(deployment.spec.template.spec.requests().memory, 67108864);
    let Object::Service(service) = manifest::parse(&read("service.json")).unwrap().remove(0) else { panic!("not a Service") };
    assert_eq!(service.spec.selector["app"], "web");
    assert_eq!((service.spec.ports[0].port, service.spec.ports[0].target_port), (80, 8080));
    assert_eq!(service.spec.type_, "ClusterIP");
}

#[test]
fn serializing_gives_back_the_reference_json() {
    for file in ["pod.json", "deployment.json", "service.json"] {
        let original: serde_json::Value = serde_json::from_str(&read(file)).unwrap();
        let object = manifest::parse(&read(file)).unwrap().remove(0);
        let mut written = serde_json::to_value(&object).unwrap();
        // The status and empty defaults (node_name "") are the only additions.
        written.as_object_mut().unwrap().remove("status");
        strip_defaults(&mut written);
        assert_eq!(written, original, "{file} changed shape");
    }
}

/// Removes the empty values serialization adds, so the comparison sees only real fields.
fn strip_defaults(value: &mut serde_json::Value) {
    if let serde_json::Value::Object(map) = value {
        map.retain(|key, v| {
            strip_defaults(v);
            let empty = match v {
                serde_json::Value::String(s) => s.is_empty(),
                serde_json::Value::Object(m) => m.is_empty(),
                serde_json::Value::Array(a) => a.is_empty(),
                serde_json::Value::Number(n) => n.as_i64() == Some(0) && key != "replicas",
                serde_json::Value::Bool(b) => !*b,
                serde_json::Value::Null => true,
            };
            !empty
        });
    } else if let serde_json::Value::Array(items) = value {
        items.iter_mut().for_each(strip_defaults);
    }
}

#[test]
fn yaml_maps_to_the_same_types() {
    for file in ["pod.json", "deployment.json", "service.json"] {
        let value: serde_json::Value = serde_json::from_str(&read(file)).unwrap();
        let yaml = serde_norway::to_string(&value).unwrap();
        assert_eq!(manifest::parse(&yaml).unwrap(), manifest::parse(&read(file)).unwrap(), "{file} as YAML");
    }
}

/// The original project's demo writes `env` as a map (`{"POSTGRES_HOST": "db"}`): the
/// reference pod with such an env parses in JSON and in YAML, and means the list.
#[test]
fn env_as_a_map_parses_in_json_and_yaml_as_the_list() {
    let mut pod: serde_json::Value = serde_json::from_str(&read("pod.json")).unwrap();
    pod["spec"]["containers"][0]["env"] = serde_json::json!({"POSTGRES_HOST": "db", "POSTGRES_PORT": "5432"});
    let yaml = serde_norway::to_string(&pod).unwrap();
    assert!(yaml.contains("POSTGRES_HOST: db"), "{yaml}");
    for text in [pod.to_string(), yaml] {
        let Object::Pod(parsed) = manifest::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}")).remove(0) else { panic!("not a Pod") };
        let env: Vec<(&str, &str)> = parsed.spec.containers[0].env.iter().map(|e| (e.name.as_str(), e.value.as_str())).collect();
        assert_eq!(env, [("POSTGRES_HOST", "db"), ("POSTGRES_PORT", "5432")]);
    }
}
