//! Command-line configuration.
//!
//! Options are given redis-server style, `--name value`; `--help` lists them.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use goblin_protocol::Limits;

/// The server's configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Address to listen on.
    pub bind: IpAddr,
    /// TCP port (0: any free port; the bound port is printed).
    pub port: u16,
    /// Shard threads; 0 means one per core this process may use.
    pub threads: usize,
    /// Protocol limits.
    pub limits: Limits,
    /// Persistence.
    pub persist: PersistConfig,
    /// The configuration file it was read from, when there was one (absolute).
    pub file: Option<PathBuf>,
    /// `requirepass`: the default user's password; `None`: no password (every client
    /// is authenticated).
    pub requirepass: Option<Vec<u8>>,
    /// `maxclients`: connections beyond it get an error and are closed.
    pub maxclients: usize,
    /// `timeout`: seconds a client may stay idle before it is closed (0: never).
    pub timeout: u64,
    /// `tcp-keepalive`: seconds between TCP keepalive probes (0: none).
    pub tcp_keepalive: u64,
    /// `protected-mode`: without a password, only loopback clients are served.
    pub protected_mode: bool,
    /// `rename-command old new` (configuration file only): `new` empty removes `old`.
    pub renames: Vec<(String, String)>,
    /// `databases`: how many databases there are (SELECT 0 to this minus one).
    pub databases: usize,
    /// `maxmemory` and its policy.
    pub memory: crate::memory::MemoryConfig,
    /// `slowlog-log-slower-than`, microseconds (negative: off; 0: every command).
    pub slowlog_slower_than: i64,
    /// `slowlog-max-len`.
    pub slowlog_max_len: u64,
    /// `loglevel`.
    pub loglevel: crate::log::Level,
    /// `logfile` (`None`: standard error).
    pub logfile: Option<PathBuf>,
    /// `client-output-buffer-limit`, per client class.
    pub output_limits: OutputLimits,
    /// `client-query-buffer-limit`: a client whose unprocessed input grows past it is
    /// closed.
    pub query_buffer_limit: u64,
    /// `latency-monitor-threshold`, milliseconds (0: the latency monitor is off).
    pub latency_monitor_threshold: u64,
    /// `enable-debug-command`: who may run DEBUG.
    pub enable_debug_command: Allow,
}

/// Who may run a protected command (`enable-debug-command`): nobody, everybody, or
/// clients on the loopback interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allow {
    /// `no`.
    No,
    /// `yes`.
    Yes,
    /// `local`.
    Local,
}

impl Allow {
    /// The name redis.conf uses.
    pub fn name(self) -> &'static str {
        match self {
            Allow::No => "no",
            Allow::Yes => "yes",
            Allow::Local => "local",
        }
    }
}

/// One class's `client-output-buffer-limit`: past `hard` bytes of pending replies, or
/// past `soft` for `soft_seconds` on end, the client is closed (0: no limit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufferLimit {
    /// Bytes.
    pub hard: u64,
    /// Bytes.
    pub soft: u64,
    /// Seconds.
    pub soft_seconds: u64,
}

impl BufferLimit {
    /// Whether the limit closes clients at all.
    pub fn is_set(&self) -> bool {
        self.hard > 0 || self.soft > 0
    }
}

/// `client-output-buffer-limit`: the classes of clients redis-server has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputLimits {
    /// Ordinary clients (MONITOR clients too, as in Redis).
    pub normal: BufferLimit,
    /// Replicas (kept for configurations; Goblin has no replicas yet).
    pub replica: BufferLimit,
    /// Clients subscribed to Pub/Sub channels.
    pub pubsub: BufferLimit,
}

impl Default for OutputLimits {
    /// redis-server's defaults: `normal 0 0 0 slave 256mb 64mb 60 pubsub 32mb 8mb 60`.
    fn default() -> Self {
        OutputLimits {
            normal: BufferLimit::default(),
            replica: BufferLimit {
                hard: 256 << 20,
                soft: 64 << 20,
                soft_seconds: 60,
            },
            pubsub: BufferLimit {
                hard: 32 << 20,
                soft: 8 << 20,
                soft_seconds: 60,
            },
        }
    }
}

impl OutputLimits {
    /// As CONFIG GET shows it: `normal 0 0 0 slave 268435456 67108864 60 pubsub …`.
    pub fn text(&self) -> String {
        [
            ("normal", self.normal),
            ("slave", self.replica),
            ("pubsub", self.pubsub),
        ]
        .iter()
        .map(|(name, l)| format!("{name} {} {} {}", l.hard, l.soft, l.soft_seconds))
        .collect::<Vec<_>>()
        .join(" ")
    }

    /// Sets the classes a value names (`normal 1mb 512kb 10 pubsub 0 0 0`); the others
    /// keep their limits. Checked whole before anything changes.
    fn set(&mut self, value: &str) -> Result<(), String> {
        let words: Vec<&str> = value.split_whitespace().collect();
        if !words.len().is_multiple_of(4) {
            return Err("Wrong number of arguments in buffer limit configuration.".into());
        }
        let mut next = *self;
        for group in words.chunks(4) {
            let class = match group[0].to_ascii_lowercase().as_str() {
                "normal" => &mut next.normal,
                "slave" | "replica" => &mut next.replica,
                "pubsub" => &mut next.pubsub,
                _ => {
                    return Err(
                        "Invalid client class specified in buffer limit configuration.".into(),
                    );
                }
            };
            let bad =
                || "Error in hard, soft or soft_seconds setting in buffer limit configuration.";
            let hard = parse_size(group[1]).map_err(|_| bad())?;
            let soft = parse_size(group[2]).map_err(|_| bad())?;
            let soft_seconds = group[3].parse::<u64>().map_err(|_| bad())?;
            *class = BufferLimit {
                hard,
                soft,
                soft_seconds,
            };
        }
        *self = next;
        Ok(())
    }
}

/// When the append-only log is flushed to disk (`appendfsync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fsync {
    /// Before any write is acknowledged (group commit: once per loop iteration).
    Always,
    /// About once a second, by a background thread.
    Everysec,
    /// When the operating system decides.
    No,
}

impl Fsync {
    /// The name redis.conf uses.
    pub fn name(self) -> &'static str {
        match self {
            Fsync::Always => "always",
            Fsync::Everysec => "everysec",
            Fsync::No => "no",
        }
    }
}

/// Persistence options, named as in redis.conf.
#[derive(Clone, Debug)]
pub struct PersistConfig {
    /// `dir`: where the snapshot and the log directory live.
    pub dir: PathBuf,
    /// `dbfilename`: the snapshot's file name.
    pub dbfilename: String,
    /// `--loadrdb FILE`: load this RDB file at start-up instead of `dir/dbfilename`.
    pub loadrdb: Option<PathBuf>,
    /// `save`: snapshot after so many seconds when at least so many changes were made.
    pub save: Vec<(u64, u64)>,
    /// `appendonly`.
    pub appendonly: bool,
    /// `appendfsync`.
    pub appendfsync: Fsync,
    /// `appenddirname`.
    pub appenddirname: String,
    /// `appendfilename`: the base name of the log's files.
    pub appendfilename: String,
    /// `aof-load-truncated`: a torn last record is cut (with a warning) rather than
    /// refused.
    pub aof_load_truncated: bool,
    /// `stop-writes-on-bgsave-error`.
    pub stop_writes_on_bgsave_error: bool,
    /// `auto-aof-rewrite-percentage` (0: never automatically).
    pub auto_aof_rewrite_percentage: u64,
    /// `auto-aof-rewrite-min-size`, bytes.
    pub auto_aof_rewrite_min_size: u64,
}

/// redis-server's default `save` rules: after an hour with one change, five minutes with
/// 100, a minute with 10,000.
pub const DEFAULT_SAVE: [(u64, u64); 3] = [(3600, 1), (300, 100), (60, 10_000)];

impl Default for PersistConfig {
    fn default() -> Self {
        PersistConfig {
            dir: PathBuf::from("."),
            dbfilename: "dump.rdb".into(),
            loadrdb: None,
            save: DEFAULT_SAVE.to_vec(),
            appendonly: false,
            appendfsync: Fsync::Everysec,
            appenddirname: "appendonlydir".into(),
            appendfilename: "appendonly.aof".into(),
            aof_load_truncated: true,
            stop_writes_on_bgsave_error: true,
            auto_aof_rewrite_percentage: 100,
            auto_aof_rewrite_min_size: 64 << 20,
        }
    }
}

impl PersistConfig {
    /// The snapshot's path.
    pub fn rdb_path(&self) -> PathBuf {
        self.dir.join(&self.dbfilename)
    }

    /// The log's directory.
    pub fn aof_dir(&self) -> PathBuf {
        self.dir.join(&self.appenddirname)
    }

    /// The `save` rules as CONFIG GET shows them (`3600 1 300 100`).
    pub fn save_text(&self) -> String {
        let parts: Vec<String> = self.save.iter().map(|(s, c)| format!("{s} {c}")).collect();
        parts.join(" ")
    }
}

/// `save` rules from their text: pairs of seconds and changes; empty: none.
fn parse_save(value: &str) -> Result<Vec<(u64, u64)>, String> {
    let nums: Vec<&str> = value.split_whitespace().collect();
    // redis-server's text, in a configuration file's error and CONFIG SET's.
    let invalid = || "Invalid save parameters".to_string();
    if !nums.len().is_multiple_of(2) {
        return Err(invalid());
    }
    nums.chunks(2)
        .map(|pair| match (pair[0].parse(), pair[1].parse()) {
            (Ok(secs), Ok(changes)) => Ok((secs, changes)),
            _ => Err(invalid()),
        })
        .collect()
}

fn parse_bool(value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        // redis-server's text (in a configuration file's error and CONFIG SET's).
        _ => Err("argument must be 'yes' or 'no'".to_string()),
    }
}

/// A size with redis.conf's units (`64mb`, `1gb`, `100k`).
fn parse_size(value: &str) -> Result<u64, String> {
    let lower = value.to_ascii_lowercase();
    let units: [(&str, u64); 6] = [
        ("kb", 1024),
        ("mb", 1 << 20),
        ("gb", 1 << 30),
        ("k", 1000),
        ("m", 1_000_000),
        ("g", 1_000_000_000),
    ];
    let (digits, mul) = units
        .iter()
        .find_map(|(u, m)| lower.strip_suffix(u).map(|d| (d, *m)))
        .unwrap_or((lower.as_str(), 1));
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .ok_or_else(|| "argument must be a memory value".to_string())
}

/// A size of at least `min` (and at most `i64::MAX`), refused with redis-server's text.
fn parse_size_ranged(value: &str, min: u64) -> Result<u64, String> {
    let n = parse_size(value)?;
    if n < min || n > i64::MAX as u64 {
        return Err(format!(
            "argument must be between {min} and {} inclusive",
            i64::MAX
        ));
    }
    Ok(n)
}

/// An integer within `min..=max`, refused with redis-server's texts.
fn parse_ranged(value: &str, min: i64, max: i64) -> Result<i64, String> {
    let n: i64 = parse_num(value)?;
    if (min..=max).contains(&n) {
        Ok(n)
    } else {
        Err(format!(
            "argument must be between {min} and {max} inclusive"
        ))
    }
}

/// The range redis-server gives its `int` options (timeout, tcp-keepalive, …).
const INT_MAX: i64 = i32::MAX as i64;

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: 6379,
            threads: 0,
            limits: Limits::default(),
            persist: PersistConfig::default(),
            file: None,
            requirepass: None,
            maxclients: 10_000,
            timeout: 0,
            tcp_keepalive: 300,
            protected_mode: true,
            renames: Vec::new(),
            databases: 16,
            memory: crate::memory::MemoryConfig::default(),
            slowlog_slower_than: 10_000,
            slowlog_max_len: 128,
            loglevel: crate::log::Level::Notice,
            logfile: None,
            output_limits: OutputLimits::default(),
            query_buffer_limit: 1 << 30,
            latency_monitor_threshold: 0,
            enable_debug_command: Allow::No,
        }
    }
}

/// The usage text.
pub const USAGE: &str = "\
goblin-server: a Redis-protocol in-memory server, shared-nothing and thread-per-core.

Usage: goblin-server [/path/to/goblin.conf] [options]

A configuration file has redis.conf's syntax: one option per line, its name without the
dashes, then its value (`appendfsync always`, `save 3600 1 300 100`); `#` starts a comment;
`include /other.conf` reads another file there. Options on the command line come after the
file's, and win. An unknown or invalid option stops the start, naming the file and line.

Options:
  --bind ADDR               address to listen on (default 127.0.0.1)
  --port PORT               TCP port (default 6379; 0 picks a free port)
  --threads N               shard threads, one pinned per core, at most 1024 (default:
                            the cores this process may use)
  --proto-max-bulk-len SIZE largest bulk argument in bytes (default 512mb, at least 1mb)
  --requirepass PASSWORD    clients must AUTH with it (default: none; '' for none)
  --maxclients N            connections beyond N get an error and are closed (default
                            10000)
  --timeout SECONDS         close clients idle this long (default 0: never)
  --tcp-keepalive SECONDS   TCP keepalive probes this often (default 300; 0: none)
  --protected-mode yes|no   without a password, serve loopback clients only (default yes)
  --databases N             databases, SELECT 0 to N-1 (default 16)
  --loglevel LEVEL          debug, verbose, notice (default) or warning
  --logfile FILE            append the log to FILE (default '': standard error)
  --maxmemory SIZE          memory limit (default 0: none)
  --maxmemory-policy NAME   past it: noeviction (default; writes get OOM), allkeys-lru,
                            allkeys-lfu, allkeys-random, volatile-lru, volatile-lfu,
                            volatile-random, volatile-ttl
  --maxmemory-samples N     keys sampled per eviction (default 5)
  --lfu-log-factor N        LFU counter growth (default 10)
  --lfu-decay-time MINUTES  LFU counter decay (default 1)
  --slowlog-log-slower-than MICROSECONDS
                            SLOWLOG keeps commands slower than this (default 10000; -1:
                            none; 0: all)
  --slowlog-max-len N       SLOWLOG keeps this many (default 128)
  --enable-debug-command no|yes|local
                            who may run DEBUG: nobody (default), everybody, or clients on
                            the loopback interface
  --latency-monitor-threshold MILLISECONDS
                            LATENCY records events at least this slow (default 0: off)
  --client-output-buffer-limit 'CLASS HARD SOFT SECONDS ...'
                            close a client whose pending replies pass HARD bytes, or SOFT
                            for SECONDS on end; CLASS normal, replica or pubsub (default
                            'normal 0 0 0 slave 256mb 64mb 60 pubsub 32mb 8mb 60'; 0: none)
  --client-query-buffer-limit SIZE
                            close a client whose unprocessed input passes SIZE (default
                            1gb, at least 1mb)
  (configuration file only) rename-command OLD NEW: OLD is reachable as NEW only; NEW ''
                            removes it

Persistence (as in redis.conf):
  --dir DIR                 where the snapshot and the log directory live (default .)
  --dbfilename NAME         the snapshot's file name (default dump.rdb)
  --save 'S C [S C ...]'    snapshot after S seconds with at least C changes; '' for
                            never (default '3600 1 300 100 60 10000')
  --loadrdb FILE            load this RDB file at start-up (instead of dir/dbfilename)
  --appendonly yes|no       the append-only log (default no)
  --appendfsync always|everysec|no
                            when the log reaches the disk (default everysec)
  --appenddirname NAME      the log's directory, in dir (default appendonlydir)
  --appendfilename NAME     the base name of the log's files (default appendonly.aof)
  --aof-load-truncated yes|no
                            cut a torn last record at start-up (default yes)
  --stop-writes-on-bgsave-error yes|no
                            refuse writes while snapshots fail (default yes)
  --auto-aof-rewrite-percentage N
                            rewrite the log when it grew by N% (default 100; 0: never)
  --auto-aof-rewrite-min-size SIZE
                            ... and is at least SIZE (default 64mb)
  -h, --help                print this help
  -v, --version             print the version
";

/// What the command line asks for.
#[derive(Debug)]
pub enum Cli {
    /// Run with this configuration.
    Run(Box<Config>),
    /// Print the help.
    Help,
    /// Print the version.
    Version,
}

/// The most databases: each one a shard has used costs it a keyspace (about 13 KiB empty),
/// so a limit keeps a typo from costing gigabytes (redis-server allows up to `INT_MAX`).
pub const MAX_DATABASES: u32 = 1 << 16;

/// The most shard threads: far more than any machine's cores, and far fewer than the 16384
/// hash slots, so that every shard owns slots.
pub const MAX_THREADS: usize = 1024;

fn parse_num<T: std::str::FromStr>(value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())
}

/// The options CONFIG SET may change while the server runs.
pub const SETTABLE: &[&str] = &[
    "requirepass",
    "maxclients",
    "timeout",
    "tcp-keepalive",
    "protected-mode",
    "save",
    "stop-writes-on-bgsave-error",
    "appendfsync",
    "auto-aof-rewrite-percentage",
    "auto-aof-rewrite-min-size",
    "aof-load-truncated",
    "maxmemory",
    "maxmemory-policy",
    "maxmemory-samples",
    "lfu-log-factor",
    "lfu-decay-time",
    "slowlog-log-slower-than",
    "slowlog-max-len",
    "loglevel",
    "proto-max-bulk-len",
    "client-output-buffer-limit",
    "client-query-buffer-limit",
    "latency-monitor-threshold",
];

/// Options redis-server 7.0 protects from CONFIG SET (`enable-protected-configs`).
pub const PROTECTED: &[&str] = &["dir", "dbfilename"];

/// Options set only at start-up (CONFIG SET answers that they are immutable).
pub const FIXED: &[&str] = &[
    "bind",
    "port",
    "threads",
    "appendonly",
    "appenddirname",
    "appendfilename",
    "databases",
    "logfile",
    "enable-debug-command",
];

/// Sets one option, as a configuration file's line would (CONFIG SET).
///
/// # Errors
/// The reason the value is refused.
pub fn set_option(config: &mut Config, name: &str, value: &str) -> Result<(), String> {
    set(config, name, &[value.to_string()])
}

/// Parses the arguments (without the program name): an optional configuration file first,
/// then `--name value` options.
///
/// # Errors
/// A message naming the bad option or value (and, for the file, where it is).
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Cli, String> {
    let mut config = Config::default();
    let args: Vec<String> = args.into_iter().collect();
    let mut rest = &args[..];
    if let Some(first) = args.first()
        && !first.starts_with('-')
    {
        let path = Path::new(first);
        let mut reader = FileReader::default();
        reader.read(&mut config, path, 0)?;
        config.file = Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()));
        rest = &args[1..];
    }
    let mut args = rest.iter();
    while let Some(arg) = args.next() {
        let name = arg.as_str();
        match name {
            "-h" | "--help" => return Ok(Cli::Help),
            "-v" | "--version" => return Ok(Cli::Version),
            _ => {}
        }
        let Some(option) = name.strip_prefix("--") else {
            return Err(format!("unknown option {name} (see --help)"));
        };
        let value = args
            .next()
            .ok_or_else(|| format!("missing value for {name}"))?;
        set(&mut config, option, std::slice::from_ref(value))
            .map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(Cli::Run(Box::new(config)))
}

/// Reads configuration files (`include` nests them).
#[derive(Debug, Default)]
struct FileReader {
    /// A `save` line was read: the next ones add rules rather than replace the defaults.
    saw_save: bool,
}

impl FileReader {
    fn read(&mut self, config: &mut Config, path: &Path, depth: usize) -> Result<(), String> {
        let text = std::fs::read(path).map_err(|e| {
            format!(
                "Fatal error, can't open config file '{}': {e}",
                path.display()
            )
        })?;
        for (n, line) in text.split(|&b| b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let trimmed = line.trim_ascii();
            if trimmed.is_empty() || trimmed.starts_with(b"#") {
                continue;
            }
            let fail = |reason: &str| {
                format!(
                    "\n*** FATAL CONFIG FILE ERROR (Redis {}) ***\nReading the configuration \
                     file '{}', at line {}\n>>> '{}'\n{reason}",
                    crate::runtime::server::REDIS_VERSION,
                    path.display(),
                    n + 1,
                    String::from_utf8_lossy(trimmed)
                )
            };
            let words = goblin_protocol::split_args(trimmed)
                .ok_or_else(|| fail("Unbalanced quotes in configuration line"))?;
            let words: Vec<String> = words
                .into_iter()
                .map(|w| String::from_utf8(w).map_err(|_| fail("Not UTF-8")))
                .collect::<Result<_, _>>()?;
            let Some((name, values)) = words.split_first() else {
                continue;
            };
            let name = name.to_ascii_lowercase();
            if name == "include" {
                let [file] = values else {
                    return Err(fail("Bad directive or wrong number of arguments"));
                };
                if depth >= 16 {
                    return Err(fail("Too many nested includes"));
                }
                self.read(config, Path::new(file), depth + 1)?;
                continue;
            }
            if name == "save" && self.saw_save {
                let more = parse_save(&values.join(" ")).map_err(|e| fail(&e))?;
                if more.is_empty() {
                    config.persist.save.clear();
                }
                config.persist.save.extend(more);
                continue;
            }
            self.saw_save |= name == "save";
            set(config, &name, values).map_err(|e| fail(&e))?;
        }
        Ok(())
    }
}

/// Sets option `name` (without dashes) to `values`: one value for most; `save` takes its
/// rules as pairs, in one value or several; `bind` its addresses (Goblin listens on the
/// first).
fn set(config: &mut Config, name: &str, values: &[String]) -> Result<(), String> {
    let one = || match values {
        [value] => Ok(value.as_str()),
        _ => Err("Bad directive or wrong number of arguments".to_string()),
    };
    match name {
        "save" => config.persist.save = parse_save(&values.join(" "))?,
        "bind" => {
            let first = values
                .first()
                .ok_or("Bad directive or wrong number of arguments")?;
            // redis.conf's `-` prefix marks an address that may be missing.
            let addr = first.strip_prefix('-').unwrap_or(first);
            config.bind = parse_num(addr)?;
        }
        "port" => config.port = parse_num(one()?)?,
        "threads" => {
            config.threads = parse_num(one()?)?;
            if config.threads > MAX_THREADS {
                return Err(format!("threads must be at most {MAX_THREADS}"));
            }
        }
        "proto-max-bulk-len" => {
            config.limits.max_bulk_len = parse_size_ranged(one()?, 1 << 20)? as usize;
        }
        "client-query-buffer-limit" => {
            config.query_buffer_limit = parse_size_ranged(one()?, 1 << 20)?;
        }
        "client-output-buffer-limit" => config.output_limits.set(&values.join(" "))?,
        "enable-debug-command" => {
            config.enable_debug_command = match one()?.to_ascii_lowercase().as_str() {
                "no" => Allow::No,
                "yes" => Allow::Yes,
                "local" => Allow::Local,
                _ => return Err("argument(s) must be one of the following: no, yes, local".into()),
            };
        }
        "latency-monitor-threshold" => {
            config.latency_monitor_threshold = parse_ranged(one()?, 0, i64::MAX)? as u64;
        }
        "dir" => config.persist.dir = one()?.into(),
        "dbfilename" => {
            let value = one()?;
            if value.is_empty() || value.contains('/') {
                return Err(format!("invalid dbfilename '{value}'"));
            }
            config.persist.dbfilename = value.into();
        }
        "loadrdb" => config.persist.loadrdb = Some(one()?.into()),
        "maxclients" => {
            config.maxclients = parse_ranged(one()?, 1, i64::from(u32::MAX))? as usize;
        }
        "timeout" => config.timeout = parse_ranged(one()?, 0, INT_MAX)? as u64,
        "tcp-keepalive" => config.tcp_keepalive = parse_ranged(one()?, 0, INT_MAX)? as u64,
        "protected-mode" => config.protected_mode = parse_bool(one()?)?,
        "maxmemory" => config.memory.maxmemory = parse_size(one()?)?,
        "maxmemory-policy" => config.memory.policy = crate::memory::Policy::parse(one()?)?,
        "maxmemory-samples" => config.memory.samples = parse_ranged(one()?, 1, INT_MAX)? as u32,
        "lfu-log-factor" => config.memory.lfu_log_factor = parse_ranged(one()?, 0, INT_MAX)? as u32,
        "lfu-decay-time" => config.memory.lfu_decay_time = parse_ranged(one()?, 0, INT_MAX)? as u32,
        "slowlog-log-slower-than" => {
            config.slowlog_slower_than = parse_ranged(one()?, -1, i64::MAX)?;
        }
        "slowlog-max-len" => config.slowlog_max_len = parse_ranged(one()?, 0, i64::MAX)? as u64,
        "loglevel" => config.loglevel = crate::log::Level::parse(one()?)?,
        "logfile" => {
            let value = one()?;
            config.logfile = (!value.is_empty()).then(|| PathBuf::from(value));
        }
        "databases" => {
            config.databases = parse_ranged(one()?, 1, i64::from(MAX_DATABASES))? as usize;
        }
        "rename-command" => match values {
            [old, new] => config.renames.push((old.clone(), new.clone())),
            _ => return Err("Bad directive or wrong number of arguments".into()),
        },
        "requirepass" => {
            let value = one()?;
            config.requirepass = (!value.is_empty()).then(|| value.as_bytes().to_vec());
        }
        "appendonly" => config.persist.appendonly = parse_bool(one()?)?,
        "appendfsync" => {
            let value = one()?;
            config.persist.appendfsync = match value.to_ascii_lowercase().as_str() {
                "always" => Fsync::Always,
                "everysec" => Fsync::Everysec,
                "no" => Fsync::No,
                _ => {
                    return Err(
                        "argument(s) must be one of the following: everysec, always, no".into(),
                    );
                }
            }
        }
        "appenddirname" | "appendfilename" => {
            let value = one()?;
            if value.is_empty() || value.contains('/') {
                return Err(format!("invalid value for {name}: '{value}'"));
            }
            if name == "appenddirname" {
                config.persist.appenddirname = value.into();
            } else {
                config.persist.appendfilename = value.into();
            }
        }
        "aof-load-truncated" => config.persist.aof_load_truncated = parse_bool(one()?)?,
        "stop-writes-on-bgsave-error" => {
            config.persist.stop_writes_on_bgsave_error = parse_bool(one()?)?;
        }
        "auto-aof-rewrite-percentage" => {
            config.persist.auto_aof_rewrite_percentage = parse_ranged(one()?, 0, INT_MAX)? as u64;
        }
        "auto-aof-rewrite-min-size" => {
            config.persist.auto_aof_rewrite_min_size = parse_size(one()?)?;
        }
        _ => return Err("Bad directive or wrong number of arguments".into()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_options() {
        let Ok(Cli::Run(c)) = parse(args("--port 7000 --bind 0.0.0.0 --threads 4")) else {
            panic!("expected a config");
        };
        assert_eq!((c.port, c.threads), (7000, 4));
        assert_eq!(c.bind, IpAddr::from([0, 0, 0, 0]));
    }

    #[test]
    fn rejects_bad_input() {
        assert!(parse(args("--port")).is_err());
        assert!(parse(args("--port x")).is_err());
        assert!(parse(args("--nope 1")).is_err());
        assert!(parse(args("--threads 1025")).is_err());
        assert!(parse(args("--threads 99999999999999")).is_err());
        assert!(matches!(parse(args("--help")), Ok(Cli::Help)));
        assert!(parse(args("--appendfsync sometimes")).is_err());
        assert!(parse(args("--save 3600")).is_err());
        assert!(parse(args("--appendonly maybe")).is_err());
    }

    /// A file in a fresh temporary directory.
    fn conf(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("goblin-conf-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("goblin.conf");
        std::fs::write(&path, text).expect("write");
        path
    }

    #[test]
    fn reads_a_configuration_file_and_the_command_line_wins() {
        let inc = conf("inc", "appendfsync always\n");
        let path = conf(
            "main",
            &format!(
                "# a comment\n\nport 7001\r\nbind -127.0.0.1 ::1\nsave 900 1\nsave 60 10000\n\
                 appendonly yes\ndir \"/tmp/with space\"\ninclude {}\nthreads 3\n",
                inc.display()
            ),
        );
        let mut argv = vec![path.display().to_string()];
        argv.extend(args("--threads 2"));
        let Ok(Cli::Run(c)) = parse(argv) else {
            panic!("expected a config");
        };
        assert_eq!((c.port, c.threads), (7001, 2));
        assert_eq!(c.bind, IpAddr::from([127, 0, 0, 1]));
        assert_eq!(c.persist.save, vec![(900, 1), (60, 10_000)]);
        assert!(c.persist.appendonly);
        assert_eq!(c.persist.appendfsync, Fsync::Always);
        assert_eq!(c.persist.dir, PathBuf::from("/tmp/with space"));
        assert!(c.file.is_some());
    }

    #[test]
    fn a_bad_line_stops_the_start_naming_the_file_and_line() {
        for (text, line, reason) in [
            (
                "port 1\nnosuch yes\n",
                2,
                "Bad directive or wrong number of arguments",
            ),
            ("appendonly maybe\n", 1, "argument must be 'yes' or 'no'"),
            ("port\n", 1, "Bad directive or wrong number of arguments"),
            ("dir \"unbalanced\n", 1, "Unbalanced quotes"),
            ("save 900\n", 1, "Invalid save parameters"),
        ] {
            let path = conf("bad", text);
            let Err(e) = parse(vec![path.display().to_string()]) else {
                panic!("{text:?} was accepted");
            };
            assert!(
                e.contains("*** FATAL CONFIG FILE ERROR")
                    && e.contains(&format!("'{}', at line {line}", path.display()))
                    && e.contains(reason),
                "{text:?}: {e}"
            );
        }
        assert!(parse(vec!["/nonexistent/goblin.conf".into()]).is_err());
    }

    #[test]
    fn parses_persistence_options() {
        let Ok(Cli::Run(c)) = parse(args(
            "--appendonly yes --appendfsync always --dir /tmp/g --auto-aof-rewrite-min-size 1mb",
        )) else {
            panic!("expected a config");
        };
        let p = &c.persist;
        assert!(p.appendonly);
        assert_eq!(p.appendfsync, Fsync::Always);
        assert_eq!(p.aof_dir(), PathBuf::from("/tmp/g/appendonlydir"));
        assert_eq!(p.auto_aof_rewrite_min_size, 1 << 20);
        assert_eq!(p.save_text(), "3600 1 300 100 60 10000");
        let Ok(Cli::Run(c)) = parse(vec!["--save".to_string(), String::new()]) else {
            panic!("expected a config");
        };
        assert!(c.persist.save.is_empty());
    }
}
