#!/usr/bin/env python3
"""Is goblin-loadgen the bottleneck?

Runs redis-benchmark and goblin-loadgen (--threads 1) against one redis-server pinned to
one core, both clients pinned to another, with the same connections and pipeline depth,
alternating, for several rounds. For every run it records the throughput, the client's
CPU time per request, and the server's CPU use (from /proc) — on a shared machine the
server's share of its core moves the throughput, so the server CPU figures say which runs
were disturbed. Prints every round and a summary (median and best per client and depth).

usage: bench/loadgen-vs-redis-benchmark.py [--rounds N] [--duration SECS]
                                           [--server-cpu C] [--client-cpu C] [--rt]

--rt (root only) runs the server and the clients under SCHED_FIFO (chrt -f 10). On a
machine where other jobs keep the cores busy, the default scheduler (EEVDF) often lets the
running job finish its slice before a woken benchmark process gets the core. Every
request/reply round trip then pays that delay, and throughput falls by half or more for
both clients alike. SCHED_FIFO preempts at once. The benchmark processes sleep in
epoll_wait whenever they have nothing to do, so they never monopolise a core.
"""

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOADGEN = os.path.join(ROOT, "target", "release", "goblin-loadgen")
CONNECTIONS = 50
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu_s(pid):
    """User + system CPU seconds used so far by process `pid`."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def run(cmd, server_pid):
    """Runs cmd; returns (stdout, wall seconds, client CPU seconds, server CPU seconds)."""
    s0, t0 = proc_cpu_s(server_pid), time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall, s1 = time.monotonic() - t0, proc_cpu_s(server_pid)
    if status != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.decode(errors='replace')}")
    return out.decode(errors="replace"), wall, usage.ru_utime + usage.ru_stime, s1 - s0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per goblin-loadgen run")
    ap.add_argument("--server-cpu", default="0")
    ap.add_argument("--client-cpu", default="1")
    ap.add_argument("--rt", action="store_true", help="run server and clients under SCHED_FIFO")
    args = ap.parse_args()
    prio = ["chrt", "-f", "10"] if args.rt else []
    for tool in ("redis-server", "redis-benchmark", "redis-cli", "taskset"):
        if not shutil.which(tool):
            sys.exit(f"missing {tool}: apt-get install -y redis-server redis-tools util-linux")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "goblin-loadgen"], cwd=ROOT, check=True)

    port = free_port()
    server = subprocess.Popen(
        prio + ["taskset", "-c", args.server_cpu, "redis-server", "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    tmp = tempfile.mkdtemp()
    try:
        for _ in range(200):
            if subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).returncode == 0:
                break
            time.sleep(0.05)
        pin = prio + ["taskset", "-c", args.client_cpu]
        results = {}
        print(f"{'client':<16} {'P':>2} {'round':>5} {'ops/s':>10} {'client CPU µs/req':>18} "
              f"{'server CPU %':>12} {'server ops/CPU-s':>16}")
        for depth in (1, 16):
            # redis-benchmark runs a request count: size it to about --duration seconds.
            n = int((150_000 if depth == 1 else 1_800_000) * args.duration)
            for rnd in range(1, args.rounds + 1):
                rb = pin + ["redis-benchmark", "-p", str(port), "-t", "get", "-n", str(n),
                            "-c", str(CONNECTIONS), "-P", str(depth), "-q"]
                out, wall, ccpu, scpu = run(rb, server.pid)
                ops = float(re.findall(r"GET: ([\d.]+) requests per second", out.replace("\r", "\n"))[-1])
                results.setdefault(("redis-benchmark", depth), []).append((ops, ccpu / n, scpu / wall, n / scpu))
                json_path = os.path.join(tmp, "lg.json")
                lg = pin + [LOADGEN, "--port", str(port), "--target", "redis", "--workload", "get",
                            "--connections", str(CONNECTIONS), "--pipeline", str(depth),
                            "--duration", str(args.duration), "--quiet", "--json", json_path]
                _, wall, ccpu, scpu = run(lg, server.pid)
                with open(json_path) as f:
                    doc = json.load(f)
                reqs = doc["requests"]
                results.setdefault(("goblin-loadgen", depth), []).append(
                    (doc["throughput_ops"], ccpu / reqs, scpu / wall, reqs / scpu))
                for client in ("redis-benchmark", "goblin-loadgen"):
                    o, c, s, e = results[(client, depth)][-1]
                    print(f"{client:<16} {depth:>2} {rnd:>5} {o:>10.0f} {c * 1e6:>18.2f} {s * 100:>12.0f} {e:>16.0f}",
                          flush=True)
        print("\nsummary (median of rounds; best throughput in brackets)")
        print(f"{'client':<16} {'P':>2} {'ops/s':>22} {'client CPU µs/req':>18} {'server CPU %':>12}")
        for (client, depth), rows in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0] != "redis-benchmark")):
            med = lambda i: statistics.median(r[i] for r in rows)
            best = max(r[0] for r in rows)
            print(f"{client:<16} {depth:>2} {med(0):>11.0f} [{best:>8.0f}] {med(1) * 1e6:>18.2f} {med(2) * 100:>12.0f}")
        model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
        print(f"\nscheduling: {'SCHED_FIFO 10 (chrt -f 10)' if args.rt else 'default'}; "
              f"server on CPU {args.server_cpu}, clients on CPU {args.client_cpu}")
        print(f"machine: {os.cpu_count()} cores, {model}; "
              f"{subprocess.run(['redis-server', '--version'], capture_output=True, text=True).stdout.split(' sha')[0]}; "
              f"load average after: {open('/proc/loadavg').read().split()[:3]}")
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
