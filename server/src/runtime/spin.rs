//! Polling a little before sleeping, while it pays.
//!
//! A worker that runs out of work sleeps in `epoll_wait`, and the next client that
//! writes to it wakes it: the client's `send` goes through the scheduler and, with the
//! worker's core idle, an interrupt to that core — all of it paid on the client's side,
//! and a context switch on the worker's. Where clients answer quickly (a benchmark at
//! `-P 1`, a service reading each reply and sending the next request), their next
//! requests arrive microseconds after the worker ran dry: a worker that looks again for
//! those microseconds, without sleeping, serves them without either cost. The client
//! gets its replies sooner and spends less on each request, which is where its
//! throughput is decided when it is the limit.
//!
//! The looking is paid for only while it finds something: a look that finds nothing in
//! the window lowers the worker's credit, one that does raises it, and a worker without
//! credit sleeps at once, trying again now and then. A lightly loaded server (clients
//! that think between requests) or a core shared with the clients themselves (where the
//! looking would only keep them from running) soon stops looking.
//!
//! A transaction whose keys span shards makes its workers wait for each other: the
//! coordinator for each step's answer, a participant holding locks for the coordinator's
//! next step (a script run under its plan sends each command it calls on another shard's
//! keys as a step, with every shard locked when it may touch keys it did not declare).
//! Waking a sleeping worker costs the waker an `eventfd` write and an interrupt to the
//! other core, the woken a context switch — tens of µs each on a virtual machine, far
//! longer than the wait itself (BullMQ at `--threads 2` spent half its server CPU there).
//! So while a step is due (`EXPECT_WINDOW`) a worker looks longer, with an account of its
//! own.

use std::time::Duration;

/// How long a worker looks for more work before it sleeps: about the time a client on
/// another core takes to read a reply and send its next request.
pub const WINDOW: Duration = Duration::from_micros(8);
/// How long a worker looks while a transaction's step is due to or from another worker:
/// a script's Lua between two of its commands, a command on the other shard.
pub const EXPECT_WINDOW: Duration = Duration::from_micros(100);
/// Credit is capped here: after a busy spell, this many fruitless looks in a row (at two
/// credits each) stop the looking.
const MAX_CREDIT: i32 = 8;
/// A fruitless look costs this much credit; a fruitful one earns one.
const MISS_COST: i32 = 2;
/// A worker without credit tries again after this many sleeps.
const RETRY_AFTER: u32 = 64;

/// The worker's account of whether looking before sleeping has paid lately.
#[derive(Debug)]
pub struct Spin {
    credit: i32,
    /// Sleeps without looking since the credit ran out.
    skipped: u32,
}

impl Default for Spin {
    fn default() -> Self {
        Spin {
            credit: MAX_CREDIT,
            skipped: 0,
        }
    }
}

impl Spin {
    /// Whether to look before this sleep.
    pub fn wanted(&mut self) -> bool {
        if self.credit > 0 {
            return true;
        }
        self.skipped += 1;
        if self.skipped >= RETRY_AFTER {
            self.skipped = 0;
            self.credit = 1;
            return true;
        }
        false
    }

    /// The look found work (`true`) or ran out its window (`false`).
    pub fn found(&mut self, work: bool) {
        self.credit = if work {
            (self.credit + 1).min(MAX_CREDIT)
        } else {
            (self.credit - MISS_COST).max(0)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_while_it_finds_work() {
        let mut spin = Spin::default();
        for _ in 0..1000 {
            assert!(spin.wanted());
            spin.found(true);
        }
    }

    #[test]
    fn fruitless_looks_stop_it_then_it_tries_again_now_and_then() {
        let mut spin = Spin::default();
        let mut looks: usize = 0;
        for _ in 0..10_000 {
            if spin.wanted() {
                looks += 1;
                spin.found(false);
            }
        }
        // The first credit's worth, then one look per RETRY_AFTER sleeps.
        let expected = (MAX_CREDIT / MISS_COST) as usize + (10_000 - 4) / RETRY_AFTER as usize;
        assert!(
            looks.abs_diff(expected) <= 1,
            "{looks} looks, expected {expected}"
        );
    }

    #[test]
    fn a_retry_that_finds_work_brings_the_looking_back() {
        let mut spin = Spin::default();
        while spin.wanted() {
            spin.found(false);
        }
        // The sleep that ended the loop above was the first without a look.
        let mut skipped = 1;
        while !spin.wanted() {
            skipped += 1;
        }
        assert_eq!(skipped, RETRY_AFTER - 1);
        spin.found(true);
        for _ in 0..100 {
            assert!(spin.wanted());
            spin.found(true);
        }
    }

    #[test]
    fn one_miss_among_hits_keeps_it_looking() {
        let mut spin = Spin::default();
        for i in 0..1000 {
            assert!(spin.wanted(), "stopped at {i}");
            spin.found(i % 3 != 0);
        }
    }
}
