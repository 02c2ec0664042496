"""redis-py's RedisCluster with read_from_replicas against a cluster of three masters with
a replica each (Goblin's, or redis-server's as the check of this script itself): writes
to the masters, reads spread over masters and replicas (the replicas must serve some),
a write sent to a replica redirected, then a manual failover (CLUSTER FAILOVER on a
replica) while the client goes on: its writes follow the new master, nothing written
before is lost, and the old master becomes the new one's replica.

Usage: python redis_py_replicas.py HOST:PORT goblin|redis
Exits non-zero (an AssertionError) on any unexpected answer.
"""
import sys
import time

import redis
from redis.cluster import RedisCluster

host, port = sys.argv[1].rsplit(":", 1)
kind = sys.argv[2]
rc = RedisCluster(host=host, port=int(port), decode_responses=True, read_from_replicas=True)


def until(what, check, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"{kind}: {what} did not happen within {seconds} s")


def node(addr):
    h, p = addr.rsplit(":", 1)
    return redis.Redis(host=h, port=int(p), decode_responses=True)


def role(conn):
    return conn.execute_command("ROLE")[0]


def synced():
    """Every replica's link is up and has every master's writes."""
    rc.nodes_manager.initialize()
    for r in rc.get_replicas():
        info = r.redis_connection.info("replication")
        if info.get("master_link_status") != "up":
            return False
    return all(p.redis_connection.execute_command("WAIT", 1, 2000) == 1 for p in rc.get_primaries())


# (CLUSTER SLOTS lists a replica once it has some of its master's history.)
keys = [f"k:{i}" for i in range(300)]
for i, k in enumerate(keys):
    assert rc.set(k, f"v{i}")
until("every replica has its master's writes", synced)


def listed():
    rc.nodes_manager.initialize()
    return len(rc.get_replicas()) == 3


# (Nodes learn each other's offsets from their pings, every few seconds.)
until("CLUSTER SLOTS lists every replica", listed, 60)
primaries, replicas = rc.get_primaries(), rc.get_replicas()
assert len(primaries) == 3 and len(replicas) == 3, (primaries, replicas)
for r in replicas:
    assert role(r.redis_connection) == "slave", r
for _ in range(2):
    for i, k in enumerate(keys):
        assert rc.get(k) == f"v{i}", (k, rc.get(k))
served = sum(
    int(r.redis_connection.info("commandstats").get("cmdstat_get", {}).get("calls", 0))
    for r in replicas
)
assert served > 0, "no GET was served by a replica"

# A write sent to a replica is redirected to its master.
replica = rc.get_replicas()[0].redis_connection
replica.execute_command("READONLY")
try:
    replica.set("k:1", "x")
    raise AssertionError("a replica took a write")
except redis.exceptions.ResponseError as e:
    assert type(e).__name__ == "MovedError" or str(e).startswith("MOVED"), repr(e)

# A manual failover of the master that serves k:1, while the client goes on.
old = rc.get_node_from_key("k:1")
old_conn = node(f"{old.host}:{old.port}")
lines = old_conn.execute_command("CLUSTER", "REPLICAS", old_conn.execute_command("CLUSTER", "MYID"))
assert len(lines) == 1, lines
successor = node(lines[0].split()[1].split("@")[0])
# (A manual failover is given up when the master's pause and offset do not reach the
# replica within 5 s, as redis-server's CLUSTER_MF_TIMEOUT: on a busy machine, on either
# server. Asked again, at most three times in all, each retry said.)
for attempt in (1, 2, 3):
    if role(successor) == "master":
        break
    assert successor.execute_command("CLUSTER", "FAILOVER") in ("OK", True)
    try:
        until("the replica becomes a master", lambda: role(successor) == "master", 15)
        break
    except AssertionError:
        if attempt == 3:
            raise
        print(f"{kind}: CLUSTER FAILOVER given up (attempt {attempt}), asked again", file=sys.stderr)
until("the old master becomes its replica", lambda: role(old_conn) == "slave")
for i, k in enumerate(keys):
    assert rc.set(k, f"w{i}")
until("every replica has its new master's writes", synced)
for i, k in enumerate(keys):
    assert rc.get(k) == f"w{i}", (k, rc.get(k))
assert rc.get_node_from_key("k:1").port == successor.connection_pool.connection_kwargs["port"]
print(f"redis-py {redis.__version__} RedisCluster with replicas against {kind}: ok")
