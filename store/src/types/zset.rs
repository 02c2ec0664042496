//! Sorted sets: members ordered by score, then by member.
//!
//! The representation is private to this module; what the rest of Goblin uses is the
//! API below (the contract every representation keeps: `len`, `score`, `insert`,
//! `remove`, `for_each` in order, `encoding`, `heap_bytes`).

use std::collections::HashMap;

/// redis-server 7.0's `zset-max-listpack-entries`: more members make it a skiplist.
pub const LISTPACK_ENTRIES: usize = 128;
/// redis-server 7.0's `zset-max-listpack-value`: a longer member makes it a skiplist.
pub const LISTPACK_VALUE: usize = 64;
/// Bytes a member costs beyond its bytes: the table's slot, the vector and the score.
const PER_MEMBER: usize = 48;
/// Bytes a sorted set costs before its members.
const BASE: usize = 64;

/// A sorted set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SortedSet {
    scores: HashMap<Vec<u8>, f64>,
}

impl SortedSet {
    /// Number of members.
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// True when there is no member.
    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// Sets `member`'s score; its old score, if it was there.
    pub fn insert(&mut self, member: &[u8], score: f64) -> Option<f64> {
        self.scores.insert(member.to_vec(), score)
    }

    /// Removes `member`; its score, if it was there.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        self.scores.remove(member)
    }

    /// Calls `f` with every member and its score, by ascending score then member.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], f64)) {
        let mut all: Vec<(&Vec<u8>, f64)> = self.scores.iter().map(|(m, s)| (m, *s)).collect();
        all.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(b.0)));
        for (m, s) in all {
            f(m, s);
        }
    }

    /// The encoding OBJECT ENCODING reports: `listpack` while small, else `skiplist`.
    pub fn encoding(&self) -> &'static str {
        let small = self.scores.len() <= LISTPACK_ENTRIES
            && self.scores.keys().all(|k| k.len() <= LISTPACK_VALUE);
        if small { "listpack" } else { "skiplist" }
    }

    /// Approximate heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.scores
            .keys()
            .map(|k| k.len() + PER_MEMBER)
            .sum::<usize>()
            + BASE
    }
}
