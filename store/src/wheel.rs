//! A hierarchical timer wheel with millisecond resolution, for active expiry.
//!
//! Eight levels of 64 slots: level `k` slots are `64^k` ms wide, so the wheel spans
//! 2^48 ms (about 8,900 years) with no overflow list. A timer goes to the lowest level
//! whose slot can tell its deadline apart from "now"; when time reaches a higher-level
//! slot its timers cascade down. Each level keeps a 64-bit occupancy bitmap, so the next
//! deadline is found with a few `trailing_zeros`, never by scanning slots.
//!
//! Timers name entries by hash slot and key hash rather than by key (16 bytes a timer,
//! no copy of the key); the keyspace checks an entry's own expiry before removing it, so
//! timers made stale by an overwrite, a PERSIST or a DEL are skipped when they come due.

use crate::keyspace::Millis;

/// Bits of a level's slot index.
const LEVEL_BITS: u32 = 6;
/// Slots per level.
const SLOTS: usize = 1 << LEVEL_BITS;
/// Levels: 8 × 6 bits cover 48-bit millisecond times.
const LEVELS: usize = 8;
/// Timers moved down a level per timer fired, at most, in one `advance` (moving one is a
/// few times cheaper than expiring a key).
const CASCADE_PER_FIRE: usize = 4;
/// A fired slot's buffer is kept for reuse up to this many timers.
const KEEP_SLOT_CAPACITY: usize = 1024;
/// Deadlines are kept in 48 bits (the hash slot rides in the other 16).
const DEADLINE_MASK: u64 = (1 << 48) - 1;

/// A pending expiry: when, and which entry (hash slot and key hash).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timer {
    packed: u64,
    /// Hash of the key, as the keyspace hashes it.
    pub hash: u64,
}

impl Timer {
    /// A timer firing at `deadline` for the key with `hash` in hash slot `slot`.
    pub fn new(deadline: Millis, slot: u16, hash: u64) -> Timer {
        Timer {
            packed: (deadline.min(DEADLINE_MASK)) | (u64::from(slot) << 48),
            hash,
        }
    }

    /// When it fires.
    pub fn deadline(&self) -> Millis {
        self.packed & DEADLINE_MASK
    }

    /// The key's hash slot.
    pub fn slot(&self) -> u16 {
        (self.packed >> 48) as u16
    }
}

/// Timers a chunk of a slot holds (64 KiB).
const CHUNK: usize = 4096;

/// A slot's timers, in chunks of at most [`CHUNK`]: a slot that receives a million timers
/// (one deadline for a million keys, cascading down) grows by a chunk at a time, never by
/// copying what it holds (a `Vec` doubling from 8 to 16 MiB copies 8, a millisecond).
#[derive(Debug, Default)]
struct Timers {
    chunks: Vec<Vec<Timer>>,
    len: usize,
}

impl Timers {
    fn push(&mut self, t: Timer) {
        match self.chunks.last_mut() {
            Some(chunk) if chunk.len() < CHUNK => chunk.push(t),
            _ => {
                let mut chunk = Vec::with_capacity(if self.chunks.is_empty() { 4 } else { CHUNK });
                chunk.push(t);
                self.chunks.push(chunk);
            }
        }
        self.len += 1;
    }

    fn pop(&mut self) -> Option<Timer> {
        let chunk = self.chunks.last_mut()?;
        let t = chunk.pop()?;
        self.len -= 1;
        if chunk.is_empty() && self.chunks.len() > 1 {
            self.chunks.pop();
        }
        Some(t)
    }

    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Timers the first chunk has room for (what an emptied slot keeps).
    fn capacity(&self) -> usize {
        self.chunks.first().map_or(0, Vec::capacity)
    }
}

#[derive(Debug)]
struct Level {
    slots: Vec<Timers>,
    occupied: u64,
}

/// The wheel.
#[derive(Debug)]
pub struct Wheel {
    levels: Vec<Level>,
    /// Time up to which every timer has been handed out (exclusive of later ones).
    now: Millis,
    len: usize,
    /// A higher-level slot whose cascade the budget cut short (level, slot): its timers
    /// may be due before anything in the lower levels, so it is finished before anything
    /// else fires, and until then the next deadline is now.
    cascading: Option<(usize, usize)>,
}

impl Wheel {
    /// An empty wheel whose time starts at `now`.
    pub fn new(now: Millis) -> Wheel {
        let levels = (0..LEVELS)
            .map(|_| Level {
                slots: (0..SLOTS).map(|_| Timers::default()).collect(),
                occupied: 0,
            })
            .collect();
        Wheel {
            levels,
            now: now & DEADLINE_MASK,
            len: 0,
            cascading: None,
        }
    }

    /// Timers pending (stale ones included).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no timer is pending.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The level a deadline goes to, seen from `now`.
    fn level_for(now: Millis, deadline: Millis) -> usize {
        let differing = (now ^ deadline) | (SLOTS as u64 - 1);
        let top_bit = 63 - differing.leading_zeros();
        (top_bit / LEVEL_BITS) as usize
    }

    /// Adds a timer. A deadline already past fires at the next `advance`.
    pub fn insert(&mut self, timer: Timer) {
        let deadline = timer.deadline().max(self.now);
        let level = Self::level_for(self.now, deadline).min(LEVELS - 1);
        let slot = ((deadline >> (LEVEL_BITS * level as u32)) as usize) & (SLOTS - 1);
        let l = &mut self.levels[level];
        l.slots[slot].push(timer);
        l.occupied |= 1 << slot;
        self.len += 1;
    }

    /// The start of the earliest occupied slot: no timer fires before it. `None` when
    /// the wheel is empty.
    pub fn next_deadline(&self) -> Option<Millis> {
        if self.cascading.is_some() {
            return Some(self.now);
        }
        for (k, level) in self.levels.iter().enumerate() {
            if level.occupied == 0 {
                continue;
            }
            let shift = LEVEL_BITS * k as u32;
            let pos = ((self.now >> shift) as usize) & (SLOTS - 1);
            // Slots before `pos` at this level belong to the next rotation, which the
            // level above covers; rotate so that `pos` comes first.
            let rotated = level.occupied.rotate_right(pos as u32);
            let offset = u64::from(rotated.trailing_zeros());
            let window = self.now >> (shift + LEVEL_BITS) << (shift + LEVEL_BITS);
            let slot = (pos as u64 + offset) & (SLOTS as u64 - 1);
            let mut start = window + (slot << shift);
            if slot < pos as u64 {
                start += 1 << (shift + LEVEL_BITS);
            }
            return Some(start.max(self.now));
        }
        None
    }

    /// Moves time to `to`, handing every timer whose deadline is at or before `to` to
    /// `fire`, at most `budget` of them; returns how many fired. When the budget runs
    /// out, time stops where it was and the rest fire on the next call.
    pub fn advance(&mut self, to: Millis, budget: usize, mut fire: impl FnMut(Timer)) -> usize {
        let to = to & DEADLINE_MASK;
        let mut fired = 0;
        while let Some(start) = self.next_deadline() {
            if start > to {
                break;
            }
            let (k, slot) = match self.cascading.take() {
                // A cascade cut short goes on first: its slot may hold the earliest timer.
                Some(unfinished) => unfinished,
                None => {
                    let k = (0..LEVELS)
                        .find(|&k| self.levels[k].occupied != 0)
                        .unwrap_or(0);
                    let shift = LEVEL_BITS * k as u32;
                    self.now = start;
                    (k, ((start >> shift) as usize) & (SLOTS - 1))
                }
            };
            let mut timers = std::mem::take(&mut self.levels[k].slots[slot]);
            self.levels[k].occupied &= !(1 << slot);
            self.len -= timers.len();
            if k == 0 {
                // Level-0 slots are one millisecond: everything here is due.
                while let Some(t) = timers.pop() {
                    if fired == budget {
                        timers.push(t);
                        break;
                    }
                    fire(t);
                    fired += 1;
                }
                if !timers.is_empty() {
                    self.len += timers.len();
                    self.levels[0].slots[slot] = timers;
                    self.levels[0].occupied |= 1 << slot;
                    return fired;
                }
                // Keep the emptied slot's buffer, so a busy slot does not reallocate —
                // unless a mass expiry made it large.
                let spare = &mut self.levels[0].slots[slot];
                if spare.capacity() == 0 && timers.capacity() <= KEEP_SLOT_CAPACITY {
                    *spare = timers;
                }
            } else {
                // Cascade into the lower levels — under a budget too, so that a slot holding
                // a million timers (one TTL for a million keys) is moved over several calls.
                let mut moved = 0;
                while let Some(t) = timers.pop() {
                    if moved == budget.saturating_mul(CASCADE_PER_FIRE) {
                        timers.push(t);
                        break;
                    }
                    self.insert(t);
                    moved += 1;
                }
                // (A timer moved down never lands in this slot again: its deadline lies
                // within the slot, so a lower level tells it apart from now.)
                if !timers.is_empty() {
                    self.len += timers.len();
                    self.levels[k].slots[slot] = timers;
                    self.levels[k].occupied |= 1 << slot;
                    self.cascading = Some((k, slot));
                    return fired;
                }
            }
        }
        if fired < budget {
            self.now = self.now.max(to);
        }
        fired
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn drain(w: &mut Wheel, to: Millis) -> Vec<Millis> {
        let mut out = Vec::new();
        w.advance(to, usize::MAX, |t| out.push(t.deadline()));
        out.sort_unstable();
        out
    }

    #[test]
    fn fires_in_time_and_not_before() {
        let now = 1_700_000_000_000;
        let mut w = Wheel::new(now);
        let deadlines = [
            now + 1,
            now + 63,
            now + 64,
            now + 65,
            now + 4_000,
            now + 300_000,
            now + 86_400_000,
        ];
        for (i, &d) in deadlines.iter().enumerate() {
            w.insert(Timer::new(d, i as u16, i as u64));
        }
        assert_eq!(w.len(), deadlines.len());
        for &d in &deadlines {
            assert!(w.next_deadline().unwrap() <= d);
            assert_eq!(
                drain(&mut w, d - 1),
                Vec::<Millis>::new(),
                "nothing before {d}"
            );
            assert_eq!(drain(&mut w, d), vec![d]);
        }
        assert!(w.is_empty());
        assert_eq!(w.next_deadline(), None);
    }

    #[test]
    fn past_deadlines_fire_at_once() {
        let mut w = Wheel::new(1000);
        w.insert(Timer::new(10, 0, 0));
        assert_eq!(drain(&mut w, 1000), vec![10]);
    }

    #[test]
    fn a_cascade_cut_short_still_fires_its_earliest_timer_in_time() {
        // A level-2 slot (4,096 ms) holding far more timers than one cascade moves: the
        // earliest of them must fire at its deadline, not once the others have.
        let now = 1_700_000_000_000 & !4095;
        let mut w = Wheel::new(now);
        // First in, so that a cascade taking the slot's timers from the end moves it last.
        w.insert(Timer::new(now + 8192 + 500, 0, u64::MAX));
        for i in 0..20_000u64 {
            w.insert(Timer::new(now + 8192 + 3000 + (i % 1000), 0, i));
        }
        let mut fired = Vec::new();
        let mut t = now;
        while t < now + 8192 + 600 {
            t += 1;
            // The worker's loop: advance while the wheel says something is due.
            while w.next_deadline().is_some_and(|d| d <= t) {
                if w.advance(t, 1000, |timer| fired.push((t, timer))) == 0
                    && w.next_deadline().is_some_and(|d| d > t)
                {
                    break;
                }
            }
        }
        let lease = fired.iter().find(|(_, timer)| timer.hash == u64::MAX);
        assert_eq!(
            lease.map(|(at, _)| *at),
            Some(now + 8192 + 500),
            "fired at its deadline"
        );
        assert!(fired.iter().all(|(at, timer)| timer.deadline() <= *at));
    }

    #[test]
    fn the_budget_is_respected_and_the_rest_fires_later() {
        let mut w = Wheel::new(0);
        for i in 0..100 {
            w.insert(Timer::new(500, 0, i));
        }
        let mut n = 0;
        assert_eq!(w.advance(1000, 30, |_| n += 1), 30);
        assert_eq!(w.len(), 70);
        assert_eq!(w.next_deadline(), Some(500));
        assert_eq!(w.advance(1000, usize::MAX, |_| n += 1), 70);
        assert_eq!(n, 100);
    }

    #[test]
    fn a_huge_slot_cascades_over_several_calls() {
        let mut w = Wheel::new(0);
        for i in 0..10_000 {
            w.insert(Timer::new(100_000, 0, i));
        }
        let mut fired = 0;
        let mut calls = 0;
        let mut hashes = Vec::new();
        while fired < 10_000 {
            fired += w.advance(100_000, 100, |t| hashes.push(t.hash));
            calls += 1;
            assert!(calls < 1000);
        }
        assert!(calls > 10, "{calls}");
        assert!(w.is_empty());
        // Each exactly once, through slots of several chunks.
        hashes.sort_unstable();
        assert_eq!(hashes, (0..10_000).collect::<Vec<u64>>());
    }

    #[test]
    fn slot_and_hash_ride_along() {
        let t = Timer::new(123_456, 16_383, u64::MAX);
        assert_eq!(
            (t.deadline(), t.slot(), t.hash),
            (123_456, 16_383, u64::MAX)
        );
    }

    #[test]
    fn matches_a_naive_model() {
        // Pseudo-random deadlines and advances against a sorted list.
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut now = 5_000_000;
        let mut w = Wheel::new(now);
        let mut model: Vec<Millis> = Vec::new();
        for _ in 0..2000 {
            let span = [10u64, 1_000, 100_000, 10_000_000][(next() % 4) as usize];
            let d = now + next() % span;
            w.insert(Timer::new(d, 0, 0));
            model.push(d);
            if next() % 3 == 0 {
                now += next() % 50_000;
                let fired = drain(&mut w, now);
                let mut due: Vec<Millis> = model.iter().copied().filter(|&d| d <= now).collect();
                due.sort_unstable();
                model.retain(|&d| d > now);
                assert_eq!(fired, due);
                if let (Some(next_d), Some(&min)) = (w.next_deadline(), model.iter().min()) {
                    assert!(next_d <= min);
                }
            }
        }
    }
}
