//! The wall clock, read once per loop iteration.

use std::time::{SystemTime, UNIX_EPOCH};

use goblin_store::Millis;

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as Millis)
}

/// Nanoseconds since the Unix epoch (as the kernel's receive times: the order of
/// blocked clients, `shard/park.rs`).
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Microseconds since the Unix epoch (MONITOR's timestamps).
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Sleeps until `until` (at once when it has passed): DEBUG SLEEP's stop, on the
/// coordinator and on every worker.
pub fn sleep_until(until: std::time::Instant) {
    std::thread::sleep(until.saturating_duration_since(std::time::Instant::now()));
}
