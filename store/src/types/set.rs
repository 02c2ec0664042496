//! Sets: unordered members.
//!
//! The representation is private to this module; what the rest of Goblin uses is the
//! API below (the contract every representation keeps: `len`, `contains`, `insert`,
//! `remove`, `for_each`, `encoding`, `heap_bytes`).

use std::collections::HashSet;

/// redis-server 7.0's `set-max-intset-entries`: more integer members make an intset a
/// hashtable.
pub const INTSET_ENTRIES: usize = 512;
/// Bytes a member costs beyond its bytes: the table's slot and a vector.
const PER_MEMBER: usize = 40;
/// Bytes a set costs before its members.
const BASE: usize = 64;

/// A set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Set {
    members: HashSet<Vec<u8>>,
}

impl Set {
    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// True when there is no member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Whether `member` is in the set.
    pub fn contains(&self, member: &[u8]) -> bool {
        self.members.contains(member)
    }

    /// Adds `member`; true when it is new.
    pub fn insert(&mut self, member: &[u8]) -> bool {
        self.members.insert(member.to_vec())
    }

    /// Removes `member`; true when it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        self.members.remove(member)
    }

    /// Calls `f` with every member.
    pub fn for_each(&self, mut f: impl FnMut(&[u8])) {
        for m in &self.members {
            f(m);
        }
    }

    /// The encoding OBJECT ENCODING reports: `intset` or `hashtable`.
    pub fn encoding(&self) -> &'static str {
        "hashtable"
    }

    /// Approximate heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.members
            .iter()
            .map(|m| m.len() + PER_MEMBER)
            .sum::<usize>()
            + BASE
    }
}
