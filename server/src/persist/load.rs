//! Loading at start-up, on a thread of its own while the workers answer `LOADING`.
//!
//! With `appendonly yes`: the log's base snapshot and then its records, generation by
//! generation, replayed into one keyspace that owns every slot (a log of an earlier
//! version has a file per shard of the run that wrote it; this run may have another
//! number), then moved to the shards that own the keys now. A torn last record is cut off (with
//! `aof-load-truncated yes`, the default), anything else malformed stops the server with
//! the file, the offset and the reason. Without the log: the snapshot (`--loadrdb`, or
//! `dir/dbfilename` when it exists), whose keys go straight to their shards.
//!
//! Keys already expired are dropped. The log's file this run appends to is opened; the
//! workers take their keys in chunks, and the last one to be told loading is over ends
//! it.

use std::collections::HashSet;
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use goblin_protocol::Version;
use goblin_store::rdb::{self, RdbKey};
use goblin_store::{Millis, Value};

use super::aof::{self, LogFile, Manifest, TXCOMMIT, TXPART};
use crate::clock;
use crate::repl::master::History;
use crate::runtime::msg::Msg;
use crate::runtime::server::Shared;
use crate::scripting::functions::RestorePolicy;
use crate::shard::Shard;
use crate::shard::slots::SlotMap;
use crate::table::handler::{Args, Exec};

/// Keys sent to a worker in one message.
const CHUNK: usize = 1024;

/// A key on its way to its shard: its database, the key, its value, its expiry.
pub type Loaded = (usize, Vec<u8>, Value, Option<Millis>);

/// What start-up has to do before serving.
#[derive(Debug)]
pub enum Startup {
    /// Nothing to load: the log (when on) is ready now.
    Ready,
    /// A file to load: [`start`] it; the workers answer LOADING until it ends.
    Load,
}

/// Looks at the files: with nothing to load, sets the log's files up at once (so that
/// the workers start with their logs and no client ever sees LOADING).
///
/// # Errors
/// A file that cannot be read or created.
pub fn prepare(shared: &Shared) -> Result<Startup, String> {
    let config = &shared.config.persist;
    let log_exists = config.appendonly
        && (Manifest::path(&config.aof_dir(), &config.appendfilename).exists()
            || config.dir.join(&config.appendfilename).exists());
    if log_exists || snapshot_source(shared)?.is_some() {
        return Ok(Startup::Load);
    }
    load(shared)?;
    shared.persist.loaded();
    Ok(Startup::Ready)
}

/// Starts the loader thread.
///
/// # Errors
/// When the thread cannot start.
pub fn start(shared: Arc<Shared>) -> std::io::Result<()> {
    shared
        .persist
        .loading_workers
        .store(shared.threads, Ordering::SeqCst);
    std::thread::Builder::new()
        .name("goblin-loader".into())
        .spawn(move || match load(&shared) {
            Ok(()) => finish(&shared),
            // redis-server's lines, the reason last.
            Err(e) => crate::log::fatal(&e),
        })
        .map(|_| ())
}

/// Keys to their shards, in chunks; progress in the log.
struct Sink<'a> {
    shared: &'a Shared,
    chunks: Vec<Vec<Loaded>>,
    keys: u64,
    started: Instant,
    reported: Instant,
    /// `key-load-delay` (redis-server's test knob): microseconds slept after each key
    /// loaded; negative, one microsecond every `-n` keys.
    delay: i64,
}

impl<'a> Sink<'a> {
    fn new(shared: &'a Shared) -> Sink<'a> {
        Sink {
            shared,
            chunks: (0..shared.threads).map(|_| Vec::new()).collect(),
            keys: 0,
            started: Instant::now(),
            reported: Instant::now(),
            delay: crate::config::inert::value(&shared.live().inert, "key-load-delay")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
        }
    }

    fn put(&mut self, db: usize, key: Vec<u8>, value: Value, expire_at: Option<Millis>) {
        let shard = self.shared.slots.shard_of_key(&key);
        let Some(chunk) = self.chunks.get_mut(shard) else {
            return;
        };
        chunk.push((db, key, value, expire_at));
        if chunk.len() >= CHUNK {
            let chunk = std::mem::take(chunk);
            self.shared.peers[shard].send(vec![Msg::Load(chunk)]);
        }
        self.keys += 1;
        self.progress();
        let micros = match self.delay {
            0 => 0,
            d if d > 0 => d.unsigned_abs(),
            d => u64::from(self.keys.is_multiple_of(d.unsigned_abs())),
        };
        if micros > 0 {
            std::thread::sleep(std::time::Duration::from_micros(micros));
        }
    }

    fn progress(&mut self) {
        if self.keys.is_multiple_of(CHUNK as u64) {
            self.shared
                .persist
                .loaded_keys
                .store(self.keys, Ordering::Relaxed);
            if self.reported.elapsed().as_secs() >= 1 {
                self.reported = Instant::now();
                let secs = self.started.elapsed().as_secs_f64().max(1e-9);
                crate::log!(
                    Notice,
                    "Loading: {} keys, {:.0} keys/s",
                    self.keys,
                    self.keys as f64 / secs
                );
            }
        }
    }

    fn flush(&mut self) {
        for (shard, chunk) in self.chunks.iter_mut().enumerate() {
            if !chunk.is_empty() {
                self.shared.peers[shard].send(vec![Msg::Load(std::mem::take(chunk))]);
            }
        }
        self.shared
            .persist
            .loaded_keys
            .store(self.keys, Ordering::Relaxed);
    }
}

/// Loads the dataset (and opens the log, when on).
fn load(shared: &Shared) -> Result<(), String> {
    let config = &shared.config.persist;
    let mut sink = Sink::new(shared);
    let started = Instant::now();
    if config.appendonly {
        load_log(shared, &mut sink)?;
    } else {
        if let Some(path) = snapshot_source(shared)? {
            // A master drops the keys found expired, and sends its replicas a DEL of
            // each, when the file recorded a history they continue; a replica keeps
            // them.
            let master = !is_replica(shared);
            let mut expired = master.then(Vec::new);
            let info = load_rdb(
                shared,
                &path,
                master.then(clock::now_ms),
                RestorePolicy::Replace,
                &mut |db, k, v, at| sink.put(db, k, v, at),
                expired.as_mut(),
            )
            .map_err(|e| format!("{e}\nTerminating server after rdb file reading failure."))?;
            if let Some(history) = history_of(&info.aux) {
                restore_history(shared, history, expired.unwrap_or_default());
            }
        }
    }
    sink.flush();
    if sink.keys > 0 {
        crate::log!(
            Notice,
            "DB loaded from disk: {} keys in {:.3} seconds",
            sink.keys,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// The snapshot to load without the log: `--loadrdb` (which must exist), or
/// `dir/dbfilename` when it exists.
fn snapshot_source(shared: &Shared) -> Result<Option<PathBuf>, String> {
    let config = &shared.config.persist;
    match &config.loadrdb {
        Some(path) if path.exists() => Ok(Some(path.clone())),
        Some(path) => Err(format!("--loadrdb {}: no such file", path.display())),
        None => {
            let path = config.rdb_path();
            Ok(path.exists().then_some(path))
        }
    }
}

/// Reads an RDB file, handing each live key to `put` with its database (and those found
/// expired to `expired`, when given); what the file said besides its keys. Keys whose
/// deadline is before `now` are dropped; with `now` `None` they are kept, as a replica
/// keeps them (redis-server drops them only when it is a master: a replica's keys
/// expire by its master's DEL).
pub(crate) fn load_rdb(
    shared: &Shared,
    path: &Path,
    now: Option<Millis>,
    policy: RestorePolicy,
    put: &mut dyn FnMut(usize, Vec<u8>, Value, Option<Millis>),
    expired: Option<&mut Vec<(usize, Vec<u8>)>>,
) -> Result<rdb::RdbInfo, String> {
    let data = read_file(path).map_err(|e| {
        format!(
            "Fatal error loading the DB: {}. Exiting.",
            crate::util::strerror(&e)
        )
    })?;
    load_rdb_bytes(shared, &data, path, now, policy, put, expired)
}

/// This server is configured to follow a master (`replicaof`, or a cluster replica's
/// configuration file).
fn is_replica(shared: &Shared) -> bool {
    crate::config::inert::value(&shared.config.inert, "replicaof").is_some_and(|v| !v.is_empty())
        || shared
            .cluster
            .as_deref()
            .is_some_and(|c| c.lock().me().is_replica())
}

/// The replication history a snapshot recorded (`repl-id`, `repl-offset`,
/// `repl-stream-db`), from its auxiliary fields.
fn history_of(aux: &[(Vec<u8>, Vec<u8>)]) -> Option<History> {
    let field = |name: &[u8]| {
        aux.iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    };
    let replid = field(b"repl-id").filter(|id| id.len() == 40)?.to_string();
    // (An offset from a file: far from the end of i64, so that offsets after it add up.)
    let offset = field(b"repl-offset")?
        .parse::<i64>()
        .ok()
        .filter(|o| (0..i64::MAX / 2).contains(o))?;
    let db = field(b"repl-stream-db")?.parse::<u16>().ok()?;
    Some(History { replid, offset, db })
}

/// A snapshot loaded at start-up recorded `history`, as redis-server's
/// loadDataFromDisk takes it: a replica asks its master to continue from there; a master
/// keeps it as its second id, so that its replicas continue from it, and its stream
/// starts there with a DEL of each key that expired while it was down (`expired`).
fn restore_history(shared: &Shared, history: History, expired: Vec<(usize, Vec<u8>)>) {
    if is_replica(shared) {
        shared.set_replication_id(history.replid.clone());
        shared.repl.restore_as_replica(history);
        return;
    }
    shared.repl.restore_as_master(&history);
    for (db, key) in expired {
        let db = u16::try_from(db).unwrap_or(0);
        shared.repl.propagate(Some(db), &[b"DEL", &key]);
    }
    // (More DELs than the backlog holds: the replicas sync in full.)
    shared.repl.trim();
}

/// [`load_rdb`] of a file's bytes (`path` names it in errors); where its RDB ends (a
/// log's base in redis-server's old form goes on with records after it). Keys whose
/// deadline is before `now` are dropped, unless `now` is `None`: a log's base keeps
/// them, for the records after it may have written to them before their deadline (as
/// redis-server loads a log's RDB preamble).
fn load_rdb_bytes(
    shared: &Shared,
    data: &[u8],
    path: &Path,
    now: Option<Millis>,
    policy: RestorePolicy,
    put: &mut dyn FnMut(usize, Vec<u8>, Value, Option<Millis>),
    mut expired_keys: Option<&mut Vec<(usize, Vec<u8>)>>,
) -> Result<rdb::RdbInfo, String> {
    let databases = shared.config.databases;
    let (mut loaded, mut expired, mut empty) = (0u64, 0u64, 0u64);
    let read = rdb::read(data, |k: RdbKey| {
        let db = usize::try_from(k.db).unwrap_or(usize::MAX);
        if db >= databases {
            // redis-server's refusal, in its words.
            return Err(rdb::RdbError::Refused(format!(
                "FATAL: Data file was created with a Redis server configured to handle \
                 more than {databases} databases. Exiting"
            )));
        }
        // An empty collection (an old redis-server's bug could save one) is passed
        // over, as redis-server passes it over, naming the first ten.
        let Some(value) = k.value.into_value() else {
            empty += 1;
            if empty <= 10 {
                crate::log!(
                    Warning,
                    "rdbLoadObject skipping empty key: {}",
                    String::from_utf8_lossy(&k.key)
                );
            }
            return Ok(());
        };
        if k.expire_at.zip(now).is_some_and(|(at, now)| at < now) {
            expired += 1;
            if let Some(keys) = expired_keys.as_mut() {
                keys.push((db, k.key));
            }
            return Ok(());
        }
        loaded += 1;
        put(db, k.key, value, k.expire_at);
        Ok(())
    });
    shared
        .persist
        .expired_at_load
        .store(expired, Ordering::Relaxed);
    if read.is_ok() {
        match empty {
            0 => crate::log!(
                Notice,
                "Done loading RDB, keys loaded: {loaded}, keys expired: {expired}."
            ),
            _ => crate::log!(
                Warning,
                "Done loading RDB, keys loaded: {loaded}, keys expired: {expired}, empty keys \
                 skipped: {empty}."
            ),
        }
    }
    read.map_err(|e| format!("{}: {e}", path.display()))
        .and_then(|info| {
            // The file's libraries, as `policy` says (DEBUG RELOAD's options; at start-up
            // and for a log's base, replacing those of the same names).
            shared
                .functions
                .restore(&info.functions, policy)
                .map_err(|e| {
                    format!(
                        "{}: its function libraries do not load: {}",
                        path.display(),
                        String::from_utf8_lossy(&e)
                    )
                })
                .map(|()| info)
        })
}

/// A file's bytes, as many as its size says (a device that never ends, such as
/// /dev/full standing in for a full disk, reads as empty).
fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let file = fs::File::open(path)?;
    let len = file.metadata()?.len();
    let mut data = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(len).read_to_end(&mut data)?;
    Ok(data)
}

/// A keyspace owning every slot, that replays a log's commands.
struct Replay<'a> {
    shared: &'a Shared,
    shard: Shard,
    out: Vec<u8>,
    /// The database the records go to (the last `SELECT` replayed).
    db: usize,
    /// The slots of the shard whose file is being replayed: a flush or a SWAPDB in it
    /// was that shard's part of the command, and touches only its slots.
    file_slots: Vec<u16>,
    /// DEBUG LOADAOF's replay: the keys are handed to the shards, and a FUNCTION record
    /// that fails (its library loaded already) is passed over.
    keys_only: bool,
    /// The base is being replayed.
    in_base: bool,
    /// Commands replayed, since when, and the last progress line.
    commands: u64,
    started: Instant,
    reported: Instant,
}

impl<'a> Replay<'a> {
    fn new(shared: &'a Shared) -> Replay<'a> {
        let mut shard = Shard::new(
            0,
            Arc::new(SlotMap::contiguous(1)),
            shared.commands.all().len(),
            shared.config.databases,
        );
        shard.set_replaying();
        Replay {
            shared,
            shard,
            out: Vec::new(),
            db: 0,
            file_slots: (0..goblin_store::SLOTS as u16).collect(),
            keys_only: false,
            in_base: false,
            commands: 0,
            started: Instant::now(),
            reported: Instant::now(),
        }
    }

    /// A file's replay begins: in database 0, its flushes and SWAPDBs touching the slots
    /// of the shard that wrote it (`shard`), or every slot (a file of every key).
    fn start_file(&mut self, shard: Option<(usize, usize)>) {
        self.db = 0;
        self.file_slots = match shard {
            Some((shard, shards)) => SlotMap::contiguous(shards)
                .slots_of(shard)
                .map(|s| s as u16)
                .collect(),
            None => (0..goblin_store::SLOTS as u16).collect(),
        };
    }

    /// Runs one logged command.
    fn apply(&mut self, args: &Args<'_>) -> Result<(), Failed> {
        self.commands += 1;
        if self.commands.is_multiple_of(4096) && self.reported.elapsed().as_secs() >= 1 {
            self.reported = Instant::now();
            let secs = self.started.elapsed().as_secs_f64().max(1e-9);
            crate::log!(
                Notice,
                "Loading the append-only log: {} commands, {:.0} commands/s",
                self.commands,
                self.commands as f64 / secs
            );
        }
        let spec = self.shared.commands.resolve(args).map_err(|r| {
            match self.shared.commands.lookup(args.get(0)) {
                None => Failed::Unknown(String::from_utf8_lossy(args.get(0)).into_owned()),
                Some(_) => Failed::Other(String::from_utf8_lossy(&r.message).into_owned()),
            }
        })?;
        let now = clock::now_ms();
        match spec.exec {
            Exec::Shard(_) => {
                let version = self.shard.slots().version();
                self.out.clear();
                self.shard.execute(
                    self.shared,
                    spec,
                    args,
                    self.db,
                    now,
                    &mut self.out,
                    Version::Resp2,
                    None,
                    version,
                );
                Ok(())
            }
            _ if spec.name == "select" => {
                self.db = db_arg(args, 1, self.shared.config.databases)?;
                Ok(())
            }
            _ if spec.name == "flushall" => {
                for db in 0..self.shared.config.databases {
                    self.clear(db, now);
                }
                Ok(())
            }
            _ if spec.name == "flushdb" => {
                self.clear(self.db, now);
                Ok(())
            }
            _ if spec.name.starts_with("function|") => {
                if self.in_base && spec.name == "function|load" {
                    // A base's libraries replace those of the same names, as an RDB
                    // base's do.
                    let code = args.get(args.len().saturating_sub(1)).to_vec();
                    return self
                        .shared
                        .functions
                        .restore(&[code], RestorePolicy::Replace)
                        .map_err(|e| Failed::Other(String::from_utf8_lossy(&e).into_owned()));
                }
                let done = crate::families::functions::replay(self.shared, args);
                match self.keys_only {
                    // (DEBUG LOADAOF replays them over the libraries in place: one that
                    // fails — a library loaded already — is passed over, as
                    // redis-server's AOF client's errors are.)
                    true => Ok(()),
                    false => done.map_err(Failed::Other),
                }
            }
            _ if spec.name == "swapdb" => {
                let databases = self.shared.config.databases;
                let (a, b) = (db_arg(args, 1, databases)?, db_arg(args, 2, databases)?);
                self.swap(a, b, now);
                Ok(())
            }
            _ => Err(Failed::Other(format!(
                "the command '{}' cannot be in a log",
                spec.name
            ))),
        }
    }

    /// Empties database `db` in the slots of the file being replayed.
    fn clear(&mut self, db: usize, now: Millis) {
        for &slot in &self.file_slots {
            self.shard.drain_slot_for_load(db, slot, now, |_, _, _| {});
        }
    }

    /// Exchanges databases `a` and `b` in the slots of the file being replayed.
    fn swap(&mut self, a: usize, b: usize, now: Millis) {
        if a == b {
            return;
        }
        for &slot in &self.file_slots {
            let mut moved: Vec<Loaded> = Vec::new();
            for (from, to) in [(a, b), (b, a)] {
                // (Keys past their deadline move too: nothing expires in a replay.)
                self.shard.drain_slot_for_load(from, slot, 0, |k, v, at| {
                    moved.push((to, k, v, at));
                });
            }
            self.shard.load(moved, now);
        }
    }

    /// Hands every key to `put`, with its database.
    fn drain(mut self, mut put: impl FnMut(usize, Vec<u8>, Value, Option<Millis>)) {
        let now = clock::now_ms();
        for db in 0..self.shared.config.databases {
            for slot in 0..goblin_store::SLOTS as u16 {
                self.shard
                    .drain_slot_for_load(db, slot, now, |k, v, at| put(db, k, v, at));
            }
        }
    }
}

/// Loads the log (or, on its first start, the snapshot as its base) and sets up the
/// files this run appends to. A log redis-server wrote loads as it does there, an
/// old-style single file (`dir/appendonly.aof`, Redis before 7.0) first moved into the
/// log's directory with a manifest naming it as the base, as redis-server 7 upgrades it.
fn load_log(shared: &Shared, sink: &mut Sink<'_>) -> Result<(), String> {
    let config = &shared.config.persist;
    let dir = config.aof_dir();
    let name = &config.appendfilename;
    let started = Instant::now();
    fs::create_dir_all(&dir).map_err(|e| {
        format!(
            "Can't open or create append-only dir {}: {}",
            dir.display(),
            crate::util::strerror(&e)
        )
    })?;
    let mut manifest = Manifest::load(&dir, name)?;
    upgrade_old_style(&config.dir, &dir, name, &mut manifest)?;
    let mut replay = Replay::new(shared);
    let now = clock::now_ms();
    let mut manifest = match manifest {
        Some(manifest) if manifest.files().next().is_some() => {
            let torn = match config.aof_load_truncated {
                true => Torn::Cut,
                false => Torn::Fail,
            };
            replay_manifest(&mut replay, &manifest, &dir, torn)?;
            crate::log!(
                Notice,
                "DB loaded from append only file: {:.3} seconds",
                started.elapsed().as_secs_f64()
            );
            manifest
        }
        manifest => {
            // The log's first start: an existing snapshot becomes its base.
            let mut manifest = manifest.unwrap_or_default();
            if let Some(path) = snapshot_source(shared)? {
                load_rdb(
                    shared,
                    &path,
                    (!is_replica(shared)).then_some(now),
                    RestorePolicy::Replace,
                    &mut |db, k, v, at| {
                        replay.shard.load_one(db, k, v, at, now);
                    },
                    None,
                )?;
                let seq = manifest.next_base_seq();
                let base = aof::base_name(name, seq, true);
                fs::copy(&path, dir.join(&base)).map_err(|e| format!("{}: {e}", path.display()))?;
                manifest.base = Some(LogFile {
                    name: base,
                    seq,
                    shard: None,
                });
            } else {
                manifest.base = Some(empty_base(shared, &dir, name, manifest.next_base_seq())?);
            }
            manifest
        }
    };
    replay.drain(|db, k, v, at| sink.put(db, k, v, at));
    // This run's file: the last generation's when it is one file of every key (as
    // redis-server's; older Goblin versions wrote a file per shard), else a new one.
    let file = match manifest
        .last_generation(1)
        .and_then(|mut files| files.pop())
    {
        Some(file) => {
            crate::log!(
                Notice,
                "Opening AOF incr file {} on server start",
                file.name
            );
            file
        }
        None => {
            // Record files are numbered on from the last one (a base has its own
            // numbers, as in redis-server).
            let file = aof::generation_file(name, manifest.last_incr_seq() + 1, 0, 1);
            aof::create_empty(&dir.join(&file.name)).map_err(|e| format!("{}: {e}", file.name))?;
            crate::log!(
                Notice,
                "Creating AOF incr file {} on server start",
                file.name
            );
            manifest.incr.push(file.clone());
            aof::sync_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            manifest
                .save(&dir, name)
                .map_err(|e| format!("{}: {e}", dir.display()))?;
            file
        }
    };
    let persist = &shared.persist;
    persist
        .log
        .open(dir.join(&file.name))
        .map_err(|e| format!("{}: {e}", file.name))?;
    let sizes = manifest.size(&dir);
    persist.aof_current_size.store(sizes, Ordering::Relaxed);
    persist.aof_base_size.store(sizes, Ordering::Relaxed);
    if let Ok(mut slot) = persist.manifest.lock() {
        *slot = Some(manifest);
    }
    Ok(())
}

/// The base of a log started on an empty dataset, as redis-server's
/// `aofOpenIfNeededOnServerStart` writes it: an RDB file without keys, or (with
/// `aof-use-rdb-preamble no`) a file without commands.
fn empty_base(shared: &Shared, dir: &Path, name: &str, seq: u64) -> Result<LogFile, String> {
    let persist = &shared.persist;
    let rdb = persist.rdb_preamble.load(Ordering::Relaxed);
    let base = aof::base_name(name, seq, rdb);
    let path = dir.join(&base);
    let written = match rdb {
        true => super::snapshot::write_file(&path, None, &[], None, &[]),
        false => aof::create_empty(&path).and_then(|mut file| {
            use std::io::Write as _;
            if persist.aof_timestamps.load(Ordering::Relaxed) {
                file.write_all(aof::timestamp_annotation(clock::now_ms() / 1000).as_bytes())?;
            }
            file.sync_all()
        }),
    };
    written.map_err(|e| format!("{}: {e}", path.display()))?;
    crate::log!(Notice, "Creating AOF base file {base} on server start");
    Ok(LogFile {
        name: base,
        seq,
        shard: None,
    })
}

/// redis-server 7's upgrade of an old-style log: when `server_dir/name` exists and the
/// log's directory (which exists) has no manifest naming other files (none, one listing no file, or
/// one listing only that file as its base, which an upgrade cut short leaves), the
/// manifest becomes `file <name> seq 1 type b`, written first, and the file moves into
/// the log's directory.
fn upgrade_old_style(
    server_dir: &Path,
    dir: &Path,
    name: &str,
    manifest: &mut Option<Manifest>,
) -> Result<(), String> {
    let old = server_dir.join(name);
    if !old.exists() {
        return Ok(());
    }
    let upgrade = match manifest {
        None => true,
        Some(m) if m.files().next().is_none() => true,
        Some(m) => {
            m.incr.is_empty()
                && m.base.as_ref().is_some_and(|b| b.name == name)
                && !dir.join(name).exists()
        }
    };
    if !upgrade {
        return Ok(());
    }
    let strerror = crate::util::strerror;
    let mut m = manifest.take().unwrap_or_default();
    m.base = Some(LogFile {
        name: name.to_string(),
        seq: 1,
        shard: None,
    });
    m.save(dir, name)
        .map_err(|e| format!("{}: {}", Manifest::path(dir, name).display(), strerror(&e)))?;
    fs::rename(&old, dir.join(name)).map_err(|e| {
        format!(
            "Error trying to move the old AOF file {name} into dir {}: {}",
            dir.display(),
            strerror(&e)
        )
    })?;
    crate::log!(
        Notice,
        "Successfully migrated an old-style AOF file ({name}) into the AOF directory ({}).",
        dir.display()
    );
    *manifest = Some(m);
    Ok(())
}

/// Replays what `manifest` lists in `dir`: its base, then its generations in order.
/// Every file listed must exist (as redis-server checks before it loads any).
fn replay_manifest(
    replay: &mut Replay<'_>,
    manifest: &Manifest,
    dir: &Path,
    torn: Torn,
) -> Result<(), String> {
    let size = |f: &LogFile| {
        fs::metadata(dir.join(&f.name))
            .map(|m| m.len())
            .map_err(|e| {
                format!(
                    "Unable to obtain the AOF file {} length. stat: {}",
                    f.name,
                    crate::util::strerror(&e)
                )
            })
    };
    if let Some(base) = &manifest.base {
        size(base)?;
    }
    // The record files' generations and sizes.
    let sizes: Vec<(u64, u64)> = manifest
        .incr
        .iter()
        .map(|f| size(f).map(|len| (f.seq, len)))
        .collect::<Result<_, _>>()?;
    // A file may end torn when nothing after it holds a record: it is the last one
    // written (redis-server's "last file"; a run that started after it and wrote
    // nothing leaves empty files behind it).
    let nothing_after = |seq: Option<u64>| {
        sizes
            .iter()
            .all(|&(s, len)| seq.is_some_and(|seq| s <= seq) || len == 0)
    };
    let mut seqs: Vec<u64> = manifest.incr.iter().map(|f| f.seq).collect();
    seqs.dedup();
    if let Some(base) = &manifest.base {
        let started = Instant::now();
        replay_base(replay, base, dir, torn, nothing_after(None))?;
        crate::log!(
            Notice,
            "DB loaded from base file {}: {:.3} seconds",
            base.name,
            started.elapsed().as_secs_f64()
        );
    }
    for seq in seqs {
        let files: Vec<&LogFile> = manifest.incr.iter().filter(|f| f.seq == seq).collect();
        replay_generation(replay, dir, &files, torn, nothing_after(Some(seq)))?;
    }
    Ok(())
}

/// Replays a log's base: an RDB file (Goblin's, redis-server's `.base.rdb`), records
/// (redis-server's `.base.aof`), or an RDB file followed by records (an old-style log
/// with an RDB preamble).
fn replay_base(
    replay: &mut Replay<'_>,
    base: &LogFile,
    dir: &Path,
    on_torn: Torn,
    last: bool,
) -> Result<(), String> {
    let path = dir.join(&base.name);
    let bytes = read_log_file(&path, &base.name)?;
    let mut start = 0;
    if bytes.starts_with(b"REDIS") {
        // An upgraded old-style log keeps its name: its RDB is a preamble.
        let old_style = base.name == replay.shared.config.persist.appendfilename;
        crate::log!(
            Notice,
            "{}",
            match old_style {
                true => "Reading RDB preamble from AOF file...",
                false => "Reading RDB base file on AOF loading...",
            }
        );
        let now = clock::now_ms();
        let shard = &mut replay.shard;
        start = load_rdb_bytes(
            replay.shared,
            &bytes,
            &path,
            None,
            RestorePolicy::Replace,
            &mut |db, k, v, at| shard.load_one(db, k, v, at, now),
            None,
        )
        .map(|info| info.end)
        .map_err(|e| {
            let what = match old_style {
                true => "the RDB preamble of the AOF file",
                false => "the RDB base file",
            };
            format!(
                "{e}\nError reading {what} {}, AOF loading aborted",
                base.name
            )
        })?;
        if old_style {
            crate::log!(Notice, "Reading the remaining AOF tail...");
        }
    }
    replay.start_file(None);
    replay.in_base = true;
    let ended = replay_file(replay, &base.name, &bytes, start, &HashSet::new());
    replay.in_base = false;
    end_of_file(&path, &base.name, ended?, on_torn, last)
}

/// A log file's bytes, or redis-server's words for why they cannot be read.
fn read_log_file(path: &Path, name: &str) -> Result<Vec<u8>, String> {
    read_file(path).map_err(|e| {
        format!(
            "Fatal error: can't open the append log file {name} for reading: {}",
            crate::util::strerror(&e)
        )
    })
}

/// What a torn last record of a file does to its replay.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Torn {
    /// It is cut off the file (`aof-load-truncated yes`).
    Cut,
    /// The load fails.
    Fail,
    /// It is left where it is, unreplayed (a log being appended to).
    Leave,
}

/// DEBUG LOADAOF's read of the log (its files written out first): the keys it holds,
/// in chunks by the shard that owns them now. The log's FUNCTION records are replayed
/// over the libraries in place (those that fail passed over, as by redis-server), and
/// nothing is written.
///
/// # Errors
/// A file that cannot be read or replayed.
pub(crate) fn replay_log_keys(shared: &Shared) -> Result<Vec<Vec<Loaded>>, String> {
    let config = &shared.config.persist;
    let dir = config.aof_dir();
    let mut replay = Replay::new(shared);
    replay.keys_only = true;
    if let Some(manifest) = Manifest::load(&dir, &config.appendfilename)? {
        replay_manifest(&mut replay, &manifest, &dir, Torn::Leave)?;
    }
    let mut chunks: Vec<Vec<Loaded>> = (0..shared.threads).map(|_| Vec::new()).collect();
    replay.drain(|db, k, v, at| {
        if let Some(chunk) = chunks.get_mut(shared.slots.shard_of_key(&k)) {
            chunk.push((db, k, v, at));
        }
    });
    Ok(chunks)
}

/// Why a logged command could not be replayed.
enum Failed {
    /// No such command.
    Unknown(String),
    /// Another reason.
    Other(String),
}

impl From<String> for Failed {
    fn from(why: String) -> Failed {
        Failed::Other(why)
    }
}

/// A unit of a log being replayed: plain commands, a `MULTI` block, a transaction's part.
enum Unit {
    Plain,
    Multi,
    Part { id: Vec<u8>, left: usize },
}

/// Replays one generation: its transactions' commits first (from every file), then
/// each file's records. `last`: it is the log's last generation, whose files may end
/// in a torn record.
fn replay_generation(
    replay: &mut Replay<'_>,
    dir: &Path,
    files: &[&LogFile],
    on_torn: Torn,
    last: bool,
) -> Result<(), String> {
    let mut data = Vec::with_capacity(files.len());
    for f in files {
        let path = dir.join(&f.name);
        let bytes = read_log_file(&path, &f.name)?;
        data.push((path, f, bytes));
    }
    let mut commits: HashSet<Vec<u8>> = HashSet::new();
    for (_, _, bytes) in &data {
        let mut at = skip_annotations(bytes, 0);
        while let Ok(Some((args, len))) = aof::parse_record(&bytes[at..]) {
            let record = Args::new(&bytes[at..], &args);
            if record.len() == 2 && record.get(0).eq_ignore_ascii_case(TXCOMMIT) {
                commits.insert(record.get(1).to_vec());
            }
            at = skip_annotations(bytes, at + len);
        }
    }
    for (path, f, bytes) in &data {
        let started = Instant::now();
        replay.start_file(f.shard);
        let ended = replay_file(replay, &f.name, bytes, 0, &commits)?;
        end_of_file(path, &f.name, ended, on_torn, last)?;
        if on_torn != Torn::Leave {
            crate::log!(
                Notice,
                "DB loaded from incr file {}: {:.3} seconds",
                f.name,
                started.elapsed().as_secs_f64()
            );
        }
    }
    Ok(())
}

/// How a file's replay ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ended {
    /// At a record's end.
    Whole,
    /// In a torn record, or inside a unit (`MULTI`, a transaction's part) the file
    /// does not finish (`unit`): what is whole ends at `valid`.
    Short { valid: usize, unit: bool },
}

/// What a file that ended short does to the load, in redis-server's words: cut
/// (`aof-load-truncated yes`, only in the last file: a torn file before others is an
/// error) or refused.
fn end_of_file(
    path: &Path,
    name: &str,
    ended: Ended,
    on_torn: Torn,
    last: bool,
) -> Result<(), String> {
    let Ended::Short { valid, unit } = ended else {
        return Ok(());
    };
    if on_torn == Torn::Leave {
        return Ok(());
    }
    if unit {
        crate::log!(
            Warning,
            "Revert incomplete MULTI/EXEC transaction in AOF file {name}"
        );
    }
    if on_torn == Torn::Fail {
        return Err(format!(
            "Unexpected end of file reading the append only file {name}. You can: 1) Make a \
             backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. \
             2) Alternatively you can set the 'aof-load-truncated' configuration option to \
             yes and restart the server."
        ));
    }
    crate::log!(
        Warning,
        "!!! Warning: short read while loading the AOF file {name}!!!"
    );
    crate::log!(
        Warning,
        "!!! Truncating the AOF {name} at offset {valid} !!!"
    );
    OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(valid as u64))
        .map_err(|e| {
            format!(
                "Error truncating the AOF file {name}: {}",
                crate::util::strerror(&e)
            )
        })?;
    crate::log!(
        Warning,
        "AOF {name} loaded anyway because aof-load-truncated is enabled"
    );
    if !last {
        return Err("Fatal error: the truncated file is not the last file".into());
    }
    Ok(())
}

/// Where the next record starts at or after `at`: annotation lines (`#…`, such as
/// redis-server's `#TS:` timestamps) are passed over, as redis-server's loader does.
fn skip_annotations(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at) == Some(&b'#') {
        at = match bytes[at..].iter().position(|&b| b == b'\n') {
            Some(nl) => at + nl + 1,
            None => bytes.len(),
        };
    }
    at
}

/// Replays a file's records from offset `from`.
fn replay_file(
    replay: &mut Replay<'_>,
    name: &str,
    bytes: &[u8],
    from: usize,
    commits: &HashSet<Vec<u8>>,
) -> Result<Ended, String> {
    let mut at = from;
    let mut unit = Unit::Plain;
    let mut unit_start = from;
    // Records of the open unit, replayed when it closes.
    let mut pending: Vec<(usize, Vec<std::ops::Range<usize>>)> = Vec::new();
    // The database as the records select it, whether or not the unit they are in is
    // replayed: the writer selects again only when its database changes, whatever
    // became of the units before.
    let mut selected = replay.db;
    let fail = |offset: usize, why: &str| format!("{name}: at offset {offset}: {why}");
    loop {
        at = skip_annotations(bytes, at);
        let rest = &bytes[at..];
        // Ended short at `at`: what is whole ends there, or before the open unit.
        let short = match unit {
            Unit::Plain => Ended::Short {
                valid: at,
                unit: false,
            },
            _ => Ended::Short {
                valid: unit_start,
                unit: true,
            },
        };
        if rest.is_empty() {
            return Ok(match unit {
                Unit::Plain => Ended::Whole,
                _ => short,
            });
        }
        let (args, len) = match aof::parse_record(rest) {
            Ok(Some(record)) => record,
            Ok(None) => return Ok(short),
            Err(why) => {
                return Err(format!(
                    "{}\nBad file format reading the append only file {name}: make a backup \
                     of your AOF file, then use ./redis-check-aof --fix <filename.manifest>",
                    fail(at, &why)
                ));
            }
        };
        let record = Args::new(rest, &args);
        let name_arg = record.get(0);
        if name_arg.eq_ignore_ascii_case(b"SELECT") {
            selected =
                db_arg(&record, 1, replay.shared.config.databases).map_err(|e| fail(at, &e))?;
        }
        let apply = |replay: &mut Replay<'_>, offset: usize, record: &Args<'_>| {
            replay.apply(record).map_err(|e| match e {
                Failed::Unknown(command) => {
                    format!("Unknown command '{command}' reading the append only file {name}")
                }
                Failed::Other(why) => fail(offset, &why),
            })
        };
        match &mut unit {
            Unit::Plain if name_arg.eq_ignore_ascii_case(b"MULTI") => {
                unit = Unit::Multi;
                unit_start = at;
            }
            Unit::Plain if name_arg.eq_ignore_ascii_case(TXPART) => {
                let count = (record.len() == 3)
                    .then(|| {
                        std::str::from_utf8(record.get(2))
                            .ok()?
                            .parse::<usize>()
                            .ok()
                    })
                    .flatten()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| fail(at, "a malformed GOBLIN.TXPART"))?;
                unit = Unit::Part {
                    id: record.get(1).to_vec(),
                    left: count,
                };
                unit_start = at;
            }
            Unit::Plain if name_arg.eq_ignore_ascii_case(TXCOMMIT) => {}
            Unit::Plain => apply(replay, at, &record)?,
            Unit::Multi if name_arg.eq_ignore_ascii_case(b"EXEC") => {
                for (offset, args) in pending.drain(..) {
                    apply(replay, offset, &Args::new(&bytes[offset..], &args))?;
                }
                replay.db = selected;
                unit = Unit::Plain;
            }
            Unit::Multi => pending.push((at, args)),
            Unit::Part { id, left } => {
                pending.push((at, args));
                *left -= 1;
                if *left == 0 {
                    let committed = commits.contains(id.as_slice());
                    for (offset, args) in pending.drain(..) {
                        if committed {
                            apply(replay, offset, &Args::new(&bytes[offset..], &args))?;
                        }
                    }
                    replay.db = selected;
                    unit = Unit::Plain;
                }
            }
        }
        at += len;
    }
}

/// Argument `i` of a logged command as a database number below `databases`.
fn db_arg(args: &Args<'_>, i: usize, databases: usize) -> Result<usize, String> {
    std::str::from_utf8(args.get(i))
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|&db| db < databases)
        .ok_or_else(|| {
            format!(
                "database '{}' is not one of this server's {databases} databases",
                String::from_utf8_lossy(args.get(i))
            )
        })
}

/// Tells each worker loading is over.
fn finish(shared: &Shared) {
    for peer in &shared.peers {
        peer.send(vec![Msg::Loaded]);
    }
}
