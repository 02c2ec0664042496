//! # goblin-loadgen
//!
//! Goblin's bundled load generator: the benchmark client users run against Goblin and
//! against redis-server to compare them. It is built not to be the bottleneck — each
//! `--threads` thread runs one `mio` event loop over its connections (no async runtime),
//! keeps `--pipeline` requests in flight per connection, encodes requests with
//! [`goblin_protocol::Encoder`] into reused buffers and measures replies with
//! [`goblin_protocol::reply_len`] without building them — and to measure honestly:
//! one HdrHistogram per thread (nanoseconds, three significant digits) merged at the end,
//! and in open loop (`--rate`) latency counted from each request's *intended* send time,
//! so server stalls are not hidden by coordinated omission.
//!
//! Workloads: `get`, `set`, `mixed:R`, `command` (a redis-benchmark style template with
//! `__rand_int__`), and two that exercise Goblin's native commands —
//! `claim` (idempotent request handling through the claim's whole life: GOBLIN.CLAIM,
//! duplicates that poll or wait with `BLOCK`, fenced GOBLIN.PUBLISH, GOBLIN.RENEW by long
//! workers, crashed and stale workers; checked by a violation detector, see [`detector`])
//! and `lock` (SET NX PX + GOBLIN.CAD). With `--target redis`, claim and lock run the
//! commands' oracle Lua scripts through EVALSHA, so the same workload runs on both
//! servers (polling: redis-server has no blocking claim).
//!
//! Modules, in the order a request meets them: [`cli`] (options), [`workload`] (what to
//! send, what replies mean), `engine` (event loops), [`cluster`] (key slots, the slot map
//! and redirects, with `--cluster`), [`stats`] and [`report`] (figures).
//!
//! ```no_run
//! // The binary is a thin wrapper around this:
//! std::process::exit(goblin_loadgen::run_cli());
//! ```
#![deny(missing_docs)]

pub mod cli;
pub mod cluster;
pub mod detector;
mod engine;
pub mod json;
pub mod keys;
pub mod report;
pub mod rng;
pub mod scripts;
pub mod stats;
pub mod template;
pub mod workload;

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Barrier, mpsc};
use std::time::{Duration, Instant};

use clap::Parser;

use crate::cli::{Cli, Config, Stop, WorkloadSpec};
use crate::engine::{Message, Plan, Shared, ThreadSpec};
use crate::json::Json;
use crate::report::{Summary, WorkloadSection};
use crate::stats::{Counters, merge_histograms, new_histogram};
use crate::workload::{Generator, Shas};

/// Exit status: the run completed.
pub const EXIT_OK: i32 = 0;
/// Exit status: a connection failed (or the server could not be reached).
pub const EXIT_FAILED: i32 = 1;
/// Exit status: bad command-line usage.
pub const EXIT_USAGE: i32 = 2;
/// Exit status: the claim workload detected a violation.
pub const EXIT_VIOLATION: i32 = 3;

/// Parses the process's arguments, runs, prints, and returns the exit status.
pub fn run_cli() -> i32 {
    let cli = Cli::parse();
    match Config::from_cli(cli) {
        Ok(cfg) => run(&cfg),
        Err(e) => {
            eprintln!("goblin-loadgen: {e}");
            EXIT_USAGE
        }
    }
}

/// Runs a configured load and prints its report; returns the exit status.
pub fn run(cfg: &Config) -> i32 {
    let c = &cfg.cli;
    let addr = match (c.host.as_str(), c.port)
        .to_socket_addrs()
        .map(|mut a| a.next())
    {
        Ok(Some(a)) => a,
        Ok(None) | Err(_) => {
            eprintln!("goblin-loadgen: cannot resolve {}:{}", c.host, c.port);
            return EXIT_FAILED;
        }
    };
    let needs_scripts = c.target == cli::Target::Redis
        && matches!(c.workload, WorkloadSpec::Claim | WorkloadSpec::Lock);
    let cluster = if c.cluster {
        match cluster::fetch_slot_map(addr) {
            Ok(map) => Some(map),
            Err(e) => {
                eprintln!("goblin-loadgen: --cluster: reading the slot map from {addr}: {e}");
                return EXIT_FAILED;
            }
        }
    } else {
        None
    };
    // With --cluster, every primary runs the scripts: load them on each.
    let script_nodes = match &cluster {
        Some(map) => map.nodes.clone(),
        None => vec![addr],
    };
    let mut shas = Shas::default();
    if needs_scripts {
        for node in script_nodes {
            match scripts::load(node) {
                Ok(s) => shas = s,
                Err(e) => {
                    eprintln!("goblin-loadgen: loading the oracle scripts on {node}: {e}");
                    return EXIT_FAILED;
                }
            }
        }
    }
    let cluster = cluster.map(|map| cluster::ClusterShared::new(map, needs_scripts));
    let summary = execute(cfg, addr, cluster.as_ref(), &shas);
    print!("{}", summary.table());
    let mut status = EXIT_OK;
    if let Some(path) = &c.json
        && let Err(e) = std::fs::write(path, summary.json())
    {
        eprintln!("goblin-loadgen: writing {}: {e}", path.display());
        status = EXIT_FAILED;
    }
    if let Some(path) = &c.hdr {
        let written = std::fs::File::create(path).and_then(|f| {
            let mut w = std::io::BufWriter::new(f);
            report::write_hdr(&summary.hist, &mut w)?;
            std::io::Write::flush(&mut w)
        });
        if let Err(e) = written {
            eprintln!("goblin-loadgen: writing {}: {e}", path.display());
            status = EXIT_FAILED;
        }
    }
    for f in &summary.failures {
        eprintln!("goblin-loadgen: FAILED: {f}");
    }
    if !summary.failures.is_empty() {
        EXIT_FAILED
    } else if summary.counters.claim.violations() > 0 {
        EXIT_VIOLATION
    } else {
        status
    }
}

/// A run identifier, different every run (unlike the seed): claim ids and lock tokens
/// carry it, so results left on the server by an earlier run are never mistaken for
/// this run's.
fn run_nonce() -> String {
    let mut rng = rng::Rng::new(cli::clock_seed());
    format!("{:08x}", rng.next_u64() as u32)
}

fn plan(cfg: &Config) -> Plan {
    let c = &cfg.cli;
    let threads = c.threads as usize;
    let measure_start = cfg.warmup.as_nanos() as u64;
    let (end, requests_per_thread) = match cfg.stop {
        Stop::Duration(d) => (
            Some(measure_start.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))),
            None,
        ),
        Stop::Requests(n) => {
            let t = threads as u64;
            let share = (0..t).map(|i| n / t + u64::from(i < n % t)).collect();
            (None, Some(share))
        }
    };
    Plan {
        pipeline: c.pipeline as usize,
        connections: c.connections as usize,
        waiters: cfg.waiters(),
        threads,
        measure_start,
        end,
        requests_per_thread,
        interval_ns: c.rate.map(|r| 1e9 * cfg.total_connections() as f64 / r),
    }
}

fn execute(
    cfg: &Config,
    addr: SocketAddr,
    cluster: Option<&Arc<cluster::ClusterShared>>,
    shas: &Shas,
) -> Summary {
    let c = &cfg.cli;
    let plan = Arc::new(plan(cfg));
    let shared = Arc::new(Shared::default());
    let nonce = run_nonce();
    let (tx, rx) = mpsc::channel();
    let barrier = Arc::new(Barrier::new(plan.threads + 1));
    let mut handles = Vec::new();
    for index in 0..plan.threads {
        let spec = ThreadSpec {
            index,
            addr,
            cluster: cluster.cloned(),
            plan: Arc::clone(&plan),
            generator: Generator::new(cfg, index as u32, &nonce, shas.clone()),
            shared: Arc::clone(&shared),
            tx: tx.clone(),
            barrier: Arc::clone(&barrier),
        };
        let spawned = std::thread::Builder::new()
            .name(format!("loadgen-{index}"))
            .spawn(move || engine::run_thread(spec));
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => {
                // The barrier would wait forever for this thread: give up at once.
                eprintln!("goblin-loadgen: cannot start thread {index}: {e}");
                std::process::exit(EXIT_FAILED);
            }
        }
    }
    drop(tx);
    barrier.wait();
    let t0 = shared.start_clock();
    barrier.wait();

    let mut results = Vec::new();
    let mut progress = ProgressLine::new(t0, !c.quiet);
    while results.len() < plan.threads {
        match rx.recv_timeout(progress.until_next()) {
            Ok(Message::Progress(p)) => progress.add(p),
            Ok(Message::Done(r)) => results.push(r),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        progress.maybe_print();
    }
    for h in handles {
        let _ = h.join();
    }

    let hist =
        merge_histograms(results.iter().map(|r| &r.hist)).unwrap_or_else(|_| new_histogram());
    let mut counters = Counters::default();
    for r in &results {
        counters.merge(&r.counters);
    }
    let last = results.iter().map(|r| r.last_reply).max().unwrap_or(0);
    let elapsed_s = last.saturating_sub(plan.measure_start) as f64 / 1e9;
    let workload = match c.workload {
        WorkloadSpec::Claim => WorkloadSection::Claim,
        WorkloadSpec::Lock => WorkloadSection::Lock,
        _ => WorkloadSection::Plain,
    };
    let mode = match c.rate {
        Some(r) => format!("open loop at {r} ops/s"),
        None => "closed loop".to_string(),
    };
    let claim_line = if c.workload == WorkloadSpec::Claim {
        let wait = match c.block {
            Some(ms) => format!(
                "duplicates wait with BLOCK {ms} on {} waiter connection(s) per thread",
                cfg.waiters()
            ),
            None => format!("duplicates poll every {} ms", c.poll_ms),
        };
        format!(
            "\n  claim: {wait}; {:.0}% duplicates; winners: {:.0}% crash, {:.0}% run {} ms and \
             renew, {:.0}% stall past the lease; work {} ms, lease {} s, result TTL {} s{}",
            c.dup_ratio * 100.0,
            c.crash_ratio * 100.0,
            c.renew_ratio * 100.0,
            cfg.long_work_ms,
            c.stale_ratio * 100.0,
            c.work_ms,
            c.lease_secs,
            c.result_ttl,
            if c.hash_tag { ", hash-tagged keys" } else { "" },
        )
    } else {
        String::new()
    };
    let cluster_label = match cluster {
        Some(cl) => {
            let (map, _) = cl.snapshot();
            format!(
                " (Redis Cluster: {} primaries, {} of 16384 slots served at start)",
                map.nodes.len(),
                map.assigned()
            )
        }
        None => String::new(),
    };
    let headline = format!(
        "goblin-loadgen {}: workload {} on {} at {}:{}{cluster_label}\n  {} thread(s) x {} \
         connection(s), pipeline {}, {mode}, keyspace {} ({}), value {} B, warmup {:.1} s, \
         seed {}{claim_line}",
        env!("CARGO_PKG_VERSION"),
        workload_label(cfg),
        c.target.name(),
        c.host,
        c.port,
        c.threads,
        c.connections,
        c.pipeline,
        c.keyspace,
        c.key_dist,
        c.value_size,
        cfg.warmup.as_secs_f64(),
        cfg.seed,
    );
    let settings = vec![
        (
            "tool",
            Json::str(format!("goblin-loadgen {}", env!("CARGO_PKG_VERSION"))),
        ),
        ("workload", Json::str(workload_label(cfg))),
        ("target", Json::str(c.target.name())),
        ("host", Json::str(c.host.clone())),
        ("port", Json::Int(u64::from(c.port))),
        ("cluster", Json::Bool(c.cluster)),
        ("threads", Json::Int(u64::from(c.threads))),
        (
            "connections_per_thread",
            Json::Int(u64::from(c.connections)),
        ),
        ("pipeline", Json::Int(u64::from(c.pipeline))),
        (
            "mode",
            Json::str(if c.rate.is_some() { "open" } else { "closed" }),
        ),
        ("rate", c.rate.map_or(Json::Null, Json::Num)),
        ("keyspace", Json::Int(c.keyspace)),
        ("key_dist", Json::str(c.key_dist.to_string())),
        ("value_size", Json::Int(c.value_size as u64)),
        ("warmup_s", Json::Num(cfg.warmup.as_secs_f64())),
        ("seed", Json::Int(cfg.seed)),
    ];
    let mut settings = settings;
    if c.workload == WorkloadSpec::Claim {
        settings.extend([
            ("dup_ratio", Json::Num(c.dup_ratio)),
            ("crash_ratio", Json::Num(c.crash_ratio)),
            ("renew_ratio", Json::Num(c.renew_ratio)),
            ("stale_ratio", Json::Num(c.stale_ratio)),
            ("work_ms", Json::Int(c.work_ms)),
            ("long_work_ms", Json::Int(cfg.long_work_ms)),
            ("lease_secs", Json::Int(c.lease_secs)),
            ("result_ttl_secs", Json::Int(c.result_ttl)),
            ("hash_tag", Json::Bool(c.hash_tag)),
            ("block_ms", c.block.map_or(Json::Null, Json::Int)),
            ("waiters_per_thread", Json::Int(cfg.waiters() as u64)),
            (
                "poll_ms",
                if c.block.is_some() {
                    Json::Null
                } else {
                    Json::Int(c.poll_ms)
                },
            ),
        ]);
    }
    Summary {
        settings,
        headline,
        elapsed_s,
        hist,
        counters,
        workload,
        cluster: cluster.map(|cl| report::ClusterFigures {
            map_refreshes: cl.refreshes(),
        }),
        failures: shared.failures(),
    }
}

fn workload_label(cfg: &Config) -> String {
    match (&cfg.cli.workload, &cfg.cli.command) {
        (WorkloadSpec::Command, Some(t)) => format!("command \"{t}\""),
        (w, _) => w.to_string(),
    }
}

/// The once-a-second progress line on stderr.
struct ProgressLine {
    t0: Instant,
    enabled: bool,
    next: Duration,
    last_print: Duration,
    ops: u64,
    errors: u64,
    total_errors: u64,
    measuring: bool,
    /// Everything seen in the current phase (warmup, then measuring), for "p99 so far".
    so_far: hdrhistogram::Histogram<u64>,
}

impl ProgressLine {
    fn new(t0: Instant, enabled: bool) -> Self {
        ProgressLine {
            t0,
            enabled,
            // A little after each thread's tick, so that the tick's reports are in.
            next: Duration::from_millis(1_050),
            last_print: Duration::ZERO,
            ops: 0,
            errors: 0,
            total_errors: 0,
            measuring: false,
            so_far: new_histogram(),
        }
    }

    fn until_next(&self) -> Duration {
        self.next.saturating_sub(self.t0.elapsed())
    }

    fn add(&mut self, p: engine::Progress) {
        if p.measuring && !self.measuring {
            self.measuring = true;
            self.so_far.reset();
        }
        if p.measuring == self.measuring {
            let _ = self.so_far.add(&p.hist);
        }
        self.ops += p.hist.len();
        self.errors += p.errors;
        self.total_errors += p.errors;
    }

    fn maybe_print(&mut self) {
        let now = self.t0.elapsed();
        if now < self.next {
            return;
        }
        let secs = (now - self.last_print).as_secs_f64().max(1e-9);
        if self.enabled {
            let p99 = if self.so_far.is_empty() {
                0.0
            } else {
                self.so_far.value_at_quantile(0.99) as f64 / 1e6
            };
            eprintln!(
                "[{:>4.0}s] {:>10.0} ops/s   p99 {:.3} ms{}   errors {} ({} total){}",
                now.as_secs_f64(),
                self.ops as f64 / secs,
                p99,
                if self.measuring { " so far" } else { "" },
                self.errors,
                self.total_errors,
                if self.measuring { "" } else { "   (warmup)" },
            );
        }
        self.ops = 0;
        self.errors = 0;
        self.last_print = now;
        while self.next <= now {
            self.next += Duration::from_secs(1);
        }
    }
}
