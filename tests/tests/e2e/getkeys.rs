//! COMMAND GETKEYS and COMMAND GETKEYSANDFLAGS, differentially against redis-server 7.0,
//! for every command and subcommand in Goblin's table.
//!
//! The list of commands is read from goblin-server's own `COMMAND` reply, so that a
//! command added to the table without samples here fails the test, by name. Each
//! command has sample invocations (keys present or missing, odd and even argument
//! counts, options, wrong arities, odd bytes); each is sent as `COMMAND GETKEYS …` and as
//! `COMMAND GETKEYSANDFLAGS …` to both servers, in RESP2 and in RESP3, and the raw replies
//! must be byte-identical. Commands redis-server 7.0 lacks (Goblin's own, and those of
//! later Redis or Valkey versions) are checked against replies derived from their key
//! specs instead.

use std::fmt::Write as _;

use goblin_protocol::{Frame, parse_reply};
use goblin_tests::{Raw, Server, default_threads, show};

/// Sample invocations of the commands redis-server 7.0 has, by full lowercase name
/// (`container|sub` for subcommands); words are separated by single spaces (`''` is an
/// empty argument).
const SAMPLES: &[(&str, &[&str])] = &[
    // Connection.
    ("ping", &["PING", "PING x", "PING x y"]),
    ("echo", &["ECHO", "ECHO x", "ECHO x y"]),
    ("quit", &["QUIT", "QUIT x"]),
    ("hello", &["HELLO", "HELLO 3", "HELLO 3 AUTH u p"]),
    ("select", &["SELECT", "SELECT 0", "SELECT 0 1"]),
    ("auth", &["AUTH", "AUTH p", "AUTH u p"]),
    ("client", &["CLIENT", "CLIENT NOPE x", "CLIENT k v"]),
    (
        "client|setname",
        &["CLIENT SETNAME n", "client setname", "CLIENT SETNAME n x"],
    ),
    ("client|getname", &["CLIENT GETNAME", "CLIENT GETNAME x"]),
    ("client|id", &["CLIENT ID", "CLIENT ID x"]),
    (
        "client|unblock",
        &[
            "CLIENT UNBLOCK 5",
            "CLIENT UNBLOCK 5 ERROR",
            "CLIENT UNBLOCK",
        ],
    ),
    ("client|info", &["CLIENT INFO", "CLIENT INFO x"]),
    ("client|list", &["CLIENT LIST", "CLIENT LIST ID 1 2"]),
    (
        "client|kill",
        &["CLIENT KILL 1.2.3.4:5", "CLIENT KILL ID 7", "CLIENT KILL"],
    ),
    ("client|help", &["CLIENT HELP", "CLIENT HELP x"]),
    (
        "client|tracking",
        &[
            "CLIENT TRACKING on",
            "CLIENT TRACKING on BCAST PREFIX k",
            "CLIENT TRACKING",
        ],
    ),
    (
        "client|trackinginfo",
        &["CLIENT TRACKINGINFO", "CLIENT TRACKINGINFO x"],
    ),
    ("client|getredir", &["CLIENT GETREDIR", "CLIENT GETREDIR x"]),
    (
        "client|caching",
        &[
            "CLIENT CACHING yes",
            "CLIENT CACHING",
            "CLIENT CACHING no x",
        ],
    ),
    // Server.
    ("command", &["COMMAND", "COMMAND NOPE", "COMMAND GET k"]),
    ("command|count", &["COMMAND COUNT", "COMMAND COUNT x"]),
    (
        "command|list",
        &["COMMAND LIST", "COMMAND LIST FILTERBY PATTERN x*"],
    ),
    ("time", &["TIME", "TIME x"]),
    ("lolwut", &["LOLWUT", "LOLWUT VERSION 5 1 1"]),
    ("role", &["ROLE", "ROLE x"]),
    ("module", &["MODULE", "MODULE x"]),
    ("module|help", &["MODULE HELP"]),
    ("module|list", &["MODULE LIST"]),
    ("module|load", &["MODULE LOAD k", "MODULE LOAD k a b"]),
    (
        "module|loadex",
        &["MODULE LOADEX k", "MODULE LOADEX k CONFIG a b ARGS c"],
    ),
    ("module|unload", &["MODULE UNLOAD k"]),
    ("replicaof", &["REPLICAOF NO ONE", "REPLICAOF h 1"]),
    ("slaveof", &["SLAVEOF NO ONE", "SLAVEOF h 1"]),
    ("wait", &["WAIT 0 0", "WAIT 1 k"]),
    ("failover", &["FAILOVER", "FAILOVER TO h 1 TIMEOUT 5"]),
    ("sync", &["SYNC", "SYNC x"]),
    ("psync", &["PSYNC ? -1", "PSYNC a b c"]),
    ("replconf", &["REPLCONF", "REPLCONF ack 1"]),
    // Cluster.
    ("cluster", &["CLUSTER", "CLUSTER NOPE x"]),
    ("cluster|help", &["CLUSTER HELP", "CLUSTER HELP x"]),
    ("cluster|info", &["CLUSTER INFO"]),
    ("cluster|myid", &["CLUSTER MYID"]),
    ("cluster|nodes", &["CLUSTER NODES"]),
    ("cluster|slots", &["CLUSTER SLOTS"]),
    ("cluster|shards", &["CLUSTER SHARDS"]),
    ("cluster|links", &["CLUSTER LINKS"]),
    ("cluster|keyslot", &["CLUSTER KEYSLOT k", "CLUSTER KEYSLOT"]),
    (
        "cluster|addslots",
        &["CLUSTER ADDSLOTS 1 2", "CLUSTER ADDSLOTS"],
    ),
    ("cluster|addslotsrange", &["CLUSTER ADDSLOTSRANGE 1 2"]),
    ("cluster|delslots", &["CLUSTER DELSLOTS 1"]),
    ("cluster|delslotsrange", &["CLUSTER DELSLOTSRANGE 1 2"]),
    ("cluster|meet", &["CLUSTER MEET h 1", "CLUSTER MEET h 1 2"]),
    ("cluster|forget", &["CLUSTER FORGET n"]),
    ("cluster|set-config-epoch", &["CLUSTER SET-CONFIG-EPOCH 1"]),
    ("cluster|bumpepoch", &["CLUSTER BUMPEPOCH"]),
    (
        "cluster|count-failure-reports",
        &["CLUSTER COUNT-FAILURE-REPORTS n"],
    ),
    ("cluster|saveconfig", &["CLUSTER SAVECONFIG"]),
    ("cluster|replicas", &["CLUSTER REPLICAS n"]),
    ("cluster|slaves", &["CLUSTER SLAVES n"]),
    ("cluster|replicate", &["CLUSTER REPLICATE n"]),
    (
        "cluster|failover",
        &["CLUSTER FAILOVER", "CLUSTER FAILOVER FORCE"],
    ),
    ("cluster|countkeysinslot", &["CLUSTER COUNTKEYSINSLOT 1"]),
    ("cluster|getkeysinslot", &["CLUSTER GETKEYSINSLOT 1 2"]),
    (
        "cluster|setslot",
        &["CLUSTER SETSLOT 1 STABLE", "CLUSTER SETSLOT 1 NODE n"],
    ),
    ("cluster|flushslots", &["CLUSTER FLUSHSLOTS"]),
    ("cluster|reset", &["CLUSTER RESET", "CLUSTER RESET HARD"]),
    ("asking", &["ASKING", "ASKING x"]),
    ("readonly", &["READONLY", "READONLY x"]),
    ("readwrite", &["READWRITE", "READWRITE x"]),
    (
        "migrate",
        &[
            "MIGRATE h 1 k 0 10",
            "MIGRATE h 1 k 0 10 COPY REPLACE",
            "MIGRATE h 1 '' 0 10 KEYS a b",
            "MIGRATE h 1 '' 0 10 AUTH p KEYS a b",
            "MIGRATE h 1 '' 0 10 AUTH2 u p KEYS a",
            "MIGRATE h 1 k",
        ],
    ),
    (
        "restore-asking",
        &[
            "RESTORE-ASKING k 0 x",
            "RESTORE-ASKING k 0 x REPLACE",
            "RESTORE-ASKING k 0",
        ],
    ),
    ("command|info", &["COMMAND INFO", "COMMAND INFO get"]),
    ("command|docs", &["COMMAND DOCS", "COMMAND DOCS get"]),
    (
        "command|getkeys",
        &[
            "COMMAND GETKEYS",
            "COMMAND GETKEYS GET k",
            "COMMAND GETKEYS GET",
        ],
    ),
    (
        "command|getkeysandflags",
        &["COMMAND GETKEYSANDFLAGS GET k", "COMMAND GETKEYSANDFLAGS"],
    ),
    ("command|help", &["COMMAND HELP", "COMMAND HELP x"]),
    ("acl", &["ACL", "ACL NOPE x"]),
    ("acl|whoami", &["ACL WHOAMI", "ACL WHOAMI x"]),
    ("acl|cat", &["ACL CAT", "ACL CAT read", "ACL CAT a b"]),
    (
        "acl|genpass",
        &["ACL GENPASS", "ACL GENPASS 8", "ACL GENPASS 1 2"],
    ),
    ("acl|list", &["ACL LIST", "ACL LIST x"]),
    ("acl|users", &["ACL USERS", "ACL USERS x"]),
    ("acl|getuser", &["ACL GETUSER default", "ACL GETUSER"]),
    ("acl|log", &["ACL LOG", "ACL LOG RESET", "ACL LOG 1 2"]),
    (
        "acl|dryrun",
        &["ACL DRYRUN default get k", "ACL DRYRUN default"],
    ),
    ("acl|help", &["ACL HELP", "ACL HELP x"]),
    (
        "acl|setuser",
        &[
            "ACL SETUSER u",
            "ACL SETUSER u on >p ~k* +get",
            "ACL SETUSER",
        ],
    ),
    (
        "acl|deluser",
        &["ACL DELUSER u", "ACL DELUSER u v", "ACL DELUSER"],
    ),
    ("acl|load", &["ACL LOAD", "ACL LOAD x"]),
    ("acl|save", &["ACL SAVE", "ACL SAVE x"]),
    (
        "client|reply",
        &["CLIENT REPLY", "CLIENT REPLY ON", "CLIENT REPLY ON x"],
    ),
    (
        "client|pause",
        &["CLIENT PAUSE", "CLIENT PAUSE 1", "CLIENT PAUSE 1 ALL x"],
    ),
    ("client|unpause", &["CLIENT UNPAUSE", "CLIENT UNPAUSE x"]),
    ("monitor", &["MONITOR", "MONITOR x"]),
    ("reset", &["RESET", "RESET x"]),
    ("subscribe", &["SUBSCRIBE a", "SUBSCRIBE a b"]),
    ("unsubscribe", &["UNSUBSCRIBE", "UNSUBSCRIBE a b"]),
    ("psubscribe", &["PSUBSCRIBE a*", "PSUBSCRIBE"]),
    ("punsubscribe", &["PUNSUBSCRIBE", "PUNSUBSCRIBE a*"]),
    (
        "ssubscribe",
        &["SSUBSCRIBE a", "SSUBSCRIBE a b", "SSUBSCRIBE"],
    ),
    ("sunsubscribe", &["SUNSUBSCRIBE", "SUNSUBSCRIBE a b"]),
    ("publish", &["PUBLISH c m", "PUBLISH c"]),
    ("spublish", &["SPUBLISH c m", "SPUBLISH c"]),
    ("pubsub", &["PUBSUB", "PUBSUB NOPE x"]),
    (
        "pubsub|channels",
        &["PUBSUB CHANNELS", "PUBSUB CHANNELS a*"],
    ),
    ("pubsub|numsub", &["PUBSUB NUMSUB a b"]),
    ("pubsub|numpat", &["PUBSUB NUMPAT"]),
    ("pubsub|shardchannels", &["PUBSUB SHARDCHANNELS"]),
    ("pubsub|shardnumsub", &["PUBSUB SHARDNUMSUB a b"]),
    ("pubsub|help", &["PUBSUB HELP"]),
    ("config|rewrite", &["CONFIG REWRITE", "CONFIG REWRITE x"]),
    ("config|help", &["CONFIG HELP", "CONFIG HELP x"]),
    ("latency|graph", &["LATENCY GRAPH command", "LATENCY GRAPH"]),
    ("latency", &["LATENCY", "LATENCY NOPE x"]),
    ("latency|latest", &["LATENCY LATEST", "LATENCY LATEST x"]),
    (
        "latency|history",
        &[
            "LATENCY HISTORY",
            "LATENCY HISTORY command",
            "LATENCY HISTORY a b",
        ],
    ),
    (
        "latency|reset",
        &["LATENCY RESET", "LATENCY RESET command fork"],
    ),
    ("latency|doctor", &["LATENCY DOCTOR", "LATENCY DOCTOR x"]),
    ("latency|help", &["LATENCY HELP", "LATENCY HELP x"]),
    (
        "latency|histogram",
        &["LATENCY HISTOGRAM", "LATENCY HISTOGRAM set get"],
    ),
    ("memory", &["MEMORY", "MEMORY NOPE x"]),
    (
        "memory|usage",
        &[
            "MEMORY USAGE",
            "MEMORY USAGE k",
            "MEMORY USAGE k SAMPLES 5",
            "MEMORY USAGE k x",
        ],
    ),
    ("memory|stats", &["MEMORY STATS", "MEMORY STATS x"]),
    ("memory|doctor", &["MEMORY DOCTOR", "MEMORY DOCTOR x"]),
    ("memory|purge", &["MEMORY PURGE", "MEMORY PURGE x"]),
    (
        "memory|malloc-stats",
        &["MEMORY MALLOC-STATS", "MEMORY MALLOC-STATS x"],
    ),
    ("memory|help", &["MEMORY HELP", "MEMORY HELP x"]),
    ("debug", &["DEBUG", "DEBUG SLEEP 0", "DEBUG OBJECT k"]),
    // Scripting and functions.
    (
        "eval",
        &[
            "EVAL s 1 k",
            "EVAL s 2 k j a",
            "EVAL s 0",
            "EVAL s",
            "EVAL s x k",
            "EVAL s 3 k",
        ],
    ),
    (
        "evalsha",
        &["EVALSHA s 1 k", "EVALSHA s 0 a", "EVALSHA s -1 k"],
    ),
    ("eval_ro", &["EVAL_RO s 1 k", "EVAL_RO s 0"]),
    ("evalsha_ro", &["EVALSHA_RO s 2 k j", "EVALSHA_RO s 0"]),
    (
        "fcall",
        &[
            "FCALL f 1 k",
            "FCALL f 2 k j a",
            "FCALL f 0",
            "FCALL f",
            "FCALL f x k",
            "FCALL f 3 k",
        ],
    ),
    ("fcall_ro", &["FCALL_RO f 1 k a", "FCALL_RO f 0"]),
    ("script", &["SCRIPT", "SCRIPT NOPE"]),
    ("script|load", &["SCRIPT LOAD s", "SCRIPT LOAD"]),
    ("script|exists", &["SCRIPT EXISTS a b", "SCRIPT EXISTS"]),
    ("script|flush", &["SCRIPT FLUSH", "SCRIPT FLUSH ASYNC"]),
    ("script|kill", &["SCRIPT KILL"]),
    ("script|debug", &["SCRIPT DEBUG NO"]),
    ("script|help", &["SCRIPT HELP"]),
    ("function", &["FUNCTION", "FUNCTION NOPE"]),
    (
        "function|load",
        &[
            "FUNCTION LOAD c",
            "FUNCTION LOAD REPLACE c",
            "FUNCTION LOAD",
        ],
    ),
    ("function|delete", &["FUNCTION DELETE l", "FUNCTION DELETE"]),
    ("function|flush", &["FUNCTION FLUSH", "FUNCTION FLUSH SYNC"]),
    (
        "function|restore",
        &[
            "FUNCTION RESTORE p",
            "FUNCTION RESTORE p FLUSH",
            "FUNCTION RESTORE",
        ],
    ),
    (
        "function|list",
        &["FUNCTION LIST", "FUNCTION LIST WITHCODE LIBRARYNAME x"],
    ),
    ("function|dump", &["FUNCTION DUMP", "FUNCTION DUMP x"]),
    ("function|stats", &["FUNCTION STATS"]),
    ("function|kill", &["FUNCTION KILL"]),
    ("function|help", &["FUNCTION HELP"]),
    ("slowlog", &["SLOWLOG", "SLOWLOG NOPE x"]),
    (
        "slowlog|get",
        &["SLOWLOG GET", "SLOWLOG GET 1", "SLOWLOG GET 1 2"],
    ),
    ("slowlog|len", &["SLOWLOG LEN", "SLOWLOG LEN x"]),
    ("slowlog|reset", &["SLOWLOG RESET", "SLOWLOG RESET x"]),
    ("slowlog|help", &["SLOWLOG HELP", "SLOWLOG HELP x"]),
    (
        "client|no-evict",
        &["CLIENT NO-EVICT on", "CLIENT NO-EVICT"],
    ),
    ("config", &["CONFIG", "CONFIG NOPE x", "config x"]),
    (
        "config|get",
        &["CONFIG GET", "CONFIG GET save", "CONFIG GET a b"],
    ),
    (
        "config|resetstat",
        &["CONFIG RESETSTAT", "CONFIG RESETSTAT x"],
    ),
    ("config|set", &["CONFIG SET timeout 0", "CONFIG SET a"]),
    ("info", &["INFO", "INFO server", "INFO a b"]),
    ("dbsize", &["DBSIZE", "DBSIZE x"]),
    ("flushall", &["FLUSHALL", "FLUSHALL ASYNC"]),
    ("flushdb", &["FLUSHDB", "FLUSHDB SYNC"]),
    // Persistence.
    ("save", &["SAVE", "SAVE x"]),
    ("bgsave", &["BGSAVE", "BGSAVE SCHEDULE"]),
    ("lastsave", &["LASTSAVE"]),
    ("bgrewriteaof", &["BGREWRITEAOF"]),
    ("shutdown", &["SHUTDOWN", "SHUTDOWN NOSAVE"]),
    // Strings.
    (
        "get",
        &["GET", "GET k", "get k", "GET k x", "GET ''", "GET k\0x"],
    ),
    (
        "set",
        &[
            "SET k v",
            "SET k v GET",
            "SET k v get",
            "SET k v NX GET",
            "SET k v GET NX",
            "SET k v EX 10 GET",
            "SET k v EX GET",
            "SET k v GET\0x",
            "SET k v GETX",
            "SET k v GE",
            "SET k v ''",
            "SET k v KEEPTTL",
            "SET k GET",
            "SET GET v",
            "SET k",
            "SET",
        ],
    ),
    ("setnx", &["SETNX k v", "SETNX k", "SETNX k v x"]),
    ("setex", &["SETEX k 10 v", "SETEX k 10", "SETEX k 10 v x"]),
    (
        "psetex",
        &["PSETEX k 10 v", "PSETEX k 10", "PSETEX k 10 v x"],
    ),
    ("getset", &["GETSET k v", "GETSET k", "GETSET k v x"]),
    ("getdel", &["GETDEL k", "GETDEL", "GETDEL k x"]),
    (
        "getex",
        &[
            "GETEX k",
            "GETEX k EX 10",
            "GETEX k PERSIST",
            "GETEX k GET",
            "GETEX",
        ],
    ),
    (
        "mget",
        &[
            "MGET",
            "MGET a",
            "MGET a b",
            "MGET a b c",
            "MGET a a",
            "MGET '' a",
        ],
    ),
    (
        "mset",
        &[
            "MSET",
            "MSET a",
            "MSET a 1",
            "MSET a 1 b",
            "MSET a 1 b 2",
            "MSET a 1 b 2 c",
            "MSET a 1 a 2",
        ],
    ),
    (
        "msetnx",
        &[
            "MSETNX a",
            "MSETNX a 1",
            "MSETNX a 1 b",
            "MSETNX a 1 b 2",
            "MSETNX a 1 b 2 c 3",
        ],
    ),
    ("append", &["APPEND k v", "APPEND k", "APPEND k v x"]),
    ("strlen", &["STRLEN k", "STRLEN", "STRLEN k x"]),
    ("incr", &["INCR k", "INCR k 1"]),
    ("decr", &["DECR k", "DECR k 1"]),
    ("incrby", &["INCRBY k 1", "INCRBY k", "INCRBY k 1 2"]),
    ("decrby", &["DECRBY k 1", "DECRBY k", "DECRBY k 1 2"]),
    ("incrbyfloat", &["INCRBYFLOAT k 1.5", "INCRBYFLOAT k"]),
    (
        "getrange",
        &["GETRANGE k 0 1", "GETRANGE k 0", "GETRANGE k 0 1 2"],
    ),
    (
        "setrange",
        &["SETRANGE k 0 v", "SETRANGE k 0", "SETRANGE k 0 v x"],
    ),
    ("substr", &["SUBSTR k 0 1", "SUBSTR k 0"]),
    // Keys.
    ("del", &["DEL", "DEL a", "DEL a b", "DEL a b c", "DEL a a"]),
    ("unlink", &["UNLINK a", "UNLINK a b", "UNLINK a b c"]),
    ("exists", &["EXISTS a", "EXISTS a b", "EXISTS a a a"]),
    ("touch", &["TOUCH a", "TOUCH a b", "TOUCH a b c"]),
    ("type", &["TYPE k", "TYPE", "TYPE k x"]),
    (
        "expire",
        &[
            "EXPIRE k 10",
            "EXPIRE k 10 NX",
            "EXPIRE k 10 NX GT",
            "EXPIRE k",
        ],
    ),
    ("pexpire", &["PEXPIRE k 10", "PEXPIRE k 10 XX", "PEXPIRE k"]),
    (
        "expireat",
        &["EXPIREAT k 10", "EXPIREAT k 10 LT", "EXPIREAT k"],
    ),
    (
        "pexpireat",
        &["PEXPIREAT k 10", "PEXPIREAT k 10 GT", "PEXPIREAT k"],
    ),
    ("ttl", &["TTL k", "TTL k x"]),
    ("pttl", &["PTTL k", "PTTL k x"]),
    ("expiretime", &["EXPIRETIME k", "EXPIRETIME k x"]),
    ("pexpiretime", &["PEXPIRETIME k", "PEXPIRETIME k x"]),
    ("persist", &["PERSIST k", "PERSIST k x"]),
    (
        "rename",
        &["RENAME a b", "RENAME a a", "RENAME a", "RENAME a b c"],
    ),
    (
        "renamenx",
        &["RENAMENX a b", "RENAMENX a", "RENAMENX a b c"],
    ),
    (
        "copy",
        &[
            "COPY a b",
            "COPY a b REPLACE",
            "COPY a b DB 0 REPLACE",
            "COPY a a",
            "COPY a",
        ],
    ),
    ("move", &["MOVE a 1", "MOVE a", "MOVE a 1 2"]),
    ("swapdb", &["SWAPDB 0 1", "SWAPDB 0"]),
    ("keys", &["KEYS *", "KEYS"]),
    ("scan", &["SCAN 0", "SCAN 0 MATCH k*", "SCAN"]),
    ("randomkey", &["RANDOMKEY", "RANDOMKEY x"]),
    (
        "object",
        &["OBJECT", "OBJECT k", "OBJECT NOPE k", "OBJECT ENCODING"],
    ),
    (
        "object|encoding",
        &[
            "OBJECT ENCODING k",
            "object encoding k",
            "OBJECT ENCODING k x",
        ],
    ),
    ("object|freq", &["OBJECT FREQ k", "OBJECT FREQ k x"]),
    (
        "object|idletime",
        &["OBJECT IDLETIME k", "OBJECT IDLETIME k x"],
    ),
    (
        "object|refcount",
        &["OBJECT REFCOUNT k", "OBJECT REFCOUNT k x"],
    ),
    ("object|help", &["OBJECT HELP", "OBJECT HELP x"]),
    // Transactions.
    ("multi", &["MULTI", "MULTI x"]),
    ("exec", &["EXEC", "EXEC x"]),
    ("discard", &["DISCARD", "DISCARD x"]),
    (
        "watch",
        &["WATCH a", "WATCH a b", "WATCH a b a", "WATCH", "WATCH ''"],
    ),
    ("unwatch", &["UNWATCH", "UNWATCH x"]),
    // Sets.
    ("sadd", &["SADD k m", "SADD k m n", "SADD k"]),
    ("srem", &["SREM k m", "SREM k m n", "SREM k"]),
    ("smembers", &["SMEMBERS k", "SMEMBERS", "SMEMBERS k x"]),
    (
        "sismember",
        &["SISMEMBER k m", "SISMEMBER k", "SISMEMBER k m n"],
    ),
    (
        "smismember",
        &["SMISMEMBER k m", "SMISMEMBER k m n", "SMISMEMBER k"],
    ),
    ("scard", &["SCARD k", "SCARD", "SCARD k x"]),
    ("spop", &["SPOP k", "SPOP k 2", "SPOP k 2 x", "SPOP"]),
    (
        "srandmember",
        &["SRANDMEMBER k", "SRANDMEMBER k -2", "SRANDMEMBER"],
    ),
    ("sscan", &["SSCAN k 0", "SSCAN k 0 COUNT 5", "SSCAN k"]),
    ("smove", &["SMOVE a b m", "SMOVE a a m", "SMOVE a b"]),
    ("sinter", &["SINTER a", "SINTER a b c", "SINTER"]),
    ("sunion", &["SUNION a", "SUNION a b c", "SUNION"]),
    ("sdiff", &["SDIFF a", "SDIFF a b c", "SDIFF"]),
    (
        "sintercard",
        &[
            "SINTERCARD 2 a b",
            "SINTERCARD 1 a LIMIT 2",
            "SINTERCARD 3 a b",
            "SINTERCARD 0 a",
            "SINTERCARD x a",
            "SINTERCARD 2",
            "SINTERCARD",
        ],
    ),
    (
        "sinterstore",
        &["SINTERSTORE d a b", "SINTERSTORE d a", "SINTERSTORE d"],
    ),
    (
        "sunionstore",
        &["SUNIONSTORE d a b", "SUNIONSTORE d d", "SUNIONSTORE d"],
    ),
    (
        "sdiffstore",
        &["SDIFFSTORE d a b", "SDIFFSTORE d a", "SDIFFSTORE d"],
    ),
    // Hashes.
    (
        "hset",
        &[
            "HSET k f v",
            "HSET k f v g w",
            "HSET k f v g",
            "HSET k f",
            "HSET k",
        ],
    ),
    ("hget", &["HGET k f", "HGET k", "HGET k f g"]),
    (
        "hmset",
        &["HMSET k f v", "HMSET k f v g w", "HMSET k f", "HMSET k"],
    ),
    ("hsetnx", &["HSETNX k f v", "HSETNX k f", "HSETNX k f v w"]),
    ("hmget", &["HMGET k f", "HMGET k f g h", "HMGET k"]),
    ("hdel", &["HDEL k f", "HDEL k f g", "HDEL k"]),
    ("hlen", &["HLEN k", "HLEN", "HLEN k f"]),
    ("hexists", &["HEXISTS k f", "HEXISTS k", "HEXISTS k f g"]),
    ("hstrlen", &["HSTRLEN k f", "HSTRLEN k", "HSTRLEN k f g"]),
    ("hgetall", &["HGETALL k", "HGETALL", "HGETALL k f"]),
    ("hkeys", &["HKEYS k", "HKEYS", "HKEYS k f"]),
    ("hvals", &["HVALS k", "HVALS", "HVALS k f"]),
    (
        "hincrby",
        &["HINCRBY k f 1", "HINCRBY k f", "HINCRBY k f 1 2"],
    ),
    (
        "hincrbyfloat",
        &[
            "HINCRBYFLOAT k f 1.5",
            "HINCRBYFLOAT k f",
            "HINCRBYFLOAT k f 1 2",
        ],
    ),
    (
        "hrandfield",
        &["HRANDFIELD k", "HRANDFIELD k -5 WITHVALUES", "HRANDFIELD"],
    ),
    (
        "hscan",
        &["HSCAN k 0", "HSCAN k 0 MATCH * COUNT 5", "HSCAN k"],
    ),
    // Lists.
    ("lpush", &["LPUSH k a", "LPUSH k a b", "LPUSH k"]),
    ("rpush", &["RPUSH k a", "RPUSH k a b", "RPUSH k"]),
    ("lpushx", &["LPUSHX k a", "LPUSHX k"]),
    ("rpushx", &["RPUSHX k a", "RPUSHX k"]),
    ("lpop", &["LPOP k", "LPOP k 2", "LPOP k 2 3", "LPOP"]),
    ("rpop", &["RPOP k", "RPOP k 2", "RPOP"]),
    ("llen", &["LLEN k", "LLEN k x", "LLEN"]),
    ("lrange", &["LRANGE k 0 -1", "LRANGE k 0"]),
    ("lindex", &["LINDEX k 0", "LINDEX k"]),
    ("lset", &["LSET k 0 v", "LSET k 0"]),
    (
        "linsert",
        &["LINSERT k BEFORE p v", "LINSERT k AFTER p", "LINSERT k"],
    ),
    ("lrem", &["LREM k 0 v", "LREM k 0"]),
    ("ltrim", &["LTRIM k 0 1", "LTRIM k 0"]),
    ("lpos", &["LPOS k v", "LPOS k v RANK 1 COUNT 0", "LPOS k"]),
    (
        "lmove",
        &[
            "LMOVE a b LEFT RIGHT",
            "LMOVE a a LEFT LEFT",
            "LMOVE a b LEFT",
        ],
    ),
    (
        "rpoplpush",
        &["RPOPLPUSH a b", "RPOPLPUSH a", "RPOPLPUSH a b c"],
    ),
    (
        "lmpop",
        &[
            "LMPOP 1 a LEFT",
            "LMPOP 2 a b RIGHT COUNT 3",
            "LMPOP 3 a b LEFT",
            "LMPOP 0 a LEFT",
            "LMPOP x a LEFT",
            "LMPOP 1",
            "LMPOP 5 a",
        ],
    ),
    ("blpop", &["BLPOP k 0", "BLPOP a b c 1.5", "BLPOP k"]),
    ("brpop", &["BRPOP k 0", "BRPOP a b 0", "BRPOP k"]),
    (
        "blmpop",
        &[
            "BLMPOP 0 1 a LEFT",
            "BLMPOP 1 2 a b RIGHT COUNT 3",
            "BLMPOP 0 3 a b LEFT",
            "BLMPOP 0 0 a LEFT",
            "BLMPOP 0 1",
        ],
    ),
    (
        "blmove",
        &[
            "BLMOVE a b LEFT RIGHT 0",
            "BLMOVE a a LEFT LEFT 1",
            "BLMOVE a b LEFT",
        ],
    ),
    ("brpoplpush", &["BRPOPLPUSH a b 0", "BRPOPLPUSH a b"]),
    // Sorted sets.
    (
        "zadd",
        &["ZADD k 1 m", "ZADD k NX 1 m 2 n", "ZADD k 1", "ZADD k"],
    ),
    ("zscore", &["ZSCORE k m", "ZSCORE k", "ZSCORE k m n"]),
    ("zincrby", &["ZINCRBY k 1 m", "ZINCRBY k 1"]),
    ("zrem", &["ZREM k m", "ZREM k m n", "ZREM k"]),
    ("zmscore", &["ZMSCORE k m", "ZMSCORE k m n", "ZMSCORE k"]),
    ("zcard", &["ZCARD k", "ZCARD", "ZCARD k x"]),
    ("zcount", &["ZCOUNT k 0 1", "ZCOUNT k 0"]),
    ("zlexcount", &["ZLEXCOUNT k - +", "ZLEXCOUNT k -"]),
    ("zrank", &["ZRANK k m", "ZRANK k"]),
    ("zrevrank", &["ZREVRANK k m", "ZREVRANK k"]),
    (
        "zrange",
        &["ZRANGE k 0 1", "ZRANGE k 0 1 REV WITHSCORES", "ZRANGE k 0"],
    ),
    (
        "zrangebyscore",
        &["ZRANGEBYSCORE k 0 1", "ZRANGEBYSCORE k 0"],
    ),
    (
        "zrevrangebyscore",
        &["ZREVRANGEBYSCORE k 1 0", "ZREVRANGEBYSCORE k 1"],
    ),
    ("zrangebylex", &["ZRANGEBYLEX k - +", "ZRANGEBYLEX k -"]),
    (
        "zrevrangebylex",
        &["ZREVRANGEBYLEX k + -", "ZREVRANGEBYLEX k +"],
    ),
    ("zrevrange", &["ZREVRANGE k 0 1", "ZREVRANGE k 0"]),
    (
        "zrangestore",
        &[
            "ZRANGESTORE d k 0 1",
            "ZRANGESTORE d k 0 1 BYSCORE",
            "ZRANGESTORE d k 0",
        ],
    ),
    (
        "zremrangebyrank",
        &["ZREMRANGEBYRANK k 0 1", "ZREMRANGEBYRANK k 0"],
    ),
    (
        "zremrangebyscore",
        &["ZREMRANGEBYSCORE k 0 1", "ZREMRANGEBYSCORE k 0"],
    ),
    (
        "zremrangebylex",
        &["ZREMRANGEBYLEX k - +", "ZREMRANGEBYLEX k -"],
    ),
    ("zpopmin", &["ZPOPMIN k", "ZPOPMIN k 2", "ZPOPMIN"]),
    ("zpopmax", &["ZPOPMAX k", "ZPOPMAX k 2", "ZPOPMAX"]),
    (
        "zmpop",
        &[
            "ZMPOP 1 k MIN",
            "ZMPOP 2 a b MAX COUNT 3",
            "ZMPOP 3 a b MIN",
            "ZMPOP 0 a MIN",
            "ZMPOP -1 a MIN",
            "ZMPOP x a MIN",
            "ZMPOP 1 a",
        ],
    ),
    (
        "bzpopmin",
        &["BZPOPMIN k 0", "BZPOPMIN a b 1.5", "BZPOPMIN k"],
    ),
    (
        "bzpopmax",
        &["BZPOPMAX k 0", "BZPOPMAX a b 0", "BZPOPMAX k"],
    ),
    (
        "bzmpop",
        &[
            "BZMPOP 0 1 k MIN",
            "BZMPOP 1 2 a b MAX COUNT 3",
            "BZMPOP 0 3 a b MIN",
            "BZMPOP 0 0 a MIN",
            "BZMPOP 0 1",
        ],
    ),
    (
        "zrandmember",
        &["ZRANDMEMBER k", "ZRANDMEMBER k 2 WITHSCORES", "ZRANDMEMBER"],
    ),
    (
        "zunion",
        &[
            "ZUNION 2 a b",
            "ZUNION 1 a WITHSCORES",
            "ZUNION 3 a b",
            "ZUNION 0 a",
            "ZUNION x a",
        ],
    ),
    ("zinter", &["ZINTER 2 a b", "ZINTER 2 a", "ZINTER -1 a"]),
    ("zdiff", &["ZDIFF 2 a b", "ZDIFF 2 a", "ZDIFF 0 a"]),
    (
        "zunionstore",
        &[
            "ZUNIONSTORE d 2 a b",
            "ZUNIONSTORE d 1 a WEIGHTS 2",
            "ZUNIONSTORE d 3 a b",
            "ZUNIONSTORE d 0 a",
            "ZUNIONSTORE d x a",
            "ZUNIONSTORE d 1",
        ],
    ),
    ("zinterstore", &["ZINTERSTORE d 2 a b", "ZINTERSTORE d 2 a"]),
    ("zdiffstore", &["ZDIFFSTORE d 2 a b", "ZDIFFSTORE d 2 a"]),
    (
        "zintercard",
        &[
            "ZINTERCARD 2 a b",
            "ZINTERCARD 1 a LIMIT 1",
            "ZINTERCARD 3 a b",
            "ZINTERCARD 0 a",
        ],
    ),
    ("zscan", &["ZSCAN k 0", "ZSCAN k 0 COUNT 1", "ZSCAN k"]),
    ("dump", &["DUMP k", "DUMP", "DUMP k x"]),
    ("setbit", &["SETBIT k 7 1", "SETBIT k 7"]),
    ("getbit", &["GETBIT k 7", "GETBIT k"]),
    (
        "bitcount",
        &["BITCOUNT k", "BITCOUNT k 0 -1 BIT", "BITCOUNT"],
    ),
    ("bitpos", &["BITPOS k 1", "BITPOS k 0 1 2 BYTE", "BITPOS k"]),
    (
        "bitop",
        &["BITOP AND d a b", "BITOP NOT d a", "BITOP AND d"],
    ),
    // HyperLogLog. (`PFMERGE d` is valid, yet its key specs call it invalid: COMMAND
    // GETKEYS answers the error.)
    ("pfadd", &["PFADD k", "PFADD k a b", "PFADD"]),
    ("pfcount", &["PFCOUNT k", "PFCOUNT a b c", "PFCOUNT"]),
    ("pfmerge", &["PFMERGE d", "PFMERGE d a b", "PFMERGE"]),
    (
        "pfdebug",
        &[
            "PFDEBUG GETREG k",
            "PFDEBUG x k",
            "PFDEBUG GETREG",
            "PFDEBUG a b c",
        ],
    ),
    ("pfselftest", &["PFSELFTEST", "PFSELFTEST x"]),
    // Geo.
    (
        "geoadd",
        &[
            "GEOADD k 1 2 m",
            "GEOADD k NX CH 1 2 m 3 4 n",
            "GEOADD k 1 2",
        ],
    ),
    (
        "geodist",
        &["GEODIST k a b", "GEODIST k a b km", "GEODIST k a"],
    ),
    ("geohash", &["GEOHASH k a b", "GEOHASH k", "GEOHASH"]),
    ("geopos", &["GEOPOS k a b", "GEOPOS k", "GEOPOS"]),
    (
        "georadius",
        &[
            "GEORADIUS k 1 2 3 m",
            "GEORADIUS k 1 2 3 m STORE d",
            "GEORADIUS k 1 2 3 m STOREDIST d",
            "GEORADIUS k 1 2 3 m WITHDIST COUNT 1 ANY STORE d",
            "GEORADIUS k 1 2 3 m STORE a STOREDIST b",
            "GEORADIUS k 1 2 3 m STOREDIST a STORE b",
            "GEORADIUS k 1 2 3 m STORE a STORE b",
            "GEORADIUS k 1 2 3 m store",
            "GEORADIUS k 1 2 3 STORE d",
            "GEORADIUS k 1 2 3",
        ],
    ),
    (
        "georadius_ro",
        &[
            "GEORADIUS_RO k 1 2 3 m",
            "GEORADIUS_RO k 1 2 3 m STORE d",
            "GEORADIUS_RO k 1",
        ],
    ),
    (
        "georadiusbymember",
        &[
            "GEORADIUSBYMEMBER k m 3 km",
            "GEORADIUSBYMEMBER k m 3 km STORE d",
            "GEORADIUSBYMEMBER k m 3 km ASC STOREDIST d",
            "GEORADIUSBYMEMBER k STORE d km",
            "GEORADIUSBYMEMBER k m 3",
        ],
    ),
    (
        "georadiusbymember_ro",
        &[
            "GEORADIUSBYMEMBER_RO k m 3 km",
            "GEORADIUSBYMEMBER_RO k m 3 km STORE d",
            "GEORADIUSBYMEMBER_RO k m",
        ],
    ),
    (
        "geosearch",
        &[
            "GEOSEARCH k FROMMEMBER m BYRADIUS 1 km",
            "GEOSEARCH k FROMLONLAT 1 2 BYBOX 1 1 km ASC COUNT 1 ANY WITHDIST",
            "GEOSEARCH k FROMMEMBER m",
        ],
    ),
    (
        "geosearchstore",
        &[
            "GEOSEARCHSTORE d k FROMMEMBER m BYRADIUS 1 km",
            "GEOSEARCHSTORE d k FROMLONLAT 1 2 BYBOX 1 1 km STOREDIST",
            "GEOSEARCHSTORE d k FROMMEMBER m BYRADIUS",
            "GEOSEARCHSTORE d k",
        ],
    ),
    (
        "bitfield",
        &[
            "BITFIELD k GET u8 0",
            "BITFIELD k OVERFLOW SAT GET u8 0 GET i4 #1",
            "BITFIELD k GET u8 0 SET u8 0 1",
            "BITFIELD k INCRBY u8 0 1",
            "BITFIELD k GET u8",
            "BITFIELD k FOO",
            "BITFIELD k",
            "BITFIELD",
        ],
    ),
    (
        "sort",
        &[
            "SORT k",
            "SORT k STORE d",
            "SORT k BY w_* GET o_* STORE d ALPHA",
            "SORT k STORE d STORE e",
            "SORT k LIMIT 0 1 STORE d",
            "SORT k LIMIT STORE d",
            "SORT k GET STORE d",
            "SORT k BY STORE d",
            "SORT k STORE",
            "SORT",
        ],
    ),
    (
        "sort_ro",
        &[
            "SORT_RO k",
            "SORT_RO k BY w_* GET #",
            "SORT_RO k STORE d",
            "SORT_RO",
        ],
    ),
    (
        "lcs",
        &["LCS a b", "LCS a b IDX MINMATCHLEN 2 WITHMATCHLEN", "LCS a"],
    ),
    (
        "bitfield_ro",
        &["BITFIELD_RO k GET u8 0", "BITFIELD_RO k", "BITFIELD_RO"],
    ),
    (
        "restore",
        &[
            "RESTORE k 0 x",
            "RESTORE k 0 x REPLACE ABSTTL",
            "RESTORE k 0",
        ],
    ),
    // Streams.
    (
        "xadd",
        &[
            "XADD s * f v",
            "XADD s NOMKSTREAM MAXLEN ~ 5 LIMIT 2 1-1 f v",
            "XADD s",
        ],
    ),
    ("xlen", &["XLEN s", "XLEN"]),
    (
        "xrange",
        &["XRANGE s - +", "XRANGE s - + COUNT 1", "XRANGE s"],
    ),
    ("xrevrange", &["XREVRANGE s + -", "XREVRANGE s"]),
    ("xdel", &["XDEL s 1-1 2-2", "XDEL s"]),
    (
        "xtrim",
        &["XTRIM s MAXLEN 5", "XTRIM s MINID ~ 1 LIMIT 3", "XTRIM s"],
    ),
    (
        "xsetid",
        &["XSETID s 5-5", "XSETID s 5-5 ENTRIESADDED 3", "XSETID s"],
    ),
    (
        "xread",
        &[
            "XREAD COUNT 1 STREAMS s 0",
            "XREAD BLOCK 0 STREAMS a b c 0 0 0",
            "XREAD STREAMS a b 0",
            "XREAD STREAMS",
            "XREAD COUNT 1",
        ],
    ),
    (
        "xreadgroup",
        &[
            "XREADGROUP GROUP g c STREAMS s >",
            "XREADGROUP GROUP g c COUNT 2 NOACK BLOCK 5 STREAMS a b > >",
            "XREADGROUP GROUP g c STREAMS a",
            "XREADGROUP GROUP g",
        ],
    ),
    ("xgroup", &["XGROUP", "XGROUP NOPE s"]),
    (
        "xgroup|create",
        &[
            "XGROUP CREATE s g $",
            "XGROUP CREATE s g 0 MKSTREAM",
            "XGROUP CREATE s",
        ],
    ),
    ("xgroup|setid", &["XGROUP SETID s g 0", "XGROUP SETID s"]),
    (
        "xgroup|destroy",
        &["XGROUP DESTROY s g", "XGROUP DESTROY s"],
    ),
    (
        "xgroup|createconsumer",
        &["XGROUP CREATECONSUMER s g c", "XGROUP CREATECONSUMER s g"],
    ),
    (
        "xgroup|delconsumer",
        &["XGROUP DELCONSUMER s g c", "XGROUP DELCONSUMER s g"],
    ),
    ("xgroup|help", &["XGROUP HELP", "XGROUP HELP x"]),
    ("xack", &["XACK s g 1-1", "XACK s g 1-1 2-2", "XACK s g"]),
    (
        "xpending",
        &["XPENDING s g", "XPENDING s g IDLE 5 - + 10 c", "XPENDING s"],
    ),
    (
        "xclaim",
        &[
            "XCLAIM s g c 0 1-1",
            "XCLAIM s g c 0 1-1 JUSTID FORCE",
            "XCLAIM s g c",
        ],
    ),
    (
        "xautoclaim",
        &[
            "XAUTOCLAIM s g c 0 0",
            "XAUTOCLAIM s g c 0 0 COUNT 5 JUSTID",
            "XAUTOCLAIM s g",
        ],
    ),
    ("xinfo", &["XINFO", "XINFO NOPE s"]),
    (
        "xinfo|stream",
        &[
            "XINFO STREAM s",
            "XINFO STREAM s FULL COUNT 5",
            "XINFO STREAM",
        ],
    ),
    ("xinfo|groups", &["XINFO GROUPS s", "XINFO GROUPS"]),
    (
        "xinfo|consumers",
        &["XINFO CONSUMERS s g", "XINFO CONSUMERS s"],
    ),
    ("xinfo|help", &["XINFO HELP", "XINFO HELP x"]),
];

/// Invocations that name no command of the table, or name it oddly, compared with
/// redis-server as the samples are.
const ODD: &[&str] = &[
    "NOPE",
    "NOPE k",
    "'' k",
    // (Not "get\0x k": redis-server finds a command name with a NUL in it only when its
    // hash, seeded at random per process, lands in the bucket of the name before the
    // NUL — `strcasecmp` stops there — so its answer changes from one run to the next.)
    "object|encoding k",
    "GET|x k",
    "OBJECT ENCODING|x k",
    "COMMAND GETKEYS OBJECT ENCODING k",
];

/// What COMMAND GETKEYSANDFLAGS answers: the keys with their flags, or an error.
enum Want {
    Keys(&'static [(&'static str, &'static [&'static str])]),
    Error(&'static str),
    /// The arity error of COMMAND GETKEYS (or GETKEYSANDFLAGS) itself.
    GetkeysArity,
}

const ARITY: Want = Want::Error("ERR Invalid number of arguments specified for command");
const NO_KEYS: Want = Want::Error("ERR The command has no key arguments");
const INVALID_COMMAND: Want = Want::Error("ERR Invalid command specified");

/// The commands redis-server 7.0 lacks, with the replies their key specs give.
const OWN: &[(&str, &[(&str, Want)])] = &[
    (
        "goblin.claim",
        &[
            (
                "GOBLIN.CLAIM c r t 10",
                Want::Keys(&[("c", &["RW", "access", "insert"]), ("r", &["RO", "access"])]),
            ),
            (
                "goblin.claim c c t 10",
                Want::Keys(&[("c", &["RW", "access", "insert"]), ("c", &["RO", "access"])]),
            ),
            (
                "GOBLIN.CLAIM c r t 10 BLOCK 100",
                Want::Keys(&[("c", &["RW", "access", "insert"]), ("r", &["RO", "access"])]),
            ),
            (
                "GOBLIN.CLAIM c r t 10 x",
                Want::Keys(&[("c", &["RW", "access", "insert"]), ("r", &["RO", "access"])]),
            ),
            ("GOBLIN.CLAIM c r t", ARITY),
            ("GOBLIN.CLAIM", Want::GetkeysArity),
        ],
    ),
    (
        "goblin.publish",
        &[
            (
                "GOBLIN.PUBLISH c r t v 10",
                Want::Keys(&[("c", &["RW", "access", "update"]), ("r", &["OW", "update"])]),
            ),
            ("GOBLIN.PUBLISH c r t v", ARITY),
            ("GOBLIN.PUBLISH c r t v 10 x", ARITY),
        ],
    ),
    (
        "goblin.renew",
        &[
            (
                "GOBLIN.RENEW c t 10",
                Want::Keys(&[("c", &["RW", "access", "update"])]),
            ),
            ("GOBLIN.RENEW c t", ARITY),
        ],
    ),
    (
        "goblin.status",
        &[
            (
                "GOBLIN.STATUS c r",
                Want::Keys(&[("c", &["RO", "access"]), ("r", &["RO", "access"])]),
            ),
            ("GOBLIN.STATUS c", ARITY),
            ("GOBLIN.STATUS c r x", ARITY),
        ],
    ),
    (
        "goblin.cad",
        &[
            (
                "GOBLIN.CAD k v",
                Want::Keys(&[("k", &["RW", "access", "delete"])]),
            ),
            ("GOBLIN.CAD k", ARITY),
            ("GOBLIN.CAD k v x", ARITY),
        ],
    ),
    (
        "delifeq",
        &[
            (
                "DELIFEQ k v",
                Want::Keys(&[("k", &["RW", "access", "delete"])]),
            ),
            ("delifeq k", ARITY),
            ("DELIFEQ k v x", ARITY),
        ],
    ),
    (
        // VARIABLE_FLAGS: a plain delete (RM) without a condition, RW with one.
        "delex",
        &[
            ("DELEX k", Want::Keys(&[("k", &["RM", "delete"])])),
            ("DELEX k IFEQ v", Want::Keys(&[("k", &["RW", "delete"])])),
            ("DELEX k ifne v", Want::Keys(&[("k", &["RW", "delete"])])),
            ("DELEX k IFDEQ d", Want::Keys(&[("k", &["RW", "delete"])])),
            ("DELEX k NOPE", Want::Keys(&[("k", &["RM", "delete"])])),
            ("DELEX", Want::GetkeysArity),
        ],
    ),
    (
        "client|setinfo",
        &[
            ("CLIENT SETINFO lib-name x", NO_KEYS),
            ("CLIENT SETINFO", NO_KEYS),
        ],
    ),
    (
        "cluster|myshardid",
        &[
            ("CLUSTER MYSHARDID", NO_KEYS),
            ("CLUSTER MYSHARDID x", NO_KEYS),
        ],
    ),
];

/// Commands redis-server 7.0 has and goblin-server does not: Goblin looks up its own
/// table, so they are invalid commands to it.
const ABSENT: &[&str] = &[];

/// The words of a sample (`''` is the empty argument).
fn words(line: &str) -> Vec<&[u8]> {
    line.split(' ')
        .map(|w| if w == "''" { &b""[..] } else { w.as_bytes() })
        .collect()
}

/// `COMMAND <sub> <words of line>`.
fn getkeys_args<'a>(sub: &'a str, line: &'a str) -> Vec<&'a [u8]> {
    let mut args = vec![&b"COMMAND"[..], sub.as_bytes()];
    args.extend(words(line));
    args
}

/// The reply `want` makes to COMMAND `sub`, in RESP3 or RESP2.
fn encode(want: &Want, sub: &str, resp3: bool) -> Vec<u8> {
    let with_flags = sub == "GETKEYSANDFLAGS";
    let mut out = String::new();
    match want {
        Want::Error(msg) => {
            let _ = write!(out, "-{msg}\r\n");
        }
        Want::GetkeysArity => {
            let sub = sub.to_lowercase();
            let _ = write!(
                out,
                "-ERR wrong number of arguments for 'command|{sub}' command\r\n"
            );
        }
        Want::Keys(keys) => {
            let _ = write!(out, "*{}\r\n", keys.len());
            for (key, flags) in *keys {
                if with_flags {
                    out.push_str("*2\r\n");
                }
                let _ = write!(out, "${}\r\n{key}\r\n", key.len());
                if with_flags {
                    let _ = write!(out, "{}{}\r\n", if resp3 { '~' } else { '*' }, flags.len());
                    for flag in *flags {
                        let _ = write!(out, "+{flag}\r\n");
                    }
                }
            }
        }
    }
    out.into_bytes()
}

/// Every command and subcommand goblin-server's `COMMAND` lists, by full lowercase name.
fn goblin_commands(raw: &mut Raw) -> Vec<String> {
    let all = raw.cmd(&[b"COMMAND"]);
    let Ok(Some((Frame::Array(entries), _))) = parse_reply(&all) else {
        panic!("COMMAND: {}", show(&all))
    };
    let mut names = Vec::new();
    for entry in &entries {
        let Frame::Array(fields) = entry else {
            panic!("COMMAND entry")
        };
        let (Some(Frame::Bulk(name)), Some(Frame::Array(subs))) = (fields.first(), fields.get(9))
        else {
            panic!("COMMAND entry fields")
        };
        names.push(String::from_utf8_lossy(name).into_owned());
        for sub in subs {
            let Frame::Array(sub_fields) = sub else {
                panic!("subcommand")
            };
            let Some(Frame::Bulk(sub_name)) = sub_fields.first() else {
                panic!("subcommand name")
            };
            names.push(String::from_utf8_lossy(sub_name).into_owned());
        }
    }
    names
}

/// Whether redis-server has the command (`COMMAND INFO` does not answer nil).
fn redis_has(redis: &mut Raw, name: &str) -> bool {
    redis.cmd(&[b"COMMAND", b"INFO", name.as_bytes()]) != b"*1\r\n$-1\r\n"
}

/// One connection to each server, in one protocol version.
struct Pair {
    g: Raw,
    r: Raw,
    resp3: bool,
}

impl Pair {
    fn new(goblin: &Server, redis: &Server, resp3: bool) -> Pair {
        let (mut g, mut r) = (goblin.raw(), redis.raw());
        if resp3 {
            // The HELLO replies differ (server name, version): not compared.
            g.cmd(&[b"HELLO", b"3"]);
            r.cmd(&[b"HELLO", b"3"]);
        }
        Pair { g, r, resp3 }
    }

    /// Sends `line` as GETKEYS and GETKEYSANDFLAGS to both; records differences.
    fn compare(&mut self, line: &str, failures: &mut Vec<String>) -> usize {
        for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
            let args = getkeys_args(sub, line);
            let want = self.r.cmd(&args);
            let got = self.g.cmd(&args);
            if got != want {
                failures.push(format!(
                    "COMMAND {sub} {} (RESP{}):\n  goblin: {}\n  redis:  {}",
                    show(line.as_bytes()),
                    if self.resp3 { 3 } else { 2 },
                    show(&got),
                    show(&want)
                ));
            }
        }
        2
    }

    /// Sends `line` as GETKEYS and GETKEYSANDFLAGS to goblin-server; records where its
    /// replies are not `want`'s.
    fn expect(&mut self, line: &str, want: &Want, failures: &mut Vec<String>) -> usize {
        for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
            let want_bytes = encode(want, sub, self.resp3);
            let got = self.g.cmd(&getkeys_args(sub, line));
            if got != want_bytes {
                failures.push(format!(
                    "COMMAND {sub} {} (RESP{}):\n  goblin: {}\n  wanted: {}",
                    show(line.as_bytes()),
                    if self.resp3 { 3 } else { 2 },
                    show(&got),
                    show(&want_bytes)
                ));
            }
        }
        2
    }
}

/// Every command in Goblin's table has samples, and they answer as redis-server 7.0
/// answers them (or, for commands it lacks, as their key specs say), in RESP2 and RESP3.
#[test]
fn getkeys_matches_redis_for_every_command() {
    let goblin = Server::goblin_threads(default_threads());
    let redis = Server::redis();
    let mut g = goblin.raw();
    let mut r = redis.raw();
    let names = goblin_commands(&mut g);
    assert!(names.len() > 80, "{names:?}");

    let mut problems = Vec::new();
    for name in &names {
        let sampled = SAMPLES.iter().any(|(n, _)| n == name);
        let own = OWN.iter().any(|(n, _)| n == name);
        match (sampled, own, redis_has(&mut r, name)) {
            (false, false, true) => problems.push(format!(
                "{name} has no COMMAND GETKEYS samples: add them to SAMPLES in getkeys.rs"
            )),
            (false, false, false) => problems.push(format!(
                "{name} has no COMMAND GETKEYS samples: it is not in redis-server 7.0, so add \
                 its expected replies to OWN in getkeys.rs"
            )),
            (true, _, false) => problems.push(format!(
                "{name} is not in redis-server 7.0: move its samples to OWN, with expected replies"
            )),
            (false, true, true) => problems.push(format!(
                "{name} is in redis-server 7.0: compare it, in SAMPLES"
            )),
            _ => {}
        }
    }
    let sampled = SAMPLES.iter().map(|(n, _)| *n);
    for name in sampled.chain(OWN.iter().map(|(n, _)| *n)) {
        if !names.iter().any(|n| n == name) {
            problems.push(format!("{name} has samples but is not in goblin's table"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    let mut failures = Vec::new();
    let mut checks = 0;
    for resp3 in [false, true] {
        let mut pair = Pair::new(&goblin, &redis, resp3);
        for (_, lines) in SAMPLES {
            for line in *lines {
                checks += pair.compare(line, &mut failures);
            }
        }
        for line in ODD {
            checks += pair.compare(line, &mut failures);
        }
        for (_, samples) in OWN {
            for (line, want) in *samples {
                checks += pair.expect(line, want, &mut failures);
            }
        }
        for line in ABSENT {
            checks += pair.expect(line, &INVALID_COMMAND, &mut failures);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checks} replies differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Long invocations: every key of a long DEL, MGET, MSET (odd and even), and key names
/// that are long or hold any byte.
#[test]
fn getkeys_of_long_invocations_matches_redis() {
    let goblin = Server::goblin_threads(default_threads());
    let redis = Server::redis();
    let mut g = goblin.raw();
    let mut r = redis.raw();
    let keys: Vec<Vec<u8>> = (0..1001).map(|i| format!("key:{i}").into_bytes()).collect();
    let long_key = vec![b'k'; 70_000];
    let binary_key: Vec<u8> = (0..=255).collect();
    let mut invocations: Vec<Vec<&[u8]>> = Vec::new();
    for name in ["DEL", "MGET", "EXISTS", "MSET", "MSETNX", "TOUCH", "UNLINK"] {
        for n in [1000, 1001] {
            let mut args = vec![name.as_bytes()];
            args.extend(keys[..n].iter().map(Vec::as_slice));
            invocations.push(args);
        }
    }
    invocations.push(vec![b"GET", &long_key]);
    invocations.push(vec![b"SET", &binary_key, b"v", b"GET"]);
    invocations.push(vec![b"RENAME", &binary_key, &long_key]);
    for args in &invocations {
        for sub in [&b"GETKEYS"[..], b"GETKEYSANDFLAGS"] {
            let mut full = vec![&b"COMMAND"[..], sub];
            full.extend(args.iter().copied());
            let want = r.cmd(&full);
            let got = g.cmd(&full);
            assert!(
                got == want,
                "COMMAND {} {} … ({} arguments) differs",
                show(sub),
                show(args[0]),
                args.len()
            );
        }
    }
}

/// COMMAND HELP lists GETKEYS and GETKEYSANDFLAGS as redis-server 7.0 does: its text is
/// redis-server's, less the entry of COMMAND LIST, which Goblin lacks.
#[test]
fn command_help_lists_getkeys_as_redis_does() {
    let goblin = Server::goblin_threads(default_threads());
    let redis = Server::redis();
    let lines = |reply: &[u8]| -> Vec<Vec<u8>> {
        let Ok(Some((Frame::Array(items), _))) = parse_reply(reply) else {
            panic!("COMMAND HELP: {}", show(reply))
        };
        items
            .into_iter()
            .map(|f| match f {
                Frame::Simple(s) => s.to_vec(),
                other => panic!("COMMAND HELP line {other:?}"),
            })
            .collect()
    };
    let got = lines(&goblin.raw().cmd(&[b"COMMAND", b"HELP"]));
    let mut want = lines(&redis.raw().cmd(&[b"COMMAND", b"HELP"]));
    let list = want.iter().position(|l| l.starts_with(b"LIST")).unwrap();
    want.remove(list);
    while want.get(list).is_some_and(|l| l.starts_with(b" ")) {
        want.remove(list);
    }
    let show_all = |ls: &[Vec<u8>]| ls.iter().map(|l| show(l)).collect::<Vec<_>>().join("\n");
    assert_eq!(show_all(&got), show_all(&want));
    assert!(got.iter().any(|l| l.starts_with(b"GETKEYSANDFLAGS")));
}
