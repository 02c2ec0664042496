// ioredis' Cluster against a cluster (Goblin's, or redis-server's as the check of this
// script itself): strings, collections, pipelines and, on Goblin, GOBLIN.CLAIM.
// Usage: node ioredis_cluster.cjs HOST:PORT goblin|redis IOREDIS_DIR
const assert = require("assert/strict");
const [addr, kind, ioredisDir] = process.argv.slice(2);
const { Cluster } = require(ioredisDir);
const [host, port] = [addr.slice(0, addr.lastIndexOf(":")), Number(addr.slice(addr.lastIndexOf(":") + 1))];

async function main() {
  const c = new Cluster([{ host, port }], { scaleReads: "master" });
  await c.ping();
  await Promise.all(c.nodes("master").map((n) => n.flushall()));
  for (let i = 0; i < 300; i++) await c.set(`str:${i}`, `v${i}`);
  for (let i = 0; i < 300; i++) assert.equal(await c.get(`str:${i}`), `v${i}`);
  assert.equal(await c.incrby("counter", 42), 42);
  await c.mset("{tag}a", "1", "{tag}b", "2");
  assert.deepEqual(await c.mget("{tag}a", "{tag}b"), ["1", "2"]);
  await assert.rejects(c.mset("str:1", "x", "str:2", "y"), /CROSSSLOT/);
  assert.equal(await c.hset("h", "f1", "a", "f2", "b"), 2);
  assert.deepEqual(await c.hgetall("h"), { f1: "a", f2: "b" });
  assert.equal(await c.rpush("l", "a", "b"), 2);
  assert.deepEqual(await c.lrange("l", 0, -1), ["a", "b"]);
  assert.equal(await c.zadd("z", 1, "m1", 2, "m2"), 2);
  assert.deepEqual(await c.zrange("z", 0, -1), ["m1", "m2"]);
  const p = c.pipeline();
  for (let i = 0; i < 50; i++) p.set(`{p}k${i}`, i).get(`{p}k${i}`);
  const out = await p.exec();
  assert.deepEqual(out.filter((_, i) => i % 2 === 1).map(([e, v]) => v), [...Array(50).keys()].map(String));
  const nodes = c.nodes("master");
  assert.equal(nodes.length, 3);
  const sizes = await Promise.all(nodes.map((n) => n.dbsize()));
  assert.ok(sizes.every((n) => n > 0), String(sizes));
  if (kind === "goblin") {
    let won = 0;
    for (let i = 0; i < 500; i++) {
      const r = await c.call("GOBLIN.CLAIM", `{io${i}}:c`, `{io${i}}:r`, "t", 30);
      if (r === "CLAIMED") won++;
      assert.equal(await c.call("GOBLIN.CLAIM", `{io${i}}:c`, `{io${i}}:r`, "u", 30), null);
      assert.equal(await c.call("GOBLIN.PUBLISH", `{io${i}}:c`, `{io${i}}:r`, "t", "done", 60), 1);
      assert.equal(await c.call("GOBLIN.CLAIM", `{io${i}}:c`, `{io${i}}:r`, "v", 30), "done");
    }
    assert.equal(won, 500);
  }
  await c.quit();
  console.log(`ioredis Cluster against ${kind}: ok`);
}
main().catch((e) => { console.error(e); process.exit(1); });
