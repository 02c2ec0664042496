//! The claim workload's correctness oracle: from what each worker sent and what the
//! server answered, it decides whether the server ever broke GOBLIN.CLAIM's contract.
//!
//! Two kinds of violation are detected:
//! - **two owners inside one lease**: two `CLAIMED` replies for the same id whose grants
//!   cannot be a lease apart. The server grants a claim at some instant between the
//!   request's send time and its reply time, so grants A and B are at most
//!   `max(B.replied − A.sent, A.replied − B.sent)` apart; if even that widest possible
//!   separation is shorter than the lease (less [`CLOCK_SLACK_NS`]), both owners held the
//!   claim at once. A second grant that *can* be a lease apart is a legitimate re-claim
//!   after lease expiry (a crashed worker's claim, or a claim whose lease lapsed while its
//!   result lives on).
//! - **a wrong replay**: a duplicate was served a result value that no worker published
//!   for that id (a different id's outcome, garbage, or a value for an id whose result was
//!   never published).
//!
//! Times are nanoseconds on one monotonic clock, which makes the detector a pure function
//! of its inputs: the tests feed it synthetic histories.
//!
//! Memory stays bounded: a record lives while its id can still be referenced, that is
//! while it is inside the workload's duplicate window or has requests or scheduled
//! follow-ups outstanding ([`ClaimDetector::hold`] / [`ClaimDetector::release`] /
//! [`ClaimDetector::retire`]).

use std::collections::HashMap;
use std::fmt::Write as _;

/// Allowance for clock granularity between client and server: Redis keeps expiry times in
/// milliseconds, so a lease may end up to a millisecond earlier than the client computes.
pub const CLOCK_SLACK_NS: u64 = 2_000_000;

/// Grants remembered per id. Legitimate grants are at least a lease apart, so only the last
/// few can ever be close enough to a new one to matter.
const MAX_GRANTS: usize = 4;

/// Published outcomes remembered per id: each publication follows its own grant, so the
/// same bound applies.
const MAX_OUTCOMES: usize = 4;

/// Violations described in full in the report; the rest are only counted.
const MAX_DESCRIBED: usize = 10;

/// Prefix of every published outcome value.
const OUTCOME_PREFIX: &[u8] = b"ok:";

/// Length of an encoded outcome: the prefix and 16 hex digits.
pub const OUTCOME_LEN: usize = OUTCOME_PREFIX.len() + 16;

/// The value a worker publishes as the result of its work: `ok:` and `n` in 16 hex digits.
pub fn encode_outcome(n: u64) -> [u8; OUTCOME_LEN] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; OUTCOME_LEN];
    out[..OUTCOME_PREFIX.len()].copy_from_slice(OUTCOME_PREFIX);
    for (i, slot) in out[OUTCOME_PREFIX.len()..].iter_mut().enumerate() {
        *slot = HEX[((n >> (60 - 4 * i)) & 0xf) as usize];
    }
    out
}

/// The inverse of [`encode_outcome`]; `None` for anything it could not have produced.
pub fn decode_outcome(value: &[u8]) -> Option<u64> {
    let hex = value.strip_prefix(OUTCOME_PREFIX)?;
    if hex.len() != 16 {
        return None;
    }
    hex.iter().try_fold(0u64, |acc, &b| {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => return None,
        };
        Some(acc << 4 | u64::from(d))
    })
}

/// What a `CLAIMED` reply means, given the id's history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimVerdict {
    /// The first grant for this id.
    Won,
    /// A grant a full lease after every earlier one: legitimate.
    ReclaimedAfterLease,
    /// A grant inside an earlier grant's lease: a violation.
    DoubleOwner,
}

/// What a replayed value means, given the id's published outcomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayVerdict {
    /// The value is one a worker published for this id.
    Matches,
    /// Outcomes were published for this id, and this value is none of them: a violation.
    WrongValue,
    /// No outcome was ever published for this id, yet a value was served: a violation.
    NeverPublished,
}

/// Counters the claim workload reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimStats {
    /// `CLAIMED` for an id never granted before.
    pub claims_won: u64,
    /// `CLAIMED` for an id granted before, at least a lease earlier.
    pub reclaims_after_lease: u64,
    /// Duplicates served the published result.
    pub replays_served: u64,
    /// Duplicates (first tries and polls) answered nil: claimed, not yet published.
    pub nils: u64,
    /// Polls sent after a nil.
    pub polls: u64,
    /// Results published (`SET result:<id> …`).
    pub published: u64,
    /// Workers that won a claim and then "crashed", never publishing.
    pub crashed: u64,
    /// Violations: two owners inside one lease.
    pub double_owners: u64,
    /// Violations: a replay that differs from every outcome published for its id.
    pub wrong_replays: u64,
    /// Violations: a replay for an id with no published outcome.
    pub unpublished_replays: u64,
}

impl ClaimStats {
    /// Every violation, of any kind.
    pub fn violations(&self) -> u64 {
        self.double_owners + self.wrong_replays + self.unpublished_replays
    }

    /// Adds another thread's counters into these.
    pub fn merge(&mut self, o: &ClaimStats) {
        self.claims_won += o.claims_won;
        self.reclaims_after_lease += o.reclaims_after_lease;
        self.replays_served += o.replays_served;
        self.nils += o.nils;
        self.polls += o.polls;
        self.published += o.published;
        self.crashed += o.crashed;
        self.double_owners += o.double_owners;
        self.wrong_replays += o.wrong_replays;
        self.unpublished_replays += o.unpublished_replays;
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Grant {
    sent: u64,
    replied: u64,
}

#[derive(Clone, Debug, Default)]
struct Record {
    grants: [Grant; MAX_GRANTS],
    /// Grants ever recorded; the latest `MAX_GRANTS` are kept, as a ring.
    n_grants: usize,
    outcomes: [u64; MAX_OUTCOMES],
    n_outcomes: usize,
    /// Requests in flight and follow-ups scheduled that name this id.
    pending: u32,
    /// The id left the duplicate window: drop the record once nothing is pending.
    retired: bool,
}

impl Record {
    fn grants(&self) -> &[Grant] {
        &self.grants[..self.n_grants.min(MAX_GRANTS)]
    }

    fn outcomes(&self) -> &[u64] {
        &self.outcomes[..self.n_outcomes.min(MAX_OUTCOMES)]
    }
}

/// Watches one thread's claim traffic for violations (ids are partitioned between
/// threads, so no history is shared).
#[derive(Debug)]
pub struct ClaimDetector {
    lease_ns: u64,
    records: HashMap<u64, Record, foldhash::fast::FixedState>,
    stats: ClaimStats,
    described: Vec<String>,
}

impl ClaimDetector {
    /// A detector for claims taken with a lease of `lease_ns` nanoseconds.
    pub fn new(lease_ns: u64) -> Self {
        ClaimDetector {
            lease_ns,
            records: HashMap::with_hasher(foldhash::fast::FixedState::with_seed(0)),
            stats: ClaimStats::default(),
            described: Vec::new(),
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> &ClaimStats {
        &self.stats
    }

    /// Mutable counters, for the events only the workload sees (crashes, polls).
    pub fn stats_mut(&mut self) -> &mut ClaimStats {
        &mut self.stats
    }

    /// Descriptions of the first violations found.
    pub fn described(&self) -> &[String] {
        &self.described
    }

    /// Ids currently tracked.
    pub fn tracked(&self) -> usize {
        self.records.len()
    }

    fn describe(&mut self, text: impl FnOnce() -> String) {
        if self.described.len() < MAX_DESCRIBED {
            self.described.push(text());
        }
    }

    /// A request or follow-up naming `id` is now outstanding.
    pub fn hold(&mut self, id: u64) {
        self.records.entry(id).or_default().pending += 1;
    }

    /// An outstanding request or follow-up naming `id` is done.
    pub fn release(&mut self, id: u64) {
        if let Some(r) = self.records.get_mut(&id) {
            r.pending = r.pending.saturating_sub(1);
            if r.pending == 0 && r.retired {
                self.records.remove(&id);
            }
        }
    }

    /// `id` can no longer be chosen as a duplicate: forget it once nothing names it.
    pub fn retire(&mut self, id: u64) {
        if let Some(r) = self.records.get_mut(&id) {
            if r.pending == 0 {
                self.records.remove(&id);
            } else {
                r.retired = true;
            }
        }
    }

    /// A claim request for `id`, sent at `sent`, was answered `CLAIMED` at `replied`.
    pub fn claimed(&mut self, id: u64, sent: u64, replied: u64) -> ClaimVerdict {
        let lease = self.lease_ns;
        let rec = self.records.entry(id).or_default();
        let mut verdict = if rec.n_grants == 0 {
            ClaimVerdict::Won
        } else {
            ClaimVerdict::ReclaimedAfterLease
        };
        let mut clash = None;
        for g in rec.grants() {
            let widest = replied
                .saturating_sub(g.sent)
                .max(g.replied.saturating_sub(sent));
            if widest.saturating_add(CLOCK_SLACK_NS) < lease {
                verdict = ClaimVerdict::DoubleOwner;
                clash = Some(*g);
            }
        }
        rec.grants[rec.n_grants % MAX_GRANTS] = Grant { sent, replied };
        rec.n_grants += 1;
        match verdict {
            ClaimVerdict::Won => self.stats.claims_won += 1,
            ClaimVerdict::ReclaimedAfterLease => self.stats.reclaims_after_lease += 1,
            ClaimVerdict::DoubleOwner => {
                self.stats.double_owners += 1;
                let g = clash.unwrap_or_default();
                self.describe(|| {
                    let mut s = String::new();
                    let _ = write!(
                        s,
                        "id {id}: two owners inside one lease ({:.3} s): granted between \
                         {:.6} s and {:.6} s, and again between {:.6} s and {:.6} s",
                        lease as f64 / 1e9,
                        g.sent as f64 / 1e9,
                        g.replied as f64 / 1e9,
                        sent as f64 / 1e9,
                        replied as f64 / 1e9
                    );
                    s
                });
            }
        }
        verdict
    }

    /// The worker that owns `id` published `outcome` (called when the `SET` is sent: from
    /// then on the server may serve it).
    pub fn published(&mut self, id: u64, outcome: u64) {
        let rec = self.records.entry(id).or_default();
        rec.outcomes[rec.n_outcomes % MAX_OUTCOMES] = outcome;
        rec.n_outcomes += 1;
        self.stats.published += 1;
    }

    /// A claim request for `id` was answered with `value` (the result of earlier work).
    pub fn replay(&mut self, id: u64, value: &[u8]) -> ReplayVerdict {
        let (verdict, expected) = match self.records.get(&id) {
            Some(rec) if !rec.outcomes().is_empty() => match decode_outcome(value) {
                Some(n) if rec.outcomes().contains(&n) => (ReplayVerdict::Matches, None),
                _ => (ReplayVerdict::WrongValue, rec.outcomes().last().copied()),
            },
            _ => (ReplayVerdict::NeverPublished, None),
        };
        match verdict {
            ReplayVerdict::Matches => self.stats.replays_served += 1,
            ReplayVerdict::WrongValue => {
                self.stats.wrong_replays += 1;
                self.describe(|| {
                    format!(
                        "id {id}: replay {:?} differs from the published outcome {:?}",
                        String::from_utf8_lossy(value),
                        String::from_utf8_lossy(&encode_outcome(expected.unwrap_or_default()))
                    )
                });
            }
            ReplayVerdict::NeverPublished => {
                self.stats.unpublished_replays += 1;
                self.describe(|| {
                    format!(
                        "id {id}: replay {:?} served, but no outcome was published for it",
                        String::from_utf8_lossy(value)
                    )
                });
            }
        }
        verdict
    }

    /// A claim request for `id` was answered nil: claimed by someone, not yet published.
    pub fn nil(&mut self, _id: u64) {
        self.stats.nils += 1;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const S: u64 = 1_000_000_000;
    const MS: u64 = 1_000_000;

    #[test]
    fn outcome_round_trip() {
        for n in [0, 1, 0xdead_beef, u64::MAX] {
            assert_eq!(decode_outcome(&encode_outcome(n)), Some(n));
        }
        assert_eq!(&encode_outcome(0xab), b"ok:00000000000000ab");
        assert_eq!(decode_outcome(b"ok:00000000000000AB"), None);
        assert_eq!(decode_outcome(b"ok:ab"), None);
        assert_eq!(decode_outcome(b"charged:txn_551"), None);
    }

    #[test]
    fn double_claim_inside_a_lease_is_a_violation() {
        let mut d = ClaimDetector::new(30 * S);
        assert_eq!(d.claimed(7, 0, MS), ClaimVerdict::Won);
        assert_eq!(d.claimed(7, 10 * MS, 11 * MS), ClaimVerdict::DoubleOwner);
        assert_eq!(d.stats().double_owners, 1);
        assert_eq!(d.stats().violations(), 1);
        assert!(
            d.described()[0].contains("id 7: two owners"),
            "{:?}",
            d.described()
        );
    }

    #[test]
    fn double_claim_is_found_in_either_reply_order() {
        // Pipelined on two connections: the later-sent claim's reply is processed first.
        let mut d = ClaimDetector::new(5 * S);
        assert_eq!(d.claimed(1, 2 * MS, 3 * MS), ClaimVerdict::Won);
        assert_eq!(d.claimed(1, MS, 4 * MS), ClaimVerdict::DoubleOwner);
    }

    #[test]
    fn reclaim_after_the_lease_is_legitimate() {
        let mut d = ClaimDetector::new(2 * S);
        assert_eq!(d.claimed(3, 0, MS), ClaimVerdict::Won);
        // The first owner crashed; a poller is granted the claim once the lease is over.
        assert_eq!(
            d.claimed(3, 2 * S + MS, 2 * S + 2 * MS),
            ClaimVerdict::ReclaimedAfterLease
        );
        assert_eq!(d.stats().reclaims_after_lease, 1);
        assert_eq!(d.stats().violations(), 0);
    }

    #[test]
    fn reclaim_that_could_be_a_lease_apart_is_not_flagged() {
        // Sent before the lease could have ended, answered after: the server may have
        // granted it after expiry, so it must not be called a violation.
        let mut d = ClaimDetector::new(S);
        d.claimed(3, 0, MS);
        assert_eq!(
            d.claimed(3, S - 10 * MS, S + MS),
            ClaimVerdict::ReclaimedAfterLease
        );
        // …but a grant whose reply came back well inside the lease is.
        assert_eq!(
            d.claimed(3, S + 2 * MS, S + 3 * MS),
            ClaimVerdict::DoubleOwner
        );
    }

    #[test]
    fn replay_of_the_published_outcome_is_fine() {
        let mut d = ClaimDetector::new(S);
        d.claimed(9, 0, MS);
        d.published(9, 42);
        assert_eq!(d.replay(9, &encode_outcome(42)), ReplayVerdict::Matches);
        assert_eq!(d.stats().replays_served, 1);
        assert_eq!(d.stats().violations(), 0);
    }

    #[test]
    fn replay_with_a_wrong_value_is_a_violation() {
        let mut d = ClaimDetector::new(S);
        d.claimed(9, 0, MS);
        d.published(9, 42);
        assert_eq!(d.replay(9, &encode_outcome(43)), ReplayVerdict::WrongValue);
        assert_eq!(d.replay(9, b"garbage"), ReplayVerdict::WrongValue);
        assert_eq!(d.stats().wrong_replays, 2);
        assert!(d.described()[0].contains("differs from the published outcome"));
    }

    #[test]
    fn replay_of_something_never_published_is_a_violation() {
        let mut d = ClaimDetector::new(S);
        d.claimed(5, 0, MS);
        assert_eq!(
            d.replay(5, &encode_outcome(1)),
            ReplayVerdict::NeverPublished
        );
        assert_eq!(
            d.replay(6, &encode_outcome(1)),
            ReplayVerdict::NeverPublished
        );
        assert_eq!(d.stats().unpublished_replays, 2);
    }

    #[test]
    fn replay_of_either_owners_outcome_after_a_reclaim_is_fine() {
        let mut d = ClaimDetector::new(S);
        d.claimed(4, 0, MS);
        d.published(4, 1);
        d.claimed(4, 2 * S, 2 * S + MS);
        d.published(4, 2);
        assert_eq!(d.replay(4, &encode_outcome(1)), ReplayVerdict::Matches);
        assert_eq!(d.replay(4, &encode_outcome(2)), ReplayVerdict::Matches);
    }

    #[test]
    fn records_are_dropped_once_retired_and_idle() {
        let mut d = ClaimDetector::new(S);
        d.hold(1);
        d.claimed(1, 0, MS);
        d.retire(1);
        assert_eq!(d.tracked(), 1, "still pending");
        d.release(1);
        assert_eq!(d.tracked(), 0);
        d.claimed(2, 0, MS);
        d.retire(2);
        assert_eq!(d.tracked(), 0, "nothing pending");
    }
}
