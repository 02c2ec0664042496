//! Persistence commands: SAVE, BGSAVE, LASTSAVE, SHUTDOWN, and INFO's persistence
//! section. The work is in `persist/`.

use std::sync::atomic::Ordering;

use crate::errors;
use crate::persist::snapshot::{SaveKind, SavePlan};
use crate::runtime::server::Shared;
use crate::table::handler::{Args, ConnCtx, Exec};
use crate::table::{CommandTable, meta};
use crate::txn::plan::{CrossShard, HopOut, Locking, Outcome, Plan, PlanCx, PlanStart, Step};

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    // A save begins every shard's image at one instant: every shard locked whole.
    let whole = |plan| {
        Exec::Plan(CrossShard {
            plan,
            locking: Locking::WholeShards,
        })
    };
    table.add(&meta::SAVE, whole(save_plan));
    table.add(&meta::BGSAVE, whole(bgsave_plan));
    table.add(&meta::SHUTDOWN, whole(shutdown_plan));
    table.add(&meta::BGREWRITEAOF, whole(bgrewriteaof_plan));
    table.add(&meta::LASTSAVE, Exec::Conn(lastsave));
}

/// `SAVE`: a snapshot written now; the reply comes when it is on disk.
fn save_plan(_start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(Box::new(SavePlan::new(SaveKind::Foreground)))
}

/// `BGSAVE [SCHEDULE]`: a snapshot written in the background; with SCHEDULE, during a
/// log rewrite, once it ends.
fn bgsave_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let mut c = start.args.cursor(1);
    let schedule = c.next_is("schedule");
    c.finish()?;
    Ok(Box::new(
        SavePlan::new(SaveKind::Background { schedule }).in_exec(start.locked),
    ))
}

/// `BGREWRITEAOF`: the log compacted — a snapshot as its new base, taken in the
/// background while every shard goes on logging into new files.
fn bgrewriteaof_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(Box::new(
        SavePlan::new(SaveKind::Rewrite).in_exec(start.locked),
    ))
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`: save when asked or when `save` rules
/// are set, sync the log, and end the process. (There is no pause to wait for replicas,
/// so NOW changes nothing; ABORT cancels a signal's shutdown held by DEBUG PAUSE-CRON.)
fn shutdown_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let (save, nosave, force) = match shutdown_flags(start.args) {
        // ABORT: the shutdown a signal asked for, not started (DEBUG PAUSE-CRON), is
        // cancelled.
        Err(e) if e == ABORT && start.shared.shutdown_asked.swap(false, Ordering::SeqCst) => {
            crate::log!(Notice, "Shutdown manually aborted.");
            return Ok(Box::new(Answered::ok()));
        }
        flags => flags?,
    };
    Ok(Box::new(SavePlan::new(SaveKind::Shutdown {
        save,
        nosave,
        force,
    })))
}

/// SHUTDOWN ABORT with no shutdown to cancel.
const ABORT: &[u8] = b"ERR No shutdown in progress.";

/// A plan whose reply is known at once.
#[derive(Debug)]
struct Answered(Option<Vec<u8>>);

impl Answered {
    fn ok() -> Answered {
        Answered(Some(b"+OK\r\n".to_vec()))
    }
}

impl Plan for Answered {
    fn next(&mut self, _cx: &PlanCx<'_>, _results: Vec<HopOut>) -> Step {
        Step::Done(Outcome::Reply(self.0.take().unwrap_or_default()))
    }
}

/// SHUTDOWN's flags: SAVE, NOSAVE, FORCE (or its error).
fn shutdown_flags(args: &Args<'_>) -> Result<(bool, bool, bool), Vec<u8>> {
    let (mut save, mut nosave, mut force, mut abort) = (false, false, false, false);
    for arg in args.iter_from(1) {
        let flag = match arg.to_ascii_lowercase().as_slice() {
            b"save" => &mut save,
            b"nosave" => &mut nosave,
            b"now" => continue,
            b"force" => &mut force,
            b"abort" => &mut abort,
            _ => return Err(errors::SYNTAX.to_vec()),
        };
        *flag = true;
    }
    if (save && nosave) || (abort && (save || nosave || force)) {
        return Err(errors::SYNTAX.to_vec());
    }
    if abort {
        return Err(ABORT.to_vec());
    }
    Ok((save, nosave, force))
}

/// SHUTDOWN while a script is busy (the way to stop one that wrote): with NOSAVE, the
/// process ends at once, its log synced (the busy script's effects so far, which its
/// thread has not handed to the log, are not in it); without, the BUSY error, as
/// redis-server answers. Returns the error to reply with.
pub(crate) fn shutdown_while_busy(shared: &Shared, args: &Args<'_>) -> Vec<u8> {
    match shutdown_flags(args) {
        Err(e) => e,
        Ok((_, false, _)) => crate::scripting::busy_error().to_vec(),
        Ok((_, true, _)) => {
            crate::log!(Warning, "User requested shutdown...");
            crate::runtime::supervise::notify("STOPPING=1\n");
            shared.persist.sync_log();
            crate::runtime::server::remove_files(shared);
            crate::log!(Notice, "ready to exit, bye bye");
            crate::runtime::server::stop_listening(shared);
            std::process::exit(0);
        }
    }
}

/// `LASTSAVE`: Unix time of the last successful save.
fn lastsave(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let at = ctx.shared.persist.last_save.load(Ordering::Relaxed);
    ctx.reply().integer(at as i64);
}

/// INFO's `Persistence` section, with redis-server 7.0's field names.
pub fn info(shared: &Shared) -> String {
    let p = &shared.persist;
    let appendonly = p.log_on.load(Ordering::Relaxed);
    let saving = p.saving.load(Ordering::Relaxed);
    let now_ms = crate::clock::now_ms();
    let current_bgsave = if saving {
        (now_ms.saturating_sub(p.save_started.load(Ordering::Relaxed)) / 1000) as i64
    } else {
        -1
    };
    let rewriting = p.rewriting.load(Ordering::Relaxed);
    let log_start = p.log_start.load(Ordering::Relaxed);
    let saving = saving && !rewriting;
    let current_rewrite = if rewriting {
        (now_ms.saturating_sub(p.rewrite_started.load(Ordering::Relaxed)) / 1000) as i64
    } else {
        -1
    };
    let current_bgsave = if saving { current_bgsave } else { -1 };
    let status = |failed: bool| if failed { "err" } else { "ok" };
    let loading = p.loading();
    let mut text = format!(
        "loading:{}\r\nasync_loading:0\r\ncurrent_cow_peak:0\r\ncurrent_cow_size:0\r\n\
         current_cow_size_age:0\r\ncurrent_fork_perc:0.00\r\ncurrent_save_keys_processed:0\r\n\
         current_save_keys_total:0\r\nrdb_changes_since_last_save:{}\r\n\
         rdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\n\
         rdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{current_bgsave}\r\n\
         rdb_saves:{}\r\nrdb_last_cow_size:0\r\nrdb_last_load_keys_expired:{}\r\n\
         rdb_last_load_keys_loaded:{}\r\naof_enabled:{}\r\naof_rewrite_in_progress:{}\r\n\
         aof_rewrite_scheduled:{}\r\naof_last_rewrite_time_sec:{}\r\n\
         aof_current_rewrite_time_sec:{current_rewrite}\r\naof_last_bgrewrite_status:{}\r\n\
         aof_rewrites:{}\r\n\
         aof_rewrites_consecutive_failures:0\r\naof_last_write_status:{}\r\n\
         aof_last_cow_size:0\r\nmodule_fork_in_progress:0\r\nmodule_fork_last_cow_size:0\r\n",
        u8::from(loading),
        p.dirty.load(Ordering::Relaxed),
        u8::from(saving),
        p.last_save.load(Ordering::Relaxed),
        status(p.bgsave_failed()),
        p.last_bgsave_secs.load(Ordering::Relaxed),
        p.saves.load(Ordering::Relaxed),
        p.expired_at_load.load(Ordering::Relaxed),
        p.loaded_keys.load(Ordering::Relaxed),
        u8::from(appendonly),
        // The rewrite that turns the log on starts in worker 0's next loop iteration
        // (redis-server's, in CONFIG SET): until then it counts as in progress, or, with
        // a save running, scheduled — as redis-server's.
        u8::from(rewriting || (log_start && !saving)),
        u8::from(p.rewrite_scheduled.load(Ordering::Relaxed) || (log_start && saving)),
        p.last_rewrite_secs.load(Ordering::Relaxed),
        status(p.rewrite_failed.load(Ordering::Relaxed)),
        p.aof_rewrites.load(Ordering::Relaxed),
        status(p.aof_failed()),
    );
    if appendonly {
        text.push_str(&format!(
            "aof_current_size:{}\r\naof_base_size:{}\r\naof_pending_rewrite:0\r\n\
             aof_buffer_length:0\r\naof_pending_bio_fsync:0\r\naof_delayed_fsync:0\r\n",
            p.aof_current_size.load(Ordering::Relaxed),
            p.aof_base_size.load(Ordering::Relaxed),
        ));
    }
    if loading {
        let started = p.loading_started.load(Ordering::Relaxed);
        text.push_str(&format!(
            "loading_start_time:{}\r\nloading_loaded_keys:{}\r\n",
            started / 1000,
            p.loaded_keys.load(Ordering::Relaxed),
        ));
    }
    text
}
