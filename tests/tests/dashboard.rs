//! The real-browser end-to-end test: the `shepherd` server with its dashboard, a node agent
//! on the real Docker engine, and headless chromium. A pod applied through the dashboard's
//! form answers 201 Pending, reaches Running, and its detail page shows the scheduler's
//! decision table and runs a command in the container. The simulator, side by side, shows both profiles' tables whole. The
//! Deployments page draws a rollout on a simulated node and its buttons pause, resume and
//! undo it. The cluster page's pens show what a node's pods use beside what they request, and
//! "usage unknown" for a node whose agent does not answer. Screenshots land in `target/e2e/`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent::runtime::{ContainerRuntime, LABEL_NODE, LABEL_POD};
use agent::{AgentConfig, RuntimeChoice};
use server::Config;
use shared::model::{Deployment, Kind, Node, Pod, Resource};
use shared::quantity::{format_cpu, format_memory};
use shepherd_client::DeleteOptions;
use shepherd_testing::{TestServer, eventually};
use tests::Browser;
use tokio_util::sync::CancellationToken;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn shots() -> PathBuf {
    workspace().join("target/e2e")
}

/// The reference pod, renamed, with a short grace period so that cleanup is quick.
fn manifest(name: &str) -> String {
    let reference = std::fs::read_to_string(workspace().join("examples/pod.json")).expect("examples/pod.json");
    let mut pod: serde_json::Value = serde_json::from_str(&reference).expect("examples/pod.json is JSON");
    pod["metadata"]["name"] = name.into();
    pod["spec"]["termination_grace_period_seconds"] = 1.into();
    serde_json::to_string_pretty(&pod).unwrap()
}

/// The reference deployment (3 replicas of `minimal`), renamed.
fn deployment(name: &str) -> Deployment {
    let reference = std::fs::read_to_string(workspace().join("examples/deployment.json")).expect("examples/deployment.json");
    let mut deployment: Deployment = serde_json::from_str(&reference).expect("examples/deployment.json is a Deployment");
    deployment.metadata.name = name.into();
    deployment
}

async fn text_of(browser: &Browser, css: &str, shot: &Path) -> String {
    browser.wait_for(css, Duration::from_secs(10), shot).await.text().await.unwrap_or_else(|e| panic!("cannot read {css}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_applied_in_the_dashboard_runs_and_explains_its_node() {
    let dist = workspace().join("dist");
    assert!(
        dist.join("index.html").is_file() && dist.join("frontend_bg.wasm").is_file(),
        "the dashboard is not built in {}: run `cargo xtask frontend` first (scripts/test.sh does)",
        dist.display()
    );
    let docker = agent::runtime::DockerRuntime::connect()
        .await
        .unwrap_or_else(|e| panic!("this test needs a running Docker engine (apt-get install docker.io, then start dockerd): {e}"));
    agent::image::bootstrap(docker.client(), "minimal", Path::new(agent::image::DEFAULT_BUSYBOX), false)
        .await
        .unwrap_or_else(|e| panic!("cannot make the minimal image (apt-get install busybox-static): {e}"));

    let shutdown = CancellationToken::new();
    let server = TestServer::start(Config { dashboard_dir: Some(dist), ..Config::in_memory() }).await;
    let url = server.url.clone();
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let node = format!("browser-e2e-{suffix}");
    let mut agent_config = AgentConfig::new(&url);
    agent_config.node_name = node.clone();
    agent_config.runtime = RuntimeChoice::Docker;
    agent_config.listen = "127.0.0.1:0".parse().unwrap();
    let agent = tokio::spawn(agent::run(agent_config, shutdown.clone()));

    let pod = format!("sheep-{suffix}");
    let failure = shots().join("dashboard-failure.png");
    let browser = Browser::start().await;
    browser.client.goto(&format!("{url}/#/apply")).await.expect("the dashboard opens");
    browser.wait_for("[data-testid=apply-editor]", Duration::from_secs(30), &failure).await;
    // Type the manifest the way a paste does: set the text and fire one input event.
    browser
        .client
        .execute(
            "const editor = document.querySelector('[data-testid=apply-editor]');
             editor.value = arguments[0];
             editor.dispatchEvent(new Event('input', { bubbles: true }));",
            vec![manifest(&pod).into()],
        )
        .await
        .expect("the manifest is typed");
    browser.wait_for("[data-testid=apply-check][data-state=ready]", Duration::from_secs(10), &failure).await;
    browser.wait_for("[data-testid=apply-submit]", Duration::from_secs(5), &failure).await.click().await.expect("Apply is clicked");

    // The answer comes at once: 201 with phase Pending and no node yet.
    let headline = text_of(&browser, "[data-testid=apply-result][data-outcome=created] h2", &failure).await;
    assert!(headline.starts_with("201 Created"), "{headline}");
    let answer = text_of(&browser, "[data-testid=apply-answer]", &failure).await;
    assert!(answer.starts_with("phase Pending, node_name \"\""), "the 201 answer: {answer}");

    // Then the watch stream moves the pod on to Running on the Docker node.
    browser.wait_for("[data-testid=apply-tracker][data-stage=Running]", Duration::from_secs(60), &failure).await;
    browser.screenshot(&shots().join("dashboard-apply.png")).await;
    browser.wait_for("[data-testid=apply-open-detail]", Duration::from_secs(5), &failure).await.click().await.expect("detail opens");

    browser.wait_for("[data-testid=pod-detail][data-stage=Running]", Duration::from_secs(10), &failure).await;
    let table = browser.wait_for(&format!("[data-testid=decision-table][data-selected='{node}']"), Duration::from_secs(10), &failure).await;
    let rows = table.find_all(fantoccini::Locator::Css("[data-testid=decision-row]")).await.expect("decision rows");
    assert_eq!(rows.len(), 1, "one node, one row");
    assert_eq!(rows[0].attr("data-node").await.unwrap().as_deref(), Some(node.as_str()));
    assert_eq!(rows[0].attr("data-selected").await.unwrap().as_deref(), Some("true"));
    // The drawn timeline: a bar for each of the five steps a running pod has reached, in order.
    browser.wait_for("[data-testid=timeline-chart] [data-testid=timeline-bar][data-step=Running]", Duration::from_secs(10), &failure).await;
    let bars =
        browser.client.find_all(fantoccini::Locator::Css("[data-testid=timeline-chart] [data-testid=timeline-bar]")).await.expect("bars");
    let mut steps = Vec::new();
    for bar in &bars {
        steps.push(bar.attr("data-step").await.unwrap().unwrap_or_default());
    }
    assert_eq!(steps, ["Created", "Scheduled", "Pulled", "Started", "Running"]);
    let running_at: i64 = bars[4].attr("data-t-plus-ms").await.unwrap().unwrap().parse().unwrap();
    assert!(running_at > 0, "Running comes after Created: T+{running_at}ms");
    browser.screenshot(&shots().join("dashboard-pod-detail.png")).await;

    // The command box runs a command in the container, as kubectl exec: its output, stderr
    // apart, and its exit code.
    browser.wait_for("[data-testid=exec-command]", Duration::from_secs(10), &failure).await;
    browser
        .client
        .execute(
            "const input = document.querySelector('[data-testid=exec-command]');
             input.value = arguments[0];
             input.dispatchEvent(new Event('input', { bubbles: true }));",
            vec!["echo hello | tr a-z A-Z; echo oops >&2; exit 3".into()],
        )
        .await
        .expect("the command is typed");
    browser.wait_for("[data-testid=exec-run]", Duration::from_secs(5), &failure).await.click().await.expect("Run is clicked");
    browser.wait_for("[data-testid=exec-exit][data-code='3']", Duration::from_secs(20), &failure).await;
    let output = text_of(&browser, "[data-testid=exec-output]", &failure).await;
    assert!(output.contains("HELLO") && output.contains("oops"), "{output}");
    let stderr = text_of(&browser, "[data-testid=exec-output] .stderr", &failure).await;
    assert_eq!(stderr.trim(), "oops");
    browser.screenshot(&shots().join("dashboard-command-box.png")).await;
    browser.close().await;

    // The container is real; clean it up through the API like a user would.
    server.client.delete(Kind::Pod, "default", &pod, &DeleteOptions::default()).await.expect("delete the pod");
    // The running pod is Terminating until the agent has stopped its container (1 s grace)
    // and confirmed; only then does the API forget it.
    eventually(&server.client, Duration::from_secs(10), "the pod to leave the API after it was deleted", || async {
        server.client.get_object(Kind::Pod, "default", &pod).await.is_err_and(|e| e.is_not_found()).then_some(())
    })
    .await;
    let remaining = docker.list(&[(LABEL_POD, pod.as_str()), (LABEL_NODE, node.as_str())]).await.expect("list containers").len();
    assert_eq!(remaining, 0, "the pod left the API before its container was gone");
    shutdown.cancel();
    agent.await.expect("the agent task").expect("the agent stops cleanly");
    server.stop().await;
}

/// How far each of the simulator's tables reaches past the pane it sits in, in CSS pixels
/// (0 when it fits): the table's right edge beyond the pane's, or its scroll box's hidden width.
const OVERFLOW_OF_SIMULATOR_TABLES: &str = "
    const panes = [...document.querySelectorAll('.sim-decision, .sim-history')];
    return panes.map(pane => {
        const table = pane.querySelector('table');
        if (!table) { return [pane.className, -1]; }
        const scroll = table.closest('.table-scroll');
        const past = table.getBoundingClientRect().right - pane.getBoundingClientRect().right;
        const hidden = scroll ? scroll.scrollWidth - scroll.clientWidth : 0;
        return [pane.className, Math.max(0, Math.ceil(past), hidden)];
    });";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn side_by_side_the_simulators_tables_fit_their_panes() {
    let dist = workspace().join("dist");
    assert!(dist.join("index.html").is_file(), "the dashboard is not built in {}: run `cargo xtask frontend` first", dist.display());
    let server = TestServer::start(Config { dashboard_dir: Some(dist), ..Config::in_memory() }).await;
    let failure = shots().join("simulator-failure.png");
    let browser = Browser::start().await;
    browser.client.goto(&format!("{}/#/simulator", server.url)).await.expect("the dashboard opens");
    // The workshop's steps: 3 nodes, side by side, 5 × web, a step, then a pod per step
    // until node-3's taint has shown in both tables.
    browser.wait_for("[data-testid=sim-small]", Duration::from_secs(30), &failure).await.click().await.expect("3 nodes");
    browser.wait_for("[data-testid=sim-show-both]", Duration::from_secs(5), &failure).await.click().await.expect("side by side");
    browser.wait_for("[data-testid=sim-add-pods]", Duration::from_secs(5), &failure).await.click().await.expect("add pods");
    let step = browser.wait_for("[data-testid=sim-step]", Duration::from_secs(5), &failure).await;
    for _ in 0..5 {
        step.click().await.expect("step");
    }
    browser.wait_for(".sim-columns.two .sim-decision [data-testid=decision-table]", Duration::from_secs(10), &failure).await;
    let tables = browser.client.find_all(fantoccini::Locator::Css(".sim-decision [data-testid=decision-table]")).await.expect("tables");
    assert_eq!(tables.len(), 2, "one decision table per profile, side by side");
    browser.client.execute("document.querySelector('.sim-decision').scrollIntoView()", vec![]).await.expect("scrolled");
    browser.screenshot(&shots().join("simulator-side-by-side.png")).await;
    let overflow = browser.client.execute(OVERFLOW_OF_SIMULATOR_TABLES, vec![]).await.expect("the tables are measured");
    let overflow: Vec<(String, i64)> = serde_json::from_value(overflow).expect("pairs of pane and pixels");
    assert_eq!(overflow.len(), 4, "two decision tables and two decision lists: {overflow:?}");
    assert!(overflow.iter().all(|(_, px)| *px == 0), "a table reaches past its pane (pixels): {overflow:?}");
    browser.close().await;
    server.stop().await;
}

/// Clicks the button `css` once it is there (a button the page draws anew after each change).
async fn click(browser: &Browser, css: &str, shot: &Path) {
    browser.wait_for(css, Duration::from_secs(10), shot).await.click().await.unwrap_or_else(|e| panic!("cannot click {css}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deployments_page_draws_a_rollout_and_pauses_resumes_and_undoes_it() {
    let dist = workspace().join("dist");
    assert!(dist.join("index.html").is_file(), "the dashboard is not built in {}: run `cargo xtask frontend` first", dist.display());
    let shutdown = CancellationToken::new();
    let server = TestServer::start(Config { dashboard_dir: Some(dist), ..Config::in_memory() }).await;
    let mut agent_config = AgentConfig::new(&server.url);
    agent_config.node_name = "rollout-node".into();
    agent_config.runtime = RuntimeChoice::Simulated { start_delay: Duration::from_millis(300) };
    agent_config.listen = "127.0.0.1:0".parse().unwrap();
    let agent = tokio::spawn(agent::run(agent_config, shutdown.clone()));
    let client = &server.client;
    let created = client.create(&deployment("shop")).await.expect("the deployment is created");
    let first_image = created.spec.template.spec.containers[0].image.clone();
    eventually(client, Duration::from_secs(30), "3 available replicas of shop", || async {
        client.get::<Deployment>("default", "shop").await.ok().filter(|d| d.status.available_replicas == 3)
    })
    .await;

    let failure = shots().join("deployments-failure.png");
    let browser = Browser::start().await;
    browser.client.goto(&format!("{}/#/deployments", server.url)).await.expect("the dashboard opens");
    let card = "[data-testid=deployment-row][data-name=shop]";
    browser
        .wait_for(
            &format!("{card} [data-testid=replica-set][data-revision='1'][data-new=true][data-ready='3']"),
            Duration::from_secs(30),
            &failure,
        )
        .await;
    browser.wait_for(&format!("{card} [data-testid=rollout-chart]"), Duration::from_secs(5), &failure).await;

    // A new image: a second ReplicaSet takes over, and the chart follows, within the band
    // 3 replicas at 25 %/25 % allow: at most 4 pods (surge rounded up), at least 3 available.
    let mut d = client.get::<Deployment>("default", "shop").await.expect("read the deployment");
    d.spec.template.spec.containers[0].image = "minimal:2".into();
    client.replace_object(&d.into_object()).await.expect("the new image is written");
    let new = format!("{card} [data-testid=replica-set][data-revision='2'][data-new=true][data-ready='3']");
    browser.wait_for(&new, Duration::from_secs(30), &failure).await;
    let old = browser
        .wait_for(&format!("{card} [data-testid=replica-set][data-revision='1'][data-new=false]"), Duration::from_secs(5), &failure)
        .await;
    assert_eq!(
        old.find_all(fantoccini::Locator::Css("[data-testid=rs-pod]")).await.expect("marks").len(),
        0,
        "the old set's pods are gone"
    );
    let marks =
        browser.client.find_all(fantoccini::Locator::Css(&format!("{new} [data-testid=rs-pod][data-ready=true]"))).await.expect("marks");
    assert_eq!(marks.len(), 3, "the new set's three pods, ready");
    browser
        .wait_for(&format!("{card} [data-testid=rollout-series][data-series=updated][data-value='3']"), Duration::from_secs(10), &failure)
        .await;
    let band = browser.wait_for(&format!("{card} [data-testid=rollout-band]"), Duration::from_secs(5), &failure).await;
    assert_eq!(band.attr("data-ceiling").await.unwrap().as_deref(), Some("4"));
    assert_eq!(band.attr("data-floor").await.unwrap().as_deref(), Some("3"));
    let chart = browser.wait_for(&format!("{card} [data-testid=rollout-chart]"), Duration::from_secs(5), &failure).await;
    let samples: usize = chart.attr("data-samples").await.unwrap().expect("data-samples").parse().expect("a count");
    assert!(samples >= 2, "the chart sampled the rollout as it went: {samples} sample(s)");
    browser.screenshot(&shots().join("deployments-rollout.png")).await;

    // Pause: spec.paused is written; undo then refuses as kubectl does, on the page.
    click(&browser, &format!("{card} [data-testid=rollout-pause]"), &failure).await;
    eventually(client, Duration::from_secs(10), "shop paused", || async {
        client.get::<Deployment>("default", "shop").await.ok().filter(|d| d.spec.paused)
    })
    .await;
    click(&browser, &format!("{card}[data-paused=true] [data-testid=rollout-undo]"), &failure).await;
    let refusal = text_of(&browser, "[data-testid=deployment-error]", &failure).await;
    assert!(refusal.contains("resume it first"), "{refusal}");

    // Resume, then undo: the deployment runs the first image again, as revision 3.
    click(&browser, &format!("{card}[data-paused=true] [data-testid=rollout-resume]"), &failure).await;
    eventually(client, Duration::from_secs(10), "shop resumed", || async {
        client.get::<Deployment>("default", "shop").await.ok().filter(|d| !d.spec.paused)
    })
    .await;
    click(&browser, &format!("{card}[data-paused=false] [data-testid=rollout-undo]"), &failure).await;
    let undone = eventually(client, Duration::from_secs(10), "shop back on its first image", || async {
        client.get::<Deployment>("default", "shop").await.ok().filter(|d| d.spec.template.spec.containers[0].image == first_image)
    })
    .await;
    assert!(!undone.spec.paused);
    browser
        .wait_for(
            &format!("{card} [data-testid=replica-set][data-revision='3'][data-new=true][data-ready='3']"),
            Duration::from_secs(30),
            &failure,
        )
        .await;
    browser.screenshot(&shots().join("deployments-undone.png")).await;
    browser.close().await;
    shutdown.cancel();
    agent.await.expect("the agent task").expect("the agent stops cleanly");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_pen_shows_what_its_pods_use_beside_their_requests() {
    let dist = workspace().join("dist");
    assert!(dist.join("index.html").is_file(), "the dashboard is not built in {}: run `cargo xtask frontend` first", dist.display());
    let shutdown = CancellationToken::new();
    let server = TestServer::start(Config { dashboard_dir: Some(dist), ..Config::in_memory() }).await;
    let client = &server.client;
    let mut agent_config = AgentConfig::new(&server.url);
    agent_config.node_name = "measured-node".into();
    agent_config.runtime = RuntimeChoice::Simulated { start_delay: Duration::ZERO };
    agent_config.listen = "127.0.0.1:0".parse().unwrap();
    let agent = tokio::spawn(agent::run(agent_config, shutdown.clone()));
    // A node registered without an agent behind it: nobody answers for its usage.
    shepherd_testing::register_node(client, &shepherd_testing::node("silent-node")).await;

    let reference = std::fs::read_to_string(workspace().join("examples/pod.json")).expect("examples/pod.json");
    let mut pod: Pod = serde_json::from_str(&reference).expect("examples/pod.json is a Pod");
    pod.spec.node_selector.insert(shared::registration::HOSTNAME_LABEL.into(), "measured-node".into());
    client.create(&pod).await.expect("the pod is created");
    // What `sheepctl top nodes` reads, once the simulated container runs and is measured.
    let metrics = eventually(client, Duration::from_secs(30), "usage of measured-node with its pod running", || async {
        client.node_metrics(None).await.ok()?.into_iter().find(|m| m.metadata.name == "measured-node" && m.usage.nano_cores() > 0)
    })
    .await;
    let node = client.get::<Node>("", "measured-node").await.expect("read measured-node");
    let (requests, allocatable) = (&pod.spec.containers[0].resources, &node.status.allocatable);
    let cpu = format!(
        "{} used / {} requested / {}",
        format_cpu(metrics.usage.cpu_millis()),
        format_cpu(requests.cpu),
        format_cpu(allocatable.cpu)
    );
    let memory = format!(
        "{} used / {} requested / {}",
        format_memory(metrics.usage.memory_bytes()),
        format_memory(requests.memory),
        format_memory(allocatable.memory)
    );

    let failure = shots().join("node-usage-failure.png");
    let browser = Browser::start().await;
    browser.client.goto(&format!("{}/#/", server.url)).await.expect("the dashboard opens");
    let measured = "[data-testid=node-pen][data-node=measured-node] [data-testid=usage-bars][data-used=measured]";
    let bars = browser.wait_for(measured, Duration::from_secs(30), &failure).await;
    let texts = bars.find_all(fantoccini::Locator::Css(".bar-text")).await.expect("the bars' figures");
    let mut figures = Vec::new();
    for text in &texts {
        figures.push(text.text().await.expect("a bar's figures"));
    }
    assert_eq!(figures, [cpu, memory, format!("1 / {}", allocatable.pods)], "CPU, memory and pods");
    let silent = "[data-testid=node-pen][data-node=silent-node] [data-testid=usage-bars][data-used=unknown]";
    let unknown = browser.wait_for(silent, Duration::from_secs(10), &failure).await.text().await.expect("silent-node's bars");
    assert!(unknown.contains("usage unknown"), "{unknown}");
    browser.screenshot(&shots().join("cluster-node-usage.png")).await;
    browser.close().await;
    shutdown.cancel();
    agent.await.expect("the agent task").expect("the agent stops cleanly");
    server.stop().await;
}
