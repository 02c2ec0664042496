#!/usr/bin/env python3
"""Readers and a writer on the same keys across shards: how long a writer's pipeline takes
while two readers keep reading the keys it writes — a hot-key case for the commands run
early (a key locked for a reader's round trip holds a writer back).

The pattern of tests/tests/e2e/ordering.rs at --threads 4: keys a_i on shard 0 and b_i on
shard 3; the writer pipelines SET a_i, SET b_i for 3,000 pairs in one write; one reader
loops on MGET of 32 pairs, the other on pipelines of GET b_i, GET a_i, over a window that
walks the keys. `--shift N` opens N idle connections first, so that the writer and the
readers land on other threads (connections are dealt round-robin): each placement is a
different mix of own-shard and remote commands. Prints the median of --reps runs of the
writer's time per build and shift.

  cargo build --release -p goblin-server
  bench/contended-order.py --before /path/to/old/goblin-server [--after ...] [--reps 3]
"""
import argparse
import socket
import statistics
import threading
import time

from benchlib import GOBLIN, encode, free_port, start, stop

THREADS, PAIRS, WINDOW = 4, 3000, 32


def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def keys(prefix, shard, n):
    out, i = [], 0
    while len(out) < n:
        k = f"{prefix}{i}"
        if (crc16(k.encode()) % 16384) * THREADS // 16384 == shard:
            out.append(k)
        i += 1
    return out


def replies(sock, n):
    """Reads n replies (simple, bulk, or arrays of bulks)."""
    buf, pos, got = b"", 0, 0

    def one(p):
        end = buf.find(b"\r\n", p)
        if end < 0:
            return None
        kind = buf[p:p + 1]
        if kind in (b"+", b"-", b":"):
            return end + 2
        if kind == b"$":
            size = int(buf[p + 1:end])
            stop_at = end + 2 + (size + 2 if size >= 0 else 0)
            return stop_at if size < 0 or len(buf) >= stop_at else None
        count, p = int(buf[p + 1:end]), end + 2
        for _ in range(count):
            p = one(p)
            if p is None:
                return None
        return p

    while got < n:
        data = sock.recv(1 << 20)
        if not data:
            raise ConnectionError("closed")
        buf += data
        while (nxt := one(pos)) is not None:
            pos, got = nxt, got + 1
            if got == n:
                break


def run(port, shift):
    a, b = keys("a", 0, PAIRS), keys("b", THREADS - 1, PAIRS)
    order = [k for pair in zip(a, b) for k in pair]
    conn = lambda: socket.create_connection(("127.0.0.1", port), timeout=60)
    idle = [conn() for _ in range(shift)]
    writer, readers = conn(), [conn(), conn()]
    done = threading.Event()

    def read(r, sock):
        frontier = 0
        while not done.is_set():
            start_at = min(max(frontier - WINDOW // 2, 0), PAIRS - WINDOW)
            if r == 0:
                sock.sendall(encode("MGET", *order[2 * start_at:2 * (start_at + WINDOW)]))
                replies(sock, 1)
            else:
                sock.sendall(b"".join(encode("GET", b[i]) + encode("GET", a[i])
                                      for i in range(start_at, start_at + WINDOW)))
                replies(sock, 2 * WINDOW)
            frontier = (frontier + 7) % PAIRS

    threads = [threading.Thread(target=read, args=(r, s), daemon=True)
               for r, s in enumerate(readers)]
    for t in threads:
        t.start()
    t0 = time.time()
    writer.sendall(b"".join(encode("SET", k, str(i // 2)) for i, k in enumerate(order)))
    replies(writer, 2 * PAIRS)
    took = time.time() - t0
    done.set()
    for t in threads:
        t.join()
    for s in idle + readers + [writer]:
        s.close()
    return took


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", default=GOBLIN)
    ap.add_argument("--reps", type=int, default=3)
    opts = ap.parse_args()
    print("| shift | before (s) | after (s) |")
    print("|--:|--:|--:|")
    for shift in range(THREADS):
        row = []
        for path in (opts.before, opts.after):
            times = []
            for _ in range(opts.reps):
                port = free_port()
                server = start("goblin", [path, "--port", str(port), "--threads", str(THREADS)],
                               port, cpus="0,1")
                try:
                    times.append(run(port, shift))
                finally:
                    stop([server])
            row.append(statistics.median(times))
        print(f"| {shift} | {row[0]:.3f} | {row[1]:.3f} |")


if __name__ == "__main__":
    main()
