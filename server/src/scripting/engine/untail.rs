//! Tail calls out of a script, in its bytecode.
//!
//! A script's `redis.call` is a Lua function (it packs many arguments, see
//! `engine::CALL_ARGS`; under a plan it yields each command), and so are the library
//! functions (`libs::guarded`), where in redis-server they are C functions. `return redis.call(…)` compiles
//! to a tail call, and Lua 5.1 puts a Lua function called that way in its caller's place
//! (a C function it calls from the caller's frame): the script's frame is gone when the
//! command's error is raised, and the error would lose its `script: …, on
//! @user_script:N.` — the position Redis gives it. So the bytecode goblin compiled for
//! such a run (never a client's: those are read as text) has each `OP_TAILCALL` turned
//! into the `OP_CALL` it was before the compiler marked it (`C = 0`, every result),
//! which the `OP_RETURN` after it then returns: the same results, with the caller's
//! frame kept, as redis-server keeps it. Only calls of a library's function are changed:
//! a table's field or a global (`redis.call`, `cjson.decode`, `rawset`), or a local or
//! an upvalue copied from one (`local call = redis.call`, BullMQ's `rcall`); a script's
//! own functions may recurse through tail calls as deep as they like, as in Lua.
//!
//! The chunk is read as Lua 5.1's `ldump.c` writes it on this platform; anything else
//! leaves it as it is.

/// The header of a Lua 5.1 binary chunk on a 64-bit little-endian platform: signature,
/// version, format, endianness, sizes of int, size_t, Instruction and lua_Number, and
/// numbers as doubles.
const HEADER: [u8; 12] = [0x1b, b'L', b'u', b'a', 0x51, 0, 1, 4, 8, 4, 8, 0];
const OP_MASK: u32 = 0x3f;
const OP_CALL: u32 = 28;
const OP_TAILCALL: u32 = 29;
/// Nested functions deeper than this leave the chunk as it is (Lua's parser allows 200
/// levels of C calls; a chunk of ours never comes near).
const MAX_DEPTH: usize = 250;

/// `f` (a chunk goblin compiled, named `name`) loaded again with its tail calls of a
/// table's field made plain calls, in environment `env` if given; `f` itself when it has
/// none (or its bytecode is not read).
pub fn without_tail_calls(
    lua: &mlua::Lua,
    f: mlua::Function,
    name: &str,
    env: Option<mlua::Table>,
) -> mlua::Function {
    let Some(untailed) = untail(&f.dump(false)) else {
        return f;
    };
    let mut chunk = lua
        .load(untailed.as_slice())
        .set_name(name)
        .set_mode(mlua::ChunkMode::Binary);
    if let Some(env) = env {
        chunk = chunk.set_environment(env);
    }
    chunk.into_function().unwrap_or(f)
}

/// `chunk` with its tail calls made plain calls, or `None` when it is not a Lua 5.1
/// chunk of this platform's layout (or has none).
pub fn untail(chunk: &[u8]) -> Option<Vec<u8>> {
    if chunk.get(..HEADER.len())? != HEADER {
        return None;
    }
    let mut out = chunk.to_vec();
    let mut reader = Reader {
        chunk,
        at: HEADER.len(),
    };
    let main = reader.function(0)?;
    if reader.at != chunk.len() {
        return None;
    }
    let mut calls = Vec::new();
    main.library_tail_calls(&[], &mut calls);
    if calls.is_empty() {
        return None;
    }
    for at in calls {
        let word = out.get_mut(at..at + 4)?;
        let op = u32::from_le_bytes(word.try_into().ok()?);
        let call = (op & !OP_MASK) | OP_CALL;
        word.copy_from_slice(&call.to_le_bytes());
    }
    Some(out)
}

const OP_MOVE: u32 = 0;
const OP_GETUPVAL: u32 = 4;
const OP_GETGLOBAL: u32 = 5;
const OP_GETTABLE: u32 = 6;
const OP_SELF: u32 = 11;
const OP_CLOSURE: u32 = 36;
/// Instructions whose `A` is not a register they set: SETGLOBAL, SETUPVAL, SETTABLE,
/// JMP, EQ, LT, LE, TEST, SETLIST, CLOSE.
const SET_NONE: [u32; 10] = [7, 8, 9, 22, 23, 24, 25, 26, 34, 35];
/// Copies followed from register to register before giving up.
const MAX_HOPS: usize = 16;

fn opcode(op: u32) -> u32 {
    op & OP_MASK
}

fn field_a(op: u32) -> u32 {
    (op >> 6) & 0xff
}

fn field_b(op: u32) -> u32 {
    op >> 23
}

/// A function prototype as the chunk holds it: where its code starts in the chunk, the
/// code, its number of upvalues and its nested prototypes.
struct Proto {
    start: usize,
    code: Vec<u32>,
    upvalues: usize,
    protos: Vec<Proto>,
}

impl Proto {
    /// Notes where this prototype's tail calls of a library's function are, and its
    /// nested ones' (`upvalues`: which of its upvalues hold a library's function).
    fn library_tail_calls(&self, upvalues: &[bool], calls: &mut Vec<usize>) {
        // The instructions after a CLOSURE name what it captures: not registers set.
        let mut captures = vec![false; self.code.len()];
        for (i, &op) in self.code.iter().enumerate() {
            if opcode(op) == OP_CLOSURE
                && let Some(p) = self.protos.get((op >> 14) as usize)
            {
                for c in captures.iter_mut().skip(i + 1).take(p.upvalues) {
                    *c = true;
                }
            }
        }
        let is_library = |at: usize, reg: u32| self.library_function(&captures, upvalues, at, reg);
        for (i, &op) in self.code.iter().enumerate() {
            // A tail call always takes every result (C = 0), as the compiler leaves it.
            if opcode(op) == OP_TAILCALL
                && (op >> 14) & 0x1ff == 0
                && !captures[i]
                && is_library(i, field_a(op))
            {
                calls.push(self.start + i * 4);
            }
        }
        for (i, &op) in self.code.iter().enumerate() {
            if opcode(op) != OP_CLOSURE || captures[i] {
                continue;
            }
            let Some(p) = self.protos.get((op >> 14) as usize) else {
                continue;
            };
            let captured: Vec<bool> = (0..p.upvalues)
                .map(|k| match self.code.get(i + 1 + k) {
                    Some(&c) if opcode(c) == OP_MOVE => is_library(i, field_b(c)),
                    Some(&c) if opcode(c) == OP_GETUPVAL => {
                        upvalues.get(field_b(c) as usize).copied().unwrap_or(false)
                    }
                    _ => false,
                })
                .collect();
            p.library_tail_calls(&captured, calls);
        }
    }

    /// Whether register `reg` holds a library's function at instruction `at`: the last
    /// instruction before it to set the register reads a table's field or a global
    /// (`redis.call`, `rawset`: a script cannot set a global, so these are the
    /// engine's), or copies a register or an upvalue that holds one (`local call =
    /// redis.call`). Read in the code's order, jumps aside: a guess, which at worst
    /// leaves a library's call a tail call, or makes one of the script's own functions
    /// a plain call.
    fn library_function(&self, captures: &[bool], upvalues: &[bool], at: usize, reg: u32) -> bool {
        let (mut at, mut reg) = (at, reg);
        for _ in 0..MAX_HOPS {
            let set = (0..at).rev().find(|&i| {
                let op = self.code[i];
                !captures[i] && field_a(op) == reg && !SET_NONE.contains(&opcode(op))
            });
            let Some(i) = set else {
                return false;
            };
            let op = self.code[i];
            match opcode(op) {
                OP_GETGLOBAL | OP_GETTABLE | OP_SELF => return true,
                OP_GETUPVAL => return upvalues.get(field_b(op) as usize).copied().unwrap_or(false),
                OP_MOVE => (at, reg) = (i, field_b(op)),
                _ => return false,
            }
        }
        false
    }
}

/// Reads a chunk's prototypes.
struct Reader<'a> {
    chunk: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.at.checked_add(n)?;
        let bytes = self.chunk.get(self.at..end)?;
        self.at = end;
        Some(bytes)
    }

    fn int(&mut self) -> Option<usize> {
        let n = i32::from_le_bytes(self.take(4)?.try_into().ok()?);
        usize::try_from(n).ok()
    }

    fn string(&mut self) -> Option<()> {
        let n = u64::from_le_bytes(self.take(8)?.try_into().ok()?);
        self.take(usize::try_from(n).ok()?).map(drop)
    }

    /// One function prototype (`DumpFunction`), its nested ones included.
    fn function(&mut self, depth: usize) -> Option<Proto> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.string()?; // source
        self.take(4 + 4)?; // linedefined, lastlinedefined
        // nups, numparams, is_vararg, maxstacksize
        let upvalues = usize::from(*self.take(4)?.first()?);
        let count = self.int()?;
        let start = self.at;
        let code: Vec<u32> = self
            .take(count.checked_mul(4)?)?
            .chunks_exact(4)
            .filter_map(|w| w.try_into().ok().map(u32::from_le_bytes))
            .collect();
        let constants = self.int()?;
        for _ in 0..constants {
            match self.take(1)?[0] {
                0 => {}                       // nil
                1 => self.take(1).map(drop)?, // boolean
                3 => self.take(8).map(drop)?, // number
                4 => self.string()?,          // string
                _ => return None,
            }
        }
        let count = self.int()?;
        let mut protos = Vec::with_capacity(count.min(1024));
        for _ in 0..count {
            protos.push(self.function(depth + 1)?);
        }
        let lines = self.int()?;
        self.take(lines.checked_mul(4)?)?;
        let locals = self.int()?;
        for _ in 0..locals {
            self.string()?;
            self.take(8)?; // startpc, endpc
        }
        let names = self.int()?;
        for _ in 0..names {
            self.string()?;
        }
        Some(Proto {
            start,
            code,
            upvalues,
            protos,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use mlua::{Function, Lua};

    fn dump(lua: &Lua, code: &str) -> Vec<u8> {
        lua.load(code).into_function().unwrap().dump(false)
    }

    fn load(lua: &Lua, chunk: &[u8]) -> Function {
        lua.load(chunk)
            .set_mode(mlua::ChunkMode::Binary)
            .into_function()
            .unwrap()
    }

    #[test]
    fn tail_calls_keep_their_callers_frame_and_return_the_same() {
        let lua = Lua::new();
        // `err` raises an error at its caller's line: none for the stand-in of a frame
        // a tail call replaced.
        let code = r#"
            local lib = {}
            function lib.err() error('boom', 2) end
            function lib.many() return 1, 2, 3 end
            local function inner()
              return lib.err()
            end
            local a, b, c = (function() return lib.many() end)()
            local _, raised = pcall(inner)
            return raised, a + b + c, select('#', (function() return lib.many() end)())
        "#;
        let chunk = dump(&lua, code);
        let (tail_raised, sum, count): (String, i64, i64) = load(&lua, &chunk).call(()).unwrap();
        let untailed = untail(&chunk).expect("the chunk has tail calls");
        assert_ne!(untailed, chunk);
        let (raised, sum2, count2): (String, i64, i64) = load(&lua, &untailed).call(()).unwrap();
        assert_eq!((sum, count), (6, 3));
        assert_eq!((sum2, count2), (6, 3));
        assert_eq!(tail_raised, "boom");
        // Without the tail calls, `inner`'s frame is there, at `return lib.err()`.
        assert!(raised.ends_with("]:6: boom"), "{raised}");
    }

    #[test]
    fn a_scripts_own_functions_keep_their_tail_calls() {
        let lua = Lua::new();
        // Far deeper than Lua's 20,000 calls: only tail calls get there. (Through
        // locals and upvalues: a script cannot set a global.)
        let code = r#"
            local function down(n) if n == 0 then return 'bottom' end return down(n - 1) end
            local up
            up = function(n) if n == 0 then return 'top' end return up(n - 1) end
            local t = {}
            function t:m(n) return n end
            local function m() return t:m(7) end
            return down(100000), up(100000), m()
        "#;
        let chunk = dump(&lua, code);
        let untailed = untail(&chunk).expect("t:m is a field's tail call");
        let got: (String, String, i64) = load(&lua, &untailed).call(()).unwrap();
        assert_eq!(got, ("bottom".into(), "top".into(), 7));
        // A global's tail call is made a plain call (a library's function), and so is
        // one of a local or an upvalue copied from a field or a global.
        let global = dump(&lua, "local function f() return tostring(1) end return f()");
        assert!(untail(&global).is_some());
        let count = |code: &str| {
            let chunk = dump(&lua, code);
            untail(&chunk).map_or(0, |u| {
                u.chunks(4)
                    .zip(chunk.chunks(4))
                    .filter(|(a, b)| a != b)
                    .count()
            })
        };
        assert_eq!(count("local call = string.rep return call('x', 2)"), 1);
        assert_eq!(
            count("local c = string.rep local function f() return c('x', 2) end return f() .. 'y'"),
            1
        );
        assert_eq!(
            count(
                "local c = string.rep local d = c return (function() local e = d return e('x', 2) end)()"
            ),
            1
        );
        assert_eq!(
            count("local function f(n) return f(n) end local g = f return 1"),
            0
        );
        assert_eq!(count("local f = function(g) return g() end return 1"), 0);
    }

    #[test]
    fn a_chunk_without_tail_calls_or_not_ours_is_left_alone() {
        let lua = Lua::new();
        assert_eq!(untail(&dump(&lua, "local x = 1 return x")), None);
        assert_eq!(
            untail(&dump(&lua, "local function f() return 1 end return f(1)")),
            None
        );
        assert_eq!(untail(b"return 1"), None);
        let chunk = dump(&lua, "return string.format('%d', 1)");
        // Cut anywhere, or with bytes after it: not read.
        for len in 0..chunk.len() {
            assert_eq!(untail(&chunk[..len]), None, "cut at {len}");
        }
        let mut longer = chunk.clone();
        longer.push(0);
        assert_eq!(untail(&longer), None);
        assert!(untail(&chunk).is_some());
    }
}
