//! What the workers read to route a command in cluster mode: an immutable snapshot of
//! which node serves each slot, replaced whole when the cluster's state changes
//! ([`super::Cluster::changed`]), and the redirections of Redis Cluster
//! (redis-server's `getNodeByQuery`), with its error texts.

use goblin_store::Millis;
use goblin_store::SLOTS;

use super::State;

/// No node.
const NONE: u16 = u16::MAX;

/// `CROSSSLOT`: the keys of a command (or of a transaction) are in several slots.
pub const CROSSSLOT: &[u8] = b"CROSSSLOT Keys in request don't hash to the same slot";
/// A multi-key command during a migration whose keys are not all on the node yet.
pub const TRYAGAIN: &[u8] = b"TRYAGAIN Multiple keys request during rehashing of slot";
/// The slot is served by no node.
pub const UNBOUND: &[u8] = b"CLUSTERDOWN Hash slot not served";
/// The cluster is down (a slot unserved or failing).
pub const DOWN: &[u8] = b"CLUSTERDOWN The cluster is down";
/// The cluster is down and `cluster-allow-reads-when-down` lets only reads through.
pub const DOWN_READS_ONLY: &[u8] =
    b"CLUSTERDOWN The cluster is down and only accepts read commands";

/// A snapshot of the routes.
#[derive(Debug)]
pub struct Routes {
    /// Its version ([`super::Cluster::version`]).
    pub version: u64,
    /// When it was built.
    pub built_at: Millis,
    /// The cluster can serve keys.
    pub ok: bool,
    /// Each slot's node, as an index into `addrs` ([`NONE`]: unserved).
    owner: Vec<u16>,
    /// Per slot: the node it migrates to ([`NONE`]: it does not).
    migrating: Vec<u16>,
    /// Per slot: this node imports it.
    importing: Vec<bool>,
    /// Whether any slot migrates or imports.
    open: bool,
    /// Each node's `ip:port`.
    addrs: Vec<String>,
    /// This node's index in `addrs`.
    me: u16,
    /// A replica: its master's index in `addrs` (else [`NONE`]).
    master: u16,
}

impl Routes {
    /// The routes of `state`.
    pub fn build(state: &State, version: u64, now: Millis) -> Routes {
        let mut ids: Vec<_> = state.nodes.keys().copied().collect();
        ids.sort_unstable();
        let index = |id: &super::NodeId| {
            ids.binary_search(id)
                .ok()
                .and_then(|i| u16::try_from(i).ok())
                .unwrap_or(NONE)
        };
        let addrs = ids
            .iter()
            .map(|id| {
                let n = &state.nodes[id];
                format!("{}:{}", state.endpoint(n), n.port)
            })
            .collect();
        let mut owner = vec![NONE; SLOTS];
        // (Slots come in runs of one node: its index is looked up once per run.)
        let mut last: Option<(super::NodeId, u16)> = None;
        for (slot, node) in state.slots.iter().enumerate() {
            if let Some(id) = node {
                owner[slot] = match last {
                    Some((l, i)) if l == *id => i,
                    _ => {
                        let i = index(id);
                        last = Some((*id, i));
                        i
                    }
                };
            }
        }
        let mut migrating = vec![NONE; SLOTS];
        for (&slot, to) in &state.migrating_to {
            migrating[slot] = index(to);
        }
        let mut importing = vec![false; SLOTS];
        for &slot in state.importing_from.keys() {
            importing[slot] = true;
        }
        Routes {
            version,
            built_at: now,
            ok: state.ok,
            owner,
            migrating,
            importing,
            open: !state.migrating_to.is_empty() || !state.importing_from.is_empty(),
            addrs,
            me: index(&state.myself),
            master: state.my_master().map_or(NONE, |m| index(&m.id)),
        }
    }

    /// Whether this node is a replica of a known master.
    pub fn replica(&self) -> bool {
        self.master != NONE
    }

    /// Whether this node's shard serves `slot`: this node, or, a replica, its master.
    pub fn serves(&self, slot: usize) -> bool {
        self.local(slot)
    }

    /// Whether the keys of `slot` are here: this node serves it, or, a replica, its
    /// master does (its data is the master's).
    fn local(&self, slot: usize) -> bool {
        let owner = self.owner.get(slot).copied().unwrap_or(NONE);
        owner != NONE && (owner == self.me || owner == self.master)
    }

    /// Whether any slot migrates or imports.
    pub fn has_open_slots(&self) -> bool {
        self.open
    }

    /// Whether this node serves `slot`.
    pub fn mine(&self, slot: usize) -> bool {
        self.owner.get(slot) == Some(&self.me)
    }

    fn addr(&self, node: u16) -> &str {
        self.addrs.get(usize::from(node)).map_or("", String::as_str)
    }

    /// The refusal (a redirection or CLUSTERDOWN) of a command this node does not serve,
    /// or `None` when it runs here, as the node that receives it decides before running
    /// it:
    /// `keys` — the slot of its first key and whether another key is in another slot
    /// (`None`: it has no key); `asking` — the client sent ASKING (or the command
    /// implies it); `write` — the command may write (`cluster-allow-reads-when-down`);
    /// `replica_read` — on a replica, the client may read its master's slots here
    /// (READONLY, or sharded Pub/Sub) and the command does not write.
    /// Keys in a migrating slot run here; the shard that owns them answers ASK for the
    /// ones it lacks ([`Routes::on_shard`]).
    pub fn route(
        &self,
        keys: Option<(usize, bool)>,
        asking: bool,
        write: bool,
        reads_when_down: bool,
        replica_read: bool,
    ) -> Option<Vec<u8>> {
        let (first, cross) = keys?;
        let owner = self.owner.get(first).copied().unwrap_or(NONE);
        if owner == NONE {
            return Some(UNBOUND.to_vec());
        }
        if cross {
            return Some(CROSSSLOT.to_vec());
        }
        if !self.ok {
            if !reads_when_down {
                return Some(DOWN.to_vec());
            }
            if write {
                return Some(DOWN_READS_ONLY.to_vec());
            }
        }
        if owner == self.me || (asking && self.importing.get(first) == Some(&true)) {
            return None;
        }
        if replica_read && self.master != NONE && owner == self.master {
            return None;
        }
        Some(self.moved(first))
    }

    /// `MOVED slot ip:port` to the node that serves `slot`.
    pub fn moved(&self, slot: usize) -> Vec<u8> {
        let owner = self.owner.get(slot).copied().unwrap_or(NONE);
        if owner == NONE {
            return UNBOUND.to_vec();
        }
        format!("MOVED {slot} {}", self.addr(owner)).into_bytes()
    }

    /// The refusal (or `None`) the shard that owns a command's keys gives as it runs it,
    /// while slots
    /// move ([`super::Cluster::unstable`]): `missing` — how many of the keys it lacks,
    /// of `keys` keys in all, in `slot`. A key of a slot this node no longer serves (the
    /// routes changed after the command was routed) is redirected; in a slot migrating
    /// away, a command that lacks every key is sent to the slot's new node (`ASK`), and
    /// one that has some of them but not all must wait for the move to end
    /// (`TRYAGAIN`); in a slot being imported (the client asked), a command of several
    /// keys that lacks some must wait too.
    pub fn on_shard(&self, slot: usize, keys: usize, missing: usize) -> Option<Vec<u8>> {
        // A replica applies what its master sends, whatever its routes say (they may
        // lag the master's), and its readers were routed already: no slot moves here.
        if self.replica() {
            return None;
        }
        let importing = self.importing.get(slot) == Some(&true);
        if !self.mine(slot) && !importing {
            return Some(self.moved(slot));
        }
        let to = self.migrating.get(slot).copied().unwrap_or(NONE);
        if to != NONE && missing > 0 {
            if missing < keys {
                return Some(TRYAGAIN.to_vec());
            }
            return Some(format!("ASK {slot} {}", self.addr(to)).into_bytes());
        }
        if importing && keys > 1 && missing > 0 {
            return Some(TRYAGAIN.to_vec());
        }
        None
    }

    /// The redirection a client blocked on a key of `slot` gets when the slot is no longer
    /// this node's (redis-server's clusterRedirectBlockedClientIfNeeded): CLUSTERDOWN
    /// while the cluster is down, MOVED once the slot is another node's (unless this node
    /// is importing it).
    pub fn blocked(&self, slot: usize) -> Option<Vec<u8>> {
        if !self.ok {
            return Some(DOWN.to_vec());
        }
        if self.local(slot) || self.importing.get(slot) == Some(&true) {
            return None;
        }
        Some(self.moved(slot))
    }

    /// Whether `slot` is leaving this node (migrating) or is no longer its own (nor, on
    /// a replica, its master's).
    pub fn leaving(&self, slot: usize) -> bool {
        if self.replica() {
            return false;
        }
        !self.local(slot) || self.migrating.get(slot).is_some_and(|&m| m != NONE)
    }

    /// Whether the shard must look at the keys of a command in `slot` (it is open, or no
    /// longer this node's — nor, on a replica, its master's).
    pub fn needs_check(&self, slot: usize) -> bool {
        !self.replica()
            && (!self.local(slot)
                || self.migrating.get(slot).is_some_and(|&m| m != NONE)
                || self.importing.get(slot) == Some(&true))
    }
}
