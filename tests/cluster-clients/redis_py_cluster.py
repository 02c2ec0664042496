"""redis-py's RedisCluster against a cluster (Goblin's, or redis-server's as the check of
this script itself): strings, collections, a transaction-free pipeline, and, on Goblin,
GOBLIN.CLAIM's life, each key routed by its slot across the nodes.

Usage: python redis_py_cluster.py HOST:PORT goblin|redis
Exits non-zero (an AssertionError) on any unexpected answer.
"""
import sys

from redis.cluster import RedisCluster
from redis.exceptions import ResponseError

host, port = sys.argv[1].rsplit(":", 1)
kind = sys.argv[2]
rc = RedisCluster(host=host, port=int(port), decode_responses=True)

rc.flushall(target_nodes=RedisCluster.PRIMARIES)
nodes = rc.get_primaries()
assert len(nodes) == 3, nodes
info = rc.cluster_info()
assert info["cluster_state"] == "ok", info
assert int(info["cluster_slots_assigned"]) == 16384, info

# Strings over many slots: every node gets keys.
for i in range(300):
    assert rc.set(f"str:{i}", f"v{i}")
for i in range(300):
    assert rc.get(f"str:{i}") == f"v{i}", i
assert rc.incr("counter") == 1
assert rc.incrby("counter", 41) == 42
assert rc.mset({"{tag}a": "1", "{tag}b": "2"})
assert rc.mget("{tag}a", "{tag}b") == ["1", "2"]
# Keys in several slots: redis-py splits the MGET by slot.
assert rc.mget_nonatomic("str:1", "str:2", "str:3") == ["v1", "v2", "v3"]
# (redis-py refuses that MSET itself: the node is asked over its own connection.)
node = rc.get_node_from_key("str:1").redis_connection
try:
    node.execute_command("MSET", "str:1", "x", "str:2", "y")
    raise AssertionError("MSET across slots was not refused")
except ResponseError as e:
    assert str(e) == "Keys in request don't hash to the same slot", e
per_node = [rc.dbsize(target_nodes=n) for n in nodes]
assert all(n > 0 for n in per_node), per_node

# Collections.
assert rc.hset("h", mapping={"f1": "a", "f2": "b"}) == 2
assert rc.hgetall("h") == {"f1": "a", "f2": "b"}
assert rc.rpush("l", "a", "b", "c") == 3
assert rc.lrange("l", 0, -1) == ["a", "b", "c"]
assert rc.sadd("s", "x", "y") == 2
assert rc.smembers("s") == {"x", "y"}
assert rc.zadd("z", {"m1": 1, "m2": 2}) == 2
assert rc.zrange("z", 0, -1, withscores=True) == [("m1", 1.0), ("m2", 2.0)]
assert rc.sunionstore("{s}dst", ["{s}a", "{s}b"]) == 0
assert rc.expire("h", 100) and 0 < rc.ttl("h") <= 100

# A pipeline spread over the nodes.
pipe = rc.pipeline()
for i in range(100):
    pipe.set(f"pipe:{i}", i)
    pipe.get(f"pipe:{i}")
out = pipe.execute()
assert out[1::2] == [str(i) for i in range(100)], out[:6]

# GOBLIN.CLAIM's life: the claim and its result share a slot by their hash tag.
if kind == "goblin":
    claim, result = "{job:1}:claim", "{job:1}:result"
    assert rc.execute_command("GOBLIN.CLAIM", claim, result, "tok1", 30) == "CLAIMED"
    status = rc.execute_command("GOBLIN.STATUS", claim, result)
    assert status[0] == "RUNNING" and 0 < status[1] <= 30000, status
    # A second worker finds it claimed and still in flight (nil).
    assert rc.execute_command("GOBLIN.CLAIM", claim, result, "tok2", 30) is None
    assert rc.execute_command("GOBLIN.PUBLISH", claim, result, "tok1", "done", 60) == 1
    # Now it finds the result.
    assert rc.execute_command("GOBLIN.CLAIM", claim, result, "tok3", 30) == "done"
    # A thousand jobs over every node, each claimed once.
    won = 0
    for i in range(1000):
        r = rc.execute_command("GOBLIN.CLAIM", f"{{j{i}}}:c", f"{{j{i}}}:r", "t", 30)
        won += r == "CLAIMED"
        again = rc.execute_command("GOBLIN.CLAIM", f"{{j{i}}}:c", f"{{j{i}}}:r", "u", 30)
        assert again is None, (i, again)
    assert won == 1000, won
print(f"redis-py {__import__('redis').__version__} RedisCluster against {kind}: ok")
