//! The `cmsgpack` library of Redis's Lua (its `deps/lua/src/lua_cmsgpack.c`,
//! lua-cmsgpack 0.4.0), byte for byte: `pack` (its arguments' encodings concatenated),
//! `unpack`, `unpack_one` and `unpack_limit`, with the same encodings (a double as a
//! float when that loses nothing, integers in the smallest form, a table as an array
//! when its keys are exactly 1..n), the same errors, and the same limits: tables nested
//! 16 deep pack as nil, and unpacking stops where Lua's C stack (8000 slots per C call)
//! would overflow, as Redis's does.

use mlua::{Lua, Table, Value};

use super::cjson::api::{self, Args, Fail, Parking, Ret, c_to_i32, c_to_i64, exact, one, pairs_of};

/// `LUACMSGPACK_MAX_NESTING`: tables this deep pack as nil.
const MAX_NESTING: usize = 16;

/// Lua's `LUAI_MAXCSTACK`.
const MAX_C_STACK: i64 = 8000;

/// The most bytes a packing may reach (self-referencing tables grow exponentially up to
/// the nesting limit): beyond, the script gets Lua's memory error.
const MAX_OUTPUT: usize = 1 << 30;

/// Opens the library: the global table `cmsgpack`.
pub fn open(lua: &Lua) -> mlua::Result<()> {
    let globals = lua.globals();
    let table = match globals.raw_get::<Value>("cmsgpack")? {
        Value::Table(t) => t,
        _ => {
            let t = lua.create_table()?;
            globals.raw_set("cmsgpack", &t)?;
            t
        }
    };
    type Handler = fn(&Lua, &Args) -> Result<Ret, Fail>;
    let funcs: [(&'static str, Handler); 4] = [
        ("pack", pack),
        ("unpack", unpack),
        ("unpack_one", unpack_one),
        ("unpack_limit", unpack_limit),
    ];
    for (name, handler) in funcs {
        table.raw_set(name, api::function(lua, name, handler)?)?;
    }
    table.raw_set("_NAME", "cmsgpack")?;
    table.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    table.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    table.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(())
}

// ===== Packing =====

fn pack(lua: &Lua, args: &Args) -> Result<Ret, Fail> {
    let n = args.len();
    if n == 0 {
        return Err(args.arg_error(lua, 0, "MessagePack pack needs input."));
    }
    // lua_checkstack(L, nargs), with the arguments on the stack.
    if 2 * n as i64 > MAX_C_STACK {
        return Err(args.arg_error(lua, 0, "Too many arguments for MessagePack pack."));
    }
    let mut out = Vec::new();
    for i in 1..=n {
        let v = args.value(i)?;
        encode(lua, &mut out, &v, 0)?;
    }
    Ok(one(Value::String(lua.create_string(&out)?)))
}

/// `mp_encode_lua_type`: `v` at nesting `level` (tables are only 16 deep, so this
/// recursion is bounded).
fn encode(lua: &Lua, out: &mut Vec<u8>, v: &Value, level: usize) -> Result<(), Fail> {
    if out.len() > MAX_OUTPUT {
        return Err(Fail::Plain("not enough memory".into()));
    }
    match v {
        Value::String(s) => encode_bytes(out, &s.as_bytes()),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_int(out, *i),
        Value::Number(n) => encode_number(out, *n),
        Value::Table(t) if level < MAX_NESTING => encode_table(lua, out, t, level)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

/// `mp_encode_lua_number`: an integer when the double is one that fits 64 bits.
fn encode_number(out: &mut Vec<u8>, n: f64) {
    let i = c_to_i64(n);
    if !n.is_infinite() && i as f64 == n {
        encode_int(out, i);
    } else {
        encode_double(out, n);
    }
}

/// `mp_encode_double`: a float when converting to one and back gives the same double.
fn encode_double(out: &mut Vec<u8>, d: f64) {
    let f = d as f32;
    if f64::from(f) == d {
        out.push(0xca);
        out.extend_from_slice(&f.to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&d.to_be_bytes());
    }
}

/// `mp_encode_int`.
fn encode_int(out: &mut Vec<u8>, n: i64) {
    let b = n.to_be_bytes();
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&b[6..]);
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&b[4..]);
        } else {
            out.push(0xcf);
            out.extend_from_slice(&b);
        }
    } else if n >= -32 {
        out.push(n as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&b[6..]);
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&b[4..]);
    } else {
        out.push(0xd3);
        out.extend_from_slice(&b);
    }
}

/// `mp_encode_bytes`: fixstr, str8, str16 or str32 (the length's low 32 bits).
fn encode_bytes(out: &mut Vec<u8>, s: &[u8]) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

/// An array or map header: fix (up to 15), 16-bit or 32-bit.
fn encode_header(out: &mut Vec<u8>, n: u64, fix: u8, wide: u8) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(wide);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(wide + 1);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// `mp_encode_lua_table`: an array when `table_is_an_array`, else a map.
fn encode_table(lua: &Lua, out: &mut Vec<u8>, t: &Table, level: usize) -> Result<(), Fail> {
    let (kv, n) = pairs_of(lua, t)?;
    // table_is_an_array: every key a number that is an int > 0, the largest = the count.
    let mut count: i32 = 0;
    let mut max: i32 = 0;
    let mut array = true;
    for j in (1..=n).step_by(2) {
        let k = match exact(&kv, j)? {
            Value::Integer(i) => i as f64,
            Value::Number(f) => f,
            _ => {
                array = false;
                break;
            }
        };
        let as_int = c_to_i32(k);
        if k <= 0.0 || k.is_infinite() || f64::from(as_int) != k {
            array = false;
            break;
        }
        if f64::from(max) < k {
            max = as_int;
        }
        count = count.wrapping_add(1);
    }
    if array && max == count {
        let len = t.raw_len();
        encode_header(out, len as u64, 0x90, 0xdc);
        for j in 1..=len {
            let v = match t.get::<Value>(j)? {
                Value::Integer(0) => Value::Number(t.raw_get::<f64>(j)?),
                v => v,
            };
            encode(lua, out, &v, level + 1)?;
        }
    } else {
        encode_header(out, (n / 2) as u64, 0x80, 0xde);
        for j in (1..=n).step_by(2) {
            encode(lua, out, &exact(&kv, j)?, level + 1)?;
            encode(lua, out, &exact(&kv, j + 1)?, level + 1)?;
        }
    }
    Ok(())
}

// ===== Unpacking =====

fn unpack(lua: &Lua, args: &Args) -> Result<Ret, Fail> {
    // mp_unpack leaves its arguments on the stack.
    unpack_full(lua, args, 0, 0, args.len() as i64)
}

fn unpack_one(lua: &Lua, args: &Args) -> Result<Ret, Fail> {
    let offset = args.opt_integer(lua, 2, 0)?;
    unpack_full(lua, args, 1, offset, 1)
}

fn unpack_limit(lua: &Lua, args: &Args) -> Result<Ret, Fail> {
    let limit = args.check_integer(lua, 2)?;
    let offset = args.opt_integer(lua, 3, 0)?;
    unpack_full(lua, args, limit, offset, 1)
}

/// Why decoding stopped.
enum Stop {
    /// `MP_CUR_ERROR_EOF`.
    Eof,
    /// `MP_CUR_ERROR_BADFMT`.
    BadFormat,
    /// An error raised on the spot (a stack check, a nil or NaN table index).
    Raise(Fail),
}

impl From<mlua::Error> for Stop {
    fn from(e: mlua::Error) -> Self {
        Stop::Raise(Fail::Lua(e))
    }
}

/// `mp_unpack_full`: up to `limit` values from `offset` (all of them when both are 0),
/// with C's Lua stack at `height`; unless decoding all, the next offset (-1 at the end)
/// comes first.
fn unpack_full(lua: &Lua, args: &Args, limit: i64, offset: i64, height: i64) -> Result<Ret, Fail> {
    let s = args.check_string(lua, 1)?;
    let data = s.as_bytes();
    let len = data.len();
    if offset < 0 || limit < 0 {
        return Err(Fail::Where(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32, len as i32
        )));
    } else if offset as u64 > len as u64 {
        return Err(Fail::Where(format!(
            "Start offset {} greater than input length {}.",
            offset as i32, len as i32
        )));
    }
    let decode_all = limit == 0 && offset == 0;
    let limit = if decode_all {
        i64::from(i32::MAX)
    } else {
        limit
    };
    let results = lua.create_table()?;
    let first = if decode_all { 1 } else { 2 };
    let mut pos = offset as usize;
    let mut count: i64 = 0;
    while pos < len && count < limit {
        match decode(lua, &data, &mut pos, height + count) {
            Ok(v) => results.raw_set(first + count, v)?,
            Err(Stop::Eof) => return Err(Fail::Where("Missing bytes in input.".into())),
            Err(Stop::BadFormat) => return Err(Fail::Where("Bad data format in input.".into())),
            Err(Stop::Raise(f)) => return Err(f),
        }
        count += 1;
    }
    if decode_all {
        return Ok(Ret::Table(results, count as usize));
    }
    if height + count + 1 > MAX_C_STACK {
        return Err(Fail::Where(
            "stack overflow (in function mp_unpack_full)".into(),
        ));
    }
    let next = if pos >= len { -1 } else { pos as i64 };
    results.raw_set(1, next)?;
    Ok(Ret::Table(results, count as usize + 1))
}

/// A container being decoded: its table (parked when deep), what is left, the height of
/// C's Lua stack at it.
struct Level {
    table: Option<Table>,
    kind: Kind,
    left: u64,
    height: i64,
}

enum Kind {
    /// The next element's index.
    Array(i64),
    /// The decoded key waiting for its value, if any (parked with the table when deep).
    Map(Option<Value>),
}

/// Big-endian bytes `data[at..at + n]` as a number (the caller checked they exist).
fn be(data: &[u8], at: usize, n: usize) -> u64 {
    data[at..at + n]
        .iter()
        .fold(0u64, |acc, &b| acc << 8 | u64::from(b))
}

/// `mp_decode_to_lua_type` at `data[*pos..]`, with C's Lua stack at `height`, as a loop.
fn decode(lua: &Lua, data: &[u8], pos: &mut usize, height: i64) -> Result<Value, Stop> {
    let mut levels: Vec<Level> = Vec::new();
    let mut tables = Parking::new();
    let mut keys = Parking::new();
    let mut h = height;
    loop {
        // One value at height h.
        let left = data.len() - *pos;
        if left < 1 {
            return Err(Stop::Eof);
        }
        if h + 1 > MAX_C_STACK {
            return Err(Stop::Raise(Fail::Where(
                "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)"
                    .into(),
            )));
        }
        let need = |n: usize| if left < n { Err(Stop::Eof) } else { Ok(()) };
        let p = *pos;
        let c = data[p];
        let mut open: Option<(bool, u64, usize)> = None; // (is_array, count, header length)
        let mut value = Value::Nil;
        match c {
            0xcc..=0xcf => {
                let n = 1usize << (c - 0xcc);
                need(1 + n)?;
                value = Value::Integer(be(data, p + 1, n) as i64);
                *pos += 1 + n;
            }
            0xd0..=0xd3 => {
                let n = 1usize << (c - 0xd0);
                need(1 + n)?;
                let raw = be(data, p + 1, n);
                let shift = 64 - 8 * n as u32;
                let signed = ((raw << shift) as i64) >> shift;
                value = if n == 8 {
                    Value::Number(signed as f64)
                } else {
                    Value::Integer(signed)
                };
                *pos += 1 + n;
            }
            0xc0 => *pos += 1,
            0xc2 | 0xc3 => {
                value = Value::Boolean(c == 0xc3);
                *pos += 1;
            }
            0xca => {
                need(5)?;
                let f = f32::from_bits(be(data, p + 1, 4) as u32);
                value = Value::Number(f64::from(f));
                *pos += 5;
            }
            0xcb => {
                need(9)?;
                value = Value::Number(f64::from_bits(be(data, p + 1, 8)));
                *pos += 9;
            }
            0xd9..=0xdb => {
                let n = 1usize << (c - 0xd9);
                need(1 + n)?;
                let l = be(data, p + 1, n) as usize;
                if left - 1 - n < l {
                    return Err(Stop::Eof);
                }
                let start = p + 1 + n;
                value = Value::String(lua.create_string(&data[start..start + l])?);
                *pos = start + l;
            }
            0xdc..=0xdf => {
                let n = if c & 1 == 0 { 2 } else { 4 };
                need(1 + n)?;
                open = Some((c <= 0xdd, be(data, p + 1, n), 1 + n));
            }
            _ if c & 0x80 == 0 => {
                value = Value::Integer(i64::from(c));
                *pos += 1;
            }
            _ if c & 0xe0 == 0xe0 => {
                value = Value::Integer(i64::from(c as i8));
                *pos += 1;
            }
            _ if c & 0xe0 == 0xa0 => {
                let l = usize::from(c & 0x1f);
                need(1 + l)?;
                value = Value::String(lua.create_string(&data[p + 1..p + 1 + l])?);
                *pos += 1 + l;
            }
            _ if c & 0xf0 == 0x90 => open = Some((true, u64::from(c & 0xf), 1)),
            _ if c & 0xf0 == 0x80 => open = Some((false, u64::from(c & 0xf), 1)),
            _ => return Err(Stop::BadFormat),
        }
        if let Some((is_array, count, header)) = open {
            *pos += header;
            let table = lua.create_table()?;
            if is_array && h + 2 > MAX_C_STACK {
                return Err(Stop::Raise(Fail::Where(
                    "stack overflow (in function mp_decode_to_lua_array)".into(),
                )));
            }
            if count == 0 {
                value = Value::Table(table);
            } else {
                let kind = if is_array {
                    Kind::Array(1)
                } else {
                    Kind::Map(None)
                };
                levels.push(Level {
                    table: Some(table),
                    kind,
                    left: count,
                    height: h,
                });
                let n = levels.len();
                if n > Parking::HELD {
                    let at = n - 1 - Parking::HELD;
                    if let Some(t) = levels[at].table.take() {
                        tables.park(lua, at, Value::Table(t))?;
                        if let Kind::Map(key) = &mut levels[at].kind
                            && let Some(k) = key.take()
                        {
                            keys.park(lua, at, k)?;
                            *key = Some(Value::Boolean(false));
                        }
                    }
                }
                h += 2;
                if !is_array {
                    h -= 1;
                }
                continue;
            }
        }
        // Give the value to its container; close the containers that are full.
        loop {
            let depth = levels.len();
            let Some(level) = levels.last_mut() else {
                return Ok(value);
            };
            let table = match &level.table {
                Some(t) => t.clone(),
                None => {
                    let t = tables.unpark_table(depth - 1)?;
                    level.table = Some(t.clone());
                    if let Kind::Map(Some(_)) = level.kind {
                        level.kind = Kind::Map(Some(keys.unpark(depth - 1)?));
                    }
                    t
                }
            };
            match &mut level.kind {
                Kind::Array(i) => {
                    table.raw_set(*i, value)?;
                    *i += 1;
                }
                Kind::Map(key) => match key.take() {
                    None => {
                        *key = Some(value);
                        h = level.height + 2;
                        break;
                    }
                    Some(k) => {
                        match &k {
                            Value::Nil => {
                                return Err(Stop::Raise(Fail::Plain("table index is nil".into())));
                            }
                            Value::Number(n) if n.is_nan() => {
                                return Err(Stop::Raise(Fail::Plain("table index is NaN".into())));
                            }
                            _ => {}
                        }
                        table.raw_set(k, value)?;
                    }
                },
            }
            level.left -= 1;
            if level.left == 0 {
                levels.pop();
                value = Value::Table(table);
                continue;
            }
            h = level.height
                + if matches!(level.kind, Kind::Array(_)) {
                    2
                } else {
                    1
                };
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    //! The library against redis-server 7.0.15: each case is a script and the reply
    //! redis-server gave to `EVAL <script> 0` (see `cjson::tests`).

    /// Packing, unpacking, the limits and every error, as redis-server 7.0.15 answered.
    #[test]
    fn cmsgpack_matches_redis() {
        super::super::cjson::tests::check(CASES);
    }

    const CASES: &[(&str, char, &[u8])] = &[
    (
        r##"return (cmsgpack.pack(0, 1, 127, 128, 255, 256, 65535, 65536, 2^32-1, 2^32, 2^53, 2^63, 2^64))"##,
        'S',
        b"\x00\x01\x7f\xcc\x80\xcc\xff\xcd\x01\x00\xcd\xff\xff\xce\x00\x01\x00\x00\xce\xff\xff\xff\xff\xcf\x00\x00\x00\x01\x00\x00\x00\x00\xcf\x00 \x00\x00\x00\x00\x00\x00\xca_\x00\x00\x00\xca_\x80\x00\x00",
    ),
    (
        r##"return (cmsgpack.pack(-1, -32, -33, -128, -129, -32768, -32769, -2^31, -2^31-1, -2^53, -2^63, -2^64))"##,
        'S',
        b"\xff\xe0\xd0\xdf\xd0\x80\xd1\xff\x7f\xd1\x80\x00\xd2\xff\xff\x7f\xff\xd2\x80\x00\x00\x00\xd3\xff\xff\xff\xff\x7f\xff\xff\xff\xd3\xff\xe0\x00\x00\x00\x00\x00\x00\xd3\x80\x00\x00\x00\x00\x00\x00\x00\xca\xdf\x80\x00\x00",
    ),
    (
        r##"return (cmsgpack.pack(0.5, 1.1, -2.25, 1e300, 1e-300, 3.4028234663852886e38, 3.4028235677973366e38, 1/0, -1/0, 0/0, -0))"##,
        'S',
        b"\xca?\x00\x00\x00\xcb?\xf1\x99\x99\x99\x99\x99\x9a\xca\xc0\x10\x00\x00\xcb~7\xe4<\x88\x00u\x9c\xcb\x01\xa5n\x1f\xc2\xf8\xf3Y\xca\x7f\x7f\xff\xff\xcbG\xef\xff\xff\xf0\x00\x00\x00\xca\x7f\x80\x00\x00\xca\xff\x80\x00\x00\xcb\xff\xf8\x00\x00\x00\x00\x00\x00\x00",
    ),
    (
        r##"return (cmsgpack.pack(true, false, nil, cjson.null, {}, {1, 2}, {a=1}, {[1]=1, [3]=3}, coroutine.create(function() end)))"##,
        'S',
        b"\xc3\xc2\xc0\xc0\x90\x92\x01\x02\x81\xa1a\x01\x82\x01\x01\x03\x03\xc0",
    ),
    (
        r##"return (cmsgpack.pack('', 'a', string.rep('x', 31), string.rep('y', 32)))"##,
        'S',
        b"\xa0\xa1a\xbfxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\xd9 yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy",
    ),
    (
        r##"return cmsgpack.pack(string.rep('a', 255)):sub(1, 4) .. #cmsgpack.pack(string.rep('a', 255))"##,
        'S',
        b"\xd9\xffaa257",
    ),
    (
        r##"return cmsgpack.pack(string.rep('a', 256)):sub(1, 4) .. #cmsgpack.pack(string.rep('a', 256))"##,
        'S',
        b"\xda\x01\x00a259",
    ),
    (
        r##"return cmsgpack.pack(string.rep('a', 65535)):sub(1, 4) .. #cmsgpack.pack(string.rep('a', 65535))"##,
        'S',
        b"\xda\xff\xffa65538",
    ),
    (
        r##"return cmsgpack.pack(string.rep('a', 65536)):sub(1, 6) .. #cmsgpack.pack(string.rep('a', 65536))"##,
        'S',
        b"\xdb\x00\x01\x00\x00a65541",
    ),
    (
        r##"local t = {} for i = 1, 15 do t[i] = i end return (cmsgpack.pack(t))"##,
        'S',
        b"\x9f\x01\x02\x03\x04\x05\x06\x07\x08\x09\n\x0b\x0c\x0d\x0e\x0f",
    ),
    (
        r##"local t = {} for i = 1, 16 do t[i] = i end return (cmsgpack.pack(t))"##,
        'S',
        b"\xdc\x00\x10\x01\x02\x03\x04\x05\x06\x07\x08\x09\n\x0b\x0c\x0d\x0e\x0f\x10",
    ),
    (
        r##"local t = {} for i = 1, 65535 do t[i] = 0 end return cmsgpack.pack(t):sub(1, 4)"##,
        'S',
        b"\xdc\xff\xff\x00",
    ),
    (
        r##"local t = {} for i = 1, 65536 do t[i] = 0 end return cmsgpack.pack(t):sub(1, 6)"##,
        'S',
        b"\xdd\x00\x01\x00\x00\x00",
    ),
    (
        r##"local t = {} for i = 1, 15 do t['k' .. i] = i end return (cmsgpack.pack(t))"##,
        'S',
        b"\x8f\xa3k12\x0c\xa2k9\x09\xa2k8\x08\xa2k1\x01\xa3k15\x0f\xa2k3\x03\xa2k2\x02\xa3k14\x0e\xa3k13\x0d\xa3k10\n\xa3k11\x0b\xa2k6\x06\xa2k7\x07\xa2k4\x04\xa2k5\x05",
    ),
    (
        r##"local t = {} for i = 1, 16 do t['k' .. i] = i end return (cmsgpack.pack(t))"##,
        'S',
        b"\xde\x00\x10\xa3k12\x0c\xa3k16\x10\xa2k9\x09\xa2k8\x08\xa2k1\x01\xa3k15\x0f\xa2k3\x03\xa2k2\x02\xa3k14\x0e\xa3k13\x0d\xa3k10\n\xa3k11\x0b\xa2k6\x06\xa2k7\x07\xa2k4\x04\xa2k5\x05",
    ),
    (
        r##"local t = {} for i = 1, 65536 do t['k' .. i] = 0 end return cmsgpack.pack(t):sub(1, 6)"##,
        'S',
        b"\xdf\x00\x01\x00\x00\xa6",
    ),
    (
        r##"return (cmsgpack.pack({[1.5]=1}, {[0]=1}, {[-1]=2}, {[2^31]=1}, {[2^32+1]=7}, {[1]=1, [2]=2, x=3}))"##,
        'S',
        b"\x81\xca?\xc0\x00\x00\x01\x81\x00\x01\x81\xff\x02\x81\xce\x80\x00\x00\x00\x01\x81\xcf\x00\x00\x00\x01\x00\x00\x00\x01\x07\x83\x01\x01\x02\x02\xa1x\x03",
    ),
    (
        r##"local t = {} t[1] = t return (cmsgpack.pack(t))"##,
        'S',
        b"\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\xc0",
    ),
    (
        r##"local t = {} t.a = t return (cmsgpack.pack(t))"##,
        'S',
        b"\x81\xa1a\x81\xa1a\x81\xa1a\x81\xa1a\x81\xa1a\x81\xa1a\x81\xa1a\x81\xa1a\x81\xa1a\x81\xa1a\x81\xa1a\x81\xa1a\x81\xa1a\x81\xa1a\x81\xa1a\x81\xa1a\xc0",
    ),
    (
        r##"local t = 1 for i = 1, 18 do t = {t} end return (cmsgpack.pack(t))"##,
        'S',
        b"\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\xc0",
    ),
    (
        r##"return (cmsgpack.pack({[{}] = {}, [true] = false}))"##,
        'S',
        b"\x82\x90\x90\xc3\xc2",
    ),
    (
        r##"return (cmsgpack.pack())"##,
        'E',
        b"user_script:1: bad argument #0 to 'pack' (MessagePack pack needs input.)",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.pack) return e"##,
        'S',
        b"bad argument #0 to '?' (MessagePack pack needs input.)",
    ),
    (
        r##"local ok, e = pcall(function() local x = cmsgpack.pack() return x end) return e"##,
        'S',
        b"user_script:1: bad argument #0 to 'pack' (MessagePack pack needs input.)",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.pack, unpack({}, 1, 4001)) return e"##,
        'S',
        b"bad argument #0 to '?' (Too many arguments for MessagePack pack.)",
    ),
    (
        r##"return #cmsgpack.pack(unpack({}, 1, 4000))"##,
        'I',
        b"4000",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack(cmsgpack.pack(0, 1, 127, 128, 255, 256, 65535, 65536, 2^32-1, 2^32, 2^53))}))"##,
        'S',
        b"[0,1,127,128,255,256,65535,65536,4294967295,4294967296,9.007199254741e+15]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack(cmsgpack.pack(-1, -32, -33, -128, -129, -32768, -32769, -2^31, -2^31-1, -2^53))}))"##,
        'S',
        b"[-1,-32,-33,-128,-129,-32768,-32769,-2147483648,-2147483649,-9.007199254741e+15]",
    ),
    (
        r##"local t = {cmsgpack.unpack(cmsgpack.pack(0.5, 1.1, -2.25, 1e300, 1e-300, 1/0, -1/0, -0, 2^63, -2^63))} local r = {} for i = 1, #t do r[i] = string.format('%.17g', t[i]) end return table.concat(r, ' ')"##,
        'S',
        b"0.5 1.1000000000000001 -2.25 1.0000000000000001e+300 1e-300 inf -inf 0 9.2233720368547758e+18 -9.2233720368547758e+18",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack(cmsgpack.pack(true, false, 'abc', {1, 2, {3}}, {a = {b = 'c'}}))}))"##,
        'S',
        b"[true,false,\"abc\",[1,2,[3]],{\"a\":{\"b\":\"c\"}}]",
    ),
    (
        r##"local t = {cmsgpack.unpack(cmsgpack.pack(1, nil, 3))} return select('#', cmsgpack.unpack(cmsgpack.pack(1, nil, 3))) .. tostring(t[2])"##,
        'S',
        b"3nil",
    ),
    (
        r##"local s = cmsgpack.pack(string.rep('a', 31), string.rep('b', 32), string.rep('c', 255), string.rep('d', 256), string.rep('e', 65535), string.rep('f', 65536)) local t = {cmsgpack.unpack(s)} return #s .. ' ' .. #t[1] .. #t[2] .. #t[3] .. #t[4] .. #t[5] .. #t[6]"##,
        'S',
        b"131661 31322552566553565536",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack('\204\255\205\255\255\206\255\255\255\255\207\0\0\0\1\0\0\0\0')}))"##,
        'S',
        b"[255,65535,4294967295,4294967296]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack('\208\128\209\128\0\210\128\0\0\0\211\255\255\255\255\255\255\255\255')}))"##,
        'S',
        b"[-128,-32768,-2147483648,-1]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack('\207\255\255\255\255\255\255\255\255\207\128\0\0\0\0\0\0\0\211\128\0\0\0\0\0\0\1')}))"##,
        'S',
        b"[-1,-9.2233720368548e+18,-9.2233720368548e+18]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack('\127\224\255\0')}))"##,
        'S',
        b"[127,-32,-1,0]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack('\202\63\192\0\0\203\63\248\0\0\0\0\0\0')}))"##,
        'S',
        b"[1.5,1.5]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack('\217\3abc\218\0\2de\219\0\0\0\1f\163ghi\160')}))"##,
        'S',
        b"[\"abc\",\"de\",\"f\",\"ghi\",\"\"]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack('\220\0\2\1\2\221\0\0\0\1\3\222\0\1\161a\1\223\0\0\0\1\161b\2\146\1\2\130\161c\1\161d\2\144\128')}))"##,
        'S',
        b"[[1,2],[3],{\"a\":1},{\"b\":2},[1,2],{\"c\":1,\"d\":2},{},{}]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack('\192\194\195')}))"##,
        'S',
        b"[null,false,true]",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, '\193') return e"##,
        'S',
        b"Bad data format in input.",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, '\196\1a') return e"##,
        'S',
        b"Bad data format in input.",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, '\212\1\1') return e"##,
        'S',
        b"Bad data format in input.",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, '\145') return e"##,
        'S',
        b"Missing bytes in input.",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, '\146\1') return e"##,
        'S',
        b"Missing bytes in input.",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, '\129\1') return e"##,
        'S',
        b"Missing bytes in input.",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, '\205\1') return e"##,
        'S',
        b"Missing bytes in input.",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, '\217\5abc') return e"##,
        'S',
        b"Missing bytes in input.",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, '\219\255\255\255\255abc') return e"##,
        'S',
        b"Missing bytes in input.",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, '\221\255\255\255\255\1\2') return e"##,
        'S',
        b"Missing bytes in input.",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, '\165ab') return e"##,
        'S',
        b"Missing bytes in input.",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, '\1\2\193') return e"##,
        'S',
        b"Bad data format in input.",
    ),
    (
        r##"return select('#', cmsgpack.unpack(''))"##,
        'I',
        b"0",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, '\129\192\1') return e"##,
        'S',
        b"table index is nil",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, '\129\203\255\248\0\0\0\0\0\0\1') return e"##,
        'S',
        b"table index is NaN",
    ),
    (
        r##"local x = cmsgpack.unpack('\129\192\1') return x"##,
        'E',
        b"table index is nil",
    ),
    (
        r##"local x = cmsgpack.unpack('\193') return x"##,
        'E',
        b"user_script:1: Bad data format in input.",
    ),
    (
        r##"local x = cmsgpack.unpack('\145') return x"##,
        'E',
        b"user_script:1: Missing bytes in input.",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack(12)}))"##,
        'S',
        b"[49,50]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack('\1', 'x', {})}))"##,
        'S',
        b"[1]",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack) return e"##,
        'S',
        b"bad argument #1 to '?' (string expected, got no value)",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, {}) return e"##,
        'S',
        b"bad argument #1 to '?' (string expected, got table)",
    ),
    (
        r##"local ok, e = pcall(function() local x = cmsgpack.unpack() return x end) return e"##,
        'S',
        b"user_script:1: bad argument #1 to 'unpack' (string expected, got no value)",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack_one('\1\2\3')}))"##,
        'S',
        b"[1,1]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack_one('\1\2\3', 1)}))"##,
        'S',
        b"[2,2]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack_one('\1\2\3', 2)}))"##,
        'S',
        b"[-1,3]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack_one('\1\2\3', 3)}))"##,
        'S',
        b"[-1]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack_one('\1\2\3', '1')}))"##,
        'S',
        b"[2,2]",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack_one, '\1\2', 3) return e"##,
        'S',
        b"Start offset 3 greater than input length 2.",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack_one, '\1\2', 4) return e"##,
        'S',
        b"Start offset 4 greater than input length 2.",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack_one, '\1\2', -1) return e"##,
        'S',
        b"Invalid request to unpack with offset of -1 and limit of 2.",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack_one, '\1\2', 'x') return e"##,
        'S',
        b"bad argument #2 to '?' (number expected, got string)",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack_one) return e"##,
        'S',
        b"bad argument #1 to '?' (string expected, got no value)",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack_one, nil, 1) return e"##,
        'S',
        b"bad argument #1 to '?' (string expected, got nil)",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack_limit('\1\2\3', 2)}))"##,
        'S',
        b"[2,1,2]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack_limit('\1\2\3', 2, 1)}))"##,
        'S',
        b"[-1,2,3]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack_limit('\1\2\3', 0)}))"##,
        'S',
        b"[1,2,3]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack_limit('\1\2\3', 0, 1)}))"##,
        'S',
        b"[1]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack_limit('\1\2\3', 5)}))"##,
        'S',
        b"[-1,1,2,3]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack_limit('\1\2\3', 1.9)}))"##,
        'S',
        b"[1,1]",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack_limit, '\1\2', -1) return e"##,
        'S',
        b"Invalid request to unpack with offset of 0 and limit of 2.",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack_limit, '\1\2', 1, -5) return e"##,
        'S',
        b"Invalid request to unpack with offset of -5 and limit of 2.",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack_limit, '\1\2\3') return e"##,
        'S',
        b"bad argument #2 to '?' (number expected, got no value)",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack_limit, '\1\2\3', {}) return e"##,
        'S',
        b"bad argument #2 to '?' (number expected, got table)",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack_limit, '\1\2', 1, 9) return e"##,
        'S',
        b"Start offset 9 greater than input length 2.",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, string.rep('\145', 10000)) return e"##,
        'S',
        b"stack overflow (in function mp_decode_to_lua_array)",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, string.rep('\129\0', 10000)) return e"##,
        'S',
        b"stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, string.rep('\129\145', 10000)) return e"##,
        'S',
        b"stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, string.rep('\145', 3998) .. '\1') return tostring(ok) .. type(e)"##,
        'S',
        b"truetable",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, string.rep('\145', 3999) .. '\1') return tostring(ok) .. (type(e) == 'table' and 'table' or tostring(e))"##,
        'S',
        b"truetable",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, string.rep('\129\0', 3999) .. '\1') return tostring(ok) .. (type(e) == 'table' and 'table' or tostring(e))"##,
        'S',
        b"truetable",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, string.rep('\129\0', 4000) .. '\1') return tostring(ok) .. (type(e) == 'table' and 'table' or tostring(e))"##,
        'S',
        b"falsestack overflow (too many return values at once; use unpack_one or unpack_limit instead.)",
    ),
    (
        r##"return select('#', cmsgpack.unpack(string.rep('\0', 7999)))"##,
        'I',
        b"7999",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, string.rep('\0', 8000)) return e"##,
        'S',
        b"stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)",
    ),
    (
        r##"return select('#', cmsgpack.unpack(string.rep('\0', 7998), 'x'))"##,
        'I',
        b"7998",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack, string.rep('\0', 7999), 'x') return tostring(ok) .. (type(e) == 'table' and 'table' or tostring(e))"##,
        'S',
        b"falsestack overflow (too many return values at once; use unpack_one or unpack_limit instead.)",
    ),
    (
        r##"return select('#', cmsgpack.unpack(string.rep('\144', 7999)))"##,
        'E',
        b"user_script:1: stack overflow (in function mp_decode_to_lua_array)",
    ),
    (
        r##"return select('#', cmsgpack.unpack(string.rep('\161a', 7999)))"##,
        'I',
        b"7999",
    ),
    (
        r##"return select('#', cmsgpack.unpack_limit(string.rep('\0', 9000), 7998))"##,
        'I',
        b"7999",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack_limit, string.rep('\0', 9000), 7999) return e"##,
        'S',
        b"stack overflow (in function mp_unpack_full)",
    ),
    (
        r##"local ok, e = pcall(cmsgpack.unpack_limit, string.rep('\0', 9000), 8000) return e"##,
        'S',
        b"stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)",
    ),
    (
        r##"local s = cmsgpack.pack({a = {1, 2, {b = true}}, c = 'd'}) local t = cmsgpack.unpack(s) return cmsgpack.pack(t) == s and 'same' or 'differs'"##,
        'S',
        b"same",
    ),
    (
        r##"local t = {} for i = 1, 1000 do t[i] = {i, tostring(i), i / 7} end local s = cmsgpack.pack(t) local u = cmsgpack.unpack(s) return #s .. ' ' .. cmsgpack.pack(u):len() .. ' ' .. u[999][2] .. ' ' .. u[999][3]"##,
        'S',
        b"15393 15393 999 142.71428571429",
    ),
    (
        r##"return cmsgpack._NAME .. ' ' .. cmsgpack._VERSION .. ' ' .. cmsgpack._COPYRIGHT .. ' ' .. cmsgpack._DESCRIPTION"##,
        'S',
        b"cmsgpack lua-cmsgpack 0.4.0 Copyright (C) 2012, Salvatore Sanfilippo MessagePack C implementation for Lua",
    ),
    (
        r##"return cmsgpack.pack(setmetatable({1, 2}, {__index = function() return 9 end}))"##,
        'S',
        b"\x92\x01\x02",
    ),
    (
        r##"return (cmsgpack.pack(0/0 + 0))"##,
        'S',
        b"\xcb\xff\xf8\x00\x00\x00\x00\x00\x00",
    ),
    (
        r##"return (cmsgpack.pack(-0.0, 1e-320, 2^-149, 2^-150))"##,
        'S',
        b"\x00\xcb\x00\x00\x00\x00\x00\x00\x07\xe8\xca\x00\x00\x00\x01\xcb6\x90\x00\x00\x00\x00\x00\x00",
    ),
    ];
}
