#!/usr/bin/env python3
"""EVALSHA of the GOBLIN.CLAIM oracle script on goblin, against redis-server and against
native GOBLIN.CLAIM, with redis-benchmark.

Side by side in one run, servers pinned to core 0 and redis-benchmark to core 1, 50
clients, ids drawn over --keyspace:
- goblin-server --threads 1: `EVALSHA <oracle> 2 claim:R result:R w 30`;
- redis-server 7 (twice: two instances, to show the noise): the same EVALSHA;
- goblin-server --threads 1: `GOBLIN.CLAIM claim:R result:R w 30`.
Every run starts from an empty keyspace (FLUSHALL). Prints throughput and server CPU per
operation (medians over rounds) and the ratios issue 18 asks for.

  bench/evalsha.py --rounds 3
"""
import argparse

from benchlib import GOBLIN, call, free_port, redis_benchmark_cases, start, stop

ORACLE = """if redis.call("set", KEYS[1], ARGV[1], "NX", "EX", ARGV[2]) then
  return "CLAIMED"
end
return redis.call("get", KEYS[2])"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--keyspace", type=int, default=1_000_000)
    ap.add_argument("--pipelines", default="16,1")
    opts = ap.parse_args()

    claim = ["GOBLIN.CLAIM", "claim:__rand_int__", "result:__rand_int__", "w", "30"]
    servers = []
    try:
        pg, pr, pr2 = free_port(), free_port(), free_port()
        g = start("goblin --threads 1", [GOBLIN, "--port", str(pg), "--threads", "1"], pg)
        servers.append(g)
        redis = []
        for p in (pr, pr2):
            redis.append(start("redis-server", ["redis-server", "--port", str(p), "--save", "",
                                                "--appendonly", "no"], p))
            servers.append(redis[-1])
        shas = {call(s["port"], "SCRIPT", "LOAD", ORACLE) for s in servers}
        assert len(shas) == 1, shas
        sha = shas.pop()
        sha = sha.decode() if isinstance(sha, bytes) else sha
        evalsha = ["EVALSHA", sha, "2", "claim:__rand_int__", "result:__rand_int__", "w", "30"]
        cases = [
            ("goblin -t1 EVALSHA oracle", g, evalsha),
            ("redis EVALSHA oracle", redis[0], evalsha),
            ("redis (2nd) EVALSHA oracle", redis[1], evalsha),
            ("goblin -t1 GOBLIN.CLAIM", g, claim),
        ]
        print(f"# servers on core 0, redis-benchmark on core 1; {opts.clients} clients, "
              f"{opts.keyspace} ids; median of {opts.rounds} rounds; empty keyspace per run")
        for pipeline in [int(p) for p in opts.pipelines.split(",")]:
            med = redis_benchmark_cases(cases, pipeline, opts.rounds, opts.clients,
                                        opts.keyspace)
            ge, re_, re2 = (med["goblin -t1 EVALSHA oracle"], med["redis EVALSHA oracle"],
                            med["redis (2nd) EVALSHA oracle"])
            native = med["goblin -t1 GOBLIN.CLAIM"]
            print(f"goblin EVALSHA / redis EVALSHA: throughput {ge[0] / re_[0]:.2f}x, "
                  f"ops per CPU-second {re_[1] / ge[1]:.2f}x")
            print(f"noise, redis / redis (2nd):     throughput {re_[0] / re2[0]:.2f}x, "
                  f"ops per CPU-second {re2[1] / re_[1]:.2f}x")
            print(f"native GOBLIN.CLAIM / goblin EVALSHA: throughput {native[0] / ge[0]:.2f}x, "
                  f"ops per CPU-second {ge[1] / native[1]:.2f}x")
    finally:
        stop(servers)


if __name__ == "__main__":
    main()
