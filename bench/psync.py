#!/usr/bin/env python3
"""Partial against full resynchronization: a Goblin master (core 0) with N keys
(DEBUG POPULATE), a Goblin replica (core 1); the replica's link is killed three times
(CLIENT KILL TYPE master: each time it continues from the master's backlog), then once
after DEBUG CHANGE-REPL-ID on the master (a full resync). Prints how long until the link
is up again each time (the replica waits 1 s before it connects again, as redis-server's
replication cron). Not a test: a measurement.

  bench/psync.py target/release/goblin-server 1000000
"""
import socket, subprocess, time, sys, os, shutil
def cmd(port, *args):
    s = socket.create_connection(("127.0.0.1", port)); f = s.makefile("rb")
    s.sendall(b"".join([b"*%d\r\n" % len(args)] + [b"$%d\r\n%s\r\n" % (len(a), a) for a in (x.encode() if isinstance(x,str) else x for x in args)]))
    line = f.readline()
    if line[:1] == b"$":
        n = int(line[1:]); data = f.read(n+2)[:-2]; s.close(); return data.decode()
    s.close(); return line.decode().strip()
def stat(port, name, section="stats"):
    for l in cmd(port, "INFO", section).splitlines():
        if l.startswith(name + ":"): return l.split(":",1)[1]
def wait(pred, t=120):
    d = time.time() + t
    while time.time() < d:
        if pred(): return
        time.sleep(0.002)
    raise SystemExit("timeout")
binp, keys = sys.argv[1], int(sys.argv[2])
for d in ("/tmp/psb/m", "/tmp/psb/r"): shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
m = subprocess.Popen(["taskset","-c","0",binp,"--port","7451","--threads","1","--dir","/tmp/psb/m","--save","","--enable-debug-command","yes"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
r = subprocess.Popen(["taskset","-c","1",binp,"--port","7452","--threads","1","--dir","/tmp/psb/r","--save","","--enable-debug-command","yes"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.5)
try:
    cmd(7451, "DEBUG", "POPULATE", str(keys), "key", "32")
    t0 = time.time(); cmd(7452, "REPLICAOF", "127.0.0.1", "7451")
    wait(lambda: stat(7452, "master_link_status", "replication") == "up")
    print(f"first full sync, {keys} keys: {(time.time()-t0)*1000:.0f} ms")
    for i in range(3):
        cmd(7451, "SET", f"gap{i}", "1")
        ok = int(stat(7451, "sync_partial_ok")); full = int(stat(7451, "sync_full"))
        t0 = time.time(); cmd(7452, "CLIENT", "KILL", "TYPE", "master")
        wait(lambda: int(stat(7451, "sync_partial_ok")) > ok or int(stat(7451, "sync_full")) > full)
        wait(lambda: stat(7452, "master_link_status", "replication") == "up")
        kind = "partial" if int(stat(7451, "sync_partial_ok")) > ok else "full"
        print(f"link killed -> {kind} resync, up again after {(time.time()-t0)*1000:.0f} ms (incl. the replica's 1 s retry pause)")
    # A full resync for comparison: a new replication id on the master.
    cmd(7451, "DEBUG", "CHANGE-REPL-ID"); full = int(stat(7451, "sync_full"))
    t0 = time.time(); cmd(7452, "CLIENT", "KILL", "TYPE", "master")
    wait(lambda: int(stat(7451, "sync_full")) > full)
    wait(lambda: stat(7452, "master_link_status", "replication") == "up")
    print(f"link killed, new replication id -> full resync, up again after {(time.time()-t0)*1000:.0f} ms")
finally:
    m.kill(); r.kill()
