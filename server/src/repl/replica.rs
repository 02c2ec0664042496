//! A replica's side: REPLICAOF (and `replicaof` in the configuration) starts a link to a
//! master ([`super::link`], a thread of its own); REPLICAOF NO ONE ends it.
//!
//! The link applies what the master sends through a connection into this server (a
//! socket pair handed to worker 0, as an accepted client is): its client is the
//! master's (`Client::master`), which writes where other clients, on a read-only
//! replica, are refused (`READONLY`). What it writes goes through the shards' write path
//! like any client's: the log, keyspace notifications, WATCH and the replicas of this
//! replica all see it.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::link::{self, LinkConfig, LinkStatus, State};
use super::master::History;
use crate::runtime::msg::Msg;
use crate::runtime::net::{Origin, Stream};
use crate::runtime::server::Shared;

/// The master this server follows, while it is a replica.
#[derive(Debug)]
struct Following {
    host: String,
    port: u16,
    status: Arc<LinkStatus>,
}

/// Whether this server is a replica, and of whom (in `Shared`).
#[derive(Debug, Default)]
pub struct Follow {
    following: Mutex<Option<Following>>,
    /// It is a replica (read without the lock by every command's check).
    pub active: std::sync::atomic::AtomicBool,
    /// `replica-read-only no`: its clients may write too.
    writable: std::sync::atomic::AtomicBool,
    /// `replica-serve-stale-data no`: while the link is down, only commands flagged
    /// `stale` are served.
    no_stale: std::sync::atomic::AtomicBool,
}

/// What INFO and ROLE say of the link.
#[derive(Debug, Clone)]
pub struct LinkView {
    /// The master's host.
    pub host: String,
    /// The master's port.
    pub port: u16,
    /// The link's state.
    pub state: State,
    /// The offset applied.
    pub offset: i64,
    /// The offset read.
    pub read_offset: i64,
    /// The master's replication id.
    pub replid: String,
    /// Unix milliseconds of the last byte from the master (0: none yet).
    pub last_io_ms: u64,
    /// Unix milliseconds the link went down (0: up).
    pub down_since_ms: u64,
    /// A snapshot is being received: its size (-1: unknown) and what came so far.
    pub sync: Option<(i64, i64)>,
}

impl Follow {
    /// Puts `replica-read-only` and `replica-serve-stale-data` in force (at start-up and
    /// on CONFIG SET).
    pub fn configure(&self, values: &[String]) {
        let no = |name| crate::config::inert::value(values, name) == Some("no");
        self.writable
            .store(no("replica-read-only"), Ordering::Relaxed);
        self.no_stale
            .store(no("replica-serve-stale-data"), Ordering::Relaxed);
    }

    /// It is a replica whose link is not up and which must not serve stale data
    /// (`replica-serve-stale-data no`): only commands flagged `stale` run, as in Redis.
    pub fn stale(&self) -> bool {
        self.active.load(Ordering::Relaxed)
            && self.no_stale.load(Ordering::Relaxed)
            && self
                .lock()
                .as_ref()
                .is_none_or(|f| f.status.state() != State::Connected)
    }

    /// `replica-read-only`: a replica refuses its clients' writes.
    pub fn read_only(&self) -> bool {
        !self.writable.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, Option<Following>> {
        self.following.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The link's state, when this server is a replica.
    pub fn view(&self) -> Option<LinkView> {
        let following = self.lock();
        let f = following.as_ref()?;
        let s = &f.status;
        Some(LinkView {
            host: f.host.clone(),
            port: f.port,
            state: s.state(),
            offset: s.offset.load(Ordering::SeqCst),
            read_offset: s.read_offset.load(Ordering::SeqCst),
            replid: s.master_replid(),
            last_io_ms: s.last_io_ms.load(Ordering::SeqCst),
            down_since_ms: s.down_since_ms.load(Ordering::SeqCst),
            sync: s.sync_in_progress.load(Ordering::SeqCst).then(|| {
                (
                    s.sync_total.load(Ordering::SeqCst),
                    s.sync_read.load(Ordering::SeqCst),
                )
            }),
        })
    }

    /// Whether it follows `host:port` already.
    pub fn follows(&self, host: &str, port: u16) -> bool {
        self.lock()
            .as_ref()
            .is_some_and(|f| f.host.eq_ignore_ascii_case(host) && f.port == port)
    }

    /// Follows `host:port` from now on (the link to another master ends), asking it to
    /// continue the history `resume` (replication id, offset, selected database) when
    /// there is one.
    pub fn start(&self, shared: &Shared, host: &str, port: u16, resume: Option<History>) {
        self.start_link(shared, host, port, resume, false);
    }

    /// [`Follow::start`], for a master failing over to `host:port` (FAILOVER): its PSYNC
    /// says so; [`Follow::failover_outcome`] tells the answer.
    pub fn start_failover(&self, shared: &Shared, host: &str, port: u16, resume: History) {
        self.start_link(shared, host, port, Some(resume), true);
    }

    /// How the master the link follows answered a FAILOVER's PSYNC, once it has
    /// (`link::FAILOVER_ACCEPTED`, `link::FAILOVER_REJECTED`; 0 before, or without a
    /// link).
    pub fn failover_outcome(&self) -> u8 {
        self.lock()
            .as_ref()
            .map_or(0, |f| f.status.failover.load(Ordering::SeqCst))
    }

    fn start_link(
        &self,
        shared: &Shared,
        host: &str,
        port: u16,
        resume: Option<History>,
        failover: bool,
    ) {
        let mut following = self.lock();
        if let Some(old) = following.take() {
            old.status.stop.store(true, Ordering::SeqCst);
        }
        let timeout = configured(shared, "repl-timeout")
            .and_then(|t| t.parse().ok())
            .unwrap_or(60u64);
        let config = LinkConfig {
            host: host.to_string(),
            port,
            listening_port: shared.local_addr.port(),
            rdb_path: shared.live().persist.rdb_path(),
            timeout: std::time::Duration::from_secs(timeout.max(1)),
            resume,
            failover,
        };
        // This server's stream is its master's from now on; its replicas sync again,
        // from that history.
        shared.repl.follow_master();
        drop_replicas(shared);
        let status = Arc::new(LinkStatus::default());
        status.state.store(State::Connect as u8, Ordering::SeqCst);
        status.offset.store(-1, Ordering::SeqCst);
        status
            .down_since_ms
            .store(crate::clock::now_ms(), Ordering::SeqCst);
        let local = Local(shared.this());
        let thread_status = Arc::clone(&status);
        let started = std::thread::Builder::new()
            .name("goblin-replica".into())
            .spawn(move || link::run(config, thread_status, local));
        if let Err(e) = started {
            crate::log!(Warning, "can't start the replication link: {e}");
        }
        *following = Some(Following {
            host: host.to_string(),
            port,
            status,
        });
        self.active.store(true, Ordering::SeqCst);
        crate::log::set_replica(true);
        crate::config::inert::oom_score_role(true);
    }

    /// CLIENT KILL of the master's client: the link drops its connection to the master
    /// and connects again (continuing where it was, when the master can).
    pub fn drop_link(&self) {
        if let Some(f) = self.lock().as_ref() {
            f.status.drop.store(true, Ordering::SeqCst);
        }
    }

    /// Whether the link is up, applying its master's stream.
    pub fn connected(&self) -> bool {
        self.lock()
            .as_ref()
            .is_some_and(|f| f.status.state() == State::Connected)
    }

    /// A replica of this replica syncs: the link holds the stream (until [`Held`] is
    /// dropped), so that the instant of its snapshot is a point of the stream. `None`
    /// when there is no link.
    pub fn hold(&self) -> Option<Held> {
        let following = self.lock();
        let status = Arc::clone(&following.as_ref()?.status);
        status.hold.fetch_add(1, Ordering::SeqCst);
        Some(Held(status))
    }

    /// The database the stream had selected when the link was last held.
    pub fn selected_db(&self) -> Option<u16> {
        let following = self.lock();
        let f = following.as_ref()?;
        let db = f.status.selected.lock().ok()?.clone()?;
        std::str::from_utf8(&db).ok()?.parse().ok()
    }

    /// DEBUG SLEEP: while the server sleeps, its link does not connect again.
    pub fn freeze(&self, frozen: bool) {
        if let Some(f) = self.lock().as_ref() {
            f.status.frozen.store(frozen, Ordering::SeqCst);
        }
    }

    /// REPLICAOF NO ONE: the link ends; whether there was one.
    pub fn stop(&self) -> bool {
        let mut following = self.lock();
        self.active.store(false, Ordering::SeqCst);
        crate::log::set_replica(false);
        crate::config::inert::oom_score_role(false);
        match following.take() {
            Some(f) => {
                f.status.stop.store(true, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }
}

/// How long a plan waits for the link to hold its stream.
const HOLD_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// A plan's request that the link hold its stream (a save's instant on a replica,
/// REPLICAOF): asked once, then looked at, the plan parked on the clock between looks.
#[derive(Debug, Default)]
pub struct HoldRequest {
    held: Option<Held>,
    asked: Option<std::time::Instant>,
}

impl HoldRequest {
    /// Asks (the first time) and looks: `true` once the link holds, or once there is
    /// nothing to wait for (no link up, or `HOLD_LIMIT` passed: see [`Self::holds`]);
    /// `false`: look again a millisecond later.
    pub fn ready(&mut self, follow: &Follow) -> bool {
        let asked = *self.asked.get_or_insert_with(std::time::Instant::now);
        if self.held.is_none() {
            self.held = follow.hold();
        }
        self.holds() || !follow.connected() || asked.elapsed() >= HOLD_LIMIT
    }

    /// Whether the link holds now.
    pub fn holds(&self) -> bool {
        self.held.as_ref().is_some_and(Held::holds)
    }

    /// The link may go on.
    pub fn release(&mut self) {
        self.held = None;
    }
}

/// The link held (see [`Follow::hold`]) while this lives.
#[derive(Debug)]
pub struct Held(Arc<LinkStatus>);

impl Held {
    /// Whether the link holds the stream now: what it applied is all in this server's
    /// stream, and nothing else is being applied.
    pub fn holds(&self) -> bool {
        self.0.held.load(Ordering::SeqCst) && self.0.state() == State::Connected
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.hold.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The value of option `name` in the configuration in force, unless empty.
fn configured(shared: &Shared, name: &str) -> Option<String> {
    crate::config::inert::value(&shared.live().inert, name)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

/// The link's way into this server.
struct Local(Weak<Shared>);

impl link::Local for Local {
    fn connect(
        &self,
        master: Option<(std::net::SocketAddr, std::net::SocketAddr)>,
    ) -> std::io::Result<std::os::unix::net::UnixStream> {
        let shared = self
            .0
            .upgrade()
            .ok_or_else(|| std::io::Error::other("the server is gone"))?;
        let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
        theirs.set_nonblocking(true)?;
        let stream = Stream::Unix(mio::net::UnixStream::from_std(theirs));
        shared.connected_clients.fetch_add(1, Ordering::Relaxed);
        // (Shown as the master's connection, as redis-server shows its master client.)
        let origin = match master {
            Some((peer, local)) => Origin::Tcp {
                peer,
                local: Some(local),
            },
            None => Origin::None,
        };
        shared.peers[0].send(vec![Msg::AdoptMaster(stream, origin)]);
        Ok(ours)
    }

    fn synced(&self, replid: &str, offset: i64) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        // This server's history is its master's now: its replicas must sync again.
        shared.set_replication_id(replid.to_string());
        shared.repl.synced(offset);
        drop_replicas(&shared);
    }

    fn continued(&self, old: &str, new: &str) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        shared.repl.shift(old.to_string());
        shared.set_replication_id(new.to_string());
        // (They are told of the new id by syncing again, as redis-server tells them.)
        drop_replicas(&shared);
    }

    fn loading(&self) -> bool {
        self.0.upgrade().is_some_and(|s| s.persist.loading())
    }

    fn loaded_history(&self) -> Option<History> {
        self.0.upgrade()?.repl.take_loaded()
    }

    fn dial(&self) -> link::Dial {
        let Some(shared) = self.0.upgrade() else {
            return link::Dial::default();
        };
        link::Dial {
            user: configured(&shared, "masteruser"),
            pass: configured(&shared, "masterauth"),
            source: configured(&shared, "bind-source-addr").and_then(|a| a.parse().ok()),
            announce_ip: configured(&shared, "replica-announce-ip"),
            announce_port: configured(&shared, "replica-announce-port")
                .and_then(|p| p.parse().ok())
                .filter(|&p| p != 0),
        }
    }

    fn proxy(&self, bytes: &[u8]) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        shared.repl.append_proxied(bytes);
        for worker in shared.repl.appended() {
            shared.peers[worker].send(vec![Msg::ReplWake]);
        }
    }
}

/// Closes this server's replicas' connections: they sync again.
pub fn drop_replicas(shared: &Shared) {
    drop_replicas_but(shared, None);
}

/// [`drop_replicas`], but for the replica on `keep`.
pub fn drop_replicas_but(shared: &Shared, keep: Option<crate::runtime::msg::ConnRef>) {
    for worker in shared.repl.workers_with_replicas() {
        shared.peers[worker].send(vec![Msg::DropReplicas(keep)]);
    }
}
