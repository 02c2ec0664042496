//! `maxmemory`: the limit, the eviction policy, and what the shards read of them.
//!
//! Memory in use is the counting allocator's figure (`alloc::allocated`), one number for
//! the whole process. When it passes `maxmemory`, a command that may grow memory
//! (flagged `denyoom`) first makes its connection's shard evict keys by the policy, as
//! Redis evicts before such a command; if memory is still over the limit (or the policy
//! is `noeviction`), the command gets Redis's `OOM` error. Every shard also evicts a few
//! keys per loop iteration while memory is over, so that the limit is shared among the
//! shards, not taken from the busiest one alone. Candidates are sampled as Redis samples
//! them (`maxmemory-samples` random keys, the best by idle time, frequency or expiry),
//! and evictions go through the shard's write path, so the log records them as DELs.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};

use goblin_store::{AccessMode, EvictBy};

/// `maxmemory-policy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// Refuse writes that may grow memory (the default).
    #[default]
    NoEviction,
    /// Evict the least recently used keys.
    AllKeysLru,
    /// Evict the least frequently used keys.
    AllKeysLfu,
    /// Evict keys at random.
    AllKeysRandom,
    /// Evict the least recently used keys with an expiry.
    VolatileLru,
    /// Evict the least frequently used keys with an expiry.
    VolatileLfu,
    /// Evict keys with an expiry at random.
    VolatileRandom,
    /// Evict the keys with the nearest expiry.
    VolatileTtl,
}

const POLICIES: [(Policy, &str); 8] = [
    (Policy::VolatileLru, "volatile-lru"),
    (Policy::VolatileLfu, "volatile-lfu"),
    (Policy::VolatileRandom, "volatile-random"),
    (Policy::VolatileTtl, "volatile-ttl"),
    (Policy::AllKeysLru, "allkeys-lru"),
    (Policy::AllKeysLfu, "allkeys-lfu"),
    (Policy::AllKeysRandom, "allkeys-random"),
    (Policy::NoEviction, "noeviction"),
];

impl Policy {
    /// Its name in redis.conf.
    pub fn name(self) -> &'static str {
        POLICIES
            .iter()
            .find(|(p, _)| *p == self)
            .map_or("noeviction", |(_, n)| n)
    }

    /// The policy named `name` (any case).
    ///
    /// # Errors
    /// redis-server's text listing the names.
    pub fn parse(name: &str) -> Result<Policy, String> {
        POLICIES
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
            .map(|(p, _)| *p)
            .ok_or_else(|| {
                let names: Vec<&str> = POLICIES.iter().map(|(_, n)| *n).collect();
                format!(
                    "argument(s) must be one of the following: {}",
                    names.join(", ")
                )
            })
    }

    /// What its eviction looks for, and whether among keys with an expiry only; `None`
    /// for `noeviction`.
    pub fn evicts(self) -> Option<(EvictBy, bool)> {
        match self {
            Policy::NoEviction => None,
            Policy::AllKeysLru => Some((EvictBy::Lru, false)),
            Policy::AllKeysLfu => Some((EvictBy::Lfu, false)),
            Policy::AllKeysRandom => Some((EvictBy::Random, false)),
            Policy::VolatileLru => Some((EvictBy::Lru, true)),
            Policy::VolatileLfu => Some((EvictBy::Lfu, true)),
            Policy::VolatileRandom => Some((EvictBy::Random, true)),
            Policy::VolatileTtl => Some((EvictBy::Ttl, true)),
        }
    }

    /// Whether keys' access fields count frequencies (an LFU policy) rather than times.
    pub fn is_lfu(self) -> bool {
        matches!(self, Policy::AllKeysLfu | Policy::VolatileLfu)
    }

    fn index(self) -> u8 {
        POLICIES.iter().position(|(p, _)| *p == self).unwrap_or(7) as u8
    }

    fn from_index(i: u8) -> Policy {
        POLICIES
            .get(usize::from(i))
            .map_or(Policy::NoEviction, |(p, _)| *p)
    }
}

/// The memory options, as configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryConfig {
    /// `maxmemory` in bytes (0: no limit).
    pub maxmemory: u64,
    /// `maxmemory-policy`.
    pub policy: Policy,
    /// `maxmemory-samples`.
    pub samples: u32,
    /// `lfu-log-factor`.
    pub lfu_log_factor: u32,
    /// `lfu-decay-time` (minutes).
    pub lfu_decay_time: u32,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            maxmemory: 0,
            policy: Policy::NoEviction,
            samples: 5,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
        }
    }
}

/// Whether small integer values count as shared objects (OBJECT REFCOUNT): as in Redis,
/// unless a `maxmemory` limit evicts by LRU or LFU, which keeps an access field per
/// value. The process's one configuration, as [`used`] is its one allocator.
static INTEGERS_SHARED: AtomicBool = AtomicBool::new(true);

/// Whether small integer values count as shared objects now (see `INTEGERS_SHARED`).
pub fn integers_shared() -> bool {
    INTEGERS_SHARED.load(Ordering::Relaxed)
}

impl MemoryConfig {
    /// How keys' access fields are kept under this configuration.
    pub fn access_mode(&self) -> AccessMode {
        if self.policy.is_lfu() {
            AccessMode::Lfu {
                log_factor: self.lfu_log_factor,
                decay_minutes: self.lfu_decay_time,
            }
        } else {
            AccessMode::Lru
        }
    }
}

/// The memory options as the workers read them, every command that may grow memory and
/// every loop iteration: atomics, kept from the live configuration.
#[derive(Debug, Default)]
pub struct Limits {
    maxmemory: AtomicU64,
    policy: AtomicU8,
    samples: AtomicU32,
    lfu_log_factor: AtomicU32,
    lfu_decay_time: AtomicU32,
    /// Keys evicted since start (INFO's `evicted_keys`).
    pub evicted_keys: AtomicU64,
    /// The most memory seen in use (MEMORY STATS' `peak.allocated`).
    peak: AtomicU64,
    /// Memory in use once the server was ready (INFO's `used_memory_startup`).
    pub startup: AtomicU64,
    /// When the last eviction round began (ms), and the bytes still to free in it
    /// ([`Limits::eviction_share`]).
    round_at: AtomicU64,
    debt: AtomicU64,
    /// Since when memory has been over `maxmemory` (Unix ms; 0: it is not), and how
    /// long it was over before (INFO's `current_eviction_exceeded_time`,
    /// `total_eviction_exceeded_time`).
    exceeded_since: AtomicU64,
    exceeded_total: AtomicU64,
}

/// How long an eviction round lasts: what it freed is measured again only after it.
pub const EVICTION_ROUND_MS: u64 = 100;

impl Limits {
    /// A worker's look, each loop iteration: whether memory is over `maxmemory` now.
    pub fn note_exceeded(&self, over: bool, now: u64) {
        if over {
            let _ = self.exceeded_since.compare_exchange(
                0,
                now.max(1),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        } else if self.exceeded_since.load(Ordering::Relaxed) != 0 {
            let since = self.exceeded_since.swap(0, Ordering::Relaxed);
            self.exceeded_total
                .fetch_add(now.saturating_sub(since), Ordering::Relaxed);
        }
    }

    /// Whether memory was over `maxmemory` at the workers' last look.
    pub fn exceeding(&self) -> bool {
        self.exceeded_since.load(Ordering::Relaxed) != 0
    }

    /// How long memory has been over `maxmemory`, in all and (0 when it is not) this
    /// time, in ms.
    pub fn exceeded(&self, now: u64) -> (u64, u64) {
        let since = self.exceeded_since.load(Ordering::Relaxed);
        let current = if since == 0 {
            0
        } else {
            now.saturating_sub(since)
        };
        (
            self.exceeded_total.load(Ordering::Relaxed) + current,
            current,
        )
    }

    /// CONFIG RESETSTAT: the time over the limit counts again from now.
    pub fn reset_exceeded(&self) {
        self.exceeded_total.store(0, Ordering::Relaxed);
        let now = crate::clock::now_ms().max(1);
        let _ = self
            .exceeded_since
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                (s != 0).then_some(now)
            });
    }

    /// The most memory seen in use, `used` included.
    pub fn peak(&self, used: usize) -> usize {
        let before = self.peak.fetch_max(used as u64, Ordering::Relaxed);
        before.max(used as u64) as usize
    }

    /// Limits for `config`.
    pub fn new(config: &MemoryConfig) -> Limits {
        let limits = Limits::default();
        limits.set(config);
        limits
    }

    /// Takes a new configuration (CONFIG SET).
    pub fn set(&self, config: &MemoryConfig) {
        self.maxmemory.store(config.maxmemory, Ordering::Relaxed);
        self.policy.store(config.policy.index(), Ordering::Relaxed);
        self.samples.store(config.samples, Ordering::Relaxed);
        self.lfu_log_factor
            .store(config.lfu_log_factor, Ordering::Relaxed);
        self.lfu_decay_time
            .store(config.lfu_decay_time, Ordering::Relaxed);
        let by_access = matches!(
            config.policy.evicts(),
            Some((EvictBy::Lru | EvictBy::Lfu, _))
        );
        INTEGERS_SHARED.store(config.maxmemory == 0 || !by_access, Ordering::Relaxed);
    }

    /// The bytes a shard is to free now, with memory `over` the limit and `sharing`
    /// shards (itself included) that have keys to evict.
    ///
    /// Eviction goes in rounds, as Redis's `performEvictions` frees what was over when it
    /// began and no more: the first shard to look after a round ends
    /// ([`EVICTION_ROUND_MS`]) measures what is over, and the shards take their shares of
    /// that until it is freed. What the evictions make meanwhile — the invalidations sent
    /// to tracking clients, waiting in other threads' messages and output buffers, ten
    /// times the bytes freed with ten clients — is not taken for more memory to free
    /// (Redis's "client tracking don't cause eviction feedback loop"); once it is
    /// written, the next round measures again.
    pub fn eviction_share(&self, over: u64, sharing: u64, now: u64) -> u64 {
        let began = self.round_at.load(Ordering::Relaxed);
        if now >= began.saturating_add(EVICTION_ROUND_MS)
            && self
                .round_at
                .compare_exchange(began, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            self.debt.store(over, Ordering::Release);
        }
        let mut debt = self.debt.load(Ordering::Acquire);
        while debt > 0 {
            let share = debt.div_ceil(sharing.max(1));
            match self.debt.compare_exchange_weak(
                debt,
                debt - share,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return share,
                Err(now_owed) => debt = now_owed,
            }
        }
        0
    }

    /// The configuration now.
    pub fn get(&self) -> MemoryConfig {
        MemoryConfig {
            maxmemory: self.maxmemory.load(Ordering::Relaxed),
            policy: Policy::from_index(self.policy.load(Ordering::Relaxed)),
            samples: self.samples.load(Ordering::Relaxed),
            lfu_log_factor: self.lfu_log_factor.load(Ordering::Relaxed),
            lfu_decay_time: self.lfu_decay_time.load(Ordering::Relaxed),
        }
    }

    /// `maxmemory` (0: none): one load, for the common check.
    pub fn maxmemory(&self) -> u64 {
        self.maxmemory.load(Ordering::Relaxed)
    }
}

/// Memory in use: the counting allocator's figure (the process's resident size when it
/// is not installed).
pub fn used() -> u64 {
    crate::alloc::allocated().map_or_else(crate::util::rss_bytes, |n| n as u64)
}

/// What the replicas' connections hold (their output: the stream they were not sent
/// yet), as each worker last measured its own: not counted against `maxmemory`, as
/// redis-server's `freeMemoryGetNotCountedMemory` leaves the replicas' buffers out, so
/// that a slow replica does not make the master evict (INFO's `mem_not_counted_for_evict`
/// and `mem_clients_slaves`). The process's one figure, as [`used`] is.
static NOT_COUNTED: AtomicU64 = AtomicU64::new(0);

/// A worker's replicas now hold `now` bytes, where they held `before`.
pub fn replicas_hold(before: u64, now: u64) {
    if now > before {
        NOT_COUNTED.fetch_add(now - before, Ordering::Relaxed);
    } else if before > now {
        NOT_COUNTED.fetch_sub(before - now, Ordering::Relaxed);
    }
}

/// What the master's replication stream holds over `repl-backlog-size` (what its
/// replicas were not sent yet, and its room to grow): left out too, as redis-server
/// counts of its shared replication buffer only the backlog's size.
static STREAM_EXCESS: AtomicU64 = AtomicU64::new(0);

/// The replication stream holds `excess` bytes over the backlog's size now.
pub fn stream_holds(excess: u64) {
    STREAM_EXCESS.store(excess, Ordering::Relaxed);
}

/// What the replicas' connections hold (see `NOT_COUNTED`): INFO's
/// `mem_clients_slaves`.
pub fn replicas_buffers() -> u64 {
    NOT_COUNTED.load(Ordering::Relaxed)
}

/// What is left out of `maxmemory`: the replicas' buffers and the stream's excess
/// (INFO's `mem_not_counted_for_evict`).
pub fn not_counted() -> u64 {
    NOT_COUNTED.load(Ordering::Relaxed) + STREAM_EXCESS.load(Ordering::Relaxed)
}

/// Makes room in `buf` for `n` more bytes as `Vec` would (twice its room, or what is
/// needed), telling `left_out` first, when it grows, the bytes the move holds at once
/// (the old buffer and the new one): left out of `maxmemory` before they are
/// allocated, as other threads compare memory with the limit meanwhile.
pub fn reserve_left_out(buf: &mut Vec<u8>, n: usize, left_out: impl FnOnce(u64)) {
    let (len, capacity) = (buf.len(), buf.capacity());
    if len + n > capacity {
        let grown = (len + n).max(capacity * 2);
        left_out((grown + capacity) as u64);
        buf.reserve_exact(grown - len);
    }
}

/// Memory in use as the limit is compared with: [`used`] but what [`not_counted`]
/// leaves out.
pub fn counted() -> u64 {
    used().saturating_sub(not_counted())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The trim runs (through the FFI declaration) after memory was freed, and the
    /// allocator keeps working.
    #[test]
    fn purging_returns_freed_memory_and_leaves_the_allocator_working() {
        let blocks: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 256 << 10]).collect();
        drop(blocks);
        let _ = purge_now();
        let after = vec![7u8; 1 << 20];
        assert_eq!(
            after.iter().map(|&b| usize::from(b)).sum::<usize>(),
            7 << 20
        );
        purge_soon();
        purge_soon();
    }

    #[test]
    fn policies_by_name() {
        for (policy, name) in POLICIES {
            assert_eq!(Policy::parse(name), Ok(policy));
            assert_eq!(Policy::parse(&name.to_uppercase()), Ok(policy));
            assert_eq!(policy.name(), name);
            assert_eq!(Policy::from_index(policy.index()), policy);
        }
        assert_eq!(
            Policy::parse("lru"),
            Err(
                "argument(s) must be one of the following: volatile-lru, volatile-lfu, \
                 volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, \
                 noeviction"
                    .into()
            )
        );
    }
}

/// Gives memory freed in bulk back to the operating system: glibc's malloc keeps freed
/// pages in its arenas (after a FLUSHALL of 2 GB the process stayed at 2 GB resident),
/// and `malloc_trim` returns them. It walks every arena under its lock, so it runs on a
/// thread of its own, asked by [`purge_soon`] (after a flush, or by the cron when the
/// resident size is far above what is in use), never on a shard's loop.
#[allow(unsafe_code)]
mod purge {
    use std::sync::OnceLock;
    use std::sync::mpsc::{Sender, channel};
    use std::time::Duration;

    static PURGER: OnceLock<Option<std::sync::Mutex<Sender<()>>>> = OnceLock::new();

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe extern "C" {
        /// glibc: releases free memory at the top of the heap and, since 2.8, free pages
        /// anywhere in every arena (`madvise(MADV_DONTNEED)`); returns 1 if any was.
        fn malloc_trim(pad: usize) -> std::ffi::c_int;
    }

    /// Trims now, on the calling thread; whether memory was released.
    pub fn purge_now() -> bool {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            // SAFETY: `malloc_trim` is glibc's, declared with its C signature (`int
            // malloc_trim(size_t pad)`); it takes no pointer, only reorganises the
            // allocator's own free lists under the arenas' locks (it is thread-safe, as
            // glibc documents), and Rust's System allocator is that same malloc, so no
            // block Rust holds is touched.
            unsafe { malloc_trim(0) == 1 }
        }
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        {
            false
        }
    }

    /// Asks the purging thread (started on first use) to trim shortly.
    pub fn purge_soon() {
        let purger = PURGER.get_or_init(|| {
            let (tx, rx) = channel::<()>();
            std::thread::Builder::new()
                .name("goblin-purge".into())
                .spawn(move || {
                    while rx.recv().is_ok() {
                        // Let the frees that asked finish, then trim once for all.
                        std::thread::sleep(Duration::from_millis(100));
                        while rx.try_recv().is_ok() {}
                        purge_now();
                    }
                })
                .ok()
                .map(|_| std::sync::Mutex::new(tx))
        });
        if let Some(tx) = purger
            && let Ok(tx) = tx.lock()
        {
            let _ = tx.send(());
        }
    }
}

pub use purge::{purge_now, purge_soon};

/// Asks for a purge when the resident size is far above the memory in use (by 64 MiB and
/// a quarter): the cron's check, for memory freed by many deletes rather than a flush.
pub fn purge_if_bloated() {
    let (used, rss) = (used(), crate::util::rss_bytes());
    if rss > used + (64 << 20).max(used / 4) {
        purge_soon();
    }
}
