//! SLOWLOG: commands that ran longer than `slowlog-log-slower-than` microseconds, the
//! newest `slowlog-max-len` of them, with redis-server's entry format.
//!
//! The shard that runs a command times it and, when it was slow, keeps its arguments
//! (trimmed as Redis trims them); the connection's worker adds who sent it (address and
//! name) — at once for a command of its own shard, when the batch comes back for one of
//! another — and appends the entry to the one log every worker shares. Slow commands are
//! rare by definition, so one lock for the log costs nothing that matters.
//!
//! What is timed: every command not flagged `fast` in COMMAND INFO (the ones that can be
//! slow: KEYS, SMEMBERS, LRANGE, DEL of a large value …), every command when the
//! threshold is under a millisecond (`FAST_TIMED_BELOW`: a `fast` command can then be
//! slow, and at 0 every command is), and otherwise one `fast` command in 16 (the same
//! sample as INFO commandstats). A `fast` command that happens to take more than a
//! millisecond and is not sampled is missed: timing each GET would cost more than the GET.
//!
//! Which commands are entries, as in Redis: every command a client sends, except those
//! flagged `skip_slowlog` (EXEC, …) — the commands EXEC runs are entries of their own, and
//! so are those a script calls (sent by the script's client, `?:0`); a blocking command is
//! an entry once served (timed without its wait), not when its wait times out. A command
//! that runs as a cross-shard plan is timed from its start to its reply, less the time it
//! waits parked for keys: its hops to other shards count, as do waits for their locks
//! (two clock reads per plan; timing each step on its shard cost a cross-shard GOBLIN.CLAIM
//! 15% more CPU).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use goblin_protocol::Encoder;

use crate::table::handler::Args;

/// Arguments an entry keeps (Redis's `SLOWLOG_ENTRY_MAX_ARGC`).
const MAX_ARGC: usize = 32;
/// Bytes an argument keeps (Redis's `SLOWLOG_ENTRY_MAX_STRING`).
const MAX_STRING: usize = 128;
/// Below this threshold (microseconds) every command is timed, `fast` ones too.
const FAST_TIMED_BELOW: i64 = 1000;

/// A slow command as its shard saw it.
#[derive(Debug, Clone)]
pub struct SlowCmd {
    /// When it started, Unix seconds.
    pub at: u64,
    /// How long it ran, microseconds.
    pub micros: u64,
    /// Its arguments, trimmed.
    pub argv: Vec<Vec<u8>>,
    /// A script called it: its client is the script's (`?:0`, no name), as in Redis.
    pub by_script: bool,
}

impl SlowCmd {
    /// The entry of `args`, trimmed as Redis trims it: at most 32 arguments (the last
    /// saying how many more there were) and 128 bytes of each (saying how many more).
    pub fn new(args: &Args<'_>, at: u64, micros: u64) -> SlowCmd {
        let argc = args.len();
        let kept = argc.min(MAX_ARGC);
        let mut argv = Vec::with_capacity(kept);
        for i in 0..kept {
            if i == MAX_ARGC - 1 && argc > MAX_ARGC {
                argv.push(format!("... ({} more arguments)", argc - MAX_ARGC + 1).into_bytes());
                break;
            }
            let arg = args.get(i);
            if arg.len() > MAX_STRING {
                let mut a = arg[..MAX_STRING].to_vec();
                a.extend_from_slice(
                    format!("... ({} more bytes)", arg.len() - MAX_STRING).as_bytes(),
                );
                argv.push(a);
            } else {
                argv.push(arg.to_vec());
            }
        }
        SlowCmd {
            at,
            micros,
            argv,
            by_script: false,
        }
    }
}

/// One entry.
#[derive(Debug, Clone)]
struct Entry {
    id: u64,
    cmd: SlowCmd,
    addr: String,
    name: Vec<u8>,
}

/// The log every worker shares, and its thresholds (kept from the live configuration).
#[derive(Debug)]
pub struct SlowLog {
    entries: Mutex<VecDeque<Entry>>,
    next_id: AtomicU64,
    slower_than: AtomicI64,
    max_len: AtomicU64,
}

impl SlowLog {
    /// An empty log.
    pub fn new(slower_than: i64, max_len: u64) -> SlowLog {
        SlowLog {
            entries: Mutex::new(VecDeque::new()),
            next_id: AtomicU64::new(0),
            slower_than: AtomicI64::new(slower_than),
            max_len: AtomicU64::new(max_len),
        }
    }

    /// Takes new thresholds (CONFIG SET); a shorter maximum drops the oldest entries.
    pub fn configure(&self, slower_than: i64, max_len: u64) {
        self.slower_than.store(slower_than, Ordering::Relaxed);
        self.max_len.store(max_len, Ordering::Relaxed);
        if let Ok(mut entries) = self.entries.lock() {
            while entries.len() as u64 > max_len {
                entries.pop_back();
            }
        }
    }

    /// Whether commands are timed for it at all (`slowlog-log-slower-than` ≥ 0).
    pub fn enabled(&self) -> bool {
        self.slower_than.load(Ordering::Relaxed) >= 0
    }

    /// Whether a command (`fast` or not) is timed for it: the log is on and the command
    /// may cross its threshold (any command when it is under `FAST_TIMED_BELOW`).
    pub fn times(&self, fast: bool) -> bool {
        let threshold = self.slower_than.load(Ordering::Relaxed);
        threshold >= 0 && (!fast || threshold < FAST_TIMED_BELOW)
    }

    /// Whether a command of `micros` is slow.
    pub fn is_slow(&self, micros: u64) -> bool {
        let threshold = self.slower_than.load(Ordering::Relaxed);
        threshold >= 0 && micros >= threshold as u64
    }

    /// Appends a slow command, sent by the client at `addr` named `name`.
    pub fn push(&self, cmd: SlowCmd, addr: String, name: Vec<u8>) {
        let max_len = self.max_len.load(Ordering::Relaxed);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut entries) = self.entries.lock() {
            entries.push_front(Entry {
                id,
                cmd,
                addr,
                name,
            });
            while entries.len() as u64 > max_len {
                entries.pop_back();
            }
        }
    }

    /// `SLOWLOG LEN`.
    pub fn len(&self) -> usize {
        self.entries.lock().map_or(0, |e| e.len())
    }

    /// Whether it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `SLOWLOG RESET`.
    pub fn reset(&self) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.clear();
        }
    }

    /// `SLOWLOG GET [count]`: the newest `count` entries (all of them when `None`), newest
    /// first, in redis-server's form.
    pub fn encode(&self, count: Option<usize>, out: &mut Encoder<'_>) {
        let Ok(entries) = self.entries.lock() else {
            out.array(0);
            return;
        };
        let n = count.map_or(entries.len(), |c| c.min(entries.len()));
        out.array(n);
        for e in entries.iter().take(n) {
            out.array(6);
            out.integer(e.id as i64);
            out.integer(e.cmd.at as i64);
            out.integer(e.cmd.micros as i64);
            out.array(e.cmd.argv.len());
            for a in &e.cmd.argv {
                out.bulk(a);
            }
            out.bulk(e.addr.as_bytes());
            out.bulk(&e.name);
        }
    }
}
