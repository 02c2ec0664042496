//! Connection commands: PING, ECHO, QUIT, HELLO, SELECT, AUTH, CLIENT.

use goblin_protocol::{Version, parse_i64};
use goblin_store::Millis;

use crate::errors::{self, ErrorReply};
use crate::runtime::ask::WorkerView;
use crate::runtime::client::{Client, ReplyMode};
use crate::table::Meta;
use crate::table::args::is_keyword;
use crate::table::handler::{Args, ConnCtx, Exec, MultiCall, MultiCtx, Started};
use crate::table::meta;
use crate::table::{CommandTable, Node};

use super::select_db;

/// Registers the family.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::PING, Exec::Conn(ping)).while_subscribed();
    table.add(&meta::ECHO, Exec::Conn(echo));
    // QUIT ends the connection at once, inside MULTI too.
    table
        .add(&meta::QUIT, Exec::Conn(quit))
        .not_queued()
        .while_subscribed();
    // RESET, like MULTI's commands, acts on the MULTI state, and runs at once.
    table
        .add(&meta::RESET, Exec::Multi(reset))
        .while_subscribed();
    table.add(&meta::HELLO, Exec::Conn(hello));
    table.add(&meta::SELECT, Exec::Conn(select));
    table.add(&meta::AUTH, Exec::Conn(auth));
    table.add_container(
        &meta::CLIENT,
        Exec::Container,
        &[
            ("setname", None, Exec::Conn(client_setname)),
            ("getname", None, Exec::Conn(client_getname)),
            ("id", None, Exec::Conn(client_id)),
            ("setinfo", Some(&CLIENT_SETINFO), Exec::Conn(client_setinfo)),
            ("info", None, Exec::Conn(client_info)),
            ("no-evict", None, Exec::Conn(client_no_evict)),
            ("help", None, Exec::Conn(client_help)),
            (
                "unblock",
                None,
                Exec::AskWorkers {
                    ask: client_unblock_ask,
                    gather: client_unblock_gather,
                },
            ),
            (
                "list",
                None,
                Exec::AskWorkers {
                    ask: client_list_ask,
                    gather: client_list_gather,
                },
            ),
            (
                "kill",
                None,
                Exec::AskWorkers {
                    ask: client_kill_ask,
                    gather: client_kill_gather,
                },
            ),
            ("reply", None, Exec::Conn(client_reply)),
            ("tracking", None, Exec::Conn(client_tracking)),
            ("trackinginfo", None, Exec::Conn(client_trackinginfo)),
            ("getredir", None, Exec::Conn(client_getredir)),
            ("caching", None, Exec::Conn(client_caching)),
            ("pause", None, Exec::Conn(client_pause)),
            (
                "unpause",
                None,
                Exec::AskWorkers {
                    ask: client_unpause_ask,
                    gather: client_unpause_gather,
                },
            ),
        ],
    );
    table.add(&meta::MONITOR, Exec::Conn(monitor));
}

/// `CLIENT REPLY ON|OFF|SKIP`: OFF stops the replies (its own too), SKIP drops the next
/// command's, ON sends them again (and answers OK). The pipeline drops the replies.
fn client_reply(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    if args.is(2, "on") {
        ctx.client.reply = ReplyMode::On;
        ctx.reply().ok();
    } else if args.is(2, "off") {
        ctx.client.reply = ReplyMode::Off;
    } else if args.is(2, "skip") {
        if ctx.client.reply != ReplyMode::Off {
            ctx.client.reply = ReplyMode::SkipNext;
        }
    } else {
        ctx.reply().error(errors::SYNTAX);
    }
}

/// `CLIENT PAUSE timeout [WRITE|ALL]`: for `timeout` milliseconds, commands (all, or
/// those that write) wait before they run; checked in redis-server 7.0's order.
fn client_pause(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    if args.len() > 4 {
        return ctx
            .reply()
            .error(&errors::subcommand_syntax(b"client", args.get(1)));
    }
    let all = if args.len() == 4 {
        if args.is(3, "write") {
            false
        } else if args.is(3, "all") {
            true
        } else {
            return ctx.reply().error(errors::PAUSE_MODE);
        }
    } else {
        true
    };
    let Some(timeout) = parse_i64(args.get(2)) else {
        return ctx.reply().error(errors::TIMEOUT_NOT_INTEGER);
    };
    if timeout < 0 {
        return ctx.reply().error(errors::TIMEOUT_NEGATIVE);
    }
    let now = crate::clock::now_ms();
    let Some(until) = now
        .checked_add(timeout as u64)
        .filter(|&u| u <= i64::MAX as u64)
    else {
        return ctx.reply().error(errors::TIMEOUT_OUT_OF_RANGE);
    };
    ctx.shared.pause.pause(until, all, now);
    ctx.reply().ok();
}

/// CLIENT UNPAUSE on each worker: the pause ends (once is enough; every worker is woken
/// by the question, and lets its paused clients go on).
fn client_unpause_ask(view: &mut WorkerView<'_>, _args: &Args<'_>) -> Vec<u8> {
    view.unpause();
    Vec::new()
}

/// `CLIENT UNPAUSE`
fn client_unpause_gather(ctx: &mut ConnCtx<'_>, _args: &Args<'_>, _answers: Vec<Vec<u8>>) {
    ctx.reply().ok();
}

/// `MONITOR`: from now on the client is sent every command the server runs (the pipeline
/// registers it); a second MONITOR is ignored without a reply, as in Redis.
fn monitor(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    if ctx.client.monitor {
        return;
    }
    ctx.client.monitor = true;
    ctx.reply().ok();
}

/// `PING [message]`
fn ping(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    if args.len() > 2 {
        ctx.reply().error(&errors::wrong_arity("ping"));
    } else if ctx.client.resp == Version::Resp2 && ctx.client.subs.active() {
        // A subscribed RESP2 connection carries messages: PING answers like one.
        let mut out = ctx.reply();
        out.array(2);
        out.bulk(b"pong");
        out.bulk(if args.len() == 2 { args.get(1) } else { b"" });
    } else if args.len() == 2 {
        ctx.reply().bulk(args.get(1));
    } else {
        ctx.reply().simple(b"PONG");
    }
}

/// `RESET`: the connection as it was when it connected — out of MULTI (and not
/// watching), subscribed to nothing, not monitoring, replies on, database 0, RESP2, no
/// name, and authenticated only if no password is required.
fn reset(ctx: &mut MultiCtx<'_>, call: MultiCall<'_, '_>) -> Option<Started> {
    if let MultiCall::Rejected(msg) = call {
        ctx.conn.reply().error_sanitized(msg);
        return None;
    }
    *ctx.multi = None;
    let conn = &mut ctx.conn;
    conn.client.watching = None;
    if conn.client.monitor {
        conn.client.monitor = false;
        conn.shared.monitors.remove(conn.hub.me);
    }
    conn.hub
        .leave_all(&conn.shared.pubsub, &mut conn.client.subs);
    if conn.client.tracking.on {
        conn.shared
            .tracking
            .disable(crate::runtime::tracking::Reader {
                id: conn.client.id,
                conn: conn.hub.me,
            });
    }
    conn.client.tracking = Default::default();
    conn.client.db = 0;
    conn.client.resp = Version::Resp2;
    conn.client.name = None;
    conn.client.reply = ReplyMode::On;
    conn.client.readonly = false;
    let (user, version) = conn.shared.acl.default_user();
    conn.client.authenticated = user.needs_no_password();
    conn.client.user = user;
    conn.client.acl_version = version;
    conn.reply().simple(b"RESET");
    None
}

/// `ECHO message`
fn echo(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    ctx.reply().bulk(args.get(1));
}

/// `QUIT`: replies OK, then the connection closes once the reply is written.
fn quit(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    ctx.reply().ok();
    ctx.client.close_after_reply = true;
}

/// Client names, library names and versions must be printable ASCII without spaces.
fn valid_client_attr(s: &[u8]) -> bool {
    s.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

/// Authenticates the client as `user` if `password` opens it (the user exists, is on,
/// and needs no password or has this one); a failure is logged in the ACL LOG, under
/// the name of the `command` that tried.
fn authenticate(ctx: &mut ConnCtx<'_>, command: &[u8], user: &[u8], password: &[u8]) -> bool {
    let (found, version) = ctx.shared.acl.user(user);
    match found {
        Some(found) if found.opens(password) => {
            ctx.client.user = found;
            ctx.client.acl_version = version;
            ctx.client.authenticated = true;
            true
        }
        _ => {
            ctx.shared.acl.log(crate::acl::LogEntry {
                count: 1,
                reason: "auth",
                context: "toplevel",
                // The command's name as the client sent it, as redis-server logs it.
                object: command.to_vec(),
                username: user.to_vec(),
                at_ms: ctx.now,
                client_info: ctx.client.info_line(ctx.now),
            });
            false
        }
    }
}

/// Names the connection (`clientSetNameOrReply`); an empty name removes its name.
fn set_client_name(ctx: &mut ConnCtx<'_>, name: &[u8]) -> Result<(), ErrorReply> {
    if !valid_client_attr(name) {
        return Err(errors::BAD_CLIENT_NAME.into());
    }
    ctx.client.name = (!name.is_empty()).then(|| name.to_vec());
    Ok(())
}

/// HELLO's version and options. Options take effect as they are read, as in
/// redis-server 7.0: a later bad option does not undo an earlier SETNAME, and a failed
/// AUTH stops before later options. The version is the one to switch to, once all went
/// well.
fn hello_args(ctx: &mut ConnCtx<'_>, args: &Args<'_>) -> Result<Option<Version>, ErrorReply> {
    let mut c = args.cursor(1);
    let version = if c.is_empty() {
        None
    } else {
        match c.next_parsed(parse_i64, errors::HELLO_VERSION_NOT_INTEGER)? {
            2 => Some(Version::Resp2),
            3 => Some(Version::Resp3),
            _ => return Err(errors::NOPROTO.into()),
        }
    };
    while let Some(opt) = c.next() {
        if is_keyword(opt, "AUTH") && c.remaining() >= 2 {
            let (user, password) = (c.next_arg()?, c.next_arg()?);
            if !authenticate(ctx, args.get(0), user, password) {
                return Err(errors::WRONGPASS.into());
            }
        } else if is_keyword(opt, "SETNAME") && !c.is_empty() {
            set_client_name(ctx, c.next_arg()?)?;
        } else {
            return Err(errors::hello_syntax(opt));
        }
    }
    Ok(version)
}

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`
fn hello(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let version = match hello_args(ctx, args) {
        Ok(version) => version,
        Err(e) => return e.send(&mut ctx.reply()),
    };
    if !ctx.client.authenticated {
        return ctx.reply().error(errors::NOAUTH_HELLO);
    }
    if let Some(v) = version {
        ctx.client.resp = v;
    }
    let id = ctx.client.id as i64;
    let proto = if ctx.client.resp == Version::Resp3 {
        3
    } else {
        2
    };
    let mut out = ctx.reply();
    out.map(7);
    out.bulk(b"server");
    out.bulk(b"redis");
    out.bulk(b"version");
    out.bulk(crate::runtime::server::REDIS_VERSION.as_bytes());
    out.bulk(b"proto");
    out.integer(proto);
    out.bulk(b"id");
    out.integer(id);
    out.bulk(b"mode");
    out.bulk(b"standalone");
    out.bulk(b"role");
    out.bulk(b"master");
    out.bulk(b"modules");
    out.array(0);
}

/// `SELECT index`
fn select(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let databases = ctx.shared.config.databases;
    let index = args.cursor(1).next_i32();
    if ctx.shared.cluster.is_some() && index.as_ref().is_ok_and(|&n| n != 0) {
        ctx.reply()
            .error(b"ERR SELECT is not allowed in cluster mode");
        return;
    }
    match index.and_then(|n| select_db(i64::from(n), databases)) {
        Ok(db) => {
            ctx.client.db = db;
            ctx.reply().ok();
        }
        Err(e) => e.send(&mut ctx.reply()),
    }
}

/// `AUTH [username] password`
fn auth(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let (user, password) = match args.len() {
        2 if ctx.shared.acl.default_user().0.needs_no_password() => {
            return ctx.reply().error(errors::AUTH_NO_PASSWORD);
        }
        2 => (&b"default"[..], args.get(1)),
        3 => (args.get(1), args.get(2)),
        _ => return ctx.reply().error(errors::SYNTAX),
    };
    if authenticate(ctx, args.get(0), user, password) {
        ctx.reply().ok();
    } else {
        ctx.reply().error(errors::WRONGPASS);
    }
}

/// `CLIENT SETNAME name`
fn client_setname(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    match set_client_name(ctx, args.get(2)) {
        Ok(()) => ctx.reply().ok(),
        Err(e) => e.send(&mut ctx.reply()),
    }
}

/// `CLIENT GETNAME`
fn client_getname(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    match ctx.client.name.clone() {
        Some(name) => ctx.reply().bulk(&name),
        None => ctx.reply().null(),
    }
}

/// `CLIENT ID`
fn client_id(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let id = ctx.client.id as i64;
    ctx.reply().integer(id);
}

/// `CLIENT UNBLOCK client-id [TIMEOUT|ERROR]`'s arguments, checked in redis-server's
/// order (the reason, then the id): the id, and the error the blocked client gets
/// (`None`: it times out).
fn unblock_args(args: &Args<'_>) -> Result<(u64, Option<&'static [u8]>), ErrorReply> {
    let error = match args.len() {
        n if n > 4 => {
            return Err(ErrorReply::Formatted(errors::subcommand_syntax(
                args.get(0),
                args.get(1),
            )));
        }
        3 => None,
        _ if args.is(3, "timeout") => None,
        _ if args.is(3, "error") => Some(errors::UNBLOCKED),
        _ => return Err(ErrorReply::Fixed(errors::UNBLOCK_REASON)),
    };
    let id = parse_i64(args.get(2)).ok_or(ErrorReply::Fixed(errors::NOT_INTEGER))?;
    // Ids are positive: a negative one names no client.
    Ok((u64::try_from(id).unwrap_or(0), error))
}

/// CLIENT UNBLOCK on one worker: "1" when it unblocked the client here.
fn client_unblock_ask(view: &mut WorkerView<'_>, args: &Args<'_>) -> Vec<u8> {
    let unblocked = match unblock_args(args) {
        Ok((id, error)) => view.unblock_client(id, error),
        Err(_) => false,
    };
    vec![u8::from(unblocked)]
}

/// `CLIENT UNBLOCK client-id [TIMEOUT|ERROR]`: 1 when the client was blocked (on any
/// worker) and is now unblocked, else 0.
fn client_unblock_gather(ctx: &mut ConnCtx<'_>, args: &Args<'_>, answers: Vec<Vec<u8>>) {
    if let Err(e) = unblock_args(args) {
        return e.send(&mut ctx.reply());
    }
    let unblocked = answers.iter().any(|a| a.first() == Some(&1));
    ctx.reply().integer(i64::from(unblocked));
}

/// `CLIENT SETINFO <LIB-NAME|LIB-VER> value` (Redis 7.2; clients send it on connect).
fn client_setinfo(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let (attr, value) = (args.get(2), args.get(3));
    let slot = if args.is(2, "lib-name") {
        &mut ctx.client.lib_name
    } else if args.is(2, "lib-ver") {
        &mut ctx.client.lib_ver
    } else {
        return errors::unrecognized_option(attr).send(&mut ctx.reply());
    };
    if !valid_client_attr(value) {
        return errors::bad_client_attr(attr).send(&mut ctx.reply());
    }
    *slot = (!value.is_empty()).then(|| value.to_vec());
    ctx.reply().ok();
}

/// One CLIENT LIST line, in redis-server's field order.
fn client_line(c: &Client, now: Millis) -> Vec<u8> {
    let mut line = c.info_line(now).into_bytes();
    line.push(b'\n');
    line
}

/// `CLIENT INFO`
fn client_info(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let line = client_line(ctx.client, ctx.now);
    ctx.reply().verbatim(b"txt", &line);
}

/// The kinds of client CLIENT LIST and KILL filter by: a replica's link to its master
/// (`flags=M`), a replica of this server (`flags=S`), a client subscribed to a channel or
/// pattern (`flags=P`), any other a normal one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClientType {
    Normal,
    Pubsub,
    Master,
    Replica,
}

/// `getClientTypeByName`: normal, master, replica (or slave), pubsub.
fn client_type(name: &[u8]) -> Result<ClientType, ErrorReply> {
    match name.to_ascii_lowercase().as_slice() {
        b"normal" => Ok(ClientType::Normal),
        b"pubsub" => Ok(ClientType::Pubsub),
        b"master" => Ok(ClientType::Master),
        b"replica" | b"slave" => Ok(ClientType::Replica),
        _ => Err(errors::unknown_client_type(name)),
    }
}

/// `getClientType` (MONITOR clients show as normal ones, as in Redis).
fn type_of(c: &Client) -> ClientType {
    if c.master {
        ClientType::Master
    } else if c.replica {
        ClientType::Replica
    } else if c.subs.active() {
        ClientType::Pubsub
    } else {
        ClientType::Normal
    }
}

/// CLIENT LIST's filter: a type, or some ids (`None`: every client).
enum ListFilter {
    All,
    Type(ClientType),
    Ids(Vec<u64>),
}

/// `CLIENT LIST [TYPE type | ID id [id ...]]`'s arguments, checked as redis-server 7.0
/// checks them.
fn list_args(args: &Args<'_>) -> Result<ListFilter, ErrorReply> {
    match args.len() {
        2 => Ok(ListFilter::All),
        4 if args.is(2, "type") => Ok(ListFilter::Type(client_type(args.get(3))?)),
        n if n > 3 && args.is(2, "id") => args
            .iter_from(3)
            .map(|id| {
                parse_i64(id)
                    .and_then(|id| u64::try_from(id).ok())
                    .ok_or(ErrorReply::Fixed(errors::INVALID_CLIENT_ID))
            })
            .collect::<Result<_, _>>()
            .map(ListFilter::Ids),
        _ => Err(errors::SYNTAX.into()),
    }
}

/// CLIENT LIST's question to a worker: the lines of its clients that pass the filter.
fn client_list_ask(view: &mut WorkerView<'_>, args: &Args<'_>) -> Vec<u8> {
    let Ok(filter) = list_args(args) else {
        return Vec::new();
    };
    let now = view.now();
    view.refresh_facts(args);
    view.clients()
        .filter(|c| match &filter {
            ListFilter::All => true,
            ListFilter::Type(kind) => type_of(c) == *kind,
            ListFilter::Ids(ids) => ids.contains(&c.id),
        })
        .flat_map(|c| client_line(c, now))
        .collect()
}

/// `CLIENT LIST`: every worker's clients, in the order they connected (by id).
fn client_list_gather(ctx: &mut ConnCtx<'_>, args: &Args<'_>, answers: Vec<Vec<u8>>) {
    if let Err(e) = list_args(args) {
        return e.send(&mut ctx.reply());
    }
    let mut lines: Vec<&[u8]> = answers
        .iter()
        .flat_map(|a| a.split_inclusive(|&b| b == b'\n'))
        .collect();
    let id = |line: &[u8]| -> u64 {
        line.strip_prefix(b"id=")
            .and_then(|rest| rest.split(|&b| b == b' ').next())
            .and_then(|id| std::str::from_utf8(id).ok()?.parse().ok())
            .unwrap_or(0)
    };
    lines.sort_by_key(|line| id(line));
    let text = lines.concat();
    ctx.reply().verbatim(b"txt", &text);
}

/// CLIENT KILL's filters.
struct KillFilter {
    /// The old form, `CLIENT KILL addr:port`: OK or an error, and it may kill itself.
    old: bool,
    id: Option<u64>,
    kind: Option<ClientType>,
    addr: Option<Vec<u8>>,
    laddr: Option<Vec<u8>>,
    skipme: bool,
    /// MAXAGE (Redis 7.4): clients connected longer than this many seconds.
    max_age: Option<u64>,
    /// USER: clients authenticated as this user.
    user: Option<Vec<u8>>,
}

/// `CLIENT KILL addr:port` and `CLIENT KILL <filter> <value> ...`, checked as
/// redis-server 7.0 checks them.
fn kill_args(args: &Args<'_>) -> Result<KillFilter, ErrorReply> {
    let mut f = KillFilter {
        old: args.len() == 3,
        id: None,
        kind: None,
        addr: None,
        laddr: None,
        skipme: true,
        max_age: None,
        user: None,
    };
    if f.old {
        f.addr = Some(args.get(2).to_vec());
        f.skipme = false;
        return Ok(f);
    }
    let mut i = 2;
    while i < args.len() {
        let more = i + 1 < args.len();
        let value = args.get(i + 1);
        if args.is(i, "id") && more {
            let id = parse_i64(value)
                .filter(|&id| id >= 1)
                .ok_or(ErrorReply::Fixed(errors::CLIENT_ID_NOT_POSITIVE))?;
            f.id = Some(id as u64);
        } else if args.is(i, "type") && more {
            f.kind = Some(client_type(value)?);
        } else if args.is(i, "addr") && more {
            f.addr = Some(value.to_vec());
        } else if args.is(i, "laddr") && more {
            f.laddr = Some(value.to_vec());
        } else if args.is(i, "user") && more {
            f.user = Some(value.to_vec());
        } else if args.is(i, "maxage") && more {
            let age = parse_i64(value).ok_or(ErrorReply::Fixed(errors::MAXAGE_NOT_INTEGER))?;
            // As Redis 7.4: 0 (or less) does not filter.
            f.max_age = (age > 0).then_some(age as u64);
        } else if args.is(i, "skipme") && more {
            f.skipme = if value.eq_ignore_ascii_case(b"yes") {
                true
            } else if value.eq_ignore_ascii_case(b"no") {
                false
            } else {
                return Err(errors::SYNTAX.into());
            };
        } else {
            return Err(errors::SYNTAX.into());
        }
        i += 2;
    }
    Ok(f)
}

impl KillFilter {
    fn matches(&self, view: &WorkerView<'_>, c: &Client) -> bool {
        self.id.is_none_or(|id| c.id == id)
            && self.kind.is_none_or(|k| k == type_of(c))
            && self
                .addr
                .as_ref()
                .is_none_or(|a| c.origin.addr().as_bytes() == a.as_slice())
            && self
                .laddr
                .as_ref()
                .is_none_or(|a| c.origin.laddr().as_bytes() == a.as_slice())
            && self.user.as_ref().is_none_or(|u| c.user.name == *u)
            && !(self.skipme && view.is_asker(c))
            && self
                .max_age
                .is_none_or(|max| view.now().saturating_sub(c.created_at) / 1000 > max)
    }
}

/// CLIENT KILL's question to a worker: close its matching clients; how many.
fn client_kill_ask(view: &mut WorkerView<'_>, args: &Args<'_>) -> Vec<u8> {
    let Ok(filter) = kill_args(args) else {
        return Vec::new();
    };
    let killed = view.kill_clients(|v, c| filter.matches(v, c));
    (killed as u64).to_le_bytes().to_vec()
}

/// `CLIENT KILL`: how many clients were closed on every worker (the old form: OK, or an
/// error when none was).
fn client_kill_gather(ctx: &mut ConnCtx<'_>, args: &Args<'_>, answers: Vec<Vec<u8>>) {
    let filter = match kill_args(args) {
        Ok(f) => f,
        Err(e) => return e.send(&mut ctx.reply()),
    };
    if let Some(user) = &filter.user
        && ctx.shared.acl.user(user).0.is_none()
    {
        return errors::no_such_user(user).send(&mut ctx.reply());
    }
    let killed: u64 = answers
        .iter()
        .filter_map(|a| <[u8; 8]>::try_from(a.as_slice()).ok())
        .map(u64::from_le_bytes)
        .sum();
    match (filter.old, killed) {
        (true, 0) => ctx.reply().error(errors::NO_SUCH_CLIENT),
        (true, _) => ctx.reply().ok(),
        (false, n) => ctx.reply().integer(n as i64),
    }
}

/// `CLIENT NO-EVICT ON|OFF`: whether the client may be evicted for `maxmemory-clients`
/// (weighed again once the command has run; the output-buffer limits still apply, as
/// they do in Redis).
fn client_no_evict(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let arg = args.get(2);
    if arg.eq_ignore_ascii_case(b"on") || arg.eq_ignore_ascii_case(b"off") {
        ctx.client.no_evict = arg.eq_ignore_ascii_case(b"on");
        ctx.reply().ok();
    } else {
        ctx.reply().error(errors::SYNTAX);
    }
}

/// `CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX prefix ...] [OPTIN] [OPTOUT]
/// [NOLOOP]`: the options read, then checked, in redis-server 7.0's order and with its
/// texts (`runtime/tracking.rs` says what tracking does).
fn client_tracking(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let (mut redirect, mut bcast, mut optin, mut optout, mut noloop) =
        (0i64, false, false, false, false);
    let mut prefixes: Vec<&[u8]> = Vec::new();
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        let arg = args.get(j);
        if arg.eq_ignore_ascii_case(b"redirect") && more {
            j += 1;
            if redirect != 0 {
                ctx.reply()
                    .error(b"ERR A client can only redirect to a single other client");
                return;
            }
            let Some(id) = parse_i64(args.get(j)) else {
                ctx.reply().error(errors::NOT_INTEGER);
                return;
            };
            redirect = id;
            let exists = u64::try_from(id)
                .is_ok_and(|id| id == ctx.client.id || ctx.shared.tracking.conn_of(id).is_some());
            if !exists {
                ctx.reply()
                    .error(b"ERR The client ID you want redirect to does not exist");
                return;
            }
        } else if arg.eq_ignore_ascii_case(b"bcast") {
            bcast = true;
        } else if arg.eq_ignore_ascii_case(b"optin") {
            optin = true;
        } else if arg.eq_ignore_ascii_case(b"optout") {
            optout = true;
        } else if arg.eq_ignore_ascii_case(b"noloop") {
            noloop = true;
        } else if arg.eq_ignore_ascii_case(b"prefix") && more {
            j += 1;
            prefixes.push(args.get(j));
        } else {
            ctx.reply().error(errors::SYNTAX);
            return;
        }
        j += 1;
    }
    let me = crate::runtime::tracking::Reader {
        id: ctx.client.id,
        conn: ctx.hub.me,
    };
    if args.is(2, "off") {
        if ctx.client.tracking.on {
            ctx.shared.tracking.disable(me);
        }
        ctx.client.tracking = Default::default();
        ctx.reply().ok();
        return;
    }
    if !args.is(2, "on") {
        ctx.reply().error(errors::SYNTAX);
        return;
    }
    let t = &ctx.client.tracking;
    let error: Option<&[u8]> = if !bcast && !prefixes.is_empty() {
        Some(b"ERR PREFIX option requires BCAST mode to be enabled")
    } else if t.on && t.bcast != bcast {
        Some(
            b"ERR You can't switch BCAST mode on/off before disabling tracking for this client, \
              and then re-enabling it with a different mode.",
        )
    } else if bcast && (optin || optout) {
        Some(b"ERR OPTIN and OPTOUT are not compatible with BCAST")
    } else if optin && optout {
        Some(b"ERR You can't specify both OPTIN mode and OPTOUT mode")
    } else if (optin && t.optout) || (optout && t.optin) {
        Some(
            b"ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, \
              and then re-enabling it with a different mode.",
        )
    } else {
        None
    };
    if let Some(error) = error {
        ctx.reply().error(error);
        return;
    }
    if bcast && !prefix_collisions_ok(ctx, &prefixes) {
        return;
    }
    let t = &mut ctx.client.tracking;
    t.on = true;
    t.broken_redirect = false;
    t.bcast = bcast;
    t.optin = optin;
    t.optout = optout;
    t.noloop = noloop;
    t.redirect = redirect as u64;
    if bcast {
        if prefixes.is_empty() {
            prefixes.push(b"");
        }
        for p in prefixes {
            if !t.prefixes.iter().any(|q| &q[..] == p) {
                t.prefixes.push(p.into());
            }
        }
        t.prefixes.sort_unstable();
    }
    let state = t.clone();
    ctx.shared.tracking.enable(me, &state);
    ctx.reply().ok();
}

/// Redis's `checkPrefixCollisionsOrReply`: no new prefix may be a prefix of an existing
/// one or the other way round, nor of another new one. Redis answers an error for the
/// latter and, past the first prefix, goes on to enable tracking (and answer OK too):
/// that is kept, for the same bytes.
fn prefix_collisions_ok(ctx: &mut ConnCtx<'_>, prefixes: &[&[u8]]) -> bool {
    let overlap = |a: &[u8], b: &[u8]| {
        let n = a.len().min(b.len());
        a[..n] == b[..n]
    };
    for (i, p) in prefixes.iter().enumerate() {
        if let Some(existing) = ctx
            .client
            .tracking
            .prefixes
            .iter()
            .find(|q| overlap(q, p))
            .cloned()
        {
            let text = [
                &b"ERR Prefix '"[..],
                errors::c_str(p),
                b"' overlaps with an existing prefix '",
                errors::c_str(&existing),
                b"'. Prefixes for a single client must not overlap.",
            ]
            .concat();
            ctx.reply().error_sanitized(&text);
            return false;
        }
        if let Some(other) = prefixes[i + 1..].iter().find(|q| overlap(p, q)) {
            let text = [
                &b"ERR Prefix '"[..],
                errors::c_str(p),
                b"' overlaps with another provided prefix '",
                errors::c_str(other),
                b"'. Prefixes for a single client must not overlap.",
            ]
            .concat();
            ctx.reply().error_sanitized(&text);
            return i != 0;
        }
    }
    true
}

/// `CLIENT TRACKINGINFO`: flags (a set in RESP3), redirect, prefixes.
fn client_trackinginfo(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let t = ctx.client.tracking.clone();
    let mut flags: Vec<&[u8]> = vec![if t.on { b"on" } else { b"off" }];
    if t.bcast {
        flags.push(b"bcast");
    }
    if t.optin {
        flags.push(b"optin");
        if t.caching {
            flags.push(b"caching-yes");
        }
    }
    if t.optout {
        flags.push(b"optout");
        if t.caching {
            flags.push(b"caching-no");
        }
    }
    if t.noloop {
        flags.push(b"noloop");
    }
    if t.broken_redirect {
        flags.push(b"broken_redirect");
    }
    let mut e = ctx.reply();
    e.map(3);
    e.bulk(b"flags");
    e.set(flags.len());
    for f in flags {
        e.bulk(f);
    }
    e.bulk(b"redirect");
    e.integer(if t.on { t.redirect as i64 } else { -1 });
    e.bulk(b"prefixes");
    e.array(t.prefixes.len());
    for p in &t.prefixes {
        e.bulk(p);
    }
}

/// `CLIENT GETREDIR`: -1 when not tracking, else the client redirected to (0: none).
fn client_getredir(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let t = &ctx.client.tracking;
    let n = if t.on { t.redirect as i64 } else { -1 };
    ctx.reply().integer(n);
}

/// `CLIENT CACHING YES|NO`: the next command's keys are remembered (OPTIN) or not
/// (OPTOUT).
fn client_caching(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let t = &mut ctx.client.tracking;
    let error: &[u8] = if !t.on {
        b"ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN \
          or OPTOUT mode enabled"
    } else if args.is(2, "yes") {
        if t.optin {
            t.caching = true;
            return ctx.reply().ok();
        }
        b"ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."
    } else if args.is(2, "no") {
        if t.optout {
            t.caching = true;
            return ctx.reply().ok();
        }
        b"ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."
    } else {
        errors::SYNTAX
    };
    ctx.reply().error(error);
}

/// `CLIENT HELP`
fn client_help(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    const LINES: &[&str] = &[
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CACHING (YES|NO)",
        "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
        "GETREDIR",
        "    Return the client ID we are redirecting to when tracking is enabled.",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
        "         [OPTIN] [OPTOUT] [NOLOOP]",
        "    Control server assisted client side caching.",
        "TRACKINGINFO",
        "    Report tracking status for the current connection.",
        "NO-EVICT (ON|OFF)",
        "    Protect current client connection from eviction.",
        "SETINFO <option> <value>",
        "    Set client meta attr. Options are:",
        "    * LIB-NAME: the client lib name.",
        "    * LIB-VER: the client lib version.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "HELP",
        "    Prints this help.",
    ];
    super::reply_help(ctx, LINES);
}

/// CLIENT SETINFO's COMMAND INFO/DOCS entries, as redis-server 7.2 gives them (7.0 lacks
/// the subcommand) but for `no_auth`: redis-server 7.0 answers a subcommand it does not
/// know before it asks for AUTH, and clients send SETINFO as they connect, before the
/// AUTH a caller may send itself (redis-py takes 7.2's NOAUTH there for a failed
/// connection; 7.0's unknown subcommand it ignores). Goblin takes it before AUTH.
static CLIENT_SETINFO: Meta = Meta {
    info: Node::Array(&[
        Node::Bulk("client|setinfo"),
        Node::Int(4),
        Node::Set(&[
            Node::Simple("noscript"),
            Node::Simple("loading"),
            Node::Simple("stale"),
            Node::Simple("no_auth"),
        ]),
        Node::Int(0),
        Node::Int(0),
        Node::Int(0),
        Node::Set(&[Node::Simple("@slow"), Node::Simple("@connection")]),
        Node::Set(&[
            Node::Bulk("request_policy:all_nodes"),
            Node::Bulk("response_policy:all_succeeded"),
        ]),
        Node::Set(&[]),
        Node::Set(&[]),
    ]),
    docs: Node::Map(&[
        Node::Bulk("summary"),
        Node::Bulk("Sets information specific to the client or connection."),
        Node::Bulk("since"),
        Node::Bulk("7.2.0"),
        Node::Bulk("group"),
        Node::Bulk("connection"),
        Node::Bulk("complexity"),
        Node::Bulk("O(1)"),
        Node::Bulk("arguments"),
        Node::Array(&[Node::Map(&[
            Node::Bulk("name"),
            Node::Bulk("attr"),
            Node::Bulk("type"),
            Node::Bulk("oneof"),
            Node::Bulk("arguments"),
            Node::Array(&[
                Node::Map(&[
                    Node::Bulk("name"),
                    Node::Bulk("libname"),
                    Node::Bulk("type"),
                    Node::Bulk("string"),
                    Node::Bulk("token"),
                    Node::Bulk("LIB-NAME"),
                ]),
                Node::Map(&[
                    Node::Bulk("name"),
                    Node::Bulk("libver"),
                    Node::Bulk("type"),
                    Node::Bulk("string"),
                    Node::Bulk("token"),
                    Node::Bulk("LIB-VER"),
                ]),
            ]),
        ])]),
    ]),
};
