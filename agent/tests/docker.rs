//! The agent against the real Docker engine and the real API server in process (in-memory
//! store). These tests fail (never skip) when Docker is unreachable.

mod common;

use std::time::Duration;

use agent::network::{PodNetwork, Subnet};
use agent::runtime::{
    ContainerInfo, ContainerRuntime, DockerRuntime, LABEL_CLUSTER, LABEL_CONTAINER, LABEL_NAMESPACE, LABEL_NODE, LABEL_POD, LABEL_POD_UID,
    LABEL_SANDBOX, LABEL_SANDBOX_ID, RunState,
};
use agent::sandbox::{Owner, Sandboxes, owner, sandbox_name};
use common::{Api, Cleanup, DockerNode, TestAgent, container, docker, docker_node, docker_node_with_pool, minimal_image, spec, unique};
use shared::model::{ContainerPort, ContainerState, PodPhase, ResourceRequirements};
use shepherd_testing::{eventually, poll};

const WAIT: Duration = Duration::from_secs(20);

async fn containers_of(runtime: &dyn ContainerRuntime, uid: &str) -> Vec<agent::runtime::ContainerInfo> {
    runtime.list(&[(LABEL_POD_UID, uid)]).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_runs_with_labels_memory_limit_and_command() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node().await;

    let mut web = container("web", &["/bin/sh", "-c", "echo started; sleep 3600"]);
    web.resources = ResourceRequirements { memory: 64 * 1024 * 1024, cpu: 250 };
    let pod = api.add_pod(&node, "web", spec(vec![web], "Always")).await;
    let running = api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;

    assert_eq!(running.status.host_ip, "127.0.0.1");
    assert!(!running.status.pod_ip.is_empty(), "pod_ip is reported: {:?}", running.status);
    assert!(running.status.start_time.is_some());
    let status = &running.status.container_statuses[0];
    assert!(matches!(status.state, ContainerState::Running { started_at: Some(_) }), "{status:?}");
    assert!(status.ready);

    let found = containers_of(docker.as_ref(), &pod.metadata.uid).await;
    assert_eq!(found.len(), 1, "one container per pod container: {found:?}");
    let info = &found[0];
    assert_eq!(info.label(LABEL_POD_UID), pod.metadata.uid);
    assert_eq!(info.label(LABEL_NAMESPACE), "default");
    assert_eq!(info.label(LABEL_POD), "web");
    assert_eq!(info.label(LABEL_CONTAINER), "web");
    assert_eq!(info.label(LABEL_NODE), node);
    assert_eq!(info.memory_limit, 64 * 1024 * 1024);
    assert_eq!(info.nano_cpus, 250_000_000);
    assert_eq!(info.command, vec!["/bin/sh", "-c", "echo started; sleep 3600"]);
    assert_eq!(status.container_id, info.id);

    let reasons: Vec<String> = api.events_for("web").await.into_iter().map(|e| e.reason).collect();
    for wanted in ["Pulled", "Created", "Started"] {
        assert!(reasons.iter().any(|r| r == wanted), "event {wanted} missing from {reasons:?}");
    }
    let node_object = api.node(&node).await.expect("the node registered");
    assert_eq!(node_object.status.node_info.runtime, "docker");
    assert!(!node_object.status.node_info.simulated);
    assert!(node_object.status.capacity.cpu >= 1000);
    assert!(api.renewals() > 0, "the agent renews its lease");
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_3_under_never_ends_failed_with_the_exit_code() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node().await;

    let pod = api.add_pod(&node, "job", spec(vec![container("main", &["sh", "-c", "exit 3"])], "Never")).await;
    let failed = api.wait_for(&pod.metadata.uid, "Failed", WAIT, |p| p.status.phase == PodPhase::Failed).await;
    match &failed.status.container_statuses[0].state {
        ContainerState::Terminated { exit_code, reason, .. } => {
            assert_eq!(*exit_code, 3);
            assert_eq!(reason, "Error");
        }
        other => panic!("expected a terminated container, got {other:?}"),
    }
    assert_eq!(failed.status.container_statuses[0].restart_count, 0);

    let ok = api.add_pod(&node, "job-ok", spec(vec![container("main", &["sh", "-c", "exit 0"])], "Never")).await;
    api.wait_for(&ok.metadata.uid, "Succeeded", WAIT, |p| p.status.phase == PodPhase::Succeeded).await;
    // Under Never nothing is started again, not even by a resync.
    api.wait_lists(2).await;
    assert_eq!(api.pod(&pod.metadata.uid).await.status.phase, PodPhase::Failed);
    assert_eq!(containers_of(docker.as_ref(), &pod.metadata.uid).await.len(), 1);
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_over_its_memory_limit_shows_oom_killed() {
    let DockerNode { docker: _, node, api, agent, cleanup: _cleanup } = docker_node().await;

    // A 100 MB shell variable in a 16 MiB container.
    let mut hog = container("hog", &["sh", "-c", "x=$(head -c 100000000 /dev/zero | tr '\\0' a); echo survived"]);
    hog.resources = ResourceRequirements { memory: 16 * 1024 * 1024, cpu: 0 };
    let pod = api.add_pod(&node, "hog", spec(vec![hog], "Never")).await;
    let failed = api.wait_for(&pod.metadata.uid, "Failed", WAIT, |p| p.status.phase == PodPhase::Failed).await;
    match &failed.status.container_statuses[0].state {
        ContainerState::Terminated { reason, exit_code, .. } => {
            assert_eq!(reason, "OOMKilled");
            assert_eq!(*exit_code, 137);
        }
        other => panic!("expected a terminated container, got {other:?}"),
    }
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_restarts_the_container_with_rising_restart_count() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node().await;

    let pod = api.add_pod(&node, "crasher", spec(vec![container("main", &["sh", "-c", "echo boom; exit 1"])], "Always")).await;
    let crashing = api
        .wait_for(&pod.metadata.uid, "restart_count 3", Duration::from_secs(30), |p| {
            p.status.container_statuses.first().is_some_and(|c| c.restart_count >= 3)
        })
        .await;
    assert_ne!(crashing.status.phase, PodPhase::Failed, "Always never ends Failed");
    api.wait_for_version(&pod.metadata.uid, 0, "CrashLoopBackOff", WAIT, |p| {
        p.status.container_statuses.first().is_some_and(|c| {
            matches!(&c.state, ContainerState::Waiting { reason, .. } if reason == "CrashLoopBackOff")
                && matches!(&c.last_state, Some(ContainerState::Terminated { exit_code: 1, .. }))
        })
    })
    .await;
    // Each restart is a new container, as the kubelet makes it: the current one and the
    // previous are kept, never more, all in the same warm sandbox.
    let containers = containers_of(docker.as_ref(), &pod.metadata.uid).await;
    assert_eq!(containers.len(), 2, "{containers:?}");
    for container in &containers {
        assert_eq!(joined_sandbox(&container.id), containers[0].label(LABEL_SANDBOX_ID));
    }
    assert!(api.events_for("crasher").await.iter().any(|e| e.reason == "BackOff" && e.type_ == "Warning"));
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_removed_behind_the_agents_back_is_recreated_and_counted_as_a_restart() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node().await;
    let pod = api.add_pod(&node, "removed", spec(vec![container("main", &["sleep", "3600"])], "Always")).await;
    let running = api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    let first = running.status.container_statuses[0].container_id.clone();
    assert_eq!(running.status.container_statuses[0].restart_count, 0);
    docker.remove(&first).await.unwrap();
    let again = api
        .wait_for(&pod.metadata.uid, "a new container", WAIT, |p| {
            p.status.phase == PodPhase::Running
                && p.status.container_statuses.first().is_some_and(|c| !c.container_id.is_empty() && c.container_id != first)
        })
        .await;
    assert_eq!(again.status.container_statuses[0].restart_count, 1, "{:?}", again.status.container_statuses);
    assert_eq!(containers_of(docker.as_ref(), &pod.metadata.uid).await.len(), 1);
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_pod_removes_its_container() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node().await;

    let pod = api.add_pod(&node, "doomed", spec(vec![container("main", &["sleep", "3600"])], "Always")).await;
    api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    assert_eq!(containers_of(docker.as_ref(), &pod.metadata.uid).await.len(), 1);
    api.delete_pod(&pod.metadata.uid).await;
    // sleep ignores SIGTERM as PID 1: the 1 s grace period ends in SIGKILL.
    wait_no_containers(docker.as_ref(), &pod.metadata.uid, "the container of a deleted pod to go").await;
    assert!(api.events_for("doomed").await.iter().any(|e| e.reason == "Killing"));
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminating_pod_stops_within_the_deletions_grace_then_the_agent_confirms() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node().await;

    // The spec's 30 s grace would outlast the wait below: the deletion's 1 s must win.
    let mut spec = spec(vec![container("main", &["sleep", "3600"])], "Always");
    spec.termination_grace_period_seconds = Some(30);
    let pod = api.add_pod(&node, "leaving", spec).await;
    api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    api.terminate_pod(&pod.metadata.uid, 1).await;
    poll(Duration::from_secs(15), "the agent to confirm the deletion of a terminating pod", || async {
        (!api.has_pod(&pod.metadata.uid).await).then_some(())
    })
    .await;
    assert!(containers_of(docker.as_ref(), &pod.metadata.uid).await.is_empty(), "confirmed while a container was still there");
    let killing = api.events_for("leaving").await.into_iter().find(|e| e.reason == "Killing").expect("a Killing event");
    assert!(killing.message.contains("grace period 1s"), "{}", killing.message);
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shortened_grace_period_stops_a_terminating_pod_sooner() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node().await;

    let pod = api.add_pod(&node, "hurried", spec(vec![container("main", &["sleep", "3600"])], "Always")).await;
    api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    // sleep ignores SIGTERM as PID 1: it would live out the whole 60 s.
    api.terminate_pod(&pod.metadata.uid, 60).await;
    eventually(&api.server.client, WAIT, "the terminating pod's container to be stopped", || async {
        api.events_for("hurried").await.iter().any(|e| e.reason == "Killing").then_some(())
    })
    .await;
    // A resync later, the 60 s are still running.
    api.wait_lists(1).await;
    assert!(api.has_pod(&pod.metadata.uid).await, "the container cannot be gone yet");
    api.terminate_pod(&pod.metadata.uid, 1).await;
    poll(Duration::from_secs(15), "the shortened grace period to be honoured", || async {
        (!api.has_pod(&pod.metadata.uid).await).then_some(())
    })
    .await;
    assert!(containers_of(docker.as_ref(), &pod.metadata.uid).await.is_empty());
    assert!(api.events_for("hurried").await.iter().any(|e| e.message.contains("shortened to 1s")));
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_the_watch_missed_is_caught_by_the_resync() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node().await;

    let pod = api.add_pod(&node, "forgotten", spec(vec![container("main", &["sleep", "3600"])], "Always")).await;
    api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    api.forget_pod(&pod.metadata.uid).await;
    // No DELETED event: only the full re-list (every 2 s here) can notice.
    wait_no_containers(docker.as_ref(), &pod.metadata.uid, "the resync to remove the container of a pod that is gone").await;
    agent.stop().await;
}

/// A web server on the pod's port 8080 that answers `body`, published on host port `port`.
fn web_on(port: u16, body: &str) -> shared::model::Container {
    let mut web = container("web", &["sh", "-c", &format!("echo {body} > /tmp/index.html; exec httpd -f -p 8080 -h /tmp")]);
    web.ports = vec![ContainerPort { container_port: 8080, host_port: Some(i32::from(port)), ..Default::default() }];
    web
}

/// What `http://127.0.0.1:<port>/index.html` answers, once something does. Only ever the
/// port published on 127.0.0.1, never a container's own address.
async fn fetch(port: u16) -> String {
    let url = format!("http://127.0.0.1:{port}/index.html");
    poll(WAIT, &format!("an answer on {url}"), || async {
        match reqwest::get(&url).await {
            Ok(response) if response.status().is_success() => Ok(response.text().await.unwrap()),
            other => Err(format!("{other:?}")),
        }
    })
    .await
}

/// Binds `at` as a host process would: TCP listens, UDP binds.
fn bind_as_host(protocol: &str, at: &str) -> std::io::Result<std::os::fd::OwnedFd> {
    match protocol {
        "udp" => std::net::UdpSocket::bind(at).map(Into::into),
        _ => std::net::TcpListener::bind(at).map(Into::into),
    }
}

/// Waits until a host process can bind `at`, and does.
async fn bind_once_free(protocol: &str, at: &str) -> std::os::fd::OwnedFd {
    poll(WAIT, &format!("{protocol} {at} to be free"), || async {
        bind_as_host(protocol, at).map_err(|e| {
            assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{at}");
            e.to_string()
        })
    })
    .await
}

fn assert_held(protocol: &str, port: u16) {
    for at in [format!("127.0.0.1:{port}"), format!("0.0.0.0:{port}"), format!("[::]:{port}")] {
        match bind_as_host(protocol, &at) {
            Ok(_) => panic!("a host process took {protocol} {at} from the pod"),
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{protocol} {at}"),
        }
    }
}

fn refused_for_its_host_port(p: &shared::model::Pod) -> bool {
    p.status.container_statuses.iter().any(|c| {
        matches!(&c.state, ContainerState::Waiting { reason, message }
            if reason == "ContainerCreating" && message.contains("is in use by another process or pod on this machine"))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_port_is_published_on_loopback_and_held_until_the_pod_is_deleted() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node().await;

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let pod = api.add_pod(&node, "web-port", spec(vec![web_on(port, "hello-port")], "Always")).await;
    let ip = api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await.status.pod_ip;
    // The agent's socket on the port sees none of it: portmap's DNAT comes first.
    assert_eq!(fetch(port).await, "hello-port\n");
    // A host process that starts after the pod is told the port is taken, on any address
    // that overlaps the pod's 127.0.0.1, rather than losing its traffic to the DNAT.
    assert_held("tcp", port);
    // Published by portmap: Docker neither networked the sandbox nor bound the port.
    let app = containers_of(docker.as_ref(), &pod.metadata.uid).await.remove(0);
    let sandbox = joined_sandbox(&app.id);
    assert_eq!(docker_inspect(&sandbox, "{{.Config.NetworkDisabled}} {{len .HostConfig.PortBindings}}"), "true 0");
    assert!(iptables_save("nat").contains(&sandbox), "portmap's DNAT rules name the sandbox: {}", iptables_save("nat"));
    assert!(!iptables_save("filter").contains(&format!("{ip}/32")), "no FORWARD rules of its own: the node-wide ones accept it");
    assert!(node_rules_present(), "the node-wide rules are in place");
    api.delete_pod(&pod.metadata.uid).await;
    wait_gone(&docker, &sandbox, "the sandbox of a deleted pod").await;
    assert!(!iptables_save("nat").contains(&sandbox), "DEL ran portmap again and took its rules down");
    // Let go after the DEL, before the sandbox was removed.
    drop(std::net::TcpListener::bind(("127.0.0.1", port)).expect("the port of a deleted pod is free"));
    agent.stop().await;
}

/// A pod whose host port a host process holds on `held_at` (`{port}` in it is the port)
/// waits in ContainerCreating, and starts once the process lets the port go.
async fn refused_until_the_host_process_lets_go(protocol: &str, held_at: &str) {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node().await;
    let (port, holder) = loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if let Ok(holder) = bind_as_host(protocol, &held_at.replace("{port}", &port.to_string())) {
            break (port, holder);
        }
    };
    let mut web = web_on(port, "hello-port");
    web.ports[0].protocol = protocol.to_uppercase();
    let name = format!("web-taken-{protocol}");
    let pod = api.add_pod(&node, &name, spec(vec![web], "Always")).await;
    api.wait_for(&pod.metadata.uid, "refused for its host port", WAIT, refused_for_its_host_port).await;
    let events = api.events_for(&name).await;
    let wanted = format!("host port {port}/{}", protocol.to_uppercase());
    assert!(events.iter().any(|e| e.reason == "FailedCreatePodSandBox" && e.message.contains(&wanted)), "{events:?}");
    assert!(containers_of(docker.as_ref(), &pod.metadata.uid).await.is_empty(), "no container runs for it");

    drop(holder);
    api.wait_for(&pod.metadata.uid, "Running once the port is free", WAIT, |p| p.status.phase == PodPhase::Running).await;
    if protocol == "tcp" {
        assert_eq!(fetch(port).await, "hello-port\n");
    }
    assert_held(protocol, port);
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tcp_host_port_a_process_of_the_host_listens_on_is_refused_until_it_is_free() {
    refused_until_the_host_process_lets_go("tcp", "127.0.0.1:{port}").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_udp_host_port_a_dual_stack_process_of_the_host_holds_is_refused_until_it_is_free() {
    // [::] with IPV6_V6ONLY off (Linux's default) takes 127.0.0.1 too.
    assert_eq!(std::fs::read_to_string("/proc/sys/net/ipv6/bindv6only").unwrap().trim(), "0");
    refused_until_the_host_process_lets_go("udp", "[::]:{port}").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_pod_asking_a_held_host_port_starts_once_the_first_is_deleted() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node().await;
    // A second node on the same machine: the server gives it the pod the first node has no
    // port for, but the machine's port is the first pod's.
    let neighbour = unique("node");
    let _neighbour_cleanup = Cleanup(neighbour.clone());
    let neighbour_agent = TestAgent::start(&neighbour, docker.clone(), api.clone()).await;
    neighbour_agent.wait_pool(common::TEST_POOL).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let first = api.add_pod(&node, "first", spec(vec![web_on(port, "first")], "Always")).await;
    api.wait_for(&first.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    let second = api.add_pod(&neighbour, "second", spec(vec![web_on(port, "second")], "Always")).await;
    api.wait_for(&second.metadata.uid, "refused for the first pod's host port", WAIT, refused_for_its_host_port).await;
    assert_eq!(fetch(port).await, "first\n", "the first pod keeps its port");

    api.delete_pod(&first.metadata.uid).await;
    api.wait_for(&second.metadata.uid, "Running once the first pod is gone", WAIT, |p| p.status.phase == PodPhase::Running).await;
    assert_eq!(fetch(port).await, "second\n");
    neighbour_agent.stop().await;
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_agent_holds_its_pods_host_ports_again_and_keeps_a_pod_whose_port_was_taken() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let pod = api.add_pod(&node, "kept", spec(vec![web_on(port, "kept")], "Always")).await;
    let running = api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    let container_id = running.status.container_statuses[0].container_id.clone();
    assert_held("tcp", port);

    // The agent's sockets go with it; the pod's DNAT stays.
    agent.stop().await;
    drop(bind_once_free("tcp", &format!("127.0.0.1:{port}")).await);
    let agent = TestAgent::start(&node, docker.clone(), api.clone()).await;
    // The pool is full again only after the agent adopted what the last one left.
    agent.wait_pool(common::TEST_POOL).await;
    assert_held("tcp", port);
    agent.stop().await;

    // Taken while no agent held it: the next agent warns, and the pod keeps running.
    let holder = bind_once_free("tcp", &format!("127.0.0.1:{port}")).await;
    let agent = TestAgent::start(&node, docker.clone(), api.clone()).await;
    agent.wait_pool(common::TEST_POOL).await;
    assert_eq!(fetch(port).await, "kept\n", "the pod's DNAT still takes the port's traffic from the host process");
    let containers = containers_of(docker.as_ref(), &pod.metadata.uid).await;
    assert_eq!(containers.len(), 1);
    assert_eq!((containers[0].id.as_str(), &containers[0].state), (container_id.as_str(), &RunState::Running), "the same container runs");
    assert_eq!(api.pod(&pod.metadata.uid).await.status.phase, PodPhase::Running);
    drop(holder);
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_agent_adopts_running_containers_without_duplicates() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node().await;

    let pod = api.add_pod(&node, "steady", spec(vec![container("main", &["sleep", "3600"])], "Always")).await;
    api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    let before = containers_of(docker.as_ref(), &pod.metadata.uid).await;
    agent.stop().await;

    // The agent is gone: the container keeps running.
    let during = containers_of(docker.as_ref(), &pod.metadata.uid).await;
    assert_eq!(during.len(), 1);
    assert_eq!(during[0].state, RunState::Running, "stopping the agent must leave pods running");

    let agent = TestAgent::start(&node, docker.clone(), api.clone()).await;
    // Its first list and two resyncs, each handed to the pod's worker: plenty of chances to
    // do something wrong.
    api.wait_lists(3).await;
    let after = containers_of(docker.as_ref(), &pod.metadata.uid).await;
    assert_eq!(after.len(), 1, "no duplicate container: {after:?}");
    assert_eq!(after[0].id, before[0].id, "the same container is adopted");
    assert_eq!(after[0].started_at, before[0].started_at, "a healthy container is not restarted");
    let pod_now = api.pod(&pod.metadata.uid).await;
    assert_eq!(pod_now.status.phase, PodPhase::Running);
    assert_eq!(pod_now.status.container_statuses[0].restart_count, 0);
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_that_cannot_be_pulled_gives_err_image_pull_then_back_off() {
    let docker = docker().await;
    let node = unique("node");
    let _cleanup = Cleanup(node.clone());
    let api = Api::start().await;
    let agent = TestAgent::start(&node, docker.clone(), api.clone()).await;

    // A registry on loopback port 1: refused at once, no packet leaves the machine.
    let mut bad = container("main", &["sleep", "1"]);
    bad.image = "127.0.0.1:1/shepherd-test/nope:1".into();
    let pod = api.add_pod(&node, "unpullable", spec(vec![bad], "Always")).await;
    let waiting_reason = |reason: &'static str| {
        move |p: &shared::model::Pod| {
            p.status
                .container_statuses
                .first()
                .is_some_and(|c| matches!(&c.state, ContainerState::Waiting { reason: r, .. } if r == reason))
        }
    };
    let (first, pulling) = api.wait_for_version(&pod.metadata.uid, 0, "ErrImagePull", WAIT, waiting_reason("ErrImagePull")).await;
    assert_eq!(pulling.status.phase, PodPhase::Pending);
    let (then, backing_off) =
        api.wait_for_version(&pod.metadata.uid, first, "ImagePullBackOff", WAIT, waiting_reason("ImagePullBackOff")).await;
    assert_eq!(backing_off.status.phase, PodPhase::Pending);
    let events = api.events_for("unpullable").await;
    let warning = events.iter().find(|e| e.type_ == "Warning" && e.reason == "Failed").expect("a Warning event for the failed pull");
    assert!(warning.message.contains("127.0.0.1:1/shepherd-test/nope:1"), "{}", warning.message);
    assert!(events.iter().any(|e| e.reason == "Pulling"));
    // It keeps retrying, and the agent keeps running.
    api.wait_for_version(&pod.metadata.uid, then, "ErrImagePull again", WAIT, waiting_reason("ErrImagePull")).await;
    assert!(!agent.task.is_finished());
    assert!(containers_of(docker.as_ref(), &pod.metadata.uid).await.is_empty());
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_stream_from_the_agent_api() {
    let DockerNode { docker: _, node, api, agent, cleanup: _cleanup } = docker_node().await;

    let pod = api
        .add_pod(&node, "talker", spec(vec![container("main", &["sh", "-c", "echo one; echo two; echo three; sleep 3600"])], "Always"))
        .await;
    api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    let http = reqwest::Client::new();
    let url = format!("{}/logs/default/talker", agent.endpoint);
    let all = poll(WAIT, "the log's third line", || async {
        let text = http.get(&url).send().await.unwrap().text().await.unwrap();
        if text.contains("three") { Ok(text) } else { Err(text) }
    })
    .await;
    assert_eq!(all, "one\ntwo\nthree\n");
    let tail = http.get(format!("{url}?tail=1")).send().await.unwrap().text().await.unwrap();
    assert_eq!(tail, "three\n");
    let missing = http.get(format!("{url}?container=nope")).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    assert!(missing.text().await.unwrap().contains("no container \\\"nope\\\""));
    let bad_tail = http.get(format!("{url}?tail=x")).send().await.unwrap();
    assert_eq!(bad_tail.status(), 400);
    // follow=true keeps the stream open: the first chunk arrives, the body does not end.
    let mut follow = http.get(format!("{url}?follow=true&tail=1")).send().await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), follow.chunk()).await.expect("first chunk").unwrap().unwrap();
    assert_eq!(&first[..], b"three\n");
    assert!(tokio::time::timeout(Duration::from_millis(500), follow.chunk()).await.is_err(), "a followed stream stays open");
    assert_eq!(http.get(format!("{}/healthz", agent.endpoint)).send().await.unwrap().text().await.unwrap(), "ok");
    agent.stop().await;
}

/// A sleeping container called `name` with these labels, started outside any agent.
async fn sleeper(docker: &DockerRuntime, name: &str, labels: &[(&str, &str)]) -> String {
    let config = agent::runtime::ContainerConfig {
        name: name.to_string(),
        image: "minimal".into(),
        command: vec!["sleep".into(), "3600".into()],
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..Default::default()
    };
    let id = docker.create(&config).await.unwrap();
    docker.start(&id).await.unwrap();
    id
}

/// A sleeping container labelled as one of `node`'s in `cluster`, for a pod nobody knows.
async fn stray_container(docker: &DockerRuntime, node: &str, cluster: &str) -> String {
    let labels = [(LABEL_POD_UID, "no-such-pod"), (LABEL_NODE, node), (LABEL_CLUSTER, cluster), (agent::runtime::LABEL_GRACE, "0")];
    sleeper(docker, &unique("shepherd_orphan"), &labels).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_without_a_pod_are_removed_but_not_another_clusters() {
    let docker = docker().await;
    minimal_image(&docker).await;
    let node = unique("node");
    let _cleanup = Cleanup(node.clone());
    let api = Api::start().await;
    // Containers of this node whose pods the server does not know: one of this cluster, and
    // one of another cluster that has a node of the same name on the same engine.
    let orphan = stray_container(&docker, &node, &api.cluster).await;
    let other_cluster = stray_container(&docker, &node, "another-cluster").await;
    let agent = TestAgent::start(&node, docker.clone(), api.clone()).await;
    wait_gone(&docker, &orphan, "the orphan container").await;
    // The re-list that took the orphan saw the other cluster's container too, if it matched;
    // so did the one after it.
    api.wait_lists(1).await;
    assert!(docker.inspect(&other_cluster).await.unwrap().is_some(), "the agent removed another cluster's container");
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_image_builds_a_working_image_once() {
    let _docker = docker().await;
    let name = format!("{}:test", unique("shepherd-bootstrap"));
    let run = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_shepherd-agent")).args(args).output().unwrap();
        assert!(output.status.success(), "shepherd-agent {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).to_string()
    };
    let first = run(&["bootstrap-image", &name]);
    assert!(first.contains("imported"), "{first}");
    let second = run(&["bootstrap-image", &name]);
    assert!(second.contains("already present"), "{second}");
    let output = std::process::Command::new("docker")
        .args(["run", "--rm", "--network", "none", &name, "sh", "-c", "echo $PATH; ls /bin/sh /usr/bin/env > /dev/null && echo ok"])
        .output()
        .unwrap();
    let _ = std::process::Command::new("docker").args(["rmi", &name]).output();
    assert_eq!(String::from_utf8_lossy(&output.stdout), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nok\n");
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_shepherd-agent")).args(["bootstrap-image", "Not/Valid"]).output().unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid image name"));
}

async fn sandboxes_of(runtime: &DockerRuntime, node: &str, cluster: &str) -> Vec<ContainerInfo> {
    runtime.list(&[(LABEL_SANDBOX, "true"), (LABEL_NODE, node), (LABEL_CLUSTER, cluster)]).await.unwrap()
}

/// Waits until the node's warm pool holds exactly `n` running sandboxes, and returns them.
async fn warm_pool(runtime: &DockerRuntime, node: &str, cluster: &str, n: usize) -> Vec<ContainerInfo> {
    poll(WAIT, &format!("the warm pool of {node} to hold {n} sandboxes"), || async {
        let pool: Vec<ContainerInfo> = sandboxes_of(runtime, node, cluster)
            .await
            .into_iter()
            .filter(|s| owner(&s.name) == Owner::Pool && s.state == RunState::Running)
            .collect();
        if pool.len() == n { Ok(pool) } else { Err(format!("{} sandboxes", pool.len())) }
    })
    .await
}

/// One field of `docker inspect`, through the CLI, as a person would check it.
fn docker_inspect(id: &str, format: &str) -> String {
    let output = std::process::Command::new("docker").args(["inspect", "-f", format, id]).output().unwrap();
    assert!(output.status.success(), "docker inspect {id}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// The sandbox whose namespace a container joined, as Docker records it.
fn joined_sandbox(id: &str) -> String {
    let mode = docker_inspect(id, "{{.HostConfig.NetworkMode}}");
    mode.strip_prefix("container:").unwrap_or_else(|| panic!("container {id} joined no sandbox: network mode {mode}")).to_string()
}

async fn wait_gone(runtime: &DockerRuntime, id: &str, what: &str) {
    poll(WAIT, &format!("{what} {id} to go"), || async { runtime.inspect(id).await.unwrap().is_none().then_some(()) }).await
}

/// Waits until the pod with this uid has no container left.
async fn wait_no_containers(runtime: &dyn ContainerRuntime, uid: &str, what: &str) {
    poll(WAIT, what, || async { containers_of(runtime, uid).await.is_empty().then_some(()) }).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_runs_on_the_shepherd_network_and_stops_at_once_on_sigterm() {
    let docker = docker().await;
    minimal_image(&docker).await;
    let node = unique("node");
    let _cleanup = Cleanup(node.clone());
    let sandboxes = Sandboxes::new(docker.clone(), &node, "cluster-x", PodNetwork::Docker(agent::runtime::docker::NETWORK.into()), 0);
    let sandbox = sandboxes.create(&unique("shepherd-test-sandbox"), "", Vec::new()).await.unwrap();
    assert!(!sandbox.ip.is_empty());
    let networks = docker_inspect(&sandbox.id, "{{range $name, $_ := .NetworkSettings.Networks}}{{$name}} {{end}}");
    assert_eq!(networks, agent::runtime::docker::NETWORK);
    let info = docker.inspect(&sandbox.id).await.unwrap().unwrap();
    assert_eq!((info.label(LABEL_SANDBOX), info.label(LABEL_NODE), info.label(LABEL_CLUSTER)), ("true", node.as_str(), "cluster-x"));
    // A long grace period: only a shell that exits on SIGTERM ends with code 0 (SIGKILL gives 137).
    docker.stop(&sandbox.id, Duration::from_secs(30)).await.unwrap();
    let stopped = docker.inspect(&sandbox.id).await.unwrap().unwrap();
    assert_eq!(stopped.state, RunState::Exited { exit_code: 0, oom_killed: false });
    docker.remove(&sandbox.id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_claims_a_warm_sandbox_the_pool_refills_and_deleting_the_pod_removes_it() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node_with_pool(2).await;
    let pool: Vec<String> = warm_pool(&docker, &node, &api.cluster, 2).await.into_iter().map(|s| s.id).collect();

    let pod = api.add_pod(&node, "warm", spec(vec![container("main", &["sleep", "3600"])], "Always")).await;
    let running = api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    let app = containers_of(docker.as_ref(), &pod.metadata.uid).await;
    assert_eq!(app.len(), 1, "{app:?}");
    let sandbox_id = joined_sandbox(&app[0].id);
    assert!(pool.contains(&sandbox_id), "the pod joined {sandbox_id}, not one of the warm sandboxes {pool:?}");
    assert_eq!(app[0].label(LABEL_SANDBOX_ID), sandbox_id);
    let sandbox = docker.inspect(&sandbox_id).await.unwrap().expect("the claimed sandbox exists");
    assert_eq!(sandbox.name, sandbox_name(&running), "the claim renames the sandbox after its pod");
    assert_eq!(sandbox.state, RunState::Running);
    assert_eq!((sandbox.label(LABEL_NODE), sandbox.label(LABEL_CLUSTER)), (node.as_str(), api.cluster.as_str()));
    assert_eq!(running.status.pod_ip, sandbox_address(&sandbox_id), "the pod's address is its sandbox's");

    // The pool makes a new one in the background.
    let refilled = warm_pool(&docker, &node, &api.cluster, 2).await;
    assert!(refilled.iter().all(|s| s.id != sandbox_id), "the claimed sandbox left the pool");

    api.delete_pod(&pod.metadata.uid).await;
    wait_gone(&docker, &app[0].id, "the container of a deleted pod").await;
    wait_gone(&docker, &sandbox_id, "the sandbox of a deleted pod").await;
    let pool_after: Vec<String> = warm_pool(&docker, &node, &api.cluster, 2).await.into_iter().map(|s| s.id).collect();
    assert!(refilled.iter().all(|s| pool_after.contains(&s.id)), "deleting a pod leaves the pool alone");
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_containers_of_a_pod_share_localhost_in_a_sandbox_that_publishes_the_pods_ports() {
    // No pool: a pod of two containers gets a sandbox of its own, with the pod's host port.
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node_with_pool(0).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = container("server", &["sh", "-c", "echo hello-from-the-pod > /tmp/index.html; exec httpd -f -p 8080 -h /tmp"]);
    server.ports = vec![ContainerPort { container_port: 8080, host_port: Some(i32::from(port)), ..Default::default() }];
    // Loopback inside the pod's own network namespace: the server as its neighbour sees it.
    let client = container(
        "client",
        &["sh", "-c", "for i in $(seq 100); do wget -q -O - http://127.0.0.1:8080/index.html && exit 0; sleep 0.2; done; exit 1"],
    );
    let pod = api.add_pod(&node, "pair", spec(vec![server, client], "OnFailure")).await;
    let done = api
        .wait_for(&pod.metadata.uid, "client done", WAIT, |p| {
            p.status.container_statuses.iter().any(|c| c.name == "client" && matches!(c.state, ContainerState::Terminated { .. }))
        })
        .await;
    let client_status = done.status.container_statuses.iter().find(|c| c.name == "client").unwrap();
    assert!(
        matches!(client_status.state, ContainerState::Terminated { exit_code: 0, .. }),
        "the client could not reach 127.0.0.1:8080 in its pod: {client_status:?}"
    );
    assert_eq!(done.status.phase, PodPhase::Running, "the server still runs");
    let logs = reqwest::get(format!("{}/logs/default/pair?container=client", agent.endpoint)).await.unwrap().text().await.unwrap();
    assert_eq!(logs, "hello-from-the-pod\n");

    let app = containers_of(docker.as_ref(), &pod.metadata.uid).await;
    assert_eq!(app.len(), 2);
    let sandbox_id = joined_sandbox(&app[0].id);
    assert_eq!(joined_sandbox(&app[1].id), sandbox_id, "both containers are in one sandbox");
    let sandbox = docker.inspect(&sandbox_id).await.unwrap().unwrap();
    assert_eq!(sandbox.name, sandbox_name(&pod));
    assert_eq!(done.status.pod_ip, sandbox_address(&sandbox_id));
    assert!(
        sandboxes_of(&docker, &node, &api.cluster).await.iter().all(|s| owner(&s.name) != Owner::Pool),
        "a pool of 0 makes no warm sandbox"
    );

    // The sandbox publishes the pod's port on loopback.
    let url = format!("http://127.0.0.1:{port}/index.html");
    assert_eq!(reqwest::get(&url).await.unwrap().text().await.unwrap(), "hello-from-the-pod\n");

    api.delete_pod(&pod.metadata.uid).await;
    wait_gone(&docker, &sandbox_id, "the sandbox of a deleted pod").await;
    assert!(containers_of(docker.as_ref(), &pod.metadata.uid).await.is_empty());
    agent.stop().await;
}

/// A running sandbox-labelled container called `name`, as a pool or a pod's would be.
async fn stray_sandbox(docker: &DockerRuntime, name: &str, node: &str, cluster: &str) -> String {
    sleeper(docker, name, &[(LABEL_SANDBOX, "true"), (LABEL_NODE, node), (LABEL_CLUSTER, cluster)]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_agent_adopts_its_sandboxes_without_duplicates() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node_with_pool(2).await;
    warm_pool(&docker, &node, &api.cluster, 2).await;
    let pod = api.add_pod(&node, "steady", spec(vec![container("main", &["sleep", "3600"])], "Always")).await;
    api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    let app_before = containers_of(docker.as_ref(), &pod.metadata.uid).await;
    let claimed = joined_sandbox(&app_before[0].id);
    let mut pool_before: Vec<String> = warm_pool(&docker, &node, &api.cluster, 2).await.into_iter().map(|s| s.id).collect();
    pool_before.sort();
    agent.stop().await;

    // While the agent is away: a sandbox claimed by a pod the server no longer has, and a warm
    // sandbox of another cluster id on this node.
    let ghost = stray_sandbox(&docker, &format!("shepherd_default_ghost_POD_{}", uuid::Uuid::new_v4()), &node, &api.cluster).await;
    let theirs = stray_sandbox(&docker, &unique("shepherd-pool_theirs"), &node, "another-cluster").await;

    let agent = TestAgent::start_with_pool(&node, docker.clone(), api.clone(), 2).await;
    wait_gone(&docker, &ghost, "the sandbox of a pod that is gone").await;
    // Two more resyncs, each handed to the pod's worker and followed by a sweep: plenty of
    // chances to do something wrong.
    api.wait_lists(2).await;
    let app_after = containers_of(docker.as_ref(), &pod.metadata.uid).await;
    assert_eq!(app_after.len(), 1, "no duplicate container: {app_after:?}");
    assert_eq!((&app_after[0].id, app_after[0].started_at), (&app_before[0].id, app_before[0].started_at), "not restarted");
    assert_eq!(joined_sandbox(&app_after[0].id), claimed);
    let mut pool_after: Vec<String> = warm_pool(&docker, &node, &api.cluster, 2).await.into_iter().map(|s| s.id).collect();
    pool_after.sort();
    assert_eq!(pool_after, pool_before, "the warm sandboxes are adopted, none made or removed");
    let ours = sandboxes_of(&docker, &node, &api.cluster).await.len();
    assert_eq!(ours, 3, "two warm sandboxes and the pod's");
    assert!(docker.inspect(&theirs).await.unwrap().is_none(), "a warm sandbox of another cluster id is never adopted: removed");
    let pod_now = api.pod(&pod.metadata.uid).await;
    assert_eq!((pod_now.status.phase, pod_now.status.container_statuses[0].restart_count), (PodPhase::Running, 0));
    agent.stop().await;

    // Restarted with a smaller pool: the extra warm sandbox goes, the pod's stays.
    let agent = TestAgent::start_with_pool(&node, docker.clone(), api.clone(), 1).await;
    warm_pool(&docker, &node, &api.cluster, 1).await;
    assert!(docker.inspect(&claimed).await.unwrap().is_some());
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_sandbox_dies_starts_again_in_a_new_sandbox() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node_with_pool(1).await;
    warm_pool(&docker, &node, &api.cluster, 1).await;
    let pod = api.add_pod(&node, "phoenix", spec(vec![container("main", &["sleep", "3600"])], "Always")).await;
    api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    let first = containers_of(docker.as_ref(), &pod.metadata.uid).await.remove(0);
    let first_sandbox = joined_sandbox(&first.id);
    // A warm sandbox is ready for the pod's second life.
    agent.wait_pool(1).await;

    docker.stop(&first_sandbox, Duration::from_secs(10)).await.unwrap();
    let again = api
        .wait_for(&pod.metadata.uid, "running again", WAIT, |p| {
            p.status.phase == PodPhase::Running && p.status.container_statuses.first().is_some_and(|c| c.restart_count == 1 && c.ready)
        })
        .await;
    let second = containers_of(docker.as_ref(), &pod.metadata.uid).await;
    assert_eq!(second.len(), 1, "{second:?}");
    assert_ne!(second[0].id, first.id, "the container is created again");
    let second_sandbox = joined_sandbox(&second[0].id);
    assert_ne!(second_sandbox, first_sandbox);
    let sandbox = docker.inspect(&second_sandbox).await.unwrap().unwrap();
    assert_eq!((sandbox.name.as_str(), &sandbox.state), (sandbox_name(&pod).as_str(), &RunState::Running));
    assert_eq!(again.status.pod_ip, sandbox_address(&second_sandbox));
    assert!(matches!(again.status.container_statuses[0].last_state, Some(ContainerState::Terminated { .. })));
    wait_gone(&docker, &first_sandbox, "the dead sandbox").await;
    assert!(api.events_for("phoenix").await.iter().any(|e| e.reason == "SandboxChanged"));
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_never_a_dead_sandbox_ends_the_pod_without_a_new_one() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node_with_pool(1).await;
    let pod = api.add_pod(&node, "once", spec(vec![container("main", &["sleep", "3600"])], "Never")).await;
    api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    let app = containers_of(docker.as_ref(), &pod.metadata.uid).await.remove(0);
    let sandbox = joined_sandbox(&app.id);
    agent.wait_pool(1).await;

    docker.stop(&sandbox, Duration::from_secs(10)).await.unwrap();
    // sleep ignores SIGTERM as PID 1: the 1 s grace period ends in SIGKILL.
    let failed = api.wait_for(&pod.metadata.uid, "Failed", WAIT, |p| p.status.phase == PodPhase::Failed).await;
    assert!(
        matches!(failed.status.container_statuses[0].state, ContainerState::Terminated { exit_code: 137, .. }),
        "{:?}",
        failed.status.container_statuses[0]
    );
    let left = containers_of(docker.as_ref(), &pod.metadata.uid).await;
    assert_eq!(left.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), vec![app.id.as_str()], "kept for its logs, not replaced");
    wait_gone(&docker, &sandbox, "the dead sandbox").await;
    assert!(docker.inspect(&sandbox_name(&pod)).await.unwrap().is_none(), "no new sandbox for a pod that ended");
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_told_to_remove_its_containers_on_exit_leaves_none() {
    let docker = docker().await;
    minimal_image(&docker).await;
    let node = unique("node");
    let _cleanup = Cleanup(node.clone());
    let api = Api::start().await;
    let agent = TestAgent::start_configured(&node, docker.clone(), api.clone(), 1, |c| c.remove_containers_on_exit = true).await;
    agent.wait_pool(1).await;
    let pod = api.add_pod(&node, "web", spec(vec![container("web", &["sleep", "3600"])], "Always")).await;
    api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    agent.wait_pool(1).await;
    let before = docker.list(&[(LABEL_NODE, node.as_str())]).await.unwrap();
    assert!(before.len() >= 3, "the pod's container, its sandbox and a warm one: {before:?}");
    agent.stop().await;
    let after = docker.list(&[(LABEL_NODE, node.as_str())]).await.unwrap();
    assert!(after.is_empty(), "left behind: {after:?}");
}

/// The IPv4 address of `eth0` in a container, as `ip` inside it shows it: read, never contacted.
fn sandbox_address(id: &str) -> String {
    let output = std::process::Command::new("docker").args(["exec", id, "ip", "-4", "-o", "addr", "show", "dev", "eth0"]).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    let mut words = text.split_whitespace().skip_while(|w| *w != "inet").skip(1);
    let address = words.next().unwrap_or_else(|| panic!("container {id} has no IPv4 address on eth0: {text:?}"));
    address.split('/').next().unwrap().to_string()
}

/// The host's end of a container's veth: the interface whose index is its `eth0`'s peer.
fn host_veth(id: &str) -> String {
    let output = std::process::Command::new("docker").args(["exec", id, "cat", "/sys/class/net/eth0/iflink"]).output().unwrap();
    let peer = String::from_utf8_lossy(&output.stdout).trim().to_string();
    std::fs::read_dir("/sys/class/net")
        .unwrap()
        .filter_map(|e| e.ok())
        .find(|e| std::fs::read_to_string(e.path().join("ifindex")).is_ok_and(|index| index.trim() == peer))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .unwrap_or_else(|| panic!("no host interface is the peer ({peer:?}) of {id}'s eth0"))
}

fn interface_exists(name: &str) -> bool {
    std::path::Path::new("/sys/class/net").join(name).exists()
}

/// Who holds `ip` in host-local's leases of the pod network: a container id.
fn lease_holder(ip: &str) -> Option<String> {
    let path = std::path::Path::new("/var/lib/cni/networks").join(agent::network::NETWORK_NAME).join(ip);
    std::fs::read_to_string(path).ok().map(|text| text.lines().next().unwrap_or_default().trim().to_string())
}

fn in_pod_subnet(ip: &str) -> bool {
    let subnet = Subnet::parse(agent::network::DEFAULT_SUBNET).unwrap();
    Subnet::parse(&format!("{ip}/32")).is_some_and(|address| subnet.overlaps(&address))
}

async fn wait_until(what: &str, check: impl Fn() -> bool) {
    poll(WAIT, what, || async { check().then_some(()) }).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_gets_its_address_from_cni_in_a_sandbox_docker_gave_no_network() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node_with_pool(0).await;
    let pod = api.add_pod(&node, "cni", spec(vec![container("main", &["sleep", "3600"])], "Always")).await;
    let running = api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    let app = containers_of(docker.as_ref(), &pod.metadata.uid).await.remove(0);
    let sandbox = joined_sandbox(&app.id);
    assert_eq!(docker_inspect(&sandbox, "{{.Config.NetworkDisabled}}"), "true", "Docker set up no network for the sandbox");
    assert_eq!(docker_inspect(&sandbox, "{{len .NetworkSettings.Networks}}"), "0");
    let ip = running.status.pod_ip.clone();
    assert!(in_pod_subnet(&ip), "the pod's address {ip} is from the pod subnet {}", agent::network::DEFAULT_SUBNET);
    assert_eq!(sandbox_address(&sandbox), ip, "the address CNI gave the sandbox's eth0");
    assert_eq!(lease_holder(&ip).as_deref(), Some(sandbox.as_str()), "host-local leased it to the sandbox");
    assert_eq!(api.node(&node).await.unwrap().status.node_info.pod_network, "cni");
    // No host ports: no portmap, and no rule of its own (no per-pod masquerade or firewall).
    for table in ["nat", "filter"] {
        let rules = iptables_save(table);
        assert!(!rules.contains(&sandbox) && !rules.contains(&format!("{ip}/32")), "the {table} table has rules for the pod: {rules}");
    }
    assert!(node_rules_present(), "the node-wide rules masquerade for and accept every pod");
    agent.stop().await;
}

/// `iptables-save` of one table.
fn iptables_save(table: &str) -> String {
    let output = std::process::Command::new("iptables-save").args(["-t", table]).output().unwrap();
    assert!(output.status.success(), "iptables-save -t {table}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The pod network's node-wide rules, as the agent makes them for the default subnet.
fn node_rules() -> Vec<agent::iptables::Rule> {
    agent::iptables::rules(&Subnet::parse(agent::network::DEFAULT_SUBNET).unwrap(), agent::network::BRIDGE)
}

fn node_rules_present() -> bool {
    node_rules().iter().all(|rule| {
        let check = std::process::Command::new("iptables").args(["-w", "-t", rule.table, "-C", rule.chain]).args(&rule.spec).output();
        check.unwrap().status.success()
    })
}

/// How many times `rule` is in its chain.
fn copies(rule: &agent::iptables::Rule) -> usize {
    let listed = std::process::Command::new("iptables").args(["-w", "-t", rule.table, "-S", rule.chain]).output().unwrap();
    String::from_utf8_lossy(&listed.stdout).lines().filter(|line| format!("-t {} {line}", rule.table) == rule.to_string()).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_wide_rules_are_installed_once_and_put_back_when_removed() {
    let DockerNode { node: _node, api: _api, agent, cleanup: _cleanup, .. } = docker_node_with_pool(0).await;
    // Agents share the rules: each starts, and sweeps, without adding a second copy.
    let masquerade = node_rules().remove(0);
    assert_eq!(masquerade.chain, "POSTROUTING");
    assert_eq!(copies(&masquerade), 1, "{}", iptables_save("nat"));
    // Removed behind the agent's back (as a host firewall's reload would): the next sweep
    // puts it back. Nothing here sends a packet that needs it.
    let removed = std::process::Command::new("iptables")
        .args(["-w", "-t", masquerade.table, "-D", masquerade.chain])
        .args(&masquerade.spec)
        .output()
        .unwrap();
    assert!(removed.status.success(), "{}", String::from_utf8_lossy(&removed.stderr));
    wait_until("the masquerade rule to be back", || copies(&masquerade) == 1).await;
    assert!(node_rules_present());
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pods_on_a_node_each_get_their_own_address_and_deletion_frees_it_with_the_veth() {
    // A warm sandbox for one, a new one for the other: both paths network the same way.
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node_with_pool(1).await;
    let first = api.add_pod(&node, "first", spec(vec![container("main", &["sleep", "3600"])], "Always")).await;
    let second = api.add_pod(&node, "second", spec(vec![container("main", &["sleep", "3600"])], "Always")).await;
    let mut pods = Vec::new();
    for pod in [&first, &second] {
        let running = api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
        let app = containers_of(docker.as_ref(), &pod.metadata.uid).await.remove(0);
        let sandbox = joined_sandbox(&app.id);
        assert!(in_pod_subnet(&running.status.pod_ip), "{}", running.status.pod_ip);
        assert_eq!(sandbox_address(&sandbox), running.status.pod_ip);
        pods.push((running.status.pod_ip.clone(), sandbox.clone(), host_veth(&sandbox)));
    }
    assert_ne!(pods[0].0, pods[1].0, "two pods, two addresses");
    assert_ne!(pods[0].2, pods[1].2, "two veths");

    let (ip, sandbox, veth) = pods.remove(0);
    assert!(interface_exists(&veth));
    api.delete_pod(&first.metadata.uid).await;
    wait_gone(&docker, &sandbox, "the sandbox of a deleted pod").await;
    wait_until(&format!("the veth {veth} of a deleted pod to go"), || !interface_exists(&veth)).await;
    wait_until(&format!("the lease on the address {ip} of a deleted pod to end"), || {
        lease_holder(&ip).as_deref() != Some(sandbox.as_str())
    })
    .await;
    assert!(!common::state_dir(&node).join("netns").join(&sandbox).exists(), "the kept namespace is let go");
    let (other_ip, other_sandbox, other_veth) = pods.remove(0);
    assert!(interface_exists(&other_veth), "the other pod keeps its network");
    assert_eq!(lease_holder(&other_ip).as_deref(), Some(other_sandbox.as_str()));
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_agent_keeps_pod_addresses_and_frees_those_of_sandboxes_removed_while_it_was_away() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node_with_pool(0).await;
    let kept = api.add_pod(&node, "kept", spec(vec![container("main", &["sleep", "3600"])], "Always")).await;
    let lost = api.add_pod(&node, "lost", spec(vec![container("main", &["sleep", "3600"])], "Always")).await;
    let kept_ip = api.wait_for(&kept.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await.status.pod_ip;
    let lost_ip = api.wait_for(&lost.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await.status.pod_ip;
    let kept_sandbox = joined_sandbox(&containers_of(docker.as_ref(), &kept.metadata.uid).await[0].id);
    let lost_app = containers_of(docker.as_ref(), &lost.metadata.uid).await.remove(0);
    let lost_sandbox = joined_sandbox(&lost_app.id);
    let lost_veth = host_veth(&lost_sandbox);
    agent.stop().await;

    // While the agent is away, the second pod and its containers are removed from the engine.
    api.forget_pod(&lost.metadata.uid).await;
    docker.remove(&lost_app.id).await.unwrap();
    docker.remove(&lost_sandbox).await.unwrap();
    assert!(interface_exists(&lost_veth), "the kept namespace holds the veth of a sandbox that is gone");

    let agent = TestAgent::start_with_pool(&node, docker.clone(), api.clone(), 0).await;
    wait_until("the veth of a sandbox removed while the agent was away to go", || !interface_exists(&lost_veth)).await;
    wait_until("the lease on the address of a sandbox removed while the agent was away to end", || {
        lease_holder(&lost_ip).as_deref() != Some(lost_sandbox.as_str())
    })
    .await;
    // Two resyncs, each handed to the pod's worker and followed by a sweep: chances enough
    // to give the other pod a new sandbox or address.
    api.wait_lists(2).await;
    let now = api.pod(&kept.metadata.uid).await;
    assert_eq!((now.status.phase, now.status.pod_ip.as_str()), (PodPhase::Running, kept_ip.as_str()), "the same address");
    assert_eq!(joined_sandbox(&containers_of(docker.as_ref(), &kept.metadata.uid).await[0].id), kept_sandbox, "the same sandbox");
    assert_eq!(sandbox_address(&kept_sandbox), kept_ip);
    assert_eq!(lease_holder(&kept_ip).as_deref(), Some(kept_sandbox.as_str()));
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_removed_behind_the_agents_back_is_replaced_and_its_network_swept() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node_with_pool(0).await;
    let pod = api.add_pod(&node, "swept", spec(vec![container("main", &["sleep", "3600"])], "Always")).await;
    let ip = api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await.status.pod_ip;
    let sandbox = joined_sandbox(&containers_of(docker.as_ref(), &pod.metadata.uid).await[0].id);
    let veth = host_veth(&sandbox);
    docker.remove(&sandbox).await.unwrap();
    let again = api
        .wait_for(&pod.metadata.uid, "running in a new sandbox", WAIT, |p| {
            p.status.phase == PodPhase::Running && p.status.container_statuses.first().is_some_and(|c| c.restart_count == 1 && c.ready)
        })
        .await;
    let new_sandbox = joined_sandbox(&containers_of(docker.as_ref(), &pod.metadata.uid).await[0].id);
    assert_ne!(new_sandbox, sandbox);
    assert_eq!(sandbox_address(&new_sandbox), again.status.pod_ip);
    // The orphan sweep of the next resync takes the old network down.
    wait_until("the veth of the removed sandbox to go", || !interface_exists(&veth)).await;
    wait_until("the lease on the address of the removed sandbox to end", || lease_holder(&ip).as_deref() != Some(sandbox.as_str())).await;
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_under_another_cluster_id_removes_the_old_warm_pool() {
    let DockerNode { docker, node, api, agent, cleanup: _cleanup } = docker_node_with_pool(2).await;
    let old: Vec<String> = warm_pool(&docker, &node, &api.cluster, 2).await.into_iter().map(|s| s.id).collect();
    agent.stop().await;
    assert_eq!(sandboxes_of(&docker, &node, &api.cluster).await.len(), 2, "a clean stop leaves the pool");

    // A fresh store (demo.sh --in-memory): the same node joins a new cluster id.
    let fresh = Api::start().await;
    let agent = TestAgent::start_with_pool(&node, docker.clone(), fresh.clone(), 2).await;
    warm_pool(&docker, &node, &fresh.cluster, 2).await;
    for id in &old {
        wait_gone(&docker, id, "a warm sandbox of the old cluster id").await;
    }
    assert!(sandboxes_of(&docker, &node, &api.cluster).await.is_empty());
    agent.stop().await;
}
