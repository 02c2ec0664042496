//! What the unit tests of the shard and the coordinator share: a [`Shared`] state, owned
//! commands, and [`Loopback`], a set of shards and one coordinator exchanging their
//! messages in-process, in order, so that plans run as state machines with no threads.

use std::collections::VecDeque;
use std::ops::Range;

use goblin_protocol::{Encoder, Version};
use goblin_store::Millis;

use crate::runtime::msg::{Batch, ConnRef, LockMode, Msg, TxRef};
use crate::runtime::server::Shared;
use crate::shard::Shard;
use crate::table::CommandTable;
use crate::table::handler::Args;
use crate::txn::coordinator::{Env, TxJob};
use crate::txn::plan::{Outcome, Plan, PlanStart};

/// A fixed clock for the tests (late 2023), far from zero so expiries are realistic.
pub const NOW: Millis = 1_700_000_000_000;

/// The shared state of a server with `threads` shards.
pub fn shared(threads: usize) -> Shared {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    Shared::build(
        crate::config::Config {
            threads,
            // No `save` rules: a FLUSHALL run here would write dump.rdb in the crate.
            persist: crate::config::PersistConfig {
                save: Vec::new(),
                ..Default::default()
            },
            ..Default::default()
        },
        addr,
    )
    .map(|(s, _)| s)
    .unwrap_or_else(|e| panic!("{e}"))
}

/// A command's arguments, owned: `Cmd::new(&[b"SET", b"k", b"v"]).args()`.
pub struct Cmd {
    data: Vec<u8>,
    spans: Vec<Range<usize>>,
}

impl Cmd {
    /// The command `argv`.
    pub fn new(argv: &[&[u8]]) -> Cmd {
        let mut data = Vec::new();
        let mut spans = Vec::new();
        for a in argv {
            let start = data.len();
            data.extend_from_slice(a);
            spans.push(start..data.len());
        }
        Cmd { data, spans }
    }

    /// Its arguments.
    pub fn args(&self) -> Args<'_> {
        Args::new(&self.data, &self.spans)
    }
}

/// A batch of commands, resolved in `table`.
pub fn batch(table: &CommandTable, cmds: &[&[&[u8]]]) -> Box<Batch> {
    let mut b = Box::<Batch>::default();
    for argv in cmds {
        let cmd = Cmd::new(argv);
        let spec = table.resolve(&cmd.args()).map(|s| s.id).unwrap_or(0);
        b.push(spec, &cmd.args());
    }
    b
}

/// Shards and one coordinating worker (number 0), wired in-process.
pub struct Loopback {
    /// The shared state.
    pub shared: Shared,
    /// The shards, by id.
    pub shards: Vec<Shard>,
    /// Messages not yet delivered: (destination, message).
    pub queue: VecDeque<(usize, Msg)>,
    /// Batches that came back to their connection.
    pub done: Vec<(ConnRef, Box<Batch>)>,
    /// Wake-ups that reached the coordinator.
    pub woken: usize,
    jobs: std::collections::HashMap<u64, TxJob>,
    outcomes: std::collections::HashMap<u64, Outcome>,
    next_seq: u64,
    /// Pub/Sub state of the in-process connection (publications go nowhere).
    subs: crate::runtime::pubsub::Local,
    publications: crate::runtime::pubsub::Outbound,
}

impl Loopback {
    /// `threads` empty shards.
    pub fn new(threads: usize) -> Loopback {
        let shared = shared(threads);
        let shards = (0..threads)
            .map(|id| {
                Shard::new(
                    id,
                    std::sync::Arc::clone(&shared.slots),
                    shared.commands.all().len(),
                    shared.config.databases,
                )
            })
            .collect();
        Loopback {
            shared,
            shards,
            queue: VecDeque::new(),
            done: Vec::new(),
            woken: 0,
            jobs: std::collections::HashMap::new(),
            outcomes: std::collections::HashMap::new(),
            next_seq: 0,
            subs: Default::default(),
            publications: Default::default(),
        }
    }

    /// A fresh client (id 1) of the default user, as a new connection gets one.
    pub fn client(&self) -> crate::runtime::client::Client {
        crate::runtime::client::Client::new(
            1,
            crate::runtime::net::Origin::None,
            NOW,
            self.shared.acl.default_user(),
        )
    }

    /// Empties everything — fresh shards, no message or job, the start-up configuration
    /// live again — keeping the shared state (building the command table is the costly
    /// part of [`Loopback::new`]).
    pub fn reset(&mut self) {
        let shared = &self.shared;
        for (id, shard) in self.shards.iter_mut().enumerate() {
            *shard = Shard::new(
                id,
                std::sync::Arc::clone(&shared.slots),
                shared.commands.all().len(),
                shared.config.databases,
            );
        }
        shared.set_live(shared.config.clone());
        self.queue.clear();
        self.done.clear();
        self.jobs.clear();
        self.outcomes.clear();
    }

    /// Runs one command on the shard that owns its first key (or shard 0), as a local
    /// command would run there; its reply in RESP2.
    pub fn exec(&mut self, argv: &[&[u8]]) -> Vec<u8> {
        let cmd = Cmd::new(argv);
        let args = cmd.args();
        let Ok(spec) = self.shared.commands.resolve(&args) else {
            panic!("unknown {argv:?}");
        };
        let mut shard = 0;
        spec.for_each_key_position(&args, |i| {
            shard = self.shared.slots.shard_of_key(args.get(i))
        });
        let mut out = Vec::new();
        let version = self.shared.slots.version();
        self.shards[shard].execute(
            &self.shared,
            spec,
            &args,
            0,
            NOW,
            &mut out,
            Version::Resp2,
            None,
            version,
        );
        self.collect(shard);
        self.deliver();
        out
    }

    /// Runs any command as the pipeline would route it — a connection command on a
    /// client of its own, a shard command on its keys' shard or as its plan across
    /// shards, a keyspace-wide command as its plan — and a plan that waits (a blocking
    /// command) until its timeout; its reply, or the rejection. Commands that would
    /// touch the process or its files (SHUTDOWN, SAVE, BGSAVE, BGREWRITEAOF, DEBUG,
    /// MULTI's) answer an error instead.
    pub fn run_any(
        &mut self,
        client: &mut crate::runtime::client::Client,
        argv: &[&[u8]],
    ) -> Vec<u8> {
        use crate::table::handler::{ConnCtx, Exec};
        let cmd = Cmd::new(argv);
        let args = cmd.args();
        let mut out = Vec::new();
        let spec = match self.shared.commands.resolve(&args) {
            Ok(spec) => spec,
            Err(rejection) => {
                Encoder::new(&mut out, Version::Resp2).error_sanitized(&rejection.message);
                return out;
            }
        };
        if matches!(
            spec.name,
            "shutdown" | "save" | "bgsave" | "bgrewriteaof" | "debug"
        ) {
            Encoder::new(&mut out, Version::Resp2).error(b"ERR not run in-process");
            return out;
        }
        match spec.exec {
            Exec::Conn(f) => {
                f(
                    &mut ConnCtx {
                        client,
                        shared: &self.shared,
                        out: &mut out,
                        hub: crate::table::handler::Hub::new(
                            &mut self.subs,
                            &mut self.publications,
                            0,
                            0,
                            0,
                        ),
                        now: NOW,
                    },
                    &args,
                );
                out
            }
            Exec::Shard(_) => {
                let mut shards = Vec::new();
                spec.for_each_key_position(&args, |i| {
                    shards.push(self.shared.slots.shard_of_key(args.get(i)));
                });
                let one = shards.windows(2).all(|w| w[0] == w[1]);
                if one && spec.plan_if.is_none_or(|when| !when(&self.shared, &args)) {
                    return self.exec(argv);
                }
                self.plan_to_end(argv)
            }
            Exec::Plan(_) => self.plan_to_end(argv),
            Exec::Multi(_) | Exec::AskWorkers { .. } | Exec::Container => {
                Encoder::new(&mut out, Version::Resp2).error(b"ERR not run in-process");
                out
            }
        }
    }

    /// [`Loopback::plan`], timing the plan out if it waits.
    fn plan_to_end(&mut self, argv: &[&[u8]]) -> Vec<u8> {
        if let Some(reply) = self.plan(argv) {
            return reply;
        }
        self.time_out();
        self.reply().unwrap_or_default()
    }

    /// Starts `plan` (locking `locks` first) and delivers messages until it finishes or
    /// nothing moves; its reply, if it finished.
    pub fn start(
        &mut self,
        plan: Box<dyn Plan>,
        locks: Vec<(Vec<u8>, LockMode)>,
    ) -> Option<Vec<u8>> {
        self.start_job(plan, locks);
        self.reply()
    }

    /// Starts `plan` (locking `locks` first) and delivers messages until nothing moves;
    /// the job's number, for [`Loopback::reply_of`].
    pub fn start_job(&mut self, plan: Box<dyn Plan>, locks: Vec<(Vec<u8>, LockMode)>) -> u64 {
        self.next_seq += 1;
        let seq = self.next_seq;
        let tx = TxRef { worker: 0, seq };
        let mut job = TxJob::new(
            tx,
            0,
            &self.shared.slots,
            locks,
            false,
            plan,
            Version::Resp2,
            0,
        );
        let mut out = Vec::new();
        let env = Env {
            shared: &self.shared,
            slots: &self.shared.slots,
            now: NOW,
        };
        if let Some(o) = job.start(&env, &mut out) {
            self.outcomes.insert(seq, o);
        }
        self.queue.extend(out);
        self.jobs.insert(seq, job);
        self.deliver();
        seq
    }

    /// Job `seq`'s reply (in RESP2), taken, if it finished.
    pub fn reply_of(&mut self, seq: u64) -> Option<Vec<u8>> {
        match self.outcomes.remove(&seq)? {
            Outcome::Reply(r) => Some(r),
            other => panic!("unexpected outcome {other:?}"),
        }
    }

    /// Gives up job `seq` as a worker does when its connection closes; true when it was
    /// cancelled at once.
    pub fn cancel(&mut self, seq: u64) -> bool {
        let Some(job) = self.jobs.get_mut(&seq) else {
            return false;
        };
        let mut out = Vec::new();
        let cancelled = job.cancel(&self.shared, &mut out);
        self.queue.extend(out);
        self.deliver();
        cancelled
    }

    /// The command `argv`'s own cross-shard plan, run to its end (its locks as the
    /// pipeline would take them); its reply.
    pub fn plan(&mut self, argv: &[&[u8]]) -> Option<Vec<u8>> {
        let cmd = Cmd::new(argv);
        let args = cmd.args();
        let Ok(spec) = self.shared.commands.resolve(&args) else {
            panic!("unknown {argv:?}");
        };
        let Some(cross) = spec.plan() else {
            panic!("{} has no plan", spec.name);
        };
        let start = PlanStart {
            shared: &self.shared,
            spec,
            args: &args,
            slots: &self.shared.slots,
            now: NOW,
            locked: false,
            db: 0,
            databases: self.shared.config.databases,
            local_client: true,
            by_script: false,
            client: None,
            conn: None,
            master: false,
            caller: None,
        };
        let plan = match (cross.plan)(&start) {
            Ok(plan) => plan,
            Err(e) => {
                let mut out = Vec::new();
                Encoder::new(&mut out, Version::Resp2).error(&e);
                return Some(out);
            }
        };
        let locks = match cross.locking {
            crate::txn::plan::Locking::Keys => spec.lock_needs(&args),
            _ => Vec::new(),
        };
        self.start(plan, locks)
    }

    /// The latest job's reply (in RESP2), taken, if it finished.
    pub fn reply(&mut self) -> Option<Vec<u8>> {
        self.reply_of(self.next_seq)
    }

    /// Whether the latest job is still running (parked, or waiting for a lock).
    pub fn running(&self) -> bool {
        self.jobs.contains_key(&self.next_seq) && !self.outcomes.contains_key(&self.next_seq)
    }

    /// Times the latest job out, as its worker would once its deadline passed.
    pub fn time_out(&mut self) {
        let seq = self.next_seq;
        let Some(job) = self.jobs.get_mut(&seq) else {
            return;
        };
        let mut out = Vec::new();
        let env = Env {
            shared: &self.shared,
            slots: &self.shared.slots,
            now: NOW,
        };
        if let Some(o) = job.on_timeout(&env, &mut out) {
            self.outcomes.insert(seq, o);
        }
        self.queue.extend(out);
        self.deliver();
    }

    fn collect(&mut self, shard: usize) {
        if self.shards[shard].has_wakes() {
            self.shards[shard].serve_wakes(&self.shared);
        }
        let out = self.shards[shard].take_out();
        self.queue.extend(out);
    }

    /// Delivers messages until none is left.
    pub fn deliver(&mut self) {
        while let Some((dest, msg)) = self.queue.pop_front() {
            let env = Env {
                shared: &self.shared,
                slots: &self.shared.slots,
                now: NOW,
            };
            let mut out = Vec::new();
            match msg {
                Msg::Run(from, batch) => self.shards[dest].run_batch(&self.shared, from, batch),
                Msg::Resume(from, budget) => self.shards[dest].resume(&self.shared, from, budget),
                Msg::Step(step) => self.shards[dest].step(&self.shared, step),
                Msg::Park(req) => self.shards[dest].park(&self.shared, req),
                Msg::Unpark(tx, id) => self.shards[dest].unpark(tx, id),
                Msg::Reserve(db, key) => self.shards[dest].serve_key(db, &key),
                Msg::Slots(map) => self.shards[dest].set_slots(map),
                Msg::Done(to, batch) => self.done.push((to, batch)),
                Msg::Replies(..)
                | Msg::Adopt(..)
                | Msg::AdoptMaster(..)
                | Msg::Monitor(..)
                | Msg::ReplWake
                | Msg::DropReplicas(_)
                | Msg::Ask(..)
                | Msg::Answer(..)
                | Msg::Load(..)
                | Msg::Loaded
                | Msg::Publish(..)
                | Msg::Shutdown
                | Msg::Sleep(_) => {}
                Msg::StepDone(done) => {
                    let seq = done.tx.seq;
                    if done.index == crate::txn::coordinator::WOKEN {
                        self.woken += 1;
                    }
                    if let Some(job) = self.jobs.get_mut(&seq)
                        && let Some(o) = job.on_done(done, &env, &mut out)
                    {
                        self.outcomes.insert(seq, o);
                    }
                }
                Msg::Woken(tx, id, key) => {
                    self.woken += 1;
                    if let Some(job) = self.jobs.get_mut(&tx.seq)
                        && let Some(o) = job.on_woken(id, key, &env, &mut out)
                    {
                        self.outcomes.insert(tx.seq, o);
                    }
                }
            }
            self.queue.extend(out);
            if dest < self.shards.len() {
                self.collect(dest);
            }
        }
    }

    /// True when no shard holds or wants a lock, and no plan waits on any.
    pub fn all_quiet(&self) -> bool {
        self.shards.iter().all(|s| s.quiet() && !s.has_parked())
    }

    /// Two keys owned by different shards (0 and 1).
    pub fn keys_on_two_shards(&self) -> (Vec<u8>, Vec<u8>) {
        let find = |shard: usize| {
            (0..)
                .map(|i| format!("key:{i}").into_bytes())
                .find(|k| self.shared.slots.shard_of_key(k) == shard)
                .unwrap_or_default()
        };
        (find(0), find(1))
    }
}
