#!/usr/bin/env python3
"""Memory per element of collections: goblin-server against redis-server, in one run.

Cases (each on a fresh pair of servers, goblin --threads 1 and redis-server 7):
- hash:   one hash of N fields (`f:%09d` → `v:%09d`);
- set:    one set of N string members (`member:%09d`);
- intset: one set of N integer members (big: past the intset limit, a hashtable);
- zset:   one sorted set of N members (`m:%09d`) with distinct scores;
- small:  N/10 hashes of 10 fields each (listpack-encoded in Redis);
- list:   one list of N elements (`e:%09d`, RPUSH);
- lists:  N/10 lists of 10 elements each;
- stream: one stream of N entries of 3 fields (`XADD s <i>-1 f1 v:%09d f2 v:%09d f3
          v:%09d`, explicit IDs 1-1 … N-1, one entry per command).
Reports each server's `used_memory` growth (its allocator's count) per element, and
goblin ÷ redis. The target is goblin ≤ redis.

  bench/memory-types.py --elements 1000000 [--cases hash,set,intset,zset,small,stream]
"""
import argparse
import signal
import socket

from benchlib import GOBLIN, encode, free_port, send_pipelined, start

BATCH = 1000


def run(port, commands):
    """Sends the commands in pipelined batches and reads every reply."""
    send_pipelined(port, commands, BATCH)


def used_memory(port):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(encode("INFO", "memory"))
        f = s.makefile("rb")
        size = int(f.readline()[1:])
        text = f.read(size + 2).decode(errors="replace")
    for line in text.splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":")[1])
    raise RuntimeError("no used_memory")


def commands(case, n):
    """The commands that build `case` with `n` elements."""
    per = 100  # elements per command
    out = []
    if case == "small":
        for k in range(n // 10):
            args = ["HSET", f"small:{k:09d}"]
            for j in range(10):
                args += [f"field{j}", f"value-{k % 1000:03d}"]
            out.append(encode(*args))
        return out
    if case == "stream":
        for i in range(1, n + 1):
            v = f"v:{i:09d}"
            out.append(encode("XADD", "s", f"{i}-1", "f1", v, "f2", v, "f3", v))
        return out
    if case == "lists":
        for k in range(n // 10):
            out.append(encode("RPUSH", f"list:{k:09d}", *[f"e:{k * 10 + j:09d}" for j in range(10)]))
        return out
    for start_at in range(0, n, per):
        ids = range(start_at, min(n, start_at + per))
        if case == "hash":
            args = ["HSET", "big"] + [x for i in ids for x in (f"f:{i:09d}", f"v:{i:09d}")]
        elif case == "set":
            args = ["SADD", "big"] + [f"member:{i:09d}" for i in ids]
        elif case == "intset":
            args = ["SADD", "big"] + [str(i * 7) for i in ids]
        elif case == "list":
            args = ["RPUSH", "big"] + [f"e:{i:09d}" for i in ids]
        elif case == "zset":
            args = ["ZADD", "big"] + [x for i in ids for x in (str(i), f"m:{i:09d}")]
        else:
            raise SystemExit(f"unknown case {case}")
        out.append(encode(*args))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--elements", type=int, default=1_000_000)
    ap.add_argument("--cases", default="hash,set,intset,zset,small,list,lists,stream")
    opts = ap.parse_args()
    print(f"# used_memory growth per element, {opts.elements} elements "
          "(small, lists: elements/10 keys of 10; stream: entries of 3 fields)")
    print("| case | goblin B/element | redis B/element | goblin ÷ redis |")
    print("|---|--:|--:|--:|")
    for case in opts.cases.split(","):
        cmds = commands(case, opts.elements)
        per = []
        for name, argv in (("goblin", [GOBLIN, "--threads", "1"]),
                           ("redis", ["redis-server", "--save", "", "--appendonly", "no"])):
            port = free_port()
            server = start(name, argv + ["--port", str(port)], port)
            try:
                before = used_memory(port)
                run(port, cmds)
                per.append((used_memory(port) - before) / opts.elements)
            finally:
                server["proc"].send_signal(signal.SIGTERM)
                server["proc"].wait()
        print(f"| {case} | {per[0]:.1f} | {per[1]:.1f} | {per[0] / per[1]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
