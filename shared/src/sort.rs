//! Stable sorting through one copy of the standard library's sort. Each `sort_by` on a new
//! element type (or with a new closure) adds its own copy, about 4 KB of wasm; these sort
//! positions with a single comparator type, then move the items into place. The dashboard
//! sorts only through here, and so does the shared code it runs.

use std::cmp::Ordering;

/// Sorts `items` stably by `compare`.
pub fn by<T>(items: &mut Vec<T>, compare: impl Fn(&T, &T) -> Ordering) {
    let order = positions(items.len(), &|a, b| compare(&items[a], &items[b]));
    reorder(items, order);
}

/// Sorts `items` stably by a key computed once per item.
pub fn by_cached_key<T, K: Ord>(items: &mut Vec<T>, key: impl Fn(&T) -> K) {
    let keys: Vec<K> = items.iter().map(key).collect();
    let order = positions(keys.len(), &|a, b| keys[a].cmp(&keys[b]));
    reorder(items, order);
}

/// `0..len` stably sorted by `compare`: the one sort instantiation.
fn positions(len: usize, compare: &dyn Fn(usize, usize) -> Ordering) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    order.sort_by(|&a, &b| compare(a, b));
    order
}

fn reorder<T>(items: &mut Vec<T>, order: Vec<usize>) {
    let mut slots: Vec<Option<T>> = items.drain(..).map(Some).collect();
    items.extend(order.into_iter().filter_map(|i| slots[i].take()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_stably_by_comparator_and_by_key() {
        let mut words = vec!["pear", "fig", "apple", "kiwi", "plum", "date"];
        by(&mut words, |a, b| a.len().cmp(&b.len()));
        assert_eq!(words, ["fig", "pear", "kiwi", "plum", "date", "apple"]);
        by_cached_key(&mut words, |w| std::cmp::Reverse(w.chars().next()));
        assert_eq!(words, ["pear", "plum", "kiwi", "fig", "date", "apple"]);
        let mut empty: Vec<u8> = Vec::new();
        by(&mut empty, u8::cmp);
        assert!(empty.is_empty());
    }
}
