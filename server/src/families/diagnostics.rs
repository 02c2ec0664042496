//! What operators look at when something is slow or big: LATENCY (the latency monitor),
//! MEMORY (USAGE, STATS, DOCTOR, PURGE, MALLOC-STATS), with redis-server 7.0's replies
//! where they mean something here. (DEBUG is `debug.rs`.)

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use goblin_protocol::parse_i64;

use crate::errors;
use crate::runtime::histogram::Histogram;
use crate::table::CommandTable;
use crate::table::handler::{Args, ConnCtx, Exec, ShardCtx};
use crate::table::meta;
use crate::txn::plan::{CrossShard, HopOut, Locking, Outcome, Plan, PlanCx, PlanStart};
use crate::txn::shapes::FanOut;

/// Registers LATENCY and MEMORY.
pub fn register(table: &mut CommandTable) {
    table.add_container(
        &meta::LATENCY,
        Exec::Container,
        &[
            ("latest", None, Exec::Conn(latency_latest)),
            ("history", None, Exec::Conn(latency_history)),
            ("graph", None, Exec::Conn(latency_graph)),
            ("reset", None, Exec::Conn(latency_reset)),
            ("doctor", None, Exec::Conn(latency_doctor)),
            ("help", None, Exec::Conn(latency_help)),
            (
                "histogram",
                None,
                Exec::Plan(CrossShard {
                    plan: latency_histogram_plan,
                    locking: Locking::WholeShards,
                }),
            ),
        ],
    );
    table.add_container(
        &meta::MEMORY,
        Exec::Container,
        &[
            ("usage", None, Exec::Shard(memory_usage)),
            (
                "stats",
                None,
                Exec::Plan(CrossShard {
                    plan: memory_stats_plan,
                    locking: Locking::WholeShards,
                }),
            ),
            ("doctor", None, Exec::Conn(memory_doctor)),
            ("purge", None, Exec::Conn(memory_purge)),
            ("malloc-stats", None, Exec::Conn(memory_malloc_stats)),
            ("help", None, Exec::Conn(memory_help)),
        ],
    );
}

/// `LATENCY LATEST`
fn latency_latest(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let latency = &ctx.shared.latency;
    latency.latest(&mut ctx.reply());
}

/// `LATENCY GRAPH event`
fn latency_graph(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let event = args.get(2);
    match ctx.shared.latency.graph(event) {
        Some(graph) => ctx.reply().verbatim(b"txt", graph.as_bytes()),
        None => {
            let mut msg = b"ERR No samples available for event '".to_vec();
            msg.extend_from_slice(event);
            msg.push(b'\'');
            ctx.reply().error_sanitized(&msg);
        }
    }
}

/// `LATENCY HISTORY event`
fn latency_history(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let latency = &ctx.shared.latency;
    latency.history(args.get(2), &mut ctx.reply());
}

/// `LATENCY RESET [event ...]`
fn latency_reset(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let names: Vec<&[u8]> = args.iter_from(2).collect();
    let n = ctx.shared.latency.reset(&names);
    ctx.reply().integer(n as i64);
}

/// `LATENCY DOCTOR`
fn latency_doctor(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let report = ctx.shared.latency.doctor();
    ctx.reply().verbatim(b"txt", report.as_bytes());
}

/// `LATENCY HELP` (the subcommands Goblin has).
fn latency_help(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    super::reply_help(
        ctx,
        &[
            "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
            "HELP",
            "    Prints this help.",
        ],
    );
}

/// One worker's latency histograms, by command id (LATENCY HISTOGRAM's and INFO
/// latencystats' part).
pub(crate) fn latency_part(ctx: &ShardCtx<'_>) -> HopOut {
    let part: Vec<(usize, Histogram)> = ctx
        .latencies
        .iter()
        .map(|(id, h)| (id, h.clone()))
        .collect();
    HopOut::Other(Box::new(part))
}

/// Every worker's histograms added up, by command id.
pub(crate) fn merge_latencies(parts: Vec<HopOut>) -> BTreeMap<usize, Histogram> {
    let mut merged: BTreeMap<usize, Histogram> = BTreeMap::new();
    for part in parts {
        let HopOut::Other(any) = part else { continue };
        let Ok(part) = any.downcast::<Vec<(usize, Histogram)>>() else {
            continue;
        };
        for (id, h) in part.iter() {
            merged.entry(*id).or_default().merge(h);
        }
    }
    merged
}

fn latency_histogram_part(ctx: &mut ShardCtx<'_>, _args: &[Vec<u8>]) -> HopOut {
    latency_part(ctx)
}

/// `LATENCY HISTOGRAM [command ...]`: per command with runs (all of them, by name, or
/// those named — a container names its subcommands; unknown names are skipped), its
/// calls and cumulative buckets, as `latencySpecificCommandsFillCDF` answers.
fn latency_histogram_merge(cx: &PlanCx<'_>, args: &[Vec<u8>], parts: Vec<HopOut>) -> Outcome {
    let merged = merge_latencies(parts);
    let table = &cx.shared.commands;
    let mut shown: Vec<(&str, &Histogram)> = Vec::new();
    if args.len() <= 2 {
        shown = merged
            .iter()
            .filter_map(|(id, h)| table.get(*id).map(|s| (s.name, h)))
            .collect();
        shown.sort_by_key(|(name, _)| *name);
    }
    for name in args.iter().skip(2) {
        let Some(spec) = table.lookup_full(name) else {
            continue;
        };
        let with_subcommands = std::iter::once(spec).chain(table.subcommands(spec));
        for spec in with_subcommands {
            if let Some(h) = merged.get(&spec.id) {
                shown.push((spec.name, h));
            }
        }
    }
    cx.reply(|e| {
        e.map(shown.len());
        for (name, h) in &shown {
            e.bulk(name.as_bytes());
            e.map(2);
            e.bulk(b"calls");
            e.integer(h.total() as i64);
            e.bulk(b"histogram_usec");
            let buckets = h.cumulative_usec();
            e.map(buckets.len());
            for (usec, count) in buckets {
                e.integer(usec as i64);
                e.integer(count as i64);
            }
        }
    })
}

fn latency_histogram_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(Box::new(FanOut::new(
        start.args,
        latency_histogram_part,
        latency_histogram_merge,
    )))
}

/// `MEMORY USAGE key [SAMPLES count]`: the bytes the key takes (nil when it does not
/// exist). Goblin counts every element, so SAMPLES is checked and does not change the
/// answer.
fn memory_usage(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let mut i = 3;
    while i < args.len() {
        if args.is(i, "samples") && i + 1 < args.len() {
            match parse_i64(args.get(i + 1)) {
                None => return ctx.out.error(errors::NOT_INTEGER),
                Some(n) if n < 0 => return ctx.out.error(errors::SYNTAX),
                Some(_) => {}
            }
            i += 2;
        } else {
            return ctx.out.error(errors::SYNTAX);
        }
    }
    let Some(entry) = ctx.db.get(args.get(2), ctx.now) else {
        return ctx.out.null();
    };
    ctx.out.integer(entry.memory_usage() as i64);
}

/// What one shard tells MEMORY STATS: per database its keys and the bytes of its tables,
/// and its keyspace's bytes.
#[derive(Debug, Default)]
struct MemoryPart {
    dbs: Vec<(usize, usize, usize)>,
    keys: usize,
    bytes: usize,
}

fn memory_stats_part(ctx: &mut ShardCtx<'_>, _args: &[Vec<u8>]) -> HopOut {
    let mut part = MemoryPart::default();
    ctx.for_each_db(|db, keyspace| {
        if !keyspace.is_empty() {
            part.dbs.push((db, keyspace.len(), keyspace.volatile_len()));
        }
        part.keys += keyspace.len();
        part.bytes += keyspace.used_bytes();
    });
    HopOut::Other(Box::new(part))
}

/// `MEMORY STATS`: redis-server's fields, from the allocator's count, the process's
/// resident size and every shard's keyspace.
fn memory_stats_merge(cx: &PlanCx<'_>, _args: &[Vec<u8>], parts: Vec<HopOut>) -> Outcome {
    let mut dbs: BTreeMap<usize, (usize, usize)> = Default::default();
    let (mut keys, mut dataset) = (0usize, 0usize);
    for part in parts {
        let HopOut::Other(any) = part else { continue };
        let Ok(part) = any.downcast::<MemoryPart>() else {
            continue;
        };
        keys += part.keys;
        dataset += part.bytes;
        for (db, n, volatile) in part.dbs {
            let entry = dbs.entry(db).or_default();
            entry.0 += n;
            entry.1 += volatile;
        }
    }
    let rss = crate::util::rss_bytes() as usize;
    let total = crate::alloc::allocated().unwrap_or(rss);
    let peak = cx.shared.memory.peak(total);
    let overhead = total.saturating_sub(dataset);
    let startup = cx.shared.memory.startup.load(Ordering::Relaxed) as usize;
    // What INFO memory shows too: the clients' buffers as each thread last measured
    // them, and the scripts' and functions' bodies.
    let clients = cx.shared.clients_memory();
    let (_, scripts) = cx.shared.scripts.stats();
    let functions = cx.shared.functions.read(|r| r.bodies_bytes());
    let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    /// A field's value.
    enum V {
        Int(usize),
        Float(f64),
        Db(usize, usize),
    }
    let mut fields: Vec<(String, V)> = [
        ("peak.allocated", peak),
        ("total.allocated", total),
        ("startup.allocated", startup),
        ("replication.backlog", 0),
        ("clients.slaves", 0),
        ("clients.normal", clients as usize),
        ("cluster.links", 0),
        ("aof.buffer", 0),
        ("lua.caches", scripts),
        ("functions.caches", functions),
    ]
    .into_iter()
    .map(|(name, v)| (name.to_string(), V::Int(v)))
    .collect();
    for (db, (n, volatile)) in &dbs {
        fields.push((format!("db.{db}"), V::Db(*n, *volatile)));
    }
    fields.extend([
        ("overhead.total".to_string(), V::Int(overhead)),
        ("keys.count".to_string(), V::Int(keys)),
        (
            "keys.bytes-per-key".to_string(),
            V::Int(dataset.checked_div(keys).unwrap_or(0)),
        ),
        ("dataset.bytes".to_string(), V::Int(dataset)),
        (
            "dataset.percentage".to_string(),
            V::Float(ratio(dataset, total.saturating_sub(startup)) * 100.0),
        ),
        (
            "peak.percentage".to_string(),
            V::Float(ratio(total, peak) * 100.0),
        ),
        ("allocator.allocated".to_string(), V::Int(total)),
        ("allocator.active".to_string(), V::Int(total)),
        ("allocator.resident".to_string(), V::Int(rss)),
        ("allocator-fragmentation.ratio".to_string(), V::Float(1.0)),
        ("allocator-fragmentation.bytes".to_string(), V::Int(0)),
        (
            "rss-overhead.ratio".to_string(),
            V::Float(ratio(rss, total)),
        ),
        (
            "rss-overhead.bytes".to_string(),
            V::Int(rss.saturating_sub(total)),
        ),
        ("fragmentation".to_string(), V::Float(ratio(rss, total))),
        (
            "fragmentation.bytes".to_string(),
            V::Int(rss.saturating_sub(total)),
        ),
    ]);
    cx.reply(|out| {
        out.map(fields.len());
        for (name, value) in &fields {
            out.bulk(name.as_bytes());
            match value {
                V::Int(n) => out.integer(*n as i64),
                V::Float(x) => out.double(*x),
                V::Db(n, volatile) => {
                    out.map(3);
                    out.bulk(b"overhead.hashtable.main");
                    out.integer((n * 8) as i64);
                    out.bulk(b"overhead.hashtable.expires");
                    out.integer((volatile * 8) as i64);
                    out.bulk(b"overhead.hashtable.slot-to-keys");
                    out.integer(0);
                }
            }
        }
    })
}

fn memory_stats_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(Box::new(FanOut::new(
        start.args,
        memory_stats_part,
        memory_stats_merge,
    )))
}

/// `MEMORY DOCTOR`: redis-server's report when it finds nothing to say.
fn memory_doctor(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let text: &[u8] = b"Hi Sam, I can't find any memory issue in your instance. I can only \
        account for what occurs on this base.";
    ctx.reply().verbatim(b"txt", text);
}

/// `MEMORY PURGE`: freed memory goes back to the operating system.
fn memory_purge(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    crate::memory::purge_soon();
    ctx.reply().ok();
}

/// `MEMORY MALLOC-STATS`: redis-server's answer for an allocator without a report.
fn memory_malloc_stats(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    ctx.reply()
        .verbatim(b"txt", b"Stats not supported for the current allocator");
}

/// `MEMORY HELP`
fn memory_help(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    super::reply_help(
        ctx,
        &[
            "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
            "HELP",
            "    Prints this help.",
        ],
    );
}
