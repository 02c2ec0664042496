//! Replication, as redis-server's: a master feeds its replicas a snapshot and then the
//! stream of its writes; a replica (REPLICAOF) follows a master.
//!
//! - [`master`]: a master's replicas and each shard's feed of its writes;
//! - [`replica`]: REPLICAOF, the link's way into this server;
//! - [`link`]: a replica's link to its master (the handshake, the snapshot, the stream);
//! - [`failover`]: FAILOVER, a master handing over to one of its replicas.

pub mod failover;
pub mod link;
pub mod master;
pub mod replica;
