//! End-to-end tests: the real goblin-server binary, real clients, redis-server as the
//! oracle. One test binary, a module per area.
#![allow(clippy::unwrap_used, missing_docs)]

mod atomicity;
mod blocking;
mod client_commands;
mod client_limits;
mod clients;
mod config_rewrite;
mod connection;
mod databases;
mod diagnostics;
mod eviction;
mod expiry;
mod getkeys;
mod goblin_claim;
mod goblin_claim_diff;
mod goblin_claim_race;
mod goblin_life_block;
mod goblin_life_diff;
mod goblin_life_race;
mod hashes_diff;
mod keys_diff;
mod lists_diff;
mod multi_exec;
mod multikey;
mod notifications;
mod operability;
mod ordering;
mod output_bound;
mod persistence;
mod persistence_crash;
mod protocol;
mod pubsub;
mod random_commands;
mod rdb_interop;
mod scan_completeness;
mod server_commands;
mod sets_atomicity;
mod sets_diff;

mod soak;
mod strings_diff;
mod strings_keys;
mod watch;
mod zsets_diff;
