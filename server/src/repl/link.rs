//! A replica's link to its master: redis-server 7.0's replica side of replication, as one
//! blocking thread (std sockets; no event loop).
//!
//! [`run`] repeats *sessions* until [`LinkStatus::stop`] is set. A session:
//! 1. connects: a non-blocking connect, polled, so that `stop` is seen while it waits;
//! 2. handshakes: `PING`, `AUTH`, `REPLCONF listening-port`, `REPLCONF capa eof capa
//!    psync2`, then `PSYNC ? -1` — or, when an earlier session left a cached master,
//!    `PSYNC <replid> <offset + 1>`, to which the master may answer `+CONTINUE`: the
//!    stream goes on from there (steps 3 and 4 are skipped);
//! 3. after `+FULLRESYNC`, receives the snapshot, `$<len>` or the diskless `$EOF:<mark>` form, in chunks into a
//!    temp file beside `rdb_path` (redis-server's `temp-<unixtime>.<pid>.rdb`), which it
//!    fsyncs and renames over `rdb_path`;
//! 4. has the local server load it: `DEBUG RELOAD NOSAVE` on a [`Local`] connection;
//! 5. applies the stream: each command the master sends is forwarded, bytes as received,
//!    to that same local connection, except `PING` and `REPLCONF GETACK`, which the link
//!    answers or skips itself.
//!
//! Any failure ends the session: it is logged with redis-server's text, the link is marked
//! down, and a new session starts about a second later (redis-server's `replicationCron`).
//!
//! **The cached master.** When the master's connection is lost while the stream is applied
//! (or the server drops it: CLIENT KILL of the master's client, [`LinkStatus::drop`]), the
//! link first waits for the local server to answer what was forwarded, so that the offset
//! applied is exact, then keeps the master's replication id, that offset and the database
//! the stream had selected (a [`Cached`] master). A transaction the stream had begun and
//! not ended is left out: the offset is the one before its `MULTI`, and closing the local
//! connection discards it, as redis-server's `replicationCacheMaster` does.
//!
//! **Offsets.** `read_offset` counts the stream's bytes decoded; `offset` the bytes
//! *applied*, which is what `REPLCONF ACK` reports. A forwarded command is applied when the
//! local server has answered it, so commands in flight wait in a FIFO, each with the offset
//! after it. A command that is not forwarded takes its turn in the same FIFO (consecutive
//! ones share a slot), so it counts only once everything before it is applied; a
//! `GETACK` is answered at that moment with the offset before it, as redis-server, which
//! applies commands one at a time, answers it.
//!
//! **Waiting.** One thread serves two sockets. The master's is blocking with a short read
//! timeout: 100 ms when nothing is owed by the local server, 2 ms while replies are
//! awaited, so that `stop` is seen promptly and the local replies are read soon. The local
//! one is non-blocking: bytes toward it are written as the socket accepts them, and the
//! master is no longer read while more than 4 MiB wait to be written, so memory stays
//! bounded by what the master actually sent.

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU8, AtomicU64, AtomicUsize, Ordering::Relaxed,
};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use goblin_protocol::{Decoded, Limits, RequestDecoder, parse_i64, reply_len};
use memchr::{memchr, memmem};
use nix::errno::Errno;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::master::History;
use crate::clock::now_ms;
use crate::log;
use crate::util::strerror;

/// Read timeout of the master's socket while nothing is owed by the local server: how
/// often `stop` and the repl-timeout are checked when the link is idle.
const POLL: Duration = Duration::from_millis(100);
/// Read timeout of the master's socket while local replies are awaited.
const BUSY_POLL: Duration = Duration::from_millis(2);
/// How often a connect in progress is checked.
const CONNECT_POLL: Duration = Duration::from_millis(10);
/// Pause between a failed session and the next.
const RETRY_DELAY: Duration = Duration::from_secs(1);
/// `REPLCONF ACK` period (redis-server's `replicationCron`).
const ACK_PERIOD: Duration = Duration::from_secs(1);
/// Most bytes one read takes from a socket.
const READ_CHUNK: usize = 64 * 1024;
/// Longest line accepted from the master (handshake replies, the snapshot's header).
const MAX_LINE: usize = 64 * 1024;
/// Bytes waiting to be written to the local server beyond which the master is not read.
const LOCAL_BACKLOG: usize = 4 * 1024 * 1024;
/// Length of a replication id and of the diskless snapshot's EOF mark.
const RUN_ID_LEN: usize = 40;
/// Room a buffer keeps once emptied; more is given back.
const KEEP_CAPACITY: usize = 1024 * 1024;
/// Distinct local error replies remembered (each is logged once).
const MAX_ERRORS_LOGGED: usize = 1024;
/// Longest error reply logged (redis-server's limit).
const MAX_ERROR_LEN: usize = 4096;
/// Longest command name kept for the log.
const NAME_LEN: usize = 24;

/// Where and how to reach the master.
#[derive(Clone)]
pub struct LinkConfig {
    /// The master's host name or address.
    pub host: String,
    /// The master's port.
    pub port: u16,
    /// This server's port, sent as `REPLCONF listening-port`.
    pub listening_port: u16,
    /// Where the received snapshot is stored (through a temp file beside it, renamed over
    /// it, like redis-server's `temp-<unixtime>.<pid>.rdb`).
    pub rdb_path: PathBuf,
    /// repl-timeout: no byte from the master for this long and the link is dropped and
    /// made again.
    pub timeout: Duration,
    /// The history this server holds when it starts following this master (it followed
    /// another, or was a master): the replication id, offset and selected database to
    /// ask the master to continue from, as redis-server's cached master.
    pub resume: Option<History>,
    /// This server was a master failing over to this one (FAILOVER): its PSYNC says
    /// `FAILOVER`, and the answer is told in [`LinkStatus::failover`].
    pub failover: bool,
}

/// Link states as INFO shows them (`master_link_status` is up only in `Connected`).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// No link (not a replica, or the link was stopped).
    None = 0,
    /// Must connect to the master.
    Connect = 1,
    /// Connecting to the master.
    Connecting = 2,
    /// Connected, handshaking.
    Handshake = 3,
    /// Receiving the snapshot.
    Transfer = 4,
    /// Applying the master's stream.
    Connected = 5,
}

/// The link's state, shared with the server (INFO and ROLE read it, REPLICAOF stops it).
#[derive(Debug, Default)]
pub struct LinkStatus {
    /// [`State`] as `u8`.
    pub state: AtomicU8,
    /// Set by the server (REPLICAOF NO ONE, another master): the thread ends promptly
    /// (within ~200 ms) and closes its sockets.
    pub stop: AtomicBool,
    /// The replication offset processed (applied locally): INFO's `slave_repl_offset`,
    /// and `master_repl_offset` on the replica.
    pub offset: AtomicI64,
    /// Bytes of the stream read (`slave_read_repl_offset`).
    pub read_offset: AtomicI64,
    /// Unix ms of the last byte from the master.
    pub last_io_ms: AtomicU64,
    /// Unix ms the link went down (0 while up, and before it was ever up).
    pub down_since_ms: AtomicU64,
    /// Size of the snapshot being received (-1 when unknown, the EOF format):
    /// `master_sync_total_bytes`.
    pub sync_total: AtomicI64,
    /// Bytes of the snapshot received so far.
    pub sync_read: AtomicI64,
    /// A snapshot is being received.
    pub sync_in_progress: AtomicBool,
    /// The master's replication id, from `+FULLRESYNC` (or a `+CONTINUE` that names a
    /// new one).
    pub replid: Mutex<String>,
    /// Set by the server (CLIENT KILL of the master's client): the link drops the
    /// master's connection, as if it were lost, and connects again.
    pub drop: AtomicBool,
    /// The server sleeps (DEBUG SLEEP): a link that is down does not connect again
    /// meanwhile, as redis-server's replication cron does not run.
    pub frozen: AtomicBool,
    /// Asked by the server (a replica of this replica syncs): the link stops applying
    /// the stream, outside a transaction, until asked no more ([`LinkStatus::held`]).
    pub hold: AtomicUsize,
    /// The link is held: it applies nothing, and the local server has answered all it
    /// was sent; what it applied is all in this server's stream.
    pub held: AtomicBool,
    /// The database the stream had selected when the link was last held.
    pub selected: Mutex<Option<Vec<u8>>>,
    /// FAILOVER's PSYNC ([`LinkConfig::failover`]): [`FAILOVER_ACCEPTED`] or
    /// [`FAILOVER_REJECTED`] once answered (0 before).
    pub failover: AtomicU8,
}

/// [`LinkStatus::failover`]: the new master continued (or fully resynced) the history.
pub const FAILOVER_ACCEPTED: u8 = 1;
/// [`LinkStatus::failover`]: the new master answered anything else.
pub const FAILOVER_REJECTED: u8 = 2;

impl LinkStatus {
    /// The master's replication id (empty before the first sync).
    pub fn master_replid(&self) -> String {
        self.replid.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The link's state.
    pub fn state(&self) -> State {
        match self.state.load(Relaxed) {
            1 => State::Connect,
            2 => State::Connecting,
            3 => State::Handshake,
            4 => State::Transfer,
            5 => State::Connected,
            _ => State::None,
        }
    }
}

/// The server the link applies the master's data to.
pub trait Local: Send + 'static {
    /// A new connection into this server whose commands are applied as the master's
    /// (writes allowed on a read-only replica). It replies to every command, RESP2, one
    /// reply per command, in order.
    ///
    /// `master` is the link's connection to the master (its peer's address and its own),
    /// which the local server shows as the master client's.
    ///
    /// # Errors
    /// When no connection can be made; the session fails and is retried.
    fn connect(&self, master: Option<(SocketAddr, SocketAddr)>) -> io::Result<UnixStream>;

    /// The snapshot of history `replid`, whose stream starts at `offset`, is loaded.
    fn synced(&self, replid: &str, offset: i64);

    /// The master continues with a new history `new` (`+CONTINUE <new>`): what was
    /// applied is also `old`'s.
    fn continued(&self, old: &str, new: &str);

    /// The master's bytes just applied, in order: this server's own stream.
    fn proxy(&self, bytes: &[u8]);

    /// The server is loading its files (the link waits: redis-server loads before it
    /// replicates).
    fn loading(&self) -> bool;

    /// The history (replication id, offset, selected database) the server's file
    /// recorded at start-up, to ask the master to continue: once.
    fn loaded_history(&self) -> Option<History>;

    /// How to connect, as configured now (read at each connection: a CONFIG SET counts
    /// from the next, as in redis-server).
    fn dial(&self) -> Dial;
}

/// How the link connects to its master, from the configuration in force.
#[derive(Clone, Debug, Default)]
pub struct Dial {
    /// `masteruser`: the user to `AUTH` as (only with a password).
    pub user: Option<String>,
    /// `masterauth`: the password to `AUTH` with.
    pub pass: Option<String>,
    /// `bind-source-addr`: the address the connection is made from (when it can be
    /// bound: redis-server's best effort).
    pub source: Option<std::net::IpAddr>,
    /// `replica-announce-ip`: the address the master is to list this replica at.
    pub announce_ip: Option<String>,
    /// `replica-announce-port` (when not 0): the port it is to list instead of this
    /// server's.
    pub announce_port: Option<u16>,
}

/// Runs the link until `status.stop` is set: connects, handshakes, receives the
/// snapshot, loads it, then applies the stream; on any failure logs it, marks the link
/// down, waits ~1 s and starts again (as redis-server's replicationCron reconnects).
pub fn run(config: LinkConfig, status: Arc<LinkStatus>, local: impl Local) {
    let mut errors = ErrorLog::default();
    while local.loading() && !stopped(&status) {
        thread::sleep(Duration::from_millis(20));
    }
    let resume = config.resume.clone().or_else(|| local.loaded_history());
    let mut cached = resume.map(|h| Cached {
        replid: h.replid,
        offset: h.offset,
        db: Some(h.db.to_string().into_bytes()),
    });
    set_state(&status, State::Connect);
    while !stopped(&status) {
        let end = session(&config, &status, &local, &mut errors, &mut cached);
        let was_connected = status.state() == State::Connected;
        if was_connected {
            log!(Warning, "Connection with master lost.");
        }
        if end == End::Stop {
            break;
        }
        mark_down(&status, was_connected);
        pause(&status, RETRY_DELAY);
    }
    status.sync_in_progress.store(false, Relaxed);
    set_state(&status, State::None);
}

/// Why a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// `stop` was set.
    Stop,
    /// A failure, already logged: retry.
    Down,
    /// The local connection failed (logged): what was forwarded may or may not have been
    /// applied, so no master is cached. Retry.
    LocalLost,
}

/// What an earlier session leaves for a partial resynchronization (see the module's doc).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Cached {
    /// The master's replication id.
    replid: String,
    /// The offset applied.
    offset: i64,
    /// The database the stream selected last (the argument of its last SELECT).
    db: Option<Vec<u8>>,
}

/// How the master answered PSYNC.
enum Sync {
    /// `+FULLRESYNC`: a snapshot follows; the stream starts at this offset.
    Full(i64),
    /// `+CONTINUE`: the stream goes on from the cached master's offset.
    Continue(Cached),
}

/// A step of a session: its value, or why the session ends.
type Step<T> = Result<T, End>;

fn stopped(status: &LinkStatus) -> bool {
    status.stop.load(Relaxed)
}

fn set_state(status: &LinkStatus, state: State) {
    status.state.store(state as u8, Relaxed);
}

/// The link is down: it must connect again. The time it went down is the time it was
/// lost, kept through failed attempts to make it again.
fn mark_down(status: &LinkStatus, was_connected: bool) {
    set_state(status, State::Connect);
    status.sync_in_progress.store(false, Relaxed);
    if was_connected {
        status.down_since_ms.store(now_ms(), Relaxed);
    }
}

/// Sleeps `total` (and while the server sleeps), or until `stop` is set.
fn pause(status: &LinkStatus, total: Duration) {
    let started = Instant::now();
    while !stopped(status) && (started.elapsed() < total || status.frozen.load(Relaxed)) {
        thread::sleep(Duration::from_millis(20));
    }
}

/// One session, from the connect to the failure or stop that ends it.
fn session(
    config: &LinkConfig,
    status: &LinkStatus,
    local: &impl Local,
    errors: &mut ErrorLog,
    cached: &mut Option<Cached>,
) -> End {
    match attempt(config, status, local, errors, cached) {
        Ok(never) => match never {},
        Err(end) => end,
    }
}

fn attempt(
    config: &LinkConfig,
    status: &LinkStatus,
    local: &impl Local,
    errors: &mut ErrorLog,
    cached: &mut Option<Cached>,
) -> Result<Infallible, End> {
    let dial = local.dial();
    let mut master = Master::connect(config, dial.source, status)?;
    set_state(status, State::Handshake);
    status.drop.store(false, Relaxed);
    let (conn, initial, db) =
        match handshake(&mut master, (config, &dial), status, local, cached.as_ref())? {
            Sync::Full(initial) => {
                *cached = None;
                let mut temp = TempRdb::create(&config.rdb_path)?;
                set_state(status, State::Transfer);
                status.sync_in_progress.store(true, Relaxed);
                let eof_mark = receive(&mut master, &mut temp, status)?;
                let conn = load(temp, &config.rdb_path, local, master.addresses(), status)?;
                local.synced(&status.master_replid(), initial);
                log!(Notice, "MASTER <-> REPLICA sync: Finished with success");
                connected(&mut master, status, initial, eof_mark)?;
                (conn, initial, None)
            }
            Sync::Continue(c) => {
                let conn = local_again(local, master.addresses())?;
                connected(&mut master, status, c.offset, false)?;
                (conn, c.offset, c.db)
            }
        };
    Stream::new(master, conn, local, initial, db, errors).run(cached)
}

// ---------------------------------------------------------------------------------------
// The master's connection.

/// What the link is doing, for the texts of failures (redis-server's differ by step).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Handshake,
    BulkCount,
    Payload,
    Stream,
}

/// The connection to the master: its socket, the bytes read and not consumed yet, and the
/// repl-timeout clock.
struct Master<'a> {
    stream: TcpStream,
    input: Queue,
    status: &'a LinkStatus,
    timeout: Duration,
    last_io: Instant,
    phase: Phase,
    /// The socket's current read timeout.
    wait: Duration,
}

impl<'a> Master<'a> {
    /// Connects to the master (as redis-server: the first address whose connect starts).
    fn connect(
        config: &LinkConfig,
        source: Option<std::net::IpAddr>,
        status: &'a LinkStatus,
    ) -> Step<Self> {
        set_state(status, State::Connecting);
        log!(
            Notice,
            "Connecting to MASTER {}:{}",
            config.host,
            config.port
        );
        let socket = match start_connect(&config.host, config.port, source) {
            Ok(socket) => socket,
            Err(e) => {
                log!(Warning, "Unable to connect to MASTER: {}", strerror(&e));
                return Err(End::Down);
            }
        };
        log!(Notice, "MASTER <-> REPLICA sync started");
        wait_connected(&socket, status, config.timeout)?;
        log!(Notice, "Non blocking connect for SYNC fired the event.");
        let stream = blocking_stream(socket).map_err(|e| {
            log!(
                Warning,
                "Error condition on socket for SYNC: {}",
                strerror(&e)
            );
            End::Down
        })?;
        Ok(Master {
            stream,
            input: Queue::default(),
            status,
            timeout: config.timeout,
            last_io: Instant::now(),
            phase: Phase::Handshake,
            wait: POLL,
        })
    }

    /// The connection's addresses: the master's and this end's.
    fn addresses(&self) -> Option<(SocketAddr, SocketAddr)> {
        Some((
            self.stream.peer_addr().ok()?,
            self.stream.local_addr().ok()?,
        ))
    }

    fn data(&self) -> &[u8] {
        self.input.data()
    }

    fn consume(&mut self, n: usize) {
        self.input.consume(n);
    }

    /// Reads what the master sent (one read) into the input: how many bytes came, 0 when
    /// none did within the read timeout.
    fn fill(&mut self) -> Step<usize> {
        if stopped(self.status) {
            return Err(End::Stop);
        }
        match self.input.read_from(&mut self.stream, READ_CHUNK) {
            Ok(0) => Err(self.lost("connection lost")),
            Ok(n) => {
                self.touch();
                Ok(n)
            }
            Err(e) if transient(&e) => {
                self.check_timeout()?;
                Ok(0)
            }
            Err(e) => Err(self.lost(&strerror(&e))),
        }
    }

    /// Something came from the master now.
    fn touch(&mut self) {
        self.last_io = Instant::now();
        self.status.last_io_ms.store(now_ms(), Relaxed);
    }

    /// Fails the session when nothing came from the master for repl-timeout.
    fn check_timeout(&self) -> Step<()> {
        if self.last_io.elapsed() <= self.timeout {
            return Ok(());
        }
        match self.phase {
            Phase::Handshake => log!(Warning, "Timeout connecting to the MASTER..."),
            Phase::BulkCount | Phase::Payload => log!(
                Warning,
                "Timeout receiving bulk data from MASTER... If the problem persists try to \
                 set the 'repl-timeout' parameter in redis.conf to a larger value."
            ),
            Phase::Stream => log!(Warning, "MASTER timeout: no data nor PING received..."),
        }
        Err(End::Down)
    }

    /// Logs that reading from the master failed (`detail`): the session ends.
    fn lost(&self, detail: &str) -> End {
        match self.phase {
            Phase::Handshake => {
                log!(
                    Warning,
                    "Master did not respond to command during SYNC handshake"
                )
            }
            Phase::BulkCount => {
                log!(
                    Warning,
                    "I/O error reading bulk count from MASTER: {detail}"
                )
            }
            Phase::Payload => log!(Warning, "I/O error trying to sync with MASTER: {detail}"),
            Phase::Stream => log!(Verbose, "Reading from MASTER: {detail}"),
        }
        End::Down
    }

    /// Sets the socket's read timeout (when it changes).
    fn set_wait(&mut self, wait: Duration) -> Step<()> {
        if wait != self.wait {
            if let Err(e) = self.stream.set_read_timeout(Some(wait)) {
                return Err(self.lost(&strerror(&e)));
            }
            self.wait = wait;
        }
        Ok(())
    }

    /// Writes `bytes` to the master, checking `stop` while the socket does not take them.
    fn send(&mut self, bytes: &[u8]) -> Step<()> {
        let started = Instant::now();
        let mut rest = bytes;
        while !rest.is_empty() {
            if stopped(self.status) {
                return Err(End::Stop);
            }
            match self.stream.write(rest) {
                Ok(0) => return Err(self.write_failed("connection lost")),
                Ok(n) => rest = rest.get(n..).unwrap_or_default(),
                Err(e) if transient(&e) && started.elapsed() <= self.timeout => {}
                Err(e) => return Err(self.write_failed(&strerror(&e))),
            }
        }
        Ok(())
    }

    fn write_failed(&self, detail: &str) -> End {
        if self.phase == Phase::Handshake {
            log!(
                Warning,
                "Sending command to master in replication handshake: {detail}"
            );
        } else {
            log!(Verbose, "Error writing to MASTER: {detail}");
        }
        End::Down
    }

    /// Sends a command and reads its one-line reply.
    fn call(&mut self, args: &[&[u8]]) -> Step<Vec<u8>> {
        self.send(&command(args))?;
        self.read_line()
    }

    /// The next line from the master, without its `\r\n`.
    fn read_line(&mut self) -> Step<Vec<u8>> {
        loop {
            if let Some(nl) = memchr(b'\n', self.data()) {
                let mut line = self.data()[..nl].to_vec();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                self.consume(nl + 1);
                return Ok(line);
            }
            if self.data().len() > MAX_LINE {
                log!(
                    Warning,
                    "Protocol error from MASTER: a line longer than {MAX_LINE} bytes"
                );
                return Err(End::Down);
            }
            self.fill()?;
        }
    }
}

/// Starts a non-blocking connect to the first address of `host` that takes one, from
/// `source` when the socket can be bound to it (else from any, as redis-server's
/// `anetTcpNonBlockBestEffortBindConnect`).
fn start_connect(host: &str, port: u16, source: Option<std::net::IpAddr>) -> io::Result<Socket> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address for the host");
    for addr in (host, port).to_socket_addrs()? {
        let bound = source.and_then(|ip| start_connect_to(addr, Some(ip)).ok());
        match bound.map_or_else(|| start_connect_to(addr, None), Ok) {
            Ok(socket) => return Ok(socket),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn start_connect_to(addr: SocketAddr, source: Option<std::net::IpAddr>) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if let Some(ip) = source {
        socket.bind(&SockAddr::from(SocketAddr::new(ip, 0)))?;
    }
    socket.set_nonblocking(true)?;
    match socket.connect(&SockAddr::from(addr)) {
        Ok(()) => Ok(socket),
        Err(e) if e.raw_os_error() == Some(Errno::EINPROGRESS as i32) => Ok(socket),
        Err(e) => Err(e),
    }
}

/// Waits for a connect in progress to complete, fail, time out or be stopped.
fn wait_connected(socket: &Socket, status: &LinkStatus, timeout: Duration) -> Step<()> {
    let started = Instant::now();
    loop {
        let error = socket.take_error().unwrap_or_else(Some);
        if let Some(e) = error {
            log!(
                Warning,
                "Error condition on socket for SYNC: {}",
                strerror(&e)
            );
            return Err(End::Down);
        }
        if socket.peer_addr().is_ok() {
            return Ok(());
        }
        if stopped(status) {
            return Err(End::Stop);
        }
        if started.elapsed() > timeout {
            log!(Warning, "Timeout connecting to the MASTER...");
            return Err(End::Down);
        }
        thread::sleep(CONNECT_POLL);
    }
}

/// The connected socket as a blocking stream with short timeouts.
fn blocking_stream(socket: Socket) -> io::Result<TcpStream> {
    socket.set_nonblocking(false)?;
    let stream = TcpStream::from(socket);
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(POLL))?;
    stream.set_write_timeout(Some(POLL))?;
    Ok(stream)
}

/// A read or write that may succeed if tried again.
fn transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// `args` as a RESP multibulk command.
fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// `REPLCONF ACK <offset>`.
fn ack_command(offset: i64) -> Vec<u8> {
    command(&[b"REPLCONF", b"ACK", offset.to_string().as_bytes()])
}

/// Bytes from the master, for the log.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

// ---------------------------------------------------------------------------------------
// The handshake.

/// The handshake, up to PSYNC's answer.
fn handshake(
    master: &mut Master<'_>,
    (config, dial): (&LinkConfig, &Dial),
    status: &LinkStatus,
    local: &impl Local,
    cached: Option<&Cached>,
) -> Step<Sync> {
    let pong = master.call(&[b"PING"])?;
    if !ping_accepted(&pong) {
        log!(
            Warning,
            "Error reply to PING from master: '{}'",
            text(&pong)
        );
        return Err(End::Down);
    }
    log!(
        Notice,
        "Master replied to PING, replication can continue..."
    );
    if let Some(pass) = &dial.pass {
        let mut args: Vec<&[u8]> = vec![b"AUTH"];
        if let Some(user) = &dial.user {
            args.push(user.as_bytes());
        }
        args.push(pass.as_bytes());
        let reply = master.call(&args)?;
        if reply.starts_with(b"-") {
            log!(Warning, "Unable to AUTH to MASTER: {}", text(&reply));
            return Err(End::Down);
        }
    }
    let port = dial
        .announce_port
        .unwrap_or(config.listening_port)
        .to_string();
    replconf(master, &[b"listening-port", port.as_bytes()])?;
    if let Some(ip) = &dial.announce_ip {
        replconf(master, &[b"ip-address", ip.as_bytes()])?;
    }
    replconf(master, &[b"capa", b"eof", b"capa", b"psync2"])?;
    let failover = config.failover && status.failover.load(Relaxed) == 0;
    let sync = psync(master, status, local, cached, failover);
    if failover {
        let outcome = match sync {
            Ok(_) => FAILOVER_ACCEPTED,
            Err(_) => FAILOVER_REJECTED,
        };
        status.failover.store(outcome, Relaxed);
    }
    sync
}

/// `REPLCONF <option> <value> …`; a master that refuses it is logged, not failed, as by
/// redis-server.
fn replconf(master: &mut Master<'_>, args: &[&[u8]]) -> Step<()> {
    let mut command: Vec<&[u8]> = vec![b"REPLCONF"];
    command.extend_from_slice(args);
    let reply = master.call(&command)?;
    if reply.starts_with(b"-") {
        log!(
            Notice,
            "(Non critical) Master does not understand REPLCONF {}: {}",
            String::from_utf8_lossy(args.first().copied().unwrap_or_default()),
            text(&reply)
        );
    }
    Ok(())
}

/// redis-server takes any status reply to PING, and the errors of a master that wants
/// authentication first.
fn ping_accepted(reply: &[u8]) -> bool {
    [
        &b"+"[..],
        b"-NOAUTH",
        b"-NOPERM",
        b"-ERR operation not permitted",
    ]
    .iter()
    .any(|prefix| reply.starts_with(prefix))
}

/// `PSYNC ? -1`, or `PSYNC <replid> <offset + 1>` with a cached master — followed by
/// `FAILOVER` when this server, a master, fails over to that one: how the master
/// answered.
fn psync(
    master: &mut Master<'_>,
    status: &LinkStatus,
    local: &impl Local,
    cached: Option<&Cached>,
    failover: bool,
) -> Step<Sync> {
    let next = cached.map(|c| (c.offset + 1).to_string());
    let mut args: Vec<&[u8]> = match (cached, &next) {
        (Some(c), Some(next)) => {
            log!(
                Notice,
                "Trying a partial resynchronization (request {}:{next}).",
                c.replid
            );
            vec![b"PSYNC", c.replid.as_bytes(), next.as_bytes()]
        }
        _ => {
            log!(
                Notice,
                "Partial resynchronization not possible (no cached master)"
            );
            vec![b"PSYNC", b"?", b"-1"]
        }
    };
    if failover {
        args.push(b"FAILOVER");
    }
    master.send(&command(&args))?;
    // The master may send newlines before its reply, to keep the link alive.
    let reply = loop {
        let line = master.read_line()?;
        if !line.is_empty() {
            break line;
        }
    };
    if reply.starts_with(b"+FULLRESYNC") {
        let Some((replid, offset)) = parse_fullresync(&reply) else {
            log!(Warning, "Master replied with wrong +FULLRESYNC syntax.");
            return Err(End::Down);
        };
        if cached.is_some() {
            log!(Notice, "Discarding previously cached master state.");
        }
        log!(Notice, "Full resync from master: {replid}:{offset}");
        set_replid(status, replid);
        return Ok(Sync::Full(offset));
    }
    if let (Some(c), Some(rest)) = (cached, reply.strip_prefix(b"+CONTINUE")) {
        log!(Notice, "Successful partial resynchronization with master.");
        let new = text(rest).trim().to_string();
        let mut c = c.clone();
        if new.len() == RUN_ID_LEN && new != c.replid {
            log!(Warning, "Master replication ID changed to {new}");
            local.continued(&c.replid, &new);
            c.replid.clone_from(&new);
            set_replid(status, new);
        }
        log!(
            Notice,
            "MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization."
        );
        return Ok(Sync::Continue(c));
    }
    if reply.starts_with(b"-NOMASTERLINK") || reply.starts_with(b"-LOADING") {
        log!(
            Notice,
            "Master is currently unable to PSYNC but should be in the future: {}",
            text(&reply)
        );
    } else if reply.starts_with(b"-ERR") {
        log!(
            Warning,
            "Master does not support PSYNC or is in error state (reply: {})",
            text(&reply)
        );
    } else {
        log!(
            Warning,
            "Unexpected reply to PSYNC from master: {}",
            text(&reply)
        );
    }
    Err(End::Down)
}

fn set_replid(status: &LinkStatus, replid: String) {
    *status
        .replid
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = replid;
}

/// `+FULLRESYNC <replid> <offset>`.
fn parse_fullresync(line: &[u8]) -> Option<(String, i64)> {
    let rest = line.strip_prefix(b"+FULLRESYNC ")?;
    let space = memchr(b' ', rest)?;
    let (replid, offset) = (&rest[..space], &rest[space + 1..]);
    if replid.len() != RUN_ID_LEN {
        return None;
    }
    let replid = std::str::from_utf8(replid).ok()?.to_owned();
    // (Far from the end of i64: the offsets of the stream after it add up.)
    let offset = parse_i64(offset).filter(|o| (0..i64::MAX / 2).contains(o))?;
    Some((replid, offset))
}

// ---------------------------------------------------------------------------------------
// The snapshot.

/// How the snapshot's end is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Payload {
    /// `$<len>`: this many bytes.
    Len(u64),
    /// `$EOF:<mark>`: the bytes up to this mark.
    Mark([u8; RUN_ID_LEN]),
}

/// Receives the snapshot into `temp`: whether it came in the EOF-mark form.
fn receive(master: &mut Master<'_>, temp: &mut TempRdb, status: &LinkStatus) -> Step<bool> {
    status.sync_total.store(-1, Relaxed);
    status.sync_read.store(0, Relaxed);
    master.phase = Phase::BulkCount;
    let payload = bulk_header(master)?;
    master.phase = Phase::Payload;
    match payload {
        Payload::Len(len) => {
            status.sync_total.store(len as i64, Relaxed);
            receive_len(master, temp, status, len)?;
        }
        Payload::Mark(mark) => receive_to_mark(master, temp, status, &mark)?,
    }
    Ok(matches!(payload, Payload::Mark(_)))
}

/// Reads the snapshot's header line, skipping the newlines a master sends to keep the
/// link alive while it prepares the snapshot.
fn bulk_header(master: &mut Master<'_>) -> Step<Payload> {
    let line = loop {
        let line = master.read_line()?;
        if !line.is_empty() {
            break line;
        }
    };
    if let Some(error) = line.strip_prefix(b"-") {
        log!(
            Warning,
            "MASTER aborted replication with an error: {}",
            text(error)
        );
        return Err(End::Down);
    }
    match parse_bulk_header(&line) {
        Some(Payload::Mark(mark)) => {
            log!(
                Notice,
                "MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to disk"
            );
            Ok(Payload::Mark(mark))
        }
        Some(Payload::Len(len)) => {
            log!(
                Notice,
                "MASTER <-> REPLICA sync: receiving {len} bytes from master to disk"
            );
            Ok(Payload::Len(len))
        }
        None => {
            log!(
                Warning,
                "Bad protocol from MASTER, the first byte is not '$' (we received '{}'), are \
                 you sure the host and port are right?",
                text(&line)
            );
            Err(End::Down)
        }
    }
}

/// `$EOF:<40 bytes>` or `$<len>`.
fn parse_bulk_header(line: &[u8]) -> Option<Payload> {
    let rest = line.strip_prefix(b"$")?;
    if let Some(mark) = rest.strip_prefix(b"EOF:")
        && let Some(mark) = mark.get(..RUN_ID_LEN)
    {
        let mut bytes = [0; RUN_ID_LEN];
        bytes.copy_from_slice(mark);
        return Some(Payload::Mark(bytes));
    }
    let len = parse_i64(rest)?;
    u64::try_from(len).ok().map(Payload::Len)
}

/// Moves `len` bytes from the master to `temp`, as they come.
fn receive_len(
    master: &mut Master<'_>,
    temp: &mut TempRdb,
    status: &LinkStatus,
    len: u64,
) -> Step<()> {
    let mut left = len;
    while left > 0 {
        if master.data().is_empty() {
            master.fill()?;
            continue;
        }
        let n = master
            .data()
            .len()
            .min(usize::try_from(left).unwrap_or(usize::MAX));
        temp.write(&master.data()[..n])?;
        master.consume(n);
        left -= n as u64;
        status.sync_read.fetch_add(n as i64, Relaxed);
    }
    Ok(())
}

/// Moves the master's bytes to `temp` up to `mark`, which is consumed and not written.
/// The last bytes read are held back until more come, as they may begin the mark.
fn receive_to_mark(
    master: &mut Master<'_>,
    temp: &mut TempRdb,
    status: &LinkStatus,
    mark: &[u8],
) -> Step<()> {
    loop {
        if let Some(at) = memmem::find(master.data(), mark) {
            temp.write(&master.data()[..at])?;
            master.consume(at + mark.len());
            status.sync_read.fetch_add(at as i64, Relaxed);
            return Ok(());
        }
        let safe = master.data().len().saturating_sub(mark.len() - 1);
        if safe > 0 {
            temp.write(&master.data()[..safe])?;
            master.consume(safe);
            status.sync_read.fetch_add(safe as i64, Relaxed);
        }
        master.fill()?;
    }
}

/// The temp file a snapshot is received into; removed unless installed.
struct TempRdb {
    path: PathBuf,
    file: File,
    installed: bool,
}

impl TempRdb {
    /// `temp-<unixtime>.<pid>.rdb` in `rdb_path`'s directory.
    fn create(rdb_path: &Path) -> Step<Self> {
        let name = format!("temp-{}.{}.rdb", now_ms() / 1000, std::process::id());
        let path = directory(rdb_path).join(name);
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => Ok(TempRdb {
                path,
                file,
                installed: false,
            }),
            Err(e) => {
                log!(
                    Warning,
                    "Opening the temp file needed for MASTER <-> REPLICA synchronization: {}",
                    strerror(&e)
                );
                Err(End::Down)
            }
        }
    }

    fn write(&mut self, bytes: &[u8]) -> Step<()> {
        self.file.write_all(bytes).map_err(|e| {
            log!(
                Warning,
                "Write error or short write writing to the DB dump file needed for MASTER <-> \
                 REPLICA synchronization: {}",
                strerror(&e)
            );
            End::Down
        })
    }

    /// Syncs the file, renames it over `rdb_path` and syncs the directory.
    fn install(mut self, rdb_path: &Path) -> Step<()> {
        if let Err(e) = self.file.sync_all() {
            log!(
                Warning,
                "Failed trying to sync the temp DB to disk in MASTER <-> REPLICA \
                 synchronization: {}",
                strerror(&e)
            );
            return Err(End::Down);
        }
        if let Err(e) = fs::rename(&self.path, rdb_path) {
            log!(
                Warning,
                "Failed trying to rename the temp DB into {} in MASTER <-> REPLICA \
                 synchronization: {}",
                rdb_path.display(),
                strerror(&e)
            );
            return Err(End::Down);
        }
        self.installed = true;
        let dir = directory(rdb_path);
        if let Err(e) = File::open(dir).and_then(|d| d.sync_all()) {
            log!(
                Warning,
                "Failed trying to sync DB directory {} in MASTER <-> REPLICA \
                 synchronization: {}",
                rdb_path.display(),
                strerror(&e)
            );
            return Err(End::Down);
        }
        Ok(())
    }
}

impl Drop for TempRdb {
    fn drop(&mut self) {
        if !self.installed {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// The directory `path` is in.
fn directory(path: &Path) -> &Path {
    path.parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

// ---------------------------------------------------------------------------------------
// Loading.

/// Installs the snapshot and has the local server load it: the local connection, kept
/// for the stream.
fn load(
    temp: TempRdb,
    rdb_path: &Path,
    local: &impl Local,
    master: Option<(SocketAddr, SocketAddr)>,
    status: &LinkStatus,
) -> Step<UnixStream> {
    log!(Notice, "MASTER <-> REPLICA sync: Flushing old data");
    log!(Notice, "MASTER <-> REPLICA sync: Loading DB in memory");
    temp.install(rdb_path)?;
    let result = match local.connect(master) {
        Ok(conn) => reload(conn, status),
        Err(e) => Err(format!("connecting to the local server: {}", strerror(&e))),
    };
    match result {
        Ok(Some(conn)) => Ok(conn),
        Ok(None) => Err(End::Stop),
        Err(detail) => {
            log!(Warning, "Loading the DB received from the master: {detail}");
            log!(
                Warning,
                "Failed trying to load the MASTER synchronization DB from disk"
            );
            Err(End::Down)
        }
    }
}

/// `DEBUG RELOAD NOSAVE` on `conn`, waiting for its reply however long loading takes (but
/// not past `stop`: `None`). The connection, made non-blocking, or what went wrong.
fn reload(mut conn: UnixStream, status: &LinkStatus) -> Result<Option<UnixStream>, String> {
    let io_error = |e: io::Error| strerror(&e);
    conn.set_read_timeout(Some(POLL)).map_err(io_error)?;
    conn.write_all(&command(&[b"DEBUG", b"RELOAD", b"NOSAVE"]))
        .map_err(io_error)?;
    let mut replies = Queue::default();
    loop {
        match reply_len(replies.data()) {
            Ok(Some((len, _))) if &replies.data()[..len] == b"+OK\r\n" => break,
            Ok(Some((len, _))) => {
                return Err(format!("reply {}", text(&replies.data()[..len]).trim_end()));
            }
            Ok(None) => {}
            Err(e) => return Err(e.to_string()),
        }
        if stopped(status) {
            return Ok(None);
        }
        match replies.read_from(&mut conn, 4096) {
            Ok(0) => return Err("the local server closed the connection".into()),
            Ok(_) => {}
            Err(e) if transient(&e) => {}
            Err(e) => return Err(strerror(&e)),
        }
    }
    conn.set_nonblocking(true).map_err(io_error)?;
    Ok(Some(conn))
}

/// A partial resynchronization: a new connection into the local server, for the stream
/// (non-blocking).
fn local_again(local: &impl Local, master: Option<(SocketAddr, SocketAddr)>) -> Step<UnixStream> {
    let conn = local
        .connect(master)
        .and_then(|conn| conn.set_nonblocking(true).map(|()| conn));
    conn.map_err(|e| local_lost(&strerror(&e)))
}

/// The snapshot is loaded (or the master continues the stream): the link is up, at
/// offset `initial`.
fn connected(master: &mut Master<'_>, status: &LinkStatus, initial: i64, eof: bool) -> Step<()> {
    status.offset.store(initial, Relaxed);
    status.read_offset.store(initial, Relaxed);
    status.sync_in_progress.store(false, Relaxed);
    status.down_since_ms.store(0, Relaxed);
    set_state(status, State::Connected);
    master.phase = Phase::Stream;
    master.touch();
    if eof {
        // A diskless master starts the stream at the replica's first ACK.
        master.send(&ack_command(initial))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The stream.

/// What a command of the stream waits for before its bytes count as applied.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// Forwarded: the local server's reply.
    Reply(CmdName),
    /// Not forwarded (PING, an empty frame): only its turn.
    Skip,
    /// `REPLCONF GETACK`: its turn, when it is answered with the offset before it.
    Ack,
}

/// A command (or, for [`Kind::Skip`], a run of them) in the FIFO of what is not applied
/// yet, with the stream offset after it.
#[derive(Debug)]
struct Pending {
    end: i64,
    kind: Kind,
}

/// A command's name, lowercased and cut short, for the log.
#[derive(Clone, Copy, Debug)]
struct CmdName {
    bytes: [u8; NAME_LEN],
    len: usize,
}

impl CmdName {
    fn new(name: &[u8]) -> Self {
        let len = name.len().min(NAME_LEN);
        let mut bytes = [0; NAME_LEN];
        bytes[..len].copy_from_slice(&name[..len]);
        bytes.make_ascii_lowercase();
        CmdName { bytes, len }
    }

    fn text(&self) -> String {
        text(&self.bytes[..self.len])
    }
}

/// The local error replies logged so far (each distinct one is logged once).
#[derive(Default)]
struct ErrorLog {
    seen: HashSet<Vec<u8>>,
}

impl ErrorLog {
    /// Whether `message` is logged for the first time.
    fn first(&mut self, message: &[u8]) -> bool {
        if self.seen.len() >= MAX_ERRORS_LOGGED {
            self.seen.clear();
        }
        self.seen.insert(message.to_vec())
    }
}

/// The connected link: applies the master's stream through the local connection.
struct Stream<'a> {
    master: Master<'a>,
    local: UnixStream,
    /// The server (its stream takes the bytes applied).
    server: &'a dyn Local,
    /// The bytes of the commands decoded and not published yet, as the master sent them.
    raw: Queue,
    /// The offset up to which the bytes applied are in the server's stream.
    published: i64,
    decoder: RequestDecoder,
    /// Bytes to write to the local server.
    to_local: Queue,
    /// Bytes the local server replied, not parsed yet.
    replies: Queue,
    pending: VecDeque<Pending>,
    /// The offset applied.
    applied: i64,
    /// The offset decoded.
    read: i64,
    last_ack: Instant,
    errors: &'a mut ErrorLog,
    /// The argument of the last SELECT decoded outside a transaction.
    selected: Option<Vec<u8>>,
    /// A transaction decoded and not ended: the offset before its MULTI, and the
    /// argument of a SELECT in it.
    multi: Option<(i64, Option<Vec<u8>>)>,
    /// The master is gone: the local replies are awaited, nothing is sent to it.
    draining: bool,
}

impl<'a> Stream<'a> {
    /// The stream from offset `initial` on, into `local`, after a SELECT of database `db`
    /// (a partial resynchronization's, whose stream goes on in that database).
    fn new(
        master: Master<'a>,
        local: UnixStream,
        server: &'a dyn Local,
        initial: i64,
        db: Option<Vec<u8>>,
        errors: &'a mut ErrorLog,
    ) -> Self {
        // The master is trusted as redis-server trusts it: no bulk length limit.
        let limits = Limits {
            max_bulk_len: usize::MAX / 4,
            max_multibulk_len: i32::MAX as usize,
            ..Limits::default()
        };
        Stream {
            master,
            local,
            server,
            raw: Queue::default(),
            published: initial,
            decoder: RequestDecoder::new(limits),
            to_local: Queue::default(),
            replies: Queue::default(),
            pending: VecDeque::new(),
            applied: initial,
            read: initial,
            last_ack: Instant::now(),
            errors,
            selected: None,
            multi: None,
            draining: false,
        }
        .selecting(db)
    }

    fn selecting(mut self, db: Option<Vec<u8>>) -> Self {
        if let Some(db) = db.filter(|db| db.as_slice() != b"0") {
            self.to_local.push(&command(&[b"SELECT", &db]));
            self.pending.push_back(Pending {
                end: self.applied,
                kind: Kind::Reply(CmdName::new(b"select")),
            });
            self.selected = Some(db);
        }
        self
    }

    /// Applies the stream until the session ends; when the master was lost (not the
    /// local server), leaves the master's state in `cached` once every command forwarded
    /// is answered.
    fn run(mut self, cached: &mut Option<Cached>) -> Result<Infallible, End> {
        let end = match self.serve() {
            Ok(never) => match never {},
            Err(end) => end,
        };
        self.master.status.held.store(false, Relaxed);
        if end == End::Down && self.drain().is_ok() {
            log!(Notice, "Caching the disconnected master state.");
            *cached = Some(Cached {
                replid: self.master.status.master_replid(),
                offset: self.settled(),
                db: self.selected.take(),
            });
        }
        Err(end)
    }

    /// Waits for the local server to answer every command forwarded (`repl-timeout` at
    /// most).
    fn drain(&mut self) -> Step<()> {
        self.draining = true;
        let started = Instant::now();
        self.settle()?;
        while !self.pending.is_empty() {
            if stopped(self.master.status) {
                return Err(End::Stop);
            }
            if started.elapsed() > self.master.timeout {
                return Err(local_lost("no reply to the commands applied"));
            }
            self.flush_local()?;
            self.read_local()?;
            if !self.pending.is_empty() {
                thread::sleep(Duration::from_millis(1));
            }
        }
        self.publish();
        Ok(())
    }

    fn serve(&mut self) -> Result<Infallible, End> {
        // Stream bytes may have come with the end of the snapshot.
        self.apply_input()?;
        loop {
            if self.master.status.drop.swap(false, Relaxed) {
                log!(Notice, "The master's client was killed: dropping the link.");
                return Err(End::Down);
            }
            self.hold_or_go_on()?;
            self.flush_local()?;
            self.read_local()?;
            if self.to_local.len() < LOCAL_BACKLOG {
                let busy = !self.pending.is_empty() || !self.to_local.is_empty();
                self.master.set_wait(if busy { BUSY_POLL } else { POLL })?;
                if self.master.fill()? > 0 {
                    self.apply_input()?;
                }
            } else {
                self.wait_for_local()?;
            }
            if self.last_ack.elapsed() >= ACK_PERIOD {
                self.master.send(&ack_command(self.applied))?;
                self.last_ack = Instant::now();
            }
        }
    }

    /// Holds the stream while the server asks (see [`LinkStatus::hold`]): says so once
    /// everything applied is answered; goes on with what came meanwhile when asked no
    /// more.
    fn hold_or_go_on(&mut self) -> Step<()> {
        let status = self.master.status;
        if stopped(status) {
            return Err(End::Stop);
        }
        if status.hold.load(Relaxed) > 0 {
            let idle = self.pending.is_empty() && self.to_local.is_empty() && self.multi.is_none();
            if idle {
                self.publish();
                if let Ok(mut db) = status.selected.lock() {
                    db.clone_from(&self.selected);
                }
            }
            status.held.store(idle, Relaxed);
        } else if status.held.swap(false, Relaxed) || !self.master.input.is_empty() {
            self.apply_input()?;
        }
        Ok(())
    }

    /// The local server is behind: the master is not read meanwhile, so its silence is
    /// not held against it.
    fn wait_for_local(&mut self) -> Step<()> {
        if stopped(self.master.status) {
            return Err(End::Stop);
        }
        self.master.last_io = Instant::now();
        thread::sleep(BUSY_POLL);
        Ok(())
    }

    /// Decodes the commands in the master's input: forwards them or takes them in hand.
    fn apply_input(&mut self) -> Step<()> {
        loop {
            if self.multi.is_none() && self.master.status.hold.load(Relaxed) > 0 {
                break;
            }
            let data = self.master.input.data_mut();
            let (n, kind) = match self.decoder.decode_cold(data) {
                Ok(Decoded::Incomplete) => break,
                Ok(Decoded::Empty(n)) => (n, Kind::Skip),
                Ok(Decoded::Command(n)) => {
                    let args = self.decoder.args();
                    let kind = classify(data, args);
                    if let Kind::Reply(name) = kind {
                        forward(&mut self.to_local, data, n, args);
                        let arg1 = args.get(1).and_then(|r| data.get(r.clone()));
                        track(&mut self.selected, &mut self.multi, name, arg1, self.read);
                    }
                    (n, kind)
                }
                Err(e) => {
                    log!(Warning, "Protocol error from MASTER: {e}");
                    return Err(End::Down);
                }
            };
            self.raw.push(&self.master.input.data()[..n]);
            self.master.consume(n);
            self.read += n as i64;
            self.enqueue(Pending {
                end: self.read,
                kind,
            });
        }
        self.decoder.shrink();
        self.master.status.read_offset.store(self.read, Relaxed);
        self.flush_local()?;
        self.settle()?;
        self.publish();
        Ok(())
    }

    fn enqueue(&mut self, entry: Pending) {
        if let Kind::Skip = entry.kind
            && let Some(last) = self.pending.back_mut()
            && let Kind::Skip = last.kind
        {
            last.end = entry.end;
            return;
        }
        self.pending.push_back(entry);
    }

    /// Applies the FIFO's entries that wait for no reply, up to the first that does.
    fn settle(&mut self) -> Step<()> {
        while let Some(&Pending { end, kind }) = self.pending.front() {
            match kind {
                Kind::Reply(_) => break,
                Kind::Ack if !self.draining => self.master.send(&ack_command(self.applied))?,
                Kind::Ack | Kind::Skip => {}
            }
            self.pending.pop_front();
            self.applied = end;
        }
        self.master.status.offset.store(self.applied, Relaxed);
        Ok(())
    }

    /// Writes what the local socket takes of the bytes waiting for it.
    fn flush_local(&mut self) -> Step<()> {
        while !self.to_local.is_empty() {
            match self.local.write(self.to_local.data()) {
                Ok(0) => return Err(local_lost("the connection was closed")),
                Ok(n) => self.to_local.consume(n),
                Err(e) if transient(&e) => break,
                Err(e) => return Err(local_lost(&strerror(&e))),
            }
        }
        Ok(())
    }

    /// Reads and takes the local server's replies.
    fn read_local(&mut self) -> Step<()> {
        loop {
            match self.replies.read_from(&mut self.local, READ_CHUNK) {
                Ok(0) => return Err(local_lost("the connection was closed")),
                Ok(_) => self.take_replies()?,
                Err(e) if transient(&e) => {
                    self.publish();
                    return Ok(());
                }
                Err(e) => return Err(local_lost(&strerror(&e))),
            }
        }
    }

    fn take_replies(&mut self) -> Step<()> {
        loop {
            match reply_len(self.replies.data()) {
                Ok(Some((len, is_error))) => {
                    if is_error {
                        self.log_error(len);
                    }
                    self.replies.consume(len);
                    self.answered()?;
                }
                Ok(None) => return Ok(()),
                Err(e) => return Err(local_lost(&format!("unreadable reply ({e})"))),
            }
        }
    }

    /// The offset applied outside a transaction: a transaction counts once its EXEC is
    /// applied (one cut short never does).
    fn settled(&self) -> i64 {
        match &self.multi {
            Some((before, _)) => self.applied.min(*before),
            None => self.applied,
        }
    }

    /// What was applied since the last call goes into the server's stream (up to
    /// [`Stream::settled`]).
    fn publish(&mut self) {
        let upto = self.settled();
        let n = usize::try_from(upto - self.published)
            .unwrap_or(0)
            .min(self.raw.len());
        if n > 0 {
            self.server.proxy(&self.raw.data()[..n]);
            self.raw.consume(n);
        }
        self.published = self.published.max(upto);
    }

    /// The command at the FIFO's front was answered.
    fn answered(&mut self) -> Step<()> {
        match self.pending.pop_front() {
            Some(Pending { end, .. }) => self.applied = end,
            None => log!(
                Debug,
                "A reply from the local server to no command of the master"
            ),
        }
        self.settle()
    }

    /// Logs the error reply of `len` bytes at the start of the replies (once per text).
    fn log_error(&mut self, len: usize) {
        let reply = &self.replies.data()[..len];
        let message = reply.get(1..len.saturating_sub(2)).unwrap_or_default();
        let message = &message[..message.len().min(MAX_ERROR_LEN)];
        if !self.errors.first(message) {
            return;
        }
        let name = match self.pending.front() {
            Some(Pending {
                kind: Kind::Reply(name),
                ..
            }) => name.text(),
            _ => "<unknown>".into(),
        };
        log!(
            Warning,
            "== CRITICAL == This replica is sending an error to its master: '{}' after \
             processing the command '{name}'",
            text(message)
        );
    }
}

fn local_lost(detail: &str) -> End {
    log!(
        Warning,
        "Lost the local connection applying the master's stream: {detail}"
    );
    End::LocalLost
}

/// Follows the database the stream selects and the transaction it is in, for the cached
/// master: `name` is a forwarded command's, `arg` its first argument, `before` the offset
/// before it.
fn track(
    selected: &mut Option<Vec<u8>>,
    multi: &mut Option<(i64, Option<Vec<u8>>)>,
    name: CmdName,
    arg: Option<&[u8]>,
    before: i64,
) {
    let name = &name.bytes[..name.len];
    match (name, multi.as_mut()) {
        (b"multi", None) => *multi = Some((before, None)),
        (b"select", Some((_, queued))) => *queued = arg.map(<[u8]>::to_vec),
        (b"select", None) => *selected = arg.map(<[u8]>::to_vec),
        (b"exec", Some(_)) => {
            if let Some((_, Some(db))) = multi.take() {
                *selected = Some(db);
            }
        }
        (b"discard", Some(_)) => *multi = None,
        _ => {}
    }
}

/// What the link does with a command of the stream.
fn classify(buf: &[u8], args: &[std::ops::Range<usize>]) -> Kind {
    let arg = |i: usize| args.get(i).and_then(|r| buf.get(r.clone()));
    match arg(0) {
        None => Kind::Skip,
        Some(name) if name.eq_ignore_ascii_case(b"PING") => Kind::Skip,
        Some(name)
            if name.eq_ignore_ascii_case(b"REPLCONF")
                && arg(1).is_some_and(|sub| sub.eq_ignore_ascii_case(b"GETACK")) =>
        {
            Kind::Ack
        }
        Some(name) => Kind::Reply(CmdName::new(name)),
    }
}

/// Queues the command of `n` bytes at the start of `buf` for the local server: its bytes
/// as received, or an inline command (whose bytes the decoder unescaped in place) as a
/// multibulk one.
fn forward(to_local: &mut Queue, buf: &[u8], n: usize, args: &[std::ops::Range<usize>]) {
    if buf.first() == Some(&b'*') {
        to_local.push(&buf[..n]);
    } else {
        let args: Vec<&[u8]> = args.iter().filter_map(|r| buf.get(r.clone())).collect();
        to_local.push(&command(&args));
    }
}

// ---------------------------------------------------------------------------------------

/// A byte queue: appended at the back, consumed from the front.
#[derive(Default)]
struct Queue {
    buf: Vec<u8>,
    start: usize,
}

impl Queue {
    fn data(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..]
    }

    fn len(&self) -> usize {
        self.buf.len() - self.start
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.buf.len());
        if self.start == self.buf.len() {
            self.start = 0;
            self.buf.clear();
            if self.buf.capacity() > KEEP_CAPACITY {
                self.buf = Vec::new();
            }
        }
    }

    /// Moves the data to the front once the consumed part is the larger.
    fn make_room(&mut self) {
        if self.start > 0 && self.start >= self.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        self.make_room();
        self.buf.extend_from_slice(bytes);
    }

    /// One read of at most `max` bytes from `from`, appended.
    fn read_from(&mut self, from: &mut impl Read, max: usize) -> io::Result<usize> {
        self.make_room();
        let old = self.buf.len();
        self.buf.resize(old + max, 0);
        let result = from.read(&mut self.buf[old..]);
        let got = result.as_ref().map_or(0, |&n| n.min(max));
        self.buf.truncate(old + got);
        result
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::sync::mpsc;
    use std::thread::JoinHandle;

    const REPLID: &str = "0123456789abcdef0123456789abcdef01234567";
    const MARK: &[u8; 40] = b"fedcba9876543210fedcba9876543210fedcba98";
    const SELECT: &[u8] = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n";
    const SET: &[u8] = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";
    const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
    const GETACK: &[u8] = b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n";
    const WAIT: Duration = Duration::from_secs(10);

    type Args = Vec<Vec<u8>>;

    /// The next command on `from` (its arguments and bytes); `None` at EOF or timeout.
    fn read_command(from: &mut impl Read, input: &mut Vec<u8>) -> Option<(Args, Vec<u8>)> {
        let mut decoder = RequestDecoder::default();
        loop {
            match decoder.decode(input).unwrap() {
                Decoded::Command(n) => {
                    let args = decoder.args().iter().map(|r| input[r.clone()].to_vec());
                    let args = args.collect();
                    return Some((args, input.drain(..n).collect()));
                }
                Decoded::Empty(n) => drop(input.drain(..n)),
                Decoded::Incomplete => {
                    let mut chunk = [0; 4096];
                    let n = from.read(&mut chunk).ok().filter(|&n| n > 0)?;
                    input.extend_from_slice(&chunk[..n]);
                }
            }
        }
    }

    fn strings(args: &[&str]) -> Args {
        args.iter().map(|a| a.as_bytes().to_vec()).collect()
    }

    /// The master's side of the handshake, up to `+FULLRESYNC`: the commands received.
    fn master_handshake(s: &mut TcpStream, input: &mut Vec<u8>, offset: i64) -> Vec<Args> {
        let mut seen = Vec::new();
        loop {
            let (args, _) = read_command(s, input).expect("a handshake command");
            let name = args[0].to_ascii_uppercase();
            seen.push(args);
            if name == b"PSYNC" {
                write!(s, "+FULLRESYNC {REPLID} {offset}\r\n").unwrap();
                return seen;
            }
            let reply: &[u8] = if name == b"PING" {
                b"+PONG\r\n"
            } else {
                b"+OK\r\n"
            };
            s.write_all(reply).unwrap();
        }
    }

    fn expected_handshake() -> Vec<Args> {
        vec![
            strings(&["PING"]),
            strings(&["AUTH", "repl", "secret"]),
            strings(&["REPLCONF", "listening-port", "6380"]),
            strings(&["REPLCONF", "capa", "eof", "capa", "psync2"]),
            strings(&["PSYNC", "?", "-1"]),
        ]
    }

    /// Reads `REPLCONF ACK <n>` from the link until `until` is acknowledged: all the
    /// offsets acknowledged.
    fn read_acks(s: &mut TcpStream, input: &mut Vec<u8>, until: i64) -> Vec<i64> {
        let mut acks = Vec::new();
        while acks.last() != Some(&until) {
            let (args, _) = read_command(s, input).expect("an ACK");
            assert_eq!(&args[..2], &strings(&["REPLCONF", "ACK"])[..]);
            acks.push(std::str::from_utf8(&args[2]).unwrap().parse().unwrap());
        }
        acks
    }

    /// A local server: each connection is handed to a thread that answers `+OK` to every
    /// command but SET, which it answers `set_reply` after `delay`, and returns the
    /// commands' bytes at EOF.
    struct FakeLocal(mpsc::Sender<UnixStream>);

    impl Local for FakeLocal {
        fn connect(&self, _master: Option<(SocketAddr, SocketAddr)>) -> io::Result<UnixStream> {
            let (ours, theirs) = UnixStream::pair()?;
            self.0.send(theirs).map_err(|_| io::Error::other("gone"))?;
            Ok(ours)
        }

        fn synced(&self, _replid: &str, _offset: i64) {}

        fn continued(&self, _old: &str, _new: &str) {}

        fn proxy(&self, _bytes: &[u8]) {}

        fn loading(&self) -> bool {
            false
        }

        fn loaded_history(&self) -> Option<History> {
            None
        }

        fn dial(&self) -> Dial {
            Dial {
                user: Some("repl".into()),
                pass: Some("secret".into()),
                ..Dial::default()
            }
        }
    }

    fn fake_local(
        delay: Duration,
        set_reply: &'static [u8],
    ) -> (FakeLocal, JoinHandle<Vec<Vec<u8>>>) {
        let (tx, rx) = mpsc::channel::<UnixStream>();
        let handle = thread::spawn(move || {
            let Ok(mut conn) = rx.recv_timeout(WAIT) else {
                return Vec::new();
            };
            conn.set_read_timeout(Some(WAIT)).unwrap();
            let (mut input, mut got) = (Vec::new(), Vec::new());
            while let Some((args, raw)) = read_command(&mut conn, &mut input) {
                let reply: &[u8] = if args[0] == b"SET" {
                    thread::sleep(delay);
                    set_reply
                } else {
                    b"+OK\r\n"
                };
                got.push(raw);
                if conn.write_all(reply).is_err() {
                    break;
                }
            }
            got
        });
        (FakeLocal(tx), handle)
    }

    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("goblin-link-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn config(port: u16, dir: &Path) -> LinkConfig {
        LinkConfig {
            host: "127.0.0.1".into(),
            port,
            listening_port: 6380,
            rdb_path: dir.join("dump.rdb"),
            timeout: Duration::from_secs(5),
            resume: None,
            failover: false,
        }
    }

    fn start(config: LinkConfig, local: impl Local) -> (Arc<LinkStatus>, JoinHandle<()>) {
        let status = Arc::new(LinkStatus::default());
        let shared = Arc::clone(&status);
        (status, thread::spawn(move || run(config, shared, local)))
    }

    fn wait_until(what: impl Fn() -> bool) -> bool {
        let started = Instant::now();
        while started.elapsed() < WAIT {
            if what() {
                return true;
            }
            thread::sleep(Duration::from_millis(5));
        }
        false
    }

    /// Sets `stop` and checks that `run` returns within a second.
    fn stop(status: &LinkStatus, link: JoinHandle<()>) {
        let started = Instant::now();
        status.stop.store(true, Relaxed);
        while !link.is_finished() {
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "run did not stop"
            );
            thread::sleep(Duration::from_millis(5));
        }
        link.join().unwrap();
        assert_eq!(status.state.load(Relaxed), State::None as u8);
    }

    /// Bytes that look like nothing in particular, and hold CRLFs and `$`s.
    fn payload(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| b"REDIS$\r\n0123"[i % 12] ^ (i / 12) as u8)
            .collect()
    }

    fn stream_bytes() -> Vec<u8> {
        [SELECT, SET, PING, GETACK].concat()
    }

    /// What the local server was sent: the load, then the stream's SELECT and SET.
    fn assert_applied(local: JoinHandle<Vec<Vec<u8>>>) {
        let want = vec![
            command(&[b"DEBUG", b"RELOAD", b"NOSAVE"]),
            SELECT.to_vec(),
            SET.to_vec(),
        ];
        assert_eq!(local.join().unwrap(), want);
    }

    #[test]
    fn full_sync_with_a_length_then_the_stream() {
        let dir = scratch_dir("len");
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let rdb = payload(300_000);
        let sent = rdb.clone();
        let (tx, rx) = mpsc::channel();
        let master = thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(WAIT)).unwrap();
            let mut input = Vec::new();
            let handshake = master_handshake(&mut s, &mut input, 0);
            s.write_all(b"\n").unwrap();
            thread::sleep(Duration::from_millis(20));
            write!(s, "${}\r\n", sent.len()).unwrap();
            s.write_all(&[&sent[..], &stream_bytes()].concat()).unwrap();
            let acks = read_acks(&mut s, &mut input, stream_bytes().len() as i64);
            tx.send((handshake, acks)).unwrap();
            while read_command(&mut s, &mut input).is_some() {}
        });
        let (local, local_thread) = fake_local(Duration::from_millis(300), b"+OK\r\n");
        let (status, link) = start(config(port, &dir), local);
        let total = stream_bytes().len() as i64;
        assert!(wait_until(|| status.offset.load(Relaxed) == total));
        assert_eq!(status.read_offset.load(Relaxed), total);
        assert_eq!(status.state.load(Relaxed), State::Connected as u8);
        assert_eq!(*status.replid.lock().unwrap(), REPLID);
        assert_eq!(status.sync_total.load(Relaxed), rdb.len() as i64);
        assert_eq!(status.sync_read.load(Relaxed), rdb.len() as i64);
        assert_eq!(fs::read(dir.join("dump.rdb")).unwrap(), rdb);
        let (handshake, acks) = rx.recv_timeout(WAIT).unwrap();
        stop(&status, link);
        master.join().unwrap();
        assert_eq!(handshake, expected_handshake());
        // GETACK is answered once everything before it is applied, with the offset
        // before it; the periodic ACKs report what was applied then.
        let before_getack = (SELECT.len() + SET.len() + PING.len()) as i64;
        assert!(acks.contains(&before_getack), "{acks:?}");
        let applied = [0, SELECT.len() as i64, before_getack, total];
        assert!(acks.iter().all(|a| applied.contains(a)), "{acks:?}");
        assert_applied(local_thread);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn full_sync_with_an_eof_mark_then_the_stream() {
        let dir = scratch_dir("eof");
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let rdb = payload(100_000);
        let sent = rdb.clone();
        let initial = 1000;
        let (tx, rx) = mpsc::channel();
        let master = thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(WAIT)).unwrap();
            let mut input = Vec::new();
            let handshake = master_handshake(&mut s, &mut input, initial);
            s.write_all(b"\n\n").unwrap();
            s.write_all(b"$EOF:").unwrap();
            s.write_all(&[&MARK[..], b"\r\n", &sent[..], &MARK[..15]].concat())
                .unwrap();
            thread::sleep(Duration::from_millis(50));
            s.write_all(&MARK[15..]).unwrap();
            // As redis-server, the stream starts at the replica's first ACK.
            let first = read_acks(&mut s, &mut input, initial);
            s.write_all(&stream_bytes()).unwrap();
            let acks = read_acks(&mut s, &mut input, initial + stream_bytes().len() as i64);
            tx.send((handshake, first, acks)).unwrap();
            while read_command(&mut s, &mut input).is_some() {}
        });
        // An error reply to a command of the master is logged, and counted as applied.
        let (local, local_thread) = fake_local(Duration::ZERO, b"-ERR wrong\r\n");
        let (status, link) = start(config(port, &dir), local);
        let total = initial + stream_bytes().len() as i64;
        assert!(wait_until(|| status.offset.load(Relaxed) == total));
        assert_eq!(status.sync_total.load(Relaxed), -1);
        assert_eq!(fs::read(dir.join("dump.rdb")).unwrap(), rdb);
        let (handshake, first, acks) = rx.recv_timeout(WAIT).unwrap();
        stop(&status, link);
        master.join().unwrap();
        assert_eq!(handshake, expected_handshake());
        assert_eq!(first, [initial]);
        let before_getack = initial + (SELECT.len() + SET.len() + PING.len()) as i64;
        assert!(acks.contains(&before_getack), "{acks:?}");
        assert_applied(local_thread);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_master_lost_mid_payload_is_connected_again() {
        let dir = scratch_dir("retry");
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(WAIT)).unwrap();
            let mut input = Vec::new();
            master_handshake(&mut s, &mut input, 0);
            s.write_all(b"$1000\r\n0123456789").unwrap();
            drop(s);
            let (second, _) = listener.accept().unwrap();
            let _ = tx.send(second);
        });
        let (local, _local_thread) = fake_local(Duration::ZERO, b"+OK\r\n");
        let (status, link) = start(config(port, &dir), local);
        let second = rx.recv_timeout(WAIT).expect("a second connection");
        // The partial snapshot was dropped, and nothing was installed.
        let left: Vec<_> = fs::read_dir(&dir).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(status.down_since_ms.load(Relaxed), 0);
        stop(&status, link);
        drop(second);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_error_to_psync_is_retried() {
        let dir = scratch_dir("psync");
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for _ in 0..2 {
                let (mut s, _) = listener.accept().unwrap();
                s.set_read_timeout(Some(WAIT)).unwrap();
                let mut input = Vec::new();
                for reply in [&b"+PONG\r\n"[..], b"+OK\r\n", b"+OK\r\n", b"+OK\r\n"] {
                    read_command(&mut s, &mut input).unwrap();
                    s.write_all(reply).unwrap();
                }
                let (psync, _) = read_command(&mut s, &mut input).unwrap();
                s.write_all(b"-LOADING Redis is loading the dataset in memory\r\n")
                    .unwrap();
                let _ = tx.send(psync);
            }
        });
        let (local, _local_thread) = fake_local(Duration::ZERO, b"+OK\r\n");
        let (status, link) = start(config(port, &dir), local);
        for _ in 0..2 {
            let psync = rx.recv_timeout(WAIT).expect("a PSYNC");
            assert_eq!(psync, strings(&["PSYNC", "?", "-1"]));
        }
        stop(&status, link);
        let _ = fs::remove_dir_all(&dir);
    }

    /// A local server of many connections: each is answered `+OK` to every command;
    /// what each was sent, by connection; the stream it was given, and the histories.
    struct Locals(
        mpsc::Sender<UnixStream>,
        Arc<Mutex<Vec<u8>>>,
        Arc<Mutex<Vec<String>>>,
    );

    impl Local for Locals {
        fn connect(&self, _master: Option<(SocketAddr, SocketAddr)>) -> io::Result<UnixStream> {
            let (ours, theirs) = UnixStream::pair()?;
            self.0.send(theirs).map_err(|_| io::Error::other("gone"))?;
            Ok(ours)
        }

        fn synced(&self, replid: &str, offset: i64) {
            self.2
                .lock()
                .unwrap()
                .push(format!("synced {replid} {offset}"));
        }

        fn continued(&self, old: &str, new: &str) {
            self.2
                .lock()
                .unwrap()
                .push(format!("continued {old} {new}"));
        }

        fn proxy(&self, bytes: &[u8]) {
            self.1.lock().unwrap().extend_from_slice(bytes);
        }

        fn loading(&self) -> bool {
            false
        }

        fn loaded_history(&self) -> Option<History> {
            None
        }

        fn dial(&self) -> Dial {
            Dial {
                user: Some("repl".into()),
                pass: Some("secret".into()),
                ..Dial::default()
            }
        }
    }

    /// The commands each local connection was sent, as sent.
    type Seen = Arc<Mutex<Vec<Vec<Vec<u8>>>>>;

    fn locals() -> (Locals, Seen) {
        let (tx, rx) = mpsc::channel::<UnixStream>();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let all = Arc::clone(&seen);
        thread::spawn(move || {
            while let Ok(mut conn) = rx.recv() {
                let seen = Arc::clone(&all);
                let i = {
                    let mut seen = seen.lock().unwrap();
                    seen.push(Vec::new());
                    seen.len() - 1
                };
                thread::spawn(move || {
                    let mut input = Vec::new();
                    while let Some((_, raw)) = read_command(&mut conn, &mut input) {
                        seen.lock().unwrap()[i].push(raw);
                        if conn.write_all(b"+OK\r\n").is_err() {
                            break;
                        }
                    }
                });
            }
        });
        (Locals(tx, Arc::default(), Arc::default()), seen)
    }

    /// A master lost while a transaction is half sent: the link waits for what it
    /// forwarded, keeps the offset before the MULTI and the database selected, and asks
    /// the master to continue from there; the stream goes on in that database.
    #[test]
    fn a_lost_master_is_continued_from_the_cached_offset() {
        const NEW_ID: &str = "ffffffffffffffffffffffffffffffffffffffff";
        let dir = scratch_dir("continue");
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let select4 = command(&[b"SELECT", b"4"]);
        let multi = command(&[b"MULTI"]);
        let set2 = command(&[b"SET", b"k2", b"v2"]);
        let cached = 100 + (select4.len() + SET.len()) as i64;
        let first = [&select4[..], SET, &multi, SET].concat();
        let after = [&set2[..], GETACK].concat();
        let end = cached + set2.len() as i64;
        let (tx, rx) = mpsc::channel();
        let master = thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(WAIT)).unwrap();
            let mut input = Vec::new();
            master_handshake(&mut s, &mut input, 100);
            s.write_all(b"$10\r\n0123456789").unwrap();
            s.write_all(&first).unwrap();
            thread::sleep(Duration::from_millis(300));
            drop(s);
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(WAIT)).unwrap();
            let mut input = Vec::new();
            let psync = loop {
                let (args, _) = read_command(&mut s, &mut input).unwrap();
                if args[0] == b"PSYNC" {
                    break args;
                }
                s.write_all(if args[0] == b"PING" {
                    b"+PONG\r\n"
                } else {
                    b"+OK\r\n"
                })
                .unwrap();
            };
            write!(s, "+CONTINUE {NEW_ID}\r\n").unwrap();
            s.write_all(&after).unwrap();
            let acks = read_acks(&mut s, &mut input, end);
            tx.send((psync, acks)).unwrap();
            while read_command(&mut s, &mut input).is_some() {}
        });
        let (local, seen) = locals();
        let (stream, histories) = (Arc::clone(&local.1), Arc::clone(&local.2));
        let (status, link) = start(config(port, &dir), local);
        let (psync, _acks) = rx.recv_timeout(WAIT).expect("a PSYNC and the ACKs");
        assert_eq!(
            psync,
            strings(&["PSYNC", REPLID, &(cached + 1).to_string()])
        );
        // (GETACK counts once answered.)
        let total = end + GETACK.len() as i64;
        assert!(wait_until(|| status.offset.load(Relaxed) == total));
        assert_eq!(*status.replid.lock().unwrap(), NEW_ID);
        stop(&status, link);
        master.join().unwrap();
        let seen = seen.lock().unwrap().clone();
        let reload = command(&[b"DEBUG", b"RELOAD", b"NOSAVE"]);
        assert_eq!(
            seen,
            vec![
                vec![reload, select4.clone(), SET.to_vec(), multi, SET.to_vec()],
                vec![select4.clone(), set2.clone()],
            ]
        );
        // The server's stream got the master's bytes as applied: the MULTI that was
        // cut short is not in it, and the stream goes on from the offset continued.
        let want = [&select4[..], SET, &set2, GETACK].concat();
        assert_eq!(*stream.lock().unwrap(), want);
        assert_eq!(
            *histories.lock().unwrap(),
            [
                format!("synced {REPLID} 100"),
                format!("continued {REPLID} {NEW_ID}")
            ]
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn tracks_the_database_and_the_transaction() {
        let name = |n: &[u8]| CmdName::new(n);
        let (mut selected, mut multi) = (None, None);
        track(&mut selected, &mut multi, name(b"SELECT"), Some(b"3"), 0);
        assert_eq!(selected.as_deref(), Some(&b"3"[..]));
        track(&mut selected, &mut multi, name(b"multi"), None, 10);
        track(&mut selected, &mut multi, name(b"select"), Some(b"5"), 20);
        assert_eq!(selected.as_deref(), Some(&b"3"[..]));
        assert_eq!(multi, Some((10, Some(b"5".to_vec()))));
        track(&mut selected, &mut multi, name(b"EXEC"), None, 30);
        assert_eq!(
            (selected.as_deref(), multi.clone()),
            (Some(&b"5"[..]), None)
        );
        track(&mut selected, &mut multi, name(b"MULTI"), None, 40);
        track(&mut selected, &mut multi, name(b"SELECT"), Some(b"7"), 50);
        track(&mut selected, &mut multi, name(b"DISCARD"), None, 60);
        assert_eq!((selected.as_deref(), multi), (Some(&b"5"[..]), None));
    }

    #[test]
    fn stop_ends_a_connect_attempt_and_an_idle_link() {
        // Nothing listens: the link retries until stopped.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let dir = scratch_dir("stop");
        let (local, _local_thread) = fake_local(Duration::ZERO, b"+OK\r\n");
        let (status, link) = start(config(port, &dir), local);
        thread::sleep(Duration::from_millis(300));
        stop(&status, link);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn headers() {
        let line = format!("+FULLRESYNC {REPLID} 42");
        assert_eq!(parse_fullresync(line.as_bytes()), Some((REPLID.into(), 42)));
        assert_eq!(parse_fullresync(b"+FULLRESYNC abc 42"), None);
        assert_eq!(parse_fullresync(b"+FULLRESYNC"), None);
        assert_eq!(parse_bulk_header(b"$12"), Some(Payload::Len(12)));
        assert_eq!(parse_bulk_header(b"$-1"), None);
        assert_eq!(parse_bulk_header(b"$EOF:short"), None);
        let eof = [&b"$EOF:"[..], MARK].concat();
        assert_eq!(parse_bulk_header(&eof), Some(Payload::Mark(*MARK)));
        assert_eq!(parse_bulk_header(b"+OK"), None);
        assert!(ping_accepted(b"+PONG") && ping_accepted(b"-NOAUTH Authentication required."));
        assert!(!ping_accepted(b"-ERR unknown command"));
    }

    #[test]
    fn classifies_commands() {
        let mut input = [SET, PING, GETACK, b"ping\r\n", b"replconf getack *\r\n"].concat();
        let mut decoder = RequestDecoder::default();
        let mut kinds = Vec::new();
        while let Ok(Decoded::Command(n)) = decoder.decode(&mut input) {
            kinds.push(classify(&input, decoder.args()));
            input.drain(..n);
        }
        assert!(matches!(
            kinds[..],
            [Kind::Reply(_), Kind::Skip, Kind::Ack, Kind::Skip, Kind::Ack]
        ));
        let Kind::Reply(name) = kinds[0] else {
            unreachable!()
        };
        assert_eq!(name.text(), "set");
    }
}
