//! What a run counts: latency histograms (one per thread, merged at the end), server
//! error replies by kind, and the workload-specific counters.

use std::collections::HashMap;

use hdrhistogram::Histogram;

use crate::detector::ClaimStats;

/// Lowest latency tracked, in nanoseconds.
const HIST_LOW_NS: u64 = 1;
/// Highest latency tracked: an hour. Anything slower is recorded as an hour (saturating),
/// which no sane run reaches; the bound keeps the histogram a fixed ~200 KiB.
const HIST_HIGH_NS: u64 = 3_600 * 1_000_000_000;
/// Significant decimal digits kept: 3 means every value is within 0.1% of the truth.
pub const HIST_SIGFIG: u8 = 3;

/// Distinct error texts tracked per thread; past this, new texts are folded into one
/// bucket per error code, so a server that embeds arguments in its errors cannot make
/// the table (or memory) grow without bound.
const MAX_ERROR_KINDS: usize = 64;
/// Longest error text kept, in bytes.
const MAX_ERROR_TEXT: usize = 200;
/// Where redis-server 7 starts quoting a request's arguments in an error text
/// (`ERR unknown command 'X', with args beginning with: 'a' 'b'`); the arguments differ
/// from request to request, so the kind ends before them.
const ARGS_SUFFIX: &[u8] = b", with args beginning with:";

/// A latency histogram in nanoseconds, 1 ns to 1 h, three significant digits.
pub fn new_histogram() -> Histogram<u64> {
    // The bounds are constants that the constructor accepts; a failure here is a bug.
    Histogram::new_with_bounds(HIST_LOW_NS, HIST_HIGH_NS, HIST_SIGFIG)
        .expect("constant histogram bounds are valid")
}

/// Merges per-thread histograms into one.
///
/// # Errors
/// When a histogram's range does not fit the first one's (never for [`new_histogram`]s).
pub fn merge_histograms<'a>(
    hists: impl IntoIterator<Item = &'a Histogram<u64>>,
) -> Result<Histogram<u64>, hdrhistogram::AdditionError> {
    let mut total = new_histogram();
    for h in hists {
        total.add(h)?;
    }
    Ok(total)
}

/// Server error replies counted by their text.
#[derive(Clone, Debug, Default)]
pub struct ErrorCounts {
    by_text: HashMap<Vec<u8>, u64, foldhash::fast::RandomState>,
    total: u64,
}

impl ErrorCounts {
    /// Counts one error reply whose text (without the leading `-`) is `text`.
    pub fn add(&mut self, text: &[u8]) {
        self.add_n(text, 1);
    }

    fn add_n(&mut self, text: &[u8], n: u64) {
        self.total += n;
        let text = match memchr::memmem::find(text, ARGS_SUFFIX) {
            Some(at) => &text[..at],
            None => text,
        };
        let text = &text[..text.len().min(MAX_ERROR_TEXT)];
        if let Some(c) = self.by_text.get_mut(text) {
            *c += n;
            return;
        }
        let key = if self.by_text.len() < MAX_ERROR_KINDS {
            text.to_vec()
        } else {
            let code = text.split(|&b| b == b' ').next().unwrap_or_default();
            [code, b" (other messages)"].concat()
        };
        *self.by_text.entry(key).or_default() += n;
    }

    /// Every error counted.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Adds another thread's counts into these.
    pub fn merge(&mut self, other: &ErrorCounts) {
        for (text, &n) in &other.by_text {
            self.add_n(text, n);
        }
    }

    /// `(text, count)`, most frequent first.
    pub fn sorted(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = self
            .by_text
            .iter()
            .map(|(t, &n)| (String::from_utf8_lossy(t).into_owned(), n))
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }
}

/// The lock workload's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockStats {
    /// `SET lock:k token NX PX ttl` answered OK.
    pub acquired: u64,
    /// Acquire answered nil: someone else holds the lock.
    pub contended: u64,
    /// Release (compare-and-delete) answered 1.
    pub released: u64,
    /// Release answered 0: the lock expired, or changed hands, before it was released.
    pub lost: u64,
}

impl LockStats {
    /// Adds another thread's counters into these.
    pub fn merge(&mut self, o: &LockStats) {
        self.acquired += o.acquired;
        self.contended += o.contended;
        self.released += o.released;
        self.lost += o.lost;
    }
}

/// Cluster replies that were followed rather than counted as replies (`--cluster`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Redirects {
    /// `-MOVED`: the slot map was updated and the request sent to the new owner.
    pub moved: u64,
    /// `-ASK`: the request was sent to the importing node after `ASKING`.
    pub ask: u64,
    /// `-TRYAGAIN`: the request was retried after a short backoff.
    pub tryagain: u64,
    /// `-CLUSTERDOWN`: the request was retried after a short backoff.
    pub clusterdown: u64,
}

impl Redirects {
    /// Adds another thread's counts into these.
    pub fn merge(&mut self, o: &Redirects) {
        self.moved += o.moved;
        self.ask += o.ask;
        self.tryagain += o.tryagain;
        self.clusterdown += o.clusterdown;
    }
}

/// A histogram of durations in nanoseconds that starts empty (for [`Counters`]).
#[derive(Clone, Debug)]
pub struct Durations(pub Histogram<u64>);

impl Default for Durations {
    fn default() -> Self {
        Durations(new_histogram())
    }
}

/// Everything a thread counts besides latencies.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// Server error replies.
    pub errors: ErrorCounts,
    /// Replies to calls that may wait (claim `--block` waits), received while measuring:
    /// they count as replies, but their latencies are not in the latency figures.
    pub blocking_replies: u64,
    /// Claim workload counters.
    pub claim: ClaimStats,
    /// Claim workload: from a duplicate's first call to the result in hand, for the
    /// duplicates that found the work in flight.
    pub dup_wait: Durations,
    /// Claim workload violation descriptions (the first few).
    pub violations: Vec<String>,
    /// Lock workload counters.
    pub lock: LockStats,
    /// Cluster redirects followed (`--cluster`), warmup included.
    pub redirects: Redirects,
}

impl Counters {
    /// Adds another thread's counters into these.
    pub fn merge(&mut self, o: &Counters) {
        self.errors.merge(&o.errors);
        self.blocking_replies += o.blocking_replies;
        self.claim.merge(&o.claim);
        // Same bounds on both sides: cannot fail.
        let _ = self.dup_wait.0.add(&o.dup_wait.0);
        self.violations.extend(o.violations.iter().cloned());
        self.lock.merge(&o.lock);
        self.redirects.merge(&o.redirects);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn merged_histogram_equals_one_fed_everything() {
        let mut threads = [new_histogram(), new_histogram(), new_histogram()];
        let mut single = new_histogram();
        let mut v: u64 = 12_345;
        for i in 0..30_000u64 {
            v = v
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let lat = 1_000 + (v >> 40) % 5_000_000;
            threads[(i % 3) as usize].record(lat).unwrap();
            single.record(lat).unwrap();
        }
        let merged = merge_histograms(&threads).unwrap();
        assert_eq!(merged.len(), 30_000);
        assert_eq!(merged.max(), single.max());
        assert_eq!(merged.min(), single.min());
        for q in [0.5, 0.9, 0.99, 0.999, 0.9999] {
            assert_eq!(
                merged.value_at_quantile(q),
                single.value_at_quantile(q),
                "q {q}"
            );
        }
        assert_eq!(merged, single);
    }

    #[test]
    fn merge_keeps_disjoint_ranges() {
        let mut fast = new_histogram();
        let mut slow = new_histogram();
        for _ in 0..99 {
            fast.record(10_000).unwrap();
        }
        slow.record(50_000_000).unwrap();
        let merged = merge_histograms([&fast, &slow]).unwrap();
        assert_eq!(merged.len(), 100);
        assert!(merged.equivalent(merged.value_at_quantile(0.99), 10_000));
        assert!(merged.equivalent(merged.max(), 50_000_000));
    }

    #[test]
    fn errors_by_kind() {
        let mut a = ErrorCounts::default();
        a.add(b"ERR unknown command 'X', with args beginning with: 'a' ");
        a.add(b"WRONGTYPE Operation against a key holding the wrong kind of value");
        a.add(b"ERR unknown command 'X'");
        let mut b = ErrorCounts::default();
        b.add(b"ERR unknown command 'X'");
        a.merge(&b);
        assert_eq!(a.total(), 4);
        let sorted = a.sorted();
        assert_eq!(sorted[0], ("ERR unknown command 'X'".to_string(), 3));
        assert_eq!(sorted[1].1, 1);
    }

    #[test]
    fn error_kinds_are_bounded() {
        let mut e = ErrorCounts::default();
        for i in 0..1000 {
            e.add(format!("ERR bad arg {i}").as_bytes());
        }
        assert_eq!(e.total(), 1000);
        let sorted = e.sorted();
        assert_eq!(sorted.len(), MAX_ERROR_KINDS + 1);
        assert_eq!(
            sorted[0],
            (
                "ERR (other messages)".to_string(),
                1000 - MAX_ERROR_KINDS as u64
            )
        );
    }
}
