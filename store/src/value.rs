//! Values a key can hold.

use std::collections::HashMap;

/// A hash: field → value.
pub type Hash = HashMap<Vec<u8>, Vec<u8>>;

/// A sorted set, for now as member → score (the commands Goblin has so far need no
/// order: ZADD, ZSCORE, ZCARD, ZREM).
pub type SortedSet = HashMap<Vec<u8>, f64>;

/// A key's value. Strings are binary-safe byte strings.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A string.
    Str(Vec<u8>),
    /// A hash.
    Hash(Box<Hash>),
    /// A sorted set.
    ZSet(Box<SortedSet>),
}

impl Value {
    /// The name `TYPE` reports for the value.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
            Value::ZSet(_) => "zset",
        }
    }

    /// The bytes of a string value; `None` for other types.
    pub fn as_str(&self) -> Option<&[u8]> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}
