//! The pod garbage collector, the safety net of graceful deletion: a terminating pod is
//! removed when no agent will confirm its deletion (its node is gone or not Ready, or the
//! pod has finished) or when its agent has not confirmed within the grace period plus
//! `termination_confirm_slack`. Each removal records a Warning `ForceDeleted` event.

use std::time::Duration;

use shared::model::{Kind, Object, Pod, Time, event_types};

use super::{Action, Context, Controller, Result, store_error};
use crate::events::{self, SOURCE_POD_GC};
use crate::ops;
use crate::store::{Change, Key, Store, StoreError, StoreEvent, Txn, Write};

pub struct PodGcController;

pub const FORCE_DELETED: &str = "ForceDeleted";

fn terminating(object: &Object) -> Option<&Pod> {
    match object {
        Object::Pod(p) if p.metadata.deletion_timestamp.is_some() => Some(p),
        _ => None,
    }
}

/// When the agent's confirmation is overdue: deletion_timestamp + grace + slack.
fn deadline(pod: &Pod, slack: Duration) -> Option<Time> {
    let since = pod.metadata.deletion_timestamp?;
    let grace = chrono::Duration::try_seconds(pod.metadata.deletion_grace_period_seconds.unwrap_or(0).max(0))?;
    since.checked_add_signed(grace)?.checked_add_signed(chrono::Duration::from_std(slack).ok()?)
}

/// Why the terminating `pod` must go now, if it must. `node` and `lease` are its node's.
fn reason(
    pod: &Pod,
    node: Option<&Object>,
    lease: Option<&Object>,
    slack: Duration,
    node_monitor_grace: Duration,
    now: Time,
) -> Option<String> {
    if let Some(why) = ops::removable_at_once(pod, node, lease, now, node_monitor_grace) {
        return Some(why);
    }
    let due = deadline(pod, slack)?;
    (now >= due).then(|| {
        format!(
            "node {} did not confirm the deletion of pod {} within its grace period of {}s and {}s more",
            pod.spec.node_name,
            pod.metadata.key(),
            pod.metadata.deletion_grace_period_seconds.unwrap_or(0),
            slack.as_secs()
        )
    })
}

fn node_key(pod: &Pod) -> Key {
    Key::new(Kind::Node, "", &pod.spec.node_name)
}

impl Controller for PodGcController {
    const NAME: &'static str = "pod-gc-controller";

    fn watched(&self) -> &'static [Kind] {
        &[Kind::Pod, Kind::Node]
    }

    /// A terminating pod; for a node, the terminating pods bound to it.
    fn keys_for(&self, store: &dyn Store, event: &StoreEvent) -> Vec<Key> {
        match &*event.object {
            Object::Pod(_) => terminating(&event.object).map(|_| Key::of(&event.object)).into_iter().collect(),
            Object::Node(node) => {
                store.pods_on_node(&node.metadata.name).1.iter().filter(|p| terminating(p).is_some()).map(|p| Key::of(p)).collect()
            }
            _ => Vec::new(),
        }
    }

    fn all_keys(&self, store: &dyn Store) -> Vec<Key> {
        store.list(Kind::Pod, None).1.iter().filter(|p| terminating(p).is_some()).map(|p| Key::of(p)).collect()
    }

    async fn reconcile(&self, key: &Key, ctx: &Context, now: Time) -> Result<Action> {
        let slack = ctx.config.termination_confirm_slack;
        let grace = ctx.config.node_monitor_grace;
        let pod = match ctx.store.get(key).as_deref().and_then(terminating) {
            Some(p) => p.clone(),
            None => return Ok(Action::AwaitChange),
        };
        let node = ctx.store.get(&node_key(&pod));
        let lease = ctx.store.get(&ops::lease_key(&pod.spec.node_name));
        let Some(why) = reason(&pod, node.as_deref(), lease.as_deref(), slack, grace, now) else {
            return Ok(match deadline(&pod, slack) {
                Some(due) => Action::RequeueAfter((due - now).to_std().unwrap_or_default() + Duration::from_millis(50)),
                None => Action::AwaitChange,
            });
        };
        let uid = pod.metadata.uid.clone();
        let remove = Write::new(key.clone(), move |view, current| match current {
            // Judged again against the latest state: a confirmed, replaced or revived pod stays.
            Some(Object::Pod(p)) if p.metadata.uid == uid && p.metadata.deletion_timestamp.is_some() => {
                match reason(p, view.get(&node_key(p)), view.get(&ops::lease_key(&p.spec.node_name)), slack, grace, now) {
                    Some(_) => Ok(Change::Delete),
                    None => Err(StoreError::conflict(format!("pod {} no longer needs to be collected", p.metadata.key()))),
                }
            }
            _ => Err(StoreError::conflict("the pod changed before it was collected")),
        });
        let event = events::new_event(
            events::reference(&Object::Pod(pod.clone())),
            event_types::WARNING,
            FORCE_DELETED,
            format!("Deleted pod {} without its agent's confirmation: {why}", pod.metadata.key()),
            SOURCE_POD_GC,
        );
        match ctx.store.commit(Txn::new().with(remove).with(events::record(event, now))).await {
            Ok(_) => {
                tracing::warn!("deleted terminating pod {} without its agent's confirmation: {why}", pod.metadata.key());
                Ok(Action::AwaitChange)
            }
            // The change that made the difference is itself watched: its key comes back.
            Err(StoreError::Conflict(_)) | Err(StoreError::NotFound { .. }) => Ok(Action::AwaitChange),
            Err(e) => Err(store_error(Self::NAME, key, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use shared::model::{PodPhase, conditions};

    use super::super::fixtures;
    use super::*;
    use crate::config::Config;

    async fn setup(ready: &str) -> (Context, Time, Key) {
        let mut ctx = fixtures::context().await;
        ctx.config = Arc::new(Config { termination_confirm_slack: Duration::from_secs(30), ..Config::default() });
        let now = chrono::Utc::now();
        fixtures::node_with_ready(&ctx, "n1", ready).await;
        let mut pod = fixtures::pod("a", &[], "n1", PodPhase::Running);
        pod.metadata.deletion_timestamp = Some(now);
        pod.metadata.deletion_grace_period_seconds = Some(10);
        fixtures::put(&ctx, Object::Pod(pod)).await;
        fixtures::put(&ctx, Object::Pod(fixtures::pod("alive", &[], "n1", PodPhase::Running))).await;
        (ctx, now, Key::new(Kind::Pod, "default", "a"))
    }

    fn warnings(ctx: &Context) -> Vec<String> {
        let events = ctx.store.list(Kind::Event, Some("default")).1;
        events
            .iter()
            .filter_map(|e| match &**e {
                Object::Event(e) if e.reason == FORCE_DELETED && e.type_ == event_types::WARNING => Some(e.message.clone()),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_terminating_pod_waits_for_its_agent_until_grace_and_slack_have_passed() {
        let (ctx, now, key) = setup(conditions::TRUE).await;
        assert_eq!(PodGcController.all_keys(&*ctx.store), vec![key.clone()], "only the terminating pod is looked at");
        let action = PodGcController.reconcile(&key, &ctx, now + chrono::Duration::seconds(5)).await.unwrap();
        match action {
            Action::RequeueAfter(d) => assert!(d > Duration::from_secs(34) && d < Duration::from_secs(36), "{d:?}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(fixtures::pods(&ctx).len(), 2, "within grace and slack the pod stays");
        assert!(warnings(&ctx).is_empty());

        let later = now + chrono::Duration::seconds(41);
        fixtures::renew(&ctx, "n1", later).await;
        PodGcController.reconcile(&key, &ctx, later).await.unwrap();
        let left: Vec<String> = fixtures::pods(&ctx).iter().map(|p| p.metadata.name.clone()).collect();
        assert_eq!(left, vec!["alive".to_string()]);
        let warnings = warnings(&ctx);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("did not confirm the deletion of pod default/a within its grace period of 10s"), "{}", warnings[0]);
    }

    #[tokio::test]
    async fn a_terminating_pod_on_a_not_ready_or_missing_node_goes_at_once() {
        let (ctx, now, key) = setup(conditions::UNKNOWN).await;
        PodGcController.reconcile(&key, &ctx, now).await.unwrap();
        assert_eq!(fixtures::pods(&ctx).len(), 1);
        assert!(
            warnings(&ctx)[0].contains("node n1 of pod default/a is not ready: the node's Ready condition is Unknown"),
            "{:?}",
            warnings(&ctx)
        );

        let (ctx, now, key) = setup(conditions::TRUE).await;
        ctx.store.commit(Txn::new().with(ops::delete(Key::new(Kind::Node, "", "n1"), 0))).await.unwrap();
        PodGcController.reconcile(&key, &ctx, now).await.unwrap();
        assert_eq!(fixtures::pods(&ctx).len(), 1, "the pod that is not terminating stays");
        assert!(warnings(&ctx)[0].contains("node n1 of pod default/a no longer exists"), "{:?}", warnings(&ctx));
    }

    #[tokio::test]
    async fn a_pod_that_is_not_terminating_is_left_alone() {
        let (ctx, now, _) = setup(conditions::UNKNOWN).await;
        let key = Key::new(Kind::Pod, "default", "alive");
        let revision = ctx.store.revision();
        assert_eq!(PodGcController.reconcile(&key, &ctx, now + chrono::Duration::days(1)).await.unwrap(), Action::AwaitChange);
        assert_eq!(ctx.store.revision(), revision);
    }
}
