//! The `cjson` library of Redis's Lua (its `deps/lua/src/lua_cjson.c`, Lua CJSON 2.1.0,
//! with `strbuf.c` and `fpconv.c`), byte for byte: the same text for the same values, the
//! same errors, the same limits — including those that come from Lua's C stack (8000
//! slots per C call), which bound nesting when the configured depths are raised.
//!
//! Each table made by `cjson.new()` (and the global `cjson`) has its own configuration.
//! Walks of nested data are loops, not recursion, so the depth of the input never grows
//! Rust's stack.

pub(crate) mod api;
mod fpconv;

use std::cell::RefCell;
use std::rc::Rc;

use mlua::{LightUserData, Lua, Table, Value};

use api::{Args, Fail, Parking, Ret, c_to_i32, exact, one, pairs_of, type_name};

/// Lua's `LUAI_MAXCSTACK`: the slots a C function may use; `lua_checkstack` refuses more.
const MAX_C_STACK: i64 = 8000;

/// The most bytes an encoding may reach: beyond, the script gets Lua's memory error
/// (Redis would grow its buffer until the machine runs out).
const MAX_OUTPUT: usize = 1 << 30;

/// A `cjson` table's configuration (`json_config_t`), with Redis's defaults.
#[derive(Clone, Copy, Debug)]
struct Config {
    encode_sparse_convert: i32,
    encode_sparse_ratio: i32,
    encode_sparse_safe: i32,
    encode_max_depth: i32,
    encode_invalid_numbers: i32,
    encode_number_precision: i32,
    encode_keep_buffer: i32,
    decode_invalid_numbers: i32,
    decode_max_depth: i32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            encode_sparse_convert: 0,
            encode_sparse_ratio: 2,
            encode_sparse_safe: 10,
            encode_max_depth: 1000,
            encode_invalid_numbers: 0,
            encode_number_precision: 14,
            encode_keep_buffer: 1,
            decode_invalid_numbers: 1,
            decode_max_depth: 1000,
        }
    }
}

type Shared = Rc<RefCell<Config>>;

/// Opens the library: the global table `cjson`.
pub fn open(lua: &Lua) -> mlua::Result<()> {
    let globals = lua.globals();
    let table = match globals.raw_get::<Value>("cjson")? {
        Value::Table(t) => t,
        _ => {
            let t = lua.create_table()?;
            globals.raw_set("cjson", &t)?;
            t
        }
    };
    fill(lua, &table)
}

/// Fills `table` with a fresh library (`lua_cjson_new`): functions sharing one new
/// configuration, `null`, `_NAME` and `_VERSION`.
fn fill(lua: &Lua, table: &Table) -> mlua::Result<()> {
    let cfg: Shared = Rc::new(RefCell::new(Config::default()));
    type Handler = fn(&Lua, &Args, &Shared) -> Result<Ret, Fail>;
    let funcs: [(&'static str, Handler); 10] = [
        ("encode", encode),
        ("decode", decode),
        ("encode_sparse_array", encode_sparse_array),
        ("encode_max_depth", encode_max_depth),
        ("decode_max_depth", decode_max_depth),
        ("encode_number_precision", encode_number_precision),
        ("encode_keep_buffer", encode_keep_buffer),
        ("encode_invalid_numbers", encode_invalid_numbers),
        ("decode_invalid_numbers", decode_invalid_numbers),
        ("new", new),
    ];
    for (name, handler) in funcs {
        let cfg = cfg.clone();
        let f = api::function(lua, name, move |lua, args| handler(lua, args, &cfg))?;
        table.raw_set(name, f)?;
    }
    table.raw_set("null", null())?;
    table.raw_set("_NAME", "cjson")?;
    table.raw_set("_VERSION", "2.1.0")?;
    Ok(())
}

/// `cjson.null`: the NULL light userdata.
fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// `cjson.new()`: a new library table with its own configuration.
fn new(lua: &Lua, _args: &Args, _cfg: &Shared) -> Result<Ret, Fail> {
    let table = lua.create_table()?;
    fill(lua, &table)?;
    Ok(one(Value::Table(table)))
}

// ===== Configuration =====

/// `json_arg_init`: at most `n` arguments.
fn arg_init(lua: &Lua, args: &Args, n: usize) -> Result<(), Fail> {
    args.arg_check(
        lua,
        args.len() <= n,
        n as i64 + 1,
        "found too many arguments",
    )
}

/// `json_integer_option`: sets `setting` from argument `i` when given (checked to be in
/// `min..=max`; the error names argument 1 whatever `i` is, as Redis's does); answers it.
fn integer_option(
    lua: &Lua,
    args: &Args,
    i: usize,
    setting: &mut i32,
    min: i32,
    max: i32,
) -> Result<Value, Fail> {
    if !args.is_none_or_nil(i)? {
        let value = args.check_integer(lua, i)? as i32;
        args.arg_check(
            lua,
            min <= value && value <= max,
            1,
            &format!("expected integer between {min} and {max}"),
        )?;
        *setting = value;
    }
    Ok(Value::Integer(i64::from(*setting)))
}

/// `json_enum_option`: sets `setting` from argument `i` when given — a boolean (true is
/// `bool_true`) or one of `options` — and answers it: a boolean for 0 and `bool_true`,
/// else the option's name.
fn enum_option(
    lua: &Lua,
    args: &Args,
    i: usize,
    setting: &mut i32,
    options: &[&str],
    bool_true: i32,
) -> Result<Value, Fail> {
    if !args.is_none_or_nil(i)? {
        match args.get(i)? {
            Some(Value::Boolean(b)) => *setting = i32::from(b) * bool_true,
            _ => *setting = args.check_option(lua, i, options)? as i32,
        }
    }
    if *setting == 0 || *setting == bool_true {
        Ok(Value::Boolean(*setting != 0))
    } else {
        let name = options.get(*setting as usize).copied().unwrap_or("");
        Ok(Value::String(lua.create_string(name)?))
    }
}

const ON_OFF: [&str; 2] = ["off", "on"];

fn encode_sparse_array(lua: &Lua, args: &Args, cfg: &Shared) -> Result<Ret, Fail> {
    arg_init(lua, args, 3)?;
    let mut c = *cfg.borrow();
    let convert = enum_option(lua, args, 1, &mut c.encode_sparse_convert, &ON_OFF, 1)?;
    *cfg.borrow_mut() = c;
    let ratio = integer_option(lua, args, 2, &mut c.encode_sparse_ratio, 0, i32::MAX)?;
    *cfg.borrow_mut() = c;
    let safe = integer_option(lua, args, 3, &mut c.encode_sparse_safe, 0, i32::MAX)?;
    *cfg.borrow_mut() = c;
    Ok(Ret::Values(vec![convert, ratio, safe]))
}

/// A configuration function of one integer setting in `min..=max`.
fn int_setting(
    lua: &Lua,
    args: &Args,
    cfg: &Shared,
    field: fn(&mut Config) -> &mut i32,
    min: i32,
    max: i32,
) -> Result<Ret, Fail> {
    arg_init(lua, args, 1)?;
    let mut c = *cfg.borrow();
    let v = integer_option(lua, args, 1, field(&mut c), min, max)?;
    *cfg.borrow_mut() = c;
    Ok(one(v))
}

fn encode_max_depth(lua: &Lua, args: &Args, cfg: &Shared) -> Result<Ret, Fail> {
    int_setting(lua, args, cfg, |c| &mut c.encode_max_depth, 1, i32::MAX)
}

fn decode_max_depth(lua: &Lua, args: &Args, cfg: &Shared) -> Result<Ret, Fail> {
    int_setting(lua, args, cfg, |c| &mut c.decode_max_depth, 1, i32::MAX)
}

fn encode_number_precision(lua: &Lua, args: &Args, cfg: &Shared) -> Result<Ret, Fail> {
    int_setting(lua, args, cfg, |c| &mut c.encode_number_precision, 1, 14)
}

/// A configuration function of one enumerated setting.
fn enum_setting(
    lua: &Lua,
    args: &Args,
    cfg: &Shared,
    field: fn(&mut Config) -> &mut i32,
    options: &[&str],
) -> Result<Ret, Fail> {
    arg_init(lua, args, 1)?;
    let mut c = *cfg.borrow();
    let v = enum_option(lua, args, 1, field(&mut c), options, 1)?;
    *cfg.borrow_mut() = c;
    Ok(one(v))
}

fn encode_keep_buffer(lua: &Lua, args: &Args, cfg: &Shared) -> Result<Ret, Fail> {
    enum_setting(lua, args, cfg, |c| &mut c.encode_keep_buffer, &ON_OFF)
}

fn encode_invalid_numbers(lua: &Lua, args: &Args, cfg: &Shared) -> Result<Ret, Fail> {
    let options = ["off", "on", "null"];
    enum_setting(lua, args, cfg, |c| &mut c.encode_invalid_numbers, &options)
}

fn decode_invalid_numbers(lua: &Lua, args: &Args, cfg: &Shared) -> Result<Ret, Fail> {
    enum_setting(lua, args, cfg, |c| &mut c.decode_invalid_numbers, &ON_OFF)
}

// ===== Encoding =====

/// How `json_append_string` escapes a byte, if it does.
fn escape(b: u8) -> Option<&'static [u8]> {
    const CONTROL: [&[u8]; 32] = [
        b"\\u0000", b"\\u0001", b"\\u0002", b"\\u0003", b"\\u0004", b"\\u0005", b"\\u0006",
        b"\\u0007", b"\\b", b"\\t", b"\\n", b"\\u000b", b"\\f", b"\\r", b"\\u000e", b"\\u000f",
        b"\\u0010", b"\\u0011", b"\\u0012", b"\\u0013", b"\\u0014", b"\\u0015", b"\\u0016",
        b"\\u0017", b"\\u0018", b"\\u0019", b"\\u001a", b"\\u001b", b"\\u001c", b"\\u001d",
        b"\\u001e", b"\\u001f",
    ];
    match b {
        0..=31 => Some(CONTROL[b as usize]),
        b'"' => Some(b"\\\""),
        b'/' => Some(b"\\/"),
        b'\\' => Some(b"\\\\"),
        127 => Some(b"\\u007f"),
        _ => None,
    }
}

fn append_string(out: &mut Vec<u8>, s: &[u8]) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    for &b in s {
        match escape(b) {
            Some(e) => out.extend_from_slice(e),
            None => out.push(b),
        }
    }
    out.push(b'"');
}

/// `json_encode_exception`.
fn exception(v: Option<&Value>, reason: &str) -> Fail {
    Fail::Where(format!("Cannot serialise {}: {reason}", type_name(v)))
}

/// `json_append_number`.
fn append_number(out: &mut Vec<u8>, cfg: &Config, n: f64) -> Result<(), Fail> {
    match cfg.encode_invalid_numbers {
        0 if !n.is_finite() => {
            return Err(exception(Some(&Value::Number(n)), "must not be NaN or Inf"));
        }
        1 if n.is_nan() => {
            out.extend_from_slice(b"nan");
            return Ok(());
        }
        0 | 1 => {}
        _ if !n.is_finite() => {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        _ => {}
    }
    fpconv::fmt_g(out, n, cfg.encode_number_precision as usize);
    Ok(())
}

/// A number value's double, if it is one.
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

/// `lua_array_length` over a table's entries (`kv`, from [`pairs_of`]): the array's
/// length, or -1 for an object (any key not an integer >= 1, or an excessively sparse
/// array when conversion is on; an error when it is off). As in C, the largest key is
/// kept in an `int`.
fn array_length(kv: &Table, n: usize, cfg: &Config) -> Result<i64, Fail> {
    let mut max: i32 = 0;
    let mut items: i32 = 0;
    for j in (1..=n).step_by(2) {
        let key = exact(kv, j)?;
        match number(&key) {
            Some(k) if k != 0.0 && k.floor() == k && k >= 1.0 => {
                if k > f64::from(max) {
                    max = c_to_i32(k);
                }
                items = items.wrapping_add(1);
            }
            _ => return Ok(-1),
        }
    }
    if cfg.encode_sparse_ratio > 0
        && max > items.wrapping_mul(cfg.encode_sparse_ratio)
        && max > cfg.encode_sparse_safe
    {
        if cfg.encode_sparse_convert == 0 {
            return Err(Fail::Where(
                "Cannot serialise table: excessively sparse array".into(),
            ));
        }
        return Ok(-1);
    }
    Ok(i64::from(max))
}

/// A table being written.
enum Walk {
    /// Elements 1..=len of the table; `next` is the next one.
    Array { len: i64, next: i64 },
    /// The entries (`kv` from [`pairs_of`], `n` slots); `next` is the next key's slot.
    Object { n: usize, next: usize },
}

/// A level of the walk: the table (the array, or the object's entries), parked when the
/// walk is deep; how it is walked; the height of Lua's stack in C's walk at the table.
struct Level {
    table: Option<Table>,
    walk: Walk,
    height: i64,
}

fn encode(lua: &Lua, args: &Args, cfg: &Shared) -> Result<Ret, Fail> {
    args.arg_check(lua, args.len() == 1, 1, "expected 1 argument")?;
    let cfg = *cfg.borrow();
    let value = args.value(1)?;
    let out = encode_value(lua, &cfg, value)?;
    Ok(one(Value::String(lua.create_string(&out)?)))
}

/// `json_append_data` on `value`, as a loop.
fn encode_value(lua: &Lua, cfg: &Config, value: Value) -> Result<Vec<u8>, Fail> {
    let mut out = Vec::new();
    let mut levels: Vec<Level> = Vec::new();
    let mut parking = Parking::new();
    // The value to write next, and the height of C's Lua stack with it on top.
    let mut pending = Some((value, 1i64));
    loop {
        if out.len() > MAX_OUTPUT {
            return Err(Fail::Plain("not enough memory".into()));
        }
        if let Some((v, height)) = pending.take() {
            match v {
                Value::Table(t) => {
                    let depth = levels.len() as i64 + 1;
                    // json_check_encode_depth: the depth, and lua_checkstack(l, 3).
                    if depth > i64::from(cfg.encode_max_depth) || height + 3 > MAX_C_STACK {
                        return Err(Fail::Where(format!(
                            "Cannot serialise, excessive nesting ({depth})"
                        )));
                    }
                    let (kv, n) = pairs_of(lua, &t)?;
                    let len = array_length(&kv, n, cfg)?;
                    let level = if len > 0 {
                        out.push(b'[');
                        Level {
                            table: Some(t),
                            walk: Walk::Array { len, next: 1 },
                            height,
                        }
                    } else {
                        out.push(b'{');
                        Level {
                            table: Some(kv),
                            walk: Walk::Object { n, next: 0 },
                            height,
                        }
                    };
                    levels.push(level);
                    let count = levels.len();
                    if count > Parking::HELD {
                        let at = count - 1 - Parking::HELD;
                        if let Some(t) = levels[at].table.take() {
                            parking.park(lua, at, Value::Table(t))?;
                        }
                    }
                }
                other => append_scalar(&mut out, cfg, &other)?,
            }
        }
        let depth = levels.len();
        let Some(level) = levels.last_mut() else {
            break;
        };
        let table = match &level.table {
            Some(t) => t.clone(),
            None => {
                let t = parking.unpark_table(depth - 1)?;
                level.table = Some(t.clone());
                t
            }
        };
        match &mut level.walk {
            Walk::Array { len, next } => {
                if *next > *len {
                    out.push(b']');
                    levels.pop();
                    continue;
                }
                if *next > 1 {
                    out.push(b',');
                }
                let v = match table.raw_get::<Value>(*next)? {
                    Value::Integer(0) => Value::Number(table.raw_get::<f64>(*next)?),
                    v => v,
                };
                *next += 1;
                pending = Some((v, level.height + 1));
            }
            Walk::Object { n, next } => {
                if *next >= *n {
                    out.push(b'}');
                    levels.pop();
                    continue;
                }
                if *next > 0 {
                    out.push(b',');
                }
                let key = exact(&table, *next + 1)?;
                match &key {
                    Value::String(s) => {
                        append_string(&mut out, &s.as_bytes());
                        out.push(b':');
                    }
                    k => match number(k) {
                        Some(k) => {
                            out.push(b'"');
                            append_number(&mut out, cfg, k)?;
                            out.extend_from_slice(b"\":");
                        }
                        None => {
                            return Err(exception(
                                Some(&key),
                                "table key must be a number or string",
                            ));
                        }
                    },
                }
                let v = exact(&table, *next + 2)?;
                *next += 2;
                pending = Some((v, level.height + 2));
            }
        }
    }
    Ok(out)
}

/// `json_append_data` for anything but a table.
fn append_scalar(out: &mut Vec<u8>, cfg: &Config, v: &Value) -> Result<(), Fail> {
    match v {
        Value::String(s) => append_string(out, &s.as_bytes()),
        Value::Integer(i) => append_number(out, cfg, *i as f64)?,
        Value::Number(n) => append_number(out, cfg, *n)?,
        Value::Boolean(true) => out.extend_from_slice(b"true"),
        Value::Boolean(false) => out.extend_from_slice(b"false"),
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        other => return Err(exception(Some(other), "type not supported")),
    }
    Ok(())
}

// ===== Decoding =====

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Number,
    Boolean,
    Null,
    Colon,
    Comma,
    End,
    Whitespace,
    Error,
    Unknown,
}

impl Tok {
    /// `json_token_type_name`.
    fn name(self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str => "T_STRING",
            Tok::Number => "T_NUMBER",
            Tok::Boolean => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Whitespace => "T_WHITESPACE",
            Tok::Error => "T_ERROR",
            Tok::Unknown => "T_UNKNOWN",
        }
    }

    /// `ch2token`.
    fn of(b: u8) -> Tok {
        match b {
            b'{' => Tok::ObjBegin,
            b'}' => Tok::ObjEnd,
            b'[' => Tok::ArrBegin,
            b']' => Tok::ArrEnd,
            b',' => Tok::Comma,
            b':' => Tok::Colon,
            0 => Tok::End,
            b' ' | b'\t' | b'\n' | b'\r' => Tok::Whitespace,
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'"' | b'+' | b'-' | b'0'..=b'9' => {
                Tok::Unknown
            }
            _ => Tok::Error,
        }
    }
}

/// A token: its type, where it starts (or where its error is), and its value.
struct Token {
    kind: Tok,
    index: usize,
    number: f64,
    boolean: bool,
    /// For an error token: what went wrong.
    error: &'static str,
}

/// The parser's state (`json_parse_t`): the text (read as NUL-terminated: bytes past the
/// end are NUL), the position, the string being decoded, the depth.
struct Parser<'a> {
    data: &'a [u8],
    ptr: usize,
    tmp: Vec<u8>,
    cfg: Config,
    depth: i64,
}

impl Parser<'_> {
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    fn token(&self, kind: Tok) -> Token {
        Token {
            kind,
            index: self.ptr,
            number: 0.0,
            boolean: false,
            error: "",
        }
    }

    fn error_token(&self, what: &'static str) -> Token {
        Token {
            kind: Tok::Error,
            index: self.ptr,
            number: 0.0,
            boolean: false,
            error: what,
        }
    }

    /// `json_is_invalid_number` at the position.
    fn is_invalid_number(&self) -> bool {
        let mut p = self.ptr;
        if self.at(p) == b'+' {
            return true;
        }
        if self.at(p) == b'-' {
            p += 1;
        }
        if self.at(p) == b'0' {
            let ch2 = self.at(p + 1);
            return (ch2 | 0x20) == b'x' || ch2.is_ascii_digit();
        } else if (self.at(p) as i8) <= b'9' as i8 {
            return false;
        }
        let starts = |word: &[u8]| (0..3).all(|k| self.at(p + k).to_ascii_lowercase() == word[k]);
        starts(b"inf") || starts(b"nan")
    }

    fn number_token(&mut self) -> Token {
        match fpconv::strtod(self.data, self.ptr) {
            Some((n, end)) => {
                let mut t = self.token(Tok::Number);
                t.number = n;
                self.ptr = end;
                t
            }
            None => self.error_token("invalid number"),
        }
    }

    fn matches(&self, word: &[u8]) -> bool {
        word.iter()
            .enumerate()
            .all(|(k, &b)| self.at(self.ptr + k) == b)
    }

    /// `json_next_token`.
    fn next_token(&mut self) -> Token {
        let mut kind;
        loop {
            kind = Tok::of(self.at(self.ptr));
            if kind != Tok::Whitespace {
                break;
            }
            self.ptr += 1;
        }
        match kind {
            Tok::Error => return self.error_token("invalid token"),
            Tok::End => return self.token(Tok::End),
            Tok::Unknown => {}
            _ => {
                let t = self.token(kind);
                self.ptr += 1;
                return t;
            }
        }
        let ch = self.at(self.ptr);
        if ch == b'"' {
            self.string_token()
        } else if ch == b'-' || ch.is_ascii_digit() {
            if self.cfg.decode_invalid_numbers == 0 && self.is_invalid_number() {
                return self.error_token("invalid number");
            }
            self.number_token()
        } else if self.matches(b"true") {
            let mut t = self.token(Tok::Boolean);
            t.boolean = true;
            self.ptr += 4;
            t
        } else if self.matches(b"false") {
            let t = self.token(Tok::Boolean);
            self.ptr += 5;
            t
        } else if self.matches(b"null") {
            let t = self.token(Tok::Null);
            self.ptr += 4;
            t
        } else if self.cfg.decode_invalid_numbers != 0 && self.is_invalid_number() {
            self.number_token()
        } else {
            self.error_token("invalid token")
        }
    }

    /// `decode_hex4` at `p`.
    fn hex4(&self, p: usize) -> Option<u32> {
        (0..4).try_fold(0u32, |acc, k| {
            (self.at(p + k) as char).to_digit(16).map(|d| acc << 4 | d)
        })
    }

    /// `json_append_unicode_escape`: `\uXXXX` (or a surrogate pair) at the position.
    fn unicode_escape(&mut self) -> bool {
        let Some(mut cp) = self.hex4(self.ptr + 2) else {
            return false;
        };
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 {
                return false;
            }
            if self.at(self.ptr + 6) != b'\\' || self.at(self.ptr + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.ptr + 8) else {
                return false;
            };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        if cp <= 0x7F {
            self.tmp.push(cp as u8);
        } else if cp <= 0x7FF {
            self.tmp.push((cp >> 6) as u8 | 0xC0);
            self.tmp.push((cp & 0x3F) as u8 | 0x80);
        } else if cp <= 0xFFFF {
            self.tmp.push((cp >> 12) as u8 | 0xE0);
            self.tmp.push(((cp >> 6) & 0x3F) as u8 | 0x80);
            self.tmp.push((cp & 0x3F) as u8 | 0x80);
        } else {
            self.tmp.push((cp >> 18) as u8 | 0xF0);
            self.tmp.push(((cp >> 12) & 0x3F) as u8 | 0x80);
            self.tmp.push(((cp >> 6) & 0x3F) as u8 | 0x80);
            self.tmp.push((cp & 0x3F) as u8 | 0x80);
        }
        self.ptr += len;
        true
    }

    /// `json_next_string_token`: the string goes to `tmp`.
    fn string_token(&mut self) -> Token {
        let start = self.ptr;
        self.ptr += 1;
        self.tmp.clear();
        loop {
            let ch = self.at(self.ptr);
            if ch == b'"' {
                break;
            }
            if ch == 0 {
                return self.error_token("unexpected end of string");
            }
            let mut out = ch;
            if ch == b'\\' {
                out = match self.at(self.ptr + 1) {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 8,
                    b't' => b'\t',
                    b'n' => b'\n',
                    b'f' => 12,
                    b'r' => b'\r',
                    b'u' => {
                        if self.unicode_escape() {
                            continue;
                        }
                        return self.error_token("invalid unicode escape code");
                    }
                    _ => return self.error_token("invalid escape code"),
                };
                self.ptr += 1;
            }
            self.tmp.push(out);
            self.ptr += 1;
        }
        self.ptr += 1;
        Token {
            kind: Tok::Str,
            index: start,
            number: 0.0,
            boolean: false,
            error: "",
        }
    }

    /// `json_throw_parse_error`.
    fn parse_error(&self, expected: &str, token: &Token) -> Fail {
        let found = if token.kind == Tok::Error {
            token.error
        } else {
            token.kind.name()
        };
        Fail::Where(format!(
            "Expected {expected} but found {found} at character {}",
            token.index + 1
        ))
    }

    /// `json_decode_descend`, with C's Lua stack at `height` and `slots` more needed.
    fn descend(&mut self, height: i64, slots: i64) -> Result<(), Fail> {
        self.depth += 1;
        if self.depth <= i64::from(self.cfg.decode_max_depth) && height + slots <= MAX_C_STACK {
            return Ok(());
        }
        Err(Fail::Where(format!(
            "Found too many nested data structures ({}) at character {}",
            self.depth, self.ptr
        )))
    }
}

/// A container being decoded.
enum Open {
    /// The next element's index.
    Array(i64),
    /// The key whose value is being decoded.
    Object(Vec<u8>),
}

fn decode(lua: &Lua, args: &Args, cfg: &Shared) -> Result<Ret, Fail> {
    args.arg_check(lua, args.len() == 1, 1, "expected 1 argument")?;
    let cfg = *cfg.borrow();
    let text = args.check_string(lua, 1)?;
    let data = text.as_bytes();
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return Err(Fail::Where(
            "JSON parser does not support UTF-16 or UTF-32".into(),
        ));
    }
    let mut parser = Parser {
        data: &data,
        ptr: 0,
        tmp: Vec::new(),
        cfg,
        depth: 0,
    };
    let value = decode_value(lua, &mut parser)?;
    Ok(one(value))
}

/// `json_process_value` and the contexts, as a loop.
fn decode_value(lua: &Lua, p: &mut Parser<'_>) -> Result<Value, Fail> {
    // Open containers: their tables (the innermost held, outer ones parked) and states.
    let mut open: Vec<(Option<Table>, Open)> = Vec::new();
    let mut parking = Parking::new();
    // The height of C's Lua stack: the argument, and per open array its table, per open
    // object its table and the key.
    let mut height: i64 = 1;
    let mut token = p.next_token();
    'value: loop {
        let mut value = match token.kind {
            Tok::Str => Value::String(lua.create_string(&p.tmp)?),
            Tok::Number => Value::Number(token.number),
            Tok::Boolean => Value::Boolean(token.boolean),
            Tok::Null => null(),
            Tok::ObjBegin | Tok::ArrBegin => {
                let object = token.kind == Tok::ObjBegin;
                p.descend(height, if object { 3 } else { 2 })?;
                let table = lua.create_table()?;
                token = p.next_token();
                let end = if object { Tok::ObjEnd } else { Tok::ArrEnd };
                if token.kind == end {
                    p.depth -= 1;
                    Value::Table(table)
                } else {
                    let state = if object {
                        let key = object_key(p, &token)?;
                        token = p.next_token();
                        height += 2;
                        Open::Object(key)
                    } else {
                        height += 1;
                        Open::Array(1)
                    };
                    open.push((Some(table), state));
                    let count = open.len();
                    if count > Parking::HELD {
                        let at = count - 1 - Parking::HELD;
                        if let Some(t) = open[at].0.take() {
                            parking.park(lua, at, Value::Table(t))?;
                        }
                    }
                    continue 'value;
                }
            }
            _ => return Err(p.parse_error("value", &token)),
        };
        // Give the value to its container; close containers that end.
        loop {
            let depth = open.len();
            let Some((slot, state)) = open.last_mut() else {
                let end = p.next_token();
                if end.kind != Tok::End {
                    return Err(p.parse_error("the end", &end));
                }
                return Ok(value);
            };
            let table = match slot {
                Some(t) => t.clone(),
                None => {
                    let t = parking.unpark_table(depth - 1)?;
                    *slot = Some(t.clone());
                    t
                }
            };
            let (end, what) = match state {
                Open::Array(i) => {
                    table.raw_set(*i, value)?;
                    *i += 1;
                    (Tok::ArrEnd, "comma or array end")
                }
                Open::Object(key) => {
                    table.raw_set(lua.create_string(&*key)?, value)?;
                    (Tok::ObjEnd, "comma or object end")
                }
            };
            let next = p.next_token();
            if next.kind == end {
                height -= if end == Tok::ObjEnd { 2 } else { 1 };
                p.depth -= 1;
                open.pop();
                value = Value::Table(table);
                continue;
            }
            if next.kind != Tok::Comma {
                return Err(p.parse_error(what, &next));
            }
            token = p.next_token();
            if let Open::Object(key) = state {
                *key = object_key(p, &token)?;
                token = p.next_token();
            }
            continue 'value;
        }
    }
}

/// An object's key at `token`, then its colon: the key's bytes.
fn object_key(p: &mut Parser<'_>, token: &Token) -> Result<Vec<u8>, Fail> {
    if token.kind != Tok::Str {
        return Err(p.parse_error("object key string", token));
    }
    let key = std::mem::take(&mut p.tmp);
    let colon = p.next_token();
    if colon.kind != Tok::Colon {
        return Err(p.parse_error("colon", &colon));
    }
    Ok(key)
}

#[cfg(test)]
pub(crate) mod tests;
