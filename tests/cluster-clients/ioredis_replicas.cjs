// ioredis' Cluster with scaleReads "slave" against a cluster of three masters with a
// replica each (Goblin's, or redis-server's as the check of this script itself): writes
// to the masters, reads served by the replicas, then a manual failover (CLUSTER FAILOVER
// on a replica) while the client goes on: its writes follow the new master, nothing
// written before is lost, and the old master becomes the new one's replica.
// Usage: node ioredis_replicas.cjs HOST:PORT goblin|redis IOREDIS_DIR
const assert = require("assert/strict");
const [addr, kind, ioredisDir] = process.argv.slice(2);
const { Cluster, default: Redis } = require(ioredisDir);
const [host, port] = [addr.slice(0, addr.lastIndexOf(":")), Number(addr.slice(addr.lastIndexOf(":") + 1))];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, check, seconds = 30) {
  const deadline = Date.now() + seconds * 1000;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(100);
  }
  throw new Error(`${kind}: ${what} did not happen within ${seconds} s`);
}

// Every node of the cluster, each on a connection of its own, with its role.
async function roles(seed) {
  const text = await seed.call("CLUSTER", "NODES");
  return text.trim().split("\n").map((line) => {
    const [id, address, flags, master] = line.split(" ");
    const [h, p] = address.split("@")[0].split(":");
    return { id, host: h, port: Number(p), replica: flags.includes("slave"), master };
  });
}

async function synced(seed) {
  for (const n of await roles(seed)) {
    const conn = new Redis({ host: n.host, port: n.port, lazyConnect: false });
    try {
      if (n.replica) {
        const info = await conn.info("replication");
        if (!info.includes("master_link_status:up")) return false;
      } else if ((await conn.call("WAIT", 1, 2000)) !== 1) {
        return false;
      }
    } catch (e) {
      // (The seed's view may lag a failover: asked again.)
      return false;
    } finally {
      conn.disconnect();
    }
  }
  return true;
}

async function main() {
  const seed = new Redis({ host, port });
  const c = new Cluster([{ host, port }], { scaleReads: "slave" });
  await c.ping();
  const keys = [...Array(200).keys()].map((i) => `k:${i}`);
  for (const [i, k] of keys.entries()) await c.set(k, `v${i}`);
  await until("every replica has its master's writes", () => synced(seed));
  // (CLUSTER SLOTS lists a replica once the nodes learned its offset from its pings.)
  const refresh = () => new Promise((resolve) => c.refreshSlotsCache(() => resolve()));
  await until("CLUSTER SLOTS lists every replica", async () => {
    await refresh();
    return c.nodes("slave").length === 3;
  }, 60);
  for (const [i, k] of keys.entries()) assert.equal(await c.get(k), `v${i}`);
  let served = 0;
  for (const r of c.nodes("slave")) {
    const m = /cmdstat_get:calls=(\d+)/.exec(await r.info("commandstats"));
    served += m ? Number(m[1]) : 0;
  }
  assert.ok(served >= keys.length, `the replicas served ${served} GETs of ${keys.length}`);

  // A manual failover of one master, while the client goes on.
  const nodes = await roles(seed);
  const replicaNode = nodes.find((n) => n.replica);
  const oldMaster = nodes.find((n) => n.id === replicaNode.master);
  const successor = new Redis({ host: replicaNode.host, port: replicaNode.port });
  const old = new Redis({ host: oldMaster.host, port: oldMaster.port });
  // (A manual failover is given up when the master's pause and offset do not reach the
  // replica within 5 s, as redis-server's CLUSTER_MF_TIMEOUT: on a busy machine, on
  // either server. Asked again, at most three times in all, each retry said.)
  for (let attempt = 1; ; attempt++) {
    if ((await successor.call("ROLE"))[0] === "master") break;
    assert.equal(await successor.call("CLUSTER", "FAILOVER"), "OK");
    try {
      await until("the replica becomes a master", async () => (await successor.call("ROLE"))[0] === "master", 15);
      break;
    } catch (e) {
      if (attempt === 3) throw e;
      console.error(`${kind}: CLUSTER FAILOVER given up (attempt ${attempt}), asked again`);
    }
  }
  await until("the old master becomes its replica", async () => (await old.call("ROLE"))[0] === "slave");
  for (const [i, k] of keys.entries()) await c.set(k, `w${i}`);
  await until("every replica has its new master's writes", () => synced(seed));
  await refresh();
  for (const [i, k] of keys.entries()) assert.equal(await c.get(k), `w${i}`);
  for (const conn of [seed, successor, old]) conn.disconnect();
  await c.quit();
  console.log(`ioredis Cluster with replicas against ${kind}: ok`);
}
main().catch((e) => { console.error(e); process.exit(1); });
