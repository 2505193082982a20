//! Volumes on the real Docker engine: an emptyDir that two containers share and that
//! outlives a container's restart, read-only and subPath mounts, a tmpfs for medium Memory,
//! and the pod's volume directory removed with the pod, or by the sweep when the pod went
//! while its worker was not told. These tests fail (never skip) when Docker is unreachable.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use agent::runtime::{ContainerRuntime, LABEL_CONTAINER, LABEL_POD_UID};
use common::{DockerNode, container, docker_node, spec};
use shared::model::{EmptyDirVolumeSource, PodPhase, Volume, VolumeMount};

const WAIT: Duration = Duration::from_secs(30);

fn empty_dir(name: &str, medium: &str, size_limit: i64) -> Volume {
    Volume { name: name.into(), empty_dir: Some(EmptyDirVolumeSource { medium: medium.into(), size_limit }), ..Volume::default() }
}

fn mount(name: &str, path: &str, read_only: bool, sub_path: &str) -> VolumeMount {
    VolumeMount { name: name.into(), mount_path: path.into(), read_only, sub_path: sub_path.into() }
}

/// Runs `script` in the container with `sh -c`: its exit code and output.
fn exec(id: &str, script: &str) -> (i32, String) {
    let output = std::process::Command::new("docker").args(["exec", id, "sh", "-c", script]).output().expect("docker exec runs");
    (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr))
}

/// The id of the pod's container called `name`.
async fn container_id(docker: &dyn ContainerRuntime, uid: &str, name: &str) -> String {
    let containers = docker.list(&[(LABEL_POD_UID, uid), (LABEL_CONTAINER, name)]).await.unwrap();
    containers.first().unwrap_or_else(|| panic!("no container {name}")).id.clone()
}

/// Where the node's agent keeps the pod's volumes.
fn pod_dir(node: &str, uid: &str) -> PathBuf {
    common::state_dir(node).join("nodes").join(node).join("pods").join(uid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_dir_is_shared_survives_restarts_and_goes_with_the_pod() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node().await;

    // The writer records each of its runs and ends; the restart policy starts it again.
    let mut writer = container("writer", &["sh", "-c", "mkdir -p /data/sub && echo hi > /data/sub/hello && echo run >> /data/runs; sleep 1; exit 1"]);
    writer.volume_mounts = vec![mount("shared", "/data", false, "")];
    let mut reader = container("reader", &["sleep", "3600"]);
    reader.volume_mounts =
        vec![mount("shared", "/ro", true, ""), mount("shared", "/sub", false, "sub"), mount("ram", "/ram", false, "")];
    let mut pod_spec = spec(vec![writer, reader], "Always");
    pod_spec.volumes = vec![empty_dir("shared", "", 0), empty_dir("ram", "Memory", 8 << 20)];
    let pod = api.add_pod(&node, "volumes", pod_spec).await;
    let uid = pod.metadata.uid.clone();
    api.wait_for(&uid, "the writer restarted twice", WAIT, |p| {
        p.status.container_statuses.iter().any(|c| c.name == "writer" && c.restart_count >= 2)
    })
    .await;
    let reader = container_id(docker.as_ref(), &uid, "reader").await;

    let (code, runs) = exec(&reader, "cat /ro/runs");
    assert_eq!(code, 0, "{runs}");
    assert!(runs.lines().count() >= 3, "every run of the writer is in the one volume the reader sees: {runs:?}");
    let (code, out) = exec(&reader, "echo no > /ro/new");
    assert_ne!(code, 0, "a readOnly mount refuses writes: {out}");
    assert!(out.contains("Read-only file system"), "{out}");
    assert_eq!(exec(&reader, "cat /sub/hello"), (0, "hi\n".to_string()), "a subPath mount shows that directory of the volume");
    let (_, mounts) = exec(&reader, "cat /proc/mounts");
    let ram = mounts.lines().find(|l| l.split(' ').nth(1) == Some("/ram")).unwrap_or_else(|| panic!("no /ram in {mounts}"));
    assert!(ram.starts_with("tmpfs /ram tmpfs") && ram.contains("size=8192k"), "medium Memory is a tmpfs of its size limit: {ram}");
    assert!(pod_dir(&node, &uid).is_dir());

    api.terminate_pod(&uid, 1).await;
    shepherd_testing::poll(WAIT, "the pod to go", || async { (!api.has_pod(&uid).await).then_some(()) }).await;
    assert!(!pod_dir(&node, &uid).exists(), "the pod's volumes went with it");
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_removes_the_volumes_of_a_pod_that_went_unannounced() {
    let DockerNode { docker: _, node, api, agent, cleanup: _cleanup } = docker_node().await;

    let mut web = container("web", &["sleep", "3600"]);
    web.volume_mounts = vec![mount("cache", "/cache", false, "")];
    let mut pod_spec = spec(vec![web], "Always");
    pod_spec.volumes = vec![empty_dir("cache", "Memory", 0)];
    let pod = api.add_pod(&node, "leftover", pod_spec).await;
    let uid = pod.metadata.uid.clone();
    api.wait_for(&uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    assert!(pod_dir(&node, &uid).is_dir());
    // Gone from the server with its DELETED event lost: the next full list finds it missing.
    api.forget_pod(&uid).await;
    shepherd_testing::poll(WAIT, "the sweep to remove the pod's volumes", || {
        let dir = pod_dir(&node, &uid);
        async move { (!dir.exists()).then_some(()) }
    })
    .await;
    let mount_table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mount_table.contains(&uid), "its tmpfs is unmounted too");
    agent.stop().await;
}
