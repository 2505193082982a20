//! The node lifecycle controller: a node without a heartbeat (its lease's renewal or its
//! own status heartbeat) for `node_monitor_grace` gets Ready=Unknown (NotReady) and a
//! `NodeNotReady` event; the pods on a node that stays
//! NotReady past `pod_eviction_grace` are marked Failed with reason `NodeLost`, so that
//! their deployments replace them elsewhere. Pods bound to a deleted node fail the same way.

use std::time::Duration;

use shared::model::{Condition, Kind, Lease, Node, Object, Pod, PodPhase, Time, conditions, event_types, find_condition, set_condition};

use super::{Action, Context, Controller, Result, store_error};
use crate::events::{self, SOURCE_NODE_CONTROLLER};
use crate::ops;
use crate::store::{Key, Store, StoreError, StoreEvent, Txn};

pub struct NodeLifecycleController;

pub const NODE_LOST: &str = "NodeLost";

fn to_chrono(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

fn until(deadline: Time, now: Time) -> Duration {
    (deadline - now).to_std().unwrap_or_default() + Duration::from_millis(50)
}

impl Controller for NodeLifecycleController {
    const NAME: &'static str = "node-lifecycle-controller";

    /// Not leases: a renewal only moves the staleness deadline that the requeue of each
    /// Ready node already waits for, and watching them would wake it on every renewal.
    fn watched(&self) -> &'static [Kind] {
        &[Kind::Node]
    }

    fn keys_for(&self, _store: &dyn Store, event: &StoreEvent) -> Vec<Key> {
        vec![Key::of(&event.object)]
    }

    /// Every node, and every node name pods are bound to that no longer exists.
    fn all_keys(&self, store: &dyn Store) -> Vec<Key> {
        let mut keys: Vec<Key> = store.list(Kind::Node, None).1.iter().map(|n| Key::of(n)).collect();
        for pod in store.list(Kind::Pod, None).1 {
            if let Object::Pod(p) = &*pod {
                let key = Key::new(Kind::Node, "", &p.spec.node_name);
                if p.is_bound() && !p.status.phase.is_terminal() && store.get(&key).is_none() {
                    keys.push(key);
                }
            }
        }
        keys.sort();
        keys.dedup();
        keys
    }

    async fn reconcile(&self, key: &Key, ctx: &Context, now: Time) -> Result<Action> {
        let err = |e| store_error(Self::NAME, key, e);
        let node = match ctx.store.get(key).as_deref() {
            Some(Object::Node(n)) => n.clone(),
            _ => {
                // A deleted node's pods cannot run anywhere: they fail, and are replaced.
                evict_pods(ctx, &key.key, &format!("node {} was deleted", key.key), now).await.map_err(err)?;
                return Ok(Action::AwaitChange);
            }
        };
        let lease = ctx.store.get(&ops::lease_key(&node.metadata.name));
        let lease = ops::as_lease(lease.as_deref());
        let grace = ctx.config.node_monitor_grace;
        let eviction = to_chrono(ctx.config.pod_eviction_grace);
        let last_seen = node.last_heartbeat(lease).or(node.metadata.created_at).unwrap_or(now);
        let ready = find_condition(&node.status.conditions, conditions::NODE_READY).cloned();

        if node.heartbeat_lost(lease, now, grace) && ready.as_ref().is_none_or(|c| c.status != conditions::UNKNOWN) {
            mark_unknown(ctx, &node, lease, last_seen, now).await.map_err(err)?;
            return Ok(Action::RequeueAfter(ctx.config.pod_eviction_grace));
        }
        let Some(ready) = ready.filter(|c| c.status != conditions::TRUE) else {
            // Ready: look again when the heartbeat would go stale.
            return Ok(Action::RequeueAfter(until(last_seen + to_chrono(grace), now)));
        };
        let since = ready.last_transition_time.unwrap_or(now);
        if now - since < eviction {
            return Ok(Action::RequeueAfter(until(since + eviction, now)));
        }
        let why = format!("node {} has been NotReady for longer than {:?}", key.key, ctx.config.pod_eviction_grace);
        evict_pods(ctx, &node.metadata.name, &why, now).await.map_err(err)?;
        Ok(Action::RequeueAfter(ctx.config.node_monitor_period))
    }
}

/// Marks the node Unknown, unless a heartbeat of either kind arrived since it was judged.
async fn mark_unknown(ctx: &Context, node: &Node, lease: Option<&Lease>, last_seen: Time, now: Time) -> Result<(), StoreError> {
    let name = node.metadata.name.clone();
    let silent = (now - last_seen).num_seconds();
    let message = format!("the agent stopped posting node status: no heartbeat for {silent}s");
    let condition_message = message.clone();
    let judged = node.last_heartbeat(lease);
    let write = ops::modify::<Node>(Key::new(Kind::Node, "", &name), move |view, n| {
        if n.last_heartbeat(ops::as_lease(view.get(&ops::lease_key(&n.metadata.name)))) != judged {
            return Err(StoreError::conflict("a heartbeat arrived meanwhile"));
        }
        set_condition(
            &mut n.status.conditions,
            Condition {
                type_: conditions::NODE_READY.into(),
                status: conditions::UNKNOWN.into(),
                reason: "NodeStatusUnknown".into(),
                message: condition_message.clone(),
                ..Condition::default()
            },
            now,
        );
        Ok(())
    });
    let event = events::new_event(
        events::reference(&Object::Node(node.clone())),
        event_types::WARNING,
        "NodeNotReady",
        format!("Node {name} status is now: NodeNotReady ({message})"),
        SOURCE_NODE_CONTROLLER,
    );
    match ctx.store.commit(Txn::new().with(write).with(events::record(event, now))).await {
        Ok(_) | Err(StoreError::Conflict(_)) | Err(StoreError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Marks every unfinished pod bound to `name` Failed with reason NodeLost, with an event.
async fn evict_pods(ctx: &Context, name: &str, why: &str, now: Time) -> Result<(), StoreError> {
    let (_, pods) = ctx.store.pods_on_node(name);
    let mut txn = Txn::new();
    for object in pods {
        let Object::Pod(pod) = &*object else { continue };
        if pod.status.phase.is_terminal() {
            continue;
        }
        let message = why.to_string();
        let node_name = name.to_string();
        let status_message = message.clone();
        txn.push(ops::modify::<Pod>(Key::of(&object), move |_, p| {
            if p.spec.node_name != node_name || p.status.phase.is_terminal() {
                return Ok(());
            }
            p.status.phase = PodPhase::Failed;
            p.status.reason = NODE_LOST.into();
            p.status.message = status_message.clone();
            for condition in [conditions::READY, conditions::CONTAINERS_READY] {
                if find_condition(&p.status.conditions, condition).is_some() {
                    set_condition(
                        &mut p.status.conditions,
                        Condition {
                            type_: condition.into(),
                            status: conditions::FALSE.into(),
                            reason: NODE_LOST.into(),
                            ..Condition::default()
                        },
                        now,
                    );
                }
            }
            Ok(())
        }));
        let event = events::new_event(events::reference(&object), event_types::WARNING, NODE_LOST, message, SOURCE_NODE_CONTROLLER);
        txn.push(events::record(event, now));
    }
    if txn.writes.is_empty() {
        return Ok(());
    }
    ctx.store.commit(txn).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::fixtures;
    use super::*;
    use crate::config::Config;

    async fn setup() -> (Context, Time) {
        let mut ctx = fixtures::context().await;
        ctx.config = Arc::new(Config {
            node_monitor_grace: Duration::from_secs(40),
            pod_eviction_grace: Duration::from_secs(60),
            ..Config::default()
        });
        let now = chrono::Utc::now();
        fixtures::register_node(&ctx, "n1", now - chrono::Duration::seconds(100)).await;
        // The agent renews its lease every 10s until it goes silent 50s before `now`.
        for ago in [90, 80, 70, 60, 50] {
            fixtures::renew(&ctx, "n1", now - chrono::Duration::seconds(ago)).await;
        }
        fixtures::put(&ctx, Object::Pod(fixtures::pod("a", &[], "n1", PodPhase::Running))).await;
        (ctx, now)
    }

    fn ready(ctx: &Context) -> Condition {
        match ctx.store.get(&Key::new(Kind::Node, "", "n1")).as_deref() {
            Some(Object::Node(n)) => find_condition(&n.status.conditions, "Ready").unwrap().clone(),
            _ => panic!("node missing"),
        }
    }

    #[tokio::test]
    async fn a_silent_node_becomes_not_ready_then_loses_its_pods() {
        let (ctx, now) = setup().await;
        let key = Key::new(Kind::Node, "", "n1");
        let action = NodeLifecycleController.reconcile(&key, &ctx, now).await.unwrap();
        assert_eq!(action, Action::RequeueAfter(Duration::from_secs(60)));
        let condition = ready(&ctx);
        assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("Unknown", "NodeStatusUnknown"));
        let events = ctx.store.list(Kind::Event, Some("default")).1;
        assert!(events.iter().any(|e| matches!(&**e, Object::Event(e) if e.reason == "NodeNotReady")));
        assert_eq!(fixtures::pods(&ctx)[0].status.phase, PodPhase::Running, "the pods wait for the grace period");

        // Idempotent: the same reconcile changes nothing more.
        let revision = ctx.store.revision();
        NodeLifecycleController.reconcile(&key, &ctx, now).await.unwrap();
        assert_eq!(ctx.store.revision(), revision);

        NodeLifecycleController.reconcile(&key, &ctx, now + chrono::Duration::seconds(61)).await.unwrap();
        let pod = &fixtures::pods(&ctx)[0];
        assert_eq!((pod.status.phase, pod.status.reason.as_str()), (PodPhase::Failed, NODE_LOST));
    }

    #[tokio::test]
    async fn the_pods_of_a_deleted_node_fail_with_node_lost() {
        let (ctx, now) = setup().await;
        let key = Key::new(Kind::Node, "", "n1");
        ctx.store.commit(Txn::new().with(ops::delete(key.clone(), 0))).await.unwrap();
        assert_eq!(NodeLifecycleController.all_keys(&*ctx.store), vec![key.clone()], "the missing node is still looked at");
        NodeLifecycleController.reconcile(&key, &ctx, now).await.unwrap();
        let pod = &fixtures::pods(&ctx)[0];
        assert_eq!(
            (pod.status.phase, pod.status.reason.as_str(), pod.status.message.as_str()),
            (PodPhase::Failed, NODE_LOST, "node n1 was deleted")
        );
        assert!(NodeLifecycleController.all_keys(&*ctx.store).is_empty());
    }

    #[tokio::test]
    async fn renewals_keep_a_node_ready_long_after_its_last_status_heartbeat() {
        let (ctx, now) = setup().await;
        let key = Key::new(Kind::Node, "", "n1");
        fixtures::renew(&ctx, "n1", now - chrono::Duration::seconds(5)).await;
        let revision = ctx.store.revision();
        let action = NodeLifecycleController.reconcile(&key, &ctx, now).await.unwrap();
        assert_eq!(ready(&ctx).status, "True", "the status was reported 100s ago, the lease renewed 5s ago");
        assert_eq!(ctx.store.revision(), revision, "nothing written");
        match action {
            Action::RequeueAfter(d) => assert!(d > Duration::from_secs(34) && d < Duration::from_secs(36), "{d:?}"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_renewal_after_the_judgement_keeps_the_node_from_being_marked_unknown() {
        let (ctx, now) = setup().await;
        let node = match ctx.store.get(&Key::new(Kind::Node, "", "n1")).as_deref() {
            Some(Object::Node(n)) => n.clone(),
            _ => panic!("node missing"),
        };
        let judged = ctx.store.get(&ops::lease_key("n1"));
        fixtures::renew(&ctx, "n1", now).await;
        let last_seen = now - chrono::Duration::seconds(50);
        mark_unknown(&ctx, &node, ops::as_lease(judged.as_deref()), last_seen, now).await.unwrap();
        assert_eq!(ready(&ctx).status, "True", "judged stale, but renewed before the write");
    }

    #[tokio::test]
    async fn a_fresh_node_is_left_alone_until_its_heartbeat_goes_stale() {
        let (ctx, now) = setup().await;
        let key = Key::new(Kind::Node, "", "n1");
        let earlier = now - chrono::Duration::seconds(30);
        let action = NodeLifecycleController.reconcile(&key, &ctx, earlier).await.unwrap();
        assert_eq!(ready(&ctx).status, "True");
        match action {
            Action::RequeueAfter(d) => assert!(d > Duration::from_secs(19) && d < Duration::from_secs(21), "{d:?}"),
            other => panic!("{other:?}"),
        }
    }
}
