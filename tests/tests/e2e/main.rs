//! End-to-end tests: the real goblin-server binary, real clients, redis-server as the
//! oracle. One test binary, a module per area.
#![allow(clippy::unwrap_used, missing_docs)]

mod clients;
mod connection;
mod expiry;
mod protocol;
mod server_commands;
mod strings_keys;
