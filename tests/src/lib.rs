//! # goblin-tests
//!
//! The harness of Goblin's end-to-end tests: it starts the real `goblin-server` binary on
//! a free port, and a real `redis-server` as the oracle, and talks to both with the
//! `redis` crate and with raw TCP.
//!
//! - [`Server`] is a running server process, killed (by pid) when dropped.
//! - [`Raw`] is a raw RESP connection that returns reply bytes exactly as sent.
//! - [`Differential`] runs the same commands against goblin-server and redis-server and
//!   asserts byte-identical replies.
//!
//! A differential test never passes without its oracle: when `redis-server` is not
//! installed, [`Server::redis`] panics with the command that installs it.
#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use goblin_protocol::{Encoder, Version, reply_len};

/// How long a test waits for a reply before failing.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

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

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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
}

impl Server {
    /// goblin-server with the default thread count ([`default_threads`]).
    pub fn goblin() -> Server {
        Server::goblin_threads(default_threads())
    }

    /// goblin-server with extra arguments, on a free port.
    pub fn goblin_with(args: &[&str]) -> Server {
        let mut child = Command::new(goblin_binary())
            .args(["--bind", "127.0.0.1", "--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start goblin-server");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let port = line
            .trim()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("goblin-server did not report its port: {line:?}"));
        let server = Server {
            child,
            port,
            kind: Kind::Goblin,
        };
        server.wait_ready();
        server
    }

    /// goblin-server with `--threads n`.
    pub fn goblin_threads(n: usize) -> Server {
        Server::goblin_with(&["--threads", &n.to_string()])
    }

    /// A fresh redis-server (no persistence) on a free port.
    ///
    /// # Panics
    /// When redis-server is not installed, with the command that installs it.
    pub fn redis() -> Server {
        for _ in 0..5 {
            let port = free_port();
            let child = Command::new("redis-server")
                .args([
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
                // Goblin has one database, like redis-server with `databases 1`.
                .args(["--databases", "1"])
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
            let mut server = Server {
                child,
                port,
                kind: Kind::Redis,
            };
            if server.try_wait_ready() {
                return server;
            }
            let _ = server.child.kill();
        }
        panic!("redis-server did not start");
    }

    fn try_wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if let Ok(mut raw) = Raw::try_connect(self.port)
                && raw.cmd(&[b"PING"]) == b"+PONG\r\n"
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if Raw::try_connect(self.port).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("server on port {} not reachable", self.port);
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
    }
}

/// Encodes a command as a RESP array of bulk strings.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = Encoder::new(&mut out, Version::Resp2);
    enc.array(args.len());
    args.iter().for_each(|a| enc.bulk(a));
    out
}

/// A raw RESP connection: replies come back as the exact bytes the server sent.
#[derive(Debug)]
pub struct Raw {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Bytes of `buf` already returned.
    pos: usize,
}

impl Raw {
    fn try_connect(port: u16) -> std::io::Result<Raw> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(REPLY_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Raw {
            stream,
            buf: Vec::new(),
            pos: 0,
        })
    }

    /// Connects to a server on `port`.
    pub fn connect(port: u16) -> Raw {
        Raw::try_connect(port).unwrap()
    }

    /// Sends bytes as they are.
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// Sends a command and returns its reply's bytes.
    pub fn cmd(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.send(&encode(args));
        self.reply()
    }

    /// Sends a command given as text split on spaces, and returns the reply's bytes.
    pub fn cmd_str(&mut self, line: &str) -> Vec<u8> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        self.cmd(&args)
    }

    /// Reads one whole reply.
    pub fn reply(&mut self) -> Vec<u8> {
        self.try_reply().unwrap_or_else(|e| {
            panic!(
                "no reply: {e}; got so far {:?}",
                String::from_utf8_lossy(&self.buf)
            )
        })
    }

    /// Reads one whole reply, or the error that stopped it (timeout, close).
    pub fn try_reply(&mut self) -> std::io::Result<Vec<u8>> {
        loop {
            let pending = &self.buf[self.pos..];
            if let Some((n, _)) =
                reply_len(pending).map_err(|e| std::io::Error::other(e.to_string()))?
            {
                let reply = pending[..n].to_vec();
                self.pos += n;
                // Consumed bytes are dropped only once they are most of the buffer, so
                // that reading a long pipeline's replies stays linear.
                if self.pos == self.buf.len() {
                    self.buf.clear();
                    self.pos = 0;
                } else if self.pos > self.buf.len() / 2 {
                    self.buf.drain(..self.pos);
                    self.pos = 0;
                }
                return Ok(reply);
            }
            let mut chunk = [0u8; 65536];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Reads until the server closes the connection (or `timeout` passes); returns the
    /// bytes and whether it closed.
    pub fn read_to_close(&mut self, timeout: Duration) -> (Vec<u8>, bool) {
        self.stream.set_read_timeout(Some(timeout)).unwrap();
        let mut out = self.buf.split_off(self.pos);
        self.buf.clear();
        self.pos = 0;
        let mut chunk = [0u8; 65536];
        let closed = loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => break true,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
                Err(_) => break false,
            }
        };
        self.stream.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
        (out, closed)
    }

    /// The underlying stream.
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }
}

/// Shows bytes readably in assertion messages.
pub fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .replace('\r', "\\r")
        .replace('\n', "\\n")
}

/// goblin-server and redis-server side by side, one raw connection to each.
#[derive(Debug)]
pub struct Differential {
    /// The server under test.
    pub goblin: Server,
    /// The oracle.
    pub redis: Server,
    /// Connection to goblin-server.
    pub g: Raw,
    /// Connection to redis-server.
    pub r: Raw,
}

impl Differential {
    /// Both servers, goblin-server with the default thread count ([`default_threads`]).
    pub fn new() -> Differential {
        Differential::with_goblin(Server::goblin())
    }

    /// Both servers, goblin-server with `--threads n`.
    pub fn threads(n: usize) -> Differential {
        Differential::with_goblin(Server::goblin_threads(n))
    }

    /// Both servers, with a given goblin-server.
    pub fn with_goblin(goblin: Server) -> Differential {
        let redis = Server::redis();
        let g = goblin.raw();
        let r = redis.raw();
        Differential {
            goblin,
            redis,
            g,
            r,
        }
    }

    /// Sends `args` to both and asserts byte-identical replies; returns the reply.
    pub fn check(&mut self, args: &[&[u8]]) -> Vec<u8> {
        let want = self.r.cmd(args);
        let got = self.g.cmd(args);
        assert_eq!(
            show(&got),
            show(&want),
            "reply to {:?} differs (left: goblin, right: redis)",
            args.iter().map(|a| show(a)).collect::<Vec<_>>()
        );
        got
    }

    /// [`Differential::check`] for a command written as space-separated words.
    pub fn check_str(&mut self, line: &str) -> Vec<u8> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        self.check(&args)
    }

    /// Checks each line of `script` (space-separated words per line).
    pub fn check_lines(&mut self, script: &str) {
        for line in script
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            self.check_str(line);
        }
    }

    /// Sends the same raw bytes to both on fresh connections and compares everything each
    /// sends back until it closes the connection or goes quiet; returns goblin's bytes and
    /// whether it closed.
    pub fn check_raw(&mut self, bytes: &[u8], quiet: Duration) -> (Vec<u8>, bool) {
        let mut r = self.redis.raw();
        let mut g = self.goblin.raw();
        r.send(bytes);
        g.send(bytes);
        let want = r.read_to_close(quiet);
        let got = g.read_to_close(quiet);
        assert_eq!(
            (show(&got.0), got.1),
            (show(&want.0), want.1),
            "raw input {:?}: (reply, closed) differ (left: goblin, right: redis)",
            show(&bytes[..bytes.len().min(200)])
        );
        got
    }
}

impl Default for Differential {
    fn default() -> Self {
        Differential::new()
    }
}
