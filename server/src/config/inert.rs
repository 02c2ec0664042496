//! Redis 7.0's options that Goblin accepts and keeps but does not act on: a redis.conf
//! written for redis-server (Debian's own, say) starts goblin-server unchanged, CONFIG
//! GET shows them, CONFIG SET checks and keeps them, CONFIG REWRITE writes them. Most
//! tune what Goblin does not have (replication, TLS, active defrag); the encodings'
//! thresholds and the latency histograms' options are put in force ([`apply_thresholds`]),
//! and so is `maxmemory-clients` (`runtime/client_eviction.rs` reads it), `pidfile` and
//! `unixsocket` ([`pidfile`], [`unixsocket`]), `daemonize` and `supervised`
//! (`runtime/daemon.rs`, `runtime/supervise.rs`); a few are logged at start-up when they
//! ask for something Goblin does not do (a TLS port, `replicaof`).

/// How an option's value is checked, as redis-server checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `yes` or `no`.
    Bool,
    /// An integer within the range.
    Int(i64, i64),
    /// An octal number from 0 up to this, shown in octal (`unixsocketperm`).
    Octal(i64),
    /// A number of bytes, with or without a unit (`100mb`), shown in bytes.
    Memory,
    /// A number of bytes, or a percentage up to 100 (`10%`), shown as given
    /// (`maxmemory-clients`: redis-server's `MEMORY_CONFIG | PERCENT_CONFIG`).
    MemoryOrPercent,
    /// One of these words.
    Enum(&'static [&'static str]),
    /// Some of these words, shown in this order; the first alone (`default`) when none of
    /// the others is given (redis-server's multi-argument enums).
    Flags(&'static [&'static str]),
    /// Any text (several words on a file's line are joined with spaces).
    Text,
}

/// An option kept but not acted on.
#[derive(Debug)]
pub struct Inert {
    /// Its name.
    pub name: &'static str,
    /// Its value when nothing sets it (redis-server 7.0's, or Goblin's constant).
    pub default: &'static str,
    /// How its values are checked.
    pub kind: Kind,
}

/// SHUTDOWN's flags, for the signals' options.
const SHUTDOWN_FLAGS: Kind = Kind::Flags(&["default", "save", "nosave", "now", "force"]);

const fn opt(name: &'static str, default: &'static str, kind: Kind) -> Inert {
    Inert {
        name,
        default,
        kind,
    }
}

const INT: Kind = Kind::Int(i32::MIN as i64, i32::MAX as i64);
const UINT: Kind = Kind::Int(0, i32::MAX as i64);
const LONG: Kind = Kind::Int(0, i64::MAX);

/// The options, by name (CONFIG GET `*` lists them in this order after the others).
pub const INERT: &[Inert] = &[
    opt("active-defrag-cycle-max", "25", Kind::Int(1, 99)),
    opt("active-defrag-cycle-min", "1", Kind::Int(1, 99)),
    opt("active-defrag-ignore-bytes", "104857600", Kind::Memory),
    opt("active-defrag-max-scan-fields", "1000", LONG),
    opt("active-defrag-threshold-lower", "10", Kind::Int(0, 1000)),
    opt("active-defrag-threshold-upper", "100", Kind::Int(0, 1000)),
    opt("active-expire-effort", "1", Kind::Int(1, 10)),
    opt("activedefrag", "no", Kind::Bool),
    opt("activerehashing", "yes", Kind::Bool),
    opt("always-show-logo", "no", Kind::Bool),
    opt("aof-disable-auto-gc", "no", Kind::Bool),
    opt("aof-rewrite-incremental-fsync", "yes", Kind::Bool),
    opt("aof-timestamp-enabled", "no", Kind::Bool),
    opt("aof-use-rdb-preamble", "yes", Kind::Bool),
    opt("aof_rewrite_cpulist", "", Kind::Text),
    opt("bgsave_cpulist", "", Kind::Text),
    opt("bind-source-addr", "", Kind::Text),
    opt("bio_cpulist", "", Kind::Text),
    opt("cluster-allow-pubsubshard-when-down", "yes", Kind::Bool),
    opt("cluster-allow-replica-migration", "yes", Kind::Bool),
    opt("cluster-announce-bus-port", "0", Kind::Int(0, 65535)),
    opt("cluster-announce-hostname", "", Kind::Text),
    opt("cluster-announce-ip", "", Kind::Text),
    opt("cluster-announce-port", "0", Kind::Int(0, 65535)),
    opt("cluster-announce-tls-port", "0", Kind::Int(0, 65535)),
    opt("cluster-link-sendbuf-limit", "0", Kind::Memory),
    opt("cluster-migration-barrier", "1", UINT),
    opt(
        "cluster-preferred-endpoint-type",
        "ip",
        Kind::Enum(&["ip", "hostname", "unknown-endpoint"]),
    ),
    opt("cluster-replica-no-failover", "no", Kind::Bool),
    opt("cluster-replica-validity-factor", "10", UINT),
    opt("crash-log-enabled", "yes", Kind::Bool),
    opt("crash-memcheck-enabled", "yes", Kind::Bool),
    opt("daemonize", "no", Kind::Bool),
    opt("disable-thp", "yes", Kind::Bool),
    opt("dynamic-hz", "yes", Kind::Bool),
    opt("hash-max-listpack-entries", "512", LONG),
    opt("hash-max-listpack-value", "64", LONG),
    opt("ignore-warnings", "", Kind::Text),
    opt("io-threads-do-reads", "no", Kind::Bool),
    opt("jemalloc-bg-thread", "yes", Kind::Bool),
    opt("key-load-delay", "0", INT),
    opt("latency-tracking", "yes", Kind::Bool),
    opt(
        "latency-tracking-info-percentiles",
        "50 99 99.9",
        Kind::Text,
    ),
    opt("list-compress-depth", "0", Kind::Int(0, i32::MAX as i64)),
    opt("list-max-listpack-size", "-2", INT),
    opt(
        "loading-process-events-interval-bytes",
        "2097152",
        Kind::Int(1024, i32::MAX as i64),
    ),
    opt("masterauth", "", Kind::Text),
    opt("masteruser", "", Kind::Text),
    opt("maxmemory-clients", "0", Kind::MemoryOrPercent),
    opt("maxmemory-eviction-tenacity", "10", Kind::Int(0, 100)),
    opt("min-replicas-max-lag", "10", UINT),
    opt("min-replicas-to-write", "0", UINT),
    opt("no-appendfsync-on-rewrite", "no", Kind::Bool),
    opt(
        "oom-score-adj",
        "no",
        Kind::Enum(&["no", "yes", "relative", "absolute"]),
    ),
    opt("oom-score-adj-values", "0 200 800", Kind::Text),
    opt("pidfile", "", Kind::Text),
    opt(
        "proc-title-template",
        "{title} {listen-addr} {server-mode}",
        Kind::Text,
    ),
    opt(
        "propagation-error-behavior",
        "ignore",
        Kind::Enum(&["ignore", "panic", "panic-on-replicas"]),
    ),
    opt("rdb-del-sync-files", "no", Kind::Bool),
    opt("rdb-key-save-delay", "0", INT),
    opt("rdb-save-incremental-fsync", "yes", Kind::Bool),
    opt("rdbchecksum", "yes", Kind::Bool),
    opt("rdbcompression", "yes", Kind::Bool),
    opt("repl-backlog-size", "1048576", Kind::Memory),
    opt("repl-backlog-ttl", "3600", LONG),
    opt("repl-disable-tcp-nodelay", "no", Kind::Bool),
    opt(
        "repl-diskless-load",
        "disabled",
        Kind::Enum(&["disabled", "on-empty-db", "swapdb"]),
    ),
    opt("repl-diskless-sync", "yes", Kind::Bool),
    opt("repl-diskless-sync-delay", "5", UINT),
    opt("repl-diskless-sync-max-replicas", "0", UINT),
    opt(
        "repl-ping-replica-period",
        "10",
        Kind::Int(1, i32::MAX as i64),
    ),
    opt("repl-timeout", "60", Kind::Int(1, i32::MAX as i64)),
    opt("replica-announce-ip", "", Kind::Text),
    opt("replica-announce-port", "0", Kind::Int(0, 65535)),
    opt("replica-announced", "yes", Kind::Bool),
    opt("replica-ignore-disk-write-errors", "no", Kind::Bool),
    opt("replica-ignore-maxmemory", "yes", Kind::Bool),
    opt("replica-lazy-flush", "no", Kind::Bool),
    opt("replica-priority", "100", UINT),
    opt("replica-read-only", "yes", Kind::Bool),
    opt("replica-serve-stale-data", "yes", Kind::Bool),
    opt("replicaof", "", Kind::Text),
    opt(
        "sanitize-dump-payload",
        "no",
        Kind::Enum(&["no", "yes", "clients"]),
    ),
    opt("server_cpulist", "", Kind::Text),
    opt("set-max-intset-entries", "512", LONG),
    opt("set-proc-title", "yes", Kind::Bool),
    opt("shutdown-on-sigint", "default", SHUTDOWN_FLAGS),
    opt("shutdown-on-sigterm", "default", SHUTDOWN_FLAGS),
    opt("shutdown-timeout", "10", UINT),
    opt("socket-mark-id", "0", UINT),
    opt("stream-node-max-bytes", "4096", Kind::Memory),
    opt("stream-node-max-entries", "100", LONG),
    opt(
        "supervised",
        "no",
        Kind::Enum(&["upstart", "systemd", "auto", "no"]),
    ),
    opt("syslog-enabled", "no", Kind::Bool),
    opt(
        "syslog-facility",
        "local0",
        Kind::Enum(&[
            "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
        ]),
    ),
    opt("syslog-ident", "redis", Kind::Text),
    opt("tcp-backlog", "511", UINT),
    opt(
        "tls-auth-clients",
        "yes",
        Kind::Enum(&["no", "yes", "optional"]),
    ),
    opt("tls-ca-cert-dir", "", Kind::Text),
    opt("tls-ca-cert-file", "", Kind::Text),
    opt("tls-cert-file", "", Kind::Text),
    opt("tls-ciphers", "", Kind::Text),
    opt("tls-ciphersuites", "", Kind::Text),
    opt("tls-client-cert-file", "", Kind::Text),
    opt("tls-client-key-file", "", Kind::Text),
    opt("tls-client-key-file-pass", "", Kind::Text),
    opt("tls-cluster", "no", Kind::Bool),
    opt("tls-dh-params-file", "", Kind::Text),
    opt("tls-key-file", "", Kind::Text),
    opt("tls-key-file-pass", "", Kind::Text),
    opt("tls-port", "0", Kind::Int(0, 65535)),
    opt("tls-prefer-server-ciphers", "no", Kind::Bool),
    opt("tls-protocols", "", Kind::Text),
    opt("tls-replication", "no", Kind::Bool),
    opt("tls-session-cache-size", "20480", UINT),
    opt("tls-session-cache-timeout", "300", UINT),
    opt("tls-session-caching", "yes", Kind::Bool),
    opt("unixsocket", "", Kind::Text),
    opt("unixsocketperm", "0", Kind::Octal(0o777)),
    opt("use-exit-on-panic", "no", Kind::Bool),
    opt("watchdog-period", "0", UINT),
    opt("zset-max-listpack-entries", "128", LONG),
    opt("zset-max-listpack-value", "64", LONG),
];

/// Redis 7.0's other names for some options (each shown by CONFIG GET under both).
pub const ALIASES: &[(&str, &str)] = &[
    ("cluster-slave-no-failover", "cluster-replica-no-failover"),
    (
        "cluster-slave-validity-factor",
        "cluster-replica-validity-factor",
    ),
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("repl-ping-slave-period", "repl-ping-replica-period"),
    ("slave-announce-ip", "replica-announce-ip"),
    ("slave-announce-port", "replica-announce-port"),
    ("slave-ignore-maxmemory", "replica-ignore-maxmemory"),
    ("slave-lazy-flush", "replica-lazy-flush"),
    ("slave-priority", "replica-priority"),
    ("slave-read-only", "replica-read-only"),
    ("slave-serve-stale-data", "replica-serve-stale-data"),
    ("slaveof", "replicaof"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
];

/// The options redis-server sets only at start-up (CONFIG SET answers that they are
/// immutable).
const IMMUTABLE: &[&str] = &[
    "always-show-logo",
    "aof_rewrite_cpulist",
    "bgsave_cpulist",
    "bio_cpulist",
    "daemonize",
    "disable-thp",
    "io-threads-do-reads",
    "pidfile",
    "replicaof",
    "server_cpulist",
    "set-proc-title",
    "supervised",
    "syslog-enabled",
    "syslog-facility",
    "syslog-ident",
    "tcp-backlog",
    "unixsocket",
    "unixsocketperm",
];

/// redis-server's options that CONFIG GET with a pattern does not show (its
/// `HIDDEN_CONFIG`: debugging knobs of its tests, kept here and not acted on). Named, each
/// is shown.
pub const HIDDEN: &[&str] = &[
    "key-load-delay",
    "loading-process-events-interval-bytes",
    "rdb-key-save-delay",
    "use-exit-on-panic",
    "watchdog-period",
];

/// Whether option `name` (canonical) is set only at start-up.
pub fn immutable(name: &str) -> bool {
    IMMUTABLE.contains(&name)
}

/// The index in [`INERT`] of option `name` (or of the option it is another name for).
pub fn find(name: &str) -> Option<usize> {
    let name = ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, real)| real);
    INERT.iter().position(|o| o.name == name)
}

/// The defaults, in [`INERT`]'s order.
pub fn defaults() -> Vec<String> {
    INERT.iter().map(|o| o.default.to_string()).collect()
}

impl Inert {
    /// `values` (a file's words, or CONFIG SET's one value) checked: the value kept, or
    /// redis-server's reason for refusing it.
    pub fn check(&self, values: &[String]) -> Result<String, String> {
        let one = || match values {
            [v] => Ok(v.as_str()),
            _ => Err("wrong number of arguments".to_string()),
        };
        match self.kind {
            // Three scores, one for each class of process (redis-server's words).
            Kind::Text if self.name == "oom-score-adj-values" => {
                let words: Vec<&str> = values.iter().flat_map(|v| v.split_whitespace()).collect();
                if words.len() != 3 {
                    return Err("wrong number of arguments".into());
                }
                if !words
                    .iter()
                    .all(|w| w.parse::<i64>().is_ok_and(|n| (-2000..=2000).contains(&n)))
                {
                    return Err(
                        "Invalid oom-score-adj-values, elements must be between -2000 \
                                and 2000."
                            .into(),
                    );
                }
                Ok(words.join(" "))
            }
            // `<host> <port>` (or `no one`), the port a number up to 65535, as
            // redis-server reads it.
            Kind::Text if self.name == "replicaof" => {
                let words: Vec<&str> = values.iter().flat_map(|v| v.split_whitespace()).collect();
                if words.is_empty() && !values.is_empty() {
                    // (Its default, "": none.)
                    return Ok(String::new());
                }
                let [host, port] = words.as_slice() else {
                    return Err("wrong number of arguments".into());
                };
                let no_one = host.eq_ignore_ascii_case("no") && port.eq_ignore_ascii_case("one");
                if !no_one && !port.parse::<i64>().is_ok_and(|p| (0..=65535).contains(&p)) {
                    return Err("Invalid master port".into());
                }
                Ok(words.join(" "))
            }
            Kind::Text if self.name == "latency-tracking-info-percentiles" => {
                crate::runtime::histogram::canonical_percentiles(&values.join(" "))
            }
            // redis-server's isValidAnnouncedHostname.
            Kind::Text if self.name == "cluster-announce-hostname" => {
                let name = values.join(" ");
                if name.len() >= 256 {
                    return Err("Hostnames must be less than 256 characters".into());
                }
                if !name
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.')
                {
                    return Err(
                        "Hostnames may only contain alphanumeric characters, hyphens or dots"
                            .into(),
                    );
                }
                Ok(name)
            }
            Kind::Text => Ok(values.join(" ")),
            Kind::Bool => match one()?.to_ascii_lowercase().as_str() {
                "yes" => Ok("yes".into()),
                "no" => Ok("no".into()),
                _ => Err("argument must be 'yes' or 'no'".into()),
            },
            Kind::Int(min, max) => {
                let n: i64 = one()?
                    .parse()
                    .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
                if n < min || n > max {
                    return Err(format!(
                        "argument must be between {min} and {max} inclusive"
                    ));
                }
                Ok(n.to_string())
            }
            Kind::Octal(max) => {
                let n = i64::from_str_radix(one()?, 8)
                    .map_err(|_| "argument couldn't be parsed as an octal number".to_string())?;
                if !(0..=max).contains(&n) {
                    return Err(format!("argument must be between 0 and {max:o} inclusive"));
                }
                Ok(format!("{n:o}"))
            }
            Kind::Memory => super::parse_size(one()?).map(|n| n.to_string()),
            Kind::MemoryOrPercent => {
                let v = one()?;
                if let Ok(n) = super::parse_size(v) {
                    if n > i64::MAX as u64 {
                        return Err(format!(
                            "argument must be between -100 and {} inclusive",
                            i64::MAX
                        ));
                    }
                    return Ok(n.to_string());
                }
                let percent = v
                    .strip_suffix('%')
                    .filter(|d| !d.is_empty())
                    .and_then(|d| d.parse::<i64>().ok())
                    .filter(|n| *n >= 0)
                    .ok_or("argument must be a memory or percent value")?;
                if percent > 100 {
                    return Err("percentage argument must be less or equal to 100".into());
                }
                Ok(format!("{percent}%"))
            }
            Kind::Flags(words) => {
                let given: Vec<String> = values
                    .iter()
                    .flat_map(|v| v.split_whitespace())
                    .map(str::to_ascii_lowercase)
                    .collect();
                if given.is_empty() || given.iter().any(|g| !words.contains(&g.as_str())) {
                    return Err(format!(
                        "argument(s) must be one of the following: {}",
                        words.join(", ")
                    ));
                }
                let has = |w: &str| given.iter().any(|g| g == w);
                if has("save") && has("nosave") {
                    return Err("shutdown can't have both SAVE and NOSAVE flags".into());
                }
                let set: Vec<&str> = words[1..].iter().copied().filter(|w| has(w)).collect();
                Ok(if set.is_empty() {
                    words[0].to_string()
                } else {
                    set.join(" ")
                })
            }
            Kind::Enum(words) => {
                let v = one()?.to_ascii_lowercase();
                if words.contains(&v.as_str()) {
                    Ok(v)
                } else {
                    Err(format!(
                        "argument(s) must be one of the following: {}",
                        words.join(", ")
                    ))
                }
            }
        }
    }
}

/// The value of option `name` in `values` (kept in [`INERT`]'s order).
pub fn value<'a>(values: &'a [String], name: &str) -> Option<&'a str> {
    find(name).and_then(|i| values.get(i)).map(String::as_str)
}

/// Puts the encodings' thresholds among `values` in force (at start-up and on CONFIG
/// SET): `goblin_store::types::thresholds`.
pub fn apply_thresholds(values: &[String]) {
    use goblin_store::types::thresholds as t;
    for (name, threshold) in [
        ("hash-max-listpack-entries", &t::HASH_LISTPACK_ENTRIES),
        ("hash-max-listpack-value", &t::HASH_LISTPACK_VALUE),
        ("zset-max-listpack-entries", &t::ZSET_LISTPACK_ENTRIES),
        ("zset-max-listpack-value", &t::ZSET_LISTPACK_VALUE),
        ("set-max-intset-entries", &t::SET_INTSET_ENTRIES),
    ] {
        if let Some(n) = value(values, name).and_then(|v| v.parse::<u64>().ok()) {
            threshold.set(n);
        }
    }
    crate::runtime::histogram::configure(
        value(values, "latency-tracking") != Some("no"),
        value(values, "latency-tracking-info-percentiles").unwrap_or_default(),
    );
    use std::sync::atomic::Ordering::Relaxed;
    let streams = &crate::families::streams::NODE_MAX_BYTES;
    if let Some(n) = value(values, "stream-node-max-bytes").and_then(|v| v.parse::<usize>().ok()) {
        streams.store(n, Relaxed);
    }
    let entries = &crate::families::streams::NODE_MAX_ENTRIES;
    if let Some(n) = value(values, "stream-node-max-entries").and_then(|v| v.parse::<i64>().ok()) {
        entries.store(n, Relaxed);
    }
}

/// What the process's OOM score follows: the configuration's mode and values, the
/// server's role, and the score before Goblin first changed it (while it keeps it
/// changed).
struct Oom {
    mode: String,
    values: String,
    replica: bool,
    base: Option<i64>,
}

impl Oom {
    /// Whether `oom-score-adj` is on (`yes`, `relative`, `absolute`).
    fn on(&self) -> bool {
        !matches!(self.mode.as_str(), "no" | "")
    }
}

static OOM: std::sync::Mutex<Oom> = std::sync::Mutex::new(Oom {
    mode: String::new(),
    values: String::new(),
    replica: false,
    base: None,
});

/// `oom-score-adj` and `oom-score-adj-values` put in force (at start-up and on CONFIG
/// SET), as redis-server's `setOOMScoreAdj`: the process's `/proc/self/oom_score_adj`
/// becomes the value of its class — the first (a master's) or the second (a
/// replica's) — (`absolute`), or that plus the score the process started with (`yes`,
/// `relative`), within ±1000; back to the score it started with when turned `no`.
///
/// # Errors
/// When the score cannot be read or written (lowering it takes a privilege): logged.
pub fn apply_oom_score_adj(values: &[String]) -> std::io::Result<()> {
    let Ok(mut oom) = OOM.lock() else {
        return Err(std::io::Error::other("poisoned"));
    };
    oom.mode = value(values, "oom-score-adj").unwrap_or("no").to_string();
    oom.values = value(values, "oom-score-adj-values")
        .unwrap_or_default()
        .to_string();
    put_oom_score(&mut oom)
}

/// The server became a replica, or a master again: the score of its class, when
/// `oom-score-adj` is on (as redis-server's `replicationSetMaster` and
/// `replicationUnsetMaster` call `setOOMScoreAdj`).
pub fn oom_score_role(replica: bool) {
    if let Ok(mut oom) = OOM.lock() {
        oom.replica = replica;
        if oom.on() {
            let _ = put_oom_score(&mut oom);
        }
    }
}

fn put_oom_score(oom: &mut Oom) -> std::io::Result<()> {
    const PATH: &str = "/proc/self/oom_score_adj";
    let score = if !oom.on() {
        match oom.base.take() {
            Some(b) => b,
            None => return Ok(()),
        }
    } else {
        let start = match oom.base {
            Some(b) => b,
            None => match std::fs::read_to_string(PATH) {
                Ok(text) => {
                    let b = text.trim().parse().unwrap_or(0);
                    oom.base = Some(b);
                    b
                }
                Err(e) => {
                    crate::log!(
                        Warning,
                        "Unable to read oom_score_adj: {}",
                        crate::util::strerror(&e)
                    );
                    return Err(e);
                }
            },
        };
        let class: i64 = oom
            .values
            .split_whitespace()
            .nth(usize::from(oom.replica))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let score = if oom.mode == "absolute" {
            class
        } else {
            class + start
        };
        score.clamp(-1000, 1000)
    };
    std::fs::write(PATH, format!("{score}\n")).inspect_err(|e| {
        crate::log!(
            Warning,
            "Unable to write oom_score_adj: {}",
            crate::util::strerror(e)
        );
    })
}

/// The `pidfile` configured, if any (written at start-up, removed at exit, as
/// redis-server does).
pub fn pidfile(values: &[String]) -> Option<&str> {
    value(values, "pidfile").filter(|v| !v.is_empty())
}

/// The Unix socket configured (`unixsocket`), if any, and the mode of its file
/// (`unixsocketperm`, 0 for the umask's).
pub fn unixsocket(values: &[String]) -> Option<(&str, u32)> {
    let path = value(values, "unixsocket").filter(|v| !v.is_empty())?;
    let perm = value(values, "unixsocketperm")
        .and_then(|v| u32::from_str_radix(v, 8).ok())
        .unwrap_or(0);
    Some((path, perm))
}

/// What a configuration asks for that Goblin does not do: a warning line each.
pub fn warnings(values: &[String]) -> Vec<String> {
    let value = |name: &str| value(values, name);
    let mut out = Vec::new();
    if value("tls-port").is_some_and(|v| v != "0") {
        out.push("tls-port: Goblin has no TLS; the port is not opened".into());
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pass_their_own_checks_and_names_are_unique() {
        for o in INERT {
            let words = vec![o.default.to_string()];
            assert_eq!(o.check(&words).as_deref(), Ok(o.default), "{}", o.name);
            assert_eq!(INERT.iter().filter(|p| p.name == o.name).count(), 1);
        }
        for name in IMMUTABLE {
            assert!(find(name).is_some(), "{name}");
        }
        for (alias, real) in ALIASES {
            assert!(find(real).is_some(), "{alias}");
            assert_eq!(find(alias), find(real));
        }
    }

    #[test]
    fn values_are_checked_as_redis_checks_them() {
        let o = |name: &str| &INERT[find(name).unwrap()];
        let v = |s: &str| vec![s.to_string()];
        assert_eq!(o("activerehashing").check(&v("NO")), Ok("no".into()));
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            o("replicaof").check(&words(&["127.0.0.1", "abc"])),
            Err("Invalid master port".into())
        );
        assert_eq!(
            o("replicaof").check(&words(&["--127.0.0.1"])),
            Err("wrong number of arguments".into())
        );
        assert_eq!(
            o("replicaof").check(&words(&["NO", "ONE"])),
            Ok("NO ONE".into())
        );
        assert_eq!(
            o("replicaof").check(&words(&["h", "6380"])),
            Ok("h 6380".into())
        );
        assert_eq!(
            o("activerehashing").check(&v("maybe")),
            Err("argument must be 'yes' or 'no'".into())
        );
        assert_eq!(o("tcp-backlog").check(&v("1024")), Ok("1024".into()));
        assert_eq!(
            o("tcp-backlog").check(&v("x")),
            Err("argument couldn't be parsed into an integer".into())
        );
        assert_eq!(
            o("active-expire-effort").check(&v("11")),
            Err("argument must be between 1 and 10 inclusive".into())
        );
        assert_eq!(
            o("repl-backlog-size").check(&v("1mb")),
            Ok("1048576".into())
        );
        assert_eq!(o("supervised").check(&v("Systemd")), Ok("systemd".into()));
        assert!(o("supervised").check(&v("x")).is_err());
        let words: Vec<String> = ["50", "99", "99.9"].map(String::from).to_vec();
        assert_eq!(
            o("latency-tracking-info-percentiles").check(&words),
            Ok("50 99 99.9".into())
        );
        assert_eq!(o("slaveof").name, "replicaof");
    }

    #[test]
    fn the_encodings_thresholds_show_goblins_constants() {
        use goblin_store::types::{hash, list, set, zset};
        let default = |name: &str| INERT[find(name).unwrap()].default;
        let streams = crate::families::streams::limits();
        for (name, value) in [
            (
                "hash-max-listpack-entries",
                hash::LISTPACK_ENTRIES.to_string(),
            ),
            ("hash-max-listpack-value", hash::LISTPACK_VALUE.to_string()),
            ("list-max-listpack-size", list::LISTPACK_SIZE.to_string()),
            ("set-max-intset-entries", set::INTSET_ENTRIES.to_string()),
            (
                "zset-max-listpack-entries",
                zset::LISTPACK_ENTRIES.to_string(),
            ),
            ("zset-max-listpack-value", zset::LISTPACK_VALUE.to_string()),
            ("stream-node-max-bytes", streams.max_bytes.to_string()),
            ("stream-node-max-entries", streams.max_entries.to_string()),
        ] {
            assert_eq!(default(name), value, "{name}");
        }
    }
}
