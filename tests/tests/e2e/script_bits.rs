//! The Lua libraries `bit` and `struct` — differentially against redis-server 7.0: each
//! snippet runs as `EVAL <script> 0` on both servers and the replies must be the same
//! bytes. Most snippets run inside a harness that shows their exact results (strings in
//! hex, numbers by `tostring`, which EVAL's reply would truncate) or the error they
//! raise; some run as they are, for the replies EVAL makes of the values and of errors.

use goblin_tests::Differential;
use goblin_tests::diff::{How, ask_both, verdict};

/// Shows what `SNIPPET` returns, or the error it raises, as one string. (`keep` makes
/// the snippet's last call an ordinary one: struct.unpack goes through a Lua wrapper in
/// Goblin, which a tail call would put in the script's place, losing its position.)
const HARNESS: &str = r#"
local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end
local function show(n, r) local t = {} for i = 2, n do local v = r[i] if type(v) == 'string' then t[#t+1] = 's:' .. hex(v) else t[#t+1] = tostring(v) end end return table.concat(t, ' ') end
local function keep(...) return ... end
local n, r = (function(...) return select('#', ...), {...} end)(pcall(function() return keep(SNIPPET) end))
if r[1] then return show(n, r) else return 'error: ' .. type(r[2]) .. ' ' .. tostring(r[2]) end
"#;

/// Sends `EVAL script 0` to both servers; redis-server's reply must be a bulk string
/// (the harness ran) when `shown`; the replies must be the same.
fn eval(d: &mut Differential, script: &str, shown: bool) {
    let args: [&[u8]; 3] = [b"EVAL", script.as_bytes(), b"0"];
    let (got, want) = ask_both(&mut d.g, &mut d.r, &args);
    assert!(
        !shown || want.starts_with(b"$"),
        "the snippet does not run on redis-server: {script}\n{}",
        String::from_utf8_lossy(&want)
    );
    let owned: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    if let Err(e) = verdict(&got, &want, How::Exact, &owned) {
        panic!("{script}\n{e}");
    }
}

/// Runs each snippet in the harness.
fn shown(d: &mut Differential, snippets: &[&str]) {
    for snippet in snippets {
        eval(d, &HARNESS.replace("SNIPPET", snippet), true);
    }
}

/// `bit`: normalisation of doubles (wrapping, rounding to even, strings, inf and NaN),
/// every operation, `tohex`'s widths and cases, and argument errors.
#[test]
fn bit_matches_redis() {
    let mut d = Differential::new();
    shown(&mut d, BIT);
    // Sweeps: one EVAL each, many values.
    shown(
        &mut d,
        &[
            "(function() local t = {} for i = -64, 64 do t[#t+1] = bit.tobit(i * 0.25) end return table.concat(t, ' ') end)()",
            "(function() local t = {} for i = 28, 66 do t[#t+1] = bit.tobit(2^i + 1.5) .. ',' .. bit.tobit(-2^i - 0.5) end return table.concat(t, ' ') end)()",
            "(function() local t = {} for n = -40, 40 do t[#t+1] = bit.lshift(0x87654321, n) .. ',' .. bit.rshift(0x87654321, n) .. ',' .. bit.arshift(0x87654321, n) .. ',' .. bit.rol(0x87654321, n) .. ',' .. bit.ror(0x87654321, n) end return table.concat(t, ' ') end)()",
            "(function() local t = {} for n = -10, 10 do t[#t+1] = bit.tohex(0x9abcdef1, n) end return table.concat(t, ' ') end)()",
            "(function() local t = {} local x = 1 for i = 1, 200 do x = (x * 1103515245 + 12345) % 2^40 t[#t+1] = bit.bxor(x, bit.bnot(x / 7), bit.bswap(x)) .. bit.band(x, 0xf0f0f0f0) .. bit.bor(x, 2^31) end return table.concat(t, ' ') end)()",
        ],
    );
}

/// `struct`: every format letter both ways, alignment, endianness, sizes, the C
/// conversions of out-of-range numbers, offsets, `c0`, the stack's limit on results,
/// Redis's bounds checks, and every error.
#[test]
fn struct_matches_redis() {
    let mut d = Differential::new();
    shown(&mut d, STRUCT);
    shown(
        &mut d,
        &[
            "(function() local t = {} for i = -70, 70 do local x = i * 1.37 ^ i t[#t+1] = table.concat({struct.unpack('<bBhHlLTi3I5fd', struct.pack('<bBhHlLTi3I5fd', x, x, x, x, x, x, x, x, x, x, x))}, ',') end return table.concat(t, ' ') end)()",
            "(function() local t = {} for a = 0, 5 do local f = '!' .. 2^a .. 'bhbibdbTbfbi3b' t[#t+1] = struct.size(f) .. ':' .. #struct.pack(f, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14) end return table.concat(t, ' ') end)()",
        ],
    );
}

/// The replies EVAL makes of the libraries' values (numbers truncated to integers,
/// binary strings, arrays) and of their errors (with the script's position, as
/// luaL_error writes it).
#[test]
fn replies_match_redis() {
    let mut d = Differential::new();
    for script in [
        "return bit.tohex(-1, -4)",
        "return bit.band(0xffff, 0x1234)",
        "return bit.tobit(2^31)",
        "return {bit.bnot(0), bit.rol(1, 31), bit.tobit(1.5)}",
        "return struct.pack('>i', 1)",
        "return struct.pack('<d', 0.1)",
        "return {struct.unpack('>ihs', struct.pack('>ihs', -5, 300, 'abc'))}",
        "return {struct.unpack('d', struct.pack('d', 2.5))}",
        "return struct.size('!bd')",
        "return {struct.unpack(string.rep('b', 7997), string.rep('a', 8000))}",
        "local r = {struct.unpack(string.rep('b', 7998), string.rep('a', 8000))} return r",
        "return bit.tohex('x')",
        "return bit.band(1, 2, {})",
        "local x = bit.tohex('x') return x",
        "return struct.pack('i33', 1)",
        "return struct.pack('c9999999999', 'a')",
        "local x = struct.unpack('i17', string.rep('a', 36)) return x",
        "local x = struct.unpack('i', 'abcd', 0) return x",
        "local x = struct.unpack('s', 'abc') return x",
        "return struct.size('s')",
        "return struct.pack('q', 1)",
    ] {
        eval(&mut d, script, false);
    }
}

/// `luaL_argerror` names the function as the call site does: `?` through `pcall`, a
/// local's name through a local.
#[test]
fn argument_errors_name_the_call_site() {
    let mut d = Differential::new();
    shown(
        &mut d,
        &[
            "pcall(bit.tohex, 'x')",
            "pcall(struct.pack, 'b', 'x')",
            "(function() local f = bit.band return f(1, 'x') end)()",
        ],
    );
}

const BIT: &[&str] = &[
    "bit.tobit(2^31)",
    "bit.tobit(2^32)",
    "bit.tobit(2^32 + 5)",
    "bit.tobit(-1)",
    "bit.tobit(0.5)",
    "bit.tobit(1.5)",
    "bit.tobit(2.5)",
    "bit.tobit(-2.5)",
    "bit.tobit(1/0)",
    "bit.tobit(-1/0)",
    "bit.tobit(0/0)",
    "bit.tobit(2^53 + 3)",
    "bit.tobit(2^64 + 2^20)",
    "bit.tobit(' 0x1f ')",
    "bit.tobit('1e3')",
    "bit.tobit('0')",
    "bit.tobit(-0.0)",
    "bit.tobit(1e-300)",
    "bit.bnot(0)",
    "bit.bnot(-2^31)",
    "bit.bor(1, 2, 4, 2^31)",
    "bit.band(0xff, 0x0f, 0x3)",
    "bit.bxor(5, 3, 1)",
    "bit.band(7)",
    "bit.bor(1)",
    "bit.bxor(1, '2', 4.5)",
    "bit.lshift(1, 31)",
    "bit.lshift(1, 32)",
    "bit.lshift(1, -1)",
    "bit.lshift(1, 33.5)",
    "bit.rshift(-1, 0)",
    "bit.rshift(-1, 28)",
    "bit.arshift(-256, 4)",
    "bit.arshift(2^31, 31)",
    "bit.rol(0x12345678, 12)",
    "bit.ror(0x12345678, 12)",
    "bit.rol(0x12345678, 0)",
    "bit.ror(0x12345678, 0)",
    "bit.rol(0x12345678, 32)",
    "bit.bswap(0x12345678)",
    "bit.bswap(-1)",
    "bit.tohex(-1, -4)",
    "bit.tohex(0xabcdef)",
    "bit.tohex(0xabcdef, 2^31)",
    "bit.tohex(0xabcdef, -2^31)",
    "bit.tohex(0xabcdef, 0)",
    "bit.tohex(0xabcdef, -9)",
    "bit.tohex(0xabcdef, 9)",
    "bit.tohex(0xabcdef, 2^32 + 3)",
    "bit.tohex(0xabcdef, -3.5)",
    "bit.tohex('12')",
    "bit.tohex('0x10')",
    "bit.tohex('x')",
    "bit.tohex()",
    "bit.tohex({})",
    "bit.tohex(nil)",
    "bit.tohex(1, nil)",
    "bit.tohex(1, 'x')",
    "bit.band()",
    "bit.band(1, nil)",
    "bit.band(1, 'x', 'y')",
    "bit.band(true)",
    "bit.bor(1, 2, function() end)",
    "bit.lshift(1)",
    "bit.rol()",
    "bit.bswap(coroutine.create(function() end))",
    "bit.tobit('0x')",
    "bit.tobit('')",
];

const STRUCT: &[&str] = &[
    "struct.pack('>i', 1)",
    "struct.pack('<i', -2)",
    "struct.pack('bBhHlLT', -1, 255, -2, 65535, -3, 2^63, 7)",
    "struct.pack('>bBhHlLT', -1, 255, -2, 65535, -3, 2^63, 7)",
    "struct.pack('i1i2i3i5i7i8', 1, 2, 3, 4, 5, 6)",
    "struct.pack('<i16', -1)",
    "struct.pack('>I32', 2^64 - 2^12)",
    "struct.pack('i0', 1)",
    "struct.pack('>L', 0/0)",
    "struct.pack('>L', 2^64)",
    "struct.pack('>L', 1e30)",
    "struct.pack('>l', -1e30)",
    "struct.pack('>L', -1)",
    "struct.pack('>L', 2^63)",
    "struct.pack('>L', 2^63 + 2^12)",
    "struct.pack('>l', -(0/0))",
    "struct.pack('>l', 1/0)",
    "struct.pack('>l', -1/0)",
    "struct.pack('b', 1.9)",
    "struct.pack('b', -1.9)",
    "struct.pack('b', 300)",
    "struct.pack('b', '12')",
    "struct.pack('b', ' 0x10 ')",
    "struct.pack('>f', 1.1)",
    "struct.pack('<f', -2.5)",
    "struct.pack('f', 1e300)",
    "struct.pack('>d', 0.1)",
    "struct.pack('>d', 0/0)",
    "struct.pack('c0', 0)",
    "struct.pack('s', 1.5)",
    "struct.pack('s', 'ab\\0cd')",
    "struct.pack('c3', 'abcdef')",
    "struct.pack('c0', 'abcdef')",
    "struct.pack('c', 'xyz')",
    "struct.pack('x')",
    "struct.pack('bxb', 1, 2)",
    "struct.pack('!bi', 1, 2)",
    "struct.pack('!4bd', 1, 2)",
    "struct.pack('!bh!2d', 1, 2, 3)",
    "struct.pack('!16bd', 1, 2)",
    "struct.pack('!i3bi3', 1, 2, 3)",
    "struct.pack('!bc3i', 1, 'abc', 2)",
    "struct.pack('!bsi', 1, 'abc', 2)",
    "struct.pack('!8bT', 1, 2)",
    "struct.pack(' < > b ', 1)",
    "struct.pack('b\\0b', 1, 2)",
    "struct.pack(12, 1)",
    "struct.pack('')",
    "struct.pack('i33', 1)",
    "struct.pack('i2147483647', 1)",
    "struct.pack('i2147483648', 1)",
    "struct.pack('c9999999999', 'a')",
    "struct.pack('c2147483647', 'a')",
    "struct.pack('c5', 'ab')",
    "struct.pack('bc5', 1, 'ab')",
    "struct.pack('=i', 1)",
    "struct.pack('q', 1)",
    "struct.pack('!3i', 1)",
    "struct.pack('!0i', 1)",
    "struct.pack('!')",
    "struct.pack('!2147483648')",
    "struct.pack('s')",
    "struct.pack('b')",
    "struct.pack('b', 'x')",
    "struct.pack('c', {})",
    "struct.pack('d', true)",
    "struct.pack()",
    "struct.pack(nil)",
    "struct.pack('bb', 1)",
    "struct.pack('bb', 1, nil)",
    "struct.unpack('>i', '\\0\\0\\1\\2')",
    "struct.unpack('<i', '\\254\\255\\255\\255')",
    "struct.unpack('bBhHlLT', struct.pack('bBhHlLT', -1, 255, -2, 65535, -3, 2^63, 7))",
    "struct.unpack('>bBhHlLT', struct.pack('>bBhHlLT', -1, 255, -2, 65535, -3, 2^63, 7))",
    "struct.unpack('i17', string.rep('a', 36))",
    "struct.unpack('I17', string.rep('a', 36))",
    "struct.unpack('>i17', string.rep('\\255', 17))",
    "struct.unpack('i0I0', '')",
    "struct.unpack('i3I3', '\\255\\255\\255\\255\\255\\255')",
    "struct.unpack('>i16', string.rep('\\128', 16))",
    "struct.unpack('>I32', string.rep('\\255', 32))",
    "struct.unpack('i32', string.rep('\\1', 32))",
    "struct.unpack('>f<f', struct.pack('>f<f', 1.1, -2.5))",
    "struct.unpack('d', struct.pack('d', 0.1))",
    "struct.unpack('f', struct.pack('f', 0.1))",
    "struct.unpack('f', '\\255\\255\\255\\127')",
    "struct.unpack('d', '\\0\\0\\0\\0\\0\\0\\240\\127')",
    "struct.unpack('i', 'abcd', 2)",
    "struct.unpack('i', 'abcde', 2)",
    "struct.unpack('i', 'abcde', '2')",
    "struct.unpack('i', 'abcde', 'x')",
    "struct.unpack('i', 'abcde', nil)",
    "struct.unpack('i', 'abcde', 2.9)",
    "struct.unpack('i', 'abcde', 1, 'junk')",
    "struct.unpack('i', 'abcd', 0)",
    "struct.unpack('i', 'abcd', 0.5)",
    "struct.unpack('i', 'abcd', -1)",
    "struct.unpack('i', 'abcd', 2^70)",
    "struct.unpack('i', 'abcd', 0/0)",
    "struct.unpack('i', 'abcd', {})",
    "struct.unpack('i', 'abcd', 5)",
    "struct.unpack('', 'abc', -1)",
    "struct.unpack('', 'abc', 100)",
    "struct.unpack('', 'abc', 2^70)",
    "struct.unpack(' ', 'abc', 100)",
    "struct.unpack(' ', 'abc', 4)",
    "struct.unpack('!4i', 'abcd', -1)",
    "struct.unpack('i')",
    "struct.unpack(nil, 'x')",
    "struct.unpack()",
    "struct.unpack('b', 12)",
    "struct.unpack('b', 1e-300)",
    "struct.unpack('bq', 'aa')",
    "struct.unpack('b=', 'aa')",
    "struct.unpack('s', 'ab\\0cd')",
    "struct.unpack('s s', 'ab\\0cd\\0')",
    "struct.unpack('s', 'abc')",
    "struct.unpack('bs', '\\1')",
    "struct.unpack('c0', 'abc')",
    "struct.unpack('c0', '3')",
    "struct.unpack('c0', '3', 1)",
    "struct.unpack('bc0', '\\2abc')",
    "struct.unpack('bc0', '\\255abc')",
    "struct.unpack('bc0', '\\0abc')",
    "struct.unpack('c1c0', '3abc')",
    "struct.unpack('c1c0', 'xabc')",
    "struct.unpack('c2c0', '0x2abc')",
    "struct.unpack('dc0', struct.pack('d', 2^64))",
    "struct.unpack('dc0', struct.pack('d', -1))",
    "struct.unpack('dc0', struct.pack('d', 0/0))",
    "struct.unpack('dc0', struct.pack('d', 1.9) .. 'abc')",
    "struct.unpack('c3', 'abcdef')",
    "struct.unpack('c3', 'ab')",
    "struct.unpack('c', 'xyz')",
    "struct.unpack('x', '')",
    "struct.unpack('xb', '\\1\\2')",
    "struct.unpack('!bi', struct.pack('!bi', 1, 2))",
    "struct.unpack('!bi', '\\1\\0\\0\\0\\2\\0\\0')",
    "struct.unpack('!bh!2d', struct.pack('!bh!2d', 1, 2, 3))",
    "struct.unpack('!i3bi3', struct.pack('!i3bi3', 1, 2, 3))",
    "struct.unpack('!bc3i', struct.pack('!bc3i', 1, 'abc', 2))",
    "struct.unpack('!bsi', struct.pack('!bsi', 1, 'abc', 2))",
    "struct.unpack('!4i', 'xxabcd', 3)",
    "struct.unpack('!4i', 'xxxxabcd', 3)",
    "struct.unpack('b\\0b', '\\1\\2')",
    "struct.unpack('i33', 'a')",
    "struct.unpack('c9999999999', 'a')",
    "struct.unpack('!3', 'a')",
    "struct.unpack('<>', 'a')",
    "select('#', struct.unpack(string.rep('b', 7997), string.rep('a', 8000)))",
    "struct.unpack(string.rep('b', 7998), string.rep('a', 8000))",
    "select('#', struct.unpack(string.rep('b', 7996), string.rep('a', 8000), 1))",
    "struct.unpack(string.rep('b', 7997), string.rep('a', 8000), 1)",
    "struct.unpack(string.rep('b', 7996) .. 'x', string.rep('a', 8000), 1, 2)",
    "select('#', struct.unpack(string.rep('bc0', 9000), string.rep('\\0', 9000)))",
    "struct.size('i')",
    "struct.size('!bi')",
    "struct.size('!4bd')",
    "struct.size('bi')",
    "struct.size('!bh!2d')",
    "struct.size('c2147483647c2147483647')",
    "struct.size(string.rep('c2147483647', 20))",
    "struct.size('=')",
    "struct.size('!')",
    "struct.size('!0')",
    "struct.size('!16bd')",
    "struct.size('i3i3')",
    "struct.size('!i3bi3')",
    "struct.size(' <> ')",
    "struct.size('xxT')",
    "struct.size(12)",
    "struct.size()",
    "struct.size('s')",
    "struct.size('c0')",
    "struct.size('c')",
    "struct.size('q')",
    "struct.size('bqb')",
    "struct.size('i33')",
    "struct.size('c9999999999')",
    "struct.size('b\\0b')",
    "struct.size('!bc3i')",
    "struct.size('<h>l!2fd')",
    "struct.unpack('c2147483647', 'a')",
    "struct.unpack('i', 'abcd', -2^62)",
    "struct.unpack('bc0', '\\127')",
    "struct.unpack('dc0', struct.pack('d', 2^63))",
    "struct.pack(string.rep('!', 100000))",
    "struct.pack(string.rep('!16x', 1000) .. 'd', 1) == string.rep('\\0', 1000) .. struct.pack('d', 1)",
    "struct.unpack('<I8', struct.pack('<i8', -2^53))",
    "struct.unpack('>h', struct.pack('>H', 65535))",
    "#struct.pack(string.rep('s', 100), unpack((function() local t = {} for i = 1, 100 do t[i] = string.rep('y', 1000) end return t end)()))",
];
