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
- bgsave:   BGSAVE of N keys, until it is done.

A client sends PING, waits for PONG, and sleeps 0.2 ms, all along; its latencies over
the scenario's window give the worst and the p99.9 (and the idle floor first). Servers
pinned to core 0 (`--server-cpus`), the clients on core 1 (run this under `taskset -c 1`).
A server's background threads (goblin's lazy free, redis-server's bio threads) share the
cores it is given: on one core, freeing in the background still takes turns with the
loop.

  taskset -c 1 bench/stalls.py [--keys 1000000] [--only expiry,del-hash,...]
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from benchlib import GOBLIN, call, encode, free_port, send_pipelined, start, stop

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = ["expiry", "del-hash", "del-set", "del-zset", "del-list", "flushall", "grow",
             "bgsave"]


def pipeline(port, commands, batch=2000):
    """Sends `commands` (encoded) in batches, reading every reply."""
    send_pipelined(port, commands, batch)


class Pinger(threading.Thread):
    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.lat, self.on, self.quit = port, [], False, False

    def run(self):
        with socket.create_connection(("127.0.0.1", self.port)) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while not self.quit:
                t0 = time.perf_counter()
                s.sendall(b"*1\r\n$4\r\nPING\r\n")
                buf = b""
                while not buf.endswith(b"\r\n"):
                    buf += s.recv(64)
                if self.on:
                    self.lat.append((time.perf_counter() - t0) * 1000)
                time.sleep(0.0002)

    def window(self, f):
        """Latencies while f() runs."""
        self.lat = []
        self.on = True
        try:
            f()
        finally:
            self.on = False
        return sorted(self.lat)


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
    raise ValueError(name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--only", default=",".join(SCENARIOS))
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
        pinger = Pinger(port)
        pinger.start()
        try:
            rows = [("idle", pinger.window(lambda: time.sleep(0.5)))]
            for scenario in opts.only.split(","):
                rows.append((scenario, run_scenario(scenario, port, opts.keys, pinger)))
            for scenario, lat in rows:
                if not lat:
                    print(f"{scenario:10} {name:8} {0:>6} (no PING answered in the window)")
                    continue
                p999 = lat[min(len(lat) - 1, int(len(lat) * 0.999))]
                print(f"{scenario:10} {name:8} {len(lat):>6} {lat[-1]:>8.2f} {p999:>8.2f} "
                      f"{statistics.median(lat):>7.3f}", flush=True)
        finally:
            pinger.quit = True
            stop([server])


if __name__ == "__main__":
    main()
