#!/usr/bin/env python3
"""Stalls: the worst and p99.9 PING latency of another client while the server does one
big thing, goblin-server (--threads 1, so the PINGs share the thread doing it) against
redis-server 7, side by side in one run.

Scenarios (N = --keys, default 1,000,000):
- expiry:   N keys with one deadline (SET … PXAT t), pinged from before t until they are
            gone;
- del-hash, del-set, del-zset, del-list: DEL of one collection of N members;
- flushall: FLUSHALL of N keys;
- grow:     N more keys written in big pipelines (the tables' resizes happen meanwhile);
- bgsave:   BGSAVE of N keys, until it is done;
- flush-saving: FLUSHALL of N keys while a BGSAVE of them runs (redis-server kills its
            child; Goblin abandons the save), until the save is over.

A client sends PING, waits for PONG, and sleeps 0.2 ms, all along, from a process of its
own with Python's garbage collector off (a thread of this script would wait for the GIL
and for collections: milliseconds); its latencies over the scenario's window give the
worst and the p99.9 (and the idle floor first). Servers
pinned to core 0 (`--server-cpus`), the clients on core 1 (run this under `taskset -c 1`).
A server's background threads (goblin's lazy free, redis-server's bio threads) share the
cores it is given: on one core, freeing in the background still takes turns with the
loop.

  taskset -c 1 bench/stalls.py [--keys 1000000] [--only expiry,del-hash,...] [--repeat 5]
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import GOBLIN, call, encode, free_port, send_pipelined, start, stop

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = ["expiry", "del-hash", "del-set", "del-zset", "del-list", "flushall", "grow",
             "bgsave", "flush-saving"]


def pipeline(port, commands, batch=2000):
    """Sends `commands` (encoded) in batches, reading every reply."""
    send_pipelined(port, commands, batch)


PINGER = r"""
import gc, socket, sys, time
gc.disable()
port, out = int(sys.argv[1]), sys.argv[2]
lat = []
with socket.create_connection(("127.0.0.1", port)) as s:
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        t0 = time.monotonic()
        try:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            buf = b""
            while not buf.endswith(b"\r\n"):
                chunk = s.recv(64)
                if not chunk:
                    raise OSError
                buf += chunk
        except OSError:
            break
        t1 = time.monotonic()
        lat.append((t0, t1 - t0))
        if len(lat) % 1000 == 0:
            with open(out, "w") as f:
                f.write("\n".join(f"{a} {b}" for a, b in lat))
        time.sleep(0.0002)
with open(out, "w") as f:
    f.write("\n".join(f"{a} {b}" for a, b in lat))
"""


class Pinger:
    """A client that PINGs, waits for PONG and sleeps 0.2 ms, all along, in a process of
    its own (so that neither this script's work nor its garbage collector delays it; its
    own collector is off), recording when each PING went and how long it took (on the
    system-wide monotonic clock, which this process reads too)."""

    def __init__(self, port, path):
        self.path, self.windows = path, []
        self.proc = subprocess.Popen([sys.executable, "-c", PINGER, str(port), path])

    def window(self, f):
        """Runs f(); the window's latencies are read at the end (`latencies`)."""
        t0 = time.monotonic()
        try:
            f()
        finally:
            self.windows.append((t0, time.monotonic()))
        return len(self.windows) - 1

    def latencies(self):
        """The latencies (ms) of each window, sorted, once the server is stopped (the
        pinger then finds its connection closed, writes what it measured and ends)."""
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        pings = []
        with open(self.path) as f:
            for line in f:
                a, b = line.split()
                pings.append((float(a), float(b) * 1000))
        return [sorted(ms for at, ms in pings if t0 <= at <= t1) for t0, t1 in self.windows]


def fill(port, n, prefix="key:"):
    pipeline(port, [encode("SET", f"{prefix}{i:012d}", "x" * 16) for i in range(n)])


def collection(port, kind, n):
    per = 1000
    cmds = []
    for i in range(0, n, per):
        members = range(i, min(n, i + per))
        if kind == "hash":
            args = [a for m in members for a in (f"f{m}", "v")]
            cmds.append(encode("HSET", "big", *args))
        elif kind == "set":
            cmds.append(encode("SADD", "big", *[f"m{m}" for m in members]))
        elif kind == "zset":
            args = [a for m in members for a in (m, f"m{m}")]
            cmds.append(encode("ZADD", "big", *args))
        else:
            cmds.append(encode("RPUSH", "big", *[f"e{m}" for m in members]))
    pipeline(port, cmds, batch=50)


def run_scenario(name, port, n, pinger):
    call(port, "FLUSHALL")
    if name == "expiry":
        at = int(time.time() * 1000) + 3000 + n // 500
        pipeline(port, [encode("SET", f"key:{i:012d}", "x" * 16, "PXAT", at)
                        for i in range(n)])
        wait = at / 1000 - time.time() - 0.2
        if wait > 0:
            time.sleep(wait)

        def until_gone():
            deadline = time.time() + 60
            while int(call(port, "DBSIZE")) > 0 and time.time() < deadline:
                time.sleep(0.05)
        return pinger.window(until_gone)
    if name.startswith("del-"):
        collection(port, name[4:], n)
        return pinger.window(lambda: (call(port, "DEL", "big"), time.sleep(0.2)))
    if name == "flushall":
        fill(port, n)
        return pinger.window(lambda: (call(port, "FLUSHALL"), time.sleep(0.2)))
    if name == "grow":
        # (Filled from another process: this one's pinger must not wait for the GIL.)
        script = f"import sys; sys.path.insert(0, {HERE!r}); import stalls; stalls.fill({port}, {n})"
        return pinger.window(lambda: subprocess.run([sys.executable, "-c", script], check=True))
    if name == "bgsave":
        fill(port, n)

        def until_saved():
            call(port, "BGSAVE")
            time.sleep(0.05)
            while "rdb_bgsave_in_progress:1" in call(port, "INFO", "persistence"):
                time.sleep(0.02)
        return pinger.window(until_saved)
    if name == "flush-saving":
        fill(port, n)

        def flush_while_saving():
            call(port, "BGSAVE")
            call(port, "FLUSHALL")
            time.sleep(0.05)
            while "rdb_bgsave_in_progress:1" in call(port, "INFO", "persistence"):
                time.sleep(0.02)
        return pinger.window(flush_while_saving)
    raise ValueError(name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--only", default=",".join(SCENARIOS))
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs of each scenario: the worst is then the median of the runs' "
                         "worsts, with their range (a stall the server causes shows in every "
                         "run; a hiccup of the machine in one)")
    ap.add_argument("--server-cpus", default="0",
                    help="cores the servers may use (their background threads too)")
    opts = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="stalls-")
    print(f"# PING latency (ms) of another client while the server works; N = {opts.keys}; "
          "goblin --threads 1; servers on core 0")
    print(f"{'scenario':10} {'server':8} {'pings':>6} {'worst':>8} {'p99.9':>8} {'p50':>7}")
    for name, argv in (("goblin", [GOBLIN, "--threads", "1"]), ("redis", ["redis-server"])):
        d = os.path.join(tmp, name)
        os.makedirs(d, exist_ok=True)
        port = free_port()
        server = start(name, argv + ["--port", str(port), "--save", "", "--dir", d,
                                     "--appendonly", "no"], port, cpus=opts.server_cpus)
        pinger = Pinger(port, os.path.join(tmp, f"{name}.pings"))
        try:
            time.sleep(0.3)
            names = [("idle", [pinger.window(lambda: time.sleep(0.5))
                               for _ in range(opts.repeat)])]
            for scenario in opts.only.split(","):
                names.append((scenario, [run_scenario(scenario, port, opts.keys, pinger)
                                         for _ in range(opts.repeat)]))
        finally:
            stop([server])
        windows = pinger.latencies()
        for scenario, runs in names:
            lats = [windows[i] for i in runs]
            if not all(lats):
                print(f"{scenario:10} {name:8} {0:>6} (no PING answered in a window)")
                continue
            worsts = sorted(lat[-1] for lat in lats)
            p999s = sorted(lat[min(len(lat) - 1, int(len(lat) * 0.999))] for lat in lats)
            worst, p999 = statistics.median(worsts), statistics.median(p999s)
            spread = f"  ({worsts[0]:.2f}–{worsts[-1]:.2f})" if len(worsts) > 1 else ""
            print(f"{scenario:10} {name:8} {sum(map(len, lats)):>6} {worst:>8.2f} "
                  f"{p999:>8.2f} {statistics.median(lats[0]):>7.3f}{spread}", flush=True)


if __name__ == "__main__":
    main()
