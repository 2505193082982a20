//! The dashboard's cache of the cluster: one collection per watched kind, filled by a list
//! and kept current by watch events under `shared::cache`'s staleness rule, the client
//! crate's too. `Cluster` is a yew `Reducible`; every change arrives as a [`ClusterAction`],
//! so the whole cache is a pure function that native tests drive.

use std::rc::Rc;

use shared::api::WatchEvent;
use shared::cache::Cache;
/// The kinds the dashboard caches are `shared`'s resources.
pub use shared::model::Resource;
use shared::model::{Deployment, Event, Kind, Node, Object, Pod, ReplicaSet, Service};
use yew::Reducible;

/// How a collection's stream is doing, shown as the connection light.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SyncState {
    /// Nobody watches this kind right now; the items are as last seen.
    #[default]
    Idle,
    Listing,
    /// The watch stream is open and events flow.
    Live,
    /// The stream broke; the watcher waits, then resumes from the last resource version.
    Retrying {
        attempt: u32,
        error: String,
    },
    /// The server asked for a token.
    Unauthorized,
}

/// Every cached object of one kind, keyed by `namespace/name`. Items sit behind `Rc` so a
/// new state shares every unchanged object with the old one, and views can compare by pointer.
#[derive(Debug, Clone)]
pub struct Collection<T> {
    pub items: Rc<Cache<Rc<T>>>,
    /// The revision the cache has reached: where a resumed watch starts.
    pub resource_version: u64,
    pub sync: SyncState,
    /// Whether a list has filled this collection at least once.
    pub listed: bool,
}

/// Two collections are equal when they share the same item map: a changed map is always a
/// new allocation, so this is exact for "did anything change" and costs nothing.
impl<T> PartialEq for Collection<T> {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.items, &other.items)
            && self.resource_version == other.resource_version
            && self.sync == other.sync
            && self.listed == other.listed
    }
}

impl<T> Default for Collection<T> {
    fn default() -> Self {
        Collection { items: Rc::default(), resource_version: 0, sync: SyncState::Idle, listed: false }
    }
}

impl<T: Resource> Collection<T> {
    pub fn get(&self, key: &str) -> Option<&Rc<T>> {
        self.items.get(key)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn values(&self) -> impl Iterator<Item = &Rc<T>> {
        self.items.values()
    }

    /// Replaces everything with a fresh list: objects deleted while the watch was away
    /// disappear here, which is why a 410 leads to a re-list.
    fn replace(&mut self, resource_version: u64, items: Vec<Object>) {
        let mut cache = Cache::default();
        cache.replace(items.into_iter().filter_map(T::try_from_object).map(Rc::new));
        self.items = Rc::new(cache);
        self.resource_version = resource_version;
        self.listed = true;
    }

    /// Applies a batch of watch events in order. Returns whether anything changed. The item
    /// map is copied only for an event the cache takes, so a replay or a bookmark shares it.
    fn apply(&mut self, events: Vec<WatchEvent>) -> bool {
        let mut changed = false;
        for event in events {
            if event.resource_version > self.resource_version {
                self.resource_version = event.resource_version;
                changed = true;
            }
            let Some(object) = event.object.and_then(T::try_from_object).map(Rc::new) else { continue };
            if self.items.effect(event.type_, &object).is_some() {
                Rc::make_mut(&mut self.items).apply(event.type_, object);
                changed = true;
            }
        }
        changed
    }
}

/// The cached cluster.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cluster {
    pub pods: Collection<Pod>,
    pub nodes: Collection<Node>,
    pub deployments: Collection<Deployment>,
    pub replica_sets: Collection<ReplicaSet>,
    pub services: Collection<Service>,
    pub events: Collection<Event>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ClusterAction {
    /// A list answered: replace the kind's collection.
    Listed { kind: Kind, resource_version: u64, items: Vec<Object> },
    /// Watch events, in stream order (one network chunk may carry several).
    Watched { kind: Kind, events: Vec<WatchEvent> },
    /// The kind's stream changed state.
    Sync { kind: Kind, sync: SyncState },
}

impl Cluster {
    /// The resource version a resumed watch of `kind` starts from, 0 when never listed.
    pub fn resource_version(&self, kind: Kind) -> u64 {
        match kind {
            Kind::Pod => self.pods.resource_version,
            Kind::Node => self.nodes.resource_version,
            Kind::Deployment => self.deployments.resource_version,
            Kind::ReplicaSet => self.replica_sets.resource_version,
            Kind::Service => self.services.resource_version,
            Kind::Event => self.events.resource_version,
            // Not watched: the dashboard reads node readiness from the Ready condition, and
            // shows no configuration.
            Kind::Namespace | Kind::Lease | Kind::ConfigMap | Kind::Secret => 0,
        }
    }

    /// Applies one action in place; returns whether the state changed.
    pub fn update(&mut self, action: ClusterAction) -> bool {
        match action {
            ClusterAction::Listed { kind, resource_version, items } => {
                match kind {
                    Kind::Pod => self.pods.replace(resource_version, items),
                    Kind::Node => self.nodes.replace(resource_version, items),
                    Kind::Deployment => self.deployments.replace(resource_version, items),
                    Kind::ReplicaSet => self.replica_sets.replace(resource_version, items),
                    Kind::Service => self.services.replace(resource_version, items),
                    Kind::Event => self.events.replace(resource_version, items),
                    Kind::Namespace | Kind::Lease | Kind::ConfigMap | Kind::Secret => return false,
                }
                true
            }
            ClusterAction::Watched { kind, events } => match kind {
                Kind::Pod => self.pods.apply(events),
                Kind::Node => self.nodes.apply(events),
                Kind::Deployment => self.deployments.apply(events),
                Kind::ReplicaSet => self.replica_sets.apply(events),
                Kind::Service => self.services.apply(events),
                Kind::Event => self.events.apply(events),
                Kind::Namespace | Kind::Lease | Kind::ConfigMap | Kind::Secret => false,
            },
            ClusterAction::Sync { kind, sync } => {
                let slot = match kind {
                    Kind::Pod => &mut self.pods.sync,
                    Kind::Node => &mut self.nodes.sync,
                    Kind::Deployment => &mut self.deployments.sync,
                    Kind::ReplicaSet => &mut self.replica_sets.sync,
                    Kind::Service => &mut self.services.sync,
                    Kind::Event => &mut self.events.sync,
                    Kind::Namespace | Kind::Lease | Kind::ConfigMap | Kind::Secret => return false,
                };
                if *slot == sync {
                    return false;
                }
                *slot = sync;
                true
            }
        }
    }
}

impl Reducible for Cluster {
    type Action = ClusterAction;

    fn reduce(self: Rc<Self>, action: ClusterAction) -> Rc<Self> {
        let mut next = (*self).clone();
        if next.update(action) { Rc::new(next) } else { self }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use shared::api::WatchEventType;
    use shared::model::{ObjectMeta, PodPhase, PodStage};

    pub fn pod(name: &str, rv: u64, node: &str, phase: PodPhase) -> Pod {
        let mut pod = Pod { kind: "Pod".into(), metadata: ObjectMeta::named("default", name), ..Default::default() };
        pod.metadata.resource_version = rv;
        pod.spec.node_name = node.into();
        pod.status.phase = phase;
        pod
    }

    fn event(type_: WatchEventType, rv: u64, object: Option<Pod>) -> WatchEvent {
        WatchEvent { type_, resource_version: rv, object: object.map(Object::Pod) }
    }

    fn listed(items: Vec<Pod>, rv: u64) -> ClusterAction {
        ClusterAction::Listed { kind: Kind::Pod, resource_version: rv, items: items.into_iter().map(Object::Pod).collect() }
    }

    fn reduce(state: Rc<Cluster>, action: ClusterAction) -> Rc<Cluster> {
        state.reduce(action)
    }

    #[test]
    fn a_list_fills_the_collection_and_sets_the_revision() {
        let state = reduce(Rc::default(), listed(vec![pod("a", 3, "", PodPhase::Pending), pod("b", 5, "n1", PodPhase::Running)], 9));
        assert_eq!(state.pods.len(), 2);
        assert_eq!(state.pods.resource_version, 9);
        assert!(state.pods.listed);
        assert_eq!(state.resource_version(Kind::Pod), 9);
    }

    #[test]
    fn watch_events_add_modify_and_delete() {
        let state = reduce(Rc::default(), listed(vec![pod("a", 3, "", PodPhase::Pending)], 3));
        let state = reduce(
            state,
            ClusterAction::Watched {
                kind: Kind::Pod,
                events: vec![
                    event(WatchEventType::Modified, 4, Some(pod("a", 4, "n1", PodPhase::Pending))),
                    event(WatchEventType::Added, 5, Some(pod("b", 5, "", PodPhase::Pending))),
                    event(WatchEventType::Modified, 6, Some(pod("a", 6, "n1", PodPhase::Running))),
                ],
            },
        );
        assert_eq!(state.pods.get("default/a").unwrap().stage(), PodStage::Running);
        assert_eq!(state.pods.get("default/b").unwrap().stage(), PodStage::WaitingForScheduler);
        assert_eq!(state.pods.resource_version, 6);

        let state = reduce(
            state,
            ClusterAction::Watched {
                kind: Kind::Pod,
                events: vec![event(WatchEventType::Deleted, 7, Some(pod("a", 7, "n1", PodPhase::Running)))],
            },
        );
        assert!(state.pods.get("default/a").is_none());
        assert_eq!(state.pods.len(), 1);
        assert_eq!(state.pods.resource_version, 7);
    }

    #[test]
    fn a_bookmark_only_moves_the_revision() {
        let state = reduce(Rc::default(), listed(vec![pod("a", 3, "", PodPhase::Pending)], 3));
        let items = state.pods.items.clone();
        let state = reduce(state, ClusterAction::Watched { kind: Kind::Pod, events: vec![event(WatchEventType::Bookmark, 40, None)] });
        assert_eq!(state.pods.resource_version, 40);
        assert!(Rc::ptr_eq(&items, &state.pods.items), "a bookmark must not copy the items");
    }

    #[test]
    fn an_older_version_of_an_object_does_not_replace_a_newer_one() {
        let state = reduce(Rc::default(), listed(vec![pod("a", 8, "n1", PodPhase::Running)], 8));
        let state = reduce(
            state,
            ClusterAction::Watched {
                kind: Kind::Pod,
                events: vec![event(WatchEventType::Modified, 5, Some(pod("a", 5, "", PodPhase::Pending)))],
            },
        );
        assert_eq!(state.pods.get("default/a").unwrap().status.phase, PodPhase::Running);
        assert_eq!(state.pods.resource_version, 8);
    }

    #[test]
    fn an_event_at_the_held_revision_is_a_replay_but_a_delete_at_it_removes() {
        let state = reduce(Rc::default(), listed(vec![pod("a", 8, "n1", PodPhase::Running)], 8));
        let items = state.pods.items.clone();
        let state = reduce(
            state,
            ClusterAction::Watched {
                kind: Kind::Pod,
                events: vec![event(WatchEventType::Modified, 8, Some(pod("a", 8, "", PodPhase::Pending)))],
            },
        );
        assert!(Rc::ptr_eq(&items, &state.pods.items), "the same revision again is no change");
        assert_eq!(state.pods.get("default/a").unwrap().status.phase, PodPhase::Running);
        // The server's DELETED carries the object's last state, at the revision held.
        let state = reduce(
            state,
            ClusterAction::Watched {
                kind: Kind::Pod,
                events: vec![event(WatchEventType::Deleted, 9, Some(pod("a", 8, "n1", PodPhase::Running)))],
            },
        );
        assert!(state.pods.is_empty());
    }

    #[test]
    fn a_resync_drops_objects_deleted_while_away() {
        let state = reduce(Rc::default(), listed(vec![pod("a", 3, "", PodPhase::Pending), pod("b", 4, "", PodPhase::Pending)], 4));
        // After a 410 Gone the watcher lists again; "a" was deleted in the gap.
        let state = reduce(state, listed(vec![pod("b", 4, "", PodPhase::Pending), pod("c", 90, "", PodPhase::Pending)], 100));
        let keys: Vec<&String> = state.pods.items.keys().collect();
        assert_eq!(keys, ["default/b", "default/c"]);
        assert_eq!(state.pods.resource_version, 100);
    }

    #[test]
    fn unchanged_objects_are_shared_between_states() {
        let state = reduce(Rc::default(), listed(vec![pod("a", 3, "", PodPhase::Pending), pod("b", 4, "", PodPhase::Pending)], 4));
        let before = state.pods.get("default/a").unwrap().clone();
        let state = reduce(
            state,
            ClusterAction::Watched {
                kind: Kind::Pod,
                events: vec![event(WatchEventType::Modified, 5, Some(pod("b", 5, "n1", PodPhase::Pending)))],
            },
        );
        assert!(Rc::ptr_eq(&before, state.pods.get("default/a").unwrap()));
    }

    #[test]
    fn objects_of_another_kind_are_ignored() {
        let node = Node { kind: "Node".into(), metadata: ObjectMeta::named("", "n1"), ..Default::default() };
        let state = reduce(
            Rc::default(),
            ClusterAction::Watched {
                kind: Kind::Pod,
                events: vec![WatchEvent { type_: WatchEventType::Added, resource_version: 2, object: Some(Object::Node(node)) }],
            },
        );
        assert!(state.pods.is_empty());
        assert!(state.nodes.is_empty());
    }

    #[test]
    fn sync_state_changes_only_when_different() {
        let state: Rc<Cluster> = Rc::default();
        let live = reduce(state.clone(), ClusterAction::Sync { kind: Kind::Node, sync: SyncState::Live });
        assert_eq!(live.nodes.sync, SyncState::Live);
        let again = reduce(live.clone(), ClusterAction::Sync { kind: Kind::Node, sync: SyncState::Live });
        assert!(Rc::ptr_eq(&live, &again));
    }
}
