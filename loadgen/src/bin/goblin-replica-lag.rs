//! How soon a replica shows its master's writes: one client SETs a key on the master
//! and, as soon as the master answers, GETs it from the replica — `--writes` times.
//! Counts the reads that found the old value (stale), and times how long after the
//! master's answer the new one was there (GET again until it is). Prints one line of
//! JSON. Run by scripts/replica-lag against redis-server and goblin-server pairs.
//!
//! `goblin-replica-lag --master 6379 --replica 6380 [--writes 5000]`
#![allow(clippy::print_stdout)]

use std::net::TcpStream;
use std::time::Instant;

use clap::Parser;
use goblin_loadgen::scripts::call;

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

/// A connection without Nagle's delay: each command goes out at once.
fn connect(host: &str, port: u16) -> Result<TcpStream, String> {
    let stream = TcpStream::connect((host, port)).map_err(|e| format!("{host}:{port}: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    Ok(stream)
}

fn main() -> Result<(), String> {
    let opts = Opts::parse();
    let mut master = connect(&opts.host, opts.master)?;
    let mut replica = connect(&opts.host, opts.replica)?;
    let key = b"goblin-replica-lag";
    let (mut stale, mut visible) = (0usize, Vec::with_capacity(opts.writes));
    for i in 0..opts.writes {
        let value = i.to_string();
        call(&mut master, &[b"SET", key, value.as_bytes()])?;
        let written = Instant::now();
        let expected = format!("${}\r\n{}\r\n", value.len(), value).into_bytes();
        let mut first = true;
        while call(&mut replica, &[b"GET", key])? != expected {
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
        call(&mut replica, &[b"GET", key])?;
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
