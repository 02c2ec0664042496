//! Command-line configuration.
//!
//! Options are given redis-server style, `--name value`; `--help` lists them.

use std::net::IpAddr;
use std::path::PathBuf;

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
    if !nums.len().is_multiple_of(2) {
        return Err(format!("invalid save parameters '{value}'"));
    }
    nums.chunks(2)
        .map(|pair| match (pair[0].parse(), pair[1].parse()) {
            (Ok(secs), Ok(changes)) => Ok((secs, changes)),
            _ => Err(format!("invalid save parameters '{value}'")),
        })
        .collect()
}

fn parse_bool(name: &str, value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(format!("invalid value for {name}: '{value}' (yes or no)")),
    }
}

/// A size with redis.conf's units (`64mb`, `1gb`, `100k`).
fn parse_size(name: &str, value: &str) -> Result<u64, String> {
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
        .ok_or_else(|| format!("invalid value for {name}: '{value}'"))
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: 6379,
            threads: 0,
            limits: Limits::default(),
            persist: PersistConfig::default(),
        }
    }
}

/// The usage text.
pub const USAGE: &str = "\
goblin-server: a Redis-protocol in-memory server, shared-nothing and thread-per-core.

Usage: goblin-server [options]

Options:
  --bind ADDR               address to listen on (default 127.0.0.1)
  --port PORT               TCP port (default 6379; 0 picks a free port)
  --threads N               shard threads, one pinned per core, at most 1024 (default:
                            the cores this process may use)
  --proto-max-bulk-len N    largest bulk argument in bytes (default 536870912)

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

/// The most shard threads: far more than any machine's cores, and far fewer than the 16384
/// hash slots, so that every shard owns slots.
pub const MAX_THREADS: usize = 1024;

fn parse_num<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("invalid value for {name}: '{value}'"))
}

/// Parses the arguments (without the program name).
///
/// # Errors
/// A message naming the bad option or value.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Cli, String> {
    let mut config = Config::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let name = arg.as_str();
        match name {
            "-h" | "--help" => return Ok(Cli::Help),
            "-v" | "--version" => return Ok(Cli::Version),
            _ => {}
        }
        let value = args
            .next()
            .ok_or_else(|| format!("missing value for {name}"))?;
        match name {
            "--bind" => config.bind = parse_num(name, &value)?,
            "--port" => config.port = parse_num(name, &value)?,
            "--threads" => {
                config.threads = parse_num(name, &value)?;
                if config.threads > MAX_THREADS {
                    return Err(format!("--threads must be at most {MAX_THREADS}"));
                }
            }
            "--proto-max-bulk-len" => {
                config.limits.max_bulk_len = parse_num(name, &value)?;
                if config.limits.max_bulk_len < 1024 {
                    return Err("--proto-max-bulk-len must be at least 1024".into());
                }
            }
            "--dir" => config.persist.dir = value.into(),
            "--dbfilename" => {
                if value.is_empty() || value.contains('/') {
                    return Err(format!("invalid dbfilename '{value}'"));
                }
                config.persist.dbfilename = value;
            }
            "--save" => config.persist.save = parse_save(&value)?,
            "--loadrdb" => config.persist.loadrdb = Some(value.into()),
            "--appendonly" => config.persist.appendonly = parse_bool(name, &value)?,
            "--appendfsync" => {
                config.persist.appendfsync = match value.to_ascii_lowercase().as_str() {
                    "always" => Fsync::Always,
                    "everysec" => Fsync::Everysec,
                    "no" => Fsync::No,
                    _ => return Err(format!("invalid value for {name}: '{value}'")),
                }
            }
            "--appenddirname" | "--appendfilename" => {
                if value.is_empty() || value.contains('/') {
                    return Err(format!("invalid value for {name}: '{value}'"));
                }
                if name == "--appenddirname" {
                    config.persist.appenddirname = value;
                } else {
                    config.persist.appendfilename = value;
                }
            }
            "--aof-load-truncated" => config.persist.aof_load_truncated = parse_bool(name, &value)?,
            "--stop-writes-on-bgsave-error" => {
                config.persist.stop_writes_on_bgsave_error = parse_bool(name, &value)?;
            }
            "--auto-aof-rewrite-percentage" => {
                config.persist.auto_aof_rewrite_percentage = parse_num(name, &value)?;
            }
            "--auto-aof-rewrite-min-size" => {
                config.persist.auto_aof_rewrite_min_size = parse_size(name, &value)?;
            }
            _ => return Err(format!("unknown option {name} (see --help)")),
        }
    }
    Ok(Cli::Run(Box::new(config)))
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
