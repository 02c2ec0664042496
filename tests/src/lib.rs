//! # goblin-tests
//!
//! The harness and the shared toolkit of Goblin's end-to-end tests: it starts the real
//! `goblin-server` binary on a free port, and a real `redis-server` 7.0 as the oracle, and
//! talks to both with the `redis` crate and with raw TCP.
//!
//! - [`Server`] is a running server process, killed (by pid) when dropped.
//! - [`Raw`] is a raw RESP connection that returns reply bytes exactly as sent.
//! - [`Differential`] runs the same commands against goblin-server and redis-server and
//!   asserts byte-identical replies ([`diff`] has the other ways of comparing: within a
//!   tolerance, as multisets, pipelines, scripts).
//! - [`rng`]: the seeded generator and the seeds of randomised tests.
//! - [`reply`]: expected replies built, and integers, arrays and bulk strings read out of
//!   raw replies.
//! - [`cmd`]: commands as owned words, script lines, pipelines.
//! - [`keys`]: hash slots and shards, keys placed on chosen shards, the thread counts
//!   the suites run with.
//! - [`model`]: a sequential model of the string keyspace.
//! - [`claim`]: the key layouts and replies of GOBLIN.CLAIM.
//! - [`cluster`]: Redis Cluster mode: clusters of goblin-server or redis-server nodes built
//!   with `redis-cli --cluster create`, and their normalised transcripts compared.
//! - [`streams`]: stream replies compared with their clock fields masked.
//!
//! Test modules take their helpers from here, never from one another.
//!
//! A differential test never passes without its oracle: when `redis-server` is not
//! installed, or is not 7.0.x, [`Server::redis`] panics with the command that installs it.
#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub mod claim;
pub mod cluster;
pub mod cmd;
pub mod dataset;
pub mod diff;
pub mod keys;
pub mod model;
mod raw;
pub mod reply;
pub mod rng;
mod server;
pub mod streams;

pub use diff::Differential;
pub use raw::{Raw, encode};
pub use server::{
    Kind, ORACLE_VERSION, Server, check_oracle_version, default_threads, free_port, goblin_binary,
    scratch_dir,
};

/// How long a test waits for a reply before failing.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// Shows bytes readably in assertion messages: CR and LF as `\r` and `\n`, and each byte
/// that is not part of valid UTF-8 as `\xNN` (so that two replies differing only in such
/// a byte do not look alike). Compare the bytes themselves, not what this shows.
pub fn show(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\r' => out.push_str("\\r"),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Asserts that two byte strings are equal, byte for byte; the message shows both with
/// [`show`], and an optional format string and arguments say what was compared.
#[macro_export]
macro_rules! assert_bytes_eq {
    ($got:expr, $want:expr $(,)?) => {
        $crate::assert_bytes_eq!($got, $want, "bytes differ")
    };
    ($got:expr, $want:expr, $($what:tt)+) => {{
        let (got, want): (&[u8], &[u8]) = (&$got[..], &$want[..]);
        if got != want {
            panic!(
                "{} (left: {} bytes, right: {} bytes)\n  left: {}\n right: {}",
                format_args!($($what)+),
                got.len(),
                want.len(),
                $crate::show(got),
                $crate::show(want)
            );
        }
    }};
}

/// Sets a stop flag when dropped: created in a thread scope before anything that can
/// fail, it makes the helper threads (which loop until the flag is set) end when the
/// test's own thread panics, instead of the scope waiting for them forever.
pub struct StopOnDrop<'a>(pub &'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::show;

    #[test]
    fn show_keeps_bytes_that_are_not_utf8_apart() {
        assert_eq!(show(b"$1\r\n\xfe\r\n"), "$1\\r\\n\\xfe\\r\\n");
        assert_ne!(show(b"$1\r\n\xfe\r\n"), show(b"$1\r\n\xff\r\n"));
        assert_eq!(show("é\n".as_bytes()), "é\\n");
    }

    #[test]
    #[should_panic(expected = "left: $1\\r\\n\\xfe\\r\\n")]
    fn assert_bytes_eq_compares_bytes_not_text() {
        assert_bytes_eq!(b"$1\r\n\xfe\r\n", b"$1\r\n\xff\r\n", "replies");
    }
}
