import { expect } from "chai";
import { BridgeClient } from "../src/agent/client.js";
import { createApp } from "../src/api/app.js";
import { ShardCatalog } from "../src/shards/definitions.js";
import { openStore } from "../src/store/open.js";
import type { Store } from "../src/store/store.js";
import { exampleInspector } from "./helpers/examples.js";
import { call, listen, postWebhook, TEST_TOKENS, testAuthority, wholeNode } from "./helpers/http.js";
import { acquireWhenReady } from "./helpers/leases.js";
import { TestRedisServer } from "./helpers/redis-server.js";

const NODE = "33333333-3333-4333-8333-333333333333";

/**
 * Two bridges on one redis-server (two apps, each with its own store connection, as two
 * `serve` processes would have) answer as one: a webhook delivery repeated to the other
 * bridge is answered once, and an agent's feed cursor moves the same whichever bridge it
 * reads and acknowledges through.
 */
describe("Several bridges on one Redis behave as one", function () {
  this.timeout(30_000);
  let server: TestRedisServer;
  const stores: Store[] = [];
  const bridges: Array<{ url: string; close: () => Promise<void> }> = [];

  before(async () => {
    server = await TestRedisServer.start();
    const catalog = new ShardCatalog([{ name: "rack", lease_ttl_ms: 1000 }] as never);
    for (let i = 0; i < 2; i++) {
      const store = await openStore(server.url);
      stores.push(store);
      bridges.push(
        await listen(
          createApp(store, { authority: testAuthority(), catalog, inspector: exampleInspector() }),
        ),
      );
    }
    const put = await call(`${bridges[0]!.url}/v1/nodes/${NODE}`, "PUT", wholeNode({ shard: "rack" }));
    expect(put.status).to.be.oneOf([200, 201]);
  });
  after(async () => {
    for (const b of bridges) await b.close();
    for (const s of stores) await s.close();
    await server.stop();
  });

  const traitsVia = async (i: number) =>
    (await call(`${bridges[i]!.url}/v1/nodes/${NODE}/traits`, "GET")).body as {
      traits: string[];
      generation: number;
    };

  it("a webhook delivery repeated to the other bridge is answered with the first answer, applied once", async () => {
    const payload = { kind: "deltas", node: NODE, deltas: ["+CUSTOM_SEEN_ONCE"] };
    const first = await postWebhook(bridges[0]!.url, payload, { delivery: "shared-1" });
    expect(first.status, JSON.stringify(first.body)).to.equal(200);
    const generation = (await traitsVia(1)).generation;
    const again = await postWebhook(bridges[1]!.url, payload, { delivery: "shared-1" });
    expect(again).to.deep.equal({ ...first, replay: true });
    expect((await traitsVia(0)).generation, "applied once").to.equal(generation);
  });

  it("the feed cursor is one: read and acknowledged through one bridge, the other goes on after it", async () => {
    const agent = (i: number) => new BridgeClient(bridges[i]!.url, TEST_TOKENS.agent("compute-0"));
    const token = await acquireWhenReady(agent(0), "rack", "compute-0");
    const before = await agent(0).readFeed("rack", token);
    if (before.entries.length > 0) await agent(0).ackFeed("rack", token, before.entries.at(-1)!.id);
    await postWebhook(
      bridges[1]!.url,
      { kind: "deltas", node: NODE, deltas: ["+CUSTOM_VIA_B"] },
      { delivery: "shared-2" },
    );
    const viaB = await agent(1).readFeed("rack", token);
    expect(viaB.entries.map((e) => e.deltas)).to.deep.equal([["+CUSTOM_VIA_B"]]);
    await agent(1).ackFeed("rack", token, viaB.entries[0]!.id);
    expect(
      (await agent(0).readFeed("rack", token)).entries,
      "nothing new through the first bridge",
    ).to.deep.equal([]);
  });
});
