#!/usr/bin/env python3
"""Server instructions per operation, counted by callgrind: repeatable whatever else the
machine is doing, so two builds compare without noise (wall-clock CPU time on a shared
VM drifts by 10–20% at -P 1).

For each binary and each test, the server runs under `valgrind --tool=callgrind` twice,
serving N and 2N requests from redis-benchmark (50 clients); the difference of the two
instruction totals, divided by N, is what a request costs, start-up excluded.

  bench/instructions.py --bins before=/path/old,after=target/release/goblin-server
  bench/instructions.py --bins off=target/release/goblin-server,log=target/release/goblin-server+--appendonly+yes
  bench/instructions.py --tests get,set --pipelines 1,16 --requests 20000
"""
import argparse
import os
import re
import subprocess
import tempfile
import time

from benchlib import GOBLIN, free_port, wait_port


# Tests that are not redis-benchmark's own: their command. With one key (the default), a
# claim is won once and then found held: the held path, which reads the result key.
CUSTOM = {
    "claim": ["GOBLIN.CLAIM", "claim:__rand_int__", "result:__rand_int__", "w", "30"],
    # A script of one lookup, its key declared (routing reads its body: `plan_if`).
    "eval": ["EVAL", "return redis.call('get', KEYS[1])", "1", "key:__rand_int__"],
}

# Tests that need data first, and the redis-benchmark words that make it (the same in both
# runs, so not counted): LPOP and RPOP pop from redis-benchmark's `mylist`, filled with
# more elements than the larger run pops (2N with the default N).
PREFILL = {
    "lpop": ["-n", "100000", "-t", "lpush"],
    "rpop": ["-n", "100000", "-t", "lpush"],
}


def instructions(binary, threads, test, pipeline, requests, clients, keyspace):
    """Total instructions of a server that served `requests` of `test`."""
    port = free_port()
    out = os.path.join(tempfile.mkdtemp(), "cg.out")
    # A binary may carry arguments after '+': `target/release/goblin-server+--appendonly+yes`.
    binary, *extra = binary.split("+")
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary, "--bind",
         "127.0.0.1", "--port", str(port), "--threads", str(threads), "--save", "", "--dir", os.path.dirname(out)]
        + extra,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, timeout=60)
        if test == "get":
            # GETs that hit: fill the keys first (not counted twice: the same in both runs).
            subprocess.run(["redis-benchmark", "-p", str(port), "-n", str(keyspace), "-r",
                            str(keyspace), "-P", "64", "-c", "10", "-t", "set", "-q"],
                           capture_output=True, check=True)
        if test in PREFILL:
            subprocess.run(["redis-benchmark", "-p", str(port), "-P", "64", "-c", "10", "-q"]
                           + PREFILL[test], capture_output=True, check=True)
        words = CUSTOM.get(test, ["-t", test])
        subprocess.run(["redis-benchmark", "-p", str(port), "-n", str(requests), "-r",
                        str(keyspace), "-P", str(pipeline), "-c", str(clients), "-q"] + words,
                       capture_output=True, check=True)
    finally:
        server.terminate()
        server.wait()
    time.sleep(0.2)
    with open(out) as f:
        text = f.read()
    m = re.search(r"^summary:\s+(\d+)", text, re.M) or re.search(r"^totals:\s+(\d+)", text, re.M)
    if not m:
        raise RuntimeError(f"no totals in {out}")
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bins", default=f"goblin={GOBLIN}", help="name=path,...")
    ap.add_argument("--tests", default="set,get")
    ap.add_argument("--pipelines", default="16,1")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--keyspace", type=int, default=1,
                    help="keys (1: every request hits the same key, so runs repeat exactly)")
    opts = ap.parse_args()
    bins = [b.split("=", 1) for b in opts.bins.split(",")]
    n = opts.requests
    print(f"# instructions per request (callgrind), --threads {opts.threads}, {opts.clients} "
          f"clients, keys over {opts.keyspace}: (I(2N) - I(N)) / N with N = {n}")
    print("| test | -P | " + " | ".join(name for name, _ in bins) + " |")
    print("|---|--:|" + "--:|" * len(bins))
    for pipeline in [int(p) for p in opts.pipelines.split(",")]:
        for test in opts.tests.split(","):
            row = []
            for _, path in bins:
                small = instructions(path, opts.threads, test, pipeline, n, opts.clients,
                                     opts.keyspace)
                large = instructions(path, opts.threads, test, pipeline, 2 * n, opts.clients,
                                     opts.keyspace)
                row.append((large - small) / n)
            print(f"| {test.upper()} | {pipeline} | " + " | ".join(f"{r:.0f}" for r in row) + " |",
                  flush=True)


if __name__ == "__main__":
    main()
