//! A worker: one thread's event loop, its connections and its shard.
//!
//! Each iteration: wait for readiness, read the clock once, serve every ready
//! connection (read until `WouldBlock`, decode, run), then write each connection's
//! replies once. A connection that still has input after its turn is served again next
//! iteration, so one busy client cannot starve the others; a client that does not read
//! its replies only fills its own output buffer.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use goblin_protocol::{Decoded, Encoder};
use goblin_store::Millis;
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token};
use slab::Slab;

use crate::client::Client;
use crate::clock;
use crate::command::Rejection;
use crate::conn::{Conn, ReadOutcome};
use crate::exec::{Args, ConnCtx, Exec, Shard, ShardCtx};
use crate::server::Shared;

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

/// One thread's event loop.
pub struct Worker {
    poll: Poll,
    listener: Option<TcpListener>,
    conns: Slab<Conn>,
    shard: Shard,
    shared: Arc<Shared>,
    now: Millis,
    /// Connections with replies to write this iteration.
    dirty: Vec<usize>,
    /// Connections with work left over for the next iteration.
    scheduled: Vec<usize>,
    commands: u64,
}

impl Worker {
    /// A worker; `listener` is given to the one that accepts connections.
    ///
    /// # Errors
    /// When the poller cannot be created or the listener registered.
    pub fn new(
        _id: usize,
        shared: Arc<Shared>,
        mut listener: Option<TcpListener>,
    ) -> io::Result<Self> {
        let poll = Poll::new()?;
        if let Some(l) = listener.as_mut() {
            poll.registry().register(l, LISTENER, Interest::READABLE)?;
        }
        Ok(Worker {
            poll,
            listener,
            conns: Slab::new(),
            shard: Shard::default(),
            shared,
            now: clock::now_ms(),
            dirty: Vec::new(),
            scheduled: Vec::new(),
            commands: 0,
        })
    }

    /// Runs the loop forever.
    ///
    /// # Errors
    /// When polling fails.
    pub fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(EVENTS_CAPACITY);
        loop {
            let timeout = if self.scheduled.is_empty() {
                None
            } else {
                Some(std::time::Duration::ZERO)
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            self.now = clock::now_ms();
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(),
                    Token(key) => {
                        let Some(conn) = self.conns.get_mut(key) else {
                            continue;
                        };
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            conn.readable = true;
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
            self.flush_all();
            if self.commands > 0 {
                self.shared
                    .total_commands
                    .fetch_add(self.commands, Ordering::Relaxed);
                self.commands = 0;
            }
        }
    }

    fn accept(&mut self) {
        for _ in 0..MAX_ACCEPTS_PER_TURN {
            let Some(listener) = self.listener.as_ref() else {
                return;
            };
            match listener.accept() {
                Ok((stream, addr)) => {
                    // Replies go out as soon as they are written, as with redis-server.
                    let _ = stream.set_nodelay(true);
                    let laddr = stream.local_addr().ok();
                    let client =
                        Client::new(self.shared.new_client_id(), Some(addr), laddr, self.now);
                    let conn = Conn::new(stream, client, self.shared.config.limits);
                    self.adopt(conn);
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

    fn adopt(&mut self, conn: Conn) {
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
        self.shared
            .total_connections
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Reads and runs a connection's requests until it has no complete request left and
    /// its socket is drained, or its turn is over.
    fn serve(&mut self, key: usize) {
        let Worker {
            conns,
            shard,
            shared,
            now,
            dirty,
            scheduled,
            commands,
            ..
        } = self;
        let Some(conn) = conns.get_mut(key) else {
            return;
        };
        let mut reads = 0;
        let mut drop_now = false;
        loop {
            *commands += run_requests(conn, shard, shared, *now);
            if conn.closing || conn.output.pending() > OUTPUT_HIGH_WATER {
                break;
            }
            if !conn.readable {
                break;
            }
            if reads == MAX_READS_PER_TURN {
                if !conn.scheduled {
                    conn.scheduled = true;
                    scheduled.push(key);
                }
                break;
            }
            reads += 1;
            match conn.input.read_from(&mut conn.stream) {
                Ok(ReadOutcome::Data(_)) => {}
                Ok(ReadOutcome::WouldBlock) => conn.readable = false,
                Ok(ReadOutcome::Eof) => {
                    conn.readable = false;
                    *commands += run_requests(conn, shard, shared, *now);
                    conn.closing = true;
                }
                Err(_) => {
                    drop_now = true;
                    break;
                }
            }
        }
        if drop_now {
            self.close(key);
            return;
        }
        if (conn.output.pending() > 0 || conn.closing) && !conn.dirty {
            conn.dirty = true;
            dirty.push(key);
        }
    }

    /// Writes every dirty connection's output once.
    fn flush_all(&mut self) {
        for key in std::mem::take(&mut self.dirty) {
            let Some(conn) = self.conns.get_mut(key) else {
                continue;
            };
            conn.dirty = false;
            match conn.output.write_to(&mut conn.stream) {
                Ok(true) => {
                    if conn.closing {
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
                    if (conn.input.has_pending() || conn.readable) && !conn.scheduled {
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

    fn close(&mut self, key: usize) {
        if let Some(mut conn) = self.conns.try_remove(key) {
            let _ = self.poll.registry().deregister(&mut conn.stream);
            self.shared
                .connected_clients
                .fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Decodes and runs the complete requests buffered on `conn`; returns how many ran.
fn run_requests(conn: &mut Conn, shard: &mut Shard, shared: &Shared, now: Millis) -> u64 {
    let mut ran = 0;
    while !conn.closing && conn.output.pending() <= OUTPUT_HIGH_WATER {
        let input = &mut conn.input;
        let frame = &mut input.buf[input.start..input.end];
        match input.decoder.decode(frame) {
            Ok(Decoded::Command(n)) => {
                let args = Args::new(
                    &input.buf[input.start..input.start + n],
                    input.decoder.args(),
                );
                execute(
                    &args,
                    &mut conn.client,
                    &mut conn.output.buf,
                    shard,
                    shared,
                    now,
                );
                input.consume(n);
                ran += 1;
                if conn.client.close_after_reply {
                    conn.closing = true;
                }
            }
            Ok(Decoded::Empty(n)) => input.consume(n),
            Ok(Decoded::Incomplete) => break,
            Err(e) => {
                Encoder::new(&mut conn.output.buf, conn.client.resp).error_sanitized(&e.message());
                conn.closing = true;
            }
        }
    }
    ran
}

/// Looks a request up in the command table and runs it.
fn execute(
    args: &Args<'_>,
    client: &mut Client,
    out: &mut Vec<u8>,
    shard: &mut Shard,
    shared: &Shared,
    now: Millis,
) {
    let spec = match shared.commands.resolve(args) {
        Ok(spec) => spec,
        Err(Rejection::Error(msg)) => {
            Encoder::new(out, client.resp).error_sanitized(&msg);
            return;
        }
    };
    client.last_command = spec.name;
    match spec.exec {
        Exec::Conn(f) => f(
            &mut ConnCtx {
                client,
                shared,
                out,
                now,
            },
            args,
        ),
        Exec::Shard(f) => f(
            &mut ShardCtx {
                db: &mut shard.db,
                now,
                out: Encoder::new(out, client.resp),
            },
            args,
        ),
        Exec::AllShards { part, merge } => {
            let mut reply = Vec::new();
            part(
                &mut ShardCtx {
                    db: &mut shard.db,
                    now,
                    out: Encoder::new(&mut reply, client.resp),
                },
                args,
            );
            merge(
                &mut ConnCtx {
                    client,
                    shared,
                    out,
                    now,
                },
                args,
                &[&reply],
            );
        }
        Exec::Container => {}
    }
}
