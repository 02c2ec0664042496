#!/usr/bin/env python3
"""Wake-up latency of a blocked consumer: the time from a producer's LPUSH to the
consumer's BLPOP reply, goblin-server beside redis-server in one run.

For goblin (--threads 2) the consumer's connection is placed on the worker that owns the
list's key (the pusher's shard: the pop runs where the push ran) or on the other one (the
served wait crosses threads to reach its coordinator). Every server pinned to core 0; this
script (producer and consumer, one thread) on core 1. Each round: the consumer sends
`BLPOP key 0`, waits until the server counts it blocked, then the producer sends
`LPUSH key x` and the time until the consumer's reply is read is one sample.

  bench/wakeup.py --samples 2000
"""
import argparse
import os
import socket
import statistics
import time

from benchlib import GOBLIN, free_port, start, stop

CRC16_TABLE = []
for i in range(256):
    crc = i << 8
    for _ in range(8):
        crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
    CRC16_TABLE.append(crc & 0xFFFF)


def key_slot(key: bytes) -> int:
    s = key.find(b"{")
    if s >= 0:
        e = key.find(b"}", s + 1)
        if e > s + 1:
            key = key[s + 1:e]
    crc = 0
    for b in key:
        crc = ((crc << 8) & 0xFFFF) ^ CRC16_TABLE[((crc >> 8) ^ b) & 0xFF]
    return crc % 16384


def encode(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile("rb")

    def send(self, *args):
        self.s.sendall(encode(*args))

    def reply(self):
        line = self.f.readline()
        if line[:1] in b"*":
            n = int(line[1:])
            return [self.reply() for _ in range(max(n, 0))]
        if line[:1] == b"$":
            n = int(line[1:])
            return None if n < 0 else self.f.read(n + 2)[:-2]
        return line.strip()

    def cmd(self, *args):
        self.send(*args)
        return self.reply()


def info_field(conn, field):
    text = conn.cmd("INFO", "clients").decode()
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1]
    return None


def until_blocked(admin, n):
    while info_field(admin, "blocked_clients") != str(n):
        pass


def measure(port, key, samples, consumer, producer, admin):
    lat = []
    for _ in range(samples):
        consumer.send("BLPOP", key, "0")
        until_blocked(admin, 1)
        t0 = time.perf_counter()
        producer.send("LPUSH", key, "x")
        consumer.reply()
        lat.append(time.perf_counter() - t0)
        producer.reply()
    return lat


def placed_consumer(port, want_worker):
    """A connection on goblin's worker `want_worker` (connections are dealt in turn)."""
    while True:
        admin = Conn(port)
        before = info_field(admin, "goblin_clients_per_thread").split(",")
        c = Conn(port)
        after = info_field(admin, "goblin_clients_per_thread").split(",")
        worker = [i for i in range(len(after)) if int(after[i]) > int(before[i])][0]
        if worker == want_worker:
            return c, admin
        c.s.close()
        admin.s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    opts = ap.parse_args()
    os.sched_setaffinity(0, {1})
    servers = []
    try:
        gp, rp = free_port(), free_port()
        servers.append(start("goblin --threads 2", [GOBLIN, "--port", str(gp), "--threads", "2"], gp))
        servers.append(start("redis-server", ["redis-server", "--port", str(rp), "--save", "",
                                              "--appendonly", "no"], rp))
        # A key on goblin's shard 0 (slots 0..8191 with two threads).
        key = next(f"queue:{i}" for i in range(1000) if key_slot(f"queue:{i}".encode()) < 8192)
        cases = {}
        for _ in range(opts.rounds):
            for name, port, worker in (("goblin, consumer on the key's shard", gp, 0),
                                       ("goblin, consumer on the other shard", gp, 1),
                                       ("redis-server", rp, None)):
                if worker is None:
                    consumer, admin = Conn(port), Conn(port)
                else:
                    consumer, admin = placed_consumer(port, worker)
                producer = Conn(port)
                cases.setdefault(name, []).extend(
                    measure(port, key, opts.samples, consumer, producer, admin))
                for c in (consumer, admin, producer):
                    c.s.close()
        print(f"# push → blocked pop reply, {opts.rounds} × {opts.samples} samples; servers on "
              "core 0, producer and consumer on core 1")
        print("| consumer | p50 µs | p90 µs | p99 µs |")
        print("|---|--:|--:|--:|")
        for name, lat in cases.items():
            lat.sort()
            q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1e6
            print(f"| {name} | {q(0.5):.0f} | {q(0.9):.0f} | {q(0.99):.0f} |")
    finally:
        stop(servers)


if __name__ == "__main__":
    main()
