#!/usr/bin/env python3
"""BullMQ as an application: wall time and server CPU of tests/bullmq/run.mjs (3,000 jobs by
default) against goblin-server builds with --threads 1 and 2 and against redis-server, in
rounds alternating between the servers; medians. BullMQ's default prefix ('bull') makes
its scripts touch keys they do not declare, so at --threads 2 they run under their plans
with every shard locked; BULLMQ_PREFIX='{bull}' in the environment keeps each on one shard.

  scripts/bullmq-check                # once: installs tests/bullmq's node packages (npm ci)
  cargo build --release -p goblin-server
  bench/bullmq.py [--before /path/to/old/goblin-server] [--rounds 3] [--jobs 3000] [--cpus 0,1]

Each run gets a fresh server (no persistence); server CPU is read from /proc/<pid>/stat.
"""
import argparse
import os
import statistics
import subprocess
import time

from benchlib import GOBLIN, ROOT, cpu_seconds, free_port, start, stop

RUN = os.path.join(ROOT, "tests", "bullmq", "run.mjs")


def one(name, argv, jobs, cpus):
    port = free_port()
    server = start(name, argv + ["--port", str(port)], port, cpus=cpus)
    try:
        cpu0 = cpu_seconds(server["proc"].pid)
        t0 = time.monotonic()
        done = subprocess.run(["node", RUN, str(port), str(jobs), "300"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.monotonic() - t0
        cpu = cpu_seconds(server["proc"].pid) - cpu0
    finally:
        stop([server])
    if done.returncode != 0:
        raise SystemExit(f"{name}: run.mjs exited with {done.returncode}")
    return wall, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before")
    ap.add_argument("--after", default=GOBLIN)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=3000)
    ap.add_argument("--cpus", default="0,1")
    opts = ap.parse_args()
    if not os.path.isdir(os.path.join(ROOT, "tests", "bullmq", "node_modules")):
        raise SystemExit("tests/bullmq has no node_modules: run scripts/bullmq-check once")
    servers = []
    for label, path in (("before", opts.before), ("after", opts.after)):
        if path:
            servers += [(f"goblin {label} t{t}", [path, "--threads", str(t), "--save", ""]) for t in (1, 2)]
    servers.append(("redis-server", ["redis-server", "--save", "", "--appendonly", "no"]))
    results = {name: [] for name, _ in servers}
    for _ in range(opts.rounds):
        for name, argv in servers:
            results[name].append(one(name, argv, opts.jobs, opts.cpus))
    prefix = os.environ.get("BULLMQ_PREFIX", "bull")
    print(f"# {opts.jobs} jobs, prefix {prefix!r}, servers on cores {opts.cpus}, "
          f"median of {opts.rounds} rounds")
    print("| server | wall s | server CPU s |")
    print("|---|--:|--:|")
    for name, runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"| {name} | {wall:.2f} | {cpu:.2f} |")


if __name__ == "__main__":
    main()
