//! Server commands: COMMAND, CONFIG, INFO, DBSIZE, FLUSHALL, FLUSHDB.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use crate::config;
use crate::errors;
use crate::runtime::pubsub::Space;
use crate::runtime::server::REDIS_VERSION;
use crate::table::args::is_keyword;
use crate::table::handler::{Args, CmdStat, ConnCtx, Exec, ShardCtx};
use crate::table::{CommandSpec, CommandTable, Flags, meta};
use crate::txn::plan::{
    CrossShard, HopOut, Locking, Outcome, Plan, PlanCx, PlanStart, Step, Tally,
};
use crate::txn::shapes::{FanOut, sum};
use crate::util::glob_match;

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::TIME, Exec::Conn(time));
    table.add(&meta::ROLE, Exec::Conn(role));
    table.add_container(
        &meta::COMMAND,
        Exec::Conn(command_all),
        &[
            ("count", None, Exec::Conn(command_count)),
            ("list", None, Exec::Conn(command_list)),
            ("info", None, Exec::Conn(command_info)),
            ("docs", None, Exec::Conn(command_docs)),
            ("getkeys", None, Exec::Conn(command_getkeys)),
            ("getkeysandflags", None, Exec::Conn(command_getkeysandflags)),
            ("help", None, Exec::Conn(command_help)),
        ],
    );
    table.add_container(
        &meta::SLOWLOG,
        Exec::Container,
        &[
            ("get", None, Exec::Conn(slowlog_get)),
            ("len", None, Exec::Conn(slowlog_len)),
            ("reset", None, Exec::Conn(slowlog_reset)),
            ("help", None, Exec::Conn(slowlog_help)),
        ],
    );
    table.add_container(
        &meta::CONFIG,
        Exec::Container,
        &[
            ("get", None, Exec::Conn(config_get)),
            ("set", None, Exec::Conn(config_set)),
            ("rewrite", None, Exec::Conn(config_rewrite)),
            ("help", None, Exec::Conn(config_help)),
            (
                "resetstat",
                None,
                Exec::Plan(CrossShard {
                    plan: resetstat_plan,
                    locking: Locking::WholeShards,
                }),
            ),
        ],
    );
    // Keyspace-wide: a part on every shard, each seen whole, so that no multi-shard
    // write is half applied when they count or clear it.
    let whole = |plan| {
        Exec::Plan(CrossShard {
            plan,
            locking: Locking::WholeShards,
        })
    };
    table.add(&meta::INFO, whole(info_plan));
    table.add(&meta::DBSIZE, whole(dbsize_plan));
    table.add(&meta::FLUSHALL, whole(flush_plan));
    table.add(&meta::FLUSHDB, whole(flush_plan));
    table.add(&meta::SWAPDB, whole(swapdb_plan));
}

/// `SLOWLOG GET [count]`: the newest `count` entries (10; -1: all).
fn slowlog_get(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    if args.len() > 3 {
        let msg = errors::subcommand_syntax(args.get(0), args.get(1));
        return ctx.reply().error_sanitized(&msg);
    }
    let count = if args.len() > 2 {
        match goblin_protocol::parse_i64(args.get(2)).filter(|&n| n >= -1) {
            Some(-1) => None,
            Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            None => return ctx.reply().error(errors::SLOWLOG_COUNT),
        }
    } else {
        Some(10)
    };
    let shared = ctx.shared;
    shared.slowlog.encode(count, &mut ctx.reply());
}

/// `SLOWLOG LEN`
fn slowlog_len(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let n = ctx.shared.slowlog.len();
    ctx.reply().integer(n as i64);
}

/// `SLOWLOG RESET`
fn slowlog_reset(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    ctx.shared.slowlog.reset();
    ctx.reply().ok();
}

/// `SLOWLOG HELP`
fn slowlog_help(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    const LINES: &[&str] = &[
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
        "HELP",
        "    Prints this help.",
    ];
    super::reply_help(ctx, LINES);
}

fn top_level<'a>(ctx: &ConnCtx<'a>) -> Vec<&'a CommandSpec> {
    ctx.shared.commands.top_level().collect()
}

/// `COMMAND`: every command's COMMAND INFO entry.
fn command_all(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let specs = top_level(ctx);
    let table = &ctx.shared.commands;
    let mut out = ctx.reply();
    out.array(specs.len());
    specs
        .into_iter()
        .for_each(|spec| table.encode_info(spec, &mut out));
}

/// `COMMAND LIST [FILTERBY MODULE module | ACLCAT category | PATTERN pattern]`: every
/// command's name, subcommands included (in table order; redis-server answers in its
/// hash table's). No command comes from a module.
fn command_list(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let keep: Box<dyn Fn(&CommandSpec) -> bool> = match args.len() {
        2 => Box::new(|_| true),
        5 if is_keyword(args.get(2), "FILTERBY") => {
            let (kind, value) = (args.get(3), args.get(4).to_vec());
            if is_keyword(kind, "MODULE") {
                Box::new(|_| false)
            } else if is_keyword(kind, "ACLCAT") {
                Box::new(move |spec| spec.in_acl_category(&value))
            } else if is_keyword(kind, "PATTERN") {
                Box::new(move |spec| glob_match(&value, spec.name.as_bytes(), true))
            } else {
                return ctx.reply().error(errors::SYNTAX);
            }
        }
        _ => return ctx.reply().error(errors::SYNTAX),
    };
    reply_command_names(ctx, keep);
}

/// The names of the commands (subcommands included) that `keep` keeps, in table order:
/// COMMAND LIST's reply, and ACL CAT's.
pub(crate) fn reply_command_names(ctx: &mut ConnCtx<'_>, keep: impl Fn(&CommandSpec) -> bool) {
    let names: Vec<&str> = ctx
        .shared
        .commands
        .all()
        .iter()
        .filter(|spec| keep(spec))
        .map(|spec| spec.name)
        .collect();
    let mut out = ctx.reply();
    out.array(names.len());
    for name in names {
        out.bulk(name.as_bytes());
    }
}

/// `CONFIG HELP`
fn config_help(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    super::reply_help(
        ctx,
        &[
            "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
            "HELP",
            "    Prints this help.",
        ],
    );
}

/// `TIME`: the Unix time in seconds and microseconds, as two bulk strings.
fn time(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut out = ctx.reply();
    out.array(2);
    out.bulk_int(now.as_secs() as i64);
    out.bulk_int(i64::from(now.subsec_micros()));
}

/// INFO's replication section: a master's replicas and offset, or a replica's link.
fn replication_section(shared: &crate::runtime::server::Shared) -> String {
    let now = crate::clock::now_ms();
    let own_id = shared.replication_id();
    let mut out = String::new();
    let (replid, offset) = match shared.follow.view() {
        Some(link) => {
            use crate::repl::link::State;
            let up = link.state == State::Connected;
            let last_io = match link.last_io_ms {
                0 => -1,
                at => (now.saturating_sub(at) / 1000) as i64,
            };
            out.push_str(&format!(
                "role:slave\r\nmaster_host:{}\r\nmaster_port:{}\r\nmaster_link_status:{}\r\n\
                 master_last_io_seconds_ago:{last_io}\r\nmaster_sync_in_progress:{}\r\n\
                 slave_read_repl_offset:{}\r\nslave_repl_offset:{}\r\n",
                link.host,
                link.port,
                if up { "up" } else { "down" },
                u8::from(link.sync.is_some()),
                link.read_offset.max(0),
                link.offset.max(0),
            ));
            if let Some((total, read)) = link.sync {
                let perc = if total > 0 {
                    read as f64 * 100.0 / total as f64
                } else {
                    0.0
                };
                out.push_str(&format!(
                    "master_sync_total_bytes:{total}\r\nmaster_sync_read_bytes:{read}\r\n\
                     master_sync_left_bytes:{}\r\nmaster_sync_perc:{perc:.2}\r\n\
                     master_sync_last_io_seconds_ago:{}\r\n",
                    (total - read).max(0),
                    last_io.max(0)
                ));
            }
            if !up {
                let down = match link.down_since_ms {
                    0 => -1,
                    at => (now.saturating_sub(at) / 1000) as i64,
                };
                out.push_str(&format!("master_link_down_since_seconds:{down}\r\n"));
            }
            let (priority, announced) = {
                let live = shared.live();
                let option = |name| config::inert::value(&live.inert, name).unwrap_or("");
                (
                    option("replica-priority").to_string(),
                    option("replica-announced") != "no",
                )
            };
            out.push_str(&format!(
                "slave_priority:{priority}\r\nslave_read_only:{}\r\nreplica_announced:{}\r\n",
                u8::from(shared.replica_read_only()),
                u8::from(announced)
            ));
            let replid = if link.replid.is_empty() {
                own_id
            } else {
                link.replid
            };
            (replid, link.offset.max(0))
        }
        None => {
            out.push_str("role:master\r\n");
            (own_id, shared.repl.offset.load(Ordering::SeqCst))
        }
    };
    out.push_str(&shared.repl.info_lines(now));
    let (first, histlen) = shared.repl.backlog();
    let active = u8::from(shared.repl.backlog_active());
    let (replid2, second) = shared
        .repl
        .replid2()
        .unwrap_or_else(|| ("0".repeat(40), -1));
    out.push_str(&format!(
        "master_failover_state:{}\r\nmaster_replid:{replid}\r\n\
         master_replid2:{replid2}\r\nmaster_repl_offset:{offset}\r\nsecond_repl_offset:{second}\r\n\
         repl_backlog_active:{active}\r\nrepl_backlog_size:{}\r\n\
         repl_backlog_first_byte_offset:{}\r\nrepl_backlog_histlen:{}\r\n",
        shared.failover.state_name(),
        shared.repl.backlog_size(),
        if active == 1 { first } else { 0 },
        if active == 1 { histlen } else { 0 },
    ));
    out
}

/// `ROLE`: a master, its offset, and its replicas (address, port, offset acknowledged).
fn role(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    if let Some(link) = ctx.shared.follow.view() {
        use crate::repl::link::State;
        let state: &[u8] = match link.state {
            State::None | State::Connect => b"connect",
            State::Connecting => b"connecting",
            State::Handshake => b"handshake",
            State::Transfer => b"sync",
            State::Connected => b"connected",
        };
        let mut out = ctx.reply();
        out.array(5);
        out.bulk(b"slave");
        out.bulk(link.host.as_bytes());
        out.integer(i64::from(link.port));
        out.bulk(state);
        out.integer(if link.state == State::Connected {
            link.offset
        } else {
            -1
        });
        return;
    }
    let replicas = ctx.shared.repl.role_entries();
    let offset = ctx.shared.repl.offset.load(Ordering::SeqCst);
    let mut out = ctx.reply();
    out.array(3);
    out.bulk(b"master");
    out.integer(offset);
    out.array(replicas.len());
    for (ip, port, ack) in replicas {
        out.array(3);
        out.bulk(ip.as_bytes());
        out.bulk(port.to_string().as_bytes());
        out.bulk(ack.to_string().as_bytes());
    }
}

/// `COMMAND COUNT`
fn command_count(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let n = ctx.shared.commands.top_level().count();
    ctx.reply().integer(n as i64);
}

/// Commands named in `args[2..]`, or all of them; `None` for unknown names.
fn named<'a>(ctx: &ConnCtx<'a>, args: &Args<'_>) -> Vec<Option<&'a CommandSpec>> {
    let table = &ctx.shared.commands;
    if args.len() == 2 {
        return table.top_level().map(Some).collect();
    }
    args.iter_from(2)
        .map(|name| table.lookup_full(name))
        .collect()
}

/// `COMMAND INFO [name ...]`
fn command_info(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let specs = named(ctx, args);
    let table = &ctx.shared.commands;
    let mut out = ctx.reply();
    out.array(specs.len());
    for spec in specs {
        match spec {
            Some(spec) => table.encode_info(spec, &mut out),
            None => out.null(),
        }
    }
}

/// `COMMAND DOCS [name ...]`
fn command_docs(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let specs: Vec<_> = named(ctx, args).into_iter().flatten().collect();
    let table = &ctx.shared.commands;
    let mut out = ctx.reply();
    out.map(specs.len());
    for spec in specs {
        out.bulk(spec.name.as_bytes());
        table.encode_docs(spec, &mut out);
    }
}

/// `COMMAND GETKEYS command [arg ...]`
fn command_getkeys(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    getkeys(ctx, args, false);
}

/// `COMMAND GETKEYSANDFLAGS command [arg ...]`
fn command_getkeysandflags(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    getkeys(ctx, args, true);
}

/// The keys of the command in `args[2..]`, found by its [`KeyFinder`], with their flags
/// when `with_flags`, as redis-server 7.0's `getKeysSubcommandImpl` replies: the command
/// (or its subcommand) is looked up in Goblin's table, then must have keys, then an
/// argument count its arity allows.
///
/// [`KeyFinder`]: crate::table::KeyFinder
fn getkeys(ctx: &mut ConnCtx<'_>, args: &Args<'_>, with_flags: bool) {
    let table = &ctx.shared.commands;
    let cmd = args.skip(2);
    let mut spec = table.lookup(cmd.get(0));
    if let Some(container) = spec.filter(|s| s.is_container() && cmd.len() > 1) {
        spec = table.lookup_sub(container, cmd.get(1));
    }
    let Some(spec) = spec else {
        return ctx.reply().error(errors::GETKEYS_INVALID_COMMAND);
    };
    if !spec.key_finder.has_keys() {
        return ctx.reply().error(errors::GETKEYS_NO_KEYS);
    }
    if !spec.arity_ok(cmd.len()) {
        return ctx.reply().error(errors::GETKEYS_ARITY);
    }
    // At most a few keys per argument: as many as the client sent, not as it declared.
    let mut keys = Vec::new();
    let found = spec.key_finder.find(&cmd, |i, flags| keys.push((i, flags)));
    let mut out = ctx.reply();
    if found.is_err() || keys.is_empty() {
        if spec.flags.contains(Flags::NO_MANDATORY_KEYS) {
            return out.array(0);
        }
        return out.error(errors::GETKEYS_INVALID_ARGUMENTS);
    }
    out.array(keys.len());
    for (i, flags) in keys {
        if with_flags {
            out.array(2);
            out.bulk(cmd.get(i));
            out.set(flags.count());
            flags.names().for_each(|name| out.simple(name.as_bytes()));
        } else {
            out.bulk(cmd.get(i));
        }
    }
}

/// `COMMAND HELP`
fn command_help(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    const LINES: &[&str] = &[
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "(no subcommand)",
        "    Return details about all Redis commands.",
        "COUNT",
        "    Return the total number of commands in this Redis server.",
        "INFO [<command-name> ...]",
        "    Return details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "DOCS [<command-name> ...]",
        "    Return documentation details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "GETKEYS <full-command>",
        "    Return the keys from a full Redis command.",
        "GETKEYSANDFLAGS <full-command>",
        "    Return the keys and the access flags from a full Redis command.",
        "HELP",
        "    Prints this help.",
    ];
    super::reply_help(ctx, LINES);
}

/// The parameters CONFIG GET knows, with their values.
fn config_params(ctx: &ConnCtx<'_>) -> Vec<(&'static str, String)> {
    let live = ctx.shared.live();
    let c = &*live;
    let mut params = vec![
        ("bind", c.bind_text()),
        ("port", ctx.shared.port().to_string()),
        ("save", c.persist.save_text()),
        ("appendonly", yes_no(c.persist.appendonly)),
        ("appendfsync", c.persist.appendfsync.name().into()),
        ("dir", absolute(&c.persist.dir)),
        ("dbfilename", c.persist.dbfilename.clone()),
        ("appenddirname", c.persist.appenddirname.clone()),
        ("appendfilename", c.persist.appendfilename.clone()),
        ("aof-load-truncated", yes_no(c.persist.aof_load_truncated)),
        (
            "stop-writes-on-bgsave-error",
            yes_no(c.persist.stop_writes_on_bgsave_error),
        ),
        (
            "auto-aof-rewrite-percentage",
            c.persist.auto_aof_rewrite_percentage.to_string(),
        ),
        (
            "auto-aof-rewrite-min-size",
            c.persist.auto_aof_rewrite_min_size.to_string(),
        ),
        ("databases", c.databases.to_string()),
        ("maxmemory", c.memory.maxmemory.to_string()),
        ("maxmemory-policy", c.memory.policy.name().into()),
        ("maxmemory-samples", c.memory.samples.to_string()),
        ("slowlog-log-slower-than", c.slowlog_slower_than.to_string()),
        ("slowlog-max-len", c.slowlog_max_len.to_string()),
        ("loglevel", c.loglevel.name().into()),
        (
            "logfile",
            c.logfile
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        ),
        ("lfu-log-factor", c.memory.lfu_log_factor.to_string()),
        ("lfu-decay-time", c.memory.lfu_decay_time.to_string()),
        ("maxclients", c.maxclients.to_string()),
        ("timeout", c.timeout.to_string()),
        ("tcp-keepalive", c.tcp_keepalive.to_string()),
        ("protected-mode", yes_no(c.protected_mode)),
        ("proto-max-bulk-len", c.limits.max_bulk_len.to_string()),
        ("client-output-buffer-limit", c.output_limits.text()),
        (
            "client-query-buffer-limit",
            c.query_buffer_limit.to_string(),
        ),
        ("enable-debug-command", c.enable_debug_command.name().into()),
        (
            "enable-module-command",
            c.enable_module_command.name().into(),
        ),
        (
            "enable-protected-configs",
            c.enable_protected_configs.name().into(),
        ),
        (
            "latency-monitor-threshold",
            c.latency_monitor_threshold.to_string(),
        ),
        (
            "acl-pubsub-default",
            config::pubsub_default_name(c.acl_pubsub_all).into(),
        ),
        ("acllog-max-len", c.acllog_max_len.to_string()),
        (
            "requirepass",
            String::from_utf8_lossy(c.requirepass.as_deref().unwrap_or_default()).into_owned(),
        ),
        (
            "aclfile",
            c.aclfile
                .as_ref()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default(),
        ),
        ("cluster-enabled", yes_no(c.cluster.enabled)),
        ("cluster-config-file", c.cluster.config_file.clone()),
        ("cluster-node-timeout", c.cluster.node_timeout.to_string()),
        ("cluster-port", c.cluster.port.to_string()),
        (
            "cluster-require-full-coverage",
            yes_no(c.cluster.require_full_coverage),
        ),
        (
            "cluster-allow-reads-when-down",
            yes_no(c.cluster.allow_reads_when_down),
        ),
        (
            "notify-keyspace-events",
            crate::shard::notify::flags_text(c.notify_keyspace_events),
        ),
        ("hz", c.hz.to_string()),
        ("io-threads", ctx.shared.threads.to_string()),
        ("hll-sparse-max-bytes", c.hll_sparse_max_bytes.to_string()),
        ("busy-reply-threshold", c.busy_reply_threshold.to_string()),
        ("lua-time-limit", c.busy_reply_threshold.to_string()),
        (
            "lua-allow-undeclared-keys",
            yes_no(c.lua_allow_undeclared_keys),
        ),
        (
            "tracking-table-max-keys",
            c.tracking_table_max_keys.to_string(),
        ),
        (config::LAZYFREE[0], yes_no(c.lazyfree[0])),
        (config::LAZYFREE[1], yes_no(c.lazyfree[1])),
        (config::LAZYFREE[2], yes_no(c.lazyfree[2])),
        (config::LAZYFREE[3], yes_no(c.lazyfree[3])),
        (config::LAZYFREE[4], yes_no(c.lazyfree[4])),
    ];
    // Redis's options kept but not acted on, and their other names.
    params.extend(
        config::inert::INERT
            .iter()
            .zip(&c.inert)
            .map(|(o, v)| (o.name, v.clone())),
    );
    params.extend(config::inert::ALIASES.iter().filter_map(|(alias, real)| {
        let i = config::inert::find(real)?;
        Some((*alias, c.inert.get(i)?.clone()))
    }));
    params
}

fn yes_no(on: bool) -> String {
    config::yes_no(on).into()
}

/// A directory as CONFIG GET shows `dir`: absolute, as redis-server (which chdirs there)
/// and as CONFIG REWRITE writes it.
fn absolute(dir: &std::path::Path) -> String {
    config::absolute_dir(dir).display().to_string()
}

/// `CONFIG GET parameter [parameter ...]`: exact names answer with the name as given,
/// glob patterns (matched without case) with the canonical names, each at most once.
fn config_get(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let params = config_params(ctx);
    let mut found: Vec<(Vec<u8>, String)> = Vec::new();
    for pattern in args.iter_from(2) {
        let is_glob = pattern.iter().any(|b| matches!(b, b'[' | b'*' | b'?'));
        for (name, value) in &params {
            let hit = if is_glob {
                !config::inert::HIDDEN.contains(name) && glob_match(pattern, name.as_bytes(), true)
            } else {
                pattern.eq_ignore_ascii_case(name.as_bytes())
            };
            let shown = if is_glob { name.as_bytes() } else { pattern };
            if hit
                && !found
                    .iter()
                    .any(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            {
                found.push((shown.to_vec(), value.clone()));
            }
        }
    }
    let mut out = ctx.reply();
    out.map(found.len());
    for (name, value) in found {
        out.bulk(&name);
        out.bulk(value.as_bytes());
    }
}

/// `CONFIG RESETSTAT`: every worker's command statistics, and the counters INFO's stats
/// section shows, start again from zero.
fn resetstat_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    fn part(ctx: &mut ShardCtx<'_>, _args: &[Vec<u8>]) -> HopOut {
        ctx.reset_stats();
        HopOut::Done
    }
    fn merge(cx: &PlanCx<'_>, args: &[Vec<u8>], _parts: Vec<HopOut>) -> Outcome {
        // Counted once more after the reset, as redis-server counts a command when it
        // has run: the statistics then show this CONFIG RESETSTAT.
        if let Some(id) =
            Args::with_owned(args, |a| cx.shared.commands.resolve(a).ok().map(|s| s.id))
        {
            cx.calls.borrow_mut().push(Tally::Call(id));
        }
        cx.shared.total_commands.store(0, Ordering::Relaxed);
        cx.shared.total_connections.store(0, Ordering::Relaxed);
        cx.shared.rejected_connections.store(0, Ordering::Relaxed);
        for t in &cx.shared.traffic {
            t.reset.store(true, Ordering::Relaxed);
            for n in [
                &t.input,
                &t.output,
                &t.reads,
                &t.writes,
                &t.expire_us,
                &t.expire_capped,
            ] {
                n.store(0, Ordering::Relaxed);
            }
        }
        cx.shared.memory.evicted_keys.store(0, Ordering::Relaxed);
        cx.shared.memory.reset_exceeded();
        let syncs = &cx.shared.repl.stats;
        for n in [&syncs.full, &syncs.partial_ok, &syncs.partial_err] {
            n.store(0, Ordering::Relaxed);
        }
        cx.shared
            .client_eviction
            .evicted
            .store(0, Ordering::Relaxed);
        goblin_store::lazyfree::reset_stats();
        cx.reply(|e| e.ok())
    }
    Ok(Box::new(FanOut::new(start.args, part, merge)))
}

/// `CONFIG SET parameter value [parameter value ...]`, as redis-server 7.0 checks it:
/// first the names, in order — an unknown one, one set only at start-up, a protected one
/// (`dir`, `dbfilename`) unless `enable-protected-configs` allows the client, one
/// refused while the dataset loads, a repeated one: the first such is the error, named
/// as typed —, then the values, in order (the first bad one is the error); nothing
/// changes unless all are good, and then all change at once.
fn config_set(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    if !args.len().is_multiple_of(2) {
        return ctx.reply().error(errors::SYNTAX);
    }
    let allow_protected = ctx
        .shared
        .config
        .enable_protected_configs
        .permits(ctx.client.origin.is_local());
    let loading = ctx.shared.persist.loading();
    // (Name as typed, lower case (what a bad value's error names), the option it sets.)
    let mut pairs: Vec<(String, String, String)> = Vec::new();
    for i in (2..args.len()).step_by(2) {
        let typed = String::from_utf8_lossy(args.get(i)).into_owned();
        let lower = typed.to_ascii_lowercase();
        let name = config::ALIASES
            .iter()
            .chain(config::inert::ALIASES)
            .find(|(alias, _)| *alias == lower)
            .map_or_else(|| lower.clone(), |(_, real)| (*real).to_string());
        let known = |list: &[&str]| list.contains(&name.as_str());
        if !known(config::SETTABLE)
            && !known(config::FIXED)
            && !known(config::SHOWN)
            && !known(config::PROTECTED)
            && config::inert::find(&name).is_none()
        {
            return errors::config_unknown(&typed).send(&mut ctx.reply());
        }
        let refusal =
            if known(config::FIXED) || known(config::SHOWN) || config::inert::immutable(&name) {
                Some("can't set immutable config")
            } else if known(config::PROTECTED) && !allow_protected {
                Some("can't set protected config")
            } else if loading && known(config::DENY_LOADING) {
                return ctx.reply().error(errors::LOADING);
            } else if pairs.iter().any(|(_, _, n)| *n == name) {
                Some("duplicate parameter")
            } else {
                None
            };
        if let Some(reason) = refusal {
            return errors::config_set_failed(&typed, reason).send(&mut ctx.reply());
        }
        pairs.push((typed, lower, name));
    }
    let mut next = ctx.shared.live().clone();
    for (i, (_, shown, name)) in pairs.iter().enumerate() {
        let value = String::from_utf8_lossy(args.get(3 + 2 * i));
        if let Err(reason) = config::set_option(&mut next, name, &value) {
            return errors::config_set_failed(shown, &reason).send(&mut ctx.reply());
        }
    }
    // More clients need room in the descriptor limit (redis-server's
    // `updateMaxclients`).
    let before = ctx.shared.live().maxclients;
    if next.maxclients > before {
        let allowed =
            crate::runtime::limits::adjust_open_files(next.maxclients, ctx.shared.threads)
                .unwrap_or(before);
        if allowed < next.maxclients {
            let reason = format!(
                "The operating system is not able to handle the specified number of clients, \
                 try with {allowed}"
            );
            return errors::config_set_failed("maxclients", &reason).send(&mut ctx.reply());
        }
    }
    // A new `dir`: the process moves there (what CONFIG GET shows is where it is), as
    // redis-server's `chdir`; back again if what follows fails.
    let old_dir = ctx.shared.live().persist.dir.clone();
    let moved = next.persist.dir != old_dir;
    if moved {
        if let Err(e) = std::env::set_current_dir(&next.persist.dir) {
            let reason = crate::util::strerror(&e);
            return errors::config_set_failed("dir", &reason).send(&mut ctx.reply());
        }
        next.persist.dir = std::env::current_dir().unwrap_or_else(|_| next.persist.dir.clone());
    }
    // A new `oom-score-adj` or values: the process's score first (lowering it may be
    // refused), as redis-server's `updateOOMScoreAdj`; nothing changes when it fails.
    let oom = ["oom-score-adj", "oom-score-adj-values"];
    let oom_changed = oom.iter().any(|name| {
        config::inert::value(&next.inert, name)
            != config::inert::value(&ctx.shared.live().inert, name)
    });
    // A failure below puts back what was applied before it (redis-server's rollback of a
    // CONFIG SET whose apply failed): the directory, the score.
    let shared = ctx.shared;
    let undo = |oom: bool| {
        if moved {
            let _ = std::env::set_current_dir(&old_dir);
        }
        if oom {
            let _ = config::inert::apply_oom_score_adj(&shared.live().inert);
        }
    };
    if oom_changed && config::inert::apply_oom_score_adj(&next.inert).is_err() {
        undo(true);
        let name = pairs
            .iter()
            .map(|(_, _, n)| n.as_str())
            .find(|n| oom.contains(n))
            .unwrap_or(oom[0]);
        return errors::config_set_failed(
            name,
            "Failed to set current oom_score_adj. Check server logs.",
        )
        .send(&mut ctx.reply());
    }
    // A new address or port: the new listener first (it may fail, and then nothing
    // changes), as redis-server's `changeListenPort`.
    let (bind, port) = {
        let live = ctx.shared.live();
        (live.bind.clone(), live.port)
    };
    if next.bind != bind || next.port != port {
        // An unchanged port stays the one bound (`port 0` picked it at start).
        let mut target = next.clone();
        if next.port == port {
            target.port = ctx.shared.port();
        }
        if let Err(e) = ctx.shared.rebind(&target) {
            crate::log!(
                Warning,
                "CONFIG SET: cannot listen on {} port {}: {e}",
                next.bind_text(),
                next.port
            );
            undo(oom_changed);
            let (name, reason) = if pairs.iter().any(|(_, _, n)| n == "port") && next.port != port {
                ("port", "Unable to listen on this port. Check server logs.")
            } else {
                ("bind", "Failed to bind to specified addresses.")
            };
            return errors::config_set_failed(name, reason).send(&mut ctx.reply());
        }
    }
    ctx.shared.set_live(next);
    ctx.reply().ok();
}

/// `CONFIG REWRITE`: the configuration file the server started from rewritten with the
/// values in force now ([`config::rewrite_file`]), as redis-server 7.0 rewrites its.
fn config_rewrite(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    if ctx.shared.config.file.is_none() {
        return ctx.reply().error(errors::CONFIG_REWRITE_NO_FILE);
    }
    match rewrite_config(ctx.shared, false) {
        Ok(()) => {
            crate::log!(Notice, "CONFIG REWRITE executed with success.");
            ctx.reply().ok();
        }
        Err(reason) => {
            crate::log!(Warning, "CONFIG REWRITE failed: {reason}");
            errors::config_rewrite_failed(&reason).send(&mut ctx.reply());
        }
    }
}

/// Rewrites the configuration file the server started from with the values in force
/// now (`force_all`: every option written, at its default too — DEBUG
/// CONFIG-REWRITE-FORCE-ALL); the reason it could not, in `strerror`'s words.
pub(crate) fn rewrite_config(
    shared: &crate::runtime::server::Shared,
    force_all: bool,
) -> Result<(), String> {
    let Some(path) = shared.config.file.clone() else {
        return Err("No such file or directory".into());
    };
    let mut live = shared.live().clone();
    // The users as they are now, unless an ACL file holds them.
    live.users = if live.aclfile.is_some() {
        Vec::new()
    } else {
        shared
            .acl
            .lines(&shared.commands)
            .into_iter()
            .map(|line| line.split(' ').skip(1).map(String::from).collect())
            .collect()
    };
    config::rewrite_file(&path, &live, force_all)
}

/// What one shard tells INFO: per database its keys and keys with an expiry, its
/// keyspace bytes, and its worker's command statistics.
#[derive(Debug)]
struct InfoPart {
    shard: usize,
    /// Per database holding keys: its number, its keys, those with a deadline, and
    /// the sum of their deadlines.
    dbs: Vec<(usize, usize, usize, u128)>,
    bytes: usize,
    expired: u64,
    /// Its keyspace hits and misses.
    reads: (u64, u64),
    stats: Vec<(usize, CmdStat)>,
    errors: crate::table::handler::ErrorCounts,
    /// Its latency histograms, when INFO shows latencystats.
    latencies: Option<HopOut>,
}

/// Whether `INFO` with `args` shows section `name`. Sections add up, as in redis-server
/// 7.0 (`INFO default commandstats` is both); `all` and `everything` show every one;
/// none named is `default`, which leaves out commandstats, latencystats and Goblin's
/// threads.
fn info_shows(args: &[Vec<u8>], name: &str) -> bool {
    let named = |section: &str| {
        args.iter()
            .skip(1)
            .any(|a| a.eq_ignore_ascii_case(section.as_bytes()))
    };
    let default = args.len() <= 1 || named("default");
    named("all")
        || named("everything")
        || named(name)
        || (default && !matches!(name, "commandstats" | "latencystats" | "threads"))
}

/// INFO's part on one shard.
fn info_part(ctx: &mut ShardCtx<'_>, args: &[Vec<u8>]) -> HopOut {
    let latencies = info_shows(args, "latencystats").then(|| super::diagnostics::latency_part(ctx));
    let stats = ctx
        .stats
        .iter()
        .enumerate()
        .filter(|(_, s)| s.calls != 0 || s.failed != 0 || s.rejected != 0)
        .map(|(id, s)| (id, *s))
        .collect();
    let (mut dbs, mut bytes, mut expired, mut reads) = (Vec::new(), 0, 0, (0, 0));
    ctx.for_each_db(|db, keyspace| {
        if !keyspace.is_empty() {
            dbs.push((
                db,
                keyspace.len(),
                keyspace.volatile_len(),
                keyspace.deadlines(),
            ));
        }
        bytes += keyspace.used_bytes();
        expired += keyspace.expired_keys();
        let (hits, misses) = keyspace.read_stats();
        reads = (reads.0 + hits, reads.1 + misses);
    });
    HopOut::Other(Box::new(InfoPart {
        shard: ctx.shard,
        dbs,
        bytes,
        expired,
        reads,
        stats,
        errors: ctx.errors.clone(),
        latencies,
    }))
}

/// `INFO [section ...]`: every shard's part, then the sections.
fn info_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(Box::new(FanOut::new(start.args, info_part, info_merge)))
}

/// DBSIZE's part: this shard's key count.
fn dbsize_part(ctx: &mut ShardCtx<'_>, _args: &[Vec<u8>]) -> HopOut {
    HopOut::Int(ctx.db.len() as i64)
}

fn dbsize_merge(cx: &PlanCx<'_>, _args: &[Vec<u8>], parts: Vec<HopOut>) -> Outcome {
    let n = sum(&parts);
    cx.reply(|e| e.integer(n))
}

/// `DBSIZE`: the shards' key counts added up.
fn dbsize_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    Ok(Box::new(FanOut::new(start.args, dbsize_part, dbsize_merge)))
}

/// FLUSHALL's part: clear this shard's databases; FLUSHDB's: the client's. The keys
/// removed count for the `save` rules, as redis-server adds `emptyData`'s count to its
/// `dirty`.
fn flush_part(ctx: &mut ShardCtx<'_>, args: &[Vec<u8>]) -> HopOut {
    if args
        .first()
        .is_some_and(|a| a.eq_ignore_ascii_case(b"flushall"))
    {
        // (A background save FLUSHALL abandoned drops its images: `FlushAll`.)
        let (mut dropped, mut removed) = (false, 0);
        ctx.for_each_db(|_, keyspace| {
            removed += keyspace.len() as u64;
            dropped |= keyspace.clear();
        });
        if dropped {
            ctx.abandon_save_part();
        }
        ctx.count_changes(removed);
    } else {
        let removed = ctx.db.len() as u64;
        ctx.db.clear();
        ctx.count_changes(removed);
    }
    ctx.flushed_every_key();
    ctx.replicated_once();
    if ctx.logging() {
        let argv: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        ctx.log(&argv);
    }
    HopOut::Done
}

fn flush_merge(cx: &PlanCx<'_>, args: &[Vec<u8>], parts: Vec<HopOut>) -> Outcome {
    // What the flush freed goes back to the operating system.
    crate::memory::purge_soon();
    propagate(cx, args);
    ok_merge(cx, args, parts)
}

fn ok_merge(cx: &PlanCx<'_>, _args: &[Vec<u8>], _parts: Vec<HopOut>) -> Outcome {
    cx.reply(|e| e.ok())
}

fn swapdb_merge(cx: &PlanCx<'_>, args: &[Vec<u8>], parts: Vec<HopOut>) -> Outcome {
    propagate(cx, args);
    ok_merge(cx, args, parts)
}

/// A keyspace-wide command sent to replicas once, its parts done on every shard: in
/// its client's database, as redis-server propagates every command (FLUSHALL and
/// SWAPDB too).
fn propagate(cx: &PlanCx<'_>, args: &[Vec<u8>]) {
    let argv: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    cx.propagate(&argv);
}

/// `FLUSHALL [ASYNC|SYNC]`, `FLUSHDB [ASYNC|SYNC]`: the option checked (one at most;
/// both clear at once here), then every shard cleared; FLUSHALL then saves the (empty)
/// snapshot when `save` rules are set, as redis-server's `flushAllDataAndResetRDB`, so
/// that a restart does not bring back what was flushed.
fn flush_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let args = start.args;
    let mut c = args.cursor(1);
    let _ = c.next_is("async") || c.next_is("sync");
    c.finish()?;
    let flush = Box::new(FanOut::new(args, flush_part, flush_merge));
    if !is_keyword(args.get(0), "flushall") {
        return Ok(flush);
    }
    Ok(Box::new(FlushAll {
        flush,
        started: false,
        save_after: !start.shared.live().persist.save.is_empty(),
        save: None,
    }))
}

/// FLUSHALL, as redis-server's `flushAllDataAndResetRDB`: a background snapshot
/// running is abandoned first (as its child is killed: the shards drop their images
/// rather than write what they clear), then the flush; with `save` rules, a
/// foreground save after it (unless one is running still), answered as the flush is.
#[derive(Debug)]
struct FlushAll {
    flush: Box<dyn Plan>,
    started: bool,
    save_after: bool,
    /// The save and the flush's answer, once the flush is done.
    save: Option<(crate::persist::snapshot::SavePlan, Outcome)>,
}

impl Plan for FlushAll {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        use crate::persist::snapshot::{SaveKind, SavePlan};
        if !std::mem::replace(&mut self.started, true) {
            // (Here, when it runs: not when it is queued in MULTI.)
            let job = cx.shared.persist.job.lock().ok().and_then(|j| j.clone());
            if let Some(job) = job {
                job.abort();
            }
        }
        if !self.save_after {
            return self.flush.next(cx, results);
        }
        let step = match &mut self.save {
            Some((save, _)) => save.next(cx, results),
            None => match self.flush.next(cx, results) {
                Step::Done(answer) => {
                    // (A save already running refuses this one: the flush's answer
                    // stands.)
                    let mut save = SavePlan::new(SaveKind::Foreground);
                    let step = save.next(cx, Vec::new());
                    self.save = Some((save, answer));
                    step
                }
                step => return step,
            },
        };
        match (step, self.save.take()) {
            (Step::Done(_), Some((_, answer))) => Step::Done(answer),
            (step, save) => {
                self.save = save;
                step
            }
        }
    }
}

/// `SWAPDB index1 index2`: the two databases exchanged on every shard at one instant
/// (every shard locked whole); clients keep their database numbers.
fn swapdb_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    if start.shared.cluster.is_some() {
        return Err(b"ERR SWAPDB is not allowed in cluster mode".to_vec());
    }
    let args = start.args;
    let index = |i: usize, what: &'static [u8]| {
        goblin_protocol::parse_i64(args.get(i))
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| what.to_vec())
    };
    let a = index(1, errors::INVALID_FIRST_DB)?;
    let b = index(2, errors::INVALID_SECOND_DB)?;
    let databases = start.databases;
    let in_range = |n: i32| usize::try_from(n).ok().filter(|&n| n < databases);
    if in_range(a).is_none() || in_range(b).is_none() {
        return Err(errors::DB_INDEX_OUT_OF_RANGE.to_vec());
    }
    Ok(Box::new(FanOut::new(args, swapdb_part, swapdb_merge)))
}

/// SWAPDB's part (its indexes were checked by its plan).
fn swapdb_part(ctx: &mut ShardCtx<'_>, args: &[Vec<u8>]) -> HopOut {
    let index = |i: usize| {
        args.get(i)
            .and_then(|a| goblin_protocol::parse_i64(a))
            .and_then(|n| usize::try_from(n).ok())
    };
    if let (Some(a), Some(b)) = (index(1), index(2)) {
        ctx.swap_dbs(a, b);
        ctx.replicated_once();
        if ctx.logging() {
            let argv: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            ctx.log(&argv);
        }
    }
    HopOut::Done
}

/// CPU seconds from a /proc `stat` line: (user, system, children's user, children's
/// system), in the kernel's clock ticks (USER_HZ, 100 a second on Linux).
fn cpu_times(stat: &str) -> [f64; 4] {
    // The fields after the command name (which may hold spaces) in parentheses.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let tick = |i: usize| -> f64 {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0.0, |t| t as f64 / 100.0)
    };
    // utime, stime, cutime, cstime are the 14th to 17th fields: 12 to 15 after the name.
    [tick(11), tick(12), tick(13), tick(14)]
}

/// INFO's `CPU` section, as redis-server 7.0 names its fields (the main thread being the
/// process's first, which only starts the workers).
fn cpu_section() -> String {
    let me = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let [user, sys, cuser, csys] = cpu_times(&me);
    let main = std::fs::read_to_string(format!("/proc/self/task/{}/stat", std::process::id()))
        .unwrap_or_default();
    let [muser, msys, _, _] = cpu_times(&main);
    format!(
        "used_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:{csys:.6}\r\n\
         used_cpu_user_children:{cuser:.6}\r\nused_cpu_sys_main_thread:{msys:.6}\r\n\
         used_cpu_user_main_thread:{muser:.6}\r\n"
    )
}

use crate::util::rss_bytes;

/// The machine's memory (INFO's `total_system_memory`), from /proc/meminfo.
pub(crate) fn total_system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "K", "M", "G"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n}B")
    } else {
        format!("{v:.2}{}", UNITS[unit])
    }
}

/// INFO latencystats: per command with runs, the configured percentiles of its latency
/// in µs (nothing with `latency-tracking no`).
fn latencystats(cx: &PlanCx<'_>, parts: Vec<HopOut>) -> String {
    let mut text = String::new();
    if !crate::runtime::histogram::tracking() {
        return text;
    }
    let percentiles = crate::runtime::histogram::percentiles();
    let mut by_name: Vec<(&str, crate::runtime::histogram::Histogram)> =
        super::diagnostics::merge_latencies(parts)
            .into_iter()
            .filter_map(|(id, h)| cx.shared.commands.get(id).map(|s| (s.name, h)))
            .collect();
    by_name.sort_by_key(|(name, _)| *name);
    for (name, h) in by_name {
        let values: Vec<String> = percentiles
            .iter()
            .map(|&p| {
                let text = crate::runtime::histogram::percentile_text(p);
                format!("p{text}={:.3}", h.value_at_percentile(p) as f64 / 1000.0)
            })
            .collect();
        let _ = write!(
            text,
            "latency_percentiles_usec_{name}:{}\r\n",
            values.join(",")
        );
    }
    text
}

/// INFO's sections, from every shard's part.
fn info_merge(cx: &PlanCx<'_>, args: &[Vec<u8>], parts: Vec<HopOut>) -> Outcome {
    let mut keyspace_bytes = 0usize;
    let mut expired_keys = 0u64;
    let (mut hits, mut misses) = (0u64, 0u64);
    let mut dbs: BTreeMap<usize, (usize, usize, u128)> = BTreeMap::new();
    let mut errors = crate::table::handler::ErrorCounts::default();
    // Per thread: keys, commands dispatched by its connections.
    let mut threads: BTreeMap<usize, (usize, u64)> = BTreeMap::new();
    let mut stats: BTreeMap<usize, CmdStat> = BTreeMap::new();
    let mut latency_parts = Vec::new();
    for part in parts {
        let HopOut::Other(any) = part else { continue };
        let Ok(mut part) = any.downcast::<InfoPart>() else {
            continue;
        };
        latency_parts.extend(part.latencies.take());
        let thread = threads.entry(part.shard).or_default();
        for (db, keys, expires, deadlines) in part.dbs {
            let counts = dbs.entry(db).or_default();
            counts.0 += keys;
            counts.1 += expires;
            counts.2 += deadlines;
            thread.0 += keys;
        }
        // (Wrapping: a shard's count may be below zero, `Shard::take_back_call`.)
        thread.1 = part
            .stats
            .iter()
            .fold(thread.1, |n, (_, s)| n.wrapping_add(s.calls));
        errors.merge(&part.errors);
        keyspace_bytes += part.bytes;
        expired_keys += part.expired;
        hits += part.reads.0;
        misses += part.reads.1;
        for (id, s) in part.stats {
            let stat = stats.entry(id).or_default();
            stat.calls = stat.calls.wrapping_add(s.calls);
            stat.nanos += s.nanos;
            stat.failed += s.failed;
            stat.rejected += s.rejected;
        }
    }
    // (A sum below zero, a call counted on one shard and taken back on another across
    // a CONFIG RESETSTAT, is none.)
    for stat in stats.values_mut() {
        if stat.calls > i64::MAX as u64 {
            stat.calls = 0;
        }
    }
    // This INFO was counted as it started; redis-server counts a command once it has
    // run, so its own call is not in what it answers.
    if let Some(info) = cx.shared.commands.lookup(b"info")
        && let Some(stat) = stats.get_mut(&info.id)
    {
        stat.calls = stat.calls.saturating_sub(1);
        if stat.calls == 0 && stat.failed == 0 && stat.rejected == 0 {
            stats.remove(&info.id);
        }
    }
    let show = |name: &str| info_shows(args, name);
    let shared = cx.shared;
    let uptime = shared.started.elapsed().as_secs();
    let rss = rss_bytes();
    // The allocator's count of bytes in use, as redis-server reports its allocator's;
    // the process's resident size when the counting allocator is not installed.
    let used = crate::alloc::allocated().map_or(rss, |n| n as u64);
    let traffic = |f: fn(&crate::runtime::server::Traffic) -> &std::sync::atomic::AtomicU64| {
        shared
            .traffic
            .iter()
            .map(move |t| f(t).load(Ordering::Relaxed))
    };
    let (ops, input_kbps, output_kbps) = shared.instantaneous();
    let mut text = String::new();
    let memory = shared.memory.get();
    let maxmemory = memory.maxmemory;
    let mut section = |name: &str, title: &str, body: String| {
        if show(name) {
            if !text.is_empty() {
                text.push_str("\r\n");
            }
            let _ = write!(text, "# {title}\r\n{body}");
        }
    };
    section(
        "server",
        "Server",
        format!(
            "redis_version:{REDIS_VERSION}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\n\
             redis_build_id:{}\r\ngoblin_version:{}\r\nredis_mode:standalone\r\n\
             os:{} {}\r\narch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\n\
             multiplexing_api:epoll\r\natomicvar_api:c11-builtin\r\ngcc_version:0.0.0\r\n\
             process_id:{}\r\nprocess_supervised:{}\r\nrun_id:{}\r\n\
             tcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{uptime}\r\n\
             uptime_in_days:{}\r\nhz:10\r\nconfigured_hz:10\r\nlru_clock:{}\r\n\
             executable:{}\r\nconfig_file:{}\r\nio_threads_active:0\r\nthreads:{}\r\n",
            shared.run_id.get(..16).unwrap_or_default(),
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::env::consts::ARCH,
            std::process::id(),
            crate::runtime::supervise::supervised(),
            shared.run_id,
            shared.port(),
            cx.now * 1000,
            uptime / 86400,
            goblin_store::lru_clock(cx.now),
            std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            shared
                .config
                .file
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            shared.threads,
        ),
    );
    section(
        "clients",
        "Clients",
        format!(
            "connected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\n\
             client_recent_max_input_buffer:{}\r\nclient_recent_max_output_buffer:{}\r\n\
             blocked_clients:{}\r\ntracking_clients:{}\r\n\
             clients_in_timeout_table:{}\r\ngoblin_clients_per_thread:{}\r\n",
            shared.connected_clients.load(Ordering::Relaxed),
            shared.live().maxclients,
            traffic(|t| &t.max_input).max().unwrap_or(0),
            traffic(|t| &t.max_output).max().unwrap_or(0),
            shared.blocked_clients.load(Ordering::Relaxed),
            shared.tracking.clients(),
            shared.blocked_with_timeout.load(Ordering::Relaxed),
            shared
                .clients_per_worker
                .iter()
                .map(|n| n.load(Ordering::Relaxed).to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
    );
    let (scripts, scripts_bytes) = shared.scripts.stats();
    let libraries = shared.functions.read(|r| r.libraries().count());
    let lua = crate::scripting::engine::lua_bytes(shared.scripts.generation()) as u64;
    let peak = shared.memory.peak(used as usize) as u64;
    let startup = shared.memory.startup.load(Ordering::Relaxed);
    let dataset = keyspace_bytes as u64;
    let overhead = used.saturating_sub(dataset);
    let clients_mem = shared.clients_memory();
    let percent = |a: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            a as f64 * 100.0 / b as f64
        }
    };
    // (The allocator's figures are Goblin's count: what is resident over it is the
    // fragmentation Redis splits into three.)
    let fragmentation = if used == 0 {
        0.0
    } else {
        rss as f64 / used as f64
    };
    let fragmentation_bytes = rss as i64 - used as i64;
    // The replicas' buffers, left out of `maxmemory` (`memory::counted`), and the
    // backlog.
    let not_counted = crate::memory::not_counted();
    let replicas = crate::memory::replicas_buffers();
    let backlog = shared.repl.backlog_bytes();
    let total_repl = backlog + replicas;
    let system = total_system_memory();
    let (functions, function_bytes) = shared
        .functions
        .read(|r| (r.function_count(), r.bodies_bytes()));
    section(
        "memory",
        "Memory",
        format!(
            "used_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\n\
             used_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\n\
             used_memory_peak_human:{}\r\nused_memory_peak_perc:{:.2}%\r\n\
             used_memory_overhead:{overhead}\r\nused_memory_startup:{startup}\r\n\
             used_memory_dataset:{dataset}\r\nused_memory_dataset_perc:{:.2}%\r\n\
             allocator_allocated:{used}\r\nallocator_active:{used}\r\n\
             allocator_resident:{rss}\r\ntotal_system_memory:{system}\r\n\
             total_system_memory_human:{}\r\nused_memory_lua:{lua}\r\n\
             used_memory_vm_eval:{lua}\r\nused_memory_lua_human:{}\r\n\
             used_memory_scripts_eval:{scripts_bytes}\r\nnumber_of_cached_scripts:{scripts}\r\n\
             number_of_functions:{functions}\r\nnumber_of_libraries:{libraries}\r\n\
             used_memory_vm_functions:0\r\nused_memory_vm_total:{lua}\r\n\
             used_memory_vm_total_human:{}\r\nused_memory_functions:{function_bytes}\r\n\
             used_memory_scripts:{}\r\nused_memory_scripts_human:{}\r\n\
             maxmemory:{maxmemory}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{}\r\n\
             allocator_frag_ratio:1.00\r\nallocator_frag_bytes:0\r\n\
             allocator_rss_ratio:{fragmentation:.2}\r\nallocator_rss_bytes:{fragmentation_bytes}\r\n\
             rss_overhead_ratio:1.00\r\nrss_overhead_bytes:0\r\n\
             mem_fragmentation_ratio:{fragmentation:.2}\r\n\
             mem_fragmentation_bytes:{fragmentation_bytes}\r\n\
             mem_not_counted_for_evict:{not_counted}\r\nmem_replication_backlog:{backlog}\r\n\
             mem_total_replication_buffers:{total_repl}\r\nmem_clients_slaves:{replicas}\r\n\
             mem_clients_normal:{clients_mem}\r\nmem_cluster_links:0\r\nmem_aof_buffer:0\r\n\
             mem_allocator:{}\r\nactive_defrag_running:0\r\n\
             lazyfree_pending_objects:{}\r\nlazyfreed_objects:{}\r\n\
             goblin_keyspace_bytes:{keyspace_bytes}\r\n",
            human_bytes(used),
            human_bytes(rss),
            human_bytes(peak),
            percent(used, peak),
            percent(dataset, used.saturating_sub(startup)),
            human_bytes(system),
            human_bytes(lua),
            human_bytes(lua),
            scripts_bytes + function_bytes,
            human_bytes((scripts_bytes + function_bytes) as u64),
            human_bytes(maxmemory),
            memory.policy.name(),
            crate::alloc::NAME,
            goblin_store::lazyfree::pending(),
            goblin_store::lazyfree::freed(),
        ),
    );
    section(
        "persistence",
        "Persistence",
        super::persistence::info(shared),
    );
    let (exceeded_total, exceeded_now) = shared.memory.exceeded(crate::clock::now_ms());
    section(
        "stats",
        "Stats",
        format!(
            "total_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
             instantaneous_ops_per_sec:{ops}\r\ntotal_net_input_bytes:{}\r\n\
             total_net_output_bytes:{}\r\ntotal_net_repl_input_bytes:0\r\n\
             total_net_repl_output_bytes:0\r\ninstantaneous_input_kbps:{input_kbps:.2}\r\n\
             instantaneous_output_kbps:{output_kbps:.2}\r\n\
             instantaneous_input_repl_kbps:0.00\r\ninstantaneous_output_repl_kbps:0.00\r\n\
             rejected_connections:{}\r\nsync_full:{}\r\nsync_partial_ok:{}\r\n\
             sync_partial_err:{}\r\nexpired_keys:{expired_keys}\r\n\
             expired_stale_perc:0.00\r\nexpired_time_cap_reached_count:{}\r\n\
             expire_cycle_cpu_milliseconds:{}\r\n\
             evicted_keys:{}\r\nevicted_clients:{}\r\n\
             total_eviction_exceeded_time:{exceeded_total}\r\n\
             current_eviction_exceeded_time:{exceeded_now}\r\n\
             keyspace_hits:{hits}\r\nkeyspace_misses:{misses}\r\n\
             pubsub_channels:{}\r\npubsub_patterns:{}\r\npubsubshard_channels:{}\r\n\
             latest_fork_usec:0\r\ntotal_forks:{}\r\n\
             migrate_cached_sockets:{}\r\nslave_expires_tracked_keys:0\r\n\
             active_defrag_hits:0\r\nactive_defrag_misses:0\r\nactive_defrag_key_hits:0\r\n\
             active_defrag_key_misses:0\r\ntotal_active_defrag_time:0\r\n\
             current_active_defrag_time:0\r\n\
             tracking_total_keys:{}\r\ntracking_total_items:{}\r\n\
             tracking_total_prefixes:{}\r\n\
             unexpected_error_replies:0\r\ntotal_error_replies:{}\r\n\
             dump_payload_sanitizations:0\r\n\
             total_reads_processed:{}\r\ntotal_writes_processed:{}\r\n\
             io_threaded_reads_processed:0\r\nio_threaded_writes_processed:0\r\n\
             reply_buffer_shrinks:0\r\nreply_buffer_expands:0\r\n",
            shared.total_connections.load(Ordering::Relaxed),
            shared.total_commands.load(Ordering::Relaxed),
            shared.net_input_bytes(),
            shared.net_output_bytes(),
            shared.rejected_connections.load(Ordering::Relaxed),
            shared.repl.stats.full.load(Ordering::Relaxed),
            shared.repl.stats.partial_ok.load(Ordering::Relaxed),
            shared.repl.stats.partial_err.load(Ordering::Relaxed),
            shared.traffic_total(|t| &t.expire_capped),
            shared.traffic_total(|t| &t.expire_us) / 1000,
            shared.memory.evicted_keys.load(Ordering::Relaxed),
            shared.client_eviction.evicted.load(Ordering::Relaxed),
            shared.pubsub.len(Space::Channels),
            shared.pubsub.len(Space::Patterns),
            shared.pubsub.len(Space::ShardChannels),
            shared.persist.jobs_started.load(Ordering::Relaxed),
            super::migrate::cached_sockets(),
            shared.tracking.keys.load(Ordering::Relaxed),
            shared.tracking.items.load(Ordering::Relaxed),
            shared.tracking.prefixes(),
            errors.total,
            shared.traffic_total(|t| &t.reads),
            shared.traffic_total(|t| &t.writes),
        ),
    );
    section("replication", "Replication", replication_section(shared));
    section("cpu", "CPU", cpu_section());
    // (No module is ever loaded: the section is its title alone, as redis-server's.)
    section("modules", "Modules", String::new());
    let mut commandstats = String::new();
    for (id, s) in &stats {
        let Some(spec) = shared.commands.get(*id) else {
            continue;
        };
        let per_call = if s.calls > 0 {
            (s.nanos / 1000) as f64 / s.calls as f64
        } else {
            0.0
        };
        let _ = write!(
            commandstats,
            "cmdstat_{}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
            spec.name,
            s.calls,
            s.nanos / 1000,
            s.rejected,
            s.failed
        );
    }
    section("commandstats", "Commandstats", commandstats);
    section(
        "errorstats",
        "Errorstats",
        errors
            .by_code
            .iter()
            .map(|(code, n)| format!("errorstat_{}:count={n}\r\n", String::from_utf8_lossy(code)))
            .collect(),
    );
    section(
        "latencystats",
        "Latencystats",
        latencystats(cx, latency_parts),
    );
    // (After the statistics, as redis-server orders its sections.)
    let enabled = u8::from(shared.cluster.is_some());
    section(
        "cluster",
        "Cluster",
        format!("cluster_enabled:{enabled}\r\n"),
    );
    section(
        "threads",
        "Threads",
        threads
            .iter()
            .map(|(t, (keys, calls))| {
                let queued = shared.peers.get(*t).map_or(0, |p| p.inbox.len());
                let hops = shared
                    .traffic
                    .get(*t)
                    .map_or(0, |h| h.hops.load(Ordering::Relaxed));
                format!(
                    "thread_{t}:keys={keys},commands={calls},queue_depth={queued},\
                     cross_shard_hops={hops}\r\n"
                )
            })
            .collect(),
    );
    // The volatile keys' average time to live, in ms: exact, where redis-server's is an
    // estimate from its expiry cycle's samples.
    let now = u128::from(crate::clock::now_ms());
    section(
        "keyspace",
        "Keyspace",
        dbs.iter()
            .map(|(db, (keys, expires, deadlines))| {
                let avg_ttl = match *expires {
                    0 => 0,
                    n => (deadlines / n as u128).saturating_sub(now),
                };
                format!("db{db}:keys={keys},expires={expires},avg_ttl={avg_ttl}\r\n")
            })
            .collect(),
    );
    cx.reply(|e| e.verbatim(b"txt", text.as_bytes()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_times_read_from_a_stat_line() {
        let line =
            "4242 (goblin (shard 0)) S 1 4242 4242 0 -1 4194304 100 0 0 0 250 75 3 1 20 0 5 0";
        assert_eq!(super::cpu_times(line), [2.5, 0.75, 0.03, 0.01]);
        assert_eq!(super::cpu_times(""), [0.0; 4]);
    }
}
