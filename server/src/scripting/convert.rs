//! Conversions between RESP and Lua values, exactly as Redis 7.0 converts them
//! (`script_lua.c`: `redisProtocolToLuaType` for the replies of `redis.call`,
//! `luaReplyToRedisReply` for what a script returns).

use goblin_protocol::{Encoder, Version};
use mlua::{Lua, Table, Value};

/// How deep a returned table may nest before its conversion answers
/// `reached lua stack limit`. redis-server converts until its Lua stack is full (7995
/// levels); each level here holds a reference on mlua's auxiliary stack, which has
/// room for 8000, so Goblin stops sooner.
const MAX_REPLY_DEPTH: usize = 1000;

/// Deepest nesting of a command's reply turned into Lua (replies come from our own
/// commands; this only bounds the recursion).
const MAX_PARSE_DEPTH: usize = 1000;

/// The errors a script's reply holds, as redis-server counts them (`luaReplyToRedisReply`
/// and `afterErrorReply`): an error table marked `ignore_error_stats_update` came from a
/// command the script called, whose error was counted when it answered; any other is
/// counted now.
#[derive(Debug, Default)]
pub struct ReplyErrors {
    /// Errors passed on from the commands the script called: each is one more failed
    /// call of the script's command, and nothing in errorstats.
    pub passed_on: u64,
    /// The codes of the others, each counted in errorstats; with any, the script's
    /// command failed (once).
    pub new: Vec<crate::table::handler::ErrorCode>,
}

impl ReplyErrors {
    /// Whether the reply held no error.
    pub fn is_empty(&self) -> bool {
        self.passed_on == 0 && self.new.is_empty()
    }

    /// How many failed calls they make of the script's command.
    pub fn failed_calls(&self) -> u64 {
        self.passed_on + u64::from(!self.new.is_empty())
    }
}

thread_local! {
    /// The errors of the script reply being encoded on this thread.
    static REPLY_ERRORS: std::cell::RefCell<ReplyErrors> = const {
        std::cell::RefCell::new(ReplyErrors {
            passed_on: 0,
            new: Vec::new(),
        })
    };
}

/// Notes an error a script's reply holds (`passed_on`: marked as counted already).
pub(crate) fn note_error(text: &[u8], passed_on: bool) {
    REPLY_ERRORS.with(|e| {
        let Ok(mut e) = e.try_borrow_mut() else {
            return;
        };
        if passed_on {
            e.passed_on += 1;
        } else {
            e.new
                .push(crate::table::handler::ErrorCode::of_message(text));
        }
    });
}

/// Takes the errors noted since the last call: those of the script reply just encoded
/// (its caller takes them right after; none noted, nothing to take).
pub fn take_reply_errors() -> ReplyErrors {
    REPLY_ERRORS.with(|e| match e.try_borrow_mut() {
        Ok(mut e) if !e.is_empty() => std::mem::take(&mut *e),
        _ => ReplyErrors::default(),
    })
}

/// Forgets the errors noted so far (before a script reply is encoded).
pub(crate) fn clear_reply_errors() {
    REPLY_ERRORS.with(|e| {
        if let Ok(mut e) = e.try_borrow_mut()
            && !e.is_empty()
        {
            *e = ReplyErrors::default();
        }
    });
}

/// Whether the table `t` is marked as an error counted already.
pub(crate) fn passed_on(t: &Table) -> mlua::Result<bool> {
    Ok(matches!(
        t.raw_get::<Value>("ignore_error_stats_update")?,
        Value::Boolean(true)
    ))
}

/// A Lua number as Redis turns it into an integer: C's `(long long)` cast, which on
/// x86-64 gives `LLONG_MIN` for NaN and values out of range.
pub fn lua_to_int(n: f64) -> i64 {
    if n.is_nan() || !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

/// A command's reply (`reply`, encoded in RESP2 or RESP3) as the Lua value a script's
/// `redis.call` returns.
pub fn reply_to_lua(lua: &Lua, reply: &[u8]) -> mlua::Result<Value> {
    let mut at = 0;
    let value = parse(lua, reply, &mut at, 0)?;
    Ok(value)
}

fn bad() -> mlua::Error {
    mlua::Error::RuntimeError("malformed reply from a command called by the script".into())
}

/// The line at `at` (up to CRLF), moving `at` past it.
fn line<'a>(buf: &'a [u8], at: &mut usize) -> mlua::Result<&'a [u8]> {
    let rest = buf.get(*at..).ok_or_else(bad)?;
    let end = memchr::memchr(b'\r', rest).ok_or_else(bad)?;
    *at += end + 2;
    Ok(&rest[..end])
}

fn number(text: &[u8]) -> mlua::Result<i64> {
    goblin_protocol::parse_i64(text).ok_or_else(bad)
}

fn parse(lua: &Lua, buf: &[u8], at: &mut usize, depth: usize) -> mlua::Result<Value> {
    if depth > MAX_PARSE_DEPTH {
        return Err(bad());
    }
    let kind = *buf.get(*at).ok_or_else(bad)?;
    *at += 1;
    let head = line(buf, at)?;
    Ok(match kind {
        b':' => Value::Number(number(head)? as f64),
        b'$' | b'=' => {
            let n = number(head)?;
            if n < 0 {
                return Ok(Value::Boolean(false));
            }
            let n = n as usize;
            let body = buf.get(*at..*at + n).ok_or_else(bad)?;
            *at += n + 2;
            if kind == b'$' {
                Value::String(lua.create_string(body)?)
            } else {
                let (format, text) = if body.len() >= 4 {
                    (&body[..3], &body[4..])
                } else {
                    (&b"txt"[..], body)
                };
                let inner = lua.create_table()?;
                inner.raw_set("format", lua.create_string(format)?)?;
                inner.raw_set("string", lua.create_string(text)?)?;
                one_field(lua, "verbatim_string", Value::Table(inner))?
            }
        }
        b'+' => one_field(lua, "ok", Value::String(lua.create_string(head)?))?,
        b'-' => command_error(lua, head)?,
        b'!' => {
            let n = usize::try_from(number(head)?).map_err(|_| bad())?;
            let body = buf.get(*at..*at + n).ok_or_else(bad)?;
            *at += n + 2;
            command_error(lua, body)?
        }
        b'_' => Value::Nil,
        b'#' => Value::Boolean(head == b"t"),
        b',' => {
            let text = std::str::from_utf8(head).map_err(|_| bad())?;
            let d = match text {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                t => t.parse::<f64>().unwrap_or(f64::NAN),
            };
            one_field(lua, "double", Value::Number(d))?
        }
        b'(' => one_field(lua, "big_number", Value::String(lua.create_string(head)?))?,
        b'*' | b'>' => {
            let n = number(head)?;
            if n < 0 {
                return Ok(Value::Boolean(false));
            }
            let t = lua.create_table_with_capacity(n.min(1024) as usize, 0)?;
            for i in 0..n {
                let v = parse(lua, buf, at, depth + 1)?;
                t.raw_set(i + 1, v)?;
            }
            Value::Table(t)
        }
        b'%' => {
            let n = number(head)?;
            let t = lua.create_table()?;
            for _ in 0..n.max(0) {
                let k = parse(lua, buf, at, depth + 1)?;
                let v = parse(lua, buf, at, depth + 1)?;
                if !k.is_nil() {
                    t.raw_set(k, v)?;
                }
            }
            one_field(lua, "map", Value::Table(t))?
        }
        b'~' => {
            let n = number(head)?;
            let t = lua.create_table()?;
            for _ in 0..n.max(0) {
                let k = parse(lua, buf, at, depth + 1)?;
                if !k.is_nil() {
                    t.raw_set(k, true)?;
                }
            }
            one_field(lua, "set", Value::Table(t))?
        }
        b'|' => {
            // An attribute: read and ignored; the value follows it.
            let n = number(head)?;
            for _ in 0..n.max(0) * 2 {
                parse(lua, buf, at, depth + 1)?;
            }
            parse(lua, buf, at, depth)?
        }
        _ => return Err(bad()),
    })
}

/// A command's error reply as Lua sees it (`redisProtocolToLuaType_Error`): the table
/// `{err = "CODE message", ignore_error_stats_update = true}`, the code `ERR` when the
/// text has no space (`luaPushErrorBuff`).
fn command_error(lua: &Lua, text: &[u8]) -> mlua::Result<Value> {
    let err = if text.contains(&b' ') {
        text.to_vec()
    } else {
        [b"ERR ".as_slice(), text].concat()
    };
    let t = lua.create_table_with_capacity(0, 2)?;
    t.raw_set("err", lua.create_string(trim_newlines(&err))?)?;
    t.raw_set("ignore_error_stats_update", true)?;
    Ok(Value::Table(t))
}

/// `sdstrim(s, "\r\n")`.
pub(crate) fn trim_newlines(s: &[u8]) -> &[u8] {
    let nl = |b: &u8| *b == b'\r' || *b == b'\n';
    let start = s.iter().position(|b| !nl(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !nl(b)).map_or(start, |i| i + 1);
    &s[start..end]
}

/// `{name = value}`.
fn one_field(lua: &Lua, name: &str, value: Value) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set(name, value)?;
    Ok(Value::Table(t))
}

/// A string field of a table, as `lua_rawget` + `lua_type == LUA_TSTRING` sees it.
fn string_field(t: &Table, name: &str) -> mlua::Result<Option<mlua::String>> {
    match t.raw_get::<Value>(name)? {
        Value::String(s) => Ok(Some(s)),
        _ => Ok(None),
    }
}

/// CR and LF turned into spaces (`sdsmapchars(s, "\r\n", "  ", 2)`).
fn spaces_for_newlines(s: &[u8]) -> Vec<u8> {
    s.iter()
        .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
        .collect()
}

/// What a script returned, encoded for the client in `version`
/// (`luaReplyToRedisReply`). An error table answers its `err` text; the caller adds the
/// script's position for errors raised, not for errors returned.
/// `script_resp` is the script's own protocol (`redis.setresp`), which decides how a
/// boolean is answered: in RESP2, true is `:1` and false a null (in the client's
/// protocol); in RESP3, a boolean (degraded for a RESP2 client).
pub fn lua_to_reply(
    value: &Value,
    version: Version,
    script_resp: Version,
    out: &mut Vec<u8>,
) -> mlua::Result<()> {
    encode(value, (version, script_resp), out, 0)
}

fn encode(
    value: &Value,
    (version, script_resp): (Version, Version),
    out: &mut Vec<u8>,
    depth: usize,
) -> mlua::Result<()> {
    let both = (version, script_resp);
    if depth >= MAX_REPLY_DEPTH {
        note_error(b"ERR reached lua stack limit", false);
        Encoder::new(out, version).error(b"ERR reached lua stack limit");
        return Ok(());
    }
    let mut enc = Encoder::new(out, version);
    match value {
        Value::String(s) => enc.bulk(&s.as_bytes()),
        Value::Boolean(b) => match script_resp {
            Version::Resp2 if *b => enc.integer(1),
            Version::Resp2 => enc.null(),
            Version::Resp3 => enc.boolean(*b),
        },
        Value::Number(n) => enc.integer(lua_to_int(*n)),
        Value::Integer(n) => enc.integer(*n),
        Value::Table(t) => {
            if let Some(err) = string_field(t, "err")? {
                let text = error_text(&err.as_bytes());
                note_error(&text, passed_on(t)?);
                enc.error_sanitized(&text);
                return Ok(());
            }
            if let Some(ok) = string_field(t, "ok")? {
                enc.simple(&spaces_for_newlines(&ok.as_bytes()));
                return Ok(());
            }
            match t.raw_get::<Value>("double")? {
                Value::Number(d) => {
                    enc.double(d);
                    return Ok(());
                }
                Value::Integer(d) => {
                    enc.double(d as f64);
                    return Ok(());
                }
                _ => {}
            }
            if let Some(big) = string_field(t, "big_number")? {
                enc.big_number(&spaces_for_newlines(&big.as_bytes()));
                return Ok(());
            }
            if let Value::Table(v) = t.raw_get::<Value>("verbatim_string")?
                && let Some(format) = string_field(&v, "format")?
                && let Some(text) = string_field(&v, "string")?
            {
                let f = format.as_bytes();
                let mut fmt = [b' '; 3];
                for (d, s) in fmt.iter_mut().zip(f.iter()) {
                    *d = *s;
                }
                enc.verbatim(&fmt, &text.as_bytes());
                return Ok(());
            }
            if let Value::Table(map) = t.raw_get::<Value>("map")? {
                let mut body = Vec::new();
                let mut n = 0;
                // (`for_each`, not `pairs`: mlua reads a key under 2^-52 as 0, which
                // would make `next` fail.)
                map.for_each(|k: Value, v: Value| {
                    encode(&k, both, &mut body, depth + 1)?;
                    encode(&v, both, &mut body, depth + 1)?;
                    n += 1;
                    Ok(())
                })?;
                enc.map(n);
                out.extend_from_slice(&body);
                return Ok(());
            }
            if let Value::Table(set) = t.raw_get::<Value>("set")? {
                let mut body = Vec::new();
                let mut n = 0;
                set.for_each(|k: Value, _: Value| {
                    encode(&k, both, &mut body, depth + 1)?;
                    n += 1;
                    Ok(())
                })?;
                enc.set(n);
                out.extend_from_slice(&body);
                return Ok(());
            }
            let mut body = Vec::new();
            let mut n = 0;
            loop {
                let v: Value = t.raw_get(n + 1)?;
                if v.is_nil() {
                    break;
                }
                encode(&v, both, &mut body, depth + 1)?;
                n += 1;
            }
            Encoder::new(out, version).array(n);
            out.extend_from_slice(&body);
        }
        _ => enc.null(),
    }
    Ok(())
}

/// The text of an error a script returns or raises (`{err = …}`), as redis-server
/// replies it: `addReplyErrorFormat("-%s", msg)`, so a text that starts with a dash
/// is sent with two.
pub fn error_text(err: &[u8]) -> Vec<u8> {
    err.to_vec()
}
