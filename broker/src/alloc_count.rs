//! Heap allocations counted per thread, for the allocation tests of whole requests (issue 25
//! item 2): the broker's global allocator is the system one, and with
//! `BROKER_COUNT_ALLOCATIONS=1` in its environment it also counts every allocation and
//! reallocation made on each thread. Each shard publishes its own thread's count as
//! `broker_heap_allocations_total{shard=..}` (only when counting: the family is absent
//! otherwise), so a test takes the difference over a number of requests.
//!
//! Off (the default) the cost is one relaxed load of a flag nobody writes after start-up,
//! per allocation. On, one thread-local add: no atomic read-modify-write, nothing shared
//! between shards.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// The environment variable that turns counting on (value `1`).
pub const ENV: &str = "BROKER_COUNT_ALLOCATIONS";

static ENABLED: AtomicBool = AtomicBool::new(false);

thread_local! {
    // `const` with no destructor: touching it from inside the allocator never allocates.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

/// The system allocator, counting per thread while enabled.
pub struct Counting;

#[inline]
fn count() {
    if ENABLED.load(Ordering::Relaxed) {
        // A thread being torn down has no slot left: its allocations go uncounted.
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    }
}

// SAFETY: every call is forwarded to the system allocator unchanged; counting only reads and
// writes a thread-local integer.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Turns counting on when the environment asks for it (call once, before the shards start).
pub fn enable_from_env() -> bool {
    let on = std::env::var(ENV).is_ok_and(|v| v == "1");
    if on {
        ENABLED.store(true, Ordering::Relaxed);
    }
    on
}

/// Whether allocations are being counted.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Allocations made on this thread since it started (0 while counting is off).
pub fn this_thread() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_this_threads_allocations_only_when_enabled() {
        // The test binary does not install the allocator: this checks the counter's plumbing.
        let before = this_thread();
        count();
        assert_eq!(this_thread(), before + u64::from(enabled()));
        ENABLED.store(true, Ordering::Relaxed);
        count();
        count();
        assert!(this_thread() >= before + 2);
        let other = std::thread::spawn(this_thread).join().unwrap_or(u64::MAX);
        assert_eq!(other, 0, "another thread's count starts at zero");
    }
}
