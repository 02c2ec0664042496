//! The append-only log: one file of RESP commands, as redis-server writes it, and a
//! manifest naming the files in the order they replay.
//!
//! **Records.** What the log records is what replicas are sent (`repl/master.rs`): each
//! shard's feed appends a unit of work's effect (see `shard/events.rs`) — the command as
//! sent, or its deterministic form (`SET k v PXAT <ms>` for `SET k v EX 10`), or, for
//! expiry, a `DEL` per key —; a unit of several commands, a script's or a transaction's
//! commands go in `MULTI` … `EXEC`, a transaction of several shards gathered whole by its
//! coordinator before it lets go of its locks. Every piece reaches [`Log::append`] at the
//! point it reaches the replication stream, under one lock, so that the file orders them
//! as the stream does; the commands that go to replicas only (PUBLISH, PING, REPLCONF)
//! are left out. A torn transaction at the file's end is cut at start-up (with
//! `aof-load-truncated`), so it comes back from a crash whole or not at all. Logs of
//! earlier Goblin versions (a file per shard, `GOBLIN.TXPART` and `GOBLIN.TXCOMMIT`
//! records) still load.
//!
//! **Durability.** Records collect in the log's buffer; before anything of a loop
//! iteration leaves a worker's thread (replies, messages to other workers) it calls
//! [`Log::sync`]: one `write`, and with `appendfsync always` one `fdatasync`, for every
//! record so far (group commit). With `everysec` a background thread syncs the file
//! once a second; with `no`, the kernel decides.
//!
//! **Files.** In `dir/appenddirname`, named and listed as redis-server 7.0's:
//! `appendonly.aof.<seq>.base.rdb` (a snapshot the log starts from),
//! `appendonly.aof.<seq>.incr.aof` (the records since) and `appendonly.aof.manifest`,
//! which lists them (`file <name> seq <n> type b|i`; older logs' per-shard files with
//! `shard <k> shards <n> generation <seq>`), written to a temporary file and renamed.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use goblin_store::Event;

use crate::config::Fsync;
use crate::persist::Persist;
use crate::shard::events::{Effect, Origin, Write};
use crate::util::strerror;

/// The name of a transaction's part marker (in the logs of earlier versions).
pub const TXPART: &[u8] = b"GOBLIN.TXPART";
/// The name of a transaction's commit record (in the logs of earlier versions).
pub const TXCOMMIT: &[u8] = b"GOBLIN.TXCOMMIT";

/// Appends `n` in decimal, without allocating (lengths are short: one or two digits
/// take a fast path).
#[inline]
fn decimal(buf: &mut Vec<u8>, n: usize) {
    if n < 10 {
        buf.push(b'0' + n as u8);
        return;
    }
    if n < 100 {
        buf.extend_from_slice(&[b'0' + (n / 10) as u8, b'0' + (n % 10) as u8]);
        return;
    }
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    while n > 0 {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    buf.extend_from_slice(&digits[i..]);
}

/// Appends one RESP command, reserving room for all of it at once.
pub(crate) fn command<'a>(
    buf: &mut Vec<u8>,
    n: usize,
    argv: impl Iterator<Item = &'a [u8]> + Clone,
) {
    let size = 16 + argv.clone().map(|a| a.len() + 16).sum::<usize>();
    buf.reserve(size);
    buf.push(b'*');
    decimal(buf, n);
    buf.extend_from_slice(b"\r\n");
    for arg in argv {
        buf.push(b'$');
        decimal(buf, arg.len());
        buf.extend_from_slice(b"\r\n");
        buf.extend_from_slice(arg);
        buf.extend_from_slice(b"\r\n");
    }
}

/// The log: one file for every shard, written as redis-server writes its own. The
/// shards' feeds hand it what they and their transactions wrote, in the order they
/// append to the replication stream and at the same points (`Master::append`, under one
/// lock): a transaction's parts gathered by its coordinator, whole, in MULTI/EXEC. What
/// goes to replicas only (PUBLISH, the master's PING and `REPLCONF GETACK`) is left out.
/// Pieces collect in `pending`; a worker about to let anything of its iteration leave
/// the thread calls [`Log::sync`]: the pending records are written (and with `appendfsync
/// always`, synced) first — one `write` and one `fdatasync` for every shard's records
/// since the last (group commit).
#[derive(Debug, Clone, Default)]
pub struct Log(Arc<LogShared>);

#[derive(Debug, Default)]
struct LogShared {
    /// The shards feed the log (it is on, or a rewrite's instant is to open it).
    fed: AtomicBool,
    /// Records are pending (a cheap look before taking the lock).
    dirty: AtomicBool,
    state: Mutex<LogState>,
    /// Bytes, counted over every file since start, known to be on disk.
    synced: AtomicU64,
}

#[derive(Debug, Default)]
struct LogState {
    /// The file records go to (`None` until a rewrite's instant opens one: what is
    /// appended meanwhile is in its base, and dropped).
    file: Option<Arc<File>>,
    path: PathBuf,
    /// Records not yet written.
    pending: Vec<u8>,
    /// The database the file's last `SELECT` chose (`None` at the start of a file).
    selected: Option<u16>,
    /// Bytes of the current file that hold whole records.
    written: u64,
    /// Bytes written over every file since start (what [`LogShared::synced`] counts).
    total: u64,
    /// The second of the last `#TS:` annotation written (`aof-timestamp-enabled`).
    stamped: u64,
}

impl Log {
    fn state(&self) -> std::sync::MutexGuard<'_, LogState> {
        self.0.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the shards feed the log.
    #[inline]
    pub fn fed(&self) -> bool {
        self.0.fed.load(Ordering::Relaxed)
    }

    /// The shards feed the log from now on (a rewrite's instant opens its file).
    pub fn feed(&self) {
        self.0.fed.store(true, Ordering::SeqCst);
    }

    /// Opens `path` to append to (start-up), the shards feeding it.
    ///
    /// # Errors
    /// When the file cannot be opened.
    pub fn open(&self, path: PathBuf) -> io::Result<()> {
        switch_to(&mut self.state(), path)?;
        self.feed();
        Ok(())
    }

    /// Appends a piece: `bytes`, whose first `lead` bytes select database `lead_db` (left
    /// out when the file has it selected), and which leaves `last_db` selected; with
    /// `kinds`, the commands in it for replicas only are left out
    /// (`repl::master::for_reader`).
    pub fn append(
        &self,
        bytes: &[u8],
        lead: Option<(u16, usize)>,
        last_db: Option<u16>,
        kinds: u8,
    ) {
        let mut state = self.state();
        if state.file.is_none() {
            return;
        }
        let piece = crate::repl::master::unselected(bytes, lead, state.selected);
        if kinds != 0 {
            let reader = crate::repl::master::Reader::Log;
            crate::repl::master::for_reader(piece, &mut state.pending, reader);
        } else {
            state.pending.extend_from_slice(piece);
        }
        if last_db.is_some() {
            state.selected = last_db;
        }
        self.0.dirty.store(true, Ordering::Release);
    }

    /// Writes what is pending to the file, and with `appendfsync always` makes
    /// everything written so far durable, before the caller lets its replies go.
    pub fn sync(&self, persist: &Persist) {
        if !self.0.dirty.load(Ordering::Acquire) && persist.fsync() != Fsync::Always {
            return;
        }
        let (file, total) = {
            let mut state = self.state();
            self.0.dirty.store(false, Ordering::Release);
            self.write_pending(&mut state, persist);
            (state.file.clone(), state.total)
        };
        if persist.fsync() == Fsync::Always
            && self.0.synced.load(Ordering::Acquire) < total
            && let Some(file) = file
        {
            // (Outside the lock: another shard's records go on being written meanwhile,
            // and what this one syncs covers them too.)
            if let Err(e) = file.sync_data() {
                fail_fatally("fsync", &self.state().path, &e);
            }
            self.0.synced.fetch_max(total, Ordering::AcqRel);
        }
    }

    fn write_pending(&self, state: &mut LogState, persist: &Persist) {
        if state.pending.is_empty() {
            return;
        }
        let Some(file) = state.file.clone() else {
            state.pending.clear();
            return;
        };
        if persist.aof_timestamps.load(Ordering::Relaxed) {
            // The records of a new second follow its annotation, as redis-server's
            // `genAofTimestampAnnotationIfNeeded` writes it.
            let secs = crate::clock::now_ms() / 1000;
            if secs != state.stamped {
                state.stamped = secs;
                state
                    .pending
                    .splice(0..0, timestamp_annotation(secs).bytes());
            }
        }
        let sleep = persist.aof_flush_sleep_us.load(Ordering::Relaxed);
        if sleep > 0 {
            std::thread::sleep(Duration::from_micros(sleep));
        }
        match (&*file).write_all(&state.pending) {
            Ok(()) => {
                let n = state.pending.len() as u64;
                state.written += n;
                state.total += n;
                persist.aof_current_size.fetch_add(n, Ordering::Relaxed);
                state.pending.clear();
                if persist.aof_failed() {
                    persist.set_aof_error(None);
                }
            }
            Err(e) => {
                // Part of the records may have reached the file: cut it back to whole
                // records, keep them, and try again at the next sync (writes are
                // refused meanwhile, with MISCONF).
                let _ = file.set_len(state.written);
                if persist.fsync() == Fsync::Always {
                    fail_fatally("write", &state.path, &e);
                }
                persist.set_aof_error(Some(strerror(&e)));
                self.0.dirty.store(true, Ordering::Release);
            }
        }
    }

    /// A rewrite's instant, every shard locked and its records before it appended:
    /// they are written to the old file (none when the log was off: they are in the
    /// base), which is synced, and the log goes on in `path`.
    ///
    /// # Errors
    /// When `path` cannot be opened (the log goes on in the old file).
    pub fn rotate(&self, path: PathBuf, persist: &Persist) -> io::Result<()> {
        let mut state = self.state();
        self.write_pending(&mut state, persist);
        if let Some(old) = &state.file
            && persist.fsync() != Fsync::No
            && let Err(e) = old.sync_data()
        {
            persist.set_aof_error(Some(strerror(&e)));
        }
        switch_to(&mut state, path)?;
        state.pending.clear();
        Ok(())
    }

    /// CONFIG SET appendonly no: what is pending is written, the file synced and
    /// closed; the shards stop feeding the log.
    pub fn close(&self, persist: &Persist) {
        self.0.fed.store(false, Ordering::SeqCst);
        let mut state = self.state();
        self.write_pending(&mut state, persist);
        if let Some(file) = state.file.take()
            && let Err(e) = file.sync_data()
        {
            crate::log!(Warning, "fsync of the append-only log failed: {e}");
        }
        state.pending.clear();
        state.selected = None;
    }

    /// Writes what is pending and syncs the file to disk (SHUTDOWN; the everysec
    /// thread's sync, with `pending` false: only what is written).
    pub fn flush_to_disk(&self, persist: &Persist, pending: bool) -> io::Result<()> {
        let file = {
            let mut state = self.state();
            if pending {
                self.write_pending(&mut state, persist);
            }
            state.file.clone()
        };
        match file {
            Some(file) => file.sync_data(),
            None => Ok(()),
        }
    }
}

/// The log goes on in `path` (opened to append), with no database selected.
fn switch_to(state: &mut LogState, path: PathBuf) -> io::Result<()> {
    let file = open_append(&path)?;
    state.written = file.metadata()?.len();
    state.file = Some(Arc::new(file));
    state.path = path;
    state.selected = None;
    Ok(())
}

fn fail_fatally(what: &str, path: &Path, e: &io::Error) -> ! {
    crate::log!(
        Warning,
        "can't {what} the append-only log {} with appendfsync always: {e}; exiting \
         (an acknowledged write must be on disk)",
        path.display()
    );
    std::process::exit(1);
}

/// The commands that replay a unit of work, handed to `emit` in order, each after the
/// `SELECT` of its database when the file's `selected` one is another.
pub(crate) fn effect_commands(
    write: &Write<'_>,
    selected: &mut Option<u16>,
    buf: &mut Vec<u8>,
    mut emit: impl FnMut(&mut Vec<u8>, Cmd<'_>),
) {
    let mut emit = |buf: &mut Vec<u8>, db: u16, cmd: Cmd<'_>| {
        if *selected != Some(db) {
            *selected = Some(db);
            emit(buf, Cmd::Select(db));
        }
        emit(buf, cmd);
    };
    let db = write.db;
    match write.effect {
        Effect::AsSent => {
            // A read that only found expired keys logs their deletion, not itself.
            let only_expired = write.unlisted == 0
                && write.events.iter().all(
                    |e| matches!(e, Event::Key(k) if k.change == goblin_store::Change::Expired),
                );
            match write.origin {
                Origin::Command(_, args, _) if !only_expired => emit(buf, db, Cmd::Args(args)),
                _ => deletions(write.events, buf, &mut emit),
            }
        }
        Effect::Commands(cmds) => {
            // An effect may select another database for some of its commands (a
            // copy into another database): that is the file's database from then on.
            let mut current = db;
            for c in cmds {
                match select_of(c) {
                    Some(to) => current = to,
                    None => emit(buf, current, Cmd::Owned(c)),
                }
            }
        }
        Effect::Events => deletions(write.events, buf, &mut emit),
    }
}

/// `DEL` for each deleted or expired key, `FLUSHDB` for a flushed database, each in
/// its database.
fn deletions(
    events: &[Event],
    buf: &mut Vec<u8>,
    emit: &mut impl FnMut(&mut Vec<u8>, u16, Cmd<'_>),
) {
    for event in events {
        match event {
            Event::Key(k) if k.change != goblin_store::Change::Written => {
                emit(buf, k.db, Cmd::Del(&k.key));
            }
            Event::Flushed { db } => emit(buf, *db, Cmd::Flush),
            Event::Key(_) => {}
        }
    }
}

/// The database a `SELECT` effect command chooses.
fn select_of(argv: &[Vec<u8>]) -> Option<u16> {
    match argv {
        [name, db] if name.eq_ignore_ascii_case(b"SELECT") => {
            std::str::from_utf8(db).ok()?.parse().ok()
        }
        _ => None,
    }
}

/// One command of a unit's effect.
pub(crate) enum Cmd<'a> {
    Args(&'a crate::table::handler::Args<'a>),
    Owned(&'a [Vec<u8>]),
    Del(&'a [u8]),
    Flush,
    Select(u16),
}

impl Cmd<'_> {
    /// Appends the command as RESP.
    pub(crate) fn encode(&self, buf: &mut Vec<u8>) {
        match self {
            // A request's own RESP frame is already its record.
            Cmd::Args(args) => match args.frame() {
                Some(frame) => buf.extend_from_slice(frame),
                None => command(buf, args.len(), (0..args.len()).map(|i| args.get(i))),
            },
            Cmd::Owned(argv) => command(buf, argv.len(), argv.iter().map(Vec::as_slice)),
            Cmd::Del(key) => command(buf, 2, [&b"DEL"[..], key].into_iter()),
            Cmd::Flush => command(buf, 1, [&b"FLUSHDB"[..]].into_iter()),
            Cmd::Select(db) => {
                let db = db.to_string();
                command(buf, 2, [&b"SELECT"[..], db.as_bytes()].into_iter());
            }
        }
    }
}

/// One file the manifest lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogFile {
    /// Its name in the log's directory.
    pub name: String,
    /// Its generation.
    pub seq: u64,
    /// `Some((shard, shards))` for a shard's records; `None` for a base, or for records
    /// of every key (redis-server's, or a run that had them all on one shard).
    pub shard: Option<(usize, usize)>,
}

impl LogFile {
    /// The sequence number the manifest lists it with: its generation's, plus its shard
    /// for a shard's file, so that the numbers grow line by line as redis-server and
    /// redis-check-aof want them (the generation is written beside: `generation <g>`).
    pub fn listed_seq(&self) -> u64 {
        self.seq
            .saturating_add(self.shard.map_or(0, |(k, _)| k as u64))
    }
}

/// The list of the log's files, in replay order: the base, then the records by
/// generation. It reads redis-server 7's manifests too (`file <name> seq <n> type
/// b|h|i`, where each record file is a generation of its own, holding every key).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    /// The snapshot the log starts from.
    pub base: Option<LogFile>,
    /// Files a rewrite replaced that are not deleted yet (redis-server's `type h`):
    /// not replayed, deleted by the next rewrite.
    pub history: Vec<LogFile>,
    /// Shards' records.
    pub incr: Vec<LogFile>,
}

/// The longest manifest line redis-server reads.
const MANIFEST_MAX_LINE: usize = 1024;

impl Manifest {
    /// The manifest's path.
    pub fn path(dir: &Path, appendfilename: &str) -> PathBuf {
        dir.join(format!("{appendfilename}.manifest"))
    }

    /// Reads the manifest; `None` when there is none.
    ///
    /// # Errors
    /// A file that cannot be read, or one that redis-server would refuse, with
    /// redis-server's lines (`*** FATAL AOF MANIFEST FILE ERROR ***`, the line, the
    /// reason), one per `\n`.
    pub fn load(dir: &Path, appendfilename: &str) -> Result<Option<Manifest>, String> {
        let path = Manifest::path(dir, appendfilename);
        let text = match fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(format!(
                    "Fatal error: can't open the AOF manifest file {} for reading: {}",
                    path.display(),
                    strerror(&e)
                ));
            }
        };
        Manifest::parse(&text).map(Some)
    }

    /// A manifest's text, checked as redis-server's `aofLoadManifestFromFile` checks it.
    fn parse(text: &[u8]) -> Result<Manifest, String> {
        let fatal = |n: Option<(usize, &[u8])>, why: &str| {
            let mut e = String::from("*** FATAL AOF MANIFEST FILE ERROR ***");
            if let Some((n, line)) = n {
                e.push_str(&format!(
                    "\nReading the manifest file, at line {n}\n>>> '{}'",
                    String::from_utf8_lossy(line)
                ));
            }
            e.push('\n');
            e.push_str(why);
            e
        };
        if text.is_empty() {
            return Err(fatal(None, "Found an empty AOF manifest"));
        }
        let mut manifest = Manifest::default();
        let mut max_seq = 0u64;
        // The generation (seq, shards) of the last record file, for Goblin's files of one
        // generation, which share a seq.
        let mut last_generation: Option<(u64, usize)> = None;
        let mut rest = text;
        let mut n = 0;
        while !rest.is_empty() {
            n += 1;
            let (line, newline) = match rest.iter().position(|&b| b == b'\n') {
                Some(at) => (&rest[..at], true),
                None => (rest, false),
            };
            rest = rest.get(line.len() + 1..).unwrap_or(&[]);
            if line.first() == Some(&b'#') {
                continue;
            }
            let trimmed = line.trim_ascii();
            if !newline || line.len() >= MANIFEST_MAX_LINE {
                return Err(fatal(
                    Some((n, trimmed)),
                    "The AOF manifest file contains too long line",
                ));
            }
            let invalid = || fatal(Some((n, trimmed)), "Invalid AOF manifest file format");
            if trimmed.is_empty() {
                return Err(invalid());
            }
            let words = goblin_protocol::split_args(trimmed).ok_or_else(invalid)?;
            if words.len() < 6 || !words.len().is_multiple_of(2) {
                return Err(invalid());
            }
            let (mut name, mut seq, mut kind) = (None, 0u64, None);
            let (mut shard, mut shards, mut generation) = (None, None, None);
            for pair in words.chunks_exact(2) {
                let value = &pair[1];
                let number = || {
                    std::str::from_utf8(value)
                        .ok()
                        .and_then(|v| v.parse::<u64>().ok())
                };
                match pair[0].to_ascii_lowercase().as_slice() {
                    b"file" => {
                        let text = String::from_utf8(value.clone()).map_err(|_| invalid())?;
                        if text.contains('/') {
                            return Err(fatal(
                                Some((n, trimmed)),
                                "File can't be a path, just a filename",
                            ));
                        }
                        name = Some(text);
                    }
                    // As `atoll`: what is not a number is 0, and then missing.
                    b"seq" => seq = number().unwrap_or(0),
                    b"type" => kind = value.first().copied(),
                    b"shard" => shard = number(),
                    b"shards" => shards = number(),
                    b"generation" => generation = number(),
                    // Keys redis-server does not know are passed over, as there.
                    _ => {}
                }
            }
            let (Some(name), Some(kind)) = (name, kind) else {
                return Err(invalid());
            };
            if seq == 0 {
                return Err(invalid());
            }
            // Goblin's shard keys: a record file of one shard of a generation.
            let shard = match (shard, shards) {
                (Some(k), Some(m)) if k < m => Some((k as usize, m as usize)),
                (None, None) => None,
                _ => return Err(invalid()),
            };
            // A shard's file lists its generation beside its own number (before, its
            // number was the generation's, shared by the generation's files).
            let seq = match (shard, generation) {
                (Some(_), Some(0)) => return Err(invalid()),
                (Some(_), Some(g)) => g,
                _ => seq,
            };
            let file = LogFile { name, seq, shard };
            match kind {
                b'b' => {
                    if manifest.base.is_some() {
                        return Err(fatal(
                            Some((n, trimmed)),
                            "Found duplicate base file information",
                        ));
                    }
                    manifest.base = Some(LogFile {
                        shard: None,
                        ..file
                    });
                }
                b'h' => manifest.history.push(file),
                b'i' => {
                    let generation = file.shard.map(|(_, m)| (seq, m));
                    let same_generation = generation.is_some() && generation == last_generation;
                    if seq <= max_seq && !same_generation {
                        return Err(fatal(
                            Some((n, trimmed)),
                            "Found a non-monotonic sequence number",
                        ));
                    }
                    max_seq = seq;
                    last_generation = generation;
                    manifest.incr.push(file);
                }
                _ => return Err(fatal(Some((n, trimmed)), "Unknown AOF file type")),
            }
        }
        manifest.incr.sort_by_key(|f| (f.seq, f.shard));
        Ok(manifest)
    }

    /// Writes the manifest: to a temporary file, synced, then renamed over the old one
    /// (and the directory synced), so that a crash leaves the old one or the new one.
    /// Names with spaces or unprintable bytes are quoted, as redis-server quotes them.
    ///
    /// # Errors
    /// When a file cannot be written.
    pub fn save(&self, dir: &Path, appendfilename: &str) -> io::Result<()> {
        let mut text = String::new();
        let line = |text: &mut String, f: &LogFile, kind: char| {
            let name = match crate::util::needs_repr(f.name.as_bytes()) {
                true => crate::util::repr(f.name.as_bytes()),
                false => f.name.clone(),
            };
            text.push_str(&format!("file {name} seq {} type {kind}", f.listed_seq()));
            if let Some((shard, shards)) = f.shard {
                text.push_str(&format!(
                    " shard {shard} shards {shards} generation {}",
                    f.seq
                ));
            }
            text.push('\n');
        };
        if let Some(base) = &self.base {
            line(&mut text, base, 'b');
        }
        for f in &self.history {
            line(&mut text, f, 'h');
        }
        for f in &self.incr {
            line(&mut text, f, 'i');
        }
        let path = Manifest::path(dir, appendfilename);
        let tmp = dir.join(format!("temp-{appendfilename}.manifest"));
        let mut file = File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        fs::rename(&tmp, &path)?;
        sync_dir(dir)
    }

    /// Every file it lists that is replayed, the base first.
    pub fn files(&self) -> impl Iterator<Item = &LogFile> {
        self.base.iter().chain(self.incr.iter())
    }

    /// Every file it lists, those a rewrite replaced too.
    pub fn all_files(&self) -> impl Iterator<Item = &LogFile> {
        self.files().chain(self.history.iter())
    }

    /// Bytes of its files on disk.
    pub fn size(&self, dir: &Path) -> u64 {
        self.files()
            .filter_map(|f| fs::metadata(dir.join(&f.name)).ok())
            .map(|m| m.len())
            .sum()
    }

    /// The number of the next base: the last base's plus one (a base has its own
    /// numbers, as redis-server's `curr_base_file_seq`).
    pub fn next_base_seq(&self) -> u64 {
        self.base.as_ref().map_or(0, |b| b.seq) + 1
    }

    /// The highest sequence number of the record files (0 when none).
    pub fn last_incr_seq(&self) -> u64 {
        self.incr.iter().map(LogFile::listed_seq).max().unwrap_or(0)
    }

    /// The files of the last generation of records, by shard, when they are `shards`
    /// files for `shards` shards (a run with as many threads appends to them).
    pub fn last_generation(&self, shards: usize) -> Option<Vec<LogFile>> {
        let seq = self.incr.last()?.seq;
        let files: Vec<LogFile> = self.incr.iter().filter(|f| f.seq == seq).cloned().collect();
        // One shard appends to a file of every key too (redis-server's last one).
        let complete = files.len() == shards
            && files
                .iter()
                .enumerate()
                .all(|(i, f)| f.shard == Some((i, shards)) || (shards == 1 && f.shard.is_none()));
        complete.then_some(files)
    }
}

/// The name of shard `shard`'s records of generation `seq` (`None`: the one file of a
/// generation that holds every key, named as redis-server names its files).
pub fn incr_name(appendfilename: &str, seq: u64, shard: Option<usize>) -> String {
    match shard {
        Some(shard) => format!("{appendfilename}.{seq}.{shard}.incr.aof"),
        None => format!("{appendfilename}.{seq}.incr.aof"),
    }
}

/// Shard `shard`'s file of generation `seq` in a run of `shards` shards: with one shard,
/// the generation's one file, named and listed as redis-server's are.
pub fn generation_file(appendfilename: &str, seq: u64, shard: usize, shards: usize) -> LogFile {
    let shard = (shards > 1).then_some((shard, shards));
    LogFile {
        name: incr_name(appendfilename, seq, shard.map(|(k, _)| k)),
        seq,
        shard,
    }
}

/// redis-server's `#TS:<Unix seconds>` line (`aof-timestamp-enabled`), which its
/// loader and `redis-check-aof --truncate-to-timestamp` read.
pub fn timestamp_annotation(secs: u64) -> String {
    format!("#TS:{secs}\r\n")
}

/// The name of the base of generation `seq`: an RDB file, or (`aof-use-rdb-preamble
/// no`) commands.
pub fn base_name(appendfilename: &str, seq: u64, rdb: bool) -> String {
    match rdb {
        true => format!("{appendfilename}.{seq}.base.rdb"),
        false => format!("{appendfilename}.{seq}.base.aof"),
    }
}

/// Syncs a directory, so that a rename or a new file in it survives a crash.
///
/// # Errors
/// When the directory cannot be opened or synced.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Opens a log file for appending (creating it).
///
/// # Errors
/// When it cannot be opened.
pub fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// Creates an empty file at `path` (emptying one left there): a new generation's.
///
/// # Errors
/// When it cannot be created.
pub fn create_empty(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)
}

/// With `appendfsync everysec`: a thread that syncs the log's file once a second,
/// so that the shards' loops never wait for the disk.
pub fn start_fsync_thread(persist: Arc<Persist>) -> io::Result<()> {
    std::thread::Builder::new()
        .name("goblin-aof-fsync".into())
        .spawn(move || {
            loop {
                std::thread::sleep(Duration::from_secs(1));
                if persist.fsync() != Fsync::Everysec {
                    continue;
                }
                if let Err(e) = persist.log.flush_to_disk(&persist, false) {
                    persist.set_aof_error(Some(strerror(&e)));
                }
            }
        })
        .map(|_| ())
}

/// A parsed record: its arguments' ranges, and its length.
pub type Record = (Vec<Range<usize>>, usize);

/// One record of a log file: a RESP array of bulk strings starting at `data[0]`, as the
/// ranges of its arguments and the record's length. `Ok(None)` when the data ends inside
/// it (a torn last record).
///
/// # Errors
/// Bytes that are not a record, with the reason.
pub fn parse_record(data: &[u8]) -> Result<Option<Record>, String> {
    let mut at = 0;
    let Some(n) = number_line(data, &mut at, b'*')? else {
        return Ok(None);
    };
    if !(1..=1 << 20).contains(&n) {
        return Err(format!("invalid argument count {n}"));
    }
    let mut args = Vec::with_capacity(n.min(16));
    for _ in 0..n {
        let Some(len) = number_line(data, &mut at, b'$')? else {
            return Ok(None);
        };
        let end = at.saturating_add(len);
        if end.saturating_add(2) > data.len() {
            return Ok(None);
        }
        // The two bytes after a bulk string are skipped unchecked, as redis-server's
        // protocol and its loader do (a request's own frame is logged as it came).
        args.push(at..end);
        at = end + 2;
    }
    Ok(Some((args, at)))
}

/// A `<kind><digits>\r\n` line at `*at`; `Ok(None)` when the data ends first.
fn number_line(data: &[u8], at: &mut usize, kind: u8) -> Result<Option<usize>, String> {
    let Some(&first) = data.get(*at) else {
        return Ok(None);
    };
    if first != kind {
        return Err(format!(
            "expected '{}', found byte 0x{first:02x}",
            char::from(kind)
        ));
    }
    let rest = &data[*at + 1..];
    let Some(cr) = rest.iter().take(24).position(|&b| b == b'\r') else {
        return if rest.len() < 24 {
            Ok(None)
        } else {
            Err("a length line too long".into())
        };
    };
    if rest.len() < cr + 2 {
        return Ok(None);
    }
    if rest[cr + 1] != b'\n' {
        return Err("a length line not ended by CRLF".into());
    }
    let n = std::str::from_utf8(&rest[..cr])
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .ok_or_else(|| "an invalid length".to_string())?;
    *at += 1 + cr + 2;
    Ok(Some(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_as_strerror() {
        let e = io::Error::from_raw_os_error(28);
        assert_eq!(strerror(&e), "No space left on device");
        assert_eq!(strerror(&io::Error::other("plain")), "plain");
    }

    /// The log leaves out what goes to replicas only, and the `SELECT` of the database
    /// it has selected; a rotation writes what is pending to the old file, and the new
    /// one starts with no database selected; nothing is appended while no file is open.
    #[test]
    fn pieces_are_written_as_redis_server_writes_them() {
        let dir = std::env::temp_dir().join(format!("goblin-log-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("dir");
        let persist = Persist::new(&crate::config::PersistConfig::default());
        let text = |argvs: &[&[&str]]| -> Vec<u8> {
            let mut out = Vec::new();
            for a in argvs {
                command(&mut out, a.len(), a.iter().map(|w| w.as_bytes()));
            }
            out
        };
        let append = |log: &Log, argvs: &[&[&str]], kinds: u8| {
            let bytes = text(argvs);
            let lead = crate::repl::master::leading_select(&bytes);
            let last = argvs
                .iter()
                .rev()
                .find(|a| a[0] == "SELECT")
                .and_then(|a| a[1].parse().ok());
            log.append(&bytes, lead, last, kinds);
        };
        let log = Log::default();
        append(&log, &[&["SELECT", "1"], &["SET", "lost", "0"]], 0);
        log.open(dir.join("first")).expect("open");
        assert!(log.fed());
        append(&log, &[&["SELECT", "2"], &["SET", "a", "1"]], 0);
        append(
            &log,
            &[
                &["SELECT", "2"],
                &["MULTI"],
                &["SET", "b", "2"],
                &["PUBLISH", "ch", "m"],
                &["EXEC"],
                &["PING"],
            ],
            crate::repl::master::REPL_ONLY,
        );
        log.sync(&persist);
        append(&log, &[&["SELECT", "2"], &["DEL", "c"]], 0);
        log.rotate(dir.join("second"), &persist).expect("rotate");
        append(&log, &[&["SELECT", "2"], &["DEL", "d"]], 0);
        log.close(&persist);
        assert!(!log.fed());
        append(&log, &[&["SELECT", "2"], &["DEL", "e"]], 0);
        let read = |file: &str| {
            String::from_utf8_lossy(&fs::read(dir.join(file)).expect("read")).into_owned()
        };
        let want = |argvs: &[&[&str]]| String::from_utf8_lossy(&text(argvs)).into_owned();
        assert_eq!(
            read("first"),
            want(&[
                &["SELECT", "2"],
                &["SET", "a", "1"],
                &["MULTI"],
                &["SET", "b", "2"],
                &["EXEC"],
                &["DEL", "c"],
            ])
        );
        assert_eq!(read("second"), want(&[&["SELECT", "2"], &["DEL", "d"]]));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn lengths_are_decimal() {
        for n in [0, 7, 10, 99, 100, 12345, usize::MAX] {
            let mut buf = Vec::new();
            decimal(&mut buf, n);
            assert_eq!(buf, n.to_string().into_bytes());
        }
    }

    #[test]
    fn records_parse_whole_torn_or_corrupt() {
        let mut buf = Vec::new();
        command(&mut buf, 3, [&b"SET"[..], b"k", b"v\r\n"].into_iter());
        let (args, len) = parse_record(&buf).expect("valid").expect("whole");
        assert_eq!(len, buf.len());
        assert_eq!(&buf[args[2].clone()], b"v\r\n");
        for cut in 0..buf.len() {
            assert_eq!(parse_record(&buf[..cut]), Ok(None), "cut at {cut}");
        }
        assert!(parse_record(b"SET k v\r\n").is_err());
        // The two bytes after a bulk are not checked (a request logged as it came).
        let (args, len) = parse_record(b"*1\r\n$3\r\nGETxx")
            .expect("valid")
            .expect("whole");
        assert_eq!(
            (args.first().cloned(), args.len(), len),
            (Some(8..11), 1, 13)
        );
        assert!(parse_record(b"*0\r\n").is_err());
        assert!(parse_record(b"*1\r\n$99999999999999999999999\r\n").is_err());
        // A declared length is never allocated: a huge one is merely incomplete.
        assert_eq!(parse_record(b"*1\r\n$1000000000\r\nab"), Ok(None));
    }

    #[test]
    fn manifests_round_trip() {
        let dir = std::env::temp_dir().join(format!("goblin-manifest-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("dir");
        let m = Manifest {
            base: Some(LogFile {
                name: base_name("a.aof", 1, true),
                seq: 1,
                shard: None,
            }),
            incr: (0..2)
                .map(|s| LogFile {
                    name: incr_name("a.aof", 2, Some(s)),
                    seq: 2,
                    shard: Some((s, 2)),
                })
                .collect(),
            history: Vec::new(),
        };
        m.save(&dir, "a.aof").expect("save");
        let back = Manifest::load(&dir, "a.aof").expect("load").expect("there");
        assert_eq!(back, m);
        // The shards' files are listed with numbers that grow line by line (what
        // redis-check-aof wants), their generation beside.
        let text = fs::read_to_string(Manifest::path(&dir, "a.aof")).expect("read");
        assert_eq!(
            text,
            "file a.aof.1.base.rdb seq 1 type b\n\
             file a.aof.2.0.incr.aof seq 2 type i shard 0 shards 2 generation 2\n\
             file a.aof.2.1.incr.aof seq 3 type i shard 1 shards 2 generation 2\n"
        );
        assert_eq!((back.next_base_seq(), back.last_incr_seq()), (2, 3));
        assert!(back.last_generation(2).is_some());
        assert!(back.last_generation(3).is_none());
        fs::write(Manifest::path(&dir, "b.aof"), "file x seq 1 type q\n").expect("write");
        assert!(Manifest::load(&dir, "b.aof").is_err());
        assert_eq!(Manifest::load(&dir, "none.aof"), Ok(None));
        // A name with spaces and a newline is quoted, as redis-server quotes it.
        let odd = Manifest {
            base: None,
            incr: vec![generation_file(" a b\n.aof ", 3, 0, 1)],
            history: vec![LogFile {
                name: "old".into(),
                seq: 1,
                shard: None,
            }],
        };
        odd.save(&dir, "c.aof").expect("save");
        let text = fs::read_to_string(Manifest::path(&dir, "c.aof")).expect("read");
        assert_eq!(
            text,
            "file old seq 1 type h\nfile \" a b\\n.aof .3.incr.aof\" seq 3 type i\n"
        );
        assert_eq!(Manifest::load(&dir, "c.aof"), Ok(Some(odd)));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn redis_server_manifests_read_and_are_checked_as_there() {
        let m = Manifest::parse(
            b"# a comment\nfile appendonly.aof.2.base.rdb seq 2 type b newkey newvalue\n\
              FILE appendonly.aof.1.incr.aof SEQ 1 TYPE h\n\
              file appendonly.aof.2.incr.aof seq 2 type i\n\
              file appendonly.aof.5.incr.aof seq 5 type i\n",
        )
        .expect("redis-server's manifest");
        assert_eq!(m.base.as_ref().map(|b| b.seq), Some(2));
        assert_eq!(m.history.len(), 1);
        let incr: Vec<(u64, Option<(usize, usize)>)> =
            m.incr.iter().map(|f| (f.seq, f.shard)).collect();
        assert_eq!(incr, vec![(2, None), (5, None)]);
        let reason = |text: &[u8]| {
            Manifest::parse(text)
                .expect_err("refused")
                .lines()
                .last()
                .unwrap_or("")
                .to_string()
        };
        assert_eq!(reason(b""), "Found an empty AOF manifest");
        assert_eq!(
            reason(b"file a seq 1 type i"),
            "The AOF manifest file contains too long line"
        );
        assert_eq!(reason(b"\n"), "Invalid AOF manifest file format");
        assert_eq!(
            reason(b"file a seq x type i\n"),
            "Invalid AOF manifest file format"
        );
        assert_eq!(
            reason(b"file \"a seq 1 type i\n"),
            "Invalid AOF manifest file format"
        );
        assert_eq!(
            reason(b"file a/b seq 1 type i\n"),
            "File can't be a path, just a filename"
        );
        assert_eq!(reason(b"file a seq 1 type z\n"), "Unknown AOF file type");
        assert_eq!(
            reason(b"file a seq 2 type i\nfile b seq 2 type i\n"),
            "Found a non-monotonic sequence number"
        );
        // Goblin's shard files of one generation shared their sequence number in the
        // manifests of its earlier versions; now each has its own, the generation's
        // beside.
        for text in [
            &b"file a.1.0 seq 1 type i shard 0 shards 2\nfile a.1.1 seq 1 type i shard 1 shards 2\n"[..],
            b"file a.1.0 seq 1 type i shard 0 shards 2 generation 1\n\
              file a.1.1 seq 2 type i shard 1 shards 2 generation 1\n",
        ] {
            let shards = Manifest::parse(text).expect("one generation");
            assert_eq!(shards.incr.len(), 2);
            assert!(shards.incr.iter().all(|f| f.seq == 1));
            assert_eq!(shards.last_generation(2).map(|g| g.len()), Some(2));
        }
        assert_eq!(
            reason(b"file a seq 1 type i shard 2 shards 2\n"),
            "Invalid AOF manifest file format"
        );
    }
}
