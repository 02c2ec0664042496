#!/usr/bin/env python3
"""Plain commands while cross-shard commands hold locks: two goblin-server builds side by
side (a change's before and after), --threads 2.

In one run, rounds alternating between the builds, each server pinned to core 0 and the
load to core 1: goblin-loadgen's claim workload (a claim's two keys in different slots,
so every claim is a plan that locks keys on both shards) runs for the whole measurement
while redis-benchmark sends GET and SET -P 16 from 50 clients. Prints, per build, the
medians of redis-benchmark's throughput, the claim workload's throughput, and the
server's CPU per operation of both together.

  cargo build --release -p goblin-server -p goblin-loadgen
  bench/mixed-locks.py --before /path/to/old/goblin-server --rounds 3
"""
import argparse
import os
import statistics
import tempfile
import threading

from benchlib import GOBLIN, LOADGEN, free_port, loadgen, redis_benchmark, start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True, help="the old goblin-server binary")
    ap.add_argument("--after", default=GOBLIN, help="the new goblin-server binary")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--keyspace", type=int, default=100_000)
    ap.add_argument("--claim-connections", type=int, default=16)
    opts = ap.parse_args()

    results = {}
    json_path = os.path.join(tempfile.mkdtemp(prefix="goblin-mixed-"), "claim.json")
    for _ in range(opts.rounds):
        for build, binary in (("before", opts.before), ("after", opts.after)):
            for test in ("get", "set"):
                port = free_port()
                server = start(f"goblin {build}", [binary, "--port", str(port), "--threads", "2",
                                                   "--save", "", "--dir",
                                                   tempfile.mkdtemp(prefix="goblin-bench-")],
                               port)
                try:
                    claim = {}

                    def run_claims():
                        claim.update(loadgen(server, ["--workload", "claim", "--connections",
                                                      str(opts.claim_connections),
                                                      "--duration", "8"], json_path,
                                             binary=LOADGEN))

                    t = threading.Thread(target=run_claims)
                    t.start()
                    r = redis_benchmark(server, ["-t", test], 16, opts.requests, 50, opts.keyspace)
                    t.join()
                    if not claim:
                        raise RuntimeError("the claim workload did not finish")
                    # Operations the server served while redis-benchmark ran: its own, and
                    # the claims of that span (the workload's rate times its length).
                    span = opts.requests / r["rps"]
                    ops = opts.requests + claim["rps"] * span
                    key = (build, test)
                    results.setdefault(key, []).append(
                        (r["rps"], claim["rps"], r["server_cpu_s"] * 1e6 / ops))
                finally:
                    server["proc"].kill()
                    server["proc"].wait()

    print(f"{'build':8} {'test':5} {'redis-benchmark ops/s':>22} {'claims/s':>10} "
          f"{'server CPU us/op':>17}")
    for (build, test), runs in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        med = [statistics.median(r[i] for r in runs) for i in range(3)]
        print(f"{build:8} {test:5} {med[0]:>22.0f} {med[1]:>10.0f} {med[2]:>17.3f}")


if __name__ == "__main__":
    main()
