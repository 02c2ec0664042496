//! Consumer-group throughput (XREADGROUP + XACK) against any Redis-protocol server.
//!
//! redis-benchmark cannot send an XACK for the IDs an XREADGROUP returned; this can:
//!
//! 1. **fill**: `--streams` streams `<prefix><i>`, each of `--entries` entries with explicit
//!    IDs `1-1 … N-1` and three fields (`f1 v1 f2 v2 f3 v3`), sent pipelined from one
//!    connection. A stream that already has exactly `--entries` entries is kept (a later
//!    run reuses the fill); any other is deleted and filled again.
//! 2. **group**: on each stream, `XGROUP DESTROY <s> <group>` then `XGROUP CREATE <s>
//!    <group> 0`, so every run reads the streams from their start.
//! 3. **run**: `--connections` connections; connection `i` reads stream `i % streams` as
//!    consumer `c<i>`. Each keeps `--pipeline` XREADGROUPs in flight (`XREADGROUP GROUP
//!    <group> c<i> COUNT <count> STREAMS <s> >`); when a read's reply comes back, the
//!    connection sends `XACK <s> <group> <the IDs read>` followed by the next XREADGROUP in
//!    one write, so in steady state up to `--pipeline` read/ack pairs are in flight per
//!    connection. After `--seconds` no new read is sent; the run ends when every read in
//!    flight has been answered and acknowledged. It also ends early, reported as
//!    `"ended_by":"drained"`, when a read comes back empty (a stream ran out: raise
//!    `--entries`).
//! 4. **check**: every XACK must acknowledge every ID it names; every stream's `XPENDING`
//!    summary count must be 0; its group's `entries-read` and `last-delivered-id` (from
//!    `XINFO GROUPS`) must match the entries this run delivered from it (the IDs are
//!    consecutive from `1-1`); each consumer's IDs must increase; and the entries
//!    delivered must equal the entries acknowledged. A failed check exits non-zero.
//!
//! One thread, one `mio::Poll`: pin it to its own core. Prints one line of JSON:
//! entries delivered (= acknowledged) per second, commands per second, and with
//! `--server-pid` the server's CPU time per entry (utime + stime from /proc, in clock
//! ticks of 10 ms, from the first read sent to the last acknowledgement received).
//!
//! `goblin-stream-bench --port 6379 --streams 50 --connections 50 --pipeline 16 --count 10
//! --entries 100000 --seconds 3 [--server-pid PID]`
#![allow(clippy::print_stdout)]

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::ops::Range;
use std::time::{Duration, Instant};

use clap::Parser;
use goblin_protocol::{Frame, parse_reply, reply_len};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

/// Command-line options.
#[derive(Parser, Debug)]
#[command(about = "Consumer-group throughput: XREADGROUP then XACK of the IDs read")]
struct Opts {
    /// The server's address.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// The server's port.
    #[arg(long, default_value_t = 6379)]
    port: u16,
    /// Number of streams (keys `<prefix>0 …`).
    #[arg(long, default_value_t = 50)]
    streams: usize,
    /// Entries per stream in the fill: enough for the run (`--seconds` × the rate ÷
    /// `--streams`), or the run ends early as `drained`.
    #[arg(long, default_value_t = 100_000)]
    entries: u64,
    /// Reading connections; connection `i` reads stream `i % streams` as consumer `c<i>`.
    #[arg(long, default_value_t = 50)]
    connections: usize,
    /// XREADGROUP's COUNT: entries per read.
    #[arg(long, default_value_t = 10)]
    count: usize,
    /// XREADGROUPs in flight per connection (each answered read is followed by its XACK
    /// and the next read in one write).
    #[arg(long, default_value_t = 1)]
    pipeline: usize,
    /// Duration of the run, in seconds (no new read is sent after it).
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// The consumer group's name (destroyed and created again on every stream).
    #[arg(long, default_value = "g")]
    group: String,
    /// The streams' key prefix.
    #[arg(long, default_value = "stream-bench:")]
    prefix: String,
    /// XADDs per pipelined batch in the fill.
    #[arg(long, default_value_t = 1000)]
    fill_batch: u64,
    /// The server's process id: report its CPU time per entry, from /proc.
    #[arg(long)]
    server_pid: Option<u32>,
}

/// Appends `args` to `out` as a RESP array of bulk strings.
fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        bulk(out, a);
    }
}

/// Appends one bulk string.
fn bulk(out: &mut Vec<u8>, a: &[u8]) {
    out.extend_from_slice(b"$");
    out.extend_from_slice(itoa::Buffer::new().format(a.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(a);
    out.extend_from_slice(b"\r\n");
}

/// An error of the benchmark (a protocol surprise or a failed check).
fn fail(msg: impl Into<String>) -> io::Error {
    io::Error::other(msg.into())
}

/// A blocking connection for the fill, the setup and the checks.
struct Control {
    stream: std::net::TcpStream,
    buf: Vec<u8>,
    start: usize,
}

impl Control {
    fn connect(addr: SocketAddr) -> io::Result<Control> {
        let stream = std::net::TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(Control {
            stream,
            buf: Vec::with_capacity(1 << 16),
            start: 0,
        })
    }

    fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// The next reply's raw bytes (an error reply is returned as such, not as `Err`).
    fn reply(&mut self) -> io::Result<Vec<u8>> {
        loop {
            let pending = &self.buf[self.start..];
            match reply_len(pending) {
                Ok(Some((n, _))) => {
                    let out = pending[..n].to_vec();
                    self.start += n;
                    if self.start == self.buf.len() {
                        self.buf.clear();
                        self.start = 0;
                    }
                    return Ok(out);
                }
                Ok(None) => {}
                Err(e) => return Err(fail(e.to_string())),
            }
            if self.start > 0 {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            let mut chunk = [0u8; 1 << 16];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(fail("the server closed the control connection"));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Sends one command and returns its reply's raw bytes.
    fn call(&mut self, args: &[&[u8]]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        command(&mut out, args);
        self.send(&out)?;
        self.reply()
    }
}

/// The reply as text, for error messages.
fn show(reply: &[u8]) -> String {
    String::from_utf8_lossy(&reply[..reply.len().min(200)]).into_owned()
}

/// The integer of a `:n` reply.
fn integer(reply: &[u8]) -> io::Result<i64> {
    match parse_reply(reply) {
        Ok(Some((Frame::Integer(n), _))) => Ok(n),
        _ => Err(fail(format!("expected an integer, got {}", show(reply)))),
    }
}

/// Fills stream `key` with entries `1-1 … n-1` (three fields each), pipelined.
fn fill(ctl: &mut Control, key: &[u8], n: u64, batch: u64) -> io::Result<()> {
    let mut out = Vec::new();
    let mut next = 1;
    while next <= n {
        out.clear();
        let upto = (next + batch.max(1)).min(n + 1);
        for i in next..upto {
            let id = format!("{i}-1");
            command(
                &mut out,
                &[
                    b"XADD",
                    key,
                    id.as_bytes(),
                    b"f1",
                    b"v1",
                    b"f2",
                    b"v2",
                    b"f3",
                    b"v3",
                ],
            );
        }
        ctl.send(&out)?;
        for _ in next..upto {
            let reply = ctl.reply()?;
            if reply.first() != Some(&b'$') {
                return Err(fail(format!("fill: XADD answered {}", show(&reply))));
            }
        }
        next = upto;
    }
    Ok(())
}

/// What a pipelined request on a reading connection was.
#[derive(Debug, Clone, Copy)]
enum Sent {
    /// An XREADGROUP.
    Read,
    /// An XACK of this many IDs.
    Ack(usize),
}

/// A reading connection: consumer `c<i>` of one stream.
struct Conn {
    stream: TcpStream,
    rbuf: Vec<u8>,
    start: usize,
    end: usize,
    wbuf: Vec<u8>,
    /// What is in flight, oldest first (the server answers in order).
    sent: VecDeque<Sent>,
    /// The pre-encoded XREADGROUP.
    read: Vec<u8>,
    /// The stream's index.
    key: usize,
    /// The last ID delivered to this consumer (its milliseconds part; IDs are `<i>-1`).
    last: u64,
    /// Entries delivered to this consumer.
    delivered: u64,
}

impl Conn {
    fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
        let std = std::net::TcpStream::connect(addr)?;
        std.set_nodelay(true)?;
        std.set_nonblocking(true)?;
        Ok(TcpStream::from_std(std))
    }

    /// Reads what is there; false at end of stream.
    fn fill(&mut self) -> io::Result<bool> {
        loop {
            if self.start > 0 && self.start == self.end {
                self.start = 0;
                self.end = 0;
            }
            if self.rbuf.len() - self.end < 16 * 1024 {
                self.rbuf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
                if self.rbuf.len() - self.end < 16 * 1024 {
                    let n = self.rbuf.len() * 2;
                    self.rbuf.resize(n, 0);
                }
            }
            match self.stream.read(&mut self.rbuf[self.end..]) {
                Ok(0) => return Ok(false),
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Where the next whole reply is in `rbuf`, if one is buffered.
    fn next_reply(&mut self) -> io::Result<Option<Range<usize>>> {
        match reply_len(&self.rbuf[self.start..self.end]) {
            Ok(Some((n, _))) => {
                let at = self.start;
                self.start += n;
                Ok(Some(at..at + n))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(fail(e.to_string())),
        }
    }

    /// Writes `wbuf` out (the socket's buffer is far larger than what is in flight, so
    /// waiting is rare: spin with a yield).
    fn flush(&mut self) -> io::Result<()> {
        let mut at = 0;
        while at < self.wbuf.len() {
            match self.stream.write(&self.wbuf[at..]) {
                Ok(0) => return Err(fail("the server closed a connection")),
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.wbuf.clear();
        Ok(())
    }

    fn send_read(&mut self) {
        self.wbuf.extend_from_slice(&self.read);
        self.sent.push_back(Sent::Read);
    }
}

/// A cursor over one complete RESP2 reply (its completeness checked by `reply_len`).
struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    /// The next line, without its CRLF.
    fn line(&mut self) -> io::Result<&'a [u8]> {
        let rest = self.buf.get(self.at..).unwrap_or_default();
        let cr = memchr::memchr(b'\r', rest).ok_or_else(|| fail("truncated reply"))?;
        self.at += cr + 2;
        Ok(&rest[..cr])
    }

    /// The length of a `*n` (or `$n` with `kind` `$`) header; -1 for a null.
    fn header(&mut self, kind: u8) -> io::Result<i64> {
        let line = self.line()?;
        match line.split_first() {
            Some((&k, n)) if k == kind => goblin_protocol::parse_i64(n)
                .ok_or_else(|| fail(format!("bad length in {}", show(line)))),
            _ => Err(fail(format!(
                "expected '{}', got {}",
                kind as char,
                show(line)
            ))),
        }
    }

    /// A bulk string's range in the buffer.
    fn bulk(&mut self) -> io::Result<Range<usize>> {
        let n = self.header(b'$')?;
        let n = usize::try_from(n).map_err(|_| fail("unexpected null bulk"))?;
        let at = self.at;
        if at + n + 2 > self.buf.len() {
            return Err(fail("truncated bulk"));
        }
        self.at += n + 2;
        Ok(at..at + n)
    }
}

/// The IDs (ranges into `reply`) of an XREADGROUP reply for one stream: empty for a null
/// reply (nothing new). Checks the reply's shape: `[[key, [[id, [f1, v1, …]], …]]]`.
fn read_ids(reply: &[u8], ids: &mut Vec<Range<usize>>) -> io::Result<()> {
    ids.clear();
    if reply.first() == Some(&b'-') {
        return Err(fail(format!("XREADGROUP answered {}", show(reply))));
    }
    let mut c = Cursor { buf: reply, at: 0 };
    match c.header(b'*')? {
        -1 | 0 => return Ok(()),
        1 => {}
        n => return Err(fail(format!("XREADGROUP: {n} streams in the reply"))),
    }
    if c.header(b'*')? != 2 {
        return Err(fail("XREADGROUP: a stream's part is not [key, entries]"));
    }
    c.bulk()?;
    let n = c.header(b'*')?;
    for _ in 0..n.max(0) {
        if c.header(b'*')? != 2 {
            return Err(fail("XREADGROUP: an entry is not [id, fields]"));
        }
        ids.push(c.bulk()?);
        let fields = c.header(b'*')?;
        if fields != 6 {
            return Err(fail(format!(
                "XREADGROUP: an entry has {fields} field items"
            )));
        }
        for _ in 0..fields {
            c.bulk()?;
        }
    }
    if c.at != reply.len() {
        return Err(fail("XREADGROUP: bytes after the reply's end"));
    }
    Ok(())
}

/// The milliseconds part of an ID `<ms>-<seq>`.
fn id_ms(id: &[u8]) -> io::Result<u64> {
    let ms = id.split(|&b| b == b'-').next().unwrap_or_default();
    std::str::from_utf8(ms)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| fail(format!("bad stream ID {}", show(id))))
}

/// The server's CPU time (utime + stime) in clock ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 (1-based); `after` starts at field 3.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// A field of a flat RESP2 map (`[name, value, …]`) as XINFO GROUPS answers.
fn field<'a>(items: &'a [Frame<'a>], name: &[u8]) -> Option<&'a Frame<'a>> {
    items
        .chunks(2)
        .find(|kv| matches!(kv.first(), Some(Frame::Bulk(k)) if *k == name))
        .and_then(|kv| kv.get(1))
}

/// Checks stream `key` after the run: nothing pending, and the group's position at the
/// `delivered`-th entry.
fn check_stream(ctl: &mut Control, key: &[u8], group: &[u8], delivered: u64) -> io::Result<()> {
    let name = String::from_utf8_lossy(key).into_owned();
    let reply = ctl.call(&[b"XPENDING", key, group])?;
    match parse_reply(&reply) {
        Ok(Some((Frame::Array(items), _))) => match items.first() {
            Some(Frame::Integer(0)) => {}
            _ => {
                return Err(fail(format!(
                    "check: XPENDING {name} answered {}",
                    show(&reply)
                )));
            }
        },
        _ => {
            return Err(fail(format!(
                "check: XPENDING {name} answered {}",
                show(&reply)
            )));
        }
    }
    let reply = ctl.call(&[b"XINFO", b"GROUPS", key])?;
    let Ok(Some((Frame::Array(groups), _))) = parse_reply(&reply) else {
        return Err(fail(format!(
            "check: XINFO GROUPS {name} answered {}",
            show(&reply)
        )));
    };
    let info = groups
        .iter()
        .find_map(|g| match g {
            Frame::Array(items)
                if matches!(field(items, b"name"), Some(Frame::Bulk(n)) if *n == group) =>
            {
                Some(items)
            }
            _ => None,
        })
        .ok_or_else(|| fail(format!("check: no group in XINFO GROUPS {name}")))?;
    let want_last = if delivered == 0 {
        "0-0".to_string()
    } else {
        format!("{delivered}-1")
    };
    let last = match field(info, b"last-delivered-id") {
        Some(Frame::Bulk(b)) => String::from_utf8_lossy(b).into_owned(),
        _ => String::from("?"),
    };
    let pending = field(info, b"pending");
    let entries_read = field(info, b"entries-read");
    let read_ok = match entries_read {
        Some(Frame::Integer(n)) => u64::try_from(*n).ok() == Some(delivered),
        // Before the first read Redis answers nil.
        Some(Frame::Null) => delivered == 0,
        _ => false,
    };
    if last != want_last || !matches!(pending, Some(Frame::Integer(0))) || !read_ok {
        return Err(fail(format!(
            "check: {name}: {delivered} entries delivered, but XINFO GROUPS says \
             last-delivered-id {last}, pending {pending:?}, entries-read {entries_read:?}"
        )));
    }
    Ok(())
}

/// The figures of one run.
struct Figures {
    delivered: u64,
    acked: u64,
    reads: u64,
    acks: u64,
    elapsed: f64,
    drained: bool,
    cpu_ticks: Option<u64>,
}

/// The run proper: `conns` read and acknowledge until `run` has passed and all is answered.
fn run_loop(
    poll: &mut Poll,
    conns: &mut [Conn],
    keys: &[Vec<u8>],
    opts: &Opts,
) -> io::Result<Figures> {
    let mut events = Events::with_capacity(1024);
    let group = opts.group.as_bytes();
    let mut ids: Vec<Range<usize>> = Vec::with_capacity(opts.count);
    let mut f = Figures {
        delivered: 0,
        acked: 0,
        reads: 0,
        acks: 0,
        elapsed: 0.0,
        drained: false,
        cpu_ticks: None,
    };
    let cpu_before = opts.server_pid.and_then(cpu_ticks);
    let started = Instant::now();
    let run = Duration::from_secs_f64(opts.seconds);
    for c in conns.iter_mut() {
        for _ in 0..opts.pipeline.max(1) {
            c.send_read();
        }
        c.flush()?;
    }
    let mut reading = true;
    let mut in_flight: usize = conns.iter().map(|c| c.sent.len()).sum();
    let mut quiet_since = Instant::now();
    while in_flight > 0 {
        if reading && started.elapsed() >= run {
            reading = false;
        }
        poll.poll(&mut events, Some(Duration::from_millis(100)))?;
        if events.is_empty() {
            if quiet_since.elapsed() > Duration::from_secs(30) {
                return Err(fail(format!(
                    "no reply for 30 s with {in_flight} requests in flight"
                )));
            }
            continue;
        }
        quiet_since = Instant::now();
        for ev in &events {
            let c = &mut conns[ev.token().0];
            if !c.fill()? {
                return Err(fail("the server closed a reading connection"));
            }
            while let Some(range) = c.next_reply()? {
                in_flight -= 1;
                let reply = &c.rbuf[range];
                match c.sent.pop_front() {
                    Some(Sent::Read) => {
                        f.reads += 1;
                        read_ids(reply, &mut ids)?;
                        if ids.is_empty() {
                            // The stream ran out: stop reading everywhere.
                            f.drained = true;
                            reading = false;
                            continue;
                        }
                        for id in &ids {
                            let ms = id_ms(&reply[id.clone()])?;
                            if ms <= c.last {
                                return Err(fail(format!(
                                    "consumer of {} got ID {ms}-1 after {}-1",
                                    String::from_utf8_lossy(&keys[c.key]),
                                    c.last
                                )));
                            }
                            c.last = ms;
                        }
                        let n = ids.len();
                        f.delivered += n as u64;
                        c.delivered += n as u64;
                        let key = &keys[c.key];
                        c.wbuf.extend_from_slice(b"*");
                        c.wbuf
                            .extend_from_slice(itoa::Buffer::new().format(3 + n).as_bytes());
                        c.wbuf.extend_from_slice(b"\r\n$4\r\nXACK\r\n");
                        bulk(&mut c.wbuf, key);
                        bulk(&mut c.wbuf, group);
                        for id in &ids {
                            bulk(&mut c.wbuf, &reply[id.clone()]);
                        }
                        c.sent.push_back(Sent::Ack(n));
                        in_flight += 1;
                        if reading {
                            c.send_read();
                            in_flight += 1;
                        }
                    }
                    Some(Sent::Ack(n)) => {
                        f.acks += 1;
                        let got = integer(reply)?;
                        if got != n as i64 {
                            return Err(fail(format!(
                                "XACK of {n} IDs on {} acknowledged {got}",
                                String::from_utf8_lossy(&keys[c.key])
                            )));
                        }
                        f.acked += n as u64;
                    }
                    None => return Err(fail("a reply nothing asked for")),
                }
            }
            c.flush()?;
        }
    }
    f.elapsed = started.elapsed().as_secs_f64();
    f.cpu_ticks = match (cpu_before, opts.server_pid.and_then(cpu_ticks)) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    Ok(f)
}

fn main() -> io::Result<()> {
    let opts = Opts::parse();
    if opts.streams == 0 || opts.connections == 0 || opts.count == 0 || opts.entries == 0 {
        return Err(fail(
            "--streams, --connections, --count and --entries must be positive",
        ));
    }
    let addr: SocketAddr = format!("{}:{}", opts.host, opts.port)
        .parse()
        .map_err(io::Error::other)?;
    let keys: Vec<Vec<u8>> = (0..opts.streams)
        .map(|i| format!("{}{i}", opts.prefix).into_bytes())
        .collect();
    let group = opts.group.as_bytes();
    let mut ctl = Control::connect(addr)?;

    // Fill, unless a previous run did.
    let fill_started = Instant::now();
    let mut filled = 0u64;
    for key in &keys {
        let len = integer(&ctl.call(&[b"XLEN", key])?)?;
        if u64::try_from(len).ok() != Some(opts.entries) {
            ctl.call(&[b"DEL", key])?;
            fill(&mut ctl, key, opts.entries, opts.fill_batch)?;
            filled += opts.entries;
        }
    }
    let fill_seconds = fill_started.elapsed().as_secs_f64();
    for key in &keys {
        let reply = ctl.call(&[b"XGROUP", b"DESTROY", key, group])?;
        integer(&reply)?;
        let reply = ctl.call(&[b"XGROUP", b"CREATE", key, group, b"0"])?;
        if reply != b"+OK\r\n" {
            return Err(fail(format!("XGROUP CREATE answered {}", show(&reply))));
        }
    }

    let mut poll = Poll::new()?;
    let count = opts.count.to_string();
    let mut conns = Vec::with_capacity(opts.connections);
    for i in 0..opts.connections {
        let mut stream = Conn::connect(addr)?;
        poll.registry()
            .register(&mut stream, Token(i), Interest::READABLE)?;
        let key = i % opts.streams;
        let consumer = format!("c{i}");
        let mut read = Vec::new();
        command(
            &mut read,
            &[
                b"XREADGROUP",
                b"GROUP",
                group,
                consumer.as_bytes(),
                b"COUNT",
                count.as_bytes(),
                b"STREAMS",
                &keys[key],
                b">",
            ],
        );
        conns.push(Conn {
            stream,
            rbuf: vec![0; 64 * 1024],
            start: 0,
            end: 0,
            wbuf: Vec::new(),
            sent: VecDeque::new(),
            read,
            key,
            last: 0,
            delivered: 0,
        });
    }

    let f = run_loop(&mut poll, &mut conns, &keys, &opts)?;

    // Checks.
    if f.delivered != f.acked {
        return Err(fail(format!(
            "check: {} entries delivered, {} acknowledged",
            f.delivered, f.acked
        )));
    }
    let mut per_stream = vec![0u64; keys.len()];
    for c in &conns {
        per_stream[c.key] += c.delivered;
    }
    for (key, &delivered) in keys.iter().zip(&per_stream) {
        check_stream(&mut ctl, key, group, delivered)?;
    }

    let cpu_us_per_entry = match f.cpu_ticks {
        // Clock ticks are 10 ms.
        Some(t) if f.delivered > 0 => format!("{:.3}", t as f64 * 10_000.0 / f.delivered as f64),
        _ => "null".into(),
    };
    let cpu_s = f
        .cpu_ticks
        .map_or("null".into(), |t| format!("{:.2}", t as f64 / 100.0));
    println!(
        "{{\"streams\":{},\"connections\":{},\"count\":{},\"pipeline\":{},\"entries_per_stream\":{},\
         \"filled\":{filled},\"fill_seconds\":{fill_seconds:.3},\"seconds\":{:.3},\
         \"ended_by\":\"{}\",\"delivered\":{},\"acknowledged\":{},\"reads\":{},\"acks\":{},\
         \"entries_per_sec\":{:.0},\"commands_per_sec\":{:.0},\"server_cpu_s\":{cpu_s},\
         \"server_cpu_us_per_entry\":{cpu_us_per_entry},\"checked\":true}}",
        opts.streams,
        opts.connections,
        opts.count,
        opts.pipeline,
        opts.entries,
        f.elapsed,
        if f.drained { "drained" } else { "time" },
        f.delivered,
        f.acked,
        f.reads,
        f.acks,
        f.delivered as f64 / f.elapsed,
        (f.reads + f.acks) as f64 / f.elapsed,
    );
    Ok(())
}
