//! CLIENT PAUSE: while a pause lasts, the commands it holds (every command, or those that
//! write) wait before they run, on every worker, and keys neither expire actively nor are
//! evicted (redis-server 7.0's rules). The state is two atomics, read where a command is
//! dispatched; changes take a lock so that two pauses combine as Redis combines them.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use goblin_store::Millis;

/// The server's pause.
#[derive(Debug, Default)]
pub struct Pause {
    /// When it ends (wall-clock milliseconds); 0 or past: no pause.
    until: AtomicU64,
    /// It holds every command, not only writes.
    all: AtomicBool,
    /// Serialises changes.
    change: Mutex<()>,
}

impl Pause {
    /// CLIENT PAUSE: until `until`, holding every command (`all`) or writes. A pause
    /// already running keeps the later end and the wider kind.
    pub fn pause(&self, until: Millis, all: bool, now: Millis) {
        let _guard = self
            .change
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let current = self.until.load(Ordering::Relaxed);
        if current > now {
            self.all
                .store(all || self.all.load(Ordering::Relaxed), Ordering::Relaxed);
            self.until.store(current.max(until), Ordering::Release);
        } else {
            self.all.store(all, Ordering::Relaxed);
            self.until.store(until, Ordering::Release);
        }
    }

    /// CLIENT UNPAUSE.
    pub fn unpause(&self) {
        let _guard = self
            .change
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.until.store(0, Ordering::Release);
        self.all.store(false, Ordering::Relaxed);
    }

    /// Whether a pause may last (one was set and not ended by UNPAUSE): a test without
    /// the clock, for the loop's sleep.
    pub fn maybe(&self) -> bool {
        self.until.load(Ordering::Relaxed) != 0
    }

    /// When the pause ends, if one lasts at `now`.
    pub fn until(&self, now: Millis) -> Option<Millis> {
        let until = self.until.load(Ordering::Acquire);
        (until > now).then_some(until)
    }

    /// Whether the pause holds a command at `now` (`writes`: it writes, or may be
    /// propagated).
    pub fn holds(&self, writes: bool, now: Millis) -> bool {
        self.until(now).is_some() && (writes || self.all.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_combine_and_end() {
        let p = Pause::default();
        assert!(!p.holds(true, 0));
        p.pause(1000, false, 0);
        assert!(p.holds(true, 10));
        assert!(!p.holds(false, 10));
        // A shorter ALL pause widens the kind, keeps the end.
        p.pause(500, true, 10);
        assert!(p.holds(false, 600));
        assert_eq!(p.until(600), Some(1000));
        assert!(!p.holds(true, 1000));
        // After it ended, a new pause starts afresh.
        p.pause(3000, false, 2000);
        assert!(!p.holds(false, 2500));
        p.unpause();
        assert!(!p.holds(true, 2500));
    }
}
