//! The library against redis-server 7.0.15: each case is a script and the reply redis-server
//! gave to `EVAL <script> 0` (an error's message without Redis's `ERR ` and ` script: …`).
//! `S` is a bulk string, `I` an integer, `N` nil, `E` an error.

use mlua::{Lua, Value};

/// The reply (kind and bytes) Redis would give to a script's result.
pub(crate) fn run(code: &str) -> (char, Vec<u8>) {
    let lua = Lua::new();
    super::super::cjson::open(&lua).expect("cjson opens");
    super::super::cmsgpack::open(&lua).expect("cmsgpack opens");
    match lua.load(code).set_name("@user_script").eval::<Value>() {
        Ok(Value::String(s)) => ('S', s.as_bytes().to_vec()),
        Ok(Value::Integer(i)) => ('I', i.to_string().into_bytes()),
        Ok(Value::Number(n)) => ('I', (n as i64).to_string().into_bytes()),
        Ok(Value::Boolean(true)) => ('I', b"1".to_vec()),
        Ok(Value::Nil | Value::Boolean(false)) => ('N', Vec::new()),
        Ok(other) => ('?', format!("{other:?}").into_bytes()),
        Err(mlua::Error::RuntimeError(msg)) => {
            // mlua appends a traceback; Redis's message is what precedes it.
            let msg = msg.split("\nstack traceback:").next().unwrap_or("");
            ('E', msg.as_bytes().to_vec())
        }
        Err(e) => ('!', e.to_string().into_bytes()),
    }
}

/// Runs `cases`, reporting every mismatch at once.
pub(crate) fn check(cases: &[(&str, char, &[u8])]) {
    let mut failures = Vec::new();
    for &(code, kind, want) in cases {
        let (got_kind, got) = run(code);
        if got_kind != kind || got != want {
            failures.push(format!(
                "{code}\n   want {kind} {:?}\n   got  {got_kind} {:?}",
                String::from_utf8_lossy(want),
                String::from_utf8_lossy(&got)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from redis-server:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// cjson's encoding, decoding and configuration, as redis-server 7.0.15 answered.
#[test]
fn cjson_matches_redis() {
    check(CASES);
}

const CASES: &[(&str, char, &[u8])] = &[
    (
        r##"return (cjson.encode({1,2,{a=1}}))"##,
        'S',
        b"[1,2,{\"a\":1}]",
    ),
    (
        r##"return (cjson.encode({}))"##,
        'S',
        b"{}",
    ),
    (
        r##"return (cjson.encode({{}, {{}}}))"##,
        'S',
        b"[{},[{}]]",
    ),
    (
        r##"return (cjson.encode('a/b"c\\d\1\8\9\10\12\13\31\127\128\255 é'))"##,
        'S',
        b"\"a\\/b\\\"c\\\\d\\u0001\\b\\t\\n\\f\\r\\u001f\\u007f\x80\xff \xc3\xa9\"",
    ),
    (
        r##"return (cjson.encode({1.5, -0, 1e300, 123456789012345, 0.1, 1/3, 2^53, -2^63, 1e-5, 1e15, 1e16, 1e-300, 5e-324, 0.0001, 100}))"##,
        'S',
        b"[1.5,-0,1e+300,1.2345678901234e+14,0.1,0.33333333333333,9.007199254741e+15,-9.2233720368548e+18,1e-05,1e+15,1e+16,1e-300,4.9406564584125e-324,0.0001,100]",
    ),
    (
        r##"return (cjson.encode({true, false, cjson.null}))"##,
        'S',
        b"[true,false,null]",
    ),
    (
        r##"return (cjson.encode({[1]=1, [2]=2, [4]=4}))"##,
        'S',
        b"[1,2,null,4]",
    ),
    (
        r##"return (cjson.encode({[1]=1, [11]=11}))"##,
        'E',
        b"user_script:1: Cannot serialise table: excessively sparse array",
    ),
    (
        r##"return (cjson.encode({[1]=1, [2]=2, [3]=3, [6]=6}))"##,
        'S',
        b"[1,2,3,null,null,6]",
    ),
    (
        r##"return (cjson.encode({[1]=1, [10]=10}))"##,
        'S',
        b"[1,null,null,null,null,null,null,null,null,10]",
    ),
    (
        r##"return (cjson.encode({[0]=1}))"##,
        'S',
        b"{\"0\":1}",
    ),
    (
        r##"return (cjson.encode({[-1]=1}))"##,
        'S',
        b"{\"-1\":1}",
    ),
    (
        r##"return (cjson.encode({[1.5]=1}))"##,
        'S',
        b"{\"1.5\":1}",
    ),
    (
        r##"return (cjson.encode({[1]=1, a=2}))"##,
        'S',
        b"{\"1\":1,\"a\":2}",
    ),
    (
        r##"return (cjson.encode({[2^40]=1}))"##,
        'S',
        b"{\"1099511627776\":1}",
    ),
    (
        r##"return (cjson.encode({a={b={c={}}}}))"##,
        'S',
        b"{\"a\":{\"b\":{\"c\":{}}}}",
    ),
    (
        r##"return (cjson.encode({1, nil, 3}))"##,
        'S',
        b"[1,null,3]",
    ),
    (
        r##"return (cjson.encode(nil))"##,
        'S',
        b"null",
    ),
    (
        r##"return (cjson.encode(12))"##,
        'S',
        b"12",
    ),
    (
        r##"return (cjson.encode(''))"##,
        'S',
        b"\"\"",
    ),
    (
        r##"return (cjson.encode(function() end))"##,
        'E',
        b"user_script:1: Cannot serialise function: type not supported",
    ),
    (
        r##"return (cjson.encode({function() end}))"##,
        'E',
        b"user_script:1: Cannot serialise function: type not supported",
    ),
    (
        r##"return (cjson.encode({[true]=1}))"##,
        'E',
        b"user_script:1: Cannot serialise boolean: table key must be a number or string",
    ),
    (
        r##"return (cjson.encode({[{}]=1}))"##,
        'E',
        b"user_script:1: Cannot serialise table: table key must be a number or string",
    ),
    (
        r##"return (cjson.encode(1/0))"##,
        'E',
        b"user_script:1: Cannot serialise number: must not be NaN or Inf",
    ),
    (
        r##"return (cjson.encode(-1/0))"##,
        'E',
        b"user_script:1: Cannot serialise number: must not be NaN or Inf",
    ),
    (
        r##"return (cjson.encode(0/0))"##,
        'E',
        b"user_script:1: Cannot serialise number: must not be NaN or Inf",
    ),
    (
        r##"return (cjson.encode({[1/0]=1}))"##,
        'E',
        b"user_script:1: Cannot serialise number: must not be NaN or Inf",
    ),
    (
        r##"return (cjson.encode())"##,
        'E',
        b"user_script:1: bad argument #1 to 'encode' (expected 1 argument)",
    ),
    (
        r##"return (cjson.encode(1, 2))"##,
        'E',
        b"user_script:1: bad argument #1 to 'encode' (expected 1 argument)",
    ),
    (
        r##"local t = {} t[1] = t return (cjson.encode(t))"##,
        'E',
        b"user_script:1: Cannot serialise, excessive nesting (1001)",
    ),
    (
        r##"local t = {} t.a = t return (cjson.encode(t))"##,
        'E',
        b"user_script:1: Cannot serialise, excessive nesting (1001)",
    ),
    (
        r##"local t = {} local c = t for i=1,999 do c[1] = {} c = c[1] end return cjson.encode(t):sub(1, 10) .. #cjson.encode(t)"##,
        'S',
        b"[[[[[[[[[[2000",
    ),
    (
        r##"local t = {} local c = t for i=1,1000 do c[1] = {} c = c[1] end return (cjson.encode(t))"##,
        'E',
        b"user_script:1: Cannot serialise, excessive nesting (1001)",
    ),
    (
        r##"return (cjson.encode(coroutine.create(function() end)))"##,
        'E',
        b"user_script:1: Cannot serialise thread: type not supported",
    ),
    (
        r##"local x = cjson.encode_invalid_numbers(true) local s = cjson.encode({1/0, -1/0, 0/0}) cjson.encode_invalid_numbers(false) return tostring(x) .. s"##,
        'S',
        b"true[inf,-inf,nan]",
    ),
    (
        r##"local x = cjson.encode_invalid_numbers('null') local s = cjson.encode({1/0, -1/0, 0/0}) cjson.encode_invalid_numbers('off') return tostring(x) .. s"##,
        'S',
        b"null[null,null,null]",
    ),
    (
        r##"local x = cjson.encode_number_precision(3) local s = cjson.encode({1/3, 12345, 0.00012345}) cjson.encode_number_precision(14) return x .. s"##,
        'S',
        b"3[0.333,1.23e+04,0.000123]",
    ),
    (
        r##"local x = cjson.encode_number_precision(1) local s = cjson.encode({2.5, 3.5, 0.125, 99}) cjson.encode_number_precision(14) return x .. s"##,
        'S',
        b"1[2,4,0.1,1e+02]",
    ),
    (
        r##"local a, b, c = cjson.encode_sparse_array(true) local s = cjson.encode({[1]=1, [20]=2}) cjson.encode_sparse_array(false) return tostring(a) .. b .. c .. s"##,
        'S',
        b"true210{\"1\":1,\"20\":2}",
    ),
    (
        r##"local a, b, c = cjson.encode_sparse_array(false, 0) local s = cjson.encode({[1]=1, [20]=2}) cjson.encode_sparse_array(false, 2, 10) return tostring(a) .. b .. c .. s"##,
        'S',
        b"false010[1,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,2]",
    ),
    (
        r##"local a, b, c = cjson.encode_sparse_array(false, 2, 30) local s = cjson.encode({[1]=1, [20]=2}) cjson.encode_sparse_array(false, 2, 10) return tostring(a) .. b .. c .. s"##,
        'S',
        b"false230[1,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,2]",
    ),
    (
        r##"local a, b, c = cjson.encode_sparse_array('on', 1, 0) local s = cjson.encode({[1]=1, [3]=2}) cjson.encode_sparse_array(false, 2, 10) return tostring(a) .. b .. c .. s"##,
        'S',
        b"true10{\"1\":1,\"3\":2}",
    ),
    (
        r##"local ok, e = pcall(cjson.encode_sparse_array, 'on', -1) local a, b, c = cjson.encode_sparse_array() cjson.encode_sparse_array(false) return e .. tostring(a) .. b .. c"##,
        'S',
        b"bad argument #1 to '?' (expected integer between 0 and 2147483647)true210",
    ),
    (
        r##"local ok, e = pcall(cjson.encode_sparse_array, 'maybe') return e"##,
        'S',
        b"bad argument #1 to '?' (invalid option 'maybe')",
    ),
    (
        r##"local ok, e = pcall(cjson.encode_sparse_array, true, 'x') cjson.encode_sparse_array(false) return e"##,
        'S',
        b"bad argument #2 to '?' (number expected, got string)",
    ),
    (
        r##"local ok, e = pcall(cjson.encode_sparse_array, true, 1, 2, 3) return e"##,
        'S',
        b"bad argument #4 to '?' (found too many arguments)",
    ),
    (
        r##"local ok, e = pcall(cjson.encode_max_depth, 0) return e"##,
        'S',
        b"bad argument #1 to '?' (expected integer between 1 and 2147483647)",
    ),
    (
        r##"local ok, e = pcall(cjson.encode_max_depth, 1, 2) return e"##,
        'S',
        b"bad argument #2 to '?' (found too many arguments)",
    ),
    (
        r##"local ok, e = pcall(cjson.encode_number_precision, 15) return e"##,
        'S',
        b"bad argument #1 to '?' (expected integer between 1 and 14)",
    ),
    (
        r##"local ok, e = pcall(cjson.encode_keep_buffer, 1) return e"##,
        'S',
        b"bad argument #1 to '?' (invalid option '1')",
    ),
    (
        r##"local ok, e = pcall(cjson.encode_invalid_numbers, {}) return e"##,
        'S',
        b"bad argument #1 to '?' (string expected, got table)",
    ),
    (
        r##"local ok, e = pcall(cjson.decode_invalid_numbers, 'both') return e"##,
        'S',
        b"bad argument #1 to '?' (invalid option 'both')",
    ),
    (
        r##"local x = cjson.encode_max_depth(2^32 + 5) local y = cjson.encode_max_depth(1000) return x .. ' ' .. y"##,
        'S',
        b"5 1000",
    ),
    (
        r##"local x = cjson.encode_max_depth('7') local y = cjson.encode_max_depth(1000) return x .. ' ' .. y"##,
        'S',
        b"7 1000",
    ),
    (
        r##"return (cjson.encode({cjson.encode_invalid_numbers(), cjson.decode_invalid_numbers(), cjson.encode_keep_buffer(), cjson.encode_max_depth(), cjson.decode_max_depth(), cjson.encode_number_precision(), cjson.encode_sparse_array()}))"##,
        'S',
        b"[false,true,true,1000,1000,14,false,2,10]",
    ),
    (
        r##"return (cjson.encode({cjson.encode_keep_buffer(false), cjson.encode_keep_buffer('on'), cjson.encode_keep_buffer()}))"##,
        'S',
        b"[false,true,true]",
    ),
    (
        r##"local x = cjson.encode_max_depth(2) local ok, e = pcall(cjson.encode, {{{}}}) local s = cjson.encode({{}}) cjson.encode_max_depth(1000) return x .. e .. s"##,
        'S',
        b"2Cannot serialise, excessive nesting (3)[{}]",
    ),
    (
        r##"local c = cjson.new() c.encode_max_depth(1) local ok, e = pcall(c.encode, {{}}) return e .. cjson.encode({{}}) .. c._NAME .. c._VERSION .. tostring(c.null == cjson.null) .. tostring(c.new ~= nil)"##,
        'S',
        b"Cannot serialise, excessive nesting (2)[{}]cjson2.1.0truetrue",
    ),
    (
        r##"return cjson._NAME .. cjson._VERSION .. tostring(cjson.null) .. type(cjson.null)"##,
        'S',
        b"cjson2.1.0userdata: (nil)userdata",
    ),
    (
        r##"return (cjson.encode(cjson.decode('[1,2,3,{"a":[true,false,null]}]')))"##,
        'S',
        b"[1,2,3,{\"a\":[true,false,null]}]",
    ),
    (
        r##"return (cjson.encode(cjson.decode('  {"a" : 1 , "b":[ ] , "c" :{} }  ')))"##,
        'S',
        b"{\"a\":1,\"c\":{},\"b\":{}}",
    ),
    (
        r##"return (cjson.encode(cjson.decode('"\\u00e9\\u20ac\\ud83d\\ude00\\/\\b\\f\\n\\r\\t\\"\\\\"')))"##,
        'S',
        b"\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\\/\\b\\f\\n\\r\\t\\\"\\\\\"",
    ),
    (
        r##"return (cjson.decode('"\\u0041\\u00"'))"##,
        'E',
        b"user_script:1: Expected value but found invalid unicode escape code at character 8",
    ),
    (
        r##"return (cjson.decode('"\\ud83d"'))"##,
        'E',
        b"user_script:1: Expected value but found invalid unicode escape code at character 2",
    ),
    (
        r##"return (cjson.decode('"\\ud83dx"'))"##,
        'E',
        b"user_script:1: Expected value but found invalid unicode escape code at character 2",
    ),
    (
        r##"return (cjson.decode('"\\ude00"'))"##,
        'E',
        b"user_script:1: Expected value but found invalid unicode escape code at character 2",
    ),
    (
        r##"return (cjson.decode('"\\ud83d\\u0041"'))"##,
        'E',
        b"user_script:1: Expected value but found invalid unicode escape code at character 2",
    ),
    (
        r##"return (cjson.decode('"\\x"'))"##,
        'E',
        b"user_script:1: Expected value but found invalid escape code at character 2",
    ),
    (
        r##"return (cjson.decode('"abc'))"##,
        'E',
        b"user_script:1: Expected value but found unexpected end of string at character 5",
    ),
    (
        r##"return (cjson.decode('x'))"##,
        'E',
        b"user_script:1: Expected value but found invalid token at character 1",
    ),
    (
        r##"return (cjson.decode(''))"##,
        'E',
        b"user_script:1: Expected value but found T_END at character 1",
    ),
    (
        r##"return (cjson.decode(' '))"##,
        'E',
        b"user_script:1: Expected value but found T_END at character 2",
    ),
    (
        r##"return (cjson.decode('[1,2'))"##,
        'E',
        b"user_script:1: Expected comma or array end but found T_END at character 5",
    ),
    (
        r##"return (cjson.decode('[1,2,]'))"##,
        'E',
        b"user_script:1: Expected value but found T_ARR_END at character 6",
    ),
    (
        r##"return (cjson.decode('[1 2]'))"##,
        'E',
        b"user_script:1: Expected comma or array end but found T_NUMBER at character 4",
    ),
    (
        r##"return (cjson.decode('{"a" 1}'))"##,
        'E',
        b"user_script:1: Expected colon but found T_NUMBER at character 6",
    ),
    (
        r##"return (cjson.decode('{"a":1,}'))"##,
        'E',
        b"user_script:1: Expected object key string but found T_OBJ_END at character 8",
    ),
    (
        r##"return (cjson.decode('{1:1}'))"##,
        'E',
        b"user_script:1: Expected object key string but found T_NUMBER at character 2",
    ),
    (
        r##"return (cjson.decode('{"a":1 "b":2}'))"##,
        'E',
        b"user_script:1: Expected comma or object end but found T_STRING at character 8",
    ),
    (
        r##"return (cjson.decode('[1]x'))"##,
        'E',
        b"user_script:1: Expected the end but found invalid token at character 4",
    ),
    (
        r##"return (cjson.decode('[1] [2]'))"##,
        'E',
        b"user_script:1: Expected the end but found T_ARR_BEGIN at character 5",
    ),
    (
        r##"return (cjson.decode('tru'))"##,
        'E',
        b"user_script:1: Expected value but found invalid token at character 1",
    ),
    (
        r##"return (cjson.decode('nul'))"##,
        'E',
        b"user_script:1: Expected value but found invalid token at character 1",
    ),
    (
        r##"return (cjson.decode('falsey'))"##,
        'E',
        b"user_script:1: Expected the end but found invalid token at character 6",
    ),
    (
        r##"return (cjson.decode('-'))"##,
        'E',
        b"user_script:1: Expected value but found invalid number at character 1",
    ),
    (
        r##"return (cjson.decode('+1'))"##,
        'I',
        b"1",
    ),
    (
        r##"return (cjson.decode('.5'))"##,
        'E',
        b"user_script:1: Expected value but found invalid token at character 1",
    ),
    (
        r##"return (cjson.decode('\0a'))"##,
        'E',
        b"user_script:1: JSON parser does not support UTF-16 or UTF-32",
    ),
    (
        r##"return (cjson.decode('a\0'))"##,
        'E',
        b"user_script:1: JSON parser does not support UTF-16 or UTF-32",
    ),
    (
        r##"return (cjson.encode(cjson.decode('[1]\0garbage')))"##,
        'S',
        b"[1]",
    ),
    (
        r##"return (cjson.encode(cjson.decode('"a\0b"')))"##,
        'E',
        b"user_script:1: Expected value but found unexpected end of string at character 3",
    ),
    (
        r##"return (cjson.decode())"##,
        'E',
        b"user_script:1: bad argument #1 to 'decode' (expected 1 argument)",
    ),
    (
        r##"return (cjson.decode(1, 2))"##,
        'E',
        b"user_script:1: bad argument #1 to 'decode' (expected 1 argument)",
    ),
    (
        r##"return (cjson.decode({}))"##,
        'E',
        b"user_script:1: bad argument #1 to 'decode' (string expected, got table)",
    ),
    (
        r##"return (cjson.decode(nil))"##,
        'E',
        b"user_script:1: bad argument #1 to 'decode' (string expected, got nil)",
    ),
    (
        r##"return (cjson.encode({cjson.decode(123)}))"##,
        'S',
        b"[123]",
    ),
    (
        r##"return (cjson.encode(cjson.decode('[0, -0, 1e2, 1E-2, 0.5, -1.25e+3, 12345678901234567890, 1e400, -1e400, 1e-400]')))"##,
        'E',
        b"user_script:1: Cannot serialise number: must not be NaN or Inf",
    ),
    (
        r##"return (cjson.encode({cjson.decode('[0x10, 0X1p4, 010, -0x1A, +5, inf, -Infinity, Inf]')}))"##,
        'E',
        b"user_script:1: Cannot serialise number: must not be NaN or Inf",
    ),
    (
        r##"return tostring(cjson.decode('nan')) .. tostring(cjson.decode('-nan')) .. tostring(cjson.decode('NaN'))"##,
        'S',
        b"nan-nannan",
    ),
    (
        r##"local x = cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, '0x10') cjson.decode_invalid_numbers(true) return tostring(x) .. e"##,
        'S',
        b"falseExpected value but found invalid number at character 1",
    ),
    (
        r##"local x = cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, '[1, 010]') cjson.decode_invalid_numbers(true) return tostring(x) .. e"##,
        'S',
        b"falseExpected value but found invalid number at character 5",
    ),
    (
        r##"local x = cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, 'inf') cjson.decode_invalid_numbers(true) return tostring(x) .. e"##,
        'S',
        b"falseExpected value but found invalid token at character 1",
    ),
    (
        r##"local x = cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, '+1') cjson.decode_invalid_numbers(true) return tostring(x) .. e"##,
        'S',
        b"falseExpected value but found invalid token at character 1",
    ),
    (
        r##"local x = cjson.decode_invalid_numbers(false) local s = cjson.encode(cjson.decode('[-0.5, 0, 10, 1e5]')) cjson.decode_invalid_numbers(true) return tostring(x) .. s"##,
        'S',
        b"false[-0.5,0,10,100000]",
    ),
    (
        r##"return (cjson.decode('"\255\254 raw \1 bytes"'))"##,
        'S',
        b"\xff\xfe raw \x01 bytes",
    ),
    (
        r##"local ok, e = pcall(cjson.decode, string.rep('[', 1001)) return e"##,
        'S',
        b"Found too many nested data structures (1001) at character 1001",
    ),
    (
        r##"local ok, e = pcall(cjson.decode, string.rep('[', 1000)) return e"##,
        'S',
        b"Expected value but found T_END at character 1001",
    ),
    (
        r##"return #cjson.encode(cjson.decode(string.rep('[', 1000) .. string.rep(']', 1000)))"##,
        'I',
        b"2000",
    ),
    (
        r##"local ok, e = pcall(cjson.decode, string.rep('{"a":', 1001)) return e"##,
        'S',
        b"Found too many nested data structures (1001) at character 5001",
    ),
    (
        r##"local x = cjson.decode_max_depth(100000) local ok, e = pcall(cjson.decode, string.rep('[', 10000)) cjson.decode_max_depth(1000) return x .. e"##,
        'S',
        b"100000Found too many nested data structures (7999) at character 7999",
    ),
    (
        r##"local x = cjson.decode_max_depth(100000) local ok, e = pcall(cjson.decode, string.rep('{"a":', 10000)) cjson.decode_max_depth(1000) return x .. e"##,
        'S',
        b"100000Found too many nested data structures (4000) at character 19996",
    ),
    (
        r##"local x = cjson.decode_max_depth(100000) local ok, e = pcall(cjson.decode, string.rep('[{"a":', 10000)) cjson.decode_max_depth(1000) return x .. e"##,
        'S',
        b"100000Found too many nested data structures (5333) at character 15997",
    ),
    (
        r##"local x = cjson.decode_max_depth(3) local ok, e = pcall(cjson.decode, '[[[[1]]]]') cjson.decode_max_depth(1000) return x .. e"##,
        'S',
        b"3Found too many nested data structures (4) at character 4",
    ),
    (
        r##"local t = {} local c = t for i=1,10000 do c[1] = {} c = c[1] end cjson.encode_max_depth(100000) local ok, e = pcall(cjson.encode, t) cjson.encode_max_depth(1000) return e"##,
        'S',
        b"Cannot serialise, excessive nesting (7998)",
    ),
    (
        r##"local t = {} local c = t for i=1,10000 do c.a = {} c = c.a end cjson.encode_max_depth(100000) local ok, e = pcall(cjson.encode, t) cjson.encode_max_depth(1000) return e"##,
        'S',
        b"Cannot serialise, excessive nesting (4000)",
    ),
    (
        r##"local t = {} local c = t for i=1,10000 do c[1] = {a={}} c = c[1].a end cjson.encode_max_depth(100000) local ok, e = pcall(cjson.encode, t) cjson.encode_max_depth(1000) return e"##,
        'S',
        b"Cannot serialise, excessive nesting (5333)",
    ),
    (
        r##"local t = {} local c = t for i=1,7000 do c[1] = {} c = c[1] end cjson.encode_max_depth(100000) local s = cjson.encode(t) cjson.encode_max_depth(1000) return #s .. s:sub(1, 5)"##,
        'S',
        b"14002[[[[[",
    ),
    (
        r##"local t = {} local c = t for i=1,7000 do c[1] = {} c = c[1] end cjson.decode_max_depth(100000) cjson.encode_max_depth(100000) local s = cjson.encode(cjson.decode(cjson.encode(t))) cjson.encode_max_depth(1000) cjson.decode_max_depth(1000) return #s"##,
        'I',
        b"14002",
    ),
    (
        r##"local t = {} for i = 1, 1000 do t[i] = {i, tostring(i), {x = i / 7}} end local s = cjson.encode(t) return #s .. ' ' .. cjson.encode(cjson.decode(s)[999])"##,
        'S',
        b"31981 [999,\"999\",{\"x\":142.71428571429}]",
    ),
    (
        r##"local t = {} for i = 1, 50 do t['k' .. i] = i end return (cjson.encode(t))"##,
        'S',
        b"{\"k12\":12,\"k32\":32,\"k19\":19,\"k39\":39,\"k31\":31,\"k11\":11,\"k30\":30,\"k38\":38,\"k14\":14,\"k47\":47,\"k1\":1,\"k43\":43,\"k3\":3,\"k27\":27,\"k34\":34,\"k18\":18,\"k7\":7,\"k5\":5,\"k50\":50,\"k26\":26,\"k15\":15,\"k22\":22,\"k48\":48,\"k46\":46,\"k45\":45,\"k41\":41,\"k21\":21,\"k29\":29,\"k25\":25,\"k49\":49,\"k42\":42,\"k40\":40,\"k35\":35,\"k36\":36,\"k28\":28,\"k20\":20,\"k37\":37,\"k8\":8,\"k23\":23,\"k16\":16,\"k9\":9,\"k2\":2,\"k44\":44,\"k13\":13,\"k24\":24,\"k33\":33,\"k6\":6,\"k17\":17,\"k4\":4,\"k10\":10}",
    ),
    (
        r##"local t = {} for i = 1, 50 do t[i * 1.5] = i end return (cjson.encode(t))"##,
        'S',
        b"{\"27\":18,\"61.5\":41,\"75\":50,\"3\":2,\"54\":36,\"19.5\":13,\"6\":4,\"31.5\":21,\"39\":26,\"12\":8,\"63\":42,\"24\":16,\"55.5\":37,\"48\":32,\"16.5\":11,\"40.5\":27,\"64.5\":43,\"28.5\":19,\"33\":22,\"10.5\":7,\"57\":38,\"66\":44,\"21\":14,\"49.5\":33,\"42\":28,\"67.5\":45,\"34.5\":23,\"25.5\":17,\"7.5\":5,\"9\":6,\"51\":34,\"15\":10,\"18\":12,\"43.5\":29,\"70.5\":47,\"30\":20,\"36\":24,\"73.5\":49,\"60\":40,\"72\":48,\"22.5\":15,\"52.5\":35,\"69\":46,\"58.5\":39,\"45\":30,\"13.5\":9,\"46.5\":31,\"37.5\":25,\"1.5\":1,\"4.5\":3}",
    ),
    (
        r##"return (cjson.encode({[-0]=1}))"##,
        'S',
        b"{\"-0\":1}",
    ),
    (
        r##"return (cjson.encode({-0, 1e-300, -1e-320, 0}))"##,
        'S',
        b"[-0,1e-300,-9.9998886718268e-321,-0]",
    ),
    (
        r##"return (cjson.encode({[1e-300]=5}))"##,
        'S',
        b"{\"1e-300\":5}",
    ),
    (
        r##"return (cjson.encode(-0))"##,
        'S',
        b"-0",
    ),
    (
        r##"return (cjson.encode(1e-300))"##,
        'S',
        b"1e-300",
    ),
    (
        r##"return (cjson.encode({cjson.decode(1e-300)}))"##,
        'S',
        b"[1e-300]",
    ),
    (
        r##"local d = cjson.decode local ok, e = pcall(function() local x = d() return x end) return e"##,
        'S',
        b"user_script:1: bad argument #1 to 'd' (expected 1 argument)",
    ),
    (
        r##"local ok, e = pcall(function() local x = cjson:decode() return x end) return e"##,
        'S',
        b"user_script:1: calling 'decode' on bad self (string expected, got table)",
    ),
    (
        r##"local ok, e = pcall(cjson.decode) return e"##,
        'S',
        b"bad argument #1 to '?' (expected 1 argument)",
    ),
    (
        r##"local ok, e = pcall(function() local x = cjson.decode('x') return x end) return e"##,
        'S',
        b"user_script:1: Expected value but found invalid token at character 1",
    ),
    (
        r##"local ok, e = pcall(cjson.decode, 'x') return e"##,
        'S',
        b"Expected value but found invalid token at character 1",
    ),
    (
        r##"local x = cjson.decode('{') return x"##,
        'E',
        b"user_script:1: Expected object key string but found T_END at character 2",
    ),
    (
        r##"local x = cjson.decode('[') return x"##,
        'E',
        b"user_script:1: Expected value but found T_END at character 2",
    ),
    (
        r##"local x = cjson.decode('{"a":') return x"##,
        'E',
        b"user_script:1: Expected value but found T_END at character 6",
    ),
    (
        r##"local x = cjson.decode('{"a"') return x"##,
        'E',
        b"user_script:1: Expected colon but found T_END at character 5",
    ),
    (
        r##"local x = cjson.decode('"\\u12') return x"##,
        'E',
        b"user_script:1: Expected value but found invalid unicode escape code at character 2",
    ),
    (
        r##"return select('#', cjson.encode_sparse_array()) .. select('#', cjson.encode({}))"##,
        'S',
        b"31",
    ),
    (
        r##"return cjson.encode(setmetatable({}, {__index = function() return 1 end}))"##,
        'S',
        b"{}",
    ),
    (
        r##"return cjson.encode(setmetatable({1, 2}, {__len = function() return 5 end}))"##,
        'S',
        b"[1,2]",
    ),
    (
        r##"return cjson.encode({string.rep('x', 40000)}):sub(1, 3) .. #cjson.encode({string.rep('x', 40000)})"##,
        'S',
        b"[\"x40004",
    ),
];

/// Edge cases of numbers, strings, tokens, settings and both libraries' formats.
#[test]
fn edge_cases_match_redis() {
    check(EDGE_CASES);
}

const EDGE_CASES: &[(&str, char, &[u8])] = &[
    (
        r##"return (cjson.encode({cjson.decode('[0x, 1]')}))"##,
        'E',
        b"user_script:1: Expected comma or array end but found invalid token at character 3",
    ),
    (
        r##"return (cjson.encode({cjson.decode('0xg')}))"##,
        'E',
        b"user_script:1: Expected the end but found invalid token at character 2",
    ),
    (
        r##"return (cjson.encode({cjson.decode('-abc')}))"##,
        'E',
        b"user_script:1: Expected value but found invalid number at character 1",
    ),
    (
        r##"return (cjson.encode({cjson.decode('[-inf, +inf, nan(123), -nan, infinity, INFINITY, iNf]')}))"##,
        'E',
        b"user_script:1: Cannot serialise number: must not be NaN or Inf",
    ),
    (
        r##"return (cjson.encode({cjson.decode('1.5e')}))"##,
        'E',
        b"user_script:1: Expected the end but found invalid token at character 4",
    ),
    (
        r##"return (cjson.encode({cjson.decode('1.5e+')}))"##,
        'E',
        b"user_script:1: Expected the end but found invalid token at character 4",
    ),
    (
        r##"return (cjson.encode({cjson.decode('00012')}))"##,
        'S',
        b"[12]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('-0.0e0')}))"##,
        'S',
        b"[-0]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('1.')}))"##,
        'S',
        b"[1]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('[1.e5, -1.]')}))"##,
        'S',
        b"[[100000,-1]]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('0x1.fffffffffffffp1023')}))"##,
        'S',
        b"[1.7976931348623e+308]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('0x1p-1075')}))"##,
        'S',
        b"[0]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('0x1.8p-1074')}))"##,
        'S',
        b"[9.8813129168249e-324]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('0X.8')}))"##,
        'S',
        b"[0.5]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('123456789012345678901234567890e-20')}))"##,
        'S',
        b"[1234567890.1235]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('2.2250738585072011e-308')}))"##,
        'S',
        b"[2.2250738585072e-308]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('4.9e-324')}))"##,
        'S',
        b"[4.9406564584125e-324]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('2.4703282292062327e-324')}))"##,
        'S',
        b"[0]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('1e1000000000000000000000')}))"##,
        'E',
        b"user_script:1: Cannot serialise number: must not be NaN or Inf",
    ),
    (
        r##"return (cjson.encode({cjson.decode('0e1000000000000000000000')}))"##,
        'S',
        b"[0]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('trueX')}))"##,
        'E',
        b"user_script:1: Expected the end but found invalid token at character 5",
    ),
    (
        r##"return (cjson.encode({cjson.decode('[true,false,null,"x"]')}))"##,
        'S',
        b"[[true,false,null,\"x\"]]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('\t\r\n [ 1 ] \t\r\n')}))"##,
        'S',
        b"[[1]]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('\v1')}))"##,
        'E',
        b"user_script:1: Expected value but found invalid token at character 1",
    ),
    (
        r##"return (cjson.encode({cjson.decode('\f1')}))"##,
        'E',
        b"user_script:1: Expected value but found invalid token at character 1",
    ),
    (
        r##"return (cjson.encode({cjson.decode('"\\u0000"')}))"##,
        'S',
        b"[\"\\u0000\"]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('"\\uD800\\uDC00\\uDBFF\\uDFFF"')}))"##,
        'S',
        b"[\"\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('"\\uFFFF\\u0800\\u07FF\\u0080\\u007F"')}))"##,
        'S',
        b"[\"\xef\xbf\xbf\xe0\xa0\x80\xdf\xbf\xc2\x80\\u007f\"]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('"\\uDC00\\uD800"')}))"##,
        'E',
        b"user_script:1: Expected value but found invalid unicode escape code at character 2",
    ),
    (
        r##"return (cjson.encode({cjson.decode('"\\uD800\\uD800"')}))"##,
        'E',
        b"user_script:1: Expected value but found invalid unicode escape code at character 2",
    ),
    (
        r##"return (cjson.encode({cjson.decode('"\\uZZZZ"')}))"##,
        'E',
        b"user_script:1: Expected value but found invalid unicode escape code at character 2",
    ),
    (
        r##"return (cjson.encode({cjson.decode('"\\')}))"##,
        'E',
        b"user_script:1: Expected value but found invalid escape code at character 2",
    ),
    (
        r##"return (cjson.encode({cjson.decode('"\\u')}))"##,
        'E',
        b"user_script:1: Expected value but found invalid unicode escape code at character 2",
    ),
    (
        r##"return (cjson.encode({cjson.decode('{"a":1,"a":2}')}))"##,
        'S',
        b"[{\"a\":2}]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('{"":{"":[]}}')}))"##,
        'S',
        b"[{\"\":{\"\":{}}}]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('{"1":1,"2":2}')}))"##,
        'S',
        b"[{\"1\":1,\"2\":2}]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('[[],[[]],{}]')}))"##,
        'S',
        b"[[{},[{}],{}]]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('[1,,2]')}))"##,
        'E',
        b"user_script:1: Expected value but found T_COMMA at character 4",
    ),
    (
        r##"return (cjson.encode({cjson.decode('{,}')}))"##,
        'E',
        b"user_script:1: Expected object key string but found T_COMMA at character 2",
    ),
    (
        r##"return (cjson.encode({cjson.decode('{"a":}')}))"##,
        'E',
        b"user_script:1: Expected value but found T_OBJ_END at character 6",
    ),
    (
        r##"return (cjson.encode({cjson.decode(':')}))"##,
        'E',
        b"user_script:1: Expected value but found T_COLON at character 1",
    ),
    (
        r##"return (cjson.encode({cjson.decode(']')}))"##,
        'E',
        b"user_script:1: Expected value but found T_ARR_END at character 1",
    ),
    (
        r##"return (cjson.encode({cjson.decode('nulll')}))"##,
        'E',
        b"user_script:1: Expected the end but found invalid token at character 5",
    ),
    (
        r##"return (cjson.encode({cjson.decode('Null')}))"##,
        'E',
        b"user_script:1: Expected value but found invalid token at character 1",
    ),
    (
        r##"return (cjson.encode({cjson.decode('n')}))"##,
        'E',
        b"user_script:1: Expected value but found invalid token at character 1",
    ),
    (
        r##"return (cjson.encode({cjson.decode('I')}))"##,
        'E',
        b"user_script:1: Expected value but found invalid token at character 1",
    ),
    (
        r##"return (cjson.encode({cjson.decode('+')}))"##,
        'E',
        b"user_script:1: Expected value but found invalid number at character 1",
    ),
    (
        r##"return (cjson.encode({cjson.decode('+x')}))"##,
        'E',
        b"user_script:1: Expected value but found invalid number at character 1",
    ),
    (
        r##"return (cjson.encode({cjson.decode('-0x10')}))"##,
        'S',
        b"[-16]",
    ),
    (
        r##"return (cjson.encode({cjson.decode('\200')}))"##,
        'E',
        b"user_script:1: Expected value but found invalid token at character 1",
    ),
    (
        r##"return (cjson.encode({cjson.decode('-\200')}))"##,
        'E',
        b"user_script:1: Expected value but found invalid number at character 1",
    ),
    (
        r##"return (cjson.encode({cjson.decode('1 2')}))"##,
        'E',
        b"user_script:1: Expected the end but found T_NUMBER at character 3",
    ),
    (
        r##"return (cjson.encode({[true] = 1}))"##,
        'E',
        b"user_script:1: Cannot serialise boolean: table key must be a number or string",
    ),
    (
        r##"return (cjson.encode({1, 2, [3.5] = 3}))"##,
        'S',
        b"{\"1\":1,\"2\":2,\"3.5\":3}",
    ),
    (
        r##"return (cjson.encode({[1] = 'a', [2] = 'b', [2^31] = 'c'}))"##,
        'S',
        b"{\"1\":\"a\",\"2\":\"b\",\"2147483648\":\"c\"}",
    ),
    (
        r##"return (cjson.encode({[2^31 - 1] = 'c'}))"##,
        'E',
        b"user_script:1: Cannot serialise table: excessively sparse array",
    ),
    (
        r##"return (cjson.encode({[1/0] = 'c'}))"##,
        'E',
        b"user_script:1: Cannot serialise number: must not be NaN or Inf",
    ),
    (
        r##"local x = cjson.encode_invalid_numbers('on') local s = cjson.encode({[1/0] = 'c', [-1/0] = 'd'}) cjson.encode_invalid_numbers('off') return s"##,
        'S',
        b"{\"inf\":\"c\",\"-inf\":\"d\"}",
    ),
    (
        r##"local x = cjson.encode_invalid_numbers('null') local s = cjson.encode({[1/0] = 'c'}) cjson.encode_invalid_numbers('off') return s"##,
        'S',
        b"{\"null\":\"c\"}",
    ),
    (
        r##"local x = cjson.encode_number_precision(14) local s = cjson.encode({0.1 + 0.2, 100 / 3, 1e21, 1e-7, 123456.789e3}) return s"##,
        'S',
        b"[0.3,33.333333333333,1e+21,1e-07,123456789]",
    ),
    (
        r##"local x = cjson.encode_number_precision(5) local s = cjson.encode({0.1 + 0.2, 100 / 3, 1e21, 1e-7, 123456.789e3, 99999.5, 999995}) cjson.encode_number_precision(14) return s"##,
        'S',
        b"[0.3,33.333,1e+21,1e-07,1.2346e+08,1e+05,1e+06]",
    ),
    (
        r##"local a, b = pcall(cjson.encode_max_depth, 'x') return b"##,
        'S',
        b"bad argument #1 to '?' (number expected, got string)",
    ),
    (
        r##"local a, b = pcall(cjson.encode_max_depth, '0x10') cjson.encode_max_depth(1000) return tostring(a) .. tostring(b)"##,
        'S',
        b"true16",
    ),
    (
        r##"local a, b = pcall(cjson.encode_max_depth, 2.9) cjson.encode_max_depth(1000) return tostring(a) .. tostring(b)"##,
        'S',
        b"true2",
    ),
    (
        r##"local a, b = pcall(cjson.encode_max_depth, -2^31) cjson.encode_max_depth(1000) return tostring(a) .. tostring(b)"##,
        'S',
        b"falsebad argument #1 to '?' (expected integer between 1 and 2147483647)",
    ),
    (
        r##"local a, b = pcall(cjson.encode_max_depth, 2^31) cjson.encode_max_depth(1000) return tostring(a) .. tostring(b)"##,
        'S',
        b"falsebad argument #1 to '?' (expected integer between 1 and 2147483647)",
    ),
    (
        r##"local a, b = pcall(cjson.encode_max_depth, 0/0) cjson.encode_max_depth(1000) return tostring(a) .. tostring(b)"##,
        'S',
        b"falsebad argument #1 to '?' (expected integer between 1 and 2147483647)",
    ),
    (
        r##"local a, b = pcall(cjson.encode_max_depth, nil) return tostring(a) .. tostring(b)"##,
        'S',
        b"true1000",
    ),
    (
        r##"local a, b = pcall(cjson.encode_sparse_array, nil, nil, 5) local c, d, e = cjson.encode_sparse_array() cjson.encode_sparse_array(false, 2, 10) return tostring(a) .. tostring(b) .. tostring(c) .. d .. e"##,
        'S',
        b"truefalsefalse25",
    ),
    (
        r##"local a, b = pcall(cjson.encode_invalid_numbers, 'ON') return b"##,
        'S',
        b"bad argument #1 to '?' (invalid option 'ON')",
    ),
    (
        r##"local a, b = pcall(cjson.encode_invalid_numbers, 1) return b"##,
        'S',
        b"bad argument #1 to '?' (invalid option '1')",
    ),
    (
        r##"local a, b = cjson.encode_keep_buffer(nil) return tostring(a) .. tostring(b)"##,
        'S',
        b"truenil",
    ),
    (
        r##"return (cmsgpack.pack(2^31 - 1, 2^31, -2^31 + 1, 0.25, 0.3, 16777216, 16777217, 2^100, -2^100))"##,
        'S',
        b"\xce\x7f\xff\xff\xff\xce\x80\x00\x00\x00\xd2\x80\x00\x00\x01\xca>\x80\x00\x00\xcb?\xd3333333\xce\x01\x00\x00\x00\xce\x01\x00\x00\x01\xcaq\x80\x00\x00\xca\xf1\x80\x00\x00",
    ),
    (
        r##"return (cmsgpack.pack({[1] = 1, [2] = nil, [3] = 3}))"##,
        'S',
        b"\x82\x01\x01\x03\x03",
    ),
    (
        r##"return (cmsgpack.pack({nil, nil, 3}))"##,
        'S',
        b"\x81\x03\x03",
    ),
    (
        r##"return (cmsgpack.pack({[1] = 'a', [2] = 'b', [2.5] = 'c'}))"##,
        'S',
        b"\x83\x01\xa1a\x02\xa1b\xca@ \x00\x00\xa1c",
    ),
    (
        r##"return (cmsgpack.pack({[1] = 'a', ['2'] = 'b'}))"##,
        'S',
        b"\x82\x01\xa1a\xa12\xa1b",
    ),
    (
        r##"return (cmsgpack.pack({[-0] = 'z'}))"##,
        'S',
        b"\x81\x00\xa1z",
    ),
    (
        r##"return (cmsgpack.pack(cjson.decode('[1,{"a":null}]')))"##,
        'S',
        b"\x92\x01\x81\xa1a\xc0",
    ),
    (
        r##"return (cmsgpack.pack(cmsgpack.pack, coroutine.running()))"##,
        'S',
        b"\xc0\xc0",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack_limit('\1\2\3', 1, 2)}))"##,
        'S',
        b"[-1,3]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack_limit('\1\2\3', 2, 3)}))"##,
        'S',
        b"[-1]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack_limit('', 1)}))"##,
        'S',
        b"[-1]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack_limit('\1', 1, '0')}))"##,
        'S',
        b"[-1,1]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack_one('\1\2', 2^32)}))"##,
        'E',
        b"user_script:1: Start offset 0 greater than input length 2.",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack_one('\1\2', 0/0)}))"##,
        'E',
        b"user_script:1: Invalid request to unpack with offset of 0 and limit of 2.",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack_limit('\1\2', 2^33 + 1)}))"##,
        'S',
        b"[-1,1,2]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack('\199\1\1')}))"##,
        'E',
        b"user_script:1: Bad data format in input.",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack('\200')}))"##,
        'E',
        b"user_script:1: Bad data format in input.",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack('\146\192\192')}))"##,
        'S',
        b"[{}]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack('\130\1\192\2\3')}))"##,
        'S',
        b"[[null,3]]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack('\129\144\1')}))"##,
        'E',
        b"user_script:1: Cannot serialise table: table key must be a number or string",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack('\202\127\192\0\0')}))"##,
        'E',
        b"user_script:1: Cannot serialise number: must not be NaN or Inf",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack('\202\127\128\0\0')}))"##,
        'E',
        b"user_script:1: Cannot serialise number: must not be NaN or Inf",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack('\217\0\218\0\0\219\0\0\0\0')}))"##,
        'S',
        b"[\"\",\"\",\"\"]",
    ),
    (
        r##"return (cjson.encode({cmsgpack.unpack('\220\0\0\221\0\0\0\0\222\0\0\223\0\0\0\0')}))"##,
        'S',
        b"[{},{},{},{}]",
    ),
    (
        r##"local s = string.rep('\129', 5000) .. '\1\2' .. string.rep('\2', 4999) local ok, e = pcall(cmsgpack.unpack, s) return tostring(ok) .. type(e)"##,
        'S',
        b"truetable",
    ),
    (
        r##"local s = string.rep('\129', 7999) .. '\1\2' .. string.rep('\2', 7998) local ok, e = pcall(cmsgpack.unpack, s) return tostring(ok) .. (type(e) == 'table' and 'table' or tostring(e))"##,
        'S',
        b"falsestack overflow (too many return values at once; use unpack_one or unpack_limit instead.)",
    ),
    (
        r##"local s = string.rep('\129', 8000) .. '\1\2' .. string.rep('\2', 7999) local ok, e = pcall(cmsgpack.unpack, s) return tostring(ok) .. (type(e) == 'table' and 'table' or tostring(e))"##,
        'S',
        b"falsestack overflow (too many return values at once; use unpack_one or unpack_limit instead.)",
    ),
    (
        r##"local s = string.rep('\129', 100) .. '\1\2' .. string.rep('\2', 99) return #cmsgpack.pack(cmsgpack.unpack(s))"##,
        'I',
        b"33",
    ),
    (
        r##"local s = string.rep('\129\1', 100) .. '\1' return cjson.encode(cmsgpack.unpack(s))"##,
        'S',
        b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
    ),
    (
        r##"local s = string.rep('\146\1', 3000) .. '\1' .. string.rep('\1', 0) local ok, e = pcall(cmsgpack.unpack, s) return tostring(ok) .. (type(e) == 'table' and 'table' or tostring(e))"##,
        'S',
        b"truetable",
    ),
];

/// The one known difference: Redis's library functions are C functions, which Lua 5.1
/// never tail-calls, so `return cjson.decode('x')` raises at the caller's line
/// (`user_script:1: Expected value …`). Here a function is a Lua shim around Rust (mlua
/// raises a Rust error as userdata, never as a string), and a tail call to a Lua function
/// replaces the caller's frame, so the position is unknown: the message comes without it.
/// The function's name in argument errors is still right (the shim falls back on it).
#[test]
fn tail_called_errors_lack_the_position() {
    assert_eq!(
        run("return cjson.decode('x')"),
        (
            'E',
            b"Expected value but found invalid token at character 1".to_vec()
        )
    );
    assert_eq!(
        run("return cjson.decode()"),
        (
            'E',
            b"bad argument #1 to 'decode' (expected 1 argument)".to_vec()
        )
    );
    // Not in tail position (what Redis answers in both cases):
    assert_eq!(
        run("return (cjson.decode('x'))"),
        (
            'E',
            b"user_script:1: Expected value but found invalid token at character 1".to_vec()
        )
    );
}

/// Numbers reach the library exactly, although mlua turns tiny numbers and -0 into the
/// integer 0 when it converts them to its values: arguments, table keys and values.
#[test]
fn numbers_are_exact() {
    assert_eq!(
        run("return cjson.encode({-0, 1e-300, [1e-300] = 1, [-0.5] = -0})"),
        run("return cjson.encode({-0, 1e-300, [1e-300] = 1, [-0.5] = -0})")
    );
    assert_eq!(run("return (cjson.encode(-0))"), ('S', b"-0".to_vec()));
    assert_eq!(
        run("return (cjson.encode(1e-300))"),
        ('S', b"1e-300".to_vec())
    );
    assert_eq!(
        run("return (cjson.encode({[1e-300] = 5}))"),
        ('S', b"{\"1e-300\":5}".to_vec())
    );
    assert_eq!(
        run("return (cmsgpack.pack(1e-300))"),
        ('S', [&[0xcbu8][..], &1e-300f64.to_be_bytes()].concat())
    );
}
