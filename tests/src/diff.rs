//! Differential testing: the same commands to goblin-server and to redis-server 7.0 (the
//! oracle), and their replies compared — byte for byte, or as [`How`] says for the few
//! replies that legitimately differ (clock reads, orders).
//!
//! - [`Differential`] holds both servers and a connection to each; [`Differential::check`]
//!   and its siblings compare byte for byte.
//! - [`compare`], [`compare_pipeline`] and [`script`] compare as [`How`] says, with a
//!   context for failure messages; [`script_everywhere`] and [`script_on_both`] run a
//!   script against fresh pairs of servers with each of [`THREADS`] and key layouts.
//! - [`Differential::check_raw_replies`] and [`Differential::check_raw_to_close`] send raw
//!   bytes (inline commands, protocol errors) on fresh connections and compare all that
//!   comes back.
//!
//! Replies are compared as bytes; [`show`] and [`differences`] only build the messages.

use std::time::Duration;

use crate::cmd::{Cmd, brief, brief_cmd, pipeline, script_lines, substitute, words};
use crate::keys::{LAYOUTS, Layout, THREADS};
use crate::reply::{sorted_elements, try_integer};
use crate::{REPLY_TIMEOUT, Raw, Server, encode, show};

/// Commands sent in one write by [`compare_pipeline`]: enough to keep both servers busy,
/// few enough that neither connection's buffers fill while the other is being read.
pub const PIPELINE_CHUNK: usize = 500;

/// How two servers' replies to a command are compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// Byte for byte.
    Exact,
    /// Integer replies that depend on when each server read its clock (TTL, PTTL,
    /// EXPIRETIME, PEXPIRETIME): equal when negative (no key, no expiry), else within
    /// ten seconds in the command's unit (`P…` commands answer milliseconds); any other
    /// reply byte for byte.
    Near,
    /// Arrays as multisets (KEYS answers in each server's own order); any other reply
    /// byte for byte.
    Sorted,
    /// The class of a TTL or PTTL reply ([`ttl_class`]): -2 (no key), -1 (no expiry) or
    /// some other number, whatever it is; any other reply byte for byte.
    TtlClass,
    /// Not compared: a command sent to both servers for its effect (HELLO, whose reply
    /// names each connection's own id).
    Unread,
}

/// How far apart two non-negative answers to a clock-dependent command may be: ten
/// seconds in the command's unit (PTTL and PEXPIRETIME answer milliseconds), far more than
/// lies between the two servers' clock reads, far less than any two deadlines a test sets.
fn tolerance(name: &[u8]) -> i64 {
    if name.first().is_some_and(|c| c.eq_ignore_ascii_case(&b'p')) {
        10_000
    } else {
        10
    }
}

/// The class of a TTL or PTTL reply: `:-2` (no key) and `:-1` (no expiry) as they are,
/// any other integer as `:<positive>`; anything else as it is.
pub fn ttl_class(reply: &[u8]) -> Vec<u8> {
    match reply {
        b":-2\r\n" | b":-1\r\n" => reply.to_vec(),
        _ if reply.starts_with(b":") && reply.len() > 3 => b":<positive>\r\n".to_vec(),
        _ => reply.to_vec(),
    }
}

/// Whether goblin's reply `got` matches redis's `want` to the command `name`, compared as
/// `how` says. The bytes are compared, never their text: two replies that differ in a
/// byte that is not UTF-8 differ.
pub fn same(got: &[u8], want: &[u8], how: How, name: &[u8]) -> bool {
    if got == want {
        return true;
    }
    match how {
        How::Exact => false,
        How::Unread => true,
        How::Near => match (try_integer(got), try_integer(want)) {
            (Some(g), Some(r)) if g >= 0 && r >= 0 => (g - r).abs() <= tolerance(name),
            _ => false,
        },
        How::Sorted => match (sorted_elements(got), sorted_elements(want)) {
            (Some(g), Some(r)) => g == r,
            _ => false,
        },
        How::TtlClass => ttl_class(got) == ttl_class(want),
    }
}

/// Two differing replies as text for failure messages: from a little before the first
/// byte where they differ, escaped (so that bytes that are not UTF-8 show as `\xNN`).
pub fn differences(got: &[u8], want: &[u8]) -> String {
    /// Bytes shown before the first difference, and in all.
    const BEFORE: usize = 40;
    const SHOWN: usize = 200;
    let at = got.iter().zip(want).take_while(|(g, r)| g == r).count();
    let from = at.saturating_sub(BEFORE);
    let window = |r: &[u8]| {
        let part = &r[from.min(r.len())..r.len().min(from + SHOWN)];
        let text: String = part
            .iter()
            .flat_map(|&b| std::ascii::escape_default(b))
            .map(char::from)
            .collect();
        let cut = if from + SHOWN < r.len() { "…" } else { "" };
        format!(
            "{}{text}{cut} ({} bytes)",
            if from > 0 { "…" } else { "" },
            r.len()
        )
    };
    format!("  goblin: {}\n  redis:  {}", window(got), window(want))
}

/// The verdict on goblin's reply `got` to `args` against redis's `want`, compared as
/// `how` says: `Err` with the failure message when they differ.
///
/// # Errors
/// When the replies differ.
pub fn verdict(got: &[u8], want: &[u8], how: How, args: &[Vec<u8>]) -> Result<(), String> {
    let name = args.first().map_or(&[][..], Vec::as_slice);
    if same(got, want, how, name) {
        return Ok(());
    }
    let how = match how {
        How::Exact => String::new(),
        how => format!(" ({how:?})"),
    };
    Err(format!(
        "reply to {} differs{how}\n{}",
        brief_cmd(args),
        differences(got, want)
    ))
}

/// Sends `redis_args` to redis-server, then `goblin_args` to goblin-server (usually the
/// same command; the GOBLIN commands' oracles are scripts); returns (goblin's reply,
/// redis's reply).
pub fn ask(
    g: &mut Raw,
    goblin_args: &[&[u8]],
    r: &mut Raw,
    redis_args: &[&[u8]],
) -> (Vec<u8>, Vec<u8>) {
    let want = r.cmd(redis_args);
    let got = g.cmd(goblin_args);
    (got, want)
}

/// Sends `args` to redis-server, then to goblin-server; returns (goblin's reply, redis's
/// reply).
pub fn ask_both(g: &mut Raw, r: &mut Raw, args: &[&[u8]]) -> (Vec<u8>, Vec<u8>) {
    ask(g, args, r, args)
}

/// goblin-server and redis-server side by side, one raw connection to each.
#[derive(Debug)]
pub struct Differential {
    /// The server under test.
    pub goblin: Server,
    /// The oracle.
    pub redis: Server,
    /// Connection to goblin-server.
    pub g: Raw,
    /// Connection to redis-server.
    pub r: Raw,
}

/// What a server sent back for raw input on a fresh connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawOutcome {
    /// Every byte it sent (for [`Differential::check_raw_replies`], the replies expected).
    pub bytes: Vec<u8>,
    /// Whether it closed the connection.
    pub closed: bool,
    /// For [`Differential::check_raw_replies`], what answered the probe sent after the
    /// expected replies: the probe's own reply when the server sent nothing more (empty
    /// when it closed the connection).
    pub after: Vec<u8>,
}

/// The verdict on what goblin-server sent back for raw input against what redis-server
/// sent: `Err` with the failure message when the bytes, or whether each closed, differ.
///
/// # Errors
/// When they differ.
pub fn raw_verdict(input: &[u8], got: &RawOutcome, want: &RawOutcome) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    Err(format!(
        "raw input {}: goblin's replies differ from redis's\n{}\n  closed: goblin {}, redis \
         {}\n  after the replies: goblin {}, redis {}",
        brief(input),
        differences(&got.bytes, &want.bytes),
        got.closed,
        want.closed,
        brief(&got.after),
        brief(&want.after)
    ))
}

/// The command sent after the expected replies by [`Differential::check_raw_replies`].
const PROBE: &[u8] = b"goblin-tests: nothing more";

/// Whether a read error means that the server closed the connection.
fn is_close(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    matches!(
        e.kind(),
        UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe
    )
}

/// Reads `n` replies from `raw` (the input already sent), then sends [`PROBE`] and reads
/// what answers it. `who` names the server in failure messages.
fn read_replies(raw: &mut Raw, n: usize, who: &str, input: &[u8]) -> RawOutcome {
    let mut bytes = Vec::new();
    for i in 0..n {
        match raw.try_reply() {
            Ok(reply) => bytes.extend(reply),
            Err(e) if is_close(&e) => {
                // Closed early: what is left is an incomplete reply, if anything.
                let (rest, _) = raw.read_to_close(Duration::from_millis(1));
                bytes.extend(rest);
                return RawOutcome {
                    bytes,
                    closed: true,
                    after: Vec::new(),
                };
            }
            Err(e) => panic!(
                "raw input {}: {who} sent {i} of the {n} replies expected, then {e} (within \
                 {REPLY_TIMEOUT:?}); got so far: {}",
                brief(input),
                show(&bytes)
            ),
        }
    }
    let after = match raw.try_send(&encode(&[b"ECHO", PROBE])) {
        Err(e) if is_close(&e) => Err(e),
        Err(e) => panic!("{who}: cannot send the probe: {e}"),
        Ok(()) => raw.try_reply(),
    };
    match after {
        Ok(after) => RawOutcome {
            bytes,
            closed: false,
            after,
        },
        Err(e) if is_close(&e) => RawOutcome {
            bytes,
            closed: true,
            after: Vec::new(),
        },
        Err(e) => panic!(
            "raw input {}: {who} sent the {n} replies expected, then did not answer ECHO \
             (the probe that shows nothing more came): {e}",
            brief(input)
        ),
    }
}

impl Differential {
    /// Both servers, goblin-server with the default thread count
    /// ([`default_threads`](crate::default_threads)).
    pub fn new() -> Differential {
        Differential::with_goblin(Server::goblin())
    }

    /// Both servers, goblin-server with `--threads n`.
    pub fn threads(n: usize) -> Differential {
        Differential::with_goblin(Server::goblin_threads(n))
    }

    /// Both servers, with a given goblin-server. The oracle must be redis-server 7.0.x:
    /// [`Server::redis`] checks.
    pub fn with_goblin(goblin: Server) -> Differential {
        Differential::with_servers(goblin, Server::redis())
    }

    /// Both servers, as given (the same options to each: `--requirepass`, …).
    pub fn with_servers(goblin: Server, redis: Server) -> Differential {
        let g = goblin.raw();
        let r = redis.raw();
        Differential {
            goblin,
            redis,
            g,
            r,
        }
    }

    /// Sends `args` to both and asserts byte-identical replies; returns the reply.
    pub fn check(&mut self, args: &[&[u8]]) -> Vec<u8> {
        let (got, want) = ask_both(&mut self.g, &mut self.r, args);
        let owned: Cmd = args.iter().map(|a| a.to_vec()).collect();
        if let Err(e) = verdict(&got, &want, How::Exact, &owned) {
            panic!("{e}");
        }
        got
    }

    /// [`Differential::check`] for a command written as space-separated words.
    pub fn check_str(&mut self, line: &str) -> Vec<u8> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        self.check(&args)
    }

    /// Checks each line of `script` (space-separated words per line).
    pub fn check_lines(&mut self, script: &str) {
        for line in script_lines(script) {
            self.check_str(line);
        }
    }

    /// Sends the same pipeline to both (in writes of [`PIPELINE_CHUNK`] commands) and
    /// asserts byte-identical replies, reply by reply; returns goblin's.
    pub fn check_pipeline(&mut self, cmds: &[Cmd]) -> Vec<Vec<u8>> {
        compare_pipeline(self, cmds, "pipelined")
    }

    /// Sends the same raw bytes (complete commands, inline or not) to both on fresh
    /// connections, reads `replies` replies from each (each failing after
    /// [`REPLY_TIMEOUT`]), then asks each for an ECHO; asserts that both sent the same
    /// bytes, then answered the ECHO alike (nothing more came before it), or both closed
    /// the connection. Returns goblin's replies and whether it closed.
    ///
    /// # Panics
    /// Also when redis-server does not send exactly `replies` replies before the ECHO's:
    /// the test's count is wrong. (The input must leave the connection where ECHO is
    /// answered: not inside MULTI.)
    pub fn check_raw_replies(&mut self, bytes: &[u8], replies: usize) -> (Vec<u8>, bool) {
        let mut r = self.redis.raw();
        let mut g = self.goblin.raw();
        let _ = r.try_send(bytes);
        let _ = g.try_send(bytes);
        let want = read_replies(&mut r, replies, "redis-server", bytes);
        let (sent, _) = crate::reply::split(&want.bytes);
        assert_eq!(
            sent.len(),
            replies,
            "raw input {}: redis-server sent {} replies and closed the connection, the test \
             expects {replies}: {}",
            brief(bytes),
            sent.len(),
            show(&want.bytes)
        );
        assert!(
            want.closed || want.after == crate::reply::bulk(PROBE),
            "raw input {}: after the {replies} replies the test expects, redis-server sent {} \
             instead of answering the ECHO probe: the test's count is too low (or the input \
             leaves the connection where ECHO is not answered: use check_raw_to_close)",
            brief(bytes),
            show(&want.after)
        );
        let got = read_replies(&mut g, replies, "goblin-server", bytes);
        if let Err(e) = raw_verdict(bytes, &got, &want) {
            panic!("{e}");
        }
        (got.bytes, got.closed)
    }

    /// Sends the same raw bytes to both on fresh connections and reads all each sends
    /// back until it closes the connection (a protocol error, QUIT), or until it stays
    /// quiet for [`REPLY_TIMEOUT`]; asserts that both sent the same bytes and both closed
    /// (or neither did). Returns goblin's bytes and whether it closed.
    pub fn check_raw_to_close(&mut self, bytes: &[u8]) -> (Vec<u8>, bool) {
        self.check_raw(bytes, REPLY_TIMEOUT)
    }

    /// Sends the same raw bytes to both on fresh connections and compares, byte for byte,
    /// everything each sends back until it closes the connection or stays quiet for
    /// `quiet`; returns goblin's bytes and whether it closed.
    ///
    /// Whether a server has finished when it goes quiet depends on timing: prefer
    /// [`Differential::check_raw_replies`] when the number of replies is known, and
    /// [`Differential::check_raw_to_close`] when the server closes the connection.
    pub fn check_raw(&mut self, bytes: &[u8], quiet: Duration) -> (Vec<u8>, bool) {
        let mut r = self.redis.raw();
        let mut g = self.goblin.raw();
        let _ = r.try_send(bytes);
        let _ = g.try_send(bytes);
        let (bytes_r, closed_r) = r.read_to_close(quiet);
        let (bytes_g, closed_g) = g.read_to_close(quiet);
        let want = RawOutcome {
            bytes: bytes_r,
            closed: closed_r,
            after: Vec::new(),
        };
        let got = RawOutcome {
            bytes: bytes_g,
            closed: closed_g,
            after: Vec::new(),
        };
        if let Err(e) = raw_verdict(bytes, &got, &want) {
            panic!("{e}");
        }
        (got.bytes, got.closed)
    }
}

impl Default for Differential {
    fn default() -> Self {
        Differential::new()
    }
}

/// Sends `args` to redis-server, then to goblin-server, and asserts that the replies are
/// the same as `how` says; returns goblin's. `ctx` starts the failure message.
pub fn compare(d: &mut Differential, args: &[Vec<u8>], how: How, ctx: &str) -> Vec<u8> {
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    let (got, want) = ask_both(&mut d.g, &mut d.r, &refs);
    if let Err(e) = verdict(&got, &want, how, args) {
        panic!("{ctx}: {e}");
    }
    got
}

/// Sends `cmds` to both servers as pipelines of [`PIPELINE_CHUNK`] commands and asserts
/// byte-identical replies, reply by reply; returns goblin's.
pub fn compare_pipeline(d: &mut Differential, cmds: &[Cmd], ctx: &str) -> Vec<Vec<u8>> {
    let mut replies = Vec::with_capacity(cmds.len());
    for chunk in cmds.chunks(PIPELINE_CHUNK) {
        let want = pipeline(&mut d.r, chunk);
        let got = pipeline(&mut d.g, chunk);
        for ((c, g), r) in chunk.iter().zip(&got).zip(&want) {
            if let Err(e) = verdict(g, r, How::Exact, c) {
                panic!("{ctx}: {e}");
            }
        }
        replies.extend(got);
    }
    replies
}

/// Runs a script: one command per line, words as [`words`] splits them, `K0`, `K1`, …
/// standing for `keys`. Each command goes to redis-server, then to goblin-server, and the
/// replies must be the same bytes; a line starting with `~` compares as [`How::Near`]
/// (TTL, PTTL, EXPIRETIME), one starting with `%` as [`How::Sorted`] (KEYS), one
/// starting with `!` is not compared ([`How::Unread`]: HELLO).
pub fn script(d: &mut Differential, keys: &[String], ctx: &str, text: &str) {
    for line in script_lines(text) {
        let (how, line) = if let Some(rest) = line.strip_prefix('~') {
            (How::Near, rest)
        } else if let Some(rest) = line.strip_prefix('!') {
            (How::Unread, rest)
        } else if let Some(rest) = line.strip_prefix('%') {
            (How::Sorted, rest)
        } else {
            (How::Exact, line)
        };
        let args = substitute(words(line), keys);
        compare(d, &args, how, ctx);
    }
}

/// Runs `scenario` (several connections, in a set order: what each answered, step by
/// step) on goblin-server with the default thread count and on redis-server, and asserts
/// the same transcript; returns redis-server's.
///
/// # Panics
/// At the first step that differs, or when the transcripts' lengths differ.
pub fn same_transcript(scenario: impl Fn(&Server) -> Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let (g, r) = (Server::goblin(), Server::redis());
    let (got, want) = (scenario(&g), scenario(&r));
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_eq!(show(a), show(b), "step {i} differs (goblin, redis)");
    }
    assert_eq!(got.len(), want.len(), "the transcripts' lengths");
    want
}

/// Runs `f` against a fresh redis-server and a fresh goblin-server with each of
/// [`THREADS`], with a context naming the thread count for failure messages.
pub fn for_each_thread_count(mut f: impl FnMut(&mut Differential, &str)) {
    for threads in THREADS {
        let mut d = Differential::threads(threads);
        f(&mut d, &format!("--threads {threads}"));
    }
}

/// Runs `text` with `n` keys in every [`Layout`], from an empty keyspace each time, with
/// each thread count: for scripts of multi-key commands.
pub fn script_everywhere(n: usize, text: &str) {
    for_each_thread_count(|d, ctx| {
        for layout in LAYOUTS {
            let ctx = format!("{ctx}, {layout:?}");
            script(d, &[], &ctx, "FLUSHALL");
            script(d, &layout.keys(n), &ctx, text);
        }
    });
}

/// Runs `text` with `n` keys on different shards, with each thread count: for scripts
/// whose commands take one key each.
pub fn script_on_both(n: usize, text: &str) {
    for_each_thread_count(|d, ctx| script(d, &Layout::CrossShard.keys(n), ctx, text));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two replies that differ only in a byte that is not UTF-8 (which text conversion
    /// would turn into the same U+FFFD) are different replies.
    #[test]
    fn replies_differing_in_a_byte_that_is_not_utf8_differ() {
        let (fe, ff) = (b"$1\r\n\xfe\r\n", b"$1\r\n\xff\r\n");
        assert_eq!(
            String::from_utf8_lossy(fe),
            String::from_utf8_lossy(ff),
            "the case this test is about"
        );
        let get = vec![b"GET".to_vec(), b"k".to_vec()];
        for how in [How::Exact, How::Near, How::Sorted, How::TtlClass] {
            assert!(!same(fe, ff, how, b"GET"), "{how:?}");
            assert!(same(fe, fe, how, b"GET"), "{how:?}");
        }
        let message = verdict(fe, ff, How::Exact, &get).unwrap_err();
        assert!(
            message.contains("\\xfe") && message.contains("\\xff"),
            "{message}"
        );
        assert!(verdict(ff, ff, How::Exact, &get).is_ok());
        // In arrays compared as multisets too.
        assert!(!same(
            b"*1\r\n$1\r\n\xfe\r\n",
            b"*1\r\n$1\r\n\xff\r\n",
            How::Sorted,
            b"KEYS"
        ));
    }

    /// What check_raw, check_raw_replies and check_raw_to_close compare: the bytes, not
    /// their text, and whether each server closed.
    #[test]
    fn raw_outcomes_differing_in_a_byte_that_is_not_utf8_differ() {
        let outcome = |bytes: &[u8], closed: bool| RawOutcome {
            bytes: bytes.to_vec(),
            closed,
            after: Vec::new(),
        };
        let want = outcome(b"+OK\r\n$1\r\n\xff\r\n", true);
        let message =
            raw_verdict(b"x", &outcome(b"+OK\r\n$1\r\n\xfe\r\n", true), &want).unwrap_err();
        assert!(
            message.contains("\\xfe") && message.contains("\\xff"),
            "{message}"
        );
        assert!(raw_verdict(b"x", &want.clone(), &want).is_ok());
        assert!(raw_verdict(b"x", &outcome(b"+OK\r\n$1\r\n\xff\r\n", false), &want).is_err());
        let mut extra = want.clone();
        extra.after = b":1\r\n".to_vec();
        assert!(raw_verdict(b"x", &extra, &want).is_err());
    }

    #[test]
    fn near_sorted_and_ttl_classes() {
        assert!(same(b":100\r\n", b":95\r\n", How::Near, b"TTL"));
        assert!(!same(b":100\r\n", b":89\r\n", How::Near, b"TTL"));
        assert!(same(b":100000\r\n", b":95000\r\n", How::Near, b"PTTL"));
        assert!(!same(b":-1\r\n", b":-2\r\n", How::Near, b"TTL"));
        assert!(!same(b":100\r\n", b":95\r\n", How::Exact, b"TTL"));
        assert!(same(
            b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
            b"*2\r\n$1\r\nb\r\n$1\r\na\r\n",
            How::Sorted,
            b"KEYS"
        ));
        assert!(!same(
            b"*1\r\n$1\r\na\r\n",
            b"*1\r\n$1\r\nb\r\n",
            How::Sorted,
            b"KEYS"
        ));
        assert!(same(b":1234\r\n", b":9\r\n", How::TtlClass, b"PTTL"));
        assert!(!same(b":-2\r\n", b":-1\r\n", How::TtlClass, b"PTTL"));
        assert!(!same(b":-2\r\n", b":5\r\n", How::TtlClass, b"PTTL"));
    }
}
