//! ACL users, differentially against redis-server 7.0: ACL SETUSER's rules and errors,
//! GETUSER (RESP2 and RESP3), LIST, USERS, DELUSER and WHOAMI; AUTH and HELLO … AUTH;
//! the NOPERM checks of commands, keys (read and write patterns) and channels, at top
//! level and inside MULTI; ACL LOG; ACL DRYRUN; `user=` in CLIENT LIST and CLIENT INFO,
//! CLIENT KILL USER; DELUSER of a connected user; the `redis` crate connecting as a user;
//! the default user's password and `requirepass`.
//!
//! Every command goes to redis-server first, then to goblin-server, on raw connections
//! (which send nothing of their own: no CLIENT SETINFO, which redis-server 7.0 lacks and
//! which would show in ACL LOG). Replies are compared as [`canon`] writes them: exactly,
//! but for what legitimately differs between the two servers —
//!
//! - redis-server 7.0 describes a selector's single-command rules (`+get -set +select|0`,
//!   after `-@all`/`+@all` and the categories) in the order of a hash table seeded per
//!   process: they are compared as a set ([`norm_rules`]);
//! - ACL LOG's `age-seconds` is any number, and of its `client-info` line only the
//!   `user=` and `cmd=` fields are compared.
//!
//! Differences are gathered, not asserted one by one, so that a failing test lists all of
//! them.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use goblin_protocol::{Frame, parse_reply};
use goblin_tests::cmd::{args, script_lines, words};
use goblin_tests::keys::THREADS;
use goblin_tests::{Differential, Raw, show};

/// A SHA-256 hex digest, to set and remove as a password hash (of "hello").
const HASH: &str = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";

/// The differences from redis-server a test found, gathered so that one run lists all.
#[derive(Clone, Debug, Default)]
struct Diffs(Rc<RefCell<Vec<String>>>);

impl Diffs {
    fn push(&self, message: String) {
        self.0.borrow_mut().push(message);
    }

    /// Fails the test with every difference found.
    fn assert_none(&self) {
        let found = self.0.borrow();
        assert!(
            found.is_empty(),
            "{} difference(s) from redis-server:\n{}",
            found.len(),
            found.join("\n")
        );
    }
}

/// A raw connection to each server: the same commands go to both.
#[derive(Debug)]
struct Pair {
    g: Raw,
    r: Raw,
    /// Names the servers' setup (thread count) in failure messages.
    ctx: String,
    diffs: Diffs,
}

impl Pair {
    /// A fresh connection to each of `d`'s servers.
    fn new(d: &Differential, ctx: &str, diffs: &Diffs) -> Pair {
        Pair {
            g: d.goblin.raw(),
            r: d.redis.raw(),
            ctx: ctx.to_string(),
            diffs: diffs.clone(),
        }
    }

    /// Sends `line` (split by [`words`]: double quotes keep blanks) to redis-server, then
    /// to goblin-server; (goblin's reply, redis's reply).
    fn both(&mut self, line: &str) -> (Vec<u8>, Vec<u8>) {
        let c = words(line);
        let a = args(&c);
        let want = self.r.cmd(&a);
        let got = self.g.cmd(&a);
        (got, want)
    }

    /// Records a difference.
    fn differ(&self, line: &str, got: &str, want: &str) {
        self.diffs.push(format!(
            "[{}] {line}\n    goblin: {got}\n    redis:  {want}",
            self.ctx
        ));
    }

    /// Sends `line` to both and compares the replies as [`canon`] writes them; returns
    /// (goblin's reply, redis's reply).
    fn check(&mut self, line: &str) -> (Vec<u8>, Vec<u8>) {
        let (got, want) = self.both(line);
        if got != want {
            let (g, r) = (canon(&got), canon(&want));
            if g != r {
                self.differ(line, &g, &r);
            }
        }
        (got, want)
    }

    /// [`Pair::check`] for each line of a script (blank lines and `#` comments skipped).
    fn check_lines(&mut self, script: &str) {
        for line in script_lines(script) {
            self.check(line);
        }
    }

    /// Sends `line` to both for its effect; each reply must not be an error.
    fn ok(&mut self, line: &str) {
        let (got, want) = self.both(line);
        assert!(
            !want.starts_with(b"-"),
            "[{}] {line}: redis-server refused it, the test is wrong: {}",
            self.ctx,
            show(&want)
        );
        if got.starts_with(b"-") {
            self.differ(line, &show(&got), &show(&want));
        }
    }

    /// Sends `line`, an ACL SETUSER that fails, and checks that it fails alike and that
    /// `user` is as it was (ACL GETUSER answers the same before and after).
    fn fails_unchanged(&mut self, user: &str, line: &str) {
        let getuser = format!("ACL GETUSER {user}");
        let (g_before, r_before) = self.both(&getuser);
        let (got, want) = self.check(line);
        assert!(
            want.starts_with(b"-"),
            "[{}] {line}: redis-server accepted it, the test is wrong",
            self.ctx
        );
        let (g_after, r_after) = self.both(&getuser);
        assert_eq!(
            canon(&r_before),
            canon(&r_after),
            "[{}] {line} changed the user on redis-server: the test is wrong",
            self.ctx
        );
        if canon(&g_before) != canon(&g_after) {
            self.diffs.push(format!(
                "[{}] {line} (answered {}) changed user {user} on goblin-server:\n    before: \
                 {}\n    after:  {}",
                self.ctx,
                show(&got),
                canon(&g_before),
                canon(&g_after)
            ));
        }
    }

    /// Sends `line` to both without reading the replies (SUBSCRIBE answers several).
    fn send(&mut self, line: &str) {
        let c = words(line);
        let bytes = goblin_tests::encode(&args(&c));
        self.r.send(&bytes);
        self.g.send(&bytes);
    }

    /// Reads one reply from each and compares them.
    fn check_reply(&mut self, what: &str) {
        let want = self.r.reply();
        let got = self.g.reply();
        let (g, r) = (canon(&got), canon(&want));
        if g != r {
            self.differ(what, &g, &r);
        }
    }
}

/// `ctx` for a goblin-server with `threads` threads.
fn threads_ctx(threads: usize) -> String {
    format!("--threads {threads}")
}

// ---------------------------------------------------------------------------------------
// Canonical replies.

/// A reply as text that keeps its every type and byte (so that equal texts mean equal
/// replies), but for the normalisations this file compares by: command rules as
/// [`norm_rules`] writes them, ACL LOG's `age-seconds` as `<age>` (when it is a number)
/// and its `client-info` as just its `user=` and `cmd=` fields.
fn canon(reply: &[u8]) -> String {
    match parse_reply(reply) {
        Ok(Some((frame, n))) if n == reply.len() => {
            let mut out = String::new();
            canon_frame(&frame, &mut out);
            out
        }
        _ => format!("<not one reply: {}>", show(reply)),
    }
}

fn text(bytes: &[u8]) -> String {
    show(bytes)
}

fn canon_frame(frame: &Frame<'_>, out: &mut String) {
    match frame {
        Frame::Simple(s) => {
            out.push('+');
            out.push_str(&norm_rules(&text(s)));
        }
        Frame::Error(s) => {
            out.push('-');
            out.push_str(&text(s));
        }
        Frame::Integer(n) => out.push_str(&format!(":{n}")),
        Frame::Bulk(s) => {
            out.push_str("$\"");
            out.push_str(&norm_rules(&text(s)));
            out.push('"');
        }
        Frame::Null => out.push_str("null"),
        Frame::Array(items) => canon_items('*', items, out),
        Frame::Map(items) => canon_items('%', items, out),
        Frame::Set(items) => canon_items('~', items, out),
        Frame::Push(items) => canon_items('>', items, out),
        Frame::Double(s) => {
            out.push(',');
            out.push_str(&text(s));
        }
        Frame::Boolean(b) => out.push_str(if *b { "#t" } else { "#f" }),
        Frame::Verbatim(s) => {
            out.push_str("=\"");
            out.push_str(&text(s));
            out.push('"');
        }
        Frame::BigNumber(s) => {
            out.push('(');
            out.push_str(&text(s));
        }
        Frame::BlobError(s) => {
            out.push('!');
            out.push_str(&text(s));
        }
    }
}

/// The string of a bulk, simple or verbatim string frame.
fn frame_bytes<'a>(frame: &Frame<'a>) -> Option<&'a [u8]> {
    match frame {
        Frame::Bulk(s) | Frame::Simple(s) | Frame::Verbatim(s) | Frame::Double(s) => Some(s),
        _ => None,
    }
}

fn canon_items(kind: char, items: &[Frame<'_>], out: &mut String) {
    out.push(kind);
    out.push('[');
    let mut i = 0;
    while i < items.len() {
        if i > 0 {
            out.push_str(", ");
        }
        canon_frame(&items[i], out);
        let key = frame_bytes(&items[i]);
        if let (Some(key @ (b"age-seconds" | b"client-info")), Some(value)) =
            (key, items.get(i + 1))
        {
            out.push_str(", ");
            out.push_str(&canon_log_field(key, value));
            i += 2;
            continue;
        }
        i += 1;
    }
    out.push(']');
}

/// ACL LOG's `age-seconds` (a bulk string in RESP2, a double in RESP3: the type is kept)
/// as `<age>` when it is a non-negative number; its `client-info` as its `user=` and
/// `cmd=` fields.
fn canon_log_field(key: &[u8], value: &Frame<'_>) -> String {
    let kind = match value {
        Frame::Bulk(_) => "$",
        Frame::Double(_) => ",",
        Frame::Verbatim(_) => "=",
        _ => "?",
    };
    let Some(bytes) = frame_bytes(value) else {
        let mut out = String::new();
        canon_frame(value, &mut out);
        return format!("<{} is not a string: {out}>", text(key));
    };
    let s = text(bytes);
    if key == b"age-seconds" {
        match s.parse::<f64>() {
            Ok(age) if age >= 0.0 => format!("{kind}<age>"),
            _ => format!("{kind}<bad age {s:?}>"),
        }
    } else {
        let field = |name: &str| {
            s.split(' ')
                .find_map(|w| w.strip_prefix(name))
                .map_or_else(|| format!("<no {name}>"), str::to_string)
        };
        format!(
            "{kind}<client-info user={} cmd={}>",
            field("user="),
            field("cmd=")
        )
    }
}

/// A text that describes command rules (an ACL LIST line, GETUSER's `commands`: it has a
/// word `+@all` or `-@all`) with, in the root and in each `(selector)`, the single-command
/// rules after the last category (`+@x`/`-@x`) word as a sorted set in braces; other texts
/// as they are.
fn norm_rules(s: &str) -> String {
    let is_all = |w: &str| matches!(w.trim_matches(['(', ')']), "+@all" | "-@all");
    if !s.split(' ').any(is_all) {
        return s.to_string();
    }
    let mut out: Vec<String> = Vec::new();
    let mut segment: Vec<&str> = Vec::new();
    let mut in_selector = false;
    for w in s.split(' ') {
        if !in_selector && w.starts_with('(') {
            out.extend(norm_segment(&segment));
            segment.clear();
            in_selector = true;
        }
        segment.push(w);
        if in_selector && w.ends_with(')') {
            let mut inner: Vec<&str> = segment.clone();
            let last = inner.len() - 1;
            inner[0] = &inner[0][1..];
            inner[last] = inner[last].strip_suffix(')').unwrap_or(inner[last]);
            out.push(format!("({})", norm_segment(&inner).join(" ")));
            segment.clear();
            in_selector = false;
        }
    }
    out.extend(norm_segment(&segment));
    out.join(" ")
}

fn norm_segment(words: &[&str]) -> Vec<String> {
    let last_category = words
        .iter()
        .rposition(|w| w.starts_with("+@") || w.starts_with("-@"));
    match last_category {
        None => words.iter().map(|w| (*w).to_string()).collect(),
        Some(i) => {
            let mut singles: Vec<&str> = words[i + 1..].to_vec();
            singles.sort_unstable();
            let mut out: Vec<String> = words[..=i].iter().map(|w| (*w).to_string()).collect();
            out.push(format!("{{{}}}", singles.join(" ")));
            out
        }
    }
}

#[test]
fn the_canonical_form_normalises_only_what_it_should() {
    assert_eq!(
        norm_rules("user u on ~a* resetchannels -@all +@hash +set +get (~x* -@all +b +a)"),
        "user u on ~a* resetchannels -@all +@hash {+get +set} (~x* -@all {+a +b})"
    );
    assert_eq!(norm_rules("-@all"), "-@all {}");
    assert_eq!(norm_rules("~a* %R~b"), "~a* %R~b");
    assert_eq!(
        canon(b"*2\r\n$1\r\na\r\n:1\r\n"),
        canon(b"*2\r\n$1\r\na\r\n:1\r\n")
    );
    assert_ne!(canon(b"+a\r\n"), canon(b"$1\r\na\r\n"));
    assert_ne!(
        canon(b"$15\r\n-@all +get +set\r\n"),
        canon(b"$15\r\n-@all +get +del\r\n")
    );
    assert_eq!(
        canon(b"$15\r\n-@all +get +set\r\n"),
        canon(b"$15\r\n-@all +set +get\r\n")
    );
    let log = |age: &str, info: &str| {
        format!(
            "*4\r\n$11\r\nage-seconds\r\n${}\r\n{age}\r\n$11\r\nclient-info\r\n${}\r\n{info}\r\n",
            age.len(),
            info.len()
        )
    };
    assert_eq!(
        canon(log("0.5", "id=1 cmd=get user=u x=1").as_bytes()),
        canon(log("12", "id=7 user=u cmd=get").as_bytes())
    );
    assert_ne!(
        canon(log("0.5", "id=1 cmd=get user=u").as_bytes()),
        canon(log("0.5", "id=1 cmd=set user=u").as_bytes())
    );
    assert_ne!(
        canon(log("0.5", "cmd=get user=u").as_bytes()),
        canon(log("x", "cmd=get user=u").as_bytes())
    );
}

// ---------------------------------------------------------------------------------------
// 1. ACL SETUSER.

/// ACL SETUSER's rules, one after another on a user, each followed by ACL GETUSER and
/// ACL LIST; and its errors, each of which leaves the user as it was.
#[test]
fn setuser_rules_and_errors_match_redis() {
    let diffs = Diffs::default();
    for threads in THREADS {
        let d = Differential::threads(threads);
        let mut p = Pair::new(&d, &threads_ctx(threads), &diffs);
        let rules = [
            "ACL SETUSER u1",
            "ACL SETUSER u1 on",
            "ACL SETUSER u1 >p1 >p2",
            "ACL SETUSER u1 <p1",
            &format!("ACL SETUSER u1 #{HASH}"),
            &format!("ACL SETUSER u1 !{HASH}"),
            "ACL SETUSER u1 nopass",
            "ACL SETUSER u1 >p3",
            "ACL SETUSER u1 resetpass",
            "ACL SETUSER u1 off",
            "ACL SETUSER u1 ~a* %R~r* %W~w* %RW~rw* %WR~wr*",
            "ACL SETUSER u1 allkeys",
            "ACL SETUSER u1 resetkeys ~k*",
            "ACL SETUSER u1 &ch*",
            "ACL SETUSER u1 allchannels",
            "ACL SETUSER u1 resetchannels &c1 &c2",
            "ACL SETUSER u1 +get +set",
            "ACL SETUSER u1 -set",
            "ACL SETUSER u1 +@hash",
            "ACL SETUSER u1 -@hash",
            "ACL SETUSER u1 +client|id +config|get",
            "ACL SETUSER u1 -client|id",
            "ACL SETUSER u1 +select|0 +select|1",
            "ACL SETUSER u1 +get|x",
            "ACL SETUSER u1 allcommands",
            "ACL SETUSER u1 -@hash -get",
            "ACL SETUSER u1 nocommands",
            "ACL SETUSER u1 +@string -append",
            // redis-server 7.0 describes the commands by categories chosen
            // greedily, the best fit first (fewest differing commands, then most in
            // common), until none helps: `+@all -@dangerous`, `-@all +@string +@hash`.
            "ACL SETUSER u1 reset +@all -@admin -@dangerous",
            "ACL SETUSER u1 reset -@all +@hash +@string",
            "ACL SETUSER u1 reset +@all -@write",
            "ACL SETUSER u1 reset +@all",
            "ACL SETUSER u1 -@all",
            "ACL SETUSER u1 +GET +@HASH +Client|ID ON NoPass AllKeys",
            "ACL SETUSER u1 reset",
            "ACL SETUSER u1 skip-sanitize-payload",
            "ACL SETUSER u1 sanitize-payload",
            "ACL SETUSER u1 \"(~x* +get)\"",
            "ACL SETUSER u1 \"(~y*\" \"+set)\"",
            "ACL SETUSER u1 \"(%R~r* &c +publish)\" \"()\"",
            "ACL SETUSER u1 clearselectors",
            "ACL SETUSER u1 ~ & %R~",
            "ACL SETUSER u1 reset on >pw ~k* &c* +get",
        ];
        for line in rules {
            p.check(line);
            p.check("ACL GETUSER u1");
            p.check("ACL LIST");
        }
        let errors = [
            "ACL SETUSER u1 get",
            "ACL SETUSER u1 @hash",
            "ACL SETUSER u1 +nosuch",
            "ACL SETUSER u1 +@nosuch",
            "ACL SETUSER u1 -@nosuch",
            "ACL SETUSER u1 +config|nosuch",
            // redis-server: "Allowing first-arg of a subcommand is not supported".
            "ACL SETUSER u1 +client|id|x",
            "ACL SETUSER u1 -select|0",
            "ACL SETUSER u1 +select|",
            "ACL SETUSER u1 %X~foo",
            "ACL SETUSER u1 %~foo",
            "ACL SETUSER u1 %RWX~foo",
            "ACL SETUSER u1 <nope",
            "ACL SETUSER u1 #abc",
            "ACL SETUSER u1 !abc",
            &format!("ACL SETUSER u1 #{}", HASH.to_uppercase()),
            &format!("ACL SETUSER u1 !{}", "0".repeat(64)),
            "ACL SETUSER u1 allkeys ~foo",
            "ACL SETUSER u1 allchannels &foo",
            "ACL SETUSER u1 \"(~x*\"",
            "ACL SETUSER u1 \"(~x*\" +get",
            "ACL SETUSER u1 x)",
            "ACL SETUSER u1 )",
            "ACL SETUSER u1 \"(~x* +nosuch)\"",
            "ACL SETUSER u1 \"(~x* on)\"",
            "ACL SETUSER u1 off >other +del get",
            "ACL SETUSER u1 nopass ~z* +@nosuch",
            "ACL SETUSER u1 clearselectors \"(~x*\"",
        ];
        for line in errors {
            p.fails_unchanged("u1", line);
        }
        // A user that does not exist yet is not created by a SETUSER that fails.
        p.check("ACL SETUSER u2 on +nosuch");
        p.check("ACL GETUSER u2");
        p.check_lines(
            "ACL SETUSER \"a b\" on\n\
             ACL SETUSER \"a\\0b\" on\n\
             ACL SETUSER\n\
             ACL USERS\n\
             ACL LIST",
        );
    }
    diffs.assert_none();
}

// ---------------------------------------------------------------------------------------
// 2. GETUSER, LIST, USERS, DELUSER, WHOAMI.

/// GETUSER of users with passwords, key and channel patterns, commands and selectors, in
/// RESP2 and RESP3; LIST; USERS; DELUSER's count and errors; WHOAMI.
#[test]
fn getuser_list_users_deluser_and_whoami_match_redis() {
    let diffs = Diffs::default();
    for threads in THREADS {
        let d = Differential::threads(threads);
        let ctx = threads_ctx(threads);
        let mut p = Pair::new(&d, &ctx, &diffs);
        p.check_lines(&format!(
            "ACL SETUSER alice on >a1 #{HASH} ~a* %R~r* %W~w* resetchannels &news -@all +get +set\n\
             # bob's commands: `+@all -@dangerous`, the best fit.\n\
             ACL SETUSER bob off nopass allkeys allchannels +@all -@dangerous\n\
             ACL SETUSER carol on >c ~c* +get \"(~x* %R~y* &ch +set)\" \"(&z +publish)\"\n\
             ACL SETUSER dave on >d reset\n\
             ACL SETUSER erin on >e +@hash -hdel skip-sanitize-payload\n\
             ACL GETUSER alice\n\
             ACL GETUSER bob\n\
             ACL GETUSER carol\n\
             ACL GETUSER dave\n\
             ACL GETUSER erin\n\
             ACL GETUSER default\n\
             ACL GETUSER nobody\n\
             ACL GETUSER\n\
             ACL GETUSER a b\n\
             ACL LIST\n\
             ACL USERS\n\
             ACL WHOAMI"
        ));
        // RESP3: GETUSER is a map (flags and others as their RESP3 types).
        // `flags` is a RESP3 set (`~`).
        let mut p3 = Pair::new(&d, &ctx, &diffs);
        let _ = p3.both("HELLO 3");
        p3.check_lines(
            "ACL GETUSER alice\nACL GETUSER bob\nACL GETUSER carol\nACL GETUSER dave\n\
             ACL GETUSER erin\nACL GETUSER default\nACL GETUSER nobody\nACL LIST\n\
             ACL USERS\nACL WHOAMI",
        );
        // WHOAMI as another user.
        let mut a = Pair::new(&d, &ctx, &diffs);
        a.check_lines("AUTH alice a1\nACL WHOAMI");
        p.check_lines(
            "ACL SETUSER alice +acl|whoami\n\
             ACL DELUSER bob nobody dave\n\
             ACL DELUSER default\n\
             ACL DELUSER erin default\n\
             ACL DELUSER\n\
             ACL DELUSER nobody\n\
             ACL USERS\n\
             ACL LIST",
        );
        a.check("ACL WHOAMI");
        p.check_lines("ACL DELUSER erin\nACL USERS");
    }
    diffs.assert_none();
}

// ---------------------------------------------------------------------------------------
// 3. AUTH, HELLO AUTH and NOPERM.

/// Whether a HELLO reply is one (a map or an array, not an error): the replies name each
/// server and connection, so they are not compared.
fn hello_answered(reply: &[u8]) -> bool {
    reply.starts_with(b"*") || reply.starts_with(b"%")
}

/// The rules of the user `app` the permission tests authenticate as.
const APP: &str = "ACL SETUSER app on >pw resetkeys ~a* %R~r* %W~w* resetchannels &news &p* \
                   -@all +get +set +mget +mset +copy +publish +subscribe +psubscribe +multi \
                   +exec +ping +client|info +select|0";

/// AUTH and HELLO … AUTH: success, WRONGPASS (wrong password, disabled user, unknown
/// user), AUTH <password> without a default password; then, as a restricted user, NOPERM
/// for commands, subcommands, keys (read and write patterns) and channels, and inside
/// MULTI (EXECABORT); AUTH and HELLO allowed to a `-@all` user.
#[test]
fn auth_and_permissions_match_redis() {
    let diffs = Diffs::default();
    for threads in THREADS {
        let d = Differential::threads(threads);
        let ctx = threads_ctx(threads);
        let mut admin = Pair::new(&d, &ctx, &diffs);
        admin.ok(APP);
        admin.ok("ACL SETUSER offu off >pw +@all ~*");
        admin.ok("ACL SETUSER none on >pw -@all");
        admin.ok("SET a1 v");
        admin.ok("SET r1 v");
        admin.ok("SET w1 v");

        let mut u = Pair::new(&d, &ctx, &diffs);
        u.check_lines(
            "AUTH pw\n\
             AUTH app wrong\n\
             AUTH nobody pw\n\
             AUTH offu pw\n\
             AUTH\n\
             AUTH a b c\n\
             ACL WHOAMI\n\
             AUTH app pw\n\
             ACL WHOAMI\n\
             CLIENT ID\n\
             CONFIG GET maxmemory\n\
             PING\n\
             GET a1\n\
             GET r1\n\
             GET w1\n\
             GET other\n\
             SET a1 x\n\
             SET r1 x\n\
             SET w1 x\n\
             SET other x\n\
             DEL a1\n\
             MGET a1 r1\n\
             MGET a1 w1\n\
             MSET a1 x w1 y\n\
             MSET a1 x r1 y\n\
             COPY r1 w2\n\
             COPY r1 a3\n\
             COPY w1 a4\n\
             COPY a1 r2\n\
             SELECT 0\n\
             SELECT 1\n\
             PUBLISH news m\n\
             PUBLISH p1 m\n\
             PUBLISH other m\n\
             MULTI\n\
             SET a2 v\n\
             DEL a2\n\
             EXEC\n\
             MULTI\n\
             SET r2 v\n\
             GET a2\n\
             EXEC\n\
             MULTI\n\
             GET a1\n\
             SET a2 v\n\
             EXEC\n\
             GET a2\n\
             AUTH app wrong\n\
             ACL WHOAMI\n\
             GET a1",
        );
        admin.check_lines("GET a2\nGET r1\nGET w1\nGET w2\nGET a3");
        // A user's new rules apply at once to its authenticated clients.
        admin.ok("ACL SETUSER app +del %W~r*");
        u.check_lines("DEL a1\nSET r1 z\nDEL other");
        admin.ok("ACL SETUSER app -del");
        u.check_lines("DEL a1\nGET r1");

        // Channels: SUBSCRIBE and PSUBSCRIBE (whose pattern must be in the list as it is).
        let mut s = Pair::new(&d, &ctx, &diffs);
        s.check_lines(
            "AUTH app pw\n\
             SUBSCRIBE other\n\
             SUBSCRIBE news other\n\
             PSUBSCRIBE p1*\n\
             PSUBSCRIBE n*\n\
             PSUBSCRIBE *\n\
             SSUBSCRIBE news",
        );
        s.send("PSUBSCRIBE p*");
        s.check_reply("PSUBSCRIBE p*");
        s.send("SUBSCRIBE news p2");
        s.check_reply("SUBSCRIBE news p2 (first reply)");
        s.check_reply("SUBSCRIBE news p2 (second reply)");

        // HELLO 3 AUTH: errors compared; a success only as answered (its map names each
        // server and connection).
        let mut h = Pair::new(&d, &ctx, &diffs);
        h.check_lines(
            "HELLO 3 AUTH app wrong\n\
             HELLO 3 AUTH nobody pw\n\
             HELLO 3 AUTH offu pw\n\
             HELLO 3 AUTH app\n\
             ACL WHOAMI",
        );
        let (got, want) = h.both("HELLO 3 AUTH app pw");
        assert!(hello_answered(&want), "{}", show(&want));
        if !hello_answered(&got) {
            h.differ("HELLO 3 AUTH app pw", &show(&got), &show(&want));
        }
        h.check_lines("GET r1\nSET r1 x\nDEL a1\nPUBLISH other m\nGET a1\nPING");

        // A -@all user may AUTH and HELLO, and nothing else.
        let mut n = Pair::new(&d, &ctx, &diffs);
        n.check_lines("AUTH none pw\nPING\nGET a1\nACL WHOAMI\nAUTH none pw\nAUTH none bad");
        for line in ["HELLO 2 AUTH none pw", "HELLO 3", "HELLO 2"] {
            let (got, want) = n.both(line);
            assert!(hello_answered(&want), "{line}: {}", show(&want));
            if !hello_answered(&got) {
                n.differ(line, &show(&got), &show(&want));
            }
        }
        n.check_lines("PING\nQUIT");
    }
    diffs.assert_none();
}

// ---------------------------------------------------------------------------------------
// 4. ACL LOG.

/// ACL LOG after denied commands, keys and channels (at top level, in MULTI, in a script)
/// and failed AUTHs: its entries field by field, the grouping of repeated denials,
/// `ACL LOG <count>`, RESET; in RESP2 and RESP3.
#[test]
fn acl_log_matches_redis() {
    let diffs = Diffs::default();
    for threads in THREADS {
        let d = Differential::threads(threads);
        let ctx = threads_ctx(threads);
        let mut admin = Pair::new(&d, &ctx, &diffs);
        admin.ok(APP);
        admin.ok("ACL SETUSER scripter on >pw ~* +eval +get");
        admin.check("ACL LOG");

        let mut u = Pair::new(&d, &ctx, &diffs);
        u.check_lines(
            "AUTH app pw\n\
             SET r1 x\n\
             SET r1 x\n\
             SET r1 y\n\
             DEL a1\n\
             GET w1\n\
             PUBLISH other m\n\
             PSUBSCRIBE p1*\n\
             CLIENT ID\n\
             MULTI\n\
             DEL a1\n\
             DISCARD\n\
             AUTH app wrong\n\
             AUTH nobody x\n\
             AUTH nobody x\n\
             SET r1 x",
        );
        let mut sc = Pair::new(&d, &ctx, &diffs);
        sc.check_lines(
            "AUTH scripter pw\n\
             EVAL \"return redis.call('del','k')\" 0\n\
             EVAL \"return redis.pcall('set','k','v')\" 0\n\
             EVAL \"return redis.call('get','k')\" 0",
        );
        admin.check_lines(
            "ACL LOG\n\
             ACL LOG 1\n\
             ACL LOG 3\n\
             ACL LOG 0\n\
             # An empty array.\n\
             ACL LOG -1\n\
             ACL LOG 1 2\n\
             ACL LOG nope",
        );
        let mut r3 = Pair::new(&d, &ctx, &diffs);
        let _ = r3.both("HELLO 3");
        r3.check_lines("ACL LOG\nACL LOG 2");
        admin.check_lines("ACL LOG RESET\nACL LOG\nACL LOG 1");
        // After a RESET, the same denial starts a new entry.
        u.check_lines("SET r1 x\nSET r1 x\nAUTH app wrong");
        admin.check_lines("ACL LOG\nACL LOG reset\nACL LOG");
        // Several selectors refusing: the greater reason, then the selector that got
        // furthest, is logged (Redis's tests, acl-v2.tcl).
        admin.ok("ACL SETUSER sel on nopass +mget ~key (+mget ~key ~otherkey)");
        let mut sel = Pair::new(&d, &ctx, &diffs);
        sel.check_lines(
            "AUTH sel x\n\
             GET key\n\
             MGET otherkey someotherkey\n\
             MGET key otherkey someotherkey\n\
             MGET otherkey key",
        );
        admin.check_lines("ACL LOG 4\nACL LOG RESET");
    }
    diffs.assert_none();
}

// ---------------------------------------------------------------------------------------
// 5. ACL DRYRUN.

/// ACL DRYRUN: allowed, a denied command, subcommand, key, channel; an unknown user, an
/// unknown command, a wrong arity; and with selectors.
#[test]
fn acl_dryrun_matches_redis() {
    let diffs = Diffs::default();
    for threads in THREADS {
        let d = Differential::threads(threads);
        let mut p = Pair::new(&d, &threads_ctx(threads), &diffs);
        p.ok(APP);
        p.ok("ACL SETUSER sel on >pw ~a* +get \"(~x* +set)\" \"(%R~y* +get +set)\"");
        p.ok("ACL SETUSER offu off +@all ~* &*");
        p.check_lines(
            "ACL DRYRUN app get a1\n\
             ACL DRYRUN app get r1\n\
             ACL DRYRUN app set r1 x\n\
             ACL DRYRUN app set w1 x\n\
             ACL DRYRUN app get w1\n\
             ACL DRYRUN app set a1 x\n\
             ACL DRYRUN app del a1\n\
             ACL DRYRUN app client id\n\
             ACL DRYRUN app client info\n\
             ACL DRYRUN app publish news m\n\
             ACL DRYRUN app publish other m\n\
             ACL DRYRUN app subscribe news other\n\
             ACL DRYRUN app psubscribe p*\n\
             ACL DRYRUN app psubscribe p1*\n\
             ACL DRYRUN app ping\n\
             ACL DRYRUN app select 0\n\
             ACL DRYRUN app select 1\n\
             ACL DRYRUN app mget a1 r1 w1\n\
             ACL DRYRUN app mset a1 x w1 y r1 z\n\
             ACL DRYRUN app copy r1 w1\n\
             ACL DRYRUN app copy w1 r1\n\
             # OK: AUTH is allowed to every user.\n\
             ACL DRYRUN app auth x\n\
             ACL DRYRUN offu get k\n\
             ACL DRYRUN nobody get a\n\
             ACL DRYRUN app nocmd\n\
             ACL DRYRUN app get\n\
             ACL DRYRUN app get a b\n\
             ACL DRYRUN app\n\
             ACL DRYRUN sel get a1\n\
             ACL DRYRUN sel set a1 v\n\
             ACL DRYRUN sel set x1 v\n\
             ACL DRYRUN sel get x1\n\
             ACL DRYRUN sel get y1\n\
             ACL DRYRUN sel set y1 v\n\
             ACL DRYRUN sel del a1\n\
             ACL DRYRUN sel mget a1 x1",
        );
    }
    diffs.assert_none();
}

// ---------------------------------------------------------------------------------------
// 6. CLIENT LIST, CLIENT INFO, CLIENT KILL USER.

/// The `user=` fields of a CLIENT LIST or CLIENT INFO reply, sorted.
fn users_of(reply: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(reply);
    let mut users: Vec<String> = text
        .split(['\n', ' '])
        .filter_map(|w| w.strip_prefix("user="))
        .map(|u| u.trim_end_matches('\r').to_string())
        .collect();
    users.sort();
    users
}

/// Whether the server closed `raw` (reading until it does, for up to `wait`).
fn closed(raw: &mut Raw, wait: Duration) -> bool {
    raw.read_to_close(wait).1
}

/// `user=<name>` in CLIENT LIST and CLIENT INFO; CLIENT KILL USER kills that user's
/// clients (and answers how many), and refuses an unknown user.
#[test]
fn client_list_info_and_kill_user_match_redis() {
    let diffs = Diffs::default();
    for threads in THREADS {
        let d = Differential::threads(threads);
        let ctx = threads_ctx(threads);
        let mut admin = Pair::new(&d, &ctx, &diffs);
        admin.ok(APP);
        let mut a1 = Pair::new(&d, &ctx, &diffs);
        let mut a2 = Pair::new(&d, &ctx, &diffs);
        a1.check("AUTH app pw");
        let (got, want) = a2.both("HELLO 2 AUTH app pw");
        assert!(hello_answered(&want), "{ctx}: {}", show(&want));
        if !hello_answered(&got) {
            a2.differ("HELLO 2 AUTH app pw", &show(&got), &show(&want));
        }
        let (got, want) = a1.both("CLIENT INFO");
        if users_of(&got) != users_of(&want) {
            a1.differ(
                "CLIENT INFO (its user= field)",
                &format!("{:?}", users_of(&got)),
                &format!("{:?}", users_of(&want)),
            );
        }
        let (got, want) = admin.both("CLIENT LIST");
        // Two app clients, the admin and the Differential's own connection.
        assert_eq!(
            users_of(&want),
            ["app", "app", "default", "default"],
            "{ctx}"
        );
        if users_of(&got) != users_of(&want) {
            admin.differ(
                "CLIENT LIST (its user= fields)",
                &format!("{:?}", users_of(&got)),
                &format!("{:?}", users_of(&want)),
            );
        }
        admin.check_lines(
            "CLIENT KILL USER nosuch\n\
             CLIENT KILL USER app\n\
             CLIENT KILL USER app\n\
             CLIENT KILL USER app SKIPME no\n\
             CLIENT KILL USER",
        );
        for (i, c) in [&mut a1, &mut a2].into_iter().enumerate() {
            assert!(
                closed(&mut c.r, Duration::from_secs(2)),
                "{ctx}: redis, client {i}"
            );
            if !closed(&mut c.g, Duration::from_secs(2)) {
                diffs.push(format!(
                    "[{ctx}] after CLIENT KILL USER app, goblin-server did not close app's \
                     client {i}"
                ));
            }
        }
        let (got, want) = admin.both("CLIENT LIST");
        if users_of(&got) != users_of(&want) {
            admin.differ(
                "CLIENT LIST after CLIENT KILL USER app (its user= fields)",
                &format!("{:?}", users_of(&got)),
                &format!("{:?}", users_of(&want)),
            );
        }
    }
    diffs.assert_none();
}

// ---------------------------------------------------------------------------------------
// 7. DELUSER (and off) of a connected user.

/// What became of a connection whose user was deleted, after it sent PING: `Ok` when the
/// command did not succeed and the connection is closed (at once, or after an error
/// reply), else what it answered.
fn refused_and_closed(raw: &mut Raw) -> Result<(), String> {
    if raw.try_send(&goblin_tests::encode(&[b"PING"])).is_err() {
        return Ok(());
    }
    raw.stream()
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("set a read timeout");
    match raw.try_reply() {
        Err(_) => {
            if closed(raw, Duration::from_secs(2)) {
                Ok(())
            } else {
                Err("no reply, and the connection stays open".to_string())
            }
        }
        Ok(reply) if reply.starts_with(b"-") => {
            if closed(raw, Duration::from_secs(2)) {
                Ok(())
            } else {
                Err(format!(
                    "answered {} and kept the connection open",
                    show(&reply)
                ))
            }
        }
        Ok(reply) => Err(format!("answered {}", show(&reply))),
    }
}

/// ACL DELUSER of a user with a connected client: the client's next command does not
/// succeed and its connection is closed. A user turned `off` keeps its authenticated
/// connections, as in redis-server.
#[test]
fn deleting_a_connected_user_disconnects_it() {
    let diffs = Diffs::default();
    for threads in THREADS {
        let d = Differential::threads(threads);
        let ctx = threads_ctx(threads);
        let mut admin = Pair::new(&d, &ctx, &diffs);
        admin.ok(APP);
        admin.ok("ACL SETUSER gone on >pw +@all ~*");
        let mut app = Pair::new(&d, &ctx, &diffs);
        let mut gone = Pair::new(&d, &ctx, &diffs);
        app.check("AUTH app pw");
        gone.check("AUTH gone pw");
        gone.check("PING");
        admin.check("ACL DELUSER gone");
        refused_and_closed(&mut gone.r)
            .unwrap_or_else(|e| panic!("[{ctx}] redis-server: the deleted user's client: {e}"));
        if let Err(e) = refused_and_closed(&mut gone.g) {
            diffs.push(format!(
                "[{ctx}] after ACL DELUSER gone, its client's PING: goblin-server {e}"
            ));
        }
        // Off: the client authenticated before stays, as redis-server keeps it.
        admin.check("ACL SETUSER app off");
        app.check_lines("PING\nACL WHOAMI\nGET a1");
        let mut again = Pair::new(&d, &ctx, &diffs);
        again.check_lines("AUTH app pw\nACL WHOAMI");
        admin.check("CLIENT KILL USER gone");
    }
    diffs.assert_none();
}

// ---------------------------------------------------------------------------------------
// 8. The redis crate.

/// Connects with the `redis` crate to `port` as `url_auth` (`user:pass@`), RESP2 or RESP3.
fn crate_connection(
    url_auth: &str,
    port: u16,
    resp3: bool,
) -> redis::RedisResult<redis::Connection> {
    let query = if resp3 { "?protocol=resp3" } else { "" };
    redis::Client::open(format!("redis://{url_auth}127.0.0.1:{port}/{query}"))?.get_connection()
}

/// The `redis` crate connects as a user set with ACL SETUSER (the URL's `user:pass@`),
/// runs what the user may, and gets NOPERM for the rest; a wrong password does not
/// connect. The same on redis-server, which shows the test's expectations hold there.
#[test]
fn the_redis_crate_connects_as_a_user() {
    let d = Differential::new();
    let diffs = Diffs::default();
    let mut admin = Pair::new(&d, "redis crate", &diffs);
    admin.ok("ACL SETUSER crate on >s3cret ~c* +get +set +ping +acl|whoami");
    for (server, name) in [(&d.goblin, "goblin-server"), (&d.redis, "redis-server")] {
        for resp3 in [false, true] {
            let ctx = format!("{name}, resp3 {resp3}");
            let mut con = crate_connection("crate:s3cret@", server.port, resp3)
                .unwrap_or_else(|e| panic!("{ctx}: connect as crate: {e}"));
            let who: String = redis::cmd("ACL")
                .arg("WHOAMI")
                .query(&mut con)
                .unwrap_or_else(|e| panic!("{ctx}: ACL WHOAMI: {e}"));
            assert_eq!(who, "crate", "{ctx}");
            let () = redis::cmd("SET")
                .arg("c1")
                .arg("v")
                .query(&mut con)
                .unwrap_or_else(|e| panic!("{ctx}: SET c1: {e}"));
            let got: String = redis::cmd("GET")
                .arg("c1")
                .query(&mut con)
                .unwrap_or_else(|e| panic!("{ctx}: GET c1: {e}"));
            assert_eq!(got, "v", "{ctx}");
            for (command, key) in [("DEL", "c1"), ("GET", "other")] {
                let e = redis::cmd(command)
                    .arg(key)
                    .query::<redis::Value>(&mut con)
                    .expect_err(&format!("{ctx}: {command} {key} is forbidden"));
                assert_eq!(e.code(), Some("NOPERM"), "{ctx}: {command} {key}: {e}");
            }
            let pong: String = redis::cmd("PING")
                .query(&mut con)
                .unwrap_or_else(|e| panic!("{ctx}: PING after NOPERM: {e}"));
            assert_eq!(pong, "PONG", "{ctx}");
            assert!(
                crate_connection("crate:wrong@", server.port, resp3).is_err(),
                "{ctx}: a wrong password connects"
            );
            assert!(
                crate_connection("nobody:s3cret@", server.port, resp3).is_err(),
                "{ctx}: an unknown user connects"
            );
        }
    }
    diffs.assert_none();
}

// ---------------------------------------------------------------------------------------
// 9. The default user's password and requirepass.

/// ACL SETUSER default >pw, and CONFIG SET requirepass: new connections need AUTH, which
/// takes the password alone or with `default`; GETUSER default shows the password's
/// hash; clearing it lets connections in again.
#[test]
fn the_default_users_password_and_requirepass_match_redis() {
    let diffs = Diffs::default();
    for threads in THREADS {
        let d = Differential::threads(threads);
        let ctx = threads_ctx(threads);
        let mut admin = Pair::new(&d, &ctx, &diffs);
        admin.check_lines(
            "ACL SETUSER default >pw\n\
             ACL GETUSER default\n\
             ACL LIST\n\
             CONFIG GET requirepass",
        );
        let mut c = Pair::new(&d, &ctx, &diffs);
        c.check_lines(
            "PING\n\
             GET k\n\
             ACL WHOAMI\n\
             AUTH wrong\n\
             AUTH default wrong\n\
             AUTH pw\n\
             PING\n\
             ACL WHOAMI\n\
             AUTH default pw\n\
             PING",
        );
        admin.check_lines(
            "ACL SETUSER default nopass\n\
             ACL GETUSER default\n\
             CONFIG SET requirepass secret\n\
             ACL GETUSER default\n\
             ACL LIST\n\
             CONFIG GET requirepass",
        );
        let mut c = Pair::new(&d, &ctx, &diffs);
        c.check_lines(
            "PING\n\
             HELLO 2\n\
             AUTH pw\n\
             AUTH secret\n\
             PING",
        );
        // A failed HELLO … AUTH is logged with the object `HELLO` (so not grouped with
        // AUTH's entries): see the ACL LOG below.
        let mut h = Pair::new(&d, &ctx, &diffs);
        h.check_lines("HELLO 3 AUTH default wrong\nPING");
        let (got, want) = h.both("HELLO 3 AUTH default secret");
        assert!(hello_answered(&want), "{}", show(&want));
        if !hello_answered(&got) {
            h.differ("HELLO 3 AUTH default secret", &show(&got), &show(&want));
        }
        h.check("PING");
        admin.check_lines(
            "ACL SETUSER default >second\n\
             ACL GETUSER default\n\
             CONFIG SET requirepass third\n\
             ACL GETUSER default\n\
             CONFIG SET requirepass \"\"\n\
             ACL GETUSER default\n\
             CONFIG GET requirepass\n\
             ACL LIST",
        );
        let mut c = Pair::new(&d, &ctx, &diffs);
        c.check_lines("PING\nACL WHOAMI\nAUTH anything");
        admin.check_lines("ACL LOG");
    }
    diffs.assert_none();
}

/// `acl-pubsub-default` (the channels of new users, of `reset` and of new selectors) and
/// `acllog-max-len` (how many entries ACL LOG keeps), through CONFIG GET and SET.
#[test]
fn acl_configuration_options_match_redis() {
    let diffs = Diffs::default();
    for threads in THREADS {
        let d = Differential::threads(threads);
        let ctx = threads_ctx(threads);
        let mut admin = Pair::new(&d, &ctx, &diffs);
        admin.check_lines(
            "CONFIG GET acl-pubsub-default\n\
             CONFIG GET acllog-max-len\n\
             CONFIG SET acl-pubsub-default nope\n\
             CONFIG SET acllog-max-len -1\n\
             CONFIG SET acl-pubsub-default allchannels\n\
             ACL SETUSER ps1 on\n\
             ACL SETUSER ps2 on (+get)\n\
             ACL SETUSER ps3 on &x\n\
             ACL SETUSER ps3 on resetchannels &x reset\n\
             ACL LIST\n\
             CONFIG SET acl-pubsub-default resetchannels\n\
             ACL SETUSER ps4 on\n\
             ACL GETUSER ps4\n\
             CONFIG SET acllog-max-len 1\n\
             ACL LOG RESET\n\
             AUTH nobody a\n\
             AUTH someone b\n\
             ACL LOG\n\
             CONFIG GET acllog-max-len",
        );
    }
    diffs.assert_none();
}

// ---------------------------------------------------------------------------------------
// 11. Permissions that change under a client: EXEC, subscriptions; SORT's BY and GET.

/// Rules changed between MULTI and EXEC: EXEC checks each queued command again and
/// answers NOPERM in its place (command, key, channel), logged with the `multi` context.
/// SORT's BY (with a pattern) and GET need every key readable, at top level, inside
/// MULTI and from a script. A subscriber whose channels the new rules no longer allow is
/// disconnected; one whose channels are still allowed stays. ACL SETUSER and DELUSER
/// work inside MULTI.
#[test]
fn changed_permissions_and_sort_patterns_match_redis() {
    let diffs = Diffs::default();
    for threads in THREADS {
        let d = Differential::threads(threads);
        let ctx = threads_ctx(threads);
        let mut admin = Pair::new(&d, &ctx, &diffs);
        admin.ok("ACL SETUSER u on >pw +@all ~* &*");
        admin.ok("RPUSH k 3 1 2");
        admin.ok("MSET w_1 9 w_2 8 w_3 7");
        admin.ok("ACL LOG RESET");

        // EXEC after the rules changed.
        let mut u = Pair::new(&d, &ctx, &diffs);
        u.check_lines(
            "AUTH u pw\n\
             MULTI\n\
             SET k2 v\n\
             GET k2\n\
             LRANGE k 0 -1\n\
             PUBLISH ch m\n\
             SELECT 1\n\
             SORT k BY w_*\n\
             SORT k",
        );
        admin.ok("ACL SETUSER u -set -select resetchannels resetkeys %R~k");
        u.check_lines("EXEC\nACL WHOAMI");
        admin.check_lines("ACL LOG 3");

        // SORT's BY and GET: denied without every key readable.
        u.check_lines(
            "SORT k BY w_*\n\
             SORT k BY nosort\n\
             SORT k GET #\n\
             SORT k LIMIT 0 1 GET w_*\n\
             SORT k NOSUCH BY w_*\n\
             SORT_RO k BY w_*\n\
             SORT k ALPHA\n\
             EVAL \"return redis.call('sort', KEYS[1], 'by', 'w_*')\" 1 k\n\
             MULTI\n\
             SORT k GET #\n\
             EXEC",
        );
        admin.ok("ACL SETUSER u %R~*");
        u.check_lines("SORT k BY w_*\nSORT k BY w_* GET #");
        admin.ok("ACL SETUSER u allchannels");

        // Subscribers.
        let mut gone = Pair::new(&d, &ctx, &diffs);
        let mut kept = Pair::new(&d, &ctx, &diffs);
        for (p, channel) in [(&mut gone, "news.1"), (&mut kept, "keep.1")] {
            p.check("AUTH u pw");
            p.send(&format!("SUBSCRIBE {channel}"));
            p.check_reply("SUBSCRIBE");
        }
        admin.ok("ACL SETUSER u resetchannels &keep.*");
        assert!(
            closed(&mut gone.r, Duration::from_secs(2)),
            "{ctx}: redis-server kept the subscriber"
        );
        if !closed(&mut gone.g, Duration::from_secs(2)) {
            diffs.push(format!(
                "[{ctx}] goblin-server kept a subscriber whose channel its user lost"
            ));
        }
        kept.check("PING");
        admin.check("PUBLISH keep.1 hello");
        kept.check_reply("the message");

        // redis.acl_check_cmd: the permissions of the user who runs the script (keys
        // and channels too), on its shard and across shards; the default user may run
        // everything that exists.
        admin.ok("ACL SETUSER chk on >pw +@all -set -config|set ~a* &ch*");
        let mut chk = Pair::new(&d, &ctx, &diffs);
        chk.check("AUTH chk pw");
        for p in [&mut chk, &mut admin] {
            p.check_lines(
                "EVAL \"return {redis.acl_check_cmd('get','a1'), redis.acl_check_cmd('get','b1')}\" 0\n\
                 EVAL \"return redis.acl_check_cmd('set','a1','v') == false\" 0\n\
                 EVAL \"return redis.acl_check_cmd('GET')\" 0\n\
                 EVAL \"return {redis.acl_check_cmd('config','get','x'), redis.acl_check_cmd('config','set','x','y')}\" 0\n\
                 EVAL \"return {redis.acl_check_cmd('publish','ch1','m'), redis.acl_check_cmd('publish','x','m')}\" 0\n\
                 EVAL \"return redis.acl_check_cmd('config','nosuch')\" 0\n\
                 EVAL \"return redis.acl_check_cmd('nosuch')\" 0\n\
                 EVAL \"return redis.acl_check_cmd()\" 0\n\
                 EVAL \"return redis.acl_check_cmd({})\" 0\n\
                 EVAL \"return pcall(redis.acl_check_cmd, 'nosuch')\" 0\n\
                 EVAL \"return {redis.acl_check_cmd('mget',KEYS[1],KEYS[2]), redis.call('get',KEYS[1])}\" 2 a{1} a{2}\n\
                 EVAL \"redis.call('get',KEYS[2]); return redis.acl_check_cmd('rename',KEYS[1],'b')\" 2 a{1} a{3}\n\
                 ACL WHOAMI"
            );
        }

        // ACL SETUSER and DELUSER inside MULTI.
        admin.check_lines(
            "MULTI
             ACL SETUSER temp on >p +@all
             ACL USERS
             ACL DELUSER temp
             ACL USERS
             EXEC",
        );
    }
    diffs.assert_none();
}

/// As redis-server, the server works in `dir`: a relative `aclfile` is read there (Redis's
/// own tests start servers so), whatever directory it was started from; a `dir` that
/// does not exist stops the start.
#[test]
fn a_relative_aclfile_is_read_in_dir() {
    let dir = goblin_tests::scratch_dir("acl-dir");
    std::fs::write(
        dir.join("users.acl"),
        "user alice on (+get ~rw*)\nuser bob on (+set %W~w*) (+get %R~r*)\n",
    )
    .unwrap();
    let dir_arg = dir.to_str().unwrap();
    let server = goblin_tests::Server::goblin_with(&["--dir", dir_arg, "--aclfile", "users.acl"]);
    let mut raw = server.raw();
    assert_eq!(
        show(&raw.cmd_str("ACL USERS")),
        show(b"*3\r\n$5\r\nalice\r\n$3\r\nbob\r\n$7\r\ndefault\r\n")
    );
    let out = std::process::Command::new(goblin_tests::goblin_binary())
        .args([
            "--bind",
            "127.0.0.1",
            "--port",
            "0",
            "--dir",
            "/nonexistent/goblin-dir",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Can't chdir to '/nonexistent/goblin-dir'"),
        "{err}"
    );
}

/// ACL LOAD as redis-server does it: a file with a duplicate user is refused whole, with
/// its words; a file that loads frees every user but `default`, so the clients of the
/// others are closed at once (a subscriber too; the one that sent ACL LOAD after its
/// reply), whether or not the file still has their user.
#[test]
fn acl_load_closes_the_clients_of_every_user_but_default() {
    let diffs = Diffs::default();
    let dir = goblin_tests::scratch_dir("acl-load");
    let mut servers = Vec::new();
    for (name, server) in [("redis", 0), ("goblin", 1)] {
        let file = dir.join(format!("{name}.acl"));
        std::fs::write(
            &file,
            "user alice on >a +@all ~* &*\nuser bob on >b +@all ~* &*\n",
        )
        .unwrap();
        let path = file.to_str().unwrap().to_string();
        let s = match server {
            0 => goblin_tests::Server::redis_with(&["--aclfile", &path]),
            _ => goblin_tests::Server::goblin_with(&["--aclfile", &path, "--threads", "2"]),
        };
        servers.push((name, s, file));
    }
    // Each step on each server: the replies and which connections the server closed.
    let mut runs: Vec<Vec<String>> = Vec::new();
    for (_, server, file) in &servers {
        let mut seen = Vec::new();
        let conns = ["default", "alice", "bob", "subscriber"].map(|who| {
            let mut raw = server.raw();
            match who {
                "default" => {}
                "subscriber" => {
                    raw.cmd_str("AUTH alice a");
                    raw.cmd_str("SUBSCRIBE news");
                }
                _ => {
                    raw.cmd_str(&format!("AUTH {who} {}", &who[..1]));
                }
            }
            (who, raw)
        });
        let mut conns = conns;
        std::fs::write(
            file,
            "user alice on >a +@all\nuser carol on\nuser alice off\n",
        )
        .unwrap();
        seen.push(show(&conns[1].1.cmd_str("ACL LOAD")));
        seen.push(show(&conns[1].1.cmd_str("ACL USERS")));
        std::fs::write(file, "user alice on >a +@all ~* &*\nuser carol on >c\n").unwrap();
        seen.push(show(&conns[1].1.cmd_str("ACL LOAD")));
        for (who, raw) in conns.iter_mut() {
            let gone = closed(raw, Duration::from_millis(300));
            seen.push(format!("{who} closed: {gone}"));
        }
        let mut again = server.raw();
        seen.push(show(&again.cmd_str("ACL USERS")));
        seen.push(show(&again.cmd_str("AUTH alice a")));
        runs.push(seen);
    }
    for (i, (want, got)) in runs[0].iter().zip(&runs[1]).enumerate() {
        if want != got {
            diffs.push(format!("step {i}: goblin {got}, redis {want}"));
        }
    }
    diffs.assert_none();
}

/// A `user default …` line in the configuration file starts the default user from
/// `reset` (redis-server's `ACLLoadConfiguredUsers`): without `&…` in its rules it has no
/// channels (`acl-pubsub-default resetchannels`), so SUBSCRIBE is refused.
#[test]
fn a_default_user_declared_in_the_configuration_file_starts_from_reset() {
    let dir = goblin_tests::scratch_dir("acl-default-conf");
    let lines = [
        "user default on nopass ~* +@all",
        "user default on nopass ~* &* +@all",
    ];
    for line in lines {
        let answers = |port: u16| {
            let mut raw = Raw::connect(port);
            let list = show(&raw.cmd_str("ACL LIST"));
            let subscribe = show(&raw.cmd_str("SUBSCRIBE foo"));
            (list, subscribe)
        };
        let goblin_conf = dir.join("goblin.conf");
        std::fs::write(&goblin_conf, format!("{line}\n")).unwrap();
        let goblin = goblin_tests::Server::goblin_with_file(&goblin_conf, &[]);
        let got = answers(goblin.port);
        let port = goblin_tests::free_port();
        let redis_conf = dir.join("redis.conf");
        std::fs::write(
            &redis_conf,
            format!("{line}\nport {port}\nbind 127.0.0.1\nsave \"\"\n"),
        )
        .unwrap();
        let mut redis = std::process::Command::new("redis-server")
            .arg(&redis_conf)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server");
        let started = std::time::Instant::now();
        while Raw::try_connect(port).is_err() && started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let want = answers(port);
        let _ = redis.kill();
        let _ = redis.wait();
        assert_eq!(got, want, "{line}");
    }
}

/// A user declared twice in the configuration stops the start, before the server
/// listens, as redis-server's `ACLAppendUserForLoading` refuses it.
#[test]
fn a_user_declared_twice_in_the_configuration_stops_the_start() {
    for name in ["foo", "default"] {
        let args = [
            "--bind",
            "127.0.0.1",
            "--port",
            "0",
            "--user",
            name,
            "--user",
            name,
        ];
        // (One that started anyway is stopped after a while, and fails the test.)
        let mut child = std::process::Command::new(goblin_tests::goblin_binary())
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("goblin-server");
        let started = std::time::Instant::now();
        while child.try_wait().ok().flatten().is_none()
            && started.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let goblin = child.wait_with_output().expect("goblin-server's output");
        let redis = std::process::Command::new("redis-server")
            .args(args)
            .output()
            .expect("redis-server");
        let said = |o: &std::process::Output| {
            let text = [o.stdout.as_slice(), o.stderr.as_slice()].concat();
            String::from_utf8_lossy(&text).contains(&format!(
                "Error in user declaration '{name}': Duplicate user found. A user can only \
                 be defined once in config files"
            ))
        };
        assert!(
            !redis.status.success() && said(&redis),
            "redis-server: {redis:?}"
        );
        assert!(
            !goblin.status.success() && said(&goblin),
            "goblin-server: {goblin:?}"
        );
    }
}
