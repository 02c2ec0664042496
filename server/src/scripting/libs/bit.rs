//! The `bit` library of Redis's Lua (its `deps/lua/src/lua_bit.c`).

use mlua::Lua;

/// Opens the library: the global table `bit`.
pub fn open(lua: &Lua) -> mlua::Result<()> {
    super::install(lua, "bit", &[])?;
    Ok(())
}
