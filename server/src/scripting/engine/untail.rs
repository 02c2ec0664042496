//! Tail calls out of a script run as a coroutine, in its bytecode.
//!
//! Under its plan a script's `redis.call` is a Lua function (it yields each command to
//! the plan), where in redis-server it is a C function. `return redis.call(…)` compiles
//! to a tail call, and Lua 5.1 puts a Lua function called that way in its caller's place
//! (a C function it calls from the caller's frame): the script's frame is gone when the
//! command's error is raised, and the error would lose its `script: …, on
//! @user_script:N.` — the position Redis gives it. So the bytecode goblin compiled for
//! such a run (never a client's: those are read as text) has each `OP_TAILCALL` turned
//! into the `OP_CALL` it was before the compiler marked it (`C = 0`, every result),
//! which the `OP_RETURN` after it then returns: the same results, with the caller's
//! frame kept, as redis-server keeps it. Only calls of a table's field are changed
//! (`redis.call`, `cjson.decode`): a script's own functions may recurse through tail
//! calls as deep as they like, as in Lua.
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
        calls: Vec::new(),
    };
    reader.function(0)?;
    if reader.at != chunk.len() || reader.calls.is_empty() {
        return None;
    }
    for at in reader.calls {
        let word = out.get_mut(at..at + 4)?;
        let op = u32::from_le_bytes(word.try_into().ok()?);
        let call = (op & !OP_MASK) | OP_CALL;
        word.copy_from_slice(&call.to_le_bytes());
    }
    Some(out)
}

/// Whether the function a tail call `call` calls is a table's field (`redis.call`,
/// `cjson.decode`, `obj:method`): the last instruction before it to set its register
/// is `OP_GETTABLE` or `OP_SELF`. Only those are made plain calls: a script's own
/// functions (locals, upvalues, globals) may recurse through tail calls, which must
/// not use up the stack; a library's function in a table does not call back.
fn of_a_field(before: &[u32], call: u32) -> bool {
    const GETTABLE: u32 = 6;
    const SELF: u32 = 11;
    // Instructions whose A field names no register they set.
    const SET_NONE: [u32; 10] = [7, 8, 9, 22, 23, 24, 25, 26, 34, 35];
    let a = (call >> 6) & 0xff;
    before
        .iter()
        .rev()
        .find(|&&op| (op >> 6) & 0xff == a && !SET_NONE.contains(&(op & OP_MASK)))
        .is_some_and(|&op| matches!(op & OP_MASK, GETTABLE | SELF))
}

/// Walks a chunk, noting where its `OP_TAILCALL`s are.
struct Reader<'a> {
    chunk: &'a [u8],
    at: usize,
    calls: Vec<usize>,
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
    fn function(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.string()?; // source
        self.take(4 + 4 + 4)?; // linedefined, lastlinedefined; nups, numparams, is_vararg, maxstacksize
        let count = self.int()?;
        let start = self.at;
        let code: Vec<u32> = self
            .take(count.checked_mul(4)?)?
            .chunks_exact(4)
            .filter_map(|w| w.try_into().ok().map(u32::from_le_bytes))
            .collect();
        for (i, &op) in code.iter().enumerate() {
            // A tail call always takes every result (C = 0), as the compiler leaves it.
            if op & OP_MASK == OP_TAILCALL && (op >> 14) & 0x1ff == 0 && of_a_field(&code[..i], op)
            {
                self.calls.push(start + i * 4);
            }
        }
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
        let protos = self.int()?;
        for _ in 0..protos {
            self.function(depth + 1)?;
        }
        let lines = self.int()?;
        self.take(lines.checked_mul(4)?)?;
        let locals = self.int()?;
        for _ in 0..locals {
            self.string()?;
            self.take(8)?; // startpc, endpc
        }
        let upvalues = self.int()?;
        for _ in 0..upvalues {
            self.string()?;
        }
        Some(())
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
        // Far deeper than Lua's 20,000 calls: only tail calls get there.
        let code = r#"
            local function down(n) if n == 0 then return 'bottom' end return down(n - 1) end
            function up(n) if n == 0 then return 'top' end return up(n - 1) end
            local t = {}
            function t:m(n) return n end
            local function m() return t:m(7) end
            return down(100000), up(100000), m()
        "#;
        let chunk = dump(&lua, code);
        let untailed = untail(&chunk).expect("t:m is a field's tail call");
        let got: (String, String, i64) = load(&lua, &untailed).call(()).unwrap();
        assert_eq!(got, ("bottom".into(), "top".into(), 7));
    }

    #[test]
    fn a_chunk_without_tail_calls_or_not_ours_is_left_alone() {
        let lua = Lua::new();
        assert_eq!(untail(&dump(&lua, "local x = 1 return x")), None);
        assert_eq!(untail(&dump(&lua, "return tostring(1)")), None);
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
