//! A worker: one thread's event loop, its connections and its shard.
//!
//! # Threading rules
//!
//! - A worker owns, and alone touches: its `Poll`, its connections, its [`Shard`] (the
//!   keys of the slots it owns, with their lock table), and the transactions and
//!   keyspace-wide commands it coordinates for its connections. None of it is `Sync`;
//!   nothing is shared but the read-only [`Shared`] state and the peers' inboxes.
//! - Workers talk only by message ([`Msg`]): everything one worker has for another in one
//!   loop iteration travels as one `Vec<Msg>`, with at most one wake-up, and only when
//!   the receiver is (about to be) asleep.
//! - No worker ever blocks waiting for another: work that must wait (a reply from
//!   another shard, a lock, a key event) is parked and resumed by a later message.
//!
//! # One iteration
//!
//! 1. `poll` for readiness (not blocking if work is pending);
//! 2. read the clock once: every command the iteration starts uses that timestamp;
//! 3. serve ready connections: read, decode, route and run (`pipeline.rs`, which keeps
//!    the per-connection ordering contract);
//! 4. handle messages: batches to run here, replies coming back, transaction steps,
//!    parked plans' wake-ups;
//! 5. send this iteration's batches and messages, one `Vec` per destination;
//! 6. write each connection's output once; `WRITABLE` interest only after `WouldBlock`;
//! 7. expire keys actively, and time out parked plans whose deadline passed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::runtime::net::{Listener, Origin, Stream};
use crossbeam_channel::Receiver;
use goblin_protocol::Version;
use goblin_store::Millis;
use mio::{Events, Interest, Poll, Token};
use slab::Slab;

use crate::clock;
use crate::persist::snapshot::{SaveJob, SaveKind, SavePlan};
use crate::repl::master::Before;
use crate::runtime::client::Client;
use crate::runtime::conn::{Conn, ReadOutcome};
use crate::runtime::limits::{self, ClientClass};
use crate::runtime::msg::{Batch, ConnRef, Msg};
use crate::runtime::server::{Shared, TICK_CRON, TICK_IDLE, WAKER, listener_of, listener_token};
use crate::runtime::spin;
use crate::shard::{Outgoing, Shard};
use crate::txn::coordinator::{Env, TxJob};
use crate::txn::plan::Outcome;

/// Readiness events handled per `poll` call.
const EVENTS_CAPACITY: usize = 1024;
/// Reads from one connection per turn before the others are served.
const MAX_READS_PER_TURN: usize = 16;
/// Connections accepted per listener event before the loop serves the others.
const MAX_ACCEPTS_PER_TURN: usize = 256;
/// Emptied message vectors a worker keeps for its next outboxes ([`Worker::spare`]), and
/// the largest it keeps (a burst's vector is let go).
const SPARE_VECS: usize = 16;
const SPARE_CAPACITY: usize = 1024;
/// Reply bytes held for a connection (unsent output, and what its batches in flight may
/// bring back) above which its further requests wait for the client to read; high enough
/// that a client writing a large pipeline before reading still works, as it does with
/// redis-server.
pub(crate) const OUTPUT_HIGH_WATER: usize = 64 * 1024 * 1024;
/// Reply bytes a batch sent to another shard may bring back in one trip: past it the
/// owner sends what it has and keeps the rest until the client reads. Small replies
/// never come near it; a pipeline of GETs of large values is held back at the owner
/// instead of growing the server's memory.
pub(crate) const BATCH_REPLY_BUDGET: usize = 4 * 1024 * 1024;
/// Bytes a client blocked in a command may send before the server stops reading it
/// (it reads on, meanwhile, to see the client leave).
const BLOCKED_INPUT_MAX: usize = 1024 * 1024;
/// Replies held back while a connection waits for the rest of its pipeline are written
/// anyway once they pass this size.
const FLUSH_EARLY_ABOVE: usize = 64 * 1024;
/// How long a worker that awaits replies from other shards keeps looking for them before
/// it sleeps: about one cross-thread round trip when the other worker is busy.
const SPIN_WHILE_AWAITING: Duration = Duration::from_micros(50);
/// Keys actively expired per loop iteration at most: about 0.1–0.3 ms of work, so that a
/// mass expiry (a million keys with one TTL) never stalls the loop for long; the rest
/// goes on in the next iterations, which then do not sleep.
const EXPIRE_PER_ITERATION: usize = 1000;
/// Keys a shard evicts per loop iteration while memory is over `maxmemory`.
const EVICT_PER_ITERATION: usize = 64;
/// Most connections with an oversized idle output buffer a worker remembers in an
/// iteration ([`Worker::memory_work`] gives their room back before evicting).
const FAT_OUTPUTS_MAX: usize = 1024;
/// The most keys a command that may grow memory makes its shard evict before it runs
/// (over `maxmemory`).
pub(crate) const EVICT_PER_COMMAND: usize = 256;
/// How soon the acceptor looks at its listener again when it could not accept for want of
/// descriptors.
const ACCEPT_RETRY: Duration = Duration::from_millis(10);
/// Longest a worker sleeps waiting for a key to expire before it looks again.
const MAX_POLL_WAIT_MS: u64 = 1000;
/// Batches kept for reuse.
const BATCH_POOL: usize = 4096;
/// A pooled batch whose buffers grew past this is dropped instead of kept.
const BATCH_KEEP_BYTES: usize = 256 * 1024;

/// Keys of a background save's image a worker writes per loop iteration at most (plus
/// the rest of a slot: a slot is written whole), and bytes.
const SAVE_KEYS_PER_ITERATION: usize = 256;
const SAVE_BYTES_PER_ITERATION: usize = 64 << 10;
/// The longest `rdb-key-save-delay` that paces a background save (µs per key).
const MAX_SAVE_KEY_DELAY_US: i64 = 10_000;

/// Registers `listeners` with `registry`, each with its token.
fn register_listeners(registry: &mio::Registry, listeners: &mut [Listener]) -> io::Result<()> {
    for (i, l) in listeners.iter_mut().enumerate() {
        registry.register(l, listener_token(i), Interest::READABLE)?;
    }
    Ok(())
}

/// Protected mode (redis-server 7.0's rule): with `protected-mode yes` and no password,
/// clients from outside the loopback interface (and the Unix socket) are refused.
fn denied(config: &crate::config::Config, origin: &Origin) -> bool {
    config.protected_mode && config.requirepass.is_none() && !origin.is_local()
}

/// A connection just accepted, if it may stay: refused (and told why) from outside the
/// loopback interface in protected mode, or past `maxclients` (counted here, where every
/// connection passes, so that a burst cannot overshoot it before the workers adopt it).
pub(crate) fn admit(shared: &Shared, mut stream: Stream, origin: &Origin) -> Option<Stream> {
    use std::io::Write as _;
    if denied(&shared.live(), origin) {
        let _ = stream.write(crate::errors::DENIED);
        return None;
    }
    let connected = &shared.connected_clients;
    if connected.fetch_add(1, Ordering::Relaxed) >= shared.live().maxclients {
        connected.fetch_sub(1, Ordering::Relaxed);
        shared.rejected_connections.fetch_add(1, Ordering::Relaxed);
        let _ = stream.write(crate::errors::MAX_CLIENTS);
        return None;
    }
    Some(stream)
}

/// A connection over an accepted `stream`, its socket set up as redis-server sets its
/// own.
pub(crate) fn new_conn(
    shared: &Shared,
    stream: Stream,
    origin: Origin,
    now: Millis,
    generation: u64,
) -> Conn {
    stream.set_up(shared.live().tcp_keepalive);
    receive_times(&stream);
    let client = Client::new(
        shared.new_client_id(),
        origin,
        now,
        shared.acl.default_user(),
    );
    // (`serve` brings the decoder's limits up to the live ones.)
    Conn::new(stream, client, shared.config.limits, generation)
}

/// `target`, or the next worker whose script is not busy if its is (while one is not).
fn not_busy(shared: &Shared, target: usize) -> usize {
    let busy = |t: usize| {
        shared
            .busy_workers
            .get(t)
            .is_some_and(|b| b.load(Ordering::Relaxed))
    };
    if !busy(target) {
        return target;
    }
    (1..shared.threads)
        .map(|i| (target + i) % shared.threads)
        .find(|&t| !busy(t))
        .unwrap_or(target)
}

/// Has the kernel note when each packet of `stream` arrives (`SO_TIMESTAMPNS`), which
/// each read returns (`Input::read_from`).
///
/// Blocked clients are served in the order their commands came (`shard/park.rs`), as
/// redis-server, one thread reading sockets in the order they became ready, serves
/// them. When a thread reads a command is no measure of that: a thread woken by it, or
/// busy, or off its core, reads it tens of µs or more after it came, after another
/// thread may have read a later client's.
pub(crate) fn receive_times(stream: &impl std::os::fd::AsFd) {
    use nix::sys::socket::{setsockopt, sockopt::ReceiveTimestampns};
    let _ = setsockopt(stream, ReceiveTimestampns, &true);
}

/// A socket that asks for receive times for as long as the process lives.
static STAMPING: std::sync::OnceLock<std::net::UdpSocket> = std::sync::OnceLock::new();

/// Makes sure the kernel stamps every packet from now on, before the first client comes.
/// It stamps while some socket on the machine asks for receive times, and starts a moment
/// after the first one asks (the switch is flipped by deferred work); when the last one
/// closes it stops. A client's bytes unstamped in such a window took the thread's clock
/// as their turn, later than a stamped client's that came after them, which was then
/// served first (a BRPOPLPUSH test failed about one run in 20 at `--threads 1` while
/// other servers started and stopped). So a socket of the server's own asks for them
/// for its whole life, and start-up waits (up to 200 ms) until one of its datagrams
/// comes back stamped.
pub(crate) fn hold_receive_times() {
    let Ok(socket) = std::net::UdpSocket::bind("127.0.0.1:0") else {
        return;
    };
    receive_times(&socket);
    let (Ok(addr), Ok(())) = (socket.local_addr(), socket.set_nonblocking(true)) else {
        return;
    };
    let mut input = crate::runtime::conn::Input::new(goblin_protocol::Limits::default());
    for _ in 0..200 {
        let _ = socket.send_to(b"t", addr);
        std::thread::sleep(Duration::from_millis(1));
        if input.read_from(&socket).is_ok() && input.arrived.is_some() {
            break;
        }
        input.consume(input.pending());
    }
    let _ = STAMPING.set(socket);
}

/// One thread's event loop.
pub struct Worker {
    pub(crate) id: usize,
    poll: Poll,
    inbox: Receiver<Vec<Msg>>,
    /// The listeners (one per `bind` address), on the worker that accepts connections.
    pub(crate) listeners: Vec<Listener>,
    next_target: usize,
    pub(crate) conns: Slab<Conn>,
    pub(crate) next_gen: u64,
    pub(crate) shard: Shard,
    pub(crate) shared: Arc<Shared>,
    pub(crate) now: Millis,
    /// Connections with replies to write this iteration.
    dirty: Vec<usize>,
    /// Connections with work left over for the next iteration.
    pub(crate) scheduled: Vec<usize>,
    /// Connections with a batch gathered this iteration.
    pub(crate) opened: Vec<usize>,
    /// Questions of connections (CLIENT LIST, CLIENT KILL …) to answer once the input
    /// this worker has seen is served (`Worker::answer_questions`).
    pub(crate) questions: Vec<crate::runtime::conn::Question>,
    /// Batches sent to other shards (`Msg::Run`) so far, and those back (`Msg::Done`).
    pub(crate) runs_out: u64,
    pub(crate) runs_back: u64,
    /// Messages for each worker, sent at the end of the iteration.
    outbox: Vec<Vec<Msg>>,
    /// Message vectors received and emptied, kept to be the next outboxes: vectors go
    /// back and forth between workers instead of being allocated for every exchange.
    spare: Vec<Vec<Msg>>,
    /// Messages for this worker itself.
    local: VecDeque<Msg>,
    /// Transactions this worker coordinates for its connections, by sequence number.
    pub(crate) jobs: HashMap<u64, Box<TxJob>, foldhash::fast::RandomState>,
    pub(crate) next_job: u64,
    /// Deadlines of parked jobs (a job re-parked or finished leaves a stale entry, which
    /// is skipped).
    pub(crate) deadlines: BinaryHeap<Reverse<(Instant, u64)>>,
    /// Boxed because batches travel between threads as boxes.
    #[allow(clippy::vec_box)]
    pool: Vec<Box<Batch>>,
    pub(crate) commands: u64,
    /// Messages sent to other workers whose answer has not come back yet.
    awaiting: usize,
    /// Worker 0 began the rewrite that starts the log (`Persist::log_start` stays set
    /// until the rewrite's instant).
    log_start_asked: bool,
    /// The background save this shard's image goes to.
    save_job: Option<Arc<SaveJob>>,
    /// With `rdb-key-save-delay`: when the background save's keys written so far were
    /// due (the next is due a delay later).
    save_paced: Option<Instant>,
    /// The replication offset this worker last had replicas told of.
    repl_seen: i64,
    /// When the replicas were last sent a PING.
    last_repl_ping: Instant,
    /// The last run of [`Worker::cron`].
    last_cron: Instant,
    /// The last look for idle clients ([`Worker::close_idle`]).
    last_idle_check: Instant,
    /// When its clients' query buffers are next resized (ms).
    next_inputs_look: u64,
    /// When its clients' buffers are next measured (ms).
    next_clients_look: u64,
    /// Its replicas' connections, for what they hold (`measure_replicas`).
    replica_keys: Vec<usize>,
    /// What they held at the last look (`memory::replicas_hold`).
    replicas_mem: u64,
    /// Connections whose output buffer, written, kept more room than an idle one needs:
    /// given back before keys are evicted (`memory_work`); forgotten otherwise.
    fat_outputs: Vec<usize>,
    /// The shutdown a signal asked for has started (worker 0).
    shutting_down: bool,
    /// On the acceptor: a descriptor kept open to be given up when the process has no
    /// other, so that a client can still be accepted and told it is refused.
    spare_fd: Option<std::fs::File>,
    /// The acceptor found no descriptor even for that: look at the listener again soon.
    accept_retry: bool,
    /// When running out of descriptors was last logged.
    last_fd_warning: Option<Instant>,
    /// Connections whose next command waits for CLIENT PAUSE to end.
    pub(crate) paused: Vec<usize>,
    /// This worker's connections' Pub/Sub subscriptions.
    pub(crate) subs: crate::runtime::pubsub::Local,
    /// The tracking client the command being dispatched runs for (CLIENT TRACKING).
    pub(crate) cmd_tracked: Option<crate::runtime::tracking::Tracked>,
    /// When the requests being run came, if their read asked (`Input::arrived`).
    pub(crate) arrived: Option<u64>,
    /// The command just dispatched was held back (`Worker::hold_back`): its request is
    /// kept in the input.
    pub(crate) held_back: bool,
    /// Bytes read from and written to clients, and batches and steps sent to other
    /// shards: this worker's running totals, stored in `Shared::traffic` at the end of
    /// an iteration that changed them.
    net_in: u64,
    net_out: u64,
    hops: u64,
    /// Socket reads and writes, active expiry's microseconds and budget-capped
    /// iterations: [`Traffic`]'s.
    net_reads: u64,
    net_writes: u64,
    expire_us: u64,
    expire_capped: u64,
    /// They changed this iteration.
    traffic_changed: bool,
    /// Whether looking for work before sleeping has paid lately.
    spin: spin::Spin,
    /// The same account for the longer look while a transaction's step is due.
    expect_spin: spin::Spin,
    /// Of `awaiting`, transaction steps (`Msg::Step`).
    awaiting_steps: usize,
    /// Cluster mode: the version of the routes the parked jobs were last checked against.
    parked_routes: u64,
    /// Cluster mode, worker 0: the version of the routes its role was last compared with
    /// (see [`Worker::follow_cluster_role`]).
    role_routes: u64,
    /// The `maxmemory-clients` limit its clients were last weighed under (0: none;
    /// `runtime/client_eviction.rs`).
    pub(crate) clients_limit: u64,
}

/// Whether `conn`'s pending replies passed its class's output limit
/// (`client-output-buffer-limit`) at `now`.
#[inline]
fn output_over(limits: &limits::ClientLimits, conn: &mut Conn, now: Millis) -> bool {
    if conn.output.pending() == 0 || conn.gone {
        return false;
    }
    let class = if conn.client.subs.active() {
        ClientClass::Pubsub
    } else {
        ClientClass::Normal
    };
    limits.output_limit(class).is_some_and(|limit| {
        limits::output_over(limit, conn.output.pending(), &mut conn.soft_since, now)
    })
}

/// `accept` errors: the process, or the system, has no descriptor left.
const EMFILE: i32 = 24;
const ENFILE: i32 = 23;

/// Whether job `job` (a connection's, if any) waits for a key event: a client blocked in
/// a command.
fn parked(jobs: &HashMap<u64, Box<TxJob>, foldhash::fast::RandomState>, job: Option<u64>) -> bool {
    job.and_then(|seq| jobs.get(&seq))
        .is_some_and(|job| job.parked_state().0)
}

impl Worker {
    /// Worker `id`; `listeners` are given to the one that accepts connections.
    ///
    /// # Errors
    /// When a listener cannot be registered.
    pub fn new(
        id: usize,
        shared: Arc<Shared>,
        poll: Poll,
        inbox: Receiver<Vec<Msg>>,
        mut listeners: Vec<Listener>,
    ) -> io::Result<Self> {
        register_listeners(poll.registry(), &mut listeners)?;
        let threads = shared.threads;
        let spare = (!listeners.is_empty())
            .then(|| std::fs::File::open("/dev/null").ok())
            .flatten();
        let mut shard = Shard::new(
            id,
            Arc::clone(&shared.slots),
            shared.commands.all().len(),
            shared.config.databases,
        );
        shard.cluster = shared.cluster.clone();
        // (With the log on and nothing to load, the shard feeds it from the start.)
        shard.feed_backlog(&shared);
        Ok(Worker {
            id,
            poll,
            inbox,
            listeners,
            next_target: 0,
            conns: Slab::new(),
            next_gen: 0,
            shard,
            shared,
            now: clock::now_ms(),
            dirty: Vec::new(),
            scheduled: Vec::new(),
            opened: Vec::new(),
            questions: Vec::new(),
            runs_out: 0,
            runs_back: 0,
            outbox: (0..threads).map(|_| Vec::new()).collect(),
            spare: Vec::new(),
            local: VecDeque::new(),
            jobs: HashMap::default(),
            next_job: 0,
            deadlines: BinaryHeap::new(),
            pool: Vec::new(),
            commands: 0,
            awaiting: 0,
            log_start_asked: false,
            save_job: None,
            save_paced: None,
            last_repl_ping: Instant::now(),
            repl_seen: 0,
            last_cron: Instant::now(),
            last_idle_check: Instant::now(),
            next_inputs_look: 0,
            next_clients_look: 0,
            replica_keys: Vec::new(),
            replicas_mem: 0,
            fat_outputs: Vec::new(),
            shutting_down: false,
            spare_fd: spare,
            accept_retry: false,
            paused: Vec::new(),
            subs: Default::default(),
            cmd_tracked: None,
            arrived: None,
            held_back: false,
            net_in: 0,
            net_out: 0,
            hops: 0,
            net_reads: 0,
            net_writes: 0,
            expire_us: 0,
            expire_capped: 0,
            traffic_changed: false,
            spin: spin::Spin::default(),
            expect_spin: spin::Spin::default(),
            awaiting_steps: 0,
            parked_routes: 0,
            role_routes: u64::MAX,
            clients_limit: 0,
            last_fd_warning: None,
        })
    }

    /// Runs the loop forever.
    ///
    /// # Errors
    /// When polling fails.
    pub fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(EVENTS_CAPACITY);
        loop {
            self.sleep(&mut events)?;
            self.now = clock::now_ms();
            for event in events.iter() {
                match event.token() {
                    WAKER => {}
                    token if listener_of(token).is_some() => self.accept(),
                    Token(key) => {
                        let Some(conn) = self.conns.get_mut(key) else {
                            continue;
                        };
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            conn.readable = true;
                        }
                        if event.is_read_closed() || event.is_error() {
                            // Read to the end: a short read is no sign of a drained socket
                            // once the peer has closed (no further event will come).
                            conn.read_to_end = true;
                        }
                        self.catch_up();
                        self.serve(key);
                    }
                }
            }
            if !self.listeners.is_empty() {
                self.take_new_listener();
            }
            if std::mem::take(&mut self.accept_retry) {
                self.accept();
            }
            self.release_paused();
            let mut scheduled = std::mem::take(&mut self.scheduled);
            for key in scheduled.drain(..) {
                if let Some(conn) = self.conns.get_mut(key) {
                    conn.scheduled = false;
                    self.catch_up();
                    self.serve(key);
                }
            }
            crate::util::reuse(&mut self.scheduled, scheduled);
            self.answer_questions();
            // Expiry first: what it wakes (a claim's waiter) is routed, sent and answered
            // in this iteration, not after the next event.
            self.expire_keys();
            // Clients before keys, as Redis evicts them.
            self.client_eviction_work();
            self.memory_work();
            self.shard.limit_tracking(&self.shared);
            self.save_work();
            self.send_snapshots();
            if self.id == 0 {
                self.start_log_if_asked();
                self.failover_work();
                self.follow_cluster_role();
                self.cron();
            }
            self.close_idle();
            self.resize_inputs();
            self.measure_clients();
            self.drain();
            self.time_out_parked();
            self.redirect_parked();
            self.send_all();
            self.flush_all();
            if self.commands > 0 {
                self.shared
                    .total_commands
                    .fetch_add(self.commands, Ordering::Relaxed);
                self.commands = 0;
            }
            if self.traffic_changed {
                self.traffic_changed = false;
                if let Some(t) = self.shared.traffic.get(self.id) {
                    if t.reset.swap(false, Ordering::Relaxed) {
                        (self.net_in, self.net_out, self.hops) = (0, 0, 0);
                        (self.net_reads, self.net_writes) = (0, 0);
                        (self.expire_us, self.expire_capped) = (0, 0);
                    }
                    t.input.store(self.net_in, Ordering::Relaxed);
                    t.output.store(self.net_out, Ordering::Relaxed);
                    t.hops.store(self.hops, Ordering::Relaxed);
                    t.reads.store(self.net_reads, Ordering::Relaxed);
                    t.writes.store(self.net_writes, Ordering::Relaxed);
                    t.expire_us.store(self.expire_us, Ordering::Relaxed);
                    t.expire_capped.store(self.expire_capped, Ordering::Relaxed);
                }
            }
            let writes = self.shard.take_writes();
            if writes > 0 {
                self.shared
                    .persist
                    .dirty
                    .fetch_add(writes, Ordering::Relaxed);
            }
        }
    }

    /// Whether keys expire actively here: not after DEBUG SET-ACTIVE-EXPIRE 0, nor on
    /// a read-only replica (a writable one expires the keys its clients write, and,
    /// unlike redis-server, its master's too).
    fn expires_actively(&self) -> bool {
        self.shared.active_expire.load(Ordering::Relaxed)
            && !(self.shared.follow.active.load(Ordering::Relaxed)
                && self.shared.replica_read_only())
    }

    /// Active expiry: removes due keys, at most [`EXPIRE_PER_ITERATION`] per iteration.
    /// Skipped while transactions hold or want locks here, so that no key a transaction
    /// is working on vanishes under it (lazy expiry, with the transaction's own clock,
    /// still applies).
    fn expire_keys(&mut self) {
        if !self.shard.quiet() {
            return;
        }
        let now = clock::now_ms();
        // CLIENT PAUSE: keys do not expire actively meanwhile (as in Redis 7.0); nor
        // after DEBUG SET-ACTIVE-EXPIRE 0, nor on a replica (its master's DELs expire
        // them).
        if self.shared.pause.until(now).is_some() || !self.expires_actively() {
            return;
        }
        if self.shard.next_expiry().is_some_and(|at| at <= now) {
            let started = Instant::now();
            self.shard.expire(&self.shared, now, EXPIRE_PER_ITERATION);
            let took = started.elapsed();
            if self.shared.latency.enabled() {
                self.shared
                    .latency
                    .add("expire-cycle", took.as_millis() as u64);
            }
            self.expire_us += took.as_micros() as u64;
            if self.shard.next_expiry().is_some_and(|at| at <= now) {
                // (Stopped at its budget with keys due: redis-server's time cap.)
                self.expire_capped += 1;
            }
            self.traffic_changed = true;
            self.route_shard_out();
        }
    }

    /// `maxmemory`: keys' access fields follow the policy's family, and while memory is
    /// over the limit this shard evicts a few keys per iteration, so that every shard
    /// gives its share (not only those whose clients write). Keys transactions hold or
    /// want are passed by.
    fn memory_work(&mut self) {
        let fat = std::mem::take(&mut self.fat_outputs);
        let memory = self.shared.memory.get();
        self.shard.set_access_mode(memory.access_mode());
        // (Every worker looks: the one whose clients write is awake.)
        let over = memory.maxmemory > 0 && crate::memory::counted() > memory.maxmemory;
        if over || self.shared.memory.exceeding() {
            self.shared.memory.note_exceeded(over, clock::now_ms());
        }
        if memory.maxmemory == 0 || memory.policy.evicts().is_none() {
            return;
        }
        self.shard.publish_evictable(&self.shared, &memory);
        if !over {
            return;
        }
        // Clients over `maxmemory-clients` go before keys (weighed as they are now: the
        // replies written into their buffers since they were last weighed count).
        self.weigh_clients();
        // Then the room idle clients' output buffers kept after a burst (the
        // invalidations of evicted keys, say: Redis frees its reply lists once written,
        // so they do not call for more evictions).
        let mut released = false;
        for key in fat {
            if let Some(conn) = self.conns.get_mut(key) {
                released |= conn.output.release_idle();
            }
        }
        if released && crate::memory::counted() <= memory.maxmemory {
            return;
        }
        let now = clock::now_ms();
        // CLIENT PAUSE: nothing is evicted meanwhile (as in Redis 7.0).
        if self.shared.pause.until(now).is_none() {
            let started = self.shared.latency.enabled().then(Instant::now);
            self.shard.evict(
                &self.shared,
                &memory,
                memory.maxmemory,
                EVICT_PER_ITERATION,
                // After writes, back under the limit now (as Redis evicts before every
                // command); else in rounds, not taking what the evictions made for more
                // to free.
                self.shard.wrote(),
                now,
            );
            if let Some(started) = started {
                let ms = started.elapsed().as_millis() as u64;
                self.shared.latency.add("eviction-cycle", ms);
            }
            self.route_shard_out();
        }
    }

    /// A background save's walk: the next slots of this shard's image, appended to the
    /// file; the last piece ends this shard's part.
    fn save_work(&mut self) {
        if !self.shard.snapshot_active() {
            // (A FLUSHALL may have ended this shard's part: `Keyspace::clear`.)
            self.save_job = None;
            self.save_paced = None;
            return;
        }
        if self.save_job.is_none() {
            // The transaction that began the image set the job before its hops ran.
            self.save_job = self.shared.persist.job.lock().ok().and_then(|j| j.clone());
        }
        let Some(job) = self.save_job.clone() else {
            return;
        };
        if job.aborted() {
            // Killed (a rewrite when the log goes off): this shard's image is dropped.
            self.shard.drop_snapshot();
            job.shard_done();
            self.save_job = None;
            self.save_paced = None;
            return;
        }
        if !job.ready() {
            return;
        }
        let Some(keys) = self.save_allowance() else {
            return;
        };
        let (db, piece, done) = self.shard.snapshot_step(keys, SAVE_BYTES_PER_ITERATION);
        job.records(db, &piece);
        if done {
            job.shard_done();
            self.save_job = None;
        }
    }

    /// `rdb-key-save-delay`, when a background save is paced by it: up to 10 ms per key.
    /// (redis-server's tests set far longer delays only to hold a forked child they then
    /// kill; Goblin has no child, and such a save would never end: they are not paced.)
    fn save_delay(&self) -> Option<Duration> {
        let micros = self
            .shared
            .persist
            .rdb_key_save_delay
            .load(Ordering::Relaxed);
        (1..=MAX_SAVE_KEY_DELAY_US)
            .contains(&micros)
            .then(|| Duration::from_micros(micros.unsigned_abs()))
    }

    /// How many keys of the background save's image this iteration writes (`None`:
    /// none yet): a few hundred — or, paced by `rdb-key-save-delay`, one per delay gone
    /// by, as redis-server's child sleeps that long after each key.
    fn save_allowance(&mut self) -> Option<usize> {
        let Some(delay) = self.save_delay() else {
            self.save_paced = None;
            return Some(SAVE_KEYS_PER_ITERATION);
        };
        let now = Instant::now();
        let since = *self.save_paced.get_or_insert(now);
        let due = now.duration_since(since).as_micros() / delay.as_micros();
        if due == 0 {
            return None;
        }
        let keys = due.min(SAVE_KEYS_PER_ITERATION as u128) as u32;
        self.save_paced = Some(since + delay * keys);
        Some(keys as usize)
    }

    /// How soon a background save has work for this worker, if it has any (or soon
    /// will: its header is written right after every shard began its image, and nothing
    /// would wake a sleeping worker for it): at once, or when its next key is due.
    fn save_wait(&self) -> Option<Duration> {
        if !self.shard.snapshot_active() {
            return None;
        }
        Some(match (self.save_paced, self.save_delay()) {
            (Some(since), Some(delay)) => (since + delay).saturating_duration_since(Instant::now()),
            _ => Duration::ZERO,
        })
    }

    /// The shutdown a signal asked for, unless SHUTDOWN ABORT cancelled it or the cron
    /// is paused (DEBUG PAUSE-CRON: it starts when the cron goes on), as SHUTDOWN with no
    /// option: save when `save` rules are set, sync the log, exit.
    fn start_asked_shutdown(&mut self) {
        if self.shutting_down
            || self.shared.cron_paused.load(Ordering::Relaxed)
            || !self.shared.shutdown_asked.load(Ordering::SeqCst)
        {
            return;
        }
        self.shutting_down = true;
        let kind = SaveKind::Shutdown {
            save: false,
            nosave: false,
            force: false,
        };
        self.start_job(
            usize::MAX,
            Vec::new(),
            true,
            Box::new(SavePlan::new(kind)),
            None,
        );
    }

    /// Every `repl-ping-replica-period` seconds, a PING in the replication stream: a
    /// replica that hears nothing for `repl-timeout` drops its link.
    fn ping_replicas(&mut self, now: Instant) {
        if self.shared.repl.count() == 0 {
            return;
        }
        self.shared.repl.count_good();
        let period =
            crate::config::inert::value(&self.shared.live().inert, "repl-ping-replica-period")
                .and_then(|p| p.parse().ok())
                .unwrap_or(10u64);
        // (A replica's replicas are sent its master's PINGs.)
        if now.duration_since(self.last_repl_ping) >= Duration::from_secs(period)
            && !self.shared.repl.proxied()
        {
            self.last_repl_ping = now;
            self.shard.repl_push(&[b"PING"]);
        }
    }

    /// CONFIG SET appendonly yes (worker 0, woken for it, in the loop iteration after):
    /// the log starts with a rewrite, whose instant opens its record file, as
    /// redis-server's `startAppendOnly` starts it at once — or once the background
    /// save running ends.
    fn start_log_if_asked(&mut self) {
        let persist = &self.shared.persist;
        if !persist.log_start.load(Ordering::SeqCst) {
            self.log_start_asked = false;
            return;
        }
        // (Asked stays set until the rewrite begins: INFO shows it in progress meanwhile.)
        if self.log_start_asked
            || persist.loading()
            || persist.saving.load(Ordering::Relaxed)
            || !self.shared.live().persist.appendonly
        {
            return;
        }
        self.log_start_asked = true;
        crate::log!(
            Notice,
            "Background append only file rewriting started (the log is turned on)"
        );
        let plan = SavePlan::new(SaveKind::Rewrite);
        self.start_job(usize::MAX, Vec::new(), true, Box::new(plan), None);
    }

    /// FAILOVER's step (worker 0, each loop iteration while one is under way,
    /// `repl::failover`); an attempt aborted after it followed its target makes this
    /// server a master again, as REPLICAOF NO ONE.
    fn failover_work(&mut self) {
        if self.shared.failover.pending() && self.shared.failover.step(&self.shared) {
            let plan = crate::families::standalone::promote_plan(None);
            self.start_job(usize::MAX, Vec::new(), false, plan, None);
        }
    }

    /// Cluster mode, on worker 0, when the routes change: this server replicates the
    /// master its cluster view names (CLUSTER REPLICATE; a master whose replica took its
    /// place, back; a replica whose master changed), or stops replicating once it is a
    /// master (an election won, a TAKEOVER) — through REPLICAOF's plan, as REPLICAOF
    /// changes it.
    fn follow_cluster_role(&mut self) {
        let Some(cluster) = self.shared.cluster.clone() else {
            return;
        };
        let version = cluster.version();
        if version == self.role_routes {
            return;
        }
        self.role_routes = version;
        // (A master's address unknown yet is learned with a change of the routes.)
        if cluster.lock().following().holds(&self.shared.follow) {
            return;
        }
        let plan = crate::families::standalone::cluster_role_plan();
        self.start_job(usize::MAX, Vec::new(), false, plan, None);
    }

    /// Once a second, on worker 0, as redis-server's cron (held by DEBUG PAUSE-CRON): a
    /// shutdown a signal asked for, MIGRATE's idle connections closed, the replicas'
    /// PING, the backlog freed after `repl-backlog-ttl` seconds without replicas, a
    /// rewrite or save that waited for the one running, the automatic log rewrite
    /// (`auto-aof-rewrite-percentage`, `-min-size`), and the `save` rules (a background
    /// save after so many seconds with so many changes).
    fn cron(&mut self) {
        if self.shared.cron_paused.load(Ordering::Relaxed) {
            return;
        }
        if self.shared.shutdown_asked.load(Ordering::Relaxed) {
            self.start_asked_shutdown();
        }
        let now = Instant::now();
        if now.duration_since(self.last_cron) < Duration::from_secs(1) {
            return;
        }
        self.last_cron = now;
        self.ping_replicas(now);
        if self.shared.repl.expire_backlog(clock::now_ms()) {
            // No replica can continue the history the backlog held.
            self.shared.new_replication_id();
        }
        crate::memory::purge_if_bloated();
        crate::families::migrate::close_idle();
        let persist = Arc::clone(&self.shared.persist);
        let config = self.shared.live().persist.clone();
        if persist.loading() || persist.saving.load(Ordering::Relaxed) {
            return;
        }
        let size = persist.aof_current_size.load(Ordering::Relaxed);
        let base = persist.aof_base_size.load(Ordering::Relaxed).max(1);
        let grown = config.auto_aof_rewrite_percentage > 0
            && size >= config.auto_aof_rewrite_min_size
            && (size.saturating_sub(base)).saturating_mul(100)
                >= base.saturating_mul(config.auto_aof_rewrite_percentage);
        // (A BGREWRITEAOF that waited for a save runs with the log off too, as there:
        // it writes the files DEBUG LOADAOF loads.)
        if persist.rewrite_scheduled.swap(false, Ordering::SeqCst) || (config.appendonly && grown) {
            if grown {
                crate::log!(
                    Notice,
                    "starting an automatic rewrite of the append-only log \
                     ({size} bytes, {base} after the last rewrite)"
                );
            }
            let plan = SavePlan::new(SaveKind::Rewrite);
            self.start_job(usize::MAX, Vec::new(), true, Box::new(plan), None);
            return;
        }
        let unix = clock::now_ms() / 1000;
        let dirty = persist.dirty.load(Ordering::Relaxed);
        let since = unix.saturating_sub(persist.last_save.load(Ordering::Relaxed));
        // After a failure, wait a little before trying again (redis-server: 5 s).
        let retry_ok = !persist.bgsave_failed()
            || unix.saturating_sub(persist.last_bgsave_try.load(Ordering::Relaxed)) >= 5;
        let due = retry_ok
            && config
                .save
                .iter()
                .any(|&(secs, changes)| dirty >= changes && since >= secs);
        if persist.bgsave_scheduled.swap(false, Ordering::SeqCst) || due {
            if due {
                crate::log!(Notice, "{dirty} changes in {since} seconds. Saving...");
            }
            let plan = SavePlan::new(SaveKind::Background { schedule: false });
            self.start_job(usize::MAX, Vec::new(), true, Box::new(plan), None);
        }
    }

    /// Ten times a second: query buffers give back the room they no longer need, as
    /// Redis's cron has them do (`Input::resize`; it looks at a tenth of its clients, at
    /// least five, ten times a second). The bytes kept move as a read's compaction moves
    /// them (`Input::make_room`), so a command under way loses nothing.
    fn resize_inputs(&mut self) {
        if self.now < self.next_inputs_look || self.shared.cron_paused.load(Ordering::Relaxed) {
            return;
        }
        self.next_inputs_look = self.now + 100;
        let now = self.now;
        for (_, c) in self.conns.iter_mut() {
            c.input
                .resize(now.saturating_sub(c.client.last_io) / 1000 > 2);
            // The ranges of a request with many arguments: not while a command waits to
            // run again (`Conn::deferred`), which reads them then.
            if !c.busy() && c.deferred.is_none() {
                c.input.decoder.shrink();
            }
        }
    }

    /// Once a second while it works: its clients' buffers, for INFO.
    fn measure_clients(&mut self) {
        if self.now < self.next_clients_look || self.shared.cron_paused.load(Ordering::Relaxed) {
            return;
        }
        self.next_clients_look = self.now + 1000;
        self.measure_replicas();
        let (mut total, mut input, mut output) = (0, 0, 0);
        // (Its replicas' are theirs: `mem_clients_slaves`.)
        for (_, c) in self.conns.iter().filter(|(_, c)| !c.client.replica) {
            total += c.memory();
            input = input.max(c.input.buf.len());
            output = output.max(c.output.pending());
        }
        if let Some(t) = self.shared.traffic.get(self.id) {
            t.clients_mem.store(total as u64, Ordering::Relaxed);
            t.max_input.store(input as u64, Ordering::Relaxed);
            t.max_output.store(output as u64, Ordering::Relaxed);
        }
    }

    /// Once a second, with `timeout` set: closes the clients idle longer than it (not
    /// those waiting for a command to answer: a blocked client has its own timeout).
    fn close_idle(&mut self) {
        if self.shared.ticks() & TICK_IDLE == 0
            || self.last_idle_check.elapsed() < Duration::from_secs(1)
        {
            return;
        }
        let timeout = self.shared.live().timeout;
        self.last_idle_check = Instant::now();
        let now = clock::now_ms();
        let idle: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                // (Replicas and the link to a master are never idle, as in Redis.)
                !c.gone
                    && c.job.is_none()
                    && !c.busy()
                    && !c.client.replica
                    && !c.client.master
                    && now.saturating_sub(c.client.last_io) > timeout.saturating_mul(1000)
            })
            .map(|(key, _)| key)
            .collect();
        for key in idle {
            self.close(key);
        }
    }

    /// Loading is over for this worker: the log, when on, records its writes from now
    /// on.
    fn loaded(&mut self) {
        // (The file may also have recorded a history its replicas continue.)
        self.shard.feed_backlog(&self.shared);
        let persist = &self.shared.persist;
        if persist.loading_workers.fetch_sub(1, Ordering::SeqCst) == 1 {
            persist.loaded();
            crate::runtime::supervise::ready();
        }
    }

    /// Cluster mode: when the routes change, a parked job waiting on a key whose slot left
    /// the node (or while the cluster is down) is unblocked with the redirection, as
    /// redis-server unblocks a blocked client with MOVED or CLUSTERDOWN — so a client
    /// blocked on a slot that moved goes on where the slot went. One atomic load per
    /// iteration otherwise.
    fn redirect_parked(&mut self) {
        let Some(version) = self.shared.cluster.as_deref().map(|c| c.version()) else {
            return;
        };
        if version == self.parked_routes {
            return;
        }
        self.parked_routes = version;
        self.drop_moved_shard_channels();
        let Some(cluster) = self
            .shared
            .cluster
            .clone()
            .filter(|_| !self.jobs.is_empty())
        else {
            return;
        };
        let routes = Arc::clone(crate::cluster::current(&mut self.shard.routes, &cluster));
        let redirected: Vec<(u64, Vec<u8>)> = self
            .jobs
            .iter()
            .filter_map(|(&seq, job)| {
                let error = job
                    .parked_slots()
                    .iter()
                    .find_map(|&slot| routes.blocked(usize::from(slot)))?;
                Some((seq, error))
            })
            .collect();
        for (seq, error) in redirected {
            self.now = clock::now_ms();
            self.job_event(seq, |job, env, out| {
                job.unblock(Some(&error), env, out).flatten()
            });
        }
    }

    /// Cluster mode, when the routes change: a client subscribed to a shard channel whose
    /// slot this node's shard no longer serves is unsubscribed from it and told so
    /// (`sunsubscribe`), as redis-server's removeChannelsInSlot tells it: it subscribes
    /// again where the slot went.
    fn drop_moved_shard_channels(&mut self) {
        use crate::runtime::pubsub::{Hub, Space};
        let Some(cluster) = self.shared.cluster.clone() else {
            return;
        };
        if !self.subs.any(Space::ShardChannels) {
            return;
        }
        let routes = Arc::clone(crate::cluster::current(&mut self.shard.routes, &cluster));
        let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        for key in keys {
            let Some(conn) = self.conns.get_mut(key) else {
                continue;
            };
            let moved: Vec<Box<[u8]>> = conn
                .client
                .subs
                .names(Space::ShardChannels)
                .into_iter()
                .filter(|name| !routes.serves(usize::from(goblin_store::key_slot(name))))
                .collect();
            if moved.is_empty() {
                continue;
            }
            let mut hub = Hub::new(
                &mut self.subs,
                &mut self.shard.pubsub,
                self.id,
                key,
                conn.generation,
            );
            for name in moved {
                hub.unsubscribe(
                    &self.shared.pubsub,
                    &mut conn.client.subs,
                    Space::ShardChannels,
                    &name,
                );
                let count = conn.client.subs.counted(Space::ShardChannels);
                let mut out = goblin_protocol::Encoder::new(&mut conn.output.buf, conn.client.resp);
                out.push(3);
                out.bulk(b"sunsubscribe");
                out.bulk(&name);
                out.integer(count as i64);
            }
            self.mark_dirty(key);
        }
    }

    /// Parked jobs whose deadline passed go on (with a timeout).
    fn time_out_parked(&mut self) {
        let now = Instant::now();
        while let Some(&Reverse((at, seq))) = self.deadlines.peek() {
            if at > now {
                return;
            }
            self.deadlines.pop();
            let due = self
                .jobs
                .get(&seq)
                .is_some_and(|job| job.deadline() == Some(at));
            if due {
                self.now = clock::now_ms();
                self.job_event(seq, |job, env, out| job.on_timeout(env, out));
            }
        }
    }

    /// How long the loop may sleep before a parked job's deadline.
    fn next_deadline(&self) -> Option<Duration> {
        let Reverse((at, _)) = self.deadlines.peek()?;
        Some(at.saturating_duration_since(Instant::now()))
    }

    /// Polls; blocks only when there is nothing to do and no message waiting.
    fn sleep(&mut self, events: &mut Events) -> io::Result<()> {
        // Wake for the next key expiry, if any (keys behind schedule: at once) — unless
        // active expiry is paused for transactions here: then the message that ends the
        // last of them wakes this worker, and an overdue key must not make it spin.
        // (The clock is read only when something is due: most iterations of a busy
        // worker have nothing to wait for.)
        let next_expiry = self
            .shard
            .next_expiry()
            .filter(|_| self.shard.quiet() && self.expires_actively());
        let paused = self.shared.pause.maybe();
        let now = if next_expiry.is_some() || paused {
            clock::now_ms()
        } else {
            0
        };
        let pause = if paused {
            self.shared.pause.until(now)
        } else {
            None
        };
        let next_expiry = next_expiry.map(|at| match pause {
            // Nothing expires during CLIENT PAUSE: look again when it ends.
            Some(end) => at.max(end),
            None => at,
        });
        let mut timeout = next_expiry
            .map(|at| Duration::from_millis(at.saturating_sub(now).min(MAX_POLL_WAIT_MS)));
        if !self.paused.is_empty() {
            // Clients held by CLIENT PAUSE go on when it ends — at once if it has ended
            // already: a command is held by the iteration's timestamp, which the fresh
            // clock may have passed the end with (a pause of 1 ms held a client for good
            // on an idle server, found by redis-py's test_client_pause).
            let wait = pause.map_or(Duration::ZERO, |end| {
                Duration::from_millis(end.saturating_sub(now).min(MAX_POLL_WAIT_MS))
            });
            timeout = Some(timeout.map_or(wait, |t| t.min(wait)));
        }
        if let Some(deadline) = self.next_deadline() {
            timeout = Some(timeout.map_or(deadline, |t| t.min(deadline)));
        }
        let ticks = self.shared.ticks();
        // (Replication's cron: the replicas' PINGs, and the backlog freed after
        // `repl-backlog-ttl` seconds without replicas.)
        let repl =
            self.id == 0 && (self.shared.repl.count() > 0 || self.shared.repl.backlog_active());
        if (self.id == 0 && ticks & TICK_CRON != 0) || ticks & TICK_IDLE != 0 || repl {
            // The cron (`save` rules, automatic rewrites) and the idle clients.
            let second = Duration::from_secs(1);
            timeout = Some(timeout.map_or(second, |t| t.min(second)));
        }
        if self.accept_retry {
            timeout = Some(timeout.map_or(ACCEPT_RETRY, |t| t.min(ACCEPT_RETRY)));
        }
        if let Some(due) = self.questions_due() {
            timeout = Some(timeout.map_or(due, |t| t.min(due)));
        }
        if !self.scheduled.is_empty() || !self.local.is_empty() || !self.dirty.is_empty() {
            timeout = Some(Duration::ZERO);
        }
        if let Some(wait) = self.save_wait() {
            timeout = Some(timeout.map_or(wait, |t| t.min(wait)));
        }
        if self.id == 0 && self.shared.failover.pending() {
            // FAILOVER's steps: the replicas' acknowledgements, the new master's answer.
            let soon = Duration::from_millis(5);
            timeout = Some(timeout.map_or(soon, |t| t.min(soon)));
        }
        if self.shared.repl.waiting.load(Ordering::Relaxed) > 0 {
            // A replica's snapshot is being written: look for it often.
            let soon = Duration::from_millis(5);
            timeout = Some(timeout.map_or(soon, |t| t.min(soon)));
        }
        if timeout != Some(Duration::ZERO) && self.awaiting > 0 && self.shared.cores_shared {
            // Replies from other shards are due, and this core is shared with other
            // workers. First, any socket work there is: the longer this worker runs,
            // the more each hand-over of the core carries (a context switch costs far
            // more than a poll that finds something).
            match self.poll.poll(events, Some(Duration::ZERO)) {
                Ok(()) if !events.is_empty() => return Ok(()),
                Err(e) if e.kind() != io::ErrorKind::Interrupted => return Err(e),
                _ => {}
            }
            // Nothing: rather than sleep and be woken (a syscall on each side and a trip
            // through the scheduler), hand the core to them and look again, for a short
            // while. (On cores of their own, workers run in parallel and this would
            // only burn CPU.)
            let start = Instant::now();
            while start.elapsed() < SPIN_WHILE_AWAITING {
                if !self.inbox.is_empty() {
                    timeout = Some(Duration::ZERO);
                    break;
                }
                std::thread::yield_now();
            }
        }
        if timeout != Some(Duration::ZERO) && !self.shared.cores_shared {
            // Look for a few microseconds before sleeping, while that pays (`spin`): a
            // little while for clients, longer while a transaction's next step is due
            // from or to another worker.
            let expecting = self.awaiting_steps > 0 || self.shard.held_for_others(self.id);
            let window = if expecting {
                spin::EXPECT_WINDOW
            } else {
                spin::WINDOW
            };
            if self.spin_account(expecting).wanted() {
                let found = self.look(events, timeout.map_or(window, |t| t.min(window)))?;
                self.spin_account(expecting).found(found);
                if found {
                    return Ok(());
                }
            }
        }
        let me = &self.shared.peers[self.id];
        if timeout != Some(Duration::ZERO) {
            me.sleeping.store(true, Ordering::SeqCst);
            // Pairs with the fence in `Peer::send`.
            std::sync::atomic::fence(Ordering::SeqCst);
            if !self.inbox.is_empty() {
                timeout = Some(Duration::ZERO);
            }
        }
        let result = self.poll.poll(events, timeout);
        me.sleeping.store(false, Ordering::SeqCst);
        match result {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            other => other,
        }
    }

    /// The account of the look before sleeping: the one while a transaction's step is
    /// due (`expecting`), or the one for clients.
    fn spin_account(&mut self, expecting: bool) -> &mut spin::Spin {
        if expecting {
            &mut self.expect_spin
        } else {
            &mut self.spin
        }
    }

    /// Polls without sleeping for up to `window`: whether a connection or a message from
    /// another worker turned up (the loop drains the inbox whatever `events` holds).
    fn look(&mut self, events: &mut Events, window: Duration) -> io::Result<bool> {
        let start = Instant::now();
        loop {
            match self.poll.poll(events, Some(Duration::ZERO)) {
                Ok(()) if !events.is_empty() => return Ok(true),
                Err(e) if e.kind() != io::ErrorKind::Interrupted => return Err(e),
                _ => {}
            }
            if !self.inbox.is_empty() {
                return Ok(true);
            }
            if start.elapsed() >= window {
                return Ok(false);
            }
        }
    }

    /// Handles what other workers sent before reading a connection's requests: a
    /// message sent to this worker before a client sent its request is handled first.
    /// So a client that read a PUBLISH's reply and then sends a command to a subscriber
    /// on this thread finds the message in the subscriber's output ahead of the
    /// command's reply, as with redis-server, where one thread does both. (One look at
    /// the inbox per connection served.)
    fn catch_up(&mut self) {
        if !self.inbox.is_empty() {
            self.drain();
        }
    }

    /// Queues messages for their destinations.
    pub(crate) fn route(&mut self, out: Vec<Outgoing>) {
        for (dest, msg) in out {
            self.route_one(dest, msg);
        }
    }

    /// Queues one message for its destination ([`Worker::route`] without a vector).
    pub(crate) fn route_one(&mut self, dest: usize, msg: Msg) {
        if dest == self.id {
            self.local.push_back(msg);
        } else if let Some(q) = self.outbox.get_mut(dest) {
            if matches!(msg, Msg::Run(..) | Msg::Step(..)) {
                self.runs_out += u64::from(matches!(msg, Msg::Run(..)));
                self.awaiting += 1;
                if matches!(msg, Msg::Step(..)) {
                    self.awaiting_steps += 1;
                }
                self.hops += 1;
                self.traffic_changed = true;
            }
            q.push(msg);
        }
    }

    /// Routes what the shard produced.
    pub(crate) fn route_shard_out(&mut self) {
        if self.shard.has_wakes() {
            self.shard.serve_wakes(&self.shared);
        }
        if self.shard.has_out() {
            let mut out = self.shard.take_out();
            for (dest, msg) in out.drain(..) {
                self.route_one(dest, msg);
            }
            self.shard.return_out(out);
        }
    }

    /// Clients whose command waited for CLIENT PAUSE go on once it is over (they wait
    /// again if another pause holds them).
    fn release_paused(&mut self) {
        if self.paused.is_empty() || self.shared.pause.until(clock::now_ms()).is_some() {
            return;
        }
        for key in std::mem::take(&mut self.paused) {
            if let Some(conn) = self.conns.get_mut(key)
                && conn.paused
            {
                conn.paused = false;
                self.shared.blocked_clients.fetch_sub(1, Ordering::Relaxed);
                if !conn.gone {
                    self.serve(key);
                }
            }
        }
    }

    /// Sends this iteration's MONITOR lines to every MONITOR client: one message per
    /// worker that has some.
    fn send_monitor_feed(&mut self) {
        crate::runtime::monitor::take_plan_lines(&mut self.shard.monitor_feed);
        if self.shard.monitor_feed.is_empty() {
            return;
        }
        let feed: Arc<[u8]> = Arc::from(std::mem::take(&mut self.shard.monitor_feed));
        for client in self.shared.monitors.clients() {
            if client.worker == self.id {
                self.monitor_lines(client, &feed);
            } else if let Some(q) = self.outbox.get_mut(client.worker) {
                q.push(Msg::Monitor(client, Arc::clone(&feed)));
            }
        }
    }

    /// Appends what this shard wrote to the replication stream, and has the workers
    /// of the replicas send it (this one at once).
    fn send_repl_feed(&mut self) {
        // (The stream may have grown from this worker's plans too: FLUSHALL's command.)
        let appended = self.shard.flush_repl(&self.shared);
        let offset = self.shared.repl.offset.load(Ordering::Relaxed);
        if !appended && offset == self.repl_seen {
            return;
        }
        self.repl_seen = offset;
        for worker in self.shared.repl.appended() {
            if worker == self.id {
                self.pump_replicas();
            } else if let Some(q) = self.outbox.get_mut(worker)
                && !matches!(q.last(), Some(Msg::ReplWake))
            {
                q.push(Msg::ReplWake);
            }
        }
    }

    /// Sends this worker's replicas what the replication stream gained since.
    fn pump_replicas(&mut self) {
        let (conns, replica_keys) = (&mut self.conns, &mut self.replica_keys);
        let (mut held, mut dirty) = (0u64, Vec::new());
        self.shared.repl.take_for(self.id, |to, bytes| {
            let Some(conn) = conns
                .get_mut(to.key)
                .filter(|c| c.generation == to.generation && !c.gone)
            else {
                return;
            };
            // (Its growth left out of `maxmemory` before it is allocated;
            // `measure_replicas` then counts what it holds.)
            let out = &mut conn.output.buf;
            crate::memory::reserve_left_out(out, bytes.len(), |moving| {
                crate::memory::replicas_hold(0, moving);
                held += moving;
            });
            out.extend_from_slice(bytes);
            dirty.push(to.key);
            if !replica_keys.contains(&to.key) {
                replica_keys.push(to.key);
            }
        });
        self.replicas_mem += held;
        for key in dirty {
            self.mark_dirty(key);
        }
        self.shared.repl.trim();
        self.measure_replicas();
    }

    /// What its replicas' connections hold now, for `maxmemory` to leave out
    /// (`memory::counted`) and INFO (`mem_clients_slaves`). After the stream or a
    /// snapshot is copied into them, and after they are written to.
    fn measure_replicas(&mut self) {
        if self.replica_keys.is_empty() && self.replicas_mem == 0 {
            return;
        }
        let conns = &self.conns;
        self.replica_keys
            .retain(|&k| conns.get(k).is_some_and(|c| c.client.replica && !c.gone));
        let now: u64 = self
            .replica_keys
            .iter()
            .filter_map(|&k| self.conns.get(k))
            .map(|c| c.memory() as u64)
            .sum();
        crate::memory::replicas_hold(self.replicas_mem, now);
        self.replicas_mem = now;
    }

    /// Replicas of this worker whose snapshot is written: each is sent `$<len>`, the
    /// file, and the stream from its save's instant on. A failed save closes the
    /// replica, as redis-server drops the replicas of a failed BGSAVE.
    fn send_snapshots(&mut self) {
        if self.shared.repl.waiting.load(Ordering::SeqCst) == 0 {
            return;
        }
        let ready = self.shared.repl.ready_for(self.id);
        let sent = !ready.is_empty();
        for (to, outcome) in ready {
            let mut held = 0;
            let file = outcome.and_then(|before| match before {
                Before::Snapshot(path) => {
                    // The file, read and then copied into the replica's buffer, is the
                    // replica's: left out of `maxmemory` before it is read (redis-server
                    // sends it from the disk).
                    held = std::fs::metadata(&path).map_or(0, |m| 2 * m.len());
                    crate::memory::replicas_hold(0, held);
                    std::fs::read(&path)
                        .map(Some)
                        .map_err(|e| format!("{}: {e}", path.display()))
                }
                Before::Nothing => Ok(None),
            });
            self.replicas_mem += held;
            let Some(conn) = self.live_conn(to).filter(|c| !c.gone) else {
                continue;
            };
            match file {
                // A partial resynchronization: the stream only.
                Ok(None) => {}
                Ok(Some(bytes)) => {
                    crate::log!(
                        Notice,
                        "Synchronization with replica {}:{} succeeded",
                        conn.client.replica_ip(),
                        conn.client.repl_port
                    );
                    let out = &mut conn.output.buf;
                    out.push(b'$');
                    out.extend_from_slice(bytes.len().to_string().as_bytes());
                    out.extend_from_slice(b"\r\n");
                    out.extend_from_slice(&bytes);
                    conn.client.reply = crate::runtime::client::ReplyMode::Off;
                    self.mark_dirty(to.key);
                    if !self.replica_keys.contains(&to.key) {
                        self.replica_keys.push(to.key);
                    }
                }
                Err(e) => {
                    // (After its reply: a LOADING one says to try again.)
                    crate::log!(Warning, "SYNC failed. BGSAVE child returned an error: {e}");
                    conn.client.close_after_reply = true;
                    self.mark_dirty(to.key);
                }
            }
        }
        if sent {
            self.pump_replicas();
        }
    }

    /// MONITOR lines for one of this worker's clients. One that does not read them is
    /// closed once it holds more than the bound on a client's replies.
    fn monitor_lines(&mut self, to: ConnRef, lines: &[u8]) {
        let Some(conn) = self.live_conn(to).filter(|c| !c.gone && c.client.monitor) else {
            return;
        };
        conn.output.buf.extend_from_slice(lines);
        if conn.output.pending() > OUTPUT_HIGH_WATER {
            self.close_over_output_limit(to.key);
            return;
        }
        self.mark_dirty(to.key);
    }

    /// Moves the publications made this iteration into the outboxes, one message per
    /// worker; returns this worker's own.
    fn send_publications(&mut self) -> Option<Vec<u8>> {
        let mut mine = None;
        for (dest, publications) in self.shard.pubsub.take() {
            if dest == self.id {
                mine = Some(publications);
            } else if let Some(q) = self.outbox.get_mut(dest) {
                q.push(Msg::Publish(publications));
            }
        }
        mine
    }

    /// Delivers publications to this worker's subscribers, and invalidations to its
    /// tracking clients.
    fn deliver(&mut self, publications: &[u8]) {
        use crate::runtime::pubsub::Entry;
        for entry in crate::runtime::pubsub::entries(publications, self.id) {
            let (space, channel, message) = match entry {
                Entry::Publish(space, channel, message) => (space, channel, message),
                Entry::Track(notice) => {
                    self.deliver_notice(&notice);
                    continue;
                }
                Entry::Redirected(notice) => {
                    self.deliver_redirected(&notice);
                    continue;
                }
            };
            let Worker {
                subs, conns, dirty, ..
            } = self;
            subs.receivers(space, channel, |key, pattern| {
                let Some(conn) = conns.get_mut(key).filter(|c| !c.gone) else {
                    return;
                };
                crate::runtime::pubsub::encode_message(
                    &mut conn.output.buf,
                    conn.client.resp,
                    space,
                    pattern,
                    channel,
                    message,
                );
                if !conn.dirty {
                    conn.dirty = true;
                    dirty.push(key);
                }
            });
        }
    }

    /// An invalidation for a tracking client of this worker: sent to it (RESP3), to the
    /// client it redirects to, or dropped (RESP2 without a redirect, or a client that no
    /// longer tracks in that mode: Redis forgets lazily too).
    pub(crate) fn deliver_notice(&mut self, notice: &crate::runtime::tracking::Notice<'_>) {
        use crate::runtime::tracking::{KIND_BCAST, KIND_KEYS, encode, encode_broken};
        let shared = Arc::clone(&self.shared);
        let Some(conn) = self.live_conn(notice.conn).filter(|c| !c.gone) else {
            return;
        };
        let t = &mut conn.client.tracking;
        if conn.client.id != notice.id
            || !t.on
            || (notice.kind == KIND_KEYS && t.bcast)
            || (notice.kind == KIND_BCAST && !t.bcast)
            || (notice.kind == KIND_KEYS && t.noloop && notice.writer == notice.id)
        {
            return;
        }
        let resp3 = conn.client.resp == Version::Resp3;
        let notice = crate::runtime::tracking::Notice {
            null_resp3: resp3,
            ..*notice
        };
        if t.redirect == 0 {
            if resp3 && conn.job.is_some() && notice.writer == notice.id {
                // Its own transaction's write: after the transaction's reply.
                encode(&mut conn.deferred_pushes, true, &notice);
            } else if resp3 {
                encode(&mut conn.output.buf, true, &notice);
                self.mark_dirty(notice.conn.key);
            }
            return;
        }
        let redirect = t.redirect;
        let Some(target) = shared.tracking.conn_of(redirect) else {
            t.broken_redirect = true;
            if resp3 {
                encode_broken(&mut conn.output.buf, redirect);
                self.mark_dirty(notice.conn.key);
            }
            return;
        };
        let forwarded = crate::runtime::tracking::Notice {
            conn: target,
            ..notice
        };
        if target.worker == self.id {
            self.deliver_redirected(&forwarded);
        } else {
            self.shard.pubsub.track(&forwarded, true);
        }
    }

    /// An invalidation redirected to a client of this worker: a push in RESP3, a
    /// message on `__redis__:invalidate` in RESP2 when it is in Pub/Sub mode.
    fn deliver_redirected(&mut self, notice: &crate::runtime::tracking::Notice<'_>) {
        let Some(conn) = self.live_conn(notice.conn).filter(|c| !c.gone) else {
            return;
        };
        let resp3 = conn.client.resp == Version::Resp3;
        if !resp3 && !conn.client.subs.active() {
            return;
        }
        crate::runtime::tracking::encode(&mut conn.output.buf, resp3, notice);
        self.mark_dirty(notice.conn.key);
    }

    /// Sends the batches gathered this iteration and everything in the outboxes.
    fn send_all(&mut self) {
        self.send_open_batches();
        self.send_monitor_feed();
        self.send_repl_feed();
        // Anything routed to ourselves runs now rather than next iteration.
        if !self.local.is_empty() {
            self.drain();
        }
        self.send_outboxes();
    }

    /// Sends what the outboxes hold, with this iteration's publications (this worker's
    /// own subscribers get theirs at once), after making the log records durable (the
    /// log's group commit: nothing leaves the thread before them).
    ///
    /// Workers that receive publications are sent to first: a message to any other
    /// worker (a reply, after which its client publishes or reads) is then sent after
    /// them, so nothing that follows from it can overtake them.
    fn send_outboxes(&mut self) {
        self.shard.send_tracking();
        // Twice: an invalidation delivered here may go on to the client it is
        // redirected to.
        for _ in 0..2 {
            if self.shard.pubsub.pending()
                && let Some(mine) = self.send_publications()
            {
                self.deliver(&mine);
            }
        }
        self.shard.sync_log(&self.shared);
        for publications_first in [true, false] {
            for (dest, queue) in self.outbox.iter_mut().enumerate() {
                // (A `Publish` is always the last message of its queue.)
                let publishes = matches!(queue.last(), Some(Msg::Publish(_)));
                if !queue.is_empty() && publishes == publications_first {
                    let next = self.spare.pop().unwrap_or_default();
                    self.shared.peers[dest].send(std::mem::replace(queue, next));
                }
            }
        }
    }

    /// Handles the messages waiting in the inbox (those there now) and every message
    /// this worker sent itself.
    pub(crate) fn drain(&mut self) {
        loop {
            let mut any = false;
            for _ in 0..self.inbox.len() {
                let Ok(mut msgs) = self.inbox.try_recv() else {
                    break;
                };
                any = true;
                self.shard.prefetch_runs(&mut msgs);
                for msg in msgs.drain(..) {
                    if matches!(msg, Msg::Done(..) | Msg::StepDone(..)) {
                        self.runs_back += u64::from(matches!(msg, Msg::Done(..)));
                        self.awaiting = self.awaiting.saturating_sub(1);
                        if matches!(msg, Msg::StepDone(..)) {
                            self.awaiting_steps = self.awaiting_steps.saturating_sub(1);
                        }
                    }
                    self.handle(msg);
                }
                if self.spare.len() < SPARE_VECS && msgs.capacity() <= SPARE_CAPACITY {
                    self.spare.push(msgs);
                }
            }
            while let Some(msg) = self.local.pop_front() {
                any = true;
                self.handle(msg);
            }
            if !any {
                return;
            }
        }
    }

    fn handle(&mut self, msg: Msg) {
        let shared = &self.shared;
        match msg {
            Msg::Adopt(stream, origin) => self.adopt_as(stream, origin, false),
            Msg::AdoptMaster(stream, origin) => self.adopt_as(stream, origin, true),
            Msg::Monitor(to, lines) => self.monitor_lines(to, &lines),
            Msg::ReplWake => self.pump_replicas(),
            Msg::DropReplicas(keep) => {
                let kept = keep.filter(|k| k.worker == self.id).map(|k| k.key);
                let replicas: Vec<usize> = self
                    .conns
                    .iter()
                    .filter(|(key, c)| c.client.replica && !c.gone && Some(*key) != kept)
                    .map(|(key, _)| key)
                    .collect();
                for key in replicas {
                    self.close(key);
                }
            }
            // (Shard work that may run a script: the connections are lent to the
            // stand-in meanwhile.)
            Msg::Run(from, batch) if batch.scripts => {
                self.lend_conns(None);
                self.shard.run_batch(&self.shared, from, batch);
                self.take_back_conns();
            }
            Msg::Run(from, batch) => self.shard.run_batch(shared, from, batch),
            Msg::Resume(from, budget) => {
                self.lend_conns(None);
                self.shard.resume(&self.shared, from, budget);
                self.take_back_conns();
            }
            Msg::Step(step) => {
                self.lend_conns(None);
                self.shard.step(&self.shared, step);
                self.take_back_conns();
            }
            Msg::Park(req) => self.shard.park(shared, req),
            Msg::Unpark(tx, id) => self.shard.unpark(tx, id),
            Msg::Reserve(db, key) => self.shard.serve_key(db, &key),
            Msg::Slots(map) => self.shard.set_slots(map),
            Msg::Done(to, batch) => self.batch_done(to, batch),
            Msg::Replies(to, shard, replies, ends) => self.batch_stalled(to, shard, replies, ends),
            Msg::StepDone(done) => {
                self.job_event(done.tx.seq, |job, env, out| job.on_done(done, env, out));
            }
            Msg::Ask(from, command) => self.questions.push(crate::runtime::conn::Question {
                from,
                command,
                runs_due: None,
                since: Instant::now(),
            }),
            Msg::Answer(to, answer, micros) => self.answered(to, answer, micros),
            Msg::Load(keys) => self.shard.load(keys, clock::now_ms()),
            Msg::Loaded => self.loaded(),
            Msg::Shutdown => self.start_asked_shutdown(),
            Msg::Sleep(until) => clock::sleep_until(until),
            Msg::Publish(publications) => self.deliver(&publications),
            Msg::Woken(tx, id, key) => {
                self.now = clock::now_ms();
                self.job_event(tx.seq, |job, env, out| job.on_woken(id, key, env, out));
            }
        }
        self.route_shard_out();
    }

    /// Feeds an event to job `seq`; finishes the job when it is done, and keeps its
    /// deadline when it parked.
    pub(crate) fn job_event(
        &mut self,
        seq: u64,
        f: impl FnOnce(&mut TxJob, &Env<'_>, &mut Vec<Outgoing>) -> Option<Outcome>,
    ) {
        let Some(mut job) = self.jobs.remove(&seq) else {
            return;
        };
        // (A plan may run a script: see `Worker::lend_conns`.)
        self.lend_conns(Some(job.conn));
        let env = Env {
            shared: &self.shared,
            slots: self.shard.slots(),
            now: self.now,
        };
        let mut out = Vec::new();
        let was = job.parked_state();
        let outcome = f(&mut job, &env, &mut out);
        self.take_back_conns();
        let outcome = self.run_conn_steps(&mut job, outcome, &mut out);
        let is = job.parked_state();
        self.note_blocked(was, is);
        if is.0 && !was.0 {
            // Blocked: the replies before the command go out now (`flush_all`).
            self.mark_dirty(job.conn);
        }
        self.route(out);
        match outcome {
            Some(outcome) => {
                self.log_job(job.conn, job.take_timing(), &outcome);
                self.finish_job(job.conn, outcome);
            }
            None => {
                if let Some(at) = job.deadline() {
                    self.deadlines.push(Reverse((at, seq)));
                }
                self.jobs.insert(seq, job);
            }
        }
    }

    /// Keeps INFO's count of blocked clients as a job parks, or stops waiting:
    /// `(parked, with a timeout)` before and after.
    pub(crate) fn note_blocked(&self, was: (bool, bool), is: (bool, bool)) {
        let adjust = |counter: &std::sync::atomic::AtomicUsize, before: bool, after: bool| match (
            before, after,
        ) {
            (false, true) => {
                counter.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                counter.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        };
        adjust(&self.shared.blocked_clients, was.0, is.0);
        adjust(&self.shared.blocked_with_timeout, was.1, is.1);
    }

    /// Whether the connection's command waits for a key event (a parked plan).
    pub(crate) fn blocked_in_a_wait(&self, key: usize) -> bool {
        parked(&self.jobs, self.conns.get(key).and_then(|c| c.job))
    }

    pub(crate) fn live_conn(&mut self, to: ConnRef) -> Option<&mut Conn> {
        self.conns
            .get_mut(to.key)
            .filter(|c| c.generation == to.generation)
    }

    pub(crate) fn mark_dirty(&mut self, key: usize) {
        if let Some(conn) = self.conns.get_mut(key)
            && !conn.dirty
        {
            conn.dirty = true;
            self.dirty.push(key);
        }
    }

    pub(crate) fn new_batch(&mut self, resp: Version, db: usize) -> Box<Batch> {
        let mut batch = self.pool.pop().unwrap_or_default();
        batch.resp = resp;
        batch.db = db;
        batch.now = self.now;
        batch.slots_version = self.shard.slots().version();
        batch
    }

    pub(crate) fn recycle(&mut self, mut batch: Box<Batch>) {
        if self.pool.len() < BATCH_POOL
            && batch.data.capacity() <= BATCH_KEEP_BYTES
            && batch.replies.capacity() <= BATCH_KEEP_BYTES
        {
            batch.clear();
            self.pool.push(batch);
        }
    }

    /// Accepts the clients waiting on the listeners: at most [`MAX_ACCEPTS_PER_TURN`]
    /// a turn (more may wait: the listeners are looked at again after the others are
    /// served).
    fn accept(&mut self) {
        let mut budget = MAX_ACCEPTS_PER_TURN;
        for i in 0..self.listeners.len() {
            self.accept_from(i, &mut budget);
            if budget == 0 {
                for (i, l) in self.listeners.iter_mut().enumerate() {
                    let _ =
                        self.poll
                            .registry()
                            .reregister(l, listener_token(i), Interest::READABLE);
                }
                return;
            }
        }
    }

    /// Accepts the clients waiting on listener `i`, while `budget` lasts.
    fn accept_from(&mut self, i: usize, budget: &mut usize) {
        while *budget > 0 {
            *budget -= 1;
            let Some(listener) = self.listeners.get(i) else {
                return;
            };
            match listener.accept() {
                Ok((stream, origin)) => {
                    let Some(stream) = admit(&self.shared, stream, &origin) else {
                        continue;
                    };
                    // Connections are dealt round-robin: exact balance, whatever the
                    // number of clients (see docs/architecture.md).
                    let target = not_busy(&self.shared, self.next_target % self.shared.threads);
                    self.next_target = self.next_target.wrapping_add(1);
                    if target == self.id {
                        self.adopt_as(stream, origin, false);
                    } else {
                        self.outbox[target].push(Msg::Adopt(stream, origin));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Out of descriptors: the spare one makes room to take the client and
                // tell it, rather than leave it waiting in the backlog (no readiness
                // event would come for it until another client connects).
                Err(e) if matches!(e.raw_os_error(), Some(EMFILE | ENFILE)) => {
                    if !self.refuse_one(i, &e) {
                        return;
                    }
                }
                // A connection reset before accept: on with the next.
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
                // A listener shut at exit (`stop_listening`) no longer listens.
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => return,
                Err(e) => {
                    crate::log!(Warning, "Accepting client connection: {e}");
                    return;
                }
            }
        }
    }

    /// CONFIG SET port / bind bound new listeners: they replace this worker's.
    fn take_new_listener(&mut self) {
        let Some(new) = self.shared.take_new_listener() else {
            return;
        };
        let mut new = new;
        // (A socket kept from the old ones is polled twice a moment, through two
        // descriptors: both lead to `accept`.)
        if register_listeners(self.poll.registry(), &mut new).is_err() {
            crate::log!(
                Warning,
                "cannot poll the new listeners; keeping the old ones"
            );
            for l in &mut new {
                let _ = self.poll.registry().deregister(l);
            }
            return;
        }
        for mut old in std::mem::replace(&mut self.listeners, new) {
            let _ = self.poll.registry().deregister(&mut old);
        }
        // Clients may already wait on them.
        self.accept();
    }

    /// With no descriptor left, takes one client pending on listener `i` with the spare
    /// descriptor, tells it `max number of clients reached` and closes it. False when
    /// even that failed (then the listeners are looked at again in a moment).
    fn refuse_one(&mut self, i: usize, error: &io::Error) -> bool {
        if self
            .last_fd_warning
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(1))
        {
            self.last_fd_warning = Some(Instant::now());
            crate::log!(
                Warning,
                "Accepting client connection: {error}; refusing clients until descriptors \
                 are freed (raise 'ulimit -n' or lower maxclients)"
            );
        }
        let Some(listener) = self.listeners.get(i) else {
            return false;
        };
        drop(self.spare_fd.take());
        let refused = match listener.accept() {
            Ok((mut stream, _)) => {
                use std::io::Write as _;
                let _ = stream.write(crate::errors::MAX_CLIENTS);
                self.shared
                    .rejected_connections
                    .fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(_) => false,
        };
        self.spare_fd = std::fs::File::open("/dev/null").ok();
        if !refused {
            // Try again soon: no event comes for clients already waiting.
            self.accept_retry = true;
        }
        refused
    }

    /// A new connection to serve: a client's, or (`master`) this replica's link to its
    /// master, whose client writes as the master does with no password asked (the link
    /// authenticated to the master).
    fn adopt_as(&mut self, stream: Stream, origin: Origin, master: bool) {
        self.next_gen += 1;
        let mut conn = new_conn(&self.shared, stream, origin, self.now, self.next_gen);
        if master {
            conn.client.master = true;
            conn.client.authenticated = true;
        }
        let key = self.conns.insert(conn);
        if self.register_conn(key) {
            // Bytes may have arrived before registration — after this iteration read
            // the clock: its commands must not run with a time from before they were
            // sent.
            self.now = clock::now_ms();
            self.serve(key);
        }
    }

    /// Registers connection `key`, just made, with the poll and the counts; false when
    /// it could not be (it is gone).
    pub(crate) fn register_conn(&mut self, key: usize) -> bool {
        let Some(conn) = self.conns.get_mut(key) else {
            return false;
        };
        if self
            .poll
            .registry()
            .register(&mut conn.stream, Token(key), Interest::READABLE)
            .is_err()
        {
            self.conns.remove(key);
            self.shared
                .connected_clients
                .fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        self.shared.clients_per_worker[self.id].fetch_add(1, Ordering::Relaxed);
        self.shared
            .total_connections
            .fetch_add(1, Ordering::Relaxed);
        // By id, for CLIENT TRACKING's REDIRECT.
        let me = ConnRef {
            worker: self.id,
            key,
            generation: conn.generation,
        };
        self.shared.tracking.connected(conn.client.id, me);
        true
    }

    /// Reads and runs a connection's requests until it has no complete request left and
    /// its socket is drained, it waits for work elsewhere, or its turn is over.
    pub(crate) fn serve(&mut self, key: usize) {
        let mut reads = 0;
        // `proto-max-bulk-len` may have changed (CONFIG SET).
        let max_bulk_len = self.shared.client_limits.max_bulk_len();
        if let Some(conn) = self.conns.get_mut(key) {
            let limits = conn.input.decoder.limits();
            if limits.max_bulk_len != max_bulk_len {
                conn.input.decoder.set_limits(goblin_protocol::Limits {
                    max_bulk_len,
                    ..limits
                });
            }
        }
        loop {
            self.run_requests(key);
            if self.weigh_client(key) {
                return;
            }
            let blocked = self.blocked_in_a_wait(key);
            let Some(conn) = self.conns.get_mut(key) else {
                return;
            };
            // A client blocked in a command is still read (up to a bound), so that its
            // disconnect is seen and ends the wait, as in Redis.
            let busy = conn.busy() && !(blocked && conn.input.pending() < BLOCKED_INPUT_MAX);
            if conn.closing || busy || conn.held_replies() > OUTPUT_HIGH_WATER || !conn.readable {
                break;
            }
            if reads == MAX_READS_PER_TURN {
                if !conn.scheduled {
                    conn.scheduled = true;
                    self.scheduled.push(key);
                }
                break;
            }
            reads += 1;
            let before = conn.input.pending();
            let outcome = conn.input.read_from(&conn.stream);
            self.net_in += conn.input.pending().saturating_sub(before) as u64;
            self.net_reads += 1;
            self.traffic_changed = true;
            if matches!(outcome, Ok(ReadOutcome::Full | ReadOutcome::Drained)) {
                conn.client.last_io = self.now;
                if conn.input.pending() > self.shared.client_limits.query_buffer() {
                    self.close_over_query_limit(key);
                    return;
                }
            }
            let conn = if self.clients_limit != 0 && conn.input.has_pending() {
                if self.weigh_client_now(key) {
                    return;
                }
                let Some(conn) = self.conns.get_mut(key) else {
                    return;
                };
                conn
            } else {
                conn
            };
            match outcome {
                Ok(ReadOutcome::Full) => {}
                Ok(ReadOutcome::Drained) if conn.read_to_end => {}
                Ok(ReadOutcome::Drained | ReadOutcome::WouldBlock) => conn.readable = false,
                // (Held by CLIENT PAUSE too: its command never runs, as in Redis.)
                Ok(ReadOutcome::Eof) if blocked || conn.paused => {
                    self.close(key);
                    return;
                }
                Ok(ReadOutcome::Eof) => {
                    conn.readable = false;
                    conn.peer_closed = true;
                }
                Err(_) => {
                    self.close(key);
                    return;
                }
            }
        }
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        if conn.peer_closed && !conn.busy() && conn.deferred.is_none() {
            // Whatever is left is an incomplete request that will never be completed.
            conn.closing = true;
        }
        if conn.output.pending() > 0 || conn.closing {
            self.mark_dirty(key);
        }
    }

    /// Writes every dirty connection's output once.
    fn flush_all(&mut self) {
        self.shard.sync_log(&self.shared);
        // Oversized idle buffers are remembered only under a memory limit (given back
        // before keys are evicted), and given back once written while memory is over it,
        // as Redis frees its reply list once written: not counted against `maxmemory`
        // when the next eviction looks (what evicting made, the invalidations of the
        // keys evicted, would otherwise evict more).
        let maxmemory = self.shared.memory.maxmemory();
        let limited = maxmemory > 0;
        let pressed = limited && crate::memory::counted() > maxmemory;
        let mut dirty = std::mem::take(&mut self.dirty);
        if !self.replica_keys.is_empty() {
            // The replicas' stream first, then the replies: redis-server's replica has the
            // write before the client that made it can ask the replica for it. (Moved to
            // the front in place: no sort, nothing allocated on this path.)
            let mut front = 0;
            for i in 0..dirty.len() {
                if self.replica_keys.contains(&dirty[i]) {
                    dirty.swap(front, i);
                    front += 1;
                }
            }
        }
        for key in dirty.drain(..) {
            let Some(conn) = self.conns.get_mut(key) else {
                continue;
            };
            conn.dirty = false;
            // Its output limit first; then what its new replies make it weigh.
            if output_over(&self.shared.client_limits, conn, self.now) {
                self.close_over_output_limit(key);
                continue;
            }
            let conn = if self.clients_limit != 0 {
                if self.weigh_client_now(key) {
                    continue;
                }
                let Some(conn) = self.conns.get_mut(key) else {
                    continue;
                };
                conn
            } else {
                conn
            };
            // A connection waiting for replies from other shards gets its output written
            // with the rest of its pipeline's: one write for the pipeline, as with a
            // local one, instead of one per shard round trip. (`after_wait` marks it
            // dirty again when the wait ends.) Not one blocked in a command (BLPOP,
            // GOBLIN.CLAIM … BLOCK): the replies before it go now, as from redis-server.
            if (conn.busy() || conn.deferred.is_some())
                && !conn.closing
                && !conn.stalled
                && conn.output.pending() < FLUSH_EARLY_ABOVE
                && !parked(&self.jobs, conn.job)
            {
                continue;
            }
            let before = conn.output.pending();
            let written = conn.output.write_to(&mut conn.stream);
            self.net_out += before.saturating_sub(conn.output.pending()) as u64;
            self.net_writes += 1;
            self.traffic_changed = true;
            match written {
                Ok(true) => {
                    if pressed {
                        conn.output.release_idle();
                    } else if limited
                        && conn.output.is_fat()
                        && self.fat_outputs.len() < FAT_OUTPUTS_MAX
                    {
                        self.fat_outputs.push(key);
                    }
                    if conn.closing && !conn.busy() {
                        self.close(key);
                        continue;
                    }
                    if conn.wants_writable {
                        conn.wants_writable = false;
                        let _ = self.poll.registry().reregister(
                            &mut conn.stream,
                            Token(key),
                            Interest::READABLE,
                        );
                    }
                    // A batch held back at its shard can go on.
                    if conn.stalled {
                        self.resume_stalled(key);
                    }
                    // Input held back by a full output buffer can run now.
                    let Some(conn) = self.conns.get_mut(key) else {
                        continue;
                    };
                    if (conn.input.has_pending() || conn.readable)
                        && !conn.busy()
                        && !conn.scheduled
                    {
                        conn.scheduled = true;
                        self.scheduled.push(key);
                    }
                }
                Ok(false) => {
                    if !conn.wants_writable {
                        conn.wants_writable = true;
                        let interest = Interest::READABLE | Interest::WRITABLE;
                        let _ =
                            self.poll
                                .registry()
                                .reregister(&mut conn.stream, Token(key), interest);
                    }
                }
                Err(_) => self.close(key),
            }
        }
        crate::util::reuse(&mut self.dirty, dirty);
        self.measure_replicas();
        // Resumed batches and their messages go out now.
        if !self.local.is_empty() {
            self.drain();
        }
        self.send_monitor_feed();
        self.send_repl_feed();
        self.send_outboxes();
    }

    /// Closes the client `key` if its pending replies passed its class's output limit
    /// (`client-output-buffer-limit`); whether it did.
    #[inline]
    pub(crate) fn past_output_limit(&mut self, key: usize) -> bool {
        let Some(conn) = self.conns.get_mut(key) else {
            return false;
        };
        if output_over(&self.shared.client_limits, conn, self.now) {
            self.close_over_output_limit(key);
            return true;
        }
        false
    }

    /// Closes a client whose pending replies passed its class's output limit
    /// (`client-output-buffer-limit`), logging it as redis-server does.
    fn close_over_output_limit(&mut self, key: usize) {
        self.close_logged(key, |info, _| {
            format!(
                "Client {info} scheduled to be closed ASAP for overcoming of output buffer limits."
            )
        });
    }

    /// Closes a client whose unprocessed input passed `client-query-buffer-limit`,
    /// logging it as redis-server does.
    fn close_over_query_limit(&mut self, key: usize) {
        self.close_logged(key, |info, conn| {
            let input = &conn.input.buf[conn.input.start..conn.input.end];
            let head = crate::util::repr(&input[..input.len().min(64)]);
            format!(
                "Closing client that reached max query buffer length: {info} (qbuf initial \
                 bytes: {head})"
            )
        });
    }

    /// Closes a client with a warning in the log that `message` words from its CLIENT
    /// LIST line and its connection.
    fn close_logged(&mut self, key: usize, message: impl FnOnce(&str, &Conn) -> String) {
        let blocked = self.blocked_in_a_wait(key);
        let now = self.now;
        if let Some(conn) = self.conns.get_mut(key) {
            let info = conn.info_line(blocked, now);
            crate::log!(Warning, "{}", message(&info, conn));
        }
        self.close(key);
    }

    /// Closes a connection; its slot stays until work in flight for it has answered.
    pub(crate) fn close(&mut self, key: usize) {
        self.unweigh(key);
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        if !conn.gone {
            conn.gone = true;
            conn.closing = true;
            if conn.paused {
                // (No longer held: INFO's blocked clients.)
                conn.paused = false;
                self.shared.blocked_clients.fetch_sub(1, Ordering::Relaxed);
            }
            if conn.client.monitor {
                let me = ConnRef {
                    worker: self.id,
                    key,
                    generation: conn.generation,
                };
                self.shared.monitors.remove(me);
            }
            if conn.client.replica {
                let me = ConnRef {
                    worker: self.id,
                    key,
                    generation: conn.generation,
                };
                crate::log!(
                    Notice,
                    "Connection with replica {}:{} lost.",
                    conn.client.replica_ip(),
                    conn.client.repl_port
                );
                self.shared.repl.remove(me);
            }
            self.shared.tracking.disconnected(conn.client.id);
            if conn.client.tracking.on {
                let me = ConnRef {
                    worker: self.id,
                    key,
                    generation: conn.generation,
                };
                self.shared
                    .tracking
                    .disable(crate::runtime::tracking::Reader {
                        id: conn.client.id,
                        conn: me,
                    });
            }
            if conn.client.subs.active() {
                let mut hub = crate::runtime::pubsub::Hub::new(
                    &mut self.subs,
                    &mut self.shard.pubsub,
                    self.id,
                    key,
                    conn.generation,
                );
                hub.leave_all(&self.shared.pubsub, &mut conn.client.subs);
            }
            let _ = self.poll.registry().deregister(&mut conn.stream);
            self.shared
                .connected_clients
                .fetch_sub(1, Ordering::Relaxed);
            self.shared.clients_per_worker[self.id].fetch_sub(1, Ordering::Relaxed);
            let stalled = std::mem::take(&mut conn.stalled);
            let (job, generation, shard) = (conn.job, conn.generation, conn.flight_shard);
            if stalled {
                // Its stalled batch will never be read: back, unrun.
                let from = ConnRef {
                    worker: self.id,
                    key,
                    generation,
                };
                self.route_one(shard, Msg::Resume(from, None));
            }
            if let Some(seq) = job {
                self.cancel_parked(key, seq);
            }
        }
        let Some(conn) = self.conns.get(key) else {
            return;
        };
        if !conn.busy() {
            self.conns.remove(key);
        }
    }

    /// A parked job of a closed connection is given up (a job with steps in flight
    /// finishes first, to release its locks).
    fn cancel_parked(&mut self, key: usize, seq: u64) {
        let mut out = Vec::new();
        let mut cancelled = false;
        if let Some(job) = self.jobs.get_mut(&seq) {
            let was = job.parked_state();
            cancelled = job.cancel(&self.shared, &mut out);
            let is = job.parked_state();
            self.note_blocked(was, is);
        }
        self.route(out);
        if cancelled {
            self.jobs.remove(&seq);
            if let Some(conn) = self.conns.get_mut(key) {
                conn.job = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::denied;
    use crate::config::Config;
    use crate::runtime::net::Origin;

    #[test]
    fn protected_mode_refuses_outsiders_without_a_password() {
        let mut config = Config::default();
        let from = |ip: &str| Origin::Tcp {
            peer: std::net::SocketAddr::new(ip.parse().expect("an address"), 5000),
            local: None,
        };
        let outside = from("10.1.2.3");
        for local in ["127.0.0.1", "::1", "::ffff:127.0.0.1"] {
            assert!(!denied(&config, &from(local)));
        }
        assert!(!denied(&config, &Origin::Unix("/tmp/g.sock".into())));
        assert!(denied(&config, &outside));
        config.requirepass = Some(b"pw".to_vec());
        assert!(!denied(&config, &outside));
        config.requirepass = None;
        config.protected_mode = false;
        assert!(!denied(&config, &outside));
    }
}
