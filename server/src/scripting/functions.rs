//! Redis 7.0 functions: the library registry every thread shares (FUNCTION LOAD, DELETE,
//! FLUSH, RESTORE change it; FCALL reads it), and the library metadata (`#!lua
//! name=<lib>`).
//!
//! A library is its code; its functions are what the code registered when it ran in
//! the loading environment (`engine/library.rs`). Each thread's function interpreter
//! loads a library on first use, in an environment of its own; every change to the
//! registry bumps its generation, and each thread loads its libraries again as they are
//! called.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use super::ScriptFlags;
use super::engine::library::with_function_engine;

/// The only engine: its name as FUNCTION LIST and STATS show it.
pub const ENGINE: &str = "LUA";

/// `functionsVerifyName`'s error (redis 7.0 gives it for function names too).
pub const BAD_NAME: &[u8] = b"Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// A function a library registered.
#[derive(Debug, Clone)]
pub struct FunctionDef {
    /// Its name, as registered.
    pub name: Vec<u8>,
    /// Its description, if it was given one.
    pub description: Option<Vec<u8>>,
    /// Its flags.
    pub flags: ScriptFlags,
}

/// A library.
#[derive(Debug)]
pub struct Library {
    /// Its name (the metadata's `name=`).
    pub name: Vec<u8>,
    /// The whole code, metadata line included.
    pub code: Vec<u8>,
    /// Where the code the interpreter runs starts (the metadata line's line feed, kept
    /// so that line numbers stay).
    pub code_at: usize,
    /// Its functions, in registration order.
    pub functions: Vec<FunctionDef>,
    /// Its code calls a command of every shard (`super::calls_every_shard`).
    pub every_shard: bool,
}

impl Library {
    /// The code the interpreter runs.
    pub fn body(&self) -> &[u8] {
        self.code.get(self.code_at..).unwrap_or(b"")
    }
}

/// A library's function, as FCALL finds it.
#[derive(Debug, Clone)]
pub struct LibFunction {
    /// The library.
    pub library: Arc<Library>,
    /// Which of its functions.
    pub index: usize,
}

impl LibFunction {
    /// The function.
    pub fn def(&self) -> &FunctionDef {
        &self.library.functions[self.index]
    }
}

/// Libraries by name, and their functions by name (without case, as Redis finds them).
#[derive(Debug, Default, Clone)]
pub struct Registry {
    libraries: BTreeMap<Vec<u8>, Arc<Library>>,
    functions: HashMap<Vec<u8>, LibFunction>,
}

impl Registry {
    /// The libraries, by name.
    pub fn libraries(&self) -> impl Iterator<Item = &Arc<Library>> {
        self.libraries.values()
    }

    /// The bytes of the libraries' code (INFO's `used_memory_functions`, MEMORY STATS'
    /// `functions.caches`).
    pub fn bodies_bytes(&self) -> usize {
        self.libraries().map(|l| l.body().len()).sum()
    }

    /// How many functions there are.
    pub fn function_count(&self) -> usize {
        self.functions.len()
    }

    fn unlink(&mut self, name: &[u8]) -> Option<Arc<Library>> {
        let lib = self.libraries.remove(name)?;
        for f in &lib.functions {
            self.functions.remove(&f.name.to_ascii_lowercase());
        }
        Some(lib)
    }

    fn link(&mut self, lib: Arc<Library>) {
        for (index, f) in lib.functions.iter().enumerate() {
            self.functions
                .entry(f.name.to_ascii_lowercase())
                .or_insert_with(|| LibFunction {
                    library: Arc::clone(&lib),
                    index,
                });
        }
        self.libraries.insert(lib.name.clone(), lib);
    }

    /// `functionsCreateWithLibraryCtx`: loads `code` as a library (replacing the one of
    /// its name with `replace`); its name, or Redis's error (code included).
    pub fn create(&mut self, code: &[u8], replace: bool) -> Result<Vec<u8>, Vec<u8>> {
        let meta = metadata(code).map_err(err)?;
        if !valid_name(&meta.name) {
            return Err(err(BAD_NAME.to_vec()));
        }
        if !meta.engine.eq_ignore_ascii_case(ENGINE.as_bytes()) {
            let mut e = b"Engine '".to_vec();
            e.extend_from_slice(&meta.engine);
            e.extend_from_slice(b"' not found");
            return Err(err(e));
        }
        if self.libraries.contains_key(&meta.name) && !replace {
            let mut e = b"Library '".to_vec();
            e.extend_from_slice(&meta.name);
            e.extend_from_slice(b"' already exists");
            return Err(err(e));
        }
        let body = &code[meta.code_at..];
        let registered: Vec<FunctionDef> = with_function_engine(|e| e.load_library(body))
            .unwrap_or_else(|| Err(b"ERR the Lua interpreter could not start".to_vec()))?
            .defs;
        if registered.is_empty() {
            return Err(b"ERR No functions registered".to_vec());
        }
        for r in &registered {
            if let Some(other) = self.functions.get(&r.name.to_ascii_lowercase())
                && other.library.name != meta.name
            {
                let mut e = b"ERR Function ".to_vec();
                e.extend_from_slice(&r.name);
                e.extend_from_slice(b" already exists");
                return Err(e);
            }
        }
        self.unlink(&meta.name);
        let lib = Arc::new(Library {
            name: meta.name.clone(),
            code: code.to_vec(),
            code_at: meta.code_at,
            functions: registered,
            // (Read with the server's table: none in this module's tests.)
            every_shard: super::COMMANDS.get().is_some_and(|table| {
                super::calls_every_shard(code.get(meta.code_at..).unwrap_or(b""), table)
            }),
        });
        self.link(lib);
        Ok(meta.name)
    }

    /// `libraryJoin`: adds `other`'s libraries (replacing those of the same name with
    /// `replace`), or changes nothing and says why.
    fn join(&mut self, other: Registry, replace: bool) -> Result<(), Vec<u8>> {
        let mut joined = self.clone();
        for name in other.libraries.keys() {
            if joined.libraries.contains_key(name) {
                if !replace {
                    let mut e = b"ERR Library ".to_vec();
                    e.extend_from_slice(name);
                    e.extend_from_slice(b" already exists");
                    return Err(e);
                }
                joined.unlink(name);
            }
        }
        for (lower, f) in &other.functions {
            if joined.functions.contains_key(lower) {
                let mut e = b"ERR Function ".to_vec();
                e.extend_from_slice(&f.def().name);
                e.extend_from_slice(b" already exists");
                return Err(e);
            }
        }
        for lib in other.libraries.into_values() {
            joined.link(lib);
        }
        *self = joined;
        Ok(())
    }
}

/// What FUNCTION RESTORE does with the libraries there are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestorePolicy {
    /// Adds the payload's; a name taken is an error.
    Append,
    /// Adds the payload's, replacing those of the same names.
    Replace,
    /// The payload's only.
    Flush,
}

/// The registry every thread shares.
#[derive(Debug, Default)]
pub struct Functions {
    registry: RwLock<Registry>,
    /// Bumped on every change: each thread's function interpreter starts again.
    generation: AtomicU64,
}

impl Functions {
    /// The current generation.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Runs `f` on the registry as it is.
    pub fn read<R>(&self, f: impl FnOnce(&Registry) -> R) -> R {
        match self.registry.read() {
            Ok(r) => f(&r),
            Err(poisoned) => f(&poisoned.into_inner()),
        }
    }

    fn write<R>(&self, f: impl FnOnce(&mut Registry) -> R) -> R {
        match self.registry.write() {
            Ok(mut r) => f(&mut r),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// The function FCALL names.
    pub fn find(&self, name: &[u8]) -> Option<LibFunction> {
        self.read(|r| r.functions.get(&name.to_ascii_lowercase()).cloned())
    }

    /// The library called `name`.
    pub fn library(&self, name: &[u8]) -> Option<Arc<Library>> {
        self.read(|r| r.libraries.get(name).cloned())
    }

    /// FUNCTION LOAD.
    ///
    /// The library's code runs (for up to half a second) on a copy of the registry, which
    /// then replaces it: FCALL on other threads does not wait for it. (Changes are made
    /// one at a time: by shard 0's thread, or while loading at start-up.)
    pub fn load(&self, code: &[u8], replace: bool) -> Result<Vec<u8>, Vec<u8>> {
        let mut registry = self.read(Registry::clone);
        let name = registry.create(code, replace)?;
        self.write(|r| *r = registry);
        self.changed();
        Ok(name)
    }

    /// FUNCTION DELETE.
    pub fn delete(&self, name: &[u8]) -> Result<(), Vec<u8>> {
        self.write(|r| r.unlink(name))
            .ok_or_else(|| b"ERR Library not found".to_vec())?;
        self.changed();
        Ok(())
    }

    /// FUNCTION FLUSH.
    pub fn flush(&self) {
        self.write(|r| *r = Registry::default());
        self.changed();
    }

    /// The libraries' codes, by name (FUNCTION DUMP, snapshots).
    pub fn codes(&self) -> Vec<Vec<u8>> {
        self.read(|r| r.libraries.values().map(|l| l.code.clone()).collect())
    }

    /// FUNCTION RESTORE (and loading a snapshot): the libraries of `codes`, added as
    /// `policy` says; nothing changes on an error.
    pub fn restore(&self, codes: &[Vec<u8>], policy: RestorePolicy) -> Result<(), Vec<u8>> {
        let mut new = Registry::default();
        for code in codes {
            new.create(code, false)?;
        }
        self.write(|r| match policy {
            RestorePolicy::Flush => {
                *r = new;
                Ok(())
            }
            _ => r.join(new, policy == RestorePolicy::Replace),
        })?;
        self.changed();
        Ok(())
    }
}

/// An error text as Redis replies it: `ERR` before it.
fn err(text: Vec<u8>) -> Vec<u8> {
    let mut e = b"ERR ".to_vec();
    e.extend_from_slice(&text);
    e
}

/// `functionsVerifyName`: letters, digits and underscores, at least one.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
}

/// A library's metadata.
#[derive(Debug, PartialEq, Eq)]
pub struct Metadata {
    /// The engine (after `#!`).
    pub engine: Vec<u8>,
    /// The library's name.
    pub name: Vec<u8>,
    /// Where the code starts: at the metadata line's line feed.
    pub code_at: usize,
}

/// `functionExtractLibMetaData`: the metadata line of `code`, or the error (without
/// its code).
pub fn metadata(code: &[u8]) -> Result<Metadata, Vec<u8>> {
    if !code.starts_with(b"#!") {
        return Err(b"Missing library metadata".to_vec());
    }
    // C's strchr: the line ends at the first line feed, or nowhere past a NUL.
    let text = super::cstr(code);
    let Some(end) = memchr::memchr(b'\n', text) else {
        return Err(b"Invalid library metadata".to_vec());
    };
    let parts = match goblin_protocol::split_args(&code[..end]) {
        Some(p) if !p.is_empty() => p,
        _ => return Err(b"Invalid library metadata".to_vec()),
    };
    let engine = parts[0].get(2..).unwrap_or_default().to_vec();
    let mut name = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    b"Invalid metadata value, name argument was given multiple times".to_vec(),
                );
            }
            name = Some(part[5..].to_vec());
            continue;
        }
        let mut e = b"Invalid metadata value given: ".to_vec();
        e.extend_from_slice(super::cstr(part));
        return Err(e);
    }
    let Some(name) = name else {
        return Err(b"Library name was not given".to_vec());
    };
    Ok(Metadata {
        engine,
        name,
        code_at: end,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_read_as_redis_reads_it() {
        let m = metadata(b"#!lua name=mylib\nreturn 1").unwrap();
        assert_eq!(
            (m.engine.as_slice(), m.name.as_slice(), m.code_at),
            (&b"lua"[..], &b"mylib"[..], 16)
        );
        let e = |c: &[u8]| String::from_utf8(metadata(c).unwrap_err()).unwrap();
        assert_eq!(e(b"return 1"), "Missing library metadata");
        assert_eq!(e(b"#!lua name=a"), "Invalid library metadata");
        assert_eq!(e(b"#!lua\n"), "Library name was not given");
        assert_eq!(
            e(b"#!lua name=a foo=bar\n"),
            "Invalid metadata value given: foo=bar"
        );
        assert_eq!(
            e(b"#!lua name=a NAME=b\n"),
            "Invalid metadata value, name argument was given multiple times"
        );
        assert!(valid_name(b"a_B9") && !valid_name(b"") && !valid_name(b"a-b"));
    }

    fn text(r: Result<(), Vec<u8>>) -> String {
        String::from_utf8(r.unwrap_err()).unwrap()
    }

    #[test]
    fn libraries_load_replace_and_restore_as_redis_does() {
        let lib = |name: &str, f: &str| {
            format!("#!lua name={name}\nredis.register_function('{f}', function() return 1 end)")
                .into_bytes()
        };
        let functions = Functions::default();
        assert_eq!(functions.load(&lib("a", "f"), false).unwrap(), b"a");
        let g0 = functions.generation();
        assert_eq!(
            text(functions.load(&lib("a", "g"), false).map(|_| ())),
            "ERR Library 'a' already exists"
        );
        assert_eq!(
            text(functions.load(&lib("b", "F"), false).map(|_| ())),
            "ERR Function F already exists"
        );
        assert_eq!(functions.generation(), g0, "a refused load changes nothing");
        // REPLACE: the library's own functions may be registered again.
        functions.load(&lib("a", "f"), true).unwrap();
        assert!(functions.generation() > g0);
        assert!(functions.find(b"F").is_some());
        functions.load(&lib("b", "g"), false).unwrap();
        let codes = functions.codes();
        // APPEND collides on the first library by name; REPLACE replaces both.
        assert_eq!(
            text(functions.restore(&codes, RestorePolicy::Append)),
            "ERR Library a already exists"
        );
        functions.restore(&codes, RestorePolicy::Replace).unwrap();
        // A payload's function that another library has.
        functions.delete(b"b").unwrap();
        functions.load(&lib("c", "g"), false).unwrap();
        assert_eq!(
            text(functions.restore(&[lib("b", "g")], RestorePolicy::Replace)),
            "ERR Function g already exists"
        );
        functions
            .restore(&[lib("b", "h")], RestorePolicy::Flush)
            .unwrap();
        assert!(functions.find(b"f").is_none() && functions.find(b"h").is_some());
        assert_eq!(text(functions.delete(b"zz")), "ERR Library not found");
        functions.flush();
        assert!(functions.codes().is_empty());
    }
}
