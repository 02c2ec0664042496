//! Lua scripting: EVAL, EVALSHA, SCRIPT, FUNCTION and FCALL, with the interpreter Redis
//! embeds (Lua 5.1) and the libraries it gives scripts.

pub mod libs;
