//! The command table: the single source of every command's name, arity, flags and key
//! positions, checked before any handler runs, and the source of COMMAND INFO/DOCS/COUNT.
//!
//! Each command family registers its commands with [`CommandTable::add`] (or
//! [`CommandTable::add_container`] for commands with subcommands, like CLIENT). A Redis
//! command's arity, flags and key positions come from its generated [`Meta`] entry
//! (`meta.rs`, read from redis-server by `scripts/gen-command-meta.py`), so they cannot
//! drift from what COMMAND INFO reports; Goblin's own commands write the same entry by
//! hand.

pub mod args;
pub mod handler;
pub mod keys;
pub mod meta;
pub mod meta_node;

use std::collections::HashMap;

use crate::errors;
use crate::runtime::msg::LockMode;
use crate::table::handler::{Args, Exec};
use crate::txn::locks::{LockKey, lock_key};
use crate::txn::plan::{CrossShard, Locking, PlanFn};
pub use keys::{KeyFinder, KeyFlags};
pub use meta_node::{Meta, Node};

/// Longest command name looked up; longer names are unknown without hashing them.
const MAX_NAME_LEN: usize = 64;

/// Command flags, as COMMAND INFO names them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags(u32);

impl Flags {
    /// Modifies the keyspace.
    pub const WRITE: Flags = Flags(1);
    /// Only reads the keyspace.
    pub const READONLY: Flags = Flags(1 << 1);
    /// May grow memory.
    pub const DENYOOM: Flags = Flags(1 << 2);
    /// Administrative.
    pub const ADMIN: Flags = Flags(1 << 3);
    /// Not allowed in scripts.
    pub const NOSCRIPT: Flags = Flags(1 << 4);
    /// O(1) or O(log N).
    pub const FAST: Flags = Flags(1 << 5);
    /// Not allowed inside MULTI.
    pub const NO_MULTI: Flags = Flags(1 << 6);
    /// Allowed before authentication.
    pub const NO_AUTH: Flags = Flags(1 << 7);
    /// Key positions cannot be read from first/last/step alone.
    pub const MOVABLE_KEYS: Flags = Flags(1 << 8);
    /// May be called without keys (COMMAND GETKEYS then answers an empty list).
    pub const NO_MANDATORY_KEYS: Flags = Flags(1 << 9);
    /// Allowed while the dataset is loading.
    pub const LOADING: Flags = Flags(1 << 10);
    /// Not a write, but propagated when it runs (PUBLISH, EVAL …): CLIENT PAUSE WRITE
    /// holds it.
    pub const MAY_REPLICATE: Flags = Flags(1 << 11);
    /// Not shown to MONITOR clients.
    pub const SKIP_MONITOR: Flags = Flags(1 << 12);
    /// Not kept by SLOWLOG.
    pub const SKIP_SLOWLOG: Flags = Flags(1 << 13);
    /// Runs while a script is busy (`allow_busy`).
    pub const ALLOW_BUSY: Flags = Flags(1 << 14);
    /// Served in a slot being imported as if the client had sent ASKING
    /// (RESTORE-ASKING).
    pub const ASKING: Flags = Flags(1 << 15);
    /// Its lookups leave keys' access times alone (Redis's `LOOKUP_NOTOUCH`: TTL, TYPE,
    /// EXISTS …); internal, as `may_replicate` is hidden.
    pub const NO_TOUCH: Flags = Flags(1 << 16);
    /// Served by a replica whose link is down though `replica-serve-stale-data` is `no`
    /// (INFO, PING, REPLICAOF …).
    pub const STALE: Flags = Flags(1 << 17);
    /// Touches keys it does not name (SCAN, RANDOMKEY: their lazy expiry); internal, as
    /// redis-server's `CMD_TOUCHES_ARBITRARY_KEYS`: what they propagate, run directly,
    /// is not wrapped in MULTI/EXEC.
    pub const TOUCHES_ARBITRARY_KEYS: Flags = Flags(1 << 18);
    /// Run only by the clients `enable-debug-command` (DEBUG) or `enable-module-command`
    /// (MODULE LOAD, LOADEX, UNLOAD) allows; internal, as redis-server's `CMD_PROTECTED`
    /// is hidden from COMMAND INFO.
    pub const PROTECTED: Flags = Flags(1 << 19);

    const NAMES: &'static [(&'static str, Flags)] = &[
        ("write", Flags::WRITE),
        ("readonly", Flags::READONLY),
        ("denyoom", Flags::DENYOOM),
        ("admin", Flags::ADMIN),
        ("noscript", Flags::NOSCRIPT),
        ("fast", Flags::FAST),
        ("no_multi", Flags::NO_MULTI),
        ("no_auth", Flags::NO_AUTH),
        ("movablekeys", Flags::MOVABLE_KEYS),
        ("no_mandatory_keys", Flags::NO_MANDATORY_KEYS),
        ("loading", Flags::LOADING),
        ("may_replicate", Flags::MAY_REPLICATE),
        ("skip_monitor", Flags::SKIP_MONITOR),
        ("skip_slowlog", Flags::SKIP_SLOWLOG),
        ("allow_busy", Flags::ALLOW_BUSY),
        ("asking", Flags::ASKING),
        ("stale", Flags::STALE),
    ];

    /// Whether every flag of `other` is set.
    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the command writes or is propagated (`write` or `may_replicate`): what
    /// CLIENT PAUSE WRITE holds.
    pub fn writes_or_propagates(self) -> bool {
        self.intersects(Flags::WRITE) || self.intersects(Flags::MAY_REPLICATE)
    }

    /// Whether any flag of `other` is set.
    pub fn intersects(self, other: Flags) -> bool {
        self.0 & other.0 != 0
    }

    /// These flags with those of `other` set (`on`) or cleared.
    #[must_use]
    pub fn with(self, other: Flags, on: bool) -> Flags {
        if on {
            Flags(self.0 | other.0)
        } else {
            Flags(self.0 & !other.0)
        }
    }

    /// The flags COMMAND INFO hides on purpose that redis-server 7.0's command table
    /// gives: `may_replicate` (EVAL, EVALSHA, FCALL, PFCOUNT, PUBLISH, SPUBLISH), which
    /// CLIENT PAUSE WRITE holds and read-only scripts refuse.
    /// And `NO_TOUCH` for the commands whose lookups redis-server makes with
    /// `LOOKUP_NOTOUCH`, `TOUCHES_ARBITRARY_KEYS` for SCAN and RANDOMKEY, `PROTECTED` for
    /// DEBUG and MODULE's loading and unloading.
    fn with_hidden(self, name: &str) -> Flags {
        let mut flags = self;
        if matches!(
            name,
            "eval" | "evalsha" | "fcall" | "pfcount" | "publish" | "spublish"
        ) {
            flags.0 |= Flags::MAY_REPLICATE.0;
        }
        if matches!(
            name,
            "exists"
                | "type"
                | "ttl"
                | "pttl"
                | "expiretime"
                | "pexpiretime"
                | "memory|usage"
                | "object|encoding"
                | "object|refcount"
        ) {
            flags.0 |= Flags::NO_TOUCH.0;
        }
        if matches!(name, "scan" | "randomkey") {
            flags.0 |= Flags::TOUCHES_ARBITRARY_KEYS.0;
        }
        if matches!(
            name,
            "debug" | "module|load" | "module|loadex" | "module|unload"
        ) {
            flags.0 |= Flags::PROTECTED.0;
        }
        flags
    }

    fn from_names(node: &Node) -> Flags {
        node.items()
            .iter()
            .filter_map(Node::text)
            .fold(Flags(0), |acc, name| {
                Flags::NAMES
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map_or(acc, |(_, f)| Flags(acc.0 | f.0))
            })
    }
}

/// One command (or subcommand) as the table knows it.
#[derive(Debug)]
pub struct CommandSpec {
    /// Full lowercase name; subcommands are `container|sub`, as Redis names them.
    pub name: &'static str,
    /// Argument count including the name: N exactly, or -N for at least N.
    pub arity: i64,
    /// Flags.
    pub flags: Flags,
    /// Where the keys are, from the key specs (see the `keys` module).
    pub key_finder: KeyFinder,
    /// How and where it runs.
    pub exec: Exec,
    /// Index in the table, for per-command statistics.
    pub id: usize,
    /// How it runs when its keys span shards (its family's plan); `None`: its keys never
    /// span shards.
    pub cross_shard: Option<CrossShard>,
    /// When this holds of an invocation, it may wait (GOBLIN.CLAIM … BLOCK), which only a
    /// plan can do: with its keys on its connection's own shard it runs there first, and
    /// its plan takes over only if it asks to wait (`ShardCtx::wait`); with them on
    /// another shard, its plan runs.
    pub plan_if: Option<fn(&crate::runtime::server::Shared, &Args<'_>) -> bool>,
    /// Runs with the whole shard rather than as one unit of work (scripts: each command
    /// a script calls is a unit of its own, with its own events and effect).
    pub on_shard: Option<handler::OnShardFn>,
    /// Where its keys are when its key specs find none in an invocation it accepts (the
    /// specs call `PFMERGE dest` invalid, as COMMAND GETKEYS answers, yet it writes
    /// `dest`): for routing and locking only.
    pub route_keys: Option<keys::CustomFinder>,
    /// Whether MULTI queues it (QUIT, like the transaction commands themselves, runs at
    /// once).
    pub queued_in_multi: bool,
    /// A RESP2 client subscribed to channels may run it (the Pub/Sub commands, PING,
    /// QUIT, RESET).
    pub while_subscribed: bool,
    info: &'static Node,
    docs: &'static Node,
    subcommands: Vec<usize>,
}

impl CommandSpec {
    /// Whether the command is in ACL category `name` (`stream`, `read` …; any case).
    pub fn in_acl_category(&self, name: &[u8]) -> bool {
        self.info
            .items()
            .get(meta_node::info::ACL_CATEGORIES)
            .map_or(&[][..], Node::items)
            .iter()
            .filter_map(Node::text)
            .any(|c| {
                c.strip_prefix('@')
                    .is_some_and(|c| c.as_bytes().eq_ignore_ascii_case(name))
            })
    }

    /// Whether `argc` arguments (name included) satisfy the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }

    /// Whether it may run a script (EVAL, FCALL and the rest: the commands run on their
    /// shard whole), whose connection's worker then lends its connections to the
    /// stand-in (`runtime/standin.rs`). (A script inside MULTI runs in EXEC's plan, which
    /// lends them too.)
    #[inline]
    pub fn may_run_script(&self) -> bool {
        self.on_shard.is_some()
    }

    /// Whether this is a container of subcommands.
    pub fn is_container(&self) -> bool {
        !self.subcommands.is_empty()
    }

    /// Calls `f` with the argument index of each key of the command `args`, and the lock a
    /// transaction takes on it: shared for a key the command only reads, exclusive
    /// otherwise.
    /// (Arguments that do not hold the keys the command's key specs describe name no
    /// key: the command answers its own arity or syntax error, wherever it runs.)
    pub fn for_each_key(&self, args: &Args<'_>, mut f: impl FnMut(usize, LockMode)) {
        let mut found = |i: usize, flags: KeyFlags| {
            f(
                i,
                if flags.is_read_only() {
                    LockMode::Shared
                } else {
                    LockMode::Exclusive
                },
            )
        };
        if self.key_finder.find(args, &mut found).is_err()
            && let Some(route) = self.route_keys
        {
            let _ = route(args, &mut found);
        }
    }

    /// Calls `f` with the argument index of each key of the command `args` (routing and
    /// ownership need the positions only, which cost less than the flags).
    #[inline]
    pub fn for_each_key_position(&self, args: &Args<'_>, mut f: impl FnMut(usize)) {
        if self.key_finder.positions(args, &mut f).is_err()
            && let Some(route) = self.route_keys
        {
            let _ = route(args, &mut |i, _| f(i));
        }
    }

    /// Calls `f` with the argument index of each key of the command `args`, and of each
    /// argument Redis Cluster routes by though it names no key (sharded Pub/Sub's
    /// channels): what decides the slot a command goes to.
    pub fn for_each_routed_position(&self, args: &Args<'_>, mut f: impl FnMut(usize)) {
        if self.key_finder.routed_positions(args, &mut f).is_err()
            && let Some(route) = self.route_keys
        {
            let _ = route(args, &mut |i, _| f(i));
        }
    }

    /// The keys of the command `args` with their lock modes.
    pub fn lock_needs(&self, args: &Args<'_>) -> Vec<(Vec<u8>, LockMode)> {
        let mut needs = Vec::new();
        self.for_each_key(args, |i, mode| needs.push((args.get(i).to_vec(), mode)));
        needs
    }

    /// The keys of the command `args` as the lock table knows them, with their modes.
    pub fn lock_keys(&self, args: &Args<'_>) -> Vec<(LockKey, LockMode)> {
        let mut keys = Vec::new();
        self.for_each_key(args, |i, mode| keys.push((lock_key(args.get(i)), mode)));
        keys
    }

    /// Whether some invocation names more than one key.
    pub fn may_name_several_keys(&self) -> bool {
        self.key_finder.may_span_several_keys()
    }

    /// Plans this command's transaction when its keys span shards (or always, for a
    /// [`Exec::Plan`] command).
    pub fn plan(&self) -> Option<CrossShard> {
        match self.exec {
            Exec::Plan(cross) => Some(cross),
            _ => self.cross_shard,
        }
    }
}

/// Options of a command being registered.
pub struct Registered<'a>(&'a mut CommandSpec);

impl Registered<'_> {
    /// How the command runs when its keys span shards: its family's plan.
    pub fn cross_shard(self, plan: PlanFn, locking: Locking) -> Self {
        self.0.cross_shard = Some(CrossShard { plan, locking });
        self
    }

    /// Invocations for which `when` holds may wait: they run as the command's plan unless
    /// their keys are on the connection's own shard and they answer at once there.
    pub fn plan_if(self, when: fn(&crate::runtime::server::Shared, &Args<'_>) -> bool) -> Self {
        self.0.plan_if = Some(when);
        self
    }

    /// Runs with the whole shard, not as one unit of work ([`CommandSpec::on_shard`]).
    pub fn on_shard(self, run: handler::OnShardFn) -> Self {
        self.0.on_shard = Some(run);
        self
    }

    /// The command's own key search, for what its key specs cannot say (Redis's
    /// `getkeys_proc`).
    pub fn custom_keys(self, finder: keys::CustomFinder) -> Self {
        self.0.key_finder = self.0.key_finder.clone().with_custom(finder);
        self
    }

    /// The command names one key at most, whatever its key specs could say.
    pub fn one_key(self) -> Self {
        self.0.key_finder = self.0.key_finder.clone().naming_one_key();
        self
    }

    /// Where the command's keys are, for routing and locking, in invocations it accepts
    /// but whose keys its key specs cannot find (COMMAND GETKEYS still answers from the
    /// specs, as redis-server does).
    pub fn route_keys(self, finder: keys::CustomFinder) -> Self {
        self.0.route_keys = Some(finder);
        self
    }

    /// MULTI does not queue the command: it runs at once (QUIT).
    pub fn not_queued(self) -> Self {
        self.0.queued_in_multi = false;
        self
    }

    /// A RESP2 client subscribed to channels may run the command (others are refused
    /// until it unsubscribes from everything).
    pub fn while_subscribed(self) -> Self {
        self.0.while_subscribed = true;
        self
    }
}

/// Why a command was rejected before running.
#[derive(Debug, PartialEq, Eq)]
pub struct Rejection {
    /// The command, when it was found (its arguments were wrong).
    pub spec: Option<usize>,
    /// The error reply, already formatted (and to be sanitised when sent).
    pub message: Vec<u8>,
}

/// All commands, by lowercase name.
#[derive(Debug, Default)]
pub struct CommandTable {
    specs: Vec<CommandSpec>,
    by_name: HashMap<Box<[u8]>, usize, foldhash::fast::RandomState>,
    top_level: Vec<usize>,
    /// Names this table's [`LAST_LOOKUP`] entries: a fresh number whenever a name is
    /// added or renamed (0: none yet, never cached).
    generation: u64,
}

/// The numbers [`CommandTable::generation`] takes.
static GENERATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A name looked up and what it found, as sent (case and all): most connections send
/// the same command over and over, and comparing the bytes costs less than lowercasing
/// and hashing them. Per thread, for one table generation.
#[derive(Clone, Copy)]
struct LastLookup {
    generation: u64,
    len: u8,
    name: [u8; LAST_LOOKUP_NAME],
    id: usize,
}

/// Longest name [`LAST_LOOKUP`] keeps.
const LAST_LOOKUP_NAME: usize = 16;

thread_local! {
    static LAST_LOOKUP: std::cell::Cell<Option<LastLookup>> = const { std::cell::Cell::new(None) };
}

impl CommandTable {
    /// A table with the commands `register` adds, checked: a command whose keys can span
    /// shards must have a plan for it.
    ///
    /// # Errors
    /// The commands that can name keys of several shards and have no plan.
    pub fn build(register: impl FnOnce(&mut CommandTable)) -> Result<CommandTable, String> {
        let mut table = CommandTable::default();
        register(&mut table);
        let unplanned: Vec<&str> = table
            .specs
            .iter()
            .filter(|s| matches!(s.exec, Exec::Shard(_)))
            .filter(|s| s.may_name_several_keys() && s.cross_shard.is_none())
            .map(|s| s.name)
            .collect();
        if unplanned.is_empty() {
            Ok(table)
        } else {
            Err(format!(
                "commands whose keys can span shards but that have no cross-shard plan: {}",
                unplanned.join(", ")
            ))
        }
    }

    fn push(
        &mut self,
        name: &'static str,
        info: &'static Node,
        docs: &'static Node,
        exec: Exec,
    ) -> usize {
        let items = info.items();
        let int = |i: usize| items.get(i).and_then(Node::int).unwrap_or(0);
        let id = self.specs.len();
        self.generation = GENERATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.specs.push(CommandSpec {
            name,
            arity: int(meta_node::info::ARITY),
            flags: items
                .get(meta_node::info::FLAGS)
                .map_or(Flags::default(), Flags::from_names)
                .with_hidden(name),
            key_finder: KeyFinder::from_info(info),
            exec,
            id,
            cross_shard: None,
            plan_if: None,
            on_shard: None,
            route_keys: None,
            queued_in_multi: !matches!(exec, Exec::Multi(_)),
            while_subscribed: false,
            info,
            docs,
            subcommands: Vec::new(),
        });
        id
    }

    /// Registers a command described by `meta`; options follow on what it returns.
    pub fn add(&mut self, meta: &'static Meta, exec: Exec) -> Registered<'_> {
        let name = meta.info.items().first().and_then(Node::text).unwrap_or("");
        let id = self.push(name, &meta.info, &meta.docs, exec);
        self.by_name.insert(name.as_bytes().into(), id);
        self.top_level.push(id);
        Registered(&mut self.specs[id])
    }

    /// Registers a container command (CLIENT, CONFIG, …) with the subcommands Goblin
    /// implements. Each is named as in Redis (`"setname"`) and found in `meta`, or given an
    /// entry of its own (`Some(meta)`) when redis-server 7.0 lacks it.
    /// `exec` runs the container called with no subcommand (COMMAND does; CLIENT's arity
    /// forbids it, so it gets [`Exec::Container`]).
    pub fn add_container(
        &mut self,
        meta: &'static Meta,
        exec: Exec,
        subcommands: &[(&'static str, Option<&'static Meta>, Exec)],
    ) {
        let name = meta.info.items().first().and_then(Node::text).unwrap_or("");
        let id = self.push(name, &meta.info, &meta.docs, exec);
        self.by_name.insert(name.as_bytes().into(), id);
        self.top_level.push(id);
        let redis_subs = meta
            .info
            .items()
            .get(meta_node::info::SUBCOMMANDS)
            .map_or(&[][..], Node::items);
        for &(sub, own, exec) in subcommands {
            let (info, docs) = match own {
                Some(m) => (&m.info, &m.docs),
                None => {
                    let info = redis_subs.iter().find(|n| {
                        n.items()
                            .first()
                            .and_then(Node::text)
                            .and_then(|full| full.split('|').nth(1))
                            == Some(sub)
                    });
                    let Some(info) = info else {
                        panic!("no COMMAND INFO entry for {name}|{sub}: regenerate meta.rs");
                    };
                    let full = info.items().first().and_then(Node::text).unwrap_or("");
                    let docs = meta.docs.get("subcommands").and_then(|s| s.get(full));
                    (info, docs.unwrap_or(&Node::Null))
                }
            };
            let full = info.items().first().and_then(Node::text).unwrap_or("");
            let sub_id = self.push(full, info, docs, exec);
            self.specs[id].subcommands.push(sub_id);
        }
    }

    /// The command with this (case-insensitive) name.
    pub fn lookup(&self, name: &[u8]) -> Option<&CommandSpec> {
        if name.len() > MAX_NAME_LEN {
            return None;
        }
        let cacheable = self.generation != 0 && name.len() <= LAST_LOOKUP_NAME;
        if cacheable
            && let Ok(Some(last)) = LAST_LOOKUP.try_with(std::cell::Cell::get)
            && last.generation == self.generation
            && usize::from(last.len) == name.len()
            && last.name[..name.len()] == *name
        {
            return self.specs.get(last.id);
        }
        let mut lower = [0u8; MAX_NAME_LEN];
        let lower = &mut lower[..name.len()];
        lower.copy_from_slice(name);
        lower.make_ascii_lowercase();
        let id = *self.by_name.get(&*lower)?;
        if cacheable {
            let mut last = LastLookup {
                generation: self.generation,
                len: name.len() as u8,
                name: [0; LAST_LOOKUP_NAME],
                id,
            };
            last.name[..name.len()].copy_from_slice(name);
            let _ = LAST_LOOKUP.try_with(|l| l.set(Some(last)));
        }
        self.specs.get(id)
    }

    /// `rename-command old new`: the command is reachable as `new` only; an empty `new`
    /// removes it (as redis.conf's directive).
    ///
    /// # Errors
    /// No such command, or `new` is taken or too long.
    pub fn rename(&mut self, old: &str, new: &str) -> Result<(), String> {
        let old = old.to_ascii_lowercase();
        let new = new.to_ascii_lowercase();
        if !new.is_empty()
            && (self.by_name.contains_key(new.as_bytes()) || new.len() > MAX_NAME_LEN)
        {
            return Err(format!(
                "rename-command {old} {new}: the new name is taken or too long"
            ));
        }
        let id = self
            .by_name
            .remove(old.as_bytes())
            .ok_or_else(|| format!("rename-command {old}: no such command"))?;
        if !new.is_empty() {
            self.by_name.insert(new.into_bytes().into_boxed_slice(), id);
        }
        self.generation = GENERATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// The subcommand of `container` with this (case-insensitive) name.
    pub fn lookup_sub(&self, container: &CommandSpec, sub: &[u8]) -> Option<&CommandSpec> {
        container
            .subcommands
            .iter()
            .map(|&id| &self.specs[id])
            .find(|spec| {
                spec.name
                    .split('|')
                    .nth(1)
                    .is_some_and(|s| s.as_bytes().eq_ignore_ascii_case(sub))
            })
    }

    /// The command `name` names: a command, or `container|subcommand` (as redis-server's
    /// `lookupCommandBySds`).
    pub fn lookup_full(&self, name: &[u8]) -> Option<&CommandSpec> {
        match name.iter().position(|&b| b == b'|') {
            None => self.lookup(name),
            Some(bar) => {
                let container = self.lookup(&name[..bar])?;
                if !container.is_container() {
                    return None;
                }
                self.lookup_sub(container, &name[bar + 1..])
            }
        }
    }

    /// The subcommands of `container` (none for a plain command).
    pub fn subcommands<'t>(
        &'t self,
        container: &'t CommandSpec,
    ) -> impl Iterator<Item = &'t CommandSpec> + 't {
        container.subcommands.iter().map(|&id| &self.specs[id])
    }

    /// Finds the command `args` invokes and checks its arity, with redis-server 7's errors.
    ///
    /// # Errors
    /// [`Rejection`] for an unknown command or subcommand, or a wrong argument count.
    pub fn resolve(&self, args: &Args<'_>) -> Result<&CommandSpec, Rejection> {
        let name = args.get(0);
        let Some(mut spec) = self.lookup(name) else {
            return Err(Rejection {
                spec: None,
                message: errors::unknown_command(args),
            });
        };
        if spec.is_container() && args.len() >= 2 {
            spec = self
                .lookup_sub(spec, args.get(1))
                .ok_or_else(|| Rejection {
                    spec: None,
                    message: errors::unknown_subcommand(name, args.get(1)),
                })?;
        }
        if !spec.arity_ok(args.len()) {
            return Err(Rejection {
                spec: Some(spec.id),
                message: errors::wrong_arity(spec.name),
            });
        }
        Ok(spec)
    }

    /// The spec with this table index.
    pub fn get(&self, id: usize) -> Option<&CommandSpec> {
        self.specs.get(id)
    }

    /// Every spec, subcommands included, in registration order.
    pub fn all(&self) -> &[CommandSpec] {
        &self.specs
    }

    /// Top-level commands, in registration order.
    pub fn top_level(&self) -> impl Iterator<Item = &CommandSpec> {
        self.top_level.iter().map(|&id| &self.specs[id])
    }

    /// Writes a command's COMMAND INFO entry, listing only the subcommands Goblin has.
    pub fn encode_info(&self, spec: &CommandSpec, out: &mut goblin_protocol::Encoder<'_>) {
        let items = spec.info.items();
        out.array(items.len());
        for (i, item) in items.iter().enumerate() {
            if i == meta_node::info::SUBCOMMANDS && spec.is_container() {
                out.array(spec.subcommands.len());
                for &sub in &spec.subcommands {
                    self.encode_info(&self.specs[sub], out);
                }
            } else {
                item.encode(out);
            }
        }
    }

    /// Writes a command's COMMAND DOCS entry, listing only the subcommands Goblin has.
    pub fn encode_docs(&self, spec: &CommandSpec, out: &mut goblin_protocol::Encoder<'_>) {
        let items = spec.docs.items();
        out.map(items.len() / 2);
        for kv in items.chunks_exact(2) {
            kv[0].encode(out);
            if kv[0].text() == Some("subcommands") {
                out.map(spec.subcommands.len());
                for &sub in &spec.subcommands {
                    let sub = &self.specs[sub];
                    out.bulk(sub.name.as_bytes());
                    self.encode_docs(sub, out);
                }
            } else {
                kv[1].encode(out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// COMMAND INFO's legacy first key, last key and step.
    fn legacy_triple(spec: &CommandSpec) -> (i64, i64, i64) {
        let items = spec.info.items();
        let int = |i: usize| items.get(i).and_then(Node::int).unwrap_or(0);
        (
            int(meta_node::info::FIRST_KEY),
            int(meta_node::info::LAST_KEY),
            int(meta_node::info::STEP),
        )
    }

    /// The argument indexes the legacy triple names for `argc` arguments.
    fn legacy_indexes(spec: &CommandSpec, argc: usize) -> Vec<usize> {
        let (first, last, step) = legacy_triple(spec);
        if first <= 0 {
            return Vec::new();
        }
        let last = if last < 0 {
            argc as i64 + last
        } else {
            last.min(argc as i64 - 1)
        };
        (first..=last)
            .step_by(step.max(1) as usize)
            .map(|i| i as usize)
            .collect()
    }

    /// For every command in the table, the key specs find the keys the legacy
    /// first/last/step find, at every argument count the arity allows (up to a few past
    /// the minimum).
    #[test]
    fn key_finder_agrees_with_the_legacy_positions() {
        let Ok(table) = crate::families::table() else {
            panic!("the command table does not build");
        };
        let buf = [b'x'; 16];
        let spans: Vec<std::ops::Range<usize>> = (0..16).map(|i| i..i + 1).collect();
        for spec in table.all() {
            // Movable keys (numkeys commands: LMPOP, ZUNIONSTORE …) have no legacy
            // positions to agree with: COMMAND INFO gives them 0 0 0.
            if spec.flags.contains(Flags::MOVABLE_KEYS) {
                continue;
            }
            // Shard channels (SSUBSCRIBE, SPUBLISH) have legacy positions, but their
            // key specs are NOT_KEY: they name no key.
            if !spec.key_finder.has_keys() {
                continue;
            }
            let counts = if spec.arity >= 0 {
                spec.arity..spec.arity + 1
            } else {
                -spec.arity..-spec.arity + 6
            };
            for argc in counts {
                let args = Args::new(&buf, &spans[..argc as usize]);
                let mut found = Vec::new();
                let mut result = spec.key_finder.find(&args, |i, _| found.push(i));
                let legacy = legacy_indexes(spec, argc as usize);
                let mut positions = Vec::new();
                let mut by_position = spec.key_finder.positions(&args, |i| positions.push(i));
                if by_position.is_err() && spec.route_keys.is_some() {
                    // Routing's own search for what the specs call invalid.
                    spec.for_each_key_position(&args, |i| positions.push(i));
                    by_position = Ok(());
                    found.clear();
                    spec.for_each_key(&args, |i, _| found.push(i));
                    result = Ok(());
                }
                assert_eq!(
                    (by_position, &positions),
                    (Ok(()), &legacy),
                    "{} positions with {argc} arguments",
                    spec.name
                );
                assert_eq!(
                    (result, found),
                    (Ok(()), legacy),
                    "{} with {argc} arguments",
                    spec.name
                );
            }
            let (first, last, _) = legacy_triple(spec);
            assert_eq!(spec.key_finder.has_keys(), first > 0, "{}", spec.name);
            assert_eq!(
                spec.key_finder.may_span_several_keys(),
                first > 0 && last != first,
                "{}",
                spec.name
            );
        }
    }

    #[test]
    fn a_multi_key_command_without_a_plan_is_refused_when_the_table_is_built() {
        fn noop(_: &mut handler::ShardCtx<'_>, _: &Args<'_>) {}
        let refused = CommandTable::build(|t| {
            t.add(&meta::GET, Exec::Shard(noop));
            t.add(&meta::MGET, Exec::Shard(noop));
        });
        assert_eq!(
            refused.err().as_deref(),
            Some("commands whose keys can span shards but that have no cross-shard plan: mget")
        );
        assert!(
            CommandTable::build(|t| {
                t.add(&meta::GET, Exec::Shard(noop));
            })
            .is_ok()
        );
    }

    #[test]
    fn the_last_name_looked_up_is_remembered_per_table_and_forgotten_on_rename() {
        fn noop(_: &mut handler::ShardCtx<'_>, _: &Args<'_>) {}
        let build = || {
            CommandTable::build(|t| {
                t.add(&meta::GET, Exec::Shard(noop));
                t.add(&meta::SET, Exec::Shard(noop));
            })
            .unwrap_or_default()
        };
        let (mut a, b) = (build(), build());
        let name = |t: &CommandTable, n: &[u8]| t.lookup(n).map(|s| s.name);
        for _ in 0..2 {
            assert_eq!(name(&a, b"GET"), Some("get"));
            assert_eq!(name(&a, b"get"), Some("get"));
            assert_eq!(name(&a, b"SET"), Some("set"));
        }
        // Another table on the same thread, then the first one again.
        assert_eq!(name(&b, b"SET"), Some("set"));
        assert_eq!(name(&a, b"SET"), Some("set"));
        assert_eq!(name(&a, b"GETX"), None);
        // Renamed after being looked up: the old name is gone at once.
        assert_eq!(name(&a, b"GET"), Some("get"));
        assert!(a.rename("get", "fetch").is_ok());
        assert_eq!(name(&a, b"GET"), None);
        assert_eq!(name(&a, b"FETCH"), Some("get"));
        // Names longer than what is kept still resolve (and are never cached).
        assert_eq!(name(&a, b"AVERYLONGCOMMANDNAME"), None);
    }

    #[test]
    fn every_generated_entry_is_well_formed() {
        for meta in meta::ALL {
            let items = meta.info.items();
            assert_eq!(items.len(), 10);
            assert!(items[0].text().is_some());
            assert!(items[1].int().is_some());
        }
    }
}
