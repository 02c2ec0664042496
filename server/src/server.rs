//! Start-up: the listener, the shared state, the worker threads.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use goblin_store::Millis;
use socket2::{Domain, Socket, Type};

use crate::clock;
use crate::command::CommandTable;
use crate::config::Config;
use crate::worker::Worker;

/// The Redis version Goblin reports (HELLO, INFO): the one whose behaviour it matches, so
/// that clients enable the features they would with that redis-server.
pub const REDIS_VERSION: &str = "7.0.15";

/// Pending connections the kernel queues before accept (Redis's `tcp-backlog`).
const LISTEN_BACKLOG: i32 = 511;

/// What every thread shares: read-only configuration and tables, and a few counters.
#[derive(Debug)]
pub struct Shared {
    /// The configuration the server runs with.
    pub config: Config,
    /// The address the listener is bound to.
    pub local_addr: SocketAddr,
    /// Every command.
    pub commands: CommandTable,
    /// Number of shard threads.
    pub threads: usize,
    /// Wall-clock start time.
    pub started_at: Millis,
    /// Monotonic start time, for uptime.
    pub started: Instant,
    /// Source of CLIENT IDs.
    pub next_client_id: AtomicU64,
    /// Connections currently open.
    pub connected_clients: AtomicUsize,
    /// Connections accepted since start.
    pub total_connections: AtomicU64,
    /// Commands processed since start, summed over threads at the end of each iteration.
    pub total_commands: AtomicU64,
}

impl Shared {
    /// A new client id.
    pub fn new_client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Ordering::Relaxed)
    }
}

fn bind(config: &Config) -> io::Result<TcpListener> {
    let addr = SocketAddr::new(config.bind, config.port);
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// A bound, not yet running server.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
}

impl Server {
    /// Binds the listener and builds the shared state.
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub fn bind(config: Config) -> io::Result<Server> {
        let listener = bind(&config)?;
        let threads = if config.threads == 0 {
            std::thread::available_parallelism().map_or(1, usize::from)
        } else {
            config.threads
        };
        let shared = Arc::new(Shared {
            local_addr: listener.local_addr()?,
            config,
            commands: CommandTable::new(),
            threads,
            started_at: clock::now_ms(),
            started: Instant::now(),
            next_client_id: AtomicU64::new(1),
            connected_clients: AtomicUsize::new(0),
            total_connections: AtomicU64::new(0),
            total_commands: AtomicU64::new(0),
        });
        Ok(Server { listener, shared })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// Runs the server until the process ends.
    ///
    /// # Errors
    /// When the event loop cannot be set up or fails.
    pub fn run(self) -> io::Result<()> {
        let listener = mio::net::TcpListener::from_std(self.listener);
        let mut worker = Worker::new(0, self.shared, Some(listener))?;
        worker.run()
    }
}
