//! Redis Cluster mode against redis-server 7.0: clusters of three masters built with
//! `redis-cli --cluster create`, checked with `redis-cli --cluster check`, resharded with
//! `redis-cli --cluster reshard`, and talked to with raw connections (to see MOVED, ASK,
//! CROSSSLOT, TRYAGAIN as sent) and with the `redis` crate's cluster client.
//!
//! Every scenario is two tests: `<name>_redis` runs it on a redis-server cluster alone (its
//! own checks hold: the harness and the scenario are sound), `<name>_goblin` runs it on a
//! goblin-server cluster and on a redis-server cluster built the same way and compares
//! their transcripts entry by entry, node ids, ports, epochs, timestamps and counters
//! normalised (`goblin_tests::cluster::Norm`): every expected answer comes from the
//! redis-server run. On goblin-server a failed check of the scenario (a MOVED to the
//! wrong port, say) is reported with the comparison rather than stopping the run. Node `i` is the `i`-th by port in both clusters, and `redis-cli`
//! deals the slots alike to both, so a key lives on the same node index in each.
//!
//! `reshard_under_load_*` is the slow one (a thousand slots moved under writes).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use goblin_tests::claim::CLAIM_ORACLE;
use goblin_tests::cluster::{
    Cluster, HEALTHY_TIMEOUT, Reply, Transcript, ask, check_is_clean, err, expect, expect_prefix,
    label, links_paired, moved, parse, render, run_on,
};
use goblin_tests::cmd::scan_all;
use goblin_tests::keys::{SLOTS, slot};
use goblin_tests::reply::{bulk, info_field, int};
use goblin_tests::{Kind, StopOnDrop, show};

/// Nodes in every cluster.
const NODES: usize = 3;

const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";

// ---------------------------------------------------------------------------------------
// create_and_check

/// A fresh cluster: `--cluster check` clean, and every node's CLUSTER INFO (epochs and
/// message counters masked), INFO cluster, cluster CONFIG GETs and MYID; each node's log
/// says `Cluster state changed: ok`.
fn create_and_check(c: &Cluster) -> Transcript {
    let mut t = Transcript::on(c);
    let norm = c.norm();
    let out = c.check_output();
    t.check(check_is_clean(&out), || {
        format!("redis-cli --cluster check:\n{}", out.describe())
    });
    // redis-cli lists the nodes other than the one it asked in their dictionary order.
    let mut lines: Vec<String> = out
        .stdout
        .lines()
        .map(|l| norm.text(l.trim_end()))
        .filter(|l| !l.is_empty())
        .collect();
    lines.sort();
    t.push("redis-cli --cluster check (lines sorted)", lines.join("\n"));
    let n = c.len().to_string();
    for i in 0..c.len() {
        let mut raw = c.raw(i);
        let info = raw.cmd(&[b"CLUSTER", b"INFO"]);
        let text = String::from_utf8_lossy(&info).into_owned();
        for (field, want) in [
            ("cluster_state", "ok"),
            ("cluster_slots_assigned", "16384"),
            ("cluster_slots_ok", "16384"),
            ("cluster_slots_pfail", "0"),
            ("cluster_slots_fail", "0"),
            ("cluster_known_nodes", &n),
            ("cluster_size", &n),
        ] {
            t.check(info_field(&text, field) == Some(want), || {
                format!("node {i} CLUSTER INFO: {field} is not {want}:\n{text}")
            });
        }
        t.push(label(c, i, &[b"CLUSTER", b"INFO"]), norm.info(&info));
        ask(&mut t, c, &mut raw, i, &["INFO", "cluster"]);
        ask(
            &mut t,
            c,
            &mut raw,
            i,
            &["CONFIG", "GET", "cluster-enabled"],
        );
        ask(
            &mut t,
            c,
            &mut raw,
            i,
            &["CONFIG", "GET", "cluster-node-timeout"],
        );
        // Each node logged its state turning ok (what scripts and redis-rs's test
        // support wait for).
        let log = c.nodes()[i].log();
        t.check(log.contains("Cluster state changed: ok"), || {
            format!("node {i} did not log `Cluster state changed: ok`:\n{log}")
        });
        let myid = ask(&mut t, c, &mut raw, i, &["CLUSTER", "MYID"]);
        t.check_reply(
            &myid,
            &bulk(c.id(i).as_bytes()),
            format!("node{i}> CLUSTER MYID"),
        );
    }
    t
}

#[test]
fn create_and_check_redis() {
    run_on(Kind::Redis, NODES, create_and_check);
}

#[test]
fn create_and_check_goblin() {
    run_on(Kind::Goblin, NODES, create_and_check);
}

// ---------------------------------------------------------------------------------------
// shapes

/// The introspection replies, from every node: CLUSTER NODES, MYID, LINKS,
/// COUNT-FAILURE-REPORTS, SLOTS, SHARDS; then KEYSLOT, COUNTKEYSINSLOT and GETKEYSINSLOT
/// over a slot holding three keys.
fn shapes(c: &Cluster) -> Transcript {
    let mut t = Transcript::on(c);
    let norm = c.norm();
    let n = c.len();
    let tag = c.tag_on(0, "shape");
    let s0 = slot(tag.as_bytes());
    let keys: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|k| format!("{tag}{k}"))
        .collect();
    let mut raw0 = c.raw(0);
    for k in &keys {
        ask(&mut t, c, &mut raw0, 0, &["SET", k, "v"]);
    }
    let links_complete = c.wait_links(Duration::from_secs(10));
    t.check(links_complete, || {
        "some node lists fewer than a link to and a link from each other node in CLUSTER \
         LINKS"
            .to_string()
    });
    for i in 0..n {
        let mut raw = c.raw(i);
        let nodes = raw.cmd(&[b"CLUSTER", b"NODES"]);
        t.push(label(c, i, &[b"CLUSTER", b"NODES"]), norm.nodes(&nodes));
        // Each node logged its state turning ok (what scripts and redis-rs's test
        // support wait for).
        let log = c.nodes()[i].log();
        t.check(log.contains("Cluster state changed: ok"), || {
            format!("node {i} did not log `Cluster state changed: ok`:\n{log}")
        });
        let myid = ask(&mut t, c, &mut raw, i, &["CLUSTER", "MYID"]);
        t.check_reply(
            &myid,
            &bulk(c.id(i).as_bytes()),
            format!("node{i}> CLUSTER MYID"),
        );
        // MYSHARDID is Redis 7.2's (7.0 does not know it): on Goblin, a shard's name.
        if c.kind() == Kind::Goblin {
            let shard = raw.cmd(&[b"CLUSTER", b"MYSHARDID"]);
            let text = String::from_utf8_lossy(&shard).into_owned();
            let name = text
                .strip_prefix("$40\r\n")
                .and_then(|r| r.strip_suffix("\r\n"));
            t.check(
                name.is_some_and(|n| n.bytes().all(|b| b.is_ascii_hexdigit())),
                || format!("node{i}> CLUSTER MYSHARDID: not a 40-digit name: {text:?}"),
            );
        }
        let links = raw.cmd(&[b"CLUSTER", b"LINKS"]);
        t.push(label(c, i, &[b"CLUSTER", b"LINKS"]), norm.links(&links));
        t.check(!links_complete || links_paired(&links), || {
            format!(
                "node{i}> CLUSTER LINKS: not each node's link to, then its link from: {}",
                String::from_utf8_lossy(&links)
            )
        });
        for j in 0..n {
            ask(
                &mut t,
                c,
                &mut raw,
                i,
                &["CLUSTER", "COUNT-FAILURE-REPORTS", c.id(j)],
            );
        }
        let slots = ask(&mut t, c, &mut raw, i, &["CLUSTER", "SLOTS"]);
        let follows = slots_follow_plan(c, &slots);
        t.check(follows.is_ok(), || {
            format!("node{i}> CLUSTER SLOTS: {}", follows.unwrap_err())
        });
        let shards = raw.cmd(&[b"CLUSTER", b"SHARDS"]);
        t.push(label(c, i, &[b"CLUSTER", b"SHARDS"]), norm.shards(&shards));
    }
    for key in [
        &b"foo"[..],
        b"{user1000}.following",
        b"{user1000}.followers",
        b"foo{}{bar}",
        b"foo{{bar}}zap",
        b"foo{bar}{zap}",
        b"",
        b"{}",
        b"\xff\x00",
        tag.as_bytes(),
    ] {
        let reply = t.ask(c, &mut raw0, 0, &[b"CLUSTER", b"KEYSLOT", key]);
        t.check_reply(
            &reply,
            &int(slot(key) as i64),
            format!("CLUSTER KEYSLOT {}", show(key)),
        );
    }
    let s0s = s0.to_string();
    for i in 0..n {
        let mut raw = c.raw(i);
        let count = ask(
            &mut t,
            c,
            &mut raw,
            i,
            &["CLUSTER", "COUNTKEYSINSLOT", &s0s],
        );
        let want = if i == 0 { 3 } else { 0 };
        t.check_reply(
            &count,
            &int(want),
            format!("node{i}> CLUSTER COUNTKEYSINSLOT {s0}"),
        );
        for s in ["0", "16383"] {
            ask(&mut t, c, &mut raw, i, &["CLUSTER", "COUNTKEYSINSLOT", s]);
        }
    }
    let all = raw0.cmd(&[b"CLUSTER", b"GETKEYSINSLOT", s0s.as_bytes(), b"10"]);
    t.push(
        format!("node0> CLUSTER GETKEYSINSLOT {s0} 10 (sorted)"),
        norm.sorted(&all),
    );
    let want: Vec<Vec<u8>> = keys.iter().map(|k| k.clone().into_bytes()).collect();
    let mut got = bulk_items(&all);
    if let Some(got) = &mut got {
        got.sort();
    }
    t.check(got.as_ref() == Some(&want), || {
        format!("node0> CLUSTER GETKEYSINSLOT {s0} 10: {}", show(&all))
    });
    // Which two of the three is the server's own order: only how many.
    let two = raw0.cmd(&[b"CLUSTER", b"GETKEYSINSLOT", s0s.as_bytes(), b"2"]);
    let items = bulk_items(&two);
    t.check(
        items
            .as_ref()
            .is_some_and(|items| items.iter().all(|k| want.contains(k))),
        || format!("node0> CLUSTER GETKEYSINSLOT {s0} 2: {}", show(&two)),
    );
    t.push(
        format!("node0> CLUSTER GETKEYSINSLOT {s0} 2 (how many)"),
        match items {
            Some(items) => items.len().to_string(),
            None => c.render(&two),
        },
    );
    ask(
        &mut t,
        c,
        &mut raw0,
        0,
        &["CLUSTER", "GETKEYSINSLOT", &s0s, "0"],
    );
    ask(
        &mut t,
        c,
        &mut raw0,
        0,
        &["CLUSTER", "GETKEYSINSLOT", "1", "10"],
    );
    t
}

/// Every range of a CLUSTER SLOTS reply is served by the node redis-cli's plan dealt it
/// to, and the ranges cover every slot; else what is wrong.
fn slots_follow_plan(c: &Cluster, reply: &[u8]) -> Result<(), String> {
    let Reply::Array(Some(ranges)) = parse(reply) else {
        return Err(format!("not an array: {}", show(reply)));
    };
    let mut covered = 0;
    for range in &ranges {
        let text = render(range);
        let Reply::Array(Some(fields)) = range else {
            return Err(format!("range {text}"));
        };
        let (Some(Reply::Int(a)), Some(Reply::Int(b)), Some(Reply::Array(Some(master)))) =
            (fields.first(), fields.get(1), fields.get(2))
        else {
            return Err(format!("range {text}"));
        };
        let Some(Reply::Int(port)) = master.get(1) else {
            return Err(format!("range {text}"));
        };
        let (Ok(a), Ok(b)) = (usize::try_from(*a), usize::try_from(*b)) else {
            return Err(format!("range {text}"));
        };
        if a > b || b >= SLOTS {
            return Err(format!("range {text}"));
        }
        let owner = c.plan_owner(a);
        if i64::from(c.port(owner)) != *port || c.plan_owner(b) != owner {
            return Err(format!(
                "range {text}: redis-cli dealt slot {a} to port {}",
                c.port(owner)
            ));
        }
        covered += b - a + 1;
    }
    if covered == SLOTS {
        Ok(())
    } else {
        Err(format!("{covered} slots covered: {}", show(reply)))
    }
}

/// The items of an array of bulk strings; `None` when it is anything else.
fn bulk_items(reply: &[u8]) -> Option<Vec<Vec<u8>>> {
    match parse(reply) {
        Reply::Array(Some(items)) => items
            .into_iter()
            .map(|item| match item {
                Reply::Bulk(Some(b)) => Some(b),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

#[test]
fn shapes_redis() {
    run_on(Kind::Redis, NODES, shapes);
}

#[test]
fn shapes_goblin() {
    run_on(Kind::Goblin, NODES, shapes);
}

/// The error replies of CLUSTER subcommands given wrong arguments or asked what cannot
/// be done (none of them changes anything: the cluster is still healthy afterwards).
fn shape_errors(c: &Cluster) -> Transcript {
    let mut t = Transcript::on(c);
    let (id0, id1) = (c.id(0), c.id(1));
    let unknown = "0123456789012345678901234567890123456789";
    let own0 = (0..SLOTS).find(|&s| c.plan_owner(s) == 0).unwrap();
    let own1 = (0..SLOTS).find(|&s| c.plan_owner(s) == 1).unwrap();
    let lines = [
        format!("CLUSTER ADDSLOTS {own0}"),
        format!("CLUSTER ADDSLOTS {own1}"),
        format!("CLUSTER ADDSLOTS {own0} {own0}"),
        "CLUSTER ADDSLOTS 16384".into(),
        "CLUSTER ADDSLOTS -1".into(),
        "CLUSTER ADDSLOTS x".into(),
        "CLUSTER ADDSLOTS".into(),
        format!("CLUSTER ADDSLOTSRANGE {own0} {own0}"),
        "CLUSTER ADDSLOTSRANGE 5 1".into(),
        "CLUSTER ADDSLOTSRANGE 0 16384".into(),
        "CLUSTER ADDSLOTSRANGE 1".into(),
        format!("CLUSTER DELSLOTS {own0} {own0}"),
        "CLUSTER DELSLOTS 16384".into(),
        "CLUSTER DELSLOTSRANGE 1".into(),
        "CLUSTER KEYSLOT".into(),
        "CLUSTER KEYSLOT a b".into(),
        format!("CLUSTER SETSLOT {own0} bogus"),
        format!("CLUSTER SETSLOT 16384 node {id1}"),
        "CLUSTER SETSLOT x stable".into(),
        format!("CLUSTER SETSLOT {own0}"),
        format!("CLUSTER SETSLOT {own0} node"),
        format!("CLUSTER SETSLOT {own0} stable x"),
        format!("CLUSTER SETSLOT {own0} node {id1} extra"),
        format!("CLUSTER SETSLOT {own0} node {unknown}"),
        format!("CLUSTER SETSLOT {own0} migrating {unknown}"),
        format!("CLUSTER SETSLOT {own1} migrating {id1}"),
        format!("CLUSTER SETSLOT {own0} importing {id1}"),
        format!("CLUSTER FORGET {id0}"),
        "CLUSTER FORGET abc".into(),
        format!("CLUSTER FORGET {unknown}"),
        "CLUSTER FORGET".into(),
        "CLUSTER MEET 127.0.0.1 99999".into(),
        "CLUSTER MEET 127.0.0.1 abc".into(),
        "CLUSTER MEET 127.0.0.1".into(),
        "CLUSTER MEET 127.0.0.1 100 99999".into(),
        "CLUSTER COUNTKEYSINSLOT 16384".into(),
        "CLUSTER COUNTKEYSINSLOT -1".into(),
        "CLUSTER COUNTKEYSINSLOT x".into(),
        "CLUSTER COUNTKEYSINSLOT".into(),
        "CLUSTER COUNTKEYSINSLOT 5 6".into(),
        "CLUSTER GETKEYSINSLOT 16384 1".into(),
        "CLUSTER GETKEYSINSLOT 1 -1".into(),
        "CLUSTER GETKEYSINSLOT 1 x".into(),
        "CLUSTER GETKEYSINSLOT x 1".into(),
        "CLUSTER GETKEYSINSLOT 1".into(),
        "CLUSTER COUNT-FAILURE-REPORTS abc".into(),
        "CLUSTER COUNT-FAILURE-REPORTS".into(),
        "CLUSTER MYID x".into(),
        "CLUSTER NODES x".into(),
        "CLUSTER SLOTS x".into(),
        "CLUSTER SHARDS x".into(),
        "CLUSTER LINKS x".into(),
        "CLUSTER INFO x".into(),
        format!("CLUSTER REPLICATE {id0}"),
        "CLUSTER REPLICATE abc".into(),
        "CLUSTER REPLICAS abc".into(),
        "CLUSTER SLAVES abc".into(),
        "CLUSTER SET-CONFIG-EPOCH 5".into(),
        "CLUSTER FAILOVER".into(),
        "CLUSTER FAILOVER bogus".into(),
        "CLUSTER BOGUS".into(),
        "CLUSTER".into(),
        "CLUSTER RESET bogus".into(),
    ];
    let mut raw = c.raw(0);
    for line in &lines {
        let words: Vec<&str> = line.split(' ').collect();
        let reply = ask(&mut t, c, &mut raw, 0, &words);
        t.check(reply.starts_with(b"-"), || {
            format!("node0> {line}: {} (an error was expected)", show(&reply))
        });
    }
    // None of them changed anything.
    let healthy = c.try_wait_healthy(HEALTHY_TIMEOUT);
    t.check(healthy.is_ok(), || healthy.unwrap_err());
    let nodes = raw.cmd(&[b"CLUSTER", b"NODES"]);
    t.push("node0> CLUSTER NODES (afterwards)", c.norm().nodes(&nodes));
    t
}

#[test]
fn shapes_errors_redis() {
    run_on(Kind::Redis, NODES, shape_errors);
}

#[test]
fn shapes_errors_goblin() {
    run_on(Kind::Goblin, NODES, shape_errors);
}

// ---------------------------------------------------------------------------------------
// routing

/// From every node: a key it owns is served, one another node owns is redirected with
/// MOVED to that node's port; keys of two slots are CROSSSLOT; keys sharing a hash tag
/// work together; a transaction with a redirected command aborts; SELECT is refused;
/// keyless commands answer locally.
fn routing(c: &Cluster) -> Transcript {
    let mut t = Transcript::on(c);
    let n = c.len();
    let ok = b"+OK\r\n";
    for i in 0..n {
        let j = (i + 1) % n;
        let mut raw = c.raw(i);
        let r = &mut raw;
        let local = c.keys_on(i, "local", 1).remove(0);
        let remote = c.keys_on(j, "remote", 1).remove(0);
        let rs = slot(remote.as_bytes());
        let value = format!("v{i}");
        expect(&mut t, c, r, i, &["SET", &local, &value], ok);
        expect(&mut t, c, r, i, &["GET", &local], &bulk(value.as_bytes()));
        for cmd in [
            &["GET", &remote][..],
            &["SET", &remote, "x"],
            &["DEL", &remote],
            &["EXISTS", &remote],
            &["INCR", &remote],
            &["HSET", &remote, "f", "v"],
            &["LPUSH", &remote, "a"],
            &["EXPIRE", &remote, "10"],
            &["TYPE", &remote],
        ] {
            expect(&mut t, c, r, i, cmd, &moved(c, rs, j));
        }
        // Two keys of this node in two slots; one of this node and one of another.
        let pair = c.keys_on(i, "pair", 2);
        assert_ne!(slot(pair[0].as_bytes()), slot(pair[1].as_bytes()));
        for cmd in [
            &["MSET", &pair[0], "1", &pair[1], "2"][..],
            &["MGET", &pair[0], &pair[1]],
            &["DEL", &pair[0], &pair[1]],
            &["EXISTS", &pair[0], &pair[1]],
            &["MSET", &local, "1", &remote, "2"],
            &["MGET", &remote, &local],
            &["RENAME", &local, &remote],
        ] {
            expect(&mut t, c, r, i, cmd, &err(CROSSSLOT));
        }
        // Keys sharing a hash tag.
        let tag = c.tag_on(i, "tag");
        let (a, b, z) = (format!("{tag}a"), format!("{tag}b"), format!("{tag}z"));
        expect(&mut t, c, r, i, &["MSET", &a, "1", &b, "2"], ok);
        ask(&mut t, c, r, i, &["MGET", &a, &b, &z]);
        ask(&mut t, c, r, i, &["RENAME", &a, &z]);
        ask(&mut t, c, r, i, &["SUNIONSTORE", &a, &z]);
        expect(&mut t, c, r, i, &["DEL", &a, &b, &z], &int(2));
        let rtag = c.tag_on(j, "tag");
        let (ra, rb) = (format!("{rtag}a"), format!("{rtag}b"));
        let to = moved(c, slot(rtag.as_bytes()), j);
        expect(&mut t, c, r, i, &["MSET", &ra, "1", &rb, "2"], &to);
        // A transaction with a command for another node aborts; a local one runs.
        ask(&mut t, c, r, i, &["MULTI"]);
        ask(&mut t, c, r, i, &["SET", &local, "m"]);
        expect(&mut t, c, r, i, &["GET", &remote], &moved(c, rs, j));
        expect_prefix(&mut t, c, r, i, &["EXEC"], b"-EXECABORT");
        expect(&mut t, c, r, i, &["GET", &local], &bulk(value.as_bytes()));
        ask(&mut t, c, r, i, &["MULTI"]);
        ask(&mut t, c, r, i, &["SET", &local, "m"]);
        ask(&mut t, c, r, i, &["GET", &local]);
        ask(&mut t, c, r, i, &["EXEC"]);
        // SELECT.
        expect_prefix(&mut t, c, r, i, &["SELECT", "1"], b"-ERR");
        ask(&mut t, c, r, i, &["SELECT", "0"]);
        // Keyless commands answer here.
        for cmd in [
            &["PING"][..],
            &["ECHO", "hi"],
            &["DBSIZE"],
            &["KEYS", "*"],
            &["READONLY"],
            &["READWRITE"],
            &["ASKING"],
        ] {
            let reply = ask(&mut t, c, r, i, cmd);
            t.check(!reply.starts_with(b"-"), || {
                format!("node{i}> {}: {}", cmd.join(" "), show(&reply))
            });
        }
        let size = c.dbsize(i);
        t.check(size == 1, || {
            format!("node {i} holds {size} keys, not its one local key")
        });
    }
    t
}

#[test]
fn routing_redis() {
    run_on(Kind::Redis, NODES, routing);
}

#[test]
fn routing_goblin() {
    run_on(Kind::Goblin, NODES, routing);
}

// ---------------------------------------------------------------------------------------
// migration by hand

/// A slot moved by hand from node 0 to node 1, as `redis-cli --cluster reshard` does it:
/// SETSLOT IMPORTING on the destination and MIGRATING on the source, ASK for the keys
/// that are gone, MOVED without ASKING on the destination, TRYAGAIN for a multi-key
/// command whose keys are split, MIGRATE (one key, then KEYS), SETSLOT NODE everywhere.
fn migration(c: &Cluster) -> Transcript {
    let mut t = Transcript::on(c);
    let norm = c.norm();
    let (src, dst, other) = (0, 1, 2);
    let tag = c.tag_on(src, "mig");
    let s = slot(tag.as_bytes());
    let ss = s.to_string();
    let [k1, k2, k3, missing] = ["k1", "k2", "k3", "missing"].map(|k| format!("{tag}{k}"));
    let port = c.port(dst).to_string();
    let ask_dst = err(&format!("ASK {s} 127.0.0.1:{}", c.port(dst)));
    let (moved_src, moved_dst) = (moved(c, s, src), moved(c, s, dst));
    let ok = b"+OK\r\n";
    let tryagain = b"-TRYAGAIN";
    let mut a = c.raw(src);
    let mut b = c.raw(dst);
    let (a, b) = (&mut a, &mut b);
    for (k, v) in [(&k1, "v1"), (&k2, "v2"), (&k3, "v3")] {
        expect(&mut t, c, a, src, &["SET", k, v], ok);
    }
    let importing = ["CLUSTER", "SETSLOT", &ss, "IMPORTING", c.id(src)];
    expect(&mut t, c, b, dst, &importing, ok);
    let migrating = ["CLUSTER", "SETSLOT", &ss, "MIGRATING", c.id(dst)];
    expect(&mut t, c, a, src, &migrating, ok);
    for (node, raw) in [(src, &mut *a), (dst, &mut *b)] {
        let nodes = raw.cmd(&[b"CLUSTER", b"NODES"]);
        t.push(
            format!("node{node}> CLUSTER NODES (slot {s} open)"),
            norm.nodes(&nodes),
        );
    }
    // On the source: a missing key is asked for on the destination, a present one served.
    expect(&mut t, c, a, src, &["GET", &missing], &ask_dst);
    expect(&mut t, c, a, src, &["SET", &missing, "x"], &ask_dst);
    expect(&mut t, c, a, src, &["GET", &k1], &bulk(b"v1"));
    expect(
        &mut t,
        c,
        a,
        src,
        &["CLUSTER", "COUNTKEYSINSLOT", &ss],
        &int(3),
    );
    // On the destination: MOVED without ASKING, served with it (once).
    expect(&mut t, c, b, dst, &["GET", &k1], &moved_src);
    expect(&mut t, c, b, dst, &["ASKING"], ok);
    expect(&mut t, c, b, dst, &["GET", &k1], b"$-1\r\n");
    expect(&mut t, c, b, dst, &["GET", &k1], &moved_src);
    // MIGRATE one key.
    let one = ["MIGRATE", "127.0.0.1", &port, &k1, "0", "5000"];
    expect(&mut t, c, a, src, &one, ok);
    expect(&mut t, c, a, src, &["GET", &k1], &ask_dst);
    expect(&mut t, c, b, dst, &["GET", &k1], &moved_src);
    expect(&mut t, c, b, dst, &["ASKING"], ok);
    expect(&mut t, c, b, dst, &["GET", &k1], &bulk(b"v1"));
    // Keys split between the two: TRYAGAIN on both sides.
    expect(&mut t, c, b, dst, &["ASKING"], ok);
    expect_prefix(&mut t, c, b, dst, &["MGET", &k1, &k2], tryagain);
    expect_prefix(&mut t, c, a, src, &["MGET", &k1, &k2], tryagain);
    ask(&mut t, c, a, src, &["MGET", &k2, &k3]);
    // MIGRATE the rest with KEYS; a missing key is NOKEY.
    let keys = [
        "MIGRATE",
        "127.0.0.1",
        &port,
        "",
        "0",
        "5000",
        "KEYS",
        &k2,
        &k3,
    ];
    expect(&mut t, c, a, src, &keys, ok);
    let again = ["MIGRATE", "127.0.0.1", &port, &k2, "0", "5000"];
    expect(&mut t, c, a, src, &again, b"+NOKEY\r\n");
    expect(&mut t, c, b, dst, &["ASKING"], ok);
    ask(&mut t, c, b, dst, &["MGET", &k1, &k2, &k3]);
    expect(
        &mut t,
        c,
        a,
        src,
        &["CLUSTER", "COUNTKEYSINSLOT", &ss],
        &int(0),
    );
    expect(
        &mut t,
        c,
        b,
        dst,
        &["CLUSTER", "COUNTKEYSINSLOT", &ss],
        &int(3),
    );
    // Finish: the slot is the destination's, on every node.
    for node in [dst, src, other] {
        let mut raw = c.raw(node);
        let setslot = ["CLUSTER", "SETSLOT", &ss, "NODE", c.id(dst)];
        expect(&mut t, c, &mut raw, node, &setslot, ok);
    }
    let healthy = c.try_wait_healthy(HEALTHY_TIMEOUT);
    t.check(healthy.is_ok(), || healthy.unwrap_err());
    expect(&mut t, c, a, src, &["GET", &k1], &moved_dst);
    expect(&mut t, c, b, dst, &["GET", &k1], &bulk(b"v1"));
    ask(&mut t, c, b, dst, &["MGET", &k1, &k2, &k3]);
    let mut o = c.raw(other);
    expect(&mut t, c, &mut o, other, &["GET", &k2], &moved_dst);
    // The keys live on the destination only.
    expect(
        &mut t,
        c,
        a,
        src,
        &["CLUSTER", "COUNTKEYSINSLOT", &ss],
        &int(0),
    );
    expect(
        &mut t,
        c,
        b,
        dst,
        &["CLUSTER", "COUNTKEYSINSLOT", &ss],
        &int(3),
    );
    expect(&mut t, c, a, src, &["DBSIZE"], &int(0));
    expect(&mut t, c, b, dst, &["DBSIZE"], &int(3));
    for node in [src, dst, other] {
        let mut raw = c.raw(node);
        let slots = ask(&mut t, c, &mut raw, node, &["CLUSTER", "SLOTS"]);
        let text = c.render(&slots);
        t.check(
            text.contains(&format!("[:{s}, :{s}, [\"127.0.0.1\", port{dst}, ")),
            || format!("node{node}> CLUSTER SLOTS: slot {s} is not node {dst}'s alone: {text}"),
        );
    }
    t
}

/// Clients blocked on a key whose slot leaves their node are told where it went (MOVED),
/// as redis-server tells them: a BLPOP, and on Goblin a GOBLIN.CLAIM … BLOCK waiting for
/// the result of a claim held elsewhere.
fn blocked_redirect(c: &Cluster) -> Transcript {
    let mut t = Transcript::on(c);
    let (src, dst) = (0, 1);
    let tag = c.tag_on(src, "blk");
    let s = slot(tag.as_bytes());
    let ss = s.to_string();
    let list = format!("{tag}list");
    let (claim, result) = (format!("{tag}claim"), format!("{tag}result"));
    let ok = b"+OK\r\n";
    let mut a = c.raw(src);
    let mut b = c.raw(dst);
    let mut pop = c.raw(src);
    pop.send(&goblin_tests::encode(&[b"BLPOP", list.as_bytes(), b"0"]));
    let mut waiter = c.raw(src);
    if c.kind() == Kind::Goblin {
        let held = a.cmd(&[
            b"GOBLIN.CLAIM",
            claim.as_bytes(),
            result.as_bytes(),
            b"t1",
            b"60",
        ]);
        t.check_reply(&held, &bulk(b"CLAIMED"), "node0> GOBLIN.CLAIM (the owner)");
        waiter.send(&goblin_tests::encode(&[
            b"GOBLIN.CLAIM",
            claim.as_bytes(),
            result.as_bytes(),
            b"t2",
            b"60",
            b"BLOCK",
            b"0",
        ]));
    }
    // Both are waiting (CLIENT LIST shows their commands).
    let deadline = Instant::now() + Duration::from_secs(10);
    let want = if c.kind() == Kind::Goblin { 2 } else { 1 };
    while Instant::now() < deadline {
        let info = String::from_utf8_lossy(&a.cmd(&[b"INFO", b"clients"])).into_owned();
        if info_field(&info, "blocked_clients").is_some_and(|n| n == want.to_string()) {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    // The slot opens on both sides, as a reshard opens it.
    expect(
        &mut t,
        c,
        &mut b,
        dst,
        &["CLUSTER", "SETSLOT", &ss, "IMPORTING", c.id(src)],
        ok,
    );
    expect(
        &mut t,
        c,
        &mut a,
        src,
        &["CLUSTER", "SETSLOT", &ss, "MIGRATING", c.id(dst)],
        ok,
    );
    if c.kind() == Kind::Goblin {
        // The claim's key moves first, as a reshard would move it.
        let port = c.port(dst).to_string();
        let moved_keys = a.cmd(&[
            b"MIGRATE",
            b"127.0.0.1",
            port.as_bytes(),
            b"",
            b"0",
            b"5000",
            b"KEYS",
            claim.as_bytes(),
        ]);
        t.check_reply(&moved_keys, ok, "node0> MIGRATE the claim");
        // The claim is held on the target now: the source grants it to nobody, whichever
        // of its threads a connection lands on (a claim that may block runs as a plan
        // when its keys are on another thread), with BLOCK or without.
        for i in 0..8 {
            let mut other = c.raw(src);
            let token = format!("t{}", 10 + i);
            let mut args = vec![
                &b"GOBLIN.CLAIM"[..],
                claim.as_bytes(),
                result.as_bytes(),
                token.as_bytes(),
                b"60",
            ];
            if i % 2 == 0 {
                args.extend([&b"BLOCK"[..], b"100"]);
            }
            let reply = other.cmd(&args);
            t.check(
                reply.starts_with(b"-ASK ") || reply.starts_with(b"-TRYAGAIN "),
                || {
                    format!(
                        "node0> GOBLIN.CLAIM of a migrated claim (connection {i}): {:?}",
                        String::from_utf8_lossy(&reply)
                    )
                },
            );
        }
    }
    expect(
        &mut t,
        c,
        &mut b,
        dst,
        &["CLUSTER", "SETSLOT", &ss, "NODE", c.id(dst)],
        ok,
    );
    expect(
        &mut t,
        c,
        &mut a,
        src,
        &["CLUSTER", "SETSLOT", &ss, "NODE", c.id(dst)],
        ok,
    );
    let want = moved(c, s, dst);
    let reply = pop.reply();
    t.check_reply(&reply, &want, "node0> BLPOP, blocked as its slot left");
    if c.kind() == Kind::Goblin {
        let reply = waiter.reply();
        t.check_reply(
            &reply,
            &want,
            "node0> GOBLIN.CLAIM BLOCK, blocked as its slot left",
        );
        // Where it went, the claim is still held: the waiter, redirected, is not granted it.
        let mut b2 = c.raw(dst);
        let again = b2.cmd(&[
            b"GOBLIN.CLAIM",
            claim.as_bytes(),
            result.as_bytes(),
            b"t2",
            b"60",
        ]);
        t.check_reply(&again, b"$-1\r\n", "node1> GOBLIN.CLAIM after the redirect");
    }
    t
}

#[test]
fn blocked_redirect_redis() {
    run_on(Kind::Redis, NODES, blocked_redirect);
}

#[test]
fn blocked_redirect_goblin() {
    run_on(Kind::Goblin, NODES, blocked_redirect);
}

#[test]
fn migration_redis() {
    run_on(Kind::Redis, NODES, migration);
}

#[test]
fn migration_goblin() {
    run_on(Kind::Goblin, NODES, migration);
}

// ---------------------------------------------------------------------------------------
// the cluster client

fn query(
    t: &mut Transcript,
    con: &mut redis::cluster::ClusterConnection,
    what: &str,
    args: &[&str],
) -> redis::Value {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let v: redis::RedisResult<redis::Value> = cmd.query(con);
    let shown = match &v {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("error: {e}"),
    };
    t.push(format!("client> {what}"), shown);
    v.unwrap_or(redis::Value::Nil)
}

fn q(t: &mut Transcript, con: &mut redis::cluster::ClusterConnection, args: &[&str]) {
    query(t, con, &args.join(" "), args);
}

/// Replies whose order is the server's own, sorted.
fn q_sorted(t: &mut Transcript, con: &mut redis::cluster::ClusterConnection, args: &[&str]) {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let v: redis::RedisResult<Vec<String>> = cmd.query(con);
    let shown = match v {
        Ok(mut v) => {
            v.sort();
            format!("{v:?}")
        }
        Err(e) => format!("error: {e}"),
    };
    t.push(format!("client> {} (sorted)", args.join(" ")), shown);
}

/// The `redis` crate's cluster client over the three nodes: strings (keys everywhere,
/// INCR, MGET and MSET with hash tags), a hash, a list, a set, a sorted set, and
/// GOBLIN.CLAIM (on redis-server, its oracle script with EVAL).
fn client(c: &Cluster) -> Transcript {
    let mut t = Transcript::on(c);
    let cc = c.client();
    let mut con = cc
        .get_connection()
        .unwrap_or_else(|e| panic!("cluster client connection: {e}"));
    let con = &mut con;
    let mut written = 0;
    for i in 0..30 {
        let (k, v) = (format!("str{i}"), i.to_string());
        q(&mut t, con, &["SET", &k, &v]);
        q(&mut t, con, &["GET", &k]);
        written += 1;
    }
    for i in 0..6 {
        q(&mut t, con, &["INCR", &format!("counter{}", i % 3)]);
        q(&mut t, con, &["INCRBY", &format!("counter{}", i % 3), "10"]);
    }
    written += 3;
    q(
        &mut t,
        con,
        &["MSET", "{user1}:a", "1", "{user1}:b", "2", "{user1}:c", "3"],
    );
    q(
        &mut t,
        con,
        &["MGET", "{user1}:a", "{user1}:b", "{user1}:c", "{user1}:d"],
    );
    q(&mut t, con, &["APPEND", "{user1}:a", "x"]);
    q(&mut t, con, &["MGET", "{user1}:a", "{user1}:b"]);
    written += 3;
    q(
        &mut t,
        con,
        &["HSET", "hash", "f1", "v1", "f2", "v2", "n", "1"],
    );
    q(&mut t, con, &["HGET", "hash", "f1"]);
    q(&mut t, con, &["HINCRBY", "hash", "n", "5"]);
    q(&mut t, con, &["HLEN", "hash"]);
    q_sorted(&mut t, con, &["HGETALL", "hash"]);
    written += 1;
    q(&mut t, con, &["RPUSH", "list", "a", "b", "c"]);
    q(&mut t, con, &["LPUSH", "list", "z"]);
    q(&mut t, con, &["LRANGE", "list", "0", "-1"]);
    q(&mut t, con, &["LPOP", "list"]);
    q(&mut t, con, &["LLEN", "list"]);
    written += 1;
    q(&mut t, con, &["SADD", "set", "a", "b", "c", "a"]);
    q_sorted(&mut t, con, &["SMEMBERS", "set"]);
    q(&mut t, con, &["SISMEMBER", "set", "b"]);
    q(&mut t, con, &["SCARD", "set"]);
    q(&mut t, con, &["SADD", "{s}x", "1", "2", "3"]);
    q(&mut t, con, &["SADD", "{s}y", "2", "3", "4"]);
    q(&mut t, con, &["SINTERSTORE", "{s}both", "{s}x", "{s}y"]);
    q_sorted(&mut t, con, &["SMEMBERS", "{s}both"]);
    written += 4;
    q(&mut t, con, &["ZADD", "zset", "1", "a", "2", "b", "3", "c"]);
    q(&mut t, con, &["ZINCRBY", "zset", "5", "a"]);
    q(&mut t, con, &["ZRANGE", "zset", "0", "-1", "WITHSCORES"]);
    q(&mut t, con, &["ZSCORE", "zset", "b"]);
    q(&mut t, con, &["ZRANK", "zset", "a"]);
    written += 1;
    // GOBLIN.CLAIM on goblin-server; its oracle script on redis-server.
    let claim = |t: &mut Transcript, con: &mut redis::cluster::ClusterConnection, tok: &str| {
        let what = format!("GOBLIN.CLAIM {{job1}}:claim {{job1}}:result {tok} 30");
        match c.kind() {
            Kind::Goblin => query(
                t,
                con,
                &what,
                &["GOBLIN.CLAIM", "{job1}:claim", "{job1}:result", tok, "30"],
            ),
            Kind::Redis => query(
                t,
                con,
                &what,
                &[
                    "EVAL",
                    CLAIM_ORACLE,
                    "2",
                    "{job1}:claim",
                    "{job1}:result",
                    tok,
                    "30",
                ],
            ),
        }
    };
    let won = claim(&mut t, con, "tok");
    let want = redis::Value::BulkString(b"CLAIMED".to_vec());
    t.check(won == want, || format!("the first claim: {won:?}"));
    let lost = claim(&mut t, con, "tok2");
    t.check(lost == redis::Value::Nil, || {
        format!("the second claim: {lost:?}")
    });
    q(&mut t, con, &["SET", "{job1}:result", "done"]);
    let done = claim(&mut t, con, "tok3");
    let want = redis::Value::BulkString(b"done".to_vec());
    t.check(done == want, || {
        format!("the claim after the result: {done:?}")
    });
    q(&mut t, con, &["GET", "{job1}:claim"]);
    written += 2;
    // The keys are spread over every node, each on one.
    let sizes: Vec<i64> = (0..c.len()).map(|i| c.dbsize(i)).collect();
    t.check(
        sizes.iter().all(|&s| s > 0) && sizes.iter().sum::<i64>() == written,
        || format!("DBSIZE per node: {sizes:?}, {written} keys written"),
    );
    t.push("DBSIZE per node", format!("{sizes:?}"));
    t
}

#[test]
fn client_redis() {
    run_on(Kind::Redis, NODES, client);
}

#[test]
fn client_goblin() {
    run_on(Kind::Goblin, NODES, client);
}

// ---------------------------------------------------------------------------------------
// reshard under load (slow)

/// At most this many keys are written (then the writer waits for the reshard to end).
const LOAD_KEYS: u64 = 100_000;
/// Slots moved from node 0 to node 1.
const RESHARD_SLOTS: usize = 1000;

/// The `n`-th key the writer writes: every other one in one of the first 1000 slots
/// (which `redis-cli --cluster reshard` moves first), so that the writes meet the
/// migration.
fn load_key(n: u64, low_tags: &[String]) -> String {
    if n.is_multiple_of(2) {
        format!("load:{n}")
    } else {
        let tag = &low_tags[usize::try_from(n / 2).unwrap() % low_tags.len()];
        format!("{{{tag}}}:load:{n}")
    }
}

/// Slot numbers as ranges: `0-999` and `1500`, comma-separated.
fn ranges(mut slots: Vec<usize>) -> String {
    slots.sort_unstable();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < slots.len() {
        let start = slots[i];
        let mut end = start;
        while i + 1 < slots.len() && slots[i + 1] == end + 1 {
            i += 1;
            end = slots[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

/// A writer sets new keys continuously through the cluster client while `redis-cli
/// --cluster reshard` moves 1000 slots from node 0 to node 1; afterwards every key
/// written (each acknowledged) reads back, lives on exactly one node (SCAN of every
/// node), DBSIZE summed over the nodes equals the number written, and `--cluster check`
/// is clean.
fn reshard_under_load(c: &Cluster) -> Transcript {
    let mut t = Transcript::on(c);
    let low_tags: Vec<String> = (0..)
        .map(|n| format!("low{n}"))
        .filter(|k| slot(k.as_bytes()) < 1000)
        .take(200)
        .collect();
    let cc = c.client();
    let stop = AtomicBool::new(false);
    let written = AtomicU64::new(0);
    let (output, during) = thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        let writer = s.spawn(|| -> Result<(), String> {
            let mut con = cc.get_connection().map_err(|e| e.to_string())?;
            let deadline = Instant::now() + Duration::from_secs(600);
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
                if n >= LOAD_KEYS {
                    thread::sleep(Duration::from_millis(20));
                    continue;
                }
                let key = load_key(n, &low_tags);
                let mut tries = 0u32;
                loop {
                    let r: redis::RedisResult<()> =
                        redis::cmd("SET").arg(&key).arg(n).query(&mut con);
                    match r {
                        Ok(()) => break,
                        Err(e) if tries < 100 => {
                            tries += 1;
                            if tries == 1 || tries.is_multiple_of(20) {
                                eprintln!("writer: SET {key}: {e} (try {tries})");
                            }
                            thread::sleep(Duration::from_millis(50));
                        }
                        Err(e) => return Err(format!("SET {key} failed 100 times: {e}")),
                    }
                }
                n += 1;
                written.store(n, Ordering::SeqCst);
                // At most about 10 000 writes a second: load, not a flood that starves
                // the nodes of the machine's two cores.
                if n.is_multiple_of(10) {
                    thread::sleep(Duration::from_millis(1));
                }
            }
            Ok(())
        });
        // Let the writer get going, reshard, and write on a little after.
        let start = Instant::now();
        while written.load(Ordering::SeqCst) < 500 && start.elapsed() < Duration::from_secs(30) {
            thread::sleep(Duration::from_millis(10));
        }
        let before = written.load(Ordering::SeqCst);
        let began = Instant::now();
        let output = c.reshard(0, 1, RESHARD_SLOTS);
        let took = began.elapsed();
        let after = written.load(Ordering::SeqCst);
        eprintln!(
            "{}: redis-cli --cluster reshard of {RESHARD_SLOTS} slots took {took:?}",
            match c.kind() {
                Kind::Goblin => "goblin-server",
                Kind::Redis => "redis-server",
            }
        );
        thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::SeqCst);
        writer
            .join()
            .unwrap()
            .unwrap_or_else(|e| panic!("the writer failed: {e}"));
        (output, after - before)
    });
    let n = written.load(Ordering::SeqCst);
    eprintln!("{n} keys written, {during} of them during the reshard");
    t.check(during > 0, || {
        "no key was written during the reshard".to_string()
    });
    // redis-cli's moves: the slots, and from where to where.
    let mut moves: HashMap<String, Vec<usize>> = HashMap::new();
    for line in output.lines() {
        if let Some(rest) = line.trim().strip_prefix("Moving slot ") {
            let mut words = rest.split_whitespace();
            let slot: usize = words.next().and_then(|w| w.parse().ok()).unwrap();
            let route: Vec<&str> = words.take(4).collect();
            let route = c
                .norm()
                .text(&route.join(" "))
                .trim_end_matches(':')
                .to_string();
            moves.entry(route).or_default().push(slot);
        }
    }
    // Its plan (`Moving slot N from <id>`) and its moves (`… from <addr> to <addr>: …`).
    let total: usize = moves
        .iter()
        .filter(|(route, _)| route.contains(" to "))
        .map(|(_, slots)| slots.len())
        .sum();
    assert_eq!(total, RESHARD_SLOTS, "redis-cli reshard:\n{output}");
    let mut moves: Vec<(String, Vec<usize>)> = moves.into_iter().collect();
    moves.sort();
    for (route, slots) in moves {
        t.push(
            format!("redis-cli --cluster reshard: {route}"),
            ranges(slots),
        );
    }
    let healthy = c.try_wait_healthy(HEALTHY_TIMEOUT);
    t.push("healthy after the reshard", healthy.is_ok().to_string());
    t.check(healthy.is_ok(), || healthy.unwrap_err());
    // Every key reads back through the cluster client.
    let mut con = cc.get_connection().unwrap();
    let mut missing = Vec::new();
    for chunk_start in (0..n).step_by(1000) {
        let ids: Vec<u64> = (chunk_start..n.min(chunk_start + 1000)).collect();
        let mut pipe = redis::cluster::cluster_pipe();
        for &i in &ids {
            pipe.cmd("GET").arg(load_key(i, &low_tags));
        }
        let values: redis::RedisResult<Vec<Option<u64>>> = pipe.query(&mut con);
        match values {
            Ok(values) => {
                for (&i, v) in ids.iter().zip(values) {
                    if v != Some(i) {
                        missing.push(format!("{} = {v:?}", load_key(i, &low_tags)));
                    }
                }
            }
            Err(e) => missing.push(format!("reading keys {chunk_start}…: {e}")),
        }
    }
    t.push(
        "every key written reads back",
        missing.is_empty().to_string(),
    );
    t.check(missing.is_empty(), || {
        format!(
            "{} of {n} keys written do not read back, such as {:?}",
            missing.len(),
            &missing[..missing.len().min(10)]
        )
    });
    // Each on exactly one node.
    let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
    for i in 0..c.len() {
        let mut raw = c.raw(i);
        scan_all(&mut raw, &["COUNT", "1000"], |_, keys| {
            for k in keys {
                *seen.entry(k).or_default() += 1;
            }
        })
        .unwrap_or_else(|e| panic!("node {i} SCAN: {}", show(&e)));
    }
    let twice: Vec<String> = seen
        .iter()
        .filter(|&(_, &count)| count > 1)
        .map(|(k, _)| show(k))
        .take(10)
        .collect();
    let total = c.dbsize_total();
    let once = twice.is_empty() && seen.len() as u64 == n && total == i64::try_from(n).unwrap();
    t.push(
        "each key on exactly one node; DBSIZE summed = keys written",
        once.to_string(),
    );
    t.check(once, || {
        format!(
            "{n} keys written; {} distinct keys over every node's SCAN, DBSIZE summed {total}; \
             keys on more than one node: {twice:?}",
            seen.len()
        )
    });
    let mut raw = c.raw(0);
    ask(&mut t, c, &mut raw, 0, &["CLUSTER", "SLOTS"]);
    for i in 0..c.len() {
        let info = c.cmd(i, &[b"CLUSTER", b"INFO"]);
        t.push(label(c, i, &[b"CLUSTER", b"INFO"]), c.norm().info(&info));
    }
    t
}

#[test]
fn reshard_under_load_redis() {
    run_on(Kind::Redis, NODES, reshard_under_load);
}

#[test]
fn reshard_under_load_goblin() {
    run_on(Kind::Goblin, NODES, reshard_under_load);
}
