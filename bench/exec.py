#!/usr/bin/env python3
"""Transactions whose commands spread over the keyspace: goblin-server builds against
redis-server, side by side in one run.

Two loads, each on a fresh connection per round, servers pinned to --server-cpus, the
client on core 1 (taskset it: `taskset -c 1 bench/exec.py …`):

- big: one MULTI of --commands GETs of distinct keys (so, with several threads, on every
  shard, consecutive commands mostly on different ones), `MULTI`, the GETs and `EXEC`
  sent in one write; the time from the write to EXEC's last reply.
- small: --transactions transactions of --size SETs of random keys, each sent in one
  write and its replies read before the next (a redis-py pipeline, which is a MULTI/EXEC
  by default); transactions per second and the server's CPU per transaction.

Medians over --rounds, the servers alternating round by round.

  bench/exec.py --rounds 5 --goblin new=target/release/goblin-server \\
      --goblin old=/tmp/old-target/release/goblin-server --threads 2
"""
import argparse
import random
import socket
import statistics
import time

from benchlib import cpu_seconds, encode, prefill, read_exactly, start_builds_and_redis, stop


def transaction_reply(n, each):
    return b"+OK\r\n" + b"+QUEUED\r\n" * n + b"*%d\r\n" % n + each * n


def big_round(server, keys):
    payload = encode(b"MULTI") + b"".join(encode(b"GET", k) for k in keys) + encode(b"EXEC")
    want = transaction_reply(len(keys), b"$3\r\nxxx\r\n")
    with socket.create_connection(("127.0.0.1", server["port"])) as s:
        cpu0 = cpu_seconds(server["proc"].pid)
        t0 = time.perf_counter()
        s.sendall(payload)
        read_exactly(s, want)
        return time.perf_counter() - t0, cpu_seconds(server["proc"].pid) - cpu0


def small_round(server, transactions, size, keyspace, seed):
    rng = random.Random(seed)
    payloads = []
    for _ in range(transactions):
        body = b"".join(encode(b"SET", b"key:%012d" % rng.randrange(keyspace), b"xxx")
                        for _ in range(size))
        payloads.append(encode(b"MULTI") + body + encode(b"EXEC"))
    want = transaction_reply(size, b"+OK\r\n")
    with socket.create_connection(("127.0.0.1", server["port"])) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        cpu0 = cpu_seconds(server["proc"].pid)
        t0 = time.perf_counter()
        for p in payloads:
            s.sendall(p)
            read_exactly(s, want)
        return time.perf_counter() - t0, cpu_seconds(server["proc"].pid) - cpu0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--commands", type=int, default=40_000)
    ap.add_argument("--transactions", type=int, default=5_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--keyspace", type=int, default=100_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--server-cpus", default="0")
    ap.add_argument("--goblin", action="append", default=[],
                    help="name=path of a goblin-server build (repeatable)")
    opts = ap.parse_args()
    servers = start_builds_and_redis(opts.goblin, opts.threads, opts.server_cpus)
    try:
        keys = [b"key:%012d" % i for i in range(opts.commands)]
        for s in servers:
            prefill(s["port"], opts.commands)
        big = {s["name"]: [] for s in servers}
        small = {s["name"]: [] for s in servers}
        for r in range(opts.rounds):
            for s in servers:
                big[s["name"]].append(big_round(s, keys))
                small[s["name"]].append(
                    small_round(s, opts.transactions, opts.size, opts.keyspace, r))
        print(f"# goblin --threads {opts.threads}, servers on cores {opts.server_cpus}; "
              f"median of {opts.rounds} rounds")
        print(f"{'server':<14} {'big EXEC ms':>12} {'its CPU ms':>11} "
              f"{'small tx/s':>11} {'CPU µs/tx':>10}")
        for s in servers:
            b, m = big[s["name"]], small[s["name"]]
            tps = statistics.median(opts.transactions / x[0] for x in m)
            cpu = statistics.median(x[1] / opts.transactions * 1e6 for x in m)
            print(f"{s['name']:<14} {statistics.median(x[0] for x in b) * 1e3:>12.1f} "
                  f"{statistics.median(x[1] for x in b) * 1e3:>11.0f} {tps:>11.0f} {cpu:>10.1f}")
    finally:
        stop(servers)


if __name__ == "__main__":
    main()
