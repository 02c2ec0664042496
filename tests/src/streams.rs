//! Stream replies compared across two servers: the fields that depend on each server's
//! clock or on Redis's internal radix tree are masked out of the bytes, and the clock
//! readings are compared within a tolerance instead.
//!
//! What is masked, and only when it is an integer (anything else stays in the bytes, so a
//! field of the wrong type still differs):
//! - XPENDING's extended form: each entry's idle time (its third element);
//! - XINFO (every subcommand): the value after the keys `idle`, `seen-time`,
//!   `active-time` and `inactive` (clock readings), and after `radix-tree-nodes` (the
//!   shape of Redis's radix tree, internal to it: not compared at all);
//! - XINFO STREAM FULL: the delivery time of each entry of a `pending` list (a group's
//!   entries `[id, consumer, delivery-time, count]`, a consumer's `[id, delivery-time,
//!   count]`);
//! - EXEC: each reply masked as the command queued for it.
//!
//! Everything else, `radix-tree-keys` (the number of listpack nodes) included, is
//! compared byte for byte.

use goblin_protocol::reply_len;

use crate::cmd::{Cmd, brief_cmd};
use crate::diff::differences;

/// How far apart two clock readings (idle times, delivery and seen times, all in
/// milliseconds) of the two servers may be: far more than lies between the two servers
/// handling the same command, far less than any idle time a test sets.
pub const CLOCK_TOLERANCE_MS: i64 = 10_000;

/// What a masked integer becomes in the masked bytes.
const MASK: &[u8] = b":<masked>\r\n";

/// Keys of XINFO replies whose values are clock readings.
const CLOCK_KEYS: [&[u8]; 4] = [b"idle", b"seen-time", b"active-time", b"inactive"];

/// Keys of XINFO replies whose values are internal to Redis and not compared.
const INTERNAL_KEYS: [&[u8]; 1] = [b"radix-tree-nodes"];

/// A reply as a tree that keeps every byte: an aggregate's header line and its items, or
/// a whole leaf reply.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Leaf(Vec<u8>),
    Aggregate { header: Vec<u8>, items: Vec<Node> },
}

/// A value masked out of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Masked {
    /// A clock reading in milliseconds (compared within [`CLOCK_TOLERANCE_MS`]).
    Clock(i64),
    /// An internal value (not compared).
    Internal(i64),
}

/// Parses the reply at the start of `buf`: the tree and its length; `None` when it is not
/// one complete reply this module understands (RESP3 attributes included).
fn parse(buf: &[u8]) -> Option<(Node, usize)> {
    let first = *buf.first()?;
    if matches!(first, b'*' | b'%' | b'~' | b'>') {
        let end = buf.windows(2).position(|w| w == b"\r\n")? + 2;
        let count: i64 = std::str::from_utf8(&buf[1..end - 2]).ok()?.parse().ok()?;
        if count < 0 {
            return Some((Node::Leaf(buf[..end].to_vec()), end));
        }
        let n = if first == b'%' { count * 2 } else { count };
        let mut at = end;
        let mut items = Vec::with_capacity(usize::try_from(n).ok()?);
        for _ in 0..n {
            let (item, len) = parse(&buf[at..])?;
            items.push(item);
            at += len;
        }
        return Some((
            Node::Aggregate {
                header: buf[..end].to_vec(),
                items,
            },
            at,
        ));
    }
    if first == b'|' {
        return None;
    }
    let (len, _) = reply_len(buf).ok()??;
    Some((Node::Leaf(buf[..len].to_vec()), len))
}

impl Node {
    fn bytes(&self, out: &mut Vec<u8>) {
        match self {
            Node::Leaf(b) => out.extend_from_slice(b),
            Node::Aggregate { header, items } => {
                out.extend_from_slice(header);
                items.iter().for_each(|i| i.bytes(out));
            }
        }
    }

    /// The text of a bulk or simple string leaf.
    fn text(&self) -> Option<&[u8]> {
        match self {
            Node::Leaf(b) if b.starts_with(b"+") => Some(&b[1..b.len() - 2]),
            Node::Leaf(b) if b.starts_with(b"$") && !b.starts_with(b"$-") => {
                let start = b.windows(2).position(|w| w == b"\r\n")? + 2;
                Some(&b[start..b.len() - 2])
            }
            _ => None,
        }
    }

    /// The integer of an integer leaf.
    fn integer(&self) -> Option<i64> {
        match self {
            Node::Leaf(b) => crate::reply::try_integer(b),
            Node::Aggregate { .. } => None,
        }
    }

    /// Masks this node when it is an integer, recording its value as `kind` says.
    fn mask_integer(&mut self, kind: fn(i64) -> Masked, out: &mut Vec<Masked>) {
        if let Some(n) = self.integer() {
            out.push(kind(n));
            *self = Node::Leaf(MASK.to_vec());
        }
    }

    fn items_mut(&mut self) -> Option<&mut Vec<Node>> {
        match self {
            Node::Aggregate { items, .. } => Some(items),
            Node::Leaf(_) => None,
        }
    }

    /// XINFO: the values after clock and internal keys, and the delivery times of
    /// `pending` lists, at any depth (keys are at even positions of flat RESP2 arrays and
    /// of RESP3 maps alike).
    fn mask_xinfo(&mut self, out: &mut Vec<Masked>) {
        let Some(items) = self.items_mut() else {
            return;
        };
        let mut i = 0;
        while i + 1 < items.len() {
            let key = items[i].text().map(<[u8]>::to_vec);
            match key.as_deref() {
                Some(k) if CLOCK_KEYS.contains(&k) => {
                    items[i + 1].mask_integer(Masked::Clock, out);
                }
                Some(k) if INTERNAL_KEYS.contains(&k) => {
                    items[i + 1].mask_integer(Masked::Internal, out);
                }
                Some(b"pending") => {
                    if let Some(entries) = items[i + 1].items_mut() {
                        for entry in entries {
                            if let Some(fields) = entry.items_mut() {
                                match fields.len() {
                                    4 => fields[2].mask_integer(Masked::Clock, out),
                                    3 => fields[1].mask_integer(Masked::Clock, out),
                                    _ => {}
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
            i += 2;
        }
        for item in items.iter_mut() {
            item.mask_xinfo(out);
        }
    }

    /// XPENDING's extended form: the idle time of each `[id, consumer, idle, count]`.
    fn mask_xpending(&mut self, out: &mut Vec<Masked>) {
        if let Some(entries) = self.items_mut() {
            for entry in entries {
                if let Some(fields) = entry.items_mut()
                    && fields.len() == 4
                {
                    fields[2].mask_integer(Masked::Clock, out);
                }
            }
        }
    }
}

/// Whether `a` is the command name `name`, in any case.
fn is(a: Option<&Vec<u8>>, name: &str) -> bool {
    a.is_some_and(|a| a.eq_ignore_ascii_case(name.as_bytes()))
}

/// `reply` to `args` with its clock-dependent and internal integers masked (see the
/// module's documentation), and the values masked, in order. `queued` are the commands
/// queued for an EXEC (its replies are masked as theirs); ignored for other commands. A
/// reply this module cannot parse comes back as it is.
pub fn mask(args: &[Vec<u8>], queued: &[Cmd], reply: &[u8]) -> (Vec<u8>, Vec<Masked>) {
    let mut values = Vec::new();
    let Some((mut node, len)) = parse(reply).filter(|(_, len)| *len == reply.len()) else {
        return (reply.to_vec(), values);
    };
    debug_assert_eq!(len, reply.len());
    mask_node(args, queued, &mut node, &mut values);
    let mut out = Vec::with_capacity(reply.len());
    node.bytes(&mut out);
    (out, values)
}

fn mask_node(args: &[Vec<u8>], queued: &[Cmd], node: &mut Node, values: &mut Vec<Masked>) {
    let name = args.first();
    if is(name, "XINFO") {
        node.mask_xinfo(values);
    } else if is(name, "XPENDING") && args.len() > 3 {
        node.mask_xpending(values);
    } else if is(name, "EXEC")
        && let Some(items) = node.items_mut()
        && items.len() == queued.len()
    {
        for (item, c) in items.iter_mut().zip(queued) {
            mask_node(c, &[], item, values);
        }
    }
}

/// The verdict on goblin's reply `got` against redis's `want` to `args` (`queued`: the
/// commands an EXEC runs): the masked bytes must be the same, and each clock reading
/// within [`CLOCK_TOLERANCE_MS`] of redis's. `Err` with the failure message when not.
///
/// # Errors
/// When the replies differ.
pub fn verdict(args: &[Vec<u8>], queued: &[Cmd], got: &[u8], want: &[u8]) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    let (g, g_values) = mask(args, queued, got);
    let (r, r_values) = mask(args, queued, want);
    if g != r {
        return Err(format!(
            "reply to {} differs (clock fields masked)\n{}\n  unmasked:\n{}",
            brief_cmd(args),
            differences(&g, &r),
            differences(got, want)
        ));
    }
    for (a, b) in g_values.iter().zip(&r_values) {
        if let (Masked::Clock(a), Masked::Clock(b)) = (a, b)
            && (a - b).abs() > CLOCK_TOLERANCE_MS
        {
            return Err(format!(
                "reply to {}: a clock reading differs by more than {CLOCK_TOLERANCE_MS} ms \
                 (goblin {a}, redis {b})\n{}",
                brief_cmd(args),
                differences(got, want)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::cmd;

    fn bulk(s: &str) -> String {
        format!("${}\r\n{s}\r\n", s.len())
    }

    /// XINFO CONSUMERS in RESP2: only the idle integer is masked, and a different name
    /// or pending count still differs.
    #[test]
    fn xinfo_masks_clock_fields_only() {
        let args = cmd(&["XINFO", "CONSUMERS", "s", "g"]);
        let reply = |name: &str, pending: i64, idle: i64| {
            format!(
                "*1\r\n*6\r\n{}{}{}:{pending}\r\n{}:{idle}\r\n",
                bulk("name"),
                bulk(name),
                bulk("pending"),
                bulk("idle")
            )
            .into_bytes()
        };
        assert!(verdict(&args, &[], &reply("c", 2, 15), &reply("c", 2, 3)).is_ok());
        assert!(verdict(&args, &[], &reply("c", 2, 15), &reply("c", 2, 99_999)).is_err());
        assert!(verdict(&args, &[], &reply("c", 1, 15), &reply("c", 2, 15)).is_err());
        assert!(verdict(&args, &[], &reply("d", 2, 15), &reply("c", 2, 15)).is_err());
        // An idle that is not an integer is not masked.
        let text = reply("c", 2, 1);
        let other = String::from_utf8(text.clone())
            .unwrap()
            .replace(":1\r\n", "$1\r\n1\r\n");
        assert!(verdict(&args, &[], other.as_bytes(), &text).is_err());
        // Outside XINFO nothing is masked.
        assert!(verdict(&cmd(&["XRANGE"]), &[], &reply("c", 2, 1), &reply("c", 2, 2)).is_err());
    }

    /// RESP3 maps, `radix-tree-nodes`, and the pending lists of XINFO STREAM FULL.
    #[test]
    fn xinfo_stream_full_masks_delivery_times_and_radix_nodes() {
        let args = cmd(&["XINFO", "STREAM", "s", "FULL"]);
        let reply = |nodes: i64, keys: i64, t: i64, count: i64| {
            format!(
                "%3\r\n{}:{nodes}\r\n{}:{keys}\r\n{}*1\r\n%2\r\n{}*1\r\n*4\r\n{}{}:{t}\r\n:{count}\
                 \r\n{}*1\r\n%2\r\n{}:{t}\r\n{}*1\r\n*3\r\n{}:{t}\r\n:{count}\r\n",
                bulk("radix-tree-nodes"),
                bulk("radix-tree-keys"),
                bulk("groups"),
                bulk("pending"),
                bulk("1-1"),
                bulk("c"),
                bulk("consumers"),
                bulk("seen-time"),
                bulk("pending"),
                bulk("1-1"),
            )
            .into_bytes()
        };
        let base = reply(2, 1, 1_700_000_000_000, 1);
        let (masked, values) = mask(&args, &[], &base);
        assert_eq!(values.len(), 4, "{}", crate::show(&masked));
        assert!(verdict(&args, &[], &reply(5, 1, 1_700_000_000_100, 1), &base).is_ok());
        assert!(verdict(&args, &[], &reply(2, 2, 1_700_000_000_000, 1), &base).is_err());
        assert!(verdict(&args, &[], &reply(2, 1, 1_700_000_000_000, 2), &base).is_err());
        assert!(verdict(&args, &[], &reply(2, 1, 1_800_000_000_000, 1), &base).is_err());
    }

    /// XPENDING's extended form masks idle times; its summary form nothing; EXEC as its
    /// queued commands.
    #[test]
    fn xpending_and_exec() {
        let ext = cmd(&["XPENDING", "s", "g", "-", "+", "10"]);
        let entry = |idle: i64, count: i64| {
            format!(
                "*1\r\n*4\r\n{}{}:{idle}\r\n:{count}\r\n",
                bulk("1-1"),
                bulk("c")
            )
            .into_bytes()
        };
        assert!(verdict(&ext, &[], &entry(5, 1), &entry(7, 1)).is_ok());
        assert!(verdict(&ext, &[], &entry(5, 1), &entry(5, 2)).is_err());
        let summary = cmd(&["XPENDING", "s", "g"]);
        assert!(verdict(&summary, &[], &entry(5, 1), &entry(7, 1)).is_err());
        let exec = cmd(&["EXEC"]);
        let queued = vec![cmd(&["XLEN", "s"]), ext.clone()];
        let both = |idle: i64| {
            let mut r = b"*2\r\n:1\r\n".to_vec();
            r.extend(entry(idle, 1));
            r
        };
        assert!(verdict(&exec, &queued, &both(5), &both(9)).is_ok());
        assert!(verdict(&exec, &queued[..1], &both(5), &both(9)).is_err());
        // Nulls of every kind stay as they are.
        assert!(verdict(&ext, &[], b"*-1\r\n", b"_\r\n").is_err());
    }
}
