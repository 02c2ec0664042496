//! Functions (FUNCTION, FCALL, FCALL_RO) — differentially against redis-server 7.0:
//! every FUNCTION subcommand and its errors, the loading environment's errors, FCALL
//! with keys on one shard and across shards, RESP2 and RESP3, FUNCTION DUMP/RESTORE
//! both ways, and the libraries through snapshots (both ways) and the log.

use goblin_tests::diff::{How, compare, for_each_thread_count};
use goblin_tests::keys::keys_on;
use goblin_tests::{Differential, Raw, Server};

/// A library: `#!lua name=<name>` and its code.
fn lib(name: &str, code: &str) -> String {
    format!("#!lua name={name}\n{code}")
}

/// Sends `args` to both; the replies must be the same bytes.
fn check(d: &mut Differential, ctx: &str, args: &[&[u8]]) -> Vec<u8> {
    let owned: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    compare(d, &owned, How::Exact, ctx)
}

/// `check` for words.
fn check_words(d: &mut Differential, ctx: &str, words: &[&str]) -> Vec<u8> {
    let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
    check(d, ctx, &args)
}

/// FUNCTION LOAD [REPLACE] code on both.
fn load(d: &mut Differential, ctx: &str, replace: bool, code: &str) -> Vec<u8> {
    if replace {
        check(d, ctx, &[b"FUNCTION", b"LOAD", b"REPLACE", code.as_bytes()])
    } else {
        check(d, ctx, &[b"FUNCTION", b"LOAD", code.as_bytes()])
    }
}

/// Switches both connections to RESP3 (HELLO's reply names each server: not compared).
fn resp3(d: &mut Differential) {
    d.g.cmd(&[b"HELLO", b"3"]);
    d.r.cmd(&[b"HELLO", b"3"]);
}

/// The loading environment and FUNCTION LOAD's errors, in redis-server's words.
const BAD_LIBRARIES: &[&str] = &[
    "return 1",
    "#!lua name=a",
    "#!lua\nreturn 1",
    "#!lua name=a foo=bar\nreturn 1",
    "#!lua name=a name=b\nreturn 1",
    "#!lux name=a\nreturn 1",
    "#!lua name=a-b\nreturn 1",
    "#!lua name=\nreturn 1",
    "#!lua name=a \"unbalanced\nreturn 1",
    "#!lua name=a\nlocal x = 1",
    "#!lua name=a\nx = 1",
    "#!lua name=a\nlocal s = string",
    "#!lua name=a\nerror('boom')",
    "#!lua name=a\nsyntax error here",
    "#!lua name=a\nredis.register_function('f', 1)",
    "#!lua name=a\nredis.register_function()",
    "#!lua name=a\nredis.register_function('f', function() end, 3)",
    "#!lua name=a\nredis.register_function(nil, function() end)",
    "#!lua name=a\nredis.register_function({})",
    "#!lua name=a\nredis.register_function(5)",
    "#!lua name=a\nredis.register_function{callback=function() end}",
    "#!lua name=a\nredis.register_function{function_name='f'}",
    "#!lua name=a\nredis.register_function{function_name='f', foo=1}",
    "#!lua name=a\nredis.register_function{function_name='f', callback=2}",
    "#!lua name=a\nredis.register_function{function_name={}, callback=function() end}",
    "#!lua name=a\nredis.register_function{function_name='f', callback=function() end, description={}}",
    "#!lua name=a\nredis.register_function{function_name='f', callback=function() end, flags='no-writes'}",
    "#!lua name=a\nredis.register_function{function_name='f', callback=function() end, flags={'no-writes', 'bad'}}",
    "#!lua name=a\nredis.register_function{function_name='f', callback=function() end, flags={1}}",
    "#!lua name=a\nredis.register_function('f-1', function() end)",
    "#!lua name=a\nredis.register_function('', function() end)",
    "#!lua name=a\nredis.register_function('f', function() end)\nredis.register_function('f', function() end)",
    "#!lua name=a\nredis.register_function('f', function() end) return redis.call('ping')",
    "#!lua name=a\nredis.register_function('f', function() end) return redis.setresp(3)",
    "#!lua name=a\nredis.register_function('f', function() end) redis.foo = 1",
    "#!lua name=a\nredis.register_function('f', function() end) math.x = 1",
    "#!lua name=a\nredis.register_function('f', function() end) return redis.log(1)",
    "#!lua name=a\nredis.register_function('f', function() end) local t = nil + 1",
    "#!lua name=a\nredis.register_function('f', function() end) while true do end",
];

#[test]
fn function_load_and_its_errors_match_redis() {
    let mut d = Differential::new();
    let ctx = "FUNCTION LOAD";
    for code in BAD_LIBRARIES {
        load(&mut d, &format!("{ctx} {code:?}"), false, code);
    }
    // What loads: the forms of register_function, the API a library has while loading.
    for code in [
        lib("a", "redis.register_function('f', function(keys, args) return 1 end)"),
        lib(
            "b",
            "redis.log(redis.LOG_WARNING, 'loading b')\nlocal v = redis.REDIS_VERSION .. redis.REDIS_VERSION_NUM .. redis.LOG_NOTICE\nredis.register_function{function_name='g', callback=function() return v end, flags={'no-writes', 'ALLOW-STALE'}, description='the g'}",
        ),
        lib("c3", "redis.register_function(1, function() return 3 end)"),
        "#!LUA name=d\nredis.register_function{function_name='h', callback=function() return 4 end, description=5}".to_string(),
    ] {
        load(&mut d, ctx, false, &code);
    }
    // Names taken: the library, a function of another library (without case).
    load(
        &mut d,
        ctx,
        false,
        &lib("a", "redis.register_function('x', function() end)"),
    );
    load(
        &mut d,
        ctx,
        true,
        &lib("e", "redis.register_function('f', function() end)"),
    );
    load(
        &mut d,
        ctx,
        true,
        &lib("e", "redis.register_function('F', function() end)"),
    );
    load(
        &mut d,
        ctx,
        true,
        &lib(
            "a",
            "redis.register_function('ff', function() return 'new' end)",
        ),
    );
    check_words(&mut d, ctx, &["FCALL", "f", "0"]);
    check_words(&mut d, ctx, &["FCALL", "ff", "0"]);
    // A failed REPLACE keeps the old library.
    load(
        &mut d,
        ctx,
        true,
        &lib("a", "redis.register_function('g', function() end)"),
    );
    check_words(&mut d, ctx, &["FCALL", "ff", "0"]);
    // Options.
    check_words(&mut d, ctx, &["FUNCTION", "LOAD", "REPLACE"]);
    check_words(
        &mut d,
        ctx,
        &["FUNCTION", "LOAD", "BOGUS", "#!lua name=z\n"],
    );
    check_words(&mut d, ctx, &["FUNCTION", "LOAD"]);
    check_words(&mut d, ctx, &["FUNCTION", "STATS"]);
    let list: Vec<Vec<u8>> = ["FUNCTION", "LIST", "WITHCODE"]
        .iter()
        .map(|w| w.as_bytes().to_vec())
        .collect();
    compare(&mut d, &list, How::Sorted, ctx);
}

#[test]
fn function_list_delete_flush_stats_and_help_match_redis() {
    let mut d = Differential::new();
    let ctx = "FUNCTION";
    check_words(&mut d, ctx, &["FUNCTION", "LIST"]);
    load(
        &mut d,
        ctx,
        false,
        &lib(
            "mylib",
            "redis.register_function{function_name='myfunc', callback=function() return 1 end, flags={'no-writes', 'allow-oom', 'allow-stale', 'no-cluster', 'allow-cross-slot-keys'}, description='described'}",
        ),
    );
    load(
        &mut d,
        ctx,
        false,
        &lib(
            "other",
            "redis.register_function('plain', function() return 2 end)",
        ),
    );
    for version in [2, 3] {
        if version == 3 {
            resp3(&mut d);
        }
        for words in [
            &["FUNCTION", "LIST", "LIBRARYNAME", "mylib"][..],
            &["FUNCTION", "LIST", "LIBRARYNAME", "OTHER", "WITHCODE"],
            &["FUNCTION", "LIST", "withcode", "libraryname", "my*"],
            &["FUNCTION", "LIST", "LIBRARYNAME", "nothing"],
            &["FUNCTION", "LIST", "LIBRARYNAME"],
            &["FUNCTION", "LIST", "WITHCODE", "WITHCODE"],
            &["FUNCTION", "LIST", "LIBRARYNAME", "a", "LIBRARYNAME", "b"],
            &["FUNCTION", "LIST", "bogus"],
            &["FUNCTION", "STATS"],
            &["FUNCTION", "STATS", "x"],
            &["FUNCTION", "KILL"],
            &["FUNCTION", "HELP"],
            &["FUNCTION", "DUMP", "x"],
            &["FUNCTION"],
            &["FUNCTION", "BOGUS"],
        ] {
            check_words(&mut d, &format!("{ctx} RESP{version}"), words);
        }
        let list: Vec<Vec<u8>> = ["FUNCTION", "LIST"]
            .iter()
            .map(|w| w.as_bytes().to_vec())
            .collect();
        compare(&mut d, &list, How::Sorted, ctx);
    }
    for words in [
        &["FUNCTION", "DELETE", "nothing"][..],
        &["FUNCTION", "DELETE"],
        &["FUNCTION", "DELETE", "a", "b"],
        &["FUNCTION", "DELETE", "MYLIB"],
        &["FUNCTION", "DELETE", "mylib"],
        &["FCALL", "myfunc", "0"],
        &["FUNCTION", "LIST"],
        &["FUNCTION", "STATS"],
        &["FUNCTION", "FLUSH", "bogus"],
        &["FUNCTION", "FLUSH", "SYNC", "x"],
        &["FUNCTION", "FLUSH", "ASYNC"],
        &["FUNCTION", "LIST"],
        &["FUNCTION", "FLUSH"],
        &["FUNCTION", "FLUSH", "sync"],
        &["FUNCTION", "STATS"],
        &["FCALL", "plain", "0"],
    ] {
        check_words(&mut d, ctx, words);
    }
}

/// The library FCALL's tests call: commands on keys, errors raised in every way.
const FCALL_LIBRARY: &str = r#"#!lua name=fc
redis.register_function('echo', function(keys, args) return {keys, args} end)
redis.register_function('set2', function(keys, args)
  redis.call('set', keys[1], args[1])
  redis.call('set', keys[2], args[2])
  return redis.call('mget', keys[1])
end)
redis.register_function('get2', function(keys, args)
  return {redis.call('get', keys[1]), redis.call('get', keys[2])}
end)
redis.register_function{function_name='ro', callback=function(keys, args)
  return redis.call('get', keys[1])
end, flags={'no-writes'}}
redis.register_function{function_name='ro_writes', callback=function(keys, args)
  return redis.call('set', keys[1], 'x')
end, flags={'no-writes'}}
redis.register_function('fails', function(keys, args)
  return redis.call('incr', keys[1])
end)
redis.register_function('fails2', function(keys, args)
  redis.call('get', keys[2])
  return redis.call('incr', keys[1])
end)
redis.register_function('decodes', function(keys, args)
  return cjson.decode('{')
end)
redis.register_function('pfails', function(keys, args)
  local r = redis.pcall('incr', keys[1])
  return {type(r), r['err']}
end)
redis.register_function('raises', function(keys, args)
  error('my error')
end)
redis.register_function('raises_table', function(keys, args)
  return redis.error_reply('MY failure')
end)
redis.register_function('status', function(keys, args)
  return redis.status_reply('FINE')
end)
redis.register_function('globals', function(keys, args)
  return KEYS
end)
redis.register_function('setglobal', function(keys, args)
  x = 1
end)
redis.register_function('register', function(keys, args)
  redis.register_function('x', function() end)
end)
redis.register_function('resp3', function(keys, args)
  redis.setresp(3)
  return redis.call('hgetall', keys[1])
end)
redis.register_function('types', function(keys, args)
  return {1, 2.5, 'x', true, false, {ok='fine'}, {1, {2, 3}}}
end)
redis.register_function('undeclared', function(keys, args)
  return redis.call('get', 'undeclared-key')
end)
redis.register_function('calls', function(keys, args)
  return {redis.call('ping'), redis.call('echo', 'e'), redis.sha1hex('abc')}
end)
"#;

#[test]
fn fcall_matches_redis_on_one_shard_and_across_shards() {
    for_each_thread_count(|d, ctx| {
        load(d, ctx, false, FCALL_LIBRARY);
        // Keys on one shard, and keys on two shards (with 4 threads).
        let one = keys_on("fc.", 1, 4, 2);
        let two = [
            keys_on("a.", 0, 4, 1)[0].clone(),
            keys_on("b.", 3, 4, 1)[0].clone(),
        ];
        for (layout, keys) in [("one shard", &one[..]), ("two shards", &two[..])] {
            let ctx = format!("{ctx}, {layout}");
            let (k1, k2) = (keys[0].as_str(), keys[1].as_str());
            for words in [
                &["FCALL", "echo", "2", k1, k2, "a1", "a2"][..],
                &["FCALL", "ECHO", "0"],
                &["FCALL", "set2", "2", k1, k2, "v1", "v2"],
                &["FCALL", "get2", "2", k1, k2],
                &["FCALL_RO", "get2", "2", k1, k2],
                &["FCALL_RO", "ro", "1", k1],
                &["FCALL", "ro", "1", k1],
                &["FCALL", "ro_writes", "1", k1],
                &["FCALL", "fails", "1", k1],
                // In tail position, across shards too: the error names the line.
                &["FCALL", "fails2", "2", k1, k2],
                &["FCALL", "decodes", "0"],
                &["FCALL", "pfails", "1", k1],
                &["FCALL", "raises", "0"],
                &["FCALL", "raises_table", "0"],
                &["FCALL", "status", "0"],
                &["FCALL", "globals", "0"],
                &["FCALL", "setglobal", "0"],
                &["FCALL", "register", "0"],
                &["HSET", k1, "f", "v"],
                &["FCALL", "resp3", "1", k1],
                &["FCALL", "types", "0"],
                &["FCALL", "calls", "0"],
                &["DEL", k1, k2],
            ] {
                check_words(d, &ctx, words);
            }
            resp3(d);
            for words in [
                &["FCALL", "resp3", "1", k1][..],
                &["FCALL", "types", "0"],
                &["FCALL", "raises", "0"],
                &["FCALL", "set2", "2", k1, k2, "v1", "v2"],
                &["FCALL", "get2", "2", k1, k2],
            ] {
                check_words(d, &format!("{ctx}, RESP3"), words);
            }
            d.g.cmd(&[b"HELLO", b"2"]);
            d.r.cmd(&[b"HELLO", b"2"]);
        }
        // FCALL's own errors.
        for words in [
            &["FCALL", "nothing", "0"][..],
            &["FCALL", "nothing", "x"],
            &["FCALL", "echo", "x"],
            &["FCALL", "echo", "-1"],
            &["FCALL", "echo", "3", "a"],
            &["FCALL", "echo"],
            &["FCALL_RO", "set2", "0"],
            &["FCALL_RO", "nothing", "0"],
        ] {
            check_words(d, ctx, words);
        }
        // A replaced library runs its new code on every thread.
        let replaced = FCALL_LIBRARY.replace("return {keys, args}", "return {args, keys, 'new'}");
        load(d, ctx, true, &replaced);
        for keys in [&one[..], &two[..]] {
            for _ in 0..4 {
                check_words(d, ctx, &["FCALL", "echo", "2", &keys[0], &keys[1], "x"]);
            }
        }
        check_words(d, ctx, &["FUNCTION", "DELETE", "fc"]);
        check_words(d, ctx, &["FCALL", "echo", "2", &two[0], &two[1], "x"]);
    });
}

#[test]
fn fcall_in_multi_and_from_scripts_matches_redis() {
    let mut d = Differential::threads(4);
    let ctx = "MULTI";
    load(&mut d, ctx, false, FCALL_LIBRARY);
    let keys = [
        keys_on("a.", 0, 4, 1)[0].clone(),
        keys_on("b.", 3, 4, 1)[0].clone(),
    ];
    let (k1, k2) = (keys[0].as_str(), keys[1].as_str());
    for words in [
        &["MULTI"][..],
        &["FCALL", "set2", "2", k1, k2, "m1", "m2"],
        &["FCALL", "get2", "2", k1, k2],
        &["EXEC"],
        &["EVAL", "return redis.call('fcall', 'echo', 0)", "0"],
        &["EVAL", "return redis.call('function', 'list')", "0"],
    ] {
        check_words(&mut d, ctx, words);
    }
}

/// FUNCTION DUMP's payload from `raw`.
fn dump(raw: &mut Raw) -> Vec<u8> {
    let reply = raw.cmd(&[b"FUNCTION", b"DUMP"]);
    // `$<len>\r\n<payload>\r\n`
    let start = reply.iter().position(|&b| b == b'\n').unwrap() + 1;
    reply[start..reply.len() - 2].to_vec()
}

#[test]
fn function_dump_and_restore_go_both_ways_with_redis() {
    let mut d = Differential::new();
    let ctx = "DUMP/RESTORE";
    let short = "#!lua name=s\nredis.register_function('s', function() return 's' end)";
    // A library short enough that redis-server does not compress it: the same bytes.
    load(
        &mut d,
        ctx,
        false,
        "#!lua name=t\nredis.register_function('t',function()end)",
    );
    check_words(&mut d, ctx, &["FUNCTION", "DUMP"]);
    check_words(&mut d, ctx, &["FUNCTION", "FLUSH"]);
    load(&mut d, ctx, false, short);
    load(&mut d, ctx, false, FCALL_LIBRARY);
    let from_redis = dump(&mut d.r);
    let from_goblin = dump(&mut d.g);
    for (policy, payload_of) in [("FLUSH", 0), ("APPEND", 1), ("REPLACE", 0)] {
        for (who, payload) in [("redis", &from_redis), ("goblin", &from_goblin)] {
            let ctx = format!("{ctx}: {who}'s payload, {policy}");
            if payload_of == 1 {
                check_words(&mut d, &ctx, &["FUNCTION", "FLUSH"]);
                load(&mut d, &ctx, false, short);
            }
            check(
                &mut d,
                &ctx,
                &[b"FUNCTION", b"RESTORE", payload, policy.as_bytes()],
            );
            // (Redis lists a library's functions in its hash table's order: libraries of
            // one function compare.)
            check_words(
                &mut d,
                &ctx,
                &["FUNCTION", "LIST", "LIBRARYNAME", "s", "WITHCODE"],
            );
            check_words(&mut d, &ctx, &["FUNCTION", "STATS"]);
            check_words(&mut d, &ctx, &["FCALL", "echo", "1", "k", "a"]);
            check_words(&mut d, &ctx, &["FCALL", "s", "0"]);
        }
    }
    // Errors: collisions (with payloads of one library: which library collides first is
    // the hash table's order in redis-server), the policy, bad payloads.
    check_words(&mut d, ctx, &["FUNCTION", "FLUSH"]);
    load(&mut d, ctx, false, short);
    let (from_redis, from_goblin) = (dump(&mut d.r), dump(&mut d.g));
    let mut corrupt = from_redis.clone();
    let n = corrupt.len();
    corrupt[n - 1] ^= 1;
    let mut not_function = from_redis.clone();
    not_function[0] = 0;
    for args in [
        &[&b"FUNCTION"[..], b"RESTORE", &from_redis][..],
        &[b"FUNCTION", b"RESTORE", &from_goblin, b"APPEND"],
        &[b"FUNCTION", b"RESTORE", &from_goblin, b"BOGUS"],
        &[b"FUNCTION", b"RESTORE", &from_goblin, b"FLUSH", b"x"],
        &[b"FUNCTION", b"RESTORE", b"short"],
        &[b"FUNCTION", b"RESTORE", &corrupt],
        &[b"FUNCTION", b"RESTORE", &not_function, b"FLUSH"],
        &[b"FUNCTION", b"RESTORE"],
    ] {
        check(&mut d, ctx, args);
    }
    // A function name another library has.
    check_words(&mut d, ctx, &["FUNCTION", "FLUSH"]);
    load(
        &mut d,
        ctx,
        false,
        "#!lua name=other\nredis.register_function('S', function() end)",
    );
    check(&mut d, ctx, &[b"FUNCTION", b"RESTORE", &from_redis]);
    check(
        &mut d,
        ctx,
        &[b"FUNCTION", b"RESTORE", &from_goblin, b"REPLACE"],
    );
    check_words(&mut d, ctx, &["FUNCTION", "FLUSH"]);
    check_words(&mut d, ctx, &["FUNCTION", "DUMP"]);
    check(&mut d, ctx, &[b"FUNCTION", b"RESTORE", &from_goblin]);
    check_words(&mut d, ctx, &["FCALL", "s", "0"]);
}

use super::persistence::Dir;

/// Each library's FUNCTION LIST WITHCODE entry, one by one (redis-server lists them in
/// its hash table's order), and FUNCTION STATS.
fn list_with_code(raw: &mut Raw) -> Vec<Vec<u8>> {
    let mut all = vec![raw.cmd(&[b"FUNCTION", b"STATS"])];
    for name in ["one", "two", "three"] {
        all.push(raw.cmd(&[
            b"FUNCTION",
            b"LIST",
            b"LIBRARYNAME",
            name.as_bytes(),
            b"WITHCODE",
        ]));
    }
    all
}

fn load_on(raw: &mut Raw, code: &str) {
    let reply = raw.cmd(&[b"FUNCTION", b"LOAD", code.as_bytes()]);
    assert!(
        reply.starts_with(b"$"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
}

const ONE: &str = "#!lua name=one\nredis.register_function('one', function(keys, args) return redis.call('get', keys[1]) end)";
const TWO: &str = "#!lua name=two\nredis.register_function{function_name='two', callback=function() return 2 end, flags={'no-writes'}, description='two'}";

#[test]
fn snapshots_keep_the_libraries_both_ways_with_redis() {
    // Goblin's SAVE, loaded by redis-server and by Goblin.
    let dir = Dir::new("functions-rdb-out");
    let goblin = Server::goblin_with(&["--dir", dir.arg()]);
    let mut g = goblin.raw();
    load_on(&mut g, TWO);
    load_on(&mut g, ONE);
    g.cmd(&[b"SET", b"k", b"v"]);
    let want = list_with_code(&mut g);
    assert_eq!(g.cmd(&[b"SAVE"]), b"+OK\r\n");
    let redis = Server::redis_with(&["--dir", dir.arg(), "--dbfilename", "dump.rdb"]);
    let mut r = redis.raw();
    assert_eq!(
        list_with_code(&mut r),
        want,
        "redis-server loading Goblin's file"
    );
    assert_eq!(r.cmd(&[b"FCALL", b"one", b"1", b"k"]), b"$1\r\nv\r\n");
    let again = Server::goblin_with(&["--dir", dir.arg(), "--enable-debug-command", "yes"]);
    let mut a = again.raw();
    assert_eq!(list_with_code(&mut a), want, "Goblin loading its own file");
    assert_eq!(a.cmd(&[b"FCALL", b"one", b"1", b"k"]), b"$1\r\nv\r\n");
    // DEBUG RELOAD keeps them.
    assert_eq!(a.cmd(&[b"DEBUG", b"RELOAD"]), b"+OK\r\n");
    assert_eq!(list_with_code(&mut a), want, "after DEBUG RELOAD");

    // redis-server's SAVE (its codes compressed), loaded by Goblin.
    let dir2 = Dir::new("functions-rdb-in");
    let redis2 = Server::redis_with(&["--dir", dir2.arg(), "--dbfilename", "dump.rdb"]);
    let mut r2 = redis2.raw();
    load_on(&mut r2, ONE);
    load_on(&mut r2, TWO);
    r2.cmd(&[b"SET", b"k", b"w"]);
    assert_eq!(r2.cmd(&[b"SAVE"]), b"+OK\r\n");
    let from_redis =
        Server::goblin_with(&["--loadrdb", dir2.path().join("dump.rdb").to_str().unwrap()]);
    let mut f = from_redis.raw();
    assert_eq!(f.cmd(&[b"FCALL", b"one", b"1", b"k"]), b"$1\r\nw\r\n");
    assert_eq!(f.cmd(&[b"FCALL_RO", b"two", b"0"]), b":2\r\n");
    assert_eq!(
        f.cmd(&[b"FUNCTION", b"LIST", b"LIBRARYNAME", b"two", b"WITHCODE"]),
        r2.cmd(&[b"FUNCTION", b"LIST", b"LIBRARYNAME", b"two", b"WITHCODE"])
    );
}

#[test]
fn the_log_keeps_the_libraries_across_restarts_and_rewrites() {
    for threads in ["1", "4"] {
        let dir = Dir::new("functions-aof");
        let args = [
            "--dir",
            dir.arg(),
            "--appendonly",
            "yes",
            "--threads",
            threads,
        ];
        let mut server = Server::goblin_with(&args);
        let mut g = server.raw();
        load_on(&mut g, ONE);
        load_on(&mut g, TWO);
        load_on(
            &mut g,
            "#!lua name=three\nredis.register_function('three', function() return 3 end)",
        );
        assert_eq!(g.cmd(&[b"FUNCTION", b"DELETE", b"three"]), b"+OK\r\n");
        g.cmd(&[b"SET", b"k", b"v"]);
        let want = list_with_code(&mut g);
        server.kill();
        let mut server = Server::goblin_with(&args);
        let mut g = server.raw();
        assert_eq!(
            list_with_code(&mut g),
            want,
            "after a restart ({threads} threads)"
        );
        assert_eq!(g.cmd(&[b"FCALL", b"one", b"1", b"k"]), b"$1\r\nv\r\n");
        // A rewrite writes them into its base; what follows goes on in the log.
        assert!(g.cmd(&[b"BGREWRITEAOF"]).starts_with(b"+"));
        for _ in 0..100 {
            let info = String::from_utf8_lossy(&g.cmd(&[b"INFO", b"persistence"])).into_owned();
            if info.contains("aof_rewrite_in_progress:0")
                && info.contains("aof_rewrite_scheduled:0")
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert_eq!(g.cmd(&[b"FUNCTION", b"FLUSH"]), b"+OK\r\n");
        load_on(&mut g, TWO);
        let want = list_with_code(&mut g);
        server.kill();
        let again = Server::goblin_with(&args);
        assert_eq!(
            list_with_code(&mut again.raw()),
            want,
            "after a rewrite and a restart"
        );
    }
}

/// DEBUG RELOAD and the libraries, as redis-server: by default the file's libraries
/// replace all (the others are gone); with NOFLUSH, a library of a name already loaded
/// fails the reload (nothing changes), unless MERGE, which replaces it.
#[test]
fn debug_reload_loads_the_libraries_as_its_options_say() {
    let dir = goblin_tests::scratch_dir("debug-reload-functions");
    let dir = dir.to_str().unwrap();
    let goblin = Server::goblin_with(&["--enable-debug-command", "yes"]);
    let redis = Server::redis_with(&["--enable-debug-command", "yes", "--dir", dir]);
    let transcript = |port: u16| -> Vec<String> {
        let mut raw = Raw::connect(port);
        let mut out = Vec::new();
        let one = lib(
            "one",
            "redis.register_function('f1', function() return 1 end)",
        );
        let two = lib(
            "two",
            "redis.register_function('f2', function() return 2 end)",
        );
        for line in [
            vec!["SET", "x", "1"],
            vec!["FUNCTION", "LOAD", one.as_str()],
            vec!["DEBUG", "RELOAD"],
            vec!["DEBUG", "RELOAD", "NOFLUSH"],
            vec!["DEBUG", "RELOAD", "NOFLUSH", "MERGE"],
            vec!["FUNCTION", "LOAD", two.as_str()],
            vec!["SET", "y", "2"],
            vec!["DEBUG", "RELOAD", "NOSAVE"],
            vec!["FUNCTION", "LIST"],
            vec!["MGET", "x", "y"],
            vec!["FUNCTION", "DELETE", "one"],
            // (A key in both the file and memory would stop redis-server.)
            vec!["DEL", "x"],
            vec!["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH"],
            vec!["FUNCTION", "LIST"],
            vec!["GET", "x"],
        ] {
            let args: Vec<&[u8]> = line.iter().map(|w| w.as_bytes()).collect();
            out.push(String::from_utf8_lossy(&raw.cmd(&args)).into_owned());
        }
        out
    };
    assert_eq!(transcript(goblin.port), transcript(redis.port));
}
