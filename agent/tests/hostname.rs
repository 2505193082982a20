//! A pod's hostname and `/etc/hosts` on the real Docker engine: every container of a pod is
//! named after the pod, from its first instruction in a sandbox made for the pod, and its
//! hosts file is the kubelet's with the pod's address; a restarted container gets them
//! again, and so does a container in a warm sandbox, made before its pod. These tests fail
//! (never skip) when Docker is unreachable.

mod common;

use std::time::Duration;

use agent::runtime::{ContainerRuntime, LABEL_CONTAINER, LABEL_POD_UID, RunState};
use common::{DockerNode, container, docker_node_with_pool, spec};
use shared::model::{Pod, PodPhase};

const WAIT: Duration = Duration::from_secs(30);

/// Runs `script` in the container with `sh -c`: its output, which must be a success.
fn exec(id: &str, script: &str) -> String {
    let output = std::process::Command::new("docker").args(["exec", id, "sh", "-c", script]).output().expect("docker exec runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{script:?} in {id}: {text}");
    text
}

/// What the container wrote, as `docker logs` shows it.
fn logs(id: &str) -> String {
    let output = std::process::Command::new("docker").args(["logs", id]).output().expect("docker logs runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The id of the pod's running container called `name`, once it runs.
async fn running(docker: &dyn ContainerRuntime, uid: &str, name: &str) -> String {
    shepherd_testing::poll(WAIT, &format!("the container {name} to run"), || async {
        let containers = docker.list(&[(LABEL_POD_UID, uid), (LABEL_CONTAINER, name)]).await.unwrap();
        containers.into_iter().find(|c| c.state == RunState::Running).map(|c| c.id).ok_or("none runs".to_string())
    })
    .await
}

/// The pod's container `id` answers to the pod's name, and its hosts files say so.
fn assert_named_after(pod: &Pod, id: &str) {
    let name = &pod.metadata.name;
    assert_eq!(exec(id, "hostname").trim(), name, "hostname in {id}");
    assert_eq!(exec(id, "cat /etc/hostname").trim(), name);
    assert_eq!(exec(id, "echo \"$HOSTNAME\"").trim(), name, "the HOSTNAME variable in {id}");
    let hosts = exec(id, "cat /etc/hosts");
    assert!(hosts.starts_with("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"), "{hosts}");
    assert!(hosts.ends_with(&format!("\n{}\t{name}\n", pod.status.pod_ip)), "the pod's address and name last: {hosts}");
}

/// Kills the container and waits for the one the restart policy starts in its place.
async fn restarted(docker: &dyn ContainerRuntime, uid: &str, name: &str, id: &str) -> String {
    let killed = std::process::Command::new("docker").args(["kill", id]).output().expect("docker kill runs");
    assert!(killed.status.success(), "{}", String::from_utf8_lossy(&killed.stderr));
    // Killed is no longer running: what runs now is its replacement.
    let replacement = running(docker, uid, name).await;
    assert_ne!(replacement, id);
    replacement
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_container_of_a_pod_is_named_after_it_from_its_start_and_after_a_restart() {
    // No pool: the pod's sandbox is made for it, with its name.
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node_with_pool(0).await;
    let main = container("main", &["sh", "-c", "hostname; exec sleep 3600"]);
    let side = container("side", &["sleep", "3600"]);
    let pod = api.add_pod(&node, "named-web", spec(vec![main, side], "Always")).await;
    let uid = pod.metadata.uid.clone();
    let pod = api.wait_for(&uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running && !p.status.pod_ip.is_empty()).await;

    let main = running(docker.as_ref(), &uid, "main").await;
    assert_eq!(logs(&main), "named-web\n", "the first instruction already sees the pod's name");
    assert_named_after(&pod, &main);
    assert_named_after(&pod, &running(docker.as_ref(), &uid, "side").await);

    let again = restarted(docker.as_ref(), &uid, "main", &main).await;
    shepherd_testing::poll(WAIT, "the restarted container's output", || async { (!logs(&again).is_empty()).then_some(()) }).await;
    assert_eq!(logs(&again), "named-web\n");
    assert_named_after(&pod, &again);
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_in_a_warm_sandbox_is_named_after_its_pod_and_after_a_restart() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node_with_pool(1).await;
    let pod = api.add_pod(&node, "warm-web", spec(vec![container("main", &["sleep", "3600"])], "Always")).await;
    let uid = pod.metadata.uid.clone();
    let pod = api.wait_for(&uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running && !p.status.pod_ip.is_empty()).await;
    let main = running(docker.as_ref(), &uid, "main").await;
    let sandbox = docker.inspect(&main).await.unwrap().unwrap().label(agent::runtime::LABEL_SANDBOX_ID).to_string();
    let sandbox = docker.inspect(&sandbox).await.unwrap().expect("the pod's sandbox");
    assert!(sandbox.hostname != "warm-web", "a warm sandbox is made before its pod: {}", sandbox.hostname);
    assert_named_after(&pod, &main);

    let again = restarted(docker.as_ref(), &uid, "main", &main).await;
    assert_named_after(&pod, &again);
    agent.stop().await;
}
