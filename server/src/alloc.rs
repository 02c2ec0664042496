//! A counting global allocator: the system allocator, plus a count of the bytes in use,
//! which INFO reports as `used_memory` (as redis-server reports its allocator's count).
//!
//! Counting must not make every allocation contend on one cache line, so each thread
//! counts into a slot of its own (`goblin_store::striped`). A block freed by another
//! thread than the one that allocated it (replies travel between workers) makes slots go
//! negative; only their sum means anything.
#![allow(unsafe_code)]

#[cfg(not(any(feature = "jemalloc", feature = "mimalloc")))]
use std::alloc::System;
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, Ordering};

use goblin_store::striped::Striped;

#[cfg(feature = "jemalloc")]
use tikv_jemallocator::Jemalloc as System;

#[cfg(all(feature = "mimalloc", not(feature = "jemalloc")))]
use mimalloc::MiMalloc as System;

/// Bytes handed out and not yet freed.
static COUNTERS: Striped = Striped::new();
/// Set once the counting allocator has counted anything: before that (or when the
/// binary uses another allocator) there is no figure.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// The system allocator, counted.
#[derive(Debug)]
pub struct Counting;

// SAFETY: every method forwards to `System` with the caller's pointer and layout
// unchanged, so the allocator contract is `System`'s, which is sound. The counting
// around it (`Striped::add`) only touches atomics and a const-initialised thread-local
// `Cell` without a destructor: it never allocates (no recursion) and never panics
// (`try_with` fails gracefully during thread teardown).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            COUNTERS.add(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            COUNTERS.add(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; `ptr` was allocated by this allocator (that is,
        // by `System`) with `layout`, as the caller guarantees.
        unsafe { System.dealloc(ptr, layout) };
        COUNTERS.add(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `realloc`'s contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            COUNTERS.add(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// The allocator under the count, as INFO's `mem_allocator` names it (redis-server
/// built against glibc's malloc says the same).
#[cfg(not(any(feature = "jemalloc", feature = "mimalloc")))]
pub const NAME: &str = "libc";
/// The allocator under the count, as INFO's `mem_allocator` names it.
#[cfg(feature = "jemalloc")]
pub const NAME: &str = "jemalloc-5.3.0";
/// The allocator under the count, as INFO's `mem_allocator` names it.
#[cfg(all(feature = "mimalloc", not(feature = "jemalloc")))]
pub const NAME: &str = "mimalloc";

/// Marks the counting allocator as installed (the binary calls this at start).
pub fn activate() {
    ACTIVE.store(true, Ordering::Relaxed);
}

/// Bytes allocated and not yet freed, when the counting allocator is installed — less
/// the keyspaces' arena pages that hold no entry (free chunks), which an allocator's
/// count would not include either (`goblin_store::arena_idle_bytes`).
pub fn allocated() -> Option<usize> {
    if !ACTIVE.load(Ordering::Relaxed) {
        return None;
    }
    Some((COUNTERS.sum().max(0) as usize).saturating_sub(goblin_store::arena_idle_bytes()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn counts_what_it_hands_out() {
        // Exercise the allocator directly (the test binary keeps the default one).
        let layout = Layout::from_size_align(1000, 8).unwrap();
        let before: isize = COUNTERS.sum();
        // SAFETY: a valid, non-zero-sized layout; the block is freed with the same one.
        unsafe {
            let p = Counting.alloc(layout);
            assert!(!p.is_null());
            p.write_bytes(7, 1000);
            let q = Counting.realloc(p, layout, 3000);
            assert!(!q.is_null());
            let mid: isize = COUNTERS.sum();
            assert_eq!(mid - before, 3000);
            Counting.dealloc(q, Layout::from_size_align(3000, 8).unwrap());
        }
        let after: isize = COUNTERS.sum();
        assert_eq!(after, before);
    }
}
