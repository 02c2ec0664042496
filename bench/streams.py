#!/usr/bin/env python3
"""Redis streams side by side: XADD, XADD with trimming, and a consumer group reading and
acknowledging (XREADGROUP + XACK), goblin-server beside redis-server 7 in one run.

Every server is pinned to core 0 (`taskset -c 0`), the load to core 1; rounds alternate
between the servers, so drift on a shared machine hits all of them alike. Servers:
goblin-server `--threads 1` (and `--threads 2` with `--threads 1,2`: both threads on core
0), redis-server (`--save '' --appendonly no`) and, for the run's noise, a second
redis-server ("redis B": its ratios to the first are what chance alone gives). Workloads,
each at every `--pipelines` depth with 50 clients:

- `xadd`: redis-benchmark `XADD s:__rand_int__ * f1 v1 f2 v2 f3 v3 -r 1000` (1000 streams),
  no trimming. Checked afterwards: the streams' lengths add up to every XADD sent.
- `xadd-maxlen`: the same with `MAXLEN ~ 1000`, after an unmeasured warm-up run that
  brings every stream to its cap, so that the measured XADDs trim. Checked afterwards:
  every stream holds between 1000 and 1000 + stream-node-max-entries (100) entries.
- `readgroup`: target/release/goblin-stream-bench: 50 streams filled once per server (explicit
  IDs, pipelined, not measured), a group created again on each for every run, then 50
  connections, each the consumer of its own stream, loop `XREADGROUP GROUP g c<i> COUNT
  10 STREAMS <its stream> >` and `XACK <stream> g <the IDs read>`, with `-P` reads in
  flight per connection (each answered read is followed by its XACK and the next read in
  one write: `-P` read/ack pairs in flight), for `--seconds`. Ops are entries delivered
  and acknowledged; the tool checks that every XACK acknowledged all its IDs, that no
  entry is left pending (XPENDING), that each group's position matches the entries
  delivered (XINFO GROUPS), and delivered = acknowledged.

Reports per workload and depth: ops/s (entries/s for readgroup) and server CPU µs per op
(utime + stime from /proc, 10 ms ticks), medians over the rounds, goblin ÷ redis, and
the noise (redis B ÷ redis). All servers are emptied (FLUSHALL) before each workload.

  bench/streams.py                                  # 3 rounds, -P 1 and 16
  bench/streams.py --rounds 5 --workloads readgroup --pipelines 16 --threads 1,2

Builds nothing: run `cargo build --release -p goblin-server -p goblin-loadgen` first.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

from benchlib import GOBLIN, ROOT, _timed, call, free_port, machine, start, stop

STREAM_BENCH = os.path.join(ROOT, "target", "release", "goblin-stream-bench")
FIELDS = ["f1", "v1", "f2", "v2", "f3", "v3"]
COMMANDS = {
    "xadd": ["XADD", "s:__rand_int__", "*"] + FIELDS,
    "xadd-maxlen": ["XADD", "s:__rand_int__", "MAXLEN", "~", "1000", "*"] + FIELDS,
}
KEYSPACE = 1000  # -r: streams s:000000000000 … s:000000000999
MAXLEN = 1000
NODE_ENTRIES = 100  # stream-node-max-entries, the default of both servers


def redis_benchmark(server, words, pipeline, requests, clients):
    """redis-benchmark pinned to core 1 with a custom command: (ops/s, server CPU µs/op).
    An error reply in its output fails the run."""
    argv = ["taskset", "-c", "1", "redis-benchmark", "-p", str(server["port"]), "-P",
            str(pipeline), "-n", str(requests), "-c", str(clients), "-r", str(KEYSPACE),
            "--csv"] + words
    done, fig = _timed(argv, server["proc"].pid)
    text = done.stdout + done.stderr
    rows = [l for l in done.stdout.replace("\r", "\n").splitlines() if l.startswith('"')]
    if done.returncode != 0 or "ERR" in text or "Error" in text or len(rows) < 2:
        raise SystemExit(f"redis-benchmark {' '.join(words)} -P {pipeline} against "
                         f"{server['name']}:\n{text}")
    # The test name (the command) contains commas: rps is the first number after it.
    head = [h.strip('"') for h in rows[0].split('","')]
    nums = [float(v.strip('"')) for v in rows[-1].rsplit(",", len(head) - 1)[1:]]
    rps = dict(zip(head[1:], nums))["rps"]
    return rps, fig["server_cpu_s"] * 1e6 / requests


def pipelined(port, commands):
    """Sends `commands` (lists of words) on one connection and returns their integer
    replies (the commands used here answer integers)."""
    req = b""
    for args in commands:
        req += b"*%d\r\n" % len(args)
        for a in args:
            a = str(a).encode()
            req += b"$%d\r\n%s\r\n" % (len(a), a)
    out = []
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(req)
        with s.makefile("rb") as f:
            for _ in commands:
                line = f.readline()
                if not line.startswith(b":"):
                    raise RuntimeError(f"expected an integer, got {line!r}")
                out.append(int(line[1:]))
    return out


def stream_lengths(port):
    return pipelined(port, [["XLEN", f"s:{i:012d}"] for i in range(KEYSPACE)])


def flush(servers):
    for s in servers:
        for _ in range(600):
            try:
                ok = call(s["port"], "FLUSHALL") == "OK"
                break
            except RuntimeError as e:  # a dump.rdb in the working directory loading
                if not str(e).startswith("LOADING"):
                    raise
                time.sleep(0.1)
        else:
            ok = False
        if not ok:
            raise SystemExit(f"FLUSHALL failed on {s['name']}")
    time.sleep(1)  # whatever frees in the background, before anything is measured


def stream_bench(server, pipeline, seconds, entries):
    """One goblin-stream-bench run: its JSON (entries_per_sec, server_cpu_us_per_entry …)."""
    argv = ["taskset", "-c", "1", STREAM_BENCH, "--port", str(server["port"]),
            "--streams", "50", "--connections", "50", "--count", "10",
            "--pipeline", str(pipeline), "--seconds", str(seconds), "--entries", str(entries),
            "--server-pid", str(server["proc"].pid)]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"goblin-stream-bench -P {pipeline} against {server['name']} "
                         f"failed:\n{done.stdout}{done.stderr}")
    doc = json.loads(done.stdout)
    if doc["ended_by"] != "time":
        print(f"# warning: {server['name']} drained its streams at -P {pipeline} after "
              f"{doc['seconds']} s: raise --entries", file=sys.stderr)
    return doc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", default="xadd,xadd-maxlen,readgroup")
    ap.add_argument("--pipelines", default="1,16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=0,
                    help="XADDs per run (default: 600,000 at -P > 1, 100,000 at -P 1)")
    ap.add_argument("--seconds", type=float, default=3.0, help="per readgroup run")
    ap.add_argument("--entries", type=int, default=40_000,
                    help="readgroup: entries per stream (50 streams); enough for a run")
    ap.add_argument("--threads", default="1", help="goblin-server thread counts")
    ap.add_argument("--no-noise", action="store_true", help="no second redis-server")
    a = ap.parse_args()
    for binary in (GOBLIN, STREAM_BENCH):
        if not os.path.exists(binary):
            raise SystemExit(f"{binary} is missing: cargo build --release "
                             "-p goblin-server -p goblin-loadgen")
    m = machine()
    servers = []
    try:
        for t in a.threads.split(","):
            port = free_port()
            servers.append(start(f"goblin --threads {t}",
                                 [GOBLIN, "--port", str(port), "--threads", t], port))
        for name in ["redis", "redis B"][:1 if a.no_noise else 2]:
            port = free_port()
            servers.append(start(name, ["redis-server", "--port", str(port), "--save", "",
                                        "--appendonly", "no"], port))
        goblins = [s for s in servers if s["name"].startswith("goblin")]
        redis = next(s for s in servers if s["name"] == "redis")
        redis_b = next((s for s in servers if s["name"] == "redis B"), None)
        print(f"# {m['cpu']}, {m['nproc']} cores, load {m['loadavg']}, redis {m['redis']}, "
              f"goblin {m['goblin']}; servers on core 0, load on core 1; {a.clients} "
              f"clients; median of {a.rounds} rounds")
        cols = "".join(f" {g['name']} ops/s | CPU µs/op |" for g in goblins)
        print(f"| workload | -P |{cols} redis ops/s | CPU µs/op | goblin ÷ redis ops/s "
              f"| goblin ÷ redis CPU/op |" + (" noise: redis B ÷ redis ops/s / CPU/op |"
                                               if redis_b else ""))
        print("|---|--:|" + "--:|--:|" * len(goblins) + "--:|--:|--:|--:|"
              + ("--:|" if redis_b else ""))
        for workload in a.workloads.split(","):
            if workload not in COMMANDS and workload != "readgroup":
                raise SystemExit(f"unknown workload {workload}")
            flush(servers)
            for pipeline in [int(p) for p in a.pipelines.split(",")]:
                requests = a.requests or (600_000 if pipeline > 1 else 100_000)
                if workload == "xadd-maxlen":
                    # Every stream to its cap first (unmeasured), so that the measured
                    # XADDs trim.
                    for s in servers:
                        while min(stream_lengths(s["port"])) < MAXLEN:
                            redis_benchmark(s, COMMANDS[workload], 16, KEYSPACE * MAXLEN * 6 // 5,
                                            a.clients)
                got = {s["name"]: [] for s in servers}
                for _ in range(a.rounds):
                    for s in servers:
                        if workload == "readgroup":
                            doc = stream_bench(s, pipeline, a.seconds, a.entries)
                            got[s["name"]].append((doc["entries_per_sec"],
                                                   doc["server_cpu_us_per_entry"]))
                            continue
                        before = sum(stream_lengths(s["port"])) if workload == "xadd" else 0
                        got[s["name"]].append(redis_benchmark(s, COMMANDS[workload], pipeline,
                                                              requests, a.clients))
                        lengths = stream_lengths(s["port"])
                        if workload == "xadd" and sum(lengths) != before + requests:
                            raise SystemExit(f"{s['name']}: {sum(lengths) - before} entries "
                                             f"added by {requests} XADDs")
                        if workload == "xadd-maxlen" and not (
                                MAXLEN <= min(lengths) and max(lengths) < MAXLEN + NODE_ENTRIES):
                            raise SystemExit(f"{s['name']}: stream lengths {min(lengths)}–"
                                             f"{max(lengths)} after XADD MAXLEN ~ {MAXLEN}")
                med = {n: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
                       for n, v in got.items()}
                r_rps, r_cpu = med["redis"]
                cells = "".join(f" {med[g['name']][0]:,.0f} | {med[g['name']][1]:.3f} |"
                                for g in goblins)
                g_rps, g_cpu = med[goblins[0]["name"]]
                noise = ""
                if redis_b:
                    b_rps, b_cpu = med["redis B"]
                    noise = f" {b_rps / r_rps:.2f} / {b_cpu / r_cpu:.2f} |"
                print(f"| {workload} | {pipeline} |{cells} {r_rps:,.0f} | {r_cpu:.3f} | "
                      f"{g_rps / r_rps:.2f} | {g_cpu / r_cpu:.2f} |{noise}", flush=True)
        flush(servers)
    finally:
        stop(servers)


if __name__ == "__main__":
    main()
