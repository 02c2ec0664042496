//! The load engine: one thread per `--threads`, each owning one `mio::Poll`, its
//! connections and its [`Generator`]. Threads share nothing but a stop flag, a failure
//! list and the channel their progress and results travel on.
//!
//! Per connection, up to `--pipeline` requests are in flight. Closed loop: whenever
//! replies arrive, the connection is topped up at once, so it sends as fast as its
//! replies return. Open loop: request k of a connection is *intended* at
//! `phase + k·interval` and latency is measured from that intended time even when the
//! request leaves late (because the pipeline was full or the loop was busy), so a server
//! stall shows up in full in the percentiles instead of silently pausing the load
//! (coordinated omission).
//!
//! Costs are kept per event, not per request: one clock read per readable event (all
//! replies parsed from that read share it, and so do the requests it triggers), replies
//! measured with `reply_len` without building frames (unless the workload needs their
//! values), requests encoded into the connection's reused output buffer and written with
//! one `write` per event, and `WRITABLE` interest registered only after a short write.
//!
//! With the claim workload's `--block`, each thread also opens `--waiters` *waiter
//! connections*. Each carries one duplicate's `GOBLIN.CLAIM … BLOCK` at a time, so that a
//! waiting call never holds up other requests (above all the publication it waits for),
//! and its reply's latency, a wait rather than a service time, stays out of the latency
//! figures. When the run ends, waits still parked get a short grace ([`END_GRACE`]) and
//! are then left unanswered: the detector judges them, and the connections close.
//!
//! With `--cluster`, each logical client (a `--connections` or waiter connection) has one
//! connection per cluster node: to every node of the slot map at start (opened before
//! the clock starts), and to nodes learned later when first needed. `--pipeline` bounds
//! a client's requests in flight over all its nodes. Each request is encoded into a
//! buffer of its own and written to the connection to the node serving its key's slot
//! ([`crate::cluster::request_slot`]); the buffer is kept until the final answer, so that
//! a request answered `-MOVED` (the map is updated), `-ASK` (sent again after `ASKING`)
//! or `-TRYAGAIN`/`-CLUSTERDOWN` (retried after a backoff) is sent again as it was, still
//! in flight and still timed from its first send. Only the final answer is a reply: it is
//! measured, and handed to the workload (and the claim detector) then.

use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Barrier, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use goblin_protocol::{Frame, parse_reply, reply_len};
use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Registry, Token};

use crate::cluster::{ClusterShared, Redirect, SlotMap, UNASSIGNED, request_slot};
use crate::stats::{Counters, new_histogram};
use crate::workload::{Generator, Op};

/// Initial read buffer per connection; grows (doubling) only for a reply larger than it.
const READ_BUF: usize = 64 * 1024;
/// Initial write buffer per connection.
const WRITE_BUF: usize = 16 * 1024;
/// How long to wait for a connection to be accepted.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// After the run ends, how long outstanding replies may take before the server is
/// declared stuck (and the run failed).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Progress is reported this often.
const TICK_NS: u64 = 1_000_000_000;
/// A wall-clock offset reading whose two wall-clock reads are further apart than this was
/// interrupted, and is dropped.
const WALL_SAMPLE_MAX_NS: u64 = 10_000;
/// Longest sleep in `poll`, so that a failure elsewhere stops this thread promptly.
const MAX_POLL_WAIT: Duration = Duration::from_millis(100);
/// `epoll_wait` sleeps in whole milliseconds (mio rounds up). A timer due sooner than
/// this is waited for by polling without sleeping, so open-loop sends and follow-ups
/// leave on time rather than up to a millisecond late. Sleeping on a precise timer (a
/// timerfd in the poll set) was tried and measured worse: on a virtual machine each wake-up
/// costs tens of microseconds, which lands on every send and reply (20k GET/s against
/// redis-server: p50 0.115 ms sleeping, 0.033 ms polling). The price is a busy core during
/// open-loop runs and follow-up-heavy workloads, so pin the load generator, and do not run
/// it under SCHED_FIFO: real-time throttling would stall it for 50 ms every second.
const SPIN_BELOW_NS: u64 = 1_000_000;
/// Once the run has ended and only waits on waiter connections are unanswered, how long
/// they may still take: a wait whose result or claim came just before the end is answered
/// well within this; one that is not has nothing coming (its worker crashed, stalled or
/// was cut off by the end) and would hold the run for up to a lease.
const END_GRACE: Duration = Duration::from_millis(200);

/// What every thread needs to know about the run's timeline. Times are nanoseconds since
/// `t0`, the instant all threads were connected.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Requests kept in flight per connection.
    pub pipeline: usize,
    /// Connections per thread.
    pub connections: usize,
    /// Waiter connections per thread (claim `--block`), after the others.
    pub waiters: usize,
    /// Threads.
    pub threads: usize,
    /// When measuring starts (the warmup's end).
    pub measure_start: u64,
    /// When sending stops, in duration mode.
    pub end: Option<u64>,
    /// Requests each thread sends while measuring, in requests mode.
    pub requests_per_thread: Option<Vec<u64>>,
    /// Open loop: nanoseconds between one connection's requests.
    pub interval_ns: Option<f64>,
}

/// State shared by all threads.
#[derive(Debug, Default)]
pub struct Shared {
    stop: AtomicBool,
    failures: Mutex<Vec<String>>,
    t0: OnceLock<Instant>,
}

impl Shared {
    /// Records a failure and stops every thread.
    pub fn fail(&self, msg: String) {
        if let Ok(mut f) = self.failures.lock() {
            f.push(msg);
        }
        self.stop.store(true, Ordering::Relaxed);
    }

    /// The failures recorded so far.
    pub fn failures(&self) -> Vec<String> {
        self.failures.lock().map(|f| f.clone()).unwrap_or_default()
    }

    /// Sets the run's time origin (once).
    pub fn start_clock(&self) -> Instant {
        *self.t0.get_or_init(Instant::now)
    }
}

/// A message from a thread to the main thread.
#[derive(Debug)]
pub enum Message {
    /// The replies of the last interval (about a second).
    Progress(Progress),
    /// The thread finished; its final figures.
    Done(Box<ThreadResult>),
}

/// One thread's interval report.
#[derive(Debug)]
pub struct Progress {
    /// Whether the interval belongs to the measured phase (not the warmup).
    pub measuring: bool,
    /// Server error replies in the interval.
    pub errors: u64,
    /// Latencies of the interval's replies.
    pub hist: Histogram<u64>,
}

/// One thread's final figures.
#[derive(Debug)]
pub struct ThreadResult {
    /// Latencies of every reply received while measuring.
    pub hist: Histogram<u64>,
    /// Errors and workload counters.
    pub counters: Counters,
    /// When the last measured reply arrived (ns since t0).
    pub last_reply: u64,
}

#[derive(Debug)]
struct Pending {
    /// Intended send time (ns since t0): latency is measured from here.
    sent: u64,
    op: Op,
    /// `--cluster`: the request's bytes, kept to send again after a redirect (empty
    /// otherwise).
    req: Vec<u8>,
    /// `--cluster`: MOVED and ASK redirects this request has followed.
    redirects: u8,
    /// `--cluster`: TRYAGAIN and CLUSTERDOWN retries this request has made.
    retries: u16,
    /// `--cluster`: this is the `ASKING` sent ahead of an ASK-redirected request; its
    /// reply is dropped.
    asking: bool,
}

impl Pending {
    #[inline]
    fn new(sent: u64, op: Op) -> Pending {
        Pending {
            sent,
            op,
            req: Vec::new(),
            redirects: 0,
            retries: 0,
            asking: false,
        }
    }
}

/// One TCP connection (to the server, or with `--cluster` to one node).
struct Conn {
    stream: TcpStream,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    wbuf: Vec<u8>,
    wpos: usize,
    want_write: bool,
    inflight: VecDeque<Pending>,
    /// The logical client this connection belongs to (its index in `Worker::clients`).
    client: usize,
    /// The peer.
    addr: SocketAddr,
    /// `--cluster`: in `Worker::dirty`, awaiting a flush.
    dirty: bool,
}

/// One logical client of the workload (a `--connections` or waiter connection). Without
/// `--cluster` it owns one connection, of the same index; with it, one per node.
struct Client {
    /// A waiter connection: one blocking claim at a time, nothing else.
    waiter: bool,
    /// Requests sent and not finally answered, over all of this client's connections
    /// (redirected requests and those waiting for a retry included).
    inflight: usize,
    /// Open loop: this client's first intended send, and requests scheduled so far.
    phase_ns: f64,
    scheduled: u64,
    /// Connection index per node index (`NO_CONN` where none is open yet).
    conns: Vec<usize>,
}

/// No connection to this node yet.
const NO_CONN: usize = usize::MAX;

impl Client {
    fn next_intended(&self, interval: f64) -> u64 {
        (self.phase_ns + self.scheduled as f64 * interval) as u64
    }
}

/// `--cluster`: a MOVED or ASK chain longer than this ends the request with its last
/// redirect counted as its (error) reply, as cluster clients give up after 16 hops.
const MAX_REDIRECTS: u8 = 16;
/// `--cluster`: TRYAGAIN or CLUSTERDOWN retries before the request ends with that error as
/// its reply (with [`retry_backoff_ns`], about ten seconds).
const MAX_RETRIES: u16 = 200;
/// `ASKING`, sent ahead of an ASK-redirected request.
const ASKING: &[u8] = b"*1\r\n$6\r\nASKING\r\n";
/// Request buffers kept for reuse (`--cluster`), per thread.
const MAX_SPARE_BUFFERS: usize = 4096;

/// The wait before retry number `n` (from 1) after TRYAGAIN or CLUSTERDOWN: 10, 20, 40,
/// then 50 ms.
fn retry_backoff_ns(n: u16) -> u64 {
    let ms = (10u64 << n.saturating_sub(1).min(3)).min(50);
    ms * 1_000_000
}

/// A request waiting for its retry after TRYAGAIN or CLUSTERDOWN.
struct Retry {
    due: u64,
    seq: u64,
    client: usize,
    pending: Pending,
}

impl PartialEq for Retry {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl Eq for Retry {}
impl PartialOrd for Retry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Retry {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest first.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.due, other.seq).cmp(&(self.due, self.seq))
    }
}

/// A request answered with a redirect, to be followed once its connection's replies are
/// consumed.
struct Bounce {
    client: usize,
    pending: Pending,
    redirect: Redirect,
    /// The node that answered (an empty host in the redirect means its host).
    from: SocketAddr,
}

/// `--cluster`: one thread's view of the cluster and its redirect bookkeeping.
struct Routing {
    shared: Arc<ClusterShared>,
    /// This thread's slot map; node indexes only grow, as clients' connections are
    /// indexed by them.
    map: SlotMap,
    /// The version of the shared map last adopted.
    version: u64,
    retries: BinaryHeap<Retry>,
    retry_seq: u64,
    bounced: Vec<Bounce>,
    spare: Vec<Vec<u8>>,
}

impl Routing {
    fn new(shared: Arc<ClusterShared>) -> Routing {
        let (map, version) = shared.snapshot();
        Routing {
            shared,
            map,
            version,
            retries: BinaryHeap::new(),
            retry_seq: 0,
            bounced: Vec::new(),
            spare: Vec::new(),
        }
    }

    fn take_buf(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_default()
    }

    fn give_back(&mut self, mut buf: Vec<u8>) {
        if self.spare.len() < MAX_SPARE_BUFFERS && buf.capacity() > 0 {
            buf.clear();
            self.spare.push(buf);
        }
    }

    /// Takes the shared map if another thread (or this one) refreshed it.
    fn adopt_shared(&mut self) {
        if self.shared.version() == self.version {
            return;
        }
        let (map, version) = self.shared.snapshot();
        let local: Vec<u16> = map.nodes.iter().map(|&a| self.map.node_index(a)).collect();
        for (mine, &theirs) in self.map.slots.iter_mut().zip(&map.slots) {
            *mine = local
                .get(usize::from(theirs))
                .copied()
                .unwrap_or(UNASSIGNED);
        }
        self.version = version;
    }

    /// A `-MOVED slot addr`: the map is refreshed (at most every 100 ms over the run),
    /// and the slot is `addr`'s, whatever the refresh said.
    fn moved(&mut self, slot: u16, addr: SocketAddr) {
        self.shared.maybe_refresh(addr);
        self.adopt_shared();
        let node = self.map.node_index(addr);
        if let Some(s) = self.map.slots.get_mut(usize::from(slot)) {
            *s = node;
        }
    }
}

struct Recorder {
    /// Replies of a batch sent together and read together share one latency; they are
    /// recorded as one `record_n` (value, count) run instead of one by one.
    run_latency: u64,
    run_count: u64,
    interval: Histogram<u64>,
    total: Histogram<u64>,
    interval_errors: u64,
    measuring: bool,
    last_reply: u64,
    counters: Counters,
}

impl Recorder {
    #[inline]
    fn reply(&mut self, sent: u64, now: u64) {
        let latency = now.saturating_sub(sent).max(1);
        if latency != self.run_latency {
            self.flush_run();
            self.run_latency = latency;
        }
        self.run_count += 1;
        self.last_reply = now;
    }

    /// Records the pending run of equal latencies.
    #[inline]
    fn flush_run(&mut self) {
        if self.run_count > 0 {
            self.interval
                .saturating_record_n(self.run_latency, self.run_count);
            self.run_count = 0;
        }
    }

    /// A reply to a call that may have waited: counted, kept out of the latencies.
    #[inline]
    fn blocking_reply(&mut self, now: u64) {
        if self.measuring {
            self.counters.blocking_replies += 1;
        }
        self.last_reply = now;
    }

    fn error(&mut self, text: &[u8]) {
        self.counters.errors.add(text);
        self.interval_errors += 1;
    }
}

/// Everything one thread needs to start.
pub struct ThreadSpec {
    /// Thread number, from 0.
    pub index: usize,
    /// The server (with `--cluster`, the seed node).
    pub addr: SocketAddr,
    /// `--cluster`: the cluster's shared state (slot map, refresh gate).
    pub cluster: Option<Arc<ClusterShared>>,
    /// The timeline.
    pub plan: Arc<Plan>,
    /// This thread's generator.
    pub generator: Generator,
    /// Shared flags and clock.
    pub shared: Arc<Shared>,
    /// Where progress and the result go.
    pub tx: Sender<Message>,
    /// Met once every thread has connected; the main thread then starts the clock and
    /// meets it a second time.
    pub barrier: Arc<Barrier>,
}

/// Runs one load thread to completion. Failures are recorded in [`Shared`]; the thread
/// always ends by sending [`Message::Done`].
pub fn run_thread(spec: ThreadSpec) {
    let ThreadSpec {
        index,
        addr,
        cluster,
        plan,
        generator,
        shared,
        tx,
        barrier,
    } = spec;
    let routing = cluster.map(Routing::new);
    let connected = connect_all(addr, &plan, routing.as_ref());
    barrier.wait();
    barrier.wait();
    let t0 = shared.start_clock();
    let mut rec = Recorder {
        run_latency: 0,
        run_count: 0,
        interval: new_histogram(),
        total: new_histogram(),
        interval_errors: 0,
        measuring: false,
        last_reply: 0,
        counters: Counters::default(),
    };
    let outcome = connected.and_then(|(poll, conns, clients)| {
        let budget = plan
            .requests_per_thread
            .as_ref()
            .map(|v| v.get(index).copied().unwrap_or(0));
        let mut w = Worker {
            index,
            poll,
            conns,
            clients,
            dirty: Vec::new(),
            routing,
            generator,
            plan: &plan,
            shared: &shared,
            tx: &tx,
            t0,
            budget,
            stopping: false,
            drain_deadline: u64::MAX,
            waits_only_since: None,
            next_tick: TICK_NS,
        };
        let r = w.run(&mut rec);
        w.collect(&mut rec);
        r
    });
    if let Err(msg) = outcome {
        shared.fail(format!("thread {index}: {msg}"));
    }
    if rec.measuring {
        let _ = rec.total.add(&rec.interval);
    }
    let result = ThreadResult {
        hist: rec.total,
        counters: rec.counters,
        last_reply: rec.last_reply,
    };
    let _ = tx.send(Message::Done(Box::new(result)));
}

/// Opens connection number `i` (its mio token) to `addr` for client `client`.
fn open_conn(
    registry: &Registry,
    addr: SocketAddr,
    i: usize,
    client: usize,
) -> Result<Conn, String> {
    let fail = |e: io::Error| format!("connection {i}: connect to {addr}: {e}");
    let std = std::net::TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).map_err(fail)?;
    std.set_nodelay(true).map_err(fail)?;
    std.set_nonblocking(true).map_err(fail)?;
    let mut stream = TcpStream::from_std(std);
    registry
        .register(&mut stream, Token(i), Interest::READABLE)
        .map_err(fail)?;
    Ok(Conn {
        stream,
        rbuf: vec![0; READ_BUF],
        rstart: 0,
        rend: 0,
        wbuf: Vec::with_capacity(WRITE_BUF),
        wpos: 0,
        want_write: false,
        inflight: VecDeque::new(),
        client,
        addr,
        dirty: false,
    })
}

/// Connects the plan's clients (`connections`, then `waiters` waiter connections): one
/// connection each, or with `--cluster` one to each node the slot map names at start.
fn connect_all(
    addr: SocketAddr,
    plan: &Plan,
    routing: Option<&Routing>,
) -> Result<(Poll, Vec<Conn>, Vec<Client>), String> {
    let poll = Poll::new().map_err(|e| format!("creating the poller: {e}"))?;
    let n = plan.connections + plan.waiters;
    let nodes = match &routing {
        Some(r) => r.map.nodes.clone(),
        None => vec![addr],
    };
    let mut conns = Vec::with_capacity(n * nodes.len());
    let mut clients = Vec::with_capacity(n);
    for ci in 0..n {
        let mut links = Vec::with_capacity(nodes.len());
        for &node in &nodes {
            links.push(conns.len());
            conns.push(open_conn(poll.registry(), node, conns.len(), ci)?);
        }
        clients.push(Client {
            waiter: ci >= plan.connections,
            inflight: 0,
            phase_ns: 0.0,
            scheduled: 0,
            conns: links,
        });
    }
    Ok((poll, conns, clients))
}

/// What [`draw`] produced.
enum Draw {
    /// A request, intended (or due) at this time, was encoded.
    Sent(u64, Op),
    /// A duplicate was queued for a waiter connection: nothing was encoded.
    Queued,
    /// Nothing is due now.
    Stop,
}

/// Encodes into `out` the next request for `client`: a due follow-up first, then a new
/// request (closed loop: now; open loop: if its intended time has come), within the
/// requests-mode budget.
#[inline]
fn draw(
    generator: &mut Generator,
    client: &mut Client,
    out: &mut Vec<u8>,
    plan: &Plan,
    budget: &mut Option<u64>,
    measuring: bool,
    now: u64,
) -> Draw {
    if let Some((due, op)) = generator.pop_due(now) {
        generator.encode_followup(op, out, due);
        return Draw::Sent(due, op);
    }
    if generator.backlogged() {
        return Draw::Stop;
    }
    let intended = match plan.interval_ns {
        None => now,
        Some(interval) => {
            let due = client.next_intended(interval);
            if due > now {
                return Draw::Stop;
            }
            client.scheduled += 1;
            due
        }
    };
    if measuring && let Some(b) = budget {
        if *b == 0 {
            return Draw::Stop;
        }
        *b -= 1;
    }
    match generator.next(out, intended) {
        Some(op) => Draw::Sent(intended, op),
        None => Draw::Queued,
    }
}

struct Worker<'a> {
    index: usize,
    poll: Poll,
    conns: Vec<Conn>,
    clients: Vec<Client>,
    /// `--cluster`: connections written to since their last flush.
    dirty: Vec<usize>,
    /// `--cluster`: the slot map and redirect bookkeeping.
    routing: Option<Routing>,
    generator: Generator,
    plan: &'a Plan,
    shared: &'a Shared,
    tx: &'a Sender<Message>,
    t0: Instant,
    /// Requests this thread may still send while measuring (requests mode).
    budget: Option<u64>,
    /// No more requests are sent; outstanding replies are awaited.
    stopping: bool,
    drain_deadline: u64,
    /// Since when, after the end, only waits have been unanswered.
    waits_only_since: Option<u64>,
    next_tick: u64,
}

impl Worker<'_> {
    #[inline]
    fn now(&self) -> u64 {
        self.t0.elapsed().as_nanos() as u64
    }

    /// The claim workload: tells the detector how far the wall clock, which servers time
    /// leases on, reads ahead of the monotonic clock it judges by. Read once per poll
    /// round, after the wait: a clock step that shortened a lease happened before the
    /// server acted on it, so before the reply that shows it is read. A reading
    /// interrupted between its clock reads (the thread preempted) is dropped.
    fn sample_wall_clock(&mut self) {
        if self.generator.claim_detector().is_none() {
            return;
        }
        let wall = || {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i64)
        };
        let before = wall();
        let mono = self.now() as i64;
        let after = wall();
        if after.abs_diff(before) <= WALL_SAMPLE_MAX_NS {
            self.generator
                .wall_clock_offset(before / 2 + after / 2 - mono);
        }
    }

    fn run(&mut self, rec: &mut Recorder) -> Result<(), String> {
        let plan = self.plan;
        for conn in &mut self.conns {
            conn.inflight.reserve(plan.pipeline);
        }
        if let Some(interval) = plan.interval_ns {
            // Stagger clients evenly over one interval so sends are spread in time.
            let total = (plan.threads * plan.connections) as f64;
            for (i, c) in self.clients.iter_mut().enumerate() {
                let global = (self.index * plan.connections + i) as f64;
                c.phase_ns = interval * global / total;
            }
        }
        let timers = plan.interval_ns.is_some() || self.generator.has_followups();
        let mut events = Events::with_capacity(self.conns.len().max(16));
        self.sample_wall_clock();
        let now = self.now();
        self.phase(rec, now);
        self.top_up_all(now, rec)?;
        loop {
            if self.shared.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let now = self.now();
            self.phase(rec, now);
            self.send_retries(now)?;
            if self.stopping {
                let outstanding: usize = self.clients.iter().map(|c| c.inflight).sum();
                if outstanding == 0 {
                    return Ok(());
                }
                let waits_only = self.clients.iter().all(|c| c.waiter || c.inflight == 0);
                if !waits_only {
                    self.waits_only_since = None;
                } else if let Some(since) = self.waits_only_since {
                    if now.saturating_sub(since) >= END_GRACE.as_nanos() as u64 {
                        self.abandon_waits(now);
                        return Ok(());
                    }
                } else {
                    self.waits_only_since = Some(now);
                }
                if now > self.drain_deadline {
                    return Err(format!(
                        "{outstanding} requests still unanswered {:.0} s after the run ended",
                        DRAIN_TIMEOUT.as_secs_f64()
                    ));
                }
            } else if timers {
                self.top_up_all(now, rec)?;
            }
            let timeout = self.timeout(rec, now, timers);
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(format!("poll: {e}"));
            }
            self.sample_wall_clock();
            for event in events.iter() {
                let i = event.token().0;
                let now = self.now();
                if event.is_readable() || event.is_read_closed() || event.is_error() {
                    self.read(i, now, rec)?;
                    self.follow_redirects(now, rec)?;
                }
                let client = self.conns.get(i).map_or(i, |c| c.client);
                self.top_up(client, now, rec)?;
                self.flush(i)?;
            }
            // --cluster: the requests this round's events routed, written once per
            // connection (without --cluster, `flush` above wrote each client's).
            self.flush_dirty()?;
        }
    }

    /// Tops up every client and flushes what they wrote.
    fn top_up_all(&mut self, now: u64, rec: &Recorder) -> Result<(), String> {
        for i in 0..self.clients.len() {
            self.top_up(i, now, rec)?;
            if self.routing.is_none() {
                self.flush(i)?;
            }
        }
        self.flush_dirty()
    }

    /// Moves the run through its phases: the warmup's end, progress ticks, the end.
    fn phase(&mut self, rec: &mut Recorder, now: u64) {
        if !rec.measuring && now >= self.plan.measure_start {
            self.report(rec);
            rec.measuring = true;
        }
        if now >= self.next_tick {
            self.report(rec);
            while self.next_tick <= now {
                self.next_tick += TICK_NS;
            }
        }
        if let Some(end) = self.plan.end
            && now >= end
        {
            self.stop_sending(now);
        }
        if self.budget == Some(0) && rec.measuring {
            self.stop_sending(now);
        }
    }

    fn stop_sending(&mut self, now: u64) {
        if !self.stopping {
            self.stopping = true;
            self.drain_deadline = now + DRAIN_TIMEOUT.as_nanos() as u64;
        }
    }

    /// Sends the interval's figures to the main thread and starts a new interval.
    fn report(&self, rec: &mut Recorder) {
        if rec.interval.is_empty() && rec.interval_errors == 0 {
            return;
        }
        if rec.measuring {
            // Same bounds on both sides: cannot fail.
            let _ = rec.total.add(&rec.interval);
        }
        let progress = Progress {
            measuring: rec.measuring,
            errors: rec.interval_errors,
            hist: rec.interval.clone(),
        };
        let _ = self.tx.send(Message::Progress(progress));
        rec.interval.reset();
        rec.interval_errors = 0;
    }

    /// Gives up on the waits still unanswered at the end: the generator judges them.
    fn abandon_waits(&mut self, now: u64) {
        let clients = &self.clients;
        let is_waiter = |ci: usize| clients.get(ci).is_some_and(|c| c.waiter);
        let mut waits: Vec<(Op, u64)> = self
            .conns
            .iter_mut()
            .filter(|c| is_waiter(c.client))
            .flat_map(|c| c.inflight.drain(..))
            .filter(|p| !p.asking)
            .map(|p| (p.op, p.sent))
            .collect();
        if let Some(r) = &mut self.routing {
            let retries = std::mem::take(&mut r.retries);
            for retry in retries {
                if is_waiter(retry.client) {
                    waits.push((retry.pending.op, retry.pending.sent));
                } else {
                    r.retries.push(retry);
                }
            }
        }
        self.generator.abandon(&waits, now);
    }

    /// Copies the workload's counters into the recorder at the end of the run.
    fn collect(&self, rec: &mut Recorder) {
        if let Some(d) = self.generator.claim_detector() {
            rec.counters.claim = d.stats().clone();
            rec.counters.violations = d.described().to_vec();
        }
        if let Some(h) = self.generator.dup_wait() {
            rec.counters.dup_wait.0 = h.clone();
        }
        if let Some(l) = self.generator.lock_stats() {
            rec.counters.lock = l.clone();
        }
    }

    fn timeout(&self, rec: &Recorder, now: u64, timers: bool) -> Duration {
        let mut wake = self.next_tick;
        if !rec.measuring {
            wake = wake.min(self.plan.measure_start);
        }
        if let Some(retry) = self.routing.as_ref().and_then(|r| r.retries.peek()) {
            wake = wake.min(retry.due);
        }
        if self.stopping {
            wake = wake.min(self.drain_deadline);
            if let Some(since) = self.waits_only_since {
                wake = wake.min(since.saturating_add(END_GRACE.as_nanos() as u64));
            }
        } else {
            if let Some(end) = self.plan.end {
                wake = wake.min(end);
            }
            if timers {
                let mut room = false;
                for c in &self.clients {
                    if c.waiter || c.inflight >= self.plan.pipeline {
                        continue;
                    }
                    room = true;
                    if let Some(interval) = self.plan.interval_ns {
                        wake = wake.min(c.next_intended(interval));
                    }
                }
                if room && let Some(due) = self.generator.next_due() {
                    wake = wake.min(due);
                }
            }
        }
        let wait = wake.saturating_sub(now);
        if wait < SPIN_BELOW_NS {
            Duration::ZERO
        } else {
            Duration::from_millis(wait / 1_000_000).min(MAX_POLL_WAIT)
        }
    }

    /// Fills client `i` up to the pipeline depth: due follow-ups first, then new
    /// requests (closed loop: now; open loop: those whose intended time has come). A
    /// waiter client takes the longest-queued wait, if it is idle. Without `--cluster`
    /// the requests go straight into the client's connection; with it, each to the
    /// connection to its slot's node.
    #[inline]
    fn top_up(&mut self, i: usize, now: u64, rec: &Recorder) -> Result<(), String> {
        if self.routing.is_some() {
            return self.top_up_cluster(i, now, rec);
        }
        let pipeline = self.plan.pipeline;
        let (Some(client), Some(c)) = (self.clients.get_mut(i), self.conns.get_mut(i)) else {
            return Ok(());
        };
        if client.waiter {
            if client.inflight == 0
                && !self.stopping
                && let Some(op) = self.generator.next_wait(&mut c.wbuf, now)
            {
                c.inflight.push_back(Pending::new(now, op));
                client.inflight += 1;
            }
            return Ok(());
        }
        while client.inflight < pipeline && !self.stopping {
            let drawn = draw(
                &mut self.generator,
                client,
                &mut c.wbuf,
                self.plan,
                &mut self.budget,
                rec.measuring,
                now,
            );
            match drawn {
                Draw::Sent(sent, op) => {
                    c.inflight.push_back(Pending::new(sent, op));
                    client.inflight += 1;
                }
                Draw::Queued => {}
                Draw::Stop => break,
            }
        }
        Ok(())
    }

    /// [`Worker::top_up`] with `--cluster`: each request is encoded into a buffer of its
    /// own (kept until its final answer, to be sent again after a redirect) and routed.
    fn top_up_cluster(&mut self, i: usize, now: u64, rec: &Recorder) -> Result<(), String> {
        let pipeline = self.plan.pipeline;
        loop {
            let (Some(client), Some(r)) = (self.clients.get_mut(i), self.routing.as_mut()) else {
                return Ok(());
            };
            if self.stopping || client.inflight >= pipeline.max(1) {
                return Ok(());
            }
            let mut buf = r.take_buf();
            let drawn = if client.waiter {
                if client.inflight > 0 {
                    r.give_back(buf);
                    return Ok(());
                }
                match self.generator.next_wait(&mut buf, now) {
                    Some(op) => Draw::Sent(now, op),
                    None => Draw::Stop,
                }
            } else {
                draw(
                    &mut self.generator,
                    client,
                    &mut buf,
                    self.plan,
                    &mut self.budget,
                    rec.measuring,
                    now,
                )
            };
            match drawn {
                Draw::Sent(sent, op) => {
                    client.inflight += 1;
                    let mut p = Pending::new(sent, op);
                    p.req = buf;
                    self.route(i, p, None)?;
                }
                Draw::Queued => r.give_back(buf),
                Draw::Stop => {
                    r.give_back(buf);
                    return Ok(());
                }
            }
        }
    }

    /// `--cluster`: sends `p` (already counted in its client's in-flight requests) on
    /// client `ci`'s connection to the node serving its key's slot (any node for a
    /// request with no key), or with `ask` to that node, preceded by `ASKING`.
    fn route(&mut self, ci: usize, p: Pending, ask: Option<SocketAddr>) -> Result<(), String> {
        let Some(r) = self.routing.as_mut() else {
            return Ok(());
        };
        let node = match ask {
            Some(addr) => r.map.node_index(addr),
            None => {
                let owner = request_slot(&p.req)
                    .and_then(|s| r.map.slots.get(usize::from(s)).copied())
                    .filter(|&n| n != UNASSIGNED);
                match owner {
                    Some(n) => n,
                    // No key, or a slot nobody serves (the node will redirect): the
                    // client's first open connection, else the first node.
                    None => self
                        .clients
                        .get(ci)
                        .and_then(|c| c.conns.iter().position(|&l| l != NO_CONN))
                        .map_or(0, |n| n as u16),
                }
            }
        };
        let li = self.conn_to(ci, usize::from(node))?;
        let Some(c) = self.conns.get_mut(li) else {
            return Ok(());
        };
        if ask.is_some() {
            c.wbuf.extend_from_slice(ASKING);
            let mut asking = Pending::new(p.sent, p.op);
            asking.asking = true;
            c.inflight.push_back(asking);
        }
        c.wbuf.extend_from_slice(&p.req);
        c.inflight.push_back(p);
        if !c.dirty {
            c.dirty = true;
            self.dirty.push(li);
        }
        Ok(())
    }

    /// `--cluster`: client `ci`'s connection to node `node`, opened now if it has none.
    fn conn_to(&mut self, ci: usize, node: usize) -> Result<usize, String> {
        let Some(client) = self.clients.get(ci) else {
            return Err(format!("no client {ci}"));
        };
        if let Some(&li) = client.conns.get(node)
            && li != NO_CONN
        {
            return Ok(li);
        }
        let Some(addr) = self
            .routing
            .as_ref()
            .and_then(|r| r.map.nodes.get(node).copied())
        else {
            return Err(format!("no cluster node {node}"));
        };
        if let Some(r) = &self.routing {
            r.shared.prepare_node(addr)?;
        }
        let li = self.conns.len();
        let mut conn = open_conn(self.poll.registry(), addr, li, ci)?;
        conn.inflight.reserve(self.plan.pipeline);
        self.conns.push(conn);
        if let Some(client) = self.clients.get_mut(ci) {
            if client.conns.len() <= node {
                client.conns.resize(node + 1, NO_CONN);
            }
            client.conns[node] = li;
        }
        Ok(li)
    }

    /// `--cluster`: follows the redirects the last read found. MOVED updates the slot map
    /// and sends the request to the new owner; ASK sends it to the named node after
    /// `ASKING`; TRYAGAIN and CLUSTERDOWN schedule a retry after a short backoff.
    fn follow_redirects(&mut self, now: u64, rec: &mut Recorder) -> Result<(), String> {
        let Some(r) = self.routing.as_mut() else {
            return Ok(());
        };
        if r.bounced.is_empty() {
            return Ok(());
        }
        let mut bounced = std::mem::take(&mut r.bounced);
        for b in bounced.drain(..) {
            let Bounce {
                client,
                mut pending,
                redirect,
                from,
            } = b;
            let counts = &mut rec.counters.redirects;
            match redirect {
                Redirect::Moved { slot, node } => {
                    counts.moved += 1;
                    pending.redirects += 1;
                    let addr = node.resolve(from)?;
                    if let Some(r) = self.routing.as_mut() {
                        r.moved(slot, addr);
                    }
                    self.route(client, pending, None)?;
                }
                Redirect::Ask { node, .. } => {
                    counts.ask += 1;
                    pending.redirects += 1;
                    let addr = node.resolve(from)?;
                    self.route(client, pending, Some(addr))?;
                }
                Redirect::TryAgain | Redirect::ClusterDown => {
                    if matches!(redirect, Redirect::TryAgain) {
                        counts.tryagain += 1;
                    } else {
                        counts.clusterdown += 1;
                    }
                    pending.retries += 1;
                    if let Some(r) = self.routing.as_mut() {
                        r.retry_seq += 1;
                        r.retries.push(Retry {
                            due: now.saturating_add(retry_backoff_ns(pending.retries)),
                            seq: r.retry_seq,
                            client,
                            pending,
                        });
                    }
                }
            }
        }
        if let Some(r) = self.routing.as_mut() {
            r.bounced = bounced;
        }
        Ok(())
    }

    /// `--cluster`: sends the requests whose retry is due (routed by the current map).
    fn send_retries(&mut self, now: u64) -> Result<(), String> {
        loop {
            let Some(r) = self.routing.as_mut() else {
                return Ok(());
            };
            if r.retries.peek().is_none_or(|t| t.due > now) {
                break;
            }
            let Some(retry) = r.retries.pop() else {
                break;
            };
            self.route(retry.client, retry.pending, None)?;
        }
        self.flush_dirty()
    }

    /// `--cluster`: flushes every connection written to since its last flush.
    fn flush_dirty(&mut self) -> Result<(), String> {
        while let Some(li) = self.dirty.pop() {
            if let Some(c) = self.conns.get_mut(li) {
                c.dirty = false;
            }
            self.flush(li)?;
        }
        Ok(())
    }

    fn flush(&mut self, i: usize) -> Result<(), String> {
        let registry: &Registry = self.poll.registry();
        let cluster = self.routing.is_some();
        let Some(c) = self.conns.get_mut(i) else {
            return Ok(());
        };
        while c.wpos < c.wbuf.len() {
            match c.stream.write(&c.wbuf[c.wpos..]) {
                Ok(0) => {
                    return Err(format!(
                        "{}: the server stopped accepting data",
                        conn_name(i, c, cluster)
                    ));
                }
                Ok(n) => c.wpos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if !c.want_write {
                        registry
                            .reregister(
                                &mut c.stream,
                                Token(i),
                                Interest::READABLE | Interest::WRITABLE,
                            )
                            .map_err(|e| format!("{}: {e}", conn_name(i, c, cluster)))?;
                        c.want_write = true;
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("{}: write: {e}", conn_name(i, c, cluster))),
            }
        }
        c.wbuf.clear();
        c.wpos = 0;
        Ok(())
    }

    /// Reads what connection `i` has received and consumes every complete reply.
    fn read(&mut self, i: usize, now: u64, rec: &mut Recorder) -> Result<(), String> {
        let cluster = self.routing.is_some();
        let Some(c) = self.conns.get_mut(i) else {
            return Ok(());
        };
        loop {
            if c.rend == c.rbuf.len() {
                if c.rstart > 0 {
                    c.rbuf.copy_within(c.rstart..c.rend, 0);
                    c.rend -= c.rstart;
                    c.rstart = 0;
                } else {
                    let grown = c.rbuf.len() * 2;
                    c.rbuf.resize(grown, 0);
                }
            }
            let space = c.rbuf.len() - c.rend;
            match c.stream.read(&mut c.rbuf[c.rend..]) {
                Ok(0) => {
                    return Err(format!(
                        "{}: closed by the server ({} requests unanswered)",
                        conn_name(i, c, cluster),
                        c.inflight.len()
                    ));
                }
                Ok(n) => {
                    c.rend += n;
                    consume(
                        i,
                        c,
                        &mut self.clients,
                        self.routing.as_mut(),
                        &mut self.generator,
                        rec,
                        now,
                    )?;
                    // A short read drained the socket; with edge-triggered readiness a
                    // new event comes when more arrives, so skip the read that would
                    // only say WouldBlock.
                    if n < space {
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("{}: read: {e}", conn_name(i, c, cluster))),
            }
        }
    }
}

/// How errors name connection `i`: with `--cluster`, with its node's address.
fn conn_name(i: usize, c: &Conn, cluster: bool) -> String {
    if cluster {
        format!("connection {i} to {}", c.addr)
    } else {
        format!("connection {i}")
    }
}

/// Consumes every complete reply in `c`'s read buffer. With `--cluster` (`routing`),
/// replies to `ASKING` are dropped, and redirects are set aside for
/// [`Worker::follow_redirects`] instead of being counted: a redirected request's reply
/// is the final one, whenever it comes.
#[inline]
fn consume(
    i: usize,
    c: &mut Conn,
    clients: &mut [Client],
    mut routing: Option<&mut Routing>,
    generator: &mut Generator,
    rec: &mut Recorder,
    now: u64,
) -> Result<(), String> {
    let needs_frames = generator.needs_replies();
    let cluster = routing.is_some();
    while c.rstart < c.rend {
        let buf = &c.rbuf[c.rstart..c.rend];
        let (len, is_error) = match reply_len(buf) {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                return Err(format!(
                    "{}: {e}: {}",
                    conn_name(i, c, cluster),
                    excerpt(buf)
                ));
            }
        };
        let reply = &buf[..len];
        let Some(p) = c.inflight.pop_front() else {
            return Err(format!(
                "{}: a reply with no request outstanding: {}",
                conn_name(i, c, cluster),
                excerpt(reply)
            ));
        };
        if let Some(r) = routing.as_deref_mut() {
            if p.asking {
                c.rstart += len;
                continue;
            }
            if is_error && let Some(redirect) = redirect_of(reply, &p) {
                r.bounced.push(Bounce {
                    client: c.client,
                    pending: p,
                    redirect,
                    from: c.addr,
                });
                c.rstart += len;
                continue;
            }
        }
        if let Some(client) = clients.get_mut(c.client) {
            client.inflight = client.inflight.saturating_sub(1);
        }
        if p.op.is_blocking() {
            rec.blocking_reply(now);
        } else {
            rec.reply(p.sent, now);
        }
        if is_error {
            rec.error(&error_text(reply));
        }
        if needs_frames && p.op != Op::Plain {
            let frame = match parse_reply(reply) {
                Ok(Some((frame, _))) => frame,
                _ => {
                    return Err(format!(
                        "{}: malformed reply: {}",
                        conn_name(i, c, cluster),
                        excerpt(reply)
                    ));
                }
            };
            if let Err(what) = generator.on_reply(p.op, &frame, p.sent, now) {
                let mut text = format!("(client) {what}: ").into_bytes();
                text.extend_from_slice(excerpt(reply).as_bytes());
                rec.error(&text);
            }
        }
        if let Some(r) = routing.as_deref_mut() {
            r.give_back(p.req);
        }
        c.rstart += len;
    }
    rec.flush_run();
    if c.rstart == c.rend {
        c.rstart = 0;
        c.rend = 0;
    }
    Ok(())
}

/// The redirect an error reply to `p` asks to follow, unless `p` has followed too many
/// (then the reply is its answer, an error).
fn redirect_of(reply: &[u8], p: &Pending) -> Option<Redirect> {
    let text = reply.strip_prefix(b"-")?;
    let text = text.strip_suffix(b"\r\n").unwrap_or(text);
    let redirect = Redirect::parse(text)?;
    let within = match redirect {
        Redirect::Moved { .. } | Redirect::Ask { .. } => p.redirects < MAX_REDIRECTS,
        Redirect::TryAgain | Redirect::ClusterDown => p.retries < MAX_RETRIES,
    };
    within.then_some(redirect)
}

/// The text of an error reply (`-TEXT\r\n` or a RESP3 blob error), without its marker.
fn error_text(reply: &[u8]) -> Vec<u8> {
    match parse_reply(reply) {
        Ok(Some((Frame::Error(t) | Frame::BlobError(t), _))) => t.to_vec(),
        _ => reply.to_vec(),
    }
}

/// The start of `bytes`, printable, for error messages.
fn excerpt(bytes: &[u8]) -> String {
    const MAX: usize = 64;
    let s = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX)]);
    let dots = if bytes.len() > MAX { "…" } else { "" };
    format!("{s:?}{dots}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn redirect_limits() {
        let mut p = Pending::new(0, Op::Plain);
        assert!(matches!(
            redirect_of(b"-MOVED 1 127.0.0.1:7000\r\n", &p),
            Some(Redirect::Moved { slot: 1, .. })
        ));
        assert_eq!(
            redirect_of(b"-TRYAGAIN x\r\n", &p),
            Some(Redirect::TryAgain)
        );
        assert_eq!(redirect_of(b"-ERR x\r\n", &p), None);
        p.redirects = MAX_REDIRECTS;
        assert_eq!(redirect_of(b"-ASK 1 127.0.0.1:7000\r\n", &p), None);
        assert_eq!(
            redirect_of(b"-CLUSTERDOWN down\r\n", &p),
            Some(Redirect::ClusterDown)
        );
        p.retries = MAX_RETRIES;
        assert_eq!(redirect_of(b"-CLUSTERDOWN down\r\n", &p), None);
    }

    #[test]
    fn retry_backoff() {
        let ms = |n| retry_backoff_ns(n) / 1_000_000;
        assert_eq!(
            [ms(1), ms(2), ms(3), ms(4), ms(5), ms(200)],
            [10, 20, 40, 50, 50, 50]
        );
    }
}
