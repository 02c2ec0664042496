// BullMQ as a real application: runs a few thousand jobs against one server and prints a
// JSON summary of their outcome that is the same on every run against redis-server, so
// scripts/bullmq-check can compare redis-server's summary with goblin-server's.
//
// Usage: node run.mjs PORT [JOBS] [TIMEOUT_SECONDS]
//   PORT     the server's port on 127.0.0.1
//   JOBS     jobs in all (default 3000, at least 100)
//   TIMEOUT  the whole run, in seconds (default 60); past it the run exits with 2
// BULLMQ_PREFIX in the environment replaces BullMQ's key prefix 'bull' (a hash tag such as
// '{bull}' puts every key of the run in one hash slot).
//
// Two queues, with names unique to the run:
//   main     plain jobs (some added in bulk, some removed on completion, some reporting
//            progress and logs), delayed jobs, jobs that fail and are retried with fixed
//            or exponential backoff (some until they succeed, some until they run out of
//            attempts), unrecoverable failures and prioritised jobs, taken by two workers
//            of concurrency 8 and 3;
//   ordered  prioritised and plain jobs added while the queue is paused, a few of them
//            re-prioritised, then taken by one worker of concurrency 1: their processing
//            order is part of the summary.
// A QueueEvents listener counts the completions it hears. At the end both queues are
// obliterated and the keys left under their prefixes counted (none, expectedly).
//
// Only what is deterministic goes into the summary: counts per state, per job its state,
// attemptsMade, opts, return value or failedReason, progress and log count, the ordered queue's
// processing order; never ids of the run, timestamps or durations. Progress and timings go
// to standard error.
import { Queue, QueueEvents, UnrecoverableError, Worker } from 'bullmq';
import IORedis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

const port = Number(process.argv[2]);
const total = Number(process.argv[3] ?? 3000);
const timeoutSeconds = Number(process.argv[4] ?? 60);
if (!Number.isInteger(port) || port <= 0 || !Number.isInteger(total) || total < 100
    || !(timeoutSeconds > 0)) {
    console.error('usage: node run.mjs PORT [JOBS>=100] [TIMEOUT_SECONDS]');
    process.exit(64);
}

const started = Date.now();
const log = (message) =>
    console.error(`run.mjs[${port}] ${((Date.now() - started) / 1000).toFixed(1)}s ${message}`);

// The run stops by itself: past the timeout it says what it was waiting for and exits 2.
let phase = 'connecting';
const watchdog = setTimeout(() => {
    log(`TIMEOUT after ${timeoutSeconds}s while ${phase}`);
    process.exit(2);
}, timeoutSeconds * 1000);
process.on('unhandledRejection', (err) => {
    log(`unhandled rejection while ${phase}: ${err?.stack ?? err}`);
    process.exit(1);
});

// A seeded generator: the jobs, their delays and priorities are the same on every run.
function mulberry32(seed) {
    return () => {
        seed = (seed + 0x6d2b79f5) | 0;
        let t = Math.imul(seed ^ (seed >>> 15), seed | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}
const random = mulberry32(20260101);
// Keys sorted, at every depth: a job's opts are stored as the scripts' cjson.encode of the
// table cmsgpack.unpack made, their order that of Lua's table, which the summary ignores.
const sorted = (value) => (value && typeof value === 'object' && !Array.isArray(value)
    ? Object.fromEntries(Object.keys(value).sort().map((key) => [key, sorted(value[key])]))
    : value);
const int = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));
// The workers' pauses take no numbers from it: they run while jobs are still being added.
const jitter = (hi) => sleep(Math.floor(Math.random() * (hi + 1)));

const connection = { host: '127.0.0.1', port };
const tag = `${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
const names = { main: `check-main-${tag}`, ordered: `check-ordered-${tag}` };
const prefix = process.env.BULLMQ_PREFIX || 'bull';
const queueOpts = { connection, prefix, streams: { events: { maxLen: 1000000 } } };

const counts = {
    plain: Math.floor(total * 0.4),
    delayed: Math.floor(total * 0.15),
    retry: Math.floor(total * 0.2),
    unrecoverable: Math.floor(total * 0.02),
    prioritised: Math.floor(total * 0.1),
};
counts.ordered = total - Object.values(counts).reduce((a, b) => a + b, 0);

const mainQueue = new Queue(names.main, queueOpts);
const orderedQueue = new Queue(names.ordered, queueOpts);
const queueEvents = new QueueEvents(names.main, { connection, prefix });
const heardCompleted = new Set();
queueEvents.on('completed', ({ jobId }) => heardCompleted.add(jobId));
queueEvents.on('error', (err) => log(`queue events error: ${err.message}`));

// Event tallies of the workers: 'failed' comes once per failed attempt, retried or not.
const tally = { completed: 0, failed: 0 };
const orderSeen = [];

async function processMain(job) {
    await jitter(2);
    const d = job.data;
    switch (job.name) {
        case 'plain':
            if (d.i % 7 === 0) {
                await job.updateProgress({ half: d.i });
                await job.log(`plain ${d.i} is half done`);
                await job.updateProgress(100);
            }
            return { sum: d.a + d.b, text: `plain-${d.i}` };
        case 'delayed':
            // Processed no earlier than its delay asked for (same clock as the adder's).
            return { i: d.i, notEarly: Date.now() >= job.timestamp + job.delay };
        case 'retry':
            if (job.attemptsMade < d.failures) {
                await job.log(`attempt ${job.attemptsMade + 1} fails`);
                throw new Error(`retry ${d.i}: attempt ${job.attemptsMade + 1} failed`);
            }
            return { i: d.i, afterFailures: job.attemptsMade };
        case 'unrecoverable':
            throw new UnrecoverableError(`unrecoverable ${d.i}`);
        case 'prioritised':
            return { i: d.i, priority: job.opts.priority };
        default:
            throw new Error(`unknown job ${job.name}`);
    }
}

try {
    phase = 'waiting for the queues';
    await Promise.all([mainQueue.waitUntilReady(), orderedQueue.waitUntilReady(),
        queueEvents.waitUntilReady()]);

    // The main queue's workers start first and wait (blocked) for jobs.
    const workers = [8, 3].map((concurrency) => {
        const worker = new Worker(names.main, processMain, { connection, prefix, concurrency });
        worker.on('completed', () => tally.completed++);
        worker.on('failed', () => tally.failed++);
        worker.on('error', (err) => log(`worker error: ${err.message}`));
        return worker;
    });
    await Promise.all(workers.map((w) => w.waitUntilReady()));

    phase = 'adding jobs';
    // Plain jobs: in bulks of 50 (MULTI of scripts), ids from the queue's counter; every
    // tenth is removed on completion.
    const plain = [];
    for (let i = 0; i < counts.plain; i++) {
        plain.push({
            name: 'plain',
            data: { i, a: int(0, 1000), b: int(0, 1000) },
            opts: i % 10 === 0 ? { removeOnComplete: true } : {},
        });
    }
    for (let k = 0; k < plain.length; k += 50) await mainQueue.addBulk(plain.slice(k, k + 50));
    // Delayed, retried, unrecoverable and prioritised jobs, one by one, with ids of ours.
    for (let i = 0; i < counts.delayed; i++) {
        const opts = { jobId: `delayed-${i}`, delay: int(50, 1500) };
        if (i % 5 === 0) opts.priority = int(1, 20);
        await mainQueue.add('delayed', { i }, opts);
    }
    for (let i = 0; i < counts.retry; i++) {
        const attempts = int(1, 4);
        const backoff = i % 2 === 0 ? { type: 'fixed', delay: int(10, 100) }
            : { type: 'exponential', delay: int(10, 40) };
        // failures >= attempts: fails for good after its last attempt.
        await mainQueue.add('retry', { i, failures: int(0, 4) },
            { jobId: `retry-${i}`, attempts, backoff });
    }
    for (let i = 0; i < counts.unrecoverable; i++) {
        await mainQueue.add('unrecoverable', { i }, { jobId: `unrecoverable-${i}`, attempts: 3 });
    }
    for (let i = 0; i < counts.prioritised; i++) {
        await mainQueue.add('prioritised', { i },
            { jobId: `prioritised-${i}`, priority: int(1, 100) });
    }

    // The ordered queue: paused, filled, a few jobs re-prioritised, then one worker of
    // concurrency 1 and resumed. Plain jobs come first (in FIFO order, the LIFO ones ahead
    // of them), then by priority, FIFO among equals.
    await orderedQueue.pause();
    const ordered = [];
    for (let i = 0; i < counts.ordered; i++) {
        const opts = { jobId: `ordered-${i}` };
        if (i % 9 === 0) {
            if (i % 2 === 0) opts.lifo = true;
        } else {
            opts.priority = int(1, 8);
        }
        ordered.push({ name: 'ordered', data: { i }, opts });
    }
    const half = Math.floor(ordered.length / 2);
    await orderedQueue.addBulk(ordered.slice(0, half));
    for (const job of ordered.slice(half)) await orderedQueue.add(job.name, job.data, job.opts);
    for (let i = 1; i < counts.ordered; i += 10) {
        if (i % 9 === 0) continue;
        const job = await orderedQueue.getJob(`ordered-${i}`);
        await job.changePriority({ priority: int(1, 8) });
    }
    const orderedWorker = new Worker(names.ordered, async (job) => {
        orderSeen.push(job.id);
        await jitter(1);
        return { position: orderSeen.length };
    }, { connection, prefix, concurrency: 1 });
    orderedWorker.on('error', (err) => log(`ordered worker error: ${err.message}`));
    await orderedWorker.waitUntilReady();
    await orderedQueue.resume();
    log(`added ${total} jobs`);

    // Settled: nothing waits, runs or is delayed, and every job completed or failed.
    phase = 'waiting for the jobs to settle';
    const removed = Math.ceil(counts.plain / 10);
    for (;;) {
        const [m, o] = await Promise.all([mainQueue.getJobCounts(), orderedQueue.getJobCounts()]);
        const done = m.completed + m.failed + removed + o.completed + o.failed;
        const pending = [m, o].flatMap(Object.entries)
            .filter(([state]) => state !== 'completed' && state !== 'failed')
            .reduce((sum, [, n]) => sum + n, 0);
        if (done === total && pending === 0 && tally.completed + tally.failed > 0) break;
        await sleep(100);
    }
    phase = 'waiting for the completion events';
    while (heardCompleted.size < tally.completed) await sleep(50);
    log('settled');

    phase = 'closing the workers';
    await Promise.all([...workers, orderedWorker].map((w) => w.close()));
    await queueEvents.close();

    phase = 'summarising';
    const summary = {
        jobs: total,
        kinds: counts,
        states: {
            main: await mainQueue.getJobCounts(),
            ordered: await orderedQueue.getJobCounts(),
        },
        workerEvents: tally,
        completionsHeard: heardCompleted.size,
        orderedProcessing: orderSeen,
        main: {},
        ordered: {},
    };
    for (const [which, queue] of [['main', mainQueue], ['ordered', orderedQueue]]) {
        const jobs = await queue.getJobs(['completed', 'failed', 'wait', 'active', 'delayed',
            'prioritized', 'paused', 'waiting-children']);
        jobs.sort((a, b) => a.id.localeCompare(b.id, 'en', { numeric: true }));
        for (const job of jobs) {
            const entry = {
                name: job.name,
                state: await job.getState(),
                attemptsMade: job.attemptsMade,
                opts: sorted(job.opts),
            };
            if (job.returnvalue !== null && job.returnvalue !== undefined) {
                entry.returnvalue = job.returnvalue;
            }
            if (job.failedReason) entry.failedReason = job.failedReason;
            if (job.stacktrace?.length) entry.stacktraces = job.stacktrace.length;
            if (job.progress) entry.progress = job.progress;
            const { count } = await queue.getJobLogs(job.id, 0, -1);
            if (count) entry.logs = count;
            summary[which][job.id] = entry;
        }
    }
    // Removed on completion: gone.
    summary.removedOnCompletePresent = 0;
    for (let id = 1; id <= counts.plain; id++) {
        const job = await mainQueue.getJob(String(id));
        if (job && job.data.i % 10 === 0) summary.removedOnCompletePresent++;
    }

    phase = 'obliterating the queues';
    await mainQueue.obliterate({ force: true });
    await orderedQueue.obliterate({ force: true });
    const redis = new IORedis(connection);
    summary.keysLeft = {};
    for (const [which, name] of Object.entries(names)) {
        let left = 0;
        for (let cursor = '0'; ;) {
            const [next, keys] =
                await redis.scan(cursor, 'MATCH', `${prefix}:${name}:*`, 'COUNT', 1000);
            left += keys.length;
            cursor = next;
            if (cursor === '0') break;
        }
        summary.keysLeft[which] = left;
    }
    await redis.quit();
    await Promise.all([mainQueue.close(), orderedQueue.close()]);

    clearTimeout(watchdog);
    log('done');
    process.stdout.write(`${JSON.stringify(summary, null, 1)}\n`);
    process.exit(0);
} catch (err) {
    log(`failed while ${phase}: ${err?.stack ?? err}`);
    process.exit(1);
}
