//! Questions a connection asks every worker, and the answers it gathers: what a command
//! about connections needs when they live on other threads (CLIENT UNBLOCK, CLIENT LIST,
//! CLIENT KILL). The command is an [`Exec::AskWorkers`]: its `ask` runs on every
//! worker with a [`WorkerView`] and answers bytes; once every worker has answered, its
//! `gather` runs on the asking connection and replies. The connection waits meanwhile,
//! like for any other work in flight.
//!
//! [`Exec::AskWorkers`]: crate::table::handler::Exec::AskWorkers

use crate::runtime::client::Client;
use crate::runtime::worker::Worker;
use crate::shard::Outgoing;
use crate::table::handler::Args;
use crate::txn::coordinator::Env;

/// What one worker shows of itself to a question.
pub struct WorkerView<'a> {
    worker: &'a mut Worker,
    /// The connection that asks.
    asker: crate::runtime::msg::ConnRef,
    /// Messages produced (unblocking a job may release locks on other shards).
    out: Vec<Outgoing>,
    /// Jobs that finished while answering, to write to their connections afterwards.
    finished: Vec<(usize, crate::txn::plan::Outcome)>,
}

impl<'a> WorkerView<'a> {
    pub(crate) fn new(worker: &'a mut Worker, asker: crate::runtime::msg::ConnRef) -> Self {
        WorkerView {
            worker,
            asker,
            out: Vec::new(),
            finished: Vec::new(),
        }
    }

    /// The shared state.
    pub fn shared(&self) -> &crate::runtime::server::Shared {
        &self.worker.shared
    }

    /// The clients connected to this worker.
    pub fn clients(&self) -> impl Iterator<Item = &Client> {
        self.worker
            .conns
            .iter()
            .filter(|(_, c)| !c.gone)
            .map(|(_, c)| &c.client)
    }

    /// Brings what each client's connection holds up to date in its client state
    /// (CLIENT LIST shows it), once clients over `maxmemory-clients` are evicted; the
    /// asker's query buffer and arguments hold `asking` (the command it runs), as
    /// redis-server's still do.
    pub fn refresh_facts(&mut self, asking: &Args<'_>) {
        // Clients past their output limit are closed first, and those over
        // `maxmemory-clients` evicted, as Redis does before it runs the next command.
        let keys: Vec<usize> = self.worker.conns.iter().map(|(key, _)| key).collect();
        for &key in &keys {
            self.worker.past_output_limit(key);
        }
        self.worker.weigh_clients();
        for key in keys {
            let blocked = self.worker.blocked_in_a_wait(key);
            if let Some(conn) = self.worker.conns.get_mut(key) {
                conn.client.facts = conn.facts(blocked);
                if self.asker.worker == self.worker.id && self.asker.key == key {
                    conn.client.facts.qbuf += asking.resp_len();
                    // And its arguments, in `argv-mem` and `tot-mem` (Redis's
                    // `argv_len_sum`, and the array of their pointers).
                    let argv: usize = asking.iter_from(0).map(<[u8]>::len).sum();
                    conn.client.facts.argv_mem = argv;
                    conn.client.facts.tot_mem += argv + size_of::<usize>() * asking.len();
                }
            }
        }
    }

    /// Ends CLIENT PAUSE; this worker's paused clients go on in its next iteration.
    pub fn unpause(&mut self) {
        self.worker.shared.pause.unpause();
    }

    /// This worker's clock (the time of its loop iteration).
    pub fn now(&self) -> goblin_store::Millis {
        self.worker.now
    }

    /// Whether `client` is the connection that asks.
    pub fn is_asker(&self, client: &Client) -> bool {
        self.asker.worker == self.worker.id
            && self
                .worker
                .conns
                .get(self.asker.key)
                .is_some_and(|c| c.client.id == client.id)
    }

    /// Closes the clients `which` picks (CLIENT KILL): as if they had disconnected, once
    /// what they have in flight has answered. Returns how many.
    pub fn kill_clients(&mut self, mut which: impl FnMut(&Self, &Client) -> bool) -> usize {
        let keys: Vec<usize> = self
            .worker
            .conns
            .iter()
            .filter(|(_, c)| !c.gone && which(self, &c.client))
            .map(|(key, _)| key)
            .collect();
        for &key in &keys {
            match self.worker.conns.get_mut(key) {
                // The master's client: its link drops the master's connection (and
                // connects again), as redis-server drops its master link.
                Some(conn) if conn.client.master => self.worker.shared.follow.drop_link(),
                // The asker itself (SKIPME no) is answered first, then closed, as Redis
                // closes it after the reply.
                Some(conn) if self.asker.worker == self.worker.id && self.asker.key == key => {
                    conn.client.close_after_reply = true;
                }
                _ => self.worker.close(key),
            }
        }
        keys.len()
    }

    /// Unblocks the client with this id if it is blocked here (a parked plan): as if its
    /// wait timed out, or with `error` as its reply. False when no such client is blocked
    /// here (or a shard served it first).
    pub fn unblock_client(&mut self, id: u64, error: Option<&[u8]>) -> bool {
        let found = self
            .worker
            .conns
            .iter()
            .find(|(_, c)| c.client.id == id && !c.gone)
            .and_then(|(key, c)| c.job.map(|seq| (key, seq)));
        let Some((key, seq)) = found else {
            return false;
        };
        let Some(mut job) = self.worker.jobs.remove(&seq) else {
            return false;
        };
        let env = Env {
            shared: &self.worker.shared,
            slots: self.worker.shard.slots(),
            now: self.worker.now,
        };
        let was = job.parked_state();
        let result = job.unblock(error, &env, &mut self.out);
        self.worker.note_blocked(was, job.parked_state());
        match result {
            None => {
                self.worker.jobs.insert(seq, job);
                false
            }
            Some(Some(outcome)) => {
                self.worker.log_job(key, job.take_timing(), &outcome);
                self.finished.push((key, outcome));
                true
            }
            Some(None) => {
                self.worker.jobs.insert(seq, job);
                true
            }
        }
    }

    /// What answering produced: messages to route, finished jobs to write.
    pub(crate) fn finish(self) -> (Vec<Outgoing>, Vec<(usize, crate::txn::plan::Outcome)>) {
        (self.out, self.finished)
    }
}
