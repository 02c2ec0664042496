//! A master's side of replication: its replicas, and each shard's feed of its writes.
//!
//! A replica connects as a client and sends `PSYNC` (or `SYNC`). That starts a
//! background save whose instant — every shard locked, each beginning its image — is
//! also where each shard starts to feed the replica: from then on, every unit of work
//! that writes on the shard appends its effect (what the append-only log records) to the
//! shard's [`Feed`], as RESP, after the `SELECT` of its database. At the end of each loop
//! iteration the shard cuts what it holds into a chunk (each chunk starts with its own
//! `SELECT`, so that chunks of different shards may interleave) and sends it to the
//! workers of its replicas (`Msg::Repl`). The replica's worker holds the chunks back
//! until the snapshot's file is written, then sends `$<len>`, the file, and the chunks;
//! from then on, each chunk as it comes. The replica answers with `REPLCONF ACK
//! <offset>`, which WAIT counts.
//!
//! The offset (`master_repl_offset`) counts the bytes of every chunk, when it is cut; a
//! replica starts at the offset of its save's instant (`+FULLRESYNC <replid> <offset>`),
//! and every chunk cut after that reaches it, so the replica's count and the master's
//! agree. Every sync is a full one: there is no backlog to continue from.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::persist::aof::{Cmd, command, effect_commands};
use crate::runtime::msg::ConnRef;
use crate::shard::events::{Origin, Write};

/// Where a replica's sync is (INFO's `state=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaState {
    /// Its snapshot is being written.
    WaitBgsave,
    /// It is sent the snapshot and the stream.
    Online,
}

/// The file a replica's save wrote, once written (or why it failed).
#[derive(Debug, Default)]
pub struct Snapshot(Mutex<Option<Result<PathBuf, String>>>);

impl Snapshot {
    /// The save ended.
    pub fn set(&self, outcome: Result<PathBuf, String>) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some(outcome);
        }
    }

    fn take(&self) -> Option<Result<PathBuf, String>> {
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
    snapshot: Arc<Snapshot>,
}

/// The master's replicas and its offset (in `Shared`).
#[derive(Debug, Default)]
pub struct Master {
    /// `master_repl_offset`: the bytes of the stream so far.
    pub offset: AtomicI64,
    replicas: Mutex<Vec<Replica>>,
    /// Moves on when a replica goes: the shards' feeds drop it.
    pub version: AtomicU64,
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
}

impl Master {
    fn list(&self) -> MutexGuard<'_, Vec<Replica>> {
        self.replicas.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A replica's sync begins (its PSYNC or SYNC): its snapshot's slot.
    pub fn register(&self, conn: ConnRef, client_id: u64, ip: String, port: u16) -> Arc<Snapshot> {
        let snapshot = Arc::new(Snapshot::default());
        let mut list = self.list();
        list.push(Replica {
            conn,
            client_id,
            ip,
            port,
            state: ReplicaState::WaitBgsave,
            ack: 0,
            ack_ms: crate::clock::now_ms(),
            snapshot: Arc::clone(&snapshot),
        });
        self.waiting.fetch_add(1, Ordering::SeqCst);
        self.replicas_now.store(list.len(), Ordering::SeqCst);
        snapshot
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
            self.version.fetch_add(1, Ordering::SeqCst);
            self.replicas_now.store(list.len(), Ordering::SeqCst);
        }
    }

    /// `REPLCONF ACK <offset>` from the replica of client `client_id`.
    pub fn ack(&self, client_id: u64, offset: i64) {
        if let Some(r) = self.list().iter_mut().find(|r| r.client_id == client_id) {
            r.ack = r.ack.max(offset);
            r.ack_ms = crate::clock::now_ms();
        }
        self.count_good();
    }

    /// `min-replicas-to-write` and `min-replicas-max-lag` put in force.
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
        self.count_good();
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

    /// A write must be refused (`NOREPLICAS`): fewer replicas acknowledged recently
    /// enough than `min-replicas-to-write` asks for.
    pub fn too_few_for_writes(&self) -> bool {
        let min = self.min_to_write.load(Ordering::Relaxed);
        min > 0
            && self.max_lag.load(Ordering::Relaxed) > 0
            && self.good.load(Ordering::Relaxed) < min
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
    pub fn ready_for(&self, worker: usize) -> Vec<(ConnRef, Result<PathBuf, String>)> {
        let mut ready = Vec::new();
        for r in self.list().iter_mut() {
            if r.conn.worker != worker || r.state != ReplicaState::WaitBgsave {
                continue;
            }
            if let Some(outcome) = r.snapshot.take() {
                r.state = ReplicaState::Online;
                self.waiting.fetch_sub(1, Ordering::SeqCst);
                ready.push((r.conn, outcome));
            }
        }
        ready
    }

    /// Keeps, of `conns`, the replicas still there.
    fn retain(&self, conns: &mut Vec<ConnRef>) {
        let list = self.list();
        conns.retain(|c| list.iter().any(|r| r.conn == *c));
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

/// A chunk of the stream and the replicas it goes to.
pub type Chunk = (Arc<[u8]>, Vec<ConnRef>);

/// A shard's feed of its writes to the replicas (see the module's doc).
#[derive(Debug, Default)]
pub struct Feed {
    subscribers: Vec<ConnRef>,
    buf: Vec<u8>,
    /// The database the chunk being built selected last.
    selected: Option<u16>,
    /// Chunks cut, each with how many of the subscribers (the first ones) it goes to.
    chunks: Vec<(Vec<u8>, usize)>,
    /// The replicas' version the subscribers were checked at.
    version: u64,
}

impl Feed {
    /// Appends a unit of work's effect, as a transaction when it is more than one
    /// command (expiry's deletions excepted), as redis-server propagates them.
    pub fn on_write(&mut self, write: &Write<'_>) {
        let start = self.buf.len();
        let (mut count, mut selects) = (0, 0);
        effect_commands(write, &mut self.selected, &mut self.buf, |buf, cmd| {
            count += 1;
            selects += usize::from(matches!(cmd, Cmd::Select(_)));
            cmd.encode(buf);
        });
        let expiry = matches!(write.origin, Origin::Expiry | Origin::Eviction);
        if count - selects > 1 && !expiry {
            let mut multi = Vec::with_capacity(16);
            command(&mut multi, 1, [&b"MULTI"[..]].into_iter());
            self.buf.splice(start..start, multi);
            command(&mut self.buf, 1, [&b"EXEC"[..]].into_iter());
        }
    }

    /// Appends a command of the master's own (PING, REPLCONF GETACK).
    pub fn push(&mut self, argv: &[&[u8]]) {
        command(&mut self.buf, argv.len(), argv.iter().copied());
    }

    /// From now on, `conn` is fed too (what came before is not its).
    pub fn subscribe(&mut self, conn: ConnRef, master: &Master) {
        self.cut(master);
        self.subscribers.push(conn);
    }

    /// Whether it feeds anyone.
    pub fn is_empty(&self) -> bool {
        self.subscribers.is_empty()
    }

    /// Ends the chunk being built, counting it in the offset.
    fn cut(&mut self, master: &Master) {
        if self.buf.is_empty() {
            return;
        }
        master
            .offset
            .fetch_add(self.buf.len() as i64, Ordering::SeqCst);
        self.chunks
            .push((std::mem::take(&mut self.buf), self.subscribers.len()));
        self.selected = None;
    }

    /// The chunks to send, with their replicas; then drops the replicas gone.
    pub fn take(&mut self, master: &Master) -> Vec<Chunk> {
        self.cut(master);
        let chunks = self
            .chunks
            .drain(..)
            .map(|(bytes, n)| {
                let to = self.subscribers.get(..n).unwrap_or(&self.subscribers);
                (Arc::from(bytes), to.to_vec())
            })
            .collect();
        let version = master.version.load(Ordering::SeqCst);
        if version != self.version {
            self.version = version;
            master.retain(&mut self.subscribers);
        }
        chunks
    }
}
