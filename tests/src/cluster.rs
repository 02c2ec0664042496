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
//! - Node `i` is the `i`-th by port, so that two clusters built the same way have their
//!   nodes in the same order: `redis-cli` deals the slots to the nodes in the order it is
//!   given them ([`Cluster::plan_owner`] is that deal, read from its output, not asked of
//!   the nodes under test).
//! - [`Norm`] and [`Transcript`]: replies rendered as text with what legitimately differs
//!   between two clusters masked — node ids become `node<i>`, ports `port<i>` and
//!   `busport<i>`, epochs, timestamps and counters `<…>` — so that a goblin-server
//!   cluster's transcript can be compared with a redis-server cluster's entry by entry.
//! - [`run_on`]: a scenario run on a redis-server cluster alone, or (for goblin-server)
//!   run on both and the transcripts compared: every expected answer comes from the
//!   redis-server run, never from the test.

use std::fmt::Write as _;
use std::fs::File;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
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
/// `nodes.conf`, its log), removed then.
#[derive(Debug)]
pub struct Node {
    child: Child,
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
        // (Found before any directory is made: it panics when the binary is stale.)
        let program = match kind {
            Kind::Goblin => goblin_binary(),
            Kind::Redis => PathBuf::from("redis-server"),
        };
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_cluster_port();
            let dir = scratch_dir("cluster-node");
            let child = match spawn_node(&program, kind, port, &dir) {
                Ok(child) => child,
                Err(message) => {
                    let _ = std::fs::remove_dir_all(&dir);
                    panic!("{message}");
                }
            };
            let mut node = Node { child, port, dir };
            match node.wait_ready(kind) {
                Ok(()) => return node,
                Err(log) if log.contains("in use") => last = log,
                Err(log) => panic!(
                    "{} node on port {port} did not start (arguments: {:?}):\n{log}",
                    kind_name(kind),
                    node_args(kind, port, &node.dir)
                ),
            }
        }
        panic!(
            "{} node: no port pair could be bound in 5 tries; last log:\n{last}",
            kind_name(kind)
        );
    }

    /// Waits until the node answers PING; `Err` with its log when it exits first or
    /// never answers.
    fn wait_ready(&mut self, kind: Kind) -> Result<(), String> {
        let deadline = Instant::now() + NODE_START_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("exited ({status}); its log:\n{}", self.log()));
            }
            if let Ok(mut raw) = Raw::try_connect(self.port)
                && raw.try_send(&crate::encode(&[b"PING"])).is_ok()
                && raw.try_reply().is_ok_and(|r| r == b"+PONG\r\n")
            {
                let info = String::from_utf8_lossy(&raw.cmd(&[b"INFO", b"server"])).into_owned();
                // A server that another test started on the port since it was found free
                // answers too: only this node's own process will do.
                if info_field(&info, "process_id") != Some(self.child.id().to_string().as_str()) {
                    return Err(format!(
                        "port in use: another server (process {:?}) answers on {}",
                        info_field(&info, "process_id"),
                        self.port
                    ));
                }
                if kind == Kind::Redis
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

    /// Its log (its standard output and error).
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

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its directory (`nodes.conf`, `node.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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

fn spawn_node(program: &Path, kind: Kind, port: u16, dir: &Path) -> Result<Child, String> {
    let log =
        File::create(dir.join("node.log")).map_err(|e| format!("create a node's log: {e}"))?;
    let err = log
        .try_clone()
        .map_err(|e| format!("clone a log handle: {e}"))?;
    let spawned = Command::new(program)
        .args(node_args(kind, port, dir))
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

/// A running cluster of `n` master nodes (no replicas), every slot assigned. Node `i` is
/// the `i`-th by port. Dropped, it kills every node by pid and removes their directories.
#[derive(Debug)]
pub struct Cluster {
    kind: Kind,
    nodes: Vec<Node>,
    ids: Vec<String>,
    /// `redis-cli --cluster create`'s deal: the slot ranges of each node (by index).
    plan: Vec<Vec<(u16, u16)>>,
    create_output: String,
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
            create_output: String::new(),
        };
        cluster.create();
        cluster.wait_healthy(HEALTHY_TIMEOUT);
        cluster
    }

    fn create(&mut self) {
        let mut command = Command::new("redis-cli");
        command.arg("--cluster").arg("create");
        command.args(self.addrs());
        command.args(["--cluster-replicas", "0", "--cluster-yes"]);
        let out = run_bounded(&mut command, CREATE_TIMEOUT);
        assert!(
            out.success() && out.stdout.contains("[OK] All 16384 slots covered."),
            "redis-cli --cluster create on {} nodes failed:\n{}",
            kind_name(self.kind),
            out.describe()
        );
        self.create_output = out.stdout;
        let (ids, plan) = parse_create_plan(&self.create_output, &self.ports());
        self.ids = ids;
        self.plan = plan;
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

    /// Waits (at most `timeout`) until `redis-cli --cluster check` is clean
    /// ([`check_is_clean`]) and every node answers CLUSTER INFO with `cluster_state:ok`,
    /// `cluster_slots_assigned:16384` and `cluster_known_nodes:<n>`.
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
            let infos: Vec<String> = (0..self.len()).map(|i| self.cluster_info(i)).collect();
            let n = self.len().to_string();
            let nodes_ok = infos.iter().all(|info| {
                info_field(info, "cluster_state") == Some("ok")
                    && info_field(info, "cluster_slots_assigned") == Some("16384")
                    && info_field(info, "cluster_known_nodes") == Some(n.as_str())
            });
            if check_is_clean(&out) && nodes_ok {
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
                for (i, info) in infos.iter().enumerate() {
                    let _ = writeln!(msg, "node {i} CLUSTER INFO:\n{info}");
                }
                return Err(msg);
            }
            std::thread::sleep(Duration::from_millis(250));
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

    /// `redis-cli --cluster check` on node 0, with its exit status.
    pub fn check_output(&self) -> Output {
        let mut command = Command::new("redis-cli");
        command.args(["--cluster", "check", &self.addr(0)]);
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
    let mut ids = vec![String::new(); ports.len()];
    let mut plan = vec![Vec::new(); ports.len()];
    let mut seen = vec![false; ports.len()];
    let lines: Vec<&str> = out.lines().collect();
    for (n, line) in lines.iter().enumerate() {
        let Some(rest) = line.trim().strip_prefix("M: ") else {
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
        // The first listing of each node is the plan (a later one is the check's).
        if seen[i] {
            continue;
        }
        seen[i] = true;
        ids[i] = id.to_string();
        if let Some(slots) = lines
            .get(n + 1)
            .and_then(|l| l.trim().strip_prefix("slots:"))
        {
            let ranges = slots.split_whitespace().next().unwrap_or("");
            for range in ranges.split(',') {
                let range = range.trim_matches(['[', ']']);
                let parsed = match range.split_once('-') {
                    Some((a, b)) => a.parse().ok().zip(b.parse().ok()),
                    None => range.parse().ok().map(|a| (a, a)),
                };
                if let Some(r) = parsed {
                    plan[i].push(r);
                }
            }
        }
    }
    assert!(
        seen.iter().all(|&s| s),
        "redis-cli --cluster create did not list every node ({ports:?}):\n{out}"
    );
    let covered: usize = plan
        .iter()
        .flatten()
        .map(|&(a, b)| usize::from(b) - usize::from(a) + 1)
        .sum();
    assert_eq!(
        covered, SLOTS,
        "redis-cli's plan does not cover the slots:\n{out}"
    );
    (ids, plan)
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
        let mut lines: Vec<String> = text
            .lines()
            .map(|line| {
                let mut fields: Vec<String> = line.split(' ').map(|f| self.text(f)).collect();
                for (n, mask) in [(4, "<time>"), (5, "<time>"), (6, "<epoch>")] {
                    if let Some(f) = fields.get_mut(n) {
                        *f = mask.to_string();
                    }
                }
                fields.join(" ")
            })
            .collect();
        lines.sort();
        format!(
            "bulk, ends with newline: {}\n{}",
            text.ends_with('\n'),
            lines.join("\n")
        )
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
    match kind {
        Kind::Redis => {
            let redis = Cluster::start(Kind::Redis, n);
            let transcript = scenario(&redis);
            // Shown with `--nocapture`: what goblin-server's run is compared with.
            eprintln!("--- redis-server's transcript ---\n{}", transcript.text());
        }
        Kind::Goblin => {
            let goblin = Cluster::start(Kind::Goblin, n);
            let want = {
                let redis = Cluster::start(Kind::Redis, n);
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
        let (a, b) = ("a".repeat(40), "b".repeat(40));
        let text = format!(
            "{b} 127.0.0.1:17002@27002 master - 0 1796279458000 2 connected 5461-10922\n\
             {a} 127.0.0.1:17001@27001 myself,master - 0 1796279457000 1 connected 0-5460\n"
        );
        let reply = crate::reply::bulk(text.as_bytes());
        assert_eq!(
            n.nodes(&reply),
            "bulk, ends with newline: true\n\
             node0 127.0.0.1:port0@busport0 myself,master - <time> <time> <epoch> connected \
             0-5460\n\
             node1 127.0.0.1:port1@busport1 master - <time> <time> <epoch> connected 5461-10922"
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
    fn ansi_colours_are_removed() {
        assert_eq!(
            strip_ansi("\x1b[32;1m[OK] All 16384 slots covered.\n\x1b[0m"),
            "[OK] All 16384 slots covered.\n"
        );
    }
}
