//! Loading at start-up, on a thread of its own while the workers answer `LOADING`.
//!
//! With `appendonly yes`: the log's base snapshot and then its records, generation by
//! generation, replayed into one keyspace that owns every slot (the log's files were
//! written by as many shards as the last run had; this run may have another number), then
//! moved to the shards that own the keys now. A torn last record is cut off (with
//! `aof-load-truncated yes`, the default), anything else malformed stops the server with
//! the file, the offset and the reason. Without the log: the snapshot (`--loadrdb`, or
//! `dir/dbfilename` when it exists), whose keys go straight to their shards.
//!
//! Keys already expired are dropped. The workers take their keys in chunks, then their
//! log (the file this run appends to), and the last one to do so ends the loading.

use std::collections::HashSet;
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use goblin_protocol::Version;
use goblin_store::rdb::{self, RdbKey};
use goblin_store::{Millis, Value};

use super::aof::{self, AofLog, LogFile, Manifest, TXCOMMIT, TXPART};
use crate::clock;
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
    /// Nothing to load: each worker's log (when the log is on), ready now.
    Ready(Vec<Option<AofLog>>),
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
    let log_exists =
        config.appendonly && Manifest::path(&config.aof_dir(), &config.appendfilename).exists();
    if log_exists || snapshot_source(shared)?.is_some() {
        return Ok(Startup::Load);
    }
    let logs = load(shared)?;
    shared.persist.loaded();
    Ok(Startup::Ready(logs))
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
            Ok(logs) => finish(&shared, logs),
            Err(e) => {
                crate::log!(Warning, "{e}");
                crate::log!(Warning, "can't load the dataset; exiting");
                std::process::exit(1);
            }
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

/// Loads the dataset; returns each worker's log, when the log is on.
fn load(shared: &Shared) -> Result<Vec<Option<AofLog>>, String> {
    let config = &shared.config.persist;
    let mut sink = Sink::new(shared);
    let started = Instant::now();
    let logs = if config.appendonly {
        load_log(shared, &mut sink)?
    } else {
        if let Some(path) = snapshot_source(shared)? {
            let now = clock::now_ms();
            load_rdb(
                shared,
                &path,
                now,
                RestorePolicy::Replace,
                &mut |db, k, v, at| sink.put(db, k, v, at),
            )?;
        }
        (0..shared.threads).map(|_| None).collect()
    };
    sink.flush();
    if sink.keys > 0 {
        crate::log!(
            Notice,
            "DB loaded from disk: {} keys in {:.3} seconds",
            sink.keys,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(logs)
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

/// Reads an RDB file, handing each live key to `put` with its database.
pub(crate) fn load_rdb(
    shared: &Shared,
    path: &Path,
    now: Millis,
    policy: RestorePolicy,
    put: &mut dyn FnMut(usize, Vec<u8>, Value, Option<Millis>),
) -> Result<(), String> {
    let data = read_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let databases = shared.config.databases;
    rdb::read(&data, |k: RdbKey| {
        let db = usize::try_from(k.db).unwrap_or(usize::MAX);
        if db >= databases {
            // redis-server's refusal, in its words.
            return Err(rdb::RdbError::Refused(format!(
                "FATAL: Data file was created with a Redis server configured to handle \
                 more than {databases} databases. Exiting"
            )));
        }
        if k.expire_at.is_some_and(|at| at < now) {
            return Ok(());
        }
        if let Some(value) = k.value.into_value() {
            put(db, k.key, value, k.expire_at);
        }
        Ok(())
    })
    .map_err(|e| format!("{}: {e}", path.display()))
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
    /// Only the keys: the log's FUNCTION records are passed over (DEBUG LOADAOF).
    keys_only: bool,
    /// Commands replayed, since when, and the last progress line.
    commands: u64,
    started: Instant,
    reported: Instant,
}

impl<'a> Replay<'a> {
    fn new(shared: &'a Shared) -> Replay<'a> {
        Replay {
            shared,
            shard: Shard::new(
                0,
                Arc::new(SlotMap::contiguous(1)),
                shared.commands.all().len(),
                shared.config.databases,
            ),
            out: Vec::new(),
            db: 0,
            file_slots: (0..goblin_store::SLOTS as u16).collect(),
            keys_only: false,
            commands: 0,
            started: Instant::now(),
            reported: Instant::now(),
        }
    }

    /// Runs one logged command.
    fn apply(&mut self, args: &Args<'_>) -> Result<(), String> {
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
        let spec = self
            .shared
            .commands
            .resolve(args)
            .map_err(|r| String::from_utf8_lossy(&r.message).into_owned())?;
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
            _ if spec.name.starts_with("function|") => match self.keys_only {
                true => Ok(()),
                false => crate::families::functions::replay(self.shared, args),
            },
            _ if spec.name == "swapdb" => {
                let databases = self.shared.config.databases;
                let (a, b) = (db_arg(args, 1, databases)?, db_arg(args, 2, databases)?);
                self.swap(a, b, now);
                Ok(())
            }
            _ => Err(format!("the command '{}' cannot be in a log", spec.name)),
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
                self.shard.drain_slot_for_load(from, slot, now, |k, v, at| {
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
/// files this run appends to.
fn load_log(shared: &Shared, sink: &mut Sink<'_>) -> Result<Vec<Option<AofLog>>, String> {
    let config = &shared.config.persist;
    let dir = config.aof_dir();
    let name = &config.appendfilename;
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut replay = Replay::new(shared);
    let now = clock::now_ms();
    let mut manifest = match Manifest::load(&dir, name)? {
        Some(manifest) => {
            let torn = match config.aof_load_truncated {
                true => Torn::Cut,
                false => Torn::Fail,
            };
            replay_manifest(&mut replay, &manifest, &dir, torn)?;
            manifest
        }
        None => {
            // The log's first start: an existing snapshot becomes its base.
            let mut manifest = Manifest::default();
            if let Some(path) = snapshot_source(shared)? {
                load_rdb(
                    shared,
                    &path,
                    now,
                    RestorePolicy::Replace,
                    &mut |db, k, v, at| {
                        replay.shard.load_one(db, k, v, at, now);
                    },
                )?;
                let base = aof::base_name(name, 1);
                fs::copy(&path, dir.join(&base)).map_err(|e| format!("{}: {e}", path.display()))?;
                manifest.base = Some(LogFile {
                    name: base,
                    seq: 1,
                    shard: None,
                });
            }
            manifest
        }
    };
    replay.drain(|db, k, v, at| sink.put(db, k, v, at));
    // This run's files: the last generation's when it has one file per shard of this
    // run, else a new generation.
    let shards = shared.threads;
    let files = match manifest.last_generation(shards) {
        Some(files) => files,
        None => {
            let seq = manifest.last_seq() + 1;
            let files: Vec<LogFile> = (0..shards)
                .map(|shard| LogFile {
                    name: aof::incr_name(name, seq, shard),
                    seq,
                    shard: Some((shard, shards)),
                })
                .collect();
            for f in &files {
                aof::create_empty(&dir.join(&f.name)).map_err(|e| format!("{}: {e}", f.name))?;
            }
            manifest.incr.extend(files.iter().cloned());
            aof::sync_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            manifest
                .save(&dir, name)
                .map_err(|e| format!("{}: {e}", dir.display()))?;
            files
        }
    };
    let persist = &shared.persist;
    let mut logs = Vec::with_capacity(shards);
    let mut handles = Vec::with_capacity(shards);
    for f in &files {
        let log = AofLog::open(
            Arc::clone(persist),
            config.appendfsync,
            dir.clone(),
            name.clone(),
            f.shard.map_or(0, |(shard, _)| shard),
            f.seq,
        )
        .map_err(|e| format!("{}: {e}", f.name))?;
        handles.push(Some(log.handle().map_err(|e| format!("{}: {e}", f.name))?));
        logs.push(Some(log));
    }
    let sizes = manifest.size(&dir);
    persist.aof_current_size.store(sizes, Ordering::Relaxed);
    persist.aof_base_size.store(sizes, Ordering::Relaxed);
    if let Ok(mut slot) = persist.aof_files.lock() {
        *slot = handles;
    }
    if let Ok(mut slot) = persist.manifest.lock() {
        *slot = Some(manifest);
    }
    Ok(logs)
}

/// Replays what `manifest` lists in `dir`: its base snapshot, then its generations in
/// order.
fn replay_manifest(
    replay: &mut Replay<'_>,
    manifest: &Manifest,
    dir: &Path,
    torn: Torn,
) -> Result<(), String> {
    let now = clock::now_ms();
    if let Some(base) = &manifest.base {
        load_rdb(
            replay.shared,
            &dir.join(&base.name),
            now,
            RestorePolicy::Replace,
            &mut |db, k, v, at| {
                replay.shard.load_one(db, k, v, at, now);
            },
        )?;
    }
    let mut seqs: Vec<u64> = manifest.incr.iter().map(|f| f.seq).collect();
    seqs.dedup();
    for seq in seqs {
        let files: Vec<&LogFile> = manifest.incr.iter().filter(|f| f.seq == seq).collect();
        replay_generation(replay, dir, &files, torn)?;
    }
    Ok(())
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
/// in chunks by the shard that owns them now. The function libraries are left as they
/// are (the log's FUNCTION records are not replayed), and nothing is written.
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

/// A unit of a log being replayed: plain commands, a `MULTI` block, a transaction's part.
enum Unit {
    Plain,
    Multi,
    Part { id: Vec<u8>, left: usize },
}

/// Replays one generation: its transactions' commits first (from every file), then
/// each file's records.
fn replay_generation(
    replay: &mut Replay<'_>,
    dir: &Path,
    files: &[&LogFile],
    on_torn: Torn,
) -> Result<(), String> {
    let mut data = Vec::with_capacity(files.len());
    for f in files {
        let path = dir.join(&f.name);
        match read_file(&path) {
            Ok(bytes) => data.push((path, bytes, f.shard)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    let mut commits: HashSet<Vec<u8>> = HashSet::new();
    for (_, bytes, _) in &data {
        let mut at = 0;
        while let Ok(Some((args, len))) = aof::parse_record(&bytes[at..]) {
            let record = Args::new(&bytes[at..], &args);
            if record.len() == 2 && record.get(0).eq_ignore_ascii_case(TXCOMMIT) {
                commits.insert(record.get(1).to_vec());
            }
            at += len;
        }
    }
    for (path, bytes, shard) in &data {
        // A file starts in database 0, and its flushes are its shard's part.
        replay.db = 0;
        replay.file_slots = match shard {
            Some((shard, shards)) => SlotMap::contiguous(*shards)
                .slots_of(*shard)
                .map(|s| s as u16)
                .collect(),
            None => (0..goblin_store::SLOTS as u16).collect(),
        };
        if let Some(torn) = replay_file(replay, path, bytes, &commits)? {
            let cut = bytes.len() - torn;
            if on_torn == Torn::Leave {
                continue;
            }
            if on_torn == Torn::Fail {
                return Err(format!(
                    "{}: the last record is torn ({cut} bytes at offset {torn}); start with \
                     --aof-load-truncated yes to cut it",
                    path.display()
                ));
            }
            crate::log!(
                Warning,
                "{}: the last record is torn ({cut} bytes at offset {torn}); \
                 cutting the file there",
                path.display()
            );
            OpenOptions::new()
                .write(true)
                .open(path)
                .and_then(|f| f.set_len(torn as u64))
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// Replays a file's records; `Some(offset)` of a torn last unit.
fn replay_file(
    replay: &mut Replay<'_>,
    path: &Path,
    bytes: &[u8],
    commits: &HashSet<Vec<u8>>,
) -> Result<Option<usize>, String> {
    let mut at = 0;
    let mut unit = Unit::Plain;
    let mut unit_start = 0;
    // Records of the open unit, replayed when it closes.
    let mut pending: Vec<(usize, Vec<std::ops::Range<usize>>)> = Vec::new();
    // The database as the records select it, whether or not the unit they are in is
    // replayed: the writer selects again only when its database changes, whatever
    // became of the units before.
    let mut selected = replay.db;
    let fail = |offset: usize, why: &str| {
        format!("{}: bad format at offset {offset}: {why}", path.display())
    };
    loop {
        let rest = &bytes[at..];
        if rest.is_empty() {
            return Ok(match unit {
                Unit::Plain => None,
                _ => Some(unit_start),
            });
        }
        let (args, len) = match aof::parse_record(rest) {
            Ok(Some(record)) => record,
            Ok(None) => {
                return Ok(Some(match unit {
                    Unit::Plain => at,
                    _ => unit_start,
                }));
            }
            Err(why) => return Err(fail(at, &why)),
        };
        let record = Args::new(rest, &args);
        let name = record.get(0);
        if name.eq_ignore_ascii_case(b"SELECT") {
            selected =
                db_arg(&record, 1, replay.shared.config.databases).map_err(|e| fail(at, &e))?;
        }
        match &mut unit {
            Unit::Plain if name.eq_ignore_ascii_case(b"MULTI") => {
                unit = Unit::Multi;
                unit_start = at;
            }
            Unit::Plain if name.eq_ignore_ascii_case(TXPART) => {
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
            Unit::Plain if name.eq_ignore_ascii_case(TXCOMMIT) => {}
            Unit::Plain => replay.apply(&record).map_err(|e| fail(at, &e))?,
            Unit::Multi if name.eq_ignore_ascii_case(b"EXEC") => {
                for (offset, args) in pending.drain(..) {
                    replay
                        .apply(&Args::new(&bytes[offset..], &args))
                        .map_err(|e| fail(offset, &e))?;
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
                            replay
                                .apply(&Args::new(&bytes[offset..], &args))
                                .map_err(|e| fail(offset, &e))?;
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

/// Hands each worker its log (and with it, the end of loading).
fn finish(shared: &Shared, logs: Vec<Option<AofLog>>) {
    for (worker, log) in logs.into_iter().enumerate() {
        shared.peers[worker].send(vec![Msg::Loaded(log.map(Box::new))]);
    }
}
