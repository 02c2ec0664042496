//! The function interpreter (Redis's Lua function engine): one per thread, apart from
//! the scripts' one. It loads a library the first time one of its functions is called,
//! and again when the library changed (its list of loaded functions is emptied whenever
//! the registry changes; the interpreter stays, with any function suspended in it).
//!
//! A library's code runs once, in a loading environment whose only global is a `redis`
//! table with `register_function`, `log`, the log levels and the version (the rest
//! raises Redis's "nonexistent global variable" error); its globals are read-only. The
//! functions it registers keep that environment, switched to the interpreter's globals
//! (less `KEYS` and `ARGV`, which functions do not have) once loading is over: each
//! library has its own environment, and none can set a global.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use goblin_protocol::Version;
use mlua::{Function, Lua, MultiValue, Table, Value};

use super::kept::{Kept, Slot};
use super::{Engine, array, compile_error, run_error};
use crate::scripting::functions::{BAD_NAME, FunctionDef, LibFunction, Library};
use crate::scripting::libs::{self, INTERNAL, Raise, ScriptError};
use crate::scripting::{FLAG_NAMES, ScriptFlags};

/// The chunk name of a library: errors read `user_function:3: …`.
pub const CHUNK: &str = "@user_function";

/// How long a library's code may run when it loads (`LOAD_TIMEOUT_MS`).
const LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

/// A function a library's code registers, with its Lua function.
struct Registered {
    /// Its name, description and flags.
    def: FunctionDef,
    /// The callback.
    func: Function,
}

/// The functions a library's code registered: their definitions, and their Lua
/// functions in a table, by position from 1 (not as handles: a library may register
/// more functions than mlua has handles, see `kept`).
pub struct Registrations {
    /// The functions' names, descriptions and flags, in the order registered.
    pub defs: Vec<FunctionDef>,
    funcs: Table,
    /// Their names, to refuse a second of one (a library may register thousands).
    names: std::collections::HashSet<Vec<u8>>,
}

/// The functions being registered while a library's code runs.
struct Loading(Registrations);

/// The functions of the libraries this interpreter loaded, by lowercase name, with their
/// library; emptied when the registry's generation changes.
struct Loaded {
    generation: u64,
    functions: HashMap<Vec<u8>, (Arc<Library>, Slot)>,
    kept: Kept,
}

/// A function's environment after loading: the globals, less `KEYS` and `ARGV`.
const RUNTIME_INDEX: &str = r#"
local G, missing = ...
return function(t, k)
  if k == "KEYS" or k == "ARGV" then return missing(t, k) end
  return G[k]
end
"#;

/// Where [`CALL_WITH`]'s compiled chunk is kept (in the interpreter's registry).
const CALL_WITH_KEY: &str = "goblin.call_with";

/// Calls a function with its keys and arguments (a run has no arguments).
const CALL_WITH: &str = r#"
local f, keys, args = ...
return function() return f(keys, args) end
"#;

thread_local! {
    static FUNCTION_ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's function interpreter, made on first use (and kept: a
/// function suspended in a command across shards lives in it while the libraries
/// change). `None` when it cannot be made.
pub fn with_function_engine<R>(f: impl FnOnce(&mut Engine) -> R) -> Option<R> {
    FUNCTION_ENGINE.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        if slot.is_none() {
            match Engine::new(0) {
                Ok(mut engine) => {
                    engine.function = true;
                    *slot = Some(engine);
                }
                Err(e) => {
                    crate::log!(Warning, "could not start the Lua interpreter: {e}");
                    return None;
                }
            }
        }
        slot.as_mut().map(f)
    })
}

impl Engine {
    /// The loading environment's globals: `redis` with what a library may call while it
    /// loads; both protected as the interpreter's globals are.
    fn loading_api(&self) -> mlua::Result<Table> {
        let lua = &self.lua;
        let meta = lua.globals().metatable();
        let redis = lua.create_table()?;
        let register = lua.create_function(register_function)?;
        redis.raw_set("register_function", libs::guarded(lua, register)?)?;
        for name in [
            "log",
            "LOG_DEBUG",
            "LOG_VERBOSE",
            "LOG_NOTICE",
            "LOG_WARNING",
            "REDIS_VERSION",
            "REDIS_VERSION_NUM",
        ] {
            redis.raw_set(name, self.redis.raw_get::<Value>(name)?)?;
        }
        redis.set_metatable(meta.clone());
        let api = lua.create_table()?;
        api.raw_set("redis", redis)?;
        api.set_metatable(meta);
        Ok(api)
    }

    /// Runs a library's code (after its metadata line) in the loading environment: the
    /// functions it registered, or Redis's error.
    pub fn load_library(&mut self, code: &[u8]) -> Result<Registrations, Vec<u8>> {
        let lua = &self.lua;
        let setup = (|| -> mlua::Result<(Table, Table)> {
            let env = lua.create_table()?;
            let meta = lua.create_table()?;
            meta.raw_set("__index", self.loading_api()?)?;
            if let Some(gmeta) = lua.globals().metatable() {
                meta.raw_set("__newindex", gmeta.raw_get::<Value>("__newindex")?)?;
            }
            env.set_metatable(Some(meta.clone()));
            Ok((env, meta))
        })();
        let (env, meta) = setup.map_err(|e| format!("ERR {e}").into_bytes())?;
        let chunk = lua
            .load(code)
            .set_name(CHUNK)
            .set_environment(env.clone())
            .into_function()
            .map_err(|e| {
                let mut text = compile_error(e);
                // "Error compiling script (new function): " → Redis's words for libraries.
                let msg = text.split_off(b"ERR Error compiling script (new function): ".len());
                let mut reply = b"ERR Error compiling function: ".to_vec();
                reply.extend_from_slice(&msg);
                reply
            })?;
        // Calls of library functions in tail position made plain calls, so that their
        // errors name the function's line (`untail`; only goblin's own bytecode is
        // loaded).
        let chunk = super::untail::without_tail_calls(lua, chunk, CHUNK, Some(env));
        let funcs = lua
            .create_table()
            .map_err(|e| format!("ERR {e}").into_bytes())?;
        lua.set_app_data(Loading(Registrations {
            defs: Vec::new(),
            funcs,
            names: std::collections::HashSet::new(),
        }));
        // Loading may take LOAD_TIMEOUT at most (as redis-server's engine allows).
        let started = std::time::Instant::now();
        lua.set_hook(
            mlua::HookTriggers::new().every_nth_instruction(100_000),
            move |_, _| {
                if started.elapsed() > LOAD_TIMEOUT {
                    return Err(ScriptError::redis("ERR FUNCTION LOAD timeout"));
                }
                Ok(mlua::VmState::Continue)
            },
        );
        let ran = chunk.call::<()>(());
        super::set_busy_hook(lua);
        let registered = lua.remove_app_data::<Loading>().map(|l| l.0);
        if let Err(e) = ran {
            let mut reply = b"ERR Error registering functions: ".to_vec();
            reply.extend_from_slice(&load_error(&e));
            return Err(reply);
        }
        // Loaded: the functions see the interpreter's globals from now on.
        let switched = (|| -> mlua::Result<()> {
            let missing = lua
                .globals()
                .metatable()
                .map(|m| m.raw_get::<Value>("__index"))
                .transpose()?
                .unwrap_or(Value::Nil);
            let index: Function = lua
                .load(RUNTIME_INDEX)
                .set_name(INTERNAL)
                .call((lua.globals(), missing))?;
            meta.raw_set("__index", index)
        })();
        switched.map_err(|e| format!("ERR {e}").into_bytes())?;
        registered.ok_or_else(|| b"ERR internal error: the library's functions are gone".to_vec())
    }

    /// The Lua function of `f`, loading its library in this interpreter first if it has
    /// not this very library (`generation`: the registry's, whose change empties the
    /// interpreter's list of loaded functions).
    pub fn library_function(
        &mut self,
        f: &LibFunction,
        generation: u64,
    ) -> Result<Function, Vec<u8>> {
        let key = f.def().name.to_ascii_lowercase();
        if self.lua.app_data_ref::<Loaded>().is_none() {
            let loaded = Loaded {
                generation,
                functions: HashMap::new(),
                kept: Kept::new(&self.lua).map_err(run_error)?,
            };
            self.lua.set_app_data(loaded);
        }
        if let Some(mut loaded) = self.lua.app_data_mut::<Loaded>() {
            if loaded.generation != generation {
                loaded.functions.clear();
                loaded.kept.clear();
                loaded.generation = generation;
            }
            if let Some(&(ref lib, slot)) = loaded.functions.get(&key)
                && Arc::ptr_eq(lib, &f.library)
            {
                return loaded.kept.get(slot).map_err(run_error);
            }
        }
        let registry = self.load_library(f.library.body())?;
        let mut found = None;
        let mut loaded = self.lua.app_data_mut::<Loaded>();
        for (i, def) in registry.defs.iter().enumerate() {
            let func: Function = registry.funcs.raw_get(i + 1).map_err(run_error)?;
            let lower = def.name.to_ascii_lowercase();
            if let Some(loaded) = loaded.as_deref_mut() {
                let slot = loaded.kept.put(&func).map_err(run_error)?;
                let entry = (Arc::clone(&f.library), slot);
                if let Some((_, old)) = loaded.functions.insert(lower.clone(), entry) {
                    loaded.kept.remove(old);
                }
            }
            if lower == key {
                found = Some(func);
            }
        }
        found.ok_or_else(|| b"ERR Function not found".to_vec())
    }

    /// A function with no arguments that calls `func(keys, args)`.
    pub fn call_with(
        &self,
        func: Function,
        keys: &[&[u8]],
        argv: &[&[u8]],
    ) -> mlua::Result<Function> {
        let lua = &self.lua;
        // (Compiled once per interpreter, not once per call.)
        let maker = match lua.named_registry_value::<Option<Function>>(CALL_WITH_KEY)? {
            Some(maker) => maker,
            None => {
                let maker = lua.load(CALL_WITH).set_name(INTERNAL).into_function()?;
                lua.set_named_registry_value(CALL_WITH_KEY, &maker)?;
                maker
            }
        };
        maker.call((func, array(lua, keys)?, array(lua, argv)?))
    }

    /// Starts function `f` as a coroutine (its keys span shards; see [`Engine::start`]).
    pub fn start_function(
        &mut self,
        f: &LibFunction,
        generation: u64,
        keys: &[Vec<u8>],
        argv: &[Vec<u8>],
        version: Version,
    ) -> Result<u64, Vec<u8>> {
        let func = self.library_function(f, generation)?;
        let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
        let thread = self
            .call_with(func, &keys, &argv)
            .and_then(|run| self.lua.create_thread(run))
            .map_err(run_error)?;
        self.suspend(thread, f.def().name.clone(), version, None)
    }
}

/// The message of an error that ended a library's loading, as
/// `luaExtractErrorInformation` gives it: a raised table's `err`, or `ERR <string>`.
fn load_error(e: &mlua::Error) -> Vec<u8> {
    match ScriptError::find(e) {
        Some(ScriptError::Redis(m))
        | Some(ScriptError::Command(m))
        | Some(ScriptError::Raised { err: m, .. }) => m.clone(),
        Some(ScriptError::Message(m)) => [b"ERR ".as_slice(), m].concat(),
        None => {
            let text = match e {
                mlua::Error::RuntimeError(m) => m.clone(),
                mlua::Error::CallbackError { cause, .. } => return load_error(cause),
                other => other.to_string(),
            };
            let text = text.split("\nstack traceback:").next().unwrap_or_default();
            format!("ERR {text}").into_bytes()
        }
    }
}

/// A string as `luaGetStringSds` takes it: a string, or a number made one.
fn string_of(lua: &Lua, v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Number(_) | Value::Integer(_) => lua
            .coerce_string(v.clone())
            .ok()
            .flatten()
            .map(|s| s.as_bytes().to_vec()),
        _ => None,
    }
}

/// `luaRegisterFunctionReadFlags`.
fn read_flags(lua: &Lua, t: &Table) -> Result<ScriptFlags, Raise> {
    let mut flags = 0;
    for j in 1.. {
        let v: Value = t.get(j)?;
        if v.is_nil() {
            break;
        }
        let Some(name) = string_of(lua, &v) else {
            return Err(Raise::Err("ERR unknown flag given".into()));
        };
        match FLAG_NAMES
            .iter()
            .find(|(n, _)| n.as_bytes().eq_ignore_ascii_case(&name))
        {
            Some((_, bit)) => flags |= bit,
            None => return Err(Raise::Err("ERR unknown flag given".into())),
        }
    }
    Ok(ScriptFlags(flags))
}

fn raise(text: &str) -> Raise {
    Raise::Err(format!("ERR {text}"))
}

/// `redis.register_function(name, callback)` or `redis.register_function{…}`.
fn register_function_args(lua: &Lua, args: &MultiValue) -> Result<Registered, Raise> {
    if lua.app_data_ref::<Loading>().is_none() {
        return Err(raise(
            "redis.register_function can only be called on FUNCTION LOAD command",
        ));
    }
    match args.len() {
        1 => {
            let Some(Value::Table(t)) = args.front() else {
                return Err(raise(
                    "calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).",
                ));
            };
            let (mut name, mut description, mut func, mut flags) =
                (None, None, None, ScriptFlags(0));
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, v) = pair?;
                let Some(key) = string_of(lua, &k) else {
                    return Err(raise(
                        "named argument key given to redis.register_function is not a string",
                    ));
                };
                let key = key.to_ascii_lowercase();
                match key.as_slice() {
                    b"function_name" => {
                        name = Some(string_of(lua, &v).ok_or_else(|| {
                            raise("function_name argument given to redis.register_function must be a string")
                        })?);
                    }
                    b"description" => {
                        description = Some(string_of(lua, &v).ok_or_else(|| {
                            raise("description argument given to redis.register_function must be a string")
                        })?);
                    }
                    b"callback" => match v {
                        Value::Function(f) => func = Some(f),
                        _ => {
                            return Err(raise(
                                "callback argument given to redis.register_function must be a function",
                            ));
                        }
                    },
                    b"flags" => match v {
                        Value::Table(ft) => {
                            flags = read_flags(lua, &ft)?;
                        }
                        _ => {
                            return Err(raise(
                                "flags argument to redis.register_function must be a table representing function flags",
                            ));
                        }
                    },
                    _ => return Err(raise("unknown argument given to redis.register_function")),
                }
            }
            let Some(name) = name else {
                return Err(raise(
                    "redis.register_function must get a function name argument",
                ));
            };
            let Some(func) = func else {
                return Err(raise(
                    "redis.register_function must get a callback argument",
                ));
            };
            Ok(Registered {
                def: FunctionDef {
                    name,
                    description,
                    flags,
                },
                func,
            })
        }
        2 => {
            let name = args
                .front()
                .and_then(|v| string_of(lua, v))
                .ok_or_else(|| {
                    raise("first argument to redis.register_function must be a string")
                })?;
            let Some(Value::Function(func)) = args.get(1) else {
                return Err(raise(
                    "second argument to redis.register_function must be a function",
                ));
            };
            Ok(Registered {
                def: FunctionDef {
                    name,
                    description: None,
                    flags: ScriptFlags(0),
                },
                func: func.clone(),
            })
        }
        _ => Err(raise(
            "wrong number of arguments to redis.register_function",
        )),
    }
}

/// `redis.register_function`: checks the function (`functionLibCreateFunction`) and
/// adds it to the library being loaded.
fn register_function(lua: &Lua, args: MultiValue) -> mlua::Result<()> {
    let registered = match register_function_args(lua, &args) {
        Ok(r) => r,
        Err(Raise::Err(m)) => return Err(ScriptError::redis(m)),
        Err(Raise::Msg(m)) => return Err(ScriptError::message(lua, &m)),
        Err(Raise::Lua(e)) => return Err(e),
    };
    let mut loading = lua.app_data_mut::<Loading>();
    let Some(loading) = loading.as_deref_mut() else {
        return Err(ScriptError::redis(
            "ERR redis.register_function can only be called on FUNCTION LOAD command",
        ));
    };
    if !crate::scripting::functions::valid_name(&registered.def.name) {
        return Err(ScriptError::redis([b"ERR ".as_slice(), BAD_NAME].concat()));
    }
    let registry = &mut loading.0;
    if !registry.names.insert(registered.def.name.clone()) {
        return Err(ScriptError::redis(
            "ERR Function already exists in the library",
        ));
    }
    registry
        .funcs
        .raw_set(registry.defs.len() + 1, registered.func)?;
    registry.defs.push(registered.def);
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_library_registers_its_functions() {
        let mut engine = Engine::new(0).unwrap();
        let got = engine
            .load_library(b"\nredis.register_function('f', function(k, a) return 1 end)\nredis.register_function{function_name='g', callback=function() end, flags={'no-writes'}, description='d'}")
            .unwrap();
        let names: Vec<_> = got.defs.iter().map(|d| d.name.clone()).collect();
        assert_eq!(names, vec![b"f".to_vec(), b"g".to_vec()]);
        assert!(got.defs[1].flags.has(ScriptFlags::NO_WRITES));
        let e = |code: &[u8], engine: &mut Engine| {
            String::from_utf8(engine.load_library(code).err().unwrap()).unwrap()
        };
        assert_eq!(
            e(b"\nx = 1", &mut engine),
            "ERR Error registering functions: ERR user_function:2: Attempt to modify a readonly table"
        );
        assert_eq!(
            e(b"\nlocal s = string", &mut engine),
            "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'string'"
        );
        assert_eq!(
            e(b"\nredis.register_function('f', 1)", &mut engine),
            "ERR Error registering functions: ERR second argument to redis.register_function must be a function"
        );
        assert!(
            e(b"\nsyntax error", &mut engine)
                .starts_with("ERR Error compiling function: user_function:2:")
        );
    }
}
