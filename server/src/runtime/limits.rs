//! What one client may make the server hold, and how many clients the process can hold:
//! `proto-max-bulk-len`, `client-query-buffer-limit`, `client-output-buffer-limit`, and
//! `maxclients` against the descriptor limit.
//!
//! The workers read the client limits on every read and every write, so they are kept as
//! atomics apart from the live configuration's lock; CONFIG SET stores them
//! ([`ClientLimits::set`]).

use std::sync::atomic::{AtomicU64, Ordering};

use goblin_store::Millis;

use crate::config::{BufferLimit, Config};

/// The kinds of client `client-output-buffer-limit` distinguishes (replicas do not exist
/// yet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientClass {
    /// Every ordinary client (MONITOR clients too, as in Redis).
    Normal,
    /// A client subscribed to Pub/Sub channels.
    Pubsub,
}

/// One class's limit as atomics.
#[derive(Debug, Default)]
struct AtomicBufferLimit {
    hard: AtomicU64,
    soft: AtomicU64,
    soft_seconds: AtomicU64,
}

impl AtomicBufferLimit {
    fn store(&self, limit: BufferLimit) {
        self.hard.store(limit.hard, Ordering::Relaxed);
        self.soft.store(limit.soft, Ordering::Relaxed);
        self.soft_seconds
            .store(limit.soft_seconds, Ordering::Relaxed);
    }

    fn load(&self) -> BufferLimit {
        BufferLimit {
            hard: self.hard.load(Ordering::Relaxed),
            soft: self.soft.load(Ordering::Relaxed),
            soft_seconds: self.soft_seconds.load(Ordering::Relaxed),
        }
    }
}

/// The live limits on one client's buffers.
#[derive(Debug, Default)]
pub struct ClientLimits {
    max_bulk_len: AtomicU64,
    query_buffer: AtomicU64,
    normal: AtomicBufferLimit,
    pubsub: AtomicBufferLimit,
    /// The normal class has a limit (read for every client with replies to write).
    normal_set: std::sync::atomic::AtomicBool,
}

impl ClientLimits {
    /// The limits of `config`.
    pub fn new(config: &Config) -> Self {
        let limits = ClientLimits::default();
        limits.set(config);
        limits
    }

    /// Takes the limits of `config` (CONFIG SET).
    pub fn set(&self, config: &Config) {
        self.max_bulk_len
            .store(config.limits.max_bulk_len as u64, Ordering::Relaxed);
        self.query_buffer
            .store(config.query_buffer_limit, Ordering::Relaxed);
        self.normal.store(config.output_limits.normal);
        self.normal_set
            .store(config.output_limits.normal.is_set(), Ordering::Relaxed);
        self.pubsub.store(config.output_limits.pubsub);
    }

    /// `proto-max-bulk-len`.
    pub fn max_bulk_len(&self) -> usize {
        usize::try_from(self.max_bulk_len.load(Ordering::Relaxed)).unwrap_or(usize::MAX)
    }

    /// `client-query-buffer-limit`.
    pub fn query_buffer(&self) -> usize {
        usize::try_from(self.query_buffer.load(Ordering::Relaxed)).unwrap_or(usize::MAX)
    }

    /// `client-output-buffer-limit` of a class, when it limits anything.
    pub fn output_limit(&self, class: ClientClass) -> Option<BufferLimit> {
        match class {
            ClientClass::Normal if !self.normal_set.load(Ordering::Relaxed) => None,
            _ => Some(self.output(class)).filter(BufferLimit::is_set),
        }
    }

    /// `client-output-buffer-limit` of a class.
    pub fn output(&self, class: ClientClass) -> BufferLimit {
        match class {
            ClientClass::Normal => self.normal.load(),
            ClientClass::Pubsub => self.pubsub.load(),
        }
    }
}

/// Whether a client holding `pending` reply bytes is over `limit`, as redis-server's
/// `checkClientOutputBufferLimits` decides: past the hard limit at once, past the soft
/// one once it has stayed past it for more than its seconds. `soft_since` keeps when the
/// client went past the soft limit (cleared when it falls back under it).
pub fn output_over(
    limit: BufferLimit,
    pending: usize,
    soft_since: &mut Option<Millis>,
    now: Millis,
) -> bool {
    let pending = pending as u64;
    if limit.hard > 0 && pending >= limit.hard {
        return true;
    }
    if limit.soft > 0 && pending >= limit.soft {
        let since = *soft_since.get_or_insert(now);
        return now.saturating_sub(since) > limit.soft_seconds.saturating_mul(1000);
    }
    *soft_since = None;
    false
}

/// Descriptors the server keeps for itself besides its clients' sockets: redis-server's
/// 32 (`CONFIG_MIN_RESERVED_FDS`), plus each worker's poll, waker and log file, and the
/// spare descriptor the acceptor keeps to refuse clients when none is left.
pub fn reserved_fds(threads: usize) -> u64 {
    32 + 4 * threads as u64
}

/// Makes room for `maxclients` clients in the process's descriptor limit, as
/// redis-server's `adjustOpenFilesLimit`: raises the soft limit (and the hard one, when
/// the process may), and when that cannot be done, answers the number of clients the
/// limit allows, logging why. An error when the limit leaves no room for any client.
pub fn adjust_open_files(maxclients: usize, threads: usize) -> Result<usize, String> {
    use rlimit::Resource;
    let reserved = reserved_fds(threads);
    let wanted = maxclients as u64 + reserved;
    let Ok((soft, hard)) = rlimit::getrlimit(Resource::NOFILE) else {
        let allowed = 1024u64.saturating_sub(reserved).max(1) as usize;
        crate::log!(
            Warning,
            "Unable to obtain the current NOFILE limit, assuming 1024 and setting the max \
             clients configuration accordingly."
        );
        return Ok(allowed.min(maxclients));
    };
    if soft >= wanted {
        return Ok(maxclients);
    }
    let mut error = None;
    let best = if wanted <= hard {
        match rlimit::setrlimit(Resource::NOFILE, wanted, hard) {
            Ok(()) => wanted,
            Err(e) => {
                error = Some(e);
                soft
            }
        }
    } else {
        // Beyond the hard limit: only a privileged process may raise it.
        match rlimit::setrlimit(Resource::NOFILE, wanted, wanted) {
            Ok(()) => wanted,
            Err(e) => {
                error = Some(e);
                match rlimit::setrlimit(Resource::NOFILE, hard, hard) {
                    Ok(()) => hard,
                    Err(_) => soft,
                }
            }
        }
    };
    if best >= wanted {
        crate::log!(
            Notice,
            "Increased maximum number of open files to {wanted} (it was originally set to {soft})."
        );
        return Ok(maxclients);
    }
    if best <= reserved {
        return Err(format!(
            "Your current 'ulimit -n' of {best} is not enough for the server to start. Please \
             increase your open file limit to at least {}. Exiting.",
            reserved + 1
        ));
    }
    let allowed = (best - reserved) as usize;
    let reason = error.map_or_else(|| "unknown".to_string(), |e| e.to_string());
    crate::log!(
        Warning,
        "You requested maxclients of {maxclients} requiring at least {wanted} max file \
         descriptors."
    );
    crate::log!(
        Warning,
        "Server can't set maximum open files to {wanted} because of OS error: {reason}."
    );
    crate::log!(
        Warning,
        "Current maximum open files is {best}. maxclients has been reduced to {allowed} to \
         compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'."
    );
    Ok(allowed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hard_limit_closes_at_once_soft_after_its_seconds() {
        let limit = BufferLimit {
            hard: 100,
            soft: 50,
            soft_seconds: 2,
        };
        let mut since = None;
        assert!(!output_over(limit, 10, &mut since, 0));
        assert!(output_over(limit, 100, &mut since, 0));
        assert!(!output_over(limit, 60, &mut since, 1000));
        assert_eq!(since, Some(1000));
        assert!(!output_over(limit, 60, &mut since, 3000));
        assert!(output_over(limit, 60, &mut since, 3001));
        // Back under the soft limit: the clock starts again.
        assert!(!output_over(limit, 10, &mut since, 3002));
        assert_eq!(since, None);
        assert!(!output_over(
            BufferLimit::default(),
            usize::MAX,
            &mut since,
            0
        ));
    }
}
