import { expect } from "chai";
import { bridgeApp } from "../helpers/app.js";
import { backendsUnderTest, useApp } from "../helpers/backends.js";
import { exampleInspector, readExample } from "../helpers/examples.js";
import { call, postWebhook, TEST_TOKENS, testAuthority, wholeNode } from "../helpers/http.js";

const NODE = "6a0e1d2c-b4a5-4697-8877-665544332211";
const inspection = readExample("inspection-result.json");

/**
 * Nothing a client sends may wedge a node's inspections for good (issue #31): an order
 * that cannot be meant is refused before anything is written, and an operator can forget
 * what was remembered — orders, traits — through one audited admin route.
 */
for (const backend of backendsUnderTest()) {
  describe(`Inspection orders and the operator's reset: ${backend.name}`, () => {
    const ctx = useApp(backend, (store) =>
      bridgeApp(store, { authority: testAuthority(), inspector: exampleInspector() }),
    );
    const traits = async () => (await call(`${ctx.base}/v1/nodes/${NODE}/traits`, "GET")).body;
    const inspected = (order: { finished_at: string } | { sequence: number }) => ({
      kind: "inspection",
      node: NODE,
      ...order,
      data: inspection,
    });
    // Each post its own delivery: a byte-identical signed request sent again within the
    // same second is a replay of the first (its answer again), which is not what these ask.
    let sent = 0;
    const post = (payload: unknown) => postWebhook(ctx.base, payload, { delivery: `orders-${++sent}` });
    const reset = (body: unknown, token: string = TEST_TOKENS.admin) =>
      call(`${ctx.base}/v1/nodes/${NODE}/traits/reset`, "POST", body, token);

    beforeEach(async () => {
      await call(`${ctx.base}/v1/nodes/${NODE}`, "PUT", wholeNode({ shard: "rack-a" }));
      await ctx.store.traits.commit(NODE, 0, {
        holders: { COMPUTE_NODE: "compute" },
        generation: 1,
        lastOrder: {},
      });
    });

    it("a sequence that no clock can mean (the largest integer, a time in µs) is refused, naming it, and nothing is written", async () => {
      const before = await traits();
      for (const sequence of [Number.MAX_SAFE_INTEGER, Date.now() * 1000, Date.now() + 301_000]) {
        const refused = await postWebhook(ctx.base, inspected({ sequence }), { delivery: `big-${sequence}` });
        expect(refused.status, String(sequence)).to.equal(400);
        expect(refused.body.errors[0].field).to.equal("sequence");
        expect(refused.body.errors[0].detail).to.match(/ahead of the bridge's clock/);
      }
      expect(await traits()).to.deep.equal(before);
      // The later real inspections apply: a counter, then a time in ms.
      expect((await post(inspected({ sequence: 7 }))).status).to.equal(200);
      const now = new Date().toISOString();
      expect((await post(inspected({ finished_at: now }))).status).to.equal(200);
    });

    it("a node wedged by an order within the skew is repaired by forgetting its orders: the next inspection applies", async () => {
      // An inspector whose clock runs 200 s ahead: accepted (within the 300 s allowed)...
      const ahead = new Date(Date.now() + 200_000).toISOString();
      expect((await post(inspected({ finished_at: ahead }))).status).to.equal(200);
      // ...after which the honest inspections of the next 200 s are refused as stale.
      const honest = inspected({ finished_at: new Date().toISOString() });
      expect((await post(honest)).body.errors[0].code).to.equal("shardbridge.traits.stale");

      // Not an admin's: refused, nothing forgotten.
      expect((await reset({ order: true }, TEST_TOKENS.inspector)).status).to.equal(403);
      expect((await post(honest)).status).to.equal(409);
      // Nothing asked for: a 400 naming the field, nothing written.
      const generation = (await traits()).generation;
      const empty = await reset({});
      expect(empty.status).to.equal(400);
      expect(empty.body.errors[0]).to.include({ field: "order" });
      expect((await reset({ order: "yes" })).status).to.equal(400);
      expect((await traits()).generation).to.equal(generation);

      const repaired = await reset({ order: true });
      expect(repaired.status).to.equal(200);
      expect(repaired.body).to.deep.include({ node: NODE, applied: [] });
      expect(repaired.body.forgotten).to.deep.equal({ inspector: Date.parse(ahead) });
      // The traits stay; the honest inspection applies again (nothing to change).
      expect((await traits()).traits.map((t: { name: string }) => t.name)).to.include("COMPUTE_NODE");
      expect((await post(honest)).status).to.equal(200);
    });

    it("resetting traits removes every trait the node holds, whoever holds it, as one change to the shard's feed", async () => {
      const applied = await post(inspected({ finished_at: new Date().toISOString() }));
      const held = ["COMPUTE_NODE", ...applied.body.applied.map((d: string) => d.slice(1))].sort();
      const answer = await reset({ traits: true });
      expect(answer.status).to.equal(200);
      expect(answer.body.applied).to.deep.equal(held.map((t) => `-${t}`));
      // The order stays: the same inspection again is stale.
      expect(answer.body.forgotten).to.deep.equal({});
      expect(await traits()).to.deep.include({ traits: [], generation: answer.body.generation });
      const feed = await ctx.store.traits.readFeed("rack-a", 100);
      expect(feed.entries.at(-1)).to.deep.include({ node: NODE, deltas: held.map((t) => `-${t}`) });
      // Nothing more to reset: answered, nothing committed.
      const again = await reset({ traits: true });
      expect(again.body).to.deep.include({ applied: [], generation: answer.body.generation });
      expect(
        (
          await call(`${ctx.base}/v1/nodes/00000000-0000-4000-8000-0000000000ff/traits/reset`, "POST", {
            order: true,
          })
        ).status,
      ).to.equal(404);
    });

    it("deleting a node keeps its traits and orders: registered again, it has them (reset is how to forget)", async () => {
      const finished = new Date().toISOString();
      await post(inspected({ finished_at: finished }));
      const before = await traits();
      expect((await call(`${ctx.base}/v1/nodes/${NODE}`, "DELETE")).status).to.equal(204);
      await call(`${ctx.base}/v1/nodes/${NODE}`, "PUT", wholeNode({ shard: "rack-a" }));
      expect(await traits()).to.deep.equal(before);
      expect((await post(inspected({ finished_at: finished }))).status).to.equal(409);
    });
  });
}
