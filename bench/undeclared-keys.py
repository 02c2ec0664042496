#!/usr/bin/env python3
"""What reading a script's code for undeclared keys costs, and what a script that touches
them costs, with redis-benchmark, --threads 2.

Side by side in one run (servers pinned to core 0, redis-benchmark to core 1, 50
clients, medians over alternating rounds, each from an empty keyspace):
- EVALSHA and EVAL of GOBLIN.CLAIM's oracle script, its two keys tagged together (one
  slot), on a goblin-server build before the change (--before) and this one (--after);
- EVAL of `return redis.call('get', KEYS[1])`, one key (not tagged), before and after;
- EVALSHA of a script that touches an undeclared key (`redis.call('incr', ARGV[1])`,
  as BullMQ's scripts touch their job keys) on this build, and on redis-server;
- the same script with its keys tagged together (`{t}:a:R`, `{t}:n:R`, one slot).

  cargo build --release -p goblin-server
  bench/undeclared-keys.py --before /path/to/old/goblin-server --rounds 3
"""
import argparse
import tempfile

from benchlib import CLAIM_ORACLE, GOBLIN, call, free_port, redis_benchmark_cases, start, stop

UNDECLARED = "redis.call('set', KEYS[1], ARGV[1]) return redis.call('incr', ARGV[2])"
GET = "return redis.call('get', KEYS[1])"


def goblin(name, binary, port):
    argv = [binary, "--port", str(port), "--threads", "2", "--save", "",
            "--dir", tempfile.mkdtemp(prefix="goblin-bench-")]
    return start(name, argv, port)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True, help="the old goblin-server binary")
    ap.add_argument("--after", default=GOBLIN, help="the new goblin-server binary")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--keyspace", type=int, default=1_000_000)
    ap.add_argument("--pipelines", default="16,1")
    ap.add_argument("--requests", type=int, default=200_000, help="per run")
    opts = ap.parse_args()

    servers = []
    try:
        before = goblin("goblin before", opts.before, free_port())
        servers.append(before)
        after = goblin("goblin after", opts.after, free_port())
        servers.append(after)
        pr = free_port()
        redis = start("redis", ["redis-server", "--port", str(pr), "--save", "",
                                "--appendonly", "no"], pr)
        servers.append(redis)
        sha = {}
        for s in servers:
            sha["oracle"] = call(s["port"], "SCRIPT", "LOAD", CLAIM_ORACLE)
            sha["undeclared"] = call(s["port"], "SCRIPT", "LOAD", UNDECLARED)
        # (EVAL's body on one line: redis-benchmark's CSV names the test by its command.)
        body = CLAIM_ORACLE.replace("\n", " ")
        # (redis-benchmark draws each __rand_int__ apart: one tag puts the keys in one slot.)
        oracle = ["2", "{t}:claim:__rand_int__", "{t}:result:__rand_int__", "w", "30"]
        undeclared = ["1", "a:__rand_int__", "v", "n:__rand_int__"]
        tagged = ["1", "{t}:a:__rand_int__", "v", "{t}:n:__rand_int__"]
        cases = [
            ("EVALSHA oracle, before", before, ["EVALSHA", sha["oracle"]] + oracle),
            ("EVALSHA oracle, after", after, ["EVALSHA", sha["oracle"]] + oracle),
            ("EVAL oracle, before", before, ["EVAL", body] + oracle),
            ("EVAL oracle, after", after, ["EVAL", body] + oracle),
            ("EVAL get, before", before, ["EVAL", GET, "1", "k:__rand_int__"]),
            ("EVAL get, after", after, ["EVAL", GET, "1", "k:__rand_int__"]),
            ("EVALSHA undeclared, after", after, ["EVALSHA", sha["undeclared"]] + undeclared),
            ("EVALSHA undeclared, redis", redis, ["EVALSHA", sha["undeclared"]] + undeclared),
            ("EVALSHA tagged, after", after, ["EVALSHA", sha["undeclared"]] + tagged),
        ]
        for p in [int(x) for x in opts.pipelines.split(",")]:
            redis_benchmark_cases(cases, p, opts.rounds, opts.clients, opts.keyspace,
                                  opts.requests)
        # The undeclared script really ran (no error replies): its counter moved.
        call(after["port"], "FLUSHALL")
        call(after["port"], "EVALSHA", sha["undeclared"], "1", "a:1", "v", "n:2")
        assert call(after["port"], "GET", "n:2") == "1", "the undeclared script did not run"
    finally:
        stop(servers)


if __name__ == "__main__":
    main()
