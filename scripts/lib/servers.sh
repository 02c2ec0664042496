# Servers for the scripts that run clients against redis-server and goblin-server side by
# side (sourced: cluster-clients-check, redis-py-suite, fakeredis-suite, replica-lag).
# start_server and start_cluster use the caller's $goblin (the goblin-server binary),
# $data (a scratch directory) and `pids` (the servers started, which `stop` or the
# caller's own cleanup stops on exit).

# stop: every server in `pids` killed and waited for; `pids` emptied.
stop() {
    local pid
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    pids=()
}

# A port free now on 127.0.0.1 whose cluster bus port (+ 10000) is free too.
free_port() {
    python3 - <<'PY'
import socket, random
for _ in range(200):
    port = random.randint(17000, 22000)
    try:
        for p in (port, port + 10000):
            s = socket.socket(); s.bind(("127.0.0.1", p)); s.close()
        print(port); break
    except OSError:
        continue
PY
}

# wait_ready PORT: until the server on PORT answers PING (10 s at most).
wait_ready() {
    local port=$1
    for _ in $(seq 1 200); do
        if [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ]; then
            return 0
        fi
        sleep 0.05
    done
    echo "$(basename "$0"): no server on port $port" >&2
    return 1
}

# start_server KIND PORT [ARGS...]: a server of KIND (redis or goblin, --threads 2) on
# PORT of 127.0.0.1, without persistence, its directory and log in $data/KIND-PORT.
start_server() {
    local kind=$1 port=$2
    shift 2
    local dir=$data/$kind-$port
    mkdir -p "$dir"
    local args=(--bind 127.0.0.1 --port "$port" --dir "$dir" --save "" --appendonly no "$@")
    if [ "$kind" = goblin ]; then
        "$goblin" "${args[@]}" --threads 2 >"$dir/log" 2>&1 &
    else
        redis-server "${args[@]}" >"$dir/log" 2>&1 &
    fi
    pids+=($!)
    wait_ready "$port"
}

# Whether every node of the addresses given says cluster_state:ok.
all_ok() {
    local a
    for a in "$@"; do
        redis-cli -p "${a##*:}" cluster info 2>/dev/null | grep -q cluster_state:ok || return 1
    done
}

# Whether every replica among the addresses given has its link to its master up.
links_up() {
    local a
    for a in "$@"; do
        redis-cli -p "${a##*:}" info replication 2>/dev/null | grep -q role:master && continue
        redis-cli -p "${a##*:}" info replication 2>/dev/null | grep -q master_link_status:up \
            || return 1
    done
}

# start_cluster KIND REPLICAS [ARGS...]: three masters of KIND with REPLICAS replicas
# each (the nodes given ARGS too), joined with `redis-cli --cluster create`, every slot
# covered and every replica's link up; sets `seed` to the first node's address.
start_cluster() {
    local kind=$1 replicas=$2 addrs=() port
    shift 2
    for _ in $(seq $((3 * (1 + replicas)))); do
        port=$(free_port)
        start_server "$kind" "$port" --cluster-enabled yes --cluster-config-file nodes.conf "$@"
        addrs+=("127.0.0.1:$port")
    done
    redis-cli --cluster create "${addrs[@]}" --cluster-replicas "$replicas" --cluster-yes \
        >"$data/$kind-create" 2>&1 || { cat "$data/$kind-create" >&2; return 1; }
    for _ in $(seq 300); do
        if redis-cli --cluster check "${addrs[0]}" 2>/dev/null | grep -q 'All 16384 slots covered' \
            && all_ok "${addrs[@]}" && links_up "${addrs[@]}"; then
            seed=${addrs[0]}
            return 0
        fi
        sleep 0.1
    done
    echo "$(basename "$0"): the $kind cluster did not settle" >&2
    return 1
}
