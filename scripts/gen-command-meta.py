#!/usr/bin/env python3
"""Generates server/src/table/meta.rs: the COMMAND INFO and COMMAND DOCS entries of the
Redis commands Goblin implements, read from a running redis-server 7.0 over RESP3.

Redis builds its own command table from src/commands/*.json; Goblin takes the same data
from the reference server, so that COMMAND INFO/DOCS (what cluster-aware clients and
redis-cli read) are byte-identical, and arity, flags and key positions have one source.

Usage: scripts/gen-command-meta.py [--port 6379] > server/src/table/meta.rs
"""
import argparse
import socket
import sys

COMMANDS = """
ping echo quit hello select client command config info auth reset
get set setnx setex psetex getset getdel getex mget mset msetnx append strlen
incr decr incrby decrby incrbyfloat getrange setrange substr
del unlink exists type expire pexpire expireat pexpireat ttl pttl expiretime pexpiretime
persist rename renamenx copy move swapdb keys scan randomkey dbsize flushdb flushall touch object
multi exec discard watch unwatch
hset hsetnx hget hmget hmset hdel hlen hexists hgetall hkeys hvals hincrby hincrbyfloat
hstrlen hrandfield hscan
sadd srem smembers sismember smismember scard spop srandmember smove sinter sunion sdiff
sintercard sinterstore sunionstore sdiffstore sscan
zadd zrem zscore zmscore zincrby zcard zcount zlexcount zrank zrevrank zrange
zrangebyscore zrevrangebyscore zrangebylex zrevrangebylex zrevrange zrangestore
zremrangebyrank zremrangebyscore zremrangebylex zpopmin zpopmax zmpop zrandmember zunion
zinter zdiff zunionstore zinterstore zdiffstore zintercard zscan
lpush rpush lpushx rpushx lpop rpop llen lrange lindex lset linsert lrem ltrim lpos lmove
rpoplpush lmpop blpop brpop blmove brpoplpush blmpop bzpopmin bzpopmax bzmpop
save bgsave lastsave bgrewriteaof shutdown
acl slowlog monitor latency memory debug
subscribe unsubscribe psubscribe punsubscribe publish pubsub ssubscribe sunsubscribe spublish
xadd xlen xrange xrevrange xdel xtrim xread xreadgroup xgroup xack xpending xclaim xautoclaim
xinfo xsetid dump restore time role setbit getbit bitcount bitpos bitop
bitfield bitfield_ro lcs pfadd pfcount pfmerge pfdebug pfselftest geoadd geodist geohash geopos
georadius georadius_ro georadiusbymember georadiusbymember_ro geosearch geosearchstore sort sort_ro lolwut
eval evalsha eval_ro evalsha_ro script fcall fcall_ro function
module replicaof slaveof wait sync psync replconf
cluster asking readonly readwrite migrate restore-asking
""".split()


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def send(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self.read()

    def line(self):
        while b"\r\n" not in self.buf:
            self.buf += self.s.recv(1 << 16)
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exact(self, n):
        while len(self.buf) < n + 2:
            self.buf += self.s.recv(1 << 16)
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self.line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return ("simple", rest.decode())
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t == b":":
            return ("int", int(rest))
        if t == b"$":
            return ("bulk", self.exact(int(rest)).decode())
        if t == b"=":
            return ("verbatim", self.exact(int(rest)).decode()[4:])
        if t == b"_":
            return ("null", None)
        if t in (b"*", b"~"):
            return ("array" if t == b"*" else "set", [self.read() for _ in range(int(rest))])
        if t == b"%":
            return ("map", [self.read() for _ in range(2 * int(rest))])
        raise RuntimeError("unexpected reply type %r" % line)


def rust_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def node(n, indent):
    kind, v = n
    if kind == "simple":
        return "Node::Simple(%s)" % rust_str(v)
    if kind == "bulk":
        return "Node::Bulk(%s)" % rust_str(v)
    if kind == "int":
        return "Node::Int(%d)" % v
    if kind == "null":
        return "Node::Null"
    name = {"array": "Array", "set": "Set", "map": "Map"}[kind]
    if not v:
        return "Node::%s(&[])" % name
    pad = " " * (indent + 4)
    inner = ",\n".join(pad + node(x, indent + 4) for x in v)
    return "Node::%s(&[\n%s,\n%s])" % (name, inner, " " * indent)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=6379)
    opts = ap.parse_args()
    c = Conn(opts.port)
    c.send("HELLO", "3")
    info_text = c.send("INFO", "server")[1]
    rv = [l for l in info_text.splitlines() if l.startswith("redis_version:")][0].split(":")[1]
    out = []
    out.append("//! COMMAND INFO and COMMAND DOCS entries of the Redis commands Goblin implements.")
    out.append("//!")
    out.append("//! Generated by `scripts/gen-command-meta.py` from redis-server %s; do not edit." % rv)
    out.append("//! Regenerate after adding a Redis command to the script's list.")
    out.append("")
    out.append("use super::meta_node::{Meta, Node};")
    out.append("")
    names = []
    for name in COMMANDS:
        info = c.send("COMMAND", "INFO", name)[1][0]
        docs = c.send("COMMAND", "DOCS", name)[1]
        if info[0] == "null":
            sys.exit("redis-server does not know %s" % name)
        doc = docs[1]
        ident = name.upper().replace("-", "_")
        names.append(ident)
        out.append("/// `%s`" % name.upper())
        out.append("pub static %s: Meta = Meta {" % ident)
        out.append("    info: %s," % node(info, 4))
        out.append("    docs: %s," % node(doc, 4))
        out.append("};")
        out.append("")
    out.append("/// Every generated entry.")
    out.append("pub static ALL: &[&Meta] = &[%s];" % ", ".join("&" + n for n in names))
    print("\n".join(out))


if __name__ == "__main__":
    main()
