//! A heap of its own for each kind of stored object. Pods come and go by the thousand while
//! events, nodes and leases stay: when they shared the allocator's pages, each page that
//! kept one live event stayed resident after the pods around it were deleted, and a server
//! that had run and deleted 20,000 pods kept 2.5 times its idle memory. mimalloc's
//! first-class heaps keep their allocations in pages apart from each other, so the store
//! builds each object inside the heap of its kind ([`in_heap_of`]) and a mass deletion
//! empties whole pages, which the allocator returns to the system.
//!
//! A heap's pages are collected by the threads that allocate in them, as they allocate: a
//! heap that a thread stopped allocating in (every pod deleted) would keep its pages, so the
//! store calls [`collect_if_due`] after each commit, which collects those.
//!
//! Collection returns only pages left empty, and mimalloc never moves a block: once the
//! event limit has deleted the older events of a burst by the ten thousand, the events that
//! stay are spread thinly over the pages the burst filled. So each kind has two heaps and
//! allocates in one at a time: [`renew`] switches it to the other, the store copies that
//! kind's objects across (`Store::compact`), and the pages of the first empty out.
//!
//! What a thread allocates outside any kind's scope (request buffers, JSON) sits in its own
//! default heap, whose blocks freed by other threads come back when it collects: the
//! `shepherd` binary's runtime calls [`collect_parked_thread`] as each thread goes idle.
//!
//! The `shepherd` binary installs [`Allocator`]; under any other global allocator (tests)
//! [`in_heap_of`] only runs its closure and the collections find nothing to do.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use shared::model::Kind;

unsafe extern "C" {
    fn mi_heap_new() -> *mut c_void;
    fn mi_heap_malloc_aligned(heap: *mut c_void, size: usize, alignment: usize) -> *mut c_void;
    fn mi_heap_zalloc_aligned(heap: *mut c_void, size: usize, alignment: usize) -> *mut c_void;
    fn mi_heap_realloc_aligned(heap: *mut c_void, p: *mut c_void, size: usize, alignment: usize) -> *mut c_void;
    fn mi_heap_contains(heap: *const c_void, p: *const c_void) -> bool;
    fn mi_heap_collect(heap: *mut c_void, force: bool);
    fn mi_collect(force: bool);
}

/// How often a thread gives the empty pages of its part of each heap back.
const COLLECT_PERIOD: Duration = Duration::from_secs(1);

/// No kind's scope: allocations go to mimalloc's default heap.
const NO_KIND: usize = usize::MAX;

thread_local! {
    /// The index in [`Kind::ALL`] of the kind whose heap this thread allocates in.
    static SCOPE: Cell<usize> = const { Cell::new(NO_KIND) };
    /// The kinds whose heaps this thread has allocated in, one bit each by index.
    static USED: Cell<u32> = const { Cell::new(0) };
    /// The kinds whose heaps this thread has allocated in since it last collected.
    static BUSY: Cell<u32> = const { Cell::new(0) };
    /// When this thread last collected in [`collect_if_due`].
    static LAST_COLLECTED: Cell<Option<Instant>> = const { Cell::new(None) };
    /// When this thread last collected in [`collect_parked_thread`], which has its own period.
    static LAST_PARKED: Cell<Option<Instant>> = const { Cell::new(None) };
}

struct Heap(*mut c_void);

// A mimalloc v3 heap may be allocated in and freed from any thread.
unsafe impl Send for Heap {}
unsafe impl Sync for Heap {}

/// Each kind's two heaps, of which [`CURRENT`] says the one it allocates in.
static HEAPS: [[OnceLock<Heap>; 2]; Kind::ALL.len()] = [const { [const { OnceLock::new() }; 2] }; Kind::ALL.len()];
static CURRENT: [AtomicUsize; Kind::ALL.len()] = [const { AtomicUsize::new(0) }; Kind::ALL.len()];

fn index_of(kind: Kind) -> usize {
    Kind::ALL.iter().position(|k| *k == kind).expect("every kind is in Kind::ALL")
}

/// The heap kind `index` allocates in, made on first use (mimalloc makes it without calling
/// back into the Rust allocator).
fn heap(index: usize) -> *mut c_void {
    HEAPS[index][CURRENT[index].load(Ordering::Relaxed)].get_or_init(|| Heap(unsafe { mi_heap_new() })).0
}

/// From now on `kind` allocates in its other heap, where what was left of it there before
/// has had time to go: the objects copied next sit densely in pages of their own.
pub fn renew(kind: Kind) {
    CURRENT[index_of(kind)].fetch_xor(1, Ordering::Relaxed);
}

fn scoped_heap() -> Option<*mut c_void> {
    let index = SCOPE.try_with(Cell::get).unwrap_or(NO_KIND);
    (index != NO_KIND).then(|| heap(index))
}

/// Runs `build` with every allocation this thread makes in it going to `kind`'s heap.
pub fn in_heap_of<T>(kind: Kind, build: impl FnOnce() -> T) -> T {
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            SCOPE.with(|scope| scope.set(self.0));
        }
    }
    let index = index_of(kind);
    for bits in [&USED, &BUSY] {
        bits.with(|bits| bits.set(bits.get() | 1 << index));
    }
    let _restore = Restore(SCOPE.with(|scope| scope.replace(index)));
    build()
}

/// Collects this thread's part of each heap it allocated in before but not in the last
/// [`COLLECT_PERIOD`], once a period: blocks other threads freed come back, and pages left
/// empty go to the system. A heap still in use is left to mimalloc, and a burst of writes
/// pays nothing.
pub fn collect_if_due() {
    collect_if_due_at(Instant::now());
}

/// [`collect_if_due`] at `now`.
pub fn collect_if_due_at(now: Instant) {
    if period_passed(&LAST_COLLECTED, now) {
        let busy = BUSY.with(|busy| busy.replace(0));
        collect_heaps(USED.with(Cell::get) & !busy);
    }
}

/// Collects what this thread allocated outside the kinds' heaps, and its part of every
/// kind's heap, at most once a period. For a thread that goes idle: the
/// request buffers and JSON a burst left in its pages, freed by other threads, come back
/// only when their owner collects, and an idle thread never does by itself.
pub fn collect_parked_thread() {
    if period_passed(&LAST_PARKED, Instant::now()) {
        collect_heaps(USED.with(Cell::get));
        unsafe { mi_collect(true) }
    }
}

/// Whether a [`COLLECT_PERIOD`] passed since `last` said; if so, `last` becomes `now`.
fn period_passed(last: &'static std::thread::LocalKey<Cell<Option<Instant>>>, now: Instant) -> bool {
    last.with(|last| {
        let due = last.get().is_none_or(|at| now.duration_since(at) >= COLLECT_PERIOD);
        if due {
            last.set(Some(now));
        }
        due
    })
}

/// Collects this thread's part of the heaps of the kinds in `kinds`, one bit each by index.
fn collect_heaps(kinds: u32) {
    for (index, pair) in HEAPS.iter().enumerate() {
        if kinds & 1 << index != 0 {
            for heap in pair.iter().filter_map(OnceLock::get) {
                // Forced: pages that were full when other threads freed their blocks are visited too.
                unsafe { mi_heap_collect(heap.0, true) }
            }
        }
    }
}

/// Whether `pointer` was allocated in one of `kind`'s heaps.
pub fn holds(kind: Kind, pointer: *const u8) -> bool {
    HEAPS[index_of(kind)].iter().filter_map(OnceLock::get).any(|heap| unsafe { mi_heap_contains(heap.0, pointer.cast()) })
}

/// mimalloc, with the allocations made inside [`in_heap_of`] in that kind's heap.
pub struct Allocator;

unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match scoped_heap() {
            Some(heap) => unsafe { mi_heap_malloc_aligned(heap, layout.size(), layout.align()).cast() },
            None => unsafe { mimalloc::MiMalloc.alloc(layout) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match scoped_heap() {
            Some(heap) => unsafe { mi_heap_zalloc_aligned(heap, layout.size(), layout.align()).cast() },
            None => unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) },
        }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // mimalloc frees a block of any heap, from any thread.
        unsafe { mimalloc::MiMalloc.dealloc(pointer, layout) }
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match scoped_heap() {
            Some(heap) => unsafe { mi_heap_realloc_aligned(heap, pointer.cast(), new_size, layout.align()).cast() },
            None => unsafe { mimalloc::MiMalloc.realloc(pointer, layout, new_size) },
        }
    }
}
