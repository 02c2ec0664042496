//! Redis Cluster mode: clusters of goblin-server or of redis-server nodes, built with
//! `redis-cli --cluster create` as an operator builds one, and the normalised transcripts
//! that compare a goblin-server cluster with a redis-server one.
//!
//! - [`Cluster::start`] starts `n` nodes (`--cluster-enabled yes`, a `nodes.conf` of their
//!   own, `--cluster-node-timeout 5000`) on ports whose bus port (port + 10000) is free
//!   too, joins them with `redis-cli --cluster create … --cluster-replicas 0`, and waits
//!   (bounded) until `redis-cli --cluster check` is clean and every node says
//!   `cluster_state:ok`. Dropping it kills every node by pid and removes their
//!   directories (after printing the tail of each node's log when the test is failing).
//! - [`Cluster::start_with_replicas`] starts masters each with replicas (`--cluster-replicas
//!   R`, every node also `--repl-diskless-sync-delay 0`), and waits as well until every
//!   node agrees on every node's role and every replica's link to its master is up. Its
//!   nodes are ordered by role: the masters by port, then each master's replicas in turn.
//!   A node can be killed (SIGKILL, by pid: [`Cluster::kill`]) and started again on the
//!   same port and directory, its `nodes.conf` kept ([`Cluster::restart`]); its role read
//!   from its CLUSTER NODES ([`Cluster::role`], [`parse_nodes`]); and a condition waited
//!   for, polling with a bound ([`poll`]). One more replica can be joined to a master
//!   as an operator does, with `redis-cli --cluster add-node … --cluster-slave`
//!   ([`Cluster::add_replica`]): it comes last in the node order.
//! - Node `i` is the `i`-th by port, so that two clusters built the same way have their
//!   nodes in the same order: `redis-cli` deals the slots to the nodes in the order it is
//!   given them ([`Cluster::plan_owner`] is that deal, read from its output, not asked of
//!   the nodes under test).
//! - [`Norm`] and [`Transcript`]: replies rendered as text with what legitimately differs
//!   between two clusters masked — node ids become `node<i>`, ports `port<i>` and
//!   `busport<i>`, epochs, timestamps, counters and replication offsets `<…>` — so that
//!   a goblin-server cluster's transcript can be compared with a redis-server cluster's
//!   entry by entry.
//! - [`run_on`] (and [`run_on_replicas`], [`run_on_built`]): a scenario run on a
//!   redis-server cluster alone, or (for goblin-server) run on both and the transcripts
//!   compared: every expected answer comes from the redis-server run, never from the test.

use std::fmt::Write as _;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::keys::{SLOTS, slot};
use crate::reply::info_field;
use crate::{Kind, Raw, check_oracle_version, default_threads, goblin_binary, scratch_dir, show};

/// The cluster bus listens on the client port plus this.
pub const BUS_OFFSET: u16 = 10000;
/// `--cluster-node-timeout` of every node, in milliseconds.
pub const NODE_TIMEOUT_MS: u64 = 5000;
/// How long [`Cluster::start`] and [`Cluster::wait_healthy`] wait for a clean
/// `--cluster check` by default.
pub const HEALTHY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a node may take to answer PING after it is started.
pub const NODE_START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `redis-cli --cluster create` may take (it waits for the nodes to join).
pub const CREATE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one `redis-cli --cluster check` may take.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(15);
/// How long `redis-cli --cluster reshard` may take.
pub const RESHARD_TIMEOUT: Duration = Duration::from_secs(600);

/// The ports nodes are given: above every slot number (so that a port in a reply is never
/// mistaken for a slot, nor a slot for a port), and with their bus ports (27000…32767)
/// below Linux's ephemeral range (32768…), where no client socket takes them.
const PORTS: (u16, u16) = (17000, 22768);

/// Whether `port` and its bus port are both free on 127.0.0.1.
fn port_pair_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
        && TcpListener::bind(("127.0.0.1", port + BUS_OFFSET)).is_ok()
}

/// A port in [`PORTS`] that is free, and whose bus port is free too. Ports are handed out
/// in turn from a per-process starting point, so that clusters started at once by one
/// test binary never pick the same port.
pub fn free_cluster_port() -> u16 {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let span = usize::from(PORTS.1 - PORTS.0);
    let start = (std::process::id() as usize).wrapping_mul(7919) % span;
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = PORTS.0 + u16::try_from((start + n) % span).unwrap();
        if port_pair_free(port) {
            return port;
        }
    }
    panic!(
        "no free port pair (port and port + {BUS_OFFSET}) in {}..{}",
        PORTS.0, PORTS.1
    );
}

/// Removes the terminal colour sequences (`ESC [ … m`) that `redis-cli --cluster` prints
/// even when its output is not a terminal.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// What a bounded command printed, and its exit status (`None`: killed at its deadline).
#[derive(Debug)]
pub struct Output {
    /// The exit status, or `None` when it was killed for taking too long.
    pub status: Option<ExitStatus>,
    /// Standard output, colour sequences removed.
    pub stdout: String,
    /// Standard error, colour sequences removed.
    pub stderr: String,
}

impl Output {
    /// Whether it exited 0.
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// Status, standard output and standard error, for a failure message.
    pub fn describe(&self) -> String {
        let status = match self.status {
            Some(s) => s.to_string(),
            None => "killed at its deadline".to_string(),
        };
        format!(
            "status: {status}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.stdout, self.stderr
        )
    }
}

/// Runs a command with no input, killing it (by its pid) if it runs past `timeout`.
///
/// # Panics
/// When it cannot be started (`redis-cli` not installed, say).
pub fn run_bounded(command: &mut Command, timeout: Duration) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {command:?}: {e} (redis-cli comes with `apt-get install -y \
                 redis-tools`; scripts/test installs it)"
            )
        });
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = |h: std::thread::JoinHandle<Vec<u8>>| {
        strip_ansi(&String::from_utf8_lossy(&h.join().unwrap_or_default()))
    };
    Output {
        status,
        stdout: text(out),
        stderr: text(err),
    }
}

/// Whether the output of `redis-cli --cluster check` says the cluster is sound: exit 0,
/// every slot covered, and no warning (open slots, nodes that disagree) nor error.
pub fn check_is_clean(out: &Output) -> bool {
    out.success()
        && out.stdout.contains("[OK] All 16384 slots covered.")
        && out
            .stdout
            .contains("[OK] All nodes agree about slots configuration.")
        && !out.stdout.contains("[WARNING]")
        && !out.stdout.contains("[ERR]")
        && !out.stderr.contains("[ERR]")
}

/// One node's process, killed (by pid) when dropped, with a directory of its own (its
/// `nodes.conf`, its log), removed then. It can be killed ([`Node::kill`]) and started
/// again on the same port and directory ([`Node::restart`]), its `nodes.conf` kept.
#[derive(Debug)]
pub struct Node {
    /// The node's current process (a new one after [`Node::restart`]).
    child: Mutex<Child>,
    kind: Kind,
    program: PathBuf,
    /// Arguments after [`node_args`].
    extra: Vec<String>,
    /// Its client port (its bus port is this plus [`BUS_OFFSET`]).
    pub port: u16,
    dir: PathBuf,
}

impl Node {
    /// Starts a node of `kind` on a free port pair and waits until it answers PING. A
    /// node that cannot bind (a port taken since it was found free) is started again on
    /// another port.
    ///
    /// # Panics
    /// When the node exits before answering (with its log), or does not answer in time.
    pub fn start(kind: Kind) -> Node {
        Node::start_with(kind, &[])
    }

    /// [`Node::start`], with `extra` arguments after the cluster ones.
    ///
    /// # Panics
    /// As [`Node::start`].
    pub fn start_with(kind: Kind, extra: &[String]) -> Node {
        // (Found before any directory is made: it panics when the binary is stale.)
        let program = match kind {
            Kind::Goblin => goblin_binary(),
            Kind::Redis => PathBuf::from("redis-server"),
        };
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_cluster_port();
            let dir = scratch_dir("cluster-node");
            let child = match spawn_node(&program, kind, port, &dir, extra, false) {
                Ok(child) => child,
                Err(message) => {
                    let _ = std::fs::remove_dir_all(&dir);
                    panic!("{message}");
                }
            };
            let node = Node {
                child: Mutex::new(child),
                kind,
                program: program.clone(),
                extra: extra.to_vec(),
                port,
                dir,
            };
            match node.wait_ready() {
                Ok(()) => return node,
                Err(log) if log.contains("in use") => last = log,
                Err(log) => panic!(
                    "{} node on port {port} did not start (arguments: {:?}):\n{log}",
                    kind_name(kind),
                    node.args()
                ),
            }
        }
        panic!(
            "{} node: no port pair could be bound in 5 tries; last log:\n{last}",
            kind_name(kind)
        );
    }

    fn child(&self) -> std::sync::MutexGuard<'_, Child> {
        self.child
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The arguments it is started with.
    fn args(&self) -> Vec<String> {
        let mut args = node_args(self.kind, self.port, &self.dir);
        args.extend(self.extra.iter().cloned());
        args
    }

    /// Waits until the node answers PING; `Err` with its log when it exits first or
    /// never answers.
    fn wait_ready(&self) -> Result<(), String> {
        let deadline = Instant::now() + NODE_START_TIMEOUT;
        let pid = self.pid();
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child().try_wait() {
                return Err(format!("exited ({status}); its log:\n{}", self.log()));
            }
            if let Ok(mut raw) = Raw::try_connect(self.port)
                && raw.try_send(&crate::encode(&[b"PING"])).is_ok()
                && raw.try_reply().is_ok_and(|r| r == b"+PONG\r\n")
            {
                let info = String::from_utf8_lossy(&raw.cmd(&[b"INFO", b"server"])).into_owned();
                // A server that another test started on the port since it was found free
                // answers too: only this node's own process will do.
                if info_field(&info, "process_id") != Some(pid.to_string().as_str()) {
                    return Err(format!(
                        "port in use: another server (process {:?}) answers on {}",
                        info_field(&info, "process_id"),
                        self.port
                    ));
                }
                if self.kind == Kind::Redis
                    && let Err(e) = check_oracle_version(&info)
                {
                    panic!("{e}");
                }
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "did not answer PING within {NODE_START_TIMEOUT:?}; its log:\n{}",
            self.log()
        ))
    }

    /// Kills its process at once (SIGKILL, by pid: no chance to say goodbye to the
    /// cluster, as a crash) and waits for it to be gone. Its directory stays.
    pub fn kill(&self) {
        let mut child = self.child();
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Whether its process is running (not killed, not exited).
    pub fn is_running(&self) -> bool {
        matches!(self.child().try_wait(), Ok(None))
    }

    /// Starts it again, after [`Node::kill`], with the same arguments: the same port and
    /// directory, so with the `nodes.conf` it wrote (its id, its view of the cluster);
    /// its log goes on in the same file. Waits until it answers PING.
    ///
    /// # Errors
    /// When it is still running, cannot be started, or does not answer (with its log).
    pub fn restart(&self) -> Result<(), String> {
        {
            let mut child = self.child();
            if matches!(child.try_wait(), Ok(None)) {
                return Err(format!(
                    "node on port {} is still running (pid {})",
                    self.port,
                    child.id()
                ));
            }
            *child = spawn_node(
                &self.program,
                self.kind,
                self.port,
                &self.dir,
                &self.extra,
                true,
            )?;
        }
        self.wait_ready().map_err(|log| {
            format!(
                "{} node restarted on port {} did not come up (arguments: {:?}): {log}",
                kind_name(self.kind),
                self.port,
                self.args()
            )
        })
    }

    /// Its log (its standard output and error, over every start).
    pub fn log(&self) -> String {
        std::fs::read(self.dir.join("node.log"))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Its (current) process id.
    pub fn pid(&self) -> u32 {
        self.child().id()
    }

    /// Its directory (`nodes.conf`, `node.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let child = self
            .child
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Goblin => "goblin-server",
        Kind::Redis => "redis-server",
    }
}

/// The arguments a node is started with: those [`crate::Server`] gives each server (no
/// `save` rules, a directory of its own; goblin-server `--threads` from
/// [`default_threads`], redis-server no AOF and no protected mode), then cluster mode.
fn node_args(kind: Kind, port: u16, dir: &Path) -> Vec<String> {
    let dir = dir.display().to_string();
    let mut args: Vec<String> = match kind {
        Kind::Goblin => vec![
            "--save".into(),
            String::new(),
            "--dir".into(),
            dir.clone(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--port".into(),
            port.to_string(),
            "--threads".into(),
            default_threads().to_string(),
        ],
        Kind::Redis => vec![
            "--port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--save".into(),
            String::new(),
            "--appendonly".into(),
            "no".into(),
            "--protected-mode".into(),
            "no".into(),
            "--daemonize".into(),
            "no".into(),
            "--loglevel".into(),
            "notice".into(),
            "--dir".into(),
            dir.clone(),
        ],
    };
    args.extend([
        "--cluster-enabled".into(),
        "yes".into(),
        "--cluster-config-file".into(),
        format!("{dir}/nodes.conf"),
        "--cluster-node-timeout".into(),
        NODE_TIMEOUT_MS.to_string(),
    ]);
    args
}

/// Starts a node's process with [`node_args`] and `extra`, its output to `node.log` in
/// its directory (created anew, or appended to when `append`: a restart).
fn spawn_node(
    program: &Path,
    kind: Kind,
    port: u16,
    dir: &Path,
    extra: &[String],
    append: bool,
) -> Result<Child, String> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(dir.join("node.log"))
        .map_err(|e| format!("create a node's log: {e}"))?;
    let err = log
        .try_clone()
        .map_err(|e| format!("clone a log handle: {e}"))?;
    let spawned = Command::new(program)
        .args(node_args(kind, port, dir))
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(err))
        .spawn();
    match spawned {
        Ok(child) => Ok(child),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && kind == Kind::Redis => Err(
            "redis-server is not installed; the cluster tests need it as their oracle. \
             Install it with `apt-get install -y redis-server redis-tools` (or run \
             scripts/test, which does)"
                .to_string(),
        ),
        Err(e) => Err(format!("cannot start {}: {e}", program.display())),
    }
}

/// A running cluster, every slot assigned: `n` masters ([`Cluster::start`]), or masters
/// each with replicas ([`Cluster::start_with_replicas`]). Node `i` is the `i`-th by port
/// (with replicas: the masters by port, then each master's replicas in turn). Dropped,
/// it kills every node by pid and removes their directories.
#[derive(Debug)]
pub struct Cluster {
    kind: Kind,
    nodes: Vec<Node>,
    ids: Vec<String>,
    /// `redis-cli --cluster create`'s deal: the slot ranges of each node (by index).
    plan: Vec<Vec<(u16, u16)>>,
    /// `redis-cli --cluster create`'s deal: the master each replica was given (by index).
    master_of: Vec<Option<usize>>,
    masters: usize,
    replicas_per_master: usize,
    create_output: String,
}

/// How long [`Cluster::start_with_replicas`] waits for the cluster to be healthy, every
/// replica's link to its master up (each replica's first sync included).
pub const REPLICAS_HEALTHY_TIMEOUT: Duration = Duration::from_secs(40);

/// A node's role in a cluster, as its own CLUSTER NODES line says (`myself,master`,
/// `myself,slave <master-id>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// `master`.
    Master,
    /// `slave`, and its master's id.
    Replica(String),
}

/// One line of CLUSTER NODES: `<id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent>
/// <pong-recv> <config-epoch> <link-state> <slot> …`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLine {
    /// The node's id.
    pub id: String,
    /// `ip:port@cport`.
    pub addr: String,
    /// The flags (`myself`, `master`, `slave`, `fail?`, `fail`, `handshake`, `noaddr`…).
    pub flags: Vec<String>,
    /// Its master's id (`-` in the line: `None`).
    pub master: Option<String>,
    /// `connected` or `disconnected`.
    pub link: String,
    /// The slot ranges and open slots, as written.
    pub slots: Vec<String>,
}

impl NodeLine {
    /// Whether the line has `flag`.
    pub fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    /// Whether it is the answering node's own line.
    pub fn is_myself(&self) -> bool {
        self.has("myself")
    }

    /// Whether it is flagged `master`.
    pub fn is_master(&self) -> bool {
        self.has("master")
    }

    /// Whether it is flagged `slave`.
    pub fn is_replica(&self) -> bool {
        self.has("slave")
    }

    /// Whether it is flagged `fail` (not merely `fail?`).
    pub fn is_failed(&self) -> bool {
        self.has("fail")
    }

    /// Its role by its flags (`None`: neither `master` nor `slave`).
    pub fn role(&self) -> Option<Role> {
        if self.is_master() {
            Some(Role::Master)
        } else if self.is_replica() {
            Some(Role::Replica(self.master.clone().unwrap_or_default()))
        } else {
            None
        }
    }
}

/// Parses CLUSTER NODES text (or a CLUSTER REPLICAS line): one [`NodeLine`] a line.
///
/// # Errors
/// On a line with fewer than the eight fields every line has.
pub fn parse_nodes(text: &str) -> Result<Vec<NodeLine>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            if f.len() < 8 {
                return Err(format!("not a CLUSTER NODES line: {line:?}"));
            }
            Ok(NodeLine {
                id: f[0].to_string(),
                addr: f[1].to_string(),
                flags: f[2].split(',').map(str::to_string).collect(),
                master: (f[3] != "-").then(|| f[3].to_string()),
                link: f[7].to_string(),
                slots: f[8..].iter().map(|s| (*s).to_string()).collect(),
            })
        })
        .collect()
}

/// Polls `probe` every `every` until it returns `Ok` (then that value and how long it
/// took) or `timeout` passes (then `Err` with what it last said and the time waited).
/// The probe runs at least once, the last time at or after the deadline.
///
/// # Errors
/// When `probe` never succeeds in time.
pub fn poll<T>(
    timeout: Duration,
    every: Duration,
    mut probe: impl FnMut() -> Result<T, String>,
) -> Result<(T, Duration), String> {
    let start = Instant::now();
    loop {
        let last = match probe() {
            Ok(v) => return Ok((v, start.elapsed())),
            Err(e) => e,
        };
        if start.elapsed() >= timeout {
            return Err(format!("not so after {timeout:?}: {last}"));
        }
        std::thread::sleep(every);
    }
}

impl Cluster {
    /// Starts `n` nodes of `kind`, creates the cluster with `redis-cli --cluster create
    /// … --cluster-replicas 0 --cluster-yes`, and waits (at most [`HEALTHY_TIMEOUT`])
    /// until `redis-cli --cluster check` is clean and every node is `cluster_state:ok`
    /// and knows the `n` nodes.
    ///
    /// # Panics
    /// When a node does not start, the creation fails, or the cluster does not become
    /// healthy in time: with `redis-cli`'s output and the nodes' logs.
    pub fn start(kind: Kind, n: usize) -> Cluster {
        assert!(
            n >= 3,
            "redis-cli --cluster create needs at least 3 masters"
        );
        let mut nodes: Vec<Node> = (0..n).map(|_| Node::start(kind)).collect();
        nodes.sort_by_key(|node| node.port);
        let mut cluster = Cluster {
            kind,
            nodes,
            ids: Vec::new(),
            plan: Vec::new(),
            master_of: vec![None; n],
            masters: n,
            replicas_per_master: 0,
            create_output: String::new(),
        };
        cluster.create();
        cluster.wait_healthy(HEALTHY_TIMEOUT);
        cluster
    }

    /// Starts `masters * (1 + replicas_per_master)` nodes of `kind` (each also given
    /// `--repl-diskless-sync-delay 0`, so that a replica's sync does not wait five seconds
    /// for others to join it), creates the cluster with `redis-cli --cluster create …
    /// --cluster-replicas <replicas_per_master> --cluster-yes`, and waits (at most
    /// [`REPLICAS_HEALTHY_TIMEOUT`]) until `redis-cli --cluster check` is clean, every
    /// node is `cluster_state:ok` and knows every node, and every replica says it
    /// replicates the master `redis-cli` gave it, its link up (`master_link_status:up`).
    ///
    /// `redis-cli` makes the first `masters` addresses (by port) masters, and gives each
    /// master its replicas as it likes (shuffled for anti-affinity, which one host cannot
    /// have): the nodes are put in an order of their roles, so that two clusters built
    /// the same way compare. Node `k < masters` is the `k`-th master by port; node
    /// `masters + k * replicas_per_master + r` is master `k`'s `r`-th replica by port.
    ///
    /// # Panics
    /// When a node does not start, the creation fails, or the cluster does not become
    /// healthy in time: with `redis-cli`'s output and the nodes' logs.
    pub fn start_with_replicas(kind: Kind, masters: usize, replicas_per_master: usize) -> Cluster {
        assert!(
            masters >= 3,
            "redis-cli --cluster create needs at least 3 masters"
        );
        let n = masters * (1 + replicas_per_master);
        let extra: Vec<String> = vec!["--repl-diskless-sync-delay".into(), "0".into()];
        let mut nodes: Vec<Node> = (0..n).map(|_| Node::start_with(kind, &extra)).collect();
        nodes.sort_by_key(|node| node.port);
        let mut cluster = Cluster {
            kind,
            nodes,
            ids: Vec::new(),
            plan: Vec::new(),
            master_of: vec![None; n],
            masters,
            replicas_per_master,
            create_output: String::new(),
        };
        cluster.create();
        cluster.wait_healthy(REPLICAS_HEALTHY_TIMEOUT);
        // Healthy, and each replica replicates the master redis-cli gave it.
        for i in 0..n {
            if let Some(m) = cluster.master_of[i] {
                let role = cluster.role(i);
                assert!(
                    role.as_ref().ok() == Some(&Role::Replica(cluster.ids[m].clone())),
                    "node {i} (port {}) was given node {m} (port {}) as its master by \
                     redis-cli --cluster create, but its CLUSTER NODES says {role:?}",
                    cluster.port(i),
                    cluster.port(m)
                );
            }
        }
        cluster
    }

    /// Starts one more node of `kind` (with `--repl-diskless-sync-delay 0`, as
    /// [`Cluster::start_with_replicas`]'s) and joins it to the cluster as a replica of
    /// master `master`, as an operator does: `redis-cli --cluster add-node <new> <master>
    /// --cluster-slave --cluster-master-id <master-id>`. Then waits (at most
    /// [`REPLICAS_HEALTHY_TIMEOUT`]) until the cluster is healthy as
    /// [`Cluster::wait_healthy`] says (the new replica's link to its master up, every node
    /// agreeing on its role) and checks the new node says it replicates `master`. The new
    /// node is the last (its index is returned): [`Cluster::planned_master_of`] says
    /// `master` of it, and [`Cluster::planned_replicas_of`] lists it.
    ///
    /// # Panics
    /// When `master` was not made a master, the node does not start, `redis-cli` fails,
    /// or the cluster does not become healthy in time.
    pub fn add_replica(&mut self, master: usize) -> usize {
        assert!(
            self.master_of[master].is_none(),
            "node {master} was not made a master"
        );
        let extra: Vec<String> = vec!["--repl-diskless-sync-delay".into(), "0".into()];
        let node = Node::start_with(self.kind, &extra);
        let new_addr = format!("127.0.0.1:{}", node.port);
        let mut command = Command::new("redis-cli");
        command
            .args(["--cluster", "add-node", &new_addr, &self.addr(master)])
            .args(["--cluster-slave", "--cluster-master-id", self.id(master)]);
        let out = run_bounded(&mut command, CREATE_TIMEOUT);
        assert!(
            out.success() && out.stdout.contains("[OK] New node added correctly."),
            "redis-cli --cluster add-node {new_addr} as a replica of node {master} ({}) \
             failed:\n{}\nthe new node's log:\n{}",
            kind_name(self.kind),
            out.describe(),
            node.log_tail(25)
        );
        let myid = Raw::connect(node.port).cmd(&[b"CLUSTER", b"MYID"]);
        let Reply::Bulk(Some(id)) = parse(&myid) else {
            panic!(
                "the new node on port {}: CLUSTER MYID answered {}",
                node.port,
                show(&myid)
            );
        };
        self.nodes.push(node);
        self.ids.push(String::from_utf8_lossy(&id).into_owned());
        self.plan.push(Vec::new());
        self.master_of.push(Some(master));
        self.create_output.push_str(&out.stdout);
        let i = self.len() - 1;
        self.wait_healthy(REPLICAS_HEALTHY_TIMEOUT);
        let role = self.role(i);
        assert!(
            role.as_ref().ok() == Some(&Role::Replica(self.ids[master].clone())),
            "node {i} (port {}) was added as node {master}'s replica, but its CLUSTER NODES \
             says {role:?}",
            self.port(i)
        );
        i
    }

    fn create(&mut self) {
        let mut command = Command::new("redis-cli");
        command.arg("--cluster").arg("create");
        command.args(self.addrs());
        let replicas = self.replicas_per_master.to_string();
        command.args(["--cluster-replicas", &replicas, "--cluster-yes"]);
        let out = run_bounded(&mut command, CREATE_TIMEOUT);
        assert!(
            out.success() && out.stdout.contains("[OK] All 16384 slots covered."),
            "redis-cli --cluster create on {} nodes failed:\n{}",
            kind_name(self.kind),
            out.describe()
        );
        self.create_output = out.stdout;
        if self.replicas_per_master == 0 {
            let (ids, plan) = parse_create_plan(&self.create_output, &self.ports());
            self.ids = ids;
            self.plan = plan;
        } else {
            self.order_by_role();
        }
        // The ids redis-cli read from the nodes are the ones they say are theirs.
        for i in 0..self.len() {
            let myid = self.cmd(i, &[b"CLUSTER", b"MYID"]);
            let want = crate::reply::bulk(self.ids[i].as_bytes());
            assert!(
                myid == want,
                "node {i} (port {}): CLUSTER MYID answered {} but redis-cli --cluster create \
                 saw id {}",
                self.port(i),
                show(&myid),
                self.ids[i]
            );
        }
    }

    /// Reads `redis-cli --cluster create`'s deal of masters and replicas and puts the
    /// nodes in the order [`Cluster::start_with_replicas`] promises.
    fn order_by_role(&mut self) {
        let ports = self.ports();
        let layout = parse_create_layout(&self.create_output, &ports);
        let masters: Vec<usize> = (0..ports.len())
            .filter(|&i| layout.master_of[i].is_none())
            .collect();
        assert!(
            masters.len() == self.masters && masters.iter().copied().eq(0..self.masters),
            "redis-cli --cluster create did not make the first {} nodes (by port) the \
             masters:\n{}",
            self.masters,
            self.create_output
        );
        let mut order = masters.clone();
        for &m in &masters {
            let replicas: Vec<usize> = (0..ports.len())
                .filter(|&i| layout.master_of[i].as_deref() == Some(layout.ids[m].as_str()))
                .collect();
            assert!(
                replicas.len() == self.replicas_per_master,
                "redis-cli --cluster create gave the master on port {} {} replicas, not {}:\n{}",
                ports[m],
                replicas.len(),
                self.replicas_per_master,
                self.create_output
            );
            order.extend(replicas);
        }
        assert_eq!(order.len(), ports.len(), "{}", self.create_output);
        let mut slots: Vec<Option<Node>> = std::mem::take(&mut self.nodes)
            .into_iter()
            .map(Some)
            .collect();
        self.nodes = order.iter().map(|&i| slots[i].take().unwrap()).collect();
        self.ids = order.iter().map(|&i| layout.ids[i].clone()).collect();
        self.plan = order.iter().map(|&i| layout.plan[i].clone()).collect();
        self.master_of = order
            .iter()
            .map(|&i| {
                layout.master_of[i]
                    .as_ref()
                    .map(|m| self.ids.iter().position(|id| id == m).unwrap())
            })
            .collect();
    }

    /// Waits (at most `timeout`) until `redis-cli --cluster check` is clean
    /// ([`check_is_clean`]) and every node answers CLUSTER INFO with `cluster_state:ok`,
    /// `cluster_slots_assigned:16384` and `cluster_known_nodes:<n>`. In a cluster with
    /// replicas, also every node that says it is a replica (its own CLUSTER NODES line)
    /// has its link to its master up (`master_link_status:up` in INFO replication), and
    /// every node's CLUSTER NODES gives every node the role it gives itself. Only
    /// running nodes are asked (a node killed and not restarted is not); the check runs
    /// on the first running node.
    ///
    /// # Panics
    /// When it is not so by then: with the last check's output and every CLUSTER INFO.
    pub fn wait_healthy(&self, timeout: Duration) {
        if let Err(e) = self.try_wait_healthy(timeout) {
            panic!("{e}");
        }
    }

    /// [`Cluster::wait_healthy`], returning what is wrong instead of panicking.
    ///
    /// # Errors
    /// When the cluster is not healthy by then: the last check's output and every
    /// CLUSTER INFO.
    pub fn try_wait_healthy(&self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let out = self.check_output();
            let running: Vec<usize> = (0..self.len()).filter(|&i| self.is_running(i)).collect();
            let infos: Vec<String> = running.iter().map(|&i| self.cluster_info(i)).collect();
            let n = self.len().to_string();
            let nodes_ok = infos.iter().all(|info| {
                info_field(info, "cluster_state") == Some("ok")
                    && info_field(info, "cluster_slots_assigned") == Some("16384")
                    && info_field(info, "cluster_known_nodes") == Some(n.as_str())
            });
            let links = if self.has_replicas() {
                let mut problems: Vec<Option<String>> = running
                    .iter()
                    .map(|&i| self.replica_link_problem(i))
                    .collect();
                problems.push(self.roles_problem(&running));
                problems
            } else {
                Vec::new()
            };
            let links_ok = links.iter().all(Option::is_none);
            if check_is_clean(&out) && nodes_ok && links_ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                let mut msg = format!(
                    "the {} cluster (ports {:?}) is not healthy after {timeout:?}\n\
                     redis-cli --cluster check:\n{}\n",
                    kind_name(self.kind),
                    self.ports(),
                    out.describe()
                );
                for (i, info) in running.iter().zip(&infos) {
                    let _ = writeln!(msg, "node {i} CLUSTER INFO:\n{info}");
                }
                for problem in links.iter().flatten() {
                    let _ = writeln!(msg, "{problem}");
                }
                return Err(msg);
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Whether any node was made a replica (by `redis-cli --cluster create` or
    /// [`Cluster::add_replica`]).
    fn has_replicas(&self) -> bool {
        self.replicas_per_master > 0 || self.master_of.iter().any(Option::is_some)
    }

    /// When the running nodes do not all agree on each running node's role (what it says
    /// of itself: master, or replica of which node), or one flags another failing
    /// (`fail?`, `fail`): what is wrong. (`--cluster check` compares slots only.)
    fn roles_problem(&self, running: &[usize]) -> Option<String> {
        let mut views = Vec::new();
        for &i in running {
            match self.cluster_nodes(i) {
                Ok(lines) => views.push((i, lines)),
                Err(e) => return Some(e),
            }
        }
        for (j, own) in &views {
            let Some(mine) = own.iter().find(|l| l.is_myself()) else {
                return Some(format!("node {j} has no `myself` line"));
            };
            for (i, lines) in &views {
                let Some(line) = lines.iter().find(|l| l.id == mine.id) else {
                    return Some(format!("node {i} does not list node {j}"));
                };
                if line.role() != mine.role() || line.has("fail") || line.has("fail?") {
                    return Some(format!(
                        "node {i} says of node {j} {:?}; node {j} says of itself {:?}",
                        line.flags, mine.flags
                    ));
                }
            }
        }
        None
    }

    /// When node `i` says it is a replica (its own CLUSTER NODES line) and its link to
    /// its master is not up, or it does not answer: what is wrong.
    fn replica_link_problem(&self, i: usize) -> Option<String> {
        match self.role(i) {
            Ok(Role::Master) => None,
            Ok(Role::Replica(_)) => {
                let info = self.info_replication(i);
                (info_field(&info, "master_link_status") != Some("up")).then(|| {
                    format!("node {i} is a replica whose link is not up; INFO replication:\n{info}")
                })
            }
            Err(e) => Some(format!("node {i}: {e}")),
        }
    }

    /// Waits (at most `timeout`) until every node lists a link to and a link from each
    /// other node in CLUSTER LINKS; whether they all do. A node attributes an inbound link
    /// to its peer only once a message on it names the peer, which may be a ping or two
    /// after the cluster is otherwise healthy.
    pub fn wait_links(&self, timeout: Duration) -> bool {
        let want = 2 * (self.len() - 1);
        let deadline = Instant::now() + timeout;
        loop {
            let all = (0..self.len()).all(|i| {
                matches!(
                    parse(&self.cmd(i, &[b"CLUSTER", b"LINKS"])),
                    Reply::Array(Some(links)) if links.len() == want
                )
            });
            if all {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Which server the nodes run.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there is no node (never, once started).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The nodes' ports, in node order (ascending).
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// Node `i`'s port.
    pub fn port(&self, i: usize) -> u16 {
        self.nodes[i].port
    }

    /// Node `i`'s address, `127.0.0.1:<port>`.
    pub fn addr(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.port(i))
    }

    /// Every node's address, in node order.
    pub fn addrs(&self) -> Vec<String> {
        (0..self.len()).map(|i| self.addr(i)).collect()
    }

    /// Node `i`'s id (CLUSTER MYID, checked against what `redis-cli` saw).
    pub fn id(&self, i: usize) -> &str {
        &self.ids[i]
    }

    /// Every node's id, in node order.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// The nodes (their pids, logs, directories).
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// What `redis-cli --cluster create` printed.
    pub fn create_output(&self) -> &str {
        &self.create_output
    }

    /// The node `redis-cli --cluster create` dealt `slot` to (its plan, printed before
    /// it told the nodes: not an answer of the servers under test). Slots moved since
    /// (by [`Cluster::reshard`], SETSLOT) are not followed.
    pub fn plan_owner(&self, slot: usize) -> usize {
        self.plan
            .iter()
            .position(|ranges| {
                ranges
                    .iter()
                    .any(|&(a, b)| (usize::from(a)..=usize::from(b)).contains(&slot))
            })
            .unwrap_or_else(|| panic!("slot {slot} is in no node's plan"))
    }

    /// The slot ranges `redis-cli --cluster create` dealt node `i` (none for a replica),
    /// adjacent ranges merged.
    pub fn plan(&self, i: usize) -> Vec<(u16, u16)> {
        let mut ranges = self.plan[i].clone();
        ranges.sort_unstable();
        let mut out: Vec<(u16, u16)> = Vec::new();
        for (a, b) in ranges {
            match out.last_mut() {
                Some(last) if u32::from(last.1) + 1 >= u32::from(a) => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        out
    }

    /// The node that [`Cluster::plan_owner`] says owns `key`.
    pub fn key_owner(&self, key: &str) -> usize {
        self.plan_owner(slot(key.as_bytes()))
    }

    /// The first `count` keys `<prefix><n>` that node `node` owns by the plan.
    pub fn keys_on(&self, node: usize, prefix: &str, count: usize) -> Vec<String> {
        (0..)
            .map(|n| format!("{prefix}{n}"))
            .filter(|k| self.key_owner(k) == node)
            .take(count)
            .collect()
    }

    /// A hash tag (`{<prefix><n>}`, braces included) whose slot node `node` owns by the
    /// plan.
    pub fn tag_on(&self, node: usize, prefix: &str) -> String {
        self.keys_on(node, prefix, 1)
            .pop()
            .map(|t| format!("{{{t}}}"))
            .unwrap()
    }

    /// A `redis` crate connection to node `i`.
    pub fn connection(&self, i: usize) -> redis::Connection {
        let client = redis::Client::open(format!("redis://{}/", self.addr(i))).unwrap();
        client
            .get_connection_with_timeout(crate::REPLY_TIMEOUT)
            .unwrap()
    }

    /// A raw connection to node `i`.
    pub fn raw(&self, i: usize) -> Raw {
        Raw::connect(self.port(i))
    }

    /// Sends one command to node `i` on a new raw connection; its reply's bytes.
    pub fn cmd(&self, i: usize, args: &[&[u8]]) -> Vec<u8> {
        self.raw(i).cmd(args)
    }

    /// A cluster client (`redis::cluster`) seeded with every node.
    pub fn client(&self) -> redis::cluster::ClusterClient {
        let urls: Vec<String> = self
            .addrs()
            .iter()
            .map(|a| format!("redis://{a}/"))
            .collect();
        redis::cluster::ClusterClient::builder(urls)
            .connection_timeout(Duration::from_secs(5))
            .response_timeout(crate::REPLY_TIMEOUT)
            .build()
            .unwrap()
    }

    /// Node `i`'s CLUSTER INFO text (empty when it does not answer with a bulk string).
    pub fn cluster_info(&self, i: usize) -> String {
        match Raw::try_connect(self.port(i)).map(|mut r| {
            r.try_send(&crate::encode(&[b"CLUSTER", b"INFO"]))
                .and_then(|()| r.try_reply())
        }) {
            Ok(Ok(bytes)) => match parse(&bytes) {
                Reply::Bulk(Some(text)) => String::from_utf8_lossy(&text).into_owned(),
                other => format!("(not a bulk string: {})", render(&other)),
            },
            _ => "(no answer)".to_string(),
        }
    }

    /// Node `i`'s DBSIZE.
    pub fn dbsize(&self, i: usize) -> i64 {
        crate::reply::integer(&self.cmd(i, &[b"DBSIZE"]))
    }

    /// DBSIZE summed over the nodes.
    pub fn dbsize_total(&self) -> i64 {
        (0..self.len()).map(|i| self.dbsize(i)).sum()
    }

    /// `redis-cli --cluster check` on node 0 (on the first running node when node 0 has
    /// been killed), with its exit status.
    pub fn check_output(&self) -> Output {
        let first = (0..self.len()).find(|&i| self.is_running(i)).unwrap_or(0);
        self.check_output_on(first)
    }

    /// `redis-cli --cluster check` on node `i`, with its exit status.
    pub fn check_output_on(&self, i: usize) -> Output {
        let mut command = Command::new("redis-cli");
        command.args(["--cluster", "check", &self.addr(i)]);
        run_bounded(&mut command, CHECK_TIMEOUT)
    }

    /// What `redis-cli --cluster check` on node 0 prints (colours removed).
    pub fn check(&self) -> String {
        self.check_output().stdout
    }

    /// Moves `slots` slots from node `from` to node `to` with `redis-cli --cluster
    /// reshard … --cluster-yes` (bounded by [`RESHARD_TIMEOUT`]); what it printed.
    ///
    /// # Panics
    /// When it fails or runs out of time, with its output.
    pub fn reshard(&self, from: usize, to: usize, slots: usize) -> String {
        let mut command = Command::new("redis-cli");
        command
            .args(["--cluster", "reshard", &self.addr(0)])
            .args(["--cluster-from", self.id(from)])
            .args(["--cluster-to", self.id(to)])
            .args(["--cluster-slots", &slots.to_string(), "--cluster-yes"]);
        let out = run_bounded(&mut command, RESHARD_TIMEOUT);
        assert!(
            out.success() && !out.stdout.contains("[ERR]"),
            "redis-cli --cluster reshard of {slots} slots from node {from} to node {to} \
             ({}) failed:\n{}",
            kind_name(self.kind),
            out.describe()
        );
        out.stdout
    }

    /// How many masters it was created with.
    pub fn masters(&self) -> usize {
        self.masters
    }

    /// How many replicas each master was created with.
    pub fn replicas_per_master(&self) -> usize {
        self.replicas_per_master
    }

    /// The master `redis-cli --cluster create` gave node `i` (`None`: node `i` was made a
    /// master). Failovers since are not followed: ask [`Cluster::role`].
    pub fn planned_master_of(&self, i: usize) -> Option<usize> {
        self.master_of[i]
    }

    /// The replicas `redis-cli --cluster create` gave master `k` (by index).
    pub fn planned_replicas_of(&self, k: usize) -> Vec<usize> {
        (0..self.len())
            .filter(|&i| self.master_of[i] == Some(k))
            .collect()
    }

    /// The index of the node whose id is `id`.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.ids.iter().position(|x| x == id)
    }

    /// Whether node `i`'s process is running.
    pub fn is_running(&self, i: usize) -> bool {
        self.nodes[i].is_running()
    }

    /// Kills node `i` by its pid (SIGKILL, as a crash); its directory stays.
    pub fn kill(&self, i: usize) {
        self.nodes[i].kill();
    }

    /// Starts node `i` again on its port and directory (its `nodes.conf` kept) and waits
    /// until it answers PING.
    ///
    /// # Panics
    /// When it is running or does not come up, with its log.
    pub fn restart(&self, i: usize) {
        if let Err(e) = self.nodes[i].restart() {
            panic!("node {i}: {e}");
        }
    }

    /// Sends one command to node `i` on a new raw connection; its reply's bytes, or what
    /// stopped it (the node does not answer: it is down).
    ///
    /// # Errors
    /// When the node cannot be reached or does not answer.
    pub fn try_cmd(&self, i: usize, args: &[&[u8]]) -> Result<Vec<u8>, String> {
        let mut raw =
            Raw::try_connect(self.port(i)).map_err(|e| format!("node {i}: connect: {e}"))?;
        raw.try_send(&crate::encode(args))
            .and_then(|()| raw.try_reply())
            .map_err(|e| format!("node {i}: {e}"))
    }

    /// Node `i`'s CLUSTER NODES text.
    ///
    /// # Errors
    /// When it does not answer, or not with a bulk string.
    pub fn cluster_nodes_text(&self, i: usize) -> Result<String, String> {
        let reply = self.try_cmd(i, &[b"CLUSTER", b"NODES"])?;
        match parse(&reply) {
            Reply::Bulk(Some(text)) => Ok(String::from_utf8_lossy(&text).into_owned()),
            _ => Err(format!("node {i}: CLUSTER NODES answered {}", show(&reply))),
        }
    }

    /// Node `i`'s CLUSTER NODES, parsed.
    ///
    /// # Errors
    /// When it does not answer, or not with CLUSTER NODES lines.
    pub fn cluster_nodes(&self, i: usize) -> Result<Vec<NodeLine>, String> {
        parse_nodes(&self.cluster_nodes_text(i)?).map_err(|e| format!("node {i}: {e}"))
    }

    /// Node `i`'s role as its own CLUSTER NODES line (`myself,…`) says.
    ///
    /// # Errors
    /// When it does not answer, or has no `myself` line with a role.
    pub fn role(&self, i: usize) -> Result<Role, String> {
        let lines = self.cluster_nodes(i)?;
        lines
            .iter()
            .find(|l| l.is_myself())
            .and_then(NodeLine::role)
            .ok_or_else(|| format!("node {i}: no `myself` line with a role: {lines:?}"))
    }

    /// Node `i`'s INFO replication text (`(no answer: …)` when it does not answer).
    pub fn info_replication(&self, i: usize) -> String {
        match self.try_cmd(i, &[b"INFO", b"replication"]) {
            Ok(reply) => match parse(&reply) {
                Reply::Bulk(Some(text)) => String::from_utf8_lossy(&text).into_owned(),
                _ => format!("(not a bulk string: {})", show(&reply)),
            },
            Err(e) => format!("(no answer: {e})"),
        }
    }

    /// A cluster client (`redis::cluster`) seeded with every running node, that reads
    /// from replicas (a random replica of the slot's master, READONLY sent on its
    /// connections: `read_routing_strategy(RandomReplicaStrategy)`, what
    /// `read_from_replicas()` was) and writes to masters. It learns the replicas from
    /// CLUSTER SLOTS when it connects.
    pub fn client_reading_replicas(&self) -> redis::cluster::ClusterClient {
        let urls: Vec<String> = (0..self.len())
            .filter(|&i| self.is_running(i))
            .map(|i| format!("redis://{}/", self.addr(i)))
            .collect();
        redis::cluster::ClusterClient::builder(urls)
            .read_routing_strategy(redis::cluster_read_routing::RandomReplicaStrategy)
            .connection_timeout(Duration::from_secs(5))
            .response_timeout(crate::REPLY_TIMEOUT)
            .build()
            .unwrap()
    }

    /// The normaliser of this cluster's replies.
    pub fn norm(&self) -> Norm {
        Norm {
            ids: self.ids.clone(),
            ports: self.ports(),
        }
    }

    /// A reply parsed, normalised ([`Norm::reply`]) and rendered.
    pub fn render(&self, reply: &[u8]) -> String {
        render(&self.norm().reply(&parse(reply)))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for (i, node) in self.nodes.iter().enumerate() {
                eprintln!(
                    "--- {} node {i} (port {}, pid {}): last lines of its log ---\n{}",
                    kind_name(self.kind),
                    node.port,
                    node.pid(),
                    node.log_tail(25)
                );
            }
        }
        // The nodes are killed by pid and their directories removed as they drop.
    }
}

/// Reads `redis-cli --cluster create`'s plan: the `M: <id> 127.0.0.1:<port>` lines,
/// each followed by `slots:[a-b],[c]…`. Returns the ids and the slot ranges in the
/// order of `ports`.
fn parse_create_plan(out: &str, ports: &[u16]) -> (Vec<String>, Vec<Vec<(u16, u16)>>) {
    let layout = parse_create_layout(out, ports);
    (layout.ids, layout.plan)
}

/// The ranges of a `redis-cli` `slots:[a-b],[c] (n slots) master` line (what follows
/// `slots:`).
fn parse_slot_ranges(slots: &str) -> Vec<(u16, u16)> {
    let mut out = Vec::new();
    let ranges = slots.split_whitespace().next().unwrap_or("");
    for range in ranges.split(',') {
        let range = range.trim_matches(['[', ']']);
        let parsed = match range.split_once('-') {
            Some((a, b)) => a.parse().ok().zip(b.parse().ok()),
            None => range.parse().ok().map(|a| (a, a)),
        };
        if let Some(r) = parsed {
            out.push(r);
        }
    }
    out
}

/// `redis-cli --cluster create`'s deal with replicas, in the order of the ports given.
#[derive(Debug)]
struct Layout {
    ids: Vec<String>,
    /// The masters' slot ranges (none for a replica).
    plan: Vec<Vec<(u16, u16)>>,
    /// A replica's master's id (`None` for a master).
    master_of: Vec<Option<String>>,
}

/// Reads `redis-cli --cluster create`'s plan with replicas: `M: <id> 127.0.0.1:<port>`
/// followed by `slots:[a-b]…`, `S: <id> 127.0.0.1:<port>` followed by `replicates
/// <master-id>` (the first listing of each node; a later one is the check's).
fn parse_create_layout(out: &str, ports: &[u16]) -> Layout {
    let mut layout = Layout {
        ids: vec![String::new(); ports.len()],
        plan: vec![Vec::new(); ports.len()],
        master_of: vec![None; ports.len()],
    };
    let mut seen = vec![false; ports.len()];
    let lines: Vec<&str> = out.lines().collect();
    for (n, line) in lines.iter().enumerate() {
        let line = line.trim();
        let (master, rest) = if let Some(rest) = line.strip_prefix("M: ") {
            (true, rest)
        } else if let Some(rest) = line.strip_prefix("S: ") {
            (false, rest)
        } else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let (Some(id), Some(addr)) = (words.next(), words.next()) else {
            continue;
        };
        let port: Option<u16> = addr.rsplit(':').next().and_then(|p| p.parse().ok());
        let Some(i) = port.and_then(|p| ports.iter().position(|&q| q == p)) else {
            continue;
        };
        if seen[i] {
            continue;
        }
        seen[i] = true;
        layout.ids[i] = id.to_string();
        let next = lines.get(n + 1).map_or("", |l| l.trim());
        if master {
            if let Some(slots) = next.strip_prefix("slots:") {
                layout.plan[i] = parse_slot_ranges(slots);
            }
        } else {
            let of = next.strip_prefix("replicates ").map(str::trim);
            assert!(
                of.is_some_and(|m| !m.is_empty()),
                "redis-cli --cluster create: replica {id} without `replicates <id>`:\n{out}"
            );
            layout.master_of[i] = of.map(str::to_string);
        }
    }
    assert!(
        seen.iter().all(|&s| s),
        "redis-cli --cluster create did not list every node ({ports:?}):\n{out}"
    );
    let covered: usize = layout
        .plan
        .iter()
        .flatten()
        .map(|&(a, b)| usize::from(b) - usize::from(a) + 1)
        .sum();
    assert_eq!(
        covered, SLOTS,
        "redis-cli's plan does not cover the slots:\n{out}"
    );
    layout
}

/// A RESP2 reply as a tree (and `Masked`, what a normaliser put in a value's place).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reply {
    /// `+text`.
    Status(String),
    /// `-text`.
    Error(String),
    /// `:n`.
    Int(i64),
    /// `$…`, or the null bulk string.
    Bulk(Option<Vec<u8>>),
    /// `*…`, or the null array.
    Array(Option<Vec<Reply>>),
    /// A normalised value, rendered as it is.
    Masked(String),
}

/// Whether a CLUSTER LINKS reply lists each node's links together, the link to it then
/// the link from it, as redis-server does (redis-py's tests pair them up so).
pub fn links_paired(reply: &[u8]) -> bool {
    let Reply::Array(Some(links)) = parse(reply) else {
        return false;
    };
    let field = |link: &Reply, name: &[u8]| -> Option<Vec<u8>> {
        let Reply::Array(Some(items)) = link else {
            return None;
        };
        let at = items
            .iter()
            .position(|i| matches!(i, Reply::Bulk(Some(b)) if b == name))?;
        match items.get(at + 1) {
            Some(Reply::Bulk(Some(v))) => Some(v.clone()),
            _ => None,
        }
    };
    links.chunks(2).all(|pair| match pair {
        [to, from] => {
            field(to, b"direction").as_deref() == Some(b"to")
                && field(from, b"direction").as_deref() == Some(b"from")
                && field(to, b"node").is_some()
                && field(to, b"node") == field(from, b"node")
        }
        _ => false,
    })
}

/// Parses one whole RESP2 reply.
///
/// # Panics
/// On bytes that are not one whole reply.
pub fn parse(bytes: &[u8]) -> Reply {
    let mut pos = 0;
    let reply = parse_at(bytes, &mut pos);
    assert!(
        pos == bytes.len(),
        "bytes after the reply: {}",
        show(&bytes[pos..])
    );
    reply
}

fn parse_at(bytes: &[u8], pos: &mut usize) -> Reply {
    let line_end = bytes[*pos..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|n| *pos + n)
        .unwrap_or_else(|| panic!("a truncated reply: {}", show(bytes)));
    let kind = bytes[*pos];
    let line = String::from_utf8_lossy(&bytes[*pos + 1..line_end]).into_owned();
    *pos = line_end + 2;
    let number = |line: &str| -> i64 {
        line.parse()
            .unwrap_or_else(|_| panic!("not a length: {line:?} in {}", show(bytes)))
    };
    match kind {
        b'+' => Reply::Status(line),
        b'-' => Reply::Error(line),
        b':' => Reply::Int(number(&line)),
        b'$' => {
            let len = number(&line);
            if len < 0 {
                return Reply::Bulk(None);
            }
            let len = usize::try_from(len).unwrap();
            let data = bytes[*pos..*pos + len].to_vec();
            *pos += len + 2;
            Reply::Bulk(Some(data))
        }
        b'*' => {
            let len = number(&line);
            if len < 0 {
                return Reply::Array(None);
            }
            Reply::Array(Some((0..len).map(|_| parse_at(bytes, pos)).collect()))
        }
        other => panic!(
            "not a RESP2 reply type: {:?} in {}",
            other as char,
            show(bytes)
        ),
    }
}

/// Renders a reply on one line: `+OK`, `-ERR …`, `:1`, `"bulk"`, `(nil)`, `[a, b]`,
/// `(nil array)`; masked values as they are.
pub fn render(reply: &Reply) -> String {
    match reply {
        Reply::Status(s) => format!("+{s}"),
        Reply::Error(s) => format!("-{s}"),
        Reply::Int(n) => format!(":{n}"),
        Reply::Bulk(Some(b)) => format!("\"{}\"", show(b)),
        Reply::Bulk(None) => "(nil)".to_string(),
        Reply::Array(Some(items)) => {
            let items: Vec<String> = items.iter().map(render).collect();
            format!("[{}]", items.join(", "))
        }
        Reply::Array(None) => "(nil array)".to_string(),
        Reply::Masked(s) => s.clone(),
    }
}

/// Normalises replies so that two clusters built the same way answer alike:
///
/// - a node id (a 40-hex-digit word equal to a node's id) becomes `node<i>`, and so does
///   the 8-digit start of one (as `redis-cli --cluster check` shows ids);
/// - a word of digits equal to node `i`'s port becomes `port<i>`, to its bus port
///   `busport<i>`; an integer reply equal to a port becomes `port<i>` too;
/// - the timing-dependent and counter fields of CLUSTER NODES, INFO, LINKS and SHARDS are
///   masked by [`Norm::nodes`], [`Norm::info`], [`Norm::links`] and [`Norm::shards`].
///
/// "Words" are the maximal runs of ASCII letters and digits, so that a port is never
/// matched inside a longer number (a timestamp) and an id never inside a longer word.
#[derive(Clone, Debug)]
pub struct Norm {
    /// The nodes' ids, in node order.
    pub ids: Vec<String>,
    /// The nodes' ports, in node order.
    pub ports: Vec<u16>,
}

impl Norm {
    fn word(&self, word: &str) -> Option<String> {
        if word.len() == 40 && word.bytes().all(|b| b.is_ascii_hexdigit()) {
            return self
                .ids
                .iter()
                .position(|id| id.eq_ignore_ascii_case(word))
                .map(|i| format!("node{i}"));
        }
        // `redis-cli --cluster check` shows ids cut to their first 8 digits.
        if word.len() == 8 && word.bytes().all(|b| b.is_ascii_hexdigit()) {
            let matching: Vec<usize> = (0..self.ids.len())
                .filter(|&i| {
                    self.ids[i]
                        .get(..8)
                        .is_some_and(|p| p.eq_ignore_ascii_case(word))
                })
                .collect();
            if let [i] = matching[..] {
                return Some(format!("node{i}"));
            }
        }
        if word.bytes().all(|b| b.is_ascii_digit()) {
            let n: u32 = word.parse().ok()?;
            if let Some(i) = self.ports.iter().position(|&p| u32::from(p) == n) {
                return Some(format!("port{i}"));
            }
            if let Some(i) = self
                .ports
                .iter()
                .position(|&p| u32::from(p) + u32::from(BUS_OFFSET) == n)
            {
                return Some(format!("busport{i}"));
            }
        }
        None
    }

    /// Text with node ids and ports replaced (see [`Norm`]).
    pub fn text(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut word = String::new();
        let flush = |word: &mut String, out: &mut String| {
            if !word.is_empty() {
                match self.word(word) {
                    Some(w) => out.push_str(&w),
                    None => out.push_str(word),
                }
                word.clear();
            }
        };
        for c in text.chars() {
            if c.is_ascii_alphanumeric() {
                word.push(c);
            } else {
                flush(&mut word, &mut out);
                out.push(c);
            }
        }
        flush(&mut word, &mut out);
        out
    }

    /// A reply with node ids and ports replaced everywhere in it (see [`Norm`]).
    pub fn reply(&self, reply: &Reply) -> Reply {
        match reply {
            Reply::Status(s) => Reply::Status(self.text(s)),
            Reply::Error(s) => Reply::Error(self.text(s)),
            Reply::Int(n) => match u16::try_from(*n)
                .ok()
                .and_then(|p| self.ports.iter().position(|&q| q == p))
            {
                Some(i) => Reply::Masked(format!("port{i}")),
                None => Reply::Int(*n),
            },
            Reply::Bulk(Some(b)) => match std::str::from_utf8(b) {
                Ok(s) => Reply::Bulk(Some(self.text(s).into_bytes())),
                Err(_) => Reply::Bulk(Some(b.clone())),
            },
            Reply::Array(Some(items)) => {
                Reply::Array(Some(items.iter().map(|r| self.reply(r)).collect()))
            }
            other => other.clone(),
        }
    }

    /// A CLUSTER NODES reply normalised: ids and ports replaced, each line's `ping-sent`
    /// and `pong-recv` (fields 5 and 6) made `<time>` and its `config-epoch` (field 7)
    /// `<epoch>`, and the lines sorted (redis-server lists the nodes in its dictionary's
    /// order).
    pub fn nodes(&self, reply: &[u8]) -> String {
        let Reply::Bulk(Some(text)) = parse(reply) else {
            return render(&self.reply(&parse(reply)));
        };
        let text = String::from_utf8_lossy(&text).into_owned();
        let mut lines: Vec<String> = text.lines().map(|line| self.nodes_line(line)).collect();
        lines.sort();
        format!(
            "bulk, ends with newline: {}\n{}",
            text.ends_with('\n'),
            lines.join("\n")
        )
    }

    /// One CLUSTER NODES line normalised: ids and ports replaced, `ping-sent` and
    /// `pong-recv` (fields 5 and 6) made `<time>`, `config-epoch` (field 7) `<epoch>`.
    /// A replica's line (`slave <master-id>`) has its master's id replaced too. The link
    /// of a node flagged `fail` or `fail?` is `<link>`: redis-server tries it again every
    /// 100 ms and says `connected` while an attempt is under way, so which it says is a
    /// race (seen in CI: one node of redis-server's said `connected` for a killed node).
    pub fn nodes_line(&self, line: &str) -> String {
        let mut fields: Vec<String> = line.split(' ').map(|f| self.text(f)).collect();
        for (n, mask) in [(4, "<time>"), (5, "<time>"), (6, "<epoch>")] {
            if let Some(f) = fields.get_mut(n) {
                *f = mask.to_string();
            }
        }
        let unreachable = fields
            .get(2)
            .is_some_and(|flags| flags.split(',').any(|f| f == "fail" || f == "fail?"));
        if unreachable && let Some(link) = fields.get_mut(7) {
            *link = "<link>".to_string();
        }
        fields.join(" ")
    }

    /// A CLUSTER REPLICAS (or SLAVES) reply normalised: an array of CLUSTER NODES lines,
    /// each masked as [`Norm::nodes_line`] (a newline it ends with shown as `\n`), the
    /// lines sorted; any other reply (an error) normalised as it is.
    pub fn replicas(&self, reply: &[u8]) -> String {
        let parsed = parse(reply);
        let Reply::Array(Some(items)) = &parsed else {
            return render(&self.reply(&parsed));
        };
        let mut lines: Vec<String> = Vec::new();
        for item in items {
            let Reply::Bulk(Some(line)) = item else {
                return render(&self.reply(&parsed));
            };
            let line = String::from_utf8_lossy(line).into_owned();
            let (body, newline) = match line.strip_suffix('\n') {
                Some(body) => (body.to_string(), "\\n"),
                None => (line.clone(), ""),
            };
            lines.push(format!("{}{newline}", self.nodes_line(&body)));
        }
        lines.sort();
        format!("array of {}:\n{}", lines.len(), lines.join("\n"))
    }

    /// An INFO replication text reduced to what two clusters built alike share: `role`,
    /// `master_host`, `master_port` (a port: replaced), `master_link_status`,
    /// `connected_slaves`, and of each `slave<n>` line its `ip`, `port` and `state`
    /// (offsets and lag left out), in that order.
    pub fn replication(&self, info: &str) -> String {
        let mut out = Vec::new();
        for field in [
            "role",
            "master_host",
            "master_port",
            "master_link_status",
            "connected_slaves",
        ] {
            if let Some(v) = info_field(info, field) {
                out.push(format!("{field}:{}", self.text(v)));
            }
        }
        for line in info.lines() {
            let Some((name, value)) = line.trim_end().split_once(':') else {
                continue;
            };
            if name.starts_with("slave") && name[5..].bytes().all(|b| b.is_ascii_digit()) {
                let kept: Vec<String> = value
                    .split(',')
                    .filter(|kv| {
                        kv.starts_with("ip=") || kv.starts_with("port=") || kv.starts_with("state=")
                    })
                    .map(|kv| self.text(kv))
                    .collect();
                out.push(format!("{name}:{}", kept.join(",")));
            }
        }
        out.join("\n")
    }

    /// What `redis-cli --cluster check` printed, normalised: ids and ports replaced, its
    /// summary lines (one a master, first) sorted, and its node blocks (an `M: `/`S: `
    /// line and the indented lines under it) sorted, the node it asked first (redis-cli
    /// lists the others in their dictionary's order); the other lines kept in place.
    pub fn check(&self, stdout: &str) -> String {
        let lines: Vec<String> = stdout
            .lines()
            .map(|l| self.text(l.trim_end()))
            .filter(|l| !l.is_empty())
            .collect();
        let is_head = |l: &str| l.starts_with("M: ") || l.starts_with("S: ");
        let Some(first) = lines.iter().position(|l| is_head(l)) else {
            return lines.join("\n");
        };
        let mut blocks: Vec<Vec<String>> = Vec::new();
        let mut n = first;
        while n < lines.len() && (is_head(&lines[n]) || lines[n].starts_with(' ')) {
            if is_head(&lines[n]) {
                blocks.push(Vec::new());
            }
            blocks.last_mut().unwrap().push(lines[n].clone());
            n += 1;
        }
        if blocks.len() > 1 {
            blocks[1..].sort();
        }
        // The summary before the blocks (`<addr> (<id>...) -> n keys | n slots | n
        // slaves.`, a line a master) is in the dictionary's order too.
        let mut head: Vec<String> = lines[..first].to_vec();
        let summary = head.iter().take_while(|l| l.contains(" -> ")).count();
        head[..summary].sort();
        let mut out = head;
        out.extend(blocks.into_iter().flatten());
        out.extend(lines[n..].iter().cloned());
        out.join("\n")
    }

    /// A CLUSTER INFO reply normalised: the per-type message counters
    /// (`cluster_stats_messages_<type>_sent/received`, printed only for the types a node
    /// happened to send or receive) dropped, and the values of the epochs
    /// (`cluster_current_epoch`, `cluster_my_epoch`) and the message totals
    /// (`cluster_stats_messages_sent/received`) made `<n>`; every other field as it is.
    pub fn info(&self, reply: &[u8]) -> String {
        let Reply::Bulk(Some(text)) = parse(reply) else {
            return render(&self.reply(&parse(reply)));
        };
        let text = String::from_utf8_lossy(&text).into_owned();
        let masked = [
            "cluster_current_epoch",
            "cluster_my_epoch",
            "cluster_stats_messages_sent",
            "cluster_stats_messages_received",
        ];
        let lines: Vec<String> = text
            .split("\r\n")
            .filter(|line| {
                let name = line.split(':').next().unwrap_or("");
                !name.starts_with("cluster_stats_messages_") || masked.contains(&name)
            })
            .map(|line| match line.split_once(':') {
                Some((name, _)) if masked.contains(&name) => format!("{name}:<n>"),
                _ => self.text(line),
            })
            .collect();
        lines.join("\n")
    }

    /// A CLUSTER LINKS reply normalised: ids and ports replaced, each link's
    /// `create-time` made `<time>`, `events` (`r` or `rw`, as its buffer happens to be)
    /// `<events>`, `send-buffer-allocated` and `send-buffer-used` `<bytes>`; the links
    /// sorted (redis-server lists them in its dictionary's order).
    pub fn links(&self, reply: &[u8]) -> String {
        let mut r = self.reply(&parse(reply));
        mask_fields(
            &mut r,
            &[
                ("create-time", "<time>"),
                ("events", "<events>"),
                ("send-buffer-allocated", "<bytes>"),
                ("send-buffer-used", "<bytes>"),
            ],
        );
        sort_array(&mut r);
        render(&r)
    }

    /// A CLUSTER SHARDS reply normalised: ids and ports replaced, each node's
    /// `replication-offset` made `<offset>`, the shards sorted (redis-server lists them
    /// in its dictionary's order).
    pub fn shards(&self, reply: &[u8]) -> String {
        let mut r = self.reply(&parse(reply));
        mask_fields(&mut r, &[("replication-offset", "<offset>")]);
        sort_array(&mut r);
        render(&r)
    }

    /// A reply normalised and its top-level array's items sorted (GETKEYSINSLOT, KEYS:
    /// their order is the server's own).
    pub fn sorted(&self, reply: &[u8]) -> String {
        let mut r = self.reply(&parse(reply));
        sort_array(&mut r);
        render(&r)
    }
}

/// In every flat key-value array of the reply (at any depth), the values of the given
/// keys replaced by their masks.
fn mask_fields(reply: &mut Reply, masks: &[(&str, &str)]) {
    let Reply::Array(Some(items)) = reply else {
        return;
    };
    if items.len() % 2 == 0 {
        for pair in items.chunks_mut(2) {
            if let [Reply::Bulk(Some(key)), value] = pair
                && let Some((_, mask)) = masks.iter().find(|(k, _)| k.as_bytes() == key)
            {
                *value = Reply::Masked((*mask).to_string());
            }
        }
    }
    for item in items.iter_mut() {
        mask_fields(item, masks);
    }
}

fn sort_array(reply: &mut Reply) {
    if let Reply::Array(Some(items)) = reply {
        items.sort_by_key(render);
    }
}

/// The normalised record of a scenario: what was asked (with ids and ports normalised)
/// and what was answered (normalised), in order; and the scenario's own checks that
/// failed.
///
/// A scenario's checks ([`Transcript::check`]) are hard on redis-server (a failure
/// panics: the scenario or the harness is wrong) and soft on goblin-server (a failure is
/// recorded and reported with the comparison, so that one wrong answer does not hide the
/// rest of the run).
#[derive(Debug, Default, Clone)]
pub struct Transcript {
    /// `(what, answer)` pairs.
    pub entries: Vec<(String, String)>,
    /// The checks that failed (only when soft).
    pub failed: Vec<String>,
    soft: bool,
}

impl Transcript {
    /// A new empty transcript whose checks are hard.
    pub fn new() -> Transcript {
        Transcript::default()
    }

    /// A new empty transcript for a scenario on `cluster`: its checks are soft on
    /// goblin-server, hard on redis-server.
    pub fn on(cluster: &Cluster) -> Transcript {
        Transcript {
            soft: cluster.kind() == Kind::Goblin,
            ..Transcript::default()
        }
    }

    /// A check of the scenario: when `ok` is false, panics with the message (hard) or
    /// records it (soft).
    pub fn check(&mut self, ok: bool, message: impl FnOnce() -> String) {
        if !ok {
            let message = message();
            if self.soft {
                self.failed.push(message);
            } else {
                panic!("{message}");
            }
        }
    }

    /// [`Transcript::check`] that a reply is `want`, byte for byte.
    pub fn check_reply(&mut self, got: &[u8], want: &[u8], what: impl std::fmt::Display) {
        self.check(got == want, || {
            format!("{what}: got {}, expected {}", show(got), show(want))
        });
    }

    /// Records an entry.
    pub fn push(&mut self, what: impl Into<String>, answer: impl Into<String>) {
        self.entries.push((what.into(), answer.into()));
    }

    /// Sends `args` on `raw` (a connection to node `node` of `cluster`), records
    /// `node<i>> ARGS` and the normalised reply, and returns the reply's bytes.
    pub fn ask(
        &mut self,
        cluster: &Cluster,
        raw: &mut Raw,
        node: usize,
        args: &[&[u8]],
    ) -> Vec<u8> {
        let reply = raw.cmd(args);
        self.push(label(cluster, node, args), cluster.render(&reply));
        reply
    }

    /// [`Transcript::ask`] with the command given as text split on spaces.
    pub fn ask_str(
        &mut self,
        cluster: &Cluster,
        raw: &mut Raw,
        node: usize,
        line: &str,
    ) -> Vec<u8> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        self.ask(cluster, raw, node, &args)
    }

    /// The transcript as text, an entry a line.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (what, answer) in &self.entries {
            let _ = writeln!(out, "{what}\n    {}", answer.replace('\n', "\n    "));
        }
        out
    }
}

/// `node<i>> ARGS`, the arguments normalised.
pub fn label(cluster: &Cluster, node: usize, args: &[&[u8]]) -> String {
    let words: Vec<String> = args
        .iter()
        .map(|a| cluster.norm().text(&String::from_utf8_lossy(a)))
        .collect();
    format!("node{node}> {}", words.join(" "))
}

/// Compares goblin-server's transcript with redis-server's: `Err` listing every entry
/// that differs (what was asked, both answers).
///
/// # Errors
/// When they differ.
pub fn compare(goblin: &Transcript, redis: &Transcript) -> Result<(), String> {
    let mut msg = String::new();
    let mut differ = 0;
    for failed in &goblin.failed {
        let _ = writeln!(msg, "check failed on goblin-server: {failed}");
    }
    let indent = |s: &str| s.replace('\n', "\n          ");
    for (n, (g, r)) in goblin.entries.iter().zip(&redis.entries).enumerate() {
        let (g, r) = ((g.0.clone(), indent(&g.1)), (r.0.clone(), indent(&r.1)));
        if g != r {
            differ += 1;
            if g.0 == r.0 {
                let _ = writeln!(msg, "#{n} {}\n  goblin: {}\n   redis: {}", g.0, g.1, r.1);
            } else {
                let _ = writeln!(
                    msg,
                    "#{n} asked differently\n  goblin: {} -> {}\n   redis: {} -> {}",
                    g.0, g.1, r.0, r.1
                );
            }
        }
    }
    if goblin.entries.len() != redis.entries.len() {
        let _ = writeln!(
            msg,
            "goblin's transcript has {} entries, redis's {}",
            goblin.entries.len(),
            redis.entries.len()
        );
        differ += 1;
    }
    if differ == 0 && goblin.failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of the scenario's checks failed, {differ} of {} entries differ:\n{msg}",
            goblin.failed.len(),
            redis.entries.len()
        ))
    }
}

/// Runs `scenario` on a cluster of `n` nodes of `kind`. For redis-server, that is all
/// (the scenario's own assertions). For goblin-server, the goblin-server cluster is
/// started first (so that a node that refuses cluster mode fails at once), then a
/// redis-server cluster built the same way; the scenario runs on redis-server, then on
/// goblin-server, and the two transcripts must match entry by entry ([`compare`]).
///
/// # Panics
/// When a cluster does not start, the scenario panics, or the transcripts differ.
pub fn run_on(kind: Kind, n: usize, scenario: impl Fn(&Cluster) -> Transcript) {
    run_with(kind, |k| Cluster::start(k, n), scenario);
}

/// [`run_on`] with clusters of `masters` masters, each with `replicas_per_master`
/// replicas ([`Cluster::start_with_replicas`]).
///
/// # Panics
/// When a cluster does not start, the scenario panics, or the transcripts differ.
pub fn run_on_replicas(
    kind: Kind,
    masters: usize,
    replicas_per_master: usize,
    scenario: impl Fn(&Cluster) -> Transcript,
) {
    run_with(
        kind,
        |k| Cluster::start_with_replicas(k, masters, replicas_per_master),
        scenario,
    );
}

/// [`run_on`] with clusters built by `build` (given the kind of their nodes): the same
/// way for both servers, [`Cluster::start_with_replicas`] then [`Cluster::add_replica`],
/// say.
///
/// # Panics
/// When a cluster does not start, the scenario panics, or the transcripts differ.
pub fn run_on_built(
    kind: Kind,
    build: impl Fn(Kind) -> Cluster,
    scenario: impl Fn(&Cluster) -> Transcript,
) {
    run_with(kind, build, scenario);
}

fn run_with(
    kind: Kind,
    start: impl Fn(Kind) -> Cluster,
    scenario: impl Fn(&Cluster) -> Transcript,
) {
    match kind {
        Kind::Redis => {
            let redis = start(Kind::Redis);
            let transcript = scenario(&redis);
            // Shown with `--nocapture`: what goblin-server's run is compared with.
            eprintln!("--- redis-server's transcript ---\n{}", transcript.text());
        }
        Kind::Goblin => {
            let goblin = start(Kind::Goblin);
            let want = {
                let redis = start(Kind::Redis);
                scenario(&redis)
            };
            let got = scenario(&goblin);
            if let Err(e) = compare(&got, &want) {
                panic!(
                    "goblin-server's cluster answers differently from redis-server's: {e}\n\
                     --- redis-server's transcript ---\n{}",
                    want.text()
                );
            }
        }
    }
}

// The scenarios' ways of asking: shared by the cluster modules of the e2e suite.

/// Asks node `node` `args` over `raw`, recorded in `t`.
pub fn ask(t: &mut Transcript, c: &Cluster, raw: &mut Raw, node: usize, args: &[&str]) -> Vec<u8> {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    t.ask(c, raw, node, &args)
}

/// An error reply's bytes.
pub fn err(text: &str) -> Vec<u8> {
    format!("-{text}\r\n").into_bytes()
}

/// The `MOVED` reply that sends `slot` to node `to`.
pub fn moved(c: &Cluster, slot: usize, to: usize) -> Vec<u8> {
    err(&format!("MOVED {slot} 127.0.0.1:{}", c.port(to)))
}

/// [`ask`], and a check that the reply is `want`.
pub fn expect(
    t: &mut Transcript,
    c: &Cluster,
    raw: &mut Raw,
    node: usize,
    args: &[&str],
    want: &[u8],
) -> Vec<u8> {
    let reply = ask(t, c, raw, node, args);
    t.check_reply(&reply, want, format!("node{node}> {}", args.join(" ")));
    reply
}

/// [`ask`], and a check that the reply starts with `prefix`.
pub fn expect_prefix(
    t: &mut Transcript,
    c: &Cluster,
    raw: &mut Raw,
    node: usize,
    args: &[&str],
    prefix: &[u8],
) -> Vec<u8> {
    let reply = ask(t, c, raw, node, args);
    t.check(reply.starts_with(prefix), || {
        format!(
            "node{node}> {}: {}, expected {}…",
            args.join(" "),
            show(&reply),
            show(prefix)
        )
    });
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm() -> Norm {
        Norm {
            ids: vec!["a".repeat(40), "b".repeat(40), "c".repeat(40)],
            ports: vec![17001, 17002, 17003],
        }
    }

    #[test]
    fn words_are_replaced_whole() {
        let n = norm();
        let a = "a".repeat(40);
        let other = "d".repeat(40);
        assert_eq!(
            n.text(&format!("{a} 127.0.0.1:17002@27002 17001000 {other}")),
            format!("node0 127.0.0.1:port1@busport1 17001000 {other}")
        );
        assert_eq!(
            n.text("MOVED 12182 127.0.0.1:17003"),
            "MOVED 12182 127.0.0.1:port2"
        );
        assert_eq!(
            render(&n.reply(&parse(b"*2\r\n:17003\r\n:5460\r\n"))),
            "[port2, :5460]"
        );
    }

    #[test]
    fn parse_and_render() {
        let r = parse(b"*4\r\n+OK\r\n-ERR x\r\n$-1\r\n*1\r\n$2\r\nab\r\n");
        assert_eq!(render(&r), r#"[+OK, -ERR x, (nil), ["ab"]]"#);
    }

    #[test]
    fn cluster_nodes_lines_are_masked_and_sorted() {
        let n = norm();
        let (a, b, c) = ("a".repeat(40), "b".repeat(40), "c".repeat(40));
        let text = format!(
            "{b} 127.0.0.1:17002@27002 master - 0 1796279458000 2 connected 5461-10922\n\
             {c} 127.0.0.1:17003@27003 slave,fail {a} 0 1796279459000 1 connected\n\
             {a} 127.0.0.1:17001@27001 myself,master - 0 1796279457000 1 connected 0-5460\n"
        );
        let reply = crate::reply::bulk(text.as_bytes());
        assert_eq!(
            n.nodes(&reply),
            "bulk, ends with newline: true\n\
             node0 127.0.0.1:port0@busport0 myself,master - <time> <time> <epoch> connected \
             0-5460\n\
             node1 127.0.0.1:port1@busport1 master - <time> <time> <epoch> connected 5461-10922\n\
             node2 127.0.0.1:port2@busport2 slave,fail node0 <time> <time> <epoch> <link>"
        );
    }

    #[test]
    fn links_fields_are_masked() {
        let n = norm();
        let link = |dir: &str| {
            format!(
                "*12\r\n$9\r\ndirection\r\n${}\r\n{dir}\r\n$4\r\nnode\r\n$40\r\n{}\r\n\
                 $11\r\ncreate-time\r\n:1796279446481\r\n$6\r\nevents\r\n$2\r\nrw\r\n\
                 $21\r\nsend-buffer-allocated\r\n:4096\r\n$16\r\nsend-buffer-used\r\n:0\r\n",
                dir.len(),
                "b".repeat(40)
            )
        };
        let reply = format!("*2\r\n{}{}", link("to"), link("from"));
        assert_eq!(
            n.links(reply.as_bytes()),
            "[[\"direction\", \"from\", \"node\", \"node1\", \"create-time\", <time>, \
             \"events\", <events>, \"send-buffer-allocated\", <bytes>, \"send-buffer-used\", \
             <bytes>], [\"direction\", \"to\", \"node\", \"node1\", \"create-time\", <time>, \
             \"events\", <events>, \"send-buffer-allocated\", <bytes>, \"send-buffer-used\", \
             <bytes>]]"
        );
    }

    #[test]
    fn create_plan_is_read() {
        let out = "Master[0] -> Slots 0 - 5460\n\
                   M: aaaa 127.0.0.1:17001\n   slots:[0-5460] (5461 slots) master\n\
                   M: bbbb 127.0.0.1:17002\n   slots:[5461-10922] (5462 slots) master\n\
                   M: cccc 127.0.0.1:17003\n   slots:[10923-16382],[16383] (5461 slots) master\n\
                   M: aaaa 127.0.0.1:17001\n   slots:[0-5460] (5461 slots) master\n";
        let (ids, plan) = parse_create_plan(out, &[17001, 17002, 17003]);
        assert_eq!(ids, ["aaaa", "bbbb", "cccc"]);
        assert_eq!(plan[2], [(10923, 16382), (16383, 16383)]);
    }

    #[test]
    fn create_layout_with_replicas_is_read() {
        let (a, b, c) = ("a".repeat(40), "b".repeat(40), "c".repeat(40));
        let (d, e, f) = ("d".repeat(40), "e".repeat(40), "f".repeat(40));
        let out = format!(
            "Master[0] -> Slots 0 - 5460\n\
             Adding replica 127.0.0.1:17005 to 127.0.0.1:17001\n\
             M: {a} 127.0.0.1:17001\n   slots:[0-5460] (5461 slots) master\n\
             M: {b} 127.0.0.1:17002\n   slots:[5461-10922] (5462 slots) master\n\
             M: {c} 127.0.0.1:17003\n   slots:[10923-16383] (5461 slots) master\n\
             S: {d} 127.0.0.1:17004\n   replicates {b}\n\
             S: {e} 127.0.0.1:17005\n   replicates {c}\n\
             S: {f} 127.0.0.1:17006\n   replicates {a}\n\
             >>> Performing Cluster Check (using node 127.0.0.1:17001)\n\
             S: {d} 127.0.0.1:17004\n   slots: (0 slots) slave\n   replicates {c}\n"
        );
        let layout = parse_create_layout(&out, &[17001, 17002, 17003, 17004, 17005, 17006]);
        assert_eq!(layout.ids, [&a, &b, &c, &d, &e, &f].map(String::clone));
        assert_eq!(layout.plan[1], [(5461, 10922)]);
        assert!(layout.plan[3].is_empty());
        assert_eq!(
            layout.master_of,
            [
                None,
                None,
                None,
                Some(b.clone()),
                Some(c.clone()),
                Some(a.clone())
            ]
        );
    }

    #[test]
    fn cluster_nodes_lines_are_parsed() {
        let (a, b) = ("a".repeat(40), "b".repeat(40));
        let text = format!(
            "{a} 127.0.0.1:17001@27001 master,fail - 1796 1795 1 disconnected\n\
             {b} 127.0.0.1:17004@27004 myself,slave {a} 0 1796 7 connected\n"
        );
        let lines = parse_nodes(&text).unwrap();
        assert!(lines[0].is_master() && lines[0].is_failed() && lines[0].slots.is_empty());
        assert_eq!(lines[0].link, "disconnected");
        assert!(lines[1].is_myself() && lines[1].is_replica());
        assert_eq!(lines[1].role(), Some(Role::Replica(a.clone())));
        assert!(parse_nodes("abc master").is_err());
    }

    #[test]
    fn replicas_and_replication_are_masked() {
        let n = norm();
        let (a, b) = ("a".repeat(40), "b".repeat(40));
        let line = format!("{b} 127.0.0.1:17002@27002 slave {a} 0 1796279458000 1 connected");
        let reply = format!("*1\r\n${}\r\n{line}\r\n", line.len());
        assert_eq!(
            n.replicas(reply.as_bytes()),
            "array of 1:\nnode1 127.0.0.1:port1@busport1 slave node0 <time> <time> <epoch> \
             connected"
        );
        assert_eq!(
            n.replicas(b"-ERR The specified node is not a master\r\n"),
            "-ERR The specified node is not a master"
        );
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:1\r\n\
                    slave0:ip=127.0.0.1,port=17002,state=online,offset=42,lag=0\r\n\
                    master_repl_offset:42\r\n";
        assert_eq!(
            n.replication(info),
            "role:master\nconnected_slaves:1\nslave0:ip=127.0.0.1,port=port1,state=online"
        );
    }

    #[test]
    fn check_blocks_are_sorted() {
        let n = norm();
        let (a, b, c) = ("a".repeat(40), "b".repeat(40), "c".repeat(40));
        let out = format!(
            "127.0.0.1:17003 (cccccccc...) -> 0 keys | 5461 slots | 0 slaves.\n\
             127.0.0.1:17001 (aaaaaaaa...) -> 0 keys | 5461 slots | 1 slaves.\n\
             >>> Performing Cluster Check (using node 127.0.0.1:17002)\n\
             S: {b} 127.0.0.1:17002\n   slots: (0 slots) slave\n   replicates {a}\n\
             M: {c} 127.0.0.1:17003\n   slots:[1-2] (2 slots) master\n\
             M: {a} 127.0.0.1:17001\n   slots:[0] (1 slots) master\n   1 additional replica(s)\n\
             [OK] All 16384 slots covered.\n"
        );
        assert_eq!(
            n.check(&out),
            "127.0.0.1:port0 (node0...) -> 0 keys | 5461 slots | 1 slaves.\n\
             127.0.0.1:port2 (node2...) -> 0 keys | 5461 slots | 0 slaves.\n\
             >>> Performing Cluster Check (using node 127.0.0.1:port1)\n\
             S: node1 127.0.0.1:port1\n   slots: (0 slots) slave\n   replicates node0\n\
             M: node0 127.0.0.1:port0\n   slots:[0] (1 slots) master\n   1 additional replica(s)\n\
             M: node2 127.0.0.1:port2\n   slots:[1-2] (2 slots) master\n\
             [OK] All 16384 slots covered."
        );
    }

    #[test]
    fn poll_returns_the_first_success_or_the_last_reason() {
        let mut n = 0;
        let got = poll(Duration::from_secs(5), Duration::from_millis(1), || {
            n += 1;
            if n == 3 {
                Ok(n)
            } else {
                Err(format!("try {n}"))
            }
        });
        assert_eq!(got.map(|(v, _)| v), Ok(3));
        let never: Result<((), Duration), String> =
            poll(Duration::from_millis(20), Duration::from_millis(5), || {
                Err("no".to_string())
            });
        assert!(never.unwrap_err().ends_with(": no"));
    }

    #[test]
    fn ansi_colours_are_removed() {
        assert_eq!(
            strip_ansi("\x1b[32;1m[OK] All 16384 slots covered.\n\x1b[0m"),
            "[OK] All 16384 slots covered.\n"
        );
    }
}
