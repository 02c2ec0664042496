//! Keyspace notifications (`notify-keyspace-events`): the shard's key events, named as
//! Redis 7.0 names them per command, published on `__keyspace@<db>__:<key>` (the event
//! as the message) and `__keyevent@<db>__:<event>` (the key as the message).
//!
//! The shard's write path hands each unit of work's events, with the command that made
//! them (a command, a transaction's step carrying its command, expiry, eviction), to
//! [`notify`]; the family table names the events ([`EventsFn`], `families/notify.rs`),
//! and the publications go into the worker's outgoing Pub/Sub buffers in the order they
//! were made. Off by default: the shard then records nothing for it, and the write path
//! pays one branch.

use goblin_store::{Change, Event, KeyEvent};

use crate::runtime::pubsub::{Directory, Outbound, Space};
use crate::table::handler::Args;

/// `K`: publish on `__keyspace@<db>__:<key>`.
pub const KEYSPACE: u32 = 1 << 0;
/// `E`: publish on `__keyevent@<db>__:<event>`.
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (DEL, EXPIRE, RENAME …).
pub const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub const HASH: u32 = 1 << 6;
/// `z`: sorted set commands.
pub const ZSET: u32 = 1 << 7;
/// `x`: expired keys.
pub const EXPIRED: u32 = 1 << 8;
/// `e`: evicted keys.
pub const EVICTED: u32 = 1 << 9;
/// `t`: stream commands.
pub const STREAM: u32 = 1 << 10;
/// `m`: key misses (not part of `A`).
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: module key type events.
pub const MODULE: u32 = 1 << 13;
/// `n`: new keys (not part of `A`).
pub const NEW: u32 = 1 << 14;
/// `A`: `g$lshzxetd`.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The classes a `notify-keyspace-events` value names; `None` for an unknown character.
pub fn parse_flags(text: &str) -> Option<u32> {
    let mut flags = 0;
    for c in text.chars() {
        flags |= match c {
            'A' => ALL,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// The value CONFIG GET shows for `flags`, as redis-server 7.0 writes it.
pub fn flags_text(flags: u32) -> String {
    let mut out = String::new();
    if flags & ALL == ALL {
        out.push('A');
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & bit != 0 {
                out.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            out.push(c);
        }
    }
    out
}

/// Whether `flags` publish anything at all: a channel kind and some class.
pub fn active(flags: u32) -> bool {
    flags & (KEYSPACE | KEYEVENT) != 0 && flags & !(KEYSPACE | KEYEVENT) != 0
}

/// Names the events of one unit of work made by command `cmd` (its arguments as sent,
/// `name` its command-table name): calls `emit(class, event, key event)` for each
/// notification, in the order Redis 7.0 sends them.
pub type EventsFn = fn(name: &str, cmd: &Args<'_>, events: &[&KeyEvent], emit: &mut Emit<'_>);

/// Where [`EventsFn`] sends what it names.
pub type Emit<'a> = dyn FnMut(u32, &str, &KeyEvent) + 'a;

/// What made the unit of work whose events are being named.
#[derive(Clone, Copy, Debug)]
pub enum Cause<'a> {
    /// A command (run alone, in EXEC, or as a transaction's step), with its
    /// command-table name.
    Command(&'a str, &'a Args<'a>),
    /// A transaction's step whose command is not known here.
    Unknown,
    /// Active expiry.
    Expiry,
    /// Eviction.
    Eviction,
}

/// Publishes the notifications of one unit of work's `events` under `flags`.
pub fn notify(
    flags: u32,
    cause: Cause<'_>,
    events: &[Event],
    names: EventsFn,
    dir: &Directory,
    out: &mut Outbound,
) {
    // A created key's `new` comes right before the first event named for its write
    // (Redis announces it as the key is added, then the command's event). The writes
    // announced are told apart by address: every event named is one of `events`.
    let mut announced: Vec<*const KeyEvent> = Vec::new();
    let mut publish = |class: u32, event: &str, k: &KeyEvent| {
        if k.created && k.change == Change::Written && !announced.contains(&std::ptr::from_ref(k)) {
            announced.push(std::ptr::from_ref(k));
            if flags & NEW != 0 {
                publish_one(flags, "new", k, dir, out);
            }
            if event == "new" {
                return;
            }
        }
        if flags & class == 0 {
            return;
        }
        publish_one(flags, event, k, dir, out);
    };
    let keys: Vec<&KeyEvent> = events.iter().filter_map(Event::key).collect();
    // Expirations found inside a command (lazily) come first, as they happen before
    // the command acts.
    for k in &keys {
        if k.change == Change::Expired {
            publish(EXPIRED, "expired", k);
        }
    }
    let own: Vec<&KeyEvent> = keys
        .iter()
        .copied()
        .filter(|k| k.change != Change::Expired)
        .collect();
    if own.is_empty() {
        return;
    }
    match cause {
        Cause::Command(name, args) => names(name, args, &own, &mut publish),
        Cause::Eviction => own
            .iter()
            .filter(|k| k.change == Change::Deleted)
            .for_each(|k| publish(EVICTED, "evicted", k)),
        Cause::Unknown | Cause::Expiry => own
            .iter()
            .filter(|k| k.change == Change::Deleted)
            .for_each(|k| publish(GENERIC, "del", k)),
    }
}

/// One notification: on the key's channel and on the event's, as `flags` ask.
fn publish_one(flags: u32, event: &str, k: &KeyEvent, dir: &Directory, out: &mut Outbound) {
    let mut db = itoa::Buffer::new();
    let db = db.format(k.db).as_bytes();
    let mut channel = Vec::with_capacity(16 + k.key.len().max(event.len()));
    if flags & KEYSPACE != 0 {
        channel.extend_from_slice(b"__keyspace@");
        channel.extend_from_slice(db);
        channel.extend_from_slice(b"__:");
        channel.extend_from_slice(&k.key);
        out.publish(dir, Space::Channels, &channel, event.as_bytes());
    }
    if flags & KEYEVENT != 0 {
        channel.clear();
        channel.extend_from_slice(b"__keyevent@");
        channel.extend_from_slice(db);
        channel.extend_from_slice(b"__:");
        channel.extend_from_slice(event.as_bytes());
        out.publish(dir, Space::Channels, &channel, &k.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_read_and_print_as_redis_does() {
        assert_eq!(parse_flags(""), Some(0));
        assert_eq!(parse_flags("KEA"), Some(KEYSPACE | KEYEVENT | ALL));
        assert_eq!(flags_text(parse_flags("AKE").unwrap_or(0)), "AKE");
        assert_eq!(flags_text(parse_flags("Egx").unwrap_or(0)), "gxE");
        assert_eq!(
            flags_text(parse_flags("g$lshzxetdKEmn").unwrap_or(0)),
            "AKEm"
        );
        assert_eq!(flags_text(parse_flags("Kn").unwrap_or(0)), "nK");
        assert_eq!(parse_flags("KEy"), None);
        assert!(!active(parse_flags("KE").unwrap_or(0)));
        assert!(!active(parse_flags("A").unwrap_or(0)));
        assert!(active(parse_flags("Ex").unwrap_or(0)));
    }
}
