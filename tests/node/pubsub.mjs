// ioredis (Node.js) against a real sluice-server: subscribe, pattern
// subscribe, publish from another connection, keyspace notifications,
// unsubscribe. Exits non-zero on any failure. The server binary comes from
// $SLUICE_SERVER, else target/debug/sluice-server.
import { spawn } from "node:child_process";
import { createServer, connect } from "node:net";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";
import assert from "node:assert/strict";
import Redis from "ioredis";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const bin = process.env.SLUICE_SERVER || path.join(root, "target/debug/sluice-server");
if (!existsSync(bin)) throw new Error(`sluice-server not found at ${bin}`);

const freePort = () =>
  new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

const port = await freePort();
const server = spawn(bin, ["--port", String(port), "--bind", "127.0.0.1", "--threads", "2"], {
  stdio: process.env.SLUICE_LOG ? "inherit" : "ignore",
});
const timer = setTimeout(() => {
  console.error("timed out");
  server.kill();
  process.exit(1);
}, 20000);

// A promise for the next `count` events named `name` on `emitter`.
const next = (emitter, name, count = 1) =>
  new Promise((resolve) => {
    const got = [];
    const on = (...args) => {
      got.push(args);
      if (got.length === count) {
        emitter.off(name, on);
        resolve(got);
      }
    };
    emitter.on(name, on);
  });

// Waits until the server accepts connections.
for (let i = 0; ; i++) {
  const up = await new Promise((resolve) => {
    const c = connect(port, "127.0.0.1", () => {
      c.end();
      resolve(true);
    });
    c.on("error", () => resolve(false));
  });
  if (up) break;
  if (i > 500) throw new Error("sluice-server did not start");
  await new Promise((r) => setTimeout(r, 20));
}

let ok = false;
const opts = { port, host: "127.0.0.1", retryStrategy: (n) => (n > 50 ? null : 100) };
const sub = new Redis(opts);
const pub = new Redis(opts);
for (const c of [sub, pub]) c.on("error", (e) => console.error(`ioredis: ${e.message}`));
try {
  await pub.ping();
  assert.equal(await sub.subscribe("news", "sport"), 2);
  assert.equal(await sub.psubscribe("n*"), 3);
  assert.deepEqual(await pub.pubsub("NUMSUB", "news"), ["news", 1]);
  assert.equal(await pub.pubsub("NUMPAT"), 1);

  const messages = next(sub, "message", 2);
  const pmessages = next(sub, "pmessage", 1);
  assert.equal(await pub.publish("news", "hello"), 2);
  assert.equal(await pub.publish("sport", "goal"), 1);
  assert.deepEqual(await messages, [
    ["news", "hello"],
    ["sport", "goal"],
  ]);
  assert.deepEqual(await pmessages, [["n*", "news", "hello"]]);

  // Keyspace notifications reach a pattern subscriber.
  await pub.config("SET", "notify-keyspace-events", "KEA");
  const events = next(sub, "pmessage", 2);
  await sub.psubscribe("__keyevent@0__:*");
  await pub.set("node:k", "v");
  await pub.del("node:k");
  assert.deepEqual(
    (await events).map(([, ch, msg]) => [ch, msg]),
    [
      ["__keyevent@0__:set", "node:k"],
      ["__keyevent@0__:del", "node:k"],
    ],
  );
  await pub.config("SET", "notify-keyspace-events", "");

  // (ioredis waits for a count of 0 on a bare UNSUBSCRIBE, which never
  // comes while patterns remain, against Redis too: name them.)
  assert.equal(await sub.unsubscribe("news", "sport"), 2);
  assert.equal(await sub.punsubscribe("n*", "__keyevent@0__:*"), 0);
  // Back to normal mode: ordinary commands work on the same connection.
  assert.equal(await sub.ping(), "PONG");
  assert.equal(await pub.publish("news", "nobody"), 0);
  await sub.quit();
  await pub.quit();
  ok = true;
  console.log("ioredis pub/sub: ok");
} finally {
  clearTimeout(timer);
  sub.disconnect();
  pub.disconnect();
  server.kill();
  if (!ok) process.exitCode = 1;
}
