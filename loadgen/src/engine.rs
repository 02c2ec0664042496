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

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Barrier, Mutex, OnceLock};
use std::time::{Duration, Instant};

use goblin_protocol::{Frame, parse_reply, reply_len};
use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Registry, Token};

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

#[derive(Clone, Copy, Debug)]
struct Pending {
    /// Intended send time (ns since t0): latency is measured from here.
    sent: u64,
    op: Op,
}

struct Conn {
    stream: TcpStream,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    wbuf: Vec<u8>,
    wpos: usize,
    want_write: bool,
    inflight: VecDeque<Pending>,
    /// A waiter connection: one blocking claim at a time, nothing else.
    waiter: bool,
    /// Open loop: this connection's first intended send, and requests scheduled so far.
    phase_ns: f64,
    scheduled: u64,
}

impl Conn {
    fn next_intended(&self, interval: f64) -> u64 {
        (self.phase_ns + self.scheduled as f64 * interval) as u64
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
    /// The server.
    pub addr: SocketAddr,
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
        plan,
        generator,
        shared,
        tx,
        barrier,
    } = spec;
    let connected = connect_all(addr, plan.connections, plan.waiters);
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
    let outcome = connected.and_then(|(poll, conns)| {
        let budget = plan
            .requests_per_thread
            .as_ref()
            .map(|v| v.get(index).copied().unwrap_or(0));
        let mut w = Worker {
            index,
            poll,
            conns,
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

/// Connects `n` connections, then `waiters` waiter connections.
fn connect_all(addr: SocketAddr, n: usize, waiters: usize) -> Result<(Poll, Vec<Conn>), String> {
    let poll = Poll::new().map_err(|e| format!("creating the poller: {e}"))?;
    let mut conns = Vec::with_capacity(n + waiters);
    for i in 0..n + waiters {
        let fail = |e: io::Error| format!("connection {i}: connect to {addr}: {e}");
        let std = std::net::TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).map_err(fail)?;
        std.set_nodelay(true).map_err(fail)?;
        std.set_nonblocking(true).map_err(fail)?;
        let mut stream = TcpStream::from_std(std);
        poll.registry()
            .register(&mut stream, Token(i), Interest::READABLE)
            .map_err(fail)?;
        conns.push(Conn {
            stream,
            rbuf: vec![0; READ_BUF],
            rstart: 0,
            rend: 0,
            wbuf: Vec::with_capacity(WRITE_BUF),
            wpos: 0,
            want_write: false,
            inflight: VecDeque::new(),
            waiter: i >= n,
            phase_ns: 0.0,
            scheduled: 0,
        });
    }
    Ok((poll, conns))
}

struct Worker<'a> {
    index: usize,
    poll: Poll,
    conns: Vec<Conn>,
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

    fn run(&mut self, rec: &mut Recorder) -> Result<(), String> {
        let plan = self.plan;
        for conn in &mut self.conns {
            conn.inflight.reserve(plan.pipeline);
        }
        if let Some(interval) = plan.interval_ns {
            // Stagger connections evenly over one interval so sends are spread in time.
            let total = (plan.threads * plan.connections) as f64;
            for (i, c) in self.conns.iter_mut().enumerate() {
                let global = (self.index * plan.connections + i) as f64;
                c.phase_ns = interval * global / total;
            }
        }
        let timers = plan.interval_ns.is_some() || self.generator.has_followups();
        let mut events = Events::with_capacity(self.conns.len().max(16));
        let now = self.now();
        self.phase(rec, now);
        for i in 0..self.conns.len() {
            self.top_up(i, now, rec);
            self.flush(i)?;
        }
        loop {
            if self.shared.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let now = self.now();
            self.phase(rec, now);
            if self.stopping {
                let outstanding: usize = self.conns.iter().map(|c| c.inflight.len()).sum();
                if outstanding == 0 {
                    return Ok(());
                }
                let waits_only = self.conns.iter().all(|c| c.waiter || c.inflight.is_empty());
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
                for i in 0..self.conns.len() {
                    self.top_up(i, now, rec);
                    self.flush(i)?;
                }
            }
            let timeout = self.timeout(rec, now, timers);
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(format!("poll: {e}"));
            }
            for event in events.iter() {
                let i = event.token().0;
                let now = self.now();
                if event.is_readable() || event.is_read_closed() || event.is_error() {
                    self.read(i, now, rec)?;
                }
                self.top_up(i, now, rec);
                self.flush(i)?;
            }
        }
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
        let waits: Vec<(Op, u64)> = self
            .conns
            .iter_mut()
            .filter(|c| c.waiter)
            .flat_map(|c| c.inflight.drain(..))
            .map(|p| (p.op, p.sent))
            .collect();
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
                for c in &self.conns {
                    if c.waiter || c.inflight.len() >= self.plan.pipeline {
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

    /// Fills connection `i` up to the pipeline depth: due follow-ups first, then new
    /// requests (closed loop: now; open loop: those whose intended time has come). A
    /// waiter connection takes the longest-queued wait, if it is idle.
    #[inline]
    fn top_up(&mut self, i: usize, now: u64, rec: &Recorder) {
        let pipeline = self.plan.pipeline;
        let Some(c) = self.conns.get_mut(i) else {
            return;
        };
        if c.waiter {
            if c.inflight.is_empty()
                && !self.stopping
                && let Some(op) = self.generator.next_wait(&mut c.wbuf, now)
            {
                c.inflight.push_back(Pending { sent: now, op });
            }
            return;
        }
        while c.inflight.len() < pipeline && !self.stopping {
            if let Some((due, op)) = self.generator.pop_due(now) {
                self.generator.encode_followup(op, &mut c.wbuf, due);
                c.inflight.push_back(Pending { sent: due, op });
                continue;
            }
            if self.generator.backlogged() {
                break;
            }
            let intended = match self.plan.interval_ns {
                None => now,
                Some(interval) => {
                    let due = c.next_intended(interval);
                    if due > now {
                        break;
                    }
                    c.scheduled += 1;
                    due
                }
            };
            if rec.measuring
                && let Some(b) = &mut self.budget
            {
                if *b == 0 {
                    break;
                }
                *b -= 1;
            }
            if let Some(op) = self.generator.next(&mut c.wbuf, intended) {
                c.inflight.push_back(Pending { sent: intended, op });
            }
        }
    }

    fn flush(&mut self, i: usize) -> Result<(), String> {
        let registry: &Registry = self.poll.registry();
        let Some(c) = self.conns.get_mut(i) else {
            return Ok(());
        };
        while c.wpos < c.wbuf.len() {
            match c.stream.write(&c.wbuf[c.wpos..]) {
                Ok(0) => return Err(format!("connection {i}: the server stopped accepting data")),
                Ok(n) => c.wpos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if !c.want_write {
                        registry
                            .reregister(
                                &mut c.stream,
                                Token(i),
                                Interest::READABLE | Interest::WRITABLE,
                            )
                            .map_err(|e| format!("connection {i}: {e}"))?;
                        c.want_write = true;
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("connection {i}: write: {e}")),
            }
        }
        c.wbuf.clear();
        c.wpos = 0;
        Ok(())
    }

    /// Reads what connection `i` has received and consumes every complete reply.
    fn read(&mut self, i: usize, now: u64, rec: &mut Recorder) -> Result<(), String> {
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
                        "connection {i}: closed by the server ({} requests unanswered)",
                        c.inflight.len()
                    ));
                }
                Ok(n) => {
                    c.rend += n;
                    consume(i, c, &mut self.generator, rec, now)?;
                    // A short read drained the socket; with edge-triggered readiness a
                    // new event comes when more arrives, so skip the read that would
                    // only say WouldBlock.
                    if n < space {
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("connection {i}: read: {e}")),
            }
        }
    }
}

/// Consumes every complete reply in `c`'s read buffer.
#[inline]
fn consume(
    i: usize,
    c: &mut Conn,
    generator: &mut Generator,
    rec: &mut Recorder,
    now: u64,
) -> Result<(), String> {
    let needs_frames = generator.needs_replies();
    while c.rstart < c.rend {
        let buf = &c.rbuf[c.rstart..c.rend];
        let (len, is_error) = match reply_len(buf) {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => return Err(format!("connection {i}: {e}: {}", excerpt(buf))),
        };
        let reply = &buf[..len];
        let Some(p) = c.inflight.pop_front() else {
            return Err(format!(
                "connection {i}: a reply with no request outstanding: {}",
                excerpt(reply)
            ));
        };
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
                        "connection {i}: malformed reply: {}",
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
        c.rstart += len;
    }
    rec.flush_run();
    if c.rstart == c.rend {
        c.rstart = 0;
        c.rend = 0;
    }
    Ok(())
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
