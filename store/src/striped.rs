//! Counters that many threads add to without contending: each thread adds to a slot of
//! its own (threads are given slots round-robin; two may share one, which is correct,
//! merely slower), and only the sum means anything — a thread may subtract what another
//! added (memory freed on another thread than the one that allocated it).
//!
//! Used from inside the server's global allocator: nothing here allocates or panics.

use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

/// Slots of a counter; more than the threads a server runs.
const SLOTS: usize = 64;

/// A slot alone on its cache line.
#[repr(align(64))]
struct Slot(AtomicIsize);

/// A counter striped over per-thread slots.
pub struct Striped([Slot; SLOTS]);

static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // `const` initialisation, no destructor: safe to touch from inside an allocator.
    static MY_SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's slot (given on first use; slot 0 during thread teardown).
fn my_slot() -> usize {
    MY_SLOT
        .try_with(|s| {
            if s.get() == usize::MAX {
                s.set(NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SLOTS);
            }
            s.get()
        })
        .unwrap_or(0)
}

impl Striped {
    /// A counter at zero.
    pub const fn new() -> Striped {
        Striped([const { Slot(AtomicIsize::new(0)) }; SLOTS])
    }

    /// Adds `n` (which may be negative) in this thread's slot.
    #[inline]
    pub fn add(&self, n: isize) {
        self.0[my_slot()].0.fetch_add(n, Ordering::Relaxed);
    }

    /// The sum of the slots.
    pub fn sum(&self) -> isize {
        self.0.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
    }
}

impl Default for Striped {
    fn default() -> Self {
        Striped::new()
    }
}

impl std::fmt::Debug for Striped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Striped").field(&self.sum()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_add_and_the_sum_is_exact() {
        static C: Striped = Striped::new();
        let handles: Vec<_> = (0..8)
            .map(|i| std::thread::spawn(move || (0..1000).for_each(|_| C.add(i))))
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap_or(()));
        C.add(-1000);
        assert_eq!(C.sum(), 1000 * (0..8).sum::<isize>() - 1000);
    }
}
