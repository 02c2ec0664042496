"""Celery as a real application: runs the tasks of app.py against one server (Celery's
broker in database N of the URL, its result backend in database N+1) with two Celery
workers it starts, and prints a JSON summary of what it observed that is the same on every
run against redis-server, so that scripts/celery-check can compare redis-server's summary
with goblin-server's.

Usage: python run.py URL [--tasks N] [--timeout SECONDS] [--worker-log FILE]
  URL        redis://127.0.0.1:PORT/0 (the server is flushed first: FLUSHALL)
  --tasks    tasks of the "many" phase, twice over (default 1000)
  --timeout  the whole run (default 150); past it the workers are killed and the run
             exits 2
  --worker-log  where the workers' output goes (default: standard error)

Phases, in order (each one's outcome, or the exception that ended it, goes into the
summary under its name):
  prequeue  twelve `record` tasks sent to three queues with six priorities (four priority
            lists) before any worker runs; the keys they make (kombu's queue lists and bindings); then, once
            worker w1 runs, the order in which it received them (kombu BRPOPs every queue
            and priority list in one command, round robin)
  workers   w1 (threads pool, concurrency 4) then w2 (prefork pool, concurrency 2), both
            on queues celery, q.high, q.low, answering app.control.ping() (mingle and
            gossip between them, pub/sub)
  control   ping, inspect() active_queues / registered / scheduled / active (broadcasts
            over pub/sub, replies through a reply queue)
  plain     .delay() and .get() (RESP3 pub/sub of the result consumer), JSON values,
            result states, forget(), ignore_result, link and link_error, replace()
  routing   tasks sent to each queue by name and by task_routes
  retry     self.retry() until success, and past max_retries
  failure   a task that raises: the exception and traceback stored in the backend
  events    enable_events(), an event receiver (pattern subscription) hearing the task
            events of 20 tasks (most of them: a few are lost now and then on redis-server
            too), disable_events()
  consumers cancel_consumer, messages left queued, purge(), add_consumer
  many      --tasks tasks sent one by one (over the three queues and five priorities) and
            collected one by one, and as many again in one group (join_native: pub/sub
            and MGET), taken by both workers
  canvas    chain, group (with save/restore), chunks, starmap, chords (the chord scripts
            of the backend, a chord with a failing header task)
  lost worker  w2 killed (SIGKILL) while it runs an acks_late task; w3, started with a
            visibility timeout of 1 s, takes the unacknowledged message back (kombu's
            restore_visible: a mutex, ZRANGE BYSCORE, WATCH/MULTI) and runs it again; w3
            then stopped by the shutdown broadcast
  eta       countdown, eta, and expires passed before the eta (the task is revoked)
  revoke    a task with a countdown, revoked while w1 holds it
  backend   result keys and their expiry (Celery's default, one day), chord keys
  runs      how many times each task body started, counted in the workers
  final     the broker's and the backend's keys once everything ran, and w1's exit code
            after a warm shutdown (SIGTERM)
Only what is deterministic goes into the summary: never task ids, timestamps or
durations. Progress and timings go to standard error.
"""

import argparse
import collections
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))

parser = argparse.ArgumentParser()
parser.add_argument("url")
parser.add_argument("--tasks", type=int, default=1000)
parser.add_argument("--timeout", type=float, default=150)
parser.add_argument("--worker-log")
options = parser.parse_args()
os.environ["CELERY_CHECK_URL"] = options.url
sys.path.insert(0, HERE)

import redis  # noqa: E402
from celery import chain, chord, group  # noqa: E402
from celery.exceptions import TaskRevokedError  # noqa: E402
from celery.result import AsyncResult, GroupResult  # noqa: E402

import app as tasks  # noqa: E402

app = tasks.app
started = time.monotonic()
phase = "starting"
workers = {}  # name -> Popen


def log(message):
    print(f"run.py {time.monotonic() - started:6.1f}s {message}", file=sys.stderr, flush=True)


def stop_worker(name, how=signal.SIGTERM, wait=20):
    """Stops a worker (warm shutdown on SIGTERM), killing its process group after `wait`
    seconds; returns its exit code."""
    proc = workers.pop(name, None)
    if proc is None:
        return None
    if proc.poll() is None and how is not None:
        proc.send_signal(how)
    try:
        proc.wait(wait)
    except subprocess.TimeoutExpired:
        log(f"worker {name} (pid {proc.pid}) still running after {wait} s: killed")
        kill_group(proc)
        proc.wait()
    return proc.returncode


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the worker and its pool's processes
    except ProcessLookupError:
        pass


def watchdog():
    log(f"TIMEOUT after {options.timeout:.0f}s while {phase}")
    for proc in workers.values():
        kill_group(proc)
    os._exit(2)


timer = threading.Timer(options.timeout, watchdog)
timer.daemon = True
timer.start()

ID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# A chord's callback claim (a token, expiring in 10 s) or, once the chord is done, its
# done marker (expiring in 300 s).
CLAIM = re.compile(rb"celery-taskset-meta-.*\.c")


def norm(text):
    """A key or message with every uuid replaced by <id>."""
    if isinstance(text, str):
        text = text.encode()
    return ID.sub(b"<id>", text).decode("utf-8", "backslashreplace")


def describe(exc):
    return f"{type(exc).__name__}: {norm(str(exc))}"


def skipped(r, key):
    """A chord's claim: whether it is still there is a matter of timing."""
    return CLAIM.fullmatch(key) and r.get(key) != b"done"


def inventory(r):
    """The keys of a database: normalized name (type) -> count of keys and of elements."""
    found = collections.defaultdict(lambda: [0, 0])
    for key in r.scan_iter(count=1000):
        if skipped(r, key):
            continue
        kind = r.type(key).decode()
        size = {
            "list": r.llen,
            "set": r.scard,
            "hash": r.hlen,
            "zset": r.zcard,
        }.get(kind, lambda _: 0)(key)
        entry = found[f"{norm(key)} ({kind})"]
        entry[0] += 1
        entry[1] += size
    return {name: {"keys": n, "elements": e} for name, (n, e) in sorted(found.items())}


def state_of(result, timeout=20):
    """state, and the value or the exception of a result (waited for)."""
    try:
        value = result.get(timeout=timeout, propagate=False)
    except Exception as exc:  # noqa: BLE001
        return {"state": result.state, "get": describe(exc)}
    if isinstance(value, BaseException):
        return {"state": result.state, "exception": describe(value)}
    return {"state": result.state, "value": value}


def ttl_bucket(ttl):
    day = 24 * 3600
    if ttl in (-1, -2):
        return ttl
    if day - 600 <= ttl <= day:
        return "about one day"
    if 0 <= ttl <= 300:
        return "at most 300 s"
    return f"other ({ttl})"


def live():
    """Broadcast options: replies awaited up to 1 s, or until every live worker answered."""
    return {"timeout": 1, "limit": len(workers)}


def replies(answers):
    """Broadcast replies ([{worker: reply}, ...]) as a sorted list of pairs."""
    return sorted(
        ([name, reply] for answer in answers or [] for name, reply in answer.items()), key=str
    )


summary = {}


def run_phase(name, fun):
    global phase
    phase = name
    t = time.monotonic()
    try:
        summary[name] = fun()
    except Exception as exc:  # noqa: BLE001
        log(f"{name}: {traceback.format_exc()}")
        summary[name] = {"error": describe(exc)}
    log(f"{name}: done in {time.monotonic() - t:.1f}s")


broker = redis.Redis.from_url(options.url)
backend = redis.Redis.from_url(tasks.BACKEND_URL)
broker.flushall()

PRE = []


def prequeue():
    queues = ["celery", "q.high", "q.low"]
    priorities = [None, 0, 3, 6, 9, 5]
    for i in range(12):
        queue, priority = queues[i % 3], priorities[i % 6]
        tag = f"{i:02}:{queue}:p{priority}"
        kwargs = {"queue": queue}
        if priority is not None:
            kwargs["priority"] = priority
        PRE.append(tasks.record.apply_async((tag,), **kwargs))
    return {"keys": inventory(broker)}


def start_worker(name, pool, concurrency, queues="celery,q.high,q.low", env=None):
    out = open(options.worker_log, "ab") if options.worker_log else sys.stderr
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "app", "worker", "--pool", pool,
         "--concurrency", str(concurrency), "-Q", queues, "-n", name,
         "--loglevel", "INFO"],
        cwd=HERE, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True, env={**os.environ, **(env or {})},
    )
    workers[name] = proc
    log(f"worker {name} started, pid {proc.pid}")
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return {"error": f"worker exited with {proc.returncode}"}
        if app.control.ping(destination=[name], timeout=0.5):
            return {"answers ping": True}
    return {"error": "no answer to ping in 40 s"}


def prequeue_done():
    return {
        "results": [state_of(p) for p in PRE],
        "received order": [x.decode() for x in broker.lrange("check:received", 0, -1)],
    }


def control():
    out = {}
    out["ping"] = replies(app.control.ping(**live()))
    inspect = app.control.inspect(**live())
    queues = inspect.active_queues() or {}
    out["active_queues"] = {
        w: sorted((q["name"], q["exchange"]["name"], q["routing_key"]) for q in qs)
        for w, qs in queues.items()
    }
    registered = inspect.registered() or {}
    out["registered"] = {
        w: sorted(n for n in names if n.startswith("app.")) for w, names in registered.items()
    }
    out["inspect ping"] = inspect.ping()
    # a running task shows in active(), a task with a countdown in scheduled()
    running = tasks.slow.delay(2)
    waiting = tasks.echo.apply_async(("scheduled",), countdown=3)
    seen_active = seen_scheduled = False
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not (seen_active and seen_scheduled):
        if not seen_active:
            active = inspect.active() or {}
            seen_active = any(t["id"] == running.id for ts in active.values() for t in ts)
        if not seen_scheduled:
            scheduled = inspect.scheduled() or {}
            seen_scheduled = any(
                t["request"]["id"] == waiting.id for ts in scheduled.values() for t in ts
            )
        time.sleep(0.1)
    out["running task in active()"] = seen_active
    out["countdown task in scheduled()"] = seen_scheduled
    out["running task"] = state_of(running)
    out["countdown task"] = state_of(waiting)
    return out


def plain():
    out = {}
    out["add"] = tasks.add.delay(2, 3).get(timeout=20)
    values = [
        None, True, 0, -1, 2**62, 1.5, "", "ü ☃ \x00", [1, [2, [3]]],
        {"a": {"b": None}, "c": [1.25, "x"]}, "x" * 100000,
    ]
    results = [tasks.echo.delay(v) for v in values]
    out["echo round trip"] = [res.get(timeout=20) == v for res, v in zip(results, values)]
    res = tasks.mul.apply_async((6, 7))
    res.get(timeout=20)
    same = AsyncResult(res.id, app=app)
    out["result"] = {
        "state": same.state, "ready": same.ready(), "successful": same.successful(),
        "failed": same.failed(), "value": same.result,
    }
    key = f"celery-task-meta-{res.id}"
    out["ttl of the result key"] = ttl_bucket(backend.ttl(key))
    same.forget()
    out["after forget"] = {
        "state": AsyncResult(res.id, app=app).state, "key exists": backend.exists(key),
    }
    out["unknown id"] = AsyncResult("00000000-0000-0000-0000-000000000000", app=app).state
    # ignore_result: the task runs (counted in check:runs) and stores nothing
    quiet = tasks.quiet.delay("q")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not broker.hexists("check:runs", quiet.id):
        time.sleep(0.05)
    time.sleep(0.2)
    out["ignore_result"] = {
        "ran": broker.hexists("check:runs", quiet.id),
        "result key": backend.exists(f"celery-task-meta-{quiet.id}"),
        "state": quiet.state,
    }
    # link: the callback gets the result; link_error: the errback runs after a failure
    callback = tasks.mul.s(10)
    called = callback.freeze()
    linked = tasks.add.apply_async((1, 2), link=callback)
    out["link"] = {"parent": state_of(linked), "callback": state_of(called)}
    errback = tasks.echo.si("errback ran")
    erred = errback.freeze()
    failed = tasks.fail.apply_async(("linked failure",), link_error=errback)
    out["link_error"] = {"parent": state_of(failed), "errback": state_of(erred)}
    out["replace"] = state_of(tasks.replaced.delay(5))
    return out


def routing():
    out = {}
    for queue in ["celery", "q.high", "q.low"]:
        out[f"where, queue={queue}"] = tasks.where.apply_async(queue=queue).get(timeout=20)
    out["where, default"] = tasks.where.delay().get(timeout=20)
    out["route_high (task_routes)"] = tasks.route_high.delay().get(timeout=20)
    sent = [tasks.where.apply_async(queue=q) for q in ["q.low", "q.high", "celery"] * 30]
    out["90 mixed"] = dict(collections.Counter(s.get(timeout=20) for s in sent))
    return out


def retry():
    out = {}
    cases = {"succeeds at once": 1, "succeeds on attempt 3": 3, "never succeeds": 10}
    sent = {name: tasks.flaky.delay(n) for name, n in cases.items()}
    for name, res in sorted(sent.items()):
        out[name] = state_of(res, timeout=30)
        out[name]["runs"] = int(broker.hget("check:runs", res.id) or 0)
    return out


def failure():
    out = {}
    res = tasks.fail.delay("boom")
    out["outcome"] = state_of(res)
    meta = app.backend.get_task_meta(res.id)
    out["traceback stored"] = "ValueError: boom" in (meta.get("traceback") or "")
    try:
        tasks.fail.delay("raised").get(timeout=20)
        out["get propagates"] = "no exception"
    except ValueError as exc:
        out["get propagates"] = describe(exc)
    return out


def events():
    out = {}
    out["enable_events"] = replies(app.control.enable_events(reply=True, **live()))
    seen = collections.defaultdict(set)  # event type -> task ids
    ready = threading.Event()
    with app.connection_for_read() as conn:
        receiver = app.events.Receiver(conn, handlers={"*": lambda e: seen[e["type"]].add(
            e.get("uuid"))})
        receiver.on_consume_ready = lambda *a, **k: ready.set()
        thread = threading.Thread(target=receiver.capture, kwargs={"limit": None}, daemon=True)
        thread.start()
        out["receiver ready"] = ready.wait(10)
        sent = [tasks.add.delay(i, i) for i in range(20)]
        ids = {s.id for s in sent}
        out["results"] = [s.get(timeout=20) for s in sent]
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not ids <= seen["task-succeeded"]:
            time.sleep(0.1)
        receiver.should_stop = True
        thread.join(5)
    heard = {
        kind: len(ids & seen[kind])
        for kind in ["task-sent", "task-received", "task-started", "task-succeeded"]
    }
    log(f"events: of 20 tasks, heard {heard}")
    # A few events are lost now and then against redis-server too (between Celery's
    # dispatchers and the receiver): only whether most of them came goes into the summary.
    out["tasks heard, 15 or more of 20"] = {kind: n >= 15 for kind, n in heard.items()}
    out["disable_events"] = replies(app.control.disable_events(reply=True, **live()))
    return out


def consumers():
    out = {}
    out["cancel_consumer"] = replies(app.control.cancel_consumer("q.low", reply=True, **live()))
    time.sleep(1.5)  # a BRPOP sent before the cancel times out (brpop_timeout, 1 s)
    queued = [tasks.echo.apply_async((i,), queue="q.low") for i in range(7)]
    time.sleep(1)
    out["queued in q.low"] = broker.llen("q.low")
    out["states while queued"] = sorted({q.state for q in queued})
    out["purge"] = app.control.purge()
    out["q.low after the purge"] = broker.exists("q.low")
    later = [tasks.echo.apply_async((i,), queue="q.low") for i in range(3)]
    out["add_consumer"] = replies(app.control.add_consumer("q.low", reply=True, **live()))
    out["after add_consumer"] = [state_of(x) for x in later]
    queues = app.control.inspect(**live()).active_queues() or {}
    out["active_queues"] = {w: sorted(q["name"] for q in qs) for w, qs in queues.items()}
    return out


def spread(i):
    """Options sending task i to one of the three queues, with one of five priorities."""
    opts = {"queue": ["celery", "q.high", "q.low"][i % 3]}
    priority = [None, 0, 3, 6, 9][i % 5]
    if priority is not None:
        opts["priority"] = priority
    return opts


def many():
    n = options.tasks
    out = {}
    t = time.monotonic()
    sent = [tasks.add.apply_async((i, 1), **spread(i)) for i in range(n)]
    log(f"many: {n} sent in {time.monotonic() - t:.1f}s")
    got = [s.get(timeout=60) for s in sent]
    out["one by one"] = {
        "count": len(got),
        "correct": sum(1 for i, g in enumerate(got) if g == i + 1),
        "states": dict(collections.Counter(s.state for s in sent)),
    }
    log(f"many: {n} one by one in {time.monotonic() - t:.1f}s")
    t = time.monotonic()
    result = group(tasks.mul.s(i, 3).set(**spread(i)) for i in range(n)).apply_async()
    values = result.get(timeout=60)
    out["group"] = {
        "count": len(values),
        "in order": values == [3 * i for i in range(n)],
        "completed_count": result.completed_count(),
    }
    log(f"many: a group of {n} in {time.monotonic() - t:.1f}s")
    return out


def canvas():
    out = {}
    out["chain"] = (tasks.add.s(1, 2) | tasks.add.s(3) | tasks.mul.s(10))().get(timeout=30)
    g = group(tasks.add.s(i, i) for i in range(20))()
    out["group"] = g.get(timeout=30)
    g.save()
    restored = GroupResult.restore(g.id, app=app)
    out["group restored"] = {
        "found": restored is not None,
        "size": len(restored.results) if restored else None,
        "completed": restored.completed_count() if restored else None,
    }
    g.forget()
    out["group after forget"] = GroupResult.restore(g.id, app=app) is None
    out["chunks"] = tasks.add.chunks([(i, i) for i in range(10)], 3).group().apply_async().get(
        timeout=30)
    out["starmap"] = tasks.add.starmap([(1, 1), (2, 2), (3, 3)]).delay().get(timeout=30)
    out["chord of 10"] = chord(tasks.add.s(i, i) for i in range(10))(tasks.tsum.s()).get(timeout=30)
    out["chord of 200"] = chord(tasks.mul.s(i, 2) for i in range(200))(tasks.tsum.s()).get(
        timeout=60)
    out["chord in a chain"] = chain(
        chord([tasks.add.s(1, 1), tasks.add.s(2, 2)], tasks.tsum.s()), tasks.mul.s(100)
    )().get(timeout=30)
    header = [tasks.add.s(1, 1), tasks.fail.s("chord boom"), tasks.add.s(2, 2)]
    out["chord with a failing header"] = state_of(chord(header)(tasks.tsum.s()), timeout=30)
    out["chords in a group"] = group(
        chord([tasks.add.s(i, j) for j in range(5)], tasks.tsum.s()) for i in range(4)
    )().get(timeout=30)
    return out


def lost_worker():
    """w2 dies (SIGKILL) running an acks_late task of a queue only it consumes; w3, with a
    visibility timeout of 1 s, takes the message back as it starts, and runs it again."""
    out = {}
    out["add_consumer q.solo"] = replies(app.control.add_consumer(
        "q.solo", destination=["w2@check"], reply=True, timeout=1, limit=1))
    res = tasks.hangs_once.apply_async(queue="q.solo")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not broker.hexists("check:runs", res.id):
        time.sleep(0.05)
    out["started on w2"] = broker.hexists("check:runs", res.id)
    time.sleep(0.3)
    out["w2 killed"] = -stop_worker("w2@check", how=signal.SIGKILL, wait=10)
    out["unacked after the kill"] = broker.hlen("unacked")
    time.sleep(1.2)  # past w3's visibility timeout
    out["w3"] = start_worker("w3@check", "threads", 2, queues="q.solo",
                             env={"CELERY_CHECK_VISIBILITY": "1"})
    out["outcome"] = state_of(res, timeout=30)
    out["runs"] = int(broker.hget("check:runs", res.id) or 0)
    out["shutdown w3"] = replies(app.control.shutdown(destination=["w3@check"], reply=True,
                                                      timeout=1, limit=1))
    out["w3 exit code"] = stop_worker("w3@check", how=None, wait=20)
    out["ping"] = replies(app.control.ping(**live()))
    return out


def eta_send():
    now = time.time()
    at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=2)
    return {
        "countdown": (tasks.when.apply_async(countdown=2), now + 2),
        "eta": (tasks.when.apply_async(eta=at), at.timestamp()),
        "expired before its eta": (tasks.echo.apply_async(("late",), countdown=2, expires=1), None),
    }


def eta_check(sent):
    out = {}
    for name, (res, due) in sorted(sent.items()):
        if due is None:
            out[name] = state_of(res)
            continue
        try:
            value = res.get(timeout=30)
        except Exception as exc:  # noqa: BLE001
            out[name] = {"state": res.state, "get": describe(exc)}
            continue
        out[name] = {
            "state": res.state,
            "has an eta": value["eta"] is not None,
            "not before its eta": value["ran"] >= due - 0.05,
        }
    return out


def revoke():
    out = {}
    res = tasks.echo.apply_async(("revoked",), countdown=3)
    time.sleep(0.5)
    res.revoke()
    revoked = app.control.inspect(**live()).revoked() or {}
    out["in inspect().revoked()"] = any(res.id in ids for ids in revoked.values())
    try:
        res.get(timeout=20)
        out["get"] = "no exception"
    except TaskRevokedError as exc:
        out["get"] = type(exc).__name__
    except Exception as exc:  # noqa: BLE001
        out["get"] = describe(exc)
    out["state"] = res.state
    out["runs"] = int(broker.hget("check:runs", res.id) or 0)
    return out


def backend_keys():
    ttls = collections.Counter()
    for key in backend.scan_iter(match="celery-task*", count=1000):
        if not skipped(backend, key):
            ttls[(norm(key), ttl_bucket(backend.ttl(key)))] += 1
    return {f"{name}: ttl {ttl}": n for (name, ttl), n in sorted(ttls.items(), key=str)}


def runs():
    counts = collections.Counter(int(v) for v in broker.hvals("check:runs"))
    return {f"tasks that started {k} times": v for k, v in sorted(counts.items())}


def final():
    out = {"broker keys while w1 runs": inventory(broker)}
    out["w1 exit code"] = stop_worker("w1@check")
    out["broker keys after w1 stopped"] = inventory(broker)
    out["backend keys"] = inventory(backend)
    return out


try:
    run_phase("prequeue", prequeue)
    run_phase("worker w1", lambda: start_worker("w1@check", "threads", 4))
    if "error" in summary["worker w1"]:
        raise SystemExit(1)
    run_phase("prequeue done", prequeue_done)
    run_phase("worker w2", lambda: start_worker("w2@check", "prefork", 2))
    eta_sent = eta_send()
    run_phase("control", control)
    run_phase("plain", plain)
    run_phase("routing", routing)
    run_phase("retry", retry)
    run_phase("failure", failure)
    run_phase("events", events)
    run_phase("consumers", consumers)
    run_phase("many", many)
    run_phase("canvas", canvas)
    run_phase("lost worker", lost_worker)
    run_phase("eta", lambda: eta_check(eta_sent))
    run_phase("revoke", revoke)
    run_phase("backend", backend_keys)
    run_phase("runs", runs)
    run_phase("final", final)
finally:
    for name in list(workers):
        code = stop_worker(name)
        log(f"worker {name} stopped: exit code {code}")
    timer.cancel()

json.dump(summary, sys.stdout, indent=1, sort_keys=True)
print()
log(f"done in {time.monotonic() - started:.1f}s")
