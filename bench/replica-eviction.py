#!/usr/bin/env python3
"""A stalled replica under `maxmemory`: how many keys its master evicts.

A master (the binary given) holds 100 keys of 100 KB; a goblin-server replica of the same
binary syncs; `maxmemory` is set 32 KB over what the master counts against it (INFO's
used_memory less mem_not_counted_for_evict); the replica is SIGSTOPped and the master
takes 100,000 `SETRANGE key:0 0 <100 bytes>` (about 10 MB of stream the replica is not
sent). redis-server evicts nothing: a replica's buffers are left out of `maxmemory`.
Prints the master's DBSIZE, evicted_keys and mem_clients_slaves at the end.

  bench/replica-eviction.py target/release/goblin-server [--threads 2] [--writes 100000]
"""
import argparse
import os
import signal
import socket
import subprocess
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Client:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def cmd(self, *args):
        words = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        self.sock.sendall(b"*%d\r\n" % len(words)
                          + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in words))
        return self.reply()

    def reply(self):
        while b"\r\n" not in self.buf:
            self.buf += self.sock.recv(65536)
        line, self.buf = self.buf.split(b"\r\n", 1)
        if line[:1] == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.sock.recv(65536)
            value, self.buf = self.buf[:n], self.buf[n + 2:]
            return value
        return line

    def info(self, section):
        text = self.cmd("INFO", section).decode()
        return dict(l.split(":", 1) for l in text.split("\r\n") if ":" in l)


def wait_port(port):
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--writes", type=int, default=100_000)
    opts = ap.parse_args()
    procs = []
    try:
        ports = []
        for _ in range(2):
            port = free_port()
            procs.append(subprocess.Popen(
                [opts.binary, "--bind", "127.0.0.1", "--port", str(port), "--threads",
                 opts.threads, "--save", "", "--dir", tempfile.mkdtemp()],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_port(port)
            ports.append(port)
        master, replica = Client(ports[0]), Client(ports[1])
        for j in range(100):
            master.cmd("SETRANGE", f"key:{j}", 100000, "asdf")
        for setting in [("slowlog-log-slower-than", -1), ("latency-tracking", "no"),
                        ("maxmemory-policy", "allkeys-random"),
                        ("client-output-buffer-limit", "replica 0 0 0"),
                        ("repl-backlog-size", 10 * 1024)]:
            master.cmd("CONFIG", "SET", *setting)
        replica.cmd("REPLICAOF", "127.0.0.1", ports[0])
        while "master_link_status:up" not in replica.cmd("INFO", "replication").decode():
            time.sleep(0.1)
        memory = master.info("memory")
        limit = (int(memory["used_memory"]) - int(memory["mem_not_counted_for_evict"])
                 + 32 * 1024)
        master.cmd("CONFIG", "SET", "maxmemory", limit)
        os.kill(procs[1].pid, signal.SIGSTOP)
        payload = b"A" * 100
        for _ in range(opts.writes):
            master.cmd("SETRANGE", "key:0", 0, payload)
        memory = master.info("memory")
        evicted = master.info("stats")["evicted_keys"]
        print(f"threads {opts.threads}: dbsize {master.cmd('DBSIZE').decode()[1:]}, "
              f"evicted_keys {evicted}, mem_clients_slaves {memory['mem_clients_slaves']}")
    finally:
        for p in procs:
            try:
                os.kill(p.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            p.kill()
            p.wait()


if __name__ == "__main__":
    main()
