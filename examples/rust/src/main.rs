//! A worker on Goblin's claims, with the `redis` crate.
//!
//! [`process`] runs one job at most once across any number of workers:
//!
//! 1. `GOBLIN.CLAIM claim_key result_key token lease BLOCK ms` — the first worker gets
//!    `CLAIMED`; a worker that comes after the job is done gets its result; a worker that
//!    comes while it runs waits on the server (no polling) until the result is published,
//!    or until the claim is released and it is its turn to take the job.
//! 2. While working, a [`LeaseKeeper`] thread extends the lease with
//!    `GOBLIN.RENEW claim_key token lease`, so that work longer than the lease keeps its
//!    claim, and a crashed worker (which renews nothing) loses it within one lease.
//! 3. On failure, `GOBLIN.CAD claim_key token` releases the claim: the worker that has
//!    waited longest gets `CLAIMED` at once, instead of when the lease runs out.
//! 4. On success, `GOBLIN.PUBLISH claim_key result_key token value ttl` stores the result
//!    only if the claim still holds this worker's token (0 means the lease was lost and
//!    someone else owns the job), and keeps the claim as long as the result.
//!
//! Run against a live server, it checks itself and exits non-zero when a check fails:
//!
//! ```sh
//! cargo run -p goblin-example-worker -- --port 6379
//! ```

use std::error::Error;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Barrier};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::{Client, Connection, RedisResult};

/// The claim's lease: how long a worker that stops renewing (it crashed) keeps the job
/// from the others. Short here so that the checks run in seconds.
const LEASE_SECS: u64 = 2;

/// How often the keeper renews the lease: three times per lease, so that one slow round
/// trip does not lose it.
const RENEW_EVERY: Duration = Duration::from_millis(LEASE_SECS * 1000 / 3);

/// How long a published result answers duplicates (and the claim stays held).
const RESULT_TTL_SECS: u64 = 24 * 3600;

/// How long one GOBLIN.CLAIM waits for the result or the claim before it answers nil
/// (and the worker asks again).
const BLOCK_MS: u64 = 10_000;

/// The reply to a won claim.
const CLAIMED: &str = "CLAIMED";

/// A job's two keys. One hash tag, so both live on one shard, where each command costs
/// what a SET costs.
struct Job {
    claim_key: String,
    result_key: String,
}

impl Job {
    fn new(id: &str) -> Job {
        Job {
            claim_key: format!("job:{{{id}}}:claim"),
            result_key: format!("job:{{{id}}}:result"),
        }
    }
}

/// How [`process`] ended for one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// This worker did the job and published `value`.
    Published {
        /// The result.
        value: String,
        /// How many times the keeper extended the lease meanwhile.
        renewals: u32,
    },
    /// Another worker had done the job: its result.
    AlreadyDone(String),
    /// The work failed; `released` tells whether GOBLIN.CAD gave the claim back (false:
    /// the lease had already been lost).
    Failed {
        /// Why the work failed.
        why: String,
        /// GOBLIN.CAD answered 1.
        released: bool,
    },
    /// The lease ran out while working: GOBLIN.RENEW or GOBLIN.PUBLISH answered 0, and
    /// this worker's result was not stored.
    LostLease,
}

/// Keeps a lease alive from a thread of its own (with its own connection) while the
/// worker works: renews it every [`RENEW_EVERY`] until stopped, and raises
/// [`LeaseKeeper::lost`] if a renewal answers 0 (the claim is no longer this worker's).
struct LeaseKeeper {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<RedisResult<u32>>>,
    lost: Arc<AtomicBool>,
}

impl LeaseKeeper {
    fn start(client: &Client, job: &Job, token: &str) -> RedisResult<LeaseKeeper> {
        let mut con = client.get_connection()?;
        let (stop, stopped) = mpsc::channel::<()>();
        let lost = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&lost);
        let (key, token) = (job.claim_key.clone(), token.to_owned());
        let thread = thread::spawn(move || {
            let mut renewals = 0;
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(RENEW_EVERY) {
                let renewed: i64 = redis::cmd("GOBLIN.RENEW")
                    .arg(&key)
                    .arg(&token)
                    .arg(LEASE_SECS)
                    .query(&mut con)?;
                if renewed == 0 {
                    flag.store(true, Ordering::SeqCst);
                    break;
                }
                renewals += 1;
            }
            Ok(renewals)
        });
        Ok(LeaseKeeper {
            stop: Some(stop),
            thread: Some(thread),
            lost,
        })
    }

    /// Whether a renewal found the claim gone or taken: stop working, the job is not
    /// ours any more.
    fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Stops renewing and returns how many renewals were made. Call it before
    /// publishing: a renewal after GOBLIN.PUBLISH would cut the claim's expiry back from
    /// the result's TTL to one lease.
    fn stop(mut self) -> RedisResult<u32> {
        drop(self.stop.take());
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(renewals)) => renewals,
            Some(Err(_)) => Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "the lease keeper panicked",
            ))),
            None => Ok(0),
        }
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The work itself, simulated: `steps` steps of `step` each, failing at step `fail_at`.
/// Counts how often it started, so the checks can tell whether the job ran once.
struct Work {
    steps: u32,
    step: Duration,
    fail_at: Option<u32>,
    started: Arc<AtomicU32>,
}

impl Work {
    /// Does the work, checking between steps that the lease is still ours.
    fn run(&self, worker: &str, lease: &LeaseKeeper) -> Result<String, String> {
        let run = self.started.fetch_add(1, Ordering::SeqCst) + 1;
        for step in 0..self.steps {
            if lease.lost() {
                return Err("lease lost".to_owned());
            }
            if self.fail_at == Some(step) {
                return Err(format!("step {step} failed"));
            }
            thread::sleep(self.step);
        }
        Ok(format!("report by {worker} (run {run})"))
    }
}

/// When [`process`] crossed the points the checks time.
#[derive(Debug, Default, Clone, Copy)]
struct Times {
    claimed: Option<Instant>,
    released: Option<Instant>,
}

/// One worker's attempt at one job: claim (waiting on the server while another worker
/// holds it), work while renewing the lease, then publish, or release on failure.
fn process(client: &Client, worker: &str, job: &Job, work: &Work) -> RedisResult<(Outcome, Times)> {
    let mut con: Connection = client.get_connection()?;
    let token = unique_token(worker);
    let mut times = Times::default();
    loop {
        let reply: Option<String> = redis::cmd("GOBLIN.CLAIM")
            .arg(&job.claim_key)
            .arg(&job.result_key)
            .arg(&token)
            .arg(LEASE_SECS)
            .arg("BLOCK")
            .arg(BLOCK_MS)
            .query(&mut con)?;
        match reply.as_deref() {
            // Still running elsewhere after BLOCK_MS: wait again.
            None => continue,
            Some(CLAIMED) => break,
            Some(value) => return Ok((Outcome::AlreadyDone(value.to_owned()), times)),
        }
    }
    times.claimed = Some(Instant::now());

    let keeper = LeaseKeeper::start(client, job, &token)?;
    let result = work.run(worker, &keeper);
    let lost = keeper.lost();
    let renewals = keeper.stop()?;
    let outcome = match result {
        Ok(_) if lost => Outcome::LostLease,
        Ok(value) => {
            let published: i64 = redis::cmd("GOBLIN.PUBLISH")
                .arg(&job.claim_key)
                .arg(&job.result_key)
                .arg(&token)
                .arg(&value)
                .arg(RESULT_TTL_SECS)
                .query(&mut con)?;
            if published == 1 {
                Outcome::Published { value, renewals }
            } else {
                Outcome::LostLease
            }
        }
        Err(why) => {
            // Give the job back now: the longest waiter gets CLAIMED at once. Only our
            // own claim is deleted (0 if the lease was lost meanwhile). (The time is taken
            // as the release is sent: the waiter may have its claim before this worker
            // reads the reply.)
            times.released = Some(Instant::now());
            let released: i64 = redis::cmd("GOBLIN.CAD")
                .arg(&job.claim_key)
                .arg(&token)
                .query(&mut con)?;
            Outcome::Failed {
                why,
                released: released == 1,
            }
        }
    };
    Ok((outcome, times))
}

/// A token no other worker uses: what the fenced commands compare.
fn unique_token(worker: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{worker}:{}:{nanos}", std::process::id())
}

/// Collects failed checks; prints each check as it is made.
#[derive(Default)]
struct Checks {
    failed: u32,
}

impl Checks {
    fn check(&mut self, ok: bool, what: &str) {
        println!("  {} {what}", if ok { "ok  " } else { "FAIL" });
        if !ok {
            self.failed += 1;
        }
    }
}

/// A worker on its own thread, started when `go` is passed, after `delay`.
fn spawn_worker(
    client: &Client,
    go: &Arc<Barrier>,
    delay: Duration,
    worker: &'static str,
    job_id: &str,
    work: Work,
) -> JoinHandle<RedisResult<(Outcome, Times)>> {
    let (client, go, job) = (client.clone(), Arc::clone(go), Job::new(job_id));
    thread::spawn(move || {
        go.wait();
        thread::sleep(delay);
        process(&client, worker, &job, &work)
    })
}

/// Waits for a worker's thread; a panic becomes an error.
fn join(
    handle: JoinHandle<RedisResult<(Outcome, Times)>>,
) -> Result<(Outcome, Times), Box<dyn Error>> {
    Ok(handle.join().map_err(|_| "worker thread panicked")??)
}

/// Work longer than the lease, kept alive by renewals; a duplicate waits for its result
/// instead of taking the job over when the first lease would have run out.
fn check_long_work(client: &Client, checks: &mut Checks, run: &str) -> Result<(), Box<dyn Error>> {
    println!("work of 3 s on a {LEASE_SECS} s lease, renewed; a duplicate waiting:");
    let job_id = format!("{run}-long");
    let started = Arc::new(AtomicU32::new(0));
    let work = || Work {
        steps: 6,
        step: Duration::from_millis(500),
        fail_at: None,
        started: Arc::clone(&started),
    };
    let go = Arc::new(Barrier::new(2));
    let t0 = Instant::now();
    let first = spawn_worker(client, &go, Duration::ZERO, "worker-1", &job_id, work());
    let second = spawn_worker(
        client,
        &go,
        Duration::from_millis(200),
        "worker-2",
        &job_id,
        work(),
    );
    let (first, _) = join(first)?;
    let (second, _) = join(second)?;
    let waited = t0.elapsed();

    let Outcome::Published { value, renewals } = &first else {
        checks.check(false, &format!("worker-1 published (got {first:?})"));
        return Ok(());
    };
    checks.check(
        true,
        &format!("worker-1 published {value:?} after {renewals} renewals"),
    );
    checks.check(
        *renewals >= 3,
        "the keeper renewed the lease while the work ran",
    );
    checks.check(
        second == Outcome::AlreadyDone(value.clone()),
        &format!("worker-2 waited {waited:.1?} and got that result (got {second:?})"),
    );
    checks.check(
        started.load(Ordering::SeqCst) == 1,
        &format!(
            "the work ran once ({} runs)",
            started.load(Ordering::SeqCst)
        ),
    );
    let job = Job::new(&job_id);
    let mut con = client.get_connection()?;
    let status: (String, Option<String>) = redis::cmd("GOBLIN.STATUS")
        .arg(&job.claim_key)
        .arg(&job.result_key)
        .query(&mut con)?;
    checks.check(
        status == ("DONE".to_owned(), Some(value.clone())),
        &format!("GOBLIN.STATUS: {status:?}"),
    );
    let claim_ttl: i64 = redis::cmd("TTL").arg(&job.claim_key).query(&mut con)?;
    checks.check(
        claim_ttl > LEASE_SECS as i64,
        &format!("the published claim lives as long as the result (TTL {claim_ttl} s)"),
    );
    Ok(())
}

/// A worker that fails releases its claim, and the waiting worker takes the job over at
/// once (not when the lease runs out); a late duplicate gets the second worker's result.
fn check_failure(client: &Client, checks: &mut Checks, run: &str) -> Result<(), Box<dyn Error>> {
    println!("worker-1 fails at step 2 and releases; worker-2 waiting, worker-3 late:");
    let job_id = format!("{run}-fail");
    let started = Arc::new(AtomicU32::new(0));
    let work = |fail_at| Work {
        steps: 3,
        step: Duration::from_millis(200),
        fail_at,
        started: Arc::clone(&started),
    };
    let go = Arc::new(Barrier::new(2));
    let first = spawn_worker(
        client,
        &go,
        Duration::ZERO,
        "worker-1",
        &job_id,
        work(Some(2)),
    );
    let second = spawn_worker(
        client,
        &go,
        Duration::from_millis(100),
        "worker-2",
        &job_id,
        work(None),
    );
    let (first, first_times) = join(first)?;
    let (second, second_times) = join(second)?;
    let third = process(client, "worker-3", &Job::new(&job_id), &work(None))?.0;

    checks.check(
        matches!(&first, Outcome::Failed { released: true, .. }),
        &format!("worker-1 failed and released its claim with GOBLIN.CAD ({first:?})"),
    );
    let takeover = match (first_times.released, second_times.claimed) {
        (Some(released), Some(claimed)) => Some(claimed.saturating_duration_since(released)),
        _ => None,
    };
    checks.check(
        takeover.is_some_and(|t| t < Duration::from_millis(500)),
        &format!(
            "worker-2 held the claim {takeover:.1?} after the release, not {LEASE_SECS} s \
             later at the lease's end"
        ),
    );
    let Outcome::Published { value, .. } = &second else {
        checks.check(false, &format!("worker-2 published (got {second:?})"));
        return Ok(());
    };
    checks.check(
        true,
        &format!("worker-2 did the job and published {value:?}"),
    );
    checks.check(
        third == Outcome::AlreadyDone(value.clone()),
        &format!("worker-3 came late and got that result ({third:?})"),
    );
    checks.check(
        started.load(Ordering::SeqCst) == 2,
        &format!(
            "the work ran twice: the failed run and the one that published ({} runs)",
            started.load(Ordering::SeqCst)
        ),
    );
    Ok(())
}

/// `--host H` and `--port N`, with 127.0.0.1 and 6379 by default.
fn parse_args() -> Result<(String, u16), String> {
    let (mut host, mut port) = ("127.0.0.1".to_owned(), 6379);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().ok_or_else(|| format!("{arg} needs a value"))?;
        match arg.as_str() {
            "--host" => host = value,
            "--port" => port = value.parse().map_err(|_| format!("bad port {value:?}"))?,
            _ => return Err(format!("unknown argument {arg:?} (use --host H --port N)")),
        }
    }
    Ok((host, port))
}

fn run(host: &str, port: u16) -> Result<u32, Box<dyn Error>> {
    let client = Client::open(format!("redis://{host}:{port}/"))?;
    let mut checks = Checks::default();
    let run = unique_token("run").replace(':', "-");
    check_long_work(&client, &mut checks, &run)?;
    check_failure(&client, &mut checks, &run)?;
    Ok(checks.failed)
}

fn main() -> ExitCode {
    let (host, port) = match parse_args() {
        Ok(hp) => hp,
        Err(e) => {
            eprintln!("goblin-example-worker: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&host, port) {
        Ok(0) => {
            println!("goblin-example-worker: all checks passed");
            ExitCode::SUCCESS
        }
        Ok(failed) => {
            println!("goblin-example-worker: {failed} check(s) failed");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("goblin-example-worker: {e}");
            ExitCode::from(2)
        }
    }
}
