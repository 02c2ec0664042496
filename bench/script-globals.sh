#!/usr/bin/env bash
# Server CPU of a script made of global and library lookups, for two builds side by side
# (goblin-server --threads 1 on core 0, redis-benchmark on core 1, EVALSHA -P 16, 50
# clients, 300,000 runs per round; CPU in 10 ms ticks from /proc/PID/stat).
#
#   bench/script-globals.sh BEFORE_BIN AFTER_BIN [ROUNDS]
set -euo pipefail
before=$1 after=$2 rounds=${3:-2}
script='local x = 0 for i=1,10 do x = x + string.len(tostring(i)) + math.floor(i/2) end return redis.call("ping")'
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
run() {
    local bin=$1
    taskset -c 0 "$bin" --port "$port" --threads 1 --save '' >/dev/null 2>&1 &
    local pid=$!
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
    local sha t0 t1 rps
    sha=$(redis-cli -p "$port" script load "$script")
    t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    rps=$(taskset -c 1 redis-benchmark -p "$port" -n 300000 -c 50 -P 16 -q evalsha "$sha" 0 |
        tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1)
    t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    kill "$pid"; wait "$pid" 2>/dev/null || true
    echo "$(basename "$bin"): $((t1 - t0)) ticks, $rps"
}
for _ in $(seq "$rounds"); do
    run "$before"
    run "$after"
done
