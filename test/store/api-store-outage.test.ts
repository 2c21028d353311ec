import { expect } from "chai";
import { bridgeApp } from "../helpers/app.js";
import { openStore } from "../../src/store/open.js";
import type { Store } from "../../src/store/store.js";
import { call, listen, testAuthority, TEST_TOKENS } from "../helpers/http.js";
import { TestRedisServer } from "../helpers/redis-server.js";

/** The store goes away under a running bridge (redis-server killed), then comes back. */
describe("Store outage over HTTP", function () {
  this.timeout(20_000);
  let server: TestRedisServer;
  let store: Store;
  let base: string;
  let close: () => Promise<void>;
  before(async () => {
    server = await TestRedisServer.start();
    store = await openStore(server.url, { commandTimeoutMs: 500 });
    ({ url: base, close } = await listen(bridgeApp(store, { authority: testAuthority() })));
  });
  after(async () => {
    await close();
    await store.close();
    await server.stop();
  });

  it("answers 503 shardbridge.store.unavailable and /readyz 503 while Redis is down, and recovers", async () => {
    expect((await call(`${base}/readyz`, "GET", undefined, null)).status).to.equal(200);
    await server.kill();
    const lease = await call(
      `${base}/v1/shards/s1/lease`,
      "POST",
      { agent: "compute-0" },
      TEST_TOKENS.agent("compute-0"),
    );
    expect(lease.status).to.equal(503);
    expect(lease.body.errors[0].code).to.equal("shardbridge.store.unavailable");
    expect((await call(`${base}/readyz`, "GET", undefined, null)).status).to.equal(503);
    expect((await call(`${base}/v1/nodes`, "GET")).status).to.equal(503);
    // An agent's first node list (no earlier list to go by): 503, and nothing left unhandled —
    // a promise of it no one awaited once crashed the bridge (Node ends on an unhandled
    // rejection), taking every shard's renews with it.
    const unhandled: unknown[] = [];
    const note = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", note);
    try {
      const list = await call(
        `${base}/v1/agents/compute-0/nodes?token=`,
        "GET",
        undefined,
        TEST_TOKENS.agent("compute-0"),
      );
      expect(list.status, JSON.stringify(list.body)).to.equal(503);
      await new Promise((r) => setTimeout(r, 100));
    } finally {
      process.off("unhandledRejection", note);
    }
    expect(unhandled.map(String)).to.deep.equal([]);

    await server.restart();
    const deadline = Date.now() + 10_000;
    let ready = 0;
    while (Date.now() < deadline && ready !== 200) {
      await new Promise((r) => setTimeout(r, 100));
      ready = (await call(`${base}/readyz`, "GET", undefined, null)).status;
    }
    expect(ready).to.equal(200);
    expect((await call(`${base}/v1/nodes`, "GET")).status).to.equal(200);
  });
});
