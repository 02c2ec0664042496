#!/usr/bin/env python3
"""A flame graph (SVG) of goblin-server under redis-benchmark.

Starts goblin-server pinned to core 0, fills the keyspace (a SET run over the same random
keys, so that the GETs hit), runs redis-benchmark pinned to core 1 and records the server
with `perf record --call-graph dwarf` for a few seconds in the middle of the run, then
folds the stacks with inferno (`cargo install inferno`) into an SVG.

  bench/flamegraph.py --test get --pipeline 16 --out docs/flame-get-p16.svg
  bench/flamegraph.py --bin /tmp/old/goblin-server --out /tmp/before.svg

Builds nothing: run `cargo build --release -p goblin-server` first (its release profile
keeps debug info, which the unwinding needs).
"""
import argparse
import os
import shutil
import subprocess
import tempfile
import time

from benchlib import GOBLIN, free_port, start, stop


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=GOBLIN)
    ap.add_argument("--test", default="get")
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--keyspace", type=int, default=1_000_000)
    ap.add_argument("--threads", default="1")
    ap.add_argument("--seconds", type=float, default=4.0, help="recorded")
    ap.add_argument("--out", required=True, help="the SVG")
    ap.add_argument("--title", default=None)
    ap.add_argument("--folded", default=None, help="also keep the folded stacks here")
    opts = ap.parse_args()
    for tool in ("perf", "inferno-collapse-perf", "inferno-flamegraph", "redis-benchmark"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is missing (inferno: cargo install inferno)")

    port = free_port()
    server = start("goblin", [opts.bin, "--port", str(port), "--threads", opts.threads], port)
    work = tempfile.mkdtemp(prefix="goblin-flame-")
    try:
        def load(test, requests):
            return subprocess.Popen(
                ["taskset", "-c", "1", "redis-benchmark", "-p", str(port), "-P",
                 str(opts.pipeline), "-c", str(opts.clients), "-n", str(requests), "-r",
                 str(opts.keyspace), "-q", "-t", test],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        if opts.test != "set":
            load("set", 2_000_000).wait()
        bench = load(opts.test, 50_000_000)
        time.sleep(1.0)
        data = os.path.join(work, "perf.data")
        subprocess.run(["perf", "record", "-F", "999", "--call-graph", "dwarf,16384", "-p",
                        str(server["proc"].pid), "-o", data, "--", "sleep",
                        str(opts.seconds)], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        bench.kill()
        bench.wait()
        script = subprocess.run(["perf", "script", "-i", data], check=True,
                                capture_output=True).stdout
        folded = subprocess.run(["inferno-collapse-perf"], input=script, check=True,
                                capture_output=True).stdout
        title = opts.title or (f"goblin-server --threads {opts.threads}: {opts.test.upper()} "
                               f"-P {opts.pipeline}, {opts.clients} clients, "
                               f"{opts.keyspace} keys")
        svg = subprocess.run(["inferno-flamegraph", "--title", title, "--width", "1600"],
                             input=folded, check=True, capture_output=True).stdout
        with open(opts.out, "wb") as f:
            f.write(svg)
        if opts.folded:
            with open(opts.folded, "wb") as f:
                f.write(folded)
        print(f"{opts.out}: {len(svg)} bytes")
    finally:
        stop([server])
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
