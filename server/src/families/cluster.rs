//! CLUSTER and the commands of cluster clients (ASKING, READONLY, READWRITE), answered as
//! redis-server 7.0 answers them — replies, formats and error texts. The cluster's state
//! is `crate::cluster`; subcommands that need the keyspace (COUNTKEYSINSLOT,
//! GETKEYSINSLOT, SETSLOT … NODE, FLUSHSLOTS, RESET) are plans that count or list keys on
//! the shard that owns the slot (or on every shard), then act.

use std::net::IpAddr;

use goblin_protocol::{Encoder, parse_i64};
use goblin_store::{SLOTS, key_slot};

use crate::cluster::{self, Cluster, HANDSHAKE, MASTER, MEET, MYSELF, Node, NodeId, State, id_str};
use crate::table::handler::{Args, ConnCtx, Exec, ShardCtx};
use crate::table::meta_node::{Meta, Node as M};
use crate::table::{CommandTable, meta};
use crate::txn::plan::{CrossShard, Hop, HopOut, Locking, Outcome, Plan, PlanCx, PlanStart, Step};
use crate::txn::shapes::FanOut;

/// The error of every cluster command on a node not in cluster mode.
pub const DISABLED: &[u8] = b"ERR This instance has cluster support disabled";

/// Registers CLUSTER, ASKING, READONLY and READWRITE.
pub fn register(table: &mut CommandTable) {
    let plan = |plan| {
        Exec::Plan(CrossShard {
            plan,
            locking: Locking::InHops,
        })
    };
    table.add_container(
        &meta::CLUSTER,
        Exec::Container,
        &[
            ("help", None, Exec::Conn(help)),
            ("info", None, Exec::Conn(info)),
            ("myid", None, Exec::Conn(myid)),
            ("myshardid", Some(&CLUSTER_MYSHARDID), Exec::Conn(myshardid)),
            ("nodes", None, Exec::Conn(nodes)),
            ("slots", None, Exec::Conn(slots)),
            ("shards", None, Exec::Conn(shards)),
            ("links", None, Exec::Conn(links)),
            ("keyslot", None, Exec::Conn(keyslot)),
            ("addslots", None, Exec::Conn(addslots)),
            ("addslotsrange", None, Exec::Conn(addslotsrange)),
            ("delslots", None, Exec::Conn(delslots)),
            ("delslotsrange", None, Exec::Conn(delslotsrange)),
            ("meet", None, Exec::Conn(meet)),
            ("forget", None, Exec::Conn(forget)),
            ("set-config-epoch", None, Exec::Conn(set_config_epoch)),
            ("bumpepoch", None, Exec::Conn(bumpepoch)),
            (
                "count-failure-reports",
                None,
                Exec::Conn(count_failure_reports),
            ),
            ("saveconfig", None, Exec::Conn(saveconfig)),
            ("replicas", None, Exec::Conn(replicas)),
            ("slaves", None, Exec::Conn(replicas)),
            ("replicate", None, plan(replicate_plan)),
            ("failover", None, Exec::Conn(failover)),
            ("countkeysinslot", None, plan(countkeysinslot_plan)),
            ("getkeysinslot", None, plan(getkeysinslot_plan)),
            ("setslot", None, plan(setslot_plan)),
            (
                "flushslots",
                None,
                Exec::Plan(CrossShard {
                    plan: flushslots_plan,
                    locking: Locking::WholeShards,
                }),
            ),
            (
                "reset",
                None,
                Exec::Plan(CrossShard {
                    plan: reset_plan,
                    locking: Locking::WholeShards,
                }),
            ),
        ],
    );
    table.add(&meta::ASKING, Exec::Conn(asking));
    table.add(&meta::READONLY, Exec::Conn(readonly));
    table.add(&meta::READWRITE, Exec::Conn(readwrite));
}

/// The cluster, or the error of a node not in cluster mode.
fn cluster<'a>(ctx: &mut ConnCtx<'a>) -> Option<&'a Cluster> {
    let shared: &'a crate::runtime::server::Shared = ctx.shared;
    match shared.cluster.as_deref() {
        Some(c) => Some(c),
        None => {
            ctx.reply().error(DISABLED);
            None
        }
    }
}

/// `CLUSTER HELP`
fn help(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    const LINES: &[&str] = &[
        "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ADDSLOTS <slot> [<slot> ...]",
        "    Assign slots to current node.",
        "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
        "    Assign slots which are between <start-slot> and <end-slot> to current node.",
        "BUMPEPOCH",
        "    Advance the cluster config epoch.",
        "COUNT-FAILURE-REPORTS <node-id>",
        "    Return number of failure reports for <node-id>.",
        "COUNTKEYSINSLOT <slot>",
        "    Return the number of keys in <slot>.",
        "DELSLOTS <slot> [<slot> ...]",
        "    Delete slots information from current node.",
        "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
        "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
        "FAILOVER [FORCE|TAKEOVER]",
        "    Promote current replica node to being a master.",
        "FORGET <node-id>",
        "    Remove a node from the cluster.",
        "GETKEYSINSLOT <slot> <count>",
        "    Return key names stored by current node in a slot.",
        "FLUSHSLOTS",
        "    Delete current node own slots information.",
        "INFO",
        "    Return information about the cluster.",
        "KEYSLOT <key>",
        "    Return the hash slot for <key>.",
        "MEET <ip> <port> [<bus-port>]",
        "    Connect nodes into a working cluster.",
        "MYID",
        "    Return the node id.",
        "NODES",
        "    Return cluster configuration seen by node. Output format:",
        "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
        "REPLICATE <node-id>",
        "    Configure current node as replica to <node-id>.",
        "RESET [HARD|SOFT]",
        "    Reset current node (default: soft).",
        "SET-CONFIG-EPOCH <epoch>",
        "    Set config epoch of current node.",
        "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
        "    Set slot state.",
        "REPLICAS <node-id>",
        "    Return <node-id> replicas.",
        "SAVECONFIG",
        "    Force saving cluster configuration on disk.",
        "SLOTS",
        "    Return information about slots range mappings. Each range is made of:",
        "    start, end, master and replicas IP addresses, ports and ids",
        "SHARDS",
        "    Return information about slot range mappings and the nodes associated with them.",
        "LINKS",
        "    Return information about all network links between this node and its peers.",
        "    Output format is an array where each array element is a map containing attributes of a link",
        "HELP",
        "    Prints this help.",
    ];
    if cluster(ctx).is_some() {
        super::reply_help(ctx, LINES);
    }
}

/// `CLUSTER INFO`
fn info(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let Some(c) = cluster(ctx) else {
        return;
    };
    let text = info_text(&c.lock());
    ctx.reply().verbatim(b"txt", text.as_bytes());
}

/// CLUSTER INFO's text.
pub fn info_text(state: &State) -> String {
    let assigned = state.slots.iter().filter(|s| s.is_some()).count();
    let (mut pfail, mut fail) = (0, 0);
    for owner in state.slots.iter().flatten() {
        if let Some(n) = state.nodes.get(owner) {
            if n.flags & cluster::FAIL != 0 {
                fail += 1;
            } else if n.flags & cluster::PFAIL != 0 {
                pfail += 1;
            }
        }
    }
    let mut text = format!(
        "cluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{}\r\n\
         cluster_slots_pfail:{pfail}\r\ncluster_slots_fail:{fail}\r\ncluster_known_nodes:{}\r\n\
         cluster_size:{}\r\ncluster_current_epoch:{}\r\ncluster_my_epoch:{}\r\n",
        if state.ok { "ok" } else { "fail" },
        assigned - pfail - fail,
        state.nodes.len(),
        state.size,
        state.current_epoch,
        state.me().config_epoch,
    );
    // (In redis-server's order of message types.)
    let mut order: Vec<usize> = (0..cluster::MESSAGE_KINDS.len()).collect();
    order.sort_by_key(|&i| cluster::bus::redis_type(i as u8));
    for (counts, dir) in [(&state.sent, "sent"), (&state.received, "received")] {
        for &i in &order {
            let (kind, n) = (cluster::MESSAGE_KINDS[i], counts[i]);
            if n > 0 {
                text.push_str(&format!("cluster_stats_messages_{kind}_{dir}:{n}\r\n"));
            }
        }
        let total: u64 = counts.iter().sum();
        text.push_str(&format!("cluster_stats_messages_{dir}:{total}\r\n"));
    }
    text.push_str(&format!(
        "total_cluster_links_buffer_limit_exceeded:{}\r\n",
        state.links_over_limit
    ));
    text
}

/// `CLUSTER MYID`
fn myid(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let Some(c) = cluster(ctx) else {
        return;
    };
    let id = c.lock().myself;
    ctx.reply().bulk(&id);
}

/// `CLUSTER MYSHARDID` (Redis 7.2's): this node's shard.
fn myshardid(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let Some(c) = cluster(ctx) else {
        return;
    };
    let id = c.lock().me().shard_id;
    ctx.reply().bulk(&id);
}

/// `CLUSTER NODES`
fn nodes(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let Some(c) = cluster(ctx) else {
        return;
    };
    let text = c.lock().nodes_text();
    ctx.reply().verbatim(b"txt", text.as_bytes());
}

/// A node as CLUSTER SLOTS lists it: its preferred endpoint, port, name, and what else
/// is known of its address (its ip unless that is the endpoint, its hostname unless
/// that is).
fn slots_node(e: &mut Encoder<'_>, state: &State, n: &Node) {
    use cluster::Endpoint;
    e.array(4);
    e.bulk(state.endpoint(n).as_bytes());
    e.integer(i64::from(n.port));
    e.bulk(&n.id);
    let ip = state.endpoint != Endpoint::Ip;
    let hostname = state.endpoint != Endpoint::Hostname && !n.hostname.is_empty();
    e.map(usize::from(ip) + usize::from(hostname));
    if ip {
        e.bulk(b"ip");
        e.bulk(n.ip.as_bytes());
    }
    if hostname {
        e.bulk(b"hostname");
        e.bulk(n.hostname.as_bytes());
    }
}

/// A node's replication offset: this node's own, or the one it last announced.
fn offset_of(ctx: &ConnCtx<'_>, n: &Node) -> u64 {
    if n.flags & MYSELF != 0 {
        cluster::own_offset(ctx.shared)
    } else {
        n.repl_offset
    }
}

/// The replicas of `master` that CLUSTER SLOTS lists: not failing, and with some of the
/// history (redis-server's isReplicaAvailable).
fn available_replicas<'s>(ctx: &ConnCtx<'_>, state: &'s State, master: &Node) -> Vec<&'s Node> {
    state
        .replicas_of(&master.id)
        .into_iter()
        .filter(|r| !r.failed() && offset_of(ctx, r) != 0)
        .collect()
}

/// `CLUSTER SLOTS`: each run of slots one node serves, in slot order, with the node and
/// its replicas.
fn slots(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let Some(c) = cluster(ctx) else {
        return;
    };
    let state = c.lock();
    let mut runs: Vec<(usize, usize, &Node)> = Vec::new();
    for (slot, owner) in state.slots.iter().enumerate() {
        let Some(node) = owner.and_then(|id| state.nodes.get(&id)) else {
            continue;
        };
        match runs.last_mut() {
            Some((_, last, n)) if *last + 1 == slot && n.id == node.id => *last = slot,
            _ => runs.push((slot, slot, node)),
        }
    }
    let replicas: Vec<Vec<&Node>> = runs
        .iter()
        .map(|(_, _, node)| available_replicas(ctx, &state, node))
        .collect();
    let mut e = ctx.reply();
    e.array(runs.len());
    for ((first, last, node), replicas) in runs.into_iter().zip(replicas) {
        e.array(3 + replicas.len());
        e.integer(first as i64);
        e.integer(last as i64);
        slots_node(&mut e, &state, node);
        for r in replicas {
            slots_node(&mut e, &state, r);
        }
    }
}

/// `CLUSTER SHARDS`: a shard per master: its slots, then the master and its replicas.
fn shards(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let Some(c) = cluster(ctx) else {
        return;
    };
    let state = c.lock();
    let masters: Vec<(&Node, Vec<&Node>)> = state
        .sorted_nodes()
        .into_iter()
        .filter(|n| n.flags & MASTER != 0 && n.flags & HANDSHAKE == 0)
        .map(|n| (n, state.replicas_of(&n.id)))
        .collect();
    let offsets: Vec<Vec<u64>> = masters
        .iter()
        .map(|(m, rs)| {
            std::iter::once(m)
                .chain(rs.iter())
                .map(|n| offset_of(ctx, n))
                .collect()
        })
        .collect();
    let mut e = ctx.reply();
    e.array(masters.len());
    for ((n, replicas), offsets) in masters.into_iter().zip(offsets) {
        e.map(2);
        e.bulk(b"slots");
        let ranges = n.slot_ranges();
        e.array(ranges.len() * 2);
        for (first, last) in ranges {
            e.integer(first as i64);
            e.integer(last as i64);
        }
        e.bulk(b"nodes");
        e.array(1 + replicas.len());
        for (n, offset) in std::iter::once(n).chain(replicas).zip(offsets) {
            shard_node(&mut e, &state, n, offset);
        }
    }
}

/// A node as CLUSTER SHARDS describes it.
fn shard_node(e: &mut Encoder<'_>, state: &State, n: &Node, offset: u64) {
    e.map(7 + usize::from(!n.hostname.is_empty()));
    e.bulk(b"id");
    e.bulk(&n.id);
    e.bulk(b"port");
    e.integer(i64::from(n.port));
    e.bulk(b"ip");
    e.bulk(n.ip.as_bytes());
    e.bulk(b"endpoint");
    e.bulk(state.endpoint(n).as_bytes());
    if !n.hostname.is_empty() {
        e.bulk(b"hostname");
        e.bulk(n.hostname.as_bytes());
    }
    e.bulk(b"role");
    e.bulk(if n.is_replica() {
        b"replica"
    } else {
        b"master"
    });
    e.bulk(b"replication-offset");
    e.integer(i64::try_from(offset).unwrap_or(i64::MAX));
    e.bulk(b"health");
    let health = if n.failed() {
        "fail"
    } else if n.is_replica() && offset == 0 {
        "loading"
    } else {
        "online"
    };
    e.bulk(health.as_bytes());
}

/// `CLUSTER LINKS`
fn links(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let Some(c) = cluster(ctx) else {
        return;
    };
    let mut links = c.lock().links.clone();
    // Node by node, its outbound link then its inbound one, as redis-server lists them
    // (clients pair them up).
    links.sort_by(|a, b| a.node.cmp(&b.node).then(b.outbound.cmp(&a.outbound)));
    let mut e = ctx.reply();
    e.array(links.len());
    for l in links {
        e.map(6);
        e.bulk(b"direction");
        e.bulk(if l.outbound { b"to" } else { b"from" });
        e.bulk(b"node");
        e.bulk(&l.node);
        e.bulk(b"create-time");
        e.integer(l.created as i64);
        e.bulk(b"events");
        e.bulk(if l.send_used > 0 { b"rw" } else { b"r" });
        e.bulk(b"send-buffer-allocated");
        e.integer(l.send_allocated as i64);
        e.bulk(b"send-buffer-used");
        e.integer(l.send_used as i64);
    }
}

/// `CLUSTER KEYSLOT key`
fn keyslot(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    if cluster(ctx).is_none() {
        return;
    }
    ctx.reply().integer(i64::from(key_slot(args.get(2))));
}

/// A slot number, or redis-server's error.
fn slot_arg(arg: &[u8]) -> Result<usize, Vec<u8>> {
    parse_i64(arg)
        .and_then(|s| usize::try_from(s).ok())
        .filter(|&s| s < SLOTS)
        .ok_or_else(|| b"ERR Invalid or out of range slot".to_vec())
}

/// Checks that `first..=last` can be added (`del`: removed), counting each slot in
/// `seen` (redis-server's checkSlotAssignmentsOrReply).
fn check_slots(
    state: &State,
    seen: &mut [u8],
    del: bool,
    first: usize,
    last: usize,
) -> Result<(), Vec<u8>> {
    for (slot, count) in seen.iter_mut().enumerate().take(last + 1).skip(first) {
        if del && state.slots[slot].is_none() {
            return Err(format!("ERR Slot {slot} is already unassigned").into_bytes());
        }
        if !del && state.slots[slot].is_some() {
            return Err(format!("ERR Slot {slot} is already busy").into_bytes());
        }
        *count += 1;
        if *count == 2 {
            return Err(format!("ERR Slot {slot} specified multiple times").into_bytes());
        }
    }
    Ok(())
}

/// ADDSLOTS, DELSLOTS and their RANGE forms: every argument checked, then every slot.
fn change_slots(ctx: &mut ConnCtx<'_>, args: &Args<'_>, del: bool, ranges: bool) {
    let Some(c) = cluster(ctx) else {
        return;
    };
    if ranges && args.len() % 2 == 1 {
        let name = if del {
            "delslotsrange"
        } else {
            "addslotsrange"
        };
        ctx.reply()
            .error(&crate::errors::wrong_arity(&format!("cluster|{name}")));
        return;
    }
    let mut wanted = Vec::new();
    let words: Vec<&[u8]> = args.iter_from(2).collect();
    if ranges {
        for pair in words.chunks(2) {
            let (first, last) = match (slot_arg(pair[0]), slot_arg(pair[1])) {
                (Ok(a), Ok(b)) => (a, b),
                (Err(e), _) | (_, Err(e)) => {
                    ctx.reply().error(&e);
                    return;
                }
            };
            if first > last {
                ctx.reply().error(
                    format!("ERR start slot number {first} is greater than end slot number {last}")
                        .as_bytes(),
                );
                return;
            }
            wanted.push((first, last));
        }
    } else {
        for w in &words {
            match slot_arg(w) {
                Ok(s) => wanted.push((s, s)),
                Err(e) => {
                    ctx.reply().error(&e);
                    return;
                }
            }
        }
    }
    let mut state = c.lock();
    let mut seen = vec![0u8; SLOTS];
    for &(first, last) in &wanted {
        if let Err(e) = check_slots(&state, &mut seen, del, first, last) {
            drop(state);
            ctx.reply().error(&e);
            return;
        }
    }
    let me = state.myself;
    for (first, last) in wanted {
        for slot in first..=last {
            state.importing_from.remove(&slot);
            state.assign(slot, (!del).then_some(me));
        }
    }
    c.changed(&mut state);
    drop(state);
    ctx.reply().ok();
}

fn addslots(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    change_slots(ctx, args, false, false);
}

fn addslotsrange(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    change_slots(ctx, args, false, true);
}

fn delslots(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    change_slots(ctx, args, true, false);
}

fn delslotsrange(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    change_slots(ctx, args, true, true);
}

/// `CLUSTER MEET ip port [bus-port]`: a handshake with the node there begins (the bus
/// sends it a MEET; its PONG names it).
fn meet(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let Some(c) = cluster(ctx) else {
        return;
    };
    let (ip, port) = (args.get(2), args.get(3));
    let Some(port_n) = parse_i64(port) else {
        ctx.reply().error(
            format!(
                "ERR Invalid TCP base port specified: {}",
                String::from_utf8_lossy(port)
            )
            .as_bytes(),
        );
        return;
    };
    let cport_n = if args.len() > 4 {
        match parse_i64(args.get(4)) {
            Some(p) => p,
            None => {
                ctx.reply().error(
                    format!(
                        "ERR Invalid TCP bus port specified: {}",
                        String::from_utf8_lossy(args.get(4))
                    )
                    .as_bytes(),
                );
                return;
            }
        }
    } else {
        port_n + 10000
    };
    let parsed: Option<IpAddr> = std::str::from_utf8(ip).ok().and_then(|s| s.parse().ok());
    let valid = |p: i64| (1..=65535).contains(&p);
    let (Some(addr), true, true) = (parsed, valid(port_n), valid(cport_n)) else {
        ctx.reply().error(
            format!(
                "ERR Invalid node address specified: {}:{}",
                String::from_utf8_lossy(ip),
                String::from_utf8_lossy(port)
            )
            .as_bytes(),
        );
        return;
    };
    let ip = cluster::ip_text(addr);
    let mut state = c.lock();
    let pending = state
        .nodes
        .values()
        .any(|n| n.flags & HANDSHAKE != 0 && n.ip == ip && i64::from(n.port) == port_n);
    if !pending {
        let id = cluster::random_id();
        let node = Node::new(
            id,
            &ip,
            port_n as u16,
            cport_n as u16,
            HANDSHAKE | MEET,
            ctx.now,
        );
        state.nodes.insert(id, node);
        c.changed(&mut state);
    }
    drop(state);
    ctx.reply().ok();
}

/// `CLUSTER FORGET node`: removed, and not added back by gossip for a minute.
fn forget(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let Some(c) = cluster(ctx) else {
        return;
    };
    let mut state = c.lock();
    let Some(id) = state.lookup(args.get(2)).map(|n| n.id) else {
        drop(state);
        unknown_node(ctx, args.get(2));
        return;
    };
    if id == state.myself {
        drop(state);
        ctx.reply()
            .error(b"ERR I tried hard but I can't forget myself...");
        return;
    }
    state.remove_node(&id);
    state.forgotten.insert(id, ctx.now + cluster::FORGET_TTL);
    c.changed(&mut state);
    drop(state);
    ctx.reply().ok();
}

fn unknown_node(ctx: &mut ConnCtx<'_>, name: &[u8]) {
    ctx.reply().error(&unknown_node_error(name));
}

/// `ERR Unknown node <name>`.
fn unknown_node_error(name: &[u8]) -> Vec<u8> {
    format!("ERR Unknown node {}", String::from_utf8_lossy(name)).into_bytes()
}

/// `CLUSTER SET-CONFIG-EPOCH epoch`: only on a node that knows no other.
fn set_config_epoch(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let Some(c) = cluster(ctx) else {
        return;
    };
    let Some(epoch) = parse_i64(args.get(2)) else {
        ctx.reply().error(crate::errors::NOT_INTEGER);
        return;
    };
    let mut state = c.lock();
    let error: Option<Vec<u8>> = if epoch < 0 {
        Some(format!("ERR Invalid config epoch specified: {epoch}").into_bytes())
    } else if state.nodes.len() > 1 {
        Some(b"ERR The user can assign a config epoch only when the node does not know any other node.".to_vec())
    } else if state.me().config_epoch != 0 {
        Some(b"ERR Node config epoch is already non-zero".to_vec())
    } else {
        let epoch = epoch as u64;
        state.me_mut().config_epoch = epoch;
        if state.current_epoch < epoch {
            state.current_epoch = epoch;
        }
        c.changed(&mut state);
        None
    };
    drop(state);
    match error {
        Some(e) => ctx.reply().error(&e),
        None => ctx.reply().ok(),
    }
}

/// Takes a new config epoch unless this node's is already the greatest and non-zero
/// (redis-server's clusterBumpConfigEpochWithoutConsensus): true when it did.
fn bump_epoch(state: &mut State) -> bool {
    let max = state.max_epoch();
    let mine = state.me().config_epoch;
    if mine == 0 || mine != max {
        state.current_epoch = max + 1;
        let epoch = state.current_epoch;
        state.me_mut().config_epoch = epoch;
        true
    } else {
        false
    }
}

/// `CLUSTER BUMPEPOCH`
fn bumpepoch(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let Some(c) = cluster(ctx) else {
        return;
    };
    let mut state = c.lock();
    let bumped = bump_epoch(&mut state);
    let epoch = state.me().config_epoch;
    if bumped {
        c.changed(&mut state);
    }
    drop(state);
    let word = if bumped { "BUMPED" } else { "STILL" };
    ctx.reply().simple(format!("{word} {epoch}").as_bytes());
}

/// `CLUSTER COUNT-FAILURE-REPORTS node`
fn count_failure_reports(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let Some(c) = cluster(ctx) else {
        return;
    };
    let count = c.lock().lookup(args.get(2)).map(|n| n.fail_reports.len());
    match count {
        Some(n) => ctx.reply().integer(n as i64),
        None => unknown_node(ctx, args.get(2)),
    }
}

/// `CLUSTER SAVECONFIG`
fn saveconfig(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    let Some(c) = cluster(ctx) else {
        return;
    };
    match c.save_now() {
        Ok(()) => ctx.reply().ok(),
        Err(e) => ctx
            .reply()
            .error(format!("ERR error saving the cluster node config: {e}").as_bytes()),
    }
}

/// `CLUSTER REPLICAS node`, `CLUSTER SLAVES node`: the CLUSTER NODES lines of a
/// master's replicas.
fn replicas(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let Some(c) = cluster(ctx) else {
        return;
    };
    let state = c.lock();
    let lines = state.lookup(args.get(2)).map(|n| {
        if n.is_replica() {
            return None;
        }
        let replicas = state.replicas_of(&n.id);
        Some(
            replicas
                .into_iter()
                .map(|r| state.node_line(r))
                .collect::<Vec<_>>(),
        )
    });
    drop(state);
    match lines {
        None => unknown_node(ctx, args.get(2)),
        Some(None) => ctx.reply().error(b"ERR The specified node is not a master"),
        Some(Some(lines)) => {
            let mut e = ctx.reply();
            e.array(lines.len());
            for line in lines {
                e.bulk(line.as_bytes());
            }
        }
    }
}

/// CLUSTER REPLICATE's checks, in redis-server's order, before and after the keys are
/// counted (`keys`: this master's keys, once counted): the master to follow.
fn replicate_target(state: &State, name: &[u8], keys: Option<i64>) -> Result<NodeId, Vec<u8>> {
    let Some(n) = state.lookup(name) else {
        return Err(unknown_node_error(name));
    };
    if n.id == state.myself {
        return Err(b"ERR Can't replicate myself".to_vec());
    }
    if n.is_replica() {
        return Err(b"ERR I can only replicate a master, not a replica.".to_vec());
    }
    let me = state.me();
    if !me.is_replica() && (me.slot_count() != 0 || keys.is_some_and(|k| k != 0)) {
        return Err(
            b"ERR To set a master the node must be empty and without assigned slots.".to_vec(),
        );
    }
    Ok(n.id)
}

/// `CLUSTER REPLICATE node`: this node becomes a replica of that master — a master only
/// when it has no slot and no key (counted on every shard). It follows the master once
/// the routes change (`Worker::follow_cluster_role`).
fn replicate_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    require_cluster(start)?;
    if let Some(c) = start.shared.cluster.as_deref() {
        replicate_target(&c.lock(), start.args.get(2), None)?;
    }
    Ok(Box::new(FanOut::new(
        start.args,
        count_part,
        replicate_merge,
    )))
}

fn replicate_merge(cx: &PlanCx<'_>, args: &[Vec<u8>], parts: Vec<HopOut>) -> Outcome {
    let Some(c) = cx.shared.cluster.as_deref() else {
        return cx.reply(|e| e.error(DISABLED));
    };
    let name = args.get(2).map_or(&[][..], Vec::as_slice);
    let mut state = c.lock();
    match replicate_target(&state, name, Some(total(&parts))) {
        Ok(master) => {
            state.set_master(master);
            c.changed(&mut state);
            drop(state);
            cx.reply(|e| e.ok())
        }
        Err(e) => {
            drop(state);
            cx.reply(|out| out.error(&e))
        }
    }
}

/// `CLUSTER FAILOVER [FORCE|TAKEOVER]`, on a replica: TAKEOVER takes its master's
/// slots at once with a new epoch of its own; FORCE asks the masters' votes at once;
/// without either, the master pauses its writes until this replica has its whole
/// stream, then the replica asks the votes (the bus's cron takes the steps).
fn failover(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let Some(c) = cluster(ctx) else {
        return;
    };
    let mode = args.get(2);
    let (force, takeover) = match args.len() {
        2 => (false, false),
        3 if mode.eq_ignore_ascii_case(b"force") => (true, false),
        3 if mode.eq_ignore_ascii_case(b"takeover") => (true, true),
        3 => {
            ctx.reply().error(crate::errors::SYNTAX);
            return;
        }
        _ => {
            let e = crate::errors::subcommand_syntax(b"cluster", args.get(1));
            ctx.reply().error(&e);
            return;
        }
    };
    let mut state = c.lock();
    let me = state.me();
    let refusal: Option<&[u8]> = if !me.is_replica() {
        Some(b"ERR You should send CLUSTER FAILOVER to a replica")
    } else if state.my_master().is_none() {
        Some(b"ERR I'm a replica but my master is unknown to me")
    } else if !force && state.my_master().is_some_and(|m| m.failed() || !m.linked) {
        Some(b"ERR Master is down or failed, please use CLUSTER FAILOVER FORCE")
    } else {
        None
    };
    if let Some(refusal) = refusal {
        drop(state);
        ctx.reply().error(refusal);
        return;
    }
    state.election = None;
    state.manual = Some(cluster::Manual {
        until: ctx.now + cluster::MANUAL_TIMEOUT,
        force,
        asked: false,
        master_offset: None,
        replica: None,
        paused_at: 0,
    });
    if takeover {
        crate::log!(Warning, "Taking over the master (user request).");
        bump_epoch(&mut state);
        state.replace_master();
    } else if force {
        crate::log!(Warning, "Forced failover user request accepted.");
    } else {
        crate::log!(Warning, "Manual failover user request accepted.");
    }
    c.changed(&mut state);
    drop(state);
    ctx.reply().ok();
}

/// `ASKING`: the client's next command may run in a slot this node imports.
fn asking(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    if cluster(ctx).is_none() {
        return;
    }
    ctx.client.asking = true;
    ctx.reply().ok();
}

/// `READONLY`: on a replica, the client's reads of its master's slots are served here.
fn readonly(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    if cluster(ctx).is_none() {
        return;
    }
    ctx.client.readonly = true;
    ctx.reply().ok();
}

/// `READWRITE`: the client's reads are redirected to the master again.
fn readwrite(ctx: &mut ConnCtx<'_>, _args: &Args<'_>) {
    if cluster(ctx).is_none() {
        return;
    }
    ctx.client.readonly = false;
    ctx.reply().ok();
}

/// A plan that is refused when the node is not in cluster mode.
fn require_cluster(start: &PlanStart<'_>) -> Result<(), Vec<u8>> {
    if start.shared.cluster.is_none() {
        Err(DISABLED.to_vec())
    } else {
        Ok(())
    }
}

/// What a plan on one slot's shard does.
#[derive(Debug, Clone, Copy)]
enum SlotWork {
    Count,
    Keys(usize),
    SetSlot(SetSlot),
}

/// SETSLOT's actions.
#[derive(Debug, Clone, Copy)]
enum SetSlot {
    Migrating(NodeId),
    Importing(NodeId),
    Stable,
    Node(NodeId),
}

/// A plan that visits the shard of one slot (counting or listing its keys), then answers.
#[derive(Debug)]
struct SlotPlan {
    slot: usize,
    work: SlotWork,
    sent: bool,
}

impl Plan for SlotPlan {
    fn next(&mut self, cx: &PlanCx<'_>, mut results: Vec<HopOut>) -> Step {
        if !self.sent {
            self.sent = true;
            let slot = self.slot;
            // Only giving away a slot of this node's needs its keys counted.
            if let SlotWork::SetSlot(action) = self.work
                && !gives_away(cx, slot, action)
            {
                let reply = setslot_apply(cx, slot, action, 0);
                return cx.done(|e| match reply {
                    Ok(()) => e.ok(),
                    Err(err) => e.error(&err),
                });
            }
            let keys = match self.work {
                SlotWork::Keys(n) => Some(n),
                _ => None,
            };
            let shard = cx.slots.shard_of_slot(slot);
            return Step::Hops(vec![Hop::run(
                shard,
                move |ctx: &mut ShardCtx<'_>| match keys {
                    Some(max) => {
                        let mut out = Vec::new();
                        let now = ctx.now;
                        ctx.db.for_each_in_slot(slot as u16, now, |e| {
                            if out.len() < max {
                                out.push(e.key().to_vec());
                            }
                        });
                        HopOut::Keys(out)
                    }
                    None => HopOut::Int(ctx.db.slot_len(slot as u16) as i64),
                },
            )]);
        }
        let result = results.pop();
        match (self.work, result) {
            (SlotWork::Count, Some(HopOut::Int(n))) => cx.done(|e| e.integer(n)),
            (SlotWork::Keys(_), Some(HopOut::Keys(keys))) => cx.done(|e| {
                e.array(keys.len());
                for k in &keys {
                    e.bulk(k);
                }
            }),
            (SlotWork::SetSlot(action), Some(HopOut::Int(n))) => {
                let reply = setslot_apply(cx, self.slot, action, n as usize);
                cx.done(|e| match reply {
                    Ok(()) => e.ok(),
                    Err(err) => e.error(&err),
                })
            }
            _ => cx.done(|e| e.error(b"ERR internal error: a cluster hop failed")),
        }
    }
}

/// `CLUSTER COUNTKEYSINSLOT slot`
fn countkeysinslot_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    require_cluster(start)?;
    let slot = parse_i64(start.args.get(2)).ok_or_else(|| crate::errors::NOT_INTEGER.to_vec())?;
    let slot = usize::try_from(slot)
        .ok()
        .filter(|&s| s < SLOTS)
        .ok_or_else(|| b"ERR Invalid slot".to_vec())?;
    Ok(Box::new(SlotPlan {
        slot,
        work: SlotWork::Count,
        sent: false,
    }))
}

/// `CLUSTER GETKEYSINSLOT slot count`
fn getkeysinslot_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    require_cluster(start)?;
    let slot = parse_i64(start.args.get(2)).ok_or_else(|| crate::errors::NOT_INTEGER.to_vec())?;
    let count = parse_i64(start.args.get(3)).ok_or_else(|| crate::errors::NOT_INTEGER.to_vec())?;
    if count < 0 || slot < 0 || slot >= SLOTS as i64 {
        return Err(b"ERR Invalid slot or number of keys".to_vec());
    }
    Ok(Box::new(SlotPlan {
        slot: slot as usize,
        work: SlotWork::Keys(usize::try_from(count).unwrap_or(usize::MAX)),
        sent: false,
    }))
}

/// `CLUSTER SETSLOT slot IMPORTING|MIGRATING|NODE node | STABLE`: the arguments are
/// checked here, the state where the slot's keys are counted (NODE may not give away a
/// slot whose keys are still here).
fn setslot_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    require_cluster(start)?;
    if let Some(c) = start.shared.cluster.as_deref()
        && c.lock().me().is_replica()
    {
        return Err(b"ERR Please use SETSLOT only with masters.".to_vec());
    }
    let args = start.args;
    let slot = slot_arg(args.get(2))?;
    let action = args.get(3);
    let invalid =
        || b"ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP".to_vec();
    let node = |unknown: &str| -> Result<NodeId, Vec<u8>> {
        let name = args.get(4);
        let cluster = start
            .shared
            .cluster
            .as_deref()
            .ok_or_else(|| DISABLED.to_vec())?;
        let state = cluster.lock();
        let n = state.lookup(name).ok_or_else(|| {
            format!("ERR {unknown} {}", String::from_utf8_lossy(name)).into_bytes()
        })?;
        if n.is_replica() {
            return Err(b"ERR Target node is not a master".to_vec());
        }
        Ok(n.id)
    };
    let action = match (action.to_ascii_lowercase().as_slice(), args.len()) {
        (b"migrating", 5) => SetSlot::Migrating(node("I don't know about node")?),
        (b"importing", 5) => SetSlot::Importing(node("I don't know about node")?),
        (b"stable", 4) => SetSlot::Stable,
        (b"node", 5) => SetSlot::Node(node("Unknown node")?),
        _ => return Err(invalid()),
    };
    Ok(Box::new(SlotPlan {
        slot,
        work: SlotWork::SetSlot(action),
        sent: false,
    }))
}

/// Whether SETSLOT gives a slot this node serves to another node.
fn gives_away(cx: &PlanCx<'_>, slot: usize, action: SetSlot) -> bool {
    let Some(c) = cx.shared.cluster.as_deref() else {
        return false;
    };
    let state = c.lock();
    matches!(action, SetSlot::Node(to) if to != state.myself && state.slots[slot] == Some(state.myself))
}

/// Applies SETSLOT, the slot holding `keys` keys here.
fn setslot_apply(
    cx: &PlanCx<'_>,
    slot: usize,
    action: SetSlot,
    keys: usize,
) -> Result<(), Vec<u8>> {
    let c = cx
        .shared
        .cluster
        .as_deref()
        .ok_or_else(|| DISABLED.to_vec())?;
    let mut state = c.lock();
    let me = state.myself;
    match action {
        SetSlot::Migrating(to) => {
            if state.slots[slot] != Some(me) {
                return Err(format!("ERR I'm not the owner of hash slot {slot}").into_bytes());
            }
            if !state.nodes.contains_key(&to) {
                return Err(format!("ERR I don't know about node {}", id_str(&to)).into_bytes());
            }
            state.migrating_to.insert(slot, to);
        }
        SetSlot::Importing(from) => {
            if state.slots[slot] == Some(me) {
                return Err(format!("ERR I'm already the owner of hash slot {slot}").into_bytes());
            }
            if !state.nodes.contains_key(&from) {
                return Err(format!("ERR I don't know about node {}", id_str(&from)).into_bytes());
            }
            state.importing_from.insert(slot, from);
        }
        SetSlot::Stable => {
            state.migrating_to.remove(&slot);
            state.importing_from.remove(&slot);
        }
        SetSlot::Node(to) => {
            if !state.nodes.contains_key(&to) {
                return Err(format!("ERR Unknown node {}", id_str(&to)).into_bytes());
            }
            if state.slots[slot] == Some(me) && to != me && keys != 0 {
                return Err(format!(
                    "ERR Can't assign hashslot {slot} to a different node while I still hold keys for this hash slot."
                )
                .into_bytes());
            }
            if keys == 0 {
                state.migrating_to.remove(&slot);
            }
            let was_mine = state.slots[slot] == Some(me);
            state.assign(slot, Some(to));
            // A master left without slots becomes a replica of the node that took its
            // last one (redis-server's rule, with `cluster-allow-replica-migration`).
            let live = cx.shared.live();
            let migration =
                crate::config::inert::value(&live.inert, "cluster-allow-replica-migration")
                    != Some("no");
            if was_mine && to != me && state.me().slot_count() == 0 && migration {
                crate::log!(
                    Warning,
                    "Configuration change detected. Reconfiguring myself as a replica of {}",
                    id_str(&to)
                );
                state.set_master(to);
            }
            if to == me && state.importing_from.remove(&slot).is_some() && bump_epoch(&mut state) {
                crate::log!(Notice, "configEpoch updated after importing slot {slot}");
            }
        }
    }
    c.changed(&mut state);
    Ok(())
}

/// Counts the keys of database 0 on a shard.
fn count_part(ctx: &mut ShardCtx<'_>, _args: &[Vec<u8>]) -> HopOut {
    HopOut::Int(ctx.db.len() as i64)
}

fn total(parts: &[HopOut]) -> i64 {
    parts
        .iter()
        .map(|p| match p {
            HopOut::Int(n) => *n,
            _ => 0,
        })
        .sum()
}

/// `CLUSTER FLUSHSLOTS`: only with no key.
fn flushslots_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    require_cluster(start)?;
    Ok(Box::new(FanOut::new(
        start.args,
        count_part,
        flushslots_merge,
    )))
}

fn flushslots_merge(cx: &PlanCx<'_>, _args: &[Vec<u8>], parts: Vec<HopOut>) -> Outcome {
    let Some(c) = cx.shared.cluster.as_deref() else {
        return cx.reply(|e| e.error(DISABLED));
    };
    if total(&parts) != 0 {
        return cx.reply(|e| e.error(b"ERR DB must be empty to perform CLUSTER FLUSHSLOTS."));
    }
    let mut state = c.lock();
    let me = state.myself;
    for slot in 0..SLOTS {
        if state.slots[slot] == Some(me) {
            state.assign(slot, None);
        }
    }
    c.changed(&mut state);
    cx.reply(|e| e.ok())
}

/// `CLUSTER RESET [HARD|SOFT]`: only with no key.
fn reset_plan(start: &PlanStart<'_>) -> Result<Box<dyn Plan>, Vec<u8>> {
    require_cluster(start)?;
    let args = start.args;
    if args.len() > 3 {
        return Err(crate::errors::SYNTAX.to_vec());
    }
    if args.len() == 3
        && !args.get(2).eq_ignore_ascii_case(b"hard")
        && !args.get(2).eq_ignore_ascii_case(b"soft")
    {
        return Err(crate::errors::SYNTAX.to_vec());
    }
    // A replica empties its data and becomes a master (redis-server's clusterReset);
    // a master must have no key.
    let replica = start
        .shared
        .cluster
        .as_deref()
        .is_some_and(|c| c.lock().me().is_replica());
    let part = if replica { clear_part } else { count_part };
    Ok(Box::new(FanOut::new(start.args, part, reset_merge)))
}

/// A replica's RESET part: this shard's keys dropped (what a replica holds is its
/// master's).
fn clear_part(ctx: &mut ShardCtx<'_>, _args: &[Vec<u8>]) -> HopOut {
    ctx.for_each_db(|_, keyspace| {
        keyspace.clear();
    });
    ctx.flushed_every_key();
    HopOut::Int(0)
}

fn reset_merge(cx: &PlanCx<'_>, args: &[Vec<u8>], parts: Vec<HopOut>) -> Outcome {
    let Some(c) = cx.shared.cluster.as_deref() else {
        return cx.reply(|e| e.error(DISABLED));
    };
    if total(&parts) != 0 {
        return cx.reply(|e| {
            e.error(b"ERR CLUSTER RESET can't be called with master nodes containing keys")
        });
    }
    let hard = args.get(2).is_some_and(|a| a.eq_ignore_ascii_case(b"hard"));
    let mut state = c.lock();
    reset(&mut state, hard, cx.now);
    c.changed(&mut state);
    cx.reply(|e| e.ok())
}

/// Forgets every other node and every slot; HARD also takes a new name and zero epochs.
fn reset(state: &mut State, hard: bool, now: goblin_store::Millis) {
    let me = state.me().clone();
    let mut fresh = State::new(
        if hard { cluster::random_id() } else { me.id },
        me.port,
        me.cport,
        now,
    );
    fresh.node_timeout = state.node_timeout;
    fresh.full_coverage = state.full_coverage;
    fresh.writable_after = now;
    if !hard {
        fresh.current_epoch = state.current_epoch;
        fresh.last_vote_epoch = state.last_vote_epoch;
        fresh.me_mut().config_epoch = me.config_epoch;
    }
    fresh.me_mut().ip = me.ip.clone();
    fresh.me_mut().flags = MYSELF | MASTER;
    *state = fresh;
}

/// `CLUSTER MYSHARDID`'s entry (Redis 7.2's; 7.0 lacks it).
static CLUSTER_MYSHARDID: Meta = Meta {
    info: M::Array(&[
        M::Bulk("cluster|myshardid"),
        M::Int(2),
        M::Set(&[M::Simple("loading"), M::Simple("stale")]),
        M::Int(0),
        M::Int(0),
        M::Int(0),
        M::Set(&[M::Simple("@slow")]),
        M::Set(&[M::Bulk("nondeterministic_output")]),
        M::Set(&[]),
        M::Set(&[]),
    ]),
    docs: M::Map(&[
        M::Bulk("summary"),
        M::Bulk("Returns the shard ID of a node."),
        M::Bulk("since"),
        M::Bulk("7.2.0"),
        M::Bulk("group"),
        M::Bulk("cluster"),
        M::Bulk("complexity"),
        M::Bulk("O(1)"),
    ]),
};
