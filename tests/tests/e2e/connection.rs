//! Connection commands, and the errors every command shares.

use goblin_tests::{Differential, Server, show};

#[test]
fn connection_commands_match_redis() {
    let mut d = Differential::new();
    d.check_lines(
        "
        PING
        ping hello
        PING a b
        ECHO hi
        ECHO
        ECHO a b
        SELECT 0
        SELECT 1
        SELECT 16
        SELECT -1
        SELECT x
        SELECT 99999999999
        SELECT
        CLIENT GETNAME
        CLIENT SETNAME goblin
        CLIENT GETNAME
        CLIENT SETNAME
        CLIENT SETNAME a b
        CLIENT GETNAME x
        CLIENT
        CLIENT NOPE
        client nope x
        CLIENT SETNAME
        HELLO 4
        HELLO 1
        HELLO x
        HELLO 2 SETNAME
        HELLO 2 FOO
        HELLO 2 AUTH a b
        HELLO 2 AUTH
        AUTH
        AUTH a b c
        ",
    );
    d.check(&[b"CLIENT", b"SETNAME", b"has space"]);
    d.check(&[b"CLIENT", b"SETNAME", b"new\nline"]);
    d.check(&[b"CLIENT", b"SETNAME", b""]);
    d.check(&[b"CLIENT", b"GETNAME"]);
    d.check(&[b"HELLO", b"3", b"SETNAME", b"bad name"]);
    d.check(&[b"HELLO", b"3", b"NOPE\0x"]);
    // Keywords end at a NUL byte; quoted options are cut there, CR and LF made spaces.
    d.check(&[b"HELLO", b"2", b"SETNAME\0x"]);
    d.check(&[b"HELLO", b"2", b"auth\0x", b"default"]);
    d.check(&[b"HELLO", b"2", b"\r\nNO\r\nPE\r\n"]);
    d.check(&[b"HELLO", b"2", b"SETNAME", b"a\r\nb"]);
    d.check(&[b"HELLO", b"2\0", b"SETNAME", b"x"]);
    d.check_str("CLIENT GETNAME");
    // Options take effect in order: a name set before a bad option stays; a failed AUTH
    // is reported before a bad option after it.
    d.check_lines(
        "
        HELLO 2 SETNAME early FOO
        CLIENT GETNAME
        HELLO 2 AUTH nobody x SETNAME \"a b\"
        HELLO 2 AUTH nobody x FOO
        HELLO 2 SETNAME \"a b\" AUTH nobody x
        CLIENT GETNAME
        ",
    );
}

#[test]
fn unknown_commands_and_arity_errors_match_redis() {
    let mut d = Differential::new();
    d.check_lines(
        "
        FOO
        FOO a b c
        GET
        GET a b
        SET a
        TTL
        DEL
        EXISTS
        DBSIZE x
        ",
    );
    let long = vec![b'x'; 300];
    d.check(&[&long[..], b"a"]);
    d.check(&[b"FOO", &long[..], &long[..]]);
    d.check(&[b"FOO", b"with\r\nnewline", b"nul\0byte"]);
    d.check(&[b"with\nnewline"]);
    d.check(&[b"CLIENT", &long[..]]);
    d.check(&[
        b"FOO", b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h", b"i", b"j", b"k", b"l", b"m", b"n",
        b"o", b"p", b"q", b"r", b"s", b"t", b"u", b"v", b"w", b"x", b"y", b"z", b"0", b"1", b"2",
        b"3", b"4", b"5", b"6", b"7", b"8", b"9", b"10", b"11", b"12", b"13", b"14", b"15",
    ]);
}

/// Replaces the value of the `id` field of a HELLO reply, which differs between servers.
fn without_id(reply: &[u8]) -> String {
    let text = show(reply);
    let start = text.find("id\\r\\n:").map(|i| i + 6).unwrap_or(0);
    let end = text[start..]
        .find("\\r\\n")
        .map_or(text.len(), |i| start + i);
    format!("{}<id>{}", &text[..start], &text[end..])
}

#[test]
fn hello_switches_protocols_like_redis() {
    let mut d = Differential::new();
    for args in [
        &[&b"HELLO"[..]][..],
        &[b"HELLO", b"3"],
        &[b"HELLO", b"2"],
        &[
            b"HELLO", b"3", b"AUTH", b"default", b"pw", b"SETNAME", b"me",
        ],
    ] {
        let want = d.r.cmd(args);
        let got = d.g.cmd(args);
        assert_eq!(without_id(&got), without_id(&want), "{args:?}");
    }
    // In RESP3, null is `_` and CLIENT GETNAME still works.
    let (want, got) = (
        d.r.cmd_str("HELLO 3 SETNAME x"),
        d.g.cmd_str("HELLO 3 SETNAME x"),
    );
    assert_eq!(without_id(&got), without_id(&want));
    d.check_lines("CLIENT GETNAME\nGET missing\nPING\nCOMMAND INFO get nope\nCONFIG GET save");
}

#[test]
fn client_id_is_unique_and_setinfo_is_accepted() {
    let server = Server::goblin();
    let mut a = server.raw();
    let mut b = server.raw();
    let (ia, ib) = (a.cmd_str("CLIENT ID"), b.cmd_str("CLIENT ID"));
    assert!(ia.starts_with(b":") && ib.starts_with(b":") && ia != ib);
    assert_eq!(a.cmd_str("CLIENT SETINFO lib-name redis-rs"), b"+OK\r\n");
    assert_eq!(a.cmd_str("CLIENT SETINFO LIB-VER 1.2.3"), b"+OK\r\n");
    assert_eq!(
        a.cmd_str("CLIENT SETINFO foo bar"),
        b"-ERR Unrecognized option 'foo'\r\n"
    );
    assert_eq!(
        a.cmd(&[b"CLIENT", b"SETINFO", b"lib-name", b"a b"]),
        b"-ERR lib-name cannot contain spaces, newlines or special characters.\r\n"
    );
    // The attribute is quoted as C's `%s` quotes it (up to a NUL), CR and LF made spaces.
    assert_eq!(
        a.cmd(&[b"CLIENT", b"SETINFO", b"lib-x\0y", b"v"]),
        b"-ERR Unrecognized option 'lib-x'\r\n"
    );
    assert_eq!(
        a.cmd(&[b"CLIENT", b"SETINFO", b"foo\r\nbar", b"v"]),
        b"-ERR Unrecognized option 'foo  bar'\r\n"
    );
    assert_eq!(
        a.cmd(&[b"CLIENT", b"SETINFO", b"lib-name\0x", b"a\nb"]),
        b"-ERR lib-name cannot contain spaces, newlines or special characters.\r\n"
    );
    assert_eq!(
        a.cmd_str("CLIENT SETINFO lib-name"),
        b"-ERR wrong number of arguments for 'client|setinfo' command\r\n"
    );
    let info = String::from_utf8(a.cmd_str("CLIENT INFO")).unwrap();
    assert!(info.contains("lib-name=redis-rs lib-ver=1.2.3"), "{info}");
}

/// Clients send CLIENT SETINFO as they connect, before any AUTH their caller sends:
/// redis-server 7.0 answers it (a subcommand it does not know) before asking for AUTH,
/// and redis-py ignores that error but takes a NOAUTH for a failed connection (its
/// cluster client, reconnecting, could then never send the AUTH it was asked to). Goblin
/// takes SETINFO before AUTH; every other command still needs it.
#[test]
fn client_setinfo_is_taken_before_auth() {
    let server = Server::goblin();
    let mut admin = server.raw();
    assert_eq!(admin.cmd_str("CONFIG SET requirepass pw"), b"+OK\r\n");
    let mut c = server.raw();
    assert_eq!(c.cmd_str("CLIENT SETINFO lib-name redis-py"), b"+OK\r\n");
    assert_eq!(c.cmd_str("CLIENT INFO").get(..7), Some(&b"-NOAUTH"[..]));
    assert_eq!(c.cmd_str("GET x").get(..7), Some(&b"-NOAUTH"[..]));
    assert_eq!(c.cmd_str("AUTH pw"), b"+OK\r\n");
    let info = String::from_utf8(c.cmd_str("CLIENT INFO")).unwrap();
    assert!(info.contains("lib-name=redis-py"), "{info}");
    // As for 7.0's unknown subcommand, no ACL rule refuses it.
    assert_eq!(admin.cmd_str("ACL SETUSER u on >p -@all +get"), b"+OK\r\n");
    assert_eq!(c.cmd_str("AUTH u p"), b"+OK\r\n");
    assert_eq!(c.cmd_str("CLIENT SETINFO lib-ver 5.2.1"), b"+OK\r\n");
    assert_eq!(c.cmd_str("CLIENT ID").get(..7), Some(&b"-NOPERM"[..]));
}

#[test]
fn client_unblock_of_a_client_that_is_not_blocked_answers_like_redis() {
    let mut d = Differential::new();
    d.check_lines(
        "CLIENT UNBLOCK 999999\n\
         CLIENT UNBLOCK 999999 TIMEOUT\n\
         CLIENT UNBLOCK 999999 error\n\
         CLIENT UNBLOCK 999999 nope\n\
         CLIENT UNBLOCK x\n\
         CLIENT UNBLOCK x nope\n\
         CLIENT UNBLOCK -1\n\
         CLIENT UNBLOCK 1 TIMEOUT extra\n\
         CLIENT UNBLOCK",
    );
    // A client that is connected but not blocked: 0, on every worker it might live on.
    let idle = d.g.cmd_str("CLIENT ID");
    let id = String::from_utf8_lossy(&idle[1..idle.len() - 2]).into_owned();
    assert_eq!(d.g.cmd_str(&format!("CLIENT UNBLOCK {id}")), b":0\r\n");
}

/// `requirepass`: NOAUTH before AUTH (inside MULTI too), AUTH with one or two arguments,
/// WRONGPASS, HELLO with and without AUTH — as redis-server 7.0 with the same password.
#[test]
fn a_password_is_asked_as_redis_asks_it() {
    let pass = ["--requirepass", "s3cret"];
    let mut d = Differential::with_servers(Server::goblin_with(&pass), Server::redis_with(&pass));
    d.check_lines(
        "
        PING
        GET k
        SET k v
        MULTI
        HELLO 3
        HELLO 3 SETNAME x
        HELLO 3 AUTH default wrong
        HELLO 3 AUTH nobody s3cret
        AUTH wrong
        AUTH default wrong
        AUTH nobody s3cret
        AUTH a b c
        PING
        AUTH s3cret
        PING
        SET k v
        AUTH default wrong
        GET k
        AUTH default s3cret
        ",
    );
    // A fresh connection: HELLO … AUTH authenticates and switches protocol at once.
    let mut g = d.goblin.raw();
    let mut r = d.redis.raw();
    for line in [
        "HELLO 2 AUTH default s3cret SETNAME me",
        "CLIENT GETNAME",
        "QUIT",
    ] {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let (got, want) = goblin_tests::diff::ask_both(&mut g, &mut r, &args);
        let (got, want) = (
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
        );
        // The client ids differ: compare everything else.
        let strip = |s: &str| {
            s.lines()
                .filter(|l| !l.starts_with(':'))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(strip(&got), strip(&want), "{line}");
    }
}

/// The field names of a CLIENT LIST/INFO line, in order.
fn field_names(line: &str) -> Vec<String> {
    line.split_whitespace()
        .filter_map(|f| f.split('=').next())
        .map(String::from)
        .collect()
}

/// CLIENT LIST across threads, and CLIENT KILL by id, address and the old form; their
/// errors as redis-server's.
#[test]
fn client_list_and_kill_see_every_thread() {
    let mut d = Differential::new();
    d.check_lines(
        "
        CLIENT LIST TYPE foo
        CLIENT LIST ID x
        CLIENT LIST ID
        CLIENT LIST foo
        CLIENT LIST TYPE pubsub
        CLIENT LIST TYPE master
        CLIENT KILL
        CLIENT KILL ID 0
        CLIENT KILL ID -3
        CLIENT KILL ID x
        CLIENT KILL TYPE foo
        CLIENT KILL USER bob
        CLIENT KILL SKIPME maybe
        CLIENT KILL FOO bar
        CLIENT KILL ID
        CLIENT KILL 1.2.3.4:5
        CLIENT KILL ID 99999
        CLIENT KILL ADDR 1.2.3.4:5 SKIPME no
        CLIENT KILL TYPE pubsub
        ",
    );
    // The fields of a line, as redis-server 7.0 lists them (Goblin adds 7.2's lib-name
    // and lib-ver, which clients set).
    let g = String::from_utf8_lossy(&d.g.cmd_str("CLIENT LIST")).into_owned();
    let r = String::from_utf8_lossy(&d.r.cmd_str("CLIENT LIST")).into_owned();
    let (gl, rl) = (
        g.lines().nth(1).unwrap_or(""),
        r.lines().nth(1).unwrap_or(""),
    );
    let mut want = field_names(rl);
    want.retain(|f| f != "lib-name" && f != "lib-ver");
    let mut got = field_names(gl);
    got.retain(|f| f != "lib-name" && f != "lib-ver");
    assert_eq!(got, want, "{gl} / {rl}");

    // Several connections, on several threads: all listed, in the order they came.
    let goblin = &d.goblin;
    let mut conns: Vec<goblin_tests::Raw> = (0..5).map(|_| goblin.raw()).collect();
    let ids: Vec<String> = conns
        .iter_mut()
        .map(|c| {
            String::from_utf8_lossy(&c.cmd_str("CLIENT ID"))
                .trim_start_matches(':')
                .trim()
                .to_string()
        })
        .collect();
    let mut me = goblin.raw();
    let list = String::from_utf8_lossy(&me.cmd_str("CLIENT LIST")).into_owned();
    let listed: Vec<&str> = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|f| f.strip_prefix("id="))
        .collect();
    for id in &ids {
        assert!(listed.contains(&id.as_str()), "{id} in {list}");
    }
    let numbers: Vec<u64> = listed.iter().filter_map(|i| i.parse().ok()).collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{list}");
    let one = String::from_utf8_lossy(&me.cmd_str(&format!("CLIENT LIST ID {} 999999", ids[2])))
        .into_owned();
    assert_eq!(
        one.lines().filter(|l| l.contains("id=")).count(),
        1,
        "{one}"
    );
    assert!(one.contains(&format!("id={} ", ids[2])), "{one}");

    // KILL by id closes that connection, on whatever thread it lives.
    assert_eq!(me.cmd_str(&format!("CLIENT KILL ID {}", ids[1])), b":1\r\n");
    let (_, closed) = conns[1].read_to_close(std::time::Duration::from_secs(5));
    assert!(closed, "the killed connection was closed");
    // By address (found through CLIENT LIST), and in the old form.
    let addr_of = |me: &mut goblin_tests::Raw, id: &str| -> String {
        let list =
            String::from_utf8_lossy(&me.cmd_str(&format!("CLIENT LIST ID {id}"))).into_owned();
        list.split_whitespace()
            .find_map(|f| f.strip_prefix("addr="))
            .unwrap_or_default()
            .to_string()
    };
    let addr = addr_of(&mut me, &ids[3]);
    assert_eq!(me.cmd_str(&format!("CLIENT KILL ADDR {addr}")), b":1\r\n");
    let addr = addr_of(&mut me, &ids[4]);
    assert_eq!(me.cmd_str(&format!("CLIENT KILL {addr}")), b"+OK\r\n");
    assert_eq!(
        me.cmd_str(&format!("CLIENT KILL {addr}")),
        b"-ERR No such client\r\n"
    );
    // SKIPME (the default) spares the caller; the others of type normal go.
    let killed = me.cmd_str("CLIENT KILL TYPE normal");
    assert!(killed.starts_with(b":"), "{}", show(&killed));
    assert_eq!(me.cmd_str("PING"), b"+PONG\r\n");
    assert_eq!(conns[0].try_reply().ok().filter(|r| !r.is_empty()), None);
}

/// `maxclients`: one more connection gets redis-server's error and is closed;
/// `timeout`: an idle client is closed, a busy one is not.
#[test]
fn maxclients_and_idle_timeout_close_connections() {
    let server = Server::goblin_with(&["--maxclients", "3", "--timeout", "1"]);
    // The harness's own readiness probe has to be closed first.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut conns: Vec<goblin_tests::Raw> = (0..3).map(|_| server.raw()).collect();
    for c in &mut conns {
        assert_eq!(c.cmd_str("PING"), b"+PONG\r\n");
    }
    let mut extra = server.raw();
    let (reply, closed) = extra.read_to_close(std::time::Duration::from_secs(5));
    assert_eq!(reply, b"-ERR max number of clients reached\r\n");
    assert!(closed);
    // A client that keeps talking stays; the idle ones go after a second or two.
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_millis(2_600) {
        assert_eq!(conns[0].cmd_str("PING"), b"+PONG\r\n");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let (_, closed) = conns[1].read_to_close(std::time::Duration::from_secs(5));
    assert!(closed, "an idle client was closed");
    assert_eq!(conns[0].cmd_str("PING"), b"+PONG\r\n");
    // Room again: a new connection is served.
    let mut again = server.raw();
    assert_eq!(again.cmd_str("PING"), b"+PONG\r\n");
}

/// ACL for the default user, the only one: WHOAMI, CAT (the categories; a category's
/// commands are redis-server's, less those Goblin lacks), GENPASS's lengths and
/// errors, LIST, USERS and GETUSER without and with `requirepass`, LOG, DRYRUN's
/// checks and HELP's lines, as redis-server answers them.
#[test]
fn acl_for_the_default_user_matches_redis() {
    let mut d = Differential::new();
    d.check_lines(
        "ACL WHOAMI\nACL CAT\nACL CAT nope\nACL CAT a b\nACL LIST\nACL USERS\n\
         ACL GETUSER default\nACL GETUSER nobody\nACL LOG\nACL LOG 5\nACL LOG x\n\
         ACL LOG RESET\nACL GENPASS 0\nACL GENPASS 4097\nACL GENPASS x\n\
         ACL DRYRUN default get k\nACL DRYRUN default GET\nACL DRYRUN default nocmd\n\
         ACL DRYRUN nobody get k\nACL DRYRUN default client list\n\
         ACL DRYRUN default client\nACL DRYRUN default client nope\n\
         ACL DRYRUN default config get\nACL DRYRUN\nACL NOPE",
    );
    for bits in ["", " 1", " 5", " 8", " 4096"] {
        let line = format!("ACL GENPASS{bits}");
        let (g, r) = (d.g.cmd_str(&line), d.r.cmd_str(&line));
        assert_eq!(g.len(), r.len(), "{line}");
        // Random: of 20 draws, not all the same (one draw of `GENPASS 1`, a single hex
        // digit, equals the last one time in 16).
        let draws: std::collections::HashSet<_> = (0..20).map(|_| d.g.cmd_str(&line)).collect();
        assert!(draws.len() > 1 || !draws.contains(&g), "{line}: random");
    }
    for category in [
        "read",
        "connection",
        "hyperloglog",
        "geo",
        "scripting",
        "stream",
    ] {
        let line = format!("ACL CAT {category}");
        let names = |reply: Vec<u8>| {
            let text = String::from_utf8(reply).unwrap();
            let mut names: Vec<String> = text
                .split("\r\n")
                .filter(|l| !l.is_empty() && !l.starts_with(['*', '$']))
                .map(str::to_string)
                .collect();
            names.sort();
            names
        };
        let (mut g, r) = (names(d.g.cmd_str(&line)), names(d.r.cmd_str(&line)));
        // Goblin's own commands (and CLIENT SETINFO, of Redis 7.2) are in categories too.
        g.retain(|n| {
            !n.starts_with("goblin.")
                && !["delex", "delifeq", "client|setinfo"].contains(&n.as_str())
        });
        assert!(g.iter().all(|n| r.contains(n)), "{line}: {g:?} ⊄ {r:?}");
    }
    for line in ["CONFIG SET requirepass secret", "AUTH secret"] {
        d.check_str(line);
    }
    d.check_lines("ACL LIST\nACL GETUSER default");
    let help = d.g.cmd_str("ACL HELP");
    assert_eq!(help, d.r.cmd_str("ACL HELP"));
}
