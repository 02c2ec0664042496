//! GET, SET with every option, DEL, EXISTS, TTL, PTTL — differentially against redis-server.

use std::time::Duration;

use goblin_tests::Differential;

#[test]
fn set_options_match_redis() {
    let mut d = Differential::new();
    d.check_lines(
        "
        SET k v
        GET k
        SET k v2 NX
        SET k v2 XX
        GET k
        SET new v XX
        SET new v NX
        SET k v GET
        SET k v3 GET NX
        SET absent v GET NX
        SET absent2 v GET XX
        SET k v NX XX
        SET k v XX NX
        SET k v nx nx
        SET k v EX 100
        TTL k
        SET k v KEEPTTL
        TTL k
        SET k v
        TTL k
        SET k v PX 100000
        SET k v EX 1 PX 1
        SET k v EX 1 EX 2
        SET k v KEEPTTL EX 1
        SET k v EX 1 KEEPTTL
        SET k v PERSIST
        SET k v EX
        SET k v EX 0
        SET k v EX -1
        SET k v EX x
        SET k v EX 1.5
        SET k v EX +5
        SET k v EX 05
        SET k v PX 0
        SET k v EX 9223372036854775807
        SET k v PX 9223372036854775807
        SET k v EX 9999999999999
        SET k v EXAT 0
        SET k v PXAT 9223372036854775807
        SET k v EX abc FOO
        SET k v FOO
        SET k v GET GET
        SET k v ex 10 get
        SET k v xx px 500000 get
        SET k v EXAT 1
        GET k
        DEL k
        SETNX k 1
        SETNX k 2
        GET k
        SETEX k 100 v
        TTL k
        SETEX k 0 v
        SETEX k x v
        SETEX k -5 v
        PSETEX k 100000 v
        TTL k
        PSETEX k 0 v
        PSETEX k 9223372036854775807 v
        SETEX k 9223372036854775807 v
        ",
    );
    d.check(&[b"SET", b"bin\0key", b"v\r\n\0"]);
    d.check(&[b"GET", b"bin\0key"]);
    d.check(&[b"SET", b"k", b"v", b"NX\0junk"]);
    d.check(&[b"SET", b"k", b"v", b"E"]);
}

#[test]
fn keys_commands_match_redis() {
    let mut d = Differential::new();
    d.check_lines(
        "
        DEL a b c
        SET a 1
        SET b 2
        EXISTS a b c a
        DEL a a c
        EXISTS a b
        TTL b
        PTTL b
        TTL nothing
        PTTL nothing
        SET t v EX 100
        TTL t
        SET p v PX 99999999
        TTL p
        DEL b t p
        ",
    );
}

#[test]
fn keys_expire_lazily_like_redis() {
    let mut d = Differential::new();
    d.check_lines("SET short v PX 100\nSET long v PX 100000\nEXISTS short long\nGET short");
    std::thread::sleep(Duration::from_millis(250));
    d.check_lines("GET short\nEXISTS short long\nTTL short\nPTTL short\nDEL short long\nDBSIZE");
}
