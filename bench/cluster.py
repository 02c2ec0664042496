#!/usr/bin/env python3
"""Cluster mode, side by side with redis-server 7: the claim workload on clusters of 1, 2
and 3 nodes, and a 1,000-slot reshard under that load.

Every node of both kinds is pinned to core 0 and goblin-loadgen (`--cluster`) to core 1.
Each goblin-server runs with `--threads 1`, like the single-threaded redis-server, so
adding nodes adds no core: read the figures as the cluster's overhead, not its scale.
goblin-loadgen runs the claim workload: GOBLIN.CLAIM on Goblin, the oracle script through
EVALSHA on redis-server. The key count is its --keyspace; claim and result share a slot
by their hash tag.

For each cluster size and kind it reports:
- throughput;
- server CPU per operation (all nodes' CPU seconds over the run / replies);
- the redirects followed.

Then, on 3 nodes of each kind, it moves 1,000 slots (`redis-cli --cluster reshard`) while
the claim workload runs, and reports:
- the reshard's wall time;
- the client-visible errors (errors the load generator counted, redirects apart);
- violations;
- redirects.

Nodes are started fresh for every case, and stopped by pid at the end.

  bench/cluster.py --rounds 3
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from benchlib import GOBLIN, LOADGEN, call, cpu_seconds, start, stop
import socket
import random


def free_cluster_port(taken):
    """A port free now whose bus port (+10000) is free too."""
    while True:
        port = random.randint(17000, 22000)
        if port in taken:
            continue
        try:
            for p in (port, port + 10000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return port
        except OSError:
            continue


def cli(*args, timeout=600):
    return subprocess.run(["redis-cli", *args], capture_output=True, text=True, timeout=timeout)


def start_cluster(kind, n, servers):
    """n nodes of `kind`, joined by redis-cli --cluster create; returns their ports."""
    ports = []
    for _ in range(n):
        port = free_cluster_port(ports)
        ports.append(port)
        d = tempfile.mkdtemp(prefix=f"cluster-bench-{kind}-")
        args = ["--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--save", "",
                "--appendonly", "no", "--cluster-enabled", "yes",
                "--cluster-config-file", "nodes.conf"]
        if kind == "goblin":
            argv = [GOBLIN, *args, "--threads", "1"]
        else:
            argv = ["redis-server", *args]
        servers.append(start(f"{kind}:{port}", argv, port))
    addrs = [f"127.0.0.1:{p}" for p in ports]
    if n < 3:
        # redis-cli --cluster create needs 3 masters: fewer are joined by hand, as its
        # steps do it (slots, distinct epochs, MEET).
        for i, p in enumerate(ports):
            first, last = i * 16384 // n, (i + 1) * 16384 // n - 1
            call(p, "CLUSTER", "ADDSLOTSRANGE", str(first), str(last))
            call(p, "CLUSTER", "SET-CONFIG-EPOCH", str(i + 1))
        for p in ports[1:]:
            call(p, "CLUSTER", "MEET", "127.0.0.1", str(ports[0]))
    else:
        out = cli("--cluster", "create", *addrs, "--cluster-replicas", "0", "--cluster-yes")
        if out.returncode != 0:
            sys.exit(f"cluster create failed: {out.stdout}{out.stderr}")
    deadline = time.time() + 30
    while time.time() < deadline:
        ok = all("cluster_state:ok" in cli("-p", str(p), "cluster", "info").stdout for p in ports)
        check = cli("--cluster", "check", addrs[0]).stdout
        if ok and "All 16384 slots covered" in check and "[ERR]" not in check:
            return ports
        time.sleep(0.2)
    sys.exit(f"{kind} cluster of {n} did not settle")


def run_load(kind, port, duration, extra=()):
    """goblin-loadgen --cluster's claim workload, pinned to core 1; returns its JSON."""
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    argv = ["taskset", "-c", "1", LOADGEN, "--cluster", "--port", str(port), "--workload",
            "claim", "--target", kind, "--threads", "1", "--connections", "32",
            "--pipeline", "4", "--duration", str(duration), "--quiet", "--json", path,
            *extra]
    out = subprocess.run(argv, capture_output=True, text=True)
    with open(path) as f:
        doc = json.load(f)
    os.unlink(path)
    doc["exit"] = out.returncode
    return doc


def throughput(opts):
    print("\nclaim workload (1 loadgen thread, 32 connections, pipeline 4), nodes on core 0")
    print(f"{'nodes':>5} {'kind':>7} {'ops/s':>10} {'CPU us/op':>10} {'MOVED':>6} {'errors':>6}")
    rows = {}
    for n in (1, 2, 3):
        samples = {"goblin": [], "redis": []}
        for _ in range(opts.rounds):
            for kind in ("goblin", "redis"):
                servers = []
                try:
                    ports = start_cluster(kind, n, servers)
                    cpu0 = sum(cpu_seconds(s["proc"].pid) for s in servers)
                    doc = run_load(kind, ports[0], opts.duration)
                    cpu = sum(cpu_seconds(s["proc"].pid) for s in servers) - cpu0
                finally:
                    stop(servers)
                replies = doc["requests"]
                samples[kind].append((doc["throughput_ops"], cpu * 1e6 / max(replies, 1),
                                      doc["redirects"]["moved"], doc["errors"]["total"]))
        for kind in ("goblin", "redis"):
            s = samples[kind]
            med = (statistics.median(x[0] for x in s), statistics.median(x[1] for x in s),
                   max(x[2] for x in s), max(x[3] for x in s))
            rows[(n, kind)] = med
            print(f"{n:>5} {kind:>7} {med[0]:>10.0f} {med[1]:>10.2f} {med[2]:>6} {med[3]:>6}")
        g, r = rows[(n, "goblin")], rows[(n, "redis")]
        print(f"{n:>5}   ratio {g[0] / r[0]:>10.2f} {g[1] / r[1]:>10.2f}   (goblin / redis)")
    return rows


def reshard(opts):
    print(f"\n{opts.slots}-slot reshard on 3 nodes under the claim workload")
    print(f"{'kind':>7} {'reshard s':>10} {'ops/s':>10} {'errors':>7} {'violations':>10} "
          f"{'MOVED':>6} {'ASK':>5} {'TRYAGAIN':>8}")
    for kind in ("goblin", "redis"):
        servers = []
        try:
            ports = start_cluster(kind, 3, servers)
            src = cli("-p", str(ports[0]), "cluster", "myid").stdout.strip()
            dst = cli("-p", str(ports[1]), "cluster", "myid").stdout.strip()
            result = {}

            def load():
                result["doc"] = run_load(kind, ports[0], opts.reshard_duration)

            t = threading.Thread(target=load)
            t.start()
            time.sleep(2)
            began = time.time()
            out = cli("--cluster", "reshard", f"127.0.0.1:{ports[0]}", "--cluster-from", src,
                      "--cluster-to", dst, "--cluster-slots", str(opts.slots), "--cluster-yes")
            took = time.time() - began
            t.join()
            check = cli("--cluster", "check", f"127.0.0.1:{ports[0]}").stdout
        finally:
            stop(servers)
        doc = result["doc"]
        ok = out.returncode == 0 and "[ERR]" not in check
        r = doc["redirects"]
        print(f"{kind:>7} {took:>10.2f} {doc['throughput_ops']:>10.0f} {doc['errors']['total']:>7} "
              f"{doc['claim']['violations']:>10} {r['moved']:>6} {r['ask']:>5} {r['tryagain']:>8}"
              f"{'' if ok else '   (reshard or check FAILED)'}")
        if took > opts.reshard_duration - 2:
            print(f"        (the reshard outlasted the load: raise --reshard-duration)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5, help="seconds per throughput run")
    ap.add_argument("--slots", type=int, default=1000)
    ap.add_argument("--reshard-duration", type=int, default=45,
                    help="seconds of load around the reshard")
    ap.add_argument("--parts", default="throughput,reshard",
                    help="what to run: throughput, reshard, or both (comma-separated)")
    opts = ap.parse_args()
    for tool in (GOBLIN, LOADGEN):
        if not os.path.exists(tool):
            sys.exit(f"{tool} is missing: cargo build --release -p goblin-server -p goblin-loadgen")
    parts = opts.parts.split(",")
    if "throughput" in parts:
        throughput(opts)
    if "reshard" in parts:
        reshard(opts)


if __name__ == "__main__":
    main()
