//! A counting global allocator: the peak of bytes a call has allocated and not yet freed.
//!
//! A binary that wants the allocation bound checked installs it:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: fuzzing::alloc::Counting = fuzzing::alloc::Counting;
//! ```
//!
//! Counters are per thread, so the test harness's parallel tests do not see each other's
//! allocations. Without the allocator installed [`measure`] reports a peak of 0, and
//! [`installed`] says so (the drivers assert it, so a bound is never checked vacuously).
//! Only Rust allocations are seen: memory a C library takes with `malloc` (zstd's window)
//! is libFuzzer's `-malloc_limit_mb` and `-rss_limit_mb` to catch.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting what the current thread allocates while [`measure`] runs.
pub struct Counting;

#[derive(Clone, Copy)]
struct State {
    tracking: bool,
    // Signed: memory allocated before the measurement and freed during it counts negative.
    current: isize,
    peak: isize,
}

thread_local! {
    // `const` and `Copy` with no destructor: reading it from inside the allocator never
    // allocates or registers a thread-exit hook.
    static STATE: Cell<State> = const {
        Cell::new(State {
            tracking: false,
            current: 0,
            peak: 0,
        })
    };
}

#[inline]
fn note(delta: isize) {
    // `try_with`: during thread teardown the slot may be gone; those frees do not matter.
    let _ = STATE.try_with(|state| {
        let mut s = state.get();
        if s.tracking {
            s.current = s.current.saturating_add(delta);
            s.peak = s.peak.max(s.current);
            state.set(s);
        }
    });
}

fn signed(size: usize) -> isize {
    isize::try_from(size).unwrap_or(isize::MAX)
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged and only
// adds bookkeeping in a thread-local `Cell`, which neither allocates nor unwinds; `System`
// upholds the `GlobalAlloc` contract, so this does too.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `alloc`'s contract (non-zero size).
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            note(signed(layout.size()));
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            note(signed(layout.size()));
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-signed(layout.size()));
        // SAFETY: `ptr` came from this allocator (so from `System`) with `layout`, as the
        // caller guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `dealloc` for `ptr` and `layout`; `new_size` is the caller's, valid for
        // `layout.align()` as `realloc`'s contract requires.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            // Counted as the growth alone: the old block is released by the same call (glibc
            // grows large blocks in place with mremap).
            note(signed(new_size) - signed(layout.size()));
        }
        new
    }
}

/// Runs `f` and returns its result with the peak of bytes it held allocated at once on this
/// thread, measured from its start. Calls nest: an inner measurement's peak counts towards
/// the outer one.
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let outer = STATE.with(|state| {
        let outer = state.get();
        state.set(State {
            tracking: true,
            current: 0,
            peak: 0,
        });
        outer
    });
    let result = f();
    let inner = STATE.with(|state| {
        let inner = state.get();
        state.set(State {
            tracking: outer.tracking,
            current: outer.current.saturating_add(inner.current),
            peak: outer.peak.max(outer.current.saturating_add(inner.peak)),
        });
        inner
    });
    (result, usize::try_from(inner.peak).unwrap_or(0))
}

/// Whether [`Counting`] is this process's global allocator (a measured allocation shows).
pub fn installed() -> bool {
    let (_, peak) = measure(|| std::hint::black_box(vec![0u8; 4096]));
    peak >= 4096
}
