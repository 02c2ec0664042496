//! The `struct` library of Redis's Lua (its `deps/lua/src/lua_struct.c`: Roberto
//! Ierusalimschy's struct 1.4 with Redis's fixes), as redis-server 7.0 on x86-64 has it.
//!
//! Formats: `>` big endian, `<` little endian (the default, as x86-64 is), `![n]`
//! alignment (default 8), `x` a zero byte, `b`/`B` `h`/`H` `l`/`L` signed/unsigned
//! 1, 2 and 8 bytes, `T` 8 bytes (size_t), `i[n]`/`I[n]` n bytes (4 by default, at
//! most 32), `c[n]` n chars (c0: the whole string when packing, the previous number's
//! length when unpacking), `s` a zero-terminated string, `f` float, `d` double, and
//! spaces, which are ignored; anything else is an invalid option (`=` too: Redis's
//! version has no `=`). Redis's security fixes are here: a size over `INT_MAX` is
//! "integral size overflow" (CVE-2020-14147), unpacking checks every read against the
//! data's length without overflow and wants an offset of at least 1, and unpacking more
//! values than Lua's C stack holds is "stack overflow (too many results)" (CVE-2021-32626).
//!
//! Where C's behaviour is undefined, this follows what the compiled redis-server does
//! on x86-64 (checked against redis-server 7.0.15): a double out of an integer's range
//! converts to the "integer indefinite" value (`cvttsd2si`), a shift count is taken
//! modulo 64, and an `i` wider than 8 bytes packs the value's 8 bytes and zeros.

use mlua::{Lua, MultiValue, Value};

use super::Raise;
use super::{arg_error, to_number, type_error};
use crate::scripting::convert::lua_to_int as c_to_i64;

/// The largest size of `i`/`I`.
const MAXINTSIZE: i32 = 32;
/// The default of `!`: the alignment of a double.
const MAXALIGN: i32 = 8;
/// `LUAI_MAXCSTACK`: the most values a C function may have on Lua's stack.
const MAX_C_STACK: usize = 8000;

/// Lua code between a script and the Rust functions: mlua reads a number whose magnitude
/// is under 2^-52 (-0 included) as the integer 0, which would lose `struct.pack('d', -0.0)`
/// or `struct.pack('c0', 1e-300)`. Such numbers go over scaled — ±0 as ±inf, others
/// times 2^1023, both exact — with the list of their positions as a first argument.
///
/// A callback cannot return as many values as a C function may (mlua needs room on the
/// stack for them and more), so `unpack` returns many values in a table, which is spread
/// here (`unpack(t)` has room for 7999 values, as many as struct.unpack can return).
const EXACT: &str = r#"
local raw, many = ...
local select, type, unpack = select, type, unpack
local E = 2^-52
local spread = function(t, ...)
  if t then return unpack(t) end
  return ...
end
local call = function(...)
  if many then return spread(raw(...)) end
  return raw(...)
end
return function(...)
  local n = select('#', ...)
  -- select(i, ...) copies the rest of the arguments: many are read from a table.
  local args = n > 8 and {...} or nil
  local marks
  for i = 1, n do
    local x
    if args then x = args[i] else x = (select(i, ...)) end
    if type(x) == 'number' and x < E and x > -E then
      if not args then args = {...} end
      if not marks then marks = {} end
      marks[#marks + 1] = i
      if x == 0 then args[i] = 1 / x else args[i] = x * 2^1023 end
    end
  end
  if marks then return call(marks, unpack(args, 1, n)) end
  return call(nil, ...)
end
"#;

/// How many values `unpack` returns as they are; more go in a table.
const FEW: usize = 200;

/// Opens the library: the global table `struct`.
pub fn open(lua: &Lua) -> mlua::Result<()> {
    let table = super::install(
        lua,
        "struct",
        &[("pack", pack), ("unpack", unpack), ("size", size)],
    )?;
    // Only `unpack` goes through the Lua wrapper (for its many results): a Lua function
    // between the script and `pack` or `size` would be tail-called by `return
    // struct.pack(…)`, losing the script's position in their errors, which matters more
    // than numbers under 2^-52 (-0 among them) being read as 0.
    let exact: mlua::Function = lua.load(EXACT).set_name(super::INTERNAL).into_function()?;
    {
        let name = "unpack";
        let raw: mlua::Function = table.raw_get(name)?;
        let wrapped: mlua::Function = exact.call((raw, true))?;
        table.raw_set(name, wrapped)?;
    }
    Ok(())
}

/// The arguments as the script passed them: the first value is `EXACT`'s list of
/// scaled numbers, which are restored.
fn script_args(args: MultiValue) -> mlua::Result<Vec<Value>> {
    let mut args: Vec<Value> = args.into_iter().collect();
    if args.is_empty() {
        return Ok(args);
    }
    let marks = args.remove(0);
    if let Value::Table(marks) = marks {
        for i in marks.sequence_values::<usize>() {
            let Some(i) = i?.checked_sub(1) else { continue };
            if let Some(v) = args.get_mut(i) {
                let y = match v {
                    Value::Number(y) => *y,
                    Value::Integer(y) => *y as f64,
                    _ => continue,
                };
                let x = if y.is_infinite() {
                    if y > 0.0 { 0.0 } else { -0.0 }
                } else {
                    y * f64::from_bits(1 << 51) // 2^-1023
                };
                *v = Value::Number(x);
            }
        }
    }
    Ok(args)
}

/// A C `(unsigned long)d` on x86-64 as gcc compiles it: below 2^63 (or NaN) the signed
/// conversion, else the signed conversion of d - 2^63 with the top bit flipped.
fn c_to_u64(d: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    if d >= TWO63 {
        (c_to_i64(d - TWO63) as u64) ^ (1 << 63)
    } else {
        c_to_i64(d) as u64
    }
}

/// A format string, read as C reads it: up to its first zero byte.
struct Format<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Format<'_> {
    fn next_opt(&mut self) -> Option<u8> {
        let c = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(c)
    }

    /// `getnum`: a decimal number at the cursor, or `df`.
    fn getnum(&mut self, df: i32) -> Result<i32, Raise> {
        let mut digits = false;
        let mut a: i32 = 0;
        while let Some(c @ b'0'..=b'9') = self.bytes.get(self.at).copied() {
            let d = i32::from(c - b'0');
            if a > i32::MAX / 10 || a * 10 > i32::MAX - d {
                return Err(Raise::Msg("integral size overflow".into()));
            }
            a = a * 10 + d;
            self.at += 1;
            digits = true;
        }
        Ok(if digits { a } else { df })
    }

    /// `optsize`: the size of option `opt` (reading its number if it takes one).
    fn optsize(&mut self, opt: u8) -> Result<usize, Raise> {
        Ok(match opt {
            b'B' | b'b' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'x' => 1,
            b'c' => self.getnum(1)? as usize,
            b'i' | b'I' => {
                let sz = self.getnum(4)?;
                if sz > MAXINTSIZE {
                    return Err(Raise::Msg(format!(
                        "integral size {sz} is larger than limit of {MAXINTSIZE}"
                    )));
                }
                sz as usize
            }
            _ => 0,
        })
    }
}

/// The format's endianness and alignment.
struct Header {
    little: bool,
    align: usize,
}

impl Header {
    fn new() -> Self {
        Header {
            little: true,
            align: 1,
        }
    }

    /// `gettoalign`: the padding before an item of `size` at offset `len`.
    fn toalign(&self, len: usize, opt: u8, size: usize) -> usize {
        if size == 0 || opt == b'c' {
            return 0;
        }
        let size = size.min(self.align);
        (size - (len & (size - 1))) & (size - 1)
    }

    /// `controloptions`: spaces, endianness and alignment; anything else is invalid.
    fn control(&mut self, opt: u8, fmt: &mut Format<'_>, func: &str) -> Result<(), Raise> {
        match opt {
            b' ' => {}
            b'>' => self.little = false,
            b'<' => self.little = true,
            b'!' => {
                let a = fmt.getnum(MAXALIGN)?;
                if !(a > 0 && a & (a - 1) == 0) {
                    return Err(Raise::Msg(format!("alignment {a} is not a power of 2")));
                }
                self.align = a as usize;
            }
            _ => {
                // The option goes into the message as the byte it is; a message is
                // UTF-8 here, so a byte over 0x7f is written as U+FFFD.
                let c = String::from_utf8_lossy(&[opt]).into_owned();
                return Err(arg_error(func, 1, &format!("invalid format option '{c}'")));
            }
        }
        Ok(())
    }
}

/// `luaL_checklstring` of argument `i` (0-based): a string, or a number as Lua writes it.
fn check_bytes(lua: &Lua, args: &[Value], i: usize, func: &str) -> Result<Vec<u8>, Raise> {
    let v = args.get(i);
    match v {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Integer(n)) => num_to_bytes(lua, *n as f64),
        Some(Value::Number(n)) => num_to_bytes(lua, *n),
        _ => Err(type_error(func, i + 1, v, "string")),
    }
}

fn num_to_bytes(lua: &Lua, n: f64) -> Result<Vec<u8>, Raise> {
    match lua.coerce_string(Value::Number(n))? {
        Some(s) => Ok(s.as_bytes().to_vec()),
        None => Err(Raise::Msg("number has no string".into())),
    }
}

/// `luaL_checknumber` of argument `i` (0-based).
fn check_num(lua: &Lua, args: &[Value], i: usize, func: &str) -> Result<f64, Raise> {
    let v = args.get(i);
    match v {
        Some(v) => to_number(lua, v)?,
        None => None,
    }
    .ok_or_else(|| type_error(func, i + 1, v, "number"))
}

/// `struct.pack(fmt, ...)`.
fn pack(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    let mut args: Vec<Value> = args.into_iter().collect();
    let fmt = check_bytes(lua, &args, 0, "pack")?;
    // C pushes a nil after the arguments: a missing one is "got nil", not "no value".
    args.push(Value::Nil);
    let mut fmt = Format {
        bytes: c_str(&fmt),
        at: 0,
    };
    let mut h = Header::new();
    let mut arg = 1; // 0-based
    let mut out: Vec<u8> = Vec::new();
    while let Some(opt) = fmt.next_opt() {
        let mut size = fmt.optsize(opt)?;
        let toalign = h.toalign(out.len(), opt, size);
        out.resize(out.len() + toalign, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = check_num(lua, &args, arg, "pack")?;
                arg += 1;
                let mut value = if n < 0.0 {
                    c_to_i64(n) as u64
                } else {
                    c_to_u64(n)
                };
                let mut buf = [0u8; MAXINTSIZE as usize];
                let buf = &mut buf[..size];
                for i in 0..size {
                    let slot = if h.little { i } else { size - 1 - i };
                    buf[slot] = value as u8;
                    value >>= 8;
                }
                out.extend_from_slice(buf);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = check_num(lua, &args, arg, "pack")? as f32;
                arg += 1;
                out.extend_from_slice(&if h.little {
                    f.to_le_bytes()
                } else {
                    f.to_be_bytes()
                });
            }
            b'd' => {
                let d = check_num(lua, &args, arg, "pack")?;
                arg += 1;
                out.extend_from_slice(&if h.little {
                    d.to_le_bytes()
                } else {
                    d.to_be_bytes()
                });
            }
            b'c' | b's' => {
                let s = check_bytes(lua, &args, arg, "pack")?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    // C reports the argument after the string (its counter has moved on).
                    return Err(arg_error("pack", arg + 1, "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => h.control(opt, &mut fmt, "pack")?,
        }
    }
    Ok(MultiValue::from_iter([Value::String(
        lua.create_string(&out)?,
    )]))
}

/// A string as C sees it: up to its first zero byte.
fn c_str(s: &[u8]) -> &[u8] {
    match s.iter().position(|&c| c == 0) {
        Some(end) => &s[..end],
        None => s,
    }
}

/// `getinteger`: `size` bytes as an integer of 64 bits (the last 8 bytes read count),
/// sign-extended from bit size*8-1 (taken modulo 64) when signed.
fn getinteger(buf: &[u8], little: bool, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let mut take = |c: u8| l = (l << 8) | u64::from(c);
    if little {
        buf.iter().rev().for_each(|&c| take(c));
    } else {
        buf.iter().for_each(|&c| take(c));
    }
    if !signed {
        return l as f64;
    }
    let shift = ((buf.len() as i64) * 8 - 1) & 63;
    let mask = u64::MAX << shift;
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

/// An unpacked value, kept as Rust data until the end.
enum Item {
    Num(f64),
    Str(Vec<u8>),
}

/// `struct.unpack(fmt, data [, offset])`: the values, then the offset after them.
fn unpack(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    let args = script_args(args)?;
    let fmt = check_bytes(lua, &args, 0, "unpack")?;
    let data = check_bytes(lua, &args, 1, "unpack")?;
    let ld = data.len();
    let mut pos = match args.get(2) {
        None | Some(Value::Nil) => 1,
        Some(_) => c_to_i64(check_num(lua, &args, 2, "unpack")?) as usize,
    };
    if pos == 0 {
        return Err(arg_error("unpack", 3, "offset must be 1 or greater"));
    }
    pos -= 1;
    let mut fmt = Format {
        bytes: c_str(&fmt),
        at: 0,
    };
    let mut h = Header::new();
    let mut items: Vec<Item> = Vec::new();
    let too_short = || arg_error("unpack", 2, "data string too short");
    while let Some(opt) = fmt.next_opt() {
        let mut size = fmt.optsize(opt)?;
        pos = pos.wrapping_add(h.toalign(pos, opt, size));
        if !(size <= ld && pos <= ld - size) {
            return Err(too_short());
        }
        // luaL_checkstack(L, 2): the arguments, the values so far and two more.
        if args.len() + items.len() + 2 > MAX_C_STACK {
            return Err(Raise::Msg("stack overflow (too many results)".into()));
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.is_ascii_lowercase();
                items.push(Item::Num(getinteger(
                    &data[pos..pos + size],
                    h.little,
                    signed,
                )));
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().expect("4 bytes");
                let f = if h.little {
                    f32::from_le_bytes(b)
                } else {
                    f32::from_be_bytes(b)
                };
                items.push(Item::Num(f64::from(f)));
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().expect("8 bytes");
                let d = if h.little {
                    f64::from_le_bytes(b)
                } else {
                    f64::from_be_bytes(b)
                };
                items.push(Item::Num(d));
            }
            b'c' => {
                if size == 0 {
                    let n = match items.last() {
                        Some(Item::Num(n)) => Some(*n),
                        Some(Item::Str(s)) => {
                            lua.coerce_number(Value::String(lua.create_string(s)?))?
                        }
                        None => None,
                    };
                    let Some(n) = n else {
                        return Err(Raise::Msg("format 'c0' needs a previous size".into()));
                    };
                    size = c_to_u64(n) as usize;
                    items.pop();
                    if !(size <= ld && pos <= ld - size) {
                        return Err(too_short());
                    }
                }
                items.push(Item::Str(data[pos..pos + size].to_vec()));
            }
            b's' => {
                let Some(len) = data[pos..].iter().position(|&c| c == 0) else {
                    return Err(Raise::Msg("unfinished string in data".into()));
                };
                items.push(Item::Str(data[pos..pos + len].to_vec()));
                size = len + 1;
            }
            _ => h.control(opt, &mut fmt, "unpack")?,
        }
        pos = pos.wrapping_add(size);
    }
    let offset = Value::Number(pos.wrapping_add(1) as i64 as f64);
    // `EXACT` spreads a table, and returns the values after a nil as they are. Many
    // values go straight into the table: each string held here would take a slot of
    // mlua's auxiliary stack, which has room for 8000.
    if items.len() + 1 > FEW {
        let t = lua.create_table_with_capacity(items.len() + 1, 0)?;
        for (i, item) in items.into_iter().enumerate() {
            match item {
                Item::Num(n) => t.raw_set(i + 1, n)?,
                Item::Str(s) => t.raw_set(i + 1, lua.create_string(&s)?)?,
            }
        }
        t.raw_set(t.raw_len() + 1, offset)?;
        return Ok(MultiValue::from_iter([Value::Table(t)]));
    }
    let mut values = Vec::with_capacity(items.len() + 1);
    for item in items {
        values.push(match item {
            Item::Num(n) => Value::Number(n),
            Item::Str(s) => Value::String(lua.create_string(&s)?),
        });
    }
    values.push(offset);
    Ok(MultiValue::from_iter(
        std::iter::once(Value::Nil).chain(values),
    ))
}

/// `struct.size(fmt)`: the size of what `fmt` packs (which must not hold `s` or `c0`).
fn size(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    let args: Vec<Value> = args.into_iter().collect();
    let fmt = check_bytes(lua, &args, 0, "size")?;
    let mut fmt = Format {
        bytes: c_str(&fmt),
        at: 0,
    };
    let mut h = Header::new();
    let mut pos: usize = 0;
    while let Some(opt) = fmt.next_opt() {
        let size = fmt.optsize(opt)?;
        pos = pos.wrapping_add(h.toalign(pos, opt, size));
        if opt == b's' {
            return Err(arg_error("size", 1, "option 's' has no fixed size"));
        } else if opt == b'c' && size == 0 {
            return Err(arg_error("size", 1, "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            h.control(opt, &mut fmt, "size")?;
        }
        pos = pos.wrapping_add(size);
    }
    Ok(MultiValue::from_iter([Value::Number(pos as i64 as f64)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shows what a snippet returns: strings in hex, other values by `tostring`, or the
    /// error's type and message. The same Lua ran in redis-server 7.0.15 (EVAL) gave the
    /// expected answers below, less the position redis-server's luaL_error puts first.
    const HARNESS: &str = r#"
local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end
local function show(n, r) local t = {} for i = 2, n do local v = r[i] if type(v) == 'string' then t[#t+1] = 's:' .. hex(v) else t[#t+1] = tostring(v) end end return table.concat(t, ' ') end
local n, r = (function(...) return select('#', ...), {...} end)(pcall(function() return SNIPPET end))
if r[1] then return show(n, r) else return 'error: ' .. type(r[2]) .. ' ' .. tostring(r[2]) end
"#;

    fn show(lua: &Lua, snippet: &str) -> String {
        let code = HARNESS.replace("SNIPPET", snippet);
        match lua.load(&code).eval::<mlua::String>() {
            Ok(s) => s.to_string_lossy(),
            Err(e) => format!("lua failure: {e}"),
        }
    }

    #[test]
    fn as_redis_server() {
        let lua = super::super::testing::lua();
        let mut failures = Vec::new();
        for (snippet, want) in CASES {
            let got = show(&lua, snippet);
            if got != *want {
                failures.push(format!("{snippet}\n   got: {got}\n  want: {want}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn many_results() {
        // redis-server: 7997 values and the offset; 7998 values do not fit its C stack.
        // (Not through pcall: a debug build's Lua checks its API, and 5.1's pcall fails
        // that check when it returns more than about 20 values.)
        let lua = Lua::new();
        open(&lua).expect("open");
        let code = "local t = {struct.unpack(string.rep('b', 7997), string.rep('a', 8000))} \
                    return #t .. ' ' .. t[1] .. ' ' .. t[7997] .. ' ' .. t[7998]";
        let got: String = lua.load(code).eval().expect("eval");
        assert_eq!(got, "7998 97 97 7998");
        let code = "return select('#', struct.unpack(string.rep('b', 150), string.rep('a', 150)))";
        assert_eq!(lua.load(code).eval::<i64>().expect("eval"), 151);
    }

    #[test]
    fn c_conversions() {
        assert_eq!(c_to_i64(-1.9), -1);
        assert_eq!(c_to_i64(f64::NAN), i64::MIN);
        assert_eq!(c_to_i64(1e30), i64::MIN);
        assert_eq!(c_to_u64(2f64.powi(63)), 1 << 63);
        assert_eq!(c_to_u64(2f64.powi(64)), 0);
        assert_eq!(c_to_u64(f64::NAN), 1 << 63);
        assert_eq!(c_to_u64(-1.0), u64::MAX);
    }

    /// (snippet, redis-server 7.0.15's answer through `HARNESS`).
    const CASES: &[(&str, &str)] = &[
        // Sizes that would make C read or allocate far are refused before any work.
        (
            "struct.unpack('c2147483647', 'a')",
            "error: string bad argument #2 to 'unpack' (data string too short)",
        ),
        (
            "struct.unpack('i', 'abcd', -2^62)",
            "error: string bad argument #2 to 'unpack' (data string too short)",
        ),
        (
            "struct.unpack('bc0', '\\127')",
            "error: string bad argument #2 to 'unpack' (data string too short)",
        ),
        (
            "struct.unpack('dc0', struct.pack('d', 2^63))",
            "error: string bad argument #2 to 'unpack' (data string too short)",
        ),
        ("struct.pack(string.rep('!', 100000))", "s:"),
        (
            "struct.pack(string.rep('!16x', 1000) .. 'd', 1) == string.rep('\\0', 1000) .. struct.pack('d', 1)",
            "true",
        ),
        (
            "struct.unpack('<I8', struct.pack('<i8', -2^53))",
            "1.8437736874455e+19 9",
        ),
        ("struct.unpack('>h', struct.pack('>H', 65535))", "-1 3"),
        (
            "#struct.pack(string.rep('s', 100), unpack((function() local t = {} for i = 1, 100 do t[i] = string.rep('y', 1000) end return t end)()))",
            "100100",
        ),
        ("struct.pack('>i', 1)", "s:00000001"),
        ("struct.pack('<i', -2)", "s:feffffff"),
        (
            "struct.pack('bBhHlLT', -1, 255, -2, 65535, -3, 2^63, 7)",
            "s:fffffefffffffdffffffffffffff00000000000000800700000000000000",
        ),
        (
            "struct.pack('>bBhHlLT', -1, 255, -2, 65535, -3, 2^63, 7)",
            "s:fffffffefffffffffffffffffffd80000000000000000000000000000007",
        ),
        (
            "struct.pack('i1i2i3i5i7i8', 1, 2, 3, 4, 5, 6)",
            "s:0102000300000400000000050000000000000600000000000000",
        ),
        (
            "struct.pack('<i16', -1)",
            "s:ffffffffffffffff0000000000000000",
        ),
        (
            "struct.pack('>I32', 2^64 - 2^12)",
            "s:000000000000000000000000000000000000000000000000fffffffffffff000",
        ),
        ("struct.pack('i0', 1)", "s:"),
        ("struct.pack('>L', 0/0)", "s:8000000000000000"),
        ("struct.pack('>L', 2^64)", "s:0000000000000000"),
        ("struct.pack('>L', 1e30)", "s:0000000000000000"),
        ("struct.pack('>l', -1e30)", "s:8000000000000000"),
        ("struct.pack('>L', -1)", "s:ffffffffffffffff"),
        ("struct.pack('>L', 2^63)", "s:8000000000000000"),
        ("struct.pack('>L', 2^63 + 2^12)", "s:8000000000001000"),
        ("struct.pack('>l', -(0/0))", "s:8000000000000000"),
        ("struct.pack('>l', 1/0)", "s:0000000000000000"),
        ("struct.pack('>l', -1/0)", "s:8000000000000000"),
        ("struct.pack('b', 1.9)", "s:01"),
        ("struct.pack('b', -1.9)", "s:ff"),
        ("struct.pack('b', 300)", "s:2c"),
        ("struct.pack('b', '12')", "s:0c"),
        ("struct.pack('b', ' 0x10 ')", "s:10"),
        ("struct.pack('>f', 1.1)", "s:3f8ccccd"),
        ("struct.pack('<f', -2.5)", "s:000020c0"),
        ("struct.pack('f', 1e300)", "s:0000807f"),
        ("struct.pack('>d', 0.1)", "s:3fb999999999999a"),
        ("struct.pack('>d', 0/0)", "s:fff8000000000000"),
        ("struct.pack('c0', 0)", "s:30"),
        ("struct.pack('s', 1.5)", "s:312e3500"),
        ("struct.pack('s', 'ab\\0cd')", "s:616200636400"),
        ("struct.pack('c3', 'abcdef')", "s:616263"),
        ("struct.pack('c0', 'abcdef')", "s:616263646566"),
        ("struct.pack('c', 'xyz')", "s:78"),
        ("struct.pack('x')", "s:00"),
        ("struct.pack('bxb', 1, 2)", "s:010002"),
        ("struct.pack('!bi', 1, 2)", "s:0100000002000000"),
        ("struct.pack('!4bd', 1, 2)", "s:010000000000000000000040"),
        (
            "struct.pack('!bh!2d', 1, 2, 3)",
            "s:010002000000000000000840",
        ),
        (
            "struct.pack('!16bd', 1, 2)",
            "s:01000000000000000000000000000040",
        ),
        ("struct.pack('!i3bi3', 1, 2, 3)", "s:000001000002030000"),
        ("struct.pack('!bc3i', 1, 'abc', 2)", "s:0161626302000000"),
        (
            "struct.pack('!bsi', 1, 'abc', 2)",
            "s:016162630000000002000000",
        ),
        (
            "struct.pack('!8bT', 1, 2)",
            "s:01000000000000000200000000000000",
        ),
        ("struct.pack(' < > b ', 1)", "s:01"),
        ("struct.pack('b\\0b', 1, 2)", "s:01"),
        (
            "struct.pack(12, 1)",
            "error: string bad argument #1 to 'pack' (invalid format option '1')",
        ),
        ("struct.pack('')", "s:"),
        (
            "struct.pack('i33', 1)",
            "error: string integral size 33 is larger than limit of 32",
        ),
        (
            "struct.pack('i2147483647', 1)",
            "error: string integral size 2147483647 is larger than limit of 32",
        ),
        (
            "struct.pack('i2147483648', 1)",
            "error: string integral size overflow",
        ),
        (
            "struct.pack('c9999999999', 'a')",
            "error: string integral size overflow",
        ),
        (
            "struct.pack('c2147483647', 'a')",
            "error: string bad argument #3 to 'pack' (string too short)",
        ),
        (
            "struct.pack('c5', 'ab')",
            "error: string bad argument #3 to 'pack' (string too short)",
        ),
        (
            "struct.pack('bc5', 1, 'ab')",
            "error: string bad argument #4 to 'pack' (string too short)",
        ),
        (
            "struct.pack('=i', 1)",
            "error: string bad argument #1 to 'pack' (invalid format option '=')",
        ),
        (
            "struct.pack('q', 1)",
            "error: string bad argument #1 to 'pack' (invalid format option 'q')",
        ),
        (
            "struct.pack('!3i', 1)",
            "error: string alignment 3 is not a power of 2",
        ),
        (
            "struct.pack('!0i', 1)",
            "error: string alignment 0 is not a power of 2",
        ),
        ("struct.pack('!')", "s:"),
        (
            "struct.pack('!2147483648')",
            "error: string integral size overflow",
        ),
        (
            "struct.pack('s')",
            "error: string bad argument #2 to 'pack' (string expected, got nil)",
        ),
        (
            "struct.pack('b')",
            "error: string bad argument #2 to 'pack' (number expected, got nil)",
        ),
        (
            "struct.pack('b', 'x')",
            "error: string bad argument #2 to 'pack' (number expected, got string)",
        ),
        (
            "struct.pack('c', {})",
            "error: string bad argument #2 to 'pack' (string expected, got table)",
        ),
        (
            "struct.pack('d', true)",
            "error: string bad argument #2 to 'pack' (number expected, got boolean)",
        ),
        (
            "struct.pack()",
            "error: string bad argument #1 to 'pack' (string expected, got no value)",
        ),
        (
            "struct.pack(nil)",
            "error: string bad argument #1 to 'pack' (string expected, got nil)",
        ),
        (
            "struct.pack('bb', 1)",
            "error: string bad argument #3 to 'pack' (number expected, got nil)",
        ),
        (
            "struct.pack('bb', 1, nil)",
            "error: string bad argument #3 to 'pack' (number expected, got nil)",
        ),
        ("struct.unpack('>i', '\\0\\0\\1\\2')", "258 5"),
        ("struct.unpack('<i', '\\254\\255\\255\\255')", "-2 5"),
        (
            "struct.unpack('bBhHlLT', struct.pack('bBhHlLT', -1, 255, -2, 65535, -3, 2^63, 7))",
            "-1 255 -2 65535 -3 9.2233720368548e+18 7 31",
        ),
        (
            "struct.unpack('>bBhHlLT', struct.pack('>bBhHlLT', -1, 255, -2, 65535, -3, 2^63, 7))",
            "-1 255 -2 65535 -3 9.2233720368548e+18 7 31",
        ),
        ("struct.unpack('i17', string.rep('a', 36))", "-31 18"),
        (
            "struct.unpack('I17', string.rep('a', 36))",
            "7.0169967652934e+18 18",
        ),
        ("struct.unpack('>i17', string.rep('\\255', 17))", "-1 18"),
        ("struct.unpack('i0I0', '')", "0 0 1"),
        (
            "struct.unpack('i3I3', '\\255\\255\\255\\255\\255\\255')",
            "-1 16777215 7",
        ),
        (
            "struct.unpack('>i16', string.rep('\\128', 16))",
            "-9.1872019504357e+18 17",
        ),
        (
            "struct.unpack('>I32', string.rep('\\255', 32))",
            "1.844674407371e+19 33",
        ),
        (
            "struct.unpack('i32', string.rep('\\1', 32))",
            "7.2340172838077e+16 33",
        ),
        (
            "struct.unpack('>f<f', struct.pack('>f<f', 1.1, -2.5))",
            "1.1000000238419 -2.5 9",
        ),
        ("struct.unpack('d', struct.pack('d', 0.1))", "0.1 9"),
        (
            "struct.unpack('f', struct.pack('f', 0.1))",
            "0.10000000149012 5",
        ),
        ("struct.unpack('f', '\\255\\255\\255\\127')", "nan 5"),
        (
            "struct.unpack('d', '\\0\\0\\0\\0\\0\\0\\240\\127')",
            "inf 9",
        ),
        (
            "struct.unpack('i', 'abcd', 2)",
            "error: string bad argument #2 to 'unpack' (data string too short)",
        ),
        ("struct.unpack('i', 'abcde', 2)", "1701077858 6"),
        ("struct.unpack('i', 'abcde', '2')", "1701077858 6"),
        (
            "struct.unpack('i', 'abcde', 'x')",
            "error: string bad argument #3 to 'unpack' (number expected, got string)",
        ),
        ("struct.unpack('i', 'abcde', nil)", "1684234849 5"),
        ("struct.unpack('i', 'abcde', 2.9)", "1701077858 6"),
        ("struct.unpack('i', 'abcde', 1, 'junk')", "1684234849 5"),
        (
            "struct.unpack('i', 'abcd', 0)",
            "error: string bad argument #3 to 'unpack' (offset must be 1 or greater)",
        ),
        (
            "struct.unpack('i', 'abcd', 0.5)",
            "error: string bad argument #3 to 'unpack' (offset must be 1 or greater)",
        ),
        (
            "struct.unpack('i', 'abcd', -1)",
            "error: string bad argument #2 to 'unpack' (data string too short)",
        ),
        (
            "struct.unpack('i', 'abcd', 2^70)",
            "error: string bad argument #2 to 'unpack' (data string too short)",
        ),
        (
            "struct.unpack('i', 'abcd', 0/0)",
            "error: string bad argument #2 to 'unpack' (data string too short)",
        ),
        (
            "struct.unpack('i', 'abcd', {})",
            "error: string bad argument #3 to 'unpack' (number expected, got table)",
        ),
        (
            "struct.unpack('i', 'abcd', 5)",
            "error: string bad argument #2 to 'unpack' (data string too short)",
        ),
        ("struct.unpack('', 'abc', -1)", "-1"),
        ("struct.unpack('', 'abc', 100)", "100"),
        ("struct.unpack('', 'abc', 2^70)", "-9.2233720368548e+18"),
        (
            "struct.unpack(' ', 'abc', 100)",
            "error: string bad argument #2 to 'unpack' (data string too short)",
        ),
        ("struct.unpack(' ', 'abc', 4)", "4"),
        (
            "struct.unpack('!4i', 'abcd', -1)",
            "error: string bad argument #2 to 'unpack' (data string too short)",
        ),
        (
            "struct.unpack('i')",
            "error: string bad argument #2 to 'unpack' (string expected, got no value)",
        ),
        (
            "struct.unpack(nil, 'x')",
            "error: string bad argument #1 to 'unpack' (string expected, got nil)",
        ),
        (
            "struct.unpack()",
            "error: string bad argument #1 to 'unpack' (string expected, got no value)",
        ),
        ("struct.unpack('b', 12)", "49 2"),
        ("struct.unpack('b', 1e-300)", "49 2"),
        (
            "struct.unpack('bq', 'aa')",
            "error: string bad argument #1 to 'unpack' (invalid format option 'q')",
        ),
        (
            "struct.unpack('b=', 'aa')",
            "error: string bad argument #1 to 'unpack' (invalid format option '=')",
        ),
        ("struct.unpack('s', 'ab\\0cd')", "s:6162 4"),
        ("struct.unpack('s s', 'ab\\0cd\\0')", "s:6162 s:6364 7"),
        (
            "struct.unpack('s', 'abc')",
            "error: string unfinished string in data",
        ),
        (
            "struct.unpack('bs', '\\1')",
            "error: string unfinished string in data",
        ),
        (
            "struct.unpack('c0', 'abc')",
            "error: string format 'c0' needs a previous size",
        ),
        (
            "struct.unpack('c0', '3')",
            "error: string format 'c0' needs a previous size",
        ),
        (
            "struct.unpack('c0', '3', 1)",
            "error: string format 'c0' needs a previous size",
        ),
        ("struct.unpack('bc0', '\\2abc')", "s:6162 4"),
        (
            "struct.unpack('bc0', '\\255abc')",
            "error: string bad argument #2 to 'unpack' (data string too short)",
        ),
        ("struct.unpack('bc0', '\\0abc')", "s: 2"),
        ("struct.unpack('c1c0', '3abc')", "s:616263 5"),
        (
            "struct.unpack('c1c0', 'xabc')",
            "error: string format 'c0' needs a previous size",
        ),
        (
            "struct.unpack('c2c0', '0x2abc')",
            "error: string format 'c0' needs a previous size",
        ),
        ("struct.unpack('dc0', struct.pack('d', 2^64))", "s: 9"),
        (
            "struct.unpack('dc0', struct.pack('d', -1))",
            "error: string bad argument #2 to 'unpack' (data string too short)",
        ),
        (
            "struct.unpack('dc0', struct.pack('d', 0/0))",
            "error: string bad argument #2 to 'unpack' (data string too short)",
        ),
        (
            "struct.unpack('dc0', struct.pack('d', 1.9) .. 'abc')",
            "s:61 10",
        ),
        ("struct.unpack('c3', 'abcdef')", "s:616263 4"),
        (
            "struct.unpack('c3', 'ab')",
            "error: string bad argument #2 to 'unpack' (data string too short)",
        ),
        ("struct.unpack('c', 'xyz')", "s:78 2"),
        (
            "struct.unpack('x', '')",
            "error: string bad argument #2 to 'unpack' (data string too short)",
        ),
        ("struct.unpack('xb', '\\1\\2')", "2 3"),
        ("struct.unpack('!bi', struct.pack('!bi', 1, 2))", "1 2 9"),
        (
            "struct.unpack('!bi', '\\1\\0\\0\\0\\2\\0\\0')",
            "error: string bad argument #2 to 'unpack' (data string too short)",
        ),
        (
            "struct.unpack('!bh!2d', struct.pack('!bh!2d', 1, 2, 3))",
            "1 2 3 13",
        ),
        (
            "struct.unpack('!i3bi3', struct.pack('!i3bi3', 1, 2, 3))",
            "1 2 3 10",
        ),
        (
            "struct.unpack('!bc3i', struct.pack('!bc3i', 1, 'abc', 2))",
            "1 s:616263 2 9",
        ),
        (
            "struct.unpack('!bsi', struct.pack('!bsi', 1, 'abc', 2))",
            "1 s:616263 2 13",
        ),
        (
            "struct.unpack('!4i', 'xxabcd', 3)",
            "error: string bad argument #2 to 'unpack' (data string too short)",
        ),
        ("struct.unpack('!4i', 'xxxxabcd', 3)", "1684234849 9"),
        ("struct.unpack('b\\0b', '\\1\\2')", "1 2"),
        (
            "struct.unpack('i33', 'a')",
            "error: string integral size 33 is larger than limit of 32",
        ),
        (
            "struct.unpack('c9999999999', 'a')",
            "error: string integral size overflow",
        ),
        (
            "struct.unpack('!3', 'a')",
            "error: string alignment 3 is not a power of 2",
        ),
        ("struct.unpack('<>', 'a')", "1"),
        (
            "select('#', struct.unpack(string.rep('b', 7997), string.rep('a', 8000)))",
            "7998",
        ),
        (
            "struct.unpack(string.rep('b', 7998), string.rep('a', 8000))",
            "error: string stack overflow (too many results)",
        ),
        (
            "select('#', struct.unpack(string.rep('b', 7996), string.rep('a', 8000), 1))",
            "7997",
        ),
        (
            "struct.unpack(string.rep('b', 7997), string.rep('a', 8000), 1)",
            "error: string stack overflow (too many results)",
        ),
        (
            "struct.unpack(string.rep('b', 7996) .. 'x', string.rep('a', 8000), 1, 2)",
            "error: string stack overflow (too many results)",
        ),
        (
            "select('#', struct.unpack(string.rep('bc0', 9000), string.rep('\\0', 9000)))",
            "error: string stack overflow (too many results)",
        ),
        ("struct.size('i')", "4"),
        ("struct.size('!bi')", "8"),
        ("struct.size('!4bd')", "12"),
        ("struct.size('bi')", "5"),
        ("struct.size('!bh!2d')", "12"),
        ("struct.size('c2147483647c2147483647')", "4294967294"),
        ("struct.size(string.rep('c2147483647', 20))", "42949672940"),
        (
            "struct.size('=')",
            "error: string bad argument #1 to 'size' (invalid format option '=')",
        ),
        ("struct.size('!')", "0"),
        (
            "struct.size('!0')",
            "error: string alignment 0 is not a power of 2",
        ),
        ("struct.size('!16bd')", "16"),
        ("struct.size('i3i3')", "6"),
        ("struct.size('!i3bi3')", "9"),
        ("struct.size(' <> ')", "0"),
        ("struct.size('xxT')", "10"),
        ("struct.size(12)", "0"),
        (
            "struct.size()",
            "error: string bad argument #1 to 'size' (string expected, got no value)",
        ),
        (
            "struct.size('s')",
            "error: string bad argument #1 to 'size' (option 's' has no fixed size)",
        ),
        (
            "struct.size('c0')",
            "error: string bad argument #1 to 'size' (option 'c0' has no fixed size)",
        ),
        ("struct.size('c')", "1"),
        ("struct.size('q')", "0"),
        ("struct.size('bqb')", "2"),
        (
            "struct.size('i33')",
            "error: string integral size 33 is larger than limit of 32",
        ),
        (
            "struct.size('c9999999999')",
            "error: string integral size overflow",
        ),
        ("struct.size('b\\0b')", "1"),
        ("struct.size('!bc3i')", "8"),
        ("struct.size('<h>l!2fd')", "22"),
    ];
}
