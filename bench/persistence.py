#!/usr/bin/env python3
"""Persistence side by side: goblin-server and redis-server 7 with the same appendfsync.

1. SET throughput and server CPU per op at -P 16 and -P 1 with the log off, `everysec`
   and `always` (servers pinned to core 0, redis-benchmark on core 1, rounds alternating
   between servers; median of --rounds).
2. BGSAVE of N keys (default 1,000,000): how long it takes, and the worst and p99.9
   latency of PINGs sent by another client every millisecond while it runs (goblin writes
   its image in its loop, slot by slot; redis-server forks).
3. Loading N keys at start-up from an RDB file: goblin (--loadrdb) and redis-server, time
   until the first PING is answered with PONG.

  bench/persistence.py                      # everything
  bench/persistence.py --only throughput --rounds 3
  bench/persistence.py --only bgsave,load --keys 1000000

Builds nothing: run `cargo build --release -p goblin-server` first. Files go to a
temporary directory (on the same disk as /tmp), removed at the end.
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time

from benchlib import GOBLIN, bench, call, free_port, start, stop


def servers_for(fsync, tmp, threads):
    """goblin --threads N and redis-server with the log off or `appendfsync fsync`."""
    out = []
    for name, argv in (("goblin", [GOBLIN, "--threads", str(threads)]), ("redis", ["redis-server"])):
        d = os.path.join(tmp, f"{name}-{fsync}")
        os.makedirs(d, exist_ok=True)
        port = free_port()
        args = argv + ["--port", str(port), "--save", "", "--dir", d]
        if fsync == "off":
            args += ["--appendonly", "no"]
        else:
            # No automatic rewrite during the measurement: redis-server's runs in a forked
            # child whose CPU time its own /proc entry does not count.
            args += ["--appendonly", "yes", "--appendfsync", fsync,
                     "--auto-aof-rewrite-percentage", "0"]
            if name == "redis":
                args += ["--aof-use-rdb-preamble", "yes"]
        out.append(start(f"{name} {fsync}", args, port))
    return out


def throughput(opts, tmp):
    print(f"## SET throughput and server CPU per op ({opts.clients} clients, random keys over "
          f"{opts.keyspace}, median of {opts.rounds} rounds)")
    print(f"{'fsync':9} {'-P':>3}  {'server':16} {'ops/s':>10} {'CPU us/op':>10}")
    for fsync in opts.fsync.split(","):
        servers = servers_for(fsync, tmp, opts.threads)
        try:
            for pipeline in (16, 1):
                requests = opts.requests or (2_000_000 if pipeline > 1 else 300_000)
                if fsync == "always" and pipeline == 1:
                    requests = min(requests, 100_000)
                results = {s["name"]: [] for s in servers}
                for _ in range(opts.rounds):
                    for s in servers:
                        results[s["name"]].append(
                            bench(s, "set", pipeline, requests, opts.clients, opts.keyspace))
                for s in servers:
                    rps = statistics.median(r[0] for r in results[s["name"]])
                    cpu = statistics.median(r[1] for r in results[s["name"]])
                    print(f"{fsync:9} {pipeline:>3}  {s['name']:16} {rps:>10.0f} {cpu:>10.2f}",
                          flush=True)
        finally:
            stop(servers)


def fill(port, n):
    """n keys key:0..n-1 with 16-byte values, pipelined."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        batch = 10_000
        for start_at in range(0, n, batch):
            req = bytearray()
            count = min(batch, n - start_at)
            for i in range(start_at, start_at + count):
                k = b"key:%d" % i
                req += b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$16\r\nvalue-0123456789\r\n" % (len(k), k)
            s.sendall(req)
            got = 0
            buf = b""
            while got < count:
                buf += s.recv(1 << 20)
                got = buf.count(b"\r\n")


def ping_latencies(port, stop_when):
    """PINGs every ms until stop_when() is true; the latencies in ms."""
    lat = []
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while not stop_when():
            t0 = time.perf_counter()
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            buf = b""
            while not buf.endswith(b"\r\n"):
                buf += s.recv(64)
            lat.append((time.perf_counter() - t0) * 1000)
            time.sleep(0.001)
    return lat


def bgsave(opts, tmp):
    print(f"## BGSAVE of {opts.keys} keys (16-byte values): duration, PING latency meanwhile")
    print(f"{'server':12} {'BGSAVE s':>9} {'pings':>6} {'worst ms':>9} {'p99.9 ms':>9} {'p50 ms':>7}")
    for name, argv in (("goblin", [GOBLIN, "--threads", str(opts.threads)]), ("redis", ["redis-server"])):
        d = os.path.join(tmp, f"{name}-bgsave")
        os.makedirs(d, exist_ok=True)
        port = free_port()
        server = start(name, argv + ["--port", str(port), "--save", "", "--dir", d,
                                     "--appendonly", "no"], port)
        try:
            fill(port, opts.keys)
            call(port, "SAVE")  # warm the file system
            # The noise floor: the same PINGs with nothing else running.
            until = time.perf_counter() + 0.5
            idle = sorted(ping_latencies(port, lambda: time.perf_counter() > until))
            i999 = idle[min(len(idle) - 1, int(len(idle) * 0.999))]
            print(f"{name + ' idle':12} {'-':>9} {len(idle):>6} {idle[-1]:>9.3f} {i999:>9.3f} "
                  f"{statistics.median(idle):>7.3f}", flush=True)
            t0 = time.perf_counter()
            call(port, "BGSAVE")
            done = {"at": None}

            def finished():
                info = call(port, "INFO", "persistence")
                if "rdb_bgsave_in_progress:0" in info:
                    done["at"] = time.perf_counter()
                    return True
                return False

            lat = ping_latencies(port, finished)
            took = done["at"] - t0
            lat.sort()
            p999 = lat[min(len(lat) - 1, int(len(lat) * 0.999))]
            print(f"{name:12} {took:>9.3f} {len(lat):>6} {lat[-1]:>9.3f} {p999:>9.3f} "
                  f"{statistics.median(lat):>7.3f}", flush=True)
        finally:
            stop([server])


def load(opts, tmp):
    print(f"## Loading {opts.keys} keys from an RDB file at start-up (until PING answers PONG)")
    d = os.path.join(tmp, "load")
    os.makedirs(d, exist_ok=True)
    port = free_port()
    maker = start("redis", ["redis-server", "--port", str(port), "--save", "", "--dir", d,
                            "--appendonly", "no"], port)
    try:
        fill(port, opts.keys)
        call(port, "SAVE")
    finally:
        stop([maker])
    rdb = os.path.join(d, "dump.rdb")
    print(f"{'server':8} {'seconds':>8}  (file: {os.path.getsize(rdb) / 1e6:.1f} MB)")
    for name in ("goblin", "redis"):
        port = free_port()
        if name == "goblin":
            argv = [GOBLIN, "--bind", "127.0.0.1", "--threads", str(opts.threads), "--port", str(port), "--save", "",
                    "--loadrdb", rdb, "--dir", d]
        else:
            argv = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--dir", d,
                    "--dbfilename", "dump.rdb", "--appendonly", "no"]
        t0 = time.perf_counter()
        proc = subprocess.Popen(["taskset", "-c", "0"] + argv, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            while True:
                try:
                    if call(port, "PING") == "PONG":
                        break
                except (OSError, RuntimeError):
                    pass
                time.sleep(0.002)
            took = time.perf_counter() - t0
            keys = call(port, "DBSIZE")
            print(f"{name:8} {took:>8.3f}  ({keys} keys)", flush=True)
        finally:
            proc.kill()
            proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="throughput,bgsave,load")
    ap.add_argument("--fsync", default="off,everysec,always")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--keyspace", type=int, default=1_000_000)
    ap.add_argument("--requests", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="goblin-server threads")
    ap.add_argument("--keys", type=int, default=1_000_000, help="keys for bgsave and load")
    opts = ap.parse_args()
    # This process (the PING prober) stays off the servers' core.
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})
    tmp = tempfile.mkdtemp(prefix="goblin-persist-bench-", dir=os.environ.get("TMPDIR", "/tmp"))
    print(f"# {os.uname().nodename}, {os.cpu_count()} cores; servers on core 0, load on core 1; "
          f"goblin --threads {opts.threads}; files in {tmp}")
    try:
        parts = opts.only.split(",")
        if "throughput" in parts:
            throughput(opts, tmp)
        if "bgsave" in parts:
            bgsave(opts, tmp)
        if "load" in parts:
            load(opts, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
