//! Events with deduplication: one event per (involved object, reason, source, and for a
//! node's agent the message, which names the container), whose count and last_timestamp
//! grow on repeats. The event's name is derived from that key, so a repeat is a
//! read-modify-write of one known key rather than a search.

use shared::model::{Event, Kind, NODE_SOURCE_PREFIX, Object, ObjectMeta, ObjectReference, Time};

use crate::store::{Change, Key, Write};

pub const SOURCE_API: &str = "api-server";
pub const SOURCE_SCHEDULER: &str = "scheduler";
pub const SOURCE_NODE_CONTROLLER: &str = "node-controller";
pub const SOURCE_DEPLOYMENT_CONTROLLER: &str = "deployment-controller";
pub const SOURCE_REPLICASET_CONTROLLER: &str = "replicaset-controller";
pub const SOURCE_POD_GC: &str = "pod-gc-controller";

/// Where events about cluster-scoped objects (nodes, namespaces) are kept.
pub const CLUSTER_EVENTS_NAMESPACE: &str = "default";

/// A reference to an object, for an event's `involved_object`.
pub fn reference(object: &Object) -> ObjectReference {
    let meta = object.metadata();
    ObjectReference {
        kind: object.kind().as_str().to_string(),
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
        uid: meta.uid.clone(),
    }
}

/// FNV-1a: a stable hash (std's hasher may change between Rust releases).
fn fnv1a(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain(std::iter::once(0)) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// The namespace and name an event about `involved` with `reason` from `source` lives at.
/// A node's agent reports each container apart ("Created container web"), as Kubernetes'
/// `fieldPath` keeps them apart, the deployment controller each scaling step ("Scaled
/// up replica set web-5d… from 1 to 2"), the rollout `kubectl describe deploy` lists, and
/// the ReplicaSet controller each pod ("Created pod: web-5d…-x7k2p"): for them the message
/// is part of the key, so that only a repeat of the same words bumps the count, as
/// Kubernetes' event correlator does. Others fold by reason.
pub fn event_key(involved: &ObjectReference, reason: &str, source: &str, message: &str) -> (String, String) {
    let namespace = if involved.namespace.is_empty() { CLUSTER_EVENTS_NAMESPACE.to_string() } else { involved.namespace.clone() };
    let apart = source.starts_with(NODE_SOURCE_PREFIX) || [SOURCE_DEPLOYMENT_CONTROLLER, SOURCE_REPLICASET_CONTROLLER].contains(&source);
    let by_message = if apart { message } else { "" };
    let hash = fnv1a(&[&involved.kind, &involved.namespace, &involved.name, &involved.uid, reason, source, by_message]);
    let prefix: String = involved.name.chars().take(200).collect();
    (namespace, format!("{prefix}.{hash:016x}"))
}

/// A write that records `event`: created with count 1, or, when the same [`event_key`] was
/// seen before, the stored one with count + 1, the new message and the new last time.
/// The time is when the reporter says it happened (`last_timestamp`), never later than
/// `now`, else `now`: an agent's event sent without waiting may arrive after the status it
/// preceded (Started before Running), and lists order events by that time.
pub fn record(mut event: Event, now: Time) -> Write {
    let (namespace, name) = event_key(&event.involved_object, &event.reason, &event.source, &event.message);
    event.kind = "Event".into();
    let happened = event.last_timestamp.filter(|at| *at <= now).unwrap_or(now);
    let key = Key::new(Kind::Event, &namespace, &name);
    Write::new(key, move |_, current| {
        let stored = match current {
            Some(Object::Event(previous)) => {
                let mut bumped = previous.clone();
                bumped.count = previous.count.saturating_add(1);
                bumped.message = event.message.clone();
                bumped.type_ = event.type_.clone();
                bumped.last_timestamp = previous.last_timestamp.max(Some(happened));
                bumped
            }
            _ => {
                let mut event = event.clone();
                event.metadata = ObjectMeta {
                    name: name.clone(),
                    namespace: namespace.clone(),
                    uid: uuid::Uuid::new_v4().to_string(),
                    created_at: Some(now),
                    generation: 1,
                    labels: std::mem::take(&mut event.metadata.labels),
                    annotations: std::mem::take(&mut event.metadata.annotations),
                    ..ObjectMeta::default()
                };
                event.count = 1;
                event.first_timestamp = Some(event.first_timestamp.filter(|at| *at <= happened).unwrap_or(happened));
                event.last_timestamp = Some(happened);
                event
            }
        };
        Ok(Change::Put(Object::Event(stored)))
    })
}

/// Builds the event a component reports about `involved`.
pub fn new_event(involved: ObjectReference, type_: &str, reason: &str, message: impl Into<String>, source: &str) -> Event {
    Event {
        kind: "Event".into(),
        type_: type_.to_string(),
        reason: reason.to_string(),
        message: message.into(),
        involved_object: involved,
        source: source.to_string(),
        count: 1,
        ..Event::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{CachedStore, Store, Txn};
    use shared::model::event_types;

    #[tokio::test]
    async fn repeats_bump_one_event() {
        let store = CachedStore::in_memory(100);
        let involved = ObjectReference { kind: "Pod".into(), namespace: "default".into(), name: "web".into(), uid: "u1".into() };
        let t0 = chrono::Utc::now();
        for i in 0..3 {
            let e = new_event(involved.clone(), event_types::WARNING, "FailedScheduling", format!("try {i}"), SOURCE_SCHEDULER);
            store.commit(Txn::new().with(record(e, t0 + chrono::Duration::seconds(i)))).await.unwrap();
        }
        let other = new_event(involved.clone(), event_types::NORMAL, "Scheduled", "ok", SOURCE_SCHEDULER);
        store.commit(Txn::new().with(record(other, t0))).await.unwrap();
        let (_, events) = store.list(Kind::Event, Some("default"));
        assert_eq!(events.len(), 2);
        let failed = events
            .iter()
            .find_map(|e| match &**e {
                Object::Event(e) if e.reason == "FailedScheduling" => Some(e.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(failed.count, 3);
        assert_eq!(failed.message, "try 2");
        assert_eq!(failed.first_timestamp, Some(t0));
        assert_eq!(failed.last_timestamp, Some(t0 + chrono::Duration::seconds(2)));
    }

    #[tokio::test]
    async fn an_event_is_timed_when_its_reporter_saw_it_never_in_the_future() {
        let store = CachedStore::in_memory(100);
        let involved = ObjectReference { kind: "Pod".into(), namespace: "default".into(), name: "web".into(), uid: "u1".into() };
        let now = chrono::Utc::now();
        let reported = |reason: &str, at: Time| Event {
            first_timestamp: Some(at),
            last_timestamp: Some(at),
            ..new_event(involved.clone(), event_types::NORMAL, reason, reason, "agent/n1")
        };
        // Sent without waiting, it arrives after a later status: it keeps its own time.
        let earlier = now - chrono::Duration::milliseconds(300);
        store.commit(Txn::new().with(record(reported("Started", earlier), now))).await.unwrap();
        store.commit(Txn::new().with(record(reported("Pulled", now + chrono::Duration::hours(1)), now))).await.unwrap();
        let (_, events) = store.list(Kind::Event, Some("default"));
        let at = |reason: &str| {
            events
                .iter()
                .find_map(|e| match &**e {
                    Object::Event(e) if e.reason == reason => Some((e.first_timestamp, e.last_timestamp)),
                    _ => None,
                })
                .unwrap()
        };
        assert_eq!(at("Started"), (Some(earlier), Some(earlier)));
        assert_eq!(at("Pulled"), (Some(now), Some(now)), "a clock ahead of the server's is not believed");
        // A repeat that arrives late does not move the last time back.
        store.commit(Txn::new().with(record(reported("Started", earlier - chrono::Duration::seconds(5)), now))).await.unwrap();
        let (_, events) = store.list(Kind::Event, Some("default"));
        let started = events.iter().find_map(|e| match &**e {
            Object::Event(e) if e.reason == "Started" => Some(e.clone()),
            _ => None,
        });
        assert_eq!(started.map(|e| (e.count, e.last_timestamp)), Some((2, Some(earlier))));
    }

    #[test]
    fn a_nodes_events_about_two_containers_and_a_rollouts_steps_stay_apart_and_others_fold_by_reason() {
        let pod = ObjectReference { kind: "Pod".into(), namespace: "default".into(), name: "web".into(), uid: "u".into() };
        let agent = shared::model::node_event_source("n1");
        let created = |container: &str| event_key(&pod, "Created", &agent, &format!("Created container {container}"));
        assert_ne!(created("web"), created("side"));
        assert_eq!(created("web"), created("web"));
        let scheduler = |message: &str| event_key(&pod, "FailedScheduling", SOURCE_SCHEDULER, message);
        assert_eq!(scheduler("0/1 nodes are available"), scheduler("0/2 nodes are available"));
        let deployment = ObjectReference { kind: "Deployment".into(), ..pod.clone() };
        let scaled = |message: &str| event_key(&deployment, "ScalingReplicaSet", SOURCE_DEPLOYMENT_CONTROLLER, message);
        assert_ne!(scaled("Scaled up replica set web-a from 0 to 1"), scaled("Scaled down replica set web-b from 3 to 2"));
    }
}
