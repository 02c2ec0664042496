#!/usr/bin/env python3
"""Memory per key: goblin-server against redis-server, in the same run.

Loads N keys of 16 bytes (`key:%012d`) with 32-byte values into each server, once without
and once with a TTL on every key (`SET k v EX 3600`), and reports the resident set size
(VmRSS) growth per key, and each server's own `used_memory` figure.

  bench/memory.py --keys 1000000
"""
import argparse
import signal
import socket

from benchlib import GOBLIN, free_port, start


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def info_field(port, field):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"*2\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n")
        data = b""
        while b"\r\n" not in data:
            data += s.recv(65536)
        head, _, rest = data.partition(b"\r\n")
        size = int(head[1:])
        while len(rest) < size:
            rest += s.recv(65536)
    for line in rest.decode(errors="replace").splitlines():
        if line.startswith(field + ":"):
            return int(line.split(":")[1])
    return None


def load(port, n, ttl):
    value = b"v" * 32
    batch = []
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(60)
        pending = 0
        for i in range(n):
            key = b"key:%012d" % i
            if ttl:
                batch.append(b"*5\r\n$3\r\nSET\r\n$16\r\n%s\r\n$32\r\n%s\r\n$2\r\nEX\r\n$4\r\n3600\r\n" % (key, value))
            else:
                batch.append(b"*3\r\n$3\r\nSET\r\n$16\r\n%s\r\n$32\r\n%s\r\n" % (key, value))
            if len(batch) == 1000 or i == n - 1:
                s.sendall(b"".join(batch))
                pending += len(batch)
                batch = []
                got = b""
                while got.count(b"\r\n") < pending:
                    got += s.recv(1 << 20)
                pending = 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--threads", default="1")
    opts = ap.parse_args()
    print(f"# {opts.keys} keys, 16-byte keys, 32-byte values; RSS growth per key (VmRSS), "
          "and the server's used_memory growth per key")
    print(f"{'server':26} {'TTL':>4} {'RSS B/key':>10} {'used_memory B/key':>18}")
    for ttl in (False, True):
        for name in ("goblin", "redis"):
            port = free_port()
            if name == "goblin":
                server = start(f"goblin --threads {opts.threads}",
                               [GOBLIN, "--port", str(port), "--threads", opts.threads], port)
            else:
                server = start("redis-server", ["redis-server", "--port", str(port), "--save", "",
                                                "--appendonly", "no"], port)
            try:
                rss0 = rss_bytes(server["proc"].pid)
                used0 = info_field(port, "used_memory") or 0
                load(port, opts.keys, ttl)
                rss1 = rss_bytes(server["proc"].pid)
                used1 = info_field(port, "used_memory") or 0
                print(f"{server['name']:26} {'yes' if ttl else 'no':>4} "
                      f"{(rss1 - rss0) / opts.keys:>10.1f} {(used1 - used0) / opts.keys:>18.1f}")
            finally:
                server["proc"].send_signal(signal.SIGTERM)
                server["proc"].wait()


if __name__ == "__main__":
    main()
