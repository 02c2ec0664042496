#!/usr/bin/env python3
"""A pipeline of 100,000 commands sent in one write: how long until every reply is in,
goblin-server against redis-server, side by side in one run.

Servers pinned to core 0, the client on core 1. Each round connects, sends the whole
pipeline with one `sendall`, reads until the last reply has arrived and counts the
replies; the time is from the first byte sent to the last byte received, with the
server's CPU time over the same span. Medians over --rounds; every round starts from an
empty keyspace (FLUSHALL, not timed).

  bench/big-pipeline.py --rounds 5 [--commands 100000] [--kinds set,get,incr,ping] [--each]

`--each` prints every round's time too: with --threads 2 the connection lands on either
thread, round by round, and the two can differ.
"""
import argparse
import socket
import statistics
import time

from benchlib import GOBLIN, cpu_seconds, encode, free_port, start, stop

KINDS = {
    "set": lambda i: [b"SET", b"key:%d" % i, b"value-%d" % i],
    "get": lambda i: [b"GET", b"key:%d" % i],
    "incr": lambda i: [b"INCR", b"counter:%d" % (i % 1000)],
    "ping": lambda i: [b"PING"],
}


def count_replies(buf):
    """Top-level replies in `buf` (simple types and bulk strings only, as these commands
    answer)."""
    n, at = 0, 0
    while at < len(buf):
        end = buf.find(b"\r\n", at)
        if end < 0:
            break
        if buf[at:at + 1] == b"$":
            size = int(buf[at + 1:end])
            at = end + 2 + (size + 2 if size >= 0 else 0)
        else:
            at = end + 2
        n += 1
    return n


def one_round(server, payload, expected):
    port = server["port"]
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(encode(b"FLUSHALL"))
        s.recv(100)
        # Fill the keys GET reads, untimed.
        s.sendall(b"".join(encode(*KINDS["set"](i)) for i in range(expected)))
        got = b""
        while count_replies(got) < expected:
            got += s.recv(1 << 20)
        cpu0 = cpu_seconds(server["proc"].pid)
        t0 = time.perf_counter()
        s.sendall(payload)
        received, tail, replies = 0, b"", 0
        while replies < expected:
            chunk = s.recv(1 << 20)
            if not chunk:
                raise RuntimeError("connection closed")
            data = tail + chunk
            # Count whole replies; keep an incomplete one for the next chunk.
            last = data.rfind(b"\r\n")
            whole, tail = data[:last + 2], data[last + 2:]
            replies += count_replies(whole) if whole else 0
            received += len(chunk)
        elapsed = time.perf_counter() - t0
        cpu = cpu_seconds(server["proc"].pid) - cpu0
    return elapsed, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--commands", type=int, default=100_000)
    ap.add_argument("--kinds", default="set,get,incr,ping")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--each", action="store_true", help="print every round's time")
    opts = ap.parse_args()
    servers = []
    try:
        pg, pr = free_port(), free_port()
        servers.append(start("goblin", [GOBLIN, "--port", str(pg), "--threads",
                                        str(opts.threads)], pg))
        servers.append(start("redis-server", ["redis-server", "--port", str(pr), "--save", "",
                                              "--appendonly", "no"], pr))
        print(f"# {opts.commands} commands in one write, client on core 1, servers on core 0; "
              f"median of {opts.rounds} rounds (goblin --threads {opts.threads})")
        print(f"{'kind':<6} {'server':<14} {'seconds':>9} {'server CPU s':>13}")
        for kind in opts.kinds.split(","):
            payload = b"".join(encode(*KINDS[kind](i)) for i in range(opts.commands))
            results = {s["name"]: [] for s in servers}
            for _ in range(opts.rounds):
                for s in servers:  # alternating, so that drift hits both alike
                    results[s["name"]].append(one_round(s, payload, opts.commands))
            for s in servers:
                r = results[s["name"]]
                each = "  " + " ".join(f"{x[0]:.3f}" for x in r) if opts.each else ""
                print(f"{kind:<6} {s['name']:<14} {statistics.median(x[0] for x in r):>9.3f} "
                      f"{statistics.median(x[1] for x in r):>13.3f}{each}")
    finally:
        stop(servers)


if __name__ == "__main__":
    main()
