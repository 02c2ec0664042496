//! Answering a thread's clients while a script on that thread runs past
//! `busy-reply-threshold`.
//!
//! A script runs inside its worker's loop, so while it runs the loop serves no one. As
//! redis-server does from its script hook (`processEventsWhileBlocked`), the stand-in
//! serves the thread's other clients from the interpreter's count hook once the script
//! is busy: it reads their requests and answers `BUSY` (or the error a request would get
//! before that: an unknown command, `NOAUTH`), `SCRIPT KILL` and `FUNCTION KILL` (which
//! stop the script) and SHUTDOWN (NOSAVE ends the process), and accepts new connections
//! when the thread holds the listener. What else may run during a busy script needs the
//! worker (AUTH, HELLO, MULTI …): it waits, with what follows it, until the script ends,
//! in order.
//!
//! The worker lends its connections (and its listener) to the stand-in around the shard
//! work that may run a script ([`Worker::lend_conns`]), and takes them back after, with
//! the connections the stand-in served (to flush and read again) and those it accepted
//! (to register with the loop's poll). The stand-in polls with its own poll, made when a
//! script turns busy: a descriptor may be registered with more than one.

use std::cell::RefCell;
use std::os::fd::AsRawFd as _;
use std::sync::Arc;
use std::time::Duration;

use goblin_protocol::{Decoded, Encoder};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use slab::Slab;

use crate::runtime::conn::{Conn, Deferred, ReadOutcome};
use crate::runtime::pipeline::Route;
use crate::runtime::server::{Shared, listener_of, listener_token};
use crate::runtime::worker::Worker;
use crate::table::Flags;
use crate::table::handler::{Args, MultiState};

/// Reads of one connection per visit at most (each reads up to the buffer's free space).
const READS_PER_VISIT: usize = 16;

/// What a worker lends while shard work runs.
#[derive(Default)]
struct Lent {
    /// Whether the worker's connections are here now.
    lent: bool,
    conns: Slab<Conn>,
    listeners: Vec<crate::runtime::net::Listener>,
    /// The connection whose command runs the script: not served (its requests wait).
    running: Option<usize>,
    shared: Option<Arc<Shared>>,
    /// The worker's generation counter for new connections.
    next_gen: u64,
    /// The worker's id.
    worker: usize,
    /// The stand-in's poll, while a script is busy.
    poll: Option<(Poll, Events)>,
    /// Connections served (flushed and read again once the worker has them back).
    served: Vec<usize>,
    /// Connections accepted (to register with the worker's poll).
    accepted: Vec<usize>,
}

thread_local! {
    static LENT: RefCell<Lent> = RefCell::default();
}

impl Worker {
    /// Lends this worker's connections and listener to the stand-in, for shard work that
    /// may run a script; `running`: the connection whose command it is, if on this
    /// worker and not marked busy. [`Worker::take_back_conns`] must follow.
    #[inline(never)]
    pub(crate) fn lend_conns(&mut self, running: Option<usize>) {
        LENT.with(|l| {
            let Ok(mut l) = l.try_borrow_mut() else {
                return;
            };
            if l.lent {
                return;
            }
            l.lent = true;
            std::mem::swap(&mut l.conns, &mut self.conns);
            std::mem::swap(&mut l.listeners, &mut self.listeners);
            l.running = running;
            l.next_gen = self.next_gen;
            l.worker = self.id;
            if l.shared.is_none() {
                l.shared = Some(Arc::clone(&self.shared));
            }
        });
    }

    /// Takes back what [`Worker::lend_conns`] lent: the connections the stand-in served
    /// are flushed and read again, those it accepted are registered.
    #[inline(never)]
    pub(crate) fn take_back_conns(&mut self) {
        let (served, accepted) = LENT.with(|l| {
            let Ok(mut l) = l.try_borrow_mut() else {
                return (Vec::new(), Vec::new());
            };
            if !l.lent {
                return (Vec::new(), Vec::new());
            }
            l.lent = false;
            std::mem::swap(&mut l.conns, &mut self.conns);
            std::mem::swap(&mut l.listeners, &mut self.listeners);
            l.running = None;
            if l.poll.take().is_some()
                && let Some(busy) = self.shared.busy_workers.get(self.id)
            {
                busy.store(false, std::sync::atomic::Ordering::Relaxed);
            }
            self.next_gen = l.next_gen;
            (
                std::mem::take(&mut l.served),
                std::mem::take(&mut l.accepted),
            )
        });
        let accepted: Vec<usize> = accepted
            .into_iter()
            .filter(|&key| self.register_conn(key))
            .collect();
        for key in served.into_iter().chain(accepted) {
            self.mark_dirty(key);
            if let Some(conn) = self.conns.get_mut(key)
                && !conn.scheduled
            {
                conn.scheduled = true;
                self.scheduled.push(key);
            }
        }
    }
}

/// Called by the script hook while a script is busy: serves this thread's other
/// clients, if its worker lent them (see the module's documentation).
pub fn serve_busy() {
    LENT.with(|l| {
        if let Ok(mut l) = l.try_borrow_mut()
            && l.lent
        {
            l.serve();
        }
    });
}

impl Lent {
    fn serve(&mut self) {
        if self.poll.is_none() {
            self.start();
        }
        let Some((mut poll, mut events)) = self.poll.take() else {
            return;
        };
        if poll.poll(&mut events, Some(Duration::ZERO)).is_ok() {
            for event in events.iter() {
                match event.token() {
                    token if listener_of(token).is_some() => self.accept(&poll),
                    Token(key) => self.serve_conn(key),
                }
            }
        }
        self.poll = Some((poll, events));
    }

    /// The script just turned busy: a poll for the connections and the listener, and a
    /// first visit of every connection (some hold requests read before).
    fn start(&mut self) {
        let Ok(poll) = Poll::new() else {
            return;
        };
        let registry = poll.registry();
        for (key, conn) in self.conns.iter() {
            let fd = conn.stream.as_raw_fd();
            let _ = registry.register(&mut SourceFd(&fd), Token(key), Interest::READABLE);
        }
        for (i, l) in self.listeners.iter().enumerate() {
            let fd = l.as_raw_fd();
            let _ = registry.register(&mut SourceFd(&fd), listener_token(i), Interest::READABLE);
        }
        if let Some(busy) = self
            .shared
            .as_ref()
            .and_then(|s| s.busy_workers.get(self.worker))
        {
            busy.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        for key in keys {
            self.serve_conn(key);
        }
        self.poll = Some((poll, Events::with_capacity(256)));
    }

    /// Accepts the clients waiting on the listeners, as the worker does, and serves them.
    fn accept(&mut self, poll: &Poll) {
        let Some(shared) = self.shared.clone() else {
            return;
        };
        let mut i = 0;
        loop {
            let Some(listener) = self.listeners.get(i) else {
                return;
            };
            let (stream, origin) = match listener.accept() {
                Ok(accepted) => accepted,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    i += 1;
                    continue;
                }
            };
            let Some(stream) = crate::runtime::worker::admit(&shared, stream, &origin) else {
                continue;
            };
            self.next_gen += 1;
            let now = crate::clock::now_ms();
            let conn =
                crate::runtime::worker::new_conn(&shared, stream, origin, now, self.next_gen);
            let key = self.conns.insert(conn);
            self.accepted.push(key);
            if let Some(conn) = self.conns.get(key) {
                let fd = conn.stream.as_raw_fd();
                let _ =
                    poll.registry()
                        .register(&mut SourceFd(&fd), Token(key), Interest::READABLE);
            }
            self.serve_conn(key);
        }
    }

    /// Reads a connection's requests and answers those it can.
    fn serve_conn(&mut self, key: usize) {
        let Some(shared) = self.shared.clone() else {
            return;
        };
        if self.running == Some(key) {
            return;
        }
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        // (Nor one whose input is out of it — being run, its buffer a placeholder with no
        // room — which only `running` should be.)
        if conn.busy()
            || conn.gone
            || conn.closing
            || conn.deferred.is_some()
            || conn.input.buf.is_empty()
        {
            return;
        }
        self.served.push(key);
        let limit = shared.client_limits.query_buffer();
        for _ in 0..READS_PER_VISIT {
            if conn.peer_closed || conn.input.pending() > limit {
                break;
            }
            match conn.input.read_from(&conn.stream) {
                Ok(ReadOutcome::Full) => {}
                Ok(ReadOutcome::Drained | ReadOutcome::WouldBlock) => {
                    conn.readable = false;
                    break;
                }
                Ok(ReadOutcome::Eof) => {
                    conn.readable = false;
                    conn.peer_closed = true;
                    break;
                }
                // (The worker finds the failure again and closes the connection.)
                Err(_) => break,
            }
        }
        loop {
            let input = &mut conn.input;
            let decoded = input
                .decoder
                .decode_cold(&mut input.buf[input.start..input.end]);
            match decoded {
                Ok(Decoded::Command(n)) => {
                    let args = Args::framed(
                        &input.buf[input.start..input.start + n],
                        input.decoder.args(),
                    );
                    let authenticated = conn.client.authenticated;
                    let answered = answer(&shared, authenticated, &mut conn.multi, &args);
                    let resp = conn.client.resp;
                    match answered {
                        Answer::Later => {
                            // It runs once the script is over (it is decoded already).
                            conn.deferred = Some(Deferred {
                                len: n,
                                route: Route::default(),
                            });
                            break;
                        }
                        Answer::Ok => conn.output.buf.extend_from_slice(b"+OK\r\n"),
                        Answer::Quit => {
                            conn.output.buf.extend_from_slice(b"+OK\r\n");
                            conn.closing = true;
                        }
                        Answer::Error(e) => {
                            Encoder::new(&mut conn.output.buf, resp).error_sanitized(&e);
                        }
                        Answer::Stats => crate::families::functions::stats_reply(
                            &shared,
                            &mut Encoder::new(&mut conn.output.buf, resp),
                        ),
                    }
                    conn.input.consume(n);
                    if conn.closing {
                        break;
                    }
                }
                Ok(Decoded::Empty(n)) => input.consume(n),
                Ok(Decoded::Incomplete) => break,
                Err(e) => {
                    let resp = conn.client.resp;
                    Encoder::new(&mut conn.output.buf, resp).error_sanitized(&e.message());
                    conn.closing = true;
                    break;
                }
            }
        }
        if conn.output.pending() > 0 {
            // (What cannot be written now the worker writes once it has the connection
            // back; a failure it finds again.)
            let _ = conn.output.write_to(&mut conn.stream);
        }
    }
}

/// What a request gets during a busy script.
enum Answer {
    Error(Vec<u8>),
    Ok,
    /// QUIT's `+OK`, then the connection closes.
    Quit,
    /// It may run during a busy script, but here only once it is over.
    Later,
    /// FUNCTION STATS, which shows the busy script.
    Stats,
}

/// The answer to a request during a busy script, as redis-server's `processCommand`
/// gives it: the errors it checks for before (an unknown command, NOAUTH, LOADING), BUSY, or what
/// the commands allowed during a busy script answer.
fn answer(
    shared: &Shared,
    authenticated: bool,
    multi: &mut Option<MultiState>,
    args: &Args<'_>,
) -> Answer {
    let spec = match shared.commands.resolve(args) {
        Ok(spec) => spec,
        Err(rejection) => return Answer::Error(rejection.message),
    };
    if !authenticated && !spec.flags.contains(Flags::NO_AUTH) {
        return Answer::Error(crate::errors::NOAUTH.to_vec());
    }
    // (A slow script of a log being replayed: loading comes first.)
    let refusal = if shared.persist.loading() && !spec.flags.contains(Flags::LOADING) {
        Some(crate::errors::LOADING)
    } else if !spec.flags.contains(Flags::ALLOW_BUSY) {
        Some(crate::scripting::busy_error())
    } else {
        None
    };
    if let Some(refusal) = refusal {
        // A transaction a command was refused in fails at EXEC.
        if let Some(multi) = multi.as_mut() {
            multi.dirty = true;
        }
        return Answer::Error(refusal.to_vec());
    }
    if multi.is_some() {
        return Answer::Later;
    }
    let kill = |eval: bool| match crate::scripting::kill(eval).error() {
        None => Answer::Ok,
        Some(error) => Answer::Error(error.to_vec()),
    };
    match spec.name {
        "quit" => Answer::Quit,
        "script|kill" => kill(true),
        "function|kill" => kill(false),
        "function|stats" => Answer::Stats,
        "shutdown" => Answer::Error(crate::families::persistence::shutdown_while_busy(
            shared, args,
        )),
        _ => Answer::Later,
    }
}
