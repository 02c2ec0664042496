//! Persistence: the append-only log (`aof.rs`), snapshots in Redis's RDB format
//! (`snapshot.rs`), and loading both at start-up (`load.rs`).
//!
//! The log is an observer of each shard's write path: every unit of work that changed
//! keys appends its effect (RESP commands) to the shard's own file, and the worker makes
//! the iteration's records durable (`appendfsync always`) before any reply or message of
//! that iteration leaves the thread. Snapshots need no fork: each shard writes its slots
//! in the background while serving, copying a slot before a change touches it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, AtomicUsize, Ordering};

use crate::clock;
use crate::config::{Fsync, PersistConfig};

fn fsync_code(fsync: Fsync) -> u8 {
    match fsync {
        Fsync::Always => 0,
        Fsync::Everysec => 1,
        Fsync::No => 2,
    }
}

pub mod aof;
pub mod aof_base;
pub mod load;
pub mod snapshot;

/// [`Persist::gate`]: the dataset is loading.
pub const GATE_LOADING: u8 = 1;
/// [`Persist::gate`]: writes are refused (MISCONF).
pub const GATE_DENY_WRITES: u8 = 2;

/// Persistence state shared by every thread.
#[derive(Debug)]
pub struct Persist {
    /// Why commands may be refused ([`GATE_LOADING`], [`GATE_DENY_WRITES`]); 0 when
    /// nothing is, which is all a command looks at in the common case.
    gate: AtomicU8,
    /// Identifies this run in the log (transaction ids are unique per run).
    pub run_id: u64,
    /// The last failed write or fsync of the log, while it lasts.
    aof_error: Mutex<Option<String>>,
    /// Whether the last background save failed.
    bgsave_failed: AtomicBool,
    /// Whether the configuration has `save` rules (MISCONF applies only then).
    has_save_rules: AtomicBool,
    stop_writes_on_bgsave_error: AtomicBool,
    /// `appendfsync`, as CONFIG SET leaves it (0 always, 1 everysec, 2 no).
    appendfsync: AtomicU8,
    /// DEBUG AOF-FLUSH-SLEEP: microseconds the log sleeps before writing its records
    /// (0: none), for redis-server's tests of what a reply waits for.
    pub aof_flush_sleep_us: AtomicU64,
    /// `aof-timestamp-enabled`: the log writes `#TS:<Unix seconds>` before its records
    /// when the second changed since its last, as redis-server annotates its.
    pub aof_timestamps: AtomicBool,
    /// `aof-use-rdb-preamble`: a rewrite's base is an RDB file (yes, the default) or
    /// commands (no: `aof_base.rs`).
    pub rdb_preamble: AtomicBool,
    /// `aof-disable-auto-gc`: a rewrite keeps the files it replaced, listed as history
    /// (`type h`), until it is turned off.
    pub aof_keep_history: AtomicBool,
    /// `rdb-key-save-delay` (redis-server's test knob): microseconds a background
    /// snapshot takes per key (the shards write that slowly, serving meanwhile; up to
    /// 10 ms: `Worker::save_delay`).
    pub rdb_key_save_delay: AtomicI64,
    /// Unix time of the last successful save, in seconds.
    pub last_save: AtomicU64,
    /// Changes since the last successful save (approximately: write commands run).
    pub dirty: AtomicU64,
    /// A background save runs.
    pub saving: AtomicBool,
    /// A log rewrite runs.
    pub rewriting: AtomicBool,
    /// Unix time, ms, the running save started.
    pub save_started: AtomicU64,
    /// How long the last background save took, seconds (-1: none yet).
    pub last_bgsave_secs: AtomicI64,
    /// Unix time of the last failed save attempt (for the retry delay).
    pub last_bgsave_try: AtomicU64,
    /// Whether the last rewrite failed.
    pub rewrite_failed: AtomicBool,
    /// Keys loaded so far while loading; when loading started (ms).
    pub loaded_keys: AtomicU64,
    /// Keys the last snapshot loaded held whose deadline had passed (dropped):
    /// `rdb_last_load_keys_expired`.
    pub expired_at_load: AtomicU64,
    /// When loading started, Unix ms.
    pub loading_started: AtomicU64,
    /// Bytes the log had at its last rewrite (or at start), and has now.
    pub aof_base_size: AtomicU64,
    /// Bytes of the log now.
    pub aof_current_size: AtomicU64,
    /// Rewrites done.
    pub aof_rewrites: AtomicU64,
    /// Saves done since start.
    pub saves: AtomicU64,
    /// The log, which the shards' feeds append to (`Master` holds it too).
    pub log: aof::Log,
    /// `appendonly` as it is now: the shards log their writes (CONFIG SET turns it on and
    /// off).
    pub log_on: AtomicBool,
    /// CONFIG SET appendonly yes asked for the log to start: worker 0's cron starts a
    /// rewrite, whose instant opens the log's file.
    pub log_start: AtomicBool,
    /// Background saves and rewrites begun: INFO's `total_forks` (Goblin forks no
    /// child; these jobs are what redis-server forks one for).
    pub jobs_started: AtomicU64,
    /// The everysec fsync thread runs.
    fsync_thread: AtomicBool,
    /// The background save in progress, which shards send their images to.
    pub job: Mutex<Option<std::sync::Arc<snapshot::SaveJob>>>,
    /// Workers that have not yet taken their part of the loaded dataset.
    pub loading_workers: AtomicUsize,
    /// The log's manifest as it is on disk (with the log on).
    pub manifest: Mutex<Option<aof::Manifest>>,
    /// A shard could not switch to a rewrite's new files (the rewrite then keeps the
    /// old ones).
    pub rotation_failed: AtomicBool,
    /// BGREWRITEAOF waits for the running save to end.
    pub rewrite_scheduled: AtomicBool,
    /// BGSAVE SCHEDULE waits for the running rewrite to end.
    pub bgsave_scheduled: AtomicBool,
    /// When the running rewrite started, Unix ms; how long the last one took, seconds.
    pub rewrite_started: AtomicU64,
    /// How long the last rewrite took, seconds (-1: none yet).
    pub last_rewrite_secs: AtomicI64,
}

impl Persist {
    /// The options of redis-server's that are kept with the others
    /// (`config/inert.rs`) and acted on here: `aof-timestamp-enabled`,
    /// `aof-use-rdb-preamble`, `rdb-key-save-delay`, `aof-disable-auto-gc` (turned off,
    /// the log's history goes: [`Persist::drop_history`]).
    pub fn set_knobs(&self, inert: &[String], config: &PersistConfig) {
        let value = |name| crate::config::inert::value(inert, name);
        let keep = value("aof-disable-auto-gc") == Some("yes");
        if self.aof_keep_history.swap(keep, Ordering::SeqCst) && !keep {
            self.drop_history(&config.aof_dir(), &config.appendfilename);
        }
        self.aof_timestamps.store(
            value("aof-timestamp-enabled") == Some("yes"),
            Ordering::Relaxed,
        );
        self.rdb_preamble.store(
            value("aof-use-rdb-preamble") != Some("no"),
            Ordering::Relaxed,
        );
        self.rdb_key_save_delay.store(
            value("rdb-key-save-delay")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            Ordering::Relaxed,
        );
    }

    /// Deletes the files a rewrite replaced and kept (`aof-disable-auto-gc yes`), and
    /// lists them no more, as redis-server's `aofDelHistoryFiles`.
    pub fn drop_history(&self, dir: &std::path::Path, name: &str) {
        let Ok(mut slot) = self.manifest.lock() else {
            return;
        };
        let Some(manifest) = slot.as_mut().filter(|m| !m.history.is_empty()) else {
            return;
        };
        let history = std::mem::take(&mut manifest.history);
        if let Err(e) = manifest.save(dir, name) {
            crate::log!(Warning, "Can't write the AOF manifest: {e}");
            manifest.history = history;
            return;
        }
        for f in history {
            crate::log!(
                Notice,
                "Removing the history file {} in the background",
                f.name
            );
            let _ = std::fs::remove_file(dir.join(&f.name));
        }
    }

    /// The state at start-up: loading until the loader says it is done.
    pub fn new(config: &PersistConfig) -> Persist {
        Persist {
            gate: AtomicU8::new(GATE_LOADING),
            run_id: clock::now_ms() ^ (u64::from(std::process::id()) << 40),
            aof_error: Mutex::new(None),
            bgsave_failed: AtomicBool::new(false),
            has_save_rules: AtomicBool::new(!config.save.is_empty()),
            stop_writes_on_bgsave_error: AtomicBool::new(config.stop_writes_on_bgsave_error),
            appendfsync: AtomicU8::new(fsync_code(config.appendfsync)),
            aof_flush_sleep_us: AtomicU64::new(0),
            aof_timestamps: AtomicBool::new(false),
            rdb_preamble: AtomicBool::new(true),
            aof_keep_history: AtomicBool::new(false),
            rdb_key_save_delay: AtomicI64::new(0),
            last_save: AtomicU64::new(clock::now_ms() / 1000),
            dirty: AtomicU64::new(0),
            saving: AtomicBool::new(false),
            rewriting: AtomicBool::new(false),
            save_started: AtomicU64::new(0),
            last_bgsave_secs: AtomicI64::new(-1),
            last_bgsave_try: AtomicU64::new(0),
            rewrite_failed: AtomicBool::new(false),
            loaded_keys: AtomicU64::new(0),
            expired_at_load: AtomicU64::new(0),
            loading_started: AtomicU64::new(clock::now_ms()),
            aof_base_size: AtomicU64::new(0),
            aof_current_size: AtomicU64::new(0),
            aof_rewrites: AtomicU64::new(0),
            saves: AtomicU64::new(0),
            log: aof::Log::default(),
            log_on: AtomicBool::new(config.appendonly),
            log_start: AtomicBool::new(false),
            jobs_started: AtomicU64::new(0),
            fsync_thread: AtomicBool::new(false),
            job: Mutex::new(None),
            loading_workers: AtomicUsize::new(usize::MAX),
            manifest: Mutex::new(None),
            rotation_failed: AtomicBool::new(false),
            rewrite_scheduled: AtomicBool::new(false),
            bgsave_scheduled: AtomicBool::new(false),
            rewrite_started: AtomicU64::new(0),
            last_rewrite_secs: AtomicI64::new(-1),
        }
    }

    /// Whether `save` rules are set, and whether a failed save then refuses writes (CONFIG
    /// SET).
    pub fn set_rules(&self, save_rules: bool, stop_writes: bool) {
        self.has_save_rules.store(save_rules, Ordering::Relaxed);
        self.stop_writes_on_bgsave_error
            .store(stop_writes, Ordering::Relaxed);
        self.update_gate();
    }

    /// `appendfsync` from now on (CONFIG SET).
    pub fn set_fsync(&self, fsync: Fsync) {
        self.appendfsync.store(fsync_code(fsync), Ordering::Relaxed);
    }

    /// `appendfsync` now.
    pub fn fsync(&self) -> Fsync {
        match self.appendfsync.load(Ordering::Relaxed) {
            0 => Fsync::Always,
            1 => Fsync::Everysec,
            _ => Fsync::No,
        }
    }

    /// What refuses commands now: 0 (nothing) in the common case.
    #[inline]
    pub fn gate(&self) -> u8 {
        self.gate.load(Ordering::Relaxed)
    }

    /// Whether the dataset is loading.
    pub fn loading(&self) -> bool {
        self.gate() & GATE_LOADING != 0
    }

    /// Loading begins again (DEBUG LOADAOF's replay): commands not allowed while loading
    /// are refused with `LOADING` until [`Persist::loaded`].
    pub fn loading_again(&self) {
        self.gate.fetch_or(GATE_LOADING, Ordering::SeqCst);
    }

    /// Loading is over.
    pub fn loaded(&self) {
        self.gate.fetch_and(!GATE_LOADING, Ordering::SeqCst);
    }

    /// Why a write is refused now (the MISCONF error), if it is.
    pub fn write_refusal(&self) -> Option<Vec<u8>> {
        if self.has_save_rules.load(Ordering::Relaxed)
            && self.stop_writes_on_bgsave_error.load(Ordering::Relaxed)
            && self.bgsave_failed.load(Ordering::Relaxed)
        {
            return Some(crate::errors::MISCONF_RDB.to_vec());
        }
        let error = self.aof_error.lock().ok()?.clone()?;
        Some(crate::errors::misconf_aof(&error))
    }

    fn update_gate(&self) {
        let deny = self.write_refusal().is_some();
        if deny {
            self.gate.fetch_or(GATE_DENY_WRITES, Ordering::SeqCst);
        } else {
            self.gate.fetch_and(!GATE_DENY_WRITES, Ordering::SeqCst);
        }
    }

    /// The log could not be written or synced (`Some(reason)`), or can again (`None`).
    pub fn set_aof_error(&self, error: Option<String>) {
        if let Ok(mut e) = self.aof_error.lock() {
            if *e == error {
                return;
            }
            match &error {
                Some(reason) => {
                    crate::log!(Warning, "error writing the append-only log: {reason}")
                }
                None => crate::log!(Notice, "the append-only log is written again"),
            }
            *e = error;
        }
        self.update_gate();
    }

    /// Whether the log's last write or fsync failed.
    pub fn aof_failed(&self) -> bool {
        self.aof_error.lock().is_ok_and(|e| e.is_some())
    }

    /// The outcome of a background save.
    pub fn set_bgsave_failed(&self, failed: bool) {
        self.bgsave_failed.store(failed, Ordering::Relaxed);
        self.update_gate();
    }

    /// Whether the last background save failed.
    pub fn bgsave_failed(&self) -> bool {
        self.bgsave_failed.load(Ordering::Relaxed)
    }

    /// A save of the state with `dirty_at_start` changes succeeded.
    pub fn saved(&self, dirty_at_start: u64) {
        self.last_save
            .store(clock::now_ms() / 1000, Ordering::Relaxed);
        self.saves.fetch_add(1, Ordering::Relaxed);
        let _ = self
            .dirty
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |d| {
                Some(d.saturating_sub(dirty_at_start))
            });
    }

    /// Starts the thread that syncs the log once a second, if it does not run yet.
    ///
    /// # Errors
    /// When the thread cannot be started.
    pub fn start_fsync_thread(self: &std::sync::Arc<Self>) -> std::io::Result<()> {
        if self.fsync_thread.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        aof::start_fsync_thread(std::sync::Arc::clone(self))
    }

    /// CONFIG SET appendonly: on, the log starts with a rewrite (worker 0 begins it);
    /// off, the log is written out and closed and a rewrite in progress is killed. True when
    /// the workers are to be woken: worker 0 to begin the rewrite, the shards to drop
    /// their images of the one killed.
    pub fn set_log(self: &std::sync::Arc<Self>, on: bool) -> bool {
        let was = self.log_on.swap(on, Ordering::SeqCst);
        if on && !was {
            self.log_start.store(true, Ordering::SeqCst);
            // (Worker 0 starts it in its next loop iteration, or once a save running
            // ends: redis-server's words for either.)
            crate::log!(
                Notice,
                "{}",
                match self.saving.load(Ordering::Relaxed) {
                    true =>
                        "AOF was enabled but there is already another background \
                             operation. An AOF background was scheduled to start when \
                             possible.",
                    false =>
                        "AOF was enabled. An AOF background was scheduled to start when possible.",
                }
            );
            if let Err(e) = self.start_fsync_thread() {
                crate::log!(Warning, "cannot start the log's fsync thread: {e}");
            }
            return true;
        } else if !on && was {
            self.log.close(self);
            // Nothing waits to start the log any more, nor a rewrite (redis-server's
            // `stopAppendOnly` unschedules it).
            self.log_start.store(false, Ordering::SeqCst);
            self.rewrite_scheduled.store(false, Ordering::SeqCst);
            crate::log!(
                Notice,
                "the append-only log is off (CONFIG SET appendonly no)"
            );
            let job = self.job.lock().ok().and_then(|j| j.clone());
            if job.is_some_and(|job| job.kill_rewrite()) {
                // (redis-server's words, which operators and its tests look for.)
                crate::log!(
                    Notice,
                    "Killing running AOF rewrite child: the rewrite in the shards' loops"
                );
                return true;
            }
        }
        false
    }

    /// Writes what the log holds and syncs its file to disk (SHUTDOWN, DEBUG LOADAOF).
    pub fn sync_log(&self) {
        if let Err(e) = self.log.flush_to_disk(self, true) {
            crate::log!(Warning, "fsync of the append-only log failed: {e}");
        }
    }
}
