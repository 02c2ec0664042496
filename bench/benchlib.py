"""Helpers shared by the benchmark scripts: free ports, pinned servers, CPU accounting,
redis-benchmark and goblin-loadgen runs, machine description."""
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOBLIN = os.environ.get("GOBLIN_SERVER_BIN") or os.path.join(ROOT, "target", "release", "goblin-server")
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    total = 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    total += int(fields[11]) + int(fields[12])  # utime, stime (in ticks)
    return total / TICK


def wait_port(port, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port}")


def start(name, argv, port, cpus="0"):
    """Starts `argv` pinned to `cpus` (taskset execs it, so the pid is the server's) and
    waits until it listens on `port`. goblin-server gets no `save` rules and a directory
    of its own unless `argv` says otherwise (as the redis-servers here run without them), so
    that no background save or stray dump.rdb touches a measurement."""
    # On the loopback interface only (both servers' default is every address).
    if argv and "--bind" not in argv:
        argv = argv + ["--bind", "127.0.0.1"]
    if argv and argv[0] == GOBLIN:
        if "--save" not in argv:
            argv = argv + ["--save", ""]
        if "--dir" not in argv:
            import tempfile
            argv = argv + ["--dir", tempfile.mkdtemp(prefix="goblin-bench-")]
    proc = subprocess.Popen(["taskset", "-c", cpus] + argv, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        # Listening is not ready: a server answers LOADING until its dataset is in.
        for _ in range(600):
            try:
                call(port, "PING")
                break
            except RuntimeError as e:
                if not str(e).startswith("LOADING"):
                    break
                time.sleep(0.05)
    except BaseException:  # not listening, or interrupted: the caller never gets to stop it
        proc.kill()
        proc.wait()
        raise
    return {"name": name, "proc": proc, "port": port}


def bench(server, test, pipeline, requests, clients, keyspace, command=None, cpu="1"):
    """Runs redis-benchmark (pinned to `cpu`, core 1 by default) against `server`: the
    `-t test` tests, or the custom `command` (a list of words). Returns (requests/s,
    server CPU us/op)."""
    r = redis_benchmark(server, command or ["-t", test], pipeline, requests, clients, keyspace,
                        cpu=cpu)
    return r["rps"], r["server_cpu_s"] * 1e6 / requests


# --- Used by bench/compare (and free for the others) -------------------------------------

LOADGEN = os.path.join(ROOT, "target", "release", "goblin-loadgen")

# GOBLIN.CLAIM's oracle, byte for byte the CLAIM_SCRIPT of loadgen/src/scripts.rs, so that
# redis-benchmark's EVALSHA runs the very script goblin-loadgen --target redis runs.
CLAIM_ORACLE = """if redis.call("set", KEYS[1], ARGV[1], "NX", "EX", ARGV[2]) then
  return "CLAIMED"
end
return redis.call("get", KEYS[2])
"""


def redis_benchmark_cases(cases, pipeline, rounds, clients, keyspace, requests=None):
    """redis-benchmark of each (name, server, command) in `cases` at `pipeline`, rounds
    alternating between the cases, each run from an empty keyspace (FLUSHALL); prints
    the table of medians and returns {name: (ops/s, server CPU us/op)}. `requests` per
    run: 2,000,000 at -P > 1 and 300,000 at -P 1 unless given."""
    requests = requests or (2_000_000 if pipeline > 1 else 300_000)
    results = {name: [] for name, _, _ in cases}
    for _ in range(rounds):
        for name, server, cmd in cases:
            call(server["port"], "FLUSHALL")
            results[name].append(bench(server, None, pipeline, requests, clients, keyspace,
                                       cmd))
    med = {n: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v))
           for n, v in results.items()}
    print(f"\n-P {pipeline}")
    print(f"{'case':30} {'ops/s':>10} {'CPU us/op':>10}")
    for name, _, _ in cases:
        print(f"{name:30} {med[name][0]:>10.0f} {med[name][1]:>10.3f}")
    return med


def stop(servers):
    """Kills every server in `servers` by pid and reaps it; safe to call twice."""
    for s in servers:
        if s["proc"].poll() is None:
            s["proc"].kill()
        s["proc"].wait()


def _read_reply(f):
    line = f.readline()
    if not line.endswith(b"\r\n"):
        raise ConnectionError("connection closed mid-reply")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2].decode(errors="replace")
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_read_reply(f) for _ in range(n)]
    raise RuntimeError(f"unexpected reply {line!r}")


def encode(*args):
    """A command as a RESP array of bulk strings (str, bytes or numbers)."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def send_pipelined(port, commands, batch=1000):
    """Sends `commands` (encoded) in pipelined batches, reading every reply; an error reply
    raises. (Replies are read a line at a time: for commands answering simple replies
    and bulk strings.)"""
    with socket.create_connection(("127.0.0.1", port)) as s:
        f = s.makefile("rb")
        for i in range(0, len(commands), batch):
            chunk = commands[i:i + batch]
            s.sendall(b"".join(chunk))
            for _ in chunk:
                line = f.readline()
                if line.startswith(b"-"):
                    raise RuntimeError(line)
                if line.startswith(b"$") and int(line[1:]) >= 0:
                    f.read(int(line[1:]) + 2)

def call(port, *args):
    """Sends one command to 127.0.0.1:`port` and returns its decoded reply (RESP2); an error
    reply raises RuntimeError."""
    req = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        req += b"$%d\r\n%s\r\n" % (len(a), a)
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(req)
        with s.makefile("rb") as f:
            return _read_reply(f)


def prefill(port, keyspace, value=b"xxx", batch=10_000):
    """SETs key:000000000000 … key:<keyspace - 1>, the keys both redis-benchmark and
    goblin-loadgen address, to `value` (redis-benchmark's default 3-byte value), so that GETs
    hit. Pipelined in batches of `batch` commands."""
    head = b"*3\r\n$3\r\nSET\r\n$16\r\nkey:"
    tail = b"\r\n$%d\r\n%s\r\n" % (len(value), value)
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        for start_at in range(0, keyspace, batch):
            count = min(batch, keyspace - start_at)
            s.sendall(b"".join(head + b"%012d" % i + tail
                               for i in range(start_at, start_at + count)))
            read_exactly(s, b"+OK\r\n" * count)


def read_exactly(s, want):
    """Reads from socket `s` until as many bytes as `want` are in, and checks they are
    `want` (for loads whose replies are known in advance: parsing them as they come
    would make the client, not the server, the bottleneck)."""
    got = bytearray()
    while len(got) < len(want):
        chunk = s.recv(1 << 20)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        got += chunk
    if got != want:
        raise RuntimeError(f"unexpected replies: {bytes(got[:200])!r}")


def start_builds_and_redis(specs, threads, cpus="0", label="{name}"):
    """Starts each goblin-server build of `specs` ("name=path" strings; this checkout's
    release build when there are none) with --threads `threads`, named `label` (with
    {name} and {threads}), then a redis-server without persistence, all pinned to
    `cpus`; their records, for stop()."""
    builds = [spec.split("=", 1) for spec in specs] or [["goblin", GOBLIN]]
    servers = []
    try:
        for name, path in builds:
            port = free_port()
            servers.append(start(label.format(name=name, threads=threads),
                                 [path, "--port", str(port), "--threads", str(threads)],
                                 port, cpus=cpus))
        port = free_port()
        servers.append(start("redis-server", ["redis-server", "--port", str(port), "--save", "",
                                              "--appendonly", "no"], port, cpus=cpus))
    except BaseException:
        stop(servers)
        raise
    return servers


def core_busy_seconds():
    """{core number: seconds it has been busy since boot (everything but idle and iowait,
    steal included)}, from /proc/stat. Without CONFIG_IRQ_TIME_ACCOUNTING (as here) the
    kernel also charges interrupt and softirq ticks to the running process, so a core's busy
    time less its server's utime + stime is what everything else took from that core."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                name, *ticks = line.split()
                ticks = [int(t) for t in ticks]
                out[int(name[3:])] = (sum(ticks[:8]) - ticks[3] - ticks[4]) / TICK
    return out


def _children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _timed(argv, pid):
    """Runs argv (the client) and measures it: returns the completed process and
    {wall_s, server_cpu_s (of `pid`), client_cpu_s, cores_busy_s: {core: busy seconds}}."""
    cores, before, client, t0 = core_busy_seconds(), cpu_seconds(pid), _children_cpu(), time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True)
    fig = {"wall_s": time.monotonic() - t0, "server_cpu_s": cpu_seconds(pid) - before,
           "client_cpu_s": _children_cpu() - client}
    fig["cores_busy_s"] = {c: s - cores.get(c, 0) for c, s in core_busy_seconds().items()}
    return done, fig


def redis_benchmark(server, words, pipeline, requests, clients, keyspace, cpu="1"):
    """Runs redis-benchmark pinned to `cpu` against `server`: `words` is either ["-t", test]
    or a custom command. Reads its --csv line, which in 7.x carries the percentiles.
    Returns {rps, p50, p99 (ms), requests, argv} and the figures of _timed."""
    argv = ["taskset", "-c", cpu, "redis-benchmark", "-p", str(server["port"]),
            "-P", str(pipeline), "-n", str(requests), "-c", str(clients), "-r", str(keyspace),
            "--csv"] + list(words)
    done, fig = _timed(argv, server["proc"].pid)
    rows = [l for l in done.stdout.replace("\r", "\n").splitlines() if l.startswith('"')]
    if done.returncode != 0 or len(rows) < 2:
        raise RuntimeError(f"redis-benchmark failed against {server['name']}:\n"
                           f"{done.stdout}{done.stderr}")
    head = [h.strip('"') for h in rows[0].split('","')]
    # The test name may contain commas; the numbers are the last len(head) - 1 fields.
    nums = [float(v.strip('"')) for v in rows[-1].rsplit(",", len(head) - 1)[1:]]
    csv = dict(zip(head[1:], nums))
    if "p99_latency_ms" not in csv:
        raise RuntimeError(f"redis-benchmark --csv has no p99 column: {rows[0]}")
    return {"rps": csv["rps"], "p50": csv["p50_latency_ms"], "p99": csv["p99_latency_ms"],
            "requests": requests, "argv": argv, **fig}


def loadgen(server, args, json_path, cpu="1", binary=LOADGEN):
    """Runs goblin-loadgen pinned to `cpu` against `server` with the extra `args`, --quiet
    and --json. Returns {rps, p50, p99 (ms), requests, errors, doc (the JSON), argv} and the
    figures of _timed; a failed run (non-zero exit: a connection failure, a claim violation)
    raises RuntimeError."""
    argv = ["taskset", "-c", cpu, binary, "--port", str(server["port"])] + list(args) + \
        ["--quiet", "--json", json_path]
    if os.path.exists(json_path):
        os.unlink(json_path)
    done, fig = _timed(argv, server["proc"].pid)
    if done.returncode != 0 or not os.path.exists(json_path):
        raise RuntimeError(f"goblin-loadgen exited {done.returncode} against "
                           f"{server['name']}:\n{done.stdout}{done.stderr}")
    with open(json_path) as f:
        doc = json.load(f)
    return {"rps": doc["throughput_ops"], "p50": doc["latency_ms"]["p50"],
            "p99": doc["latency_ms"]["p99"], "requests": doc["requests"],
            "errors": doc["errors"]["total"], "doc": doc, "argv": argv, **fig}


def machine():
    """What the figures were measured on: {nproc, cpu, kernel, redis, goblin, loadavg}.
    Call it right after building: `goblin` describes the work tree the binaries come from."""
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break

    def out(argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT).stdout
        except OSError:
            return "?"
    commit = out(["git", "rev-parse", "--short=12", "HEAD"]).strip()
    # "XY path" lines; changes to scripts, docs and tests do not change the binaries.
    changed = [line[3:] for line in out(["git", "status", "--porcelain"]).splitlines()
               if not line[3:].startswith(("bench/", "docs/", "tests/"))]
    if changed:
        commit += " with uncommitted changes to " + ", ".join(changed)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    return {"nproc": os.cpu_count(), "cpu": model, "kernel": os.uname().release,
            "redis": out(["redis-server", "--version"]).split(" sha=")[0].strip(),
            "goblin": commit, "loadavg": load}
