#!/usr/bin/env python3
"""Server CPU time per operation, side by side, with redis-benchmark as the load.

Starts each server configuration pinned to core 0 (`taskset -c 0`), runs redis-benchmark
pinned to core 1 against each in turn (rounds alternate between servers, so drift on a
shared machine hits all of them alike), reads each server's CPU time (utime + stime) from
/proc before and after, and prints throughput and CPU microseconds per operation (median
over rounds) and each configuration's CPU per op relative to the first.

  bench/cpu-per-op.py                      # goblin --threads 1 and 2, and redis-server
  bench/cpu-per-op.py --tests set,get --pipelines 16,1 --rounds 3
  bench/cpu-per-op.py --server-cpus 0,1 --load-cpus 0,1   # the hop, shards not sharing a core

Builds nothing: run `cargo build --release -p goblin-server` first.
"""
import argparse
import os
import signal
import statistics

from benchlib import GOBLIN, bench, free_port, start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tests", default="set,get")
    ap.add_argument("--pipelines", default="16,1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--keyspace", type=int, default=1_000_000)
    ap.add_argument("--requests", type=int, default=0, help="per run (default: by pipeline)")
    ap.add_argument("--threads", default="1,2", help="goblin-server thread counts")
    ap.add_argument("--no-redis", action="store_true")
    ap.add_argument("--server-cpus", default="0", help="taskset list for the servers")
    ap.add_argument("--load-cpus", default="1", help="taskset list for redis-benchmark")
    opts = ap.parse_args()

    servers = []
    try:
        for t in opts.threads.split(","):
            port = free_port()
            servers.append(start(f"goblin --threads {t}",
                                 [GOBLIN, "--port", str(port), "--threads", t], port,
                                 cpus=opts.server_cpus))
        if not opts.no_redis:
            port = free_port()
            servers.append(start("redis-server", ["redis-server", "--port", str(port), "--save", "",
                                                  "--appendonly", "no"], port,
                                 cpus=opts.server_cpus))
        print(f"# {os.uname().nodename}, {os.cpu_count()} cores; servers on cores "
              f"{opts.server_cpus}, redis-benchmark on {opts.load_cpus}; {opts.clients} "
              f"clients, random keys over "
              f"{opts.keyspace}; median of {opts.rounds} rounds")
        print(f"{'test':6} {'-P':>3}  {'server':22} {'ops/s':>10} {'CPU us/op':>10} {'vs first':>9}")
        for pipeline in [int(p) for p in opts.pipelines.split(",")]:
            requests = opts.requests or (2_000_000 if pipeline > 1 else 300_000)
            for test in opts.tests.split(","):
                results = {s["name"]: [] for s in servers}
                for _ in range(opts.rounds):
                    for s in servers:
                        results[s["name"]].append(
                            bench(s, test, pipeline, requests, opts.clients, opts.keyspace,
                                  cpu=opts.load_cpus))
                base = None
                for s in servers:
                    rps = statistics.median(r[0] for r in results[s["name"]])
                    cpu = statistics.median(r[1] for r in results[s["name"]])
                    base = base or cpu
                    print(f"{test:6} {pipeline:>3}  {s['name']:22} {rps:>10.0f} {cpu:>10.3f} "
                          f"{cpu / base:>8.2f}x")
    finally:
        for s in servers:
            s["proc"].send_signal(signal.SIGTERM)
            s["proc"].wait()


if __name__ == "__main__":
    main()
