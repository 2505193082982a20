//! `sheepctl image push` against a real registry (distribution's `docker-registry` on a free
//! loopback port, signing in with the server's tokens) and the real Docker engine.

use assert_cmd::Command;
use bollard::Docker;
use bollard::query_parameters::{RemoveImageOptions, TagImageOptionsBuilder};
use server::auth::Tokens;
use shepherd_testing::{TestRegistry, registry_available};

const ADMIN_TOKEN: &str = "test-admin-token";

fn sheepctl() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sheepctl"));
    command.env_remove("SHEPHERD_TOKEN").env_remove("SHEPHERD_REGISTRY");
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_image_is_pushed_to_the_registry_with_the_admin_token() {
    if !registry_available("a_local_image_is_pushed_to_the_registry_with_the_admin_token") {
        return;
    }
    let registry = TestRegistry::start(Tokens::parse(&format!("{ADMIN_TOKEN} admin\n"), "test tokens").unwrap()).await;
    let docker = Docker::connect_with_local_defaults().unwrap().negotiate_version().await.expect("a running Docker engine");
    agent::image::bootstrap(&docker, "minimal", std::path::Path::new(agent::image::DEFAULT_BUSYBOX), false)
        .await
        .expect("the minimal image (apt-get install busybox-static)");
    let local = format!("shepherd-test-push-{}", std::process::id());
    docker.tag_image("minimal", Some(TagImageOptionsBuilder::default().repo(&local).tag("7").build())).await.unwrap();

    // Without a token the registry wants a sign-in, and sheepctl says what it answered.
    let refused = sheepctl().args(["image", "push", &format!("{local}:7"), "--registry", &registry.address]).output().unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with(&format!("error: failed to push {}/{local}:7: ", registry.address)), "{stderr}");
    assert!(stderr.contains("no basic auth credentials"), "{stderr}");

    let pushed = sheepctl()
        .args(["--token", ADMIN_TOKEN, "image", "push", &format!("{local}:7")])
        .env("SHEPHERD_REGISTRY", &registry.address)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&pushed.stdout);
    assert!(pushed.status.success(), "{}", String::from_utf8_lossy(&pushed.stderr));
    assert_eq!(stdout, format!("pushed {}/{local}:7\n", registry.address));

    // The registry itself lists the tag.
    let tags: serde_json::Value = reqwest::Client::new()
        .get(format!("http://{}/v2/{local}/tags/list", registry.address))
        .basic_auth("admin", Some(ADMIN_TOKEN))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(tags["tags"], serde_json::json!(["7"]), "{tags}");
    for tag in [format!("{local}:7"), format!("{}/{local}:7", registry.address)] {
        let _ = docker.remove_image(&tag, None::<RemoveImageOptions>, None).await;
    }
}
