//! Volumes on the real Docker engine: an emptyDir that two containers share and that
//! outlives a container's restart, read-only and subPath mounts, a tmpfs for medium Memory,
//! the pod's volume directory removed with the pod, or by the sweep when the pod went while
//! its worker was not told, and ConfigMap and Secret volumes (a pod waiting for a missing
//! one, files changing in place, a subPath that does not until its container restarts, a
//! Secret on tmpfs, both read-only), a subPath a container turned into a link out of the
//! volume, and the mounts undone by an agent that removes its containers on exit. These tests
//! fail (never skip) when Docker is unreachable.

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
    let mut writer =
        container("writer", &["sh", "-c", "mkdir -p /data/sub && echo hi > /data/sub/hello && echo run >> /data/runs; sleep 1; exit 1"]);
    writer.volume_mounts = vec![mount("shared", "/data", false, "")];
    let mut reader = container("reader", &["sleep", "3600"]);
    reader.volume_mounts = vec![mount("shared", "/ro", true, ""), mount("shared", "/sub", false, "sub"), mount("ram", "/ram", false, "")];
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_volume_follows_its_configmap_but_a_sub_path_keeps_its_version_and_a_secret_is_on_tmpfs() {
    use shared::model::{ConfigMapVolumeSource, SecretVolumeSource};

    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node().await;
    let mut web = container("web", &["sleep", "3600"]);
    // Not asked read-only: ConfigMap and Secret volumes are, whatever the mount says.
    web.volume_mounts =
        vec![mount("conf", "/conf", false, ""), mount("conf", "/pinned.html", false, "index.html"), mount("creds", "/creds", false, "")];
    let mut pod_spec = spec(vec![web], "Always");
    pod_spec.volumes = vec![
        Volume {
            name: "conf".into(),
            config_map: Some(ConfigMapVolumeSource { name: "site".into(), ..Default::default() }),
            ..Volume::default()
        },
        Volume {
            name: "creds".into(),
            secret: Some(SecretVolumeSource { secret_name: "db".into(), default_mode: Some(0o400), ..Default::default() }),
            ..Volume::default()
        },
    ];
    let pod = api.add_pod(&node, "site", pod_spec).await;
    let uid = pod.metadata.uid.clone();
    // Neither object exists yet: the container waits, and the event names what is missing.
    api.wait_for(&uid, "ContainerCreating for a missing ConfigMap", WAIT, |p| {
        p.status.container_statuses.first().is_some_and(|c| {
            matches!(&c.state, shared::model::ContainerState::Waiting { message, .. } if message.contains("configmap \"site\" not found"))
        })
    })
    .await;
    assert!(api.events_for("site").await.iter().any(|e| e.reason == "FailedMount" && e.message.contains("\"site\"")));
    let configmap = |page: &str| serde_json::json!({"kind": "ConfigMap", "metadata": {"name": "site"}, "data": {"index.html": page}});
    let (status, answer) = api.server.post("/api/v1/namespaces/default/configmaps", configmap("v1")).await;
    assert!(status.is_success(), "{answer}");
    let secret = serde_json::json!({"kind": "Secret", "metadata": {"name": "db"}, "string_data": {"password": "s3cret"}});
    let (status, answer) = api.server.post("/api/v1/namespaces/default/secrets", secret).await;
    assert!(status.is_success(), "{answer}");
    api.wait_for(&uid, "Running once both exist", Duration::from_secs(60), |p| p.status.phase == PodPhase::Running).await;
    let web = container_id(docker.as_ref(), &uid, "web").await;
    assert_eq!(exec(&web, "cat /conf/index.html"), (0, "v1".to_string()));
    assert_eq!(exec(&web, "cat /pinned.html"), (0, "v1".to_string()));
    assert_eq!(exec(&web, "cat /creds/password"), (0, "s3cret".to_string()));
    assert_eq!(exec(&web, "stat -L -c %a /creds/password"), (0, "400\n".to_string()), "the secret's default mode");
    let (_, mounts) = exec(&web, "cat /proc/mounts");
    assert!(mounts.lines().any(|l| l.starts_with("tmpfs /creds tmpfs")), "a Secret's files are on a tmpfs: {mounts}");
    for write in ["echo x > /conf/k", "echo x > /creds/k", "echo x > /pinned.html"] {
        let (code, out) = exec(&web, write);
        assert!(code != 0 && out.contains("Read-only file system"), "{write}: {out}");
    }
    // No other user of the node reaches the files: the directories down to them are 0750,
    // the files keep the Secret's mode.
    let mode = |path: &std::path::Path| std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(path).unwrap().permissions()) & 0o777;
    let pods = common::state_dir(&node).join("nodes").join(&node).join("pods");
    assert_eq!((mode(&pods), mode(&pod_dir(&node, &uid)), mode(&pod_dir(&node, &uid).join("volumes"))), (0o750, 0o750, 0o750));
    assert_eq!(mode(&pod_dir(&node, &uid).join("volumes/secret/creds/password")), 0o400);

    let (status, answer) = api.server.put("/api/v1/namespaces/default/configmaps/site", configmap("v2")).await;
    assert!(status.is_success(), "{answer}");
    shepherd_testing::poll(Duration::from_secs(90), "the mounted file to change in place", || {
        let now = exec(&web, "cat /conf/index.html");
        async move { (now == (0, "v2".to_string())).then_some(()).ok_or(format!("{now:?}")) }
    })
    .await;
    assert_eq!(exec(&web, "cat /pinned.html"), (0, "v1".to_string()), "a subPath mount keeps its version, as in Kubernetes");

    // Its version is gone from the volume: a restart is a new container whose subPath binds
    // the current one, as the kubelet makes it, and the ended one stays as the previous.
    let killed = std::process::Command::new("docker").args(["kill", &web]).output().unwrap();
    assert!(killed.status.success(), "{killed:?}");
    let restarted = api
        .wait_for(&uid, "the container restarted", WAIT, |p| {
            p.status.container_statuses.first().is_some_and(|c| c.restart_count == 1 && c.ready && c.container_id != web)
        })
        .await;
    let again = restarted.status.container_statuses[0].container_id.clone();
    assert_eq!(exec(&again, "cat /pinned.html"), (0, "v2".to_string()), "the new container binds the version of its creation");
    let kept = docker.list(&[(LABEL_POD_UID, uid.as_str()), (LABEL_CONTAINER, "web")]).await.unwrap();
    assert_eq!(kept.len(), 2, "the ended container is kept as the previous: {kept:?}");
    api.terminate_pod(&uid, 1).await;
    shepherd_testing::poll(WAIT, "the pod to go", || async { (!api.has_pod(&uid).await).then_some(()) }).await;
    assert!(!pod_dir(&node, &uid).exists(), "its files went with it");
    agent.stop().await;
}

/// The tester's escape: container `a` turns the name a `subPath` of container `b` mounts into
/// a link to a directory of the node; `b` ends and starts again. Its new container must not
/// write to the node: the subPath is refused as the kubelet refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_path_a_container_links_out_of_the_volume_never_reaches_the_node() {
    let DockerNode { docker: _, node, api, agent, cleanup: _cleanup } = docker_node().await;
    let victim = tempfile::tempdir().unwrap();
    let link = format!("sleep 2; rm -rf /data/esc; ln -s {} /data/esc; sleep 3600", victim.path().display());
    let mut a = container("a", &["sh", "-c", &link]);
    a.volume_mounts = vec![mount("data", "/data", false, "")];
    let mut b = container("b", &["sh", "-c", "echo x > /esc/written; sleep 4; exit 1"]);
    b.volume_mounts = vec![mount("data", "/esc", false, "esc")];
    let mut pod_spec = spec(vec![a, b], "Always");
    pod_spec.volumes = vec![empty_dir("data", "", 0)];
    let pod = api.add_pod(&node, "escape", pod_spec).await;
    let uid = pod.metadata.uid.clone();
    let refused = r#"Error: failed to prepare subPath for volumeMount "data" of container "b""#;
    shepherd_testing::poll(Duration::from_secs(60), "b's new container refused for its subPath", || {
        let api = api.clone();
        async move {
            let events = api.events_for("escape").await;
            events.iter().any(|e| e.reason == "Failed" && e.message == refused).then_some(()).ok_or(format!("{events:?}"))
        }
    })
    .await;
    assert!(!victim.path().join("written").exists(), "a container wrote to the node through the link");
    api.terminate_pod(&uid, 1).await;
    shepherd_testing::poll(WAIT, "the pod to go", || async { (!api.has_pod(&uid).await).then_some(()) }).await;
    agent.stop().await;
}

/// An agent that removes its pods' containers on exit also undoes what it mounted for them:
/// a Memory emptyDir's tmpfs and a subPath's bind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_removes_its_containers_on_exit_unmounts_their_volumes() {
    let docker = common::docker().await;
    common::minimal_image(&docker).await;
    let node = common::unique("node");
    let _cleanup = common::Cleanup(node.clone());
    let api = common::Api::start().await;
    let agent = common::TestAgent::start_configured(&node, docker.clone(), api.clone(), 0, |c| c.remove_containers_on_exit = true).await;
    let mut web = container("web", &["sleep", "3600"]);
    web.volume_mounts = vec![mount("ram", "/ram", false, ""), mount("ram", "/sub", false, "sub")];
    let mut pod_spec = spec(vec![web], "Always");
    pod_spec.volumes = vec![empty_dir("ram", "Memory", 0)];
    let pod = api.add_pod(&node, "ram", pod_spec).await;
    let uid = pod.metadata.uid.clone();
    api.wait_for(&uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    let mounted = || std::fs::read_to_string("/proc/self/mountinfo").unwrap().lines().filter(|l| l.contains(&uid)).count();
    assert_eq!(mounted(), 2, "the tmpfs and the subPath's bind");
    agent.stop().await;
    assert_eq!(mounted(), 0, "nothing the agent mounted for the pod stays mounted");
    assert!(!pod_dir(&node, &uid).exists());
}
