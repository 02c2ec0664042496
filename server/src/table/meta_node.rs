//! Static reply trees for COMMAND INFO and COMMAND DOCS.

use goblin_protocol::Encoder;

/// A reply value known at compile time, with the RESP3 type redis-server gives it.
#[derive(Debug)]
pub enum Node {
    /// A simple string.
    Simple(&'static str),
    /// A bulk string.
    Bulk(&'static str),
    /// An integer.
    Int(i64),
    /// A null.
    Null,
    /// An array.
    Array(&'static [Node]),
    /// A set (an array in RESP2).
    Set(&'static [Node]),
    /// A map, as alternating keys and values (a flat array in RESP2).
    Map(&'static [Node]),
}

impl Node {
    /// Writes the node.
    pub fn encode(&self, out: &mut Encoder<'_>) {
        match self {
            Node::Simple(s) => out.simple(s.as_bytes()),
            Node::Bulk(s) => out.bulk(s.as_bytes()),
            Node::Int(n) => out.integer(*n),
            Node::Null => out.null(),
            Node::Array(items) => {
                out.array(items.len());
                items.iter().for_each(|n| n.encode(out));
            }
            Node::Set(items) => {
                out.set(items.len());
                items.iter().for_each(|n| n.encode(out));
            }
            Node::Map(items) => {
                out.map(items.len() / 2);
                items.iter().for_each(|n| n.encode(out));
            }
        }
    }

    /// The elements of an aggregate; empty for scalars.
    pub fn items(&self) -> &'static [Node] {
        match self {
            Node::Array(items) | Node::Set(items) | Node::Map(items) => items,
            _ => &[],
        }
    }

    /// The integer value, if this is an integer.
    pub fn int(&self) -> Option<i64> {
        match self {
            Node::Int(n) => Some(*n),
            _ => None,
        }
    }

    /// The text of a string node.
    pub fn text(&self) -> Option<&'static str> {
        match self {
            Node::Simple(s) | Node::Bulk(s) => Some(s),
            _ => None,
        }
    }

    /// In a map, the value for `key`.
    pub fn get(&self, key: &str) -> Option<&'static Node> {
        match self {
            Node::Map(items) => items
                .chunks_exact(2)
                .find(|kv| kv[0].text() == Some(key))
                .map(|kv| &kv[1]),
            _ => None,
        }
    }
}

/// One command's COMMAND INFO entry (`info`, the 10-element array) and COMMAND DOCS entry
/// (`docs`, the map).
#[derive(Debug)]
pub struct Meta {
    /// The COMMAND INFO entry.
    pub info: Node,
    /// The COMMAND DOCS entry.
    pub docs: Node,
}

/// Positions of the COMMAND INFO fields.
pub mod info {
    /// Command name.
    pub const NAME: usize = 0;
    /// Arity.
    pub const ARITY: usize = 1;
    /// Flags.
    pub const FLAGS: usize = 2;
    /// First key.
    pub const FIRST_KEY: usize = 3;
    /// Last key.
    pub const LAST_KEY: usize = 4;
    /// Key step.
    pub const STEP: usize = 5;
    /// ACL categories.
    pub const ACL_CATEGORIES: usize = 6;
    /// Key specs.
    pub const KEY_SPECS: usize = 8;
    /// Subcommands.
    pub const SUBCOMMANDS: usize = 9;
}
