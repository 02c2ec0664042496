//! Where a command's keys are, read from its COMMAND INFO key specs.
//!
//! A [`KeyFinder`] is compiled once, when the table is built, from the key specs of a
//! command's COMMAND INFO entry (item 8): each spec says where the search for its keys
//! begins (`index`: at a fixed argument; `keyword`: after a keyword, searched forwards or
//! backwards) and how the keys are laid out from there (`range`: up to a last key, every
//! `keystep`, possibly a fraction of the remaining arguments; `keynum`: an argument holds
//! the number of keys). [`KeyFinder::find`] then finds the keys of an invocation exactly
//! as redis-server 7.0 does (`getKeysFromCommandWithSpecs` and `getKeysUsingKeySpecs` in
//! `db.c`), which is also what COMMAND GETKEYS and GETKEYSANDFLAGS answer.
//!
//! Commands whose specs cannot say it all — the flags vary with the arguments
//! (`variable_flags`, SET with or without GET), or the spec is `incomplete` — have in Redis
//! a function of their own (`getkeys_proc`); here a [`CustomFinder`] that the command's
//! family registers with it.

use std::fmt;

use goblin_protocol::parse_i64;

use crate::errors::c_str;
use crate::table::handler::Args;
use crate::table::meta_node::{self, Node};

/// How a command uses one key: the flags of a key spec, as COMMAND INFO names them.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct KeyFlags(u16);

impl KeyFlags {
    /// No flag.
    pub const NONE: KeyFlags = KeyFlags(0);
    /// Read-only: the value is read, not modified.
    pub const RO: KeyFlags = KeyFlags(1);
    /// Read-write: the value is read and modified.
    pub const RW: KeyFlags = KeyFlags(1 << 1);
    /// Overwrite: the value is replaced without being read.
    pub const OW: KeyFlags = KeyFlags(1 << 2);
    /// Remove: the key is deleted.
    pub const RM: KeyFlags = KeyFlags(1 << 3);
    /// The value (or part of it) is returned to the client.
    pub const ACCESS: KeyFlags = KeyFlags(1 << 4);
    /// The value is updated, or replaced.
    pub const UPDATE: KeyFlags = KeyFlags(1 << 5);
    /// Data is only added, nothing is overwritten or deleted.
    pub const INSERT: KeyFlags = KeyFlags(1 << 6);
    /// Data is deleted.
    pub const DELETE: KeyFlags = KeyFlags(1 << 7);
    /// Not a key, though routed like one (a Redis Cluster hint).
    pub const NOT_KEY: KeyFlags = KeyFlags(1 << 8);
    /// The spec may miss keys: a custom finder must be asked.
    pub const INCOMPLETE: KeyFlags = KeyFlags(1 << 9);
    /// The flags depend on the arguments: a custom finder must be asked.
    pub const VARIABLE_FLAGS: KeyFlags = KeyFlags(1 << 10);

    /// Every flag with its name, in the order redis-server 7.0's `addReplyFlagsForKeyArgs`
    /// prints them (COMMAND GETKEYSANDFLAGS).
    const NAMES: [(&'static str, KeyFlags); 11] = [
        ("RO", KeyFlags::RO),
        ("RW", KeyFlags::RW),
        ("OW", KeyFlags::OW),
        ("RM", KeyFlags::RM),
        ("access", KeyFlags::ACCESS),
        ("update", KeyFlags::UPDATE),
        ("insert", KeyFlags::INSERT),
        ("delete", KeyFlags::DELETE),
        ("not_key", KeyFlags::NOT_KEY),
        ("incomplete", KeyFlags::INCOMPLETE),
        ("variable_flags", KeyFlags::VARIABLE_FLAGS),
    ];

    /// Both sets of flags.
    #[must_use]
    pub const fn union(self, other: KeyFlags) -> KeyFlags {
        KeyFlags(self.0 | other.0)
    }

    /// Whether every flag of `other` is set.
    pub const fn contains(self, other: KeyFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether some flag of `other` is set.
    pub const fn intersects(self, other: KeyFlags) -> bool {
        self.0 & other.0 != 0
    }

    /// Whether no flag is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether the key is only read: RO, and none of RW, OW, RM (a shared lock will do).
    pub const fn is_read_only(self) -> bool {
        self.contains(KeyFlags::RO)
            && !self.intersects(KeyFlags::RW.union(KeyFlags::OW).union(KeyFlags::RM))
    }

    /// The names of the flags set, in redis-server 7.0's order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        KeyFlags::NAMES
            .into_iter()
            .filter(move |(_, f)| self.contains(*f))
            .map(|(name, _)| name)
    }

    /// How many flags are set.
    pub fn count(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The flag with this (case-insensitive) COMMAND INFO name.
    pub fn from_name(name: &str) -> Option<KeyFlags> {
        KeyFlags::NAMES
            .into_iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, f)| f)
    }

    /// The flags a COMMAND INFO set of names holds; unknown names are ignored.
    fn from_names(node: &Node) -> KeyFlags {
        node.items()
            .iter()
            .filter_map(Node::text)
            .filter_map(KeyFlags::from_name)
            .fold(KeyFlags::NONE, KeyFlags::union)
    }
}

impl std::ops::BitOr for KeyFlags {
    type Output = KeyFlags;

    fn bitor(self, other: KeyFlags) -> KeyFlags {
        self.union(other)
    }
}

impl fmt::Debug for KeyFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyFlags(")?;
        for (i, name) in self.names().enumerate() {
            if i > 0 {
                f.write_str("|")?;
            }
            f.write_str(name)?;
        }
        f.write_str(")")
    }
}

/// The arguments do not lay out the keys the specs describe (Redis's -1 from
/// `getKeysUsingKeySpecs`): no keys can be named, and the command will reply an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidKeys;

impl fmt::Display for InvalidKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the arguments do not match the command's key specs")
    }
}

impl std::error::Error for InvalidKeys {}

/// A command's own key search (Redis's `getkeys_proc`), for commands whose key specs are
/// `incomplete` or have `variable_flags`: calls the function with each key's argument
/// index and flags, in order.
pub type CustomFinder =
    fn(args: &Args<'_>, found: &mut dyn FnMut(usize, KeyFlags)) -> Result<(), InvalidKeys>;

/// Where a spec's search for keys begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Begin {
    /// At this argument.
    Index(i64),
    /// After the first argument equal to `keyword` (without case), searched from argument
    /// `startfrom` towards the end, or, when it is negative, from `argc + startfrom`
    /// towards the start.
    Keyword {
        keyword: &'static str,
        startfrom: i64,
    },
    /// A type this version does not know: every search with the spec is invalid.
    Unknown,
}

/// How a spec's keys are laid out from where the search began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// Keys every `keystep` up to `lastkey` (relative to the first key; negative: from
    /// the end of the arguments; with a `limit`, up to 1/limit of the remaining
    /// arguments).
    Range {
        lastkey: i64,
        keystep: i64,
        limit: i64,
    },
    /// Argument `keynumidx` (relative to the search's beginning) holds the number of
    /// keys, which begin `firstkey` after the beginning.
    Keynum {
        keynumidx: i64,
        firstkey: i64,
        keystep: i64,
    },
    /// A type this version does not know (or a step that is not positive).
    Unknown,
}

/// One key spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct KeySpec {
    flags: KeyFlags,
    begin: Begin,
    layout: Layout,
}

/// Most commands' keys, as plain numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Simple {
    /// One spec: keys at `first`, `first + step`, … through `lastkey` (after `first`;
    /// negative: from the end of the arguments).
    Range {
        first: usize,
        lastkey: i64,
        step: usize,
    },
    /// Up to four specs, of one key each at a fixed index (GOBLIN.CLAIM, RENAME, COPY).
    Fixed { at: [u16; 4], n: u8 },
}

impl Simple {
    /// The fixed positions of `specs`, when every one names one key at a fixed index.
    fn fixed(specs: &[KeySpec]) -> Option<Simple> {
        if specs.len() > 4 {
            return None;
        }
        let mut at = [0u16; 4];
        for (slot, spec) in at.iter_mut().zip(specs) {
            match spec {
                KeySpec {
                    flags,
                    begin: Begin::Index(i),
                    layout:
                        Layout::Range {
                            lastkey: 0,
                            limit: 0,
                            ..
                        },
                } if !flags.intersects(KeyFlags::NOT_KEY | KeyFlags::INCOMPLETE)
                    && (1..=i64::from(u16::MAX)).contains(i) =>
                {
                    *slot = *i as u16;
                }
                _ => return None,
            }
        }
        Some(Simple::Fixed {
            at,
            n: specs.len() as u8,
        })
    }
}

/// The arguments a spec names as keys: `first`, `first + step`, … up to `last`, all
/// within the arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    first: usize,
    last: usize,
    step: usize,
}

impl KeySpec {
    /// A spec from its COMMAND INFO map; unknown or missing parts make it unknown.
    fn from_node(node: &Node) -> KeySpec {
        let flags = node
            .get("flags")
            .map_or(KeyFlags::NONE, KeyFlags::from_names);
        let int = |spec: &Node, name: &str| spec.get(name).and_then(Node::int);
        let part = |name: &str| {
            let part = node.get(name)?;
            Some((part.get("type")?.text()?, part.get("spec")?))
        };
        let begin = match part("begin_search") {
            Some(("index", spec)) => int(spec, "index").map_or(Begin::Unknown, Begin::Index),
            Some(("keyword", spec)) => {
                match (
                    spec.get("keyword").and_then(Node::text),
                    int(spec, "startfrom"),
                ) {
                    (Some(keyword), Some(startfrom)) => Begin::Keyword { keyword, startfrom },
                    _ => Begin::Unknown,
                }
            }
            _ => Begin::Unknown,
        };
        let layout = match part("find_keys") {
            Some(("range", spec)) => {
                match (
                    int(spec, "lastkey"),
                    int(spec, "keystep"),
                    int(spec, "limit"),
                ) {
                    (Some(lastkey), Some(keystep), Some(limit)) if keystep > 0 => Layout::Range {
                        lastkey,
                        keystep,
                        limit,
                    },
                    _ => Layout::Unknown,
                }
            }
            Some(("keynum", spec)) => {
                match (
                    int(spec, "keynumidx"),
                    int(spec, "firstkey"),
                    int(spec, "keystep"),
                ) {
                    (Some(keynumidx), Some(firstkey), Some(keystep)) if keystep > 0 => {
                        Layout::Keynum {
                            keynumidx,
                            firstkey,
                            keystep,
                        }
                    }
                    _ => Layout::Unknown,
                }
            }
            _ => Layout::Unknown,
        };
        KeySpec {
            flags,
            begin,
            layout,
        }
    }

    /// Whether the spec names keys (NOT_KEY specs are skipped by the search).
    fn is_key(&self) -> bool {
        !self.flags.contains(KeyFlags::NOT_KEY)
    }

    /// Whether one invocation may find several keys with this spec.
    fn may_span(&self) -> bool {
        if self.begin == Begin::Unknown {
            return true;
        }
        match self.layout {
            Layout::Range { lastkey, .. } => lastkey != 0,
            Layout::Keynum { .. } | Layout::Unknown => true,
        }
    }

    /// The keys this spec names in `args`, as `getKeysUsingKeySpecs` finds them: `None`
    /// when a keyword search finds nothing (the spec names no key).
    ///
    /// # Errors
    /// [`InvalidKeys`] when the spec is unknown or incomplete, or the keys it describes
    /// do not lie within the arguments.
    fn locate(&self, args: &Args<'_>) -> Result<Option<Span>, InvalidKeys> {
        let argc = args.len() as i64;
        let first = match self.begin {
            Begin::Index(index) => index,
            Begin::Keyword { keyword, startfrom } => {
                match keyword_position(args, keyword, startfrom) {
                    Some(i) => i + 1,
                    None => return Ok(None),
                }
            }
            Begin::Unknown => return Err(InvalidKeys),
        };
        let (first, last, step) = match self.layout {
            Layout::Range {
                lastkey,
                keystep,
                limit,
            } => {
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    // Redis asserts lastkey == -1 here; integer division truncates, as C's.
                    first + ((argc - first) / limit + lastkey)
                };
                (first, last, keystep)
            }
            Layout::Keynum {
                keynumidx,
                firstkey,
                keystep,
            } => {
                // redis-server 7.0.15 checks only `keynumidx >= argc` and may then read
                // past the arguments; the count's own position is what must exist.
                let at = first + keynumidx;
                if at < 0 || at >= argc {
                    return Err(InvalidKeys);
                }
                let numkeys = parse_i64(args.get(at as usize))
                    .filter(|&n| n >= 0)
                    .ok_or(InvalidKeys)?;
                let first = first + firstkey;
                // Redis adds `(int)numkeys`: the count wraps to 32 bits, as its C cast does.
                (first, first + i64::from(numkeys as i32) - 1, keystep)
            }
            Layout::Unknown => return Err(InvalidKeys),
        };
        if last >= argc || last < first || first >= argc || first < 0 {
            return Err(InvalidKeys);
        }
        // Redis adds the keys of an incomplete spec, then gives up on the whole search.
        if self.flags.contains(KeyFlags::INCOMPLETE) {
            return Err(InvalidKeys);
        }
        Ok(Some(Span {
            first: first as usize,
            last: last as usize,
            step: step as usize,
        }))
    }
}

/// Where `keyword` is, searched as `getKeysUsingKeySpecs` searches: from `startfrom`
/// (or `argc + startfrom` when it is not positive) towards the last argument (or the
/// first), stopping *before* that argument — redis-server 7.0 never looks at the last
/// argument in a forward search, nor at argument 1 in a backward one.
fn keyword_position(args: &Args<'_>, keyword: &str, startfrom: i64) -> Option<i64> {
    let argc = args.len() as i64;
    let (start, end) = if startfrom > 0 {
        (startfrom, argc - 1)
    } else {
        (argc + startfrom, 1)
    };
    let forward = start <= end;
    let mut i = start;
    while i != end {
        if i >= argc || i < 1 {
            break;
        }
        if c_str(args.get(i as usize)).eq_ignore_ascii_case(keyword.as_bytes()) {
            return Some(i);
        }
        i = if forward { i + 1 } else { i - 1 };
    }
    None
}

/// A command's key specs: none, one (kept inline: the common case), or several.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum Specs {
    #[default]
    None,
    One(KeySpec),
    Many(Box<[KeySpec]>),
}

impl Specs {
    fn as_slice(&self) -> &[KeySpec] {
        match self {
            Specs::None => &[],
            Specs::One(spec) => std::slice::from_ref(spec),
            Specs::Many(specs) => specs,
        }
    }
}

/// Finds the keys of a command's invocations; built once per command from its key specs.
#[derive(Clone, Debug, Default)]
pub struct KeyFinder {
    specs: Specs,
    /// The common shapes — one spec, keys from a fixed index through a last key, every
    /// `step`; or a few specs of one key each at fixed indexes — kept as plain numbers,
    /// so that routing (which needs the positions, not the flags) costs what the legacy
    /// first/last/step did.
    simple: Option<Simple>,
    /// The command's own search, asked when the specs cannot answer.
    custom: Option<CustomFinder>,
    /// Some spec names keys (is not NOT_KEY).
    has_key_spec: bool,
    /// Some spec is NOT_KEY (sharded Pub/Sub's channels).
    has_not_key_spec: bool,
    /// Some spec has VARIABLE_FLAGS.
    variable_flags: bool,
    /// Some invocation can find several keys.
    may_span: bool,
    /// The flags of every spec that names keys.
    key_flags: KeyFlags,
}

/// Where a command's keys can be, for reading a script's calls ([`KeyFinder::shape`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyShape {
    /// It has none.
    Keyless,
    /// One key, at this argument.
    At(usize),
    /// Several, or where only the arguments tell.
    Other,
}

impl KeyFinder {
    /// Where this command's keys can be.
    /// (As [`KeyFinder::positions`] finds them: from the common shapes when they apply,
    /// though a custom search may be asked for the flags.)
    pub fn shape(&self) -> KeyShape {
        match self.simple {
            Some(Simple::Range {
                first, lastkey: 0, ..
            }) => KeyShape::At(first),
            Some(Simple::Fixed { at, n: 1 }) => KeyShape::At(usize::from(at[0])),
            Some(_) => KeyShape::Other,
            None if self.custom.is_none() && !self.has_key_spec => KeyShape::Keyless,
            None => KeyShape::Other,
        }
    }

    /// The finder of a keyless command.
    pub const NONE: KeyFinder = KeyFinder {
        specs: Specs::None,
        simple: None,
        custom: None,
        has_key_spec: false,
        has_not_key_spec: false,
        variable_flags: false,
        may_span: false,
        key_flags: KeyFlags::NONE,
    };

    /// The finder of the command whose COMMAND INFO entry is `info` (key specs at item 8).
    /// A family gives the commands whose specs cannot say everything their own search
    /// ([`KeyFinder::with_custom`], at registration).
    pub fn from_info(info: &Node) -> KeyFinder {
        let specs: Vec<KeySpec> = info
            .items()
            .get(meta_node::info::KEY_SPECS)
            .map_or(&[][..], Node::items)
            .iter()
            .map(KeySpec::from_node)
            .collect();
        KeyFinder::from_specs(specs)
    }

    fn from_specs(specs: Vec<KeySpec>) -> KeyFinder {
        let keys = || specs.iter().filter(|s| s.is_key());
        let has_key_spec = keys().next().is_some();
        let has_not_key_spec = specs.iter().any(|s| !s.is_key());
        let may_span = keys().count() > 1 || keys().any(KeySpec::may_span);
        let key_flags = keys().fold(KeyFlags::NONE, |acc, s| acc | s.flags);
        let variable_flags = specs
            .iter()
            .any(|s| s.flags.contains(KeyFlags::VARIABLE_FLAGS));
        let specs = match <[KeySpec; 1]>::try_from(specs) {
            Ok([one]) => Specs::One(one),
            Err(specs) if specs.is_empty() => Specs::None,
            Err(specs) => Specs::Many(specs.into_boxed_slice()),
        };
        let simple = match &specs {
            Specs::One(KeySpec {
                flags,
                begin: Begin::Index(first),
                layout:
                    Layout::Range {
                        lastkey,
                        keystep,
                        limit: 0,
                    },
            }) if !flags.intersects(KeyFlags::NOT_KEY | KeyFlags::INCOMPLETE)
                && *first > 0
                && *keystep > 0 =>
            {
                Some(Simple::Range {
                    first: *first as usize,
                    lastkey: *lastkey,
                    step: *keystep as usize,
                })
            }
            Specs::Many(many) => Simple::fixed(many),
            _ => None,
        };
        KeyFinder {
            specs,
            simple,
            custom: None,
            has_key_spec,
            has_not_key_spec,
            variable_flags,
            may_span,
            key_flags,
        }
    }

    /// Calls `f(argument index)` for every key of the invocation `args`: the positions
    /// [`KeyFinder::find`] finds, without their flags — which the specs of the common
    /// shape give at once, even when a custom search would be asked for the flags.
    ///
    /// # Errors
    /// As [`KeyFinder::find`].
    #[inline]
    pub fn positions(&self, args: &Args<'_>, mut f: impl FnMut(usize)) -> Result<(), InvalidKeys> {
        let (first, lastkey, step) = match self.simple {
            Some(Simple::Range {
                first,
                lastkey,
                step,
            }) => (first, lastkey, step),
            Some(Simple::Fixed { at, n }) => {
                let at = &at[..usize::from(n)];
                if at.iter().any(|&i| usize::from(i) >= args.len()) {
                    return Err(InvalidKeys);
                }
                at.iter().for_each(|&i| f(usize::from(i)));
                return Ok(());
            }
            None => return self.find(args, |i, _| f(i)),
        };
        let argc = args.len() as i64;
        let last = if lastkey >= 0 {
            first as i64 + lastkey
        } else {
            argc + lastkey
        };
        if last >= argc || last < first as i64 {
            return Err(InvalidKeys);
        }
        let mut i = first;
        while i as i64 <= last {
            f(i);
            i += step;
        }
        Ok(())
    }

    /// The same finder, with a custom search for what the specs cannot say.
    #[must_use]
    pub fn with_custom(mut self, custom: CustomFinder) -> KeyFinder {
        self.custom = Some(custom);
        self
    }

    /// The same finder, known to name one key at most (a custom finder that never names
    /// the keys its unknown specs stand for: SORT_RO).
    #[must_use]
    pub fn naming_one_key(mut self) -> KeyFinder {
        self.may_span = false;
        self
    }

    /// Calls `f(argument index, flags)` for every key of the invocation `args` (the
    /// command name is argument 0; a subcommand's name is argument 1), in order, as
    /// redis-server 7.0 finds them (`getKeysFromCommandWithSpecs`): from the key specs,
    /// skipping NOT_KEY specs; from the custom finder when a spec has VARIABLE_FLAGS, or
    /// when the specs cannot answer. `f` is called only once the search has succeeded.
    /// A keyless command calls nothing. Nothing is allocated. (A spec with VARIABLE_FLAGS
    /// and no custom finder is searched as any other: redis-server would name no keys,
    /// but no command of its has such a spec.)
    ///
    /// # Errors
    /// [`InvalidKeys`] when the arguments do not hold the keys the specs describe (the
    /// command would reply an arity or syntax error): no key is reported.
    pub fn find(
        &self,
        args: &Args<'_>,
        mut f: impl FnMut(usize, KeyFlags),
    ) -> Result<(), InvalidKeys> {
        let custom_first = self.variable_flags && self.custom.is_some();
        if self.has_key_spec && !custom_first {
            match self.find_in_specs(args, &mut f) {
                Ok(()) => return Ok(()),
                Err(e) if self.custom.is_none() => return Err(e),
                Err(_) => {}
            }
        }
        match self.custom {
            Some(custom) => custom(args, &mut f),
            None => Ok(()),
        }
    }

    /// What Redis Cluster routes `args` by: the keys, and with them the arguments of
    /// NOT_KEY specs — sharded Pub/Sub's channels, which name a slot though they are no
    /// keys (redis-server's `GET_KEYSPEC_INCLUDE_NOT_KEYS`).
    ///
    /// # Errors
    /// As [`KeyFinder::find`].
    pub fn routed_positions(
        &self,
        args: &Args<'_>,
        mut f: impl FnMut(usize),
    ) -> Result<(), InvalidKeys> {
        if self.has_not_key_spec {
            self.search_specs(args, &mut |i, _| f(i), |_| true)
        } else {
            self.positions(args, f)
        }
    }

    /// The search of `getKeysUsingKeySpecs` alone: every spec but NOT_KEY ones.
    fn find_in_specs(
        &self,
        args: &Args<'_>,
        f: &mut impl FnMut(usize, KeyFlags),
    ) -> Result<(), InvalidKeys> {
        self.search_specs(args, f, KeySpec::is_key)
    }

    /// The arguments the specs `included` name.
    fn search_specs(
        &self,
        args: &Args<'_>,
        f: &mut impl FnMut(usize, KeyFlags),
        included: impl Fn(&KeySpec) -> bool,
    ) -> Result<(), InvalidKeys> {
        let specs = self.specs.as_slice();
        // A later spec may invalidate the whole search: check them all before reporting.
        if specs.len() > 1 {
            for spec in specs.iter().filter(|s| included(s)) {
                spec.locate(args)?;
            }
        }
        for spec in specs.iter().filter(|s| included(s)) {
            if let Some(span) = spec.locate(args)? {
                for i in (span.first..=span.last).step_by(span.step) {
                    f(i, spec.flags);
                }
            }
        }
        Ok(())
    }

    /// Whether the command may have keys (Redis's `doesCommandHaveKeys`): it has a custom
    /// finder, or a key spec that is not NOT_KEY.
    pub fn has_keys(&self) -> bool {
        self.custom.is_some() || self.has_key_spec
    }

    /// Whether some invocation can name more than one key: several key specs, a range
    /// whose last key is not its first, a keynum spec (or a spec of unknown type).
    pub fn may_span_several_keys(&self) -> bool {
        self.may_span
    }

    /// The flags of all the key specs together (Redis's `getAllKeySpecsFlags`), NOT_KEY
    /// specs left out; with VARIABLE_FLAGS, an invocation may use its keys otherwise.
    pub fn key_flags(&self) -> KeyFlags {
        self.key_flags
    }

    /// Whether [`KeyFinder::find`] may ask the custom finder.
    pub fn has_custom(&self) -> bool {
        self.custom.is_some()
    }
}

#[cfg(test)]
mod tests {
    use std::ops::Range;

    use super::*;
    use crate::table::meta;

    /// Runs `finder` on the words of `line`.
    fn find(finder: &KeyFinder, line: &str) -> Result<Vec<(usize, KeyFlags)>, InvalidKeys> {
        let words: Vec<&str> = line.split(' ').collect();
        let mut buf = Vec::new();
        let mut spans: Vec<Range<usize>> = Vec::new();
        for w in &words {
            spans.push(buf.len()..buf.len() + w.len());
            buf.extend_from_slice(w.as_bytes());
        }
        let args = Args::new(&buf, &spans);
        let mut keys = Vec::new();
        finder.find(&args, |i, f| keys.push((i, f)))?;
        Ok(keys)
    }

    fn positions(finder: &KeyFinder, line: &str) -> Result<Vec<usize>, InvalidKeys> {
        find(finder, line).map(|keys| keys.into_iter().map(|(i, _)| i).collect())
    }

    const RO: KeyFlags = KeyFlags::RO;

    fn spec(flags: KeyFlags, begin: Begin, layout: Layout) -> KeySpec {
        KeySpec {
            flags,
            begin,
            layout,
        }
    }

    fn range(lastkey: i64, keystep: i64, limit: i64) -> Layout {
        Layout::Range {
            lastkey,
            keystep,
            limit,
        }
    }

    fn keynum(keynumidx: i64, firstkey: i64, keystep: i64) -> Layout {
        Layout::Keynum {
            keynumidx,
            firstkey,
            keystep,
        }
    }

    fn keyword(keyword: &'static str, startfrom: i64) -> Begin {
        Begin::Keyword { keyword, startfrom }
    }

    fn finder(specs: &[KeySpec]) -> KeyFinder {
        KeyFinder::from_specs(specs.to_vec())
    }

    #[test]
    fn flags_print_in_redis_order() {
        let all = KeyFlags::NAMES
            .iter()
            .fold(KeyFlags::NONE, |acc, (_, f)| acc | *f);
        assert_eq!(
            all.names().collect::<Vec<_>>(),
            [
                "RO",
                "RW",
                "OW",
                "RM",
                "access",
                "update",
                "insert",
                "delete",
                "not_key",
                "incomplete",
                "variable_flags"
            ]
        );
        assert_eq!(all.count(), 11);
        let rw = KeyFlags::RW | KeyFlags::ACCESS | KeyFlags::DELETE;
        assert_eq!(rw.names().collect::<Vec<_>>(), ["RW", "access", "delete"]);
        assert_eq!(format!("{rw:?}"), "KeyFlags(RW|access|delete)");
        assert_eq!(KeyFlags::from_name("rw"), Some(KeyFlags::RW));
        assert_eq!(KeyFlags::from_name("nope"), None);
        assert!(KeyFlags::NONE.is_empty());
    }

    #[test]
    fn read_only() {
        assert!(RO.is_read_only());
        assert!((RO | KeyFlags::ACCESS).is_read_only());
        assert!(!(RO | KeyFlags::RW).is_read_only());
        assert!(!KeyFlags::OW.is_read_only());
        assert!(!KeyFlags::RM.is_read_only());
        assert!(!KeyFlags::ACCESS.is_read_only());
        assert!(!KeyFlags::NONE.is_read_only());
    }

    #[test]
    fn index_and_range() {
        let get = finder(&[spec(RO, Begin::Index(1), range(0, 1, 0))]);
        assert_eq!(positions(&get, "GET k"), Ok(vec![1]));
        assert_eq!(find(&get, "GET k"), Ok(vec![(1, RO)]));
        assert_eq!(positions(&get, "GET"), Err(InvalidKeys));
        assert!(get.has_keys() && !get.may_span_several_keys());

        let mget = finder(&[spec(RO, Begin::Index(1), range(-1, 1, 0))]);
        assert_eq!(positions(&mget, "MGET a b c"), Ok(vec![1, 2, 3]));
        assert_eq!(positions(&mget, "MGET a"), Ok(vec![1]));
        assert_eq!(positions(&mget, "MGET"), Err(InvalidKeys));
        assert!(mget.may_span_several_keys());

        let mset = finder(&[spec(KeyFlags::OW, Begin::Index(1), range(-1, 2, 0))]);
        assert_eq!(positions(&mset, "MSET a 1 b 2"), Ok(vec![1, 3]));
        // An odd count: the last argument is a key without a value, still named.
        assert_eq!(positions(&mset, "MSET a 1 b"), Ok(vec![1, 3]));
        assert_eq!(positions(&mset, "MSET a"), Ok(vec![1]));

        // Negative lastkey other than -1: up to the one before the last argument.
        let all_but_last = finder(&[spec(RO, Begin::Index(1), range(-2, 1, 0))]);
        assert_eq!(positions(&all_but_last, "C a b c"), Ok(vec![1, 2]));
        assert_eq!(positions(&all_but_last, "C a"), Err(InvalidKeys));

        // A fixed second key.
        let two = finder(&[spec(RO, Begin::Index(2), range(1, 1, 0))]);
        assert_eq!(positions(&two, "C x a b"), Ok(vec![2, 3]));
        assert_eq!(positions(&two, "C x a"), Err(InvalidKeys));
        assert!(two.may_span_several_keys());
    }

    #[test]
    fn range_with_limit() {
        // XREAD-like: half of the arguments after the keyword are keys.
        let streams = finder(&[spec(RO, keyword("STREAMS", 1), range(-1, 1, 2))]);
        assert_eq!(
            positions(&streams, "XREAD COUNT 2 STREAMS a b 0 0"),
            Ok(vec![4, 5])
        );
        assert_eq!(positions(&streams, "XREAD STREAMS a 0"), Ok(vec![2]));
        // An odd count rounds down.
        assert_eq!(positions(&streams, "XREAD STREAMS a b 0"), Ok(vec![2]));
        // One argument after the keyword: no room for a key and its id.
        assert_eq!(positions(&streams, "XREAD STREAMS a"), Err(InvalidKeys));
        // No keyword: no keys, and no error.
        assert_eq!(positions(&streams, "XREAD COUNT 2 a 0"), Ok(vec![]));
        // A third of the remaining arguments.
        let thirds = finder(&[spec(RO, Begin::Index(1), range(-1, 1, 3))]);
        assert_eq!(positions(&thirds, "C a b c d e f"), Ok(vec![1, 2]));
    }

    #[test]
    fn keyword_search() {
        let store = finder(&[spec(KeyFlags::OW, keyword("STORE", 2), range(0, 1, 0))]);
        assert_eq!(positions(&store, "SORT k STORE d"), Ok(vec![3]));
        assert_eq!(positions(&store, "SORT k store d LIMIT 0 1"), Ok(vec![3]));
        // The first match wins.
        assert_eq!(positions(&store, "SORT k STORE d STORE e"), Ok(vec![3]));
        // Not found: no keys from this spec.
        assert_eq!(positions(&store, "SORT k LIMIT 0 1"), Ok(vec![]));
        // Searching starts at `startfrom`: argument 1 is not looked at.
        assert_eq!(positions(&store, "SORT STORE k"), Ok(vec![]));
        // A forward search stops before the last argument: a keyword there is not found,
        // so the search is not invalid either.
        assert_eq!(positions(&store, "SORT k STORE"), Ok(vec![]));
        // C string comparison: a NUL ends the argument.
        assert_eq!(positions(&store, "SORT k STORE\0x d"), Ok(vec![3]));

        // Backwards from the end (startfrom -2: from the one before the last argument).
        let back = finder(&[spec(RO, keyword("KEYS", -2), range(-1, 1, 0))]);
        assert_eq!(positions(&back, "M h p KEYS a b"), Ok(vec![4, 5]));
        assert_eq!(positions(&back, "M KEYS h KEYS a"), Ok(vec![4]));
        // A backward search stops before argument 1.
        assert_eq!(positions(&back, "M KEYS a"), Ok(vec![]));
        // The last argument is not searched when startfrom is -2.
        assert_eq!(positions(&back, "M h a KEYS"), Ok(vec![]));
        // A keyword followed by no argument is an invalid search.
        let back1 = finder(&[spec(RO, keyword("KEYS", -1), range(0, 1, 0))]);
        assert_eq!(positions(&back1, "M h KEYS"), Err(InvalidKeys));
        assert_eq!(positions(&back1, "M KEYS h"), Ok(vec![]));
        // startfrom past the arguments: nothing found.
        let far = finder(&[spec(RO, keyword("K", 9), range(0, 1, 0))]);
        assert_eq!(positions(&far, "C K a"), Ok(vec![]));
    }

    #[test]
    fn keynum_search() {
        // ZUNIONSTORE-like: destination, then numkeys and the keys.
        let z = finder(&[
            spec(KeyFlags::OW, Begin::Index(1), range(0, 1, 0)),
            spec(RO, Begin::Index(2), keynum(0, 1, 1)),
        ]);
        assert_eq!(positions(&z, "Z d 2 a b"), Ok(vec![1, 3, 4]));
        assert_eq!(positions(&z, "Z d 2 a b WEIGHTS 1 2"), Ok(vec![1, 3, 4]));
        assert_eq!(positions(&z, "Z d 1 a b"), Ok(vec![1, 3]));
        // More keys declared than arguments: invalid, and the destination is not named.
        assert_eq!(positions(&z, "Z d 3 a b"), Err(InvalidKeys));
        assert_eq!(positions(&z, "Z d 9223372036854775807 a"), Err(InvalidKeys));
        // Zero, negative or not a number: invalid.
        assert_eq!(positions(&z, "Z d 0 a"), Err(InvalidKeys));
        assert_eq!(positions(&z, "Z d -1 a"), Err(InvalidKeys));
        assert_eq!(positions(&z, "Z d x a"), Err(InvalidKeys));
        assert_eq!(positions(&z, "Z d 01 a"), Err(InvalidKeys));
        assert_eq!(positions(&z, "Z d +1 a"), Err(InvalidKeys));
        // The count is cut to 32 bits, as Redis's (int) cast: 2^32 + 1 keys is one key.
        assert_eq!(positions(&z, "Z d 4294967297 a b"), Ok(vec![1, 3]));
        // The count argument itself is missing.
        assert_eq!(positions(&z, "Z d"), Err(InvalidKeys));
        assert!(z.may_span_several_keys());

        // EVAL-like: numkeys then keys, then arguments; keys every other argument.
        let stepped = finder(&[spec(RO, Begin::Index(2), keynum(0, 1, 2))]);
        assert_eq!(positions(&stepped, "E s 4 a 1 b 2"), Ok(vec![3, 5]));
        // keynum after a keyword.
        let kw = finder(&[spec(RO, keyword("KEYS", 1), keynum(0, 1, 1))]);
        assert_eq!(positions(&kw, "C x KEYS 2 a b"), Ok(vec![4, 5]));
        assert_eq!(positions(&kw, "C x KEYS 2 a"), Err(InvalidKeys));
    }

    #[test]
    fn invalid_and_skipped_specs() {
        let unknown = finder(&[spec(RO, Begin::Unknown, range(0, 1, 0))]);
        assert_eq!(positions(&unknown, "C a"), Err(InvalidKeys));
        assert!(unknown.has_keys() && unknown.may_span_several_keys());
        let unknown = finder(&[spec(RO, Begin::Index(1), Layout::Unknown)]);
        assert_eq!(positions(&unknown, "C a"), Err(InvalidKeys));

        // A later invalid spec voids the keys an earlier one found.
        let two = finder(&[
            spec(RO, Begin::Index(1), range(0, 1, 0)),
            spec(KeyFlags::OW, Begin::Index(3), range(0, 1, 0)),
        ]);
        assert_eq!(positions(&two, "C a b c"), Ok(vec![1, 3]));
        assert_eq!(positions(&two, "C a b"), Err(InvalidKeys));

        // NOT_KEY specs are skipped.
        let not_key = finder(&[
            spec(KeyFlags::NOT_KEY, Begin::Index(1), range(0, 1, 0)),
            spec(RO, Begin::Index(2), range(0, 1, 0)),
        ]);
        assert_eq!(positions(&not_key, "C a b"), Ok(vec![2]));
        assert!(!not_key.may_span_several_keys());
        let only_not_key = finder(&[spec(KeyFlags::NOT_KEY, Begin::Index(1), range(0, 1, 0))]);
        assert!(!only_not_key.has_keys());
        assert_eq!(positions(&only_not_key, "C a"), Ok(vec![]));

        // An incomplete spec makes the search invalid, even when it found keys.
        let incomplete = finder(&[spec(
            RO | KeyFlags::INCOMPLETE,
            Begin::Index(1),
            range(0, 1, 0),
        )]);
        assert_eq!(positions(&incomplete, "C a"), Err(InvalidKeys));
    }

    #[test]
    fn custom_finders() {
        fn custom(
            args: &Args<'_>,
            found: &mut dyn FnMut(usize, KeyFlags),
        ) -> Result<(), InvalidKeys> {
            (1..args.len()).rev().for_each(|i| found(i, KeyFlags::RW));
            Ok(())
        }
        // Asked when the specs fail.
        let incomplete = finder(&[spec(
            RO | KeyFlags::INCOMPLETE,
            Begin::Index(1),
            range(0, 1, 0),
        )])
        .with_custom(custom);
        assert_eq!(positions(&incomplete, "C a b"), Ok(vec![2, 1]));
        // Not asked when they answer.
        let complete = finder(&[spec(RO, Begin::Index(1), range(0, 1, 0))]).with_custom(custom);
        assert_eq!(positions(&complete, "C a b"), Ok(vec![1]));
        // Always asked with VARIABLE_FLAGS.
        let variable = finder(&[spec(
            RO | KeyFlags::VARIABLE_FLAGS,
            Begin::Index(1),
            range(0, 1, 0),
        )]);
        assert_eq!(
            find(&variable, "C a b"),
            Ok(vec![(1, RO | KeyFlags::VARIABLE_FLAGS)])
        );
        let variable = variable.with_custom(custom);
        assert_eq!(positions(&variable, "C a b"), Ok(vec![2, 1]));
        // A custom finder alone gives the command keys.
        let alone = KeyFinder::NONE.with_custom(custom);
        assert!(alone.has_keys());
        assert_eq!(positions(&alone, "C a"), Ok(vec![1]));
    }

    #[test]
    fn set_and_delex_flags_depend_on_their_arguments() {
        let Ok(table) = crate::families::table() else {
            panic!("the command table does not build");
        };
        let finder = |name: &str| match table.lookup(name.as_bytes()) {
            Some(spec) => spec.key_finder.clone(),
            None => panic!("no {name}"),
        };
        let set = finder("set");
        let ow = KeyFlags::OW | KeyFlags::UPDATE;
        let rw = KeyFlags::RW | KeyFlags::ACCESS | KeyFlags::UPDATE;
        assert_eq!(find(&set, "SET k v"), Ok(vec![(1, ow)]));
        assert_eq!(find(&set, "SET k v NX GET"), Ok(vec![(1, rw)]));
        assert_eq!(find(&set, "SET k v get"), Ok(vec![(1, rw)]));
        assert_eq!(find(&set, "SET k v GET\0x"), Ok(vec![(1, rw)]));
        assert_eq!(find(&set, "SET k GET"), Ok(vec![(1, ow)]));
        assert_eq!(find(&set, "SET k v GETX"), Ok(vec![(1, ow)]));

        let delex = finder("delex");
        let rm = KeyFlags::RM | KeyFlags::DELETE;
        assert_eq!(find(&delex, "DELEX k"), Ok(vec![(1, rm)]));
        assert_eq!(
            find(&delex, "DELEX k IFEQ v"),
            Ok(vec![(1, KeyFlags::RW | KeyFlags::DELETE)])
        );
    }

    #[test]
    fn from_info_reads_the_generated_specs() {
        let get = KeyFinder::from_info(&meta::GET.info);
        assert_eq!(
            get.specs,
            Specs::One(spec(RO | KeyFlags::ACCESS, Begin::Index(1), range(0, 1, 0)))
        );
        assert!(get.has_keys() && !get.may_span_several_keys() && !get.has_custom());
        assert!(get.key_flags().is_read_only());
        let rename = KeyFinder::from_info(&meta::RENAME.info);
        assert_eq!(
            find(&rename, "RENAME a b"),
            Ok(vec![
                (1, KeyFlags::RW | KeyFlags::ACCESS | KeyFlags::DELETE),
                (2, KeyFlags::OW | KeyFlags::UPDATE)
            ])
        );
        assert!(rename.may_span_several_keys());
        let ping = KeyFinder::from_info(&meta::PING.info);
        assert!(!ping.has_keys() && !ping.may_span_several_keys());
        assert_eq!(positions(&ping, "PING"), Ok(vec![]));

        // Every spec of the generated entries is of a known type, but SORT's and
        // SORT_RO's: their BY/GET (and STORE) specs are "unknown", found by their own finder.
        for m in meta::ALL.iter().filter(|m| {
            ![&meta::SORT, &meta::SORT_RO]
                .iter()
                .any(|s| std::ptr::eq(**m, *s))
        }) {
            let finder = KeyFinder::from_info(&m.info);
            for s in finder.specs.as_slice() {
                assert!(
                    s.begin != Begin::Unknown && s.layout != Layout::Unknown,
                    "{:?}",
                    m.info.items().first()
                );
            }
        }
    }

    #[test]
    fn keyword_and_keynum_nodes_parse() {
        static NODE: Node = Node::Array(&[
            Node::Bulk("x"),
            Node::Int(-2),
            Node::Set(&[]),
            Node::Int(0),
            Node::Int(0),
            Node::Int(0),
            Node::Set(&[]),
            Node::Set(&[]),
            Node::Set(&[
                Node::Map(&[
                    Node::Bulk("notes"),
                    Node::Bulk("n"),
                    Node::Bulk("flags"),
                    Node::Set(&[Node::Simple("RO"), Node::Simple("access")]),
                    Node::Bulk("begin_search"),
                    Node::Map(&[
                        Node::Bulk("type"),
                        Node::Bulk("keyword"),
                        Node::Bulk("spec"),
                        Node::Map(&[
                            Node::Bulk("keyword"),
                            Node::Bulk("STREAMS"),
                            Node::Bulk("startfrom"),
                            Node::Int(1),
                        ]),
                    ]),
                    Node::Bulk("find_keys"),
                    Node::Map(&[
                        Node::Bulk("type"),
                        Node::Bulk("range"),
                        Node::Bulk("spec"),
                        Node::Map(&[
                            Node::Bulk("lastkey"),
                            Node::Int(-1),
                            Node::Bulk("keystep"),
                            Node::Int(1),
                            Node::Bulk("limit"),
                            Node::Int(2),
                        ]),
                    ]),
                ]),
                Node::Map(&[
                    Node::Bulk("flags"),
                    Node::Set(&[Node::Simple("RW")]),
                    Node::Bulk("begin_search"),
                    Node::Map(&[
                        Node::Bulk("type"),
                        Node::Bulk("index"),
                        Node::Bulk("spec"),
                        Node::Map(&[Node::Bulk("index"), Node::Int(2)]),
                    ]),
                    Node::Bulk("find_keys"),
                    Node::Map(&[
                        Node::Bulk("type"),
                        Node::Bulk("keynum"),
                        Node::Bulk("spec"),
                        Node::Map(&[
                            Node::Bulk("keynumidx"),
                            Node::Int(0),
                            Node::Bulk("firstkey"),
                            Node::Int(1),
                            Node::Bulk("keystep"),
                            Node::Int(1),
                        ]),
                    ]),
                ]),
                Node::Map(&[
                    Node::Bulk("flags"),
                    Node::Set(&[Node::Simple("RW"), Node::Simple("incomplete")]),
                    Node::Bulk("begin_search"),
                    Node::Map(&[
                        Node::Bulk("type"),
                        Node::Bulk("unknown"),
                        Node::Bulk("spec"),
                        Node::Map(&[]),
                    ]),
                    Node::Bulk("find_keys"),
                    Node::Map(&[
                        Node::Bulk("type"),
                        Node::Bulk("unknown"),
                        Node::Bulk("spec"),
                        Node::Map(&[]),
                    ]),
                ]),
            ]),
            Node::Set(&[]),
        ]);
        let finder = KeyFinder::from_info(&NODE);
        assert_eq!(
            finder.specs.as_slice(),
            [
                spec(
                    RO | KeyFlags::ACCESS,
                    keyword("STREAMS", 1),
                    range(-1, 1, 2)
                ),
                spec(KeyFlags::RW, Begin::Index(2), keynum(0, 1, 1)),
                spec(
                    KeyFlags::RW | KeyFlags::INCOMPLETE,
                    Begin::Unknown,
                    Layout::Unknown
                ),
            ]
        );
        assert_eq!(
            finder.key_flags(),
            RO | KeyFlags::ACCESS | KeyFlags::RW | KeyFlags::INCOMPLETE
        );
        assert_eq!(positions(&finder, "X 1 a 0"), Err(InvalidKeys));
    }
}
