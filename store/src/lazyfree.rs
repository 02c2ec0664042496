//! Lazy freeing: a value of many elements is freed on a background thread, as Redis's
//! lazy free does (UNLINK, `lazyfree-lazy-*`), so that deleting, overwriting or expiring
//! a collection of a million members — or flushing a keyspace — does not stall the loop
//! that does it. Small values are freed at once: handing them over costs more than
//! freeing them.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Sender, channel};

use crate::types::Value;

/// A value with more elements than this is freed in the background (Redis's
/// `LAZYFREE_THRESHOLD`).
pub const THRESHOLD: usize = 64;

type Garbage = Box<dyn Send>;

/// The background thread's queue (`None` when the thread could not be started: then
/// everything is freed at once).
static QUEUE: OnceLock<Option<Sender<Garbage>>> = OnceLock::new();
/// Values handed over and not yet freed, and freed so far (INFO's
/// `lazyfree_pending_objects` and `lazyfreed_objects`).
static PENDING: AtomicU64 = AtomicU64::new(0);
static FREED: AtomicU64 = AtomicU64::new(0);

fn queue() -> Option<&'static Sender<Garbage>> {
    QUEUE
        .get_or_init(|| {
            let (tx, rx) = channel::<Garbage>();
            std::thread::Builder::new()
                .name("goblin-lazyfree".into())
                .spawn(move || {
                    for garbage in rx {
                        drop(garbage);
                        PENDING.fetch_sub(1, Ordering::Relaxed);
                        FREED.fetch_add(1, Ordering::Relaxed);
                    }
                })
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

/// Starts the background thread now (else the first big free starts it, on the loop
/// that frees: a thread's creation costs a few hundred microseconds there).
pub fn start() {
    let _ = queue();
}

/// Frees `value`: in the background when freeing it is more than [`THRESHOLD`]
/// allocations ([`Value::free_effort`]).
pub fn free(value: Value) {
    if value.free_effort() > THRESHOLD {
        free_later(value);
    }
}

/// Frees `garbage` on the background thread (at once if there is none).
pub fn free_later<T: Send + 'static>(garbage: T) {
    let Some(tx) = queue() else {
        return;
    };
    PENDING.fetch_add(1, Ordering::Relaxed);
    if let Err(unsent) = tx.send(Box::new(garbage)) {
        PENDING.fetch_sub(1, Ordering::Relaxed);
        drop(unsent);
    }
}

/// Values handed over and not yet freed.
pub fn pending() -> u64 {
    PENDING.load(Ordering::Relaxed)
}

/// Values freed in the background so far (since the last [`reset_stats`]).
pub fn freed() -> u64 {
    FREED.load(Ordering::Relaxed)
}

/// The count of values freed starts again from zero (CONFIG RESETSTAT).
pub fn reset_stats() {
    FREED.store(0, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Set;

    #[test]
    fn big_values_are_freed_in_the_background() {
        let before = freed();
        let mut set = Set::default();
        for i in 0..1000u32 {
            set.insert(i.to_string().as_bytes());
        }
        free(Value::Set(Box::new(set)));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while freed() == before && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(freed() > before);
    }
}
