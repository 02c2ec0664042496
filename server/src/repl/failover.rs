//! FAILOVER, redis-server 7.0's coordinated failover. A master pauses its clients'
//! writes, waits for a replica (the one named, or any) to acknowledge its whole stream,
//! then follows that replica, its PSYNC saying `FAILOVER` — which makes the replica a
//! master continuing the same history (`families/replication.rs`), and this server its
//! replica. The command starts or aborts an attempt; worker 0 takes its steps, each loop
//! iteration ([`Failover::step`]).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use crate::runtime::server::Shared;

/// No failover ([`Failover::phase`]).
const NONE: u8 = 0;
/// Waiting for the target to acknowledge the whole stream.
const WAIT_FOR_SYNC: u8 = 1;
/// Following the target, its answer to PSYNC FAILOVER awaited.
const IN_PROGRESS: u8 = 2;

/// How often a waiting failover asks the replicas for an acknowledgement (`REPLCONF
/// GETACK *`), in ms.
const GETACK_EVERY_MS: u64 = 100;

/// The server's failover, if one is under way.
#[derive(Debug, Default)]
pub struct Failover {
    phase: AtomicU8,
    attempt: Mutex<Option<Attempt>>,
    /// An attempt that followed its target was aborted: worker 0 is to make this server
    /// a master again.
    promote_back: AtomicBool,
}

/// What FAILOVER asked for.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The replica to fail over to (`TO host port`); any caught-up one when `None`.
    target: Option<(String, u16)>,
    /// `FORCE`: at the deadline, fail over to the target caught up or not.
    force: bool,
    /// `TIMEOUT`: when to give up (or force), Unix ms.
    deadline: Option<u64>,
    /// When the replicas were last asked for an acknowledgement, Unix ms.
    asked: u64,
}

impl Attempt {
    /// An attempt to begin.
    pub fn new(target: Option<(String, u16)>, force: bool, deadline: Option<u64>) -> Attempt {
        Attempt {
            target,
            force,
            deadline,
            asked: 0,
        }
    }
}

impl Failover {
    /// INFO's `master_failover_state`.
    pub fn state_name(&self) -> &'static str {
        match self.phase.load(Ordering::SeqCst) {
            WAIT_FOR_SYNC => "waiting-for-sync",
            IN_PROGRESS => "failover-in-progress",
            _ => "no-failover",
        }
    }

    /// Whether an attempt is under way (replicas may not sync meanwhile).
    pub fn active(&self) -> bool {
        self.phase.load(Ordering::SeqCst) != NONE
    }

    /// Whether worker 0 has a step to take ([`Failover::step`]).
    pub fn pending(&self) -> bool {
        self.active() || self.promote_back.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Attempt>> {
        self.attempt
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// FAILOVER: the attempt begins, the clients' writes paused (until it ends).
    pub fn begin(&self, shared: &Shared, attempt: Attempt) {
        match &attempt.target {
            Some((host, port)) => crate::log!(Notice, "FAILOVER requested to {host}:{port}."),
            None => crate::log!(Notice, "FAILOVER requested to any replica."),
        }
        *self.lock() = Some(attempt);
        self.phase.store(WAIT_FOR_SYNC, Ordering::SeqCst);
        shared.pause.pause(u64::MAX, false, crate::clock::now_ms());
        shared.wake_workers();
    }

    /// Ends the attempt for `why` (logged, as redis-server's `abortFailover`); false
    /// when there was none. One that followed its target already has worker 0 make
    /// this server a master again.
    pub fn abort(&self, shared: &Shared, why: &str) -> bool {
        let Some(attempt) = self.lock().take() else {
            return false;
        };
        match &attempt.target {
            Some((host, port)) => {
                crate::log!(Notice, "FAILOVER to {host}:{port} aborted: {why}");
            }
            None => crate::log!(Notice, "FAILOVER to any replica aborted: {why}"),
        }
        if self.phase.swap(NONE, Ordering::SeqCst) == IN_PROGRESS {
            self.promote_back.store(true, Ordering::SeqCst);
            shared.wake_workers();
        }
        shared.pause.unpause();
        true
    }

    /// The attempt succeeded: the target continued (or fully resynced) the history.
    fn succeeded(&self, shared: &Shared) {
        *self.lock() = None;
        self.phase.store(NONE, Ordering::SeqCst);
        shared.pause.unpause();
    }

    /// Worker 0's step, each loop iteration while [`Failover::pending`]: true when it
    /// is to make this server a master again (as `REPLICAOF NO ONE`).
    pub fn step(&self, shared: &Shared) -> bool {
        match self.phase.load(Ordering::SeqCst) {
            WAIT_FOR_SYNC => self.wait_for_sync(shared),
            IN_PROGRESS => match shared.follow.failover_outcome() {
                crate::repl::link::FAILOVER_ACCEPTED => self.succeeded(shared),
                crate::repl::link::FAILOVER_REJECTED => {
                    self.abort(shared, "Failover target rejected psync request");
                }
                _ => {}
            },
            _ => {}
        }
        self.promote_back.swap(false, Ordering::SeqCst)
    }

    /// Waiting for the target: past the deadline, gives up (or, with FORCE, fails over
    /// all the same); once a replica acknowledged the whole stream, follows it.
    fn wait_for_sync(&self, shared: &Shared) {
        let now = crate::clock::now_ms();
        let mut slot = self.lock();
        let Some(attempt) = slot.as_mut() else {
            return;
        };
        let offset = shared.repl.offset.load(Ordering::SeqCst);
        let target = match attempt.deadline {
            Some(deadline) if deadline <= now => match (&attempt.target, attempt.force) {
                (Some((host, port)), true) => {
                    crate::log!(
                        Notice,
                        "FAILOVER to {host}:{port} time out exceeded, failing over."
                    );
                    (host.clone(), *port)
                }
                _ => {
                    drop(slot);
                    self.abort(shared, "Replica never caught up before timeout");
                    return;
                }
            },
            _ => match shared.repl.caught_up(attempt.target.as_ref(), offset) {
                Some(target) => {
                    crate::log!(
                        Notice,
                        "Failover target {}:{} is synced, failing over.",
                        target.0,
                        target.1
                    );
                    target
                }
                None => {
                    if now.saturating_sub(attempt.asked) >= GETACK_EVERY_MS {
                        attempt.asked = now;
                        shared.repl.getack.store(true, Ordering::SeqCst);
                    }
                    return;
                }
            },
        };
        attempt.target = Some(target.clone());
        drop(slot);
        self.phase.store(IN_PROGRESS, Ordering::SeqCst);
        // This server follows the target, asking it to continue this server's own
        // history (as redis-server's `replicationSetMaster` caches itself as master).
        let (host, port) = target;
        let replid = shared.replication_id();
        let mine = shared.repl.history(replid, shared.follow.selected_db());
        shared.follow.start_failover(shared, &host, port, mine);
        crate::families::standalone::remember_master(shared, &format!("{host} {port}"));
    }
}
