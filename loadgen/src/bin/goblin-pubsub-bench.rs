//! Pub/Sub throughput and latency against any Redis-protocol server.
//!
//! Opens `--subscribers` connections subscribed to one channel, then:
//!
//! 1. **throughput**: `--publishers` connections publish to the channel, each with up to
//!    `--pipeline` PUBLISHes in flight, for `--seconds`, while every subscriber's
//!    messages are read; a publisher waits whenever the subscribers, on average, are
//!    more than `--window` messages behind it (so the servers' output buffers stay
//!    small and what is measured is delivery, not buffering);
//! 2. **latency**: one PUBLISH at a time, the next once every subscriber got the last;
//!    the time from sending it to each subscriber's receipt.
//!
//! One thread, one `mio::Poll`: pin it to its own core. Prints one line of JSON.
//!
//! `goblin-pubsub-bench --port 6379 --subscribers 100 --seconds 5 [--server-pid PID]`
//! (with `--server-pid`, also the server's CPU time per published message, from /proc).
#![allow(clippy::print_stdout)]

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use clap::Parser;
use goblin_protocol::reply_len;
use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

#[derive(Parser, Debug)]
#[command(about = "Pub/Sub throughput and publish-to-receive latency")]
struct Opts {
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 6379)]
    port: u16,
    #[arg(long, default_value_t = 1)]
    subscribers: usize,
    #[arg(long, default_value_t = 1)]
    publishers: usize,
    #[arg(long, default_value_t = 16)]
    pipeline: usize,
    /// Messages the subscribers may be behind, on average, before publishers wait.
    #[arg(long, default_value_t = 256)]
    window: u64,
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Latency phase: this many PUBLISHes, one at a time.
    #[arg(long, default_value_t = 1000)]
    latency_publishes: usize,
    /// The payload's size in bytes (at least 20: it carries the send time).
    #[arg(long, default_value_t = 32)]
    payload: usize,
    #[arg(long)]
    server_pid: Option<u32>,
}

const CHANNEL: &[u8] = b"goblin-bench";

struct Conn {
    stream: TcpStream,
    rbuf: Vec<u8>,
    start: usize,
    end: usize,
    wbuf: Vec<u8>,
}

impl Conn {
    fn connect(addr: SocketAddr) -> io::Result<Conn> {
        let std = std::net::TcpStream::connect(addr)?;
        std.set_nodelay(true)?;
        std.set_nonblocking(true)?;
        Ok(Conn {
            stream: TcpStream::from_std(std),
            rbuf: vec![0; 64 * 1024],
            start: 0,
            end: 0,
            wbuf: Vec::new(),
        })
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

    /// The next whole reply, if one is buffered.
    fn next_reply(&mut self) -> io::Result<Option<&[u8]>> {
        let pending = &self.rbuf[self.start..self.end];
        match reply_len(pending) {
            Ok(Some((n, _))) => {
                let at = self.start;
                self.start += n;
                Ok(Some(&self.rbuf[at..at + n]))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(io::Error::other(e.to_string())),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        while !self.wbuf.is_empty() {
            match self.stream.write(&self.wbuf) {
                Ok(n) => {
                    self.wbuf.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::yield_now();
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// The send time carried by a message's payload (nanoseconds since `origin`, 20
/// digits), from a `message` push.
fn sent_at(reply: &[u8]) -> Option<u64> {
    // The payload is the last bulk: its 20 first digits.
    let end = reply.len().checked_sub(2)?;
    let start = reply[..end].iter().rposition(|&b| b == b'\n')? + 1;
    let digits = reply.get(start..start + 20)?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 (1-based); `after` starts at field 3.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

fn main() -> io::Result<()> {
    let opts = Opts::parse();
    let addr: SocketAddr = format!("{}:{}", opts.host, opts.port)
        .parse()
        .map_err(io::Error::other)?;
    let origin = Instant::now();
    let now_ns = || origin.elapsed().as_nanos() as u64;
    let mut poll = Poll::new()?;
    let mut events = Events::with_capacity(4096);

    // Subscribers: tokens 0..n. Publishers after them.
    let mut subs = Vec::with_capacity(opts.subscribers);
    for i in 0..opts.subscribers {
        let mut c = Conn::connect(addr)?;
        command(&mut c.wbuf, &[b"SUBSCRIBE", CHANNEL]);
        c.flush()?;
        poll.registry()
            .register(&mut c.stream, Token(i), Interest::READABLE)?;
        subs.push(c);
    }
    // Every confirmation, before publishing.
    let mut confirmed = 0;
    while confirmed < subs.len() {
        poll.poll(&mut events, Some(Duration::from_secs(5)))?;
        if events.is_empty() {
            return Err(io::Error::other("subscriptions not confirmed"));
        }
        for ev in &events {
            let c = &mut subs[ev.token().0];
            c.fill()?;
            while c.next_reply()?.is_some() {
                confirmed += 1;
            }
        }
    }
    let mut pubs = Vec::with_capacity(opts.publishers);
    for i in 0..opts.publishers {
        let mut c = Conn::connect(addr)?;
        poll.registry().register(
            &mut c.stream,
            Token(opts.subscribers + i),
            Interest::READABLE,
        )?;
        pubs.push(c);
    }
    let payload_tail = vec![b'x'; opts.payload.saturating_sub(20)];
    let publish = |c: &mut Conn, at: u64| {
        let mut payload = format!("{at:020}").into_bytes();
        payload.extend_from_slice(&payload_tail);
        command(&mut c.wbuf, &[b"PUBLISH", CHANNEL, &payload]);
    };

    // Throughput.
    let n = opts.subscribers as u64;
    let mut in_flight = vec![0usize; pubs.len()];
    let mut published: u64 = 0;
    let mut acknowledged: u64 = 0;
    let mut receivers: u64 = 0;
    let mut received: u64 = 0;
    let cpu_before = opts.server_pid.and_then(cpu_ticks);
    let started = Instant::now();
    let run = Duration::from_secs_f64(opts.seconds);
    let mut publishing = true;
    loop {
        if publishing && started.elapsed() >= run {
            publishing = false;
        }
        if publishing {
            for (i, c) in pubs.iter_mut().enumerate() {
                while in_flight[i] < opts.pipeline && published * n < received + opts.window * n {
                    publish(c, now_ns());
                    in_flight[i] += 1;
                    published += 1;
                }
                c.flush()?;
            }
        } else if acknowledged == published && received >= receivers {
            break;
        }
        poll.poll(&mut events, Some(Duration::from_millis(100)))?;
        if events.is_empty() && !publishing {
            if started.elapsed() > run + Duration::from_secs(30) {
                return Err(io::Error::other(format!(
                    "messages lost: {received} of {receivers} received"
                )));
            }
            continue;
        }
        for ev in &events {
            let t = ev.token().0;
            if t < subs.len() {
                let c = &mut subs[t];
                if !c.fill()? {
                    return Err(io::Error::other("a subscriber was disconnected"));
                }
                while c.next_reply()?.is_some() {
                    received += 1;
                }
            } else {
                let i = t - subs.len();
                let c = &mut pubs[i];
                c.fill()?;
                while let Some(reply) = c.next_reply()? {
                    in_flight[i] -= 1;
                    acknowledged += 1;
                    let text =
                        std::str::from_utf8(reply.get(1..reply.len() - 2).unwrap_or_default())
                            .unwrap_or_default();
                    receivers += text.parse::<u64>().unwrap_or(0);
                }
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu_after = opts.server_pid.and_then(cpu_ticks);

    // Latency: one at a time.
    let mut hist =
        Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).map_err(io::Error::other)?;
    if !pubs.is_empty() {
        for _ in 0..opts.latency_publishes {
            publish(&mut pubs[0], now_ns());
            pubs[0].flush()?;
            let mut got = 0;
            let mut acked = false;
            while got < n || !acked {
                poll.poll(&mut events, Some(Duration::from_secs(5)))?;
                if events.is_empty() {
                    return Err(io::Error::other("latency phase: a message was lost"));
                }
                for ev in &events {
                    let t = ev.token().0;
                    if t < subs.len() {
                        let c = &mut subs[t];
                        c.fill()?;
                        while let Some(reply) = c.next_reply()? {
                            let at = now_ns();
                            if let Some(sent) = sent_at(reply) {
                                let _ = hist.record(at.saturating_sub(sent).max(1));
                            }
                            got += 1;
                        }
                    } else {
                        let c = &mut pubs[t - subs.len()];
                        c.fill()?;
                        while c.next_reply()?.is_some() {
                            acked = true;
                        }
                    }
                }
            }
        }
    }
    let cpu_ms_per_1k = match (cpu_before, cpu_after) {
        // Clock ticks are 10 ms.
        (Some(a), Some(b)) if published > 0 => {
            format!("{:.3}", (b - a) as f64 * 10.0 / (published as f64 / 1000.0))
        }
        _ => "null".into(),
    };
    println!(
        "{{\"subscribers\":{},\"publishers\":{},\"seconds\":{elapsed:.3},\"published\":{published},\
         \"publishes_per_sec\":{:.0},\"deliveries_per_sec\":{:.0},\"receivers_counted\":{receivers},\
         \"received\":{received},\"server_cpu_ms_per_1k_publishes\":{cpu_ms_per_1k},\
         \"latency_us\":{{\"p50\":{:.1},\"p99\":{:.1},\"p999\":{:.1},\"max\":{:.1}}}}}",
        opts.subscribers,
        opts.publishers,
        published as f64 / elapsed,
        received as f64 / elapsed,
        hist.value_at_quantile(0.5) as f64 / 1000.0,
        hist.value_at_quantile(0.99) as f64 / 1000.0,
        hist.value_at_quantile(0.999) as f64 / 1000.0,
        hist.max() as f64 / 1000.0,
    );
    Ok(())
}
