//! Scripting — EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT — differentially against
//! redis-server 7.0: the same scripts sent to both servers, the same replies, byte for
//! byte. The script environment (globals, their protection, `redis.*`, Redis's
//! `math.random`), the conversions between Lua and RESP both ways in RESP2 and RESP3,
//! the errors and their script positions, shebang flags, the script cache, MULTI; with
//! `--threads 1` and 4, and keys in one slot, on one shard and on several shards.

use goblin_tests::diff::{How, ask_both, for_each_thread_count, script, verdict};
use goblin_tests::keys::{LAYOUTS, Layout};
use goblin_tests::{Differential, Server};

/// Sends `args` to both servers and compares the replies (but HELLO's, which name the
/// connection's id).
fn same(d: &mut Differential, args: &[&str], ctx: &str) -> Vec<u8> {
    let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let (got, want) = ask_both(&mut d.g, &mut d.r, &raw);
    if args.first() == Some(&"HELLO") {
        return got;
    }
    let owned: Vec<Vec<u8>> = raw.iter().map(|a| a.to_vec()).collect();
    if let Err(e) = verdict(&got, &want, How::Exact, &owned) {
        panic!("{ctx}: {e}");
    }
    got
}

/// `EVAL script 0` on both servers.
fn eval0(d: &mut Differential, body: &str, ctx: &str) {
    same(d, &["EVAL", body, "0"], ctx);
}

/// Scripts that touch no key: results, conversions, the environment, errors.
const KEYLESS: &[&str] = &[
    "return redis.pcall('xread','BLOCK',0,'STREAMS','s','$')",
    "return redis.pcall('xreadgroup','GROUP','g','c','block',0,'STREAMS','s','>')",
    "return redis.pcall('xread','count','1','BLOCK','0')",
    "return 1",
    "return 'hello'",
    "return nil",
    "return true",
    "return false",
    "return 3.99",
    "return -3.99",
    "return 1e300",
    "return -1e300",
    "return 0/0",
    "return 2^53",
    "return {1, 2, 3.5, 'x', nil, 5}",
    "return {1, {2, {3, {4}}}, false, true}",
    "return {}",
    "return {ok = 'fine'}",
    "return {ok = 'a\\r\\nb'}",
    "return {err = 'boom'}",
    "return {err = 'CODE with text'}",
    "return {err = '-DASH x'}",
    "return {err = 'a\\r\\nb'}",
    "return {double = 1.5}",
    "return {double = 'x'}",
    "return {big_number = '12345678901234567890'}",
    "return {map = {a = 1}}",
    "return {set = {a = true}}",
    "return {verbatim_string = {format = 'txt', string = 'hi'}}",
    "return {1, ok = 'x'}",
    "return {1, err = 'x'}",
    "return {err = 1}",
    "return function() end",
    "local t = {} t[1] = t return #tostring(t) > 0",
    "return 'a', 'b'",
    "return redis.error_reply('X y')",
    "return redis.error_reply('boom')",
    "return redis.error_reply('-X y')",
    "return redis.error_reply()",
    "return redis.error_reply(1)",
    "return redis.status_reply('a b')",
    "return redis.status_reply()",
    "return redis.sha1hex('')",
    "return redis.sha1hex('abc')",
    "return redis.sha1hex(1)",
    "return redis.sha1hex()",
    "return redis.sha1hex({})",
    "return redis.setresp()",
    "return redis.setresp(4)",
    "return redis.setresp('x')",
    "return redis.log()",
    "return redis.log('x', 'y')",
    "return redis.log(9, 'y')",
    "return redis.log(redis.LOG_NOTICE, 'from a script', 1, 2)",
    "return redis.set_repl()",
    "return redis.set_repl(9)",
    "return redis.set_repl(redis.REPL_ALL)",
    "return redis.replicate_commands()",
    "return redis.breakpoint()",
    "return redis.debug('x')",
    "return redis.REDIS_VERSION_NUM",
    "return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}",
    "return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL}",
    "return redis.call()",
    "return redis.call({})",
    "return redis.call('get', {})",
    "return redis.call('nosuch')",
    "return redis.pcall('nosuch')",
    "return redis.call('subscribe', 'x')",
    "return redis.call('eval', 'return 1', '0')",
    "return redis.call('ping')",
    "return redis.call('ping', 'x')",
    "return redis.call('echo', 'x')",
    "return #redis.call('time')",
    "return redis.call('client', 'nosuch')",
    "error('x')",
    "error('x', 0)",
    "error({err = 'ERR table'})",
    "error({err = 'NOCODE'})",
    "error(12)",
    // (error({}) and error(nil) crash redis-server 7.0.15: not compared.)
    "local x = nil + 1",
    "x = 1",
    "return y",
    "_G.x = 1",
    "return _G.y",
    "rawset(_G, 'x', 1) return x",
    "return type(rawget(_G, 'nope'))",
    "local t = {} for k in pairs(_G) do t[#t+1] = k end table.sort(t) return t",
    "local t = {} for k in pairs(redis) do t[#t+1] = k end table.sort(t) return t",
    "local t = {} for k in pairs(math) do t[#t+1] = k end table.sort(t) return t",
    "local t = {} for k in pairs(string) do t[#t+1] = k end table.sort(t) return t",
    "local t = {} for k in pairs(table) do t[#t+1] = k end table.sort(t) return t",
    "return {type(os), type(io), type(print), type(dofile), type(loadfile), type(require), type(module), type(setfenv), type(getfenv), type(newproxy)}",
    "return type(loadstring('return 1'))",
    "return loadstring('return 1 + 1')()",
    "return _VERSION",
    "return {math.random(), math.random(10), math.random(5, 100)}",
    "return tostring(math.random())",
    "return {tostring(math.random()), tostring(math.random()), tostring(math.random())}",
    "math.randomseed(1) return tostring(math.random())",
    "math.randomseed(-7) return {math.random(1000), math.random(1000)}",
    "return math.random(0)",
    "return math.random(3, 2)",
    "return math.random(1, 2, 3)",
    "return math.randomseed()",
    "return math.random('x')",
    "return math.random('10')",
    "return tostring(1e15)",
    "return tostring(0.1)",
    "return tostring(-0.0)",
    "return string.format('%5.2f|%d|%s|%q', 3.14159, 42, 'x', 'a\\nb')",
    "return string.rep('ab', 3, ',')",
    "return {string.byte('abc', 1, -1)}",
    "return {pcall(error)}",
    "local ok, e = pcall(redis.call, 'nosuch') return {tostring(ok), type(e), e}",
    "local ok, e = pcall(error, {err = 'x'}) return {tostring(ok), type(e), e}",
    "local ok, e = pcall(error, {other = 'x'}) return {tostring(ok), type(e)}",
    "local ok, e = pcall(error, 'plain') return {tostring(ok), e}",
    "local ok, e = pcall(math.random, 0) return {tostring(ok), e}",
    "local ok, e = pcall(function() local x = y end) return {tostring(ok), e}",
    "local e = redis.pcall('nosuch') return {type(e), e.err}",
    "return select('#', redis.pcall('nosuch'))",
    "return coroutine.wrap(function() coroutine.yield(5) end)()",
    "return {xpcall(function() error('in') end, function(e) return 'handled: ' .. e end)}",
    "return table.concat({1, 2, 3}, '-')",
    "local t = {3, 1, 2} table.sort(t) return t",
    "return unpack({1, 2, 3})",
    "return gcinfo() > 0",
    "return #KEYS",
    "return #ARGV",
    "KEYS[1] = 'x' return KEYS",
    "return 1 +",
    "end",
    "return 'unfinished",
    "\n\nerror('on line three')",
    "local function f() error('deep') end\nlocal function g() f() end\ng()",
    "local t = setmetatable({}, {__index = function(t, k) error('meta ' .. k) end}) return t.x",
    // Every chunk is read as text (Lua 5.1 runs crafted bytecode unchecked): bytecode
    // given to loadstring or load is refused as Redis's Lua refuses it.
    "local f, e = loadstring(string.char(27) .. 'LuaQ') return tostring(e)",
    "local f, e = loadstring(string.char(27) .. 'LuaQ', 'named') return tostring(e)",
    "local f, e = loadstring(string.dump(function() return 1 end)) return tostring(e)",
    "local i = 0 local f, e = load(function() i = i + 1 if i == 1 then return string.char(27) .. 'Lua' end end) return tostring(e)",
    "local i = 0 local parts = {'return ', '4', '2'} local f = load(function() i = i + 1 return parts[i] end) return f()",
    "return loadstring('return 7')()",
    "local f, e = loadstring('x =', '=mine') return e",
    "local f = loadstring() return 1",
    "local f = loadstring({}) return 1",
    "local f = load('x') return 1",
    "\x1bLuaQ\x00\x01\x04\x08\x04\x08\x00",
];

/// Every keyless script, with each thread count, in RESP2 and RESP3.
#[test]
fn keyless_scripts_match_redis() {
    for_each_thread_count(|d, ctx| {
        for resp in ["2", "3"] {
            let ctx = format!("{ctx}, RESP{resp}");
            same(d, &["HELLO", resp], &ctx);
            for body in KEYLESS {
                eval0(d, body, &ctx);
            }
        }
    });
}

/// What a script may not change, so that the next script runs as the first did (Redis's
/// read-only tables): the globals (`redis = 1`, through `_G`, `rawset` or a chunk from
/// `loadstring`), the libraries' tables (`redis.call = f`, through the strings'
/// metatable too) and the metatables (`setmetatable(_G, {})`, `getmetatable(_G)`'s
/// fields) — each refused with Redis's error, and every script after them finds the
/// libraries as they were.
const TAMPERING: &[&str] = &[
    "setmetatable(_G, {})",
    "local g = getmetatable(_G) g.__index = {}",
    "local g = getmetatable(_G) g.__newindex = {}",
    "redis.call = function() return 1 end",
    "redis.pcall = function() return 1 end",
    "cjson.encode = function() return 1 end",
    "cmsgpack.pack = function() return 1 end",
    "bit.band = function() return 1 end",
    "string.upper = nil",
    "math.floor = nil",
    "table.insert = nil",
    "getmetatable('').__index.upper = nil",
    "redis = 1",
    "KEYS = nil",
    "_G.cjson = 1",
    "_G.newglobal = 1",
    "rawset(_G, 'redis', 1)",
    "rawset(redis, 'call', 1)",
    "loadstring('redis = 2')()",
    "setmetatable(redis, {})",
    "return type(getmetatable(redis))",
];

#[test]
fn scripts_cannot_change_what_later_scripts_see() {
    for_each_thread_count(|d, ctx| {
        for body in TAMPERING {
            eval0(d, body, ctx);
        }
        for body in [
            "return {type(redis), type(redis.call), type(cjson.encode), string.upper('a')}",
            "return redis.call('ping')",
            "return math.floor(2.5) .. ('x'):upper() .. type(KEYS)",
            "return tostring(rawequal(_G, _G._G))",
        ] {
            eval0(d, body, ctx);
        }
    });
}

/// What `redis.call` returns in Lua, per reply type, in RESP2 and after
/// `redis.setresp(3)`; shown through cjson-free code so that both directions convert.
#[test]
fn command_replies_convert_as_redis() {
    const SHOW: &str = "local function show(v) if type(v) == 'table' then local t = {} local ks = {} for k in pairs(v) do ks[#ks+1] = tostring(k) end table.sort(ks) for _, k in ipairs(ks) do local x = v[k] if x == nil then x = v[tonumber(k)] end t[#t+1] = k .. '=' .. show(x) end return '{' .. table.concat(t, ',') .. '}' end return type(v) .. ':' .. tostring(v) end\n";
    let calls = [
        "redis.call('set', KEYS[1], 'v')",
        "redis.call('get', KEYS[1])",
        "redis.call('get', KEYS[2])",
        "redis.call('incr', KEYS[3])",
        "redis.call('incrbyfloat', KEYS[3], '1.5')",
        "redis.call('del', KEYS[1])",
        "redis.call('hset', KEYS[4], 'a', '1', 'b', '2')",
        "redis.call('hgetall', KEYS[4])",
        "redis.call('sadd', KEYS[5], 'x')",
        "redis.call('smembers', KEYS[5])",
        "redis.call('zadd', KEYS[6], '1.5', 'm')",
        "redis.call('zscore', KEYS[6], 'm')",
        "redis.call('zrange', KEYS[6], 0, -1, 'withscores')",
        "redis.call('exists', KEYS[1], KEYS[2])",
        "redis.call('lpop', KEYS[7])",
        "redis.call('blpop', KEYS[7], 0)",
        "redis.call('type', KEYS[4])",
        "redis.call('ping')",
        "redis.pcall('incr', KEYS[4])",
        "redis.pcall('hget', KEYS[1])",
        "redis.call('set', KEYS[1], 3.5)",
        "redis.call('set', KEYS[1], 0.1)",
        "redis.call('get', KEYS[1])",
        "redis.call('set', KEYS[1], 1e20)",
        "redis.call('get', KEYS[1])",
        "redis.call('set', KEYS[1], -12)",
        "redis.call('get', KEYS[1])",
        "redis.call('object', 'encoding', KEYS[1])",
    ];
    for_each_thread_count(|d, ctx| {
        let keys: Vec<String> = (0..7).map(|i| format!("{{conv}}k{i}")).collect();
        for resp in ["2", "3"] {
            for client in ["2", "3"] {
                let ctx = format!("{ctx}, script RESP{resp}, client RESP{client}");
                same(d, &["HELLO", client], &ctx);
                same(d, &["FLUSHALL"], &ctx);
                for call in calls {
                    let body = format!("{SHOW}redis.setresp({resp}) return show({call})");
                    let mut args = vec!["EVAL", body.as_str(), "7"];
                    args.extend(keys.iter().map(String::as_str));
                    same(d, &args, &ctx);
                    // And the value as the script returns it.
                    let body = format!("redis.setresp({resp}) return {call}");
                    let mut args = vec!["EVAL", body.as_str(), "7"];
                    args.extend(keys.iter().map(String::as_str));
                    same(d, &args, &ctx);
                }
            }
        }
    });
}

/// Scripts that read and write their declared keys, in every layout: one slot, one
/// shard, several shards.
#[test]
fn scripts_with_keys_match_redis_in_every_layout() {
    let bodies = [
        "redis.call('set', KEYS[1], ARGV[1]) return redis.call('get', KEYS[1])",
        "local n = 0 for i, k in ipairs(KEYS) do n = n + redis.call('incr', k) end return n",
        "for i, k in ipairs(KEYS) do redis.call('rpush', k, ARGV[1], ARGV[2]) end local t = {} for i, k in ipairs(KEYS) do t[i] = redis.call('lrange', k, 0, -1) end return t",
        "local v = redis.call('get', KEYS[1]) redis.call('set', KEYS[2], v or 'none') local r = redis.call('get', KEYS[2]) return r",
        "local ok = redis.pcall('hset', KEYS[1], 'f', 'v') return {type(ok), ok.err}",
        "redis.call('del', KEYS[1]) local r = redis.call('exists', KEYS[1], KEYS[2], KEYS[3]) return r",
        "local t = {} for i, k in ipairs(KEYS) do t[#t+1] = redis.call('type', k).ok end return t",
        "local r = redis.call('select', 1) redis.call('set', KEYS[1], 'in db1') local v = redis.call('get', KEYS[1]) return {r.ok, v}",
        "local v = redis.call('get', KEYS[1]) return v",
        // pcall and xpcall around commands (a script run as a plan yields each command
        // from inside them).
        "local ok, v = pcall(redis.call, 'incr', KEYS[1]) local ok2, e = pcall(redis.call, 'hset', KEYS[2], 'f') return {tostring(ok), v, tostring(ok2), type(e), e}",
        "local ok, e = pcall(function() redis.call('set', KEYS[1], 'x') redis.call('set', KEYS[3], 'y') error('boom') end) return {tostring(ok), e, redis.call('get', KEYS[1]), redis.call('get', KEYS[3])}",
        "local ok, e = pcall(function() return redis.call('lpush', KEYS[2], 'z') end) return {tostring(ok), e}",
        "local ok, e = xpcall(function() return redis.call('get', KEYS[1]) .. redis.call('get', KEYS[3]) end, function(m) return 'handled' end) return {tostring(ok), e}",
        "local ok, e = xpcall(function() redis.call('incr', KEYS[3]) end, function(m) return {type(m), type(m) == 'table' and m.err or m} end) return {tostring(ok), e}",
        "local ok, e = pcall(pcall, redis.call, 'get', KEYS[2]) return {tostring(ok), tostring(e)}",
        "local ok, a, b = pcall(function(x, y) return redis.call('exists', KEYS[1], KEYS[2]), x .. y end, 'p', 'q') return {tostring(ok), a, b}",
        // Coroutines of the script's own, calling commands (a command's yield passes
        // through them to the plan), and what Lua 5.1 refuses.
        "local co = coroutine.create(function(k) redis.call('set', k, 'v1') local x = coroutine.yield(redis.call('get', k)) redis.call('set', KEYS[3], x) return 'fin' end) local r1 = {coroutine.resume(co, KEYS[1])} local r2 = {coroutine.resume(co, 'z')} return {tostring(r1[1]), r1[2], tostring(r2[1]), r2[2], redis.call('get', KEYS[3]), coroutine.status(co)}",
        "local f = coroutine.wrap(function() for i = 1, 3 do coroutine.yield(redis.call('incr', KEYS[2])) end end) return {f(), f(), f(), redis.call('get', KEYS[3])}",
        "local ok, e = coroutine.resume(coroutine.create(function() redis.call('get', KEYS[3]) redis.call('hset', KEYS[1]) end)) return {tostring(ok), type(e), e.err}",
        "local co = coroutine.wrap(function() local ok, e = pcall(function() redis.call('get', KEYS[1]) coroutine.yield('inner') return redis.call('get', KEYS[2]) end) return {tostring(ok), tostring(e)} end) return co()",
        "local co = coroutine.wrap(function() local ok, e = pcall(function() redis.call('get', KEYS[1]) local w = coroutine.wrap(function() coroutine.yield(redis.call('get', KEYS[2]) or 'n') end) return w() end) return {tostring(ok), tostring(e)} end) return co()",
        "redis.call('get', KEYS[1]) return {tostring(coroutine.running() == nil), tostring(pcall(function() return coroutine.running() == nil end))}",
        "redis.call('get', KEYS[1]) coroutine.yield(1) return 1",
        "redis.call('get', KEYS[2]) local ok, e = pcall(coroutine.yield, 1) return {tostring(ok), e}",
        "redis.call('get', KEYS[3]) return {coroutine.resume(42)}",
        "redis.call('get', KEYS[3]) local f = coroutine.wrap(42) return 1",
        "local f = coroutine.wrap(function() redis.call('get', KEYS[1]) error('w') end) local ok, e = pcall(function() local r = f() return r end) return e",
        "local f = coroutine.wrap(function() end) f() redis.call('get', KEYS[2]) local ok, e = pcall(function() local r = f() return r end) return e",
        // Errors raised as tables, and at a level.
        "redis.call('get', KEYS[3]) error({err='raised as a table'})",
        "redis.call('get', KEYS[1]) local ok, e = pcall(error, {err='in pcall'}) return e",
        "redis.call('get', KEYS[2]) local function f() error('level 2', 2) end local ok, e = pcall(function() f() end) return e",
        "redis.call('get', KEYS[1]) error('level 0', 0)",
        // A failing command called in tail position: its error names the script's line
        // (redis.call is a C function in redis-server; a Lua one in goblin's plans).
        "redis.call('set', KEYS[1], 'x') return redis.call('incr', KEYS[1])",
        "redis.call('get', KEYS[2])\nlocal function f(k) return redis.call('hset', k, 'f') end\nreturn f(KEYS[3])",
        "redis.call('get', KEYS[3]) return redis.call('nosuchcommand', KEYS[1])",
        "redis.call('set', KEYS[2], 'x') return redis.pcall('incr', KEYS[2])",
        "local function many() return redis.call('get', KEYS[1]), redis.call('exists', KEYS[2]) end local function pass() return many() end return {pass()}",
    ];
    for_each_thread_count(|d, ctx| {
        for layout in LAYOUTS {
            let ctx = format!("{ctx}, {layout:?}");
            same(d, &["FLUSHALL"], &ctx);
            same(d, &["CONFIG", "RESETSTAT"], &ctx);
            let keys = layout.keys(3);
            for body in bodies {
                let mut args = vec!["EVAL", body, "3"];
                args.extend(keys.iter().map(String::as_str));
                args.extend(["a", "b"]);
                same(d, &args, &ctx);
            }
            // The commands the scripts called count as redis-server counts them, whether
            // a script ran on one shard or as a plan across several.
            let (got, want) = (calls(&mut d.g), calls(&mut d.r));
            assert_eq!(got, want, "{ctx}: INFO commandstats");
            for k in &keys {
                same(d, &["DUMP", k], &ctx);
                same(d, &["SELECT", "1"], &ctx);
                same(d, &["GET", k], &ctx);
                same(d, &["SELECT", "0"], &ctx);
            }
        }
    });
}

/// INFO commandstats without the times: each command's calls, rejected and failed calls.
fn calls(raw: &mut goblin_tests::Raw) -> Vec<String> {
    let info = String::from_utf8_lossy(&raw.cmd(&[b"INFO", b"commandstats"])).into_owned();
    let mut calls: Vec<String> = info
        .lines()
        .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info:"))
        .map(|l| {
            let (name, fields) = l.split_once(':').unwrap_or((l, ""));
            let kept: Vec<&str> = fields
                .split(',')
                .filter(|f| !f.starts_with("usec"))
                .collect();
            format!("{name}:{}", kept.join(","))
        })
        .collect();
    calls.sort();
    calls
}

/// EVAL's and EVALSHA's own errors, the cache (SCRIPT LOAD, EXISTS, FLUSH), EVALSHA
/// by a SHA1 in upper case, shebangs and their flags, the `_RO` variants.
#[test]
fn script_commands_and_flags_match_redis() {
    for_each_thread_count(|d, ctx| {
        script(
            d,
            &[],
            ctx,
            r##"
            SCRIPT FLUSH
            SCRIPT EXISTS e0e1f9fabfc9d4800c877a703b823ac0578ff8db
            SCRIPT LOAD "return 1"
            SCRIPT EXISTS e0e1f9fabfc9d4800c877a703b823ac0578ff8db nosuch E0E1F9FABFC9D4800C877A703B823AC0578FF8DB
            EVALSHA e0e1f9fabfc9d4800c877a703b823ac0578ff8db 0
            EVALSHA E0E1F9FABFC9D4800C877A703B823AC0578FF8DB 0
            EVALSHA_RO e0e1f9fabfc9d4800c877a703b823ac0578ff8db 0
            EVALSHA 1 0
            EVALSHA ffffffffffffffffffffffffffffffffffffffff 0
            SCRIPT LOAD "x y"
            SCRIPT LOAD
            SCRIPT EXISTS
            SCRIPT FLUSH x
            SCRIPT FLUSH ASYNC
            SCRIPT FLUSH sync
            SCRIPT EXISTS e0e1f9fabfc9d4800c877a703b823ac0578ff8db
            SCRIPT KILL
            SCRIPT HELP
            SCRIPT NOSUCH
            EVAL "return 1" x
            EVAL "return 1" 2 a
            EVAL "return 1" -1
            EVAL "return 1"
            EVAL "return 1" 99999999999999999999
            EVAL "#!lua flags=no-writes,bogus\nreturn 1" 0
            EVAL "#!lua" 0
            EVAL "#!luajit\nreturn 1" 0
            EVAL "#!lua foo\nreturn 1" 0
            EVAL "#!lua flags=\nreturn 1" 0
            EVAL "#!lua name=x\nreturn 1" 0
            EVAL "#!lua\nreturn 1" 0
            EVAL "#!lua\nerror('line two')" 0
            EVAL_RO "#!lua\nreturn 1" 0
            EVAL_RO "#!lua flags=no-writes\nreturn 1" 0
            EVAL_RO "return 1" 0
            EVAL "#!lua flags=no-writes\nreturn redis.call('set', KEYS[1], 'v')" 1 {f}k
            EVAL_RO "return redis.call('set', KEYS[1], 'v')" 1 {f}k
            EVAL_RO "return redis.call('get', KEYS[1])" 1 {f}k
            EVAL_RO "return redis.call('publish', 'ch', 'm')" 0
            EVAL "#!lua flags=allow-oom,allow-stale,no-cluster,allow-cross-slot-keys\nreturn 1" 0
            SCRIPT LOAD "#!lua flags=no-writes\nreturn 2"
            "##,
        );
    });
}

/// A script inside MULTI runs inside the transaction, on one shard or several.
#[test]
fn scripts_in_multi_match_redis() {
    for_each_thread_count(|d, ctx| {
        for layout in [Layout::SameSlot, Layout::CrossShard] {
            let ctx = format!("{ctx}, {layout:?}");
            let keys = layout.keys(2);
            same(d, &["FLUSHALL"], &ctx);
            same(d, &["MULTI"], &ctx);
            same(d, &["SET", &keys[0], "1"], &ctx);
            same(
                d,
                &["EVAL", "return redis.call('incr', KEYS[1])", "1", &keys[0]],
                &ctx,
            );
            same(
                d,
                &[
                    "EVAL",
                    "redis.call('set', KEYS[2], 'x') return redis.call('get', KEYS[2])",
                    "2",
                    &keys[0],
                    &keys[1],
                ],
                &ctx,
            );
            same(d, &["EVAL", "error('in multi')", "0"], &ctx);
            same(d, &["EXEC"], &ctx);
            same(d, &["MGET", &keys[0], &keys[1]], &ctx);
        }
    });
}

/// Keys a script does not declare, used as redis-server lets a script use them. A
/// script that declares no key runs as redis-server's at every thread count (on its
/// connection's shard until it calls a command with keys, then again under its plan
/// with every shard locked); one that declares keys may use undeclared keys of its own
/// shard, and gets a clear error for another shard's (after what it wrote before,
/// which stays, as a script's writes before an error stay in redis-server); with
/// `lua-allow-undeclared-keys yes` or the script's flag it may use any key.
#[test]
fn undeclared_keys_work_as_in_redis_where_they_can() {
    const BODIES: [&str; 5] = [
        "redis.call('set', 'u1', 'a') redis.call('set', 'u2', 'b') redis.call('set', 'u3', 'c') local r = redis.call('mget', 'u1') return r",
        "local t = {} for i = 1, 20 do redis.call('incr', 'n' .. i) t[i] = redis.call('get', 'n' .. i) end return t",
        "local v = redis.call('get', 'u2') return v",
        "local ok = redis.pcall('incr', 'u3') return ok.err",
        "return redis.call('set', 'undeclared', 'v')",
    ];
    for threads in ["1", "4"] {
        for allowed in ["no", "yes"] {
            let goblin = Server::goblin_with(&[
                "--threads",
                threads,
                "--lua-allow-undeclared-keys",
                allowed,
            ]);
            let mut d = Differential::with_servers(goblin, Server::redis());
            let ctx = format!("--threads {threads}, lua-allow-undeclared-keys {allowed}");
            for body in BODIES {
                eval0(&mut d, body, &ctx);
            }
            for k in ["u1", "u2", "u3", "n7", "undeclared"] {
                same(&mut d, &["GET", k], &ctx);
            }
            // Inside MULTI, new scripts and known ones, declaring keys or not.
            let declared = "redis.call('set', KEYS[1], 'x') redis.call('set', ARGV[1], 'y') \
                            return redis.call('mget', KEYS[1], ARGV[1])";
            let fresh = "redis.call('set', 'm3', 'z') return redis.call('get', 'm4')";
            for args in [
                &["MULTI"][..],
                &["EVAL", declared, "1", "m1", "m2"],
                &["EVAL", declared, "1", "m5", "m6"],
                &["EVAL", BODIES[0], "0"],
                &["EVAL", fresh, "0"],
                &["EVAL", "return redis.call('get', 'm2')", "1", "m2"],
                &["EXEC"],
            ] {
                same(&mut d, args, &ctx);
            }
            for k in ["m1", "m2", "m3", "m5", "m6"] {
                same(&mut d, &["GET", k], &ctx);
            }
        }
    }

    // Declared keys on shard 0 of 4, undeclared ones of shards 0 and 1, as BullMQ's
    // scripts use them (its job keys): code that may touch undeclared keys runs with
    // every shard locked.
    let g = Server::goblin_threads(4);
    let mut c = g.raw();
    let here = goblin_tests::keys::keys_on("here.", 0, 4, 2);
    let there = goblin_tests::keys::keys_on("there.", 1, 4, 2);
    let body = b"redis.call('set', KEYS[1], 'x') redis.call('set', ARGV[1], 'y') \
                 return redis.call('get', ARGV[1])";
    // (A long body too: EVAL's routing remembers short ones, finds long ones by SHA1.)
    let mut long = format!("-- {}\n", "x".repeat(20_000)).into_bytes();
    long.extend_from_slice(body);
    for body in [&body[..], &long] {
        for (key, other) in [
            (&here[0], &here[1]),
            (&here[0], &there[0]),
            (&there[1], &here[1]),
        ] {
            c.cmd(&[b"DEL", key.as_bytes(), other.as_bytes()]);
            let reply = c.cmd(&[b"EVAL", body, b"1", key.as_bytes(), other.as_bytes()]);
            assert_eq!(reply, b"$1\r\ny\r\n", "{key} {other}");
            assert_eq!(c.cmd(&[b"GET", key.as_bytes()]), b"$1\r\nx\r\n");
        }
    }
    // Keys tagged together mark code written for Redis Cluster: the script runs on
    // their shard, and may touch undeclared keys of its own shard (its tag's, or by
    // chance); another shard's is refused, as Redis Cluster refuses another slot's, the
    // run keeping what it wrote before.
    let tag_key = "{t}:b";
    let reply = c.cmd(&[b"EVAL", body, b"1", b"{t}:a", tag_key.as_bytes()]);
    assert_eq!(reply, b"$1\r\ny\r\n");
    let t_shard = goblin_tests::keys::shard_of(b"{t}", 4);
    let elsewhere = goblin_tests::keys::keys_on("else.", (t_shard + 1) % 4, 4, 1);
    let reply = c.cmd(&[b"EVAL", body, b"1", b"{t}:c", elsewhere[0].as_bytes()]);
    let text = String::from_utf8_lossy(&reply);
    let wanted = format!(
        "-ERR Script attempted to access key '{}' that it did not declare",
        elsewhere[0]
    );
    assert!(text.starts_with(&wanted), "{text}");
    assert_eq!(c.cmd(&[b"EXISTS", elsewhere[0].as_bytes()]), b":0\r\n");
    assert_eq!(c.cmd(&[b"GET", b"{t}:c"]), b"$1\r\nx\r\n");
    drop(c);
    drop(g);

    // The script's own flag (Goblin's; redis-server does not know it), without the option.
    let goblin = Server::goblin_threads(4);
    let mut c = goblin.raw();
    let reply = c.cmd(&[
        b"EVAL",
        b"#!lua flags=allow-undeclared-keys\nredis.call('set', 'f1', 'x') local v = redis.call('get', 'f1') return v",
        b"0",
    ]);
    assert_eq!(reply, b"$1\r\nx\r\n");
}

/// A script's writes reach the append-only log as their effects — each command it
/// called, in its deterministic form — never as the script: after a restart the data
/// is there (relative expiries kept as deadlines, a float increment as its result), with
/// the script cache empty and `math.random` drawn anew, and the log holds no EVAL.
#[test]
fn the_log_holds_a_scripts_effects_not_the_script() {
    for threads in ["1", "4"] {
        let dir = goblin_tests::scratch_dir("script-aof");
        let path = dir.to_str().expect("a UTF-8 path").to_string();
        let args = [
            "--dir",
            path.as_str(),
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--threads",
            threads,
        ];
        let mut server = Server::goblin_with(&args);
        let mut g = server.raw();
        let keys = Layout::CrossShard.keys(2);
        let body = "redis.call('set', KEYS[1], 'v', 'EX', 1000) \
                    redis.call('incrbyfloat', KEYS[2], '1.5') \
                    redis.call('rpush', KEYS[3], math.random(1000000)) \
                    return redis.call('get', KEYS[2])";
        let list = "list{x}".to_string();
        let reply = g.cmd(&[
            b"EVAL",
            body.as_bytes(),
            b"3",
            keys[0].as_bytes(),
            keys[1].as_bytes(),
            list.as_bytes(),
        ]);
        assert_eq!(reply, b"$3\r\n1.5\r\n", "--threads {threads}");
        let pushed = g.cmd(&[b"LRANGE", list.as_bytes(), b"0", b"-1"]);
        server.kill();
        let again = Server::goblin_with(&args);
        let mut g = again.raw();
        assert_eq!(g.cmd(&[b"GET", keys[0].as_bytes()]), b"$1\r\nv\r\n");
        let ttl = String::from_utf8_lossy(&g.cmd(&[b"TTL", keys[0].as_bytes()])).into_owned();
        assert!(ttl.starts_with(":99") || ttl == ":1000\r\n", "{ttl}");
        assert_eq!(g.cmd(&[b"GET", keys[1].as_bytes()]), b"$3\r\n1.5\r\n");
        assert_eq!(g.cmd(&[b"LRANGE", list.as_bytes(), b"0", b"-1"]), pushed);
        assert_eq!(
            g.cmd(&[b"SCRIPT", b"EXISTS", sha1(body).as_bytes()]),
            b"*1\r\n:0\r\n"
        );
        let mut logged = Vec::new();
        for entry in std::fs::read_dir(dir.join("appendonlydir")).expect("the log") {
            logged.extend(std::fs::read(entry.expect("an entry").path()).expect("a file"));
        }
        let text = String::from_utf8_lossy(&logged).to_ascii_lowercase();
        assert!(!text.contains("eval"), "{text}");
        assert!(
            text.contains("incrbyfloat") || text.contains("set"),
            "{text}"
        );
        drop(again);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The SHA1 of a script, as SCRIPT LOAD computes it (through redis-cli-free means: the
/// server itself).
fn sha1(body: &str) -> String {
    let s = Server::goblin_threads(1);
    let reply = s.raw().cmd(&[b"SCRIPT", b"LOAD", body.as_bytes()]);
    String::from_utf8_lossy(&reply[5..reply.len() - 2]).into_owned()
}

/// The end of a script that runs for 1.5 s, calling TIME all along.
const CALLS_FOR_1_5_S: &str = "local t = redis.call('time') \
                               local start = t[1] * 1000000 + t[2] \
                               while true do \
                                 local n = redis.call('time') \
                                 if n[1] * 1000000 + n[2] - start > 1500000 then break end \
                               end \
                               return 'done'";

/// Asserts that a transcript holds a reply starting with each of `expected`.
fn said_all(got: &[String], expected: &[&str]) {
    for expected in expected {
        assert!(
            got.iter().any(|r| r.starts_with(expected)),
            "{expected}: {got:?}"
        );
    }
}

/// Sends PING on `raw` until a script is busy (the reply is BUSY); at most 20 s.
fn until_busy(raw: &mut goblin_tests::Raw) -> Vec<u8> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let reply = raw.cmd(&[b"PING"]);
        if reply.starts_with(b"-BUSY") || std::time::Instant::now() > deadline {
            return reply;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// FUNCTION STATS's reply, but how long the busy script has run.
fn function_stats(c: &mut goblin_tests::Raw) -> String {
    let stats = String::from_utf8_lossy(&c.cmd(&[b"FUNCTION", b"STATS"])).into_owned();
    match stats.split_once("duration_ms\r\n:") {
        Some((head, tail)) => format!("{head}{}", &tail[tail.find('\r').unwrap_or(0)..]),
        None => stats,
    }
}

/// What clients see around busy scripts on the server at `port`: the replies, in order.
fn busy_transcript(port: u16, key: &str) -> Vec<String> {
    use goblin_tests::Raw;
    use goblin_tests::encode;
    let show = |r: Vec<u8>| String::from_utf8_lossy(&r).into_owned();
    let mut out = Vec::new();
    let mut admin = Raw::connect(port);
    admin.cmd(&[b"CONFIG", b"SET", b"busy-reply-threshold", b"100"]);
    // Connected before the script: on every thread.
    let mut before: Vec<Raw> = (0..4).map(|_| Raw::connect(port)).collect();
    for c in &mut before {
        out.push(show(c.cmd(&[b"PING"])));
    }
    let mut runner = Raw::connect(port);

    // A read-only script that never ends: BUSY for everyone else, SCRIPT KILL stops it.
    runner.send(&encode(&[
        b"EVAL",
        b"local i = 0 while true do i = i + 1 end",
        b"0",
    ]));
    out.push(show(until_busy(&mut admin)));
    for c in &mut before {
        out.push(show(c.cmd(&[b"GET", key.as_bytes()])));
    }
    out.push(function_stats(&mut before[0]));
    // Connected during it: whichever thread takes them, and the one that accepts.
    let mut after = Raw::connect(port);
    for _ in 0..4 {
        after = Raw::connect(port);
        out.push(show(after.cmd(&[b"PING"])));
    }
    out.push(show(after.cmd(&[b"NOSUCHCOMMAND"])));
    out.push(show(after.cmd(&[b"FUNCTION", b"KILL"])));
    out.push(show(after.cmd(&[b"SCRIPT", b"KILL"])));
    out.push(show(runner.reply()));
    out.push(show(after.cmd(&[b"PING"])));
    out.push(show(before[0].cmd(&[b"SCRIPT", b"KILL"])));

    // One that catches the kill with `pcall` and goes on: stopped all the same (the
    // error is raised again as soon as it is out of the `pcall`).
    runner.send(&encode(&[
        b"EVAL",
        b"local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end",
        b"0",
    ]));
    out.push(show(until_busy(&mut admin)));
    out.push(show(after.cmd(&[b"SCRIPT", b"KILL"])));
    out.push(show(runner.reply()));
    out.push(show(after.cmd(&[b"PING"])));

    // A script that wrote: UNKILLABLE, and it ends by itself.
    let wrote = format!("redis.call('set', KEYS[1], 'v') {CALLS_FOR_1_5_S}");
    runner.send(&encode(&[b"EVAL", wrote.as_bytes(), b"1", key.as_bytes()]));
    out.push(show(until_busy(&mut admin)));
    out.push(show(after.cmd(&[b"SCRIPT", b"KILL"])));
    out.push(show(runner.reply()));
    out.push(show(after.cmd(&[b"GET", key.as_bytes()])));

    // A function: BUSY names FUNCTION KILL, and FUNCTION KILL stops it.
    let lib = "#!lua name=busylib\n\
               redis.register_function{function_name='spin', \
                 callback=function() local i = 0 while true do i = i + 1 end end, \
                 flags={'no-writes'}}";
    out.push(show(admin.cmd(&[b"FUNCTION", b"LOAD", lib.as_bytes()])));
    runner.send(&encode(&[b"FCALL", b"spin", b"0"]));
    out.push(show(until_busy(&mut admin)));
    // FUNCTION STATS shows it, from its thread and another.
    for c in [&mut after, &mut before[0]] {
        out.push(function_stats(c));
    }
    out.push(show(before[1].cmd(&[b"INCR", key.as_bytes()])));
    out.push(show(after.cmd(&[b"SCRIPT", b"KILL"])));
    out.push(show(after.cmd(&[b"FUNCTION", b"KILL"])));
    out.push(show(runner.reply()));
    out.push(show(admin.cmd(&[b"FUNCTION", b"FLUSH"])));
    out.push(show(admin.cmd(&[b"DEL", key.as_bytes()])));
    out
}

/// Busy scripts, as redis-server answers around them: past `busy-reply-threshold`, the
/// other clients — connected before the script or after, on its thread or another —
/// get BUSY (naming SCRIPT KILL, or FUNCTION KILL for a function); SCRIPT KILL stops a
/// script that has not written (its caller gets the kill error), and a script that wrote
/// is UNKILLABLE until it ends; FUNCTION KILL for functions.
#[test]
fn busy_scripts_answer_the_other_clients_and_can_be_killed() {
    for threads in [1, 2] {
        let goblin = Server::goblin_threads(threads);
        let redis = Server::redis();
        for key in ["busy:a", "busy:b"] {
            let got = busy_transcript(goblin.port, key);
            let want = busy_transcript(redis.port, key);
            assert_eq!(got, want, "--threads {threads}, key {key}");
            // (And what both said is what this is about.)
            said_all(
                &got,
                &[
                    "-BUSY Redis is busy running a script. You can only call SCRIPT KILL",
                    "-BUSY Redis is busy running a script. You can only call FUNCTION KILL",
                    "-UNKILLABLE",
                    "-ERR Script killed by user with SCRIPT KILL...",
                ],
            );
        }
    }
}

/// What a client sees around busy scripts whose two keys, `a` and `b`, are on different
/// shards (so that goblin runs them as plans, coroutines suspended in each call): one
/// that only read, looping inside `pcall` (SCRIPT KILL stops it: the kill error is what
/// its `pcall` returns), one looping in a coroutine of its own, one that keeps reading,
/// and one that wrote and then loops (UNKILLABLE; it ends by itself).
fn busy_plan_transcript(port: u16, a: &str, b: &str) -> Vec<String> {
    use goblin_tests::{Raw, encode};
    let show = |r: Vec<u8>| String::from_utf8_lossy(&r).into_owned();
    let mut out = Vec::new();
    let mut admin = Raw::connect(port);
    admin.cmd(&[b"CONFIG", b"SET", b"busy-reply-threshold", b"100"]);
    let mut runner = Raw::connect(port);
    let mut other = Raw::connect(port);
    // Runs `script` until it is busy, asks `during` meanwhile, SCRIPT KILL, then takes
    // the script's reply.
    let mut busy = |script: &str, during: &[&[u8]], out: &mut Vec<String>| {
        runner.send(&encode(&[
            b"EVAL",
            script.as_bytes(),
            b"2",
            a.as_bytes(),
            b.as_bytes(),
        ]));
        out.push(show(until_busy(&mut admin)));
        if !during.is_empty() {
            out.push(show(other.cmd(during)));
        }
        out.push(show(other.cmd(&[b"SCRIPT", b"KILL"])));
        out.push(show(runner.reply()));
        out.push(show(other.cmd(&[b"GET", a.as_bytes()])));
    };
    let read = "local ok, e = pcall(function() \
                  redis.call('get', KEYS[1]) redis.call('get', KEYS[2]) \
                  local i = 0 while true do i = i + 1 end \
                end) \
                return {tostring(ok), tostring(e)}";
    busy(read, &[b"PING"], &mut out);
    // One looping inside a coroutine of its own.
    let inside = "redis.call('get', KEYS[1]) redis.call('get', KEYS[2]) \
                  coroutine.wrap(function() local i = 0 while true do i = i + 1 end end)()";
    busy(inside, &[], &mut out);
    // One that keeps calling commands: little time in Lua between them.
    let calls = "while true do redis.call('get', KEYS[1]) redis.call('get', KEYS[2]) end";
    busy(calls, &[], &mut out);
    let wrote =
        format!("redis.call('set', KEYS[1], 'v') redis.call('get', KEYS[2]) {CALLS_FOR_1_5_S}");
    busy(&wrote, &[], &mut out);
    out.push(show(admin.cmd(&[b"DEL", a.as_bytes()])));
    out
}

/// A busy script run as a plan (its keys on two shards) turns busy as one run on its
/// shard does — the count hook follows it into its coroutine, and into the coroutine
/// its `pcall` runs in — so the other clients get BUSY, SCRIPT KILL stops it unless it
/// wrote, as redis-server answers.
#[test]
fn busy_scripts_run_as_plans_can_be_killed() {
    use goblin_tests::keys::keys_on;
    let threads = 2;
    let goblin = Server::goblin_threads(threads);
    let redis = Server::redis();
    let a = keys_on("busyplan:a", 0, threads, 1).remove(0);
    let b = keys_on("busyplan:b", 1, threads, 1).remove(0);
    let got = busy_plan_transcript(goblin.port, &a, &b);
    let want = busy_plan_transcript(redis.port, &a, &b);
    assert_eq!(got, want);
    said_all(
        &got,
        &[
            "-BUSY Redis is busy running a script. You can only call SCRIPT KILL",
            "-UNKILLABLE",
            "+OK",
        ],
    );
    assert!(
        got.iter().any(|r| r.contains("Script killed by user")),
        "{got:?}"
    );
}

/// SHUTDOWN during a busy script that wrote (which SCRIPT KILL cannot stop): without
/// NOSAVE, the BUSY error; SHUTDOWN NOSAVE ends the server at once, from a client on
/// the script's thread or another, as redis-server does.
#[test]
fn shutdown_nosave_ends_a_busy_script_that_wrote() {
    use goblin_tests::{Raw, encode};
    let spin = "redis.call('set', KEYS[1], 'v') local i = 0 while true do i = i + 1 end";
    let run = |mut server: Server, from_another: usize| -> Vec<String> {
        let show = |r: Vec<u8>| String::from_utf8_lossy(&r).into_owned();
        let mut out = Vec::new();
        let mut admin = Raw::connect(server.port);
        admin.cmd(&[b"CONFIG", b"SET", b"busy-reply-threshold", b"100"]);
        let mut others: Vec<Raw> = (0..from_another)
            .map(|_| Raw::connect(server.port))
            .collect();
        let mut runner = Raw::connect(server.port);
        runner.send(&encode(&[b"EVAL", spin.as_bytes(), b"1", b"k"]));
        out.push(show(until_busy(&mut admin)));
        out.push(show(admin.cmd(&[b"SCRIPT", b"KILL"])));
        out.push(show(admin.cmd(&[b"SHUTDOWN"])));
        out.push(show(admin.cmd(&[b"SHUTDOWN", b"SAVE"])));
        let by = others.last_mut().unwrap_or(&mut admin);
        by.send(&encode(&[b"SHUTDOWN", b"NOSAVE"]));
        let (rest, closed) = by.read_to_close(std::time::Duration::from_secs(10));
        out.push(format!("{} closed={closed}", show(rest)));
        // Once that connection is closed, no other is accepted (the listener goes
        // first).
        let again = std::net::TcpStream::connect(("127.0.0.1", server.port));
        out.push(format!(
            "connect again: {}",
            match again {
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => "refused",
                Err(_) => "failed otherwise",
                Ok(_) => "accepted",
            }
        ));
        let status = server.wait_exit(std::time::Duration::from_secs(10));
        out.push(format!("exited={}", status.is_some()));
        out
    };
    for threads in [1, 2] {
        for from_another in [0, 3] {
            let got = run(Server::goblin_threads(threads), from_another);
            let want = run(Server::redis(), from_another);
            assert_eq!(
                got, want,
                "--threads {threads}, {from_another} other clients"
            );
            assert!(got.last().is_some_and(|s| s == "exited=true"), "{got:?}");
        }
    }
}

/// A script run again and again under its plan (keys on several shards) sees each run's
/// own `KEYS` and `ARGV`, functions of its own and the globals' protection: runs one
/// after another against redis-server, and runs waiting at once on one thread (a worker
/// gives a finished run's main function to the script's next run).
#[test]
fn repeated_runs_across_shards_keep_their_own_keys_and_args() {
    let bodies = [
        "redis.call('set', KEYS[1], ARGV[1]) local t = {} for i, k in ipairs(KEYS) do t[i] = k .. '=' .. tostring(redis.call('get', k)) end t[#t + 1] = table.concat(ARGV, ',') return t",
        "local function f() return ARGV[#ARGV] end redis.call('incr', KEYS[2]) return {f(), #KEYS, #ARGV}",
        "redis.call('get', KEYS[1]) leaked = ARGV[1] return 1",
        "redis.call('get', KEYS[2]) return type(leaked)",
        "redis.call('get', KEYS[1]) error('run ' .. ARGV[1])",
    ];
    for_each_thread_count(|d, ctx| {
        let mut keys = Layout::CrossShard.keys(4);
        for round in 0..6 {
            keys.rotate_left(1);
            let argv: Vec<String> = (0..=round % 3).map(|i| format!("r{round}a{i}")).collect();
            for body in bodies {
                let mut args = vec!["EVAL", body, "4"];
                args.extend(keys.iter().map(String::as_str));
                args.extend(argv.iter().map(String::as_str));
                same(d, &args, &format!("{ctx}, round {round}"));
            }
        }
    });

    let body = "local a = ARGV[1] redis.call('set', KEYS[1], a) redis.call('set', KEYS[2], a) \
                return {a, redis.call('get', KEYS[1]), redis.call('get', KEYS[2]), KEYS[1]}";
    let server = Server::goblin_threads(4);
    std::thread::scope(|s| {
        for client in 0..8 {
            let mut raw = server.raw();
            s.spawn(move || {
                let keys = goblin_tests::keys::spread(&format!("c{client}."), 4, 1);
                for run in 0..200 {
                    let (arg, k1, k2) = (
                        format!("{client}-{run}"),
                        &keys[run % 4],
                        &keys[(run + 1) % 4],
                    );
                    let reply = raw.cmd(&[
                        b"EVAL",
                        body.as_bytes(),
                        b"2",
                        k1.as_bytes(),
                        k2.as_bytes(),
                        arg.as_bytes(),
                    ]);
                    let bulk = |s: &str| format!("${}\r\n{s}\r\n", s.len());
                    let want = format!(
                        "*4\r\n{}{}{}{}",
                        bulk(&arg),
                        bulk(&arg),
                        bulk(&arg),
                        bulk(k1)
                    );
                    assert_eq!(
                        String::from_utf8_lossy(&reply),
                        want,
                        "client {client}, run {run}"
                    );
                }
            });
        }
    });
}

/// DEBUG SET-DISABLE-DENY-SCRIPTS (redis-server's testing flag): with it, a script's
/// call of a `noscript` command is not refused for its flag, and runs on a client of
/// the script's (which has no name, and an id of its own); without it, redis-server's
/// refusal again — on both servers.
#[test]
fn debug_set_disable_deny_scripts_lifts_the_noscript_refusal() {
    let args = ["--enable-debug-command", "yes"];
    for server in [Server::goblin_with(&args), Server::redis_with(&args)] {
        let mut raw = server.raw();
        let call = "return redis.pcall('client', 'getname')";
        let id = "return redis.pcall('client', 'id')";
        let refused = b"-ERR This Redis command is not allowed from script\r\n";
        assert_eq!(raw.cmd(&[b"EVAL", call.as_bytes(), b"0"]), refused);
        assert_eq!(raw.cmd(&[b"EVAL", id.as_bytes(), b"0"]), refused);
        assert_eq!(raw.cmd_str("DEBUG SET-DISABLE-DENY-SCRIPTS 1"), b"+OK\r\n");
        assert_eq!(raw.cmd(&[b"EVAL", call.as_bytes(), b"0"]), b"$-1\r\n");
        let mine = raw.cmd_str("CLIENT ID");
        let its = raw.cmd(&[b"EVAL", id.as_bytes(), b"0"]);
        assert!(its.starts_with(b":") && its != mine, "{its:?}");
        assert_eq!(raw.cmd_str("DEBUG SET-DISABLE-DENY-SCRIPTS 0"), b"+OK\r\n");
        assert_eq!(raw.cmd(&[b"EVAL", call.as_bytes(), b"0"]), refused);
    }
}

/// What scripts may call of DEBUG (PROTOCOL's sample replies, in each protocol pair of
/// script and client, but a push, which redis-server's script turns to nil; SLEEP, with
/// the script's clock standing still meanwhile), SORT BY a constant of a set called by a
/// script (ordered, as redis-server orders it for a script; on the script's shard and
/// under its plan), and DEBUG OBJECT of a key whose time has passed (found, not
/// expired), as redis-server answers them (Redis's own tests of a script's RESP parsing
/// call DEBUG PROTOCOL).
#[test]
fn debug_and_sort_called_by_scripts_match_redis() {
    for threads in [1, 4] {
        let args = ["--enable-debug-command", "yes"];
        let t = threads.to_string();
        let mut d = Differential::with_servers(
            Server::goblin_with(&["--threads", &t, args[0], args[1]]),
            Server::redis_with(&args),
        );
        let ctx = format!("--threads {threads}");
        same(&mut d, &["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"], &ctx);
        for client in ["2", "3"] {
            same(&mut d, &["HELLO", client], &ctx);
            for lua in ["2", "3"] {
                for kind in [
                    "string", "integer", "double", "bignum", "null", "array", "set", "map",
                    "attrib", "verbatim", "true", "false", "nosuch",
                ] {
                    let body = format!(
                        "redis.setresp({lua}); return redis.pcall('debug', 'protocol', '{kind}')"
                    );
                    eval0(&mut d, &body, &format!("{ctx}, client {client}, lua {lua}"));
                }
            }
        }
        same(&mut d, &["HELLO", "2"], &ctx);
        // Time stands still for a script: a key set to expire in 1 ms outlives the sleep.
        let frozen = "redis.call('set', KEYS[1], 'v', 'px', 1); \
                      redis.call('debug', 'sleep', 0.01); \
                      return redis.call('exists', KEYS[1])";
        same(&mut d, &["EVAL", frozen, "1", "{t}frozen"], &ctx);
        same(&mut d, &["EXISTS", "{t}frozen"], &ctx);
        let members = [
            "a", "b", "c", "d", "e", "f", "g", "h", "i", "l", "m", "n", "o", "p", "q", "r", "aa",
            "aaa", "azz", "z",
        ];
        // (A key without a hash tag: with several threads, the script runs under its
        // plan, its calls sent to the key's shard.)
        for set in ["{t}myset", "plainset"] {
            let mut sadd = vec!["SADD", set];
            sadd.extend(members);
            same(&mut d, &sadd, &ctx);
            for call in [
                "return redis.call('sort', KEYS[1], 'by', '_')",
                "return redis.call('sort', KEYS[1], 'by', '_', 'desc', 'limit', 2, 5)",
                "return redis.call('sort_ro', KEYS[1], 'by', 'nosort')",
            ] {
                same(&mut d, &["EVAL", call, "1", set], &ctx);
            }
        }
        // DEBUG OBJECT finds a key whose time has passed while nothing expired it.
        same(&mut d, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"], &ctx);
        same(&mut d, &["SET", "{t}gone", "v", "PX", "1"], &ctx);
        std::thread::sleep(std::time::Duration::from_millis(10));
        let g = d.g.cmd(&[b"DEBUG", b"OBJECT", b"{t}gone"]);
        let r = d.r.cmd(&[b"DEBUG", b"OBJECT", b"{t}gone"]);
        for (who, reply) in [("goblin", &g), ("redis", &r)] {
            assert!(
                reply.starts_with(b"+Value at:"),
                "{ctx}: {who}: {}",
                String::from_utf8_lossy(reply)
            );
        }
        same(
            &mut d,
            &[
                "EVAL",
                "return redis.call('exists', KEYS[1])",
                "1",
                "{t}gone",
            ],
            &ctx,
        );
        same(&mut d, &["EXISTS", "{t}gone"], &ctx);
        same(&mut d, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"], &ctx);
    }
}

/// Scripts and functions that call commands reading every shard — KEYS, SCAN, DBSIZE,
/// RANDOMKEY, INFO — as redis-server runs them: the classic "delete by pattern" script,
/// a SCAN loop, with declared keys or none, by EVAL, EVALSHA and FCALL, inside MULTI,
/// at every thread count (such a script runs under its plan with every shard locked).
#[test]
fn scripts_calling_keyspace_wide_commands_match_redis() {
    // (KEYS and SCAN list keys in an order of their own: the scripts sort them.)
    let sorted_keys = "local ks = redis.call('keys', ARGV[1]) table.sort(ks) return ks";
    let scan_all = "local c, all = '0', {} \
                    repeat local r = redis.call('SCAN', c, 'MATCH', ARGV[1], 'COUNT', 3) \
                    c = r[1] for _, k in ipairs(r[2]) do all[#all + 1] = k end \
                    until c == '0' table.sort(all) return all";
    let delete_matching = "local n = 0 for _, k in ipairs(redis.call('keys', ARGV[1])) do \
                           n = n + redis.call('del', k) end return n";
    let counted = "return {redis.call('get', KEYS[1]), redis.call('dbsize')}";
    let info = "local i = redis.call('info', 'keyspace') \
                return {string.find(redis.pcall('info', 'server'), 'redis_version') ~= nil, \
                string.match(i, 'keys=%d+')}";
    let library = "#!lua name=wide\n\
                   redis.register_function{function_name='count', \
                   callback=function(keys) return {redis.call('dbsize'), \
                   redis.call('exists', keys[1])} end, flags={'no-writes'}}\n\
                   redis.register_function('purge', function(_, args) local n = 0 \
                   for _, k in ipairs(redis.call('KEYS', args[1])) do \
                   n = n + redis.call('unlink', k) end return n end)";
    for_each_thread_count(|d, ctx| {
        same(d, &["FUNCTION", "FLUSH"], ctx);
        same(d, &["FUNCTION", "LOAD", library], ctx);
        for layout in LAYOUTS {
            let ctx = format!("{ctx}, {layout:?}");
            let keys = layout.keys(6);
            same(d, &["FLUSHALL"], &ctx);
            for (i, k) in keys.iter().enumerate() {
                same(d, &["SET", k, &i.to_string()], &ctx);
            }
            same(d, &["SET", "other", "x"], &ctx);
            // (Every key of the layout ends with a digit; `other` does not.)
            let pattern = "*[0-9]";
            same(d, &["EVAL", sorted_keys, "0", pattern], &ctx);
            same(d, &["EVAL", scan_all, "0", pattern], &ctx);
            same(d, &["EVAL", scan_all, "1", &keys[2], "*"], &ctx);
            same(d, &["EVAL", counted, "1", &keys[1]], &ctx);
            same(d, &["EVAL", counted, "1", "other"], &ctx);
            same(d, &["EVAL_RO", counted, "1", &keys[3]], &ctx);
            same(d, &["EVAL", info, "0"], &ctx);
            // A name built at run time, by a script that declares no key: given up for
            // its plan at that call (with several threads; with one it is refused).
            if !ctx.starts_with("--threads 1,") {
                let dynamic = ["EVAL", "return redis.call(ARGV[1])", "0", "dbsize"];
                same(d, &dynamic, &ctx);
            }
            let sha = same(d, &["SCRIPT", "LOAD", counted], &ctx);
            let sha = String::from_utf8_lossy(&sha[5..45]).into_owned();
            same(d, &["EVALSHA", &sha, "1", &keys[4]], &ctx);
            same(d, &["FCALL", "count", "1", &keys[0]], &ctx);
            same(d, &["FCALL_RO", "count", "1", "nosuch"], &ctx);
            same(d, &["MULTI"], &ctx);
            same(d, &["EVAL", counted, "1", &keys[5]], &ctx);
            same(d, &["SET", &keys[5], "changed"], &ctx);
            same(d, &["EVAL", counted, "1", &keys[5]], &ctx);
            same(d, &["EXEC"], &ctx);
            same(d, &["EVAL", delete_matching, "0", pattern], &ctx);
            same(d, &["DBSIZE"], &ctx);
            same(d, &["EVAL", "return redis.call('randomkey')", "0"], &ctx);
            same(d, &["FCALL", "purge", "0", "oth*"], &ctx);
            same(d, &["EVAL", "return redis.call('randomkey')", "0"], &ctx);
            same(d, &["EVAL", counted, "1", "other"], &ctx);
        }
    });
}

/// Scripts and functions that call FLUSHDB, FLUSHALL and SWAPDB (commands of every
/// shard that write), and the keyless commands that run on a connection (PUBSUB,
/// COMMAND INFO, SLOWLOG, the HELPs, the cluster commands' refusals…), as redis-server
/// runs them: with declared keys or none, the command named in the code or built at run
/// time, by EVAL and FCALL, inside MULTI, at every thread count.
#[test]
fn scripts_calling_flushes_and_connection_commands_match_redis() {
    let flush_between = "redis.call('set', KEYS[1], 'before') \
                         local r = redis.call(ARGV[1]) \
                         redis.call('set', KEYS[2], 'after') \
                         return {r, redis.call('dbsize'), redis.call('get', KEYS[1])}";
    let swap = "redis.call('set', KEYS[1], 'zero') \
                local r = redis.call('swapdb', 0, 1) \
                return {r, redis.call('get', KEYS[1]), redis.call('dbsize')}";
    let other_db = "redis.call('select', 1) redis.call('set', KEYS[1], 'one') \
                    redis.call('select', 0) local r = redis.call('flushdb') \
                    redis.call('select', 1) return {r, redis.call('get', KEYS[1])}";
    let library = "#!lua name=flushing\n\
                   redis.register_function('wipe', function(keys) \
                   redis.call('set', keys[1], 'x') return {redis.call('flushall'), \
                   redis.call('exists', keys[1])} end)";
    let connection_commands = [
        "return redis.pcall('pubsub', 'numsub', 'a', 'b')",
        "return redis.pcall('pubsub', 'numpat')",
        "return redis.pcall('pubsub', 'channels')",
        "return redis.pcall('pubsub', 'shardnumsub', 'a')",
        "return redis.pcall('command', 'info', 'get', 'zadd')",
        "return redis.pcall('command', 'getkeys', 'set', 'a', 'b')",
        "return redis.pcall('slowlog', 'reset')",
        "return redis.pcall('object', 'help')",
        "return redis.pcall('xinfo', 'help')",
        "return redis.pcall('pubsub', 'help')",
        "return redis.pcall('readonly')",
        "return redis.pcall('cluster', 'info')",
        "return redis.pcall('pfselftest')",
        "return type(redis.call('lastsave'))",
    ];
    for_each_thread_count(|d, ctx| {
        same(d, &["FUNCTION", "FLUSH"], ctx);
        same(d, &["FUNCTION", "LOAD", library], ctx);
        for body in connection_commands {
            eval0(d, body, ctx);
        }
        for layout in LAYOUTS {
            let ctx = format!("{ctx}, {layout:?}");
            let keys = layout.keys(6);
            let fill = |d: &mut Differential| {
                same(d, &["FLUSHALL"], &ctx);
                for (i, k) in keys.iter().enumerate() {
                    same(d, &["SET", k, &i.to_string()], &ctx);
                }
                same(d, &["SELECT", "1"], &ctx);
                same(d, &["SET", &keys[5], "in one"], &ctx);
                same(d, &["SELECT", "0"], &ctx);
            };
            for flush in ["flushdb", "flushall", "FLUSHDB"] {
                fill(d);
                same(
                    d,
                    &["EVAL", flush_between, "2", &keys[0], &keys[1], flush],
                    &ctx,
                );
                same(d, &["DBSIZE"], &ctx);
                same(d, &["GET", &keys[1]], &ctx);
                same(d, &["SELECT", "1"], &ctx);
                same(d, &["DBSIZE"], &ctx);
                same(d, &["SELECT", "0"], &ctx);
            }
            // Named in the code.
            fill(d);
            same(d, &["EVAL", "return redis.call('flushdb')", "0"], &ctx);
            same(d, &["DBSIZE"], &ctx);
            fill(d);
            same(d, &["EVAL", swap, "1", &keys[2]], &ctx);
            same(d, &["DBSIZE"], &ctx);
            same(d, &["GET", &keys[5]], &ctx);
            same(d, &["SELECT", "1"], &ctx);
            same(d, &["GET", &keys[2]], &ctx);
            same(d, &["DBSIZE"], &ctx);
            same(d, &["SELECT", "0"], &ctx);
            fill(d);
            same(d, &["EVAL", other_db, "1", &keys[3]], &ctx);
            same(d, &["DBSIZE"], &ctx);
            fill(d);
            same(d, &["FCALL", "wipe", "1", &keys[4]], &ctx);
            same(d, &["DBSIZE"], &ctx);
            fill(d);
            same(d, &["MULTI"], &ctx);
            same(
                d,
                &["EVAL", flush_between, "2", &keys[2], &keys[3], "flushdb"],
                &ctx,
            );
            same(d, &["SET", &keys[4], "queued"], &ctx);
            same(d, &["EXEC"], &ctx);
            same(d, &["DBSIZE"], &ctx);
            // A name built at run time, by a script that declares no key: given up for
            // its plan at that call (with several threads; with one it is refused).
            if !ctx.starts_with("--threads 1,") {
                fill(d);
                same(
                    d,
                    &["EVAL", "return redis.call(ARGV[1])", "0", "flushall"],
                    &ctx,
                );
                same(d, &["DBSIZE"], &ctx);
            }
        }
    });
}

/// `redis.set_repl` decides what the append-only log keeps of a script's writes, as in
/// redis-server: after DEBUG LOADAOF only what went to the log (REPL_AOF, REPL_ALL) is
/// there; on one shard and across shards. (What goes to replicas:
/// `replication::the_replication_stream_is_redis_servers`.)
#[test]
fn set_repl_decides_what_the_log_keeps_as_in_redis() {
    let selective = "redis.call('set', KEYS[1], 'a') redis.set_repl(redis.REPL_NONE) \
                     redis.call('set', KEYS[2], 'b') redis.set_repl(redis.REPL_AOF) \
                     redis.call('set', KEYS[3], 'c') redis.set_repl(redis.REPL_ALL) \
                     redis.call('set', KEYS[4], 'd') redis.set_repl(redis.REPL_REPLICA) \
                     redis.call('set', KEYS[5], 'e')";
    for threads in [1, 4] {
        let args = ["--appendonly", "yes", "--enable-debug-command", "yes"];
        let t = threads.to_string();
        let mut goblin = vec!["--threads", t.as_str()];
        goblin.extend(args);
        let mut d =
            Differential::with_servers(Server::goblin_with(&goblin), Server::redis_with(&args));
        let ctx = format!("--threads {threads}");
        for keys in [
            ["{s}1", "{s}2", "{s}3", "{s}4", "{s}5"],
            ["s1", "s2", "s3", "s4", "s5"],
        ] {
            let mut eval = vec!["EVAL", selective, "5"];
            eval.extend(keys);
            same(&mut d, &eval, &ctx);
            let mut mget = vec!["MGET"];
            mget.extend(keys);
            same(&mut d, &mget, &ctx);
            same(&mut d, &["DEBUG", "LOADAOF"], &ctx);
            same(&mut d, &mget, &ctx);
        }
        same(&mut d, &["EVAL", "redis.set_repl(4)", "0"], &ctx);
        same(&mut d, &["EVAL", "redis.set_repl()", "0"], &ctx);
    }
}

/// A script may pass thousands of values at once — `redis.call('rpush', k,
/// unpack(ARGV))` with 7,999 of them, Lua's most — and a client may run thousands of
/// distinct scripts, or load a library of thousands of functions: all as from
/// redis-server. (Each once aborted goblin-server: a handle per value, and mlua's
/// handles run out at 8,000.)
#[test]
fn thousands_of_arguments_scripts_and_functions_match_redis() {
    let members: Vec<String> = (0..7999).map(|i| format!("m{i}")).collect();
    let bodies = [
        "redis.call('del', KEYS[1]) return redis.call('rpush', KEYS[1], unpack(ARGV))",
        "return redis.pcall('rpush', KEYS[2], unpack(ARGV))",
        "local t = {unpack(ARGV)} t[5000] = {} return redis.pcall('rpush', KEYS[1], unpack(t))",
        "local t = {unpack(ARGV)} t[7000] = true return redis.call('rpush', KEYS[1], unpack(t))",
        "local function all() return unpack(ARGV) end return select('#', all())",
        // (A script run across shards runs a `pcall`'s function as a coroutine: its
        // arguments and results cross in a table, not as 7,999 values.)
        "return select('#', pcall(unpack, ARGV))",
        "return {pcall(unpack, ARGV)}",
        "return {pcall(function(...) return select('#', ...) end, unpack(ARGV))}",
        "return {xpcall(function() return #{unpack(ARGV)} end, print)}",
    ];
    for_each_thread_count(|d, ctx| {
        for layout in [Layout::SameSlot, Layout::CrossShard] {
            let ctx = format!("{ctx}, {layout:?}");
            same(d, &["FLUSHALL"], &ctx);
            let keys = layout.keys(3);
            for body in bodies {
                let mut args = vec!["EVAL", body, "3"];
                args.extend(keys.iter().map(String::as_str));
                args.extend(members.iter().map(String::as_str));
                same(d, &args, &ctx);
            }
            same(d, &["LRANGE", &keys[0], "0", "-1"], &ctx);
            same(d, &["LLEN", &keys[1]], &ctx);
        }
        for i in 0..9000 {
            eval0(d, &format!("return {i}"), ctx);
        }
        let mut library = String::from("#!lua name=many\n");
        for i in 0..9000 {
            library.push_str(&format!(
                "redis.register_function('f{i}', function() return {i} end)\n"
            ));
        }
        same(d, &["FUNCTION", "LOAD", &library], ctx);
        same(d, &["FCALL", "f8999", "0"], ctx);
        same(d, &["FCALL", "f17", "0"], ctx);
        eval0(d, "return 'still here'", ctx);
    });
}
