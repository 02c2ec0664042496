#!/usr/bin/env python3
"""GOBLIN.CLAIM against the script it replaces, with redis-benchmark.

Side by side in one run, servers pinned to core 0 and redis-benchmark to core 1:
- goblin-server --threads 1: `GOBLIN.CLAIM claim:R result:R w 30` and `SET key:R v NX EX 30`;
- redis-server 7: `EVALSHA <oracle> 2 claim:R result:R w 30` and `SET key:R v NX EX 30`;
- goblin-server --threads 1 and --threads 2: goblin-loadgen's claim workload (GOBLIN.CLAIM,
  then SET of the result by the winner, 20% duplicate ids), with both keys of a claim in one
  slot (`--hash-tag`: claim:{id}, result:{id}) and without (claim:id, result:id: different
  slots, on different shards half the time with two threads). redis-benchmark cannot pair
  the keys: it draws every `__rand_int__` of a command anew.
R is redis-benchmark's `__rand_int__` over --keyspace ids. Every run starts from an empty
keyspace (FLUSHALL). Prints throughput and server CPU per operation (medians over rounds)
and the ratios the issue asks for.

  bench/claim.py --rounds 3
"""
import argparse
import signal
import socket
import statistics

import os
import tempfile

from benchlib import GOBLIN, free_port, loadgen, redis_benchmark_cases, start

ORACLE = """if redis.call("set", KEYS[1], ARGV[1], "NX", "EX", ARGV[2]) then
  return "CLAIMED"
end
return redis.call("get", KEYS[2])"""


def command(port, *args):
    """Sends one command, returns the raw reply line(s)."""
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(out)
        return s.recv(65536).decode()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--keyspace", type=int, default=1_000_000)
    ap.add_argument("--pipelines", default="16,1")
    ap.add_argument("--duration", type=int, default=5, help="seconds per goblin-loadgen run")
    opts = ap.parse_args()

    claim = ["GOBLIN.CLAIM", "claim:__rand_int__", "result:__rand_int__", "w", "30"]
    setnx = ["SET", "key:__rand_int__", "v", "NX", "EX", "30"]
    servers = []
    try:
        p1, p2, pr = free_port(), free_port(), free_port()
        g1 = start("goblin --threads 1", [GOBLIN, "--port", str(p1), "--threads", "1"], p1)
        g2 = start("goblin --threads 2", [GOBLIN, "--port", str(p2), "--threads", "2"], p2)
        redis = start("redis-server", ["redis-server", "--port", str(pr), "--save", "",
                                       "--appendonly", "no"], pr)
        servers = [g1, g2, redis]
        sha = command(pr, "SCRIPT", "LOAD", ORACLE).split("\r\n")[1]
        evalsha = ["EVALSHA", sha, "2", "claim:__rand_int__", "result:__rand_int__", "w", "30"]
        cases = [
            ("goblin -t1 GOBLIN.CLAIM", g1, claim),
            ("goblin -t1 SET NX EX", g1, setnx),
            ("redis EVALSHA oracle", redis, evalsha),
            ("redis SET NX EX", redis, setnx),
        ]
        workloads = [
            ("goblin -t1 claim workload", g1, []),
            ("goblin -t2 claim, same slot", g2, ["--hash-tag"]),
            ("goblin -t2 claim, cross slot", g2, []),
        ]
        json_path = os.path.join(tempfile.mkdtemp(), "claim.json")
        print(f"# servers on core 0, redis-benchmark on core 1; {opts.clients} clients, "
              f"{opts.keyspace} ids; median of {opts.rounds} rounds; empty keyspace per run")
        for pipeline in [int(p) for p in opts.pipelines.split(",")]:
            med = redis_benchmark_cases(cases, pipeline, opts.rounds, opts.clients,
                                        opts.keyspace)
            claim_rps = med["goblin -t1 GOBLIN.CLAIM"][0]
            print(f"GOBLIN.CLAIM / EVALSHA throughput: {claim_rps / med['redis EVALSHA oracle'][0]:.2f}x")
            print(f"GOBLIN.CLAIM / goblin SET NX EX:   {claim_rps / med['goblin -t1 SET NX EX'][0]:.2f}x")

            results = {name: [] for name, _, _ in workloads}
            for _ in range(opts.rounds):
                for name, server, extra in workloads:
                    command(server["port"], "FLUSHALL")
                    r = loadgen(server, ["--workload", "claim", "--pipeline", str(pipeline),
                                         "--connections", str(opts.clients), "--duration",
                                         str(opts.duration), "--keyspace",
                                         str(opts.keyspace)] + extra, json_path)
                    results[name].append((r["rps"], r["server_cpu_s"] * 1e6 / r["requests"]))
            print(f"{'goblin-loadgen claim workload':30} {'ops/s':>10} {'CPU us/op':>10}")
            for name, _, _ in workloads:
                rps = statistics.median(r[0] for r in results[name])
                cpu = statistics.median(r[1] for r in results[name])
                print(f"{name:30} {rps:>10.0f} {cpu:>10.3f}")
    finally:
        for s in servers:
            s["proc"].send_signal(signal.SIGTERM)
            s["proc"].wait()


if __name__ == "__main__":
    main()
