#!/usr/bin/env python3
"""redis-benchmark's default test list, goblin-server beside redis-server in one run.

`redis-benchmark -q -n 200000` (no -t) runs PING_INLINE, PING_MBULK, SET, GET, INCR,
LPUSH, RPUSH, LPOP, RPOP, SADD, HSET, SPOP, ZADD, ZPOPMIN, LRANGE_100/300/500/600 and
MSET on one key each, 50 clients. This script runs the same tests one `-t` at a time, so
that each gets its own measure of the server's CPU time, alternating servers round by
round: servers pinned to core 0, redis-benchmark to core 1. Any error reply in
redis-benchmark's output fails the run.

For the LRANGE tests the run includes the `LPUSH (needed to benchmark LRANGE)` that
redis-benchmark sends first (as many requests again): their CPU per operation counts
both, for either server alike.

  bench/default-suite.py --pipelines 1,16 --rounds 2
"""
import argparse
import statistics

from benchlib import GOBLIN, _timed, free_port, machine, start, stop

TESTS = ["ping_inline", "ping_mbulk", "set", "get", "incr", "lpush", "rpush", "lpop", "rpop",
         "sadd", "hset", "spop", "zadd", "zpopmin", "lrange_100", "lrange_300", "lrange_500",
         "lrange_600", "mset"]


def run(server, test, pipeline, requests, clients):
    argv = ["taskset", "-c", "1", "redis-benchmark", "-p", str(server["port"]), "-P",
            str(pipeline), "-n", str(requests), "-c", str(clients), "--csv", "-t", test]
    done, fig = _timed(argv, server["proc"].pid)
    text = done.stdout + done.stderr
    if done.returncode != 0 or "ERR" in text or "Error" in text:
        raise SystemExit(f"redis-benchmark -t {test} -P {pipeline} against {server['name']}:\n{text}")
    rows = [l for l in done.stdout.replace("\r", "\n").splitlines() if l.startswith('"')]
    rps = float(rows[-1].split('","')[1])
    ops = requests * (2 if test.startswith("lrange") else 1)
    return rps, fig["server_cpu_s"] * 1e6 / ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pipelines", default="1,16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--threads", default="1")
    ap.add_argument("--tests", default=",".join(TESTS))
    ap.add_argument("--noise", action="store_true",
                    help="also a second redis-server: its throughput and CPU ratios to the "
                         "first are the run's noise")
    a = ap.parse_args()
    m = machine()
    servers = []
    try:
        port = free_port()
        servers.append(start(f"goblin --threads {a.threads}",
                             [GOBLIN, "--port", str(port), "--threads", a.threads], port))
        for name in ["redis-server", "redis-server B"][:2 if a.noise else 1]:
            port = free_port()
            servers.append(start(name, ["redis-server", "--port", str(port), "--save", "",
                                        "--appendonly", "no"], port))
        print(f"# {m['cpu']}, {m['nproc']} cores, redis {m['redis']}, goblin {m['goblin']}; "
              f"servers on core 0, redis-benchmark on core 1; -n {a.requests} -c {a.clients}; "
              f"median of {a.rounds} rounds")
        noise_head = " noise: redis B ÷ redis, throughput / ops per CPU-s |" if a.noise else ""
        print(f"| test | -P | goblin ops/s | redis ops/s | throughput ratio | goblin CPU µs/op "
              f"| redis CPU µs/op | ops per CPU-s ratio |{noise_head}")
        print("|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if a.noise else ""))
        for pipeline in [int(p) for p in a.pipelines.split(",")]:
            for test in a.tests.split(","):
                got = {s["name"]: [] for s in servers}
                for _ in range(a.rounds):
                    for s in servers:
                        got[s["name"]].append(run(s, test, pipeline, a.requests, a.clients))
                med = [(statistics.median(x[0] for x in got[s["name"]]),
                        statistics.median(x[1] for x in got[s["name"]])) for s in servers]
                (g_rps, g_cpu), (r_rps, r_cpu) = med[0], med[1]
                noise = ""
                if a.noise:
                    b_rps, b_cpu = med[2]
                    noise = f" {b_rps / r_rps:.2f} / {r_cpu / b_cpu:.2f} |"
                print(f"| {test.upper()} | {pipeline} | {g_rps:,.0f} | {r_rps:,.0f} | "
                      f"{g_rps / r_rps:.2f} | {g_cpu:.2f} | {r_cpu:.2f} | {r_cpu / g_cpu:.2f} |"
                      f"{noise}", flush=True)
    finally:
        stop(servers)


if __name__ == "__main__":
    main()
