//! The runtime: start-up, the worker threads' event loops, connections, and the messages
//! workers send each other.

pub mod ask;
pub mod client;
pub mod client_eviction;
pub mod conn;
pub mod daemon;
pub mod histogram;
pub mod latency;
pub mod limits;
pub mod monitor;
pub mod msg;
pub mod net;
pub mod pause;
pub mod pipeline;
pub mod pubsub;
pub mod server;
pub mod slowlog;
pub mod spin;
pub mod standin;
pub mod supervise;
pub mod tracking;
pub mod worker;
