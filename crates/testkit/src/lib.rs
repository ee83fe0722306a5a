//! What Metronome's tests share. Used as a dev-dependency only.
//!
//! [`CountingAlloc`] counts the allocations of the current thread, so that a test can show a hot
//! path allocates nothing (tests of other threads running at the same time do not disturb the
//! count). A test binary installs it with
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: metronome_testkit::CountingAlloc = metronome_testkit::CountingAlloc;
//! ```
//!
//! and reads [`allocations`] before and after the code under test.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting each thread's allocations and reallocations.
pub struct CountingAlloc;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; it only counts.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: `ptr` came from `System` through this allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Allocations (and reallocations) made by this thread so far, when [`CountingAlloc`] is the
/// global allocator.
pub fn allocations() -> u64 {
    ALLOCS.with(|c| c.get())
}
