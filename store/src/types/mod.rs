//! The values a key can hold, one module per type. Each type owns what is particular to
//! it: its representation, the encoding name OBJECT ENCODING reports for it (as
//! redis-server 7.0 would have chosen it), its memory use, and whether it is an empty
//! collection (which never stays in the keyspace: the key is deleted with its last
//! element).

pub mod hash;
pub mod list;
pub mod listpack;
pub mod set;
pub mod stream;
pub mod string;
pub mod thresholds;
pub mod zset;

pub use hash::Hash;
pub use list::List;
pub use set::Set;
pub use stream::{Stream, StreamId};
pub use zset::SortedSet;

/// A key's value. Strings are binary-safe byte strings.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A string.
    Str(Vec<u8>),
    /// A hash.
    Hash(Box<Hash>),
    /// A list.
    List(Box<List>),
    /// A set.
    Set(Box<Set>),
    /// A sorted set.
    ZSet(Box<SortedSet>),
    /// A stream.
    Stream(Box<Stream>),
}

impl Value {
    /// The name `TYPE` reports for the value.
    pub fn type_name(&self) -> &'static str {
        self.as_ref().type_name()
    }

    /// The bytes of a string value; `None` for other types.
    pub fn as_str(&self) -> Option<&[u8]> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value, borrowed.
    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Str(s) => ValueRef::Str(s),
            Value::Hash(h) => ValueRef::Hash(h),
            Value::List(l) => ValueRef::List(l),
            Value::Set(m) => ValueRef::Set(m),
            Value::ZSet(z) => ValueRef::ZSet(z),
            Value::Stream(x) => ValueRef::Stream(x),
        }
    }

    /// True for a collection with no elements left: its key must go.
    pub fn is_empty_collection(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::Hash(h) => h.is_empty(),
            Value::List(l) => l.is_empty(),
            Value::Set(m) => m.is_empty(),
            Value::ZSet(z) => z.is_empty(),
            // A stream stays when its last entry goes.
            Value::Stream(_) => false,
        }
    }

    /// How many allocations freeing it takes, roughly, as Redis's
    /// `lazyfreeGetFreeEffort` counts them: a hash table's or a skiplist's elements, a
    /// list's nodes, a stream's nodes and its groups with their pending entries (the
    /// first group's count for each); 1 for a string and for a compact encoding (one
    /// buffer).
    pub fn free_effort(&self) -> usize {
        match self {
            Value::Hash(h) if h.encoding() == "hashtable" => h.len(),
            Value::Set(m) if m.encoding() == "hashtable" => m.len(),
            Value::ZSet(z) if z.encoding() == "skiplist" => z.len(),
            Value::List(l) => l.node_count(),
            Value::Stream(x) => x.free_effort(),
            _ => 1,
        }
    }

    /// Approximate heap bytes of the value when it is boxed beside its entry.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Value::Str(s) => s.capacity(),
            Value::Hash(h) => h.heap_bytes(),
            Value::List(l) => l.heap_bytes(),
            Value::Set(m) => m.heap_bytes(),
            Value::ZSet(z) => z.heap_bytes(),
            Value::Stream(x) => x.heap_bytes(),
        }
    }
}

/// A stored value, borrowed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ValueRef<'a> {
    /// A string.
    Str(&'a [u8]),
    /// A hash.
    Hash(&'a Hash),
    /// A list.
    List(&'a List),
    /// A set.
    Set(&'a Set),
    /// A sorted set.
    ZSet(&'a SortedSet),
    /// A stream.
    Stream(&'a Stream),
}

impl<'a> ValueRef<'a> {
    /// The name `TYPE` reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            ValueRef::Str(_) => "string",
            ValueRef::Hash(_) => "hash",
            ValueRef::List(_) => "list",
            ValueRef::Set(_) => "set",
            ValueRef::ZSet(_) => "zset",
            ValueRef::Stream(_) => "stream",
        }
    }

    /// The bytes of a string; `None` for other types.
    pub fn as_str(&self) -> Option<&'a [u8]> {
        match self {
            ValueRef::Str(s) => Some(s),
            _ => None,
        }
    }

    /// An owned copy.
    pub fn to_value(&self) -> Value {
        match *self {
            ValueRef::Str(s) => Value::Str(s.to_vec()),
            ValueRef::Hash(h) => Value::Hash(Box::new(h.clone())),
            ValueRef::List(l) => Value::List(Box::new(l.clone())),
            ValueRef::Set(m) => Value::Set(Box::new(m.clone())),
            ValueRef::ZSet(z) => Value::ZSet(Box::new(z.clone())),
            ValueRef::Stream(x) => Value::Stream(Box::new(x.clone())),
        }
    }

    /// The encoding OBJECT ENCODING reports; `flags` are the entry's encoding flags
    /// ([`crate::ENCODING_FLAGS`]), which only strings read.
    pub fn encoding(&self, flags: u8) -> &'static str {
        match self {
            ValueRef::Str(s) => string::encoding(s, flags),
            ValueRef::Hash(h) => h.encoding(),
            ValueRef::List(l) => l.encoding(),
            ValueRef::Set(m) => m.encoding(),
            ValueRef::ZSet(z) => z.encoding(),
            ValueRef::Stream(x) => x.encoding(),
        }
    }
}
