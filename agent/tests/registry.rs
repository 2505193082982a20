//! Pods whose image is only in the cluster's registry (`shepherd registry`, distribution's
//! `docker-registry` on a free loopback port): the agent pulls it through the engine, shows
//! ErrImagePull then ImagePullBackOff while the registry is down and starts the pod by
//! itself once it is back, and signs in as its node where the registry wants users.

mod common;

use std::sync::Arc;
use std::time::Duration;

use agent::runtime::{ContainerRuntime, DockerRuntime};
use bollard::query_parameters::{RemoveImageOptions, TagImageOptionsBuilder};
use common::{Api, Cleanup, TestAgent, container, docker, minimal_image, spec, unique};
use server::auth::Tokens;
use shared::model::{ContainerState, Pod, PodPhase};
use shepherd_image::RegistryLogin;
use shepherd_testing::{TestRegistry, registry_available};

const WAIT: Duration = Duration::from_secs(30);

/// An image that exists only in `registry`: `minimal` under a name of its own, pushed there
/// and then untagged here, so that a pod can run it only by pulling it. Returns its reference.
async fn registry_only_image(docker: &DockerRuntime, registry: &str, login: Option<&RegistryLogin>) -> String {
    minimal_image(docker).await;
    let local = unique("shepherd-test-pull");
    let options = TagImageOptionsBuilder::default().repo(&local).tag("1").build();
    docker.client().tag_image("minimal", Some(options)).await.expect("tag minimal");
    let pushed = shepherd_image::push(docker.client(), &format!("{local}:1"), registry, login).await.expect("push to the test registry");
    for tag in [format!("{local}:1"), pushed.clone()] {
        untag(docker, &tag).await;
    }
    assert!(!docker.has_image(&pushed).await.unwrap(), "{pushed} must not be on the machine before the pod pulls it");
    pushed
}

/// Removes one tag (the image stays while `minimal` names it).
async fn untag(docker: &DockerRuntime, image: &str) {
    let _ = docker.client().remove_image(image, None::<RemoveImageOptions>, None).await;
}

fn waiting_reason(pod: &Pod) -> Option<(&str, &str)> {
    match &pod.status.container_statuses.first()?.state {
        ContainerState::Waiting { reason, message } => Some((reason, message)),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_runs_an_image_that_only_the_registry_has() {
    if !registry_available("a_pod_runs_an_image_that_only_the_registry_has") {
        return;
    }
    let registry = TestRegistry::start(Tokens::default()).await;
    let docker = docker().await;
    let image = registry_only_image(&docker, &registry.address, None).await;
    let node = unique("node");
    let _cleanup = Cleanup(node.clone());
    let api = Api::start().await;
    let agent = TestAgent::start(&node, docker.clone(), api.clone()).await;

    let mut main = container("main", &["sleep", "3600"]);
    main.image = image.clone();
    let pod = api.add_pod(&node, "pulled", spec(vec![main], "Always")).await;
    let running = api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    assert_eq!(running.status.container_statuses[0].image, image);
    let events = api.events_for("pulled").await;
    let pulled = events.iter().find(|e| e.reason == "Pulled").expect("a Pulled event");
    assert!(pulled.message.starts_with(&format!("Successfully pulled image {image:?}")), "{}", pulled.message);
    agent.stop().await;
    untag(&docker, &image).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_backs_off_while_the_registry_is_down_and_runs_once_it_is_back() {
    if !registry_available("a_pod_backs_off_while_the_registry_is_down_and_runs_once_it_is_back") {
        return;
    }
    let mut registry = TestRegistry::start(Tokens::default()).await;
    let docker = docker().await;
    let image = registry_only_image(&docker, &registry.address, None).await;
    registry.stop().await;
    let node = unique("node");
    let _cleanup = Cleanup(node.clone());
    let api = Api::start().await;
    let agent = TestAgent::start(&node, docker.clone(), api.clone()).await;

    let mut main = container("main", &["sleep", "3600"]);
    main.image = image.clone();
    let pod = api.add_pod(&node, "outage", spec(vec![main], "Always")).await;
    let uid = pod.metadata.uid.clone();
    let is = |reason: &'static str| move |p: &Pod| waiting_reason(p).is_some_and(|(r, _)| r == reason);
    let (first, failed) = api.wait_for_version(&uid, 0, "ErrImagePull", WAIT, is("ErrImagePull")).await;
    let (_, message) = waiting_reason(&failed).unwrap();
    // The engine's own words: the registry's port refuses connections.
    assert!(message.contains(&registry.address) && message.contains("connection refused"), "{message}");
    let (_, backing_off) = api.wait_for_version(&uid, first, "ImagePullBackOff", WAIT, is("ImagePullBackOff")).await;
    let (_, message) = waiting_reason(&backing_off).unwrap();
    assert!(message.starts_with(&format!("Back-off pulling image {image:?}")) && message.contains("connection refused"), "{message}");
    assert_eq!(backing_off.status.phase, PodPhase::Pending);
    let events = api.events_for("outage").await;
    for reason in ["Failed", "BackOff"] {
        let event = events.iter().find(|e| e.reason == reason).unwrap_or_else(|| panic!("a {reason} event in {events:#?}"));
        assert_eq!(event.type_, "Warning");
        assert!(event.message.contains(&image), "{reason}: {}", event.message);
    }

    registry.resume().await;
    api.wait_for(&uid, "Running once the registry is back", WAIT, |p| p.status.phase == PodPhase::Running).await;
    agent.stop().await;
    untag(&docker, &image).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_with_users_lets_in_the_node_that_signs_in_with_its_token() {
    if !registry_available("a_registry_with_users_lets_in_the_node_that_signs_in_with_its_token") {
        return;
    }
    let node = unique("node");
    let node_token = unique("node-token");
    let tokens = Tokens::parse(&format!("test-admin-token admin\n{node_token} node {node}\n"), "test tokens").unwrap();
    let registry = TestRegistry::start(tokens).await;
    let admin = RegistryLogin { registry: registry.address.clone(), username: "admin".into(), password: "test-admin-token".into() };
    let plain = docker().await;
    let image = registry_only_image(&plain, &registry.address, Some(&admin)).await;
    let _cleanup = Cleanup(node.clone());
    let api = Api::start().await;

    // Without a sign-in the registry refuses the pull, and says so.
    let agent = TestAgent::start(&node, plain.clone(), api.clone()).await;
    let mut main = container("main", &["sleep", "3600"]);
    main.image = image.clone();
    let refused = api.add_pod(&node, "anonymous", spec(vec![main.clone()], "Always")).await;
    let failed =
        api.wait_for(&refused.metadata.uid, "ErrImagePull", WAIT, |p| waiting_reason(p).is_some_and(|(r, _)| r == "ErrImagePull")).await;
    let (_, message) = waiting_reason(&failed).unwrap();
    assert!(message.contains("no basic auth credentials"), "{message}");
    agent.stop().await;
    api.delete_pod(&refused.metadata.uid).await;

    // The node's own name and token: the pod runs, and no event carries the token.
    let login = RegistryLogin { registry: registry.address.clone(), username: node.clone(), password: node_token.clone() };
    let signed_in: Arc<dyn ContainerRuntime> = Arc::new(DockerRuntime::connect().await.unwrap().with_login(Some(login)));
    let agent = TestAgent::start(&node, signed_in, api.clone()).await;
    let pod = api.add_pod(&node, "signed-in", spec(vec![main], "Always")).await;
    api.wait_for(&pod.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    let events = api.events_for("signed-in").await;
    assert!(events.iter().all(|e| !e.message.contains(&node_token)), "{events:#?}");
    agent.stop().await;
    untag(&plain, &image).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pull_policy_decides_whether_a_present_image_is_pulled_again() {
    if !registry_available("the_pull_policy_decides_whether_a_present_image_is_pulled_again") {
        return;
    }
    let mut registry = TestRegistry::start(Tokens::default()).await;
    let docker = docker().await;
    let gone = registry_only_image(&docker, &registry.address, None).await;
    // On the machine and in the registry; then the registry goes away.
    let present = shepherd_image::push(docker.client(), "minimal", &registry.address, None).await.unwrap();
    registry.stop().await;
    let node = unique("node");
    let _cleanup = Cleanup(node.clone());
    let api = Api::start().await;
    let agent = TestAgent::start(&node, docker.clone(), api.clone()).await;

    let pod_with = |image: &str, policy: &str| {
        let mut main = container("main", &["sleep", "3600"]);
        main.image = image.to_string();
        main.image_pull_policy = policy.to_string();
        spec(vec![main], "Always")
    };
    let if_not_present = api.add_pod(&node, "if-not-present", pod_with(&present, "IfNotPresent")).await;
    let always = api.add_pod(&node, "always", pod_with(&present, "Always")).await;
    let never = api.add_pod(&node, "never", pod_with(&gone, "Never")).await;
    let waits = |reason: &'static str| move |p: &Pod| waiting_reason(p).is_some_and(|(r, _)| r == reason);

    api.wait_for(&if_not_present.metadata.uid, "Running", WAIT, |p| p.status.phase == PodPhase::Running).await;
    let events = api.events_for("if-not-present").await;
    assert!(events.iter().any(|e| e.reason == "Pulled" && e.message.contains("already present on machine")), "{events:#?}");
    // Always asks the registry even for an image the engine has; it is down.
    let failed = api.wait_for(&always.metadata.uid, "ErrImagePull", WAIT, waits("ErrImagePull")).await;
    assert!(waiting_reason(&failed).unwrap().1.contains("connection refused"), "{:?}", failed.status);
    let refused = api.wait_for(&never.metadata.uid, "ErrImageNeverPull", WAIT, waits("ErrImageNeverPull")).await;
    assert_eq!(waiting_reason(&refused).unwrap().1, format!("Container image {gone:?} is not present with pull policy of Never"));
    assert!(api.events_for("never").await.iter().all(|e| e.reason != "Pulling"), "Never never pulls");
    agent.stop().await;
    untag(&docker, &present).await;
}
