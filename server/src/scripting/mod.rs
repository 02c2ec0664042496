//! Lua scripting: EVAL, EVALSHA, SCRIPT, FUNCTION and FCALL, with the interpreter Redis
//! embeds (Lua 5.1) and the libraries it gives scripts.
//!
//! - [`Scripts`]: the script cache every thread shares (bodies by SHA1, as SCRIPT LOAD
//!   and EVAL fill it); each thread compiles a script on first use in its own
//!   interpreter (`engine.rs`).
//! - `convert.rs`: RESP ↔ Lua, as Redis converts.
//! - `libs/`: cjson, cmsgpack, bit, struct.
//! - The commands and how a script reaches the keys are in `families/scripting.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

pub mod convert;
pub mod engine;
pub mod functions;
pub mod libs;

/// The command table, for `redis.acl_check_cmd`: set once it is built (the first
/// server's, in a process that runs several).
pub static COMMANDS: std::sync::OnceLock<Arc<crate::table::CommandTable>> =
    std::sync::OnceLock::new();

/// A script's SHA1, in lowercase hex.
pub type Sha = [u8; 40];

/// A script's flags (its `#!lua flags=…` shebang).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScriptFlags(pub u32);

impl ScriptFlags {
    /// No shebang: Redis's compatibility mode (the script may write, and is not checked
    /// before it runs).
    pub const EVAL_COMPAT: u32 = 1;
    /// `no-writes`
    pub const NO_WRITES: u32 = 1 << 1;
    /// `allow-oom`
    pub const ALLOW_OOM: u32 = 1 << 2;
    /// `allow-stale`
    pub const ALLOW_STALE: u32 = 1 << 3;
    /// `no-cluster`
    pub const NO_CLUSTER: u32 = 1 << 4;
    /// `allow-cross-slot-keys`
    pub const ALLOW_CROSS_SLOT: u32 = 1 << 5;
    /// `allow-undeclared-keys` (Goblin's, as Dragonfly's): the script may touch keys it
    /// does not declare; it runs with every shard locked.
    pub const ALLOW_UNDECLARED: u32 = 1 << 6;

    /// Whether `flag` is set.
    pub fn has(self, flag: u32) -> bool {
        self.0 & flag != 0
    }
}

/// The flag names of a shebang, with their bits.
pub const FLAG_NAMES: &[(&str, u32)] = &[
    ("no-writes", ScriptFlags::NO_WRITES),
    ("allow-oom", ScriptFlags::ALLOW_OOM),
    ("allow-stale", ScriptFlags::ALLOW_STALE),
    ("no-cluster", ScriptFlags::NO_CLUSTER),
    ("allow-cross-slot-keys", ScriptFlags::ALLOW_CROSS_SLOT),
    ("allow-undeclared-keys", ScriptFlags::ALLOW_UNDECLARED),
];

/// A script's shebang (`evalExtractShebangFlags`): its flags and the length of the line
/// (the code starts there, the line feed kept so that line numbers stay), or the error.
pub fn shebang(body: &[u8]) -> Result<(ScriptFlags, usize), Vec<u8>> {
    if !body.starts_with(b"#!") {
        return Ok((ScriptFlags(ScriptFlags::EVAL_COMPAT), 0));
    }
    let Some(end) = memchr::memchr(b'\n', body) else {
        return Err(b"ERR Invalid script shebang".to_vec());
    };
    let parts = goblin_protocol::split_args(&body[..end]).unwrap_or_default();
    let Some(first) = parts.first() else {
        return Err(b"ERR Invalid engine in script shebang".to_vec());
    };
    if first.as_slice() != b"#!lua" {
        let mut e = b"ERR Unexpected engine in script shebang: ".to_vec();
        e.extend_from_slice(cstr(first));
        return Err(e);
    }
    let mut flags = 0;
    for part in &parts[1..] {
        if let Some(list) = part.strip_prefix(b"flags=") {
            // (`sdssplitlen` of an empty list gives no flag.)
            for name in list.split(|&b| b == b',').filter(|_| !list.is_empty()) {
                match FLAG_NAMES.iter().find(|(n, _)| n.as_bytes() == cstr(name)) {
                    Some((_, bit)) => flags |= bit,
                    None => {
                        let mut e = b"ERR Unexpected flag in script shebang: ".to_vec();
                        e.extend_from_slice(cstr(name));
                        return Err(e);
                    }
                }
            }
        } else {
            let mut e = b"ERR Unknown lua shebang option: ".to_vec();
            e.extend_from_slice(cstr(part));
            return Err(e);
        }
    }
    Ok((ScriptFlags(flags), end))
}

/// The bytes C's `%s` prints: up to the first NUL.
fn cstr(s: &[u8]) -> &[u8] {
    s.iter().position(|&b| b == 0).map_or(s, |i| &s[..i])
}

/// A cached script.
#[derive(Debug)]
pub struct Script {
    /// Its SHA1.
    pub sha: Sha,
    /// The whole body, shebang included.
    pub body: Vec<u8>,
    /// Where the code starts (after the shebang line, its line feed kept).
    pub code_at: usize,
    /// Its flags.
    pub flags: ScriptFlags,
    /// Its code may touch keys it does not declare ([`may_stray`]).
    pub may_stray: bool,
    /// Its code calls a command of every shard ([`calls_every_shard`]).
    pub every_shard: bool,
}

/// Whether a run of a script whose code may touch keys it does not declare
/// ([`may_stray`]) must have every shard locked, given its declared keys: yes, unless
/// every one carries the same hash tag — the mark of code written for Redis Cluster,
/// whose undeclared keys, built from its keys, keep their slot. None when it declares
/// no key (its caller decides).
pub fn strays_with<'k>(keys: impl IntoIterator<Item = &'k [u8]>) -> Option<bool> {
    let mut first: Option<&[u8]> = None;
    for key in keys {
        let tag = goblin_store::hash_tag(key);
        if tag.len() == key.len() || *first.get_or_insert(tag) != tag {
            return Some(true);
        }
    }
    first.map(|_| false)
}

/// Whether a script's code may touch keys it does not declare, as far as reading it
/// tells: false only when `redis` is not used as a value (aliased, passed) and every
/// command it calls is a `redis.call(` or `redis.pcall(` whose command is named by a
/// string literal and, if `table` says it has a key, has one, at an argument that is an
/// element of `KEYS` (`redis.call('get', KEYS[1])`). Unknown commands and those no
/// script may call touch nothing. Strings and comments are not told apart from code,
/// which can only make the answer true.
pub fn may_stray(code: &[u8], table: &crate::table::CommandTable) -> bool {
    use crate::table::Flags;
    use crate::table::keys::KeyShape;
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while let Some(found) = code[i..].windows(5).position(|w| w == b"redis") {
        let at = i + found;
        i = at + 5;
        if (at > 0 && word(code[at - 1])) || code.get(i).copied().is_some_and(word) {
            continue;
        }
        let dot = skip_ws(code, i);
        if code.get(dot) != Some(&b'.') {
            // `redis` as a value.
            return true;
        }
        let name_at = skip_ws(code, dot + 1);
        let name_end = name_at + code[name_at..].iter().take_while(|&&b| word(b)).count();
        let name = &code[name_at..name_end];
        if name != b"call" && name != b"pcall" {
            i = name_end;
            continue;
        }
        let open = skip_ws(code, name_end);
        if code.get(open) != Some(&b'(') {
            return true;
        }
        // The call's arguments.
        let mut args = Vec::new();
        let mut from = open + 1;
        loop {
            let Some((end, sep)) = argument_end(code, from, b",)") else {
                return true;
            };
            args.push(code.get(from..end).unwrap_or_default().trim_ascii());
            from = end + 1;
            if sep == b')' {
                break;
            }
        }
        i = from;
        let Some(spec) = args
            .first()
            .and_then(|a| string_literal(a))
            .map(|name| table.lookup(name))
        else {
            return true;
        };
        let Some(mut spec) = spec else {
            continue;
        };
        if spec.flags.contains(Flags::NOSCRIPT) {
            continue;
        }
        if matches!(spec.exec, crate::table::handler::Exec::Container) {
            let Some(sub) = args.get(1).and_then(|a| string_literal(a)) else {
                return true;
            };
            match table.lookup_sub(spec, sub) {
                Some(s) => spec = s,
                None => continue,
            }
        }
        match spec.key_finder.shape() {
            KeyShape::Keyless => {}
            KeyShape::At(k) => {
                if args.get(k).is_some_and(|a| !keys_element(a)) {
                    return true;
                }
            }
            KeyShape::Other => return true,
        }
    }
    false
}

/// Whether a script's code names, as the first argument of a call (`redis.call('keys',
/// …)`, `rcall("DBSIZE")`), a command of `table` of every shard (keyless, run by a
/// plan across the shards: `families::scripting::every_shard_command`):
/// such a script runs with every shard locked, whatever its keys. (A name it builds at
/// run time is not seen: the call is refused where the run cannot be given up.)
pub fn calls_every_shard(code: &[u8], table: &crate::table::CommandTable) -> bool {
    let mut i = 0;
    while let Some(found) = code[i..].iter().position(|&b| b == b'(') {
        let from = skip_ws(code, i + found + 1);
        i += found + 1;
        let Some(&quote) = code.get(from).filter(|&&b| b == b'\'' || b == b'"') else {
            continue;
        };
        let text = &code[from + 1..];
        let Some(len) = text.iter().position(|&b| b == quote) else {
            continue;
        };
        if table
            .lookup(&text[..len])
            .is_some_and(crate::families::scripting::every_shard_command)
        {
            return true;
        }
    }
    false
}

fn skip_ws(code: &[u8], mut i: usize) -> usize {
    while code.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// The text of a quoted string literal with no escapes (`'get'`, `"GET"`).
fn string_literal(arg: &[u8]) -> Option<&[u8]> {
    let (&quote, rest) = arg.split_first()?;
    let (&last, text) = rest.split_last()?;
    ((quote == b'\'' || quote == b'"')
        && last == quote
        && !text.iter().any(|&b| b == quote || b == b'\\'))
    .then_some(text)
}

/// Whether an argument is `KEYS[…]` and nothing more.
fn keys_element(arg: &[u8]) -> bool {
    let Some(rest) = arg.strip_prefix(b"KEYS") else {
        return false;
    };
    let open = skip_ws(rest, 0);
    rest.get(open) == Some(&b'[')
        && argument_end(rest, open + 1, b"]").is_some_and(|(close, _)| close + 1 == rest.len())
}

/// Where the code starting at `from` reaches one of `ends` (a `,`, `)` or `]`) outside
/// brackets and string literals: its position and which; None when the code ends first.
fn argument_end(code: &[u8], from: usize, ends: &[u8]) -> Option<(usize, u8)> {
    let mut depth = 0usize;
    let mut i = from;
    while let Some(&b) = code.get(i) {
        match b {
            _ if depth == 0 && ends.contains(&b) => return Some((i, b)),
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.checked_sub(1)?,
            b'\'' | b'"' => {
                i += 1;
                while let Some(&c) = code.get(i) {
                    if c == b'\\' {
                        i += 1;
                    } else if c == b {
                        break;
                    }
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

impl Script {
    /// The code the interpreter compiles.
    pub fn code(&self) -> &[u8] {
        self.body.get(self.code_at..).unwrap_or(b"")
    }
}

/// The SHA1 of `body`, in lowercase hex.
pub fn sha_of(body: &[u8]) -> Sha {
    let hex = crate::sha1::hex(&crate::sha1::Sha1::digest(body));
    let mut sha = [0u8; 40];
    for (d, s) in sha.iter_mut().zip(hex.as_bytes()) {
        *d = *s;
    }
    sha
}

/// A SHA1 as a client gave it, lowercased (EVALSHA, SCRIPT EXISTS); `None` unless 40
/// bytes long.
pub fn sha_arg(arg: &[u8]) -> Option<Sha> {
    let mut sha = [0u8; 40];
    if arg.len() != 40 {
        return None;
    }
    for (d, s) in sha.iter_mut().zip(arg) {
        *d = s.to_ascii_lowercase();
    }
    Some(sha)
}

/// The script cache every thread shares, and the configuration scripts read.
#[derive(Debug, Default)]
pub struct Scripts {
    map: RwLock<HashMap<Sha, Arc<Script>>>,
    /// Bumped by SCRIPT FLUSH: each thread's interpreter starts again.
    generation: AtomicU64,
    /// `busy-reply-threshold`, milliseconds.
    busy_after: AtomicU64,
    /// `lua-allow-undeclared-keys`.
    undeclared: AtomicBool,
}

/// Scripts running past `busy-reply-threshold`, how many of them wrote, and how many are
/// functions (one server per process: the interpreters' hooks, which see no server
/// state, count here).
static BUSY: AtomicUsize = AtomicUsize::new(0);
static BUSY_WROTE: AtomicUsize = AtomicUsize::new(0);
static BUSY_FUNCTIONS: AtomicUsize = AtomicUsize::new(0);
/// Bumped by SCRIPT KILL: a busy script started before it stops.
static KILL_EPOCH: AtomicU64 = AtomicU64::new(0);

/// Whether a script runs past `busy-reply-threshold` (other clients get BUSY).
pub fn busy() -> bool {
    BUSY.load(Ordering::Relaxed) > 0
}

/// The error other clients get while a script is busy: redis-server names the kill
/// command of what runs (SCRIPT KILL for EVAL, FUNCTION KILL for FCALL).
pub fn busy_error() -> &'static [u8] {
    if BUSY_FUNCTIONS.load(Ordering::Relaxed) > 0 {
        crate::errors::BUSY_FUNCTION
    } else {
        crate::errors::BUSY_SCRIPT
    }
}

/// Whether the busy script is an EVAL's (no function is busy).
pub fn busy_eval() -> bool {
    busy() && BUSY_FUNCTIONS.load(Ordering::Relaxed) == 0
}

/// A script passed the threshold; `wrote`: it wrote already; `function`: it is FCALL's.
pub fn enter_busy(wrote: bool, function: bool) {
    BUSY.fetch_add(1, Ordering::SeqCst);
    if wrote {
        BUSY_WROTE.fetch_add(1, Ordering::SeqCst);
    }
    if function {
        BUSY_FUNCTIONS.fetch_add(1, Ordering::SeqCst);
    }
}

/// A busy script wrote (it can no longer be killed).
pub fn busy_wrote() {
    BUSY_WROTE.fetch_add(1, Ordering::SeqCst);
}

/// A busy script ended; `wrote`: it had written; `function`: it was FCALL's.
pub fn leave_busy(wrote: bool, function: bool) {
    if let Ok(mut running) = RUNNING.lock() {
        *running = None;
    }
    BUSY.fetch_sub(1, Ordering::SeqCst);
    if wrote {
        BUSY_WROTE.fetch_sub(1, Ordering::SeqCst);
    }
    if function {
        BUSY_FUNCTIONS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The busy function, for FUNCTION STATS: its name, the command that runs it, since
/// when.
#[derive(Clone, Debug)]
pub struct Running {
    /// The function's name.
    pub name: Vec<u8>,
    /// The command, as the client sent it.
    pub command: Vec<Vec<u8>>,
    /// When it started.
    pub started: std::time::Instant,
}

/// The busy script, when it could describe itself (one run on its shard).
static RUNNING: std::sync::Mutex<Option<Running>> = std::sync::Mutex::new(None);

/// Records the busy script (set as it turns busy, cleared as it ends).
pub fn set_running(running: Running) {
    if let Ok(mut slot) = RUNNING.lock() {
        *slot = Some(running);
    }
}

/// The busy script, if one runs and described itself.
pub fn running() -> Option<Running> {
    RUNNING.lock().ok().and_then(|r| r.clone())
}

/// `DEBUG SET-DISABLE-DENY-SCRIPTS`: scripts may call commands flagged `noscript` (for
/// tests; those Goblin cannot run from a script are refused all the same).
static DENY_DISABLED: AtomicBool = AtomicBool::new(false);

/// Sets `DEBUG SET-DISABLE-DENY-SCRIPTS`.
pub fn set_deny_disabled(disabled: bool) {
    DENY_DISABLED.store(disabled, Ordering::Relaxed);
}

/// Whether scripts may call commands flagged `noscript` (see [`set_deny_disabled`]).
pub fn deny_disabled() -> bool {
    DENY_DISABLED.load(Ordering::Relaxed)
}

/// The kill epoch a script starts in.
pub fn kill_epoch() -> u64 {
    KILL_EPOCH.load(Ordering::SeqCst)
}

/// SCRIPT KILL (`eval`) or FUNCTION KILL, as redis-server's `scriptKill` decides.
pub fn kill(eval: bool) -> Kill {
    if BUSY.load(Ordering::SeqCst) == 0 {
        return Kill::NotBusy;
    }
    if BUSY_WROTE.load(Ordering::SeqCst) > 0 {
        return Kill::Unkillable;
    }
    let functions = BUSY_FUNCTIONS.load(Ordering::SeqCst) > 0;
    if eval && functions {
        return Kill::OtherKind(crate::errors::BUSY_FUNCTION);
    }
    if !eval && !functions {
        return Kill::OtherKind(crate::errors::BUSY_SCRIPT);
    }
    KILL_EPOCH.fetch_add(1, Ordering::SeqCst);
    Kill::Killed
}

/// What SCRIPT KILL found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kill {
    /// No script is busy.
    NotBusy,
    /// A busy script wrote: it cannot be stopped.
    Unkillable,
    /// What is busy is a function and this is SCRIPT KILL, or the other way round: the
    /// BUSY error naming the right command.
    OtherKind(&'static [u8]),
    /// The busy scripts will stop.
    Killed,
}

impl Kill {
    /// The error SCRIPT KILL or FUNCTION KILL answers; `None` for `+OK`.
    pub fn error(self) -> Option<&'static [u8]> {
        match self {
            Kill::NotBusy => Some(b"NOTBUSY No scripts in execution right now."),
            Kill::Unkillable => Some(
                b"UNKILLABLE Sorry the script already executed write commands against the \
                  dataset. You can either wait the script termination or kill the server in a \
                  hard way using the SHUTDOWN NOSAVE command.",
            ),
            Kill::OtherKind(busy) => Some(busy),
            Kill::Killed => None,
        }
    }
}

impl Scripts {
    /// An empty cache, configured by `config`.
    pub fn new(config: &crate::config::Config) -> Scripts {
        let scripts = Scripts::default();
        scripts.configure(config);
        scripts
    }

    /// Takes the options scripts read from `config` (at start, and after CONFIG SET).
    pub fn configure(&self, config: &crate::config::Config) {
        self.busy_after
            .store(config.busy_reply_threshold, Ordering::Relaxed);
        self.undeclared
            .store(config.lua_allow_undeclared_keys, Ordering::Relaxed);
    }

    /// `busy-reply-threshold`, milliseconds (0: never busy).
    pub fn busy_after(&self) -> u64 {
        self.busy_after.load(Ordering::Relaxed)
    }

    /// `lua-allow-undeclared-keys`.
    pub fn undeclared_allowed(&self) -> bool {
        self.undeclared.load(Ordering::Relaxed)
    }

    /// The script with this SHA1.
    pub fn get(&self, sha: &Sha) -> Option<Arc<Script>> {
        self.map.read().ok()?.get(sha).cloned()
    }

    /// Adds a script (checked already: it compiles).
    pub fn insert(&self, script: Arc<Script>) {
        if let Ok(mut map) = self.map.write() {
            map.entry(script.sha).or_insert(script);
        }
    }

    /// Whether the script is cached.
    pub fn contains(&self, sha: &Sha) -> bool {
        self.map.read().is_ok_and(|m| m.contains_key(sha))
    }

    /// SCRIPT FLUSH.
    pub fn flush(&self) {
        if let Ok(mut map) = self.map.write() {
            map.clear();
        }
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// The current generation (see [`Scripts::flush`]).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// How many scripts are cached, and their bodies' bytes.
    pub fn stats(&self) -> (usize, usize) {
        self.map.read().map_or((0, 0), |m| {
            (m.len(), m.values().map(|s| s.body.len()).sum())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::may_stray;

    fn table() -> crate::table::CommandTable {
        crate::families::table().expect("the command table")
    }

    #[test]
    fn code_that_keeps_to_its_keys() {
        let t = table();
        for code in [
            "return 1",
            "return redis.sha1hex('x')",
            "return redis.call('get', KEYS[1])",
            "redis.call('set', KEYS[1], ARGV[1]) return redis.pcall ( 'incr' , KEYS [ 2 ] )",
            "return redis.call('ping')",
            "redis.log(redis.LOG_WARNING, 'x') return redis.call(\"hget\", KEYS[i], 'f')",
            "return redis.call('publish', 'ch', 'm')",
            "return redis.call('fcall', 'f', 1, 'k')",
            "return redis.call('nosuch', 'k')",
            "return redis.call('object', 'encoding', KEYS[1])",
            "return redis.call('config', 'get', 'maxmemory')",
            "return redis.call('get', KEYS[1]) .. redis.call('hget', KEYS [ 2 ] , 'f')",
            "local myredis = 1 return redis.call('get', KEYS[1]) -- predis",
        ] {
            assert!(!may_stray(code.as_bytes(), &t), "{code}");
        }
    }

    #[test]
    fn any_code_is_read_without_a_panic() {
        let t = table();
        let pieces: [&[u8]; 14] = [
            b"redis", b".", b"call", b"pcall", b"(", b")", b",", b"KEYS", b"[", b"]", b"'get'",
            b"\"", b"'", b" ",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            let mut code = Vec::new();
            for _ in 0..(seed % 24) {
                seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                code.extend_from_slice(pieces[(seed >> 33) as usize % pieces.len()]);
            }
            let _ = may_stray(&code, &t);
        }
    }

    #[test]
    fn code_that_calls_every_shard() {
        use super::calls_every_shard;
        let t = table();
        for code in [
            "return redis.call('keys', ARGV[1])",
            "return redis.call( \"DBSIZE\" )",
            "local rcall = redis.call return rcall('Scan', 0)",
            "return redis.pcall('info', 'server')",
            "return redis.call('randomkey')",
            "return redis.call('flushall')",
            "redis.call('SWAPDB', 0, 1)",
        ] {
            assert!(calls_every_shard(code.as_bytes(), &t), "{code}");
        }
        for code in [
            "return redis.call('get', KEYS[1])",
            "return redis.call('hget', KEYS[1], 'info')",
            "return redis.call('keyspace')",
            "return redis.call('config', 'get', 'x')",
            "return redis.call(cmd)",
            "return ('",
            "(",
        ] {
            assert!(!calls_every_shard(code.as_bytes(), &t), "{code}");
        }
    }

    #[test]
    fn keys_tagged_together() {
        use super::strays_with;
        let keys = |k: &[&'static str]| strays_with(k.iter().map(|k| k.as_bytes()));
        assert_eq!(keys(&["{u1}a", "{u1}:b", "x{u1}"]), Some(false));
        assert_eq!(keys(&["{u1}a", "{u2}b"]), Some(true));
        assert_eq!(keys(&["{u1}a", "b"]), Some(true));
        assert_eq!(keys(&["a"]), Some(true));
        assert_eq!(keys(&["{}a"]), Some(true));
        assert_eq!(keys(&[]), None);
        assert_eq!(keys(&["{bull}:q:wait"]), Some(false));
    }

    #[test]
    fn code_that_may_stray() {
        let t = table();
        for code in [
            "return redis.call('get', ARGV[1])",
            "return redis.call('get', 'k')",
            "local rcall = redis.call return rcall('get', KEYS[1])",
            "return pcall(redis.call, 'get', KEYS[1])",
            "local r = redis return r.call('get', KEYS[1])",
            "return redis['call']('get', KEYS[1])",
            "return redis.call('mget', unpack(KEYS))",
            "return redis.call('get', KEYS[1] .. ':x')",
            "return redis.call('get', prefix .. KEYS[1])",
            "return redis.call('set', KEYS[1], 'a,b') + redis.call('get', 'x')",
            "return redis.call(cmd, key)",
            "return redis.call(('g' .. 'et'), KEYS[#KEYS])",
            "return redis.call('object', 'encoding', 'k')",
            "return redis.call('del', KEYS[1], KEYS[2])",
            "return redis.call('get', KEYS[1]:sub(1))",
        ] {
            assert!(may_stray(code.as_bytes(), &t), "{code}");
        }
    }
}
