//! Redis Cluster support (`--cluster`): key slots, the slot map, and redirect replies.
//!
//! - [`key_slot`]: a key's hash slot, as Redis Cluster computes it: CRC16-XMODEM of the
//!   key (or of the content of its first non-empty `{…}` hash tag), modulo 16384.
//! - [`request_key`]: which argument of an encoded request is the key it is routed by.
//! - [`fetch_slot_map`]: `CLUSTER SLOTS` from one node, as a [`SlotMap`] (16384 slots →
//!   the address of the primary serving them).
//! - [`Redirect::parse`]: `-MOVED`, `-ASK`, `-TRYAGAIN` and `-CLUSTERDOWN` replies.
//! - [`ClusterShared`]: what the threads share: the latest slot map, and the gate that
//!   keeps full refreshes to one per [`REFRESH_EVERY`] over the whole run.

use std::collections::HashSet;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use goblin_protocol::{Frame, parse_reply};

use crate::scripts;

/// Hash slots in a Redis Cluster.
pub const SLOTS: usize = 16_384;

/// Full slot-map refreshes (`CLUSTER SLOTS`) after a `-MOVED` happen at most this often,
/// over all threads: a reshard moves many slots, and each MOVED already fixes its slot.
pub const REFRESH_EVERY: Duration = Duration::from_millis(100);

/// How long a set-up or refresh connection waits for a node.
const NODE_TIMEOUT: Duration = Duration::from_secs(2);

/// CRC16-XMODEM's table (polynomial 0x1021), built at compile time.
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// CRC16-XMODEM (polynomial 0x1021, initial value 0, no reflection, no final xor): the
/// checksum Redis Cluster hashes keys with.
pub fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ CRC16_TABLE[usize::from((crc >> 8) as u8 ^ b)]
    })
}

/// The hash slot of `key`: CRC16 of the key modulo 16384, or of the content of its hash
/// tag, the part between the first `{` and the first `}` after it, when that part is not
/// empty (`{user1000}.following` and `{user1000}.followers` share a slot).
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = match memchr::memchr(b'{', key) {
        Some(open) => match memchr::memchr(b'}', &key[open + 1..]) {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) % SLOTS as u16
}

/// The arguments of a RESP-encoded request (an array of bulk strings, as the protocol
/// crate's encoder writes them), one by one; it ends early if `req` is not one.
struct Args<'a> {
    buf: &'a [u8],
    at: usize,
    left: usize,
}

impl<'a> Args<'a> {
    fn new(req: &'a [u8]) -> Args<'a> {
        let mut args = Args {
            buf: req,
            at: 0,
            left: 0,
        };
        args.left = args.number(b'*').unwrap_or(0);
        args
    }

    /// `<marker><digits>\r\n` at the cursor.
    fn number(&mut self, marker: u8) -> Option<usize> {
        if *self.buf.get(self.at)? != marker {
            return None;
        }
        let start = self.at + 1;
        let len = memchr::memchr(b'\r', self.buf.get(start..)?)?;
        let digits = std::str::from_utf8(self.buf.get(start..start + len)?).ok()?;
        self.at = start + len + 2;
        digits.parse().ok()
    }
}

impl<'a> Iterator for Args<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let arg = self.number(b'$').and_then(|len| {
            let arg = self.buf.get(self.at..self.at.checked_add(len)?)?;
            self.at += len + 2;
            Some(arg)
        });
        if arg.is_none() {
            self.left = 0;
        }
        arg
    }
}

/// Commands that name no key: they may go to any node.
const KEYLESS: &[&[u8]] = &[
    b"PING",
    b"ECHO",
    b"INFO",
    b"TIME",
    b"DBSIZE",
    b"FLUSHALL",
    b"FLUSHDB",
    b"CONFIG",
    b"CLIENT",
    b"CLUSTER",
    b"COMMAND",
    b"SCRIPT",
    b"FUNCTION",
    b"HELLO",
    b"AUTH",
    b"SELECT",
    b"LASTSAVE",
    b"RANDOMKEY",
    b"SCAN",
    b"KEYS",
    b"WAIT",
    b"PUBLISH",
    b"SAVE",
    b"BGSAVE",
    b"BGREWRITEAOF",
    b"SLOWLOG",
    b"LATENCY",
    b"MULTI",
    b"EXEC",
    b"DISCARD",
    b"UNWATCH",
    b"READONLY",
    b"READWRITE",
    b"ASKING",
    b"QUIT",
    b"RESET",
];

/// Commands whose first key is their second argument.
const KEY_SECOND: &[&[u8]] = &[b"BITOP", b"OBJECT", b"MEMORY", b"XINFO"];

/// Commands whose keys are declared: `<name> <script or function> <numkeys> <keys…>`.
const KEYS_DECLARED: &[&[u8]] = &[
    b"EVAL",
    b"EVALSHA",
    b"EVAL_RO",
    b"EVALSHA_RO",
    b"FCALL",
    b"FCALL_RO",
];

fn is_one_of(name: &[u8], list: &[&[u8]]) -> bool {
    list.iter().any(|n| n.eq_ignore_ascii_case(name))
}

/// The key a request is routed by: its first key, or `None` for a command that names no
/// key (`PING`, `INFO`, `EVAL … 0 …`), which may go to any node.
///
/// The rules: `EVAL`, `EVALSHA`, `FCALL` (and their `_RO` forms) route by their first
/// declared key; `XREAD` and `XREADGROUP` by the first stream after `STREAMS`; `BITOP`,
/// `OBJECT`, `MEMORY USAGE` and `XINFO` by their second argument; a short list of
/// server commands (`PING`, `ECHO`, `INFO`, `CONFIG`, `CLUSTER`, `SCRIPT`, …) by none;
/// every other command by its first argument.
pub fn request_key(req: &[u8]) -> Option<&[u8]> {
    let mut args = Args::new(req);
    let name = args.next()?;
    if is_one_of(name, KEYS_DECLARED) {
        let _script = args.next()?;
        let numkeys: usize = std::str::from_utf8(args.next()?).ok()?.parse().ok()?;
        return if numkeys == 0 { None } else { args.next() };
    }
    if name.eq_ignore_ascii_case(b"XREAD") || name.eq_ignore_ascii_case(b"XREADGROUP") {
        args.find(|a| a.eq_ignore_ascii_case(b"STREAMS"))?;
        return args.next();
    }
    if is_one_of(name, KEY_SECOND) {
        return args.nth(1);
    }
    if is_one_of(name, KEYLESS) {
        return None;
    }
    args.next()
}

/// The slot a request is routed to, or `None` when it names no key.
pub fn request_slot(req: &[u8]) -> Option<u16> {
    request_key(req).map(key_slot)
}

/// A node address as a redirect or `CLUSTER SLOTS` gives it: `host` may be empty, which
/// Redis 7 sends when it does not know the node's endpoint (then it is the host of the
/// node that answered).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeName {
    /// Host or IP address as text; may be empty.
    pub host: String,
    /// Port.
    pub port: u16,
}

impl NodeName {
    /// Resolves the address; an empty host (or `?`) stands for `fallback`'s IP.
    ///
    /// # Errors
    /// A message when the name does not resolve.
    pub fn resolve(&self, fallback: SocketAddr) -> Result<SocketAddr, String> {
        if self.host.is_empty() || self.host == "?" {
            return Ok(SocketAddr::new(fallback.ip(), self.port));
        }
        if let Ok(ip) = self.host.parse::<std::net::IpAddr>() {
            return Ok(SocketAddr::new(ip, self.port));
        }
        (self.host.as_str(), self.port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| format!("cannot resolve cluster node {}:{}", self.host, self.port))
    }
}

/// A cluster error reply that is followed rather than counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Redirect {
    /// `-MOVED slot host:port`: the slot has a new owner for good.
    Moved {
        /// The slot.
        slot: u16,
        /// Its owner.
        node: NodeName,
    },
    /// `-ASK slot host:port`: this one request goes to `node`, preceded by `ASKING`.
    Ask {
        /// The slot.
        slot: u16,
        /// The node importing it.
        node: NodeName,
    },
    /// `-TRYAGAIN …`: a multi-key request during a slot's migration; retry shortly.
    TryAgain,
    /// `-CLUSTERDOWN …`: the cluster cannot serve now; retry shortly.
    ClusterDown,
}

impl Redirect {
    /// Reads an error reply's text (without the leading `-`).
    pub fn parse(text: &[u8]) -> Option<Redirect> {
        let word_end = memchr::memchr(b' ', text).unwrap_or(text.len());
        let (word, rest) = text.split_at(word_end);
        let target = |rest: &[u8]| -> Option<(u16, NodeName)> {
            let rest = std::str::from_utf8(rest).ok()?.trim();
            let (slot, addr) = rest.split_once(' ')?;
            let slot: u16 = slot.parse().ok()?;
            if usize::from(slot) >= SLOTS {
                return None;
            }
            // IPv6 hosts hold colons too: the port is after the last one.
            let (host, port) = addr.trim().rsplit_once(':')?;
            let host = host.trim_start_matches('[').trim_end_matches(']');
            Some((
                slot,
                NodeName {
                    host: host.to_string(),
                    port: port.parse().ok()?,
                },
            ))
        };
        match word {
            b"MOVED" => target(rest).map(|(slot, node)| Redirect::Moved { slot, node }),
            b"ASK" => target(rest).map(|(slot, node)| Redirect::Ask { slot, node }),
            b"TRYAGAIN" => Some(Redirect::TryAgain),
            b"CLUSTERDOWN" => Some(Redirect::ClusterDown),
            _ => None,
        }
    }
}

/// Which primary serves each slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotMap {
    /// The primaries, in order of first appearance.
    pub nodes: Vec<SocketAddr>,
    /// For each slot, its primary's index in `nodes`, or `u16::MAX` when unassigned.
    pub slots: Vec<u16>,
}

/// A slot no node serves.
pub const UNASSIGNED: u16 = u16::MAX;

impl SlotMap {
    /// The index of `addr` in `nodes`, added if new.
    pub fn node_index(&mut self, addr: SocketAddr) -> u16 {
        match self.nodes.iter().position(|&n| n == addr) {
            Some(i) => i as u16,
            None => {
                self.nodes.push(addr);
                (self.nodes.len() - 1) as u16
            }
        }
    }

    /// Parses a `CLUSTER SLOTS` reply given by the node at `from`.
    ///
    /// # Errors
    /// A message when the reply is not a slot table.
    pub fn from_cluster_slots(reply: &Frame<'_>, from: SocketAddr) -> Result<SlotMap, String> {
        let bad = || format!("CLUSTER SLOTS: unexpected reply {reply:?}");
        let Frame::Array(ranges) = reply else {
            return Err(match reply {
                Frame::Error(e) => format!("CLUSTER SLOTS: {}", String::from_utf8_lossy(e)),
                _ => bad(),
            });
        };
        let mut map = SlotMap {
            nodes: Vec::new(),
            slots: vec![UNASSIGNED; SLOTS],
        };
        for range in ranges {
            let Frame::Array(fields) = range else {
                return Err(bad());
            };
            let (Some(Frame::Integer(lo)), Some(Frame::Integer(hi)), Some(Frame::Array(primary))) =
                (fields.first(), fields.get(1), fields.get(2))
            else {
                return Err(bad());
            };
            let host = match primary.first() {
                Some(Frame::Bulk(h)) => String::from_utf8_lossy(h).into_owned(),
                Some(Frame::Null) => String::new(),
                _ => return Err(bad()),
            };
            let port = match primary.get(1) {
                Some(&Frame::Integer(p)) => u16::try_from(p).map_err(|_| bad())?,
                _ => return Err(bad()),
            };
            let addr = NodeName { host, port }.resolve(from)?;
            let index = map.node_index(addr);
            let (lo, hi) = (usize::try_from(*lo), usize::try_from(*hi));
            let (Ok(lo), Ok(hi)) = (lo, hi) else {
                return Err(bad());
            };
            if lo > hi || hi >= SLOTS {
                return Err(bad());
            }
            for s in &mut map.slots[lo..=hi] {
                *s = index;
            }
        }
        if map.nodes.is_empty() {
            return Err("CLUSTER SLOTS: no slot is served (is the cluster created?)".into());
        }
        Ok(map)
    }

    /// How many slots have an owner.
    pub fn assigned(&self) -> usize {
        self.slots.iter().filter(|&&s| s != UNASSIGNED).count()
    }
}

/// Asks the node at `addr` for the slot map (`CLUSTER SLOTS`).
///
/// # Errors
/// A message when the node cannot be reached or does not answer with a slot table
/// (a server without cluster mode answers an error).
pub fn fetch_slot_map(addr: SocketAddr) -> Result<SlotMap, String> {
    let mut stream = TcpStream::connect_timeout(&addr, NODE_TIMEOUT)
        .map_err(|e| format!("connect to {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(NODE_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let _ = stream.set_nodelay(true);
    let reply = scripts::call(&mut stream, &[b"CLUSTER", b"SLOTS"])
        .map_err(|e| format!("CLUSTER SLOTS from {addr}: {e}"))?;
    match parse_reply(&reply) {
        Ok(Some((frame, _))) => SlotMap::from_cluster_slots(&frame, addr),
        _ => Err(format!("CLUSTER SLOTS from {addr}: malformed reply")),
    }
}

/// The cluster state the threads share.
#[derive(Debug)]
pub struct ClusterShared {
    /// The latest slot map fetched (locked only to copy it in or out).
    map: Mutex<SlotMap>,
    /// When the map was last fetched; held by the thread refreshing it, so that one
    /// refresh at a time runs and the others go on without waiting.
    fetched: Mutex<Instant>,
    /// Bumped whenever `map` changes, so threads see a new map with one atomic load.
    version: AtomicU64,
    /// Full refreshes done (the initial fetch not counted).
    refreshes: AtomicU64,
    /// Nodes known to hold the oracle scripts (`--target redis` claim and lock).
    scripted: Mutex<HashSet<SocketAddr>>,
    /// Whether nodes must hold the oracle scripts before requests go to them.
    needs_scripts: bool,
}

impl ClusterShared {
    /// The shared state, starting from `map` (fetched at start), whose nodes hold the
    /// scripts already if `needs_scripts`.
    pub fn new(map: SlotMap, needs_scripts: bool) -> Arc<ClusterShared> {
        let scripted = if needs_scripts {
            map.nodes.iter().copied().collect()
        } else {
            HashSet::new()
        };
        Arc::new(ClusterShared {
            map: Mutex::new(map),
            fetched: Mutex::new(Instant::now()),
            version: AtomicU64::new(1),
            refreshes: AtomicU64::new(0),
            scripted: Mutex::new(scripted),
            needs_scripts,
        })
    }

    /// The current map's version.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// A copy of the current map and its version.
    pub fn snapshot(&self) -> (SlotMap, u64) {
        let map = match self.map.lock() {
            Ok(m) => m.clone(),
            Err(p) => p.into_inner().clone(),
        };
        (map, self.version())
    }

    /// Full refreshes done so far.
    pub fn refreshes(&self) -> u64 {
        self.refreshes.load(Ordering::Relaxed)
    }

    /// After a `-MOVED`: refreshes the whole map from `first` (or, failing that, from the
    /// other known nodes), unless a refresh happened less than [`REFRESH_EVERY`] ago or
    /// another thread is refreshing right now. A failed refresh leaves the map as it is:
    /// redirects keep working without it.
    pub fn maybe_refresh(&self, first: SocketAddr) {
        let Ok(mut fetched) = self.fetched.try_lock() else {
            return;
        };
        if fetched.elapsed() < REFRESH_EVERY {
            return;
        }
        *fetched = Instant::now();
        let mut candidates = vec![first];
        candidates.extend(self.snapshot().0.nodes.into_iter().filter(|&n| n != first));
        for addr in candidates {
            if let Ok(map) = fetch_slot_map(addr) {
                match self.map.lock() {
                    Ok(mut m) => *m = map,
                    Err(p) => *p.into_inner() = map,
                }
                self.refreshes.fetch_add(1, Ordering::Relaxed);
                self.version.fetch_add(1, Ordering::Release);
                return;
            }
        }
    }

    /// Before the first request goes to the node at `addr`: loads the oracle scripts
    /// there if the run needs them and nobody has yet (a node that joined mid-run).
    ///
    /// # Errors
    /// The node refused or could not be reached.
    pub fn prepare_node(&self, addr: SocketAddr) -> Result<(), String> {
        if !self.needs_scripts {
            return Ok(());
        }
        let Ok(mut scripted) = self.scripted.lock() else {
            return Ok(());
        };
        if scripted.contains(&addr) {
            return Ok(());
        }
        scripts::load(addr).map_err(|e| format!("loading the oracle scripts on {addr}: {e}"))?;
        scripted.insert(addr);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use goblin_protocol::{Encoder, Version};

    fn encode(args: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut enc = Encoder::new(&mut out, Version::Resp2);
        enc.array(args.len());
        for a in args {
            enc.bulk(a.as_bytes());
        }
        out
    }

    /// A bitwise CRC16-XMODEM, to check the table against.
    fn crc16_bitwise(bytes: &[u8]) -> u16 {
        let mut crc = 0u16;
        for &b in bytes {
            crc ^= u16::from(b) << 8;
            for _ in 0..8 {
                crc = if crc & 0x8000 != 0 {
                    (crc << 1) ^ 0x1021
                } else {
                    crc << 1
                };
            }
        }
        crc
    }

    #[test]
    fn crc16_check_value() {
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(crc16(b""), 0);
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        for len in [1, 2, 7, 100, 1000] {
            assert_eq!(crc16(&data[..len]), crc16_bitwise(&data[..len]), "{len}");
        }
    }

    #[test]
    fn key_slots_as_redis_computes_them() {
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"key:000000000000"), key_slot(b"key:000000000000"));
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        // An empty tag, or none closed, hashes the whole key.
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % 16384);
        assert_eq!(key_slot(b"foo{bar"), crc16(b"foo{bar") % 16384);
        // Only the first tag counts, up to the first closing brace.
        assert_eq!(key_slot(b"foo{{bar}}zap"), crc16(b"{bar") % 16384);
        assert_eq!(key_slot(b"a{b}c{d}"), key_slot(b"b"));
        // The claim workload's two keys, hash-tagged, share a slot.
        assert_eq!(
            key_slot(b"claim:{0123abcd:0:42}"),
            key_slot(b"result:{0123abcd:0:42}")
        );
    }

    #[test]
    fn the_key_a_request_is_routed_by() {
        let key = |args: &[&str]| {
            request_key(&encode(args)).map(|k| String::from_utf8_lossy(k).into_owned())
        };
        assert_eq!(key(&["GET", "foo"]).as_deref(), Some("foo"));
        assert_eq!(key(&["set", "k", "v"]).as_deref(), Some("k"));
        assert_eq!(key(&["PING"]), None);
        assert_eq!(key(&["ping", "hello"]), None);
        assert_eq!(
            key(&["EVALSHA", "abc", "2", "claim:{x}", "result:{x}", "t", "5"]).as_deref(),
            Some("claim:{x}")
        );
        assert_eq!(key(&["EVAL", "return 1", "0"]), None);
        assert_eq!(
            key(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s1", ">"]).as_deref(),
            Some("s1")
        );
        assert_eq!(key(&["BITOP", "AND", "dest", "a"]).as_deref(), Some("dest"));
        assert_eq!(
            key(&["GOBLIN.CLAIM", "claim:{x}", "result:{x}", "w0.1", "5"]).as_deref(),
            Some("claim:{x}")
        );
        assert_eq!(request_slot(&encode(&["GET", "foo"])), Some(12182));
        assert_eq!(request_key(b"not resp"), None);
        assert_eq!(request_key(b"*2\r\n$3\r\nGET\r\n$10\r\nfoo\r\n"), None);
    }

    #[test]
    fn redirects_are_parsed() {
        let node = |host: &str, port| NodeName {
            host: host.into(),
            port,
        };
        assert_eq!(
            Redirect::parse(b"MOVED 3999 127.0.0.1:6381"),
            Some(Redirect::Moved {
                slot: 3999,
                node: node("127.0.0.1", 6381)
            })
        );
        assert_eq!(
            Redirect::parse(b"ASK 12182 10.0.0.7:7002"),
            Some(Redirect::Ask {
                slot: 12182,
                node: node("10.0.0.7", 7002)
            })
        );
        // Redis 7 leaves the host out when it does not know the node's endpoint.
        assert_eq!(
            Redirect::parse(b"MOVED 0 :7000"),
            Some(Redirect::Moved {
                slot: 0,
                node: node("", 7000)
            })
        );
        assert_eq!(
            Redirect::parse(b"MOVED 1 ::1:7000"),
            Some(Redirect::Moved {
                slot: 1,
                node: node("::1", 7000)
            })
        );
        assert_eq!(
            Redirect::parse(b"MOVED 2 redis-0.local:6379"),
            Some(Redirect::Moved {
                slot: 2,
                node: node("redis-0.local", 6379)
            })
        );
        assert_eq!(
            Redirect::parse(b"TRYAGAIN Multiple keys request during rehashing of slot"),
            Some(Redirect::TryAgain)
        );
        assert_eq!(
            Redirect::parse(b"CLUSTERDOWN The cluster is down"),
            Some(Redirect::ClusterDown)
        );
        for bad in [
            &b"MOVED"[..],
            b"MOVED 16384 127.0.0.1:1",
            b"MOVED x 127.0.0.1:1",
            b"MOVED 1 127.0.0.1",
            b"MOVED 1 127.0.0.1:99999",
            b"ASK 1",
            b"ERR MOVED 1 a:1",
            b"MOVEDX 1 a:1",
            b"WRONGTYPE Operation against a key holding the wrong kind of value",
        ] {
            assert_eq!(
                Redirect::parse(bad),
                None,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let from: SocketAddr = "127.0.0.9:1234".parse().unwrap();
        assert_eq!(
            node("", 7000).resolve(from).unwrap(),
            "127.0.0.9:7000".parse().unwrap()
        );
        assert_eq!(
            node("::1", 7000).resolve(from).unwrap(),
            "[::1]:7000".parse().unwrap()
        );
    }

    #[test]
    fn cluster_slots_replies_are_read() {
        let reply = b"*2\r\n\
            *3\r\n:0\r\n:8191\r\n*3\r\n$9\r\n127.0.0.1\r\n:7001\r\n$3\r\nid1\r\n\
            *4\r\n:8192\r\n:16383\r\n*3\r\n$0\r\n\r\n:7002\r\n$3\r\nid2\r\n\
            *3\r\n$9\r\n127.0.0.1\r\n:7003\r\n$3\r\nid3\r\n";
        let (frame, _) = parse_reply(reply).unwrap().unwrap();
        let from: SocketAddr = "127.0.0.2:7000".parse().unwrap();
        let map = SlotMap::from_cluster_slots(&frame, from).unwrap();
        assert_eq!(
            map.nodes,
            [
                "127.0.0.1:7001".parse::<SocketAddr>().unwrap(),
                "127.0.0.2:7002".parse().unwrap()
            ],
            "primaries only; an empty host is the answering node's"
        );
        assert_eq!((map.slots[0], map.slots[8191], map.slots[8192]), (0, 0, 1));
        assert_eq!(map.assigned(), SLOTS);
        let (err, _) = parse_reply(b"-ERR This instance has cluster support disabled\r\n")
            .unwrap()
            .unwrap();
        let e = SlotMap::from_cluster_slots(&err, from).unwrap_err();
        assert!(e.contains("cluster support disabled"), "{e}");
        let (empty, _) = parse_reply(b"*0\r\n").unwrap().unwrap();
        assert!(SlotMap::from_cluster_slots(&empty, from).is_err());
        let (bad, _) = parse_reply(b"*1\r\n*3\r\n:5\r\n:2\r\n*2\r\n$1\r\na\r\n:1\r\n")
            .unwrap()
            .unwrap();
        assert!(SlotMap::from_cluster_slots(&bad, from).is_err());
    }
}
