//! Client eviction (`maxmemory-clients`), as Redis 7 does it (`evictClients`): when the
//! memory of the clients that may be evicted reaches the limit, the largest are closed,
//! one at a time, until it is under the limit again.
//!
//! Redis keeps its clients in buckets by the power of two of their memory and evicts
//! from the largest bucket first. Here each worker keeps its own clients' figures and
//! publishes, for the others to read, their sum and how many of its clients each bucket
//! holds ([`WorkerClients`]). A worker over the limit evicts its own clients of the
//! largest bucket of all; when that bucket's clients live on other workers, it wakes
//! them to do it. Decisions are taken one worker at a time ([`ClientEviction::turn`]),
//! so that two workers never both evict for the same excess.
//!
//! A client may be evicted unless it said CLIENT NO-EVICT ON (Redis also spares
//! replicas and its master, which Goblin does not have); its memory counts towards the
//! limit all the same, as in Redis. A client's memory is what CLIENT LIST's `tot-mem`
//! shows (`Conn::memory`).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::runtime::worker::Worker;

/// The smallest bucket holds clients under 2^15 bytes (Redis's
/// `CLIENT_MEM_USAGE_BUCKET_MIN_LOG`).
const BUCKET_MIN_LOG: u32 = 15;
/// The largest holds those of 2^33 bytes and more (`CLIENT_MEM_USAGE_BUCKET_MAX_LOG`).
const BUCKET_MAX_LOG: u32 = 33;
/// How many buckets there are.
pub const BUCKETS: usize = (BUCKET_MAX_LOG - BUCKET_MIN_LOG + 1) as usize;

/// Below this, a limit is raised to it, so that a mistaken setting does not close every
/// client, the one that could mend it among them (Redis: 128 KiB).
const MIN_LIMIT: u64 = 128 * 1024;

/// The bucket of a client holding `mem` bytes: the number of bits of `mem`, within the
/// buckets' range, as Redis's `getMemUsageBucket`.
pub fn bucket(mem: usize) -> usize {
    let bits = usize::BITS - mem.leading_zeros();
    (bits.clamp(BUCKET_MIN_LOG, BUCKET_MAX_LOG) - BUCKET_MIN_LOG) as usize
}

/// The limit `maxmemory-clients` sets (0: none), as Redis's `getClientEvictionLimit`:
/// a number of bytes, or a percentage of `maxmemory` (none while `maxmemory` is 0); at
/// least [`MIN_LIMIT`].
pub fn limit(setting: &str, maxmemory: u64) -> u64 {
    let bytes = match setting.strip_suffix('%') {
        Some(percent) => match percent.parse::<u64>() {
            Ok(p) if maxmemory > 0 => (maxmemory as f64 * p as f64 / 100.0) as u64,
            _ => 0,
        },
        None => setting.parse::<u64>().unwrap_or(0),
    };
    if bytes == 0 { 0 } else { bytes.max(MIN_LIMIT) }
}

/// A client as its worker last weighed it: its memory, and its bucket if it may be
/// evicted.
pub type Weight = (usize, Option<usize>);

/// What one worker publishes of its clients.
#[derive(Debug, Default)]
pub struct WorkerClients {
    /// Their memory, in all.
    sum: AtomicU64,
    /// How many of those that may be evicted each bucket holds.
    counts: [AtomicU32; BUCKETS],
}

impl WorkerClients {
    /// A client's weight changed from `was` (if it was counted) to `is`.
    pub fn update(&self, was: Option<Weight>, is: Option<Weight>) {
        if let Some((mem, bucket)) = was {
            self.sum.fetch_sub(mem as u64, Ordering::Relaxed);
            if let Some(b) = bucket {
                self.counts[b].fetch_sub(1, Ordering::Relaxed);
            }
        }
        if let Some((mem, bucket)) = is {
            self.sum.fetch_add(mem as u64, Ordering::Relaxed);
            if let Some(b) = bucket {
                self.counts[b].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Its largest bucket that holds a client.
    pub fn top(&self) -> Option<usize> {
        (0..BUCKETS)
            .rev()
            .find(|&b| self.counts[b].load(Ordering::Relaxed) > 0)
    }
}

/// The limit in force and every worker's figures.
#[derive(Debug)]
pub struct ClientEviction {
    /// `maxmemory-clients` in bytes (0: no client is evicted).
    limit: AtomicU64,
    /// Each worker's clients, by worker.
    pub workers: Vec<WorkerClients>,
    /// One worker at a time decides.
    turn: Mutex<()>,
    /// Clients evicted since start or CONFIG RESETSTAT (INFO's `evicted_clients`).
    pub evicted: AtomicU64,
}

impl ClientEviction {
    /// No limit yet, for `threads` workers.
    pub fn new(threads: usize) -> Self {
        ClientEviction {
            limit: AtomicU64::new(0),
            workers: (0..threads).map(|_| WorkerClients::default()).collect(),
            turn: Mutex::new(()),
            evicted: AtomicU64::new(0),
        }
    }

    /// The limit in force (0: none).
    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Relaxed)
    }

    /// Sets the limit (CONFIG SET, start-up).
    pub fn set_limit(&self, limit: u64) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// The memory of every worker's clients.
    pub fn total(&self) -> u64 {
        self.workers
            .iter()
            .map(|w| w.sum.load(Ordering::Relaxed))
            .sum()
    }

    /// The largest bucket that holds a client, on any worker.
    pub fn top(&self) -> Option<usize> {
        self.workers.iter().filter_map(WorkerClients::top).max()
    }

    /// The right to decide, held while a worker evicts.
    pub fn turn(&self) -> std::sync::MutexGuard<'_, ()> {
        self.turn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Worker {
    /// Publishes connection `key`'s memory as it is now, in its bucket unless it said
    /// CLIENT NO-EVICT ON (no limit: not counted).
    fn weigh(&mut self, key: usize, limit: u64) {
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        let is = (limit > 0 && !conn.gone).then(|| {
            let mem = conn.memory();
            (mem, (!conn.client.no_evict).then(|| bucket(mem)))
        });
        let was = std::mem::replace(&mut conn.evict, is);
        if was != is {
            self.shared.client_eviction.workers[self.id].update(was, is);
        }
    }

    /// Weighs connection `key` again after it read or ran something, and evicts clients
    /// if they are over the limit; whether `key` was closed. (One comparison while no
    /// limit is set: a new one is taken up at the start of the worker's next iteration,
    /// `Worker::client_eviction_work`, which CONFIG SET wakes it for.)
    #[inline(always)]
    pub(crate) fn weigh_client(&mut self, key: usize) -> bool {
        self.clients_limit != 0 && self.weigh_client_now(key)
    }

    /// [`Worker::weigh_client`] under the limit in force.
    pub(crate) fn weigh_client_now(&mut self, key: usize) -> bool {
        let limit = self.shared.client_eviction.limit();
        if limit == 0 {
            return false;
        }
        // Its output limit goes first: a client past it is closed for that.
        if self.past_output_limit(key) {
            return true;
        }
        self.weigh(key, limit);
        self.evict_clients(limit);
        self.conns.get(key).is_none_or(|c| c.gone)
    }

    /// Weighs every connection of this worker again, and evicts clients if they are
    /// over the limit: when the limit changed, before keys are evicted, and before
    /// CLIENT LIST shows them.
    pub(crate) fn weigh_clients(&mut self) {
        let limit = self.shared.client_eviction.limit();
        if limit == 0 && self.clients_limit == 0 {
            return;
        }
        self.clients_limit = limit;
        let keys: Vec<usize> = self.conns.iter().map(|(key, _)| key).collect();
        for key in keys {
            self.weigh(key, limit);
        }
        if limit > 0 {
            self.evict_clients(limit);
        }
    }

    /// Every loop iteration: a new limit has every client weighed under it; over the
    /// limit (another worker woke this one to evict its share), clients are evicted.
    #[inline]
    pub(crate) fn client_eviction_work(&mut self) {
        let limit = self.shared.client_eviction.limit();
        if limit != 0 || self.clients_limit != 0 {
            self.client_eviction_look(limit);
        }
    }

    /// [`Worker::client_eviction_work`] with a limit, or one just lifted.
    fn client_eviction_look(&mut self, limit: u64) {
        if limit != self.clients_limit {
            self.weigh_clients();
        } else if limit > 0 {
            self.evict_clients(limit);
        }
    }

    /// A closed connection is no longer counted.
    pub(crate) fn unweigh(&mut self, key: usize) {
        self.weigh(key, 0);
    }

    /// While the clients are at or over `limit`, closes this worker's largest client in the
    /// largest bucket of all, logging it as Redis does; when that bucket's clients are
    /// on other workers only, wakes those to do it. A client past its output buffer
    /// limit is closed for that instead, and is not counted as evicted (Redis enforces
    /// that limit first).
    fn evict_clients(&mut self, limit: u64) {
        let shared = Arc::clone(&self.shared);
        let eviction = &shared.client_eviction;
        // (Under the limit, as nearly always: not even the lock.)
        if eviction.total() < limit {
            return;
        }
        let _turn = eviction.turn();
        while eviction.total() >= limit {
            let Some(top) = eviction.top() else {
                // (Once a second at most: it stays so until a client goes.)
                static LOGGED: AtomicU64 = AtomicU64::new(0);
                let second = self.now / 1000;
                if LOGGED.swap(second, Ordering::Relaxed) != second {
                    crate::log!(
                        Warning,
                        "Over client maxmemory after evicting all evictable clients"
                    );
                }
                return;
            };
            let victim = self
                .conns
                .iter()
                .filter_map(|(key, c)| match c.evict {
                    Some((mem, Some(bucket))) if bucket == top && !c.gone => Some((mem, key)),
                    _ => None,
                })
                .max();
            let Some((_, key)) = victim else {
                for (w, clients) in eviction.workers.iter().enumerate() {
                    if w != self.id && clients.top() == Some(top) {
                        shared.peers[w].send(Vec::new());
                    }
                }
                return;
            };
            if self.past_output_limit(key) {
                continue;
            }
            let blocked = self.blocked_in_a_wait(key);
            let now = self.now;
            if let Some(conn) = self.conns.get_mut(key) {
                let info = conn.info_line(blocked, now);
                crate::log!(Notice, "Evicting client: {info}");
            }
            self.close(key);
            eviction.evicted.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_go_by_powers_of_two_within_redis_range() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(20_000), 0);
        assert_eq!(bucket(32_767), 0);
        assert_eq!(bucket(32_768), 1);
        assert_eq!(bucket(65_535), 1);
        assert_eq!(bucket(65_536), 2);
        assert_eq!(bucket(1 << 40), BUCKETS - 1);
        assert_eq!(bucket(usize::MAX), BUCKETS - 1);
    }

    #[test]
    fn limits_are_bytes_or_a_share_of_maxmemory_and_at_least_128k() {
        assert_eq!(limit("0", 0), 0);
        assert_eq!(limit("3000000", 0), 3_000_000);
        assert_eq!(limit("1", 0), 128 * 1024);
        assert_eq!(limit("7%", 6 << 20), (6u64 << 20) * 7 / 100);
        assert_eq!(limit("7%", 0), 0);
        assert_eq!(limit("0%", 1 << 30), 0);
    }

    #[test]
    fn workers_publish_their_sum_and_largest_bucket() {
        let e = ClientEviction::new(2);
        e.workers[0].update(None, Some((40_000, Some(bucket(40_000)))));
        e.workers[1].update(None, Some((1 << 20, Some(bucket(1 << 20)))));
        // (One that may not be evicted counts, in no bucket.)
        e.workers[1].update(None, Some((1 << 22, None)));
        assert_eq!(e.total(), 40_000 + (1 << 20) + (1 << 22));
        assert_eq!(e.top(), Some(bucket(1 << 20)));
        e.workers[1].update(Some((1 << 20, Some(bucket(1 << 20)))), None);
        assert_eq!(e.top(), Some(bucket(40_000)));
        assert_eq!(e.workers[1].top(), None);
        assert_eq!(e.total(), 40_000 + (1 << 22));
    }
}
