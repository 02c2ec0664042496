//! A whole dataset read out of a server, to compare two servers (or one server before and
//! after a restart) key by key: type, value and absolute expiry.

use std::collections::BTreeMap;

use redis::{Connection, Value};

/// One key's content, in a form that compares equal when the content is the same
/// (members of sets sorted; hashes by field; sorted sets in rank order with scores).
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    /// A string.
    Str(Vec<u8>),
    /// A list, head first.
    List(Vec<Vec<u8>>),
    /// A set, sorted.
    Set(Vec<Vec<u8>>),
    /// A hash, by field.
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    /// A sorted set, in rank order.
    ZSet(Vec<(Vec<u8>, String)>),
    /// A stream: its entries, what XINFO STREAM says of it (but its radix tree's node
    /// count, internal to redis-server), and per group what XINFO GROUPS says and its
    /// pending entries (without their idle times) and consumers.
    Stream(Box<StreamContent>),
    /// Another type, by name.
    Other(String),
}

/// What a stream holds, as its replies show it.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamContent {
    /// XRANGE - +
    pub entries: Value,
    /// XINFO STREAM, with `radix-tree-nodes` left out.
    pub info: Vec<(String, Value)>,
    /// Per group: XINFO GROUPS' fields, its pending entries (ID, consumer, deliveries)
    /// and its consumers' names and pending counts.
    pub groups: Vec<GroupContent>,
}

/// A group of a stream: XINFO GROUPS' fields, its pending entries (ID, consumer,
/// deliveries), its consumers' names and pending counts.
pub type GroupContent = (Vec<(String, Value)>, Vec<Value>, Vec<(Value, Value)>);

/// A RESP2 flat map (field, value, …) as pairs with text names.
fn pairs(v: Value) -> Vec<(String, Value)> {
    let items = match v {
        Value::Array(items) => items,
        Value::Map(m) => m.into_iter().flat_map(|(k, v)| [k, v]).collect(),
        other => return vec![(String::new(), other)],
    };
    items
        .chunks(2)
        .map(|p| {
            let name = match &p[0] {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                Value::SimpleString(s) => s.clone(),
                other => format!("{other:?}"),
            };
            (name, p.get(1).cloned().unwrap_or(Value::Nil))
        })
        .collect()
}

/// The stream at `key`, as [`StreamContent`].
fn stream(con: &mut Connection, key: &[u8]) -> StreamContent {
    let entries: Value = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query(con)
        .expect("XRANGE");
    let mut info = pairs(
        redis::cmd("XINFO")
            .arg("STREAM")
            .arg(key)
            .query(con)
            .expect("XINFO STREAM"),
    );
    info.retain(|(name, _)| name != "radix-tree-nodes");
    let groups: Value = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(key)
        .query(con)
        .expect("XINFO GROUPS");
    let groups = match groups {
        Value::Array(g) => g,
        _ => Vec::new(),
    };
    let groups = groups
        .into_iter()
        .map(|g| {
            let fields = pairs(g);
            let name = fields
                .iter()
                .find(|(n, _)| n == "name")
                .map(|(_, v)| v.clone())
                .unwrap_or(Value::Nil);
            let Value::BulkString(name) = name else {
                return (fields, Vec::new(), Vec::new());
            };
            let pending: Value = redis::cmd("XPENDING")
                .arg(key)
                .arg(&name)
                .arg("-")
                .arg("+")
                .arg(1_000_000)
                .query(con)
                .expect("XPENDING");
            let pending = match pending {
                Value::Array(rows) => rows
                    .into_iter()
                    .map(|row| match row {
                        // (ID, consumer, idle, deliveries): the idle time is the clock's.
                        Value::Array(mut r) if r.len() == 4 => {
                            r.remove(2);
                            Value::Array(r)
                        }
                        other => other,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            let consumers: Value = redis::cmd("XINFO")
                .arg("CONSUMERS")
                .arg(key)
                .arg(&name)
                .query(con)
                .expect("XINFO CONSUMERS");
            let consumers = match consumers {
                Value::Array(cs) => cs
                    .into_iter()
                    .map(|c| {
                        let f = pairs(c);
                        let get = |n: &str| {
                            f.iter()
                                .find(|(k, _)| k == n)
                                .map_or(Value::Nil, |(_, v)| v.clone())
                        };
                        (get("name"), get("pending"))
                    })
                    .collect(),
                _ => Vec::new(),
            };
            (fields, pending, consumers)
        })
        .collect();
    StreamContent {
        entries,
        info,
        groups,
    }
}

/// A key: its content and its absolute expiry (PEXPIRETIME; -1 without one).
#[derive(Clone, Debug, PartialEq)]
pub struct Key {
    /// What it holds.
    pub content: Content,
    /// Its deadline in Unix ms, or -1.
    pub expire_at: i64,
}

/// Every key of the server (through KEYS *), with its content and expiry.
///
/// # Panics
/// When a command fails.
pub fn dataset(con: &mut Connection) -> BTreeMap<Vec<u8>, Key> {
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(con).expect("KEYS");
    let mut out = BTreeMap::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE").arg(&key).query(con).expect("TYPE");
        let content = match kind.as_str() {
            "string" => Content::Str(redis::cmd("GET").arg(&key).query(con).expect("GET")),
            "list" => Content::List(
                redis::cmd("LRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .query(con)
                    .expect("LRANGE"),
            ),
            "set" => {
                let mut m: Vec<Vec<u8>> = redis::cmd("SMEMBERS")
                    .arg(&key)
                    .query(con)
                    .expect("SMEMBERS");
                m.sort();
                Content::Set(m)
            }
            "hash" => Content::Hash(redis::cmd("HGETALL").arg(&key).query(con).expect("HGETALL")),
            "zset" => {
                let flat: Vec<Vec<u8>> = redis::cmd("ZRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query(con)
                    .expect("ZRANGE");
                Content::ZSet(
                    flat.chunks(2)
                        .map(|p| (p[0].clone(), String::from_utf8_lossy(&p[1]).into_owned()))
                        .collect(),
                )
            }
            "stream" => Content::Stream(Box::new(stream(con, &key))),
            "none" => continue,
            other => Content::Other(other.to_string()),
        };
        let expire_at: i64 = match redis::cmd("PEXPIRETIME").arg(&key).query(con) {
            Ok(Value::Int(n)) => n,
            _ => -1,
        };
        if expire_at == -2 {
            continue;
        }
        out.insert(key, Key { content, expire_at });
    }
    out
}

/// Every key of every database that holds some (by `INFO keyspace`), database by
/// database; the connection is left in database 0.
///
/// # Panics
/// When a command fails.
pub fn all_databases(con: &mut Connection) -> BTreeMap<u32, BTreeMap<Vec<u8>, Key>> {
    let info: String = redis::cmd("INFO").arg("keyspace").query(con).expect("INFO");
    let mut out = BTreeMap::new();
    for line in info.lines() {
        let Some(db) = line
            .strip_prefix("db")
            .and_then(|rest| rest.split(':').next())
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        redis::cmd("SELECT").arg(db).exec(con).expect("SELECT");
        out.insert(db, dataset(con));
    }
    redis::cmd("SELECT").arg(0).exec(con).expect("SELECT");
    out
}
