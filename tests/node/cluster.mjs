// ioredis's Cluster client against a 3-master cluster made by
// `redis-cli --cluster create`: first with redis-server 7.0.15 as the
// nodes (the oracle), then with sluice-server, the same steps and checks.
// The client discovers the slots, writes and reads keys spread over every
// master (single commands, and a pipeline of one hash tag), then
// `redis-cli --cluster reshard` moves 2,000 slots while a writer keeps
// writing through the same client: it must follow the -MOVED/-ASK
// redirections, and every key must read back its last acknowledged value;
// a fresh client then sees the new slot map. What the steps saw (slot
// ranges, keys, replies, slots per node) must be the same on both kinds.
// Exits non-zero on any failure. The server binary comes from
// $SLUICE_SERVER, else target/debug/sluice-server.
import { spawn, execFileSync } from "node:child_process";
import { createServer, connect } from "node:net";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import path from "node:path";
import assert from "node:assert/strict";
import Redis from "ioredis";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const sluice = process.env.SLUICE_SERVER || path.join(root, "target/debug/sluice-server");
const redisServer = "/usr/bin/redis-server";
const redisCli = "/usr/bin/redis-cli";
for (const b of [sluice, redisServer, redisCli]) {
  if (!existsSync(b)) throw new Error(`${b} not found (scripts/test installs it)`);
}

const freePort = () =>
  new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const up = (port) =>
  new Promise((resolve) => {
    const c = connect(port, "127.0.0.1", () => {
      c.end();
      resolve(true);
    });
    c.on("error", () => resolve(false));
  });

const cli = (...args) =>
  execFileSync(redisCli, args, { encoding: "utf8", timeout: 120000, stdio: ["ignore", "pipe", "pipe"] });

async function waitFor(what, cond, ms = 60000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}`);
}

// Three masters of `bin`, each in a directory of its own.
async function startCluster(bin) {
  const dir = mkdtempSync(path.join(tmpdir(), "sluice-ioredis-cluster-"));
  const nodes = [];
  for (let i = 0; i < 3; i++) {
    const port = await freePort();
    const bus = await freePort();
    const ndir = path.join(dir, `n${i}`);
    execFileSync("mkdir", ["-p", ndir]);
    const conf = path.join(ndir, "node.conf");
    writeFileSync(
      conf,
      `port ${port}\nbind 127.0.0.1\ncluster-enabled yes\ncluster-port ${bus}\n` +
        `cluster-node-timeout 5000\ncluster-config-file nodes.conf\nsave ""\nappendonly no\n` +
        `dir ${ndir}\n`,
    );
    const proc = spawn(bin, [conf], { cwd: ndir, stdio: process.env.SLUICE_LOG ? "inherit" : "ignore" });
    nodes.push({ port, proc });
  }
  for (const n of nodes) await waitFor(`port ${n.port}`, () => up(n.port), 20000);
  const addrs = nodes.map((n) => `127.0.0.1:${n.port}`);
  const out = cli("--cluster", "create", ...addrs, "--cluster-replicas", "0", "--cluster-yes");
  assert.match(out, /\[OK\] All 16384 slots covered\./);
  await waitFor("the cluster to agree and be ok", async () => {
    for (const n of nodes) {
      const info = cli("-p", String(n.port), "CLUSTER", "INFO");
      if (!info.includes("cluster_state:ok")) return false;
    }
    try {
      return cli("--cluster", "check", addrs[0]).includes("[OK] All nodes agree about slots configuration.");
    } catch {
      return false;
    }
  });
  const stop = () => {
    for (const n of nodes) n.proc.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  };
  return { nodes, stop };
}

// The steps, against one kind of cluster; returns what is compared
// between the two kinds.
async function run(kind, bin) {
  const { nodes, stop } = await startCluster(bin);
  const client = new Redis.Cluster([{ host: "127.0.0.1", port: nodes[0].port }], {
    redisOptions: { connectTimeout: 5000 },
    clusterRetryStrategy: (n) => (n > 20 ? null : 100),
  });
  client.on("error", (e) => console.error(`ioredis (${kind}): ${e.message}`));
  const seen = {};
  try {
    // Discovery: three masters, every slot.
    await client.ping();
    assert.equal(client.nodes("master").length, 3, `${kind}: masters`);
    seen.slotsRanges = (await client.cluster("SLOTS")).length;

    // Keys on every master, single commands.
    for (let i = 0; i < 300; i++) assert.equal(await client.set(`k:${i}`, `v${i}`), "OK");
    for (let i = 0; i < 300; i++) assert.equal(await client.get(`k:${i}`), `v${i}`);
    const perNode = await Promise.all(client.nodes("master").map((n) => n.dbsize()));
    assert.ok(perNode.every((c) => c > 0), `${kind}: keys on every master ${perNode}`);
    seen.total = perNode.reduce((a, b) => a + b, 0);

    // A pipeline within one hash tag, and a multi-key command on it.
    const p = client.pipeline();
    for (let i = 0; i < 50; i++) p.set(`{tag}:${i}`, String(i));
    p.mget("{tag}:1", "{tag}:2", "{tag}:49");
    p.incrby("{tag}:1", 10);
    const res = await p.exec();
    seen.pipeline = res.map(([err, val]) => (err ? `ERR ${err.message}` : val)).slice(-2);
    assert.deepEqual(seen.pipeline, [["1", "2", "49"], 11]);
    // Keys of two slots in one command: the client refuses them itself
    // or the server answers CROSSSLOT, as with Redis.
    seen.crossslot = await client.mget("a", "b").then(
      () => "ok",
      (e) => e.message.split(" ")[0],
    );

    // A reshard under writes: the writer's client follows the
    // redirections; every key holds its last acknowledged value.
    const acked = new Map();
    let stopWriter = false;
    const errors = [];
    const writer = (async () => {
      for (let i = 0; !stopWriter; i++) {
        const key = `w:${i % 500}`;
        try {
          await client.set(key, String(i));
          acked.set(key, String(i));
        } catch (e) {
          errors.push(e.message);
        }
      }
    })();
    await sleep(200);
    const ids = nodes.map((n) => cli("-p", String(n.port), "CLUSTER", "MYID").trim());
    cli(
      "--cluster", "reshard", `127.0.0.1:${nodes[0].port}`,
      "--cluster-from", ids[0], "--cluster-to", ids[1],
      "--cluster-slots", "2000", "--cluster-yes",
    );
    await sleep(200);
    stopWriter = true;
    await writer;
    assert.deepEqual(errors, [], `${kind}: writes refused during the reshard`);
    assert.ok(acked.size === 500, `${kind}: the writer wrote every key`);
    for (const [key, val] of acked) assert.equal(await client.get(key), val, `${kind}: ${key}`);
    for (let i = 0; i < 300; i++) assert.equal(await client.get(`k:${i}`), `v${i}`);

    // A fresh client reads the new slot map: node 1 serves more slots.
    const fresh = new Redis.Cluster([{ host: "127.0.0.1", port: nodes[2].port }]);
    try {
      await fresh.ping();
      const slots = await fresh.cluster("SLOTS");
      const served = (port) =>
        slots.filter((s) => s[2][1] === port).reduce((a, s) => a + (s[1] - s[0] + 1), 0);
      seen.served = nodes.map((n) => served(n.port));
      assert.equal(seen.served.reduce((a, b) => a + b, 0), 16384);
      assert.equal(await fresh.get("k:7"), "v7");
    } finally {
      fresh.disconnect();
    }
    return seen;
  } finally {
    client.disconnect();
    stop();
  }
}

const timer = setTimeout(() => {
  console.error("ioredis cluster: timed out");
  process.exit(1);
}, 240000);
try {
  const want = await run("redis-server", redisServer);
  const got = await run("sluice-server", sluice);
  assert.deepEqual(got, want);
  console.log(`ioredis cluster: ok (${JSON.stringify(got)})`);
} catch (e) {
  console.error(e);
  process.exitCode = 1;
} finally {
  clearTimeout(timer);
}
