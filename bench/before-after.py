#!/usr/bin/env python3
"""Two goblin-server builds side by side (a change's before and after), with redis-server
as the yardstick and a second redis-server as the measure of the machine's noise.

In one run, rounds alternating between every server so that drift hits all alike, every
server pinned to core 0 and the load to core 1:
- SET and GET with redis-benchmark, -P 16 and -P 1: throughput and server CPU per op, for
  each build with --threads 1 and --threads 2 (the cross-shard hop cost is t2 / t1), and
  for two redis-servers (their ratio is the noise);
- GOBLIN.CLAIM with redis-benchmark on --threads 1, -P 16 and -P 1;
- goblin-loadgen's claim workload on --threads 2 with a claim's keys in different slots
  (the claim that crosses shards).
Prints a table per figure: the medians, after ÷ before, and redis ÷ redis.

  cargo build --release -p goblin-server -p goblin-loadgen
  bench/before-after.py --before /path/to/old/goblin-server [--after target/release/goblin-server]

Builds nothing. The goblin-loadgen used is --loadgen (default: this tree's release build).
"""
import argparse
import os
import signal
import statistics
import tempfile

from benchlib import GOBLIN, LOADGEN, bench, call, free_port, loadgen, start


def median(values):
    return statistics.median(values) if values else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True, help="the old goblin-server binary")
    ap.add_argument("--after", default=GOBLIN, help="the new goblin-server binary")
    ap.add_argument("--loadgen", default=LOADGEN)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--keyspace", type=int, default=1_000_000)
    ap.add_argument("--duration", type=int, default=5, help="seconds per goblin-loadgen run")
    ap.add_argument("--skip-claim", action="store_true")
    opts = ap.parse_args()

    servers = {}
    try:
        for build, binary in (("before", opts.before), ("after", opts.after)):
            for threads in ("1", "2"):
                port = free_port()
                name = f"{build} t{threads}"
                servers[name] = start(name, [binary, "--port", str(port), "--threads", threads],
                                      port)
        for name in ("redis A", "redis B"):
            port = free_port()
            servers[name] = start(name, ["redis-server", "--port", str(port), "--save", "",
                                         "--appendonly", "no"], port)
        print(f"# {os.uname().nodename}, {os.cpu_count()} cores; servers on core 0, load on "
              f"core 1; {opts.clients} clients, keys over {opts.keyspace}; median of "
              f"{opts.rounds} rounds, servers alternating")
        results = {}

        def record(key, value):
            results.setdefault(key, []).append(value)

        # SET then GET (GET hits), at -P 16 and -P 1, on every server.
        for pipeline in (16, 1):
            requests = 2_000_000 if pipeline > 1 else 300_000
            for _ in range(opts.rounds):
                for test in ("set", "get"):
                    for name, server in servers.items():
                        record((test, pipeline, name),
                               bench(server, test, pipeline, requests, opts.clients,
                                     opts.keyspace))
        claim = ["GOBLIN.CLAIM", "claim:__rand_int__", "result:__rand_int__", "w", "30"]
        json_path = os.path.join(tempfile.mkdtemp(), "run.json")
        if not opts.skip_claim:
            for pipeline in (16, 1):
                requests = 2_000_000 if pipeline > 1 else 300_000
                for _ in range(opts.rounds):
                    for build in ("before", "after"):
                        server = servers[f"{build} t1"]
                        call(server["port"], "FLUSHALL")
                        record(("claim", pipeline, build),
                               bench(server, None, pipeline, requests, opts.clients,
                                     opts.keyspace, claim))
                    for build in ("before", "after"):
                        server = servers[f"{build} t2"]
                        call(server["port"], "FLUSHALL")
                        r = loadgen(server, ["--workload", "claim", "--pipeline", str(pipeline),
                                             "--connections", str(opts.clients), "--duration",
                                             str(opts.duration), "--keyspace",
                                             str(opts.keyspace)], json_path,
                                    binary=opts.loadgen)
                        record(("cross-claim", pipeline, build),
                               (r["rps"], r["server_cpu_s"] * 1e6 / r["requests"]))

        def med(key):
            runs = results.get(key, [])
            return median([r[0] for r in runs]), median([r[1] for r in runs])

        print("\n## SET/GET: server CPU µs per op (ops/s)")
        print("| test | -P | before t1 | after t1 | after ÷ before | redis A | redis B | "
              "redis B ÷ A | after ÷ redis |")
        print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
        for pipeline in (16, 1):
            for test in ("set", "get"):
                b, a = med((test, pipeline, "before t1")), med((test, pipeline, "after t1"))
                ra, rb = med((test, pipeline, "redis A")), med((test, pipeline, "redis B"))
                print(f"| {test.upper()} | {pipeline} | {b[1]:.3f} ({b[0]:.0f}) | "
                      f"{a[1]:.3f} ({a[0]:.0f}) | **{a[1] / b[1]:.2f}** | {ra[1]:.3f} ({ra[0]:.0f})"
                      f" | {rb[1]:.3f} ({rb[0]:.0f}) | {rb[1] / ra[1]:.2f} | "
                      f"{a[1] / ((ra[1] + rb[1]) / 2):.2f} |")
        print("\n## The cross-shard hop: CPU per op with --threads 2 ÷ --threads 1")
        print("| test | -P | before t2 ÷ t1 | after t2 ÷ t1 |")
        print("|---|--:|--:|--:|")
        for pipeline in (16, 1):
            for test in ("set", "get"):
                hop = {}
                for build in ("before", "after"):
                    hop[build] = (med((test, pipeline, f"{build} t2"))[1]
                                  / med((test, pipeline, f"{build} t1"))[1])
                print(f"| {test.upper()} | {pipeline} | {hop['before']:.2f} | "
                      f"{hop['after']:.2f} |")
        if not opts.skip_claim:
            print("\n## GOBLIN.CLAIM: CPU µs per op (ops/s)")
            print("| case | -P | before | after | after ÷ before (CPU) |")
            print("|---|--:|--:|--:|--:|")
            for kind, label in (("claim", "redis-benchmark, --threads 1"),
                                ("cross-claim", "loadgen claim workload, --threads 2, "
                                                "keys in different slots")):
                for pipeline in (16, 1):
                    b, a = med((kind, pipeline, "before")), med((kind, pipeline, "after"))
                    print(f"| {label} | {pipeline} | {b[1]:.3f} ({b[0]:.0f}) | "
                          f"{a[1]:.3f} ({a[0]:.0f}) | **{a[1] / b[1]:.2f}** |")
    finally:
        for s in servers.values():
            s["proc"].send_signal(signal.SIGTERM)
            s["proc"].wait()


if __name__ == "__main__":
    main()
