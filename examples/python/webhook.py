#!/usr/bin/env python3
"""An idempotent webhook handler on Goblin, with redis-py.

A payment provider delivers each webhook at least once: sometimes twice, sometimes while
the first delivery is still being handled. `handle_webhook` makes the work run once per
event and gives every delivery the same answer:

1. ``GOBLIN.CLAIM claim_key result_key token lease BLOCK ms`` — the first delivery gets
   ``CLAIMED`` and does the work; a duplicate that arrives later gets the stored result at
   once; a duplicate that arrives while the work runs waits on the server (no polling)
   and is handed the result the moment it is published.
2. ``GOBLIN.PUBLISH claim_key result_key token result ttl`` — the fenced publish: it
   stores the result only if the claim still holds our token, and moves the claim's
   expiry to the result's, so a late duplicate reads the result instead of winning the
   claim again. It answers 0 when our lease ran out while we worked and another delivery
   took the claim: we must not overwrite what that one publishes.
3. If the work fails, ``GOBLIN.CAD claim_key token`` gives the claim back, and the
   duplicate that has waited longest takes the work over at once.

Run as a script, it checks itself against a live server (exit status 0 when every check
passed)::

    python3 examples/python/webhook.py --port 6379

- Many deliveries of the same events at once, on threads: each event's work runs exactly
  once, every delivery gets that run's result, and each delivery asked the server once.
- A delivery whose work fails releases the claim (GOBLIN.CAD): a waiting duplicate takes
  the work over at once.
- A worker slower than its lease: a waiting duplicate takes the claim when the lease
  expires, and the slow worker's publish answers 0 and leaves the new owner's result alone.
"""

import argparse
import statistics
import sys
import threading
import time
import uuid

import redis

# How long a claim lasts before another delivery may take the work over. Choose it longer
# than the work normally takes, or renew it while working (GOBLIN.RENEW, see the Rust
# example).
LEASE_SECONDS = 30
# How long duplicates are answered with the stored result (and the claim kept held).
RESULT_TTL_SECONDS = 24 * 3600
# How long one GOBLIN.CLAIM call waits for the result (or the claim) before it answers
# nil; the handler then asks again. Keep the socket timeout above it.
BLOCK_MS = 10_000


class Stats:
    """What the handler did, counted for the self-checks (thread-safe)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.claim_calls = 0
        self.lost_leases = 0
        self.published_at = {}  # event id -> time.monotonic() of the accepted publish

    def count_claim(self):
        with self._lock:
            self.claim_calls += 1

    def lost_lease(self):
        with self._lock:
            self.lost_leases += 1

    def published(self, event_id):
        with self._lock:
            self.published_at[event_id] = time.monotonic()


def handle_webhook(r, event_id, payload, work, worker, stats=None, lease=LEASE_SECONDS):
    """Handles one delivery of webhook `event_id`; returns the event's result.

    `work(payload)` does the event's work and returns its result (a string). It runs only
    in the delivery that wins the claim; every other delivery returns that result.
    """
    # One hash tag, so both keys live on one shard: each command then costs what a SET
    # costs (keys on two shards work too, as a small cross-shard transaction).
    claim_key = f"claim:{{{event_id}}}"
    result_key = f"result:{{{event_id}}}"
    # Unique to this delivery: it is what the fenced publish checks.
    token = f"{worker}:{uuid.uuid4().hex}"
    while True:
        if stats:
            stats.count_claim()
        reply = r.execute_command(
            "GOBLIN.CLAIM", claim_key, result_key, token, lease, "BLOCK", BLOCK_MS
        )
        if reply is None:
            # Still in flight after BLOCK_MS: wait again (a web handler might answer
            # 503 Retry-After instead).
            continue
        if reply != "CLAIMED":
            # A duplicate: the work is done, this is its result. (A result must never be
            # the string "CLAIMED" itself; GOBLIN.STATUS tells the two apart.)
            return reply
        try:
            result = work(payload)
        except Exception:
            # Give the claim back: the delivery that has waited longest takes the work
            # over at once, instead of when the lease runs out.
            r.execute_command("GOBLIN.CAD", claim_key, token)
            raise
        published = r.execute_command(
            "GOBLIN.PUBLISH", claim_key, result_key, token, result, RESULT_TTL_SECONDS
        )
        if published == 1:
            if stats:
                stats.published(event_id)
            return result
        # 0: our lease ran out while we worked and another delivery owns the claim now.
        # Its result is the event's result; ours is dropped. Wait for it (the loop
        # claims again, and re-does the work only if the claim is free once more).
        if stats:
            stats.lost_lease()


class Ledger:
    """A stand-in for the payment provider: counts the charges made per event."""

    def __init__(self):
        self._lock = threading.Lock()
        self.charges = {}

    def charge(self, event_id, seconds):
        """Charges once for `event_id`, taking `seconds`; returns a transaction id."""
        with self._lock:
            self.charges[event_id] = self.charges.get(event_id, 0) + 1
            n = self.charges[event_id]
        time.sleep(seconds)
        return f"charged:{event_id}:txn{n}:{uuid.uuid4().hex[:8]}"


class Checks:
    """Collects failed checks; prints each check as it is made."""

    def __init__(self):
        self.failed = 0

    def check(self, ok, what):
        print(f"  {'ok  ' if ok else 'FAIL'} {what}")
        if not ok:
            self.failed += 1


def run_threads(targets):
    """Runs each callable on its own thread, all released at once; waits for them."""
    barrier = threading.Barrier(len(targets))
    errors = []

    def run(target):
        barrier.wait()
        try:
            target()
        except Exception as e:  # reported as a failed check by the caller
            errors.append(repr(e))

    threads = [threading.Thread(target=run, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def check_duplicates(r, checks, run_id, events, deliveries, work_seconds):
    """Every event delivered `deliveries` times at once: one charge each, one answer."""
    print(f"{events} events x {deliveries} concurrent deliveries, {work_seconds}s of work each:")
    ledger = Ledger()
    stats = Stats()
    answers = {}  # (event, delivery) -> (result, time.monotonic() it was returned)
    winners = set()  # the (event, delivery) pairs that did the work

    def delivery(event_id, n):
        def work(_payload):
            winners.add((event_id, n))
            return ledger.charge(event_id, work_seconds)

        def go():
            result = handle_webhook(
                r, event_id, {"amount": 4200}, work, worker=f"worker-{n}", stats=stats
            )
            answers[(event_id, n)] = (result, time.monotonic())

        return go

    ids = [f"evt-{run_id}-{i}" for i in range(events)]
    errors = run_threads([delivery(e, n) for e in ids for n in range(deliveries)])
    checks.check(not errors, f"no delivery raised {errors[:3]}")
    checks.check(
        all(ledger.charges.get(e) == 1 for e in ids),
        f"each event charged exactly once (charges per event: "
        f"{sorted(set(ledger.charges.values()))})",
    )
    same = True
    waits = []
    for e in ids:
        stored = r.get(f"result:{{{e}}}")
        for n in range(deliveries):
            result, at = answers.get((e, n), (None, 0.0))
            same = same and result is not None and result == stored
            if e in stats.published_at and (e, n) not in winners:
                waits.append(max(0.0, at - stats.published_at[e]))
    checks.check(same, "every delivery got its event's stored result")
    checks.check(
        stats.claim_calls == events * deliveries,
        f"no polling: {stats.claim_calls} GOBLIN.CLAIM calls for {events * deliveries} deliveries",
    )
    checks.check(stats.lost_leases == 0, f"no lease lost ({stats.lost_leases})")
    if waits:
        median_ms = statistics.median(waits) * 1000
        worst_ms = max(waits) * 1000
        checks.check(
            worst_ms < 1000,
            f"duplicates had the result {median_ms:.1f} ms after its publish "
            f"(median; worst {worst_ms:.1f} ms)",
        )
    status = r.execute_command("GOBLIN.STATUS", f"claim:{{{ids[0]}}}", f"result:{{{ids[0]}}}")
    checks.check(
        list(status) == ["DONE", r.get(f"result:{{{ids[0]}}}")],
        f"GOBLIN.STATUS reports the event done: {status}",
    )


def check_lost_lease(r, checks, run_id, lease):
    """A worker slower than its lease: the claim passes on, its publish is refused."""
    print(f"a worker slower than its {lease}s lease, a duplicate waiting:")
    ledger = Ledger()
    stats = Stats()
    event_id = f"evt-{run_id}-slow"
    slow_claimed = threading.Event()
    times = {}
    answers = {}

    def slow_work(_payload):
        times["slow claimed"] = time.monotonic()
        slow_claimed.set()
        return ledger.charge(event_id, lease + 0.6)

    def fast_work(_payload):
        times["duplicate claimed"] = time.monotonic()
        return ledger.charge(event_id, 0.05)

    def slow():
        answers["slow"] = handle_webhook(
            r, event_id, {}, slow_work, "slow-worker", stats=stats, lease=lease
        )

    def duplicate():
        if not slow_claimed.wait(10):
            return
        answers["duplicate"] = handle_webhook(
            r, event_id, {}, fast_work, "worker-2", stats=stats, lease=LEASE_SECONDS
        )

    errors = run_threads([slow, duplicate])
    checks.check(not errors, f"no delivery raised {errors[:3]}")
    taken_after = times.get("duplicate claimed", 0.0) - times.get("slow claimed", 0.0)
    checks.check(
        lease - 0.2 <= taken_after <= lease + 0.5,
        f"the waiting duplicate took the claim when the lease expired "
        f"({taken_after:.3f}s after the slow worker's claim)",
    )
    checks.check(
        stats.lost_leases == 1, f"the slow worker's publish answered 0 ({stats.lost_leases} lost)"
    )
    stored = r.get(f"result:{{{event_id}}}")
    checks.check(
        stored is not None and answers.get("slow") == stored == answers.get("duplicate"),
        f"the new owner's result stands, and both deliveries answer it: {stored}",
    )
    checks.check(
        ledger.charges.get(event_id) == 2,
        "the work ran twice (a lease shorter than the work; renew it while working)",
    )


def check_failure(r, checks, run_id):
    """A delivery whose work fails gives the claim back; a waiting one takes over at once."""
    print("a delivery whose work fails, a duplicate waiting:")
    ledger = Ledger()
    event_id = f"evt-{run_id}-fail"
    first_claimed = threading.Event()
    times = {}
    answers = {}

    def failing_work(_payload):
        first_claimed.set()
        time.sleep(0.2)
        times["failed"] = time.monotonic()
        raise RuntimeError("card declined: provider timeout")

    def good_work(_payload):
        times["duplicate claimed"] = time.monotonic()
        return ledger.charge(event_id, 0.05)

    def first():
        try:
            handle_webhook(r, event_id, {}, failing_work, "worker-1")
        except RuntimeError as e:
            answers["first"] = f"raised {e}"

    def duplicate():
        if first_claimed.wait(10):
            answers["duplicate"] = handle_webhook(r, event_id, {}, good_work, "worker-2")

    errors = run_threads([first, duplicate])
    checks.check(not errors, f"no unexpected exception {errors[:3]}")
    checks.check("first" in answers, f"the first delivery raised: {answers.get('first')}")
    taken_after = times.get("duplicate claimed", 1e9) - times.get("failed", 0.0)
    checks.check(
        0 <= taken_after < 0.5,
        f"the waiting duplicate took the claim {taken_after * 1000:.1f} ms after the failure "
        f"(the lease was {LEASE_SECONDS}s)",
    )
    stored = r.get(f"result:{{{event_id}}}")
    checks.check(
        stored is not None and answers.get("duplicate") == stored,
        f"the duplicate did the work and published: {stored}",
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6379)
    parser.add_argument("--events", type=int, default=20)
    parser.add_argument("--deliveries", type=int, default=5)
    parser.add_argument("--work-seconds", type=float, default=0.2)
    args = parser.parse_args()

    r = redis.Redis(
        host=args.host,
        port=args.port,
        decode_responses=True,
        socket_timeout=BLOCK_MS / 1000 + 5,
        max_connections=args.events * args.deliveries + 4,
    )
    try:
        r.ping()
    except redis.RedisError as e:
        print(f"webhook.py: cannot reach {args.host}:{args.port}: {e}", file=sys.stderr)
        return 2
    run_id = uuid.uuid4().hex[:8]
    checks = Checks()
    check_duplicates(r, checks, run_id, args.events, args.deliveries, args.work_seconds)
    check_failure(r, checks, run_id)
    check_lost_lease(r, checks, run_id, lease=1)
    if checks.failed:
        print(f"webhook.py: {checks.failed} check(s) failed")
        return 1
    print("webhook.py: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
