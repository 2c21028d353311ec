import { MemoryTraits } from "../../src/store/memory/traits.js";
import { MemoryNodes } from "../../src/store/memory/nodes.js";
import { openStore } from "../../src/store/open.js";
import { expect } from "chai";
import { bridgeApp } from "../helpers/app.js";
import { ShardCatalog } from "../../src/bridge/shards/catalog.js";
import { MemoryLeases } from "../../src/store/memory/leases.js";
import { Store } from "../../src/store/store.js";
import { call, listen, testAuthority } from "../helpers/http.js";
import { TestRedisServer } from "../helpers/redis-server.js";

/**
 * A store that starts empty cannot tell a new shard from one whose lease it lost while
 * the holder may still be acting; it grants no lease on a shard it has no history of
 * until one TTL after it started.
 */
describe("Lease recovery after the store started empty", function () {
  this.timeout(20_000);

  it("memory: a just-created store answers 'recovering' with the wait, over the API too", async () => {
    // Its own clock, moved by the test: the wait it names is exact.
    let nowUs = 1_800_000_000_000_000;
    const store = new Store(new MemoryLeases(() => nowUs), new MemoryNodes(), new MemoryTraits());
    const refused = await store.acquire({ shard: "s1", agent: "a", ttlMs: 6000 });
    expect(refused).to.include({ ok: false, reason: "recovering", current: null, retryAfterMs: 6000 });
    nowUs += 2_500_000;
    const later = await store.acquire({ shard: "s1", agent: "a", ttlMs: 6000 });
    expect(later, "2.5 s on").to.include({ ok: false, reason: "recovering", retryAfterMs: 3500 });

    const catalog = new ShardCatalog([{ name: "s1", description: "", lease_ttl_ms: 6000 }]);
    const { url, close } = await listen(bridgeApp(store, { authority: testAuthority(), catalog }));
    try {
      const answer = await call(`${url}/v1/shards/s1/lease`, "POST", { agent: "a" });
      expect(answer.status).to.equal(409);
      expect(answer.body.errors[0].code).to.equal("shardbridge.lease.recovering");
      expect(answer.body.errors[0].detail).to.match(/retry in 3500 ms/);
    } finally {
      await close();
    }
    nowUs += 3_500_000;
    expect(
      await store.acquire({ shard: "s1", agent: "a", ttlMs: 6000 }),
      "one TTL after it started",
    ).to.include({
      ok: true,
      holder: "a",
    });
  });

  it("redis: a just-started redis-server refuses, then grants once one TTL has passed", async () => {
    const server = await TestRedisServer.start();
    const store = await openStore(server.url);
    try {
      const started = performance.now();
      const first = await store.acquire({ shard: "s1", agent: "a", ttlMs: 1000 });
      expect(first).to.include({ ok: false, reason: "recovering" });
      let granted = first;
      while (!granted.ok && performance.now() - started < 5000) {
        await new Promise((r) => setTimeout(r, 50));
        granted = await store.acquire({ shard: "s1", agent: "a", ttlMs: 1000 });
      }
      expect(granted.ok, "granted within 5 s").to.equal(true);
      // Redis reports uptime in whole seconds, so the wait is between one TTL and one TTL
      // plus 2 s from the start (which was a moment before the first attempt).
      expect(performance.now() - started).to.be.within(800, 3500);
    } finally {
      await store.close();
      await server.stop();
    }
  });

  it("redis: the wait it names is exact: it shrinks with time, and a client that sleeps it is granted", async () => {
    const server = await TestRedisServer.start();
    const store = await openStore(server.url);
    const ask = async () => {
      const outcome = await store.acquire({ shard: "s1", agent: "a", ttlMs: 2000 });
      return { outcome, at: performance.now() };
    };
    try {
      const first = await ask();
      expect(first.outcome).to.include({ ok: false, reason: "recovering" });
      await new Promise((r) => setTimeout(r, 300));
      const second = await ask();
      const wait = (o: typeof first.outcome) => (o.ok ? 0 : o.retryAfterMs!);
      // A wait that moved in whole seconds would differ by 0 or 1000 ms here.
      expect(wait(first.outcome) - wait(second.outcome)).to.be.closeTo(second.at - first.at, 60);
      // Sleeping exactly the named wait (plus a round trip's slack) gets the lease; a little less does not.
      await new Promise((r) => setTimeout(r, Math.max(0, wait(second.outcome) - 150)));
      expect((await ask()).outcome.ok, "granted 150 ms before the named wait").to.equal(false);
      await new Promise((r) => setTimeout(r, 170));
      expect((await ask()).outcome.ok, "granted once the named wait is over").to.equal(true);
    } finally {
      await store.close();
      await server.stop();
    }
  });
});
