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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use goblin_store::rdb::{RdbWriter, crc64};

use crate::clock;
use crate::persist::Persist;
use crate::runtime::server::REDIS_VERSION;
use crate::txn::plan::{Hop, HopOut, Plan, PlanCx, Step};

/// The header of a file: magic, auxiliary fields as redis-server 7.0 writes them, and
/// database 0 with its sizes (no database at all when it is empty, as Redis writes it).
pub fn header(keys: u64, expires: u64, aof_base: bool) -> Vec<u8> {
    let ctime = (clock::now_ms() / 1000).to_string();
    let used = crate::alloc::allocated().unwrap_or(0).to_string();
    let aux: [(&[u8], &[u8]); 5] = [
        (b"redis-ver", REDIS_VERSION.as_bytes()),
        (b"redis-bits", b"64"),
        (b"ctime", ctime.as_bytes()),
        (b"used-mem", used.as_bytes()),
        (b"aof-base", if aof_base { b"1" } else { b"0" }),
    ];
    let mut w = RdbWriter::new(&aux);
    if keys > 0 {
        w.select_db(0, keys, expires);
    }
    w.take()
}

/// A file being written: a temporary file, its checksum so far.
struct FileOut {
    out: BufWriter<File>,
    crc: u64,
    tmp: PathBuf,
    target: PathBuf,
}

impl FileOut {
    fn create(target: &Path) -> io::Result<FileOut> {
        let dir = target.parent().unwrap_or(Path::new("."));
        let tmp = dir.join(format!("temp-{}.rdb", std::process::id()));
        Ok(FileOut {
            out: BufWriter::with_capacity(1 << 20, File::create(&tmp)?),
            crc: 0,
            tmp,
            target: target.to_path_buf(),
        })
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.crc = crc64(self.crc, bytes);
        self.out.write_all(bytes)
    }

    /// The trailer, then sync and rename over the target.
    fn finish(mut self) -> io::Result<()> {
        let trailer = RdbWriter::trailer(self.crc);
        self.out.write_all(&trailer)?;
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        fs::rename(&self.tmp, &self.target)?;
        let dir = self.target.parent().unwrap_or(Path::new("."));
        super::aof::sync_dir(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        })
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
pub fn write_file(target: &Path, keys: u64, expires: u64, parts: &[Vec<u8>]) -> io::Result<()> {
    let mut file = FileOut::create(target)?;
    let result = (|| {
        file.write(&header(keys, expires, false))?;
        for part in parts {
            file.write(part)?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => file.finish(),
        Err(e) => {
            file.abandon();
            Err(e)
        }
    }
}

/// What shards send the writer of a background save.
#[derive(Debug)]
enum Piece {
    /// The sizes for the header (from the transaction that started the save).
    Header { keys: u64, expires: u64 },
    /// Key records of some shard.
    Records(Vec<u8>),
    /// A shard has written its whole image.
    Done,
}

/// A background save: the pieces' way to the writer thread, and how much is queued.
#[derive(Debug)]
pub struct SaveJob {
    tx: Sender<Piece>,
    /// Bytes sent and not yet written: shards pause their walk above a bound, so a slow
    /// disk does not make the server hold the whole image in memory.
    pub backlog: AtomicUsize,
}

/// Bytes a background save may hold queued before the shards pause their walk.
pub const BACKLOG_MAX: usize = 64 << 20;

impl SaveJob {
    /// Starts the writer of a save to `target` by `shards` shards. `dirty` is the
    /// number of changes it covers.
    ///
    /// # Errors
    /// When the writer thread cannot start.
    pub fn start(
        persist: Arc<Persist>,
        target: PathBuf,
        shards: usize,
        dirty: u64,
    ) -> io::Result<Arc<SaveJob>> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let job = Arc::new(SaveJob {
            tx,
            backlog: AtomicUsize::new(0),
        });
        let writer = Arc::clone(&job);
        std::thread::Builder::new()
            .name("goblin-bgsave".into())
            .spawn(move || {
                let started = Instant::now();
                let result = writer.write(&rx, &target, shards);
                match &result {
                    Ok(bytes) => {
                        persist.saved(dirty);
                        eprintln!(
                            "goblin-server: background saving terminated with success \
                             ({bytes} bytes of records in {:.3} s)",
                            started.elapsed().as_secs_f64()
                        );
                    }
                    Err(e) => {
                        persist
                            .last_bgsave_try
                            .store(clock::now_ms() / 1000, Ordering::Relaxed);
                        eprintln!("goblin-server: background saving error: {e}");
                    }
                }
                persist.set_bgsave_failed(result.is_err());
                persist
                    .last_bgsave_secs
                    .store(started.elapsed().as_secs() as i64, Ordering::Relaxed);
                if let Ok(mut job) = persist.job.lock() {
                    *job = None;
                }
                persist.saving.store(false, Ordering::SeqCst);
            })?;
        Ok(job)
    }

    /// Sends records (from a shard's loop).
    pub fn records(&self, bytes: Vec<u8>) {
        if !bytes.is_empty() {
            self.backlog.fetch_add(bytes.len(), Ordering::Relaxed);
            let _ = self.tx.send(Piece::Records(bytes));
        }
    }

    /// A shard has sent its whole image.
    pub fn shard_done(&self) {
        let _ = self.tx.send(Piece::Done);
    }

    /// The sizes for the header.
    pub fn sizes(&self, keys: u64, expires: u64) {
        let _ = self.tx.send(Piece::Header { keys, expires });
    }

    /// The writer: header (once its sizes are known; records that come before wait),
    /// records as they come, until every shard is done. Returns how many bytes of
    /// records it wrote.
    fn write(&self, rx: &Receiver<Piece>, target: &Path, shards: usize) -> io::Result<u64> {
        let mut file = FileOut::create(target)?;
        let mut early: Vec<Vec<u8>> = Vec::new();
        let mut header_written = false;
        let mut done = 0;
        let mut bytes = 0u64;
        let result = (|| {
            while done < shards || !header_written {
                let Ok(piece) = rx.recv() else {
                    return Err(io::Error::other("the save was abandoned"));
                };
                match piece {
                    Piece::Header { keys, expires } => {
                        file.write(&header(keys, expires, false))?;
                        header_written = true;
                        for records in early.drain(..) {
                            self.backlog.fetch_sub(records.len(), Ordering::Relaxed);
                            bytes += records.len() as u64;
                            file.write(&records)?;
                        }
                    }
                    Piece::Records(records) if header_written => {
                        self.backlog.fetch_sub(records.len(), Ordering::Relaxed);
                        bytes += records.len() as u64;
                        file.write(&records)?;
                    }
                    Piece::Records(records) => early.push(records),
                    Piece::Done => done += 1,
                }
            }
            Ok(())
        })();
        match result {
            Ok(()) => file.finish().map(|()| bytes),
            Err(e) => {
                file.abandon();
                Err(e)
            }
        }
    }
}

/// What a save does once the images are taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaveKind {
    /// SAVE: write everything now, reply when the file is on disk.
    Foreground,
    /// BGSAVE: the shards write in the background; reply at once.
    Background,
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

/// A shard's whole image (SAVE).
#[derive(Debug)]
struct Part {
    records: Vec<u8>,
    keys: u64,
    expires: u64,
}

/// The transaction of a save: images begun on every shard at one instant.
#[derive(Debug)]
pub struct SavePlan {
    kind: SaveKind,
    started: bool,
    /// The file; `None`: `dir/dbfilename`.
    target: Option<PathBuf>,
    dirty: u64,
    job: Option<Arc<SaveJob>>,
}

impl SavePlan {
    /// A save of `kind` to `dir/dbfilename`.
    pub fn new(kind: SaveKind) -> SavePlan {
        SavePlan {
            kind,
            started: false,
            target: None,
            dirty: 0,
            job: None,
        }
    }

    fn target(&self, cx: &PlanCx<'_>) -> PathBuf {
        self.target
            .clone()
            .unwrap_or_else(|| cx.shared.config.persist.rdb_path())
    }

    fn start(&mut self, cx: &PlanCx<'_>) -> Step {
        let persist = &cx.shared.persist;
        if let SaveKind::Shutdown { save, nosave, .. } = self.kind {
            let rules = !cx.shared.config.persist.save.is_empty();
            if nosave || !(save || rules) {
                exit(cx);
            }
        }
        if persist
            .saving
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return cx.done(|e| e.error(crate::errors::BGSAVE_IN_PROGRESS));
        }
        self.dirty = persist.dirty.load(Ordering::Relaxed);
        let shards = cx.slots.shards();
        let kind = self.kind;
        if kind == SaveKind::Background {
            let persist = Arc::clone(persist);
            match SaveJob::start(Arc::clone(&persist), self.target(cx), shards, self.dirty) {
                Ok(job) => {
                    if let Ok(mut slot) = persist.job.lock() {
                        *slot = Some(Arc::clone(&job));
                    }
                    self.job = Some(job);
                }
                Err(e) => {
                    eprintln!("goblin-server: can't start a background save: {e}");
                    persist.saving.store(false, Ordering::SeqCst);
                    persist.set_bgsave_failed(true);
                    return cx.done(|e| e.error(b"ERR Background saving error"));
                }
            }
            persist
                .save_started
                .store(clock::now_ms(), Ordering::Relaxed);
        }
        let hops = (0..shards)
            .map(|shard| {
                Hop::run(shard, move |ctx| {
                    let (keys, expires) = ctx.db.begin_snapshot(ctx.now);
                    let mut part = Part {
                        records: Vec::new(),
                        keys: keys as u64,
                        expires: expires as u64,
                    };
                    if kind != SaveKind::Background {
                        ctx.db.snapshot_step(usize::MAX, usize::MAX);
                        part.records = ctx.db.end_snapshot().0;
                    }
                    HopOut::Other(Box::new(part))
                })
            })
            .collect();
        Step::Hops(hops)
    }

    fn finish(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        let persist = &cx.shared.persist;
        let parts: Vec<Part> = results
            .into_iter()
            .filter_map(|r| match r {
                HopOut::Other(any) => any.downcast::<Part>().ok().map(|p| *p),
                _ => None,
            })
            .collect();
        let keys = parts.iter().map(|p| p.keys).sum();
        let expires = parts.iter().map(|p| p.expires).sum();
        if let Some(job) = &self.job {
            job.sizes(keys, expires);
            return cx.done(|e| e.simple(b"Background saving started"));
        }
        let records: Vec<Vec<u8>> = parts.into_iter().map(|p| p.records).collect();
        let target = self.target(cx);
        let result = write_file(&target, keys, expires, &records);
        persist.saving.store(false, Ordering::SeqCst);
        if let Err(e) = &result {
            eprintln!(
                "goblin-server: failed saving the DB to {}: {e}",
                target.display()
            );
        } else {
            persist.saved(self.dirty);
            eprintln!("goblin-server: DB saved on disk");
        }
        match (self.kind, result) {
            (SaveKind::Shutdown { .. }, Ok(())) | (SaveKind::Shutdown { force: true, .. }, _) => {
                exit(cx)
            }
            (SaveKind::Shutdown { .. }, Err(_)) => {
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
    eprintln!("goblin-server: ready to exit, bye bye");
    std::process::exit(0);
}

impl Plan for SavePlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        if !self.started {
            self.started = true;
            return self.start(cx);
        }
        self.finish(cx, results)
    }
}
