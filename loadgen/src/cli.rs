//! Command-line options (clap derive: the doc comments below are the `--help` text) and
//! their validation into a [`Config`].

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::keys::KeyDist;
use crate::template::Template;

/// Default run length when neither `--duration` nor `--requests` is given.
const DEFAULT_DURATION_SECS: f64 = 10.0;

/// goblin-loadgen: a multi-threaded, pipelining load generator for Goblin and redis-server.
///
/// Each thread runs one mio event loop over its connections. Closed loop (the default)
/// keeps `--pipeline` requests in flight on every connection; open loop (`--rate`) sends
/// at a fixed total rate and measures latency from each request's intended send time, so
/// a stalled server cannot hide its stalls (no coordinated omission). Latencies go to one
/// HdrHistogram per thread, merged at the end.
///
/// Exit status: 0 success; 1 a connection failed (refused, reset, closed, malformed
/// reply, requests left unanswered; with --cluster, also: the slot map could not be
/// read); 2 bad usage; 3 the claim workload saw a violation.
#[derive(Parser, Debug, Clone)]
#[command(name = "goblin-loadgen", version, about, long_about, after_help = EXAMPLES)]
pub struct Cli {
    /// Server address.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,

    /// Server port.
    #[arg(long, default_value_t = 6379)]
    pub port: u16,

    /// Client threads, each with its own event loop and connections.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,

    /// Connections per thread.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub connections: u32,

    /// Requests kept in flight on each connection.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub pipeline: u32,

    /// Seconds to measure, after the warmup [default: 10].
    #[arg(long, value_name = "SECS", conflicts_with = "requests")]
    pub duration: Option<f64>,

    /// Requests to measure, after the warmup, over all threads (claim and lock follow-ups
    /// are not counted).
    #[arg(long, value_name = "N")]
    pub requests: Option<u64>,

    /// Seconds of load before measuring starts; nothing from the warmup is in the figures
    /// except server errors, which are always counted.
    #[arg(long, value_name = "SECS", default_value_t = 0.0)]
    pub warmup: f64,

    /// Number of distinct keys (get, set, mixed, lock and __rand_int__).
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub keyspace: u64,

    /// Key popularity: `uniform`, or `zipf:S` with exponent S > 0 (index 0 hottest).
    #[arg(long, value_name = "DIST", default_value = "uniform")]
    pub key_dist: KeyDist,

    /// Bytes per value written by set and mixed (redis-benchmark's -d).
    #[arg(long, value_name = "BYTES", default_value_t = 3)]
    pub value_size: usize,

    /// Seed for every random choice [default: from the clock; printed in the report].
    #[arg(long)]
    pub seed: Option<u64>,

    /// What to send: get | set | mixed:R (R = fraction of GETs) | claim | lock | command.
    #[arg(long, value_name = "NAME", default_value = "get")]
    pub workload: WorkloadSpec,

    /// The template for `--workload command`, e.g. "HSET h:__rand_int__ f v"; each
    /// __rand_int__ becomes a 12-digit key index, drawn anew for every occurrence.
    #[arg(long, value_name = "TEMPLATE")]
    pub command: Option<String>,

    /// The server kind. Against redis, claim and lock send EVALSHA of the GOBLIN.* oracle
    /// scripts (loaded with SCRIPT LOAD at start) instead of the native commands.
    #[arg(long, value_enum, default_value_t = Target::Goblin)]
    pub target: Target,

    /// Redis Cluster: send each request to the primary serving its key's slot, as learned
    /// from --host/--port with CLUSTER SLOTS.
    ///
    /// A key's slot is CRC16 of the key (or of its `{hash tag}`) mod 16384; requests with
    /// no key, such as PING, go to any node. Every connection becomes one connection per
    /// primary (those known at start are opened before the clock starts, later ones when
    /// first needed), and --pipeline counts a connection's requests in flight over all its
    /// primaries together, not per primary.
    ///
    /// -MOVED updates the slot map (and refreshes it whole, at most every 100 ms over the
    /// run) and sends the request again to the new owner; -ASK sends it again to the named
    /// node after ASKING, leaving the map alone; -TRYAGAIN and -CLUSTERDOWN retry it after
    /// 10-50 ms. A redirected request stays in flight, timed from its first send, until
    /// its final answer: that one is measured and handed to the workload (and to the claim
    /// detector). Redirects are not errors: the report counts them apart.
    ///
    /// The claim workload's keys are hash-tagged (as with --hash-tag), so that the claim
    /// and its result share a slot. With --target redis, the oracle scripts are loaded on
    /// every primary.
    #[arg(long)]
    pub cluster: bool,

    /// Open loop: total requests per second over all threads and connections. Absent:
    /// closed loop, each connection sends as fast as its replies return.
    #[arg(long, value_name = "OPS")]
    pub rate: Option<f64>,

    /// Write the final figures as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Write the latency distribution to FILE in HdrHistogram's percentile text format
    /// (milliseconds), as HdrHistogram's plotFiles and similar plotters read it.
    #[arg(long, value_name = "FILE")]
    pub hdr: Option<PathBuf>,

    /// Suppress the per-second progress line on stderr.
    #[arg(long, short)]
    pub quiet: bool,

    /// claim: fraction of requests that repeat a recent request id.
    #[arg(
        long,
        value_name = "R",
        default_value_t = 0.2,
        help_heading = "Claim workload"
    )]
    pub dup_ratio: f64,

    /// claim: fraction of won claims whose worker "crashes" and never publishes.
    #[arg(
        long,
        value_name = "R",
        default_value_t = 0.01,
        help_heading = "Claim workload"
    )]
    pub crash_ratio: f64,

    /// claim: simulated work between CLAIMED and publishing the result, in milliseconds.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 1,
        help_heading = "Claim workload"
    )]
    pub work_ms: u64,

    /// claim: duplicates wait for the result with `GOBLIN.CLAIM … BLOCK MS` (0: without
    /// limit) on waiter connections of their own, instead of polling; every claim call
    /// carries BLOCK. goblin target only (redis-server has no blocking claim: a redis run
    /// polls).
    #[arg(long, value_name = "MS", help_heading = "Claim workload")]
    pub block: Option<u64>,

    /// claim, with --block: waiter connections per thread, each holding one waiting
    /// duplicate at a time (more duplicates queue in the load generator until one frees).
    #[arg(long, value_name = "N", default_value_t = 100, help_heading = "Claim workload",
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub waiters: u32,

    /// claim, without --block: a duplicate answered nil (claimed, not yet published) asks
    /// again after this many milliseconds, as polling idempotency libraries do.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 100,
        conflicts_with = "block",
        help_heading = "Claim workload"
    )]
    pub poll_ms: u64,

    /// claim: fraction of won claims whose worker runs long (--long-work-ms) and renews
    /// its lease with GOBLIN.RENEW every half lease, then publishes.
    #[arg(
        long,
        value_name = "R",
        default_value_t = 0.0,
        help_heading = "Claim workload"
    )]
    pub renew_ratio: f64,

    /// claim: how long a renewing worker works, in milliseconds [default: twice the lease].
    #[arg(long, value_name = "MS", help_heading = "Claim workload")]
    pub long_work_ms: Option<u64>,

    /// claim: fraction of won claims whose worker stalls past its lease without renewing
    /// and then publishes (a stale winner: its GOBLIN.PUBLISH must be refused).
    #[arg(
        long,
        value_name = "R",
        default_value_t = 0.0,
        help_heading = "Claim workload"
    )]
    pub stale_ratio: f64,

    /// claim: lease (claim key TTL) in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 5, help_heading = "Claim workload",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub lease_secs: u64,

    /// claim: TTL of published results, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60, help_heading = "Claim workload",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub result_ttl: u64,

    /// claim: wrap ids in a hash tag (claim:{id}, result:{id}) so both keys share a slot
    /// (always on with --cluster).
    #[arg(long, help_heading = "Claim workload")]
    pub hash_tag: bool,

    /// lock: how long a lock is held before release, in milliseconds.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 1,
        help_heading = "Lock workload"
    )]
    pub hold_ms: u64,

    /// lock: lock TTL (SET … PX) in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 1000, help_heading = "Lock workload",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub lock_ttl_ms: u64,
}

const EXAMPLES: &str = "\
Examples:
  goblin-loadgen --port 6379 --workload get --connections 50 --pipeline 16 --duration 10
  goblin-loadgen --workload mixed:0.9 --key-dist zipf:0.99 --threads 2 --json out.json
  goblin-loadgen --workload set --rate 50000 --hdr set.hgrm
  goblin-loadgen --workload claim --dup-ratio 0.3 --crash-ratio 0.05 --lease-secs 2
  goblin-loadgen --workload claim --block 5000 --renew-ratio 0.01 --lease-secs 1
  goblin-loadgen --target redis --workload lock --hold-ms 2 --lock-ttl-ms 500
  goblin-loadgen --workload command --command 'HSET h:__rand_int__ f v'
  goblin-loadgen --cluster --port 7000 --target redis --workload claim --threads 2";

/// The server a run targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Target {
    /// goblin-server: claim and lock use GOBLIN.CLAIM and GOBLIN.CAD.
    Goblin,
    /// redis-server: claim and lock use EVALSHA of the oracle scripts.
    Redis,
}

impl Target {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Target::Goblin => "goblin",
            Target::Redis => "redis",
        }
    }
}

/// The `--workload` choice.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WorkloadSpec {
    /// `GET key`.
    Get,
    /// `SET key value`.
    Set,
    /// GET with this probability, SET otherwise.
    Mixed(f64),
    /// The idempotency workload (GOBLIN.CLAIM).
    Claim,
    /// Lock acquire/hold/release (SET NX PX, GOBLIN.CAD).
    Lock,
    /// `--command` template.
    Command,
}

impl std::fmt::Display for WorkloadSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkloadSpec::Get => f.write_str("get"),
            WorkloadSpec::Set => f.write_str("set"),
            WorkloadSpec::Mixed(r) => write!(f, "mixed:{r}"),
            WorkloadSpec::Claim => f.write_str("claim"),
            WorkloadSpec::Lock => f.write_str("lock"),
            WorkloadSpec::Command => f.write_str("command"),
        }
    }
}

impl std::str::FromStr for WorkloadSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "get" => WorkloadSpec::Get,
            "set" => WorkloadSpec::Set,
            "claim" => WorkloadSpec::Claim,
            "lock" => WorkloadSpec::Lock,
            "command" => WorkloadSpec::Command,
            _ => {
                let Some(r) = s.strip_prefix("mixed:") else {
                    return Err(format!(
                        "unknown workload {s:?}: expected get, set, mixed:R, claim, lock or command"
                    ));
                };
                match r.parse::<f64>() {
                    Ok(r) if (0.0..=1.0).contains(&r) => WorkloadSpec::Mixed(r),
                    _ => {
                        return Err(format!(
                            "mixed:R needs a read fraction in [0, 1], got {r:?}"
                        ));
                    }
                }
            }
        })
    }
}

/// When a run stops measuring.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stop {
    /// After this long.
    Duration(Duration),
    /// After this many requests over all threads.
    Requests(u64),
}

/// A validated run configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// The options as given.
    pub cli: Cli,
    /// When measuring stops.
    pub stop: Stop,
    /// Load before measuring.
    pub warmup: Duration,
    /// The parsed `--command` template (workload command only).
    pub template: Option<Template>,
    /// The seed actually used.
    pub seed: u64,
    /// How long a renewing claim worker works (`--long-work-ms`, resolved).
    pub long_work_ms: u64,
}

impl Config {
    /// Checks the options that clap cannot check alone.
    ///
    /// # Errors
    /// A message naming the offending option.
    pub fn from_cli(mut cli: Cli) -> Result<Config, String> {
        let secs = |name: &str, v: f64| -> Result<Duration, String> {
            Duration::try_from_secs_f64(v)
                .map_err(|_| format!("--{name} must be a non-negative number of seconds, got {v}"))
        };
        let stop = match (cli.duration, cli.requests) {
            (_, Some(0)) => return Err("--requests must be at least 1".into()),
            (_, Some(n)) => Stop::Requests(n),
            (Some(d), None) if d > 0.0 => Stop::Duration(secs("duration", d)?),
            (Some(d), None) => return Err(format!("--duration must be > 0, got {d}")),
            (None, None) => Stop::Duration(Duration::from_secs_f64(DEFAULT_DURATION_SECS)),
        };
        let warmup = secs("warmup", cli.warmup)?;
        if let Some(r) = cli.rate
            && !(r.is_finite() && r > 0.0)
        {
            return Err(format!(
                "--rate must be a positive number of requests per second, got {r}"
            ));
        }
        if cli.keyspace == 0 {
            return Err("--keyspace must be at least 1".into());
        }
        for (name, v) in [
            ("dup-ratio", cli.dup_ratio),
            ("crash-ratio", cli.crash_ratio),
            ("renew-ratio", cli.renew_ratio),
            ("stale-ratio", cli.stale_ratio),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("--{name} must be in [0, 1], got {v}"));
            }
        }
        let fates = cli.crash_ratio + cli.renew_ratio + cli.stale_ratio;
        if fates > 1.0 {
            return Err(format!(
                "--crash-ratio, --renew-ratio and --stale-ratio share the winners: their sum \
                 must be at most 1, got {fates}"
            ));
        }
        if cli.block.is_some() && cli.target == Target::Redis {
            return Err(
                "--block needs --target goblin: redis-server has no blocking claim, \
                        so a redis run polls (--poll-ms)"
                    .into(),
            );
        }
        if cli.block.is_some() && cli.workload != WorkloadSpec::Claim {
            return Err("--block is an option of --workload claim".into());
        }
        if cli.poll_ms == 0 {
            return Err("--poll-ms must be at least 1".into());
        }
        let template = match (&cli.workload, &cli.command) {
            (WorkloadSpec::Command, Some(t)) => Some(Template::parse(t)?),
            (WorkloadSpec::Command, None) => {
                return Err("--workload command needs --command TEMPLATE".into());
            }
            (_, Some(_)) => return Err("--command is only used with --workload command".into()),
            (_, None) => None,
        };
        if cli.cluster && cli.workload == WorkloadSpec::Claim {
            // A claim call names both keys (and the scripts declare both): in a cluster
            // they must hash to one slot.
            cli.hash_tag = true;
        }
        let seed = cli.seed.unwrap_or_else(clock_seed);
        let long_work_ms = cli
            .long_work_ms
            .unwrap_or_else(|| cli.lease_secs.saturating_mul(2_000));
        Ok(Config {
            cli,
            stop,
            warmup,
            template,
            seed,
            long_work_ms,
        })
    }

    /// Waiter connections per thread: `--waiters` with `--block`, none otherwise.
    pub fn waiters(&self) -> usize {
        if self.cli.block.is_some() {
            self.cli.waiters as usize
        } else {
            0
        }
    }

    /// Total connections over all threads.
    pub fn total_connections(&self) -> u64 {
        u64::from(self.cli.threads) * u64::from(self.cli.connections)
    }
}

/// A seed that differs from run to run.
pub fn clock_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn config(args: &[&str]) -> Result<Config, String> {
        let mut argv = vec!["goblin-loadgen"];
        argv.extend_from_slice(args);
        Config::from_cli(Cli::try_parse_from(argv).map_err(|e| e.to_string())?)
    }

    #[test]
    fn defaults() {
        let c = config(&[]).unwrap();
        assert_eq!(c.stop, Stop::Duration(Duration::from_secs(10)));
        assert_eq!(
            (c.cli.threads, c.cli.connections, c.cli.pipeline),
            (1, 50, 1)
        );
        assert_eq!(c.cli.workload, WorkloadSpec::Get);
        assert_eq!(c.cli.target, Target::Goblin);
    }

    #[test]
    fn workloads_and_distributions() {
        let c = config(&["--workload", "mixed:0.9", "--key-dist", "zipf:1.1"]).unwrap();
        assert_eq!(c.cli.workload, WorkloadSpec::Mixed(0.9));
        assert_eq!(c.cli.key_dist, KeyDist::Zipf(1.1));
        assert!(config(&["--workload", "mixed:2"]).is_err());
        assert!(config(&["--workload", "scan"]).is_err());
        let c = config(&["--workload", "command", "--command", "INCR c:__rand_int__"]).unwrap();
        assert!(c.template.unwrap().is_random());
        assert!(config(&["--workload", "command"]).is_err());
        assert!(config(&["--command", "PING"]).is_err());
    }

    #[test]
    fn stop_conditions() {
        assert_eq!(
            config(&["--requests", "5"]).unwrap().stop,
            Stop::Requests(5)
        );
        assert!(config(&["--requests", "5", "--duration", "1"]).is_err());
        assert!(config(&["--duration", "0"]).is_err());
        assert!(config(&["--duration", "-1"]).is_err());
        assert!(config(&["--rate", "0"]).is_err());
        assert!(config(&["--threads", "0"]).is_err());
        assert!(config(&["--dup-ratio", "1.5"]).is_err());
    }

    #[test]
    fn claim_life_options() {
        let c = config(&["--workload", "claim"]).unwrap();
        assert_eq!((c.cli.block, c.cli.poll_ms, c.waiters()), (None, 100, 0));
        assert_eq!(c.long_work_ms, 10_000, "twice the 5 s lease");
        let c = config(&[
            "--workload",
            "claim",
            "--block",
            "0",
            "--waiters",
            "7",
            "--lease-secs",
            "2",
            "--renew-ratio",
            "0.25",
            "--stale-ratio",
            "0.25",
        ])
        .unwrap();
        assert_eq!(
            (c.cli.block, c.waiters(), c.long_work_ms),
            (Some(0), 7, 4_000)
        );
        assert_eq!((c.cli.renew_ratio, c.cli.stale_ratio), (0.25, 0.25));
        let c = config(&["--workload", "claim", "--long-work-ms", "30"]).unwrap();
        assert_eq!(c.long_work_ms, 30);
        assert_eq!(
            config(&["--workload", "claim", "--poll-ms", "250"])
                .unwrap()
                .cli
                .poll_ms,
            250
        );
    }

    #[test]
    fn claim_life_options_are_checked() {
        let err = |args: &[&str]| config(args).unwrap_err();
        assert!(
            err(&["--workload", "claim", "--block", "10", "--target", "redis"])
                .contains("needs --target goblin")
        );
        assert!(err(&["--workload", "get", "--block", "10"]).contains("--workload claim"));
        assert!(err(&["--workload", "claim", "--block", "-1"]).contains("-1"));
        assert!(
            err(&["--workload", "claim", "--block", "1", "--poll-ms", "5"])
                .contains("cannot be used with")
        );
        assert!(err(&["--workload", "claim", "--poll-ms", "0"]).contains("--poll-ms"));
        assert!(err(&["--workload", "claim", "--renew-ratio", "1.1"]).contains("[0, 1]"));
        assert!(err(&["--workload", "claim", "--block", "1", "--waiters", "0"]).contains("0"));
        let shares = err(&[
            "--workload",
            "claim",
            "--crash-ratio",
            "0.5",
            "--renew-ratio",
            "0.3",
            "--stale-ratio",
            "0.3",
        ]);
        assert!(shares.contains("at most 1"), "{shares}");
    }

    #[test]
    fn cluster_hash_tags_the_claim_keys() {
        let c = config(&["--workload", "claim"]).unwrap();
        assert!(!c.cli.cluster && !c.cli.hash_tag);
        let c = config(&["--workload", "claim", "--cluster"]).unwrap();
        assert!(c.cli.cluster && c.cli.hash_tag);
        let c = config(&["--workload", "get", "--cluster"]).unwrap();
        assert!(c.cli.cluster && !c.cli.hash_tag);
    }
}
