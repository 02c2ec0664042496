//! The commands a replica sends its master: SYNC and PSYNC (a full sync: the snapshot,
//! then the stream of writes; or, for PSYNC, a partial one from the backlog:
//! `repl::master`) and REPLCONF.

use crate::persist::snapshot::SavePlan;
use crate::runtime::msg::ConnRef;
use crate::table::handler::{Args, ConnCtx, Exec};
use crate::table::{CommandTable, meta};
use crate::txn::plan::{CrossShard, HopOut, Locking, Plan, PlanCx, PlanStart, Step};

/// Registers SYNC, PSYNC and REPLCONF.
pub fn register(table: &mut CommandTable) {
    for (meta, plan) in [
        (&meta::SYNC, sync_plan as crate::txn::plan::PlanFn),
        (&meta::PSYNC, psync_plan),
    ] {
        table.add(
            meta,
            Exec::Plan(CrossShard {
                plan,
                locking: Locking::WholeShards,
            }),
        );
    }
    table.add(&meta::REPLCONF, Exec::Conn(replconf));
}

/// `SYNC`: the snapshot and the stream, with no `+FULLRESYNC` line first.
fn sync_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    refuse_while_failing_over(start)?;
    full_sync(replica_conn(start)?, false)
}

/// A master failing over (FAILOVER) lets no replica sync meanwhile.
fn refuse_while_failing_over(start: &PlanStart<'_>) -> Result<(), Vec<u8>> {
    match start.shared.failover.active() {
        true => Err(b"NOMASTERLINK Can't SYNC while failing over".to_vec()),
        false => Ok(()),
    }
}

/// `PSYNC replid offset`: a partial resynchronization when the backlog holds what the
/// replica lacks of this history (`+CONTINUE`, then the stream from `offset` on);
/// otherwise a full one (`+FULLRESYNC <replid> <offset>`, the snapshot, the stream).
fn psync_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    if args.len() > 3 && args.get(3).eq_ignore_ascii_case(b"failover") {
        // Its master hands over to this replica (FAILOVER): asked for the history this
        // replica follows, it becomes a master continuing it.
        if args.get(1) != start.shared.replication_id().as_bytes() {
            return Err(b"ERR PSYNC FAILOVER replid must match my replid.".to_vec());
        }
        // (Its link to the old master is down by now, if it was not given up: it is
        // given up before anything else, as redis-server's `replicationUnsetMaster`.)
        let conn = registered_conn(start)?;
        crate::log!(
            Notice,
            "Failover request received for replid {}.",
            String::from_utf8_lossy(args.get(1))
        );
        return Ok(Box::new(HandOver {
            conn,
            replid: args.get(1).to_vec(),
            offset: goblin_protocol::parse_i64(args.get(2)),
            promote: super::standalone::promote_plan(Some(conn)),
            then: None,
        }));
    }
    refuse_while_failing_over(start)?;
    let conn = replica_conn(start)?;
    let offset = goblin_protocol::parse_i64(start.args.get(2));
    let my_id = start.shared.replication_id();
    match start
        .shared
        .repl
        .resume(conn, start.args.get(1), offset, &my_id)
    {
        true => Ok(Box::new(Resume { conn })),
        false => full_sync(conn, true),
    }
}

/// The replica's connection (inside MULTI or a script there is none to feed); a
/// replica whose own link is not up cannot serve one.
fn replica_conn(start: &PlanStart<'_>) -> Result<ConnRef, Vec<u8>> {
    let conn = registered_conn(start)?;
    if start.shared.repl.proxied() && !start.shared.follow.connected() {
        return Err(crate::errors::NO_MASTER_LINK.to_vec());
    }
    Ok(conn)
}

/// The replica's connection (inside MULTI or a script there is none to feed).
fn registered_conn(start: &PlanStart<'_>) -> Result<ConnRef, Vec<u8>> {
    start
        .conn
        .filter(|c| start.shared.repl.snapshot_of(*c).is_some())
        .ok_or_else(|| b"ERR Replica can't interact with the keyspace".to_vec())
}

/// PSYNC … FAILOVER's plan: this replica stops following its master and is a master
/// continuing the same history (REPLICAOF NO ONE's plan, keeping this connection — the
/// old master's, now its replica), then answers the PSYNC as one: `+CONTINUE` from its
/// backlog, as it should, or a full sync.
#[derive(Debug)]
struct HandOver {
    conn: ConnRef,
    replid: Vec<u8>,
    offset: Option<i64>,
    promote: Box<dyn Plan>,
    /// The PSYNC answered, once promoted.
    then: Option<Box<dyn Plan>>,
}

impl Plan for HandOver {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        if let Some(then) = &mut self.then {
            return then.next(cx, results);
        }
        match self.promote.next(cx, results) {
            // (Promoted: its OK is no one's.)
            Step::Done(_) => {}
            step => return step,
        }
        let my_id = cx.shared.replication_id();
        let mut then: Box<dyn Plan> =
            match cx
                .shared
                .repl
                .resume(self.conn, &self.replid, self.offset, &my_id)
            {
                true => Box::new(Resume { conn: self.conn }),
                false => Box::new(SavePlan::for_replica(self.conn, true)),
            };
        let step = then.next(cx, Vec::new());
        self.then = Some(then);
        step
    }
}

fn full_sync(conn: ConnRef, psync: bool) -> Result<Box<dyn Plan>, Vec<u8>> {
    crate::log!(
        Notice,
        "Replica asks for synchronization; full resync ({})",
        if psync { "PSYNC" } else { "SYNC" }
    );
    Ok(Box::new(SavePlan::for_replica(conn, psync)))
}

/// A partial resynchronization accepted: `+CONTINUE`, after which the replica's worker
/// sends it the stream from where it asked.
#[derive(Debug)]
struct Resume {
    conn: ConnRef,
}

impl Plan for Resume {
    fn next(&mut self, cx: &PlanCx<'_>, _results: Vec<HopOut>) -> Step {
        let line = match cx.shared.repl.resumed(self.conn) {
            true => format!("CONTINUE {}", cx.shared.replication_id()),
            false => "CONTINUE".to_string(),
        };
        cx.done(|e| e.simple(line.as_bytes()))
    }
}

/// `REPLCONF option value [option value ...]`: a replica's port and capabilities before
/// its sync (`listening-port`, `ip-address`, `capa`, `rdb-only`, `rdb-filter-only`), and
/// its acknowledgements after (`ACK <offset> [FACK <offset>]`, no reply). `GETACK` is a
/// master's question to its replica: no reply here.
fn replconf(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    if args.len().is_multiple_of(2) {
        ctx.reply().error(crate::errors::SYNTAX);
        return;
    }
    let mut i = 1;
    while i + 1 < args.len() {
        let (option, value) = (args.get(i), args.get(i + 1));
        let is = |name: &str| option.eq_ignore_ascii_case(name.as_bytes());
        if is("listening-port") {
            match goblin_protocol::parse_i64(value) {
                Some(port) => ctx.client.repl_port = u16::try_from(port).unwrap_or(0),
                None => {
                    ctx.reply().error(crate::errors::NOT_INTEGER);
                    return;
                }
            }
        } else if is("ack") {
            if ctx.client.replica
                && let Some(offset) = goblin_protocol::parse_i64(value)
            {
                ctx.shared.repl.ack(ctx.client.id, offset);
            }
            return;
        } else if is("getack") {
            return;
        } else if is("capa") {
            ctx.client.repl_psync2 |= value.eq_ignore_ascii_case(b"psync2");
        } else if is("ip-address") {
            // (Redis's NET_HOST_STR_LEN.)
            if value.len() >= 256 {
                let text = format!(
                    "ERR REPLCONF ip-address provided by replica instance is too long: {} bytes",
                    value.len()
                );
                ctx.reply().error(text.as_bytes());
                return;
            }
            ctx.client.repl_ip = Some(String::from_utf8_lossy(value).into_owned());
        } else if !(is("rdb-only") || is("rdb-filter-only")) {
            let text = format!(
                "ERR Unrecognized REPLCONF option: {}",
                String::from_utf8_lossy(option)
            );
            ctx.reply().error(text.as_bytes());
            return;
        }
        i += 2;
    }
    ctx.reply().ok();
}
