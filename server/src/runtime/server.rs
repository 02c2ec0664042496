//! Start-up: the listener, the shared state, the worker threads.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use goblin_store::Millis;
use mio::{Poll, Token, Waker};
use socket2::{Domain, Socket, Type};

use crate::clock;
use crate::config::Config;
use crate::families;
use crate::persist::Persist;
use crate::persist::load::{self, Startup};
use crate::runtime::msg::Msg;
use crate::runtime::net::Listener;
use crate::runtime::worker::Worker;
use crate::shard::slots::SlotMap;
use crate::table::CommandTable;

/// A worker's poll and inbox, made before its thread starts (the waker needs the poll).
pub type WorkerIo = (Poll, Receiver<Vec<Msg>>);

/// The token of each worker's waker.
pub const WAKER: Token = Token(usize::MAX - 2);

/// The poll token of listener `i` (one per `bind` address, at most
/// [`crate::config::BIND_MAX`], then the Unix socket; connections use their slab keys,
/// far below).
#[inline]
pub fn listener_token(i: usize) -> Token {
    Token(usize::MAX - 3 - i)
}

/// Which listener `token` is, if it is a listener's.
#[inline]
pub fn listener_of(token: Token) -> Option<usize> {
    (usize::MAX - 3)
        .checked_sub(token.0)
        .filter(|&i| i <= crate::config::BIND_MAX)
}

/// How other workers reach a worker: its inbox and its waker.
#[derive(Debug)]
pub struct Peer {
    /// The worker's inbox; one message is everything one sender had for it in one
    /// loop iteration.
    pub inbox: Sender<Vec<Msg>>,
    /// Wakes the worker's poll.
    pub waker: Waker,
    /// Set by the worker just before it blocks in poll: only then does a sender need to
    /// wake it (a `Waker::wake` is a syscall).
    pub sleeping: AtomicBool,
}

impl Peer {
    /// Delivers `msgs`, waking the worker if it sleeps.
    pub fn send(&self, msgs: Vec<Msg>) {
        if self.inbox.send(msgs).is_err() {
            return;
        }
        // Pairs with the fence in `Worker::sleep`: either the worker sees the message
        // before it blocks, or this sees it sleeping and wakes it.
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.sleeping.swap(false, Ordering::SeqCst) {
            let _ = self.waker.wake();
        }
    }
}

/// The Redis version Goblin reports (HELLO, INFO): the one whose behaviour it matches, so
/// that clients enable the features they would with that redis-server.
pub const REDIS_VERSION: &str = "7.0.15";

/// The stack of a worker thread.
const WORKER_STACK: usize = 64 << 20;

/// Pending connections the kernel queues before accept: `tcp-backlog` (511 by default,
/// as in redis-server), for the TCP listeners and the Unix socket alike.
fn backlog(config: &Config) -> i32 {
    crate::config::inert::value(&config.inert, "tcp-backlog")
        .and_then(|v| v.parse().ok())
        .unwrap_or(511)
}

/// redis-server's warning when the system caps `tcp-backlog` lower
/// (`/proc/sys/net/core/somaxconn`).
fn check_backlog(config: &Config) {
    let Some(somaxconn) = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|v| v.trim().parse::<i32>().ok())
    else {
        return;
    };
    let backlog = backlog(config);
    if somaxconn > 0 && somaxconn < backlog {
        crate::log!(
            Warning,
            "WARNING: The TCP backlog setting of {backlog} cannot be enforced because \
             /proc/sys/net/core/somaxconn is set to the lower value of {somaxconn}."
        );
    }
}

/// One worker's traffic since start (or CONFIG RESETSTAT, which the worker applies).
#[derive(Debug, Default)]
pub struct Traffic {
    /// Bytes read from clients.
    pub input: AtomicU64,
    /// Bytes written to clients.
    pub output: AtomicU64,
    /// Batches and transaction steps sent to other shards.
    pub hops: AtomicU64,
    /// Reads of clients' sockets and writes to them (`total_reads_processed`,
    /// `total_writes_processed`).
    pub reads: AtomicU64,
    /// See `reads`.
    pub writes: AtomicU64,
    /// Microseconds its active expiry ran (`expire_cycle_cpu_milliseconds`), and the
    /// iterations it stopped at its budget with keys still due
    /// (`expired_time_cap_reached_count`).
    pub expire_us: AtomicU64,
    /// See `expire_us`.
    pub expire_capped: AtomicU64,
    /// CONFIG RESETSTAT asked for the totals to start again.
    pub reset: AtomicBool,
    /// Its clients' memory (`Conn::memory`, CLIENT LIST's `tot-mem`) at its last look
    /// (once a second while it works): INFO's `mem_clients_normal`.
    pub clients_mem: AtomicU64,
    /// The largest input and output buffer of its clients then
    /// (`client_recent_max_input_buffer`, `_output_buffer`).
    pub max_input: AtomicU64,
    /// See `max_input`.
    pub max_output: AtomicU64,
    /// The keys its shard could evict under the `maxmemory` policy (those with an
    /// expiry, for a `volatile-*` one), as of its last loop iteration under an evicting
    /// policy ([`EVICTABLE_UNKNOWN`] until then). A shard evicts its own keys only:
    /// another shard's command is refused for want of memory only when no shard has any
    /// (`Shard::out_of_memory`).
    pub evictable: AtomicU64,
}

/// The `maxmemory-clients` limit of `config`, in bytes (0: none).
fn clients_limit(config: &Config) -> u64 {
    crate::runtime::client_eviction::limit(
        crate::config::inert::value(&config.inert, "maxmemory-clients").unwrap_or("0"),
        config.memory.maxmemory,
    )
}

/// [`Traffic::evictable`] before a worker has counted under the policy in force.
pub const EVICTABLE_UNKNOWN: u64 = u64::MAX;

/// INFO's last look at the counters its rates come from.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    commands: u64,
    input: u64,
    output: u64,
}

/// What every thread shares: read-only configuration and tables, and a few counters.
#[derive(Debug)]
pub struct Shared {
    /// The configuration the server runs with.
    pub config: Config,
    /// The address the listener was first bound to.
    pub local_addr: SocketAddr,
    /// The port it listens on now (CONFIG SET port or bind moves it).
    port: std::sync::atomic::AtomicU16,
    /// Listeners CONFIG SET bound, for the accepting worker to take in place of its own.
    new_listener: std::sync::Mutex<Option<Vec<Listener>>>,
    /// The Unix socket (`unixsocket`) and its path: listened on for the process's
    /// life, whatever CONFIG SET does to the TCP ones (another descriptor of it).
    unix: Option<(std::os::unix::net::UnixListener, Arc<str>)>,
    /// The listening sockets in use (other descriptors of them), shut as the process
    /// exits ([`stop_listening`]).
    listening: std::sync::Mutex<Vec<Socket>>,
    /// One waits there (read by the accepting worker every iteration).
    listener_waits: AtomicBool,
    /// Every command.
    pub commands: Arc<CommandTable>,
    /// Number of shard threads.
    pub threads: usize,
    /// The slot map workers start with (each then keeps its own copy, updated by
    /// message).
    pub slots: Arc<SlotMap>,
    /// Every worker's inbox and waker, by worker index.
    pub peers: Vec<Peer>,
    /// More workers than cores this process may use: some share a core.
    pub cores_shared: bool,
    /// Wall-clock start time.
    pub started_at: Millis,
    /// Monotonic start time, for uptime.
    pub started: Instant,
    /// Source of CLIENT IDs.
    pub next_client_id: AtomicU64,
    /// Connections currently open.
    pub connected_clients: AtomicUsize,
    /// Connections currently open, per worker (INFO shows the balance).
    pub clients_per_worker: Vec<AtomicUsize>,
    /// Workers whose script runs past `busy-reply-threshold` (their stand-in serves their
    /// clients): new connections go to the others.
    pub busy_workers: Vec<AtomicBool>,
    /// Connections accepted since start.
    pub total_connections: AtomicU64,
    /// Commands processed since start, summed over threads at the end of each iteration.
    pub total_commands: AtomicU64,
    /// Clients blocked in a command (a parked plan), on every worker.
    pub blocked_clients: AtomicUsize,
    /// Persistence: loading, the log's state, saves.
    pub persist: Arc<Persist>,
    /// The configuration as CONFIG SET leaves it: the options that can change at run time
    /// are read here ([`Shared::live`]); `config` keeps the ones fixed at start-up.
    live: std::sync::RwLock<Config>,
    /// What the workers must wake up for once a second, from the live configuration
    /// ([`TICK_CRON`], [`TICK_IDLE`]): read every loop iteration, so kept apart from the
    /// lock.
    ticks: std::sync::atomic::AtomicU8,
    /// Of those, the ones with a timeout.
    pub blocked_with_timeout: AtomicUsize,
    /// `maxmemory` and its policy, as the workers read them.
    pub memory: crate::memory::Limits,
    /// SLOWLOG.
    pub slowlog: crate::runtime::slowlog::SlowLog,
    /// What one client may make the server hold.
    pub client_limits: crate::runtime::limits::ClientLimits,
    /// What all the clients may hold (`maxmemory-clients`), and who holds it.
    pub client_eviction: crate::runtime::client_eviction::ClientEviction,
    /// `hll-sparse-max-bytes`, as the shards read it.
    pub hll_sparse_max_bytes: AtomicUsize,
    /// The script cache, and what scripts may do (`busy-reply-threshold`,
    /// `lua-allow-undeclared-keys`).
    pub scripts: crate::scripting::Scripts,
    /// The function libraries (FUNCTION LOAD, FCALL).
    pub functions: Arc<crate::scripting::functions::Functions>,
    /// Per worker: bytes read from clients, bytes written to them, batches and steps
    /// sent to other shards — each worker's running totals, stored (not added: no
    /// shared line bounces between workers) at the end of its iterations.
    pub traffic: Vec<Traffic>,
    /// Connections refused (`maxclients`, no descriptor left).
    pub rejected_connections: AtomicU64,
    /// INFO's last look at the counters its `instantaneous_*` rates come from.
    ops_sample: std::sync::Mutex<Sample>,
    /// CLIENT PAUSE.
    pub pause: crate::runtime::pause::Pause,
    /// MONITOR clients.
    pub monitors: crate::runtime::monitor::Monitors,
    /// Pub/Sub: who subscribes to what, on which worker.
    pub pubsub: crate::runtime::pubsub::Directory,
    /// Client-side caching: who tracks, BCAST prefixes, clients by id.
    pub tracking: crate::runtime::tracking::Registry,
    /// `notify-keyspace-events`, as flags (`shard/notify.rs`; 0: off), read by each
    /// shard as it starts a unit of work.
    pub notify: std::sync::atomic::AtomicU32,
    /// Names each command's key events for keyspace notifications (the families').
    pub keyspace_events: crate::shard::notify::EventsFn,
    /// The latency monitor.
    pub latency: crate::runtime::latency::Latency,
    /// Keys expire actively (DEBUG SET-ACTIVE-EXPIRE turns it off).
    pub active_expire: AtomicBool,
    /// DEBUG PAUSE-CRON 1: worker 0's cron (the `save` rules, rewrites, a shutdown a
    /// signal asked for) and every worker's look at its clients wait.
    pub cron_paused: AtomicBool,
    /// A signal asked for a shutdown (it starts at once unless the cron is paused):
    /// SHUTDOWN ABORT cancels it.
    pub shutdown_asked: AtomicBool,
    /// The replication ID INFO shows (`master_replid`): random at start, new after
    /// DEBUG CHANGE-REPL-ID.
    pub repl_id: std::sync::Mutex<String>,
    /// This master's replicas and its replication offset.
    pub repl: crate::repl::master::Master,
    /// The master this server follows, when it is a replica.
    pub follow: crate::repl::replica::Follow,
    /// FAILOVER's attempt, if one is under way.
    pub failover: crate::repl::failover::Failover,
    /// This shared state, for threads that outlive a command (the replica's link).
    this: std::sync::OnceLock<std::sync::Weak<Shared>>,
    /// This process's random name (INFO's `run_id`), 40 hexadecimal digits.
    pub run_id: String,
    /// The users and the ACL LOG.
    pub acl: crate::acl::Acl,
    /// Redis Cluster mode's state (`cluster-enabled yes`), else `None`.
    pub cluster: Option<Arc<crate::cluster::Cluster>>,
}

/// The users at start: the default user (with `requirepass`), then those of the
/// configuration file's `user` directives or of the ACL file — not both, as redis-server
/// refuses both. An error in any stops the start, as in redis-server.
fn users(config: &Config, commands: &CommandTable) -> io::Result<crate::acl::Acl> {
    let acl = crate::acl::Acl::new(commands, config.requirepass.as_deref());
    acl.configure(config.acl_pubsub_all, config.acllog_max_len);
    let fail = |e: String| {
        crate::log!(Warning, "{e}");
        io::Error::other(e)
    };
    if config.aclfile.is_some() && !config.users.is_empty() {
        return Err(fail(
            "Configuring Redis with users defined in redis.conf and at the same setting an \
             ACL file path is invalid. This setup is very likely to lead to configuration \
             errors and security holes, please define either an ACL file or declare users \
             directly in your redis.conf, but not both."
                .into(),
        ));
    }
    for words in &config.users {
        let Some((name, rules)) = words.split_first() else {
            continue;
        };
        let mut rules: Vec<&[u8]> = rules.iter().map(|r| r.as_bytes()).collect();
        if name == "default" {
            // Declared, the default user starts from `reset` (`ACLLoadConfiguredUsers`):
            // no channels unless its rules or `acl-pubsub-default` give them.
            rules.insert(0, b"reset");
        }
        acl.set_user(commands, name.as_bytes(), &rules)
            .map_err(|e| {
                fail(format!(
                    "Error in user declaration '{name}': {}",
                    String::from_utf8_lossy(&e).trim_start_matches("ERR ")
                ))
            })?;
    }
    if let Some(path) = &config.aclfile {
        let shown = path.to_string_lossy();
        let text = std::fs::read_to_string(path).map_err(|e| {
            fail(format!(
                "Error loading ACLs, opening file '{shown}': {}",
                crate::util::strerror(&e)
            ))
        })?;
        acl.load(commands, &text, &shown).map_err(fail)?;
        if config.requirepass.is_some() {
            // `requirepass` sets the default user's password, whatever the file says.
            acl.set_requirepass(config.requirepass.as_deref());
        }
    }
    Ok(acl)
}

impl Shared {
    /// Whether replication may refuse a write: this server is a replica, or a master
    /// with `min-replicas-to-write` set.
    #[inline]
    pub fn repl_gates_writes(&self) -> bool {
        self.follow.active.load(Ordering::Relaxed) || self.repl.min_replicas_set()
    }

    /// `replica-read-only`: a replica refuses its clients' writes — not a cluster node
    /// the cluster made a master already (an election won), whose link is stopping.
    pub fn replica_read_only(&self) -> bool {
        self.follow.read_only() && !self.cluster.as_deref().is_some_and(|c| c.is_master())
    }

    /// It is a read-only replica: every write is its master's (see
    /// [`Shared::replica_read_only`]).
    #[inline]
    pub fn only_master_writes(&self) -> bool {
        self.follow.active.load(Ordering::Relaxed) && self.replica_read_only()
    }

    /// The replication ID (`master_replid`).
    pub fn replication_id(&self) -> String {
        self.repl_id
            .lock()
            .map_or_else(|e| e.into_inner().clone(), |id| id.clone())
    }

    /// A new replication ID: a new history begins (REPLICAOF NO ONE, DEBUG
    /// CHANGE-REPL-ID, the backlog freed).
    pub fn new_replication_id(&self) {
        self.set_replication_id(new_repl_id());
    }

    /// This server's history is `id`'s (a replica's, its master's).
    pub fn set_replication_id(&self, id: String) {
        *self.repl_id.lock().unwrap_or_else(|e| e.into_inner()) = id;
    }

    /// This shared state, held weakly (it is set once the server is built).
    pub fn this(&self) -> std::sync::Weak<Shared> {
        self.this.get().cloned().unwrap_or_default()
    }

    /// The shared state for `config`, and each worker's poll and inbox.
    ///
    /// # Errors
    /// When a poll or waker cannot be created.
    pub fn build(
        mut config: Config,
        local_addr: SocketAddr,
    ) -> io::Result<(Shared, Vec<WorkerIo>)> {
        let threads = if config.threads == 0 {
            std::thread::available_parallelism().map_or(1, usize::from)
        } else {
            config.threads
        };
        // Room for `maxclients` clients in the descriptor limit, or fewer clients.
        config.maxclients = crate::runtime::limits::adjust_open_files(config.maxclients, threads)
            .map_err(|e| {
            crate::log!(Warning, "{e}");
            io::Error::other(e)
        })?;
        let mut commands = families::table().map_err(io::Error::other)?;
        for (old, new) in &config.renames {
            commands.rename(old, new).map_err(io::Error::other)?;
        }
        let commands = Arc::new(commands);
        let _ = crate::scripting::COMMANDS.set(commands.clone());
        let mut polls = Vec::with_capacity(threads);
        let mut peers = Vec::with_capacity(threads);
        for _ in 0..threads {
            let poll = Poll::new()?;
            let waker = Waker::new(poll.registry(), WAKER)?;
            let (tx, rx) = crossbeam_channel::unbounded();
            peers.push(Peer {
                inbox: tx,
                waker,
                sleeping: AtomicBool::new(false),
            });
            polls.push((poll, rx));
        }
        let persist = Arc::new(Persist::new(&config.persist));
        persist.set_knobs(&config.inert, &config.persist);
        let cluster = if config.cluster.enabled {
            let cluster =
                crate::cluster::Cluster::open(&config, local_addr.port()).map_err(|e| {
                    crate::log!(Warning, "{e}");
                    io::Error::other(e)
                })?;
            Some(Arc::new(cluster))
        } else {
            None
        };
        let acl = users(&config, &commands)?;
        crate::config::inert::apply_thresholds(&config.inert);
        let _ = crate::config::inert::apply_oom_score_adj(&config.inert);
        // The commands' clock, measured before the first command is timed.
        crate::runtime::histogram::calibrate();
        let log = persist.log.clone();
        let shared = Shared {
            acl,
            cluster,
            persist,
            live: std::sync::RwLock::new(config.clone()),
            ticks: std::sync::atomic::AtomicU8::new(ticks(&config)),
            memory: crate::memory::Limits::new(&config.memory),
            slowlog: crate::runtime::slowlog::SlowLog::new(
                config.slowlog_slower_than,
                config.slowlog_max_len,
            ),
            client_limits: crate::runtime::limits::ClientLimits::new(&config),
            client_eviction: {
                let eviction = crate::runtime::client_eviction::ClientEviction::new(threads);
                eviction.set_limit(clients_limit(&config));
                eviction
            },
            hll_sparse_max_bytes: AtomicUsize::new(hll_sparse_max_bytes(&config)),
            scripts: crate::scripting::Scripts::new(&config),
            functions: Arc::default(),
            pause: crate::runtime::pause::Pause::default(),
            traffic: (0..threads)
                .map(|_| Traffic {
                    evictable: AtomicU64::new(EVICTABLE_UNKNOWN),
                    ..Traffic::default()
                })
                .collect(),
            rejected_connections: AtomicU64::new(0),
            ops_sample: std::sync::Mutex::new(Sample {
                at: Instant::now(),
                commands: 0,
                input: 0,
                output: 0,
            }),
            monitors: crate::runtime::monitor::Monitors::default(),
            pubsub: crate::runtime::pubsub::Directory::default(),
            tracking: crate::runtime::tracking::Registry::with_max_keys(
                config.tracking_table_max_keys,
            ),
            notify: std::sync::atomic::AtomicU32::new(config.notify_keyspace_events),
            keyspace_events: families::notify::events,
            latency: crate::runtime::latency::Latency::new(config.latency_monitor_threshold),
            active_expire: AtomicBool::new(true),
            cron_paused: AtomicBool::new(false),
            shutdown_asked: AtomicBool::new(false),
            repl_id: std::sync::Mutex::new(new_repl_id()),
            repl: crate::repl::master::Master::with_log(log),
            follow: Default::default(),
            failover: Default::default(),
            this: std::sync::OnceLock::new(),
            run_id: new_repl_id(),
            local_addr,
            port: std::sync::atomic::AtomicU16::new(local_addr.port()),
            new_listener: std::sync::Mutex::new(None),
            unix: None,
            listening: std::sync::Mutex::new(Vec::new()),
            listener_waits: AtomicBool::new(false),
            config,
            commands,
            threads,
            slots: Arc::new(SlotMap::contiguous(threads)),
            peers,
            cores_shared: threads > std::thread::available_parallelism().map_or(1, usize::from),
            started_at: clock::now_ms(),
            started: Instant::now(),
            next_client_id: AtomicU64::new(1),
            connected_clients: AtomicUsize::new(0),
            clients_per_worker: (0..threads).map(|_| AtomicUsize::new(0)).collect(),
            busy_workers: (0..threads).map(|_| AtomicBool::new(false)).collect(),
            total_connections: AtomicU64::new(0),
            total_commands: AtomicU64::new(0),
            blocked_clients: AtomicUsize::new(0),
            blocked_with_timeout: AtomicUsize::new(0),
        };
        Ok((shared, polls))
    }

    /// The configuration as it is now (CONFIG SET changes it).
    pub fn live(&self) -> std::sync::RwLockReadGuard<'_, Config> {
        self.live
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The clients' buffers, as each worker last measured its own (INFO's
    /// `mem_clients_normal`, MEMORY STATS' `clients.normal`).
    pub fn clients_memory(&self) -> u64 {
        self.traffic
            .iter()
            .map(|t| t.clients_mem.load(Ordering::Relaxed))
            .sum()
    }

    /// Wakes every worker for an iteration (an empty message), to look again at what a
    /// new setting changed.
    pub fn wake_workers(&self) {
        for peer in &self.peers {
            peer.send(Vec::new());
        }
    }

    /// Replaces the configuration (CONFIG SET, once every new value was checked).
    pub fn set_live(&self, config: Config) {
        self.ticks.store(ticks(&config), Ordering::Relaxed);
        if self.memory.get() != config.memory {
            self.memory.set(&config.memory);
            // Every worker wakes to say how many keys it could evict now (and to evict,
            // if memory is over the new limit); until it has, it may.
            for t in &self.traffic {
                t.evictable.store(EVICTABLE_UNKNOWN, Ordering::Relaxed);
            }
            self.wake_workers();
        }
        crate::log::set_level(config.loglevel);
        self.slowlog
            .configure(config.slowlog_slower_than, config.slowlog_max_len);
        let persist = &self.persist;
        persist.set_rules(
            !config.persist.save.is_empty(),
            config.persist.stop_writes_on_bgsave_error,
        );
        persist.set_fsync(config.persist.appendfsync);
        if persist.set_log(config.persist.appendonly) {
            self.wake_workers();
        }
        persist.set_knobs(&config.inert, &config.persist);
        self.client_limits.set(&config);
        let clients = clients_limit(&config);
        if self.client_eviction.limit() != clients {
            // Every worker wakes to measure its clients under the new limit, and to
            // evict, if they are over it.
            self.client_eviction.set_limit(clients);
            self.wake_workers();
        }
        self.hll_sparse_max_bytes
            .store(hll_sparse_max_bytes(&config), Ordering::Relaxed);
        crate::config::inert::apply_thresholds(&config.inert);
        self.repl.configure(&config.inert);
        self.follow.configure(&config.inert);
        // (`oom-score-adj`: CONFIG SET put it in force already, when it changed.)
        self.tracking.set_max_keys(config.tracking_table_max_keys);
        if let Some(cluster) = &self.cluster {
            cluster.configure(&config.cluster, &config.inert);
        }
        if self.tracking.over_limit() {
            // Lowered below what the tables hold: every worker wakes to trim its own
            // (as Redis's cron trims the table of an idle server).
            self.wake_workers();
        }
        self.scripts.configure(&config);
        self.latency.set_threshold(config.latency_monitor_threshold);
        self.notify
            .store(config.notify_keyspace_events, Ordering::Relaxed);
        if config.requirepass != self.live().requirepass {
            self.acl.set_requirepass(config.requirepass.as_deref());
        }
        self.acl
            .configure(config.acl_pubsub_all, config.acllog_max_len);
        *self
            .live
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = config;
    }

    /// `hll-sparse-max-bytes`.
    pub fn hll_sparse_max_bytes(&self) -> usize {
        self.hll_sparse_max_bytes.load(Ordering::Relaxed)
    }

    /// What the workers must wake up for once a second ([`TICK_CRON`], [`TICK_IDLE`]).
    pub fn ticks(&self) -> u8 {
        self.ticks.load(Ordering::Relaxed)
    }

    /// Bytes read from clients, every worker's.
    pub fn net_input_bytes(&self) -> u64 {
        self.traffic_total(|t| &t.input)
    }

    /// A [`Traffic`] counter, every worker's.
    pub fn traffic_total(&self, counter: impl Fn(&Traffic) -> &AtomicU64) -> u64 {
        self.traffic
            .iter()
            .map(|t| counter(t).load(Ordering::Relaxed))
            .sum()
    }

    /// Bytes written to clients, every worker's.
    pub fn net_output_bytes(&self) -> u64 {
        self.traffic_total(|t| &t.output)
    }

    /// Commands per second, and kB read and written per second, since INFO last asked
    /// (since start, the first time): `instantaneous_ops_per_sec`, `_input_kbps`,
    /// `_output_kbps`.
    pub fn instantaneous(&self) -> (u64, f64, f64) {
        let now = Sample {
            at: Instant::now(),
            commands: self.total_commands.load(Ordering::Relaxed),
            input: self.net_input_bytes(),
            output: self.net_output_bytes(),
        };
        let Ok(mut sample) = self.ops_sample.lock() else {
            return (0, 0.0, 0.0);
        };
        let before = std::mem::replace(&mut *sample, now);
        let secs = now.at.duration_since(before.at).as_secs_f64();
        if secs <= 0.0 {
            return (0, 0.0, 0.0);
        }
        let rate = |a: u64, b: u64| a.saturating_sub(b) as f64 / secs;
        (
            rate(now.commands, before.commands) as u64,
            rate(now.input, before.input) / 1024.0,
            rate(now.output, before.output) / 1024.0,
        )
    }

    /// The port the server listens on now.
    pub fn port(&self) -> u16 {
        self.port.load(Ordering::Relaxed)
    }

    /// CONFIG SET port / bind: listens on `config`'s address instead (the accepting
    /// worker takes the new listener in its next iteration, woken for it, and closes the
    /// old one). Clients already connected stay.
    ///
    /// # Errors
    /// When the address cannot be bound (nothing changes then).
    pub fn rebind(&self, config: &Config) -> io::Result<()> {
        // An address and port listened on already keep their socket (another one could
        // not be bound there while it is open).
        let current: Vec<TcpListener> = match self.listening.lock() {
            Ok(slot) => slot
                .iter()
                .filter_map(|s| s.try_clone().ok())
                .map(TcpListener::from)
                .collect(),
            Err(_) => Vec::new(),
        };
        let listeners = bind(config, &current)?;
        // (No TCP address, `bind ""`: the port asked for, or the one it was.)
        let asked = if config.port == 0 {
            self.port()
        } else {
            config.port
        };
        let port = first_addr(&listeners).map_or(asked, |a| a.port());
        self.keep_listening(&listeners);
        let listeners = self.with_unix(listeners);
        if let Ok(mut slot) = self.new_listener.lock() {
            *slot = Some(listeners);
            self.listener_waits.store(true, Ordering::SeqCst);
        }
        self.port.store(port, Ordering::Relaxed);
        crate::log!(
            Notice,
            "Listening on {} port {port} (CONFIG SET)",
            config.bind_text()
        );
        self.peers[0].send(Vec::new());
        Ok(())
    }

    /// Keeps other descriptors of `listeners`, the ones in use now, for
    /// [`stop_listening`].
    fn keep_listening(&self, listeners: &[TcpListener]) {
        if let Ok(mut slot) = self.listening.lock() {
            *slot = listeners
                .iter()
                .filter_map(|l| l.try_clone().ok())
                .map(Socket::from)
                .collect();
        }
    }

    /// The TCP `listeners`, and the Unix socket after them (another descriptor of it)
    /// if there is one: what the accepting worker polls.
    fn with_unix(&self, listeners: Vec<TcpListener>) -> Vec<Listener> {
        let mut all: Vec<Listener> = listeners
            .into_iter()
            .map(|l| Listener::Tcp(mio::net::TcpListener::from_std(l)))
            .collect();
        if let Some((unix, path)) = &self.unix {
            match unix.try_clone() {
                Ok(l) => all.push(Listener::Unix(
                    mio::net::UnixListener::from_std(l),
                    Arc::clone(path),
                )),
                Err(e) => crate::log!(Warning, "Cannot poll the Unix socket: {e}"),
            }
        }
        all
    }

    /// The listeners CONFIG SET bound, if they wait to be taken.
    pub fn take_new_listener(&self) -> Option<Vec<Listener>> {
        if !self.listener_waits.load(Ordering::Relaxed)
            || !self.listener_waits.swap(false, Ordering::SeqCst)
        {
            return None;
        }
        self.new_listener.lock().ok().and_then(|mut l| l.take())
    }

    /// A new client id.
    pub fn new_client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Ordering::Relaxed)
    }
}

/// SIGTERM and SIGINT shut the server down as SHUTDOWN does (save when `save` rules are
/// set, sync the log, exit 0), on worker 0; a second one exits at once, as redis-server
/// does when a user insists.
fn handle_signals(shared: Arc<Shared>) -> io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])?;
    std::thread::Builder::new()
        .name("goblin-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                let name = if signal == SIGTERM {
                    "SIGTERM"
                } else {
                    "SIGINT"
                };
                // SIGINT while a shutdown is asked for (not aborted): at once, as
                // redis-server does (another SIGTERM asks again).
                if signal == SIGINT && shared.shutdown_asked.load(Ordering::SeqCst) {
                    crate::log!(Warning, "You insist... exiting now.");
                    shared.persist.sync_log();
                    stop_listening(&shared);
                    std::process::exit(1);
                }
                crate::log!(Notice, "Received {name} scheduling shutdown...");
                shared.shutdown_asked.store(true, Ordering::SeqCst);
                shared.peers[0].send(vec![Msg::Shutdown]);
            }
        })
        .map(|_| ())
}

/// [`Shared::ticks`]: worker 0's persistence cron (`save` rules, automatic rewrites).
pub const TICK_CRON: u8 = 1;

/// [`Shared::ticks`]: every worker's look for idle clients (`timeout`).
pub const TICK_IDLE: u8 = 2;

fn ticks(config: &Config) -> u8 {
    let p = &config.persist;
    // (With the log on, the cron also starts it after CONFIG SET appendonly yes.)
    let cron = !p.save.is_empty() || p.appendonly;
    (if cron { TICK_CRON } else { 0 }) | (if config.timeout > 0 { TICK_IDLE } else { 0 })
}

/// `hll-sparse-max-bytes` as a length (a value past the address space is no limit).
fn hll_sparse_max_bytes(config: &Config) -> usize {
    usize::try_from(config.hll_sparse_max_bytes).unwrap_or(usize::MAX)
}

/// Listens on each of `bind`'s addresses, as redis-server's `listenToPort`: an address
/// the system lacks is skipped when marked `-`, and so is one of a protocol it does not
/// have; any other failure fails the whole (what was bound is closed). Port 0 picks a
/// free port for the first address, which the others then take too. An address among
/// `current`'s (listened on already) takes another descriptor of that socket.
fn bind(config: &Config, current: &[TcpListener]) -> io::Result<Vec<TcpListener>> {
    const EADDRNOTAVAIL: i32 = 99;
    const UNSUPPORTED: [i32; 5] = [92, 93, 94, 96, 97]; // ENOPROTOOPT … EAFNOSUPPORT
    let mut listeners: Vec<TcpListener> = Vec::new();
    let mut port = config.port;
    for addr in &config.bind {
        let at = SocketAddr::new(addr.ip, port);
        let open = current
            .iter()
            .find(|l| port != 0 && l.local_addr().is_ok_and(|a| a == at));
        let listener = match open {
            Some(l) => l.try_clone(),
            None => listen(at, backlog(config)),
        };
        match listener {
            Ok(listener) => {
                port = listener.local_addr()?.port();
                listeners.push(listener);
            }
            Err(e) => {
                crate::log!(
                    Warning,
                    "Warning: Could not create server TCP listening socket {}:{port}: {}",
                    addr.word.trim_start_matches('-'),
                    crate::util::strerror(&e)
                );
                let code = e.raw_os_error().unwrap_or(0);
                if (code == EADDRNOTAVAIL && addr.optional) || UNSUPPORTED.contains(&code) {
                    continue;
                }
                return Err(e);
            }
        }
    }
    Ok(listeners)
}

/// A listening socket on `addr` (an IPv6 one for IPv6 only, as redis-server's, so that
/// `*` and `::*` can both be bound).
fn listen(addr: SocketAddr, backlog: i32) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// The address the first of `listeners` listens on (the one the start-up line and the
/// cluster bus name).
fn first_addr(listeners: &[TcpListener]) -> io::Result<SocketAddr> {
    match listeners.first() {
        Some(l) => l.local_addr(),
        None => Err(io::ErrorKind::AddrNotAvailable.into()),
    }
}

/// A bound, not yet running server.
#[derive(Debug)]
pub struct Server {
    listeners: Vec<TcpListener>,
    shared: Arc<Shared>,
    polls: Vec<WorkerIo>,
}

impl Server {
    /// Moves to `dir`, binds the listener and builds the shared state.
    ///
    /// # Errors
    /// When `dir` is not a directory one can move to, or the address cannot be bound.
    pub fn bind(mut config: Config) -> io::Result<Server> {
        // As redis-server, the process works in `dir`: the paths a configuration gives
        // relative (`aclfile`, `logfile`) are relative to it. The configuration file
        // (CONFIG REWRITE's) and `--loadrdb` stay where they were named from.
        let absolute = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.into());
        config.file = config.file.as_deref().map(absolute);
        config.persist.loadrdb = config.persist.loadrdb.as_deref().map(absolute);
        let dir = crate::config::absolute_dir(&config.persist.dir);
        std::env::set_current_dir(&dir).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("Can't chdir to '{}': {e}", config.persist.dir.display()),
            )
        })?;
        config.persist.dir = dir;
        crate::log::set_level(config.loglevel);
        crate::log::set_file(config.logfile.as_deref())?;
        if crate::config::inert::value(&config.inert, "crash-log-enabled").unwrap_or_default()
            != "no"
        {
            crate::crash::install();
        }
        let unixsocket = crate::config::inert::unixsocket(&config.inert);
        // Port 0 with a Unix socket: no TCP, as redis-server (without one, port 0 picks
        // a free port, Goblin's own).
        let listeners = if config.port == 0 && unixsocket.is_some() {
            Vec::new()
        } else {
            bind(&config, &[]).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "cannot listen on {} port {}: {e}",
                        config.bind_text(),
                        config.port
                    ),
                )
            })?
        };
        let unix = match unixsocket {
            Some((path, perm)) => {
                let listener = crate::runtime::net::unix_listener(path, perm, backlog(&config))
                    .map_err(|e| {
                        io::Error::new(e.kind(), format!("Failed opening Unix socket: {e}"))
                    })?;
                Some((listener, Arc::from(path)))
            }
            None => None,
        };
        if listeners.is_empty() && unix.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                "Configured to not listen anywhere, exiting.",
            ));
        }
        // (No TCP: the port configured, for CONFIG SET bind to listen on later.)
        let local_addr = first_addr(&listeners).unwrap_or_else(|_| {
            let ip = config.bind.first().map_or([127, 0, 0, 1].into(), |b| b.ip);
            SocketAddr::new(ip, config.port)
        });
        let (mut shared, polls) = Shared::build(config, local_addr)?;
        shared.unix = unix;
        shared.keep_listening(&listeners);
        let shared = Arc::new(shared);
        let _ = shared.this.set(Arc::downgrade(&shared));
        shared.repl.configure(&shared.config.inert);
        shared.follow.configure(&shared.config.inert);
        Ok(Server {
            listeners,
            shared,
            polls,
        })
    }

    /// The address the server listens on (its first TCP address).
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// Where clients reach it: its first TCP address, or `unix:<path>` when it
    /// listens on the Unix socket only.
    pub fn reached_at(&self) -> String {
        match &self.shared.unix {
            Some((_, path)) if self.listeners.is_empty() => format!("unix:{path}"),
            _ => self.shared.local_addr.to_string(),
        }
    }

    /// Runs the server until the process ends: one worker thread per shard, each
    /// pinned to a core this process may use; worker 0 also accepts connections.
    ///
    /// # Errors
    /// When a worker cannot be set up, or one fails.
    pub fn run(self) -> io::Result<()> {
        // The kernel stamps every client's bytes from before the first is read.
        crate::runtime::worker::hold_receive_times();
        let tcp = !self.listeners.is_empty();
        let mut listeners = Some(self.shared.with_unix(self.listeners));
        let cores = core_affinity::get_core_ids().unwrap_or_default();
        let config = &self.shared.config;
        crate::log!(Notice, "oO0OoO0OoO0Oo Goblin is starting oO0OoO0OoO0Oo");
        crate::log!(
            Notice,
            "Goblin version={}, redis_version={REDIS_VERSION}, bits=64, pid={}, just started",
            env!("CARGO_PKG_VERSION"),
            std::process::id()
        );
        match &config.file {
            Some(file) => crate::log!(Notice, "Configuration loaded from {}", file.display()),
            None => crate::log!(
                Warning,
                "Warning: no config file specified, using the default config. In order to \
                 specify a config file use goblin-server /path/to/goblin.conf"
            ),
        }
        let mode = if self.shared.cluster.is_some() {
            "cluster"
        } else {
            "standalone"
        };
        let (port, threads) = (self.shared.local_addr.port(), self.shared.threads);
        // As redis-server: the logo when asked for, or when a person is reading the log.
        let show_logo = crate::config::inert::value(&config.inert, "always-show-logo")
            == Some("yes")
            || (crate::log::to_stdout() && io::IsTerminal::is_terminal(&io::stdout()));
        if show_logo {
            crate::log::write_raw(crate::log::Level::Notice, &logo(mode, port, threads));
        } else {
            crate::log!(
                Notice,
                "Running mode={mode}, port={port}, threads={threads}."
            );
        }
        for warning in crate::config::inert::warnings(&config.inert) {
            crate::log!(Warning, "{warning}");
        }
        check_backlog(config);
        if let Some(path) = crate::config::inert::pidfile(&config.inert)
            && let Err(e) = std::fs::write(path, format!("{}\n", std::process::id()))
        {
            crate::log!(Warning, "Failed to write PID file: {e}");
        }
        crate::runtime::supervise::start(
            crate::config::inert::value(&config.inert, "supervised").unwrap_or("no"),
        );
        let startup = load::prepare(&self.shared).map_err(|e| {
            crate::log!(Warning, "{e}");
            io::Error::other(e)
        })?;
        let must_load = matches!(startup, Startup::Load);
        goblin_store::lazyfree::start();
        if let Some((host, port)) = crate::config::inert::value(&config.inert, "replicaof")
            .and_then(|v| v.split_once(' '))
            .and_then(|(h, p)| Some((h.to_string(), p.trim().parse::<u16>().ok()?)))
        {
            self.shared.follow.start(&self.shared, &host, port, None);
        }
        // A cluster replica follows its master from the start, as redis-server's
        // `replicaof` does: its files load as a replica's (keys expired meanwhile kept,
        // for the master's DELs).
        if let Some(cluster) = &self.shared.cluster
            && let crate::cluster::Following::Master(host, port) = cluster.lock().following()
        {
            self.shared.follow.start(&self.shared, &host, port, None);
        }
        if let Some(cluster) = &self.shared.cluster {
            let port = crate::cluster::cluster_port(config, self.shared.local_addr.port());
            let (woken, read, paused, delivered) = (
                Arc::clone(&self.shared),
                Arc::clone(&self.shared),
                Arc::clone(&self.shared),
                Arc::clone(&self.shared),
            );
            let hooks = crate::cluster::bus::Hooks {
                wake_workers: Box::new(move || {
                    for peer in &woken.peers {
                        let _ = peer.waker.wake();
                    }
                }),
                local: Box::new(move || {
                    let live = read.live();
                    let option = |name| crate::config::inert::value(&live.inert, name);
                    let data_age = read.follow.view().map(|link| {
                        let up = link.state == crate::repl::link::State::Connected;
                        let since = match (link.down_since_ms, link.last_io_ms) {
                            (0, io) => io,
                            (down, io) if up || io == 0 => down.max(io),
                            (down, io) => down.min(io),
                        };
                        match since {
                            0 => 0,
                            at => clock::now_ms().saturating_sub(at),
                        }
                    });
                    crate::cluster::bus::Local {
                        offset: crate::cluster::own_offset(&read),
                        data_age,
                        no_failover: option("cluster-replica-no-failover") == Some("yes"),
                        validity_factor: option("cluster-replica-validity-factor")
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(10),
                        migration: option("cluster-allow-replica-migration") != Some("no"),
                        migration_barrier: option("cluster-migration-barrier")
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(1),
                        sendbuf_limit: option("cluster-link-sendbuf-limit")
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(0),
                        announced: crate::cluster::Announced::from_config(&live.inert),
                    }
                }),
                pause_writes: Box::new(move |until| {
                    match until {
                        Some(until) => paused.pause.pause(until, false, clock::now_ms()),
                        None => paused.pause.unpause(),
                    }
                    paused.wake_workers();
                }),
                deliver: Box::new(move |shard, channel, message| {
                    use crate::runtime::pubsub::{Outbound, Space};
                    let space = if shard {
                        Space::ShardChannels
                    } else {
                        Space::Channels
                    };
                    let mut out = Outbound::default();
                    out.publish(&delivered.pubsub, space, channel, message);
                    for (worker, publications) in out.take() {
                        if let Some(peer) = delivered.peers.get(worker) {
                            peer.send(vec![Msg::Publish(publications)]);
                        }
                    }
                }),
            };
            crate::cluster::bus::start(
                Arc::clone(cluster),
                self.shared.local_addr.ip(),
                port,
                hooks,
            )
            .map_err(|e| {
                crate::log!(
                    Warning,
                    "Could not bind the cluster bus on port {port}: {e}"
                );
                e
            })?;
            let state = cluster.lock();
            crate::log!(
                Notice,
                "{} node {}; cluster bus on port {port}",
                if state.nodes.len() > 1 {
                    "Node configuration loaded, I'm"
                } else {
                    "No cluster configuration found, I'm"
                },
                crate::cluster::id_str(&state.myself)
            );
        }
        let mut handles = Vec::new();
        for (id, (poll, inbox)) in self.polls.into_iter().enumerate() {
            let shared = Arc::clone(&self.shared);
            let listeners = listeners.take().unwrap_or_default();
            let core = (!cores.is_empty()).then(|| cores[id % cores.len()]);
            let handle = std::thread::Builder::new()
                .name(format!("goblin-shard-{id}"))
                // A script's reply may nest thousands of tables deep (redis-server
                // converts up to its Lua stack's limit); untouched stack costs nothing.
                .stack_size(WORKER_STACK)
                .spawn(move || {
                    if let Some(core) = core {
                        core_affinity::set_for_current(core);
                    }
                    Worker::new(id, shared, poll, inbox, listeners)?.run()
                })?;
            handles.push(handle);
        }
        // A dataset to load loads while the workers answer LOADING.
        if must_load {
            load::start(Arc::clone(&self.shared))?;
        }
        handle_signals(Arc::clone(&self.shared))?;
        // With the log on, a thread syncs it once a second while `appendfsync` is
        // everysec (CONFIG SET may change it).
        if self.shared.config.persist.appendonly {
            self.shared.persist.start_fsync_thread()?;
        }
        crate::log!(Notice, "Server initialized");
        self.shared
            .memory
            .startup
            .store(crate::memory::used(), Ordering::Relaxed);
        if tcp {
            crate::log!(Notice, "Ready to accept connections tcp");
        }
        if let Some((_, path)) = &self.shared.unix {
            crate::log!(
                Notice,
                "The server is now ready to accept connections at {path}"
            );
        }
        // (A dataset loading: once it is loaded, `Worker::loaded`.)
        if !must_load {
            crate::runtime::supervise::ready();
        }
        for handle in handles {
            match handle.join() {
                Ok(result) => result?,
                Err(_) => return Err(io::Error::other("a worker thread panicked")),
            }
        }
        Ok(())
    }
}

/// A new replication ID: 40 hexadecimal digits, random (the clock and the process).
pub fn new_repl_id() -> String {
    // (Two in one nanosecond differ by the sequence: cluster node names are made here too.)
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let seed = format!("{nanos}:{}:{seq}", std::process::id());
    crate::sha1::hex(&crate::sha1::Sha1::digest(seed.as_bytes()))
}

/// Stops accepting connections before the process exits: a client that saw its
/// connection close (SHUTDOWN's) and connects again is refused, as by a redis-server
/// that exited (the kernel closes descriptors in their order, the listener's maybe
/// after the client's).
pub(crate) fn stop_listening(shared: &Shared) {
    if let Ok(slot) = shared.listening.lock() {
        for socket in slot.iter() {
            let _ = socket.shutdown(std::net::Shutdown::Both);
        }
    }
    if let Some((unix, _)) = &shared.unix {
        let _ = socket2::SockRef::from(unix).shutdown(std::net::Shutdown::Both);
    }
}

/// Removes the files the server made for its life, as redis-server does when it exits:
/// the `pidfile` written at start-up, and the Unix socket's.
pub(crate) fn remove_files(shared: &Shared) {
    if let Some(path) = crate::config::inert::pidfile(&shared.live().inert) {
        let _ = std::fs::remove_file(path);
    }
    if let Some((_, path)) = &shared.unix {
        crate::log!(Notice, "Removing the unix socket file.");
        if let Err(e) = std::fs::remove_file(&**path) {
            crate::log!(
                Warning,
                "Error removing the unix socket file: {}",
                crate::util::strerror(&e)
            );
        }
    }
}

/// The start-up logo: the version, mode, port and pid, in the lines redis-server's logo
/// has them (` Port: 6379`, ` PID: 4242`: tools and test frameworks look for them).
fn logo(mode: &str, port: u16, threads: usize) -> String {
    let version = env!("CARGO_PKG_VERSION");
    let pid = std::process::id();
    [
        String::new(),
        r"          .--.   .--.".to_string(),
        format!(r"         /  ,-._.-,  \        Goblin {version} (redis {REDIS_VERSION}) 64 bit"),
        r"        (__/ o   o \__)".to_string(),
        format!(r"           \  ^  /           Running in {mode} mode, {threads} threads"),
        format!(r"          __)'-=-'(__         Port: {port}"),
        format!(r"         /  `-----'  \        PID: {pid}"),
        String::new(),
        String::new(),
    ]
    .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listener_tokens_are_told_from_the_waker_and_connections() {
        for i in 0..=crate::config::BIND_MAX {
            assert_eq!(listener_of(listener_token(i)), Some(i));
        }
        assert_eq!(listener_of(WAKER), None);
        assert_eq!(listener_of(Token(usize::MAX)), None);
        assert_eq!(listener_of(Token(0)), None);
        assert_eq!(listener_of(Token(1 << 40)), None);
    }
}
