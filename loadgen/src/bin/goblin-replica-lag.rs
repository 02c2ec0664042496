//! How soon a replica shows its master's writes: one client SETs a key on the master
//! and, as soon as the master answers, GETs it from the replica — `--writes` times.
//! Counts the reads that found the old value (stale), and times how long after the
//! master's answer the new one was there (GET again until it is). Prints one line of
//! JSON. Run by scripts/replica-lag against redis-server and goblin-server pairs.
//!
//! `goblin-replica-lag --master 6379 --replica 6380 [--writes 5000]`
#![allow(clippy::print_stdout)]

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use clap::Parser;
use goblin_protocol::reply_len;

#[derive(Parser, Debug)]
#[command(about = "Staleness of a replica's reads right after its master's writes")]
struct Opts {
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long)]
    master: u16,
    #[arg(long)]
    replica: u16,
    #[arg(long, default_value_t = 5000)]
    writes: usize,
}

struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    fn connect(host: &str, port: u16) -> io::Result<Conn> {
        let stream = TcpStream::connect((host, port))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            buf: Vec::new(),
        })
    }

    /// Sends one command and returns its reply's bytes.
    fn call(&mut self, args: &[&[u8]]) -> io::Result<Vec<u8>> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.stream.write_all(&out)?;
        let mut chunk = [0u8; 4096];
        loop {
            let parsed = reply_len(&self.buf)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{e:?}")))?;
            if let Some((len, _)) = parsed {
                let reply = self.buf[..len].to_vec();
                self.buf.drain(..len);
                return Ok(reply);
            }
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

fn main() -> io::Result<()> {
    let opts = Opts::parse();
    let mut master = Conn::connect(&opts.host, opts.master)?;
    let mut replica = Conn::connect(&opts.host, opts.replica)?;
    let key = b"goblin-replica-lag";
    let (mut stale, mut visible) = (0usize, Vec::with_capacity(opts.writes));
    for i in 0..opts.writes {
        let value = i.to_string();
        master.call(&[b"SET", key, value.as_bytes()])?;
        let written = Instant::now();
        let expected = format!("${}\r\n{}\r\n", value.len(), value).into_bytes();
        let mut first = true;
        while replica.call(&[b"GET", key])? != expected {
            if first {
                stale += 1;
                first = false;
            }
        }
        visible.push(written.elapsed().as_micros() as u64);
    }
    visible.sort_unstable();
    let at = |q: f64| {
        let last = visible.len().saturating_sub(1);
        visible
            .get((last as f64 * q) as usize)
            .copied()
            .unwrap_or(0)
    };
    let started = Instant::now();
    for _ in 0..opts.writes {
        replica.call(&[b"GET", key])?;
    }
    let rtt = started.elapsed().as_micros() as u64 / opts.writes.max(1) as u64;
    println!(
        "{{\"writes\":{},\"stale\":{},\"stale_pct\":{:.2},\"visible_us\":{{\"p50\":{},\"p99\":{},\"max\":{}}},\"get_rtt_us\":{}}}",
        opts.writes,
        stale,
        100.0 * stale as f64 / opts.writes.max(1) as f64,
        at(0.5),
        at(0.99),
        at(1.0),
        rtt
    );
    Ok(())
}
