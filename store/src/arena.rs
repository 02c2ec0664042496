//! Where a keyspace's entries live: pages of 64 KiB carved into chunks of whole 8-byte
//! words, named by 4-byte handles.
//!
//! An entry (`blob.rs`) is small and there are millions of them. As one allocation each,
//! glibc's malloc adds 8 bytes of header and rounds to 16 (a 54-byte entry takes 64), and
//! the slot table holds a 16-byte pointer to it. Here a 54-byte entry takes a 56-byte
//! chunk and the table holds its 4-byte handle: 19 bytes less per entry, and 11 more per
//! bucket of the tables (which are about half full).
//!
//! Chunks are carved from the newest page in order; a freed chunk goes on the free list of
//! its size (the next handle written in its first bytes) and is the next one handed out
//! for that size. Pages are kept until the keyspace is emptied or flushed, as an
//! allocator keeps its bins (`used_memory` counts the chunks in use, not the pages: see
//! [`idle_bytes`]).
//!
//! A handle is the page's number and the chunk's first word in it (18 and 13 bits: 16 GiB
//! of small entries per keyspace). Entries longer than [`SMALL_MAX`] (keys of hundreds of
//! bytes), and any once the pages run out, are allocated on their own; their handles have
//! the top bit set. Blobs carry their own length, so a handle is all a table stores.

use slab::Slab;

use crate::blob;
use crate::striped::Striped;

/// Names a chunk of an [`Arena`].
pub type Handle = u32;

/// Bytes of a word, the unit of chunks.
const WORD: usize = 8;
/// Words of a page (64 KiB).
const PAGE_WORDS: usize = 1 << PAGE_BITS;
const PAGE_BITS: u32 = 13;
/// Bytes of a page.
pub const PAGE: usize = PAGE_WORDS * WORD;
/// The longest entry kept in the pages.
pub const SMALL_MAX: usize = 512;
/// Free lists, by words (0 is unused).
const CLASSES: usize = SMALL_MAX / WORD + 1;
/// Pages a keyspace may have (handles have 31 bits for them and the word).
const MAX_PAGES: usize = 1 << (31 - PAGE_BITS);
/// The top bit of a handle: an entry allocated on its own.
const LARGE: u32 = 1 << 31;
/// The end of a free list.
const NIL: u32 = u32::MAX;

/// A keyspace's entries.
pub struct Arena {
    pages: Vec<Box<[u8]>>,
    /// The next word to carve in the last page.
    bump: usize,
    /// A free list per chunk size in words: the first free chunk's handle.
    free: [Handle; CLASSES],
    large: Slab<Box<[u8]>>,
    /// Bytes of the chunks handed out (of the pages), and of large entries.
    small_live: usize,
    large_live: usize,
    /// [`MAX_PAGES`] (less in tests).
    max_pages: usize,
}

impl Default for Arena {
    fn default() -> Self {
        Arena::new()
    }
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("pages", &self.pages.len())
            .field("live", &self.live_bytes())
            .finish()
    }
}

/// Bytes a chunk for an entry of `len` bytes takes.
pub fn chunk_size(len: usize) -> usize {
    if len > SMALL_MAX {
        len
    } else {
        words(len) * WORD
    }
}

fn words(len: usize) -> usize {
    len.div_ceil(WORD).max(1)
}

fn split(h: Handle) -> (usize, usize) {
    (
        (h >> PAGE_BITS) as usize,
        (h as usize & (PAGE_WORDS - 1)) * WORD,
    )
}

impl Arena {
    /// An arena without pages.
    pub fn new() -> Self {
        Arena {
            pages: Vec::new(),
            bump: PAGE_WORDS,
            free: [NIL; CLASSES],
            large: Slab::new(),
            small_live: 0,
            large_live: 0,
            max_pages: MAX_PAGES,
        }
    }

    /// Bytes of the entries held (in their chunks).
    pub fn live_bytes(&self) -> usize {
        self.small_live + self.large_live
    }

    /// Bytes of the pages.
    pub fn page_bytes(&self) -> usize {
        self.pages.len() * PAGE
    }

    /// A chunk for an entry of `len` bytes, to be written with [`Arena::chunk_mut`].
    pub fn alloc(&mut self, len: usize) -> Handle {
        if len > SMALL_MAX {
            return self.alloc_large(len);
        }
        let n = words(len);
        let head = self.free[n];
        if head != NIL {
            self.free[n] = self.next_free(head);
            self.small_live += n * WORD;
            IDLE.add(-((n * WORD) as isize));
            return head;
        }
        if self.bump + n > PAGE_WORDS {
            if self.pages.len() >= self.max_pages {
                return self.alloc_large(len);
            }
            self.retire_tail();
            self.pages.push(vec![0u8; PAGE].into_boxed_slice());
            IDLE.add(PAGE as isize);
            self.bump = 0;
        }
        let h = ((self.pages.len() - 1) << PAGE_BITS | self.bump) as Handle;
        self.bump += n;
        self.small_live += n * WORD;
        IDLE.add(-((n * WORD) as isize));
        h
    }

    fn alloc_large(&mut self, len: usize) -> Handle {
        // (As long as the chunk it would have had in the pages, so that whether a
        // rewrite fits in place is decided the same way for both.)
        let size = chunk_size(len);
        self.large_live += size;
        LARGE | self.large.insert(vec![0u8; size].into_boxed_slice()) as Handle
    }

    /// The chunk for the entry at `h` once it is rewritten `len` bytes long: its own when
    /// that fits the same chunk size, else a new one (and `h` is freed: the caller reads
    /// nothing of the old entry after this, and puts the returned handle in its place).
    pub fn refit(&mut self, h: Handle, len: usize) -> Handle {
        if chunk_size(self.get(h).len()) == chunk_size(len) {
            return h;
        }
        let new = self.alloc(len);
        self.free(h);
        new
    }

    /// The unused end of the last page becomes a free chunk of its size.
    fn retire_tail(&mut self) {
        let tail = PAGE_WORDS - self.bump;
        if !self.pages.is_empty() && tail > 0 && tail < CLASSES {
            let h = ((self.pages.len() - 1) << PAGE_BITS | self.bump) as Handle;
            self.push_free(h, tail);
        }
        self.bump = PAGE_WORDS;
    }

    fn next_free(&self, h: Handle) -> Handle {
        let (page, at) = split(h);
        self.pages
            .get(page)
            .and_then(|p| p.get(at..at + 4))
            .and_then(|b| b.try_into().ok())
            .map_or(NIL, u32::from_le_bytes)
    }

    fn push_free(&mut self, h: Handle, n: usize) {
        let (page, at) = split(h);
        let Some(head) = self.free.get_mut(n) else {
            return;
        };
        if let Some(b) = self.pages.get_mut(page).and_then(|p| p.get_mut(at..at + 4)) {
            b.copy_from_slice(&head.to_le_bytes());
            *head = h;
        }
    }

    /// The first `len` bytes of `h`'s chunk, to write a new entry into.
    pub fn chunk_mut(&mut self, h: Handle, len: usize) -> &mut [u8] {
        if h & LARGE != 0 {
            return match self.large.get_mut((h & !LARGE) as usize) {
                Some(b) => b.get_mut(..len).unwrap_or(&mut []),
                None => &mut [],
            };
        }
        let (page, at) = split(h);
        match self.pages.get_mut(page) {
            Some(p) => p.get_mut(at..at + len).unwrap_or(&mut []),
            None => &mut [],
        }
    }

    /// The entry at `h`.
    #[inline]
    pub fn get(&self, h: Handle) -> &[u8] {
        let rest = if h & LARGE != 0 {
            self.large.get((h & !LARGE) as usize).map_or(&[][..], |b| b)
        } else {
            let (page, at) = split(h);
            self.pages
                .get(page)
                .and_then(|p| p.get(at..))
                .unwrap_or(&[])
        };
        let len = blob::len(rest).min(rest.len());
        &rest[..len]
    }

    /// The entry at `h`, to change in place.
    #[inline]
    pub fn get_mut(&mut self, h: Handle) -> &mut [u8] {
        let rest = if h & LARGE != 0 {
            match self.large.get_mut((h & !LARGE) as usize) {
                Some(b) => &mut b[..],
                None => return &mut [],
            }
        } else {
            let (page, at) = split(h);
            match self.pages.get_mut(page).and_then(|p| p.get_mut(at..)) {
                Some(rest) => rest,
                None => return &mut [],
            }
        };
        let len = blob::len(rest).min(rest.len());
        &mut rest[..len]
    }

    /// Where the entry at `h` starts, for a prefetch (reads nothing of the entry).
    #[inline]
    pub fn address(&self, h: Handle) -> *const u8 {
        if h & LARGE != 0 {
            return self
                .large
                .get((h & !LARGE) as usize)
                .map_or(std::ptr::null(), |b| b.as_ptr());
        }
        let (page, at) = split(h);
        self.pages
            .get(page)
            .map_or(std::ptr::null(), |p| p.as_ptr().wrapping_add(at))
    }

    /// Frees the entry at `h` (its length read from it): `h` must not be used again.
    pub fn free(&mut self, h: Handle) {
        if h & LARGE != 0 {
            if let Some(b) = self.large.try_remove((h & !LARGE) as usize) {
                self.large_live -= b.len().min(self.large_live);
            }
            return;
        }
        let n = words(self.get(h).len());
        self.small_live -= (n * WORD).min(self.small_live);
        IDLE.add((n * WORD) as isize);
        self.push_free(h, n);
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        IDLE.add(-((self.page_bytes() - self.small_live.min(self.page_bytes())) as isize));
    }
}

/// Bytes of the arenas' pages not holding an entry, counted per thread (arenas are
/// dropped on other threads than the ones that filled them).
static IDLE: Striped = Striped::new();

/// Bytes of every arena's pages not holding an entry (free chunks, unused ends): the
/// allocator counts them as allocated, and `used_memory` leaves them out, as
/// redis-server's allocator does not count what sits free in its bins.
pub fn idle_bytes() -> usize {
    IDLE.sum().max(0) as usize
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::blob::Payload;

    fn put(a: &mut Arena, key: &[u8], value: &[u8]) -> Handle {
        let payload = Payload::Inline(value);
        let len = blob::size(key, None, payload);
        let h = a.alloc(len);
        blob::write(a.chunk_mut(h, len), key, None, payload);
        h
    }

    #[test]
    fn entries_come_back_as_written_and_chunks_are_reused() {
        let mut a = Arena::new();
        let mut handles = Vec::new();
        for i in 0..5_000u32 {
            let key = format!("key:{i:012}");
            let value = vec![b'v'; (i % 300) as usize];
            handles.push((put(&mut a, key.as_bytes(), &value), key, value));
        }
        // A key longer than SMALL_MAX lives apart.
        let long = vec![b'k'; 1000];
        let big = put(&mut a, &long, b"v");
        assert_ne!(big & LARGE, 0);
        for (h, key, value) in &handles {
            let b = a.get(*h);
            assert_eq!(blob::key(b), key.as_bytes());
            assert_eq!(blob::payload(b), Payload::Inline(value));
        }
        assert_eq!(blob::key(a.get(big)), &long[..]);
        let pages = a.pages.len();
        assert!(pages > 1, "{pages}");
        // Freed chunks are handed out again: the same entries need no new page.
        let live = a.live_bytes();
        for (h, _, _) in &handles {
            a.free(*h);
        }
        a.free(big);
        assert_eq!(a.live_bytes(), 0);
        for (_, key, value) in &handles {
            put(&mut a, key.as_bytes(), value);
        }
        assert_eq!(a.pages.len(), pages);
        assert_eq!(
            a.live_bytes(),
            live - chunk_size(blob::size(&long, None, Payload::Inline(b"v")))
        );
    }

    #[test]
    fn a_small_entry_takes_whole_words() {
        let mut a = Arena::new();
        let h1 = put(&mut a, &[b'k'; 16], &[b'v'; 32]);
        let h2 = put(&mut a, &[b'k'; 16], &[b'v'; 32]);
        assert_eq!(a.get(h1).len(), 54);
        assert_eq!(h2 - h1, 7, "56 bytes: 7 words");
        assert_eq!(a.live_bytes(), 112);
    }

    #[test]
    fn once_the_pages_run_out_entries_are_allocated_apart() {
        let mut a = Arena::new();
        a.max_pages = 1;
        let entries: Vec<(Handle, String)> = (0..2_000)
            .map(|i| {
                let key = format!("key:{i:012}");
                (put(&mut a, key.as_bytes(), &[b'v'; 32]), key)
            })
            .collect();
        assert_eq!(a.pages.len(), 1);
        let apart: Vec<_> = entries.iter().filter(|(h, _)| h & LARGE != 0).collect();
        assert!(!apart.is_empty());
        for (h, key) in &entries {
            assert_eq!(blob::key(a.get(*h)), key.as_bytes());
            assert_eq!(blob::payload(a.get(*h)), Payload::Inline(&[b'v'; 32]));
        }
        // An entry apart has the chunk it would have had: a rewrite of the same chunk
        // size fits in place.
        let (h, key) = apart[0];
        let payload = Payload::Inline(&[b'w'; 33]);
        let len = blob::size(key.as_bytes(), None, payload);
        assert_eq!(chunk_size(len), chunk_size(a.get(*h).len()));
        blob::write(a.chunk_mut(*h, len), key.as_bytes(), None, payload);
        assert_eq!(blob::payload(a.get(*h)), payload);
        for (h, _) in &entries {
            a.free(*h);
        }
        assert_eq!(a.live_bytes(), 0);
    }

    #[test]
    fn bad_handles_read_nothing() {
        let mut a = Arena::new();
        assert!(a.get(12345).is_empty());
        assert!(a.get(LARGE | 7).is_empty());
        assert!(a.get_mut(99).is_empty());
        assert!(a.address(5).is_null());
    }
}
