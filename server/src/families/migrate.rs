//! MIGRATE and RESTORE-ASKING: keys moved to another server (another cluster node while a
//! slot moves) as redis-server moves them — serialized as DUMP serializes them, sent as
//! RESTORE (RESTORE-ASKING in cluster mode) over a connection to the target, and, once the
//! target took them, deleted here (unless COPY). Like redis-server, the shard that holds
//! the keys waits for the target (at most `timeout` milliseconds): nothing else touches
//! those keys meanwhile, so a key is never in both places, nor in neither. Its effect is
//! the DEL of the keys it moved.
//!
//! Keys spread over several shards (standalone mode, MIGRATE … KEYS) go shard by shard,
//! each shard's keys at once.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use goblin_protocol::{Frame, parse_i64, parse_reply};
use goblin_store::rdb;

use crate::errors;
use crate::table::args::is_keyword;
use crate::table::handler::{Args, Exec, ShardCtx};
use crate::table::keys::{InvalidKeys, KeyFlags};
use crate::table::{CommandTable, meta};
use crate::txn::plan::{Hop, HopOut, Locking, Plan, PlanCx, PlanStart, Step};

/// Registers MIGRATE and RESTORE-ASKING.
pub fn register(table: &mut CommandTable) {
    table
        .add(&meta::MIGRATE, Exec::Shard(migrate))
        .custom_keys(migrate_keys)
        .cross_shard(migrate_plan, Locking::Keys);
    table.add(&meta::RESTORE_ASKING, Exec::Shard(super::dump::restore));
}

/// MIGRATE's keys (redis-server's migrateGetKeys): those after KEYS, else the third
/// argument.
fn migrate_keys(
    args: &Args<'_>,
    found: &mut dyn FnMut(usize, KeyFlags),
) -> Result<(), InvalidKeys> {
    let flags = KeyFlags::RW | KeyFlags::ACCESS | KeyFlags::DELETE;
    let mut i = 6;
    while i < args.len() {
        let word = args.get(i);
        if is_keyword(word, "KEYS") {
            for k in i + 1..args.len() {
                found(k, flags);
            }
            return Ok(());
        }
        if is_keyword(word, "AUTH") {
            i += 1;
        } else if is_keyword(word, "AUTH2") {
            i += 2;
        }
        i += 1;
    }
    if args.len() > 3 {
        found(3, flags);
    }
    Ok(())
}

/// What MIGRATE was asked.
#[derive(Debug, Clone)]
struct Options {
    host: String,
    port: u16,
    db: i64,
    timeout: Duration,
    copy: bool,
    replace: bool,
    /// AUTH's (user, password).
    auth: Option<(Option<Vec<u8>>, Vec<u8>)>,
    /// Where the keys are: the index of the first, and how many.
    keys: (usize, usize),
}

fn options(args: &Args<'_>) -> Result<Options, Vec<u8>> {
    let (mut copy, mut replace, mut auth) = (false, false, None);
    let mut keys = (3, 1);
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let word = args.get(j);
        if is_keyword(word, "COPY") {
            copy = true;
        } else if is_keyword(word, "REPLACE") {
            replace = true;
        } else if is_keyword(word, "AUTH") {
            if more < 1 {
                return Err(errors::SYNTAX.to_vec());
            }
            auth = Some((None, args.get(j + 1).to_vec()));
            j += 1;
        } else if is_keyword(word, "AUTH2") {
            if more < 2 {
                return Err(errors::SYNTAX.to_vec());
            }
            auth = Some((Some(args.get(j + 1).to_vec()), args.get(j + 2).to_vec()));
            j += 2;
        } else if is_keyword(word, "KEYS") {
            if !args.get(3).is_empty() {
                return Err(b"ERR When using MIGRATE KEYS option, the key argument must be set to the empty string".to_vec());
            }
            keys = (j + 1, args.len() - j - 1);
            break;
        } else {
            return Err(errors::SYNTAX.to_vec());
        }
        j += 1;
    }
    let long = |a: &[u8]| parse_i64(a).ok_or_else(|| errors::NOT_INTEGER.to_vec());
    let timeout = long(args.get(5))?;
    let db = long(args.get(4))?;
    let timeout = if timeout <= 0 { 1000 } else { timeout as u64 };
    let port = parse_i64(args.get(2))
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(0);
    Ok(Options {
        host: String::from_utf8_lossy(args.get(1)).into_owned(),
        port,
        db,
        timeout: Duration::from_millis(timeout),
        copy,
        replace,
        auth,
        keys,
    })
}

/// How a shard's part of a MIGRATE ended.
#[derive(Debug)]
enum Moved {
    /// None of its keys exists.
    NoKey,
    /// Every key it had went.
    Ok,
    /// An error reply.
    Err(Vec<u8>),
}

/// `MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password]
/// [AUTH2 username password] [KEYS key …]`, its keys on this shard.
fn migrate(ctx: &mut ShardCtx<'_>, args: &Args<'_>) {
    let opts = match options(args) {
        Ok(o) => o,
        Err(e) => {
            ctx.out.error(&e);
            return;
        }
    };
    let keys: Vec<Vec<u8>> = args
        .iter_from(opts.keys.0)
        .take(opts.keys.1)
        .map(<[u8]>::to_vec)
        .collect();
    match move_keys(ctx, &opts, &keys) {
        Moved::NoKey => ctx.out.simple(b"NOKEY"),
        Moved::Ok => ctx.out.ok(),
        Moved::Err(e) => ctx.out.error(&e),
    }
}

/// Sends `keys` (those that exist) to the target and deletes them here once it has them.
fn move_keys(ctx: &mut ShardCtx<'_>, opts: &Options, keys: &[Vec<u8>]) -> Moved {
    let now = ctx.now;
    // TTLs are sent relative to the clock now, not to the command's timestamp (the
    // iteration's, possibly older): the target counts them from its own clock as the key
    // arrives, so a lease never ends earlier there than here. A key expired by now is not
    // sent, and goes as an expired key goes.
    let fresh = now.max(crate::clock::now_ms());
    let mut found = Vec::new();
    let mut expired = Vec::new();
    for key in keys {
        let Some(entry) = ctx.db.get(key, now) else {
            continue;
        };
        let ttl = match entry.expire_at() {
            Some(at) if at <= fresh => {
                expired.push(key.as_slice());
                continue;
            }
            Some(at) => at - fresh,
            None => 0,
        };
        found.push((key.as_slice(), ttl, rdb::dump(entry.value())));
    }
    delete_logged(ctx, &expired);
    if found.is_empty() {
        return Moved::NoKey;
    }
    let asking = crate::cluster::enabled();
    let restore: &[u8] = if asking {
        b"RESTORE-ASKING"
    } else {
        b"RESTORE"
    };
    let mut restores = Vec::new();
    for (key, ttl, payload) in &found {
        let ttl = ttl.to_string();
        if opts.replace {
            command(
                &mut restores,
                &[restore, key, ttl.as_bytes(), payload, b"REPLACE"],
            );
        } else {
            command(&mut restores, &[restore, key, ttl.as_bytes(), payload]);
        }
    }
    let (preamble, replies) = match exchange(opts, &restores, found.len()) {
        Ok(r) => r,
        Err(e) => return Moved::Err(e),
    };
    let mut error = None;
    let mut moved: Vec<&[u8]> = Vec::new();
    for (i, reply) in replies.iter().enumerate() {
        if let Err(e) = reply {
            if error.is_none() {
                error = Some(
                    format!(
                        "ERR Target instance replied with error: {}",
                        String::from_utf8_lossy(e)
                    )
                    .into_bytes(),
                );
            }
            if i < preamble {
                // AUTH or SELECT failed: nothing was restored.
                break;
            }
        } else if i >= preamble {
            moved.push(found[i - preamble].0);
        }
    }
    if !opts.copy {
        delete_logged(ctx, &moved);
    }
    match error {
        Some(e) => Moved::Err(e),
        None => Moved::Ok,
    }
}

/// Deletes `keys` (gone to the target, or expired), logged as one DEL.
fn delete_logged(ctx: &mut ShardCtx<'_>, keys: &[&[u8]]) {
    if keys.is_empty() {
        return;
    }
    for key in keys {
        ctx.db.delete(key, ctx.now);
    }
    if ctx.logging() {
        let mut argv: Vec<&[u8]> = vec![b"DEL"];
        argv.extend(keys.iter().copied());
        ctx.log(&argv);
    }
}

/// The most of one reply MIGRATE reads from its target.
const MAX_TARGET_REPLY: usize = 1 << 20;

/// Appends `argv` to `out` as a RESP command.
fn command(out: &mut Vec<u8>, argv: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", argv.len()).as_bytes());
    for a in argv {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Sends the `restores` (`n` commands) to the target, after AUTH if asked and SELECT if
/// the connection has another database selected, over a cached connection when there is
/// one; answers how many replies came before the restores' and every reply (each `Err`
/// carrying an error reply's text), within the timeout. A cached connection that fails
/// (the target closed it meanwhile) is closed and the exchange tried once more on a new
/// one, as redis-server's `migrateCommand` retries; not after a timeout.
fn exchange(opts: &Options, restores: &[u8], n: usize) -> Result<(usize, Replies), Vec<u8>> {
    let target = format!("{}:{}", opts.host, opts.port);
    let mut retried = false;
    loop {
        let (mut conn, reused) = match cache::take(&target) {
            Some(conn) => (conn, true),
            None => (cache::connect(opts)?, false),
        };
        let mut request = Vec::new();
        if let Some((user, password)) = &opts.auth {
            match user {
                Some(user) => command(&mut request, &[b"AUTH", user, password]),
                None => command(&mut request, &[b"AUTH", password]),
            }
        }
        let select = conn.db != Some(opts.db);
        if select {
            let db = opts.db.to_string();
            command(&mut request, &[b"SELECT", db.as_bytes()]);
        }
        let preamble = usize::from(opts.auth.is_some()) + usize::from(select);
        request.extend_from_slice(restores);
        match talk(&mut conn.stream, opts.timeout, &request, preamble + n) {
            Ok((replies, in_step)) => {
                if select {
                    // The database the connection has now (none known if SELECT failed).
                    conn.db = replies
                        .get(preamble - 1)
                        .and_then(|r| r.is_ok().then_some(opts.db));
                }
                // (A target that sent more than the replies is out of step: its
                // connection is not kept for the next MIGRATE.)
                if in_step {
                    cache::put_back(target, conn);
                } else {
                    cache::close(conn);
                }
                return Ok((preamble, replies));
            }
            Err(failure) => {
                cache::close(conn);
                if reused && !retried && !failure.timed_out {
                    retried = true;
                    continue;
                }
                return Err(failure.message);
            }
        }
    }
}

/// Why an exchange with the target failed.
struct Failure {
    message: Vec<u8>,
    timed_out: bool,
}

/// The target's replies: each `Err` carrying an error reply's text.
type Replies = Vec<Result<(), Vec<u8>>>;

/// Writes `request` and reads `expected` replies; whether nothing came after them.
fn talk(
    stream: &mut TcpStream,
    timeout: Duration,
    request: &[u8],
    expected: usize,
) -> Result<(Replies, bool), Failure> {
    let failure = |message: &[u8], e: Option<std::io::Error>| Failure {
        message: message.to_vec(),
        timed_out: e.is_some_and(|e| {
            matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            )
        }),
    };
    let _ = stream.set_write_timeout(Some(timeout));
    let _ = stream.set_read_timeout(Some(timeout));
    stream.write_all(request).map_err(|e| {
        failure(
            b"IOERR error or timeout writing to target instance",
            Some(e),
        )
    })?;
    const READ_ERROR: &[u8] = b"IOERR error or timeout reading to target instance";
    let mut buf = Vec::new();
    let mut replies = Vec::with_capacity(expected);
    let mut at = 0;
    let mut chunk = [0u8; 16 * 1024];
    while replies.len() < expected {
        match parse_reply(&buf[at..]) {
            Ok(Some((frame, len))) => {
                replies.push(match frame {
                    Frame::Error(e) => Err(e.to_vec()),
                    _ => Ok(()),
                });
                at += len;
                continue;
            }
            Ok(None) => {}
            Err(_) => return Err(failure(READ_ERROR, None)),
        }
        // The target's replies are short (+OK, or an error line): a peer that sends more
        // is not one, and is not buffered without end.
        if buf.len() - at > MAX_TARGET_REPLY {
            return Err(failure(READ_ERROR, None));
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Err(failure(READ_ERROR, None)),
            Err(e) => return Err(failure(READ_ERROR, Some(e))),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    Ok((replies, at == buf.len()))
}

/// MIGRATE's connections kept for the next MIGRATE to the same target, as redis-server
/// keeps them (`migrateGetSocket`): per `host:port`, the connection and the database it
/// has selected; at most 64 (the least recently used goes), each closed after 10 s
/// unused ([`close_idle`], from the cron). A connection in use is taken out, so that
/// MIGRATEs on several threads never share one; INFO's `migrate_cached_sockets` counts
/// those too.
mod cache {
    use std::net::{TcpStream, ToSocketAddrs};
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    use super::Options;

    /// `MIGRATE_SOCKET_CACHE_ITEMS`.
    const ITEMS: usize = 64;
    /// `MIGRATE_SOCKET_CACHE_TTL`.
    const TTL: Duration = Duration::from_secs(10);

    /// A connection to a target.
    pub(super) struct Conn {
        pub stream: TcpStream,
        /// The database it has selected, when known.
        pub db: Option<i64>,
        used: Instant,
    }

    static IDLE: Mutex<Vec<(String, Conn)>> = Mutex::new(Vec::new());
    static IN_USE: AtomicUsize = AtomicUsize::new(0);

    fn idle() -> std::sync::MutexGuard<'static, Vec<(String, Conn)>> {
        IDLE.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cached connection to `target`, taken out for use.
    pub(super) fn take(target: &str) -> Option<Conn> {
        let mut idle = idle();
        let at = idle.iter().position(|(t, _)| t == target)?;
        IN_USE.fetch_add(1, Ordering::Relaxed);
        Some(idle.swap_remove(at).1)
    }

    /// A new connection to the target (in use).
    pub(super) fn connect(opts: &Options) -> Result<Conn, Vec<u8>> {
        let connect_error = || b"IOERR error or timeout connecting to the client".to_vec();
        let addr = (opts.host.as_str(), opts.port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(connect_error)?;
        let stream =
            TcpStream::connect_timeout(&addr, opts.timeout).map_err(|_| connect_error())?;
        let _ = stream.set_nodelay(true);
        IN_USE.fetch_add(1, Ordering::Relaxed);
        Ok(Conn {
            stream,
            db: None,
            used: Instant::now(),
        })
    }

    /// Keeps a connection that served for the next MIGRATE to `target`.
    pub(super) fn put_back(target: String, mut conn: Conn) {
        conn.used = Instant::now();
        let mut idle = idle();
        IN_USE.fetch_sub(1, Ordering::Relaxed);
        // (Two threads' connections to one target: the other is closed.)
        idle.retain(|(t, _)| *t != target);
        if idle.len() + IN_USE.load(Ordering::Relaxed) >= ITEMS
            && let Some(oldest) = (0..idle.len()).min_by_key(|&i| idle[i].1.used)
        {
            idle.swap_remove(oldest);
        }
        idle.push((target, conn));
    }

    /// Closes a connection that failed.
    pub(super) fn close(conn: Conn) {
        IN_USE.fetch_sub(1, Ordering::Relaxed);
        drop(conn);
    }

    /// Closes the connections unused for 10 s.
    pub fn close_idle() {
        let mut idle = idle();
        if !idle.is_empty() {
            idle.retain(|(_, c)| c.used.elapsed() < TTL);
        }
    }

    /// How many connections are cached, in use or not (INFO's `migrate_cached_sockets`).
    pub fn count() -> usize {
        idle().len() + IN_USE.load(Ordering::Relaxed)
    }
}

pub use cache::{close_idle, count as cached_sockets};

/// MIGRATE … KEYS with keys on several shards: each shard moves its own keys (at once,
/// each waiting for the target on its own thread); the answer is the first error, else
/// OK when any key moved, else NOKEY.
fn migrate_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    let opts = options(start.args)?;
    let keys: Vec<Vec<u8>> = start
        .args
        .iter_from(opts.keys.0)
        .take(opts.keys.1)
        .map(<[u8]>::to_vec)
        .collect();
    let mut groups: Vec<(usize, Vec<Vec<u8>>)> = Vec::new();
    for key in keys {
        let shard = start.slots.shard_of_key(&key);
        match groups.iter_mut().find(|(s, _)| *s == shard) {
            Some((_, g)) => g.push(key),
            None => groups.push((shard, vec![key])),
        }
    }
    Ok(Box::new(MigratePlan {
        opts,
        groups,
        sent: false,
    }))
}

#[derive(Debug)]
struct MigratePlan {
    opts: Options,
    groups: Vec<(usize, Vec<Vec<u8>>)>,
    sent: bool,
}

impl Plan for MigratePlan {
    fn next(&mut self, cx: &PlanCx<'_>, results: Vec<HopOut>) -> Step {
        if !self.sent {
            self.sent = true;
            let hops = std::mem::take(&mut self.groups)
                .into_iter()
                .map(|(shard, keys)| {
                    let opts = self.opts.clone();
                    Hop::run(shard, move |ctx: &mut ShardCtx<'_>| {
                        HopOut::Other(Box::new(move_keys(ctx, &opts, &keys)))
                    })
                })
                .collect();
            return Step::Hops(hops);
        }
        let mut any = false;
        for r in results {
            let HopOut::Other(any_out) = r else {
                continue;
            };
            match any_out.downcast::<Moved>().map(|b| *b) {
                Ok(Moved::Err(e)) => return cx.done(|out| out.error(&e)),
                Ok(Moved::Ok) => any = true,
                _ => {}
            }
        }
        cx.done(|out| if any { out.ok() } else { out.simple(b"NOKEY") })
    }
}
