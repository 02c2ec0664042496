//! Per-connection client state: what CLIENT, HELLO and SELECT read and change.

use std::net::SocketAddr;

use goblin_protocol::Version;
use goblin_store::Millis;

/// The state of one client connection, apart from its socket and buffers.
#[derive(Debug)]
pub struct Client {
    /// Unique id (CLIENT ID), increasing across the whole server.
    pub id: u64,
    /// CLIENT SETNAME.
    pub name: Option<Vec<u8>>,
    /// CLIENT SETINFO LIB-NAME.
    pub lib_name: Option<Vec<u8>>,
    /// CLIENT SETINFO LIB-VER.
    pub lib_ver: Option<Vec<u8>>,
    /// The protocol the connection speaks (HELLO).
    pub resp: Version,
    /// The selected database (only 0 exists).
    pub db: usize,
    /// Peer address.
    pub addr: Option<SocketAddr>,
    /// Local address.
    pub laddr: Option<SocketAddr>,
    /// When the connection was accepted.
    pub created_at: Millis,
    /// Set by QUIT: close once the reply is written, run nothing after it.
    pub close_after_reply: bool,
    /// The command being run, for CLIENT LIST/INFO (`cmd=`).
    pub last_command: &'static str,
    /// When it last sent something (`timeout`, CLIENT LIST's `idle=`).
    pub last_io: Millis,
    /// Whether it may run commands: always without `requirepass`, else once AUTH (or
    /// HELLO … AUTH) succeeded.
    pub authenticated: bool,
}

impl Client {
    /// A fresh client.
    pub fn new(id: u64, addr: Option<SocketAddr>, laddr: Option<SocketAddr>, now: Millis) -> Self {
        Client {
            id,
            name: None,
            lib_name: None,
            lib_ver: None,
            resp: Version::Resp2,
            db: 0,
            addr,
            laddr,
            created_at: now,
            close_after_reply: false,
            last_command: "NULL",
            last_io: now,
            authenticated: true,
        }
    }
}
