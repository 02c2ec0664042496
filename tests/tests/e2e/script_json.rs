//! The scripts' JSON and MessagePack libraries — `cjson` and `cmsgpack` — differentially
//! against redis-server 7.0: `EVAL <script> 0` for scripts covering their encodings (every
//! integer size boundary, floats and doubles, strings at every length boundary, arrays
//! and maps, nesting), their configuration, their limits (nesting depths, Lua's C stack)
//! and every error, with the same reply expected from both servers.
//!
//! A script that changes a `cjson` setting restores it, so that no script depends on
//! which Lua state (which thread, which earlier script) runs it.

use goblin_tests::Differential;
use goblin_tests::diff::{ask_both, verdict};

/// Sends `EVAL <script> 0` for each script to both servers; fails listing every script
/// whose replies differ.
fn eval_all(d: &mut Differential, scripts: &[&str]) {
    let mut failures = Vec::new();
    for script in scripts {
        let args: Vec<Vec<u8>> = vec![b"EVAL".to_vec(), script.as_bytes().to_vec(), b"0".to_vec()];
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let (got, want) = ask_both(&mut d.g, &mut d.r, &refs);
        if let Err(e) = verdict(&got, &want, goblin_tests::diff::How::Exact, &args) {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} scripts answered differently:\n{}",
        failures.len(),
        scripts.len(),
        failures.join("\n")
    );
}

#[test]
fn cjson_matches_redis() {
    eval_all(&mut Differential::new(), CJSON);
}

#[test]
fn cmsgpack_matches_redis() {
    eval_all(&mut Differential::new(), CMSGPACK);
}

#[test]
fn edge_cases_match_redis() {
    eval_all(&mut Differential::new(), EDGE);
}

#[test]
fn decoded_tables_reply_as_redis_does() {
    eval_all(&mut Differential::new(), TABLES);
}

/// Every integer at each MessagePack size boundary (and either side of it), packed and
/// unpacked; doubles that are and are not exact floats; strings of every header's
/// boundary length.
#[test]
fn cmsgpack_boundaries_match_redis() {
    let mut scripts = Vec::new();
    let bounds: [i128; 10] = [
        0,
        127,
        255,
        65535,
        1 << 32,
        (1 << 32) - 1,
        1 << 53,
        -32,
        -128,
        -32768,
    ];
    let mut values = Vec::new();
    for b in bounds {
        for v in [b - 1, b, b + 1] {
            values.push(v.to_string());
            values.push((-v).to_string());
        }
    }
    for e in [31, 63, 64] {
        values.push(format!("2^{e}"));
        values.push(format!("-2^{e}"));
        values.push(format!("(2^{e} - 1)"));
    }
    for f in [
        "0.5", "0.1", "1/3", "1e38", "3.4e38", "3.5e38", "1e-45", "1e-46", "2^-149", "-0.0",
    ] {
        values.push(f.to_string());
    }
    for v in &values {
        scripts.push(format!(
            "local s = cmsgpack.pack({v}) local u = cmsgpack.unpack(s) return {{s, string.format('%.17g', u), u == {v} and 1 or 0}}"
        ));
    }
    for n in [0, 1, 31, 32, 255, 256, 65535, 65536, 100000] {
        scripts.push(format!(
            "local s = cmsgpack.pack(string.rep('x', {n})) local u = cmsgpack.unpack(s) return {{s:sub(1, 6), #s, #u, u == string.rep('x', {n}) and 1 or 0}}"
        ));
        scripts.push(format!(
            "local t = {{}} for i = 1, {n} do t[i] = i % 200 end local s = cmsgpack.pack(t) return {{s:sub(1, 6), #s, #cmsgpack.unpack(s)}}"
        ));
    }
    let refs: Vec<&str> = scripts.iter().map(String::as_str).collect();
    eval_all(&mut Differential::new(), &refs);
}

/// Redis raises a library function's error with the caller's position
/// (`user_script:1: …`) even when the function is called in tail position: its functions
/// are C functions, whose callers Lua 5.1 keeps. Goblin's cjson and cmsgpack functions
/// are Lua functions around Rust ones (for exact numbers and many results), which a tail
/// call would put in the caller's place: a script's calls of a table's field in tail
/// position are made plain calls in its bytecode, and the errors are the same, positions
/// included.
#[test]
fn errors_of_tail_called_functions_match_redis() {
    let mut d = Differential::new();
    for script in TAIL_CALLED {
        let args: [&[u8]; 3] = [b"EVAL", script.as_bytes(), b"0"];
        let (got, want) = ask_both(&mut d.g, &mut d.r, &args);
        assert!(got.starts_with(b"-") && want.starts_with(b"-"), "{script}");
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "{script}"
        );
    }
}

/// cjson: encoding, decoding, configuration, limits and errors.
const CJSON: &[&str] = &[
    r##"return (cjson.encode({1,2,{a=1}}))"##,
    r##"return (cjson.encode({}))"##,
    r##"return (cjson.encode({{}, {{}}}))"##,
    r##"return (cjson.encode('a/b"c\\d\1\8\9\10\12\13\31\127\128\255 é'))"##,
    r##"return (cjson.encode({1.5, -0, 1e300, 123456789012345, 0.1, 1/3, 2^53, -2^63, 1e-5, 1e15, 1e16, 1e-300, 5e-324, 0.0001, 100}))"##,
    r##"return (cjson.encode({true, false, cjson.null}))"##,
    r##"return (cjson.encode({[1]=1, [2]=2, [4]=4}))"##,
    r##"return (cjson.encode({[1]=1, [11]=11}))"##,
    r##"return (cjson.encode({[1]=1, [2]=2, [3]=3, [6]=6}))"##,
    r##"return (cjson.encode({[1]=1, [10]=10}))"##,
    r##"return (cjson.encode({[0]=1}))"##,
    r##"return (cjson.encode({[-1]=1}))"##,
    r##"return (cjson.encode({[1.5]=1}))"##,
    r##"return (cjson.encode({[1]=1, a=2}))"##,
    r##"return (cjson.encode({[2^40]=1}))"##,
    r##"return (cjson.encode({a={b={c={}}}}))"##,
    r##"return (cjson.encode({1, nil, 3}))"##,
    r##"return (cjson.encode(nil))"##,
    r##"return (cjson.encode(12))"##,
    r##"return (cjson.encode(''))"##,
    r##"return (cjson.encode(function() end))"##,
    r##"return (cjson.encode({function() end}))"##,
    r##"return (cjson.encode({[true]=1}))"##,
    r##"return (cjson.encode({[{}]=1}))"##,
    r##"return (cjson.encode(1/0))"##,
    r##"return (cjson.encode(-1/0))"##,
    r##"return (cjson.encode(0/0))"##,
    r##"return (cjson.encode({[1/0]=1}))"##,
    r##"return (cjson.encode())"##,
    r##"return (cjson.encode(1, 2))"##,
    r##"local t = {} t[1] = t return (cjson.encode(t))"##,
    r##"local t = {} t.a = t return (cjson.encode(t))"##,
    r##"local t = {} local c = t for i=1,999 do c[1] = {} c = c[1] end return cjson.encode(t):sub(1, 10) .. #cjson.encode(t)"##,
    r##"local t = {} local c = t for i=1,1000 do c[1] = {} c = c[1] end return (cjson.encode(t))"##,
    r##"return (cjson.encode(coroutine.create(function() end)))"##,
    r##"local x = cjson.encode_invalid_numbers(true) local s = cjson.encode({1/0, -1/0, 0/0}) cjson.encode_invalid_numbers(false) return tostring(x) .. s"##,
    r##"local x = cjson.encode_invalid_numbers('null') local s = cjson.encode({1/0, -1/0, 0/0}) cjson.encode_invalid_numbers('off') return tostring(x) .. s"##,
    r##"local x = cjson.encode_number_precision(3) local s = cjson.encode({1/3, 12345, 0.00012345}) cjson.encode_number_precision(14) return x .. s"##,
    r##"local x = cjson.encode_number_precision(1) local s = cjson.encode({2.5, 3.5, 0.125, 99}) cjson.encode_number_precision(14) return x .. s"##,
    r##"local a, b, c = cjson.encode_sparse_array(true) local s = cjson.encode({[1]=1, [20]=2}) cjson.encode_sparse_array(false) return tostring(a) .. b .. c .. s"##,
    r##"local a, b, c = cjson.encode_sparse_array(false, 0) local s = cjson.encode({[1]=1, [20]=2}) cjson.encode_sparse_array(false, 2, 10) return tostring(a) .. b .. c .. s"##,
    r##"local a, b, c = cjson.encode_sparse_array(false, 2, 30) local s = cjson.encode({[1]=1, [20]=2}) cjson.encode_sparse_array(false, 2, 10) return tostring(a) .. b .. c .. s"##,
    r##"local a, b, c = cjson.encode_sparse_array('on', 1, 0) local s = cjson.encode({[1]=1, [3]=2}) cjson.encode_sparse_array(false, 2, 10) return tostring(a) .. b .. c .. s"##,
    r##"local ok, e = pcall(cjson.encode_sparse_array, 'on', -1) local a, b, c = cjson.encode_sparse_array() cjson.encode_sparse_array(false) return e .. tostring(a) .. b .. c"##,
    r##"local ok, e = pcall(cjson.encode_sparse_array, 'maybe') return e"##,
    r##"local ok, e = pcall(cjson.encode_sparse_array, true, 'x') cjson.encode_sparse_array(false) return e"##,
    r##"local ok, e = pcall(cjson.encode_sparse_array, true, 1, 2, 3) return e"##,
    r##"local ok, e = pcall(cjson.encode_max_depth, 0) return e"##,
    r##"local ok, e = pcall(cjson.encode_max_depth, 1, 2) return e"##,
    r##"local ok, e = pcall(cjson.encode_number_precision, 15) return e"##,
    r##"local ok, e = pcall(cjson.encode_keep_buffer, 1) return e"##,
    r##"local ok, e = pcall(cjson.encode_invalid_numbers, {}) return e"##,
    r##"local ok, e = pcall(cjson.decode_invalid_numbers, 'both') return e"##,
    r##"local x = cjson.encode_max_depth(2^32 + 5) local y = cjson.encode_max_depth(1000) return x .. ' ' .. y"##,
    r##"local x = cjson.encode_max_depth('7') local y = cjson.encode_max_depth(1000) return x .. ' ' .. y"##,
    r##"return (cjson.encode({cjson.encode_invalid_numbers(), cjson.decode_invalid_numbers(), cjson.encode_keep_buffer(), cjson.encode_max_depth(), cjson.decode_max_depth(), cjson.encode_number_precision(), cjson.encode_sparse_array()}))"##,
    r##"return (cjson.encode({cjson.encode_keep_buffer(false), cjson.encode_keep_buffer('on'), cjson.encode_keep_buffer()}))"##,
    r##"local x = cjson.encode_max_depth(2) local ok, e = pcall(cjson.encode, {{{}}}) local s = cjson.encode({{}}) cjson.encode_max_depth(1000) return x .. e .. s"##,
    r##"local c = cjson.new() c.encode_max_depth(1) local ok, e = pcall(c.encode, {{}}) return e .. cjson.encode({{}}) .. c._NAME .. c._VERSION .. tostring(c.null == cjson.null) .. tostring(c.new ~= nil)"##,
    r##"return cjson._NAME .. cjson._VERSION .. tostring(cjson.null) .. type(cjson.null)"##,
    r##"return (cjson.encode(cjson.decode('[1,2,3,{"a":[true,false,null]}]')))"##,
    r##"return (cjson.encode(cjson.decode('  {"a" : 1 , "b":[ ] , "c" :{} }  ')))"##,
    r##"return (cjson.encode(cjson.decode('"\\u00e9\\u20ac\\ud83d\\ude00\\/\\b\\f\\n\\r\\t\\"\\\\"')))"##,
    r##"return (cjson.decode('"\\u0041\\u00"'))"##,
    r##"return (cjson.decode('"\\ud83d"'))"##,
    r##"return (cjson.decode('"\\ud83dx"'))"##,
    r##"return (cjson.decode('"\\ude00"'))"##,
    r##"return (cjson.decode('"\\ud83d\\u0041"'))"##,
    r##"return (cjson.decode('"\\x"'))"##,
    r##"return (cjson.decode('"abc'))"##,
    r##"return (cjson.decode('x'))"##,
    r##"return (cjson.decode(''))"##,
    r##"return (cjson.decode(' '))"##,
    r##"return (cjson.decode('[1,2'))"##,
    r##"return (cjson.decode('[1,2,]'))"##,
    r##"return (cjson.decode('[1 2]'))"##,
    r##"return (cjson.decode('{"a" 1}'))"##,
    r##"return (cjson.decode('{"a":1,}'))"##,
    r##"return (cjson.decode('{1:1}'))"##,
    r##"return (cjson.decode('{"a":1 "b":2}'))"##,
    r##"return (cjson.decode('[1]x'))"##,
    r##"return (cjson.decode('[1] [2]'))"##,
    r##"return (cjson.decode('tru'))"##,
    r##"return (cjson.decode('nul'))"##,
    r##"return (cjson.decode('falsey'))"##,
    r##"return (cjson.decode('-'))"##,
    r##"return (cjson.decode('+1'))"##,
    r##"return (cjson.decode('.5'))"##,
    r##"return (cjson.decode('\0a'))"##,
    r##"return (cjson.decode('a\0'))"##,
    r##"return (cjson.encode(cjson.decode('[1]\0garbage')))"##,
    r##"return (cjson.encode(cjson.decode('"a\0b"')))"##,
    r##"return (cjson.decode())"##,
    r##"return (cjson.decode(1, 2))"##,
    r##"return (cjson.decode({}))"##,
    r##"return (cjson.decode(nil))"##,
    r##"return (cjson.encode({cjson.decode(123)}))"##,
    r##"return (cjson.encode(cjson.decode('[0, -0, 1e2, 1E-2, 0.5, -1.25e+3, 12345678901234567890, 1e400, -1e400, 1e-400]')))"##,
    r##"return (cjson.encode({cjson.decode('[0x10, 0X1p4, 010, -0x1A, +5, inf, -Infinity, Inf]')}))"##,
    r##"return tostring(cjson.decode('nan')) .. tostring(cjson.decode('-nan')) .. tostring(cjson.decode('NaN'))"##,
    r##"local x = cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, '0x10') cjson.decode_invalid_numbers(true) return tostring(x) .. e"##,
    r##"local x = cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, '[1, 010]') cjson.decode_invalid_numbers(true) return tostring(x) .. e"##,
    r##"local x = cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, 'inf') cjson.decode_invalid_numbers(true) return tostring(x) .. e"##,
    r##"local x = cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, '+1') cjson.decode_invalid_numbers(true) return tostring(x) .. e"##,
    r##"local x = cjson.decode_invalid_numbers(false) local s = cjson.encode(cjson.decode('[-0.5, 0, 10, 1e5]')) cjson.decode_invalid_numbers(true) return tostring(x) .. s"##,
    r##"return (cjson.decode('"\255\254 raw \1 bytes"'))"##,
    r##"local ok, e = pcall(cjson.decode, string.rep('[', 1001)) return e"##,
    r##"local ok, e = pcall(cjson.decode, string.rep('[', 1000)) return e"##,
    r##"return #cjson.encode(cjson.decode(string.rep('[', 1000) .. string.rep(']', 1000)))"##,
    r##"local ok, e = pcall(cjson.decode, string.rep('{"a":', 1001)) return e"##,
    r##"local x = cjson.decode_max_depth(100000) local ok, e = pcall(cjson.decode, string.rep('[', 10000)) cjson.decode_max_depth(1000) return x .. e"##,
    r##"local x = cjson.decode_max_depth(100000) local ok, e = pcall(cjson.decode, string.rep('{"a":', 10000)) cjson.decode_max_depth(1000) return x .. e"##,
    r##"local x = cjson.decode_max_depth(100000) local ok, e = pcall(cjson.decode, string.rep('[{"a":', 10000)) cjson.decode_max_depth(1000) return x .. e"##,
    r##"local x = cjson.decode_max_depth(3) local ok, e = pcall(cjson.decode, '[[[[1]]]]') cjson.decode_max_depth(1000) return x .. e"##,
    r##"local t = {} local c = t for i=1,10000 do c[1] = {} c = c[1] end cjson.encode_max_depth(100000) local ok, e = pcall(cjson.encode, t) cjson.encode_max_depth(1000) return e"##,
    r##"local t = {} local c = t for i=1,10000 do c.a = {} c = c.a end cjson.encode_max_depth(100000) local ok, e = pcall(cjson.encode, t) cjson.encode_max_depth(1000) return e"##,
    r##"local t = {} local c = t for i=1,10000 do c[1] = {a={}} c = c[1].a end cjson.encode_max_depth(100000) local ok, e = pcall(cjson.encode, t) cjson.encode_max_depth(1000) return e"##,
    r##"local t = {} local c = t for i=1,7000 do c[1] = {} c = c[1] end cjson.encode_max_depth(100000) local s = cjson.encode(t) cjson.encode_max_depth(1000) return #s .. s:sub(1, 5)"##,
    r##"local t = {} local c = t for i=1,7000 do c[1] = {} c = c[1] end cjson.decode_max_depth(100000) cjson.encode_max_depth(100000) local s = cjson.encode(cjson.decode(cjson.encode(t))) cjson.encode_max_depth(1000) cjson.decode_max_depth(1000) return #s"##,
    r##"local t = {} for i = 1, 1000 do t[i] = {i, tostring(i), {x = i / 7}} end local s = cjson.encode(t) return #s .. ' ' .. cjson.encode(cjson.decode(s)[999])"##,
    r##"local t = {} for i = 1, 50 do t['k' .. i] = i end return (cjson.encode(t))"##,
    r##"local t = {} for i = 1, 50 do t[i * 1.5] = i end return (cjson.encode(t))"##,
    r##"return (cjson.encode({[-0]=1}))"##,
    r##"return (cjson.encode({-0, 1e-300, -1e-320, 0}))"##,
    r##"return (cjson.encode({[1e-300]=5}))"##,
    r##"return (cjson.encode(-0))"##,
    r##"return (cjson.encode(1e-300))"##,
    r##"return (cjson.encode({cjson.decode(1e-300)}))"##,
    r##"local d = cjson.decode local ok, e = pcall(function() local x = d() return x end) return e"##,
    r##"local ok, e = pcall(function() local x = cjson:decode() return x end) return e"##,
    r##"local ok, e = pcall(cjson.decode) return e"##,
    r##"local ok, e = pcall(function() local x = cjson.decode('x') return x end) return e"##,
    r##"local ok, e = pcall(cjson.decode, 'x') return e"##,
    r##"local x = cjson.decode('{') return x"##,
    r##"local x = cjson.decode('[') return x"##,
    r##"local x = cjson.decode('{"a":') return x"##,
    r##"local x = cjson.decode('{"a"') return x"##,
    r##"local x = cjson.decode('"\\u12') return x"##,
    r##"return select('#', cjson.encode_sparse_array()) .. select('#', cjson.encode({}))"##,
    r##"return cjson.encode(setmetatable({}, {__index = function() return 1 end}))"##,
    r##"return cjson.encode(setmetatable({1, 2}, {__len = function() return 5 end}))"##,
    r##"return cjson.encode({string.rep('x', 40000)}):sub(1, 3) .. #cjson.encode({string.rep('x', 40000)})"##,
];

/// cmsgpack: packing, unpacking, limits and errors.
const CMSGPACK: &[&str] = &[
    r##"return (cmsgpack.pack(0, 1, 127, 128, 255, 256, 65535, 65536, 2^32-1, 2^32, 2^53, 2^63, 2^64))"##,
    r##"return (cmsgpack.pack(-1, -32, -33, -128, -129, -32768, -32769, -2^31, -2^31-1, -2^53, -2^63, -2^64))"##,
    r##"return (cmsgpack.pack(0.5, 1.1, -2.25, 1e300, 1e-300, 3.4028234663852886e38, 3.4028235677973366e38, 1/0, -1/0, 0/0, -0))"##,
    r##"return (cmsgpack.pack(true, false, nil, cjson.null, {}, {1, 2}, {a=1}, {[1]=1, [3]=3}, coroutine.create(function() end)))"##,
    r##"return (cmsgpack.pack('', 'a', string.rep('x', 31), string.rep('y', 32)))"##,
    r##"return cmsgpack.pack(string.rep('a', 255)):sub(1, 4) .. #cmsgpack.pack(string.rep('a', 255))"##,
    r##"return cmsgpack.pack(string.rep('a', 256)):sub(1, 4) .. #cmsgpack.pack(string.rep('a', 256))"##,
    r##"return cmsgpack.pack(string.rep('a', 65535)):sub(1, 4) .. #cmsgpack.pack(string.rep('a', 65535))"##,
    r##"return cmsgpack.pack(string.rep('a', 65536)):sub(1, 6) .. #cmsgpack.pack(string.rep('a', 65536))"##,
    r##"local t = {} for i = 1, 15 do t[i] = i end return (cmsgpack.pack(t))"##,
    r##"local t = {} for i = 1, 16 do t[i] = i end return (cmsgpack.pack(t))"##,
    r##"local t = {} for i = 1, 65535 do t[i] = 0 end return cmsgpack.pack(t):sub(1, 4)"##,
    r##"local t = {} for i = 1, 65536 do t[i] = 0 end return cmsgpack.pack(t):sub(1, 6)"##,
    r##"local t = {} for i = 1, 15 do t['k' .. i] = i end return (cmsgpack.pack(t))"##,
    r##"local t = {} for i = 1, 16 do t['k' .. i] = i end return (cmsgpack.pack(t))"##,
    r##"local t = {} for i = 1, 65536 do t['k' .. i] = 0 end return cmsgpack.pack(t):sub(1, 6)"##,
    r##"return (cmsgpack.pack({[1.5]=1}, {[0]=1}, {[-1]=2}, {[2^31]=1}, {[2^32+1]=7}, {[1]=1, [2]=2, x=3}))"##,
    r##"local t = {} t[1] = t return (cmsgpack.pack(t))"##,
    r##"local t = {} t.a = t return (cmsgpack.pack(t))"##,
    r##"local t = 1 for i = 1, 18 do t = {t} end return (cmsgpack.pack(t))"##,
    r##"return (cmsgpack.pack({[{}] = {}, [true] = false}))"##,
    r##"return (cmsgpack.pack())"##,
    r##"local ok, e = pcall(cmsgpack.pack) return e"##,
    r##"local ok, e = pcall(function() local x = cmsgpack.pack() return x end) return e"##,
    r##"local ok, e = pcall(cmsgpack.pack, unpack({}, 1, 4001)) return e"##,
    r##"return #cmsgpack.pack(unpack({}, 1, 4000))"##,
    r##"return (cjson.encode({cmsgpack.unpack(cmsgpack.pack(0, 1, 127, 128, 255, 256, 65535, 65536, 2^32-1, 2^32, 2^53))}))"##,
    r##"return (cjson.encode({cmsgpack.unpack(cmsgpack.pack(-1, -32, -33, -128, -129, -32768, -32769, -2^31, -2^31-1, -2^53))}))"##,
    r##"local t = {cmsgpack.unpack(cmsgpack.pack(0.5, 1.1, -2.25, 1e300, 1e-300, 1/0, -1/0, -0, 2^63, -2^63))} local r = {} for i = 1, #t do r[i] = string.format('%.17g', t[i]) end return table.concat(r, ' ')"##,
    r##"return (cjson.encode({cmsgpack.unpack(cmsgpack.pack(true, false, 'abc', {1, 2, {3}}, {a = {b = 'c'}}))}))"##,
    r##"local t = {cmsgpack.unpack(cmsgpack.pack(1, nil, 3))} return select('#', cmsgpack.unpack(cmsgpack.pack(1, nil, 3))) .. tostring(t[2])"##,
    r##"local s = cmsgpack.pack(string.rep('a', 31), string.rep('b', 32), string.rep('c', 255), string.rep('d', 256), string.rep('e', 65535), string.rep('f', 65536)) local t = {cmsgpack.unpack(s)} return #s .. ' ' .. #t[1] .. #t[2] .. #t[3] .. #t[4] .. #t[5] .. #t[6]"##,
    r##"return (cjson.encode({cmsgpack.unpack('\204\255\205\255\255\206\255\255\255\255\207\0\0\0\1\0\0\0\0')}))"##,
    r##"return (cjson.encode({cmsgpack.unpack('\208\128\209\128\0\210\128\0\0\0\211\255\255\255\255\255\255\255\255')}))"##,
    r##"return (cjson.encode({cmsgpack.unpack('\207\255\255\255\255\255\255\255\255\207\128\0\0\0\0\0\0\0\211\128\0\0\0\0\0\0\1')}))"##,
    r##"return (cjson.encode({cmsgpack.unpack('\127\224\255\0')}))"##,
    r##"return (cjson.encode({cmsgpack.unpack('\202\63\192\0\0\203\63\248\0\0\0\0\0\0')}))"##,
    r##"return (cjson.encode({cmsgpack.unpack('\217\3abc\218\0\2de\219\0\0\0\1f\163ghi\160')}))"##,
    r##"return (cjson.encode({cmsgpack.unpack('\220\0\2\1\2\221\0\0\0\1\3\222\0\1\161a\1\223\0\0\0\1\161b\2\146\1\2\130\161c\1\161d\2\144\128')}))"##,
    r##"return (cjson.encode({cmsgpack.unpack('\192\194\195')}))"##,
    r##"local ok, e = pcall(cmsgpack.unpack, '\193') return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack, '\196\1a') return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack, '\212\1\1') return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack, '\145') return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack, '\146\1') return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack, '\129\1') return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack, '\205\1') return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack, '\217\5abc') return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack, '\219\255\255\255\255abc') return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack, '\221\255\255\255\255\1\2') return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack, '\165ab') return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack, '\1\2\193') return e"##,
    r##"return select('#', cmsgpack.unpack(''))"##,
    r##"local ok, e = pcall(cmsgpack.unpack, '\129\192\1') return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack, '\129\203\255\248\0\0\0\0\0\0\1') return e"##,
    r##"local x = cmsgpack.unpack('\129\192\1') return x"##,
    r##"local x = cmsgpack.unpack('\193') return x"##,
    r##"local x = cmsgpack.unpack('\145') return x"##,
    r##"return (cjson.encode({cmsgpack.unpack(12)}))"##,
    r##"return (cjson.encode({cmsgpack.unpack('\1', 'x', {})}))"##,
    r##"local ok, e = pcall(cmsgpack.unpack) return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack, {}) return e"##,
    r##"local ok, e = pcall(function() local x = cmsgpack.unpack() return x end) return e"##,
    r##"return (cjson.encode({cmsgpack.unpack_one('\1\2\3')}))"##,
    r##"return (cjson.encode({cmsgpack.unpack_one('\1\2\3', 1)}))"##,
    r##"return (cjson.encode({cmsgpack.unpack_one('\1\2\3', 2)}))"##,
    r##"return (cjson.encode({cmsgpack.unpack_one('\1\2\3', 3)}))"##,
    r##"return (cjson.encode({cmsgpack.unpack_one('\1\2\3', '1')}))"##,
    r##"local ok, e = pcall(cmsgpack.unpack_one, '\1\2', 3) return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack_one, '\1\2', 4) return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack_one, '\1\2', -1) return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack_one, '\1\2', 'x') return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack_one) return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack_one, nil, 1) return e"##,
    r##"return (cjson.encode({cmsgpack.unpack_limit('\1\2\3', 2)}))"##,
    r##"return (cjson.encode({cmsgpack.unpack_limit('\1\2\3', 2, 1)}))"##,
    r##"return (cjson.encode({cmsgpack.unpack_limit('\1\2\3', 0)}))"##,
    r##"return (cjson.encode({cmsgpack.unpack_limit('\1\2\3', 0, 1)}))"##,
    r##"return (cjson.encode({cmsgpack.unpack_limit('\1\2\3', 5)}))"##,
    r##"return (cjson.encode({cmsgpack.unpack_limit('\1\2\3', 1.9)}))"##,
    r##"local ok, e = pcall(cmsgpack.unpack_limit, '\1\2', -1) return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack_limit, '\1\2', 1, -5) return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack_limit, '\1\2\3') return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack_limit, '\1\2\3', {}) return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack_limit, '\1\2', 1, 9) return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack, string.rep('\145', 10000)) return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack, string.rep('\129\0', 10000)) return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack, string.rep('\129\145', 10000)) return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack, string.rep('\145', 3998) .. '\1') return tostring(ok) .. type(e)"##,
    r##"local ok, e = pcall(cmsgpack.unpack, string.rep('\145', 3999) .. '\1') return tostring(ok) .. (type(e) == 'table' and 'table' or tostring(e))"##,
    r##"local ok, e = pcall(cmsgpack.unpack, string.rep('\129\0', 3999) .. '\1') return tostring(ok) .. (type(e) == 'table' and 'table' or tostring(e))"##,
    r##"local ok, e = pcall(cmsgpack.unpack, string.rep('\129\0', 4000) .. '\1') return tostring(ok) .. (type(e) == 'table' and 'table' or tostring(e))"##,
    r##"return select('#', cmsgpack.unpack(string.rep('\0', 7999)))"##,
    r##"local ok, e = pcall(cmsgpack.unpack, string.rep('\0', 8000)) return e"##,
    r##"return select('#', cmsgpack.unpack(string.rep('\0', 7998), 'x'))"##,
    r##"local ok, e = pcall(cmsgpack.unpack, string.rep('\0', 7999), 'x') return tostring(ok) .. (type(e) == 'table' and 'table' or tostring(e))"##,
    r##"return select('#', cmsgpack.unpack(string.rep('\144', 7999)))"##,
    r##"return select('#', cmsgpack.unpack(string.rep('\161a', 7999)))"##,
    r##"return select('#', cmsgpack.unpack_limit(string.rep('\0', 9000), 7998))"##,
    r##"local ok, e = pcall(cmsgpack.unpack_limit, string.rep('\0', 9000), 7999) return e"##,
    r##"local ok, e = pcall(cmsgpack.unpack_limit, string.rep('\0', 9000), 8000) return e"##,
    r##"local s = cmsgpack.pack({a = {1, 2, {b = true}}, c = 'd'}) local t = cmsgpack.unpack(s) return cmsgpack.pack(t) == s and 'same' or 'differs'"##,
    r##"local t = {} for i = 1, 1000 do t[i] = {i, tostring(i), i / 7} end local s = cmsgpack.pack(t) local u = cmsgpack.unpack(s) return #s .. ' ' .. cmsgpack.pack(u):len() .. ' ' .. u[999][2] .. ' ' .. u[999][3]"##,
    r##"return cmsgpack._NAME .. ' ' .. cmsgpack._VERSION .. ' ' .. cmsgpack._COPYRIGHT .. ' ' .. cmsgpack._DESCRIPTION"##,
    r##"return cmsgpack.pack(setmetatable({1, 2}, {__index = function() return 9 end}))"##,
    r##"return (cmsgpack.pack(0/0 + 0))"##,
    r##"return (cmsgpack.pack(-0.0, 1e-320, 2^-149, 2^-150))"##,
];

/// Edge cases of numbers, strings, tokens, settings and both formats.
const EDGE: &[&str] = &[
    r##"return (cjson.encode({cjson.decode('[0x, 1]')}))"##,
    r##"return (cjson.encode({cjson.decode('0xg')}))"##,
    r##"return (cjson.encode({cjson.decode('-abc')}))"##,
    r##"return (cjson.encode({cjson.decode('[-inf, +inf, nan(123), -nan, infinity, INFINITY, iNf]')}))"##,
    r##"return (cjson.encode({cjson.decode('1.5e')}))"##,
    r##"return (cjson.encode({cjson.decode('1.5e+')}))"##,
    r##"return (cjson.encode({cjson.decode('00012')}))"##,
    r##"return (cjson.encode({cjson.decode('-0.0e0')}))"##,
    r##"return (cjson.encode({cjson.decode('1.')}))"##,
    r##"return (cjson.encode({cjson.decode('[1.e5, -1.]')}))"##,
    r##"return (cjson.encode({cjson.decode('0x1.fffffffffffffp1023')}))"##,
    r##"return (cjson.encode({cjson.decode('0x1p-1075')}))"##,
    r##"return (cjson.encode({cjson.decode('0x1.8p-1074')}))"##,
    r##"return (cjson.encode({cjson.decode('0X.8')}))"##,
    r##"return (cjson.encode({cjson.decode('123456789012345678901234567890e-20')}))"##,
    r##"return (cjson.encode({cjson.decode('2.2250738585072011e-308')}))"##,
    r##"return (cjson.encode({cjson.decode('4.9e-324')}))"##,
    r##"return (cjson.encode({cjson.decode('2.4703282292062327e-324')}))"##,
    r##"return (cjson.encode({cjson.decode('1e1000000000000000000000')}))"##,
    r##"return (cjson.encode({cjson.decode('0e1000000000000000000000')}))"##,
    r##"return (cjson.encode({cjson.decode('trueX')}))"##,
    r##"return (cjson.encode({cjson.decode('[true,false,null,"x"]')}))"##,
    r##"return (cjson.encode({cjson.decode('\t\r\n [ 1 ] \t\r\n')}))"##,
    r##"return (cjson.encode({cjson.decode('\v1')}))"##,
    r##"return (cjson.encode({cjson.decode('\f1')}))"##,
    r##"return (cjson.encode({cjson.decode('"\\u0000"')}))"##,
    r##"return (cjson.encode({cjson.decode('"\\uD800\\uDC00\\uDBFF\\uDFFF"')}))"##,
    r##"return (cjson.encode({cjson.decode('"\\uFFFF\\u0800\\u07FF\\u0080\\u007F"')}))"##,
    r##"return (cjson.encode({cjson.decode('"\\uDC00\\uD800"')}))"##,
    r##"return (cjson.encode({cjson.decode('"\\uD800\\uD800"')}))"##,
    r##"return (cjson.encode({cjson.decode('"\\uZZZZ"')}))"##,
    r##"return (cjson.encode({cjson.decode('"\\')}))"##,
    r##"return (cjson.encode({cjson.decode('"\\u')}))"##,
    r##"return (cjson.encode({cjson.decode('{"a":1,"a":2}')}))"##,
    r##"return (cjson.encode({cjson.decode('{"":{"":[]}}')}))"##,
    r##"return (cjson.encode({cjson.decode('{"1":1,"2":2}')}))"##,
    r##"return (cjson.encode({cjson.decode('[[],[[]],{}]')}))"##,
    r##"return (cjson.encode({cjson.decode('[1,,2]')}))"##,
    r##"return (cjson.encode({cjson.decode('{,}')}))"##,
    r##"return (cjson.encode({cjson.decode('{"a":}')}))"##,
    r##"return (cjson.encode({cjson.decode(':')}))"##,
    r##"return (cjson.encode({cjson.decode(']')}))"##,
    r##"return (cjson.encode({cjson.decode('nulll')}))"##,
    r##"return (cjson.encode({cjson.decode('Null')}))"##,
    r##"return (cjson.encode({cjson.decode('n')}))"##,
    r##"return (cjson.encode({cjson.decode('I')}))"##,
    r##"return (cjson.encode({cjson.decode('+')}))"##,
    r##"return (cjson.encode({cjson.decode('+x')}))"##,
    r##"return (cjson.encode({cjson.decode('-0x10')}))"##,
    r##"return (cjson.encode({cjson.decode('\200')}))"##,
    r##"return (cjson.encode({cjson.decode('-\200')}))"##,
    r##"return (cjson.encode({cjson.decode('1 2')}))"##,
    r##"return (cjson.encode({[true] = 1}))"##,
    r##"return (cjson.encode({1, 2, [3.5] = 3}))"##,
    r##"return (cjson.encode({[1] = 'a', [2] = 'b', [2^31] = 'c'}))"##,
    r##"return (cjson.encode({[2^31 - 1] = 'c'}))"##,
    r##"return (cjson.encode({[1/0] = 'c'}))"##,
    r##"local x = cjson.encode_invalid_numbers('on') local s = cjson.encode({[1/0] = 'c', [-1/0] = 'd'}) cjson.encode_invalid_numbers('off') return s"##,
    r##"local x = cjson.encode_invalid_numbers('null') local s = cjson.encode({[1/0] = 'c'}) cjson.encode_invalid_numbers('off') return s"##,
    r##"local x = cjson.encode_number_precision(14) local s = cjson.encode({0.1 + 0.2, 100 / 3, 1e21, 1e-7, 123456.789e3}) return s"##,
    r##"local x = cjson.encode_number_precision(5) local s = cjson.encode({0.1 + 0.2, 100 / 3, 1e21, 1e-7, 123456.789e3, 99999.5, 999995}) cjson.encode_number_precision(14) return s"##,
    r##"local a, b = pcall(cjson.encode_max_depth, 'x') return b"##,
    r##"local a, b = pcall(cjson.encode_max_depth, '0x10') cjson.encode_max_depth(1000) return tostring(a) .. tostring(b)"##,
    r##"local a, b = pcall(cjson.encode_max_depth, 2.9) cjson.encode_max_depth(1000) return tostring(a) .. tostring(b)"##,
    r##"local a, b = pcall(cjson.encode_max_depth, -2^31) cjson.encode_max_depth(1000) return tostring(a) .. tostring(b)"##,
    r##"local a, b = pcall(cjson.encode_max_depth, 2^31) cjson.encode_max_depth(1000) return tostring(a) .. tostring(b)"##,
    r##"local a, b = pcall(cjson.encode_max_depth, 0/0) cjson.encode_max_depth(1000) return tostring(a) .. tostring(b)"##,
    r##"local a, b = pcall(cjson.encode_max_depth, nil) return tostring(a) .. tostring(b)"##,
    r##"local a, b = pcall(cjson.encode_sparse_array, nil, nil, 5) local c, d, e = cjson.encode_sparse_array() cjson.encode_sparse_array(false, 2, 10) return tostring(a) .. tostring(b) .. tostring(c) .. d .. e"##,
    r##"local a, b = pcall(cjson.encode_invalid_numbers, 'ON') return b"##,
    r##"local a, b = pcall(cjson.encode_invalid_numbers, 1) return b"##,
    r##"local a, b = cjson.encode_keep_buffer(nil) return tostring(a) .. tostring(b)"##,
    r##"return (cmsgpack.pack(2^31 - 1, 2^31, -2^31 + 1, 0.25, 0.3, 16777216, 16777217, 2^100, -2^100))"##,
    r##"return (cmsgpack.pack({[1] = 1, [2] = nil, [3] = 3}))"##,
    r##"return (cmsgpack.pack({nil, nil, 3}))"##,
    r##"return (cmsgpack.pack({[1] = 'a', [2] = 'b', [2.5] = 'c'}))"##,
    r##"return (cmsgpack.pack({[1] = 'a', ['2'] = 'b'}))"##,
    r##"return (cmsgpack.pack({[-0] = 'z'}))"##,
    r##"return (cmsgpack.pack(cjson.decode('[1,{"a":null}]')))"##,
    r##"return (cmsgpack.pack(cmsgpack.pack, coroutine.running()))"##,
    r##"return (cjson.encode({cmsgpack.unpack_limit('\1\2\3', 1, 2)}))"##,
    r##"return (cjson.encode({cmsgpack.unpack_limit('\1\2\3', 2, 3)}))"##,
    r##"return (cjson.encode({cmsgpack.unpack_limit('', 1)}))"##,
    r##"return (cjson.encode({cmsgpack.unpack_limit('\1', 1, '0')}))"##,
    r##"return (cjson.encode({cmsgpack.unpack_one('\1\2', 2^32)}))"##,
    r##"return (cjson.encode({cmsgpack.unpack_one('\1\2', 0/0)}))"##,
    r##"return (cjson.encode({cmsgpack.unpack_limit('\1\2', 2^33 + 1)}))"##,
    r##"return (cjson.encode({cmsgpack.unpack('\199\1\1')}))"##,
    r##"return (cjson.encode({cmsgpack.unpack('\200')}))"##,
    r##"return (cjson.encode({cmsgpack.unpack('\146\192\192')}))"##,
    r##"return (cjson.encode({cmsgpack.unpack('\130\1\192\2\3')}))"##,
    r##"return (cjson.encode({cmsgpack.unpack('\129\144\1')}))"##,
    r##"return (cjson.encode({cmsgpack.unpack('\202\127\192\0\0')}))"##,
    r##"return (cjson.encode({cmsgpack.unpack('\202\127\128\0\0')}))"##,
    r##"return (cjson.encode({cmsgpack.unpack('\217\0\218\0\0\219\0\0\0\0')}))"##,
    r##"return (cjson.encode({cmsgpack.unpack('\220\0\0\221\0\0\0\0\222\0\0\223\0\0\0\0')}))"##,
    r##"local s = string.rep('\129', 5000) .. '\1\2' .. string.rep('\2', 4999) local ok, e = pcall(cmsgpack.unpack, s) return tostring(ok) .. type(e)"##,
    r##"local s = string.rep('\129', 7999) .. '\1\2' .. string.rep('\2', 7998) local ok, e = pcall(cmsgpack.unpack, s) return tostring(ok) .. (type(e) == 'table' and 'table' or tostring(e))"##,
    r##"local s = string.rep('\129', 8000) .. '\1\2' .. string.rep('\2', 7999) local ok, e = pcall(cmsgpack.unpack, s) return tostring(ok) .. (type(e) == 'table' and 'table' or tostring(e))"##,
    r##"local s = string.rep('\129', 100) .. '\1\2' .. string.rep('\2', 99) return #cmsgpack.pack(cmsgpack.unpack(s))"##,
    r##"local s = string.rep('\129\1', 100) .. '\1' return cjson.encode(cmsgpack.unpack(s))"##,
    r##"local s = string.rep('\146\1', 3000) .. '\1' .. string.rep('\1', 0) local ok, e = pcall(cmsgpack.unpack, s) return tostring(ok) .. (type(e) == 'table' and 'table' or tostring(e))"##,
];

/// Results that are Lua tables, converted to replies by the script engine.
const TABLES: &[&str] = &[
    r##"return cjson.decode('[1,"a",[true,false],{"k":"v"},2.5]')"##,
    r##"local t = cjson.decode('{"a":[1,2,3],"b":{"c":"d"}}') return {t.a[1], t.a[3], t.b.c}"##,
    r##"local t = cjson.decode('[null, 1, null]') return {t[1] == cjson.null, #t, type(t[1])}"##,
    r##"return {cmsgpack.unpack(cmsgpack.pack(1, 'two', {3, 4}, {five = 5}, true))}"##,
    r##"return {cmsgpack.unpack_one(cmsgpack.pack(10, 20, 30), 1)}"##,
    r##"return {cmsgpack.unpack_limit(cmsgpack.pack(10, 20, 30), 2, 0)}"##,
    r##"return {cjson.encode_sparse_array()}"##,
];

/// Errors of library functions called in tail position (`return f(...)`).
const TAIL_CALLED: &[&str] = &[
    r##"return cjson.decode('x')"##,
    r##"return cjson.decode()"##,
    r##"return cjson.encode(function() end)"##,
    r##"return cjson.encode_max_depth(0)"##,
    r##"return cmsgpack.unpack('\193')"##,
    r##"return cmsgpack.unpack_one('\1', 5)"##,
    r##"return cmsgpack.pack()"##,
];
