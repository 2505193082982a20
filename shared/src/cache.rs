//! The objects of a watch by `namespace/name`, kept current by lists and watch events under
//! one staleness rule ([`is_news`]). The client crate's `Changes` and the dashboard's
//! collections both keep their objects here, so an event is skipped or applied alike in a
//! terminal and in the page.

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::api::WatchEventType;
use crate::model::{Object, ObjectMeta, Resource};

/// What the cache reads of an object: its key and revision.
pub trait Cached {
    fn meta(&self) -> &ObjectMeta;
}

impl Cached for Object {
    fn meta(&self) -> &ObjectMeta {
        self.metadata()
    }
}

impl<T: Resource> Cached for Rc<T> {
    fn meta(&self) -> &ObjectMeta {
        (**self).meta()
    }
}

/// The staleness rule: is an object at revision `incoming` news to a cache holding it at
/// `cached`? Only a newer revision is: a revision names one state of an object, so an equal
/// one is that state again (a replay after a resume) and an older one is behind. Revision 0
/// is unknown (an object made by hand) and always news.
pub fn is_news(incoming: u64, cached: u64) -> bool {
    incoming == 0 || cached == 0 || incoming > cached
}

/// Is a DELETED event at revision `incoming` about the object a cache holds at `cached`? The
/// event carries the object's last state, whose revision is the cached one when the cache
/// saw it, so equal applies; only a newer object in the cache (made again under the same
/// name) outlives an old delete.
fn deletes(incoming: u64, cached: u64) -> bool {
    incoming == 0 || cached == 0 || incoming >= cached
}

#[derive(Debug, Clone, PartialEq)]
pub struct Cache<V> {
    items: BTreeMap<String, V>,
}

impl<V> Default for Cache<V> {
    fn default() -> Self {
        Cache { items: BTreeMap::new() }
    }
}

impl<V: Cached> Cache<V> {
    pub fn get(&self, key: &str) -> Option<&V> {
        self.items.get(key)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.items.keys()
    }

    /// In key order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.items.values()
    }

    /// What [`Cache::apply`] would do with this event: the change it makes, or `None` when it
    /// skips it (stale, a bookmark, or a delete of an object it does not hold).
    pub fn effect(&self, type_: WatchEventType, object: &V) -> Option<WatchEventType> {
        let cached = self.items.get(&object.meta().key()).map(|o| o.meta().resource_version);
        let incoming = object.meta().resource_version;
        match (type_, cached) {
            (WatchEventType::Bookmark, _) | (WatchEventType::Deleted, None) => None,
            (WatchEventType::Deleted, Some(cached)) => deletes(incoming, cached).then_some(WatchEventType::Deleted),
            (WatchEventType::Added | WatchEventType::Modified, None) => Some(WatchEventType::Added),
            (WatchEventType::Added | WatchEventType::Modified, Some(cached)) => {
                is_news(incoming, cached).then_some(WatchEventType::Modified)
            }
        }
    }

    /// Applies one watch event; returns the change it made (ADDED for an object new to the
    /// cache, whatever the event said), or `None` when it skipped it.
    pub fn apply(&mut self, type_: WatchEventType, object: V) -> Option<WatchEventType> {
        let effect = self.effect(type_, &object)?;
        let key = object.meta().key();
        match effect {
            WatchEventType::Deleted => {
                self.items.remove(&key);
            }
            _ => {
                self.items.insert(key, object);
            }
        }
        Some(effect)
    }

    /// Stores `object` whatever its revision: for the one writer of the objects (the
    /// dashboard's simulator), not for a watcher.
    pub fn put(&mut self, object: V) {
        self.items.insert(object.meta().key(), object);
    }

    pub fn remove(&mut self, key: &str) -> Option<V> {
        self.items.remove(key)
    }

    /// Replaces everything with a fresh list. A list is the truth at its revision, so every
    /// listed object is taken whatever the revision the cache held (a server started afresh
    /// counts from 1 again), and objects deleted while the watch was away disappear.
    pub fn replace(&mut self, objects: impl IntoIterator<Item = V>) {
        // Inserted one by one: collecting into a BTreeMap sorts first, with a copy of the
        // sort code per type in the dashboard's bundle.
        let mut items = BTreeMap::new();
        for object in objects {
            items.insert(object.meta().key(), object);
        }
        self.items = items;
    }
}

impl<V: Cached + Clone> Cache<V> {
    /// [`Cache::replace`], returning the changes the list amounts to: DELETED for each object
    /// gone (as last held), then ADDED and MODIFIED in key order. An object listed at the
    /// revision held is the same state and no change.
    pub fn relist(&mut self, objects: impl IntoIterator<Item = V>) -> Vec<(WatchEventType, V)> {
        let old = std::mem::take(&mut self.items);
        self.replace(objects);
        let mut changes: Vec<(WatchEventType, V)> =
            old.iter().filter(|(key, _)| !self.items.contains_key(*key)).map(|(_, o)| (WatchEventType::Deleted, o.clone())).collect();
        for (key, object) in &self.items {
            match old.get(key).map(|o| o.meta().resource_version) {
                None => changes.push((WatchEventType::Added, object.clone())),
                Some(held) if held == 0 || held != object.meta().resource_version => {
                    changes.push((WatchEventType::Modified, object.clone()))
                }
                Some(_) => {}
            }
        }
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Pod, PodPhase};

    fn pod(name: &str, rv: u64, phase: PodPhase) -> Object {
        let mut pod = Pod { kind: "Pod".into(), metadata: ObjectMeta::named("default", name), ..Default::default() };
        pod.metadata.resource_version = rv;
        pod.status.phase = phase;
        Object::Pod(pod)
    }

    fn phase(cache: &Cache<Object>, name: &str) -> Option<PodPhase> {
        match cache.get(&format!("default/{name}"))? {
            Object::Pod(pod) => Some(pod.status.phase),
            _ => None,
        }
    }

    fn holding(objects: Vec<Object>) -> Cache<Object> {
        let mut cache = Cache::default();
        cache.replace(objects);
        cache
    }

    #[test]
    fn only_a_newer_revision_replaces_an_object() {
        let mut cache = holding(vec![pod("a", 8, PodPhase::Running)]);
        assert_eq!(cache.apply(WatchEventType::Modified, pod("a", 5, PodPhase::Pending)), None, "older");
        assert_eq!(cache.apply(WatchEventType::Modified, pod("a", 8, PodPhase::Pending)), None, "equal: the same state again");
        assert_eq!(phase(&cache, "a"), Some(PodPhase::Running));
        assert_eq!(cache.apply(WatchEventType::Modified, pod("a", 9, PodPhase::Failed)), Some(WatchEventType::Modified));
        assert_eq!(phase(&cache, "a"), Some(PodPhase::Failed));
        assert_eq!(cache.apply(WatchEventType::Modified, pod("b", 3, PodPhase::Pending)), Some(WatchEventType::Added));
        assert_eq!(cache.apply(WatchEventType::Added, pod("b", 3, PodPhase::Running)), None, "a replayed ADDED");
    }

    #[test]
    fn an_unknown_revision_is_always_news() {
        let mut cache = holding(vec![pod("a", 0, PodPhase::Pending)]);
        assert_eq!(cache.apply(WatchEventType::Modified, pod("a", 0, PodPhase::Running)), Some(WatchEventType::Modified));
        assert_eq!(cache.apply(WatchEventType::Modified, pod("a", 4, PodPhase::Failed)), Some(WatchEventType::Modified));
        assert!(is_news(0, 7) && !is_news(7, 7) && is_news(8, 7));
    }

    #[test]
    fn a_delete_at_the_held_revision_removes_the_object_and_an_older_one_spares_its_successor() {
        // The server's DELETED carries the object's last state: the revision the cache holds.
        let mut cache = holding(vec![pod("a", 8, PodPhase::Running), pod("b", 4, PodPhase::Running)]);
        assert_eq!(cache.apply(WatchEventType::Deleted, pod("a", 8, PodPhase::Running)), Some(WatchEventType::Deleted));
        assert_eq!(phase(&cache, "a"), None);
        assert_eq!(cache.apply(WatchEventType::Deleted, pod("a", 8, PodPhase::Running)), None, "nothing left to delete");
        // "b" was deleted at 3 and made again at 4: the old delete is behind it.
        assert_eq!(cache.apply(WatchEventType::Deleted, pod("b", 3, PodPhase::Pending)), None);
        assert_eq!(phase(&cache, "b"), Some(PodPhase::Running));
        assert_eq!(cache.apply(WatchEventType::Deleted, pod("b", 9, PodPhase::Running)), Some(WatchEventType::Deleted));
        assert!(cache.is_empty());
    }

    #[test]
    fn a_bookmark_changes_nothing() {
        let mut cache = holding(vec![pod("a", 8, PodPhase::Running)]);
        assert_eq!(cache.effect(WatchEventType::Bookmark, &pod("a", 9, PodPhase::Failed)), None);
        assert_eq!(cache.apply(WatchEventType::Bookmark, pod("a", 9, PodPhase::Failed)), None);
        assert_eq!(phase(&cache, "a"), Some(PodPhase::Running));
    }

    #[test]
    fn a_relist_takes_the_list_whole_and_says_what_changed() {
        let mut cache = holding(vec![pod("a", 5, PodPhase::Pending), pod("b", 6, PodPhase::Pending), pod("c", 9, PodPhase::Running)]);
        let changes = cache.relist(vec![pod("b", 6, PodPhase::Pending), pod("c", 3, PodPhase::Failed), pod("d", 12, PodPhase::Pending)]);
        let summary: Vec<(WatchEventType, String)> = changes.iter().map(|(t, o)| (*t, o.metadata().name.clone())).collect();
        assert_eq!(
            summary,
            [(WatchEventType::Deleted, "a".into()), (WatchEventType::Modified, "c".into()), (WatchEventType::Added, "d".into())],
            "b at the held revision is no change"
        );
        // The list is the truth even where it is older than what was held (a fresh server).
        assert_eq!(phase(&cache, "c"), Some(PodPhase::Failed));
        assert_eq!(cache.keys().collect::<Vec<_>>(), ["default/b", "default/c", "default/d"]);
    }

    #[test]
    fn put_and_remove_write_whatever_the_revision() {
        let mut cache = holding(vec![pod("a", 8, PodPhase::Running)]);
        cache.put(pod("a", 2, PodPhase::Pending));
        assert_eq!(phase(&cache, "a"), Some(PodPhase::Pending));
        assert!(cache.remove("default/a").is_some());
        assert_eq!(cache.len(), 0);
    }
}
