//! The claim workload's correctness oracle: from what each worker sent and what the
//! server answered, it decides whether the server ever broke the contract of the claim's
//! life (GOBLIN.CLAIM with BLOCK, GOBLIN.PUBLISH, GOBLIN.RENEW, or their oracle scripts).
//!
//! The detector only believes what it can prove. The server acts on a request at some
//! instant between the request's send time and its reply's arrival, so every event is an
//! interval `[sent, replied]` on the load generator's monotonic clock, and a violation is
//! reported only when *every* placement of the events inside their intervals breaks the
//! contract. Redis keeps expiry times in milliseconds, so comparisons with a lease allow
//! [`CLOCK_SLACK_NS`], plus however far the wall clock (which servers time leases on)
//! moved against the monotonic clock during the run. Every claim call carries a token of its own, so a grant, and the
//! publications and renewals made with its token, are told apart from every other grant.
//!
//! For each grant (a `CLAIMED` reply) the detector keeps the interval in which its lease
//! certainly ends: not before its *floor* (the lease counted from the send), not after its
//! *ceiling* (the lease counted from the reply); an accepted renewal moves both to a lease
//! from the renewal, an accepted publication to the result's TTL from the publication
//! (GOBLIN.PUBLISH moves the claim's expiry to the result's).
//!
//! Violations:
//! - **two owners in one lease**: two grants whose widest possible separation is shorter
//!   than the lease, or a grant certainly after another and certainly before the other's
//!   (renewed) lease can have ended. A grant that *can* be a lease apart is a legitimate
//!   re-claim after the lease expired (a crashed or stalled worker's claim).
//! - **a finished result re-computed**: a grant certainly after an accepted publication,
//!   and certainly before that result (and with it the claim) expired.
//! - **a stale publication or renewal accepted**: GOBLIN.PUBLISH or GOBLIN.RENEW answered
//!   1 for a token that certainly no longer owned the claim: sent after its lease's
//!   ceiling, or after another grant that certainly followed its own.
//! - **the owner refused**: GOBLIN.PUBLISH or GOBLIN.RENEW answered 0 to a token whose
//!   lease was certainly still running, when no other grant can have come in between.
//! - **a wrong replay**: a value no worker published for that id, a value whose
//!   publication was refused, or any value for an id with no publication.
//! - **a waiter not served** (`--block`): a BLOCK answered nil before its timeout (or at
//!   all, with no timeout); a waiter that timed out (or was still waiting when the run
//!   ended) although a publication was certainly accepted [`WAKE_SLACK_NS`] before and its
//!   result still lived; or although the claim was certainly free, that is held by no
//!   grant that was answered or could still be, for [`WAKE_SLACK_NS`] while it waited.
//!   A timeout with the claim held throughout is no violation, whatever its length: it is
//!   counted as a timeout.
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

/// How long a server may take to serve a waiter once the result is written or the claim
/// is free: the contract says "promptly (within a few milliseconds)"; this allows for a
/// loaded machine shared with other jobs, so that only a waiter that was plainly
/// forgotten is called a violation.
pub const WAKE_SLACK_NS: u64 = 100_000_000;

/// Grants remembered per id. Legitimate grants are at least a lease apart, so only the last
/// few can ever be close enough to a new one to matter (older ones are summed up by the
/// latest ceiling among them).
const MAX_GRANTS: usize = 4;

/// Published outcomes remembered per id: each publication follows its own grant, so the
/// same bound applies.
const MAX_OUTCOMES: usize = 4;

/// Unanswered claim calls remembered one by one per id; beyond this, only the earliest
/// send among the rest is kept (enough to stay sound: such a call may have been granted
/// at any time from its send on).
const MAX_OUTSTANDING: usize = 8;

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
    /// A grant after every earlier one's lease can have ended: legitimate.
    ReclaimedAfterLease,
    /// A grant inside an earlier grant's lease: a violation.
    DoubleOwner,
    /// A grant while a published result certainly lived: a violation.
    Recomputed,
}

/// What a replayed value means, given the id's published outcomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayVerdict {
    /// The value is one a worker published for this id (accepted, or not yet answered).
    Matches,
    /// Outcomes were published for this id, and this value is none of them: a violation.
    WrongValue,
    /// The value's publication was refused, yet it was served: a violation.
    RefusedValue,
    /// No outcome was ever published for this id, yet a value was served: a violation.
    NeverPublished,
}

/// What the answer to a fenced write (GOBLIN.PUBLISH, GOBLIN.RENEW) means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FenceVerdict {
    /// Answered 1, and the token may have owned the claim.
    Accepted,
    /// Answered 0, and the token may have lost the claim.
    Refused,
    /// Answered 1 although the token certainly no longer owned the claim: a violation.
    StaleAccepted,
    /// Answered 0 although the token's lease certainly still ran: a violation.
    OwnerRefused,
}

/// What the end of a wait without the result or the claim means (`--block`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitVerdict {
    /// The claim was held, and no result written, for all the detector can tell.
    TimedOut,
    /// Nil before the timeout had elapsed (or with no timeout): a violation.
    EarlyTimeout,
    /// A result was certainly published while the waiter waited: a violation.
    MissedResult,
    /// The claim was certainly free for a while as the waiter waited: a violation.
    MissedClaim,
}

/// The two fenced writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fenced {
    /// GOBLIN.PUBLISH: sets the result, moves the claim's expiry to the result's.
    Publish,
    /// GOBLIN.RENEW: moves the claim's expiry a lease from now.
    Renew,
}

/// Counters the claim workload reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimStats {
    /// Requests that ended with a result in hand (replayed, or published by their own
    /// winner), while measuring.
    pub completed: u64,
    /// `CLAIMED` for an id never granted before.
    pub claims_won: u64,
    /// `CLAIMED` for an id granted before, once the earlier lease can have ended.
    pub reclaims_after_lease: u64,
    /// Of the grants (won or re-claimed), those won by a duplicate's call: one that
    /// reached the server before the request's own first call, or a waiter or poll served
    /// once the earlier owner's lease had run out.
    pub takeovers: u64,
    /// Duplicates that started after their id's result was published (served at once),
    /// while measuring; the others are in the duplicate wait figures.
    pub dups_served_at_once: u64,
    /// Duplicates served the published result.
    pub replays_served: u64,
    /// Duplicates (first tries and polls) answered nil: claimed, not yet published.
    pub nils: u64,
    /// Polls sent after a nil.
    pub polls: u64,
    /// Waits (`--block`) that ended in their timeout, the claim held throughout.
    pub block_timeouts: u64,
    /// Waits (`--block`) still unanswered when the run ended.
    pub waiting_at_end: u64,
    /// Publications sent (GOBLIN.PUBLISH or its script).
    pub published: u64,
    /// Publications refused (answered 0: the worker's lease was gone).
    pub publish_refused: u64,
    /// Workers that won a claim and then "crashed", never publishing.
    pub crashed: u64,
    /// Workers that ran long and renewed their lease.
    pub long_workers: u64,
    /// Renewals sent (GOBLIN.RENEW or its script).
    pub renewals: u64,
    /// Renewals refused (the worker then gives up without publishing).
    pub renew_refused: u64,
    /// Workers that stalled past their lease without renewing, then published.
    pub stalled: u64,
    /// Violations: two owners inside one lease.
    pub double_owners: u64,
    /// Violations: a finished result computed again while it lived.
    pub recomputes: u64,
    /// Violations: a publication accepted from a token that no longer owned the claim.
    pub stale_publishes: u64,
    /// Violations: a renewal accepted from a token that no longer owned the claim.
    pub stale_renewals: u64,
    /// Violations: a publication or renewal refused to the claim's certain owner.
    pub owner_refused: u64,
    /// Violations: a replay that differs from every outcome published for its id, or
    /// whose publication was refused.
    pub wrong_replays: u64,
    /// Violations: a replay for an id with no published outcome.
    pub unpublished_replays: u64,
    /// Violations: a BLOCK answered nil before its timeout.
    pub early_timeouts: u64,
    /// Violations: a waiter not given a result certainly published while it waited.
    pub missed_results: u64,
    /// Violations: a waiter not given a claim certainly free while it waited.
    pub missed_claims: u64,
    /// How far the wall clock moved against the monotonic clock during the run (the
    /// range of their offsets), allowed in every comparison with a lease.
    pub wall_clock_moved_ns: u64,
}

impl ClaimStats {
    /// Every violation, of any kind.
    pub fn violations(&self) -> u64 {
        self.double_owners
            + self.recomputes
            + self.stale_publishes
            + self.stale_renewals
            + self.owner_refused
            + self.wrong_replays
            + self.unpublished_replays
            + self.early_timeouts
            + self.missed_results
            + self.missed_claims
    }

    /// Adds another thread's counters into these.
    pub fn merge(&mut self, o: &ClaimStats) {
        self.completed += o.completed;
        self.claims_won += o.claims_won;
        self.reclaims_after_lease += o.reclaims_after_lease;
        self.takeovers += o.takeovers;
        self.dups_served_at_once += o.dups_served_at_once;
        self.replays_served += o.replays_served;
        self.nils += o.nils;
        self.polls += o.polls;
        self.block_timeouts += o.block_timeouts;
        self.waiting_at_end += o.waiting_at_end;
        self.published += o.published;
        self.publish_refused += o.publish_refused;
        self.crashed += o.crashed;
        self.long_workers += o.long_workers;
        self.renewals += o.renewals;
        self.renew_refused += o.renew_refused;
        self.stalled += o.stalled;
        self.double_owners += o.double_owners;
        self.recomputes += o.recomputes;
        self.stale_publishes += o.stale_publishes;
        self.stale_renewals += o.stale_renewals;
        self.owner_refused += o.owner_refused;
        self.wrong_replays += o.wrong_replays;
        self.unpublished_replays += o.unpublished_replays;
        self.early_timeouts += o.early_timeouts;
        self.missed_results += o.missed_results;
        self.missed_claims += o.missed_claims;
        self.wall_clock_moved_ns = self.wall_clock_moved_ns.max(o.wall_clock_moved_ns);
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Grant {
    token: u64,
    sent: u64,
    replied: u64,
    /// The lease certainly runs until here (less the detector's slack).
    floor: u64,
    /// The lease certainly ends by here (plus the detector's slack).
    ceiling: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum OutcomeState {
    /// Sent, not answered yet: the server may already serve it.
    #[default]
    InFlight,
    Accepted,
    Refused,
}

#[derive(Clone, Copy, Debug, Default)]
struct Outcome {
    value: u64,
    state: OutcomeState,
}

#[derive(Clone, Debug, Default)]
struct Record {
    grants: [Grant; MAX_GRANTS],
    /// Grants ever recorded; the latest `MAX_GRANTS` are kept, as a ring.
    n_grants: usize,
    /// The latest ceiling among grants pushed out of the ring.
    dropped_ceiling: u64,
    outcomes: [Outcome; MAX_OUTCOMES],
    n_outcomes: usize,
    /// The latest accepted publication: (sent, replied).
    accepted: Option<(u64, u64)>,
    /// Unanswered claim calls naming this id: (token, sent).
    outstanding: [(u64, u64); MAX_OUTSTANDING],
    n_outstanding: usize,
    /// Unanswered calls that did not fit in `outstanding`, and the earliest send among
    /// them (kept until none is left).
    n_overflow: u32,
    overflow_since: u64,
    /// Requests in flight and follow-ups scheduled that name this id.
    pending: u32,
    /// The id left the duplicate window: drop the record once nothing is pending.
    retired: bool,
}

impl Record {
    fn grants(&self) -> &[Grant] {
        &self.grants[..self.n_grants.min(MAX_GRANTS)]
    }

    fn outcomes(&self) -> &[Outcome] {
        &self.outcomes[..self.n_outcomes.min(MAX_OUTCOMES)]
    }

    fn grant_mut(&mut self, token: u64) -> Option<&mut Grant> {
        let n = self.n_grants.min(MAX_GRANTS);
        self.grants[..n].iter_mut().find(|g| g.token == token)
    }

    fn push_grant(&mut self, g: Grant) {
        let slot = self.n_grants % MAX_GRANTS;
        if self.n_grants >= MAX_GRANTS {
            self.dropped_ceiling = self.dropped_ceiling.max(self.grants[slot].ceiling);
        }
        self.grants[slot] = g;
        self.n_grants += 1;
    }

    fn sent(&mut self, token: u64, sent: u64) {
        if self.n_outstanding < MAX_OUTSTANDING {
            self.outstanding[self.n_outstanding] = (token, sent);
            self.n_outstanding += 1;
        } else {
            self.overflow_since = if self.n_overflow == 0 {
                sent
            } else {
                self.overflow_since.min(sent)
            };
            self.n_overflow += 1;
        }
    }

    fn answered(&mut self, token: u64) {
        let n = self.n_outstanding;
        if let Some(i) = self.outstanding[..n].iter().position(|o| o.0 == token) {
            self.outstanding[i] = self.outstanding[n - 1];
            self.n_outstanding -= 1;
        } else {
            self.n_overflow = self.n_overflow.saturating_sub(1);
        }
    }

    fn set_outcome(&mut self, value: u64, state: OutcomeState) {
        let n = self.n_outcomes.min(MAX_OUTCOMES);
        if let Some(o) = self.outcomes[..n].iter_mut().find(|o| o.value == value) {
            o.state = state;
        }
    }

    /// Whether the claim was certainly free (held by no grant that was answered or may
    /// still be) for [`WAKE_SLACK_NS`] somewhere in `[lo, hi]`; the first such instant.
    /// A lease may outlast its ceiling by `slack`.
    fn free_stretch(&self, lo: u64, hi: u64, slack: u64) -> Option<u64> {
        let mut held: Vec<(u64, u64)> = self
            .grants()
            .iter()
            .map(|g| (g.sent, g.ceiling.saturating_add(slack)))
            .collect();
        if self.n_grants > MAX_GRANTS {
            held.push((0, self.dropped_ceiling.saturating_add(slack)));
        }
        held.extend(
            self.outstanding[..self.n_outstanding]
                .iter()
                .map(|&(_, sent)| (sent, u64::MAX)),
        );
        if self.n_overflow > 0 {
            held.push((self.overflow_since, u64::MAX));
        }
        held.sort_unstable();
        let mut free_from = lo;
        for (start, end) in held {
            if start >= hi {
                break;
            }
            if start > free_from && start - free_from >= WAKE_SLACK_NS {
                return Some(free_from);
            }
            free_from = free_from.max(end);
        }
        (hi > free_from && hi - free_from >= WAKE_SLACK_NS).then_some(free_from)
    }
}

/// Watches one thread's claim traffic for violations (ids are partitioned between
/// threads, so no history is shared).
#[derive(Debug)]
pub struct ClaimDetector {
    lease_ns: u64,
    result_ttl_ns: u64,
    records: HashMap<u64, Record, foldhash::fast::FixedState>,
    stats: ClaimStats,
    described: Vec<String>,
    /// The allowance in every comparison with a lease: [`CLOCK_SLACK_NS`], widened by
    /// how far the wall clock has moved against the monotonic one (see
    /// [`ClaimDetector::wall_clock_offset`]).
    slack: u64,
    /// The least and greatest wall-clock offsets seen.
    offsets: Option<(i64, i64)>,
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

impl ClaimDetector {
    /// A detector for claims taken with a lease of `lease_ns` nanoseconds, whose results
    /// are published with a TTL of `result_ttl_ns`.
    pub fn new(lease_ns: u64, result_ttl_ns: u64) -> Self {
        ClaimDetector {
            lease_ns,
            result_ttl_ns,
            records: HashMap::with_hasher(foldhash::fast::FixedState::with_seed(0)),
            stats: ClaimStats::default(),
            described: Vec::new(),
            slack: CLOCK_SLACK_NS,
            offsets: None,
        }
    }

    /// The wall clock read `offset_ns` ahead of the monotonic clock (on any fixed
    /// origin). Servers time leases and timeouts on the wall clock, the detector on the
    /// monotonic one, so a step of the wall clock (a VM's clock being set, NTP stepping)
    /// ends every lease running across it early or late by the step. Every comparison
    /// with a lease then allows the whole range of offsets seen, so that no clock step
    /// is reported as a violation; a run whose wall clock moved says so.
    pub fn wall_clock_offset(&mut self, offset_ns: i64) {
        let (lo, hi) = match self.offsets {
            Some((lo, hi)) => (lo.min(offset_ns), hi.max(offset_ns)),
            None => (offset_ns, offset_ns),
        };
        self.offsets = Some((lo, hi));
        let moved = hi.abs_diff(lo);
        self.slack = CLOCK_SLACK_NS.saturating_add(moved);
        self.stats.wall_clock_moved_ns = moved;
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

    /// A claim call for `id` with `token` was sent at `sent`: until it is answered, it may
    /// be granted at any moment.
    pub fn claim_sent(&mut self, id: u64, token: u64, sent: u64) {
        self.records.entry(id).or_default().sent(token, sent);
    }

    /// The claim call `token` for `id` was answered with an error.
    pub fn claim_failed(&mut self, id: u64, token: u64) {
        if let Some(r) = self.records.get_mut(&id) {
            r.answered(token);
        }
    }

    /// Whether a publication of `id` was known accepted before `t` (a duplicate that
    /// started later found the work done, rather than in flight).
    pub fn published_before(&self, id: u64, t: u64) -> bool {
        self.records
            .get(&id)
            .and_then(|r| r.accepted)
            .is_some_and(|(_, replied)| replied < t)
    }

    /// The claim call `token` for `id`, sent at `sent`, was answered `CLAIMED` at
    /// `replied`.
    pub fn claimed(&mut self, id: u64, token: u64, sent: u64, replied: u64) -> ClaimVerdict {
        let (lease, ttl) = (self.lease_ns, self.result_ttl_ns);
        let rec = self.records.entry(id).or_default();
        rec.answered(token);
        let mut verdict = if rec.n_grants == 0 {
            ClaimVerdict::Won
        } else {
            ClaimVerdict::ReclaimedAfterLease
        };
        let mut clash = None;
        if let Some((ps, pr)) = rec.accepted
            && sent > pr
            && replied.saturating_add(self.slack) < ps.saturating_add(ttl)
        {
            verdict = ClaimVerdict::Recomputed;
            clash = Some(Grant {
                sent: ps,
                replied: pr,
                ..Grant::default()
            });
        } else {
            for g in rec.grants() {
                let widest = replied
                    .saturating_sub(g.sent)
                    .max(g.replied.saturating_sub(sent));
                let overlapping = widest.saturating_add(self.slack) < lease;
                let inside_renewed =
                    sent > g.replied && replied.saturating_add(self.slack) < g.floor;
                if overlapping || inside_renewed {
                    verdict = ClaimVerdict::DoubleOwner;
                    clash = Some(*g);
                }
            }
        }
        rec.push_grant(Grant {
            token,
            sent,
            replied,
            floor: sent.saturating_add(lease),
            ceiling: replied.saturating_add(lease),
        });
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
                         {:.6} s and {:.6} s (lease certainly running until {:.6} s), and \
                         again between {:.6} s and {:.6} s",
                        secs(lease),
                        secs(g.sent),
                        secs(g.replied),
                        secs(g.floor),
                        secs(sent),
                        secs(replied)
                    );
                    s
                });
            }
            ClaimVerdict::Recomputed => {
                self.stats.recomputes += 1;
                let p = clash.unwrap_or_default();
                self.describe(|| {
                    format!(
                        "id {id}: a finished result re-computed: its publication was accepted \
                         between {:.6} s and {:.6} s with a {:.3} s TTL, and the claim was \
                         granted again between {:.6} s and {:.6} s",
                        secs(p.sent),
                        secs(p.replied),
                        secs(ttl),
                        secs(sent),
                        secs(replied)
                    )
                });
            }
        }
        verdict
    }

    /// The owner of `id` sends the publication of `outcome` (from then on the server may
    /// serve it).
    pub fn publishing(&mut self, id: u64, outcome: u64) {
        let rec = self.records.entry(id).or_default();
        rec.outcomes[rec.n_outcomes % MAX_OUTCOMES] = Outcome {
            value: outcome,
            state: OutcomeState::InFlight,
        };
        rec.n_outcomes += 1;
        self.stats.published += 1;
    }

    /// A fenced write (`what`) by `token` for `id`, sent at `sent`, was answered at
    /// `replied`: 1 (`accepted`) or 0. For a publication, `outcome` is the value it set.
    #[allow(clippy::too_many_arguments)]
    pub fn fenced(
        &mut self,
        what: Fenced,
        id: u64,
        token: u64,
        outcome: u64,
        sent: u64,
        replied: u64,
        accepted: bool,
    ) -> FenceVerdict {
        let (lease, ttl) = (self.lease_ns, self.result_ttl_ns);
        let rec = self.records.entry(id).or_default();
        let own = rec.grants().iter().find(|g| g.token == token).copied();
        let verdict = if accepted {
            let stale = match own {
                Some(g) => {
                    let expired = sent > g.ceiling.saturating_add(self.slack);
                    let replaced = rec
                        .grants()
                        .iter()
                        .find(|h| h.token != token && h.sent > g.replied && h.replied < sent);
                    expired || replaced.is_some()
                }
                // Never granted (only provable while no grant has left the ring).
                None => rec.n_grants <= MAX_GRANTS,
            };
            if let Some(g) = rec.grant_mut(token) {
                match what {
                    Fenced::Publish => {
                        g.floor = sent.saturating_add(ttl);
                        g.ceiling = replied.saturating_add(ttl);
                    }
                    Fenced::Renew => {
                        g.floor = g.floor.max(sent.saturating_add(lease));
                        g.ceiling = g.ceiling.max(replied.saturating_add(lease));
                    }
                }
            }
            if what == Fenced::Publish {
                rec.accepted = Some((sent, replied));
                rec.set_outcome(outcome, OutcomeState::Accepted);
            }
            if stale {
                FenceVerdict::StaleAccepted
            } else {
                FenceVerdict::Accepted
            }
        } else {
            if what == Fenced::Publish {
                rec.set_outcome(outcome, OutcomeState::Refused);
            }
            let certainly_owner = own.is_some_and(|g| {
                replied.saturating_add(self.slack) < g.floor
                    && !rec
                        .grants()
                        .iter()
                        .any(|h| h.token != token && h.replied > g.sent && h.sent < replied)
            });
            if certainly_owner {
                FenceVerdict::OwnerRefused
            } else {
                FenceVerdict::Refused
            }
        };
        let name = match what {
            Fenced::Publish => "publication",
            Fenced::Renew => "renewal",
        };
        match (verdict, what) {
            (FenceVerdict::Accepted, _) => {}
            (FenceVerdict::Refused, Fenced::Publish) => self.stats.publish_refused += 1,
            (FenceVerdict::Refused, Fenced::Renew) => self.stats.renew_refused += 1,
            (FenceVerdict::StaleAccepted, _) => {
                match what {
                    Fenced::Publish => self.stats.stale_publishes += 1,
                    Fenced::Renew => self.stats.stale_renewals += 1,
                }
                self.describe(|| match own {
                    Some(g) => format!(
                        "id {id}: a stale {name} accepted: token {token}, granted between \
                         {:.6} s and {:.6} s (lease over by {:.6} s), sent it at {:.6} s, \
                         after its lease had ended or another worker had been granted the claim",
                        secs(g.sent),
                        secs(g.replied),
                        secs(g.ceiling),
                        secs(sent)
                    ),
                    None => format!(
                        "id {id}: a {name} accepted from token {token}, which was never granted \
                         the claim (sent at {:.6} s)",
                        secs(sent)
                    ),
                });
            }
            (FenceVerdict::OwnerRefused, _) => {
                self.stats.owner_refused += 1;
                let g = own.unwrap_or_default();
                self.describe(|| {
                    format!(
                        "id {id}: a {name} refused to the owner: token {token}, granted between \
                         {:.6} s and {:.6} s with its lease certainly running until {:.6} s, \
                         was answered 0 at {:.6} s",
                        secs(g.sent),
                        secs(g.replied),
                        secs(g.floor),
                        secs(replied)
                    )
                });
            }
        }
        verdict
    }

    /// A claim call for `id` was answered with `value` (the result of earlier work).
    pub fn replay(&mut self, id: u64, token: u64, value: &[u8]) -> ReplayVerdict {
        let rec = self.records.entry(id).or_default();
        rec.answered(token);
        let (verdict, expected) = if rec.outcomes().is_empty() {
            (ReplayVerdict::NeverPublished, None)
        } else {
            let found = decode_outcome(value)
                .and_then(|n| rec.outcomes().iter().find(|o| o.value == n).copied());
            match found {
                Some(o) if o.state == OutcomeState::Refused => (ReplayVerdict::RefusedValue, None),
                Some(_) => (ReplayVerdict::Matches, None),
                None => (
                    ReplayVerdict::WrongValue,
                    rec.outcomes().last().map(|o| o.value),
                ),
            }
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
            ReplayVerdict::RefusedValue => {
                self.stats.wrong_replays += 1;
                self.describe(|| {
                    format!(
                        "id {id}: replay {:?} served, but its publication was refused",
                        String::from_utf8_lossy(value)
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

    /// A claim call for `id` without BLOCK was answered nil: claimed by someone, not yet
    /// published.
    pub fn nil(&mut self, id: u64, token: u64) {
        if let Some(r) = self.records.get_mut(&id) {
            r.answered(token);
        }
        self.stats.nils += 1;
    }

    /// A `GOBLIN.CLAIM … BLOCK block_ns` call for `id`, sent at `sent`, was answered nil
    /// at `replied` (`block_ns` 0: no timeout).
    pub fn timed_out(
        &mut self,
        id: u64,
        token: u64,
        sent: u64,
        replied: u64,
        block_ns: u64,
    ) -> WaitVerdict {
        if let Some(r) = self.records.get_mut(&id) {
            r.answered(token);
        }
        if block_ns == 0 || replied.saturating_add(self.slack) < sent.saturating_add(block_ns) {
            self.stats.early_timeouts += 1;
            self.describe(|| {
                format!(
                    "id {id}: a wait with a {:.3} s timeout answered nil after {:.6} s \
                     (sent at {:.6} s)",
                    secs(block_ns),
                    secs(replied.saturating_sub(sent)),
                    secs(sent)
                )
            });
            return WaitVerdict::EarlyTimeout;
        }
        // The waiter was certainly waiting between the latest moment it can have parked
        // and the earliest moment its timeout can have fired.
        let verdict = self.check_wait(
            id,
            replied.saturating_sub(block_ns),
            sent.saturating_add(block_ns),
            replied,
        );
        if verdict == WaitVerdict::TimedOut {
            self.stats.block_timeouts += 1;
        }
        verdict
    }

    /// The run ended at `end` with these waits — `(id, token, sent)` — unanswered. Each
    /// is judged as waiting from [`WAKE_SLACK_NS`] after its send (its connection carried
    /// nothing else, so the server read it at once) until `end`. A call left unanswered
    /// at the end is taken as not granted: the end comes after a grace period in which
    /// any reply the server sent has arrived.
    pub fn abandoned(&mut self, waits: &[(u64, u64, u64)], end: u64) -> Vec<WaitVerdict> {
        for &(id, token, _) in waits {
            if let Some(r) = self.records.get_mut(&id) {
                r.answered(token);
            }
        }
        waits
            .iter()
            .map(|&(id, _, sent)| {
                self.stats.waiting_at_end += 1;
                self.check_wait(id, sent.saturating_add(WAKE_SLACK_NS), end, end)
            })
            .collect()
    }

    /// Whether a waiter on `id`, certainly waiting throughout `[lo, hi]` and given up on
    /// at `gave_up`, should have been served.
    fn check_wait(&mut self, id: u64, lo: u64, hi: u64, gave_up: u64) -> WaitVerdict {
        let ttl = self.result_ttl_ns;
        let Some(rec) = self.records.get(&id) else {
            return WaitVerdict::TimedOut;
        };
        if let Some((ps, pr)) = rec.accepted
            && pr.saturating_add(WAKE_SLACK_NS) < hi
            && ps.saturating_add(ttl) > gave_up.saturating_add(self.slack)
        {
            self.stats.missed_results += 1;
            self.describe(|| {
                format!(
                    "id {id}: a waiter (waiting from {:.6} s to {:.6} s) was not given the result \
                     published between {:.6} s and {:.6} s",
                    secs(lo),
                    secs(hi),
                    secs(ps),
                    secs(pr)
                )
            });
            return WaitVerdict::MissedResult;
        }
        if hi > lo
            && let Some(free) = rec.free_stretch(lo, hi, self.slack)
        {
            self.stats.missed_claims += 1;
            self.describe(|| {
                format!(
                    "id {id}: a waiter (waiting from {:.6} s to {:.6} s) was not given the claim, \
                     which no grant held from {:.6} s on for at least {:.3} s",
                    secs(lo),
                    secs(hi),
                    secs(free),
                    secs(WAKE_SLACK_NS)
                )
            });
            return WaitVerdict::MissedClaim;
        }
        WaitVerdict::TimedOut
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const S: u64 = 1_000_000_000;
    const MS: u64 = 1_000_000;
    const TTL: u64 = 60 * S;

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
        let mut d = ClaimDetector::new(30 * S, TTL);
        assert_eq!(d.claimed(7, 1, 0, MS), ClaimVerdict::Won);
        assert_eq!(d.claimed(7, 2, 10 * MS, 11 * MS), ClaimVerdict::DoubleOwner);
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
        let mut d = ClaimDetector::new(5 * S, TTL);
        assert_eq!(d.claimed(1, 1, 2 * MS, 3 * MS), ClaimVerdict::Won);
        assert_eq!(d.claimed(1, 2, MS, 4 * MS), ClaimVerdict::DoubleOwner);
    }

    #[test]
    fn a_step_of_the_wall_clock_is_allowed_for() {
        // As a CI machine saw: the wall clock stepped 4 ms ahead while leases of 1 s ran,
        // so the server (timing the lease on the wall clock) granted the claim again
        // 4 ms early by the monotonic clock.
        let history = |d: &mut ClaimDetector| {
            assert_eq!(d.claimed(9, 1, 292_760_000, 293_054_000), ClaimVerdict::Won);
            d.claimed(9, 2, 1_288_937_000, 1_289_068_000)
        };
        let mut unaware = ClaimDetector::new(S, TTL);
        assert_eq!(history(&mut unaware), ClaimVerdict::DoubleOwner);

        let mut aware = ClaimDetector::new(S, TTL);
        aware.wall_clock_offset(1_000);
        aware.wall_clock_offset(4_001_000);
        assert_eq!(history(&mut aware), ClaimVerdict::ReclaimedAfterLease);
        assert_eq!(aware.stats().violations(), 0);
        assert_eq!(aware.stats().wall_clock_moved_ns, 4 * MS);
        // A true double grant is still one.
        assert_eq!(
            aware.claimed(9, 3, 1_300_000_000, 1_300_100_000),
            ClaimVerdict::DoubleOwner
        );
        // A steady offset widens nothing.
        let mut steady = ClaimDetector::new(S, TTL);
        steady.wall_clock_offset(-5 * S as i64);
        steady.wall_clock_offset(-5 * S as i64);
        assert_eq!(history(&mut steady), ClaimVerdict::DoubleOwner);
    }

    #[test]
    fn reclaim_after_the_lease_is_legitimate() {
        let mut d = ClaimDetector::new(2 * S, TTL);
        assert_eq!(d.claimed(3, 1, 0, MS), ClaimVerdict::Won);
        // The first owner crashed; a poller is granted the claim once the lease is over.
        assert_eq!(
            d.claimed(3, 2, 2 * S + MS, 2 * S + 2 * MS),
            ClaimVerdict::ReclaimedAfterLease
        );
        assert_eq!(d.stats().reclaims_after_lease, 1);
        assert_eq!(d.stats().violations(), 0);
    }

    #[test]
    fn reclaim_that_could_be_a_lease_apart_is_not_flagged() {
        // Sent before the lease could have ended, answered after: the server may have
        // granted it after expiry, so it must not be called a violation.
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(3, 1, 0, MS);
        assert_eq!(
            d.claimed(3, 2, S - 10 * MS, S + MS),
            ClaimVerdict::ReclaimedAfterLease
        );
        // …but a grant whose reply came back well inside the lease is.
        assert_eq!(
            d.claimed(3, 3, S + 2 * MS, S + 3 * MS),
            ClaimVerdict::DoubleOwner
        );
    }

    #[test]
    fn a_waiter_granted_at_the_lease_end_is_legitimate() {
        // A BLOCK call sent right after the grant is answered CLAIMED once the crashed
        // owner's lease ran out: its interval spans the whole lease.
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(4, 1, 0, MS);
        d.claim_sent(4, 2, 2 * MS);
        assert_eq!(
            d.claimed(4, 2, 2 * MS, S + 5 * MS),
            ClaimVerdict::ReclaimedAfterLease
        );
        assert_eq!(d.stats().violations(), 0);
        // The same waiter served half-way through the lease was given a claim still held.
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(4, 1, 0, MS);
        assert_eq!(d.claimed(4, 2, 2 * MS, S / 2), ClaimVerdict::DoubleOwner);
    }

    #[test]
    fn a_renewed_lease_is_still_held() {
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(5, 1, 0, MS);
        let v = d.fenced(Fenced::Renew, 5, 1, 0, S / 2, S / 2 + MS, true);
        assert_eq!(v, FenceVerdict::Accepted);
        // 1.2 s: past the first lease, inside the renewed one (from 0.5 s).
        assert_eq!(
            d.claimed(5, 2, S + 100 * MS, S + 200 * MS),
            ClaimVerdict::DoubleOwner
        );
        // After the renewed lease: a legitimate re-claim.
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(5, 1, 0, MS);
        d.fenced(Fenced::Renew, 5, 1, 0, S / 2, S / 2 + MS, true);
        assert_eq!(
            d.claimed(5, 2, S + 600 * MS, S + 601 * MS),
            ClaimVerdict::ReclaimedAfterLease
        );
        assert_eq!(d.stats().violations(), 0);
    }

    #[test]
    fn a_claim_granted_while_the_result_lives_is_a_recompute() {
        let mut d = ClaimDetector::new(S, 10 * S);
        d.claimed(6, 1, 0, MS);
        d.publishing(6, 42);
        let v = d.fenced(Fenced::Publish, 6, 1, 42, 2 * MS, 3 * MS, true);
        assert_eq!(v, FenceVerdict::Accepted);
        // Long after the lease, well inside the result's 10 s TTL.
        assert_eq!(d.claimed(6, 2, 5 * S, 5 * S + MS), ClaimVerdict::Recomputed);
        assert_eq!(d.stats().recomputes, 1);
        assert!(
            d.described()[0].contains("re-computed"),
            "{:?}",
            d.described()
        );
        // Once the result has expired, computing it again is legitimate.
        let mut d = ClaimDetector::new(S, 10 * S);
        d.claimed(6, 1, 0, MS);
        d.fenced(Fenced::Publish, 6, 1, 42, 2 * MS, 3 * MS, true);
        assert_eq!(
            d.claimed(6, 2, 10 * S + 10 * MS, 10 * S + 11 * MS),
            ClaimVerdict::ReclaimedAfterLease
        );
        // A grant whose request may have reached the server before the publication is
        // a double owner at worst, never a recompute.
        let mut d = ClaimDetector::new(S, 10 * S);
        d.claimed(6, 1, 0, MS);
        d.fenced(Fenced::Publish, 6, 1, 42, 2 * MS, 3 * MS, true);
        assert_ne!(d.claimed(6, 2, 2 * MS, 4 * MS), ClaimVerdict::Recomputed);
    }

    #[test]
    fn a_stale_publication_accepted_is_a_violation() {
        // Token 1's lease ended by 1.001 s; its publication left at 1.05 s.
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(8, 1, 0, MS);
        d.publishing(8, 7);
        let v = d.fenced(Fenced::Publish, 8, 1, 7, S + 50 * MS, S + 51 * MS, true);
        assert_eq!(v, FenceVerdict::StaleAccepted);
        assert_eq!(d.stats().stale_publishes, 1);
        // Token 2 was certainly granted after token 1 and before its publication: token
        // 1 cannot own the claim any more, however long its lease.
        let mut d = ClaimDetector::new(100 * S, TTL);
        d.claimed(8, 1, 0, MS);
        d.claimed(8, 2, 2 * MS, 3 * MS); // a double owner, besides
        let v = d.fenced(Fenced::Publish, 8, 1, 7, 4 * MS, 5 * MS, true);
        assert_eq!(v, FenceVerdict::StaleAccepted);
        // A renewal too.
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(8, 1, 0, MS);
        let v = d.fenced(Fenced::Renew, 8, 1, 0, 2 * S, 2 * S + MS, true);
        assert_eq!(v, FenceVerdict::StaleAccepted);
        assert_eq!(d.stats().stale_renewals, 1);
        // A token never granted.
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(8, 1, 0, MS);
        let v = d.fenced(Fenced::Publish, 8, 99, 7, 2 * MS, 3 * MS, true);
        assert_eq!(v, FenceVerdict::StaleAccepted);
        assert!(
            d.described()[0].contains("never granted"),
            "{:?}",
            d.described()
        );
    }

    #[test]
    fn a_publication_that_may_be_in_time_is_fine() {
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(9, 1, 0, MS);
        // Sent just before the ceiling: the lease may still have run.
        let v = d.fenced(Fenced::Publish, 9, 1, 7, S, S + 5 * MS, true);
        assert_eq!(v, FenceVerdict::Accepted);
        // A stale worker's publication refused after its lease: the contract working.
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(9, 1, 0, MS);
        let v = d.fenced(Fenced::Publish, 9, 1, 7, 2 * S, 2 * S + MS, false);
        assert_eq!(v, FenceVerdict::Refused);
        assert_eq!(d.stats().publish_refused, 1);
        assert_eq!(d.stats().violations(), 0);
    }

    #[test]
    fn refusing_the_certain_owner_is_a_violation() {
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(10, 1, 0, MS);
        let v = d.fenced(Fenced::Publish, 10, 1, 7, 2 * MS, 3 * MS, false);
        assert_eq!(v, FenceVerdict::OwnerRefused);
        let v = d.fenced(Fenced::Renew, 10, 1, 0, 4 * MS, 5 * MS, false);
        assert_eq!(v, FenceVerdict::OwnerRefused);
        assert_eq!(d.stats().owner_refused, 2);
        // Near the end of the lease, the refusal may be right.
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(10, 1, 0, MS);
        let v = d.fenced(Fenced::Publish, 10, 1, 7, S - 2 * MS, S - MS, false);
        assert_eq!(v, FenceVerdict::Refused);
    }

    #[test]
    fn replay_of_the_published_outcome_is_fine() {
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(9, 1, 0, MS);
        d.publishing(9, 42);
        // Served before the publication's own reply is read: still fine.
        assert_eq!(d.replay(9, 2, &encode_outcome(42)), ReplayVerdict::Matches);
        d.fenced(Fenced::Publish, 9, 1, 42, 2 * MS, 3 * MS, true);
        assert_eq!(d.replay(9, 3, &encode_outcome(42)), ReplayVerdict::Matches);
        assert_eq!(d.stats().replays_served, 2);
        assert_eq!(d.stats().violations(), 0);
    }

    #[test]
    fn replay_with_a_wrong_value_is_a_violation() {
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(9, 1, 0, MS);
        d.publishing(9, 42);
        assert_eq!(
            d.replay(9, 2, &encode_outcome(43)),
            ReplayVerdict::WrongValue
        );
        assert_eq!(d.replay(9, 3, b"garbage"), ReplayVerdict::WrongValue);
        assert_eq!(d.stats().wrong_replays, 2);
        assert!(d.described()[0].contains("differs from the published outcome"));
    }

    #[test]
    fn replay_of_a_refused_publication_is_a_violation() {
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(9, 1, 0, MS);
        d.publishing(9, 42);
        d.fenced(Fenced::Publish, 9, 1, 42, 2 * S, 2 * S + MS, false);
        assert_eq!(
            d.replay(9, 2, &encode_outcome(42)),
            ReplayVerdict::RefusedValue
        );
        assert_eq!(d.stats().wrong_replays, 1);
    }

    #[test]
    fn replay_of_something_never_published_is_a_violation() {
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(5, 1, 0, MS);
        assert_eq!(
            d.replay(5, 2, &encode_outcome(1)),
            ReplayVerdict::NeverPublished
        );
        assert_eq!(
            d.replay(6, 3, &encode_outcome(1)),
            ReplayVerdict::NeverPublished
        );
        assert_eq!(d.stats().unpublished_replays, 2);
    }

    #[test]
    fn replay_of_either_owners_outcome_after_a_reclaim_is_fine() {
        let mut d = ClaimDetector::new(S, 2 * S);
        d.claimed(4, 1, 0, MS);
        d.publishing(4, 1);
        d.fenced(Fenced::Publish, 4, 1, 1, MS, 2 * MS, true);
        d.claimed(4, 2, 3 * S, 3 * S + MS);
        d.publishing(4, 2);
        assert_eq!(d.replay(4, 3, &encode_outcome(1)), ReplayVerdict::Matches);
        assert_eq!(d.replay(4, 4, &encode_outcome(2)), ReplayVerdict::Matches);
        assert_eq!(d.stats().violations(), 0);
    }

    #[test]
    fn a_timeout_with_the_claim_held_is_only_a_timeout() {
        let mut d = ClaimDetector::new(10 * S, TTL);
        d.claimed(11, 1, 0, MS);
        d.claim_sent(11, 2, 2 * MS);
        let v = d.timed_out(11, 2, 2 * MS, 502 * MS, 500 * MS);
        assert_eq!(v, WaitVerdict::TimedOut);
        assert_eq!(d.stats().block_timeouts, 1);
        assert_eq!(d.stats().violations(), 0);
    }

    #[test]
    fn a_timeout_before_its_time_is_a_violation() {
        let mut d = ClaimDetector::new(10 * S, TTL);
        d.claimed(11, 1, 0, MS);
        assert_eq!(
            d.timed_out(11, 2, 2 * MS, 100 * MS, 500 * MS),
            WaitVerdict::EarlyTimeout
        );
        // BLOCK 0 never times out.
        assert_eq!(
            d.timed_out(11, 3, 2 * MS, 100 * S, 0),
            WaitVerdict::EarlyTimeout
        );
        assert_eq!(d.stats().early_timeouts, 2);
    }

    #[test]
    fn a_waiter_that_misses_the_result_is_a_violation() {
        let mut d = ClaimDetector::new(10 * S, TTL);
        d.claimed(12, 1, 0, MS);
        d.claim_sent(12, 2, 2 * MS);
        d.publishing(12, 5);
        d.fenced(Fenced::Publish, 12, 1, 5, 3 * MS, 4 * MS, true);
        assert_eq!(
            d.timed_out(12, 2, 2 * MS, 1002 * MS, S),
            WaitVerdict::MissedResult
        );
        assert_eq!(d.stats().missed_results, 1);
        // A publication that may have come at the timeout's moment is not held against it.
        let mut d = ClaimDetector::new(10 * S, TTL);
        d.claimed(12, 1, 0, MS);
        d.fenced(Fenced::Publish, 12, 1, 5, 990 * MS, 1001 * MS, true);
        assert_eq!(
            d.timed_out(12, 2, 2 * MS, 1002 * MS, S),
            WaitVerdict::TimedOut
        );
    }

    #[test]
    fn a_waiter_not_given_a_free_claim_is_a_violation() {
        // The owner crashed; its 1 s lease ended by 1.003 s; the waiter waited 5 s.
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(13, 1, 0, MS);
        d.claim_sent(13, 2, 2 * MS);
        assert_eq!(
            d.timed_out(13, 2, 2 * MS, 5002 * MS, 5 * S),
            WaitVerdict::MissedClaim
        );
        assert!(
            d.described()[0].contains("not given the claim"),
            "{:?}",
            d.described()
        );
        assert_eq!(d.stats().missed_claims, 1);
        // Another waiter took it at the lease's end and holds it (it may have crashed too,
        // but its lease covers the rest): no violation.
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(13, 1, 0, MS);
        d.claim_sent(13, 2, 2 * MS);
        d.claim_sent(13, 3, 3 * MS);
        d.claimed(13, 3, 3 * MS, S + 5 * MS);
        assert_eq!(
            d.timed_out(13, 2, 2 * MS, 1902 * MS, 1900 * MS),
            WaitVerdict::TimedOut
        );
        // An unanswered claim call may have been granted: no violation either.
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(13, 1, 0, MS);
        d.claim_sent(13, 2, 2 * MS);
        d.claim_sent(13, 3, 3 * MS);
        assert_eq!(
            d.timed_out(13, 2, 2 * MS, 5002 * MS, 5 * S),
            WaitVerdict::TimedOut
        );
        assert_eq!(d.stats().violations(), 0);
    }

    #[test]
    fn many_unanswered_calls_stay_conservative() {
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(14, 1, 0, MS);
        for t in 2..2 + MAX_OUTSTANDING as u64 + 3 {
            d.claim_sent(14, t, t * MS);
        }
        // Answer all the remembered ones; the overflowed ones may still be granted.
        for t in 2..2 + MAX_OUTSTANDING as u64 {
            d.claim_failed(14, t);
        }
        d.claim_sent(14, 100, 100 * MS);
        assert_eq!(
            d.timed_out(14, 100, 100 * MS, 5100 * MS, 5 * S),
            WaitVerdict::TimedOut
        );
    }

    #[test]
    fn waits_abandoned_at_the_end_are_judged_too() {
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(15, 1, 0, MS);
        d.claim_sent(15, 2, 2 * MS);
        d.claim_sent(15, 3, 2 * MS);
        d.claimed(16, 4, 0, MS);
        d.claim_sent(16, 5, 2 * MS);
        let verdicts = d.abandoned(&[(15, 2, 2 * MS), (15, 3, 2 * MS), (16, 5, 2 * MS)], S / 2);
        assert_eq!(verdicts, [WaitVerdict::TimedOut; 3]);
        assert_eq!(d.stats().waiting_at_end, 3);
        // Both waiters of id 15 outlived the crashed owner's lease by seconds.
        let verdicts = d.abandoned(&[(15, 2, 2 * MS), (15, 3, 2 * MS)], 3 * S);
        assert_eq!(verdicts, [WaitVerdict::MissedClaim; 2]);
    }

    #[test]
    fn published_before_tells_finished_work_from_work_in_flight() {
        let mut d = ClaimDetector::new(S, TTL);
        d.claimed(17, 1, 0, MS);
        assert!(!d.published_before(17, S));
        d.fenced(Fenced::Publish, 17, 1, 3, 2 * MS, 3 * MS, true);
        assert!(!d.published_before(17, 3 * MS));
        assert!(d.published_before(17, 4 * MS));
    }

    #[test]
    fn records_are_dropped_once_retired_and_idle() {
        let mut d = ClaimDetector::new(S, TTL);
        d.hold(1);
        d.claimed(1, 1, 0, MS);
        d.retire(1);
        assert_eq!(d.tracked(), 1, "still pending");
        d.release(1);
        assert_eq!(d.tracked(), 0);
        d.claimed(2, 2, 0, MS);
        d.retire(2);
        assert_eq!(d.tracked(), 0, "nothing pending");
    }
}
