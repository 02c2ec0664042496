//! Per-connection client state: what CLIENT, HELLO and SELECT read and change.

use goblin_protocol::Version;
use goblin_store::Millis;

use crate::runtime::net::Origin;
use crate::runtime::pubsub::{Space, Subscriptions};

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
    /// ASKING: the next command may run in a slot this node imports (cluster mode).
    pub asking: bool,
    /// READONLY: on a replica, it reads the slots of the node's master (cluster mode).
    pub readonly: bool,
    /// Where it is connected from.
    pub origin: Origin,
    /// When the connection was accepted.
    pub created_at: Millis,
    /// Set by QUIT: close once the reply is written, run nothing after it.
    pub close_after_reply: bool,
    /// The command being run, for CLIENT LIST/INFO (`cmd=`).
    pub last_command: &'static str,
    /// When it last sent something (`timeout`, CLIENT LIST's `idle=`).
    pub last_io: Millis,
    /// Whether it may run commands: from the start when the default user needs no
    /// password (no `requirepass`), else once AUTH (or HELLO … AUTH) succeeded.
    pub authenticated: bool,
    /// The user it is authenticated as (the default user until AUTH says otherwise).
    pub user: std::sync::Arc<crate::acl::User>,
    /// The version of the users `user` was read at: taken again when they change.
    pub acl_version: u64,
    /// CLIENT REPLY: whether its replies are sent.
    pub reply: ReplyMode,
    /// A MONITOR client: it is sent every command the server runs.
    pub monitor: bool,
    /// Replication: the port it says it listens on (`REPLCONF listening-port`).
    pub repl_port: u16,
    /// Replication: the address it announces (`REPLCONF ip-address`), shown in its
    /// peer's place.
    pub repl_ip: Option<String>,
    /// A replica's `REPLCONF capa psync2`: `+CONTINUE` names the replication id.
    pub repl_psync2: bool,
    /// A replica: it sent PSYNC or SYNC (where its sync is: `repl::master`).
    pub replica: bool,
    /// The link of this server, a replica, to its master: its writes are the master's.
    pub master: bool,
    /// Its Pub/Sub subscriptions.
    pub subs: Subscriptions,
    /// CLIENT NO-EVICT: never evicted for `maxmemory-clients`.
    pub no_evict: bool,
    /// Its connection's buffers and state, as of the command being run (a connection
    /// command sees them; CLIENT INFO shows them).
    pub facts: ConnFacts,
    /// The keys it WATCHes (`None`: none); dropping it unwatches them.
    pub watching: Option<crate::shard::watch::Watching>,
    /// CLIENT TRACKING.
    pub tracking: crate::runtime::tracking::ClientTracking,
}

/// CLIENT REPLY's modes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReplyMode {
    /// Replies are sent.
    #[default]
    On,
    /// No reply is sent (CLIENT REPLY OFF), until CLIENT REPLY ON.
    Off,
    /// The next command's reply is not sent (CLIENT REPLY SKIP).
    SkipNext,
    /// The reply of the command running now is not sent (the one after CLIENT REPLY
    /// SKIP).
    Skip,
}

/// What a connection holds, for CLIENT LIST and INFO and the log: redis-server's fields.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnFacts {
    /// The socket's descriptor.
    pub fd: i32,
    /// Received bytes not yet run.
    pub qbuf: usize,
    /// The arguments of the command it runs (CLIENT LIST's own caller only).
    pub argv_mem: usize,
    /// Free space in the read buffer.
    pub qbuf_free: usize,
    /// Commands queued in MULTI (`None`: not in MULTI).
    pub multi: Option<usize>,
    /// Reply bytes not yet sent.
    pub omem: usize,
    /// The connection's buffers in all.
    pub tot_mem: usize,
    /// Blocked in a command.
    pub blocked: bool,
    /// Waiting for the socket to take its output.
    pub writable: bool,
}

impl Client {
    /// The address a replica is known by: the one it announced, else its peer's
    /// (redis-server's `replicationGetSlaveName`).
    pub fn replica_ip(&self) -> String {
        self.repl_ip.clone().unwrap_or_else(|| self.origin.ip())
    }

    /// The client's line in CLIENT LIST (and CLIENT INFO, and the log), in
    /// redis-server 7.0's field order.
    pub fn info_line(&self, now: Millis) -> String {
        let f = &self.facts;
        let addr = self.origin.addr();
        let laddr = self.origin.laddr();
        let age = now.saturating_sub(self.created_at) / 1000;
        let idle = now.saturating_sub(self.last_io) / 1000;
        let text = |v: &Option<Vec<u8>>| {
            v.as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default()
                .into_owned()
        };
        let mut flags = String::new();
        if self.replica {
            flags.push('S');
        }
        if self.master {
            flags.push('M');
        }
        if self.monitor {
            flags.push('O');
        }
        if self.subs.active() {
            flags.push('P');
        }
        if f.multi.is_some() {
            flags.push('x');
        }
        if f.blocked {
            flags.push('b');
        }
        if self.tracking.on {
            flags.push('t');
            if self.tracking.broken_redirect {
                flags.push('R');
            }
            if self.tracking.bcast {
                flags.push('B');
            }
        }
        if self.close_after_reply {
            flags.push('c');
        }
        if self.origin.is_unix() {
            flags.push('U');
        }
        if self.readonly {
            flags.push('r');
        }
        if self.no_evict {
            flags.push('e');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let multi = f.multi.map_or(-1, |n| n as i64);
        let events = if f.writable { "rw" } else { "r" };
        let resp = if self.resp == Version::Resp3 { 3 } else { 2 };
        let redir = if self.tracking.on {
            self.tracking.redirect as i64
        } else {
            -1
        };
        format!(
            "id={} addr={addr} laddr={laddr} fd={} name={} age={age} idle={idle} flags={flags} \
             db={} sub={} psub={} ssub={} multi={multi} qbuf={} qbuf-free={} argv-mem={} \
             multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem={} tot-mem={} events={events} cmd={} \
             user={} redir={redir} resp={resp} lib-name={} lib-ver={}",
            self.id,
            f.fd,
            text(&self.name),
            self.db,
            self.subs.len(Space::Channels),
            self.subs.len(Space::Patterns),
            self.subs.len(Space::ShardChannels),
            f.qbuf,
            f.qbuf_free,
            f.argv_mem,
            f.omem,
            f.tot_mem,
            self.last_command,
            String::from_utf8_lossy(&self.user.name),
            text(&self.lib_name),
            text(&self.lib_ver),
        )
    }
}

impl Client {
    /// Who runs the script `spec` may run for this client, when its user's permissions
    /// are restricted (`None`: nothing to check, or no script).
    pub fn script_caller(
        &self,
        spec: &crate::table::CommandSpec,
        now: Millis,
    ) -> Option<std::sync::Arc<crate::acl::Caller>> {
        (spec.may_run_script() && !self.user.unrestricted).then(|| {
            std::sync::Arc::new(crate::acl::Caller {
                user: std::sync::Arc::clone(&self.user),
                client_info: self.info_line(now),
            })
        })
    }

    /// A fresh client.
    pub fn new(
        id: u64,
        origin: Origin,
        now: Millis,
        (user, acl_version): (std::sync::Arc<crate::acl::User>, u64),
    ) -> Self {
        Client {
            id,
            name: None,
            lib_name: None,
            lib_ver: None,
            resp: Version::Resp2,
            db: 0,
            asking: false,
            readonly: false,
            origin,
            created_at: now,
            close_after_reply: false,
            last_command: "NULL",
            last_io: now,
            authenticated: user.needs_no_password(),
            user,
            acl_version,
            reply: ReplyMode::On,
            monitor: false,
            repl_port: 0,
            repl_ip: None,
            repl_psync2: false,
            replica: false,
            master: false,
            no_evict: false,
            subs: Subscriptions::default(),
            facts: ConnFacts::default(),
            watching: None,
            tracking: Default::default(),
        }
    }
}
