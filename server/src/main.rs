//! `goblin-server`: starts the server with options from the command line.

use std::process::ExitCode;

use goblin_server::config::{self, Cli};
use goblin_server::runtime::server::Server;
use goblin_server::runtime::{daemon, supervise};

/// Every allocation is counted, for INFO's `used_memory`.
#[global_allocator]
static GLOBAL: goblin_server::alloc::Counting = goblin_server::alloc::Counting;

fn main() -> ExitCode {
    goblin_server::alloc::activate();
    let mut config = match config::parse(std::env::args().skip(1)) {
        Ok(Cli::Run(config)) => *config,
        Ok(Cli::Help) => {
            print!("{}", config::USAGE);
            return ExitCode::SUCCESS;
        }
        Ok(Cli::Version) => {
            // redis-server's line (tools read the version after ` v=`), naming Goblin's.
            println!(
                "Redis server v={} sha=00000000:0 malloc=libc bits=64 build=0 (Goblin {})",
                goblin_server::runtime::server::REDIS_VERSION,
                env!("CARGO_PKG_VERSION")
            );
            return ExitCode::SUCCESS;
        }
        Err(msg) => {
            eprintln!("goblin-server: {msg}");
            return ExitCode::from(2);
        }
    };
    // `daemonize yes`: to the background first, while this is the only thread.
    let value = |name| config::inert::value(&config.inert, name).unwrap_or_default();
    if value("daemonize") == "yes" && !supervise::expected(value("supervised")) {
        if config::inert::pidfile(&config.inert).is_none()
            && let Some(i) = config::inert::find("pidfile")
            && let Some(slot) = config.inert.get_mut(i)
        {
            *slot = daemon::DEFAULT_PIDFILE.to_string();
        }
        if let Err(e) = daemon::daemonize() {
            eprintln!("goblin-server: cannot daemonize ({e}); running in the foreground");
        }
    }
    let server = match Server::bind(config) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("goblin-server: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    println!(
        "goblin-server {} ready on {}",
        env!("CARGO_PKG_VERSION"),
        server.reached_at()
    );
    match server.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("goblin-server: {e}");
            ExitCode::from(1)
        }
    }
}
