//! # goblin-store
//!
//! The data side of Goblin, with no sockets and no threads: hash slots computed exactly
//! as Redis Cluster computes them, and one shard's keyspace — compact entries with an
//! optional absolute expiry, expired lazily on every access and actively by a
//! hierarchical timer wheel. The clock is always passed in (one timestamp per command),
//! so the store is deterministic under test.
//!
//! ```
//! use goblin_store::{Keyspace, key_slot};
//!
//! let mut ks = Keyspace::new();
//! ks.set_str(b"greeting", b"hello", Some(1_000), 0);
//! assert!(ks.get(b"greeting", 1_000).is_some());
//! assert!(ks.get(b"greeting", 1_001).is_none()); // expired, and removed
//! assert_eq!(key_slot(b"{user1}:a"), key_slot(b"{user1}:b"));
//! ```
#![deny(missing_docs)]

mod arena;
mod blob;
mod events;
mod keyspace;
pub mod lazyfree;
mod leb128;
mod prefetch;
pub mod rdb;
mod slot;
mod slot_tables;
pub mod striped;
pub mod types;
mod wheel;

pub use arena::idle_bytes as arena_idle_bytes;
pub use blob::{ENCODING_FLAGS, NOT_INT, RAW, UNSHARED};
pub use events::{Change, Event, KeyEvent};
pub use keyspace::{
    AccessMode, Entry, EvictBy, INLINE_MAX, Keyspace, Millis, ReadMode, Removed, ValueMut,
    lru_clock,
};
pub use slot::{SLOTS, crc16, hash_tag, key_slot};
pub use types::{Hash, List, Set, SortedSet, Stream, StreamId, Value, ValueRef};
pub use wheel::{Timer, Wheel};
