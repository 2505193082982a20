//! The heap per kind, under the allocator the `shepherd` binary installs: what the store
//! keeps sits in its kind's heap, and nothing else does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use server::events;
use server::heaps::{self, Allocator};
use server::store::{CachedStore, Change, Key, Store, Txn, Write};
use shared::model::{Event, Kind, Object, ObjectReference, event_types};

#[global_allocator]
static ALLOCATOR: Allocator = Allocator;

fn address<T: ?Sized>(value: &T) -> *const u8 {
    (value as *const T).cast()
}

#[test]
fn allocations_in_a_kinds_scope_go_to_its_heap_alone() {
    let outside = String::from("made outside any scope");
    let (inside, nested, after_nested) = heaps::in_heap_of(Kind::Event, || {
        let mut inside = String::from("made for an event");
        inside.push_str(&"grown past its first block ".repeat(64));
        let nested = heaps::in_heap_of(Kind::Pod, || vec![0u8; 300]);
        (inside, nested, Box::new(7u64))
    });
    assert!(heaps::holds(Kind::Event, inside.as_ptr()), "a string built and grown in the scope");
    assert!(heaps::holds(Kind::Pod, nested.as_ptr()) && !heaps::holds(Kind::Event, nested.as_ptr()), "a nested scope");
    assert!(heaps::holds(Kind::Event, address(&*after_nested)), "the outer scope is back after the nested one");
    for kind in Kind::ALL {
        assert!(!heaps::holds(kind, outside.as_ptr()), "{kind:?}'s heap holds what was made outside");
    }
    let after = Box::new(0u64);
    assert!(!heaps::holds(Kind::Event, address(&*after)), "the scope ends with its closure");
}

#[test]
fn a_panic_in_the_scope_ends_it() {
    let unwound = std::panic::catch_unwind(|| heaps::in_heap_of(Kind::Node, || panic!("while building")));
    assert!(unwound.is_err());
    let after = Box::new(1u64);
    assert!(!heaps::holds(Kind::Node, address(&*after)));
}

#[tokio::test]
async fn the_store_keeps_each_object_in_its_kinds_heap() {
    let store = CachedStore::in_memory(100);
    let involved = ObjectReference { kind: "Pod".into(), namespace: "default".into(), name: "web-1".into(), uid: "u1".into() };
    let reported = events::new_event(involved, event_types::NORMAL, "Killing", "Stopping container web", "agent/node-1");
    let message = reported.message.as_ptr();
    assert!(!heaps::holds(Kind::Event, message), "made by the caller");
    store.commit(Txn::new().with(events::record(reported, chrono::Utc::now()))).await.unwrap();

    let (_, stored) = store.list(Kind::Event, None);
    let stored: &Arc<Object> = &stored[0];
    let Object::Event(Event { message, involved_object, .. }) = &**stored else { panic!("an event") };
    assert!(heaps::holds(Kind::Event, address(&**stored)), "the stored object");
    assert!(heaps::holds(Kind::Event, message.as_ptr()) && heaps::holds(Kind::Event, involved_object.name.as_ptr()), "its strings");
    assert!(!heaps::holds(Kind::Pod, address(&**stored)));
    let again = store.get(&Key::of(stored)).unwrap();
    assert!(Arc::ptr_eq(&again, stored), "reads share the kept copy");
}

/// Held by each test that reads the process's RSS, which the others' memory would move.
static READS_RSS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn resident_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap() / 1024.0
}

#[test]
fn a_heap_this_thread_stopped_allocating_in_gives_its_pages_back_within_a_period() {
    let _alone = READS_RSS.lock().unwrap_or_else(|e| e.into_inner());
    let (freed_tx, freed_rx) = std::sync::mpsc::channel::<()>();
    let (made_tx, made_rx) = std::sync::mpsc::channel();
    // Like pods the store kept on one thread and a later commit dropped on another.
    let owner = std::thread::spawn(move || {
        // As `shepherd` does: with huge pages, what is returned depends on which 2 MiB pages
        // the freed blocks shared.
        // SAFETY: PR_SET_THP_DISABLE takes plain integers and touches no memory of ours.
        assert_eq!(unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) }, 0);
        let pods: Vec<String> = heaps::in_heap_of(Kind::Pod, || (0..65_536).map(|i| format!("{i:01024}")).collect());
        let made = resident_mib();
        made_tx.send(pods).unwrap();
        freed_rx.recv().unwrap();
        let start = Instant::now();
        let mut returned = Vec::new();
        for after in [0, 500, 1000] {
            heaps::collect_if_due_at(start + Duration::from_millis(after));
            returned.push(made - resident_mib());
        }
        returned
    });
    let pods = made_rx.recv().unwrap();
    assert!(pods.iter().all(|p| heaps::holds(Kind::Pod, p.as_ptr())));
    drop(pods);
    freed_tx.send(()).unwrap();
    let returned = owner.join().unwrap();
    assert!(returned[0] < 16.0 && returned[1] < 16.0, "the heap was still in use in the first period: {returned:?} MiB");
    assert!(returned[2] > 40.0, "a period later, {returned:?} MiB of the 64 MiB freed came back");
}

#[test]
fn a_parked_thread_gives_back_what_other_threads_freed_of_its_allocations() {
    let _alone = READS_RSS.lock().unwrap_or_else(|e| e.into_inner());
    let (freed_tx, freed_rx) = std::sync::mpsc::channel::<()>();
    let (made_tx, made_rx) = std::sync::mpsc::channel();
    // Like the request buffers and JSON a runtime thread made in a burst, dropped on others.
    let owner = std::thread::spawn(move || {
        // SAFETY: PR_SET_THP_DISABLE takes plain integers and touches no memory of ours.
        assert_eq!(unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) }, 0);
        let buffers: Vec<String> = (0..65_536).map(|i| format!("{i:01024}")).collect();
        let made = resident_mib();
        made_tx.send(buffers).unwrap();
        freed_rx.recv().unwrap();
        let before = made - resident_mib();
        heaps::collect_parked_thread();
        (before, made - resident_mib())
    });
    let buffers = made_rx.recv().unwrap();
    assert!(!heaps::holds(Kind::Pod, buffers[0].as_ptr()), "made outside any kind's scope");
    drop(buffers);
    freed_tx.send(()).unwrap();
    let (before, after) = owner.join().unwrap();
    assert!(before < 16.0, "freed by another thread, the memory stays with its owner until it collects: {before:.1} MiB back");
    assert!(after > 40.0, "once the owner collected, {after:.1} MiB of the 64 MiB freed came back");
}

#[test]
fn compacting_gives_back_the_pages_a_mass_deletion_left_thinly_used() {
    let _alone = READS_RSS.lock().unwrap_or_else(|e| e.into_inner());
    let returned = std::thread::spawn(|| {
        // SAFETY: PR_SET_THP_DISABLE takes plain integers and touches no memory of ours.
        assert_eq!(unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) }, 0);
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let store = CachedStore::in_memory(1);
            let now = chrono::Utc::now();
            let start = resident_mib();
            for chunk in 0..32 {
                let writes = (0..1_024).map(|i| {
                    let involved = ObjectReference {
                        kind: "Pod".into(),
                        namespace: "default".into(),
                        name: format!("web-{chunk}-{i}"),
                        uid: format!("u{chunk}-{i}"),
                    };
                    events::record(events::new_event(involved, event_types::NORMAL, "Started", format!("{i:01000}"), "agent/node-1"), now)
                });
                store.commit(Txn { writes: writes.collect(), ..Txn::default() }).await.unwrap();
            }
            let made = resident_mib() - start;
            // As the event limit deletes a burst's older events: three in four, spread evenly.
            let (_, all) = store.list(Kind::Event, None);
            for chunk in all.chunks(4_096) {
                let deletes =
                    chunk.iter().enumerate().filter(|(i, _)| i % 4 != 0).map(|(_, e)| Write::new(Key::of(e), |_, _| Ok(Change::Delete)));
                store.commit(Txn { writes: deletes.collect(), ..Txn::default() }).await.unwrap();
            }
            drop(all);
            heaps::collect_parked_thread();
            let deleted = made - (resident_mib() - start);

            let revision = store.revision();
            let kept: Vec<String> = store.list(Kind::Event, None).1.iter().map(|e| serde_json::to_string(&**e).unwrap()).collect();

            store.compact(Kind::Event);
            let (_, compacted) = store.list(Kind::Event, None);
            assert_eq!((store.revision(), compacted.len()), (revision, kept.len()), "nothing changed but where they are");
            assert!(compacted.iter().zip(&kept).all(|(now, before)| serde_json::to_string(&**now).unwrap() == *before));
            assert!(compacted.iter().all(|e| heaps::holds(Kind::Event, address(&**e))));
            drop((kept, compacted));
            // Collected once the heap has gone a period without allocations.
            let later = Instant::now();
            for after in [2, 4] {
                heaps::collect_if_due_at(later + Duration::from_secs(after));
            }
            (made, deleted, made - (resident_mib() - start))
        })
    })
    .join()
    .unwrap();
    let (made, deleted, compacted) = returned;
    assert!(made > 48.0, "{made:.1} MiB for 32,768 events of 1 KB");
    assert!(
        deleted < made / 4.0,
        "three in four deleted and collected, {deleted:.1} of {made:.1} MiB came back: the pages are thinly used"
    );
    // A quarter of the events stay, about 16 MiB. Copied within one heap, the copies would fill
    // the old pages' holes, and about 22 MiB would stay.
    assert!(compacted > made * 0.7, "compacted, {compacted:.1} of the {made:.1} MiB came back");
}
