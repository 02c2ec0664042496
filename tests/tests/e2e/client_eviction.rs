//! Client eviction (`maxmemory-clients`), differentially against redis-server: a client
//! whose memory takes the clients past the limit is closed, the largest first, until
//! they are under it; CLIENT NO-EVICT spares one; INFO counts `evicted_clients`.
//! goblin-server runs with three threads, so that the clients live on several.

use std::time::{Duration, Instant};

use goblin_tests::keys::keys_on;
use goblin_tests::reply::info_field;
use goblin_tests::{Kind, Raw, Server};

fn servers() -> Vec<Server> {
    vec![Server::goblin_threads(3), Server::redis()]
}

/// A connection to `server` named `name`.
fn named(server: &Server, name: &str) -> Raw {
    let mut c = server.raw();
    assert_eq!(c.cmd(&[b"CLIENT", b"SETNAME", name.as_bytes()]), b"+OK\r\n");
    c
}

/// The control connection: never evicted itself; the statistics start from zero.
fn control(server: &Server) -> Raw {
    let mut c = named(server, "control");
    assert_eq!(c.cmd(&[b"CLIENT", b"NO-EVICT", b"ON"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"CONFIG", b"RESETSTAT"]), b"+OK\r\n");
    c
}

fn config_set(c: &mut Raw, name: &str, value: &str) {
    assert_eq!(
        c.cmd(&[b"CONFIG", b"SET", name.as_bytes(), value.as_bytes()]),
        b"+OK\r\n",
        "CONFIG SET {name} {value}"
    );
}

/// Each named client's CLIENT LIST field `field`, by name.
fn clients(c: &mut Raw, field: &str) -> Vec<(String, u64)> {
    let list = String::from_utf8_lossy(&c.cmd(&[b"CLIENT", b"LIST"])).into_owned();
    list.lines()
        .filter_map(|line| {
            let get = |f: &str| {
                line.split(' ')
                    .find_map(|kv| kv.strip_prefix(f)?.strip_prefix('='))
                    .map(str::to_string)
            };
            let name = get("name").filter(|n| !n.is_empty())?;
            Some((name, get(field)?.parse().ok()?))
        })
        .collect()
}

fn names(c: &mut Raw) -> Vec<String> {
    let mut names: Vec<String> = clients(c, "tot-mem").into_iter().map(|(n, _)| n).collect();
    names.sort();
    names
}

fn evicted(c: &mut Raw) -> u64 {
    let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", b"stats"])).into_owned();
    info_field(&info, "evicted_clients")
        .and_then(|v| v.parse().ok())
        .expect("evicted_clients in INFO stats")
}

/// Waits until no client named `name` is listed.
fn wait_gone(c: &mut Raw, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while names(c).iter().any(|n| n == name) {
        assert!(Instant::now() < deadline, "{name} still listed");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends the start of `ECHO <declared bytes>` and `sent` of its bytes, no more.
fn half_echo(c: &mut Raw, declared: usize, sent: usize) {
    let mut request = format!("*2\r\n$4\r\nECHO\r\n${declared}\r\n").into_bytes();
    request.resize(request.len() + sent, b'v');
    // (A client evicted as it sends finds its connection closed: what the test looks
    // at next tells.)
    let _ = c.try_send(&request);
}

/// Waits until every client named in `sizes` holds at least its bytes in its query
/// buffer.
fn wait_for_qbufs(c: &mut Raw, sizes: &[(String, u64)], what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let qbufs = clients(c, "qbuf");
        let full = sizes
            .iter()
            .all(|(name, size)| qbufs.iter().any(|(n, q)| n == name && q + 64 >= *size));
        if full {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {qbufs:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A client whose big argument on its way takes the clients past the limit (a share of
/// `maxmemory` here) is closed, and counted; a smaller one stays and finishes its
/// command.
#[test]
fn a_client_past_maxmemory_clients_is_evicted_and_counted() {
    for server in servers() {
        let what = format!("{:?}", server.kind);
        let mut ctl = control(&server);
        config_set(&mut ctl, "maxmemory", "10mb");
        config_set(&mut ctl, "maxmemory-clients", "10%");
        let mut small = named(&server, "small");
        half_echo(&mut small, 200_000, 100_000);
        let mut big = named(&server, "big");
        half_echo(&mut big, 2_000_000, 600_000);
        let (bytes, closed) = big.read_to_close(Duration::from_secs(10));
        assert!(closed && bytes.is_empty(), "{what}: {closed} {bytes:?}");
        assert_eq!(names(&mut ctl), ["control", "small"], "{what}");
        assert_eq!(evicted(&mut ctl), 1, "{what}");
        small.send(&vec![b'v'; 100_000]);
        small.send(b"\r\n");
        let reply = small.reply();
        assert!(reply.starts_with(b"$200000\r\n"), "{what}");
        assert_eq!(reply.len(), 200_000 + 11, "{what}");
    }
}

/// CLIENT NO-EVICT ON spares a client whose replies pile up past the limit; turned off,
/// the client is weighed again and evicted.
#[test]
fn no_evict_spares_a_client_until_it_is_turned_off() {
    for server in servers() {
        let what = format!("{:?}", server.kind);
        let mut ctl = control(&server);
        // (Set from a client of its own: the room a big argument took stays with the
        // client that sent it for a while, on both servers.)
        let mut setter = named(&server, "setter");
        assert_eq!(
            setter.cmd(&[b"SET", b"k", &vec![b'v'; 1 << 20]]),
            b"+OK\r\n"
        );
        drop(setter);
        wait_gone(&mut ctl, "setter");
        config_set(&mut ctl, "maxmemory-clients", "1mb");
        let mut spared = named(&server, "spared");
        assert_eq!(spared.cmd(&[b"CLIENT", b"NO-EVICT", b"ON"]), b"+OK\r\n");
        // Replies it does not read: past 4 MB, more than the socket buffers take.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            spared.send(&goblin_tests::encode(&[b"GET", b"k"]));
            std::thread::sleep(Duration::from_millis(20));
            let mem = clients(&mut ctl, "tot-mem");
            if mem.iter().any(|(n, m)| n == "spared" && *m > 4 << 20) {
                break;
            }
            assert!(Instant::now() < deadline, "{what}: {mem:?}");
        }
        assert_eq!(names(&mut ctl), ["control", "spared"], "{what}");
        assert_eq!(evicted(&mut ctl), 0, "{what}");
        spared.send(&goblin_tests::encode(&[b"CLIENT", b"NO-EVICT", b"OFF"]));
        let (_, closed) = spared.read_to_close(Duration::from_secs(10));
        assert!(closed, "{what}");
        assert_eq!(names(&mut ctl), ["control"], "{what}");
        assert_eq!(evicted(&mut ctl), 1, "{what}");
    }
}

/// Lowering the limit evicts the largest clients first, and only until the clients are
/// under it (Redis's "evict clients in right order (large to small)").
#[test]
fn lowering_the_limit_evicts_the_largest_clients_first() {
    for server in servers() {
        let what = format!("{:?}", server.kind);
        let mut ctl = control(&server);
        let sizes = [("small", 40_000), ("medium", 300_000), ("large", 2_500_000)];
        let mut conns = Vec::new();
        let mut waited = Vec::new();
        for (kind, size) in sizes {
            for i in 0..3 {
                let name = format!("{kind}-{i}");
                let mut c = named(&server, &name);
                // All but the last byte: the argument fills its room and stays.
                half_echo(&mut c, size, size - 1);
                conns.push(c);
                waited.push((name, size as u64 - 1));
            }
        }
        wait_for_qbufs(&mut ctl, &waited, &what);
        let mem = clients(&mut ctl, "tot-mem");
        let of = |prefix: &str| -> u64 {
            mem.iter()
                .filter(|(n, _)| n.starts_with(prefix))
                .map(|(_, m)| m)
                .sum()
        };
        let all = of("");
        let expect = |ctl: &mut Raw, kinds: &[&str]| {
            let left: Vec<String> = names(ctl)
                .into_iter()
                .filter(|n| n != "control")
                .map(|n| n.split('-').next().unwrap_or_default().to_string())
                .collect();
            let mut want: Vec<String> = kinds
                .iter()
                .flat_map(|k| std::iter::repeat_n(k.to_string(), 3))
                .collect();
            want.sort();
            assert_eq!(left, want, "{what}: {mem:?}");
        };
        // Room for all but the large ones: those three go, and only they.
        let limit = all - of("large") + 1;
        config_set(&mut ctl, "maxmemory-clients", &limit.to_string());
        expect(&mut ctl, &["medium", "small"]);
        assert_eq!(evicted(&mut ctl), 3, "{what}");
        // Then room for the small ones only.
        let limit = all - of("large") - of("medium") + 1;
        config_set(&mut ctl, "maxmemory-clients", &limit.to_string());
        expect(&mut ctl, &["small"]);
        assert_eq!(evicted(&mut ctl), 6, "{what}");
        drop(conns);
    }
}

/// The keys a client WATCHes count: watching more and more, it is evicted (Redis's
/// "client evicted due to watched key list").
#[test]
fn watched_keys_count_towards_the_limit() {
    for server in servers() {
        let what = format!("{:?}", server.kind);
        let mut ctl = control(&server);
        config_set(&mut ctl, "maxmemory-clients", "200000");
        let mut c = server.raw();
        let mut closed = false;
        for round in 0..1_000 {
            let keys: Vec<Vec<u8>> = (0..100)
                .map(|i| format!("key:{round}:{i}").into_bytes())
                .collect();
            let mut args: Vec<&[u8]> = vec![b"WATCH"];
            args.extend(keys.iter().map(Vec::as_slice));
            if c.try_send(&goblin_tests::encode(&args)).is_err() {
                closed = true;
                break;
            }
            match c.try_reply() {
                Ok(reply) => assert_eq!(reply, b"+OK\r\n", "{what}"),
                Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        assert!(closed, "{what}: 100,000 watched keys and still connected");
        assert_eq!(evicted(&mut ctl), 1, "{what}");
    }
}

/// CLIENT LIST shows its caller's arguments in `argv-mem` and counts them in `tot-mem`,
/// as redis-server does (so that a limit computed from a listing leaves the listing
/// client's command out of what the others may hold).
#[test]
fn the_callers_arguments_count_in_its_listing() {
    let argv_mem = |server: &Server| -> u64 {
        let mut c = named(server, "me");
        clients(&mut c, "argv-mem")
            .into_iter()
            .find(|(n, _)| n == "me")
            .map(|(_, m)| m)
            .expect("its own line")
    };
    let servers = servers();
    let (goblin, redis) = (argv_mem(&servers[0]), argv_mem(&servers[1]));
    assert_eq!(goblin, redis);
    assert_eq!(goblin, "CLIENTLIST".len() as u64);
}

/// A client past its output limit is closed for that, not evicted, even when its
/// replies also take the clients past `maxmemory-clients` (Redis's "avoid client
/// eviction when client is freed by output buffer limit"): the process is stopped while
/// two clients send a GET of a value over their limit, and the CLIENT LIST sent once it
/// goes on no longer shows them, as with redis-server, which runs commands in the order
/// they come. goblin-server's two threads are covered both ways: the lister on either,
/// the value on either shard, a GET client on each.
#[test]
fn a_client_past_its_output_limit_is_closed_not_evicted() {
    let mb = 1 << 20;
    let (obuf_limit, maxmemory_clients) = (3 * mb, 10 * mb);
    let value = obuf_limit + mb;
    let goblin = Server::goblin_threads(2);
    let redis = Server::redis();
    let mut cases = vec![(&redis, 0, "k".to_string())];
    for lister in 0..2 {
        for shard in 0..2 {
            cases.push((&goblin, lister, keys_on("k.", shard, 2, 1).remove(0)));
        }
    }
    for (server, lister, key) in cases {
        let what = format!("{:?}, lister on thread {lister}, {key}", server.kind);
        let mut listers = two_connections(server);
        let ctl = &mut listers[lister];
        assert_eq!(ctl.cmd(&[b"CLIENT", b"NO-EVICT", b"ON"]), b"+OK\r\n");
        assert_eq!(ctl.cmd(&[b"CONFIG", b"RESETSTAT"]), b"+OK\r\n");
        config_set(ctl, "maxmemory-clients", &maxmemory_clients.to_string());
        config_set(
            ctl,
            "client-output-buffer-limit",
            &format!("normal {obuf_limit} 0 0"),
        );
        let offset = value.to_string();
        let reply = ctl.cmd(&[b"SETRANGE", key.as_bytes(), offset.as_bytes(), b"v"]);
        assert_eq!(reply, format!(":{}\r\n", value + 1).into_bytes(), "{what}");
        // A client whose query buffer leaves less than one reply's room to the limit.
        let mut qbuf = named(server, "qbuf-client");
        let held = maxmemory_clients - value;
        half_echo(&mut qbuf, held + 1, held);
        wait_for_qbufs(ctl, &[("qbuf-client".to_string(), held as u64)], &what);
        let mut getters = two_connections(server);
        for (i, c) in getters.iter_mut().enumerate() {
            let name = format!("obuf-client{i}");
            assert_eq!(c.cmd(&[b"CLIENT", b"SETNAME", name.as_bytes()]), b"+OK\r\n");
        }
        server.signal("STOP");
        for c in &mut getters {
            c.send(&goblin_tests::encode(&[b"GET", key.as_bytes()]));
        }
        server.signal("CONT");
        assert_eq!(names(ctl), ["qbuf-client"], "{what}");
        assert_eq!(evicted(ctl), 0, "{what}");
        for c in &mut getters {
            let (_, closed) = c.read_to_close(Duration::from_secs(10));
            assert!(closed, "{what}");
        }
        assert_eq!(ctl.cmd(&[b"DEL", key.as_bytes()]), b":1\r\n");
        drop(qbuf);
        wait_gone(ctl, "qbuf-client");
    }
}

/// Two connections: on goblin-server's two threads, one on each.
fn two_connections(server: &Server) -> [Raw; 2] {
    match server.kind {
        Kind::Goblin => server.one_per_thread::<2>(),
        Kind::Redis => [server.raw(), server.raw()],
    }
}
