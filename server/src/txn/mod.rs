//! Transactions: commands whose keys span shards, MULTI/EXEC, keyspace-wide commands.
//!
//! - [`plan`]: the interface a command family implements for a cross-shard command — a
//!   [`plan::Plan`] that sends hops to shards and gets typed results back;
//! - [`shapes`]: reusable plans (split by shard and merge, fan out, read then write);
//! - [`coordinator`]: runs a plan for a connection — locks, hops, parking, reply;
//! - [`locks`]: the lock table each shard keeps.
//!
//! Nothing here knows an individual command: the families own their plans.

pub mod coordinator;
pub mod locks;
pub mod plan;
pub mod shapes;

#[cfg(test)]
mod tests;
