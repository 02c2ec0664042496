//! Redis Sentinel (redis-server 7.0's, three of them) watching a master and two replicas,
//! Goblin's or redis-server's for comparison: the sentinels find the replicas and each
//! other (INFO replication, the hello channel), and when the master dies they promote a
//! replica (REPLICAOF NO ONE), point the other at it (MULTI, REPLICAOF, CONFIG REWRITE,
//! CLIENT KILL, EXEC) and, when the old master comes back, make it a replica too.

use std::time::{Duration, Instant};

use goblin_tests::{Raw, Server, default_threads, encode, show};

/// Reads `probe` until `done` holds of what it read (60 s at most): what it read last.
fn poll<T: std::fmt::Debug>(
    what: &str,
    mut probe: impl FnMut() -> T,
    done: impl Fn(&T) -> bool,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let seen = probe();
        if done(&seen) {
            return seen;
        }
        assert!(Instant::now() < deadline, "{what}: {seen:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A field of a flat array reply of bulk strings and integers (SENTINEL MASTER).
fn field(reply: &[u8], name: &str) -> Option<String> {
    let text = String::from_utf8_lossy(reply);
    let words: Vec<&str> = text
        .split("\r\n")
        .filter(|w| !w.starts_with('*') && !w.starts_with('$') && !w.is_empty())
        .collect();
    words
        .chunks(2)
        .find(|pair| pair[0] == name)
        .and_then(|pair| pair.get(1))
        .map(|v| v.trim_start_matches(':').to_string())
}

/// The master's port as the sentinel on `port` names it.
fn master_port(sentinel: &mut Raw) -> String {
    let reply = sentinel.cmd_str("SENTINEL GET-MASTER-ADDR-BY-NAME mymaster");
    let text = String::from_utf8_lossy(&reply).into_owned();
    text.split("\r\n").nth(4).unwrap_or("").to_string()
}

/// `line`'s reply from `server` on a connection of its own, asked again on a new one when
/// the connection is closed first (reconfiguring a server, the sentinels kill its
/// clients): 10 s at most.
fn ask(server: &Server, line: &str) -> Vec<u8> {
    let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = Raw::try_connect(server.port).and_then(|mut raw| {
            raw.try_send(&encode(&words))?;
            raw.try_reply()
        });
        match reply {
            Ok(reply) => return reply,
            Err(e) => assert!(Instant::now() < deadline, "{line}: {e}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What a failover left, in terms that do not depend on the server: the two replicas'
/// roles and what the three servers hold.
fn fail_over(start: impl Fn(&[&str]) -> Server) -> Vec<String> {
    let master = start(&[]);
    let port = master.port.to_string();
    let replicas = [
        start(&["--replicaof", "127.0.0.1", &port]),
        start(&["--replicaof", "127.0.0.1", &port]),
    ];
    let mut m = master.raw();
    for i in 0..100 {
        m.cmd_str(&format!("SET k{i} v{i}"));
    }
    assert_eq!(m.cmd_str("WAIT 2 10000"), b":2\r\n");
    let conf = format!(
        "sentinel monitor mymaster 127.0.0.1 {port} 2\n\
         sentinel down-after-milliseconds mymaster 1000\n\
         sentinel failover-timeout mymaster 5000\n\
         sentinel parallel-syncs mymaster 2"
    );
    let sentinels: Vec<Server> = (0..3).map(|_| Server::sentinel(&conf)).collect();
    let mut s = sentinels[0].raw();
    // They find the replicas (INFO replication) and each other (the hello channel).
    poll(
        "the sentinels did not find the replicas and each other",
        || s.cmd_str("SENTINEL MASTER mymaster"),
        |r| {
            field(r, "num-slaves").as_deref() == Some("2")
                && field(r, "num-other-sentinels").as_deref() == Some("2")
        },
    );
    let old_port = master.port;
    drop(m);
    drop(master);
    poll(
        "no failover",
        || master_port(&mut s),
        |p| !p.is_empty() && *p != old_port.to_string(),
    );
    // The old master comes back on its port.
    let back = start(&["--port", &old_port.to_string()]);
    let servers = [&replicas[0], &replicas[1], &back];
    // The sentinels settle: they all name one master, which is one, and the two others
    // follow it with their links up (a sentinel that finds the new master down under
    // load may fail over once more; the test asks for the state they settle in).
    let role_of = |server: &Server| {
        let info = String::from_utf8_lossy(&ask(server, "INFO replication")).into_owned();
        let get = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .unwrap_or("")
                .to_string()
        };
        match get("role").as_str() {
            "master" => "master".to_string(),
            "slave" => format!(
                "replica of {} ({})",
                get("master_port"),
                get("master_link_status")
            ),
            other => other.to_string(),
        }
    };
    let settled = poll(
        "the sentinels did not settle",
        || {
            let named: Vec<String> = sentinels
                .iter()
                .map(|s| master_port(&mut s.raw()))
                .collect();
            let roles: Vec<String> = servers.iter().map(|s| role_of(s)).collect();
            (named, roles)
        },
        |(named, roles)| {
            let master = &named[0];
            named.iter().all(|n| n == master)
                && servers.iter().zip(roles).all(|(server, role)| {
                    if server.port.to_string() == *master {
                        role == "master"
                    } else {
                        *role == format!("replica of {master} (up)")
                    }
                })
        },
    );
    let master = settled.0[0].clone();
    let new = servers
        .iter()
        .find(|s| s.port.to_string() == master)
        .unwrap();
    assert_eq!(ask(new, "SET after failover"), b"+OK\r\n");
    for server in servers {
        poll(
            "a replica did not get the write",
            || ask(server, "GET after"),
            |r| r.as_slice() == b"$8\r\nfailover\r\n",
        );
    }
    let mut seen: Vec<String> = settled
        .1
        .iter()
        .map(|r| r.replace(&master, "the master"))
        .filter(|r| r != "master")
        .collect();
    for server in servers {
        for probe in ["DBSIZE", "GET k99"] {
            seen.push(show(&ask(server, probe)));
        }
    }
    seen
}

#[test]
fn sentinels_fail_over_a_goblin_master_as_a_redis_servers() {
    let threads = default_threads().max(2).to_string();
    let goblin = fail_over(|args| Server::goblin_with(&[&["--threads", &threads], args].concat()));
    let redis = fail_over(Server::redis_with);
    assert_eq!(goblin, redis);
    assert_eq!(
        goblin[..2],
        ["replica of the master (up)", "replica of the master (up)"]
    );
}
