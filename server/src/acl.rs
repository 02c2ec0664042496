//! Users and what they may do (ACL), as redis-server 7.0 has them: passwords, the
//! commands (by category, command, subcommand or first argument), the keys (by pattern,
//! for reading, writing or both) and the Pub/Sub channels each user may use, with
//! selectors — further sets of the same permissions, any of which may allow a command.
//!
//! [`Acl`] is shared by every thread: the users by name, behind a lock that only ACL
//! SETUSER, DELUSER and `requirepass` take for writing, with a version number that
//! changes with them. A client holds its user (`Arc<User>`) and the version it was
//! taken at; before each command it compares that version with the current one (one
//! relaxed atomic load) and takes its user again when they differ — a deleted user's
//! clients are closed then. A user who may do everything (`User::unrestricted`, the
//! default user as it starts) is checked by nothing else.
//!
//! What a check looks at is Redis's `ACLCheckAllUserCommandPerm`: the command (or
//! subcommand) bit, then each key with the access its key spec declares, then the
//! channels of PUBLISH, SPUBLISH and the subscriptions; selectors are tried in turn and
//! the most specific refusal (channel over key over command) is reported. Refusals go to
//! the ACL LOG.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::sha1::hex;
use crate::table::handler::Args;
use crate::table::keys::KeyFlags;
use crate::table::{CommandSpec, CommandTable};
use crate::util::glob_match;

/// The ACL categories, in Redis's order (ACL CAT, and the order rules are described in).
pub const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// Refusals alike within this many milliseconds are counted in one log entry.
const LOG_GROUPING_MS: u64 = 60_000;

/// A key pattern and the access it grants.
#[derive(Clone, Debug, PartialEq, Eq)]
struct KeyPattern {
    pattern: Vec<u8>,
    read: bool,
    write: bool,
}

/// One set of permissions: the user's root one, or a selector.
#[derive(Clone, Debug)]
pub struct Selector {
    /// One bit per command of the table (subcommands included), by id.
    allowed: Vec<u64>,
    /// `+@all`: commands added later are allowed too (what decides whether the rules are
    /// described from `+@all` or from `-@all`).
    future: bool,
    /// First arguments allowed of a command otherwise refused (`+select|0`), by id.
    first_args: BTreeMap<usize, Vec<Vec<u8>>>,
    all_keys: bool,
    keys: Vec<KeyPattern>,
    all_channels: bool,
    channels: Vec<Vec<u8>>,
}

/// A user.
#[derive(Clone, Debug)]
pub struct User {
    /// Its name.
    pub name: Vec<u8>,
    enabled: bool,
    nopass: bool,
    /// `sanitize-payload` (`Some(true)`) or `skip-sanitize-payload` (`Some(false)`).
    sanitize: Option<bool>,
    /// SHA-256 digests of its passwords, in hex, in the order they were added.
    passwords: Vec<String>,
    root: Selector,
    selectors: Vec<Selector>,
    /// May run every command on every key and channel: nothing to check.
    pub unrestricted: bool,
}

/// Why a command was refused; ordered as Redis ranks them (the highest of the
/// selectors' is reported).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// The command.
    Command,
    /// The key at this argument.
    Key(usize),
    /// The channel at this argument.
    Channel(usize),
}

impl Denied {
    /// Which of several selectors' refusals is reported (`ACLCheckAllUserCommandPerm`):
    /// the greater reason, then the later argument (the selector that got furthest).
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (1, 0),
            Denied::Key(i) => (2, i),
            Denied::Channel(i) => (4, i),
        }
    }

    /// The ACL LOG's `reason` and `object` of this refusal of `args` of `spec`.
    pub fn logged(self, spec: &CommandSpec, args: &Args<'_>) -> (&'static str, Vec<u8>) {
        match self {
            Denied::Command => ("command", spec.name.as_bytes().to_vec()),
            Denied::Key(i) => ("key", args.get(i).to_vec()),
            Denied::Channel(i) => ("channel", args.get(i).to_vec()),
        }
    }
}

/// The `NOPERM` error for a refusal of command `spec`.
pub fn noperm(denied: Denied, spec: &CommandSpec) -> Vec<u8> {
    match denied {
        Denied::Command => format!(
            "NOPERM this user has no permissions to run the '{}' command",
            spec.name
        )
        .into_bytes(),
        Denied::Key(_) => {
            b"NOPERM this user has no permissions to access one of the keys used as arguments"
                .to_vec()
        }
        Denied::Channel(_) => b"NOPERM this user has no permissions to access one of the \
              channels used as arguments"
            .to_vec(),
    }
}

/// What SORT (and SORT_RO) answers when `user` may not read every key and its
/// arguments use BY with a pattern or GET (which name keys anywhere), as redis-server's
/// `sortCommandGeneric` finds them while reading its options; None when it may, or
/// when the options have a syntax error first (SORT answers that).
pub fn sort_refusal(user: &User, spec: &CommandSpec, args: &Args<'_>) -> Option<&'static [u8]> {
    if user.unrestricted || !matches!(spec.name, "sort" | "sort_ro") {
        return None;
    }
    let mut i = 2;
    let refusal: &'static [u8] = loop {
        if i >= args.len() {
            return None;
        }
        let (a, left) = (args.get(i), args.len() - i - 1);
        let is = |w: &[u8]| a.eq_ignore_ascii_case(w);
        if is(b"asc") || is(b"desc") || is(b"alpha") {
            i += 1;
        } else if is(b"limit") && left >= 2 {
            i += 3;
        } else if is(b"store") && left >= 1 && spec.name == "sort" {
            i += 2;
        } else if is(b"by") && left >= 1 {
            if args.get(i + 1).contains(&b'*') {
                break b"ERR BY option of SORT denied due to insufficient ACL permissions.";
            }
            i += 2;
        } else if is(b"get") && left >= 1 {
            break b"ERR GET option of SORT denied due to insufficient ACL permissions.";
        } else {
            return None;
        }
    };
    (!user.reads_every_key(spec, args)).then_some(refusal)
}

/// What EXEC answers for a queued command its user may no longer run (the ACL rules
/// changed since it was queued).
pub fn exec_noperm(denied: Denied) -> Vec<u8> {
    let reason = match denied {
        Denied::Command => "no permission to execute the command or subcommand",
        Denied::Key(_) => "no permission to touch the specified keys",
        Denied::Channel(_) => "no permission to access one of the channels used as arguments",
    };
    format!(
        "NOPERM ACLs rules changed between the moment the transaction was accumulated and \
         the EXEC call. This command is no longer allowed for the following reason: {reason}"
    )
    .into_bytes()
}

impl Selector {
    fn new(commands: usize) -> Selector {
        Selector {
            allowed: vec![0; commands.div_ceil(64)],
            future: false,
            first_args: BTreeMap::new(),
            all_keys: false,
            keys: Vec::new(),
            all_channels: false,
            channels: Vec::new(),
        }
    }

    /// A selector that allows no command, no key, and every channel or none.
    fn none(table: &CommandTable, all_channels: bool) -> Selector {
        let mut s = Selector::new(table.all().len());
        s.all_commands(table, false);
        s.all_channels = all_channels;
        s
    }

    fn bit(&self, id: usize) -> bool {
        self.allowed
            .get(id / 64)
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if let Some(w) = self.allowed.get_mut(id / 64) {
            if on {
                *w |= 1 << (id % 64);
            } else {
                *w &= !(1 << (id % 64));
            }
        }
    }

    /// Allows or refuses a command, and its subcommands with it (`ACLChangeSelectorPerm`).
    fn change(&mut self, table: &CommandTable, spec: &CommandSpec, on: bool) {
        self.set_bit(spec.id, on);
        self.first_args.remove(&spec.id);
        for sub in table.subcommands(spec) {
            self.set_bit(sub.id, on);
            self.first_args.remove(&sub.id);
        }
    }

    fn all_commands(&mut self, table: &CommandTable, on: bool) {
        for w in &mut self.allowed {
            *w = if on { u64::MAX } else { 0 };
        }
        // Bits past the table's end stay clear, so that two selectors compare alike.
        let n = table.all().len();
        if let Some(last) = self.allowed.last_mut()
            && !n.is_multiple_of(64)
        {
            *last &= (1u64 << (n % 64)) - 1;
        }
        self.first_args.clear();
        self.future = on;
    }

    fn category(&mut self, table: &CommandTable, name: &[u8], on: bool) {
        for spec in table.all() {
            if spec.in_acl_category(name) {
                self.set_bit(spec.id, on);
                self.first_args.remove(&spec.id);
            }
        }
    }

    /// Applies one rule of the selector kind (commands, keys, channels); `Err` with
    /// Redis's reason.
    fn apply(&mut self, table: &CommandTable, rule: &[u8]) -> Result<(), &'static str> {
        let lower = rule.to_ascii_lowercase();
        match lower.as_slice() {
            b"allkeys" | b"~*" => {
                self.all_keys = true;
                self.keys.clear();
                return Ok(());
            }
            b"resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
                return Ok(());
            }
            b"allchannels" | b"&*" => {
                self.all_channels = true;
                self.channels.clear();
                return Ok(());
            }
            b"resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
                return Ok(());
            }
            b"allcommands" | b"+@all" => {
                self.all_commands(table, true);
                return Ok(());
            }
            b"nocommands" | b"-@all" => {
                self.all_commands(table, false);
                return Ok(());
            }
            _ => {}
        }
        match rule.first() {
            Some(b'~' | b'%') => self.key_rule(rule),
            Some(b'&') => {
                if self.all_channels {
                    return Err(
                        "Adding a pattern after the * pattern (or the 'allchannels' \
                                flag) is not valid and does not have any effect. Try \
                                'resetchannels' to start with an empty list of channels",
                    );
                }
                let pattern = &rule[1..];
                if pattern.iter().any(u8::is_ascii_whitespace) {
                    return Err("Syntax error");
                }
                if !self.channels.iter().any(|c| c == pattern) {
                    self.channels.push(pattern.to_vec());
                }
                Ok(())
            }
            Some(&sign @ (b'+' | b'-')) => self.command_rule(table, &lower[1..], sign == b'+'),
            _ => Err("Syntax error"),
        }
    }

    fn key_rule(&mut self, rule: &[u8]) -> Result<(), &'static str> {
        let (read, write, pattern) = if rule[0] == b'%' {
            let tilde = rule.iter().position(|&b| b == b'~').ok_or("Syntax error")?;
            let (mut read, mut write) = (false, false);
            for &b in &rule[1..tilde] {
                match b.to_ascii_uppercase() {
                    b'R' if !read => read = true,
                    b'W' if !write => write = true,
                    _ => return Err("Syntax error"),
                }
            }
            if !read && !write {
                return Err("Syntax error");
            }
            (read, write, &rule[tilde + 1..])
        } else {
            (true, true, &rule[1..])
        };
        if self.all_keys {
            return Err(
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not \
                        valid and does not have any effect. Try 'resetkeys' to start with an \
                        empty list of patterns",
            );
        }
        if pattern.iter().any(u8::is_ascii_whitespace) {
            return Err("Syntax error");
        }
        if read && write && pattern == b"*" {
            self.all_keys = true;
            self.keys.clear();
            return Ok(());
        }
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            Some(k) => {
                k.read |= read;
                k.write |= write;
            }
            None => self.keys.push(KeyPattern {
                pattern: pattern.to_vec(),
                read,
                write,
            }),
        }
        Ok(())
    }

    fn command_rule(
        &mut self,
        table: &CommandTable,
        what: &[u8],
        on: bool,
    ) -> Result<(), &'static str> {
        const UNKNOWN: &str = "Unknown command or category name in ACL";
        if let Some(category) = what.strip_prefix(b"@") {
            if !CATEGORIES.iter().any(|c| c.as_bytes() == category) {
                return Err(UNKNOWN);
            }
            self.category(table, category, on);
            return Ok(());
        }
        if !on || !what.contains(&b'|') {
            // `-command` or `-container|subcommand`, `+command`.
            let spec = table.lookup_full(what).ok_or(UNKNOWN)?;
            self.change(table, spec, on);
            return Ok(());
        }
        // `+name|x`, split at the last `|`: a subcommand, or a first argument of a
        // command without subcommands (`+select|0`), never of a subcommand.
        let bar = what.iter().rposition(|&b| b == b'|').unwrap_or(0);
        let (name, sub) = (&what[..bar], &what[bar + 1..]);
        let spec = table.lookup_full(name).ok_or(UNKNOWN)?;
        if spec.name.contains('|') {
            return Err("Allowing first-arg of a subcommand is not supported");
        }
        if sub.is_empty() {
            return Err("Syntax error");
        }
        if spec.is_container() {
            let sub = table.lookup_sub(spec, sub).ok_or(UNKNOWN)?;
            self.change(table, sub, on);
            return Ok(());
        }
        let args = self.first_args.entry(spec.id).or_default();
        if !args.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
            args.push(sub.to_vec());
        }
        Ok(())
    }

    /// Whether this selector allows `args` of `spec`; else why not.
    fn check(&self, spec: &CommandSpec, args: &Args<'_>) -> Result<(), Denied> {
        // AUTH and HELLO (the commands that need no authentication) are anyone's.
        if !self.bit(spec.id) && !spec.flags.contains(crate::table::Flags::NO_AUTH) {
            let at = if spec.name.contains('|') { 2 } else { 1 };
            let allowed = args.len() > at
                && self
                    .first_args
                    .get(&spec.id)
                    .is_some_and(|list| list.iter().any(|a| a.eq_ignore_ascii_case(args.get(at))));
            if !allowed {
                return Err(Denied::Command);
            }
        }
        if !self.all_keys && spec.key_finder.has_keys() {
            let mut refused = None;
            let _ = spec.key_finder.find(args, |i, flags| {
                if refused.is_none() && !self.key_allowed(args.get(i), flags) {
                    refused = Some(i);
                }
            });
            if let Some(i) = refused {
                return Err(Denied::Key(i));
            }
        }
        if !self.all_channels
            && let Some((at, pattern)) = channels_of(spec, args.len())
        {
            for i in at {
                if !self.channel_allowed(args.get(i), pattern) {
                    return Err(Denied::Channel(i));
                }
            }
        }
        Ok(())
    }

    /// `ACLSelectorCheckKey`: some pattern grants the access the key spec declares.
    fn key_allowed(&self, key: &[u8], flags: KeyFlags) -> bool {
        let read = flags.contains(KeyFlags::ACCESS);
        let write = flags.intersects(
            KeyFlags::INSERT
                .union(KeyFlags::DELETE)
                .union(KeyFlags::UPDATE),
        );
        self.keys
            .iter()
            .any(|k| (!read || k.read) && (!write || k.write) && glob_match(&k.pattern, key, false))
    }

    /// `ACLCheckChannelAgainstList`: a pattern subscription must name an allowed pattern
    /// exactly; a channel must match one.
    fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.channels.iter().any(|c| {
            if is_pattern {
                c == channel
            } else {
                glob_match(c, channel, false)
            }
        })
    }

    /// Whether it allows everything.
    fn unrestricted(&self, table: &CommandTable) -> bool {
        self.all_keys && self.all_channels && table.all().iter().all(|spec| self.bit(spec.id))
    }

    /// Its rules, as ACL LIST shows them (`ACLDescribeSelector`).
    fn describe(&self, table: &CommandTable) -> String {
        let channels = if self.all_channels {
            self.channels_text()
        } else {
            format!("resetchannels {}", self.channels_text())
        };
        [self.keys_text(), channels, self.describe_commands(table)]
            .iter()
            .map(|part| part.trim_end())
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn keys_text(&self) -> String {
        if self.all_keys {
            return "~*".to_string();
        }
        let parts: Vec<String> = self.keys.iter().map(key_pattern_text).collect();
        parts.join(" ")
    }

    fn channels_text(&self) -> String {
        if self.all_channels {
            return "&*".to_string();
        }
        let parts: Vec<String> = self
            .channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect();
        parts.join(" ")
    }

    /// The command rules (`ACLDescribeSelectorCommandRules`, 7.0's): from `+@all` or
    /// `-@all`, the categories that add (or remove) more commands than not, then the
    /// single commands, subcommands and first arguments that still differ.
    fn describe_commands(&self, table: &CommandTable) -> String {
        let mut fake = Selector::new(table.all().len());
        let additive = !self.future;
        let mut rules = if additive {
            fake.all_commands(table, false);
            String::from("-@all ")
        } else {
            fake.all_commands(table, true);
            String::from("+@all ")
        };
        // The categories, best fit first: of those that share more commands with the
        // user's than they differ by, the one that differs least (then shares most),
        // counted on what no category applied so far covers.
        let mut temp = self.clone();
        let mut applied = [false; CATEGORIES.len()];
        loop {
            let mut best = None;
            let (mut min_diff, mut max_same) = (usize::MAX, 0);
            for (j, category) in CATEGORIES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (mut on, mut off) = (0usize, 0usize);
                for spec in table.all() {
                    if spec.in_acl_category(category.as_bytes()) {
                        if temp.bit(spec.id) {
                            on += 1;
                        } else {
                            off += 1;
                        }
                    }
                }
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < min_diff || (diff == min_diff && same > max_same)) {
                    best = Some(j);
                    min_diff = diff;
                    max_same = same;
                }
            }
            let Some(j) = best else { break };
            let category = CATEGORIES[j];
            fake.category(table, category.as_bytes(), additive);
            temp.category(table, category.as_bytes(), !additive);
            rules.push(if additive { '+' } else { '-' });
            rules.push('@');
            rules.push_str(category);
            rules.push(' ');
            applied[j] = true;
        }
        for spec in table.top_level() {
            self.describe_single(table, spec, &mut fake, &mut rules);
            for sub in table.subcommands(spec) {
                self.describe_single(table, sub, &mut fake, &mut rules);
            }
        }
        rules.pop();
        rules
    }

    fn describe_single(
        &self,
        table: &CommandTable,
        spec: &CommandSpec,
        fake: &mut Selector,
        rules: &mut String,
    ) {
        let user = self.bit(spec.id);
        if user != fake.bit(spec.id) {
            rules.push(if user { '+' } else { '-' });
            rules.push_str(spec.name);
            rules.push(' ');
            fake.change(table, spec, user);
        }
        if !user && let Some(args) = self.first_args.get(&spec.id) {
            for a in args {
                rules.push('+');
                rules.push_str(spec.name);
                rules.push('|');
                rules.push_str(&String::from_utf8_lossy(a));
                rules.push(' ');
            }
        }
    }
}

fn key_pattern_text(k: &KeyPattern) -> String {
    let prefix = match (k.read, k.write) {
        (true, true) => "~",
        (true, false) => "%R~",
        _ => "%W~",
    };
    format!("{prefix}{}", String::from_utf8_lossy(&k.pattern))
}

/// Which of a command's `argc` arguments are channels to check, and whether they are
/// patterns: PUBLISH's and SPUBLISH's one channel, the subscriptions' (the
/// unsubscriptions are not checked).
fn channels_of(spec: &CommandSpec, argc: usize) -> Option<(std::ops::Range<usize>, bool)> {
    match spec.name {
        "publish" | "spublish" => Some((1..argc.min(2), false)),
        "subscribe" | "ssubscribe" => Some((1..argc, false)),
        "psubscribe" => Some((1..argc, true)),
        _ => None,
    }
}

impl User {
    /// The root permissions and the selectors.
    fn selectors(&self) -> impl Iterator<Item = &Selector> {
        std::iter::once(&self.root).chain(&self.selectors)
    }

    /// `ACLUserCheckChannelPerm`: whether the user may subscribe to `channel` (a
    /// pattern subscription when `pattern`).
    pub fn may_subscribe(&self, channel: &[u8], pattern: bool) -> bool {
        self.unrestricted
            || self
                .selectors()
                .any(|s| s.all_channels || s.channel_allowed(channel, pattern))
    }

    /// `ACLUserCheckCmdWithUnrestrictedKeyAccess` for reads: some selector allows the
    /// command and reading every key.
    fn reads_every_key(&self, spec: &CommandSpec, args: &Args<'_>) -> bool {
        self.unrestricted
            || self.selectors().any(|s| {
                (s.all_keys || s.keys.iter().any(|k| k.read && k.pattern == b"*"))
                    && s.check(spec, args).is_ok()
            })
    }

    /// A new user as ACL SETUSER creates it: off, no password, no permission but every
    /// channel with `acl-pubsub-default allchannels`.
    fn new(name: &[u8], table: &CommandTable, all_channels: bool) -> User {
        User {
            root: Selector::none(table, all_channels),
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            selectors: Vec::new(),
            unrestricted: false,
        }
    }

    /// The default user: on, every permission, `requirepass` its password if set.
    fn default_user(table: &CommandTable, requirepass: Option<&[u8]>) -> User {
        let mut user = User::new(b"default", table, true);
        user.enabled = true;
        user.root.all_commands(table, true);
        user.root.all_keys = true;
        user.root.all_channels = true;
        user.set_requirepass(requirepass);
        user.settle(table);
        user
    }

    fn set_requirepass(&mut self, requirepass: Option<&[u8]>) {
        self.passwords.clear();
        match requirepass {
            Some(pw) => {
                self.nopass = false;
                self.passwords.push(hex(&crate::sha256::digest(pw)));
            }
            None => self.nopass = true,
        }
    }

    /// Whether a client of this user needs no AUTH: it is on and needs no password (the
    /// default user decides whether new clients must authenticate).
    pub fn needs_no_password(&self) -> bool {
        self.enabled && self.nopass
    }

    /// Whether `password` opens this user (on, and no password needed or one of its).
    pub fn opens(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let digest = hex(&crate::sha256::digest(password));
        // Every stored digest is compared whole, so the time taken says nothing of which.
        self.passwords.iter().fold(false, |found, p| {
            found | constant_time_eq(p.as_bytes(), digest.as_bytes())
        })
    }

    /// Whether it may run `args` of `spec`; else the refusal to report.
    pub fn check(&self, spec: &CommandSpec, args: &Args<'_>) -> Result<(), Denied> {
        if self.unrestricted {
            return Ok(());
        }
        let mut worst = match self.root.check(spec, args) {
            Ok(()) => return Ok(()),
            Err(d) => d,
        };
        for s in &self.selectors {
            match s.check(spec, args) {
                Ok(()) => return Ok(()),
                Err(d) if d.rank() > worst.rank() => worst = d,
                Err(_) => {}
            }
        }
        Err(worst)
    }

    /// Applies SETUSER rules in turn; `Err` with the rule that failed and why.
    fn apply_all<'r>(
        &mut self,
        table: &CommandTable,
        rules: &'r [Vec<u8>],
        pubsub_all: bool,
    ) -> Result<(), (&'r [u8], &'static str)> {
        for rule in rules {
            self.apply(table, rule, pubsub_all)
                .map_err(|reason| (rule.as_slice(), reason))?;
        }
        self.settle(table);
        Ok(())
    }

    /// Works out [`User::unrestricted`] after a change.
    fn settle(&mut self, table: &CommandTable) {
        self.unrestricted =
            self.root.unrestricted(table) || self.selectors.iter().any(|s| s.unrestricted(table));
    }

    /// Applies one SETUSER rule (`reset` and new selectors take `acl-pubsub-default`
    /// from `pubsub_all`); `Err` with Redis's reason.
    fn apply(
        &mut self,
        table: &CommandTable,
        rule: &[u8],
        pubsub_all: bool,
    ) -> Result<(), &'static str> {
        if rule.is_empty() {
            return Ok(());
        }
        if rule.first() == Some(&b'(') && rule.last() == Some(&b')') && rule.len() >= 2 {
            let mut selector = Selector::none(table, pubsub_all);
            for part in rule[1..rule.len() - 1]
                .split(|&b| b == b' ')
                .filter(|p| !p.is_empty())
            {
                selector.apply(table, part)?;
            }
            self.selectors.push(selector);
            return Ok(());
        }
        match rule.to_ascii_lowercase().as_slice() {
            b"on" => self.enabled = true,
            b"off" => self.enabled = false,
            b"nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            b"resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            b"skip-sanitize-payload" => self.sanitize = Some(false),
            b"sanitize-payload" => self.sanitize = Some(true),
            b"clearselectors" => self.selectors.clear(),
            b"reset" => {
                self.passwords.clear();
                self.nopass = false;
                self.enabled = false;
                self.sanitize = Some(true);
                self.selectors.clear();
                self.root = Selector::none(table, pubsub_all);
            }
            _ => match rule[0] {
                // A password (`>`, `<`) or its digest (`#`, `!`), added or removed.
                kind @ (b'>' | b'#' | b'<' | b'!') => {
                    let digest = if matches!(kind, b'>' | b'<') {
                        hex(&crate::sha256::digest(&rule[1..]))
                    } else {
                        password_hash(&rule[1..]).ok_or(BAD_HASH)?
                    };
                    if matches!(kind, b'>' | b'#') {
                        if !self.passwords.contains(&digest) {
                            self.passwords.push(digest);
                        }
                        self.nopass = false;
                    } else {
                        let at = self.passwords.iter().position(|p| *p == digest).ok_or(
                            "The password you are trying to remove from the user does not exist",
                        )?;
                        self.passwords.remove(at);
                    }
                }
                _ => self.root.apply(table, rule)?,
            },
        }
        Ok(())
    }

    /// Its rules, as ACL LIST shows them after `user <name> ` (`ACLDescribeUser`).
    pub fn describe(&self, table: &CommandTable) -> String {
        let mut out = String::new();
        for flag in self.flags() {
            out.push_str(flag);
            out.push(' ');
        }
        for p in &self.passwords {
            out.push('#');
            out.push_str(p);
            out.push(' ');
        }
        out.push_str(&self.root.describe(table));
        for s in &self.selectors {
            out.push_str(" (");
            out.push_str(&s.describe(table));
            out.push(')');
        }
        out
    }

    /// Its flags, as ACL GETUSER lists them.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut flags = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            flags.push("nopass");
        }
        match self.sanitize {
            Some(false) => flags.push("skip-sanitize-payload"),
            Some(true) => flags.push("sanitize-payload"),
            None => {}
        }
        flags
    }

    /// The SHA-256 digests of its passwords, in hex.
    pub fn passwords(&self) -> &[String] {
        &self.passwords
    }

    /// ACL GETUSER's `commands`, `keys` and `channels` of its root permissions, then of
    /// each selector.
    pub fn views(&self, table: &CommandTable) -> Vec<[String; 3]> {
        std::iter::once(&self.root)
            .chain(&self.selectors)
            .map(|s| [s.describe_commands(table), s.keys_text(), s.channels_text()])
            .collect()
    }
}

const BAD_HASH: &str = "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters";

/// A password's hash as `#` and `!` give it: 64 lowercase hexadecimal digits.
fn password_hash(text: &[u8]) -> Option<String> {
    (text.len() == 64
        && text
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b)))
    .then(|| String::from_utf8_lossy(text).into_owned())
}

/// Whether `a` and `b` are equal, in a time that depends on their lengths only.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// Who runs a script, for the checks of the commands it calls: the user, and the
/// client as CLIENT LIST shows it (for the ACL LOG). Only a restricted user's scripts
/// carry one.
#[derive(Debug)]
pub struct Caller {
    /// The user.
    pub user: Arc<User>,
    /// The client's CLIENT LIST line, as the script started.
    pub client_info: String,
}

impl Caller {
    /// Whether the user may call `args` of `spec` from its script; else the error the
    /// script gets (`scriptCall`'s), the refusal logged with the `lua` context.
    pub fn check(
        &self,
        acl: &Acl,
        spec: &CommandSpec,
        args: &Args<'_>,
        now: u64,
    ) -> Option<Vec<u8>> {
        let denied = match self.user.check(spec, args) {
            Ok(()) => return sort_refusal(&self.user, spec, args).map(<[u8]>::to_vec),
            Err(denied) => denied,
        };
        let error: &[u8] = match denied {
            Denied::Command => {
                b"ERR The user executing the script can't run this command or subcommand"
            }
            Denied::Key(_) => {
                b"ERR The user executing the script can't access at least one \
                of the keys mentioned in the command arguments"
            }
            Denied::Channel(_) => {
                b"ERR The user executing the script can't publish to the \
                channel mentioned in the command"
            }
        };
        let (reason, object) = denied.logged(spec, args);
        acl.log(LogEntry {
            count: 1,
            reason,
            context: "lua",
            object,
            username: self.user.name.clone(),
            at_ms: now,
            client_info: self.client_info.clone(),
        });
        Some(error.to_vec())
    }
}

/// One ACL LOG entry.
#[derive(Clone, Debug)]
pub struct LogEntry {
    /// How many refusals it stands for.
    pub count: u64,
    /// `command`, `key`, `channel` or `auth`.
    pub reason: &'static str,
    /// `toplevel`, `multi` or `lua`.
    pub context: &'static str,
    /// The command, key or channel refused (for a failed authentication, the name of
    /// the command that tried, as the client sent it).
    pub object: Vec<u8>,
    /// The user.
    pub username: Vec<u8>,
    /// When, in milliseconds since the epoch (the last of its refusals).
    pub at_ms: u64,
    /// The client, as CLIENT LIST shows it.
    pub client_info: String,
}

/// Every user, the ACL LOG, and a version that changes with the users.
#[derive(Debug)]
pub struct Acl {
    users: RwLock<BTreeMap<Vec<u8>, Arc<User>>>,
    version: AtomicU64,
    log: Mutex<VecDeque<LogEntry>>,
    /// What [`Acl::default_user`] answers should the default user be missing (it cannot
    /// be deleted): a user who may do nothing.
    nobody: Arc<User>,
    /// `acl-pubsub-default allchannels`.
    pubsub_all: AtomicBool,
    /// `acllog-max-len`.
    log_max_len: AtomicUsize,
}

impl Acl {
    /// The default user alone, with `requirepass` as its password.
    pub fn new(table: &CommandTable, requirepass: Option<&[u8]>) -> Acl {
        let mut users = BTreeMap::new();
        users.insert(
            b"default".to_vec(),
            Arc::new(User::default_user(table, requirepass)),
        );
        Acl {
            users: RwLock::new(users),
            version: AtomicU64::new(1),
            log: Mutex::new(VecDeque::new()),
            nobody: Arc::new(User::new(b"default", table, false)),
            pubsub_all: AtomicBool::new(false),
            log_max_len: AtomicUsize::new(128),
        }
    }

    /// `acl-pubsub-default` and `acllog-max-len`, as CONFIG SET leaves them.
    pub fn configure(&self, pubsub_all: bool, log_max_len: u64) {
        self.pubsub_all.store(pubsub_all, Ordering::Relaxed);
        let max = usize::try_from(log_max_len).unwrap_or(usize::MAX);
        self.log_max_len.store(max, Ordering::Relaxed);
        self.log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .truncate(max);
    }

    fn pubsub_all(&self) -> bool {
        self.pubsub_all.load(Ordering::Relaxed)
    }

    /// The version of the users: it changes whenever one does.
    #[inline]
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<Vec<u8>, Arc<User>>> {
        self.users
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<Vec<u8>, Arc<User>>> {
        self.users
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The user called `name`, with the version it was read at.
    pub fn user(&self, name: &[u8]) -> (Option<Arc<User>>, u64) {
        let users = self.read();
        (users.get(name).cloned(), self.version())
    }

    /// The default user and the version it was read at.
    pub fn default_user(&self) -> (Arc<User>, u64) {
        let users = self.read();
        let user = users.get(&b"default"[..]).cloned();
        let version = self.version();
        drop(users);
        (user.unwrap_or_else(|| Arc::clone(&self.nobody)), version)
    }

    /// Every user, by name.
    pub fn users(&self) -> Vec<Arc<User>> {
        self.read().values().cloned().collect()
    }

    /// `ACL SETUSER name rule…`: every rule applies, or none (the user is untouched).
    ///
    /// # Errors
    /// The first rule's error, as Redis words it.
    pub fn set_user(
        &self,
        table: &CommandTable,
        name: &[u8],
        rules: &[&[u8]],
    ) -> Result<(), Vec<u8>> {
        if name.iter().any(|&b| b == b' ' || b == 0) {
            return Err(b"ERR Usernames can't contain spaces or null characters".to_vec());
        }
        let mut users = self.write();
        let user = self.updated(table, users.get(name), name, rules)?;
        users.insert(name.to_vec(), Arc::new(user));
        self.version.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// The user `name` as `ACL SETUSER name rule…` would make it, nothing changed; None
    /// when a rule fails.
    pub fn preview(&self, table: &CommandTable, name: &[u8], rules: &[&[u8]]) -> Option<User> {
        let current = self.user(name).0;
        self.updated(table, current.as_ref(), name, rules).ok()
    }

    /// `current` (or a new user called `name`) with `rules` applied.
    fn updated(
        &self,
        table: &CommandTable,
        current: Option<&Arc<User>>,
        name: &[u8],
        rules: &[&[u8]],
    ) -> Result<User, Vec<u8>> {
        let rules = merge_selectors(rules)?;
        let mut user = match current {
            Some(u) => User::clone(u),
            None => User::new(name, table, self.pubsub_all()),
        };
        user.apply_all(table, &rules, self.pubsub_all())
            .map_err(|(rule, reason)| {
                let mut e = b"ERR Error in ACL SETUSER modifier '".to_vec();
                e.extend_from_slice(rule);
                e.extend_from_slice(b"': ");
                e.extend_from_slice(reason.as_bytes());
                e
            })?;
        Ok(user)
    }

    /// Every user as ACL LIST and an ACL file show them: `user name rules`, by name.
    pub fn lines(&self, table: &CommandTable) -> Vec<String> {
        self.users()
            .iter()
            .map(|u| {
                format!(
                    "user {} {}",
                    String::from_utf8_lossy(&u.name),
                    u.describe(table)
                )
            })
            .collect()
    }

    /// Makes the users those `text` (an ACL file, read from `path`) declares, all or
    /// none: the default user, if the file does not declare it, as it starts.
    ///
    /// # Errors
    /// Every line's error, as redis-server's ACL LOAD words them.
    pub fn load(&self, table: &CommandTable, text: &str, path: &str) -> Result<(), String> {
        let loaded = self.parse_file(table, text, path)?;
        *self.write() = loaded;
        self.version.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// The users an ACL file's `text` defines (`default` added when it has none), or
    /// the errors of its lines, as [`Acl::load`] reports them.
    pub fn parse_file(
        &self,
        table: &CommandTable,
        text: &str,
        path: &str,
    ) -> Result<BTreeMap<Vec<u8>, Arc<User>>, String> {
        let mut loaded: BTreeMap<Vec<u8>, Arc<User>> = BTreeMap::new();
        let mut errors = String::new();
        for (n, line) in text.lines().enumerate() {
            let n = n + 1;
            let words: Vec<&[u8]> = line.split_ascii_whitespace().map(str::as_bytes).collect();
            if words.is_empty() {
                continue;
            }
            if words.len() < 2 || words[0] != b"user" {
                errors.push_str(&format!(
                    "{path}:{n} should start with user keyword followed by the username. "
                ));
                continue;
            }
            let name = words[1];
            if loaded.contains_key(name) {
                errors.push_str(&format!(
                    "WARNING: Duplicate user '{}' found on line {n}. ",
                    String::from_utf8_lossy(name)
                ));
                continue;
            }
            let rules = match merge_selectors(&words[2..]) {
                Ok(rules) => rules,
                Err(e) => {
                    let e = String::from_utf8_lossy(&e);
                    errors.push_str(&format!("{path}:{n}: {}. ", e.trim_start_matches("ERR ")));
                    continue;
                }
            };
            let mut user = User::new(name, table, self.pubsub_all());
            if let Err((rule, reason)) = user.apply_all(table, &rules, self.pubsub_all()) {
                errors.push_str(&format!(
                    "{path}:{n}: Error in applying operation '{}': {reason}. ",
                    String::from_utf8_lossy(rule)
                ));
                continue;
            }
            loaded.insert(name.to_vec(), Arc::new(user));
        }
        if !errors.is_empty() {
            errors.push_str(
                "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
            );
            return Err(errors);
        }
        loaded
            .entry(b"default".to_vec())
            .or_insert_with(|| Arc::new(User::default_user(table, None)));
        Ok(loaded)
    }

    /// `ACL DELUSER name…`: how many were deleted.
    ///
    /// # Errors
    /// When `default` is among them.
    pub fn delete_users(&self, names: &[&[u8]]) -> Result<usize, Vec<u8>> {
        if names.iter().any(|n| *n == b"default") {
            return Err(b"ERR The 'default' user cannot be removed".to_vec());
        }
        let mut users = self.write();
        let deleted = names.iter().filter(|n| users.remove(**n).is_some()).count();
        if deleted > 0 {
            self.version.fetch_add(1, Ordering::AcqRel);
        }
        Ok(deleted)
    }

    /// `requirepass` changed: the default user's password follows.
    pub fn set_requirepass(&self, requirepass: Option<&[u8]>) {
        let mut users = self.write();
        if let Some(u) = users.get_mut(&b"default"[..]) {
            let mut user = User::clone(u);
            user.set_requirepass(requirepass);
            *u = Arc::new(user);
        }
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// Adds a refusal to the log, counted with an entry alike of the last minute.
    pub fn log(&self, mut entry: LogEntry) {
        let mut log = self
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let alike = log.iter().take(10).position(|e| {
            e.reason == entry.reason
                && e.context == entry.context
                && e.object == entry.object
                && e.username == entry.username
                && entry.at_ms.saturating_sub(e.at_ms) <= LOG_GROUPING_MS
        });
        if let Some(i) = alike
            && let Some(old) = log.remove(i)
        {
            entry.count = old.count + 1;
        }
        log.push_front(entry);
        log.truncate(self.log_max_len.load(Ordering::Relaxed));
    }

    /// The newest `count` log entries, newest first.
    pub fn log_entries(&self, count: usize) -> Vec<LogEntry> {
        let log = self
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        log.iter().take(count).cloned().collect()
    }

    /// ACL LOG RESET.
    pub fn reset_log(&self) {
        self.log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }
}

/// SETUSER's arguments with each selector made one rule: an argument that starts with
/// `(` runs to the first that ends with `)`, joined by spaces (`ACLMergeSelectorArguments`).
fn merge_selectors(rules: &[&[u8]]) -> Result<Vec<Vec<u8>>, Vec<u8>> {
    let mut out = Vec::with_capacity(rules.len());
    let mut open: Option<Vec<u8>> = None;
    for rule in rules {
        match open.as_mut() {
            Some(selector) => {
                selector.push(b' ');
                selector.extend_from_slice(rule);
                if rule.last() == Some(&b')') {
                    out.extend(open.take());
                }
            }
            None if rule.first() == Some(&b'(') && rule.last() != Some(&b')') => {
                open = Some(rule.to_vec());
            }
            None => out.push(rule.to_vec()),
        }
    }
    if let Some(selector) = open {
        let mut e = b"ERR Unmatched parenthesis in acl selector starting at '".to_vec();
        e.extend_from_slice(
            &selector[..selector
                .iter()
                .position(|&b| b == b' ')
                .unwrap_or(selector.len())],
        );
        e.extend_from_slice(b"'.");
        return Err(e);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> CommandTable {
        crate::families::table().expect("the command table")
    }

    fn args(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    fn check(acl: &Acl, table: &CommandTable, user: &str, words: &[&str]) -> Result<(), Denied> {
        Args::with_owned(&args(words), |a| {
            let spec = table.resolve(a).expect("a known command");
            let (u, _) = acl.user(user.as_bytes());
            u.expect("the user").check(spec, a)
        })
    }

    fn setuser(acl: &Acl, table: &CommandTable, name: &str, rules: &[&str]) -> Result<(), Vec<u8>> {
        let owned = args(rules);
        let refs: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
        acl.set_user(table, name.as_bytes(), &refs)
    }

    #[test]
    fn the_default_user_may_do_everything() {
        let t = table();
        let acl = Acl::new(&t, None);
        let (u, _) = acl.default_user();
        assert!(u.unrestricted);
        assert_eq!(u.describe(&t), "on nopass ~* &* +@all");
        assert!(u.opens(b"anything"));
        acl.set_requirepass(Some(b"pw"));
        let (u, _) = acl.default_user();
        assert!(u.opens(b"pw") && !u.opens(b"other"));
    }

    #[test]
    fn commands_keys_and_channels_are_checked() {
        let t = table();
        let acl = Acl::new(&t, None);
        setuser(
            &acl,
            &t,
            "u",
            &[
                "on",
                ">pw",
                "~k*",
                "%R~r*",
                "&ch",
                "+get",
                "+set",
                "+publish",
                "+psubscribe",
                "+config|get",
            ],
        )
        .expect("rules");
        assert_eq!(check(&acl, &t, "u", &["get", "k1"]), Ok(()));
        assert_eq!(check(&acl, &t, "u", &["get", "r1"]), Ok(()));
        assert_eq!(
            check(&acl, &t, "u", &["set", "r1", "x"]),
            Err(Denied::Key(1))
        );
        assert_eq!(check(&acl, &t, "u", &["del", "k1"]), Err(Denied::Command));
        assert_eq!(check(&acl, &t, "u", &["config", "get", "x"]), Ok(()));
        assert_eq!(
            check(&acl, &t, "u", &["config", "set", "x", "y"]),
            Err(Denied::Command)
        );
        assert_eq!(check(&acl, &t, "u", &["publish", "ch", "m"]), Ok(()));
        assert_eq!(
            check(&acl, &t, "u", &["publish", "no", "m"]),
            Err(Denied::Channel(1))
        );
        assert_eq!(
            check(&acl, &t, "u", &["psubscribe", "ch*"]),
            Err(Denied::Channel(1))
        );
        assert_eq!(check(&acl, &t, "u", &["psubscribe", "ch"]), Ok(()));
        let (u, _) = acl.user(b"u");
        let u = u.expect("u");
        assert!(u.opens(b"pw") && !u.opens(b"px"));
        let described = u.describe(&t);
        let (head, commands) = described.split_once(" -@all ").expect("-@all");
        assert_eq!(
            head,
            format!(
                "on #{} ~k* %R~r* resetchannels &ch",
                hex(&crate::sha256::digest(b"pw"))
            )
        );
        // The single commands come in table order: compared as a set.
        let mut commands: Vec<&str> = commands.split(' ').collect();
        commands.sort_unstable();
        assert_eq!(
            commands,
            ["+config|get", "+get", "+psubscribe", "+publish", "+set"]
        );
    }

    #[test]
    fn rules_are_described_from_the_fewest_words() {
        let t = table();
        let acl = Acl::new(&t, None);
        setuser(&acl, &t, "a", &["+@string", "-get"]).expect("rules");
        let (u, _) = acl.user(b"a");
        assert_eq!(
            u.expect("a").describe(&t),
            "off resetchannels -@all +@string -get"
        );
        setuser(&acl, &t, "b", &["+config", "-config|set"]).expect("rules");
        let (u, _) = acl.user(b"b");
        assert_eq!(
            u.expect("b").describe(&t),
            "off resetchannels -@all +config -config|set"
        );
        setuser(&acl, &t, "c", &["reset"]).expect("rules");
        let (u, _) = acl.user(b"c");
        assert_eq!(
            u.expect("c").describe(&t),
            "off sanitize-payload resetchannels -@all"
        );
    }

    #[test]
    fn a_failed_rule_changes_nothing() {
        let t = table();
        let acl = Acl::new(&t, None);
        setuser(&acl, &t, "u", &["on"]).expect("rules");
        let e = setuser(&acl, &t, "u", &["+get", "get"]).expect_err("a bad rule");
        assert_eq!(
            e,
            b"ERR Error in ACL SETUSER modifier 'get': Syntax error".to_vec()
        );
        assert_eq!(check(&acl, &t, "u", &["get", "k"]), Err(Denied::Command));
        let e = setuser(&acl, &t, "u", &["(+get", "x"]).expect_err("unmatched");
        assert_eq!(
            e,
            b"ERR Unmatched parenthesis in acl selector starting at '(+get'.".to_vec()
        );
    }

    #[test]
    fn a_selector_may_allow_what_the_root_does_not() {
        let t = table();
        let acl = Acl::new(&t, None);
        setuser(
            &acl,
            &t,
            "u",
            &["on", "nopass", "+set", "~s*", "(~g*", "+get)"],
        )
        .expect("rules");
        assert_eq!(check(&acl, &t, "u", &["get", "g1"]), Ok(()));
        assert_eq!(check(&acl, &t, "u", &["get", "s1"]), Err(Denied::Key(1)));
        assert_eq!(
            check(&acl, &t, "u", &["set", "g1", "v"]),
            Err(Denied::Key(1))
        );
        let (u, _) = acl.user(b"u");
        assert_eq!(
            u.expect("u").describe(&t),
            "on nopass ~s* resetchannels -@all +set (~g* resetchannels -@all +get)"
        );
    }

    #[test]
    fn an_acl_file_loads_whole_or_not_at_all() {
        let t = table();
        let acl = Acl::new(&t, None);
        setuser(&acl, &t, "old", &["on"]).expect("rules");
        let e = acl
            .load(
                &t,
                "user a on +get\nuser b +nosuch\nfoo\n\nuser c\n",
                "f.acl",
            )
            .expect_err("bad lines");
        assert_eq!(
            e,
            "f.acl:2: Error in applying operation '+nosuch': Unknown command or category name \
             in ACL. f.acl:3 should start with user keyword followed by the username. WARNING: \
             ACL errors detected, no change to the previously active ACL rules was performed"
        );
        assert!(acl.user(b"old").0.is_some() && acl.user(b"a").0.is_none());
        acl.load(&t, "user a on >pw ~k* (~x +get) +set\n", "f.acl")
            .expect("good lines");
        assert!(acl.user(b"old").0.is_none());
        assert_eq!(
            acl.lines(&t),
            [
                format!(
                    "user a on #{} ~k* resetchannels -@all +set (~x resetchannels -@all +get)",
                    hex(&crate::sha256::digest(b"pw"))
                ),
                "user default on nopass ~* &* +@all".to_string(),
            ]
        );
    }

    #[test]
    fn the_log_groups_alike_refusals() {
        let t = table();
        let acl = Acl::new(&t, None);
        let entry = |object: &[u8], at_ms| LogEntry {
            count: 1,
            reason: "key",
            context: "toplevel",
            object: object.to_vec(),
            username: b"u".to_vec(),
            at_ms,
            client_info: String::new(),
        };
        acl.log(entry(b"k", 1_000));
        acl.log(entry(b"k", 2_000));
        acl.log(entry(b"j", 3_000));
        acl.log(entry(b"k", 100_000));
        let entries = acl.log_entries(10);
        let counts: Vec<(Vec<u8>, u64)> = entries
            .iter()
            .map(|e| (e.object.clone(), e.count))
            .collect();
        assert_eq!(
            counts,
            vec![(b"k".to_vec(), 1), (b"j".to_vec(), 1), (b"k".to_vec(), 2)]
        );
    }
}
