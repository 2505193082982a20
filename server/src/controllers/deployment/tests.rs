use shared::model::{IntOrString, PodPhase, RollingUpdateDeployment};

use super::super::fixtures;
use super::super::replicaset::ReplicaSetController;
use super::super::replicaset::tests::run_all;
use super::*;
use crate::resources::stamp_new;

fn deployment(replicas: i32) -> Deployment {
    let mut d: Deployment = serde_json::from_str(include_str!("../../../../examples/deployment.json")).unwrap();
    d.spec.replicas = replicas;
    stamp_new(&mut d, chrono::Utc::now());
    d
}

fn key() -> Key {
    Key::new(Kind::Deployment, "default", "web")
}

fn stored(ctx: &Context) -> Deployment {
    match ctx.store.get(&key()).as_deref() {
        Some(Object::Deployment(d)) => Deployment::clone(d),
        _ => panic!("deployment missing"),
    }
}

/// The deployment's sets, oldest first.
fn sets(ctx: &Context) -> Vec<ReplicaSet> {
    let mut sets: Vec<ReplicaSet> = ctx.store.list(Kind::ReplicaSet, None).1.iter().filter_map(|o| as_rs(o).cloned()).collect();
    sets.sort_by(by_creation);
    sets
}

/// `spec.replicas` of each set, oldest first.
fn sizes(ctx: &Context) -> Vec<i32> {
    sets(ctx).iter().map(|rs| rs.spec.replicas).collect()
}

/// Changes the deployment as a user's PUT does (a new generation).
async fn edit(ctx: &Context, change: impl FnOnce(&mut Deployment)) {
    let mut d = stored(ctx);
    change(&mut d);
    d.metadata.generation += 1;
    fixtures::put(ctx, Object::Deployment(Box::new(d))).await;
}

fn new_image(d: &mut Deployment) {
    d.spec.template.spec.containers[0].image = format!("{}-next", d.spec.template.spec.containers[0].image);
}

/// One deployment sync, then one sync of each set, at `now`; the deployment's action.
async fn step(ctx: &Context, now: Time) -> Action {
    let action = DeploymentController.reconcile(&key(), ctx, now).await.unwrap();
    let sets_controller = ReplicaSetController::default();
    sets_controller.all_keys(&*ctx.store);
    for rs in sets(ctx) {
        let rs_key = Key::new(Kind::ReplicaSet, &rs.metadata.namespace, &rs.metadata.name);
        sets_controller.reconcile(&rs_key, ctx, now).await.unwrap();
    }
    action
}

/// Steps until nothing changes; the last deployment action.
async fn settle(ctx: &Context, now: Time) -> Action {
    for _ in 0..50 {
        let before = ctx.store.revision();
        let action = step(ctx, now).await;
        if ctx.store.revision() == before {
            return action;
        }
    }
    panic!("the controllers did not settle: {:?}", sizes(ctx));
}

/// Steps, with every pod running and ready, until the rollout completes; the sizes of
/// the sets at each step.
async fn roll_to_completion(ctx: &Context, now: Time) -> Vec<Vec<i32>> {
    let mut seen = Vec::new();
    for _ in 0..100 {
        settle(ctx, now).await;
        seen.push(sizes(ctx));
        run_all(ctx, now).await;
        settle(ctx, now).await;
        let d = stored(ctx);
        if complete(&d, &d.status) && sets(ctx).iter().filter(|rs| rs.spec.replicas > 0).count() == 1 {
            return seen;
        }
    }
    panic!("the rollout did not complete: {seen:?}");
}

fn progressing(ctx: &Context) -> Condition {
    find_condition(&stored(ctx).status.conditions, reasons::PROGRESSING).expect("a Progressing condition").clone()
}

fn rolling(d: &mut Deployment, surge: IntOrString, unavailable: IntOrString) {
    d.spec.strategy.rolling_update = Some(RollingUpdateDeployment { max_surge: Some(surge), max_unavailable: Some(unavailable) });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_of_thirty_thousand_replicas_gets_every_pod_through_its_replicaset() {
    let ctx = fixtures::context().await;
    let shutdown = tokio_util::sync::CancellationToken::new();
    tokio::spawn(super::super::run(DeploymentController, ctx.clone(), Duration::from_secs(30), shutdown.clone()));
    tokio::spawn(super::super::run(ReplicaSetController::default(), ctx.clone(), Duration::from_secs(30), shutdown.clone()));
    fixtures::put(&ctx, Object::Deployment(Box::new(deployment(30_000)))).await;
    let began = std::time::Instant::now();
    loop {
        let d = stored(&ctx);
        if d.status.replicas == 30_000 && d.status.updated_replicas == 30_000 {
            assert!(find_condition(&d.status.conditions, reasons::REPLICA_FAILURE).is_none(), "{:?}", d.status);
            break;
        }
        assert!(began.elapsed() < Duration::from_secs(300), "{} of 30000 pods after 5 minutes", ctx.store.count(Kind::Pod));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ctx.store.count(Kind::Pod), 30_000, "no more than asked");
    assert_eq!(sizes(&ctx), [30_000]);
    shutdown.cancel();
}

#[tokio::test]
async fn a_new_deployment_gets_one_replicaset_named_by_its_template_hash() {
    let ctx = fixtures::context().await;
    let d = deployment(3);
    fixtures::put(&ctx, Object::Deployment(Box::new(d.clone()))).await;
    let now = chrono::Utc::now();
    step(&ctx, now).await;
    assert_eq!(progressing(&ctx).reason, reasons::NEW_RS_CREATED);
    settle(&ctx, now).await;
    let [rs] = sets(&ctx).try_into().expect("one set");
    let hash = pod_template_hash(&d.spec.template, None);
    assert_eq!(rs.metadata.name, format!("web-{hash}"));
    assert_eq!(rs.spec.selector.match_labels[POD_TEMPLATE_HASH_LABEL], hash);
    assert_eq!(rs.spec.template.metadata.labels[POD_TEMPLATE_HASH_LABEL], hash);
    assert_eq!(rs.metadata.controller().map(|r| (r.kind.as_str(), r.uid.as_str())), Some(("Deployment", d.metadata.uid.as_str())));
    assert_eq!(rs.spec.replicas, 3);
    assert_eq!(rs.metadata.annotations[REVISION_ANNOTATION], "1");
    assert_eq!(rs.metadata.annotations[DESIRED_REPLICAS_ANNOTATION], "3");
    assert_eq!(rs.metadata.annotations[MAX_REPLICAS_ANNOTATION], "4", "3 + 25 % rounded up");
    let pods = fixtures::pods(&ctx);
    assert_eq!(pods.len(), 3);
    assert!(
        pods.iter().all(|p| p.metadata.name.starts_with(&format!("web-{hash}-")) && p.metadata.labels[POD_TEMPLATE_HASH_LABEL] == hash)
    );
    let written = stored(&ctx);
    assert_eq!(written.metadata.annotations[REVISION_ANNOTATION], "1");
    assert_eq!((written.status.replicas, written.status.updated_replicas, written.status.unavailable_replicas), (3, 3, 3));
    assert_eq!(progressing(&ctx).reason, reasons::RS_UPDATED);

    run_all(&ctx, now).await;
    settle(&ctx, now).await;
    let done = stored(&ctx).status;
    assert_eq!((done.ready_replicas, done.available_replicas, done.unavailable_replicas), (3, 3, 0));
    assert_eq!(progressing(&ctx).reason, reasons::NEW_RS_AVAILABLE);
    let available = find_condition(&done.conditions, reasons::AVAILABLE).unwrap();
    assert_eq!((available.status.as_str(), available.reason.as_str()), ("True", "MinimumReplicasAvailable"));
}

#[tokio::test]
async fn a_rolling_update_surges_up_and_takes_down_within_the_limits() {
    let ctx = fixtures::context().await;
    let mut d = deployment(10);
    d.set_defaults();
    fixtures::put(&ctx, Object::Deployment(Box::new(d))).await;
    let now = chrono::Utc::now();
    roll_to_completion(&ctx, now).await;

    edit(&ctx, new_image).await;
    // 25 % of 10: a surge of 3 (rounded up), 2 unavailable (rounded down).
    step(&ctx, now).await;
    assert_eq!(sizes(&ctx), [8, 3], "the new set surges to 13 pods in all, the old goes down to 10 - 2 available");
    settle(&ctx, now).await;
    assert_eq!(sizes(&ctx), [8, 5], "the new set fills the surge the old left");
    settle(&ctx, now).await;
    assert_eq!(sizes(&ctx), [8, 5], "nothing moves until new pods are available");
    assert_eq!(progressing(&ctx).reason, reasons::RS_UPDATED);

    let seen = roll_to_completion(&ctx, now).await;
    for sizes in &seen {
        assert!(sizes.iter().sum::<i32>() <= 13, "never more than 10 + 3: {seen:?}");
    }
    assert_eq!(sizes(&ctx), [0, 10]);
    let d = stored(&ctx);
    assert_eq!(d.metadata.annotations[REVISION_ANNOTATION], "2");
    assert_eq!((d.status.updated_replicas, d.status.replicas, d.status.available_replicas), (10, 10, 10));
    assert_eq!(progressing(&ctx).reason, reasons::NEW_RS_AVAILABLE);
}

#[tokio::test]
async fn surge_and_unavailability_resolve_from_counts_and_percentages() {
    let now = chrono::Utc::now();
    for (surge, unavailable, first) in [
        (IntOrString::Int(1), IntOrString::Int(0), [4, 1]),
        (IntOrString::Int(0), IntOrString::Int(1), [3, 1]),
        (IntOrString::String("50%".into()), IntOrString::String("50%".into()), [2, 4]),
        // 10 % of 4 rounds up to a surge of 1 and down to 0 unavailable.
        (IntOrString::String("10%".into()), IntOrString::String("10%".into()), [4, 1]),
        // Both 0 after rounding: one pod may be unavailable.
        (IntOrString::String("0%".into()), IntOrString::String("10%".into()), [3, 1]),
    ] {
        let ctx = fixtures::context().await;
        let mut d = deployment(4);
        rolling(&mut d, surge.clone(), unavailable.clone());
        fixtures::put(&ctx, Object::Deployment(Box::new(d))).await;
        roll_to_completion(&ctx, now).await;
        edit(&ctx, new_image).await;
        settle(&ctx, now).await;
        let mut sizes = sizes(&ctx);
        if sizes.len() == 1 {
            sizes.push(0);
        }
        assert_eq!(sizes, first, "maxSurge {surge}, maxUnavailable {unavailable}");
    }
}

#[tokio::test]
async fn scaling_during_a_rollout_spreads_the_change_in_proportion() {
    let ctx = fixtures::context().await;
    fixtures::put(&ctx, Object::Deployment(Box::new(deployment(10)))).await;
    let now = chrono::Utc::now();
    roll_to_completion(&ctx, now).await;
    edit(&ctx, new_image).await;
    settle(&ctx, now).await;
    assert_eq!(sizes(&ctx), [8, 5]);

    edit(&ctx, |d| d.spec.replicas = 20).await;
    step(&ctx, now).await;
    // 20 + 5 allowed, each set sized for 13: the old 8 × 25/13 → 15, the new 5 × 25/13 → 10.
    assert_eq!(sizes(&ctx), [15, 10]);
    // Each step is an event of its own, as `kubectl describe deploy` lists them.
    let events = ctx.store.list(Kind::Event, Some("default")).1;
    let scaled: Vec<String> = events
        .iter()
        .filter_map(|e| match &**e {
            Object::Event(e) if e.reason == "ScalingReplicaSet" => Some(e.message.clone()),
            _ => None,
        })
        .collect();
    let [old, new] = [0, 1].map(|i| sets(&ctx)[i].metadata.name.clone());
    for step in [format!("Scaled up replica set {old} from 8 to 15"), format!("Scaled up replica set {new} from 5 to 10")] {
        assert!(scaled.contains(&step), "{step:?} in {scaled:?}");
    }

    edit(&ctx, |d| d.spec.replicas = 5).await;
    step(&ctx, now).await;
    // 5 + 2 allowed: 15 × 7/25 → 4, 10 × 7/25 → 3.
    assert_eq!(sizes(&ctx), [4, 3]);

    edit(&ctx, |d| d.spec.replicas = 6).await;
    step(&ctx, now).await;
    // 6 + 2 allowed, one to add: 4 × 8/7 → 5 (+1) takes it; the new set's share is spent.
    assert_eq!(sizes(&ctx), [5, 3]);
}

#[tokio::test(start_paused = true)]
async fn a_rollout_that_makes_no_progress_exceeds_its_deadline() {
    let ctx = fixtures::context().await;
    let mut d = deployment(2);
    d.spec.progress_deadline_seconds = Some(60);
    fixtures::put(&ctx, Object::Deployment(Box::new(d))).await;
    let t0 = chrono::Utc::now();
    roll_to_completion(&ctx, t0).await;
    edit(&ctx, new_image).await;
    // The new pods never become ready (an image that crash-loops).
    let action = settle(&ctx, t0).await;
    assert_eq!(progressing(&ctx).reason, reasons::RS_UPDATED);
    assert_eq!(action, Action::RequeueAfter(Duration::from_secs(61)), "a look again when the deadline passes");
    settle(&ctx, t0 + chrono::Duration::seconds(30)).await;
    assert_eq!(progressing(&ctx).reason, reasons::RS_UPDATED, "not yet");
    let action = settle(&ctx, t0 + chrono::Duration::seconds(61)).await;
    let stuck = progressing(&ctx);
    assert_eq!((stuck.status.as_str(), stuck.reason.as_str()), ("False", "ProgressDeadlineExceeded"));
    assert!(stuck.message.ends_with("has timed out progressing."), "{}", stuck.message);
    assert_eq!(action, Action::AwaitChange);
    assert_eq!(sizes(&ctx), [2, 1], "the old pods stay: maxUnavailable 0 of 2");
}

#[tokio::test]
async fn recreate_scales_the_old_set_to_zero_and_waits_for_its_pods_to_go() {
    let ctx = fixtures::context().await;
    fixtures::node_with_ready(&ctx, "n1", conditions::TRUE).await;
    let mut d = deployment(3);
    d.spec.strategy.type_ = shared::rollout::RECREATE.into();
    fixtures::put(&ctx, Object::Deployment(Box::new(d))).await;
    let now = chrono::Utc::now();
    roll_to_completion(&ctx, now).await;
    edit(&ctx, new_image).await;
    settle(&ctx, now).await;
    assert_eq!(sizes(&ctx), [0], "no new set while old pods run");
    let terminating = fixtures::pods(&ctx);
    assert_eq!(terminating.len(), 3);
    assert!(terminating.iter().all(|p| p.metadata.deletion_timestamp.is_some()), "the old pods stop gracefully");
    for pod in terminating {
        ctx.store.commit(Txn::new().with(ops::delete(Key::new(Kind::Pod, "default", &pod.metadata.name), 0))).await.unwrap();
    }
    settle(&ctx, now).await;
    assert_eq!(sizes(&ctx), [0, 3]);
    assert_eq!(fixtures::pods(&ctx).len(), 3);
}

#[tokio::test]
async fn old_sets_at_zero_beyond_the_revision_history_limit_are_deleted() {
    let ctx = fixtures::context().await;
    let mut d = deployment(2);
    d.spec.revision_history_limit = Some(1);
    fixtures::put(&ctx, Object::Deployment(Box::new(d))).await;
    let now = chrono::Utc::now();
    roll_to_completion(&ctx, now).await;
    for _ in 0..3 {
        edit(&ctx, new_image).await;
        roll_to_completion(&ctx, now).await;
    }
    let mut revisions: Vec<i64> = sets(&ctx).iter().filter_map(revision).collect();
    revisions.sort();
    assert_eq!(revisions, [3, 4], "the newest and one old revision");
    assert_eq!(stored(&ctx).metadata.annotations[REVISION_ANNOTATION], "4");
}

#[tokio::test]
async fn a_paused_deployment_scales_but_rolls_nothing_out() {
    let ctx = fixtures::context().await;
    fixtures::put(&ctx, Object::Deployment(Box::new(deployment(2)))).await;
    let now = chrono::Utc::now();
    settle(&ctx, now).await;
    edit(&ctx, |d| {
        d.spec.paused = true;
        new_image(d);
        d.spec.replicas = 4;
    })
    .await;
    settle(&ctx, now).await;
    assert_eq!(sizes(&ctx), [4], "scaled, and no new set");
    let paused = progressing(&ctx);
    assert_eq!((paused.status.as_str(), paused.reason.as_str()), ("Unknown", "DeploymentPaused"));
    edit(&ctx, |d| d.spec.paused = false).await;
    settle(&ctx, now).await;
    assert_eq!(sizes(&ctx).len(), 2, "resumed, the rollout begins");
    assert_ne!(progressing(&ctx).reason, reasons::PAUSED);
}

#[tokio::test]
async fn undo_makes_the_old_set_new_again_under_the_next_revision() {
    let ctx = fixtures::context().await;
    fixtures::put(&ctx, Object::Deployment(Box::new(deployment(2)))).await;
    let now = chrono::Utc::now();
    roll_to_completion(&ctx, now).await;
    let first = sets(&ctx)[0].clone();
    edit(&ctx, new_image).await;
    roll_to_completion(&ctx, now).await;
    // What `kubectl rollout undo` patches in: the old set's template without its hash.
    let mut template = first.spec.template.clone();
    template.metadata.labels.remove(POD_TEMPLATE_HASH_LABEL);
    edit(&ctx, |d| d.spec.template = template).await;
    roll_to_completion(&ctx, now).await;
    let sets = sets(&ctx);
    assert_eq!(sets.len(), 2, "no third set");
    assert_eq!((sets[0].metadata.name.as_str(), revision(&sets[0]), sets[0].spec.replicas), (first.metadata.name.as_str(), Some(3), 2));
    assert_eq!(stored(&ctx).metadata.annotations[REVISION_ANNOTATION], "3");
}

#[tokio::test]
async fn deleting_the_deployment_deletes_its_sets_and_then_their_pods() {
    let ctx = fixtures::context().await;
    fixtures::put(&ctx, Object::Deployment(Box::new(deployment(2)))).await;
    let now = chrono::Utc::now();
    settle(&ctx, now).await;
    let unowned = fixtures::pod("unowned", &[("app", "web")], "", PodPhase::Pending);
    fixtures::put(&ctx, Object::Pod(unowned)).await;
    let rs_key = Key::of(&Object::ReplicaSet(Box::new(sets(&ctx)[0].clone())));
    ctx.store.commit(Txn::new().with(ops::delete(key(), 0))).await.unwrap();
    assert_eq!(DeploymentController.all_keys(&*ctx.store), vec![key()], "the owner of orphaned sets is still visited");
    DeploymentController.reconcile(&key(), &ctx, now).await.unwrap();
    assert!(sets(&ctx).is_empty());
    ReplicaSetController::default().reconcile(&rs_key, &ctx, now).await.unwrap();
    let left: Vec<String> = fixtures::pods(&ctx).iter().map(|p| p.metadata.name.clone()).collect();
    assert_eq!(left, vec!["unowned".to_string()]);
}

#[tokio::test]
async fn pods_a_deployment_controlled_itself_go_to_its_new_set_when_they_run_its_template() {
    let ctx = fixtures::context().await;
    let d = deployment(3);
    fixtures::put(&ctx, Object::Deployment(Box::new(d.clone()))).await;
    let legacy = |name: &str, image: &str| {
        let mut pod = fixtures::pod(name, &[("app", "web")], "n1", PodPhase::Running);
        pod.spec = d.spec.template.spec.clone();
        pod.spec.containers[0].image = image.into();
        pod.spec.node_name = "n1".into();
        pod.metadata.owner_references = vec![controller_reference(Kind::Deployment, &d.metadata)];
        pod
    };
    for pod in [legacy("current-1", "minimal"), legacy("current-2", "minimal"), legacy("outdated", "older")] {
        fixtures::put(&ctx, Object::Pod(pod)).await;
    }
    settle(&ctx, chrono::Utc::now()).await;
    let rs = sets(&ctx).pop().expect("a set");
    let pods = fixtures::pods(&ctx);
    let names: Vec<&str> = pods.iter().map(|p| p.metadata.name.as_str()).collect();
    assert_eq!(pods.len(), 3, "{names:?}");
    assert!(names.contains(&"current-1") && names.contains(&"current-2") && !names.contains(&"outdated"), "{names:?}");
    assert!(pods.iter().all(|p| p.metadata.controller().is_some_and(|r| r.uid == rs.metadata.uid)), "all the new set's");
}

#[tokio::test]
async fn a_new_set_whose_name_the_api_would_refuse_fails_the_create_as_kubernetes_reports_it() {
    let ctx = fixtures::context().await;
    let mut d = deployment(2);
    // 253 characters: a valid deployment name, but `<name>-<hash>` is longer than a name may be.
    d.metadata.name = "w".repeat(253);
    fixtures::put(&ctx, Object::Deployment(Box::new(d))).await;
    let long_key = Key::new(Kind::Deployment, "default", &"w".repeat(253));
    let now = chrono::Utc::now();
    assert!(DeploymentController.reconcile(&long_key, &ctx, now).await.is_err(), "the failed create requeues with back-off");
    assert!(sets(&ctx).is_empty(), "no invalid ReplicaSet is stored");
    let Some(Object::Deployment(d)) = ctx.store.get(&long_key).as_deref().cloned() else { panic!("deployment missing") };
    let failed = find_condition(&d.status.conditions, reasons::PROGRESSING).expect("a Progressing condition");
    assert_eq!((failed.status.as_str(), failed.reason.as_str()), ("False", reasons::REPLICA_SET_CREATE_ERROR));
    assert!(failed.message.starts_with("Failed to create new replica set \"wwww"), "{}", failed.message);
    assert!(failed.message.contains("metadata.name: must be at most 253 characters"), "{}", failed.message);
    let events = ctx.store.list(Kind::Event, Some("default")).1;
    let warned =
        events.iter().any(|e| matches!(&**e, Object::Event(e) if e.reason == reasons::REPLICA_SET_CREATE_ERROR && e.type_ == "Warning"));
    assert!(warned, "{events:?}");
}

#[tokio::test]
async fn revisions_are_int64_and_wrap_as_kubernetes_wraps_them() {
    let ctx = fixtures::context().await;
    fixtures::put(&ctx, Object::Deployment(Box::new(deployment(2)))).await;
    let now = chrono::Utc::now();
    roll_to_completion(&ctx, now).await;
    // An old set at i64::MAX - 1 (a user's edit): the next revision is i64::MAX, which
    // kubectl reads; an unparsable one is skipped.
    let mut first = sets(&ctx).remove(0);
    first.metadata.annotations.insert(REVISION_ANNOTATION.into(), (i64::MAX - 1).to_string());
    fixtures::put(&ctx, Object::ReplicaSet(Box::new(first))).await;
    edit(&ctx, new_image).await;
    roll_to_completion(&ctx, now).await;
    assert_eq!(stored(&ctx).metadata.annotations[REVISION_ANNOTATION], i64::MAX.to_string());
    let all = sets(&ctx);
    let newest = shared::rollout::new_and_old_sets(&stored(&ctx), &all).0.expect("a new set");
    assert_eq!(revision(newest), Some(i64::MAX));

    // Past i64::MAX the sum wraps, as Go's does: the new set keeps the revision it has (none),
    // never one kubectl cannot read.
    let mut unparsable = sets(&ctx).into_iter().find(|rs| revision(rs) == Some(i64::MAX - 1)).expect("the first set");
    unparsable.metadata.annotations.insert(REVISION_ANNOTATION.into(), "99999999999999999999".into());
    fixtures::put(&ctx, Object::ReplicaSet(Box::new(unparsable))).await;
    edit(&ctx, new_image).await;
    roll_to_completion(&ctx, now).await;
    for rs in sets(&ctx) {
        if let Some(text) = rs.metadata.annotations.get(REVISION_ANNOTATION).filter(|t| t.as_str() != "99999999999999999999") {
            assert!(text.parse::<i64>().is_ok(), "{text} is an int64");
        }
    }
    assert_eq!(shared::rollout::next_revision(&sets(&ctx)), i64::MIN);
}
