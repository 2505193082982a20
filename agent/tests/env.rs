//! Environment variables from a Secret and a ConfigMap on the real Docker engine: the
//! container waits in CreateContainerConfigError while its Secret is missing, starts by
//! itself once it is there, and sees the values. These tests fail (never skip) when Docker is
//! unreachable.

mod common;

use std::time::Duration;

use agent::runtime::{ContainerRuntime, LABEL_CONTAINER, LABEL_POD_UID};
use common::{DockerNode, container, docker_node, spec};
use shared::model::{ContainerState, EnvFromSource, EnvSourceRef, EnvVar, EnvVarSource, KeySelector, PodPhase};

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secrets_variable_reaches_the_container_once_the_secret_exists() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node().await;
    let configmap = serde_json::json!({"kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"MODE": "fast"}});
    let (status, answer) = api.server.post("/api/v1/namespaces/default/configmaps", configmap).await;
    assert!(status.is_success(), "{answer}");
    let mut web = container("web", &["sleep", "3600"]);
    let key_ref = KeySelector { name: "db".into(), key: "password".into(), optional: None };
    web.env = vec![EnvVar {
        name: "PASSWORD".into(),
        value: String::new(),
        value_from: Some(EnvVarSource { secret_key_ref: Some(key_ref), ..Default::default() }),
    }];
    web.env_from = vec![EnvFromSource {
        prefix: "APP_".into(),
        config_map_ref: Some(EnvSourceRef { name: "settings".into(), optional: None }),
        ..Default::default()
    }];
    let pod = api.add_pod(&node, "env", spec(vec![web], "Always")).await;
    let uid = pod.metadata.uid.clone();
    api.wait_for(&uid, "CreateContainerConfigError for the missing Secret", WAIT, |p| {
        p.status.container_statuses.first().is_some_and(|c| {
            matches!(&c.state, ContainerState::Waiting { reason, message } if reason == "CreateContainerConfigError" && message == "secret \"db\" not found")
        })
    })
    .await;
    assert!(docker.list(&[(LABEL_POD_UID, uid.as_str()), (LABEL_CONTAINER, "web")]).await.unwrap().is_empty(), "no container yet");

    let secret = serde_json::json!({"kind": "Secret", "metadata": {"name": "db"}, "string_data": {"password": "s3cret"}});
    let (status, answer) = api.server.post("/api/v1/namespaces/default/secrets", secret).await;
    assert!(status.is_success(), "{answer}");
    api.wait_for(&uid, "Running once the Secret exists", WAIT, |p| p.status.phase == PodPhase::Running).await;
    let containers = docker.list(&[(LABEL_POD_UID, uid.as_str()), (LABEL_CONTAINER, "web")]).await.unwrap();
    let id = &containers.first().expect("the container").id;
    let output = std::process::Command::new("docker").args(["exec", id, "sh", "-c", "echo $PASSWORD $APP_MODE"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout), "s3cret fast\n");
    let events = api.events_for("env").await;
    assert!(events.iter().any(|e| e.reason == "Failed" && e.message.contains("secret \"db\" not found")), "{events:?}");
    assert!(!events.iter().any(|e| e.message.contains("s3cret")), "no value in an event: {events:?}");
    api.terminate_pod(&uid, 1).await;
    shepherd_testing::poll(WAIT, "the pod to go", || async { (!api.has_pod(&uid).await).then_some(()) }).await;
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn references_in_env_and_args_expand_and_every_env_from_key_is_set() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node().await;
    let data = serde_json::json!({"GREETING": "hello", "app.mode": "fast", "1st": "one"});
    let configmap = serde_json::json!({"kind": "ConfigMap", "metadata": {"name": "greetings"}, "data": data});
    let (status, answer) = api.server.post("/api/v1/namespaces/default/configmaps", configmap).await;
    assert!(status.is_success(), "{answer}");
    let mut web = container("web", &["sh"]);
    // The shell sees the expanded words as data: an unexpanded `$(GREETING)` would be the
    // escape's, never a command substitution.
    let script = "printf '%s' \"$1\" > /tmp/args && exec sleep 3600";
    web.args = ["-c", script, "sh", "$(GREETING) from $(CHAIN), $$(GREETING) $(UNSET)"].map(String::from).to_vec();
    web.env_from =
        vec![EnvFromSource { config_map_ref: Some(EnvSourceRef { name: "greetings".into(), optional: None }), ..Default::default() }];
    web.env = vec![EnvVar::literal("A", "a"), EnvVar::literal("B", "$(app.mode)"), EnvVar::literal("CHAIN", "$(A)-$(B)")];
    let pod = api.add_pod(&node, "expand", spec(vec![web], "Always")).await;
    let uid = pod.metadata.uid.clone();
    api.wait_for(&uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    let containers = docker.list(&[(LABEL_POD_UID, uid.as_str()), (LABEL_CONTAINER, "web")]).await.unwrap();
    let id = &containers.first().expect("the container").id;
    let args = shepherd_testing::poll(WAIT, "the container to write its argument", || async {
        let output = std::process::Command::new("docker").args(["exec", id, "cat", "/tmp/args"]).output().unwrap();
        output.status.success().then(|| String::from_utf8_lossy(&output.stdout).into_owned())
    })
    .await;
    assert_eq!(args, "hello from a-fast, $(GREETING) $(UNSET)");
    let output = std::process::Command::new("docker").args(["exec", id, "env"]).output().unwrap();
    let env = String::from_utf8_lossy(&output.stdout);
    for line in ["CHAIN=a-fast", "GREETING=hello", "app.mode=fast", "1st=one"] {
        assert!(env.lines().any(|l| l == line), "{line} in {env}");
    }
    let events = api.events_for("expand").await;
    assert!(!events.iter().any(|e| e.type_ == "Warning"), "no warning, no key left out: {events:?}");
    api.terminate_pod(&uid, 1).await;
    shepherd_testing::poll(WAIT, "the pod to go", || async { (!api.has_pod(&uid).await).then_some(()) }).await;
    agent.stop().await;
}
