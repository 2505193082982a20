//! A registered watch as a stream: it takes what commits put in its mailbox, a remote
//! watcher's a batch at a time, and leaves the watcher index when dropped.

use std::sync::{Arc, Mutex};

use futures::StreamExt;

use super::error::Result;
use super::event::{WatchBatch, WatchStream};
use super::watchers::{Mailbox, REMOTE_BATCH, Watchers};

pub(super) struct Subscription {
    watchers: Arc<Mutex<Watchers>>,
    id: u64,
    mailbox: Arc<Mailbox>,
}

impl Subscription {
    /// Registers `mailbox` in `watchers` and returns its stream. The caller holds the state
    /// lock, so that no commit falls between the mailbox's replay and its registration.
    pub(super) fn register(watchers: &Arc<Mutex<Watchers>>, mailbox: Mailbox) -> Result<WatchStream> {
        let mailbox = Arc::new(mailbox);
        let id = watchers.lock().expect("watchers lock").add(mailbox.clone())?;
        let subscription = Subscription { watchers: watchers.clone(), id, mailbox };
        Ok(futures::stream::unfold(subscription, |mut s| async move { s.next().await.map(|item| (item, s)) }).boxed())
    }

    async fn next(&mut self) -> Option<WatchBatch> {
        loop {
            {
                let mut queue = self.mailbox.queue.lock().expect("mailbox lock");
                // Asked again: the batch taken before has been passed on.
                queue.taken_from = queue.events.first().map(|e| e.revision);
                if !queue.events.is_empty() {
                    let events = if self.mailbox.interest.remote && queue.events.len() > REMOTE_BATCH {
                        queue.events.drain(..REMOTE_BATCH).collect()
                    } else {
                        std::mem::take(&mut queue.events)
                    };
                    let revision = events.last().map_or(0, |e| e.revision);
                    return Some(WatchBatch { events, revision });
                }
                if queue.ended {
                    return None;
                }
            }
            self.mailbox.wake.notified().await;
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.watchers.lock().expect("watchers lock").remove(self.id, &self.mailbox.interest);
    }
}

#[cfg(test)]
mod tests {
    use futures::{FutureExt, StreamExt};
    use shared::model::Kind;

    use super::*;
    use crate::store::fixtures::*;
    use crate::store::*;

    #[tokio::test]
    async fn a_remote_stream_takes_its_changes_a_batch_at_a_time_and_an_ended_one_keeps_only_its_oldest() {
        let store = CachedStore::in_memory(10_000);
        let many = |prefix: &str, count: usize| {
            let mut txn = Txn::new();
            for i in 0..count {
                txn.push(put(pod(&format!("{prefix}{i}"), "")));
            }
            txn
        };
        store.commit(many("p", 3000)).await.unwrap();
        let interest = Interest { remote: true, ..Interest::kinds(&[Kind::Pod]) };
        let mut remote = store.watch_interest(interest.clone(), 1).unwrap();
        let sizes = [remote.next().await.unwrap().events.len(), remote.next().await.unwrap().events.len()];
        assert_eq!(sizes, [REMOTE_BATCH, REMOTE_BATCH]);

        let mut stalled = store.watch_interest(interest, 1).unwrap();
        store.commit(many("q", 5000)).await.unwrap();
        let kept = stalled.next().await.unwrap();
        assert_eq!((kept.events.len(), kept.events[0].revision), (REMOTE_BATCH, 2), "ended with 7,999 unread, over 5,000");
        assert!(stalled.next().await.is_none());
    }

    #[tokio::test]
    async fn a_resumed_watcher_that_reads_its_replay_is_not_ended_for_starting_behind() {
        let store = CachedStore::in_memory(8);
        for i in 0..6 {
            store.commit(Txn::new().with(put(pod(&format!("p{i}"), "")))).await.unwrap();
        }
        let mut resumed = store.watch_interest(Interest { remote: true, ..Interest::kinds(&[Kind::Pod]) }, 2).unwrap();
        assert_eq!(resumed.next().await.unwrap().events.len(), 4, "the replay of revisions 3 to 6");
        store.commit(Txn::new().with(put(pod("new", "")))).await.unwrap();
        assert_eq!(names(&resumed.next().await.unwrap()), ["new"], "revision 2 is not in the oldest quarter of 0..=7");
    }

    #[tokio::test]
    async fn a_remote_watcher_that_keeps_reading_is_not_ended_however_many_changes_pass() {
        let store = CachedStore::in_memory(4);
        let mut remote = store.watch_interest(Interest { remote: true, ..Interest::kinds(&[Kind::Pod]) }, 0).unwrap();
        for i in 0..20 {
            store.commit(Txn::new().with(put(pod(&format!("p{i}"), "")))).await.unwrap();
            assert!(remote.next().await.is_some(), "change {i} arrives");
            assert!(remote.next().now_or_never().is_none(), "and the watcher asks for the next");
        }
    }
}
