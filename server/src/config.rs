//! Command-line configuration.
//!
//! Options are given redis-server style, `--name value`; `--help` lists them.

pub mod inert;

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use goblin_protocol::Limits;

use crate::util::repr;

/// The server's configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// The addresses to listen on (at least one, at most [`BIND_MAX`]).
    pub bind: Vec<BindAddr>,
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
    /// `user name rule …` (configuration file only): the users to create at start, each
    /// its name and rules (as ACL SETUSER's).
    pub users: Vec<Vec<String>>,
    /// `aclfile`: the file users are loaded from at start, and ACL LOAD and ACL SAVE
    /// read and write.
    pub aclfile: Option<PathBuf>,
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
    /// `logfile` (`None`: standard output).
    pub logfile: Option<PathBuf>,
    /// `client-output-buffer-limit`, per client class.
    pub output_limits: OutputLimits,
    /// `client-query-buffer-limit`: a client whose unprocessed input grows past it is
    /// closed.
    pub query_buffer_limit: u64,
    /// `latency-monitor-threshold`, milliseconds (0: the latency monitor is off).
    pub latency_monitor_threshold: u64,
    /// `acl-pubsub-default`: new users (and `reset`) may use every channel
    /// (`allchannels`), or none (`resetchannels`, the default).
    pub acl_pubsub_all: bool,
    /// `acllog-max-len`: how many entries ACL LOG keeps.
    pub acllog_max_len: u64,
    /// `notify-keyspace-events`, as flags (`shard/notify.rs`; 0: off).
    pub notify_keyspace_events: u32,
    /// `enable-debug-command`: who may run DEBUG.
    pub enable_debug_command: Allow,
    /// `enable-module-command`: who may run MODULE LOAD and UNLOAD (which load nothing:
    /// Goblin has no modules).
    pub enable_module_command: Allow,
    /// `enable-protected-configs`: who may CONFIG SET `dir` and `dbfilename`.
    pub enable_protected_configs: Allow,
    /// Redis Cluster mode (`cluster-enabled`, `cluster-config-file`, …: `cluster/`).
    pub cluster: ClusterConfig,
    /// `hz`: accepted and shown as redis-server does; Goblin's timers (expiry, timeouts,
    /// the cron) do not depend on it.
    pub hz: u64,
    /// `hll-sparse-max-bytes`: a sparse HyperLogLog that would grow past it turns dense.
    pub hll_sparse_max_bytes: u64,
    /// `tracking-table-max-keys`: CLIENT TRACKING remembers at most this many keys (0: no
    /// limit); past it, keys are forgotten, their readers invalidated.
    pub tracking_table_max_keys: u64,
    /// `busy-reply-threshold` (alias `lua-time-limit`), milliseconds: past it, a
    /// running script makes the other clients of its thread wait with `BUSY`, and may
    /// be killed (0: never).
    pub busy_reply_threshold: u64,
    /// `lazyfree-lazy-eviction`, `-expire`, `-server-del`, `-user-del`, `-user-flush` (in
    /// [`LAZYFREE`]'s order): accepted, shown and rewritten as redis-server does; Goblin
    /// frees a value of many elements in the background whatever they say
    /// (`goblin_store::lazyfree`).
    pub lazyfree: [bool; 5],
    /// Redis's options Goblin keeps but does not act on ([`inert::INERT`]'s order).
    pub inert: Vec<String>,
    /// `lua-allow-undeclared-keys` (Goblin's): scripts may touch keys they do not
    /// declare, running with every shard locked.
    pub lua_allow_undeclared_keys: bool,
}

/// Most addresses `bind` takes (redis-server's `CONFIG_BINDADDR_MAX`).
pub const BIND_MAX: usize = 16;

/// One of `bind`'s addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindAddr {
    /// The word as given, with its `-` mark (what CONFIG GET shows and CONFIG REWRITE
    /// writes back).
    pub word: String,
    /// The address (`*` is IPv4's any address, `::*` IPv6's).
    pub ip: IpAddr,
    /// Marked `-`: skipped when the system does not have it (no such address, or no
    /// IPv6), as redis-server skips it.
    pub optional: bool,
}

impl BindAddr {
    /// One word of `bind`, as redis.conf writes it (`127.0.0.1`, `-::1`, `*`, `::*`).
    fn parse(word: &str) -> Option<BindAddr> {
        let (optional, addr) = match word.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, word),
        };
        let ip = match addr {
            "*" => IpAddr::from([0, 0, 0, 0]),
            "::*" => IpAddr::from([0u16; 8]),
            _ => addr.parse().ok()?,
        };
        Some(BindAddr {
            word: word.to_string(),
            ip,
            optional,
        })
    }
}

impl Config {
    /// `bind`'s words, as given.
    pub fn bind_words(&self) -> Vec<&str> {
        self.bind.iter().map(|a| a.word.as_str()).collect()
    }

    /// `bind` as CONFIG GET shows it: its words, with a space between.
    pub fn bind_text(&self) -> String {
        self.bind_words().join(" ")
    }
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
    /// Whether a client (`local`: on the loopback interface or the Unix socket) may run
    /// what this setting guards, as redis-server's `allowProtectedAction`.
    pub fn permits(self, local: bool) -> bool {
        match self {
            Allow::Yes => true,
            Allow::No => false,
            Allow::Local => local,
        }
    }

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
            // redis-server's default: every address, IPv6's if the machine has it.
            bind: ["*", "-::*"]
                .into_iter()
                .filter_map(BindAddr::parse)
                .collect(),
            port: 6379,
            threads: 0,
            limits: Limits::default(),
            persist: PersistConfig::default(),
            file: None,
            requirepass: None,
            users: Vec::new(),
            aclfile: None,
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
            acl_pubsub_all: false,
            acllog_max_len: 128,
            notify_keyspace_events: 0,
            enable_debug_command: Allow::No,
            enable_module_command: Allow::No,
            enable_protected_configs: Allow::No,
            cluster: ClusterConfig::default(),
            hz: 10,
            hll_sparse_max_bytes: 3000,
            tracking_table_max_keys: 1_000_000,
            busy_reply_threshold: 5000,
            lua_allow_undeclared_keys: false,
            lazyfree: [false; 5],
            inert: inert::defaults(),
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
file's, and win: as with redis-server, `--name` begins an option and the arguments up to
the next `--name` are its values (`--save 900 1 300 10`), and `--name value` may be one
argument. An unknown or invalid option stops the start, naming the file and line.

Options:
  --bind ADDR...            addresses to listen on (default `* -::*`, every address, as
                            redis-server; `*` and `::*` for any; a `-` prefix: skipped
                            when the machine lacks it)
  --port PORT               TCP port (default 6379; 0 picks a free port)
  --threads N               shard threads, one pinned per core, at most 1024 (default:
                            the cores this process may use)
  --proto-max-bulk-len SIZE largest bulk argument in bytes (default 512mb, at least 1mb)
  --requirepass PASSWORD    clients must AUTH with it (default: none; '' for none)
  --aclfile PATH            users loaded at start and by ACL LOAD, saved by ACL SAVE
                            (default: none)
  --maxclients N            connections beyond N get an error and are closed (default
                            10000)
  --timeout SECONDS         close clients idle this long (default 0: never)
  --tcp-keepalive SECONDS   TCP keepalive probes this often (default 300; 0: none)
  --protected-mode yes|no   without a password, serve loopback clients only (default yes)
  --databases N             databases, SELECT 0 to N-1 (default 16)
  --loglevel LEVEL          debug, verbose, notice (default) or warning
  --logfile FILE            append the log to FILE (default '': standard output)
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
  --enable-module-command no|yes|local
                            who may run MODULE LOAD and UNLOAD (Goblin loads no module:
                            where allowed, they fail as a missing module does)
  --enable-protected-configs no|yes|local
                            who may CONFIG SET dir and dbfilename
  --latency-monitor-threshold MILLISECONDS
                            LATENCY records events at least this slow (default 0: off)
  --notify-keyspace-events CLASSES
                            keyspace notifications: K, E and the classes of
                            'Ag$lshzxetdmn', as redis-server (default '': off)
  --client-output-buffer-limit 'CLASS HARD SOFT SECONDS ...'
                            close a client whose pending replies pass HARD bytes, or SOFT
                            for SECONDS on end; CLASS normal, replica or pubsub (default
                            'normal 0 0 0 slave 256mb 64mb 60 pubsub 32mb 8mb 60'; 0: none)
  --client-query-buffer-limit SIZE
                            close a client whose unprocessed input passes SIZE (default
                            1gb, at least 1mb)
  --hll-sparse-max-bytes SIZE
                            a sparse HyperLogLog that would grow past SIZE turns dense
                            (default 3000)
  --tracking-table-max-keys N
                            CLIENT TRACKING remembers at most N keys read (default
                            1000000, 0 for no limit)
  --busy-reply-threshold MS (alias --lua-time-limit)
                            a script running longer makes other clients wait with BUSY
                            and can be killed with SCRIPT KILL (default 5000; 0: never)
  --lua-allow-undeclared-keys yes|no
                            let scripts touch keys they do not pass in KEYS: such
                            scripts run with every shard locked (default no)
  --lazyfree-lazy-eviction, -expire, -server-del, -user-del, -user-flush yes|no
                            accepted as redis-server's; Goblin frees values of many
                            elements in the background whatever they say
  (configuration file only) rename-command OLD NEW: OLD is reachable as NEW only; NEW ''
                            removes it
  (configuration file only) user NAME RULE ...: a user, as ACL SETUSER NAME RULE ...
                            makes it (a line per user)

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
    "acl-pubsub-default",
    "acllog-max-len",
    "notify-keyspace-events",
    "appendonly",
    "port",
    "bind",
    "hz",
    "hll-sparse-max-bytes",
    "tracking-table-max-keys",
    "busy-reply-threshold",
    "lua-allow-undeclared-keys",
    "lazyfree-lazy-eviction",
    "lazyfree-lazy-expire",
    "lazyfree-lazy-server-del",
    "lazyfree-lazy-user-del",
    "lazyfree-lazy-user-flush",
    "cluster-node-timeout",
    "cluster-require-full-coverage",
    "cluster-allow-reads-when-down",
];

/// The `lazyfree-lazy-*` options, in [`Config::lazyfree`]'s order.
pub const LAZYFREE: [&str; 5] = [
    "lazyfree-lazy-eviction",
    "lazyfree-lazy-expire",
    "lazyfree-lazy-server-del",
    "lazyfree-lazy-user-del",
    "lazyfree-lazy-user-flush",
];

/// Other names CONFIG SET knows options by (redis-server's aliases).
pub const ALIASES: &[(&str, &str)] = &[("lua-time-limit", "busy-reply-threshold")];

/// Parameters CONFIG GET shows for tools that read them, which Goblin does not let change:
/// CONFIG SET answers that they are immutable (as redis-server answers for `io-threads`).
pub const SHOWN: &[&str] = &["io-threads"];

/// Options redis-server 7.0 protects from CONFIG SET (`enable-protected-configs`).
pub const PROTECTED: &[&str] = &["dir", "dbfilename"];

/// Options CONFIG SET refuses while the dataset loads (redis-server's
/// `DENY_LOADING_CONFIG`).
pub const DENY_LOADING: &[&str] = &["dir", "appendonly", "repl-diskless-load"];

/// Options set only at start-up (CONFIG SET answers that they are immutable).
pub const FIXED: &[&str] = &[
    "threads",
    "aclfile",
    "appenddirname",
    "appendfilename",
    "databases",
    "logfile",
    "enable-debug-command",
    "enable-module-command",
    "enable-protected-configs",
    "cluster-enabled",
    "cluster-config-file",
    "cluster-port",
];

/// Redis Cluster's options (`cluster/`).
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// `cluster-enabled`: the node speaks Redis Cluster's protocol (fixed at start-up).
    pub enabled: bool,
    /// `cluster-config-file`: where the node keeps its view of the cluster (relative to
    /// `dir`).
    pub config_file: String,
    /// `cluster-node-timeout`, milliseconds: a node silent this long is suspected.
    pub node_timeout: u64,
    /// `cluster-port`: the cluster bus's port (0: the client port + 10000).
    pub port: u16,
    /// `cluster-require-full-coverage`: keys are refused while any slot is unserved.
    pub require_full_coverage: bool,
    /// `cluster-allow-reads-when-down`: reads are served while the cluster is down.
    pub allow_reads_when_down: bool,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            enabled: false,
            config_file: "nodes.conf".into(),
            node_timeout: 15_000,
            port: 0,
            require_full_coverage: true,
            allow_reads_when_down: false,
        }
    }
}

/// `no`, `yes` or `local` (`enable-debug-command`, `enable-module-command`).
fn parse_allow(value: &str) -> Result<Allow, String> {
    match value.to_ascii_lowercase().as_str() {
        "no" => Ok(Allow::No),
        "yes" => Ok(Allow::Yes),
        "local" => Ok(Allow::Local),
        _ => Err("argument(s) must be one of the following: no, yes, local".into()),
    }
}

/// Sets one option, as a configuration file's line would (CONFIG SET).
///
/// # Errors
/// The reason the value is refused.
pub fn set_option(config: &mut Config, name: &str, value: &str) -> Result<(), String> {
    set(config, name, &[value.to_string()])
}

/// Parses the arguments (without the program name) as redis-server does: an optional
/// configuration file first, then options, read as configuration lines after the file's
/// ([`options_text`]).
///
/// # Errors
/// A message naming the bad option or value (and, for the file, where it is).
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Cli, String> {
    let mut config = Config::default();
    let args: Vec<String> = args.into_iter().collect();
    match args.first().map(String::as_str) {
        Some("-h" | "--help") => return Ok(Cli::Help),
        Some("-v" | "--version") => return Ok(Cli::Version),
        _ => {}
    }
    let mut rest = &args[..];
    let mut reader = FileReader::default();
    if let Some(first) = args.first()
        && !first.starts_with('-')
    {
        let path = Path::new(first);
        reader.read(&mut config, path, 0)?;
        config.file = Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()));
        rest = &args[1..];
    }
    reader.read_text(&mut config, options_text(rest).as_bytes(), None, 0)?;
    Ok(Cli::Run(Box::new(config)))
}

/// The options of a command line as configuration lines, as redis-server's `main` makes
/// them: each `--name` begins a line and the arguments after it are its values, quoted
/// (so that spaces and quotes in them stay); a `--name value` given as one argument is
/// split as a configuration line is, and the argument after it begins a line even without
/// `--`; `--save` with no value (last, or before another option) is `save ""`.
fn options_text(args: &[String]) -> String {
    let mut text = String::new();
    // The last option has a value (or is one argument with its values).
    let mut has_value = true;
    for (i, arg) in args.iter().enumerate() {
        match arg.strip_prefix("--") {
            Some(option) if has_value => {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(option);
                text.push(' ');
                // (Unbalanced quotes count as several words, as in redis-server.)
                let words = goblin_protocol::split_args(arg.as_bytes()).map_or(0, |w| w.len());
                has_value = words != 1;
                if words == 1 && arg.eq_ignore_ascii_case("--save") {
                    let next_is_option = args.get(i + 1).is_some_and(|a| a.starts_with("--"));
                    if next_is_option || i + 1 == args.len() {
                        text.push_str("\"\"");
                        has_value = true;
                    }
                }
            }
            _ => {
                quote_into(&mut text, arg);
                text.push(' ');
                has_value = true;
            }
        }
    }
    text
}

/// `value` quoted as redis-server's `sdscatrepr` quotes it, for a configuration line.
fn quote_into(text: &mut String, value: &str) {
    text.push('"');
    for b in value.bytes() {
        match b {
            b'\\' => text.push_str("\\\\"),
            b'"' => text.push_str("\\\""),
            b'\n' => text.push_str("\\n"),
            b'\r' => text.push_str("\\r"),
            b'\t' => text.push_str("\\t"),
            0x07 => text.push_str("\\a"),
            0x08 => text.push_str("\\b"),
            b if b.is_ascii_graphic() || b == b' ' => text.push(char::from(b)),
            b => text.push_str(&format!("\\x{b:02x}")),
        }
    }
    text.push('"');
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
        self.read_text(config, &text, Some(path), depth)
    }

    /// Reads configuration lines: a file's (`path`) or the command line's.
    fn read_text(
        &mut self,
        config: &mut Config,
        text: &[u8],
        path: Option<&Path>,
        depth: usize,
    ) -> Result<(), String> {
        let source = path.map_or(String::new(), |p| format!(" '{}'", p.display()));
        for (n, line) in text.split(|&b| b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let trimmed = line.trim_ascii();
            if trimmed.is_empty() || trimmed.starts_with(b"#") {
                continue;
            }
            let fail = |reason: &str| {
                format!(
                    "\n*** FATAL CONFIG FILE ERROR (Redis {}) ***\nReading the configuration \
                     file{}, at line {}\n>>> '{}'\n{reason}",
                    crate::runtime::server::REDIS_VERSION,
                    source,
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
            // A file's line has its addresses as words; CONFIG SET's value, in one.
            let words: Vec<String> = values
                .iter()
                .flat_map(|v| v.split_whitespace())
                .map(String::from)
                .collect();
            // (`bind ""`: no address, no TCP, as redis-server.)
            if values.is_empty() {
                return Err("Bad directive or wrong number of arguments".into());
            }
            if words.len() > BIND_MAX {
                return Err("Too many bind addresses specified.".into());
            }
            config.bind = words
                .iter()
                .map(|w| BindAddr::parse(w))
                .collect::<Option<_>>()
                .ok_or("Failed to bind to specified addresses.")?;
        }
        "port" => config.port = parse_ranged(one()?, 0, 65535)? as u16,
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
        "enable-debug-command" => config.enable_debug_command = parse_allow(one()?)?,
        "enable-module-command" => config.enable_module_command = parse_allow(one()?)?,
        "enable-protected-configs" => config.enable_protected_configs = parse_allow(one()?)?,
        "cluster-enabled" => config.cluster.enabled = parse_bool(one()?)?,
        "cluster-config-file" => config.cluster.config_file = one()?.into(),
        "cluster-node-timeout" => {
            config.cluster.node_timeout = parse_ranged(one()?, 0, i64::MAX)? as u64;
        }
        "cluster-port" => config.cluster.port = parse_ranged(one()?, 0, 65535)? as u16,
        "cluster-require-full-coverage" => {
            config.cluster.require_full_coverage = parse_bool(one()?)?;
        }
        "cluster-allow-reads-when-down" => {
            config.cluster.allow_reads_when_down = parse_bool(one()?)?;
        }
        "hll-sparse-max-bytes" => config.hll_sparse_max_bytes = parse_size_ranged(one()?, 0)?,
        "tracking-table-max-keys" => {
            config.tracking_table_max_keys = parse_ranged(one()?, 0, i64::MAX)? as u64;
        }
        // Kept within 1..=500, as redis-server keeps it.
        "busy-reply-threshold" | "lua-time-limit" => {
            config.busy_reply_threshold = parse_ranged(one()?, 0, i64::MAX)? as u64
        }
        "lua-allow-undeclared-keys" => config.lua_allow_undeclared_keys = parse_bool(one()?)?,
        lazy if let Some(i) = LAZYFREE.iter().position(|n| *n == lazy) => {
            config.lazyfree[i] = parse_bool(one()?)?;
        }
        "hz" => config.hz = (parse_ranged(one()?, 0, INT_MAX)? as u64).clamp(1, 500),
        "acl-pubsub-default" => {
            config.acl_pubsub_all = match one()?.to_ascii_lowercase().as_str() {
                "allchannels" => true,
                "resetchannels" => false,
                _ => {
                    return Err(
                        "argument(s) must be one of the following: allchannels, resetchannels"
                            .into(),
                    );
                }
            };
        }
        "acllog-max-len" => config.acllog_max_len = parse_ranged(one()?, 0, i64::MAX)? as u64,
        "latency-monitor-threshold" => {
            config.latency_monitor_threshold = parse_ranged(one()?, 0, i64::MAX)? as u64;
        }
        "notify-keyspace-events" => {
            config.notify_keyspace_events = crate::shard::notify::parse_flags(one()?)
                .ok_or("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")?;
        }
        "dir" => config.persist.dir = one()?.into(),
        "dbfilename" => {
            let value = one()?;
            // (redis-server's `isValidDBfilename`; it takes an empty name, and then
            // cannot save.)
            if value.contains('/') {
                return Err("dbfilename can't be a path, just a filename".into());
            }
            if value.is_empty() {
                return Err("dbfilename can't be empty".into());
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
        "user" => match values {
            [] => return Err("Bad directive or wrong number of arguments".into()),
            [name, ..] if config.users.iter().any(|u| u.first() == Some(name)) => {
                // (`ACLAppendUserForLoading`'s refusal.)
                return Err(format!(
                    "Error in user declaration '{name}': Duplicate user found. A user can \
                     only be defined once in config files"
                ));
            }
            words => config.users.push(words.to_vec()),
        },
        "aclfile" => {
            let value = one()?;
            config.aclfile = (!value.is_empty()).then(|| PathBuf::from(value));
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
        kept if let Some(i) = inert::find(kept) => {
            // (An option of several words says itself what is wrong with them.)
            let several = matches!(inert::INERT[i].kind, inert::Kind::Flags(_))
                || inert::INERT[i].name == "replicaof";
            let value = inert::INERT[i].check(values).map_err(|e| {
                if values.len() == 1 || several {
                    e
                } else {
                    "Bad directive or wrong number of arguments".into()
                }
            })?;
            config.inert[i] = value;
        }
        _ => return Err("Bad directive or wrong number of arguments".into()),
    }
    Ok(())
}

/// `acl-pubsub-default`'s value.
pub fn pubsub_default_name(all: bool) -> &'static str {
    if all { "allchannels" } else { "resetchannels" }
}

// CONFIG REWRITE, as redis-server 7.0's `rewriteConfig` does it.

/// The comment written before the first option CONFIG REWRITE appends to a file (once:
/// not again when the file already has it).
const REWRITE_SIGNATURE: &[u8] = b"# Generated by CONFIG REWRITE";

/// Directives a configuration file may hold that CONFIG REWRITE leaves where they are, as
/// they are: `include` and `rename-command` (as redis-server does), and Goblin's
/// `loadrdb`, a start-up choice that is never written from the running server.
const KEPT_DIRECTIVES: &[&str] = &["include", "rename-command", "loadrdb"];

/// One option as CONFIG REWRITE writes it: its lines, each with whether it is written
/// where the file does not name the option (its value is not the default). No lines: the
/// file's lines naming it are dropped (`requirepass` without a password, `bind` at its
/// default).
struct Rewritten {
    name: &'static str,
    lines: Vec<(String, bool)>,
    /// Each line names a client class first (`client-output-buffer-limit normal …`) and
    /// takes the place of the file's line for the same class, if there is one.
    by_class: bool,
}

/// A memory value as redis-server writes one back: in `gb`, `mb` or `kb` when it is a whole
/// number of them, else in bytes.
fn format_memory(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "gb"), (1 << 20, "mb"), (1 << 10, "kb")];
    UNITS
        .iter()
        .find(|(size, _)| bytes != 0 && bytes.is_multiple_of(*size))
        .map_or_else(
            || bytes.to_string(),
            |(size, unit)| format!("{}{unit}", bytes / size),
        )
}

/// A boolean option's value as redis.conf writes it.
pub fn yes_no(on: bool) -> &'static str {
    if on { "yes" } else { "no" }
}

/// `name value`, written where the file lacks it only when the value is not `default`.
fn one(name: &'static str, value: String, default: String) -> Rewritten {
    let force = value != default;
    Rewritten {
        name,
        lines: vec![(format!("{name} {value}"), force)],
        by_class: false,
    }
}

/// Every option CONFIG REWRITE writes, in the order it appends them (redis.conf's), with
/// its lines for `c`. `dir` is `c`'s directory made absolute.
fn rewritten(c: &Config, dir: &Path) -> Vec<Rewritten> {
    let d = Config::default();
    // The same text of `c` and of the default.
    let both = |text: &dyn Fn(&Config) -> String| (text(c), text(&d));
    let opt = |name: &'static str, text: &dyn Fn(&Config) -> String| {
        let (value, default) = both(text);
        one(name, value, default)
    };
    let logfile = |c: &Config| {
        repr(
            c.logfile
                .as_deref()
                .map(|p| p.as_os_str().as_encoded_bytes())
                .unwrap_or_default(),
        )
    };
    // One line a class, each written when that class's limits are not the default.
    let limits = |l: &OutputLimits| {
        [
            ("normal", l.normal),
            ("replica", l.replica),
            ("pubsub", l.pubsub),
        ]
        .map(|(class, b)| {
            format!(
                "client-output-buffer-limit {class} {} {} {}",
                format_memory(b.hard),
                format_memory(b.soft),
                b.soft_seconds
            )
        })
    };
    let mut out = vec![
        // At its default, not written at all (its lines dropped), as in redis-server.
        Rewritten {
            name: "bind",
            lines: if c.bind == d.bind {
                Vec::new()
            } else {
                let words = if c.bind.is_empty() {
                    "\"\"".to_string()
                } else {
                    c.bind_text()
                };
                vec![(format!("bind {words}"), true)]
            },
            by_class: false,
        },
        opt("protected-mode", &|c| yes_no(c.protected_mode).into()),
        opt("port", &|c| c.port.to_string()),
        opt("timeout", &|c| c.timeout.to_string()),
        opt("tcp-keepalive", &|c| c.tcp_keepalive.to_string()),
        opt("loglevel", &|c| c.loglevel.name().into()),
        opt("logfile", &logfile),
        opt("databases", &|c| c.databases.to_string()),
        // Always written: one line a rule, or `save ""` for none (else the defaults would
        // come back).
        Rewritten {
            name: "save",
            lines: if c.persist.save.is_empty() {
                vec![("save \"\"".into(), true)]
            } else {
                c.persist
                    .save
                    .iter()
                    .map(|(secs, changes)| (format!("save {secs} {changes}"), true))
                    .collect()
            },
            by_class: false,
        },
        opt("stop-writes-on-bgsave-error", &|c| {
            yes_no(c.persist.stop_writes_on_bgsave_error).into()
        }),
        opt(LAZYFREE[0], &|c| yes_no(c.lazyfree[0]).into()),
        opt(LAZYFREE[1], &|c| yes_no(c.lazyfree[1]).into()),
        opt(LAZYFREE[2], &|c| yes_no(c.lazyfree[2]).into()),
        opt(LAZYFREE[3], &|c| yes_no(c.lazyfree[3]).into()),
        opt(LAZYFREE[4], &|c| yes_no(c.lazyfree[4]).into()),
        opt("dbfilename", &|c| repr(c.persist.dbfilename.as_bytes())),
        // Always written.
        Rewritten {
            name: "dir",
            lines: vec![(
                format!("dir {}", repr(dir.as_os_str().as_encoded_bytes())),
                true,
            )],
            by_class: false,
        },
        // Users: every one, as ACL LIST shows them (the caller puts the live ones in
        // `users`; none with an ACL file, which holds them).
        Rewritten {
            name: "user",
            lines: c
                .users
                .iter()
                .map(|words| (format!("user {}", words.join(" ")), true))
                .collect(),
            by_class: false,
        },
        Rewritten {
            name: "aclfile",
            lines: c
                .aclfile
                .iter()
                .map(|path| {
                    (
                        format!("aclfile {}", repr(path.to_string_lossy().as_bytes())),
                        true,
                    )
                })
                .collect(),
            by_class: false,
        },
        // No password: no line.
        Rewritten {
            name: "requirepass",
            lines: c
                .requirepass
                .iter()
                .map(|pw| (format!("requirepass {}", repr(pw)), true))
                .collect(),
            by_class: false,
        },
        opt("maxclients", &|c| c.maxclients.to_string()),
        opt("maxmemory", &|c| format_memory(c.memory.maxmemory)),
        opt("maxmemory-policy", &|c| c.memory.policy.name().into()),
        opt("maxmemory-samples", &|c| c.memory.samples.to_string()),
        opt("appendonly", &|c| yes_no(c.persist.appendonly).into()),
        opt("appendfilename", &|c| {
            repr(c.persist.appendfilename.as_bytes())
        }),
        opt("appenddirname", &|c| {
            repr(c.persist.appenddirname.as_bytes())
        }),
        opt("appendfsync", &|c| c.persist.appendfsync.name().into()),
        opt("auto-aof-rewrite-percentage", &|c| {
            c.persist.auto_aof_rewrite_percentage.to_string()
        }),
        opt("auto-aof-rewrite-min-size", &|c| {
            format_memory(c.persist.auto_aof_rewrite_min_size)
        }),
        opt("aof-load-truncated", &|c| {
            yes_no(c.persist.aof_load_truncated).into()
        }),
        opt("slowlog-log-slower-than", &|c| {
            c.slowlog_slower_than.to_string()
        }),
        opt("slowlog-max-len", &|c| c.slowlog_max_len.to_string()),
        opt("latency-monitor-threshold", &|c| {
            c.latency_monitor_threshold.to_string()
        }),
        opt("acl-pubsub-default", &|c| {
            pubsub_default_name(c.acl_pubsub_all).into()
        }),
        opt("acllog-max-len", &|c| c.acllog_max_len.to_string()),
        // Quoted, as redis-server's `sdscatrepr` writes it (`""` when off).
        opt("notify-keyspace-events", &|c| {
            repr(crate::shard::notify::flags_text(c.notify_keyspace_events).as_bytes())
        }),
        Rewritten {
            name: "client-output-buffer-limit",
            lines: limits(&c.output_limits)
                .into_iter()
                .zip(limits(&d.output_limits))
                .map(|(line, default)| {
                    let force = line != default;
                    (line, force)
                })
                .collect(),
            by_class: true,
        },
        opt("client-query-buffer-limit", &|c| {
            format_memory(c.query_buffer_limit)
        }),
        opt("proto-max-bulk-len", &|c| {
            format_memory(c.limits.max_bulk_len as u64)
        }),
        opt("lfu-log-factor", &|c| c.memory.lfu_log_factor.to_string()),
        opt("lfu-decay-time", &|c| c.memory.lfu_decay_time.to_string()),
        opt("enable-debug-command", &|c| {
            c.enable_debug_command.name().into()
        }),
        opt("enable-module-command", &|c| {
            c.enable_module_command.name().into()
        }),
        opt("enable-protected-configs", &|c| {
            c.enable_protected_configs.name().into()
        }),
        opt("cluster-enabled", &|c| yes_no(c.cluster.enabled).into()),
        opt("cluster-config-file", &|c| c.cluster.config_file.clone()),
        opt("cluster-node-timeout", &|c| {
            c.cluster.node_timeout.to_string()
        }),
        opt("cluster-port", &|c| c.cluster.port.to_string()),
        opt("cluster-require-full-coverage", &|c| {
            yes_no(c.cluster.require_full_coverage).into()
        }),
        opt("cluster-allow-reads-when-down", &|c| {
            yes_no(c.cluster.allow_reads_when_down).into()
        }),
        opt("hz", &|c| c.hz.to_string()),
        opt("hll-sparse-max-bytes", &|c| {
            format_memory(c.hll_sparse_max_bytes)
        }),
        opt("tracking-table-max-keys", &|c| {
            c.tracking_table_max_keys.to_string()
        }),
        opt("busy-reply-threshold", &|c| {
            c.busy_reply_threshold.to_string()
        }),
        opt("lua-allow-undeclared-keys", &|c| {
            yes_no(c.lua_allow_undeclared_keys).into()
        }),
        // Goblin's own.
        opt("threads", &|c| c.threads.to_string()),
    ];
    // Redis's options kept but not acted on: text quoted, memory with its unit.
    out.extend(inert::INERT.iter().zip(c.inert.iter().zip(&d.inert)).map(
        |(o, (value, default))| {
            if o.name == "replicaof" {
                // As redis-server: the master's address and port, two words; no line
                // for a master.
                let line = (!value.is_empty()).then(|| (format!("replicaof {value}"), true));
                return Rewritten {
                    name: o.name,
                    lines: line.into_iter().collect(),
                    by_class: false,
                };
            }
            let show = |v: &String| match o.kind {
                inert::Kind::Text => repr(v.as_bytes()),
                inert::Kind::Memory => v.parse().map_or_else(|_| v.clone(), format_memory),
                _ => v.clone(),
            };
            one(o.name, show(value), show(default))
        },
    ));
    out
}

/// A line as redis-server reads an old file's: without blanks, CR and LF at either end.
fn trim_line(line: &[u8]) -> &[u8] {
    let blank = |b: &u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    let start = line.iter().position(|b| !blank(b)).unwrap_or(line.len());
    let end = line
        .iter()
        .rposition(|b| !blank(b))
        .map_or(start, |i| i + 1);
    &line[start..end]
}

/// An option's lines in the old file: their indexes, and what their second word names (a
/// client class, `slave` read as `replica`).
type FileLines = std::collections::VecDeque<(usize, Option<String>)>;

/// CONFIG REWRITE's new text for the file whose text is `old` (empty when it is missing),
/// with `config`'s values (`dir`: its directory made absolute), as redis-server 7.0 does it:
/// comments, blank lines and the directives it does not rewrite stay where they are (a
/// line it cannot read, or of an option it does not know, becomes a `# ??? ` comment);
/// each option's lines in the file are replaced in order by its new lines, the ones left
/// over dropped; the new lines left over are appended, after a `# Generated by CONFIG
/// REWRITE` line, when the value is not the default; runs of blank lines become one.
fn rewrite_text(old: &[u8], config: &Config, dir: &Path, force_all: bool) -> Vec<u8> {
    let options = rewritten(config, dir);
    let mut lines: Vec<Vec<u8>> = Vec::new();
    // Per option named in the file, the indexes of its lines.
    // Per option named in the file, its lines (see [`FileLines`]).
    let mut named: Vec<(String, FileLines)> = Vec::new();
    let mut signed = false;
    // The file's last newline ends its last line. (redis-server reads one more, empty
    // line after it, which it writes back: each rewrite of a file that ends with a newline
    // would add a blank line at its end, once. Goblin writes that blank line only before
    // lines it appends, where redis-server's stands, so that a second rewrite leaves the
    // file as the first left it.)
    let (body, mut blank_at_end) = match old.strip_suffix(b"\n") {
        Some(body) => (body, true),
        None => (old, false),
    };
    // (An empty file has no lines.)
    let old_lines = (!old.is_empty()).then(|| body.split(|&b| b == b'\n'));
    for line in old_lines.into_iter().flatten().map(trim_line) {
        if line.is_empty() || line.starts_with(b"#") {
            signed |= line == REWRITE_SIGNATURE;
            lines.push(line.to_vec());
            continue;
        }
        let words = goblin_protocol::split_args(line).unwrap_or_default();
        let word = |i: usize| {
            words
                .get(i)
                .map(|w| String::from_utf8_lossy(w).to_ascii_lowercase())
        };
        let name = word(0).filter(|name| {
            options.iter().any(|o| o.name == name) || KEPT_DIRECTIVES.contains(&name.as_str())
        });
        let Some(name) = name else {
            lines.push([b"# ??? ", line].concat());
            continue;
        };
        let class = word(1).map(|w| if w == "slave" { "replica".into() } else { w });
        match named.iter_mut().find(|(n, _)| *n == name) {
            Some((_, at)) => at.push_back((lines.len(), class)),
            None => named.push((name, [(lines.len(), class)].into())),
        }
        lines.push(line.to_vec());
    }
    for option in options {
        let mut at = named
            .iter()
            .position(|(n, _)| n == option.name)
            .map(|i| named.swap_remove(i).1)
            .unwrap_or_default();
        // Where each new line goes: the file's line for its class, if it has one (Goblin's
        // choice: redis-server 7.0 reuses the option's lines in order whatever their
        // class, so that a file with some classes' lines only sees them move on the next
        // rewrite); else the option's next line in the file.
        let mut slots: Vec<Option<usize>> = vec![None; option.lines.len()];
        if option.by_class {
            for (slot, (line, _)) in slots.iter_mut().zip(&option.lines) {
                let class = line.split(' ').nth(1);
                if let Some(k) = at.iter().position(|(_, c)| c.as_deref() == class) {
                    *slot = at.remove(k).map(|(i, _)| i);
                }
            }
        }
        for (slot, (line, force)) in slots.into_iter().zip(option.lines) {
            if let Some(i) = slot.or_else(|| at.pop_front().map(|(i, _)| i)) {
                lines[i] = line.into_bytes();
            } else if force || force_all {
                if std::mem::take(&mut blank_at_end) {
                    lines.push(Vec::new());
                }
                if !signed {
                    lines.push(REWRITE_SIGNATURE.to_vec());
                    signed = true;
                }
                lines.push(line.into_bytes());
            }
        }
        // Lines of the option that its value no longer needs (duplicates, extra `save`s).
        for (i, _) in at {
            lines[i].clear();
        }
    }
    let mut text = Vec::new();
    let mut was_empty = false;
    for line in lines {
        if line.is_empty() && was_empty {
            continue;
        }
        was_empty = line.is_empty();
        text.extend_from_slice(&line);
        text.push(b'\n');
    }
    text
}

/// A directory made absolute, as `dir` is written (redis-server writes its working
/// directory, which `dir` changed to).
pub fn absolute_dir(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir)
        .or_else(|_| std::path::absolute(dir))
        .unwrap_or_else(|_| dir.to_path_buf())
}

/// A new file beside `path` named `path.XXXXXX` (six random letters or digits, as
/// `mkstemp` makes them), readable by all (less the umask), as redis-server makes its.
fn create_temp(path: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    use std::os::unix::fs::OpenOptionsExt as _;
    use std::time::{SystemTime, UNIX_EPOCH};
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut seed = nanos ^ (u64::from(std::process::id()) << 32) | 1;
    let mut last = std::io::Error::from(std::io::ErrorKind::AlreadyExists);
    for _ in 0..100 {
        let mut name = path.as_os_str().to_owned();
        name.push(".");
        for _ in 0..6 {
            // xorshift64
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            name.push(char::from(CHARS[(seed % CHARS.len() as u64) as usize]).to_string());
        }
        let tmp = PathBuf::from(name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)
        {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// Replaces the file at `path` with `content` at once: written to a temporary file in the
/// same directory, flushed to disk, then renamed over it (on failure the old file is as it
/// was, and the temporary one removed).
fn replace_file(path: &Path, content: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let (tmp, mut file) = create_temp(path)?;
    let written = file
        .write_all(content)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return written;
    }
    // The rename itself made durable (best effort: redis-server does not do it).
    if let Some(parent) = path.parent()
        && let Ok(dir) = std::fs::File::open(parent)
    {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// One CONFIG REWRITE at a time: two would each read the old file and race to replace it.
static REWRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// CONFIG REWRITE: the configuration file at `path` (the one the server started from)
/// rewritten with `config`'s values (see [`rewrite_text`]), replaced at once. A file that
/// is gone is written anew.
///
/// # Errors
/// The reason the file could not be read or replaced, as `strerror` words it (the old
/// file is then as it was).
pub fn rewrite_file(path: &Path, config: &Config, force_all: bool) -> Result<(), String> {
    let _one_at_a_time = REWRITING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let old = match std::fs::read(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(crate::util::strerror(&e)),
    };
    let text = rewrite_text(&old, config, &absolute_dir(&config.persist.dir), force_all);
    replace_file(path, &text).map_err(|e| crate::util::strerror(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn run(args: &[&str]) -> Config {
        match parse(args.iter().map(|a| a.to_string())) {
            Ok(Cli::Run(c)) => *c,
            other => panic!("expected a config from {args:?}, got {other:?}"),
        }
    }

    #[test]
    fn reads_the_command_line_as_redis_server_does() {
        // Several values; a name and its value in one argument (redis-server's tests).
        let c = run(&["--port", "7000", "--save", "900", "1", "300", "10"]);
        assert_eq!((c.port, c.persist.save.len()), (7000, 2));
        let c = run(&["--maxmemory 700mb", "--maxmemory-policy volatile-lru"]);
        assert_eq!(c.memory.maxmemory, 734_003_200);
        assert_eq!(c.memory.policy.name(), "volatile-lru");
        // "wrong usage that we support anyway": words after the file and before the
        // first option are a line, and quotes in a one-argument option are a line's.
        let file = std::env::temp_dir().join(format!("goblin-cli-{}.conf", std::process::id()));
        std::fs::write(&file, "port 7001\n").expect("a config file");
        let path = file.to_string_lossy().into_owned();
        let c = run(&[&path, "loglevel", "verbose", "--maxmemory '700mb'"]);
        let _ = std::fs::remove_file(&file);
        assert_eq!(c.port, 7001);
        assert_eq!(c.loglevel, crate::log::Level::Verbose);
        assert_eq!(c.memory.maxmemory, 734_003_200);
        // Values keep their spaces and quotes.
        let c = run(&["--requirepass", "a \"b\" c"]);
        assert_eq!(c.requirepass.as_deref(), Some(&b"a \"b\" c"[..]));
        // `--save` without a value, last or before another option: no rules.
        assert!(run(&["--save"]).persist.save.is_empty());
        let c = run(&["--save", "--port", "7002"]);
        assert_eq!((c.persist.save.len(), c.port), (0, 7002));
        // An empty value.
        assert_eq!(run(&["--requirepass", ""]).requirepass, None);
        let refused = |args: &[&str]| match parse(args.iter().map(|a| a.to_string())) {
            Err(e) => e,
            Ok(_) => panic!("{args:?} accepted"),
        };
        assert!(refused(&["--shutdown-on-sigint"]).ends_with(
            "argument(s) must be one of the following: default, save, nosave, now, force"
        ));
        assert!(
            refused(&["--shutdown-on-sigterm", "save", "nosave"])
                .ends_with("shutdown can't have both SAVE and NOSAVE flags")
        );
        assert!(parse(args("--port")).is_err());
        assert!(parse(args("--no-such-option 1")).is_err());
    }

    #[test]
    fn bind_defaults_to_every_address_as_redis_server() {
        let c = Config::default();
        assert_eq!(c.bind_words(), ["*", "-::*"]);
        assert_eq!(c.bind[0].ip, IpAddr::from([0, 0, 0, 0]));
        assert!(!c.bind[0].optional);
        assert_eq!(c.bind[1].ip, IpAddr::from([0u16; 8]));
        assert!(c.bind[1].optional);
        // At its default, CONFIG REWRITE writes no `bind` line.
        let text = rewrite_text(b"", &c, Path::new("/data"), false);
        assert!(!String::from_utf8_lossy(&text).contains("bind"));
    }

    #[test]
    fn replicaof_is_rewritten_as_two_words_or_not_at_all() {
        let c = run(&["--replicaof", "10.0.0.1", "6380"]);
        let text = rewrite_text(b"port 7000\n", &c, Path::new("/data"), false);
        assert!(
            String::from_utf8_lossy(&text).contains("\nreplicaof 10.0.0.1 6380\n"),
            "{}",
            String::from_utf8_lossy(&text)
        );
        // A master: the old file's line goes.
        let text = rewrite_text(&text, &Config::default(), Path::new("/data"), false);
        assert!(!String::from_utf8_lossy(&text).contains("replicaof"));
    }

    #[test]
    fn bind_takes_redis_words() {
        let c = run(&["--bind", "*", "-::*", "127.0.0.1", "::1"]);
        let want = [
            ("0.0.0.0", false),
            ("::", true),
            ("127.0.0.1", false),
            ("::1", false),
        ];
        let got: Vec<(String, bool)> = c
            .bind
            .iter()
            .map(|a| (a.ip.to_string(), a.optional))
            .collect();
        let want: Vec<(String, bool)> = want.iter().map(|(a, o)| (a.to_string(), *o)).collect();
        assert_eq!(got, want);
        assert_eq!(c.bind_words(), ["*", "-::*", "127.0.0.1", "::1"]);
        assert!(parse(args("--bind nonsense")).is_err());
        let many: Vec<String> = (0..17).map(|i| format!("127.0.0.{i}")).collect();
        let mut argv = vec!["--bind".to_string()];
        argv.extend(many);
        assert!(parse(argv).is_err());
    }

    #[test]
    fn parses_options() {
        let Ok(Cli::Run(c)) = parse(args("--port 7000 --bind 0.0.0.0 --threads 4")) else {
            panic!("expected a config");
        };
        assert_eq!((c.port, c.threads), (7000, 4));
        assert_eq!(c.bind[0].ip, IpAddr::from([0, 0, 0, 0]));
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
        assert_eq!(c.bind[0].ip, IpAddr::from([127, 0, 0, 1]));
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

#[cfg(test)]
mod rewrite_tests {
    use super::*;

    /// `Config::default()` with `options` set as a file's lines would set them.
    fn config_with(options: &[(&str, &[&str])]) -> Config {
        let mut c = Config::default();
        for (name, values) in options {
            let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
            set(&mut c, name, &values).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        c
    }

    fn rewrite(old: &str, c: &Config) -> String {
        let text = rewrite_text(old.as_bytes(), c, Path::new("/data/goblin"), false);
        String::from_utf8(text).expect("UTF-8")
    }

    /// Every option CONFIG SET or CONFIG GET knows is rewritten (a file line of one that is
    /// not would be commented out as unknown).
    #[test]
    fn every_option_is_rewritten() {
        let names: Vec<&str> = rewritten(&Config::default(), Path::new("/"))
            .iter()
            .map(|o| o.name)
            .collect();
        let kept = inert::INERT.iter().map(|o| &o.name);
        for name in SETTABLE.iter().chain(FIXED).chain(PROTECTED).chain(kept) {
            assert!(names.contains(name), "{name}");
        }
        // (And `user`, a directive of the file that no CONFIG command names.)
        assert!(names.contains(&"user"));
        assert_eq!(
            names.len(),
            SETTABLE.len() + FIXED.len() + PROTECTED.len() + inert::INERT.len() + 1
        );
    }

    #[test]
    fn memory_values_are_written_with_units_when_whole() {
        for (bytes, text) in [
            (0, "0"),
            (1000, "1000"),
            (1024, "1kb"),
            (1025, "1025"),
            (100 << 20, "100mb"),
            (512 << 20, "512mb"),
            (1 << 30, "1gb"),
            (3 << 30, "3gb"),
            ((1 << 30) + 1024, "1048577kb"),
        ] {
            assert_eq!(format_memory(bytes), text);
        }
    }

    #[test]
    fn strings_are_quoted_as_redis_quotes_them_and_read_back() {
        assert_eq!(repr(b""), "\"\"");
        assert_eq!(repr(b"dump.rdb"), "\"dump.rdb\"");
        assert_eq!(repr(b"a b\"c\\"), "\"a b\\\"c\\\\\"");
        assert_eq!(
            repr(b"\x01\t\n\r\x07\x08\xff'"),
            "\"\\x01\\t\\n\\r\\a\\b\\xff'\""
        );
        for value in [&b"a b\"c\\ d"[..], b"\x01\t\n\r\x07\x08\xfe#", b"", b"'q'"] {
            let line = format!("x {}", repr(value));
            let words = goblin_protocol::split_args(line.as_bytes()).expect("balanced");
            assert_eq!(words, vec![b"x".to_vec(), value.to_vec()], "{line}");
        }
    }

    /// The same file and values as an observed redis-server 7.0.15 rewrite (the options
    /// Goblin has): comments and kept directives in place, CR and indentation trimmed,
    /// the first line of each option replaced and its others blanked, runs of blank lines
    /// one, unknown and unreadable lines commented out, defaults in the file written,
    /// other defaults not, the rest appended after the signature.
    #[test]
    fn a_file_is_rewritten_in_place_as_redis_rewrites_it() {
        let old = "# top comment\r\n\
                   port 17501\r\n\
                   save 900 1\n\
                   \n\
                   save 300 10\n\
                   \x20 # indented comment\n\
                   timeout 0\n\
                   maxmemory 100mb\n\
                   include /tmp/inc.conf\n\
                   rename-command FLUSHALL wipe\n\
                   dbfilename \"dump.rdb\"\n\
                   loglevel notice\n\
                   protected-mode yes\n\
                   \t \n\
                   \n\
                   \n\
                   appendfsync everysec\n\
                   client-output-buffer-limit normal 0 0 0\n\
                   timeout 5\n\
                   nosuch 1\n\
                   \"unbalanced\n\
                   MAXMEMORY-POLICY allkeys-lru\n\
                   \"maxclients\" 100\n\
                   appendonly yes\n\
                   appendonly no\n";
        let c = config_with(&[
            ("port", &["17501"]),
            ("timeout", &["7"]),
            ("maxmemory", &["1000"]),
            ("maxclients", &["100"]),
            ("save", &["100 1 200 2 300 3"]),
            (
                "client-output-buffer-limit",
                &["pubsub 1mb 512kb 10 replica 0 0 0"],
            ),
            ("requirepass", &["a b\"c"]),
            ("proto-max-bulk-len", &["2gb"]),
            ("auto-aof-rewrite-min-size", &["1025"]),
            ("client-query-buffer-limit", &["3mb"]),
            ("slowlog-max-len", &["200"]),
        ]);
        let want = "# top comment\n\
                    port 17501\n\
                    save 100 1\n\
                    \n\
                    save 200 2\n\
                    # indented comment\n\
                    timeout 7\n\
                    maxmemory 1000\n\
                    include /tmp/inc.conf\n\
                    rename-command FLUSHALL wipe\n\
                    dbfilename \"dump.rdb\"\n\
                    loglevel notice\n\
                    protected-mode yes\n\
                    \n\
                    appendfsync everysec\n\
                    client-output-buffer-limit normal 0 0 0\n\
                    \n\
                    # ??? nosuch 1\n\
                    # ??? \"unbalanced\n\
                    maxmemory-policy noeviction\n\
                    maxclients 100\n\
                    appendonly no\n\
                    \n\
                    \n\
                    # Generated by CONFIG REWRITE\n\
                    save 300 3\n\
                    dir \"/data/goblin\"\n\
                    requirepass \"a b\\\"c\"\n\
                    auto-aof-rewrite-min-size 1025\n\
                    slowlog-max-len 200\n\
                    client-output-buffer-limit replica 0 0 0\n\
                    client-output-buffer-limit pubsub 1mb 512kb 10\n\
                    client-query-buffer-limit 3mb\n\
                    proto-max-bulk-len 2gb\n";
        // (The blank line before the signature is the one after the file's last newline;
        // runs of blank lines become one.)
        let want = want.replace("appendonly no\n\n\n", "appendonly no\n\n");
        let got = rewrite(old, &c);
        assert_eq!(got, want, "\n{got}");
        // Again: the same file.
        assert_eq!(rewrite(&got, &c), got);
    }

    #[test]
    fn without_a_file_only_what_differs_from_the_defaults_is_written() {
        let c = Config::default();
        assert_eq!(
            rewrite("", &c),
            "# Generated by CONFIG REWRITE\n\
             save 3600 1\n\
             save 300 100\n\
             save 60 10000\n\
             dir \"/data/goblin\"\n"
        );
        let c = config_with(&[
            ("save", &[""]),
            ("threads", &["3"]),
            ("bind", &["127.0.0.1", "-::1"]),
            ("logfile", &["/var/log/goblin.log"]),
            ("appendonly", &["yes"]),
            ("loadrdb", &["/tmp/seed.rdb"]),
            ("maxmemory-policy", &["allkeys-lfu"]),
            ("client-output-buffer-limit", &["normal 1gb 1mb 0"]),
        ]);
        assert_eq!(
            rewrite("port 7000\n", &c),
            "port 6379\n\
             \n\
             # Generated by CONFIG REWRITE\n\
             bind 127.0.0.1 -::1\n\
             logfile \"/var/log/goblin.log\"\n\
             save \"\"\n\
             dir \"/data/goblin\"\n\
             maxmemory-policy allkeys-lfu\n\
             appendonly yes\n\
             client-output-buffer-limit normal 1gb 1mb 0\n\
             threads 3\n"
        );
    }

    /// Values back at their defaults stay in the file where they were; `bind` at its
    /// default and `requirepass` without a password are dropped (as redis-server drops
    /// them); `loadrdb` lines stay as they are.
    #[test]
    fn defaults_in_the_file_are_written_in_place_and_some_lines_dropped() {
        let old = "bind 127.0.0.1\nrequirepass old\nlogfile /tmp/l\nthreads 4\n\
                   loadrdb /tmp/seed.rdb\nsave \"\"\nsave 10 1\ndir /elsewhere\n";
        let got = rewrite(old, &Config::default());
        assert_eq!(
            got,
            "\nlogfile \"\"\nthreads 0\nloadrdb /tmp/seed.rdb\nsave 3600 1\nsave 300 100\n\
             dir \"/data/goblin\"\n\
             \n\
             # Generated by CONFIG REWRITE\n\
             save 60 10000\n"
        );
        assert_eq!(rewrite(&got, &Config::default()), got);
        // A file that ends without a newline, and one of blank lines only.
        assert_eq!(
            rewrite("# c\nport 1", &Config::default()),
            "# c\nport 6379\n# Generated by CONFIG REWRITE\nsave 3600 1\nsave 300 100\n\
             save 60 10000\ndir \"/data/goblin\"\n"
        );
        let c = config_with(&[("save", &[""])]);
        assert_eq!(
            rewrite("\n\n\ndir x\nsave 1 1\n", &c),
            "\ndir \"/data/goblin\"\nsave \"\"\n"
        );
    }

    /// `client-output-buffer-limit`: a line per class not at its default, each in the
    /// place of the file's line for its class (redis.conf's three lines stay in order).
    #[test]
    fn output_buffer_limits_keep_their_class_lines() {
        let stock = "client-output-buffer-limit normal 0 0 0\n\
                     client-output-buffer-limit slave 256mb 64mb 60\n\
                     client-output-buffer-limit pubsub 32mb 8mb 60\n";
        let c = config_with(&[("client-output-buffer-limit", &["pubsub 1mb 0 0"])]);
        let dir = "dir \"/data/goblin\"\n";
        let save = "save 3600 1\nsave 300 100\nsave 60 10000\n";
        assert_eq!(
            rewrite(&format!("{save}{dir}{stock}"), &c),
            format!(
                "{save}{dir}client-output-buffer-limit normal 0 0 0\n\
                 client-output-buffer-limit replica 256mb 64mb 60\n\
                 client-output-buffer-limit pubsub 1mb 0 0\n"
            )
        );
        // Two classes' lines, the replica class at its default: both stay where they are
        // (redis-server would write the replica line in the pubsub line's place and the
        // pubsub line at the end).
        let c = config_with(&[(
            "client-output-buffer-limit",
            &["pubsub 0 0 0 normal 3mb 1kb 5"],
        )]);
        let two = format!(
            "{save}{dir}client-output-buffer-limit normal 3mb 1kb 5\n\
             client-output-buffer-limit pubsub 0 0 0\n"
        );
        assert_eq!(rewrite(&two, &c), two);
        // A class's line, its class now at the default and another one not: each where
        // its class's line is, or appended.
        let c = config_with(&[("client-output-buffer-limit", &["normal 1mb 0 0"])]);
        assert_eq!(
            rewrite(
                &format!("{save}{dir}client-output-buffer-limit pubsub 1mb 0 0\n"),
                &c
            ),
            format!(
                "{save}{dir}client-output-buffer-limit pubsub 32mb 8mb 60\n\
                 \n# Generated by CONFIG REWRITE\nclient-output-buffer-limit normal 1mb 0 0\n"
            )
        );
    }

    /// The rewritten file read back (as at start-up) gives the values it was written from.
    #[test]
    fn a_rewritten_file_reads_back_the_same_values() {
        let dir = std::env::temp_dir().join(format!("goblin-rewrite-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let c = config_with(&[
            ("port", &["7001"]),
            ("threads", &["2"]),
            ("requirepass", &["p w\"\\\x01"]),
            ("save", &["100 1 200 2"]),
            ("maxmemory", &["123456789"]),
            ("maxmemory-policy", &["volatile-ttl"]),
            (
                "client-output-buffer-limit",
                &["pubsub 0 0 0 normal 3mb 1kb 5"],
            ),
            ("dbfilename", &["my dump.rdb"]),
            ("appendfsync", &["always"]),
            ("slowlog-log-slower-than", &["-1"]),
            ("proto-max-bulk-len", &["1025kb"]),
            ("dir", &[dir.to_str().expect("UTF-8")]),
        ]);
        let path = dir.join("goblin.conf");
        std::fs::write(&path, "# mine\nport 1\n").expect("write");
        rewrite_file(&path, &c, false).expect("rewrite");
        let first = std::fs::read(&path).expect("read");
        rewrite_file(&path, &c, false).expect("rewrite");
        assert_eq!(
            std::fs::read(&path).expect("read"),
            first,
            "a second rewrite"
        );
        let Ok(Cli::Run(back)) = parse(vec![path.display().to_string()]) else {
            panic!("the rewritten file does not start the server");
        };
        assert_eq!(
            (back.port, back.threads, back.maxclients),
            (7001, 2, c.maxclients)
        );
        assert_eq!(back.requirepass, c.requirepass);
        assert_eq!(back.persist.save, c.persist.save);
        assert_eq!(back.persist.dbfilename, "my dump.rdb");
        assert_eq!(back.persist.appendfsync, Fsync::Always);
        assert_eq!(back.memory.maxmemory, 123_456_789);
        assert_eq!(back.memory.policy, c.memory.policy);
        assert_eq!(back.output_limits, c.output_limits);
        assert_eq!(back.slowlog_slower_than, -1);
        assert_eq!(back.limits.max_bulk_len, 1025 << 10);
        assert_eq!(back.persist.dir, std::fs::canonicalize(&dir).expect("dir"));
        // No temporary file left beside it.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, ["goblin.conf"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failed_rewrite_says_why_in_strerror_words() {
        let dir = std::env::temp_dir().join(format!("goblin-rewrite-dir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        // A directory where the file should be: it cannot be read.
        assert_eq!(
            rewrite_file(&dir, &Config::default(), false),
            Err("Is a directory".to_string())
        );
        // A directory that is gone: the temporary file cannot be made.
        assert_eq!(
            rewrite_file(&dir.join("gone/goblin.conf"), &Config::default(), false),
            Err("No such file or directory".to_string())
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
