//! Redis's RDB snapshot format, version 10 (what redis-server 7.0 writes): the codec.
//!
//! The first piece of persistence (issue 13): the file's framing — the `REDIS0010` header,
//! auxiliary fields, database selectors, expiries, the `EOF` opcode and the CRC-64 that
//! closes the file — strings in every encoding Redis reads (plain, integer,
//! LZF-compressed), and the collections: read in every encoding redis-server 7.0 writes
//! (lists as quicklists of listpacks, sets as intsets or tables, hashes and sorted sets as
//! listpacks or tables), written in the plain forms redis-server loads and re-encodes
//! (list, set, hash, sorted set with binary scores). Older encodings (ziplists, zipmaps),
//! streams and modules are refused with an error naming the key and the type, never
//! misread. Nothing here is wired into the server yet.
//!
//! A file is read from memory, and every length it declares is checked against what is
//! left of it before anything is allocated: a corrupt or hostile file is an error, never a
//! huge allocation or a panic.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::keyspace::Millis;
use crate::types::listpack;
use crate::types::set::Member;
use crate::types::stream::{Consumer, ENTRIES_READ_UNKNOWN, Group, Nack};
use crate::types::{Hash, List, Set, SortedSet, Stream, StreamId, Value, ValueRef};

/// The version Goblin writes (redis-server 7.0's).
pub const RDB_VERSION: u32 = 10;

const OP_FUNCTION2: u8 = 0xF5;
/// Redis 7.0's release candidates' function opcode, which 7.0 refuses.
const OP_FUNCTION_PRE_GA: u8 = 0xF6;
const OP_MODULE_AUX: u8 = 0xF7;
const OP_IDLE: u8 = 0xF8;
const OP_FREQ: u8 = 0xF9;
const OP_AUX: u8 = 0xFA;
const OP_RESIZEDB: u8 = 0xFB;
const OP_EXPIRETIME_MS: u8 = 0xFC;
const OP_EXPIRETIME: u8 = 0xFD;
const OP_SELECTDB: u8 = 0xFE;
const OP_EOF: u8 = 0xFF;

/// The string type's byte.
pub const TYPE_STRING: u8 = 0;
const TYPE_LIST: u8 = 1;
const TYPE_SET: u8 = 2;
const TYPE_ZSET: u8 = 3;
const TYPE_HASH: u8 = 4;
const TYPE_ZSET_2: u8 = 5;
const TYPE_HASH_ZIPMAP: u8 = 9;
const TYPE_LIST_ZIPLIST: u8 = 10;
const TYPE_SET_INTSET: u8 = 11;
const TYPE_ZSET_ZIPLIST: u8 = 12;
const TYPE_HASH_ZIPLIST: u8 = 13;
const TYPE_LIST_QUICKLIST: u8 = 14;
const TYPE_HASH_LISTPACK: u8 = 16;
const TYPE_ZSET_LISTPACK: u8 = 17;
const TYPE_LIST_QUICKLIST_2: u8 = 18;
const TYPE_STREAM_LISTPACKS: u8 = 15;
const TYPE_STREAM_LISTPACKS_2: u8 = 19;
const TYPE_STREAM_LISTPACKS_3: u8 = 21;
/// A quicklist node holding one element as it is.
const QUICKLIST_NODE_PLAIN: u64 = 1;
/// A quicklist node holding a listpack of elements.
const QUICKLIST_NODE_PACKED: u64 = 2;

/// The CRC-64 Redis closes a file with (Jones polynomial, reflected, no final xor).
/// Eight bytes at a time (slicing-by-8): a background save checksums its whole file.
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    const TABLES: [[u64; 256]; 8] = crc64_tables();
    let mut words = data.chunks_exact(8);
    for word in &mut words {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        let v = crc ^ u64::from_le_bytes(bytes);
        crc = TABLES[7][(v & 0xFF) as usize]
            ^ TABLES[6][((v >> 8) & 0xFF) as usize]
            ^ TABLES[5][((v >> 16) & 0xFF) as usize]
            ^ TABLES[4][((v >> 24) & 0xFF) as usize]
            ^ TABLES[3][((v >> 32) & 0xFF) as usize]
            ^ TABLES[2][((v >> 40) & 0xFF) as usize]
            ^ TABLES[1][((v >> 48) & 0xFF) as usize]
            ^ TABLES[0][(v >> 56) as usize];
    }
    for &b in words.remainder() {
        crc = TABLES[0][((crc ^ u64::from(b)) & 0xFF) as usize] ^ (crc >> 8);
    }
    crc
}

/// The byte-at-a-time table, and the seven tables that advance it by one to seven more
/// zero bytes.
const fn crc64_tables() -> [[u64; 256]; 8] {
    let mut tables = [crc64_table(); 8];
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = tables[k - 1][i];
            tables[k][i] = (prev >> 8) ^ tables[0][(prev & 0xFF) as usize];
            i += 1;
        }
        k += 1;
    }
    tables
}

const fn crc64_table() -> [u64; 256] {
    // 0xad93d23594c935a9, bit-reversed.
    const POLY: u64 = 0x95AC_9329_AC4B_C9B5;
    let mut table = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

/// Writes an RDB file: the header and auxiliary fields, then databases and their keys,
/// then [`RdbWriter::finish`] (EOF and checksum).
#[derive(Debug)]
pub struct RdbWriter {
    out: Vec<u8>,
}

impl RdbWriter {
    /// A file with `REDIS0010` and the auxiliary fields Redis writes (name, value).
    pub fn new(aux: &[(&[u8], &[u8])]) -> RdbWriter {
        let mut w = RdbWriter {
            out: format!("REDIS{RDB_VERSION:04}").into_bytes(),
        };
        for (name, value) in aux {
            w.out.push(OP_AUX);
            w.string(name);
            w.string(value);
        }
        w
    }

    /// Starts database `db`, with the sizes of its hash tables (keys, keys with expiries).
    pub fn select_db(&mut self, db: u64, keys: u64, expires: u64) {
        self.out.push(OP_SELECTDB);
        self.length(db);
        self.out.push(OP_RESIZEDB);
        self.length(keys);
        self.length(expires);
    }

    /// Switches to database `db` (a `SELECTDB` without sizes: for a piece of a file that
    /// pieces of other databases may precede and follow).
    pub fn select(&mut self, db: u64) {
        self.out.push(OP_SELECTDB);
        self.length(db);
    }

    /// A string key, with its absolute expiry in Unix milliseconds.
    pub fn string_key(&mut self, key: &[u8], value: &[u8], expire_at: Option<Millis>) {
        self.key(key, &RdbValue::Str(value.to_vec()), expire_at);
    }

    /// A key of any type, with its absolute expiry in Unix milliseconds: a string as
    /// Redis encodes one, a collection in its plain form (redis-server chooses its
    /// encoding as it loads it).
    pub fn key(&mut self, key: &[u8], value: &RdbValue, expire_at: Option<Millis>) {
        let kind = match value {
            RdbValue::Str(_) => TYPE_STRING,
            RdbValue::List(_) => TYPE_LIST,
            RdbValue::Set(_) => TYPE_SET,
            RdbValue::Hash(_) => TYPE_HASH,
            RdbValue::ZSet(_) => TYPE_ZSET_2,
            RdbValue::Stream(_) => TYPE_STREAM_LISTPACKS_2,
        };
        self.key_header(kind, key, expire_at);
        match value {
            RdbValue::Str(v) => self.string(v),
            RdbValue::List(items) | RdbValue::Set(items) => {
                self.strings(items.len(), items.iter().map(Vec::as_slice));
            }
            RdbValue::Hash(pairs) => {
                self.pairs(pairs.len(), pairs.iter().map(|(f, v)| (&f[..], &v[..])));
            }
            RdbValue::ZSet(members) => {
                self.length(members.len() as u64);
                for (member, score) in members {
                    self.scored(member, *score);
                }
            }
            RdbValue::Stream(stream) => self.stream(stream),
        }
    }

    /// A stream as redis-server 7.0 writes one (`RDB_TYPE_STREAM_LISTPACKS_2`): its
    /// nodes as they are, its metadata, its groups with their pending entries and
    /// consumers.
    fn stream(&mut self, s: &Stream) {
        self.length(s.node_count() as u64);
        for (key, node) in s.nodes() {
            self.raw_string(&key.to_be_bytes());
            self.raw_string(node);
        }
        self.length(s.length);
        for id in [s.last_id, s.first_id, s.max_deleted] {
            self.length(id.ms);
            self.length(id.seq);
        }
        self.length(s.entries_added);
        self.length(s.groups.len() as u64);
        for (name, g) in &s.groups {
            self.raw_string(name);
            self.length(g.last_id.ms);
            self.length(g.last_id.seq);
            self.length(g.entries_read as u64);
            self.length(g.pel.len() as u64);
            for (id, nack) in &g.pel {
                self.out.extend_from_slice(&id.to_be_bytes());
                self.out
                    .extend_from_slice(&nack.delivery_time.to_le_bytes());
                self.length(nack.delivery_count);
            }
            self.length(g.consumers.len() as u64);
            for (name, c) in &g.consumers {
                self.raw_string(name);
                self.out.extend_from_slice(&c.seen_time.to_le_bytes());
                self.length(c.pel.len() as u64);
                for id in &c.pel {
                    self.out.extend_from_slice(&id.to_be_bytes());
                }
            }
        }
    }

    /// A string as its bytes (no integer encoding).
    fn raw_string(&mut self, s: &[u8]) {
        self.length(s.len() as u64);
        self.out.extend_from_slice(s);
    }

    /// A stored key, written from the store's own representation (nothing is copied
    /// first), in the same forms as [`RdbWriter::key`].
    pub fn entry(&mut self, key: &[u8], value: ValueRef<'_>, expire_at: Option<Millis>) {
        self.key_header(value_kind(value), key, expire_at);
        self.value_body(value);
    }

    /// A value's body, after its type byte.
    fn value_body(&mut self, value: ValueRef<'_>) {
        match value {
            ValueRef::Str(v) => self.string(v),
            ValueRef::List(list) => self.strings(list.len(), list.iter()),
            ValueRef::Set(set) => {
                self.length(set.len() as u64);
                for member in set.iter() {
                    match member {
                        Member::Int(n) => self.string(n.to_string().as_bytes()),
                        Member::Bytes(b) => self.string(b),
                    }
                }
            }
            ValueRef::Hash(hash) => self.pairs(hash.len(), hash.iter()),
            ValueRef::ZSet(zset) => {
                self.length(zset.len() as u64);
                zset.for_each(|member, score| self.scored(member, score));
            }
            ValueRef::Stream(stream) => self.stream(stream),
        }
    }

    /// A writer of key records alone, for a part of a file that another writer frames
    /// (one shard's keys in a snapshot).
    pub fn records() -> RdbWriter {
        RdbWriter { out: Vec::new() }
    }

    /// Bytes written and not yet taken.
    pub fn pending(&self) -> usize {
        self.out.len()
    }

    /// Takes the bytes written so far (a part written in pieces).
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// The end of a file whose bytes before it have checksum `crc` (see [`crc64`]):
    /// `EOF` and the checksum of everything up to and including it.
    pub fn trailer(crc: u64) -> [u8; 9] {
        let crc = crc64(crc, &[OP_EOF]);
        let mut out = [OP_EOF; 9];
        out[1..].copy_from_slice(&crc.to_le_bytes());
        out
    }

    fn key_header(&mut self, kind: u8, key: &[u8], expire_at: Option<Millis>) {
        if let Some(at) = expire_at {
            self.out.push(OP_EXPIRETIME_MS);
            self.out.extend_from_slice(&at.to_le_bytes());
        }
        self.out.push(kind);
        self.string(key);
    }

    fn strings<'s>(&mut self, n: usize, items: impl Iterator<Item = &'s [u8]>) {
        self.length(n as u64);
        for item in items {
            self.string(item);
        }
    }

    fn pairs<'s>(&mut self, n: usize, pairs: impl Iterator<Item = (&'s [u8], &'s [u8])>) {
        self.length(n as u64);
        for (field, value) in pairs {
            self.string(field);
            self.string(value);
        }
    }

    fn scored(&mut self, member: &[u8], score: f64) {
        self.string(member);
        self.out.extend_from_slice(&score.to_le_bytes());
    }

    /// Ends the file: `EOF` and the checksum of everything before it.
    pub fn finish(mut self) -> Vec<u8> {
        self.out.push(OP_EOF);
        let crc = crc64(0, &self.out);
        self.out.extend_from_slice(&crc.to_le_bytes());
        self.out
    }

    /// A length, in the fewest bytes Redis's encoding allows.
    fn length(&mut self, n: u64) {
        if n < 1 << 6 {
            self.out.push(n as u8);
        } else if n < 1 << 14 {
            self.out.push(0x40 | (n >> 8) as u8);
            self.out.push(n as u8);
        } else if let Ok(n) = u32::try_from(n) {
            self.out.push(0x80);
            self.out.extend_from_slice(&n.to_be_bytes());
        } else {
            self.out.push(0x81);
            self.out.extend_from_slice(&n.to_be_bytes());
        }
    }

    /// A function library's code (`RDB_OPCODE_FUNCTION2`): written before the
    /// databases, as Redis writes them.
    pub fn function(&mut self, code: &[u8]) {
        self.out.push(OP_FUNCTION2);
        self.string(code);
    }

    /// A string: as an integer when it is the canonical decimal form of one that fits in
    /// 32 bits (as `rdbTryIntegerEncoding` does), else its bytes (uncompressed, as Redis
    /// writes with `rdbcompression no`).
    fn string(&mut self, s: &[u8]) {
        if s.len() <= 11
            && let Some(n) = canonical_integer(s)
        {
            if let Ok(n) = i8::try_from(n) {
                self.out.push(0xC0);
                self.out.extend_from_slice(&n.to_le_bytes());
                return;
            }
            if let Ok(n) = i16::try_from(n) {
                self.out.push(0xC1);
                self.out.extend_from_slice(&n.to_le_bytes());
                return;
            }
            if let Ok(n) = i32::try_from(n) {
                self.out.push(0xC2);
                self.out.extend_from_slice(&n.to_le_bytes());
                return;
            }
        }
        self.length(s.len() as u64);
        self.out.extend_from_slice(s);
    }
}

/// The RDB type a stored value is written as.
fn value_kind(value: ValueRef<'_>) -> u8 {
    match value {
        ValueRef::Str(_) => TYPE_STRING,
        ValueRef::List(_) => TYPE_LIST,
        ValueRef::Set(_) => TYPE_SET,
        ValueRef::Hash(_) => TYPE_HASH,
        ValueRef::ZSet(_) => TYPE_ZSET_2,
        ValueRef::Stream(_) => TYPE_STREAM_LISTPACKS_2,
    }
}

/// DUMP's serialization of a value, as redis-server 7.0's: its RDB type and body, the
/// RDB version (2 bytes, little-endian) and the CRC-64 of all that (8 bytes,
/// little-endian).
pub fn dump(value: ValueRef<'_>) -> Vec<u8> {
    let mut w = RdbWriter::records();
    w.out.push(value_kind(value));
    w.value_body(value);
    let mut out = w.take();
    out.extend_from_slice(&(RDB_VERSION as u16).to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// FUNCTION DUMP's payload, as redis-server 7.0's: each library's code after the
/// `FUNCTION2` opcode, the RDB version (2 bytes, little-endian) and the CRC-64 of all
/// that (the codes are written uncompressed).
pub fn dump_functions(codes: &[Vec<u8>]) -> Vec<u8> {
    let mut w = RdbWriter::records();
    for code in codes {
        w.function(code);
    }
    let mut out = w.take();
    out.extend_from_slice(&(RDB_VERSION as u16).to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The library codes of a FUNCTION DUMP payload (redis-server's or Goblin's), or
/// FUNCTION RESTORE's error (without its `ERR`).
///
/// # Errors
/// As `functionRestoreCommand` words them.
pub fn undump_functions(payload: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
    let n = payload.len();
    const WRONG: &str = "DUMP payload version or checksum are wrong";
    if n < 10 {
        return Err(WRONG);
    }
    let version = u16::from_le_bytes([payload[n - 10], payload[n - 9]]);
    if u32::from(version) > RDB_VERSION {
        return Err(WRONG);
    }
    let mut stored = [0u8; 8];
    stored.copy_from_slice(&payload[n - 8..]);
    if crc64(0, &payload[..n - 8]) != u64::from_le_bytes(stored) {
        return Err(WRONG);
    }
    let mut r = Reader {
        data: &payload[..n - 10],
        at: 0,
    };
    let mut codes = Vec::new();
    while r.at < r.data.len() {
        match r.byte() {
            Ok(OP_FUNCTION2) => {}
            Ok(OP_FUNCTION_PRE_GA) => return Err("Pre-GA function format not supported"),
            Ok(_) => return Err("given type is not a function"),
            Err(_) => return Err("can not read data type"),
        }
        codes.push(r.string().map_err(|_| "Failed loading library payload")?);
    }
    Ok(codes)
}

/// Why a RESTORE payload was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayloadError {
    /// Too short, a newer RDB version, or the checksum does not match
    /// (`verifyDumpPayload`).
    VersionOrChecksum,
    /// The value does not read (or is an empty collection).
    BadData(String),
}

/// DEBUG SET-SKIP-CHECKSUM-VALIDATION: checksums of files and of RESTORE's payloads are
/// not checked (redis-server's test knob, for feeding it damaged data on purpose).
static SKIP_CHECKSUM: AtomicBool = AtomicBool::new(false);

/// Turns the checks of checksums off (`true`) or back on.
pub fn set_skip_checksum(skip: bool) {
    SKIP_CHECKSUM.store(skip, Ordering::Relaxed);
}

fn checksums_checked() -> bool {
    !SKIP_CHECKSUM.load(Ordering::Relaxed)
}

/// The value of a DUMP payload (redis-server's or Goblin's: any encoding an RDB file may
/// hold).
///
/// # Errors
/// [`PayloadError`], as RESTORE tells them apart.
pub fn undump(payload: &[u8]) -> Result<Value, PayloadError> {
    let n = payload.len();
    if n < 10 {
        return Err(PayloadError::VersionOrChecksum);
    }
    let version = u16::from_le_bytes([payload[n - 10], payload[n - 9]]);
    if u32::from(version) > RDB_VERSION {
        return Err(PayloadError::VersionOrChecksum);
    }
    let mut stored = [0u8; 8];
    stored.copy_from_slice(&payload[n - 8..]);
    if checksums_checked() && crc64(0, &payload[..n - 8]) != u64::from_le_bytes(stored) {
        return Err(PayloadError::VersionOrChecksum);
    }
    let mut r = Reader {
        data: &payload[..n - 10],
        at: 0,
    };
    let kind = r.byte().map_err(|e| PayloadError::BadData(e.to_string()))?;
    match r.value(kind, 0) {
        Ok(Some(value)) => value
            .into_value()
            .ok_or_else(|| PayloadError::BadData("an empty value".into())),
        Ok(None) => Err(PayloadError::BadData(format!("unknown type {kind}"))),
        Err(RdbError::Corrupt { reason, .. }) => Err(PayloadError::BadData(reason)),
        Err(e) => Err(PayloadError::BadData(e.to_string())),
    }
}

/// `s` as an integer when it is exactly the decimal form Redis prints of one.
fn canonical_integer(s: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(s).ok()?;
    let n: i64 = text.parse().ok()?;
    (n.to_string().as_bytes() == s).then_some(n)
}

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RdbError {
    /// Not an RDB file, or a version this reader does not know.
    Header(String),
    /// The file ends inside a record.
    Truncated {
        /// Where the record starts.
        offset: usize,
    },
    /// A record that makes no sense.
    Corrupt {
        /// Where.
        offset: usize,
        /// What.
        reason: String,
    },
    /// The checksum does not match the content.
    Checksum {
        /// The one in the file.
        stored: u64,
        /// The content's.
        computed: u64,
    },
    /// A key the caller refused, with its reason.
    Refused(String),
    /// A value of a type this reader does not load (yet).
    UnsupportedType {
        /// The key.
        key: Vec<u8>,
        /// The type's byte.
        kind: u8,
    },
}

impl fmt::Display for RdbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RdbError::Header(why) => write!(f, "not an RDB file Goblin reads: {why}"),
            RdbError::Truncated { offset } => {
                write!(f, "the file ends inside the record at {offset}")
            }
            RdbError::Corrupt { offset, reason } => {
                write!(f, "corrupt record at {offset}: {reason}")
            }
            // redis-server's words.
            RdbError::Checksum { stored, computed } => write!(
                f,
                "Wrong RDB checksum expected: ({computed:x}) got ({stored:x}): RDB CRC error"
            ),
            RdbError::Refused(why) => f.write_str(why),
            RdbError::UnsupportedType { key, kind } => write!(
                f,
                "key {:?} holds a value of RDB type {kind}, which Goblin does not load",
                String::from_utf8_lossy(key)
            ),
        }
    }
}

impl std::error::Error for RdbError {}

/// A value read from (or written to) a file.
#[derive(Debug, Clone, PartialEq)]
pub enum RdbValue {
    /// A string.
    Str(Vec<u8>),
    /// A list's elements, head first.
    List(Vec<Vec<u8>>),
    /// A set's members.
    Set(Vec<Vec<u8>>),
    /// A hash's fields and values.
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    /// A sorted set's members and scores.
    ZSet(Vec<(Vec<u8>, f64)>),
    /// A stream.
    Stream(Box<Stream>),
}

impl RdbValue {
    /// The value to store; `None` for an empty collection (redis-server skips such keys
    /// as it loads them).
    pub fn into_value(self) -> Option<Value> {
        let value = match self {
            RdbValue::Str(s) => return Some(Value::Str(s)),
            RdbValue::List(items) => {
                let mut list = List::default();
                items.iter().for_each(|item| list.push_back(item));
                Value::List(Box::new(list))
            }
            RdbValue::Set(members) => {
                let mut set = Set::default();
                members.iter().for_each(|m| {
                    set.insert(m);
                });
                Value::Set(Box::new(set))
            }
            RdbValue::Hash(pairs) => {
                let mut hash = Hash::default();
                pairs.iter().for_each(|(f, v)| {
                    hash.insert(f, v);
                });
                Value::Hash(Box::new(hash))
            }
            RdbValue::ZSet(members) => Value::ZSet(Box::new(SortedSet::from_entries(members))),
            // An empty stream is still a key.
            RdbValue::Stream(s) => return Some(Value::Stream(s)),
        };
        (!value.is_empty_collection()).then_some(value)
    }
}

/// A key read from a file.
#[derive(Debug, Clone, PartialEq)]
pub struct RdbKey {
    /// Its database.
    pub db: u64,
    /// The key.
    pub key: Vec<u8>,
    /// Its value.
    pub value: RdbValue,
    /// Its absolute expiry, Unix milliseconds.
    pub expire_at: Option<Millis>,
}

/// What a file said besides its keys.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RdbInfo {
    /// The format version.
    pub version: u32,
    /// Auxiliary fields, in order.
    pub aux: Vec<(Vec<u8>, Vec<u8>)>,
    /// The function libraries' codes, in order.
    pub functions: Vec<Vec<u8>>,
    /// Where the file's RDB ends (after its checksum): what follows is not the RDB's
    /// (an old-style log's records, after its RDB preamble).
    pub end: usize,
}

/// Reads a whole file, handing each key to `key` in file order.
///
/// # Errors
/// The first problem found; keys handed out before it stay handed out.
pub fn read(
    data: &[u8],
    mut key: impl FnMut(RdbKey) -> Result<(), RdbError>,
) -> Result<RdbInfo, RdbError> {
    let mut r = Reader { data, at: 0 };
    let magic = r
        .take(9)
        .map_err(|_| RdbError::Header("shorter than its header".into()))?;
    if &magic[..5] != b"REDIS" {
        return Err(RdbError::Header("no REDIS magic".into()));
    }
    let version: u32 = std::str::from_utf8(&magic[5..])
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| RdbError::Header("no version number".into()))?;
    if !(1..=RDB_VERSION).contains(&version) {
        return Err(RdbError::Header(format!(
            "version {version} (Goblin reads 1 to {RDB_VERSION})"
        )));
    }
    let mut info = RdbInfo {
        version,
        aux: Vec::new(),
        functions: Vec::new(),
        end: 0,
    };
    let (mut db, mut expire_at) = (0u64, None);
    loop {
        let start = r.at;
        match r.byte()? {
            OP_EOF => break,
            OP_AUX => {
                let name = r.string()?;
                let value = r.string()?;
                info.aux.push((name, value));
            }
            OP_SELECTDB => db = r.length()?,
            OP_RESIZEDB => {
                r.length()?;
                r.length()?;
            }
            OP_EXPIRETIME_MS => expire_at = Some(r.u64_le()?),
            OP_EXPIRETIME => expire_at = Some(u64::from(r.u32_le()?) * 1000),
            OP_IDLE => {
                r.length()?;
            }
            OP_FREQ => {
                r.byte()?;
            }
            OP_FUNCTION2 => info.functions.push(r.string()?),
            OP_MODULE_AUX => {
                return Err(RdbError::Corrupt {
                    offset: start,
                    reason: "module data is not supported".into(),
                });
            }
            kind => {
                let name = r.string()?;
                let value = match r.value(kind, start)? {
                    Some(value) => value,
                    None => return Err(RdbError::UnsupportedType { key: name, kind }),
                };
                key(RdbKey {
                    db,
                    key: name,
                    value,
                    expire_at: expire_at.take(),
                })?;
            }
        }
    }
    if version >= 5 {
        let body = r.at;
        let stored = r.u64_le()?;
        let computed = crc64(0, &data[..body]);
        // A file written with `rdbchecksum no` carries zero.
        if stored != 0 && stored != computed && checksums_checked() {
            return Err(RdbError::Checksum { stored, computed });
        }
    }
    info.end = r.at;
    Ok(info)
}

/// A cursor over a file in memory (or over a blob inside it).
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RdbError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.data.len())
            .ok_or(RdbError::Truncated { offset: self.at })?;
        let s = &self.data[self.at..end];
        self.at = end;
        Ok(s)
    }

    /// A value of type `kind` (`None`: a type this reader does not load).
    fn value(&mut self, kind: u8, at: usize) -> Result<Option<RdbValue>, RdbError> {
        let corrupt = |reason: &str| RdbError::Corrupt {
            offset: at,
            reason: reason.to_string(),
        };
        Ok(Some(match kind {
            TYPE_STRING => RdbValue::Str(self.string()?),
            TYPE_LIST | TYPE_SET => {
                let n = self.bounded_length()?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.string()?);
                }
                if kind == TYPE_LIST {
                    RdbValue::List(items)
                } else if has_duplicates(items.iter()) {
                    return Err(corrupt("Duplicate set members detected"));
                } else {
                    RdbValue::Set(items)
                }
            }
            TYPE_HASH => {
                let n = self.bounded_length()?;
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    pairs.push((self.string()?, self.string()?));
                }
                if has_duplicates(pairs.iter().map(|p| &p.0)) {
                    return Err(corrupt("Duplicate hash fields detected"));
                }
                RdbValue::Hash(pairs)
            }
            TYPE_ZSET | TYPE_ZSET_2 => {
                let n = self.bounded_length()?;
                let mut members = Vec::with_capacity(n);
                for _ in 0..n {
                    let member = self.string()?;
                    let score = if kind == TYPE_ZSET_2 {
                        f64::from_le_bytes(self.u64_le()?.to_le_bytes())
                    } else {
                        self.old_score()?
                    };
                    if score.is_nan() {
                        return Err(corrupt("Zset with NAN score detected"));
                    }
                    members.push((member, score));
                }
                if has_duplicates(members.iter().map(|m| &m.0)) {
                    return Err(corrupt("Duplicate zset fields detected"));
                }
                RdbValue::ZSet(members)
            }
            TYPE_SET_INTSET => {
                let blob = self.string()?;
                let members =
                    intset(&blob).ok_or_else(|| corrupt("Intset integrity check failed."))?;
                if has_duplicates(members.iter()) {
                    return Err(corrupt("Intset integrity check failed."));
                }
                RdbValue::Set(members)
            }
            TYPE_HASH_ZIPMAP => {
                let blob = self.string()?;
                let pairs =
                    zipmap(&blob).ok_or_else(|| corrupt("Zipmap integrity check failed."))?;
                RdbValue::Hash(pairs)
            }
            TYPE_LIST_ZIPLIST => {
                let blob = self.string()?;
                RdbValue::List(
                    ziplist(&blob)
                        .ok_or_else(|| corrupt("List ziplist integrity check failed."))?,
                )
            }
            TYPE_HASH_LISTPACK | TYPE_ZSET_LISTPACK | TYPE_HASH_ZIPLIST | TYPE_ZSET_ZIPLIST => {
                let blob = self.string()?;
                // Redis before 7.0 wrote small hashes and sorted sets as ziplists.
                // Checked as redis-server's deep sanitization checks them, with its words.
                let failed = corrupt(match kind {
                    TYPE_HASH_ZIPLIST => "Hash ziplist integrity check failed.",
                    TYPE_ZSET_ZIPLIST => "Zset ziplist integrity check failed.",
                    TYPE_HASH_LISTPACK => "Hash listpack integrity check failed.",
                    _ => "Zset listpack integrity check failed.",
                });
                let items = match kind {
                    TYPE_HASH_ZIPLIST | TYPE_ZSET_ZIPLIST => ziplist(&blob),
                    _ => listpack(&blob),
                }
                .filter(|items| items.len() % 2 == 0)
                .ok_or_else(|| failed.clone())?;
                if has_duplicates(items.iter().step_by(2)) {
                    return Err(failed);
                }
                let pairs = items.chunks_exact(2);
                if kind == TYPE_HASH_LISTPACK || kind == TYPE_HASH_ZIPLIST {
                    RdbValue::Hash(pairs.map(|p| (p[0].clone(), p[1].clone())).collect())
                } else {
                    let mut members = Vec::with_capacity(items.len() / 2);
                    for p in pairs {
                        let score = std::str::from_utf8(&p[1])
                            .ok()
                            .and_then(|t| t.parse::<f64>().ok())
                            .ok_or_else(|| corrupt("a sorted-set score that is not a number"))?;
                        members.push((p[0].clone(), score));
                    }
                    RdbValue::ZSet(members)
                }
            }
            TYPE_LIST_QUICKLIST_2 => {
                let nodes = self.bounded_length()?;
                let mut items = Vec::new();
                for _ in 0..nodes {
                    let container = self.length()?;
                    if container != QUICKLIST_NODE_PLAIN && container != QUICKLIST_NODE_PACKED {
                        return Err(corrupt("Quicklist integrity check failed."));
                    }
                    let blob = self.string()?;
                    if blob.is_empty() {
                        return Err(corrupt("an empty quicklist node"));
                    }
                    if container == QUICKLIST_NODE_PLAIN {
                        items.push(blob);
                    } else {
                        items.extend(
                            listpack(&blob)
                                .ok_or_else(|| corrupt("Listpack integrity check failed."))?,
                        );
                    }
                }
                RdbValue::List(items)
            }
            TYPE_LIST_QUICKLIST => {
                // Redis 3.2 to 6.2: a quicklist of ziplists.
                let nodes = self.bounded_length()?;
                let mut items = Vec::new();
                for _ in 0..nodes {
                    let blob = self.string()?;
                    items.extend(
                        ziplist(&blob).ok_or_else(|| corrupt("Ziplist integrity check failed."))?,
                    );
                }
                RdbValue::List(items)
            }
            TYPE_STREAM_LISTPACKS | TYPE_STREAM_LISTPACKS_2 | TYPE_STREAM_LISTPACKS_3 => {
                RdbValue::Stream(Box::new(self.stream(kind, at)?))
            }
            _ => return Ok(None),
        }))
    }

    fn stream_id(&mut self) -> Result<StreamId, RdbError> {
        Ok(StreamId::new(self.length()?, self.length()?))
    }

    fn raw_id(&mut self) -> Result<StreamId, RdbError> {
        let b = self.take(16)?;
        let mut a = [0u8; 16];
        a.copy_from_slice(b);
        Ok(StreamId::from_be_bytes(a))
    }

    /// A stream of RDB type `kind` (7.0's form; the one before it, without the first
    /// ID, the greatest deleted ID, entries added and entries read; 7.2's, with each
    /// consumer's active time).
    fn stream(&mut self, kind: u8, at: usize) -> Result<Stream, RdbError> {
        let corrupt = |reason: &str| RdbError::Corrupt {
            offset: at,
            reason: reason.to_string(),
        };
        let mut s = Stream::default();
        let nodes = self.bounded_length()?;
        for _ in 0..nodes {
            let key = self.string()?;
            let key: [u8; 16] = key
                .try_into()
                .map_err(|_| corrupt("a stream node key that is not 16 bytes"))?;
            let node = self.string()?;
            s.load_node(StreamId::from_be_bytes(key), node)
                .map_err(|why| {
                    corrupt(&format!("Stream listpack integrity check failed ({why})."))
                })?;
        }
        s.length = self.length()?;
        s.last_id = self.stream_id()?;
        if kind >= TYPE_STREAM_LISTPACKS_2 {
            s.first_id = self.stream_id()?;
            s.max_deleted = self.stream_id()?;
            s.entries_added = self.length()?;
        } else {
            s.first_id = s.edge(true).unwrap_or(StreamId::MIN);
            s.entries_added = s.length;
        }
        let live = s.range(StreamId::MIN, StreamId::MAX, false, 0).len() as u64;
        if live != s.length {
            return Err(corrupt("a stream whose length does not match its entries"));
        }
        let top = s.nodes().last().and_then(|(key, _)| {
            // No live entry may pass the last ID.
            s.range(key, StreamId::MAX, true, 1).first().map(|e| e.id)
        });
        if top.is_some_and(|top| top > s.last_id) {
            return Err(corrupt("a stream whose last ID is below its entries"));
        }
        let groups = self.bounded_length()?;
        for _ in 0..groups {
            let name = self.string()?;
            let last_id = self.stream_id()?;
            let entries_read = if kind >= TYPE_STREAM_LISTPACKS_2 {
                self.length()? as i64
            } else {
                s.estimate_distance(last_id)
                    .map_or(ENTRIES_READ_UNKNOWN, |n| n as i64)
            };
            let mut g = Group::new(last_id, entries_read);
            let pending = self.bounded_length()?;
            for _ in 0..pending {
                let id = self.raw_id()?;
                let delivery_time = self.u64_le()?;
                let delivery_count = self.length()?;
                g.pel.insert(
                    id,
                    Nack {
                        delivery_time,
                        delivery_count,
                        consumer: Vec::new(),
                    },
                );
            }
            let consumers = self.bounded_length()?;
            for _ in 0..consumers {
                let cname = self.string()?;
                let seen_time = self.u64_le()?;
                if kind >= TYPE_STREAM_LISTPACKS_3 {
                    self.u64_le()?; // The active time (7.2).
                }
                let mut c = Consumer {
                    seen_time,
                    ..Consumer::default()
                };
                let n = self.bounded_length()?;
                for _ in 0..n {
                    let id = self.raw_id()?;
                    let nack = g
                        .pel
                        .get_mut(&id)
                        .ok_or_else(|| corrupt("a consumer's pending entry not in its group's"))?;
                    nack.consumer = cname.clone();
                    c.pel.insert(id);
                }
                if g.consumers.insert(cname, c).is_some() {
                    return Err(corrupt("Duplicate stream consumer detected"));
                }
            }
            if g.pel
                .values()
                .any(|n| n.consumer.is_empty() && !g.consumers.contains_key(&n.consumer))
            {
                return Err(corrupt("a group's pending entry that no consumer holds"));
            }
            if s.groups.insert(name, g).is_some() {
                return Err(corrupt("a stream with two groups of one name"));
            }
        }
        Ok(s)
    }

    /// A score of the old sorted-set type: a length byte (253 NaN, 254 +inf, 255 -inf)
    /// and that many ASCII characters.
    fn old_score(&mut self) -> Result<f64, RdbError> {
        let at = self.at;
        let n = self.byte()?;
        Ok(match n {
            253 => f64::NAN,
            254 => f64::INFINITY,
            255 => f64::NEG_INFINITY,
            n => std::str::from_utf8(self.take(usize::from(n))?)
                .ok()
                .and_then(|t| t.parse().ok())
                .ok_or(RdbError::Corrupt {
                    offset: at,
                    reason: "a sorted-set score that is not a number".into(),
                })?,
        })
    }

    fn byte(&mut self) -> Result<u8, RdbError> {
        Ok(self.take(1)?[0])
    }

    fn u32_le(&mut self) -> Result<u32, RdbError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64_le(&mut self) -> Result<u64, RdbError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A length, or (`Err(special)`) the encoding of a special string.
    fn length_or_special(&mut self) -> Result<Result<u64, u8>, RdbError> {
        let first = self.byte()?;
        Ok(match first >> 6 {
            0 => Ok(u64::from(first & 0x3F)),
            1 => Ok((u64::from(first & 0x3F) << 8) | u64::from(self.byte()?)),
            2 if first == 0x80 => {
                let b = self.take(4)?;
                Ok(u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])))
            }
            2 if first == 0x81 => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                Ok(u64::from_be_bytes(a))
            }
            3 => Err(first & 0x3F),
            _ => {
                return Err(RdbError::Corrupt {
                    offset: self.at - 1,
                    reason: format!("unknown length encoding {first:#04x}"),
                });
            }
        })
    }

    fn length(&mut self) -> Result<u64, RdbError> {
        let at = self.at;
        self.length_or_special()?.map_err(|_| RdbError::Corrupt {
            offset: at,
            reason: "a string encoding where a length belongs".into(),
        })
    }

    /// A length (or a count of things of at least a byte each) that must fit in what is
    /// left of the file: nothing is allocated for more.
    fn bounded_length(&mut self) -> Result<usize, RdbError> {
        let at = self.at;
        let n = self.length()?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.data.len() - self.at)
            .ok_or(RdbError::Truncated { offset: at })
    }

    fn string(&mut self) -> Result<Vec<u8>, RdbError> {
        let at = self.at;
        match self.length_or_special()? {
            Ok(n) => {
                let n = usize::try_from(n).map_err(|_| RdbError::Truncated { offset: at })?;
                Ok(self.take(n)?.to_vec())
            }
            Err(0) => Ok((self.byte()? as i8).to_string().into_bytes()),
            Err(1) => {
                let b = self.take(2)?;
                Ok(i16::from_le_bytes([b[0], b[1]]).to_string().into_bytes())
            }
            Err(2) => {
                let b = self.take(4)?;
                Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]])
                    .to_string()
                    .into_bytes())
            }
            Err(3) => {
                let compressed = self.bounded_length()?;
                let len = self.length()?;
                let input = self.take(compressed)?;
                lzf_decompress(input, len).ok_or_else(|| RdbError::Corrupt {
                    offset: at,
                    reason: "an LZF string that does not decompress to its length".into(),
                })
            }
            Err(other) => Err(RdbError::Corrupt {
                offset: at,
                reason: format!("unknown string encoding {other}"),
            }),
        }
    }
}

/// A ziplist of `entries`, each an entry's encoding and content (what follows its
/// previous-entry length), with the header and the previous-entry lengths filled in:
/// what Redis before 7.0 wrote, for tests that make such files and payloads.
pub fn ziplist_of_entries(entries: &[Vec<u8>]) -> Vec<u8> {
    let mut zl = vec![0u8; 10];
    let mut prev = 0usize;
    let mut tail = 10usize;
    for e in entries {
        let start = zl.len();
        tail = start;
        if prev < 254 {
            zl.push(prev as u8);
        } else {
            zl.push(0xFE);
            zl.extend_from_slice(&(prev as u32).to_le_bytes());
        }
        zl.extend_from_slice(e);
        prev = zl.len() - start;
    }
    zl.push(0xFF);
    let total = zl.len() as u32;
    zl[0..4].copy_from_slice(&total.to_le_bytes());
    zl[4..8].copy_from_slice(&(tail as u32).to_le_bytes());
    zl[8..10].copy_from_slice(&(entries.len().min(usize::from(u16::MAX)) as u16).to_le_bytes());
    zl
}

/// Whether an item repeats (a hash's field, a set's or a sorted set's member): redis-server
/// refuses such a value when it builds its table, and in any form when it sanitizes.
fn has_duplicates<'a>(mut items: impl Iterator<Item = &'a Vec<u8>>) -> bool {
    let mut seen = std::collections::HashSet::new();
    items.any(|item| !seen.insert(item.as_slice()))
}

/// An intset's members, as decimal strings: `None` when malformed.
fn intset(blob: &[u8]) -> Option<Vec<Vec<u8>>> {
    let width = u32::from_le_bytes(blob.get(0..4)?.try_into().ok()?) as usize;
    let n = u32::from_le_bytes(blob.get(4..8)?.try_into().ok()?) as usize;
    if !matches!(width, 2 | 4 | 8) || blob.len() != 8 + n.checked_mul(width)? {
        return None;
    }
    Some(
        blob[8..]
            .chunks_exact(width)
            .map(|c| {
                let v = match width {
                    2 => i64::from(i16::from_le_bytes([c[0], c[1]])),
                    4 => i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                    _ => i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
                };
                v.to_string().into_bytes()
            })
            .collect(),
    )
}

/// A ziplist's entries (integers as their decimal strings), as Redis before 7.0 wrote
/// small lists, hashes and sorted sets: `None` when malformed. Every length is checked
/// against the blob, as redis-server's deep sanitization does.
fn ziplist(blob: &[u8]) -> Option<Vec<Vec<u8>>> {
    const HEADER: usize = 10;
    let bytes = u32::from_le_bytes(blob.get(0..4)?.try_into().ok()?) as usize;
    let tail = u32::from_le_bytes(blob.get(4..8)?.try_into().ok()?) as usize;
    let count = u16::from_le_bytes(blob.get(8..10)?.try_into().ok()?);
    if bytes != blob.len() || blob.last() != Some(&0xFF) {
        return None;
    }
    let mut items = Vec::new();
    let mut at = HEADER;
    let mut prev = 0usize;
    let mut last = HEADER;
    loop {
        let start = at;
        let first = *blob.get(at)?;
        if first == 0xFF {
            break;
        }
        // The previous entry's length: one byte, or 0xFE and four.
        let prevlen = if first < 0xFE {
            at += 1;
            usize::from(first)
        } else {
            let n = u32::from_le_bytes(blob.get(at + 1..at + 5)?.try_into().ok()?) as usize;
            at += 5;
            n
        };
        if start > HEADER && prevlen != prev {
            return None;
        }
        let enc = *blob.get(at)?;
        at += 1;
        let int = |width: usize, at: usize| -> Option<i64> {
            let b = blob.get(at..at + width)?;
            let mut a = [0u8; 8];
            a[..width].copy_from_slice(b);
            // Sign-extend from `width` bytes.
            let shift = 64 - 8 * width as u32;
            Some((i64::from_le_bytes(a) << shift) >> shift)
        };
        // A string's length (6, 14 or 32 bits), or `None` for an integer.
        let string_len = match enc >> 6 {
            0 => Some(usize::from(enc & 0x3F)),
            1 => {
                let n = (usize::from(enc & 0x3F) << 8) | usize::from(*blob.get(at)?);
                at += 1;
                Some(n)
            }
            2 if enc == 0x80 => {
                let n = u32::from_be_bytes(blob.get(at..at + 4)?.try_into().ok()?);
                at += 4;
                Some(n as usize)
            }
            2 => return None,
            _ => None,
        };
        let item = match string_len {
            Some(len) => {
                let s = blob.get(at..at.checked_add(len)?)?.to_vec();
                at += len;
                s
            }
            None => {
                let (width, value) = match enc {
                    0xC0 => (2, int(2, at)?),
                    0xD0 => (4, int(4, at)?),
                    0xE0 => (8, int(8, at)?),
                    0xF0 => (3, int(3, at)?),
                    0xFE => (1, int(1, at)?),
                    0xF1..=0xFD => (0, i64::from(enc & 0x0F) - 1),
                    _ => return None,
                };
                at += width;
                value.to_string().into_bytes()
            }
        };
        items.push(item);
        prev = at - start;
        last = start;
    }
    // The tail offset names the last entry, as redis-server checks it.
    if at + 1 != blob.len()
        || tail != last
        || (count != u16::MAX && usize::from(count) != items.len())
    {
        return None;
    }
    Some(items)
}

/// A zipmap's field-value pairs (Redis before 2.6's small hashes): `None` when
/// malformed or when a field repeats.
fn zipmap(blob: &[u8]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut at = 1; // The first byte is a count, not to be trusted (254 means "many").
    let len = |at: &mut usize| -> Option<usize> {
        let first = *blob.get(*at)?;
        match first {
            0..=253 => {
                *at += 1;
                Some(usize::from(first))
            }
            254 => {
                let n = u32::from_le_bytes(blob.get(*at + 1..*at + 5)?.try_into().ok()?);
                *at += 5;
                Some(n as usize)
            }
            _ => None,
        }
    };
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    while *blob.get(at)? != 0xFF {
        let klen = len(&mut at)?;
        let field = blob.get(at..at.checked_add(klen)?)?.to_vec();
        at += klen;
        let vlen = len(&mut at)?;
        let free = usize::from(*blob.get(at)?);
        at += 1;
        let value = blob.get(at..at.checked_add(vlen)?)?.to_vec();
        at = at.checked_add(vlen)?.checked_add(free)?;
        if !seen.insert(field.clone()) {
            return None;
        }
        pairs.push((field, value));
    }
    (at + 1 == blob.len()).then_some(pairs)
}

/// A listpack's entries (integers as their decimal strings): `None` when malformed.
fn listpack(blob: &[u8]) -> Option<Vec<Vec<u8>>> {
    if !listpack::validate(blob) {
        return None;
    }
    let mut items = Vec::new();
    let mut p = listpack::first(blob);
    while let Some(at) = p {
        items.push(listpack::get(blob, at).to_vec());
        p = listpack::next(blob, at);
    }
    Some(items)
}

/// Decompresses LZF (liblzf's format, as Redis compresses strings) into exactly `len`
/// bytes; `None` for anything else. A compressed string expands at most about 256 times,
/// so `len` is checked against that before anything is allocated.
fn lzf_decompress(input: &[u8], len: u64) -> Option<Vec<u8>> {
    let len = usize::try_from(len).ok()?;
    if len > input.len().saturating_mul(264) {
        return None;
    }
    let mut out = Vec::with_capacity(len);
    let mut ip = 0;
    while ip < input.len() {
        let ctrl = usize::from(input[ip]);
        ip += 1;
        if ctrl < 32 {
            let run = input.get(ip..ip + ctrl + 1)?;
            out.extend_from_slice(run);
            ip += ctrl + 1;
        } else {
            let mut n = ctrl >> 5;
            if n == 7 {
                n += usize::from(*input.get(ip)?);
                ip += 1;
            }
            let back = ((ctrl & 0x1F) << 8) + usize::from(*input.get(ip)?) + 1;
            ip += 1;
            let from = out.len().checked_sub(back)?;
            for i in 0..n + 2 {
                let b = out[from + i];
                out.push(b);
            }
        }
        if out.len() > len {
            return None;
        }
    }
    (out.len() == len).then_some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn crc64_by_words_is_crc64_by_bytes() {
        let table = crc64_table();
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 3) as u8).collect();
        for len in [0, 1, 7, 8, 9, 15, 16, 17, 999, 1000] {
            for start in [0, 3] {
                let slice = &data[start..len.max(start)];
                let mut want = 0x1234_5678_9abc_def0u64;
                for &b in slice {
                    want = table[((want ^ u64::from(b)) & 0xFF) as usize] ^ (want >> 8);
                }
                assert_eq!(
                    crc64(0x1234_5678_9abc_def0, slice),
                    want,
                    "{len} from {start}"
                );
            }
        }
    }

    #[test]
    fn crc64_is_redis_jones_crc() {
        // redis/src/crc64.c's test vector.
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    fn read_all(file: &[u8]) -> Result<(RdbInfo, Vec<RdbKey>), RdbError> {
        let mut keys = Vec::new();
        let info = read(file, |k| {
            keys.push(k);
            Ok(())
        })?;
        Ok((info, keys))
    }

    #[test]
    fn strings_round_trip_in_every_encoding() {
        let values: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"v".to_vec(),
            b"0".to_vec(),
            b"-1".to_vec(),
            b"127".to_vec(),
            b"-129".to_vec(),
            b"32768".to_vec(),
            b"-2147483648".to_vec(),
            b"2147483648".to_vec(),
            b"007".to_vec(),
            b"+5".to_vec(),
            vec![0u8, 255, 10, 13],
            vec![b'x'; 70],
            vec![b'y'; 20_000],
        ];
        let mut w = RdbWriter::new(&[(b"redis-ver", b"7.0.15")]);
        w.select_db(0, values.len() as u64, 1);
        for (i, v) in values.iter().enumerate() {
            let expire = (i == 3).then_some(1_900_000_000_000);
            w.string_key(format!("k{i}").as_bytes(), v, expire);
        }
        let file = w.finish();
        assert!(file.starts_with(b"REDIS0010\xFA"));
        let (info, keys) = read_all(&file).unwrap();
        assert_eq!(info.version, 10);
        assert_eq!(info.aux, vec![(b"redis-ver".to_vec(), b"7.0.15".to_vec())]);
        assert_eq!(keys.len(), values.len());
        for (i, (k, v)) in keys.iter().zip(&values).enumerate() {
            assert_eq!(k.key, format!("k{i}").into_bytes());
            assert_eq!(k.value, RdbValue::Str(v.clone()));
            assert_eq!(k.expire_at, (i == 3).then_some(1_900_000_000_000));
        }
    }

    #[test]
    fn collections_round_trip_in_their_plain_forms() {
        let values = vec![
            RdbValue::List(vec![b"a".to_vec(), b"12".to_vec(), vec![b'z'; 300]]),
            RdbValue::Set(vec![b"m".to_vec(), b"-7".to_vec()]),
            RdbValue::Hash(vec![
                (b"f".to_vec(), b"v".to_vec()),
                (b"n".to_vec(), b"1".to_vec()),
            ]),
            RdbValue::ZSet(vec![
                (b"low".to_vec(), f64::NEG_INFINITY),
                (b"mid".to_vec(), 1.5),
                (b"high".to_vec(), 1e300),
            ]),
        ];
        let mut w = RdbWriter::new(&[]);
        w.select_db(0, values.len() as u64, 0);
        for (i, v) in values.iter().enumerate() {
            w.key(format!("k{i}").as_bytes(), v, None);
        }
        let (_, keys) = read_all(&w.finish()).unwrap();
        let got: Vec<RdbValue> = keys.into_iter().map(|k| k.value).collect();
        assert_eq!(got, values);
    }

    #[test]
    fn listpacks_and_intsets_read_as_redis_writes_them() {
        // A listpack of "a", 5 (7-bit), -3 (13-bit), 1000 (13-bit), 70000 (24-bit), "xyz".
        let mut lp = vec![0u8; 6];
        lp.extend_from_slice(&[0x81, b'a', 2]);
        lp.extend_from_slice(&[0x05, 1]);
        let neg3 = (1u16 << 13) - 3;
        lp.extend_from_slice(&[0xC0 | (neg3 >> 8) as u8, neg3 as u8, 2]);
        lp.extend_from_slice(&[0xC0 | (1000u16 >> 8) as u8, 1000u16 as u8, 2]);
        lp.extend_from_slice(&[0xF2, 0x70, 0x11, 0x01, 4]);
        lp.extend_from_slice(&[0x83, b'x', b'y', b'z', 4]);
        lp.push(0xFF);
        let total = lp.len() as u32;
        lp[0..4].copy_from_slice(&total.to_le_bytes());
        lp[4..6].copy_from_slice(&6u16.to_le_bytes());
        let items = listpack(&lp).unwrap();
        let want: Vec<Vec<u8>> = ["a", "5", "-3", "1000", "70000", "xyz"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        assert_eq!(items, want);
        assert_eq!(listpack(&lp[..lp.len() - 1]), None, "no end byte");
        // An intset of 16-bit members.
        let mut is = 2u32.to_le_bytes().to_vec();
        is.extend_from_slice(&2u32.to_le_bytes());
        is.extend_from_slice(&(-2i16).to_le_bytes());
        is.extend_from_slice(&300i16.to_le_bytes());
        assert_eq!(intset(&is).unwrap(), vec![b"-2".to_vec(), b"300".to_vec()]);
        assert_eq!(intset(&is[..11]), None);
    }

    #[test]
    fn ziplists_and_zipmaps_read_as_old_redis_wrote_them() {
        let long = vec![b'q'; 300];
        let mut long_entry = vec![0x40 | (300u16 >> 8) as u8, 300u16 as u8];
        long_entry.extend_from_slice(&long);
        let entries = vec![
            vec![0x01, b'a'], // a 6-bit length string
            long_entry,       // a 14-bit length string
            vec![0xF1],       // the immediate 0
            vec![0xFD],       // the immediate 12
            vec![0xFE, 0xF6], // int8 -10
            [vec![0xC0], 1000i16.to_le_bytes().to_vec()].concat(),
            vec![0xF0, 0x70, 0x11, 0xFF], // int24 -61072
            [vec![0xD0], (-70000i32).to_le_bytes().to_vec()].concat(),
            [vec![0xE0], 6_000_000_000i64.to_le_bytes().to_vec()].concat(),
            [vec![0x80], 3u32.to_be_bytes().to_vec(), b"xyz".to_vec()].concat(),
        ];
        let zl = ziplist_of_entries(&entries);
        let want: Vec<Vec<u8>> = vec![
            b"a".to_vec(),
            long,
            b"0".to_vec(),
            b"12".to_vec(),
            b"-10".to_vec(),
            b"1000".to_vec(),
            (0xFF1170u32 as i32 - (1 << 24)).to_string().into_bytes(),
            b"-70000".to_vec(),
            b"6000000000".to_vec(),
            b"xyz".to_vec(),
        ];
        assert_eq!(ziplist(&zl), Some(want));
        assert_eq!(ziplist(&zl[..zl.len() - 1]), None, "no end byte");
        let mut wrong_count = zl.clone();
        wrong_count[8] = 9;
        assert_eq!(
            ziplist(&wrong_count),
            None,
            "a count that is not the entries'"
        );
        let mut wrong_prev = zl.clone();
        wrong_prev[10 + 3] = 7; // the second entry's prevlen
        assert_eq!(
            ziplist(&wrong_prev),
            None,
            "a prevlen that is not the entry's"
        );
        let mut wrong_tail = zl.clone();
        wrong_tail[4] ^= 1;
        assert_eq!(
            ziplist(&wrong_tail),
            None,
            "a tail offset that is not the last entry's"
        );
        // Every truncation and every byte changed is refused or read, never a panic.
        for cut in 0..zl.len() {
            assert_eq!(ziplist(&zl[..cut]), None);
        }
        for at in 0..zl.len() {
            let mut bad = zl.clone();
            bad[at] ^= 0xA5;
            let _ = ziplist(&bad);
        }
        // redis-server's tests/assets/hash-zipmap.rdb (Redis 2.x): hash {f1: v1, f2: v2}.
        let file = b"REDIS0003\xfe\x00\x09\x04hash\x10\x02\x02f1\x02\x00v1\x02f2\x02\x00v2\xff\xff";
        let (_, keys) = read_all(file).expect("the zipmap file loads");
        assert_eq!(keys.len(), 1);
        assert_eq!(
            keys[0].value,
            RdbValue::Hash(vec![
                (b"f1".to_vec(), b"v1".to_vec()),
                (b"f2".to_vec(), b"v2".to_vec())
            ])
        );
        let zm = b"\x02\x02f1\x02\x00v1\x02f1\x02\x00v2\xff";
        assert_eq!(zipmap(zm), None, "a field twice");
        for cut in 0..zm.len() {
            assert_eq!(zipmap(&zm[..cut]), None);
        }
    }

    #[test]
    fn damage_is_an_error_never_a_panic() {
        let mut w = RdbWriter::new(&[]);
        w.select_db(0, 1, 0);
        w.string_key(b"key", b"value", None);
        let file = w.finish();
        // Every truncation, and every single-byte change, is refused or read safely.
        for cut in 0..file.len() {
            assert!(read_all(&file[..cut]).is_err(), "cut at {cut}");
        }
        for at in 0..file.len() {
            let mut bad = file.clone();
            bad[at] ^= 0x5A;
            let _ = read_all(&bad);
        }
        let mut flipped = file.clone();
        let body = flipped.len() - 9;
        flipped[body - 1] ^= 1;
        assert!(matches!(read_all(&flipped), Err(RdbError::Checksum { .. })));
        // A declared length larger than the file allocates nothing.
        let mut huge = b"REDIS0010\x00\x81".to_vec();
        huge.extend_from_slice(&u64::MAX.to_be_bytes());
        assert!(matches!(read_all(&huge), Err(RdbError::Truncated { .. })));
    }

    #[test]
    fn a_damaged_stream_is_an_error_or_a_stream_never_a_panic() {
        let mut st = Stream::default();
        let limits = crate::types::stream::NodeLimits {
            max_bytes: 4096,
            max_entries: 3,
        };
        for i in 1..=7u64 {
            let v = i.to_string();
            let fields: Vec<&[u8]> = if i % 3 == 0 {
                vec![b"other", b"x"]
            } else {
                vec![b"a", v.as_bytes(), b"b", b"-5"]
            };
            st.add(StreamId::new(i, i), &fields, limits).expect("fits");
        }
        st.delete(&[StreamId::new(2, 2)]);
        let mut g = Group::new(StreamId::new(5, 5), 4);
        g.deliver(StreamId::new(4, 4), b"alice", 1_000, 1);
        g.deliver(StreamId::new(5, 5), b"bob", 1_000, 1);
        st.groups.insert(b"g".to_vec(), g);
        let mut w = RdbWriter::new(&[]);
        w.select_db(0, 1, 0);
        w.key(b"s", &RdbValue::Stream(Box::new(st.clone())), None);
        let file = w.finish();
        let (_, keys) = read_all(&file).expect("the file reads back");
        assert_eq!(keys[0].value, RdbValue::Stream(Box::new(st)));
        for cut in 0..file.len() {
            assert!(read_all(&file[..cut]).is_err(), "cut at {cut}");
        }
        // Every byte changed in several ways, in a file without a checksum (as
        // `rdbchecksum no` writes it), so that whatever the reader accepts is walked too.
        let body = file.len() - 8;
        for at in 0..body {
            for x in [0x01, 0x5A, 0x80, 0xFF] {
                let mut bad = file.clone();
                bad[body..].fill(0);
                bad[at] ^= x;
                if let Ok((_, keys)) = read_all(&bad) {
                    for k in keys {
                        if let Some(Value::Stream(s)) = k.value.into_value() {
                            let _ = s.range(StreamId::MIN, StreamId::MAX, true, 0);
                            let _ = s.range(StreamId::MIN, StreamId::MAX, false, 0);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn lzf_reads_literals_and_back_references() {
        // "aaaaaaaaaa": a literal 'a', then a back reference of length 9 at distance 1.
        let compressed = [0x00, b'a', 0xE0, 0x00, 0x00];
        assert_eq!(
            lzf_decompress(&compressed, 10).unwrap(),
            b"aaaaaaaaaa".to_vec()
        );
        assert_eq!(lzf_decompress(&compressed, 9), None, "the wrong length");
        assert_eq!(
            lzf_decompress(&[0x20, 0x05], 3),
            None,
            "a reference before the start"
        );
    }

    #[test]
    fn other_types_are_refused_by_name() {
        let mut file = b"REDIS0010\xFE\x00".to_vec();
        file.push(6); // a module value
        file.extend_from_slice(b"\x01s");
        let err = read_all(&file).unwrap_err();
        assert_eq!(
            err,
            RdbError::UnsupportedType {
                key: b"s".to_vec(),
                kind: 6
            }
        );
        assert!(err.to_string().contains("\"s\""));
    }
}

#[cfg(test)]
mod snapshot_tests {
    use super::*;
    use crate::Keyspace;

    /// A file from a keyspace's image: header, the records, trailer.
    fn file_of(records: &[u8], keys: usize, expires: usize) -> Vec<u8> {
        let mut w = RdbWriter::new(&[(b"redis-ver", b"7.0.15")]);
        w.select_db(0, keys as u64, expires as u64);
        let mut out = w.take();
        out.extend_from_slice(records);
        let crc = crc64(0, &out);
        out.extend_from_slice(&RdbWriter::trailer(crc));
        out
    }

    fn contents(file: &[u8]) -> Vec<(Vec<u8>, RdbValue, Option<Millis>)> {
        let mut keys = Vec::new();
        read(file, |k| {
            keys.push((k.key, k.value, k.expire_at));
            Ok(())
        })
        .expect("the image reads back");
        keys.sort_by(|a, b| a.0.cmp(&b.0));
        keys
    }

    #[test]
    fn an_image_is_the_keyspace_at_its_start_whatever_changes_after() {
        let now = 1_000;
        let mut ks = Keyspace::new();
        for i in 0..2_000 {
            ks.set_str(
                format!("k{i}").as_bytes(),
                format!("v{i}").as_bytes(),
                None,
                now,
            );
        }
        ks.set_str(b"ttl", b"x", Some(50_000), now);
        ks.set_str(b"dead", b"x", Some(999), now);
        let mut hash = Hash::default();
        hash.insert(b"f", b"1");
        ks.insert(b"h", Value::Hash(Box::new(hash)), None, now);
        let (n, volatile) = ks.begin_snapshot();
        assert_eq!((n, volatile), (2_003, 2));
        // Changes after the start, mixed with the walk.
        let mut records = Vec::new();
        let mut done = false;
        let mut round = 0;
        while !done {
            done = ks.snapshot_step(100, usize::MAX);
            records.extend(ks.snapshot_take());
            let i = round * 37 % 2_000;
            ks.set_str(format!("k{i}").as_bytes(), b"changed", None, now);
            ks.delete(format!("k{}", (i + 1) % 2_000).as_bytes(), now);
            ks.set_str(format!("new{round}").as_bytes(), b"n", None, now);
            ks.modify(b"h", now, |_| ((), true));
            round += 1;
        }
        ks.clear();
        let (rest, keys) = ks.end_snapshot();
        records.extend(rest);
        assert_eq!(
            keys, 2_003,
            "every key once, the expired one too (as Redis)"
        );
        let got = contents(&file_of(&records, n, volatile));
        let mut want: Vec<(Vec<u8>, RdbValue, Option<Millis>)> = (0..2_000)
            .map(|i| {
                let v = RdbValue::Str(format!("v{i}").into_bytes());
                (format!("k{i}").into_bytes(), v, None)
            })
            .collect();
        want.push((b"ttl".to_vec(), RdbValue::Str(b"x".to_vec()), Some(50_000)));
        want.push((b"dead".to_vec(), RdbValue::Str(b"x".to_vec()), Some(999)));
        want.push((
            b"h".to_vec(),
            RdbValue::Hash(vec![(b"f".to_vec(), b"1".to_vec())]),
            None,
        ));
        want.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(got, want);
        assert!(round > 5, "the walk took several steps");
    }

    #[test]
    fn values_read_back_into_the_store() {
        let list = RdbValue::List(vec![b"a".to_vec(), b"b".to_vec()]);
        let Some(Value::List(l)) = list.into_value() else {
            panic!("a list");
        };
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![&b"a"[..], b"b"]);
        assert!(RdbValue::Set(Vec::new()).into_value().is_none());
        let z = RdbValue::ZSet(vec![(b"m".to_vec(), 2.5)]).into_value();
        assert!(matches!(z, Some(Value::ZSet(z)) if z.score(b"m") == Some(2.5)));
    }
}
