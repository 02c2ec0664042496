//! DEBUG, allowed as `enable-debug-command` says (no by default, as in redis-server
//! 7.0): the subcommands tests and tools use — SLEEP, SET-ACTIVE-EXPIRE, OBJECT, DIGEST,
//! DIGEST-VALUE, POPULATE, RELOAD, LOADAOF, CHANGE-REPL-ID, REPLICATE, LOG, ERROR, PROTOCOL,
//! SET-DISABLE-DENY-SCRIPTS, QUICKLIST-PACKED-THRESHOLD (accepted, nothing to set) and HELP.
//!
//! DEBUG runs with every shard locked whole, as redis-server runs it with the server to
//! itself: DEBUG SLEEP stops every command on keys for its duration. The digests are
//! Redis's (`computeDatasetDigest`, `xorObjectDigest`: SHA-1 mixes of every key and
//! element, keys XORed so that their order does not matter), so they equal
//! redis-server's for the same data.

use std::sync::atomic::Ordering;

use goblin_protocol::{Encoder, format_double};
use goblin_store::{Keyspace, StreamId, ValueRef};

use crate::errors;
use crate::persist::snapshot::{SaveKind, SavePlan};
use crate::sha1::{Sha1, hex};
use crate::table::args::is_keyword;
use crate::table::handler::{Exec, ShardCtx};
use crate::table::{CommandTable, meta};
use crate::txn::plan::{CrossShard, Hop, HopOut, Locking, Outcome, Plan, PlanCx, PlanStart, Step};

use super::sorted_sets::strtod;

/// Registers DEBUG.
pub fn register(table: &mut CommandTable) {
    table.add(
        &meta::DEBUG,
        Exec::Plan(CrossShard {
            plan: debug_plan,
            locking: Locking::WholeShards,
        }),
    );
}

/// DEBUG LOADAOF without a log to load (redis-server exits there).
const LOADAOF_WITHOUT_LOG: &[u8] =
    b"ERR DEBUG LOADAOF needs the append-only log (appendonly yes, or a BGREWRITEAOF's files)";

const HELP: &[&str] = &[
    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "AOF-FLUSH-SLEEP <microsec>",
    "    Server will sleep before flushing the AOF, this is used for testing.",
    "CHANGE-REPL-ID",
    "    Change the replication IDs of the instance.",
    "    Dangerous: should be used only for testing the replication subsystem.",
    "CONFIG-REWRITE-FORCE-ALL",
    "    Like CONFIG REWRITE but writes all configuration options, including",
    "    keywords not listed in original configuration file or default values.",
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "ERROR <string>",
    "    Return a Redis protocol error with <string> as message. Useful for clients",
    "    unit tests to simulate Redis errors.",
    "LOG <message>",
    "    Write <message> to the server log.",
    "LOADAOF",
    "    Flush the AOF buffers on disk and reload the AOF in memory.",
    "REPLICATE <string>",
    "    Replicates the provided string to replicas, allowing data divergence.",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "PANIC",
    "    Crash the server simulating a panic.",
    "POPULATE <count> [<prefix>] [<size>]",
    "    Create <count> string keys named key:<num>. If <prefix> is specified then",
    "    it is used instead of the 'key' prefix. These are not propagated to",
    "    replicas. Cluster slots are not respected so keys not belonging to the",
    "    current node can be created in cluster mode.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "RELOAD [option ...]",
    "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
    "    * MERGE: conflicting keys will be loaded from RDB.",
    "    * NOFLUSH: the existing database will not be removed before load, but",
    "      conflicting keys will generate an exception and kill the server.",
    "    * NOSAVE: the database will be loaded from an existing RDB file.",
    "    Examples:",
    "    * DEBUG RELOAD: verify that the server is able to persist, flush and reload",
    "      the database.",
    "    * DEBUG RELOAD NOSAVE: replace the current database with the contents of an",
    "      existing RDB file.",
    "    * DEBUG RELOAD NOSAVE NOFLUSH MERGE: add the contents of an existing RDB",
    "      file to the database.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
    "    default.",
    "QUICKLIST-PACKED-THRESHOLD <size>",
    "    Sets the threshold for elements to be inserted as plain vs packed nodes",
    "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
    "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
    "    Enables or disables checksum checks for RDB files and RESTORE's payload.",
    "SEGFAULT",
    "    Crash the server with sigsegv.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "PAUSE-CRON <0|1>",
    "    Stop periodic cron job processing.",
    "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time>",
    "    Sets the time (in milliseconds) to wait between client reply buffer peak resets.",
    "    In case NEVER is provided the last observed peak will never be reset",
    "    In case RESET is provided the peak reset time will be restored to the default value",
    "REPLYBUFFER RESIZING <0|1>",
    "    Enable or disable the reply buffer resize cron job",
    "HELP",
    "    Prints this help.",
];

const PROTOCOL_TYPES: &[u8] = b"ERR Wrong protocol type name. Please use one of the following: \
string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false";
const RELOAD_OPTIONS: &[u8] =
    b"ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.";

/// What one DEBUG does.
#[derive(Debug)]
enum Job {
    /// Answers at once (SLEEP sleeps first).
    Sleep(f64),
    ActiveExpire(bool),
    /// AOF-FLUSH-SLEEP: microseconds.
    AofFlushSleep(u64),
    SkipChecksum(bool),
    /// PAUSE-CRON.
    PauseCron(bool),
    /// DROP-CLUSTER-PACKET-FILTER: the cluster bus drops the messages of that type
    /// (redis-server's numbers; -1: none).
    DropClusterPackets(i64),
    /// SET-DISABLE-DENY-SCRIPTS: whether scripts may call `noscript` commands.
    DenyScripts(bool),
    Help,
    /// SEGFAULT and PANIC: the crash report, then the process dies.
    Segfault,
    Panic,
    ChangeReplId,
    /// CONFIG-REWRITE-FORCE-ALL: CONFIG REWRITE writing every option, defaults too.
    RewriteAll,
    Log(Vec<u8>),
    /// REPLICATE: a command for the replicas only, as given (data divergence on purpose:
    /// redis-server's tests of what a replica does with a command that fails).
    Replicate(Vec<Vec<u8>>),
    Error(Vec<u8>),
    Protocol(Vec<u8>),
    Ok,
    /// Looks at keys on their shards.
    Object(Vec<u8>),
    DigestValue(Vec<Vec<u8>>),
    Digest,
    /// Creates the keys `<prefix>:0` … `<prefix>:<count - 1>` that do not exist.
    Populate(Populate),
    /// Saves (unless NOSAVE), then loads the file into every shard.
    Reload {
        save: Option<SavePlan>,
        flush: bool,
        merge: bool,
    },
    /// Writes the log out (what every shard fed it), reads its files back, and puts their keys in
    /// place of those in memory.
    LoadAof(LoadAof),
    /// The arguments' error.
    Refuse(Vec<u8>),
}

fn debug_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    // The permission is checked first (in `next`, where the configuration is at hand):
    // an argument error waits behind it.
    let job = job(start.args).unwrap_or_else(Job::Refuse);
    Ok(Box::new(DebugPlan {
        job,
        master: start.master,
        sent: false,
    }))
}

/// What the arguments ask for, or their error.
fn job(args: &crate::table::handler::Args<'_>) -> Result<Job, Vec<u8>> {
    let (n, sub) = (args.len(), args.get(1));
    let is = |word: &str| is_keyword(sub, word);
    Ok(if is("HELP") && n == 2 {
        Job::Help
    } else if is("SEGFAULT") && n == 2 {
        Job::Segfault
    } else if is("PANIC") && n == 2 {
        Job::Panic
    } else if is("SLEEP") && n == 3 {
        // C's `strtod`: what does not read as a number is 0.
        let (secs, _, _) = strtod(args.get(2));
        Job::Sleep(secs)
    } else if is("SET-ACTIVE-EXPIRE") && n == 3 {
        Job::ActiveExpire(atoi(args.get(2)) != 0)
    } else if is("AOF-FLUSH-SLEEP") && n == 3 {
        Job::AofFlushSleep(u64::try_from(atoi(args.get(2))).unwrap_or(0))
    } else if is("SET-SKIP-CHECKSUM-VALIDATION") && n == 3 {
        Job::SkipChecksum(atoi(args.get(2)) != 0)
    } else if is("PAUSE-CRON") && n == 3 {
        Job::PauseCron(atoi(args.get(2)) != 0)
    } else if is("DROP-CLUSTER-PACKET-FILTER") && n == 3 {
        let kind =
            goblin_protocol::parse_i64(args.get(2)).ok_or_else(|| errors::NOT_INTEGER.to_vec())?;
        Job::DropClusterPackets(kind)
    } else if is("OBJECT") && n == 3 {
        Job::Object(args.get(2).to_vec())
    } else if is("DIGEST") && n == 2 {
        Job::Digest
    } else if is("POPULATE") && (3..=5).contains(&n) {
        Job::Populate(Populate::new(args)?)
    } else if is("DIGEST-VALUE") && n >= 2 {
        Job::DigestValue(args.iter_from(2).map(<[u8]>::to_vec).collect())
    } else if is("RELOAD") {
        let (mut save, mut flush, mut merge) = (true, true, false);
        for option in args.iter_from(2) {
            if is_keyword(option, "MERGE") {
                merge = true;
            } else if is_keyword(option, "NOFLUSH") {
                flush = false;
            } else if is_keyword(option, "NOSAVE") {
                save = false;
            } else {
                return Err(RELOAD_OPTIONS.to_vec());
            }
        }
        Job::Reload {
            save: save.then(|| SavePlan::new(SaveKind::Foreground)),
            flush,
            merge,
        }
    } else if is("LOADAOF") && n == 2 {
        Job::LoadAof(LoadAof::Sync)
    } else if is("CHANGE-REPL-ID") && n == 2 {
        Job::ChangeReplId
    } else if is("CONFIG-REWRITE-FORCE-ALL") && n == 2 {
        Job::RewriteAll
    } else if is("REPLICATE") && n >= 3 {
        Job::Replicate(args.iter_from(2).map(<[u8]>::to_vec).collect())
    } else if is("LOG") && n == 3 {
        Job::Log(args.get(2).to_vec())
    } else if is("ERROR") && n == 3 {
        Job::Error(args.get(2).to_vec())
    } else if is("PROTOCOL") && n == 3 {
        Job::Protocol(args.get(2).to_ascii_lowercase())
    } else if is("QUICKLIST-PACKED-THRESHOLD") && n == 3 {
        Job::Ok
    } else if is("REPLYBUFFER") && n == 4 {
        // Accepted as Redis checks it: Goblin's reply buffers have no cron that resizes
        // them by their peak (a buffer gives its room back once written), so there is
        // nothing to tune or stop.
        let (what, value) = (args.get(2), args.get(3));
        if is_keyword(what, "PEAK-RESET-TIME") {
            if !is_keyword(value, "NEVER")
                && !is_keyword(value, "RESET")
                && goblin_protocol::parse_i64(value).is_none()
            {
                return Err(errors::NOT_INTEGER.to_vec());
            }
        } else if !is_keyword(what, "RESIZING") {
            return Err(errors::subcommand_syntax(b"debug", sub));
        }
        Job::Ok
    } else if is("SET-DISABLE-DENY-SCRIPTS") && n == 3 {
        Job::DenyScripts(atoi(args.get(2)) != 0)
    } else {
        return Err(errors::subcommand_syntax(b"debug", sub));
    })
}

/// DEBUG POPULATE's keys: `<prefix>:<n>` for each `n` below `count` (as C's `snprintf`
/// makes them in a 128-byte buffer: the prefix up to a NUL byte, the name cut at 127
/// bytes), each set to `value:<n>` — or, with a size, to that many bytes, zeros after
/// the start of `value:<n>`. A key that exists is left as it is. As in redis-server, no
/// keyspace event, and nothing for the log or replicas.
#[derive(Debug, Default)]
struct Populate {
    count: u64,
    prefix: Vec<u8>,
    size: usize,
}

/// The longest key name DEBUG POPULATE makes (Redis's buffer, less its NUL).
const POPULATE_KEY_MAX: usize = 127;

impl Populate {
    /// `DEBUG POPULATE <count> [<prefix>] [<size>]`'s arguments, checked as redis-server
    /// checks them.
    fn new(args: &crate::table::handler::Args<'_>) -> Result<Self, Vec<u8>> {
        // (Redis's `getPositiveLongFromObjectOrReply`: one error for both.)
        let positive = |arg: &[u8]| -> Result<u64, Vec<u8>> {
            goblin_protocol::parse_i64(arg)
                .and_then(|n| u64::try_from(n).ok())
                .ok_or_else(|| errors::NOT_POSITIVE.to_vec())
        };
        let count = positive(args.get(2))?;
        // redis-server first makes room for that many keys in its table (8 bytes each, a
        // power of two), and answers this when it cannot: a count past the machine's
        // memory is refused rather than worked at for ever with every shard locked.
        let table = count
            .checked_next_power_of_two()
            .and_then(|n| n.checked_mul(8));
        if table.is_none_or(|bytes| bytes > super::server::total_system_memory()) {
            return Err(b"ERR OOM in dictTryExpand".to_vec());
        }
        let prefix = match args.len() {
            3 => b"key".to_vec(),
            _ => args
                .get(3)
                .split(|&b| b == 0)
                .next()
                .unwrap_or_default()
                .to_vec(),
        };
        let size = match args.len() {
            5 => positive(args.get(4))?,
            _ => 0,
        };
        let size = usize::try_from(size).map_err(|_| errors::STRING_TOO_BIG)?;
        Ok(Populate {
            count,
            prefix,
            size,
        })
    }

    /// Creates the keys that live on the hop's shard (neither logged nor replicated,
    /// as redis-server's DEBUG POPULATE propagates nothing).
    fn run(&self, ctx: &mut ShardCtx<'_>) {
        ctx.unlogged();
        let mut key = Vec::with_capacity(POPULATE_KEY_MAX);
        let mut value = Vec::new();
        let mut digits = itoa::Buffer::new();
        for n in 0..self.count {
            let n = digits.format(n);
            key.clear();
            key.extend_from_slice(&self.prefix);
            key.push(b':');
            key.extend_from_slice(n.as_bytes());
            key.truncate(POPULATE_KEY_MAX);
            if ctx.slots.shard_of_key(&key) != ctx.shard || ctx.db.contains(&key, ctx.now) {
                continue;
            }
            value.clear();
            value.extend_from_slice(b"value:");
            value.extend_from_slice(n.as_bytes());
            if self.size > 0 {
                value.resize(self.size, 0);
            }
            ctx.db.set_str(&key, &value, None, ctx.now);
        }
    }
}

/// C's `atoi`: leading blanks, a sign, digits; anything else ends it (0 when none).
fn atoi(s: &[u8]) -> i64 {
    let s = s.trim_ascii_start();
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, s),
    };
    let n = digits
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0i64, |n, &d| {
            n.wrapping_mul(10).wrapping_add(i64::from(d - b'0'))
        });
    if neg { -n } else { n }
}

#[derive(Debug)]
struct DebugPlan {
    job: Job,
    /// Run by this replica's link to its master.
    master: bool,
    sent: bool,
}

impl Plan for DebugPlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        let first = !self.sent;
        self.sent = true;
        match &mut self.job {
            Job::Refuse(error) => cx.done(|e| e.error(error)),
            Job::Segfault => crate::crash::segfault(),
            Job::Panic => crate::crash::panic(&format!(
                "DEBUG PANIC called at Unix time {}",
                cx.now / 1000
            )),
            Job::Sleep(secs) => {
                // Every worker stops until then, as redis-server's one thread does: no
                // client is answered meanwhile, whatever it asks. (Its latency is the
                // command's, recorded once, with its reply.)
                cx.shared.follow.freeze(true);
                let until = std::time::Instant::now() + duration(*secs);
                for peer in cx.shared.peers.iter() {
                    peer.send(vec![crate::runtime::msg::Msg::Sleep(until)]);
                }
                crate::clock::sleep_until(until);
                cx.shared.follow.freeze(false);
                cx.done(|e| e.ok())
            }
            Job::DenyScripts(disabled) => {
                crate::scripting::set_deny_disabled(*disabled);
                cx.done(|e| e.ok())
            }
            Job::ActiveExpire(on) => {
                cx.shared.active_expire.store(*on, Ordering::Relaxed);
                cx.done(|e| e.ok())
            }
            Job::AofFlushSleep(micros) => {
                cx.shared
                    .persist
                    .aof_flush_sleep_us
                    .store(*micros, Ordering::Relaxed);
                cx.done(|e| e.ok())
            }
            Job::SkipChecksum(skip) => {
                goblin_store::rdb::set_skip_checksum(*skip);
                cx.done(|e| e.ok())
            }
            Job::DropClusterPackets(kind) => {
                crate::cluster::bus::drop_packets(*kind);
                cx.done(|e| e.ok())
            }
            Job::PauseCron(on) => {
                cx.shared.cron_paused.store(*on, Ordering::Relaxed);
                if !*on && cx.shared.shutdown_asked.load(Ordering::SeqCst) {
                    // A shutdown a signal asked for meanwhile starts now.
                    cx.shared.peers[0].send(vec![crate::runtime::msg::Msg::Shutdown]);
                }
                cx.done(|e| e.ok())
            }
            Job::Help => cx.done(|e| {
                e.array(HELP.len());
                for line in HELP {
                    e.simple(line.as_bytes());
                }
            }),
            Job::ChangeReplId => {
                cx.shared.new_replication_id();
                cx.done(|e| e.ok())
            }
            Job::RewriteAll => match super::server::rewrite_config(cx.shared, true) {
                Ok(()) => cx.done(|e| e.ok()),
                Err(reason) => cx.done(|e| {
                    e.error(format!("ERR CONFIG-REWRITE-FORCE-ALL failed: {reason}").as_bytes())
                }),
            },
            Job::Log(message) => {
                crate::log!(Warning, "DEBUG LOG: {}", String::from_utf8_lossy(message));
                cx.done(|e| e.ok())
            }
            Job::Replicate(argv) => {
                let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
                cx.propagate_as_is(&argv);
                cx.done(|e| e.ok())
            }
            Job::Error(message) => cx.done(|e| e.error_sanitized(message)),
            Job::Protocol(kind) => cx.done(|e| protocol(e, kind)),
            Job::Ok => cx.done(|e| e.ok()),
            Job::Object(key) if first => {
                let key = std::mem::take(key);
                Step::Hops(vec![Hop::run(cx.slots.shard_of_key(&key), move |ctx| {
                    HopOut::Other(Box::new(describe(ctx, &key)))
                })])
            }
            Job::Object(_) => {
                let line = results.into_iter().next().and_then(|r| match r {
                    HopOut::Other(any) => any.downcast::<Option<String>>().ok().and_then(|b| *b),
                    _ => None,
                });
                match line {
                    Some(line) => cx.done(|e| e.simple(line.as_bytes())),
                    None => cx.done(|e| e.error(b"ERR no such key")),
                }
            }
            Job::DigestValue(keys) if first => {
                let keys = std::mem::take(keys);
                let hops = keys
                    .into_iter()
                    .map(|key| {
                        Hop::run(cx.slots.shard_of_key(&key), move |ctx| {
                            let digest = match ctx.db.get(&key, ctx.now) {
                                Some(e) => value_digest(e.value(), e.expire_at().is_some()),
                                None => [0; 20],
                            };
                            HopOut::Bulks(vec![Some(digest.to_vec())])
                        })
                    })
                    .collect();
                Step::Hops(hops)
            }
            Job::DigestValue(_) => {
                let digests: Vec<String> = results
                    .into_iter()
                    .map(|r| match r {
                        HopOut::Bulks(mut v) => v.pop().flatten().map(|d| hex(&d)),
                        _ => None,
                    })
                    .map(|d| d.unwrap_or_else(|| "0".repeat(40)))
                    .collect();
                cx.done(|e| {
                    e.array(digests.len());
                    for d in &digests {
                        e.simple(d.as_bytes());
                    }
                })
            }
            Job::Digest if first => {
                let hops = (0..cx.slots.shards())
                    .map(|shard| Hop::run(shard, |ctx| HopOut::Other(Box::new(shard_digests(ctx)))))
                    .collect();
                Step::Hops(hops)
            }
            Job::Digest => {
                let databases = cx.shared.config.databases;
                let mut per_db = vec![None::<[u8; 20]>; databases];
                for r in results {
                    let HopOut::Other(any) = r else { continue };
                    let Ok(parts) = any.downcast::<Vec<(usize, [u8; 20])>>() else {
                        continue;
                    };
                    for (db, d) in *parts {
                        if let Some(slot) = per_db.get_mut(db) {
                            let acc = slot.get_or_insert([0; 20]);
                            xor_into(acc, &d);
                        }
                    }
                }
                let mut digest = [0u8; 20];
                for (db, keys) in per_db.iter().enumerate() {
                    if let Some(keys) = keys {
                        mix(&mut digest, &(db as u32).to_be_bytes());
                        xor_into(&mut digest, keys);
                    }
                }
                let text = hex(&digest);
                cx.done(|e| e.simple(text.as_bytes()))
            }
            Job::Populate(populate) if first => {
                // (More than a string may hold: refused, where redis-server would try
                // and run out of memory.)
                if populate.size > cx.shared.client_limits.max_bulk_len() {
                    return cx.done(|e| e.error(errors::STRING_TOO_BIG));
                }
                let populate = std::sync::Arc::new(std::mem::take(populate));
                let hops = (0..cx.slots.shards())
                    .map(|shard| {
                        let populate = std::sync::Arc::clone(&populate);
                        Hop::run(shard, move |ctx| {
                            populate.run(ctx);
                            HopOut::Done
                        })
                    })
                    .collect();
                Step::Hops(hops)
            }
            Job::Populate(_) => cx.done(|e| e.ok()),
            Job::LoadAof(step @ LoadAof::Sync) => {
                // (With the log off, what a BGREWRITEAOF wrote, as redis-server loads it.)
                let persist = cx.shared.live().persist.clone();
                let manifest = crate::persist::aof::Manifest::path(
                    &persist.aof_dir(),
                    &persist.appendfilename,
                );
                if !persist.appendonly && !manifest.exists() {
                    return cx.done(|e| e.error(LOADAOF_WITHOUT_LOG));
                }
                *step = LoadAof::Replay;
                // The log written out first, as redis-server flushes its own.
                let hops = (0..cx.slots.shards())
                    .map(|shard| {
                        Hop::run(shard, |ctx| {
                            ctx.sync_log();
                            HopOut::Flag(true)
                        })
                    })
                    .collect();
                Step::Hops(hops)
            }
            Job::LoadAof(step @ LoadAof::Replay) => {
                // Other clients are told `LOADING` meanwhile, as redis-server tells them
                // while it loads (a slow script of the log's too, rather than BUSY).
                // (Not when the start-up load is still going on: its end says when.)
                let persist = &cx.shared.persist;
                let gated = !persist.loading();
                if gated {
                    persist.loading_again();
                }
                let replayed = crate::persist::load::replay_log_keys(cx.shared);
                if gated {
                    persist.loaded();
                }
                match replayed {
                    Ok(chunks) => {
                        *step = LoadAof::Filled;
                        fill_hops(chunks, true, true)
                    }
                    Err(e) => {
                        crate::log!(Warning, "DEBUG LOADAOF: {e}");
                        cx.done(|out| {
                            out.error(b"ERR Error loading the append-only log, check server logs.")
                        })
                    }
                }
            }
            Job::LoadAof(LoadAof::Filled) => {
                crate::log!(Warning, "Append Only File loaded by DEBUG LOADAOF");
                cx.done(|e| e.ok())
            }
            Job::Reload { save, flush, merge } => {
                // First the save, as SAVE makes it.
                if let Some(plan) = save {
                    match plan.next(cx, results) {
                        Step::Done(Outcome::Reply(reply)) if reply.starts_with(b"+") => {}
                        Step::Done(_) => return cx.done(|e| e.error(b"ERR")),
                        step => return step,
                    }
                    *save = None;
                    return reload_hops(cx, *flush, *merge);
                }
                if first {
                    return reload_hops(cx, *flush, *merge);
                }
                match results.iter().any(|r| matches!(r, HopOut::Flag(false))) {
                    true => cx.done(|e| e.error(b"ERR Error trying to load the RDB dump")),
                    false => {
                        // (A replica's sync says its own words.)
                        if !self.master {
                            crate::log!(Warning, "DB reloaded by DEBUG RELOAD");
                        }
                        let persist = &cx.shared.persist;
                        if self.master && persist.log_on.load(Ordering::SeqCst) {
                            // A replica's log starts again from the master's snapshot
                            // (which it holds nowhere yet), as redis-server's
                            // restartAOFAfterSYNC does.
                            persist.rewrite_scheduled.store(true, Ordering::SeqCst);
                        }
                        cx.done(|e| e.ok())
                    }
                }
            }
        }
    }
}

/// The hops of a reload: the file read here, each shard emptied (unless `flush` is
/// off) and given its keys. The function libraries are the file's with `flush`; without
/// it, the file's are added, replacing those of the same names with `merge`, else
/// failing the reload on a name taken (keys in the file replace those in memory either
/// way). A file that cannot be read empties the shards all the same and fails the
/// reload, as in Redis; without `flush`, nothing changes then.
fn reload_hops(cx: &PlanCx<'_>, flush: bool, merge: bool) -> Step {
    use crate::scripting::functions::RestorePolicy;
    let policy = match (flush, merge) {
        (true, _) => RestorePolicy::Flush,
        (false, true) => RestorePolicy::Replace,
        (false, false) => RestorePolicy::Append,
    };
    let shards = cx.slots.shards();
    let mut chunks: Vec<Chunk> = (0..shards).map(|_| Vec::new()).collect();
    let path = cx.shared.live().persist.rdb_path();
    let now = crate::clock::now_ms();
    let mut put = |db, key: Vec<u8>, value, at| {
        let shard = cx.slots.shard_of_key(&key);
        if let Some(chunk) = chunks.get_mut(shard) {
            chunk.push((db, key, value, at));
        }
    };
    // A replica keeps the keys past their deadline (the full sync's snapshot's too), as
    // redis-server's: its master's DELs remove them.
    let master = cx.shared.follow.view().is_none();
    let read = crate::persist::load::load_rdb(
        cx.shared,
        &path,
        master.then_some(now),
        policy,
        &mut put,
        None,
    );
    if let Err(e) = &read {
        crate::log!(Warning, "DEBUG RELOAD: {e}");
        if !flush {
            chunks.iter_mut().for_each(Vec::clear);
        }
    }
    fill_hops(chunks, flush, read.is_ok())
}

/// Keys loaded from a file, for one shard.
type Chunk = Vec<crate::persist::load::Loaded>;

/// DEBUG LOADAOF's steps.
#[derive(Debug)]
enum LoadAof {
    /// Every shard writes out what it fed the log.
    Sync,
    /// The log's files are read back, and each shard is given its keys.
    Replay,
    /// The keys are in place.
    Filled,
}

/// The hops that give each shard its `chunks` (emptied first with `flush`), answering
/// `ok`. What they change is not logged: it is what the files hold already.
fn fill_hops(chunks: Vec<Chunk>, flush: bool, ok: bool) -> Step {
    let hops = chunks
        .into_iter()
        .enumerate()
        .map(|(shard, chunk)| {
            Hop::run(shard, move |ctx| {
                ctx.unlogged();
                let now = ctx.now;
                // Every database the file fills exists here first (a database this
                // shard never used has no keyspace yet, and would be passed over).
                let mut made = vec![false; ctx.databases()];
                for (db, ..) in &chunk {
                    if let Some(done @ false) = made.get_mut(*db) {
                        *done = true;
                        let _ = ctx.other_db(*db);
                    }
                }
                let mut chunk: Vec<_> = chunk.into_iter().map(Some).collect();
                ctx.for_each_db(|db, keyspace| {
                    if flush {
                        keyspace.clear();
                    }
                    for slot in chunk.iter_mut() {
                        if slot.as_ref().is_some_and(|k| k.0 == db)
                            && let Some((_, key, value, at)) = slot.take()
                        {
                            keyspace.insert(&key, value, at, now);
                        }
                    }
                });
                HopOut::Flag(ok)
            })
        })
        .collect();
    Step::Hops(hops)
}

/// DEBUG SLEEP's sleep, of `secs` as C's `strtod` reads them (an hour at most).
pub(crate) fn sleep(secs: f64) {
    std::thread::sleep(duration(secs));
}

/// DEBUG SLEEP's seconds as a duration: none when not a positive number, an hour at most.
fn duration(secs: f64) -> std::time::Duration {
    if secs.is_finite() && secs > 0.0 {
        std::time::Duration::from_secs_f64(secs.min(3600.0))
    } else {
        std::time::Duration::ZERO
    }
}

/// `DEBUG SLEEP seconds` called by a script (Redis's tests of a script's frozen clock
/// call it): the script's thread sleeps, as redis-server does.
pub(crate) fn script_sleep(arg: &[u8]) {
    sleep(strtod(arg).0);
}

/// `DEBUG PROTOCOL type`: a sample reply of each RESP type.
pub(crate) fn protocol(e: &mut Encoder<'_>, kind: &[u8]) {
    let resp3 = e.version() == goblin_protocol::Version::Resp3;
    match kind {
        b"string" => e.bulk(b"Hello World"),
        b"integer" => e.integer(12345),
        // Redis's sample double (not π).
        #[allow(clippy::approx_constant)]
        b"double" => e.double(3.141),
        b"bignum" => e.big_number(b"1234567999999999999999999999999999999"),
        b"null" => e.null(),
        b"array" | b"set" => {
            if kind == b"set" {
                e.set(3);
            } else {
                e.array(3);
            }
            (0..3).for_each(|i| e.integer(i));
        }
        b"map" => {
            e.map(3);
            for i in 0..3 {
                e.integer(i);
                e.boolean(i == 1);
            }
        }
        b"attrib" => {
            if resp3 {
                e.raw(b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n");
            }
            e.bulk(b"Some real reply following the attribute");
        }
        b"push" if !resp3 => e.error(b"ERR RESP2 is not supported by this command"),
        b"push" => {
            e.push(2);
            e.bulk(b"server-cpu-usage");
            e.integer(42);
            e.bulk(b"Some real reply following the push reply");
        }
        b"verbatim" => e.verbatim(b"txt", b"This is a verbatim\nstring"),
        b"true" => e.boolean(true),
        b"false" => e.boolean(false),
        _ => e.error(PROTOCOL_TYPES),
    }
}

/// `DEBUG OBJECT key`'s line, as `debugCommand` prints it (the address is made up from
/// the key; the LRU clock has Redis's 24 bits of seconds).
fn describe(ctx: &mut ShardCtx<'_>, key: &[u8]) -> Option<String> {
    let (e, idle) = ctx.db.peek_stored(key, ctx.now)?;
    let refcount = super::keys::refcount(&e);
    let encoding = e.encoding();
    let value = e.value();
    // The value's own RDB serialization: a DUMP payload less its type byte, version and
    // checksum.
    let serialized = goblin_store::rdb::dump(value).len().saturating_sub(11);
    let lru = ((ctx.now / 1000).saturating_sub(idle)) & 0xFF_FFFF;
    let address = 0x7f00_0000_0000u64 | (u64::from(Sha1::digest(key)[0]) << 12);
    let mut line = format!(
        "Value at:{address:#x} refcount:{refcount} encoding:{encoding} \
         serializedlength:{serialized} lru:{lru} lru_seconds_idle:{idle}"
    );
    if let ValueRef::List(l) = value {
        let nodes = l.node_count().max(1);
        let bytes: usize = l.iter().map(|x| x.len() + 2).sum::<usize>() + 7 * nodes;
        line.push_str(&format!(
            " ql_nodes:{nodes} ql_avg_node:{:.2} ql_listpack_max:-2 ql_compressed:0 \
             ql_uncompressed_size:{bytes}",
            l.len() as f64 / nodes as f64
        ));
    }
    Some(line)
}

/// `digest[i] ^= SHA1(data)[i]` (Redis's `xorDigest`).
fn xor_digest(digest: &mut [u8; 20], data: &[u8]) {
    xor_into(digest, &Sha1::digest(data));
}

fn xor_into(digest: &mut [u8; 20], other: &[u8; 20]) {
    for (d, o) in digest.iter_mut().zip(other) {
        *d ^= o;
    }
}

/// `xorDigest`, then the digest replaced by its own SHA-1 (Redis's `mixDigest`): the
/// order of what is mixed matters.
fn mix(digest: &mut [u8; 20], data: &[u8]) {
    xor_digest(digest, data);
    *digest = Sha1::digest(&digest[..]);
}

/// A value's digest (`xorObjectDigest`), its expiry marked.
fn value_digest(value: ValueRef<'_>, expires: bool) -> [u8; 20] {
    let mut digest = [0u8; 20];
    digest_value_into(&mut digest, value, expires);
    digest
}

/// Mixes a value into `digest` as `xorObjectDigest` does: its type, then its elements
/// (mixed in order, or XORed where they have none).
fn digest_value_into(digest: &mut [u8; 20], value: ValueRef<'_>, expires: bool) {
    let pair = |digest: &mut [u8; 20], a: &[u8], b: &[u8]| {
        let mut element = [0u8; 20];
        mix(&mut element, a);
        mix(&mut element, b);
        xor_digest(digest, &element);
    };
    // The value's type first (Redis's `OBJ_*` number, big-endian).
    let kind: u32 = match value {
        ValueRef::Str(_) => 0,
        ValueRef::List(_) => 1,
        ValueRef::Set(_) => 2,
        ValueRef::ZSet(_) => 3,
        ValueRef::Hash(_) => 4,
        ValueRef::Stream(_) => 6,
    };
    mix(digest, &kind.to_be_bytes());
    match value {
        ValueRef::Str(s) => mix(digest, s),
        ValueRef::List(l) => l.for_each(|x| mix(digest, x)),
        ValueRef::Set(s) => s.for_each(|m| xor_digest(digest, m)),
        ValueRef::ZSet(z) => z.for_each(|m, score| {
            let mut buf = [0u8; 32];
            pair(digest, m, format_double(score, &mut buf));
        }),
        ValueRef::Hash(h) => h.for_each(|f, v| pair(digest, f, v)),
        ValueRef::Stream(s) => {
            for entry in s.range(StreamId::MIN, StreamId::MAX, false, 0) {
                mix(
                    digest,
                    format!("{}.{}", entry.id.ms, entry.id.seq).as_bytes(),
                );
                for x in &entry.fields {
                    mix(digest, x);
                }
            }
        }
    }
    if expires {
        xor_digest(digest, b"!!expire!!");
    }
}

/// This shard's part of the dataset's digest: for each database with keys here, the
/// XOR of the SHA-1 of each key's digest (the key mixed with its value's).
fn shard_digests(ctx: &mut ShardCtx<'_>) -> Vec<(usize, [u8; 20])> {
    let slots: Vec<usize> = ctx.owned_slots().collect();
    let now = ctx.now;
    let mut out = Vec::new();
    ctx.for_each_db(|db, keyspace: &mut Keyspace| {
        let mut acc = [0u8; 20];
        let mut any = false;
        for &slot in &slots {
            keyspace.for_each_in_slot(slot as u16, now, |e| {
                any = true;
                // The key's name mixed, then its value mixed on into the same digest.
                let mut digest = [0u8; 20];
                mix(&mut digest, e.key());
                digest_value_into(&mut digest, e.value(), e.expire_at().is_some());
                xor_digest(&mut acc, &digest);
            });
        }
        if any {
            out.push((db, acc));
        }
    });
    out
}
