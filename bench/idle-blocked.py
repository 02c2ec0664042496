#!/usr/bin/env python3
"""What blocked clients cost while they wait: N clients each blocked in `BLPOP key_i 0` on
a different key, then the server's CPU time over a quiet window, goblin-server beside
redis-server in one run (both pinned to core 0). A server that polls its waiters, or scans
them each tick, shows here; one that parks them costs only its timer tick.

Afterwards every waiter is served by one LPUSH each, to check that none was lost.

  bench/idle-blocked.py --clients 10000 --seconds 10
"""
import argparse
import resource
import socket
import time

from benchlib import GOBLIN, cpu_seconds, free_port, start, stop


def raise_fd_limit(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))


def info_field(port, section, field):
    """One field of INFO `section`, read from the bulk string reply."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(f"INFO {section}\r\n".encode())
        data = b""
        while b"\r\n" not in data:
            data += s.recv(65536)
        head, _, body = data.partition(b"\r\n")
        while len(body) < int(head[1:]) + 2:
            body += s.recv(65536)
    for line in body.decode().splitlines():
        if line.startswith(field + ":"):
            return int(line.split(":")[1])
    return None


def measure(server, clients, seconds):
    port = server["port"]
    socks = []
    for i in range(clients):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(f"BLPOP idle:{i} 0\r\n".encode())
        socks.append(s)
    deadline = time.time() + 60
    while info_field(port, "clients", "blocked_clients") != clients:
        if time.time() > deadline:
            raise SystemExit(f"{server['name']}: not every client blocked")
        time.sleep(0.1)
    time.sleep(1.0)
    pid = server["proc"].pid
    before = cpu_seconds(pid)
    time.sleep(seconds)
    used = cpu_seconds(pid) - before
    with socket.create_connection(("127.0.0.1", port)) as p:
        for i in range(clients):
            p.sendall(f"LPUSH idle:{i} v\r\n".encode())
        served = 0
        for s in socks:
            s.settimeout(10)
            if s.recv(100).startswith(b"*2"):
                served += 1
            s.close()
    return used, served


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=10000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    raise_fd_limit(a.clients * 2 + 256)
    rows = []
    for name in ("goblin", "redis"):
        port = free_port()
        if name == "goblin":
            argv = [GOBLIN, "--port", str(port), "--threads", str(a.threads)]
        else:
            argv = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                    "--maxclients", str(a.clients + 100)]
        server = start(name, argv, port)
        try:
            used, served = measure(server, a.clients, a.seconds)
        finally:
            stop([server])
        rows.append((name, used, served))
    print(f"{a.clients} clients blocked on {a.clients} keys, server CPU over {a.seconds:g} s idle")
    for name, used, served in rows:
        print(f"  {name:7} {used * 1000 / a.seconds:7.2f} ms CPU per second   "
              f"({100 * used / a.seconds:.2f}% of a core); served afterwards {served}/{a.clients}")


if __name__ == "__main__":
    main()
