#!/usr/bin/env python3
"""The cross-shard hop, two goblin-server builds side by side: server CPU per op of
SET and GET -P 16 (redis-benchmark, 50 clients, random keys over 1M) with --threads 1
and --threads 2, and the ratio t2 / t1, in rounds alternating between the four servers.
Prints each thread's commands and cross-shard hops (INFO threads) at the end: with keys
spread over two shards, a hop per command sent over is 0.27 per command at -P 16 when
every turn between the shards costs a round trip, 0.0625 when a pipeline of 16 takes one.

  cargo build --release -p goblin-server
  bench/hop.py --before /path/to/old/goblin-server [--after target/release/goblin-server]
      [--rounds 3] [--server-cpus 0] [--load-cpus 1]

`--server-cpus 0`: both shard threads of --threads 2 take turns on core 0, so their CPU
adds up as on one core; `--server-cpus 0,1 --load-cpus 0,1`: everything shares both.
"""
import argparse
import signal
import statistics

from benchlib import GOBLIN, bench, call, free_port, start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", default=GOBLIN)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server-cpus", default="0")
    ap.add_argument("--load-cpus", default="1")
    opts = ap.parse_args()
    bins = {"before": opts.before, "after": opts.after}
    servers = []
    try:
        for name, path in bins.items():
            for t in ("1", "2"):
                port = free_port()
                servers.append(start(f"{name} t{t}", [path, "--port", str(port), "--threads", t],
                                     port, cpus=opts.server_cpus))
        print(f"# servers on cores {opts.server_cpus}, redis-benchmark on {opts.load_cpus}; "
              f"-P 16, 50 clients, 1M keys; median of {opts.rounds} rounds")
        print("| test | server | ops/s | CPU µs/op |")
        print("|---|---|--:|--:|")
        ratios = []
        for test in ("set", "get"):
            res = {s["name"]: [] for s in servers}
            for _ in range(opts.rounds):
                for s in servers:
                    res[s["name"]].append(bench(s, test, 16, 2_000_000, 50, 1_000_000,
                                                cpu=opts.load_cpus))
            med = {n: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v))
                   for n, v in res.items()}
            for n, (rps, cpu) in med.items():
                print(f"| {test.upper()} | {n} | {rps:,.0f} | {cpu:.3f} |")
            for name in bins:
                ratios.append((test, name, med[f"{name} t2"][1] / med[f"{name} t1"][1]))
        for test, name, ratio in ratios:
            print(f"{test.upper()} {name}: t2 / t1 = {ratio:.2f}")
        for s in servers:
            if s["name"].endswith("t2"):
                info = call(s["port"], "INFO", "threads")
                text = info.decode(errors="replace") if isinstance(info, bytes) else str(info)
                print(s["name"], " ".join(text.split()[2:]))
    finally:
        for s in servers:
            s["proc"].send_signal(signal.SIGTERM)
            s["proc"].wait()


if __name__ == "__main__":
    main()
