//! Redis Cluster mode: this node's view of the cluster — its nodes, which node serves
//! each hash slot, the epochs that order their claims — kept as redis-server keeps it,
//! spoken about with the other nodes over the cluster bus (`bus.rs`), saved in the
//! cluster configuration file (`conf.rs`), and read by the workers as [`Routes`] to
//! redirect the commands whose keys this node does not serve (`MOVED`, `ASK`).
//!
//! Inside a node, slots stay spread over the shard threads as in standalone mode: the
//! node's slots are a second level above the threads' slot map, which does not change.

pub mod bus;
pub mod conf;
pub mod routes;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use goblin_store::Millis;
use goblin_store::SLOTS;

pub use routes::Routes;

/// A node's name: 40 lowercase hexadecimal digits.
pub type NodeId = [u8; 40];

/// The node is this one.
pub const MYSELF: u16 = 1;
/// The node is a master.
pub const MASTER: u16 = 2;
/// The node did not answer within `cluster-node-timeout` (suspected, `fail?`).
pub const PFAIL: u16 = 4;
/// A majority of masters agree the node failed.
pub const FAIL: u16 = 8;
/// Met, not yet answered: its name is not known yet.
pub const HANDSHAKE: u16 = 16;
/// Its address is not known.
pub const NOADDR: u16 = 32;
/// A MEET is to be sent to it (rather than a PING).
pub const MEET: u16 = 64;
/// The node is a replica (of [`Node::master`]).
pub const SLAVE: u16 = 128;
/// A replica that never starts an election (`cluster-replica-no-failover yes`).
pub const NOFAILOVER: u16 = 256;

/// How long a forgotten node may not be added back by gossip (redis-server: 60 s).
pub const FORGET_TTL: Millis = 60_000;

/// The kinds of bus messages, by the index of their counters.
pub const MESSAGE_KINDS: [&str; 10] = [
    "ping",
    "pong",
    "meet",
    "fail",
    "update",
    "auth-req",
    "auth-ack",
    "mfstart",
    "publish",
    "publishshard",
];

/// One node of the cluster, as this node sees it.
#[derive(Clone, Debug)]
pub struct Node {
    /// Its name.
    pub id: NodeId,
    /// Its shard's name (`CLUSTER MYSHARDID`; without replicas, one per master).
    pub shard_id: NodeId,
    /// Its address ("" while unknown).
    pub ip: String,
    /// Its client port.
    pub port: u16,
    /// Its cluster bus port.
    pub cport: u16,
    /// [`MYSELF`], [`MASTER`], …
    pub flags: u16,
    /// The epoch of its slot claims.
    pub config_epoch: u64,
    /// When the PING awaiting its PONG was sent (0: none awaited).
    pub ping_sent: Millis,
    /// When its last PONG arrived.
    pub pong_received: Millis,
    /// When it was flagged FAIL.
    pub fail_time: Millis,
    /// When this node learned of it.
    pub created: Millis,
    /// The slots it serves, as a bitmap.
    pub slots: Box<[u64; SLOTS / 64]>,
    /// Masters that reported it failing, with when.
    pub fail_reports: Vec<(NodeId, Millis)>,
    /// The bus link to it is up.
    pub linked: bool,
    /// A replica: the master it replicates (`None` for a master, or while unknown).
    pub master: Option<NodeId>,
    /// The replication offset it last announced (a replica's: what it applied).
    pub repl_offset: u64,
    /// A master: when this node last voted for one of its replicas in an election.
    pub voted_time: Millis,
    /// A master that had replicas (or took a failed master's place): one left without
    /// any is a target of replica migration (redis-server's `MIGRATE_TO` flag).
    pub had_replicas: bool,
    /// Since when it is an orphaned master (0: it is not one).
    pub orphaned_since: Millis,
    /// The hostname it announces (`cluster-announce-hostname`; empty: none).
    pub hostname: String,
}

impl Node {
    /// A node named `id` at `ip:port@cport`.
    pub fn new(id: NodeId, ip: &str, port: u16, cport: u16, flags: u16, now: Millis) -> Node {
        Node {
            id,
            shard_id: random_id(),
            ip: ip.to_string(),
            port,
            cport,
            flags,
            config_epoch: 0,
            ping_sent: 0,
            pong_received: 0,
            fail_time: 0,
            created: now,
            slots: Box::new([0; SLOTS / 64]),
            fail_reports: Vec::new(),
            linked: false,
            master: None,
            repl_offset: 0,
            voted_time: 0,
            had_replicas: false,
            orphaned_since: 0,
            hostname: String::new(),
        }
    }

    /// Whether it is a replica.
    pub fn is_replica(&self) -> bool {
        self.flags & SLAVE != 0
    }

    /// Whether it is failing (`fail`, agreed on by a majority).
    pub fn failed(&self) -> bool {
        self.flags & FAIL != 0
    }

    /// Whether it serves `slot`.
    pub fn has_slot(&self, slot: usize) -> bool {
        self.slots[slot / 64] & (1 << (slot % 64)) != 0
    }

    fn set_slot(&mut self, slot: usize, on: bool) {
        if on {
            self.slots[slot / 64] |= 1 << (slot % 64);
        } else {
            self.slots[slot / 64] &= !(1 << (slot % 64));
        }
    }

    /// How many slots it serves.
    pub fn slot_count(&self) -> usize {
        self.slots.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Its slots as ascending `(first, last)` ranges.
    pub fn slot_ranges(&self) -> Vec<(usize, usize)> {
        ranges(slots_of(&self.slots))
    }

    /// Its flags as CLUSTER NODES writes them.
    pub fn flags_text(&self) -> String {
        let mut parts = Vec::new();
        if self.flags & MYSELF != 0 {
            parts.push("myself");
        }
        if self.flags & MASTER != 0 {
            parts.push("master");
        }
        if self.flags & SLAVE != 0 {
            parts.push("slave");
        }
        if self.flags & PFAIL != 0 {
            parts.push("fail?");
        }
        if self.flags & FAIL != 0 {
            parts.push("fail");
        }
        if self.flags & HANDSHAKE != 0 {
            parts.push("handshake");
        }
        if self.flags & NOADDR != 0 {
            parts.push("noaddr");
        }
        if self.flags & NOFAILOVER != 0 {
            parts.push("nofailover");
        }
        if parts.is_empty() {
            parts.push("noflags");
        }
        parts.join(",")
    }

    /// `ip:port@cport[,hostname]`, as CLUSTER NODES writes it.
    pub fn address(&self) -> String {
        let mut address = format!("{}:{}@{}", self.ip, self.port, self.cport);
        if !self.hostname.is_empty() {
            address.push(',');
            address.push_str(&self.hostname);
        }
        address
    }

    /// Its name as text.
    pub fn name(&self) -> &str {
        id_str(&self.id)
    }
}

/// A node name as text (names are ASCII hexadecimal digits).
pub fn id_str(id: &NodeId) -> &str {
    std::str::from_utf8(id).unwrap_or("")
}

/// `text` as a node name, when it is one (40 hexadecimal digits).
pub fn parse_id(text: &[u8]) -> Option<NodeId> {
    let id: NodeId = text.try_into().ok()?;
    id.iter().all(u8::is_ascii_hexdigit).then_some(id)
}

/// A new random node name.
pub fn random_id() -> NodeId {
    let mut id = [b'0'; 40];
    for (d, s) in id
        .iter_mut()
        .zip(crate::runtime::server::new_repl_id().bytes())
    {
        *d = s;
    }
    id
}

/// An address as CLUSTER NODES writes it (an IPv4-mapped IPv6 address as IPv4).
pub fn ip_text(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or_else(|| v6.to_string(), |v4| v4.to_string()),
        std::net::IpAddr::V4(v4) => v4.to_string(),
    }
}

/// The slots a bitmap holds, ascending (empty words skipped).
pub fn slots_of(bitmap: &[u64; SLOTS / 64]) -> impl Iterator<Item = usize> + '_ {
    bitmap.iter().enumerate().flat_map(|(w, &bits)| {
        let mut bits = bits;
        std::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let b = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            Some(w * 64 + b)
        })
    })
}

/// Ascending numbers grouped into `(first, last)` runs.
pub fn ranges(items: impl Iterator<Item = usize>) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for s in items {
        match out.last_mut() {
            Some((_, last)) if *last + 1 == s => *last = s,
            _ => out.push((s, s)),
        }
    }
    out
}

/// One bus link, as CLUSTER LINKS shows it.
#[derive(Clone, Debug)]
pub struct LinkInfo {
    /// `to` (this node connected) or `from` (the peer did).
    pub outbound: bool,
    /// The node at the other end.
    pub node: NodeId,
    /// When it was made.
    pub created: Millis,
    /// Bytes waiting to be sent.
    pub send_used: usize,
    /// Room reserved for them.
    pub send_allocated: usize,
}

/// A replica's election to replace its failed master (redis-server's
/// `clusterHandleSlaveFailover`): it asks the masters for their votes once its delay
/// passed, and takes its master's slots with a majority of them.
#[derive(Clone, Debug)]
pub struct Election {
    /// When it asks for votes (its delay: a random part, and a second per replica of the
    /// same master with more of the history).
    pub at: Millis,
    /// The epoch it asked for (0: not asked yet).
    pub epoch: u64,
    /// Votes received for that epoch.
    pub votes: usize,
    /// A manual failover's: the master's consent is implied (FORCE, or it paused).
    pub forced: bool,
}

/// A manual failover (CLUSTER FAILOVER without TAKEOVER): on the replica that asked,
/// or on its master, which pauses its clients' writes meanwhile.
#[derive(Clone, Debug)]
pub struct Manual {
    /// When it is abandoned (redis-server: 5 s).
    pub until: Millis,
    /// FORCE: the replica does not wait for its master.
    pub force: bool,
    /// On the replica: its master was asked to pause (MFSTART sent).
    pub asked: bool,
    /// On the replica: the offset its paused master announced (`None`: not yet).
    pub master_offset: Option<u64>,
    /// On the master: the replica it paused its writes for.
    pub replica: Option<NodeId>,
    /// On the master: when the pause began.
    pub paused_at: Millis,
}

/// What a node's view says its server must replicate ([`State::following`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Following {
    /// Nothing: it is a master.
    Nobody,
    /// Its master, whose address is not known yet: nothing changes until it is.
    Unreachable,
    /// The master at this address.
    Master(String, u16),
}

impl Following {
    /// Whether the server's replication (`follow`) is already what this says.
    pub fn holds(&self, follow: &crate::repl::replica::Follow) -> bool {
        match self {
            Following::Nobody => !follow.active.load(Ordering::SeqCst),
            Following::Unreachable => true,
            Following::Master(host, port) => follow.follows(host, *port),
        }
    }
}

/// What clients are told to connect to (`cluster-preferred-endpoint-type`): a node's
/// address, its hostname (`?` when it has none), or an empty endpoint (the address the
/// client used).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Endpoint {
    /// Its IP address.
    #[default]
    Ip,
    /// Its hostname (`?` when it has none).
    Hostname,
    /// An empty endpoint.
    Unknown,
}

/// What this node announces of itself (`cluster-announce-ip`, `-port`, `-bus-port`,
/// `-hostname`) and the endpoint it tells clients (`cluster-preferred-endpoint-type`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Announced {
    /// Its address (empty: the one its peers see).
    pub ip: String,
    /// Its client port (0: the one it listens on).
    pub port: u16,
    /// Its bus port (0: the one it listens on).
    pub bus_port: u16,
    /// Its hostname (empty: none).
    pub hostname: String,
    /// What clients are told to connect to.
    pub endpoint: Endpoint,
}

impl Announced {
    /// As the configuration (the values of `config::inert`) says.
    pub fn from_config(inert: &[String]) -> Announced {
        let option = |name| crate::config::inert::value(inert, name).unwrap_or("");
        Announced {
            ip: option("cluster-announce-ip").to_string(),
            port: option("cluster-announce-port").parse().unwrap_or(0),
            bus_port: option("cluster-announce-bus-port").parse().unwrap_or(0),
            hostname: option("cluster-announce-hostname").to_string(),
            endpoint: match option("cluster-preferred-endpoint-type") {
                "hostname" => Endpoint::Hostname,
                "unknown-endpoint" => Endpoint::Unknown,
                _ => Endpoint::Ip,
            },
        }
    }
}

/// How long a manual failover may take (redis-server's `CLUSTER_MF_TIMEOUT`).
pub const MANUAL_TIMEOUT: Millis = 5000;

/// This node's view of the cluster.
#[derive(Debug)]
pub struct State {
    /// This node's name.
    pub myself: NodeId,
    /// Every known node, this one included.
    pub nodes: HashMap<NodeId, Node>,
    /// Which node serves each slot.
    pub slots: Vec<Option<NodeId>>,
    /// Slots this node is giving to another (`SETSLOT … MIGRATING`).
    pub migrating_to: BTreeMap<usize, NodeId>,
    /// Slots this node is taking from another (`SETSLOT … IMPORTING`).
    pub importing_from: BTreeMap<usize, NodeId>,
    /// The greatest epoch this node has seen.
    pub current_epoch: u64,
    /// The last epoch it voted in (a master grants one vote per epoch).
    pub last_vote_epoch: u64,
    /// A replica's election, while one is due or under way.
    pub election: Option<Election>,
    /// A manual failover (CLUSTER FAILOVER), on the replica that asked for it or on
    /// the master that paused its writes for it.
    pub manual: Option<Manual>,
    /// This node's replication offset, as the bus last read it ([`own_offset`]).
    pub offset: u64,
    /// `cluster-preferred-endpoint-type`.
    pub endpoint: Endpoint,
    /// `cluster-announce-ip` (empty: the address its peers see).
    pub announce_ip: String,
    /// The ports this node listens on (client, bus): what it announces without
    /// `cluster-announce-port` and `cluster-announce-bus-port`.
    pub listening: (u16, u16),
    /// Whether the cluster can serve keys (`cluster_state:ok`).
    pub ok: bool,
    /// Masters serving at least one slot.
    pub size: usize,
    /// Bus messages sent, by kind ([`MESSAGE_KINDS`]).
    pub sent: [u64; 10],
    /// Bus messages received, by kind.
    pub received: [u64; 10],
    /// Links closed for passing `cluster-link-sendbuf-limit`.
    pub links_over_limit: u64,
    /// Nodes CLUSTER FORGET removed, with when they may come back.
    pub forgotten: HashMap<NodeId, Millis>,
    /// The bus's links (kept by the bus thread).
    pub links: Vec<LinkInfo>,
    /// When the state may first turn ok (redis-server waits 2 s after start).
    pub writable_after: Millis,
    /// `cluster-node-timeout`.
    pub node_timeout: u64,
    /// `cluster-require-full-coverage`.
    pub full_coverage: bool,
}

impl State {
    /// A node alone, named `myself`, with no slot.
    pub fn new(myself: NodeId, port: u16, cport: u16, now: Millis) -> State {
        let mut nodes = HashMap::new();
        nodes.insert(
            myself,
            Node::new(myself, "", port, cport, MYSELF | MASTER, now),
        );
        State {
            myself,
            nodes,
            slots: vec![None; SLOTS],
            migrating_to: BTreeMap::new(),
            importing_from: BTreeMap::new(),
            current_epoch: 0,
            last_vote_epoch: 0,
            election: None,
            manual: None,
            offset: 0,
            endpoint: Endpoint::Ip,
            announce_ip: String::new(),
            listening: (port, cport),
            ok: false,
            size: 0,
            sent: [0; 10],
            received: [0; 10],
            links_over_limit: 0,
            forgotten: HashMap::new(),
            links: Vec::new(),
            writable_after: now + 2000,
            node_timeout: 15_000,
            full_coverage: true,
        }
    }

    /// This node.
    pub fn me(&self) -> &Node {
        &self.nodes[&self.myself]
    }

    /// This node, to change.
    pub fn me_mut(&mut self) -> &mut Node {
        let myself = self.myself;
        self.nodes
            .entry(myself)
            .or_insert_with(|| Node::new(myself, "", 0, 0, MYSELF | MASTER, crate::clock::now_ms()))
    }

    /// Gives `slot` to `node` (`None`: to no node).
    pub fn assign(&mut self, slot: usize, node: Option<NodeId>) {
        if let Some(old) = self.slots[slot].and_then(|id| self.nodes.get_mut(&id)) {
            old.set_slot(slot, false);
        }
        self.slots[slot] = node;
        if let Some(new) = node.and_then(|id| self.nodes.get_mut(&id)) {
            new.set_slot(slot, true);
        }
    }

    /// Removes a node: its slots become unassigned, its reports are forgotten.
    pub fn remove_node(&mut self, id: &NodeId) {
        for slot in 0..SLOTS {
            if self.slots[slot] == Some(*id) {
                self.slots[slot] = None;
            }
        }
        self.migrating_to.retain(|_, n| n != id);
        self.importing_from.retain(|_, n| n != id);
        self.nodes.remove(id);
        for node in self.nodes.values_mut() {
            node.fail_reports.retain(|(by, _)| by != id);
            if node.master == Some(*id) {
                node.master = None;
            }
        }
    }

    /// This node's master, when it is a replica whose master is known.
    pub fn my_master(&self) -> Option<&Node> {
        let me = self.me();
        me.master
            .filter(|_| me.is_replica())
            .and_then(|m| self.nodes.get(&m))
    }

    /// What this node's view says the server must replicate.
    pub fn following(&self) -> Following {
        match self.my_master() {
            None => Following::Nobody,
            Some(m) if m.ip.is_empty() => Following::Unreachable,
            Some(m) => Following::Master(m.ip.clone(), m.port),
        }
    }

    /// The replicas of `master`, by name.
    pub fn replicas_of(&self, master: &NodeId) -> Vec<&Node> {
        let mut replicas: Vec<&Node> = self
            .nodes
            .values()
            .filter(|n| n.is_replica() && n.master == Some(*master))
            .collect();
        replicas.sort_unstable_by_key(|n| n.id);
        replicas
    }

    /// This node becomes a replica of `master` (redis-server's clusterSetMaster): a
    /// master gives up its slots and open slots first; any election or manual failover
    /// ends. The workers follow the new master once the routes change
    /// (`Worker::follow_cluster_role`).
    pub fn set_master(&mut self, master: NodeId) {
        let myself = self.myself;
        for slot in 0..SLOTS {
            if self.slots[slot] == Some(myself) {
                self.assign(slot, None);
            }
        }
        self.migrating_to.clear();
        self.importing_from.clear();
        self.election = None;
        self.manual = None;
        let shard = self.nodes.get(&master).map(|m| m.shard_id);
        self.has_replica(&master);
        let me = self.me_mut();
        me.flags = (me.flags & !MASTER) | SLAVE;
        me.master = Some(master);
        if let Some(shard) = shard {
            me.shard_id = shard;
        }
    }

    /// This replica takes its master's place (redis-server's
    /// clusterFailoverReplaceYourMaster): it becomes a master serving every slot its
    /// master served; the old master keeps its name with no slot, until it says it is a
    /// replica of this node. The caller announces it (`Cluster::changed`); the workers
    /// stop following the old master then (`Worker::follow_cluster_role`).
    pub fn replace_master(&mut self) {
        let Some(old) = self.my_master().map(|m| m.id) else {
            return;
        };
        let myself = self.myself;
        self.set_as_master(&myself);
        for slot in 0..SLOTS {
            if self.slots[slot] == Some(old) {
                self.assign(slot, Some(myself));
            }
        }
        self.election = None;
        self.manual = None;
        crate::log!(
            Notice,
            "Failover: this node ({}) replaces its master {} (epoch {}).",
            id_str(&myself),
            id_str(&old),
            self.me().config_epoch
        );
    }

    /// A replica of this node's view becomes a master (or one announced as such).
    pub fn set_as_master(&mut self, id: &NodeId) {
        let myself = self.myself;
        if let Some(n) = self.nodes.get_mut(id) {
            n.flags = (n.flags & !SLAVE) | MASTER;
            n.master = None;
            // (A replica that took its master's place is meant to have replicas.)
            n.had_replicas |= *id != myself;
        }
    }

    /// Notes that `master` has (or had) a replica.
    pub fn has_replica(&mut self, master: &NodeId) {
        if let Some(m) = self.nodes.get_mut(master) {
            m.had_replicas = true;
        }
    }

    /// Renames a node (a handshake's random name for the one its PONG gave).
    pub fn rename(&mut self, old: &NodeId, new: NodeId) {
        let Some(mut node) = self.nodes.remove(old) else {
            return;
        };
        node.id = new;
        node.shard_id = new;
        for slot in 0..SLOTS {
            if self.slots[slot] == Some(*old) {
                self.slots[slot] = Some(new);
            }
        }
        self.nodes.insert(new, node);
    }

    /// The node named by `text`, if known.
    pub fn lookup(&self, text: &[u8]) -> Option<&Node> {
        parse_id(text).and_then(|id| self.nodes.get(&id))
    }

    /// The greatest config epoch of any node.
    pub fn max_epoch(&self) -> u64 {
        self.nodes
            .values()
            .map(|n| n.config_epoch)
            .max()
            .unwrap_or(0)
            .max(self.current_epoch)
    }

    /// Recomputes `ok` and `size` (redis-server's clusterUpdateState): the cluster is ok
    /// when every slot is served by a node not failing (or, without
    /// `cluster-require-full-coverage`, always), once the start-up delay passed. A change
    /// is logged as redis-server logs it (`Cluster state changed: ok`).
    pub fn update_state(&mut self, now: Millis) {
        let mut ok = true;
        if self.full_coverage {
            // (Compared with the few failing nodes: no lookup per slot.)
            let failing: Vec<NodeId> = self
                .nodes
                .values()
                .filter(|n| n.flags & FAIL != 0)
                .map(|n| n.id)
                .collect();
            ok = if failing.is_empty() {
                self.slots.iter().all(Option::is_some)
            } else {
                self.slots
                    .iter()
                    .all(|owner| owner.is_some_and(|id| !failing.contains(&id)))
            };
        }
        // Nodes serving slots that can be reached: a minority partition stops serving.
        let size = self
            .nodes
            .values()
            .filter(|n| n.flags & MASTER != 0 && n.slot_count() > 0)
            .count();
        let reachable = self
            .nodes
            .values()
            .filter(|n| n.flags & MASTER != 0 && n.slot_count() > 0)
            .filter(|n| n.flags & (FAIL | PFAIL) == 0)
            .count();
        if size > 0 && reachable < size / 2 + 1 {
            ok = false;
        }
        self.size = size;
        if ok && !self.ok && now < self.writable_after {
            return;
        }
        if ok != self.ok {
            crate::log!(
                Warning,
                "Cluster state changed: {}",
                if ok { "ok" } else { "fail" }
            );
        }
        self.ok = ok;
    }

    /// The line of `node` in CLUSTER NODES (and in the configuration file): with this
    /// node's open slots (`[slot->-to]`, `[slot-<-from]`) on its own line.
    pub fn node_line(&self, node: &Node) -> String {
        let link = if node.flags & MYSELF != 0 || node.linked {
            "connected"
        } else {
            "disconnected"
        };
        let master = match node.master {
            Some(m) if node.is_replica() => id_str(&m).to_string(),
            _ => "-".to_string(),
        };
        // A replica's epoch is its master's (redis-server's nodeEpoch).
        let epoch = node
            .master
            .filter(|_| node.is_replica())
            .and_then(|m| self.nodes.get(&m))
            .map_or(node.config_epoch, |m| m.config_epoch);
        let mut line = format!(
            "{} {} {} {master} {} {} {} {}",
            node.name(),
            node.address(),
            node.flags_text(),
            node.ping_sent,
            node.pong_received,
            epoch,
            link
        );
        for (first, last) in node.slot_ranges() {
            if first == last {
                line.push_str(&format!(" {first}"));
            } else {
                line.push_str(&format!(" {first}-{last}"));
            }
        }
        if node.flags & MYSELF != 0 {
            for (slot, to) in &self.migrating_to {
                line.push_str(&format!(" [{slot}->-{}]", id_str(to)));
            }
            for (slot, from) in &self.importing_from {
                line.push_str(&format!(" [{slot}-<-{}]", id_str(from)));
            }
        }
        line
    }

    /// Puts what this node announces of itself in force (at start-up, on CONFIG SET, and
    /// each cron of the bus): true when it changed, to be announced.
    pub fn announce(&mut self, a: &Announced) -> bool {
        let mut changed = false;
        if self.endpoint != a.endpoint {
            self.endpoint = a.endpoint;
            changed = true;
        }
        if self.announce_ip != a.ip {
            self.announce_ip.clone_from(&a.ip);
            changed = true;
        }
        let (port, cport) = self.listening;
        let port = if a.port != 0 { a.port } else { port };
        let cport = if a.bus_port != 0 { a.bus_port } else { cport };
        let me = self.me_mut();
        if !a.ip.is_empty() && me.ip != a.ip {
            me.ip.clone_from(&a.ip);
            changed = true;
        }
        if (me.port, me.cport) != (port, cport) {
            (me.port, me.cport) = (port, cport);
            changed = true;
        }
        if me.hostname != a.hostname {
            me.hostname.clone_from(&a.hostname);
            changed = true;
        }
        changed
    }

    /// What clients are told to connect to for `node` (redis-server's
    /// getPreferredEndpoint).
    pub fn endpoint<'n>(&self, node: &'n Node) -> &'n str {
        match self.endpoint {
            Endpoint::Ip => &node.ip,
            Endpoint::Hostname if !node.hostname.is_empty() => &node.hostname,
            Endpoint::Hostname => "?",
            Endpoint::Unknown => "",
        }
    }

    /// The nodes, by name (a stable order for replies and the configuration file).
    pub fn sorted_nodes(&self) -> Vec<&Node> {
        let mut nodes: Vec<&Node> = self.nodes.values().collect();
        nodes.sort_unstable_by_key(|n| n.id);
        nodes
    }

    /// CLUSTER NODES: a line per node, each ended by a newline.
    pub fn nodes_text(&self) -> String {
        let mut out = String::new();
        for node in self.sorted_nodes() {
            out.push_str(&self.node_line(node));
            out.push('\n');
        }
        out
    }
}

/// The cluster, shared by the workers, the CLUSTER commands and the bus thread.
pub struct Cluster {
    state: Mutex<State>,
    /// What the workers read to route: replaced whole on every change that matters.
    routes: Mutex<Arc<Routes>>,
    /// Bumped with every new [`Routes`]: a worker compares it with its copy's.
    version: AtomicU64,
    /// Some slot is migrating or importing here, or was lately: the shards check the
    /// keys of the commands they run against the routes (see [`Routes::unstable`]).
    unstable: AtomicBool,
    /// The configuration file must be written (the bus thread writes it).
    dirty: AtomicBool,
    /// The configuration file.
    pub config_path: PathBuf,
    /// Wakes the bus thread (set once it runs).
    waker: Mutex<Option<Arc<mio::Waker>>>,
    /// `cluster-allow-reads-when-down` (CONFIG SET may change it).
    reads_when_down: AtomicBool,
    /// Publications for the other nodes (PUBLISH: every node; SPUBLISH: the nodes of
    /// this node's shard), which the bus sends.
    publications: Mutex<Vec<Publication>>,
    /// The view says this node is a master (kept with every change).
    master: AtomicBool,
}

/// A message published here, for the other nodes.
#[derive(Debug)]
pub struct Publication {
    /// SPUBLISH: only this shard's nodes.
    pub shard: bool,
    /// The channel.
    pub channel: Vec<u8>,
    /// The message.
    pub message: Vec<u8>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("config_path", &self.config_path)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// The cluster as the configuration file left it, or a new node alone.
    ///
    /// # Errors
    /// When the file exists and cannot be read or parsed (redis-server refuses to start).
    pub fn open(config: &crate::config::Config, port: u16) -> Result<Cluster, String> {
        let path = config.persist.dir.join(&config.cluster.config_file);
        let cport = cluster_port(config, port);
        let now = crate::clock::now_ms();
        let mut state = match std::fs::read_to_string(&path) {
            Ok(text) if !text.trim().is_empty() => conf::parse(&text, now).map_err(|e| {
                format!(
                    "Unrecoverable error: corrupted cluster config file \"{}\": {e}",
                    path.display()
                )
            })?,
            Ok(_) => State::new(random_id(), port, cport, now),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                State::new(random_id(), port, cport, now)
            }
            Err(e) => return Err(format!("Can't read {}: {e}", path.display())),
        };
        state.listening = (port, cport);
        let me = state.me_mut();
        me.port = port;
        me.cport = cport;
        state.announce(&Announced::from_config(&config.inert));
        state.node_timeout = config.cluster.node_timeout.max(1);
        state.full_coverage = config.cluster.require_full_coverage;
        state.update_state(now);
        let routes = Routes::build(&state, 0, now);
        let cluster = Cluster {
            state: Mutex::new(state),
            routes: Mutex::new(Arc::new(routes)),
            version: AtomicU64::new(0),
            unstable: AtomicBool::new(false),
            dirty: AtomicBool::new(true),
            config_path: path,
            waker: Mutex::new(None),
            reads_when_down: AtomicBool::new(config.cluster.allow_reads_when_down),
            publications: Mutex::new(Vec::new()),
            master: AtomicBool::new(true),
        };
        cluster
            .master
            .store(!cluster.lock().me().is_replica(), Ordering::Relaxed);
        cluster.save()?;
        ENABLED.store(true, Ordering::Relaxed);
        Ok(cluster)
    }

    /// CONFIG SET: `cluster-node-timeout`, `cluster-require-full-coverage`,
    /// `cluster-allow-reads-when-down` and what the node announces of itself take effect
    /// (new routes when the coverage rule or an announcement changed).
    pub fn configure(&self, config: &crate::config::ClusterConfig, inert: &[String]) {
        self.reads_when_down
            .store(config.allow_reads_when_down, Ordering::Relaxed);
        let mut state = self.lock();
        state.node_timeout = config.node_timeout.max(1);
        let mut changed = state.announce(&Announced::from_config(inert));
        if state.full_coverage != config.require_full_coverage {
            state.full_coverage = config.require_full_coverage;
            changed = true;
        }
        if changed {
            self.changed(&mut state);
        }
    }

    /// Whether the view says this node is a master: its clients' writes are its own from
    /// the instant it won an election, before its link to the old master has stopped.
    pub fn is_master(&self) -> bool {
        self.master.load(Ordering::Relaxed)
    }

    /// PUBLISH (`shard` false) or SPUBLISH ran here: the bus sends it on to the other
    /// nodes (every node, or this shard's), where their subscribers receive it, as in
    /// Redis Cluster.
    pub fn publish(&self, shard: bool, channel: &[u8], message: &[u8]) {
        self.publications
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Publication {
                shard,
                channel: channel.to_vec(),
                message: message.to_vec(),
            });
        self.wake();
    }

    /// The publications waiting for the bus.
    pub fn take_publications(&self) -> Vec<Publication> {
        std::mem::take(
            &mut *self
                .publications
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Whether keys may be read while the cluster is down (`cluster-allow-reads-when-down`).
    pub fn reads_when_down(&self) -> bool {
        self.reads_when_down.load(Ordering::Relaxed)
    }

    /// The state, locked.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The version of the routes now.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The routes now.
    pub fn routes(&self) -> Arc<Routes> {
        Arc::clone(
            &self
                .routes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Whether the shards must check the commands they run against the routes.
    pub fn unstable(&self) -> bool {
        self.unstable.load(Ordering::Relaxed)
    }

    /// After a change of `state`: recomputes its health, publishes new routes, marks the
    /// configuration to be saved and wakes the bus (a MEET to send, slots to announce).
    pub fn changed(&self, state: &mut State) {
        self.master
            .store(!state.me().is_replica(), Ordering::Relaxed);
        let now = crate::clock::now_ms();
        state.update_state(now);
        let version = self.version.load(Ordering::Relaxed) + 1;
        let routes = Routes::build(state, version, now);
        // Commands routed with the old routes may reach their shards after the change:
        // the shards check their keys against the new ones for a while.
        self.unstable.store(true, Ordering::Relaxed);
        *self
            .routes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(routes);
        self.version.store(version, Ordering::Release);
        self.dirty.store(true, Ordering::Relaxed);
        self.wake();
    }

    /// Lets the shards stop checking keys once no slot has been open for a while (the
    /// bus thread calls it from its cron).
    pub fn settle(&self, now: Millis) {
        let routes = self.routes();
        if !routes.has_open_slots() && now > routes.built_at + 2000 && self.unstable() {
            self.unstable.store(false, Ordering::Relaxed);
        }
    }

    /// Wakes the bus thread.
    pub fn wake(&self) {
        if let Some(w) = self
            .waker
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
        {
            let _ = w.wake();
        }
    }

    /// Writes the configuration file if it changed (atomically: a temporary file renamed
    /// over it).
    ///
    /// # Errors
    /// When it cannot be written.
    pub fn save(&self) -> Result<(), String> {
        if !self.dirty.swap(false, Ordering::Relaxed) {
            return Ok(());
        }
        let text = conf::render(&self.lock());
        conf::write(&self.config_path, &text).map_err(|e| {
            self.dirty.store(true, Ordering::Relaxed);
            format!(
                "Could not save the cluster configuration to {}: {e}",
                self.config_path.display()
            )
        })
    }

    /// Marks the configuration to be saved (an epoch changed, nothing else).
    pub fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::Relaxed);
    }

    /// Saves now (CLUSTER SAVECONFIG).
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn save_now(&self) -> Result<(), String> {
        self.dirty.store(true, Ordering::Relaxed);
        self.save()
    }
}

/// This node's replication offset as the bus announces it and CLUSTER SLOTS and SHARDS
/// show it: a replica's, what it applied; a master's, its stream's length.
pub fn own_offset(shared: &crate::runtime::server::Shared) -> u64 {
    let offset = match shared.follow.view() {
        Some(link) => link.offset,
        None => shared.repl.offset.load(Ordering::SeqCst),
    };
    u64::try_from(offset).unwrap_or(0)
}

/// Whether this process runs in cluster mode (set once, as the cluster opens): for the
/// code that has no [`crate::runtime::server::Shared`] at hand (MIGRATE's shard part).
static ENABLED: AtomicBool = AtomicBool::new(false);

/// The routes now, from `cache` (a thread's copy) unless the cluster's version moved on:
/// one atomic load in the common case.
pub fn current<'a>(cache: &'a mut Option<Arc<Routes>>, cluster: &Cluster) -> &'a Arc<Routes> {
    let version = cluster.version();
    if cache.as_ref().is_none_or(|r| r.version != version) {
        *cache = Some(cluster.routes());
    }
    cache.get_or_insert_with(|| cluster.routes())
}

/// Whether this process runs in cluster mode.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The cluster bus's port: `cluster-port`, or the client port + 10000.
pub fn cluster_port(config: &crate::config::Config, port: u16) -> u16 {
    if config.cluster.port != 0 {
        config.cluster.port
    } else {
        port.wrapping_add(10000)
    }
}
