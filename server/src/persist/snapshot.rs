//! Snapshots in Redis's RDB format, without a fork.
//!
//! A save is a keyspace-wide transaction: with every shard locked whole — so that no
//! multi-shard transaction is half applied — each shard starts a point-in-time image of
//! its keyspace (`Keyspace::begin_snapshot`), and the locks go. Then:
//!
//! - **SAVE** (and SHUTDOWN) writes every image at once, inside the transaction, and the
//!   coordinator writes the file: the server waits, as redis-server's SAVE makes it.
//! - **BGSAVE** (and the `save` rules) lets each shard write its image in the background,
//!   a few slots per loop iteration, while it serves; a slot about to change is written
//!   first. The pieces go to a writer thread ([`SaveJob`]), which appends them to one
//!   file in the order they come — whole key records from any shard in any order make a
//!   valid file — computing the checksum on the way, then syncs and renames it.
//!
//! Files are written to `temp-<pid>.rdb` in the target's directory, synced, and renamed
//! over the target, so that a crash leaves the old file or the new one.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use goblin_store::rdb::{RdbWriter, crc64};

use super::aof::{self, LogFile, Manifest};
use crate::clock;
use crate::persist::Persist;
use crate::repl::master::History;
use crate::runtime::msg::ConnRef;
use crate::runtime::server::REDIS_VERSION;
use crate::txn::plan::{Hop, HopOut, Park, Plan, PlanCx, Step};

/// The sizes of database 0 when it has keys (keys, keys with an expiry): the header
/// selects it with them, as Redis starts its file.
pub type Db0 = Option<(u64, u64)>;

/// The header of a file: magic, auxiliary fields as redis-server 7.0 writes them, and
/// database 0 with its sizes when it has keys. (Pieces of other databases select theirs
/// as they come: the shards' pieces interleave, so only database 0's sizes — which
/// Redis writes as hints — are known before the records.)
pub fn header(
    db0: Db0,
    aof_base: bool,
    functions: &[Vec<u8>],
    history: Option<&History>,
) -> Vec<u8> {
    let ctime = (clock::now_ms() / 1000).to_string();
    let used = crate::alloc::allocated().unwrap_or(0).to_string();
    let mut aux: Vec<(&[u8], &[u8])> = vec![
        (b"redis-ver", REDIS_VERSION.as_bytes()),
        (b"redis-bits", b"64"),
        (b"ctime", ctime.as_bytes()),
        (b"used-mem", used.as_bytes()),
    ];
    // The replication history the data is at, as redis-server's rdbSaveInfoAuxFields.
    let (db, offset) = history.map_or((String::new(), String::new()), |h| {
        (h.db.to_string(), h.offset.to_string())
    });
    if let Some(h) = history {
        aux.push((b"repl-stream-db", db.as_bytes()));
        aux.push((b"repl-id", h.replid.as_bytes()));
        aux.push((b"repl-offset", offset.as_bytes()));
    }
    aux.push((b"aof-base", if aof_base { b"1" } else { b"0" }));
    let mut w = RdbWriter::new(&aux);
    // The function libraries, before the databases (as `rdbSaveFunctions`).
    for code in functions {
        w.function(code);
    }
    if let Some((keys, expires)) = db0 {
        w.select_db(0, keys, expires);
    }
    w.take()
}

/// A file being written: a temporary file, its checksum so far.
struct FileOut {
    out: BufWriter<File>,
    crc: u64,
    /// Bytes written so far.
    len: u64,
    /// The database the last records written are of.
    selected: Option<u16>,
    tmp: PathBuf,
    target: PathBuf,
}

impl FileOut {
    fn create(target: &Path) -> io::Result<FileOut> {
        let dir = target.parent().unwrap_or(Path::new("."));
        let tmp = dir.join(format!("temp-{}.rdb", std::process::id()));
        Ok(FileOut {
            out: BufWriter::with_capacity(128 << 10, File::create(&tmp)?),
            crc: 0,
            len: 0,
            selected: None,
            tmp,
            target: target.to_path_buf(),
        })
    }

    /// Writes the header (database 0 is selected by it when it has keys).
    fn header(
        &mut self,
        db0: Db0,
        aof_base: bool,
        functions: &[Vec<u8>],
        history: Option<&History>,
    ) -> io::Result<()> {
        self.selected = db0.map(|_| 0);
        self.write(&header(db0, aof_base, functions, history))
    }

    /// Writes key records of database `db`, after its `SELECTDB` when the file's last
    /// records were of another.
    fn records(&mut self, db: u16, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        if self.selected != Some(db) {
            self.selected = Some(db);
            let mut select = RdbWriter::records();
            select.select(u64::from(db));
            self.write(&select.take())?;
        }
        self.write(bytes)
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.crc = crc64(self.crc, bytes);
        self.len += bytes.len() as u64;
        self.out.write_all(bytes)
    }

    /// The trailer, then sync and rename over the target; the file's length.
    fn finish(mut self) -> io::Result<u64> {
        let trailer = RdbWriter::trailer(self.crc);
        self.out.write_all(&trailer)?;
        let len = self.len + trailer.len() as u64;
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        fs::rename(&self.tmp, &self.target)?;
        let dir = self.target.parent().unwrap_or(Path::new("."));
        aof::sync_dir(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        })?;
        Ok(len)
    }

    fn abandon(self) {
        let tmp = self.tmp.clone();
        drop(self);
        let _ = fs::remove_file(tmp);
    }
}

/// Writes a whole file from its parts (SAVE): the header, each shard's records, the
/// trailer.
///
/// # Errors
/// When the file cannot be written.
pub fn write_file(
    target: &Path,
    db0: Db0,
    functions: &[Vec<u8>],
    history: Option<&History>,
    parts: &[(u16, Vec<u8>)],
) -> io::Result<()> {
    let mut file = FileOut::create(target)?;
    let result = (|| {
        file.header(db0, false, functions, history)?;
        for (db, part) in parts {
            file.records(*db, part)?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => file.finish().map(|_| ()),
        Err(e) => {
            file.abandon();
            Err(e)
        }
    }
}

/// What runs when a background save's file is written (or failed): the outcome (the
/// file's bytes), and how long it took.
pub type SaveDone = Box<dyn FnOnce(&Persist, io::Result<u64>, Duration) + Send>;

/// The file of a background save as it is written, and how far.
struct Writing {
    file: Option<FileOut>,
    error: Option<io::Error>,
}

/// A background save: one file that every shard appends its image's pieces to, from its
/// own loop (whole key records from any shard in any order make a valid file), under a
/// lock held for one `write`. Writing in the loops rather than on a thread of its own
/// keeps a second busy thread off the shards' cores, where it would take turns with a
/// shard and hold its clients up for a scheduler slice. Only the end — trailer, fsync,
/// rename — runs on a thread of its own, since an fsync must not block a loop.
pub struct SaveJob {
    persist: Arc<Persist>,
    writing: std::sync::Mutex<Writing>,
    /// The header is written: shards may append.
    ready: AtomicBool,
    shards_left: AtomicUsize,
    aof_base: bool,
    started: Instant,
    done: std::sync::Mutex<Option<SaveDone>>,
    /// Set when FLUSHALL abandons the save ([`SaveJob::abort`]); the shards' images
    /// hold it too (`Keyspace::cancel_snapshot_with`).
    cancel: Arc<AtomicBool>,
}

impl std::fmt::Debug for SaveJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaveJob")
            .field("ready", &self.ready)
            .field("shards_left", &self.shards_left)
            .finish_non_exhaustive()
    }
}

impl SaveJob {
    /// A save into `target` (through a temporary file beside it) of the images of
    /// `shards` shards: an RDB file, marked as a log's base with `aof_base`; `done` runs
    /// at the end.
    ///
    /// # Errors
    /// When the temporary file cannot be created.
    pub fn start(
        persist: Arc<Persist>,
        target: PathBuf,
        shards: usize,
        aof_base: bool,
        done: SaveDone,
    ) -> io::Result<Arc<SaveJob>> {
        let file = FileOut::create(&target)?;
        persist.jobs_started.fetch_add(1, Ordering::Relaxed);
        Ok(Arc::new(SaveJob {
            persist,
            writing: std::sync::Mutex::new(Writing {
                file: Some(file),
                error: None,
            }),
            ready: AtomicBool::new(false),
            shards_left: AtomicUsize::new(shards),
            aof_base,
            started: Instant::now(),
            done: std::sync::Mutex::new(Some(done)),
            cancel: Arc::new(AtomicBool::new(false)),
        }))
    }

    /// FLUSHALL abandons a background snapshot (BGSAVE, the `save` rules, a replica's
    /// sync) as redis-server kills its child: the shards drop their images as they
    /// clear, nothing more is written, the file is removed, and the save ends without
    /// success or failure (`rdb_changes_since_last_save` stays). A log rewrite's base
    /// is not abandoned (redis-server lets that child finish).
    pub fn abort(&self) {
        if !self.aof_base {
            self.cancel.store(true, Ordering::Release);
        }
    }

    /// `CONFIG SET appendonly no` stops a log rewrite in progress, as redis-server
    /// kills its child: the shards drop their images at their next step, the base's
    /// file is removed, and the rewrite ends without success or failure. True when
    /// this job is a rewrite.
    pub fn kill_rewrite(&self) -> bool {
        if self.aof_base {
            self.cancel.store(true, Ordering::Release);
        }
        self.aof_base
    }

    /// Whether the save was abandoned or killed: the shards drop their images.
    pub fn aborted(&self) -> bool {
        self.cancel.load(Ordering::Acquire)
    }

    /// What the shards' images hold to be dropped when the save is abandoned (never
    /// set for a rewrite's base: [`SaveJob::abort`]).
    fn cancel_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.cancel)
    }

    /// Whether shards may append (the header is written).
    pub fn ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    fn with_file(&self, f: impl FnOnce(&mut FileOut) -> io::Result<()>) {
        let Ok(mut w) = self.writing.lock() else {
            return;
        };
        if w.error.is_some() || self.aborted() {
            return;
        }
        if let Some(file) = w.file.as_mut()
            && let Err(e) = f(file)
        {
            w.error = Some(e);
        }
    }

    /// Writes the header, once every shard's image began.
    pub fn header(&self, db0: Db0, functions: &[Vec<u8>], history: Option<&History>) {
        self.with_file(|file| file.header(db0, self.aof_base, functions, history));
        self.ready.store(true, Ordering::Release);
    }

    /// Appends records of database `db` (from a shard's loop).
    pub fn records(&self, db: u16, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.with_file(|file| file.records(db, bytes));
    }

    /// A shard has appended its whole image; after the last, the file is finished on a
    /// thread of its own.
    pub fn shard_done(self: &Arc<Self>) {
        if self.shards_left.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let job = Arc::clone(self);
        let finish = move || {
            let result = match job.writing.lock() {
                Ok(mut w) if job.aborted() => {
                    if let Some(file) = w.file.take() {
                        file.abandon();
                    }
                    Err(io::Error::new(
                        io::ErrorKind::Interrupted,
                        if job.aof_base {
                            "killed, the log is off (appendonly no)"
                        } else {
                            "abandoned by FLUSHALL"
                        },
                    ))
                }
                Ok(mut w) => match (w.error.take(), w.file.take()) {
                    (Some(e), file) => {
                        if let Some(file) = file {
                            file.abandon();
                        }
                        Err(e)
                    }
                    (None, Some(file)) => file.finish(),
                    (None, None) => Err(io::Error::other("the save's file is gone")),
                },
                Err(_) => Err(io::Error::other("the save's lock is poisoned")),
            };
            let done = job.done.lock().ok().and_then(|mut d| d.take());
            if let Some(done) = done {
                done(&job.persist, result, job.started.elapsed());
            }
            if let Ok(mut slot) = job.persist.job.lock() {
                *slot = None;
            }
            job.persist.saving.store(false, Ordering::SeqCst);
        };
        if self.aborted() {
            // Nothing to sync: it ends here, at once (a save after the FLUSHALL may
            // start).
            finish();
        } else if std::thread::Builder::new()
            .name("goblin-save-end".into())
            .spawn(finish)
            .is_err()
        {
            crate::log!(
                Warning,
                "can't start the thread that ends a background save"
            );
        }
    }
}

/// The end of a background save (BGSAVE, the `save` rules).
fn bgsave_done(dirty: u64) -> SaveDone {
    Box::new(
        move |persist: &Persist, result: io::Result<u64>, took: Duration| {
            if let Err(e) = &result
                && e.kind() == io::ErrorKind::Interrupted
            {
                // Abandoned (FLUSHALL), as redis-server's killed child: neither a
                // success nor a failure.
                crate::log!(Notice, "Background saving terminated: {e}");
                return;
            }
            match &result {
                Ok(bytes) => {
                    persist.saved(dirty);
                    crate::log!(
                        Notice,
                        "background saving terminated with success ({bytes} bytes in \
                     {:.3} s)",
                        took.as_secs_f64()
                    );
                }
                Err(e) => {
                    persist
                        .last_bgsave_try
                        .store(clock::now_ms() / 1000, Ordering::Relaxed);
                    crate::log!(Warning, "background saving error: {e}");
                }
            }
            persist.set_bgsave_failed(result.is_err());
            persist
                .last_bgsave_secs
                .store(took.as_secs() as i64, Ordering::Relaxed);
        },
    )
}

/// The end of a log rewrite: with the new base written and every shard appending to
/// the new generation, the manifest names only them and the old files go; otherwise
/// the manifest keeps the old files before the new generation (as it has since the
/// rewrite's instant), and nothing is lost. The base is named `base` (numbered
/// `base_seq`), the new generation `seq` (none with the log off); with `image`, the RDB
/// file the shards wrote there is first turned into commands (`aof_base.rs`).
fn rewrite_done(
    dir: PathBuf,
    name: String,
    (base_seq, seq): (u64, u64),
    base: String,
    image: Option<PathBuf>,
) -> SaveDone {
    Box::new(
        move |persist: &Persist, result: io::Result<u64>, took: Duration| {
            if let Err(e) = &result
                && e.kind() == io::ErrorKind::Interrupted
            {
                // Killed (appendonly no), as redis-server's child: neither a success
                // nor a failure; the manifest stays as it is.
                crate::log!(Notice, "Background AOF rewrite terminated: {e}");
                persist.rewriting.store(false, Ordering::SeqCst);
                return;
            }
            let outcome = result.and_then(|_| {
                if let Some(image) = &image {
                    let ts = persist
                        .aof_timestamps
                        .load(Ordering::Relaxed)
                        .then(|| clock::now_ms() / 1000);
                    let written = super::aof_base::write_from_rdb(image, &dir.join(&base), ts);
                    let _ = fs::remove_file(image);
                    written?;
                }
                if persist.rotation_failed.load(Ordering::SeqCst) {
                    return Err(io::Error::other(
                        "a shard could not switch to the new files",
                    ));
                }
                let mut slot = persist
                    .manifest
                    .lock()
                    .map_err(|_| io::Error::other("the manifest's lock is poisoned"))?;
                let old = slot.clone().unwrap_or_default();
                // With `aof-disable-auto-gc yes` the replaced files stay, listed as
                // history, newest first (the base, then each record file, put at the
                // head of the list, as redis-server's).
                let mut history = Vec::new();
                if persist.aof_keep_history.load(Ordering::SeqCst) {
                    history.extend(old.incr.iter().rev().filter(|f| f.seq != seq).cloned());
                    history.extend(old.base.iter().cloned());
                    history.extend(old.history.iter().cloned());
                }
                let new = Manifest {
                    base: Some(LogFile {
                        name: base.clone(),
                        seq: base_seq,
                        shard: None,
                    }),
                    incr: old.incr.iter().filter(|f| f.seq == seq).cloned().collect(),
                    history,
                };
                new.save(&dir, &name)?;
                for f in old.all_files() {
                    if !new.all_files().any(|n| n.name == f.name) {
                        let _ = fs::remove_file(dir.join(&f.name));
                    }
                }
                let size = new.size(&dir);
                *slot = Some(new);
                Ok(size)
            });
            match outcome {
                Ok(size) => {
                    persist.aof_current_size.store(size, Ordering::Relaxed);
                    persist.aof_base_size.store(size, Ordering::Relaxed);
                    persist.rewrite_failed.store(false, Ordering::Relaxed);
                    crate::log!(
                        Notice,
                        "background AOF rewrite finished successfully ({size} bytes \
                     in {:.3} s)",
                        took.as_secs_f64()
                    );
                }
                Err(e) => {
                    persist.rewrite_failed.store(true, Ordering::Relaxed);
                    crate::log!(Warning, "background AOF rewrite failed: {e}");
                }
            }
            persist
                .last_rewrite_secs
                .store(took.as_secs() as i64, Ordering::Relaxed);
            persist.rewriting.store(false, Ordering::SeqCst);
        },
    )
}

/// What a save does once the images are taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaveKind {
    /// SAVE: write everything now, reply when the file is on disk.
    Foreground,
    /// BGSAVE: the shards write in the background; reply at once. With `schedule`, a
    /// save asked for during a log rewrite runs after it.
    Background {
        /// BGSAVE SCHEDULE.
        schedule: bool,
    },
    /// BGREWRITEAOF: a background save into the log's directory as its new base, with
    /// the log going on in a new record file from the same instant.
    Rewrite,
    /// SHUTDOWN: save now when asked (`save`) or when `save` rules are set (unless
    /// `nosave`), then end the process; a failed save stops the shutdown unless `force`.
    Shutdown {
        /// SHUTDOWN SAVE.
        save: bool,
        /// SHUTDOWN NOSAVE.
        nosave: bool,
        /// SHUTDOWN FORCE.
        force: bool,
    },
}

impl SaveKind {
    fn in_background(self) -> bool {
        matches!(self, SaveKind::Background { .. } | SaveKind::Rewrite)
    }
}

/// A shard's image: with SAVE, its records (a background save appends them itself).
#[derive(Debug)]
struct Part {
    records: Vec<(u16, Vec<u8>)>,
    /// Database 0's keys and keys with an expiry.
    db0: (u64, u64),
}

/// The transaction of a save: images begun on every shard at one instant.
#[derive(Debug)]
pub struct SavePlan {
    kind: SaveKind,
    /// It runs inside EXEC, where redis-server schedules a background save for after
    /// the transaction (and says so); here it starts at once all the same.
    in_exec: bool,
    started: bool,
    dirty: u64,
    job: Option<Arc<SaveJob>>,
    /// A replica's sync (PSYNC, or SYNC: `psync` false): the replica fed from the
    /// instant on, sent the file once written.
    replica: Option<(ConnRef, bool)>,
    /// On a replica: its link holds the stream while the instant is taken (see
    /// [`SavePlan::hold_link`]).
    hold: crate::repl::replica::HoldRequest,
    /// A rewrite's new record file, which the log goes on in from its instant.
    rotate: Option<PathBuf>,
}

impl SavePlan {
    /// A save of `kind`.
    pub fn new(kind: SaveKind) -> SavePlan {
        SavePlan {
            kind,
            in_exec: false,
            started: false,
            dirty: 0,
            job: None,
            replica: None,
            hold: Default::default(),
            rotate: None,
        }
    }

    /// On a replica whose link is up: has the link hold its stream (stop applying,
    /// outside a transaction, once all it forwarded is answered and in this server's
    /// stream), so that the instant is a point of the stream: the history the file
    /// records, and where a replica of this one is fed from. The plan parks on the
    /// clock until it holds (a replica's keyspace does not change meanwhile: only the
    /// link writes to it). `None`: go on.
    fn hold_link(&mut self, cx: &PlanCx<'_>) -> Option<Step> {
        // (Inside EXEC nothing waits: such a save records no history.)
        if self.in_exec || !cx.shared.repl.proxied() || !cx.shared.follow.connected() {
            return None;
        }
        if !self.hold.ready(&cx.shared.follow) {
            return Some(Step::Park(Park::internal(Duration::from_millis(1))));
        }
        if self.hold.holds() {
            return None;
        }
        // A replica's sync needs that point; another save goes on without it (and
        // records no history).
        let (conn, _) = self.replica?;
        if let Some(snapshot) = cx.shared.repl.snapshot_of(conn) {
            snapshot.set(Err("the link to the master did not hold".into()));
        }
        Some(cx.done(|e| e.error(crate::errors::NO_MASTER_LINK)))
    }

    /// The replication history the file's data is at (its `repl-*` fields): a master's
    /// with a backlog, its stream's offset at the instant (every shard fed it what it
    /// wrote before); a replica's, its master's, when its link holds (or is down: what
    /// it applied is all in the stream then). None for a log's base, as redis-server.
    fn history(&self, cx: &PlanCx<'_>) -> Option<History> {
        if self.kind == SaveKind::Rewrite {
            return None;
        }
        let repl = &cx.shared.repl;
        let exact = match repl.proxied() {
            true => self.hold.holds() || !cx.shared.follow.connected(),
            false => repl.backlog_active(),
        };
        exact.then(|| repl.history(cx.shared.replication_id(), cx.shared.follow.selected_db()))
    }

    /// A replica's sync: a background save whose instant starts the replica's feed (see
    /// `repl::master`); it answers `+FULLRESYNC <replid> <offset>` (PSYNC) or nothing
    /// (SYNC).
    pub fn for_replica(conn: ConnRef, psync: bool) -> SavePlan {
        let mut plan = SavePlan::new(SaveKind::Background { schedule: false });
        plan.replica = Some((conn, psync));
        plan
    }

    /// A save inside EXEC (see `in_exec`).
    pub fn in_exec(mut self, in_exec: bool) -> SavePlan {
        self.in_exec = in_exec;
        self
    }

    /// A background save's reply once it started: `scheduled` inside EXEC, as
    /// redis-server says.
    fn started_reply(&self) -> &'static [u8] {
        match (self.kind == SaveKind::Rewrite, self.in_exec) {
            (true, false) => b"Background append only file rewriting started",
            (true, true) => b"Background append only file rewriting scheduled",
            (false, false) => b"Background saving started",
            (false, true) => b"Background saving scheduled",
        }
    }

    /// Refuses or defers a save while another runs; `Some(reply)` when it does.
    fn busy(&self, cx: &PlanCx<'_>) -> Option<Step> {
        let persist = &cx.shared.persist;
        if persist
            .saving
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return None;
        }
        let rewriting = persist.rewriting.load(Ordering::SeqCst);
        Some(match self.kind {
            SaveKind::Rewrite if rewriting => {
                cx.done(|e| e.error(crate::errors::BGREWRITEAOF_IN_PROGRESS))
            }
            SaveKind::Rewrite => {
                persist.rewrite_scheduled.store(true, Ordering::SeqCst);
                cx.done(|e| e.simple(b"Background append only file rewriting scheduled"))
            }
            SaveKind::Background { schedule: true } if rewriting => {
                persist.bgsave_scheduled.store(true, Ordering::SeqCst);
                cx.done(|e| e.simple(b"Background saving scheduled"))
            }
            SaveKind::Background { .. } if rewriting => {
                cx.done(|e| e.error(crate::errors::BGSAVE_WHILE_REWRITING))
            }
            _ => cx.done(|e| e.error(crate::errors::BGSAVE_IN_PROGRESS)),
        })
    }

    fn start(&mut self, cx: &PlanCx<'_>) -> Step {
        let persist = &cx.shared.persist;
        let live = cx.shared.live().persist.clone();
        let config = &live;
        if let SaveKind::Shutdown { save, nosave, .. } = self.kind {
            crate::runtime::supervise::notify("STOPPING=1\n");
            // SHUTDOWN saves when asked to, or when `save` rules are set, unless NOSAVE.
            if nosave || (!save && config.save.is_empty()) {
                exit(cx);
            }
            crate::runtime::supervise::notify("STATUS=Saving the final RDB snapshot\n");
        }
        if let Some(refused) = self.busy(cx) {
            if let Some((conn, _)) = self.replica {
                // redis-server's replica tries again later on a LOADING reply.
                if let Some(snapshot) = cx.shared.repl.snapshot_of(conn) {
                    snapshot.set(Err("another save is in progress".into()));
                }
                return cx.done(|e| {
                    e.error(b"LOADING a background save is in progress: try again later")
                });
            }
            return refused;
        }
        self.dirty = persist.dirty.load(Ordering::Relaxed);
        let shards = cx.slots.shards();
        if self.kind.in_background() {
            let started = match self.kind {
                SaveKind::Rewrite => self.start_rewrite(cx, shards).map(|(job, file)| {
                    self.rotate = file;
                    job
                }),
                _ => SaveJob::start(
                    Arc::clone(persist),
                    config.rdb_path(),
                    shards,
                    false,
                    self.replica_done(cx, bgsave_done(self.dirty), config.rdb_path()),
                ),
            };
            match started {
                Ok(job) => {
                    if let Ok(mut slot) = persist.job.lock() {
                        *slot = Some(Arc::clone(&job));
                    }
                    self.job = Some(job);
                }
                Err(e) => {
                    // As with redis-server, whose forked child is what fails: the save
                    // started, and failed (the log and INFO say so).
                    crate::log!(Warning, "background saving error: {e}");
                    if let Some(snapshot) = self
                        .replica
                        .and_then(|(c, _)| cx.shared.repl.snapshot_of(c))
                    {
                        snapshot.set(Err(e.to_string()));
                    }
                    persist.saving.store(false, Ordering::SeqCst);
                    if self.kind == SaveKind::Rewrite {
                        persist.rewriting.store(false, Ordering::SeqCst);
                        persist.rewrite_failed.store(true, Ordering::Relaxed);
                        return cx.done(|e| e.simple(self.started_reply()));
                    }
                    persist
                        .last_bgsave_try
                        .store(clock::now_ms() / 1000, Ordering::Relaxed);
                    persist.set_bgsave_failed(true);
                    return cx.done(|e| e.simple(self.started_reply()));
                }
            }
            persist
                .save_started
                .store(clock::now_ms(), Ordering::Relaxed);
        }
        let kind = self.kind;
        let cancel = self.job.as_ref().map(|j| j.cancel_flag());
        let hops = (0..shards)
            .map(|shard| {
                let cancel = cancel.clone();
                Hop::run(shard, move |ctx| {
                    let background = kind.in_background();
                    let mut part = Part {
                        records: Vec::new(),
                        db0: (0, 0),
                    };
                    // Every database's image begins at this one instant.
                    // (Empty ones too: a shard's walk is what ends its part of a
                    // background save, and database 0 always has a keyspace.)
                    ctx.for_each_db(|db, keyspace| {
                        let (keys, expires) = keyspace.begin_snapshot();
                        if let Some(cancel) = &cancel {
                            keyspace.cancel_snapshot_with(Arc::clone(cancel));
                        }
                        if db == 0 {
                            part.db0 = (keys as u64, expires as u64);
                        }
                        if !background {
                            keyspace.snapshot_step(usize::MAX, usize::MAX);
                            part.records.push((db as u16, keyspace.end_snapshot().0));
                        }
                    });
                    // What the shard wrote before is in the stream (the history the
                    // file records) and the log, and a replica (and a log starting) is
                    // fed from here.
                    ctx.feed_replicas();
                    HopOut::Other(Box::new(part))
                })
            })
            .collect();
        Step::Hops(hops)
    }

    /// A replica's save's end: the replica is told where the file is (or why there is
    /// none), after what `done` does for any background save.
    fn replica_done(&self, cx: &PlanCx<'_>, done: SaveDone, target: PathBuf) -> SaveDone {
        let Some(snapshot) = self
            .replica
            .and_then(|(c, _)| cx.shared.repl.snapshot_of(c))
        else {
            return done;
        };
        Box::new(
            move |persist: &Persist, result: io::Result<u64>, took: Duration| {
                let outcome = match &result {
                    Ok(_) => Ok(crate::repl::master::Before::Snapshot(target)),
                    Err(e) => Err(e.to_string()),
                };
                done(persist, result, took);
                snapshot.set(outcome);
            },
        )
    }

    /// Before a rewrite's instant: the new record file exists and the manifest lists it
    /// after the old ones (so that what the shards append from the instant on is never
    /// outside the manifest), and the shards are to feed the log from the instant; then
    /// the writer of the new base, and the new record file (none with the log off).
    fn start_rewrite(
        &self,
        cx: &PlanCx<'_>,
        shards: usize,
    ) -> io::Result<(Arc<SaveJob>, Option<PathBuf>)> {
        let persist = &cx.shared.persist;
        let config = &cx.shared.config.persist;
        persist.rewriting.store(true, Ordering::SeqCst);
        // (Any rewrite starts a log just turned on: its instant opens the log's file.)
        persist.log_start.store(false, Ordering::SeqCst);
        persist.rotation_failed.store(false, Ordering::SeqCst);
        persist
            .rewrite_started
            .store(clock::now_ms(), Ordering::Relaxed);
        let dir = config.aof_dir();
        let name = config.appendfilename.clone();
        // The log turned on at run time: its directory may not exist yet, and a manifest
        // left there by an earlier run goes on (its generations numbered after it, its
        // files removed once the new base is written).
        fs::create_dir_all(&dir)?;
        let seq = {
            let mut slot = persist
                .manifest
                .lock()
                .map_err(|_| io::Error::other("the manifest's lock is poisoned"))?;
            if slot.is_none() {
                *slot = Manifest::load(&dir, &name).ok().flatten();
            }
            // Without a manifest (the log's first start at run time), none is written
            // until the base is: a crash before leaves no log without its base.
            let fresh = slot.is_none();
            let mut manifest = slot.clone().unwrap_or_default();
            // A base and the record files are numbered each on from their own last, as
            // redis-server numbers them.
            let seqs = (manifest.next_base_seq(), manifest.last_incr_seq() + 1);
            // With the log off (BGREWRITEAOF of `appendonly no`), the base alone, as
            // redis-server's: no record file is opened.
            let mut file = None;
            if persist.log_on.load(Ordering::SeqCst) {
                let incr = aof::generation_file(&name, seqs.1, 0, 1);
                // A new record file starts empty (one left by a crash is not listed
                // anywhere).
                aof::create_empty(&dir.join(&incr.name))?;
                file = Some(dir.join(&incr.name));
                manifest.incr.push(incr);
                if !fresh {
                    manifest.save(&dir, &name)?;
                }
                persist.log.feed();
            }
            *slot = Some(manifest);
            (seqs, file)
        };
        let ((base_seq, seq), file) = seq;
        // (Counted as it starts, as redis-server counts its forks: a rewrite killed or
        // failed counts too.)
        persist.aof_rewrites.fetch_add(1, Ordering::Relaxed);
        // With `aof-use-rdb-preamble no` the shards' image goes to a file of its own,
        // turned into the base's commands at the end.
        let rdb = persist.rdb_preamble.load(Ordering::Relaxed);
        let base = aof::base_name(&name, base_seq, rdb);
        let (target, image) = match rdb {
            true => (dir.join(&base), None),
            false => {
                let image = dir.join(format!("temp-rewriteaof-bg-{base_seq}.rdb"));
                (image.clone(), Some(image))
            }
        };
        let done = rewrite_done(dir, name, (base_seq, seq), base, image);
        let job = SaveJob::start(Arc::clone(persist), target, shards, true, done)?;
        Ok((job, file))
    }

    fn finish(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        let persist = &cx.shared.persist;
        if let Some(path) = self.rotate.take() {
            // The instant, every shard locked and what each wrote before appended: the
            // log goes on in the new file.
            if let Err(e) = persist.log.rotate(path.clone(), persist) {
                crate::log!(
                    Warning,
                    "can't open {} for the rewritten log: {e}",
                    path.display()
                );
                persist.rotation_failed.store(true, Ordering::SeqCst);
            }
        }
        let parts: Vec<Part> = results
            .into_iter()
            .filter_map(|r| match r {
                HopOut::Other(any) => any.downcast::<Part>().ok().map(|p| *p),
                _ => None,
            })
            .collect();
        let keys: u64 = parts.iter().map(|p| p.db0.0).sum();
        let expires: u64 = parts.iter().map(|p| p.db0.1).sum();
        let db0 = (keys > 0).then_some((keys, expires));
        if let Some(job) = &self.job {
            job.header(db0, &cx.shared.functions.codes(), self.history(cx).as_ref());
            if let Some((_, psync)) = self.replica {
                // Every shard feeds the replica from here: its stream starts at this
                // offset.
                let offset = cx.shared.repl.offset.load(Ordering::SeqCst);
                if let Some((conn, _)) = self.replica {
                    cx.shared.repl.starts_at(conn, offset);
                }
                let id = cx.shared.replication_id();
                crate::log!(Notice, "Starting BGSAVE for SYNC with target: disk");
                return match psync {
                    true => cx.done(|e| e.simple(format!("FULLRESYNC {id} {offset}").as_bytes())),
                    false => cx.done(|_| {}),
                };
            }
            if self.kind == SaveKind::Rewrite {
                return cx.done(|e| e.simple(self.started_reply()));
            }
            return cx.done(|e| e.simple(self.started_reply()));
        }
        let records: Vec<(u16, Vec<u8>)> = parts.into_iter().flat_map(|p| p.records).collect();
        let target = cx.shared.live().persist.rdb_path();
        let history = self.history(cx);
        let result = write_file(
            &target,
            db0,
            &cx.shared.functions.codes(),
            history.as_ref(),
            &records,
        );
        persist.saving.store(false, Ordering::SeqCst);
        if let Err(e) = &result {
            crate::log!(Warning, "failed saving the DB to {}: {e}", target.display());
        } else {
            persist.saved(self.dirty);
            crate::log!(Notice, "DB saved on disk");
        }
        match (self.kind, result) {
            (SaveKind::Shutdown { .. }, Ok(())) | (SaveKind::Shutdown { force: true, .. }, _) => {
                exit(cx)
            }
            (SaveKind::Shutdown { .. }, Err(_)) => {
                crate::runtime::supervise::notify(
                    "STATUS=Error trying to save the DB, can't exit.\n",
                );
                cx.done(|e| e.error(crate::errors::SHUTDOWN_FAILED))
            }
            (_, Ok(())) => cx.done(|e| e.ok()),
            (_, Err(_)) => cx.done(|e| e.error(b"ERR")),
        }
    }
}

/// Ends the process (SHUTDOWN): the log synced to disk first.
fn exit(cx: &PlanCx<'_>) -> ! {
    cx.shared.persist.sync_log();
    crate::runtime::server::remove_files(cx.shared);
    crate::log!(Notice, "ready to exit, bye bye");
    crate::runtime::server::stop_listening(cx.shared);
    std::process::exit(0);
}

impl Plan for SavePlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        if !self.started {
            if let Some(wait) = self.hold_link(cx) {
                return wait;
            }
            self.started = true;
            return self.start(cx);
        }
        let step = self.finish(cx, results);
        if matches!(step, Step::Done(_)) {
            self.hold.release();
        }
        step
    }
}
