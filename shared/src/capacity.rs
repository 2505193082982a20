//! Collections that grew for a burst (150,000 pods pending at once) and then emptied keep
//! their capacity, and a hash table of that size stays resident. Each holder gives the
//! spare room back once it is mostly empty, with room to spare so that one that fills and
//! empties in turn does not reallocate each time.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, Hash};

/// Room kept whatever the length.
const SLACK: usize = 1024;

/// Whether a collection of `len` items in room for `capacity` should shrink.
fn is_sparse(len: usize, capacity: usize) -> bool {
    capacity > 4 * len + SLACK
}

/// A collection that can give back the room it no longer needs.
pub trait GiveBack {
    /// Shrinks to fit when at most a quarter of the room (beyond [`SLACK`]) is in use.
    fn give_back_spare(&mut self);
}

impl<K: Eq + Hash, V, S: BuildHasher> GiveBack for HashMap<K, V, S> {
    fn give_back_spare(&mut self) {
        if is_sparse(self.len(), self.capacity()) {
            self.shrink_to_fit();
        }
    }
}

impl<T: Eq + Hash, S: BuildHasher> GiveBack for HashSet<T, S> {
    fn give_back_spare(&mut self) {
        if is_sparse(self.len(), self.capacity()) {
            self.shrink_to_fit();
        }
    }
}

impl<T> GiveBack for VecDeque<T> {
    fn give_back_spare(&mut self) {
        if is_sparse(self.len(), self.capacity()) {
            self.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collection_gives_its_room_back_once_mostly_empty() {
        let mut map: HashMap<u32, u32> = (0..100_000).map(|i| (i, i)).collect();
        map.retain(|k, _| *k < 30_000);
        let room = map.capacity();
        map.give_back_spare();
        assert_eq!(map.capacity(), room, "a third still in use keeps its room");
        map.retain(|k, _| *k < 10);
        map.give_back_spare();
        assert!(map.capacity() <= SLACK, "{}", map.capacity());
        assert_eq!(map.len(), 10);

        let mut queue: VecDeque<u32> = (0..100_000).collect();
        queue.drain(..99_999);
        queue.give_back_spare();
        assert!(queue.capacity() <= SLACK && queue[0] == 99_999, "{}", queue.capacity());

        let mut set: HashSet<u32> = (0..100_000).collect();
        set.clear();
        set.give_back_spare();
        assert!(set.capacity() <= SLACK, "{}", set.capacity());
        let mut small: HashSet<u32> = (0..SLACK as u32 / 2).collect();
        let room = small.capacity();
        small.clear();
        small.give_back_spare();
        assert_eq!(small.capacity(), room, "room within the slack stays");
    }
}
