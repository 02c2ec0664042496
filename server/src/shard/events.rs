//! Where a shard's key events go.
//!
//! Every change to a shard's keys records a typed event in its keyspace (see
//! `goblin_store::Event`): written, deleted, expired, flushed. At the end of each unit of
//! work — a command, a transaction's step, a round of active expiry — the shard hands the
//! unit's events, with its **effect** (what a log must replay to do the same), to its
//! observers, wakes the plans parked on the keys that changed, touches the keys clients
//! WATCH (`watch.rs`) and sends keyspace notifications (`notify.rs`). The append-only log,
//! snapshots and slot migration are observers.
//!
//! While nothing observes a shard, no plan waits on it and no client watches its keys,
//! the keyspace records nothing: each change costs one branch.

use goblin_store::Event;

use crate::runtime::msg::TxRef;
use crate::table::handler::Args;

/// What caused a unit of work.
#[derive(Clone, Copy, Debug)]
pub enum Origin<'a> {
    /// A command: its command-table name, its arguments as sent, and the transaction it
    /// is part of (a command queued in EXEC, or run by a plan).
    Command(&'static str, &'a Args<'a>, Option<TxRef>),
    /// A step of a transaction (a cross-shard command or EXEC).
    Step(TxRef),
    /// Active expiry.
    Expiry,
    /// Eviction (`maxmemory`).
    Eviction,
}

/// What a log replays to redo a unit of work.
#[derive(Clone, Copy, Debug)]
pub enum Effect<'a> {
    /// The command as it was sent: replaying it does the same.
    AsSent,
    /// These commands, in order (a rewritten, deterministic form: `SET k v PXAT <ms>` for
    /// `SET k v EX 10`; the writes of a transaction's step).
    Commands(&'a [Vec<Vec<u8>>]),
    /// Only the events say it: expired keys are deleted.
    Events,
}

/// One unit of work on a shard that changed keys.
#[derive(Clone, Copy, Debug)]
pub struct Write<'a> {
    /// What caused it.
    pub origin: Origin<'a>,
    /// The database it ran against (its effect's commands are in it; its events say
    /// their own, since a unit may reach other databases: MOVE, SWAPDB, FLUSHALL).
    pub db: u16,
    /// The changes, in order — writes only when some observer (or a parked plan) wants
    /// their keys (see [`Observer::wants_written_keys`]).
    pub events: &'a [Event],
    /// Writes not listed in `events`.
    pub unlisted: usize,
    /// What replays it.
    pub effect: Effect<'a>,
}

/// Something that watches a shard's writes. It runs on the shard's thread, right after
/// the unit of work, before anything else touches the keys.
pub trait Observer: std::fmt::Debug {
    /// Called once per unit of work that changed keys.
    fn on_write(&mut self, write: &Write<'_>);

    /// Whether it needs the keys of written values in [`Write::events`] (a count is
    /// enough for a log, which replays effects).
    fn wants_written_keys(&self) -> bool {
        true
    }
}
