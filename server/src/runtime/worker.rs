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
//!   another shard, a lock) is parked and resumed by a later message.
//!
//! # The per-connection contract
//!
//! Replies go out in request order, and a connection's commands take effect in the
//! order it sent them. A command for the local shard runs inline; commands for one
//! remote shard gather in a batch that is sent at the end of the iteration, and further
//! commands for that same shard join it or follow it (channels are FIFO). Any other
//! command waits until everything in flight has answered — so a later command never
//! takes effect before an earlier one, while a pipeline of commands for one shard pays
//! one round trip, not one each.
//!
//! # One iteration
//!
//! 1. `poll` for readiness (not blocking if work is pending);
//! 2. read the clock once: every command the iteration starts uses that timestamp;
//! 3. serve ready connections: read, decode, route and run;
//! 4. handle messages: batches to run here, replies coming back, transaction steps;
//! 5. send this iteration's batches and messages, one `Vec` per destination;
//! 6. write each connection's output once; `WRITABLE` interest only after `WouldBlock`.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use goblin_protocol::{Decoded, Encoder, Version, parse_i64};
use goblin_store::Millis;
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token};
use slab::Slab;

use crate::clock;
use crate::errors;
use crate::runtime::client::Client;
use crate::runtime::conn::{Conn, Held, MultiState, ReadOutcome};
use crate::runtime::msg::{Batch, ConnRef, Msg, TxRef};
use crate::runtime::route::{Route, Target};
use crate::runtime::server::{Shared, WAKER};
use crate::shard::{Outgoing, Shard, command_needs};
use crate::table::handler::{Args, ConnCtx, Exec};
use crate::table::{CommandSpec, Rejection};
use crate::txn::{Outcome, Plan, TxJob};

const LISTENER: Token = Token(usize::MAX - 1);
/// Readiness events handled per `poll` call.
const EVENTS_CAPACITY: usize = 1024;
/// Reads from one connection per turn before the others are served.
const MAX_READS_PER_TURN: usize = 16;
/// Connections accepted per listener event before the loop serves the others.
const MAX_ACCEPTS_PER_TURN: usize = 256;
/// Unsent output above which a connection's further requests wait for the client to
/// read; high enough that a client writing a large pipeline before reading still works,
/// as it does with redis-server.
const OUTPUT_HIGH_WATER: usize = 64 * 1024 * 1024;
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
/// Longest a worker sleeps waiting for a key to expire before it looks again.
const MAX_POLL_WAIT_MS: u64 = 1000;
/// Batches kept for reuse.
const BATCH_POOL: usize = 4096;
/// A pooled batch whose buffers grew past this is dropped instead of kept.
const BATCH_KEEP_BYTES: usize = 256 * 1024;

/// What happened to a request the connection handed over.
enum Flow {
    /// Consumed; go on with the next request.
    Next,
    /// Consumed; the connection now waits for it.
    Taken,
    /// Not consumed: it must wait for what is in flight.
    Wait,
}

/// One thread's event loop.
pub struct Worker {
    id: usize,
    poll: Poll,
    inbox: Receiver<Vec<Msg>>,
    listener: Option<TcpListener>,
    next_target: usize,
    conns: Slab<Conn>,
    next_gen: u64,
    shard: Shard,
    shared: Arc<Shared>,
    now: Millis,
    /// Connections with replies to write this iteration.
    dirty: Vec<usize>,
    /// Connections with work left over for the next iteration.
    scheduled: Vec<usize>,
    /// Connections with a batch gathered this iteration.
    opened: Vec<usize>,
    /// Messages for each worker, sent at the end of the iteration.
    outbox: Vec<Vec<Msg>>,
    /// Messages for this worker itself.
    local: VecDeque<Msg>,
    /// Transactions this worker coordinates for its connections, by sequence number.
    jobs: HashMap<u64, Box<TxJob>>,
    next_job: u64,
    /// Boxed because batches travel between threads as boxes.
    #[allow(clippy::vec_box)]
    pool: Vec<Box<Batch>>,
    commands: u64,
    /// Messages sent to other workers whose answer has not come back yet.
    awaiting: usize,
}

impl Worker {
    /// Worker `id`; `listener` is given to the one that accepts connections.
    ///
    /// # Errors
    /// When the listener cannot be registered.
    pub fn new(
        id: usize,
        shared: Arc<Shared>,
        poll: Poll,
        inbox: Receiver<Vec<Msg>>,
        mut listener: Option<TcpListener>,
    ) -> io::Result<Self> {
        if let Some(l) = listener.as_mut() {
            poll.registry().register(l, LISTENER, Interest::READABLE)?;
        }
        let threads = shared.threads;
        Ok(Worker {
            id,
            poll,
            inbox,
            listener,
            next_target: 0,
            conns: Slab::new(),
            next_gen: 0,
            shard: Shard::new(id, shared.slots.range(id), shared.commands.all().len()),
            shared,
            now: clock::now_ms(),
            dirty: Vec::new(),
            scheduled: Vec::new(),
            opened: Vec::new(),
            outbox: (0..threads).map(|_| Vec::new()).collect(),
            local: VecDeque::new(),
            jobs: HashMap::new(),
            next_job: 0,
            pool: Vec::new(),
            commands: 0,
            awaiting: 0,
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
                    LISTENER => self.accept(),
                    WAKER => {}
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
                        self.serve(key);
                    }
                }
            }
            for key in std::mem::take(&mut self.scheduled) {
                if let Some(conn) = self.conns.get_mut(key) {
                    conn.scheduled = false;
                    self.serve(key);
                }
            }
            self.drain();
            self.send_all();
            self.flush_all();
            self.expire_keys();
            if self.commands > 0 {
                self.shared
                    .total_commands
                    .fetch_add(self.commands, Ordering::Relaxed);
                self.commands = 0;
            }
        }
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
        if self.shard.db.next_expiry().is_some_and(|at| at <= now) {
            self.shard.db.expire_due(now, EXPIRE_PER_ITERATION);
        }
    }

    /// Polls; blocks only when there is nothing to do and no message waiting.
    fn sleep(&mut self, events: &mut Events) -> io::Result<()> {
        // Wake for the next key expiry, if any (keys behind schedule: at once) — unless
        // active expiry is paused for transactions here: then the message that ends the
        // last of them wakes this worker, and an overdue key must not make it spin.
        let next_expiry = self.shard.db.next_expiry().filter(|_| self.shard.quiet());
        let mut timeout = next_expiry.map(|at| {
            Duration::from_millis(at.saturating_sub(clock::now_ms()).min(MAX_POLL_WAIT_MS))
        });
        if !self.scheduled.is_empty() || !self.local.is_empty() {
            timeout = Some(Duration::ZERO);
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

    fn route(&mut self, out: Vec<Outgoing>) {
        for (dest, msg) in out {
            if dest == self.id {
                self.local.push_back(msg);
            } else if let Some(q) = self.outbox.get_mut(dest) {
                if matches!(msg, Msg::Run(..) | Msg::Step(..)) {
                    self.awaiting += 1;
                }
                q.push(msg);
            }
        }
    }

    /// Sends the batches gathered this iteration and everything in the outboxes.
    fn send_all(&mut self) {
        for key in std::mem::take(&mut self.opened) {
            let Some(conn) = self.conns.get_mut(key) else {
                continue;
            };
            let Some(batch) = conn.open.take() else {
                continue;
            };
            conn.in_flight += 1;
            let from = ConnRef {
                worker: self.id,
                key,
                generation: conn.generation,
            };
            let dest = conn.flight_shard;
            self.route(vec![(dest, Msg::Run(from, batch))]);
        }
        // Anything routed to ourselves runs now rather than next iteration.
        if !self.local.is_empty() {
            self.drain();
        }
        for (dest, queue) in self.outbox.iter_mut().enumerate() {
            if !queue.is_empty() {
                self.shared.peers[dest].send(std::mem::take(queue));
            }
        }
    }

    /// Handles the messages waiting in the inbox (those there now) and every message
    /// this worker sent itself.
    fn drain(&mut self) {
        loop {
            let mut any = false;
            for _ in 0..self.inbox.len() {
                let Ok(msgs) = self.inbox.try_recv() else {
                    break;
                };
                any = true;
                for msg in msgs {
                    if matches!(msg, Msg::Done(..) | Msg::StepDone(..)) {
                        self.awaiting = self.awaiting.saturating_sub(1);
                    }
                    self.handle(msg);
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
        let mut out = Vec::new();
        match msg {
            Msg::Adopt(stream, addr) => self.adopt(stream, addr),
            Msg::Run(from, batch) => self.shard.run_batch(&self.shared, from, batch, &mut out),
            Msg::Step(step) => self.shard.step(&self.shared, step, &mut out),
            Msg::Done(to, batch) => self.batch_done(to, batch),
            Msg::StepDone(done) => {
                let seq = done.tx.seq;
                let Some(job) = self.jobs.get_mut(&seq) else {
                    return;
                };
                if let Some(outcome) = job.on_done(done, self.now, &mut out) {
                    let conn = job.conn;
                    self.jobs.remove(&seq);
                    self.route(out);
                    self.finish_job(conn, outcome);
                    return;
                }
            }
        }
        self.route(out);
    }

    fn live_conn(&mut self, to: ConnRef) -> Option<&mut Conn> {
        self.conns
            .get_mut(to.key)
            .filter(|c| c.generation == to.generation)
    }

    fn batch_done(&mut self, to: ConnRef, mut batch: Box<Batch>) {
        if let Some(conn) = self.live_conn(to) {
            conn.in_flight = conn.in_flight.saturating_sub(1);
            if conn.output.pending() == 0 && conn.output.buf.is_empty() {
                std::mem::swap(&mut conn.output.buf, &mut batch.replies);
            } else {
                conn.output.buf.extend_from_slice(&batch.replies);
            }
            self.after_wait(to.key);
        }
        self.recycle(batch);
    }

    /// Writes a finished job's answer and lets the connection go on.
    fn finish_job(&mut self, key: usize, outcome: Outcome) {
        self.write_job_outcome(key, outcome);
        self.after_wait(key);
    }

    /// Writes a job's answer to its connection's output, without resuming the connection
    /// (for a job that finished while the connection's requests are being run).
    fn write_job_outcome(&mut self, key: usize, outcome: Outcome) {
        let shared = Arc::clone(&self.shared);
        let now = self.now;
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        conn.job = None;
        let Conn { client, output, .. } = conn;
        let mut ctx = ConnCtx {
            client,
            shared: &shared,
            out: &mut output.buf,
            now,
        };
        write_outcome(&mut ctx, outcome);
    }

    /// A connection got back what it waited for: run its next requests, write its output.
    fn after_wait(&mut self, key: usize) {
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        if conn.gone {
            // Closed while work was in flight; now nothing is.
            if !conn.busy() {
                self.conns.remove(key);
            }
            return;
        }
        if !conn.busy() {
            self.serve(key);
        }
        self.mark_dirty(key);
    }

    fn mark_dirty(&mut self, key: usize) {
        if let Some(conn) = self.conns.get_mut(key)
            && !conn.dirty
        {
            conn.dirty = true;
            self.dirty.push(key);
        }
    }

    fn new_batch(&mut self, resp: Version) -> Box<Batch> {
        let mut batch = self.pool.pop().unwrap_or_default();
        batch.resp = resp;
        batch.now = self.now;
        batch
    }

    fn recycle(&mut self, mut batch: Box<Batch>) {
        if self.pool.len() < BATCH_POOL
            && batch.data.capacity() <= BATCH_KEEP_BYTES
            && batch.replies.capacity() <= BATCH_KEEP_BYTES
        {
            batch.clear();
            self.pool.push(batch);
        }
    }

    fn accept(&mut self) {
        for _ in 0..MAX_ACCEPTS_PER_TURN {
            let Some(listener) = self.listener.as_ref() else {
                return;
            };
            match listener.accept() {
                Ok((stream, addr)) => {
                    // Connections are dealt round-robin: exact balance, whatever the
                    // number of clients (see docs/architecture.md).
                    let target = self.next_target % self.shared.threads;
                    self.next_target = self.next_target.wrapping_add(1);
                    if target == self.id {
                        self.adopt(stream, addr);
                    } else {
                        self.outbox[target].push(Msg::Adopt(stream, addr));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Out of descriptors or a connection reset before accept: try again on
                // the next readiness event rather than spin.
                Err(_) => return,
            }
        }
        // More may be pending: come back after serving the others.
        if let Some(l) = self.listener.as_mut() {
            let _ = self
                .poll
                .registry()
                .reregister(l, LISTENER, Interest::READABLE);
        }
    }

    fn adopt(&mut self, stream: mio::net::TcpStream, addr: std::net::SocketAddr) {
        // Replies go out as soon as they are written, as with redis-server.
        let _ = stream.set_nodelay(true);
        let laddr = stream.local_addr().ok();
        let client = Client::new(self.shared.new_client_id(), Some(addr), laddr, self.now);
        self.next_gen += 1;
        let conn = Conn::new(stream, client, self.shared.config.limits, self.next_gen);
        let entry = self.conns.vacant_entry();
        let key = entry.key();
        let conn = entry.insert(conn);
        if self
            .poll
            .registry()
            .register(&mut conn.stream, Token(key), Interest::READABLE)
            .is_err()
        {
            self.conns.remove(key);
            return;
        }
        self.shared
            .connected_clients
            .fetch_add(1, Ordering::Relaxed);
        self.shared.clients_per_worker[self.id].fetch_add(1, Ordering::Relaxed);
        self.shared
            .total_connections
            .fetch_add(1, Ordering::Relaxed);
        // Bytes may have arrived before registration.
        self.serve(key);
    }

    /// Reads and runs a connection's requests until it has no complete request left and
    /// its socket is drained, it waits for work elsewhere, or its turn is over.
    fn serve(&mut self, key: usize) {
        let mut reads = 0;
        loop {
            self.run_requests(key);
            let Some(conn) = self.conns.get_mut(key) else {
                return;
            };
            if conn.closing
                || conn.busy()
                || conn.output.pending() > OUTPUT_HIGH_WATER
                || !conn.readable
            {
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
            match conn.input.read_from(&mut conn.stream) {
                Ok(ReadOutcome::Full) => {}
                Ok(ReadOutcome::Drained) if conn.read_to_end => {}
                Ok(ReadOutcome::Drained | ReadOutcome::WouldBlock) => conn.readable = false,
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
        if conn.peer_closed && !conn.busy() && conn.held.is_none() {
            // Whatever is left is an incomplete request that will never be completed.
            conn.closing = true;
        }
        if conn.output.pending() > 0 || conn.closing {
            self.mark_dirty(key);
        }
    }

    /// Writes every dirty connection's output once.
    fn flush_all(&mut self) {
        for key in std::mem::take(&mut self.dirty) {
            let Some(conn) = self.conns.get_mut(key) else {
                continue;
            };
            conn.dirty = false;
            // A connection waiting for replies from other shards gets its output written
            // with the rest of its pipeline's: one write for the pipeline, as with a
            // local one, instead of one per shard round trip. (`after_wait` marks it
            // dirty again when the wait ends.)
            if (conn.busy() || conn.held.is_some())
                && !conn.closing
                && conn.output.pending() < FLUSH_EARLY_ABOVE
            {
                continue;
            }
            match conn.output.write_to(&mut conn.stream) {
                Ok(true) => {
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
                    // Input held back by a full output buffer can run now.
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
    }

    /// Closes a connection; its slot stays until work in flight for it has answered.
    fn close(&mut self, key: usize) {
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        if !conn.gone {
            conn.gone = true;
            conn.closing = true;
            let _ = self.poll.registry().deregister(&mut conn.stream);
            self.shared
                .connected_clients
                .fetch_sub(1, Ordering::Relaxed);
            self.shared.clients_per_worker[self.id].fetch_sub(1, Ordering::Relaxed);
        }
        if !conn.busy() {
            self.conns.remove(key);
        }
    }

    /// Decodes and dispatches the complete requests buffered on a connection.
    fn run_requests(&mut self, key: usize) {
        let shared = Arc::clone(&self.shared);
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        if conn.gone {
            return;
        }
        let mut input = std::mem::take(&mut conn.input);
        while let Some(conn) = self.conns.get_mut(key) {
            if conn.closing || conn.output.pending() > OUTPUT_HIGH_WATER {
                break;
            }
            // A request that had to wait goes first: it is still decoded.
            let (decoded, mut route) = match conn.held.take() {
                Some(held) => (Ok(Decoded::Command(held.len)), held.route),
                None => (
                    input.decoder.decode(&mut input.buf[input.start..input.end]),
                    Route::default(),
                ),
            };
            match decoded {
                Ok(Decoded::Command(n)) => {
                    let args = Args::new(
                        &input.buf[input.start..input.start + n],
                        input.decoder.args(),
                    );
                    let flow = self.dispatch(&shared, key, &args, &mut route);
                    if matches!(flow, Flow::Wait) {
                        if let Some(conn) = self.conns.get_mut(key) {
                            conn.held = Some(Held { len: n, route });
                        }
                        break;
                    }
                    input.consume(n);
                    if self.ran(key, &flow) {
                        break;
                    }
                }
                Ok(Decoded::Empty(n)) => input.consume(n),
                Ok(Decoded::Incomplete) => break,
                Err(e) => {
                    if conn.busy() {
                        // Answer the fault after what is in flight: decoding again from
                        // the frame's start finds it again.
                        break;
                    }
                    Encoder::new(&mut conn.output.buf, conn.client.resp)
                        .error_sanitized(&e.message());
                    conn.closing = true;
                }
            }
        }
        if let Some(conn) = self.conns.get_mut(key) {
            conn.input = input;
        }
    }

    /// Counts a request that ran; true when the connection must stop for now.
    fn ran(&mut self, key: usize, flow: &Flow) -> bool {
        self.commands += 1;
        let Some(conn) = self.conns.get_mut(key) else {
            return true;
        };
        if conn.client.close_after_reply {
            conn.closing = true;
        }
        matches!(flow, Flow::Taken) || conn.closing
    }

    /// Routes one request: runs it here, adds it to a batch for its shard, starts a
    /// transaction or a keyspace-wide command, or reports that it must wait. `route`
    /// keeps what was worked out about the request (its command, its keys' shards) for
    /// when it must wait and come back.
    fn dispatch(
        &mut self,
        shared: &Shared,
        key: usize,
        args: &Args<'_>,
        route: &mut Route,
    ) -> Flow {
        let table = &shared.commands;
        let Some(conn) = self.conns.get_mut(key) else {
            return Flow::Next;
        };
        let resolved = match route.spec.and_then(|id| table.get(id)) {
            Some(spec) => Ok(spec),
            None => table.resolve(args),
        };
        let spec = match resolved {
            Ok(spec) => {
                route.spec = Some(spec.id);
                spec
            }
            Err(Rejection::Error(msg)) => {
                if conn.busy() {
                    return Flow::Wait;
                }
                if args.get(0).eq_ignore_ascii_case(b"exec") {
                    // Redis aborts the transaction when EXEC itself is rejected, in or
                    // out of MULTI (`execCommandAbort`).
                    let reason = msg.strip_prefix(b"ERR ").unwrap_or(&msg);
                    let mut text = b"EXECABORT Transaction discarded because of: ".to_vec();
                    text.extend_from_slice(reason);
                    Encoder::new(&mut conn.output.buf, conn.client.resp).error_sanitized(&text);
                    if let Some(multi) = conn.multi.take() {
                        multi.queued.into_iter().for_each(|b| self.recycle(b));
                    }
                    return Flow::Next;
                }
                if let Some(multi) = conn.multi.as_mut() {
                    multi.dirty = true;
                }
                Encoder::new(&mut conn.output.buf, conn.client.resp).error_sanitized(&msg);
                return Flow::Next;
            }
        };
        if conn.multi.is_some() && !matches!(spec.exec, Exec::Transaction) && spec.name != "quit" {
            let resp = conn.client.resp;
            let mut queued = self.new_batch(resp);
            queued.push(spec.id, args);
            let Some(conn) = self.conns.get_mut(key) else {
                return Flow::Next;
            };
            if let Some(multi) = conn.multi.as_mut() {
                multi.queued.push(queued);
            }
            Encoder::new(&mut conn.output.buf, resp).simple(b"QUEUED");
            return Flow::Next;
        }
        conn.client.last_command = spec.name;
        let flow = match spec.exec {
            Exec::Transaction => {
                if conn.busy() {
                    return Flow::Wait;
                }
                self.transaction_command(shared, key, spec)
            }
            Exec::Conn(f) => {
                if conn.busy() {
                    return Flow::Wait;
                }
                let Conn { client, output, .. } = conn;
                f(
                    &mut ConnCtx {
                        client,
                        shared,
                        out: &mut output.buf,
                        now: self.now,
                    },
                    args,
                );
                Flow::Next
            }
            Exec::Container => {
                // Unreachable: a container without a subcommand of its own fails its arity
                // check first. Answered anyway, so that replies cannot fall out of step.
                Encoder::new(&mut conn.output.buf, conn.client.resp)
                    .error(&errors::wrong_arity(spec.name));
                Flow::Next
            }
            Exec::AllShards { merge, .. } => {
                if conn.busy() {
                    return Flow::Wait;
                }
                // A transaction holding every shard whole, so that the parts see one state:
                // no multi-shard write is half applied when DBSIZE or KEYS count it.
                let resp = conn.client.resp;
                let plan = Plan::for_fan(spec.id, args, merge, self.shared.threads, resp);
                self.start_tx(key, Vec::new(), true, plan)
            }
            Exec::Cursor(_) => {
                if conn.busy() {
                    return Flow::Wait;
                }
                let plan = Plan::for_scan(spec.id, args, &shared.slots, conn.client.resp);
                self.start_tx(key, Vec::new(), false, plan)
            }
            Exec::Shard(_) => match *route
                .target
                .get_or_insert_with(|| target(shared, spec, args))
            {
                Target::Many => {
                    if conn.busy() {
                        return Flow::Wait;
                    }
                    self.start_tx_command(shared, key, spec, args)
                }
                Target::Shard(s) if s != self.id => self.add_to_remote_batch(key, s, spec, args),
                Target::Shard(_) | Target::Here => self.run_local(key, spec, args),
            },
        };
        if !matches!(flow, Flow::Wait) {
            self.shard.count_call(spec.id);
        }
        flow
    }
}

/// Which shard(s) a keyed command needs.
fn target(shared: &Shared, spec: &CommandSpec, args: &Args<'_>) -> Target {
    if let Exec::Cursor(_) = spec.exec {
        let cursor = parse_i64(args.get(1)).unwrap_or(0);
        return Target::Shard(shared.slots.shard_of_slot(cursor.max(0) as usize));
    }
    let mut keys = spec.keys.indexes(args.len());
    let Some(first) = keys.next() else {
        return Target::Here;
    };
    let shard = shared.slots.shard_of_key(args.get(first));
    if keys.all(|i| shared.slots.shard_of_key(args.get(i)) == shard) {
        Target::Shard(shard)
    } else {
        Target::Many
    }
}

impl Worker {
    fn run_local(&mut self, key: usize, spec: &CommandSpec, args: &Args<'_>) -> Flow {
        let Some(conn) = self.conns.get_mut(key) else {
            return Flow::Next;
        };
        if conn.busy() {
            return Flow::Wait;
        }
        if self.shard.quiet() {
            let Conn { client, output, .. } = conn;
            self.shard.execute(
                &self.shared,
                spec,
                args,
                self.now,
                &mut output.buf,
                client.resp,
            );
            return Flow::Next;
        }
        // Locks are held or wanted here: go through the shard's queue like any batch.
        let resp = conn.client.resp;
        let from = ConnRef {
            worker: self.id,
            key,
            generation: conn.generation,
        };
        conn.in_flight += 1;
        conn.flight_shard = self.id;
        let mut batch = self.new_batch(resp);
        batch.push(spec.id, args);
        let mut out = Vec::new();
        self.shard.run_batch(&self.shared, from, batch, &mut out);
        self.route(out);
        Flow::Taken
    }

    fn add_to_remote_batch(
        &mut self,
        key: usize,
        shard: usize,
        spec: &CommandSpec,
        args: &Args<'_>,
    ) -> Flow {
        let Some(conn) = self.conns.get_mut(key) else {
            return Flow::Next;
        };
        let pending = conn.in_flight > 0 || conn.open.is_some();
        if conn.job.is_some() || (pending && conn.flight_shard != shard) {
            return Flow::Wait;
        }
        if conn.open.is_none() {
            let resp = conn.client.resp;
            let batch = self.new_batch(resp);
            self.opened.push(key);
            let Some(conn) = self.conns.get_mut(key) else {
                return Flow::Next;
            };
            conn.open = Some(batch);
        }
        let Some(conn) = self.conns.get_mut(key) else {
            return Flow::Next;
        };
        conn.flight_shard = shard;
        if let Some(batch) = conn.open.as_mut() {
            batch.push(spec.id, args);
        }
        Flow::Next
    }

    fn start_tx(
        &mut self,
        key: usize,
        needs: Vec<(Vec<u8>, crate::runtime::msg::LockMode)>,
        all: bool,
        plan: Plan,
    ) -> Flow {
        let seq = self.next_job;
        self.next_job += 1;
        let mut job = Box::new(TxJob::new(
            TxRef {
                worker: self.id,
                seq,
            },
            key,
            &self.shared.slots,
            needs,
            all,
            plan,
        ));
        let mut out = Vec::new();
        let done = job.start(self.now, &mut out);
        self.route(out);
        match done {
            Some(outcome) => {
                // Finished at once (no keys): the connection is inside `run_requests`,
                // which goes on by itself — resuming it here would run it re-entrantly.
                self.write_job_outcome(key, outcome);
                Flow::Next
            }
            None => {
                self.jobs.insert(seq, job);
                if let Some(conn) = self.conns.get_mut(key) {
                    conn.job = Some(seq);
                }
                Flow::Taken
            }
        }
    }

    fn start_tx_command(
        &mut self,
        shared: &Shared,
        key: usize,
        spec: &CommandSpec,
        args: &Args<'_>,
    ) -> Flow {
        let resp = self
            .conns
            .get(key)
            .map_or(Version::Resp2, |c| c.client.resp);
        let plan = Plan::for_command(
            &shared.commands,
            spec.id,
            args,
            &shared.slots,
            resp,
            self.now,
            false,
        );
        let Some(plan) = plan else {
            // No plan: arguments that cannot be split (MSET with unpaired arguments). The
            // command's own handler answers its error without touching a key, wherever it
            // runs. (Every multi-key command has a plan for well-formed arguments.)
            return self.run_local(key, spec, args);
        };
        let (needs, all) = if plan.locks_upfront() {
            command_needs(spec, args)
        } else {
            (Vec::new(), false)
        };
        self.start_tx(key, needs, all, plan)
    }

    /// MULTI, EXEC, DISCARD.
    fn transaction_command(&mut self, shared: &Shared, key: usize, spec: &CommandSpec) -> Flow {
        let Some(conn) = self.conns.get_mut(key) else {
            return Flow::Next;
        };
        let resp = conn.client.resp;
        let mut reply = Encoder::new(&mut conn.output.buf, resp);
        match spec.name {
            "multi" => {
                if conn.multi.is_some() {
                    reply.error(b"ERR MULTI calls can not be nested");
                } else {
                    conn.multi = Some(MultiState::default());
                    reply.ok();
                }
                Flow::Next
            }
            "discard" => {
                match conn.multi.take() {
                    None => reply.error(b"ERR DISCARD without MULTI"),
                    Some(multi) => {
                        reply.ok();
                        multi.queued.into_iter().for_each(|b| self.recycle(b));
                    }
                }
                Flow::Next
            }
            _ => {
                let Some(multi) = conn.multi.take() else {
                    reply.error(b"ERR EXEC without MULTI");
                    return Flow::Next;
                };
                if multi.dirty {
                    reply.error(b"EXECABORT Transaction discarded because of previous errors.");
                    return Flow::Next;
                }
                let mut needs = Vec::new();
                let mut all = false;
                for cmd in &multi.queued {
                    if let Some(spec) = cmd.cmds.first().and_then(|c| shared.commands.get(c.spec)) {
                        self.shard.count_call(spec.id);
                        let (keys, whole) = command_needs(spec, &cmd.args(0));
                        needs.extend(keys);
                        all |= whole;
                    }
                }
                let plan = Plan::for_exec(
                    &shared.commands,
                    &multi.queued,
                    &shared.slots,
                    resp,
                    self.now,
                );
                multi.queued.into_iter().for_each(|b| self.recycle(b));
                self.start_tx(key, needs, all, plan)
            }
        }
    }
}

/// Writes a job's outcome into a connection's output.
fn write_outcome(ctx: &mut ConnCtx<'_>, outcome: Outcome) {
    match outcome {
        Outcome::Reply(bytes) => ctx.out.extend_from_slice(&bytes),
        Outcome::Merge(merge, cmd, parts) => {
            let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
            merge(ctx, &cmd.args(0), &parts);
        }
        Outcome::Conn(cmd) => {
            let spec = cmd
                .cmds
                .first()
                .and_then(|c| ctx.shared.commands.get(c.spec));
            if let Some(Exec::Conn(f)) = spec.map(|s| s.exec) {
                f(ctx, &cmd.args(0));
            }
        }
        Outcome::Exec(list) => {
            ctx.reply().array(list.len());
            for item in list {
                write_outcome(ctx, item);
            }
        }
    }
}
