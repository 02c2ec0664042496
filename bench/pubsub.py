#!/usr/bin/env python3
"""Pub/Sub side by side: PUBLISH throughput to 1, 100 and 10,000 subscribers, and the
publish -> receive latency, goblin-server beside redis-server 7 in the same run.

Each server is pinned to core 0 (`taskset -c 0`), goblin-pubsub-bench (one thread, one
event loop for every subscriber and the publisher) to core 1; rounds alternate between
the servers. Per run: publishes/s and deliveries/s while one publisher keeps 16
PUBLISHes in flight (never more than 256 messages ahead of its subscribers), the
server's CPU per 1,000 publishes, then 1,000 PUBLISHes one at a time: the latency from
sending each to each subscriber's receipt (p50, p99). goblin runs with --threads 1 and
with --threads 2 (both threads on core 0: the subscribers spread over both threads, so
every PUBLISH crosses threads).

  bench/pubsub.py                        # 1, 100, 10000 subscribers, 3 rounds
  bench/pubsub.py --subscribers 100 --rounds 5 --seconds 5

Builds nothing: run `cargo build --release -p goblin-server -p goblin-loadgen` first.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess

from benchlib import GOBLIN, ROOT, free_port, start, stop

BENCH = os.path.join(ROOT, "target", "release", "goblin-pubsub-bench")


def run(server, subscribers, seconds):
    out = subprocess.run(
        ["taskset", "-c", "1", BENCH, "--port", str(server["port"]), "--subscribers",
         str(subscribers), "--seconds", str(seconds), "--latency-publishes", "1000",
         "--server-pid", str(server["proc"].pid)],
        check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--subscribers", default="1,100,10000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--threads", default="1,2", help="goblin-server thread counts")
    opts = ap.parse_args()
    # 10,000 subscribers need descriptors: raise the soft limit for us and the servers.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    maxclients = str(min(hard - 100, 20000))
    servers = []
    try:
        for t in opts.threads.split(","):
            port = free_port()
            servers.append(start(f"goblin --threads {t}",
                                 [GOBLIN, "--port", str(port), "--threads", t,
                                  "--maxclients", maxclients], port))
        port = free_port()
        servers.append(start("redis-server", ["redis-server", "--port", str(port), "--save", "",
                                              "--appendonly", "no", "--maxclients", maxclients],
                             port))
        print(f"# {os.uname().nodename}, {os.cpu_count()} cores; servers on core 0, "
              f"goblin-pubsub-bench on core 1; {opts.seconds} s per run; median of "
              f"{opts.rounds} rounds")
        print(f"{'subs':>6}  {'server':20} {'publish/s':>10} {'deliver/s':>10} "
              f"{'CPU ms/1k':>10} {'p50 us':>8} {'p99 us':>8}")
        for subscribers in [int(s) for s in opts.subscribers.split(",")]:
            results = {s["name"]: [] for s in servers}
            for _ in range(opts.rounds):
                for s in servers:
                    results[s["name"]].append(run(s, subscribers, opts.seconds))
            for s in servers:
                rs = results[s["name"]]

                def med(f):
                    return statistics.median(f(r) for r in rs)
                print(f"{subscribers:>6}  {s['name']:20} "
                      f"{med(lambda r: r['publishes_per_sec']):>10.0f} "
                      f"{med(lambda r: r['deliveries_per_sec']):>10.0f} "
                      f"{med(lambda r: r['server_cpu_ms_per_1k_publishes']):>10.2f} "
                      f"{med(lambda r: r['latency_us']['p50']):>8.1f} "
                      f"{med(lambda r: r['latency_us']['p99']):>8.1f}", flush=True)
    finally:
        stop(servers)


if __name__ == "__main__":
    main()
