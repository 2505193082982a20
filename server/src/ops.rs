//! The writes of the API as store mutations, shared by the HTTP handlers, the scheduler loop
//! and the controllers so that each has one code path: create, update (CAS on
//! resource_version), delete, bind (CAS on an empty node_name, with room on the node), pod
//! status, node registration and lease renewal.

use std::time::Duration;

use shared::api::Heartbeat;
use shared::model::DEFAULT_GRACE_SECONDS;
use shared::model::{
    Condition, Kind, Lease, LeaseSpec, Node, Object, ObjectMeta, Pod, PodPhase, PodStatus, Service, Time, conditions, event_types,
    find_condition, set_condition,
};

use shared::readiness::Readiness;
use shared::registration::{Registrant, registered_labels};
use shared::scheduler::check_room;

use crate::events::{self, SOURCE_SCHEDULER};
use crate::resources::{Resource, default_allocatable};
use crate::service_addresses::{self, ServiceRanges};
use crate::store::{Change, Key, StoreError, Txn, View, Write};

/// Creates `object`, which must not exist yet, in a namespace that must exist.
pub fn create<R: Resource>(object: R) -> Write {
    create_claiming(object, |_, _| Ok(()))
}

/// Creates a Service with its cluster IP and node ports from `ranges`, taken in the same
/// transaction that reads what the other Services hold.
pub fn create_service(service: Service, ranges: ServiceRanges) -> Write {
    create_claiming(service, move |service, view| service_addresses::claim(service, None, view, &ranges))
}

fn create_claiming<R: Resource>(object: R, claim: impl Fn(&mut R, &dyn View) -> Result<(), StoreError> + Send + Sync + 'static) -> Write {
    let key = Key::new(R::KIND, &object.meta().namespace, &object.meta().name);
    Write::new(key.clone(), move |view, current| {
        if current.is_some() {
            return Err(StoreError::AlreadyExists { kind: key.kind, key: key.key.clone() });
        }
        check_namespace(view, R::KIND, &object.meta().namespace)?;
        let mut created = object.clone();
        claim(&mut created, view)?;
        Ok(Change::Put(created.into_object()))
    })
}

fn check_namespace(view: &dyn View, kind: Kind, namespace: &str) -> Result<(), StoreError> {
    if kind.namespaced() && view.get(&Key::new(Kind::Namespace, "", namespace)).is_none() {
        return Err(StoreError::NotFound { kind: Kind::Namespace, key: namespace.to_string() });
    }
    Ok(())
}

/// The compare-and-swap check: a non-zero `expected` must equal the stored version.
pub fn check_version(key: &Key, expected: u64, stored: &Object) -> Result<(), StoreError> {
    let actual = stored.metadata().resource_version;
    if expected != 0 && expected != actual {
        return Err(StoreError::conflict(format!(
            "{} was modified: you sent resource_version {expected} but it is now at {actual}; read it again and reapply your change",
            key
        )));
    }
    Ok(())
}

/// Replaces the user-editable fields of an existing object (see [`Resource::merge_update`]).
pub fn update<R: Resource>(new: R) -> Write {
    update_claiming(new, |_, _, _| Ok(()))
}

/// Updates a Service: what it newly asks of the ranges (a node port when it becomes
/// `NodePort`) is taken as [`create_service`] takes it.
pub fn update_service(new: Service, ranges: ServiceRanges) -> Write {
    update_claiming(new, move |service, stored, view| service_addresses::claim(service, Some(stored), view, &ranges))
}

fn update_claiming<R: Resource>(new: R, claim: impl Fn(&mut R, &R, &dyn View) -> Result<(), StoreError> + Send + Sync + 'static) -> Write {
    let key = Key::new(R::KIND, &new.meta().namespace, &new.meta().name);
    let expected = new.meta().resource_version;
    Write::new(key.clone(), move |view, current| {
        let current = current.ok_or_else(|| StoreError::NotFound { kind: key.kind, key: key.key.clone() })?;
        check_version(&key, expected, current)?;
        let stored = R::from_object(current).ok_or_else(|| StoreError::Backend(format!("{key} holds another kind")))?;
        let mut merged = R::merge_update(stored, new.clone())
            .map_err(|details| StoreError::Invalid { message: format!("{key} cannot be updated that way"), details })?;
        claim(&mut merged, stored, view)?;
        if &merged == stored { Ok(Change::Keep) } else { Ok(Change::Put(merged.into_object())) }
    })
}

/// Runs `f` on the stored object of type `R` and stores the result, unless `f` leaves it equal.
pub fn modify<R: Resource>(key: Key, f: impl Fn(&dyn View, &mut R) -> Result<(), StoreError> + Send + Sync + 'static) -> Write {
    Write::new(key.clone(), move |view, current| {
        let current = current.ok_or_else(|| StoreError::NotFound { kind: key.kind, key: key.key.clone() })?;
        let stored = R::from_object(current).ok_or_else(|| StoreError::Backend(format!("{key} holds another kind")))?;
        let mut changed = stored.clone();
        f(view, &mut changed)?;
        if &changed == stored { Ok(Change::Keep) } else { Ok(Change::Put(changed.into_object())) }
    })
}

/// Deletes an object; a non-zero `expected` resource_version must match.
pub fn delete(key: Key, expected: u64) -> Write {
    Write::new(key.clone(), move |_, current| {
        let current = current.ok_or_else(|| StoreError::NotFound { kind: key.kind, key: key.key.clone() })?;
        check_version(&key, expected, current)?;
        Ok(Change::Delete)
    })
}

/// A DELETE of a pod: its preconditions and its grace period.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodDelete {
    /// Non-zero: the pod must still be at this resource_version.
    pub resource_version: u64,
    /// The pod must still have this uid (not a newer pod of the same name).
    pub uid: Option<String>,
    /// Seconds the containers get to stop; `None` takes the pod's own grace period.
    pub grace_seconds: Option<i64>,
    /// For a node's token: the node the pod must be bound to.
    pub bound_to: Option<String>,
}

/// Why a pod whose delete was asked for can go at once, without its agent's confirmation:
/// no node runs it (unbound, its node gone or not ready at `now`) or it has finished. `None`
/// when a running agent has containers to stop. `node` and `lease` are the stored objects of
/// its node and its node's lease, if any.
pub fn removable_at_once(pod: &Pod, node: Option<&Object>, lease: Option<&Object>, now: Time, grace: Duration) -> Option<String> {
    let key = pod.metadata.key();
    if !pod.is_bound() {
        return Some(format!("pod {key} is not bound to a node"));
    }
    if pod.status.phase.is_terminal() {
        return Some(format!("pod {key} has {}", pod.status.phase));
    }
    let name = &pod.spec.node_name;
    match node {
        Some(Object::Node(n)) => match n.readiness(as_lease(lease), now, grace) {
            Readiness::Ready => None,
            not_ready => Some(format!("node {name} of pod {key} is not ready: {}", not_ready.explain(grace))),
        },
        Some(_) => Some(format!("node {name} of pod {key} is not a node")),
        None => Some(format!("node {name} of pod {key} no longer exists")),
    }
}

/// Deletes a pod the way Kubernetes does. A pod that no agent has to stop (see
/// [`removable_at_once`]) or a grace of 0 removes it; otherwise the pod is marked
/// terminating (`deletion_timestamp` now, `deletion_grace_period_seconds` the grace) and
/// stays until its agent has stopped the containers and confirms with a grace of 0. On a
/// pod already terminating, a shorter grace shortens it and a longer one changes nothing.
/// `node_monitor_grace` judges whether its node is ready.
pub fn delete_pod(namespace: &str, name: &str, request: PodDelete, now: Time, node_monitor_grace: Duration) -> Write {
    let key = Key::new(Kind::Pod, namespace, name);
    Write::new(key.clone(), move |view, current| {
        let Some(stored @ Object::Pod(pod)) = current else {
            return Err(StoreError::NotFound { kind: Kind::Pod, key: key.key.clone() });
        };
        check_version(&key, request.resource_version, stored)?;
        if let Some(uid) = request.uid.as_deref().filter(|u| *u != pod.metadata.uid) {
            return Err(StoreError::conflict(format!(
                "pod {} has uid {}, not {uid}: it is another pod of the same name, so it was not deleted",
                key.key, pod.metadata.uid
            )));
        }
        if let Some(node) = request.bound_to.as_deref().filter(|n| *n != pod.spec.node_name) {
            return Err(StoreError::conflict(format!("pod {} is no longer bound to node {node}, so that node may not delete it", key.key)));
        }
        let node = view.get(&Key::new(Kind::Node, "", &pod.spec.node_name));
        let lease = view.get(&lease_key(&pod.spec.node_name));
        if request.grace_seconds == Some(0) || removable_at_once(pod, node, lease, now, node_monitor_grace).is_some() {
            return Ok(Change::Delete);
        }
        let mut terminating = pod.clone();
        match pod.metadata.deletion_grace_period_seconds.filter(|_| pod.metadata.deletion_timestamp.is_some()) {
            Some(current) => match request.grace_seconds {
                Some(shorter) if shorter < current => terminating.metadata.deletion_grace_period_seconds = Some(shorter),
                _ => return Ok(Change::Keep),
            },
            None => {
                let grace = request.grace_seconds.or(pod.spec.termination_grace_period_seconds).unwrap_or(DEFAULT_GRACE_SECONDS);
                if grace == 0 {
                    return Ok(Change::Delete);
                }
                terminating.metadata.deletion_timestamp = pod.metadata.deletion_timestamp.or(Some(now));
                terminating.metadata.deletion_grace_period_seconds = Some(grace);
            }
        }
        Ok(Change::Put(Object::Pod(terminating)))
    })
}

/// Binds a pod to a node, and records the `Scheduled` event in the same transaction.
///
/// The compare-and-swap: the pod's node_name must still be empty, and the node must still
/// have room for the pod's requests next to every pod already bound to it. So neither two
/// schedulers nor the fast path and the sweep can bind a pod twice or oversell a node.
pub fn bind(namespace: &str, name: &str, node: &str, uid: &str, source: &str, now: Time) -> Txn {
    let key = Key::new(Kind::Pod, namespace, name);
    let node_name = node.to_string();
    let expected_uid = uid.to_string();
    let (event_namespace, event_name) = (namespace.to_string(), name.to_string());
    let source_name = source.to_string();
    let bind = Write::new(key.clone(), move |view, current| {
        let Some(Object::Pod(pod)) = current else {
            return Err(StoreError::NotFound { kind: Kind::Pod, key: key.key.clone() });
        };
        if !expected_uid.is_empty() && expected_uid != pod.metadata.uid {
            return Err(StoreError::conflict(format!(
                "pod {} was replaced: the binding is for uid {expected_uid}, the pod now has uid {}",
                key.key, pod.metadata.uid
            )));
        }
        if !pod.spec.node_name.is_empty() {
            return Err(StoreError::conflict(format!("pod {} is already bound to node {}", key.key, pod.spec.node_name)));
        }
        if pod.status.phase != PodPhase::Pending {
            return Err(StoreError::conflict(format!("pod {} is {} and can no longer be bound", key.key, pod.status.phase)));
        }
        if pod.metadata.deletion_timestamp.is_some() {
            return Err(StoreError::conflict(format!("pod {} is being deleted and can no longer be bound", key.key)));
        }
        let Some(Object::Node(target)) = view.get(&Key::new(Kind::Node, "", &node_name)) else {
            return Err(StoreError::invalid("target.name", format!("node {node_name:?} does not exist")));
        };
        let bound = view.pods_on_node(&node_name).into_iter().filter_map(|o| match o {
            Object::Pod(p) => Some(p),
            _ => None,
        });
        check_room(target, bound, pod)
            .map_err(|why| StoreError::conflict(format!("node {node_name} has no room for pod {}: {why}", key.key)))?;
        let mut bound = pod.clone();
        bound.spec.node_name = node_name.clone();
        set_condition(
            &mut bound.status.conditions,
            Condition { type_: conditions::POD_SCHEDULED.into(), status: conditions::TRUE.into(), ..Condition::default() },
            now,
        );
        bound.status.reason.clear();
        bound.status.message.clear();
        Ok(Change::Put(Object::Pod(bound)))
    });
    let involved = shared::model::ObjectReference {
        kind: "Pod".into(),
        namespace: event_namespace.clone(),
        name: event_name.clone(),
        uid: uid.to_string(),
    };
    let event = events::new_event(
        involved,
        event_types::NORMAL,
        "Scheduled",
        format!("Successfully assigned {event_namespace}/{event_name} to {node}"),
        &source_name,
    );
    Txn::new().with(bind).with(events::record(event, now))
}

/// Records that the scheduler found no node: PodScheduled=False/Unschedulable with its
/// message on the pod, and the Warning `FailedScheduling` event (bumped on repeats).
pub fn mark_unschedulable(pod: &Pod, message: &str, now: Time) -> Txn {
    let key = Key::new(Kind::Pod, &pod.metadata.namespace, &pod.metadata.name);
    let uid = pod.metadata.uid.clone();
    let condition_message = message.to_string();
    let condition = modify::<Pod>(key, move |_, p| {
        if p.metadata.uid != uid || !p.spec.node_name.is_empty() {
            return Err(StoreError::conflict(format!("pod {} changed while it was being scheduled", p.metadata.key())));
        }
        set_condition(
            &mut p.status.conditions,
            Condition {
                type_: conditions::POD_SCHEDULED.into(),
                status: conditions::FALSE.into(),
                reason: conditions::UNSCHEDULABLE.into(),
                message: condition_message.clone(),
                ..Condition::default()
            },
            now,
        );
        Ok(())
    });
    let event = events::new_event(
        events::reference(&Object::Pod(pod.clone())),
        event_types::WARNING,
        "FailedScheduling",
        message,
        SOURCE_SCHEDULER,
    );
    Txn::new().with(condition).with(events::record(event, now))
}

/// Replaces a pod's status (the `/status` subresource); CAS when `expected` is non-zero.
/// The phase cannot leave a terminal state, and the scheduler's PodScheduled condition
/// is kept when the writer leaves it out.
pub fn set_pod_status(namespace: &str, name: &str, status: PodStatus, expected: u64) -> Write {
    let key = Key::new(Kind::Pod, namespace, name);
    Write::new(key.clone(), move |_, current| {
        let Some(Object::Pod(pod)) = current else {
            return Err(StoreError::NotFound { kind: Kind::Pod, key: key.key.clone() });
        };
        check_version(&key, expected, current.expect("matched above"))?;
        if pod.status.phase.is_terminal() && status.phase != pod.status.phase {
            return Err(StoreError::invalid(
                "status.phase",
                format!("pod {} has already {} and cannot become {}", key.key, pod.status.phase, status.phase),
            ));
        }
        if status.phase != PodPhase::Pending && pod.spec.node_name.is_empty() {
            return Err(StoreError::invalid(
                "status.phase",
                format!("pod {} is not bound to a node yet, so it cannot be {}", key.key, status.phase),
            ));
        }
        let mut updated = pod.clone();
        let mut status = status.clone();
        if find_condition(&status.conditions, conditions::POD_SCHEDULED).is_none()
            && let Some(scheduled) = find_condition(&pod.status.conditions, conditions::POD_SCHEDULED)
        {
            status.conditions.insert(0, scheduled.clone());
        }
        updated.status = status;
        if updated == *pod { Ok(Change::Keep) } else { Ok(Change::Put(Object::Pod(updated))) }
    })
}

/// The key of a node's lease: cluster-scoped, named after the node.
pub fn lease_key(node: &str) -> Key {
    Key::new(Kind::Lease, "", node)
}

/// The stored object as a lease, if it is one.
pub fn as_lease(object: Option<&Object>) -> Option<&Lease> {
    match object {
        Some(Object::Lease(l)) => Some(l),
        _ => None,
    }
}

/// Registers a node: creates it, or updates what the agent owns (capacity, allocatable,
/// info, addresses, conditions) and keeps what admins set (cordon, taints). Its labels are
/// [`registered_labels`]: a node's own token sets them only when it creates the node, an
/// admin's are merged in, and `kubernetes.io/hostname` is always its name. Registration is
/// the agent's first proof of life, so it stamps the node's status heartbeat and renews its
/// lease (creating it) in the same transaction: a node is judged ready from the moment it registers (see
/// `shared::readiness`), never left waiting for a second message. `grace` is the server's
/// node monitor grace, written into the lease.
pub fn register_node(node: Node, registrant: Registrant, now: Time, grace: Duration) -> Txn {
    let name = node.metadata.name.clone();
    let key = Key::new(Kind::Node, "", &name);
    let register = Write::new(key, move |_, current| {
        let mut node = node.clone();
        match current {
            Some(Object::Node(stored)) => {
                let mut updated = stored.clone();
                updated.metadata.labels =
                    registered_labels(&stored.metadata.name, Some(&stored.metadata.labels), node.metadata.labels, registrant);
                updated.metadata.annotations.extend(node.metadata.annotations);
                updated.status.capacity = node.status.capacity;
                updated.status.allocatable = node.status.allocatable;
                updated.status.node_info = node.status.node_info;
                updated.status.address = node.status.address;
                updated.status.agent_endpoint = node.status.agent_endpoint;
                for condition in node.status.conditions {
                    set_condition(&mut updated.status.conditions, condition, now);
                }
                updated.status.last_heartbeat = Some(now);
                default_allocatable(&mut updated);
                Ok(Change::Put(Object::Node(updated)))
            }
            _ => {
                crate::resources::stamp_new(&mut node, now);
                node.metadata.labels = registered_labels(&node.metadata.name, None, std::mem::take(&mut node.metadata.labels), registrant);
                node.status.last_heartbeat = Some(now);
                let conditions = std::mem::take(&mut node.status.conditions);
                for condition in conditions {
                    set_condition(&mut node.status.conditions, condition, now);
                }
                Ok(Change::Put(Object::Node(node)))
            }
        }
    });
    Txn::new().with(register).with(renew_lease(&name, now, grace))
}

/// A renewal of node `name`'s lease at `now`: the one write of the agent's frequent
/// heartbeat, which leaves the Node alone. Creates the lease of a node that has none; a
/// node that does not exist (deleted by an admin) is not found, so its agent registers again.
pub fn renew_lease(name: &str, now: Time, grace: Duration) -> Write {
    let name = name.to_string();
    Write::new(lease_key(&name), move |view, current| {
        if view.get(&Key::new(Kind::Node, "", &name)).is_none() {
            return Err(StoreError::NotFound { kind: Kind::Node, key: name.clone() });
        }
        let spec = LeaseSpec {
            holder_identity: name.clone(),
            lease_duration_seconds: lease_seconds(grace),
            renew_time: Some(now),
            ..LeaseSpec::default()
        };
        let lease = match current {
            Some(Object::Lease(stored)) => Lease { spec, ..stored.clone() },
            _ => {
                let mut lease = Lease { metadata: ObjectMeta::named("", &name), spec, ..Lease::default() };
                crate::resources::stamp_new(&mut lease, now);
                lease
            }
        };
        Ok(Change::Put(Object::Lease(lease)))
    })
}

/// Stores `lease` at `key` if the stored lease is still at resource_version `expected`, or,
/// when `expected` is 0, if there is none: the compare-and-swap of every acquire, renewal
/// and release of a leader election, which a candidate computed from what it read.
pub fn swap_lease(key: Key, expected: u64, lease: Lease) -> Write {
    Write::new(key.clone(), move |_, current| {
        let stored = current.map_or(0, |o| o.metadata().resource_version);
        if stored != expected {
            return Err(StoreError::conflict(format!("{key} changed since it was read: it is at {stored}, not {expected}")));
        }
        Ok(Change::Put(Object::Lease(lease.clone())))
    })
}

/// A duration in whole seconds, rounded up, as a lease's `lease_duration_seconds` holds it.
pub fn lease_seconds(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs() + u64::from(duration.subsec_nanos() > 0)).unwrap_or(i64::MAX)
}

/// Deletes a node and its lease.
pub fn delete_node(name: &str, expected: u64) -> Txn {
    let lease = Write::new(lease_key(name), |_, current| Ok(if current.is_some() { Change::Delete } else { Change::Keep }));
    Txn::new().with(delete(Key::new(Kind::Node, "", name), expected)).with(lease)
}

/// A status heartbeat: stamps `last_heartbeat`, sets the reported conditions (their heartbeat time
/// too) and, when present, capacity and allocatable. The agent sends it when its status
/// changed or every few minutes; its frequent proof of life is [`renew_lease`].
pub fn heartbeat(name: &str, beat: Heartbeat, now: Time) -> Write {
    modify::<Node>(Key::new(Kind::Node, "", name), move |_, node| {
        node.status.last_heartbeat = Some(now);
        for condition in &beat.conditions {
            let condition = Condition { last_heartbeat_time: Some(now), ..condition.clone() };
            set_condition(&mut node.status.conditions, condition, now);
        }
        if let Some(capacity) = beat.capacity {
            node.status.capacity = capacity;
        }
        if let Some(allocatable) = beat.allocatable {
            node.status.allocatable = allocatable;
        }
        default_allocatable(node);
        Ok(())
    })
}

/// The agent's `/status` for its node: everything but cordon and taints, which admins own.
pub fn set_node_status(name: &str, status: shared::model::NodeStatus, expected: u64, now: Time) -> Write {
    let key = Key::new(Kind::Node, "", name);
    let check_key = key.clone();
    modify::<Node>(key, move |_, node| {
        check_version(&check_key, expected, &Object::Node(node.clone()))?;
        let (unschedulable, taints) = (node.status.unschedulable, std::mem::take(&mut node.status.taints));
        let old_conditions = std::mem::take(&mut node.status.conditions);
        node.status = status.clone();
        node.status.unschedulable = unschedulable;
        node.status.taints = taints;
        let reported = std::mem::replace(&mut node.status.conditions, old_conditions);
        for condition in reported {
            set_condition(&mut node.status.conditions, condition, now);
        }
        default_allocatable(node);
        Ok(())
    })
}

/// Cordons (`true`) or uncordons a node.
pub fn set_cordon(name: &str, unschedulable: bool) -> Write {
    modify::<Node>(Key::new(Kind::Node, "", name), move |_, node| {
        node.status.unschedulable = unschedulable;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use shared::model::{NodeResources, ObjectMeta};

    use super::*;
    use crate::store::{CachedStore, Store};

    const GRACE: Duration = shared::readiness::DEFAULT_NODE_MONITOR_GRACE;

    fn node(name: &str, cpu: i64, pods: i64) -> Node {
        let mut n = Node { kind: "Node".into(), metadata: ObjectMeta::named("", name), ..Node::default() };
        n.status.capacity = NodeResources { cpu, memory: 1 << 30, pods };
        n
    }

    fn pod(name: &str, cpu: i64) -> Pod {
        let mut p: Pod = serde_json::from_str(include_str!("../../examples/pod.json")).unwrap();
        p.metadata.name = name.into();
        p.spec.containers[0].resources.cpu = cpu;
        p.spec.containers[0].ports.clear();
        crate::resources::stamp_new(&mut p, chrono::Utc::now());
        p
    }

    async fn setup() -> CachedStore {
        let store = CachedStore::in_memory(1000);
        let ns = shared::model::Namespace { metadata: ObjectMeta::named("", "default"), ..Default::default() };
        store.commit(Txn::new().with(create(ns))).await.unwrap();
        store.commit(register_node(node("n1", 1000, 10), Registrant::Admin, chrono::Utc::now(), GRACE)).await.unwrap();
        store
    }

    #[tokio::test]
    async fn bind_is_a_cas_on_an_empty_node_name() {
        let store = setup().await;
        let p = pod("a", 100);
        let uid = p.metadata.uid.clone();
        store.commit(Txn::new().with(create(p))).await.unwrap();
        let now = chrono::Utc::now();
        store.commit(bind("default", "a", "n1", &uid, SOURCE_SCHEDULER, now)).await.unwrap();
        let err = store.commit(bind("default", "a", "n1", &uid, SOURCE_SCHEDULER, now)).await.unwrap_err();
        assert!(matches!(&err, StoreError::Conflict(m) if m.contains("already bound to node n1")), "{err}");
        let err = store.commit(bind("default", "missing", "n1", "", SOURCE_SCHEDULER, now)).await.unwrap_err();
        assert!(matches!(err, StoreError::NotFound { .. }));
    }

    #[tokio::test]
    async fn bind_never_oversells_a_node_even_within_one_batch() {
        let store = setup().await;
        for i in 0..8 {
            store.commit(Txn::new().with(create(pod(&format!("p{i}"), 300)))).await.unwrap();
        }
        let binds = (0..8).map(|i| store.commit(bind("default", &format!("p{i}"), "n1", "", "test", chrono::Utc::now())));
        let results = futures::future::join_all(binds).await;
        let bound = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(bound, 3, "1000m fits three pods of 300m");
        let rejected = results.iter().find_map(|r| r.as_ref().err()).unwrap();
        assert!(rejected.to_string().contains("the pod requests cpu 300m; 900m of 1 already requested, 100m free"), "{rejected}");
    }

    /// Registers node `ready` with Ready=True.
    async fn register_ready_node(store: &CachedStore) {
        let mut n = node("ready", 4000, 10);
        n.status.conditions.push(Condition {
            type_: conditions::NODE_READY.into(),
            status: conditions::TRUE.into(),
            ..Condition::default()
        });
        store.commit(register_node(n, Registrant::Admin, chrono::Utc::now(), GRACE)).await.unwrap();
    }

    async fn ready_node_with_bound_pod(store: &CachedStore, name: &str) -> Pod {
        register_ready_node(store).await;
        let p = pod(name, 100);
        store.commit(Txn::new().with(create(p.clone()))).await.unwrap();
        store.commit(bind("default", name, "ready", &p.metadata.uid, SOURCE_SCHEDULER, chrono::Utc::now())).await.unwrap();
        stored_pod(store, name).unwrap()
    }

    fn stored_pod(store: &CachedStore, name: &str) -> Option<Pod> {
        match store.get(&Key::new(Kind::Pod, "default", name)).as_deref() {
            Some(Object::Pod(p)) => Some(p.clone()),
            _ => None,
        }
    }

    fn grace(seconds: i64) -> PodDelete {
        PodDelete { grace_seconds: Some(seconds), ..PodDelete::default() }
    }

    #[tokio::test]
    async fn a_pod_on_a_ready_node_is_marked_terminating_and_only_a_shorter_grace_or_zero_changes_that() {
        let store = setup().await;
        let bound = ready_node_with_bound_pod(&store, "a").await;
        let t0 = chrono::Utc::now();
        store.commit(Txn::new().with(delete_pod("default", "a", PodDelete::default(), t0, GRACE))).await.unwrap();
        let terminating = stored_pod(&store, "a").expect("a terminating pod stays");
        assert_eq!(terminating.metadata.deletion_timestamp, Some(t0));
        assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(DEFAULT_GRACE_SECONDS));
        assert_eq!(terminating.display_status(), "Terminating");

        let revision = store.revision();
        let later = t0 + chrono::Duration::seconds(3);
        for request in [PodDelete::default(), grace(60), grace(DEFAULT_GRACE_SECONDS)] {
            store.commit(Txn::new().with(delete_pod("default", "a", request, later, GRACE))).await.unwrap();
        }
        assert_eq!(store.revision(), revision, "no new revision for a delete that changes nothing");

        let stale = PodDelete { uid: Some("an-older-pod".into()), grace_seconds: Some(0), ..PodDelete::default() };
        let err = store.commit(Txn::new().with(delete_pod("default", "a", stale, later, GRACE))).await.unwrap_err();
        assert!(err.to_string().contains("is another pod of the same name"), "{err}");
        assert!(stored_pod(&store, "a").is_some());

        store.commit(Txn::new().with(delete_pod("default", "a", grace(5), later, GRACE))).await.unwrap();
        let shortened = stored_pod(&store, "a").unwrap();
        assert_eq!((shortened.metadata.deletion_timestamp, shortened.metadata.deletion_grace_period_seconds), (Some(t0), Some(5)));

        let confirm = PodDelete { uid: Some(bound.metadata.uid.clone()), grace_seconds: Some(0), ..PodDelete::default() };
        store.commit(Txn::new().with(delete_pod("default", "a", confirm, later, GRACE))).await.unwrap();
        assert!(stored_pod(&store, "a").is_none(), "grace 0 removes it");
    }

    #[tokio::test]
    async fn the_pod_spec_grace_is_the_default_and_zero_removes_at_once() {
        let store = setup().await;
        register_ready_node(&store).await;
        for (name, seconds) in [("five", 5), ("zero", 0)] {
            let mut p = pod(name, 1);
            p.spec.termination_grace_period_seconds = Some(seconds);
            store.commit(Txn::new().with(create(p))).await.unwrap();
            store.commit(bind("default", name, "ready", "", SOURCE_SCHEDULER, chrono::Utc::now())).await.unwrap();
            store.commit(Txn::new().with(delete_pod("default", name, PodDelete::default(), chrono::Utc::now(), GRACE))).await.unwrap();
        }
        assert_eq!(stored_pod(&store, "five").unwrap().metadata.deletion_grace_period_seconds, Some(5));
        assert!(stored_pod(&store, "zero").is_none());
    }

    #[tokio::test]
    async fn a_pod_no_agent_runs_is_removed_at_once() {
        let store = setup().await;
        let now = chrono::Utc::now();
        // Unbound; bound to n1, which never reported Ready; bound to a node that is gone; finished.
        store.commit(Txn::new().with(create(pod("unbound", 1)))).await.unwrap();
        store.commit(Txn::new().with(create(pod("on-not-ready", 1)))).await.unwrap();
        store.commit(bind("default", "on-not-ready", "n1", "", SOURCE_SCHEDULER, now)).await.unwrap();
        let mut orphan = pod("orphan", 1);
        orphan.spec.node_name = "gone".into();
        store.commit(Txn::new().with(create(orphan))).await.unwrap();
        ready_node_with_bound_pod(&store, "finished").await;
        let mut status = stored_pod(&store, "finished").unwrap().status;
        status.phase = PodPhase::Succeeded;
        store.commit(Txn::new().with(set_pod_status("default", "finished", status, 0))).await.unwrap();
        for name in ["unbound", "on-not-ready", "orphan", "finished"] {
            let outcome = store.commit(Txn::new().with(delete_pod("default", name, grace(30), now, GRACE))).await.unwrap();
            assert!(matches!(outcome[0], crate::store::Outcome::Deleted(_)), "{name}");
        }
        assert_eq!(store.count(Kind::Pod), 0);
    }

    #[tokio::test]
    async fn a_terminating_pod_is_never_bound() {
        let store = setup().await;
        let mut p = pod("a", 1);
        p.metadata.deletion_timestamp = Some(chrono::Utc::now());
        store.commit(Txn::new().with(create(p))).await.unwrap();
        let err = store.commit(bind("default", "a", "n1", "", SOURCE_SCHEDULER, chrono::Utc::now())).await.unwrap_err();
        assert!(err.to_string().contains("is being deleted"), "{err}");
    }

    #[tokio::test]
    async fn an_unknown_namespace_is_refused() {
        let store = setup().await;
        let mut p = pod("a", 1);
        p.metadata.namespace = "nowhere".into();
        let err = store.commit(Txn::new().with(create(p))).await.unwrap_err();
        assert!(matches!(err, StoreError::NotFound { kind: Kind::Namespace, .. }));
    }
}
