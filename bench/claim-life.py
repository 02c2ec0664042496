#!/usr/bin/env python3
"""The claim's whole life, side by side: duplicates that wait with BLOCK against duplicates
that poll, on goblin-server and on redis-server running the oracle scripts.

One run, three cases, rounds alternating between them (so drift on a shared machine hits
all alike); servers pinned to core 0, goblin-loadgen (one thread) to core 1:
- goblin, BLOCK:   `GOBLIN.CLAIM … BLOCK ms` (every call; duplicates on waiter connections
                   of their own), GOBLIN.PUBLISH, GOBLIN.RENEW;
- goblin, polling: GOBLIN.CLAIM without BLOCK; a duplicate answered nil asks again after
                   --poll-ms (100 ms, as common idempotency libraries do);
- redis, polling:  EVALSHA of the CLAIM, PUBLISH and RENEW oracle scripts, same polling.
The workload is goblin-loadgen's claim workload, identical in every case but for how
duplicates wait: --dup-ratio of the requests repeat a recent id, and of the winners
--crash-ratio never publish, --renew-ratio work --long-work-ms renewing every half lease,
--stale-ratio stall past their lease and are refused. Every run starts from an empty
keyspace (FLUSHALL) and must end without a violation (goblin-loadgen exits 3 otherwise,
and this script fails) — unless --allow-violations, which records such runs and shows
their violations in the table (to measure a server with a known bug).

Per case (medians over rounds): completed requests per second (a result in hand: replayed,
or published by the winner), calls per second, server CPU microseconds per completed
request (utime + stime from /proc over the run), and the time a duplicate that found the
work in flight waits from its first call to the result in hand (p50, p99).

  cargo build --release -p goblin-server -p goblin-loadgen
  bench/claim-life.py --rounds 3 --duration 10
"""
import argparse
import json
import os
import statistics
import tempfile

from benchlib import GOBLIN, LOADGEN, _timed, call, free_port, loadgen, machine, start, stop

# goblin-loadgen's exit status for a run that found violations.
EXIT_VIOLATION = 3


def run(server, args, json_path, allow_violations):
    """benchlib.loadgen, or with `allow_violations` the same run accepting exit status 3."""
    if not allow_violations:
        return loadgen(server, args, json_path)
    argv = ["taskset", "-c", "1", LOADGEN, "--port", str(server["port"])] + list(args) + \
        ["--quiet", "--json", json_path]
    if os.path.exists(json_path):
        os.unlink(json_path)
    done, fig = _timed(argv, server["proc"].pid)
    if done.returncode not in (0, EXIT_VIOLATION) or not os.path.exists(json_path):
        raise RuntimeError(f"goblin-loadgen exited {done.returncode} against "
                           f"{server['name']}:\n{done.stdout}{done.stderr}")
    with open(json_path) as f:
        doc = json.load(f)
    return {"doc": doc, "argv": argv, **fig}


def workload(opts):
    """The claim workload's options common to every case."""
    return ["--workload", "claim", "--connections", str(opts.connections), "--pipeline",
            str(opts.pipeline), "--duration", str(opts.duration), "--seed", str(opts.seed),
            "--dup-ratio", str(opts.dup_ratio), "--crash-ratio", str(opts.crash_ratio),
            "--renew-ratio", str(opts.renew_ratio), "--stale-ratio", str(opts.stale_ratio),
            "--work-ms", str(opts.work_ms), "--long-work-ms", str(opts.long_work_ms),
            "--lease-secs", str(opts.lease_secs), "--hash-tag"]


def figures(r):
    """What one run measured."""
    doc = r["doc"]
    claim = doc["claim"]
    completed = claim["completed"]
    return {
        "completed_s": claim["completed_per_s"],
        "calls_s": doc["throughput_ops"],
        "cpu_us": r["server_cpu_s"] * 1e6 / completed if completed else float("nan"),
        "server_busy": r["server_cpu_s"] / r["wall_s"],
        "client_busy": r["client_cpu_s"] / r["wall_s"],
        "core0_other": max(0.0, r["cores_busy_s"].get(0, 0.0) - r["server_cpu_s"]) / r["wall_s"],
        "wait_p50": claim["dup_wait_ms"]["p50"],
        "wait_p99": claim["dup_wait_ms"]["p99"],
        "waits": claim["dup_wait_ms"]["count"],
        "polls_s": claim["polls"] / doc["elapsed_s"],
        "takeovers": claim["takeovers"],
        "refused": claim["publish_refused"],
        "renewals": claim["renewals"],
        "timeouts": claim["block_timeouts"],
        "waiting_at_end": claim["waiting_at_end"],
        "violations": claim["violations"],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per run")
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--pipeline", type=int, default=1)
    ap.add_argument("--block", type=int, default=5000, help="BLOCK timeout, ms")
    ap.add_argument("--waiters", type=int, default=200, help="waiter connections (BLOCK case)")
    ap.add_argument("--poll-ms", type=int, default=100)
    ap.add_argument("--dup-ratio", type=float, default=0.2)
    ap.add_argument("--crash-ratio", type=float, default=0.01)
    ap.add_argument("--renew-ratio", type=float, default=0.01)
    ap.add_argument("--stale-ratio", type=float, default=0.01)
    ap.add_argument("--work-ms", type=int, default=1)
    ap.add_argument("--long-work-ms", type=int, default=1500)
    ap.add_argument("--lease-secs", type=int, default=1)
    ap.add_argument("--goblin-threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--json", help="write every run's figures and goblin-loadgen JSON here")
    ap.add_argument("--allow-violations", action="store_true",
                    help="record runs that found violations instead of failing")
    opts = ap.parse_args()

    common = workload(opts)
    poll = ["--poll-ms", str(opts.poll_ms)]
    servers = []
    try:
        pg, pr = free_port(), free_port()
        goblin = start(f"goblin --threads {opts.goblin_threads}",
                       [GOBLIN, "--port", str(pg), "--threads", str(opts.goblin_threads)], pg)
        servers.append(goblin)
        redis = start("redis-server", ["redis-server", "--port", str(pr), "--save", "",
                                       "--appendonly", "no"], pr)
        servers.append(redis)
        cases = [
            ("goblin, BLOCK", goblin, ["--target", "goblin", "--block", str(opts.block),
                                       "--waiters", str(opts.waiters)]),
            ("goblin, polling", goblin, ["--target", "goblin"] + poll),
            ("redis, scripts + polling", redis, ["--target", "redis"] + poll),
        ]
        m = machine()
        json_path = os.path.join(tempfile.mkdtemp(), "claim-life.json")
        runs = {name: [] for name, _, _ in cases}
        for rnd in range(opts.rounds):
            for name, server, extra in cases:
                call(server["port"], "FLUSHALL")
                r = run(server, common + extra, json_path, opts.allow_violations)
                f = figures(r)
                runs[name].append({"figures": f, "argv": r["argv"], "loadgen": r["doc"]})
                print(f"# round {rnd + 1} {name}: {f['completed_s']:.0f} completed/s, "
                      f"{f['cpu_us']:.2f} us CPU/completed, wait p50 {f['wait_p50']:.2f} ms "
                      f"p99 {f['wait_p99']:.2f} ms", flush=True)
        with open("/proc/loadavg") as f:
            load_after = " ".join(f.read().split()[:3])
    finally:
        stop(servers)

    med = {name: {k: statistics.median(r["figures"][k] for r in rs)
                  for k in rs[0]["figures"]} for name, rs in runs.items()}
    print(f"\n{m['cpu']}, {m['nproc']} cores, kernel {m['kernel']}; {m['redis']}; goblin "
          f"{m['goblin']}; load average {m['loadavg']} before, {load_after} after")
    print(f"servers on core 0, goblin-loadgen (1 thread) on core 1; median of {opts.rounds} "
          f"rounds of {opts.duration:g} s\n")
    print("| case | completed req/s | calls/s | server CPU µs per completed | server core busy "
          "| dup wait p50 (ms) | dup wait p99 (ms) | in-flight dups | polls/s | violations |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, _, _ in cases:
        f = med[name]
        print(f"| {name} | {f['completed_s']:,.0f} | {f['calls_s']:,.0f} | {f['cpu_us']:.2f} | "
              f"{f['server_busy']:.0%} | {f['wait_p50']:.2f} | {f['wait_p99']:.1f} | "
              f"{f['waits']:,.0f} | {f['polls_s']:,.0f} | {f['violations']:.0f} |")
    print("\nOther work on core 0 (besides the server), share of the run: " + ", ".join(
        f"{name} {med[name]['core0_other']:.0%}" for name, _, _ in cases))
    print("goblin-loadgen's CPU, share of core 1: " + ", ".join(
        f"{name} {med[name]['client_busy']:.0%}" for name, _, _ in cases))
    for name, _, _ in cases:
        bad = [r["loadgen"]["claim"] for r in runs[name] if r["figures"]["violations"]]
        if bad:
            print(f"\n{name}: violations in {len(bad)} of {len(runs[name])} runs, e.g.:")
            for text in bad[0]["violation_examples"][:3]:
                print(f"  {text}")
    print("\ngoblin-loadgen commands (ports vary):")
    for name, _, _ in cases:
        argv = runs[name][0]["argv"]
        print(f"  {name}: " + " ".join(a if a != LOADGEN else "target/release/goblin-loadgen"
                                       for a in argv))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"machine": m, "load_after": load_after, "options": vars(opts),
                       "medians": med, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
