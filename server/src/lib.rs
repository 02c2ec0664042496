//! # goblin-server
//!
//! Goblin: a Redis-protocol in-memory server, shared-nothing and thread-per-core, whose
//! reason to exist is to make the atomic idioms Redis users run as Lua scripts native
//! commands that cost what a plain SET costs.
//!
//! The binary `goblin-server` is [`run`] with options from the command line. The pieces:
//! - [`server`]: start-up — the listener, the shared state, the worker threads;
//! - [`worker`]: one thread's event loop and its connections;
//! - [`shard`]: a worker's keys and the lock table of the multi-shard lock protocol;
//! - [`tx`]: transactions — multi-shard commands and MULTI/EXEC — coordinated;
//! - [`msg`], [`route`]: what workers send each other, and the slot table;
//! - [`command`]: the command table (name, arity, flags, key positions, COMMAND INFO/DOCS);
//! - [`commands`]: the command families, one module each;
//! - [`exec`]: what handlers see — arguments and the context they run in;
//! - [`errors`]: every error text, byte for byte redis-server 7's.
//!
//! ```no_run
//! let config = goblin_server::config::Config { port: 0, ..Default::default() };
//! let server = goblin_server::runtime::server::Server::bind(config).unwrap();
//! println!("listening on {}", server.local_addr());
//! server.run().unwrap();
//! ```
#![deny(missing_docs)]

/// Users and their permissions (ACL).
pub mod acl;
pub mod alloc;

pub mod clock;
pub mod cluster;
pub mod config;
pub mod crash;
pub mod families;
pub mod table;

pub mod errors;

pub mod log;
pub mod longdouble;
pub mod memory;
pub mod persist;
pub mod repl;

pub mod runtime;
pub mod scripting;
pub mod sha1;
pub mod sha256;
pub mod shard;
pub mod txn;
pub mod util;

/// In-process shards for the unit tests and the dispatch fuzz target (feature
/// `testkit`): not part of the server.
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
