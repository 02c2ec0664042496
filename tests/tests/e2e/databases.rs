//! Databases: SELECT, MOVE, COPY … DB, SWAPDB, FLUSHDB, DBSIZE, KEYS, INFO keyspace and
//! SELECT inside MULTI — differentially against redis-server with 16 databases, keys on
//! one shard and across shards; blocked clients per database; every database through a
//! restart (the log, its rewrite, a snapshot, and redis-server loading Goblin's file).

use std::time::Duration;

use goblin_tests::dataset::all_databases;
use goblin_tests::diff::{script, script_everywhere};
use goblin_tests::{Differential, Raw, Server, scratch_dir};

#[test]
fn select_move_copy_swapdb_and_flushdb_match_redis() {
    script_everywhere(
        4,
        r#"
        SELECT 1
        MSET K0 a K1 b
        SET K2 c
        MOVE K0 2
        MOVE K0 2
        MOVE K1 1
        MOVE K1 16
        MOVE K1 x
        MOVE K1 -1
        MOVE K1 99999999999
        MOVE K3 2
        DBSIZE
        %KEYS *
        SELECT 2
        GET K0
        EXISTS K0 K1
        COPY K0 K0 DB 3
        COPY K0 K0
        COPY K0 K1 DB 3
        COPY K0 K1 DB 3
        COPY K0 K1 DB 3 REPLACE
        COPY K0 K1 DB 99
        COPY K0 K1 DB x
        COPY K0 K1 DB 2
        RENAME K0 K3
        SELECT 3
        %KEYS *
        MGET K0 K1 K3
        SWAPDB 3 4
        SWAPDB x 1
        SWAPDB 1 y
        SWAPDB 1 16
        SWAPDB -1 2
        SWAPDB 3 3
        DBSIZE
        SELECT 4
        MGET K0 K1
        RPUSH K2 x y
        INFO keyspace
        FLUSHDB
        INFO keyspace
        SELECT 16
        SELECT -1
        SELECT x
        SELECT 2147483648
        DBSIZE
        SELECT 1
        DBSIZE
        SELECT 0
        FLUSHALL
        INFO keyspace
        "#,
    );
}

#[test]
fn exec_runs_each_command_in_the_database_selected_before_it() {
    script_everywhere(
        3,
        r#"
        MULTI
        SET K0 zero
        SELECT 5
        SET K0 five
        INCR K1
        SELECT 99
        SELECT 6
        MSET K0 six K1 x
        DBSIZE
        EXEC
        GET K0
        SELECT 5
        MGET K0 K1
        SELECT 0
        GET K0
        MULTI
        SELECT 7
        EXEC
        SET K2 seven
        SELECT 7
        GET K2
        INFO keyspace
        "#,
    );
}

/// A client blocked on a key of one database: a push to the same key in another
/// database leaves it waiting, one in its database serves it, and so does a SWAPDB that
/// brings it a list. Same replies from both servers.
#[test]
fn blocked_clients_wait_in_their_own_database() {
    let scenario = |server: &Server| -> Vec<Vec<u8>> {
        let mut waiter = server.raw();
        let mut other = server.raw();
        let mut seen = Vec::new();
        seen.push(waiter.cmd_str("SELECT 3"));
        waiter.send(&goblin_tests::encode(&[b"BLPOP", b"q", b"0"]));
        std::thread::sleep(Duration::from_millis(100));
        seen.push(other.cmd_str("SELECT 2"));
        seen.push(other.cmd_str("RPUSH q in-2"));
        seen.push(other.cmd_str("SELECT 3"));
        seen.push(other.cmd_str("RPUSH q in-3"));
        seen.push(waiter.reply());
        // Waiting again, in database 3, for a list that a SWAPDB brings.
        waiter.send(&goblin_tests::encode(&[b"BLPOP", b"q", b"0"]));
        std::thread::sleep(Duration::from_millis(100));
        seen.push(other.cmd_str("SWAPDB 2 3"));
        seen.push(waiter.reply());
        seen.push(other.cmd_str("LRANGE q 0 -1"));
        seen
    };
    for threads in [1, 3] {
        let redis = scenario(&Server::redis());
        let goblin = scenario(&Server::goblin_threads(threads));
        assert_eq!(
            goblin
                .iter()
                .map(|r| goblin_tests::show(r))
                .collect::<Vec<_>>(),
            redis
                .iter()
                .map(|r| goblin_tests::show(r))
                .collect::<Vec<_>>(),
            "--threads {threads}"
        );
    }
}

/// Writes of every kind into several databases, with keys on every shard; the key with
/// an expiry expires at `at` (Unix ms).
fn fill(raw: &mut Raw, at: u64) {
    let volatile = format!("SET volatile v PXAT {at}");
    for line in [
        "SET k0 zero",
        "SELECT 1",
        "MSET a 1 b 2 c 3 d 4",
        "RPUSH list x y z",
        "HSET h f v",
        &volatile,
        "SELECT 2",
        "SADD s m1 m2",
        "ZADD z 1 one 2 two",
        "SET gone soon",
        "SELECT 1",
        "MOVE a 2",
        "MOVE b 3",
        "COPY c c DB 4",
        "COPY d copied DB 5",
        "SELECT 2",
        "DEL gone",
        "SELECT 8",
        "SET doomed 1",
        "FLUSHDB",
        "SET kept 1",
        "SELECT 9",
        "SET nine 9",
        "SWAPDB 9 10",
        "SELECT 11",
        "SET eleven 1",
        "SELECT 0",
        "MULTI",
        "SELECT 12",
        "SET in-exec 1",
        "SELECT 13",
        "INCR counter",
        "EXEC",
    ] {
        let reply = raw.cmd_str(line);
        assert!(
            !reply.starts_with(b"-"),
            "{line}: {}",
            goblin_tests::show(&reply)
        );
    }
}

#[test]
fn every_database_comes_back_from_the_log_and_from_a_snapshot() {
    let dir = scratch_dir("databases-restart");
    let path = dir.to_str().unwrap().to_string();
    let start = |threads: usize, appendonly: &str| {
        Server::goblin_with(&[
            "--dir",
            &path,
            "--appendonly",
            appendonly,
            "--threads",
            &threads.to_string(),
        ])
    };
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
        + 600_000;
    let mut server = start(3, "yes");
    fill(&mut server.raw(), at);
    let want = all_databases(&mut server.client());
    assert_eq!(
        want.keys().copied().collect::<Vec<_>>(),
        [0, 1, 2, 3, 4, 5, 8, 10, 11, 12, 13],
        "{want:?}"
    );
    // The same commands on redis-server leave the same databases.
    let redis = Server::redis();
    fill(&mut redis.raw(), at);
    assert_eq!(all_databases(&mut redis.client()), want);

    // The log, replayed by another number of shards.
    server.kill();
    let mut server = start(2, "yes");
    assert_eq!(all_databases(&mut server.client()), want, "from the log");
    // Rewritten, then more writes; replayed again.
    let mut raw = server.raw();
    assert_eq!(
        raw.cmd_str("BGREWRITEAOF"),
        b"+Background append only file rewriting started\r\n"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !String::from_utf8_lossy(&raw.cmd_str("INFO persistence"))
        .contains("aof_rewrite_in_progress:0")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the rewrite never ended"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    raw.cmd_str("SELECT 14");
    raw.cmd_str("SET after-rewrite 1");
    let want = all_databases(&mut server.client());
    server.kill();
    let mut server = start(4, "yes");
    assert_eq!(all_databases(&mut server.client()), want, "after a rewrite");

    // A snapshot, loaded without the log, and by redis-server.
    assert_eq!(server.raw().cmd_str("SAVE"), b"+OK\r\n");
    server.kill();
    let mut server = start(1, "no");
    assert_eq!(
        all_databases(&mut server.client()),
        want,
        "from the snapshot"
    );
    server.kill();
    // (Redis 7.0 reads a log's manifest even with the log off, and Goblin's lists a file
    // per shard: the snapshot alone goes to redis-server.)
    let alone = scratch_dir("databases-restart-rdb");
    std::fs::copy(dir.join("dump.rdb"), alone.join("dump.rdb")).unwrap();
    let redis = Server::redis_with(&["--dir", alone.to_str().unwrap()]);
    assert_eq!(
        all_databases(&mut redis.client()),
        want,
        "redis-server loading Goblin's snapshot"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&alone);
}

/// `databases` sets how many there are; an out-of-range SELECT is refused as Redis
/// refuses it, with the same configuration.
#[test]
fn the_databases_option_sets_how_many_there_are() {
    let mut d = Differential::with_servers(
        Server::goblin_with(&["--databases", "4"]),
        Server::redis_with(&["--databases", "4"]),
    );
    script(
        &mut d,
        &[],
        "--databases 4",
        "
        SELECT 3
        SELECT 4
        MOVE x 4
        SWAPDB 0 4
        CONFIG GET databases
        ",
    );
}
