//! Server processes: goblin-server under test and redis-server as the oracle.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use crate::Raw;
use crate::reply::info_field;

/// The redis-server release the differential tests compare with: Goblin matches
/// redis-server 7.0, so the oracle must report a `redis_version` starting with this.
pub const ORACLE_VERSION: &str = "7.0.";

/// The `--threads` of the goblin-server a test starts by default: `GOBLIN_TEST_THREADS`,
/// else 4 — more shards than this machine has cores, so that by default every suite
/// crosses shards. `scripts/test` runs the end-to-end suites again with 1 and 2.
pub fn default_threads() -> usize {
    std::env::var("GOBLIN_TEST_THREADS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4)
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn newest_source(dir: &Path) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            let t = if path.is_dir() {
                newest_source(&path)
            } else {
                entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH)
            };
            newest = newest.max(t);
        }
    }
    newest
}

/// The goblin-server binary: `GOBLIN_SERVER_BIN`, or the one cargo built beside this test.
/// `cargo test --workspace` builds it (the server crate has integration tests); a binary
/// older than its sources fails the test rather than test stale code.
pub fn goblin_binary() -> PathBuf {
    if let Ok(path) = std::env::var("GOBLIN_SERVER_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let bin = profile_dir.join("goblin-server");
    let built = std::fs::metadata(&bin)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| {
            panic!(
                "{} not found: run `cargo build -p goblin-server` first, or run the whole suite \
             with `cargo test --workspace` (scripts/test)",
                bin.display()
            )
        });
    let root = workspace_root();
    let sources = ["server/src", "store/src", "protocol/src"]
        .iter()
        .map(|d| newest_source(&root.join(d)))
        .max();
    if sources.is_some_and(|s| s > built) {
        panic!(
            "{} is older than its sources: run `cargo build -p goblin-server` (or `cargo test \
             --workspace`, which builds it)",
            bin.display()
        );
    }
    bin
}

/// Whether a reply to PING says the server is ready: PONG, or NOAUTH behind a password.
fn ready_reply(reply: &[u8]) -> bool {
    reply == b"+PONG\r\n" || reply.starts_with(b"-NOAUTH")
}

/// A port nobody listens on right now, and never handed out before by this process.
///
/// The kernel may give the same port to two binds of port 0 in quick succession once
/// the first is closed; two tests starting servers at once could then both be told the
/// same port, and one of them would talk to the other's server (seen in CI: a redis-server
/// that lost the race exited, and the test's PING reached a server being stopped).
pub fn free_port() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut given = GIVEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .expect("bind a port")
            .local_addr()
            .expect("local address")
            .port();
        // Every port of the ephemeral range handed out once: start again.
        if given.len() > 20_000 {
            given.clear();
        }
        if given.insert(port) {
            return port;
        }
    }
}

/// Whether a server answers PING on `port` with a ready reply; a connection refused,
/// closed or silent is "not yet", never a panic.
fn answers_ready(port: u16) -> bool {
    let Ok(mut raw) = Raw::try_connect(port) else {
        return false;
    };
    raw.try_send(&crate::encode(&[b"PING"])).is_ok()
        && raw.try_reply().is_ok_and(|reply| ready_reply(&reply))
}

/// Which server a [`Server`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// goblin-server.
    Goblin,
    /// redis-server, the oracle.
    Redis,
}

/// A running server process on 127.0.0.1, killed when dropped.
#[derive(Debug)]
pub struct Server {
    child: Child,
    /// Its port.
    pub port: u16,
    /// Which server it is.
    pub kind: Kind,
    /// A directory of its own for its files (goblin-server's default `--dir`), removed
    /// when it is dropped.
    scratch: Option<PathBuf>,
}

/// A new empty directory under the system's temporary directory, for one test's files.
pub fn scratch_dir(what: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("goblin-{what}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    dir
}

impl Server {
    /// goblin-server with the default thread count ([`default_threads`]).
    pub fn goblin() -> Server {
        Server::goblin_threads(default_threads())
    }

    /// goblin-server with extra arguments, on a free port, without `save` rules and with
    /// a directory of its own (arguments given win: `--dir`, `--save …`).
    pub fn goblin_with(args: &[&str]) -> Server {
        let server = Server::goblin_starting(args);
        server.wait_ready();
        server
    }

    /// [`Server::goblin_with`], with a configuration file first, which says where its data
    /// goes and whether to save (`args` come after it and win).
    pub fn goblin_with_file(conf: &Path, args: &[&str]) -> Server {
        let server = Server::spawn_goblin(Some(conf), args);
        server.wait_ready();
        server
    }

    /// [`Server::goblin_with`], returning as soon as it listens: it may still be
    /// loading its dataset (and answer `LOADING`).
    pub fn goblin_starting(args: &[&str]) -> Server {
        Server::spawn_goblin(None, args)
    }

    /// [`Server::goblin_with`] in a process whose descriptor limit (`ulimit -n`) is
    /// `nofile`, soft and hard (set with util-linux's `prlimit`).
    pub fn goblin_with_nofile(nofile: u64, args: &[&str]) -> Server {
        let server = Server::spawn(None, args, Some(nofile));
        server.wait_ready();
        server
    }

    fn spawn_goblin(conf: Option<&Path>, args: &[&str]) -> Server {
        Server::spawn(conf, args, None)
    }

    fn spawn(conf: Option<&Path>, args: &[&str], nofile: Option<u64>) -> Server {
        let scratch = scratch_dir("server");
        let mut command = match nofile {
            Some(n) => {
                let mut c = Command::new("prlimit");
                c.arg(format!("--nofile={n}:{n}")).arg(goblin_binary());
                c
            }
            None => Command::new(goblin_binary()),
        };
        if let Some(conf) = conf {
            command.arg(conf);
        }
        // With a file, the file says where its data goes (`dir`) and whether to save.
        if conf.is_none() {
            command.args(["--save", ""]).arg("--dir").arg(&scratch);
        }
        let mut child = command
            .args(["--bind", "127.0.0.1", "--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start goblin-server");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        // Its `ready on` line, after what it logged before it listened (standard output
        // carries the log too, as redis-server's does: passed on, as its stderr is).
        let mut line = String::new();
        while stdout.read_line(&mut line).unwrap_or(0) > 0 && !line.contains(" ready on ") {
            eprint!("{line}");
            line.clear();
        }
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::stderr()));
        let port = line
            .trim()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("goblin-server did not report its port: {line:?}"));
        Server {
            child,
            port,
            kind: Kind::Goblin,
            scratch: Some(scratch),
        }
    }

    /// goblin-server with `--threads n`.
    pub fn goblin_threads(n: usize) -> Server {
        Server::goblin_with(&["--threads", &n.to_string()])
    }

    /// A fresh redis-server (no persistence) on a free port: the oracle of the
    /// differential tests, so it must be redis-server 7.0.x ([`ORACLE_VERSION`]).
    ///
    /// # Panics
    /// When redis-server is not installed, or is not 7.0.x (as `INFO server` reports its
    /// `redis_version`), with what was found and the command that installs 7.0.
    pub fn redis() -> Server {
        Server::redis_with(&[])
    }

    /// [`Server::redis`] with extra arguments, which come last (and so win: `--dir`,
    /// `--dbfilename`, `--save …`, `--port`). Its directory is one of its own unless
    /// `--dir` says otherwise (a master saves there for its replicas' syncs).
    pub fn redis_with(extra: &[&str]) -> Server {
        let given = extra
            .windows(2)
            .find(|w| w[0] == "--port")
            .and_then(|w| w[1].parse().ok());
        for _ in 0..5 {
            let port = given.unwrap_or_else(free_port);
            let dir = scratch_dir("redis");
            let child = Command::new("redis-server")
                .args([
                    "--dir",
                    dir.to_str().unwrap_or("."),
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .args([
                    "--protected-mode",
                    "no",
                    "--daemonize",
                    "no",
                    "--loglevel",
                    "warning",
                ])
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
            let child = match child {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                    "redis-server is not installed; the differential tests need it as their \
                     oracle. Install it with `apt-get install -y redis-server redis-tools` (or run \
                     scripts/test, which does)"
                ),
                Err(e) => panic!("cannot start redis-server: {e}"),
            };
            if let Some(server) = Server::answering(child, port, dir) {
                let info = server.raw().cmd(&[b"INFO", b"server"]);
                // (Behind `requirepass`, INFO is refused: other tests check the version.)
                if !info.starts_with(b"-NOAUTH")
                    && let Err(e) = check_oracle_version(&String::from_utf8_lossy(&info))
                {
                    panic!("{e}");
                }
                return server;
            }
        }
        panic!("redis-server did not start");
    }

    /// The redis-server just spawned as `child` on `port`, once it answers; `None` (it
    /// is killed) when it does not (its port was taken meanwhile).
    fn answering(child: Child, port: u16, dir: PathBuf) -> Option<Server> {
        let mut server = Server {
            child,
            port,
            kind: Kind::Redis,
            scratch: Some(dir),
        };
        if server.try_wait_ready() {
            return Some(server);
        }
        let _ = server.child.kill();
        None
    }

    /// A Redis Sentinel (redis-server 7.0 in sentinel mode) on a free port, with its
    /// configuration file `conf`'s lines (`sentinel monitor …`) written in a directory of
    /// its own, which it rewrites as Sentinel does.
    pub fn sentinel(conf: &str) -> Server {
        for _ in 0..5 {
            let port = free_port();
            let dir = scratch_dir("sentinel");
            let file = dir.join("sentinel.conf");
            std::fs::write(&file, format!("port {port}\nbind 127.0.0.1\n{conf}\n"))
                .expect("write sentinel.conf");
            let child = Command::new("redis-server")
                .arg(&file)
                .args(["--sentinel", "--daemonize", "no", "--loglevel", "warning"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start redis-server --sentinel");
            if let Some(server) = Server::answering(child, port, dir) {
                return server;
            }
        }
        panic!("redis-server --sentinel did not start");
    }

    fn try_wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if answers_ready(self.port) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Waits until the server answers PING with PONG, or NOAUTH behind `requirepass`
    /// (not `LOADING`).
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if answers_ready(self.port) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("server on port {} not ready", self.port);
    }

    /// Kills the process at once (SIGKILL: no chance to save or sync anything) and
    /// waits for it to be gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends the process a signal by name (`TERM`, `INT`), with the shell's `kill` (a
    /// builtin of every sh, where /bin/kill may not be installed).
    pub fn signal(&self, name: &str) {
        let status = Command::new("sh")
            .arg("-c")
            .arg(format!("kill -{name} {}", self.child.id()))
            .status()
            .expect("run sh");
        assert!(status.success(), "kill -{name} failed");
    }

    /// Waits for the process to end by itself (SHUTDOWN); its exit status.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// A raw connection.
    pub fn raw(&self) -> Raw {
        Raw::connect(self.port)
    }

    /// A raw connection and the goblin-server worker it landed on: the one whose client
    /// count (INFO's `goblin_clients_per_thread`, asked on `probe`, a connection kept
    /// open so that connections keep being dealt to each worker in turn) grew. Keep the
    /// connections located before open meanwhile: one closed while this one is located
    /// may lower its worker's count by the time this one raises it.
    pub fn raw_located(&self, probe: &mut Raw) -> (Raw, usize) {
        let mut counts = || -> Vec<usize> {
            let reply = probe.cmd(&[b"INFO", b"everything"]);
            let info = String::from_utf8_lossy(&reply).into_owned();
            info_field(&info, "goblin_clients_per_thread")
                .expect("goblin_clients_per_thread in INFO")
                .split(',')
                .map(|n| n.trim().parse().expect("a client count"))
                .collect()
        };
        // Closes still on their way (the harness's readiness check, connections the
        // caller dropped) would lower a count while this one raises it: counts that
        // stay the same for 10 ms have none left.
        let mut before = counts();
        for _ in 0..100 {
            std::thread::sleep(Duration::from_millis(10));
            let again = counts();
            if again == before {
                break;
            }
            before = again;
        }
        let mut conn = self.raw();
        // A reply means the worker has taken the connection in: before it, the kernel's
        // handshake is done but the worker may not have counted it yet.
        let pong = conn.cmd(&[b"PING"]);
        assert_eq!(pong, b"+PONG\r\n", "PING on the new connection");
        let after = counts();
        let worker = (0..after.len())
            .find(|&i| after[i] > before.get(i).copied().unwrap_or(0))
            .expect("the new connection shows in INFO");
        (conn, worker)
    }

    /// A connection on each of goblin-server's `N` threads, by thread.
    pub fn one_per_thread<const N: usize>(&self) -> [Raw; N] {
        let mut probe = self.raw();
        let mut by_worker: [Option<Raw>; N] = std::array::from_fn(|_| None);
        // Spares stay open until the end: a close taking effect while the next
        // connection is located would hide it (`Server::raw_located`).
        let mut spares = Vec::new();
        for _ in 0..8 * N {
            let (conn, worker) = self.raw_located(&mut probe);
            if by_worker[worker].is_none() {
                by_worker[worker] = Some(conn);
            } else {
                spares.push(conn);
            }
            if by_worker.iter().all(Option::is_some) {
                break;
            }
        }
        by_worker.map(|c| c.expect("a connection on each thread"))
    }

    /// A `redis` crate connection.
    pub fn client(&self) -> redis::Connection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap();
        client.get_connection().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = &self.scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Checks the `INFO server` text of the redis-server started as the oracle: `Ok` with its
/// version when it is [`ORACLE_VERSION`]`x`, else the message a test fails with.
///
/// # Errors
/// When the version is another one, or missing.
pub fn check_oracle_version(info: &str) -> Result<String, String> {
    let install = "Goblin matches redis-server 7.0, and the differential tests compare its \
                   replies byte for byte with redis-server 7.0.x's. Install 7.0 with \
                   `apt-get install redis-server` on Debian 12 (which gives 7.0.15), or put a \
                   7.0 redis-server first on PATH";
    match info_field(info, "redis_version") {
        Some(v) if v.starts_with(ORACLE_VERSION) => Ok(v.to_string()),
        Some(v) => Err(format!(
            "the redis-server on PATH is version {v}, but the oracle must be redis-server \
             {ORACLE_VERSION}x. {install}"
        )),
        None => Err(format!(
            "the redis-server on PATH did not report its version (no redis_version in INFO \
             server), but the oracle must be redis-server {ORACLE_VERSION}x. {install}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::check_oracle_version;

    #[test]
    fn the_oracle_must_be_redis_7_0() {
        let info = |v: &str| format!("# Server\r\nredis_version:{v}\r\nredis_git_sha1:0\r\n");
        assert_eq!(check_oracle_version(&info("7.0.15")), Ok("7.0.15".into()));
        assert_eq!(check_oracle_version(&info("7.0.0")), Ok("7.0.0".into()));
        for other in ["7.2.4", "6.2.14", "8.0.0", "70.0.1"] {
            let e = check_oracle_version(&info(other)).unwrap_err();
            assert!(
                e.contains(&format!("version {other}"))
                    && e.contains("7.0.x")
                    && e.contains("apt-get install redis-server")
                    && e.contains("7.0.15"),
                "{e}"
            );
        }
        let e = check_oracle_version("# Server\r\nredis_mode:standalone\r\n").unwrap_err();
        assert!(e.contains("did not report its version"), "{e}");
    }
}
