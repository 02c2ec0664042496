//! Redis Cluster with replicas against redis-server 7.0: three masters, each with one
//! replica, built with `redis-cli --cluster create … --cluster-replicas 1`
//! (`goblin_tests::cluster::Cluster::start_with_replicas`); the shapes of the
//! introspection replies with replicas, reads on replicas (READONLY, READWRITE, MOVED),
//! the `redis` crate's cluster client reading from replicas, automatic failover when a
//! master is killed (and the old master's return as a replica), manual failover
//! (CLUSTER FAILOVER, FORCE, TAKEOVER), PUBLISH and SPUBLISH carried to the other nodes
//! (and shard channels' MOVED), a replica with `cluster-replica-no-failover` that lets
//! its master's failure bring the cluster down, and replica migration to an orphaned
//! master (in a cluster where master 0 has a second replica, added with `redis-cli
//! --cluster add-node … --cluster-slave`).
//!
//! Every scenario is two tests, as in `cluster.rs`: `<name>_redis` runs it on a
//! redis-server cluster alone (its own checks hold), `<name>_goblin` runs it on a
//! goblin-server cluster and on a redis-server cluster built the same way and compares
//! their transcripts entry by entry, ids, ports, epochs, offsets and timings normalised:
//! every expected answer comes from the redis-server run. Node `k < 3` is the `k`-th
//! master by port and node `3 + k` its replica, in both clusters (and, in the replica
//! migration's clusters, node 6 master 0's second replica).
//!
//! What depends on timing (how long an election takes, when gossip reaches a node) is
//! polled for, with a bound, and only its outcome recorded ("node3 is master: true").

use std::time::{Duration, Instant};

use goblin_tests::cluster::{
    Cluster, NodeLine, Reply, Role, Transcript, ask, check_is_clean, err, expect, expect_prefix,
    label, moved, parse, poll, render, run_on_built, run_on_replicas,
};
use goblin_tests::keys::{SLOTS, slot};
use goblin_tests::reply::{array, bulk, info_field, int};
use goblin_tests::{Kind, REPLY_TIMEOUT, Raw, encode, show};

/// Masters in every cluster.
const MASTERS: usize = 3;
/// Replicas of each master.
const REPLICAS: usize = 1;
/// How long a failover (a master killed: its failure noticed after the node timeout of
/// five seconds, agreed, and its replica elected) may take.
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(30);
/// How long gossip may take to bring every node's view in line once something changed.
const GOSSIP_TIMEOUT: Duration = Duration::from_secs(20);
/// How often a condition is polled.
const EVERY: Duration = Duration::from_millis(100);

/// Master `k`'s replica (node `MASTERS + k`).
fn replica(k: usize) -> usize {
    MASTERS + k
}

/// The harness ordered the nodes as [`replica`] says.
fn assume_layout(c: &Cluster) {
    for k in 0..MASTERS {
        assert_eq!(c.planned_master_of(k), None, "node {k} is not a master");
        assert_eq!(
            c.planned_replicas_of(k),
            [replica(k)],
            "master {k}'s replicas"
        );
    }
}

/// Records a condition polled for (`what: true/false`) and checks it held; `Err`'s text
/// is the failure message.
fn outcome(t: &mut Transcript, what: &str, result: Result<Duration, String>) {
    t.push(what, result.is_ok().to_string());
    if let Ok(took) = &result {
        eprintln!("{what}: after {took:?}");
    }
    t.check(result.is_ok(), || {
        format!("{what}: {}", result.unwrap_err())
    });
}

/// Records node `i`'s CLUSTER NODES, normalised.
fn push_nodes(t: &mut Transcript, c: &Cluster, i: usize, note: &str) {
    let reply = c.cmd(i, &[b"CLUSTER", b"NODES"]);
    let what = label(c, i, &[b"CLUSTER", b"NODES"]);
    let what = if note.is_empty() {
        what
    } else {
        format!("{what} {note}")
    };
    t.push(what, c.norm().nodes(&reply));
}

/// The slot ranges of a CLUSTER NODES line as it writes them: `a-b`, or `a` alone.
fn ranges_text(ranges: &[(u16, u16)]) -> Vec<String> {
    ranges
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect()
}

/// What a node's line in CLUSTER NODES should say.
#[derive(Clone, Copy, Debug)]
enum Want {
    /// A master, connected, not failing, serving the slots `redis-cli` dealt node `.0`.
    Master(usize),
    /// A replica of node `.0`, connected, not failing, no slots.
    ReplicaOf(usize),
    /// A master flagged `fail`, no slots (one that was killed and lost them to its
    /// replica).
    FailedMaster,
    /// A master flagged `fail` that still has the slots `redis-cli` dealt node `.0` (one
    /// that was killed and that no replica replaced).
    DownMaster(usize),
    /// A replica of node `.0` flagged `fail`, no slots (one that was killed).
    FailedReplicaOf(usize),
}

/// Whether node `from`'s CLUSTER NODES says of every node what `want` (by node index)
/// says, `myself` on its own line alone; else what differs.
fn view_is(c: &Cluster, from: usize, want: &[Want]) -> Result<(), String> {
    let lines = c.cluster_nodes(from)?;
    if lines.len() != c.len() {
        return Err(format!(
            "node {from} lists {} nodes, not {}: {lines:?}",
            lines.len(),
            c.len()
        ));
    }
    for (j, w) in want.iter().enumerate() {
        let Some(line) = lines.iter().find(|l| l.id == c.id(j)) else {
            return Err(format!("node {from} does not list node {j}"));
        };
        let bad = |why: &str| Err(format!("node {from} says of node {j} ({why}): {line:?}"));
        if line.is_myself() != (j == from) {
            return bad("myself flag");
        }
        let failing = line.has("fail") || line.has("fail?");
        match *w {
            Want::Master(of) => {
                if !line.is_master() || failing || line.link != "connected" {
                    return bad("not a connected, sound master");
                }
                if line.slots != ranges_text(&c.plan(of)) {
                    return bad(&format!("not serving node {of}'s slots {:?}", c.plan(of)));
                }
            }
            Want::ReplicaOf(m) => {
                if !line.is_replica()
                    || failing
                    || line.link != "connected"
                    || line.master.as_deref() != Some(c.id(m))
                    || !line.slots.is_empty()
                {
                    return bad(&format!("not a connected replica of node {m}"));
                }
            }
            Want::FailedMaster => {
                if !line.is_master() || !line.is_failed() || !line.slots.is_empty() {
                    return bad("not a failed master without slots");
                }
            }
            Want::DownMaster(of) => {
                if !line.is_master() || !line.is_failed() {
                    return bad("not a failed master");
                }
                if line.slots != ranges_text(&c.plan(of)) {
                    return bad(&format!("not keeping node {of}'s slots {:?}", c.plan(of)));
                }
            }
            Want::FailedReplicaOf(m) => {
                if !line.is_replica()
                    || !line.is_failed()
                    || line.master.as_deref() != Some(c.id(m))
                    || !line.slots.is_empty()
                {
                    return bad(&format!("not a failed replica of node {m}"));
                }
            }
        }
    }
    Ok(())
}

/// Whether every running node's view is `want` ([`view_is`]) and every running node
/// says `cluster_state:ok`.
fn every_view_is(c: &Cluster, want: &[Want]) -> Result<(), String> {
    for i in (0..c.len()).filter(|&i| c.is_running(i)) {
        view_is(c, i, want)?;
        let info = c.cluster_info(i);
        if info_field(&info, "cluster_state") != Some("ok") {
            return Err(format!("node {i} CLUSTER INFO:\n{info}"));
        }
    }
    Ok(())
}

/// The layout of a fresh cluster: node `k` master of its dealt slots, node `3 + k` its
/// replica.
fn fresh_layout() -> Vec<Want> {
    let mut want: Vec<Want> = (0..MASTERS).map(Want::Master).collect();
    want.extend((0..MASTERS).map(Want::ReplicaOf));
    want
}

/// Whether node `i`'s link to its master is up.
fn link_up(c: &Cluster, i: usize) -> Result<(), String> {
    let info = c.info_replication(i);
    if info_field(&info, "master_link_status") == Some("up") {
        Ok(())
    } else {
        Err(format!("node {i} INFO replication:\n{info}"))
    }
}

/// The fields of a RESP2 map (a flat array of key-value pairs) by key.
fn field<'a>(map: &'a Reply, key: &str) -> Option<&'a Reply> {
    let Reply::Array(Some(items)) = map else {
        return None;
    };
    items.chunks(2).find_map(|pair| match pair {
        [Reply::Bulk(Some(k)), v] if k == key.as_bytes() => Some(v),
        _ => None,
    })
}

fn bulk_text(r: Option<&Reply>) -> Option<String> {
    match r {
        Some(Reply::Bulk(Some(b))) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

/// Whether a CLUSTER SLOTS reply lists every slot, each range with its master then its
/// replicas as `shards` says (`(master, replicas)` by the index of the node `redis-cli`
/// dealt the slots to): ip, port and id of each; else what is wrong.
fn slots_are(c: &Cluster, reply: &[u8], shards: &[(usize, Vec<usize>)]) -> Result<(), String> {
    let Reply::Array(Some(ranges)) = parse(reply) else {
        return Err(format!("not an array: {}", show(reply)));
    };
    let mut covered = 0;
    for range in &ranges {
        let Reply::Array(Some(fields)) = range else {
            return Err(format!("range {}", render(range)));
        };
        let (Some(Reply::Int(a)), Some(Reply::Int(b))) = (fields.first(), fields.get(1)) else {
            return Err(format!("range {}", render(range)));
        };
        let (Ok(a), Ok(b)) = (usize::try_from(*a), usize::try_from(*b)) else {
            return Err(format!("range {}", render(range)));
        };
        if a > b || b >= SLOTS {
            return Err(format!("range {}", render(range)));
        }
        let owner = c.plan_owner(a);
        if c.plan_owner(b) != owner {
            return Err(format!("range {a}-{b} spans two masters' slots"));
        }
        let (master, replicas) = &shards[owner];
        let want: Vec<usize> = std::iter::once(*master).chain(replicas.clone()).collect();
        let nodes = &fields[2..];
        if nodes.len() != want.len() {
            return Err(format!(
                "range {a}-{b}: {} nodes, not {} (master then replicas): {}",
                nodes.len(),
                want.len(),
                render(range)
            ));
        }
        // The master first; replicas in any order.
        let mut got: Vec<usize> = Vec::new();
        for node in nodes {
            let Reply::Array(Some(n)) = node else {
                return Err(format!("range {a}-{b}: {}", render(range)));
            };
            let (Some(ip), Some(Reply::Int(port)), Some(id)) =
                (bulk_text(n.first()), n.get(1), bulk_text(n.get(2)))
            else {
                return Err(format!("range {a}-{b}: {}", render(range)));
            };
            let Some(i) = c.index_of(&id) else {
                return Err(format!("range {a}-{b}: unknown id {id}"));
            };
            if ip != "127.0.0.1" || i64::from(c.port(i)) != *port {
                return Err(format!("range {a}-{b}: node {i} as {ip}:{port}"));
            }
            got.push(i);
        }
        if got[0] != want[0] {
            return Err(format!(
                "range {a}-{b}: master node {}, not node {}",
                got[0], want[0]
            ));
        }
        let (mut g, mut w) = (got[1..].to_vec(), want[1..].to_vec());
        g.sort_unstable();
        w.sort_unstable();
        if g != w {
            return Err(format!("range {a}-{b}: replicas {g:?}, not {w:?}"));
        }
        covered += b - a + 1;
    }
    if covered == SLOTS {
        Ok(())
    } else {
        Err(format!("{covered} slots covered"))
    }
}

/// Whether a CLUSTER SHARDS reply has a shard for each of `shards` (by the index of the
/// node `redis-cli` dealt the slots to: `(master, replicas)`), with those slots, its
/// master (`role` `master`) and its replicas (`role` `replica`), every one `online`.
fn shards_are(c: &Cluster, reply: &[u8], shards: &[(usize, Vec<usize>)]) -> Result<(), String> {
    let Reply::Array(Some(items)) = parse(reply) else {
        return Err(format!("not an array: {}", show(reply)));
    };
    if items.len() != shards.len() {
        return Err(format!("{} shards, not {}", items.len(), shards.len()));
    }
    for shard in &items {
        let shown = render(shard);
        let Some(Reply::Array(Some(slots))) = field(shard, "slots") else {
            return Err(format!("no slots: {shown}"));
        };
        let ranges: Vec<(u16, u16)> = slots
            .chunks(2)
            .filter_map(|p| match p {
                [Reply::Int(a), Reply::Int(b)] => {
                    Some((u16::try_from(*a).ok()?, u16::try_from(*b).ok()?))
                }
                _ => None,
            })
            .collect();
        let Some(&(first, _)) = ranges.first() else {
            return Err(format!("no slot ranges: {shown}"));
        };
        let owner = c.plan_owner(usize::from(first));
        if ranges != c.plan(owner) {
            return Err(format!(
                "slots {ranges:?}, not node {owner}'s {:?}: {shown}",
                c.plan(owner)
            ));
        }
        let (master, replicas) = &shards[owner];
        let Some(Reply::Array(Some(nodes))) = field(shard, "nodes") else {
            return Err(format!("no nodes: {shown}"));
        };
        let mut want: Vec<(usize, &str)> = vec![(*master, "master")];
        want.extend(replicas.iter().map(|&r| (r, "replica")));
        want.sort_unstable();
        let mut got: Vec<(usize, String)> = Vec::new();
        for node in nodes {
            let id = bulk_text(field(node, "id")).unwrap_or_default();
            let Some(i) = c.index_of(&id) else {
                return Err(format!("unknown node {id:?}: {shown}"));
            };
            let role = bulk_text(field(node, "role")).unwrap_or_default();
            let health = bulk_text(field(node, "health")).unwrap_or_default();
            let port = field(node, "port");
            if health != "online" || port != Some(&Reply::Int(i64::from(c.port(i)))) {
                return Err(format!("node {i} is {health:?} on port {port:?}: {shown}"));
            }
            got.push((i, role));
        }
        got.sort();
        let want: Vec<(usize, String)> = want.into_iter().map(|(i, r)| (i, r.into())).collect();
        if got != want {
            return Err(format!("nodes {got:?}, not {want:?}"));
        }
    }
    Ok(())
}

/// The shards of a fresh cluster: master `k` and its replica.
fn fresh_shards() -> Vec<(usize, Vec<usize>)> {
    (0..MASTERS).map(|k| (k, vec![replica(k)])).collect()
}

/// Waits until every node lists each master's replica in CLUSTER SLOTS and calls it
/// `online` in CLUSTER SHARDS (redis-server does either only once it knows the replica
/// has replicated something: a replication offset other than 0).
fn replicas_listed(c: &Cluster, shards: &[(usize, Vec<usize>)]) -> Result<Duration, String> {
    poll(GOSSIP_TIMEOUT, EVERY, || {
        for i in 0..c.len() {
            let slots = c.try_cmd(i, &[b"CLUSTER", b"SLOTS"])?;
            slots_are(c, &slots, shards).map_err(|e| format!("node {i} CLUSTER SLOTS: {e}"))?;
            let reply = c.try_cmd(i, &[b"CLUSTER", b"SHARDS"])?;
            shards_are(c, &reply, shards).map_err(|e| format!("node {i} CLUSTER SHARDS: {e}"))?;
        }
        Ok(())
    })
    .map(|((), took)| took)
}

/// The value each key is written with: the key reversed.
fn value(key: &str) -> String {
    key.chars().rev().collect()
}

/// Writes `keys` through node `master` (SET key value), then `WAIT 1 5000` on the same
/// connection, which must count one replica: every write is on the replica too.
fn write_and_wait(t: &mut Transcript, c: &Cluster, master: usize, keys: &[String]) {
    let mut raw = c.raw(master);
    for k in keys {
        expect(t, c, &mut raw, master, &["SET", k, &value(k)], b"+OK\r\n");
    }
    expect(t, c, &mut raw, master, &["WAIT", "1", "5000"], &int(1));
}

/// Whether `log` has `line`; a check of the scenario.
fn check_log(t: &mut Transcript, c: &Cluster, node: usize, line: &str) {
    let log = c.nodes()[node].log();
    t.check(log.contains(line), || {
        format!(
            "node {node} did not log `{line}`; its last lines:\n{}",
            c.nodes()[node].log_tail(30)
        )
    });
}

/// `calls=` of `cmdstat_<name>` in node `i`'s INFO commandstats (0 when not listed).
fn command_calls(c: &Cluster, i: usize, name: &str) -> i64 {
    let reply = c.cmd(i, &[b"INFO", b"commandstats"]);
    let text = String::from_utf8_lossy(&reply).into_owned();
    info_field(&text, &format!("cmdstat_{name}"))
        .and_then(|v| v.split(',').find_map(|kv| kv.strip_prefix("calls=")))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A CLUSTER REPLICAS (SLAVES) reply lists exactly node `r`, as a replica of node `m`;
/// else what is wrong.
fn lists_replica(c: &Cluster, reply: &[u8], r: usize, m: usize) -> Result<(), String> {
    let Reply::Array(Some(items)) = parse(reply) else {
        return Err(format!("not an array: {}", show(reply)));
    };
    let lines: Vec<NodeLine> = items
        .iter()
        .map(|item| match item {
            Reply::Bulk(Some(b)) => goblin_tests::cluster::parse_nodes(&String::from_utf8_lossy(b)),
            other => Err(format!("not a bulk string: {}", render(other))),
        })
        .collect::<Result<Vec<Vec<NodeLine>>, String>>()?
        .into_iter()
        .flatten()
        .collect();
    match &lines[..] {
        [line]
            if line.id == c.id(r)
                && line.is_replica()
                && line.master.as_deref() == Some(c.id(m))
                && line.addr.starts_with(&format!("127.0.0.1:{}@", c.port(r))) =>
        {
            Ok(())
        }
        _ => Err(format!("not node {r}'s line alone: {}", show(reply))),
    }
}

// ---------------------------------------------------------------------------------------
// shapes

/// A fresh cluster of three masters and three replicas: `--cluster check` clean; from
/// every node, CLUSTER NODES (three `master`, three `slave <master-id>`), MYID, INFO,
/// SLOTS (each range: master, then replica), SHARDS (a master and a `replica`, both
/// `online`), INFO replication, REPLICAS of each master; SLAVES; then the errors of
/// REPLICAS and REPLICATE (which change nothing).
fn replica_shapes(c: &Cluster) -> Transcript {
    assume_layout(c);
    let mut t = Transcript::on(c);
    let norm = c.norm();
    // One key on each master, acknowledged by its replica: a replica is listed in CLUSTER
    // SLOTS, and `online` in CLUSTER SHARDS, once it has replicated something.
    for k in 0..MASTERS {
        write_and_wait(&mut t, c, k, &c.keys_on(k, "shape", 1));
    }
    let shards = fresh_shards();
    outcome(
        &mut t,
        "every node lists each master's replica in CLUSTER SLOTS and SHARDS",
        replicas_listed(c, &shards),
    );
    let out = c.check_output();
    t.check(check_is_clean(&out), || {
        format!("redis-cli --cluster check:\n{}", out.describe())
    });
    let checked = norm.check(&out.stdout);
    let lines: Vec<&str> = checked.lines().collect();
    for k in 0..MASTERS {
        let r = replica(k);
        let m_at = lines
            .iter()
            .position(|l| *l == format!("M: node{k} 127.0.0.1:port{k}"));
        t.check(
            m_at.is_some_and(|n| lines.get(n + 2) == Some(&"   1 additional replica(s)")),
            || format!("redis-cli --cluster check: master node{k} without one replica:\n{checked}"),
        );
        let s_at = lines
            .iter()
            .position(|l| *l == format!("S: node{r} 127.0.0.1:port{r}"));
        let replicates = format!("   replicates node{k}");
        t.check(
            s_at.is_some_and(|n| {
                lines.get(n + 1) == Some(&"   slots: (0 slots) slave")
                    && lines.get(n + 2) == Some(&replicates.as_str())
            }),
            || format!("redis-cli --cluster check: node{r} not node{k}'s replica:\n{checked}"),
        );
    }
    t.push("redis-cli --cluster check (node blocks sorted)", checked);
    let want = fresh_layout();
    let (n, masters) = (c.len().to_string(), MASTERS.to_string());
    for i in 0..c.len() {
        let mut raw = c.raw(i);
        push_nodes(&mut t, c, i, "");
        let view = view_is(c, i, &want);
        t.check(view.is_ok(), || {
            format!("CLUSTER NODES: {}", view.unwrap_err())
        });
        let myid = ask(&mut t, c, &mut raw, i, &["CLUSTER", "MYID"]);
        t.check_reply(
            &myid,
            &bulk(c.id(i).as_bytes()),
            format!("node{i}> CLUSTER MYID"),
        );
        let info = raw.cmd(&[b"CLUSTER", b"INFO"]);
        let text = String::from_utf8_lossy(&info).into_owned();
        for (field, want) in [
            ("cluster_state", "ok"),
            ("cluster_slots_assigned", "16384"),
            ("cluster_slots_ok", "16384"),
            ("cluster_known_nodes", n.as_str()),
            ("cluster_size", masters.as_str()),
        ] {
            t.check(info_field(&text, field) == Some(want), || {
                format!("node {i} CLUSTER INFO: {field} is not {want}:\n{text}")
            });
        }
        t.push(label(c, i, &[b"CLUSTER", b"INFO"]), norm.info(&info));
        let slots = ask(&mut t, c, &mut raw, i, &["CLUSTER", "SLOTS"]);
        let ok = slots_are(c, &slots, &shards);
        t.check(ok.is_ok(), || {
            format!("node{i}> CLUSTER SLOTS: {}", ok.unwrap_err())
        });
        let reply = raw.cmd(&[b"CLUSTER", b"SHARDS"]);
        t.push(label(c, i, &[b"CLUSTER", b"SHARDS"]), norm.shards(&reply));
        let ok = shards_are(c, &reply, &shards);
        t.check(ok.is_ok(), || {
            format!("node{i}> CLUSTER SHARDS: {}", ok.unwrap_err())
        });
        let repl = c.info_replication(i);
        t.push(
            format!("node{i}> INFO replication (roles, links)"),
            norm.replication(&repl),
        );
        if i < MASTERS {
            let slave0 = info_field(&repl, "slave0").unwrap_or("");
            let port = format!("port={}", c.port(replica(i)));
            t.check(
                info_field(&repl, "role") == Some("master")
                    && info_field(&repl, "connected_slaves") == Some("1")
                    && slave0.split(',').any(|kv| kv == port)
                    && slave0.split(',').any(|kv| kv == "state=online"),
                || format!("node {i} INFO replication:\n{repl}"),
            );
        } else {
            let master = c.port(i - MASTERS).to_string();
            t.check(
                info_field(&repl, "role") == Some("slave")
                    && info_field(&repl, "master_host") == Some("127.0.0.1")
                    && info_field(&repl, "master_port") == Some(master.as_str())
                    && info_field(&repl, "master_link_status") == Some("up"),
                || format!("node {i} INFO replication:\n{repl}"),
            );
        }
        for k in 0..MASTERS {
            let args: [&[u8]; 3] = [b"CLUSTER", b"REPLICAS", c.id(k).as_bytes()];
            let reply = raw.cmd(&args);
            t.push(label(c, i, &args), norm.replicas(&reply));
            let ok = lists_replica(c, &reply, replica(k), k);
            t.check(ok.is_ok(), || {
                format!("node{i}> CLUSTER REPLICAS node{k}: {}", ok.unwrap_err())
            });
        }
    }
    // SLAVES, the old name of REPLICAS.
    for i in [0, replica(1)] {
        let mut raw = c.raw(i);
        for k in 0..MASTERS {
            let args: [&[u8]; 3] = [b"CLUSTER", b"SLAVES", c.id(k).as_bytes()];
            let reply = raw.cmd(&args);
            t.push(label(c, i, &args), norm.replicas(&reply));
            let ok = lists_replica(c, &reply, replica(k), k);
            t.check(ok.is_ok(), || {
                format!("node{i}> CLUSTER SLAVES node{k}: {}", ok.unwrap_err())
            });
        }
    }
    // Errors, which change nothing.
    let unknown = "0123456789012345678901234567890123456789";
    let not_master = err("ERR The specified node is not a master");
    let unknown_node = err(&format!("ERR Unknown node {unknown}"));
    let myself = err("ERR Can't replicate myself");
    let only_master = err("ERR I can only replicate a master, not a replica.");
    let not_empty = err("ERR To set a master the node must be empty and without assigned slots.");
    let (r0, r1, r2) = (replica(0), replica(1), replica(2));
    let mut m0 = c.raw(0);
    let m = &mut m0;
    expect(
        &mut t,
        c,
        m,
        0,
        &["CLUSTER", "REPLICAS", c.id(r0)],
        &not_master,
    );
    expect(
        &mut t,
        c,
        m,
        0,
        &["CLUSTER", "SLAVES", c.id(r1)],
        &not_master,
    );
    expect(
        &mut t,
        c,
        m,
        0,
        &["CLUSTER", "REPLICAS", unknown],
        &unknown_node,
    );
    expect_prefix(&mut t, c, m, 0, &["CLUSTER", "REPLICAS"], b"-ERR");
    expect(&mut t, c, m, 0, &["CLUSTER", "REPLICATE", c.id(0)], &myself);
    expect(
        &mut t,
        c,
        m,
        0,
        &["CLUSTER", "REPLICATE", c.id(r1)],
        &only_master,
    );
    expect(
        &mut t,
        c,
        m,
        0,
        &["CLUSTER", "REPLICATE", c.id(1)],
        &not_empty,
    );
    expect(
        &mut t,
        c,
        m,
        0,
        &["CLUSTER", "REPLICATE", unknown],
        &unknown_node,
    );
    let mut s0 = c.raw(r0);
    let s = &mut s0;
    expect(
        &mut t,
        c,
        s,
        r0,
        &["CLUSTER", "REPLICATE", c.id(r0)],
        &myself,
    );
    expect(
        &mut t,
        c,
        s,
        r0,
        &["CLUSTER", "REPLICATE", c.id(r2)],
        &only_master,
    );
    expect(
        &mut t,
        c,
        s,
        r0,
        &["CLUSTER", "REPLICATE", unknown],
        &unknown_node,
    );
    expect_prefix(&mut t, c, s, r0, &["CLUSTER", "REPLICATE"], b"-ERR");
    let extra = ["CLUSTER", "REPLICATE", c.id(0), "x"];
    expect_prefix(&mut t, c, s, r0, &extra, b"-ERR");
    // Replicating the master it replicates already: OK, nothing changes.
    expect(
        &mut t,
        c,
        s,
        r0,
        &["CLUSTER", "REPLICATE", c.id(0)],
        b"+OK\r\n",
    );
    let healthy = c.try_wait_healthy(GOSSIP_TIMEOUT);
    t.push("healthy afterwards", healthy.is_ok().to_string());
    t.check(healthy.is_ok(), || healthy.unwrap_err());
    outcome(
        &mut t,
        "every node's view as before",
        poll(GOSSIP_TIMEOUT, EVERY, || every_view_is(c, &want)).map(|(_, d)| d),
    );
    t
}

#[test]
fn replica_shapes_redis() {
    run_on_replicas(Kind::Redis, MASTERS, REPLICAS, replica_shapes);
}

#[test]
fn replica_shapes_goblin() {
    run_on_replicas(Kind::Goblin, MASTERS, REPLICAS, replica_shapes);
}

// ---------------------------------------------------------------------------------------
// reads and writes

/// Keys written through each master (WAIT counts its replica); on the replica, without
/// READONLY, every command on them is MOVED to the master; after READONLY reads are
/// served and writes still MOVED; a key of another master's slot is MOVED to that
/// master; WAIT is refused; READWRITE restores the redirections. Then the `redis`
/// crate's cluster client reading from replicas: reads served by the replicas (INFO
/// commandstats), writes by the masters, every value read back.
fn replica_reads(c: &Cluster) -> Transcript {
    assume_layout(c);
    let mut t = Transcript::on(c);
    let ok = b"+OK\r\n";
    let mut written: Vec<String> = Vec::new();
    for k in 0..MASTERS {
        let r = replica(k);
        let other = (k + 1) % MASTERS;
        let keys = c.keys_on(k, "rw", 3);
        let tag = c.tag_on(k, "rwtag");
        let (ta, tb, missing) = (
            format!("{tag}a"),
            format!("{tag}b"),
            format!("{tag}missing"),
        );
        let mut m = c.raw(k);
        for key in &keys {
            expect(&mut t, c, &mut m, k, &["SET", key, &value(key)], ok);
        }
        expect(&mut t, c, &mut m, k, &["MSET", &ta, "1", &tb, "2"], ok);
        expect(&mut t, c, &mut m, k, &["WAIT", "1", "5000"], &int(1));
        written.extend(keys.iter().cloned());
        let to_master = |key: &str| moved(c, slot(key.as_bytes()), k);
        let mut raw = c.raw(r);
        let s = &mut raw;
        // Without READONLY, a replica sends every command on a key to its master.
        expect(&mut t, c, s, r, &["GET", &keys[0]], &to_master(&keys[0]));
        expect(&mut t, c, s, r, &["EXISTS", &keys[1]], &to_master(&keys[1]));
        expect(
            &mut t,
            c,
            s,
            r,
            &["SET", &keys[0], "x"],
            &to_master(&keys[0]),
        );
        // READONLY: reads of its master's slots are served here.
        expect(&mut t, c, s, r, &["READONLY"], ok);
        for key in &keys {
            expect(&mut t, c, s, r, &["GET", key], &bulk(value(key).as_bytes()));
        }
        expect(
            &mut t,
            c,
            s,
            r,
            &["MGET", &ta, &tb, &missing],
            b"*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n",
        );
        expect(&mut t, c, s, r, &["EXISTS", &keys[2]], &int(1));
        let len = i64::try_from(keys[0].len()).unwrap();
        expect(&mut t, c, s, r, &["STRLEN", &keys[0]], &int(len));
        expect(&mut t, c, s, r, &["TYPE", &keys[0]], b"+string\r\n");
        expect(&mut t, c, s, r, &["GET", &missing], b"$-1\r\n");
        // Writes still go to the master.
        expect(
            &mut t,
            c,
            s,
            r,
            &["SET", &keys[0], "x"],
            &to_master(&keys[0]),
        );
        expect(&mut t, c, s, r, &["DEL", &keys[1]], &to_master(&keys[1]));
        expect(&mut t, c, s, r, &["INCR", &keys[2]], &to_master(&keys[2]));
        expect(
            &mut t,
            c,
            s,
            r,
            &["MSET", &ta, "x", &tb, "y"],
            &to_master(&ta),
        );
        // A key of another master's slots: to that master, READONLY or not.
        let foreign = c.keys_on(other, "foreign", 1).remove(0);
        let to_other = moved(c, slot(foreign.as_bytes()), other);
        expect(&mut t, c, s, r, &["GET", &foreign], &to_other);
        // Keyless commands answer here; WAIT does not, on a replica.
        expect(&mut t, c, s, r, &["DBSIZE"], &int(5));
        expect_prefix(
            &mut t,
            c,
            s,
            r,
            &["WAIT", "0", "0"],
            b"-ERR WAIT cannot be used with replica instances.",
        );
        // READWRITE: redirected again.
        expect(&mut t, c, s, r, &["READWRITE"], ok);
        expect(&mut t, c, s, r, &["GET", &keys[0]], &to_master(&keys[0]));
        // The replica changed nothing: the master has every value still.
        for key in &keys {
            expect(
                &mut t,
                c,
                &mut m,
                k,
                &["GET", key],
                &bulk(value(key).as_bytes()),
            );
        }
        expect(&mut t, c, &mut m, k, &["DBSIZE"], &int(5));
    }

    // The cluster client, reading from replicas. It learns them from CLUSTER SLOTS,
    // which lists a replica once it has replicated something.
    outcome(
        &mut t,
        "every node lists each master's replica in CLUSTER SLOTS and SHARDS",
        replicas_listed(c, &fresh_shards()),
    );
    for i in 0..c.len() {
        let reply = c.cmd(i, &[b"CONFIG", b"RESETSTAT"]);
        t.check_reply(&reply, ok, format!("node{i}> CONFIG RESETSTAT"));
    }
    let cc = c.client_reading_replicas();
    let mut con = cc
        .get_connection()
        .unwrap_or_else(|e| panic!("cluster client connection: {e}"));
    let mut gets: i64 = 0;
    let mut get = |t: &mut Transcript, con: &mut redis::cluster::ClusterConnection, key: &str| {
        let v: redis::RedisResult<Option<String>> = redis::cmd("GET").arg(key).query(con);
        t.push(format!("client> GET {key}"), format!("{v:?}"));
        t.check(matches!(&v, Ok(Some(s)) if *s == value(key)), || {
            format!("client> GET {key}: {v:?}, expected {:?}", value(key))
        });
        gets += 1;
    };
    for key in &written {
        get(&mut t, &mut con, key);
    }
    // Writes through the client go to the masters; a write and WAIT on each master
    // after them makes sure its replica has them (the stream is in order).
    let new_keys: Vec<String> = (0..9).map(|n| format!("client{n}")).collect();
    for key in &new_keys {
        let v: redis::RedisResult<String> =
            redis::cmd("SET").arg(key).arg(value(key)).query(&mut con);
        t.push(format!("client> SET {key}"), format!("{v:?}"));
        t.check(matches!(&v, Ok(s) if s == "OK"), || {
            format!("client> SET {key}: {v:?}")
        });
    }
    for k in 0..MASTERS {
        write_and_wait(&mut t, c, k, &c.keys_on(k, "marker", 1));
    }
    for key in &new_keys {
        get(&mut t, &mut con, key);
    }
    let on_replicas: i64 = (MASTERS..c.len()).map(|i| command_calls(c, i, "get")).sum();
    let on_masters: i64 = (0..MASTERS).map(|i| command_calls(c, i, "get")).sum();
    let sets: i64 = (0..MASTERS).map(|i| command_calls(c, i, "set")).sum();
    t.push(
        "client GETs served by the replicas",
        format!("{on_replicas} of {gets}"),
    );
    t.push("client GETs served by the masters", on_masters.to_string());
    t.push("SETs served by the masters", sets.to_string());
    let want_sets = i64::try_from(new_keys.len() + MASTERS).unwrap();
    t.check(
        on_replicas == gets && on_masters == 0 && sets == want_sets,
        || {
            format!(
                "{gets} client GETs: {on_replicas} on the replicas, {on_masters} on the \
                 masters; {sets} SETs on the masters, not {want_sets}"
            )
        },
    );
    t
}

#[test]
fn replica_reads_redis() {
    run_on_replicas(Kind::Redis, MASTERS, REPLICAS, replica_reads);
}

#[test]
fn replica_reads_goblin() {
    run_on_replicas(Kind::Goblin, MASTERS, REPLICAS, replica_reads);
}

// ---------------------------------------------------------------------------------------
// automatic failover

/// Master 0 is killed (SIGKILL) after writes its replica acknowledged (WAIT): within
/// [`FAILOVER_TIMEOUT`] its replica, node 3, is master of its slots and every other node
/// says so (node 0 `master,fail`, cluster_state:ok); the keys read back through node 3,
/// writes go there. Node 0 started again on its port and directory comes back as node
/// 3's replica, its link up, the data there (the keys written while it was down too),
/// and `--cluster check` is clean.
fn auto_failover(c: &Cluster) -> Transcript {
    assume_layout(c);
    let mut t = Transcript::on(c);
    let ok = b"+OK\r\n";
    let (old, new) = (0, replica(0));
    let keys = c.keys_on(old, "fo", 5);
    write_and_wait(&mut t, c, old, &keys);
    for k in 1..MASTERS {
        write_and_wait(&mut t, c, k, &c.keys_on(k, "fo", 2));
    }
    c.kill(old);
    t.push(format!("kill node{old} (SIGKILL)"), "killed");
    // Its replica is elected and takes its slots.
    let elected = poll(FAILOVER_TIMEOUT, EVERY, || match c.role(new)? {
        Role::Master => Ok(()),
        role => Err(format!("node {new} is {role:?}")),
    });
    outcome(
        &mut t,
        &format!("node{new} became a master"),
        elected.map(|(_, d)| d),
    );
    let mut want = fresh_layout();
    want[old] = Want::FailedMaster;
    want[new] = Want::Master(old);
    outcome(
        &mut t,
        &format!(
            "every running node: node{old} master,fail; node{new} master of its slots; \
             cluster_state:ok"
        ),
        poll(GOSSIP_TIMEOUT, EVERY, || every_view_is(c, &want)).map(|(_, d)| d),
    );
    check_log(&mut t, c, new, "Failover election won: I'm the new master.");
    for i in (0..c.len()).filter(|&i| c.is_running(i)) {
        push_nodes(&mut t, c, i, &format!("(node{old} down)"));
        let info = c.cmd(i, &[b"CLUSTER", b"INFO"]);
        t.push(
            format!("{} (node{old} down)", label(c, i, &[b"CLUSTER", b"INFO"])),
            c.norm().info(&info),
        );
    }
    // Every node routes the slots to node 3, which alone serves them.
    let shards = vec![(new, vec![]), (1, vec![replica(1)]), (2, vec![replica(2)])];
    let routed = poll(GOSSIP_TIMEOUT, EVERY, || {
        for i in (0..c.len()).filter(|&i| c.is_running(i)) {
            let slots = c.try_cmd(i, &[b"CLUSTER", b"SLOTS"])?;
            slots_are(c, &slots, &shards).map_err(|e| format!("node {i} CLUSTER SLOTS: {e}"))?;
        }
        Ok(())
    });
    outcome(
        &mut t,
        &format!("every running node's CLUSTER SLOTS: node{new} alone serves node{old}'s slots"),
        routed.map(|(_, d)| d),
    );
    let mut r1 = c.raw(1);
    ask(&mut t, c, &mut r1, 1, &["CLUSTER", "SLOTS"]);
    expect(
        &mut t,
        c,
        &mut r1,
        1,
        &["GET", &keys[0]],
        &moved(c, slot(keys[0].as_bytes()), new),
    );
    // What was acknowledged before the kill is there; writes go to the new master.
    let mut n = c.raw(new);
    for key in &keys {
        expect(
            &mut t,
            c,
            &mut n,
            new,
            &["GET", key],
            &bulk(value(key).as_bytes()),
        );
    }
    let after = c.keys_on(old, "after", 1).remove(0);
    expect(&mut t, c, &mut n, new, &["SET", &after, &value(&after)], ok);
    // No replica to acknowledge it: WAIT counts none.
    expect(&mut t, c, &mut n, new, &["WAIT", "1", "100"], &int(0));

    // The old master comes back, as the new master's replica.
    c.restart(old);
    t.push(
        format!("restart node{old} (its port, its nodes.conf)"),
        "restarted",
    );
    want[old] = Want::ReplicaOf(new);
    let rejoined = poll(FAILOVER_TIMEOUT, EVERY, || {
        every_view_is(c, &want)?;
        link_up(c, old)
    });
    outcome(
        &mut t,
        &format!("node{old} is node{new}'s replica, its link up; every node agrees"),
        rejoined.map(|(_, d)| d),
    );
    check_log(
        &mut t,
        c,
        old,
        &format!(
            "Configuration change detected. Reconfiguring myself as a replica of {}",
            c.id(new)
        ),
    );
    let healthy = c.try_wait_healthy(GOSSIP_TIMEOUT);
    t.push("healthy after the restart", healthy.is_ok().to_string());
    t.check(healthy.is_ok(), || healthy.unwrap_err());
    push_nodes(&mut t, c, old, "(restarted)");
    for i in [old, new] {
        t.push(
            format!("node{i}> INFO replication (roles, links)"),
            c.norm().replication(&c.info_replication(i)),
        );
    }
    let mut r0 = c.raw(old);
    let o = &mut r0;
    let to_new = moved(c, slot(keys[0].as_bytes()), new);
    expect(&mut t, c, o, old, &["GET", &keys[0]], &to_new);
    expect(&mut t, c, o, old, &["READONLY"], ok);
    for key in keys.iter().chain([&after]) {
        expect(
            &mut t,
            c,
            o,
            old,
            &["GET", key],
            &bulk(value(key).as_bytes()),
        );
    }
    let out = c.check_output();
    t.check(check_is_clean(&out), || {
        format!("redis-cli --cluster check:\n{}", out.describe())
    });
    t.push(
        "redis-cli --cluster check (node blocks sorted)",
        c.norm().check(&out.stdout),
    );
    t
}

#[test]
fn auto_failover_redis() {
    run_on_replicas(Kind::Redis, MASTERS, REPLICAS, auto_failover);
}

#[test]
fn auto_failover_goblin() {
    run_on_replicas(Kind::Goblin, MASTERS, REPLICAS, auto_failover);
}

// ---------------------------------------------------------------------------------------
// manual failover

/// CLUSTER FAILOVER's errors (on a master; a bad option); then each replica promoted in
/// turn — node 3 with CLUSTER FAILOVER, node 4 with TAKEOVER, node 5 with FORCE — after
/// writes its master acknowledged with WAIT: each answers OK, becomes master of its
/// master's slots with the old master its replica (every node agreeing), every write is
/// there, and the old master acknowledges the new master's writes. Finally
/// `--cluster check` is clean.
fn manual_failover(c: &Cluster) -> Transcript {
    assume_layout(c);
    let mut t = Transcript::on(c);
    let ok = b"+OK\r\n";
    let to_replica = err("ERR You should send CLUSTER FAILOVER to a replica");
    let syntax = err("ERR syntax error");
    let mut m0 = c.raw(0);
    let m = &mut m0;
    expect(&mut t, c, m, 0, &["CLUSTER", "FAILOVER"], &to_replica);
    expect(
        &mut t,
        c,
        m,
        0,
        &["CLUSTER", "FAILOVER", "FORCE"],
        &to_replica,
    );
    expect(
        &mut t,
        c,
        m,
        0,
        &["CLUSTER", "FAILOVER", "takeover"],
        &to_replica,
    );
    expect(&mut t, c, m, 0, &["CLUSTER", "FAILOVER", "bogus"], &syntax);
    let r0 = replica(0);
    let mut s0 = c.raw(r0);
    let s = &mut s0;
    expect(&mut t, c, s, r0, &["CLUSTER", "FAILOVER", "bogus"], &syntax);
    let both = ["CLUSTER", "FAILOVER", "FORCE", "TAKEOVER"];
    expect_prefix(&mut t, c, s, r0, &both, b"-ERR");
    let mut want = fresh_layout();
    outcome(
        &mut t,
        "nothing changed",
        poll(GOSSIP_TIMEOUT, EVERY, || every_view_is(c, &want)).map(|(_, d)| d),
    );

    for (k, option) in [(0, None), (1, Some("TAKEOVER")), (2, Some("FORCE"))] {
        let r = replica(k);
        let keys = c.keys_on(k, "mf", 3);
        write_and_wait(&mut t, c, k, &keys);
        let mut raw = c.raw(r);
        let mut args = vec!["CLUSTER", "FAILOVER"];
        args.extend(option);
        expect(&mut t, c, &mut raw, r, &args, ok);
        want[r] = Want::Master(k);
        want[k] = Want::ReplicaOf(r);
        let done = poll(FAILOVER_TIMEOUT, EVERY, || {
            every_view_is(c, &want)?;
            link_up(c, k)
        });
        outcome(
            &mut t,
            &format!(
                "node{r} master of node{k}'s slots, node{k} its replica, its link up; every \
                 node agrees"
            ),
            done.map(|(_, d)| d),
        );
        match option {
            None => {
                check_log(&mut t, c, r, "Manual failover user request accepted.");
                check_log(&mut t, c, r, "Failover election won: I'm the new master.");
            }
            Some("TAKEOVER") => {
                check_log(&mut t, c, r, "Taking over the master (user request).");
            }
            Some(_) => {
                check_log(&mut t, c, r, "Failover election won: I'm the new master.");
            }
        }
        check_log(
            &mut t,
            c,
            k,
            &format!(
                "Configuration change detected. Reconfiguring myself as a replica of {}",
                c.id(r)
            ),
        );
        // No acknowledged write lost; the new master's writes reach the old one.
        for key in &keys {
            expect(
                &mut t,
                c,
                &mut raw,
                r,
                &["GET", key],
                &bulk(value(key).as_bytes()),
            );
        }
        let more = c.keys_on(k, "mfafter", 1);
        write_and_wait(&mut t, c, r, &more);
        let mut old = c.raw(k);
        let to_new = moved(c, slot(keys[0].as_bytes()), r);
        expect(&mut t, c, &mut old, k, &["GET", &keys[0]], &to_new);
        expect(&mut t, c, &mut old, k, &["READONLY"], ok);
        for key in keys.iter().chain(&more) {
            expect(
                &mut t,
                c,
                &mut old,
                k,
                &["GET", key],
                &bulk(value(key).as_bytes()),
            );
        }
    }
    // The error on a master holds for the new ones too.
    let mut n3 = c.raw(r0);
    expect(
        &mut t,
        c,
        &mut n3,
        r0,
        &["CLUSTER", "FAILOVER"],
        &to_replica,
    );
    let healthy = c.try_wait_healthy(GOSSIP_TIMEOUT);
    t.push("healthy afterwards", healthy.is_ok().to_string());
    t.check(healthy.is_ok(), || healthy.unwrap_err());
    for i in 0..c.len() {
        push_nodes(&mut t, c, i, "(after the failovers)");
    }
    let out = c.check_output();
    t.check(check_is_clean(&out), || {
        format!("redis-cli --cluster check:\n{}", out.describe())
    });
    t.push(
        "redis-cli --cluster check (node blocks sorted)",
        c.norm().check(&out.stdout),
    );
    t
}

#[test]
fn manual_failover_redis() {
    run_on_replicas(Kind::Redis, MASTERS, REPLICAS, manual_failover);
}

#[test]
fn manual_failover_goblin() {
    run_on_replicas(Kind::Goblin, MASTERS, REPLICAS, manual_failover);
}

// ---------------------------------------------------------------------------------------
// pub/sub across nodes

/// How long a subscriber waits for a message published on another node (carried by the
/// cluster bus).
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the subscribers are listened to, at the end, for a message that must not
/// come (a duplicate, one for another kind of subscription).
const QUIET: Duration = Duration::from_millis(1500);

/// A RESP2 array of bulk strings: a pub/sub message as it is pushed.
fn push_msg(items: &[&str]) -> Vec<u8> {
    let args: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
    encode(&args)
}

/// A (P|S)SUBSCRIBE confirmation: `[kind, channel, count]`.
fn subscribed(kind: &str, channel: &str, count: i64) -> Vec<u8> {
    format!(
        "*3\r\n${}\r\n{kind}\r\n${}\r\n{channel}\r\n:{count}\r\n",
        kind.len(),
        channel.len()
    )
    .into_bytes()
}

/// The next reply or push on `raw`, waiting at most `timeout`; `Err` (what stopped it)
/// when none came.
fn next_push(raw: &mut Raw, timeout: Duration) -> Result<Vec<u8>, String> {
    raw.stream()
        .set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let got = raw.try_reply().map_err(|e| format!("nothing: {e}"));
    let _ = raw.stream().set_read_timeout(Some(REPLY_TIMEOUT));
    got
}

/// A subscribed connection to node `node`, called `name` in the transcript. It counts its
/// subscriptions as redis-server 7.0 does in its confirmations: channels and patterns
/// together, shard channels apart.
struct Sub {
    name: &'static str,
    node: usize,
    raw: Raw,
    plain: i64,
    shard: i64,
}

impl Sub {
    /// Connects to node `node` and subscribes ([`Sub::subscribe`]).
    fn new(
        t: &mut Transcript,
        c: &Cluster,
        name: &'static str,
        node: usize,
        command: &str,
        channels: &[&str],
    ) -> Sub {
        let mut sub = Sub {
            name,
            node,
            raw: c.raw(node),
            plain: 0,
            shard: 0,
        };
        sub.subscribe(t, c, command, channels);
        sub
    }

    /// Sends `command channels…` (SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE) and reads a
    /// confirmation for each channel, recorded and checked.
    fn subscribe(&mut self, t: &mut Transcript, c: &Cluster, command: &str, channels: &[&str]) {
        let mut args: Vec<&[u8]> = vec![command.as_bytes()];
        args.extend(channels.iter().map(|ch| ch.as_bytes()));
        self.raw.send(&encode(&args));
        let what = format!("{}: {}", self.name, label(c, self.node, &args));
        let kind = command.to_ascii_lowercase();
        for ch in channels {
            let count = if kind == "ssubscribe" {
                self.shard += 1;
                self.shard
            } else {
                self.plain += 1;
                self.plain
            };
            let got = next_push(&mut self.raw, REPLY_TIMEOUT);
            let shown = got.as_ref().map_or_else(Clone::clone, |r| c.render(r));
            t.push(what.clone(), shown.clone());
            let want = subscribed(&kind, ch, count);
            t.check(got.as_deref() == Ok(&want[..]), || {
                format!("{what}: {shown}, expected {}", show(&want))
            });
        }
    }

    /// Waits (at most [`MESSAGE_TIMEOUT`]) for the next message: recorded, and checked to
    /// be `want`.
    fn expect(&mut self, t: &mut Transcript, c: &Cluster, want: &[u8]) {
        let got = next_push(&mut self.raw, MESSAGE_TIMEOUT);
        let shown = got.as_ref().map_or_else(Clone::clone, |r| c.render(r));
        let what = format!("{} (node{}) receives", self.name, self.node);
        t.push(what.clone(), shown.clone());
        t.check(got.as_deref() == Ok(want), || {
            format!("{what}: {shown}, expected {}", show(want))
        });
    }
}

/// After [`QUIET`], whether each subscriber has received nothing more: recorded and
/// checked.
fn all_quiet(t: &mut Transcript, c: &Cluster, subs: &mut [&mut Sub]) {
    std::thread::sleep(QUIET);
    for sub in subs.iter_mut() {
        let got = next_push(&mut sub.raw, Duration::from_millis(100));
        let what = format!("{} (node{}): nothing more", sub.name, sub.node);
        t.push(what.clone(), got.is_err().to_string());
        t.check(got.is_err(), || {
            format!("{what}: received {}", c.render(got.as_ref().unwrap()))
        });
    }
}

/// PUBLISH reaches every node: subscribers on master 1 (SUBSCRIBE), on master 2
/// (PSUBSCRIBE), on master 0's replica and on master 2's replica (both) receive what is
/// published on master 0 — once each, the replica of the publishing master too — and
/// what is published on a replica; PUBLISH counts only the receivers on its own node, as
/// PUBSUB NUMSUB and NUMPAT do. Sharded pub/sub: SSUBSCRIBE to a channel of master 1's
/// slots on master 1 and on its replica; SPUBLISH on either reaches both and counts the
/// local one; on any other node (SSUBSCRIBE, SPUBLISH) MOVED to master 1; two channels of
/// different slots CROSSSLOT. Channel and shard channel subscriptions are apart: a shard
/// message does not reach SUBSCRIBE or PSUBSCRIBE on the same name, nor PUBLISH an
/// SSUBSCRIBE. Finally nobody received anything more.
fn pubsub_across_nodes(c: &Cluster) -> Transcript {
    assume_layout(c);
    let mut t = Transcript::on(c);
    let (r0, r1, r2) = (replica(0), replica(1), replica(2));
    // Two shard channels of master 1's slots (two slots), whose names match `news*`.
    let shard = c.keys_on(1, "newsshard", 2);
    assert_ne!(slot(shard[0].as_bytes()), slot(shard[1].as_bytes()));
    let (sch, sch2) = (shard[0].as_str(), shard[1].as_str());
    let sslot = slot(sch.as_bytes());

    let mut s1 = Sub::new(&mut t, c, "s1", 1, "SUBSCRIBE", &["news", sch]);
    let mut s2 = Sub::new(&mut t, c, "s2", 2, "PSUBSCRIBE", &["news*"]);
    let mut s3 = Sub::new(&mut t, c, "s3", r0, "SUBSCRIBE", &["news"]);
    let mut s5 = Sub::new(&mut t, c, "s5", r2, "SUBSCRIBE", &["news"]);
    s5.subscribe(&mut t, c, "PSUBSCRIBE", &["n?ws"]);
    let message = |ch: &str, m: &str| push_msg(&["message", ch, m]);
    let pmessage = |p: &str, ch: &str, m: &str| push_msg(&["pmessage", p, ch, m]);
    let smessage = |ch: &str, m: &str| push_msg(&["smessage", ch, m]);

    // Published on master 0, which has no subscriber: 0 receivers counted, every other
    // node's subscribers served.
    let mut p0 = c.raw(0);
    expect(&mut t, c, &mut p0, 0, &["PUBLISH", "news", "one"], &int(0));
    s1.expect(&mut t, c, &message("news", "one"));
    s2.expect(&mut t, c, &pmessage("news*", "news", "one"));
    s3.expect(&mut t, c, &message("news", "one"));
    s5.expect(&mut t, c, &message("news", "one"));
    s5.expect(&mut t, c, &pmessage("n?ws", "news", "one"));
    // A subscriber on master 0 itself: counted.
    let mut s0 = Sub::new(&mut t, c, "s0", 0, "SUBSCRIBE", &["news"]);
    expect(&mut t, c, &mut p0, 0, &["PUBLISH", "news", "two"], &int(1));
    s0.expect(&mut t, c, &message("news", "two"));
    s1.expect(&mut t, c, &message("news", "two"));
    s2.expect(&mut t, c, &pmessage("news*", "news", "two"));
    s3.expect(&mut t, c, &message("news", "two"));
    s5.expect(&mut t, c, &message("news", "two"));
    s5.expect(&mut t, c, &pmessage("n?ws", "news", "two"));
    // Published on a replica (master 1's, no subscriber there): every node served.
    let mut p4 = c.raw(r1);
    expect(
        &mut t,
        c,
        &mut p4,
        r1,
        &["PUBLISH", "news", "three"],
        &int(0),
    );
    for s in [&mut s0, &mut s1, &mut s3, &mut s5] {
        s.expect(&mut t, c, &message("news", "three"));
    }
    s2.expect(&mut t, c, &pmessage("news*", "news", "three"));
    s5.expect(&mut t, c, &pmessage("n?ws", "news", "three"));
    // PUBSUB counts each node's own subscribers.
    let numsub = [1, 1, 0, 1, 0, 1];
    let numpat = [0, 0, 1, 0, 0, 1];
    for i in 0..c.len() {
        let mut raw = c.raw(i);
        let want = array(&[bulk(b"news"), int(numsub[i])]);
        expect(&mut t, c, &mut raw, i, &["PUBSUB", "NUMSUB", "news"], &want);
        expect(
            &mut t,
            c,
            &mut raw,
            i,
            &["PUBSUB", "NUMPAT"],
            &int(numpat[i]),
        );
        let reply = raw.cmd(&[b"PUBSUB", b"CHANNELS"]);
        t.push(
            label(c, i, &[b"PUBSUB", b"CHANNELS"]),
            c.norm().sorted(&reply),
        );
    }

    // Sharded pub/sub: on master 1, which owns the slot, and on its replica.
    let mut ss1 = Sub::new(&mut t, c, "ss1", 1, "SSUBSCRIBE", &[sch]);
    let mut ss4 = Sub::new(&mut t, c, "ss4", r1, "SSUBSCRIBE", &[sch]);
    let to_owner = moved(c, sslot, 1);
    for i in [0, 2, r0, r2] {
        let mut raw = c.raw(i);
        expect(&mut t, c, &mut raw, i, &["SSUBSCRIBE", sch], &to_owner);
        expect(&mut t, c, &mut raw, i, &["SPUBLISH", sch, "x"], &to_owner);
    }
    let crossslot = err("CROSSSLOT Keys in request don't hash to the same slot");
    let mut p1 = c.raw(1);
    expect(
        &mut t,
        c,
        &mut p1,
        1,
        &["SSUBSCRIBE", sch, sch2],
        &crossslot,
    );
    // SPUBLISH on the master: its own shard subscriber counted, its replica's served.
    expect(&mut t, c, &mut p1, 1, &["SPUBLISH", sch, "four"], &int(1));
    ss1.expect(&mut t, c, &smessage(sch, "four"));
    ss4.expect(&mut t, c, &smessage(sch, "four"));
    // SPUBLISH on the replica: the same.
    expect(&mut t, c, &mut p4, r1, &["SPUBLISH", sch, "five"], &int(1));
    ss4.expect(&mut t, c, &smessage(sch, "five"));
    ss1.expect(&mut t, c, &smessage(sch, "five"));
    // PUBLISH on the shard channel's name reaches the channel subscribers alone.
    expect(&mut t, c, &mut p0, 0, &["PUBLISH", sch, "six"], &int(0));
    s1.expect(&mut t, c, &message(sch, "six"));
    s2.expect(&mut t, c, &pmessage("news*", sch, "six"));
    for i in [0, 1, r1] {
        let mut raw = c.raw(i);
        let args: [&[u8]; 2] = [b"PUBSUB", b"SHARDCHANNELS"];
        let reply = raw.cmd(&args);
        t.push(label(c, i, &args), c.norm().sorted(&reply));
        ask(&mut t, c, &mut raw, i, &["PUBSUB", "SHARDNUMSUB", sch]);
    }
    all_quiet(
        &mut t,
        c,
        &mut [
            &mut s0, &mut s1, &mut s2, &mut s3, &mut s5, &mut ss1, &mut ss4,
        ],
    );
    t
}

#[test]
fn pubsub_across_nodes_redis() {
    run_on_replicas(Kind::Redis, MASTERS, REPLICAS, pubsub_across_nodes);
}

#[test]
fn pubsub_across_nodes_goblin() {
    run_on_replicas(Kind::Goblin, MASTERS, REPLICAS, pubsub_across_nodes);
}

// ---------------------------------------------------------------------------------------
// cluster-replica-no-failover

/// Whether every running node's CLUSTER NODES gives node `node` the flags `want`
/// (`myself` first on its own line, as `myself,slave,nofailover`); else what differs.
fn flags_everywhere(c: &Cluster, node: usize, want: &[&str]) -> Result<(), String> {
    for i in (0..c.len()).filter(|&i| c.is_running(i)) {
        let lines = c.cluster_nodes(i)?;
        let Some(line) = lines.iter().find(|l| l.id == c.id(node)) else {
            return Err(format!("node {i} does not list node {node}"));
        };
        let mut expected: Vec<&str> = Vec::new();
        if i == node {
            expected.push("myself");
        }
        expected.extend(want);
        if line.flags != expected {
            return Err(format!(
                "node {i} gives node {node} the flags {:?}, not {expected:?}",
                line.flags
            ));
        }
    }
    Ok(())
}

/// Whether every running node's view is `want` ([`view_is`]) and every running node
/// says `cluster_state:fail`.
fn every_view_is_down(c: &Cluster, want: &[Want]) -> Result<(), String> {
    for i in (0..c.len()).filter(|&i| c.is_running(i)) {
        view_is(c, i, want)?;
        let info = c.cluster_info(i);
        if info_field(&info, "cluster_state") != Some("fail") {
            return Err(format!("node {i} CLUSTER INFO:\n{info}"));
        }
    }
    Ok(())
}

/// `cluster-replica-no-failover yes` set on master 0's replica (CONFIG SET): every node
/// shows it `slave,nofailover` (`myself,slave,nofailover` on itself). Master 0 killed:
/// for three node timeouts the replica stays its replica (no election), the cluster goes
/// `fail` (node 0 `master,fail`, keeping its slots) and a key command answers CLUSTERDOWN.
/// Master 0 started again: the cluster is ok, as it was. The setting back to `no`: the
/// flag is gone everywhere.
fn nofailover_flag(c: &Cluster) -> Transcript {
    assume_layout(c);
    let mut t = Transcript::on(c);
    let (m, r) = (0, replica(0));
    let name = "cluster-replica-no-failover";
    let mut raw = c.raw(r);
    let s = &mut raw;
    expect(
        &mut t,
        c,
        s,
        r,
        &["CONFIG", "GET", name],
        &push_msg(&[name, "no"]),
    );
    expect(&mut t, c, s, r, &["CONFIG", "SET", name, "yes"], b"+OK\r\n");
    expect(
        &mut t,
        c,
        s,
        r,
        &["CONFIG", "GET", name],
        &push_msg(&[name, "yes"]),
    );
    outcome(
        &mut t,
        &format!("every node: node{r} `slave,nofailover` (`myself,slave,nofailover` on itself)"),
        poll(GOSSIP_TIMEOUT, EVERY, || {
            flags_everywhere(c, r, &["slave", "nofailover"])
        })
        .map(|(_, d)| d),
    );
    for i in 0..c.len() {
        push_nodes(&mut t, c, i, &format!("(node{r} nofailover)"));
    }
    let keys = c.keys_on(m, "nf", 2);
    write_and_wait(&mut t, c, m, &keys);

    c.kill(m);
    let killed = Instant::now();
    t.push(format!("kill node{m} (SIGKILL)"), "killed");
    let mut want = fresh_layout();
    want[m] = Want::DownMaster(m);
    outcome(
        &mut t,
        &format!("every running node: node{m} `master,fail` with its slots; cluster_state:fail"),
        poll(FAILOVER_TIMEOUT, EVERY, || every_view_is_down(c, &want)).map(|(_, d)| d),
    );
    // No election for three node timeouts after the kill.
    let hold = killed + 3 * Duration::from_millis(goblin_tests::cluster::NODE_TIMEOUT_MS);
    let mut stayed: Result<(), String> = Ok(());
    while Instant::now() < hold && stayed.is_ok() {
        stayed = match c.role(r) {
            Ok(Role::Replica(of)) if of == c.id(m) => Ok(()),
            other => Err(format!("node {r} is {other:?}")),
        };
        std::thread::sleep(EVERY);
    }
    outcome(
        &mut t,
        &format!("node{r} stays node{m}'s replica for 3 node timeouts"),
        stayed.map(|()| killed.elapsed()),
    );
    let log = c.nodes()[r].log();
    t.check(!log.contains("Starting a failover election"), || {
        format!(
            "node {r} started an election; its last lines:\n{}",
            c.nodes()[r].log_tail(30)
        )
    });
    outcome(
        &mut t,
        &format!("still: node{m} `master,fail` with its slots; cluster_state:fail"),
        every_view_is_down(c, &want).map(|()| Duration::ZERO),
    );
    outcome(
        &mut t,
        &format!("still: node{r} `slave,nofailover` everywhere"),
        flags_everywhere(c, r, &["slave", "nofailover"]).map(|()| Duration::ZERO),
    );
    let down = err("CLUSTERDOWN The cluster is down");
    for i in [1, r] {
        let mut raw = c.raw(i);
        expect(&mut t, c, &mut raw, i, &["GET", &keys[0]], &down);
        let other = c.keys_on(2, "nfother", 1).remove(0);
        expect(&mut t, c, &mut raw, i, &["GET", &other], &down);
        let info = raw.cmd(&[b"CLUSTER", b"INFO"]);
        t.push(
            format!("{} (node{m} down)", label(c, i, &[b"CLUSTER", b"INFO"])),
            c.norm().info(&info),
        );
    }
    push_nodes(&mut t, c, r, &format!("(node{m} down)"));

    // The master back: the cluster as it was.
    c.restart(m);
    t.push(
        format!("restart node{m} (its port, its nodes.conf)"),
        "restarted",
    );
    let fresh = fresh_layout();
    outcome(
        &mut t,
        &format!("node{m} master again, node{r} its replica, its link up; cluster_state:ok"),
        poll(FAILOVER_TIMEOUT, EVERY, || {
            every_view_is(c, &fresh)?;
            link_up(c, r)
        })
        .map(|(_, d)| d),
    );
    let healthy = c.try_wait_healthy(GOSSIP_TIMEOUT);
    t.push("healthy after the restart", healthy.is_ok().to_string());
    t.check(healthy.is_ok(), || healthy.unwrap_err());
    outcome(
        &mut t,
        &format!("node{r} still `slave,nofailover` everywhere"),
        flags_everywhere(c, r, &["slave", "nofailover"]).map(|()| Duration::ZERO),
    );

    // Back to `no`: the flag goes.
    let mut raw = c.raw(r);
    let s = &mut raw;
    expect(&mut t, c, s, r, &["CONFIG", "SET", name, "no"], b"+OK\r\n");
    expect(
        &mut t,
        c,
        s,
        r,
        &["CONFIG", "GET", name],
        &push_msg(&[name, "no"]),
    );
    outcome(
        &mut t,
        &format!("every node: node{r} `slave` (`myself,slave` on itself)"),
        poll(GOSSIP_TIMEOUT, EVERY, || flags_everywhere(c, r, &["slave"])).map(|(_, d)| d),
    );
    for i in 0..c.len() {
        push_nodes(&mut t, c, i, "(nofailover off)");
    }
    t
}

#[test]
fn nofailover_flag_redis() {
    run_on_replicas(Kind::Redis, MASTERS, REPLICAS, nofailover_flag);
}

#[test]
fn nofailover_flag_goblin() {
    run_on_replicas(Kind::Goblin, MASTERS, REPLICAS, nofailover_flag);
}

// ---------------------------------------------------------------------------------------
// replica migration

/// Master 0's second replica, added with `redis-cli --cluster add-node … --cluster-slave`
/// after the cluster was created (the last node).
const EXTRA: usize = 2 * MASTERS;
/// How long a replica migration may take: the orphaned master's replica's failure
/// noticed (the node timeout) and agreed, then five seconds of the master orphaned.
const MIGRATION_TIMEOUT: Duration = Duration::from_secs(45);

/// Three masters, master 0 with two replicas (node 3 and the added node 6), masters 1
/// and 2 with one each (nodes 4 and 5).
fn migration_cluster(kind: Kind) -> Cluster {
    let mut c = Cluster::start_with_replicas(kind, MASTERS, REPLICAS);
    let added = c.add_replica(0);
    assert_eq!(added, EXTRA);
    c
}

/// Master 1's only replica killed: master 1 is orphaned, and within
/// [`MIGRATION_TIMEOUT`] one of master 0's two replicas — the one whose id is smaller
/// (redis-server's rule) — becomes master 1's replica: every node says so (the killed
/// replica `slave,fail`), its INFO replication gives master 1's port with the link up, it
/// has master 1's writes (WAIT counts it) and logs the migration; master 0 keeps its
/// other replica. The killed replica started again rejoins master 1 (now with two
/// replicas), and the cluster is healthy. The two replicas of master 0 are named in the
/// transcript by what they did (node3 the one that migrated, node6 the other), so that
/// two clusters whose ids rank them differently compare.
fn replica_migration(c: &Cluster) -> Transcript {
    for k in 0..MASTERS {
        assert_eq!(c.planned_master_of(k), None, "node {k} is not a master");
    }
    assert_eq!(c.planned_replicas_of(0), [replica(0), EXTRA]);
    assert_eq!(c.planned_replicas_of(1), [replica(1)]);
    assert_eq!(c.planned_replicas_of(2), [replica(2)]);
    let mut t = Transcript::on(c);
    let mut want = fresh_layout();
    want.push(Want::ReplicaOf(0));
    outcome(
        &mut t,
        "every node: node0 with two replicas (node3, node6), node1 and node2 with one",
        poll(GOSSIP_TIMEOUT, EVERY, || every_view_is(c, &want)).map(|(_, d)| d),
    );
    let mut m0 = c.raw(0);
    for key in c.keys_on(0, "mig", 2) {
        expect(
            &mut t,
            c,
            &mut m0,
            0,
            &["SET", &key, &value(&key)],
            b"+OK\r\n",
        );
    }
    expect(&mut t, c, &mut m0, 0, &["WAIT", "2", "5000"], &int(2));
    for k in 1..MASTERS {
        write_and_wait(&mut t, c, k, &c.keys_on(k, "mig", 1));
    }

    let lost = replica(1);
    c.kill(lost);
    t.push(format!("kill node{lost} (SIGKILL)"), "killed");
    let candidates = [replica(0), EXTRA];
    let migrated = poll(MIGRATION_TIMEOUT, EVERY, || {
        for &i in &candidates {
            if c.role(i)? == Role::Replica(c.id(1).to_string()) {
                return Ok(i);
            }
        }
        Err(format!(
            "neither node {} nor node {} replicates node 1",
            candidates[0], candidates[1]
        ))
    });
    let Ok((mover, took)) = migrated.clone() else {
        outcome(
            &mut t,
            "one of node0's replicas replicates node1",
            migrated.map(|(_, d)| d),
        );
        return t;
    };
    outcome(&mut t, "one of node0's replicas replicates node1", Ok(took));
    let stayer = if mover == replica(0) {
        EXTRA
    } else {
        replica(0)
    };
    let smaller = if c.id(replica(0)) < c.id(EXTRA) {
        replica(0)
    } else {
        EXTRA
    };
    t.push(
        "the replica that migrated has the smaller id",
        (mover == smaller).to_string(),
    );
    t.check(mover == smaller, || {
        format!(
            "node {mover} ({}) migrated, not node {smaller} ({}), whose id is smaller",
            c.id(mover),
            c.id(smaller)
        )
    });
    // Names by role: node3 the replica that migrated, node6 the one that stayed.
    let mut norm = c.norm();
    if mover != replica(0) {
        norm.ids.swap(replica(0), EXTRA);
        norm.ports.swap(replica(0), EXTRA);
    }
    let name = |i: usize| {
        if i == mover {
            replica(0)
        } else if i == stayer {
            EXTRA
        } else {
            i
        }
    };
    let mut after = fresh_layout();
    after.push(Want::ReplicaOf(0));
    after[lost] = Want::FailedReplicaOf(1);
    after[mover] = Want::ReplicaOf(1);
    after[stayer] = Want::ReplicaOf(0);
    let port1 = c.port(1).to_string();
    outcome(
        &mut t,
        "every running node: node3 replica of node1, node6 of node0, node4 `slave,fail`; \
         node3's link to node1 up, node0 has one replica left",
        poll(GOSSIP_TIMEOUT, EVERY, || {
            every_view_is(c, &after)?;
            link_up(c, mover)?;
            let info = c.info_replication(mover);
            if info_field(&info, "master_port") != Some(port1.as_str()) {
                return Err(format!("node {mover} INFO replication:\n{info}"));
            }
            // (The old master let it go: its connection closed.)
            let old = c.info_replication(0);
            if info_field(&old, "connected_slaves") == Some("1") {
                Ok(())
            } else {
                Err(format!("node 0 INFO replication:\n{old}"))
            }
        })
        .map(|(_, d)| d),
    );
    check_log(
        &mut t,
        c,
        mover,
        &format!("Migrating to orphaned master {}", c.id(1)),
    );
    let nodes_of = |t: &mut Transcript, i: usize, note: &str| {
        let reply = c.cmd(i, &[b"CLUSTER", b"NODES"]);
        t.push(
            format!("node{}> CLUSTER NODES {note}", name(i)),
            norm.nodes(&reply),
        );
    };
    let mut order: Vec<usize> = (0..c.len()).filter(|&i| c.is_running(i)).collect();
    order.sort_by_key(|&i| name(i));
    for &i in &order {
        nodes_of(&mut t, i, "(after the migration)");
    }
    for i in [0, 1, mover, stayer] {
        t.push(
            format!("node{}> INFO replication (roles, links)", name(i)),
            norm.replication(&c.info_replication(i)),
        );
    }
    // Master 0 keeps one replica, the one that stayed.
    let reply = c.cmd(0, &[b"CLUSTER", b"REPLICAS", c.id(0).as_bytes()]);
    t.push("node0> CLUSTER REPLICAS node0", norm.replicas(&reply));
    let ok = lists_replica(c, &reply, stayer, 0);
    t.check(ok.is_ok(), || {
        format!("node0> CLUSTER REPLICAS node0: {}", ok.unwrap_err())
    });
    let reply = c.cmd(1, &[b"CLUSTER", b"REPLICAS", c.id(1).as_bytes()]);
    t.push("node1> CLUSTER REPLICAS node1", norm.replicas(&reply));
    // Master 1's writes reach its new replica, master 0's its remaining one.
    write_and_wait(&mut t, c, 1, &c.keys_on(1, "migafter", 2));
    write_and_wait(&mut t, c, 0, &c.keys_on(0, "migafter", 1));
    let mut raw = c.raw(mover);
    let key = c.keys_on(1, "migafter", 1).remove(0);
    for (args, want) in [
        (vec!["READONLY"], b"+OK\r\n".to_vec()),
        (vec!["GET", key.as_str()], bulk(value(&key).as_bytes())),
    ] {
        let reply = raw.cmd(&args.iter().map(|a| a.as_bytes()).collect::<Vec<_>>());
        let what = format!("node{}> {}", name(mover), args.join(" "));
        t.push(what.clone(), c.render(&reply));
        t.check_reply(&reply, &want, what);
    }

    // The lost replica back: master 1 has two replicas, the cluster is healthy.
    c.restart(lost);
    t.push(
        format!("restart node{lost} (its port, its nodes.conf)"),
        "restarted",
    );
    after[lost] = Want::ReplicaOf(1);
    outcome(
        &mut t,
        "every node: node1 with two replicas (node3, node4), node0 with node6",
        poll(FAILOVER_TIMEOUT, EVERY, || {
            every_view_is(c, &after)?;
            link_up(c, lost)
        })
        .map(|(_, d)| d),
    );
    let healthy = c.try_wait_healthy(GOSSIP_TIMEOUT);
    t.push("healthy after the restart", healthy.is_ok().to_string());
    t.check(healthy.is_ok(), || healthy.unwrap_err());
    nodes_of(&mut t, 1, "(node4 back)");
    let reply = c.cmd(1, &[b"CLUSTER", b"REPLICAS", c.id(1).as_bytes()]);
    t.push(
        "node1> CLUSTER REPLICAS node1 (node4 back)",
        norm.replicas(&reply),
    );
    t
}

#[test]
fn replica_migration_redis() {
    run_on_built(Kind::Redis, migration_cluster, replica_migration);
}

#[test]
fn replica_migration_goblin() {
    run_on_built(Kind::Goblin, migration_cluster, replica_migration);
}
