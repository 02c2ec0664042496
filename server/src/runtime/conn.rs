//! A client connection's socket and buffers.
//!
//! The read buffer is a `Vec<u8>` kept at its full length (zeroed once when it grows),
//! with `start..end` the received bytes not yet consumed; requests are decoded in place
//! and their arguments are ranges into it. It grows only when it is full of bytes that
//! actually arrived, by doubling, so a client that declares a huge argument and sends
//! little makes the server hold little.

use std::io::{self, Write};
use std::os::fd::AsRawFd;

use crate::runtime::net::Stream;
use goblin_protocol::{Limits, RequestDecoder};

use crate::runtime::client::{Client, ConnFacts};
use crate::runtime::msg::Batch;
use crate::runtime::pipeline::Route;
use crate::table::handler::MultiState;

/// Initial (and idle) size of a connection's read buffer; Redis reads 16 KiB at a time.
const READ_BUFFER_INITIAL: usize = 16 * 1024;
/// Least free space to read into; below it the buffer is compacted or grown first.
const READ_MIN_FREE: usize = 4 * 1024;
/// A read buffer larger than this is cut down to its recent peak ([`Input::resize`];
/// Redis's `PROTO_RESIZE_THRESHOLD`).
const READ_RESIZE_ABOVE: usize = 32 * 1024;
/// A bulk argument this long or longer is a big one (Redis's `PROTO_MBULK_BIG_ARG`): Redis
/// makes room for it in its query buffer at once, and starts the buffer at its payload.
const BIG_ARG: usize = 32 * 1024;
/// An output buffer whose capacity grew past this is released once it has been written.
const OUTPUT_SHRINK_ABOVE: usize = 1024 * 1024;

/// What a read from the socket gave.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    /// Bytes arrived and filled the space offered: there may be more.
    Full,
    /// Fewer bytes arrived than there was space for: the socket is drained. (With
    /// edge-triggered readiness this is as good as `WouldBlock`: bytes arriving after the
    /// read raise a new event. Not reading again saves a system call per turn.)
    Drained,
    /// Nothing to read now.
    WouldBlock,
    /// The peer closed its side.
    Eof,
}

/// Unconsumed input and the decoder working through it.
#[derive(Debug)]
pub struct Input {
    /// The buffer; `buf[start..end]` are pending bytes.
    pub buf: Vec<u8>,
    /// First pending byte (the start of the request being decoded).
    pub start: usize,
    /// End of the received bytes.
    pub end: usize,
    /// The connection's request decoder.
    pub decoder: RequestDecoder,
    /// The requests before this offset had their keys prefetched
    /// (`Worker::prefetch_keys`): each request is looked at once, however many times
    /// the connection stops and goes on.
    pub prefetched: usize,
    /// Requests from this offset on are kept although consumed: the connection may
    /// decode them again (`Input::rewind`), when a batch that commands were held back
    /// for stops short (`Worker::hold_back`).
    pub keep: Option<usize>,
    /// When the bytes of the last read that got any reached the machine (the kernel's
    /// receive time, ns since the epoch), if the kernel said ([`Input::read_from`]).
    pub arrived: Option<u64>,
    /// The most bytes the buffer held since [`Input::resize`] last looked.
    peak: usize,
}

impl Default for Input {
    /// An empty placeholder, allocating nothing (used while a connection's input is
    /// borrowed out of it).
    fn default() -> Self {
        Input {
            buf: Vec::new(),
            start: 0,
            end: 0,
            decoder: RequestDecoder::default(),
            prefetched: 0,
            keep: None,
            arrived: None,
            peak: 0,
        }
    }
}

impl Input {
    pub(crate) fn new(limits: Limits) -> Self {
        Input {
            buf: vec![0; READ_BUFFER_INITIAL],
            start: 0,
            end: 0,
            decoder: RequestDecoder::new(limits),
            prefetched: 0,
            keep: None,
            arrived: None,
            peak: 0,
        }
    }

    /// Received bytes not yet consumed.
    pub fn pending(&self) -> usize {
        self.end - self.start
    }

    /// True when there are received bytes not yet consumed.
    pub fn has_pending(&self) -> bool {
        self.start < self.end
    }

    /// A big bulk argument ([`BIG_ARG`] or more) on its way: where its payload starts
    /// (from the request start) and its declared length.
    fn big_bulk(&self) -> Option<(usize, usize)> {
        self.decoder
            .awaited_bulk()
            .filter(|&(_, len)| len >= BIG_ARG)
    }

    /// While a big bulk argument is arriving, the bytes of its request before its
    /// payload: Redis's query buffer then starts at the payload (it trims the rest), and
    /// CLIENT LIST's `qbuf` counts from there.
    pub fn big_bulk_head(&self) -> usize {
        self.big_bulk()
            .map_or(0, |(pos, _)| pos.min(self.pending()))
    }

    /// While a big bulk argument is arriving, the room its buffer still lacks for it:
    /// counted with the client's memory as Redis counts the query buffer it makes room
    /// for such an argument in at once (here the room is made as the bytes arrive).
    pub fn big_bulk_rest(&self) -> usize {
        self.big_bulk().map_or(0, |(pos, len)| {
            (self.start + pos + len + 2).saturating_sub(self.buf.len())
        })
    }

    /// Marks `n` bytes at the start as consumed.
    pub fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
        if self.start == self.end && self.keep.is_none() {
            self.start = 0;
            self.end = 0;
            self.prefetched = 0;
        }
    }

    /// The first byte the buffer must keep: the request being decoded, or the first
    /// one kept to be decoded again.
    fn first_kept(&self) -> usize {
        self.keep.map_or(self.start, |keep| keep.min(self.start))
    }

    /// Gives back room the buffer does not need, as Redis's cron does with a client's
    /// query buffer once a second (`clientsCronResizeQueryBuffer`): all the free room
    /// when the connection has been `idle` (over two seconds), and otherwise, for a
    /// buffer past 32 KiB that is more than twice the most it held since the last look,
    /// the room above that peak (at least the initial 16 KiB). Then the peak starts
    /// again from what it holds now. (A buffer stays as large as a big request made it
    /// until then: a client that sends big values keeps the room it needs.)
    pub fn resize(&mut self, idle: bool) {
        let from = self.first_kept();
        let held = self.end - from;
        // A bulk argument on its way: the bytes it still needs.
        let awaited = self
            .decoder
            .needed()
            .map_or(0, |needed| needed + (self.start - from));
        let size = self.buf.len();
        if size - held > READ_MIN_FREE {
            if idle {
                self.reallocate(from, held);
            } else if size > READ_RESIZE_ABOVE && size / 2 > self.peak {
                let keep = self.peak.max(held).max(awaited).max(READ_BUFFER_INITIAL);
                self.reallocate(from, keep);
            }
        }
        self.peak = held.max(awaited);
    }

    /// Moves the bytes kept (from `from`) to the start of a new buffer of `size` bytes.
    fn reallocate(&mut self, from: usize, size: usize) {
        let held = self.end - from;
        let mut buf = vec![0; size.max(held)];
        buf[..held].copy_from_slice(&self.buf[from..self.end]);
        self.buf = buf;
        self.shift(from);
    }

    /// The bytes from `from` on now start at 0.
    fn shift(&mut self, from: usize) {
        self.end -= from;
        self.prefetched = self.prefetched.saturating_sub(from);
        self.start -= from;
        self.keep = self.keep.map(|keep| keep - from);
    }

    /// Makes room to read into: compacts, then grows (doubling) when the buffer is full
    /// of received bytes.
    fn make_room(&mut self) {
        if self.buf.len() - self.end >= READ_MIN_FREE {
            return;
        }
        let from = self.first_kept();
        if from > 0 {
            self.buf.copy_within(from..self.end, 0);
            self.shift(from);
        }
        if self.buf.len() - self.end < READ_MIN_FREE {
            // A buffer given back whole (idle) starts again at the initial size. It
            // doubles, but no further than the end of a bulk argument on its way, as
            // Redis sizes its query buffer to a big argument (what was declared is
            // reached only as it arrives: never more than twice what did).
            let doubled = if self.buf.is_empty() {
                READ_BUFFER_INITIAL
            } else {
                self.buf.len().max(READ_BUFFER_INITIAL) * 2
            };
            let len = match self.decoder.needed() {
                Some(needed) if self.start + needed > self.end => {
                    (self.start + needed).clamp(self.buf.len(), doubled)
                }
                _ => doubled,
            };
            if len > self.buf.len() {
                // (Exactly: `resize` alone would round the capacity up to a doubling.)
                self.buf.reserve_exact(len - self.buf.len());
                self.buf.resize(len, 0);
            }
        }
    }

    /// Keeps the requests from the one being decoded on (`Input::keep`), if not kept
    /// already; returns that request's offset from the first one kept.
    pub fn keep_from_here(&mut self) -> usize {
        let keep = *self.keep.get_or_insert(self.start);
        self.start - keep
    }

    /// Goes back to the request kept at offset `at` (from [`Input::keep_from_here`]),
    /// to decode it and those after it again; `None`: no going back, the requests kept
    /// are released.
    pub fn rewind(&mut self, at: Option<usize>) {
        let Some(keep) = self.keep.take() else {
            return;
        };
        if let Some(at) = at {
            self.start = (keep + at).min(self.end);
            self.decoder.reset();
        }
        self.consume(0);
    }

    /// Reads once from `socket` into the free space, and keeps when the bytes reached the
    /// machine in [`Input::arrived`] (the kernel says, with `SO_TIMESTAMPNS` on: see
    /// `worker::receive_times`): a `recvmsg` rather than a `read`, at about 2% of a
    /// `-P 1` command's CPU.
    ///
    /// # Errors
    /// Socket errors other than `WouldBlock` and `Interrupted`.
    pub fn read_from(&mut self, socket: &impl AsRawFd) -> io::Result<ReadOutcome> {
        use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
        /// Room for the receive time's control message (32 bytes), aligned as the
        /// kernel's `cmsghdr`, as `recvmsg` requires.
        #[repr(C, align(8))]
        struct Control([u8; 64]);
        self.make_room();
        let space = self.buf.len() - self.end;
        let mut control = Control([0; 64]);
        loop {
            let mut iov = [io::IoSliceMut::new(&mut self.buf[self.end..])];
            let received = recvmsg::<()>(
                socket.as_raw_fd(),
                &mut iov,
                Some(&mut control.0[..]),
                MsgFlags::empty(),
            )
            .map(|msg| {
                let arrived = msg.cmsgs().ok().and_then(|mut cmsgs| {
                    cmsgs.find_map(|cmsg| match cmsg {
                        ControlMessageOwned::ScmTimestampns(t) => {
                            let secs = u64::try_from(t.tv_sec()).ok()?;
                            let nanos = u64::try_from(t.tv_nsec()).ok()?;
                            Some(secs.saturating_mul(1_000_000_000).saturating_add(nanos))
                        }
                        _ => None,
                    })
                });
                (msg.bytes, arrived)
            })
            .map_err(io::Error::from);
            match received {
                Ok((0, _)) => return Ok(ReadOutcome::Eof),
                Ok((n, arrived)) => {
                    self.end += n;
                    self.peak = self.peak.max(self.end - self.first_kept());
                    self.arrived = arrived;
                    return Ok(if n < space {
                        ReadOutcome::Drained
                    } else {
                        ReadOutcome::Full
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Ok(ReadOutcome::WouldBlock);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Replies waiting to be written.
#[derive(Debug, Default)]
pub struct Output {
    /// Encoded replies; `buf[written..]` is still to be sent.
    pub buf: Vec<u8>,
    written: usize,
}

/// What an idle output buffer keeps when memory is short ([`Output::release_idle`]).
const OUTPUT_IDLE_KEEP: usize = 16 * 1024;

impl Output {
    /// Gives back the room of a buffer that holds nothing to send and grew past 16 KiB (a
    /// burst of replies or pushes): asked before keys are evicted, as Redis frees its
    /// reply list once written. (A written buffer keeps its room up to a megabyte
    /// otherwise: a pipeline of large replies would grow it again at every write.)
    /// Whether it gave some back.
    pub fn release_idle(&mut self) -> bool {
        if !self.is_fat() {
            return false;
        }
        self.buf = Vec::new();
        self.written = 0;
        true
    }

    /// Whether the buffer holds nothing to send and kept more room than
    /// [`Output::release_idle`] leaves.
    pub fn is_fat(&self) -> bool {
        self.pending() == 0 && self.buf.capacity() > OUTPUT_IDLE_KEEP
    }

    /// Bytes still to send.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.written
    }

    /// Writes as much as the socket takes. Ok(true) when everything was written.
    ///
    /// # Errors
    /// Socket errors other than `WouldBlock` and `Interrupted`.
    pub fn write_to(&mut self, dst: &mut impl Write) -> io::Result<bool> {
        while self.written < self.buf.len() {
            match dst.write(&self.buf[self.written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        self.buf.clear();
        self.written = 0;
        if self.buf.capacity() > OUTPUT_SHRINK_ABOVE {
            self.buf = Vec::new();
        }
        Ok(true)
    }
}

/// A request that arrived while its connection waited: its frame's length at the start of
/// the input, and what routing found out about it.
#[derive(Debug, Clone, Copy)]
pub struct Deferred {
    /// The frame's length.
    pub len: usize,
    /// Its command and shards.
    pub route: Route,
}

/// A question a connection asked every worker.
#[derive(Debug)]
pub struct Asking {
    /// The command that asks.
    pub command: std::sync::Arc<Batch>,
    /// The answers so far.
    pub answers: Vec<Vec<u8>>,
    /// How many answers are due in all.
    pub due: usize,
    /// How long the workers took to answer so far, microseconds.
    pub micros: u64,
}

/// A question of another connection's (or of one of this worker's) that a worker is to
/// answer (`Worker::answer_questions`).
pub struct Question {
    /// The connection that asks.
    pub from: crate::runtime::msg::ConnRef,
    /// The command that asks.
    pub command: std::sync::Arc<Batch>,
    /// The worker's count of batches sent to other shards once the input it had seen
    /// when the question came was served: it answers once as many are back.
    pub runs_due: Option<u64>,
    /// When it came.
    pub since: std::time::Instant,
}

/// One client connection.
#[derive(Debug)]
pub struct Conn {
    /// The socket.
    pub stream: Stream,
    /// Received, unconsumed bytes.
    pub input: Input,
    /// Replies to send.
    pub output: Output,
    /// Client state.
    pub client: Client,
    /// The socket may hold unread bytes (edge-triggered readiness not yet drained).
    pub readable: bool,
    /// The peer closed its side (or the socket failed): read until the end of stream.
    pub read_to_end: bool,
    /// WRITABLE interest is registered (after a write hit `WouldBlock`).
    pub wants_writable: bool,
    /// No more requests are read or run; the connection closes once its output is sent.
    pub closing: bool,
    /// Queued on the worker's list of connections to flush this iteration.
    pub dirty: bool,
    /// Queued on the worker's list of connections with work left for the next iteration.
    pub scheduled: bool,
    /// Generation of the slab slot, so that late messages for a closed connection are
    /// told apart from the one reusing the slot.
    pub generation: u64,
    /// Commands for a remote shard gathered this iteration, sent at its end.
    pub open: Option<Box<Batch>>,
    /// Batches sent to `flight_shard` (or parked on the local one) not yet answered.
    pub in_flight: usize,
    /// The shard the batches in flight went to.
    pub flight_shard: usize,
    /// Reply bytes the batches in flight may bring back at most (their budgets): counted
    /// with the unsent output against the connection's bound.
    pub reserved: usize,
    /// A batch in flight stopped at its reply budget and waits at its shard for the
    /// client to read: resume it once the output drains.
    pub stalled: bool,
    /// A keyspace-wide command or transaction in progress.
    pub job: Option<u64>,
    /// A FLUSHALL or FLUSHDB of this tracking client is in progress: once it answers,
    /// it is told that every key changed (after the reply, as Redis does).
    pub tracking_flush: bool,
    /// Invalidations of its own writes that arrived while a transaction of its own was
    /// in progress: written after the transaction's reply, as Redis writes them after
    /// the command's.
    pub deferred_pushes: Vec<u8>,
    /// A question asked of every worker, until every answer is in.
    pub asking: Option<Asking>,
    /// EXEC's reply after its queued command that is [`Conn::asking`] every worker.
    pub exec_rest: Option<crate::runtime::pipeline::ExecRest>,
    /// MULTI state: the queued commands, and whether one was rejected.
    pub multi: Option<MultiState>,
    /// Its memory and bucket as its worker last published them for client eviction
    /// (`None`: not counted, no limit is set).
    pub evict: Option<crate::runtime::client_eviction::Weight>,
    /// A request that arrived while the connection waited: the length of the frame at the
    /// start of the input, already decoded (its arguments are still the decoder's), to run
    /// first. It stays where it is, uncopied, and the decoder is not called again until it
    /// has run (an inline request was unescaped in place and cannot be decoded twice).
    pub deferred: Option<Deferred>,
    /// The peer closed its side: once the requests already received have run and been
    /// answered, the connection closes.
    pub peer_closed: bool,
    /// Closed and deregistered; the slot stays until work in flight has answered.
    pub gone: bool,
    /// Since when its pending replies have been over its class's soft output limit.
    pub soft_since: Option<goblin_store::Millis>,
    /// A command of a client whose replies are off (CLIENT REPLY) is in flight: its reply
    /// is dropped when it arrives.
    pub drop_reply: bool,
    /// Its next command waits for CLIENT PAUSE to end.
    pub paused: bool,
    /// Batches sent since the connection opened (those come back: `sent - in_flight`).
    pub sent: u64,
    /// Replies of commands run early (`Worker::run_early`), ahead of batches still in
    /// flight, not yet in the output.
    pub early: Early,
}

/// Replies of a connection's commands that ran ahead of its batches in flight, each held
/// until the batches sent before it came back, and the keys locked for them meanwhile.
#[derive(Debug, Default)]
pub struct Early {
    /// The replies, one after the other.
    pub replies: Vec<u8>,
    /// For each run of replies, where it goes: after the first `n` commands of batch
    /// `b` (counting the connection's batches from 1), as `(b, n, end)` with `end`
    /// where the run ends in `replies`. (`n` is 0 for a run that goes after batch
    /// `b - 1`, whatever comes next.)
    pub marks: std::collections::VecDeque<(u64, usize, usize)>,
    /// Replies of the oldest batch in flight that came back already (its commands
    /// before a stall at its reply budget).
    pub head_cmds: usize,
    /// Where the replies not yet moved to the output start.
    pub moved: usize,
    /// Keys locked for them on the connection's shard.
    pub holds: usize,
    /// Commands of the connection's shard held back while the batch gathered for an
    /// earlier shard runs there, their keys locked here (`Worker::hold_back`).
    pub held: Option<Box<Batch>>,
    /// For each held-back command: after how many of that batch's commands it goes, and
    /// where its request starts in the input, from the first request kept
    /// (`Input::keep`).
    pub held_at: Vec<(usize, usize)>,
}

impl Conn {
    /// True while the connection waits for work it started elsewhere; its next command
    /// runs only after that, to keep the order in which its commands take effect.
    pub fn busy(&self) -> bool {
        self.in_flight > 0 || self.open.is_some() || self.job.is_some() || self.asking.is_some()
    }

    /// Reply bytes held for the connection: unsent output, and what its batches in
    /// flight may bring back.
    pub fn held_replies(&self) -> usize {
        self.output.pending() + self.reserved + self.early.replies.len()
    }

    /// What it holds now, for CLIENT LIST and the log (`blocked`: whether its command
    /// waits for a key).
    pub fn facts(&self, blocked: bool) -> ConnFacts {
        use std::os::fd::AsRawFd as _;
        ConnFacts {
            fd: self.stream.as_raw_fd(),
            qbuf: self.input.pending() - self.input.big_bulk_head(),
            argv_mem: 0,
            qbuf_free: self.input.buf.len() - self.input.end,
            multi: self.multi.as_ref().map(|m| m.queued.len()),
            omem: self.output.pending(),
            tot_mem: self.memory(),
            blocked,
            writable: self.wants_writable,
        }
    }

    /// The memory the connection holds (CLIENT LIST's `tot-mem`, what client eviction
    /// weighs), as Redis's `getClientMemoryUsage` counts it: its buffers (with the rest
    /// of a big argument on its way, [`Input::big_bulk_rest`]), its replies
    /// waiting for other shards, its queued MULTI commands, the tables of the keys it
    /// WATCHes and of its subscriptions, and its tracking prefixes.
    pub fn memory(&self) -> usize {
        size_of::<Conn>()
            + self.input.buf.capacity()
            + self.input.big_bulk_rest()
            + self.output.buf.capacity()
            + self.early.replies.capacity()
            + self.multi.as_ref().map_or(0, |m| m.bytes)
            + self.client.watching.as_ref().map_or(0, |w| w.table_bytes())
            + self.client.subs.table_bytes()
            + self
                .client
                .tracking
                .prefixes
                .iter()
                .map(|p| p.len() + size_of::<Box<[u8]>>())
                .sum::<usize>()
    }

    /// The client's CLIENT LIST line as it is now.
    pub fn info_line(&mut self, blocked: bool, now: goblin_store::Millis) -> String {
        self.client.facts = self.facts(blocked);
        self.client.info_line(now)
    }
}

impl Conn {
    /// A connection over `stream`.
    pub fn new(stream: Stream, client: Client, limits: Limits, generation: u64) -> Self {
        Conn {
            stream,
            input: Input::new(limits),
            output: Output::default(),
            client,
            readable: true,
            read_to_end: false,
            wants_writable: false,
            closing: false,
            dirty: false,
            scheduled: false,
            generation,
            open: None,
            in_flight: 0,
            flight_shard: 0,
            reserved: 0,
            stalled: false,
            job: None,
            tracking_flush: false,
            deferred_pushes: Vec::new(),
            asking: None,
            exec_rest: None,
            multi: None,
            evict: None,
            deferred: None,
            peer_closed: false,
            gone: false,
            soft_since: None,
            drop_reply: false,
            paused: false,
            sent: 0,
            early: Early::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_grows_only_with_received_bytes() {
        let mut input = Input::new(Limits::default());
        let (src, mut dst) = std::os::unix::net::UnixStream::pair().expect("a socket pair");
        let writer = std::thread::spawn(move || dst.write_all(&[b'x'; 300_000]));
        let mut total = 0;
        let mut before = 0;
        while let Ok(ReadOutcome::Full | ReadOutcome::Drained) = input.read_from(&src) {
            total += input.end - before;
            before = input.end;
        }
        writer.join().expect("the writer").expect("written");
        assert_eq!(total, 300_000);
        assert!(input.buf.len() <= 2 * 300_000 + READ_BUFFER_INITIAL);
        input.consume(300_000);
        // Kept while it is the recent peak; then cut down, as the cron does once a
        // second.
        let grown = input.buf.len();
        input.resize(false);
        assert_eq!(input.buf.len(), grown);
        input.resize(false);
        assert_eq!(input.buf.len(), READ_BUFFER_INITIAL);
        // Idle: given back whole, and the next read starts at the initial size again.
        input.resize(true);
        assert_eq!(input.buf.len(), 0);
        input.make_room();
        assert_eq!(input.buf.len(), READ_BUFFER_INITIAL);
    }

    #[test]
    fn a_resize_keeps_the_pending_bytes_and_a_bulk_on_its_way() {
        let mut input = Input::new(Limits::default());
        let request = b"*2\r\n$3\r\nGET\r\n$100000\r\nxyz";
        input.buf = vec![0; 256 * 1024];
        input.buf[..request.len()].copy_from_slice(request);
        input.end = request.len();
        let mut buf = input.buf.clone();
        assert!(matches!(
            input.decoder.decode(&mut buf[..input.end]),
            Ok(goblin_protocol::Decoded::Incomplete)
        ));
        input.resize(false);
        input.resize(false);
        // The peak is what the bulk needs: the room for it stays.
        assert!(input.buf.len() >= 100_000, "{}", input.buf.len());
        assert!(input.buf.len() < 256 * 1024);
        assert_eq!(&input.buf[..input.end], request);
        input.resize(true);
        assert_eq!(input.buf.len(), request.len());
        assert_eq!(&input.buf[..input.end], request);
    }

    #[test]
    fn a_read_knows_when_its_bytes_came() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
        let mut client = std::net::TcpStream::connect(listener.local_addr().expect("its address"))
            .expect("connected");
        let (server, _) = listener.accept().expect("accepted");
        crate::runtime::worker::receive_times(&server);
        let mut input = Input::new(Limits::default());
        // The kernel starts stamping packets a moment after the first socket asks (the
        // switch is flipped by a deferred work item): the first bytes may come unstamped.
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let sent = crate::clock::now_ns();
            client.write_all(b"*1\r\n$4\r\nPING\r\n").expect("sent");
            std::thread::sleep(std::time::Duration::from_millis(20));
            let read = crate::clock::now_ns();
            assert!(matches!(input.read_from(&server), Ok(ReadOutcome::Drained)));
            if let Some(arrived) = input.arrived {
                assert!(
                    (sent..read).contains(&arrived),
                    "arrived {arrived}: after {sent}, before the read at {read}"
                );
                break;
            }
            assert!(std::time::Instant::now() < give_up, "no receive time");
        }
        // Without the option, nothing is said.
        let mut other = std::net::TcpStream::connect(listener.local_addr().expect("its address"))
            .expect("connected");
        let (plain, _) = listener.accept().expect("accepted");
        other.write_all(b"PING\r\n").expect("sent");
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(matches!(input.read_from(&plain), Ok(ReadOutcome::Drained)));
        assert_eq!(input.arrived, None);
    }

    #[test]
    fn output_survives_partial_writes() {
        struct Trickle(Vec<u8>, usize);
        impl Write for Trickle {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                if self.1 == 0 {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                self.1 -= 1;
                self.0.push(b[0]);
                Ok(1)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut out = Output::default();
        out.buf.extend_from_slice(b"+OK\r\n");
        let mut sink = Trickle(Vec::new(), 2);
        assert!(!out.write_to(&mut sink).unwrap_or(true));
        assert_eq!(out.pending(), 3);
        sink.1 = 10;
        assert!(out.write_to(&mut sink).unwrap_or(false));
        assert_eq!(sink.0, b"+OK\r\n");
    }
}
