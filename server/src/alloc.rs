//! A counting global allocator: the system allocator, plus a count of the bytes in use,
//! which INFO reports as `used_memory` (as redis-server reports its allocator's count).
//!
//! Counting must not make every allocation contend on one cache line, so each thread
//! counts into a slot of its own (threads are given slots round-robin; two threads may
//! share one, which is correct, merely slower). A block freed by another thread than the
//! one that allocated it (replies travel between workers) makes slots go negative; only
//! their sum means anything.
#![allow(unsafe_code)]

#[cfg(not(any(feature = "jemalloc", feature = "mimalloc")))]
use std::alloc::System;
use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

#[cfg(feature = "jemalloc")]
use tikv_jemallocator::Jemalloc as System;

#[cfg(all(feature = "mimalloc", not(feature = "jemalloc")))]
use mimalloc::MiMalloc as System;

/// Counter slots; more than the threads a server runs.
const SLOTS: usize = 64;

/// A counter alone on its cache line.
#[repr(align(64))]
struct Slot(AtomicIsize);

static COUNTERS: [Slot; SLOTS] = [const { Slot(AtomicIsize::new(0)) }; SLOTS];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);
/// Set once the counting allocator has counted anything: before that (or when the
/// binary uses another allocator) there is no figure.
static ACTIVE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

thread_local! {
    // `const` initialisation, no destructor: safe to touch from inside the allocator.
    static MY_SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn slot() -> &'static AtomicIsize {
    let i = MY_SLOT
        .try_with(|s| {
            if s.get() == usize::MAX {
                s.set(NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SLOTS);
            }
            s.get()
        })
        .unwrap_or(0);
    &COUNTERS[i].0
}

/// The system allocator, counted.
#[derive(Debug)]
pub struct Counting;

// SAFETY: every method forwards to `System` with the caller's pointer and layout
// unchanged, so the allocator contract is `System`'s, which is sound. The counting
// around it only touches atomics and a const-initialised thread-local `Cell` without a
// destructor: it never allocates (no recursion) and never panics (`try_with` fails
// gracefully during thread teardown).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            slot().fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            slot().fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; `ptr` was allocated by this allocator (that is,
        // by `System`) with `layout`, as the caller guarantees.
        unsafe { System.dealloc(ptr, layout) };
        slot().fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `realloc`'s contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            slot().fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
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
    let sum: isize = COUNTERS.iter().map(|c| c.0.load(Ordering::Relaxed)).sum();
    Some((sum.max(0) as usize).saturating_sub(goblin_store::arena_idle_bytes()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn counts_what_it_hands_out() {
        // Exercise the allocator directly (the test binary keeps the default one).
        let layout = Layout::from_size_align(1000, 8).unwrap();
        let before: isize = COUNTERS.iter().map(|c| c.0.load(Ordering::Relaxed)).sum();
        // SAFETY: a valid, non-zero-sized layout; the block is freed with the same one.
        unsafe {
            let p = Counting.alloc(layout);
            assert!(!p.is_null());
            p.write_bytes(7, 1000);
            let q = Counting.realloc(p, layout, 3000);
            assert!(!q.is_null());
            let mid: isize = COUNTERS.iter().map(|c| c.0.load(Ordering::Relaxed)).sum();
            assert_eq!(mid - before, 3000);
            Counting.dealloc(q, Layout::from_size_align(3000, 8).unwrap());
        }
        let after: isize = COUNTERS.iter().map(|c| c.0.load(Ordering::Relaxed)).sum();
        assert_eq!(after, before);
    }
}
