//! A master's side of replication: its replicas, its stream of writes (one, in one
//! order, for every replica), and each shard's feed into it — and into the append-only
//! log, which records what the stream is sent (`persist::aof::Log`): while the log is on,
//! the shards feed whether or not there is a backlog, and every piece that reaches the
//! stream reaches the log at the same point ([`Master::append`]).
//!
//! A replica connects as a client and sends `PSYNC` (or `SYNC`). That starts a
//! background save whose instant — every shard locked, each beginning its image — is
//! also where the replica's stream starts: the offset of the stream then. Each shard
//! that has replicas to feed keeps a [`Feed`]: every unit of work that writes on the
//! shard appends its effect (what the append-only log records) to it as RESP, after the
//! `SELECT` of its database. At the end of each loop iteration the shard appends what
//! it holds to the master's one [`Stream`], under a lock, as one piece: its leading
//! `SELECT` is left out when the stream has that database selected already, as
//! redis-server writes a `SELECT` only when the database changes. The stream keeps what
//! some replica still has to be sent (and `repl-backlog-size` bytes at least); the
//! replicas' workers copy from it into their connections (`Msg::ReplWake`). A replica's
//! worker sends `$<len>` and the save's file once written, then the stream from the
//! instant's offset. The replica answers with `REPLCONF ACK <offset>`, which WAIT counts.
//!
//! The offset (`master_repl_offset`) is the stream's length: every replica is sent the
//! same bytes in the same order, so its count and the master's agree.
//!
//! **The backlog.** From the first replica's sync on, the shards feed the stream whether
//! or not a replica is connected, and it keeps its last `repl-backlog-size` bytes: a
//! replica that lost its link asks `PSYNC <replid> <offset>` for the bytes it lacks and,
//! when the stream still holds them under this replication id, is sent them after
//! `+CONTINUE` (a partial resynchronization) instead of a new snapshot. After
//! `repl-backlog-ttl` seconds without replicas the backlog is freed, and the replication
//! id changes, as redis-server's.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::persist::aof::{Cmd, command, effect_commands};
use crate::runtime::msg::{ConnRef, TxRef};
use crate::shard::events::{Origin, Write};

/// Where a replica's sync is (INFO's `state=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaState {
    /// Its snapshot is being written.
    WaitBgsave,
    /// It is sent the snapshot and the stream.
    Online,
}

/// What a replica is sent before the stream.
#[derive(Debug)]
pub enum Before {
    /// `$<len>` and this file: its save's snapshot (a full resynchronization).
    Snapshot(PathBuf),
    /// Nothing: it continues from the backlog (a partial resynchronization).
    Nothing,
}

/// What a replica's sync sends before the stream, once ready (or why its save failed).
#[derive(Debug, Default)]
pub struct Snapshot(Mutex<Option<Result<Before, String>>>);

impl Snapshot {
    /// The save ended (or the replica continues from the backlog).
    pub fn set(&self, outcome: Result<Before, String>) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some(outcome);
        }
    }

    fn take(&self) -> Option<Result<Before, String>> {
        self.0.lock().ok().and_then(|mut s| s.take())
    }
}

/// A replica, as the master knows it.
#[derive(Debug)]
pub struct Replica {
    /// Its connection.
    pub conn: ConnRef,
    /// Its client id.
    pub client_id: u64,
    /// Its address.
    pub ip: String,
    /// The port it listens on (`REPLCONF listening-port`).
    pub port: u16,
    /// Where its sync is.
    pub state: ReplicaState,
    /// The offset it acknowledged last.
    pub ack: i64,
    /// When (Unix milliseconds).
    pub ack_ms: u64,
    /// Where in the stream it is: the offset its stream starts at (its save's instant)
    /// until it is sent the snapshot, then the offset sent so far.
    pub sent: i64,
    /// It said `REPLCONF capa psync2`: `+CONTINUE` names the replication id.
    pub psync2: bool,
    snapshot: Arc<Snapshot>,
}

/// The stream of writes sent to the replicas: its bytes from offset `start` on.
#[derive(Debug, Default)]
pub struct Stream {
    buf: Vec<u8>,
    /// The offset of `buf[0]`.
    start: i64,
    /// The database the stream selected last.
    db: Option<u16>,
}

impl Stream {
    /// The offset after its last byte.
    fn end(&self) -> i64 {
        self.start + self.buf.len() as i64
    }

    /// Empty, at `offset`, with no database selected.
    fn restart_at(&mut self, offset: i64) {
        self.buf = Vec::new();
        crate::memory::stream_holds(0);
        self.start = offset;
        self.db = None;
    }
}

/// The master's replicas, its stream and offset (in `Shared`).
#[derive(Debug, Default)]
pub struct Master {
    /// `master_repl_offset`: the stream's length.
    pub offset: AtomicI64,
    stream: Mutex<Stream>,
    replicas: Mutex<Vec<Replica>>,
    /// Replicas waiting for their snapshot's file: their workers look every iteration.
    pub waiting: AtomicUsize,
    /// How many replicas there are (read every loop iteration of worker 0).
    replicas_now: AtomicUsize,
    /// `min-replicas-to-write` (0: writes never wait for replicas).
    min_to_write: AtomicUsize,
    /// `min-replicas-max-lag`, in seconds (0: no check either).
    max_lag: AtomicU64,
    /// Replicas online that acknowledged within `max_lag` seconds (redis-server's
    /// `repl_good_slaves_count`), counted each second and at each acknowledgement.
    good: AtomicUsize,
    /// WAIT wants acknowledgements: the next shard that feeds replicas sends `REPLCONF
    /// GETACK *`.
    pub getack: AtomicBool,
    /// The backlog exists: the shards feed the stream (from a replica's sync until
    /// `repl-backlog-ttl` seconds without replicas).
    active: AtomicBool,
    /// `repl-backlog-size`: the bytes of the stream kept for partial resynchronizations.
    backlog_size: AtomicI64,
    /// `repl-backlog-ttl`, in seconds (0: the backlog is never freed).
    backlog_ttl: AtomicU64,
    /// Unix milliseconds since there are no replicas (0: there are, or never were).
    no_replicas_since: AtomicU64,
    /// INFO's `sync_full`, `sync_partial_ok` and `sync_partial_err`.
    pub stats: SyncStats,
    /// This server is a replica: its stream is its master's, bytes as the link applied
    /// them ([`Master::append_proxied`]), and the shards do not feed it.
    proxied: AtomicBool,
    /// `master_replid2` and `second_repl_offset`: the history this server's continues (a
    /// promoted replica's old master's) and the first offset that is not shared.
    replid2: Mutex<Option<(String, i64)>>,
    /// The history a replica's file recorded, for its link's first PSYNC.
    loaded: Mutex<Option<History>>,
    /// The append-only log, which records what the stream is sent (replicas' own
    /// commands left out), at the same points: the shards feed it too while it is on.
    log: crate::persist::aof::Log,
}

/// The replication history a snapshot's data is at (its `repl-*` aux fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct History {
    /// The replication id.
    pub replid: String,
    /// The offset.
    pub offset: i64,
    /// The database the stream had selected.
    pub db: u16,
}

/// How replicas' syncs went (INFO stats).
#[derive(Debug, Default)]
pub struct SyncStats {
    /// Full resynchronizations.
    pub full: AtomicU64,
    /// Partial resynchronizations accepted.
    pub partial_ok: AtomicU64,
    /// Partial resynchronizations asked for and refused.
    pub partial_err: AtomicU64,
}

/// redis-server's smallest backlog (`CONFIG_REPL_BACKLOG_MIN_SIZE`).
const MIN_BACKLOG: i64 = 16 * 1024;

impl Master {
    /// A master whose shards feed `log` too while it is on.
    pub fn with_log(log: crate::persist::aof::Log) -> Master {
        Master {
            log,
            ..Master::default()
        }
    }

    fn list(&self) -> MutexGuard<'_, Vec<Replica>> {
        self.replicas.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A replica's sync begins (its PSYNC or SYNC); its save finds its snapshot's slot
    /// with [`Master::snapshot_of`].
    pub fn register(&self, conn: ConnRef, client_id: u64, ip: String, port: u16, psync2: bool) {
        let mut list = self.list();
        list.push(Replica {
            conn,
            client_id,
            ip,
            port,
            state: ReplicaState::WaitBgsave,
            ack: 0,
            ack_ms: crate::clock::now_ms(),
            sent: i64::MAX,
            psync2,
            snapshot: Arc::default(),
        });
        self.no_replicas_since.store(0, Ordering::SeqCst);
        if !self.active.load(Ordering::SeqCst) {
            // A new backlog: it begins at the offset the stream is at. (Before the
            // sync's instant: the shards feed it from there.)
            let mut stream = self.stream();
            let end = stream.end();
            stream.restart_at(end);
            self.active.store(true, Ordering::SeqCst);
        }
        self.waiting.fetch_add(1, Ordering::SeqCst);
        self.replicas_now.store(list.len(), Ordering::SeqCst);
    }

    /// The snapshot slot of the replica on `conn`.
    pub fn snapshot_of(&self, conn: ConnRef) -> Option<Arc<Snapshot>> {
        self.list()
            .iter()
            .find(|r| r.conn == conn)
            .map(|r| Arc::clone(&r.snapshot))
    }

    /// The replica on `conn` is gone.
    pub fn remove(&self, conn: ConnRef) {
        let mut list = self.list();
        if let Some(i) = list.iter().position(|r| r.conn == conn) {
            let gone = list.remove(i);
            if gone.state == ReplicaState::WaitBgsave {
                self.waiting.fetch_sub(1, Ordering::SeqCst);
            }
            self.replicas_now.store(list.len(), Ordering::SeqCst);
            if list.is_empty() {
                self.no_replicas_since
                    .store(crate::clock::now_ms(), Ordering::SeqCst);
            }
        }
    }

    /// PSYNC's partial resynchronization: the replica on `conn` (registered) asks for the
    /// stream of history `replid` from `offset` (the first byte it lacks) on. When this
    /// master's id is `my_id` (or its second one, up to where it is shared) and its
    /// stream still holds those bytes, the replica is fed from there (once
    /// [`Master::resumed`]): true. Otherwise it needs a full resynchronization (logged
    /// as redis-server logs it).
    pub fn resume(&self, conn: ConnRef, replid: &[u8], offset: Option<i64>, my_id: &str) -> bool {
        let mut list = self.list();
        let stream = self.stream();
        let Some(r) = list.iter_mut().find(|r| r.conn == conn) else {
            return false;
        };
        let name = format!("{}:{}", r.ip, r.port);
        let (id2, second) = self.replid2().unwrap_or_default();
        let ours = replid == my_id.as_bytes()
            || (replid == id2.as_bytes() && offset.is_some_and(|o| o <= second));
        if !ours {
            if replid == b"?" {
                crate::log!(Notice, "Full resync requested by replica {name}");
            } else {
                match replid == id2.as_bytes() {
                    true => crate::log!(
                        Notice,
                        "Partial resynchronization not accepted: Requested offset for second \
                         ID was {}, but I can reply up to {second}",
                        offset.unwrap_or(0)
                    ),
                    false => crate::log!(
                        Notice,
                        "Partial resynchronization not accepted: Replication ID mismatch \
                         (Replica asked for '{}', my replication IDs are '{my_id}' and '{}')",
                        String::from_utf8_lossy(replid),
                        if id2.is_empty() { "0".repeat(40) } else { id2 }
                    ),
                }
                self.stats.partial_err.fetch_add(1, Ordering::Relaxed);
            }
            return false;
        }
        let end = stream.end();
        let active = self.backlog_active();
        let Some(offset) = offset.filter(|&o| active && o > stream.start && o <= end + 1) else {
            crate::log!(
                Notice,
                "Unable to partial resync with replica {name} for lack of backlog \
                 (Replica request was: {}).",
                offset.unwrap_or(0)
            );
            if offset.is_some_and(|o| o > end + 1) {
                crate::log!(
                    Warning,
                    "Warning: replica {name} tried to PSYNC with an offset that is greater \
                     than the master replication offset."
                );
            }
            self.stats.partial_err.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        r.sent = offset - 1;
        self.stats.partial_ok.fetch_add(1, Ordering::Relaxed);
        let len = end + 1 - offset;
        crate::log!(
            Notice,
            "Partial resynchronization request from {name} accepted. Sending {len} bytes of \
             backlog starting from offset {offset}."
        );
        true
    }

    /// The replica on `conn`, whose PSYNC [`Master::resume`] accepted, was answered
    /// `+CONTINUE`: its worker sends it the stream. Whether it said it knows PSYNC2
    /// (then `+CONTINUE` names the replication id).
    pub fn resumed(&self, conn: ConnRef) -> bool {
        let list = self.list();
        let Some(r) = list.iter().find(|r| r.conn == conn) else {
            return false;
        };
        r.snapshot.set(Ok(Before::Nothing));
        r.psync2
    }

    /// `REPLCONF ACK <offset>` from the replica of client `client_id`.
    pub fn ack(&self, client_id: u64, offset: i64) {
        if let Some(r) = self.list().iter_mut().find(|r| r.client_id == client_id) {
            r.ack = r.ack.max(offset);
            r.ack_ms = crate::clock::now_ms();
        }
        self.count_good();
    }

    /// `min-replicas-to-write`, `min-replicas-max-lag`, `repl-backlog-size` and
    /// `repl-backlog-ttl` put in force.
    pub fn configure(&self, values: &[String]) {
        let number = |name: &str| {
            crate::config::inert::value(values, name)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        self.min_to_write.store(
            usize::try_from(number("min-replicas-to-write")).unwrap_or(usize::MAX),
            Ordering::SeqCst,
        );
        self.max_lag
            .store(number("min-replicas-max-lag"), Ordering::SeqCst);
        let size = i64::try_from(number("repl-backlog-size")).unwrap_or(i64::MAX);
        self.backlog_size
            .store(size.max(MIN_BACKLOG), Ordering::SeqCst);
        self.backlog_ttl
            .store(number("repl-backlog-ttl"), Ordering::SeqCst);
        self.count_good();
    }

    /// Whether the backlog exists.
    #[inline]
    pub fn backlog_active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Whether the shards feed their writes: to the stream (the backlog exists and this
    /// server is not a replica, whose stream is its master's), or to the log.
    #[inline]
    pub fn shards_feed(&self) -> bool {
        self.stream_fed() || self.log.fed()
    }

    /// Whether the shards' pieces go to the stream.
    #[inline]
    fn stream_fed(&self) -> bool {
        self.backlog_active() && !self.proxied()
    }

    /// Whether this server's stream is its master's (it is a replica).
    #[inline]
    pub fn proxied(&self) -> bool {
        self.proxied.load(Ordering::Relaxed)
    }

    /// `master_replid2` and `second_repl_offset`, when this server continues another
    /// history.
    pub fn replid2(&self) -> Option<(String, i64)> {
        self.replid2.lock().ok().and_then(|r| r.clone())
    }

    fn set_replid2(&self, second: Option<(String, i64)>) {
        *self.replid2.lock().unwrap_or_else(|e| e.into_inner()) = second;
    }

    /// This server follows a master from now on: the shards stop feeding the stream,
    /// which is the master's from its sync on.
    pub fn follow_master(&self) {
        self.proxied.store(true, Ordering::SeqCst);
    }

    /// A replica's full sync with its master, whose stream starts at `offset`: the
    /// backlog starts again there, in the master's history (no second one).
    pub fn synced(&self, offset: i64) {
        self.stream().restart_at(offset);
        self.offset.store(offset, Ordering::SeqCst);
        self.active.store(true, Ordering::SeqCst);
        self.set_replid2(None);
    }

    /// The master went on with a new history (`+CONTINUE <new id>`, a promoted replica):
    /// what this server holds up to here is also `old`'s.
    pub fn shift(&self, old: String) {
        let next = self.offset.load(Ordering::SeqCst) + 1;
        self.set_replid2(Some((old, next)));
    }

    /// REPLICAOF NO ONE: this server's own history begins, continuing `old` (its
    /// master's) up to here; the shards feed the stream again, which selects its
    /// database anew.
    pub fn promote(&self, old: String) {
        // (Under the stream's lock: no byte of the master's is appended after the
        // offset the old history ends at.)
        let mut stream = self.stream();
        self.shift(old);
        stream.db = None;
        self.proxied.store(false, Ordering::SeqCst);
    }

    /// Appends the master's bytes, as the link applied them (a replica's stream; once
    /// promoted, a link that is ending adds nothing).
    pub fn append_proxied(&self, bytes: &[u8]) {
        let mut stream = self.stream();
        if !self.proxied() {
            return;
        }
        self.grow(&mut stream, bytes.len());
        stream.buf.extend_from_slice(bytes);
        stream.db = None;
        self.offset.fetch_add(bytes.len() as i64, Ordering::SeqCst);
    }

    /// The history this server's data is at now: id `replid`, the stream's offset, and
    /// the database it selected (a replica's link says which: `link_db`).
    pub fn history(&self, replid: String, link_db: Option<u16>) -> History {
        let stream = self.stream();
        let db = match self.proxied() {
            true => link_db.unwrap_or(0),
            false => stream.db.unwrap_or(0),
        };
        History {
            replid,
            offset: self.offset.load(Ordering::SeqCst),
            db,
        }
    }

    /// At start-up, a master's file recorded history `h`: replicas of it may continue
    /// from here (it is this server's second id, up to its offset); the backlog starts
    /// there.
    pub fn restore_as_master(&self, h: &History) {
        self.synced(h.offset);
        self.shift(h.replid.clone());
        self.no_replicas_since
            .store(crate::clock::now_ms(), Ordering::SeqCst);
    }

    /// At start-up, a replica's file recorded history `h`: its stream is there, and its
    /// link asks the master to continue from there ([`Master::take_loaded`]).
    pub fn restore_as_replica(&self, h: History) {
        self.synced(h.offset);
        if let Ok(mut loaded) = self.loaded.lock() {
            *loaded = Some(h);
        }
    }

    /// The history a replica's file recorded at start-up, once.
    pub fn take_loaded(&self) -> Option<History> {
        self.loaded.lock().ok()?.take()
    }

    /// The workers with replicas, in whatever state.
    pub fn workers_with_replicas(&self) -> Vec<usize> {
        let mut workers: Vec<usize> = self.list().iter().map(|r| r.conn.worker).collect();
        workers.sort_unstable();
        workers.dedup();
        workers
    }

    /// `repl-backlog-size` in force (INFO).
    pub fn backlog_size(&self) -> i64 {
        self.backlog_size.load(Ordering::Relaxed)
    }

    /// Once a second: frees the backlog after `repl-backlog-ttl` seconds without
    /// replicas; whether it did (the replication id must change: no replica can continue
    /// the history it held).
    pub fn expire_backlog(&self, now_ms: u64) -> bool {
        let ttl = self.backlog_ttl.load(Ordering::SeqCst);
        let since = self.no_replicas_since.load(Ordering::SeqCst);
        if ttl == 0 || since == 0 || !self.backlog_active() || self.count() > 0 || self.proxied() {
            return false;
        }
        // (In whole seconds of the clock, as redis-server counts them.)
        if (now_ms / 1000).saturating_sub(since / 1000) <= ttl {
            return false;
        }
        let mut stream = self.stream();
        let end = stream.end();
        stream.restart_at(end);
        self.active.store(false, Ordering::SeqCst);
        self.set_replid2(None);
        crate::log!(
            Notice,
            "Replication backlog freed after {ttl} seconds without connected replicas."
        );
        true
    }

    /// Counts the replicas that acknowledged recently enough.
    pub fn count_good(&self) {
        let now = crate::clock::now_ms();
        let max_lag = self.max_lag.load(Ordering::SeqCst);
        let good = self
            .list()
            .iter()
            .filter(|r| {
                r.state == ReplicaState::Online && now.saturating_sub(r.ack_ms) / 1000 <= max_lag
            })
            .count();
        self.good.store(good, Ordering::SeqCst);
    }

    /// Whether `min-replicas-to-write` is set.
    #[inline]
    pub fn min_replicas_set(&self) -> bool {
        self.min_to_write.load(Ordering::Relaxed) > 0
    }

    /// A write must be refused (`NOREPLICAS`): fewer replicas acknowledged recently
    /// enough than `min-replicas-to-write` asks for.
    pub fn too_few_for_writes(&self) -> bool {
        let min = self.min_to_write.load(Ordering::Relaxed);
        min > 0
            && self.max_lag.load(Ordering::Relaxed) > 0
            && self.good.load(Ordering::Relaxed) < min
    }

    /// FAILOVER's target: `target` (or, when `None`, the first replica) if it is online
    /// and acknowledged `offset` — the whole stream — as its address and listening port.
    pub fn caught_up(&self, target: Option<&(String, u16)>, offset: i64) -> Option<(String, u16)> {
        self.list()
            .iter()
            .filter(|r| r.state == ReplicaState::Online && r.ack == offset)
            .find(|r| target.is_none_or(|(host, port)| r.ip == *host && r.port == *port))
            .map(|r| (r.ip.clone(), r.port))
    }

    /// Whether `host:port` is a replica (its address and listening port), and online.
    pub fn replica_at(&self, host: &str, port: u16) -> Option<bool> {
        self.list()
            .iter()
            .find(|r| r.ip == host && r.port == port)
            .map(|r| r.state == ReplicaState::Online)
    }

    /// How many replicas acknowledged `offset`.
    pub fn acked(&self, offset: i64) -> usize {
        self.list()
            .iter()
            .filter(|r| r.state == ReplicaState::Online && r.ack >= offset)
            .count()
    }

    /// How many replicas there are.
    pub fn count(&self) -> usize {
        self.replicas_now.load(Ordering::SeqCst)
    }

    /// The snapshots ready (or failed) for replicas of `worker`: those replicas go
    /// online.
    ///
    /// A replica online counts as acknowledging now: `min-replicas-to-write` counts it
    /// at once, as redis-server's `replicaPutOnline` does.
    pub fn ready_for(&self, worker: usize) -> Vec<(ConnRef, Result<Before, String>)> {
        let mut ready = Vec::new();
        for r in self.list().iter_mut() {
            if r.conn.worker != worker || r.state != ReplicaState::WaitBgsave {
                continue;
            }
            if let Some(outcome) = r.snapshot.take() {
                r.state = ReplicaState::Online;
                r.ack_ms = crate::clock::now_ms();
                self.waiting.fetch_sub(1, Ordering::SeqCst);
                ready.push((r.conn, outcome));
            }
        }
        if !ready.is_empty() {
            self.count_good();
        }
        ready
    }

    fn stream(&self) -> MutexGuard<'_, Stream> {
        self.stream.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The replica on `conn` is fed from `offset` on (its save's instant); the stream's
    /// next piece selects its database whatever was selected before, as the replica
    /// starts with none (redis-server's `slaveseldb = -1`).
    pub fn starts_at(&self, conn: ConnRef, offset: i64) {
        if let Some(r) = self.list().iter_mut().find(|r| r.conn == conn) {
            r.sent = offset;
        }
        self.stats.full.fetch_add(1, Ordering::Relaxed);
        self.stream().db = None;
    }

    /// Appends a piece to the stream and the log: `bytes`, whose first `lead` bytes
    /// select database `lead_db` (left out when the stream or the log has it selected),
    /// and which leaves `last_db` selected; `kinds` says what in it one of them leaves
    /// out ([`REPL_ONLY`], [`MARKED`]).
    fn append(&self, bytes: &[u8], lead: Option<(u16, usize)>, last_db: Option<u16>, kinds: u8) {
        if !self.stream_fed() {
            if self.log.fed() {
                self.log.append(bytes, lead, last_db, kinds);
            }
            return;
        }
        // (Under the stream's lock: the log orders pieces as the stream does.)
        let mut stream = self.stream();
        if self.log.fed() {
            self.log.append(bytes, lead, last_db, kinds);
        }
        let piece = unselected(bytes, lead, stream.db);
        let start = stream.buf.len();
        if kinds & MARKED != 0 {
            let mut kept = Vec::with_capacity(piece.len());
            for_reader(piece, &mut kept, Reader::Replicas);
            self.grow(&mut stream, kept.len());
            stream.buf.extend_from_slice(&kept);
        } else {
            self.grow(&mut stream, piece.len());
            stream.buf.extend_from_slice(piece);
        }
        if last_db.is_some() {
            stream.db = last_db;
        }
        let n = stream.buf.len() - start;
        self.offset.fetch_add(n as i64, Ordering::SeqCst);
    }

    /// A command of no shard's unit of work (the DEL of a key found expired while
    /// loading), in database `db` when it names one.
    pub fn propagate(&self, db: Option<u16>, argv: &[&[u8]]) {
        if self.shards_feed() {
            let part = Part::command(db, argv);
            self.append(&part.bytes, leading_select(&part.bytes), db, 0);
        }
    }

    /// The stream gained bytes: the workers whose replicas are to be sent them (none:
    /// the stream is trimmed to the backlog here).
    pub fn appended(&self) -> Vec<usize> {
        let online = self.workers_online();
        if online.is_empty() {
            self.trim();
        }
        online
    }

    /// The workers with replicas online (to be woken for what the stream gained).
    fn workers_online(&self) -> Vec<usize> {
        let mut workers: Vec<usize> = self
            .list()
            .iter()
            .filter(|r| r.state == ReplicaState::Online)
            .map(|r| r.conn.worker)
            .collect();
        workers.sort_unstable();
        workers.dedup();
        workers
    }

    /// Hands `send` what the stream gained since each online replica of `worker` was
    /// last sent some, as a slice of the stream (copied by `send` into the replica's
    /// connection: no copy of its own, which `maxmemory` would count).
    pub fn take_for(&self, worker: usize, mut send: impl FnMut(ConnRef, &[u8])) {
        let mut list = self.list();
        let stream = self.stream();
        let end = stream.end();
        for r in list.iter_mut() {
            if r.conn.worker != worker || r.state != ReplicaState::Online || r.sent >= end {
                continue;
            }
            let from = usize::try_from(r.sent - stream.start).unwrap_or(0);
            if let Some(bytes) = stream.buf.get(from..) {
                send(r.conn, bytes);
            }
            r.sent = end;
        }
    }

    /// Drops what every replica was sent, keeping `repl-backlog-size` bytes.
    pub fn trim(&self) {
        let backlog = self.backlog_size();
        let list = self.list();
        let needed = list.iter().map(|r| r.sent).min().unwrap_or(i64::MAX);
        let mut stream = self.stream();
        let end = stream.end();
        let keep_from = needed.min(end - backlog).max(stream.start);
        // (In steps of a backlog at least: the bytes kept move down rarely.)
        if keep_from - stream.start >= backlog {
            let n = usize::try_from(keep_from - stream.start)
                .unwrap_or(0)
                .min(stream.buf.len());
            stream.buf.drain(..n);
            stream.start = keep_from;
        }
    }

    /// Makes room in the stream for `n` more bytes, what it holds over the backlog's
    /// size left out of `maxmemory` (`memory::reserve_left_out`).
    fn grow(&self, stream: &mut Stream, n: usize) {
        let backlog = u64::try_from(self.backlog_size()).unwrap_or(0);
        crate::memory::reserve_left_out(&mut stream.buf, n, |moving| {
            crate::memory::stream_holds(moving.saturating_sub(backlog));
        });
        crate::memory::stream_holds((stream.buf.capacity() as u64).saturating_sub(backlog));
    }

    /// The bytes the stream keeps (the backlog: INFO's `mem_replication_backlog`).
    pub fn backlog_bytes(&self) -> u64 {
        self.stream().buf.capacity() as u64
    }

    /// INFO's backlog fields: its first byte's offset and its length.
    pub fn backlog(&self) -> (i64, i64) {
        let stream = self.stream();
        (stream.start + 1, stream.buf.len() as i64)
    }

    /// INFO's lines about replicas (`connected_slaves:` and one `slaveN:` each).
    pub fn info_lines(&self, now_ms: u64) -> String {
        let list = self.list();
        let mut out = format!("connected_slaves:{}\r\n", list.len());
        for (i, r) in list.iter().enumerate() {
            let state = match r.state {
                ReplicaState::WaitBgsave => "wait_bgsave",
                ReplicaState::Online => "online",
            };
            out.push_str(&format!(
                "slave{i}:ip={},port={},state={state},offset={},lag={}\r\n",
                r.ip,
                r.port,
                r.ack,
                now_ms.saturating_sub(r.ack_ms) / 1000
            ));
        }
        out
    }

    /// ROLE's replicas: address, port, acknowledged offset.
    pub fn role_entries(&self) -> Vec<(String, u16, i64)> {
        self.list()
            .iter()
            .filter(|r| r.state == ReplicaState::Online)
            .map(|r| (r.ip.clone(), r.port, r.ack))
            .collect()
    }
}

/// A shard's feed of its writes into the master's stream (see the module's doc).
#[derive(Debug, Default)]
pub struct Feed {
    buf: Vec<u8>,
    /// The database the piece being built selected last.
    selected: Option<u16>,
    /// The call whose units are being appended (a transaction's, a script's): its
    /// commands go in one MULTI/EXEC when there are more than one, as redis-server
    /// propagates what one EXEC or EVAL wrote.
    call: Option<Call>,
    /// The step of a transaction run as a plan being run: what it writes is kept apart,
    /// for its coordinator to append with the rest of the transaction ([`Gathered`]).
    part: Option<Part>,
    /// What is written now goes into the part's `after` ([`Feed::part_after`]).
    after: bool,
    /// What `buf` holds that one reader leaves out ([`REPL_ONLY`], [`MARKED`]).
    kinds: u8,
}

/// What one step of a transaction run as a plan wrote on a shard, as RESP beginning with
/// the `SELECT` of its database: handed to the coordinator with the step's report.
#[derive(Debug, Default)]
pub struct Part {
    bytes: Vec<u8>,
    /// The database it leaves selected.
    selected: Option<u16>,
    /// Its commands (SELECTs left out).
    commands: usize,
    /// What its shard wrote after the step's work, which follows the whole transaction
    /// in the stream: the deletions of expired keys its writes readied for waiters
    /// (redis-server propagates them after the EXEC or the command).
    after: Option<Box<Part>>,
    /// What it holds that one reader leaves out ([`REPL_ONLY`], [`MARKED`]).
    kinds: u8,
    /// Where each command of its hop began, when its step's hops interleave commands
    /// ([`Feed::cut`]): its writes are put back in the commands' order.
    cuts: Vec<Cut>,
}

/// Where a command of a hop began in its step's part.
#[derive(Debug, Clone, Copy)]
struct Cut {
    /// The part's length then.
    at: usize,
    /// The database the part had selected then.
    selected: Option<u16>,
    /// The part's commands then.
    commands: usize,
}

impl Part {
    /// A command its coordinator sends once for every shard (FLUSHALL, SWAPDB, a move
    /// across shards), in database `db` when it names one.
    pub fn command(db: Option<u16>, argv: &[&[u8]]) -> Part {
        let mut part = Part::default();
        if let Some(db) = db {
            select_into(&mut part.bytes, &mut part.selected, db);
        }
        command(&mut part.bytes, argv.len(), argv.iter().copied());
        part.commands = 1;
        part
    }

    /// What each command of its hop wrote, in the hop's order: a part each, beginning
    /// with the SELECT of its database; the commands that wrote nothing left out. None
    /// when it was not cut at every one of `commands` commands.
    fn pieces(&self, commands: usize) -> Option<Vec<Option<Part>>> {
        if self.cuts.len() != commands {
            return None;
        }
        let end = Cut {
            at: self.bytes.len(),
            selected: self.selected,
            commands: self.commands,
        };
        let bounds = self.cuts.iter().zip(self.cuts.iter().skip(1).chain([&end]));
        let pieces = bounds.map(|(from, to)| {
            if to.commands == from.commands {
                return None;
            }
            let mut piece = Part {
                commands: to.commands - from.commands,
                kinds: self.kinds,
                ..Part::default()
            };
            if let Some(db) = from.selected {
                select_into(&mut piece.bytes, &mut piece.selected, db);
            }
            piece
                .bytes
                .extend_from_slice(self.bytes.get(from.at..to.at).unwrap_or_default());
            piece.selected = to.selected;
            Some(piece)
        });
        Some(pieces.collect())
    }
}

/// A transaction's effects gathered by its coordinator — its shards' parts in the order
/// of its steps (and of each step's hops), and its own commands —, appended to the
/// stream as one piece before it lets go of a lock, in one MULTI/EXEC when more than one
/// command, as redis-server propagates what one EXEC or script wrote: a replica applies
/// all of it or none. What a shard wrote before a part is in the stream before it (the
/// shard flushes it with the step); what it writes after, until the locks go, touches
/// none of the transaction's keys.
#[derive(Debug, Default)]
pub struct Gathered {
    buf: Vec<u8>,
    selected: Option<u16>,
    /// Where its MULTI goes: after the SELECT it begins with.
    body: usize,
    commands: usize,
    /// Never wrapped in MULTI/EXEC (`TxJob::set_unwrapped`).
    pub unwrapped: bool,
    /// The parts' `after`, appended after the rest, unwrapped.
    after: Option<Box<Gathered>>,
    /// What it holds that one reader leaves out ([`REPL_ONLY`], [`MARKED`]).
    kinds: u8,
}

impl Gathered {
    /// Adds a part (its leading SELECT left out when what came before selected it).
    pub fn add(&mut self, mut part: Part) {
        if let Some(after) = part.after.take() {
            self.after
                .get_or_insert_with(|| {
                    Box::new(Gathered {
                        unwrapped: true,
                        ..Gathered::default()
                    })
                })
                .add(*after);
        }
        let lead = leading_select(&part.bytes);
        if self.buf.is_empty() {
            self.body = lead.map_or(0, |(_, len)| len);
        }
        self.buf
            .extend_from_slice(unselected(&part.bytes, lead, self.selected));
        self.selected = part.selected.or(self.selected);
        self.commands += part.commands;
        self.kinds |= part.kinds;
    }

    /// Adds the parts of a step whose hops interleave commands (`order[i]`: where the
    /// commands of hop i come among the step's, in order): each command's writes in the
    /// commands' order, as one hop after another would have written them. A part not
    /// cut at its every command goes whole, in its hop's place.
    pub fn add_interleaved(&mut self, parts: Vec<Option<Box<Part>>>, order: &[Vec<usize>]) {
        let mut pieces = Vec::new();
        for (mut part, order) in parts.into_iter().zip(order) {
            let Some(part) = part.as_mut() else {
                continue;
            };
            let Some(cut) = part.pieces(order.len()) else {
                pieces.push((
                    order.first().copied().unwrap_or(0),
                    std::mem::take(&mut **part),
                ));
                continue;
            };
            if let Some(after) = part.after.take() {
                self.add(Part {
                    after: Some(after),
                    ..Part::default()
                });
            }
            pieces.extend(
                order
                    .iter()
                    .copied()
                    .zip(cut)
                    .filter_map(|(at, p)| Some((at, p?))),
            );
        }
        pieces.sort_by_key(|&(at, _)| at);
        for (_, piece) in pieces {
            self.add(piece);
        }
    }

    /// Appends what it gathered to the master's stream, and starts again empty.
    pub fn flush(&mut self, master: &Master) {
        if self.commands > 0 && master.shards_feed() {
            if self.commands > 1 && !self.unwrapped {
                let mut multi = Vec::with_capacity(16);
                command(&mut multi, 1, [&b"MULTI"[..]].into_iter());
                self.buf.splice(self.body..self.body, multi);
                command(&mut self.buf, 1, [&b"EXEC"[..]].into_iter());
            }
            master.append(
                &self.buf,
                leading_select(&self.buf),
                self.selected,
                self.kinds,
            );
        }
        let unwrapped = self.unwrapped;
        let after = std::mem::take(&mut self.after);
        *self = Gathered {
            unwrapped,
            ..Gathered::default()
        };
        if let Some(mut after) = after {
            after.flush(master);
        }
    }
}

/// A call being appended (see [`Feed::call`]).
#[derive(Debug, Clone, Copy)]
struct Call {
    of: CallOf,
    /// Where its MULTI goes: after the SELECT its first unit began with.
    body: usize,
    /// Its commands so far (SELECTs left out).
    commands: usize,
}

/// Whose units a call groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallOf {
    Tx(TxRef),
    Script,
}

/// A piece holds commands for replicas only (PUBLISH, the master's PING and REPLCONF,
/// which redis-server does not write to its log): the log leaves them out.
pub const REPL_ONLY: u8 = 1;
/// A piece holds commands for one reader only, each after its mark ([`LOG_ONLY`],
/// [`REPLICAS_ONLY`]): each reader leaves out the marks and the other's commands.
pub const MARKED: u8 = 2;
/// The mark before a command for the log only (`redis.set_repl(redis.REPL_AOF)`).
const LOG_ONLY: &[u8] = b"\0log-only";
/// The mark before a command for replicas only (`redis.set_repl(redis.REPL_REPLICA)`).
const REPLICAS_ONLY: &[u8] = b"\0replicas-only";

/// Who reads a piece.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// The append-only log.
    Log,
    /// The replication stream.
    Replicas,
}

/// Copies into `out` the commands of `piece` that `reader` is to have: not the marks,
/// nor a command marked for the other; for the log, not the commands for replicas only
/// (PUBLISH and SPUBLISH, which redis-server propagates to replicas only, and the
/// master's PING and REPLCONF).
pub fn for_reader(piece: &[u8], out: &mut Vec<u8>, reader: Reader) {
    const REPL_ONLY_NAMES: [&[u8]; 4] = [b"PUBLISH", b"SPUBLISH", b"PING", b"REPLCONF"];
    let (mut at, mut skip) = (0, false);
    while let Some(rest) = piece.get(at..).filter(|r| !r.is_empty()) {
        let Ok(Some((args, len))) = crate::persist::aof::parse_record(rest) else {
            // (The feed wrote it: not reached. Kept whole rather than lost.)
            out.extend_from_slice(rest);
            return;
        };
        at += len;
        let name = args
            .first()
            .and_then(|r| rest.get(r.clone()))
            .unwrap_or_default();
        if name == LOG_ONLY || name == REPLICAS_ONLY {
            skip = (name == LOG_ONLY) == (reader == Reader::Replicas);
            continue;
        }
        let repl_only =
            reader == Reader::Log && REPL_ONLY_NAMES.iter().any(|c| name.eq_ignore_ascii_case(c));
        if !std::mem::take(&mut skip) && !repl_only {
            out.extend_from_slice(rest.get(..len).unwrap_or_default());
        }
    }
}

/// `SELECT db` into `buf` unless `selected` is `db` already (then it is).
fn select_into(buf: &mut Vec<u8>, selected: &mut Option<u16>, db: u16) {
    if *selected != Some(db) {
        *selected = Some(db);
        Cmd::Select(db).encode(buf);
    }
}

/// `bytes` without their leading SELECT (`lead`, as [`leading_select`] finds it) when
/// that database is `selected` already.
pub(crate) fn unselected(bytes: &[u8], lead: Option<(u16, usize)>, selected: Option<u16>) -> &[u8] {
    let skip = match lead {
        Some((db, len)) if selected == Some(db) => len,
        _ => 0,
    };
    bytes.get(skip..).unwrap_or_default()
}

/// `*2 $6 SELECT $n <db>` at the start of `buf`: the database and its length in bytes.
pub(crate) fn leading_select(buf: &[u8]) -> Option<(u16, usize)> {
    const HEAD: &[u8] = b"*2\r\n$6\r\nSELECT\r\n$";
    let rest = buf.strip_prefix(HEAD)?;
    let nl = rest.iter().position(|&b| b == b'\r')?;
    let n: usize = std::str::from_utf8(rest.get(..nl)?).ok()?.parse().ok()?;
    let digits = rest.get(nl + 2..nl + 2 + n)?;
    let db = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some((db, HEAD.len() + nl + 2 + n + 2))
}

impl Feed {
    /// Appends a unit of work's effect, for the log and replicas, or with `to` (a
    /// script's `redis.set_repl`: `REPL_AOF` or `REPL_REPLICA` alone) for one of them:
    /// each command then follows its mark ([`MARKED`]). The units of one call (a
    /// transaction's, or a script's while `in_script`) are grouped; a unit of no call
    /// that is more than one command (expiry's deletions excepted) is a transaction of
    /// its own.
    pub fn on_write(&mut self, write: &Write<'_>, in_script: bool, to: u8) {
        use crate::scripting::engine::{REPL_ALL, REPL_AOF};
        let mark = match to {
            REPL_ALL => None,
            REPL_AOF => Some(LOG_ONLY),
            _ => Some(REPLICAS_ONLY),
        };
        let encode = move |buf: &mut Vec<u8>, cmd: Cmd<'_>| {
            if let (Some(mark), false) = (mark, matches!(cmd, Cmd::Select(_))) {
                command(buf, 1, [mark].into_iter());
            }
            cmd.encode(buf);
        };
        let kinds = if mark.is_some() { MARKED } else { 0 };
        if let Some(mut part) = self.part.as_mut() {
            if self.after {
                part = part.after.get_or_insert_default();
            }
            let mut commands = 0;
            effect_commands(write, &mut part.selected, &mut part.bytes, |buf, cmd| {
                commands += usize::from(!matches!(cmd, Cmd::Select(_)));
                encode(buf, cmd);
            });
            part.commands += commands;
            part.kinds |= kinds;
            return;
        }
        self.kinds |= kinds;
        let of = match write.origin {
            _ if in_script => Some(CallOf::Script),
            Origin::Command(_, _, Some(tx)) | Origin::Step(tx) => Some(CallOf::Tx(tx)),
            _ => None,
        };
        if self.call.is_some_and(|c| Some(c.of) != of) {
            self.end_call();
        }
        let mut body = self.buf.len();
        let (mut count, mut selects) = (0, 0);
        effect_commands(write, &mut self.selected, &mut self.buf, |buf, cmd| {
            let select = matches!(cmd, Cmd::Select(_));
            encode(buf, cmd);
            if select && count == selects {
                body = buf.len();
            }
            count += 1;
            selects += usize::from(select);
        });
        let commands = count - selects;
        match (of, self.call.as_mut()) {
            (Some(_), Some(call)) => call.commands += commands,
            (Some(of), None) if commands > 0 => {
                self.call = Some(Call { of, body, commands });
            }
            (Some(_), None) => {}
            (None, _) => {
                let expiry = matches!(write.origin, Origin::Expiry | Origin::Eviction);
                if commands > 1 && !expiry {
                    self.wrap(body);
                }
            }
        }
    }

    /// The call in progress ends (a script's end): its commands go in MULTI/EXEC when
    /// there are more than one.
    pub fn end_call(&mut self) {
        if let Some(call) = self.call.take()
            && call.commands > 1
        {
            self.wrap(call.body);
        }
    }

    /// Puts what `buf` holds from `body` on in MULTI/EXEC.
    fn wrap(&mut self, body: usize) {
        let mut multi = Vec::with_capacity(16);
        command(&mut multi, 1, [&b"MULTI"[..]].into_iter());
        self.buf.splice(body..body, multi);
        command(&mut self.buf, 1, [&b"EXEC"[..]].into_iter());
    }

    /// Appends `argv`, a command that writes nothing but goes to replicas (PUBLISH), in
    /// database `db`: among the script's commands while `in_script`, as a unit of its
    /// own otherwise.
    pub fn propagate(&mut self, db: u16, argv: &[&[u8]], in_script: bool) {
        if let Some(part) = self.part.as_mut() {
            select_into(&mut part.bytes, &mut part.selected, db);
            command(&mut part.bytes, argv.len(), argv.iter().copied());
            part.commands += 1;
            part.kinds |= REPL_ONLY;
            return;
        }
        self.kinds |= REPL_ONLY;
        let of = in_script.then_some(CallOf::Script);
        if self.call.is_some_and(|c| Some(c.of) != of) {
            self.end_call();
        }
        select_into(&mut self.buf, &mut self.selected, db);
        let body = self.buf.len();
        command(&mut self.buf, argv.len(), argv.iter().copied());
        match (of, self.call.as_mut()) {
            (Some(_), Some(call)) => call.commands += 1,
            (Some(of), None) => {
                self.call = Some(Call {
                    of,
                    body,
                    commands: 1,
                })
            }
            (None, _) => {}
        }
    }

    /// A step of a transaction run as a plan begins: what it writes is its part.
    pub fn begin_part(&mut self) {
        self.part = Some(Part::default());
    }

    /// What the shard writes from now on (`on`), until called again with `false`, goes
    /// into the step's part's `after`: it follows the whole transaction.
    pub fn part_after(&mut self, on: bool) {
        self.after = on;
    }

    /// A command of the step's hop begins (its step's hops interleave commands): where,
    /// so that its writes can be put back in the commands' order ([`Part::pieces`]).
    pub fn cut(&mut self) {
        if let Some(part) = self.part.as_mut() {
            part.cuts.push(Cut {
                at: part.bytes.len(),
                selected: part.selected,
                commands: part.commands,
            });
        }
    }

    /// The step begun with [`Feed::begin_part`] ends: its part, if it wrote, for its
    /// coordinator — what the shard wrote before goes into the stream now, ahead of it.
    /// A step that lets go of its locks here (`kept` false) cannot wait for its
    /// coordinator: the shard appends it itself, now.
    pub fn end_part(&mut self, master: &Master, kept: bool) -> Option<Part> {
        let part = self
            .part
            .take()
            .filter(|p| p.commands > 0 || p.after.is_some())?;
        self.flush(master);
        if !kept {
            let mut alone = Gathered::default();
            alone.add(part);
            alone.flush(master);
            return None;
        }
        Some(part)
    }

    /// Appends a command of the master's own (PING, REPLCONF GETACK).
    pub fn push(&mut self, argv: &[&[u8]]) {
        command(&mut self.buf, argv.len(), argv.iter().copied());
        self.kinds |= REPL_ONLY;
    }

    /// Appends what it holds to the master's stream; whether it held anything.
    pub fn flush(&mut self, master: &Master) -> bool {
        self.end_call();
        if self.buf.is_empty() {
            return false;
        }
        master.append(
            &self.buf,
            leading_select(&self.buf),
            self.selected,
            self.kinds,
        );
        self.buf.clear();
        self.selected = None;
        self.kinds = 0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a transaction's shards wrote, gathered: one piece, its first SELECT before
    /// MULTI, the others only where the database changes, EXEC last; one command alone
    /// is not wrapped; nothing gathered appends nothing.
    #[test]
    fn gathered_parts_are_one_transaction() {
        let master = Master::default();
        let mut gathered = Gathered::default();
        gathered.add(Part::command(Some(2), &[b"SET", b"a", b"0"]));
        // (No backlog: nothing to feed.)
        gathered.flush(&master);
        assert_eq!(master.offset.load(Ordering::SeqCst), 0);
        master.active.store(true, Ordering::SeqCst);
        gathered.flush(&master);
        assert_eq!(master.offset.load(Ordering::SeqCst), 0);
        let cmd = |argv: &[&str]| {
            let mut out = Vec::new();
            command(&mut out, argv.len(), argv.iter().map(|a| a.as_bytes()));
            out
        };
        gathered.add(Part::command(Some(2), &[b"SET", b"a", b"1"]));
        gathered.add(Part::command(Some(2), &[b"SET", b"b", b"2"]));
        gathered.add(Part::command(Some(5), &[b"FLUSHDB"]));
        gathered.add(Part::command(None, &[b"PUBLISH", b"ch", b"m"]));
        let alone = Part::command(Some(5), &[b"DEL", b"c"]);
        gathered.flush(&master);
        let mut once = Gathered::default();
        once.add(alone);
        once.flush(&master);
        let want = [
            cmd(&["SELECT", "2"]),
            cmd(&["MULTI"]),
            cmd(&["SET", "a", "1"]),
            cmd(&["SET", "b", "2"]),
            cmd(&["SELECT", "5"]),
            cmd(&["FLUSHDB"]),
            cmd(&["PUBLISH", "ch", "m"]),
            cmd(&["EXEC"]),
            // (The stream has database 5 selected.)
            cmd(&["DEL", "c"]),
        ]
        .concat();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        assert_eq!(text(&master.stream().buf), text(&want));
    }

    /// Each reader's copy of a piece: the log without what goes to replicas only, the
    /// replicas without what goes to the log only; neither with the marks.
    #[test]
    fn each_reader_has_its_own_commands() {
        let cmd = |argv: &[&[u8]]| {
            let mut out = Vec::new();
            command(&mut out, argv.len(), argv.iter().copied());
            out
        };
        let piece = [
            cmd(&[b"SELECT", b"1"]),
            cmd(&[b"MULTI"]),
            cmd(&[b"SET", b"a", b"1"]),
            cmd(&[LOG_ONLY]),
            cmd(&[b"SET", b"b", b"2"]),
            cmd(&[REPLICAS_ONLY]),
            cmd(&[b"SET", b"c", b"3"]),
            cmd(&[b"publish", b"ch", b"m"]),
            cmd(&[b"EXEC"]),
            cmd(&[b"PING"]),
        ]
        .concat();
        let copy = |reader| {
            let mut out = Vec::new();
            for_reader(&piece, &mut out, reader);
            String::from_utf8_lossy(&out).into_owned()
        };
        let want = |argvs: &[&[&[u8]]]| {
            let all: Vec<u8> = argvs.iter().flat_map(|a| cmd(a)).collect();
            String::from_utf8_lossy(&all).into_owned()
        };
        assert_eq!(
            copy(Reader::Log),
            want(&[
                &[b"SELECT", b"1"],
                &[b"MULTI"],
                &[b"SET", b"a", b"1"],
                &[b"SET", b"b", b"2"],
                &[b"EXEC"],
            ])
        );
        assert_eq!(
            copy(Reader::Replicas),
            want(&[
                &[b"SELECT", b"1"],
                &[b"MULTI"],
                &[b"SET", b"a", b"1"],
                &[b"SET", b"c", b"3"],
                &[b"publish", b"ch", b"m"],
                &[b"EXEC"],
                &[b"PING"],
            ])
        );
    }

    /// The parts of hops that ran at once, cut at their commands, go in the commands'
    /// order, each piece with the SELECT its command ran in where the one before left
    /// another; a part not cut at its every command goes whole in its first command's
    /// place.
    #[test]
    fn interleaved_parts_go_in_their_commands_order() {
        let master = Master::default();
        master.active.store(true, Ordering::SeqCst);
        let cmd = |argv: &[&str]| {
            let mut out = Vec::new();
            command(&mut out, argv.len(), argv.iter().map(|a| a.as_bytes()));
            out
        };
        // A hop's part, written as a shard writes it: a cut before each command.
        let part = |commands: &[(u16, &[&[&str]])]| {
            let mut feed = Feed::default();
            feed.begin_part();
            for (db, writes) in commands {
                feed.cut();
                let part = feed.part.as_mut().expect("a part begun");
                for argv in *writes {
                    select_into(&mut part.bytes, &mut part.selected, *db);
                    part.bytes.extend(cmd(argv));
                    part.commands += 1;
                }
            }
            feed.part.take().map(Box::new)
        };
        let mut gathered = Gathered::default();
        let first = part(&[
            (3, &[&["SET", "a", "1"]]),
            (3, &[]),
            (4, &[&["DEL", "b"], &["SET", "b", "2"]]),
        ]);
        let second = part(&[(3, &[&["SET", "c", "3"]]), (3, &[&["SET", "d", "4"]])]);
        let mut whole = part(&[(3, &[&["SET", "e", "5"]])]);
        whole.as_mut().expect("a part that wrote").cuts.clear();
        gathered.add_interleaved(
            vec![first, second, None, whole],
            &[vec![0, 2, 4], vec![1, 3], vec![5], vec![6]],
        );
        gathered.flush(&master);
        let want = [
            cmd(&["SELECT", "3"]),
            cmd(&["MULTI"]),
            cmd(&["SET", "a", "1"]),
            cmd(&["SET", "c", "3"]),
            cmd(&["SET", "d", "4"]),
            cmd(&["SELECT", "4"]),
            cmd(&["DEL", "b"]),
            cmd(&["SET", "b", "2"]),
            cmd(&["SELECT", "3"]),
            cmd(&["SET", "e", "5"]),
            cmd(&["EXEC"]),
        ]
        .concat();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        assert_eq!(text(&master.stream().buf), text(&want));
    }

    #[test]
    fn a_piece_leaves_out_the_select_the_stream_has_made() {
        let master = Master::default();
        master.active.store(true, Ordering::SeqCst);
        let mut feed = Feed::default();
        let select = |db: &str| {
            let mut out = Vec::new();
            command(&mut out, 2, [&b"SELECT"[..], db.as_bytes()].into_iter());
            out
        };
        let set = |k: &str| {
            let mut out = Vec::new();
            command(&mut out, 3, [&b"SET"[..], k.as_bytes(), b"v"].into_iter());
            out
        };
        assert_eq!(
            leading_select(&select("12")),
            Some((12, select("12").len()))
        );
        assert_eq!(leading_select(&set("a")), None);
        for (db, key) in [("9", "a"), ("9", "b"), ("3", "c")] {
            feed.buf.extend(select(db));
            feed.buf.extend(set(key));
            feed.selected = db.parse().ok();
            assert!(feed.flush(&master));
        }
        feed.push(&[b"PING"]);
        assert!(feed.flush(&master));
        assert!(!feed.flush(&master));
        let want = [
            select("9"),
            set("a"),
            set("b"),
            select("3"),
            set("c"),
            b"*1\r\n$4\r\nPING\r\n".to_vec(),
        ]
        .concat();
        assert_eq!(master.stream().buf, want);
        assert_eq!(master.offset.load(Ordering::SeqCst), want.len() as i64);
        assert_eq!(master.backlog(), (1, want.len() as i64));
    }
}
