//! The cluster bus: one thread that talks with the other nodes on the bus port (the
//! client port + 10000). Goblin nodes speak their own messages (Goblin-to-Goblin only),
//! with redis-server's roles: MEET introduces a node, PING and PONG carry the sender's
//! epochs and slots (a replica's: its master's), its role and replication offset, and
//! gossip about the nodes it knows (so that a node met by one becomes known to all),
//! FAIL spreads a failure a majority agreed on, UPDATE tells a node whose claim on slots
//! is stale who holds them now; AUTH-REQ and AUTH-ACK are a replica's election (its
//! request for the masters' votes, and a vote), MFSTART a manual failover's request to
//! the master to pause its writes.
//!
//! Frames: a 4-byte big-endian length, then the message: its header, its kind's body,
//! then a trailer (the sender's master, its replication offset and the manual-failover
//! flags; a frame without one, of an earlier Goblin, is a master's). Every field is read
//! with its bounds checked: a malformed frame closes its link and changes nothing.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use goblin_store::Millis;
use goblin_store::SLOTS;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};

use super::{
    Cluster, Election, FAIL, HANDSHAKE, LinkInfo, MANUAL_TIMEOUT, MASTER, MEET, MYSELF, Manual,
    NOADDR, NOFAILOVER, Node, NodeId, PFAIL, SLAVE, State, id_str,
};
use crate::clock::now_ms;

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
/// Links are tokens from here on.
const FIRST_LINK: usize = 2;

/// The largest frame accepted: a PUBLISH of the largest string a client may send (a PING
/// about a thousand nodes is far under it). A frame's room grows with what arrives, not
/// with what its length says.
const MAX_FRAME: usize = (512 << 20) + 4096;
/// Identifies Goblin's bus messages.
const MAGIC: &[u8; 4] = b"GBus";

/// How often the cron runs.
const CRON: Duration = Duration::from_millis(100);
/// The least time between two announcements of changes.
const ANNOUNCE_EVERY: Millis = 20;
/// redis-server's `repl-ping-replica-period`, in milliseconds: part of the age a
/// replica's data may have and still fail over.
const REPL_PING_PERIOD: Millis = 10_000;
/// How often each node is pinged (at least: `cluster-node-timeout` / 2 at most).
const PING_EVERY: Millis = 1000;
/// A master paused for a manual failover announces its offset this long after the
/// pause began: commands other threads were running as it began are in it by then.
const PAUSE_SETTLE: Millis = 100;

/// Message kinds, as indices into the counters of CLUSTER INFO.
const PING: u8 = 0;
const PONG: u8 = 1;
const MEET_MSG: u8 = 2;
const FAIL_MSG: u8 = 3;
const UPDATE: u8 = 4;
const AUTH_REQUEST: u8 = 5;
const AUTH_ACK: u8 = 6;
const MFSTART: u8 = 7;
const PUBLISH: u8 = 8;
const PUBLISH_SHARD: u8 = 9;

/// Each kind's number in redis-server's messages (DEBUG DROP-CLUSTER-PACKET-FILTER names
/// them so).
pub fn redis_type(kind: u8) -> i64 {
    match kind {
        PING => 0,
        PONG => 1,
        MEET_MSG => 2,
        FAIL_MSG => 3,
        AUTH_REQUEST => 5,
        AUTH_ACK => 6,
        UPDATE => 7,
        MFSTART => 8,
        PUBLISH => 4,
        PUBLISH_SHARD => 10,
        _ => -1,
    }
}

/// DEBUG DROP-CLUSTER-PACKET-FILTER: messages of this type (redis-server's number) are
/// dropped as they arrive (-1: none).
static DROP_FILTER: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(-1);

/// DEBUG DROP-CLUSTER-PACKET-FILTER `kind`.
pub fn drop_packets(kind: i64) {
    DROP_FILTER.store(kind, std::sync::atomic::Ordering::Relaxed);
}

/// The trailer's tag.
const TRAILER: u8 = b'T';
/// Trailer flags: the sender, a master, paused its writes for a manual failover.
const PAUSED: u8 = 1;
/// Trailer flags: an AUTH-REQ of a manual failover (its master need not be failing).
const FORCEACK: u8 = 2;

/// What a message says about one node it knows.
#[derive(Debug)]
struct Gossip {
    id: NodeId,
    ip: String,
    port: u16,
    cport: u16,
    flags: u16,
}

/// A decoded message.
#[derive(Debug)]
struct Message {
    kind: u8,
    sender: NodeId,
    ip: String,
    port: u16,
    cport: u16,
    current_epoch: u64,
    config_epoch: u64,
    slots: Box<[u64; SLOTS / 64]>,
    gossip: Vec<Gossip>,
    /// FAIL: the failed node; UPDATE: the node whose claim it carries.
    about: Option<NodeId>,
    /// UPDATE: that node's epoch and slots.
    update: Option<(u64, Box<[u64; SLOTS / 64]>)>,
    /// The sender is a replica of this master.
    master: Option<NodeId>,
    /// The sender's replication offset.
    offset: u64,
    /// [`PAUSED`], [`FORCEACK`].
    mflags: u8,
    /// The sender's flags ([`NOFAILOVER`] is read from them).
    flags: u16,
    /// PUBLISH, PUBLISH-SHARD: the channel and the message.
    publication: Option<(Vec<u8>, Vec<u8>)>,
    /// The hostname the sender announces (from the trailer).
    hostname: Option<String>,
}

/// Reads fields off a frame, refusing to go past its end.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.buf.len() < n {
            return None;
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.take(4)?;
        let n = u32::from_be_bytes([n[0], n[1], n[2], n[3]]) as usize;
        self.take(n).map(<[u8]>::to_vec)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
    }
    fn id(&mut self) -> Option<NodeId> {
        self.take(40).and_then(super::parse_id)
    }
    fn ip(&mut self) -> Option<String> {
        let n = usize::from(self.u8()?);
        let text = std::str::from_utf8(self.take(n)?).ok()?;
        Some(text.to_string())
    }
    fn slots(&mut self) -> Option<Box<[u64; SLOTS / 64]>> {
        let mut slots = Box::new([0u64; SLOTS / 64]);
        for w in slots.iter_mut() {
            *w = self.u64()?;
        }
        Some(slots)
    }
}

fn put_ip(out: &mut Vec<u8>, ip: &str) {
    let bytes = &ip.as_bytes()[..ip.len().min(255)];
    out.push(bytes.len() as u8);
    out.extend_from_slice(bytes);
}

fn put_slots(out: &mut Vec<u8>, slots: &[u64; SLOTS / 64]) {
    for w in slots {
        out.extend_from_slice(&w.to_be_bytes());
    }
}

/// Decodes one message (without its length prefix).
fn decode(frame: &[u8]) -> Option<Message> {
    let mut r = Reader { buf: frame };
    if r.take(4)? != MAGIC || r.u8()? != 1 {
        return None;
    }
    let kind = r.u8()?;
    let sender = r.id()?;
    let ip = r.ip()?;
    // (The sender's flags: its role is the trailer's.)
    let (port, cport, flags) = (r.u16()?, r.u16()?, r.u16()?);
    let (current_epoch, config_epoch) = (r.u64()?, r.u64()?);
    let slots = r.slots()?;
    let mut msg = Message {
        kind,
        sender,
        ip,
        port,
        cport,
        current_epoch,
        config_epoch,
        slots,
        gossip: Vec::new(),
        about: None,
        update: None,
        master: None,
        offset: 0,
        mflags: 0,
        flags,
        publication: None,
        hostname: None,
    };
    match kind {
        PING | PONG | MEET_MSG => {
            let count = r.u16()?;
            for _ in 0..count {
                msg.gossip.push(Gossip {
                    id: r.id()?,
                    ip: r.ip()?,
                    port: r.u16()?,
                    cport: r.u16()?,
                    flags: r.u16()?,
                });
            }
        }
        FAIL_MSG => msg.about = Some(r.id()?),
        UPDATE => {
            msg.about = Some(r.id()?);
            msg.update = Some((r.u64()?, r.slots()?));
        }
        AUTH_REQUEST | AUTH_ACK | MFSTART => {}
        PUBLISH | PUBLISH_SHARD => msg.publication = Some((r.bytes()?, r.bytes()?)),
        _ => return None,
    }
    // The trailer (absent from an earlier Goblin's frames: a master's).
    if !r.buf.is_empty() {
        if r.u8()? != TRAILER {
            return None;
        }
        msg.master = match r.u8()? {
            0 => None,
            1 => Some(r.id()?),
            _ => return None,
        };
        msg.offset = r.u64()?;
        msg.mflags = r.u8()?;
        msg.hostname = Some(r.ip()?);
        if !r.buf.is_empty() {
            return None;
        }
    }
    Some(msg)
}

/// Starts a message from this node: kind, then its header — a replica's with its
/// master's epoch and slots, as redis-server's.
fn header(state: &State, kind: u8) -> Vec<u8> {
    let me = state.me();
    let claims = state.my_master().unwrap_or(me);
    let mut out = Vec::with_capacity(2200);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(MAGIC);
    out.push(1);
    out.push(kind);
    out.extend_from_slice(&me.id);
    put_ip(&mut out, &state.announce_ip);
    out.extend_from_slice(&me.port.to_be_bytes());
    out.extend_from_slice(&me.cport.to_be_bytes());
    out.extend_from_slice(&(me.flags & !MYSELF).to_be_bytes());
    out.extend_from_slice(&state.current_epoch.to_be_bytes());
    out.extend_from_slice(&claims.config_epoch.to_be_bytes());
    put_slots(&mut out, &claims.slots);
    out
}

/// Ends a message: its trailer (this node's master, offset and manual-failover flags),
/// then its length prefix.
fn finish(state: &State, mut out: Vec<u8>) -> Vec<u8> {
    out.push(TRAILER);
    match state.me().master.filter(|_| state.me().is_replica()) {
        Some(m) => {
            out.push(1);
            out.extend_from_slice(&m);
        }
        None => out.push(0),
    }
    out.extend_from_slice(&state.offset.to_be_bytes());
    let mut mflags = 0;
    if let Some(m) = &state.manual
        && m.replica.is_some()
        && now_ms() >= m.paused_at + PAUSE_SETTLE
    {
        mflags |= PAUSED;
    }
    if state.election.as_ref().is_some_and(|e| e.forced) {
        mflags |= FORCEACK;
    }
    out.push(mflags);
    put_ip(&mut out, &state.me().hostname);
    let len = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    out
}

/// A PING, PONG or MEET for `to`, with gossip about every other node.
fn ping(state: &State, kind: u8, to: &NodeId) -> Vec<u8> {
    let mut out = header(state, kind);
    let about: Vec<&Node> = state
        .nodes
        .values()
        .filter(|n| n.id != state.myself && n.id != *to && n.flags & HANDSHAKE == 0)
        .take(u16::MAX as usize)
        .collect();
    out.extend_from_slice(&(about.len() as u16).to_be_bytes());
    for n in about {
        out.extend_from_slice(&n.id);
        put_ip(&mut out, &n.ip);
        out.extend_from_slice(&n.port.to_be_bytes());
        out.extend_from_slice(&n.cport.to_be_bytes());
        out.extend_from_slice(&(n.flags & !MYSELF).to_be_bytes());
    }
    finish(state, out)
}

/// One bus connection.
struct Link {
    stream: TcpStream,
    /// Outbound: the node it was opened to (its name may be a handshake's).
    to: Option<NodeId>,
    /// Inbound: the node that sent on it (once a message came).
    from: Option<NodeId>,
    /// The connection completed (outbound).
    connected: bool,
    input: Vec<u8>,
    output: Vec<u8>,
    created: Millis,
    closing: bool,
}

/// The bus thread's state.
struct Bus {
    cluster: Arc<Cluster>,
    poll: Poll,
    listener: TcpListener,
    links: slab::Slab<Link>,
    /// Outbound links by node.
    outbound: HashMap<NodeId, usize>,
    /// The routes' version last announced to the other nodes.
    announced: u64,
    hooks: Hooks,
    /// This node, a master, paused its clients' writes for a manual failover.
    paused: bool,
    /// Why this replica cannot fail over was logged.
    cant_failover_logged: bool,
    /// `cluster-link-sendbuf-limit`, as last read.
    sendbuf_limit: usize,
    last_cron: Millis,
}

/// This node's replication and the settings the bus follows, as it reads them each
/// cron.
#[derive(Clone, Debug, Default)]
pub struct Local {
    /// Its offset ([`super::own_offset`]).
    pub offset: u64,
    /// A replica: how old its data may be, in milliseconds — since the last byte from
    /// its master (or since its link went down, if earlier), as redis-server's
    /// `data_age`.
    pub data_age: Option<Millis>,
    /// `cluster-replica-no-failover`: it never starts an election on its own.
    pub no_failover: bool,
    /// `cluster-replica-validity-factor` (0: its data is never too old).
    pub validity_factor: u64,
    /// `cluster-allow-replica-migration`.
    pub migration: bool,
    /// `cluster-migration-barrier`.
    pub migration_barrier: usize,
    /// `cluster-link-sendbuf-limit` (0: none): a link that holds more unsent bytes is
    /// closed (and made again).
    pub sendbuf_limit: usize,
    /// What this node announces of itself.
    pub announced: super::Announced,
}

/// What the bus asks of the rest of the server.
pub struct Hooks {
    /// Wakes the workers (so that each looks at the new routes: its clients blocked on
    /// a slot that left are redirected; worker 0 follows a new master, or stops).
    pub wake_workers: Box<dyn Fn() + Send>,
    /// This node's replication and settings ([`Local`]).
    pub local: Box<dyn Fn() -> Local + Send>,
    /// Pauses the clients' writes until the time given (a master's part in a manual
    /// failover), or, with `None`, ends that pause.
    pub pause_writes: Box<dyn Fn(Option<Millis>) + Send>,
    /// Delivers a message another node published to this node's subscribers (`true`:
    /// to a shard channel).
    pub deliver: Deliver,
}

/// Delivers another node's publication here: (to a shard channel, channel, message).
pub type Deliver = Box<dyn Fn(bool, &[u8], &[u8]) + Send>;

/// Binds the bus port and starts its thread.
///
/// # Errors
/// When the port cannot be bound.
pub fn start(cluster: Arc<Cluster>, ip: IpAddr, port: u16, hooks: Hooks) -> io::Result<()> {
    let listener = TcpListener::bind(SocketAddr::new(ip, port))?;
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    *cluster
        .waker
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(waker);
    let mut bus = Bus {
        cluster,
        poll,
        listener,
        links: slab::Slab::new(),
        outbound: HashMap::new(),
        announced: u64::MAX,
        hooks,
        paused: false,
        cant_failover_logged: false,
        sendbuf_limit: 0,
        last_cron: 0,
    };
    bus.poll
        .registry()
        .register(&mut bus.listener, LISTENER, Interest::READABLE)?;
    std::thread::Builder::new()
        .name("goblin-cluster-bus".into())
        .spawn(move || bus.run())?;
    Ok(())
}

impl Bus {
    fn run(mut self) {
        let mut events = Events::with_capacity(256);
        loop {
            let wait = if self.cluster.version() != self.announced {
                Duration::from_millis(ANNOUNCE_EVERY)
            } else {
                CRON
            };
            if let Err(e) = self.poll.poll(&mut events, Some(wait)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    crate::log!(Warning, "Cluster bus poll failed: {e}");
                    std::thread::sleep(CRON);
                }
                continue;
            }
            for event in &events {
                match event.token() {
                    LISTENER => self.accept(),
                    WAKER => {}
                    Token(t) => {
                        let key = t - FIRST_LINK;
                        if event.is_writable() {
                            self.flush(key);
                        }
                        if event.is_readable() || event.is_read_closed() {
                            self.read(key);
                        }
                    }
                }
            }
            self.reap();
            self.send_publications();
            let now = now_ms();
            // A change is announced to every node at once — changes in quick
            // succession (a reshard's) in one announcement per ANNOUNCE_EVERY.
            let announce =
                self.cluster.version() != self.announced && now >= self.last_cron + ANNOUNCE_EVERY;
            if announce || now >= self.last_cron + CRON.as_millis() as Millis {
                self.cron(now, announce);
            }
            self.reap();
        }
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    self.add_link(stream, None, true);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    crate::log!(Warning, "Cluster bus accept failed: {e}");
                    return;
                }
            }
        }
    }

    fn add_link(&mut self, mut stream: TcpStream, to: Option<NodeId>, connected: bool) -> usize {
        let entry = self.links.vacant_entry();
        let key = entry.key();
        let interest = Interest::READABLE | Interest::WRITABLE;
        let registered =
            self.poll
                .registry()
                .register(&mut stream, Token(key + FIRST_LINK), interest);
        entry.insert(Link {
            stream,
            to,
            from: None,
            connected,
            input: Vec::new(),
            output: Vec::new(),
            created: now_ms(),
            closing: registered.is_err(),
        });
        key
    }

    fn send(&mut self, key: usize, msg: Vec<u8>) {
        if let Some(link) = self.links.get_mut(key) {
            link.output.extend_from_slice(&msg);
        }
        self.flush(key);
    }

    fn flush(&mut self, key: usize) {
        let Some(link) = self.links.get_mut(key) else {
            return;
        };
        if !link.connected {
            match link.stream.peer_addr() {
                Ok(_) => {
                    link.connected = true;
                    let _ = link.stream.set_nodelay(true);
                }
                Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                    if let Ok(Some(_)) | Err(_) = link.stream.take_error() {
                        link.closing = true;
                    }
                    return;
                }
                Err(_) => {
                    link.closing = true;
                    return;
                }
            }
        }
        while !link.output.is_empty() {
            match link.stream.write(&link.output) {
                Ok(0) => {
                    link.closing = true;
                    return;
                }
                Ok(n) => {
                    link.output.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    link.closing = true;
                    return;
                }
            }
        }
    }

    fn read(&mut self, key: usize) {
        let mut frames = Vec::new();
        {
            let Some(link) = self.links.get_mut(key) else {
                return;
            };
            let mut buf = [0u8; 16 * 1024];
            loop {
                match link.stream.read(&mut buf) {
                    Ok(0) => {
                        link.closing = true;
                        break;
                    }
                    Ok(n) => link.input.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        link.closing = true;
                        break;
                    }
                }
            }
            let mut at = 0;
            while link.input.len() >= at + 4 {
                let len = u32::from_be_bytes([
                    link.input[at],
                    link.input[at + 1],
                    link.input[at + 2],
                    link.input[at + 3],
                ]) as usize;
                if len > MAX_FRAME {
                    link.closing = true;
                    break;
                }
                if link.input.len() < at + 4 + len {
                    break;
                }
                frames.push(link.input[at + 4..at + 4 + len].to_vec());
                at += 4 + len;
            }
            link.input.drain(..at);
        }
        for frame in frames {
            match decode(&frame) {
                Some(msg) => self.process(key, msg),
                None => {
                    if let Some(link) = self.links.get_mut(key) {
                        link.closing = true;
                    }
                    return;
                }
            }
        }
    }

    /// Sends what was published here to the other nodes: a PUBLISH to every node, an
    /// SPUBLISH to the nodes of this node's shard (its master and their replicas).
    fn send_publications(&mut self) {
        let publications = self.cluster.take_publications();
        if publications.is_empty() {
            return;
        }
        let cluster = Arc::clone(&self.cluster);
        let mut state = cluster.lock();
        let myself = state.myself;
        let master = state.my_master().map_or(myself, |m| m.id);
        let shard: Vec<NodeId> = state
            .replicas_of(&master)
            .iter()
            .map(|n| n.id)
            .chain(std::iter::once(master))
            .filter(|id| *id != myself)
            .collect();
        for p in publications {
            let kind = if p.shard { PUBLISH_SHARD } else { PUBLISH };
            let mut msg = header(&state, kind);
            for part in [&p.channel, &p.message] {
                msg.extend_from_slice(&(part.len() as u32).to_be_bytes());
                msg.extend_from_slice(part);
            }
            let msg = finish(&state, msg);
            for (node, &key) in &self.outbound {
                let known = state
                    .nodes
                    .get(node)
                    .is_some_and(|n| n.flags & HANDSHAKE == 0);
                if !known || (p.shard && !shard.contains(node)) {
                    continue;
                }
                if let Some(link) = self.links.get_mut(key) {
                    link.output.extend_from_slice(&msg);
                    state.sent[usize::from(kind)] += 1;
                }
            }
        }
        let keys: Vec<usize> = self.outbound.values().copied().collect();
        for key in keys {
            self.flush(key);
            self.limit_output(&mut state, key);
        }
    }

    /// Closes a link whose unsent bytes passed `cluster-link-sendbuf-limit` (its peer
    /// reads nothing: it is made again), counted in CLUSTER INFO.
    fn limit_output(&mut self, state: &mut State, key: usize) {
        let limit = self.sendbuf_limit;
        let Some(link) = self.links.get_mut(key) else {
            return;
        };
        if limit == 0 || link.output.len() <= limit || link.closing {
            return;
        }
        let node = link.to.or(link.from).map(|n| id_str(&n).to_string());
        crate::log!(
            Warning,
            "Freeing cluster link({} node {}, used memory: {}) due to exceeding send buffer \
             memory limit.",
            if link.to.is_some() { "to" } else { "from" },
            node.unwrap_or_default(),
            link.output.capacity()
        );
        link.closing = true;
        state.links_over_limit += 1;
    }

    /// Closes the links that failed, and forgets which node they served.
    fn reap(&mut self) {
        let closing: Vec<usize> = self
            .links
            .iter()
            .filter(|(_, l)| l.closing)
            .map(|(k, _)| k)
            .collect();
        if closing.is_empty() {
            return;
        }
        let mut state = self.cluster.lock();
        for key in closing {
            let mut link = self.links.remove(key);
            let _ = self.poll.registry().deregister(&mut link.stream);
            if let Some(to) = link.to
                && self.outbound.get(&to) == Some(&key)
            {
                self.outbound.remove(&to);
                if let Some(n) = state.nodes.get_mut(&to) {
                    n.linked = false;
                }
            }
        }
    }

    /// What a message from another node changes here.
    fn process(&mut self, key: usize, msg: Message) {
        let filter = DROP_FILTER.load(std::sync::atomic::Ordering::Relaxed);
        if filter != -1 && filter == redis_type(msg.kind) {
            return;
        }
        let now = now_ms();
        let cluster = Arc::clone(&self.cluster);
        let mut state = cluster.lock();
        let mut changed = false;
        let kind = usize::from(msg.kind);
        if let Some(c) = state.received.get_mut(kind) {
            *c += 1;
        }
        let Some(link) = self.links.get_mut(key) else {
            return;
        };
        let inbound = link.to.is_none();
        let peer_ip = link.stream.peer_addr().ok().map(|a| a.ip());
        let local_ip = link.stream.local_addr().ok().map(|a| a.ip());
        if inbound {
            link.from = Some(msg.sender);
        }
        let handshake_to = link.to;
        // This node learns its own address from the first node that talks to it.
        if inbound
            && state.me().ip.is_empty()
            && let Some(ip) = local_ip
        {
            state.me_mut().ip = super::ip_text(ip);
            changed = true;
        }
        let sender_ip = if msg.ip.is_empty() {
            peer_ip.map(super::ip_text).unwrap_or_default()
        } else {
            msg.ip.clone()
        };
        // A PONG on a link opened to a node in handshake names it.
        if msg.kind == PONG
            && let Some(to) = handshake_to
            && to != msg.sender
            && state
                .nodes
                .get(&to)
                .is_some_and(|n| n.flags & HANDSHAKE != 0)
        {
            if state.nodes.contains_key(&msg.sender) {
                state.remove_node(&to);
            } else {
                state.rename(&to, msg.sender);
                if let Some(n) = state.nodes.get_mut(&msg.sender) {
                    n.flags &= !(HANDSHAKE | MEET);
                }
            }
            self.outbound.remove(&to);
            self.outbound.insert(msg.sender, key);
            if let Some(link) = self.links.get_mut(key) {
                link.to = Some(msg.sender);
            }
            changed = true;
        }
        // A PONG from another node than the one the link was opened to (that one was
        // reset, or another took its address): the node it was opened to loses its
        // address, and the link closes (redis-server's "PONG contains mismatching
        // sender ID").
        if msg.kind == PONG
            && let Some(to) = handshake_to
            && to != msg.sender
            && let Some(n) = state.nodes.get_mut(&to)
            && n.flags & HANDSHAKE == 0
        {
            n.flags |= NOADDR;
            n.ip.clear();
            n.port = 0;
            n.cport = 0;
            n.linked = false;
            self.outbound.remove(&to);
            if let Some(link) = self.links.get_mut(key) {
                link.closing = true;
            }
            cluster.changed(&mut state);
            return;
        }
        if msg.sender == state.myself {
            return;
        }
        // A node that introduces itself is added (unless it was forgotten lately); other
        // nodes are learned from gossip, as redis-server learns them.
        if !state.nodes.contains_key(&msg.sender)
            && msg.kind == MEET_MSG
            && state
                .forgotten
                .get(&msg.sender)
                .is_none_or(|&until| until <= now)
            && !sender_ip.is_empty()
        {
            let mut node = Node::new(msg.sender, &sender_ip, msg.port, msg.cport, MASTER, now);
            node.shard_id = msg.sender;
            state.nodes.insert(msg.sender, node);
            changed = true;
        }
        if matches!(msg.kind, PING | MEET_MSG) {
            let pong = ping(&state, PONG, &msg.sender);
            state.sent[usize::from(PONG)] += 1;
            drop(state);
            self.send(key, pong);
            state = cluster.lock();
        }
        if !state.nodes.contains_key(&msg.sender) {
            if changed {
                cluster.changed(&mut state);
            }
            return;
        }
        if msg.current_epoch > state.current_epoch {
            state.current_epoch = msg.current_epoch;
            cluster.mark_dirty();
        }
        let timeout = state.node_timeout;
        changed |= learn_role(&mut state, &msg);
        if let Some(node) = state.nodes.get_mut(&msg.sender) {
            node.repl_offset = msg.offset;
            if let Some(hostname) = &msg.hostname
                && node.hostname != *hostname
            {
                node.hostname.clone_from(hostname);
                changed = true;
            }
            if (node.flags ^ msg.flags) & NOFAILOVER != 0 {
                node.flags ^= NOFAILOVER;
                changed = true;
            }
            if msg.kind == PONG {
                node.pong_received = now;
                node.ping_sent = 0;
                node.flags &= !MEET;
                if node.flags & PFAIL != 0 {
                    node.flags &= !PFAIL;
                    changed = true;
                }
                if node.flags & FAIL != 0
                    && (node.slot_count() == 0 || now > node.fail_time + 2 * timeout)
                {
                    node.flags &= !FAIL;
                    changed = true;
                }
            }
            if !sender_ip.is_empty()
                && (node.ip != sender_ip || node.port != msg.port || node.cport != msg.cport)
                && matches!(msg.kind, PING | PONG | MEET_MSG)
            {
                node.ip = sender_ip.clone();
                node.port = msg.port;
                node.cport = msg.cport;
                node.flags &= !NOADDR;
                changed = true;
            }
            if msg.config_epoch > node.config_epoch {
                node.config_epoch = msg.config_epoch;
                changed = true;
            }
        }
        let sender_is_master = state
            .nodes
            .get(&msg.sender)
            .is_some_and(|n| !n.is_replica());
        // A manual failover: the paused master's offset, which its replica waits for.
        if msg.mflags & PAUSED != 0
            && state.my_master().is_some_and(|m| m.id == msg.sender)
            && let Some(manual) = state.manual.as_mut()
            && manual.master_offset.is_none()
        {
            crate::log!(
                Notice,
                "Received replication offset for paused master manual failover: {}",
                msg.offset
            );
            manual.master_offset = Some(msg.offset);
        }
        match msg.kind {
            PING | PONG | MEET_MSG => {
                // The common case: the sender claims what this node knows it serves. (A
                // replica's header carries its master's claims: they are its master's to
                // make.)
                let known = state
                    .nodes
                    .get(&msg.sender)
                    .is_some_and(|n| *n.slots == *msg.slots);
                if !known && sender_is_master {
                    changed |= self.claims(&mut state, &msg.sender, msg.config_epoch, &msg.slots);
                    if let Some(update) = stale_claim(&state, &msg.sender, &msg.slots) {
                        state.sent[usize::from(UPDATE)] += 1;
                        drop(state);
                        self.send(key, update);
                        state = cluster.lock();
                    }
                }
                if sender_is_master {
                    changed |= epoch_collision(&mut state, &msg.sender);
                }
                changed |= gossip(&mut state, &msg, now);
            }
            FAIL_MSG => {
                if let Some(about) = msg.about
                    && about != state.myself
                    && let Some(n) = state.nodes.get_mut(&about)
                    && n.flags & FAIL == 0
                {
                    n.flags = (n.flags | FAIL) & !PFAIL;
                    n.fail_time = now;
                    changed = true;
                }
            }
            UPDATE => {
                if let (Some(about), Some((epoch, slots))) = (msg.about, msg.update.as_ref())
                    && let Some(n) = state.nodes.get_mut(&about)
                    && n.config_epoch < *epoch
                {
                    n.config_epoch = *epoch;
                    self.claims(&mut state, &about, *epoch, slots);
                    changed = true;
                }
            }
            AUTH_REQUEST => {
                if let Some(ack) = grant_vote(&mut state, &msg, now) {
                    cluster.mark_dirty();
                    state.sent[usize::from(AUTH_ACK)] += 1;
                    drop(state);
                    self.send(key, ack);
                    state = cluster.lock();
                }
            }
            AUTH_ACK => {
                let size = state.size;
                let voter_serves = state
                    .nodes
                    .get(&msg.sender)
                    .is_some_and(|n| !n.is_replica() && n.slot_count() > 0);
                if voter_serves
                    && let Some(e) = state.election.as_mut()
                    && e.epoch != 0
                    && msg.current_epoch >= e.epoch
                {
                    e.votes += 1;
                    if e.votes > size / 2 {
                        changed |= won(&mut state);
                    }
                }
            }
            PUBLISH | PUBLISH_SHARD => {
                if let Some((channel, message)) = &msg.publication {
                    (self.hooks.deliver)(msg.kind == PUBLISH_SHARD, channel, message);
                }
            }
            // A replica of this master asks it to pause for its manual failover.
            MFSTART
                if state.me().slot_count() > 0
                    && state
                        .nodes
                        .get(&msg.sender)
                        .is_some_and(|n| n.is_replica() && n.master == Some(state.myself)) =>
            {
                crate::log!(
                    Notice,
                    "Manual failover requested by replica {}.",
                    id_str(&msg.sender)
                );
                state.manual = Some(Manual {
                    until: now + MANUAL_TIMEOUT,
                    force: false,
                    asked: false,
                    master_offset: None,
                    replica: Some(msg.sender),
                    paused_at: now,
                });
                (self.hooks.pause_writes)(Some(now + MANUAL_TIMEOUT));
                self.paused = true;
            }
            _ => {}
        }
        if changed {
            cluster.changed(&mut state);
        }
    }

    /// `sender`, a master, claims `slots` at `epoch` ([`claim_slots`]). When the slots
    /// it takes were the last of this node's, or of this replica's master, this node
    /// becomes its replica (redis-server's clusterUpdateSlotsConfigWith): a master
    /// whose replica was promoted in its absence follows it when it comes back, and so
    /// do the old master's other replicas.
    fn claims(
        &mut self,
        state: &mut State,
        sender: &NodeId,
        epoch: u64,
        slots: &[u64; SLOTS / 64],
    ) -> bool {
        let mine = state.my_master().map_or(state.myself, |m| m.id);
        let before = state.nodes.get(&mine).map_or(0, Node::slot_count);
        let changed = claim_slots(state, sender, epoch, slots);
        let after = state.nodes.get(&mine).map_or(0, Node::slot_count);
        if changed
            && before > 0
            && after == 0
            && *sender != state.myself
            && state.me().master != Some(*sender)
        {
            crate::log!(
                Notice,
                "Configuration change detected. Reconfiguring myself as a replica of {}",
                id_str(sender)
            );
            state.set_master(*sender);
        }
        changed
    }

    /// Once every [`CRON`]: links to open, pings to send, silent nodes to suspect,
    /// failures to agree on, the configuration to save.
    fn cron(&mut self, now: Millis, announce: bool) {
        self.last_cron = now;
        let cluster = Arc::clone(&self.cluster);
        let mut state = cluster.lock();
        let mut changed = false;
        let timeout = state.node_timeout;
        let myself = state.myself;
        if announce {
            self.announced = cluster.version();
            (self.hooks.wake_workers)();
        }
        // Handshakes that never completed are dropped.
        let stale: Vec<NodeId> = state
            .nodes
            .values()
            .filter(|n| n.flags & HANDSHAKE != 0 && now > n.created + timeout.max(1000))
            .map(|n| n.id)
            .collect();
        for id in stale {
            state.remove_node(&id);
            changed = true;
        }
        state.forgotten.retain(|_, until| *until > now);
        // Links to nodes no longer known (forgotten, or gone with a CLUSTER RESET) close.
        for (id, &key) in &self.outbound {
            if !state.nodes.contains_key(id)
                && let Some(link) = self.links.get_mut(key)
            {
                link.closing = true;
            }
        }
        let ids: Vec<NodeId> = state.nodes.keys().copied().collect();
        let mut to_send = Vec::new();
        for id in ids {
            if id == myself {
                continue;
            }
            let Some(node) = state.nodes.get(&id) else {
                continue;
            };
            if node.flags & NOADDR != 0 || node.ip.is_empty() {
                continue;
            }
            let link = self.outbound.get(&id).copied();
            // A ping unanswered for half the timeout: the link is made again.
            if let Some(key) = link
                && node.ping_sent != 0
                && now > node.ping_sent + timeout / 2
                && let Some(l) = self.links.get_mut(key)
            {
                l.closing = true;
                continue;
            }
            let key = match link {
                Some(key) => key,
                None => {
                    let Ok(ip) = node.ip.parse::<IpAddr>() else {
                        continue;
                    };
                    match TcpStream::connect(SocketAddr::new(ip, node.cport)) {
                        Ok(stream) => {
                            let key = self.add_link(stream, Some(id), false);
                            self.outbound.insert(id, key);
                            to_send.push((key, id, true));
                            continue;
                        }
                        Err(_) => continue,
                    }
                }
            };
            let due = node.ping_sent == 0
                && now >= node.pong_received + PING_EVERY.min(timeout / 2).max(100);
            if self.links.get(key).is_some_and(|l| l.connected)
                && let Some(n) = state.nodes.get_mut(&id)
                && !n.linked
            {
                n.linked = true;
            }
            // (A master paused for its replica's manual failover pings it every cron:
            // its offset is what the replica waits for.)
            let waiting = state.manual.as_ref().is_some_and(|m| m.replica == Some(id));
            if announce || due || waiting {
                to_send.push((key, id, false));
            }
        }
        for (key, id, new_link) in to_send {
            let Some(node) = state.nodes.get_mut(&id) else {
                continue;
            };
            let kind = if node.flags & MEET != 0 {
                MEET_MSG
            } else if announce && !new_link && node.ping_sent != 0 {
                // An announcement (no answer awaited) while a ping is out anyway.
                PONG
            } else {
                PING
            };
            if kind != PONG && node.ping_sent == 0 {
                node.ping_sent = now;
            }
            let msg = ping(&state, kind, &id);
            state.sent[usize::from(kind)] += 1;
            if let Some(link) = self.links.get_mut(key) {
                link.output.extend_from_slice(&msg);
            }
        }
        // Suspect the silent; agree on failures (this node's own suspicion counts when
        // it is a master).
        let masters = state.size.max(1);
        let needed = masters / 2 + 1;
        let own_vote = usize::from(!state.me().is_replica());
        let mut failed = Vec::new();
        for node in state.nodes.values_mut() {
            if node.flags & MYSELF != 0 || node.flags & HANDSHAKE != 0 {
                continue;
            }
            if node.ping_sent != 0
                && now > node.ping_sent + timeout
                && node.flags & (PFAIL | FAIL) == 0
            {
                node.flags |= PFAIL;
                changed = true;
            }
            node.fail_reports.retain(|(_, at)| now <= at + 2 * timeout);
            if node.flags & PFAIL != 0 && node.fail_reports.len() + own_vote >= needed {
                node.flags = (node.flags | FAIL) & !PFAIL;
                node.fail_time = now;
                failed.push(node.id);
                changed = true;
            }
        }
        for id in failed {
            crate::log!(
                Notice,
                "Marking node {} as failing (quorum reached).",
                id_str(&id)
            );
            let mut msg = header(&state, FAIL_MSG);
            msg.extend_from_slice(&id);
            let msg = finish(&state, msg);
            for (_, link) in self.links.iter_mut().filter(|(_, l)| l.to.is_some()) {
                link.output.extend_from_slice(&msg);
                state.sent[usize::from(FAIL_MSG)] += 1;
            }
        }
        let replication = (self.hooks.local)();
        self.sendbuf_limit = replication.sendbuf_limit;
        changed |= state.announce(&replication.announced);
        state.offset = replication.offset;
        // A replica with `cluster-replica-no-failover yes` says so in its flags.
        let no_failover = replication.no_failover && state.me().is_replica();
        if no_failover != (state.me().flags & NOFAILOVER != 0) {
            state.me_mut().flags ^= NOFAILOVER;
            changed = true;
        }
        changed |= self.failover_cron(&mut state, now, &replication);
        changed |= migrate_replica(&mut state, now, &replication);
        let was_ok = state.ok;
        state.update_state(now);
        if state.ok != was_ok {
            changed = true;
        }
        state.links = self
            .links
            .iter()
            .filter_map(|(_, l)| {
                Some(LinkInfo {
                    outbound: l.to.is_some(),
                    node: l.to.or(l.from)?,
                    created: l.created,
                    send_used: l.output.len(),
                    send_allocated: if l.output.is_empty() {
                        0
                    } else {
                        l.output.capacity()
                    },
                })
            })
            .collect();
        if changed {
            cluster.changed(&mut state);
        }
        let keys: Vec<usize> = self.links.iter().map(|(k, _)| k).collect();
        for key in keys {
            self.flush(key);
            self.limit_output(&mut state, key);
        }
        drop(state);
        if let Err(e) = cluster.save() {
            crate::log!(Warning, "{e}");
        }
        cluster.settle(now);
    }
}

impl Bus {
    /// The failover steps of each cron (redis-server's clusterHandleManualFailover and
    /// clusterHandleSlaveFailover): a manual failover's deadline; on its master, the
    /// pause of its writes ends with it; on the replica, its request to the master, then
    /// its election once it has the paused master's whole stream (at once with FORCE);
    /// and a replica's election when its master failed, after a delay that lets the
    /// replica with most of the history ask first. True when the state changed.
    fn failover_cron(&mut self, state: &mut State, now: Millis, repl: &Local) -> bool {
        if state.manual.as_ref().is_some_and(|m| now > m.until) {
            crate::log!(Warning, "Manual failover timed out.");
            state.manual = None;
            if state.election.as_ref().is_some_and(|e| e.forced) {
                state.election = None;
            }
        }
        let pausing =
            !state.me().is_replica() && state.manual.as_ref().is_some_and(|m| m.replica.is_some());
        if self.paused && !pausing {
            (self.hooks.pause_writes)(None);
            self.paused = false;
        }
        let Some((master, failed, serves)) = state
            .my_master()
            .map(|m| (m.id, m.failed(), m.slot_count() > 0))
        else {
            state.election = None;
            return false;
        };
        if let Some(m) = state.manual.as_mut()
            && m.replica.is_none()
        {
            let ask = !m.force && !m.asked;
            m.asked = true;
            let ready = m.force || m.master_offset.is_some_and(|o| state.offset >= o);
            if ready && state.election.is_none() {
                if !m.force {
                    crate::log!(
                        Notice,
                        "All master replication stream processed, manual failover can start."
                    );
                }
                state.election = Some(Election {
                    at: now,
                    epoch: 0,
                    votes: 0,
                    forced: true,
                });
            }
            if ask && let Some(&key) = self.outbound.get(&master) {
                let msg = finish(state, header(state, MFSTART));
                state.sent[usize::from(MFSTART)] += 1;
                if let Some(link) = self.links.get_mut(key) {
                    link.output.extend_from_slice(&msg);
                }
            }
        }
        // (redis-server's rules: not with `cluster-replica-no-failover`, nor when its
        // data is older than the validity factor allows.)
        let timeout = state.node_timeout;
        let data_age = repl
            .data_age
            .map_or(0, |age| if age > timeout { age - timeout } else { age });
        let too_old = repl.validity_factor > 0
            && data_age > REPL_PING_PERIOD + timeout.saturating_mul(repl.validity_factor);
        if state.election.is_none() && failed && serves && (repl.no_failover || too_old) {
            if !self.cant_failover_logged {
                self.cant_failover_logged = true;
                if too_old {
                    crate::log!(
                        Notice,
                        "Currently unable to failover: Disconnected from master for longer \
                         than allowed. Please check the 'cluster-replica-validity-factor' \
                         configuration option."
                    );
                }
            }
        } else if state.election.is_none() && failed && serves {
            self.cant_failover_logged = false;
            let offset = state.offset;
            let myself = state.myself;
            let rank = state
                .replicas_of(&master)
                .iter()
                .filter(|r| r.id != myself && r.repl_offset > offset)
                .count() as u64;
            let delay = 500 + crate::util::random_u64() % 500 + rank * 1000;
            crate::log!(
                Notice,
                "Start of election delayed for {delay} milliseconds (rank #{rank}, offset \
                 {offset})."
            );
            state.election = Some(Election {
                at: now + delay,
                epoch: 0,
                votes: 0,
                forced: false,
            });
        }
        let Some(election) = state.election.clone() else {
            return false;
        };
        if !election.forced && !failed {
            // The master came back before the election.
            state.election = None;
            return false;
        }
        let timeout = (state.node_timeout * 2).max(2000);
        if now < election.at {
            return false;
        }
        if now > election.at + timeout {
            // Expired: another is scheduled once twice the timeout passed.
            if now > election.at + 2 * timeout {
                crate::log!(Notice, "Failover attempt expired.");
                state.election = None;
            }
            return false;
        }
        if election.epoch == 0 {
            state.current_epoch += 1;
            let epoch = state.current_epoch;
            crate::log!(Notice, "Starting a failover election for epoch {epoch}.");
            if let Some(e) = state.election.as_mut() {
                e.epoch = epoch;
            }
            let msg = finish(state, header(state, AUTH_REQUEST));
            for (_, link) in self.links.iter_mut().filter(|(_, l)| l.to.is_some()) {
                link.output.extend_from_slice(&msg);
                state.sent[usize::from(AUTH_REQUEST)] += 1;
            }
            self.cluster.mark_dirty();
        }
        false
    }
}

/// `sender` claims `slots` at `epoch`: it takes each slot that no node serves, or whose
/// node's epoch is older — unless this node is importing it. True when a slot changed
/// hands.
fn claim_slots(state: &mut State, sender: &NodeId, epoch: u64, slots: &[u64; SLOTS / 64]) -> bool {
    let mut changed = false;
    let mut known: Option<(NodeId, u64)> = None;
    for slot in super::slots_of(slots) {
        let owner = state.slots[slot];
        if owner == Some(*sender) || state.importing_from.contains_key(&slot) {
            continue;
        }
        let owner_epoch = match (owner, known) {
            (None, _) => 0,
            (Some(id), Some((k, epoch))) if k == id => epoch,
            (Some(id), _) => {
                let epoch = state.nodes.get(&id).map_or(0, |n| n.config_epoch);
                known = Some((id, epoch));
                epoch
            }
        };
        if owner.is_none() || owner_epoch < epoch {
            if owner == Some(state.myself) {
                crate::log!(
                    Notice,
                    "Slot {slot} is now served by {} (epoch {epoch}).",
                    id_str(sender)
                );
                state.migrating_to.remove(&slot);
            }
            state.assign(slot, Some(*sender));
            changed = true;
        }
    }
    changed
}

/// When `sender` claims a slot that a node with a newer epoch serves: an UPDATE telling
/// it about that node.
fn stale_claim(state: &State, sender: &NodeId, slots: &[u64; SLOTS / 64]) -> Option<Vec<u8>> {
    let sender_epoch = state.nodes.get(sender)?.config_epoch;
    for slot in super::slots_of(slots) {
        let Some(owner) = state.slots[slot] else {
            continue;
        };
        if owner == *sender {
            continue;
        }
        let node = state.nodes.get(&owner)?;
        if node.config_epoch > sender_epoch {
            let mut msg = header(state, UPDATE);
            msg.extend_from_slice(&node.id);
            msg.extend_from_slice(&node.config_epoch.to_be_bytes());
            put_slots(&mut msg, &node.slots);
            return Some(finish(state, msg));
        }
    }
    None
}

/// Two masters with one config epoch: the one with the greater name takes a new epoch
/// (redis-server's clusterHandleConfigEpochCollision).
fn epoch_collision(state: &mut State, sender: &NodeId) -> bool {
    if state.me().is_replica() {
        return false;
    }
    let mine = state.me().config_epoch;
    let Some(theirs) = state.nodes.get(sender).map(|n| n.config_epoch) else {
        return false;
    };
    if theirs != mine || sender <= &state.myself {
        return false;
    }
    state.current_epoch += 1;
    let epoch = state.current_epoch;
    state.me_mut().config_epoch = epoch;
    crate::log!(
        Verbose,
        "WARNING: configEpoch collision with node {}. configEpoch set to {epoch}",
        id_str(sender)
    );
    true
}

/// What a message says of its sender's role: a master, or a replica of `msg.master`. A
/// master that turns replica gives up its slots (redis-server's clusterDelNodeSlots).
/// True when its role changed.
fn learn_role(state: &mut State, msg: &Message) -> bool {
    let Some(node) = state.nodes.get(&msg.sender) else {
        return false;
    };
    if node.flags & HANDSHAKE != 0 {
        return false;
    }
    match msg.master {
        None if node.flags & MASTER != 0 && !node.is_replica() => false,
        None => {
            state.set_as_master(&msg.sender);
            true
        }
        Some(master) if node.is_replica() && node.master == Some(master) => {
            state.has_replica(&master);
            false
        }
        Some(master) => {
            if !node.is_replica() {
                for slot in 0..SLOTS {
                    if state.slots[slot] == Some(msg.sender) {
                        state.assign(slot, None);
                    }
                }
            }
            let shard = state.nodes.get(&master).map(|m| m.shard_id);
            state.has_replica(&master);
            if let Some(n) = state.nodes.get_mut(&msg.sender) {
                n.flags = (n.flags & !MASTER) | SLAVE;
                n.master = Some(master);
                if let Some(shard) = shard {
                    n.shard_id = shard;
                }
            }
            true
        }
    }
}

/// How long a master must stay orphaned before a replica migrates to it (redis-server's
/// `CLUSTER_SLAVE_MIGRATION_DELAY`): time for its own replicas to say where they went.
const MIGRATION_DELAY: Millis = 5000;

/// Replica migration (redis-server's clusterHandleSlaveMigration): a master that serves
/// slots and had replicas, left without a working one, is orphaned; after
/// [`MIGRATION_DELAY`] the replica with the smallest name among those of the masters
/// with the most working replicas becomes its replica — when its own master keeps more
/// than `cluster-migration-barrier` of them. True when this node moved.
fn migrate_replica(state: &mut State, now: Millis, repl: &Local) -> bool {
    let working =
        |state: &State, m: &NodeId| state.replicas_of(m).iter().filter(|r| !r.failed()).count();
    let masters: Vec<NodeId> = state
        .nodes
        .values()
        .filter(|n| !n.is_replica() && n.flags & MASTER != 0)
        .map(|n| n.id)
        .collect();
    let mut most = 0;
    let mut target: Option<NodeId> = None;
    for m in &masters {
        let count = working(state, m);
        most = most.max(count);
        let Some(node) = state.nodes.get_mut(m) else {
            continue;
        };
        let orphaned = count == 0 && !node.failed() && node.had_replicas;
        if !orphaned {
            node.orphaned_since = 0;
            continue;
        }
        if node.orphaned_since == 0 {
            node.orphaned_since = now;
        }
        if node.slot_count() > 0 && target.is_none_or(|t| *m < t) {
            target = Some(*m);
        }
    }
    let Some(mine) = state.my_master().map(|m| m.id) else {
        return false;
    };
    let (Some(target), true, true) = (target, repl.migration, state.ok) else {
        return false;
    };
    if most < 2 || working(state, &mine) != most {
        return false;
    }
    // (Its master keeps enough replicas that are neither failing nor suspected.)
    let ok = state
        .replicas_of(&mine)
        .iter()
        .filter(|r| r.flags & (FAIL | PFAIL) == 0)
        .count();
    if ok <= repl.migration_barrier {
        return false;
    }
    let candidate = masters
        .iter()
        .filter(|m| working(state, m) == most)
        .flat_map(|m| state.replicas_of(m))
        .map(|r| r.id)
        .chain(std::iter::once(state.myself))
        .min();
    let since = state.nodes.get(&target).map_or(now, |t| t.orphaned_since);
    if candidate != Some(state.myself) || now <= since + MIGRATION_DELAY {
        return false;
    }
    crate::log!(Notice, "Migrating to orphaned master {}", id_str(&target));
    state.set_master(target);
    true
}

/// A master's answer to a replica's AUTH-REQ (redis-server's
/// clusterSendFailoverAuthIfNeeded): its vote — an AUTH-ACK — when it serves slots, has
/// not voted in this epoch, the replica's master failed (or the request is a manual
/// failover's), it did not vote for a replica of that master lately, and no slot the
/// replica claims has a newer claim; else nothing (the refusal is logged).
fn grant_vote(state: &mut State, msg: &Message, now: Millis) -> Option<Vec<u8>> {
    let me = state.me();
    if me.is_replica() || me.slot_count() == 0 {
        return None;
    }
    let requester = id_str(&msg.sender).to_string();
    let denied = |why: String| {
        crate::log!(Warning, "Failover auth denied to {requester}: {why}");
        None
    };
    let (req_epoch, current) = (msg.current_epoch, state.current_epoch);
    if req_epoch < current {
        return denied(format!("reqEpoch ({req_epoch}) < curEpoch({current})"));
    }
    if state.last_vote_epoch == current {
        return denied(format!("already voted for epoch {current}"));
    }
    let node = state.nodes.get(&msg.sender)?;
    if !node.is_replica() {
        return denied("it is a master node".into());
    }
    let Some(master) = node.master.and_then(|m| state.nodes.get(&m)) else {
        return denied("I don't know its master".into());
    };
    if !master.failed() && msg.mflags & FORCEACK == 0 {
        return denied("its master is up".into());
    }
    let wait = state.node_timeout * 2;
    if now < master.voted_time + wait {
        return denied(format!(
            "can't vote about this master before {} milliseconds",
            master.voted_time + wait - now
        ));
    }
    for slot in super::slots_of(&msg.slots) {
        let owner_epoch = state.slots[slot]
            .and_then(|o| state.nodes.get(&o))
            .map_or(0, |o| o.config_epoch);
        if owner_epoch > msg.config_epoch {
            return denied(format!(
                "slot {slot} epoch ({owner_epoch}) > reqEpoch ({})",
                msg.config_epoch
            ));
        }
    }
    let master = master.id;
    state.last_vote_epoch = current;
    if let Some(m) = state.nodes.get_mut(&master) {
        m.voted_time = now;
    }
    crate::log!(
        Notice,
        "Failover auth granted to {requester} for epoch {current}"
    );
    Some(finish(state, header(state, AUTH_ACK)))
}

/// A replica's election is won: it takes its master's place with the election's epoch.
fn won(state: &mut State) -> bool {
    let Some(election) = state.election.take() else {
        return false;
    };
    if state.my_master().is_none() {
        return false;
    }
    crate::log!(Notice, "Failover election won: I'm the new master.");
    if state.me().config_epoch < election.epoch {
        state.me_mut().config_epoch = election.epoch;
        crate::log!(
            Notice,
            "configEpoch set to {} after successful failover",
            election.epoch
        );
    }
    state.replace_master();
    true
}

/// What a message's gossip teaches: nodes not known yet, failure reports.
fn gossip(state: &mut State, msg: &Message, now: Millis) -> bool {
    let mut changed = false;
    let sender_is_master = state
        .nodes
        .get(&msg.sender)
        .is_some_and(|n| n.flags & MASTER != 0);
    for g in &msg.gossip {
        if g.id == state.myself {
            continue;
        }
        if let Some(node) = state.nodes.get_mut(&g.id) {
            if sender_is_master {
                let reported = node
                    .fail_reports
                    .iter()
                    .position(|(by, _)| *by == msg.sender);
                if g.flags & (PFAIL | FAIL) != 0 {
                    match reported {
                        Some(i) => node.fail_reports[i].1 = now,
                        None => node.fail_reports.push((msg.sender, now)),
                    }
                } else if let Some(i) = reported {
                    node.fail_reports.remove(i);
                }
            }
            continue;
        }
        if g.flags & (NOADDR | HANDSHAKE) != 0
            || g.ip.is_empty()
            || state.forgotten.get(&g.id).is_some_and(|&until| until > now)
        {
            continue;
        }
        // (A replica's master is learned from its own messages.)
        let role = if g.flags & SLAVE != 0 { SLAVE } else { MASTER };
        let mut node = Node::new(g.id, &g.ip, g.port, g.cport, role, now);
        node.shard_id = g.id;
        state.nodes.insert(g.id, node);
        changed = true;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_decode_as_encoded_and_garbage_does_not() {
        let mut state = State::new(super::super::random_id(), 7000, 17000, 1);
        state.assign(5, Some(state.myself));
        let other = super::super::random_id();
        state
            .nodes
            .insert(other, Node::new(other, "127.0.0.1", 7001, 17001, MASTER, 1));
        let frame = ping(&state, PING, &super::super::random_id());
        let msg = decode(&frame[4..]).expect("a PING decodes");
        assert_eq!(msg.sender, state.myself);
        assert_eq!(msg.port, 7000);
        assert_eq!(msg.gossip.len(), 1);
        assert_eq!(msg.gossip[0].id, other);
        assert!(msg.slots[0] & (1 << 5) != 0);
        assert_eq!(msg.master, None);
        // Every cut fails, but the one before the trailer: an earlier Goblin's frame.
        let trailer = 1 + 1 + 8 + 1 + 1;
        for cut in 0..frame.len() - 4 {
            let decoded = decode(&frame[4..4 + cut]);
            assert_eq!(
                decoded.is_some(),
                cut == frame.len() - 4 - trailer,
                "cut {cut}"
            );
        }
        assert!(decode(b"GBus\x01\x09").is_none());

        // A replica announces its master, its offset, and its master's slots.
        state.assign(5, Some(other));
        state.set_master(other);
        state.offset = 1234;
        let frame = ping(&state, PONG, &other);
        let msg = decode(&frame[4..]).expect("a PONG decodes");
        assert_eq!(msg.master, Some(other));
        assert_eq!(msg.offset, 1234);
        assert!(msg.slots[0] & (1 << 5) != 0);
        let mut bad = frame[4..].to_vec();
        let at = bad.len() - 1 - 1 - 8 - 40 - 1 - 1;
        bad[at] = b'X';
        assert!(decode(&bad).is_none(), "a trailer with another tag");
    }

    /// A message from `sender` as it arrives.
    fn message(kind: u8, sender: NodeId, current_epoch: u64, config_epoch: u64) -> Message {
        Message {
            kind,
            sender,
            ip: String::new(),
            port: 0,
            cport: 0,
            current_epoch,
            config_epoch,
            slots: Box::new([0; SLOTS / 64]),
            gossip: Vec::new(),
            about: None,
            update: None,
            master: None,
            offset: 0,
            mflags: 0,
            flags: 0,
            publication: None,
            hostname: None,
        }
    }

    /// This node a master serving slot 1; `master` a master serving slot 2, `replica`
    /// its replica.
    fn three_nodes() -> (State, NodeId, NodeId) {
        let mut state = State::new(super::super::random_id(), 7000, 17000, 1);
        state.node_timeout = 1000;
        let (master, replica) = (super::super::random_id(), super::super::random_id());
        state.nodes.insert(
            master,
            Node::new(master, "127.0.0.1", 7001, 17001, MASTER, 1),
        );
        let mut r = Node::new(replica, "127.0.0.1", 7002, 17002, SLAVE, 1);
        r.master = Some(master);
        state.nodes.insert(replica, r);
        state.assign(1, Some(state.myself));
        state.assign(2, Some(master));
        (state, master, replica)
    }

    #[test]
    fn a_master_votes_once_per_epoch_for_a_replica_of_a_failed_master() {
        let (mut state, master, replica) = three_nodes();
        state.current_epoch = 5;
        let mut request = message(AUTH_REQUEST, replica, 5, 0);
        request.slots[0] = 1 << 2;
        // Its master is up: no vote, unless the request is a manual failover's.
        assert!(grant_vote(&mut state, &request, 10_000).is_none());
        request.mflags = FORCEACK;
        assert!(grant_vote(&mut state, &request, 10_000).is_some());
        assert_eq!(state.last_vote_epoch, 5);
        // One vote per epoch.
        assert!(grant_vote(&mut state, &request, 10_000).is_none());
        // A new epoch, but too soon after a vote about the same master.
        state.current_epoch = 6;
        request.current_epoch = 6;
        request.mflags = 0;
        state.nodes.get_mut(&master).expect("known").flags |= FAIL;
        assert!(grant_vote(&mut state, &request, 10_500).is_none());
        // Later, the master failed: the vote is granted.
        assert!(grant_vote(&mut state, &request, 20_000).is_some());
        // A request older than this node's epoch, or from a master, gets none.
        state.current_epoch = 8;
        let old = message(AUTH_REQUEST, replica, 7, 0);
        assert!(grant_vote(&mut state, &old, 40_000).is_none());
        let from_master = message(AUTH_REQUEST, master, 9, 0);
        state.current_epoch = 9;
        assert!(grant_vote(&mut state, &from_master, 40_000).is_none());
        // A replica does not vote.
        let (mut replica_state, other, _) = three_nodes();
        replica_state.set_master(other);
        let request = message(AUTH_REQUEST, super::super::random_id(), 0, 0);
        assert!(grant_vote(&mut replica_state, &request, 40_000).is_none());
    }

    #[test]
    fn roles_are_learned_from_messages() {
        let (mut state, master, replica) = three_nodes();
        // The replica says it is a master now: it is one.
        assert!(learn_role(&mut state, &message(PONG, replica, 0, 0)));
        assert!(!state.nodes[&replica].is_replica());
        assert_eq!(state.nodes[&replica].master, None);
        // The old master says it replicates it: it gives up its slots.
        let mut pong = message(PONG, master, 0, 0);
        pong.master = Some(replica);
        assert!(learn_role(&mut state, &pong));
        assert!(state.nodes[&master].is_replica());
        assert_eq!(state.nodes[&master].slot_count(), 0);
        assert_eq!(state.slots[2], None);
        assert!(!learn_role(&mut state, &pong), "nothing new");
    }

    #[test]
    fn a_replica_that_wins_takes_its_masters_slots() {
        let (mut state, master, _) = three_nodes();
        state.assign(1, None);
        state.set_master(master);
        assert!(state.me().is_replica());
        state.election = Some(Election {
            at: 0,
            epoch: 9,
            votes: 2,
            forced: false,
        });
        assert!(won(&mut state));
        assert!(!state.me().is_replica());
        assert_eq!(state.me().config_epoch, 9);
        assert_eq!(state.slots[2], Some(state.myself));
        assert_eq!(state.nodes[&master].slot_count(), 0);
        assert!(state.election.is_none());
    }
}
