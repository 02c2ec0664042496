//! The `bit` library of Redis's Lua (its `deps/lua/src/lua_bit.c`: Lua BitOp 1.0.2).
//!
//! Every operation works on 32-bit integers. An argument is a Lua number (or a string
//! Lua converts to one) normalised as BitOp does: 2^52+2^51 is added to the double and
//! the low 32 bits of the sum's representation are taken, so a number wraps modulo 2^32
//! and a fraction rounds to nearest even (as the FPU rounds the sum). Results are the
//! signed 32-bit value as a Lua number.
//!
//! The argument errors read as `luaL_argerror` writes them, with the function's name as
//! the library names it (Lua takes it from the call site: a function called through
//! another name, or through `pcall`, is named differently by redis-server).

use mlua::{Lua, MultiValue, Value};

use super::{Raise, check_number};

/// Opens the library: the global table `bit`.
pub fn open(lua: &Lua) -> mlua::Result<()> {
    super::install(
        lua,
        "bit",
        &[
            ("tobit", tobit),
            ("bnot", bnot),
            ("band", band),
            ("bor", bor),
            ("bxor", bxor),
            ("lshift", lshift),
            ("rshift", rshift),
            ("arshift", arshift),
            ("rol", rol),
            ("ror", ror),
            ("bswap", bswap),
            ("tohex", tohex),
        ],
    )?;
    Ok(())
}

/// BitOp's `barg`: argument `i` (0-based) as 32 bits, by the 2^52+2^51 trick.
fn barg(lua: &Lua, args: &MultiValue, i: usize, func: &str) -> Result<u32, Raise> {
    let n = check_number(lua, args, i, func)?;
    Ok((n + 6_755_399_441_055_744.0).to_bits() as u32)
}

/// BitOp's `BRET`: the bits as a signed 32-bit Lua number.
fn ret(b: u32) -> Result<MultiValue, Raise> {
    Ok(MultiValue::from_iter([Value::Number(f64::from(b as i32))]))
}

fn tobit(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    ret(barg(lua, &args, 0, "tobit")?)
}

fn bnot(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    ret(!barg(lua, &args, 0, "bnot")?)
}

/// The variadic operations: the first argument, then the others from the last one
/// down (the order in which BitOp reads them, which decides which bad one is named).
fn fold(
    lua: &Lua,
    args: &MultiValue,
    func: &str,
    op: fn(u32, u32) -> u32,
) -> Result<MultiValue, Raise> {
    let mut b = barg(lua, args, 0, func)?;
    for i in (1..args.len()).rev() {
        b = op(b, barg(lua, args, i, func)?);
    }
    ret(b)
}

fn band(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    fold(lua, &args, "band", |a, b| a & b)
}

fn bor(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    fold(lua, &args, "bor", |a, b| a | b)
}

fn bxor(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    fold(lua, &args, "bxor", |a, b| a ^ b)
}

/// The shifts and rotations: the value, then the count modulo 32.
fn shift(
    lua: &Lua,
    args: &MultiValue,
    func: &str,
    op: fn(u32, u32) -> u32,
) -> Result<MultiValue, Raise> {
    let b = barg(lua, args, 0, func)?;
    let n = barg(lua, args, 1, func)? & 31;
    ret(op(b, n))
}

fn lshift(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    shift(lua, &args, "lshift", |b, n| b << n)
}

fn rshift(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    shift(lua, &args, "rshift", |b, n| b >> n)
}

fn arshift(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    shift(lua, &args, "arshift", |b, n| ((b as i32) >> n) as u32)
}

fn rol(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    shift(lua, &args, "rol", u32::rotate_left)
}

fn ror(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    shift(lua, &args, "ror", u32::rotate_right)
}

fn bswap(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    ret(barg(lua, &args, 0, "bswap")?.swap_bytes())
}

/// `bit.tohex(x [, n])`: the low |n| hex digits of x (8 by default, at most 8),
/// upper case when n is negative. n = -2^31 (whose negation overflows in C) gives
/// 8 upper-case digits in redis-server, and so here.
fn tohex(lua: &Lua, args: MultiValue) -> Result<MultiValue, Raise> {
    let mut b = barg(lua, &args, 0, "tohex")?;
    let mut n = if args.len() < 2 {
        8
    } else {
        barg(lua, &args, 1, "tohex")? as i32
    };
    let digits: &[u8; 16] = if n < 0 {
        n = n.wrapping_neg();
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let n = (n as u32).min(8) as usize;
    let mut buf = [0u8; 8];
    for slot in buf[..n].iter_mut().rev() {
        *slot = digits[(b & 15) as usize];
        b >>= 4;
    }
    let s = lua.create_string(&buf[..n])?;
    Ok(MultiValue::from_iter([Value::String(s)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Evaluates `code` with the library open; the result, or the error's message.
    fn eval(code: &str) -> String {
        let lua = super::super::testing::lua();
        match lua.load(code).eval::<Value>() {
            Ok(v) => match lua.coerce_string(v.clone()).expect("coerce") {
                Some(s) => s.to_string_lossy(),
                None => format!("<{}>", super::super::type_name(Some(&v))),
            },
            Err(e) => format!("ERR {}", super::super::testing::message(&e)),
        }
    }

    // Each expected value below is redis-server 7.0.15's reply to `EVAL "return tostring(<snippet>)" 0`
    // (or to the error's message, without the position redis-server's luaL_error adds).

    #[test]
    fn normalisation() {
        for (code, want) in [
            ("bit.tobit(2^31)", "-2147483648"),
            ("bit.tobit(2^32)", "0"),
            ("bit.tobit(2^32 + 5)", "5"),
            ("bit.tobit(-1)", "-1"),
            ("bit.tobit(0.5)", "0"),
            ("bit.tobit(1.5)", "2"),
            ("bit.tobit(2.5)", "2"),
            ("bit.tobit(-2.5)", "-2"),
            ("bit.tobit(1/0)", "0"),
            ("bit.tobit(0/0)", "0"),
            ("bit.tobit(2^53 + 3)", "2"),
            ("bit.tobit(' 0x1f ')", "31"),
            ("bit.tobit('1e3')", "1000"),
            ("bit.tobit('0')", "0"),
            ("bit.tobit(-0.0)", "0"),
        ] {
            assert_eq!(eval(&format!("return tostring({code})")), want, "{code}");
        }
    }

    #[test]
    fn operations() {
        for (code, want) in [
            ("bit.bnot(0)", "-1"),
            ("bit.bor(1, 2, 4, 2^31)", "-2147483641"),
            ("bit.band(0xff, 0x0f, 0x3)", "3"),
            ("bit.bxor(5, 3, 1)", "7"),
            ("bit.band(7)", "7"),
            ("bit.lshift(1, 31)", "-2147483648"),
            ("bit.lshift(1, 32)", "1"),
            ("bit.lshift(1, -1)", "-2147483648"),
            ("bit.rshift(-1, 0)", "-1"),
            ("bit.rshift(-1, 28)", "15"),
            ("bit.arshift(-256, 4)", "-16"),
            ("bit.rol(0x12345678, 12)", "1164411171"),
            ("bit.ror(0x12345678, 12)", "1736516421"),
            ("bit.rol(0x12345678, 0)", "305419896"),
            ("bit.ror(0x12345678, 0)", "305419896"),
            ("bit.bswap(0x12345678)", "2018915346"),
        ] {
            assert_eq!(eval(&format!("return tostring({code})")), want, "{code}");
        }
    }

    #[test]
    fn hex() {
        for (code, want) in [
            ("bit.tohex(-1, -4)", "FFFF"),
            ("bit.tohex(0xabcdef)", "00abcdef"),
            ("bit.tohex(0xabcdef, 2^31)", "00ABCDEF"),
            ("bit.tohex(0xabcdef, -2^31)", "00ABCDEF"),
            ("bit.tohex(0xabcdef, 0)", ""),
            ("bit.tohex(0xabcdef, -9)", "00ABCDEF"),
            ("bit.tohex(0xabcdef, 9)", "00abcdef"),
            ("bit.tohex(0xabcdef, 2^32 + 3)", "def"),
            ("bit.tohex(0xabcdef, -3.5)", "CDEF"),
            ("bit.tohex('12')", "0000000c"),
            ("bit.tohex('0x10')", "00000010"),
        ] {
            assert_eq!(eval(&format!("return {code}")), want, "{code}");
        }
    }

    #[test]
    fn argument_errors() {
        for (code, want) in [
            (
                "bit.tohex('x')",
                "bad argument #1 to 'tohex' (number expected, got string)",
            ),
            (
                "bit.tohex()",
                "bad argument #1 to 'tohex' (number expected, got no value)",
            ),
            (
                "bit.tohex({})",
                "bad argument #1 to 'tohex' (number expected, got table)",
            ),
            (
                "bit.tohex(nil)",
                "bad argument #1 to 'tohex' (number expected, got nil)",
            ),
            (
                "bit.tohex(1, nil)",
                "bad argument #2 to 'tohex' (number expected, got nil)",
            ),
            (
                "bit.band()",
                "bad argument #1 to 'band' (number expected, got no value)",
            ),
            (
                "bit.band(1, nil)",
                "bad argument #2 to 'band' (number expected, got nil)",
            ),
            (
                "bit.band(1, 'x', 'y')",
                "bad argument #3 to 'band' (number expected, got string)",
            ),
            (
                "bit.band(true)",
                "bad argument #1 to 'band' (number expected, got boolean)",
            ),
            (
                "bit.lshift(1)",
                "bad argument #2 to 'lshift' (number expected, got no value)",
            ),
            (
                "bit.tobit('0x')",
                "bad argument #1 to 'tobit' (number expected, got string)",
            ),
            (
                "bit.tobit('')",
                "bad argument #1 to 'tobit' (number expected, got string)",
            ),
        ] {
            // The message is a plain string value, as luaL_error raises it.
            let got = eval(&format!(
                "local ok, e = pcall(function() return {code} end) return type(e) .. ' ' .. e"
            ));
            assert_eq!(got, format!("string {want}"), "{code}");
        }
    }
}
