#!/usr/bin/env python3
"""Commands of several keys across threads (MSET and MGET of --keys random keys, each a
transaction over the shards its keys fall on): goblin-server builds against
redis-server, redis-benchmark pinned to core 1, rounds alternating between the
servers, each run from an empty keyspace.

  bench/multikey.py --goblin new=target/release/goblin-server \\
      --goblin old=/tmp/old/goblin-server --threads 4 [--pipeline 1] [--rounds 3]
"""
import argparse

from benchlib import redis_benchmark_cases, start_builds_and_redis, stop


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--goblin", action="append", default=[],
                    help="name=path of a goblin-server build (repeatable)")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--keys", type=int, default=10)
    ap.add_argument("--pipeline", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--keyspace", type=int, default=1_000_000)
    ap.add_argument("--server-cpus", default="0")
    opts = ap.parse_args()
    servers = start_builds_and_redis(opts.goblin, opts.threads, opts.server_cpus,
                                     label="{name} t{threads}")
    try:
        keys = ["key:__rand_int__"] * opts.keys
        commands = {
            "MSET": ["MSET"] + [w for k in keys for w in (k, "xxx")],
            "MGET": ["MGET"] + keys,
        }
        cases = [(f"{cmd} {s['name']}", s, words)
                 for cmd, words in commands.items() for s in servers]
        print(f"# {opts.keys} keys a command; servers on cores {opts.server_cpus}, "
              f"redis-benchmark on core 1, {opts.clients} clients; "
              f"median of {opts.rounds} rounds")
        redis_benchmark_cases(cases, opts.pipeline, opts.rounds, opts.clients, opts.keyspace,
                              requests=opts.requests)
    finally:
        stop(servers)


if __name__ == "__main__":
    main()
